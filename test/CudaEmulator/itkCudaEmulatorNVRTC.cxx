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

// The CUDA emulator's NVRTC (test/CudaEmulator/README.md): the functions of libnvrtc that the module
// calls, compiling the kernel sources with the host C++ compiler into a shared library (its
// "cubin") that the emulated driver loads. The kernels are the module's own text, with
// itkCudaEmulatorKernelRuntime.h included first and each kernel given an entry point that runs its
// grid.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace
{
struct Program
{
  std::string                                      Source;
  std::string                                      Name;
  std::vector<std::pair<std::string, std::string>> Headers;
  std::string                                      Log;
  std::string                                      Image;
};

constexpr int kSuccess = 0;
constexpr int kInvalidInput = 3;
constexpr int kInvalidProgram = 4;
constexpr int kCompilationError = 6;

/** `extern __shared__ T name[];` becomes a pointer to the block's emulated shared memory. */
std::string
WithEmulatedSharedMemory(const std::string & text)
{
  static const std::regex dynamicShared(R"(extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;)");
  return std::regex_replace(text, dynamicShared, "$1 * $2 = NLM_EMULATOR_DYNAMIC_SHARED($1);");
}

/** The names of the `extern "C" __global__` functions of a text. */
std::vector<std::string>
KernelNames(const std::string & text)
{
  static const std::regex kernel(
    R"(extern\s+"C"\s+__global__\s+void\s+(__launch_bounds__\s*\([^;{]*?\)\s*)?(\w+)\s*\()");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kernel); it != std::sregex_iterator(); ++it)
  {
    names.push_back((*it)[2].str());
  }
  return names;
}

bool
WriteFile(const std::string & path, const std::string & text)
{
  std::ofstream f(path, std::ios::binary);
  f << text;
  return static_cast<bool>(f);
}

std::string
ReadFile(const std::string & path)
{
  std::ifstream      f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

/** Runs argv with its output and errors into `log`; true when it exits with 0. */
bool
Run(const std::vector<std::string> & argv, const std::string & logPath)
{
  const pid_t pid = fork();
  if (pid == 0)
  {
    std::vector<char *> args;
    for (const auto & a : argv)
    {
      args.push_back(const_cast<char *>(a.c_str()));
    }
    args.push_back(nullptr);
    if (freopen(logPath.c_str(), "w", stdout) == nullptr || dup2(fileno(stdout), 2) < 0)
    {
      _exit(126);
    }
    unsetenv("LD_PRELOAD"); // a sanitizer runtime preloaded into the tests is not the compiler's
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string
Compiler()
{
  const char * cxx = std::getenv("CUDA_EMULATOR_CXX");
  return (cxx != nullptr && *cxx != '\0') ? cxx : NLM_EMULATOR_CXX;
}

void
RemoveFolder(const std::string & dir, const std::vector<std::string> & files)
{
  for (const auto & f : files)
  {
    std::remove((dir + "/" + f).c_str());
  }
  rmdir(dir.c_str());
}

int
Compile(Program & p, int count, const char * const * options)
{
  const char * tmp = std::getenv("TMPDIR");
  std::string  dir = std::string((tmp != nullptr && *tmp != '\0') ? tmp : "/tmp") + "/nlm-cuda-emulator-XXXXXX";
  if (mkdtemp(&dir[0]) == nullptr)
  {
    p.Log = "cannot create a temporary folder for the emulated compile";
    return kCompilationError;
  }
  std::vector<std::string> files;
  bool                     written = true;
  for (const auto & h : p.Headers)
  {
    written = written && WriteFile(dir + "/" + h.first, WithEmulatedSharedMemory(h.second));
    files.push_back(h.first);
  }
  std::string source = WithEmulatedSharedMemory(p.Source) + "\n";
  std::string everything = p.Source;
  for (const auto & h : p.Headers)
  {
    everything += "\n" + h.second;
  }
  for (const auto & name : KernelNames(everything))
  {
    source += "extern \"C\" __attribute__((visibility(\"default\"))) void nlm_emu_launch_" + name +
              "(const ::nlm_emu::Launch * launch, void ** args)\n{\n  ::nlm_emu::LaunchKernel(&" + name + ", \"" +
              name + "\", *launch, args);\n}\n";
  }
  written = written && WriteFile(dir + "/kernels.cpp", source);
  files.insert(files.end(), { "kernels.cpp", "kernels.so", "log.txt" });
  std::vector<std::string> argv = { Compiler(),
                                    "-std=c++17",
                                    "-O1",
                                    "-fPIC",
                                    "-shared",
                                    "-fvisibility=hidden",
                                    "-ffp-contract=off",
                                    "-fno-fast-math",
                                    "-w",
                                    "-include",
                                    NLM_EMULATOR_RUNTIME,
                                    "-I" + dir };
  for (int i = 0; i < count; ++i)
  {
    const std::string o = options[i];
    if (o.rfind("-D", 0) == 0 || o.rfind("-U", 0) == 0)
    {
      argv.push_back(o);
    }
    else if (o.rfind("--gpu-architecture=sm_", 0) == 0) // the driver loads the module on that architecture only
    {
      argv.push_back("-DNLM_EMULATOR_ARCHITECTURE=" + o.substr(std::strlen("--gpu-architecture=sm_")));
    }
  }
  std::istringstream extra(std::getenv("CUDA_EMULATOR_CXXFLAGS") != nullptr ? std::getenv("CUDA_EMULATOR_CXXFLAGS")
                                                                            : "");
  for (std::string flag; extra >> flag;)
  {
    argv.push_back(flag);
  }
  argv.insert(argv.end(), { "-x", "c++", dir + "/kernels.cpp", "-o", dir + "/kernels.so", "-lpthread" });
  const bool ok = written && Run(argv, dir + "/log.txt");
  p.Log = ReadFile(dir + "/log.txt");
  p.Image = ok ? ReadFile(dir + "/kernels.so") : std::string();
  RemoveFolder(dir, files);
  return (ok && !p.Image.empty()) ? kSuccess : kCompilationError;
}
} // namespace

extern "C"
{
  int
  nvrtcVersion(int * major, int * minor)
  {
    *major = 13;
    *minor = 0;
    return kSuccess;
  }

  const char *
  nvrtcGetErrorString(int result)
  {
    switch (result)
    {
      case kSuccess:
        return "NVRTC_SUCCESS";
      case kInvalidInput:
        return "NVRTC_ERROR_INVALID_INPUT";
      case kInvalidProgram:
        return "NVRTC_ERROR_INVALID_PROGRAM";
      case kCompilationError:
        return "NVRTC_ERROR_COMPILATION (CUDA emulator: the host compiler failed)";
      default:
        return "NVRTC_ERROR (CUDA emulator)";
    }
  }

  int
  nvrtcGetNumSupportedArchs(int * count)
  {
    *count = 5;
    return kSuccess;
  }

  int
  nvrtcGetSupportedArchs(int * archs)
  {
    const int known[] = { 75, 80, 86, 89, 90 };
    std::memcpy(archs, known, sizeof(known));
    return kSuccess;
  }

  int
  nvrtcCreateProgram(Program **           program,
                     const char *         source,
                     const char *         name,
                     int                  headerCount,
                     const char * const * headers,
                     const char * const * includeNames)
  {
    if (program == nullptr || source == nullptr)
    {
      return kInvalidInput;
    }
    auto * p = new Program;
    p->Source = source;
    p->Name = (name != nullptr) ? name : "kernels.cu";
    for (int h = 0; h < headerCount; ++h)
    {
      p->Headers.emplace_back(includeNames[h], headers[h]);
    }
    *program = p;
    return kSuccess;
  }

  int
  nvrtcDestroyProgram(Program ** program)
  {
    if (program == nullptr || *program == nullptr)
    {
      return kInvalidProgram;
    }
    delete *program;
    *program = nullptr;
    return kSuccess;
  }

  int
  nvrtcCompileProgram(Program * program, int count, const char * const * options)
  {
    return (program == nullptr) ? kInvalidProgram : Compile(*program, count, options);
  }

  int
  nvrtcGetProgramLogSize(Program * program, size_t * size)
  {
    *size = program->Log.size() + 1;
    return kSuccess;
  }

  int
  nvrtcGetProgramLog(Program * program, char * log)
  {
    std::memcpy(log, program->Log.c_str(), program->Log.size() + 1);
    return kSuccess;
  }

  int
  nvrtcGetCUBINSize(Program * program, size_t * size)
  {
    *size = program->Image.size();
    return kSuccess;
  }

  int
  nvrtcGetCUBIN(Program * program, char * image)
  {
    std::memcpy(image, program->Image.data(), program->Image.size());
    return kSuccess;
  }

  int
  nvrtcGetPTXSize(Program *, size_t *)
  {
    return kInvalidInput; // the emulator makes no PTX: its device is one NVRTC knows
  }

  int
  nvrtcGetPTX(Program *, char *)
  {
    return kInvalidInput;
  }
}
