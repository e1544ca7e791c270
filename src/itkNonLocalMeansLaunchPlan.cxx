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
#include "itkNonLocalMeansLaunchPlan.h"
#include "itkNonLocalMeansNumerics.h"
#include "itkMacro.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>

namespace itk
{
namespace nlm
{
namespace
{
using Problem = NonLocalMeansBackend::Problem;

// Instruction issue of an H200, as measured for the cost model: warp instructions per cycle per
// resident warp, and the most per cycle and multiprocessor.
constexpr double IssuePerResidentWarp = 0.095;
constexpr double MostIssuePerCycle = 3.2;
// Accumulators a thread may keep in registers (doubles).
constexpr int MostAccumulators = 32;
// Threads and blocks resident on one multiprocessor, and registers per multiprocessor.
constexpr int ResidentThreads = 2048;
constexpr int MostBlocksPerMultiprocessor = 32;
constexpr int Registers = 65536;
// Shared memory the driver reserves per block.
constexpr int SharedReservedPerBlock = 1024;
// Patch 5 takes the column kernel from this distance on (ColumnKernelApplies) where the shared-rows
// kernel is not preferred; one channel in single precision from distance 2 on (the smallest
// measured; SinglePrecisionPatch5Kernel, the home of that case's rule).
constexpr int ColumnPatch5FromDistance = 8;
constexpr int SinglePrecisionColumnPatch5FromDistance = 2;
// The largest patch the column kernel takes in 2D by default, and the smallest distance at which it
// takes that patch (one channel; ColumnKernelApplies).
constexpr int MostColumnPatch2D = 11;
constexpr int LargestColumnPatch2DFromDistance = 2;
// The 3D column kernel at patch 3 (one channel, float64 arithmetic) takes 3 rows per thread instead
// of 2 at this distance, where the shape keeps its blocks and its footprint in shared memory and
// each device has at least ColumnThreeRowsFromWaves waves of its tiles (ColumnThreeRowsPay). NVIDIA
// H100 SXM, 2026-12-07, with the corrected-quotient weights: 1.02x to 1.08x faster from 96^3 (1.9
// waves) to 500^3 (225 waves), 256^3 and 192^3 included (the threshold of one wave, between 64^3
// and 96^3, is an extrapolation); at distances 1 and 2 1.01x to 1.02x, at 5 0.86x (BENCHMARKS.md
// "The corrected quotient"). With the former scaled weights it paid only from
// about 64 waves, and under one wave (64^3) it was 0.73x (BENCHMARKS.md "3 rows per thread at 3D
// patch 3 and distance 3").
constexpr int ColumnThreeRowsDistance = 3;
constexpr int ColumnThreeRowsFromWaves = 1;
// The shared-rows kernel's smallest patch by default, its smallest distance at patches up to
// MostSmallSharedRowsPatch (those whose march the kernel unrolls: MARCH_UNROLL), and its smallest
// distance beyond (SharedRowsKernelPreferred): one channel, in float64 or single precision.
constexpr int SharedRowsFromPatch = 5;
constexpr int MostSmallSharedRowsPatch = 7;
constexpr int SmallSharedRowsFromDistance = 3;
constexpr int SharedRowsFromDistance = 7;
// The same for several channels, where the shared-rows kernel is no faster at patches 5 and 7
// below distance 9 (patch 7 and more from distance 9).
constexpr int OtherSharedRowsFromPatch = 7;
constexpr int OtherSharedRowsFromDistance = 9;
// The largest patch the shared-rows kernel takes (SharedRowsKernelServes).
constexpr int MostSharedRowsPatch = 21;
// The buffered-weights kernel: its smallest patch and distance by default (BufferedWeightsPreferred),
// and its shape: shift pairs per batch, warps and planes per block of the weights pass.
constexpr int BufferedWeightsFromPatch = 5;
constexpr int BufferedWeightsFromDistance = 3;
// In single precision from patch 7, where the column kernel is faster below (1.25x at patch 5 /
// distance 5); 2.1x to 2.3x faster than the shared-rows kernel at patches 7 and 9, distances 3 and
// 4 (BENCHMARKS.md "The gather's loads in flight, the weights pass's occupancy").
constexpr int SingleBufferedWeightsFromPatch = 7;
constexpr int SingleBufferedWeightsFromDistance = 3;
constexpr int BufferedWeightPairs = 12;
constexpr int BufferedWeightWarps = 8;
// From patch WideBufferedWeightsFromPatch on, WideBufferedWeightWarps: twice the rows per plane share
// the s - 1 rows of the patch's margin. (At patch 9 in float64, 8 warps are 1.02x faster since the
// warps skip the rows they do not have: BENCHMARKS.md "Warps skip the rows they do not have".)
constexpr int WideBufferedWeightsFromPatch = 11;
constexpr int WideBufferedWeightWarps = 16;
// In float64 up to patch WiderBufferedWeightsUpToPatch, WiderBufferedWeightWarps (one block of 640
// threads, 96 registers): 1.05x to 1.09x faster than 16 warps at patch 11, distances 3 to 11, 1.07x
// at patch 13 / distance 5; at patch 15 they spill (1.04x slower), and in single precision 2 blocks
// of 16 warps stay 1.05x faster (BENCHMARKS.md "Wider blocks at patches 11 to 13, 128 planes").
constexpr int WiderBufferedWeightsUpToPatch = 13;
constexpr int WiderBufferedWeightWarps = 20;
// In float64 at patch BalancedBufferedWeightsPatch, BalancedBufferedWeightWarps with registers for
// BufferedWeightsBalancedThreads (2 blocks of 320 threads, 96 registers): step 1's 19 rows are 10
// units (9 pairs of rows and a row alone), one per warp, where 20 warps have 15 units and 5 warps
// wait at the barrier, and two blocks fill each other's barrier waits. 1.08x faster than one block
// of 20 warps at patch 11, distances 3 to 11; at patch 13 level (its 21 rows are 11 units for 10
// warps); 12 warps in 2 blocks (85 registers) 1.07x slower; in single precision (16 warps in 2
// blocks) 10 warps are level (BENCHMARKS.md "The gather's voxels along axis 0").
constexpr int BalancedBufferedWeightsPatch = 11;
constexpr int BalancedBufferedWeightWarps = 10;
constexpr int BufferedWeightsBalancedThreads = 640;
// Planes per block: the block's first s - 2 planes only start its sums along axis 2, so longer
// marches share them more (128 instead of 64: 1.02x to 1.05x faster from patch 7 at 256^3, as fast
// at patch 5, 1.04x faster on 32 x 32 x 2000 at patch 9; 256 is 1.01x to 1.02x faster again at
// 256^3 from patch 7 but 1.03x slower at patch 5 and 1.05x on 32 x 32 x 2000).
constexpr int BufferedWeightPlanes = 128;
// Where a slab of BufferedWeightPlanes does not fit the memory budget, blocks of half as many planes
// down to ThinnestBufferedWeightPlanes (ConfigurationThatFits) before the planner leaves the problem
// to the other kernels.
constexpr int ThinnestBufferedWeightPlanes = 64;
// Resident threads per SM the weights pass's registers are budgeted for (__launch_bounds__ through
// KernelConfig::MinBlocks), where measured (up to patch BufferedWeightsBudgetUpToPatch, blocks of at
// most BufferedWeightWarps in float64): 1024 (64 registers) in single precision and in float64 up to
// patch BufferedWeightsLeanUpToPatch, 768 (80 registers; 64 spill) in float64 up to patch
// BufferedWeightsWideUpToPatch; elsewhere one block. At 256^3 in float64, 4 blocks of 8 warps
// instead of 2 are 1.12x faster at patch 7 / distance 11, 3 blocks 1.08x at patch 9 / distance 5 (4
// spill: 1.05x slower); 2 blocks of 16 warps are 1.08x slower at patch 11 in float64 and 1.14x
// faster at patches 11 and 13 in single precision (BENCHMARKS.md "The gather's loads in flight, the
// weights pass's occupancy").
constexpr int BufferedWeightsBudgetUpToPatch = 13;
constexpr int BufferedWeightsLeanUpToPatch = 7;
constexpr int BufferedWeightsWideUpToPatch = 9;
constexpr int BufferedWeightsLeanThreads = 1024;
constexpr int BufferedWeightsWideThreads = 768;
// The most blocks per SM a budget asks for (the fewest any supported GPU keeps resident).
constexpr int MostBudgetedBlocks = 16;
// The most blocks of a launch along grid axes y and z (CUDA's limit).
constexpr long long MostGridBlocksYZ = 65535;
// Offsets inside one block's footprint above this need 64-bit indices.
constexpr double NarrowIndexLimit = 2.0e9;

/** The configuration fields that follow from the problem alone. */
KernelConfig
BaseConfiguration(const Problem & p)
{
  KernelConfig base;
  base.Dimension = static_cast<int>(p.Dimension);
  base.Components = static_cast<int>(p.Components);
  base.PatchSize = NonLocalMeansBackend::EffectivePatchSize(p.PatchSize);
  base.PatchDistance = p.PatchDistance;
  if (p.PerAxis)
  {
    for (unsigned int a = 0; a < p.Dimension; ++a)
    {
      base.AxisPatchSize[a] = NonLocalMeansBackend::PatchSizeAlong(p, a);
      base.AxisPatchDistance[a] = NonLocalMeansBackend::PatchDistanceAlong(p, a);
    }
  }
  base.InputDouble = p.InputType == NonLocalMeansBackend::ElementType::Float64;
  base.OutputDouble = p.OutputType == NonLocalMeansBackend::ElementType::Float64;
  base.SinglePrecision = p.SinglePrecision;
  base.Rician = (p.NoiseModel == CudaNonLocalMeansImageFilterEnums::NoiseModel::Rician);
  base.NoiseMap = (p.NoiseSigma != nullptr);
  base.CorrectedWeights = CorrectedWeightsServe(p);
  return base;
}

/** The classic kernel's configuration (slow mode): one thread per pixel of a 16 x 16 tile (2D) or an
 * 8 x 8 x 4 tile (3D); the working type's arithmetic (single precision does not apply). */
KernelConfig
ClassicConfiguration(KernelConfig base)
{
  base.Classic = true;
  base.SinglePrecision = false;
  const int tile[2][4] = { { 16, 16, 1, 1 }, { 8, 8, 4, 1 } };
  for (int a = 0; a < 4; ++a)
  {
    base.Tile[a] = tile[base.Dimension == 2 ? 0 : 1][a];
  }
  base.ThreadCount = 256;
  base.ZSegments = 1;
  base.MinBlocks = 2;
  return base;
}

/** Whether the column kernel can serve a problem: 2D or 3D, not switched off, no tiled shape
 * forced, no noise map, isotropic, and weights that the corrected quotient computes
 * (CorrectedWeightsServe). */
bool
ColumnKernelUsable(const Problem & p, const KernelConfig & base, const Overrides & o)
{
  return (p.Dimension == 2 || p.Dimension == 3) && o.TileShape.empty() && !o.ColumnKernelOff && !base.NoiseMap &&
         !base.IsAnisotropic() && CorrectedWeightsServe(p);
}

/** Whether the column kernel applies (where ColumnKernelUsable). 3D: patch 3, or patch 5 from
 * ColumnPatch5FromDistance on. 2D: patch 3 to MostColumnPatch2D, that patch with one channel from
 * LargestColumnPatch2DFromDistance on. 2D and 3D: 3 to 11 when its shape is forced.
 * Measured on an H200 (3D 160^3 float64, BENCHMARKS.md "Kernels for large distances and patches"):
 * at patch 3 it is 2.8x to 13x faster than the tiled kernel at every distance; at patch 5 it is
 * slower at distance 3, level at 7 and 1.65x faster at 11; from patch 7 on the tiled kernel is
 * faster and compiles in a fraction of the time. In 2D (4096^2, "The column kernel in 2D") it is
 * 1.4x to 3.5x faster than the tiled kernel at patches 3 to 9; at patch 11, with 16 rows in 2
 * chunks (NVIDIA H100, "The column kernel's rows in chunks"), 1.02x (distance 3) to 1.8x (21)
 * faster in float64 and 1.4x to 2.1x in single precision from distance 2 on, 0.96x at distance 1;
 * with 3 channels (8 rows) 0.91x to 1.15x. In 3D the shared-rows kernel, where
 * preferred, comes first (ChooseConfiguration), so patch 5 takes the column kernel only where it is
 * not (several channels), switched off or does not fit; one channel in single precision at patch 5
 * has its own rule (SinglePrecisionPatch5Kernel). */
bool
ColumnKernelApplies(const Problem & p, const KernelConfig & base, const Overrides & o)
{
  const bool forced = !o.ColumnShape.empty() && base.PatchSize >= 3 && base.PatchSize <= 11;
  const bool chosen =
    (p.Dimension == 3 &&
     (base.PatchSize == 3 || (base.PatchSize == 5 && base.PatchDistance >= ColumnPatch5FromDistance))) ||
    (p.Dimension == 2 && base.PatchSize >= 3 &&
     (base.PatchSize < MostColumnPatch2D || (base.PatchSize == MostColumnPatch2D && base.Components == 1 &&
                                             base.PatchDistance >= LargestColumnPatch2DFromDistance)));
  return (forced || chosen) && ColumnKernelUsable(p, base, o);
}

/** At most `blocks`, and no more blocks per SM than its shared memory holds with `sharedBytes` per
 * block (at least 1). */
int
BlocksThatFitShared(int blocks, std::size_t sharedBytes, const DeviceLimits & limits)
{
  while (blocks > 1 && static_cast<std::size_t>(blocks) * (sharedBytes + SharedReservedPerBlock) >
                         static_cast<std::size_t>(limits.SharedPerMultiprocessor))
  {
    --blocks;
  }
  return blocks;
}

/** The column kernel's configuration of `shape` ({rows, planes, warps, blocks per SM}, fewer planes,
 * or in 2D rows, where its accumulators would exceed MostAccumulators): its footprint in global
 * memory where a copy in shared memory would cost resident blocks, or as Overrides::ColumnFootprint
 * says, and the blocks per SM that its shared memory allows. */
KernelConfig
ColumnShapeConfig(const KernelConfig & base, std::vector<int> shape, const DeviceLimits & limits, const Overrides & o)
{
  while (shape[1] > 1 && shape[0] * shape[1] * (base.Components + 1) > MostAccumulators)
  {
    shape[1] /= 2;
  }
  while (base.Dimension == 2 && shape[0] > 1 && shape[0] * (base.Components + 1) > MostAccumulators)
  {
    shape[0] /= 2; // 2D: fewer rows
  }
  KernelConfig k = base;
  k.Rows = shape[0];
  k.Tile[0] = 32 - (base.PatchSize - 2);
  k.Tile[1] = shape[0] * shape[2];
  k.Tile[2] = shape[1];
  k.Tile[3] = 1;
  k.ThreadCount = 32 * shape[2];
  k.ZSegments = 1;
  k.MinBlocks = shape[3];
  k.GlobalFootprint = (o.ColumnFootprint == "global");
  if (o.ColumnFootprint.empty() && static_cast<std::size_t>(k.MinBlocks) * (k.SharedBytes() + SharedReservedPerBlock) >
                                     static_cast<std::size_t>(limits.SharedPerMultiprocessor))
  {
    k.GlobalFootprint = true; // a footprint in shared memory would cost resident blocks
  }
  k.MinBlocks = BlocksThatFitShared(k.MinBlocks, k.SharedBytes(), limits);
  return k;
}

/** Tiles of `tile` voxels per axis that cover the problem's output region. */
long long
OutputTiles(const Problem & p, const int (&tile)[4])
{
  long long tiles = 1;
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    tiles *= (p.OutputSize[a] + tile[a] - 1) / tile[a];
  }
  return tiles;
}

/** Whether the 3D column kernel's patch-3 shape with 3 rows per thread (`threeRows`; ChooseColumnShape
 * asks for one channel in float64 arithmetic) pays: at ColumnThreeRowsDistance, where its footprint
 * stays in shared memory with all of its blocks per SM and the output's tiles make at least
 * ColumnThreeRowsFromWaves waves of the resident blocks of each device. */
bool
ColumnThreeRowsPay(const Problem &          p,
                   const KernelConfig &     base,
                   const std::vector<int> & threeRows,
                   const DeviceLimits &     limits,
                   const Overrides &        o)
{
  if (base.PatchDistance != ColumnThreeRowsDistance)
  {
    return false;
  }
  const KernelConfig k = ColumnShapeConfig(base, threeRows, limits, o);
  const long long    resident = static_cast<long long>(limits.Multiprocessors) * k.MinBlocks * limits.Devices;
  return !k.GlobalFootprint && k.MinBlocks == threeRows[3] &&
         OutputTiles(p, k.Tile) / resident >= ColumnThreeRowsFromWaves;
}

/** The first column-kernel shape that fits the device, in the order of preference measured on an
 * H200 (BENCHMARKS.md); `found` false when none fits. The footprint is read from global memory
 * where a copy in shared memory would cost resident blocks (ColumnShapeConfig; 3D: from distance 5
 * on at patch 3 in float64 arithmetic on an H200), or as Overrides::ColumnFootprint says. */
KernelConfig
ChooseColumnShape(const Problem &      p,
                  const KernelConfig & base,
                  const DeviceLimits & limits,
                  const Overrides &    o,
                  bool &               found)
{
  // {rows, planes, warps, blocks per SM}. 3D: float64 arithmetic, float arithmetic, several
  // components, then smaller footprints; at patch 3 with one channel in float64 arithmetic 4 planes
  // of 4 warps, 3 blocks per SM, 2 rows (NVIDIA H100, 256^3 and 500^3: 1.04x to 1.15x faster than
  // 2 planes of 8 warps at distances 1 to 3 and 11, level at 5 and 7, measured when the former
  // scaled weights' rare division went out of line and no longer spilled; BENCHMARKS.md "The column
  // kernel's rows in chunks"), 3 rows where ColumnThreeRowsPay. In 2D a thread marches through its
  // rows (one plane): 4 rows and 4 blocks per SM at patch 3, 16 rows at patches 5 and 7 (at patch 7
  // 1.15x faster than 8 rows at distance 11; 0.5 to 0.8 s to compile cold on a 2-core x86-64
  // machine, sm_80/90), and from patch 9 on with one channel 16 rows in 2 chunks (ColumnRowChunks:
  // their 16 rows unrolled take over 1 s to compile) and 4 warps, 3 blocks per SM, whose 170
  // registers hold the chunk not marched without spilling (1.16x to 1.20x faster than 8 rows at
  // patch 9, 1.17x than 16 rows in chunks with 8 warps, 2 blocks, at patch 11 / distance 11); 8
  // rows otherwise (BENCHMARKS.md "The column kernel in 2D", "16 rows at patch 7 in 2D again" and
  // "The column kernel's rows in chunks").
  std::vector<std::vector<int>> shapes = { { 2, 2, 8, 3 }, { 2, 2, 4, 4 }, { 1, 2, 4, 2 } };
  if (base.Dimension == 2)
  {
    shapes = { { 8, 1, 8, 2 }, { 4, 1, 4, 2 } };
    if (base.PatchSize == 3)
    {
      shapes.insert(shapes.begin(), { 4, 1, 8, 4 });
    }
    else if (base.PatchSize < ColumnRowChunksFromPatch)
    {
      shapes.insert(shapes.begin(), { 16, 1, 8, 2 });
    }
    else if (base.Components == 1)
    {
      shapes.insert(shapes.begin(), { ColumnRowsInChunks, 1, 4, 3 });
    }
  }
  else if (base.Components > 1)
  {
    shapes.insert(shapes.begin(), { 1, 4, 4, 2 });
  }
  else if (base.SinglePrecision)
  {
    shapes.insert(shapes.begin(), { 2, 8, 4, 2 });
  }
  else if (base.PatchSize == 3)
  {
    const std::vector<int> twoRows = { 2, 4, 4, 3 };
    std::vector<int>       threeRows = twoRows;
    threeRows[0] = 3;
    shapes.insert(shapes.begin(), twoRows);
    if (ColumnThreeRowsPay(p, base, threeRows, limits, o))
    {
      shapes.insert(shapes.begin(), threeRows);
    }
  }
  if (!o.ColumnShape.empty())
  {
    std::vector<int> forced = o.ColumnShape;
    forced[3] = std::min(forced[3], ResidentThreads / 32 / forced[2]);
    forced[1] = (base.Dimension == 2) ? 1 : forced[1];
    shapes = { forced };
  }
  for (const auto & shape : shapes)
  {
    const KernelConfig k = ColumnShapeConfig(base, shape, limits, o);
    if (k.SharedBytes() <= static_cast<std::size_t>(limits.SharedPerBlockOptIn))
    {
      found = true;
      return k;
    }
  }
  found = false;
  return base;
}

/** Whether the 3D shared-rows kernel can serve a problem: 3D, patch size 3 to MostSharedRowsPatch
 * (the range its compile-time and GPU tests cover; a row's window must fit a warp), the same patch
 * and distance on every axis, no noise map, not switched off, no other kernel's shape forced, and
 * weights that the corrected quotient computes (as the column kernel). */
bool
SharedRowsKernelServes(const Problem & p, const KernelConfig & base, const Overrides & o)
{
  return p.Dimension == 3 && base.PatchSize >= 3 && base.PatchSize <= MostSharedRowsPatch && o.TileShape.empty() &&
         o.ColumnShape.empty() && !o.SharedRowsKernelOff && !base.NoiseMap && !base.IsAnisotropic() &&
         CorrectedWeightsServe(p);
}

/** Whether the planner prefers the shared-rows kernel where no shape is forced (ChooseConfiguration
 * takes a forced one first, and one channel in single precision at patch 5 by its own rule,
 * SinglePrecisionPatch5Kernel): for one channel (float64 or single precision), patch
 * SharedRowsFromPatch to MostSmallSharedRowsPatch from distance SmallSharedRowsFromDistance on and
 * larger patches from SharedRowsFromDistance on; for several channels patch
 * OtherSharedRowsFromPatch from distance OtherSharedRowsFromDistance on.
 * Measured on an H200 (BENCHMARKS.md "The shared-rows kernel at patches 5 and 7" and "The
 * shared-rows kernel in single precision and with several channels"): its throughput hardly depends
 * on the distance, while the tiled kernel's union boxes grow with it.
 * - float64, 256^3: at patch 5 1.11x (distance 3) to 1.56x (distance 7) faster than the tiled
 *   kernel and 1.48x faster than the column kernel at distance 11; at patch 7 1.05x (distance 3) to
 *   1.32x (distance 7) faster. From patch 9 on, where its march is not unrolled, level at distance
 *   7, 1.06x faster at patch 11, and slower at distance 5 (0.90x at patch 9, 0.69x at patch 11).
 * - single precision, 256^3: 1.44x to 2.00x faster than the tiled kernel at patch 5 (distances 3 to
 *   7), 1.14x to 1.56x at patch 7, 1.09x at patch 9 / distance 7; but 0.55x to 0.73x as fast as the
 *   column kernel at patch 5 (SinglePrecisionPatch5Kernel). At patch 7 the column kernel (forced,
 *   footprint in global memory) is 0.73x as fast as it.
 * - 3 channels, 128^3 float64: 0.81x to 1.0x as fast at patches 5 and 7, distances 3 to 7, and
 *   0.83x at patch 9 / distance 7; 2 channels, 160^3: 0.72x (patch 7 / distance 3) to 1.12x. */
bool
SharedRowsKernelPreferred(const KernelConfig & base)
{
  if (base.Components > 1)
  {
    return base.PatchSize >= OtherSharedRowsFromPatch && base.PatchDistance >= OtherSharedRowsFromDistance;
  }
  const int from = (base.PatchSize <= MostSmallSharedRowsPatch) ? SmallSharedRowsFromDistance : SharedRowsFromDistance;
  return base.PatchSize >= SharedRowsFromPatch && base.PatchDistance >= from;
}

/** Whether a problem is one channel in 3D at patch 5 in single precision with no column-kernel
 * shape forced: the case SinglePrecisionPatch5Kernel decides (a forced shared-rows shape that can
 * serve is taken before it, a forced tiled shape leaves the column kernel unusable). */
bool
IsSinglePrecisionPatch5(const Problem & p, const KernelConfig & base, const Overrides & o)
{
  return p.Dimension == 3 && base.SinglePrecision && base.Components == 1 && base.PatchSize == 5 &&
         o.ColumnShape.empty();
}

/** The rule for IsSinglePrecisionPatch5, in one place: from distance
 * SinglePrecisionColumnPatch5FromDistance on the column kernel where its footprint fits shared
 * memory (on an H200 up to distance 7), beyond it the shared-rows kernel (`rows`, null where that
 * cannot serve), unless the footprint is forced. Measured on an H200 at 256^3 (BENCHMARKS.md "The
 * shared-rows kernel in single precision and with several channels"): the column kernel with its
 * footprint in shared memory is 1.80x to 1.82x faster than the shared-rows kernel at distances 3 to
 * 7 and 2.37x faster than the tiled kernel at distance 2; with its footprint in global memory it is
 * 1.37x faster than the shared-rows kernel (675 against 923 ms at distance 11) but takes 1.0 to
 * 1.2 s to compile cold (sm_61/80/90, 2-core x86-64), beyond issue 12's 1 s (about 0.8 s in shared
 * memory). `found` is false where the column kernel cannot serve: the general rules decide. */
KernelConfig
SinglePrecisionPatch5Kernel(const Problem &      p,
                            const KernelConfig & base,
                            const DeviceLimits & limits,
                            const Overrides &    o,
                            const KernelConfig * rows,
                            bool &               found)
{
  found = false;
  if (base.PatchDistance < SinglePrecisionColumnPatch5FromDistance || !ColumnKernelUsable(p, base, o))
  {
    return base;
  }
  const KernelConfig columns = ChooseColumnShape(p, base, limits, o, found);
  return (found && columns.GlobalFootprint && o.ColumnFootprint.empty() && rows != nullptr) ? *rows : columns;
}

/** The shared-rows kernel's configuration: {planes, warps, blocks per SM} as forced, else 8 planes
 * (4 from patch 13 on, whose rings take more registers), 16 warps and one block per SM. */
KernelConfig
SharedRowsConfiguration(KernelConfig base, const Overrides & o)
{
  std::vector<int> shape = { base.PatchSize <= 11 ? 8 : 4, 16, 1 };
  if (!o.SharedRowsShape.empty())
  {
    shape = o.SharedRowsShape;
    shape[2] = std::min(shape[2], ResidentThreads / 32 / shape[1]);
  }
  while (shape[0] > 1 && shape[0] * (base.Components + 1) > MostAccumulators)
  {
    shape[0] /= 2;
  }
  base.SharedRows = true;
  base.Tile[0] = 32 - (base.PatchSize - 2);
  base.Tile[1] = shape[1];
  base.Tile[2] = shape[0];
  base.Tile[3] = 1;
  base.ThreadCount = 32 * shape[1];
  base.ZSegments = 1;
  base.MinBlocks = shape[2];
  return base;
}

/** Whether the 3D buffered-weights kernel can serve a problem: as the shared-rows kernel (3D, patch
 * size 3 to MostSharedRowsPatch, the same patch and distance on every axis, no noise map, weights
 * that the corrected quotient computes), without a mask (it computes every weight), not switched
 * off, no other kernel's shape forced, and an output whose axis 1 fits the gather's grid
 * (PlanSlabs cuts axis 2 into slabs that fit). */
bool
BufferedWeightsServe(const Problem & p, const KernelConfig & base, const Overrides & o)
{
  return p.Dimension == 3 && p.OutputSize[1] <= MostGridBlocksYZ * BufferedGatherBlock[1] && base.PatchSize >= 3 &&
         base.PatchSize <= MostSharedRowsPatch && o.TileShape.empty() && o.ColumnShape.empty() &&
         o.SharedRowsShape.empty() && !o.BufferedWeightsOff && !base.NoiseMap && !base.IsAnisotropic() &&
         p.Mask == nullptr && CorrectedWeightsServe(p);
}

/** Whether the planner prefers the buffered-weights kernel where it can serve: one channel in
 * float64 from patch BufferedWeightsFromPatch and distance BufferedWeightsFromDistance on, in single
 * precision from SingleBufferedWeightsFromPatch and SingleBufferedWeightsFromDistance on (1.38x to
 * 2.15x faster than the shared-rows and tiled kernels at patches 7 to 13, distances 5 and 11, 2.1x
 * to 2.3x at distances 3 and 4; the column kernel is 1.25x faster at patch 5 / distance 5), or
 * everywhere when CUDANONLOCALMEANS_BUFFERED_WEIGHTS is 1 or a shape. Measured on an H200 at 256^3
 * (BENCHMARKS.md "Every weight once: the buffered-weights kernel"): it computes every weight once
 * where the shared-rows kernel computes both weights of a pair, 1.27x (patch 5 / distance 11) to
 * 1.66x (patch 7 / distance 11) faster than it and 1.30x to 1.66x at distance 3; 1.33x to 1.93x
 * faster than the tiled and shared-rows kernels at patches 9 and 11; at patch 3 the column kernel
 * is 1.8x faster. */
bool
BufferedWeightsPreferred(const KernelConfig & base, const Overrides & o)
{
  const int fromPatch = base.SinglePrecision ? SingleBufferedWeightsFromPatch : BufferedWeightsFromPatch;
  const int fromDistance = base.SinglePrecision ? SingleBufferedWeightsFromDistance : BufferedWeightsFromDistance;
  return o.BufferedWeightsForced ||
         (base.Components == 1 && base.PatchSize >= fromPatch && base.PatchDistance >= fromDistance);
}

/** The blocks per SM that the buffered-weights kernel's weights pass budgets its registers for
 * (BufferedWeightsBalancedThreads, BufferedWeightsLeanThreads and BufferedWeightsWideThreads), as
 * many as shared memory holds. */
int
BufferedWeightsMinBlocks(const KernelConfig & c, const DeviceLimits & limits)
{
  int threads = c.ThreadCount; // one block: no budget
  if (!c.SinglePrecision && c.PatchSize == BalancedBufferedWeightsPatch &&
      c.ThreadCount <= 32 * BalancedBufferedWeightWarps)
  {
    threads = BufferedWeightsBalancedThreads;
  }
  else if (c.PatchSize <= BufferedWeightsBudgetUpToPatch &&
           (c.SinglePrecision || c.ThreadCount <= 32 * BufferedWeightWarps))
  {
    if (c.SinglePrecision || c.PatchSize <= BufferedWeightsLeanUpToPatch)
    {
      threads = BufferedWeightsLeanThreads;
    }
    else if (c.PatchSize <= BufferedWeightsWideUpToPatch)
    {
      threads = BufferedWeightsWideThreads;
    }
  }
  return BlocksThatFitShared(
    std::min(MostBudgetedBlocks, std::max(1, threads / c.ThreadCount)), c.SharedBytes(), limits);
}

/** The buffered-weights kernel's configuration: {warps, planes, shift pairs per batch} as forced
 * (Overrides::BufferedWeightsShape), else BufferedWeightWarps (WideBufferedWeightWarps from patch
 * WideBufferedWeightsFromPatch on: 1.39x faster at patch 11 and 1.38x at patch 13 in float64,
 * 1.03x at patch 11 in single precision, slower below; WiderBufferedWeightWarps in float64 up to
 * patch WiderBufferedWeightsUpToPatch, BalancedBufferedWeightWarps in float64 at patch
 * BalancedBufferedWeightsPatch), BufferedWeightPlanes and BufferedWeightPairs; its registers
 * budgeted by BufferedWeightsMinBlocks. */
KernelConfig
BufferedWeightsConfiguration(KernelConfig base, const DeviceLimits & limits, const Overrides & o)
{
  const bool       wider = !base.SinglePrecision && base.PatchSize <= WiderBufferedWeightsUpToPatch;
  const bool       balanced = !base.SinglePrecision && base.PatchSize == BalancedBufferedWeightsPatch;
  const int        warps = base.PatchSize < WideBufferedWeightsFromPatch ? BufferedWeightWarps
                           : balanced                                    ? BalancedBufferedWeightWarps
                           : wider                                       ? WiderBufferedWeightWarps
                                                                         : WideBufferedWeightWarps;
  std::vector<int> shape = { warps, BufferedWeightPlanes, BufferedWeightPairs };
  if (!o.BufferedWeightsShape.empty())
  {
    shape = o.BufferedWeightsShape;
  }
  base.WeightBatch = shape[2];
  base.Tile[0] = 32 - (base.PatchSize - 2);
  base.Tile[1] = shape[0];
  base.Tile[2] = shape[1];
  base.Tile[3] = 1;
  base.ThreadCount = 32 * shape[0];
  base.ZSegments = 1;
  base.MinBlocks = BufferedWeightsMinBlocks(base, limits);
  return base;
}

/** Tile extents to try per axis (dimension `n`): {T0, T1, T2, T3}. Along axis 0 the preferred
 * extent makes a row of patch terms fill one warp; the spanning box's row reaches the distance
 * further. In 4D, split boxes (`split`) take the widest multiple of 8 whose row fits without that
 * reach (24 x 4 x 8 x 4 voxels: 3 per thread of 1024), at every distance, as their cost is the same
 * at every distance: 1.04x to 1.37x faster on an H100 than the spanning box's fit, which shrinks
 * with the distance, wherever the choice changed; in 3D (noise maps) it was 0.92x to 1.02x, so
 * 3D keeps the spanning box's (BENCHMARKS.md, "The split boxes' tiles"). */
std::vector<std::vector<int>>
CandidateTiles(const KernelConfig & base, bool split)
{
  const int        win = base.PatchSizeAlong(0) - 1;
  const int        ext = (win > 0) ? win - 1 : 0;
  std::vector<int> t0s = { 8, 16, 32 };
  const int        rowFit =
    (split && base.Dimension == 4) ? (32 - ext) / 8 * 8 : (32 - base.PatchDistanceAlong(0) - ext) / 4 * 4;
  if (rowFit >= 4 && std::find(t0s.begin(), t0s.end(), rowFit) == t0s.end())
  {
    t0s.push_back(rowFit);
  }
  std::vector<std::vector<int>> tiles;
  for (int a : t0s)
  {
    if (base.Dimension == 2)
    {
      for (int b : { 8, 16, 32, 64 })
      {
        tiles.push_back({ a, b, 1, 1 });
      }
    }
    else if (base.Dimension == 3)
    {
      for (int b : { 4, 8, 16 })
      {
        for (int c : { 4, 8, 16 })
        {
          tiles.push_back({ a, b, c, 1 });
        }
      }
    }
    else
    {
      for (int b : { 4, 8 })
      {
        for (int c : { 2, 4, 8 })
        {
          for (int d : { 2, 4 })
          {
            tiles.push_back({ a, b, c, d });
          }
        }
      }
    }
  }
  return tiles;
}

/** Tiled candidates {T0, T1, T2, T3, threads, segments, blocks}: every tile with every thread
 * count that divides it into 2 or more voxels per thread within the accumulator budget, every
 * march segmentation (3D) and every block budget that fits the resident threads. */
std::vector<std::vector<int>>
CandidateConfigurations(const KernelConfig & base, bool split)
{
  static const int              threadCounts[] = { 64, 96, 128, 160, 192, 224, 256, 384, 448, 512, 768, 896, 1024 };
  std::vector<std::vector<int>> candidates;
  for (const auto & t : CandidateTiles(base, split))
  {
    const int voxels = t[0] * t[1] * t[2] * t[3];
    for (int threads : threadCounts)
    {
      if (voxels % threads != 0 || voxels / threads < 2 ||
          (voxels / threads) * (base.Components + 1) > MostAccumulators)
      {
        continue;
      }
      for (int segments : { 1, 2, 4 })
      {
        if (segments > 1 && (base.Dimension != 3 || segments > t[2]))
        {
          continue;
        }
        for (int minBlocks : { 1, 2, 3, 4 })
        {
          if (threads * minBlocks <= ResidentThreads)
          {
            candidates.push_back({ t[0], t[1], t[2], t[3], threads, segments, minBlocks });
          }
        }
      }
    }
  }
  if (candidates.empty())
  {
    candidates.push_back({ 8, 8, base.Dimension > 2 ? 4 : 1, base.Dimension > 3 ? 2 : 1, 64, 1, 1 });
  }
  return candidates;
}

/** The tiled configuration of least estimated cost among the candidates (or the forced shape) with
 * the weights in one spanning box (`split` false) or in two boxes of the tile's extent (`split`
 * true); +infinity in `bestCost` when none fits the device. */
KernelConfig
CheapestTiledShape(const KernelConfig &    base,
                   const DeviceLimits &    limits,
                   const Overrides &       o,
                   const PlanningAborted & aborted,
                   bool                    split,
                   double &                bestCost)
{
  const bool forced = !o.TileShape.empty();
  const auto candidates = forced ? std::vector<std::vector<int>>{ o.TileShape } : CandidateConfigurations(base, split);
  KernelConfig best = base;
  bestCost = std::numeric_limits<double>::infinity();
  for (const auto & c : candidates)
  {
    if (aborted && aborted())
    {
      ProcessAborted e(__FILE__, __LINE__);
      e.SetLocation(ITK_LOCATION);
      e.SetDescription("AbortGenerateDataOn while the CUDA backend planned its kernels");
      throw e;
    }
    KernelConfig k = base;
    for (int a = 0; a < 4; ++a)
    {
      k.Tile[a] = c[static_cast<std::size_t>(a)];
    }
    k.ThreadCount = c[4];
    k.ZSegments = c[5];
    k.MinBlocks = c[6];
    k.SplitBoxes = split;
    const int voxels = k.Tile[0] * k.Tile[1] * k.Tile[2] * k.Tile[3];
    if (k.SharedBytes() > static_cast<std::size_t>(limits.SharedPerBlockOptIn) || k.Threads() > 1024 ||
        voxels % k.Threads() != 0)
    {
      continue;
    }
    const double cost = forced ? 0.0 : EstimateCost(k, limits.SharedPerMultiprocessor);
    if (o.ListConfigurations)
    {
      std::cout << "configuration " << k.Describe() << ": estimated cost " << cost << std::endl;
    }
    if (cost < bestCost)
    {
      bestCost = cost;
      best = k;
    }
  }
  return best;
}

/** The tiled configuration of least estimated cost, with the weights in one box spanning the tile
 * and the tile shifted by -t or in two boxes of the tile's extent, whose shared memory does not grow
 * with the distance (CUDANONLOCALMEANS_SPLIT_BOXES=0 or 1: only the one or the other). The estimate
 * ranks the two as measured on an H100 in all 17 cases of BENCHMARKS.md ("Split boxes by cost"):
 * split boxes where the spanning box forces small tiles (4D from distance 2, 3D patch 3 /
 * distance 11), the spanning box elsewhere. Where no spanning box fits and the caller has another
 * kernel (`fits` given), `*fits` is false; where nothing fits, an exception names the fix. */
KernelConfig
ChooseTiledShape(const Problem &         p,
                 const KernelConfig &    base,
                 const DeviceLimits &    limits,
                 const Overrides &       o,
                 const PlanningAborted & aborted,
                 bool *                  fits)
{
  double       bestCost = std::numeric_limits<double>::infinity();
  KernelConfig best = base;
  if (!o.SplitBoxesForced)
  {
    best = CheapestTiledShape(base, limits, o, aborted, false, bestCost);
  }
  // Split boxes against the spanning box, or where none fits and the caller has no other kernel.
  const bool spanningFits = std::isfinite(bestCost);
  if (!o.SplitBoxesOff && (spanningFits || fits == nullptr || o.SplitBoxesForced))
  {
    double             splitCost = std::numeric_limits<double>::infinity();
    const KernelConfig split = CheapestTiledShape(base, limits, o, aborted, true, splitCost);
    if (splitCost < bestCost)
    {
      bestCost = splitCost;
      best = split;
    }
  }
  if (!std::isfinite(bestCost) && fits != nullptr)
  {
    *fits = false; // the caller has another kernel
    return base;
  }
  if (!std::isfinite(bestCost))
  {
    const bool bySize = !o.SplitBoxesOff; // the split boxes do not grow with the distance
    itkGenericExceptionMacro("PatchSize " << p.PatchSize << " with PatchDistance " << p.PatchDistance
                                          << (base.IsAnisotropic() ? " (the largest of the per-axis radii' sizes)" : "")
                                          << " needs more shared memory per block than this GPU offers ("
                                          << limits.SharedPerBlockOptIn << " bytes) in " << p.Dimension
                                          << "D; use a smaller " << (bySize ? "PatchSize" : "PatchDistance")
                                          << " or the CPU backend.");
  }
  return best;
}

/** Device bytes of the buffered-weights kernel's buffers for a slab `planes` output planes thick:
 * the weights of a batch (2 slots per shift pair, 4 bytes per weight) and the accumulators (W and
 * R_k per output voxel); 0 for the other kernels. */
void
BufferedWeightsBuffers(const Problem &      p,
                       const KernelConfig & c,
                       int                  A,
                       long long            planes,
                       double &             weightBytes,
                       double &             accumulatorBytes)
{
  weightBytes = 0.0;
  accumulatorBytes = 0.0;
  if (c.WeightBatch == 0)
  {
    return;
  }
  double slot = 1.0, voxels = 1.0;
  for (int a = 0; a <= A; ++a)
  {
    const double extent =
      static_cast<double>((a == A) ? std::min<long long>(planes, p.OutputSize[a]) : p.OutputSize[a]);
    slot *= extent + 2.0 * c.PatchDistance;
    voxels *= extent;
  }
  const double realBytes = c.SinglePrecision ? sizeof(float) : sizeof(double);
  weightBytes = 2.0 * c.WeightBatch * slot * 4.0;
  accumulatorBytes = (c.Components + 1) * voxels * realBytes;
}

/** The output's extent per axis rounded up to whole tiles (1 for unused axes). */
void
TileSpans(const Problem & p, const KernelConfig & c, long long (&tileSpan)[4])
{
  for (int a = 0; a < 4; ++a)
  {
    tileSpan[a] = (a < static_cast<int>(p.Dimension)) ? (p.OutputSize[a] + c.Tile[a] - 1) / c.Tile[a] * c.Tile[a] : 1;
  }
}

/** Device bytes of a slab `planes` output planes thick: padded input, uploaded input, output, and
 * the buffered-weights kernel's buffers. */
std::uint64_t
SlabBytes(const Problem & p, const KernelConfig & c, const long long (&tileSpan)[4], int A, long long planes)
{
  const int       E = c.Margin(A);
  const long long rounded = (planes + c.Tile[A] - 1) / c.Tile[A] * c.Tile[A];
  double          padded = static_cast<double>(rounded + 2 * E);
  double          input = static_cast<double>(std::min<long long>(p.InputSize[A], rounded + 2 * E));
  double          output = static_cast<double>(planes);
  for (int a = 0; a < A; ++a)
  {
    padded *= static_cast<double>(tileSpan[a] + 2 * c.Margin(a));
    input *= static_cast<double>(p.InputSize[a]);
    output *= static_cast<double>(p.OutputSize[a]);
  }
  const double realBytes = c.SinglePrecision ? sizeof(float) : sizeof(double);
  double       weights = 0.0, accumulators = 0.0;
  BufferedWeightsBuffers(p, c, A, planes, weights, accumulators);
  return static_cast<std::uint64_t>(padded * (c.Components + (c.NoiseMap ? 1 : 0)) * realBytes +
                                    input * c.Components * ElementBytes(p.InputType) +
                                    output * c.Components * ElementBytes(p.OutputType) + weights + accumulators);
}

/** Whether offsets inside one block's footprint need 64-bit indices. */
bool
NeedsWideIndex(const KernelConfig & c, const LaunchPlan & plan, int n)
{
  double span = 0.0, stride = 1.0;
  for (int a = 0; a < n; ++a)
  {
    const int       E = c.Margin(a);
    const long long extent =
      (a == plan.OuterAxis ? std::min(plan.SlabPlanes, plan.TileSpan[a]) : plan.TileSpan[a]) + 2 * E;
    span += (c.Tile[a] + 2.0 * E) * stride;
    stride *= static_cast<double>(extent);
  }
  return span * c.Components > NarrowIndexLimit;
}

/** The input planes along axis A that slab [first, end) reads: the reflections of
 * [first - E, end + E) about the image, as image indices [lo, hi). */
void
InputPlanesOfSlab(const Problem & p, int A, int E, long long first, long long end, long long & lo, long long & hi)
{
  lo = std::numeric_limits<long long>::max();
  hi = std::numeric_limits<long long>::min();
  for (long long g = p.OutputStart[A] + first - E; g < p.OutputStart[A] + end + E; ++g)
  {
    const long long r = ReflectIndex(g, p.ImageSize[A]);
    lo = std::min(lo, r);
    hi = std::max(hi, r + 1);
  }
}

void
SetPadParameters(const Problem & p, const LaunchPlan & plan, SlabPlan & s, const long long (&padSize)[4])
{
  const int n = static_cast<int>(p.Dimension);
  const int A = plan.OuterAxis;
  for (int a = 0; a < 4; ++a)
  {
    const int       E = (a < n) ? plan.Config.Margin(a) : 0;
    const bool      used = a < n;
    const long long origin = used ? p.OutputStart[a] + ((a == A) ? s.First : 0) : 0;
    s.Pad.padStart[a] = used ? origin - E : 0;
    s.Pad.padSize[a] = padSize[a];
    s.Pad.imageSize[a] = used ? p.ImageSize[a] : 1;
    s.Pad.inStart[a] = (a == A) ? s.InputFirst : (used ? p.InputStart[a] : 0);
    s.Pad.inSize[a] = (a == A) ? s.InputEnd - s.InputFirst : (used ? p.InputSize[a] : 1);
    // Cells beyond the output region plus E (tile rounding) only feed discarded voxels: clamp
    // them so that every read stays inside the uploaded input.
    s.Pad.clampLo[a] = used ? origin - E : 0;
    s.Pad.clampHi[a] = used ? origin + ((a == A) ? s.End - s.First : p.OutputSize[a]) + E - 1 : 0;
  }
  s.InputPlanesNeeded.resize(static_cast<std::size_t>(padSize[A]));
  for (long long j = 0, most = 0; j < padSize[A]; ++j)
  {
    const long long c = std::min(std::max(s.Pad.padStart[A] + j, s.Pad.clampLo[A]), s.Pad.clampHi[A]);
    most = std::max(most, ReflectIndex(c, s.Pad.imageSize[A]) - s.InputFirst + 1);
    s.InputPlanesNeeded[static_cast<std::size_t>(j)] = most;
  }
}

void
SetFastParameters(const Problem & p, const LaunchPlan & plan, SlabPlan & s, const long long (&padSize)[4])
{
  const int       n = static_cast<int>(p.Dimension);
  const int       A = plan.OuterAxis;
  const auto &    c = plan.Config;
  const long long span = (s.End - s.First + c.Tile[A] - 1) / c.Tile[A] * c.Tile[A];
  for (int a = 0; a < 4; ++a)
  {
    s.Fast.ySize[a] = padSize[a];
    s.Fast.outSize[a] = (a < n) ? ((a == A) ? s.End - s.First : p.OutputSize[a]) : 1;
    s.Fast.tiles[a] = (a < n) ? ((a == A) ? span : plan.TileSpan[a]) / c.Tile[a] : 1;
  }
  const double norm = NonLocalMeansBackend::Normalization(p);
  s.Fast.tileOffset = 0;
  s.Fast.norm = norm;
  s.Fast.invNorm = 1.0 / norm;
  s.Fast.noise = static_cast<double>(p.Components) * (2.0 * (p.Sigma * p.Sigma));
  s.Fast.bias = 2.0 * (p.Sigma * p.Sigma);
  s.Fast.noiseMap = 0;      // set by the slab pipeline
  s.Fast.activeTiles = 0;   // set by the slab pipeline
  s.Fast.classicKernel = 0; // set by the slab pipeline
  s.Fast.weights = 0;       // set by the slab pipeline
  s.Fast.accumulators = 0;  // set by the slab pipeline
  for (int a = 0; a < 3; ++a)
  {
    // The weights pass covers the output region and its shifts by -t (PD at most along each axis).
    s.Fast.weightSize[a] = s.Fast.outSize[a] + 2 * c.PatchDistance;
    s.Fast.weightTiles[a] = (s.Fast.outSize[a] + c.PatchDistance + c.Tile[a] - 1) / c.Tile[a];
  }
  s.Fast.firstPair = 0; // set per batch (SetChunks, the slab pipeline)
  s.Fast.pairs = 0;
  s.Fast.firstBatch = 0;
  s.Fast.lastBatch = 0;
  for (int a = 0; a < 4; ++a)
  {
    s.Fast.outStart[a] = (a < n) ? p.OutputStart[a] + ((a == A) ? s.First : 0) : 0;
    s.Fast.imageSize[a] = (a < n) ? p.ImageSize[a] : 1;
  }
}

/** The buffered-weights kernel's launches: a chunk per batch of shift pairs, FirstTile its first
 * pair and Tiles its share of the slab's tiles (for progress); each reads the whole padded input
 * and only the last completes output planes (all of them). They add to the same accumulators, so
 * all of them run on the kernel stream, in order. */
void
SetBatches(const LaunchPlan & plan, SlabPlan & s, long long tiles)
{
  const auto &    c = plan.Config;
  const long long pairs = ShiftPairCount(c.PatchDistance);
  const long long batches = (pairs + c.WeightBatch - 1) / c.WeightBatch;
  for (long long b = 0; b < batches; ++b)
  {
    const bool last = b + 1 == batches;
    s.Chunks.push_back({ b * c.WeightBatch,
                         tiles * (b + 1) / batches - tiles * b / batches,
                         s.Fast.ySize[plan.OuterAxis],
                         last ? s.End - s.First : 0 });
  }
}

void
SetChunks(const LaunchPlan & plan, SlabPlan & s, long long residentBlocks, const Overrides & o)
{
  const int  A = plan.OuterAxis;
  const auto tileA = plan.Config.Tile[A];
  const int  E = plan.Config.Margin(A);
  long long  tiles = 1, tilesPerLayer = 1;
  for (int a = 0; a < 4; ++a)
  {
    tiles *= s.Fast.tiles[a];
    tilesPerLayer *= (a < A) ? s.Fast.tiles[a] : 1;
  }
  // Launches of at least four waves of resident blocks, and at most about 40 in the whole Run
  // (progress, abort, and overlap of padding and download with the kernel).
  long long chunk = std::max<long long>(4 * residentBlocks, (plan.TotalTiles + 39) / 40);
  if (o.ChunkTiles > 0)
  {
    chunk = o.ChunkTiles;
  }
  if (plan.Config.WeightBatch > 0)
  {
    SetBatches(plan, s, tiles);
    return;
  }
  // The chunks write disjoint tiles: they alternate between two streams, so that the blocks of one
  // start as the last blocks of the one before finish (on one stream the multiprocessors would
  // wait for the slowest block of every chunk).
  const int       streams = (o.KernelStreams == 1) ? 1 : 2;
  const long long padded = s.Fast.ySize[A];
  for (long long first = 0; first < tiles; first += chunk)
  {
    const long long count = std::min(chunk, tiles - first);
    const long long lastLayer = (first + count - 1) / tilesPerLayer;
    s.Chunks.push_back({ first,
                         count,
                         std::min(padded, (lastLayer + 1) * tileA + 2 * E),
                         std::min(s.End - s.First, (first + count) / tilesPerLayer * tileA),
                         static_cast<int>(s.Chunks.size() % streams) });
  }
}
} // namespace

std::size_t
ElementBytes(NonLocalMeansBackend::ElementType type)
{
  return type == NonLocalMeansBackend::ElementType::Float32 ? sizeof(float) : sizeof(double);
}

bool
CorrectedWeightsServe(const Problem & problem)
{
  // A patch distance is at least -NoiseOverPatch (every term is a square minus the noise term; the
  // backend's VerifyProblem keeps that finite). Doubled for the rounding of the sums and divided by
  // the norm, it bounds -raw / norm: where it is finite, no raw is -infinity and no negative
  // quotient overflows, which M(raw, 0) would take to distance 0 and the corrected quotient to NaN.
  const double norm = NonLocalMeansBackend::Normalization(problem);
  const double lowest = 2.0 * NonLocalMeansBackend::NoiseOverPatch(problem);
  return CorrectedQuotientFits(norm) && std::isfinite(lowest / norm);
}

/** The warp instructions of the kernel's passes over every shift's boxes, divided by the issue rate
 * the configuration's occupancy allows (measured on an H200). Registers per thread are estimated
 * from the voxels each thread accumulates (measured with ptxas: about 64 + 12 per voxel and
 * component pair). */
double
EstimateCost(const KernelConfig & c, int sharedPerSM)
{
  const int  n = c.Dimension;
  const int  d = c.PatchDistance; // the largest along the axes, for the estimate
  const int  K = c.Components;
  const int  win = c.PatchSize - 1;
  const int  ext = (win > 0) ? win - 1 : 0;
  const int  ext0 = (c.PatchSizeAlong(0) > 1) ? c.PatchSizeAlong(0) - 2 : 0; // the kernel's warp rows
  const bool rows =
    win > 0 && c.Tile[0] + (c.SplitBoxes ? 0 : c.PatchDistanceAlong(0)) + ext0 <= 32 && c.Threads() % 32 == 0;
  const double boxes = c.SplitBoxes ? 2.0 : 1.0; // weight boxes per shift, each of the tile's extent when 2
  const double voxels = static_cast<double>(c.Tile[0]) * c.Tile[1] * c.Tile[2] * c.Tile[3];
  const double vpt = voxels / c.Threads();
  // The cost of a shift depends only on |t| per axis: sum over |t_a| in [0, d] with the number of
  // shifts of the same magnitudes (2 for |t_a| > 0 on every axis but axis 0, whose shifts run over
  // [0, d] only, FirstShift), so planning costs (d + 1)^n terms instead of the shift count.
  double total = 0.0;
  double shifts = 0.0;
  int    hi[4] = { 0, 0, 0, 0 };
  for (int a = 0; a < n; ++a)
  {
    hi[a] = c.SplitBoxes ? 0 : d; // split boxes: every shift costs the same
  }
  auto multiplicity = [d](int axis, int magnitude) {
    return (magnitude > 0 && FirstShift(axis, d) < 0) ? 2.0 : 1.0; // +t and -t both visited
  };
  for (int t3 = 0; t3 <= hi[3]; ++t3)
    for (int t2 = 0; t2 <= hi[2]; ++t2)
      for (int t1 = 0; t1 <= hi[1]; ++t1)
        for (int t0 = 0; t0 <= hi[0]; ++t0)
        {
          const int    t[4] = { t0, t1, t2, t3 };
          const double count = multiplicity(1, t1) * multiplicity(2, t2) * multiplicity(3, t3);
          double       w[4], e[4];
          for (int a = 0; a < 4; ++a)
          {
            w[a] = (a < n) ? c.Tile[a] + (c.SplitBoxes ? 0 : t[a]) : 1;
            e[a] = (a < n && a > 0) ? w[a] + ext : w[a];
          }
          double instructions = voxels / 32.0 * (8.0 + 6.0 * K); // gather
          if (win > 0)
          {
            double       box = 0.0; // one box's passes
            const double rowsA = e[1] * e[2] * e[3];
            box +=
              rows ? rowsA * (18.0 + 3.0 * K + 2.0 * (win - 1)) : rowsA * w[0] / 32.0 * (24.0 + win * (10.0 + 3.0 * K));
            const double segments = (n == 3) ? c.ZSegments : 1;
            const double columns = w[0] * w[1] * ((n > 3) ? w[2] : 1.0);
            const double steps = (n == 3) ? e[2] + (segments - 1) * ext : ((n > 3) ? e[3] : 1.0);
            box += std::ceil(columns * segments / c.Threads()) * c.Threads() / 32.0 * steps / segments *
                   (8.0 + 2.0 * win);                               // pass B, whole rounds of the block
            box += w[0] * w[1] * w[2] * w[3] / 32.0 * 22.0;         // weights
            box += (c.Threads() / 32.0) * 20.0 * ((n > 3) ? 3 : 2); // barriers
            instructions += boxes * box;
          }
          total += count * instructions;
          shifts += count;
        }
  // Registers: what the kernel needs against what __launch_bounds__ leaves for MinBlocks resident
  // blocks; a shortfall spills, which costs in proportion.
  const double needed = 64.0 + 12.0 * vpt * (K + 1) / 2.0;
  const int    threads = c.Threads();
  const double budget =
    std::min(255.0, std::floor(static_cast<double>(Registers) / (threads * c.MinBlocks) / 8.0) * 8.0);
  const int byShared = c.SharedBytes() ? sharedPerSM / static_cast<int>(c.SharedBytes() + SharedReservedPerBlock)
                                       : MostBlocksPerMultiprocessor;
  const int blocks = std::min(c.MinBlocks, std::min(byShared, ResidentThreads / threads));
  if (blocks < c.MinBlocks || budget < 48.0 || needed > 1.8 * budget)
  {
    return std::numeric_limits<double>::infinity();
  }
  const double spill = (needed > budget) ? 1.0 + 0.25 * (needed / budget - 1.0) : 1.0;
  const double issueRate = std::min(MostIssuePerCycle, IssuePerResidentWarp * blocks * threads / 32.0) / spill;
  return total / shifts / voxels / issueRate;
}

KernelConfig
ChooseConfiguration(const Problem &         p,
                    const DeviceLimits &    limits,
                    const Overrides &       o,
                    const PlanningAborted & aborted)
{
  const KernelConfig base = BaseConfiguration(p);
  if (!p.FastMode)
  {
    return ClassicConfiguration(base);
  }
  const KernelConfig rows = SharedRowsConfiguration(base, o);
  const bool         rowsUsable =
    SharedRowsKernelServes(p, base, o) && rows.SharedBytes() <= static_cast<std::size_t>(limits.SharedPerBlockOptIn);
  if (rowsUsable && !o.SharedRowsShape.empty())
  {
    return rows; // forced
  }
  const KernelConfig buffered = BufferedWeightsConfiguration(base, limits, o);
  if (BufferedWeightsServe(p, base, o) && BufferedWeightsPreferred(base, o) &&
      buffered.SharedBytes() <= static_cast<std::size_t>(limits.SharedPerBlockOptIn))
  {
    return buffered;
  }
  if (IsSinglePrecisionPatch5(p, base, o))
  {
    bool               found = false;
    const KernelConfig chosen = SinglePrecisionPatch5Kernel(p, base, limits, o, rowsUsable ? &rows : nullptr, found);
    if (found)
    {
      return chosen;
    }
  }
  if (rowsUsable && SharedRowsKernelPreferred(base))
  {
    return rows;
  }
  if (ColumnKernelApplies(p, base, o))
  {
    bool               found = false;
    const KernelConfig columns = ChooseColumnShape(p, base, limits, o, found);
    if (found)
    {
      return columns;
    }
  }
  bool               tiledFits = true;
  const KernelConfig tiled = ChooseTiledShape(p, base, limits, o, aborted, rowsUsable ? &tiledFits : nullptr);
  return tiledFits ? tiled : rows; // where no tiled configuration fits the device
}

std::uint64_t
MemoryBudget(const Problem & p, const DeviceLimits & limits)
{
  std::uint64_t budget = static_cast<std::uint64_t>(DefaultMemoryShare * static_cast<double>(limits.FreeMemory));
  if (p.MaximumGPUMemory > 0)
  {
    budget = std::min<std::uint64_t>(budget, p.MaximumGPUMemory);
  }
  return budget;
}

bool
ThinnestSlabFits(const Problem & p, const KernelConfig & config, const DeviceLimits & limits)
{
  const int A = static_cast<int>(p.Dimension) - 1;
  long long tileSpan[4];
  TileSpans(p, config, tileSpan);
  return SlabBytes(p, config, tileSpan, A, config.Tile[A]) <= MemoryBudget(p, limits);
}

KernelConfig
ConfigurationThatFits(const Problem &                                        p,
                      const DeviceLimits &                                   limits,
                      const Overrides &                                      overrides,
                      const std::function<KernelConfig(const Overrides &)> & choose)
{
  const KernelConfig chosen = choose(overrides);
  if (chosen.WeightBatch == 0 || ThinnestSlabFits(p, chosen, limits))
  {
    return chosen;
  }
  KernelConfig thinner = chosen; // blocks of fewer planes, unless the shape is forced
  const int    A = static_cast<int>(p.Dimension) - 1;
  while (overrides.BufferedWeightsShape.empty() && thinner.Tile[A] / 2 >= ThinnestBufferedWeightPlanes)
  {
    thinner.Tile[A] /= 2;
    if (ThinnestSlabFits(p, thinner, limits))
    {
      return thinner;
    }
  }
  Overrides without = overrides;
  without.BufferedWeightsOff = true;
  without.BufferedWeightsForced = false;
  without.BufferedWeightsShape.clear();
  return choose(without);
}

LaunchPlan
PlanSlabs(const Problem & p, const KernelConfig & config, const DeviceLimits & limits, long long minimumSlabs)
{
  LaunchPlan plan;
  plan.Config = config;
  const int n = static_cast<int>(p.Dimension);
  const int A = n - 1;
  plan.OuterAxis = A;
  plan.TotalTiles = OutputTiles(p, config.Tile);
  TileSpans(p, config, plan.TileSpan);
  plan.MemoryBudget = MemoryBudget(p, limits);
  // The thickest slab (whole tiles along A) that fits the budget, halving from the whole output.
  const long long tileA = config.Tile[A];
  const long long layers = plan.TileSpan[A] / tileA;
  long long       slab = (layers + std::max(1LL, minimumSlabs) - 1) / std::max(1LL, minimumSlabs) * tileA;
  if (config.WeightBatch > 0)
  {
    // The buffered-weights gather's grid: one plane per block along axis 2.
    slab = std::min(slab, MostGridBlocksYZ / tileA * tileA);
  }
  while (slab > tileA && SlabBytes(p, config, plan.TileSpan, A, slab) > plan.MemoryBudget)
  {
    slab = std::max<long long>(tileA, (slab / 2 + tileA - 1) / tileA * tileA);
  }
  plan.SlabPlanes = slab;
  plan.DeviceBytes = SlabBytes(p, config, plan.TileSpan, A, slab);
  if (plan.DeviceBytes > plan.MemoryBudget)
  {
    itkGenericExceptionMacro("The GPU memory budget ("
                             << plan.MemoryBudget / (1024.0 * 1024.0) << " MiB) is too small even for a slab " << slab
                             << " planes thick, which needs " << plan.DeviceBytes / (1024.0 * 1024.0)
                             << " MiB. Raise MaximumGPUMemory or free GPU memory.");
  }
  plan.Slabs = (p.OutputSize[A] + slab - 1) / slab;
  plan.Config.WideIndex = NeedsWideIndex(config, plan, n);
  return plan;
}

SlabPlan
PlanSlab(const Problem & p, const LaunchPlan & plan, long long index, long long residentBlocks, const Overrides & o)
{
  const int    n = static_cast<int>(p.Dimension);
  const int    A = plan.OuterAxis;
  const auto   K = static_cast<std::size_t>(p.Components);
  const auto & c = plan.Config;
  const int    E = c.Margin(A);
  SlabPlan     s;
  s.First = index * plan.SlabPlanes;
  s.End = std::min<long long>(p.OutputSize[A], s.First + plan.SlabPlanes);
  InputPlanesOfSlab(p, A, E, s.First, s.End, s.InputFirst, s.InputEnd);
  if (s.InputFirst < p.InputStart[A] || s.InputEnd > p.InputStart[A] + p.InputSize[A])
  {
    itkGenericExceptionMacro("The input buffer does not cover the region the output needs (planes "
                             << s.InputFirst << " to " << s.InputEnd - 1 << " of axis " << A << ").");
  }
  const long long span = (s.End - s.First + c.Tile[A] - 1) / c.Tile[A] * c.Tile[A];
  long long       padSize[4] = { 1, 1, 1, 1 };
  std::size_t     inPlane = K, outPlane = K, padCells = K;
  for (int a = 0; a < n; ++a)
  {
    padSize[a] = ((a == A) ? span : plan.TileSpan[a]) + 2 * c.Margin(a);
    padCells *= static_cast<std::size_t>(padSize[a]);
    if (a < A)
    {
      inPlane *= static_cast<std::size_t>(p.InputSize[a]);
      outPlane *= static_cast<std::size_t>(p.OutputSize[a]);
    }
  }
  s.InputPlaneBytes = inPlane * ElementBytes(p.InputType);
  s.InputBytes = s.InputPlaneBytes * static_cast<std::size_t>(s.InputEnd - s.InputFirst);
  s.PaddedPlaneCells = padCells / static_cast<std::size_t>(padSize[A]);
  s.PaddedBytes = padCells * (c.SinglePrecision ? sizeof(float) : sizeof(double));
  s.OutputPlaneBytes = outPlane * ElementBytes(p.OutputType);
  s.OutputBytes = s.OutputPlaneBytes * static_cast<std::size_t>(s.End - s.First);
  double weights = 0.0, accumulators = 0.0;
  BufferedWeightsBuffers(p, c, A, s.End - s.First, weights, accumulators);
  s.WeightBytes = static_cast<std::size_t>(weights);
  s.AccumulatorBytes = static_cast<std::size_t>(accumulators);
  SetPadParameters(p, plan, s, padSize);
  SetFastParameters(p, plan, s, padSize);
  SetChunks(plan, s, residentBlocks, o);
  return s;
}

int
ResidentBlocksPerMultiprocessor(const KernelConfig & config, int registers, const DeviceLimits & limits)
{
  const int shared = static_cast<int>(config.SharedBytes());
  const int threads = config.Threads();
  const int byShared = std::max(1, limits.SharedPerMultiprocessor / std::max(1, shared + SharedReservedPerBlock));
  const int byThreads = std::max(1, ResidentThreads / threads);
  const int byRegisters = std::max(1, Registers / std::max(1, registers * threads));
  return std::min(std::min(byShared, byThreads), std::min(byRegisters, MostBlocksPerMultiprocessor));
}

} // namespace nlm
} // namespace itk
