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
#include "itkNonLocalMeansExtensions.h"
#include "itkNonLocalMeansNumerics.h"
#include "itkNonLocalMeansParallelFor.h"

#include <algorithm>

namespace itk
{
namespace nlm
{
namespace
{
using ElementType = NonLocalMeansBackend::ElementType;

/** Extent of a problem's box along each of the four axes (1 beyond the image's dimension). */
void
Extents(const NonLocalMeansBackend::Problem & p,
        const std::int64_t (&size)[NonLocalMeansBackend::MaximumDimension],
        std::int64_t (&out)[4])
{
  for (unsigned int a = 0; a < 4; ++a)
  {
    out[a] = (a < p.Dimension) ? size[a] : 1;
  }
}

template <typename TIn, typename TOut>
void
CopyMaskedOut(const NonLocalMeansBackend::Problem & p, MultiThreaderBase * threader, unsigned int workUnits)
{
  std::int64_t out[4], in[4];
  Extents(p, p.OutputSize, out);
  Extents(p, p.InputSize, in);
  std::int64_t shift[4] = { 0, 0, 0, 0 }; // output-region index -> input-buffer index
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    shift[a] = p.OutputStart[a] - p.InputStart[a];
  }
  const auto * input = static_cast<const TIn *>(p.Input);
  auto *       output = static_cast<TOut *>(p.Output);
  const int    K = static_cast<int>(p.Components);
  ParallelFor(threader, workUnits, out[1] * out[2] * out[3], [&](std::int64_t r) {
    const std::int64_t i1 = r % out[1], i2 = (r / out[1]) % out[2], i3 = r / (out[1] * out[2]);
    const std::int64_t source =
      shift[0] + in[0] * ((i1 + shift[1]) + in[1] * ((i2 + shift[2]) + in[2] * (i3 + shift[3])));
    for (std::int64_t i0 = 0; i0 < out[0]; ++i0)
    {
      const std::int64_t cell = r * out[0] + i0;
      if (p.Mask[cell] != 0)
      {
        continue;
      }
      for (int k = 0; k < K; ++k)
      {
        output[K * cell + k] = static_cast<TOut>(input[K * (source + i0) + k]);
      }
    }
  });
}
} // namespace

void
KeepInputWhereMasked(const NonLocalMeansBackend::Problem & p, MultiThreaderBase * threader, unsigned int workUnits)
{
  if (p.Mask == nullptr)
  {
    return;
  }
  const bool inFloat = p.InputType == ElementType::Float32;
  const bool outFloat = p.OutputType == ElementType::Float32;
  if (inFloat && outFloat)
  {
    CopyMaskedOut<float, float>(p, threader, workUnits);
  }
  else if (inFloat)
  {
    CopyMaskedOut<float, double>(p, threader, workUnits);
  }
  else if (outFloat)
  {
    CopyMaskedOut<double, float>(p, threader, workUnits);
  }
  else
  {
    CopyMaskedOut<double, double>(p, threader, workUnits);
  }
}

template <typename TReal>
std::vector<TReal>
PaddedNoiseMap(const NonLocalMeansBackend::Problem & p,
               const PadKernelParameters &           pad,
               MultiThreaderBase *                   threader,
               unsigned int                          workUnits)
{
  // Per axis, the input-buffer offset of every padded index (nlm_pad's clamp and reflection).
  std::int64_t in[4];
  Extents(p, p.InputSize, in);
  std::vector<std::int64_t> map[4];
  std::int64_t              stride = 1;
  for (unsigned int a = 0; a < 4; ++a)
  {
    for (long long i = 0; i < pad.padSize[a]; ++i)
    {
      const long long c = std::min(std::max(pad.padStart[a] + i, pad.clampLo[a]), pad.clampHi[a]);
      const long long start = (a < p.Dimension) ? p.InputStart[a] : 0;
      map[a].push_back((ReflectIndex(c, pad.imageSize[a]) - start) * stride);
    }
    stride *= in[a];
  }
  std::vector<TReal> out(static_cast<std::size_t>(pad.padSize[0] * pad.padSize[1] * pad.padSize[2] * pad.padSize[3]));
  const long long    n0 = pad.padSize[0], n1 = pad.padSize[1], n2 = pad.padSize[2];
  ParallelFor(threader, workUnits, n1 * n2 * pad.padSize[3], [&](std::int64_t r) {
    const std::int64_t base = map[1][static_cast<std::size_t>(r % n1)] +
                              map[2][static_cast<std::size_t>((r / n1) % n2)] +
                              map[3][static_cast<std::size_t>(r / (n1 * n2))];
    for (long long i0 = 0; i0 < n0; ++i0)
    {
      const double sigma = p.NoiseSigma[base + map[0][static_cast<std::size_t>(i0)]];
      out[static_cast<std::size_t>(r * n0 + i0)] = static_cast<TReal>(sigma * sigma);
    }
  });
  return out;
}

template std::vector<float>
PaddedNoiseMap<float>(const NonLocalMeansBackend::Problem &,
                      const PadKernelParameters &,
                      MultiThreaderBase *,
                      unsigned int);
template std::vector<double>
PaddedNoiseMap<double>(const NonLocalMeansBackend::Problem &,
                       const PadKernelParameters &,
                       MultiThreaderBase *,
                       unsigned int);

std::vector<std::uint8_t>
ActiveTiles(const NonLocalMeansBackend::Problem & p,
            const long long (&tiles)[4],
            const int (&tile)[4],
            const long long (&outSize)[4],
            int                 outerAxis,
            long long           first,
            MultiThreaderBase * threader,
            unsigned int        workUnits)
{
  std::int64_t region[4];
  Extents(p, p.OutputSize, region);
  std::vector<std::uint8_t> active(static_cast<std::size_t>(tiles[0] * tiles[1] * tiles[2] * tiles[3]), 0);
  ParallelFor(threader, workUnits, static_cast<std::int64_t>(active.size()), [&](std::int64_t index) {
    const auto t = static_cast<std::size_t>(index);
    long long  rest = index;
    long long  lo[4], hi[4];
    for (int a = 0; a < 4; ++a)
    {
      const long long c = rest % tiles[a];
      rest /= tiles[a];
      lo[a] = c * tile[a];
      hi[a] = std::min(outSize[a], lo[a] + tile[a]);
      if (a == outerAxis) // slab-relative -> output-region planes
      {
        lo[a] += first;
        hi[a] += first;
      }
    }
    for (long long i3 = lo[3]; i3 < hi[3] && !active[t]; ++i3)
    {
      for (long long i2 = lo[2]; i2 < hi[2] && !active[t]; ++i2)
      {
        for (long long i1 = lo[1]; i1 < hi[1] && !active[t]; ++i1)
        {
          const std::uint8_t * row = p.Mask + region[0] * (i1 + region[1] * (i2 + region[2] * i3));
          active[t] = std::any_of(row + lo[0], row + hi[0], [](std::uint8_t m) { return m != 0; }) ? 1 : 0;
        }
      }
    }
  });
  return active;
}

} // namespace nlm
} // namespace itk
