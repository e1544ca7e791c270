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
#ifndef itkNonLocalMeansCPUBackend_h
#define itkNonLocalMeansCPUBackend_h

#include "itkNonLocalMeansBackend.h"

namespace itk
{

/** \class NonLocalMeansCPUBackend
 * \brief Multithreaded CPU implementation of doc/numerical-contract.md; the reference for every
 * other backend.
 *
 * Fast mode: the output is split into chunks (boxes); for each shift every chunk computes the
 * weight map it needs by direct separable sums and gathers both terms of every output cell in the
 * contract's order. Work is spread with MultiThreaderBase::ParallelizeArray over chunks, one group
 * of shifts at a time, so progress is reported and abort requests are honoured between groups.
 * Slow mode: one independent computation per output pixel.
 *
 * \ingroup CudaNonLocalMeans
 */
class NonLocalMeansCPUBackend : public NonLocalMeansBackend
{
public:
  ITK_DISALLOW_COPY_AND_MOVE(NonLocalMeansCPUBackend);

  using Self = NonLocalMeansCPUBackend;
  using Superclass = NonLocalMeansBackend;
  using Pointer = SmartPointer<Self>;
  using ConstPointer = SmartPointer<const Self>;

  itkNewMacro(Self);
#ifdef itkOverrideGetNameOfClassMacro
  itkOverrideGetNameOfClassMacro(NonLocalMeansCPUBackend);
#else
  itkTypeMacro(NonLocalMeansCPUBackend, NonLocalMeansBackend);
#endif

  void
  Run(const Problem &     problem,
      ProcessObject *     caller,
      MultiThreaderBase * threader,
      unsigned int        numberOfWorkUnits) override;

  /** Device "CPU"; Configuration names the mode, the SIMD target and the work units. */
  RunStatistics
  GetLastRunStatistics() const override
  {
    return m_LastStatistics;
  }

protected:
  NonLocalMeansCPUBackend() = default;
  ~NonLocalMeansCPUBackend() override = default;

private:
  RunStatistics m_LastStatistics;
};

} // end namespace itk

#endif
