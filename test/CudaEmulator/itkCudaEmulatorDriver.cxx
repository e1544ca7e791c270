/*=========================================================================
 *
 *  Copyright NumFOCUS
 *
 *  Licensed under the Apache License, Version 2.0 (the "License");
 *  you may not use this file except in compliance with the License.
 *  You may obtain a copy of the License at
 *
 *         https://www.apache.org/licenses/LICENSE-2.0.txt
 *
 *  Unless required by applicable law or agreed to in writing, software
 *  distributed under the License is distributed on an "AS IS" BASIS,
 *  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 *  See the License for the specific language governing permissions and
 *  limitations under the License.
 *
 *=========================================================================*/

// The CUDA emulator's driver (test/CudaEmulator/README.md), built as libcuda.so.1: the functions of
// the CUDA driver API that the module calls. Device memory is host memory, every operation runs at
// once in the calling thread (a valid order of any stream program), and a module is a shared
// library from the emulated NVRTC whose entry points run a kernel's grid on the host's cores. The
// device reports an H200's limits (compute capability 9.0, 132 multiprocessors, 227 KB of shared
// memory a block), so that the planner chooses what it chooses on that GPU.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace nlm_emu
{
struct Launch
{
  unsigned Grid[3];
  unsigned Threads[3];
  unsigned SharedBytes;
  int      Workers;
};
} // namespace nlm_emu

namespace
{
using CUresult = int;
using CUdeviceptr = unsigned long long;
using LaunchFunction = void (*)(const nlm_emu::Launch *, void **);

constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kInvalidImage = 200;
constexpr CUresult kNoBinaryForGpu = 209;
constexpr CUresult kNotFound = 500;

constexpr int kMajor = 9; // compute capability
constexpr int kMinor = 0;
constexpr int kSharedPerBlock = 48 * 1024;
constexpr int kSharedPerBlockOptIn = 232448;
constexpr int kSharedPerMultiprocessor = 233472;

struct Module
{
  void * Library = nullptr;
};

struct Function
{
  LaunchFunction Launch = nullptr;
  int            MaxDynamicShared = kSharedPerBlock;
};

struct Event
{
  std::chrono::steady_clock::time_point When;
};

std::mutex                  g_Mutex;
std::map<uintptr_t, size_t> g_Allocations;
size_t                      g_Allocated = 0;

/** A number from the environment, or `fallback`. */
long long
EnvironmentNumber(const char * name, long long fallback)
{
  const char * v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::atoll(v) : fallback;
}

size_t
TotalMemory()
{
  return static_cast<size_t>(EnvironmentNumber("CUDA_EMULATOR_MEMORY_MB", 4096)) << 20;
}

int
DeviceCount()
{
  return static_cast<int>(EnvironmentNumber("CUDA_EMULATOR_DEVICES", 1));
}

/** The length of a 64-bit ELF file from its header: the section table is at its end. */
size_t
ElfLength(const unsigned char * image)
{
  Elf64_Ehdr header;
  std::memcpy(&header, image, sizeof(header));
  return static_cast<size_t>(header.e_shoff) + static_cast<size_t>(header.e_shnum) * header.e_shentsize;
}

bool
IsHostLibrary(const unsigned char * image)
{
  if (std::memcmp(image, ELFMAG, SELFMAG) != 0 || image[EI_CLASS] != ELFCLASS64)
  {
    return false;
  }
  Elf64_Ehdr header;
  std::memcpy(&header, image, sizeof(header));
  return header.e_machine == EM_X86_64 && header.e_type == ET_DYN;
}
} // namespace

extern "C"
{
  CUresult
  cuInit(unsigned int)
  {
    return kSuccess;
  }

  CUresult
  cuDriverGetVersion(int * version)
  {
    *version = 13000;
    return kSuccess;
  }

  CUresult
  cuGetErrorName(CUresult r, const char ** name)
  {
    switch (r)
    {
      case kSuccess:
        *name = "CUDA_SUCCESS";
        break;
      case kInvalidValue:
        *name = "CUDA_ERROR_INVALID_VALUE";
        break;
      case kOutOfMemory:
        *name = "CUDA_ERROR_OUT_OF_MEMORY";
        break;
      case kInvalidDevice:
        *name = "CUDA_ERROR_INVALID_DEVICE";
        break;
      case kInvalidImage:
        *name = "CUDA_ERROR_INVALID_IMAGE";
        break;
      case kNoBinaryForGpu:
        *name = "CUDA_ERROR_NO_BINARY_FOR_GPU";
        break;
      case kNotFound:
        *name = "CUDA_ERROR_NOT_FOUND";
        break;
      default:
        *name = "CUDA_ERROR_UNKNOWN";
    }
    return kSuccess;
  }

  CUresult
  cuGetErrorString(CUresult r, const char ** text)
  {
    return cuGetErrorName(r, text);
  }

  CUresult
  cuDeviceGetCount(int * count)
  {
    *count = DeviceCount();
    return kSuccess;
  }

  CUresult
  cuDeviceGet(int * device, int ordinal)
  {
    if (ordinal < 0 || ordinal >= DeviceCount())
    {
      return kInvalidDevice;
    }
    *device = ordinal;
    return kSuccess;
  }

  CUresult
  cuDeviceGetAttribute(int * value, int attribute, int)
  {
    switch (attribute)
    {
      case 8: // shared memory per block
        *value = kSharedPerBlock;
        return kSuccess;
      case 16: // multiprocessors
        *value = 132;
        return kSuccess;
      case 75: // compute capability
        *value = kMajor;
        return kSuccess;
      case 76:
        *value = kMinor;
        return kSuccess;
      case 81:
        *value = kSharedPerMultiprocessor;
        return kSuccess;
      case 97:
        *value = kSharedPerBlockOptIn;
        return kSuccess;
      default:
        return kInvalidValue;
    }
  }

  CUresult
  cuDeviceGetName(char * name, int length, int device)
  {
    const std::string n = "CUDA emulator device " + std::to_string(device) + " (host cores)";
    std::snprintf(name, static_cast<size_t>(length), "%s", n.c_str());
    return kSuccess;
  }

  CUresult
  cuDevicePrimaryCtxRetain(void ** context, int device)
  {
    static int contexts[64];
    *context = &contexts[device & 63];
    return kSuccess;
  }

  CUresult
  cuCtxPushCurrent_v2(void *)
  {
    return kSuccess;
  }

  CUresult
  cuCtxPopCurrent_v2(void ** context)
  {
    if (context != nullptr)
    {
      *context = nullptr;
    }
    return kSuccess;
  }

  CUresult
  cuModuleLoadData(Module ** module, const void * image)
  {
    const auto * bytes = static_cast<const unsigned char *>(image);
    if (!IsHostLibrary(bytes))
    {
      return kInvalidImage;
    }
    // A file of its own name: dlopen returns the library already loaded under a name it has seen.
    static std::atomic<unsigned long long> modules{ 0 };
    const char *                           tmp = std::getenv("TMPDIR");
    const std::string path = std::string((tmp != nullptr && *tmp != '\0') ? tmp : "/tmp") + "/nlm-cuda-emulator-" +
                             std::to_string(getpid()) + "-" + std::to_string(modules++) + ".so";
    const size_t length = ElfLength(bytes);
    const int    fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const bool   written = fd >= 0 && write(fd, bytes, length) == static_cast<ssize_t>(length);
    if (fd >= 0)
    {
      close(fd);
    }
    void * library = written ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
    unlink(path.c_str());
    if (library == nullptr)
    {
      return kInvalidImage;
    }
    // As on the GPU, code for sm_XY runs on compute capability 9.0 only with X == 9 and Y <= 0.
    const auto * architecture = static_cast<const int *>(dlsym(library, "nlm_emu_architecture"));
    if (architecture == nullptr || *architecture / 10 != kMajor || *architecture % 10 > kMinor)
    {
      dlclose(library);
      return kNoBinaryForGpu;
    }
    *module = new Module{ library };
    return kSuccess;
  }

  CUresult
  cuModuleGetFunction(Function ** function, Module * module, const char * name)
  {
    const std::string symbol = std::string("nlm_emu_launch_") + name;
    auto              launch = reinterpret_cast<LaunchFunction>(dlsym(module->Library, symbol.c_str()));
    if (launch == nullptr)
    {
      return kNotFound;
    }
    *function = new Function{ launch };
    return kSuccess;
  }

  CUresult
  cuFuncSetAttribute(Function * function, int attribute, int value)
  {
    if (attribute != 8 || value < 0 || value > kSharedPerBlockOptIn)
    {
      return kInvalidValue;
    }
    function->MaxDynamicShared = value;
    return kSuccess;
  }

  CUresult
  cuFuncGetAttribute(int * value, int attribute, Function * function)
  {
    switch (attribute)
    {
      case 4: // registers a thread: the most a block of 256 threads may take for two blocks a multiprocessor
        *value = 64;
        return kSuccess;
      case 8:
        *value = function->MaxDynamicShared;
        return kSuccess;
      default:
        return kInvalidValue;
    }
  }

  CUresult
  cuMemGetInfo_v2(size_t * free, size_t * total)
  {
    std::lock_guard<std::mutex> lock(g_Mutex);
    *total = TotalMemory();
    *free = (g_Allocated < *total) ? *total - g_Allocated : 0;
    return kSuccess;
  }

  CUresult
  cuMemAlloc_v2(CUdeviceptr * pointer, size_t bytes)
  {
    if (bytes == 0)
    {
      return kInvalidValue;
    }
    std::lock_guard<std::mutex> lock(g_Mutex);
    if (g_Allocated + bytes > TotalMemory())
    {
      return kOutOfMemory;
    }
    void * p = nullptr; // exactly `bytes`, so that an access beyond them is out of bounds, as for memcheck
    if (posix_memalign(&p, 256, bytes) != 0)
    {
      return kOutOfMemory;
    }
    // Device memory is not zeroed: NaNs show reads of cells no one wrote.
    std::memset(p, static_cast<int>(EnvironmentNumber("CUDA_EMULATOR_FILL", 0xff)), bytes);
    g_Allocations[reinterpret_cast<uintptr_t>(p)] = bytes;
    g_Allocated += bytes;
    *pointer = reinterpret_cast<uintptr_t>(p);
    return kSuccess;
  }

  CUresult
  cuMemFree_v2(CUdeviceptr pointer)
  {
    std::lock_guard<std::mutex> lock(g_Mutex);
    const auto                  it = g_Allocations.find(static_cast<uintptr_t>(pointer));
    if (it == g_Allocations.end())
    {
      return kInvalidValue;
    }
    g_Allocated -= it->second;
    g_Allocations.erase(it);
    std::free(reinterpret_cast<void *>(static_cast<uintptr_t>(pointer)));
    return kSuccess;
  }

  CUresult
  cuMemAllocHost_v2(void ** pointer, size_t bytes)
  {
    *pointer = std::malloc(std::max<size_t>(bytes, 1));
    return (*pointer != nullptr) ? kSuccess : kOutOfMemory;
  }

  CUresult
  cuMemHostRegister_v2(void *, size_t, unsigned int)
  {
    return kSuccess;
  }

  CUresult
  cuMemcpyHtoDAsync_v2(CUdeviceptr to, const void * from, size_t bytes, void *)
  {
    std::memcpy(reinterpret_cast<void *>(static_cast<uintptr_t>(to)), from, bytes);
    return kSuccess;
  }

  CUresult
  cuMemcpyDtoHAsync_v2(void * to, CUdeviceptr from, size_t bytes, void *)
  {
    std::memcpy(to, reinterpret_cast<const void *>(static_cast<uintptr_t>(from)), bytes);
    return kSuccess;
  }

  CUresult
  cuMemsetD8Async(CUdeviceptr to, unsigned char value, size_t bytes, void *)
  {
    std::memset(reinterpret_cast<void *>(static_cast<uintptr_t>(to)), value, bytes);
    return kSuccess;
  }

  CUresult
  cuLaunchKernel(Function * function,
                 unsigned   gridX,
                 unsigned   gridY,
                 unsigned   gridZ,
                 unsigned   threadsX,
                 unsigned   threadsY,
                 unsigned   threadsZ,
                 unsigned   sharedBytes,
                 void *,
                 void ** args,
                 void **)
  {
    const unsigned long long threads = 1ull * threadsX * threadsY * threadsZ;
    if (gridX == 0 || gridY == 0 || gridZ == 0 || gridY > 65535 || gridZ > 65535 || threads == 0 || threads > 1024 ||
        static_cast<int>(sharedBytes) > function->MaxDynamicShared)
    {
      return kInvalidValue;
    }
    const int workers =
      static_cast<int>(EnvironmentNumber("CUDA_EMULATOR_THREADS", std::max(1u, std::thread::hardware_concurrency())));
    const nlm_emu::Launch launch = { { gridX, gridY, gridZ }, { threadsX, threadsY, threadsZ }, sharedBytes, workers };
    function->Launch(&launch, args);
    return kSuccess;
  }

  CUresult
  cuStreamCreate(void ** stream, unsigned int)
  {
    *stream = new int(0);
    return kSuccess;
  }

  CUresult
  cuStreamCreateWithPriority(void ** stream, unsigned int, int)
  {
    *stream = new int(0);
    return kSuccess;
  }

  CUresult
  cuCtxGetStreamPriorityRange(int * least, int * greatest)
  {
    *least = 0;
    *greatest = -5;
    return kSuccess;
  }

  CUresult
  cuStreamSynchronize(void *)
  {
    return kSuccess;
  }

  CUresult
  cuStreamWaitEvent(void *, void *, unsigned int)
  {
    return kSuccess;
  }

  CUresult
  cuStreamDestroy_v2(void * stream)
  {
    delete static_cast<int *>(stream);
    return kSuccess;
  }

  CUresult
  cuEventCreate(Event ** event, unsigned int)
  {
    *event = new Event{ std::chrono::steady_clock::now() };
    return kSuccess;
  }

  CUresult
  cuEventRecord(Event * event, void *)
  {
    event->When = std::chrono::steady_clock::now();
    return kSuccess;
  }

  CUresult
  cuEventSynchronize(Event *)
  {
    return kSuccess;
  }

  CUresult
  cuEventQuery(Event *)
  {
    return kSuccess;
  }

  CUresult
  cuEventElapsedTime_v2(float * ms, Event * start, Event * end)
  {
    *ms = std::chrono::duration<float, std::milli>(end->When - start->When).count();
    return kSuccess;
  }

  CUresult
  cuEventDestroy_v2(Event * event)
  {
    delete event;
    return kSuccess;
  }
}
