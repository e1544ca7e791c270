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
#include "itkNonLocalMeansCUDABackend.h"
#include "itkNonLocalMeansNumerics.h"
#include "itkCudaDriver.h"
#include "itkNonLocalMeansParallelFor.h"

#include "itkProcessObject.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#if defined(__linux__)
#  include <sys/mman.h>
#endif

namespace itk
{
namespace
{
using cuda::CUdeviceptr;
using cuda::CUevent;
using cuda::CUfunction;
using cuda::CUmodule;
using cuda::CUresult;
using cuda::CUstream;
using ElementType = NonLocalMeansBackend::ElementType;

/** Asks Linux to back the pages of [data, data + bytes) that are not yet touched with huge pages
 * where it can (transparent huge pages in "madvise" mode): the first write to a new output buffer
 * then faults once per 2 MiB instead of once per 4 KiB. Only a hint; nothing changes elsewhere. */
void
AdviseHugePages(void * data, size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t huge = std::uintptr_t{ 2 } << 20;
  const std::uintptr_t     begin = (reinterpret_cast<std::uintptr_t>(data) + huge - 1) / huge * huge;
  const std::uintptr_t     end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / huge * huge;
  if (end > begin)
  {
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE); // a hint: failure is harmless
  }
#else
  (void)data;
  (void)bytes;
#endif
}

/** Parameter blocks of the kernels; the layout matches itkNonLocalMeansKernels.cu. */
struct NlmFastParams
{
  long long ySize[4];
  long long outSize[4];
  long long tiles[4];
  long long tileOffset;
  double    norm;
  double    invNorm;
  double    noise;
  double    negScale;
};
struct NlmPadParams
{
  long long padStart[4];
  long long padSize[4];
  long long imageSize[4];
  long long inStart[4];
  long long inSize[4];
  long long clampLo[4];
  long long clampHi[4];
};

struct LoadedModule
{
  CUmodule   module{ nullptr };
  CUfunction pad{ nullptr };
  CUfunction fast{ nullptr };
  int        blocksPerSM{ 1 };
};

/** Process-wide CUDA state: the driver, NVRTC, one device with its primary context, and the
 * modules compiled so far. Shared by every filter; guarded by a mutex. */
class DeviceState
{
public:
  static DeviceState *
  Get(std::string & why)
  {
    static std::mutex                   mutex;
    static std::unique_ptr<DeviceState> state;
    static std::string                  failure;
    static bool                         tried = false;
    const std::lock_guard<std::mutex>   lock(mutex);
    if (!tried)
    {
      tried = true;
      auto s = std::make_unique<DeviceState>();
      if (s->Initialise(failure))
      {
        state = std::move(s);
      }
    }
    why = failure;
    return state.get();
  }

  bool
  Initialise(std::string & why)
  {
    driver = cuda::GetDriver(why);
    if (driver == nullptr)
    {
      return false;
    }
    nvrtc = cuda::GetNvrtc(why);
    if (nvrtc == nullptr)
    {
      return false;
    }
    int ordinal = 0;
    if (const char * env = std::getenv("CUDANONLOCALMEANS_DEVICE"))
    {
      ordinal = std::atoi(env);
    }
    int count = 0;
    driver->cuDeviceGetCount(&count);
    if (ordinal < 0 || ordinal >= count)
    {
      why = "CUDANONLOCALMEANS_DEVICE=" + std::to_string(ordinal) + " but the driver sees " + std::to_string(count) +
            " device(s)";
      return false;
    }
    CUresult r = driver->cuDeviceGet(&device, ordinal);
    if (r == cuda::CUDA_SUCCESS)
    {
      r = driver->cuDevicePrimaryCtxRetain(&context, device);
    }
    if (r != cuda::CUDA_SUCCESS)
    {
      why = "the CUDA device " + std::to_string(ordinal) + " cannot be used: " + cuda::DescribeResult(*driver, r);
      return false;
    }
    char name[256] = {};
    driver->cuDeviceGetName(name, sizeof(name) - 1, device);
    int major = 0, minor = 0;
    driver->cuDeviceGetAttribute(&major, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    driver->cuDeviceGetAttribute(&minor, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    driver->cuDeviceGetAttribute(&multiprocessors, cuda::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    driver->cuDeviceGetAttribute(&sharedPerBlock, cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, device);
    driver->cuDeviceGetAttribute(
      &sharedPerBlockOptin, cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device);
    driver->cuDeviceGetAttribute(&sharedPerSM, cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, device);
    driver->cuDeviceGetAttribute(&maxThreads, cuda::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
    driver->cuDriverGetVersion(&driverVersion);
    sharedPerBlockOptin = std::max(sharedPerBlockOptin, sharedPerBlock);
    arch = major * 10 + minor;
    std::ostringstream os;
    os << name << " (sm_" << arch << ", " << multiprocessors << " SMs, driver " << driverVersion / 1000 << "."
       << (driverVersion % 1000) / 10 << ", NVRTC " << nlm::NvrtcVersion(*nvrtc) / 1000 << "."
       << (nlm::NvrtcVersion(*nvrtc) % 1000) / 10 << ")";
    description = os.str();
    return true;
  }

  /** The module of a configuration: from memory, else compiled (or read from the disk cache)
   * and loaded. Call with the context current. */
  const LoadedModule &
  Module(const nlm::KernelConfig & config, NonLocalMeansBackend::RunStatistics & stats)
  {
    const std::lock_guard<std::mutex> lock(moduleMutex);
    std::ostringstream                key;
    for (const auto & m : config.Macros())
    {
      key << m << ' ';
    }
    auto it = modules.find(key.str());
    if (it != modules.end())
    {
      stats.KernelFromMemoryCache = true;
      return it->second;
    }
    const nlm::CompiledKernel compiled = nlm::CompileKernel(*nvrtc, config, arch);
    stats.CompileMilliseconds = compiled.Milliseconds;
    stats.KernelFromDiskCache = compiled.FromDiskCache;
    std::vector<char> image = compiled.Image;
    if (compiled.IsPTX)
    {
      image.push_back('\0');
    }
    LoadedModule m;
    CUresult     r = driver->cuModuleLoadData(&m.module, image.data());
    if (r != cuda::CUDA_SUCCESS)
    {
      const int nv = nlm::NvrtcVersion(*nvrtc);
      if ((r == cuda::CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == cuda::CUDA_ERROR_NO_BINARY_FOR_GPU ||
           r == 200 /* CUDA_ERROR_INVALID_IMAGE */) &&
          driverVersion < nv)
      {
        itkGenericExceptionMacro("The NVIDIA driver (CUDA "
                                 << driverVersion / 1000 << "." << (driverVersion % 1000) / 10
                                 << ") is too old for code compiled by NVRTC " << nv / 1000 << "." << (nv % 1000) / 10
                                 << " (" << cuda::DescribeResult(*driver, r)
                                 << "). Update the NVIDIA driver, or point "
                                    "CUDANONLOCALMEANS_NVRTC_LIBRARY at an NVRTC no newer "
                                    "than the driver.");
      }
      itkGenericExceptionMacro("The CUDA driver could not load the compiled kernels ("
                               << compiled.Target << "): " << cuda::DescribeResult(*driver, r));
    }
    Check(driver->cuModuleGetFunction(&m.pad, m.module, "nlm_pad"), "cuModuleGetFunction(nlm_pad)");
    Check(driver->cuModuleGetFunction(&m.fast, m.module, "nlm_fast"), "cuModuleGetFunction(nlm_fast)");
    const int shared = static_cast<int>(config.SharedBytes());
    if (shared > sharedPerBlock)
    {
      Check(driver->cuFuncSetAttribute(m.fast, cuda::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared),
            "cuFuncSetAttribute(shared memory)");
    }
    int registers = 0;
    driver->cuFuncGetAttribute(&registers, cuda::CU_FUNC_ATTRIBUTE_NUM_REGS, m.fast);
    const int threads = config.Threads();
    const int byShared = std::max(1, sharedPerSM / std::max(1, shared + 1024));
    const int byThreads = std::max(1, 2048 / threads);
    const int byRegisters = std::max(1, 65536 / std::max(1, registers * threads));
    m.blocksPerSM = std::min(std::min(byShared, byThreads), std::min(byRegisters, 32));
    return modules.emplace(key.str(), m).first->second;
  }

  void
  Check(CUresult r, const char * what) const
  {
    if (r != cuda::CUDA_SUCCESS)
    {
      itkGenericExceptionMacro("CUDA call " << what << " failed: " << cuda::DescribeResult(*driver, r));
    }
  }

  const cuda::DriverAPI * driver{ nullptr };
  const cuda::NvrtcAPI *  nvrtc{ nullptr };
  cuda::CUdevice          device{ 0 };
  cuda::CUcontext         context{ nullptr };
  int                     arch{ 0 };
  int                     multiprocessors{ 1 };
  int                     sharedPerBlock{ 48 * 1024 };
  int                     sharedPerBlockOptin{ 48 * 1024 };
  int                     sharedPerSM{ 64 * 1024 };
  int                     maxThreads{ 1024 };
  int                     driverVersion{ 0 };
  std::string             description;

  /** Bytes of one page-locked staging buffer. */
  static constexpr size_t StagingBytes = size_t{ 16 } << 20;

  /** `count` page-locked staging buffers of StagingBytes from the process-wide pool. When the pool
   * lacks them, `count` new ones are page-locked for the caller: one block asked for huge pages,
   * touched by the threader's work units and registered with the driver, which costs a few
   * milliseconds where cuMemAllocHost takes about 0.5 ms per MiB (it remains the fallback). Returns
   * false, and no buffer, when not all can be had. Call with the context current. */
  bool
  AcquireStaging(void ** buffers, int count, MultiThreaderBase * threader, unsigned int workUnits)
  {
    {
      const std::lock_guard<std::mutex> lock(stagingMutex);
      if (freeStaging.size() >= static_cast<size_t>(count))
      {
        for (int b = 0; b < count; ++b)
        {
          buffers[b] = freeStaging.back();
          freeStaging.pop_back();
        }
        return true;
      }
    }
    const std::vector<void *> added = NewStagingBuffers(count, threader, workUnits);
    if (static_cast<int>(added.size()) == count)
    {
      std::copy(added.begin(), added.end(), buffers);
      return true;
    }
    const std::lock_guard<std::mutex> lock(stagingMutex);
    freeStaging.insert(freeStaging.end(), added.begin(), added.end());
    return false;
  }

  void
  ReleaseStaging(void * b)
  {
    const std::lock_guard<std::mutex> lock(stagingMutex);
    freeStaging.push_back(b);
  }

private:
  /** Up to `count` new page-locked staging buffers (kept for the life of the process). */
  std::vector<void *>
  NewStagingBuffers(int count, MultiThreaderBase * threader, unsigned int workUnits)
  {
    constexpr size_t    huge = size_t{ 2 } << 20;
    const size_t        bytes = static_cast<size_t>(count) * StagingBytes;
    std::vector<void *> added;
    void *              raw = std::malloc(bytes + huge); // kept for the life of the process once registered
    if (raw != nullptr)
    {
      char * block = reinterpret_cast<char *>((reinterpret_cast<std::uintptr_t>(raw) + huge - 1) / huge * huge);
      AdviseHugePages(block, bytes);
      constexpr size_t piece = size_t{ 1 } << 20;
      nlm::ParallelFor(threader, workUnits, static_cast<std::int64_t>(bytes / piece), [&](std::int64_t i) {
        std::memset(block + static_cast<size_t>(i) * piece, 0, piece);
      });
      if (driver->cuMemHostRegister(block, bytes, 0) == cuda::CUDA_SUCCESS)
      {
        for (int b = 0; b < count; ++b)
        {
          added.push_back(block + static_cast<size_t>(b) * StagingBytes);
        }
      }
      else
      {
        std::free(raw);
      }
    }
    for (int b = static_cast<int>(added.size()); b < count; ++b)
    {
      void * buffer = nullptr;
      if (driver->cuMemAllocHost(&buffer, StagingBytes) != cuda::CUDA_SUCCESS)
      {
        break;
      }
      added.push_back(buffer);
    }
    return added;
  }

  std::mutex                          moduleMutex;
  std::map<std::string, LoadedModule> modules;
  std::mutex                          stagingMutex;
  std::vector<void *>                 freeStaging; // kept for the life of the process
};

/** Makes the device's primary context current for the lifetime of the object. */
class ScopedContext
{
public:
  explicit ScopedContext(const DeviceState & s)
    : m_State(s)
  {
    s.Check(s.driver->cuCtxPushCurrent(s.context), "cuCtxPushCurrent");
  }
  ~ScopedContext()
  {
    cuda::CUcontext popped = nullptr;
    m_State.driver->cuCtxPopCurrent(&popped);
  }
  ITK_DISALLOW_COPY_AND_MOVE(ScopedContext);

private:
  const DeviceState & m_State;
};

/** Device memory freed on scope exit. */
class DeviceBuffer
{
public:
  DeviceBuffer(const DeviceState & s, size_t bytes)
    : m_State(s)
  {
    const CUresult r = s.driver->cuMemAlloc(&m_Pointer, std::max<size_t>(bytes, 1));
    if (r != cuda::CUDA_SUCCESS)
    {
      itkGenericExceptionMacro("Could not allocate " << bytes / (1024.0 * 1024.0)
                                                     << " MiB on the GPU: " << cuda::DescribeResult(*s.driver, r)
                                                     << ". Lower MaximumGPUMemory to process the image in smaller "
                                                        "slabs, or free GPU memory.");
    }
  }
  ~DeviceBuffer()
  {
    if (m_Pointer != 0)
    {
      m_State.driver->cuMemFree(m_Pointer);
    }
  }
  ITK_DISALLOW_COPY_AND_MOVE(DeviceBuffer);
  CUdeviceptr
  Get() const
  {
    return m_Pointer;
  }

private:
  const DeviceState & m_State;
  CUdeviceptr         m_Pointer{ 0 };
};

class Stream
{
public:
  explicit Stream(const DeviceState & s)
    : m_State(s)
  {
    s.Check(s.driver->cuStreamCreate(&m_Stream, cuda::CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~Stream()
  {
    m_State.driver->cuStreamSynchronize(m_Stream);
    m_State.driver->cuStreamDestroy(m_Stream);
  }
  ITK_DISALLOW_COPY_AND_MOVE(Stream);
  CUstream
  Get() const
  {
    return m_Stream;
  }

private:
  const DeviceState & m_State;
  CUstream            m_Stream{ nullptr };
};

/** Waits, on destruction, until the given streams have no work left (errors ignored): declared
 * after device buffers, it keeps them alive until nothing in flight uses them, also when an
 * exception unwinds the scope. */
class StreamsDrained
{
public:
  StreamsDrained(const DeviceState & s, std::initializer_list<CUstream> streams)
    : m_State(s)
    , m_Streams(streams)
  {}
  ~StreamsDrained()
  {
    for (CUstream stream : m_Streams)
    {
      m_State.driver->cuStreamSynchronize(stream);
    }
  }
  ITK_DISALLOW_COPY_AND_MOVE(StreamsDrained);

private:
  const DeviceState &   m_State;
  std::vector<CUstream> m_Streams;
};

class Event
{
public:
  explicit Event(const DeviceState & s)
    : m_State(s)
  {
    s.Check(s.driver->cuEventCreate(&m_Event, 0), "cuEventCreate");
  }
  ~Event() { m_State.driver->cuEventDestroy(m_Event); }
  ITK_DISALLOW_COPY_AND_MOVE(Event);
  CUevent
  Get() const
  {
    return m_Event;
  }
  /** Milliseconds from `start` to this event (both recorded and complete). */
  double
  Since(const Event & start) const
  {
    float ms = 0.0f;
    m_State.Check(m_State.driver->cuEventElapsedTime(&ms, start.m_Event, m_Event), "cuEventElapsedTime");
    return ms;
  }

private:
  const DeviceState & m_State;
  CUevent             m_Event{ nullptr };
};

/** Copies between pageable host memory and the device through page-locked staging buffers: the
 * host side of each chunk is copied by the work units of the filter's threader while the previous
 * chunk is in flight, which is several times faster than the driver's own staging of pageable
 * memory. Without page-locked memory, or for small transfers, the plain driver copy is used. A
 * transfer may be split into several calls on any stream: the buffers are used round robin, each
 * one reused only when its previous copy has completed. */
class StagedCopies
{
public:
  static constexpr int Buffers = 4;

  StagedCopies(DeviceState & s, MultiThreaderBase * threader, unsigned int workUnits)
    : m_State(s)
    , m_Threader(threader)
    , m_WorkUnits(workUnits)
  {
    for (int b = 0; b < Buffers; ++b)
    {
      m_Events[b] = std::make_unique<Event>(s);
    }
    // CUDANONLOCALMEANS_STAGING_CHUNK (bytes) sets a smaller chunk, for tests.
    if (const char * env = std::getenv("CUDANONLOCALMEANS_STAGING_CHUNK"))
    {
      const long long c = std::atoll(env);
      if (c >= 64 && static_cast<size_t>(c) < m_Chunk)
      {
        m_Chunk = static_cast<size_t>(c) / 16 * 16; // whole elements in every chunk
      }
    }
  }
  ~StagedCopies()
  {
    if (m_Buffers[0] != nullptr)
    {
      for (int b = 0; b < Buffers; ++b)
      {
        m_State.driver->cuEventSynchronize(m_Events[b]->Get());
        m_State.ReleaseStaging(m_Buffers[b]);
      }
    }
  }
  ITK_DISALLOW_COPY_AND_MOVE(StagedCopies);

  /** Bytes per staged copy. */
  size_t
  Chunk() const
  {
    return m_Chunk;
  }

  /** Whether a transfer of `bytes` in all goes through the staging buffers; takes them from the
   * pool at the first such transfer (all or none). */
  bool
  Staged(size_t bytes)
  {
    if (bytes < 2 * m_Chunk || m_Unavailable)
    {
      return false;
    }
    if (m_Buffers[0] == nullptr && !m_State.AcquireStaging(m_Buffers.data(), Buffers, m_Threader, m_WorkUnits))
    {
      m_Unavailable = true;
      return false;
    }
    return true;
  }

  /** Enqueues the copy of `bytes` from `host` to `device` on `stream`; returns when the host memory
   * may change. `staged`: what Staged() said for the whole transfer. With `nonFinite` (staged
   * copies only), the values copied, of type `type`, are also checked, and `nonFinite` set when one
   * is a NaN or an infinity. */
  void
  Upload(CUdeviceptr         device,
         const char *        host,
         size_t              bytes,
         CUstream            stream,
         bool                staged,
         std::atomic<bool> * nonFinite = nullptr,
         ElementType         type = ElementType::Float64)
  {
    const auto & drv = *m_State.driver;
    if (!staged)
    {
      m_State.Check(drv.cuMemcpyHtoDAsync(device, host, bytes, stream), "cuMemcpyHtoDAsync");
      return;
    }
    for (size_t at = 0; at < bytes; at += m_Chunk)
    {
      const size_t length = std::min(m_Chunk, bytes - at);
      const int    b = Take();
      Copy(static_cast<char *>(m_Buffers[b]), host + at, length, nonFinite, type);
      m_State.Check(drv.cuMemcpyHtoDAsync(device + at, m_Buffers[b], length, stream), "cuMemcpyHtoDAsync");
      m_State.Check(drv.cuEventRecord(m_Events[b]->Get(), stream), "cuEventRecord");
    }
  }

  /** Copies `bytes` from `device` to `host` after the work queued on `stream`; returns when done.
   * `staged`: what Staged() said for the whole transfer. */
  void
  Download(char * host, CUdeviceptr device, size_t bytes, CUstream stream, bool staged)
  {
    const auto & drv = *m_State.driver;
    if (!staged)
    {
      m_State.Check(drv.cuMemcpyDtoHAsync(host, device, bytes, stream), "cuMemcpyDtoHAsync");
      m_State.Check(drv.cuStreamSynchronize(stream), "the non-local means kernels");
      return;
    }
    constexpr size_t         depth = Buffers; // chunks in flight
    const size_t             chunks = (bytes + m_Chunk - 1) / m_Chunk;
    std::array<int, Buffers> slot{};
    auto                     enqueue = [&](size_t i) {
      const int b = Take();
      slot[i % depth] = b;
      m_State.Check(
        drv.cuMemcpyDtoHAsync(m_Buffers[b], device + i * m_Chunk, std::min(m_Chunk, bytes - i * m_Chunk), stream),
        "cuMemcpyDtoHAsync");
      m_State.Check(drv.cuEventRecord(m_Events[b]->Get(), stream), "cuEventRecord");
    };
    for (size_t i = 0; i < chunks && i < depth; ++i)
    {
      enqueue(i);
    }
    for (size_t i = 0; i < chunks; ++i)
    {
      const int b = slot[i % depth];
      m_State.Check(drv.cuEventSynchronize(m_Events[b]->Get()), "the non-local means kernels");
      Copy(host + i * m_Chunk, static_cast<const char *>(m_Buffers[b]), std::min(m_Chunk, bytes - i * m_Chunk));
      if (i + depth < chunks)
      {
        enqueue(i + depth);
      }
    }
  }

private:
  /** The next buffer in turn, once its previous copy has completed. */
  int
  Take()
  {
    const int b = m_Next;
    m_Next = (m_Next + 1) % Buffers;
    m_State.Check(m_State.driver->cuEventSynchronize(m_Events[b]->Get()), "a copy between host and GPU");
    return b;
  }

  /** memcpy by the threader's work units, in blocks of 1 MiB; with `nonFinite`, each block copied
   * is also checked for values (of type `type`) that are not finite. */
  void
  Copy(char *              to,
       const char *        from,
       size_t              bytes,
       std::atomic<bool> * nonFinite = nullptr,
       ElementType         type = ElementType::Float64) const
  {
    constexpr size_t block = size_t{ 1 } << 20;
    const size_t     element = type == ElementType::Float32 ? sizeof(float) : sizeof(double);
    nlm::ParallelFor(
      m_Threader, m_WorkUnits, static_cast<std::int64_t>((bytes + block - 1) / block), [&](std::int64_t i) {
        const size_t at = static_cast<size_t>(i) * block;
        const size_t length = std::min(block, bytes - at);
        std::memcpy(to + at, from + at, length);
        if (nonFinite != nullptr && NonLocalMeansBackend::HoldsNonFinite(to + at, length / element, type))
        {
          *nonFinite = true;
        }
      });
  }

  DeviceState &                               m_State;
  MultiThreaderBase *                         m_Threader;
  unsigned int                                m_WorkUnits;
  size_t                                      m_Chunk{ DeviceState::StagingBytes };
  bool                                        m_Unavailable{ false }; // no page-locked memory to be had
  int                                         m_Next{ 0 };
  std::array<void *, Buffers>                 m_Buffers{};
  std::array<std::unique_ptr<Event>, Buffers> m_Events;
};

size_t
ElementSize(ElementType t)
{
  return t == ElementType::Float32 ? sizeof(float) : sizeof(double);
}

/** Estimated time per output voxel of a kernel configuration (arbitrary units): the warp
 * instructions of the kernel's passes over every shift's boxes, divided by the instruction issue
 * rate the configuration's occupancy allows (measured on an H200: about 0.095 warp instructions
 * per cycle and resident warp, up to about 3.2). Registers per thread are estimated from the
 * voxels each thread accumulates (measured with ptxas: about 64 + 12 per voxel and component pair). */
double
EstimateCost(const nlm::KernelConfig & c, int sharedPerSM)
{
  const int    n = c.Dimension;
  const int    d = c.PatchDistance;
  const int    K = c.Components;
  const int    win = c.PatchSize - 1;
  const int    ext = (win > 0) ? win - 1 : 0;
  const bool   rows = win > 0 && c.Tile[0] + d + ext <= 32 && c.Threads() % 32 == 0;
  const double voxels = static_cast<double>(c.Tile[0]) * c.Tile[1] * c.Tile[2] * c.Tile[3];
  const double vpt = voxels / c.Threads();
  double       total = 0.0;
  long         shifts = 0;
  int          lo[4] = { 0, 0, 0, 0 }, hi[4] = { 0, 0, 0, 0 };
  for (int a = 0; a < n; ++a)
  {
    lo[a] = (a == 0) ? 0 : -d;
    hi[a] = d;
  }
  for (int t3 = lo[3]; t3 <= hi[3]; ++t3)
    for (int t2 = lo[2]; t2 <= hi[2]; ++t2)
      for (int t1 = lo[1]; t1 <= hi[1]; ++t1)
        for (int t0 = lo[0]; t0 <= hi[0]; ++t0)
        {
          const int t[4] = { t0, t1, t2, t3 };
          double    w[4], e[4];
          for (int a = 0; a < 4; ++a)
          {
            w[a] = (a < n) ? c.Tile[a] + std::abs(t[a]) : 1;
            e[a] = (a < n && a > 0) ? w[a] + ext : w[a];
          }
          double instructions = voxels / 32.0 * (8.0 + 6.0 * K); // gather
          if (win > 0)
          {
            const double rowsA = e[1] * e[2] * e[3];
            instructions +=
              rows ? rowsA * (18.0 + 3.0 * K + 2.0 * (win - 1)) : rowsA * w[0] / 32.0 * (24.0 + win * (10.0 + 3.0 * K));
            const double segments = (n == 3) ? c.ZSegments : 1;
            const double columns = w[0] * w[1] * ((n > 3) ? w[2] : 1.0);
            const double steps = (n == 3) ? e[2] + (segments - 1) * ext : ((n > 3) ? e[3] : 1.0);
            instructions += std::ceil(columns * segments / c.Threads()) * c.Threads() / 32.0 * steps / segments *
                            (8.0 + 2.0 * win);                               // pass B, whole rounds of the block
            instructions += w[0] * w[1] * w[2] * w[3] / 32.0 * 22.0;         // weights
            instructions += (c.Threads() / 32.0) * 20.0 * ((n > 3) ? 3 : 2); // barriers
          }
          total += instructions;
          ++shifts;
        }
  // Registers: what the kernel needs (measured with ptxas) against what __launch_bounds__ leaves
  // for MinBlocks resident blocks; a shortfall spills, which costs in proportion.
  const double needed = 64.0 + 12.0 * vpt * (K + 1) / 2.0;
  const int    threads = c.Threads();
  const double budget = std::min(255.0, std::floor(65536.0 / (threads * c.MinBlocks) / 8.0) * 8.0);
  const int    byShared = c.SharedBytes() ? sharedPerSM / static_cast<int>(c.SharedBytes() + 1024) : 32;
  const int    blocks = std::min(c.MinBlocks, std::min(byShared, 2048 / threads));
  if (blocks < c.MinBlocks || budget < 48.0 || needed > 1.8 * budget)
  {
    return std::numeric_limits<double>::infinity();
  }
  const double spill = (needed > budget) ? 1.0 + 0.25 * (needed / budget - 1.0) : 1.0;
  const double issueRate = std::min(3.2, 0.095 * blocks * threads / 32.0) / spill;
  return total / shifts / voxels / issueRate;
}
} // namespace

bool
NonLocalMeansCUDABackend::IsUsable(std::string & whyNot)
{
  return DeviceState::Get(whyNot) != nullptr;
}

nlm::KernelConfig
NonLocalMeansCUDABackend::ChooseConfiguration(const Problem & p)
{
  std::string   why;
  DeviceState * state = DeviceState::Get(why);
  // Without a device (offline planning) assume a Hopper GPU's limits.
  const int sharedLimit = state ? state->sharedPerBlockOptin : 227 * 1024;
  const int sharedPerSM = state ? state->sharedPerSM : 228 * 1024;

  nlm::KernelConfig base;
  base.Dimension = static_cast<int>(p.Dimension);
  base.Components = static_cast<int>(p.Components);
  base.PatchSize = EffectivePatchSize(p.PatchSize);
  base.PatchDistance = p.PatchDistance;
  base.InputDouble = p.InputType == ElementType::Float64;
  base.OutputDouble = p.OutputType == ElementType::Float64;
  base.SinglePrecision = p.SinglePrecision;

  // 3D with a patch size of 3 or more: the column kernel, when its footprint fits in shared memory
  // (see the kernel source). CUDANONLOCALMEANS_COLUMNS=rows,planes,warps,blocks forces a shape, =0
  // the tiled kernel; a forced tile (CUDANONLOCALMEANS_TILE) selects the tiled kernel too.
  // Its weights need -kExpA / norm as a finite double (h above about 1e-151).
  const char * columnsEnv = std::getenv("CUDANONLOCALMEANS_COLUMNS");
  if (p.Dimension == 3 && base.PatchSize >= 3 && base.PatchSize <= 11 && !std::getenv("CUDANONLOCALMEANS_TILE") &&
      !(columnsEnv && std::string(columnsEnv) == "0") && std::isfinite(nlm::WeightScale(Normalisation(p))))
  {
    // Shapes in order of preference {rows, planes, warps, blocks per SM}: the first measured best on
    // an H200 (BENCHMARKS.md: float64 arithmetic, float arithmetic, several components), then
    // smaller footprints.
    std::vector<std::vector<int>> shapes = { { 2, 2, 8, 3 }, { 2, 2, 4, 4 }, { 1, 2, 4, 2 } };
    if (base.Components > 1)
    {
      shapes.insert(shapes.begin(), { 1, 4, 4, 2 });
    }
    else if (base.SinglePrecision)
    {
      shapes.insert(shapes.begin(), { 2, 8, 4, 2 });
    }
    if (columnsEnv)
    {
      std::vector<int>  v;
      std::stringstream ss(columnsEnv);
      std::string       item;
      while (std::getline(ss, item, ','))
      {
        v.push_back(std::atoi(item.c_str()));
      }
      if (v.size() == 4 && v[0] >= 1 && v[1] >= 1 && v[2] >= 1 && v[2] <= 32 && v[3] >= 1)
      {
        v[3] = std::min(v[3], 64 / v[2]); // at most 2048 resident threads
        shapes = { v };
      }
    }
    for (auto shape : shapes)
    {
      // Accumulators in registers: rows * planes * (components + 1) doubles, at most 32.
      while (shape[1] > 1 && shape[0] * shape[1] * (base.Components + 1) > 32)
      {
        shape[1] /= 2;
      }
      nlm::KernelConfig k = base;
      k.Rows = shape[0];
      k.Tile[0] = 32 - (base.PatchSize - 2);
      k.Tile[1] = shape[0] * shape[2];
      k.Tile[2] = shape[1];
      k.Tile[3] = 1;
      k.ThreadCount = 32 * shape[2];
      k.ZSegments = 1;
      k.MinBlocks = shape[3];
      const size_t shared = k.SharedBytes();
      while (k.MinBlocks > 1 && static_cast<size_t>(k.MinBlocks) * (shared + 1024) > static_cast<size_t>(sharedPerSM))
      {
        --k.MinBlocks;
      }
      if (shared <= static_cast<size_t>(sharedLimit))
      {
        return k;
      }
    }
  }

  // Candidates: tile extents, threads and (3D) segments of the march along axis 2. Along axis 0
  // the preferred extent makes a row of patch terms fill one warp exactly.
  const int        win = base.PatchSize - 1;
  const int        ext = (win > 0) ? win - 1 : 0;
  std::vector<int> t0s = { 8, 16, 32 };
  const int        rowFit = (32 - p.PatchDistance - ext) / 4 * 4; // a row of terms fills a warp
  if (rowFit >= 4 && std::find(t0s.begin(), t0s.end(), rowFit) == t0s.end())
  {
    t0s.push_back(rowFit);
  }
  std::vector<std::vector<int>> candidates; // {T0, T1, T2, T3, threads, segments}
  const std::vector<int>        threadCounts = { 64, 96, 128, 160, 192, 224, 256, 384, 448, 512, 768, 896, 1024 };
  auto                          add = [&](int a, int b, int c, int d4) {
    const int voxels = a * b * c * d4;
    for (int threads : threadCounts)
    {
      if (voxels % threads != 0 || voxels / threads < 2 || (voxels / threads) * (base.Components + 1) > 32)
      {
        continue;
      }
      for (int segments : { 1, 2, 4 })
      {
        if (segments > 1 && (p.Dimension != 3 || segments > c))
        {
          continue;
        }
        for (int minBlocks : { 1, 2, 3, 4 })
        {
          if (threads * minBlocks <= 2048)
          {
            candidates.push_back({ a, b, c, d4, threads, segments, minBlocks });
          }
        }
      }
    }
  };
  for (int a : t0s)
  {
    if (p.Dimension == 2)
    {
      for (int b : { 8, 16, 32, 64 })
      {
        add(a, b, 1, 1);
      }
    }
    else if (p.Dimension == 3)
    {
      for (int b : { 4, 8, 16 })
      {
        for (int c : { 4, 8, 16 })
        {
          add(a, b, c, 1);
        }
      }
    }
    else
    {
      for (int b : { 4, 8 })
      {
        for (int c : { 2, 4, 8 })
        {
          for (int d4 : { 2, 4 })
          {
            add(a, b, c, d4);
          }
        }
      }
    }
  }
  if (candidates.empty())
  {
    candidates.push_back({ 8, 8, p.Dimension > 2 ? 4 : 1, p.Dimension > 3 ? 2 : 1, 64, 1, 1 });
  }
  bool forced = false;
  if (const char * env = std::getenv("CUDANONLOCALMEANS_TILE"))
  {
    std::vector<int>  v;
    std::stringstream ss(env);
    std::string       item;
    while (std::getline(ss, item, ','))
    {
      v.push_back(std::atoi(item.c_str()));
    }
    while (v.size() >= 5 && v.size() < 7)
    {
      v.push_back(1);
    }
    if (v.size() == 7)
    {
      candidates = { v };
      forced = true;
    }
  }
  nlm::KernelConfig best = base;
  double            bestCost = std::numeric_limits<double>::infinity();
  for (const auto & c : candidates)
  {
    nlm::KernelConfig k = base;
    for (int a = 0; a < 4; ++a)
    {
      k.Tile[a] = c[static_cast<size_t>(a)];
    }
    k.ThreadCount = c[4];
    k.ZSegments = c[5];
    k.MinBlocks = c[6];
    if (k.SharedBytes() > static_cast<size_t>(sharedLimit) || k.Threads() > 1024)
    {
      continue;
    }
    const int voxels = k.Tile[0] * k.Tile[1] * k.Tile[2] * k.Tile[3];
    if (voxels % k.Threads() != 0)
    {
      continue;
    }
    const double cost = forced ? 0.0 : EstimateCost(k, sharedPerSM);
    if (std::getenv("CUDANONLOCALMEANS_LIST_CONFIGURATIONS"))
    {
      std::cout << "configuration " << k.Describe() << ": estimated cost " << cost << std::endl;
    }
    if (cost < bestCost)
    {
      bestCost = cost;
      best = k;
    }
  }
  if (!std::isfinite(bestCost))
  {
    itkGenericExceptionMacro("PatchSize " << p.PatchSize << " with PatchDistance " << p.PatchDistance
                                          << " needs more shared memory per block than this GPU offers (" << sharedLimit
                                          << " bytes) in " << p.Dimension
                                          << "D; use a smaller PatchDistance or the CPU backend.");
  }
  return best;
}

void
NonLocalMeansCUDABackend::Run(const Problem &     problem,
                              ProcessObject *     caller,
                              MultiThreaderBase * threader,
                              unsigned int        numberOfWorkUnits)
{
  VerifyProblem(problem);
  m_Statistics = RunStatistics{};
  if (!problem.FastMode)
  {
    // Slow mode (scikit-image's classic algorithm) runs on the CPU backend.
    auto cpu = CreateCPUBackend();
    cpu->Run(problem, caller, threader, numberOfWorkUnits);
    m_Statistics.Configuration = "slow mode on the CPU backend";
    return;
  }
  using Clock = std::chrono::steady_clock;
  auto millisecondsSince = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  // The finite check runs as a pass of its own before anything is written, unless it can be fused
  // into the upload (one slab whose upload covers the whole input buffer, staged).
  bool checked = false;
  auto checkInput = [&]() {
    const auto checkStart = Clock::now();
    VerifyInputIsFinite(problem, threader, numberOfWorkUnits);
    m_Statistics.CheckMilliseconds += millisecondsSince(checkStart);
    checked = true;
  };
  const auto setupStart = Clock::now();

  std::string   why;
  DeviceState * state = DeviceState::Get(why);
  if (state == nullptr)
  {
    itkGenericExceptionMacro("The CUDA backend cannot be used: " << why);
  }
  const DeviceState & s = *state;
  const auto &        drv = *s.driver;
  ScopedContext       scope(s);
  m_Statistics.Device = s.description;

  const int n = static_cast<int>(problem.Dimension);
  const int K = static_cast<int>(problem.Components);
  const int S = EffectivePatchSize(problem.PatchSize);
  const int E = S / 2 + problem.PatchDistance;
  long long outSize[4] = { 1, 1, 1, 1 }, outStart[4] = { 0, 0, 0, 0 }, image[4] = { 1, 1, 1, 1 };
  long long inStart[4] = { 0, 0, 0, 0 }, inSize[4] = { 1, 1, 1, 1 };
  for (int a = 0; a < n; ++a)
  {
    outSize[a] = problem.OutputSize[a];
    outStart[a] = problem.OutputStart[a];
    image[a] = problem.ImageSize[a];
    inStart[a] = problem.InputStart[a];
    inSize[a] = problem.InputSize[a];
  }
  long long cells = outSize[0] * outSize[1] * outSize[2] * outSize[3];
  if (cells == 0)
  {
    checkInput();
    return;
  }
  if (caller)
  {
    caller->UpdateProgress(0.0f);
  }

  nlm::KernelConfig config = ChooseConfiguration(problem);
  const int         A = n - 1; // slabs along the outermost axis
  const size_t      inElem = ElementSize(problem.InputType);
  const size_t      outElem = ElementSize(problem.OutputType);
  const size_t      realElem = problem.SinglePrecision ? sizeof(float) : sizeof(double); // padded input

  // Memory plan: the largest slab (a multiple of the tile along axis A) that fits the budget.
  size_t freeBytes = 0, totalBytes = 0;
  s.Check(drv.cuMemGetInfo(&freeBytes, &totalBytes), "cuMemGetInfo");
  size_t budget = static_cast<size_t>(0.8 * static_cast<double>(freeBytes));
  if (problem.MaximumGPUMemory > 0)
  {
    budget = std::min<size_t>(budget, static_cast<size_t>(problem.MaximumGPUMemory));
  }
  long long tileSpan[4] = { 1, 1, 1, 1 }; // rounded output extent per axis
  for (int a = 0; a < n; ++a)
  {
    tileSpan[a] = (outSize[a] + config.Tile[a] - 1) / config.Tile[a] * config.Tile[a];
  }
  auto slabBytes = [&](long long h) -> size_t {
    const long long hr = (h + config.Tile[A] - 1) / config.Tile[A] * config.Tile[A];
    double          padded = static_cast<double>(hr + 2 * E);
    double          input = static_cast<double>(std::min<long long>(inSize[A], hr + 2 * E));
    double          output = static_cast<double>(h);
    for (int a = 0; a < A; ++a)
    {
      padded *= static_cast<double>(tileSpan[a] + 2 * E);
      input *= static_cast<double>(inSize[a]);
      output *= static_cast<double>(outSize[a]);
    }
    return static_cast<size_t>(padded * K * realElem + input * K * inElem + output * K * outElem);
  };
  long long slab = tileSpan[A];
  while (slab > config.Tile[A] && slabBytes(slab) > budget)
  {
    slab = std::max<long long>(config.Tile[A], (slab / 2 + config.Tile[A] - 1) / config.Tile[A] * config.Tile[A]);
  }
  if (slabBytes(slab) > budget)
  {
    itkGenericExceptionMacro("The GPU memory budget ("
                             << budget / (1024.0 * 1024.0) << " MiB) is too small even for a slab " << slab
                             << " planes thick, which needs " << slabBytes(slab) / (1024.0 * 1024.0)
                             << " MiB. Raise MaximumGPUMemory or free GPU memory.");
  }
  const long long slabs = (outSize[A] + slab - 1) / slab;

  // Offsets inside one block's footprint must fit the kernel's index type.
  {
    double span = 0.0, stride = 1.0;
    for (int a = 0; a < n; ++a)
    {
      const long long extent = (a == A ? std::min(slab, tileSpan[A]) : tileSpan[a]) + 2 * E;
      span += (config.Tile[a] + 2.0 * E) * stride;
      stride *= static_cast<double>(extent);
    }
    config.WideIndex = span * K > 2.0e9;
  }
  const LoadedModule & module = state->Module(config, m_Statistics);
  m_Statistics.SetupMilliseconds = millisecondsSince(setupStart);
  m_Statistics.Configuration = config.Describe();
  m_Statistics.Slabs = static_cast<unsigned int>(slabs);
  m_Statistics.DeviceBytes = slabBytes(slab);

  // The kernels run on one stream and the copies on another: each slab's input is uploaded in
  // pieces of planes along the outermost axis, and the padding and the kernel chunks start as soon
  // as the planes they read are on the GPU; output planes are downloaded as soon as the chunks that
  // write them have completed.
  Stream       stream(s), copies(s);
  StagedCopies staged(*state, threader, numberOfWorkUnits);
  const double norm = Normalisation(problem);
  const double noise = static_cast<double>(K) * (2.0 * (problem.Sigma * problem.Sigma));

  const long long tilesTotalAll = [&] {
    long long t = 1;
    for (int a = 0; a < n; ++a)
    {
      t *= tileSpan[a] / config.Tile[a];
    }
    return t;
  }();
  long long tilesDone = 0;

  for (long long sl = 0; sl < slabs; ++sl)
  {
    const long long zLo = sl * slab;                        // output-relative
    const long long zHi = std::min(outSize[A], zLo + slab); // exclusive
    const long long zSpan = (zHi - zLo + config.Tile[A] - 1) / config.Tile[A] * config.Tile[A];

    // Input planes to upload: the reflections of [zLo - E, zHi + E) about the image.
    long long pLo = std::numeric_limits<long long>::max(), pHi = std::numeric_limits<long long>::min();
    for (long long g = outStart[A] + zLo - E; g < outStart[A] + zHi + E; ++g)
    {
      const long long r = nlm::ReflectIndex(g, image[A]);
      pLo = std::min(pLo, r);
      pHi = std::max(pHi, r + 1);
    }
    if (pLo < inStart[A] || pHi > inStart[A] + inSize[A])
    {
      itkGenericExceptionMacro("The input buffer does not cover the region the output needs (planes "
                               << pLo << " to " << pHi - 1 << " of axis " << A << ").");
    }
    size_t planeCells = static_cast<size_t>(K);
    for (int a = 0; a < A; ++a)
    {
      planeCells *= static_cast<size_t>(inSize[a]);
    }
    const size_t inBytes = planeCells * static_cast<size_t>(pHi - pLo) * inElem;
    long long    padSize[4] = { 1, 1, 1, 1 };
    size_t       padCells = static_cast<size_t>(K);
    for (int a = 0; a < n; ++a)
    {
      padSize[a] = ((a == A) ? zSpan : tileSpan[a]) + 2 * E;
      padCells *= static_cast<size_t>(padSize[a]);
    }
    size_t outPlane = static_cast<size_t>(K);
    for (int a = 0; a < A; ++a)
    {
      outPlane *= static_cast<size_t>(outSize[a]);
    }
    const size_t outBytes = outPlane * static_cast<size_t>(zHi - zLo) * outElem;

    const auto allocationStart = Clock::now();
    const bool stageIn = staged.Staged(inBytes);
    const bool stageOut = staged.Staged(outBytes);
    m_Statistics.AllocationMilliseconds += millisecondsSince(allocationStart);
    const bool fuseCheck = !checked && slabs == 1 && stageIn && pLo == inStart[A] && pHi == inStart[A] + inSize[A];
    if (!checked && !fuseCheck)
    {
      checkInput();
    }
    std::atomic<bool> nonFinite{ false };
    const auto        deviceAllocationStart = Clock::now();
    DeviceBuffer      dIn(s, inBytes), dPad(s, padCells * realElem), dOut(s, outBytes);
    m_Statistics.AllocationMilliseconds += millisecondsSince(deviceAllocationStart);
    // Whatever ends this slab (also an exception), nothing may still use its buffers when they go.
    const StreamsDrained drained(s, { stream.Get(), copies.Get() });

    // Reflect padding.
    NlmPadParams pp{};
    for (int a = 0; a < 4; ++a)
    {
      const bool      used = a < n;
      const long long origin = used ? outStart[a] + ((a == A) ? zLo : 0) : 0;
      pp.padStart[a] = used ? origin - E : 0;
      pp.padSize[a] = padSize[a];
      pp.imageSize[a] = image[a];
      pp.inStart[a] = (a == A) ? pLo : inStart[a];
      pp.inSize[a] = (a == A) ? pHi - pLo : inSize[a];
      // Cells beyond the output region plus E (tile rounding) only feed discarded voxels: clamp
      // them so that every read stays inside the uploaded input.
      pp.clampLo[a] = used ? origin - E : 0;
      pp.clampHi[a] = used ? origin + ((a == A) ? zHi - zLo : outSize[a]) + E - 1 : 0;
    }
    // padNeeds[j]: how many uploaded input planes (from pLo) padded planes 0..j along A read.
    std::vector<long long> padNeeds(static_cast<size_t>(padSize[A]));
    for (long long j = 0, most = 0; j < padSize[A]; ++j)
    {
      const long long c = std::min(std::max(pp.padStart[A] + j, pp.clampLo[A]), pp.clampHi[A]);
      most = std::max(most, nlm::ReflectIndex(c, image[A]) - pLo + 1);
      padNeeds[static_cast<size_t>(j)] = most;
    }
    const size_t                        padPlane = padCells / static_cast<size_t>(padSize[A]); // with components
    long long                           padded = 0;                                            // padded planes enqueued
    std::vector<std::unique_ptr<Event>> padEvents; // start and end of each padding launch
    auto                                pad = [&](long long upTo) {
      NlmPadParams piece = pp;
      piece.padStart[A] += padded;
      piece.padSize[A] = upTo - padded;
      CUdeviceptr    src = dIn.Get(), dst = dPad.Get() + static_cast<size_t>(padded) * padPlane * realElem;
      void *         args[] = { &src, &dst, &piece };
      const size_t   padTotal = padPlane / static_cast<size_t>(K) * static_cast<size_t>(upTo - padded);
      const unsigned blocks = static_cast<unsigned>(std::min<size_t>((padTotal + 255) / 256, 65535u * 8));
      padEvents.push_back(std::make_unique<Event>(s));
      s.Check(drv.cuEventRecord(padEvents.back()->Get(), stream.Get()), "cuEventRecord");
      s.Check(drv.cuLaunchKernel(module.pad, blocks, 1, 1, 256, 1, 1, 0, stream.Get(), args, nullptr),
              "cuLaunchKernel(nlm_pad)");
      padEvents.push_back(std::make_unique<Event>(s));
      s.Check(drv.cuEventRecord(padEvents.back()->Get(), stream.Get()), "cuEventRecord");
      padded = upTo;
    };

    // The non-local means kernel, in chunks of tiles (in the order of the outermost axis) for
    // progress, abort, and to start before the whole input is padded and download before the whole
    // output is computed.
    NlmFastParams fp{};
    long long     tiles = 1;
    for (int a = 0; a < 4; ++a)
    {
      fp.ySize[a] = padSize[a];
      fp.outSize[a] = (a < n) ? ((a == A) ? zHi - zLo : outSize[a]) : 1;
      fp.tiles[a] = (a < n) ? ((a == A) ? zSpan : tileSpan[a]) / config.Tile[a] : 1;
      tiles *= fp.tiles[a];
    }
    fp.norm = norm;
    fp.invNorm = 1.0 / norm;
    fp.noise = noise;
    fp.negScale = nlm::WeightScale(norm);
    long long tilesPerLayer = 1; // tiles per layer of tiles across axis A
    for (int a = 0; a < A; ++a)
    {
      tilesPerLayer *= fp.tiles[a];
    }
    struct KernelChunk
    {
      long long first, count;
      long long needs;  // padded planes it reads (from the first)
      long long planes; // output planes complete once it and the chunks before it are
    };
    std::vector<KernelChunk> chunks;
    {
      const long long wave = static_cast<long long>(s.multiprocessors) * module.blocksPerSM;
      long long       chunk = std::max<long long>(4 * wave, (tilesTotalAll + 39) / 40);
      // CUDANONLOCALMEANS_CHUNK_TILES sets the tiles per launch, for tests (many chunks on small images).
      if (const char * env = std::getenv("CUDANONLOCALMEANS_CHUNK_TILES"))
      {
        chunk = std::max(1LL, std::atoll(env));
      }
      for (long long first = 0; first < tiles; first += chunk)
      {
        const long long count = std::min(chunk, tiles - first);
        const long long lastLayer = (first + count - 1) / tilesPerLayer;
        chunks.push_back({ first,
                           count,
                           std::min(padSize[A], (lastLayer + 1) * config.Tile[A] + 2 * E),
                           std::min(zHi - zLo, (first + count) / tilesPerLayer * config.Tile[A]) });
      }
    }
    constexpr size_t                    queueDepth = 4; // chunks queued at most
    CUdeviceptr                         yPtr = dPad.Get(), oPtr = dOut.Get();
    std::vector<std::unique_ptr<Event>> starts, ends;
    size_t                              launched = 0, finished = 0;
    bool                                aborted = false;
    auto                                launchReady = [&]() {
      while (!aborted && launched < chunks.size() && launched - finished < queueDepth &&
             chunks[launched].needs <= padded)
      {
        fp.tileOffset = chunks[launched].first;
        void * args[] = { &yPtr, &oPtr, &fp };
        starts.push_back(std::make_unique<Event>(s));
        s.Check(drv.cuEventRecord(starts.back()->Get(), stream.Get()), "cuEventRecord");
        s.Check(drv.cuLaunchKernel(module.fast,
                                   static_cast<unsigned>(chunks[launched].count),
                                   1,
                                   1,
                                   static_cast<unsigned>(config.Threads()),
                                   1,
                                   1,
                                   static_cast<unsigned>(config.SharedBytes()),
                                   stream.Get(),
                                   args,
                                   nullptr),
                "cuLaunchKernel(nlm_fast)");
        ends.push_back(std::make_unique<Event>(s));
        s.Check(drv.cuEventRecord(ends.back()->Get(), stream.Get()), "cuEventRecord");
        ++launched;
      }
    };
    // Accounts for the oldest queued chunk; without `wait`, only if it has completed already.
    auto finishOne = [&](bool wait) {
      const CUevent e = ends[finished]->Get();
      if (wait)
      {
        s.Check(drv.cuEventSynchronize(e), "the non-local means kernels");
      }
      else
      {
        const CUresult r = drv.cuEventQuery(e);
        if (r == cuda::CUDA_ERROR_NOT_READY)
        {
          return false;
        }
        s.Check(r, "the non-local means kernels");
      }
      tilesDone += chunks[finished].count;
      ++finished;
      if (caller)
      {
        caller->UpdateProgress(static_cast<float>(0.99 * static_cast<double>(tilesDone) / tilesTotalAll));
        aborted = caller->GetAbortGenerateData();
      }
      return true;
    };

    // Upload in pieces of planes on the copy stream; pad and start the kernel chunks that the
    // uploaded planes allow as each piece is enqueued.
    const char * hostIn =
      static_cast<const char *>(problem.Input) + planeCells * static_cast<size_t>(pLo - inStart[A]) * inElem;
    const size_t    inPlane = planeCells * inElem;
    const long long piecePlanes = std::max<long long>(1, static_cast<long long>(staged.Chunk() / inPlane));
    Event           uploaded(s);
    const auto      uploadStart = Clock::now();
    for (long long q = 0; q < pHi - pLo && !aborted; q += piecePlanes)
    {
      const long long qEnd = std::min(pHi - pLo, q + piecePlanes);
      const size_t    at = static_cast<size_t>(q) * inPlane;
      staged.Upload(dIn.Get() + at,
                    hostIn + at,
                    static_cast<size_t>(qEnd - q) * inPlane,
                    copies.Get(),
                    stageIn,
                    fuseCheck ? &nonFinite : nullptr,
                    problem.InputType);
      long long ready = padded;
      while (ready < padSize[A] && padNeeds[static_cast<size_t>(ready)] <= qEnd)
      {
        ++ready;
      }
      if (ready > padded)
      {
        s.Check(drv.cuEventRecord(uploaded.Get(), copies.Get()), "cuEventRecord");
        s.Check(drv.cuStreamWaitEvent(stream.Get(), uploaded.Get(), 0), "cuStreamWaitEvent");
        pad(ready);
      }
      while (finished < launched && !aborted && finishOne(false))
      {
      }
      launchReady();
    }
    m_Statistics.UploadMilliseconds += millisecondsSince(uploadStart);
    if (fuseCheck)
    {
      checked = true;
      if (nonFinite)
      {
        checkInput(); // throws, naming the first value that is not finite (before any download)
      }
    }
    if (!aborted && padded < padSize[A])
    {
      itkGenericExceptionMacro("Internal error: the uploaded planes do not cover the padded input.");
    }

    // Wait for the chunks in turn, keep the queue filled, and download the output planes that are
    // complete (on the copy stream, while the kernel goes on).
    char *       hostOut = static_cast<char *>(problem.Output) + outPlane * static_cast<size_t>(zLo) * outElem;
    const size_t outPlaneBytes = outPlane * outElem;
    long long    downloaded = 0;
    double       downloadMs = 0.0;
    if (static_cast<size_t>(zHi - zLo) * outPlaneBytes >= (size_t{ 64 } << 20))
    {
      // Only for buffers this large, which the C library maps on their own (the hint goes with them).
      AdviseHugePages(hostOut, static_cast<size_t>(zHi - zLo) * outPlaneBytes);
    }
    while (finished < chunks.size() && !aborted)
    {
      launchReady();
      finishOne(true);
      const long long planes = chunks[finished - 1].planes;
      if (planes > downloaded && !aborted)
      {
        const auto   downloadStart = Clock::now();
        const size_t at = static_cast<size_t>(downloaded) * outPlaneBytes;
        staged.Download(hostOut + at,
                        dOut.Get() + at,
                        static_cast<size_t>(planes - downloaded) * outPlaneBytes,
                        copies.Get(),
                        stageOut);
        downloadMs += millisecondsSince(downloadStart);
        downloaded = planes;
      }
    }
    if (aborted)
    {
      drv.cuStreamSynchronize(stream.Get());
      drv.cuStreamSynchronize(copies.Get());
      ProcessAborted e(__FILE__, __LINE__);
      e.SetLocation(ITK_LOCATION);
      e.SetDescription(std::string("Object ") + caller->GetNameOfClass() + ": AbortGenerateDataOn");
      throw e;
    }
    for (size_t i = 0; i < launched; ++i)
    {
      m_Statistics.KernelMilliseconds += ends[i]->Since(*starts[i]);
    }
    for (size_t i = 0; i + 1 < padEvents.size(); i += 2)
    {
      m_Statistics.PadMilliseconds += padEvents[i + 1]->Since(*padEvents[i]);
    }
    m_Statistics.DownloadMilliseconds += downloadMs;
    if (caller)
    {
      caller->UpdateProgress(static_cast<float>(0.99 * tilesDone / tilesTotalAll));
    }
  }
  if (caller)
  {
    caller->UpdateProgress(1.0f);
  }
}

} // end namespace itk
