#!/usr/bin/env bash
# The test suite: installs what is needed, builds (also the Python wrapping, against a wrapped ITK
# that scripts/build-python-wrapping.sh builds once into a cache, about 20 minutes the first time;
# NLM_PYTHON_WRAPPING=0 leaves Python out), and runs every test with CTest. Tests labelled GPU are
# skipped (exit code 77) on machines without a usable NVIDIA GPU. Extra arguments go to ctest.
# Ends with the scikit-image cross-check's accuracy table.
set -euo pipefail
cd "$(dirname "$0")/.."
wrapping=""
if [ "${NLM_PYTHON_WRAPPING:-1}" != 0 ]; then
  wrapping=$(scripts/build-python-wrapping.sh | tail -n 1)
fi
scripts/build.sh -DCudaNonLocalMeans_PYTHON_WRAPPING_PATH="$wrapping"
build="${NLM_BUILD_DIR:-build}"
status=0
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@") || status=$?
report="$build/Testing/Temporary/skimage_cross_check/report.txt"
if [ -f "$report" ]; then
  echo
  echo "scikit-image 0.26.0 cross-check (CudaNonLocalMeansSkimageCrossCheck):"
  cat "$report"
fi
exit $status
