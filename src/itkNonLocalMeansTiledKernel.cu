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

// The tiled kernel (2D, 3D, 4D; see itkNonLocalMeansKernelCommon.cuh for the passes).
//
// NLM_SPLIT_BOXES 1: the weights of a shift are computed in two boxes of the tile's extent, the
// tile's own cells (w(x, t)) and the tile shifted by -t (w(x - t, t)), one after the other, instead
// of one box spanning both; shared memory then does not grow with the patch distance (where the
// spanning box does not fit the device). The same weights, summed in the same order.

#include "itkNonLocalMeansKernelCommon.cuh"

#ifndef NLM_SPLIT_BOXES
#  define NLM_SPLIT_BOXES 0
#endif

namespace
{
constexpr int  ZS = NLM_ZS;
constexpr int  TV = T0 * T1 * T2 * T3;
constexpr int  VPT = TV / NT; // voxels per thread
constexpr bool SPLIT = NLM_SPLIT_BOXES != 0;
constexpr int  BOXES = SPLIT ? 2 : 1; // weight boxes per shift
// Weight box (largest extent per axis) and the box summed along axis 0 only.
constexpr int MW0 = SPLIT ? T0 : T0 + PD0;
constexpr int MW1 = SPLIT ? T1 : T1 + PD1;
constexpr int MW2 = (DIM > 2) ? (SPLIT ? T2 : T2 + PD2) : 1;
constexpr int MW3 = (DIM > 3) ? (SPLIT ? T3 : T3 + PD3) : 1;
constexpr int BOX_W = MW0 * MW1 * MW2 * MW3; // weights of one box
constexpr int MA0 = MW0;
constexpr int MA1 = MW1 + EXT1;
constexpr int MA2 = (DIM > 2) ? MW2 + EXT2 : 1;
constexpr int MA3 = (DIM > 3) ? MW3 + EXT3 : 1;
constexpr int NWARPS = NT / 32;
// Pass A by warp rows: every patch term of a row (T0 + PD0 + EXT0 of them at most) in one warp.
constexpr bool ROWS = (WIN0 > 0) && (MW0 + EXT0 <= 32) && (NT % 32 == 0);
constexpr int  SIZE_A = MA0 * MA1 * MA2 * MA3;
constexpr int  SIZE_B = (DIM > 3) ? MW0 * MW1 * MA2 * MA3 : 0; // 4D: summed along axes 0 and 1

static_assert(TV % NT == 0, "the threads divide the tile");
// When the threads cover whole planes of the tile (axes 0 and 1), every thread keeps one column.
constexpr bool COLUMNS = (NT % (T0 * T1) == 0);
constexpr int  CSTEP = COLUMNS ? NT / (T0 * T1) : 1; // planes between a thread's voxels

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
    if (WIN0 > 0) // every window is 0 or none
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
        rs[v][k] = (rs[v][k] + wt * Value(Yt[aT + k])) + wc * Value(Yt[ac + k]);
      }
    }
    else
    {
      ws[v] = (ws[v] + wc) + wt;
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        rs[v][k] = (rs[v][k] + wc * Value(Yt[ac + k])) + wt * Value(Yt[aT + k]);
      }
    }
  }
}

/** Pass A by warp rows (ROWS): the sums along axis 0 of the patch terms of the rows of bufA (the
 * weight box along axis 0, extended by the patch along the other used axes: L1 x L2 x L3 rows of
 * dLen terms; this lane's cell of the first row is Y's cell rowCell from Yt). One warp per row,
 * warp-strided; lane l holds the term at l and takes its right neighbours' terms by shuffles, in the
 * contract's order. */
__device__ __forceinline__ void
PassAByRows(const Real * Yt,
            const Real * S2t,
            Index        tOff,
            Real         noise,
            Index        rowCell,
            Index        ys1,
            Index        ys2,
            Index        ys3,
            int          dLen,
            int          w0len,
            int          L1,
            int          L2,
            int          L3,
            int          warp,
            int          lane,
            Real *       bufA)
{
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
  const Real * rowBase = Yt + rowCell * K;
  const bool   loads = lane < dLen;
  const bool   stores = lane < w0len;
  while (i3 < L3)
  {
    const Index  cell = i1 * ys1 + i2 * ys2 + i3 * ys3;
    const Real * y = rowBase + cell * K;
    const Real   term = loads ? PatchTerm(y, S2t + (rowCell + cell), tOff, noise) : Real(0);
    Real         acc = term;
#pragma unroll
    for (int j = 1; j < WIN0; ++j)
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

/** Pass A by cells: each thread evaluates the sums along axis 0 of the patch terms of its cells of
 * bufA (L1, L2, L3 as for PassAByRows; its cell (0, 0, 0, 0) is Y's cell (w0lo - O0 + 1, o1, o2,
 * o3) from Yt). */
__device__ __forceinline__ void
PassAByCells(const Real * Yt,
             const Real * S2t,
             Index        tOff,
             Real         noise,
             Index        ys1,
             Index        ys2,
             Index        ys3,
             int          o1,
             int          o2,
             int          o3,
             int          w0lo,
             int          w0len,
             int          L1,
             int          L2,
             int          L3,
             int          tid,
             Real *       bufA)
{
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
    const Index  cell = (o1 + i1) * ys1 + (o2 + i2) * ys2 + (o3 + i3) * ys3 + (w0lo - O0 + 1 + i0);
    const Real * y = Yt + cell * K;
    const Real * s2 = S2t + cell;
    Real         acc = PatchTerm(y, s2, tOff, noise);
#pragma unroll
    for (int j = 1; j < WIN0; ++j)
    {
      acc = acc + PatchTerm(y + j * K, s2 + j, tOff, noise);
    }
    bufA[f] = acc;
  }
}

/** 2D pass B: the sums along axis 1 of bufA, and the weights of the w0len x w1len box into bufW. */
__device__ __forceinline__ void
PassB2D(const Real * bufA, int w0len, int w1len, Real norm, Real invNorm, bool half, int tid, WeightStore * bufW)
{
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
    for (int j = 1; j < WIN1; ++j)
    {
      acc = acc + a[j * MA0];
    }
    bufW[i0 + i1 * MW0] = Weight(acc, norm, invNorm, half);
  }
}

/** 4D pass B: the sums along axis 1 of bufA, from shared memory, into bufB. */
__device__ __forceinline__ void
PassB4D(const Real * bufA, int w0len, int w1len, int L2, int L3, int tid, Real * bufB)
{
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
    for (int j = 1; j < WIN1; ++j)
    {
      acc = acc + a[j * MA0];
    }
    bufB[i0 + i1 * MW0 + i2 * MW0 * MW1 + i3 * MW0 * MW1 * MA2] = acc;
  }
}

/** Normalises the thread's voxels inside the output region and stores them (the tile's first voxel
 * is `lo`; S2t is sigma^2 at it with a noise map). */
__device__ __forceinline__ void
StoreOutput(const itk::nlm::FastKernelParameters & p,
            const long long (&lo)[4],
            int          tid,
            const Real * S2t,
            Index        ys1,
            Index        ys2,
            Index        ys3,
            const Real (&ws)[VPT],
            const Real (&rs)[VPT][K],
            TOut * out)
{
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
      // The Rician bias: 2 sigma^2, at the voxel with a noise map.
      const Real bias = NLM_NOISE_MAP ? Real(2) * S2t[x0 + x1 * ys1 + x2 * ys2 + x3 * ys3] : static_cast<Real>(p.bias);
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        out[o * K + k] = static_cast<TOut>(static_cast<TIn>(Output(rs[v][k], ws[v], bias)));
      }
    }
  }
}

/** The weights of one box of a shift (cells [w_a lo, w_a lo + w_a len) relative to the tile's first
 * voxel along each axis a) into bufW, MW0 x MW1 x MW2 x MW3 cells from the box's first: pass A
 * along axis 0 into bufA, pass B along axis 1 (3D: and along axis 2 in registers; 4D: into bufB,
 * and pass C along axes 2 and 3), the contract's sums in its order. Ends with a barrier. */
__device__ __forceinline__ void
BoxWeights(const Real *  Yt,
           const Real *  S2t,
           Index         tOff,
           Real          noise,
           Real          norm,
           Real          invNorm,
           bool          half,
           Index         ys1,
           Index         ys2,
           Index         ys3,
           int           w0lo,
           int           w0len,
           int           w1lo,
           int           w1len,
           int           w2lo,
           int           w2len,
           int           w3lo,
           int           w3len,
           int           tid,
           int           warp,
           int           lane,
           Real *        bufA,
           Real *        bufB,
           WeightStore * bufW)
{
  // Pass A: along axis 0, over the rows of the box (weight box along axis 0, extended by
  // the patch along the other used axes).
  const int L1 = w1len + EXT1;
  const int L2 = (DIM > 2) ? w2len + EXT2 : 1;
  const int L3 = (DIM > 3) ? w3len + EXT3 : 1;
  const int o1 = w1lo - O1 + 1;
  const int o2 = (DIM > 2) ? w2lo - O2 + 1 : 0;
  const int o3 = (DIM > 3) ? w3lo - O3 + 1 : 0;
  const int dLen = w0len + EXT0; // patch terms per row
  if (ROWS)
  {
    PassAByRows(Yt,
                S2t,
                tOff,
                noise,
                o1 * ys1 + o2 * ys2 + o3 * ys3 + (w0lo - O0 + 1 + lane),
                ys1,
                ys2,
                ys3,
                dLen,
                w0len,
                L1,
                L2,
                L3,
                warp,
                lane,
                bufA);
  }
  else
  {
    PassAByCells(Yt, S2t, tOff, noise, ys1, ys2, ys3, o1, o2, o3, w0lo, w0len, L1, L2, L3, tid, bufA);
  }
  __syncthreads();
  if (DIM == 2)
  {
    PassB2D(bufA, w0len, w1len, norm, invNorm, half, tid, bufW);
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
      Real          ring[WIN2 > 0 ? WIN2 : 1];
      for (int i2 = zlo; i2 < zhi + EXT2; ++i2)
      {
        Real acc = a[i2 * MA0 * MA1];
#pragma unroll
        for (int j = 1; j < WIN1; ++j)
        {
          acc = acc + a[i2 * MA0 * MA1 + j * MA0];
        }
#pragma unroll
        for (int j = 0; j + 1 < WIN2; ++j)
        {
          ring[j] = ring[j + 1];
        }
        ring[WIN2 - 1] = acc;
        if (i2 >= zlo + EXT2)
        {
          Real raw = ring[0];
#pragma unroll
          for (int j = 1; j < WIN2; ++j)
          {
            raw = raw + ring[j];
          }
          w[(i2 - EXT2) * MW0 * MW1] = Weight(raw, norm, invNorm, half);
        }
      }
    }
  }
  else
  {
    PassB4D(bufA, w0len, w1len, L2, L3, tid, bufB);
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
      Real          ring[WIN3 > 0 ? WIN3 : 1];
      for (int i3 = 0; i3 < L3; ++i3)
      {
        Real acc = b[i3 * MW0 * MW1 * MA2];
#pragma unroll
        for (int j = 1; j < WIN2; ++j)
        {
          acc = acc + b[i3 * MW0 * MW1 * MA2 + j * MW0 * MW1];
        }
#pragma unroll
        for (int j = 0; j + 1 < WIN3; ++j)
        {
          ring[j] = ring[j + 1];
        }
        ring[WIN3 - 1] = acc;
        if (i3 >= EXT3)
        {
          Real raw = ring[0];
#pragma unroll
          for (int j = 1; j < WIN3; ++j)
          {
            raw = raw + ring[j];
          }
          w[(i3 - EXT3) * MW0 * MW1 * MW2] = Weight(raw, norm, invNorm, half);
        }
      }
    }
  }
  __syncthreads();
}

} // namespace

extern "C" __global__ void
__launch_bounds__(NT, NLM_MINBLOCKS)
  nlm_fast(const Real * __restrict__ Y, TOut * __restrict__ out, itk::nlm::FastKernelParameters p)
{
  extern __shared__ double sharedRaw[];
  Real *                   bufA = reinterpret_cast<Real *>(sharedRaw);
  Real *                   bufB = bufA + SIZE_A; // 4D only, SIZE_B cells
  WeightStore *            bufW = reinterpret_cast<WeightStore *>(bufB + SIZE_B);

  // This block's tile; a tile with no voxel to compute (mask) is left alone.
  const long long tile = p.tileOffset + blockIdx.x;
  if (!TileIsActive(p, tile))
  {
    return;
  }
  long long c[4];
  TileCoordinates(p, tile, c);
  const long long lo[4] = { c[0] * T0, c[1] * T1, c[2] * T2, c[3] * T3 };
  const int       tid = threadIdx.x;
  const int       lane = tid % 32;
  const int       warp = tid / 32;

  // Offsets into Y are taken relative to the cell of the tile's first voxel.
  const Index ys1 = static_cast<Index>(p.ySize[0]);
  const Index ys2 = ys1 * static_cast<Index>(p.ySize[1]);
  const Index ys3 = ys2 * static_cast<Index>(p.ySize[2]);
  long long   base = (lo[0] + E0) + (lo[1] + E1) * p.ySize[0];
  if (DIM > 2)
  {
    base += (lo[2] + E2) * p.ySize[0] * p.ySize[1];
  }
  if (DIM > 3)
  {
    base += (lo[3] + E3) * p.ySize[0] * p.ySize[1] * p.ySize[2];
  }
  const Real * Yt = Y + base * K;
  const Real * S2t = NLM_NOISE_MAP ? reinterpret_cast<const Real *>(p.noiseMap) + base : Yt; // sigma^2 (unused: Yt)
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

  const int r3 = (DIM > 3) ? PD3 : 0;
  const int r2 = (DIM > 2) ? PD2 : 0;
  for (int t3 = itk::nlm::FirstShift(3, r3); t3 <= r3; ++t3)
  {
    for (int t2 = itk::nlm::FirstShift(2, r2); t2 <= r2; ++t2)
    {
      for (int t1 = itk::nlm::FirstShift(1, PD1); t1 <= PD1; ++t1)
      {
#pragma unroll 1
        for (int t0 = itk::nlm::FirstShift(0, PD0); t0 <= PD0; ++t0)
        {
          const bool  half = (t0 == 0); // alpha = 0.5 on the t0 == 0 plane
          const Index tOff = t0 + t1 * ys1 + t2 * ys2 + t3 * ys3;
          // Weight box: the tile and the tile shifted by -t (one box spanning both; with SPLIT the
          // tile's own box and, BOX_W cells on, the shifted tile's, both indexed from their first
          // cell, so that x and x - t have the same index).
          const int   w0lo = SPLIT ? 0 : -t0;
          const int   w1lo = SPLIT ? 0 : -Imax(t1, 0);
          const int   w2lo = SPLIT ? 0 : -Imax(t2, 0);
          const int   w3lo = SPLIT ? 0 : -Imax(t3, 0);
          const int   wShift = SPLIT ? -BOX_W : t0 + t1 * MW0 + t2 * MW0 * MW1 + t3 * MW0 * MW1 * MW2;
          WeightStore w0 = 0;
          if (WIN0 == 0)
          {
            w0 = Weight(Real(0), norm, invNorm, half); // patch size 1: every raw distance is +0
          }
          else
          {
#pragma unroll 1
            for (int b = 0; b < BOXES; ++b)
            {
              const bool target = SPLIT && b == 1; // the box of the tile shifted by -t
              BoxWeights(Yt,
                         S2t,
                         tOff,
                         noise,
                         norm,
                         invNorm,
                         half,
                         ys1,
                         ys2,
                         ys3,
                         target ? -t0 : w0lo,
                         SPLIT ? T0 : T0 + t0,
                         target ? -t1 : w1lo,
                         SPLIT ? T1 : T1 + Iabs(t1),
                         target ? -t2 : w2lo,
                         SPLIT ? T2 : T2 + Iabs(t2),
                         target ? -t3 : w3lo,
                         SPLIT ? T3 : T3 + Iabs(t3),
                         tid,
                         warp,
                         lane,
                         bufA,
                         bufB,
                         bufW + b * BOX_W);
            }
          }

          // Gather: centre term w(x,t) Y(x+t) and target term w(x-t,t) Y(x-t), in the contract's
          // order (target first when t is lexicographically positive).
          if (itk::nlm::IsLexicographicallyPositive(t0, t1, t2, t3))
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

  StoreOutput(p, lo, tid, S2t, ys1, ys2, ys3, ws, rs, out);
}
