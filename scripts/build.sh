#!/usr/bin/env bash
# Configures and builds ITKCudaNonLocalMeans against Debian's ITK in ${NLM_BUILD_DIR:-build}.
# Usage: scripts/build.sh [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/bootstrap.sh | tail -n 1)
build="${NLM_BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCudaNonLocalMeans_PYTHON_EXECUTABLE="$python" -DCudaNonLocalMeans_REQUIRE_SKIMAGE=ON "$@"
cmake --build "$build"
