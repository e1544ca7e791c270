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
#ifndef itkNonLocalMeansCPUKernels_h
#define itkNonLocalMeansCPUKernels_h

// The inner loops of the CPU backend's fast mode (doc/numerical-contract.md, section 2), compiled
// once per SIMD target (itkNonLocalMeansCPUKernels.hxx) and chosen at run time for the CPU that
// runs them. The lanes of a vector are neighbouring output voxels along axis 0, never terms of one
// sum, so every target computes bitwise the same numbers as the scalar one. Private to the library.

#include <cstdint>
#include <string>
#include <vector>

namespace itk
{
namespace nlm
{
namespace cpu
{

/** The most doubles in a vector of any target. */
constexpr int MaximumLanes = 8;

/** The most shifts one call of Kernels::ProcessShifts takes. */
constexpr int MaximumBatch = 4;

/** n rounded up to a multiple of lanes. The kernels compute whole vectors along axis 0: the rows of
 * the weight buffer hold RoundUp(WSize[0], Lanes) values (Stride[1] at least that), the scratch row
 * RoundUp(RoundUp(WSize[0], Lanes) + Window - 1, Lanes), and the padded input is followed by
 * 2 * MaximumLanes cells that may be read (their values never reach an output). */
static inline std::int64_t // internal linkage: no copy compiled for a wider target is shared
RoundUp(std::int64_t n, int lanes)
{
  return (n + lanes - 1) / lanes * lanes;
}

/** Everything the kernels need for one chunk of output cells and one shift t: pointers into the
 * solver's buffers and the extents of the boxes (axis 0 first; unused axes have extent 1). */
struct ShiftJob
{
  int Dimension{ 2 };
  int Components{ 1 };
  int Window{ 0 };                 // samples per axis of the patch box, PatchSize - 1 (0: PatchSize 1);
                                   // -1 when they differ between the axes (see Windows)
  int    Windows[4]{ 0, 0, 0, 0 }; // samples of the patch box along each axis (all 0 or none)
  double Noise{ 0.0 };
  double Norm{ 1.0 };
  double Alpha{ 1.0 };
  bool   TargetFirst{ false }; // t is lexicographically positive: the target term is added first

  // D box (patch terms) and W box (weights) of the shift; W's cells are D's first cells on every
  // axis. The weight buffer has strides Stride (cells) over D's extents (rows of whole vectors).
  std::int64_t    DSize[4]{ 1, 1, 1, 1 };
  std::int64_t    WSize[4]{ 1, 1, 1, 1 };
  std::int64_t    Stride[4]{ 1, 1, 1, 1 };
  double *        Weights{ nullptr };
  double *        Row{ nullptr };       // scratch row (RoundUp above)
  double *        Ring{ nullptr };      // scratch of (Window + 1) * Stride[Dimension - 1] doubles
  const double ** RingSlots{ nullptr }; // scratch of Window + 1 pointers

  // The padded input Y (values, K per cell): its strides, Y at the D box's first cell, the shift.
  std::int64_t   YStride[4]{ 1, 1, 1, 1 };
  const double * YAtD{ nullptr };
  std::int64_t   ShiftOffset{ 0 };

  // Noise map (contract section 6.2), when S2AtD is set: the padded sigma^2, one value per cell in
  // Y's cell layout (strides S2Stride), at the D box's first cell; the shift in cells. The noise
  // term of D(y) is then NoiseScale * (S2(y) + S2(y + t)) instead of Noise.
  const double * S2AtD{ nullptr };
  std::int64_t   S2Stride[4]{ 1, 1, 1, 1 };
  std::int64_t   S2ShiftOffset{ 0 };
  double         NoiseScale{ 1.0 };

  // Rician noise model (contract section 6.1): the terms add w * Y_k^2 instead of w * Y_k.
  bool SquareValues{ false };

  // The chunk: its extents; where its first cell's weight w(x, t) is in a W slab (CentreWeight)
  // and in which W slab (CentreSlab, = max(t_last, 0)); the same for w(x - t, t): the offset
  // TargetWeightOffset from there within a slab and TargetSlab (= max(-t_last, 0)); Y at its first
  // cell, and its accumulators. Weights is a ring of WeightSlabs (|t_last| + 2) W slabs.
  std::int64_t   ChunkSize[4]{ 1, 1, 1, 1 };
  std::int64_t   CentreWeight{ 0 };
  std::int64_t   TargetWeightOffset{ 0 };
  std::int64_t   CentreSlab{ 0 };
  std::int64_t   TargetSlab{ 0 };
  std::int64_t   WeightSlabs{ 1 };
  const double * YAtChunk{ nullptr };
  std::int64_t   OutputStride[4]{ 1, 1, 1, 1 };
  double *       WeightSum{ nullptr };
  double *       Result{ nullptr };
};

/** The most components classic mode's vector kernels take (more: the backend's scalar loop). */
constexpr int MaximumClassicComponents = 4;

/** Classic (slow) mode for a run of output pixels along axis 0 whose candidate windows are not
 * clipped along axis 0 (contract section 3), in the working type TReal: lane l of a vector is the
 * pixel l further along axis 0, so each lane runs the scalar loop's operations in its order. X is
 * the local reflect-padded copy of the input, one plane per component. */
template <typename TReal>
struct ClassicRun
{
  const TReal *        X{ nullptr };
  int                  Components{ 1 };        // K, at most MaximumClassicComponents
  std::int64_t         ComponentStride{ 0 };   // cells from one component's plane of X to the next
  std::int64_t         Stride[3]{ 1, 1, 1 };   // X's strides in cells (axis 0 first; Stride[0] is 1)
  const TReal *        Kernel{ nullptr };      // wk over the patch, patch row a0 outermost
  const std::int64_t * PatchOffset{ nullptr }; // the kernel's entries as cell offsets from a corner
  int                  PatchSize{ 1 };         // rows a0 of the kernel
  int                  RowLength{ 1 };         // entries per row
  TReal                V{ 0 };                 // (T)(2 sigma^2)
  bool                 Square{ false };        // Rician: values Y^2
  int                  Distance{ 0 };          // the candidates' shifts along axis 0: -Distance ... Distance
  std::int64_t         T1Lo{ 0 }, T1Hi{ 0 }, T2Lo{ 0 }, T2Hi{ 0 }; // along axes 1 and 2 (inclusive, clipped)
  std::int64_t         Corner{ 0 };                                // X offset of the first pixel's patch corner (x - o)
  std::int64_t         Centre{ 0 };                                // offset from a candidate's corner to its centre
  std::int64_t         Count{ 0 };                                 // pixels, a multiple of ClassicLanes<TReal>
  TReal *              WeightSum{ nullptr };                       // out: wsum per pixel
  TReal *              Result{ nullptr };                          // out: nv per pixel, Count values per component
};

/** One SIMD target's kernels. */
struct Kernels
{
  const char * Name;
  int          Lanes;
  /** For `count` (at most MaximumBatch) jobs of one chunk and of consecutive shifts with the same
   * last component: the weights of each shift over its W box and both terms of every cell. */
  void (*ProcessShifts)(const ShiftJob * jobs, int count);
  /** out[i] = nlm::FastModeWeight(raw[i], norm, alpha) for i < count (what ProcessShifts uses);
   * alpha is the contract's 0.5 or 1.0. */
  void (*Weights)(const double * raw, std::int64_t count, double norm, double alpha, double * out);
  /** Classic mode over a run (null for the scalar target: the backend's own loop); the runs' pixel
   * counts are multiples of ClassicFloatLanes and ClassicDoubleLanes (2 Lanes and Lanes). */
  void (*ClassicFloat)(const ClassicRun<float> & run);
  void (*ClassicDouble)(const ClassicRun<double> & run);
};

/** The targets this build has and this CPU can run, best first; "scalar" is always last. */
std::vector<const Kernels *>
AvailableKernels();

/** The kernels to use: the best target when `request` is "" or "auto", else the named one.
 * Throws ExceptionObject naming CUDANONLOCALMEANS_CPU_SIMD and the available targets when this
 * build or this CPU has no such target. */
const Kernels &
SelectKernels(const std::string & request);

// One getter per target, defined in the target's translation unit (null when it was not built).
const Kernels *
ScalarKernels();
const Kernels *
BaselineKernels();
const Kernels *
AVX2Kernels();
const Kernels *
AVX512Kernels();

} // namespace cpu
} // namespace nlm
} // namespace itk

#endif
