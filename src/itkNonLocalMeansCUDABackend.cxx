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
#include "itkNonLocalMeansInputChecks.h"
#include "itkNonLocalMeansLaunchPlan.h"
#include "itkNonLocalMeansProgress.h"
#include "itkNonLocalMeansSlabPipeline.h"
#include "itkNonLocalMeansStagedCopies.h"

#include <chrono>

namespace itk
{
namespace
{
using Clock = std::chrono::steady_clock;

double
MillisecondsSince(Clock::time_point start)
{
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

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
} // namespace

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
  if (!problem.FastMode)
  {
    itkGenericExceptionMacro("The CUDA backend computes fast mode only; compute the classic algorithm (FastMode "
                             "off) on the CPU backend.");
  }
  m_Statistics = RunStatistics{};
  const auto        setupStart = Clock::now();
  nlm::CUDADevice & device = m_Device;
  m_Statistics.Device = device.Description();
  if (OutputIsEmpty(problem))
  {
    nlm::VerifyInputIsFinite(problem, threader, numberOfWorkUnits);
    return;
  }
  nlm::ReportProgress(caller, 0.0);

  const nlm::ScopedContext  context(device);
  const nlm::Overrides      overrides = nlm::GetOverrides();
  const nlm::DeviceLimits   limits = device.Limits();
  const auto                aborted = [caller] { return caller != nullptr && caller->GetAbortGenerateData(); };
  const nlm::LaunchPlan     plan = nlm::PlanSlabs(problem, device.Configuration(problem, overrides, aborted), limits);
  const nlm::LoadedModule & module = device.Module(plan.Config, m_Statistics);
  RecordPlan(m_Statistics, plan, MillisecondsSince(setupStart));

  const nlm::Stream kernels(device.Driver()), copies(device.Driver());
  nlm::StagedCopies staged(device, threader, numberOfWorkUnits, overrides.StagingChunkBytes);
  nlm::SlabRun      run{ problem,      plan,   module,   device.Driver(),   staged,      kernels.Get(),
                    copies.Get(), caller, threader, numberOfWorkUnits, m_Statistics };
  const long long   residentBlocks =
    static_cast<long long>(limits.Multiprocessors) * module.ResidentBlocksPerMultiprocessor;
  for (long long index = 0; index < plan.Slabs; ++index)
  {
    const nlm::SlabPlan slab = nlm::PlanSlab(problem, plan, index, residentBlocks, overrides);
    nlm::SlabPipeline(run, slab).Run();
  }
  nlm::ReportProgress(caller, 1.0);
}

} // end namespace itk
