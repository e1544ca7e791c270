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


// The command-line program's --preview: the PNG holds the middle slice of the input (left) and of
// the output (right), enlarged by whole pixels, with one grey window that preserves the order of
// the values, and the denoised half is smoother than the noisy one. A name without .png is refused
// before any work.

#include "CudaNonLocalMeansDenoiseProgram.h"
#include "itkImage.h"
#include "itkImageFileReader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

namespace
{
using VolumeType = itk::Image<float, 3>;
using PictureType = itk::Image<unsigned char, 2>;

/** The middle z slice of a volume, row-major. */
std::vector<float>
MiddleSlice(const VolumeType * volume)
{
  const auto         size = volume->GetLargestPossibleRegion().GetSize();
  const auto         index = volume->GetLargestPossibleRegion().GetIndex();
  std::vector<float> values;
  for (itk::IndexValueType y = 0; y < static_cast<itk::IndexValueType>(size[1]); ++y)
  {
    for (itk::IndexValueType x = 0; x < static_cast<itk::IndexValueType>(size[0]); ++x)
    {
      values.push_back(
        volume->GetPixel({ { index[0] + x, index[1] + y, index[2] + static_cast<itk::IndexValueType>(size[2] / 2) } }));
    }
  }
  return values;
}

/** One panel of the picture at source resolution, after checking that every enlarged block is uniform. */
std::vector<int>
Panel(const PictureType * picture,
      std::size_t         firstColumn,
      std::size_t         width,
      std::size_t         height,
      std::size_t         scale,
      bool &              uniform)
{
  std::vector<int> grey;
  for (std::size_t y = 0; y < height; ++y)
  {
    for (std::size_t x = 0; x < width; ++x)
    {
      auto at = [&](std::size_t dx, std::size_t dy) {
        return static_cast<int>(picture->GetPixel({ { static_cast<itk::IndexValueType>(firstColumn + x * scale + dx),
                                                      static_cast<itk::IndexValueType>(y * scale + dy) } }));
      };
      const int value = at(0, 0);
      for (std::size_t dy = 0; dy < scale; ++dy)
      {
        for (std::size_t dx = 0; dx < scale; ++dx)
        {
          uniform = uniform && at(dx, dy) == value;
        }
      }
      grey.push_back(value);
    }
  }
  return grey;
}

/** Whether the grey values never go down where the source values go up. */
bool
OrderPreserved(const std::vector<float> & source, const std::vector<int> & grey)
{
  std::vector<std::size_t> order(source.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return source[a] < source[b]; });
  for (std::size_t i = 1; i < order.size(); ++i)
  {
    if (source[order[i]] > source[order[i - 1]] && grey[order[i]] < grey[order[i - 1]])
    {
      return false;
    }
  }
  return true;
}

/** The sum of absolute differences between horizontal neighbours. */
long
Variation(const std::vector<int> & grey, std::size_t width)
{
  long sum = 0;
  for (std::size_t i = 1; i < grey.size(); ++i)
  {
    sum += (i % width != 0) ? std::labs(grey[i] - grey[i - 1]) : 0;
  }
  return sum;
}
} // namespace

int
CudaNonLocalMeansPreviewTest(int argc, char * argv[])
{
  if (argc < 4)
  {
    std::cerr << "Usage: " << argv[0] << " input.mha output.mha preview.png\n";
    return EXIT_FAILURE;
  }
  const std::string input = argv[1], output = argv[2], preview = argv[3];
  bool              ok = true;
  auto              check = [&ok](bool condition, const char * what) {
    std::cout << (condition ? "ok:   " : "FAIL: ") << what << "\n";
    ok = ok && condition;
  };

  const std::string refused = preview + ".jpg";
  std::remove(output.c_str());
  check(RunDenoiseProgram({ "--backend", "cpu", "--input", input, "--output", output, "--preview", refused }) !=
          EXIT_SUCCESS,
        "a preview name without .png is refused");
  check(!std::ifstream(output).good() && !std::ifstream(refused).good(), "and nothing is written");

  std::remove(preview.c_str());
  check(RunDenoiseProgram({ "--backend",
                            "cpu",
                            "--input",
                            input,
                            "--output",
                            output,
                            "--preview",
                            preview,
                            "--patch-size",
                            "3",
                            "--patch-distance",
                            "3",
                            "--h",
                            "0.15" }) == EXIT_SUCCESS,
        "the program runs with --preview");
  const auto        noisy = itk::ReadImage<VolumeType>(input);
  const auto        denoised = itk::ReadImage<VolumeType>(output);
  const auto        picture = itk::ReadImage<PictureType>(preview);
  const auto        size = noisy->GetLargestPossibleRegion().GetSize();
  const std::size_t width = size[0], height = size[1];
  const auto        pictureSize = picture->GetLargestPossibleRegion().GetSize();
  const std::size_t scale = pictureSize[1] / height;
  std::cout << "input " << size << ", picture " << pictureSize << ", enlarged " << scale << "x\n";
  check(scale >= 1 && pictureSize[1] == height * scale && pictureSize[0] == (2 * width + 2) * scale,
        "two panels of the slice side by side with a gap of 2, enlarged by a whole factor");
  check(height * scale >= 256 && height * (scale - 1) < 256, "enlarged by the least factor that gives 256 rows");
  if (!ok)
  {
    return EXIT_FAILURE;
  }
  bool       uniform = true;
  const auto left = Panel(picture, 0, width, height, scale, uniform);
  const auto right = Panel(picture, (width + 2) * scale, width, height, scale, uniform);
  check(uniform, "every source pixel is a uniform block");
  bool gapBlack = true;
  for (std::size_t y = 0; y < pictureSize[1]; ++y)
  {
    for (std::size_t x = width * scale; x < (width + 2) * scale; ++x)
    {
      gapBlack = gapBlack && picture->GetPixel(
                               { { static_cast<itk::IndexValueType>(x), static_cast<itk::IndexValueType>(y) } }) == 0;
    }
  }
  check(gapBlack, "a black gap between the panels");
  const auto noisySlice = MiddleSlice(noisy);
  const auto denoisedSlice = MiddleSlice(denoised);
  check(OrderPreserved(noisySlice, left), "the left panel is the input's middle slice (order preserved)");
  check(OrderPreserved(denoisedSlice, right), "the right panel is the output's middle slice (order preserved)");
  auto range = [](const std::vector<int> & g) {
    return *std::max_element(g.begin(), g.end()) - *std::min_element(g.begin(), g.end());
  };
  auto mean = [](const std::vector<int> & g) {
    return std::accumulate(g.begin(), g.end(), 0.0) / static_cast<double>(g.size());
  };
  std::cout << "grey range: input " << range(left) << ", output " << range(right) << "; mean: input " << mean(left)
            << ", output " << mean(right) << "\n";
  check(range(left) > 128, "the input's window spans most of the grey range");
  check(range(right) > 64 && std::fabs(mean(right) - mean(left)) < 16,
        "the output half is drawn in the same window (similar mean, not blank)");
  const long noisyVariation = Variation(left, width), denoisedVariation = Variation(right, width);
  std::cout << "horizontal variation: input " << noisyVariation << ", output " << denoisedVariation << "\n";
  check(denoisedVariation < noisyVariation, "the output half is smoother (one window for both)");
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
