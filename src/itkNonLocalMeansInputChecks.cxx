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
#include "itkNonLocalMeansInputChecks.h"
#include "itkNonLocalMeansParallelFor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace itk
{
namespace nlm
{
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
  ParallelFor(threader, workUnits, (count + block - 1) / block, [&](std::int64_t b) {
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
VerifyInputIsFinite(const NonLocalMeansBackend::Problem & p, MultiThreaderBase * threader, unsigned int workUnits)
{
  std::int64_t count = p.Components;
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    count *= p.InputSize[a];
  }
  if (p.InputType == NonLocalMeansBackend::ElementType::Float32)
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
HoldsNonFinite(const void * data, std::size_t count, NonLocalMeansBackend::ElementType type)
{
  return type == NonLocalMeansBackend::ElementType::Float32
           ? AnyNonFinite<float, std::uint32_t>(static_cast<const float *>(data), static_cast<std::int64_t>(count))
           : AnyNonFinite<double, std::uint64_t>(static_cast<const double *>(data), static_cast<std::int64_t>(count));
}

} // namespace nlm
} // end namespace itk
