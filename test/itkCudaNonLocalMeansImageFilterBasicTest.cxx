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

// Object methods, parameters, metadata, backend selection and a numerical sanity check.

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkCudaNonLocalMeansTestUtilities.h"
#include "itkNonLocalMeansBackendSelection.h"
#include "itkTestingMacros.h"

#include <sstream>

int
itkCudaNonLocalMeansImageFilterBasicTest(int, char *[])
{
  constexpr unsigned int Dimension = 3;
  using ImageType = itk::Image<double, Dimension>;
  using FilterType = itk::CudaNonLocalMeansImageFilter<ImageType>;
  using BackendEnum = FilterType::BackendEnum;

  auto filter = FilterType::New();
  ITK_EXERCISE_BASIC_OBJECT_METHODS(filter, CudaNonLocalMeansImageFilter, ImageToImageFilter);

  // scikit-image's defaults.
  ITK_TEST_EXPECT_EQUAL(filter->GetPatchSize(), 7);
  ITK_TEST_EXPECT_EQUAL(filter->GetPatchDistance(), 11);
  ITK_TEST_EXPECT_EQUAL(filter->GetH(), 0.1);
  ITK_TEST_EXPECT_EQUAL(filter->GetSigma(), 0.0);
  ITK_TEST_EXPECT_TRUE(filter->GetFastMode());
  ITK_TEST_EXPECT_TRUE(filter->GetBackend() == BackendEnum::Auto);
  ITK_TEST_EXPECT_TRUE(filter->GetBackendUsed() == BackendEnum::Auto); // nothing computed yet

  filter->SetPatchSize(5);
  ITK_TEST_SET_GET_VALUE(5, filter->GetPatchSize());
  filter->SetPatchSize(4);
  ITK_TEST_SET_GET_VALUE(4, filter->GetPatchSize());
  ITK_TEST_EXPECT_EQUAL(filter->GetEffectivePatchSize(), 5);
  filter->SetPatchSize(3);
  ITK_TEST_EXPECT_EQUAL(filter->GetEffectivePatchSize(), 3);
  filter->SetPatchDistance(2);
  ITK_TEST_SET_GET_VALUE(2, filter->GetPatchDistance());
  filter->SetH(0.2);
  ITK_TEST_SET_GET_VALUE(0.2, filter->GetH());
  filter->SetSigma(0.05);
  ITK_TEST_SET_GET_VALUE(0.05, filter->GetSigma());
  ITK_TEST_SET_GET_BOOLEAN(filter, FastMode, false);
  ITK_TEST_SET_GET_BOOLEAN(filter, FastMode, true);
  filter->SetBackend(BackendEnum::CPU);
  ITK_TEST_EXPECT_TRUE(filter->GetBackend() == BackendEnum::CPU);
  ITK_TEST_EXPECT_TRUE(filter->GetDevices().empty()); // the default device
  filter->SetDevices({ 0, 1 });
  filter->AddDevice(0);
  ITK_TEST_EXPECT_TRUE(filter->GetDevices() == std::vector<int>({ 0, 1, 0 }));
  ITK_TEST_EXPECT_EQUAL(filter->GetNumberOfDevices(), 3u);
  filter->ClearDevices();
  ITK_TEST_EXPECT_TRUE(filter->GetDevices().empty());

  // Enum printing.
  std::ostringstream names;
  names << BackendEnum::Auto << ' ' << BackendEnum::CPU << ' ' << BackendEnum::CUDA;
  ITK_TEST_EXPECT_EQUAL(names.str(),
                        std::string("CudaNonLocalMeansImageFilterEnums::Backend::Auto "
                                    "CudaNonLocalMeansImageFilterEnums::Backend::CPU "
                                    "CudaNonLocalMeansImageFilterEnums::Backend::CUDA"));

  // Metadata is kept, also for an image whose region does not start at index 0.
  ImageType::SizeType size;
  size[0] = 13;
  size[1] = 11;
  size[2] = 9;
  ImageType::IndexType start;
  start[0] = 5;
  start[1] = -2;
  start[2] = 1;
  const ImageType::RegionType region(start, size);
  auto                        input = itk::nlm_test::MakeImage<ImageType>(size, 1, 7);
  input->SetRegions(region); // same buffer, re-indexed
  ImageType::SpacingType   spacing;
  ImageType::PointType     origin;
  ImageType::DirectionType direction;
  direction.Fill(0.0);
  for (unsigned int a = 0; a < Dimension; ++a)
  {
    spacing[a] = 0.5 + a;
    origin[a] = -3.0 + 2.0 * a;
  }
  direction[0][1] = 1.0;
  direction[1][0] = -1.0;
  direction[2][2] = 1.0;
  input->SetSpacing(spacing);
  input->SetOrigin(origin);
  input->SetDirection(direction);

  filter->SetInput(input);
  ITK_TRY_EXPECT_NO_EXCEPTION(filter->Update());
  ImageType::Pointer output = filter->GetOutput();
  ITK_TEST_EXPECT_EQUAL(output->GetSpacing(), spacing);
  ITK_TEST_EXPECT_EQUAL(output->GetOrigin(), origin);
  ITK_TEST_EXPECT_EQUAL(output->GetDirection(), direction);
  ITK_TEST_EXPECT_EQUAL(output->GetLargestPossibleRegion(), input->GetLargestPossibleRegion());
  ITK_TEST_EXPECT_TRUE(filter->GetBackendUsed() == BackendEnum::CPU);

  // Denoising reduces the deviation from the smooth pattern's local mean: the output must have a
  // smaller total variation than the input, and every value stays within the input's range.
  double inTV = 0.0, outTV = 0.0, inMin = 1e300, inMax = -1e300;
  for (itk::IndexValueType i = start[0] + 1; i < start[0] + static_cast<itk::IndexValueType>(size[0]); ++i)
  {
    ImageType::IndexType p{ { i, start[1] + 4, start[2] + 4 } }, q{ { i - 1, start[1] + 4, start[2] + 4 } };
    inTV += std::abs(input->GetPixel(p) - input->GetPixel(q));
    outTV += std::abs(output->GetPixel(p) - output->GetPixel(q));
  }
  itk::ImageRegionConstIterator<ImageType> ii(input, input->GetLargestPossibleRegion());
  for (; !ii.IsAtEnd(); ++ii)
  {
    inMin = std::min(inMin, ii.Get());
    inMax = std::max(inMax, ii.Get());
  }
  std::cout << "Total variation along a row: input " << inTV << ", output " << outTV << std::endl;
  ITK_TEST_EXPECT_TRUE(outTV < inTV);
  itk::ImageRegionConstIterator<ImageType> oi(output, output->GetLargestPossibleRegion());
  for (; !oi.IsAtEnd(); ++oi)
  {
    if (!(oi.Get() >= inMin && oi.Get() <= inMax))
    {
      std::cerr << "Output value " << oi.Get() << " at " << oi.GetIndex() << " is outside the input range" << std::endl;
      return EXIT_FAILURE;
    }
  }

  // A constant image stays constant (bitwise: every weight multiplies the same value).
  auto constant = ImageType::New();
  constant->SetRegions(region);
  constant->Allocate();
  constant->FillBuffer(0.375);
  filter->SetInput(constant);
  ITK_TRY_EXPECT_NO_EXCEPTION(filter->Update());
  itk::ImageRegionConstIterator<ImageType> ci(filter->GetOutput(), filter->GetOutput()->GetLargestPossibleRegion());
  for (; !ci.IsAtEnd(); ++ci)
  {
    ITK_TEST_EXPECT_EQUAL(ci.Get(), 0.375);
  }

  // Auto picks CUDA when it is usable (then with the CPU's numbers, bitwise) and otherwise falls
  // back to the CPU, saying why in the statistics and in Print.
  filter->SetInput(input);
  filter->SetBackend(BackendEnum::CPU);
  filter->Update();
  ImageType::Pointer cpuOutput = filter->GetOutput();
  cpuOutput->DisconnectPipeline();
  std::string whyNot;
  const bool  cudaUsable = itk::NonLocalMeansBackendSelection::CUDAIsUsable(whyNot);
  std::cout << "CUDA backend usable: " << (cudaUsable ? "yes" : "no (" + whyNot + ")") << std::endl;
  filter->SetBackend(BackendEnum::Auto);
  ITK_TRY_EXPECT_NO_EXCEPTION(filter->Update());
  const std::string & reason = filter->GetBackendStatistics().CPUFallbackReason;
  std::ostringstream  printed;
  filter->Print(printed);
  if (cudaUsable)
  {
    ITK_TEST_EXPECT_TRUE(filter->GetBackendUsed() == BackendEnum::CUDA);
    ITK_TEST_EXPECT_EQUAL(
      itk::nlm_test::CountDifferences(cpuOutput.GetPointer(), filter->GetOutput(), region, "Auto (CUDA) vs CPU"), 0u);
    ITK_TEST_EXPECT_TRUE(reason.empty());
    ITK_TEST_EXPECT_TRUE(printed.str().find("CPUFallbackReason: ") == std::string::npos);
  }
  else
  {
    std::cout << "Auto fell back to the CPU (the CUDA-versus-CPU comparison is the GPU test's)." << std::endl;
    ITK_TEST_EXPECT_TRUE(filter->GetBackendUsed() == BackendEnum::CPU);
    ITK_TEST_EXPECT_EQUAL(reason, whyNot);
    ITK_TEST_EXPECT_TRUE(printed.str().find("CPUFallbackReason: " + whyNot) != std::string::npos);
    // The warning was due for this cause, once: it is claimed already.
    ITK_TEST_EXPECT_TRUE(!itk::NonLocalMeansBackendSelection::ClaimCPUFallbackWarning(whyNot));
  }
  // Auto's warning comes once per cause and process.
  ITK_TEST_EXPECT_TRUE(itk::NonLocalMeansBackendSelection::ClaimCPUFallbackWarning("a cause of the test"));
  ITK_TEST_EXPECT_TRUE(!itk::NonLocalMeansBackendSelection::ClaimCPUFallbackWarning("a cause of the test"));
  ITK_TEST_EXPECT_TRUE(itk::NonLocalMeansBackendSelection::ClaimCPUFallbackWarning("another cause of the test"));

  // Backend CUDA computes there or throws, naming the cause and the fix.
  filter->SetBackend(BackendEnum::CUDA);
  if (cudaUsable)
  {
    ITK_TRY_EXPECT_NO_EXCEPTION(filter->Update());
    ITK_TEST_EXPECT_TRUE(filter->GetBackendUsed() == BackendEnum::CUDA);
  }
  else
  {
    try
    {
      filter->Update();
      std::cerr << "Backend CUDA computed without a usable CUDA backend" << std::endl;
      return EXIT_FAILURE;
    }
    catch (const itk::ExceptionObject & e)
    {
      const std::string message = e.GetDescription();
      ITK_TEST_EXPECT_TRUE(message.find(whyNot) != std::string::npos &&
                           message.find("Set Backend to Auto or CPU") != std::string::npos);
    }
  }

  std::cout << "Test finished." << std::endl;
  return EXIT_SUCCESS;
}
