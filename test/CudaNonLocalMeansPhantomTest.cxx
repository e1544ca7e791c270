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

// The main job on its built-in data denoises: the program's RMS error against the clean phantom
// falls to less than half of the noisy input's.

#include "CudaNonLocalMeansDenoiseProgram.h"

#include <cstdlib>
#include <iostream>
#include <regex>
#include <sstream>

int
CudaNonLocalMeansPhantomTest(int argc, char * argv[])
{
  if (argc < 2)
  {
    std::cerr << "Usage: " << argv[0] << " output.mha" << std::endl;
    return EXIT_FAILURE;
  }
  std::string out, err;
  const int   status =
    RunDenoiseProgramCapturing({ "--backend", "cpu", "--phantom-size", "24", "--output", argv[1] }, out, err);
  std::cout << out << err;
  const std::regex  report(R"(RMS error against the clean phantom: noisy ([0-9.eE+-]+), denoised ([0-9.eE+-]+))");
  std::smatch       match;
  const std::string text = out;
  if (status != EXIT_SUCCESS || !std::regex_search(text, match, report))
  {
    std::cerr << "The program failed (status " << status << ") or did not report the RMS errors." << std::endl;
    return EXIT_FAILURE;
  }
  const double noisy = std::stod(match[1].str());
  const double denoised = std::stod(match[2].str());
  if (!(noisy > 0.05 && denoised < 0.5 * noisy))
  {
    std::cerr << "The RMS error did not fall by half: noisy " << noisy << ", denoised " << denoised << std::endl;
    return EXIT_FAILURE;
  }
  std::cout << "RMS error fell from " << noisy << " to " << denoised << std::endl;
  return EXIT_SUCCESS;
}
