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

// Writes the module images (cubins) of the kernels that the CUDA backend's planner chooses for a
// grid of problems, compiled by NVRTC for one architecture: no GPU needed. benchmarks/kernel_sass.sh
// disassembles them, so that a change to a kernel's source can be checked for the machine code it
// changes (none, for a refactoring) and its instruction mix counted on a machine without a GPU.
//
// Usage: CudaNonLocalMeansKernelImages OUTDIR [ARCH] [--quick]
// ARCH is a compute capability as 10 * major + minor (default 90). Every distinct configuration
// (KernelConfig::Describe), and the padding module each uses ("padding K1 float->double"), is
// written once, as OUTDIR/NNN.cubin, and OUTDIR/index.txt lists
// "NNN.cubin<TAB>description". The planner honours the CUDANONLOCALMEANS_* overrides, so a forced
// shape (e.g. CUDANONLOCALMEANS_BUFFERED_WEIGHTS=10,128,12) is written in place of its choice.
// --quick takes fewer patch sizes and distances (a part of the full grid); --only TEXT (repeatable)
// writes only the configurations whose description holds every TEXT, e.g. --only "2D K1 s11".

#include "itkCudaDriver.h"
#include "itkNonLocalMeansKernelCompiler.h"
#include "itkNonLocalMeansLaunchPlan.h"
#include "itkNonLocalMeansOverrides.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace
{
using Problem = itk::NonLocalMeansBackend::Problem;
using ElementType = itk::NonLocalMeansBackend::ElementType;

/** The variants of a problem whose kernels differ: pixel types, precision, channels and the opt-in
 * extensions. */
enum class Variant
{
  Float32,
  Float64,
  Single,
  ThreeChannels,
  Rician,
  NoiseMap,
  Classic,
  PerAxis
};
const Variant AllVariants[] = { Variant::Float32, Variant::Float64,  Variant::Single,  Variant::ThreeChannels,
                                Variant::Rician,  Variant::NoiseMap, Variant::Classic, Variant::PerAxis };

// Stand-ins for the buffers: VerifyProblem and the planner ask only whether there are any.
const double NoiseSigmaStandIn = 0.1;
double       BufferStandIn = 0.0;

Problem
MakeProblem(unsigned int dimension, std::int64_t side, int patch, int distance, Variant variant)
{
  Problem p;
  p.Input = p.Output = &BufferStandIn;
  p.Dimension = dimension;
  for (unsigned int a = 0; a < dimension; ++a)
  {
    p.ImageSize[a] = p.InputSize[a] = p.OutputSize[a] = side;
  }
  const bool doubles = variant == Variant::Float64 || variant == Variant::Rician;
  p.InputType = p.OutputType = doubles ? ElementType::Float64 : ElementType::Float32;
  p.Components = variant == Variant::ThreeChannels ? 3 : 1;
  p.PatchSize = patch;
  p.PatchDistance = distance;
  p.H = 0.1;
  p.Sigma = 0.05;
  p.SinglePrecision = variant == Variant::Single;
  p.FastMode = variant != Variant::Classic;
  if (variant == Variant::Rician)
  {
    p.NoiseModel = itk::CudaNonLocalMeansImageFilterEnums::NoiseModel::Rician;
  }
  if (variant == Variant::NoiseMap)
  {
    p.NoiseSigma = &NoiseSigmaStandIn;
  }
  if (variant == Variant::PerAxis)
  {
    p.PerAxis = true;
    for (unsigned int a = 0; a < dimension; ++a)
    {
      p.AxisPatchSize[a] = (a + 1 == dimension) ? 3 : patch; // thin along the outermost axis
      p.AxisPatchDistance[a] = (a == 0) ? distance : (distance + 1) / 2;
    }
  }
  return p;
}

struct Grid
{
  unsigned int     dimension;
  std::int64_t     side;
  std::vector<int> patches, distances;
};

std::vector<Grid>
Grids(bool quick)
{
  if (quick)
  {
    return { { 2, 4096, { 3, 7 }, { 5, 11 } },
             { 3, 256, { 3, 5, 7, 9, 11 }, { 3, 5, 11 } },
             { 4, 40, { 3, 5 }, { 1, 2 } } };
  }
  return { { 2, 4096, { 1, 3, 5, 7, 9, 11, 15, 21 }, { 1, 3, 5, 7, 11, 21 } },
           { 3, 256, { 1, 3, 5, 7, 9, 11, 13, 15, 21 }, { 1, 2, 3, 5, 7, 11, 21 } },
           { 4, 40, { 1, 3, 5, 7 }, { 1, 2, 3 } } };
}
} // namespace

int
main(int argc, char * argv[])
{
  if (argc < 2)
  {
    std::cerr << "Usage: " << argv[0] << " OUTDIR [ARCH] [--quick] [--only TEXT]..." << std::endl;
    return EXIT_FAILURE;
  }
  const std::string        outDir = argv[1];
  int                      arch = 90;
  bool                     quick = false;
  std::vector<std::string> only;
  for (int i = 2; i < argc; ++i)
  {
    const std::string a = argv[i];
    if (a == "--quick")
    {
      quick = true;
    }
    else if (a == "--only")
    {
      if (i + 1 == argc)
      {
        std::cerr << "--only needs a text, e.g. --only \"2D K1 s11\"." << std::endl;
        return EXIT_FAILURE;
      }
      only.emplace_back(argv[++i]);
    }
    else
    {
      arch = std::atoi(a.c_str());
    }
  }
  std::string                 why;
  const itk::cuda::NvrtcAPI * nvrtc = itk::cuda::GetNvrtc(why);
  if (nvrtc == nullptr)
  {
    std::cerr << "No NVRTC: " << why << std::endl;
    return EXIT_FAILURE;
  }
  itk::nlm::Overrides overrides = itk::nlm::GetOverrides();
  overrides.KernelCacheDirectory.clear(); // compile every configuration
  itk::nlm::SetOverrides(overrides);
  itk::nlm::DeviceLimits limits; // an H200's, for the architecture asked for
  limits.Architecture = arch;

  std::set<std::string> written;
  std::ofstream         index(outDir + "/index.txt");
  if (!index)
  {
    std::cerr << "Cannot write " << outDir << "/index.txt: create the folder first." << std::endl;
    return EXIT_FAILURE;
  }
  int        failures = 0;
  const auto write = [&](const itk::nlm::KernelConfig & config) { // once per description, if wanted
    const std::string description = config.Describe();
    const bool        wanted = std::all_of(
      only.begin(), only.end(), [&](const std::string & text) { return description.find(text) != std::string::npos; });
    if (!wanted || !written.insert(description).second)
    {
      return;
    }
    try
    {
      const auto         k = itk::nlm::CompileKernel(*nvrtc, config, arch);
      std::ostringstream name;
      name << std::setw(3) << std::setfill('0') << written.size() << (k.IsPTX ? ".ptx" : ".cubin");
      std::ofstream(outDir + "/" + name.str(), std::ios::binary).write(k.Image.data(), k.Image.size());
      index << name.str() << '\t' << description << '\n';
    }
    catch (const itk::ExceptionObject & e)
    {
      std::cerr << "FAIL " << description << ": " << e.GetDescription() << std::endl;
      ++failures;
    }
  };
  for (const Grid & g : Grids(quick))
  {
    for (Variant variant : AllVariants)
    {
      for (int s : g.patches)
      {
        for (int d : g.distances)
        {
          const Problem          problem = MakeProblem(g.dimension, g.side, s, d, variant);
          itk::nlm::KernelConfig config;
          try
          {
            itk::NonLocalMeansBackend::VerifyProblem(problem);
            config = itk::nlm::ChooseConfiguration(problem, limits, overrides);
          }
          catch (const itk::ExceptionObject &)
          {
            continue; // not a problem the backends take (slow mode in 4D), or beyond the device's limits
          }
          write(config);
          write(itk::nlm::PaddingConfig(config)); // the padding module it uses
        }
      }
    }
  }
  std::cout << written.size() << " modules (configurations and padding modules) for sm_" << arch << " in " << outDir
            << std::endl;
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
