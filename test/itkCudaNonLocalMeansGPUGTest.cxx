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

// The CUDA backend against the CPU backend, bitwise, over the case matrix: 2D/3D/4D, channels,
// sigma, float32/float64/uint8 inputs, patch sizes 1..7, distances 0..11, non-cubic sizes and sizes
// not divisible by the tile, images smaller than the padding, forced tile shapes, multi-slab runs
// forced by a low memory budget, streaming, repeated Updates, several filters alive at once (also
// from several threads), slow mode (the classic kernel), progress and abort; and the accuracy of the
// opt-in single-precision mode. The program exits 77 (skipped) when no usable CUDA device exists.

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkCudaNonLocalMeansTestUtilities.h"
#include "itkNonLocalMeansCUDADevice.h"
#include "itkNonLocalMeansKernelCache.h"
#include "itkNonLocalMeansOverrides.h"
#include "itkStreamingImageFilter.h"
#include "itkGTest.h"
#include "itkVectorImage.h"
#include "itkImageRegionIteratorWithIndex.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

namespace
{
void
Check(bool ok, const std::string & what)
{
  EXPECT_TRUE(ok) << what;
}

void
SetEnv(const char * name, const char * value)
{
#if defined(_WIN32)
  _putenv_s(name, value ? value : "");
#else
  if (value)
  {
    setenv(name, value, 1);
  }
  else
  {
    unsetenv(name);
  }
#endif
  // The library reads the environment once per process; this white-box test sets the struct.
  itk::nlm::SetOverrides(itk::nlm::ReadOverrides());
}

/** "CPU", "CUDA" or "none". */
std::string
Name(itk::CudaNonLocalMeansImageFilterEnums::Backend backend)
{
  using BackendEnum = itk::CudaNonLocalMeansImageFilterEnums::Backend;
  return backend == BackendEnum::CUDA ? "CUDA" : (backend == BackendEnum::CPU ? "CPU" : "none");
}

struct Params
{
  int                patchSize{ 3 };
  int                distance{ 2 };
  double             h{ 0.1 };
  double             sigma{ 0.0 };
  bool               fast{ true };
  bool               single{ false };
  itk::SizeValueType memory{ 0 };
  unsigned int       streams{ 1 };
  std::vector<int>   devices{};
  // The extensions (doc/numerical-contract.md section 6).
  bool                          rician{ false };
  itk::DataObject::ConstPointer noiseMap{};
  itk::DataObject::ConstPointer mask{};
  std::vector<int>              patchRadius{};  // per axis (contract 6.4); empty: patchSize
  std::vector<int>              searchRadius{}; // per axis; empty: distance
};

/** Sets the filter's parameters from p. */
template <typename TFilter>
void
Configure(TFilter * filter, const Params & p, itk::CudaNonLocalMeansImageFilterEnums::Backend backend)
{
  filter->SetPatchSize(p.patchSize);
  filter->SetPatchDistance(p.distance);
  filter->SetH(p.h);
  filter->SetSigma(p.sigma);
  filter->SetFastMode(p.fast);
  filter->SetSinglePrecision(p.single);
  filter->SetMaximumGPUMemory(p.memory);
  filter->SetDevices(p.devices);
  filter->SetBackend(backend);
  using Base = typename TFilter::MaskImageType;
  filter->SetNoiseModel(p.rician ? TFilter::NoiseModelEnum::Rician : TFilter::NoiseModelEnum::Gaussian);
  filter->SetMaskImage(dynamic_cast<const Base *>(p.mask.GetPointer()));
  filter->SetNoiseSigmaImage(dynamic_cast<const Base *>(p.noiseMap.GetPointer()));
  typename TFilter::RadiusType radius;
  if (!p.patchRadius.empty())
  {
    std::copy(p.patchRadius.begin(), p.patchRadius.end(), radius.begin());
    filter->SetPatchRadius(radius);
  }
  if (!p.searchRadius.empty())
  {
    std::copy(p.searchRadius.begin(), p.searchRadius.end(), radius.begin());
    filter->SetSearchRadius(radius);
  }
}

template <typename TIn, typename TOut = TIn>
typename TOut::Pointer
Compute(const TIn *                                     input,
        const Params &                                  p,
        itk::CudaNonLocalMeansImageFilterEnums::Backend backend,
        std::string *                                   info = nullptr,
        unsigned int *                                  slabs = nullptr)
{
  using FilterType = itk::CudaNonLocalMeansImageFilter<TIn, TOut>;
  auto filter = FilterType::New();
  filter->SetInput(input);
  Configure(filter.GetPointer(), p, backend);
  auto streamer = itk::StreamingImageFilter<TOut, TOut>::New();
  streamer->SetInput(filter->GetOutput());
  streamer->SetNumberOfStreamDivisions(p.streams);
  streamer->Update();
  if (slabs)
  {
    *slabs = filter->GetBackendStatistics().Slabs;
  }
  if (info)
  {
    const auto & s = filter->GetBackendStatistics();
    *info = Name(filter->GetBackendUsed()) + ": " + s.Configuration + ", " + std::to_string(s.Slabs) +
            " slab(s), kernel " + std::to_string(s.KernelMilliseconds) + " ms";
    // Print (and so Python's print(filter)) reports the statistics of a CUDA run.
    std::ostringstream printed;
    filter->Print(printed);
    if (filter->GetBackendUsed() == itk::CudaNonLocalMeansImageFilterEnums::Backend::CUDA &&
        printed.str().find("Configuration: " + s.Configuration) == std::string::npos)
    {
      Check(false, "Print shows the backend statistics of a CUDA run");
    }
  }
  typename TOut::Pointer out = streamer->GetOutput();
  out->DisconnectPipeline();
  return out;
}

/** CUDA output equals CPU output bitwise. */
template <typename TIn, typename TOut = TIn>
void
Compare(const std::string & name, const TIn * input, const Params & p)
{
  using BackendEnum = itk::CudaNonLocalMeansImageFilterEnums::Backend;
  const auto  cpu = Compute<TIn, TOut>(input, p, BackendEnum::CPU);
  std::string info;
  const auto  gpu = Compute<TIn, TOut>(input, p, BackendEnum::CUDA, &info);
  const auto  differing =
    itk::nlm_test::CountDifferences(cpu.GetPointer(), gpu.GetPointer(), input->GetLargestPossibleRegion(), name);
  Check(differing == 0, name + " (" + info + "): CUDA == CPU bitwise, " + std::to_string(differing) + " differ");
}

/** Backend Auto where the CUDA backend cannot run the problem: the CPU computes it, bitwise the
 * CPU backend's output, and the run statistics (and Print) say why; Backend CUDA throws that reason.
 * Where the CUDA backend can run it, Auto uses it. Returns whether Auto fell back. */
template <typename TImage>
bool
CheckAuto(const std::string & name, const TImage * input, const Params & p)
{
  using BackendEnum = itk::CudaNonLocalMeansImageFilterEnums::Backend;
  std::string refusal;
  try
  {
    Compute<TImage>(input, p, BackendEnum::CUDA);
  }
  catch (const itk::ExceptionObject & e)
  {
    refusal = e.GetDescription();
  }
  auto filter = itk::CudaNonLocalMeansImageFilter<TImage>::New();
  filter->SetInput(input);
  Configure(filter.GetPointer(), p, BackendEnum::Auto);
  filter->Update();
  const auto cpu = Compute<TImage>(input, p, BackendEnum::CPU);
  const auto differing =
    itk::nlm_test::CountDifferences(cpu.GetPointer(), filter->GetOutput(), input->GetLargestPossibleRegion(), name);
  const std::string & reason = filter->GetBackendStatistics().CPUFallbackReason;
  std::ostringstream  printed;
  filter->Print(printed);
  if (refusal.empty())
  {
    Check(filter->GetBackendUsed() == itk::CudaNonLocalMeansImageFilterEnums::Backend::CUDA && reason.empty() &&
            differing == 0,
          name + ": the CUDA backend runs it, and so does Auto (== CPU bitwise)");
    return false;
  }
  refusal.erase(refusal.find_last_not_of(". \n") + 1); // the reason quotes it without its full stop
  std::cout << name << ": CUDA refuses: " << refusal << std::endl
            << "  Auto used " << Name(filter->GetBackendUsed()) << ", " << differing
            << " values differ from the CPU's; reason: " << reason << std::endl;
  Check(filter->GetBackendUsed() == itk::CudaNonLocalMeansImageFilterEnums::Backend::CPU && differing == 0 &&
          reason.find(refusal) != std::string::npos &&
          printed.str().find("CPUFallbackReason: " + reason) != std::string::npos,
        name + ": Auto computes on the CPU (== CPU bitwise) and records why");
  return true;
}

template <typename TImage>
typename TImage::Pointer
Image(std::initializer_list<itk::SizeValueType> size, unsigned int components, unsigned int seed, double scale = 1.0)
{
  typename TImage::SizeType s;
  std::copy(size.begin(), size.end(), s.begin());
  return itk::nlm_test::MakeImage<TImage>(s, components, seed, scale);
}
using BackendEnum = itk::CudaNonLocalMeansImageFilterEnums::Backend;
using F2 = itk::Image<float, 2>;
using D2 = itk::Image<double, 2>;
using F3 = itk::Image<float, 3>;
using D3 = itk::Image<double, 3>;
using U3 = itk::Image<unsigned char, 3>;
using F4 = itk::Image<float, 4>;
using D4 = itk::Image<double, 4>;
using VF2 = itk::VectorImage<float, 2>;
using VD2 = itk::VectorImage<double, 2>;
using VF3 = itk::VectorImage<float, 3>;
using VF4 = itk::VectorImage<float, 4>;
} // namespace


TEST(CudaNonLocalMeansGPU, EqualsTheCPUBackendBitwiseIn2D)
{
  // 2D.
  Compare("2D float p7 d5 sigma", Image<F2>({ 67, 45 }, 1, 1).GetPointer(), { 7, 5, 0.1, 0.05 });
  Compare("2D double p5 d11", Image<D2>({ 50, 61 }, 1, 2).GetPointer(), { 5, 11, 0.12, 0.0 });
  Compare("2D float p1 d3", Image<F2>({ 33, 20 }, 1, 3).GetPointer(), { 1, 3, 0.1, 0.0 });
  Compare("2D double p3 d0", Image<D2>({ 33, 20 }, 1, 4).GetPointer(), { 3, 0, 0.1, 0.0 });
  Compare("2D RGB float p3 d5", Image<VF2>({ 41, 39 }, 3, 5).GetPointer(), { 3, 5, 0.08, 0.05 });
  Compare("2D RGB double p5 d4", Image<VD2>({ 40, 35 }, 3, 6).GetPointer(), { 5, 4, 0.1, 0.02 });
  Compare("2D 2-channel float p4(->5) d7", Image<VF2>({ 44, 37 }, 2, 7).GetPointer(), { 4, 7, 0.15, 0.05 });
  Compare("2D smaller than padding", Image<D2>({ 5, 6 }, 1, 8).GetPointer(), { 7, 5, 0.1, 0.0 });
}

TEST(CudaNonLocalMeansGPU, EqualsTheCPUBackendBitwiseIn3D)
{
  // 3D.
  Compare("3D float p3 d3 33x27x19", Image<F3>({ 33, 27, 19 }, 1, 9).GetPointer(), { 3, 3, 0.1, 0.1 });
  Compare("3D double p5 d2", Image<D3>({ 29, 23, 18 }, 1, 10).GetPointer(), { 5, 2, 0.2, 0.0 });
  Compare("3D double p7 d11 (skimage defaults)", Image<D3>({ 21, 19, 17 }, 1, 11).GetPointer(), { 7, 11, 0.1, 0.0 });
  Compare("3D float p1 d2", Image<F3>({ 17, 15, 13 }, 1, 12).GetPointer(), { 1, 2, 0.1, 0.0 });
  Compare("3D float smaller than padding", Image<F3>({ 3, 4, 5 }, 1, 13).GetPointer(), { 5, 4, 0.1, 0.05 });
  Compare("3D 3-channel float p3 d2", Image<VF3>({ 19, 22, 17 }, 3, 14).GetPointer(), { 3, 2, 0.12, 0.1 });
  Compare<U3, D3>(
    "3D uint8 -> double p3 d2", Image<U3>({ 24, 21, 18 }, 1, 15, 255.0).GetPointer(), { 3, 2, 25.0, 10.0 });
  Compare<F3, D3>("3D float -> double p3 d3", Image<F3>({ 26, 20, 18 }, 1, 16).GetPointer(), { 3, 3, 0.1, 0.05 });
  Compare<D3, F3>("3D double -> float p3 d3", Image<D3>({ 26, 20, 18 }, 1, 17).GetPointer(), { 3, 3, 0.1, 0.05 });
  Compare("3D double p9 d3 2-channel",
          Image<itk::VectorImage<double, 3>>({ 23, 17, 12 }, 2, 27).GetPointer(),
          { 9, 3, 0.3, 0.02 });
  Compare("3D float p3 d4 one plane", Image<F3>({ 40, 33, 1 }, 1, 28).GetPointer(), { 3, 4, 0.1, 0.05 });
  {
    // A constant block: raw distances of exactly 0 (sigma 0) and of exactly -noise sums.
    auto input = Image<D3>({ 35, 30, 21 }, 1, 29);
    for (itk::IndexValueType z = 0; z < 10; ++z)
      for (itk::IndexValueType y = 0; y < 30; ++y)
        for (itk::IndexValueType x = 0; x < 20; ++x)
          input->SetPixel({ { x, y, z } }, 0.25);
    Compare("3D double constant block sigma 0", input.GetPointer(), { 3, 3, 0.1, 0.0 });
    Compare("3D double constant block sigma 0.05", input.GetPointer(), { 3, 2, 0.1, 0.05 });
  }
}

TEST(CudaNonLocalMeansGPU, EqualsTheCPUBackendBitwiseIn4D)
{
  // 4D.
  Compare("4D double p3 d2", Image<D4>({ 9, 8, 7, 6 }, 1, 18).GetPointer(), { 3, 2, 0.1, 0.05 });
  Compare("4D 2-channel float p3 d1", Image<VF4>({ 7, 6, 6, 5 }, 2, 19).GetPointer(), { 3, 1, 0.15, 0.1 });
  Compare("4D float p5 d1", Image<F4>({ 10, 9, 8, 7 }, 1, 20).GetPointer(), { 5, 1, 0.2, 0.0 });
}

namespace
{
/** p with the Rician model, a noise map and a mask as asked. */
template <unsigned int VDimension>
Params
With(Params p, const itk::ImageBase<VDimension> * image, bool rician, bool map, bool mask, unsigned int seed)
{
  p.rician = rician;
  if (map)
  {
    p.noiseMap = itk::nlm_test::MakeNoiseMap<VDimension>(image, seed, 0.1).GetPointer();
  }
  if (mask)
  {
    // A ball of a third of the extent, and about one pixel in 97 elsewhere.
    p.mask = itk::nlm_test::MakeMask<VDimension>(image, 1.0 / 3.0, 97, seed + 1, 1).GetPointer();
  }
  return p;
}
} // namespace

namespace
{
/** Expects the CUDA backend's output to equal the CPU backend's bit for bit, computed by a
 * configuration whose description contains `kernel`. */
template <typename TImage>
void
ExpectTheCPUBackendsOutputFrom(const TImage *      input,
                               const Params &      p,
                               const char *        kernel,
                               const std::string & what,
                               const char *        absent = nullptr)
{
  std::string info;
  const auto  cpu = Compute<TImage>(input, p, BackendEnum::CPU);
  const auto  gpu = Compute<TImage>(input, p, BackendEnum::CUDA, &info);
  Check(itk::nlm_test::CountDifferences(cpu.GetPointer(), gpu.GetPointer(), input->GetLargestPossibleRegion(), what) ==
            0 &&
          info.find(kernel) != std::string::npos && (absent == nullptr || info.find(absent) == std::string::npos),
        what + " (" + info + ") == CPU");
}

/** Single precision is not the CPU's arithmetic: the CUDA output in single precision equals the one
 * with the environment variables `others` set (another kernel or footprint with the same float
 * arithmetic); `kernel` and `otherKernel` are in the two configurations' descriptions. The variables
 * get their earlier values back. */
template <typename TImage>
void
ExpectTheSameSinglePrecisionOutputWith(const TImage *                                               input,
                                       Params                                                       p,
                                       std::initializer_list<std::pair<const char *, const char *>> others,
                                       const char *                                                 kernel,
                                       const char *                                                 otherKernel,
                                       const std::string &                                          what)
{
  p.single = true;
  std::string                               info, otherInfo;
  const auto                                output = Compute<TImage>(input, p, BackendEnum::CUDA, &info);
  std::vector<std::pair<std::string, bool>> saved;
  for (const auto & [variable, value] : others)
  {
    const char * previous = std::getenv(variable);
    saved.emplace_back(previous ? previous : "", previous != nullptr);
    SetEnv(variable, value);
  }
  const auto  other = Compute<TImage>(input, p, BackendEnum::CUDA, &otherInfo);
  std::size_t i = 0;
  for (const auto & entry : others)
  {
    SetEnv(entry.first, saved[i].second ? saved[i].first.c_str() : nullptr);
    ++i;
  }
  Check(itk::nlm_test::CountDifferences(
          other.GetPointer(), output.GetPointer(), input->GetLargestPossibleRegion(), "single") == 0 &&
          info.find(kernel) != std::string::npos && otherInfo.find(otherKernel) != std::string::npos,
        what + ", single precision (" + info + ") == (" + otherInfo + ")");
}
} // namespace

namespace
{
/** A scale factor as "1e-80" (std::to_string writes 0.000000). */
std::string
ScaleName(double scale)
{
  std::ostringstream os;
  os << scale;
  return os.str();
}
} // namespace

TEST(CudaNonLocalMeansGPU, TheTiledKernelsTwoWeightFormsEqualTheCPUBackend)
{
  // The tiled kernel takes the corrected quotient where the norm is in [2^-500, 2^500] and the
  // division-free nearest-integer form elsewhere (contract 3a). Images and parameters scaled by
  // 1e-80 and 1e80 give the same weights as at scale 1 in exact arithmetic, with norms of about
  // 1e-160 and 1e160: the tiled kernel with its other form (3D too, which at scale 1 takes the
  // column kernel).
  for (const double scale : { 1.0, 1e-80, 1e80 })
  {
    const Params params{ 3, 2, 0.1 * scale, 0.05 * scale };
    const bool   corrected = (scale == 1.0);
    const auto   image4D = Image<D4>({ 9, 8, 7, 6 }, 1, 61, scale);
    ExpectTheCPUBackendsOutputFrom(image4D.GetPointer(),
                                   params,
                                   corrected ? " corrected " : "z-segments",
                                   "4D double p3 d2, scale " + ScaleName(scale),
                                   corrected ? nullptr : "corrected");
    if (!corrected)
    {
      const auto image3D = Image<D3>({ 21, 19, 17 }, 1, 62, scale);
      ExpectTheCPUBackendsOutputFrom(image3D.GetPointer(),
                                     Params{ 3, 3, 0.1 * scale, 0.05 * scale },
                                     "z-segments",
                                     "3D double p3 d3, scale " + ScaleName(scale),
                                     "corrected");
    }
  }
}

TEST(CudaNonLocalMeansGPU, ImagesSmallerThanThePaddingEqualTheCPUBackendOnEveryKernel)
{
  // Smaller than the padding on every axis: the planner runs this case with the buffered-weights
  // kernel, without it with the shared-rows kernel, and without both with the tiled kernel; the
  // column kernel, forced, with its footprint in shared and in global memory.
  const auto   tiny = Image<F3>({ 3, 4, 5 }, 1, 13);
  const Params params{ 5, 4, 0.1, 0.05 };
  ExpectTheCPUBackendsOutputFrom(tiny.GetPointer(), params, "buffered weights", "3D float smaller than padding");
  SetEnv("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "0");
  ExpectTheCPUBackendsOutputFrom(
    tiny.GetPointer(), params, "shared rows", "3D float smaller than padding, shared rows");
  SetEnv("CUDANONLOCALMEANS_SHARED_ROWS", "0");
  ExpectTheCPUBackendsOutputFrom(tiny.GetPointer(), params, "z-segments", "3D float smaller than padding, tiled");
  SetEnv("CUDANONLOCALMEANS_SHARED_ROWS", nullptr);
  SetEnv("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", nullptr);
  SetEnv("CUDANONLOCALMEANS_COLUMNS", "2,2,4,1");
  for (const char * footprint : { "shared", "global" })
  {
    SetEnv("CUDANONLOCALMEANS_COLUMN_FOOTPRINT", footprint);
    ExpectTheCPUBackendsOutputFrom(
      tiny.GetPointer(),
      params,
      std::string(footprint) == "global" ? "2 row(s) from global memory" : "2 row(s) float",
      std::string("3D float smaller than padding, columns 2,2,4,1, footprint ") + footprint);
  }
  SetEnv("CUDANONLOCALMEANS_COLUMN_FOOTPRINT", nullptr);
  SetEnv("CUDANONLOCALMEANS_COLUMNS", nullptr);
}

namespace
{
/** One kernel path for EveryKernelPathOnSmallImagesEqualsTheCPUBackendBitwise: the problem, the
 * overrides that force the path, and what the configuration's description must contain. */
struct KernelPath
{
  const char *                                       name;
  int                                                patch, distance;
  std::vector<std::pair<const char *, const char *>> overrides;
  const char *                                       expected;
  std::vector<int>                                   patchRadius{}, searchRadius{};
};

constexpr const char * kKernelOverrides[] = { "CUDANONLOCALMEANS_COLUMNS",     "CUDANONLOCALMEANS_COLUMN_FOOTPRINT",
                                              "CUDANONLOCALMEANS_SHARED_ROWS", "CUDANONLOCALMEANS_BUFFERED_WEIGHTS",
                                              "CUDANONLOCALMEANS_SPLIT_BOXES", "CUDANONLOCALMEANS_NVRTC_OPTIONS" };

/** Runs each path on gray float and on gray double with the Rician model (both on the path), and,
 * on whatever kernel the planner then takes, on 3-channel float (where given) and on gray float
 * with a noise map and a mask. */
template <typename TFloat, typename TDouble, typename TColor>
void
ExpectEachPathToEqualTheCPUBackend(const std::vector<KernelPath> & paths,
                                   const TFloat *                  floats,
                                   const TDouble *                 doubles,
                                   const TColor *                  colors)
{
  constexpr unsigned int D = TFloat::ImageDimension;
  for (const auto & path : paths)
  {
    for (const auto & [variable, value] : path.overrides)
    {
      SetEnv(variable, value);
    }
    Params params{ path.patch, path.distance, 0.1, 0.05 };
    params.patchRadius = path.patchRadius;
    params.searchRadius = path.searchRadius;
    const std::string name = std::to_string(D) + "D " + path.name;
    ExpectTheCPUBackendsOutputFrom(floats, params, path.expected, name + ", float");
    ExpectTheCPUBackendsOutputFrom(
      doubles, With<D>(params, doubles, true, false, false, 101), path.expected, name + ", double, Rician");
    if (colors != nullptr)
    {
      ExpectTheCPUBackendsOutputFrom(colors, params, "", name + ", 3-channel float");
    }
    ExpectTheCPUBackendsOutputFrom(
      floats, With<D>(params, floats, false, true, true, 102), "", name + ", float, map, mask");
    for (const char * variable : kKernelOverrides)
    {
      SetEnv(variable, nullptr);
    }
  }
}
} // namespace

TEST(CudaNonLocalMeansGPU, EveryKernelPathOnSmallImagesEqualsTheCPUBackendBitwise)
{
  // Every kernel and its variants (footprint in shared or global memory, rows in pairs, odd warps,
  // 2D, 3D and 4D, per-axis radii) on images small enough for the CUDA emulator (CTest
  // CudaNonLocalMeansEmulatedGPUTests runs this test without a GPU), none of them whole tiles.
  const std::vector<KernelPath> paths2D = {
    { "p3 d3 columns", 3, 3, {}, "columns of 4 row(s)" },
    { "p5 d4 columns", 5, 4, {}, "columns of 16 row(s)" },
    { "p7 d5 columns", 7, 5, {}, "columns of 16 row(s)" },
    { "p9 d3 columns", 9, 3, {}, "columns of 16 row(s) in 2 chunks" },
    { "p11 d5 columns", 11, 5, {}, "columns of 16 row(s) in 2 chunks" },
    { "p9 d2 columns in 2 chunks", 9, 2, {}, "columns of 16 row(s) in 2 chunks" },
    { "p11 d2 columns in 2 chunks after a warm-up longer than a chunk", 11, 2, {}, "columns of 16 row(s) in 2 chunks" },
    { "p7 d2 columns 8,1,4,2 global",
      7,
      2,
      { { "CUDANONLOCALMEANS_COLUMNS", "8,1,4,2" }, { "CUDANONLOCALMEANS_COLUMN_FOOTPRINT", "global" } },
      "from global memory" },
    { "p11 d3 tiled", 11, 3, { { "CUDANONLOCALMEANS_COLUMNS", "0" } }, "z-segments" },
    { "p3 d4 tiled, spanning box",
      3,
      4,
      { { "CUDANONLOCALMEANS_COLUMNS", "0" }, { "CUDANONLOCALMEANS_SPLIT_BOXES", "0" } },
      "z-segments" },
    { "radii 1,3 / 2,1 tiled, spanning box",
      3,
      2,
      { { "CUDANONLOCALMEANS_COLUMNS", "0" }, { "CUDANONLOCALMEANS_SPLIT_BOXES", "0" } },
      "z-segments",
      { 1, 3 },
      { 2, 1 } },
    { "p5 d3 tiled, split boxes",
      5,
      3,
      { { "CUDANONLOCALMEANS_COLUMNS", "0" }, { "CUDANONLOCALMEANS_SPLIT_BOXES", "1" } },
      "split boxes" },
    { "radii 1,3 / 2,1 tiled, split boxes",
      3,
      2,
      { { "CUDANONLOCALMEANS_COLUMNS", "0" }, { "CUDANONLOCALMEANS_SPLIT_BOXES", "1" } },
      "split boxes",
      { 1, 3 },
      { 2, 1 } },
  };
  ExpectEachPathToEqualTheCPUBackend(paths2D,
                                     Image<F2>({ 37, 23 }, 1, 102).GetPointer(),
                                     Image<D2>({ 29, 21 }, 1, 103).GetPointer(),
                                     static_cast<const VF2 *>(nullptr));
  const std::vector<KernelPath> paths3D = {
    { "p3 d2 columns", 3, 2, {}, "columns of 2 row(s)" },
    // 3 rows per thread, chosen for large outputs at distance 3 (this image is too small for it).
    { "p3 d3 columns 3,4,4,3", 3, 3, { { "CUDANONLOCALMEANS_COLUMNS", "3,4,4,3" } }, "columns of 3 row(s)" },
    { "p3 d3 columns global", 3, 3, { { "CUDANONLOCALMEANS_COLUMN_FOOTPRINT", "global" } }, "from global memory" },
    { "p5 d2 columns 2,2,8,3", 5, 2, { { "CUDANONLOCALMEANS_COLUMNS", "2,2,8,3" } }, "columns of 2 row(s)" },
    { "p7 d2 shared rows 16,8,2", 7, 2, { { "CUDANONLOCALMEANS_SHARED_ROWS", "16,8,2" } }, "shared rows" },
    { "p3 d2 shared rows 8,4,1", 3, 2, { { "CUDANONLOCALMEANS_SHARED_ROWS", "8,4,1" } }, "shared rows" },
    { "p5 d3 buffered weights", 5, 3, {}, "buffered weights" },
    { "p7 d3 buffered weights", 7, 3, {}, "buffered weights" },
    { "p9 d3 buffered weights (rows in pairs)", 9, 3, {}, "buffered weights" },
    { "p11 d3 buffered weights", 11, 3, {}, "buffered weights" },
    { "p13 d2 buffered weights", 13, 2, { { "CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "1" } }, "buffered weights" },
    { "p15 d2 buffered weights", 15, 2, { { "CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "1" } }, "buffered weights" },
    { "p9 d2 buffered weights 3,8,4", 9, 2, { { "CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "3,8,4" } }, "buffered weights" },
    { "p5 d2 buffered weights 1,16,6",
      5,
      2,
      { { "CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "1,16,6" } },
      "buffered weights" },
    { "p5 d2 tiled, spanning box",
      5,
      2,
      { { "CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "0" },
        { "CUDANONLOCALMEANS_SHARED_ROWS", "0" },
        { "CUDANONLOCALMEANS_SPLIT_BOXES", "0" } },
      "z-segments" },
    { "p21 d1 tiled, spanning box",
      21,
      1,
      { { "CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "0" },
        { "CUDANONLOCALMEANS_SHARED_ROWS", "0" },
        { "CUDANONLOCALMEANS_SPLIT_BOXES", "0" } },
      "z-segments" },
    { "radii 2,1,1 / 1,2,1 tiled, spanning box",
      3,
      2,
      { { "CUDANONLOCALMEANS_COLUMNS", "0" }, { "CUDANONLOCALMEANS_SPLIT_BOXES", "0" } },
      "z-segments",
      { 2, 1, 1 },
      { 1, 2, 1 } },
    { "p5 d3 tiled, split boxes",
      5,
      3,
      { { "CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "0" },
        { "CUDANONLOCALMEANS_SHARED_ROWS", "0" },
        { "CUDANONLOCALMEANS_SPLIT_BOXES", "1" } },
      "split boxes" },
    { "radii 2,1,1 / 1,3,2 tiled, split boxes",
      3,
      2,
      { { "CUDANONLOCALMEANS_COLUMNS", "0" }, { "CUDANONLOCALMEANS_SPLIT_BOXES", "1" } },
      "split boxes",
      { 2, 1, 1 },
      { 1, 3, 2 } },
  };
  ExpectEachPathToEqualTheCPUBackend(paths3D,
                                     Image<F3>({ 21, 14, 11 }, 1, 104).GetPointer(),
                                     Image<D3>({ 19, 13, 10 }, 1, 105).GetPointer(),
                                     Image<VF3>({ 11, 9, 8 }, 3, 106).GetPointer());
  const std::vector<KernelPath> paths4D = {
    { "p3 d1 spanning box", 3, 1, { { "CUDANONLOCALMEANS_SPLIT_BOXES", "0" } }, "z-segments" },
    { "p5 d1 spanning box", 5, 1, { { "CUDANONLOCALMEANS_SPLIT_BOXES", "0" } }, "z-segments" },
    { "p3 d2 split boxes", 3, 2, { { "CUDANONLOCALMEANS_SPLIT_BOXES", "1" } }, "split boxes" },
  };
  const auto floats4D = Image<F4>({ 7, 6, 5, 4 }, 1, 107);
  ExpectEachPathToEqualTheCPUBackend(paths4D,
                                     floats4D.GetPointer(),
                                     Image<D4>({ 6, 5, 5, 4 }, 1, 108).GetPointer(),
                                     Image<VF4>({ 5, 4, 4, 3 }, 3, 109).GetPointer());
  // The spanning box of patch 5 / distance 5 fits no device's shared memory: split boxes, chosen
  // (where it fits, the planner takes the cheaper of the two by its estimate). Once: its 7,986
  // shifts take the emulator 45 s; the variants are the forced path's above.
  ExpectTheCPUBackendsOutputFrom(
    floats4D.GetPointer(), Params{ 5, 5, 0.1, 0.05 }, "split boxes", "4D p5 d5 split boxes (chosen), float");
}

TEST(CudaNonLocalMeansGPU, TheColumnKernelReadingGlobalMemoryEqualsTheCPUBackendBitwise)
{
  // The column kernel with its footprint read from global memory: forced, and chosen by the
  // planner where a footprint in shared memory would cost resident blocks (large distances).
  // Sizes that are not whole tiles, distances beyond the image (reflections of reflections),
  // channels, both element types, single precision, the Rician model and a mask.
  struct Case
  {
    const char * name;
    int          patch, distance;
    const char * footprint; // CUDANONLOCALMEANS_COLUMN_FOOTPRINT
    const char * columns;   // CUDANONLOCALMEANS_COLUMNS (nullptr: the planner's shape)
    const char * sharedRun; // in the description of the run with the footprint forced into shared memory
  };
  // "row(s) float": the column kernel with its footprint in shared memory (in global memory the
  // description says "row(s) from global memory"). At distance 21 a footprint in shared memory does
  // not fit, so the planner takes the tiled kernel.
  const Case cases[] = {
    { "p3 d3 forced global", 3, 3, "global", nullptr, "row(s) float" },
    { "p3 d8 chosen", 3, 8, nullptr, nullptr, "row(s) float" },
    { "p3 d21 chosen", 3, 21, nullptr, nullptr, "z-segments" },
    { "p3 d11 global 1,8,4,2", 3, 11, "global", "1,8,4,2", "row(s) float" },
    { "p3 d6 global 3,4,2,1", 3, 6, "global", "3,4,2,1", "row(s) float" },
    { "p5 d9 global 2,2,8,3", 5, 9, "global", "2,2,8,3", "row(s) float" },
    { "p7 d4 global 1,4,4,1", 7, 4, "global", "1,4,4,1", "row(s) float" },
  };
  const auto floats = Image<F3>({ 45, 37, 29 }, 1, 61);
  const auto doubles = Image<D3>({ 33, 26, 23 }, 1, 62);
  const auto colors = Image<VF3>({ 21, 19, 14 }, 3, 63);
  for (const auto & c : cases)
  {
    SetEnv("CUDANONLOCALMEANS_COLUMN_FOOTPRINT", c.footprint);
    SetEnv("CUDANONLOCALMEANS_COLUMNS", c.columns);
    const Params params{ c.patch, c.distance, 0.1, 0.05 };
    auto         check = [&](const auto * input, const Params & p, const std::string & what) {
      ExpectTheCPUBackendsOutputFrom(input, p, "from global memory", std::string(c.name) + ", " + what);
    };
    check(floats.GetPointer(), params, "float");
    check(doubles.GetPointer(), params, "double");
    check(colors.GetPointer(), params, "3-channel float");
    // The global footprint against the shared one (or the tiled kernel where that does not fit).
    ExpectTheSameSinglePrecisionOutputWith(floats.GetPointer(),
                                           params,
                                           { { "CUDANONLOCALMEANS_COLUMN_FOOTPRINT", "shared" } },
                                           "from global memory",
                                           c.sharedRun,
                                           c.name);
    check(doubles.GetPointer(), With<3>(params, doubles.GetPointer(), true, false, true, 64), "double, Rician, mask");
  }
  SetEnv("CUDANONLOCALMEANS_COLUMN_FOOTPRINT", nullptr);
  SetEnv("CUDANONLOCALMEANS_COLUMNS", nullptr);
  // Single precision at patch 5: the planner's column kernel (footprint in shared memory), against
  // the tiled kernel (with the column kernel off the planner takes the shared-rows kernel).
  ExpectTheSameSinglePrecisionOutputWith(
    floats.GetPointer(),
    { 5, 3, 0.1, 0.05 },
    { { "CUDANONLOCALMEANS_COLUMNS", "0" }, { "CUDANONLOCALMEANS_SHARED_ROWS", "0" } },
    "2 row(s) float",
    "z-segments",
    "p5 d3 single precision chosen");
}

TEST(CudaNonLocalMeansGPU, TheColumnKernelIn2DEqualsTheCPUBackendBitwise)
{
  // The column kernel in 2D (a thread marches through its rows): chosen by the planner and forced,
  // its footprint in shared and in global memory, sizes that are not whole tiles, distances beyond
  // the image (reflections of reflections), channels, both element types, the Rician model with a
  // mask, and single precision (against the tiled kernel's, the same float arithmetic).
  struct Case
  {
    const char * name;
    int          patch, distance;
    const char * footprint; // CUDANONLOCALMEANS_COLUMN_FOOTPRINT (nullptr: the planner's)
    const char * columns;   // CUDANONLOCALMEANS_COLUMNS (nullptr: the planner's shape)
    const char * expected;  // in the configuration's description
  };
  const Case cases[] = {
    { "p3 d5 chosen", 3, 5, nullptr, nullptr, "columns of 4 row(s)" },
    { "p5 d7 chosen", 5, 7, nullptr, nullptr, "columns of 16 row(s)" },
    { "p7 d11 chosen", 7, 11, nullptr, nullptr, "columns of 16 row(s)" },
    { "p9 d3 chosen", 9, 3, nullptr, nullptr, "columns of 16 row(s) in 2 chunks" },
    { "p11 d5 chosen", 11, 5, nullptr, nullptr, "columns of 16 row(s) in 2 chunks" },
    { "p9 d4 global 16,1,4,3", 9, 4, "global", "16,1,4,3", "columns of 16 row(s) in 2 chunks from global memory" },
    { "p5 d21 global", 5, 21, "global", nullptr, "row(s) from global memory" },
    { "p9 d6 shared 4,1,2,1", 9, 6, "shared", "4,1,2,1", "columns of 4 row(s)" },
    { "p7 d2 global 8,1,4,2", 7, 2, "global", "8,1,4,2", "columns of 8 row(s) from global memory" },
    { "p3 d1 shared 16,1,8,2", 3, 1, "shared", "16,1,8,2", "columns of 16 row(s)" },
    { "p11 d9 global 2,1,8,3", 11, 9, "global", "2,1,8,3", "columns of 2 row(s) from global memory" },
  };
  const auto floats = Image<F2>({ 67, 45 }, 1, 81);
  const auto doubles = Image<D2>({ 53, 38 }, 1, 82);
  const auto colors = Image<VF2>({ 21, 17 }, 3, 83);
  const auto tiny = Image<F2>({ 9, 7 }, 1, 84);
  for (const auto & c : cases)
  {
    SetEnv("CUDANONLOCALMEANS_COLUMN_FOOTPRINT", c.footprint);
    SetEnv("CUDANONLOCALMEANS_COLUMNS", c.columns);
    const Params params{ c.patch, c.distance, 0.1, 0.05 };
    // The shape and the footprint as the case says (3 channels: rows halve to 32 accumulators).
    const bool shared = c.footprint != nullptr && std::string(c.footprint) == "shared";
    auto       check = [&](const auto * input, const Params & p, const std::string & what, const char * expected) {
      ExpectTheCPUBackendsOutputFrom(
        input, p, expected, std::string(c.name) + ", " + what, shared ? "from global memory" : nullptr);
    };
    check(floats.GetPointer(), params, "float", c.expected);
    check(doubles.GetPointer(), params, "double", c.expected);
    // Patch 11 with several channels takes the tiled kernel unless a shape is forced.
    check(colors.GetPointer(),
          params,
          "3-channel float",
          (c.patch == 11 && c.columns == nullptr) ? "z-segments" : "columns");
    check(tiny.GetPointer(), params, "9x7 float", c.expected);
    check(doubles.GetPointer(),
          With<2>(params, doubles.GetPointer(), true, false, true, 85),
          "double, Rician, mask",
          c.expected);
    ExpectTheSameSinglePrecisionOutputWith(
      floats.GetPointer(), params, { { "CUDANONLOCALMEANS_COLUMNS", "0" } }, "columns", "z-segments", c.name);
  }
  SetEnv("CUDANONLOCALMEANS_COLUMN_FOOTPRINT", nullptr);
  SetEnv("CUDANONLOCALMEANS_COLUMNS", nullptr);
  // Slabs along axis 1, whole tiles of the column kernel's rows (planned in the launch-plan test).
  const auto tall = Image<F2>({ 60, 400 }, 1, 86);
  Params     slabs{ 3, 5, 0.1, 0.05 };
  slabs.memory = 150000;
  ExpectTheCPUBackendsOutputFrom(tall.GetPointer(), slabs, "columns of 4 row(s)", "60x400 in slabs", " 1 slab(s)");
}

TEST(CudaNonLocalMeansGPU, TheSharedRowsKernelEqualsTheCPUBackendBitwise)
{
  // The shared-rows kernel (3D, large patches): chosen by the planner (with the buffered-weights
  // kernel off, which it prefers in float64) and forced, with sizes that are not whole tiles,
  // distances beyond the image, channels, both element types, the Rician model with a mask, and
  // single precision (against the tiled kernel's, the same float arithmetic).
  SetEnv("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "0");
  struct Case
  {
    const char * name;
    int          patch, distance;
    const char * shape; // CUDANONLOCALMEANS_SHARED_ROWS (nullptr: the planner's)
  };
  const Case cases[] = {
    { "p7 d11 chosen", 7, 11, nullptr },
    { "p9 d9 chosen", 9, 9, nullptr },
    { "p13 d10 chosen (4 planes)", 13, 10, nullptr },
    { "p9 d3 forced 8,16,1", 9, 3, "8,16,1" },
    { "p3 d4 forced 8,4,1", 3, 4, "8,4,1" },
    { "p5 d6 forced 4,16,1", 5, 6, "4,16,1" },
    { "p7 d2 forced 16,8,2", 7, 2, "16,8,2" },
    { "p11 d1 forced 2,32,1", 11, 1, "2,32,1" },
  };
  const auto floats = Image<F3>({ 45, 37, 29 }, 1, 71);
  const auto doubles = Image<D3>({ 33, 26, 23 }, 1, 72);
  const auto colors = Image<VF3>({ 21, 19, 14 }, 3, 73);
  for (const auto & c : cases)
  {
    SetEnv("CUDANONLOCALMEANS_SHARED_ROWS", c.shape);
    const Params params{ c.patch, c.distance, 0.1, 0.05 };
    auto         check = [&](const auto * input, const Params & p, const std::string & what) {
      ExpectTheCPUBackendsOutputFrom(input, p, "shared rows", std::string(c.name) + ", " + what);
    };
    check(floats.GetPointer(), params, "float");
    check(doubles.GetPointer(), params, "double");
    check(colors.GetPointer(), params, "3-channel float");
    check(doubles.GetPointer(), With<3>(params, doubles.GetPointer(), true, false, true, 74), "double, Rician, mask");
    ExpectTheSameSinglePrecisionOutputWith(
      floats.GetPointer(),
      params,
      { { "CUDANONLOCALMEANS_SHARED_ROWS", "0" }, { "CUDANONLOCALMEANS_COLUMNS", "0" } },
      "shared rows",
      "z-segments",
      c.name);
  }
  SetEnv("CUDANONLOCALMEANS_SHARED_ROWS", nullptr);
  SetEnv("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", nullptr);
}

TEST(CudaNonLocalMeansGPU, TheBufferedWeightsKernelEqualsTheCPUBackendBitwise)
{
  // The buffered-weights kernel (3D, large patches; every weight once, in batches of shift pairs):
  // chosen by the planner and forced, with sizes that are not whole tiles, distances beyond the
  // image, odd and even distances (pairs of one shift), several batches, channels, both element
  // types, the Rician model, slabs, and single precision (against the shared-rows kernel's, the same
  // float arithmetic).
  struct Case
  {
    const char * name;
    int          patch, distance;
    const char * forced; // CUDANONLOCALMEANS_BUFFERED_WEIGHTS (nullptr: the planner's)
  };
  const Case cases[] = {
    { "p7 d11 chosen", 7, 11, nullptr },
    { "p5 d6 chosen", 5, 6, nullptr },
    { "p9 d3 chosen", 9, 3, nullptr },
    { "p11 d3 chosen", 11, 3, nullptr },
    { "p3 d4 forced", 3, 4, "1" },
    { "p5 d1 forced", 5, 1, "1" },
    { "p13 d2 forced", 13, 2, "1" },
    // Forced shapes (warps, planes, pairs): several blocks along axis 2 and units per warp, 16
    // warps, and warps that skip their last unit (16,8,5 at patch 11 and 4,4,3 at patch 5); odd
    // numbers of warps, whose step 2 takes both shifts of one row (3,8,4 and 1,16,6).
    { "p11 d3 shape 16,8,5", 11, 3, "16,8,5" },
    { "p5 d4 shape 4,4,3", 5, 4, "4,4,3" },
    { "p9 d2 shape 2,16,40", 9, 2, "2,16,40" },
    { "p7 d5 shape 3,8,4", 7, 5, "3,8,4" },
    { "p5 d3 shape 1,16,6", 5, 3, "1,16,6" },
    // Rows in pairs in step 1 (float64, patch 9 on): an even number of rows (3,8,4), a last row
    // alone (the others) and warps with two pairs (2,16,40).
    { "p9 d4 shape 3,8,4", 9, 4, "3,8,4" },
    // The widest block: 32 warps of 1024 threads (a last row alone at patch 11).
    { "p11 d4 shape 32,16,3", 11, 4, "32,16,3" },
  };
  const auto floats = Image<F3>({ 45, 37, 29 }, 1, 91);
  const auto doubles = Image<D3>({ 33, 26, 23 }, 1, 92);
  const auto colors = Image<VF3>({ 21, 19, 14 }, 3, 93);
  for (const auto & c : cases)
  {
    SetEnv("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", c.forced);
    const Params params{ c.patch, c.distance, 0.1, 0.05 };
    auto         check = [&](const auto * input, const Params & p, const std::string & what) {
      ExpectTheCPUBackendsOutputFrom(input, p, "buffered weights", std::string(c.name) + ", " + what);
    };
    check(floats.GetPointer(), params, "float");
    check(doubles.GetPointer(), params, "double");
    check(doubles.GetPointer(), With<3>(params, doubles.GetPointer(), true, false, false, 94), "double, Rician");
    SetEnv("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "1");
    check(colors.GetPointer(), params, "3-channel float (forced)");
    ExpectTheSameSinglePrecisionOutputWith(
      floats.GetPointer(),
      params,
      { { "CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "0" }, { "CUDANONLOCALMEANS_SHARED_ROWS", "8,16,1" } },
      "buffered weights",
      "shared rows",
      c.name);
  }
  SetEnv("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", nullptr);
  // A mask leaves the planner to the other kernels.
  const Params masked = With<3>({ 7, 11, 0.1, 0.05 }, doubles.GetPointer(), false, false, true, 95);
  ExpectTheCPUBackendsOutputFrom(doubles.GetPointer(), masked, "shared rows", "p7 d11 mask", "buffered");
  // Slabs along axis 2 (whole blocks of the weights pass: 64 planes, since 128 do not fit the budget).
  const auto deep = Image<F3>({ 40, 30, 150 }, 1, 96);
  Params     slabs{ 5, 7, 0.1, 0.05 };
  slabs.memory = 30000000;
  ExpectTheCPUBackendsOutputFrom(deep.GetPointer(), slabs, "buffered weights", "40x30x150 in slabs", " 1 slab(s)");
  // Rows longer than a block of the gather (128 voxels along axis 0, a thread's voxels 32 apart) and
  // not whole blocks, so that some threads have voxels on both sides of the row's end.
  const auto wide = Image<D3>({ 173, 9, 8 }, 1, 97);
  SetEnv("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", "1");
  ExpectTheCPUBackendsOutputFrom(wide.GetPointer(), Params{ 7, 4, 0.1, 0.05 }, "buffered weights", "173x9x8 p7 d4");
  ExpectTheCPUBackendsOutputFrom(wide.GetPointer(),
                                 With<3>({ 5, 3, 0.1, 0.05 }, wide.GetPointer(), true, false, false, 98),
                                 "buffered weights",
                                 "173x9x8 p5 d3 Rician");
  SetEnv("CUDANONLOCALMEANS_BUFFERED_WEIGHTS", nullptr);
}

TEST(CudaNonLocalMeansGPU, TheExtensionsEqualTheCPUBackendBitwise)
{
  // Rician, noise maps and masks (contract section 6) on the tiled and the column kernel, in 2D,
  // 3D and 4D, with channels, integer input, slabs, streaming and two devices.
  {
    const auto image = Image<F2>({ 67, 45 }, 1, 41);
    Compare("2D float p7 d5 Rician", image.GetPointer(), With<2>({ 7, 5, 0.1, 0.05 }, image, true, false, false, 42));
    Compare("2D float p7 d5 map, mask", image.GetPointer(), With<2>({ 7, 5, 0.1, 0.0 }, image, false, true, true, 43));
  }
  {
    const auto image = Image<VD2>({ 40, 35 }, 3, 44);
    Compare("2D RGB double p3 d5 Rician, map, mask",
            image.GetPointer(),
            With<2>({ 3, 5, 0.1, 0.0 }, image, true, true, true, 45));
  }
  {
    const auto image = Image<F3>({ 33, 27, 19 }, 1, 46);
    Compare("3D float p3 d3 Rician, mask (column kernel)",
            image.GetPointer(),
            With<3>({ 3, 3, 0.1, 0.1 }, image, true, false, true, 47));
    Compare("3D float p3 d3 Rician, map, mask (tiled kernel)",
            image.GetPointer(),
            With<3>({ 3, 3, 0.1, 0.0 }, image, true, true, true, 48));
    Params slabs = With<3>({ 3, 3, 0.1, 0.0 }, image, true, true, true, 49);
    slabs.memory = 2400000; // two slabs of the tiled kernel, shared by the two devices
    slabs.streams = 3;
    slabs.devices = { 0, 0 };
    Compare("3D float p3 d3 Rician, map, mask, slabs, 3 streams, 2 devices", image.GetPointer(), slabs);
  }
  {
    const auto image = Image<D3>({ 29, 23, 18 }, 1, 50);
    Compare("3D double p5 d2 map, mask", image.GetPointer(), With<3>({ 5, 2, 0.2, 0.0 }, image, false, true, true, 51));
    Compare("3D double p7 d11 Rician, map, mask",
            image.GetPointer(),
            With<3>({ 7, 11, 0.1, 0.0 }, image, true, true, true, 52));
  }
  {
    const auto image = Image<U3>({ 24, 21, 18 }, 1, 53, 255.0);
    Compare<U3, D3>("3D uint8 -> double p3 d2 Rician, mask",
                    image.GetPointer(),
                    With<3>({ 3, 2, 25.0, 10.0 }, image, true, false, true, 54));
  }
  {
    const auto image = Image<VF3>({ 19, 22, 17 }, 3, 55);
    Compare("3D 3-channel float p3 d2 Rician, map",
            image.GetPointer(),
            With<3>({ 3, 2, 0.12, 0.0 }, image, true, true, false, 56));
  }
  {
    const auto image = Image<D4>({ 9, 8, 7, 6 }, 1, 57);
    Compare("4D double p3 d2 Rician, map, mask",
            image.GetPointer(),
            With<4>({ 3, 2, 0.1, 0.0 }, image, true, true, true, 58));
  }
  {
    // Single precision with the extensions: close to float64.
    const auto image = Image<D3>({ 30, 26, 20 }, 1, 59);
    Params     p = With<3>({ 5, 3, 0.12, 0.0 }, image, true, true, true, 60);
    const auto f64 = Compute<D3>(image.GetPointer(), p, BackendEnum::CUDA);
    p.single = true;
    const auto                        f32 = Compute<D3>(image.GetPointer(), p, BackendEnum::CUDA);
    double                            worst = 0.0;
    itk::ImageRegionConstIterator<D3> a(f64, f64->GetLargestPossibleRegion()), b(f32, f32->GetLargestPossibleRegion());
    for (; !a.IsAtEnd(); ++a, ++b)
    {
      worst = std::max(worst, std::abs(a.Get() - b.Get()));
    }
    std::cout << "single precision with Rician, map, mask: max |f32 - f64| = " << worst << std::endl;
    Check(worst < 1e-4, "single precision with the extensions is within 1e-4 of float64");
  }
}

TEST(CudaNonLocalMeansGPU, PerAxisRadiiEqualTheCPUBackendBitwise)
{
  // Anisotropic patches and search windows (contract 6.4) on the tiled kernel, 2D to 4D, with the
  // other extensions, slabs, streaming and two devices.
  const auto axes = [](Params p, std::vector<int> patch, std::vector<int> search) {
    p.patchRadius = patch;
    p.searchRadius = search;
    return p;
  };
  Compare("2D float radius (2, 1), search (1, 4)",
          Image<F2>({ 47, 39 }, 1, 91).GetPointer(),
          axes({ 3, 1, 0.12, 0.05 }, { 2, 1 }, { 1, 4 }));
  Compare("2D RGB double radius (1, 3), search (5, 0)",
          Image<VD2>({ 33, 30 }, 3, 92).GetPointer(),
          axes({ 3, 1, 0.1, 0.02 }, { 1, 3 }, { 5, 0 }));
  {
    const auto image = Image<F3>({ 37, 29, 23 }, 1, 93);
    Compare("3D float radius (1, 1, 3), search (3, 3, 1) (microscopy)",
            image.GetPointer(),
            axes({ 3, 1, 0.1, 0.05 }, { 1, 1, 3 }, { 3, 3, 1 }));
    Compare("3D float radius (1, 1, 1), search (4, 4, 2), Rician, map, mask",
            image.GetPointer(),
            axes(With<3>({ 3, 1, 0.1, 0.0 }, image, true, true, true, 94), { 1, 1, 1 }, { 4, 4, 2 }));
    Params slabs = axes(With<3>({ 3, 1, 0.1, 0.05 }, image, true, false, true, 95), { 2, 1, 1 }, { 1, 3, 2 });
    slabs.memory = 1500000;
    slabs.streams = 3;
    slabs.devices = { 0, 0 };
    Compare("3D float radius (2, 1, 1), search (1, 3, 2), Rician, mask, slabs, 3 streams, 2 devices",
            image.GetPointer(),
            slabs);
  }
  Compare("3D double radius (3, 2, 1), distance 2",
          Image<D3>({ 25, 22, 19 }, 1, 96).GetPointer(),
          axes({ 3, 2, 0.2, 0.0 }, { 3, 2, 1 }, {}));
  Compare("4D double radius (1, 1, 1, 2), search (2, 1, 1, 1)",
          Image<D4>({ 9, 8, 7, 6 }, 1, 97).GetPointer(),
          axes({ 3, 1, 0.15, 0.05 }, { 1, 1, 1, 2 }, { 2, 1, 1, 1 }));
}

TEST(CudaNonLocalMeansGPU, UploadsInPiecesAndLaunchesOfFewTilesChangeNoBit)
{
  // Uploads in pieces of a few planes (the piece follows the staging chunk, forced small here): the
  // padding starts piece by piece. Staged in many chunks per piece, one plane per piece, and two
  // pieces not staged (the whole transfer smaller than two chunks).
  SetEnv("CUDANONLOCALMEANS_STAGING_CHUNK", "3000");
  Compare("2D float two unstaged pieces", Image<F2>({ 30, 40 }, 1, 29).GetPointer(), { 3, 4, 0.1, 0.05 });
  Compare("2D RGB double pieces of 3 rows", Image<VD2>({ 40, 35 }, 3, 30).GetPointer(), { 5, 4, 0.1, 0.02 });
  Compare(
    "4D 2-channel float one plane per piece", Image<VF4>({ 7, 6, 6, 5 }, 2, 31).GetPointer(), { 3, 1, 0.15, 0.1 });
  // Kernel launches of a few tiles each (forced): the later chunks wait for later pieces, and the
  // output planes of the first chunks are downloaded while the others run, in pieces of at most
  // four staging chunks in whole planes (in the 3D cases two planes, where a layer of tiles finishes
  // four). They alternate between two kernel streams (each waits for the padding it reads), or take
  // one when asked.
  SetEnv("CUDANONLOCALMEANS_CHUNK_TILES", "3");
  SetEnv("CUDANONLOCALMEANS_KERNEL_STREAMS", "1");
  Compare("3D float column kernel, chunks of 3 tiles on one stream, one plane per piece",
          Image<F3>({ 37, 29, 71 }, 1, 37).GetPointer(),
          { 3, 3, 0.1, 0.05 });
  SetEnv("CUDANONLOCALMEANS_KERNEL_STREAMS", nullptr);
  Compare(
    "2D float chunks of 3 tiles, pieces of 24 rows", Image<F2>({ 30, 90 }, 1, 35).GetPointer(), { 3, 4, 0.1, 0.05 });
  Compare("4D float chunks of 3 tiles, one plane per piece",
          Image<F4>({ 10, 9, 8, 7 }, 1, 36).GetPointer(),
          { 5, 1, 0.2, 0.0 });
  Compare("3D float column kernel, chunks of 3 tiles, one plane per piece",
          Image<F3>({ 37, 29, 71 }, 1, 37).GetPointer(),
          { 3, 3, 0.1, 0.05 });
  SetEnv("CUDANONLOCALMEANS_COLUMNS", "0");
  Compare("3D float tiled kernel, chunks of 3 tiles, one plane per piece",
          Image<F3>({ 37, 29, 71 }, 1, 37).GetPointer(),
          { 3, 3, 0.1, 0.05 });
  SetEnv("CUDANONLOCALMEANS_COLUMNS", nullptr);
  SetEnv("CUDANONLOCALMEANS_CHUNK_TILES", "1");
  Compare("3D double p5 d2 chunks of one tile", Image<D3>({ 24, 21, 30 }, 1, 38).GetPointer(), { 5, 2, 0.1, 0.05 });
  SetEnv("CUDANONLOCALMEANS_CHUNK_TILES", nullptr);
  SetEnv("CUDANONLOCALMEANS_STAGING_CHUNK", "64");
  Compare(
    "3D float one plane per piece, 56 chunks each", Image<F3>({ 33, 27, 19 }, 1, 32).GetPointer(), { 3, 3, 0.1, 0.1 });
  Compare("3D double p5 d2 in pieces", Image<D3>({ 24, 21, 30 }, 1, 33).GetPointer(), { 5, 2, 0.1, 0.05 });
  SetEnv("CUDANONLOCALMEANS_STAGING_CHUNK", nullptr);
}

TEST(CudaNonLocalMeansGPU, ANonFiniteInputValueIsReportedAsByTheCPUBackend)
{
  // A value that is not finite, found by the check fused into the staged upload (first, middle and
  // last piece) or by the separate pass (not staged): the same exception as the CPU backend's.
  for (const char * chunk : { "3000", "64", "100000000" })
  {
    SetEnv("CUDANONLOCALMEANS_STAGING_CHUNK", chunk);
    for (const itk::IndexValueType z : { 0, 35, 70 })
    {
      const auto input = Image<F3>({ 37, 29, 71 }, 1, 34);
      input->SetPixel({ { 5, 28, z } },
                      z == 35 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN());
      std::string messages[2];
      int         index = 0;
      for (auto backend : { BackendEnum::CPU, BackendEnum::CUDA })
      {
        try
        {
          Compute(input.GetPointer(), { 3, 3, 0.1, 0.05 }, backend);
          messages[index] = "no exception";
        }
        catch (const itk::ExceptionObject & e)
        {
          messages[index] = e.GetDescription();
        }
        ++index;
      }
      Check(messages[0] == messages[1] && messages[1].find("non-finite") != std::string::npos,
            std::string("non-finite input, staging chunk ") + chunk + ", plane " + std::to_string(z) +
              ": CUDA says \"" + messages[1] + "\" like the CPU backend");
    }
  }
  SetEnv("CUDANONLOCALMEANS_STAGING_CHUNK", nullptr);
}

TEST(CudaNonLocalMeansGPU, TileShapesSlabSplitsAndStreamingChangeNoBit)
{
  // Independence of the tile shape, the slab split and streaming.
  {
    const auto input = Image<F3>({ 37, 29, 71 }, 1, 21);
    const auto cpu = Compute(input.GetPointer(), { 3, 3, 0.1, 0.05 }, BackendEnum::CPU);
    // The CUDA result with an environment variable set equals the CPU result, and the configuration
    // used mentions `expected`.
    auto sameWith = [&](const char * variable, const char * value, const std::string & what, const char * expected) {
      const char *      previous = std::getenv(variable);
      const std::string saved = previous ? previous : "";
      SetEnv(variable, value);
      std::string info;
      F3::Pointer gpu;
      try
      {
        gpu = Compute(input.GetPointer(), { 3, 3, 0.1, 0.05 }, BackendEnum::CUDA, &info);
      }
      catch (...)
      {
        SetEnv(variable, previous ? saved.c_str() : nullptr);
        throw;
      }
      SetEnv(variable, previous ? saved.c_str() : nullptr);
      Check(itk::nlm_test::CountDifferences(
              cpu.GetPointer(), gpu.GetPointer(), input->GetLargestPossibleRegion(), what) == 0 &&
              info.find(expected) != std::string::npos,
            what + " (" + info + ") == CPU");
    };
    for (const char * tile : { "28,8,8,1,448,2,2",
                               "16,16,8,1,256,1",
                               "28,16,8,1,896,4",
                               "8,8,4,1,128,2,3",
                               "32,8,4,1,128,1",
                               "4,4,4,1,32,1" })
    {
      sameWith("CUDANONLOCALMEANS_TILE", tile, std::string("forced tile ") + tile, "z-segments");
    }
    // The column kernel (the default in 3D) with forced shapes: rows, planes, warps, blocks.
    for (const char * columns : { "1,8,8,1", "2,8,4,2", "2,4,8,1", "1,16,4,2", "3,4,2,1", "4,2,1,3" })
    {
      sameWith("CUDANONLOCALMEANS_COLUMNS", columns, std::string("forced columns ") + columns, "columns");
    }
    sameWith("CUDANONLOCALMEANS_COLUMNS", "0", "tiled kernel chosen in 3D", "z-segments");
    // From patch 5 on at small distances the tiled kernel is the default; the column kernel still
    // serves these patches when its shape is forced.
    for (int patch : { 5, 7, 11 })
    {
      const Params      params{ patch, 2, 0.1, 0.05 };
      const auto        cpuPatch = Compute(input.GetPointer(), params, BackendEnum::CPU);
      const std::string what = "patch " + std::to_string(patch);
      for (const char * columns : { static_cast<const char *>(nullptr), "1,4,4,1" })
      {
        SetEnv("CUDANONLOCALMEANS_COLUMNS", columns);
        std::string info;
        const auto  gpu = Compute(input.GetPointer(), params, BackendEnum::CUDA, &info);
        SetEnv("CUDANONLOCALMEANS_COLUMNS", nullptr);
        const char * expected = columns ? "columns" : "z-segments";
        Check(itk::nlm_test::CountDifferences(
                cpuPatch.GetPointer(), gpu.GetPointer(), input->GetLargestPossibleRegion(), what) == 0 &&
                info.find(expected) != std::string::npos,
              what + " (" + info + ") == CPU");
      }
    }
    // Lower the memory budget until the volume no longer fits in one slab, then further.
    int multiSlabRuns = 0;
    for (itk::SizeValueType memory = 4000000; memory > 50000; memory = memory * 2 / 3)
    {
      Params p{ 3, 3, 0.1, 0.05 };
      p.memory = memory;
      std::string  info;
      unsigned int slabs = 0;
      F3::Pointer  gpu;
      try
      {
        gpu = Compute(input.GetPointer(), p, BackendEnum::CUDA, &info, &slabs);
      }
      catch (const itk::ExceptionObject & e)
      {
        std::cout << "MaximumGPUMemory " << memory << ": " << e.GetDescription() << std::endl;
        break;
      }
      multiSlabRuns += (slabs > 1) ? 1 : 0;
      Check(itk::nlm_test::CountDifferences(
              cpu.GetPointer(), gpu.GetPointer(), input->GetLargestPossibleRegion(), "slabs") == 0,
            "MaximumGPUMemory " + std::to_string(memory) + " (" + info + ") == CPU");
    }
    Check(multiSlabRuns >= 2, std::to_string(multiSlabRuns) + " runs split into several slabs");
    // Copies staged through page-locked buffers in many chunks (small chunks forced), also with slabs.
    SetEnv("CUDANONLOCALMEANS_STAGING_CHUNK", "3000");
    for (itk::SizeValueType memory : { 0, 600000 })
    {
      Params p{ 3, 3, 0.1, 0.05 };
      p.memory = memory;
      std::string  info;
      unsigned int slabs = 0;
      const auto   gpu = Compute(input.GetPointer(), p, BackendEnum::CUDA, &info, &slabs);
      Check(itk::nlm_test::CountDifferences(
              cpu.GetPointer(), gpu.GetPointer(), input->GetLargestPossibleRegion(), "staged") == 0,
            "staged copies in 3000-byte chunks, " + std::to_string(slabs) + " slab(s) (" + info + ") == CPU");
    }
    SetEnv("CUDANONLOCALMEANS_STAGING_CHUNK", nullptr);
    for (unsigned int streams : { 3u, 7u })
    {
      Params p{ 3, 3, 0.1, 0.05 };
      p.streams = streams;
      const auto gpu = Compute(input.GetPointer(), p, BackendEnum::CUDA);
      Check(itk::nlm_test::CountDifferences(
              cpu.GetPointer(), gpu.GetPointer(), input->GetLargestPossibleRegion(), "streams") == 0,
            std::to_string(streams) + " stream divisions on CUDA == CPU whole image");
    }
    Params tooSmall{ 3, 3, 0.1, 0.05 };
    tooSmall.memory = 1000;
    EXPECT_THROW(Compute(input.GetPointer(), tooSmall, BackendEnum::CUDA), itk::ExceptionObject);
  }
}

TEST(CudaNonLocalMeansGPU, RepeatedUpdatesAndConcurrentFiltersChangeNoBit)
{
  // Repeated Updates and several filters alive at once, also updated from several threads.
  {
    using FilterType = itk::CudaNonLocalMeansImageFilter<F3>;
    const auto a = Image<F3>({ 30, 26, 22 }, 1, 22);
    const auto b = Image<F3>({ 25, 31, 20 }, 1, 23);
    auto       fa = FilterType::New();
    auto       fb = FilterType::New();
    fa->SetInput(a);
    fb->SetInput(b);
    fa->SetPatchSize(3);
    fa->SetPatchDistance(3);
    fb->SetPatchSize(5);
    fb->SetPatchDistance(2);
    fa->SetBackend(BackendEnum::CUDA);
    fb->SetBackend(BackendEnum::CUDA);
    const auto refA = Compute(a.GetPointer(), { 3, 3, 0.1, 0.0 }, BackendEnum::CPU);
    const auto refB = Compute(b.GetPointer(), { 5, 2, 0.1, 0.0 }, BackendEnum::CPU);
    bool       same = true;
    for (int i = 0; i < 3; ++i)
    {
      fa->Modified();
      fa->Update();
      fb->Modified();
      fb->Update();
      same =
        same &&
        itk::nlm_test::CountDifferences(refA.GetPointer(), fa->GetOutput(), a->GetLargestPossibleRegion(), "A") == 0 &&
        itk::nlm_test::CountDifferences(refB.GetPointer(), fb->GetOutput(), b->GetLargestPossibleRegion(), "B") == 0;
    }
    Check(same, "two filters, three interleaved Updates each == CPU");
    std::vector<F3::Pointer> outputs(4);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < outputs.size(); ++i)
    {
      threads.emplace_back([&, i] {
        outputs[i] = Compute(
          (i % 2 ? b : a).GetPointer(), i % 2 ? Params{ 5, 2, 0.1, 0.0 } : Params{ 3, 3, 0.1, 0.0 }, BackendEnum::CUDA);
      });
    }
    for (auto & t : threads)
    {
      t.join();
    }
    bool threadedSame = true;
    for (size_t i = 0; i < outputs.size(); ++i)
    {
      threadedSame = threadedSame && itk::nlm_test::CountDifferences(i % 2 ? refB.GetPointer() : refA.GetPointer(),
                                                                     outputs[i].GetPointer(),
                                                                     (i % 2 ? b : a)->GetLargestPossibleRegion(),
                                                                     "thread") == 0;
    }
    Check(threadedSame, "four filters updated from four threads at once == CPU");
  }
}

TEST(CudaNonLocalMeansGPU, ClassicModeEqualsTheCPUBackendBitwise)
{
  // Slow mode on the classic kernel, where scikit-image has it (2D with any channels, 3D with one),
  // float and double, with the Rician model and a mask, in slabs and streamed.
  const auto slow = [](Params p) {
    p.fast = false;
    return p;
  };
  Compare("2D float slow p5 d3", Image<F2>({ 30, 28 }, 1, 24).GetPointer(), slow({ 5, 3, 0.15, 0.05 }));
  Compare("2D double slow p7 d5", Image<D2>({ 41, 37 }, 1, 61).GetPointer(), slow({ 7, 5, 0.2, 0.02 }));
  Compare("2D float slow p4 d2 tiny h (the NaN hazard)",
          Image<F2>({ 20, 17 }, 1, 62).GetPointer(),
          slow({ 4, 2, 0.004, 0.0 }));
  Compare("2D RGB float slow p3 d4", Image<VF2>({ 35, 33 }, 3, 63).GetPointer(), slow({ 3, 4, 0.1, 0.05 }));
  Compare("2D RGB double slow p5 d2", Image<VD2>({ 26, 29 }, 3, 64).GetPointer(), slow({ 5, 2, 0.12, 0.0 }));
  Compare("3D float slow p3 d2", Image<F3>({ 23, 19, 17 }, 1, 65).GetPointer(), slow({ 3, 2, 0.12, 0.05 }));
  Compare("3D double slow p5 d3", Image<D3>({ 19, 21, 15 }, 1, 66).GetPointer(), slow({ 5, 3, 0.2, 0.0 }));
  Compare<U3, D3>(
    "3D uint8 -> double slow p3 d2", Image<U3>({ 20, 18, 13 }, 1, 67, 255.0).GetPointer(), slow({ 3, 2, 30.0, 8.0 }));
  {
    const auto image = Image<F3>({ 27, 23, 21 }, 1, 68);
    Params     p = slow(With<3>({ 3, 3, 0.1, 0.05 }, image, true, false, true, 69));
    Compare("3D float slow p3 d3 Rician, mask", image.GetPointer(), p);
    p.memory = 400000; // slabs of one tile layer, shared by the two devices
    p.streams = 2;
    p.devices = { 0, 0 };
    Compare("3D float slow p3 d3 Rician, mask, slabs, 2 streams, 2 devices", image.GetPointer(), p);
  }
  {
    const auto image = Image<VD2>({ 31, 26 }, 3, 70);
    Compare("2D RGB double slow p5 d3 Rician, mask",
            image.GetPointer(),
            slow(With<2>({ 5, 3, 0.15, 0.04 }, image, true, false, true, 71)));
  }
}

TEST(CudaNonLocalMeansGPU, ProgressIsOrderedAndAbortStopsTheUpdate)
{
  // Progress and abort on the GPU.
  {
    using FilterType = itk::CudaNonLocalMeansImageFilter<F3>;
    const auto input = Image<F3>({ 192, 192, 192 }, 1, 25);
    auto       filter = FilterType::New();
    filter->SetInput(input);
    filter->SetPatchSize(5);
    filter->SetPatchDistance(5);
    filter->SetBackend(BackendEnum::CUDA);
    itk::nlm_test::CheckProgressAndAbort(filter.GetPointer(), 5, Check);
  }
}

TEST(CudaNonLocalMeansGPU, SinglePrecisionIsCloseToFloat64)
{
  // Opt-in single precision: close to the float64 result, not bitwise.
  {
    const auto input = Image<D3>({ 40, 36, 32 }, 1, 26);
    Params     p{ 3, 3, 0.1, 0.05 };
    const auto ref = Compute(input.GetPointer(), p, BackendEnum::CPU);
    p.single = true;
    std::string                       info;
    const auto                        single = Compute(input.GetPointer(), p, BackendEnum::CUDA, &info);
    double                            maxDiff = 0.0;
    itk::ImageRegionConstIterator<D3> ir(ref, ref->GetLargestPossibleRegion());
    itk::ImageRegionConstIterator<D3> is(single, single->GetLargestPossibleRegion());
    for (; !ir.IsAtEnd(); ++ir, ++is)
    {
      maxDiff = std::max(maxDiff, std::abs(ir.Get() - is.Get()));
    }
    std::cout << "single precision (" << info << "): max |diff| to float64 = " << maxDiff << std::endl;
    Check(maxDiff < 1e-4, "single precision within 1e-4 of float64");
  }
}

TEST(CudaNonLocalMeansGPU, AutoComputesOnTheCPUWhatTheCUDABackendRefuses)
{
  // Auto never fails where the CPU can compute: a memory budget too small for one slab is refused
  // by the CUDA backend on every device.
  {
    Params tiny{ 3, 2, 0.1, 0.05 };
    tiny.memory = 1;
    Check(CheckAuto("3D float, MaximumGPUMemory 1 byte, Auto", Image<F3>({ 24, 22, 20 }, 1, 32).GetPointer(), tiny),
          "a memory budget of 1 byte is refused by the CUDA backend");
    Check(CheckAuto("2D RGB double p5 d4, Auto", Image<VD2>({ 40, 35 }, 3, 6).GetPointer(), { 5, 4, 0.1, 0.02 }) ==
            false,
          "where the CUDA backend can compute, Auto uses it");
    // A search window beyond the block's shared memory (3D patch 3, distance 22 on an H200): Auto
    // computes it on the CPU (a few seconds on this tiny image), bitwise the CPU backend's.
    CheckAuto("3D float p3 d22, Auto", Image<F3>({ 4, 4, 4 }, 1, 41).GetPointer(), { 3, 22, 0.1, 0.0 });
  }
}


TEST(CudaNonLocalMeansGPU, ACachedModuleTheDriverCannotLoadIsCompiledAgain)
{
  // A disk cache entry that passes every check (key, length, hash, ELF header) but holds code for
  // another architecture: the driver refuses it, the entry is removed, compiled again and stored,
  // and the output is the CPU backend's.
  std::string                 why;
  itk::nlm::CUDADevice *      device = itk::nlm::CUDADevice::Get(why);
  const itk::cuda::NvrtcAPI * nvrtc = itk::cuda::GetNvrtc(why);
  ASSERT_NE(device, nullptr) << why;
  ASSERT_NE(nvrtc, nullptr) << why;
  char folder[] = "/tmp/nlm-gpu-cache-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const itk::nlm::Overrides saved = itk::nlm::GetOverrides();
  itk::nlm::Overrides       o = saved;
  o.KernelCacheDirectory = folder;
  o.TileShape = { 8, 8, 1, 1, 32, 1, 1 }; // a configuration no other test loads
  itk::nlm::SetOverrides(o);

  const auto                         input = Image<F2>({ 30, 28 }, 1, 40);
  const Params                       p{ 3, 1, 0.1, 0.05 };
  itk::NonLocalMeansBackend::Problem problem;
  problem.Dimension = 2;
  for (unsigned int a = 0; a < 2; ++a)
  {
    problem.ImageSize[a] = problem.InputSize[a] = problem.OutputSize[a] = (a == 0) ? 30 : 28;
  }
  problem.InputType = problem.OutputType = itk::NonLocalMeansBackend::ElementType::Float32;
  problem.PatchSize = p.patchSize;
  problem.PatchDistance = p.distance;
  problem.H = p.h;
  problem.Sigma = p.sigma;
  const itk::nlm::DeviceLimits limits;
  const auto config = itk::nlm::PlanSlabs(problem, itk::nlm::ChooseConfiguration(problem, limits, o), limits).Config;
  const int  arch = device->Architecture();
  const auto good = itk::nlm::CompileKernel(*nvrtc, config, arch);
  ASSERT_FALSE(good.CachePath.empty());
  const auto other = itk::nlm::CompileKernel(*nvrtc, config, arch >= 90 ? 80 : 90); // another architecture
  ASSERT_FALSE(other.IsPTX);
  // The entry of `arch`, with the other architecture's image under a header that matches it.
  const std::string entry = itk::nlm_test::ReadFile(good.CachePath);
  const std::size_t line = entry.rfind("\nC ", entry.size() - good.Image.size());
  ASSERT_NE(line, std::string::npos);
  itk::nlm_test::WriteFile(good.CachePath,
                           entry.substr(0, line + 1) + "C " + std::to_string(other.Image.size()) + ' ' +
                             itk::nlm::HashHex(std::string(other.Image.begin(), other.Image.end())) + "\n" +
                             std::string(other.Image.begin(), other.Image.end()));

  using FilterType = itk::CudaNonLocalMeansImageFilter<F2>;
  auto filter = FilterType::New();
  filter->SetInput(input);
  Configure(filter.GetPointer(), p, BackendEnum::CUDA);
  EXPECT_NO_THROW(filter->Update());
  EXPECT_TRUE(filter->GetBackendStatistics().KernelFromDiskCache == false);
  EXPECT_TRUE(filter->GetBackendStatistics().KernelCacheRepaired);
  const auto cpu = Compute<F2>(input.GetPointer(), p, BackendEnum::CPU);
  EXPECT_EQ(itk::nlm_test::CountDifferences(
              cpu.GetPointer(), filter->GetOutput(), input->GetLargestPossibleRegion(), "healed cache"),
            0u);
  const auto reread = itk::nlm::CompileKernel(*nvrtc, config, arch);
  EXPECT_TRUE(reread.FromDiskCache) << "the entry was stored again";
  EXPECT_EQ(reread.Image, good.Image);
  itk::nlm::SetOverrides(saved);
  EXPECT_EQ(std::system((std::string("rm -rf '") + folder + "'").c_str()), 0);
}


TEST(CudaNonLocalMeansGPU, SlabsSharedOutAmongDevicesChangeNoBit)
{
  // One device listed several times runs the multi-device path (one plan, slabs taken in turn by
  // each device's thread, progress and abort from the calling thread): bitwise the CPU's output.
  Params twice{ 3, 3, 0.1, 0.05 };
  twice.devices = { 0, 0 };
  Compare("3D float p3 d3 on device 0 twice", Image<F3>({ 37, 29, 71 }, 1, 42).GetPointer(), twice);
  Params thrice{ 5, 4, 0.1, 0.02 };
  thrice.devices = { 0, 0, 0 };
  Compare("2D RGB double p5 d4 on device 0 three times", Image<VD2>({ 40, 95 }, 3, 43).GetPointer(), thrice);
  Params fourD{ 3, 2, 0.1, 0.05 };
  fourD.devices = { 0, 0 };
  Compare("4D double p3 d2 on device 0 twice", Image<D4>({ 9, 8, 7, 12 }, 1, 44).GetPointer(), fourD);
  Params slabs{ 3, 3, 0.1, 0.05 };
  slabs.devices = { 0, 0 };
  slabs.memory = 1500000; // several slabs per device (half the budget each)
  unsigned int count = 0;
  Compute<F3>(Image<F3>({ 37, 29, 71 }, 1, 45).GetPointer(), slabs, BackendEnum::CUDA, nullptr, &count);
  Check(count >= 4, "a small budget gives several slabs per device (" + std::to_string(count) + ")");
  Compare("3D float p3 d3, small budget, device 0 twice", Image<F3>({ 37, 29, 71 }, 1, 45).GetPointer(), slabs);
  Params streamed = twice;
  streamed.streams = 3;
  Compare("3D float p3 d3 streamed, device 0 twice", Image<F3>({ 37, 29, 71 }, 1, 46).GetPointer(), streamed);

  // Progress and abort through the calling thread.
  using FilterType = itk::CudaNonLocalMeansImageFilter<F3>;
  auto filter = FilterType::New();
  filter->SetInput(Image<F3>({ 160, 160, 160 }, 1, 47));
  filter->SetPatchSize(5);
  filter->SetPatchDistance(5);
  filter->SetBackend(BackendEnum::CUDA);
  filter->SetDevices({ 0, 0 });
  itk::nlm_test::CheckProgressAndAbort(filter.GetPointer(), 3, Check);

  // A device that does not exist: Backend CUDA names it; Auto computes on the CPU.
  Params missing{ 3, 2, 0.1, 0.05 };
  missing.devices = { 0, 99 };
  try
  {
    Compute<F3>(Image<F3>({ 20, 18, 16 }, 1, 48).GetPointer(), missing, BackendEnum::CUDA);
    Check(false, "device 99 is refused");
  }
  catch (const itk::ExceptionObject & e)
  {
    Check(std::string(e.GetDescription()).find("cannot use device 99") != std::string::npos,
          std::string("device 99 is refused: ") + e.GetDescription());
  }
  CheckAuto("3D float on devices 0 and 99, Auto", Image<F3>({ 20, 18, 16 }, 1, 48).GetPointer(), missing);
}

/** Runs the tests, or exits 77 (CTest's skip) where no usable CUDA backend exists. */
int
main(int argc, char * argv[])
{
  std::string whyNot;
  if (!itk::NonLocalMeansBackendSelection::CUDAIsUsable(whyNot))
  {
    std::cout << "Skipped: no usable CUDA backend (" << whyNot << ")" << std::endl;
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
