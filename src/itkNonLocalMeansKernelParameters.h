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
#ifndef itkNonLocalMeansKernelParameters_h
#define itkNonLocalMeansKernelParameters_h

// The parameter blocks of the CUDA kernels, passed by value to cuLaunchKernel. Compiled by the
// host C++ compiler for the CUDA backend and, as text, by NVRTC for the kernels, so that both
// sides share one layout. Built-in types only; includes nothing.

namespace itk
{
namespace nlm
{

/** Parameters of one launch of nlm_fast (one chunk of tiles of one slab). */
struct FastKernelParameters
{
  long long ySize[4];   // padded input extent per axis (cells)
  long long outSize[4]; // output region extent per axis
  long long tiles[4];   // tiles per axis
  long long tileOffset; // first tile of this launch
  double    norm;       // the distance normalization (doc/numerical-contract.md 2.1)
  double    invNorm;    // the double nearest 1 / norm
  double    noise;      // K * (2 * sigma^2)
  // The opt-in extensions (doc/numerical-contract.md section 6).
  double             bias;        // Rician: 2 * sigma^2 (without a noise map)
  unsigned long long noiseMap;    // device address of the padded sigma^2 (Y's cells, one value each), or 0
  unsigned long long activeTiles; // device address of one byte per tile of the slab (0: skip the tile), or 0
  // The classic kernel (slow mode).
  long long          outStart[4];   // image index of the slab's first output cell
  long long          imageSize[4];  // whole image extent (candidates are clipped to it)
  unsigned long long classicKernel; // device address of the patch kernel wk (working type), or 0
  // The buffered-weights kernel (itkNonLocalMeansBufferedWeightsKernel.cu), per batch of shift pairs.
  unsigned long long weights;        // device address of the batch's weights: 2 * pairs slots of weightSize cells
  unsigned long long accumulators;   // device address of W, then R_k, over the output region (arithmetic type)
  long long          weightSize[3];  // cells of a weight slot per axis: outSize + 2 * distance
  long long          weightTiles[3]; // blocks of the weights pass per axis for one pair of shifts
  long long          firstPair;      // the batch: pairs [firstPair, firstPair + pairs)
  long long          pairs;
  int                firstBatch; // 1: the accumulators start at zero
  int                lastBatch;  // 1: the gather writes the output
};

/** Parameters of nlm_pad (reflect padding of the uploaded input planes). */
struct PadKernelParameters
{
  long long padStart[4];  // image index of the first padded cell, per axis
  long long padSize[4];   // padded extent
  long long imageSize[4]; // whole image extent (reflection borders)
  long long inStart[4];   // image index of the first cell of the uploaded input
  long long inSize[4];    // extent of the uploaded input
  long long clampLo[4];   // image indices outside [clampLo, clampHi] only feed discarded voxels
  long long clampHi[4];
};

/** The buffered-weights kernel's gather: threads per block along axes 0 and 1, and voxels per
 * thread along axis 0, BufferedGatherBlock[0] cells apart (so that a thread's loads for its voxels
 * are its warp's loads that many cells further: offsets known at compile time). A block covers
 * BufferedGatherBlock[0] * BufferedGatherBlock[2] voxels along axis 0, BufferedGatherBlock[1] along
 * axis 1 and one plane along axis 2. */
constexpr int BufferedGatherBlock[3] = { 32, 8, 4 };
/** Voxels a gather block covers along axis 0 (the gather's grid along axis 0 counts these). */
constexpr int BufferedGatherVoxels0 = BufferedGatherBlock[0] * BufferedGatherBlock[2];

/** The buffered-weights kernel's weights pass: whether step 1 takes its rows in pairs (a lane sums
 * two neighboring cells of one row: half the shuffles, for a swap between lanes and selects). Where
 * that was measured to pay: at patches 9 to 17 (BENCHMARKS.md "Step 1 on pairs of rows"); below, it
 * costs more instructions than it saves shuffles (and spills at patch 7 in float64), and above,
 * where some warps take two pairs, it spills. */
constexpr int BufferedWeightsPairedRowsFromPatch = 9;
constexpr int BufferedWeightsPairedRowsUpToPatch = 17;
constexpr bool
BufferedWeightsPairsRows(int patchSize)
{
  return patchSize >= BufferedWeightsPairedRowsFromPatch && patchSize <= BufferedWeightsPairedRowsUpToPatch;
}

/** The buffered-weights kernel's weights pass: cells of its shared buffers per row of 32 sums along
 * axis 0 (arithmetic in float or double). With rows in pairs a warp stores two neighboring rows at
 * once (lane 2m cells 2m and 2m + 1 of one, lane 2m + 1 those of the next), so a row is then 16
 * banks past a multiple of 32 from the one before, and the two rows of a store's phase are in
 * different banks. */
constexpr int
BufferedSumsRowStride(bool pairedRows, bool single)
{
  return !pairedRows ? 32 : (single ? 48 : 40);
}

/** The column kernel in 2D: chunks of a thread's rows. With more than one, the weights code of the
 * march is one unrolled chunk of rows / chunks rows run in a loop (the accumulators moved between
 * chunks), instead of all rows unrolled, and the warm-up before the first row (s - 2 cells) runs in
 * a loop of its own, not unrolled: 16 rows at patches 9 and up then compile about as fast as 8
 * (unrolled they took over 1 s). Patch sizes below
 * ColumnRowChunksFromPatch (patch 7's 16 rows compile within the bar and lose 13 % in chunks),
 * other row counts and 3D take one chunk (BENCHMARKS.md "The column kernel's rows in chunks"). */
constexpr int ColumnRowChunksFromPatch = 9;
constexpr int ColumnRowsInChunks = 16;
constexpr int
ColumnRowChunks(int dimension, int patchSize, int rows)
{
  return (dimension == 2 && patchSize >= ColumnRowChunksFromPatch && rows == ColumnRowsInChunks) ? 2 : 1;
}

/** nlm_pad's block: threads, and rows along axis 1 (a warp each, 32 cells along axis 0); its grid's
 * most blocks along each axis (it strides over the rest). */
constexpr int PadKernelThreads = 256;
constexpr int PadKernelRows = PadKernelThreads / 32;
static_assert(PadKernelThreads % 32 == 0, "nlm_pad's block is whole warps");
constexpr int PadKernelMaximumBlocks = 65535;

} // namespace nlm
} // namespace itk

#endif
