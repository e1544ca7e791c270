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
#ifndef itkNonLocalMeansCUDABackend_h
#define itkNonLocalMeansCUDABackend_h

#include "itkNonLocalMeansBackend.h"

#include <chrono>
#include <vector>

namespace itk
{
namespace nlm
{
class CUDADevice;
}

/** \class NonLocalMeansCUDABackend
 * \brief CUDA implementation of doc/numerical-contract.md (fast mode), bitwise equal to the CPU
 * backend.
 *
 * Run is a short pipeline: the device (itkNonLocalMeansCUDADevice.h), a launch plan made by pure
 * functions (itkNonLocalMeansLaunchPlan.h), the module of the plan's configuration (compiled by
 * NVRTC or read from the caches), then one SlabPipeline per slab along the outermost axis
 * (itkNonLocalMeansSlabPipeline.h). doc/source-map.md follows one Update through it. Private to
 * the library.
 *
 * \ingroup CudaNonLocalMeans
 */
class NonLocalMeansCUDABackend : public NonLocalMeansBackend
{
public:
  ITK_DISALLOW_COPY_AND_MOVE(NonLocalMeansCUDABackend);

  using Self = NonLocalMeansCUDABackend;
  using Superclass = NonLocalMeansBackend;
  using Pointer = SmartPointer<Self>;
  using ConstPointer = SmartPointer<const Self>;

#ifdef itkOverrideGetNameOfClassMacro
  itkOverrideGetNameOfClassMacro(NonLocalMeansCUDABackend);
#else
  itkTypeMacro(NonLocalMeansCUDABackend, NonLocalMeansBackend);
#endif

  /** Whether the driver, a device and NVRTC are usable; fills `whyNot` otherwise. */
  static bool
  IsUsable(std::string & whyNot);

  /** A backend on the process's CUDA device, or null (with `whyNot`) when it cannot be used. */
  static Pointer
  Create(std::string & whyNot);

  void
  Run(const Problem &     problem,
      ProcessObject *     caller,
      MultiThreaderBase * threader,
      unsigned int        numberOfWorkUnits) override;

  RunStatistics
  GetLastRunStatistics() const override
  {
    return m_Statistics;
  }

protected:
  explicit NonLocalMeansCUDABackend(nlm::CUDADevice & device)
    : m_Device(device)
  {}
  ~NonLocalMeansCUDABackend() override = default;

private:
  using TimePoint = std::chrono::steady_clock::time_point;

  void
  RunOnOneDevice(nlm::CUDADevice &   device,
                 const Problem &     problem,
                 ProcessObject *     caller,
                 MultiThreaderBase * threader,
                 unsigned int        numberOfWorkUnits,
                 TimePoint           setupStart);

  /** Several devices (or one listed several times): one slab plan, the slabs shared out. */
  void
  RunOnDevices(const std::vector<nlm::CUDADevice *> & devices,
               const Problem &                        problem,
               ProcessObject *                        caller,
               MultiThreaderBase *                    threader,
               unsigned int                           numberOfWorkUnits,
               TimePoint                              setupStart);

  nlm::CUDADevice & m_Device;
  RunStatistics     m_Statistics;
};

} // end namespace itk

#endif
