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
#include "itkNonLocalMeansSlowModeKernel.h"

#include <cmath>
#include <cstdint>

namespace itk
{
namespace nlm
{
namespace
{
using Int = std::int64_t;

/** NumPy's pairwise summation (numpy/_core/src/umath/loops_utils.h.src), in T. */
template <typename T>
T
NumPyPairwiseSum(const T * a, Int n)
{
  if (n < 8)
  {
    T res = T(0);
    for (Int i = 0; i < n; ++i)
    {
      res = res + a[i];
    }
    return res;
  }
  if (n <= 128)
  {
    T r[8];
    for (int j = 0; j < 8; ++j)
    {
      r[j] = a[j];
    }
    Int i = 8;
    for (; i < n - (n % 8); i += 8)
    {
      for (int j = 0; j < 8; ++j)
      {
        r[j] = r[j] + a[i + j];
      }
    }
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i)
    {
      res = res + a[i];
    }
    return res;
  }
  Int n2 = n / 2;
  n2 -= n2 % 8;
  return NumPyPairwiseSum(a, n2) + NumPyPairwiseSum(a + n2, n - n2);
}

/** NumPy's float32 `exp` on x86-64 with AVX2+FMA3 or AVX-512F (the SIMD kernel `simd_exp_FLOAT` in
 * numpy/_core/src/umath/loops_exponent_log.dispatch.c.src): Cody-Waite range reduction with fused
 * multiply-adds and a 5th/2nd order rational approximation. It is not correctly rounded (up to 2.5
 * ulp), so scikit-image's float32 slow-mode kernel is reproduced only with this exact algorithm.
 * Valid for finite arguments whose result is a normal number, which holds for the kernel. */
inline float
NumPyExpFloat32(float x)
{
  // Constants as NumPy defines them (npy_simd_data.h, npy_math.h).
  constexpr float log2e = 1.442695040888963407359924681001892137f;
  constexpr float roundMagic = 0x1.800000p+23f;
  constexpr float ln2High = -6.93145752e-1f;
  constexpr float ln2Low = -1.42860677e-6f;
  constexpr float p0 = 9.999999999980870924916e-01f;
  constexpr float p1 = 7.257664613233124478488e-01f;
  constexpr float p2 = 2.473615434895520810817e-01f;
  constexpr float p3 = 5.114512081637298353406e-02f;
  constexpr float p4 = 6.757896990527504603057e-03f;
  constexpr float p5 = 5.082762527590693718096e-04f;
  constexpr float q0 = 1.0f;
  constexpr float q1 = -2.742335390411667452936e-01f;
  constexpr float q2 = 2.159509375685829852307e-02f;
  float           k = x * log2e;
  k = (k + roundMagic) - roundMagic; // round to nearest
  x = std::fma(k, ln2High, x);
  x = std::fma(k, ln2Low, x);
  x = std::fma(k, 0.0f, x);
  float num = std::fma(p5, x, p4);
  num = std::fma(num, x, p3);
  num = std::fma(num, x, p2);
  num = std::fma(num, x, p1);
  num = std::fma(num, x, p0);
  float den = std::fma(q2, x, q1);
  den = std::fma(den, x, q0);
  return std::ldexp(num / den, static_cast<int>(k));
}

inline float
NumPyExp(float x)
{
  return NumPyExpFloat32(x);
}

inline double
NumPyExp(double x)
{
  return std::exp(x);
}

} // namespace

template <typename T>
std::vector<T>
SlowModeKernel(int n, int K, int s, double h)
{
  const int o = s / 2;
  const T   A = static_cast<T>(static_cast<double>(s - 1) / 4.0);
  const T   divisor = static_cast<T>(2.0 * static_cast<double>(A) * static_cast<double>(A));
  Int       count = 1;
  for (int a = 0; a < n; ++a)
  {
    count *= s;
  }
  std::vector<T> e(static_cast<size_t>(count));
  for (Int i = 0; i < count; ++i)
  {
    Int rem = i;
    T   q = T(0);
    for (int a = n - 1; a >= 0; --a)
    {
      const T off = static_cast<T>(static_cast<int>(rem % s) - o);
      q = q + off * off;
      rem /= s;
    }
    e[static_cast<size_t>(i)] = NumPyExp((-q) / divisor);
  }
  const T S = T(0) + NumPyPairwiseSum(e.data(), count);
  const T hT = static_cast<T>(h);
  T       denominator;
  if (n == 2)
  {
    denominator = ((static_cast<T>(K) * S) * hT) * hT;
  }
  else
  {
    denominator = (S * hT) * hT;
  }
  const T factor = T(1) / denominator;
  for (auto & v : e)
  {
    v = v * factor;
  }
  return e;
}

template std::vector<float>
SlowModeKernel<float>(int, int, int, double);
template std::vector<double>
SlowModeKernel<double>(int, int, int, double);

} // namespace nlm
} // namespace itk
