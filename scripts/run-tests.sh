#!/usr/bin/env bash
# The test suite: installs what is needed, builds, and runs every test with CTest. Tests labelled
# GPU are skipped (exit code 77) on machines without a usable NVIDIA GPU. Extra arguments go to
# ctest. Ends with the scikit-image cross-check's accuracy table.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
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
