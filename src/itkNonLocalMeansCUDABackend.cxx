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
#include "itkNonLocalMeansCUDADevice.h"
#include "itkNonLocalMeansExtensions.h"
#include "itkNonLocalMeansInputChecks.h"
#include "itkNonLocalMeansLaunchPlan.h"
#include "itkNonLocalMeansProgress.h"
#include "itkNonLocalMeansSlabPipeline.h"
#include "itkNonLocalMeansStagedCopies.h"
#include "itkMultiThreaderBase.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace itk
{
namespace
{
using nlm::Clock;
using nlm::MillisecondsSince;

/** Fills the statistics' configuration, slab count and memory from the launch plan. */
void
RecordPlan(NonLocalMeansBackend::RunStatistics & statistics, const nlm::LaunchPlan & plan, double setupMilliseconds)
{
  statistics.SetupMilliseconds = setupMilliseconds;
  statistics.Configuration = plan.Config.Describe();
  statistics.Slabs = static_cast<unsigned int>(plan.Slabs);
  statistics.DeviceBytes = plan.DeviceBytes;
}

bool
OutputIsEmpty(const NonLocalMeansBackend::Problem & p)
{
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    if (p.OutputSize[a] == 0)
    {
      return true;
    }
  }
  return false;
}

// Slabs per device when several share a Run (the faster ones take more).
constexpr long long SlabsPerDevice = 2;

/** The devices a problem names (Problem::Devices, else CUDANONLOCALMEANS_DEVICE); throws, naming
 * the device, when one cannot be used. */
std::vector<nlm::CUDADevice *>
DevicesOf(const NonLocalMeansBackend::Problem & p, nlm::CUDADevice & defaultDevice)
{
  std::vector<int> ordinals(p.Devices, p.Devices + p.NumberOfDevices);
  if (ordinals.empty())
  {
    ordinals = nlm::GetOverrides().Devices;
  }
  std::vector<nlm::CUDADevice *> devices;
  for (const int ordinal : ordinals)
  {
    std::string       why;
    nlm::CUDADevice * device =
      (ordinal == defaultDevice.Ordinal()) ? &defaultDevice : nlm::CUDADevice::Get(ordinal, why);
    if (device == nullptr)
    {
      itkGenericExceptionMacro("The CUDA backend cannot use device " << ordinal << ": " << why);
    }
    devices.push_back(device);
  }
  return devices;
}

/** "NVIDIA H200 (...)" for one device, "... x 2" for one listed twice, joined with " + " otherwise. */
std::string
Describe(const std::vector<nlm::CUDADevice *> & devices)
{
  std::string text;
  for (std::size_t i = 0; i < devices.size(); ++i)
  {
    if (i == 0 || devices[i]->Description() != devices[0]->Description())
    {
      text += (i == 0 ? "" : " + ") + devices[i]->Description();
    }
  }
  return devices.size() > 1 && text == devices[0]->Description() ? text + " x " + std::to_string(devices.size()) : text;
}

/** The limits one plan must keep on every device: the smallest of each, with the free memory (and
 * MaximumGPUMemory, in `problem`) shared by the slabs that run on one device at once, and the
 * number of distinct devices that share the slabs. */
nlm::DeviceLimits
SharedLimits(const std::vector<nlm::CUDADevice *> & devices, NonLocalMeansBackend::Problem & problem)
{
  nlm::DeviceLimits shared;
  std::size_t       mostSharing = 1;
  for (std::size_t i = 0; i < devices.size(); ++i)
  {
    const auto               sharing = static_cast<std::size_t>(std::count(devices.begin(), devices.end(), devices[i]));
    const nlm::ScopedContext context(*devices[i]);
    nlm::DeviceLimits        l = devices[i]->Limits();
    l.FreeMemory /= sharing;
    mostSharing = std::max(mostSharing, sharing);
    if (i == 0)
    {
      shared = l;
      continue;
    }
    shared.Architecture = std::min(shared.Architecture, l.Architecture);
    shared.Multiprocessors = std::min(shared.Multiprocessors, l.Multiprocessors);
    shared.SharedPerBlock = std::min(shared.SharedPerBlock, l.SharedPerBlock);
    shared.SharedPerBlockOptIn = std::min(shared.SharedPerBlockOptIn, l.SharedPerBlockOptIn);
    shared.SharedPerMultiprocessor = std::min(shared.SharedPerMultiprocessor, l.SharedPerMultiprocessor);
    shared.FreeMemory = std::min(shared.FreeMemory, l.FreeMemory);
  }
  problem.MaximumGPUMemory /= mostSharing;
  shared.Devices = static_cast<int>(std::set<nlm::CUDADevice *>(devices.begin(), devices.end()).size());
  return shared;
}

/** Adds the times and flags of one device's part of a Run. */
void
Accumulate(NonLocalMeansBackend::RunStatistics & total, const NonLocalMeansBackend::RunStatistics & part)
{
  total.KernelMilliseconds += part.KernelMilliseconds;
  total.PadMilliseconds += part.PadMilliseconds;
  total.UploadMilliseconds += part.UploadMilliseconds;
  total.DownloadMilliseconds += part.DownloadMilliseconds;
  total.CompileMilliseconds += part.CompileMilliseconds;
  total.AllocationMilliseconds += part.AllocationMilliseconds;
  total.KernelFromDiskCache = total.KernelFromDiskCache || part.KernelFromDiskCache;
  total.KernelFromMemoryCache = total.KernelFromMemoryCache || part.KernelFromMemoryCache;
  total.KernelCacheRepaired = total.KernelCacheRepaired || part.KernelCacheRepaired;
}
} // namespace

namespace nlm
{
/** \class DeviceTeam
 * \brief The devices of one Run: each takes the next slab until none is left; the calling thread
 * reports progress and passes an abort on. The first error of any device stops the others and is
 * rethrown; the output is then incomplete and never handed on. */
class DeviceTeam
{
public:
  DeviceTeam(const LaunchPlan & plan, const Overrides & overrides, std::size_t members, unsigned int workUnits)
    : m_Plan(plan)
    , m_Overrides(overrides)
    , m_WorkUnits(std::max(1u, workUnits / static_cast<unsigned int>(std::max<std::size_t>(1, members))))
  {}

  /** One device's share (in its own thread): errors are kept for Finish. */
  void
  Work(CUDADevice & device, const NonLocalMeansBackend::Problem & problem)
  {
    NonLocalMeansBackend::RunStatistics statistics;
    try
    {
      WorkOnSlabs(device, problem, statistics);
    }
    catch (const ProcessAborted &)
    {
      Keep(std::current_exception(), true);
    }
    catch (...)
    {
      Keep(std::current_exception(), false);
    }
    const std::lock_guard<std::mutex> lock(m_Mutex);
    m_Parts.push_back(statistics);
    ++m_Finished;
  }

  /** In the calling thread until every device is done: progress, and the caller's abort request. */
  void
  ReportUntilDone(ProcessObject * caller, std::size_t members)
  {
    while (m_Finished < members)
    {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (caller != nullptr)
      {
        ReportProgress(caller, 0.99 * static_cast<double>(m_TilesDone) / static_cast<double>(m_Plan.TotalTiles));
        if (caller->GetAbortGenerateData())
        {
          m_AbortRequested = true;
          m_Stop = true;
        }
      }
    }
  }

  /** Rethrows the first error (or the abort); otherwise adds the devices' statistics. */
  void
  Finish(ProcessObject * caller, NonLocalMeansBackend::RunStatistics & statistics)
  {
    if (m_Error)
    {
      std::rethrow_exception(m_Error);
    }
    if (m_AbortRequested || m_NextSlab < m_Plan.Slabs)
    {
      ThrowIfAborted(caller);
      itkGenericExceptionMacro("Internal error: the devices stopped before every slab was computed.");
    }
    for (const auto & part : m_Parts)
    {
      Accumulate(statistics, part);
    }
  }

private:
  void
  WorkOnSlabs(CUDADevice &                          device,
              const NonLocalMeansBackend::Problem & problem,
              NonLocalMeansBackend::RunStatistics & statistics)
  {
    const ScopedContext  context(device);
    const DeviceLimits   limits = device.Limits();
    const LoadedModule & module = device.Module(m_Plan.Config, statistics);
    const SlabStreams    streams(device.Driver());
    auto                 threader = MultiThreaderBase::New(); // the caller's is not shared between threads
    StagedCopies         staged(device, threader, m_WorkUnits, m_Overrides.StagingChunkBytes);
    SlabRun              run{
      problem, m_Plan, module, device.Driver(), staged, streams, nullptr, threader, m_WorkUnits, statistics
    };
    run.InputChecked = true;
    run.SharedTilesDone = &m_TilesDone;
    run.SharedStop = &m_Stop;
    const long long residentBlocks =
      static_cast<long long>(limits.Multiprocessors) * module.ResidentBlocksPerMultiprocessor;
    for (long long index = m_NextSlab++; index < m_Plan.Slabs && !m_Stop; index = m_NextSlab++)
    {
      SlabPipeline(run, PlanSlab(problem, m_Plan, index, residentBlocks, m_Overrides)).Run();
    }
  }

  /** Keeps the first error; a real error replaces an abort (which the stop after it caused). */
  void
  Keep(std::exception_ptr error, bool isAbort)
  {
    const std::lock_guard<std::mutex> lock(m_Mutex);
    if (!m_Error || (m_ErrorIsAbort && !isAbort))
    {
      m_Error = error;
      m_ErrorIsAbort = isAbort;
    }
    m_Stop = true;
  }

  const LaunchPlan &                               m_Plan;
  const Overrides &                                m_Overrides;
  const unsigned int                               m_WorkUnits;
  std::atomic<long long>                           m_NextSlab{ 0 };
  std::atomic<long long>                           m_TilesDone{ 0 };
  std::atomic<bool>                                m_Stop{ false };
  std::atomic<std::size_t>                         m_Finished{ 0 };
  bool                                             m_AbortRequested{ false };
  std::mutex                                       m_Mutex;
  std::exception_ptr                               m_Error;
  bool                                             m_ErrorIsAbort{ false };
  std::vector<NonLocalMeansBackend::RunStatistics> m_Parts;
};
} // namespace nlm

bool
NonLocalMeansCUDABackend::IsUsable(std::string & whyNot)
{
  return nlm::CUDADevice::Get(whyNot) != nullptr;
}

NonLocalMeansCUDABackend::Pointer
NonLocalMeansCUDABackend::Create(std::string & whyNot)
{
  nlm::CUDADevice * device = nlm::CUDADevice::Get(whyNot);
  if (device == nullptr)
  {
    return nullptr;
  }
  Pointer backend = new Self(*device);
  backend->UnRegister();
  return backend;
}

void
NonLocalMeansCUDABackend::Run(const Problem &     problem,
                              ProcessObject *     caller,
                              MultiThreaderBase * threader,
                              unsigned int        numberOfWorkUnits)
{
  m_Statistics = RunStatistics{};
  const auto setupStart = Clock::now();
  const auto devices = DevicesOf(problem, m_Device);
  m_Statistics.Device = Describe(devices);
  if (OutputIsEmpty(problem))
  {
    nlm::VerifyInputIsFinite(problem, threader, numberOfWorkUnits);
    return;
  }
  nlm::ReportProgress(caller, 0.0);
  if (devices.size() == 1)
  {
    this->RunOnOneDevice(*devices.front(), problem, caller, threader, numberOfWorkUnits, setupStart);
  }
  else
  {
    this->RunOnDevices(devices, problem, caller, threader, numberOfWorkUnits, setupStart);
  }
  nlm::KeepInputWhereMasked(problem, threader, numberOfWorkUnits);
  nlm::ReportProgress(caller, 1.0);
}

void
NonLocalMeansCUDABackend::RunOnOneDevice(nlm::CUDADevice &   device,
                                         const Problem &     problem,
                                         ProcessObject *     caller,
                                         MultiThreaderBase * threader,
                                         unsigned int        numberOfWorkUnits,
                                         TimePoint           setupStart)
{
  const nlm::ScopedContext context(device);
  const nlm::Overrides     overrides = nlm::GetOverrides();
  const nlm::DeviceLimits  limits = device.Limits();
  const auto               aborted = [caller] { return caller != nullptr && caller->GetAbortGenerateData(); };
  const auto               choose = [&](const nlm::Overrides & o) { return device.Configuration(problem, o, aborted); };
  const nlm::LaunchPlan    plan =
    nlm::PlanSlabs(problem, nlm::ConfigurationThatFits(problem, limits, overrides, choose), limits);
  const nlm::LoadedModule & module = device.Module(plan.Config, m_Statistics);
  RecordPlan(m_Statistics, plan, MillisecondsSince(setupStart));

  const nlm::SlabStreams streams(device.Driver());
  nlm::StagedCopies      staged(device, threader, numberOfWorkUnits, overrides.StagingChunkBytes);
  nlm::SlabRun           run{ problem, plan,   module,   device.Driver(),   staged,
                    streams, caller, threader, numberOfWorkUnits, m_Statistics };
  const long long        residentBlocks =
    static_cast<long long>(limits.Multiprocessors) * module.ResidentBlocksPerMultiprocessor;
  for (long long index = 0; index < plan.Slabs; ++index)
  {
    const nlm::SlabPlan slab = nlm::PlanSlab(problem, plan, index, residentBlocks, overrides);
    nlm::SlabPipeline(run, slab).Run();
  }
}

void
NonLocalMeansCUDABackend::RunOnDevices(const std::vector<nlm::CUDADevice *> & devices,
                                       const Problem &                        problem,
                                       ProcessObject *                        caller,
                                       MultiThreaderBase *                    threader,
                                       unsigned int                           numberOfWorkUnits,
                                       TimePoint                              setupStart)
{
  const nlm::Overrides    overrides = nlm::GetOverrides();
  const auto              aborted = [caller] { return caller != nullptr && caller->GetAbortGenerateData(); };
  Problem                 shared = problem;
  const nlm::DeviceLimits limits = SharedLimits(devices, shared);
  const auto choose = [&](const nlm::Overrides & o) { return nlm::ChooseConfiguration(shared, limits, o, aborted); };
  const nlm::LaunchPlan plan = nlm::PlanSlabs(shared,
                                              nlm::ConfigurationThatFits(shared, limits, overrides, choose),
                                              limits,
                                              SlabsPerDevice * static_cast<long long>(devices.size()));
  RecordPlan(m_Statistics, plan, MillisecondsSince(setupStart));
  const auto checkStart = Clock::now();
  nlm::VerifyInputIsFinite(problem, threader, numberOfWorkUnits); // once, before any device starts
  m_Statistics.CheckMilliseconds = MillisecondsSince(checkStart);

  nlm::DeviceTeam          team(plan, overrides, devices.size(), numberOfWorkUnits);
  std::vector<std::thread> workers;
  for (nlm::CUDADevice * device : devices)
  {
    workers.emplace_back([&team, device, &problem] { team.Work(*device, problem); });
  }
  team.ReportUntilDone(caller, workers.size());
  for (auto & worker : workers)
  {
    worker.join();
  }
  team.Finish(caller, m_Statistics);
}

} // end namespace itk
