#!/usr/bin/env bash
# The main job on built-in sample data: installs what is needed, builds, and denoises a noisy 3D
# phantom with the CudaNonLocalMeans filter (GPU if usable, else CPU). The result is written to
# build/CudaNonLocalMeansDenoised.mha, and the middle slices of input and output side by side to
# build/CudaNonLocalMeansPreview.png. Extra arguments go to the program (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
build="${NLM_BUILD_DIR:-build}"
exec "$build/bin/CudaNonLocalMeansDenoise" --output "$build/CudaNonLocalMeansDenoised.mha" \
  --preview "$build/CudaNonLocalMeansPreview.png" "$@"
