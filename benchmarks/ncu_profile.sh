#!/usr/bin/env bash
# Nsight Compute profiles of the fast-mode kernel (nlm_fast) on the inputs of run_benchmarks.py:
#   [CASES="SHAPE:S:D ..."] benchmarks/ncu_profile.sh build/bin/CudaNonLocalMeansBenchmark OUTDIR
# writes OUTDIR/ncu-in<NAME>-p<S>d<D>.txt per case (SHAPE in NumPy order, e.g. 96x96x96 or
# 2048x2048; NAME the side of a cube, 96, else SHAPE; float32 input of run_benchmarks.make_input,
# which is the same for a shape every time, so an input already in /tmp is reused; float64
# arithmetic; the first nlm_fast launch, i.e. the warm-up Update's first slab). Default cases: 96^3 p7 d11, 128^3 p3 d3 and 128^3 p7 d3. Variables such as
# CUDANONLOCALMEANS_COLUMNS pass through to the benchmark program.
set -u
bench=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
cases=${CASES:-96x96x96:7:11 128x128x128:3:3 128x128x128:7:3}
mkdir -p "$out"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy
 --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats"
for c in $cases; do
  IFS=: read -r shape s d <<< "$c"
  IFS=x read -r -a sides <<< "$shape"
  name=$shape
  [ ${#sides[@]} -eq 3 ] && [ "${sides[0]}" = "${sides[1]}" ] && [ "${sides[1]}" = "${sides[2]}" ] && name=${sides[0]}
  input="/tmp/ncu-in$shape.mha"
  [ -f "$input" ] || python3 - "$here" "$shape" "$input" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/../test/scripts")
import numpy as np
from run_benchmarks import make_input
from nlm_mha import write_mha
write_mha(sys.argv[3], make_input(tuple(int(v) for v in sys.argv[2].split("x")), 1, np.float32))
PY
  args=(--input "$input" --patch-size "$s" --patch-distance "$d" --h 0.08 --sigma 0.05 --no-cpu)
  "$bench" "${args[@]}" --repeats 2 | grep -o '"configuration[^,]*\|"kernel_ms_median[^,]*'
  # shellcheck disable=SC2086
  "$ncu" --clock-control none --kernel-name nlm_fast -c 1 $sections "$bench" "${args[@]}" --repeats 1 \
    > "$out/ncu-in$name-p${s}d$d.txt" 2>&1
  echo "ncu $shape p$s d$d: rc $?"
done
