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

// The classic kernel (slow mode, FastMode off; 2D, and 3D with one component): scikit-image's
// per-pixel algorithm of doc/numerical-contract.md section 3, operation for operation as the CPU
// backend computes it (src/itkNonLocalMeansCPUBackend.cxx, SolveSlowMode), so that the two are
// bitwise equal. One thread per output pixel, no shared memory: for every candidate q of the
// window clipped to the image, row-major, the Gaussian-weighted patch distance in the working type
// T (float for float input, else double), rows of the patch's first axis with the cut checked
// before each row; the weight fe_x86(-max(dist, 0)) in T; wsum and nv in T. The patch kernel
// wk(a) (T, computed on the host with NumPy's exp) is FastKernelParameters::classicKernel. The
// padded input (arithmetic type double) holds the input's values exactly. Its entry point is called
// nlm_fast, as every module's main kernel.

#include "itkNonLocalMeansKernelCommon.cuh"

namespace
{
typedef TIn T; // the working type
static_assert(DIM == 2 || (DIM == 3 && K == 1), "classic mode: 2D, or 3D with one component");
constexpr int TV = T0 * T1 * T2 * T3;
static_assert(TV == NT, "one thread per pixel of the tile");

/** s^a. */
__device__ __forceinline__ int
Power(int a)
{
  int p = 1;
  for (int i = 0; i < a; ++i)
  {
    p *= S;
  }
  return p;
}
} // namespace

extern "C" __global__ void
__launch_bounds__(NT, NLM_MINBLOCKS)
  nlm_fast(const Real * __restrict__ Y, TOut * __restrict__ out, itk::nlm::FastKernelParameters p)
{
  const long long tile = p.tileOffset + blockIdx.x;
  if (!TileIsActive(p, tile)) // no pixel to compute (mask)
  {
    return;
  }
  long long c[3];
  TileCoordinates(p, tile, c);
  const long long c0 = c[0], c1 = c[1], c2 = c[2];
  const int       tid = threadIdx.x;
  const long long g0 = c0 * T0 + tid % T0;
  const long long g1 = c1 * T1 + (tid / T0) % T1;
  const long long g2 = c2 * T2 + tid / (T0 * T1);
  if (g0 >= p.outSize[0] || g1 >= p.outSize[1] || g2 >= p.outSize[2])
  {
    return;
  }
  const T * __restrict__ wk = reinterpret_cast<const T *>(p.classicKernel);
  const T         v = static_cast<T>(p.bias); // (T)(2 sigma^2)
  const long long ys1 = p.ySize[0];
  const long long ys2 = ys1 * p.ySize[1];
  // Image coordinates of the pixel; padded cell c of an image index i is i - (outStart - E).
  const long long x0 = p.outStart[0] + g0, x1 = p.outStart[1] + g1, x2 = p.outStart[2] + g2;
  const long long N0 = p.imageSize[0], N1 = p.imageSize[1], N2 = (DIM > 2) ? p.imageSize[2] : 1;
  // The padded cell of image index i on axis a, minus o: the patch's corner.
  auto corner = [&](long long i0, long long i1, long long i2) {
    long long c = (i0 - p.outStart[0] + PD) + (i1 - p.outStart[1] + PD) * ys1;
    if (DIM > 2)
    {
      c += (i2 - p.outStart[2] + PD) * ys2;
    }
    return c;
  };
  const long long cx = corner(x0, x1, x2);
  constexpr int   rowLength = (DIM > 2) ? S * S : S; // entries of one row of the patch's first axis
  const long long centreOffset = O + O * ys1 + ((DIM > 2) ? O * ys2 : 0);

  T wsum = T(0);
  T nv[K];
#pragma unroll
  for (int k = 0; k < K; ++k)
  {
    nv[k] = T(0);
  }
  const long long q2lo = (DIM > 2) ? (x2 - PD > 0 ? x2 - PD : 0) : 0;
  const long long q2hi = (DIM > 2) ? (x2 + PD + 1 < N2 ? x2 + PD + 1 : N2) : 1;
  const long long q1lo = x1 - PD > 0 ? x1 - PD : 0, q1hi = x1 + PD + 1 < N1 ? x1 + PD + 1 : N1;
  const long long q0lo = x0 - PD > 0 ? x0 - PD : 0, q0hi = x0 + PD + 1 < N0 ? x0 + PD + 1 : N0;
  for (long long q2 = q2lo; q2 < q2hi; ++q2)
  {
    for (long long q1 = q1lo; q1 < q1hi; ++q1)
    {
      for (long long q0 = q0lo; q0 < q0hi; ++q0)
      {
        const long long cq = corner(q0, q1, q2);
        T               dist = T(0);
        bool            cut = false;
        for (int a0 = 0; a0 < S; ++a0)
        {
          if (dist > T(5))
          {
            cut = true;
            break;
          }
          for (int j = a0 * rowLength; j < (a0 + 1) * rowLength; ++j)
          {
            // Offset j's digits: ITK axis a is patch digit (j / s^a) % s.
            long long off = j % S + ((j / S) % S) * ys1;
            if (DIM > 2)
            {
              off += (j / Power(2)) * ys2;
            }
            const T w = wk[j];
#pragma unroll
            for (int k = 0; k < K; ++k)
            {
              const T diff = static_cast<T>(Y[(cx + off) * K + k]) - static_cast<T>(Y[(cq + off) * K + k]);
              dist = dist + w * ((diff * diff) - v);
            }
          }
        }
        T weight = T(0);
        if (!cut)
        {
          const double m = (dist > T(0)) ? static_cast<double>(dist) : 0.0;
          weight = static_cast<T>(itk::nlm::FastExpX86(-m));
        }
        wsum = wsum + weight;
        const long long at = (cq + centreOffset) * K;
#pragma unroll
        for (int k = 0; k < K; ++k)
        {
          const T value = static_cast<T>(Y[at + k]);
          nv[k] = nv[k] + weight * (NLM_RICIAN ? value * value : value);
        }
      }
    }
  }
  const long long o = g0 + p.outSize[0] * (g1 + p.outSize[1] * g2);
#pragma unroll
  for (int k = 0; k < K; ++k)
  {
    T result = nv[k] / wsum;
    if (NLM_RICIAN)
    {
      const T d = result - v;
      result = sqrt((T(0) > d) ? T(0) : d);
    }
    out[o * K + k] = static_cast<TOut>(result);
  }
}
