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

// CudaNonLocalMeansDenoise: reads an image (any format ITK reads), denoises it with
// itk::CudaNonLocalMeansImageFilter and writes the result. Without --input it denoises a built-in
// noisy 3D phantom. Run with --help for the options.
//
// Pixel types: float components are processed as float (like scikit-image on float32 arrays), every
// other component type as double (scikit-image with preserve_range=True). Images with several
// components per pixel (RGB, vectors) are processed with the components as channels. The result is
// written with the input's component type (rounded and clamped for integers) unless --output-type
// says otherwise; files are checked before computing and written through a temporary file
// (CudaNonLocalMeansImageFiles.h).

#include "CudaNonLocalMeansImageFiles.h"
#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkDefaultConvertPixelTraits.h"
#include "itkImage.h"
#include "itkImageFileReader.h"
#include "itkImageFileWriter.h"
#include "itkImageIOFactory.h"
#include "itkImageRegionIterator.h"
#include "itkVectorImage.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace
{
struct Options
{
  std::string      input;
  std::string      output{ "CudaNonLocalMeansDenoised.mha" };
  std::string      outputType{ "input" };
  std::string      preview;
  int              patchSize{ -1 };
  int              patchDistance{ -1 };
  double           h{ -1.0 };
  double           sigma{ -1.0 };
  bool             fastMode{ true };
  std::string      backend{ "auto" };
  int              threads{ 0 };
  int              phantomSize{ 64 };
  int              repeat{ 1 };
  double           maxGPUMemory{ 0.0 }; // MiB, 0 = automatic
  bool             single{ false };
  int              streamDivisions{ 1 };
  bool             rician{ false };
  std::string      mask;
  std::string      noiseSigma;
  std::vector<int> patchRadius;  // per axis, x first (empty: --patch-size)
  std::vector<int> searchRadius; // per axis (empty: --patch-distance)
  double           physicalPatchRadius{ 0.0 };
  double           physicalSearchRadius{ 0.0 };
};

void
PrintUsage(const char * name)
{
  std::cout << "Usage: " << name << " [options]\n"
            << "  --input FILE           image to denoise (any ITK-readable format); without it a noisy\n"
            << "                         3D phantom is generated\n"
            << "  --output FILE          where to write the result (default CudaNonLocalMeansDenoised.mha)\n"
            << "  --output-type T        component type of the result: input (default: the input's, rounded\n"
            << "                         and clamped for integers), uint8, int8, uint16, int16, uint32, int32,\n"
            << "                         float32 or float64\n"
            << "  --preview FILE.png     also write the middle slice of the input and of the output side by\n"
            << "                         side (first component, one grey window for both)\n"
            << "  --patch-size N         scikit-image patch_size (default 7; 3 for the phantom)\n"
            << "  --patch-distance N     scikit-image patch_distance (default 11; 3 for the phantom)\n"
            << "  --h X                  scikit-image h (default 0.1; 0.08 for the phantom)\n"
            << "  --sigma X              scikit-image sigma (default 0; 0.1 for the phantom)\n"
            << "  --slow                 classic algorithm (scikit-image fast_mode=False)\n"
            << "  --backend auto|cpu|cuda  where to compute (default auto)\n"
            << "  --threads N            CPU work units (default: ITK's default)\n"
            << "  --phantom-size N       side of the generated phantom (default 64)\n"
            << "  --repeat N             run the filter N times and report each time (default 1)\n"
            << "  --max-gpu-memory MIB   GPU memory the CUDA backend may use (default: 80% of the free memory)\n"
            << "  --single-precision     float32 arithmetic on the GPU (opt-in; not bitwise equal to the CPU)\n"
            << "  --stream-divisions N   read, denoise and write the image in N pieces along its last axis, so\n"
            << "                         that about 1/N of it is in memory (MetaImage and NRRD; the output is\n"
            << "                         bitwise the same)\n"
            << "  --rician               Rician noise model (magnitude MR images; needs --sigma or --noise-sigma)\n"
            << "  --mask FILE            integer image on the input's grid: pixels where it is 0 keep their input\n"
            << "                         value, work outside it is skipped (read whole)\n"
            << "  --noise-sigma FILE     the noise standard deviation of every pixel, on the input's grid\n"
            << "                         (replaces --sigma; fast mode only; read whole)\n"
            << "  --patch-radius R,R,R   patch radius per axis (x, y, z; side 2R+1), instead of --patch-size\n"
            << "  --search-radius D,D,D  search radius per axis, instead of --patch-distance\n"
            << "  --physical-patch-radius X, --physical-search-radius X\n"
            << "                         the radii in the units of the image's spacing, rounded per axis\n";
}

/** A whole number of at least `minimum`, or an exception that names the option and the value. */
int
ParseWhole(const std::string & option, const std::string & text, long long minimum)
{
  char * end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v > std::numeric_limits<int>::max())
  {
    throw std::runtime_error(option + " takes a whole number, not \"" + text + "\"");
  }
  if (v < minimum)
  {
    throw std::runtime_error(option + " must be " + std::to_string(minimum) + " or more, not " + text);
  }
  return static_cast<int>(v);
}

/** Whole numbers of 0 or more separated by commas ("1,1,2"), or an exception that names the option. */
std::vector<int>
ParseWholeList(const std::string & option, const std::string & text)
{
  std::vector<int>  values;
  std::stringstream stream(text);
  std::string       item;
  while (std::getline(stream, item, ','))
  {
    values.push_back(ParseWhole(option, item, 0));
  }
  if (values.empty() || text.back() == ',')
  {
    throw std::runtime_error(option + " takes whole numbers separated by commas, one per axis (x first), not \"" +
                             text + "\"");
  }
  return values;
}

/** A finite real number above `minimum` (or at least it, where `orEqual`), or an exception that
 * names the option and the value. */
double
ParseReal(const std::string & option, const std::string & text, double minimum, bool orEqual)
{
  char *       end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v))
  {
    throw std::runtime_error(option + " takes a finite number, not \"" + text + "\"");
  }
  if (orEqual ? v < minimum : v <= minimum)
  {
    std::ostringstream bound;
    bound << minimum;
    throw std::runtime_error(option + " must be " + (orEqual ? "at least " : "greater than ") + bound.str() + ", not " +
                             text);
  }
  return v;
}

bool
ParseArguments(int argc, char * argv[], Options & o)
{
  for (int i = 1; i < argc; ++i)
  {
    const std::string arg = argv[i];
    auto              value = [&](const char * what) -> std::string {
      if (i + 1 >= argc)
      {
        throw std::runtime_error(std::string("missing value after ") + what);
      }
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h")
    {
      PrintUsage(argv[0]);
      std::exit(EXIT_SUCCESS);
    }
    else if (arg == "--input")
      o.input = value("--input");
    else if (arg == "--output")
      o.output = value("--output");
    else if (arg == "--output-type")
    {
      o.outputType = value("--output-type");
      if (o.outputType != "input" && nlm_files::OutputTypeNames().count(o.outputType) == 0)
      {
        throw std::runtime_error("--output-type must be input, uint8, int8, uint16, int16, uint32, int32, float32 "
                                 "or float64, not " +
                                 o.outputType);
      }
    }
    else if (arg == "--preview")
      o.preview = value("--preview");
    else if (arg == "--patch-size")
      o.patchSize = ParseWhole(arg, value("--patch-size"), 1);
    else if (arg == "--patch-distance")
      o.patchDistance = ParseWhole(arg, value("--patch-distance"), 0);
    else if (arg == "--h")
      o.h = ParseReal(arg, value("--h"), 0.0, false);
    else if (arg == "--sigma")
      o.sigma = ParseReal(arg, value("--sigma"), 0.0, true);
    else if (arg == "--slow")
      o.fastMode = false;
    else if (arg == "--backend")
    {
      o.backend = value("--backend");
      if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda")
      {
        throw std::runtime_error("--backend must be auto, cpu or cuda, not " + o.backend);
      }
    }
    else if (arg == "--threads")
      o.threads = ParseWhole(arg, value("--threads"), 1);
    else if (arg == "--phantom-size")
      o.phantomSize = ParseWhole(arg, value("--phantom-size"), 1);
    else if (arg == "--repeat")
      o.repeat = ParseWhole(arg, value("--repeat"), 1);
    else if (arg == "--max-gpu-memory")
      o.maxGPUMemory = ParseReal(arg, value("--max-gpu-memory"), 0.0, true);
    else if (arg == "--single-precision")
      o.single = true;
    else if (arg == "--stream-divisions")
      o.streamDivisions = ParseWhole(arg, value("--stream-divisions"), 1);
    else if (arg == "--rician")
      o.rician = true;
    else if (arg == "--mask")
      o.mask = value("--mask");
    else if (arg == "--noise-sigma")
      o.noiseSigma = value("--noise-sigma");
    else if (arg == "--patch-radius")
      o.patchRadius = ParseWholeList(arg, value("--patch-radius"));
    else if (arg == "--search-radius")
      o.searchRadius = ParseWholeList(arg, value("--search-radius"));
    else if (arg == "--physical-patch-radius")
      o.physicalPatchRadius = ParseReal(arg, value("--physical-patch-radius"), 0.0, false);
    else if (arg == "--physical-search-radius")
      o.physicalSearchRadius = ParseReal(arg, value("--physical-search-radius"), 0.0, false);
    else
    {
      std::cerr << "Unknown argument: " << arg << "\n";
      PrintUsage(argv[0]);
      return false;
    }
  }
  return true;
}

/** Throws, naming the file and the fix, unless ITK has a writer for the file's name and the file can
 * be created or appended to (a file made by the check is removed again). */
void
CheckWritable(const std::string & fileName)
{
  nlm_files::WriterFor(fileName); // throws, naming the fix, when no writer handles it
  const bool existed = std::ifstream(fileName).good();
  if (!std::ofstream(fileName, std::ios::app).good())
  {
    throw std::runtime_error("cannot write " + fileName + ": check that its folder exists and is writable");
  }
  if (!existed)
  {
    std::remove(fileName.c_str());
  }
}

/** The middle slice of an image's first component: axes 0 and 1 (x across, y down), every other axis
 * at its middle index. Values in row-major order. */
template <typename TImage>
std::vector<double>
MiddleSlice(const TImage * image, itk::SizeValueType & width, itk::SizeValueType & height)
{
  const auto region = image->GetLargestPossibleRegion();
  width = region.GetSize(0);
  height = region.GetSize(1);
  auto index = region.GetIndex();
  for (unsigned int a = 2; a < TImage::ImageDimension; ++a)
  {
    index[a] += static_cast<itk::IndexValueType>(region.GetSize(a) / 2);
  }
  std::vector<double> values;
  values.reserve(width * height);
  for (itk::SizeValueType y = 0; y < height; ++y)
  {
    for (itk::SizeValueType x = 0; x < width; ++x)
    {
      auto at = index;
      at[0] += static_cast<itk::IndexValueType>(x);
      at[1] += static_cast<itk::IndexValueType>(y);
      using Traits = itk::DefaultConvertPixelTraits<typename TImage::PixelType>;
      values.push_back(static_cast<double>(Traits::GetNthComponent(0, image->GetPixel(at))));
    }
  }
  return values;
}

/** Writes the middle slices of the input (left) and of the output (right) side by side as an 8-bit
 * PNG. Both halves share one grey window, the 0.5th to 99.5th percentile of the input slice, and are
 * enlarged by whole pixels (nearest neighbour) to be at least 256 pixels high, within 4096 columns. */
template <typename TImage>
void
WritePreview(const TImage * input, const TImage * output, const std::string & fileName)
{
  itk::SizeValueType  width = 0, height = 0;
  std::vector<double> left = MiddleSlice(input, width, height);
  std::vector<double> right = MiddleSlice(output, width, height);
  std::vector<double> sorted = left;
  std::sort(sorted.begin(), sorted.end());
  auto percentile = [&sorted](double p) {
    return sorted[static_cast<std::size_t>(std::lround(p * static_cast<double>(sorted.size() - 1)))];
  };
  const double low = percentile(0.005);
  double       high = percentile(0.995);
  high = (high > low) ? high : low + 1.0;
  auto grey = [low, high](double v) {
    return static_cast<unsigned char>(std::lround(255.0 * std::min(1.0, std::max(0.0, (v - low) / (high - low)))));
  };

  // Enlarged to at least 256 rows, but to no more than 4096 columns (for slices of few, long rows).
  const itk::SizeValueType gap = 2;
  const itk::SizeValueType scale = std::max<itk::SizeValueType>(
    1, std::min<itk::SizeValueType>((256 + height - 1) / height, 4096 / (2 * width + gap)));
  using PreviewType = itk::Image<unsigned char, 2>;
  auto                  picture = PreviewType::New();
  PreviewType::SizeType size = { { (2 * width + gap) * scale, height * scale } };
  picture->SetRegions(PreviewType::RegionType(size));
  picture->Allocate();
  picture->FillBuffer(0);
  for (itk::SizeValueType y = 0; y < size[1]; ++y)
  {
    for (itk::SizeValueType x = 0; x < width * scale; ++x)
    {
      const auto source = (y / scale) * width + x / scale;
      picture->SetPixel({ { static_cast<itk::IndexValueType>(x), static_cast<itk::IndexValueType>(y) } },
                        grey(left[source]));
      picture->SetPixel(
        { { static_cast<itk::IndexValueType>(x + (width + gap) * scale), static_cast<itk::IndexValueType>(y) } },
        grey(right[source]));
    }
  }
  itk::WriteImage(picture, fileName);
  std::cout << "Wrote " << fileName << " (middle slice, input left, output right)\n";
}

/** What the result is written as. */
struct OutputFormat
{
  itk::IOComponentEnum Type{ itk::IOComponentEnum::DOUBLE };
  itk::IOPixelEnum     Pixel{ itk::IOPixelEnum::VECTOR }; // for several components
};

/** The mask file as an image of its own integer type (uint8 as it is, any other integer type as long
 * long, so that no value wraps); throws, naming the option, for a file of real numbers. */
template <unsigned int VDimension>
itk::ImageBase<VDimension> *
ReadMaskFile(const std::string & fileName, itk::DataObject::Pointer & keep)
{
  auto io = itk::ImageIOFactory::CreateImageIO(fileName.c_str(), itk::ImageIOFactory::IOFileModeEnum::ReadMode);
  if (io.IsNull())
  {
    throw std::runtime_error("--mask: no ITK reader handles " + fileName);
  }
  io->SetFileName(fileName);
  io->ReadImageInformation();
  const auto type = io->GetComponentType();
  if (type == itk::IOComponentEnum::FLOAT || type == itk::IOComponentEnum::DOUBLE || io->GetNumberOfComponents() != 1)
  {
    throw std::runtime_error("--mask takes an image of integers with one component (0: keep the input pixel); " +
                             fileName + " holds " + io->GetComponentTypeAsString(type) + " with " +
                             std::to_string(io->GetNumberOfComponents()) + " component(s)");
  }
  if (type == itk::IOComponentEnum::UCHAR)
  {
    keep = itk::ReadImage<itk::Image<unsigned char, VDimension>>(fileName).GetPointer();
  }
  else
  {
    keep = itk::ReadImage<itk::Image<long long, VDimension>>(fileName).GetPointer();
  }
  return static_cast<itk::ImageBase<VDimension> *>(keep.GetPointer());
}

/** The filter with the program's options. */
template <typename TImage>
typename itk::CudaNonLocalMeansImageFilter<TImage, TImage>::Pointer
MakeFilter(const Options & o)
{
  using FilterType = itk::CudaNonLocalMeansImageFilter<TImage, TImage>;
  auto filter = FilterType::New();
  filter->SetPatchSize(o.patchSize);
  filter->SetPatchDistance(o.patchDistance);
  filter->SetH(o.h);
  filter->SetSigma(o.sigma);
  filter->SetFastMode(o.fastMode);
  filter->SetSinglePrecision(o.single);
  filter->SetMaximumGPUMemory(static_cast<itk::SizeValueType>(o.maxGPUMemory * 1024.0 * 1024.0));
  if (o.rician)
  {
    filter->SetNoiseModel(FilterType::NoiseModelEnum::Rician);
  }
  constexpr unsigned int Dimension = TImage::ImageDimension;
  if (!o.mask.empty())
  {
    itk::DataObject::Pointer mask; // the filter holds it as its input
    filter->SetMaskImage(ReadMaskFile<Dimension>(o.mask, mask));
  }
  if (!o.noiseSigma.empty())
  {
    filter->SetNoiseSigmaImage(itk::ReadImage<itk::Image<double, Dimension>>(o.noiseSigma));
  }
  const auto radius = [](const std::vector<int> & values, const char * option) {
    if (values.size() != Dimension)
    {
      throw std::runtime_error(std::string(option) + " gives " + std::to_string(values.size()) + " radii for a " +
                               std::to_string(Dimension) + "D image; give one per axis (x first)");
    }
    typename FilterType::RadiusType r;
    std::copy(values.begin(), values.end(), r.begin());
    return r;
  };
  if (!o.patchRadius.empty())
  {
    filter->SetPatchRadius(radius(o.patchRadius, "--patch-radius"));
  }
  if (!o.searchRadius.empty())
  {
    filter->SetSearchRadius(radius(o.searchRadius, "--search-radius"));
  }
  filter->SetPhysicalPatchRadius(o.physicalPatchRadius);
  filter->SetPhysicalSearchRadius(o.physicalSearchRadius);
  if (o.backend == "cpu")
  {
    filter->SetBackend(FilterType::BackendEnum::CPU);
  }
  else if (o.backend == "cuda")
  {
    filter->SetBackend(FilterType::BackendEnum::CUDA);
  }
  if (o.threads > 0)
  {
    filter->SetNumberOfWorkUnits(static_cast<unsigned int>(o.threads));
  }
  return filter;
}

/** Reads, denoises and writes in `o.streamDivisions` pieces along the last axis (ITK's streaming:
 * the reader reads, and the filter computes, only what each piece needs), to a temporary file that
 * is moved into place once complete. */
template <typename TImage>
void
DenoiseStreamed(const Options & o, const OutputFormat & format)
{
  auto reader = itk::ImageFileReader<TImage>::New();
  reader->SetFileName(o.input);
  auto filter = MakeFilter<TImage>(o);
  filter->SetInput(reader->GetOutput());
  const std::string temporary = nlm_files::TemporaryNameFor(o.output);
  auto              writer = itk::ImageFileWriter<TImage>::New();
  writer->SetInput(filter->GetOutput());
  writer->SetFileName(temporary);
  writer->SetNumberOfStreamDivisions(static_cast<unsigned int>(o.streamDivisions));
  const auto start = std::chrono::steady_clock::now();
  try
  {
    writer->Update();
  }
  catch (...)
  {
    std::remove(temporary.c_str());
    throw;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto   region = filter->GetOutput()->GetLargestPossibleRegion();
  const auto   bytes = static_cast<std::uint64_t>(region.GetNumberOfPixels()) *
                     filter->GetOutput()->GetNumberOfComponentsPerPixel() *
                     sizeof(typename itk::NumericTraits<typename TImage::PixelType>::ValueType);
  nlm_files::CommitFile(temporary, o.output, bytes);
  std::cout << "Backend: "
            << (filter->GetBackendUsed() == itk::CudaNonLocalMeansImageFilterEnums::Backend::CUDA ? "CUDA" : "CPU")
            << ", " << o.streamDivisions << " stream divisions of " << region.GetSize() << "\nElapsed: " << seconds
            << " s (read, denoise, write)\nWrote " << o.output << " (" << nlm_files::NameOf(format.Type) << ")\n";
}

template <typename TImage>
typename TImage::Pointer
Denoise(const typename TImage::Pointer & image, const Options & o, const OutputFormat & format)
{
  auto filter = MakeFilter<TImage>(o);
  filter->SetInput(image);

  const auto   size = image->GetLargestPossibleRegion().GetSize();
  const double voxels = static_cast<double>(image->GetLargestPossibleRegion().GetNumberOfPixels());
  double       offsets = 1.0;
  for (unsigned int a = 0; a < TImage::ImageDimension; ++a)
  {
    offsets *= 2.0 * static_cast<double>(filter->GetSearchRadius()[a]) + 1.0; // the distance along axis a
  }
  std::cout << "Image: size " << size << ", " << image->GetNumberOfComponentsPerPixel() << " component(s), "
            << (std::is_same<typename itk::NumericTraits<typename TImage::PixelType>::ValueType, float>::value
                  ? "float32"
                  : "float64")
            << " arithmetic type\n";
  std::cout << "Parameters: patch_size " << o.patchSize << " (effective " << filter->GetEffectivePatchSize()
            << "), patch_distance " << o.patchDistance << ", h " << o.h << ", sigma " << o.sigma << ", fast_mode "
            << (o.fastMode ? "True" : "False") << (o.rician ? ", noise model Rician" : "")
            << (o.mask.empty() ? "" : ", mask " + o.mask)
            << (o.noiseSigma.empty() ? "" : ", noise map " + o.noiseSigma);
  if (!o.patchRadius.empty() || !o.searchRadius.empty() || o.physicalPatchRadius > 0.0 || o.physicalSearchRadius > 0.0)
  {
    std::cout << ", patch radius " << filter->GetPatchRadius() << ", search radius " << filter->GetSearchRadius();
  }
  std::cout << "\n";
  for (int r = 0; r < std::max(1, o.repeat); ++r)
  {
    filter->Modified();
    const auto start = std::chrono::steady_clock::now();
    filter->Update();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto & stats = filter->GetBackendStatistics();
    const bool   onGPU = filter->GetBackendUsed() == itk::CudaNonLocalMeansImageFilterEnums::Backend::CUDA;
    std::cout << "Backend: " << (onGPU ? "CUDA" : "CPU");
    if (onGPU)
    {
      std::cout << " on " << stats.Device << "\n  kernel " << stats.KernelMilliseconds << " ms, transfers "
                << stats.UploadMilliseconds + stats.DownloadMilliseconds << " ms, compile " << stats.CompileMilliseconds
                << " ms" << (stats.KernelFromDiskCache ? " (disk cache)" : "") << ", " << stats.Slabs << " slab(s), "
                << stats.Configuration;
    }
    else
    {
      std::cout << ", " << stats.Configuration; // the mode, the SIMD target and the work units
    }
    std::cout << "\nElapsed: " << seconds << " s (" << voxels * offsets / seconds << " voxel-offsets/s)\n";
  }

  nlm_files::WriteImage(filter->GetOutput(), format.Type, format.Pixel, o.output);
  std::cout << "Wrote " << o.output << " (" << nlm_files::NameOf(format.Type) << ")\n";
  if (!o.preview.empty())
  {
    WritePreview<TImage>(image, filter->GetOutput(), o.preview);
  }
  return filter->GetOutput();
}

template <typename TComponent, unsigned int VDimension>
void
ReadAndDenoise(const Options & o, unsigned int components, const OutputFormat & format)
{
  using ScalarImage = itk::Image<TComponent, VDimension>;
  using VectorImage = itk::VectorImage<TComponent, VDimension>;
  if (o.streamDivisions > 1)
  {
    components == 1 ? DenoiseStreamed<ScalarImage>(o, format) : DenoiseStreamed<VectorImage>(o, format);
  }
  else if (components == 1)
  {
    Denoise<ScalarImage>(itk::ReadImage<ScalarImage>(o.input), o, format);
  }
  else
  {
    Denoise<VectorImage>(itk::ReadImage<VectorImage>(o.input), o, format);
  }
}

template <typename TComponent>
void
ReadAndDenoise(const Options & o, unsigned int dimension, unsigned int components, const OutputFormat & format)
{
  switch (dimension)
  {
    case 2:
      ReadAndDenoise<TComponent, 2>(o, components, format);
      break;
    case 3:
      ReadAndDenoise<TComponent, 3>(o, components, format);
      break;
    case 4:
      ReadAndDenoise<TComponent, 4>(o, components, format);
      break;
    default:
      throw std::runtime_error("the input has " + std::to_string(dimension) +
                               " dimensions; non-local means supports 2, 3 and 4");
  }
}

/** Throws, before computing, when --stream-divisions cannot be honored, naming what to change. */
void
CheckStreaming(const Options & o, itk::ImageIOBase & input, itk::IOComponentEnum outputType)
{
  const auto computed = input.GetComponentType() == itk::IOComponentEnum::FLOAT ? itk::IOComponentEnum::FLOAT
                                                                                : itk::IOComponentEnum::DOUBLE;
  if (outputType != computed)
  {
    throw std::runtime_error("--stream-divisions writes the computation's type: give --output-type " +
                             nlm_files::NameOf(computed) + " (or denoise without --stream-divisions)");
  }
  if (!o.preview.empty() || o.repeat > 1)
  {
    throw std::runtime_error("--stream-divisions never holds the whole image: leave out --preview and --repeat");
  }
  const auto writer = nlm_files::WriterFor(o.output);
  if (!writer->CanStreamWrite() || !input.CanStreamRead())
  {
    throw std::runtime_error("--stream-divisions needs formats ITK reads and writes in pieces (.mha, .mhd, .nrrd); " +
                             o.input + " or " + o.output + " is not one");
  }
}

/** The component type --output-type names; for "input", the input's (64-bit and other types that
 * --output-type does not list are written as float64). */
itk::IOComponentEnum
OutputTypeFor(const Options & o, itk::IOComponentEnum inputType)
{
  const auto & names = nlm_files::OutputTypeNames();
  if (o.outputType != "input")
  {
    return names.at(o.outputType);
  }
  for (const auto & entry : names)
  {
    if (entry.second == inputType)
    {
      return inputType;
    }
  }
  return itk::IOComponentEnum::DOUBLE;
}

/** A noisy 3D phantom: a few blocks and balls of different intensities on a gradient background,
 * plus Gaussian noise of standard deviation 0.1 (fixed seed). */
using PhantomType = itk::Image<float, 3>;
PhantomType::Pointer
MakePhantom(int n, bool noisy)
{
  auto                  image = PhantomType::New();
  PhantomType::SizeType size;
  size.Fill(static_cast<itk::SizeValueType>(n));
  image->SetRegions(PhantomType::RegionType(size));
  image->Allocate();
  std::mt19937                          engine(20261130);
  std::normal_distribution<float>       noise(0.0f, 0.1f);
  itk::ImageRegionIterator<PhantomType> it(image, image->GetLargestPossibleRegion());
  for (; !it.IsAtEnd(); ++it)
  {
    const auto   idx = it.GetIndex();
    const double x = (idx[0] + 0.5) / n, y = (idx[1] + 0.5) / n, z = (idx[2] + 0.5) / n;
    double       v = 0.2 + 0.1 * x;
    if (x > 0.15 && x < 0.45 && y > 0.2 && y < 0.8 && z > 0.25 && z < 0.75)
    {
      v = 0.6;
    }
    const double r2 = (x - 0.7) * (x - 0.7) + (y - 0.5) * (y - 0.5) + (z - 0.5) * (z - 0.5);
    if (r2 < 0.04)
    {
      v = (r2 < 0.01) ? 1.0 : 0.8;
    }
    it.Set(static_cast<float>(v) + (noisy ? noise(engine) : 0.0f));
  }
  return image;
}

double
RootMeanSquareDifference(const PhantomType * a, const PhantomType * b)
{
  itk::ImageRegionConstIterator<PhantomType> ia(a, a->GetLargestPossibleRegion());
  itk::ImageRegionConstIterator<PhantomType> ib(b, b->GetLargestPossibleRegion());
  double                                     sum = 0.0;
  for (; !ia.IsAtEnd(); ++ia, ++ib)
  {
    const double d = static_cast<double>(ia.Get()) - static_cast<double>(ib.Get());
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(a->GetLargestPossibleRegion().GetNumberOfPixels()));
}
} // namespace

int
CudaNonLocalMeansDenoise(int argc, char * argv[])
{
  Options o;
  try
  {
    if (!ParseArguments(argc, argv, o))
    {
      return EXIT_FAILURE;
    }
    if (!o.preview.empty() && !nlm_files::EndsWith(o.preview, ".png"))
    {
      std::cerr << "Error: --preview writes a PNG picture; give a file name ending in .png, not " << o.preview << "\n";
      return EXIT_FAILURE;
    }
    // Files that cannot be written fail now, not after the computation.
    CheckWritable(o.output);
    if (!o.preview.empty())
    {
      CheckWritable(o.preview);
    }
    if (o.input.empty())
    {
      // Built-in sample: parameters suited to the phantom unless given.
      o.patchSize = (o.patchSize < 0) ? 3 : o.patchSize;
      o.patchDistance = (o.patchDistance < 0) ? 3 : o.patchDistance;
      o.h = (o.h < 0) ? 0.08 : o.h;
      o.sigma = (o.sigma < 0) ? 0.1 : o.sigma;
      std::cout << "No --input given: denoising a built-in " << o.phantomSize << "^3 phantom with noise of "
                << "standard deviation 0.1.\n";
      OutputFormat format;
      format.Type = OutputTypeFor(o, itk::IOComponentEnum::FLOAT);
      nlm_files::CheckOutputFormat(o.output, 3, 1, format.Type);
      const auto clean = MakePhantom(o.phantomSize, false);
      const auto noisy = MakePhantom(o.phantomSize, true);
      const auto denoised = Denoise<PhantomType>(noisy, o, format);
      std::cout << "RMS error against the clean phantom: noisy " << RootMeanSquareDifference(noisy, clean)
                << ", denoised " << RootMeanSquareDifference(denoised, clean) << "\n";
      return EXIT_SUCCESS;
    }
    o.patchSize = (o.patchSize < 0) ? 7 : o.patchSize;
    o.patchDistance = (o.patchDistance < 0) ? 11 : o.patchDistance;
    o.h = (o.h < 0) ? 0.1 : o.h;
    o.sigma = (o.sigma < 0) ? 0.0 : o.sigma;

    auto io = itk::ImageIOFactory::CreateImageIO(o.input.c_str(), itk::ImageIOFactory::IOFileModeEnum::ReadMode);
    if (io.IsNull())
    {
      std::cerr << "Cannot read " << o.input << ": no ITK image reader recognises it.\n";
      return EXIT_FAILURE;
    }
    io->SetFileName(o.input);
    io->ReadImageInformation();
    nlm_files::CheckInput(*io, o.input);
    const unsigned int dimension = io->GetNumberOfDimensions();
    const unsigned int components = io->GetNumberOfComponents();
    OutputFormat       format;
    format.Type = OutputTypeFor(o, io->GetComponentType());
    // RGB(A) stays RGB(A) where the format stores colours of that type; otherwise a vector.
    const bool colour = io->GetPixelType() == itk::IOPixelEnum::RGB || io->GetPixelType() == itk::IOPixelEnum::RGBA;
    const bool colourType = format.Type == itk::IOComponentEnum::UCHAR ||
                            (format.Type == itk::IOComponentEnum::USHORT && nlm_files::EndsWith(o.output, ".png"));
    format.Pixel = (colour && colourType) ? io->GetPixelType() : itk::IOPixelEnum::VECTOR;
    nlm_files::CheckOutputFormat(o.output, dimension, components, format.Type);
    if (o.streamDivisions > 1)
    {
      CheckStreaming(o, *io, format.Type);
    }
    if (io->GetComponentType() == itk::IOComponentEnum::FLOAT)
    {
      ReadAndDenoise<float>(o, dimension, components, format);
    }
    else
    {
      ReadAndDenoise<double>(o, dimension, components, format);
    }
  }
  catch (const itk::ExceptionObject & e)
  {
    std::cerr << "Error: " << e.GetDescription() << "\n";
    return EXIT_FAILURE;
  }
  catch (const std::bad_alloc &)
  {
    std::cerr << "Error: not enough memory for the whole image; give --stream-divisions N (MetaImage or NRRD files) "
                 "to denoise it in N pieces\n";
    return EXIT_FAILURE;
  }
  catch (const std::exception & e)
  {
    std::cerr << "Error: " << e.what() << "\n";
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
