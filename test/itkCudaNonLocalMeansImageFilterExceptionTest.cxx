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

// Bad input gives an itk::ExceptionObject whose message names what to change.

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkCudaNonLocalMeansTestUtilities.h"
#include "itkTestingMacros.h"
#include "itkVectorImage.h"

#include <limits>

namespace
{
int failures = 0;

/** Runs `update`; passes if it throws an ExceptionObject whose description contains `expected`. */
template <typename TFunction>
void
ExpectException(const std::string & what, const std::string & expected, TFunction && update)
{
  try
  {
    update();
  }
  catch (const itk::ExceptionObject & e)
  {
    const std::string description = e.GetDescription();
    if (description.find(expected) == std::string::npos)
    {
      std::cerr << "FAIL " << what << ": the message does not mention '" << expected << "': " << description
                << std::endl;
      ++failures;
      return;
    }
    std::cout << "ok   " << what << ": " << description << std::endl;
    return;
  }
  std::cerr << "FAIL " << what << ": no exception" << std::endl;
  ++failures;
}

template <typename TImage>
typename itk::CudaNonLocalMeansImageFilter<TImage>::Pointer
MakeFilter(const TImage * input)
{
  auto filter = itk::CudaNonLocalMeansImageFilter<TImage>::New();
  filter->SetInput(input);
  filter->SetPatchSize(3);
  filter->SetPatchDistance(2);
  filter->SetBackend(itk::CudaNonLocalMeansImageFilterEnums::Backend::CPU);
  return filter;
}
} // namespace

int
itkCudaNonLocalMeansImageFilterExceptionTest(int, char *[])
{
  using ImageType = itk::Image<float, 2>;
  ImageType::SizeType size;
  size.Fill(12);
  const auto image = itk::nlm_test::MakeImage<ImageType>(size, 1, 3);

  // Parameters.
  for (int patchSize : { 0, -1, -7 })
  {
    ExpectException("PatchSize " + std::to_string(patchSize), "PatchSize", [&] {
      auto f = MakeFilter(image.GetPointer());
      f->SetPatchSize(patchSize);
      f->Update();
    });
  }
  ExpectException("PatchDistance -1", "PatchDistance", [&] {
    auto f = MakeFilter(image.GetPointer());
    f->SetPatchDistance(-1);
    f->Update();
  });
  for (double h : { 0.0, -0.1, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity() })
  {
    ExpectException("H " + std::to_string(h), "H is", [&] {
      auto f = MakeFilter(image.GetPointer());
      f->SetH(h);
      f->Update();
    });
  }
  ExpectException("H 1e-200 (normalization underflows)", "H = ", [&] {
    auto f = MakeFilter(image.GetPointer());
    f->SetH(1e-200);
    f->Update();
  });
  for (double sigma : { -0.5, std::numeric_limits<double>::quiet_NaN() })
  {
    ExpectException("Sigma " + std::to_string(sigma), "Sigma", [&] {
      auto f = MakeFilter(image.GetPointer());
      f->SetSigma(sigma);
      f->Update();
    });
  }

  ExpectException("a negative device", "not a CUDA device ordinal", [&] {
    auto f = MakeFilter(image.GetPointer());
    f->SetDevices({ 0, -1 });
    f->Update();
  });
  ExpectException("17 devices", "name at most 16", [&] {
    auto f = MakeFilter(image.GetPointer());
    f->SetDevices(std::vector<int>(17, 0));
    f->Update();
  });

  // Non-finite input values.
  for (float bad : { std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity() })
  {
    ExpectException("input value " + std::to_string(bad), "non-finite", [&] {
      auto copy = itk::nlm_test::MakeImage<ImageType>(size, 1, 3);
      copy->SetPixel({ { 4, 7 } }, bad);
      auto f = MakeFilter(copy.GetPointer());
      f->Update();
    });
  }

  // Non-finite values in images large enough for the check to run in parallel blocks (2^20
  // values each): the message names the first bad pixel; finite images pass.
  {
    using Image3D = itk::Image<float, 3>;
    const Image3D::SizeType  big{ { 112, 104, 100 } };
    const Image3D::IndexType where{ { 5, 50, 99 } };
    const long long          linear = 5 + 50 * 112 + 99LL * 112 * 104;
    auto                     volume = itk::nlm_test::MakeImage<Image3D>(big, 1, 5);
    auto                     finite = MakeFilter(volume.GetPointer());
    finite->SetPatchDistance(0);
    finite->SetNumberOfWorkUnits(4);
    finite->Update(); // throws (and fails the test) on a false alarm
    volume->SetPixel(where, std::numeric_limits<float>::infinity());
    ExpectException("infinity in block 2 of a float volume", "at buffer pixel " + std::to_string(linear) + ",", [&] {
      auto f = MakeFilter(volume.GetPointer());
      f->SetNumberOfWorkUnits(4);
      f->Update();
    });
    using VectorImage3D = itk::VectorImage<double, 3>;
    auto vectors = itk::nlm_test::MakeImage<VectorImage3D>(big, 2, 6);
    auto pixel = vectors->GetPixel(where);
    pixel[1] = std::numeric_limits<double>::quiet_NaN();
    vectors->SetPixel(where, pixel);
    ExpectException(
      "NaN in a 2-component double volume", "at buffer pixel " + std::to_string(linear) + ", component 1", [&] {
        auto f = MakeFilter(vectors.GetPointer());
        f->SetNumberOfWorkUnits(3);
        f->Update();
      });
  }

  // Unsupported dimensions.
  {
    using Image1D = itk::Image<float, 1>;
    Image1D::SizeType s1;
    s1.Fill(20);
    const auto line = itk::nlm_test::MakeImage<Image1D>(s1, 1, 3);
    ExpectException("1D image", "2, 3 and 4 dimensional", [&] { MakeFilter(line.GetPointer())->Update(); });
    using Image5D = itk::Image<float, 5>;
    Image5D::SizeType s5;
    s5.Fill(4);
    const auto hyper = itk::nlm_test::MakeImage<Image5D>(s5, 1, 3);
    ExpectException("5D image", "2, 3 and 4 dimensional", [&] { MakeFilter(hyper.GetPointer())->Update(); });
  }

  // Empty images: no pixel along an axis, or no component per pixel.
  {
    ImageType::SizeType flat;
    flat[0] = 5;
    flat[1] = 0;
    auto empty = ImageType::New();
    empty->SetRegions(flat);
    empty->Allocate();
    ExpectException("an image of size [5, 0]", "The input image is empty (size [5, 0])", [&] {
      MakeFilter(empty.GetPointer())->Update();
    });
    using VectorImageType = itk::VectorImage<float, 2>;
    auto noComponents = VectorImageType::New();
    noComponents->SetRegions(size);
    noComponents->SetNumberOfComponentsPerPixel(0);
    ExpectException("a VectorImage of 0 components", "0 components per pixel", [&] {
      MakeFilter(noComponents.GetPointer())->Update();
    });
  }

  // Slow mode exists only for 2D and single-component 3D images.
  {
    using Vector3D = itk::VectorImage<float, 3>;
    Vector3D::SizeType s3;
    s3.Fill(6);
    const auto vectors = itk::nlm_test::MakeImage<Vector3D>(s3, 2, 3);
    ExpectException("slow mode, 3D with 2 components", "FastMode", [&] {
      auto f = MakeFilter(vectors.GetPointer());
      f->FastModeOff();
      f->Update();
    });
    using Image4D = itk::Image<float, 4>;
    Image4D::SizeType s4;
    s4.Fill(5);
    const auto volume4 = itk::nlm_test::MakeImage<Image4D>(s4, 1, 3);
    ExpectException("slow mode, 4D", "FastMode", [&] {
      auto f = MakeFilter(volume4.GetPointer());
      f->FastModeOff();
      f->Update();
    });
  }

  // Requested region outside the image.
  ExpectException("requested region outside the image", "not inside the image", [&] {
    auto                  f = MakeFilter(image.GetPointer());
    ImageType::RegionType outside({ { 8, 8 } }, { { 6, 6 } });
    f->GetOutput()->SetRequestedRegion(outside);
    f->GetOutput()->Update();
  });

  // Output pixels with another number of components than the input.
  {
    using VectorImageType = itk::VectorImage<float, 2>;
    using TwoComponentImage = itk::Image<itk::Vector<float, 2>, 2>;
    const auto rgb = itk::nlm_test::MakeImage<VectorImageType>(size, 3, 3);
    ExpectException("3 input components, 2 output components", "components", [&] {
      auto f = itk::CudaNonLocalMeansImageFilter<VectorImageType, TwoComponentImage>::New();
      f->SetInput(rgb);
      f->SetPatchSize(3);
      f->SetPatchDistance(1);
      f->Update();
    });
  }

  // A well-formed call still works after all of these.
  auto good = MakeFilter(image.GetPointer());
  ITK_TRY_EXPECT_NO_EXCEPTION(good->Update());

  std::cout << (failures == 0 ? "Test passed." : "Test FAILED.") << std::endl;
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
