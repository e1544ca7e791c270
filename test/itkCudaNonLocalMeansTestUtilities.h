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
#ifndef itkCudaNonLocalMeansTestUtilities_h
#define itkCudaNonLocalMeansTestUtilities_h

// Helpers shared by the tests: reproducible random images and bitwise comparison.

#include "itkCommand.h"
#include "itkDefaultConvertPixelTraits.h"
#include "itkImageDuplicator.h"
#include "itkImageRegionConstIterator.h"
#include "itkImageRegionIterator.h"
#include "itkImageRegionIteratorWithIndex.h"
#include "itkImage.h"
#include "itkNumericTraits.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace itk
{
namespace nlm_test
{

/** An image of the given size with `components` components per pixel: a smooth pattern plus
 * uniform noise, scaled by `scale` and shifted by `offset` (use scale 255 for 8-bit data; values
 * are rounded for integer component types). */
template <typename TImage>
typename TImage::Pointer
MakeImage(const typename TImage::SizeType & size,
          unsigned int                      components,
          unsigned int                      seed,
          double                            scale = 1.0,
          double                            offset = 0.0)
{
  using PixelType = typename TImage::PixelType;
  using ComponentType = typename NumericTraits<PixelType>::ValueType;
  auto image = TImage::New();
  image->SetRegions(typename TImage::RegionType(size));
  image->SetNumberOfComponentsPerPixel(components);
  image->Allocate();
  std::mt19937                           engine(seed);
  std::uniform_real_distribution<double> noise(-0.15, 0.15);
  ImageRegionIterator<TImage>            it(image, image->GetLargestPossibleRegion());
  PixelType                              pixel;
  NumericTraits<PixelType>::SetLength(pixel, components);
  for (; !it.IsAtEnd(); ++it)
  {
    const auto idx = it.GetIndex();
    double     pattern = 0.0;
    for (unsigned int a = 0; a < TImage::ImageDimension; ++a)
    {
      pattern += std::sin(0.37 * (a + 1) * static_cast<double>(idx[a]));
    }
    for (unsigned int k = 0; k < components; ++k)
    {
      double v = 0.5 + 0.2 * std::cos(pattern + 0.9 * k) + noise(engine);
      v = offset + scale * v;
      if (std::is_integral<ComponentType>::value)
      {
        v = std::round(v);
      }
      DefaultConvertPixelTraits<PixelType>::SetNthComponent(static_cast<int>(k), pixel, static_cast<ComponentType>(v));
    }
    it.Set(pixel);
  }
  return image;
}

/** Counts pixels whose components differ in any bit (NaN compared by bits too) between two images
 * over a region; prints the first difference. Component values are compared as double after
 * conversion, which is exact for every supported component type. */
template <typename TImageA, typename TImageB>
SizeValueType
CountDifferences(const TImageA *                      a,
                 const TImageB *                      b,
                 const typename TImageA::RegionType & region,
                 const std::string &                  what)
{
  using PixelA = typename TImageA::PixelType;
  using PixelB = typename TImageB::PixelType;
  ImageRegionConstIterator<TImageA> ia(a, region);
  ImageRegionConstIterator<TImageB> ib(b, region);
  const unsigned int                components = a->GetNumberOfComponentsPerPixel();
  SizeValueType                     differing = 0;
  if (components != b->GetNumberOfComponentsPerPixel())
  {
    std::cerr << what << ": component counts differ" << std::endl;
    return region.GetNumberOfPixels();
  }
  for (; !ia.IsAtEnd(); ++ia, ++ib)
  {
    const PixelA pa = ia.Get();
    const PixelB pb = ib.Get();
    for (unsigned int k = 0; k < components; ++k)
    {
      const double va =
        static_cast<double>(DefaultConvertPixelTraits<PixelA>::GetNthComponent(static_cast<int>(k), pa));
      const double vb =
        static_cast<double>(DefaultConvertPixelTraits<PixelB>::GetNthComponent(static_cast<int>(k), pb));
      if (std::memcmp(&va, &vb, sizeof(double)) != 0)
      {
        if (differing == 0)
        {
          std::cerr << what << ": first difference at " << ia.GetIndex() << " component " << k << ": "
                    << std::setprecision(17) << va << " vs " << vb << std::endl;
        }
        ++differing;
        break;
      }
    }
  }
  return differing;
}

/** The bytes of a file ("" when it cannot be read). */
inline std::string
ReadFile(const std::string & path)
{
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/** Replaces a file's bytes. */
inline void
WriteFile(const std::string & path, const std::string & contents)
{
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

/** Progress events arrive in order and end at 1; AbortGenerateDataOn from a progress observer
 * stops the filter with an exception before the end; the aborted output is never handed on as
 * valid: the next Update, without Modified, computes again and gives the complete output; afterwards
 * the filter runs to the end again. `check(ok, what)` records each claim (e.g. with EXPECT_TRUE). */
template <typename TFilter, typename TCheck>
void
CheckProgressAndAbort(TFilter * filter, size_t minimumEvents, TCheck && check)
{
  struct Data
  {
    TFilter *          filter;
    std::vector<float> progress;
    bool               abortEarly;
  } data{ filter, {}, false };
  auto command = CStyleCommand::New();
  command->SetClientData(&data);
  command->SetCallback([](Object *, const EventObject &, void * clientData) {
    auto * d = static_cast<Data *>(clientData);
    d->progress.push_back(d->filter->GetProgress());
    if (d->abortEarly && d->filter->GetProgress() >= 0.25f)
    {
      d->filter->AbortGenerateDataOn();
    }
  });
  const unsigned long tag = filter->AddObserver(ProgressEvent(), command);

  auto update = [&]() -> bool {
    filter->Modified();
    try
    {
      filter->Update();
    }
    catch (const ExceptionObject & e)
    {
      std::cout << "Update stopped: " << e.GetDescription() << std::endl;
      return false;
    }
    return true;
  };
  const bool finished = update();
  bool       ordered = true;
  for (size_t i = 1; i < data.progress.size(); ++i)
  {
    ordered = ordered && data.progress[i] >= data.progress[i - 1];
  }
  check(finished, "Update completes");
  check(data.progress.size() >= minimumEvents,
        std::to_string(data.progress.size()) + " progress events (at least " + std::to_string(minimumEvents) + ")");
  check(ordered, "progress never goes back");
  check(!data.progress.empty() && data.progress.back() == 1.0f, "progress ends at 1");

  using OutputType = typename TFilter::OutputImageType;
  auto duplicator = ImageDuplicator<OutputType>::New();
  duplicator->SetInputImage(filter->GetOutput());
  duplicator->Update();
  const typename OutputType::Pointer complete = duplicator->GetOutput();

  data.progress.clear();
  data.abortEarly = true;
  check(!update(), "AbortGenerateDataOn stops the Update with an exception");
  check(!data.progress.empty() && data.progress.back() < 1.0f, "aborted before the end");

  // The partial output is not up to date: an Update without Modified computes it again.
  data.abortEarly = false;
  filter->AbortGenerateDataOff();
  data.progress.clear();
  bool recomputed = false;
  try
  {
    filter->Update();
    recomputed = !data.progress.empty() && data.progress.back() == 1.0f;
  }
  catch (const ExceptionObject &)
  {}
  check(recomputed &&
          CountDifferences(
            complete.GetPointer(), filter->GetOutput(), complete->GetLargestPossibleRegion(), "after an abort") == 0,
        "after an abort the next Update computes again and gives the complete output");
  check(update() && data.progress.back() == 1.0f, "runs to the end again after an abort");
  filter->RemoveObserver(tag);
}

/** A noise map on the grid of `like`: values in [0, top) from `seed`, every seventh exactly 0. */
template <unsigned int VDimension>
typename Image<double, VDimension>::Pointer
MakeNoiseMap(const ImageBase<VDimension> * like, unsigned int seed, double top)
{
  auto map = Image<double, VDimension>::New();
  map->CopyInformation(like);
  map->SetRegions(like->GetLargestPossibleRegion());
  map->Allocate();
  std::mt19937                                   engine(seed);
  std::uniform_real_distribution<double>         uniform(0.0, top);
  ImageRegionIterator<Image<double, VDimension>> it(map, map->GetLargestPossibleRegion());
  for (unsigned int i = 0; !it.IsAtEnd(); ++it, ++i)
  {
    it.Set(i % 7 == 3 ? 0.0 : uniform(engine));
  }
  return map;
}

/** A mask on the grid of `like`: `value` inside a ball of `radius` (a share of each extent) around
 * the centre and, with `scatter` > 0, at about one pixel in `scatter` elsewhere (from `seed`); 0 at
 * the others. */
template <unsigned int VDimension>
typename Image<unsigned char, VDimension>::Pointer
MakeMask(const ImageBase<VDimension> * like,
         double                        radius,
         unsigned int                  scatter,
         unsigned int                  seed,
         unsigned char                 value)
{
  auto mask = Image<unsigned char, VDimension>::New();
  mask->CopyInformation(like);
  mask->SetRegions(like->GetLargestPossibleRegion());
  mask->Allocate();
  const auto                                                     size = like->GetLargestPossibleRegion().GetSize();
  std::mt19937                                                   engine(seed);
  ImageRegionIteratorWithIndex<Image<unsigned char, VDimension>> it(mask, mask->GetLargestPossibleRegion());
  for (; !it.IsAtEnd(); ++it)
  {
    double r2 = 0.0;
    for (unsigned int a = 0; a < VDimension; ++a)
    {
      const double u = (static_cast<double>(it.GetIndex()[a]) + 0.5) / static_cast<double>(size[a]) - 0.5;
      r2 += u * u;
    }
    const bool scattered = scatter > 0 && engine() % scatter == 0;
    it.Set((r2 < radius * radius || scattered) ? value : 0);
  }
  return mask;
}

} // namespace nlm_test
} // namespace itk

#endif
