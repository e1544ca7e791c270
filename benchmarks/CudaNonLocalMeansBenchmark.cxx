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

// Times itk::CudaNonLocalMeansImageFilter on one input image (benchmarks/run_benchmarks.py drives
// it and times scikit-image on the same input):
//  - CUDA initialisation (driver, context) in this process;
//  - the first Update in this process (kernel compile, or read from the disk cache, and load);
//  - the median of N warm Updates: host-to-host wall time, and kernel time from CUDA events;
//  - optionally the median of --cpu-repeats Updates on the CPU backend (whole image or a crop).
// Prints one line "RESULT {json}".
//
// Usage: CudaNonLocalMeansBenchmark --input FILE --patch-size S --patch-distance D --h H --sigma SIG
//          [--repeats N] [--single] [--cpu-crop N] [--cpu-repeats N] [--no-cpu] [--no-gpu]
//          [--rician] [--mask FILE] [--noise-sigma FILE] [--write FILE] [--classic]
// --rician, --mask (an unsigned char image) and --noise-sigma (a double image) turn on the opt-in
// extensions; --write stores the output of the last GPU Update (else of the CPU's); --classic
// turns FastMode off.

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkExtractImageFilter.h"
#include "itkImageFileReader.h"
#include "itkImageFileWriter.h"
#include "itkImageIOFactory.h"
#include "itkVectorImage.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace
{
struct Options
{
  std::string input;
  int         patchSize{ 3 };
  int         patchDistance{ 3 };
  double      h{ 0.1 };
  double      sigma{ 0.0 };
  int         repeats{ 5 };
  int         cpuRepeats{ 1 };
  bool        single{ false };
  long        cpuCrop{ 0 }; // 0: whole image
  bool        cpu{ true };
  bool        gpu{ true };
  bool        rician{ false };
  bool        classic{ false };
  std::string mask;
  std::string noiseSigma;
  std::string write;
};

double
Now()
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double
Median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

template <typename TImage>
void
Benchmark(const Options & o)
{
  using FilterType = itk::CudaNonLocalMeansImageFilter<TImage>;
  using BackendEnum = typename FilterType::BackendEnum;
  std::ostringstream json;
  json.precision(6);

  const double tRead = Now();
  auto         image = itk::ReadImage<TImage>(o.input);
  const double readMs = Now() - tRead;
  const auto   region = image->GetLargestPossibleRegion();
  double       offsets = 1.0;
  for (unsigned int a = 0; a < TImage::ImageDimension; ++a)
  {
    offsets *= 2.0 * o.patchDistance + 1.0;
  }
  const double voxels = static_cast<double>(region.GetNumberOfPixels());
  json << "{\"input\": \"" << o.input << "\", \"size\": \"" << region.GetSize()
       << "\", \"components\": " << image->GetNumberOfComponentsPerPixel() << ", \"voxels\": " << voxels
       << ", \"offsets\": " << offsets << ", \"patch_size\": " << o.patchSize
       << ", \"patch_distance\": " << o.patchDistance << ", \"single_precision\": " << (o.single ? "true" : "false")
       << ", \"read_ms\": " << readMs;

  constexpr unsigned int Dimension = TImage::ImageDimension;
  using MaskType = itk::Image<unsigned char, Dimension>;
  using SigmaType = itk::Image<double, Dimension>;
  typename MaskType::Pointer  mask = o.mask.empty() ? nullptr : itk::ReadImage<MaskType>(o.mask);
  typename SigmaType::Pointer noiseSigma = o.noiseSigma.empty() ? nullptr : itk::ReadImage<SigmaType>(o.noiseSigma);
  double                      maskShare = 1.0;
  if (mask)
  {
    const auto * m = mask->GetBufferPointer();
    maskShare = static_cast<double>(std::count_if(
                  m, m + mask->GetBufferedRegion().GetNumberOfPixels(), [](unsigned char v) { return v != 0; })) /
                voxels;
  }
  json << ", \"rician\": " << (o.rician ? "true" : "false") << ", \"mask_share\": " << maskShare
       << ", \"noise_map\": " << (noiseSigma ? "true" : "false") << ", \"classic\": " << (o.classic ? "true" : "false");
  typename TImage::Pointer written;

  auto make = [&](BackendEnum backend) {
    auto f = FilterType::New();
    f->SetInput(image);
    f->SetPatchSize(o.patchSize);
    f->SetPatchDistance(o.patchDistance);
    f->SetH(o.h);
    f->SetSigma(o.sigma);
    f->SetSinglePrecision(o.single);
    f->SetFastMode(!o.classic);
    f->SetBackend(backend);
    f->SetMaskImage(mask);
    f->SetNoiseSigmaImage(noiseSigma);
    if (o.rician)
    {
      f->SetNoiseModel(FilterType::NoiseModelEnum::Rician);
    }
    return f;
  };

  if (o.gpu)
  {
    const double tInit = Now();
    std::string  why;
    const bool   usable = itk::NonLocalMeansBackendSelection::CUDAIsUsable(why);
    json << ", \"cuda_init_ms\": " << Now() - tInit;
    if (!usable)
    {
      std::cerr << "No usable CUDA backend: " << why << std::endl;
      json << ", \"cuda\": false";
    }
    else
    {
      auto         f = make(BackendEnum::CUDA);
      const double t0 = Now();
      f->Update();
      const double first = Now() - t0;
      const auto   s0 = f->GetBackendStatistics();
      json << ", \"device\": \"" << s0.Device << "\", \"configuration\": \"" << s0.Configuration
           << "\", \"first_update_ms\": " << first << ", \"first_compile_ms\": " << s0.CompileMilliseconds
           << ", \"first_from_disk_cache\": " << (s0.KernelFromDiskCache ? "true" : "false")
           << ", \"first_kernel_ms\": " << s0.KernelMilliseconds << ", \"first_check_ms\": " << s0.CheckMilliseconds
           << ", \"first_setup_ms\": " << s0.SetupMilliseconds
           << ", \"first_allocation_ms\": " << s0.AllocationMilliseconds
           << ", \"first_upload_ms\": " << s0.UploadMilliseconds
           << ", \"first_download_ms\": " << s0.DownloadMilliseconds << ", \"slabs\": " << s0.Slabs
           << ", \"device_bytes\": " << s0.DeviceBytes;
      std::vector<double> wall, kernel, up, down, pad, check, setup, allocation;
      for (int r = 0; r < std::max(1, o.repeats); ++r)
      {
        f->Modified();
        const double t = Now();
        f->Update();
        wall.push_back(Now() - t);
        const auto s = f->GetBackendStatistics();
        kernel.push_back(s.KernelMilliseconds);
        up.push_back(s.UploadMilliseconds);
        down.push_back(s.DownloadMilliseconds);
        pad.push_back(s.PadMilliseconds);
        check.push_back(s.CheckMilliseconds);
        setup.push_back(s.SetupMilliseconds);
        allocation.push_back(s.AllocationMilliseconds);
      }
      json << ", \"update_ms_median\": " << Median(wall) << ", \"kernel_ms_median\": " << Median(kernel)
           << ", \"kernel_ms_min\": " << *std::min_element(kernel.begin(), kernel.end())
           << ", \"kernel_ms_max\": " << *std::max_element(kernel.begin(), kernel.end())
           << ", \"upload_ms_median\": " << Median(up) << ", \"download_ms_median\": " << Median(down)
           << ", \"pad_ms_median\": " << Median(pad) << ", \"check_ms_median\": " << Median(check)
           << ", \"setup_ms_median\": " << Median(setup) << ", \"allocation_ms_median\": " << Median(allocation)
           << ", \"repeats\": " << wall.size() << ", \"kernel_vops\": " << voxels * offsets / (Median(kernel) / 1000.0)
           << ", \"update_vops\": " << voxels * offsets / (Median(wall) / 1000.0);
      written = f->GetOutput();
    }
  }
  if (o.cpu)
  {
    typename TImage::Pointer cpuInput = image;
    if (o.cpuCrop > 0)
    {
      auto crop = region;
      for (unsigned int a = 0; a < TImage::ImageDimension; ++a)
      {
        crop.SetSize(a, std::min<itk::SizeValueType>(region.GetSize(a), static_cast<itk::SizeValueType>(o.cpuCrop)));
      }
      auto extract = itk::ExtractImageFilter<TImage, TImage>::New();
      extract->SetInput(image);
      extract->SetExtractionRegion(crop);
      extract->SetDirectionCollapseToIdentity();
      extract->Update();
      cpuInput = extract->GetOutput();
    }
    auto f = make(BackendEnum::CPU);
    f->SetInput(cpuInput);
    std::vector<double> times;
    for (int r = 0; r < std::max(1, o.cpuRepeats); ++r)
    {
      f->Modified();
      const double t = Now();
      f->Update();
      times.push_back(Now() - t);
    }
    const double ms = Median(times);
    const double cpuVoxels = static_cast<double>(cpuInput->GetLargestPossibleRegion().GetNumberOfPixels());
    if (!written && o.cpuCrop == 0)
    {
      written = f->GetOutput();
    }
    json << ", \"cpu_size\": \"" << cpuInput->GetLargestPossibleRegion().GetSize() << "\", \"cpu_ms\": " << ms
         << ", \"cpu_work_units\": " << f->GetNumberOfWorkUnits() << ", \"cpu_simd\": \""
         << f->GetBackendStatistics().Configuration << "\""
         << ", \"cpu_vops\": " << cpuVoxels * offsets / (ms / 1000.0);
  }
  json << "}";
  if (!o.write.empty() && written)
  {
    itk::WriteImage(written, o.write);
  }
  std::cout << "RESULT " << json.str() << std::endl;
}

template <typename TComponent, unsigned int VDimension>
void
Dispatch(const Options & o, unsigned int components)
{
  if (components == 1)
  {
    Benchmark<itk::Image<TComponent, VDimension>>(o);
  }
  else
  {
    Benchmark<itk::VectorImage<TComponent, VDimension>>(o);
  }
}
} // namespace

int
main(int argc, char * argv[])
{
  Options o;
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    auto              next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--input")
      o.input = next();
    else if (a == "--patch-size")
      o.patchSize = std::stoi(next());
    else if (a == "--patch-distance")
      o.patchDistance = std::stoi(next());
    else if (a == "--h")
      o.h = std::stod(next());
    else if (a == "--sigma")
      o.sigma = std::stod(next());
    else if (a == "--repeats")
      o.repeats = std::stoi(next());
    else if (a == "--single")
      o.single = true;
    else if (a == "--cpu-crop")
      o.cpuCrop = std::stol(next());
    else if (a == "--cpu-repeats")
      o.cpuRepeats = std::stoi(next());
    else if (a == "--no-cpu")
      o.cpu = false;
    else if (a == "--no-gpu")
      o.gpu = false;
    else if (a == "--rician")
      o.rician = true;
    else if (a == "--classic")
      o.classic = true;
    else if (a == "--mask")
      o.mask = next();
    else if (a == "--noise-sigma")
      o.noiseSigma = next();
    else if (a == "--write")
      o.write = next();
    else
    {
      std::cerr << "Unknown argument " << a << std::endl;
      return EXIT_FAILURE;
    }
  }
  if (o.cpuCrop > 0 && !(o.mask.empty() && o.noiseSigma.empty()))
  {
    std::cerr << "--cpu-crop takes no --mask or --noise-sigma (they are on the whole image's grid)" << std::endl;
    return EXIT_FAILURE;
  }
  try
  {
    auto io = itk::ImageIOFactory::CreateImageIO(o.input.c_str(), itk::ImageIOFactory::IOFileModeEnum::ReadMode);
    if (io.IsNull())
    {
      std::cerr << "Cannot read " << o.input << std::endl;
      return EXIT_FAILURE;
    }
    io->SetFileName(o.input);
    io->ReadImageInformation();
    const bool         isFloat = io->GetComponentType() == itk::IOComponentEnum::FLOAT;
    const unsigned int dim = io->GetNumberOfDimensions();
    const unsigned int k = io->GetNumberOfComponents();
    if (dim == 2)
      isFloat ? Dispatch<float, 2>(o, k) : Dispatch<double, 2>(o, k);
    else if (dim == 3)
      isFloat ? Dispatch<float, 3>(o, k) : Dispatch<double, 3>(o, k);
    else if (dim == 4)
      isFloat ? Dispatch<float, 4>(o, k) : Dispatch<double, 4>(o, k);
    else
    {
      std::cerr << "Unsupported dimension " << dim << std::endl;
      return EXIT_FAILURE;
    }
  }
  catch (const std::exception & e)
  {
    std::cerr << "Error: " << e.what() << std::endl;
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
