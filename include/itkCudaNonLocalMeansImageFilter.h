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
#ifndef itkCudaNonLocalMeansImageFilter_h
#define itkCudaNonLocalMeansImageFilter_h

#include "itkImageToImageFilter.h"
#include "itkNonLocalMeansBackendSelection.h"
#include "itkNumericTraits.h"
#include "CudaNonLocalMeansExport.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#ifndef ITKv5_CONST
#  define ITKv5_CONST const
#endif

namespace itk
{

/** \class CudaNonLocalMeansImageFilter
 * \brief Non-local means denoising that reproduces scikit-image's `denoise_nl_means`, on an
 * NVIDIA GPU or on the CPU.
 *
 * The filter computes scikit-image 0.26.0's `skimage.restoration.denoise_nl_means` for 2D, 3D and
 * 4D images with any number of components per pixel (scalar images, VectorImage, Vector and
 * RGBPixel pixels; components play the role of scikit-image's channels). Parameters carry
 * scikit-image's names:
 *
 * - PatchSize (patch_size, default 7): side of the patch; an even value is increased by one.
 * - PatchDistance (patch_distance, default 11): maximal distance in voxels where patches are searched.
 * - H (h, default 0.1): cut-off distance in grey levels; larger values smooth more.
 * - Sigma (sigma, default 0): standard deviation of the noise, subtracted from patch distances.
 * - FastMode (fast_mode, default On): the fast algorithm (uniform patch weights); Off selects the
 *   classic algorithm (Gaussian patch weights; 2D images and single-component 3D images only).
 *
 * Intensities are used as they are, like `preserve_range=True` in scikit-image: integer pixels keep
 * their values. Float pixels are processed as scikit-image processes float32 arrays (float64
 * arithmetic, result rounded to float), all other component types as float64 arrays. For
 * integer output pixel types the result is rounded to the nearest integer and clamped to the
 * type's range. To reproduce `preserve_range=False` for integer images, scale the input to [0, 1]
 * (for example with ShiftScaleImageFilter) first. Image axis 0 (x) corresponds to the last axis of
 * the NumPy array, so the result equals scikit-image's on `itk.array_from_image(image)`.
 *
 * Boundaries are handled by reflection about the image border (NumPy's `mode='reflect'`), also
 * when only a part of the output is requested: streamed output is bitwise equal to whole-image
 * output, whatever the number of threads.
 *
 * Backend selects the CPU, the CUDA GPU, or Auto (the default). The CUDA backend needs only the
 * NVIDIA driver and an NVRTC library at run time, and produces bitwise the same output as the
 * CPU backend. The numerical contract is documented in doc/numerical-contract.md.
 *
 * \ingroup CudaNonLocalMeans
 */
template <typename TInputImage, typename TOutputImage = TInputImage>
class ITK_TEMPLATE_EXPORT CudaNonLocalMeansImageFilter : public ImageToImageFilter<TInputImage, TOutputImage>
{
public:
  ITK_DISALLOW_COPY_AND_MOVE(CudaNonLocalMeansImageFilter);

  using Self = CudaNonLocalMeansImageFilter;
  using Superclass = ImageToImageFilter<TInputImage, TOutputImage>;
  using Pointer = SmartPointer<Self>;
  using ConstPointer = SmartPointer<const Self>;

  using InputImageType = TInputImage;
  using OutputImageType = TOutputImage;
  using InputPixelType = typename InputImageType::PixelType;
  using OutputPixelType = typename OutputImageType::PixelType;
  using InputComponentType = typename NumericTraits<InputPixelType>::ValueType;
  using OutputComponentType = typename NumericTraits<OutputPixelType>::ValueType;
  using OutputImageRegionType = typename OutputImageType::RegionType;
  using InputImageRegionType = typename InputImageType::RegionType;

  static constexpr unsigned int ImageDimension = TInputImage::ImageDimension;
  static constexpr unsigned int OutputImageDimension = TOutputImage::ImageDimension;

  using BackendEnum = CudaNonLocalMeansImageFilterEnums::Backend;
  using NoiseModelEnum = CudaNonLocalMeansImageFilterEnums::NoiseModel;
  using RadiusType = typename InputImageType::SizeType;
  /** The mask and the noise map are images of any pixel type listed at SetMaskImage and
   * SetNoiseSigmaImage, on the input's grid. */
  using MaskImageType = ImageBase<ImageDimension>;
  using NoiseSigmaImageType = ImageBase<ImageDimension>;
  static_assert(ImageDimension == OutputImageDimension,
                "CudaNonLocalMeansImageFilter: input and output images must have the same dimension.");
  static_assert(std::is_arithmetic<InputComponentType>::value && std::is_arithmetic<OutputComponentType>::value,
                "CudaNonLocalMeansImageFilter: pixel components must be real numbers (integer or floating point); "
                "complex and other pixel types are not supported.");

  itkNewMacro(Self);
#ifdef itkOverrideGetNameOfClassMacro
  itkOverrideGetNameOfClassMacro(CudaNonLocalMeansImageFilter);
#else
  itkTypeMacro(CudaNonLocalMeansImageFilter, ImageToImageFilter);
#endif

  /** Patch side in pixels (scikit-image's patch_size). Even values are increased by one, as
   * scikit-image does; see GetEffectivePatchSize(). Must be at least 1. */
  virtual void
  SetPatchSize(int patchSize)
  {
    if (patchSize != m_PatchSize || m_PatchRadiusGiven)
    {
      m_PatchSize = patchSize;
      m_PatchRadiusGiven = false; // PatchSize again, on every axis
      this->Modified();
    }
  }
  itkGetConstMacro(PatchSize, int);

  /** The odd patch size actually used. */
  int
  GetEffectivePatchSize() const
  {
    return NonLocalMeansBackend::EffectivePatchSize(m_PatchSize);
  }

  /** Maximal distance in pixels where patches are searched (scikit-image's patch_distance);
   * 0 or more. */
  virtual void
  SetPatchDistance(int patchDistance)
  {
    if (patchDistance != m_PatchDistance || m_SearchRadiusGiven)
    {
      m_PatchDistance = patchDistance;
      m_SearchRadiusGiven = false; // PatchDistance again, on every axis
      this->Modified();
    }
  }
  itkGetConstMacro(PatchDistance, int);

  /** Anisotropic patches and search windows, opt-in (doc/numerical-contract.md 6.4; fast mode only).
   * SetPatchRadius gives the patch radius per axis in ITK's convention (side 2 r + 1 along axis a,
   * scikit-image's patch_size 2 r + 1 there), instead of PatchSize; SetSearchRadius the patch
   * distance per axis, instead of PatchDistance. SetPatchSize or SetPatchDistance return to the
   * isotropic parameter. Equal radii on every axis give bitwise the isotropic output. A patch
   * radius of 0 must be 0 on every axis. GetPatchRadius and GetSearchRadius return the radii in
   * use (from PatchSize and PatchDistance unless set). */
  void
  SetPatchRadius(const RadiusType & radius)
  {
    m_PatchRadius = radius;
    m_PatchRadiusGiven = true;
    this->Modified();
  }
  RadiusType
  GetPatchRadius() const
  {
    return this->AxisRadii(false);
  }
  void
  SetSearchRadius(const RadiusType & radius)
  {
    m_SearchRadius = radius;
    m_SearchRadiusGiven = true;
    this->Modified();
  }
  RadiusType
  GetSearchRadius() const
  {
    return this->AxisRadii(true);
  }

  /** Radii in physical units, opt-in: when greater than 0, the patch radius along axis a is
   * max(1, round(PhysicalPatchRadius / spacing[a])) voxels, and the search radius
   * round(PhysicalSearchRadius / spacing[a]); they take precedence over the radii above. For
   * anisotropic voxels (e.g. 0.2 x 0.2 x 1.0 um) this gives patches and windows that are cubes in
   * space. 0 (default): not used. */
  itkSetMacro(PhysicalPatchRadius, double);
  itkGetConstMacro(PhysicalPatchRadius, double);
  itkSetMacro(PhysicalSearchRadius, double);
  itkGetConstMacro(PhysicalSearchRadius, double);

  /** Cut-off distance in grey levels (scikit-image's h); must be greater than 0. */
  itkSetMacro(H, double);
  itkGetConstMacro(H, double);

  /** Standard deviation of the noise (scikit-image's sigma); 0 or more. */
  itkSetMacro(Sigma, double);
  itkGetConstMacro(Sigma, double);

  /** Fast algorithm (scikit-image's fast_mode). */
  itkSetMacro(FastMode, bool);
  itkGetConstMacro(FastMode, bool);
  itkBooleanMacro(FastMode);

  /** Noise model, opt-in (doc/numerical-contract.md, section 6.1): Gaussian (default, scikit-image's)
   * or Rician, for magnitude MR images: the output is sqrt(max(NLM(x^2) - 2 sigma^2, 0)), with
   * NLM(x^2) the weighted mean of the squared intensities under the same weights (Wiest-Daesslé et
   * al. 2008; DIPY's rician=True). Rician needs Sigma greater than 0 or a NoiseSigmaImage. */
  itkSetEnumMacro(NoiseModel, NoiseModelEnum);
  itkGetEnumMacro(NoiseModel, NoiseModelEnum);

  /** Optional mask on the input's grid (same size, origin, spacing and direction), opt-in
   * (section 6.3): an itk::Image of any integer pixel type (bool, char, short, int, long, long
   * long, signed or unsigned). Pixels where it is 0 receive their input value; the others are
   * computed exactly as without a mask (bitwise), and work that reaches only masked-out pixels is
   * skipped. */
  itkSetInputMacro(MaskImage, MaskImageType);
  itkGetInputMacro(MaskImage, MaskImageType);

  /** Optional noise map on the input's grid, opt-in (section 6.2): an itk::Image of float or
   * double holding the noise standard deviation of every pixel, finite and 0 or more. It replaces
   * Sigma: the noise term of two grid points y and y + t becomes Components * (sigma(y)^2 +
   * sigma(y + t)^2); a constant map gives bitwise the output of that Sigma. Fast mode only. */
  itkSetInputMacro(NoiseSigmaImage, NoiseSigmaImageType);
  itkGetInputMacro(NoiseSigmaImage, NoiseSigmaImageType);

  /** Where to compute: Auto (default), CPU or CUDA. */
  itkSetEnumMacro(Backend, BackendEnum);
  itkGetEnumMacro(Backend, BackendEnum);

  /** CUDA backend only, opt-in: float32 arithmetic instead of float64, for GPUs whose float64
   * rate is a small fraction of their float32 rate (most consumer GPUs). The result is then no
   * longer bitwise equal to the CPU backend (see the README for its accuracy). Default Off. */
  itkSetMacro(SinglePrecision, bool);
  itkGetConstMacro(SinglePrecision, bool);
  itkBooleanMacro(SinglePrecision);

  /** CUDA backend only: the most GPU memory to use, in bytes; 0 (default) uses up to 80% of the
   * free memory. Images that need more are processed in slabs; the result does not change. */
  itkSetMacro(MaximumGPUMemory, SizeValueType);
  itkGetConstMacro(MaximumGPUMemory, SizeValueType);

  /** CUDA backend only: the CUDA devices (ordinals) to compute on; empty (the default): the default
   * device (CUDANONLOCALMEANS_DEVICE, else 0). The slabs are shared out among them; the output does
   * not depend on which devices or how many. A device may be listed more than once. */
  void
  SetDevices(const std::vector<int> & devices)
  {
    if (devices != m_Devices)
    {
      m_Devices = devices;
      this->Modified();
    }
  }
  const std::vector<int> &
  GetDevices() const
  {
    return m_Devices;
  }
  /** Appends a device to Devices (for languages without std::vector). */
  void
  AddDevice(int ordinal)
  {
    m_Devices.push_back(ordinal);
    this->Modified();
  }
  /** Empties Devices: the default device again. */
  void
  ClearDevices()
  {
    this->SetDevices({});
  }
  unsigned int
  GetNumberOfDevices() const
  {
    return static_cast<unsigned int>(m_Devices.size());
  }

  /** The backend that computed the last output: CPU or CUDA; Auto before the first Update. */
  itkGetEnumMacro(BackendUsed, BackendEnum);

  /** What the backend reported about the last output: device, kernel configuration, and for the
   * CUDA backend the kernel, transfer and compile times (CUDA events). With Backend Auto on the CPU,
   * CPUFallbackReason says why the CUDA backend did not compute it. */
  const NonLocalMeansBackend::RunStatistics &
  GetBackendStatistics() const
  {
    return m_BackendStatistics;
  }

protected:
  CudaNonLocalMeansImageFilter();
  ~CudaNonLocalMeansImageFilter() override = default;

  void
  PrintSelf(std::ostream & os, Indent indent) const override;

  /** Checks parameters and the image dimension; throws with a message naming what to change. */
  void
  VerifyPreconditions() ITKv5_CONST override;

  /** As the superclass (same origin, spacing and direction), and the mask and the noise map cover
   * the input's whole grid. */
  void
  VerifyInputInformation() ITKv5_CONST override;

  /** Pads the requested region by PatchSize/2 + PatchDistance + 1 (the context each output pixel
   * depends on), cropped to the image; the noise map's too. The mask needs the output's. */
  void
  GenerateInputRequestedRegion() override;

  void
  GenerateData() override;

private:
  /** The patch size and distance along each axis in use (section 6.4), from the settings and the
   * input's spacing. */
  void
  AxisParameters(int * patchSizes, int * distances) const; // ImageDimension values each
  /** The patch radii (false) or the search radii (true) in use. */
  RadiusType
  AxisRadii(bool search) const;

  int              m_PatchSize{ 7 };
  int              m_PatchDistance{ 11 };
  RadiusType       m_PatchRadius{};
  RadiusType       m_SearchRadius{};
  bool             m_PatchRadiusGiven{ false };
  bool             m_SearchRadiusGiven{ false };
  double           m_PhysicalPatchRadius{ 0.0 };
  double           m_PhysicalSearchRadius{ 0.0 };
  double           m_H{ 0.1 };
  double           m_Sigma{ 0.0 };
  bool             m_FastMode{ true };
  NoiseModelEnum   m_NoiseModel{ NoiseModelEnum::Gaussian };
  BackendEnum      m_Backend{ BackendEnum::Auto };
  bool             m_SinglePrecision{ false };
  SizeValueType    m_MaximumGPUMemory{ 0 };
  std::vector<int> m_Devices;
  BackendEnum      m_BackendUsed{ BackendEnum::Auto };

  NonLocalMeansBackend::RunStatistics m_BackendStatistics;
};
} // end namespace itk

#ifndef ITK_MANUAL_INSTANTIATION
#  include "itkCudaNonLocalMeansImageFilter.hxx"
#endif

#endif // itkCudaNonLocalMeansImageFilter_h
