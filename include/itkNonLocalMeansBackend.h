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
#ifndef itkNonLocalMeansBackend_h
#define itkNonLocalMeansBackend_h

#include "itkObject.h"
#include "itkObjectFactory.h"
#include "itkCudaNonLocalMeansImageFilterEnums.h"
#include "CudaNonLocalMeansExport.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace itk
{
class ProcessObject;
class MultiThreaderBase;

/** \class NonLocalMeansBackend
 * \brief Non-templated interface between CudaNonLocalMeansImageFilter and the code that computes
 * non-local means (a CPU backend and a CUDA backend).
 *
 * The filter describes one request as a NonLocalMeansBackend::Problem: a dense buffer of the
 * input's buffered region (float32 or float64 components, interleaved), the extent of the whole
 * image (for reflect padding), the output region to compute and a dense output buffer.
 * Every backend computes bitwise the same numbers; the contract is written down in
 * doc/numerical-contract.md. Axis 0 is ITK's x axis (the fastest in memory); it plays the role of
 * scikit-image's last axis.
 *
 * This header carries no CUDA types: everything device-specific lives in the library.
 *
 * \ingroup CudaNonLocalMeans
 */
class CudaNonLocalMeans_EXPORT NonLocalMeansBackend : public Object
{
public:
  ITK_DISALLOW_COPY_AND_MOVE(NonLocalMeansBackend);

  using Self = NonLocalMeansBackend;
  using Superclass = Object;
  using Pointer = SmartPointer<Self>;
  using ConstPointer = SmartPointer<const Self>;

#ifdef itkOverrideGetNameOfClassMacro
  itkOverrideGetNameOfClassMacro(NonLocalMeansBackend);
#else
  itkTypeMacro(NonLocalMeansBackend, Object);
#endif

  /** Largest number of spatial dimensions a problem can have. */
  static constexpr unsigned int MaximumDimension = 4;

  /** Most CUDA devices one problem may name. */
  static constexpr unsigned int MaximumDevices = 16;

  /** Element type of a buffer. */
  enum class ElementType : std::uint8_t
  {
    Float32,
    Float64
  };

  /** One request. Arrays are indexed by ITK axis; entries beyond Dimension are ignored. Indices
   * are relative to the start of the image's largest possible region. */
  struct Problem
  {
    unsigned int Dimension{ 0 };
    unsigned int Components{ 1 };
    /** Size of the whole image (reflect padding is done about its borders). */
    std::int64_t ImageSize[MaximumDimension]{};

    /** Input buffer: dense over InputStart/InputSize, Components values per pixel. */
    ElementType  InputType{ ElementType::Float64 };
    const void * Input{ nullptr };
    std::int64_t InputStart[MaximumDimension]{};
    std::int64_t InputSize[MaximumDimension]{};

    /** Output buffer: dense over OutputStart/OutputSize, Components values per pixel. */
    ElementType  OutputType{ ElementType::Float64 };
    void *       Output{ nullptr };
    std::int64_t OutputStart[MaximumDimension]{};
    std::int64_t OutputSize[MaximumDimension]{};

    /** scikit-image's parameters. PatchSize is used as given if odd, plus one if even. */
    int    PatchSize{ 7 };
    int    PatchDistance{ 11 };
    double H{ 0.1 };
    double Sigma{ 0.0 };
    bool   FastMode{ true };

    /** Opt-in extensions (doc/numerical-contract.md, section 6); their defaults are scikit-image's.
     * NoiseModel Rician: the output is sqrt(max(NLM(x^2) - 2 sigma^2, 0)) (needs Sigma > 0 or
     * NoiseSigma). */
    CudaNonLocalMeansImageFilterEnums::NoiseModel NoiseModel{ CudaNonLocalMeansImageFilterEnums::NoiseModel::Gaussian };
    /** Optional mask, one byte per output cell, dense over OutputStart/OutputSize: cells holding 0
     * receive their input value (converted to the working type); the others are computed exactly
     * as without a mask. Work that reaches only masked-out cells is skipped. */
    const std::uint8_t * Mask{ nullptr };
    /** Optional noise map: the noise standard deviation of every input pixel (float64, one value per
     * pixel, dense over InputStart/InputSize), finite and 0 or more. It replaces Sigma: the noise
     * term of a pair of grid points y, y + t is Components * (sigma(y)^2 + sigma(y + t)^2). Fast mode
     * only. */
    const double * NoiseSigma{ nullptr };
    /** Anisotropic patches and search windows (section 6.4, fast mode only): when PerAxis, the
     * odd patch size and the patch distance along each axis, used instead of PatchSize and
     * PatchDistance (which should then hold the largest of them, for messages). */
    bool PerAxis{ false };
    int  AxisPatchSize[MaximumDimension]{};
    int  AxisPatchDistance[MaximumDimension]{};

    /** CUDA backend only: float32 arithmetic instead of float64 (faster on GPUs with weak FP64;
     * not bitwise equal to the CPU backend). Ignored by the CPU backend. */
    bool SinglePrecision{ false };
    /** CUDA backend only: most GPU memory to use on each device, in bytes; 0 = 80% of the free
     * memory. Volumes that need more are processed in slabs along the outermost axis. */
    std::uint64_t MaximumGPUMemory{ 0 };
    /** CUDA backend only: the CUDA device ordinals to use, the first NumberOfDevices entries; none:
     * the default device (CUDANONLOCALMEANS_DEVICE, else 0). Slabs are spread over them; the output
     * does not depend on which or how many. A device listed twice runs two slabs at once. */
    int          Devices[MaximumDevices]{};
    unsigned int NumberOfDevices{ 0 };
  };

  /** What the last Run did and how long its parts took (CUDA backend; the CPU backend reports
   * only the configuration). Device times come from CUDA events, host times from a steady clock. */
  struct RunStatistics
  {
    std::string Device;
    std::string Configuration;
    // The CUDA backend overlaps the copies with the kernels (doc/cuda-backend.md): the times below
    // are not additive.
    double        KernelMilliseconds{ 0.0 };      // the non-local means kernels (CUDA events, chunks' union)
    double        PadMilliseconds{ 0.0 };         // reflect padding on the device (CUDA events)
    double        UploadMilliseconds{ 0.0 };      // host: enqueuing the upload (staged copies, fused finite check)
    double        DownloadMilliseconds{ 0.0 };    // host: downloads, mostly while the kernels run
    double        CompileMilliseconds{ 0.0 };     // NVRTC compiles in this Run, summed (0 if all cached)
    double        CheckMilliseconds{ 0.0 };       // host: a separate finite-value check (0 when fused into the upload)
    double        SetupMilliseconds{ 0.0 };       // host: configuration, module (compile or cache), memory plan
    double        AllocationMilliseconds{ 0.0 };  // host: device buffers, the first page-locked buffer
    bool          KernelFromDiskCache{ false };   // the configuration's module (not the padding module)
    bool          KernelFromMemoryCache{ false }; // the configuration's module, with its padding kernel
    bool          KernelCacheRepaired{ false };   // a cached module the driver did not load was compiled again
    unsigned int  Slabs{ 0 };
    std::uint64_t DeviceBytes{ 0 };
    std::string   CPUFallbackReason; // Backend Auto computed on the CPU: why the CUDA backend did not
  };

  /** Compute the output of a problem that VerifyProblem accepted. `caller` (may be null) receives
   * progress in [0, 1] through UpdateProgress from the calling thread, and its AbortGenerateData
   * flag is honored (a ProcessAborted exception is thrown). `threader` (may be null: then the
   * global default is used) and `numberOfWorkUnits` control CPU parallelism. Throws
   * ExceptionObject when the input holds a value that is not finite, or when the backend cannot
   * compute the problem. */
  virtual void
  Run(const Problem &     problem,
      ProcessObject *     caller,
      MultiThreaderBase * threader,
      unsigned int        numberOfWorkUnits) = 0;

  /** Statistics of the last Run. */
  virtual RunStatistics
  GetLastRunStatistics() const
  {
    return RunStatistics{};
  }

  /** Check scikit-image's parameters; throws ExceptionObject with a message naming the parameter,
   * its Set method and what to change. */
  static void
  VerifyParameters(int patchSize, int patchDistance, double h, double sigma);

  /** Check a problem's parameters and buffers; throws ExceptionObject with a message naming the
   * offending parameter. */
  static void
  VerifyProblem(const Problem & problem);

  /** The distance normalization of doc/numerical-contract.md 2.1: ((K * h) * h) multiplied by the
   * effective patch size once per spatial dimension, left to right. */
  static double
  Normalization(const Problem & problem);

  /** The terms of one patch distance: Components multiplied by the patch size along every axis. */
  static double
  PatchTerms(const Problem & problem);

  /** The noise term 2*Sigma^2 summed over the patch's PatchTerms terms: a bound on how far a patch
   * distance can fall below 0 (the box has fewer terms). VerifyProblem keeps it finite. */
  static double
  NoiseOverPatch(const Problem & problem);

  /** Odd patch size actually used for a requested patch size (scikit-image adds one to even sizes). */
  static constexpr int
  EffectivePatchSize(int patchSize)
  {
    return (patchSize % 2 == 0) ? patchSize + 1 : patchSize;
  }

  /** The odd patch size along `axis`: AxisPatchSize when PerAxis, else EffectivePatchSize(PatchSize). */
  static int
  PatchSizeAlong(const Problem & p, unsigned int axis)
  {
    return p.PerAxis ? p.AxisPatchSize[axis] : EffectivePatchSize(p.PatchSize);
  }

  /** The patch distance along `axis`: AxisPatchDistance when PerAxis, else PatchDistance. */
  static int
  PatchDistanceAlong(const Problem & p, unsigned int axis)
  {
    return p.PerAxis ? p.AxisPatchDistance[axis] : p.PatchDistance;
  }

protected:
  NonLocalMeansBackend() = default;
  ~NonLocalMeansBackend() override = default;
};

} // end namespace itk

#endif
