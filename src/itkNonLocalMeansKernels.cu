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

// Non-local means kernels (fast mode), compiled at run time by NVRTC, one module per
// configuration, with --fmad=false. They implement doc/numerical-contract.md and produce bitwise
// the output of the CPU backend (src/itkNonLocalMeansCPUBackend.cxx), whose structure they follow:
// a block owns a tile of output voxels; for every shift, in scikit-image's order, it computes the
// weight map over the union of the tile and the tile shifted by -t, with the same separable sums,
// in shared memory, and every thread adds both terms of each of its voxels in the contract's order.
//
// Configuration macros (set by the host):
//   NLM_DIM        spatial dimensions, 2..4
//   NLM_K          components per pixel
//   NLM_S          odd patch size
//   NLM_PD         patch distance
//   NLM_T0..NLM_T3 tile extent per axis (1 for unused axes)
//   NLM_BX, NLM_BY threads along axes 0 and 1 (NLM_BX == NLM_T0, NLM_T1 % NLM_BY == 0)
//   NLM_TIN        element type of the (padded) input: float or double
//   NLM_TOUT       element type of the output: float or double
//   NLM_REAL       arithmetic type: double (bitwise contract) or float (opt-in single precision)
//   NLM_INDEX      integer type of offsets inside a block's footprint: int or long long

#include "itkNonLocalMeansNumerics.h"

typedef NLM_TIN   TIn;
typedef NLM_TOUT  TOut;
typedef NLM_REAL  Real;
typedef NLM_INDEX Index;

namespace
{
constexpr int DIM = NLM_DIM;
constexpr int K = NLM_K;
constexpr int S = NLM_S;
constexpr int O = S / 2;
constexpr int WIN = S - 1; // samples per axis of scikit-image's (s-1)-wide patch box
constexpr int PD = NLM_PD;
constexpr int E = O + PD; // padding of the input on each side of a used axis
constexpr int T0 = NLM_T0;
constexpr int T1 = NLM_T1;
constexpr int T2 = NLM_T2;
constexpr int T3 = NLM_T3;
constexpr int BX = NLM_BX;
constexpr int BY = NLM_BY;
constexpr int NT = BX * BY;
constexpr int VY = T1 / BY;
constexpr int VPT = VY * T2 * T3; // voxels per thread
constexpr int EXT = (WIN > 0) ? WIN - 1 : 0;
// Largest box extents (shared-memory layout).
constexpr int M0 = T0 + PD;
constexpr int M1 = T1 + PD + EXT;
constexpr int M2 = (DIM > 2) ? T2 + PD + EXT : 1;
constexpr int M3 = (DIM > 3) ? T3 + PD + EXT : 1;
constexpr int BOX = M0 * M1 * M2 * M3;

static_assert(BX == T0, "one thread per tile column along axis 0");
static_assert(T1 % BY == 0, "BY must divide T1");
static_assert(DIM >= 2 && DIM <= 4, "2D, 3D or 4D");
static_assert(DIM > 2 || (T2 == 1 && T3 == 1), "unused axes have extent 1");
static_assert(DIM > 3 || T3 == 1, "unused axes have extent 1");

constexpr int
Iabs(int v)
{
  return v < 0 ? -v : v;
}
constexpr int
Imax(int a, int b)
{
  return a > b ? a : b;
}
constexpr int
Imin(int a, int b)
{
  return a < b ? a : b;
}

/** Weight of a raw distance in the arithmetic type. */
__device__ __forceinline__ Real
Weight(Real raw, Real norm, Real alpha)
{
#if NLM_REAL_IS_FLOAT
  const float dist = ((0.0f > raw) ? 0.0f : raw) / norm;
  if (dist > 5.0f)
  {
    return 0.0f;
  }
  // Schraudolph's exponential in float: the same 32-bit integer as the double version, whose
  // value (a double with 20 mantissa bits) is exactly representable as a float.
  const int      i = __float2int_rz(static_cast<float>(itk::nlm::kExpA) * -dist) + itk::nlm::kExpBC;
  const unsigned bits = (static_cast<unsigned>(i) - (896u << 20)) << 3;
  return alpha * __uint_as_float(bits);
#else
  return itk::nlm::FastModeWeight(raw, norm, alpha);
#endif
}
} // namespace

/** Parameters of one launch of nlm_fast. */
struct NlmFastParams
{
  long long ySize[4];   // padded input extent per axis (cells)
  long long outSize[4]; // output region extent per axis
  long long tiles[4];   // tiles per axis
  long long tileOffset; // first tile of this launch
  double    norm;
  double    noise;
};

/** Parameters of nlm_pad. */
struct NlmPadParams
{
  long long padStart[4];  // image index of the first padded cell, per axis
  long long padSize[4];   // padded extent
  long long imageSize[4]; // whole image extent (reflection borders)
  long long inStart[4];   // image index of the first cell of the uploaded input
  long long inSize[4];    // extent of the uploaded input
  long long clampLo[4];   // image indices outside [clampLo, clampHi] only feed discarded voxels
  long long clampHi[4];
};

/** Reflect-pads the uploaded input into the working array (NumPy's mode='reflect' about the whole
 * image), one cell per thread (grid-stride). Cells beyond the region the output needs (there only
 * because tiles are rounded up) are clamped to its border. */
extern "C" __global__ void
nlm_pad(const TIn * __restrict__ in, TIn * __restrict__ out, NlmPadParams p)
{
  const long long total = p.padSize[0] * p.padSize[1] * p.padSize[2] * p.padSize[3];
  for (long long cell = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; cell < total;
       cell += static_cast<long long>(gridDim.x) * blockDim.x)
  {
    long long rest = cell;
    long long src = 0;
    long long stride = 1;
    for (int a = 0; a < 4; ++a)
    {
      const long long i = rest % p.padSize[a];
      rest /= p.padSize[a];
      long long c = p.padStart[a] + i;
      c = (c < p.clampLo[a]) ? p.clampLo[a] : ((c > p.clampHi[a]) ? p.clampHi[a] : c);
      const long long g = itk::nlm::ReflectIndex(c, p.imageSize[a]) - p.inStart[a];
      src += g * stride;
      stride *= p.inSize[a];
    }
#pragma unroll
    for (int k = 0; k < K; ++k)
    {
      out[cell * K + k] = in[src * K + k];
    }
  }
}

/** D(y) for the current shift: sum over channels of the squared difference, minus the noise term. */
__device__ __forceinline__ Real
PatchTerm(const TIn * __restrict__ y, Index tOff, Real noise)
{
  Real acc = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
  {
    const Real diff = static_cast<Real>(y[k]) - static_cast<Real>(y[tOff * K + k]);
    acc = (k == 0) ? diff * diff : acc + diff * diff;
  }
  return acc - noise;
}

extern "C" __global__ void __launch_bounds__(NT) nlm_fast(const TIn * __restrict__ Y, TOut * __restrict__ out,
                                                          NlmFastParams p)
{
  extern __shared__ double sharedRaw[];
  Real * bufA = reinterpret_cast<Real *>(sharedRaw);
  Real * bufB = bufA + BOX;

  // This block's tile.
  long long       tile = p.tileOffset + blockIdx.x;
  const long long c0 = tile % p.tiles[0];
  tile /= p.tiles[0];
  const long long c1 = tile % p.tiles[1];
  tile /= p.tiles[1];
  const long long c2 = tile % p.tiles[2];
  const long long c3 = tile / p.tiles[2];
  const long long lo[4] = { c0 * T0, c1 * T1, c2 * T2, c3 * T3 };

  const int tx = threadIdx.x % BX;
  const int ty = threadIdx.x / BX;

  // Offsets into Y are taken relative to the cell of the tile's first voxel.
  const Index ys1 = static_cast<Index>(p.ySize[0]);
  const Index ys2 = ys1 * static_cast<Index>(p.ySize[1]);
  const Index ys3 = ys2 * static_cast<Index>(p.ySize[2]);
  long long   base = (lo[0] + E) + (lo[1] + E) * p.ySize[0];
  if (DIM > 2)
  {
    base += (lo[2] + E) * p.ySize[0] * p.ySize[1];
  }
  if (DIM > 3)
  {
    base += (lo[3] + E) * p.ySize[0] * p.ySize[1] * p.ySize[2];
  }
  const TIn * Yt = Y + base * K;
  const Real  norm = static_cast<Real>(p.norm);
  const Real  noise = static_cast<Real>(p.noise);

  Real ws[VPT];
  Real rs[VPT][K];
#pragma unroll
  for (int v = 0; v < VPT; ++v)
  {
    ws[v] = 0;
#pragma unroll
    for (int k = 0; k < K; ++k)
    {
      rs[v][k] = 0;
    }
  }

  const int r3 = (DIM > 3) ? PD : 0;
  const int r2 = (DIM > 2) ? PD : 0;
  for (int t3 = -r3; t3 <= r3; ++t3)
  {
    for (int t2 = -r2; t2 <= r2; ++t2)
    {
      for (int t1 = -PD; t1 <= PD; ++t1)
      {
        for (int t0 = 0; t0 <= PD; ++t0)
        {
          const Real  alpha = (t0 == 0) ? Real(0.5) : Real(1.0);
          const Index tOff = t0 + t1 * ys1 + t2 * ys2 + t3 * ys3;
          // Weight box: the tile and the tile shifted by -t.
          const int w0lo = -t0;
          const int w0len = T0 + t0;
          const int w1lo = -Imax(t1, 0);
          const int w1len = T1 + Iabs(t1);
          const int w2lo = -Imax(t2, 0);
          const int w2len = T2 + Iabs(t2);
          const int w3lo = -Imax(t3, 0);
          const int w3len = T3 + Iabs(t3);
          const int wShift = t0 + t1 * M0 + t2 * M0 * M1 + t3 * M0 * M1 * M2;
          Real *    wbuf = bufA;
          Real      w0 = 0;
          if (WIN == 0)
          {
            w0 = Weight(Real(0), norm, alpha); // patch size 1: every raw distance is +0
          }
          else
          {
            // Pass A: D summed along axis 0 over the box (weight box along axis 0, patch-extended
            // along the other used axes).
            const int L1 = w1len + EXT;
            const int L2 = (DIM > 2) ? w2len + EXT : 1;
            const int L3 = (DIM > 3) ? w3len + EXT : 1;
            const int o1 = w1lo - O + 1;
            const int o2 = (DIM > 2) ? w2lo - O + 1 : 0;
            const int o3 = (DIM > 3) ? w3lo - O + 1 : 0;
            for (int r = ty; r < L1 * L2 * L3; r += BY)
            {
              const int   i1 = r % L1;
              const int   q = r / L1;
              const int   i2 = q % L2;
              const int   i3 = q / L2;
              const Index row = (o1 + i1) * ys1 + (o2 + i2) * ys2 + (o3 + i3) * ys3 + (w0lo - O + 1);
              Real *      dst = bufA + i1 * M0 + i2 * M0 * M1 + i3 * M0 * M1 * M2;
              for (int i0 = tx; i0 < w0len; i0 += BX)
              {
                const TIn * y = Yt + (row + i0) * K;
                Real        acc = PatchTerm(y, tOff, noise);
#pragma unroll
                for (int j = 1; j < WIN; ++j)
                {
                  acc = acc + PatchTerm(y + j * K, tOff, noise);
                }
                dst[i0] = acc;
              }
            }
            __syncthreads();
            // Pass B: along axis 1 (and the weights, in 2D).
            for (int r = ty; r < w1len * L2 * L3; r += BY)
            {
              const int    i1 = r % w1len;
              const int    q = r / w1len;
              const int    i2 = q % L2;
              const int    i3 = q / L2;
              const int    at = i1 * M0 + i2 * M0 * M1 + i3 * M0 * M1 * M2;
              const Real * src = bufA + at;
              for (int i0 = tx; i0 < w0len; i0 += BX)
              {
                Real acc = src[i0];
#pragma unroll
                for (int j = 1; j < WIN; ++j)
                {
                  acc = acc + src[i0 + j * M0];
                }
                bufB[at + i0] = (DIM == 2) ? Weight(acc, norm, alpha) : acc;
              }
            }
            __syncthreads();
            wbuf = bufB;
            if (DIM > 2)
            {
              // Pass C: along axis 2 (and the weights, in 3D).
              for (int r = ty; r < w1len * w2len * L3; r += BY)
              {
                const int    i1 = r % w1len;
                const int    q = r / w1len;
                const int    i2 = q % w2len;
                const int    i3 = q / w2len;
                const int    at = i1 * M0 + i2 * M0 * M1 + i3 * M0 * M1 * M2;
                const Real * src = bufB + at;
                for (int i0 = tx; i0 < w0len; i0 += BX)
                {
                  Real acc = src[i0];
#pragma unroll
                  for (int j = 1; j < WIN; ++j)
                  {
                    acc = acc + src[i0 + j * M0 * M1];
                  }
                  bufA[at + i0] = (DIM == 3) ? Weight(acc, norm, alpha) : acc;
                }
              }
              __syncthreads();
              wbuf = bufA;
            }
            if (DIM > 3)
            {
              // Pass D: along axis 3 and the weights.
              for (int r = ty; r < w1len * w2len * w3len; r += BY)
              {
                const int    i1 = r % w1len;
                const int    q = r / w1len;
                const int    i2 = q % w2len;
                const int    i3 = q / w2len;
                const int    at = i1 * M0 + i2 * M0 * M1 + i3 * M0 * M1 * M2;
                const Real * src = bufA + at;
                for (int i0 = tx; i0 < w0len; i0 += BX)
                {
                  Real acc = src[i0];
#pragma unroll
                  for (int j = 1; j < WIN; ++j)
                  {
                    acc = acc + src[i0 + j * M0 * M1 * M2];
                  }
                  bufB[at + i0] = Weight(acc, norm, alpha);
                }
              }
              __syncthreads();
              wbuf = bufB;
            }
          }

          // Gather: centre term w(x,t) Y(x+t) and target term w(x-t,t) Y(x-t), in the contract's
          // order (target first when t is lexicographically positive).
          const bool targetFirst =
            (t3 != 0) ? (t3 > 0) : (t2 != 0) ? (t2 > 0) : (t1 != 0) ? (t1 > 0) : (t0 > 0);
#pragma unroll
          for (int v = 0; v < VPT; ++v)
          {
            const int x0 = tx;
            const int x1 = ty + (v % VY) * BY;
            const int x2 = (v / VY) % T2;
            const int x3 = v / (VY * T2);
            Real      wc = w0;
            Real      wt = w0;
            if (WIN > 0)
            {
              const int at = (x0 - w0lo) + (x1 - w1lo) * M0 + (x2 - w2lo) * M0 * M1 + (x3 - w3lo) * M0 * M1 * M2;
              wc = wbuf[at];
              wt = wbuf[at - wShift];
            }
            const TIn * y = Yt + (x0 + x1 * ys1 + x2 * ys2 + x3 * ys3) * K;
            const TIn * yc = y + tOff * K;
            const TIn * yt = y - tOff * K;
            const Real  wa = targetFirst ? wt : wc;
            const Real  wb = targetFirst ? wc : wt;
            const TIn * ya = targetFirst ? yt : yc;
            const TIn * yb = targetFirst ? yc : yt;
            ws[v] = (ws[v] + wa) + wb;
#pragma unroll
            for (int k = 0; k < K; ++k)
            {
              rs[v][k] = (rs[v][k] + wa * static_cast<Real>(ya[k])) + wb * static_cast<Real>(yb[k]);
            }
          }
          __syncthreads();
        }
      }
    }
  }

  // Normalise and store the voxels inside the output region.
#pragma unroll
  for (int v = 0; v < VPT; ++v)
  {
    const long long g0 = lo[0] + tx;
    const long long g1 = lo[1] + ty + (v % VY) * BY;
    const long long g2 = lo[2] + (v / VY) % T2;
    const long long g3 = lo[3] + v / (VY * T2);
    if (g0 < p.outSize[0] && g1 < p.outSize[1] && g2 < p.outSize[2] && g3 < p.outSize[3])
    {
      const long long o = g0 + p.outSize[0] * (g1 + p.outSize[1] * (g2 + p.outSize[2] * g3));
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        out[o * K + k] = static_cast<TOut>(static_cast<TIn>(rs[v][k] / ws[v]));
      }
    }
  }
}
