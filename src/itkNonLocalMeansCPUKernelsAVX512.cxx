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
// The CPU fast-mode kernels with 8-lane vectors, compiled with -mavx512f (see src/CMakeLists.txt) and
// run only where the CPU has it (SelectKernels).

#include "itkNonLocalMeansCPUKernels.h"

#if defined(ITK_NLM_BUILD_AVX512_KERNELS)
#  define NLM_LANES 8
#  define NLM_TARGET "avx512"
#  define NLM_NAMESPACE avx512
#  define NLM_KERNELS_GETTER AVX512Kernels
#  include "itkNonLocalMeansCPUKernels.hxx"
#else
namespace itk::nlm::cpu
{
const Kernels *
AVX512Kernels()
{
  return nullptr; // this compiler or architecture has no avx512 build
}
} // namespace itk::nlm::cpu
#endif
