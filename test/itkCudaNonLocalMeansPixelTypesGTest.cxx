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

// Pixel types: integer inputs are processed as float64 with their values kept (scikit-image's
// preserve_range=True); float inputs as float32 arrays; integer outputs are rounded and clamped;
// every multi-component pixel type (VectorImage, Vector, RGBPixel) gives the same numbers.

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkCudaNonLocalMeansTestUtilities.h"
#include "itkCastImageFilter.h"
#include "itkRGBPixel.h"
#include "itkGTest.h"
#include "itkVectorImage.h"

namespace
{
void
Check(bool ok, const std::string & what)
{
  EXPECT_TRUE(ok) << what;
}

template <typename TIn, typename TOut = TIn>
typename TOut::Pointer
Denoise(const TIn * input, bool fast = true)
{
  using FilterType = itk::CudaNonLocalMeansImageFilter<TIn, TOut>;
  auto filter = FilterType::New();
  filter->SetInput(input);
  filter->SetPatchSize(5);
  filter->SetPatchDistance(3);
  filter->SetH(fast ? 20.0 : 25.0);
  filter->SetSigma(5.0);
  filter->SetFastMode(fast);
  filter->SetBackend(FilterType::BackendEnum::CPU);
  filter->Update();
  typename TOut::Pointer out = filter->GetOutput();
  out->DisconnectPipeline();
  return out;
}

template <typename TIn, typename TOut>
typename TOut::Pointer
Cast(const TIn * input)
{
  auto cast = itk::CastImageFilter<TIn, TOut>::New();
  cast->SetInput(input);
  cast->Update();
  return cast->GetOutput();
}

/** Integer scalar input T gives the same float64 numbers as the same values stored as double. */
template <typename TComponent>
void
CheckIntegerScalar(const std::string & name, double offset)
{
  using IntImage = itk::Image<TComponent, 3>;
  using DoubleImage = itk::Image<double, 3>;
  const auto input = itk::nlm_test::MakeImage<IntImage>({ { 15, 13, 11 } }, 1, 21, 255.0, offset);
  const auto asDouble = Cast<IntImage, DoubleImage>(input.GetPointer());
  const auto expected = Denoise<DoubleImage>(asDouble.GetPointer());
  const auto got = Denoise<IntImage, DoubleImage>(input.GetPointer());
  Check(itk::nlm_test::CountDifferences(
          expected.GetPointer(), got.GetPointer(), input->GetLargestPossibleRegion(), name) == 0,
        name + " input -> double output == double input (bitwise)");

  // Integer output: the double result rounded to nearest (ties to even) and clamped.
  const auto                                 rounded = Denoise<IntImage, IntImage>(input.GetPointer());
  itk::ImageRegionConstIterator<DoubleImage> ie(expected, expected->GetLargestPossibleRegion());
  itk::ImageRegionConstIterator<IntImage>    ir(rounded, rounded->GetLargestPossibleRegion());
  bool                                       ok = true;
  for (; !ie.IsAtEnd(); ++ie, ++ir)
  {
    const double r = std::nearbyint(ie.Get());
    const double clamped = std::min<double>(std::max<double>(r, std::numeric_limits<TComponent>::lowest()),
                                            std::numeric_limits<TComponent>::max());
    ok = ok && static_cast<double>(ir.Get()) == clamped;
  }
  Check(ok, name + " input -> " + name + " output == rounded double result");
}
} // namespace

TEST(CudaNonLocalMeansPixelTypes, IntegerInputsComputeAsDoubleAndIntegerOutputsAreRoundedAndClamped)
{
  CheckIntegerScalar<unsigned char>("unsigned char", 0.0);
  CheckIntegerScalar<short>("short", -100.0);
  CheckIntegerScalar<unsigned short>("unsigned short", 1000.0);
  CheckIntegerScalar<int>("int", -5000.0);
}

// Float input (float32 working type) equals the float64 computation on the same values rounded to
// float: fast mode computes in float64 in both cases; slow mode in float32, as scikit-image does.
TEST(CudaNonLocalMeansPixelTypes, FloatInputsComputeAsScikitImageComputesFloat32Arrays)
{
  {
    using FloatImage = itk::Image<float, 2>;
    using DoubleImage = itk::Image<double, 2>;
    const auto input = itk::nlm_test::MakeImage<FloatImage>({ { 37, 31 } }, 1, 22, 100.0);
    const auto asDouble = Cast<FloatImage, DoubleImage>(input.GetPointer());
    const auto expected = Cast<DoubleImage, FloatImage>(Denoise<DoubleImage>(asDouble.GetPointer()).GetPointer());
    const auto got = Denoise<FloatImage>(input.GetPointer());
    Check(itk::nlm_test::CountDifferences(
            expected.GetPointer(), got.GetPointer(), input->GetLargestPossibleRegion(), "float") == 0,
          "float input == float(double computation) in fast mode (bitwise)");
    const auto gotDouble = Denoise<FloatImage, DoubleImage>(input.GetPointer());
    Check(itk::nlm_test::CountDifferences(
            got.GetPointer(), gotDouble.GetPointer(), input->GetLargestPossibleRegion(), "float->double") == 0,
          "float input -> double output holds the float32 result");
    // Slow mode computes in float32 for float input, so it differs from the float64 computation.
    const auto slowFloat = Denoise<FloatImage>(input.GetPointer(), false);
    const auto slowDouble =
      Cast<DoubleImage, FloatImage>(Denoise<DoubleImage>(asDouble.GetPointer(), false).GetPointer());
    const auto differing = itk::nlm_test::CountDifferences(
      slowFloat.GetPointer(), slowDouble.GetPointer(), input->GetLargestPossibleRegion(), "slow float");
    std::cout << "slow mode: float32 arithmetic differs from float64 arithmetic in " << differing << " pixels"
              << std::endl;
    Check(differing > 0, "slow mode with float input uses float32 arithmetic, as scikit-image does");
  }
}

TEST(CudaNonLocalMeansPixelTypes, EveryMultiComponentPixelTypeGivesTheSameNumbers)
{
  {
    constexpr unsigned int Dim = 2;
    using VectorImageType = itk::VectorImage<float, Dim>;
    using FixedVectorImage = itk::Image<itk::Vector<float, 3>, Dim>;
    using RGBFloatImage = itk::Image<itk::RGBPixel<float>, Dim>;
    using RGBUCharImage = itk::Image<itk::RGBPixel<unsigned char>, Dim>;
    using VectorDoubleImage = itk::VectorImage<double, Dim>;
    using FixedVectorDoubleImage = itk::Image<itk::Vector<double, 3>, Dim>;
    const auto vectors = itk::nlm_test::MakeImage<VectorImageType>({ { 29, 23 } }, 3, 23, 100.0);
    const auto fixed = Cast<VectorImageType, FixedVectorImage>(vectors.GetPointer());
    const auto rgb = Cast<VectorImageType, RGBFloatImage>(vectors.GetPointer());
    const auto region = vectors->GetLargestPossibleRegion();
    const auto expected = Denoise<VectorImageType>(vectors.GetPointer());
    Check(itk::nlm_test::CountDifferences(
            expected.GetPointer(), Denoise<FixedVectorImage>(fixed.GetPointer()).GetPointer(), region, "Vector") == 0,
          "Image<Vector<float,3>> == VectorImage<float> (bitwise)");
    Check(itk::nlm_test::CountDifferences(
            expected.GetPointer(), Denoise<RGBFloatImage>(rgb.GetPointer()).GetPointer(), region, "RGBPixel") == 0,
          "Image<RGBPixel<float>> == VectorImage<float> (bitwise)");
    const auto toVectorImage = Denoise<FixedVectorImage, VectorImageType>(fixed.GetPointer());
    Check(itk::nlm_test::CountDifferences(expected.GetPointer(), toVectorImage.GetPointer(), region, "mixed") == 0,
          "Image<Vector<float,3>> -> VectorImage<float> output (bitwise)");

    const auto rgb8 = itk::nlm_test::MakeImage<RGBUCharImage>({ { 29, 23 } }, 3, 24, 255.0);
    const auto rgb8AsDouble = Cast<RGBUCharImage, FixedVectorDoubleImage>(rgb8.GetPointer());
    const auto expected8 = Denoise<FixedVectorDoubleImage>(rgb8AsDouble.GetPointer());
    Check(itk::nlm_test::CountDifferences(expected8.GetPointer(),
                                          Denoise<RGBUCharImage, VectorDoubleImage>(rgb8.GetPointer()).GetPointer(),
                                          region,
                                          "RGB uchar") == 0,
          "Image<RGBPixel<unsigned char>> -> VectorImage<double> == double computation (bitwise)");

    // A one-component VectorImage equals the scalar image.
    using ScalarImage = itk::Image<float, Dim>;
    const auto scalar = itk::nlm_test::MakeImage<ScalarImage>({ { 29, 23 } }, 1, 25);
    auto       oneComponent = VectorImageType::New();
    oneComponent->SetRegions(region);
    oneComponent->SetNumberOfComponentsPerPixel(1);
    oneComponent->Allocate();
    std::copy(scalar->GetBufferPointer(),
              scalar->GetBufferPointer() + region.GetNumberOfPixels(),
              oneComponent->GetBufferPointer());
    Check(itk::nlm_test::CountDifferences(Denoise<ScalarImage>(scalar.GetPointer()).GetPointer(),
                                          Denoise<VectorImageType>(oneComponent.GetPointer()).GetPointer(),
                                          region,
                                          "one component") == 0,
          "VectorImage with one component == scalar image (bitwise)");
  }
}
