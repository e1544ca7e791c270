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
#ifndef itkNonLocalMeansExtensions_h
#define itkNonLocalMeansExtensions_h

// Host-side parts of the opt-in extensions (doc/numerical-contract.md section 6) that the backends
// share: the mask's rule for masked-out cells, and what the CUDA backend prepares per slab (the
// padded sigma^2 of a noise map, the tiles a mask leaves to compute). Private to the library.

#include "itkNonLocalMeansBackend.h"
#include "itkNonLocalMeansKernelParameters.h"

#include <cstdint>
#include <vector>

namespace itk
{
class MultiThreaderBase;

namespace nlm
{

/** Contract 6.3: every output cell whose mask byte is 0 receives its input value, converted to the
 * working type (the input's element type) and then to the output's. Nothing without a mask. */
void
KeepInputWhereMasked(const NonLocalMeansBackend::Problem & problem,
                     MultiThreaderBase *                   threader,
                     unsigned int                          workUnits);

/** The padded sigma^2 (sigma * sigma in float64, then converted to TReal) of one slab, cell for cell
 * as nlm_pad lays out the padded input described by `pad` (one value per cell). */
template <typename TReal>
std::vector<TReal>
PaddedNoiseMap(const NonLocalMeansBackend::Problem & problem,
               const PadKernelParameters &           pad,
               MultiThreaderBase *                   threader,
               unsigned int                          workUnits);

/** One byte per tile of a slab (tiles[4] per axis, of extent tile[4], tile index with axis 0
 * fastest): 1 when the tile holds an output cell whose mask byte is not 0. The slab's output is
 * `outSize` (its extents) starting `first` planes along axis `outerAxis` into the output region. */
std::vector<std::uint8_t>
ActiveTiles(const NonLocalMeansBackend::Problem & problem,
            const long long (&tiles)[4],
            const int (&tile)[4],
            const long long (&outSize)[4],
            int                 outerAxis,
            long long           first,
            MultiThreaderBase * threader,
            unsigned int        workUnits);

} // namespace nlm
} // namespace itk

#endif
