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
#ifndef itkNonLocalMeansSlowModeKernel_h
#define itkNonLocalMeansSlowModeKernel_h

// scikit-image's slow-mode (classic) Gaussian patch kernel, computed on the host for both backends
// (doc/numerical-contract.md section 3). Private to the library.

#include <vector>

namespace itk
{
namespace nlm
{

/** The kernel wk(a) for patch offsets a in [-o, o]^n, in T (float or double), row-major with the
 * outermost axis (ITK's axis n - 1) first: e(a) = exp(-q(a) / (T)(2 A A)) with NumPy's exp, divided
 * by (K S h h) in 2D and (S h h) in 3D as NumPy 2 rounds it. */
template <typename T>
std::vector<T>
SlowModeKernel(int n, int K, int s, double h);

} // namespace nlm
} // namespace itk

#endif
