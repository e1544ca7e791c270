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
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_INSUFFICIENT_DRIVER = 35;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr int      CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
constexpr int      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int      CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81;
constexpr int      CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO = 87;
constexpr int      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int      CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int      CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
constexpr int      CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int      CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr int      NVRTC_SUCCESS = 0;

/** \class DriverAPI
 * \brief Function table of libcuda.so.1 (the NVIDIA driver).
 * \ingroup CudaNonLocalMeans
 */
struct DriverAPI
{
  CUresult (*cuInit)(unsigned int) = nullptr;
  CUresult (*cuDriverGetVersion)(int *) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char **) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char **) = nullptr;
  CUresult (*cuDeviceGetCount)(int *) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice *, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext *) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuFuncGetAttribute)(int *, int, CUfunction) = nullptr;
  CUresult (*cuMemGetInfo)(size_t *, size_t *) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemAllocHost)(void **, size_t) = nullptr;
  CUresult (*cuMemFreeHost)(void *) = nullptr;
  CUresult (*cuMemHostRegister)(void *, size_t, unsigned int) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction,
                             unsigned int,
                             unsigned int,
                             unsigned int,
                             unsigned int,
                             unsigned int,
                             unsigned int,
                             unsigned int,
                             CUstream,
                             void **,
                             void **) = nullptr;
  CUresult (*cuStreamCreate)(CUstream *, unsigned int) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent *, unsigned int) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventQuery)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
};

/** \class NvrtcAPI
 * \brief Function table of the NVRTC library.
 * \ingroup CudaNonLocalMeans
 */
struct NvrtcAPI
{
  nvrtcResult (*nvrtcVersion)(int *, int *) = nullptr;
  const char * (*nvrtcGetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int *) = nullptr;
  nvrtcResult (*nvrtcGetSupportedArchs)(int *) = nullptr;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *,
                                    const char *,
                                    const char *,
                                    int,
                                    const char * const *,
                                    const char * const *) = nullptr;
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *) = nullptr;
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char * const *) = nullptr;
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *) = nullptr;
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char *) = nullptr;
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *) = nullptr;
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char *) = nullptr;
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t *) = nullptr;
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char *) = nullptr;
};

/** The driver API, loaded once per process; null with `why` filled when libcuda.so.1 cannot be
 * loaded or initialised (no driver, no device). Thread safe. */
const DriverAPI *
GetDriver(std::string & why);

/** NVRTC, loaded once per process; null with `why` filled (saying which files were tried) when no
 * NVRTC library can be loaded. Looked for, in order: the file named by the environment variable
 * CUDANONLOCALMEANS_NVRTC_LIBRARY; libnvrtc.so.13, .12 and libnvrtc.so in $CUDA_PATH/lib64 and
 * $CUDA_HOME/lib64; the same names on the loader's search path; /usr/local/cuda/lib64. */
const NvrtcAPI *
GetNvrtc(std::string & why);

/** Which NVRTC library file was loaded (empty when none). */
std::string
GetNvrtcLibraryPath();

/** "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result. */
std::string
DescribeResult(const DriverAPI & driver, CUresult result);

} // namespace cuda
} // namespace itk

#endif
