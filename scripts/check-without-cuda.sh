#!/usr/bin/env bash
# The module needs no CUDA toolkit to build: configure, build and run the CPU tests in a private
# mount namespace where every /usr/local/cuda* folder is replaced by an empty one (needs root and
# unshare, as on CI). The GPU and NVRTC tests are left out; the CUDA backend must then report
# clearly that it cannot be used.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
  echo "check-without-cuda: needs root and unshare; skipped" >&2
  exit 0
fi
exec unshare --mount bash -euo pipefail -c '
  for d in /usr/local/cuda*; do
    [ -d "$d" ] && [ ! -L "$d" ] && mount -t tmpfs none "$d"
  done
  if find /usr/local/cuda*/ -name "cuda.h" -o -name "libnvrtc*" -o -name "nvcc" 2>/dev/null | grep -q .; then
    echo "check-without-cuda: the CUDA toolkit is still visible" >&2; exit 1
  fi
  echo "check-without-cuda: /usr/local/cuda* hidden; building in build-nocuda"
  NLM_BUILD_DIR=build-nocuda scripts/build.sh > build-nocuda.log 2>&1 || { tail -50 build-nocuda.log; exit 1; }
  (cd build-nocuda && ctest --output-on-failure -j "$(nproc)" -LE "GPU|NVRTC|Emulator")
  # Without a driver or NVRTC, asking for the CUDA backend must fail with a clear message.
  if build-nocuda/bin/CudaNonLocalMeansDenoise --backend cuda --phantom-size 8 --output /tmp/nocuda.mha > build-nocuda/cuda-backend.txt 2>&1; then
    echo "check-without-cuda: the CUDA backend ran without CUDA?" >&2; exit 1
  fi
  grep -E "CUDA backend cannot be used" build-nocuda/cuda-backend.txt
  # Nor can NVRTC be found: the message names every file that was tried.
  status=0
  build-nocuda/bin/CudaNonLocalMeansTestDriver itkCudaNonLocalMeansKernelCompileTest > build-nocuda/nvrtc.txt 2>&1 || status=$?
  [ "$status" -eq 77 ] && grep -q "Tried:" build-nocuda/nvrtc.txt || { cat build-nocuda/nvrtc.txt; exit 1; }
  head -3 build-nocuda/nvrtc.txt
  echo "check-without-cuda: passed"
'
