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

// The buffered-weights kernels (3D, patch size >= 3; for large patches). The other kernels compute,
// for every voxel c of a tile, both raw(c, t) and raw(c, -t) = raw(c - t, t) (contract 2.3): twice
// the patch sums of the weights a voxel receives. These compute every weight once, in two passes
// per batch of shifts:
//   nlm_fast   (the weights pass) writes w(c, t) for the batch's shifts t and every c of the
//              output region and of the region shifted by -t into a buffer (FastKernelParameters::
//              weights; 4 bytes per weight as in the tiled kernel);
//   nlm_gather adds, for every output voxel x and each shift of the batch in the contract's order,
//              the terms of w(x, t) and w(x - t, t) to the accumulators (FastKernelParameters::
//              accumulators, kept in device memory between the batches), and after the last batch
//              writes the output.
// The sums and the order of the terms are the contract's, so the output is the other kernels'
// bit for bit.
//
// The weights pass: a block of NW warps owns a tile of T0 = 32 - (s - 2) x NW voxels along axes 0
// and 1 and marches through ZC = T2 planes along axis 2, for two shifts at once (t0 = 2j and 2j + 1
// of one row of shifts: the same t1, t2, so that both read the same cells Y(y)). Per plane:
//   1. the warps compute the sums along axis 0 of the patch terms of the NW + s - 2 rows (a row, or
//      at patches 9 to 17 a pair of rows, per warp in turn; the terms of the neighbors by shuffles)
//      for both shifts into one of two buffers in shared memory; the cells of the next plane are
//      loaded meanwhile;
//   2. after one barrier, each thread sums two rows along axis 1 from shared memory (one shift's two
//      neighboring rows, or with an odd number of warps both shifts' row: STEP2_PAIRED) into a ring
//      of the last s - 1 planes, and once the march has passed its voxels' patch sums the ring along
//      axis 2 and stores the weights.
// Reads are clamped into the padded input (cells outside it only feed discarded lanes, rows and
// planes), so the padded input needs no margin beyond the other kernels'.
//
// Shift pairs (itk::nlm::ShiftPairsPerRow): the contract's shifts (2.2) in rows of one (t2, t1),
// each row's t0 = 0 .. d in pairs (2j, 2j + 1); pair g is in row g / ShiftPairsPerRow(d), and a
// pair whose 2j + 1 > d has one shift. A batch is FastKernelParameters::pairs consecutive pairs
// from firstPair; its weights take 2 * pairs slots of weightSize cells each (slot 2 i + v: shift v
// of the batch's pair i).
namespace
{
constexpr int NW = NT / 32;     // warps: one per row of the tile
constexpr int ZC = T2;          // planes of weights per block
constexpr int ROWS = T1 + EXT1; // rows of sums along axis 0 per plane
// Step 1's units, a unit per warp in turn: rows, or with PAIRED_ROWS (itk::nlm::
// BufferedWeightsPairsRows) pairs of rows 2 u and 2 u + 1 (u < PAIRS) and, for an odd ROWS, the
// last row alone. Lane l of a pair holds the terms of cell l of both rows and swaps one with lane
// l ^ 1, so that even lanes hold cells l and l + 1 of the first row and odd lanes cells l - 1 and l
// of the second: the sums along axis 0 of the two cells then take WIN0 - 1 shuffles and the swap,
// where two rows alone take 2 (WIN0 - 1).
constexpr bool PAIRED_ROWS = itk::nlm::BufferedWeightsPairsRows(NLM_S0);
constexpr int  PAIRS = PAIRED_ROWS ? ROWS / 2 : 0;
constexpr int  UNITS = ROWS - PAIRS;
constexpr int  UNITS_PER_WARP = (UNITS + NW - 1) / NW;
constexpr int  UNIT_ROWS = PAIRS > 0 ? 2 : 1; // rows a unit may hold
constexpr int  SP = 2;                        // shifts per block
constexpr int  ROW = itk::nlm::BufferedSumsRowStride(PAIRED_ROWS, sizeof(Real) == sizeof(float)); // cells per row
constexpr int  BUFFER = SP * ROWS * ROW;                    // one buffer: both shifts
constexpr int  GATHER_X = itk::nlm::BufferedGatherBlock[0]; // gather block: 32 x 8 threads,
constexpr int  GATHER_Y = itk::nlm::BufferedGatherBlock[1]; // GATHER_V voxels each along axis 0,
constexpr int  GATHER_V = itk::nlm::BufferedGatherBlock[2]; // GATHER_X cells apart
constexpr int  GATHER_ROWS = 8;                             // rows of gather blocks per group (GatherBlock)
// The gather's registers: budgeted for 4 blocks per SM with one channel (64 registers, no spill at
// sm_90; 3 blocks, at 72 registers, were 2 % to 3 % slower: BENCHMARKS.md), for 2 with more (123 to
// 128 registers at 2 to 4 channels).
constexpr int GATHER_MINBLOCKS = K == 1 ? 4 : 2;
// Step 2's units of a thread: with an even number of warps, one shift (warp % 2) for two rows
// (2 (warp / 2) and the next), whose sums along axis 1 read WIN1 + 1 rows of the buffer instead of
// 2 WIN1 (shared memory's bandwidth is what the weights pass spends most: BENCHMARKS.md); with an
// odd number, both shifts for one row (warp).
constexpr bool STEP2_PAIRED = NW % 2 == 0;
constexpr int  STEP2_UNITS = 2; // of a thread
static_assert(DIM == 3 && WIN0 >= 2 && WIN1 >= 2 && WIN2 >= 2,
              "the buffered-weights kernel is for 3D, patch size >= 3");
static_assert(!NLM_NOISE_MAP, "the buffered-weights kernel takes no noise map (the planner picks the tiled kernel)");
static_assert(T0 == 32 - EXT0 && T0 >= 1 && NW == T1 && NT % 32 == 0, "one warp per row of 32 - (s0 - 2) voxels");
static_assert(PD0 == PD && PD1 == PD && PD2 == PD && O0 == O && O1 == O && O2 == O,
              "the same patch and distance on every axis");
static_assert(!PAIRED_ROWS || WIN0 % 2 == 0, "rows in pairs sum pairs of terms: an odd (effective) patch size");

/** The shifts of pair g: t0 of its first shift (the second is t0 + 1 where that is <= PD), t1, t2. */
__device__ __forceinline__ void
PairShifts(long long g, int & t0, int & t1, int & t2)
{
  const int row = static_cast<int>(g / itk::nlm::ShiftPairsPerRow(PD));
  t0 = 2 * static_cast<int>(g % itk::nlm::ShiftPairsPerRow(PD));
  t1 = row % (2 * PD + 1) - PD;
  t2 = row / (2 * PD + 1) - PD;
}

__device__ __forceinline__ long long
Clamp(long long v, long long lo, long long hi)
{
  return v < lo ? lo : (v > hi ? hi : v);
}

/** Whether a warp has a unit i of the plane's sums along axis 0 (unit warp + i * NW < UNITS), and
 * whether it is a pair of rows. The same for every lane of a warp, so a warp skips a unit it does
 * not have, shuffles included, and takes a pair or a row as a whole (compile-time answers where
 * they are the same for every warp). */
__device__ __forceinline__ bool
HasUnit(int warp, int i)
{
  return (i + 1) * NW <= UNITS || warp + i * NW < UNITS;
}
__device__ __forceinline__ bool
IsPair(int warp, int i)
{
  return (i + 1) * NW <= PAIRS || (i * NW < PAIRS && warp + i * NW < PAIRS);
}
/** Whether a warp's unit i has a row h: a unit it has, and its second row only where it is a pair. */
__device__ __forceinline__ bool
HasRow(int warp, int i, int h)
{
  return HasUnit(warp, i) && (h == 0 || IsPair(warp, i));
}
/** The first row of a warp's unit i. */
__device__ __forceinline__ int
UnitRow(int warp, int i)
{
  const int u = warp + i * NW;
  return u < PAIRS ? 2 * u : u + PAIRS;
}

/** The vector type of two values of T. */
template <typename T>
struct Vector2;
template <>
struct Vector2<float>
{
  using Type = float2;
};
template <>
struct Vector2<double>
{
  using Type = double2;
};

/** Stores a lane's two neighboring sums along axis 0 (an aligned pair of cells) at once. */
__device__ __forceinline__ void
StorePair(Real * to, Real a, Real b)
{
  *reinterpret_cast<typename Vector2<Real>::Type *>(to) = { a, b };
}

/** Whether the clamped padded plane of the march moves on to `z`, the next plane before clamping:
 * clamp(z, lo, hi) is clamp(z - 1, lo, hi) + 1 inside (lo, hi], and the same plane elsewhere. */
__device__ __forceinline__ bool
NextPlaneStep(int z, int lo, int hi)
{
  return z > lo && z <= hi;
}

/** Step 2's unit u (of STEP2_UNITS) of this warp: the row of the tile (along axis 1) and the
 * shift of the pair whose sums and weights it takes (STEP2_PAIRED). */
__device__ __forceinline__ int
Step2Row(int warp, int u)
{
  return STEP2_PAIRED ? 2 * (warp / 2) + u : warp;
}
__device__ __forceinline__ int
Step2Shift(int warp, int u)
{
  return STEP2_PAIRED ? warp % 2 : u;
}
} // namespace

/** The weights pass's block: its pair of the batch, its tile along axes 0 and 1 and its block of
 * planes along axis 2, for the launch's block of the grid (tiles, blocks along axis 2, pairs). The
 * pairs run fastest, so that the blocks of a tile's pairs, which read the same cells Y(y) and nearly
 * the same Y(y + t), run at the same time (L2 hits). */
__device__ __forceinline__ void
WeightsBlock(int & pair, long long & tile, long long & zBlock)
{
  const unsigned long long launch =
    blockIdx.x +
    static_cast<unsigned long long>(gridDim.x) * (blockIdx.y + static_cast<unsigned long long>(gridDim.y) * blockIdx.z);
  const unsigned long long rest = launch / gridDim.z;
  pair = static_cast<int>(launch % gridDim.z);
  tile = rest % gridDim.x;
  zBlock = rest / gridDim.x;
}

/** Moves the rows' pointers `step` cells on (a plane along axis 2). */
__device__ __forceinline__ void
StepRows(const Real * (&row)[UNITS_PER_WARP][UNIT_ROWS], long long step)
{
#pragma unroll
  for (int i = 0; i < UNITS_PER_WARP; ++i)
  {
#pragma unroll
    for (int h = 0; h < UNIT_ROWS; ++h)
    {
      row[i][h] += step;
    }
  }
}

/** The cells of a plane's units of this warp, from the units' row pointers: Y(y) and Y(y + t) of
 * both shifts (`tOff`: t in cells), per row of the unit. */
__device__ __forceinline__ void
LoadUnitCells(const Real * const (&row)[UNITS_PER_WARP][UNIT_ROWS],
              const long long (&tOff)[SP],
              int warp,
              Real (&cells)[UNITS_PER_WARP][UNIT_ROWS][K],
              Real (&shifted)[UNITS_PER_WARP][UNIT_ROWS][SP][K])
{
#pragma unroll
  for (int i = 0; i < UNITS_PER_WARP; ++i)
  {
#pragma unroll
    for (int h = 0; h < UNIT_ROWS; ++h)
    {
      if (!HasRow(warp, i, h))
      {
        continue;
      }
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        cells[i][h][k] = row[i][h][k];
#pragma unroll
        for (int v = 0; v < SP; ++v)
        {
          shifted[i][h][v][k] = row[i][h][tOff[v] + k];
        }
      }
    }
  }
}

/** Step 1's patch terms of this lane's cells of a plane for both shifts (contract 2.3: D), from
 * the cells Y(y) and Y(y + t) of this warp's units. */
__device__ __forceinline__ void
PatchTerms(const Real (&cells)[UNITS_PER_WARP][UNIT_ROWS][K],
           const Real (&shifted)[UNITS_PER_WARP][UNIT_ROWS][SP][K],
           Real noise,
           int  warp,
           Real (&d)[UNITS_PER_WARP][UNIT_ROWS][SP])
{
#pragma unroll
  for (int i = 0; i < UNITS_PER_WARP; ++i)
  {
#pragma unroll
    for (int h = 0; h < UNIT_ROWS; ++h)
    {
      if (!HasRow(warp, i, h))
      {
        continue;
      }
#pragma unroll
      for (int v = 0; v < SP; ++v)
      {
        Real acc = 0;
#pragma unroll
        for (int k = 0; k < K; ++k)
        {
          const Real diff = cells[i][h][k] - shifted[i][h][v][k];
          acc = (k == 0) ? diff * diff : acc + diff * diff;
        }
        d[i][h][v] = acc - noise;
      }
    }
  }
}

/** Step 1 for a row: the sums along axis 0 of its terms `d` for both shifts (contract 2.3: the sum
 * over j0 ascending; the terms of the next lanes by shuffles) into row `r` of `buffer`. */
__device__ __forceinline__ void
SumRowAlongAxis0(const Real (&d)[SP], Real * buffer, int r, int lane)
{
#pragma unroll
  for (int v = 0; v < SP; ++v)
  {
    Real a = d[v];
#pragma unroll
    for (int j = 1; j < WIN0; ++j)
    {
      a = a + __shfl_down_sync(0xffffffffu, d[v], j);
    }
    buffer[v * ROWS * ROW + r * ROW + lane] = a;
  }
}

/** Step 1 for a warp's unit i, a pair of rows, whose terms of this lane's cell are `first` and
 * `second`: the swap, then the sums along axis 0 of this lane's two cells into their row of
 * `buffer` (the first row of the pair for even lanes, the second for odd ones: `odd`). */
__device__ __forceinline__ void
SumPairAlongAxis0(const Real (&first)[SP], const Real (&second)[SP], Real * buffer, int warp, int i, int odd, int lane)
{
  const int r = UnitRow(warp, i) + odd; // the row of this lane's two cells
#pragma unroll
  for (int v = 0; v < SP; ++v)
  {
    // The swap: the terms of this lane's cells (lane & ~1) and (lane | 1) of row r.
    const Real received = __shfl_xor_sync(0xffffffffu, odd ? first[v] : second[v], 1);
    const Real lo = odd ? received : first[v];
    const Real hi = odd ? second[v] : received;
    // Cell lane & ~1 sums lo, hi and the pairs of the next lanes of its parity; cell lane | 1
    // hi, those pairs and the first term of one pair more (WIN0 is even).
    Real a = lo + hi, b = hi;
#pragma unroll
    for (int j = 1; j < WIN0 / 2; ++j)
    {
      const Real nextLo = __shfl_down_sync(0xffffffffu, lo, 2 * j);
      const Real nextHi = __shfl_down_sync(0xffffffffu, hi, 2 * j);
      a = a + nextLo;
      a = a + nextHi;
      b = b + nextLo;
      b = b + nextHi;
    }
    b = b + __shfl_down_sync(0xffffffffu, lo, WIN0);
    StorePair(buffer + v * ROWS * ROW + r * ROW + (lane & ~1), a, b);
  }
}

/** Step 2: the sum along axis 1 of the sums along axis 0 from `a` (of a column of the buffer)
 * on, the newest plane of the ring of the last WIN2 planes' sums (slot WIN2 - 1). */
__device__ __forceinline__ void
PushSumAlongAxis1(const Real * a, Real (&ring)[WIN2])
{
  Real b = a[0];
#pragma unroll
  for (int j = 1; j < WIN1; ++j)
  {
    b = b + a[j * ROW];
  }
#pragma unroll
  for (int j = 0; j + 1 < WIN2; ++j)
  {
    ring[j] = ring[j + 1];
  }
  ring[WIN2 - 1] = b;
}

/** Step 2: the sum along axis 2 of the ring, the oldest plane first: the patch sum of a voxel. */
__device__ __forceinline__ Real
SumAlongAxis2(const Real (&ring)[WIN2])
{
  Real raw = ring[0];
#pragma unroll
  for (int j = 1; j < WIN2; ++j)
  {
    raw = raw + ring[j];
  }
  return raw;
}

/** The weights pass: grid (weightTiles[0] * weightTiles[1], weightTiles[2], pairs). */
extern "C" __global__ void
__launch_bounds__(NT, NLM_MINBLOCKS)
  nlm_fast(const Real * __restrict__ Y, TOut * __restrict__ out, itk::nlm::FastKernelParameters p)
{
  (void)out;
  extern __shared__ double sharedRaw[];
  Real *                   sums = reinterpret_cast<Real *>(sharedRaw); // two buffers of BUFFER
  int                      pair;
  long long                tile, zBlock;
  WeightsBlock(pair, tile, zBlock);
  int t0, t1, t2;
  PairShifts(p.firstPair + pair, t0, t1, t2);
  const bool second = t0 + 1 <= PD; // whether the pair has a second shift
  const int  t0b = second ? t0 + 1 : t0;
  // The union of the regions of the pair's shifts, [lo, lo + e) per axis: the output region and
  // the output region shifted by -t.
  const long long n0 = p.outSize[0], n1 = p.outSize[1], n2 = p.outSize[2];
  const long long lo0 = -t0b, lo1 = -max(t1, 0), lo2 = -max(t2, 0);
  const long long e0 = n0 + t0b, e1 = n1 + Iabs(t1), e2 = n2 + Iabs(t2);
  const long long tx = tile % p.weightTiles[0], ty = tile / p.weightTiles[0];
  if (tx * T0 >= e0 || ty * T1 >= e1 || zBlock * ZC >= e2)
  {
    return;
  }
  const long long cb0 = lo0 + tx * T0, cb1 = lo1 + ty * T1, cb2 = lo2 + zBlock * ZC;
  const int       lane = threadIdx.x % 32;
  const int       warp = threadIdx.x / 32;
  const long long fx = p.ySize[0], fxy = p.ySize[0] * p.ySize[1];
  const long long tOff[SP] = { (t0 + t1 * fx + t2 * fxy) * K, (t0b + t1 * fx + t2 * fxy) * K };

  // This warp's units (rows or pairs of rows of the plane's sums along axis 0): warp, warp + NW,
  // ... (HasUnit, IsPair). A row's cells: padded coordinates (cell y of the output grid is padded
  // cell y + E) clamped so that both y and y + t are inside the padded input. The pointers step
  // along axis 2 with the march (NextPlaneStep), so that they stay clamped too.
  const long long x = Clamp(cb0 + lane - O + 1 + E, 0, p.ySize[0] - 1 - t0b);
  // Along axis 2 in int (a slab's planes fit: PlanSlabs).
  const int zLo = max(0, -t2), zHi = static_cast<int>(p.ySize[2]) - 1 - max(0, t2);
  const int zFirst = static_cast<int>(cb2) - O + 1 + E; // the padded plane of march plane 0, before clamping
  const int odd = lane & 1;
  auto      rowStart = [&](int r) {
    return Y + (x + Clamp(cb1 + min(r, ROWS - 1) - O + 1 + E, max(0, -t1), p.ySize[1] - 1 - max(0, t1)) * fx +
                Clamp(zFirst, zLo, zHi) * fxy) *
                 K;
  };
  const Real * row[UNITS_PER_WARP][UNIT_ROWS];
#pragma unroll
  for (int i = 0; i < UNITS_PER_WARP; ++i)
  {
#pragma unroll
    for (int h = 0; h < UNIT_ROWS; ++h)
    {
      row[i][h] = rowStart(UnitRow(warp, i) + h);
    }
  }
  const int planes = static_cast<int>(min(static_cast<long long>(ZC), e2 - zBlock * ZC)) + EXT2;

  // Where the weights of this thread's units of step 2 go (the pointers step one plane of weights
  // per stored plane), and whether they are inside their shift's region.
  const long long c0 = cb0 + lane;
  const long long w0 = p.weightSize[0], w01 = p.weightSize[0] * p.weightSize[1];
  const long long slot = w01 * p.weightSize[2];
  // Unit 1's weight is unit 0's next row (paired rows) or next slot (its shift's).
  WeightStore * weights = reinterpret_cast<WeightStore *>(p.weights) + (2 * pair + Step2Shift(warp, 0)) * slot +
                          (c0 + PD) + (cb1 + Step2Row(warp, 0) + PD) * w0 + (cb2 + PD) * w01;
  const long long unit1 = STEP2_PAIRED ? w0 : slot;
  bool            store[STEP2_UNITS];
#pragma unroll
  for (int u = 0; u < STEP2_UNITS; ++u)
  {
    const int       v = Step2Shift(warp, u);
    const long long c1 = cb1 + Step2Row(warp, u);
    const bool      inRows = lane < T0 && c1 >= lo1 && c1 < lo1 + e1;
    store[u] = inRows && ((v == 0) ? c0 >= -t0 : (second && c0 >= -t0b)) && c0 < n0;
  }
  const int  planeLo = -max(t2, 0) - static_cast<int>(cb2) + EXT2; // the march planes whose weights
  const int  planeHi = static_cast<int>(n2) + max(-t2, 0) - static_cast<int>(cb2) + EXT2; // are stored
  const Real norm = static_cast<Real>(p.norm);
  const Real invNorm = static_cast<Real>(p.invNorm);
  const Real noise = static_cast<Real>(p.noise);

  // The cells of a plane's units: Y(y) and Y(y + t) of both shifts, per row of the unit.
  Real cells[UNITS_PER_WARP][UNIT_ROWS][K], shifted[UNITS_PER_WARP][UNIT_ROWS][SP][K];
  // The ring of the last WIN2 planes' sums along axis 1 of step 2's units, the newest in slot WIN2 - 1.
  // (A march unrolled by WIN2 planes, whose ring is renamed rather than moved, compiles 0.3 to 0.6 s
  // longer and is at most 2% faster in float64, 8% to 15% slower in single precision: BENCHMARKS.md.)
  Real ring[STEP2_UNITS][WIN2];
  LoadUnitCells(row, tOff, warp, cells, shifted);
#pragma unroll 1
  for (int pl = 0; pl < planes; ++pl)
  {
    // Step 1: the patch terms of the plane's rows for both shifts (contract 2.3: D), the next
    // plane's cells (their loads in flight while the terms are summed), then the sums along axis 0
    // (the sum over j0 ascending) of each unit of this warp.
    Real d[UNITS_PER_WARP][UNIT_ROWS][SP];
    PatchTerms(cells, shifted, noise, warp, d);
    if (NextPlaneStep(zFirst + pl + 1, zLo, zHi))
    {
      StepRows(row, fxy * K);
    }
    LoadUnitCells(row, tOff, warp, cells, shifted);
    Real * buffer = sums + (pl % 2) * BUFFER;
#pragma unroll
    for (int i = 0; i < UNITS_PER_WARP; ++i)
    {
      if (!HasUnit(warp, i))
      {
        continue;
      }
      if (IsPair(warp, i))
      {
        SumPairAlongAxis0(d[i][0], d[i][UNIT_ROWS - 1], buffer, warp, i, odd, lane);
      }
      else
      {
        SumRowAlongAxis0(d[i][0], buffer, UnitRow(warp, i), lane);
      }
    }
    __syncthreads();
    // Step 2: the sums along axis 1 of this thread's units into the ring (with paired rows the
    // second unit's rows are the first's but one: the same loads); once the patch of the voxels of
    // plane pl - EXT2 is complete, the sums along axis 2 and the weights.
#pragma unroll
    for (int u = 0; u < STEP2_UNITS; ++u)
    {
      PushSumAlongAxis1(buffer + Step2Shift(warp, u) * ROWS * ROW + Step2Row(warp, u) * ROW + lane, ring[u]);
    }
    if (pl >= EXT2)
    {
      const bool inPlane = pl >= planeLo && pl < planeHi;
#pragma unroll
      for (int u = 0; u < STEP2_UNITS; ++u)
      {
        const WeightStore w =
          CorrectedWeight(SumAlongAxis2(ring[u]), norm, invNorm, (Step2Shift(warp, u) == 0) ? (t0 == 0) : false);
        if (store[u] && inPlane)
        {
          weights[(u == 0) ? 0 : unit1] = w;
        }
      }
      weights += w01;
    }
  }
}

/** The gather's block of voxels (bx, by, bz), in blocks of BufferedGatherVoxels0 x GATHER_Y voxels
 * of one plane, for the launch's block: the blocks run in groups of GATHER_ROWS rows of blocks along
 * axis 1, each group plane by plane along axis 2 (axis 0 fastest), so that the blocks running at a
 * time cover a compact part of the region and the weights w(x - t, t) that a block reads are mostly
 * those that its neighbors along axes 1 and 2 have just read (L2 hits). The order of the blocks does
 * not change any sum: every voxel is one thread's. */
__device__ __forceinline__ void
GatherBlock(long long & bx, long long & by, long long & bz)
{
  // In 32 bits: gy and gz are at most 65535 (CUDA's limit on grid axes y and z, PlanSlabs).
  const unsigned gy = gridDim.y, gz = gridDim.z;
  const unsigned r = blockIdx.y + gy * blockIdx.z;          // the launch's row of blocks, in [0, gy * gz)
  const unsigned y0 = r / (GATHER_ROWS * gz) * GATHER_ROWS; // its group's first row along axis 1
  const unsigned rows = min(static_cast<unsigned>(GATHER_ROWS), gy - y0);
  const unsigned within = r - y0 * gz;
  bx = blockIdx.x;
  by = y0 + within % rows;
  bz = within / rows;
}

/** The gather's sums of this thread's voxels so far: W and R_k (contract 2.5) from the
 * accumulators `acc` (voxel q GATHER_X cells further; R_k `voxels` further per k), or zeros for the
 * first batch and for voxels outside the region. */
__device__ __forceinline__ void
LoadAccumulators(const Real * acc,
                 long long    voxels,
                 bool         firstBatch,
                 const bool (&in)[GATHER_V],
                 Real (&ws)[GATHER_V],
                 Real (&rs)[GATHER_V][K])
{
#pragma unroll
  for (int q = 0; q < GATHER_V; ++q)
  {
    const bool start = firstBatch || !in[q];
    ws[q] = start ? 0 : acc[q * GATHER_X];
#pragma unroll
    for (int k = 0; k < K; ++k)
    {
      rs[q][k] = start ? 0 : acc[(1 + k) * voxels + q * GATHER_X];
    }
  }
}

/** The terms of one shift of a pair for this thread's voxels: the weights and values of the first
 * and second terms from `firstW`, `secondW`, `firstY` and `secondY` (at this thread's voxel 0).
 * Voxels outside the region load nothing and get zeros. */
__device__ __forceinline__ void
LoadTerms(const WeightStore * firstW,
          const WeightStore * secondW,
          const Real *        firstY,
          const Real *        secondY,
          const bool (&in)[GATHER_V],
          Real (&w1)[GATHER_V],
          Real (&w2)[GATHER_V],
          Real (&y1)[GATHER_V][K],
          Real (&y2)[GATHER_V][K])
{
#pragma unroll
  for (int q = 0; q < GATHER_V; ++q)
  {
    w1[q] = in[q] ? Unpack(firstW[q * GATHER_X]) : Real(0);
    w2[q] = in[q] ? Unpack(secondW[q * GATHER_X]) : Real(0);
#pragma unroll
    for (int k = 0; k < K; ++k)
    {
      y1[q][k] = in[q] ? Value(firstY[q * GATHER_X * K + k]) : Real(0);
      y2[q][k] = in[q] ? Value(secondY[q * GATHER_X * K + k]) : Real(0);
    }
  }
}

/** Adds one shift's two terms to the sums of this thread's voxels, in the contract's order. */
__device__ __forceinline__ void
AddShiftTerms(const Real (&w1)[GATHER_V],
              const Real (&w2)[GATHER_V],
              const Real (&y1)[GATHER_V][K],
              const Real (&y2)[GATHER_V][K],
              Real (&ws)[GATHER_V],
              Real (&rs)[GATHER_V][K])
{
#pragma unroll
  for (int q = 0; q < GATHER_V; ++q)
  {
    ws[q] = (ws[q] + w1[q]) + w2[q];
#pragma unroll
    for (int k = 0; k < K; ++k)
    {
      rs[q][k] = (rs[q][k] + w1[q] * y1[q][k]) + w2[q] * y2[q][k];
    }
  }
}

/** After a batch: the sums of this thread's voxels inside the region back to the accumulators, or
 * after the last batch the output of the voxels (`voxel`: voxel 0's index). */
__device__ __forceinline__ void
StoreAccumulatorsOrOutput(const itk::nlm::FastKernelParameters & p,
                          TOut *                                 out,
                          Real *                                 acc,
                          long long                              voxel,
                          long long                              voxels,
                          const bool (&in)[GATHER_V],
                          const Real (&ws)[GATHER_V],
                          const Real (&rs)[GATHER_V][K])
{
#pragma unroll
  for (int q = 0; q < GATHER_V; ++q)
  {
    if (!in[q])
    {
      continue;
    }
    if (p.lastBatch)
    {
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        out[(voxel + q * GATHER_X) * K + k] = static_cast<TOut>(static_cast<TIn>(Output(rs[q][k], ws[q], p.bias)));
      }
    }
    else
    {
      acc[q * GATHER_X] = ws[q];
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        acc[(1 + k) * voxels + q * GATHER_X] = rs[q][k];
      }
    }
  }
}

/** The gather: grid (ceil(n0 / BufferedGatherVoxels0), ceil(n1 / GATHER_Y), n2) of GATHER_X x
 * GATHER_Y threads (GatherBlock). A thread's voxels are GATHER_X cells apart along axis 0, so each of
 * its loads for voxel q is the load for voxel 0 at an offset known at compile time. */
extern "C" __global__ void
__launch_bounds__(GATHER_X * GATHER_Y, GATHER_MINBLOCKS)
  nlm_gather(const Real * __restrict__ Y, TOut * __restrict__ out, itk::nlm::FastKernelParameters p)
{
  long long bx, by, bz;
  GatherBlock(bx, by, bz);
  const long long n0 = p.outSize[0], n1 = p.outSize[1], n2 = p.outSize[2];
  const long long x0 = bx * itk::nlm::BufferedGatherVoxels0 + threadIdx.x; // voxel 0; voxel q is GATHER_X * q further
  const long long x1 = by * GATHER_Y + threadIdx.y;
  const long long x2 = bz;
  if (x0 >= n0 || x1 >= n1)
  {
    return;
  }
  bool in[GATHER_V]; // whether voxel q is inside the region (voxel 0 is)
#pragma unroll
  for (int q = 0; q < GATHER_V; ++q)
  {
    in[q] = x0 + q * GATHER_X < n0;
  }
  const long long     fx = p.ySize[0], fxy = p.ySize[0] * p.ySize[1];
  const long long     w0 = p.weightSize[0], w01 = p.weightSize[0] * p.weightSize[1];
  const long long     slot = w01 * p.weightSize[2];
  const long long     voxels = n0 * n1 * n2;
  Real *              acc = reinterpret_cast<Real *>(p.accumulators) + x0 + n0 * (x1 + n1 * x2); // W, then R_k
  const WeightStore * weight =
    reinterpret_cast<const WeightStore *>(p.weights) + (x0 + PD) + (x1 + PD) * w0 + (x2 + PD) * w01;
  const Real * cell = Y + ((x0 + E) + (x1 + E) * fx + (x2 + E) * fxy) * K;
  Real         ws[GATHER_V], rs[GATHER_V][K];
  LoadAccumulators(acc, voxels, p.firstBatch, in, ws, rs);
  // A pair at a time: the loads of both shifts are issued before their terms are added (the gather
  // waits on device memory). A pair with one shift loads its first shift twice and adds it once.
  // Voxels outside the region load nothing and add zeros (they are not stored).
#pragma unroll 1
  for (long long j = 0; j < p.pairs; ++j)
  {
    int t0, t1, t2;
    PairShifts(p.firstPair + j, t0, t1, t2);
    const bool second = t0 + 1 <= PD;
    Real       w1[SP][GATHER_V], w2[SP][GATHER_V], y1[SP][GATHER_V][K], y2[SP][GATHER_V][K];
#pragma unroll
    for (int v = 0; v < SP; ++v)
    {
      const int s0 = t0 + ((v == 1 && second) ? 1 : 0);
      // Contract 2.5: the target term first when t is lexicographically positive. The first term's
      // weight and value: w(x - t, t) and Y(x - t), or w(x, t) and Y(x + t); the second the other.
      const bool          targetFirst = itk::nlm::IsLexicographicallyPositive(s0, t1, t2, 0);
      const long long     tY = (s0 + t1 * fx + t2 * fxy) * K;
      const long long     tW = s0 + t1 * w0 + t2 * w01;
      const WeightStore * w = weight + (2 * j + s0 - t0) * slot;
      const WeightStore * firstW = targetFirst ? w - tW : w;
      const WeightStore * secondW = targetFirst ? w : w - tW;
      const Real *        firstY = cell + (targetFirst ? -tY : tY);
      const Real *        secondY = cell + (targetFirst ? tY : -tY);
      LoadTerms(firstW, secondW, firstY, secondY, in, w1[v], w2[v], y1[v], y2[v]);
    }
#pragma unroll
    for (int v = 0; v < SP; ++v)
    {
      if (v == 1 && !second)
      {
        break;
      }
      AddShiftTerms(w1[v], w2[v], y1[v], y2[v], ws, rs);
    }
  }
  StoreAccumulatorsOrOutput(p, out, acc, x0 + n0 * (x1 + n1 * x2), voxels, in, ws, rs);
}
