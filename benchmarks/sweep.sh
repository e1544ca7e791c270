#!/usr/bin/env bash
# Times the CUDA kernel for several tile configurations and register budgets on one input (a tuning
# aid, not a test). Usage: benchmarks/sweep.sh BENCHMARK_PROGRAM INPUT.mha "benchmark arguments" CONFIG...
# where CONFIG is T0,T1,T2,T3,THREADS,SEGMENTS,MINBLOCKS (see CUDANONLOCALMEANS_TILE), or "auto".
set -uo pipefail
program=$1; input=$2; args=$3; shift 3
for config in "$@"; do
  if [ "$config" = auto ]; then unset CUDANONLOCALMEANS_TILE; else export CUDANONLOCALMEANS_TILE=$config; fi
  line=$("$program" --input "$input" $args --repeats 3 --no-cpu 2>&1 | grep '^RESULT')
  python3 - "$config" "$line" <<'PY'
import json, sys
config, line = sys.argv[1], sys.argv[2]
if not line.startswith("RESULT "):
    print(f"{config:28s} failed: {line}"); sys.exit()
r = json.loads(line[7:])
print(f"{config:28s} kernel {r['kernel_ms_median']:8.1f} ms  update {r['update_ms_median']:8.1f} ms  {r['configuration']}")
PY
done
