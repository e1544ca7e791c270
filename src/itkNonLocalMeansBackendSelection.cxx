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
#include "itkNonLocalMeansBackendSelection.h"
#include "itkNonLocalMeansCPUBackend.h"
#include "itkNonLocalMeansCUDABackend.h"

#include <mutex>
#include <set>

namespace itk
{
namespace
{
using Problem = NonLocalMeansBackend::Problem;
using BackendEnum = NonLocalMeansBackendSelection::BackendEnum;

/** An exception's description without its final full stop and spaces, to quote it in a sentence. */
std::string
Quoted(const ExceptionObject & e)
{
  std::string why = e.GetDescription();
  while (!why.empty() && (why.back() == '.' || why.back() == '\n' || why.back() == ' '))
  {
    why.pop_back();
  }
  return why;
}

/** Runs `backend` and fills the outcome. */
void
RunOn(NonLocalMeansBackend *                   backend,
      BackendEnum                              kind,
      const Problem &                          problem,
      ProcessObject *                          caller,
      MultiThreaderBase *                      threader,
      unsigned int                             workUnits,
      NonLocalMeansBackendSelection::Outcome & outcome)
{
  backend->Run(problem, caller, threader, workUnits);
  outcome.Used = kind;
  outcome.Statistics = backend->GetLastRunStatistics();
}

/** Computes on the CUDA backend; false with `whyNot` when Auto should compute on the CPU instead.
 * With Backend CUDA every failure throws. An abort is never retried. */
bool
TryCUDA(const Problem &                          problem,
        BackendEnum                              requested,
        ProcessObject *                          caller,
        MultiThreaderBase *                      threader,
        unsigned int                             workUnits,
        NonLocalMeansBackendSelection::Outcome & outcome,
        std::string &                            whyNot)
{
  NonLocalMeansBackend::Pointer cuda = NonLocalMeansBackendSelection::CreateCUDABackend(whyNot);
  if (cuda.IsNull())
  {
    if (requested == BackendEnum::CUDA)
    {
      itkGenericExceptionMacro("Backend is CUDA, but the CUDA backend cannot be used: "
                               << whyNot << ". Set Backend to Auto or CPU to compute on the CPU.");
    }
    return false;
  }
  try
  {
    RunOn(cuda, BackendEnum::CUDA, problem, caller, threader, workUnits, outcome);
    return true;
  }
  catch (const ProcessAborted &)
  {
    throw;
  }
  catch (const ExceptionObject & e)
  {
    if (requested == BackendEnum::CUDA)
    {
      throw;
    }
    whyNot = "the CUDA backend could not run this problem: " + Quoted(e);
    return false;
  }
}
} // namespace

NonLocalMeansBackendSelection::Outcome
NonLocalMeansBackendSelection::Compute(const Problem &     problem,
                                       BackendEnum         requested,
                                       ProcessObject *     caller,
                                       MultiThreaderBase * threader,
                                       unsigned int        numberOfWorkUnits)
{
  NonLocalMeansBackend::VerifyProblem(problem);
  Outcome     outcome;
  std::string whyCPU;
  if (requested != BackendEnum::CPU &&
      TryCUDA(problem, requested, caller, threader, numberOfWorkUnits, outcome, whyCPU))
  {
    return outcome;
  }
  RunOn(CreateCPUBackend(), BackendEnum::CPU, problem, caller, threader, numberOfWorkUnits, outcome);
  if (requested != BackendEnum::CPU)
  {
    outcome.Statistics.CPUFallbackReason = whyCPU;
    outcome.WarnAboutFallback = ClaimCPUFallbackWarning(whyCPU);
  }
  return outcome;
}

bool
NonLocalMeansBackendSelection::CUDAIsUsable(std::string & whyNot)
{
  return NonLocalMeansCUDABackend::IsUsable(whyNot);
}

NonLocalMeansBackend::Pointer
NonLocalMeansBackendSelection::CreateCPUBackend()
{
  return NonLocalMeansCPUBackend::New().GetPointer();
}

NonLocalMeansBackend::Pointer
NonLocalMeansBackendSelection::CreateCUDABackend(std::string & whyNot)
{
  return NonLocalMeansCUDABackend::Create(whyNot).GetPointer();
}

bool
NonLocalMeansBackendSelection::ClaimCPUFallbackWarning(const std::string & cause)
{
  static std::mutex                 mutex;
  static std::set<std::string>      warned;
  const std::lock_guard<std::mutex> lock(mutex);
  return warned.insert(cause).second;
}

} // end namespace itk
