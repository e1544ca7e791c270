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


// The command-line program refuses bad options and unwritable outputs before any computation, with a
// message that names the option and the value (or the file) and what to give instead.

#include "CudaNonLocalMeansDenoiseProgram.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>


int
CudaNonLocalMeansDenoiseArgumentsTest(int argc, char * argv[])
{
  if (argc < 2)
  {
    std::cerr << "Usage: " << argv[0] << " output-folder\n";
    return EXIT_FAILURE;
  }
  const std::string folder = argv[1];
  const std::string output = folder + "/CudaNonLocalMeansArguments.mha";
  struct Case
  {
    std::vector<std::string> arguments;
    std::string              message;
  };
  const std::vector<Case> cases = {
    { { "--patch-size", "-7" }, "--patch-size must be 1 or more, not -7" },
    { { "--patch-size", "0" }, "--patch-size must be 1 or more, not 0" },
    { { "--patch-size", "3abc" }, "--patch-size takes a whole number, not \"3abc\"" },
    { { "--patch-size", "3.9" }, "--patch-size takes a whole number, not \"3.9\"" },
    { { "--patch-distance", "-1" }, "--patch-distance must be 0 or more, not -1" },
    { { "--patch-distance", "99999999999" }, "--patch-distance takes a whole number, not \"99999999999\"" },
    { { "--h", "-0.5" }, "--h must be greater than 0, not -0.5" },
    { { "--h", "0" }, "--h must be greater than 0, not 0" },
    { { "--sigma", "-0.05" }, "--sigma must be at least 0, not -0.05" },
    { { "--sigma", "0.1x" }, "--sigma takes a finite number, not \"0.1x\"" },
    { { "--max-gpu-memory", "nan" }, "--max-gpu-memory takes a finite number, not \"nan\"" },
    { { "--max-gpu-memory", "-1" }, "--max-gpu-memory must be at least 0, not -1" },
    { { "--threads", "0" }, "--threads must be 1 or more, not 0" },
    { { "--repeat", "" }, "--repeat takes a whole number, not \"\"" },
    { { "--backend", "gpu" }, "--backend must be auto, cpu or cuda, not gpu" },
    { { "--patch-size" }, "missing value after --patch-size" },
    { { "--output", folder + "/no-such-folder/denoised.mha" }, "check that its folder exists and is writable" },
    { { "--output", folder + "/denoised.unknown-extension" }, "no ITK image writer handles" },
    { { "--preview", folder + "/no-such-folder/preview.png" }, "check that its folder exists and is writable" },
  };
  bool ok = true;
  for (const auto & c : cases)
  {
    std::remove(output.c_str());
    std::vector<std::string> arguments = { "--backend", "cpu", "--phantom-size", "8", "--output", output };
    arguments.insert(arguments.end(), c.arguments.begin(), c.arguments.end());
    std::string out, err;
    const int   status = RunDenoiseProgramCapturing(arguments, out, err);
    const bool  refused = status != EXIT_SUCCESS && err.find(c.message) != std::string::npos;
    const bool  nothingComputed = out.find("Backend:") == std::string::npos && !std::ifstream(output).good();
    std::string shown = err.substr(0, err.find('\n'));
    std::cout << (refused && nothingComputed ? "ok:   " : "FAIL: ") << c.arguments.front() << " "
              << (c.arguments.size() > 1 ? c.arguments.back() : "") << " -> " << shown << "\n";
    ok = ok && refused && nothingComputed;
  }
  std::string out, err;
  const bool  runs = RunDenoiseProgramCapturing({ "--backend",
                                                  "cpu",
                                                  "--phantom-size",
                                                  "8",
                                                  "--output",
                                                  output,
                                                  "--patch-size",
                                                  "3",
                                                  "--patch-distance",
                                                  "1",
                                                  "--h",
                                                  "0.1",
                                                  "--sigma",
                                                  "0",
                                                  "--threads",
                                                  "2" },
                                               out,
                                               err) == EXIT_SUCCESS &&
                    std::ifstream(output).good();
  std::cout << (runs ? "ok:   " : "FAIL: ") << "valid options run and write the output\n";
  return ok && runs ? EXIT_SUCCESS : EXIT_FAILURE;
}
