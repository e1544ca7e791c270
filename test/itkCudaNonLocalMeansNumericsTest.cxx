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

// The shared arithmetic (src/itkNonLocalMeansNumerics.h): scikit-image's fast exponential against
// the reference values of its documentation, x86 behaviour out of range, NumPy's reflect map, and
// the division-free weight against the division, bit for bit, on random and adversarial inputs.

#include "itkNonLocalMeansNumerics.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <random>

namespace
{
int failures = 0;

bool
SameBits(double a, double b)
{
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

void
Check(bool ok, const std::string & what)
{
  if (!ok)
  {
    std::cout << "FAIL " << what << std::endl;
    ++failures;
  }
}

/** NumPy's np.pad(mode='reflect') by explicit repeated reflection, as a reference. */
long long
ReflectByWalking(long long i, long long n)
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
} // namespace

int
itkCudaNonLocalMeansNumericsTest(int, char *[])
{
  using namespace itk::nlm;
  std::cout << std::setprecision(17);

  // scikit-image's documented values of _fast_exp.
  const double ys[] = { 0.0, -0.5, -1.0, -2.0, -5.0 };
  const double fe[] = {
    0.9710078239440918, 0.6103343963623047, 0.3748302459716797, 0.13207828998565674, 0.0067521147429943085
  };
  for (int i = 0; i < 5; ++i)
  {
    Check(FastExp(ys[i]) == fe[i] && FastExpX86(ys[i]) == fe[i], "fe(" + std::to_string(ys[i]) + ")");
  }
  // Out of range, as on x86-64: NaN below -709.049, huge negative values, INT32_MIN beyond the
  // int32 range and for NaN (-0.971...).
  Check(std::isnan(FastExpX86(-709.2)), "fe(-709.2) is NaN");
  Check(std::abs(FastExpX86(-710.0) / -1.46e308 - 1.0) < 0.01, "fe(-710) ~ -1.46e308");
  Check(std::abs(FastExpX86(-1000.0) / -1.66e182 - 1.0) < 0.01, "fe(-1000) ~ -1.66e182");
  Check(FastExpX86(-1500.0) == -0.9710078239440918, "fe(-1500) == -0.971");
  Check(FastExpX86(std::numeric_limits<double>::quiet_NaN()) == -0.9710078239440918, "fe(NaN) == -0.971");

  // NumPy's reflect padding.
  for (long long n : { 1, 2, 3, 5, 8 })
  {
    for (long long i = -20; i < 30; ++i)
    {
      Check(ReflectIndex(i, n) == ReflectByWalking(i, n), "reflect " + std::to_string(i) + " in " + std::to_string(n));
    }
  }

  // Cython max keeps NaN and -0.0.
  Check(std::isnan(CythonMax(std::numeric_limits<double>::quiet_NaN(), 0.0)), "max(NaN, 0) is NaN");
  Check(std::signbit(CythonMax(-0.0, 0.0)), "max(-0.0, 0.0) is -0.0");

  // The weight as a high word, with and without the division, equals the weight with the division,
  // bit for bit.
  std::mt19937_64                        engine(20261130);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  long                                   compared = 0;
  auto                                   compare = [&](double raw, double norm, double alpha) {
    const double expected = FastModeWeight(raw, norm, alpha);
    const double exact = DoubleFromHighWord(FastModeWeightHighWord(raw, norm, alpha == 0.5));
    const double fast = DoubleFromHighWord(FastModeWeightHighWordNoDivision(raw, norm, 1.0 / norm, alpha == 0.5));
    const double scaled = DoubleFromHighWord(FastModeWeightHighWordScaled(raw, norm, WeightScale(norm), alpha == 0.5));
    ++compared;
    if (!SameBits(expected, exact) || !SameBits(expected, fast) || !SameBits(expected, scaled))
    {
      std::cout << "FAIL raw " << raw << " norm " << norm << ": " << expected << " vs " << exact << ", " << fast
                << " and " << scaled << std::endl;
      ++failures;
    }
  };
  for (int n = 0; n < 2000000; ++n)
  {
    const double norm = std::pow(10.0, -6.0 + 12.0 * unit(engine));
    const double raw = norm * (-1.0 + 7.0 * unit(engine));
    compare(raw, norm, (n % 2) ? 1.0 : 0.5);
  }
  // Every raw from `ulps` steps below `centre` to `ulps` steps above it.
  auto around = [&](double centre, double norm, double alpha, int ulps) {
    double raw = centre;
    for (int step = 0; step < ulps; ++step)
    {
      raw = std::nextafter(raw, -1.0);
    }
    for (int step = 0; step < 2 * ulps; ++step)
    {
      compare(raw, norm, alpha);
      raw = std::nextafter(raw, 1e300);
    }
  };
  // Adversarial: distances where kExpA * dist is (nearly) an integer, and the cutoff.
  for (int n = 0; n < 200000; ++n)
  {
    const double norm = std::pow(10.0, -4.0 + 8.0 * unit(engine));
    const double k = std::floor(unit(engine) * kExpA * 5.0);
    around((k / kExpA) * norm, norm, 1.0, 12);
    // Next to the edges of the band around the integer where the scaled weight takes the division.
    for (double edge : { -0x1.2p-20, -0x1p-20, -0x0.ep-20, 0x0.ep-20, 0x1p-20, 0x1.2p-20 })
    {
      compare(((k + edge) / kExpA) * norm, norm, 0.5);
    }
  }
  for (double norm : { 1e-3, 0.0123, 1.0, 7.5, 3e4 })
  {
    around(5.0 * norm, norm, 0.5, 40);
  }
  compare(0.0, 0.3, 0.5);
  compare(-0.0, 0.3, 0.5);
  compare(-1.0, 0.3, 1.0);
  compare(1e-300, 0.3, 1.0);
  compare(std::numeric_limits<double>::infinity(), 0.3, 1.0);
  compare(-std::numeric_limits<double>::infinity(), 0.3, 1.0);
  compare(1e300, 1e-6, 0.5);
  compare(-1e300, 1e-6, 0.5);
  compare(std::numeric_limits<double>::denorm_min(), 1e-6, 1.0);
  // Near the integers 1, 2, 3 and the last ones before the cutoff, and near p = -2^-23.
  for (double norm : { 0.07, 3.0 })
  {
    for (double k : { 1.0, 2.0, 3.0, 7563875.0, 7563876.0, 7563877.0, 7563880.0 })
    {
      around((k / kExpA) * norm, norm, 0.5, 12);
    }
    for (double f : { 0.25, 0.5, 0.999999, 1.0, 1.000001, 2.0, 4.0 })
    {
      compare(f * 0x1p-23 / kExpA * norm, norm, 1.0);
    }
  }
  // Distances just below the zero weight cutoff, where the truncated integer is -7563876 or less.
  for (double norm : { 0.04, 2.5 })
  {
    for (double dist : { 4.99999, 4.9999995, 4.99999935, 4.9999994, 4.9999999, 5.0000001, 5.0000002 })
    {
      compare(dist * norm, norm, 1.0);
      compare(std::nextafter(dist * norm, 0.0), norm, 0.5);
    }
  }
  std::cout << compared << " weights compared" << std::endl;

  std::cout << (failures == 0 ? "Test passed." : "Test FAILED.") << std::endl;
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
