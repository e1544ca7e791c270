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
#include "itkNonLocalMeansBackend.h"
#include "itkNonLocalMeansCPUBackend.h"
#include "itkNonLocalMeansCUDABackend.h"
#include "itkNonLocalMeansParallelFor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <type_traits>

namespace itk
{

double
NonLocalMeansBackend::Normalisation(const Problem & p)
{
  double norm = (static_cast<double>(p.Components) * p.H) * p.H;
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    norm = norm * static_cast<double>(EffectivePatchSize(p.PatchSize));
  }
  return norm;
}

void
NonLocalMeansBackend::VerifyProblem(const Problem & p)
{
  if (p.Dimension < 2 || p.Dimension > MaximumDimension)
  {
    itkGenericExceptionMacro("Non-local means supports images of 2, 3 or 4 dimensions (as scikit-image does); "
                             "this image has "
                             << p.Dimension << ".");
  }
  if (p.Components < 1)
  {
    itkGenericExceptionMacro("The image has no components per pixel; give it at least one.");
  }
  if (p.PatchSize < 1)
  {
    itkGenericExceptionMacro("PatchSize is " << p.PatchSize << "; it must be at least 1 (scikit-image's patch_size).");
  }
  if (p.PatchSize > 1001)
  {
    itkGenericExceptionMacro("PatchSize is " << p.PatchSize << "; use a patch size of at most 1001.");
  }
  if (p.PatchDistance < 0)
  {
    itkGenericExceptionMacro("PatchDistance is " << p.PatchDistance
                                                 << "; it must be 0 or more (scikit-image's patch_distance).");
  }
  if (p.PatchDistance > 1000)
  {
    itkGenericExceptionMacro("PatchDistance is " << p.PatchDistance << "; use a patch distance of at most 1000.");
  }
  if (!(p.H > 0.0) || !std::isfinite(p.H))
  {
    itkGenericExceptionMacro("H is " << p.H
                                     << "; it must be a finite number greater than 0 (scikit-image's h, the cut-off "
                                        "distance; scikit-image uses only h*h, so pass |h| for a negative h).");
  }
  if (!(p.Sigma >= 0.0) || !std::isfinite(p.Sigma))
  {
    itkGenericExceptionMacro("Sigma is " << p.Sigma
                                         << "; it must be a finite number of 0 or more (scikit-image's sigma, the "
                                            "noise standard deviation; scikit-image uses only sigma*sigma).");
  }
  const int    s = EffectivePatchSize(p.PatchSize);
  const double norm = Normalisation(p);
  double       boxTerms = static_cast<double>(p.Components);
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    boxTerms *= static_cast<double>(s);
  }
  if (!std::isnormal(norm))
  {
    itkGenericExceptionMacro("H = " << p.H
                                    << " is too small or too large: the normalisation "
                                       "Components*H*H*PatchSize^Dimension = "
                                    << norm
                                    << " is not a normal floating-point number. Use an H between about "
                                       "1e-150 and 1e150.");
  }
  if (!std::isfinite(2.0 * (p.Sigma * p.Sigma) * boxTerms))
  {
    itkGenericExceptionMacro("Sigma = " << p.Sigma << " is too large: 2*Sigma^2 summed over a patch overflows.");
  }
  if (!p.FastMode && !(p.Dimension == 2 || (p.Dimension == 3 && p.Components == 1)))
  {
    itkGenericExceptionMacro("Slow mode (FastMode off) is implemented, as in scikit-image, only for 2D images "
                             "and for single-component 3D images; this image is "
                             << p.Dimension << "D with " << p.Components << " component(s). Turn FastMode on.");
  }
  if (p.Input == nullptr || p.Output == nullptr)
  {
    itkGenericExceptionMacro("Non-local means backend called without an input or output buffer.");
  }
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    if (p.ImageSize[a] < 1 || p.InputSize[a] < 1 || p.OutputSize[a] < 0)
    {
      itkGenericExceptionMacro("Non-local means: empty image or input buffer along axis " << a << ".");
    }
    if (p.InputStart[a] < 0 || p.InputStart[a] + p.InputSize[a] > p.ImageSize[a] || p.OutputStart[a] < 0 ||
        p.OutputStart[a] + p.OutputSize[a] > p.ImageSize[a])
    {
      itkGenericExceptionMacro("Non-local means: the input buffer or the output region lies outside the image "
                               "along axis "
                               << a << ".");
    }
  }
}

namespace
{
template <typename T>
void
VerifyFinite(const T * data, std::int64_t count, unsigned int components)
{
  for (std::int64_t i = 0; i < count; ++i)
  {
    if (!std::isfinite(data[i]))
    {
      itkGenericExceptionMacro("The input image holds a non-finite value ("
                               << data[i] << ") at buffer pixel " << i / components << ", component " << i % components
                               << ". Non-local means needs finite "
                                  "intensities: replace NaN and "
                                  "infinite values first.");
    }
  }
}

/** Whether data[0, count) holds a NaN or an infinity: its exponent bits all set. An integer OR
 * reduction without early exit, so that the compiler vectorises it. */
template <typename T, typename TBits>
bool
AnyNonFinite(const T * data, std::int64_t count)
{
  static_assert(sizeof(T) == sizeof(TBits), "bit pattern of the element type");
  constexpr TBits exponent = static_cast<TBits>(std::is_same<T, float>::value ? 0x7f800000ull : 0x7ff0000000000000ull);
  TBits           any = 0;
  for (std::int64_t i = 0; i < count; ++i)
  {
    TBits bits;
    std::memcpy(&bits, data + i, sizeof(T));
    any |= static_cast<TBits>((bits & exponent) == exponent);
  }
  return any != 0;
}

template <typename T, typename TBits>
void
VerifyFiniteInParallel(const T *           data,
                       std::int64_t        count,
                       unsigned int        components,
                       MultiThreaderBase * threader,
                       unsigned int        workUnits)
{
  constexpr std::int64_t block = std::int64_t{ 1 } << 20;
  std::atomic<bool>      found{ false };
  nlm::ParallelFor(threader, workUnits, (count + block - 1) / block, [&](std::int64_t b) {
    if (AnyNonFinite<T, TBits>(data + b * block, std::min(block, count - b * block)))
    {
      found = true;
    }
  });
  if (found)
  {
    VerifyFinite(data, count, components); // finds the first one and throws, naming it
  }
}
} // namespace

void
NonLocalMeansBackend::VerifyInputIsFinite(const Problem & p, MultiThreaderBase * threader, unsigned int workUnits)
{
  std::int64_t count = p.Components;
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    count *= p.InputSize[a];
  }
  if (p.InputType == ElementType::Float32)
  {
    VerifyFiniteInParallel<float, std::uint32_t>(
      static_cast<const float *>(p.Input), count, p.Components, threader, workUnits);
  }
  else
  {
    VerifyFiniteInParallel<double, std::uint64_t>(
      static_cast<const double *>(p.Input), count, p.Components, threader, workUnits);
  }
}

bool
NonLocalMeansBackend::HoldsNonFinite(const void * data, std::size_t count, ElementType type)
{
  return type == ElementType::Float32
           ? AnyNonFinite<float, std::uint32_t>(static_cast<const float *>(data), static_cast<std::int64_t>(count))
           : AnyNonFinite<double, std::uint64_t>(static_cast<const double *>(data), static_cast<std::int64_t>(count));
}

bool
NonLocalMeansBackend::ClaimCPUFallbackWarning(const std::string & cause)
{
  static std::mutex                 mutex;
  static std::set<std::string>      warned;
  const std::lock_guard<std::mutex> lock(mutex);
  return warned.insert(cause).second;
}

NonLocalMeansBackend::Pointer
NonLocalMeansBackend::CreateCPUBackend()
{
  return NonLocalMeansCPUBackend::New().GetPointer();
}

NonLocalMeansBackend::Pointer
NonLocalMeansBackend::CreateCUDABackend(std::string & whyNot)
{
  if (!NonLocalMeansCUDABackend::IsUsable(whyNot))
  {
    return nullptr;
  }
  return NonLocalMeansCUDABackend::New().GetPointer();
}

} // end namespace itk
