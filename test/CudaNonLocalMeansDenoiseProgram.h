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
#ifndef CudaNonLocalMeansDenoiseProgram_h
#define CudaNonLocalMeansDenoiseProgram_h

// The main job's program (examples/CudaNonLocalMeansDenoise.cxx, linked into the test driver), for
// the tests that run it.

#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

int
CudaNonLocalMeansDenoise(int argc, char * argv[]);

/** Runs the program with the given arguments (without the program name); returns its exit code. */
inline int
RunDenoiseProgram(std::vector<std::string> arguments)
{
  arguments.insert(arguments.begin(), "CudaNonLocalMeansDenoise");
  std::vector<char *> argv;
  for (auto & a : arguments)
  {
    argv.push_back(&a[0]);
  }
  return CudaNonLocalMeansDenoise(static_cast<int>(argv.size()), argv.data());
}

/** Runs the program and returns its exit code, with what it printed on standard output and error. */
inline int
RunDenoiseProgramCapturing(std::vector<std::string> arguments, std::string & out, std::string & err)
{
  std::ostringstream capturedOut, capturedErr;
  std::streambuf *   savedOut = std::cout.rdbuf(capturedOut.rdbuf());
  std::streambuf *   savedErr = std::cerr.rdbuf(capturedErr.rdbuf());
  const int          status = RunDenoiseProgram(std::move(arguments));
  std::cout.rdbuf(savedOut);
  std::cerr.rdbuf(savedErr);
  out = capturedOut.str();
  err = capturedErr.str();
  return status;
}

#endif // CudaNonLocalMeansDenoiseProgram_h
