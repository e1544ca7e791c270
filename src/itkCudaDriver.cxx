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
#include "itkNonLocalMeansOverrides.h"

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
#define ITK_NLM_BIND_FUNCTION(result, member, parameters, ...) Bind(lib, d.member, { __VA_ARGS__ }, missing);
  ITK_NLM_FORALL_DRIVER_FUNCTIONS(ITK_NLM_BIND_FUNCTION)
#undef ITK_NLM_BIND_FUNCTION
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

/** Where NVRTC is looked for when no library is named. */
std::vector<std::string>
NvrtcSearchList(const nlm::Overrides & o)
{
#if defined(_WIN32)
  const std::vector<std::string> names = { "nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll" };
  const char *                   subdir = "\\bin\\";
#else
  const std::vector<std::string> names = { "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so" };
  const char *                   subdir = "/lib64/";
#endif
  std::vector<std::string> candidates;
  for (const auto & root : o.CudaRoots)
  {
    for (const auto & n : names)
    {
      candidates.push_back(root + subdir + n);
    }
  }
  candidates.insert(candidates.end(), names.begin(), names.end());
#if !defined(_WIN32)
  for (const auto & n : names)
  {
    candidates.push_back("/usr/local/cuda/lib64/" + n);
  }
#endif
  if (!o.NvrtcFallback.empty())
  {
    candidates.push_back(o.NvrtcFallback);
  }
  return candidates;
}

void
LoadNvrtc()
{
  const nlm::Overrides     o = nlm::GetOverrides();
  std::vector<std::string> candidates;
  if (!o.NvrtcLibrary.empty())
  {
    candidates.push_back(o.NvrtcLibrary); // named: that file or none
  }
  else
  {
    candidates = NvrtcSearchList(o);
  }
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
#define ITK_NLM_BIND_FUNCTION(result, member, parameters, ...) Bind(lib, n.member, { __VA_ARGS__ }, missing);
    ITK_NLM_FORALL_NVRTC_FUNCTIONS(ITK_NLM_BIND_FUNCTION)
#undef ITK_NLM_BIND_FUNCTION
    if (!missing.empty())
    {
      tried << "\n  " << path << ": lacks " << missing << " (NVRTC 11.2 or newer is needed)";
      continue;
    }
    g_Nvrtc = n;
    g_NvrtcPath = path;
    return;
  }
  if (!o.NvrtcLibrary.empty())
  {
    g_NvrtcWhy = "CUDANONLOCALMEANS_NVRTC_LIBRARY names an NVRTC library that cannot be used:" + tried.str() +
                 "\nName an NVRTC library file that loads (11.2 or newer), or unset the variable to search for one";
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

void
CheckResult(const DriverAPI & driver,
            CUresult          result,
            const char *      call,
            const char *      file,
            unsigned int      line,
            const char *      location)
{
  CheckWork(driver, result, nullptr, call, file, line, location);
}

void
CheckWork(const DriverAPI & driver,
          CUresult          result,
          const char *      what,
          const char *      call,
          const char *      file,
          unsigned int      line,
          const char *      location)
{
  if (result != CUDA_SUCCESS)
  {
    const std::string description = DescribeResult(driver, result);
    throw ExceptionObject(file,
                          line,
                          what ? std::string(what) + " failed on the GPU: " + description + " (in " + call + ")"
                               : std::string("CUDA call ") + call + " failed: " + description,
                          location);
  }
}

} // namespace cuda
} // namespace itk
