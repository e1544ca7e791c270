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
// The body of the CPU fast-mode kernels (itkNonLocalMeansCPUKernels.h), included once per SIMD
// target by a translation unit that defines
//   NLM_LANES        doubles per vector (1: plain scalar code),
//   NLM_TARGET       the target's name as a string,
//   NLM_NAMESPACE    a namespace for its code (one per target),
//   NLM_KERNELS_GETTER the name of the getter it defines (e.g. AVX2Kernels),
// and compiles it with that target's instruction set (and -ffp-contract=off, as the whole library).
// Lanes are neighbouring cells along axis 0; every lane computes its own sums in the contract's
// order, so each target's output is bitwise the scalar one. Everything but the getter has internal
// linkage, so that no function compiled for a wider instruction set can be picked by the linker for
// another translation unit.

#include "itkNonLocalMeansCPUKernels.h"

// Only its constants are used by the vector targets (its functions are scalar and inline).
#include "itkNonLocalMeansNumerics.h"

#include <utility>

#if defined(__AVX2__) || defined(__AVX512F__)
#  include <immintrin.h>
#endif

namespace itk
{
namespace nlm
{
namespace cpu
{
namespace NLM_NAMESPACE
{
namespace
{
using Int = std::int64_t;
constexpr int Lanes = NLM_LANES;

#if NLM_LANES == 1
using V = double;

inline V
Splat(double x)
{
  return x;
}

inline V
Load(const double * p)
{
  return *p;
}

inline void
Store(double * p, V v)
{
  *p = v;
}

/** What the weight of a job needs, copied out of the job so that the loops keep it in registers. */
struct WeightParameters
{
  double Norm;
  double Alpha;
};

inline WeightParameters
WeightParametersOf(double norm, double alpha)
{
  return WeightParameters{ norm, alpha };
}

inline V
Weight(V raw, WeightParameters w)
{
  return FastModeWeight(raw, w.Norm, w.Alpha);
}
#else
typedef double        V __attribute__((vector_size(8 * NLM_LANES)));
typedef std::uint64_t VU64 __attribute__((vector_size(8 * NLM_LANES)));

inline V
Splat(double x)
{
  return x - V{}; // x - (+0.0) is x for every x, -0.0 and NaN included
}

/** Lanes doubles at p (no alignment needed). */
inline V
Load(const double * p)
{
  V v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

inline void
Store(double * p, V v)
{
  __builtin_memcpy(p, &v, sizeof(v));
}

/** a where mask is set, else b. */
inline V
Select(VU64 mask, V a, V b)
{
  return (V)((mask & (VU64)a) | (~mask & (VU64)b));
}

#  if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#    define NLM_LANE_SHUFFLES 1
/** The vector of lanes J, J + 1, ..., J + Lanes - 1 of the pair (a, b): the cells J further along
 * axis 0 (0 < J < Lanes). */
template <int J, std::size_t... I>
inline V
LanesFrom(V a, V b, std::index_sequence<I...>)
{
  return __builtin_shufflevector(a, b, (static_cast<int>(I) + J)...);
}

/** Term j of a window sum whose first term is lane 0 of d[0]: the cells j further along axis 0. */
template <int J, std::size_t M>
inline V
WindowTerm(const V (&d)[M])
{
  if constexpr (J % Lanes == 0)
  {
    return d[J / Lanes];
  }
  else
  {
    return LanesFrom<J % Lanes>(d[J / Lanes], d[J / Lanes + 1], std::make_index_sequence<Lanes>{});
  }
}

/** d[0][0] + d(1) + ... + d(TWindow - 1), left to right, on each lane (d(j): WindowTerm<j>). */
template <int TWindow, std::size_t M, int... J>
inline V
LaneWindowSum(const V (&d)[M], std::integer_sequence<int, J...>)
{
  V acc = d[0];
  ((acc = acc + WindowTerm<J + 1>(d)), ...);
  return acc;
}
#  endif

/** nlm::FastModeWeight on every lane, bit for bit (doc/numerical-contract.md, section 3b):
 * dist = CythonMax(raw, 0) / norm and the cutoff as written; the truncation of p = kExpA * -dist
 * toward zero is ceil(p) (p <= 0), taken as the nearest integer (adding and subtracting 1.5 * 2^52,
 * exact for |p| < 2^51) plus one where that is below p; c + kExpBC + 1.5 * 2^52 then holds
 * c + kExpBC in the low 32 bits of its representation, which a 64-bit shift moves to the high
 * word. alpha = 0.5 is a decrement of the exponent field (fe's values are normal numbers). Lanes
 * beyond the cutoff compute garbage (no integer conversion is involved) and are then set to 0. */
constexpr double kMagic = 6755399441055744.0; // 1.5 * 2^52

/** What the weight of a job needs, copied out of the job so that the loops keep it in registers:
 * the norm, the constant that turns the ceiling into fe's high word (alpha = 0.5 subtracts 2^20
 * from the high word: the exponent minus one), and for AVX-512 1 / norm and whether the corrected
 * quotient gives the division's distance (CorrectedQuotientFits). */
struct WeightParameters
{
  V    Norm;
  V    Offset;
  V    InvNorm;
  bool Corrected;
};

inline WeightParameters
WeightParametersOf(double norm, double alpha) // alpha: 0.5 or 1.0
{
  return WeightParameters{ Splat(norm),
                           Splat(kMagic + kExpBC - (alpha == 0.5 ? 1048576.0 : 0.0)),
                           Splat(1.0 / norm),
                           CorrectedQuotientFits(norm) };
}

#  if defined(__AVX512F__) && NLM_LANES == 8
/** The same weight with AVX-512's maximum (whose operand order is Cython's M(raw, 0)) and rounding
 * toward +infinity (the ceiling, exact), and the cutoff as a zeroing mask. Where the norm fits
 * (CorrectedQuotientFits) the distance is the corrected quotient (nlm::CorrectedQuotient: a
 * multiplication and two FMAs) instead of the division: the quotient is the division's from
 * M(raw, 0) >= 2^-960 on, and a smaller one (never negative) gives distance 0's weight either way,
 * so the weight is FastModeWeight's for every raw. An infinite raw, or a quotient that overflows,
 * then gives NaN instead of +infinity: both are beyond the cutoff (an ordered comparison). */
inline V
Weight(V raw, WeightParameters w)
{
  const __m512d zero = _mm512_setzero_pd();
  const __m512d m = _mm512_max_pd(zero, (__m512d)raw);
  __m512d       dist;
  if (w.Corrected)
  {
    const __m512d q = _mm512_mul_pd(m, (__m512d)w.InvNorm);
    dist = _mm512_fmadd_pd(_mm512_fnmadd_pd(q, (__m512d)w.Norm, m), (__m512d)w.InvNorm, q);
  }
  else
  {
    dist = _mm512_div_pd(m, (__m512d)w.Norm);
  }
  const __m512d  p = _mm512_mul_pd(_mm512_set1_pd(-kExpA), dist);
  const __m512d  c = _mm512_roundscale_pd(p, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
  const __m512i  fe = _mm512_slli_epi64(_mm512_castpd_si512(_mm512_add_pd(c, (__m512d)w.Offset)), 32);
  const __mmask8 kept = _mm512_cmp_pd_mask(dist, _mm512_set1_pd(kDistanceCutoff), _CMP_LE_OQ);
  return (V)_mm512_maskz_mov_pd(kept, _mm512_castsi512_pd(fe));
}
#  elif defined(__AVX2__) && NLM_LANES == 4
/** The same weight with AVX's maximum (Cython's operand order) and rounding toward +infinity. */
inline V
Weight(V raw, WeightParameters w)
{
  const __m256d zero = _mm256_setzero_pd();
  const __m256d dist = _mm256_div_pd(_mm256_max_pd(zero, (__m256d)raw), (__m256d)w.Norm);
  const __m256d p = _mm256_mul_pd(_mm256_set1_pd(-kExpA), dist);
  const __m256d c = _mm256_round_pd(p, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
  const __m256i fe = _mm256_slli_epi64(_mm256_castpd_si256(_mm256_add_pd(c, (__m256d)w.Offset)), 32);
  const __m256d kept = _mm256_cmp_pd(dist, _mm256_set1_pd(kDistanceCutoff), _CMP_NGT_UQ);
  return (V)_mm256_and_pd(kept, _mm256_castsi256_pd(fe));
}
#  else
inline V
Weight(V raw, WeightParameters w)
{
  const V zero = Splat(0.0);
  const V dist = Select((VU64)(zero > raw), zero, raw) / w.Norm;
  const V p = Splat(kExpA) * (-dist);
  const V nearest = (p + Splat(kMagic)) - Splat(kMagic);
  const V c = Select((VU64)(nearest < p), nearest + Splat(1.0), nearest);
  const V fe = (V)(((VU64)(c + w.Offset)) << 32);
  return Select((VU64)(dist > Splat(kDistanceCutoff)), zero, fe);
}
#  endif
#endif

/** p[0] + p[step] + ... + p[(window - 1) step], left to right, on each lane. TWindow is the window
 * when it is a compile-time constant (the loop is then unrolled), 0 otherwise. */
template <int TWindow>
inline V
WindowSum(const double * p, Int step, int window)
{
  const int n = (TWindow > 0) ? TWindow : window;
  V         acc = Load(p);
  for (int s = 1; s < n; ++s)
  {
    acc = acc + Load(p + s * step);
  }
  return acc;
}

/** Calls body(offset of the row in a box with strides `stride`, row coordinates) for every row. */
template <typename TBody>
inline void
ForRows(const Int * size, const Int * stride, TBody && body)
{
  for (Int i3 = 0; i3 < size[3]; ++i3)
  {
    for (Int i2 = 0; i2 < size[2]; ++i2)
    {
      for (Int i1 = 0; i1 < size[1]; ++i1)
      {
        body(i1 * stride[1] + i2 * stride[2] + i3 * stride[3], i1, i2, i3);
      }
    }
  }
}

/** The extents of one slab of the W box (its last axis 1), axis 0 in whole vectors. */
inline void
OneWSlab(const ShiftJob & j, Int * extent)
{
  extent[0] = RoundUp(j.WSize[0], Lanes);
  for (int a = 1; a < 4; ++a)
  {
    extent[a] = (a == j.Dimension - 1) ? 1 : j.WSize[a];
  }
}

/** The patch terms of one row with a noise map (contract section 6.2): D(y) = sum_k (Y_k(y) -
 * Y_k(y + t))^2 - NoiseScale * (S2(y) + S2(y + t)), for n cells (a multiple of the lanes). */
inline void
PatchTermsWithNoiseMap(const ShiftJob & j,
                       const double *   y,
                       const double *   yt,
                       const double *   s,
                       const double *   st,
                       Int              n,
                       double *         row)
{
  const int K = j.Components;
  if (K == 1)
  {
    const V scale = Splat(j.NoiseScale);
    for (Int i = 0; i < n; i += Lanes)
    {
      const V diff = Load(y + i) - Load(yt + i);
      Store(row + i, diff * diff - scale * (Load(s + i) + Load(st + i)));
    }
    return;
  }
  for (Int i = 0; i < n; ++i)
  {
    double acc = 0.0;
    for (int k = 0; k < K; ++k)
    {
      const double diff = y[K * i + k] - yt[K * i + k];
      acc = acc + diff * diff;
    }
    row[i] = acc - j.NoiseScale * (s[i] + st[i]);
  }
}

#if defined(NLM_LANE_SHUFFLES)
/** The patch terms D(y) = (Y(y) - Y(y + t))^2 - noise of one row (one component, no noise map) and
 * their window sums along axis 0 into w[0, w0), the sums' later terms taken from the next vectors'
 * lanes instead of from memory: the same terms in the same order as WindowSum over a row of terms. */
template <int TWindow>
inline void
RowSumsByLanes(const double * y, const double * yt, V noise, Int w0, double * w)
{
  constexpr std::size_t M = 1 + (TWindow - 1 + Lanes - 1) / Lanes; // vectors one sum reaches
  V                     d[M];
  const auto            term = [&](Int i) {
    const V diff = Load(y + i) - Load(yt + i);
    return diff * diff - noise;
  };
  for (std::size_t m = 0; m + 1 < M; ++m)
  {
    d[m] = term(static_cast<Int>(m) * Lanes);
  }
  for (Int i = 0; i < w0; i += Lanes)
  {
    d[M - 1] = term(i + static_cast<Int>(M - 1) * Lanes);
    Store(w + i, LaneWindowSum<TWindow>(d, std::make_integer_sequence<int, TWindow - 1>{}));
    for (std::size_t m = 0; m + 1 < M; ++m)
    {
      d[m] = d[m + 1];
    }
  }
}
#endif

/** 1. For every row of slab z of the D box (index z on its last axis): D(y) = sum_k (Y_k(y) -
 * Y_k(y + t))^2 - noise into job.Row, then its window sums along axis 0 into `slab` (laid out as
 * one slab of the weight buffer). Whole vectors: the padding lanes compute values never used. */
template <int TWindow>
void
PatchTermsAndRowSums(const ShiftJob & j, Int z, double * slab)
{
  const int K = j.Components;
  const int last = j.Dimension - 1;
  const Int w0 = RoundUp(j.WSize[0], Lanes);
  const Int n0 = RoundUp(w0 + j.Windows[0] - 1, Lanes);
  const V   noise = Splat(j.Noise);
  double *  row = j.Row;
  Int       size[4] = { j.DSize[0], j.DSize[1], j.DSize[2], j.DSize[3] };
  size[last] = 1;
  const double * yz = j.YAtD + z * j.YStride[last];
  ForRows(size, j.Stride, [&](Int out, Int i1, Int i2, Int i3) {
    const double * y = yz + i1 * j.YStride[1] + i2 * j.YStride[2] + i3 * j.YStride[3];
    const double * yt = y + j.ShiftOffset;
    if (j.S2AtD != nullptr)
    {
      const double * s = j.S2AtD + z * j.S2Stride[last] + i1 * j.S2Stride[1] + i2 * j.S2Stride[2] + i3 * j.S2Stride[3];
      PatchTermsWithNoiseMap(j, y, yt, s, s + j.S2ShiftOffset, n0, row);
    }
    else if (K == 1)
    {
#if defined(NLM_LANE_SHUFFLES)
      if constexpr (TWindow > 1)
      {
        RowSumsByLanes<TWindow>(y, yt, noise, w0, slab + out);
        return;
      }
#endif
      for (Int i = 0; i < n0; i += Lanes)
      {
        const V diff = Load(y + i) - Load(yt + i);
        Store(row + i, diff * diff - noise);
      }
    }
    else
    {
      for (Int i = 0; i < n0; ++i)
      {
        double acc = 0.0;
        for (int k = 0; k < K; ++k)
        {
          const double diff = y[K * i + k] - yt[K * i + k];
          acc = acc + diff * diff;
        }
        row[i] = acc - j.Noise;
      }
    }
    double * w = slab + out;
    for (Int i = 0; i < w0; i += Lanes)
    {
      Store(w + i, WindowSum<TWindow>(row + i, 1, j.Windows[0]));
    }
  });
}

/** 2. Window sums of a slab along the axes between the first and the last, in place. */
template <int TWindow>
void
MiddleAxesSums(const ShiftJob & j, double * slab)
{
  const int last = j.Dimension - 1;
  Int       extent[4] = { RoundUp(j.WSize[0], Lanes), j.DSize[1], j.DSize[2], j.DSize[3] };
  extent[last] = 1;
  for (int a = 1; a < last; ++a)
  {
    extent[a] = j.WSize[a];
    const Int step = j.Stride[a];
    ForRows(extent, j.Stride, [&](Int offset, Int, Int, Int) {
      double * row = slab + offset;
      for (Int i = 0; i < extent[0]; i += Lanes)
      {
        Store(row + i, WindowSum<TWindow>(row + i, step, j.Windows[a]));
      }
    });
  }
}

/** 3. The last axis's window sums as the weights of `count` (1 or 2) consecutive slabs of the W
 * box: W slab q's sum runs over the D slabs at slots[q], ..., slots[q + Window - 1], in order. Two
 * slabs share the loads of their common D slabs. */
template <int TWindow>
void
WeightsOfSlabs(const ShiftJob & j, const double * const * slots, int count, double * first, double * second)
{
  Int extent[4];
  OneWSlab(j, extent);
  const int              window = (TWindow > 0) ? TWindow : j.Windows[j.Dimension - 1];
  const WeightParameters weight = WeightParametersOf(j.Norm, j.Alpha);
  if (count == 1)
  {
    ForRows(extent, j.Stride, [&](Int offset, Int, Int, Int) {
      for (Int i = 0; i < extent[0]; i += Lanes)
      {
        V acc = Load(slots[0] + offset + i);
        for (int s = 1; s < window; ++s)
        {
          acc = acc + Load(slots[s] + offset + i);
        }
        Store(first + offset + i, Weight(acc, weight));
      }
    });
    return;
  }
  ForRows(extent, j.Stride, [&](Int offset, Int, Int, Int) {
    for (Int i = 0; i < extent[0]; i += Lanes)
    {
      V acc0 = Load(slots[0] + offset + i);
      V acc1 = Load(slots[1] + offset + i);
      acc0 = acc0 + acc1;
      for (int s = 2; s < window; ++s)
      {
        const V term = Load(slots[s] + offset + i);
        acc0 = acc0 + term;
        acc1 = acc1 + term;
      }
      acc1 = acc1 + Load(slots[window] + offset + i);
      Store(first + offset + i, Weight(acc0, weight));
      Store(second + offset + i, Weight(acc1, weight));
    }
  });
}

/** PatchSize 1: the box is empty, every raw distance is +0.0: one slab of equal weights. */
void
ConstantWeights(const ShiftJob & j, double * slab)
{
  const V w = Weight(Splat(0.0), WeightParametersOf(j.Norm, j.Alpha));
  Int     extent[4];
  OneWSlab(j, extent);
  ForRows(extent, j.Stride, [&](Int offset, Int, Int, Int) {
    for (Int i = 0; i < extent[0]; i += Lanes)
    {
      Store(slab + offset + i, w);
    }
  });
}

/** The value a term adds: Y_k, or Y_k^2 for the Rician noise model (TSquare). */
template <bool TSquare, typename T>
inline T
Value(T y)
{
  return TSquare ? y * y : y;
}

/** 4. Both terms of every cell of slab `i` of the chunk (index i on the last axis) for each of
 * `count` shifts in order, in the contract's order: W += a.w; W += b.w; R_k += a.w * a.Y_k;
 * R_k += b.w * b.Y_k (Y_k^2 when TSquare), where a is the target term when TargetFirst. The weights of shift s come
 * from its W slabs centre[s] (holding w(x, t)) and target[s] (w(x - t, t)). The accumulators are read and written once
 * for all the shifts. */
template <bool TSquare>
void
GatherSlab(const ShiftJob * jobs, int count, Int i, const double * const * centre, const double * const * target)
{
  const ShiftJob & j = jobs[0]; // the chunk, its input and its accumulators are the same for all
  const int        K = j.Components;
  const int        last = j.Dimension - 1;
  Int              size[4] = { j.ChunkSize[0], j.ChunkSize[1], j.ChunkSize[2], j.ChunkSize[3] };
  size[last] = 1;
  const double * yi = j.YAtChunk + i * j.YStride[last];
  double *       wsi = j.WeightSum + i * j.OutputStride[last];
  double *       rsi = j.Result + K * i * j.OutputStride[last];
  ForRows(size, j.OutputStride, [&](Int o, Int i1, Int i2, Int i3) {
    const double * wa[MaximumBatch];
    const double * ya[MaximumBatch];
    const double * wb[MaximumBatch];
    const double * yb[MaximumBatch];
    const double * y = yi + i1 * j.YStride[1] + i2 * j.YStride[2] + i3 * j.YStride[3];
    for (int s = 0; s < count; ++s)
    {
      const ShiftJob & js = jobs[s];
      const Int        offset = i1 * js.Stride[1] + i2 * js.Stride[2] + i3 * js.Stride[3];
      const double *   wc = centre[s] + js.CentreWeight + offset;
      const double *   wt = target[s] + js.CentreWeight + js.TargetWeightOffset + offset;
      const double *   yc = y + js.ShiftOffset;
      const double *   yt = y - js.ShiftOffset;
      wa[s] = js.TargetFirst ? wt : wc;
      ya[s] = js.TargetFirst ? yt : yc;
      wb[s] = js.TargetFirst ? wc : wt;
      yb[s] = js.TargetFirst ? yc : yt;
    }
    double *  ws = wsi + o;
    double *  rs = rsi + K * o;
    const Int n = j.ChunkSize[0];
    const Int full = (K == 1) ? n / Lanes * Lanes : 0;
    for (Int x = 0; x < full; x += Lanes)
    {
      V w = Load(ws + x);
      V r = Load(rs + x);
      for (int s = 0; s < count; ++s)
      {
        const V a = Load(wa[s] + x);
        const V b = Load(wb[s] + x);
        w = (w + a) + b;
        r = (r + a * Value<TSquare>(Load(ya[s] + x))) + b * Value<TSquare>(Load(yb[s] + x));
      }
      Store(ws + x, w);
      Store(rs + x, r);
    }
    // The rest of the row, and every cell when K > 1, one by one (the same arithmetic).
    for (Int x = full; x < n; ++x)
    {
      for (int s = 0; s < count; ++s)
      {
        ws[x] = (ws[x] + wa[s][x]) + wb[s][x];
        for (int k = 0; k < K; ++k)
        {
          rs[K * x + k] =
            (rs[K * x + k] + wa[s][x] * Value<TSquare>(ya[s][K * x + k])) + wb[s][x] * Value<TSquare>(yb[s][K * x + k]);
        }
      }
    }
  });
}

/** Up to MaximumBatch consecutive shifts with the same last component over one chunk, slab by slab
 * along the last axis: for each shift, each slab of its D box is summed along every other axis
 * into a ring of RingSlabs (Window + 1) slabs; the last axis's sums over the ring give the W slabs
 * of weights, two at a time where two are due, kept in a ring of WeightSlabs (|t_last| + 2) slabs;
 * as soon as a chunk slab's weight slabs are there, its cells receive the terms of all the shifts.
 * Neither the D box nor the W box is stored whole, so every pass works on cache-sized data
 * whatever the chunk's size. */
template <int TWindow, bool TSquare>
void
ProcessShiftsWithWindow(const ShiftJob * jobs, int count)
{
  const ShiftJob & j = jobs[0]; // Window, the last axis's extents and slabs are the same for all
  const int        last = j.Dimension - 1;
  const Int        reach = (j.CentreSlab > j.TargetSlab) ? j.CentreSlab : j.TargetSlab; // |t_last|
  const double *   centre[MaximumBatch];
  const double *   target[MaximumBatch];
  if (j.Windows[0] == 0) // every window is 0 (VerifyProblem)
  {
    for (int s = 0; s < count; ++s)
    {
      ConstantWeights(jobs[s], jobs[s].Weights);
      centre[s] = target[s] = jobs[s].Weights;
    }
    for (Int i = 0; i < j.ChunkSize[last]; ++i)
    {
      GatherSlab<TSquare>(jobs, count, i, centre, target);
    }
    return;
  }
  const Int window = j.Windows[last];
  const Int ringSlabs = window + 1;
  const Int slabs = j.WeightSlabs; // reach + 2
  const Int dSlabs = j.DSize[last];
  for (Int z = 0; z < dSlabs;)
  {
    const Int k = z - window + 1;                        // the first W slab due once D slab z is there
    const int made = (k >= 0 && z + 1 < dSlabs) ? 2 : 1; // D slabs (and W slabs) made in this step
    for (int s = 0; s < count; ++s)
    {
      const ShiftJob & js = jobs[s];
      const Int        slabCells = js.Stride[last];
      for (int q = 0; q < made; ++q)
      {
        double * slab = js.Ring + ((z + q) % ringSlabs) * slabCells;
        PatchTermsAndRowSums<TWindow>(js, z + q, slab);
        MiddleAxesSums<TWindow>(js, slab);
      }
      if (k >= 0)
      {
        for (Int w = 0; w < window + made - 1; ++w)
        {
          js.RingSlots[w] = js.Ring + ((k + w) % ringSlabs) * slabCells;
        }
        WeightsOfSlabs<TWindow>(
          js, js.RingSlots, made, js.Weights + (k % slabs) * slabCells, js.Weights + ((k + 1) % slabs) * slabCells);
      }
    }
    for (int q = 0; k >= 0 && q < made; ++q)
    {
      const Int i = k + q - reach; // the chunk slab whose weights are all there now
      if (i < 0)
      {
        continue;
      }
      for (int s = 0; s < count; ++s)
      {
        const Int slabCells = jobs[s].Stride[last];
        centre[s] = jobs[s].Weights + ((i + jobs[s].CentreSlab) % slabs) * slabCells;
        target[s] = jobs[s].Weights + ((i + jobs[s].TargetSlab) % slabs) * slabCells;
      }
      GatherSlab<TSquare>(jobs, count, i, centre, target);
    }
    z += made;
  }
}

/** ProcessShiftsWithWindow with the window as a compile-time constant for patches 3 to 11 (the same
 * on every axis; a run-time window on each axis otherwise). */
template <bool TSquare>
void
ProcessShiftsWithValues(const ShiftJob * jobs, int count)
{
  switch (jobs[0].Window)
  {
    case 2:
      return ProcessShiftsWithWindow<2, TSquare>(jobs, count);
    case 4:
      return ProcessShiftsWithWindow<4, TSquare>(jobs, count);
    case 6:
      return ProcessShiftsWithWindow<6, TSquare>(jobs, count);
    case 8:
      return ProcessShiftsWithWindow<8, TSquare>(jobs, count);
    case 10:
      return ProcessShiftsWithWindow<10, TSquare>(jobs, count);
    default:
      return ProcessShiftsWithWindow<0, TSquare>(jobs, count);
  }
}

void
ProcessShifts(const ShiftJob * jobs, int count)
{
  if (jobs[0].SquareValues)
  {
    return ProcessShiftsWithValues<true>(jobs, count);
  }
  return ProcessShiftsWithValues<false>(jobs, count);
}

void
Weights(const double * raw, Int count, double norm, double alpha, double * out)
{
  const WeightParameters weight = WeightParametersOf(norm, alpha);
  Int                    i = 0;
  for (; i + Lanes <= count; i += Lanes)
  {
    Store(out + i, Weight(Load(raw + i), weight));
  }
  if (i < count) // the last values through a whole vector
  {
    double in[Lanes] = {};
    double result[Lanes];
    for (Int k = i; k < count; ++k)
    {
      in[k - i] = raw[k];
    }
    Store(result, Weight(Load(in), weight));
    for (Int k = i; k < count; ++k)
    {
      out[k] = result[k - i];
    }
  }
}

#if NLM_LANES > 1
// Classic mode (contract section 3): lanes are neighbouring pixels along axis 0.
typedef float         VF __attribute__((vector_size(8 * NLM_LANES)));  // 2 Lanes floats
typedef float         VFH __attribute__((vector_size(4 * NLM_LANES))); // Lanes floats
typedef std::int32_t  VI32H __attribute__((vector_size(4 * NLM_LANES)));
typedef std::uint32_t VU32H __attribute__((vector_size(4 * NLM_LANES)));

/** The vector type of classic mode's working type. */
template <typename TReal>
struct ClassicVector;
template <>
struct ClassicVector<float>
{
  using Type = VF;
};
template <>
struct ClassicVector<double>
{
  using Type = V;
};

template <typename TVector>
inline TVector
LoadAny(const void * p)
{
  TVector v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

template <typename TVector>
inline void
StoreAny(void * p, TVector v)
{
  __builtin_memcpy(p, &v, sizeof(v));
}

/** Whether every lane of a comparison's result is set. */
template <typename TMask>
inline bool
AllSet(TMask mask)
{
  constexpr int n = sizeof(TMask) / sizeof(mask[0]);
  bool          all = true;
  for (int l = 0; l < n; ++l)
  {
    all = all && (mask[l] != 0);
  }
  return all;
}

/** nlm::FastExpX86 on every lane: truncation toward zero where kExpA * y is in the int32 range,
 * INT32_MIN elsewhere (x86's cvttsd2si, NaN included), then the wrapping 32-bit addition. */
inline V
FastExpX86Lanes(V y)
{
  const V     p = Splat(kExpA) * y;
  const auto  inRange = (p > Splat(-2147483649.0)) & (p < Splat(2147483648.0));
  const V     safe = Select((VU64)inRange, p, Splat(0.0));
  const VI32H truncated = __builtin_convertvector(safe, VI32H);
  const VI32H inRange32 = __builtin_convertvector(inRange, VI32H);
  const VI32H i = (inRange32 & truncated) | (~inRange32 & (VI32H)(VU32H{} + 0x80000000u));
  const VU32H high = (VU32H)i + static_cast<std::uint32_t>(kExpBC);
  return (V)(__builtin_convertvector(high, VU64) << 32);
}

/** The weight of lanes that were not cut: (T) fe_x86(-m) with m = dist > 0 ? (double)dist : +0.0. */
inline V
ClassicWeight(V dist)
{
  const V m = Select((VU64)(dist > Splat(0.0)), dist, Splat(0.0));
  return FastExpX86Lanes(-m);
}

/** The same for float lanes: each half in double, rounded to float (static_cast<float>). */
inline VF
ClassicWeight(VF dist)
{
  VFH half[2];
  __builtin_memcpy(half, &dist, sizeof(dist));
  for (VFH & h : half)
  {
    h = __builtin_convertvector(ClassicWeight(__builtin_convertvector(h, V)), VFH);
  }
  VF weight;
  __builtin_memcpy(&weight, half, sizeof(weight));
  return weight;
}

/** a where mask is set, else b (masks from comparisons of TVector). */
template <typename TVector, typename TMask>
inline TVector
Pick(TMask mask, TVector a, TVector b)
{
  return (TVector)((mask & (TMask)a) | (~mask & (TMask)b));
}

template <typename TReal>
void
Classic(const ClassicRun<TReal> & r)
{
  using VT = typename ClassicVector<TReal>::Type;
  constexpr int W = sizeof(VT) / sizeof(TReal);
  using VM = decltype(VT{} > VT{});
  const VT           zero = VT{} - VT{};
  const VT           five = zero + TReal(5);
  const VT           v = zero + r.V;
  const int          K = r.Components;
  const std::int64_t cs = r.ComponentStride;
  for (std::int64_t i = 0; i < r.Count; i += W)
  {
    const TReal * xc = r.X + r.Corner + i;
    VT            wsum = zero;
    VT            nv[MaximumClassicComponents];
    for (int k = 0; k < K; ++k)
    {
      nv[k] = zero;
    }
    for (std::int64_t t2 = r.T2Lo; t2 <= r.T2Hi; ++t2)
    {
      for (std::int64_t t1 = r.T1Lo; t1 <= r.T1Hi; ++t1)
      {
        for (std::int64_t t0 = -r.Distance; t0 <= r.Distance; ++t0)
        {
          const TReal * xq = xc + t0 + t1 * r.Stride[1] + t2 * r.Stride[2];
          VT            dist = zero;
          VM            cut = VM{};
          for (int a0 = 0; a0 < r.PatchSize; ++a0)
          {
            cut = cut | (dist > five);
            if (AllSet(cut))
            {
              break;
            }
            for (int j = a0 * r.RowLength; j < (a0 + 1) * r.RowLength; ++j)
            {
              const std::int64_t off = r.PatchOffset[j];
              const VT           wk = zero + r.Kernel[j];
              for (int k = 0; k < K; ++k)
              {
                const VT diff = LoadAny<VT>(xc + k * cs + off) - LoadAny<VT>(xq + k * cs + off);
                const VT next = dist + wk * ((diff * diff) - v);
                dist = Pick(cut, dist, next);
              }
            }
          }
          const VT weight = Pick(cut, zero, ClassicWeight(dist));
          wsum = wsum + weight;
          for (int k = 0; k < K; ++k)
          {
            VT value = LoadAny<VT>(xq + k * cs + r.Centre);
            if (r.Square)
            {
              value = value * value;
            }
            nv[k] = nv[k] + weight * value;
          }
        }
      }
    }
    StoreAny(r.WeightSum + i, wsum);
    for (int k = 0; k < K; ++k)
    {
      StoreAny(r.Result + k * r.Count + i, nv[k]);
    }
  }
}

void
ClassicFloat(const ClassicRun<float> & r)
{
  Classic(r);
}

void
ClassicDouble(const ClassicRun<double> & r)
{
  Classic(r);
}

const Kernels kKernels{ NLM_TARGET, NLM_LANES, &ProcessShifts, &Weights, &ClassicFloat, &ClassicDouble };
#else
const Kernels kKernels{ NLM_TARGET, NLM_LANES, &ProcessShifts, &Weights, nullptr, nullptr };
#endif
} // namespace
} // namespace NLM_NAMESPACE

const Kernels *
NLM_KERNELS_GETTER()
{
  return &NLM_NAMESPACE::kKernels;
}

} // namespace cpu
} // namespace nlm
} // namespace itk
