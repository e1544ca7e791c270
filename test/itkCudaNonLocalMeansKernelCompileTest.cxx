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

// Every kernel variant, and the padding module of each pixel types, compiles with NVRTC for the
// architectures given on the command line (default sm_80 and sm_90; CTest also runs it with NVRTC
// 12 for sm_61, which CUDA 13 no longer supports). Needs an NVRTC library but no GPU; exits 77
// (skipped) when no NVRTC can be loaded.

#include "itkCudaNonLocalMeansCompileTestSetup.h"
#include "itkNonLocalMeansKernelCompiler.h"
#include "itkNonLocalMeansOverrides.h"
#include "itkCudaDriver.h"
#include "itkMacro.h"

#include <chrono>
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <vector>

int
itkCudaNonLocalMeansKernelCompileTest(int argc, char * argv[])
{
  std::vector<int>            archs;
  itk::nlm::Overrides         overrides;
  const itk::cuda::NvrtcAPI * nvrtc = itk::nlm_test::SetUpColdCompiles(argc, argv, archs, overrides);
  if (nvrtc == nullptr)
  {
    return 77;
  }

  // The variants: every tile shape the CUDA backend may choose, for each dimension, and the
  // parameters that are compile-time constants (components, patch size, distance, element types,
  // arithmetic, index width).
  struct Variant
  {
    int  dim, k, s, d, t0, t1, t2, t3, threads, segments;
    bool inDouble, outDouble, single, wide;
    int  rows;     // column kernel (0: tiled)
    int  features; // 1: Rician, 2: noise map, 3: both; 4: the classic kernel (slow mode); 8: the
                   // column kernel's footprint from global memory; 16: the shared-rows kernel; 32:
                   // the buffered-weights kernel; 64: the tiled kernel's corrected weights
  };
  std::vector<Variant> variants = {
    // 2D tiles
    { 2, 1, 7, 11, 16, 32, 1, 1, 128, 1, false, false, false, false },
    { 2, 3, 3, 5, 24, 16, 1, 1, 128, 1, true, true, false, false },
    { 2, 1, 1, 2, 32, 16, 1, 1, 256, 1, false, true, false, false },
    { 2, 2, 5, 4, 32, 16, 1, 1, 128, 1, true, false, true, false },
    { 2, 1, 3, 0, 8, 8, 1, 1, 32, 1, false, false, false, true },
    // 3D tiles
    { 3, 1, 3, 3, 28, 8, 8, 1, 224, 2, false, false, false, false },
    { 3, 1, 3, 3, 16, 16, 8, 1, 256, 1, true, true, false, false },
    { 3, 1, 3, 3, 28, 16, 8, 1, 512, 4, false, false, true, false },
    { 3, 3, 3, 2, 28, 8, 4, 1, 224, 1, false, false, false, false },
    { 3, 1, 5, 2, 16, 8, 8, 1, 256, 2, true, false, false, true },
    { 3, 1, 7, 11, 16, 8, 4, 1, 128, 1, false, false, false, false },
    { 3, 2, 1, 1, 16, 16, 4, 1, 256, 1, false, false, false, false },
    { 3, 1, 3, 3, 8, 8, 8, 1, 128, 4, true, true, true, false },
    // Large patches and distances (the tiled kernel; nothing is unrolled per patch offset)
    { 3, 1, 11, 5, 16, 16, 16, 1, 1024, 2, true, true, false, false },
    { 3, 1, 21, 21, 16, 16, 8, 1, 256, 1, true, true, false, false },
    { 2, 1, 21, 21, 32, 16, 1, 1, 256, 1, true, true, false, false },
    { 4, 1, 21, 3, 8, 8, 4, 4, 256, 1, true, true, false, false },
    // 3D columns
    { 3, 1, 3, 3, 31, 8, 8, 1, 128, 1, false, false, false, false, 2 },
    { 3, 1, 3, 3, 31, 8, 8, 1, 256, 1, true, true, false, false, 1 },
    { 3, 1, 3, 3, 31, 8, 8, 1, 128, 1, true, true, true, false, 2 },
    { 3, 1, 3, 3, 31, 12, 4, 1, 128, 1, false, false, false, false, 3 },
    { 3, 3, 3, 2, 31, 8, 4, 1, 128, 1, false, false, false, false, 2 },
    { 3, 1, 5, 2, 29, 8, 4, 1, 256, 1, true, false, false, true, 1 },
    { 3, 1, 7, 11, 27, 4, 4, 1, 128, 1, false, true, false, false, 1 },
    { 3, 16, 3, 1, 31, 4, 1, 1, 128, 1, false, false, false, false, 1 },
    // 3D columns reading their footprint from global memory (any distance)
    { 3, 1, 3, 3, 31, 16, 2, 1, 256, 1, false, false, false, false, 2, 8 },
    { 3, 1, 3, 21, 31, 16, 2, 1, 256, 1, true, true, false, true, 2, 8 },
    { 3, 3, 3, 11, 31, 4, 4, 1, 128, 1, false, false, true, false, 1, 8 },
    { 3, 1, 5, 15, 29, 8, 2, 1, 128, 1, true, true, false, false, 2, 9 },
    // The 3D shared-rows kernel (large patches): {..., t0 = 32 - (s - 2), warps = t1, planes = t2}
    { 3, 1, 7, 11, 27, 16, 8, 1, 512, 1, false, false, false, false, 0, 16 },
    { 3, 1, 7, 11, 27, 16, 8, 1, 512, 1, true, true, false, true, 0, 16 },
    { 3, 1, 11, 5, 23, 8, 16, 1, 256, 1, false, true, true, false, 0, 16 },
    { 3, 3, 5, 3, 29, 16, 4, 1, 512, 1, false, false, false, false, 0, 17 },
    { 3, 1, 21, 21, 13, 16, 4, 1, 512, 1, true, true, false, false, 0, 17 },
    // The 3D buffered-weights kernel (large patches): {..., t0 = 32 - (s - 2), warps = t1, planes = t2}
    // (128 planes as the planner chooses, 64 where memory is short; 20 warps at patch 11 in float64,
    // and the widest forced block of 32)
    { 3, 1, 7, 11, 27, 8, 128, 1, 256, 1, false, false, false, false, 0, 32 },
    { 3, 1, 5, 6, 29, 8, 128, 1, 256, 1, true, true, false, false, 0, 33 },
    { 3, 1, 11, 5, 23, 20, 128, 1, 640, 1, false, false, false, false, 0, 32 },
    { 3, 1, 11, 4, 23, 32, 16, 1, 1024, 1, true, false, false, false, 0, 32 },
    { 3, 3, 9, 4, 25, 8, 64, 1, 256, 1, false, true, false, false, 0, 32 },
    { 3, 1, 7, 11, 27, 8, 64, 1, 256, 1, false, false, true, false, 0, 33 },
    { 3, 1, 21, 21, 13, 8, 64, 1, 256, 1, true, true, false, false, 0, 32 },
    { 3, 1, 3, 2, 31, 8, 64, 1, 256, 1, false, true, false, false, 0, 32 },
    // 4D tiles
    { 4, 1, 3, 2, 8, 8, 4, 4, 256, 1, true, true, false, false },
    { 4, 2, 3, 1, 16, 8, 4, 2, 256, 1, false, false, false, false },
    { 4, 1, 5, 1, 8, 4, 2, 2, 32, 1, false, true, true, true },
    // The extensions (contract section 6): Rician and noise maps on the tiled kernel, Rician on
    // the column kernel
    { 2, 1, 7, 11, 16, 32, 1, 1, 128, 1, false, false, false, false, 0, 3 },
    { 2, 3, 3, 5, 24, 16, 1, 1, 128, 1, true, true, false, false, 0, 2 },
    { 3, 1, 3, 3, 16, 16, 8, 1, 256, 1, true, true, false, false, 0, 3 },
    { 3, 1, 5, 2, 16, 8, 8, 1, 256, 2, true, false, true, true, 0, 3 },
    { 3, 1, 21, 21, 16, 16, 8, 1, 256, 1, true, true, false, false, 0, 3 },
    { 4, 1, 3, 2, 8, 8, 4, 4, 256, 1, true, true, false, false, 0, 3 },
    { 3, 1, 3, 3, 31, 8, 8, 1, 128, 1, false, false, false, false, 2, 1 },
    { 3, 1, 3, 3, 31, 8, 8, 1, 128, 1, true, true, true, false, 2, 1 },
    // The tiled kernel's float64 weights by the corrected quotient (NLM_CORRECTED_WEIGHTS)
    { 2, 1, 7, 11, 16, 32, 1, 1, 128, 1, false, false, false, false, 0, 64 },
    { 3, 3, 3, 2, 28, 8, 4, 1, 224, 1, false, false, false, false, 0, 64 },
    { 3, 1, 3, 3, 16, 16, 8, 1, 256, 1, true, true, false, false, 0, 65 },
    { 4, 1, 3, 2, 8, 8, 4, 4, 256, 1, true, true, false, false, 0, 64 },
    // The classic kernel (slow mode): 2D with channels, 3D, float and double, Rician
    { 2, 1, 7, 11, 16, 16, 1, 1, 256, 1, false, false, false, false, 0, 4 },
    { 2, 3, 5, 3, 16, 16, 1, 1, 256, 1, true, true, false, false, 0, 5 },
    { 3, 1, 3, 2, 8, 8, 4, 1, 256, 1, true, false, false, false, 0, 4 },
    { 3, 1, 21, 21, 8, 8, 4, 1, 256, 1, false, true, false, false, 0, 5 },
  };
  // Per-axis patch sizes and distances (contract 6.4; the tiled kernel): {dim, s0..s3, d0..d3, tile}.
  struct PerAxisVariant
  {
    int dim, s[4], d[4], t[4], threads;
  };
  const std::vector<PerAxisVariant> perAxis = {
    { 2, { 5, 3, 1, 1 }, { 2, 6, 0, 0 }, { 16, 16, 1, 1 }, 256 },
    { 3, { 3, 3, 7 }, { 3, 3, 1 }, { 16, 8, 8, 1 }, 256 },
    { 3, { 9, 3, 3 }, { 1, 4, 2 }, { 8, 8, 4, 1 }, 128 },
    { 4, { 3, 3, 3, 5 }, { 1, 2, 1, 1 }, { 8, 4, 4, 2 }, 256 },
  };
  int        failures = 0;
  const auto compile = [&](const itk::nlm::KernelConfig & c) { // for every architecture
    for (int arch : archs)
    {
      try
      {
        const auto k = itk::nlm::CompileKernel(*nvrtc, c, arch);
        std::cout << "ok   " << k.Target << " " << c.Describe() << ": " << k.Image.size() << " bytes, "
                  << static_cast<int>(k.Milliseconds) << " ms" << std::endl;
        if (!overrides.NvrtcOptions.empty() && !k.Log.empty())
        {
          std::cout << k.Log << std::endl;
        }
      }
      catch (const itk::ExceptionObject & e)
      {
        std::cout << "FAIL sm_" << arch << " " << c.Describe() << ": " << e.GetDescription() << std::endl;
        ++failures;
      }
    }
  };
  for (const auto & v : perAxis)
  {
    itk::nlm::KernelConfig c;
    c.Dimension = v.dim;
    c.PatchSize = *std::max_element(v.s, v.s + v.dim);
    c.PatchDistance = *std::max_element(v.d, v.d + v.dim);
    for (int a = 0; a < 4; ++a)
    {
      c.AxisPatchSize[a] = (a < v.dim) ? v.s[a] : 1;
      c.AxisPatchDistance[a] = (a < v.dim) ? v.d[a] : 0;
      c.Tile[a] = v.t[a];
    }
    c.ThreadCount = v.threads;
    c.InputDouble = c.OutputDouble = true;
    c.Rician = (v.dim == 3);
    c.CorrectedWeights = (v.dim >= 3);
    compile(c);
  }
  for (const auto & v : variants)
  {
    itk::nlm::KernelConfig c;
    c.Dimension = v.dim;
    c.Components = v.k;
    c.PatchSize = v.s;
    c.PatchDistance = v.d;
    c.Tile[0] = v.t0;
    c.Tile[1] = v.t1;
    c.Tile[2] = v.t2;
    c.Tile[3] = v.t3;
    c.ThreadCount = v.threads;
    c.ZSegments = v.segments;
    c.InputDouble = v.inDouble;
    c.OutputDouble = v.outDouble;
    c.SinglePrecision = v.single;
    c.WideIndex = v.wide;
    c.Rows = v.rows;
    c.Rician = (v.features & 1) != 0;
    c.NoiseMap = (v.features & 2) != 0;
    c.Classic = (v.features & 4) != 0;
    c.GlobalFootprint = (v.features & 8) != 0;
    c.SharedRows = (v.features & 16) != 0;
    c.WeightBatch = (v.features & 32) != 0 ? 12 : 0;
    c.CorrectedWeights = (v.features & 64) != 0;
    compile(c);
  }
  // The padding modules (one per input type, arithmetic type and component count).
  for (int k : { 1, 2, 3 })
  {
    for (int types = 0; types < 4; ++types)
    {
      itk::nlm::KernelConfig c;
      c.Components = k;
      c.InputDouble = (types & 1) != 0;
      c.SinglePrecision = (types & 2) != 0;
      compile(itk::nlm::PaddingConfig(c));
    }
  }
  std::cout << (failures == 0 ? "All variants compile." : "Some variants FAILED to compile.") << std::endl;
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
