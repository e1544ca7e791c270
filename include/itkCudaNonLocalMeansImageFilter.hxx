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
#ifndef itkCudaNonLocalMeansImageFilter_hxx
#define itkCudaNonLocalMeansImageFilter_hxx

#include "itkCudaNonLocalMeansImageFilter.h"
#include "itkNonLocalMeansBackendSelection.h"
#include "itkDefaultConvertPixelTraits.h"
#include "itkImageRegionConstIterator.h"
#include "itkImageRegionIterator.h"
#include "itkImageRegionConstIteratorWithIndex.h"
#include "itkImage.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

namespace itk
{
namespace nlm_detail
{
/** Whether an image's buffer is a plain array of its pixel components (scalar images,
 * VectorImage, and fixed-size pixels such as Vector or RGBPixel with no padding). */
template <typename TImage>
bool
BufferIsComponentArray(const TImage * image)
{
  using PixelType = typename TImage::PixelType;
  using InternalPixelType = typename TImage::InternalPixelType;
  using ComponentType = typename NumericTraits<PixelType>::ValueType;
  if (std::is_same<InternalPixelType, ComponentType>::value)
  {
    return true;
  }
  return std::is_same<InternalPixelType, PixelType>::value &&
         sizeof(PixelType) == image->GetNumberOfComponentsPerPixel() * sizeof(ComponentType);
}

template <typename T>
constexpr bool IsFloatOrDouble = std::is_same<T, float>::value || std::is_same<T, double>::value;

template <typename T>
constexpr NonLocalMeansBackend::ElementType ElementTypeOf =
  std::is_same<T, float>::value ? NonLocalMeansBackend::ElementType::Float32
                                : NonLocalMeansBackend::ElementType::Float64;

/** Converts a computed value to an output component: plain conversion for floating point, round to
 * nearest (ties to even) and clamp for integers. */
template <typename TComponent>
TComponent
ConvertResult(double value)
{
  if (std::is_floating_point<TComponent>::value)
  {
    return static_cast<TComponent>(value);
  }
  if (std::isnan(value))
  {
    return TComponent{};
  }
  const double rounded = std::nearbyint(value);
  const double lowest = static_cast<double>(std::numeric_limits<TComponent>::lowest());
  const double highest = static_cast<double>(std::numeric_limits<TComponent>::max());
  if (rounded <= lowest)
  {
    return std::numeric_limits<TComponent>::lowest();
  }
  if (rounded >= highest)
  {
    return std::numeric_limits<TComponent>::max();
  }
  return static_cast<TComponent>(rounded);
}

/** The mask's pixels over `region` as bytes (1: compute, 0: keep the input) when it is an
 * itk::Image of TPixel; false otherwise. */
template <typename TPixel, unsigned int VDimension>
bool
ReadMaskAs(const ImageBase<VDimension> * base, const ImageRegion<VDimension> & region, std::vector<std::uint8_t> & out)
{
  using ImageType = Image<TPixel, VDimension>;
  const auto * image = dynamic_cast<const ImageType *>(base);
  if (image == nullptr)
  {
    return false;
  }
  out.resize(region.GetNumberOfPixels());
  size_t                              i = 0;
  ImageRegionConstIterator<ImageType> it(image, region);
  for (it.GoToBegin(); !it.IsAtEnd(); ++it)
  {
    out[i++] = (it.Get() != TPixel{}) ? 1 : 0;
  }
  return true;
}

/** The mask's pixels over `region` as bytes, for a mask of any integer pixel type. */
template <unsigned int VDimension>
bool
ReadMask(const ImageBase<VDimension> * mask, const ImageRegion<VDimension> & region, std::vector<std::uint8_t> & out)
{
  return ReadMaskAs<unsigned char>(mask, region, out) || ReadMaskAs<bool>(mask, region, out) ||
         ReadMaskAs<signed char>(mask, region, out) || ReadMaskAs<char>(mask, region, out) ||
         ReadMaskAs<unsigned short>(mask, region, out) || ReadMaskAs<short>(mask, region, out) ||
         ReadMaskAs<unsigned int>(mask, region, out) || ReadMaskAs<int>(mask, region, out) ||
         ReadMaskAs<unsigned long>(mask, region, out) || ReadMaskAs<long>(mask, region, out) ||
         ReadMaskAs<unsigned long long>(mask, region, out) || ReadMaskAs<long long>(mask, region, out);
}

/** The mask's pixels over `region` as bytes, for a mask of any integer pixel type: in place for an
 * unsigned char image that holds exactly `region` (the backends treat every non-zero byte alike),
 * else copied into `out`. */
template <unsigned int VDimension>
const std::uint8_t *
MaskBytes(const ImageBase<VDimension> * mask, const ImageRegion<VDimension> & region, std::vector<std::uint8_t> & out)
{
  const auto * bytes = dynamic_cast<const Image<unsigned char, VDimension> *>(mask);
  if (bytes != nullptr && bytes->GetBufferedRegion() == region)
  {
    return bytes->GetBufferPointer();
  }
  return ReadMask(mask, region, out) ? out.data() : nullptr;
}

/** The noise map as doubles, dense over `layout` (the input's buffered region), when it is an
 * itk::Image of TPixel: its pixels over `region` (inside `layout`), 0 elsewhere. */
template <typename TPixel, unsigned int VDimension>
bool
ReadNoiseSigmaAs(const ImageBase<VDimension> *   base,
                 const ImageRegion<VDimension> & region,
                 const ImageRegion<VDimension> & layout,
                 std::vector<double> &           out)
{
  using ImageType = Image<TPixel, VDimension>;
  const auto * image = dynamic_cast<const ImageType *>(base);
  if (image == nullptr)
  {
    return false;
  }
  out.assign(layout.GetNumberOfPixels(), 0.0);
  ImageRegionConstIteratorWithIndex<ImageType> it(image, region);
  for (it.GoToBegin(); !it.IsAtEnd(); ++it)
  {
    size_t offset = 0, stride = 1; // of the pixel in `layout`, axis 0 fastest
    for (unsigned int a = 0; a < VDimension; ++a)
    {
      offset += static_cast<size_t>(it.GetIndex()[a] - layout.GetIndex(a)) * stride;
      stride *= layout.GetSize(a);
    }
    out[offset] = static_cast<double>(it.Get());
  }
  return true;
}

/** Throws, naming the image and what to change, when `image` does not hold `region`. */
template <unsigned int VDimension>
void
VerifyBuffered(const ImageBase<VDimension> * image, const ImageRegion<VDimension> & region, const char * name)
{
  if (!image->GetBufferedRegion().IsInside(region))
  {
    itkGenericExceptionMacro(<< name << " holds the region (index " << image->GetBufferedRegion().GetIndex()
                             << ", size " << image->GetBufferedRegion().GetSize()
                             << "), which does not cover the (index " << region.GetIndex() << ", size "
                             << region.GetSize()
                             << ") that this output needs; connect it through the pipeline or give a fully "
                                "buffered image.");
  }
}
} // namespace nlm_detail

template <typename TInputImage, typename TOutputImage>
CudaNonLocalMeansImageFilter<TInputImage, TOutputImage>::CudaNonLocalMeansImageFilter()
{
  this->AddOptionalInputName("MaskImage");
  this->AddOptionalInputName("NoiseSigmaImage");
}

template <typename TInputImage, typename TOutputImage>
void
CudaNonLocalMeansImageFilter<TInputImage, TOutputImage>::AxisParameters(int * patchSizes, int * distances) const
{
  const InputImageType * input = this->GetInput();
  for (unsigned int a = 0; a < ImageDimension; ++a)
  {
    const double spacing = (input != nullptr) ? std::abs(input->GetSpacing()[a]) : 1.0;
    long         radius = m_PatchRadiusGiven ? static_cast<long>(m_PatchRadius[a]) : this->GetEffectivePatchSize() / 2;
    long         distance = m_SearchRadiusGiven ? static_cast<long>(m_SearchRadius[a]) : m_PatchDistance;
    if (m_PhysicalPatchRadius > 0.0)
    {
      radius = std::max(1L, std::lround(m_PhysicalPatchRadius / spacing));
    }
    if (m_PhysicalSearchRadius > 0.0)
    {
      distance = std::lround(m_PhysicalSearchRadius / spacing);
    }
    patchSizes[a] = static_cast<int>(std::min(radius, 100000L)) * 2 + 1; // VerifyProblem names the limits
    distances[a] = static_cast<int>(std::min(distance, 100000L));
  }
}

template <typename TInputImage, typename TOutputImage>
auto
CudaNonLocalMeansImageFilter<TInputImage, TOutputImage>::AxisRadii(bool search) const -> RadiusType
{
  int        sizes[ImageDimension], distances[ImageDimension];
  RadiusType radius;
  this->AxisParameters(sizes, distances);
  for (unsigned int a = 0; a < ImageDimension; ++a)
  {
    radius[a] = static_cast<SizeValueType>(search ? distances[a] : sizes[a] / 2);
  }
  return radius;
}

template <typename TInputImage, typename TOutputImage>
void
CudaNonLocalMeansImageFilter<TInputImage, TOutputImage>::VerifyInputInformation() ITKv5_CONST
{
  Superclass::VerifyInputInformation();
  const InputImageType * input = this->GetInput();
  if (input == nullptr)
  {
    return;
  }
  const InputImageRegionType & grid = input->GetLargestPossibleRegion();
  if (grid.GetNumberOfPixels() == 0)
  {
    itkExceptionMacro("The input image is empty (size "
                      << grid.GetSize() << "); give an image with at least one pixel along every axis.");
  }
  if (input->GetNumberOfComponentsPerPixel() == 0)
  {
    itkExceptionMacro("The input image has 0 components per pixel; give pixels of at least one component.");
  }
  const std::pair<const ImageBase<ImageDimension> *, const char *> extras[] = {
    { this->GetMaskImage(), "MaskImage" }, { this->GetNoiseSigmaImage(), "NoiseSigmaImage" }
  };
  for (const auto & extra : extras)
  {
    if (extra.first != nullptr && extra.first->GetLargestPossibleRegion() != grid)
    {
      itkExceptionMacro(<< extra.second << " covers (index " << extra.first->GetLargestPossibleRegion().GetIndex()
                        << ", size " << extra.first->GetLargestPossibleRegion().GetSize()
                        << "), but the input covers (index " << grid.GetIndex() << ", size " << grid.GetSize()
                        << "); give a " << extra.second << " on the input's grid (resample it onto the input).");
    }
  }
}

template <typename TInputImage, typename TOutputImage>
void
CudaNonLocalMeansImageFilter<TInputImage, TOutputImage>::VerifyPreconditions() ITKv5_CONST
{
  Superclass::VerifyPreconditions();
  if (ImageDimension < 2 || ImageDimension > NonLocalMeansBackend::MaximumDimension)
  {
    itkExceptionMacro("CudaNonLocalMeansImageFilter supports 2, 3 and 4 dimensional images (as scikit-image "
                      "does); this filter was instantiated for "
                      << ImageDimension << " dimensions.");
  }
  // PatchSize and PatchDistance are not used where per-axis radii replace them.
  NonLocalMeansBackend::VerifyParameters(
    m_PatchRadiusGiven ? 1 : m_PatchSize, m_SearchRadiusGiven ? 0 : m_PatchDistance, m_H, m_Sigma);
  if (!(m_PhysicalPatchRadius >= 0.0) || !std::isfinite(m_PhysicalPatchRadius) || !(m_PhysicalSearchRadius >= 0.0) ||
      !std::isfinite(m_PhysicalSearchRadius))
  {
    itkExceptionMacro("PhysicalPatchRadius is " << m_PhysicalPatchRadius << " and PhysicalSearchRadius "
                                                << m_PhysicalSearchRadius
                                                << "; give finite values of 0 (not used) or more, in the units of "
                                                   "the image's spacing.");
  }
  if (m_Devices.size() > NonLocalMeansBackend::MaximumDevices)
  {
    itkExceptionMacro("Devices names " << m_Devices.size() << " CUDA devices; name at most "
                                       << NonLocalMeansBackend::MaximumDevices << " with SetDevices.");
  }
  for (const int device : m_Devices)
  {
    if (device < 0)
    {
      itkExceptionMacro("Devices holds " << device
                                         << ", which is not a CUDA device ordinal; give 0, 1, ... to "
                                            "SetDevices.");
    }
  }
}

template <typename TInputImage, typename TOutputImage>
void
CudaNonLocalMeansImageFilter<TInputImage, TOutputImage>::GenerateInputRequestedRegion()
{
  Superclass::GenerateInputRequestedRegion();

  auto * input = const_cast<InputImageType *>(this->GetInput());
  if (input == nullptr)
  {
    return;
  }
  const OutputImageType *       output = this->GetOutput();
  const OutputImageRegionType & requested = output->GetRequestedRegion();
  if (!output->GetLargestPossibleRegion().IsInside(requested))
  {
    InvalidRequestedRegionError e(__FILE__, __LINE__);
    std::ostringstream          msg;
    msg << "The requested output region (index " << requested.GetIndex() << ", size " << requested.GetSize()
        << ") is not inside the image (index " << output->GetLargestPossibleRegion().GetIndex() << ", size "
        << output->GetLargestPossibleRegion().GetSize() << "). Request a region inside the image.";
    e.SetLocation(ITK_LOCATION);
    e.SetDescription(msg.str());
    e.SetDataObject(input);
    throw e;
  }

  InputImageRegionType region = input->GetRequestedRegion();
  int                  sizes[ImageDimension], distances[ImageDimension];
  this->AxisParameters(sizes, distances);
  typename InputImageRegionType::SizeType context;
  for (unsigned int a = 0; a < ImageDimension; ++a)
  {
    context[a] = static_cast<SizeValueType>(sizes[a] / 2 + distances[a] + 1);
  }
  region.PadByRadius(context);
  if (region.Crop(input->GetLargestPossibleRegion()))
  {
    input->SetRequestedRegion(region);
    if (auto * sigma = const_cast<NoiseSigmaImageType *>(this->GetNoiseSigmaImage()))
    {
      sigma->SetRequestedRegion(region); // the mask keeps the output's requested region
    }
    return;
  }
  input->SetRequestedRegion(region);
  InvalidRequestedRegionError e(__FILE__, __LINE__);
  e.SetLocation(ITK_LOCATION);
  e.SetDescription("Requested region is (at least partially) outside the largest possible region.");
  e.SetDataObject(input);
  throw e;
}

template <typename TInputImage, typename TOutputImage>
void
CudaNonLocalMeansImageFilter<TInputImage, TOutputImage>::GenerateData()
{
  using ElementType = NonLocalMeansBackend::ElementType;
  const InputImageType * input = this->GetInput();
  const unsigned int     components = input->GetNumberOfComponentsPerPixel();

  this->AllocateOutputs();
  OutputImageType * output = this->GetOutput();
  if (output->GetNumberOfComponentsPerPixel() != components)
  {
    itkExceptionMacro("The input has " << components << " component(s) per pixel but the output pixel type holds "
                                       << output->GetNumberOfComponentsPerPixel()
                                       << "; use an output pixel type with the same number of components.");
  }

  const InputImageRegionType    largest = input->GetLargestPossibleRegion();
  const InputImageRegionType    buffered = input->GetBufferedRegion();
  const OutputImageRegionType & outRegion = output->GetBufferedRegion();

  NonLocalMeansBackend::Problem problem;
  problem.Dimension = ImageDimension;
  problem.Components = components;
  for (unsigned int a = 0; a < ImageDimension && a < NonLocalMeansBackend::MaximumDimension; ++a)
  {
    problem.ImageSize[a] = static_cast<std::int64_t>(largest.GetSize(a));
    problem.InputStart[a] = buffered.GetIndex(a) - largest.GetIndex(a);
    problem.InputSize[a] = static_cast<std::int64_t>(buffered.GetSize(a));
    problem.OutputStart[a] = outRegion.GetIndex(a) - largest.GetIndex(a);
    problem.OutputSize[a] = static_cast<std::int64_t>(outRegion.GetSize(a));
  }
  problem.PatchSize = m_PatchSize;
  problem.PatchDistance = m_PatchDistance;
  {
    // Per-axis parameters only where they differ between the axes: equal ones are the isotropic
    // parameters, bitwise (the same problem).
    int sizes[ImageDimension], distances[ImageDimension];
    this->AxisParameters(sizes, distances);
    const bool sameSizes = std::all_of(sizes, sizes + ImageDimension, [&](int s) { return s == sizes[0]; });
    const bool sameDistances =
      std::all_of(distances, distances + ImageDimension, [&](int d) { return d == distances[0]; });
    if (sameSizes && sameDistances)
    {
      problem.PatchSize = sizes[0];
      problem.PatchDistance = distances[0];
    }
    else
    {
      problem.PerAxis = true;
      std::copy(sizes, sizes + ImageDimension, problem.AxisPatchSize);
      std::copy(distances, distances + ImageDimension, problem.AxisPatchDistance);
      problem.PatchSize = *std::max_element(sizes, sizes + ImageDimension);
      problem.PatchDistance = *std::max_element(distances, distances + ImageDimension);
    }
  }
  problem.H = m_H;
  problem.Sigma = m_Sigma;
  problem.FastMode = m_FastMode;
  problem.NoiseModel = m_NoiseModel;
  problem.SinglePrecision = m_SinglePrecision;
  problem.MaximumGPUMemory = m_MaximumGPUMemory;
  problem.NumberOfDevices = static_cast<unsigned int>(m_Devices.size());
  std::copy(m_Devices.begin(), m_Devices.end(), problem.Devices);

  // Input: float and double components are read in place; other types are converted to double.
  std::vector<double> inputCopy;
  if (nlm_detail::IsFloatOrDouble<InputComponentType> && nlm_detail::BufferIsComponentArray(input))
  {
    problem.InputType = nlm_detail::ElementTypeOf<InputComponentType>;
    problem.Input = reinterpret_cast<const void *>(input->GetBufferPointer());
  }
  else
  {
    inputCopy.resize(buffered.GetNumberOfPixels() * components);
    size_t                                   i = 0;
    ImageRegionConstIterator<InputImageType> it(input, buffered);
    for (it.GoToBegin(); !it.IsAtEnd(); ++it)
    {
      const InputPixelType pixel = it.Get();
      for (unsigned int k = 0; k < components; ++k)
      {
        inputCopy[i++] =
          static_cast<double>(DefaultConvertPixelTraits<InputPixelType>::GetNthComponent(static_cast<int>(k), pixel));
      }
    }
    problem.InputType = ElementType::Float64;
    problem.Input = inputCopy.data();
  }

  // Mask and noise map: bytes over the output region, doubles over the input buffer.
  std::vector<std::uint8_t> maskCopy;
  if (const MaskImageType * mask = this->GetMaskImage())
  {
    nlm_detail::VerifyBuffered(mask, outRegion, "MaskImage");
    problem.Mask = nlm_detail::MaskBytes(mask, outRegion, maskCopy);
    if (problem.Mask == nullptr)
    {
      itkExceptionMacro("MaskImage is a " << mask->GetNameOfClass()
                                          << " whose pixel type is not supported; give an itk::Image of an integer "
                                             "pixel type (for example unsigned char) as MaskImage.");
    }
  }
  std::vector<double> sigmaCopy;
  if (const NoiseSigmaImageType * sigma = this->GetNoiseSigmaImage())
  {
    // Every value the backends read lies in the input's requested region (reflections included);
    // where the input buffers more, the rest of the map's buffer-sized copy is never read.
    const InputImageRegionType & needed = input->GetRequestedRegion();
    nlm_detail::VerifyBuffered(sigma, needed, "NoiseSigmaImage");
    const auto * doubles = dynamic_cast<const Image<double, ImageDimension> *>(sigma);
    if (doubles != nullptr && doubles->GetBufferedRegion() == buffered)
    {
      problem.NoiseSigma = doubles->GetBufferPointer(); // in place
    }
    else if (!nlm_detail::ReadNoiseSigmaAs<double>(sigma, needed, buffered, sigmaCopy) &&
             !nlm_detail::ReadNoiseSigmaAs<float>(sigma, needed, buffered, sigmaCopy))
    {
      itkExceptionMacro("NoiseSigmaImage is a " << sigma->GetNameOfClass()
                                                << " whose pixel type is not supported; give an itk::Image of float "
                                                   "or double as NoiseSigmaImage.");
    }
    else
    {
      problem.NoiseSigma = sigmaCopy.data();
    }
  }

  // Output: written in place for float and double components, through a double buffer otherwise.
  std::vector<double> outputCopy;
  const bool inPlace = nlm_detail::IsFloatOrDouble<OutputComponentType> && nlm_detail::BufferIsComponentArray(output);
  if (inPlace)
  {
    problem.OutputType = nlm_detail::ElementTypeOf<OutputComponentType>;
    problem.Output = reinterpret_cast<void *>(output->GetBufferPointer());
  }
  else
  {
    outputCopy.resize(outRegion.GetNumberOfPixels() * components);
    problem.OutputType = ElementType::Float64;
    problem.Output = outputCopy.data();
  }

  const NonLocalMeansBackendSelection::Outcome outcome = NonLocalMeansBackendSelection::Compute(
    problem, m_Backend, this, this->GetMultiThreader(), this->GetNumberOfWorkUnits());
  m_BackendUsed = outcome.Used;
  m_BackendStatistics = outcome.Statistics;
  if (outcome.WarnAboutFallback)
  {
    itkWarningMacro("Computed on the CPU: " << outcome.Statistics.CPUFallbackReason
                                            << ". Set Backend to CPU to silence this warning. It is given once per "
                                               "cause and process.");
  }

  if (!inPlace)
  {
    size_t                               i = 0;
    ImageRegionIterator<OutputImageType> it(output, outRegion);
    OutputPixelType                      pixel;
    NumericTraits<OutputPixelType>::SetLength(pixel, components);
    for (it.GoToBegin(); !it.IsAtEnd(); ++it)
    {
      for (unsigned int k = 0; k < components; ++k)
      {
        DefaultConvertPixelTraits<OutputPixelType>::SetNthComponent(
          static_cast<int>(k), pixel, nlm_detail::ConvertResult<OutputComponentType>(outputCopy[i++]));
      }
      it.Set(pixel);
    }
  }
}

template <typename TInputImage, typename TOutputImage>
void
CudaNonLocalMeansImageFilter<TInputImage, TOutputImage>::PrintSelf(std::ostream & os, Indent indent) const
{
  Superclass::PrintSelf(os, indent);

  os << indent << "PatchSize: " << m_PatchSize << " (effective " << this->GetEffectivePatchSize() << ")" << std::endl;
  os << indent << "PatchDistance: " << m_PatchDistance << std::endl;
  os << indent << "PatchRadius: " << this->GetPatchRadius() << (m_PatchRadiusGiven ? "" : " (from PatchSize)")
     << std::endl;
  os << indent << "SearchRadius: " << this->GetSearchRadius() << (m_SearchRadiusGiven ? "" : " (from PatchDistance)")
     << std::endl;
  os << indent << "PhysicalPatchRadius: " << m_PhysicalPatchRadius << std::endl;
  os << indent << "PhysicalSearchRadius: " << m_PhysicalSearchRadius << std::endl;
  os << indent << "H: " << m_H << std::endl;
  os << indent << "Sigma: " << m_Sigma << std::endl;
  os << indent << "FastMode: " << (m_FastMode ? "On" : "Off") << std::endl;
  os << indent << "NoiseModel: " << m_NoiseModel << std::endl;
  os << indent << "MaskImage: " << (this->GetMaskImage() != nullptr ? "set" : "(none)") << std::endl;
  os << indent << "NoiseSigmaImage: " << (this->GetNoiseSigmaImage() != nullptr ? "set" : "(none)") << std::endl;
  os << indent << "Backend: " << m_Backend << std::endl;
  os << indent << "SinglePrecision: " << (m_SinglePrecision ? "On" : "Off") << std::endl;
  os << indent << "MaximumGPUMemory: " << m_MaximumGPUMemory << std::endl;
  os << indent << "Devices:";
  for (const int device : m_Devices)
  {
    os << ' ' << device;
  }
  os << (m_Devices.empty() ? " (the default device)" : "") << std::endl;
  os << indent << "BackendUsed: " << m_BackendUsed << (m_BackendUsed == BackendEnum::Auto ? " (none yet)" : "")
     << std::endl;
  if (m_BackendUsed == BackendEnum::CUDA)
  {
    const NonLocalMeansBackend::RunStatistics & s = m_BackendStatistics;
    os << indent << "BackendStatistics:" << std::endl;
    const Indent next = indent.GetNextIndent();
    os << next << "Device: " << s.Device << std::endl;
    os << next << "Configuration: " << s.Configuration << std::endl;
    os << next << "Kernel/pad/upload/download/compile (ms): " << s.KernelMilliseconds << " / " << s.PadMilliseconds
       << " / " << s.UploadMilliseconds << " / " << s.DownloadMilliseconds << " / " << s.CompileMilliseconds
       << std::endl;
    os << next << "Check/setup/allocation (ms): " << s.CheckMilliseconds << " / " << s.SetupMilliseconds << " / "
       << s.AllocationMilliseconds << std::endl;
    os << next << "KernelFromCache (memory, disk): " << s.KernelFromMemoryCache << ", " << s.KernelFromDiskCache
       << std::endl;
    os << next << "Slabs: " << s.Slabs << ", DeviceBytes: " << s.DeviceBytes << std::endl;
  }
  if (!m_BackendStatistics.CPUFallbackReason.empty())
  {
    os << indent << "CPUFallbackReason: " << m_BackendStatistics.CPUFallbackReason << std::endl;
  }
}

} // end namespace itk

#endif // itkCudaNonLocalMeansImageFilter_hxx
