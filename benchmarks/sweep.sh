#!/usr/bin/env bash
# Times the CUDA kernel for several kernel configurations on one input (a tuning aid, not a test).
# Usage: benchmarks/sweep.sh BENCHMARK_PROGRAM INPUT.mha "benchmark arguments" CONFIG...
# where CONFIG is "auto" (the backend's choice), "tiled" (the backend's choice of the tiled
# kernel), T0,T1,T2,T3,THREADS,SEGMENTS,MINBLOCKS (a forced tile of the tiled kernel, see
# CUDANONLOCALMEANS_TILE) or cols:ROWS,PLANES,WARPS,MINBLOCKS (a forced shape of the 3D column
# kernel, see CUDANONLOCALMEANS_COLUMNS). REPEATS (default 3) warm runs each.
set -uo pipefail
program=$1; input=$2; args=$3; shift 3
for config in "$@"; do
  unset CUDANONLOCALMEANS_TILE CUDANONLOCALMEANS_COLUMNS
  case "$config" in
    auto) ;;
    tiled) export CUDANONLOCALMEANS_COLUMNS=0 ;;
    cols:*) export CUDANONLOCALMEANS_COLUMNS=${config#cols:} ;;
    *) export CUDANONLOCALMEANS_TILE=$config ;;
  esac
  line=$("$program" --input "$input" $args --repeats "${REPEATS:-3}" --no-cpu 2>&1 | grep '^RESULT')
  python3 - "$config" "$line" <<'PY'
import json, sys
config, line = sys.argv[1], sys.argv[2]
if not line.startswith("RESULT "):
    print(f"{config:28s} failed: {line}"); sys.exit()
r = json.loads(line[7:])
print(f"{config:28s} kernel {r['kernel_ms_median']:8.1f} ms  update {r['update_ms_median']:8.1f} ms  {r['configuration']}", flush=True)
PY
done
