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
// the output of the CPU backend (src/itkNonLocalMeansCPUBackend.cxx): a block owns a tile of output
// voxels; for every shift t, in scikit-image's order, it computes the weights over the union of the
// tile and the tile shifted by -t with the contract's separable sums (axis 0 first), in shared
// memory and registers, and every thread adds both terms of each of its voxels in the contract's
// order.
//
// Per shift: pass A sums the patch terms D along axis 0 (when a row of the box fits a warp, one
// warp per row and the neighbours' terms through shuffles; otherwise each thread evaluates the terms
// of its cell); pass B sums along axis 1 from shared memory and, in 3D, along axis 2 in registers
// while marching through the planes (in NLM_ZS segments), and turns the sums into weights, kept as
// the 32-bit high words of their doubles (the low words are zero); the gather adds the two terms of
// every voxel. Two barriers per shift (three in 4D, where axis 2 is summed from shared memory and
// axis 3 in registers).
//
// Configuration macros (set by the host):
//   NLM_DIM        spatial dimensions, 2..4
//   NLM_K          components per pixel
//   NLM_S          odd patch size
//   NLM_PD         patch distance
//   NLM_T0..NLM_T3 tile extent per axis (1 for unused axes)
//   NLM_NT         threads per block (divides the tile's voxel count)
//   NLM_ZS         segments of the march along axis 2 in pass B (3D)
//   NLM_MINBLOCKS  blocks per SM the registers are budgeted for
//   NLM_TIN        element type of the uploaded input: float or double
//   NLM_TOUT       element type of the output: float or double
//   NLM_REAL       arithmetic type, also of the padded input: double (bitwise contract) or float
//   NLM_REAL_IS_FLOAT 1 for float arithmetic
//   NLM_INDEX      integer type of offsets inside a block's footprint: int or long long
//   NLM_COLS       1 for the column kernel (3D; see below), 0 for the tiled kernel
//   NLM_ROWS       column kernel: rows along axis 1 per thread

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
constexpr int EXT = (WIN > 0) ? WIN - 1 : 0;
constexpr int PD = NLM_PD;
constexpr int E = O + PD; // padding of the input on each side of a used axis
constexpr int T0 = NLM_T0;
constexpr int T1 = NLM_T1;
constexpr int T2 = NLM_T2;
constexpr int T3 = NLM_T3;
constexpr int NT = NLM_NT;
constexpr int ZS = NLM_ZS;
constexpr int TV = T0 * T1 * T2 * T3;
constexpr int VPT = TV / NT; // voxels per thread
// Weight box (largest extent per axis) and the box summed along axis 0 only.
constexpr int MW0 = T0 + PD;
constexpr int MW1 = T1 + PD;
constexpr int MW2 = (DIM > 2) ? T2 + PD : 1;
constexpr int MW3 = (DIM > 3) ? T3 + PD : 1;
constexpr int MA0 = MW0;
constexpr int MA1 = MW1 + EXT;
constexpr int MA2 = (DIM > 2) ? MW2 + EXT : 1;
constexpr int MA3 = (DIM > 3) ? MW3 + EXT : 1;
constexpr int NWARPS = NT / 32;
// Pass A by warp rows: every patch term of a row (T0 + PD + EXT of them at most) in one warp.
constexpr bool ROWS = (WIN > 0) && (T0 + PD + EXT <= 32) && (NT % 32 == 0);
constexpr int  SIZE_A = MA0 * MA1 * MA2 * MA3;
constexpr int  SIZE_W = MW0 * MW1 * MW2 * MW3;
constexpr int  SIZE_B = (DIM > 3) ? MW0 * MW1 * MA2 * MA3 : 0; // 4D: summed along axes 0 and 1

static_assert(DIM >= 2 && DIM <= 4, "2D, 3D or 4D");
static_assert(DIM > 2 || (T2 == 1 && T3 == 1), "unused axes have extent 1");
static_assert(DIM > 3 || T3 == 1, "unused axes have extent 1");
static_assert(NLM_COLS || TV % NT == 0, "the threads divide the tile");
// When the threads cover whole planes of the tile (axes 0 and 1), every thread keeps one column.
constexpr bool COLUMNS = (NT % (T0 * T1) == 0);
constexpr int  CSTEP = COLUMNS ? NT / (T0 * T1) : 1; // planes between a thread's voxels

#if NLM_REAL_IS_FLOAT
typedef float WeightStore; // float weights: stored as they are
#else
typedef unsigned int WeightStore; // double weights: their high 32 bits (the low 32 are zero)
#endif

__device__ __forceinline__ int
Iabs(int v)
{
  return v < 0 ? -v : v;
}
__device__ __forceinline__ int
Imax(int a, int b)
{
  return a > b ? a : b;
}

/** Weight of a raw distance, in its stored form. */
__device__ __forceinline__ WeightStore
Weight(Real raw, Real norm, Real invNorm, bool half)
{
#if NLM_REAL_IS_FLOAT
  const float dist = ((0.0f > raw) ? 0.0f : raw) * invNorm;
  if (dist > 5.0f)
  {
    return 0.0f;
  }
  // Schraudolph's exponential in float: the same 32-bit integer as the double version, whose
  // value (a double with 20 mantissa bits) is exactly representable as a float.
  const int      i = __float2int_rz(static_cast<float>(itk::nlm::kExpA) * -dist) + itk::nlm::kExpBC;
  const unsigned bits = (static_cast<unsigned>(i) - (896u << 20)) << 3;
  return (half ? 0.5f : 1.0f) * __uint_as_float(bits);
#else
  return itk::nlm::FastModeWeightHighWordNoDivision(raw, norm, invNorm, half);
#endif
}

/** A stored weight as a number. */
__device__ __forceinline__ Real
Unpack(WeightStore w)
{
#if NLM_REAL_IS_FLOAT
  return w;
#else
  return __hiloint2double(static_cast<int>(w), 0);
#endif
}

#if !NLM_COLS // the tiled kernel's helpers (VPT is 0 for some column shapes)
/** Tile coordinates of a thread's v-th voxel. */
__device__ __forceinline__ void
VoxelOf(int tid, int v, int & x0, int & x1, int & x2, int & x3)
{
  if (COLUMNS)
  {
    x0 = tid % T0;
    x1 = (tid / T0) % T1;
    const int plane = tid / (T0 * T1) + v * CSTEP;
    x2 = plane % T2;
    x3 = plane / T2;
  }
  else
  {
    const int vox = tid + v * NT;
    x0 = vox % T0;
    x1 = (vox / T0) % T1;
    x2 = (vox / (T0 * T1)) % T2;
    x3 = vox / (T0 * T1 * T2);
  }
}

/** Adds, for each of the thread's voxels x, the centre term w(x,t) Y(x+t) and the target term
 * w(x-t,t) Y(x-t): the target term first when t is lexicographically positive (TargetFirst). */
template <bool TargetFirst>
__device__ __forceinline__ void
Gather(int                 tid,
       const Real *        Yt,
       Index               tOff,
       Index               ys1,
       Index               ys2,
       Index               ys3,
       const WeightStore * bufW,
       WeightStore         w0,
       int                 w0lo,
       int                 w1lo,
       int                 w2lo,
       int                 w3lo,
       int                 wShift,
       Real (&ws)[VPT],
       Real (&rs)[VPT][K])
{
#pragma unroll
  for (int v = 0; v < VPT; ++v)
  {
    int x0, x1, x2, x3;
    VoxelOf(tid, v, x0, x1, x2, x3);
    Real wc = Unpack(w0);
    Real wt = wc;
    if (WIN > 0)
    {
      const int aw = (x0 - w0lo) + (x1 - w1lo) * MW0 + (x2 - w2lo) * MW0 * MW1 + (x3 - w3lo) * MW0 * MW1 * MW2;
      wc = Unpack(bufW[aw]);
      wt = Unpack(bufW[aw - wShift]);
    }
    // Integer offsets rather than pointers: one register per voxel where the compiler keeps them.
    const Index at = (x0 + x1 * ys1 + x2 * ys2 + x3 * ys3) * K;
    const Index ac = at + tOff * K;
    const Index aT = at - tOff * K;
    if (TargetFirst)
    {
      ws[v] = (ws[v] + wt) + wc;
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        rs[v][k] = (rs[v][k] + wt * Yt[aT + k]) + wc * Yt[ac + k];
      }
    }
    else
    {
      ws[v] = (ws[v] + wc) + wt;
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        rs[v][k] = (rs[v][k] + wc * Yt[ac + k]) + wt * Yt[aT + k];
      }
    }
  }
}

#endif

/** D(y) for the current shift: sum over channels of the squared difference, minus the noise term. */
__device__ __forceinline__ Real
PatchTerm(const Real * __restrict__ y, Index tOff, Real noise)
{
  Real acc = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
  {
    const Real diff = y[k] - y[tOff * K + k];
    acc = (k == 0) ? diff * diff : acc + diff * diff;
  }
  return acc - noise;
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
  double    invNorm;  // the double nearest 1 / norm
  double    noise;
  double    negScale; // WeightScale(norm), for FastModeWeightHighWordScaled
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

/** Reflect-pads the uploaded input into the working array in the arithmetic type (NumPy's
 * mode='reflect' about the whole image), one cell per thread (grid-stride). Cells beyond the region
 * the output needs (there only because tiles are rounded up) are clamped to its border. */
extern "C" __global__ void
nlm_pad(const TIn * __restrict__ in, Real * __restrict__ out, NlmPadParams p)
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
      out[cell * K + k] = static_cast<Real>(in[src * K + k]);
    }
  }
}

#if !NLM_COLS
extern "C" __global__ void
__launch_bounds__(NT, NLM_MINBLOCKS) nlm_fast(const Real * __restrict__ Y, TOut * __restrict__ out, NlmFastParams p)
{
  extern __shared__ double sharedRaw[];
  Real *                   bufA = reinterpret_cast<Real *>(sharedRaw);
  Real *                   bufB = bufA + SIZE_A; // 4D only, SIZE_B cells
  WeightStore *            bufW = reinterpret_cast<WeightStore *>(bufB + SIZE_B);

  // This block's tile.
  long long       tile = p.tileOffset + blockIdx.x;
  const long long c0 = tile % p.tiles[0];
  tile /= p.tiles[0];
  const long long c1 = tile % p.tiles[1];
  tile /= p.tiles[1];
  const long long c2 = tile % p.tiles[2];
  const long long c3 = tile / p.tiles[2];
  const long long lo[4] = { c0 * T0, c1 * T1, c2 * T2, c3 * T3 };
  const int       tid = threadIdx.x;
  const int       lane = tid % 32;
  const int       warp = tid / 32;

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
  const Real * Yt = Y + base * K;
  const Real   norm = static_cast<Real>(p.norm);
  const Real   invNorm = static_cast<Real>(p.invNorm);
  const Real   noise = static_cast<Real>(p.noise);

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
#pragma unroll 1
        for (int t0 = 0; t0 <= PD; ++t0)
        {
          const bool  half = (t0 == 0); // alpha = 0.5 on the t0 == 0 plane
          const Index tOff = t0 + t1 * ys1 + t2 * ys2 + t3 * ys3;
          // Weight box: the tile and the tile shifted by -t.
          const int   w0lo = -t0;
          const int   w0len = T0 + t0;
          const int   w1lo = -Imax(t1, 0);
          const int   w1len = T1 + Iabs(t1);
          const int   w2lo = -Imax(t2, 0);
          const int   w2len = T2 + Iabs(t2);
          const int   w3lo = -Imax(t3, 0);
          const int   w3len = T3 + Iabs(t3);
          const int   wShift = t0 + t1 * MW0 + t2 * MW0 * MW1 + t3 * MW0 * MW1 * MW2;
          WeightStore w0 = 0;
          if (WIN == 0)
          {
            w0 = Weight(Real(0), norm, invNorm, half); // patch size 1: every raw distance is +0
          }
          else
          {
            // Pass A: along axis 0, over the rows of the box (weight box along axis 0, extended by
            // the patch along the other used axes).
            const int L1 = w1len + EXT;
            const int L2 = (DIM > 2) ? w2len + EXT : 1;
            const int L3 = (DIM > 3) ? w3len + EXT : 1;
            const int o1 = w1lo - O + 1;
            const int o2 = (DIM > 2) ? w2lo - O + 1 : 0;
            const int o3 = (DIM > 3) ? w3lo - O + 1 : 0;
            const int dLen = w0len + EXT; // patch terms per row
            if (ROWS)
            {
              // One warp per row; lane l holds the term at l and takes its right neighbours' terms
              // by shuffles, in the contract's order.
              // Rows r = i1 + L1 * (i2 + L2 * i3), warp-strided; the indices are advanced, not divided.
              int i1 = warp;
              int i2 = 0;
              int i3 = 0;
              while (i1 >= L1)
              {
                i1 -= L1;
                if (++i2 == L2)
                {
                  i2 = 0;
                  ++i3;
                }
              }
              const Real * rowBase = Yt + (o1 * ys1 + o2 * ys2 + o3 * ys3 + (w0lo - O + 1 + lane)) * K;
              const bool   loads = lane < dLen;
              const bool   stores = lane < w0len;
              while (i3 < L3)
              {
                const Real * y = rowBase + (i1 * ys1 + i2 * ys2 + i3 * ys3) * K;
                const Real   term = loads ? PatchTerm(y, tOff, noise) : Real(0);
                Real         acc = term;
#pragma unroll
                for (int j = 1; j < WIN; ++j)
                {
                  acc = acc + __shfl_down_sync(0xffffffffu, term, j);
                }
                if (stores)
                {
                  bufA[lane + i1 * MA0 + i2 * MA0 * MA1 + i3 * MA0 * MA1 * MA2] = acc;
                }
                i1 += NWARPS;
                while (i1 >= L1)
                {
                  i1 -= L1;
                  if (++i2 == L2)
                  {
                    i2 = 0;
                    ++i3;
                  }
                }
              }
            }
            else
            {
              // Each thread evaluates the terms of its cell.
              for (int f = tid; f < MA0 * MA1 * MA2 * MA3; f += NT)
              {
                const int i0 = f % MA0;
                const int i1 = (f / MA0) % MA1;
                const int i2 = (f / (MA0 * MA1)) % MA2;
                const int i3 = f / (MA0 * MA1 * MA2);
                if (i0 >= w0len || i1 >= L1 || i2 >= L2 || i3 >= L3)
                {
                  continue;
                }
                const Real * y = Yt + ((o1 + i1) * ys1 + (o2 + i2) * ys2 + (o3 + i3) * ys3 + (w0lo - O + 1 + i0)) * K;
                Real         acc = PatchTerm(y, tOff, noise);
#pragma unroll
                for (int j = 1; j < WIN; ++j)
                {
                  acc = acc + PatchTerm(y + j * K, tOff, noise);
                }
                bufA[f] = acc;
              }
            }
            __syncthreads();
            if (DIM == 2)
            {
              // Pass B: along axis 1, and the weights.
              for (int f = tid; f < MW0 * MW1; f += NT)
              {
                const int i0 = f % MW0;
                const int i1 = f / MW0;
                if (i0 >= w0len || i1 >= w1len)
                {
                  continue;
                }
                const Real * a = bufA + i0 + i1 * MA0;
                Real         acc = a[0];
#pragma unroll
                for (int j = 1; j < WIN; ++j)
                {
                  acc = acc + a[j * MA0];
                }
                bufW[i0 + i1 * MW0] = Weight(acc, norm, invNorm, half);
              }
            }
            else if (DIM == 3)
            {
              // Pass B: along axis 1 from shared memory, then along axis 2 in registers while
              // marching through the planes of one of ZS segments, and the weights.
              const int seg = (w2len + ZS - 1) / ZS;
              for (int f = tid; f < MW0 * MW1 * ZS; f += NT)
              {
                const int i0 = f % MW0;
                const int i1 = (f / MW0) % MW1;
                const int zlo = (f / (MW0 * MW1)) * seg;
                const int zhi = min(w2len, zlo + seg);
                if (i0 >= w0len || i1 >= w1len || zlo >= zhi)
                {
                  continue;
                }
                const Real *  a = bufA + i0 + i1 * MA0;
                WeightStore * w = bufW + i0 + i1 * MW0;
                Real          ring[WIN > 0 ? WIN : 1];
                for (int i2 = zlo; i2 < zhi + EXT; ++i2)
                {
                  Real acc = a[i2 * MA0 * MA1];
#pragma unroll
                  for (int j = 1; j < WIN; ++j)
                  {
                    acc = acc + a[i2 * MA0 * MA1 + j * MA0];
                  }
#pragma unroll
                  for (int j = 0; j + 1 < WIN; ++j)
                  {
                    ring[j] = ring[j + 1];
                  }
                  ring[WIN - 1] = acc;
                  if (i2 >= zlo + EXT)
                  {
                    Real raw = ring[0];
#pragma unroll
                    for (int j = 1; j < WIN; ++j)
                    {
                      raw = raw + ring[j];
                    }
                    w[(i2 - EXT) * MW0 * MW1] = Weight(raw, norm, invNorm, half);
                  }
                }
              }
            }
            else
            {
              // 4D. Pass B: along axis 1, from shared memory.
              for (int f = tid; f < MW0 * MW1 * MA2 * MA3; f += NT)
              {
                const int i0 = f % MW0;
                const int q = f / MW0;
                const int i1 = q % MW1;
                const int i2 = (q / MW1) % MA2;
                const int i3 = q / (MW1 * MA2);
                if (i0 >= w0len || i1 >= w1len || i2 >= L2 || i3 >= L3)
                {
                  continue;
                }
                const Real * a = bufA + i0 + i1 * MA0 + i2 * MA0 * MA1 + i3 * MA0 * MA1 * MA2;
                Real         acc = a[0];
#pragma unroll
                for (int j = 1; j < WIN; ++j)
                {
                  acc = acc + a[j * MA0];
                }
                bufB[i0 + i1 * MW0 + i2 * MW0 * MW1 + i3 * MW0 * MW1 * MA2] = acc;
              }
              __syncthreads();
              // Pass C: along axis 2 from shared memory, along axis 3 in registers, and the weights.
              for (int f = tid; f < MW0 * MW1 * MW2; f += NT)
              {
                const int i0 = f % MW0;
                const int i1 = (f / MW0) % MW1;
                const int i2 = f / (MW0 * MW1);
                if (i0 >= w0len || i1 >= w1len || i2 >= w2len)
                {
                  continue;
                }
                const Real *  b = bufB + i0 + i1 * MW0 + i2 * MW0 * MW1;
                WeightStore * w = bufW + i0 + i1 * MW0 + i2 * MW0 * MW1;
                Real          ring[WIN > 0 ? WIN : 1];
                for (int i3 = 0; i3 < L3; ++i3)
                {
                  Real acc = b[i3 * MW0 * MW1 * MA2];
#pragma unroll
                  for (int j = 1; j < WIN; ++j)
                  {
                    acc = acc + b[i3 * MW0 * MW1 * MA2 + j * MW0 * MW1];
                  }
#pragma unroll
                  for (int j = 0; j + 1 < WIN; ++j)
                  {
                    ring[j] = ring[j + 1];
                  }
                  ring[WIN - 1] = acc;
                  if (i3 >= EXT)
                  {
                    Real raw = ring[0];
#pragma unroll
                    for (int j = 1; j < WIN; ++j)
                    {
                      raw = raw + ring[j];
                    }
                    w[(i3 - EXT) * MW0 * MW1 * MW2] = Weight(raw, norm, invNorm, half);
                  }
                }
              }
            }
            __syncthreads();
          }

          // Gather: centre term w(x,t) Y(x+t) and target term w(x-t,t) Y(x-t), in the contract's
          // order (target first when t is lexicographically positive).
          const bool targetFirst = (t3 != 0) ? (t3 > 0) : (t2 != 0) ? (t2 > 0) : (t1 != 0) ? (t1 > 0) : (t0 > 0);
          if (targetFirst)
          {
            Gather<true>(tid, Yt, tOff, ys1, ys2, ys3, bufW, w0, w0lo, w1lo, w2lo, w3lo, wShift, ws, rs);
          }
          else
          {
            Gather<false>(tid, Yt, tOff, ys1, ys2, ys3, bufW, w0, w0lo, w1lo, w2lo, w3lo, wShift, ws, rs);
          }
        }
      }
    }
  }

  // Normalise and store the voxels inside the output region.
#pragma unroll
  for (int v = 0; v < VPT; ++v)
  {
    int x0, x1, x2, x3;
    VoxelOf(tid, v, x0, x1, x2, x3);
    const long long g0 = lo[0] + x0;
    const long long g1 = lo[1] + x1;
    const long long g2 = lo[2] + x2;
    const long long g3 = lo[3] + x3;
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
#endif

#if NLM_COLS
// The column kernel (3D, patch size >= 3). A block first copies its footprint of the padded input
// (its tile's patch terms extended by the patch distance on every side) into shared memory, whose
// strides are compile-time constants, then runs without barriers. A warp covers 32 cells along
// axis 0, of which the first 32 - EXT are output voxels; each thread owns NLM_ROWS rows along
// axis 1 and the T2 planes of the tile along axis 2, and keeps their accumulators in registers. For
// every shift t it marches through its planes and computes, for each of its voxels c, both
// raw(c, t) and raw(c, -t) = raw(c - t, t) (contract 2.3: the same squares in the same order), so
// the weights of the centre and of the target term need nothing from other threads but the terms
// of their neighbours along axis 0 (shuffles). Sums: along axis 0 across lanes, along axis 1 over
// the thread's rows, along axis 2 over the planes of the march, in the contract's order.
namespace
{
constexpr int R = NLM_ROWS;
constexpr int RE = R + EXT; // rows of terms per thread
constexpr int TZ = T2;
// Footprint of a block in shared memory (cells), and its strides.
constexpr int FX = 32 + 2 * PD;
constexpr int FY = T1 + EXT + 2 * PD;
constexpr int FZ = T2 + EXT + 2 * PD;
constexpr int FXY = FX * FY;
#  ifndef NLM_UNROLL_T0
#    define NLM_UNROLL_T0 1
#  endif
constexpr int UNROLL_T0 = NLM_UNROLL_T0; // shifts along axis 0 per loop iteration (a tuning knob)
static_assert(DIM == 3 && WIN >= 1, "the column kernel is for 3D with a patch size of 3 or more");
static_assert(T0 == 32 - EXT && T1 * 32 == R * NT && NT % 32 == 0, "one warp per R rows of 32 - EXT voxels");

/** Whether the target term of a shift is added first (a compile-time tag). */
template <bool TargetFirst>
struct Order
{
  static constexpr bool value = TargetFirst;
};

/** A weight of the column kernel, in its stored form. */
__device__ __forceinline__ WeightStore
ColumnWeight(Real raw, Real norm, Real invNorm, double negScale, bool half)
{
#  if NLM_REAL_IS_FLOAT
  return Weight(raw, norm, invNorm, half);
#  else
  return itk::nlm::FastModeWeightHighWordScaled(raw, norm, negScale, half);
#  endif
}
} // namespace

extern "C" __global__ void
__launch_bounds__(NT, NLM_MINBLOCKS) nlm_fast(const Real * __restrict__ Y, TOut * __restrict__ out, NlmFastParams p)
{
  extern __shared__ double sharedRaw[];
  Real *          F = reinterpret_cast<Real *>(sharedRaw);
  long long       tile = p.tileOffset + blockIdx.x;
  const long long c0 = tile % p.tiles[0];
  tile /= p.tiles[0];
  const long long c1 = tile % p.tiles[1];
  const long long c2 = tile / p.tiles[1];
  const int       lane = threadIdx.x % 32;
  const int       warp = threadIdx.x / 32;

  // The footprint starts at padded cell lo + 1 on every axis: the first patch term of the tile's
  // first voxel is at lo + E - O + 1 = lo + PD + 1, and shifts reach PD further on each side.
  {
    const Real * src =
      Y + ((c0 * T0 + 1) + (c1 * T1 + 1) * p.ySize[0] + (c2 * T2 + 1) * p.ySize[0] * p.ySize[1]) * K;
    const Index ys1 = static_cast<Index>(p.ySize[0]);
    const Index ys2 = ys1 * static_cast<Index>(p.ySize[1]);
    for (int f = threadIdx.x; f < FXY * FZ; f += NT)
    {
      const int   x = f % FX;
      const int   y = (f / FX) % FY;
      const int   z = f / FXY;
      const Index at = (x + y * ys1 + z * ys2) * K;
#  pragma unroll
      for (int k = 0; k < K; ++k)
      {
        F[f * K + k] = src[at + k];
      }
    }
  }
  __syncthreads();

  // This thread's first patch term in the footprint, and its voxel's offset from it.
  const Real * own = F + ((lane + PD) + (warp * R + PD) * FX + PD * FXY) * K;
  constexpr int centre = (O - 1) * (1 + FX + FXY) * K;
  const Real    norm = static_cast<Real>(p.norm);
  const Real    invNorm = static_cast<Real>(p.invNorm);
  const Real    noise = static_cast<Real>(p.noise);
  const double  negScale = p.negScale;

  Real ws[R][TZ];
  Real rs[R][TZ][K];
#  pragma unroll
  for (int r = 0; r < R; ++r)
  {
#  pragma unroll
    for (int q = 0; q < TZ; ++q)
    {
      ws[r][q] = 0;
#  pragma unroll
      for (int k = 0; k < K; ++k)
      {
        rs[r][q][k] = 0;
      }
    }
  }

  // One shift; `order` tells whether the target term comes first (t lexicographically positive),
  // so that the accumulation needs no branch.
  auto shift = [&](auto order, int t0, int t1, int t2) {
    const bool   half = (t0 == 0);
    const int    tOff = (t0 + t1 * FX + t2 * FXY) * K;
    const Real * plus = own + tOff;
    const Real * minus = own - tOff;
    // Sums along axes 0 and 1 of the last WIN planes, for +t and -t, per row.
    Real ringP[R][WIN];
    Real ringM[R][WIN];
#  pragma unroll
    for (int r = 0; r < R; ++r)
    {
#  pragma unroll
      for (int j = 0; j < WIN; ++j)
      {
        ringP[r][j] = 0;
        ringM[r][j] = 0;
      }
    }
    // Patch size 3: a voxel's first patch term is at the voxel, so the values of its centre and
    // target terms are those of that term (kept for EXT planes).
    Real keepP[R][TZ + EXT][K];
    Real keepM[R][TZ + EXT][K];
#  pragma unroll
    for (int pl = 0; pl < TZ + EXT; ++pl)
    {
      Real aP[RE];
      Real aM[RE];
#  pragma unroll
      for (int r = 0; r < RE; ++r)
      {
        const int at = (r * FX + pl * FXY) * K;
        Real      dP = 0;
        Real      dM = 0;
#  pragma unroll
        for (int k = 0; k < K; ++k)
        {
          const Real value = own[at + k];
          const Real valueP = plus[at + k];
          const Real valueM = minus[at + k];
          if (r < R)
          {
            keepP[r][pl][k] = valueP;
            keepM[r][pl][k] = valueM;
          }
          const Real diffP = value - valueP;
          const Real diffM = value - valueM;
          dP = (k == 0) ? diffP * diffP : dP + diffP * diffP;
          dM = (k == 0) ? diffM * diffM : dM + diffM * diffM;
        }
        dP = dP - noise;
        dM = dM - noise;
        Real sP = dP;
        Real sM = dM;
#  pragma unroll
        for (int j = 1; j < WIN; ++j)
        {
          sP = sP + __shfl_down_sync(0xffffffffu, dP, j);
          sM = sM + __shfl_down_sync(0xffffffffu, dM, j);
        }
        aP[r] = sP;
        aM[r] = sM;
      }
#  pragma unroll
      for (int r = 0; r < R; ++r)
      {
        Real bP = aP[r];
        Real bM = aM[r];
#  pragma unroll
        for (int j = 1; j < WIN; ++j)
        {
          bP = bP + aP[r + j];
          bM = bM + aM[r + j];
        }
#  pragma unroll
        for (int j = 0; j + 1 < WIN; ++j)
        {
          ringP[r][j] = ringP[r][j + 1];
          ringM[r][j] = ringM[r][j + 1];
        }
        ringP[r][WIN - 1] = bP;
        ringM[r][WIN - 1] = bM;
        if (pl >= EXT)
        {
          const int q = pl - EXT;
          Real      rawP = ringP[r][0];
          Real      rawM = ringM[r][0];
#  pragma unroll
          for (int j = 1; j < WIN; ++j)
          {
            rawP = rawP + ringP[r][j];
            rawM = rawM + ringM[r][j];
          }
          const Real wc = Unpack(ColumnWeight(rawP, norm, invNorm, negScale, half));
          const Real wt = Unpack(ColumnWeight(rawM, norm, invNorm, negScale, half));
          const int  c = centre + (r * FX + q * FXY) * K;
          Real       yc[K];
          Real       yt[K];
#  pragma unroll
          for (int k = 0; k < K; ++k)
          {
            yc[k] = (O == 1) ? keepP[r][q][k] : plus[c + k];
            yt[k] = (O == 1) ? keepM[r][q][k] : minus[c + k];
          }
          if constexpr (decltype(order)::value)
          {
            ws[r][q] = (ws[r][q] + wt) + wc;
#  pragma unroll
            for (int k = 0; k < K; ++k)
            {
              rs[r][q][k] = (rs[r][q][k] + wt * yt[k]) + wc * yc[k];
            }
          }
          else
          {
            ws[r][q] = (ws[r][q] + wc) + wt;
#  pragma unroll
            for (int k = 0; k < K; ++k)
            {
              rs[r][q][k] = (rs[r][q][k] + wc * yc[k]) + wt * yt[k];
            }
          }
        }
      }
    }
  };
  for (int t2 = -PD; t2 <= PD; ++t2)
  {
    for (int t1 = -PD; t1 <= PD; ++t1)
    {
#  pragma unroll UNROLL_T0
      for (int t0 = 0; t0 <= PD; ++t0)
      {
        if ((t2 != 0) ? (t2 > 0) : (t1 != 0) ? (t1 > 0) : (t0 > 0))
        {
          shift(Order<true>(), t0, t1, t2);
        }
        else
        {
          shift(Order<false>(), t0, t1, t2);
        }
      }
    }
  }

  // Normalise and store the voxels inside the output region.
  const long long g0 = c0 * T0 + lane;
  const long long g1 = c1 * T1 + warp * R;
  const long long g2 = c2 * T2;
  if (lane < T0 && g0 < p.outSize[0])
  {
#  pragma unroll
    for (int r = 0; r < R; ++r)
    {
#  pragma unroll
      for (int q = 0; q < TZ; ++q)
      {
        if (g1 + r < p.outSize[1] && g2 + q < p.outSize[2])
        {
          const long long o = g0 + p.outSize[0] * ((g1 + r) + p.outSize[1] * (g2 + q));
#  pragma unroll
          for (int k = 0; k < K; ++k)
          {
            out[o * K + k] = static_cast<TOut>(static_cast<TIn>(rs[r][q][k] / ws[r][q]));
          }
        }
      }
    }
  }
}
#endif
