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

// The output is bitwise independent of the number of threads and of streaming (the requested
// region); progress events arrive in order; AbortGenerateData stops the filter.

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkCudaNonLocalMeansTestUtilities.h"
#include "itkStreamingImageFilter.h"
#include "itkGTest.h"
#include "itkVectorImage.h"

#include <chrono>
#include <vector>

namespace
{
void
Check(bool ok, const std::string & what)
{
  EXPECT_TRUE(ok) << what;
}

template <typename TImage>
typename TImage::Pointer
Compute(const TImage * input,
        int            patchSize,
        int            distance,
        double         h,
        double         sigma,
        bool           fast,
        unsigned int   workUnits,
        unsigned int   streams)
{
  using FilterType = itk::CudaNonLocalMeansImageFilter<TImage>;
  auto filter = FilterType::New();
  filter->SetInput(input);
  filter->SetPatchSize(patchSize);
  filter->SetPatchDistance(distance);
  filter->SetH(h);
  filter->SetSigma(sigma);
  filter->SetFastMode(fast);
  filter->SetBackend(FilterType::BackendEnum::CPU);
  filter->SetNumberOfWorkUnits(workUnits);
  auto streamer = itk::StreamingImageFilter<TImage, TImage>::New();
  streamer->SetInput(filter->GetOutput());
  streamer->SetNumberOfStreamDivisions(streams);
  streamer->Update();
  typename TImage::Pointer out = streamer->GetOutput();
  out->DisconnectPipeline();
  return out;
}

/** Whole-image single-thread output against several thread counts and stream divisions. */
template <typename TImage>
void
CheckInvariance(const std::string & name,
                const TImage *      input,
                int                 patchSize,
                int                 distance,
                double              h,
                double              sigma,
                bool                fast)
{
  const auto reference = Compute(input, patchSize, distance, h, sigma, fast, 1, 1);
  const auto region = input->GetLargestPossibleRegion();
  for (unsigned int workUnits : { 2u, 3u, 7u, 16u })
  {
    const auto out = Compute(input, patchSize, distance, h, sigma, fast, workUnits, 1);
    Check(itk::nlm_test::CountDifferences(reference.GetPointer(), out.GetPointer(), region, name) == 0,
          name + ": " + std::to_string(workUnits) + " work units == 1 work unit (bitwise)");
  }
  for (unsigned int streams : { 2u, 5u, 9u })
  {
    const auto out = Compute(input, patchSize, distance, h, sigma, fast, 3, streams);
    Check(itk::nlm_test::CountDifferences(reference.GetPointer(), out.GetPointer(), region, name) == 0,
          name + ": " + std::to_string(streams) + " stream divisions == whole image (bitwise)");
  }
}
} // namespace

TEST(CudaNonLocalMeansCPUBackend, OutputIsBitwiseIndependentOfThreadsAndStreaming)
{
  {
    using ImageType = itk::Image<double, 3>;
    const auto input = itk::nlm_test::MakeImage<ImageType>({ { 23, 19, 17 } }, 1, 11);
    CheckInvariance("3D double p5 d3", input.GetPointer(), 5, 3, 0.15, 0.05, true);
  }
  {
    using ImageType = itk::VectorImage<float, 2>;
    const auto input = itk::nlm_test::MakeImage<ImageType>({ { 41, 29 } }, 3, 12);
    CheckInvariance("2D float 3 components p7 d4", input.GetPointer(), 7, 4, 0.1, 0.0, true);
    CheckInvariance("2D float 3 components slow p3 d3", input.GetPointer(), 3, 3, 0.1, 0.02, false);
  }
  {
    using ImageType = itk::Image<float, 4>;
    const auto input = itk::nlm_test::MakeImage<ImageType>({ { 9, 8, 7, 6 } }, 1, 13);
    CheckInvariance("4D float p3 d2", input.GetPointer(), 3, 2, 0.1, 0.05, true);
  }
  {
    using ImageType = itk::Image<float, 3>;
    const auto input = itk::nlm_test::MakeImage<ImageType>({ { 12, 10, 11 } }, 1, 14);
    CheckInvariance("3D float slow p3 d2", input.GetPointer(), 3, 2, 0.2, 0.1, false);
  }
}

TEST(CudaNonLocalMeansCPUBackend, RequestedSubRegionEqualsTheSameRegionOfTheWholeOutput)
{
  using ImageType = itk::Image<float, 3>;
  const auto input = itk::nlm_test::MakeImage<ImageType>({ { 20, 18, 16 } }, 1, 15);
  const auto whole = Compute(input.GetPointer(), 3, 3, 0.1, 0.05, true, 2, 1);
  using FilterType = itk::CudaNonLocalMeansImageFilter<ImageType>;
  auto filter = FilterType::New();
  filter->SetInput(input);
  filter->SetPatchSize(3);
  filter->SetPatchDistance(3);
  filter->SetH(0.1);
  filter->SetSigma(0.05);
  filter->SetBackend(FilterType::BackendEnum::CPU);
  const ImageType::RegionType part({ { 3, 14, 0 } }, { { 9, 4, 5 } });
  filter->GetOutput()->SetRequestedRegion(part);
  filter->GetOutput()->Update();
  ImageType::RegionType expectedInput = part;
  expectedInput.PadByRadius(3 / 2 + 3 + 1);
  expectedInput.Crop(input->GetLargestPossibleRegion());
  Check(filter->GetInput()->GetRequestedRegion() == expectedInput,
        "input requested region = output region padded by PatchSize/2 + PatchDistance + 1, cropped");
  Check(filter->GetOutput()->GetBufferedRegion() == part, "only the requested region was computed");
  Check(itk::nlm_test::CountDifferences(whole.GetPointer(), filter->GetOutput(), part, "sub-region") == 0,
        "requested sub-region == whole image (bitwise)");
}

TEST(CudaNonLocalMeansCPUBackend, ARequestedSubRegionInClassicModeEqualsTheWholeOutput)
{
  // Classic mode runs the pixels whose candidates are not clipped along axis 0 in vector lanes: a
  // region that starts and ends inside the image along axis 0 moves where those runs begin.
  using ImageType = itk::Image<float, 2>;
  const auto input = itk::nlm_test::MakeImage<ImageType>({ { 61, 13 } }, 1, 18);
  const auto whole = Compute(input.GetPointer(), 5, 3, 0.1, 0.05, false, 2, 1);
  using FilterType = itk::CudaNonLocalMeansImageFilter<ImageType>;
  for (const ImageType::RegionType & part : { ImageType::RegionType({ { 2, 3 } }, { { 45, 6 } }),
                                              ImageType::RegionType({ { 19, 0 } }, { { 42, 13 } }),
                                              ImageType::RegionType({ { 7, 5 } }, { { 17, 2 } }) })
  {
    auto filter = FilterType::New();
    filter->SetInput(input);
    filter->SetPatchSize(5);
    filter->SetPatchDistance(3);
    filter->SetH(0.1);
    filter->SetSigma(0.05);
    filter->SetFastMode(false);
    filter->SetBackend(FilterType::BackendEnum::CPU);
    filter->GetOutput()->SetRequestedRegion(part);
    filter->GetOutput()->Update();
    Check(itk::nlm_test::CountDifferences(whole.GetPointer(), filter->GetOutput(), part, "classic sub-region") == 0,
          "classic mode: requested sub-region == whole image (bitwise)");
  }
}

TEST(CudaNonLocalMeansCPUBackend, ProgressIsOrderedAndAbortStopsTheUpdate)
{
  using ImageType = itk::Image<float, 3>;
  using FilterType = itk::CudaNonLocalMeansImageFilter<ImageType>;
  const auto input = itk::nlm_test::MakeImage<ImageType>({ { 24, 24, 24 } }, 1, 16);
  auto       filter = FilterType::New();
  filter->SetInput(input);
  filter->SetPatchSize(3);
  filter->SetPatchDistance(3);
  filter->SetBackend(FilterType::BackendEnum::CPU);
  itk::nlm_test::CheckProgressAndAbort(filter.GetPointer(), 10, Check);
}

TEST(CudaNonLocalMeansCPUBackend, APatchDistanceBeyondTheMachinesMemoryIsRefusedBeforeAllocating)
{
  // 8^4 voxels with PatchDistance 1000: the padded input alone is 2010^4 doubles (130 TB).
  using ImageType = itk::Image<float, 4>;
  using FilterType = itk::CudaNonLocalMeansImageFilter<ImageType>;
  const auto input = itk::nlm_test::MakeImage<ImageType>({ { 8, 8, 8, 8 } }, 1, 17);
  for (const auto backend : { FilterType::BackendEnum::CPU, FilterType::BackendEnum::Auto })
  {
    auto filter = FilterType::New();
    filter->SetInput(input);
    filter->SetPatchSize(3);
    filter->SetPatchDistance(1000);
    filter->SetBackend(backend);
    const auto start = std::chrono::steady_clock::now();
    try
    {
      filter->Update();
      ADD_FAILURE() << "an Update that needs 130 TB ran";
    }
    catch (const itk::MemoryAllocationError & e)
    {
      EXPECT_NE(std::string(e.GetDescription()).find("reduce PatchDistance"), std::string::npos) << e.GetDescription();
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  }
}
