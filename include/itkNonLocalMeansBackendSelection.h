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
#ifndef itkNonLocalMeansBackendSelection_h
#define itkNonLocalMeansBackendSelection_h

#include "itkCudaNonLocalMeansImageFilterEnums.h"
#include "itkNonLocalMeansBackend.h"

#include <string>

namespace itk
{

/** \class NonLocalMeansBackendSelection
 * \brief Where CudaNonLocalMeansImageFilter computes: the backend selection policy and the
 * backends' factories.
 *
 * Backend CPU computes on the CPU backend. CUDA computes on the CUDA backend and throws when it
 * cannot (no usable device, driver or NVRTC; its limits, compile, memory). Auto computes on the
 * CUDA backend when it can, otherwise on the CPU backend, with the same numbers: the cause is in
 * the run statistics (CPUFallbackReason) and a warning is due once per cause and process. An abort
 * is never retried.
 *
 * \ingroup CudaNonLocalMeans
 */
class CudaNonLocalMeans_EXPORT NonLocalMeansBackendSelection
{
public:
  using BackendEnum = CudaNonLocalMeansImageFilterEnums::Backend;

  /** What Compute did. */
  struct Outcome
  {
    BackendEnum                         Used{ BackendEnum::Auto }; // CPU or CUDA
    NonLocalMeansBackend::RunStatistics Statistics;
    bool                                WarnAboutFallback{ false }; // the first fallback for its cause
  };

  /** Checks the problem (VerifyProblem), selects a backend for `requested` and computes. */
  static Outcome
  Compute(const NonLocalMeansBackend::Problem & problem,
          BackendEnum                           requested,
          ProcessObject *                       caller,
          MultiThreaderBase *                   threader,
          unsigned int                          numberOfWorkUnits);

  /** Whether the CUDA backend can be used in this process; `whyNot` says why not. */
  static bool
  CUDAIsUsable(std::string & whyNot);

  /** The multithreaded CPU backend. */
  static NonLocalMeansBackend::Pointer
  CreateCPUBackend();

  /** The CUDA backend, or null (with `whyNot`) when it cannot be used. */
  static NonLocalMeansBackend::Pointer
  CreateCUDABackend(std::string & whyNot);

  /** True the first time it is called with this cause in a process, false afterwards. */
  static bool
  ClaimCPUFallbackWarning(const std::string & cause);
};

} // end namespace itk

#endif
