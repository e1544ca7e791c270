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
#include "itkNonLocalMeansBackend.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace itk
{
namespace
{
/** "[i0, i1, ...]": the image index of cell `cell` of the input buffer. */
std::string
InputIndexOf(const NonLocalMeansBackend::Problem & p, std::int64_t cell)
{
  std::ostringstream text;
  text << '[';
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    text << (a > 0 ? ", " : "") << p.InputStart[a] + cell % p.InputSize[a];
    cell /= p.InputSize[a];
  }
  text << ']';
  return text.str();
}

/** Throws, naming the pixel, when a value of the noise map is negative or not finite; returns the
 * largest value. */
double
VerifyNoiseSigmaValues(const NonLocalMeansBackend::Problem & p)
{
  std::int64_t cells = 1;
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    cells *= p.InputSize[a];
  }
  double largest = 0.0;
  for (std::int64_t i = 0; i < cells; ++i)
  {
    const double sigma = p.NoiseSigma[i];
    if (!(sigma >= 0.0) || !std::isfinite(sigma))
    {
      itkGenericExceptionMacro("The noise map (NoiseSigmaImage) holds "
                               << sigma << " at pixel " << InputIndexOf(p, i)
                               << " (counted from the image's first pixel)"
                               << "; give a noise standard deviation that is finite and 0 or more at every pixel.");
    }
    largest = std::max(largest, sigma);
  }
  return largest;
}

/** The checks of anisotropic patches and search windows (section 6.4). */
void
VerifyPerAxis(const NonLocalMeansBackend::Problem & p)
{
  if (!p.PerAxis)
  {
    return;
  }
  if (!p.FastMode)
  {
    itkGenericExceptionMacro("Per-axis patch or search radii (PatchRadius, SearchRadius) are supported in fast mode "
                             "only; turn FastMode on, or use PatchSize and PatchDistance.");
  }
  bool someEmpty = false, someNot = false;
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    const int s = p.AxisPatchSize[a], d = p.AxisPatchDistance[a];
    if (s < 1 || s > 1001 || s % 2 == 0 || d < 0 || d > 1000)
    {
      itkGenericExceptionMacro("Along axis " << a << " the patch size is " << s << " and the search radius " << d
                                             << "; give a patch radius from 0 to 500 and a search radius from 0 to "
                                                "1000 on every axis (SetPatchRadius, SetSearchRadius).");
    }
    (s == 1 ? someEmpty : someNot) = true;
  }
  if (someEmpty && someNot)
  {
    itkGenericExceptionMacro("PatchRadius is 0 along some axes but not along others; scikit-image's patch box has "
                             "PatchSize - 1 samples per axis, so a radius of 0 leaves it empty. Give a patch radius "
                             "of at least 1 on every axis, or 0 on all.");
  }
}

/** The checks of the opt-in extensions (NoiseModel, NoiseSigma). */
void
VerifyExtensions(const NonLocalMeansBackend::Problem & p)
{
  using NoiseModelEnum = CudaNonLocalMeansImageFilterEnums::NoiseModel;
  if (p.NoiseModel != NoiseModelEnum::Gaussian && p.NoiseModel != NoiseModelEnum::Rician)
  {
    itkGenericExceptionMacro("NoiseModel holds an invalid value; set Gaussian or Rician with SetNoiseModel.");
  }
  if (p.NoiseModel == NoiseModelEnum::Rician && p.NoiseSigma == nullptr && !(p.Sigma > 0.0))
  {
    itkGenericExceptionMacro("NoiseModel is Rician, which subtracts the noise bias 2*Sigma^2, but Sigma is "
                             << p.Sigma
                             << "; set the noise standard deviation with SetSigma (greater than 0) or give a noise "
                                "map with SetNoiseSigmaImage.");
  }
  if (p.NoiseSigma == nullptr)
  {
    return;
  }
  if (!p.FastMode)
  {
    itkGenericExceptionMacro("A noise map (NoiseSigmaImage) is supported in fast mode only; turn FastMode on, or "
                             "give a scalar Sigma instead of the map.");
  }
  const double largest = VerifyNoiseSigmaValues(p);
  if (!std::isfinite(2.0 * (largest * largest) * NonLocalMeansBackend::PatchTerms(p)))
  {
    itkGenericExceptionMacro("The noise map (NoiseSigmaImage) holds " << largest
                                                                      << ", too large: 2*sigma^2 summed over a patch "
                                                                         "overflows.");
  }
}
} // namespace


double
NonLocalMeansBackend::Normalization(const Problem & p)
{
  double norm = (static_cast<double>(p.Components) * p.H) * p.H;
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    norm = norm * static_cast<double>(PatchSizeAlong(p, a));
  }
  return norm;
}

double
NonLocalMeansBackend::PatchTerms(const Problem & p)
{
  double terms = static_cast<double>(p.Components);
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    terms *= static_cast<double>(PatchSizeAlong(p, a));
  }
  return terms;
}

double
NonLocalMeansBackend::NoiseOverPatch(const Problem & p)
{
  return 2.0 * (p.Sigma * p.Sigma) * PatchTerms(p);
}

void
NonLocalMeansBackend::VerifyParameters(int patchSize, int patchDistance, double h, double sigma)
{
  if (patchSize < 1 || patchSize > 1001)
  {
    itkGenericExceptionMacro("PatchSize is " << patchSize
                                             << "; set a patch size from 1 to 1001 with SetPatchSize (scikit-image's "
                                                "patch_size).");
  }
  if (patchDistance < 0 || patchDistance > 1000)
  {
    itkGenericExceptionMacro("PatchDistance is " << patchDistance
                                                 << "; set a patch distance from 0 to 1000 with SetPatchDistance "
                                                    "(scikit-image's patch_distance).");
  }
  if (!(h > 0.0) || !std::isfinite(h))
  {
    itkGenericExceptionMacro(
      "H is " << h
              << "; set a finite H greater than 0 with SetH (scikit-image's h, the cut-off "
                 "distance; scikit-image uses only h*h, so a negative h there equals |h| here).");
  }
  if (!(sigma >= 0.0) || !std::isfinite(sigma))
  {
    itkGenericExceptionMacro(
      "Sigma is " << sigma
                  << "; set a finite Sigma of 0 or more with SetSigma (scikit-image's sigma, the "
                     "noise standard deviation; scikit-image uses only sigma*sigma).");
  }
}

void
NonLocalMeansBackend::VerifyProblem(const Problem & p)
{
  if (p.Dimension < 2 || p.Dimension > MaximumDimension)
  {
    itkGenericExceptionMacro("Non-local means supports images of 2, 3 or 4 dimensions (as scikit-image does); "
                             "this image has "
                             << p.Dimension << ".");
  }
  if (p.Components < 1)
  {
    itkGenericExceptionMacro("The image has no components per pixel; give it at least one.");
  }
  VerifyPerAxis(p); // before PatchSize and PatchDistance, which then hold the largest radii
  VerifyParameters(p.PerAxis ? 1 : p.PatchSize, p.PerAxis ? 0 : p.PatchDistance, p.H, p.Sigma);
  const double norm = Normalization(p);
  if (!std::isnormal(norm))
  {
    itkGenericExceptionMacro("H = " << p.H
                                    << " is too small or too large: the normalization "
                                       "Components*H*H*PatchSize^Dimension = "
                                    << norm
                                    << " is not a normal floating-point number. Use an H between about "
                                       "1e-150 and 1e150.");
  }
  if (!std::isfinite(NoiseOverPatch(p)))
  {
    itkGenericExceptionMacro("Sigma = " << p.Sigma << " is too large: 2*Sigma^2 summed over a patch overflows.");
  }
  if (!p.FastMode && !(p.Dimension == 2 || (p.Dimension == 3 && p.Components == 1)))
  {
    itkGenericExceptionMacro("Slow mode (FastMode off) is implemented, as in scikit-image, only for 2D images "
                             "and for single-component 3D images; this image is "
                             << p.Dimension << "D with " << p.Components << " component(s). Turn FastMode on.");
  }
  if (p.NumberOfDevices > MaximumDevices)
  {
    itkGenericExceptionMacro("The problem names " << p.NumberOfDevices << " CUDA devices; name at most "
                                                  << MaximumDevices << ".");
  }
  for (unsigned int i = 0; i < p.NumberOfDevices; ++i)
  {
    if (p.Devices[i] < 0)
    {
      itkGenericExceptionMacro("Device " << p.Devices[i]
                                         << " is not a CUDA device ordinal; give 0, 1, ... to SetDevices.");
    }
  }
  if (p.Input == nullptr || p.Output == nullptr)
  {
    itkGenericExceptionMacro("Non-local means backend called without an input or output buffer.");
  }
  for (unsigned int a = 0; a < p.Dimension; ++a)
  {
    if (p.ImageSize[a] < 1 || p.InputSize[a] < 1 || p.OutputSize[a] < 0)
    {
      itkGenericExceptionMacro("Non-local means: empty image or input buffer along axis " << a << ".");
    }
    if (p.InputStart[a] < 0 || p.InputStart[a] + p.InputSize[a] > p.ImageSize[a] || p.OutputStart[a] < 0 ||
        p.OutputStart[a] + p.OutputSize[a] > p.ImageSize[a])
    {
      itkGenericExceptionMacro("Non-local means: the input buffer or the output region lies outside the image "
                               "along axis "
                               << a << ".");
    }
  }
  VerifyExtensions(p);
}

} // end namespace itk
