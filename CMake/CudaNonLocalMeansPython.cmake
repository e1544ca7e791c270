# Finds a Python interpreter with scikit-image 0.26.0 (the numerical oracle) for the tests that run
# scikit-image itself. CudaNonLocalMeans_PYTHON_EXECUTABLE names one explicitly; the project's
# scripts/bootstrap.sh makes a virtual environment with it. With
# CudaNonLocalMeans_REQUIRE_SKIMAGE=ON (as CI and the README's test command set it), a missing
# oracle is a configure error rather than silently skipped tests.

set(CudaNonLocalMeans_PYTHON_EXECUTABLE "" CACHE FILEPATH "Python with numpy and scikit-image==0.26.0")
option(CudaNonLocalMeans_REQUIRE_SKIMAGE "Fail if no Python with scikit-image 0.26.0 is found" OFF)

set(_nlm_python "${CudaNonLocalMeans_PYTHON_EXECUTABLE}")
if(NOT _nlm_python)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    set(_nlm_python "${Python3_EXECUTABLE}")
  endif()
endif()

set(CudaNonLocalMeans_SKIMAGE_PYTHON "")
if(_nlm_python)
  execute_process(COMMAND "${_nlm_python}" -c "import numpy, skimage; print(skimage.__version__)"
    OUTPUT_VARIABLE _nlm_skimage_version OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _nlm_result ERROR_QUIET)
  if(_nlm_result EQUAL 0 AND _nlm_skimage_version STREQUAL "0.26.0")
    set(CudaNonLocalMeans_SKIMAGE_PYTHON "${_nlm_python}")
    message(STATUS "scikit-image 0.26.0 oracle: ${_nlm_python}")
  endif()
endif()

if(NOT CudaNonLocalMeans_SKIMAGE_PYTHON)
  set(_nlm_msg "No Python with scikit-image 0.26.0 found (tried '${_nlm_python}'): the scikit-image "
               "cross-check tests are not added. Run scripts/bootstrap.sh or set "
               "CudaNonLocalMeans_PYTHON_EXECUTABLE.")
  string(CONCAT _nlm_msg ${_nlm_msg})
  if(CudaNonLocalMeans_REQUIRE_SKIMAGE)
    message(FATAL_ERROR "${_nlm_msg}")
  else()
    message(WARNING "${_nlm_msg}")
  endif()
endif()

# NVRTC 12 from pip (nvidia-cuda-nvrtc-cu12) in the same environment: used to check that the
# kernels still compile for sm_61.
set(CudaNonLocalMeans_NVRTC12_LIBRARY "")
if(CudaNonLocalMeans_SKIMAGE_PYTHON)
  execute_process(COMMAND "${CudaNonLocalMeans_SKIMAGE_PYTHON}" -c
    "import nvidia.cuda_nvrtc as m, os; print(os.path.join(list(m.__path__)[0], 'lib', 'libnvrtc.so.12'))"
    OUTPUT_VARIABLE _nlm_nvrtc12 OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _nlm_result ERROR_QUIET)
  if(_nlm_result EQUAL 0 AND EXISTS "${_nlm_nvrtc12}")
    set(CudaNonLocalMeans_NVRTC12_LIBRARY "${_nlm_nvrtc12}")
    message(STATUS "NVRTC 12 for the sm_61 compile test: ${_nlm_nvrtc12}")
  endif()
endif()

# The Python wheel built by scripts/build-wheel.sh, and a fresh virtual environment that has it
# installed next to PyPI's itk-core (scripts/make-wheel-venv.sh): they add the Python tests.
set(CudaNonLocalMeans_WHEEL "" CACHE FILEPATH "The module's wheel (adds the wheel check)")
set(CudaNonLocalMeans_WHEEL_PYTHON "" CACHE FILEPATH
  "Python of a virtual environment with PyPI's itk-core and the module's wheel (adds the Python tests)")
