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
#ifndef itkNonLocalMeansOverrides_h
#define itkNonLocalMeansOverrides_h

// The settings that the environment may change, read in one place (ReadOverrides) and kept for
// the life of the process. Nothing else in the library reads the environment. White-box tests set
// the struct directly with SetOverrides. Private to the library.

#include "CudaNonLocalMeansExport.h"

#include <cstddef>
#include <string>
#include <vector>

namespace itk
{
namespace nlm
{

/** Environment overrides of the CUDA backend, each with the variable that sets it. */
struct Overrides
{
  /** CUDANONLOCALMEANS_DEVICE: ordinal(s) of the CUDA device(s) to use when the filter names none,
   * e.g. "1" or "0,1" (default 0). Each slab goes to one of them. */
  std::vector<int> Devices{ 0 };
  /** CUDANONLOCALMEANS_NVRTC_LIBRARY: the NVRTC library file to load, instead of the search. */
  std::string NvrtcLibrary;
  /** CUDANONLOCALMEANS_NVRTC_FALLBACK: an NVRTC library tried after the search found none (the
   * Python package names pip's nvidia-cuda-nvrtc here). */
  std::string NvrtcFallback;
  /** CUDA_PATH and CUDA_HOME: toolkit roots whose library folder is searched for NVRTC. */
  std::vector<std::string> CudaRoots;
  /** The kernel cache folder, "" when the disk cache is off (CUDANONLOCALMEANS_KERNEL_CACHE=0).
   * CUDANONLOCALMEANS_KERNEL_CACHE_DIR, else $XDG_CACHE_HOME/itk-cudanonlocalmeans/kernels, else
   * ~/.cache/itk-cudanonlocalmeans/kernels (%LOCALAPPDATA% on Windows). */
  std::string KernelCacheDirectory;
  /** CUDANONLOCALMEANS_NVRTC_OPTIONS: extra NVRTC options, separated by spaces (part of the
   * cache key), e.g. "-Xptxas=-v -lineinfo". */
  std::vector<std::string> NvrtcOptions;

  /** CUDANONLOCALMEANS_CPU_SIMD: the CPU backend's SIMD target (avx512, avx2, sse2, neon, vector2
   * (2 lanes on other processors), scalar; "" or auto: the best one this CPU runs). All give bitwise
   * the same output. */
  std::string CPUInstructionSet;

  // Seams for tests and tuning; the defaults are the planner's choice.
  /** CUDANONLOCALMEANS_CPU_CHUNK: output cells per chunk of the CPU backend's fast mode (0: its
   * choice). */
  long long CPUChunkCells{ 0 };
  /** CUDANONLOCALMEANS_STAGING_CHUNK: bytes per staged copy (64 or more; 0: 16 MiB). */
  std::size_t StagingChunkBytes{ 0 };
  /** CUDANONLOCALMEANS_CHUNK_TILES: tiles per kernel launch (0: the planner's choice). */
  long long ChunkTiles{ 0 };
  /** CUDANONLOCALMEANS_KERNEL_STREAMS=1|2: kernel launches on one stream, or alternating between
   * two (0: two, the planner's choice; the buffered-weights kernel's batches always take one). */
  long long KernelStreams{ 0 };
  /** CUDANONLOCALMEANS_COLUMNS=rows,planes,warps,blocks: a forced shape of the column kernel (2D: planes is 1)
   * (empty: none); =0 sets ColumnKernelOff. */
  std::vector<int> ColumnShape;
  bool             ColumnKernelOff{ false };
  /** CUDANONLOCALMEANS_COLUMN_FOOTPRINT=shared|global: where the column kernel reads its footprint
   * ("" or auto: the planner's choice). */
  std::string ColumnFootprint;
  /** CUDANONLOCALMEANS_SHARED_ROWS=planes,warps,blocks: a forced shape of the 3D shared-rows
   * kernel (empty: the planner's choice); =0 sets SharedRowsKernelOff. */
  std::vector<int> SharedRowsShape;
  bool             SharedRowsKernelOff{ false };
  /** CUDANONLOCALMEANS_BUFFERED_WEIGHTS=0|1|warps,planes,pairs: the 3D buffered-weights kernel off
   * (0), or taken wherever it can serve (1), with a forced shape (warps per block, at most 32;
   * planes per block and shift pairs per batch, at most 1024) when given ("" or auto: the planner's choice). */
  bool             BufferedWeightsOff{ false };
  bool             BufferedWeightsForced{ false };
  std::vector<int> BufferedWeightsShape;
  /** CUDANONLOCALMEANS_TILE=t0,t1,t2,t3,threads[,segments[,blocks]]: a forced tiled-kernel shape. */
  std::vector<int> TileShape;
  /** CUDANONLOCALMEANS_SPLIT_BOXES=0|1|auto: the tiled kernel's weights in two boxes of the tile's
   * extent never (0: a problem whose spanning box does not fit is refused), always (1), or where no
   * spanning box fits the device or they are estimated cheaper ("" or auto). */
  bool SplitBoxesOff{ false };
  bool SplitBoxesForced{ false };
  /** CUDANONLOCALMEANS_LIST_CONFIGURATIONS: print the planner's ranking to standard output. */
  bool ListConfigurations{ false };

  /** Why a variable above was refused ("" when all are valid), naming the variable and the
   * value to use; the CUDA backend then refuses to run (Backend Auto computes on the CPU). */
  std::string Invalid;
  /** The same for the CPU backend's variables; the CPU backend then throws this message. */
  std::string CPUInvalid;
};

/** Parses the environment now (what GetOverrides returns unless a test replaced it). */
CudaNonLocalMeans_EXPORT Overrides
ReadOverrides();

/** The overrides in force: the environment as read at the first call, or what SetOverrides set. */
CudaNonLocalMeans_EXPORT Overrides
GetOverrides();

/** Replaces the overrides in force (white-box tests). */
CudaNonLocalMeans_EXPORT void
SetOverrides(const Overrides & overrides);

} // namespace nlm
} // namespace itk

#endif
