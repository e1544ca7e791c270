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
// The CPU fast-mode kernels for every CPU (plain scalar code, and 2-lane vectors: SSE2 on x86-64,
// NEON on AArch64) and the choice among all targets at run time. The wider x86-64 targets are in
// itkNonLocalMeansCPUKernelsAVX2.cxx and itkNonLocalMeansCPUKernelsAVX512.cxx.

#include "itkNonLocalMeansCPUKernels.h"

#include "itkMacro.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#define NLM_LANES 1
#define NLM_TARGET "scalar"
#define NLM_NAMESPACE scalar
#define NLM_KERNELS_GETTER ScalarKernels
#include "itkNonLocalMeansCPUKernels.hxx"
#undef NLM_LANES
#undef NLM_TARGET
#undef NLM_NAMESPACE
#undef NLM_KERNELS_GETTER

#if (defined(__GNUC__) || defined(__clang__)) && !defined(_MSC_VER)
#  define NLM_LANES 2
#  if defined(__x86_64__) || defined(_M_X64)
#    define NLM_TARGET "sse2"
#  elif defined(__aarch64__)
#    define NLM_TARGET "neon"
#  else
#    define NLM_TARGET "vector2"
#  endif
#  define NLM_NAMESPACE baseline
#  define NLM_KERNELS_GETTER BaselineKernels
#  include "itkNonLocalMeansCPUKernels.hxx"
#else
namespace itk::nlm::cpu
{
const Kernels *
BaselineKernels()
{
  return nullptr; // no vector extensions in this compiler: the scalar kernels serve
}
} // namespace itk::nlm::cpu
#endif

namespace itk
{
namespace nlm
{
namespace cpu
{
namespace
{
/** Whether this CPU (and its operating system) runs the named x86-64 instruction set. */
bool
CPURuns(const char * feature)
{
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__)) && !defined(_MSC_VER)
  // (clang-cl does not link the run-time support of __builtin_cpu_supports; it builds no AVX target.)
  __builtin_cpu_init();
  if (std::string(feature) == "avx512f")
  {
    return __builtin_cpu_supports("avx512f");
  }
  return __builtin_cpu_supports("avx2");
#else
  (void)feature;
  return false;
#endif
}
} // namespace

std::vector<const Kernels *>
AvailableKernels()
{
  std::vector<const Kernels *> available;
  if (CPURuns("avx512f") && AVX512Kernels() != nullptr)
  {
    available.push_back(AVX512Kernels());
  }
  if (CPURuns("avx2") && AVX2Kernels() != nullptr)
  {
    available.push_back(AVX2Kernels());
  }
  if (BaselineKernels() != nullptr)
  {
    available.push_back(BaselineKernels());
  }
  available.push_back(ScalarKernels());
  return available;
}

const Kernels &
SelectKernels(const std::string & request)
{
  std::string name = request;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::vector<const Kernels *> available = AvailableKernels();
  if (name.empty() || name == "auto")
  {
    return *available.front();
  }
  std::ostringstream names;
  for (const Kernels * k : available)
  {
    if (name == k->Name)
    {
      return *k;
    }
    names << (k == available.front() ? "" : ", ") << k->Name;
  }
  itkGenericExceptionMacro("CUDANONLOCALMEANS_CPU_SIMD is \""
                           << request << "\", which this build of the CPU backend cannot run on this CPU; set it to "
                           << "one of " << names.str() << " or auto, or unset it.");
}

} // namespace cpu
} // namespace nlm
} // namespace itk
