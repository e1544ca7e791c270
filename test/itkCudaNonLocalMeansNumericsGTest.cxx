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

// The shared arithmetic (src/itkNonLocalMeansNumerics.h): scikit-image's fast exponential, NumPy's
// reflect map, the shift order, and the division-free weights and quotient against the division, bit
// for bit.

#include "itkNonLocalMeansNumerics.h"
#include "itkGTest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace
{
using namespace itk::nlm;

bool
SameBits(double a, double b)
{
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

/** Counts the inputs on which the three forms of the weight differ from the division's. */
class WeightComparison
{
public:
  /** `corrected`: also the corrected quotient's form, whose domain leaves out the raws whose
   * quotient is -infinity (the planner's CorrectedWeightsServe). */
  void
  Compare(double raw, double norm, double alpha, bool corrected = true)
  {
    const double expected = FastModeWeight(raw, norm, alpha);
    const bool   half = alpha == 0.5;
    const double exact = DoubleFromHighWord(FastModeWeightHighWord(raw, norm, half));
    const double fast = DoubleFromHighWord(FastModeWeightHighWordNoDivision(raw, norm, 1.0 / norm, half));
    const double withoutDivision =
      corrected ? DoubleFromHighWord(FastModeWeightHighWordCorrected(raw, norm, 1.0 / norm, half)) : expected;
    ++m_Compared;
    if (!SameBits(expected, exact) || !SameBits(expected, fast) || !SameBits(expected, withoutDivision))
    {
      ++m_Differing;
      ADD_FAILURE() << "raw " << raw << " norm " << norm << ": " << expected << " vs " << exact << ", " << fast
                    << " and " << withoutDivision;
    }
  }

  /** Every raw from `ulps` steps below `centre` to `ulps` steps above it. */
  void
  Around(double centre, double norm, double alpha, int ulps)
  {
    double raw = centre;
    for (int step = 0; step < ulps; ++step)
    {
      raw = std::nextafter(raw, -1.0);
    }
    for (int step = 0; step < 2 * ulps; ++step)
    {
      Compare(raw, norm, alpha);
      raw = std::nextafter(raw, 1e300);
    }
  }

  long m_Compared{ 0 };
  long m_Differing{ 0 };
};

/** A double with the given 52-bit mantissa field and unbiased exponent. */
double
WithMantissa(unsigned long long mantissa, int exponent)
{
  const unsigned long long bits = 0x3ff0000000000000ull | (mantissa & 0xfffffffffffffull);
  double                   value;
  std::memcpy(&value, &bits, sizeof(value));
  return std::ldexp(value, exponent);
}
} // namespace

TEST(NonLocalMeansNumerics, FastExpEqualsScikitImageDocumentedValues)
{
  const double ys[] = { 0.0, -0.5, -1.0, -2.0, -5.0 };
  const double fe[] = {
    0.9710078239440918, 0.6103343963623047, 0.3748302459716797, 0.13207828998565674, 0.0067521147429943085
  };
  for (int i = 0; i < 5; ++i)
  {
    EXPECT_EQ(FastExp(ys[i]), fe[i]) << "fe(" << ys[i] << ")";
    EXPECT_EQ(FastExpX86(ys[i]), fe[i]) << "fe(" << ys[i] << ")";
  }
}

TEST(NonLocalMeansNumerics, FastExpOutOfRangeBehavesAsOnX86)
{
  // NaN below -709.049, huge negative values, INT32_MIN beyond the int32 range and for NaN.
  EXPECT_TRUE(std::isnan(FastExpX86(-709.2)));
  EXPECT_NEAR(FastExpX86(-710.0) / -1.46e308, 1.0, 0.01);
  EXPECT_NEAR(FastExpX86(-1000.0) / -1.66e182, 1.0, 0.01);
  EXPECT_EQ(FastExpX86(-1500.0), -0.9710078239440918);
  EXPECT_EQ(FastExpX86(std::numeric_limits<double>::quiet_NaN()), -0.9710078239440918);
}

TEST(NonLocalMeansNumerics, ReflectIndexEqualsRepeatedReflection)
{
  for (long long n : { 1, 2, 3, 5, 8, 33 })
  {
    for (long long i = -80; i < 120; ++i)
    {
      EXPECT_EQ(ReflectIndex(i, n), ReflectIndexByWalking(i, n)) << "index " << i << " in " << n;
    }
  }
}

TEST(NonLocalMeansNumerics, CythonMaxKeepsNaNAndNegativeZero)
{
  EXPECT_TRUE(std::isnan(CythonMax(std::numeric_limits<double>::quiet_NaN(), 0.0)));
  EXPECT_TRUE(std::signbit(CythonMax(-0.0, 0.0)));
}

TEST(NonLocalMeansNumerics, ShiftsRunFromZeroOnAxisZeroAndFromMinusDistanceElsewhere)
{
  EXPECT_EQ(FirstShift(0, 5), 0);
  for (int axis = 1; axis < 4; ++axis)
  {
    EXPECT_EQ(FirstShift(axis, 5), -5);
  }
  const int positive[3] = { -3, 0, 1 }; // outermost axis first: t2 = 1 > 0
  const int negative[3] = { 3, -1, 0 }; // t2 = 0, t1 = -1 < 0
  const int zero[3] = { 0, 0, 0 };
  EXPECT_TRUE(IsLexicographicallyPositive(positive, 3));
  EXPECT_FALSE(IsLexicographicallyPositive(negative, 3));
  EXPECT_FALSE(IsLexicographicallyPositive(zero, 3));
}

TEST(NonLocalMeansNumerics, DivisionFreeWeightsEqualDivisionBitForBitOnRandomInputs)
{
  std::mt19937_64                        engine(20261130);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  WeightComparison                       weights;
  for (int n = 0; n < 2000000; ++n)
  {
    const double norm = std::pow(10.0, -6.0 + 12.0 * unit(engine));
    const double raw = norm * (-1.0 + 7.0 * unit(engine));
    weights.Compare(raw, norm, (n % 2) ? 1.0 : 0.5);
  }
  EXPECT_EQ(weights.m_Differing, 0) << "of " << weights.m_Compared;
}

TEST(NonLocalMeansNumerics, CorrectedWeightEqualsDivisionBitForBitOnAdversarialInputs)
{
  std::mt19937_64                        engine(20261201);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  WeightComparison                       weights;
  // Distances where kExpA * dist is (nearly) an integer, and the edges of the band around the
  // integer where the division-free weight takes the division.
  for (int n = 0; n < 200000; ++n)
  {
    const double norm = std::pow(10.0, -4.0 + 8.0 * unit(engine));
    const double k = std::floor(unit(engine) * kExpA * 5.0);
    weights.Around((k / kExpA) * norm, norm, 1.0, 12);
    for (double edge : { -0x1.2p-20, -0x1p-20, -0x0.ep-20, 0x0.ep-20, 0x1p-20, 0x1.2p-20 })
    {
      weights.Compare(((k + edge) / kExpA) * norm, norm, 0.5);
    }
  }
  // The cutoff.
  for (double norm : { 1e-3, 0.0123, 1.0, 7.5, 3e4 })
  {
    weights.Around(5.0 * norm, norm, 0.5, 40);
  }
  // Norms at the ends of CorrectedQuotientFits and with extreme mantissas (all ones, all zeros).
  for (double norm : { 0x1p-500, 0x1p500, WithMantissa(~0ull, -3), WithMantissa(1, 7), WithMantissa(~0ull, 400) })
  {
    weights.Around(5.0 * norm, norm, 1.0, 8);
    weights.Around((1.0 / kExpA) * norm, norm, 1.0, 8);
    weights.Around((1234567.0 / kExpA) * norm, norm, 0.5, 8);
  }
  EXPECT_EQ(weights.m_Differing, 0) << "of " << weights.m_Compared;
}

TEST(NonLocalMeansNumerics, CorrectedQuotientEqualsDivisionBitForBit)
{
  // Random mantissas over CorrectedQuotientFits' norms and the raws whose quotients the weights use;
  // divisors whose mantissa is nearly all ones or nearly zero (where 1 / norm is least and most
  // accurate); dividends a few ulps from a multiple of the divisor by a float (quotients next to
  // floats) or by the midpoint between two floats (quotients next to a rounding boundary); and
  // dividends a few ulps below the divisor with a mantissa of all ones, where raw * (1 / norm) is
  // more than an ulp from the quotient.
  std::mt19937_64 engine(20261207);
  long            differing = 0;
  long            compared = 0;
  const auto      compare = [&](double raw, double norm) {
    ++compared;
    const double expected = raw / norm;
    const double corrected = CorrectedQuotient(raw, norm, 1.0 / norm);
    if (!SameBits(expected, corrected) && ++differing < 10)
    {
      ADD_FAILURE() << std::hexfloat << raw << " / " << norm << ": " << expected << ", corrected " << corrected;
    }
  };
  for (int kind = 0; kind < 5; ++kind)
  {
    for (int n = 0; n < 400000; ++n)
    {
      unsigned long long normMantissa = engine();
      if (kind == 1)
      {
        normMantissa = ~(engine() % 4096);
      }
      else if (kind == 2)
      {
        normMantissa = engine() % 4096;
      }
      const double norm = WithMantissa(normMantissa, static_cast<int>(engine() % 1000) - 500);
      const double quotient = WithMantissa(engine(), static_cast<int>(engine() % 60) - 50);
      double       raw = norm * quotient;
      if (kind == 3)
      {
        raw = std::fma(norm, quotient, norm * std::ldexp(1.0, std::ilogb(quotient) - 53)); // + half an ulp
      }
      for (int step = (kind >= 3) ? static_cast<int>(engine() % 7) - 3 : 0; step != 0; step += (step < 0) ? 1 : -1)
      {
        raw = std::nextafter(raw, (step < 0) ? 0.0 : 1e300);
      }
      if (kind == 4)
      {
        const double ones = WithMantissa(~0ull, static_cast<int>(engine() % 1000) - 500);
        raw = ones;
        for (int step = static_cast<int>(engine() % 8) + 1; step > 0; --step)
        {
          raw = std::nextafter(raw, 0.0);
        }
        compare(raw, ones);
        continue;
      }
      compare(raw, norm);
    }
  }
  compare(2.0 - 3.0 * 0x1p-52, 2.0 - 0x1p-52); // raw * (1 / norm) is 1 + 2^-52 ulps off
  EXPECT_EQ(differing, 0) << "of " << compared;
}

TEST(NonLocalMeansNumerics, CorrectedQuotientFitsNormsFromTwoToTheMinus500To500)
{
  EXPECT_TRUE(CorrectedQuotientFits(0x1p-500));
  EXPECT_TRUE(CorrectedQuotientFits(1.0));
  EXPECT_TRUE(CorrectedQuotientFits(0x1p500));
  EXPECT_FALSE(CorrectedQuotientFits(std::nextafter(0x1p-500, 0.0)));
  EXPECT_FALSE(CorrectedQuotientFits(std::nextafter(0x1p500, 1e308)));
  EXPECT_FALSE(CorrectedQuotientFits(std::numeric_limits<double>::quiet_NaN()));
}

TEST(NonLocalMeansNumerics, DivisionFreeWeightsEqualDivisionBitForBitOnSpecialValues)
{
  WeightComparison weights;
  const double     inf = std::numeric_limits<double>::infinity();
  weights.Compare(0.0, 0.3, 0.5);
  weights.Compare(-0.0, 0.3, 0.5);
  weights.Compare(-1.0, 0.3, 1.0);
  weights.Compare(1e-300, 0.3, 1.0);
  weights.Compare(inf, 0.3, 1.0);
  weights.Compare(1e300, 1e-6, 0.5);
  weights.Compare(1e305, 1e-6, 0.5); // a positive quotient that overflows
  weights.Compare(-1e300, 1e-6, 0.5);
  // Outside the corrected form's domain (a quotient of -infinity): the division-free form only.
  weights.Compare(-inf, 0.3, 1.0, false);
  weights.Compare(-1e305, 1e-6, 1.0, false);
  weights.Compare(std::numeric_limits<double>::denorm_min(), 1e-6, 1.0);
  // Near the integers 1, 2, 3 and the last ones before the cutoff, and near p = -2^-23.
  for (double norm : { 0.07, 3.0 })
  {
    for (double k : { 1.0, 2.0, 3.0, 7563875.0, 7563876.0, 7563877.0, 7563880.0 })
    {
      weights.Around((k / kExpA) * norm, norm, 0.5, 12);
    }
    for (double f : { 0.25, 0.5, 0.999999, 1.0, 1.000001, 2.0, 4.0 })
    {
      weights.Compare(f * 0x1p-23 / kExpA * norm, norm, 1.0);
    }
  }
  // Distances just below the zero weight cutoff, where the truncated integer is -7563876 or less.
  for (double norm : { 0.04, 2.5 })
  {
    for (double dist : { 4.99999, 4.9999995, 4.99999935, 4.9999994, 4.9999999, 5.0000001, 5.0000002 })
    {
      weights.Compare(dist * norm, norm, 1.0);
      weights.Compare(std::nextafter(dist * norm, 0.0), norm, 0.5);
    }
  }
  EXPECT_EQ(weights.m_Differing, 0) << "of " << weights.m_Compared;
}
