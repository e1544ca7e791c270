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
#ifndef itkCudaDriver_h
#define itkCudaDriver_h

// The CUDA driver API and NVRTC, loaded with dlopen at first use. No CUDA header is needed to
// build this: the few types and functions the module uses are declared here, with the ABI of the
// driver (cuda.h) and of NVRTC (nvrtc.h). Private to the library.

#include "itkMacro.h"

#include <cstddef>
#include <mutex>
#include <string>

namespace itk
{
namespace cuda
{
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr int      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int      CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81;
constexpr int      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int      CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int      CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr int      NVRTC_SUCCESS = 0;

// The functions the module uses, each once: _(return type, member, parameters, exported names).
// The first exported name found is bound (versioned names first).
#define ITK_NLM_FORALL_DRIVER_FUNCTIONS(_)                                                                             \
  _(CUresult, cuInit, (unsigned int), "cuInit")                                                                        \
  _(CUresult, cuDriverGetVersion, (int *), "cuDriverGetVersion")                                                       \
  _(CUresult, cuGetErrorName, (CUresult, const char **), "cuGetErrorName")                                             \
  _(CUresult, cuGetErrorString, (CUresult, const char **), "cuGetErrorString")                                         \
  _(CUresult, cuDeviceGetCount, (int *), "cuDeviceGetCount")                                                           \
  _(CUresult, cuDeviceGet, (CUdevice *, int), "cuDeviceGet")                                                           \
  _(CUresult, cuDeviceGetAttribute, (int *, int, CUdevice), "cuDeviceGetAttribute")                                    \
  _(CUresult, cuDeviceGetName, (char *, int, CUdevice), "cuDeviceGetName")                                             \
  _(CUresult, cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice), "cuDevicePrimaryCtxRetain")                           \
  _(CUresult, cuCtxPushCurrent, (CUcontext), "cuCtxPushCurrent_v2")                                                    \
  _(CUresult, cuCtxPopCurrent, (CUcontext *), "cuCtxPopCurrent_v2")                                                    \
  _(CUresult, cuCtxGetStreamPriorityRange, (int *, int *), "cuCtxGetStreamPriorityRange")                              \
  _(CUresult, cuModuleLoadData, (CUmodule *, const void *), "cuModuleLoadData")                                        \
  _(CUresult, cuModuleGetFunction, (CUfunction *, CUmodule, const char *), "cuModuleGetFunction")                      \
  _(CUresult, cuFuncSetAttribute, (CUfunction, int, int), "cuFuncSetAttribute")                                        \
  _(CUresult, cuFuncGetAttribute, (int *, int, CUfunction), "cuFuncGetAttribute")                                      \
  _(CUresult, cuMemGetInfo, (size_t *, size_t *), "cuMemGetInfo_v2")                                                   \
  _(CUresult, cuMemAlloc, (CUdeviceptr *, size_t), "cuMemAlloc_v2")                                                    \
  _(CUresult, cuMemFree, (CUdeviceptr), "cuMemFree_v2")                                                                \
  _(CUresult, cuMemAllocHost, (void **, size_t), "cuMemAllocHost_v2")                                                  \
  _(CUresult, cuMemHostRegister, (void *, size_t, unsigned int), "cuMemHostRegister_v2")                               \
  _(CUresult, cuMemcpyHtoDAsync, (CUdeviceptr, const void *, size_t, CUstream), "cuMemcpyHtoDAsync_v2")                \
  _(CUresult, cuMemcpyDtoHAsync, (void *, CUdeviceptr, size_t, CUstream), "cuMemcpyDtoHAsync_v2")                      \
  _(CUresult, cuMemsetD8Async, (CUdeviceptr, unsigned char, size_t, CUstream), "cuMemsetD8Async")                      \
  _(CUresult,                                                                                                          \
    cuLaunchKernel,                                                                                                    \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **),    \
    "cuLaunchKernel")                                                                                                  \
  _(CUresult, cuStreamCreate, (CUstream *, unsigned int), "cuStreamCreate")                                            \
  _(CUresult, cuStreamCreateWithPriority, (CUstream *, unsigned int, int), "cuStreamCreateWithPriority")               \
  _(CUresult, cuStreamSynchronize, (CUstream), "cuStreamSynchronize")                                                  \
  _(CUresult, cuStreamWaitEvent, (CUstream, CUevent, unsigned int), "cuStreamWaitEvent")                               \
  _(CUresult, cuStreamDestroy, (CUstream), "cuStreamDestroy_v2")                                                       \
  _(CUresult, cuEventCreate, (CUevent *, unsigned int), "cuEventCreate")                                               \
  _(CUresult, cuEventRecord, (CUevent, CUstream), "cuEventRecord")                                                     \
  _(CUresult, cuEventSynchronize, (CUevent), "cuEventSynchronize")                                                     \
  _(CUresult, cuEventQuery, (CUevent), "cuEventQuery")                                                                 \
  _(CUresult, cuEventElapsedTime, (float *, CUevent, CUevent), "cuEventElapsedTime_v2", "cuEventElapsedTime")          \
  _(CUresult, cuEventDestroy, (CUevent), "cuEventDestroy_v2")

#define ITK_NLM_FORALL_NVRTC_FUNCTIONS(_)                                                                              \
  _(nvrtcResult, nvrtcVersion, (int *, int *), "nvrtcVersion")                                                         \
  _(const char *, nvrtcGetErrorString, (nvrtcResult), "nvrtcGetErrorString")                                           \
  _(nvrtcResult, nvrtcGetNumSupportedArchs, (int *), "nvrtcGetNumSupportedArchs")                                      \
  _(nvrtcResult, nvrtcGetSupportedArchs, (int *), "nvrtcGetSupportedArchs")                                            \
  _(nvrtcResult,                                                                                                       \
    nvrtcCreateProgram,                                                                                                \
    (nvrtcProgram *, const char *, const char *, int, const char * const *, const char * const *),                     \
    "nvrtcCreateProgram")                                                                                              \
  _(nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram *), "nvrtcDestroyProgram")                                         \
  _(nvrtcResult, nvrtcCompileProgram, (nvrtcProgram, int, const char * const *), "nvrtcCompileProgram")                \
  _(nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram, size_t *), "nvrtcGetProgramLogSize")                           \
  _(nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram, char *), "nvrtcGetProgramLog")                                     \
  _(nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram, size_t *), "nvrtcGetCUBINSize")                                     \
  _(nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram, char *), "nvrtcGetCUBIN")                                               \
  _(nvrtcResult, nvrtcGetPTXSize, (nvrtcProgram, size_t *), "nvrtcGetPTXSize")                                         \
  _(nvrtcResult, nvrtcGetPTX, (nvrtcProgram, char *), "nvrtcGetPTX")

#define ITK_NLM_DECLARE_FUNCTION(result, name, parameters, ...) result(*name) parameters = nullptr;

/** \class DriverAPI
 * \brief Function table of libcuda.so.1 (the NVIDIA driver).
 * \ingroup CudaNonLocalMeans
 */
struct DriverAPI
{
  ITK_NLM_FORALL_DRIVER_FUNCTIONS(ITK_NLM_DECLARE_FUNCTION)
};

/** \class NvrtcAPI
 * \brief Function table of the NVRTC library.
 * \ingroup CudaNonLocalMeans
 */
struct NvrtcAPI
{
  ITK_NLM_FORALL_NVRTC_FUNCTIONS(ITK_NLM_DECLARE_FUNCTION)
};

#undef ITK_NLM_DECLARE_FUNCTION

/** The driver API, loaded once per process; null with `why` filled when libcuda.so.1 cannot be
 * loaded or initialised (no driver, no device). Thread safe. */
const DriverAPI *
GetDriver(std::string & why);

/** NVRTC, loaded once per process; null with `why` filled (saying which files were tried) when no
 * NVRTC library can be loaded. The file named by Overrides::NvrtcLibrary when one is named (and
 * nothing else); otherwise, in order: libnvrtc.so.13, .12 and libnvrtc.so in the library folder of
 * each of Overrides::CudaRoots; the same names on the loader's search path; /usr/local/cuda/lib64;
 * Overrides::NvrtcFallback. */
const NvrtcAPI *
GetNvrtc(std::string & why);

/** Which NVRTC library file was loaded (empty when none). */
std::string
GetNvrtcLibraryPath();

/** "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result. */
std::string
DescribeResult(const DriverAPI & driver, CUresult result);

/** Throws an ExceptionObject naming `call` (the source text of a driver call) and the result
 * when `result` is not CUDA_SUCCESS. Use it through ITK_NLM_CUDA_CHECK. */
void
CheckResult(const DriverAPI & driver,
            CUresult          result,
            const char *      call,
            const char *      file,
            unsigned int      line,
            const char *      location);

/** Like CheckResult, but says that `what` failed (when not null): for waits on work whose errors
 * surface there (the kernels). Use it through ITK_NLM_CUDA_CHECK_WORK. */
void
CheckWork(const DriverAPI & driver,
          CUresult          result,
          const char *      what,
          const char *      call,
          const char *      file,
          unsigned int      line,
          const char *      location);

} // namespace cuda
} // namespace itk

/** Calls `call` of the driver table `driver` (e.g. cuMemAlloc(&p, n)) and throws, naming the call
 * and where it was made, unless it succeeds. */
#define ITK_NLM_CUDA_CHECK(driver, call)                                                                               \
  ::itk::cuda::CheckResult((driver), (driver).call, #call, __FILE__, __LINE__, ITK_LOCATION)
/** Like ITK_NLM_CUDA_CHECK for a wait whose failure is that of `what` (e.g. "the non-local means
 * kernels"). */
#define ITK_NLM_CUDA_CHECK_WORK(driver, call, what)                                                                    \
  ::itk::cuda::CheckWork((driver), (driver).call, (what), #call, __FILE__, __LINE__, ITK_LOCATION)

#endif
