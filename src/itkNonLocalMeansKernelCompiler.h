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
#ifndef itkNonLocalMeansKernelCompiler_h
#define itkNonLocalMeansKernelCompiler_h

// Compiles the embedded CUDA kernels with NVRTC for one configuration and one GPU architecture,
// with an on-disk cache of the results. Needs NVRTC but no GPU. Private to the library.

#include "itkCudaDriver.h"
#include "CudaNonLocalMeansExport.h"

#include <string>
#include <vector>

namespace itk
{
namespace nlm
{

/** Everything that selects one compiled module. */
struct KernelConfig
{
  int Dimension{ 3 };
  int Components{ 1 };
  int PatchSize{ 3 }; // odd; the largest along the axes when they differ
  int PatchDistance{ 3 };
  /** Per-axis patch sizes and distances (contract 6.4), where they differ between the axes: 0 and -1
   * (default) mean PatchSize and PatchDistance. The tiled kernel only. */
  int  AxisPatchSize[4]{ 0, 0, 0, 0 };
  int  AxisPatchDistance[4]{ -1, -1, -1, -1 };
  int  Tile[4]{ 32, 8, 8, 1 };
  int  ThreadCount{ 256 }; // divides the tile's voxel count
  int  ZSegments{ 1 };     // segments of the kernel's march along axis 2 (3D)
  int  MinBlocks{ 1 };     // blocks per SM the registers are budgeted for (__launch_bounds__)
  bool InputDouble{ false };
  bool OutputDouble{ false };
  bool SinglePrecision{ false }; // float arithmetic (opt-in, not bitwise)
  bool WideIndex{ false };       // 64-bit offsets inside a block's footprint
  bool Rician{ false };          // Rician noise model: squared values, the bias-corrected output
  bool NoiseMap{ false };        // a padded sigma^2 per cell (tiled kernel only)
  /** Whether the planner's CorrectedWeightsServe holds: the float64 weights may be computed by the
   * corrected quotient (contract 3a). The tiled kernel then takes it where TiledCorrectedWeights;
   * the column, shared-rows and buffered-weights kernels always take it (the planner chooses them
   * only where this holds). */
  bool CorrectedWeights{ false };
  bool Classic{ false }; // slow mode: the classic kernel (itkNonLocalMeansClassicKernel.cu)
  /** 0: the tiled or the shared-rows kernel (itkNonLocalMeansTiledKernel.cu, SharedRows). Otherwise the column kernel
   * (itkNonLocalMeansColumnKernel.cu: 2D and 3D, patch size >= 3) with this many rows along axis 1
   * per thread; then Tile = { 32 - (PatchSize - 2), Rows * ThreadCount / 32, planes, 1 } (planes 1 in
   * 2D, where a thread marches through its rows). */
  int Rows{ 0 };
  /** Column kernel: read the footprint from the padded input in global memory (through the L1
   * cache) instead of copying it into shared memory, which then does not grow with the distance. */
  bool GlobalFootprint{ false };
  /** The shared-rows kernel (itkNonLocalMeansSharedRowsKernel.cu: 3D, patch size >= 3, for large
   * patches): Tile = { 32 - (PatchSize - 2), ThreadCount / 32, planes, 1 }. */
  bool SharedRows{ false };
  /** 0: another kernel. Otherwise the buffered-weights kernel (itkNonLocalMeansBufferedWeightsKernel.cu:
   * 3D, patch size >= 3, for large patches), whose weights pass and gather take this many pairs of
   * shifts per batch: Tile = { 32 - (PatchSize - 2), ThreadCount / 32, planes, 1 } of the weights pass. */
  int WeightBatch{ 0 };
  /** Tiled kernel: the weights of a shift in two boxes of the tile's extent (the tile, and the
   * tile shifted by -t) instead of one box spanning both, so that shared memory does not grow
   * with the patch distance (where the spanning box does not fit the device). */
  bool SplitBoxes{ false };
  /** The padding module (itkNonLocalMeansPadKernel.cu): nlm_pad alone, which depends only on
   * InputDouble, SinglePrecision and Components (PaddingConfig); every other module leaves it out. */
  bool Padding{ false };

  /** The odd patch size along `axis`. */
  int
  PatchSizeAlong(int axis) const
  {
    return AxisPatchSize[axis] > 0 ? AxisPatchSize[axis] : PatchSize;
  }
  /** The patch distance along `axis`. */
  int
  PatchDistanceAlong(int axis) const
  {
    return AxisPatchDistance[axis] >= 0 ? AxisPatchDistance[axis] : PatchDistance;
  }
  /** Cells of padding the input needs on each side along `axis`: PatchSize / 2 + PatchDistance. */
  int
  Margin(int axis) const
  {
    return PatchSizeAlong(axis) / 2 + PatchDistanceAlong(axis);
  }
  /** Whether the patch size or the distance differs between the used axes. */
  bool
  IsAnisotropic() const
  {
    for (int a = 1; a < Dimension; ++a)
    {
      if (PatchSizeAlong(a) != PatchSizeAlong(0) || PatchDistanceAlong(a) != PatchDistanceAlong(0))
      {
        return true;
      }
    }
    return false;
  }

  /** Whether the tiled kernel takes the corrected quotient (NLM_CORRECTED_WEIGHTS): CorrectedWeights,
   * float64 arithmetic and no noise map (CorrectedWeightsServe bounds the patch distances by Sigma,
   * not by the map). The one kernel whose code the field changes. */
  bool
  TiledCorrectedWeights() const
  {
    return CorrectedWeights && !SinglePrecision && !NoiseMap && Rows == 0 && !SharedRows && WeightBatch == 0 &&
           !Classic && !Padding;
  }

  /** The NVRTC options (macros) of this configuration. */
  std::vector<std::string>
  Macros() const;

  /** Shared memory one block needs, in bytes. */
  size_t
  SharedBytes() const;

  /** Threads per block. */
  int
  Threads() const
  {
    return ThreadCount;
  }

  /** "4D K1 s3 d2 tile 24x4x8x4 threads 1024x1 z-segments 1 split boxes corrected float->float arithmetic double" */
  std::string
  Describe() const;
};

/** The configuration of the padding module that `config`'s runs use: its input type, arithmetic
 * type and components, every other field at its default. */
CudaNonLocalMeans_EXPORT KernelConfig
PaddingConfig(const KernelConfig & config);

/** A compiled module image: a cubin, or PTX for the driver to finish when NVRTC does not know the
 * device's architecture. */
struct CompiledKernel
{
  std::vector<char> Image;
  bool              IsPTX{ false };
  std::string       Target;              // "sm_90" or "compute_90"
  double            Milliseconds{ 0.0 }; // compile time (0 when read from the disk cache)
  bool              FromDiskCache{ false };
  std::string       CachePath;    // the disk cache entry it was read from or stored in ("" if none)
  std::string       CacheProblem; // why an entry that was there was not used ("" if none)
  std::string       Log;          // NVRTC's log (warnings, resource usage with -Xptxas=-v)
};

/** How CompileKernel uses the disk cache: read an entry and store what it compiles, or compile and
 * store (to replace an entry the driver would not load). */
enum class CacheUse
{
  ReadAndWrite,
  WriteOnly
};

/** Compiles `config` for compute capability `arch` (e.g. 90 for sm_90), or reads it from the disk
 * cache (itkNonLocalMeansKernelCache.h: verified, owner-only). Throws ExceptionObject with NVRTC's
 * log on failure. Overrides::NvrtcOptions are added to NVRTC's options (and to the cache key). */
CudaNonLocalMeans_EXPORT CompiledKernel
CompileKernel(const cuda::NvrtcAPI & nvrtc,
              const KernelConfig &   config,
              int                    arch,
              CacheUse               use = CacheUse::ReadAndWrite);

/** The kernel cache folder, or "" when the disk cache is disabled (Overrides::KernelCacheDirectory). */
CudaNonLocalMeans_EXPORT std::string
                         KernelCacheDirectory();

/** Version of the loaded NVRTC as major*1000 + minor*10 (13000 for 13.0). */
int
NvrtcVersion(const cuda::NvrtcAPI & nvrtc);

} // namespace nlm
} // namespace itk

#endif
