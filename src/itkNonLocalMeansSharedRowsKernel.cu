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

// The shared-rows kernel (3D, patch size >= 3; for large patches). Like the column kernel it reads
// its footprint from the padded input in global memory and computes, for every shift t and every
// voxel c of its tile, both raw(c, t) and raw(c, -t) = raw(c - t, t) (contract 2.3), so that each
// thread adds both terms of its own voxels; unlike the column kernel, the sums along axis 0 of a
// plane's rows are computed once per block and shared through shared memory, so a thread does not
// recompute the patch's extra rows.
//
// Lane l of warp w owns the voxels (l, w, q) of the tile for its planes q along axis 2 (the first
// 32 - (s0 - 2) lanes are output voxels), and their accumulators in registers. For each shift, the
// block marches through the T2 + s2 - 2 planes the tile's patches cover; per plane:
//   1. the warps compute the sums along axis 0 of the patch terms D(+t) and D(-t) of the
//      T1 + s1 - 2 rows (a row per warp and sign in turn; the terms of the neighbors by shuffles)
//      into one of two buffers in shared memory;
//   2. after one barrier, each thread sums its rows along axis 1 from shared memory, keeps the
//      last s2 - 1 of those sums in registers, and once the march has passed its voxel's patch
//      sums them along axis 2, turns the two sums into the two weights and accumulates.
// Two buffers alternate between the planes, so one barrier per plane suffices. Every sum is in the
// contract's order. The march is a loop (the accumulators of the tile's planes rotate through
// registers; unrolled up to patch 7, see MARCH_UNROLL), every loop over patch offsets is a single
// loop of s - 1 terms, and a warp's units of step 1 are one loop of (2 (T1 + s1 - 2) + warps - 1) /
// warps units (2 to 5 for the planner's shapes), so the code grows with the patch only through
// those loops and, up to patch 7, the march's planes. (A forced shape with few warps unrolls many
// units: one warp at patch 21 unrolls 40.)
namespace
{
constexpr int TZ = T2;
constexpr int NW = NT / 32;       // warps: one per row of output voxels
constexpr int ROWS = T1 + EXT1;   // rows of sums along axis 0 per plane
constexpr int PLANES = TZ + EXT2; // planes of the march
constexpr int UNITS = 2 * ROWS;   // (row, sign) pairs per plane
constexpr int UNITS_PER_WARP = (UNITS + NW - 1) / NW;
constexpr int BUFFER = 2 * ROWS * 32; // one buffer: both signs
// Up to patch 7 (and 8 planes) the march through the tile's planes is unrolled, so that the rings
// and the accumulators do not rotate through registers (moves) but are renamed: 1.13x faster at
// patch 7 / distance 11 on an H200 (1.20x in single precision). From patch 9 on it is no faster
// and would take up to 1 s to compile cold; unrolling the planes before the first voxel too
// spills (BENCHMARKS.md "The shared-rows march unrolled at patch 7"). The planner's
// MostSmallSharedRowsPatch follows this rule.
constexpr int MARCH_UNROLL = (S <= 7 && TZ <= 8) ? TZ : 1;
static_assert(DIM == 3 && WIN0 >= 2 && WIN1 >= 2 && WIN2 >= 2, "the shared-rows kernel is for 3D, patch size >= 3");
static_assert(!NLM_NOISE_MAP, "the shared-rows kernel takes no noise map (the planner picks the tiled kernel)");
static_assert(T0 == 32 - EXT0 && T0 >= 1 && NW == T1 && NT % 32 == 0, "one warp per row of 32 - (s0 - 2) voxels");
static_assert(PD0 == PD && PD1 == PD && PD2 == PD && O0 == O && O1 == O && O2 == O,
              "the same patch and distance on every axis");

} // namespace

extern "C" __global__ void
__launch_bounds__(NT, NLM_MINBLOCKS)
  nlm_fast(const Real * __restrict__ Y, TOut * __restrict__ out, itk::nlm::FastKernelParameters p)
{
  extern __shared__ double sharedRaw[];
  Real *                   sums = reinterpret_cast<Real *>(sharedRaw); // two buffers of BUFFER
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

  // The footprint starts at padded cell lo + 1 on every axis (as the column kernel's): the first
  // patch term of the tile's first voxel is at lo + PD + 1.
  const Index  fx = static_cast<Index>(p.ySize[0]);
  const Index  fxy = fx * static_cast<Index>(p.ySize[1]);
  const Real * footprint =
    Y + ((c0 * T0 + 1) + (c1 * T1 + 1) * p.ySize[0] + (c2 * T2 + 1) * p.ySize[0] * p.ySize[1]) * K;
  // This lane's first patch term of row 0, plane 0, and its own voxel's first patch term.
  const Real * rowStart = footprint + ((lane + PD) + PD * fx + PD * fxy) * K;
  const Real * own = rowStart + warp * fx * K;
  const Index  centre = (O0 - 1 + (O1 - 1) * fx + (O2 - 1) * fxy) * K;
  const Real   norm = static_cast<Real>(p.norm);
  const Real   invNorm = static_cast<Real>(p.invNorm);
  const Real   noise = static_cast<Real>(p.noise);
  const Real   bias = static_cast<Real>(p.bias); // Rician: 2 sigma^2

  Real ws[TZ];
  Real rs[TZ][K];
#pragma unroll
  for (int q = 0; q < TZ; ++q)
  {
    ws[q] = 0;
#pragma unroll
    for (int k = 0; k < K; ++k)
    {
      rs[q][k] = 0;
    }
  }

  // The buffer of a plane is the count of planes marched so far (in this and the earlier shifts)
  // modulo 2: whatever the number of planes per shift, a plane's buffer was last read two planes
  // earlier, before the barrier of the plane in between.
  int parity = 0;
  // Per shift: the ring of the sums along axes 0 and 1 of the last WIN2 planes, for +t and -t.
  Real ringP[WIN2];
  Real ringM[WIN2];
  // Step 1 of a plane: the sums along axis 0 of its rows, for both signs, into the plane's buffer.
  // A warp's units are one unrolled loop, so that their chains of loads, shuffles and additions
  // interleave; a warp with fewer units repeats the last unit without storing it (no branch).
  auto rowSums = [&](int pl, Index tOff) {
    Real * buffer = sums + ((pl + parity) % 2) * BUFFER;
#pragma unroll
    for (int i = 0; i < UNITS_PER_WARP; ++i)
    {
      const int    u = min(warp + i * NW, UNITS - 1);
      const int    r = u >> 1;
      const Index  sign = (u & 1) ? -tOff : tOff;
      const Real * y = rowStart + (r * fx + pl * fxy) * K;
      Real         d = 0;
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        const Real diff = y[k] - y[sign + k];
        d = (k == 0) ? diff * diff : d + diff * diff;
      }
      d = d - noise;
      Real a = d;
#pragma unroll
      for (int j = 1; j < WIN0; ++j)
      {
        a = a + __shfl_down_sync(0xffffffffu, d, j);
      }
      if ((i + 1) * NW <= UNITS || warp + i * NW < UNITS)
      {
        buffer[(u & 1) * ROWS * 32 + r * 32 + lane] = a;
      }
    }
  };
  // Step 2 of a plane (after the barrier that ends step 1): this thread's sums along axis 1 from
  // the buffer, pushed into the rings.
  auto columnSums = [&](int pl) {
    const Real * aP = sums + ((pl + parity) % 2) * BUFFER + warp * 32 + lane;
    const Real * aM = aP + ROWS * 32;
    Real         bP = aP[0];
    Real         bM = aM[0];
#pragma unroll
    for (int j = 1; j < WIN1; ++j)
    {
      bP = bP + aP[j * 32];
      bM = bM + aM[j * 32];
    }
#pragma unroll
    for (int j = 0; j + 1 < WIN2; ++j)
    {
      ringP[j] = ringP[j + 1];
      ringM[j] = ringM[j + 1];
    }
    ringP[WIN2 - 1] = bP;
    ringM[WIN2 - 1] = bM;
  };
  // The voxel of tile plane q, once the march has passed its patch: the sums along axis 2, the
  // weights and the two terms (the target term first when t is lexicographically positive).
  auto voxel = [&](int q, bool targetFirst, bool half, Index tOff) {
    Real rawP = ringP[0];
    Real rawM = ringM[0];
#pragma unroll
    for (int j = 1; j < WIN2; ++j)
    {
      rawP = rawP + ringP[j];
      rawM = rawM + ringM[j];
    }
    const Real   wc = Unpack(CorrectedWeight(rawP, norm, invNorm, half));
    const Real   wt = Unpack(CorrectedWeight(rawM, norm, invNorm, half));
    const Real   w1 = targetFirst ? wt : wc;
    const Real   w2 = targetFirst ? wc : wt;
    const Real * x = own + centre + q * fxy * K;
    const Index  off1 = targetFirst ? -tOff : tOff;
    const Real   w = (ws[0] + w1) + w2;
    Real         r[K];
#pragma unroll
    for (int k = 0; k < K; ++k)
    {
      r[k] = (rs[0][k] + w1 * Value(x[off1 + k])) + w2 * Value(x[-off1 + k]);
    }
    // Plane q's accumulators are ws[0] and rs[0]: the arrays rotate by one plane per step, TZ steps
    // per shift, so that the march need not be unrolled (where it is, the rotation is renaming).
#pragma unroll
    for (int v = 0; v + 1 < TZ; ++v)
    {
      ws[v] = ws[v + 1];
#pragma unroll
      for (int k = 0; k < K; ++k)
      {
        rs[v][k] = rs[v + 1][k];
      }
    }
    ws[TZ - 1] = w;
#pragma unroll
    for (int k = 0; k < K; ++k)
    {
      rs[TZ - 1][k] = r[k];
    }
  };
  // One shift: the march through its planes, one barrier per plane between its two steps.
  auto shift = [&](bool targetFirst, int t0, int t1, int t2) {
    const bool  half = (t0 == 0);
    const Index tOff = (t0 + t1 * fx + t2 * fxy) * K;
#pragma unroll 1
    for (int pl = 0; pl < EXT2; ++pl) // the planes before the first voxel's patch is complete
    {
      rowSums(pl, tOff);
      __syncthreads();
      columnSums(pl);
    }
#pragma unroll(MARCH_UNROLL)
    for (int q = 0; q < TZ; ++q)
    {
      rowSums(q + EXT2, tOff);
      __syncthreads();
      columnSums(q + EXT2);
      voxel(q, targetFirst, half, tOff);
    }
    parity = (parity + PLANES) % 2;
  };
  for (int t2 = itk::nlm::FirstShift(2, PD2); t2 <= PD2; ++t2)
  {
    for (int t1 = itk::nlm::FirstShift(1, PD1); t1 <= PD1; ++t1)
    {
#pragma unroll 1
      for (int t0 = itk::nlm::FirstShift(0, PD0); t0 <= PD0; ++t0)
      {
        shift(itk::nlm::IsLexicographicallyPositive(t0, t1, t2, 0), t0, t1, t2);
      }
    }
  }

  // Normalize and store the voxels inside the output region.
  const long long g0 = c0 * T0 + lane;
  const long long g1 = c1 * T1 + warp;
  const long long g2 = c2 * T2;
  if (lane < T0 && g0 < p.outSize[0] && g1 < p.outSize[1])
  {
#pragma unroll
    for (int q = 0; q < TZ; ++q)
    {
      if (g2 + q < p.outSize[2])
      {
        const long long o = g0 + p.outSize[0] * (g1 + p.outSize[1] * (g2 + q));
#pragma unroll
        for (int k = 0; k < K; ++k)
        {
          out[o * K + k] = static_cast<TOut>(static_cast<TIn>(Output(rs[q][k], ws[q], bias)));
        }
      }
    }
  }
}
