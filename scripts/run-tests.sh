#!/usr/bin/env bash
# The test suite: installs what is needed, builds the C++ module and its tests against Debian's ITK,
# builds the Python wheel against an ITK 5.4.7 tree configured like PyPI's (scripts/build-wheel.sh;
# the tree is cached, about 6 minutes the first time), installs it into a fresh virtual environment
# next to PyPI's itk-core 5.4.7 (scripts/make-wheel-venv.sh), and runs every test with CTest.
# NLM_PYTHON_WRAPPING=0 leaves Python out. Tests labelled GPU are skipped (exit code 77) on
# machines without a usable NVIDIA GPU. Extra arguments go to ctest. Ends with the scikit-image
# cross-check's accuracy table.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${NLM_BUILD_DIR:-build}"
python_options=(-DCudaNonLocalMeans_WHEEL= -DCudaNonLocalMeans_WHEEL_PYTHON=) # no Python tests
if [ "${NLM_PYTHON_WRAPPING:-1}" != 0 ]; then
  wheel=$(scripts/build-wheel.sh | tail -n 1)
  wheel_python=$(scripts/make-wheel-venv.sh "$wheel" "$build/wheel-venv" | tail -n 1)
  python_options=(-DCudaNonLocalMeans_WHEEL="$wheel" -DCudaNonLocalMeans_WHEEL_PYTHON="$wheel_python")
fi
scripts/build.sh "${python_options[@]}"
status=0
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@") || status=$?
# The Python suite's header names the itk it imported; its last line counts the tests.
if [ "${NLM_PYTHON_WRAPPING:-1}" != 0 ] && [ -f "$build/Testing/Temporary/LastTest.log" ]; then
  echo
  echo "Python suite (CudaNonLocalMeansPythonTests), in $build/wheel-venv:"
  grep -E "^itk [0-9.]+ from |^=+ .*(passed|failed).* =+$" "$build/Testing/Temporary/LastTest.log" || true
fi
report="$build/Testing/Temporary/skimage_cross_check/report.txt"
if [ -f "$report" ]; then
  echo
  echo "scikit-image 0.26.0 cross-check (CudaNonLocalMeansSkimageCrossCheck):"
  cat "$report"
fi
exit $status
