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

// The reflect padding of the uploaded input (nlm_pad), compiled at run time by NVRTC into a module
// of its own: it depends only on the input's element type, the arithmetic type and the components
// per pixel, so one module serves every patch size, distance and kernel shape (and the disk cache
// keeps it), and the configurations' modules do not compile it again (BENCHMARKS.md, "The padding
// kernel in a module of its own").
//
// Configuration macros (set by the host, KernelConfig::Macros with Padding):
//   NLM_K          components per pixel
//   NLM_TIN        element type of the uploaded input: float or double
//   NLM_REAL       arithmetic type, the padded input's: double (bitwise contract) or float

#include "itkNonLocalMeansNumerics.h"
#include "itkNonLocalMeansKernelParameters.h"

namespace
{
typedef NLM_TIN  TIn;
typedef NLM_REAL Real;
constexpr int    K = NLM_K;

/** The index along axis `a` of the uploaded input that padded cell `i` along that axis copies: its
 * image index clamped to the cells the output needs (cells beyond them are there only because tiles
 * are rounded up), reflected into the image (NumPy's mode='reflect'). */
__device__ __forceinline__ long long
PadSource(const itk::nlm::PadKernelParameters & p, int a, long long i)
{
  long long c = p.padStart[a] + i;
  c = (c < p.clampLo[a]) ? p.clampLo[a] : ((c > p.clampHi[a]) ? p.clampHi[a] : c);
  return itk::nlm::ReflectIndexByWalking(c, p.imageSize[a]) - p.inStart[a];
}
} // namespace

/** Reflect-pads the uploaded input into the working array in the arithmetic type, about the whole
 * image. A warp copies 32 cells of a row along axis 0, a block PadKernelRows rows along axis 1 of
 * one plane (axes 2 and 3 together), each grid-stride: a cell takes no division, a row one
 * reflection, a plane one division. */
extern "C" __global__ void
nlm_pad(const TIn * __restrict__ in, Real * __restrict__ out, itk::nlm::PadKernelParameters p)
{
  const long long planes = p.padSize[2] * p.padSize[3];
  const long long inRow = p.inSize[0];
  const long long inPlane = inRow * p.inSize[1];
  const long long x0 = blockIdx.x * 32LL + threadIdx.x % 32;
  const long long y0 = blockIdx.y * static_cast<long long>(itk::nlm::PadKernelRows) + threadIdx.x / 32;
#pragma unroll 1
  for (long long zw = blockIdx.z; zw < planes; zw += gridDim.z)
  {
    const long long plane =
      (PadSource(p, 2, zw % p.padSize[2]) + PadSource(p, 3, zw / p.padSize[2]) * p.inSize[2]) * inPlane;
#pragma unroll 1
    for (long long y = y0; y < p.padSize[1]; y += gridDim.y * static_cast<long long>(itk::nlm::PadKernelRows))
    {
      const long long row = plane + PadSource(p, 1, y) * inRow;
      Real *          target = out + (zw * p.padSize[1] + y) * p.padSize[0] * K;
#pragma unroll 1
      for (long long x = x0; x < p.padSize[0]; x += gridDim.x * 32LL)
      {
        const long long src = row + PadSource(p, 0, x);
#pragma unroll
        for (int k = 0; k < K; ++k)
        {
          target[x * K + k] = static_cast<Real>(in[src * K + k]);
        }
      }
    }
  }
}
