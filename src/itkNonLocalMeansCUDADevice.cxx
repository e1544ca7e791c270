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
#include "itkNonLocalMeansCUDADevice.h"
#include "itkNonLocalMeansKernelCache.h"
#include "itkNonLocalMeansNumerics.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace itk
{
namespace nlm
{
namespace
{
std::string
VersionText(int version)
{
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

/** The problem fields and overrides ChooseConfiguration depends on. */
std::string
ConfigurationKey(const NonLocalMeansBackend::Problem & p, const Overrides & o)
{
  std::ostringstream key;
  key << p.Dimension << ' ' << p.Components << ' ' << NonLocalMeansBackend::EffectivePatchSize(p.PatchSize) << ' '
      << p.PatchDistance << ' ' << static_cast<int>(p.InputType) << ' ' << static_cast<int>(p.OutputType) << ' '
      << p.SinglePrecision << ' ' << CorrectedWeightsServe(p) << ' ' << o.ColumnKernelOff << ' ' << o.ColumnFootprint
      << ' ' << static_cast<int>(p.NoiseModel) << ' ' << (p.NoiseSigma != nullptr) << ' ' << (p.Mask != nullptr) << ' '
      << p.FastMode;
  // The output's size: the buffered-weights kernel's gather grid (BufferedWeightsServe) and the
  // column kernel's rows (ColumnThreeRowsPay).
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    key << " n" << p.OutputSize[a];
  }
  for (unsigned int a = 0; p.PerAxis && a < p.Dimension; ++a)
  {
    key << " s" << p.AxisPatchSize[a] << " d" << p.AxisPatchDistance[a];
  }
  for (int v : o.ColumnShape)
  {
    key << " c" << v;
  }
  for (int v : o.TileShape)
  {
    key << " t" << v;
  }
  key << " r" << o.SharedRowsKernelOff << " b" << o.BufferedWeightsOff << o.BufferedWeightsForced << " x"
      << o.SplitBoxesOff << o.SplitBoxesForced;
  for (int v : o.SharedRowsShape)
  {
    key << " r" << v;
  }
  for (int v : o.BufferedWeightsShape)
  {
    key << " b" << v;
  }
  return key.str();
}

/** The in-memory module cache's key of a configuration: its macros and the extra NVRTC options
 * (CompileKernel adds them). */
std::string
ModuleKey(const KernelConfig & config)
{
  std::ostringstream key;
  for (const auto & m : config.Macros())
  {
    key << m << ' ';
  }
  for (const auto & o : GetOverrides().NvrtcOptions)
  {
    key << o << ' ';
  }
  return key.str();
}
} // namespace

CUDADevice *
CUDADevice::Get(std::string & why)
{
  return Get(GetOverrides().Devices.front(), why); // Initialize refuses invalid overrides
}

CUDADevice *
CUDADevice::Get(int ordinal, std::string & why)
{
  static std::mutex                                 mutex;
  static std::map<int, std::unique_ptr<CUDADevice>> devices;
  static std::map<int, std::string>                 failures;
  const std::lock_guard<std::mutex>                 lock(mutex);
  if (failures.count(ordinal) == 0)
  {
    auto        d = std::make_unique<CUDADevice>();
    std::string failure;
    if (d->Initialize(ordinal, failure))
    {
      devices[ordinal] = std::move(d);
    }
    failures[ordinal] = failure;
  }
  why = failures[ordinal];
  const auto it = devices.find(ordinal);
  return it == devices.end() ? nullptr : it->second.get();
}

bool
CUDADevice::Initialize(int ordinal, std::string & why)
{
  const Overrides o = GetOverrides();
  if (!o.Invalid.empty())
  {
    why = o.Invalid;
    return false;
  }
  m_Driver = cuda::GetDriver(why);
  if (m_Driver == nullptr)
  {
    return false;
  }
  m_Nvrtc = cuda::GetNvrtc(why);
  if (m_Nvrtc == nullptr)
  {
    return false;
  }
  int count = 0;
  if (m_Driver->cuDeviceGetCount(&count) != cuda::CUDA_SUCCESS || ordinal < 0 || ordinal >= count)
  {
    why = "the CUDA device " + std::to_string(ordinal) + " does not exist: the driver sees " + std::to_string(count) +
          " device(s); name devices 0 to " + std::to_string(count - 1) + " (CUDANONLOCALMEANS_DEVICE or SetDevices)";
    return false;
  }
  cuda::CUresult r = m_Driver->cuDeviceGet(&m_Device, ordinal);
  if (r == cuda::CUDA_SUCCESS)
  {
    r = m_Driver->cuDevicePrimaryCtxRetain(&m_Context, m_Device);
  }
  if (r != cuda::CUDA_SUCCESS)
  {
    why = "the CUDA device " + std::to_string(ordinal) + " cannot be used: " + cuda::DescribeResult(*m_Driver, r);
    return false;
  }
  m_Ordinal = ordinal;
  if (!QueryLimits(why))
  {
    return false;
  }
  m_Staging = std::make_unique<StagingPool>(*m_Driver);
  return true;
}

bool
CUDADevice::QueryLimits(std::string & why)
{
  char                 name[256] = {};
  int                  major = 0, minor = 0;
  int                  optIn = 0;
  const auto &         d = *m_Driver;
  const cuda::CUresult results[] = {
    d.cuDeviceGetName(name, sizeof(name) - 1, m_Device),
    d.cuDeviceGetAttribute(&major, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, m_Device),
    d.cuDeviceGetAttribute(&minor, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, m_Device),
    d.cuDeviceGetAttribute(&m_Limits.Multiprocessors, cuda::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, m_Device),
    d.cuDeviceGetAttribute(&m_Limits.SharedPerBlock, cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, m_Device),
    d.cuDeviceGetAttribute(&optIn, cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, m_Device),
    d.cuDeviceGetAttribute(
      &m_Limits.SharedPerMultiprocessor, cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, m_Device),
    d.cuDriverGetVersion(&m_DriverVersion)
  };
  for (const cuda::CUresult r : results)
  {
    if (r != cuda::CUDA_SUCCESS)
    {
      why = "the CUDA device's properties cannot be read: " + cuda::DescribeResult(d, r);
      return false;
    }
  }
  m_Limits.SharedPerBlockOptIn = std::max(optIn, m_Limits.SharedPerBlock);
  m_Limits.Architecture = major * 10 + minor;
  std::ostringstream os;
  os << name << " (sm_" << m_Limits.Architecture << ", " << m_Limits.Multiprocessors << " SMs, driver "
     << VersionText(m_DriverVersion) << ", NVRTC " << VersionText(NvrtcVersion(*m_Nvrtc)) << ")";
  m_Description = os.str();
  return true;
}

DeviceLimits
CUDADevice::Limits() const
{
  DeviceLimits limits = m_Limits;
  std::size_t  freeBytes = 0, totalBytes = 0;
  ITK_NLM_CUDA_CHECK(*m_Driver, cuMemGetInfo(&freeBytes, &totalBytes));
  limits.FreeMemory = freeBytes;
  return limits;
}

KernelConfig
CUDADevice::Configuration(const NonLocalMeansBackend::Problem & problem,
                          const Overrides &                     overrides,
                          const PlanningAborted &               aborted)
{
  if (overrides.ListConfigurations)
  {
    return ChooseConfiguration(problem, m_Limits, overrides, aborted); // prints the ranking every time
  }
  const std::string                 key = ConfigurationKey(problem, overrides);
  const std::lock_guard<std::mutex> lock(m_ConfigurationMutex);
  auto                              it = m_Configurations.find(key);
  if (it == m_Configurations.end())
  {
    it = m_Configurations.emplace(key, ChooseConfiguration(problem, m_Limits, overrides, aborted)).first;
  }
  return it->second;
}

const LoadedModule &
CUDADevice::Module(const KernelConfig & config, NonLocalMeansBackend::RunStatistics & statistics)
{
  const std::lock_guard<std::mutex> lock(m_ModuleMutex);
  const std::string                 key = ModuleKey(config);
  auto                              it = m_Modules.find(key);
  if (it != m_Modules.end())
  {
    statistics.KernelFromMemoryCache = true;
    return it->second;
  }
  // The padding module of these pixel types, where this device has none yet (one for every
  // configuration of them), then the configuration's.
  const KernelConfig padding = PaddingConfig(config);
  const std::string  paddingKey = ModuleKey(padding);
  if (m_PaddingKernels.find(paddingKey) == m_PaddingKernels.end())
  {
    CompiledKernel   paddingCompiled = CompileKernel(*m_Nvrtc, padding, m_Limits.Architecture);
    cuda::CUfunction pad = nullptr;
    ITK_NLM_CUDA_CHECK(*m_Driver,
                       cuModuleGetFunction(&pad, LoadModule(padding, paddingCompiled, statistics), "nlm_pad"));
    m_PaddingKernels.emplace(paddingKey, pad);
  }
  LoadedModule   m;
  CompiledKernel compiled = CompileKernel(*m_Nvrtc, config, m_Limits.Architecture);
  m.Module = LoadModule(config, compiled, statistics);
  statistics.KernelFromDiskCache = compiled.FromDiskCache;
  FindKernels(config, m);
  m.Pad = m_PaddingKernels.at(paddingKey);
  return m_Modules.emplace(key, m).first->second;
}

cuda::CUmodule
CUDADevice::LoadModule(const KernelConfig &                  config,
                       CompiledKernel &                      compiled,
                       NonLocalMeansBackend::RunStatistics & statistics)
{
  cuda::CUmodule module = nullptr;
  cuda::CUresult r = LoadImage(compiled, module);
  const bool     badImage =
    r == cuda::CUDA_ERROR_INVALID_IMAGE || r == cuda::CUDA_ERROR_INVALID_PTX || r == cuda::CUDA_ERROR_NO_BINARY_FOR_GPU;
  if (badImage && compiled.FromDiskCache)
  {
    // A cached module the driver does not load: remove it, compile again and store that instead.
    RemoveCacheEntry(compiled.CachePath);
    compiled = CompileKernel(*m_Nvrtc, config, m_Limits.Architecture, CacheUse::WriteOnly);
    statistics.KernelCacheRepaired = true;
    r = LoadImage(compiled, module);
  }
  if (r != cuda::CUDA_SUCCESS)
  {
    ThrowLoadFailure(compiled, r);
  }
  statistics.CompileMilliseconds += compiled.Milliseconds;
  return module;
}

cuda::CUresult
CUDADevice::LoadImage(const CompiledKernel & compiled, cuda::CUmodule & module) const
{
  std::vector<char> image = compiled.Image;
  if (compiled.IsPTX)
  {
    image.push_back('\0');
  }
  return m_Driver->cuModuleLoadData(&module, image.data());
}

void
CUDADevice::ThrowLoadFailure(const CompiledKernel & compiled, cuda::CUresult r) const
{
  const auto & d = *m_Driver;
  const int    nvrtc = NvrtcVersion(*m_Nvrtc);
  if ((r == cuda::CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == cuda::CUDA_ERROR_NO_BINARY_FOR_GPU ||
       r == cuda::CUDA_ERROR_INVALID_IMAGE) &&
      m_DriverVersion < nvrtc)
  {
    itkGenericExceptionMacro("The NVIDIA driver (CUDA "
                             << VersionText(m_DriverVersion) << ") is too old for code compiled by NVRTC "
                             << VersionText(nvrtc) << " (" << cuda::DescribeResult(d, r)
                             << "). Update the NVIDIA driver, or point CUDANONLOCALMEANS_NVRTC_LIBRARY at an NVRTC "
                                "no newer than the driver.");
  }
  itkGenericExceptionMacro("The CUDA driver could not load the kernels NVRTC compiled ("
                           << compiled.Target << "): " << cuda::DescribeResult(d, r)
                           << (compiled.CachePath.empty() ? std::string() : "; stored in " + compiled.CachePath));
}

void
CUDADevice::FindKernels(const KernelConfig & config, LoadedModule & m) const
{
  const auto & d = *m_Driver;
  ITK_NLM_CUDA_CHECK(d, cuModuleGetFunction(&m.Fast, m.Module, "nlm_fast"));
  if (config.WeightBatch > 0)
  {
    ITK_NLM_CUDA_CHECK(d, cuModuleGetFunction(&m.Gather, m.Module, "nlm_gather"));
  }
  const int shared = static_cast<int>(config.SharedBytes());
  if (shared > m_Limits.SharedPerBlock)
  {
    ITK_NLM_CUDA_CHECK(d, cuFuncSetAttribute(m.Fast, cuda::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared));
  }
  int registers = 0;
  ITK_NLM_CUDA_CHECK(d, cuFuncGetAttribute(&registers, cuda::CU_FUNC_ATTRIBUTE_NUM_REGS, m.Fast));
  m.ResidentBlocksPerMultiprocessor = ResidentBlocksPerMultiprocessor(config, registers, m_Limits);
}

void
CUDADevice::PushContext() const
{
  ITK_NLM_CUDA_CHECK(*m_Driver, cuCtxPushCurrent(m_Context));
}

void
CUDADevice::PopContext() const
{
  cuda::CUcontext popped = nullptr;
  m_Driver->cuCtxPopCurrent(&popped); // from a destructor: nothing to report to
}

DeviceBuffer::DeviceBuffer(const cuda::DriverAPI & driver, std::size_t bytes)
  : m_Driver(driver)
{
  const cuda::CUresult r = driver.cuMemAlloc(&m_Pointer, std::max<std::size_t>(bytes, 1));
  if (r != cuda::CUDA_SUCCESS)
  {
    itkGenericExceptionMacro("Could not allocate " << bytes / (1024.0 * 1024.0)
                                                   << " MiB on the GPU: " << cuda::DescribeResult(driver, r)
                                                   << ". Lower MaximumGPUMemory to process the image in smaller "
                                                      "slabs, or free GPU memory.");
  }
}

DeviceBuffer::~DeviceBuffer()
{
  if (m_Pointer != 0)
  {
    m_Driver.cuMemFree(m_Pointer);
  }
}

Stream::Stream(const cuda::DriverAPI & driver, Priority priority)
  : m_Driver(driver)
{
  if (priority == Priority::Normal)
  {
    ITK_NLM_CUDA_CHECK(driver, cuStreamCreate(&m_Stream, cuda::CU_STREAM_NON_BLOCKING));
    return;
  }
  int least = 0, greatest = 0; // the greatest priority is the lowest number
  ITK_NLM_CUDA_CHECK(driver, cuCtxGetStreamPriorityRange(&least, &greatest));
  ITK_NLM_CUDA_CHECK(driver, cuStreamCreateWithPriority(&m_Stream, cuda::CU_STREAM_NON_BLOCKING, greatest));
}

Stream::~Stream()
{
  m_Driver.cuStreamSynchronize(m_Stream);
  m_Driver.cuStreamDestroy(m_Stream);
}

StreamsDrained::~StreamsDrained()
{
  for (const cuda::CUstream stream : m_Streams)
  {
    m_Driver.cuStreamSynchronize(stream);
  }
}

Event::Event(const cuda::DriverAPI & driver)
  : m_Driver(driver)
{
  ITK_NLM_CUDA_CHECK(driver, cuEventCreate(&m_Event, 0));
}

Event::~Event()
{
  m_Driver.cuEventDestroy(m_Event);
}

void
Event::Record(cuda::CUstream stream) const
{
  ITK_NLM_CUDA_CHECK(m_Driver, cuEventRecord(m_Event, stream));
}

double
Event::Since(const Event & start) const
{
  float ms = 0.0f;
  ITK_NLM_CUDA_CHECK(m_Driver, cuEventElapsedTime(&ms, start.m_Event, m_Event));
  return ms;
}

} // namespace nlm
} // namespace itk
