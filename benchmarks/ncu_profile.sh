#!/usr/bin/env bash
# Nsight Compute profiles of the fast-mode kernel (nlm_fast) on the inputs of run_benchmarks.py:
#   benchmarks/ncu_profile.sh build/bin/CudaNonLocalMeansBenchmark OUTDIR
# writes OUTDIR/ncu-<input>-p<s>d<d>.txt for 96^3 p7 d11, 128^3 p3 d3 and 128^3 p7 d3 (float32 input,
# float64 arithmetic; the first nlm_fast launch, i.e. the warm-up Update's first slab).
set -u
bench=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
python3 - "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/../test/scripts")
import numpy as np
from run_benchmarks import make_input
from nlm_mha import write_mha
write_mha("/tmp/in128.mha", make_input((128, 128, 128), 1, np.float32))
write_mha("/tmp/in96.mha", make_input((96, 96, 96), 1, np.float32))
PY
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy
 --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats"
for c in "in96 7 11" "in128 3 3" "in128 7 3"; do
  set -- $c
  args=(--input "/tmp/$1.mha" --patch-size "$2" --patch-distance "$3" --h 0.08 --sigma 0.05 --no-cpu)
  "$bench" "${args[@]}" --repeats 2 | grep -o '"configuration[^,]*\|"kernel_ms_median[^,]*'
  # shellcheck disable=SC2086
  "$ncu" --clock-control none --kernel-name nlm_fast -c 1 $sections "$bench" "${args[@]}" --repeats 1 \
    > "$out/ncu-$1-p$2d$3.txt" 2>&1
  echo "ncu $1 p$2 d$3: rc $?"
done
