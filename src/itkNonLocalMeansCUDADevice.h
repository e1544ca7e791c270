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
#ifndef itkNonLocalMeansCUDADevice_h
#define itkNonLocalMeansCUDADevice_h

// The CUDA device of the backend: driver, NVRTC, primary context, limits, the modules compiled so
// far and the page-locked staging pool; and RAII handles of device objects (context scope, device
// memory, streams, events). Private to the library.

#include "itkCudaDriver.h"
#include "itkNonLocalMeansBackend.h"
#include "itkNonLocalMeansKernelCompiler.h"
#include "itkNonLocalMeansLaunchPlan.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace itk
{
class MultiThreaderBase;

namespace nlm
{

/** A loaded module of one configuration and the kernels in it. */
struct LoadedModule
{
  cuda::CUmodule   Module{ nullptr };
  cuda::CUfunction Pad{ nullptr }; // nlm_pad, of the configuration's padding module
  cuda::CUfunction Fast{ nullptr };
  cuda::CUfunction Gather{ nullptr };                    // the buffered-weights kernel's gather (null for the others)
  int              ResidentBlocksPerMultiprocessor{ 1 }; // of Fast
};

/** Page-locked host buffers of StagingBytes each, shared by every Run of the process (the driver
 * makes them page-locked once; they are kept for the life of the process). */
class StagingPool
{
public:
  /** Bytes of one page-locked staging buffer. */
  static constexpr std::size_t StagingBytes = std::size_t{ 16 } << 20;

  explicit StagingPool(const cuda::DriverAPI & driver)
    : m_Driver(driver)
  {}

  /** `count` buffers from the pool, or new ones (all or none): false when not all can be had.
   * Call with the context current. */
  bool
  Acquire(void ** buffers, int count, MultiThreaderBase * threader, unsigned int workUnits);

  void
  Release(void * buffer);

private:
  std::vector<void *>
  NewBuffers(int count, MultiThreaderBase * threader, unsigned int workUnits);

  const cuda::DriverAPI & m_Driver;
  std::mutex              m_Mutex;
  std::vector<void *>     m_Free;
};

/** \class CUDADevice
 * \brief The process-wide state of the CUDA device the backend uses; guarded by mutexes, shared by
 * every filter. */
class CudaNonLocalMeans_EXPORT CUDADevice
{
public:
  /** The default device (the first of Overrides::Devices), initialized at the first call; null
   * (with `why`) when no driver, device or NVRTC can be used, or when the overrides are invalid. */
  static CUDADevice *
  Get(std::string & why);

  /** The device of a CUDA ordinal, initialized at its first call, with its own primary context,
   * module cache and staging pool; null (with `why`) when it cannot be used. */
  static CUDADevice *
  Get(int ordinal, std::string & why);

  /** The device's CUDA ordinal. */
  int
  Ordinal() const
  {
    return m_Ordinal;
  }

  const cuda::DriverAPI &
  Driver() const
  {
    return *m_Driver;
  }

  /** "NVIDIA H200 (sm_90, 132 SMs, driver 13.0, NVRTC 13.0)". */
  const std::string &
  Description() const
  {
    return m_Description;
  }

  /** Compute capability as 10 * major + minor. */
  int
  Architecture() const
  {
    return m_Limits.Architecture;
  }

  /** The planner's view of the device, with the memory free now. Call with the context current. */
  DeviceLimits
  Limits() const;

  /** ChooseConfiguration for this device, memoized per problem shape (`aborted` stops it). */
  KernelConfig
  Configuration(const NonLocalMeansBackend::Problem & problem,
                const Overrides &                     overrides,
                const PlanningAborted &               aborted = {});

  /** The module of a configuration, with nlm_pad from the padding module its runs use
   * (PaddingConfig, shared by every configuration of the same pixel types): each from memory, else
   * compiled (or read from the disk cache) and loaded. A cached module the driver does not load is
   * removed, compiled again and stored anew. Records compile time and cache use in `statistics`.
   * Call with the context current. */
  const LoadedModule &
  Module(const KernelConfig & config, NonLocalMeansBackend::RunStatistics & statistics);

  StagingPool &
  Staging()
  {
    return *m_Staging;
  }

  void
  PushContext() const;
  void
  PopContext() const;

  CUDADevice() = default;
  ITK_DISALLOW_COPY_AND_MOVE(CUDADevice);

private:
  bool
  Initialize(int ordinal, std::string & why);
  bool
  QueryLimits(std::string & why);
  /** Loads `compiled`, the module of `config` (CompileKernel); where it came from the disk cache and
   * the driver does not load it, removes the entry, compiles again (into `compiled`), stores and
   * loads that. Adds the compile time to `statistics`. */
  cuda::CUmodule
  LoadModule(const KernelConfig & config, CompiledKernel & compiled, NonLocalMeansBackend::RunStatistics & statistics);
  cuda::CUresult
  LoadImage(const CompiledKernel & compiled, cuda::CUmodule & module) const;
  [[noreturn]] void
  ThrowLoadFailure(const CompiledKernel & compiled, cuda::CUresult result) const;
  void
  FindKernels(const KernelConfig & config, LoadedModule & module) const;

  const cuda::DriverAPI *      m_Driver{ nullptr };
  const cuda::NvrtcAPI *       m_Nvrtc{ nullptr };
  cuda::CUdevice               m_Device{ 0 };
  int                          m_Ordinal{ 0 };
  cuda::CUcontext              m_Context{ nullptr };
  DeviceLimits                 m_Limits;
  int                          m_DriverVersion{ 0 };
  std::string                  m_Description;
  std::unique_ptr<StagingPool> m_Staging;

  std::mutex                              m_ModuleMutex;
  std::map<std::string, LoadedModule>     m_Modules;
  std::map<std::string, cuda::CUfunction> m_PaddingKernels; // nlm_pad per padding module (m_ModuleMutex)
  std::mutex                              m_ConfigurationMutex;
  std::map<std::string, KernelConfig>     m_Configurations;
};

/** Makes the device's primary context current for the lifetime of the object. */
class ScopedContext
{
public:
  explicit ScopedContext(const CUDADevice & device)
    : m_Device(device)
  {
    device.PushContext();
  }
  ~ScopedContext() { m_Device.PopContext(); }
  ITK_DISALLOW_COPY_AND_MOVE(ScopedContext);

private:
  const CUDADevice & m_Device;
};

/** Device memory, freed on scope exit. */
class DeviceBuffer
{
public:
  DeviceBuffer(const cuda::DriverAPI & driver, std::size_t bytes);
  ~DeviceBuffer();
  ITK_DISALLOW_COPY_AND_MOVE(DeviceBuffer);
  cuda::CUdeviceptr
  Get() const
  {
    return m_Pointer;
  }

private:
  const cuda::DriverAPI & m_Driver;
  cuda::CUdeviceptr       m_Pointer{ 0 };
};

/** A non-blocking stream, synchronized and destroyed on scope exit. The blocks of the kernels
 * launched on a stream of the highest priority start before the waiting blocks of other streams'
 * kernels. */
class Stream
{
public:
  enum class Priority
  {
    Normal,
    Highest
  };
  explicit Stream(const cuda::DriverAPI & driver, Priority priority = Priority::Normal);
  ~Stream();
  ITK_DISALLOW_COPY_AND_MOVE(Stream);
  cuda::CUstream
  Get() const
  {
    return m_Stream;
  }

private:
  const cuda::DriverAPI & m_Driver;
  cuda::CUstream          m_Stream{ nullptr };
};

/** Waits, on destruction, until the given streams have no work left: declared after device
 * buffers, it keeps them alive until nothing in flight uses them, also when an exception unwinds
 * the scope (errors are not reported there; the work that failed reports them). */
class StreamsDrained
{
public:
  StreamsDrained(const cuda::DriverAPI & driver, std::vector<cuda::CUstream> streams)
    : m_Driver(driver)
    , m_Streams(std::move(streams))
  {}
  ~StreamsDrained();
  ITK_DISALLOW_COPY_AND_MOVE(StreamsDrained);

private:
  const cuda::DriverAPI &     m_Driver;
  std::vector<cuda::CUstream> m_Streams;
};

/** A CUDA event, destroyed on scope exit. */
class Event
{
public:
  explicit Event(const cuda::DriverAPI & driver);
  ~Event();
  ITK_DISALLOW_COPY_AND_MOVE(Event);
  cuda::CUevent
  Get() const
  {
    return m_Event;
  }
  /** Records the event on `stream`. */
  void
  Record(cuda::CUstream stream) const;
  /** Milliseconds from `start` to this event (both recorded and complete). */
  double
  Since(const Event & start) const;

private:
  const cuda::DriverAPI & m_Driver;
  cuda::CUevent           m_Event{ nullptr };
};

} // namespace nlm
} // namespace itk

#endif
