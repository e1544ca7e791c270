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
#ifndef itkNonLocalMeansInputChecks_h
#define itkNonLocalMeansInputChecks_h

// The check that every input value is finite, shared by the backends (a pass of its own, or fused
// into the CUDA backend's staged upload). Private to the library.

#include "itkNonLocalMeansBackend.h"

#include <cstddef>

namespace itk
{
namespace nlm
{

/** Checks that every input value is finite; throws ExceptionObject naming the first that is not.
 * With a threader and more than one work unit the check runs in parallel. */
void
VerifyInputIsFinite(const NonLocalMeansBackend::Problem & problem,
                    MultiThreaderBase *                   threader = nullptr,
                    unsigned int                          workUnits = 1);

/** Whether the `count` values of type `type` at `data` hold a NaN or an infinity (no exception:
 * for checks fused into other passes over the input, which then call VerifyInputIsFinite). */
bool
HoldsNonFinite(const void * data, std::size_t count, NonLocalMeansBackend::ElementType type);

} // namespace nlm
} // namespace itk

#endif
