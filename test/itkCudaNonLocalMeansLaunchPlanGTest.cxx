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

// The CUDA backend's launch planner, without a GPU: on the limits of real devices (sm_61 to
// sm_90, small and large memory), the configuration fits the device or the refusal names the
// fix, the slabs cover the output once within the memory budget, the launch chunks cover every
// tile once, the padding reads only uploaded planes, and the index width follows the footprint.

#include "itkNonLocalMeansLaunchPlan.h"
#include "itkGTest.h"

#include <algorithm>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace
{
using itk::NonLocalMeansBackend;
using itk::nlm::DeviceLimits;
using itk::nlm::KernelConfig;
using itk::nlm::LaunchPlan;
using itk::nlm::Overrides;
using itk::nlm::SlabPlan;
using Problem = NonLocalMeansBackend::Problem;

struct NamedDevice
{
  const char * Name;
  DeviceLimits Limits;
};

/** Limits as the driver reports them: architecture, SMs, shared memory per block (default and
 * opt-in) and per SM, free memory. */
std::vector<NamedDevice>
RealDevices()
{
  constexpr std::uint64_t GiB = std::uint64_t{ 1 } << 30;
  return { { "GTX 1080 Ti (sm_61, 2 GiB free)", { 61, 28, 49152, 49152, 98304, 2 * GiB } },
           { "T4 (sm_75)", { 75, 40, 49152, 65536, 65536, 15 * GiB } },
           { "A100 (sm_80)", { 80, 108, 49152, 166912, 167936, 79 * GiB } },
           { "RTX 3090 (sm_86)", { 86, 82, 49152, 101376, 102400, 23 * GiB } },
           { "H200 (sm_90)", { 90, 132, 49152, 232448, 233472, 140 * GiB } } };
}

Problem
MakeProblem(unsigned int                        dimension,
            std::initializer_list<std::int64_t> size,
            int                                 patch,
            int                                 distance,
            unsigned int                        k = 1)
{
  Problem p;
  p.Dimension = dimension;
  p.Components = k;
  unsigned int a = 0;
  for (const std::int64_t s : size)
  {
    p.ImageSize[a] = p.InputSize[a] = p.OutputSize[a] = s;
    ++a;
  }
  p.PatchSize = patch;
  p.PatchDistance = distance;
  p.H = 0.1;
  return p;
}

/** Slabs of a plan, with `residentBlocks` blocks per wave. */
std::vector<SlabPlan>
AllSlabs(const Problem & p, const LaunchPlan & plan, long long residentBlocks = 264)
{
  std::vector<SlabPlan> slabs;
  for (long long i = 0; i < plan.Slabs; ++i)
  {
    slabs.push_back(itk::nlm::PlanSlab(p, plan, i, residentBlocks, Overrides{}));
  }
  return slabs;
}

/** The claims every slab plan must keep. */
void
ExpectSlabsCoverTheOutputOnce(const Problem & p, const LaunchPlan & plan)
{
  const int  A = plan.OuterAxis;
  const auto slabs = AllSlabs(p, plan);
  ASSERT_EQ(static_cast<long long>(slabs.size()), plan.Slabs);
  long long next = 0, tiles = 0;
  for (const auto & s : slabs)
  {
    EXPECT_EQ(s.First, next);
    EXPECT_GT(s.End, s.First);
    next = s.End;
    // Input planes inside the buffer; the padding reads only uploaded planes, in order.
    EXPECT_GE(s.InputFirst, p.InputStart[A]);
    EXPECT_LE(s.InputEnd, p.InputStart[A] + p.InputSize[A]);
    ASSERT_EQ(static_cast<long long>(s.InputPlanesNeeded.size()), s.Fast.ySize[A]);
    EXPECT_TRUE(std::is_sorted(s.InputPlanesNeeded.begin(), s.InputPlanesNeeded.end()));
    EXPECT_LE(s.InputPlanesNeeded.back(), s.InputEnd - s.InputFirst);
    EXPECT_GE(s.InputPlanesNeeded.front(), 1);
    // Chunks: consecutive tiles, all of them once; each reads padded planes that exist; the last
    // completes the slab's output planes.
    long long slabTiles = 1;
    for (int a = 0; a < 4; ++a)
    {
      slabTiles *= s.Fast.tiles[a];
    }
    // They alternate between the two kernel streams (tiles are disjoint), but the buffered-weights
    // kernel's batches, which add to the same accumulators, take one stream in order.
    long long   nextTile = 0, done = 0;
    std::size_t index = 0;
    for (const auto & c : s.Chunks)
    {
      EXPECT_EQ(c.Stream, plan.Config.WeightBatch > 0 ? 0 : static_cast<int>(index++ % 2));
      EXPECT_EQ(c.FirstTile, nextTile);
      EXPECT_GT(c.Tiles, 0);
      nextTile += c.Tiles;
      EXPECT_LE(c.PaddedPlanesRead, s.Fast.ySize[A]);
      EXPECT_GE(c.OutputPlanesDone, done);
      done = c.OutputPlanesDone;
    }
    EXPECT_EQ(nextTile, slabTiles);
    EXPECT_EQ(done, s.End - s.First);
    tiles += slabTiles;
    EXPECT_LE(s.InputBytes + s.PaddedBytes + s.OutputBytes, plan.MemoryBudget);
  }
  EXPECT_EQ(next, p.OutputSize[A]);
  EXPECT_EQ(tiles, plan.TotalTiles);
}
} // namespace

TEST(NonLocalMeansLaunchPlan, ConfigurationFitsEveryRealDeviceOrTheRefusalNamesTheFix)
{
  int chosen = 0, refused = 0;
  for (const auto & device : RealDevices())
  {
    for (unsigned int n : { 2u, 3u, 4u })
    {
      for (int patch : { 1, 3, 5, 7, 9, 11 })
      {
        for (int distance : { 0, 1, 3, 5, 11 })
        {
          if (n == 4 && (distance > 3 || patch == 9))
          {
            continue; // the cost model's shift loop makes these slow to plan (issue 11)
          }
          for (unsigned int k : { 1u, 3u })
          {
            const Problem p = MakeProblem(n, { 40, 30, 20, 10 }, patch, distance, k);
            try
            {
              const KernelConfig c = itk::nlm::ChooseConfiguration(p, device.Limits, Overrides{});
              ++chosen;
              EXPECT_LE(c.SharedBytes(), static_cast<std::size_t>(device.Limits.SharedPerBlockOptIn)) << device.Name;
              EXPECT_LE(c.Threads(), 1024);
              EXPECT_LE(c.Threads() * c.MinBlocks, 2048);
              EXPECT_EQ(c.PatchSize, NonLocalMeansBackend::EffectivePatchSize(patch));
              if (c.SharedRows)
              {
                EXPECT_EQ(n, 3u) << "the shared-rows kernel is 3D only";
                EXPECT_GE(c.PatchSize, 5) << "the shared-rows kernel serves patches from 5 on unless forced";
                EXPECT_EQ(c.Tile[0], 32 - (c.PatchSize - 2));
                EXPECT_EQ(c.Threads(), 32 * c.Tile[1]);
              }
              else if (c.Rows > 0)
              {
                EXPECT_TRUE(n == 2 || n == 3) << "the column kernel is 2D and 3D only";
                EXPECT_TRUE(n == 2 ? c.PatchSize <= 11 : (c.PatchSize == 3 || (c.PatchSize == 5 && distance >= 8)))
                  << "the column kernel serves patches 3 to 11 in 2D, and in 3D patch 3, and patch 5 at large "
                     "distances, unless its shape is forced";
                EXPECT_TRUE(n == 3 || c.Tile[2] == 1) << c.Describe();
                EXPECT_TRUE(c.GlobalFootprint || c.SharedBytes() > 0) << c.Describe();
              }
              else
              {
                EXPECT_EQ(c.Tile[0] * c.Tile[1] * c.Tile[2] * c.Tile[3] % c.Threads(), 0) << c.Describe();
              }
            }
            catch (const itk::ExceptionObject & e)
            {
              ++refused;
              const std::string message = e.GetDescription();
              EXPECT_NE(message.find("use a smaller PatchSize or the CPU backend"), std::string::npos) << message;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(chosen, 0);
  std::cout << chosen << " configurations chosen, " << refused << " refused" << std::endl;
}

TEST(NonLocalMeansLaunchPlan, SplitBoxesServeWhereNoSpanningBoxFitsOrWhereCheaper)
{
  // The tiled kernel's box spanning the tile and the tile shifted by -t grows with the distance; in
  // 4D (and in 3D with a noise map, which the other 3D kernels do not take) it soon fits no device.
  // Two boxes of the tile's extent fit at any distance: every such problem plans, on every device.
  // Where both fit, the planner takes the one of lower estimated cost.
  Overrides spanningOnly;
  spanningOnly.SplitBoxesOff = true;
  Overrides splitOnly;
  splitOnly.SplitBoxesForced = true;
  int spanningKept = 0;
  int split = 0;
  for (const auto & device : RealDevices())
  {
    for (int patch : { 3, 5, 7, 9 })
    {
      for (int distance : { 1, 2, 3, 5, 7, 11 })
      {
        Problem             map3D = MakeProblem(3, { 40, 30, 20 }, patch, distance + 10);
        static const double sigma = 0.1;
        map3D.NoiseSigma = &sigma;
        for (const Problem & p : { MakeProblem(4, { 40, 30, 20, 10 }, patch, distance), map3D })
        {
          const std::string what = std::string(device.Name) + " " + std::to_string(p.Dimension) + "D p" +
                                   std::to_string(patch) + " d" + std::to_string(p.PatchDistance);
          KernelConfig c;
          try
          {
            c = itk::nlm::ChooseConfiguration(p, device.Limits, Overrides{});
          }
          catch (const itk::ExceptionObject & e)
          {
            // Only a patch too large for the device's smallest boxes: then at any distance.
            EXPECT_NE(std::string(e.GetDescription()).find("use a smaller PatchSize or the CPU backend"),
                      std::string::npos)
              << what;
            Problem nearest = p;
            nearest.PatchDistance = 0;
            EXPECT_THROW(itk::nlm::ChooseConfiguration(nearest, device.Limits, Overrides{}), itk::ExceptionObject)
              << what;
            EXPECT_LT(device.Limits.SharedPerBlockOptIn, 100000) << what << " (every such problem plans on an A100)";
            continue;
          }
          EXPECT_LE(c.SharedBytes(), static_cast<std::size_t>(device.Limits.SharedPerBlockOptIn)) << what;
          bool         spanningFits = true;
          KernelConfig spanning;
          try
          {
            spanning = itk::nlm::ChooseConfiguration(p, device.Limits, spanningOnly);
            EXPECT_FALSE(spanning.SplitBoxes) << what;
          }
          catch (const itk::ExceptionObject & e)
          {
            spanningFits = false;
            EXPECT_NE(std::string(e.GetDescription()).find("use a smaller PatchDistance or the CPU backend"),
                      std::string::npos)
              << what;
          }
          // Split boxes where no spanning box fits or where they cost less; theirs does not grow
          // with the distance.
          const KernelConfig splitBoxes = itk::nlm::ChooseConfiguration(p, device.Limits, splitOnly);
          EXPECT_TRUE(splitBoxes.SplitBoxes) << what;
          const int    sharedPerSM = device.Limits.SharedPerMultiprocessor;
          const double splitCost = itk::nlm::EstimateCost(splitBoxes, sharedPerSM);
          if (!spanningFits)
          {
            EXPECT_TRUE(c.SplitBoxes) << what << ": " << c.Describe();
          }
          else if (c.SplitBoxes)
          {
            EXPECT_LT(splitCost, itk::nlm::EstimateCost(spanning, sharedPerSM)) << what;
          }
          else
          {
            ++spanningKept;
            EXPECT_EQ(c.Describe(), spanning.Describe()) << what;
            EXPECT_LE(itk::nlm::EstimateCost(spanning, sharedPerSM), splitCost) << what;
          }
          if (c.SplitBoxes)
          {
            ++split;
            KernelConfig nearer = c;
            nearer.PatchDistance = 1;
            EXPECT_EQ(c.SharedBytes(), nearer.SharedBytes()) << what;
            EXPECT_NE(c.Describe().find("split boxes"), std::string::npos);
            EXPECT_NE(itk::nlm::EstimateCost(c, device.Limits.SharedPerMultiprocessor),
                      std::numeric_limits<double>::infinity());
          }
        }
      }
    }
  }
  EXPECT_GT(split, 0);
  EXPECT_GT(spanningKept, 0);
  // Where the spanning box forces small tiles (4D from distance 2) split boxes are chosen (1.4x to
  // 5.6x faster on an H100, whose limits are the H200's); at 4D distance 1, with the same tile either
  // way, the spanning box (BENCHMARKS.md, "Split boxes by cost").
  const DeviceLimits h200 = RealDevices().back().Limits;
  EXPECT_TRUE(itk::nlm::ChooseConfiguration(MakeProblem(4, { 40, 40, 40, 8 }, 5, 3), h200, Overrides{}).SplitBoxes);
  EXPECT_TRUE(itk::nlm::ChooseConfiguration(MakeProblem(4, { 40, 40, 40, 8 }, 3, 2), h200, Overrides{}).SplitBoxes);
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(4, { 40, 40, 40, 8 }, 3, 1), h200, Overrides{}).SplitBoxes);
  // In 4D the split boxes' cost does not depend on the distance, and neither does their tile: the
  // widest multiple of 8 whose row of patch terms fits a warp (1.04x to 1.37x faster on an H100
  // than the tiles that shrank with the distance: BENCHMARKS.md, "The split boxes' tiles").
  for (int patch : { 3, 5 })
  {
    const KernelConfig nearest =
      itk::nlm::ChooseConfiguration(MakeProblem(4, { 40, 40, 40, 8 }, patch, 2), h200, splitOnly);
    EXPECT_EQ(nearest.Tile[0], 24) << "patch " << patch << ": " << nearest.Describe();
    EXPECT_EQ(nearest.Threads(), 1024) << "patch " << patch << ": " << nearest.Describe();
    for (int distance : { 3, 5, 7, 9, 11 })
    {
      const KernelConfig c =
        itk::nlm::ChooseConfiguration(MakeProblem(4, { 40, 40, 40, 8 }, patch, distance), h200, splitOnly);
      for (int a = 0; a < 4; ++a)
      {
        EXPECT_EQ(c.Tile[a], nearest.Tile[a]) << "patch " << patch << " distance " << distance << ": " << c.Describe();
      }
      EXPECT_EQ(c.Threads(), nearest.Threads()) << c.Describe();
      EXPECT_EQ(c.MinBlocks, nearest.MinBlocks) << c.Describe();
    }
  }
  // Forced (CUDANONLOCALMEANS_SPLIT_BOXES=1) where the spanning box fits, and the kernel's macro.
  Overrides forced;
  forced.SplitBoxesForced = true;
  forced.ColumnKernelOff = true;
  const KernelConfig f = itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 5, 2), h200, forced);
  EXPECT_TRUE(f.SplitBoxes);
  const auto macros = f.Macros();
  EXPECT_NE(std::find(macros.begin(), macros.end(), "-DNLM_SPLIT_BOXES=1"), macros.end());
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 5, 2), h200, Overrides{}).SplitBoxes);
  // A patch whose split boxes do not fit either: the refusal names PatchSize.
  try
  {
    itk::nlm::ChooseConfiguration(MakeProblem(4, { 40, 30, 20, 10 }, 21, 1), RealDevices().front().Limits, Overrides{});
    ADD_FAILURE() << "4D patch 21 fits a GTX 1080 Ti's 48 KB";
  }
  catch (const itk::ExceptionObject & e)
  {
    EXPECT_NE(std::string(e.GetDescription()).find("use a smaller PatchSize or the CPU backend"), std::string::npos)
      << e.GetDescription();
  }
}

TEST(NonLocalMeansLaunchPlan, ColumnKernelServes2DAnd3DSmallPatchesUnlessSwitchedOff)
{
  const DeviceLimits h200 = RealDevices().back().Limits;
  const Problem      p = MakeProblem(3, { 64, 48, 40 }, 3, 3);
  EXPECT_GT(itk::nlm::ChooseConfiguration(p, h200, Overrides{}).Rows, 0);
  Overrides off;
  off.ColumnKernelOff = true;
  EXPECT_EQ(itk::nlm::ChooseConfiguration(p, h200, off).Rows, 0);
  // 2D: patches 3 to 9 at every distance, 11 from distance 2 on, one plane (a thread marches through
  // its rows); patch 13 on takes the tiled kernel; switched off like in 3D.
  for (int patch : { 3, 5, 7, 9, 11 })
  {
    for (int distance : { 1, 5, 11, 21 })
    {
      if (patch == 11 && distance < 2)
      {
        continue;
      }
      const KernelConfig c =
        itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, patch, distance), h200, Overrides{});
      EXPECT_GT(c.Rows, 0) << "2D patch " << patch << " distance " << distance;
      EXPECT_EQ(c.Tile[2], 1);
      EXPECT_EQ(c.Tile[1], c.Rows * c.Threads() / 32);
      EXPECT_EQ(c.Tile[0], 32 - (patch - 2));
    }
  }
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 3, 3), h200, Overrides{}).Rows, 4);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 5, 11), h200, Overrides{}).Rows, 16);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 7, 11), h200, Overrides{}).Rows, 16);
  // 16 rows from patch 5 on; from patch 9 on in 2 chunks of 8 (ColumnRowChunks), which compile
  // about as fast as 8 rows, with 4 warps and 3 blocks per SM; 8 rows with several channels.
  for (int patch : { 9, 11 })
  {
    const KernelConfig c = itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, patch, 11), h200, Overrides{});
    EXPECT_EQ(c.Rows, 16) << "patch " << patch;
    EXPECT_EQ(c.Threads(), 128) << "patch " << patch;
    EXPECT_EQ(c.MinBlocks, 3) << "patch " << patch;
    EXPECT_NE(c.Describe().find("columns of 16 row(s) in 2 chunks"), std::string::npos) << c.Describe();
  }
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 9, 11, 3), h200, Overrides{}).Rows, 8);
  // Patch 11 from distance 2 on, with one channel (at distance 1, and with 8 rows, the tiled kernel
  // is about as fast or faster).
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 11, 2), h200, Overrides{}).Rows, 16);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 11, 1), h200, Overrides{}).Rows, 0);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 11, 11, 3), h200, Overrides{}).Rows, 0);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 10, 2), h200, Overrides{}).Rows, 16)
    << "an even patch size is its odd successor's";
  EXPECT_EQ(itk::nlm::ColumnRowChunks(2, 7, 16), 1) << "patch 7: all 16 rows unrolled";
  EXPECT_EQ(itk::nlm::ColumnRowChunks(2, 9, 8), 1);
  EXPECT_EQ(itk::nlm::ColumnRowChunks(3, 9, 16), 1) << "3D takes no chunks";
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 7, 3, 3), h200, Overrides{}).Rows, 8)
    << "16 rows of 3 channels would be 64 accumulators";
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 13, 5), h200, Overrides{}).Rows, 0);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 3, 3), h200, off).Rows, 0);
  Overrides forced2D;
  forced2D.ColumnShape = { 8, 4, 4, 2 };
  const KernelConfig f = itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 11, 5), h200, forced2D);
  EXPECT_EQ(f.Rows, 8);
  EXPECT_EQ(f.Tile[1], 32);
  EXPECT_EQ(f.Tile[2], 1) << "a forced shape's planes are 1 in 2D";
  // Patch 5 takes the column kernel from distance 8 on where the shared-rows kernel is off.
  Overrides noRows, noBuffered;
  noRows.SharedRowsKernelOff = true;
  noRows.BufferedWeightsOff = true;
  noBuffered.BufferedWeightsOff = true;
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 5, 7), h200, noRows).Rows, 0);
  EXPECT_GT(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 5, 8), h200, noRows).Rows, 0);
  EXPECT_TRUE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 5, 8), h200, noBuffered).SharedRows)
    << "the shared-rows kernel comes first";
  EXPECT_GT(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 5, 8, 3), h200, Overrides{}).Rows, 0)
    << "several channels: the column kernel";
  // From patch 5 on (at small distances) the tiled kernel is chosen, unless a column shape is forced.
  Overrides forced;
  forced.ColumnShape = { 1, 4, 4, 1 };
  for (int patch : { 4, 5, 7, 11 })
  {
    const Problem q = MakeProblem(3, { 64, 48, 40 }, patch, 2);
    EXPECT_EQ(itk::nlm::ChooseConfiguration(q, h200, Overrides{}).Rows, 0) << "patch " << patch;
    EXPECT_EQ(itk::nlm::ChooseConfiguration(q, h200, forced).Rows, 1) << "patch " << patch;
  }
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 13, 2), h200, forced).Rows, 0)
    << "the column kernel takes patches up to 11";
}

TEST(NonLocalMeansLaunchPlan, TheTiledKernelServesWhereTheCorrectedQuotientDoesNot)
{
  // The column, shared-rows and buffered-weights kernels compute their float64 weights by the
  // corrected quotient, exact for norms in [2^-500, 2^500] (CorrectedQuotientFits); an h far
  // outside scikit-image's use (norm = K h^2 s^n below 2^-500) takes the tiled kernel, whose weights
  // are exact for every norm.
  const DeviceLimits h200 = RealDevices().back().Limits;
  for (const auto & shape : { std::pair<int, int>{ 3, 3 }, { 7, 5 }, { 11, 3 } })
  {
    Problem p = MakeProblem(3, { 64, 48, 40 }, shape.first, shape.second);
    EXPECT_TRUE(itk::nlm::CorrectedWeightsServe(p));
    const KernelConfig usual = itk::nlm::ChooseConfiguration(p, h200, Overrides{});
    EXPECT_TRUE(usual.Rows > 0 || usual.SharedRows || usual.WeightBatch > 0) << "patch " << shape.first;
    for (const double h : { 1e-80, 1e80 })
    {
      p.H = h;
      EXPECT_FALSE(itk::nlm::CorrectedWeightsServe(p)) << "h " << h;
      const KernelConfig c = itk::nlm::ChooseConfiguration(p, h200, Overrides{});
      EXPECT_TRUE(c.Rows == 0 && !c.SharedRows && c.WeightBatch == 0) << "patch " << shape.first << ", h " << h;
    }
    p.H = 1e-70; // norm about 2^-460
    EXPECT_TRUE(itk::nlm::CorrectedWeightsServe(p));
  }
  // A sigma whose noise term summed over a patch nearly overflows: no patch distance may reach
  // -infinity, where M(raw, 0) and the corrected quotient would part.
  Problem p = MakeProblem(3, { 64, 48, 40 }, 3, 3);
  p.Sigma = 1.5e153; // 2 sigma^2 * 27 = 1.2e308: a valid sigma (the backend checks that), but no margin
  EXPECT_FALSE(itk::nlm::CorrectedWeightsServe(p));
  p.Sigma = 1e150;
  EXPECT_TRUE(itk::nlm::CorrectedWeightsServe(p));
  // A valid sigma with a small h: every patch distance about -1.6e301, whose quotient by the norm
  // (2.7e-19) overflows to -infinity, which M(raw, 0) takes to distance 0.
  p.H = 1e-10;
  EXPECT_FALSE(itk::nlm::CorrectedWeightsServe(p));
  EXPECT_EQ(itk::nlm::ChooseConfiguration(p, h200, Overrides{}).Rows, 0);
}

TEST(NonLocalMeansLaunchPlan, TheTiledKernelTakesTheCorrectedQuotientWhereItServes)
{
  // The tiled kernel computes its float64 weights by the corrected quotient where the planner's
  // CorrectedWeightsServe holds and there is no noise map (NLM_CORRECTED_WEIGHTS), and by the
  // division-free nearest-integer form elsewhere. Single precision has one weight form.
  const DeviceLimits h200 = RealDevices().back().Limits;
  Problem            p = MakeProblem(4, { 40, 30, 20, 10 }, 3, 2);
  KernelConfig       c = itk::nlm::ChooseConfiguration(p, h200, Overrides{});
  ASSERT_TRUE(c.Rows == 0 && !c.SharedRows && c.WeightBatch == 0) << "4D takes the tiled kernel";
  EXPECT_TRUE(c.TiledCorrectedWeights());
  const auto macros = c.Macros();
  EXPECT_NE(std::find(macros.begin(), macros.end(), "-DNLM_CORRECTED_WEIGHTS=1"), macros.end());
  EXPECT_NE(c.Describe().find(" corrected"), std::string::npos) << c.Describe();
  for (const double h : { 1e-80, 1e80 })
  {
    Problem far = p;
    far.H = h;
    const KernelConfig f = itk::nlm::ChooseConfiguration(far, h200, Overrides{});
    EXPECT_FALSE(f.TiledCorrectedWeights()) << "h " << h;
    const auto m = f.Macros();
    EXPECT_EQ(std::find(m.begin(), m.end(), "-DNLM_CORRECTED_WEIGHTS=1"), m.end()) << "h " << h;
  }
  Problem             map = p;
  static const double sigma = 0.1;
  map.NoiseSigma = &sigma;
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(map, h200, Overrides{}).TiledCorrectedWeights()) << "noise map";
  Problem single = p;
  single.SinglePrecision = true;
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(single, h200, Overrides{}).TiledCorrectedWeights());
  Problem nearOverflow = p;
  nearOverflow.Sigma = 1.5e153; // 2 sigma^2 * 81 terms: finite, but not twice that
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(nearOverflow, h200, Overrides{}).TiledCorrectedWeights());
  Problem slow = MakeProblem(3, { 40, 30, 20 }, 3, 2);
  slow.FastMode = false;
  const KernelConfig classic = itk::nlm::ChooseConfiguration(slow, h200, Overrides{});
  ASSERT_TRUE(classic.Classic);
  EXPECT_FALSE(classic.TiledCorrectedWeights()) << "the classic kernel has no such weights";
  // The tiled kernel's other problems take it too: Rician, several channels, per-axis radii.
  Problem rician = p;
  rician.Sigma = 0.05;
  rician.NoiseModel = itk::CudaNonLocalMeansImageFilterEnums::NoiseModel::Rician;
  Problem channels = MakeProblem(3, { 40, 30, 20 }, 7, 3, 3);
  Problem perAxis = MakeProblem(3, { 40, 30, 20 }, 7, 3);
  perAxis.PerAxis = true;
  for (unsigned int a = 0; a < 3; ++a)
  {
    perAxis.AxisPatchSize[a] = (a == 2) ? 3 : 7;
    perAxis.AxisPatchDistance[a] = (a == 2) ? 1 : 3;
  }
  for (const Problem & q : { rician, channels, perAxis })
  {
    const KernelConfig t = itk::nlm::ChooseConfiguration(q, h200, Overrides{});
    EXPECT_TRUE(t.Rows == 0 && !t.SharedRows && t.WeightBatch == 0 && t.TiledCorrectedWeights()) << t.Describe();
  }
  // The other kernels take the corrected quotient in their code, whatever the field says.
  const KernelConfig column = itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 3), h200, Overrides{});
  ASSERT_GT(column.Rows, 0);
  EXPECT_FALSE(column.TiledCorrectedWeights());
}

TEST(NonLocalMeansLaunchPlan, TheColumnKernelReadsGlobalMemoryWhereSharedMemoryWouldCostBlocks)
{
  // Patch 3: the footprint in shared memory at distance 3 (three blocks of 4 warps and 4 planes fit
  // an SM), from global memory where it would cost blocks, with no shared memory and the shape's
  // blocks per SM, up to distance 21 (where no tiled configuration fits).
  for (const auto & device : RealDevices())
  {
    for (int distance : { 1, 3, 4, 7, 11, 21 })
    {
      const KernelConfig c =
        itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, distance), device.Limits, Overrides{});
      ASSERT_GT(c.Rows, 0) << device.Name << ", distance " << distance;
      const bool fits = static_cast<std::size_t>(c.MinBlocks) * (c.SharedBytes() + 1024) <=
                        static_cast<std::size_t>(device.Limits.SharedPerMultiprocessor);
      EXPECT_TRUE(fits) << c.Describe();
      if (c.GlobalFootprint)
      {
        EXPECT_EQ(c.SharedBytes(), 0u);
        EXPECT_NE(c.Describe().find("from global memory"), std::string::npos);
        KernelConfig shared = c;
        shared.GlobalFootprint = false;
        EXPECT_GT(static_cast<std::size_t>(c.MinBlocks) * (shared.SharedBytes() + 1024),
                  static_cast<std::size_t>(device.Limits.SharedPerMultiprocessor))
          << "global memory only where shared memory would cost blocks: " << c.Describe();
      }
    }
  }
  const DeviceLimits h200 = RealDevices().back().Limits;
  const KernelConfig p3 = itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 3), h200, Overrides{});
  EXPECT_FALSE(p3.GlobalFootprint);
  // One channel in float64 arithmetic: 2 rows, 4 planes, 4 warps, 3 blocks per SM.
  EXPECT_EQ(p3.Rows, 2);
  EXPECT_EQ(p3.Tile[1], 8);
  EXPECT_EQ(p3.Tile[2], 4);
  EXPECT_EQ(p3.Threads(), 128);
  EXPECT_EQ(p3.MinBlocks, 3);
  // 3 rows at distance 3 where the output has at least one wave of their tiles (31 x 12 x 4 voxels)
  // on each device's resident blocks (132 SMs x 3 on an H200): 500^3 has 225 waves, 256^3 32, 96^3
  // 1.9, 64^3 0.7 (288 tiles for 396 blocks).
  const auto rows = [](std::initializer_list<std::int64_t> size,
                       int                                 distance,
                       const DeviceLimits &                limits,
                       const Overrides &                   o = Overrides{}) {
    const KernelConfig c = itk::nlm::ChooseConfiguration(MakeProblem(3, size, 3, distance), limits, o);
    EXPECT_FALSE(c.GlobalFootprint) << c.Describe();
    EXPECT_EQ(c.Tile[1], c.Rows * 4) << c.Describe();
    EXPECT_EQ(c.Tile[2], 4) << c.Describe();
    return c.Rows;
  };
  EXPECT_EQ(rows({ 500, 500, 500 }, 3, h200), 3);
  EXPECT_EQ(rows({ 256, 256, 256 }, 3, h200), 3);
  EXPECT_EQ(rows({ 96, 96, 96 }, 3, h200), 3);
  EXPECT_EQ(rows({ 64, 64, 64 }, 3, h200), 2);
  for (int distance : { 1, 2, 4 })
  {
    EXPECT_EQ(rows({ 500, 500, 500 }, distance, h200), 2) << "distance " << distance;
  }
  // The waves are each device's where several share the slabs: 0.97 at 96^3 on two.
  DeviceLimits twoH200 = h200;
  twoH200.Devices = 2;
  EXPECT_EQ(rows({ 500, 500, 500 }, 3, twoH200), 3);
  EXPECT_EQ(rows({ 96, 96, 96 }, 3, twoH200), 2);
  // Not where the 3 rows' footprint (62 KiB) would leave shared memory or cost blocks: an A100's
  // 164 KiB per SM hold 3 blocks of 2 rows (49 KiB), 2 of 3 rows; with the footprint forced into
  // shared memory too.
  const DeviceLimits a100 = RealDevices()[2].Limits;
  EXPECT_EQ(rows({ 500, 500, 500 }, 3, a100), 2);
  Overrides sharedFootprint;
  sharedFootprint.ColumnFootprint = "shared";
  EXPECT_EQ(rows({ 500, 500, 500 }, 3, a100, sharedFootprint), 2);
  EXPECT_EQ(rows({ 500, 500, 500 }, 3, h200, sharedFootprint), 3);
  // Not with several channels (1 row) or in single precision (2 rows of 8 planes).
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 500, 500, 500 }, 3, 3, 3), h200, Overrides{}).Rows, 1);
  Problem single = MakeProblem(3, { 500, 500, 500 }, 3, 3);
  single.SinglePrecision = true;
  EXPECT_EQ(itk::nlm::ChooseConfiguration(single, h200, Overrides{}).Rows, 2);
  EXPECT_TRUE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 11), h200, Overrides{}).GlobalFootprint);
  // Forced either way.
  Overrides global, shared;
  global.ColumnFootprint = "global";
  shared.ColumnFootprint = "shared";
  EXPECT_TRUE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 3), h200, global).GlobalFootprint);
  const KernelConfig s = itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 5), h200, shared);
  EXPECT_FALSE(s.GlobalFootprint);
  EXPECT_GT(s.SharedBytes(), 0u);
}

TEST(NonLocalMeansLaunchPlan, TheBufferedWeightsKernelServes3DLargePatchesInFloat64)
{
  // Preferred for one channel in float64 from patch 5 and distance 3 on, in single precision from
  // patch 7 and distance 3 on (8 warps per block, from patch 11 on 16, in float64 20 up to patch 13
  // and 10 at patch 11; 128 planes per block; registers budgeted for 1024 resident threads, in
  // float64 768 at patches 8 and 9, 640 (2 blocks) at patch 11, one block in float64 at patch 13
  // and beyond patch 13); not with channels, with a mask or a noise map, in 2D and 4D, or when
  // switched off; forced with CUDANONLOCALMEANS_BUFFERED_WEIGHTS=1 or a shape wherever it can serve.
  const DeviceLimits h200 = RealDevices().back().Limits;
  for (int patch : { 5, 7, 9, 11, 13, 21 })
  {
    for (int distance : { 3, 5, 8, 11, 21 })
    {
      const KernelConfig c =
        itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, patch, distance), h200, Overrides{});
      EXPECT_EQ(c.WeightBatch, 12) << c.Describe();
      EXPECT_EQ(c.Tile[0], 32 - (patch - 2)) << c.Describe();
      EXPECT_EQ(c.Tile[1], patch == 11 ? 10 : (patch >= 11 ? (patch <= 13 ? 20 : 16) : 8)) << c.Describe();
      EXPECT_EQ(c.Tile[1] * 32, c.ThreadCount) << c.Describe();
      EXPECT_EQ(c.MinBlocks, patch <= 7 ? 4 : (patch <= 9 ? 3 : (patch == 11 ? 2 : 1))) << c.Describe();
      EXPECT_EQ(c.Tile[2], 128) << c.Describe();
      EXPECT_FALSE(c.SharedRows || c.Rows > 0) << c.Describe();
      EXPECT_LE(c.SharedBytes(), 48u * 1024u) << "no opt-in needed: " << c.Describe();
    }
    EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, patch, 2), h200, Overrides{}).WeightBatch, 0)
      << "patch " << patch << ", distance 2";
  }
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 11), h200, Overrides{}).WeightBatch, 0)
    << "patch 3: the column kernel";
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 7, 11, 2), h200, Overrides{}).WeightBatch, 0)
    << "two channels";
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(2, { 640, 480 }, 7, 11), h200, Overrides{}).WeightBatch, 0);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(4, { 9, 8, 7, 6 }, 5, 1), h200, Overrides{}).WeightBatch, 0);
  Problem single = MakeProblem(3, { 64, 48, 40 }, 7, 11);
  single.SinglePrecision = true;
  EXPECT_EQ(itk::nlm::ChooseConfiguration(single, h200, Overrides{}).WeightBatch, 12) << "single precision";
  for (const auto & [patch, distance] : std::vector<std::pair<int, int>>{ { 5, 11 }, { 5, 3 }, { 3, 5 }, { 7, 2 } })
  {
    Problem q = MakeProblem(3, { 64, 48, 40 }, patch, distance);
    q.SinglePrecision = true;
    EXPECT_EQ(itk::nlm::ChooseConfiguration(q, h200, Overrides{}).WeightBatch, 0)
      << "single precision, patch " << patch << ", distance " << distance;
  }
  for (const auto & [patch, distance] : std::vector<std::pair<int, int>>{ { 7, 3 }, { 9, 4 }, { 13, 5 }, { 21, 5 } })
  {
    Problem q = MakeProblem(3, { 64, 48, 40 }, patch, distance);
    q.SinglePrecision = true;
    const KernelConfig c = itk::nlm::ChooseConfiguration(q, h200, Overrides{});
    EXPECT_EQ(c.WeightBatch, 12) << "single precision: " << c.Describe();
    EXPECT_EQ(c.Tile[1], patch >= 11 ? 16 : 8) << "single precision: " << c.Describe();
    EXPECT_EQ(c.Tile[2], 128) << "single precision: " << c.Describe();
    EXPECT_EQ(c.MinBlocks, patch <= 9 ? 4 : (patch <= 13 ? 2 : 1)) << "single precision: " << c.Describe();
  }
  Problem                         masked = MakeProblem(3, { 64, 48, 40 }, 7, 11);
  const std::vector<std::uint8_t> mask(64 * 48 * 40, 1);
  masked.Mask = mask.data();
  EXPECT_EQ(itk::nlm::ChooseConfiguration(masked, h200, Overrides{}).WeightBatch, 0) << "a mask";
  Overrides off, forced;
  off.BufferedWeightsOff = true;
  forced.BufferedWeightsForced = true;
  EXPECT_TRUE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 7, 11), h200, off).SharedRows);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 2), h200, forced).WeightBatch, 12);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 7, 11, 3), h200, forced).WeightBatch, 12);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(single, h200, forced).WeightBatch, 12);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(masked, h200, forced).WeightBatch, 0) << "it cannot serve a mask";
  // A forced shape: warps per block (one row of the tile each), planes per block, pairs per batch.
  Overrides shaped = forced;
  shaped.BufferedWeightsShape = { 16, 32, 24 };
  const KernelConfig sc = itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 2), h200, shaped);
  EXPECT_EQ(sc.WeightBatch, 24) << sc.Describe();
  EXPECT_EQ(sc.Tile[0], 31) << sc.Describe();
  EXPECT_EQ(sc.Tile[1], 16) << sc.Describe();
  EXPECT_EQ(sc.Tile[2], 32) << sc.Describe();
  EXPECT_EQ(sc.ThreadCount, 512) << sc.Describe();
  EXPECT_EQ(sc.MinBlocks, 1) << "float64, 16 warps: one block: " << sc.Describe();
  // Shared memory caps the budget: 4 blocks of patch 7 (13 KB each) do not fit 48 KB per SM, 3 do.
  DeviceLimits smallShared = h200;
  smallShared.SharedPerMultiprocessor = 48 * 1024;
  const KernelConfig capped =
    itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 7, 11), smallShared, Overrides{});
  EXPECT_EQ(capped.WeightBatch, 12) << capped.Describe();
  EXPECT_EQ(capped.MinBlocks, 3) << capped.Describe();
  // A forced shape of one warp: registers for 1024 threads would be 32 blocks; at most 16 are asked
  // for, and no more than shared memory holds (16 of these small blocks fit).
  Overrides narrow = forced;
  narrow.BufferedWeightsShape = { 1, 64, 12 };
  for (int patch : { 5, 13 })
  {
    Problem q = MakeProblem(3, { 64, 48, 40 }, patch, 3);
    q.SinglePrecision = true;
    const KernelConfig nc = itk::nlm::ChooseConfiguration(q, h200, narrow);
    EXPECT_EQ(nc.ThreadCount, 32) << nc.Describe();
    EXPECT_EQ(nc.MinBlocks, 16) << nc.Describe();
    EXPECT_LE(static_cast<std::size_t>(nc.MinBlocks) * (nc.SharedBytes() + 1024),
              static_cast<std::size_t>(h200.SharedPerMultiprocessor))
      << nc.Describe();
  }
  EXPECT_EQ(itk::nlm::ChooseConfiguration(masked, h200, shaped).WeightBatch, 0) << "a shape cannot serve a mask";
  // The slab's buffers: the weights of a batch (2 * 12 slots of the output extended by the distance
  // on each side, 4 bytes each) and the accumulators (W and R per voxel, 8 bytes each), counted in
  // the slab's device bytes; the batches cover every shift pair once, the last writes the output.
  const Problem      p = MakeProblem(3, { 64, 48, 40 }, 7, 6);
  const KernelConfig c = itk::nlm::ChooseConfiguration(p, h200, Overrides{});
  const LaunchPlan   plan = itk::nlm::PlanSlabs(p, c, h200);
  const SlabPlan     s = itk::nlm::PlanSlab(p, plan, 0, 4, Overrides{});
  EXPECT_EQ(s.WeightBytes, 2u * 12u * (64 + 12) * (48 + 12) * (40 + 12) * 4u);
  EXPECT_EQ(s.AccumulatorBytes, 2u * 64u * 48u * 40u * 8u);
  EXPECT_GE(plan.DeviceBytes, s.WeightBytes + s.AccumulatorBytes + s.PaddedBytes);
  const long long pairs = 13 * 13 * 4; // t0 = 0..6 in pairs (0,1) (2,3) (4,5) (6)
  ASSERT_EQ(s.Chunks.size(), static_cast<std::size_t>((pairs + 11) / 12));
  long long tiles = 0;
  for (std::size_t i = 0; i < s.Chunks.size(); ++i)
  {
    EXPECT_EQ(s.Chunks[i].FirstTile, static_cast<long long>(12 * i));
    EXPECT_EQ(s.Chunks[i].PaddedPlanesRead, s.Fast.ySize[2]);
    EXPECT_EQ(s.Chunks[i].OutputPlanesDone, i + 1 == s.Chunks.size() ? 40 : 0);
    EXPECT_EQ(s.Chunks[i].Stream, 0) << "batches add to the same accumulators: one stream, in order";
    tiles += s.Chunks[i].Tiles;
  }
  EXPECT_EQ(tiles, plan.TotalTiles);
  EXPECT_EQ(s.Fast.weightSize[0], 64 + 12);
  EXPECT_EQ(s.Fast.weightTiles[0], (64 + 6 + 26) / 27);
  EXPECT_EQ(s.Fast.weightTiles[2], 1);
  // The gather's grid (65535 blocks of 8 rows and of one plane along axes 1 and 2): a longer axis 1
  // leaves the problem to the other kernels, a longer axis 2 is cut into slabs (of whole blocks of
  // the weights pass: 65408 planes).
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 3, 524281, 2 }, 7, 5), h200, Overrides{}).WeightBatch, 0);
  EXPECT_EQ(itk::nlm::ChooseConfiguration(MakeProblem(3, { 3, 524280, 2 }, 7, 5), h200, Overrides{}).WeightBatch, 12);
  const Problem      deep = MakeProblem(3, { 3, 2, 300000 }, 5, 3);
  const KernelConfig dc = itk::nlm::ChooseConfiguration(deep, h200, Overrides{});
  ASSERT_EQ(dc.WeightBatch, 12);
  const LaunchPlan deepPlan = itk::nlm::PlanSlabs(deep, dc, h200);
  EXPECT_LE(deepPlan.SlabPlanes, 65535);
  EXPECT_EQ(deepPlan.SlabPlanes % dc.Tile[2], 0);
  EXPECT_EQ(deepPlan.Slabs, 5);
  // Where a slab of 128 planes does not fit the memory budget, blocks of 64 planes; where not even
  // those fit (its buffers grow with the planes along axes 0 and 1), or where the shape is forced,
  // the planner takes what it would with the kernel off.
  {
    Problem q = MakeProblem(3, { 40, 30, 150 }, 5, 7);
    q.MaximumGPUMemory = 30000000;
    const auto         pick = [&h200, q](const Overrides & o) { return itk::nlm::ChooseConfiguration(q, h200, o); };
    const KernelConfig chosen = pick(Overrides{});
    ASSERT_EQ(chosen.Tile[2], 128) << chosen.Describe();
    EXPECT_FALSE(itk::nlm::ThinnestSlabFits(q, chosen, h200));
    const KernelConfig thinner = itk::nlm::ConfigurationThatFits(q, h200, Overrides{}, pick);
    EXPECT_EQ(thinner.WeightBatch, 12) << thinner.Describe();
    EXPECT_EQ(thinner.Tile[2], 64) << thinner.Describe();
    EXPECT_EQ(thinner.Tile[1], chosen.Tile[1]) << thinner.Describe();
    EXPECT_EQ(thinner.MinBlocks, chosen.MinBlocks) << thinner.Describe();
    EXPECT_TRUE(itk::nlm::ThinnestSlabFits(q, thinner, h200));
    const LaunchPlan slabs = itk::nlm::PlanSlabs(q, thinner, h200);
    EXPECT_EQ(slabs.SlabPlanes % 64, 0);
    EXPECT_GT(slabs.Slabs, 1);
    Overrides shape128 = forced;
    shape128.BufferedWeightsShape = { 8, 128, 12 };
    EXPECT_EQ(itk::nlm::ConfigurationThatFits(q, h200, shape128, pick).WeightBatch, 0) << "a forced shape stays";
    q.MaximumGPUMemory = 12000000;
    EXPECT_EQ(itk::nlm::ConfigurationThatFits(q, h200, Overrides{}, pick).WeightBatch, 0) << "not even 64 planes fit";
  }
  const auto choose = [&](const Problem & q) {
    return [&h200, q](const Overrides & o) { return itk::nlm::ChooseConfiguration(q, h200, o); };
  };
  const Problem wide = MakeProblem(3, { 4096, 4096, 200 }, 7, 11);
  EXPECT_FALSE(itk::nlm::ThinnestSlabFits(wide, itk::nlm::ChooseConfiguration(wide, h200, Overrides{}), h200));
  const KernelConfig w = itk::nlm::ConfigurationThatFits(wide, h200, forced, choose(wide));
  EXPECT_TRUE(w.SharedRows && w.WeightBatch == 0) << w.Describe() << ": even where forced";
  EXPECT_NO_THROW(itk::nlm::PlanSlabs(wide, w, h200));
  const Problem thin = MakeProblem(3, { 4096, 4096, 5 }, 7, 11); // a slab of 5 planes fits
  EXPECT_EQ(itk::nlm::ConfigurationThatFits(thin, h200, Overrides{}, choose(thin)).WeightBatch, 12);
  Problem budget = MakeProblem(3, { 512, 512, 512 }, 7, 11);
  EXPECT_EQ(itk::nlm::ConfigurationThatFits(budget, h200, Overrides{}, choose(budget)).WeightBatch, 12);
  budget.MaximumGPUMemory = std::uint64_t{ 1 } << 30;
  EXPECT_EQ(itk::nlm::ConfigurationThatFits(budget, h200, Overrides{}, choose(budget)).WeightBatch, 0);
  EXPECT_EQ(itk::nlm::ConfigurationThatFits(p, h200, Overrides{}, choose(p)).WeightBatch, 12);
}

TEST(NonLocalMeansLaunchPlan, TheSharedRowsKernelServes3DLargePatchesAtLargeDistances)
{
  // Preferred at patches 5 and 7 from distance 3 on, from patch 9 on from distance 7; below, the
  // tiled kernel unless none fits.
  // (With the buffered-weights kernel off, which comes first where it serves; see
  // TheBufferedWeightsKernelServes3DLargePatchesInFloat64.)
  const DeviceLimits h200 = RealDevices().back().Limits;
  Overrides          rules;
  rules.BufferedWeightsOff = true;
  for (int patch : { 5, 7 })
  {
    EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, patch, 2), h200, rules).SharedRows)
      << "patch " << patch;
    for (int distance : { 3, 6, 11, 21 })
    {
      const KernelConfig c =
        itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, patch, distance), h200, rules);
      EXPECT_TRUE(c.SharedRows) << c.Describe();
      EXPECT_EQ(c.Tile[2], 8) << c.Describe();
    }
  }
  for (int patch : { 9, 11, 13, 21 })
  {
    EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, patch, 6), h200, rules).SharedRows)
      << "patch " << patch;
    for (int distance : { 7, 8, 11, 21 })
    {
      const KernelConfig c =
        itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, patch, distance), h200, rules);
      EXPECT_TRUE(c.SharedRows) << c.Describe();
      EXPECT_EQ(c.Tile[2], patch <= 11 ? 8 : 4) << c.Describe();
      EXPECT_LE(c.SharedBytes(), 48u * 1024u) << "no opt-in needed: " << c.Describe();
    }
  }
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 11), h200, rules).SharedRows)
    << "patch 3: the column kernel";
  // Even patch sizes take the rule of the odd size they become.
  EXPECT_TRUE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 6, 3), h200, rules).SharedRows);
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 8, 6), h200, rules).SharedRows);
  EXPECT_TRUE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 8, 7), h200, rules).SharedRows);
  // Single precision with one channel: the same rule, except at patch 5, which takes the column
  // kernel from distance 2 on where its footprint fits shared memory (on an H200 up to distance 7),
  // beyond it the shared-rows kernel, whose cold compile is shorter. Several channels, in float64 and in single
  // precision: from patch 7 and distance 9 on.
  struct SingleCase
  {
    int  patch, distance;
    char kernel; // 'S' shared rows, 'C' column, 'T' tiled
  };
  for (const SingleCase & c : std::vector<SingleCase>{ { 5, 1, 'T' },
                                                       { 5, 2, 'C' },
                                                       { 5, 3, 'C' },
                                                       { 5, 7, 'C' },
                                                       { 5, 8, 'S' },
                                                       { 5, 11, 'S' },
                                                       { 7, 2, 'T' },
                                                       { 7, 3, 'S' },
                                                       { 7, 11, 'S' },
                                                       { 9, 6, 'T' },
                                                       { 9, 7, 'S' },
                                                       { 13, 21, 'S' } })
  {
    Problem p = MakeProblem(3, { 64, 48, 40 }, c.patch, c.distance);
    p.SinglePrecision = true;
    const KernelConfig k = itk::nlm::ChooseConfiguration(p, h200, rules);
    EXPECT_EQ(k.SharedRows ? 'S' : (k.Rows > 0 ? 'C' : 'T'), c.kernel) << k.Describe();
  }
  {
    Problem p = MakeProblem(3, { 64, 48, 40 }, 5, 11);
    p.SinglePrecision = true;
    Overrides global;
    global.ColumnFootprint = "global"; // forced: the column kernel stays
    const KernelConfig k = itk::nlm::ChooseConfiguration(p, h200, global);
    EXPECT_TRUE(k.Rows > 0 && k.GlobalFootprint) << k.Describe();
    Overrides noColumns;
    noColumns.ColumnKernelOff = true; // the next fastest: the shared-rows kernel, from distance 3
    p.PatchDistance = 5;
    EXPECT_TRUE(itk::nlm::ChooseConfiguration(p, h200, noColumns).SharedRows);
    p.PatchDistance = 2;
    EXPECT_FALSE(itk::nlm::ChooseConfiguration(p, h200, noColumns).SharedRows);
    Overrides forcedRows;
    forcedRows.SharedRowsShape = { 8, 8, 2 };
    EXPECT_TRUE(itk::nlm::ChooseConfiguration(p, h200, forcedRows).SharedRows) << "a forced shape comes first";
  }
  for (bool single : { false, true })
  {
    for (int channels : { 2, 3 })
    {
      for (const auto & [patch, distance, expected] : std::vector<std::tuple<int, int, bool>>{
             { 5, 11, false }, { 7, 3, false }, { 7, 8, false }, { 7, 9, true }, { 11, 21, true } })
      {
        Problem p = MakeProblem(3, { 64, 48, 40 }, patch, distance, channels);
        p.SinglePrecision = single;
        EXPECT_EQ(itk::nlm::ChooseConfiguration(p, h200, rules).SharedRows, expected)
          << "patch " << patch << ", distance " << distance << ", " << channels << " channels"
          << (single ? ", single precision" : "");
      }
    }
  }
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(2, { 64, 48 }, 7, 11), h200, rules).SharedRows);
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(4, { 9, 8, 7, 6 }, 7, 1), h200, rules).SharedRows);
  // A GTX 1080 Ti (48 KB of shared memory per block): patch 15 at distance 5 fits no tiled
  // configuration, so the shared-rows kernel serves it.
  const DeviceLimits gtx = RealDevices().front().Limits;
  EXPECT_TRUE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 15, 5), gtx, rules).SharedRows);
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 11, 3), gtx, rules).SharedRows);
  // Beyond patch 21 (at 35 a row's window would not fit a warp) it never serves: the tiled kernel,
  // or the refusal that names the fix.
  for (int patch : { 23, 33, 35, 51 })
  {
    try
    {
      EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, patch, 11), h200, rules).SharedRows)
        << "patch " << patch;
    }
    catch (const itk::ExceptionObject & e)
    {
      EXPECT_NE(std::string(e.GetDescription()).find("use a smaller PatchSize or the CPU backend"), std::string::npos);
    }
  }
  Overrides off, forced;
  off.SharedRowsKernelOff = true;
  EXPECT_FALSE(itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 7, 11), h200, off).SharedRows);
  forced.SharedRowsShape = { 4, 8, 2 };
  const KernelConfig f = itk::nlm::ChooseConfiguration(MakeProblem(3, { 64, 48, 40 }, 3, 3), h200, forced);
  EXPECT_TRUE(f.SharedRows);
  EXPECT_EQ(f.Tile[0], 31);
  EXPECT_EQ(f.Tile[1], 8);
  EXPECT_EQ(f.Tile[2], 4);
  EXPECT_EQ(f.ThreadCount, 256);
  EXPECT_EQ(f.MinBlocks, 2);
}

TEST(NonLocalMeansLaunchPlan, ForcedShapesAreUsed)
{
  const DeviceLimits h200 = RealDevices().back().Limits;
  const Problem      p = MakeProblem(3, { 64, 48, 40 }, 3, 3);
  Overrides          tiled;
  tiled.TileShape = { 16, 16, 8, 1, 256, 1, 1 };
  const KernelConfig t = itk::nlm::ChooseConfiguration(p, h200, tiled);
  EXPECT_EQ(t.Rows, 0);
  EXPECT_EQ(t.Tile[0], 16);
  EXPECT_EQ(t.Tile[2], 8);
  EXPECT_EQ(t.ThreadCount, 256);
  Overrides columns;
  columns.ColumnShape = { 1, 8, 8, 1 };
  const KernelConfig c = itk::nlm::ChooseConfiguration(p, h200, columns);
  EXPECT_EQ(c.Rows, 1);
  EXPECT_EQ(c.ThreadCount, 256);
}

TEST(NonLocalMeansLaunchPlan, SlabsCoverTheOutputOnceWithinTheMemoryBudget)
{
  for (const auto & device : RealDevices())
  {
    // Patch 3: the column kernel (slabs of 2 planes and more); patch 5: the tiled kernel (8 and more).
    for (const auto & [patch, budget] : std::vector<std::pair<int, std::uint64_t>>{ { 3, 0 },
                                                                                    { 3, std::uint64_t{ 3 } << 20 },
                                                                                    { 3, std::uint64_t{ 1 } << 20 },
                                                                                    { 5, 0 },
                                                                                    { 5, std::uint64_t{ 3 } << 20 },
                                                                                    { 5, std::uint64_t{ 2 } << 20 } })
    {
      Problem p = MakeProblem(3, { 61, 47, 83 }, patch, 2);
      p.MaximumGPUMemory = budget;
      const LaunchPlan plan =
        itk::nlm::PlanSlabs(p, itk::nlm::ChooseConfiguration(p, device.Limits, Overrides{}), device.Limits);
      EXPECT_EQ(plan.Slabs > 1, budget > 0) << device.Name << ", patch " << patch << ", budget " << budget;
      EXPECT_LE(plan.DeviceBytes, plan.MemoryBudget);
      ExpectSlabsCoverTheOutputOnce(p, plan);
    }
    // 2D: the column kernel's slabs are whole tiles of rows along axis 1 (the GPU test's case).
    Problem p = MakeProblem(2, { 60, 400 }, 3, 5);
    p.MaximumGPUMemory = 150000;
    const KernelConfig c = itk::nlm::ChooseConfiguration(p, device.Limits, Overrides{});
    const LaunchPlan   plan = itk::nlm::PlanSlabs(p, c, device.Limits);
    EXPECT_GT(c.Rows, 0) << device.Name;
    EXPECT_GT(plan.Slabs, 1) << device.Name;
    EXPECT_EQ(plan.SlabPlanes % c.Tile[1], 0);
    EXPECT_LE(plan.DeviceBytes, plan.MemoryBudget);
    ExpectSlabsCoverTheOutputOnce(p, plan);
  }
}

TEST(NonLocalMeansLaunchPlan, StreamedRegionsReadOnlyTheirInputBuffer)
{
  // The filter's input buffer for a requested region: the region padded by E + 1, cropped.
  const DeviceLimits h200 = RealDevices().back().Limits;
  for (unsigned int n : { 2u, 3u, 4u })
  {
    Problem   p = MakeProblem(n, { 30, 26, 22, 18 }, 3, 2, 2);
    const int pad = 1 + 2 + 1;
    for (unsigned int a = 0; a < n; ++a)
    {
      p.OutputStart[a] = (a == n - 1) ? 7 : 0;
      p.OutputSize[a] = (a == n - 1) ? 5 : p.ImageSize[a];
      p.InputStart[a] = std::max<std::int64_t>(0, p.OutputStart[a] - pad);
      p.InputSize[a] =
        std::min<std::int64_t>(p.ImageSize[a], p.OutputStart[a] + p.OutputSize[a] + pad) - p.InputStart[a];
    }
    const LaunchPlan plan = itk::nlm::PlanSlabs(p, itk::nlm::ChooseConfiguration(p, h200, Overrides{}), h200);
    ExpectSlabsCoverTheOutputOnce(p, plan);
    // A buffer one plane short of what the reflection needs is refused.
    Problem shortBuffer = p;
    shortBuffer.InputSize[n - 1] -= pad;
    EXPECT_THROW(AllSlabs(shortBuffer, plan), itk::ExceptionObject);
  }
}

TEST(NonLocalMeansLaunchPlan, ATooSmallMemoryBudgetNamesTheFix)
{
  Problem p = MakeProblem(3, { 64, 64, 64 }, 7, 5);
  p.MaximumGPUMemory = 1;
  const DeviceLimits h200 = RealDevices().back().Limits;
  try
  {
    itk::nlm::PlanSlabs(p, itk::nlm::ChooseConfiguration(p, h200, Overrides{}), h200);
    FAIL() << "a budget of 1 byte was accepted";
  }
  catch (const itk::ExceptionObject & e)
  {
    EXPECT_NE(std::string(e.GetDescription()).find("Raise MaximumGPUMemory"), std::string::npos);
  }
}

TEST(NonLocalMeansLaunchPlan, WideIndicesOnlyWhenABlockFootprintExceeds32Bits)
{
  DeviceLimits h200 = RealDevices().back().Limits;
  h200.FreeMemory = std::uint64_t{ 1 } << 40; // planes of 8192 x 8192 x 8 doubles
  for (unsigned int k : { 1u, 8u })
  {
    const Problem    p = MakeProblem(3, { 8192, 8192, 64 }, 3, 3, k);
    const LaunchPlan plan = itk::nlm::PlanSlabs(p, itk::nlm::ChooseConfiguration(p, h200, Overrides{}), h200);
    EXPECT_EQ(plan.Config.WideIndex, k == 8) << plan.Config.Describe();
  }
  const Problem small = MakeProblem(2, { 512, 512 }, 7, 11);
  EXPECT_FALSE(
    itk::nlm::PlanSlabs(small, itk::nlm::ChooseConfiguration(small, h200, Overrides{}), h200).Config.WideIndex);
}

TEST(NonLocalMeansLaunchPlan, ResidentBlocksRespectThreadsSharedMemoryAndRegisters)
{
  const DeviceLimits h200 = RealDevices().back().Limits;
  KernelConfig       c;
  c.Dimension = 2;
  c.PatchSize = 1; // no shared memory
  c.ThreadCount = 256;
  EXPECT_EQ(itk::nlm::ResidentBlocksPerMultiprocessor(c, 32, h200), 8);  // 2048 threads
  EXPECT_EQ(itk::nlm::ResidentBlocksPerMultiprocessor(c, 128, h200), 2); // 65536 registers
  c.PatchSize = 7;
  c.PatchDistance = 11;
  c.Tile[0] = 16;
  c.Tile[1] = 32;
  const int byShared = h200.SharedPerMultiprocessor / static_cast<int>(c.SharedBytes() + 1024);
  EXPECT_EQ(itk::nlm::ResidentBlocksPerMultiprocessor(c, 32, h200), std::min(8, byShared));
}

TEST(NonLocalMeansLaunchPlan, PlanningStopsWhenTheCallerAborts)
{
  // 4D patch 1 distance 20 (hundreds of tiled candidates): an abort request stops the planner.
  const Problem p = MakeProblem(4, { 16, 16, 16, 16 }, 1, 20);
  int           asked = 0;
  const auto    aborted = [&asked] { return ++asked > 3; };
  EXPECT_THROW(itk::nlm::ChooseConfiguration(p, RealDevices().back().Limits, Overrides{}, aborted),
               itk::ProcessAborted);
  EXPECT_EQ(asked, 4);
}

TEST(NonLocalMeansLaunchPlan, KernelChunksAlternateBetweenTwoStreamsUnlessOneIsAsked)
{
  const DeviceLimits h200 = RealDevices().back().Limits;
  const Problem      p = MakeProblem(3, { 64, 48, 40 }, 3, 3);
  const LaunchPlan   plan = itk::nlm::PlanSlabs(p, itk::nlm::ChooseConfiguration(p, h200, Overrides{}), h200);
  Overrides          small;
  small.ChunkTiles = 5;
  const SlabPlan two = itk::nlm::PlanSlab(p, plan, 0, 4, small);
  ASSERT_GT(two.Chunks.size(), 2u);
  for (std::size_t i = 0; i < two.Chunks.size(); ++i)
  {
    EXPECT_EQ(two.Chunks[i].Stream, static_cast<int>(i % 2)) << "chunk " << i;
  }
  small.KernelStreams = 1;
  const SlabPlan one = itk::nlm::PlanSlab(p, plan, 0, 4, small);
  ASSERT_EQ(one.Chunks.size(), two.Chunks.size());
  for (const auto & c : one.Chunks)
  {
    EXPECT_EQ(c.Stream, 0);
  }
}
