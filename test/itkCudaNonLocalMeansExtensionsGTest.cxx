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

// The opt-in extensions of doc/numerical-contract.md section 6 (Rician noise model, mask, noise map)
// through the filter on the CPU backend: their reductions to the plain filter, bit for bit; a
// property of the Rician model on an MR-like phantom; and the exceptions for bad inputs. Their
// arithmetic is checked against the contract's direct sums on every SIMD target in
// itkCudaNonLocalMeansCPUKernelsGTest.cxx, and against a long-double NumPy reference in the
// Python suite.

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkCudaNonLocalMeansTestUtilities.h"
#include "itkCastImageFilter.h"
#include "itkGTest.h"
#include "itkImageRegionIteratorWithIndex.h"
#include "itkStreamingImageFilter.h"
#include "itkVectorImage.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>

namespace
{
template <typename TImage>
using Filter = itk::CudaNonLocalMeansImageFilter<TImage>;

/** A filter on the CPU backend with the given parameters (patch 5, distance 3 unless changed). */
template <typename TImage>
typename Filter<TImage>::Pointer
MakeFilter(const TImage * image, double sigma, bool fastMode = true)
{
  auto filter = Filter<TImage>::New();
  filter->SetInput(image);
  filter->SetPatchSize(5);
  filter->SetPatchDistance(3);
  filter->SetH(0.15);
  filter->SetSigma(sigma);
  filter->SetFastMode(fastMode);
  filter->SetBackend(Filter<TImage>::BackendEnum::CPU);
  filter->SetNumberOfWorkUnits(3);
  return filter;
}

template <typename TImage>
typename TImage::Pointer
RunFilter(typename Filter<TImage>::Pointer filter)
{
  filter->Update();
  typename TImage::Pointer output = filter->GetOutput();
  output->DisconnectPipeline();
  return output;
}

/** An image of `value` everywhere on the grid of `like`. */
template <typename TPixel, unsigned int VDimension>
typename itk::Image<TPixel, VDimension>::Pointer
Constant(const itk::ImageBase<VDimension> * like, TPixel value)
{
  auto image = itk::Image<TPixel, VDimension>::New();
  image->CopyInformation(like);
  image->SetRegions(like->GetLargestPossibleRegion());
  image->Allocate();
  image->FillBuffer(value);
  return image;
}

template <typename TImage>
itk::SizeValueType
Differences(const TImage * a, const TImage * b, const std::string & what)
{
  return itk::nlm_test::CountDifferences(a, b, a->GetLargestPossibleRegion(), what);
}

/** The message of the exception an Update throws ("" when none is thrown). */
template <typename TFilter>
std::string
UpdateMessage(TFilter * filter)
{
  try
  {
    filter->Update();
  }
  catch (const itk::ExceptionObject & e)
  {
    return e.GetDescription();
  }
  return "";
}
} // namespace

TEST(CudaNonLocalMeansExtensions, AConstantNoiseMapGivesTheOutputOfThatSigmaBitForBit)
{
  using Image2 = itk::Image<float, 2>;
  using Image3 = itk::Image<double, 3>;
  using Vector2 = itk::VectorImage<float, 2>;
  const double sigmas[] = { 0.0, 0.03, 0.1 / 3.0 };
  for (const double sigma : sigmas)
  {
    const auto image2 = itk::nlm_test::MakeImage<Image2>({ { 37, 23 } }, 1, 71);
    auto       filter2 = MakeFilter<Image2>(image2, 0.0);
    filter2->SetNoiseSigmaImage(Constant<double, 2>(image2, sigma));
    EXPECT_EQ(
      Differences<Image2>(RunFilter<Image2>(MakeFilter<Image2>(image2, sigma)), RunFilter<Image2>(filter2), "2D"), 0u)
      << "sigma " << sigma;

    const auto image3 = itk::nlm_test::MakeImage<Image3>({ { 17, 13, 11 } }, 1, 72);
    auto       filter3 = MakeFilter<Image3>(image3, 0.0);
    filter3->SetNoiseSigmaImage(Constant<float, 3>(image3, static_cast<float>(sigma))); // a float map
    EXPECT_EQ(Differences<Image3>(RunFilter<Image3>(MakeFilter<Image3>(image3, static_cast<float>(sigma))),
                                  RunFilter<Image3>(filter3),
                                  "3D"),
              0u)
      << "sigma " << sigma;

    const auto vector2 = itk::nlm_test::MakeImage<Vector2>({ { 19, 15 } }, 3, 73);
    auto       filterV = MakeFilter<Vector2>(vector2, 0.0);
    filterV->SetNoiseSigmaImage(Constant<double, 2>(vector2, sigma));
    filterV->SetNoiseModel(Filter<Vector2>::NoiseModelEnum::Rician);
    auto plain = MakeFilter<Vector2>(vector2, sigma);
    plain->SetNoiseModel(Filter<Vector2>::NoiseModelEnum::Rician);
    if (sigma > 0.0) // Rician with a scalar sigma of 0 is refused
    {
      EXPECT_EQ(
        Differences<Vector2>(RunFilter<Vector2>(plain), RunFilter<Vector2>(filterV), "2D, 3 components, Rician"), 0u)
        << "sigma " << sigma;
    }
  }
}

TEST(CudaNonLocalMeansExtensions, AFullMaskGivesTheUnmaskedOutputAndAPartialOneKeepsTheInputOutside)
{
  using Image3 = itk::Image<float, 3>;
  using Image2 = itk::Image<double, 2>;
  const auto image = itk::nlm_test::MakeImage<Image3>({ { 40, 31, 19 } }, 1, 74);
  const auto plain = RunFilter<Image3>(MakeFilter<Image3>(image, 0.02));
  for (const bool fast : { true, false })
  {
    auto full = MakeFilter<Image3>(image, 0.02, fast);
    full->SetMaskImage(Constant<short, 3>(image, short{ -3 }));
    const auto reference = fast ? plain : RunFilter<Image3>(MakeFilter<Image3>(image, 0.02, false));
    EXPECT_EQ(Differences<Image3>(reference, RunFilter<Image3>(full), "full mask"), 0u) << "fast mode " << fast;

    auto       partial = MakeFilter<Image3>(image, 0.02, fast);
    const auto ball = itk::nlm_test::MakeMask<3>(image, 0.3, 0, 0, 1);
    partial->SetMaskImage(ball);
    auto streamer = itk::StreamingImageFilter<Image3, Image3>::New();
    streamer->SetInput(partial->GetOutput());
    streamer->SetNumberOfStreamDivisions(4);
    streamer->Update();
    itk::ImageRegionConstIteratorWithIndex<Image3> it(streamer->GetOutput(), image->GetLargestPossibleRegion());
    itk::SizeValueType                             inside = 0, wrongInside = 0, wrongOutside = 0;
    for (; !it.IsAtEnd(); ++it)
    {
      const auto index = it.GetIndex();
      if (ball->GetPixel(index) != 0)
      {
        ++inside;
        wrongInside += (it.Get() != reference->GetPixel(index)) ? 1 : 0;
      }
      else
      {
        wrongOutside += (it.Get() != image->GetPixel(index)) ? 1 : 0;
      }
    }
    EXPECT_GT(inside, 1000u);
    EXPECT_LT(inside, image->GetLargestPossibleRegion().GetNumberOfPixels() / 2);
    EXPECT_EQ(wrongInside, 0u) << "fast mode " << fast;
    EXPECT_EQ(wrongOutside, 0u) << "fast mode " << fast;
  }
  // A 2D mask of another integer type, and an empty mask: the output is the input.
  const auto image2 = itk::nlm_test::MakeImage<Image2>({ { 21, 17 } }, 1, 75);
  auto       none = MakeFilter<Image2>(image2, 0.0);
  none->SetMaskImage(Constant<unsigned long long, 2>(image2, 0ULL));
  EXPECT_EQ(Differences<Image2>(image2, RunFilter<Image2>(none), "empty mask"), 0u);
}

TEST(CudaNonLocalMeansExtensions, RicianReducesTheBiasOfAFlatBackgroundOfAnMRLikePhantom)
{
  // Magnitude of a complex signal with Gaussian noise (sigma per channel): a dark background
  // (signal 0, where the Rician mean is sigma * sqrt(pi / 2)) and a bright disc (signal 1).
  using Image2 = itk::Image<double, 2>;
  const double sigma = 0.1;
  auto         image = Image2::New();
  image->SetRegions(Image2::RegionType(Image2::SizeType{ { 96, 96 } }));
  image->Allocate();
  std::mt19937                                      engine(76);
  std::normal_distribution<double>                  noise(0.0, sigma);
  itk::ImageRegionIteratorWithIndex<Image2>         it(image, image->GetLargestPossibleRegion());
  std::vector<std::pair<Image2::IndexType, double>> background;
  for (; !it.IsAtEnd(); ++it)
  {
    const double x = it.GetIndex()[0] - 47.5, y = it.GetIndex()[1] - 47.5;
    const double signal = (x * x + y * y < 30.0 * 30.0) ? 1.0 : 0.0;
    const double re = signal + noise(engine), im = noise(engine);
    it.Set(std::sqrt(re * re + im * im));
    if (x * x + y * y > 40.0 * 40.0)
    {
      background.emplace_back(it.GetIndex(), 0.0);
    }
  }
  auto gaussian = MakeFilter<Image2>(image, sigma);
  gaussian->SetH(0.1);
  auto rician = MakeFilter<Image2>(image, sigma);
  rician->SetH(0.1);
  rician->SetNoiseModel(Filter<Image2>::NoiseModelEnum::Rician);
  const auto g = RunFilter<Image2>(gaussian);
  const auto r = RunFilter<Image2>(rician);
  double     meanG = 0.0, meanR = 0.0;
  for (const auto & entry : background)
  {
    meanG += g->GetPixel(entry.first);
    meanR += r->GetPixel(entry.first);
  }
  meanG /= static_cast<double>(background.size());
  meanR /= static_cast<double>(background.size());
  std::cout << "background mean (true 0): Gaussian " << meanG << ", Rician " << meanR << std::endl;
  EXPECT_GT(meanG, 0.08); // about sigma * sqrt(pi / 2) = 0.125
  EXPECT_LT(std::abs(meanR), 0.5 * std::abs(meanG));
}

TEST(CudaNonLocalMeansExtensions, BadInputsAreRefusedNamingTheFix)
{
  using Image2 = itk::Image<float, 2>;
  const auto image = itk::nlm_test::MakeImage<Image2>({ { 16, 12 } }, 1, 77);
  {
    auto filter = MakeFilter<Image2>(image, 0.0);
    filter->SetNoiseModel(Filter<Image2>::NoiseModelEnum::Rician);
    const std::string message = UpdateMessage(filter.GetPointer());
    EXPECT_NE(message.find("SetSigma"), std::string::npos) << message;
    EXPECT_NE(message.find("Rician"), std::string::npos) << message;
  }
  {
    auto other = Image2::New();
    other->SetRegions(Image2::RegionType(Image2::SizeType{ { 16, 13 } }));
    other->Allocate();
    auto filter = MakeFilter<Image2>(image, 0.0);
    filter->SetMaskImage(Constant<unsigned char, 2>(other, 1));
    const std::string message = UpdateMessage(filter.GetPointer());
    EXPECT_NE(message.find("MaskImage"), std::string::npos) << message;
    EXPECT_NE(message.find("input's grid"), std::string::npos) << message;
  }
  {
    auto shifted = Constant<double, 2>(image, 0.1);
    auto origin = shifted->GetOrigin();
    origin[0] += 5.0;
    shifted->SetOrigin(origin);
    auto filter = MakeFilter<Image2>(image, 0.0);
    filter->SetNoiseSigmaImage(shifted);
    EXPECT_NE(UpdateMessage(filter.GetPointer()), "") << "a noise map at another origin";
  }
  for (const double bad : { -0.1, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity() })
  {
    auto map = Constant<double, 2>(image, 0.05);
    map->SetPixel({ { 3, 4 } }, bad);
    auto filter = MakeFilter<Image2>(image, 0.0);
    filter->SetNoiseSigmaImage(map);
    const std::string message = UpdateMessage(filter.GetPointer());
    EXPECT_NE(message.find("[3, 4]"), std::string::npos) << message;
    EXPECT_NE(message.find("finite and 0 or more"), std::string::npos) << message;
  }
  {
    auto filter = MakeFilter<Image2>(image, 0.0, false);
    filter->SetNoiseSigmaImage(Constant<double, 2>(image, 0.05));
    const std::string message = UpdateMessage(filter.GetPointer());
    EXPECT_NE(message.find("FastMode"), std::string::npos) << message;
  }
  {
    auto filter = MakeFilter<Image2>(image, 0.0);
    filter->SetMaskImage(Constant<float, 2>(image, 1.0f));
    const std::string message = UpdateMessage(filter.GetPointer());
    EXPECT_NE(message.find("integer pixel type"), std::string::npos) << message;
  }
  {
    auto filter = MakeFilter<Image2>(image, 0.0);
    filter->SetNoiseSigmaImage(Constant<int, 2>(image, 1));
    const std::string message = UpdateMessage(filter.GetPointer());
    EXPECT_NE(message.find("float or double"), std::string::npos) << message;
  }
}

TEST(CudaNonLocalMeansExtensions, PerAxisRadiiReduceToTheIsotropicParametersAndFollowTheSpacing)
{
  using Image3 = itk::Image<float, 3>;
  using RadiusType = Filter<Image3>::RadiusType;
  const auto image = itk::nlm_test::MakeImage<Image3>({ { 23, 19, 14 } }, 1, 78);
  const auto isotropic = RunFilter<Image3>(MakeFilter<Image3>(image, 0.03)); // patch 5, distance 3
  {
    auto filter = MakeFilter<Image3>(image, 0.03);
    filter->SetPatchSize(4); // 5, ignored once the radius is set
    filter->SetPatchRadius(RadiusType{ { 2, 2, 2 } });
    filter->SetSearchRadius(RadiusType{ { 3, 3, 3 } });
    EXPECT_EQ(Differences<Image3>(isotropic, RunFilter<Image3>(filter), "equal radii"), 0u);
  }
  {
    // Physical radii: spacing (0.5, 0.5, 1.5) and radii 1.0 / 1.5 give patch radii (2, 2, 1) and
    // search radii (3, 3, 1), as the same radii given in voxels.
    auto                spaced = itk::nlm_test::MakeImage<Image3>({ { 23, 19, 14 } }, 1, 78);
    Image3::SpacingType spacing;
    spacing[0] = 0.5;
    spacing[1] = 0.5;
    spacing[2] = 1.5;
    spaced->SetSpacing(spacing);
    auto physical = MakeFilter<Image3>(spaced, 0.03);
    physical->SetPhysicalPatchRadius(1.0);
    physical->SetPhysicalSearchRadius(1.5);
    physical->UpdateOutputInformation();
    EXPECT_EQ(physical->GetPatchRadius(), (RadiusType{ { 2, 2, 1 } }));
    EXPECT_EQ(physical->GetSearchRadius(), (RadiusType{ { 3, 3, 1 } }));
    auto voxels = MakeFilter<Image3>(spaced, 0.03);
    voxels->SetPatchRadius(RadiusType{ { 2, 2, 1 } });
    voxels->SetSearchRadius(RadiusType{ { 3, 3, 1 } });
    const auto a = RunFilter<Image3>(physical), b = RunFilter<Image3>(voxels);
    EXPECT_EQ(Differences<Image3>(a, b, "physical radii"), 0u);
    EXPECT_GT(Differences<Image3>(a, isotropic, "anisotropic differs"), 0u);
    EXPECT_EQ(a->GetSpacing(), spaced->GetSpacing());
  }
  {
    // SetPatchSize and SetPatchDistance return to the isotropic parameters.
    auto filter = MakeFilter<Image3>(image, 0.03);
    filter->SetPatchRadius(RadiusType{ { 1, 2, 3 } });
    filter->SetSearchRadius(RadiusType{ { 1, 1, 2 } });
    filter->SetPatchSize(5);
    filter->SetPatchDistance(3);
    EXPECT_EQ(filter->GetPatchRadius(), (RadiusType{ { 2, 2, 2 } }));
    EXPECT_EQ(Differences<Image3>(isotropic, RunFilter<Image3>(filter), "back to isotropic"), 0u);
  }
  {
    auto filter = MakeFilter<Image3>(image, 0.03);
    filter->SetPatchRadius(RadiusType{ { 0, 1, 1 } });
    const std::string message = UpdateMessage(filter.GetPointer());
    EXPECT_NE(message.find("PatchRadius is 0 along some axes"), std::string::npos) << message;
  }
  {
    auto filter = MakeFilter<Image3>(image, 0.03, false);
    filter->SetPatchRadius(RadiusType{ { 1, 1, 2 } });
    const std::string message = UpdateMessage(filter.GetPointer());
    EXPECT_NE(message.find("fast mode only"), std::string::npos) << message;
  }
}

TEST(CudaNonLocalMeansExtensions, AStreamedNoiseMapFromAPipelineCoversWhatTheOutputNeeds)
{
  // The input is buffered whole, the map comes from a filter that produces only what is asked of
  // it: streamed output equals the whole-image output with the map in memory, bit for bit.
  using Image3 = itk::Image<float, 3>;
  using Map3 = itk::Image<double, 3>;
  const auto image = itk::nlm_test::MakeImage<Image3>({ { 21, 18, 26 } }, 1, 79);
  auto       map = Map3::New();
  map->SetRegions(image->GetLargestPossibleRegion());
  map->Allocate();
  for (itk::SizeValueType i = 0; i < image->GetLargestPossibleRegion().GetNumberOfPixels(); ++i)
  {
    map->GetBufferPointer()[i] = 0.01 * static_cast<double>(i % 11);
  }
  auto whole = MakeFilter<Image3>(image, 0.0);
  whole->SetNoiseSigmaImage(map);
  whole->SetNoiseModel(Filter<Image3>::NoiseModelEnum::Rician);
  const auto expected = RunFilter<Image3>(whole);

  auto cast = itk::CastImageFilter<Map3, Map3>::New(); // streams: produces only the requested region
  cast->SetInput(map);
  auto streamed = MakeFilter<Image3>(image, 0.0);
  streamed->SetNoiseSigmaImage(cast->GetOutput());
  streamed->SetNoiseModel(Filter<Image3>::NoiseModelEnum::Rician);
  auto streamer = itk::StreamingImageFilter<Image3, Image3>::New();
  streamer->SetInput(streamed->GetOutput());
  streamer->SetNumberOfStreamDivisions(4);
  streamer->Update();
  EXPECT_LT(cast->GetOutput()->GetBufferedRegion().GetNumberOfPixels(),
            image->GetLargestPossibleRegion().GetNumberOfPixels()); // the map was streamed too
  EXPECT_EQ(Differences<Image3>(expected, streamer->GetOutput(), "streamed map"), 0u);
}
