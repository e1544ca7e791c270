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

#include "itkNonLocalMeansKernelCommon.cuh"

// The column kernel (2D and 3D, patch size >= 3). A block first copies its footprint of the padded
// input (its tile's patch terms extended by the patch distance on every side) into shared memory,
// whose strides are compile-time constants, then runs without barriers. With NLM_COLUMN_GLOBAL the
// block reads its footprint where it is, in the padded input in global memory (through the L1
// cache), with the input's strides: no shared memory, so any patch distance fits and more blocks
// reside. A warp covers 32 cells along axis 0, of which the first 32 - EXT are output voxels. In 3D
// each thread owns NLM_ROWS rows along axis 1 and the T2 planes of the tile along axis 2; in 2D it
// owns NLM_ROWS rows along axis 1, which it marches through as the 3D thread marches through its
// planes (its "planes" are then rows, and the register rows of the 3D kernel are one). It keeps its
// voxels' accumulators in registers. For every shift t it marches through its planes (rows in 2D)
// and computes, for each of its voxels c, both raw(c, t) and raw(c, -t) = raw(c - t, t) (contract
// 2.3: the same squares in the same order), so the weights of the centre and of the target term
// need nothing from other threads but the terms of their neighbours along axis 0 (shuffles). Sums:
// along axis 0 across lanes, in 3D along axis 1 over the thread's rows, along the march's axis (2,
// or 1 in 2D) over its last cells, in the contract's order.
namespace
{
constexpr bool FLAT = DIM == 2;           // 2D: the march is along axis 1
constexpr int  R = FLAT ? 1 : NLM_ROWS;   // rows along axis 1 summed in registers (3D)
constexpr int  REXT = FLAT ? 0 : EXT;     // their extra rows of terms
constexpr int  RWIN = FLAT ? 1 : WIN;     // terms of a sum along those rows
constexpr int  RE = R + REXT;             // rows of terms per thread and cell of the march
constexpr int  TZ = FLAT ? NLM_ROWS : T2; // voxels of a thread along the march
constexpr int  PDZ = FLAT ? 0 : PD;       // the patch distance along axis 2
// 2D: a thread's rows in chunks (itk::nlm::ColumnRowChunks): the march's weights code is one
// unrolled chunk of TZC rows in a loop, the accumulators swapped between the two chunks, so that 16
// rows at large patches compile as fast as 8.
#ifndef NLM_ROW_CHUNKS
#  define NLM_ROW_CHUNKS itk::nlm::ColumnRowChunks(DIM, S, NLM_ROWS)
#endif
constexpr int CHUNKS = NLM_ROW_CHUNKS;
constexpr int TZC = TZ / CHUNKS; // voxels of a chunk along the march
// 2D from patch 7 in one chunk, one channel in float64: a branch that is never taken (the norm is
// never NaN: VerifyProblem) before each row's weights splits the unrolled march into a scheduling
// region per row, which halves ptxas's time for sm_80 (0.61 to 0.30 s for patch 7's 16 rows; sm_90
// needs 0.19 s either way). Without the weights' former rare branch, one region of 22 rows took
// sm_80 close to the compile bar (BENCHMARKS.md "The corrected quotient").
constexpr bool SPLIT_MARCH = FLAT && CHUNKS == 1 && S >= 7 && K == 1 && !NLM_REAL_IS_FLOAT;
// Footprint of a block in shared memory (cells), and its strides.
constexpr int FX = 32 + 2 * PD;
constexpr int FY = T1 + EXT + 2 * PD;
constexpr int FZ = FLAT ? 1 : T2 + EXT + 2 * PD;
constexpr int FXY = FX * FY;
#ifndef NLM_COLUMN_GLOBAL
#  define NLM_COLUMN_GLOBAL 0
#endif
constexpr bool GLOBAL = NLM_COLUMN_GLOBAL != 0; // the footprint read from global memory
static_assert((DIM == 2 || DIM == 3) && WIN >= 1, "the column kernel is for 2D and 3D with a patch size of 3 or more");
static_assert(!NLM_NOISE_MAP, "the column kernel takes no noise map (the planner picks the tiled kernel)");
static_assert(T0 == 32 - EXT && T1 * 32 == NLM_ROWS * NT && NT % 32 == 0,
              "one warp per NLM_ROWS rows of 32 - EXT voxels");
static_assert(!FLAT || T2 == 1, "2D: one plane");
static_assert((CHUNKS == 1 || CHUNKS == 2) && TZ % CHUNKS == 0 && (CHUNKS == 1 || (FLAT && O > 1)),
              "rows in one or two chunks: 2D, patch size 5 or more, whole chunks");

/** Whether the target term of a shift is added first, a compile-time tag: at patch 3 the march has
 * two copies, one for each order (faster there than one copy: BENCHMARKS.md); from patch 5 on it
 * has one, with the centre term first (MarchSign). */
template <bool First>
struct Order
{
  static constexpr bool
  TargetFirst()
  {
    return First;
  }
};
constexpr bool TWO_COPIES = S < 5;

/** Copies the block's footprint (FX x FY x FZ cells of K values from `footprint`, a cell of the
 * padded input of p.ySize) into shared memory F. */
__device__ __forceinline__ void
CopyFootprint(const Real * footprint, const itk::nlm::FastKernelParameters & p, Real * F)
{
  const Index ys1 = static_cast<Index>(p.ySize[0]);
  const Index ys2 = ys1 * static_cast<Index>(p.ySize[1]);
  for (int f = threadIdx.x; f < FXY * FZ; f += NT)
  {
    const int   x = f % FX;
    const int   y = (f / FX) % FY;
    const int   z = f / FXY;
    const Index at = (x + y * ys1 + z * ys2) * K;
#pragma unroll
    for (int k = 0; k < K; ++k)
    {
      F[f * K + k] = footprint[at + k];
    }
  }
}

/** Adds a voxel's two terms of a shift, the centre term (weight wc, value yc) and the target term
 * (wt, yt), to its sums: the target term first when `first` (a compile-time constant: Order). */
__device__ __forceinline__ void
AddPairOfTerms(bool first, Real wc, Real wt, const Real (&yc)[K], const Real (&yt)[K], Real & ws, Real (&rs)[K])
{
  const Real w1 = first ? wt : wc;
  const Real w2 = first ? wc : wt;
  ws = (ws + w1) + w2;
#pragma unroll
  for (int k = 0; k < K; ++k)
  {
    rs[k] = (rs[k] + w1 * (first ? yt[k] : yc[k])) + w2 * (first ? yc[k] : yt[k]);
  }
}

/** With one copy of the march (its centre term first), the shift it runs for the contract's shift t
 * (2.2, 2.5): t itself where its centre term comes first, and -t where its target term does (t
 * lexicographically positive). The march of -t computes the same two weights and values as that of
 * t with their roles swapped (its centre term, w(c, -t) = raw(c - t, t) and Y(c - t), is t's target
 * term, with the same squares summed in the same order; its target term is t's centre term; t0 == 0
 * for both or neither), so adding its centre term first adds t's target term first. */
__device__ __forceinline__ int
MarchSign(int t0, int t1, int t2)
{
  return itk::nlm::IsLexicographicallyPositive(t0, t1, t2, 0) ? -1 : 1;
}

/** 2D rows in two chunks: swaps the accumulators of a thread's two chunks of rows, so that the next
 * chunk's are first; after both chunks every row's accumulators are where they started. Nothing with
 * one chunk. */
__device__ __forceinline__ void
SwapChunks(Real (&ws)[R][TZ], Real (&rs)[R][TZ][K])
{
#pragma unroll
  for (int r = 0; r < R; ++r)
  {
#pragma unroll
    for (int q = 0; q + TZC < TZ; ++q)
    {
      const Real w = ws[r][q];
      ws[r][q] = ws[r][q + TZC];
      ws[r][q + TZC] = w;
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        const Real v = rs[r][q][k];
        rs[r][q][k] = rs[r][q + TZC][k];
        rs[r][q + TZC][k] = v;
      }
    }
  }
}

} // namespace

extern "C" __global__ void
__launch_bounds__(NT, NLM_MINBLOCKS)
  nlm_fast(const Real * __restrict__ Y, TOut * __restrict__ out, itk::nlm::FastKernelParameters p)
{
  extern __shared__ double sharedRaw[];
  Real *                   F = reinterpret_cast<Real *>(sharedRaw);
  const long long          tile = p.tileOffset + blockIdx.x;
  if (!TileIsActive(p, tile)) // no voxel to compute (mask)
  {
    return;
  }
  long long c[3];
  TileCoordinates(p, tile, c);
  const long long c0 = c[0], c1 = c[1], c2 = c[2];
  const int       lane = threadIdx.x % 32;
  const int       warp = threadIdx.x / 32;

  // The footprint starts at padded cell lo + 1 on every axis: the first patch term of the tile's
  // first voxel is at lo + E - O + 1 = lo + PD + 1, and shifts reach PD further on each side.
  const Real * footprint =
    Y + ((c0 * T0 + 1) + (c1 * T1 + 1) * p.ySize[0] + (FLAT ? 0 : (c2 * T2 + 1) * p.ySize[0] * p.ySize[1])) * K;
  // Strides of the footprint along axes 1 and 2: compile-time in shared memory, the padded input's
  // in global memory.
  const Index fx = GLOBAL ? static_cast<Index>(p.ySize[0]) : Index(FX);
  const Index fxy = GLOBAL ? fx * static_cast<Index>(p.ySize[1]) : Index(FXY);
  const Index fz = FLAT ? fx : fxy; // the stride of the march
  if (!GLOBAL)
  {
    CopyFootprint(footprint, p, F);
    __syncthreads();
  }

  // This thread's first patch term in the footprint, and its voxel's offset from it.
  const Index  first = FLAT ? (warp * TZ + PD) * fx : (warp * R + PD) * fx + PD * fxy;
  const Real * own = (GLOBAL ? footprint : F) + ((lane + PD) + first) * K;
  const Index  centre = (O - 1) * (1 + fx + (FLAT ? 0 : fxy)) * K;
  const Real   norm = static_cast<Real>(p.norm);
  const Real   invNorm = static_cast<Real>(p.invNorm);
  const Real   noise = static_cast<Real>(p.noise);
  const Real   bias = static_cast<Real>(p.bias); // Rician: 2 sigma^2

  Real ws[R][TZ];
  Real rs[R][TZ][K];
#pragma unroll
  for (int r = 0; r < R; ++r)
  {
#pragma unroll
    for (int q = 0; q < TZ; ++q)
    {
      ws[r][q] = 0;
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        rs[r][q][k] = 0;
      }
    }
  }

  // One shift; `order` tells whether the target term comes first (Order).
  auto shift = [&](auto order, int t0, int t1, int t2) {
    const bool   half = (t0 == 0);
    const Index  tOff = (t0 + t1 * fx + t2 * fxy) * K;
    const Real * plus = own + tOff;
    const Real * minus = own - tOff;
    // Sums along axes 0 and 1 of the last WIN planes, for +t and -t, per row.
    Real ringP[R][WIN];
    Real ringM[R][WIN];
#pragma unroll
    for (int r = 0; r < R; ++r)
    {
#pragma unroll
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
    // One cell of the march: plane (2D: row) pl, `chunk` cells further along the march for the
    // later chunks of rows (the accumulators of the chunk first); its weights from plane EXT on.
    auto march = [&](const int pl, const Index chunk) {
      Real aP[RE];
      Real aM[RE];
#pragma unroll
      for (int r = 0; r < RE; ++r)
      {
        const Index at = (r * fx + pl * fz) * K + chunk;
        Real        dP = 0;
        Real        dM = 0;
#pragma unroll
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
#pragma unroll
        for (int j = 1; j < WIN; ++j)
        {
          sP = sP + __shfl_down_sync(0xffffffffu, dP, j);
          sM = sM + __shfl_down_sync(0xffffffffu, dM, j);
        }
        aP[r] = sP;
        aM[r] = sM;
      }
      Real rawP[R];
      Real rawM[R];
#pragma unroll
      for (int r = 0; r < R; ++r)
      {
        Real bP = aP[r];
        Real bM = aM[r];
#pragma unroll
        for (int j = 1; j < RWIN; ++j)
        {
          bP = bP + aP[r + j];
          bM = bM + aM[r + j];
        }
#pragma unroll
        for (int j = 0; j + 1 < WIN; ++j)
        {
          ringP[r][j] = ringP[r][j + 1];
          ringM[r][j] = ringM[r][j + 1];
        }
        ringP[r][WIN - 1] = bP;
        ringM[r][WIN - 1] = bM;
        rawP[r] = ringP[r][0];
        rawM[r] = ringM[r][0];
#pragma unroll
        for (int j = 1; j < WIN; ++j)
        {
          rawP[r] = rawP[r] + ringP[r][j];
          rawM[r] = rawM[r] + ringM[r][j];
        }
      }
      if (pl >= EXT)
      {
        const int q = pl - EXT;
        if (SPLIT_MARCH && norm != norm)
        {
          __trap();
        }
        // The plane's weights.
        WeightStore wP[R];
        WeightStore wM[R];
#pragma unroll
        for (int r = 0; r < R; ++r)
        {
          wP[r] = CorrectedWeight(rawP[r], norm, invNorm, half);
          wM[r] = CorrectedWeight(rawM[r], norm, invNorm, half);
        }
#pragma unroll
        for (int r = 0; r < R; ++r)
        {
          const Index c = centre + (r * fx + q * fz) * K + chunk;
          Real        yc[K];
          Real        yt[K];
#pragma unroll
          for (int k = 0; k < K; ++k)
          {
            yc[k] = Value((O == 1) ? keepP[r][q][k] : plus[c + k]);
            yt[k] = Value((O == 1) ? keepM[r][q][k] : minus[c + k]);
          }
          AddPairOfTerms(order.TargetFirst(), Unpack(wP[r]), Unpack(wM[r]), yc, yt, ws[r][q], rs[r][q]);
        }
      }
    };
    // One chunk: the whole march unrolled (the machine code measured before chunks existed).
    if (CHUNKS == 1)
    {
#pragma unroll
      for (int pl = 0; pl < TZ + EXT; ++pl)
      {
        march(pl, 0);
      }
      return;
    }
    // Chunks: the warm-up, the EXT cells before the first weights, in a loop of its own that is not
    // unrolled (no weights, and the ring's moves are cheap; its run-time pl indexes keepP and keepM,
    // which only patch size 3, one chunk, reads), then chunks of TZC cells with weights in a loop:
    // the unrolled code is one chunk, so patches 9 and 11 compile as fast as 8 rows.
#pragma unroll 1
    for (int pl = 0; pl < EXT; ++pl)
    {
      march(pl, 0);
    }
#pragma unroll 1
    for (int h = 0; h < CHUNKS; ++h)
    {
#pragma unroll
      for (int pl = EXT; pl < EXT + TZC; ++pl)
      {
        march(pl, h * TZC * fz * K);
      }
      SwapChunks(ws, rs);
    }
  };
  for (int t2 = itk::nlm::FirstShift(2, PDZ); t2 <= PDZ; ++t2)
  {
    for (int t1 = itk::nlm::FirstShift(1, PD); t1 <= PD; ++t1)
    {
#pragma unroll 1
      for (int t0 = itk::nlm::FirstShift(0, PD); t0 <= PD; ++t0)
      {
        if constexpr (TWO_COPIES)
        {
          if (itk::nlm::IsLexicographicallyPositive(t0, t1, t2, 0))
          {
            shift(Order<true>(), t0, t1, t2);
          }
          else
          {
            shift(Order<false>(), t0, t1, t2);
          }
        }
        else
        {
          const int sign = MarchSign(t0, t1, t2);
          shift(Order<false>(), sign * t0, sign * t1, sign * t2);
        }
      }
    }
  }

  // Normalise and store the voxels inside the output region.
  const long long g0 = c0 * T0 + lane;
  const long long g1 = c1 * T1 + warp * (FLAT ? TZ : R);
  const long long g2 = c2 * T2;
  if (lane < T0 && g0 < p.outSize[0])
  {
#pragma unroll
    for (int r = 0; r < R; ++r)
    {
#pragma unroll
      for (int q = 0; q < TZ; ++q)
      {
        const long long y = FLAT ? g1 + q : g1 + r;
        const long long z = FLAT ? 0 : g2 + q;
        if (y < p.outSize[1] && z < p.outSize[2])
        {
          const long long o = g0 + p.outSize[0] * (y + p.outSize[1] * z);
#pragma unroll
          for (int k = 0; k < K; ++k)
          {
            out[o * K + k] = static_cast<TOut>(static_cast<TIn>(Output(rs[r][q][k], ws[r][q], bias)));
          }
        }
      }
    }
  }
}
