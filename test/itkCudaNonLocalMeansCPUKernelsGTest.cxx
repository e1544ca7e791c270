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

// The CPU backend's SIMD targets (src/itkNonLocalMeansCPUKernels.h): each target this machine runs
// is forced in turn, and its output is compared bit for bit with the numerical contract's direct
// sums, written here from doc/numerical-contract.md section 2 without any of the backend's code;
// its vector weights with nlm::FastModeWeight on random and adversarial distances.

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkCudaNonLocalMeansTestUtilities.h"
#include "itkNonLocalMeansCPUKernels.h"
#include "itkNonLocalMeansNumerics.h"
#include "itkNonLocalMeansOverrides.h"
#include "itkGTest.h"
#include "itkImageRegionConstIteratorWithIndex.h"
#include "itkImageRegionIteratorWithIndex.h"
#include "itkStreamingImageFilter.h"
#include "itkVectorImage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace
{
using itk::nlm::Overrides;

/** Sets the overrides for the lifetime of the object (the environment's afterwards). */
class ScopedOverrides
{
public:
  explicit ScopedOverrides(const Overrides & o) { itk::nlm::SetOverrides(o); }
  ~ScopedOverrides() { itk::nlm::SetOverrides(itk::nlm::ReadOverrides()); }
  ScopedOverrides(const ScopedOverrides &) = delete;
  ScopedOverrides &
  operator=(const ScopedOverrides &) = delete;
};

bool
SameBits(double a, double b)
{
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

/** The opt-in extensions of contract section 6: the Rician noise model, a noise map, a mask. */
template <unsigned int VDimension>
struct Extensions
{
  bool                                                         Rician{ false };
  typename itk::Image<double, VDimension>::ConstPointer        NoiseSigma;
  typename itk::Image<unsigned char, VDimension>::ConstPointer Mask;
  // Per-axis patch radii and search radii (section 6.4); empty: the isotropic parameters.
  std::vector<int> PatchRadius;
  std::vector<int> SearchRadius;
  bool             Classic{ false }; // slow (classic) mode, contract section 3
};

/** The contract's fast mode by its definition: for every cell and shift, raw(c, t) as the nested
 * one-dimensional sums of D over the off-centre box, the weights of both terms, and the
 * accumulation in the contract's order; with the extensions of section 6. Slow, for small images. */
template <typename TImage>
std::vector<double>
ContractOutput(const TImage *                             image,
               int                                        patchSize,
               int                                        d,
               double                                     h,
               double                                     sigma,
               const Extensions<TImage::ImageDimension> & extensions = {})
{
  constexpr unsigned int n = TImage::ImageDimension;
  using T = typename std::conditional<
    std::is_same<typename itk::NumericTraits<typename TImage::PixelType>::ValueType, float>::value,
    float,
    double>::type;
  const auto         size = image->GetLargestPossibleRegion().GetSize();
  const int          K = static_cast<int>(image->GetNumberOfComponentsPerPixel());
  std::array<int, n> sA, oA, dA; // patch size, its half and the distance per axis
  for (unsigned int a = 0; a < n; ++a)
  {
    sA[a] =
      extensions.PatchRadius.empty() ? patchSize + (patchSize % 2 == 0 ? 1 : 0) : 2 * extensions.PatchRadius[a] + 1;
    oA[a] = sA[a] / 2;
    dA[a] = extensions.SearchRadius.empty() ? d : extensions.SearchRadius[a];
  }
  const int    s = sA[0]; // 1 on every axis or on none
  const double noise = static_cast<double>(K) * (2.0 * (sigma * sigma));
  double       norm = (static_cast<double>(K) * h) * h;
  for (unsigned int a = 0; a < n; ++a)
  {
    norm *= static_cast<double>(sA[a]);
  }
  using Point = std::array<long long, n>;
  auto Y = [&](const Point & p, int k) {
    typename TImage::IndexType index;
    for (unsigned int a = 0; a < n; ++a)
    {
      index[a] = itk::nlm::ReflectIndex(p[a], static_cast<long long>(size[a]));
    }
    return static_cast<double>(
      itk::DefaultConvertPixelTraits<typename TImage::PixelType>::GetNthComponent(k, image->GetPixel(index)));
  };
  // sigma^2 of the noise map at a (reflected) grid point.
  auto S2 = [&](const Point & p) {
    typename TImage::IndexType index;
    for (unsigned int a = 0; a < n; ++a)
    {
      index[a] = itk::nlm::ReflectIndex(p[a], static_cast<long long>(size[a]));
    }
    const double value = extensions.NoiseSigma->GetPixel(index);
    return value * value;
  };
  auto value = [&](const Point & p, int k) {
    const double y = Y(p, k);
    return extensions.Rician ? y * y : y;
  };
  auto D = [&](const Point & y, const Point & t) {
    Point yt;
    for (unsigned int a = 0; a < n; ++a)
    {
      yt[a] = y[a] + t[a];
    }
    double acc = 0.0;
    for (int k = 0; k < K; ++k)
    {
      const double diff = Y(y, k) - Y(yt, k);
      acc = (k == 0) ? diff * diff : acc + diff * diff;
    }
    if (extensions.NoiseSigma)
    {
      return acc - static_cast<double>(K) * (S2(y) + S2(yt));
    }
    return acc - noise;
  };
  // Sum over axis a (and, inside, the axes below it) of the box around c.
  std::function<double(int, Point, const Point &)> Sum = [&](int a, Point p, const Point & t) -> double {
    if (a < 0)
    {
      return D(p, t);
    }
    const long long centre = p[a];
    double          acc = 0.0;
    for (int j = -oA[a] + 1; j <= oA[a]; ++j)
    {
      p[a] = centre + j;
      const double term = Sum(a - 1, p, t);
      acc = (j == -oA[a] + 1) ? term : acc + term;
    }
    return acc;
  };
  auto weight = [&](const Point & c, const Point & t) {
    const double raw = (s == 1) ? 0.0 : Sum(static_cast<int>(n) - 1, c, t);
    return itk::nlm::FastModeWeight(raw, norm, t[0] == 0 ? 0.5 : 1.0);
  };
  // Shifts in the contract's order: t_{n-1} outermost, t_0 over [0, d].
  std::vector<Point>       shifts;
  Point                    t;
  std::function<void(int)> enumerate = [&](int a) {
    if (a < 0)
    {
      shifts.push_back(t);
      return;
    }
    for (int v = itk::nlm::FirstShift(a, dA[a]); v <= dA[a]; ++v)
    {
      t[a] = v;
      enumerate(a - 1);
    }
  };
  enumerate(static_cast<int>(n) - 1);

  std::vector<double>                            out;
  itk::ImageRegionConstIteratorWithIndex<TImage> it(image, image->GetLargestPossibleRegion());
  for (; !it.IsAtEnd(); ++it)
  {
    Point x;
    for (unsigned int a = 0; a < n; ++a)
    {
      x[a] = it.GetIndex()[a];
    }
    double              W = 0.0;
    std::vector<double> R(static_cast<size_t>(K), 0.0);
    for (const Point & shift : shifts)
    {
      Point xc, xt;
      int   tInt[4] = { 0, 0, 0, 0 };
      for (unsigned int a = 0; a < n; ++a)
      {
        xc[a] = x[a] + shift[a];
        xt[a] = x[a] - shift[a];
        tInt[a] = static_cast<int>(shift[a]);
      }
      const double wc = weight(x, shift);
      const double wt = weight(xt, shift);
      const bool   targetFirst = itk::nlm::IsLexicographicallyPositive(tInt, static_cast<int>(n));
      const double w1 = targetFirst ? wt : wc;
      const double w2 = targetFirst ? wc : wt;
      W = (W + w1) + w2;
      for (int k = 0; k < K; ++k)
      {
        const double y1 = targetFirst ? value(xt, k) : value(xc, k);
        const double y2 = targetFirst ? value(xc, k) : value(xt, k);
        R[static_cast<size_t>(k)] = (R[static_cast<size_t>(k)] + w1 * y1) + w2 * y2;
      }
    }
    const bool   masked = extensions.Mask && extensions.Mask->GetPixel(it.GetIndex()) == 0;
    const double bias = extensions.NoiseSigma ? 2.0 * S2(x) : 2.0 * (sigma * sigma);
    for (int k = 0; k < K; ++k)
    {
      const double mean = R[static_cast<size_t>(k)] / W;
      const double result = masked ? Y(x, k) : (extensions.Rician ? std::sqrt(std::max(mean - bias, 0.0)) : mean);
      out.push_back(static_cast<double>(static_cast<T>(result)));
    }
  }
  return out;
}

/** The filter's output on the CPU backend with the SIMD target in force, flattened like
 * ContractOutput; computed in `streams` pieces (StreamingImageFilter). */
template <typename TImage>
std::vector<double>
FilterOutput(const TImage *                             image,
             int                                        patchSize,
             int                                        d,
             double                                     h,
             double                                     sigma,
             unsigned int                               streams,
             std::string &                              configuration,
             const Extensions<TImage::ImageDimension> & extensions = {})
{
  using FilterType = itk::CudaNonLocalMeansImageFilter<TImage>;
  auto filter = FilterType::New();
  filter->SetInput(image);
  filter->SetMaskImage(extensions.Mask);
  filter->SetNoiseSigmaImage(extensions.NoiseSigma);
  typename FilterType::RadiusType patchRadius, searchRadius;
  for (unsigned int a = 0; a < TImage::ImageDimension; ++a)
  {
    patchRadius[a] = extensions.PatchRadius.empty() ? 0 : static_cast<itk::SizeValueType>(extensions.PatchRadius[a]);
    searchRadius[a] = extensions.SearchRadius.empty() ? 0 : static_cast<itk::SizeValueType>(extensions.SearchRadius[a]);
  }
  if (extensions.Rician)
  {
    filter->SetNoiseModel(FilterType::NoiseModelEnum::Rician);
  }
  filter->SetPatchSize(patchSize);
  filter->SetPatchDistance(d);
  filter->SetH(h);
  filter->SetSigma(sigma);
  filter->SetBackend(FilterType::BackendEnum::CPU);
  filter->SetFastMode(!extensions.Classic);
  filter->SetNumberOfWorkUnits(3);
  if (!extensions.PatchRadius.empty())
  {
    filter->SetPatchRadius(patchRadius);
  }
  if (!extensions.SearchRadius.empty())
  {
    filter->SetSearchRadius(searchRadius);
  }
  auto streamer = itk::StreamingImageFilter<TImage, TImage>::New();
  streamer->SetInput(filter->GetOutput());
  streamer->SetNumberOfStreamDivisions(streams);
  streamer->Update();
  configuration = filter->GetBackendStatistics().Configuration;
  std::vector<double>                   out;
  itk::ImageRegionConstIterator<TImage> it(streamer->GetOutput(), streamer->GetOutput()->GetLargestPossibleRegion());
  const unsigned int                    K = image->GetNumberOfComponentsPerPixel();
  for (; !it.IsAtEnd(); ++it)
  {
    for (unsigned int k = 0; k < K; ++k)
    {
      out.push_back(static_cast<double>(
        itk::DefaultConvertPixelTraits<typename TImage::PixelType>::GetNthComponent(static_cast<int>(k), it.Get())));
    }
  }
  return out;
}

/** actual == expected bit for bit: reports the first differing value (and `reference`'s) and the count. */
void
ExpectSameBits(const std::vector<double> & actual,
               const std::vector<double> & expected,
               const std::string &         what,
               const char *                reference)
{
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t differing = 0;
  for (size_t i = 0; i < actual.size(); ++i)
  {
    if (!SameBits(actual[i], expected[i]) && differing++ == 0)
    {
      ADD_FAILURE() << what << ": value " << i << " is " << actual[i] << ", " << reference << " " << expected[i];
    }
  }
  EXPECT_EQ(differing, 0u) << what;
}

/** Every target and two chunkings against the contract's direct sums. */
template <typename TImage>
void
CheckEveryTarget(const std::string &                        name,
                 const TImage *                             image,
                 int                                        patchSize,
                 int                                        d,
                 double                                     h,
                 double                                     sigma,
                 unsigned int                               streams = 1,
                 const Extensions<TImage::ImageDimension> & extensions = {})
{
  const std::vector<double> expected = ContractOutput(image, patchSize, d, h, sigma, extensions);
  for (const itk::nlm::cpu::Kernels * kernels : itk::nlm::cpu::AvailableKernels())
  {
    for (long long chunkCells : { 0LL, 37LL })
    {
      Overrides o = itk::nlm::ReadOverrides();
      o.CPUInstructionSet = kernels->Name;
      o.CPUChunkCells = chunkCells;
      const ScopedOverrides     scoped(o);
      std::string               configuration;
      const std::vector<double> actual =
        FilterOutput(image, patchSize, d, h, sigma, streams, configuration, extensions);
      EXPECT_NE(configuration.find(kernels->Name), std::string::npos) << configuration;
      ExpectSameBits(actual,
                     expected,
                     name + ", " + kernels->Name + ", chunk cells " + std::to_string(chunkCells),
                     "the contract's");
    }
  }
}
} // namespace

TEST(CudaNonLocalMeansCPUKernels, EveryTargetEqualsTheContractsDirectSumsBitForBit)
{
  using Image2 = itk::Image<float, 2>;
  using Image3 = itk::Image<double, 3>;
  using Vector2 = itk::VectorImage<double, 2>;
  using Vector3 = itk::VectorImage<float, 3>;
  using Image4 = itk::Image<float, 4>;
  // Row lengths that are not multiples of any vector width, patches 1 to 7, even patches.
  CheckEveryTarget(
    "2D float 23x11 p5 d3", itk::nlm_test::MakeImage<Image2>({ { 23, 11 } }, 1, 31).GetPointer(), 5, 3, 0.12, 0.05);
  CheckEveryTarget(
    "2D float 19x9 p7 d4", itk::nlm_test::MakeImage<Image2>({ { 19, 9 } }, 1, 32).GetPointer(), 7, 4, 0.3, 0.0);
  CheckEveryTarget("2D float 31x9 p13 d2 (a window the kernels take at run time)",
                   itk::nlm_test::MakeImage<Image2>({ { 31, 9 } }, 1, 43).GetPointer(),
                   13,
                   2,
                   0.4,
                   0.02);
  CheckEveryTarget("3D double 14x12x11 p11 d1",
                   itk::nlm_test::MakeImage<Image3>({ { 14, 12, 11 } }, 1, 44).GetPointer(),
                   11,
                   1,
                   0.3,
                   0.02);
  CheckEveryTarget(
    "2D float 17x6 p1 d2", itk::nlm_test::MakeImage<Image2>({ { 17, 6 } }, 1, 33).GetPointer(), 1, 2, 0.1, 0.02);
  CheckEveryTarget(
    "3D double 13x7x6 p3 d2", itk::nlm_test::MakeImage<Image3>({ { 13, 7, 6 } }, 1, 34).GetPointer(), 3, 2, 0.1, 0.04);
  CheckEveryTarget(
    "3D double 9x6x5 p4 d1", itk::nlm_test::MakeImage<Image3>({ { 9, 6, 5 } }, 1, 35).GetPointer(), 4, 1, 0.2, 0.0);
  CheckEveryTarget("2D double 3 components 14x8 p3 d2",
                   itk::nlm_test::MakeImage<Vector2>({ { 14, 8 } }, 3, 36).GetPointer(),
                   3,
                   2,
                   0.15,
                   0.03);
  CheckEveryTarget("3D float 2 components 11x5x4 p3 d1",
                   itk::nlm_test::MakeImage<Vector3>({ { 11, 5, 4 } }, 2, 37).GetPointer(),
                   3,
                   1,
                   0.2,
                   0.05);
  CheckEveryTarget("4D float 7x4x3x3 p3 d1",
                   itk::nlm_test::MakeImage<Image4>({ { 7, 4, 3, 3 } }, 1, 38).GetPointer(),
                   3,
                   1,
                   0.15,
                   0.02);
}

namespace
{
using itk::nlm_test::MakeNoiseMap;

/** The tests' mask: a ball of 0.3 of the extent and about one pixel in 13 elsewhere, holding 7. */
template <unsigned int VDimension>
typename itk::Image<unsigned char, VDimension>::Pointer
MakeMask(const itk::ImageBase<VDimension> * like, unsigned int seed)
{
  return itk::nlm_test::MakeMask<VDimension>(like, 0.3, 13, seed, 7);
}
} // namespace

TEST(CudaNonLocalMeansCPUKernels, EveryTargetEqualsTheContractWithTheExtensionsBitForBit)
{
  using Image2 = itk::Image<float, 2>;
  using Image3 = itk::Image<double, 3>;
  using Vector2 = itk::VectorImage<double, 2>;
  using Image4 = itk::Image<float, 4>;
  {
    const auto    image = itk::nlm_test::MakeImage<Image2>({ { 23, 11 } }, 1, 51);
    Extensions<2> rician;
    rician.Rician = true;
    CheckEveryTarget("2D float 23x11 p5 d3 Rician", image.GetPointer(), 5, 3, 0.12, 0.05, 1, rician);
    Extensions<2> map;
    map.NoiseSigma = MakeNoiseMap<2>(image, 52, 0.12).GetPointer();
    CheckEveryTarget("2D float 23x11 p5 d3 noise map", image.GetPointer(), 5, 3, 0.12, 0.0, 1, map);
    Extensions<2> all = map;
    all.Rician = true;
    all.Mask = MakeMask<2>(image, 53).GetPointer();
    CheckEveryTarget("2D float 23x11 p5 d3 Rician, map, mask, 2 streams", image.GetPointer(), 5, 3, 0.12, 0.0, 2, all);
  }
  {
    const auto    image = itk::nlm_test::MakeImage<Image2>({ { 31, 9 } }, 1, 54);
    Extensions<2> map;
    map.NoiseSigma = MakeNoiseMap<2>(image, 55, 0.05).GetPointer();
    map.Rician = true;
    CheckEveryTarget("2D float 31x9 p13 d2 Rician, map", image.GetPointer(), 13, 2, 0.4, 0.0, 1, map);
  }
  {
    const auto    image = itk::nlm_test::MakeImage<Image3>({ { 13, 7, 6 } }, 1, 56);
    Extensions<3> all;
    all.Rician = true;
    all.NoiseSigma = MakeNoiseMap<3>(image, 57, 0.1).GetPointer();
    all.Mask = MakeMask<3>(image, 58).GetPointer();
    CheckEveryTarget("3D double 13x7x6 p3 d2 Rician, map, mask, 3 streams", image.GetPointer(), 3, 2, 0.1, 0.0, 3, all);
    Extensions<3> mask;
    mask.Mask = all.Mask;
    CheckEveryTarget("3D double 13x7x6 p4 d1 mask", image.GetPointer(), 4, 1, 0.2, 0.03, 1, mask);
  }
  {
    const auto    image = itk::nlm_test::MakeImage<Vector2>({ { 14, 8 } }, 3, 59);
    Extensions<2> all;
    all.Rician = true;
    all.NoiseSigma = MakeNoiseMap<2>(image, 60, 0.08).GetPointer();
    all.Mask = MakeMask<2>(image, 61).GetPointer();
    CheckEveryTarget(
      "2D double 3 components 14x8 p3 d2 Rician, map, mask", image.GetPointer(), 3, 2, 0.15, 0.0, 1, all);
  }
  {
    const auto    image = itk::nlm_test::MakeImage<Image4>({ { 7, 4, 3, 3 } }, 1, 62);
    Extensions<4> all;
    all.Rician = true;
    all.NoiseSigma = MakeNoiseMap<4>(image, 63, 0.06).GetPointer();
    CheckEveryTarget("4D float 7x4x3x3 p3 d1 Rician, map", image.GetPointer(), 3, 1, 0.15, 0.0, 1, all);
    Extensions<4> p1;
    p1.Rician = true;
    p1.Mask = MakeMask<4>(image, 64).GetPointer();
    CheckEveryTarget("4D float 7x4x3x3 p1 d1 Rician, mask", image.GetPointer(), 1, 1, 0.15, 0.04, 1, p1);
  }
}

TEST(CudaNonLocalMeansCPUKernels, EveryTargetEqualsTheContractWithPerAxisRadiiBitForBit)
{
  using Image2 = itk::Image<float, 2>;
  using Image3 = itk::Image<double, 3>;
  using Vector3 = itk::VectorImage<float, 3>;
  using Image4 = itk::Image<float, 4>;
  {
    const auto    image = itk::nlm_test::MakeImage<Image2>({ { 23, 11 } }, 1, 81);
    Extensions<2> e;
    e.PatchRadius = { 2, 1 };
    e.SearchRadius = { 1, 3 };
    CheckEveryTarget("2D float 23x11 patch radius (2, 1), search (1, 3)", image.GetPointer(), 3, 1, 0.12, 0.05, 1, e);
    e.PatchRadius = { 1, 3 };
    e.SearchRadius = { 4, 0 };
    e.Rician = true;
    CheckEveryTarget(
      "2D float 23x11 patch radius (1, 3), search (4, 0), Rician", image.GetPointer(), 3, 1, 0.2, 0.05, 2, e);
  }
  {
    const auto    image = itk::nlm_test::MakeImage<Image3>({ { 14, 12, 9 } }, 1, 82);
    Extensions<3> e;
    e.PatchRadius = { 1, 1, 2 };
    e.SearchRadius = { 2, 2, 1 };
    CheckEveryTarget("3D double 14x12x9 patch radius (1, 1, 2), search (2, 2, 1), 3 streams",
                     image.GetPointer(),
                     3,
                     1,
                     0.15,
                     0.02,
                     3,
                     e);
    e.PatchRadius = { 3, 1, 1 };
    e.SearchRadius = { 1, 1, 1 };
    e.NoiseSigma = MakeNoiseMap<3>(image, 83, 0.05).GetPointer();
    e.Mask = MakeMask<3>(image, 84).GetPointer();
    CheckEveryTarget("3D double 14x12x9 patch radius (3, 1, 1), map, mask", image.GetPointer(), 3, 1, 0.3, 0.0, 1, e);
  }
  {
    const auto    image = itk::nlm_test::MakeImage<Vector3>({ { 11, 7, 6 } }, 2, 85);
    Extensions<3> e;
    e.PatchRadius = { 1, 2, 1 };
    CheckEveryTarget(
      "3D float 2 components patch radius (1, 2, 1), distance 1", image.GetPointer(), 3, 1, 0.2, 0.05, 1, e);
  }
  {
    const auto    image = itk::nlm_test::MakeImage<Image4>({ { 7, 5, 4, 4 } }, 1, 86);
    Extensions<4> e;
    e.PatchRadius = { 1, 1, 1, 2 };
    e.SearchRadius = { 1, 2, 1, 1 };
    CheckEveryTarget(
      "4D float patch radius (1, 1, 1, 2), search (1, 2, 1, 1)", image.GetPointer(), 3, 1, 0.2, 0.02, 1, e);
  }
}

namespace
{
/** Classic mode on every target against the scalar target's loop (the contract's section 3 as
 * written), bit for bit: the vector targets run the pixels whose candidates are not clipped along
 * axis 0 in lanes. */
template <typename TImage>
void
CheckClassicOnEveryTarget(const std::string &                name,
                          const TImage *                     image,
                          int                                patchSize,
                          int                                d,
                          double                             h,
                          double                             sigma,
                          Extensions<TImage::ImageDimension> extensions = {},
                          unsigned int                       streams = 1)
{
  extensions.Classic = true;
  std::vector<double> expected;
  {
    Overrides o = itk::nlm::ReadOverrides();
    o.CPUInstructionSet = "scalar";
    const ScopedOverrides scoped(o);
    std::string           configuration;
    expected = FilterOutput(image, patchSize, d, h, sigma, streams, configuration, extensions);
    EXPECT_NE(configuration.find("classic mode, scalar"), std::string::npos) << configuration;
  }
  for (const itk::nlm::cpu::Kernels * kernels : itk::nlm::cpu::AvailableKernels())
  {
    Overrides o = itk::nlm::ReadOverrides();
    o.CPUInstructionSet = kernels->Name;
    const ScopedOverrides     scoped(o);
    std::string               configuration;
    const std::vector<double> actual = FilterOutput(image, patchSize, d, h, sigma, streams, configuration, extensions);
    EXPECT_NE(configuration.find(std::string("classic mode, ") + kernels->Name), std::string::npos) << configuration;
    ExpectSameBits(actual, expected, name + ", " + kernels->Name, "the scalar loop's");
  }
}
} // namespace

TEST(CudaNonLocalMeansCPUKernels, EveryTargetsClassicModeEqualsTheScalarLoopBitForBit)
{
  using Float2 = itk::Image<float, 2>;
  using Double2 = itk::Image<double, 2>;
  using Float3 = itk::Image<float, 3>;
  using Double3 = itk::Image<double, 3>;
  using Vector2 = itk::VectorImage<float, 2>;
  // Rows with several vectors of 16 floats / 8 doubles and a remainder, clipped candidates along
  // the other axes, rows cut before the last (small h) and the hazard of a tiny h (weights from
  // out-of-range conversions), the Rician model, a mask, streaming.
  CheckClassicOnEveryTarget(
    "2D float 53x9 p5 d3", itk::nlm_test::MakeImage<Float2>({ { 53, 9 } }, 1, 61).GetPointer(), 5, 3, 0.12, 0.05);
  CheckClassicOnEveryTarget(
    "2D double 41x7 p7 d4", itk::nlm_test::MakeImage<Double2>({ { 41, 7 } }, 1, 62).GetPointer(), 7, 4, 0.3, 0.0);
  CheckClassicOnEveryTarget("2D float 47x6 p3 d2, h 0.004 (cut rows, out-of-range weights)",
                            itk::nlm_test::MakeImage<Float2>({ { 47, 6 } }, 1, 63).GetPointer(),
                            3,
                            2,
                            0.004,
                            0.01);
  CheckClassicOnEveryTarget(
    "3D float 44x6x5 p3 d2", itk::nlm_test::MakeImage<Float3>({ { 44, 6, 5 } }, 1, 64).GetPointer(), 3, 2, 0.1, 0.04);
  {
    Extensions<3> rician;
    rician.Rician = true;
    CheckClassicOnEveryTarget("3D double 31x5x5 p5 d2 Rician",
                              itk::nlm_test::MakeImage<Double3>({ { 31, 5, 5 } }, 1, 65).GetPointer(),
                              5,
                              2,
                              0.2,
                              0.05,
                              rician,
                              2);
  }
  {
    const auto    image = itk::nlm_test::MakeImage<Float2>({ { 50, 8 } }, 1, 66);
    Extensions<2> masked;
    masked.Mask = MakeMask<2>(image.GetPointer(), 67);
    CheckClassicOnEveryTarget("2D float 50x8 p5 d2 masked", image.GetPointer(), 5, 2, 0.15, 0.03, masked, 3);
  }
  {
    // A step along axis 1: candidates whose first patch rows match and whose last row crosses the
    // step reach distances far beyond the cutoff, whose weights come from x86's out-of-range
    // conversion (contract section 3).
    auto                    step = Double2::New();
    const Double2::SizeType size{ { 45, 10 } };
    step->SetRegions(Double2::RegionType(size));
    step->Allocate();
    for (itk::ImageRegionIteratorWithIndex<Double2> it(step, step->GetLargestPossibleRegion()); !it.IsAtEnd(); ++it)
    {
      it.Set((it.GetIndex()[1] >= 5 ? 1.0 : 0.0) + 0.001 * static_cast<double>(it.GetIndex()[0] % 3));
    }
    CheckClassicOnEveryTarget("2D double 45x10 step p3 d2 h 0.005", step.GetPointer(), 3, 2, 0.005, 0.0);
  }
  CheckClassicOnEveryTarget("2D float 3 components 30x6 p3 d2",
                            itk::nlm_test::MakeImage<Vector2>({ { 30, 6 } }, 3, 68).GetPointer(),
                            3,
                            2,
                            0.15,
                            0.03);
  {
    using DoubleVector2 = itk::VectorImage<double, 2>;
    Extensions<2> rician;
    rician.Rician = true;
    CheckClassicOnEveryTarget("2D double 4 components 27x7 p5 d3 Rician",
                              itk::nlm_test::MakeImage<DoubleVector2>({ { 27, 7 } }, 4, 69).GetPointer(),
                              5,
                              3,
                              0.2,
                              0.04,
                              rician);
  }
  CheckClassicOnEveryTarget("2D float 5 components 25x5 p3 d2 (beyond the lanes' 4: the scalar loop)",
                            itk::nlm_test::MakeImage<Vector2>({ { 25, 5 } }, 5, 70).GetPointer(),
                            3,
                            2,
                            0.15,
                            0.03);
}

TEST(CudaNonLocalMeansCPUKernels, EveryTargetsWeightsEqualFastModeWeightBitForBit)
{
  std::mt19937_64                        engine(2026);
  std::uniform_real_distribution<double> uniform(-1.0, 7.0);
  for (const itk::nlm::cpu::Kernels * kernels : itk::nlm::cpu::AvailableKernels())
  {
    // The norms include those at and beyond the ends of CorrectedQuotientFits (AVX-512 takes the
    // corrected quotient inside, the division outside) and one whose mantissa is all ones.
    for (const double norm : { 0.0243,
                               1.0,
                               3.0e-7,
                               12345.678,
                               0x1p-500,
                               std::nextafter(0x1p-500, 0.0),
                               0x1p500,
                               std::nextafter(0x1p500, 1e308),
                               2.0 - 0x1p-52 })
    {
      std::vector<double> raw;
      for (int i = 0; i < 20000; ++i)
      {
        raw.push_back(uniform(engine) * norm);
      }
      raw.push_back(std::numeric_limits<double>::infinity());
      double below = norm; // just below the norm
      for (int step = 0; step < 16; ++step)
      {
        below = std::nextafter(below, 0.0);
        raw.push_back(below);
      }
      // Up from +0 (subnormals) and around the raws where the corrected quotient stops being exact
      // (2^-960), where it must be (2^-521) and the first step of the truncation (1 / kExpA).
      for (const double start : { 0.0, 0x1p-960, 0x1p-521, norm / itk::nlm::kExpA })
      {
        double up = start;
        for (int step = 0; step < 24; ++step)
        {
          raw.push_back(up);
          up = std::nextafter(up, 1e308);
        }
      }
      // Around the cutoff, around steps of the truncation, zeros, negatives and the far range.
      for (double centre : { 5.0 * norm, -0.0, 0.0, 1e300, -1e300, 4.0 * norm })
      {
        double v = centre;
        for (int step = 0; step < 40; ++step)
        {
          raw.push_back(v);
          v = std::nextafter(v, -1e308);
        }
      }
      for (int k = 1; k < 7563877; k += 104729)
      {
        double v = static_cast<double>(k) / itk::nlm::kExpA * norm;
        for (int step = 0; step < 8; ++step)
        {
          raw.push_back(v);
          raw.push_back(std::nextafter(v, 1e308));
          v = std::nextafter(v, -1e308);
        }
      }
      for (const double alpha : { 0.5, 1.0 })
      {
        for (size_t count : { raw.size(), raw.size() - 3 }) // a partial vector at the end too
        {
          std::vector<double> out(count, -1.0);
          kernels->Weights(raw.data(), static_cast<std::int64_t>(count), norm, alpha, out.data());
          size_t differing = 0;
          for (size_t i = 0; i < count; ++i)
          {
            const double expected = itk::nlm::FastModeWeight(raw[i], norm, alpha);
            if (!SameBits(out[i], expected) && differing++ == 0)
            {
              ADD_FAILURE() << kernels->Name << ": raw " << raw[i] << " norm " << norm << " alpha " << alpha << ": "
                            << out[i] << " instead of " << expected;
            }
          }
          EXPECT_EQ(differing, 0u) << kernels->Name;
        }
      }
    }
  }
}

TEST(CudaNonLocalMeansCPUKernels, TheBestTargetIsTheDefaultAndScalarIsAlwaysThere)
{
  const auto available = itk::nlm::cpu::AvailableKernels();
  ASSERT_FALSE(available.empty());
  EXPECT_EQ(std::string(available.back()->Name), "scalar");
  EXPECT_EQ(&itk::nlm::cpu::SelectKernels(""), available.front());
  EXPECT_EQ(&itk::nlm::cpu::SelectKernels("AUTO"), available.front());
  for (size_t i = 1; i < available.size(); ++i)
  {
    EXPECT_GE(available[i - 1]->Lanes, available[i]->Lanes) << "best (widest) first";
  }
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
  EXPECT_EQ(std::string(available[available.size() - 2]->Name), "sse2") << "SSE2 is part of x86-64";
#endif
}

TEST(CudaNonLocalMeansCPUKernels, AnUnknownTargetOrChunkIsRefusedNamingTheVariable)
{
  using ImageType = itk::Image<float, 2>;
  using FilterType = itk::CudaNonLocalMeansImageFilter<ImageType>;
  const auto input = itk::nlm_test::MakeImage<ImageType>({ { 12, 10 } }, 1, 39);
  for (int variant = 0; variant < 2; ++variant)
  {
    Overrides o = itk::nlm::ReadOverrides();
    if (variant == 0)
    {
      o.CPUInstructionSet = "avx1024";
    }
    else
    {
      o.CPUInvalid = "CUDANONLOCALMEANS_CPU_CHUNK is \"x\"; set it to a number of output cells of at least 1";
    }
    const ScopedOverrides scoped(o);
    auto                  filter = FilterType::New();
    filter->SetInput(input);
    filter->SetBackend(FilterType::BackendEnum::CPU);
    try
    {
      filter->Update();
      ADD_FAILURE() << "an invalid CPU override was accepted";
    }
    catch (const itk::ExceptionObject & e)
    {
      const std::string message = e.GetDescription();
      EXPECT_NE(message.find(variant == 0 ? "CUDANONLOCALMEANS_CPU_SIMD" : "CUDANONLOCALMEANS_CPU_CHUNK"),
                std::string::npos)
        << message;
      if (variant == 0)
      {
        EXPECT_NE(message.find("scalar"), std::string::npos) << "names the targets to use: " << message;
      }
    }
  }
}
