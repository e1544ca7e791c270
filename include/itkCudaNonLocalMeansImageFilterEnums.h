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
#ifndef itkCudaNonLocalMeansImageFilterEnums_h
#define itkCudaNonLocalMeansImageFilterEnums_h

#include "CudaNonLocalMeansExport.h"

#include <cstdint>
#include <ostream>

namespace itk
{
/** \class CudaNonLocalMeansImageFilterEnums
 * \brief Enumerations of CudaNonLocalMeansImageFilter.
 * \ingroup CudaNonLocalMeans
 */
class CudaNonLocalMeansImageFilterEnums
{
public:
  /** \class Backend
   * \brief Where the filter computes.
   *
   * Auto uses the CUDA backend when a usable NVIDIA device, driver and NVRTC library are present
   * and the backend can run the problem there (its limits, compile, memory), and the CPU backend
   * otherwise, with the same numbers (one warning per cause and process; the cause in the run
   * statistics). CPU and CUDA force a backend; CUDA throws when it cannot compute.
   * \ingroup CudaNonLocalMeans
   */
  enum class Backend : std::uint8_t
  {
    Auto = 0,
    CPU = 1,
    CUDA = 2
  };

  /** \class NoiseModel
   * \brief The noise model of the image (doc/numerical-contract.md, section 6).
   *
   * Gaussian (the default) is scikit-image's: the output is the weighted mean of the intensities.
   * Rician is for magnitude MR images (Wiest-Daesslé et al., MICCAI 2008; DIPY's `rician=True`):
   * the output is sqrt(max(NLM(x^2) - 2 sigma^2, 0)), where NLM(x^2) is the weighted mean of the
   * squared intensities with the same weights; it needs the noise level (Sigma or a noise map).
   * \ingroup CudaNonLocalMeans
   */
  enum class NoiseModel : std::uint8_t
  {
    Gaussian = 0,
    Rician = 1
  };
};

/** Prints "CudaNonLocalMeansImageFilterEnums::Backend::CPU" and so on. */
extern CudaNonLocalMeans_EXPORT std::ostream &
                                operator<<(std::ostream & out, const CudaNonLocalMeansImageFilterEnums::Backend value);

/** Prints "CudaNonLocalMeansImageFilterEnums::NoiseModel::Rician" and so on. */
extern CudaNonLocalMeans_EXPORT std::ostream &
operator<<(std::ostream & out, const CudaNonLocalMeansImageFilterEnums::NoiseModel value);

} // end namespace itk

#endif
