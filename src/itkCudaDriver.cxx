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
#include "itkCudaDriver.h"

#include <cstdlib>
#include <sstream>
#include <vector>

#if defined(_WIN32)
#  define WIN32_LEAN_AND_MEAN
#  include <windows.h>
#else
#  include <dlfcn.h>
#endif

namespace itk
{
namespace cuda
{
namespace
{
void *
OpenLibrary(const std::string & name)
{
#if defined(_WIN32)
  return reinterpret_cast<void *>(LoadLibraryA(name.c_str()));
#else
  return dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
}

void *
FindSymbol(void * library, const char * name)
{
#if defined(_WIN32)
  return reinterpret_cast<void *>(GetProcAddress(reinterpret_cast<HMODULE>(library), name));
#else
  return dlsym(library, name);
#endif
}

std::string
LastLoaderError()
{
#if defined(_WIN32)
  return "error " + std::to_string(GetLastError());
#else
  const char * e = dlerror();
  return e ? e : "unknown error";
#endif
}

/** Binds `fn` to the first of `names` the library exports; records a missing one in `missing`. */
template <typename TFunction>
void
Bind(void * library, TFunction & fn, std::initializer_list<const char *> names, std::string & missing)
{
  for (const char * name : names)
  {
    if (void * symbol = FindSymbol(library, name))
    {
      fn = reinterpret_cast<TFunction>(symbol);
      return;
    }
  }
  missing += (missing.empty() ? "" : ", ") + std::string(*names.begin());
}

std::mutex  g_Mutex;
bool        g_DriverTried = false;
DriverAPI   g_Driver;
std::string g_DriverWhy;
bool        g_NvrtcTried = false;
NvrtcAPI    g_Nvrtc;
std::string g_NvrtcWhy;
std::string g_NvrtcPath;

void
LoadDriver()
{
#if defined(_WIN32)
  const char * name = "nvcuda.dll";
#else
  const char * name = "libcuda.so.1";
#endif
  void * lib = OpenLibrary(name);
  if (lib == nullptr)
  {
    g_DriverWhy = std::string("the NVIDIA driver library ") + name + " could not be loaded (" + LastLoaderError() +
                  "); install the NVIDIA driver to use the GPU";
    return;
  }
  DriverAPI   d;
  std::string missing;
  Bind(lib, d.cuInit, { "cuInit" }, missing);
  Bind(lib, d.cuDriverGetVersion, { "cuDriverGetVersion" }, missing);
  Bind(lib, d.cuGetErrorName, { "cuGetErrorName" }, missing);
  Bind(lib, d.cuGetErrorString, { "cuGetErrorString" }, missing);
  Bind(lib, d.cuDeviceGetCount, { "cuDeviceGetCount" }, missing);
  Bind(lib, d.cuDeviceGet, { "cuDeviceGet" }, missing);
  Bind(lib, d.cuDeviceGetAttribute, { "cuDeviceGetAttribute" }, missing);
  Bind(lib, d.cuDeviceGetName, { "cuDeviceGetName" }, missing);
  Bind(lib, d.cuDevicePrimaryCtxRetain, { "cuDevicePrimaryCtxRetain" }, missing);
  Bind(lib, d.cuDevicePrimaryCtxRelease, { "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease" }, missing);
  Bind(lib, d.cuCtxPushCurrent, { "cuCtxPushCurrent_v2" }, missing);
  Bind(lib, d.cuCtxPopCurrent, { "cuCtxPopCurrent_v2" }, missing);
  Bind(lib, d.cuCtxSynchronize, { "cuCtxSynchronize" }, missing);
  Bind(lib, d.cuModuleLoadData, { "cuModuleLoadData" }, missing);
  Bind(lib, d.cuModuleUnload, { "cuModuleUnload" }, missing);
  Bind(lib, d.cuModuleGetFunction, { "cuModuleGetFunction" }, missing);
  Bind(lib, d.cuFuncSetAttribute, { "cuFuncSetAttribute" }, missing);
  Bind(lib, d.cuFuncGetAttribute, { "cuFuncGetAttribute" }, missing);
  Bind(lib, d.cuMemGetInfo, { "cuMemGetInfo_v2" }, missing);
  Bind(lib, d.cuMemAlloc, { "cuMemAlloc_v2" }, missing);
  Bind(lib, d.cuMemFree, { "cuMemFree_v2" }, missing);
  Bind(lib, d.cuMemAllocHost, { "cuMemAllocHost_v2" }, missing);
  Bind(lib, d.cuMemFreeHost, { "cuMemFreeHost" }, missing);
  Bind(lib, d.cuMemHostRegister, { "cuMemHostRegister_v2" }, missing);
  Bind(lib, d.cuMemcpyHtoDAsync, { "cuMemcpyHtoDAsync_v2" }, missing);
  Bind(lib, d.cuMemcpyDtoHAsync, { "cuMemcpyDtoHAsync_v2" }, missing);
  Bind(lib, d.cuLaunchKernel, { "cuLaunchKernel" }, missing);
  Bind(lib, d.cuStreamCreate, { "cuStreamCreate" }, missing);
  Bind(lib, d.cuStreamSynchronize, { "cuStreamSynchronize" }, missing);
  Bind(lib, d.cuStreamWaitEvent, { "cuStreamWaitEvent" }, missing);
  Bind(lib, d.cuStreamDestroy, { "cuStreamDestroy_v2" }, missing);
  Bind(lib, d.cuEventCreate, { "cuEventCreate" }, missing);
  Bind(lib, d.cuEventRecord, { "cuEventRecord" }, missing);
  Bind(lib, d.cuEventSynchronize, { "cuEventSynchronize" }, missing);
  Bind(lib, d.cuEventQuery, { "cuEventQuery" }, missing);
  Bind(lib, d.cuEventElapsedTime, { "cuEventElapsedTime_v2", "cuEventElapsedTime" }, missing);
  Bind(lib, d.cuEventDestroy, { "cuEventDestroy_v2" }, missing);
  if (!missing.empty())
  {
    g_DriverWhy =
      std::string("the NVIDIA driver library ") + name + " lacks " + missing + "; the driver is too old, update it";
    return;
  }
  const CUresult init = d.cuInit(0);
  if (init != CUDA_SUCCESS)
  {
    g_DriverWhy = "the NVIDIA driver could not be initialised: " + DescribeResult(d, init);
    return;
  }
  int count = 0;
  if (d.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0)
  {
    g_DriverWhy = "the NVIDIA driver reports no CUDA device";
    return;
  }
  g_Driver = d;
}

void
LoadNvrtc()
{
  std::vector<std::string> candidates;
  if (const char * env = std::getenv("CUDANONLOCALMEANS_NVRTC_LIBRARY"))
  {
    if (*env != '\0')
    {
      candidates.emplace_back(env);
    }
  }
#if defined(_WIN32)
  const std::vector<std::string> names = { "nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll" };
  const char *                   subdir = "\\bin\\";
#else
  const std::vector<std::string> names = { "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so" };
  const char *                   subdir = "/lib64/";
#endif
  for (const char * var : { "CUDA_PATH", "CUDA_HOME" })
  {
    if (const char * root = std::getenv(var))
    {
      if (*root != '\0')
      {
        for (const auto & n : names)
        {
          candidates.push_back(std::string(root) + subdir + n);
        }
      }
    }
  }
  for (const auto & n : names)
  {
    candidates.push_back(n);
  }
#if !defined(_WIN32)
  for (const auto & n : names)
  {
    candidates.push_back("/usr/local/cuda/lib64/" + n);
  }
#endif
  std::ostringstream tried;
  for (const auto & path : candidates)
  {
    void * lib = OpenLibrary(path);
    if (lib == nullptr)
    {
      tried << "\n  " << path << ": " << LastLoaderError();
      continue;
    }
    NvrtcAPI    n;
    std::string missing;
    Bind(lib, n.nvrtcVersion, { "nvrtcVersion" }, missing);
    Bind(lib, n.nvrtcGetErrorString, { "nvrtcGetErrorString" }, missing);
    Bind(lib, n.nvrtcGetNumSupportedArchs, { "nvrtcGetNumSupportedArchs" }, missing);
    Bind(lib, n.nvrtcGetSupportedArchs, { "nvrtcGetSupportedArchs" }, missing);
    Bind(lib, n.nvrtcCreateProgram, { "nvrtcCreateProgram" }, missing);
    Bind(lib, n.nvrtcDestroyProgram, { "nvrtcDestroyProgram" }, missing);
    Bind(lib, n.nvrtcCompileProgram, { "nvrtcCompileProgram" }, missing);
    Bind(lib, n.nvrtcGetProgramLogSize, { "nvrtcGetProgramLogSize" }, missing);
    Bind(lib, n.nvrtcGetProgramLog, { "nvrtcGetProgramLog" }, missing);
    Bind(lib, n.nvrtcGetCUBINSize, { "nvrtcGetCUBINSize" }, missing);
    Bind(lib, n.nvrtcGetCUBIN, { "nvrtcGetCUBIN" }, missing);
    Bind(lib, n.nvrtcGetPTXSize, { "nvrtcGetPTXSize" }, missing);
    Bind(lib, n.nvrtcGetPTX, { "nvrtcGetPTX" }, missing);
    if (!missing.empty())
    {
      tried << "\n  " << path << ": lacks " << missing << " (NVRTC 11.2 or newer is needed)";
      continue;
    }
    g_Nvrtc = n;
    g_NvrtcPath = path;
    return;
  }
  g_NvrtcWhy = "no NVRTC library (the CUDA run-time compiler) could be loaded; install one (a CUDA toolkit, or "
               "pip's nvidia-cuda-nvrtc) and/or name it with CUDANONLOCALMEANS_NVRTC_LIBRARY or CUDA_PATH. Tried:" +
               tried.str();
}
} // namespace

const DriverAPI *
GetDriver(std::string & why)
{
  const std::lock_guard<std::mutex> lock(g_Mutex);
  if (!g_DriverTried)
  {
    g_DriverTried = true;
    LoadDriver();
  }
  why = g_DriverWhy;
  return g_DriverWhy.empty() ? &g_Driver : nullptr;
}

const NvrtcAPI *
GetNvrtc(std::string & why)
{
  const std::lock_guard<std::mutex> lock(g_Mutex);
  if (!g_NvrtcTried)
  {
    g_NvrtcTried = true;
    LoadNvrtc();
  }
  why = g_NvrtcWhy;
  return g_NvrtcWhy.empty() ? &g_Nvrtc : nullptr;
}

std::string
GetNvrtcLibraryPath()
{
  const std::lock_guard<std::mutex> lock(g_Mutex);
  return g_NvrtcPath;
}

std::string
DescribeResult(const DriverAPI & driver, CUresult result)
{
  const char * name = nullptr;
  const char * text = nullptr;
  if (driver.cuGetErrorName == nullptr || driver.cuGetErrorName(result, &name) != CUDA_SUCCESS)
  {
    name = nullptr;
  }
  if (driver.cuGetErrorString == nullptr || driver.cuGetErrorString(result, &text) != CUDA_SUCCESS)
  {
    text = nullptr;
  }
  std::ostringstream os;
  os << (name ? name : "CUDA error") << " (" << (text ? text : "code " + std::to_string(result)) << ")";
  return os.str();
}

} // namespace cuda
} // namespace itk
