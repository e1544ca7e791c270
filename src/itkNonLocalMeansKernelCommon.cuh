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
#ifndef itkNonLocalMeansKernelCommon_cuh
#define itkNonLocalMeansKernelCommon_cuh

// Non-local means kernels (fast mode), compiled at run time by NVRTC, one module per
// configuration, with --fmad=false. They implement doc/numerical-contract.md and produce bitwise
// the output of the CPU backend (src/itkNonLocalMeansCPUBackend.cxx): a block owns a tile of output
// voxels; for every shift t, in scikit-image's order, it computes the weights over the union of the
// tile and the tile shifted by -t with the contract's separable sums (axis 0 first), in shared
// memory and registers, and every thread adds both terms of each of its voxels in the contract's
// order.
//
// Per shift: pass A sums the patch terms D along axis 0 (when a row of the box fits a warp, one
// warp per row and the neighbours' terms through shuffles; otherwise each thread evaluates the terms
// of its cell); pass B sums along axis 1 from shared memory and, in 3D, along axis 2 in registers
// while marching through the planes (in NLM_ZS segments), and turns the sums into weights, kept as
// the 32-bit high words of their doubles (the low words are zero); the gather adds the two terms of
// every voxel. Two barriers per shift (three in 4D, where axis 2 is summed from shared memory and
// axis 3 in registers).
//
// Configuration macros (set by the host):
//   NLM_DIM        spatial dimensions, 2..4
//   NLM_K          components per pixel
//   NLM_S          odd patch size
//   NLM_PD         patch distance
//   NLM_T0..NLM_T3 tile extent per axis (1 for unused axes)
//   NLM_NT         threads per block (divides the tile's voxel count)
//   NLM_ZS         segments of the march along axis 2 in pass B (3D)
//   NLM_MINBLOCKS  blocks per SM the registers are budgeted for
//   NLM_TIN        element type of the uploaded input: float or double
//   NLM_TOUT       element type of the output: float or double
//   NLM_REAL       arithmetic type, also of the padded input: double (bitwise contract) or float
//   NLM_REAL_IS_FLOAT 1 for float arithmetic
//   NLM_INDEX      integer type of offsets inside a block's footprint: int or long long
//   NLM_ROWS       column kernel: rows along axis 1 per thread
//   NLM_COLUMN_GLOBAL 1: the column kernel reads its footprint from global memory
//   NLM_RICIAN     1: Rician noise model (terms add w * Y^2; the output is bias-corrected)
//   NLM_NOISE_MAP  1: a padded sigma^2 per cell (FastKernelParameters::noiseMap) gives the noise
//                  term of every pair of grid points (tiled kernel only)
//   NLM_CORRECTED_WEIGHTS 1: the tiled kernel's float64 weights by the corrected quotient
//                  (KernelConfig::CorrectedWeights; the other kernels always take it)
//
// The tiled kernel is in itkNonLocalMeansTiledKernel.cu, the column kernel (2D and 3D, patch size 3
// or more) in itkNonLocalMeansColumnKernel.cu, the shared-rows kernel (3D, patch size 3 to 21) in
// itkNonLocalMeansSharedRowsKernel.cu; the host compiles one of them per configuration. The reflect
// padding (nlm_pad) is in a module of its own (itkNonLocalMeansPadKernel.cu).

#include "itkNonLocalMeansNumerics.h"
#include "itkNonLocalMeansKernelParameters.h"

typedef NLM_TIN   TIn;
typedef NLM_TOUT  TOut;
typedef NLM_REAL  Real;
typedef NLM_INDEX Index;

namespace
{
constexpr int DIM = NLM_DIM;
constexpr int K = NLM_K;
constexpr int S = NLM_S;
constexpr int O = S / 2;
constexpr int WIN = S - 1; // samples per axis of scikit-image's (s-1)-wide patch box
constexpr int EXT = (WIN > 0) ? WIN - 1 : 0;
constexpr int PD = NLM_PD;
constexpr int E = O + PD; // padding of the input on each side of a used axis

// Per axis (contract 6.4; the tiled kernel): NLM_S0..3 and NLM_PD0..3 where they differ between the
// axes, NLM_S and NLM_PD otherwise.
#ifndef NLM_S0
#  define NLM_S0 NLM_S
#  define NLM_S1 NLM_S
#  define NLM_S2 NLM_S
#  define NLM_S3 NLM_S
#  define NLM_PD0 NLM_PD
#  define NLM_PD1 NLM_PD
#  define NLM_PD2 NLM_PD
#  define NLM_PD3 NLM_PD
#endif
constexpr int WIN0 = NLM_S0 - 1, WIN1 = NLM_S1 - 1, WIN2 = NLM_S2 - 1, WIN3 = NLM_S3 - 1;
constexpr int EXT0 = (WIN0 > 0) ? WIN0 - 1 : 0, EXT1 = (WIN1 > 0) ? WIN1 - 1 : 0;
constexpr int EXT2 = (WIN2 > 0) ? WIN2 - 1 : 0, EXT3 = (WIN3 > 0) ? WIN3 - 1 : 0;
constexpr int O0 = NLM_S0 / 2, O1 = NLM_S1 / 2, O2 = NLM_S2 / 2, O3 = NLM_S3 / 2;
constexpr int PD0 = NLM_PD0, PD1 = NLM_PD1, PD2 = NLM_PD2, PD3 = NLM_PD3;
constexpr int E0 = O0 + PD0, E1 = O1 + PD1, E2 = O2 + PD2, E3 = O3 + PD3;
constexpr int T0 = NLM_T0;
constexpr int T1 = NLM_T1;
constexpr int T2 = NLM_T2;
constexpr int T3 = NLM_T3;
constexpr int NT = NLM_NT;

static_assert(DIM >= 2 && DIM <= 4, "2D, 3D or 4D");
static_assert(DIM > 2 || (T2 == 1 && T3 == 1), "unused axes have extent 1");
static_assert(DIM > 3 || T3 == 1, "unused axes have extent 1");

#if NLM_REAL_IS_FLOAT
typedef float WeightStore; // float weights: stored as they are
#else
typedef unsigned int WeightStore; // double weights: their high 32 bits (the low 32 are zero)
#endif

__device__ __forceinline__ int
Iabs(int v)
{
  return v < 0 ? -v : v;
}
__device__ __forceinline__ int
Imax(int a, int b)
{
  return a > b ? a : b;
}

#ifndef NLM_CORRECTED_WEIGHTS
#  define NLM_CORRECTED_WEIGHTS 0 // the tiled kernel's float64 weights by the corrected quotient
#endif

/** Weight of a raw distance, in its stored form: in float64 the division-free nearest-integer form,
 * exact for every norm, or with NLM_CORRECTED_WEIGHTS (the tiled kernel where the planner's
 * CorrectedWeightsServe holds) Markstein's corrected quotient (contract 3a), as CorrectedWeight. */
__device__ __forceinline__ WeightStore
Weight(Real raw, Real norm, Real invNorm, bool half)
{
#if NLM_REAL_IS_FLOAT
  const float dist = ((0.0f > raw) ? 0.0f : raw) * invNorm;
  if (dist > 5.0f)
  {
    return 0.0f;
  }
  // Schraudolph's exponential in float: the same 32-bit integer as the double version, whose
  // value (a double with 20 mantissa bits) is exactly representable as a float.
  const int      i = __float2int_rz(static_cast<float>(itk::nlm::kExpA) * -dist) + itk::nlm::kExpBC;
  const unsigned bits = (static_cast<unsigned>(i) - (896u << 20)) << 3;
  return (half ? 0.5f : 1.0f) * __uint_as_float(bits);
#elif NLM_CORRECTED_WEIGHTS
  return itk::nlm::FastModeWeightHighWordCorrected(raw, norm, invNorm, half);
#else
  return itk::nlm::FastModeWeightHighWordNoDivision(raw, norm, invNorm, half);
#endif
}

/** A weight in its stored form in the column, shared-rows and buffered-weights kernels: in float64
 * Markstein's corrected quotient (contract 3a), which needs itk::nlm::CorrectedQuotientFits(norm)
 * (the planner chooses these kernels only then). */
__device__ __forceinline__ WeightStore
CorrectedWeight(Real raw, Real norm, Real invNorm, bool half)
{
#if NLM_REAL_IS_FLOAT
  return Weight(raw, norm, invNorm, half);
#else
  return itk::nlm::FastModeWeightHighWordCorrected(raw, norm, invNorm, half);
#endif
}

/** A stored weight as a number. */
__device__ __forceinline__ Real
Unpack(WeightStore w)
{
#if NLM_REAL_IS_FLOAT
  return w;
#else
  return __hiloint2double(static_cast<int>(w), 0);
#endif
}

/** D(y) for the current shift: sum over channels of the squared difference, minus the noise term:
 * `noise`, or with a noise map K * (s2(y) + s2(y + t)), where s2 points at y's cell of the padded
 * sigma^2 (doc/numerical-contract.md 6.2). */
__device__ __forceinline__ Real
PatchTerm(const Real * __restrict__ y, const Real * __restrict__ s2, Index tOff, Real noise)
{
  Real acc = 0;
#pragma unroll
  for (int k = 0; k < K; ++k)
  {
    const Real diff = y[k] - y[tOff * K + k];
    acc = (k == 0) ? diff * diff : acc + diff * diff;
  }
#if NLM_NOISE_MAP
  return acc - static_cast<Real>(K) * (s2[0] + s2[tOff]);
#else
  return acc - noise;
#endif
}

/** The value a term adds: Y, or Y^2 for the Rician noise model (contract 6.1). */
__device__ __forceinline__ Real
Value(Real y)
{
#if NLM_RICIAN
  return y * y;
#else
  return y;
#endif
}

/** An output value from the accumulators: R / W, or for the Rician noise model
 * sqrt(M(R / W - bias, 0)) with bias = 2 sigma^2 (contract 6.1). */
__device__ __forceinline__ Real
Output(Real r, Real w, Real bias)
{
  const Real mean = r / w;
#if NLM_RICIAN
#  if NLM_REAL_IS_FLOAT
  const float v = mean - bias;
  return sqrtf((0.0f > v) ? 0.0f : v);
#  else
  return itk::nlm::RicianCorrection(mean, bias);
#  endif
#else
  (void)bias;
  return mean;
#endif
}

/** The coordinates (in tiles) of tile `tile` along the first AXES axes of the launch's tile grid,
 * axis 0 fastest; the last of them takes the rest of the index. */
template <int AXES>
__device__ __forceinline__ void
TileCoordinates(const itk::nlm::FastKernelParameters & p, long long tile, long long (&c)[AXES])
{
#pragma unroll
  for (int a = 0; a + 1 < AXES; ++a)
  {
    c[a] = tile % p.tiles[a];
    tile /= p.tiles[a];
  }
  c[AXES - 1] = tile;
}

/** Whether the block's tile has a voxel to compute (FastKernelParameters::activeTiles). */
__device__ __forceinline__ bool
TileIsActive(const itk::nlm::FastKernelParameters & p, long long tile)
{
  return p.activeTiles == 0 || reinterpret_cast<const unsigned char *>(p.activeTiles)[tile] != 0;
}
} // namespace

#endif
