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
#ifndef itkNonLocalMeansLaunchPlan_h
#define itkNonLocalMeansLaunchPlan_h

// Launch planning of the CUDA backend, as pure functions: a problem and a device's limits
// (numbers, no driver) go in; the kernel configuration, the slabs, the kernel parameters and the
// launch chunks come out. Tested without a GPU (test/itkCudaNonLocalMeansLaunchPlanGTest.cxx).
// Private to the library.

#include "itkNonLocalMeansBackend.h"
#include "itkNonLocalMeansKernelCompiler.h"
#include "itkNonLocalMeansKernelParameters.h"
#include "itkNonLocalMeansOverrides.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace itk
{
namespace nlm
{

/** What the planner needs to know about a device. The defaults are an H200's. */
struct DeviceLimits
{
  int           Architecture{ 90 }; // compute capability as 10 * major + minor
  int           Multiprocessors{ 132 };
  int           SharedPerBlock{ 48 * 1024 };       // without opting in
  int           SharedPerBlockOptIn{ 227 * 1024 }; // the most one block may use
  int           SharedPerMultiprocessor{ 228 * 1024 };
  std::uint64_t FreeMemory{ std::uint64_t{ 140 } << 30 }; // bytes free on the device now
  int           Devices{ 1 }; // devices that share the output's slabs (several: RunOnDevices)
};

/** Share of the free device memory a Run uses when MaximumGPUMemory is 0. */
constexpr double DefaultMemoryShare = 0.8;

/** The configuration, tiling and slabs of one problem on one device. */
struct LaunchPlan
{
  KernelConfig  Config;
  int           OuterAxis{ 0 };            // slabs are cut along this axis (the outermost)
  long long     TileSpan[4]{ 1, 1, 1, 1 }; // output extent per axis rounded up to whole tiles
  long long     SlabPlanes{ 0 };           // output planes per slab (a multiple of the tile)
  long long     Slabs{ 0 };                // slabs covering the output
  long long     TotalTiles{ 0 };           // tiles of all slabs
  std::uint64_t MemoryBudget{ 0 };         // bytes the slab may use
  std::uint64_t DeviceBytes{ 0 };          // bytes one slab uses
};

/** One launch of nlm_fast: a run of tiles of one slab, in the order of the outermost axis. */
struct KernelChunk
{
  long long FirstTile{ 0 };
  long long Tiles{ 0 };
  long long PaddedPlanesRead{ 0 }; // padded planes (from the slab's first) it reads
  long long OutputPlanesDone{ 0 }; // output planes complete once it and the chunks before are
  int       Stream{ 0 };           // 0: the kernel stream, 1: the second one (the padding is on neither)
};

/** Everything one slab needs: planes, buffer sizes, kernel parameters and launch chunks. */
struct SlabPlan
{
  long long            First{ 0 };      // output planes [First, End) along the outer axis,
  long long            End{ 0 };        // relative to the output region
  long long            InputFirst{ 0 }; // input planes [InputFirst, InputEnd) it uploads (image
  long long            InputEnd{ 0 };   // indices): the reflections of [First - E, End + E)
  std::size_t          InputPlaneBytes{ 0 };
  std::size_t          InputBytes{ 0 };
  std::size_t          PaddedPlaneCells{ 0 }; // cells of one padded plane, with components
  std::size_t          PaddedBytes{ 0 };
  std::size_t          OutputPlaneBytes{ 0 };
  std::size_t          OutputBytes{ 0 };
  std::size_t          WeightBytes{ 0 };      // the buffered-weights kernel's weights of a batch
  std::size_t          AccumulatorBytes{ 0 }; // and accumulators (0 for the other kernels)
  PadKernelParameters  Pad{};
  FastKernelParameters Fast{};
  /** InputPlanesNeeded[j]: input planes (from InputFirst) that padded planes 0..j read. */
  std::vector<long long>   InputPlanesNeeded;
  std::vector<KernelChunk> Chunks;
};

/** Bytes of one element of a buffer. */
std::size_t
ElementBytes(NonLocalMeansBackend::ElementType type);

/** Whether the problem's float64 weights can be computed by the corrected quotient
 * (FastModeWeightHighWordCorrected), as the column, shared-rows and buffered-weights kernels compute
 * them: CorrectedQuotientFits of its norm (h between about 1e-75 and 1e75) and no patch distance whose
 * quotient by the norm could reach -infinity (twice the noise term summed over a patch, divided by
 * the norm, finite). The tiled kernel serves the others, with its division-free nearest-integer
 * weights; where this holds and there is no noise map, it takes the corrected quotient too
 * (KernelConfig::CorrectedWeights). */
bool
CorrectedWeightsServe(const NonLocalMeansBackend::Problem & problem);

/** Estimated time per output voxel of a tiled configuration (arbitrary units; infinite when it
 * cannot run well: too few resident blocks or too many registers). */
double
EstimateCost(const KernelConfig & config, int sharedPerMultiprocessor);

/** Asked between the candidates of the planner: true stops planning with ProcessAborted. */
using PlanningAborted = std::function<bool()>;

/** The kernel configuration for a problem on a device: in 3D the shared-rows kernel for large
 * patches at large distances, in 2D and 3D the column kernel for small patches (in 2D up to patch 9);
 * else the tiled configuration of
 * least estimated cost, or in 3D the shared-rows kernel where no tiled configuration fits. Throws
 * when none fits the device, and ProcessAborted when `aborted` (may be empty) says so. */
CudaNonLocalMeans_EXPORT KernelConfig
ChooseConfiguration(const NonLocalMeansBackend::Problem & problem,
                    const DeviceLimits &                  limits,
                    const Overrides &                     overrides,
                    const PlanningAborted &               aborted = {});

/** Bytes a Run may use on a device: DefaultMemoryShare of its free memory, at most the problem's
 * MaximumGPUMemory. */
CudaNonLocalMeans_EXPORT std::uint64_t
                         MemoryBudget(const NonLocalMeansBackend::Problem & problem, const DeviceLimits & limits);

/** Whether a slab of one tile layer of `config` fits the memory budget. */
CudaNonLocalMeans_EXPORT bool
ThinnestSlabFits(const NonLocalMeansBackend::Problem & problem,
                 const KernelConfig &                  config,
                 const DeviceLimits &                  limits);

/** What `choose` (ChooseConfiguration with these overrides, or a cache of it) gives, except where it
 * is the buffered-weights kernel and not even its thinnest slab fits the memory budget (its buffers
 * grow with the planes along axes 0 and 1; a slab is a block's planes at least): then that kernel
 * with blocks of half as many planes, down to 64, and where none fits (or its shape is forced),
 * what it gives with that kernel off. */
CudaNonLocalMeans_EXPORT KernelConfig
ConfigurationThatFits(const NonLocalMeansBackend::Problem &                  problem,
                      const DeviceLimits &                                   limits,
                      const Overrides &                                      overrides,
                      const std::function<KernelConfig(const Overrides &)> & choose);

/** Plans the slabs of `config` (a ChooseConfiguration result) on a device: the thickest slab
 * that fits the memory budget and makes at least `minimumSlabs` slabs where the output has that
 * many tile layers (several devices), and the index width. Throws when not even one tile layer
 * fits. */
CudaNonLocalMeans_EXPORT LaunchPlan
PlanSlabs(const NonLocalMeansBackend::Problem & problem,
          const KernelConfig &                  config,
          const DeviceLimits &                  limits,
          long long                             minimumSlabs = 1);

/** Slab `index` of a plan. `residentBlocks`: blocks of nlm_fast the device holds at once (sizes
 * the launch chunks). Throws when the input buffer does not cover what the slab reads. */
CudaNonLocalMeans_EXPORT SlabPlan
PlanSlab(const NonLocalMeansBackend::Problem & problem,
         const LaunchPlan &                    plan,
         long long                             index,
         long long                             residentBlocks,
         const Overrides &                     overrides);

/** Blocks of nlm_fast resident per multiprocessor for a configuration whose kernel uses
 * `registers` registers per thread. */
CudaNonLocalMeans_EXPORT int
ResidentBlocksPerMultiprocessor(const KernelConfig & config, int registers, const DeviceLimits & limits);

} // namespace nlm
} // namespace itk

#endif
