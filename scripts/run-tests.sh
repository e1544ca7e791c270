#!/usr/bin/env bash
# The test suite: installs what is needed, builds, and runs every test with CTest. Tests labelled
# GPU are skipped (exit code 77) on machines without a usable NVIDIA GPU. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build="${NLM_BUILD_DIR:-build}"
cd "$build"
exec ctest --output-on-failure -j "$(nproc)" "$@"
