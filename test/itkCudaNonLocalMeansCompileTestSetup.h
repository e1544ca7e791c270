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
#ifndef itkCudaNonLocalMeansCompileTestSetup_h
#define itkCudaNonLocalMeansCompileTestSetup_h

// What the NVRTC compile tests share: the NVRTC library, the disk cache turned off (every compile
// is cold), and the architectures from the command line.

#include "itkNonLocalMeansKernelCompiler.h"
#include "itkNonLocalMeansOverrides.h"
#include "itkCudaDriver.h"

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace itk
{
namespace nlm_test
{
/** The NVRTC to compile with (null, after saying why, when none can be loaded: the test then exits
 * 77), with the disk cache off in `overrides` (also set as the process's); `archs` gets the
 * command line's compute capabilities, sm_80 and sm_90 when it names none. */
inline const cuda::NvrtcAPI *
SetUpColdCompiles(int argc, char * argv[], std::vector<int> & archs, nlm::Overrides & overrides)
{
  std::string                 why;
  const itk::cuda::NvrtcAPI * nvrtc = itk::cuda::GetNvrtc(why);
  if (nvrtc == nullptr)
  {
    std::cout << "Skipped: " << why << std::endl;
    return nullptr;
  }
  std::cout << "NVRTC " << nlm::NvrtcVersion(*nvrtc) / 1000.0 << " from " << cuda::GetNvrtcLibraryPath() << std::endl;
  overrides = nlm::GetOverrides();
  overrides.KernelCacheDirectory.clear();
  nlm::SetOverrides(overrides);
  archs.clear();
  for (int i = 1; i < argc; ++i)
  {
    archs.push_back(std::atoi(argv[i]));
  }
  if (archs.empty())
  {
    archs = { 80, 90 };
  }
  return nvrtc;
}
} // namespace nlm_test
} // namespace itk

#endif
