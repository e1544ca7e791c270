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
#ifndef itkNonLocalMeansProgress_h
#define itkNonLocalMeansProgress_h

// Progress and abort requests of the filter that runs a backend, and elapsed time, for both
// backends. Private to the library.

#include "itkProcessObject.h"

#include <chrono>
#include <string>

namespace itk
{
namespace nlm
{

/** Throws ProcessAborted when `caller` (may be null) asks to abort. */
inline void
ThrowIfAborted(const ProcessObject * caller)
{
  if (caller != nullptr && caller->GetAbortGenerateData())
  {
    ProcessAborted e(__FILE__, __LINE__);
    e.SetLocation(ITK_LOCATION);
    e.SetDescription(std::string("Object ") + caller->GetNameOfClass() + ": AbortGenerateDataOn");
    throw e;
  }
}

/** Reports progress in [0, 1] to `caller` (may be null). */
inline void
ReportProgress(ProcessObject * caller, double fraction)
{
  if (caller != nullptr)
  {
    caller->UpdateProgress(static_cast<float>(fraction));
  }
}

using Clock = std::chrono::steady_clock;

/** Milliseconds from `start` to now. */
inline double
MillisecondsSince(Clock::time_point start)
{
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

} // namespace nlm
} // namespace itk

#endif
