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
#ifndef itkNonLocalMeansNumerics_h
#define itkNonLocalMeansNumerics_h

// The arithmetic shared by every backend (doc/numerical-contract.md). This header is compiled
// by the host C++ compiler for the CPU backend and, as text, by NVRTC for the CUDA kernels, so it
// uses only built-in types and includes nothing under NVRTC.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#  define ITK_NLM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#  define ITK_NLM_HOST_DEVICE inline
#endif
#if !defined(__CUDACC_RTC__)
#  include <cmath>
#  include <cstring>
#endif

namespace itk
{
namespace nlm
{

/** Schraudolph's constants as scikit-image uses them: 2^20/ln(2) and 1023*2^20 - 60801. */
constexpr double kExpA = 1512775.3951951856938;
constexpr int    kExpBC = 1072632447;
/** Fast-mode distance cutoff of scikit-image. */
constexpr double kDistanceCutoff = 5.0;

/** The double whose high 32 bits are `high` and whose low 32 bits are zero. */
ITK_NLM_HOST_DEVICE double
DoubleFromHighWord(unsigned int high)
{
#if defined(__CUDA_ARCH__)
  return __hiloint2double(static_cast<int>(high), 0);
#else
  const unsigned long long bits = static_cast<unsigned long long>(high) << 32;
  double                   value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

/** scikit-image's fast exponential for arguments in [-5, 0] (fast mode): the conversion to int32
 * truncates toward zero and never leaves the int32 range there. */
ITK_NLM_HOST_DEVICE double
FastExp(double y)
{
  const int i = static_cast<int>(kExpA * y);
  return DoubleFromHighWord(static_cast<unsigned int>(i) + static_cast<unsigned int>(kExpBC));
}

/** The same function for any argument, reproducing x86-64 `cvttsd2si` (NaN and out-of-range
 * values become INT32_MIN) and a wrapping 32-bit addition, as scikit-image's C code behaves on
 * x86-64. Needed in slow mode, where the argument is unbounded. */
ITK_NLM_HOST_DEVICE double
FastExpX86(double y)
{
  const double p = kExpA * y;
  int          i = static_cast<int>(0x80000000u);
  if (p > -2147483649.0 && p < 2147483648.0)
  {
    i = static_cast<int>(p);
  }
  return DoubleFromHighWord(static_cast<unsigned int>(i) + static_cast<unsigned int>(kExpBC));
}

/** Cython's `max(a, b)`, which is `(b > a) ? b : a`: NaN and -0.0 in `a` pass through. */
ITK_NLM_HOST_DEVICE double
CythonMax(double a, double b)
{
  return (b > a) ? b : a;
}

/** The Rician noise model's output (doc/numerical-contract.md 6.1) from the weighted mean of the
 * squared intensities and the bias 2 sigma^2: sqrt(M(mean - bias, 0)), IEEE square root. */
ITK_NLM_HOST_DEVICE double
RicianCorrection(double mean, double bias)
{
#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)
  return sqrt(CythonMax(mean - bias, 0.0));
#else
  return std::sqrt(CythonMax(mean - bias, 0.0));
#endif
}

/** Fast-mode weight of one (centre, shift) pair from its raw patch distance. Zero when the
 * distance is beyond the cutoff (adding a zero weight equals skipping the term). */
ITK_NLM_HOST_DEVICE double
FastModeWeight(double raw, double norm, double alpha)
{
  const double dist = CythonMax(raw, 0.0) / norm;
  return (dist > kDistanceCutoff) ? 0.0 : alpha * FastExp(-dist);
}

/** FastModeWeight as the high 32 bits of its value (its low 32 bits are always zero, and 0 stands
 * for a zero weight), so that a weight takes 4 bytes. `half` is alpha == 0.5: fe values are
 * normal numbers, so halving them decrements the exponent field. */
ITK_NLM_HOST_DEVICE unsigned int
FastModeWeightHighWord(double raw, double norm, bool half)
{
  const double dist = CythonMax(raw, 0.0) / norm;
  if (dist > kDistanceCutoff)
  {
    return 0u;
  }
  const int i = static_cast<int>(kExpA * -dist);
  return static_cast<unsigned int>(i) + static_cast<unsigned int>(kExpBC) - (half ? (1u << 20) : 0u);
}

/** The same high word as FastModeWeightHighWord(raw, norm, half), bit for bit, for every raw, but
 * with a multiplication by `invNorm` (the double nearest 1/norm) instead of the division and without
 * a float-to-int conversion. The exact path is taken only when the approximate quotient is within a
 * relative 2^-44 of the cutoff or of a point where the truncation to int32 changes: the error of the
 * approximation is below 5 * 2^-53 relative, so outside that band both paths agree. */
ITK_NLM_HOST_DEVICE unsigned int
FastModeWeightHighWordNoDivision(double raw, double norm, double invNorm, bool half)
{
  const unsigned int halve = half ? (1u << 20) : 0u;
  const double       m = CythonMax(raw, 0.0);
  if (m == 0.0)
  {
    return static_cast<unsigned int>(kExpBC) - halve; // fe(-0) == fe(0)
  }
  const double q = m * invNorm;
  if (q > kDistanceCutoff * (1.0 + 0x1p-44))
  {
    return 0u;
  }
  const double p = kExpA * -q;
  // Nearest integer of p (|p| < 2^51) by adding and subtracting 1.5 * 2^52; exact.
  const double shifted = p + 6755399441055744.0;
  const double nearest = shifted - 6755399441055744.0;
  const double e = p - nearest;
  const double margin = -p * 0x1p-44;
  if (!(q < kDistanceCutoff * (1.0 - 0x1p-44)) || !(e > margin || e < -margin))
  {
    return FastModeWeightHighWord(raw, norm, half); // too close to call, or NaN
  }
#if defined(__CUDA_ARCH__)
  const int low = __double2loint(shifted);
#else
  unsigned long long bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  const int low = static_cast<int>(static_cast<unsigned int>(bits & 0xffffffffull));
#endif
  // Truncation toward zero of a negative number is its ceiling.
  const int i = low + ((e > 0.0) ? 1 : 0);
  return static_cast<unsigned int>(i) + static_cast<unsigned int>(kExpBC) - halve;
}

/** Whether FastModeWeightHighWordCorrected(raw, norm, 1.0 / norm, half) is
 * FastModeWeightHighWord(raw, norm, half) for every raw the kernels can produce, as far as the norm
 * is concerned: norm within [2^-500, 2^500], so that 1 / norm is normal and every raw whose quotient
 * reaches 1 / kExpA is at least 2^-521 (CorrectedQuotient's range). Such a norm takes h between about
 * 1e-75 and 1e75 (patch 3 in 3D). The planner's CorrectedWeightsServe adds the condition on raw. */
ITK_NLM_HOST_DEVICE bool
CorrectedQuotientFits(double norm)
{
  return norm >= 0x1p-500 && norm <= 0x1p500;
}

/** The IEEE quotient raw / norm without a division, for `invNorm` = 1.0 / norm (IEEE) a normal
 * number, |raw| at least 2^-960 (no underflow in the residual) and a finite quotient: with the
 * reciprocal rounded to nearest in advance, one multiplication and two FMAs give the correctly
 * rounded quotient (q = raw * invNorm, r = raw - q * norm, q + r * invNorm, each rounded once;
 * Brisebarre, Muller and Raina, "Accelerating correctly rounded floating-point division when the
 * divisor is known in advance", IEEE Trans. Computers 53(8), 2004, after Markstein). CUDA's own
 * double division ends with the same two FMAs. Below that range of raw the result may be off by an
 * ulp or two; an infinite raw, or a q that overflows, gives NaN. */
ITK_NLM_HOST_DEVICE double
CorrectedQuotient(double raw, double norm, double invNorm)
{
  const double q = raw * invNorm;
#if defined(__CUDA_ARCH__)
  return fma(fma(-q, norm, raw), invNorm, q);
#else
  return std::fma(std::fma(-q, norm, raw), invNorm, q);
#endif
}

/** FastModeWeightHighWord(raw, norm, half), bit for bit, without a division, where
 * CorrectedQuotientFits(norm), `invNorm` is 1.0 / norm (IEEE) and -DBL_MAX <= raw / norm (the
 * planner's CorrectedWeightsServe): the distance is CorrectedQuotient, exact wherever it can reach
 * the truncation's first step (a quotient of 1 / kExpA needs raw >= 2^-521); below that the weight
 * is the one of distance 0 either way. Where raw <= 0 the quotient is <= 0 and its product with
 * -kExpA >= 0, clamped to 0: the weight of distance 0, as M(raw, 0) gives. A NaN quotient (raw
 * +infinity, or a positive quotient that overflows) is beyond the cutoff, as the division's infinity
 * is. */
ITK_NLM_HOST_DEVICE unsigned int
FastModeWeightHighWordCorrected(double raw, double norm, double invNorm, bool half)
{
  const double       dist = CorrectedQuotient(raw, norm, invNorm);
  const unsigned int add = static_cast<unsigned int>(kExpBC) - (half ? (1u << 20) : 0u);
#if defined(__CUDA_ARCH__)
  const int i = min(__double2int_rz(kExpA * -dist), 0);
  return (dist <= kDistanceCutoff) ? static_cast<unsigned int>(i) + add : 0u;
#else
  if (!(dist <= kDistanceCutoff))
  {
    return 0u;
  }
  const double product = kExpA * -dist;
  return static_cast<unsigned int>((product < 0.0) ? static_cast<int>(product) : 0) + add;
#endif
}

/** First shift along an axis in scikit-image's order (doc/numerical-contract.md 2.2): shifts run
 * from the outermost axis (slowest) to axis 0, over [-d, d] on every axis but axis 0, which runs
 * over [0, d] (a shift and its mirror image are handled together). The last is always d. */
ITK_NLM_HOST_DEVICE int
FirstShift(int axis, int distance)
{
  return (axis == 0) ? 0 : -distance;
}

/** The buffered-weights kernel's pairs of shifts (3D): each row of shifts (t2, t1) of section 2.2
 * takes t0 = 0 .. d in pairs (2j, 2j + 1), the last with one shift when d is even. */
ITK_NLM_HOST_DEVICE int
ShiftPairsPerRow(int distance)
{
  return (distance + 2) / 2;
}

/** Pairs of shifts in 3D at patch distance `distance` (ShiftPairsPerRow per row). */
ITK_NLM_HOST_DEVICE long long
ShiftPairCount(int distance)
{
  return static_cast<long long>(2 * distance + 1) * (2 * distance + 1) * ShiftPairsPerRow(distance);
}

/** Whether a shift is lexicographically positive (first non-zero component, outermost axis
 * first, is positive): then its target term is added before its centre term (contract 2.3).
 * Components beyond the image's dimension are 0. */
ITK_NLM_HOST_DEVICE bool
IsLexicographicallyPositive(int t0, int t1, int t2, int t3)
{
  return (t3 != 0) ? (t3 > 0) : (t2 != 0) ? (t2 > 0) : (t1 != 0) ? (t1 > 0) : (t0 > 0);
}

/** The same for a shift `t` in ITK axis order (t[0] = col) of `dimension` components. */
ITK_NLM_HOST_DEVICE bool
IsLexicographicallyPositive(const int * t, int dimension)
{
  return IsLexicographicallyPositive(
    t[0], dimension > 1 ? t[1] : 0, dimension > 2 ? t[2] : 0, dimension > 3 ? t[3] : 0);
}

/** NumPy's `mode='reflect'` index map for an axis of length n (n >= 1). */
ITK_NLM_HOST_DEVICE long long
ReflectIndex(long long i, long long n)
{
  if (n == 1)
  {
    return 0;
  }
  const long long period = 2 * (n - 1);
  long long       m = i % period;
  if (m < 0)
  {
    m += period;
  }
  return (m < n) ? m : period - m;
}

/** ReflectIndex's map by repeated reflection about the axis's first and last index, without a
 * division: for indices a padding's width beyond the axis (the padding kernel's, per cell), where
 * it takes 1 + |excursion| / (n - 1) steps at most. */
ITK_NLM_HOST_DEVICE long long
ReflectIndexByWalking(long long i, long long n)
{
  if (n == 1)
  {
    return 0;
  }
  while (i < 0 || i >= n)
  {
    i = (i < 0) ? -i : 2 * (n - 1) - i;
  }
  return i;
}

} // namespace nlm
} // namespace itk

#endif
