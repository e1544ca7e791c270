#!/usr/bin/env bash
# Runs the CUDA kernels under compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on small
# inputs that cover every code path: the column kernel (3D patch size 3 and 5, channels, a forced
# shape, staged copies, uploads in pieces, the footprint in shared and in global memory; 2D), the
# shared-rows kernel, the tiled kernel's warp-row and per-cell first pass, 2D/3D/4D, patch size 1,
# slabs, split boxes. Usage: [TOOLS="memcheck racecheck"] [CASE_TIMEOUT=SECONDS] benchmarks/sanitize.sh
# PATH/TO/CudaNonLocalMeansDenoise WORKDIR. A case that runs past CASE_TIMEOUT (default: none) is
# reported as "TIMEOUT" and counts as a failure.
set -uo pipefail
program=$1; work=$2; mkdir -p "$work"
here=$(cd "$(dirname "$0")" && pwd)
python3 - "$work" <<PY
import sys; sys.path.insert(0, "$here/../test/scripts")
import numpy as np
from nlm_mha import write_mha
w = sys.argv[1]; r = np.random.default_rng(3)
write_mha(f"{w}/g3.mha", (0.5 + 0.1 * r.standard_normal((20, 22, 24))).astype(np.float32))
write_mha(f"{w}/rgb2.mha", (0.5 + 0.1 * r.standard_normal((30, 28, 3))).astype(np.float64), 3)
write_mha(f"{w}/g4.mha", (0.5 + 0.1 * r.standard_normal((6, 7, 8, 9))).astype(np.float32))
write_mha(f"{w}/c3.mha", (0.5 + 0.1 * r.standard_normal((12, 14, 16, 2))).astype(np.float32), 2)
write_mha(f"{w}/s3.mha", (0.5 + 0.1 * r.standard_normal((9, 10, 11))).astype(np.float64))
write_mha(f"{w}/g2.mha", (0.5 + 0.1 * r.standard_normal((45, 37))).astype(np.float32))
write_mha(f"{w}/w3.mha", (0.5 + 0.1 * r.standard_normal((6, 7, 150))).astype(np.float64))
PY
status=0
run() { # tool, env, arguments...
  local tool=$1 env=$2; shift 2
  local log="$work/$tool.$RANDOM.log"
  local started=$SECONDS code=0
  env $env timeout -k 10 "${CASE_TIMEOUT:-0}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$program" --backend cuda \
    --output "$work/out.mha" "$@" > "$log" 2>&1 || code=$?
  if [ $code -eq 0 ]; then
    echo "ok   $tool $env $* ($((SECONDS - started)) s): $(grep -m1 'ERROR SUMMARY' "$log")"
  elif [ $code -eq 124 ]; then
    echo "TIMEOUT $tool $env $* (${CASE_TIMEOUT:-0} s)"; status=1
  else
    echo "FAIL $tool $env $*"; tail -30 "$log"; status=1
  fi
}
for tool in ${TOOLS:-memcheck racecheck synccheck initcheck}; do
  run $tool "" --input "$work/g3.mha" --patch-size 3 --patch-distance 2 --h 0.1 --sigma 0.05
  # The column kernel's 3 rows per thread (chosen at 3D patch 3, distance 3 for large outputs; forced
  # here; 22 rows: a partial tile).
  run $tool "CUDANONLOCALMEANS_COLUMNS=3,4,4,3" --input "$work/g3.mha" --patch-size 3 --patch-distance 3 --h 0.1 --sigma 0.05
  run $tool "CUDANONLOCALMEANS_TILE=32,4,4,1,128,1,1" --input "$work/g3.mha" --patch-size 3 --patch-distance 2 --h 0.1
  run $tool "" --input "$work/rgb2.mha" --patch-size 5 --patch-distance 4 --h 0.1
  run $tool "CUDANONLOCALMEANS_COLUMNS=0" --input "$work/rgb2.mha" --patch-size 5 --patch-distance 4 --h 0.1
  run $tool "" --input "$work/g4.mha" --patch-size 3 --patch-distance 1 --h 0.1
  run $tool "" --input "$work/c3.mha" --patch-size 1 --patch-distance 2 --h 0.1
  run $tool "" --input "$work/g3.mha" --patch-size 3 --patch-distance 2 --h 0.1 --max-gpu-memory 0.2
  run $tool "" --input "$work/c3.mha" --patch-size 5 --patch-distance 2 --h 0.1 --sigma 0.02
  run $tool "CUDANONLOCALMEANS_COLUMNS=1,3,2,1 CUDANONLOCALMEANS_STAGING_CHUNK=4096" --input "$work/g3.mha" --patch-size 3 --patch-distance 3 --h 0.1
  # Uploads in pieces of one plane (4D) or row (2D): padding and kernel chunks start piece by piece.
  # Launches of a few tiles: kernel chunks start as their planes are padded, downloads as they end.
  run $tool "CUDANONLOCALMEANS_STAGING_CHUNK=256 CUDANONLOCALMEANS_CHUNK_TILES=2" --input "$work/g4.mha" --patch-size 3 --patch-distance 1 --h 0.1
  run $tool "CUDANONLOCALMEANS_STAGING_CHUNK=256 CUDANONLOCALMEANS_CHUNK_TILES=1" --input "$work/rgb2.mha" --patch-size 5 --patch-distance 4 --h 0.1
  run $tool "CUDANONLOCALMEANS_STAGING_CHUNK=1024 CUDANONLOCALMEANS_CHUNK_TILES=3" --input "$work/g3.mha" --patch-size 3 --patch-distance 2 --h 0.1
  # The column kernel reading its footprint from global memory (chosen from distance 5 on at patch
  # 3; forced; patch 5, whose shifts choose their order at run time, with channels; the shared-rows
  # kernel off, so that the case stays the column kernel's).
  run $tool "" --input "$work/g3.mha" --patch-size 3 --patch-distance 5 --h 0.1 --sigma 0.05
  run $tool "CUDANONLOCALMEANS_COLUMN_FOOTPRINT=global" --input "$work/g3.mha" --patch-size 3 --patch-distance 2 --h 0.1
  run $tool "CUDANONLOCALMEANS_SHARED_ROWS=0" --input "$work/c3.mha" --patch-size 5 --patch-distance 8 --h 0.1
  # The shared-rows kernel: chosen (patch 7, distance 9; an image smaller than the padding; patch 5,
  # distance 4, its march unrolled; single precision at patch 7, distance 3, with the buffered-weights
  # kernel off), forced shapes with
  # channels and with several blocks per SM, the shapes the planner chooses up to patch 11 (8,16,1)
  # and from patch 13 on (4,16,1). Racecheck does
  # not finish the chosen patch 7 case's 3610 shifts in 150 s on an H200, so it races the same shape
  # at distance 2.
  [ "$tool" = racecheck ] || run $tool "" --input "$work/s3.mha" --patch-size 7 --patch-distance 9 --h 0.1 --sigma 0.05
  run $tool "" --input "$work/g3.mha" --patch-size 5 --patch-distance 4 --h 0.1
  run $tool "CUDANONLOCALMEANS_BUFFERED_WEIGHTS=0" --input "$work/g3.mha" --patch-size 7 --patch-distance 3 --h 0.1 \
    --single-precision
  run $tool "CUDANONLOCALMEANS_SHARED_ROWS=4,8,2" --input "$work/c3.mha" --patch-size 5 --patch-distance 2 --h 0.1
  run $tool "CUDANONLOCALMEANS_SHARED_ROWS=8,16,1" --input "$work/g3.mha" --patch-size 7 --patch-distance 2 --h 0.1
  run $tool "CUDANONLOCALMEANS_SHARED_ROWS=4,16,1" --input "$work/s3.mha" --patch-size 13 --patch-distance 1 --h 0.1 --sigma 0.05
  # The buffered-weights kernel (3D; float64 from patch 5 and distance 3, single precision from
  # patch 7 and distance 3): chosen above (patch 5, distance 4; patch 7, distance 9); forced at
  # patch 11 (16 warps), and forced shapes with several blocks along axis 2, several units per
  # warp, batches of one shift and an odd number of warps (step 2 unpaired: 3,8,4); chosen at
  # patch 9 / distance 4 (registers for 3 blocks, pairs of one shift) and in single precision at
  # patch 11 (2 blocks of 16 warps); from patch 9 on step 1 takes rows in pairs (with an even number
  # of rows and two units for some warps: 3,8,4 at patch 9; three units, the last a row alone:
  # 2,16,40); chosen at patch 11 in float64 (one block of 20 warps) and the widest forced block (32
  # warps).
  run $tool "" --input "$work/g3.mha" --patch-size 9 --patch-distance 4 --h 0.1
  run $tool "" --input "$work/s3.mha" --patch-size 11 --patch-distance 5 --h 0.1 --single-precision
  run $tool "CUDANONLOCALMEANS_BUFFERED_WEIGHTS=1" --input "$work/s3.mha" --patch-size 11 --patch-distance 2 --h 0.1 --sigma 0.05
  run $tool "CUDANONLOCALMEANS_BUFFERED_WEIGHTS=16,8,5" --input "$work/g3.mha" --patch-size 9 --patch-distance 3 --h 0.1
  run $tool "CUDANONLOCALMEANS_BUFFERED_WEIGHTS=2,4,1" --input "$work/c3.mha" --patch-size 5 --patch-distance 2 --h 0.1
  run $tool "CUDANONLOCALMEANS_BUFFERED_WEIGHTS=3,8,4" --input "$work/g3.mha" --patch-size 7 --patch-distance 3 --h 0.1
  run $tool "CUDANONLOCALMEANS_BUFFERED_WEIGHTS=3,8,4" --input "$work/g3.mha" --patch-size 9 --patch-distance 3 --h 0.1
  run $tool "CUDANONLOCALMEANS_BUFFERED_WEIGHTS=2,16,40" --input "$work/g3.mha" --patch-size 9 --patch-distance 2 --h 0.1
  run $tool "" --input "$work/g3.mha" --patch-size 11 --patch-distance 3 --h 0.1
  run $tool "CUDANONLOCALMEANS_BUFFERED_WEIGHTS=32,16,3" --input "$work/g3.mha" --patch-size 11 --patch-distance 2 --h 0.1
  # Rows longer than a block of the gather (128 voxels along axis 0; a thread's voxels 32 apart), not
  # whole blocks: chosen (patch 7, distance 5) and in single precision (patch 9, distance 3).
  run $tool "" --input "$work/w3.mha" --patch-size 7 --patch-distance 5 --h 0.1 --sigma 0.05
  run $tool "" --input "$work/w3.mha" --patch-size 9 --patch-distance 3 --h 0.1 --single-precision
  # The column kernel in 2D: chosen (patch 7, distance 11: the footprint in shared memory; patch 3
  # with 4 rows and 4 blocks per SM), the footprint forced into global memory, a forced shape.
  run $tool "" --input "$work/g2.mha" --patch-size 7 --patch-distance 11 --h 0.1 --sigma 0.05
  run $tool "" --input "$work/g2.mha" --patch-size 3 --patch-distance 5 --h 0.1
  run $tool "CUDANONLOCALMEANS_COLUMN_FOOTPRINT=global" --input "$work/g2.mha" --patch-size 5 --patch-distance 3 --h 0.1
  run $tool "CUDANONLOCALMEANS_COLUMNS=4,1,2,1" --input "$work/g2.mha" --patch-size 9 --patch-distance 3 --h 0.1
  # Its 16 rows in 2 chunks from patch 9 on: chosen (patch 11, distance 5), and at patch 9 with the
  # footprint in global memory.
  run $tool "" --input "$work/g2.mha" --patch-size 11 --patch-distance 5 --h 0.1 --sigma 0.05
  run $tool "CUDANONLOCALMEANS_COLUMN_FOOTPRINT=global" --input "$work/g2.mha" --patch-size 9 --patch-distance 3 --h 0.1
  # The tiled kernel's split boxes: forced in 4D (with sigma) and in 3D with 2 channels,
  # and chosen where no spanning box fits (4D patch 5, distance 5: 7,986 shifts, not raced).
  run $tool "CUDANONLOCALMEANS_SPLIT_BOXES=1" --input "$work/g4.mha" --patch-size 3 --patch-distance 2 --h 0.1 --sigma 0.05
  run $tool "CUDANONLOCALMEANS_SPLIT_BOXES=1 CUDANONLOCALMEANS_BUFFERED_WEIGHTS=0 CUDANONLOCALMEANS_SHARED_ROWS=0" \
    --input "$work/c3.mha" --patch-size 5 --patch-distance 2 --h 0.1
  [ "$tool" = racecheck ] || run $tool "" --input "$work/g4.mha" --patch-size 5 --patch-distance 5 --h 0.1
done
exit $status
