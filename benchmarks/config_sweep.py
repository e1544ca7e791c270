#!/usr/bin/env python3
"""Times kernel configurations on one synthetic input (a tuning aid, not a test).

Usage: python3 benchmarks/config_sweep.py BENCHMARK_PROGRAM SHAPE|INPUT.mha SPEC...

SHAPE is the input's size, ITK axis order reversed as NumPy writes it ("4096x4096", "256x256x256"),
for run_benchmarks.make_input's input (float32, one channel); or an image file to read instead. Each SPEC is "ENV|patch|distance"
with ENV a ";"-separated list of NAME=VALUE for the CUDANONLOCALMEANS_ variables (the prefix left
out), e.g. "COLUMNS=0|7|11" (the tiled kernel), "|7|11" (the planner's choice) or
"COLUMNS=16,1,8,2;COLUMN_FOOTPRINT=global|7|11". One benchmark process per SPEC (h 0.08, sigma
0.05, median of REPEATS warm Updates, default 3; EXTRA adds arguments such as --single); all share
one kernel cache, so "compile" is the cold compile only the first time a module is seen. Prints a
line per SPEC: kernel ms (CUDA events), voxel-offsets per second, the Update's host-to-host ms and
the configuration.
"""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "test", "scripts"))
from nlm_mha import write_mha  # noqa: E402
from run_benchmarks import make_input  # noqa: E402


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    program, source = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="nlm-sweep-") as work:
        if os.path.isfile(source):
            path = source
        else:
            path = os.path.join(work, "input.mha")
            write_mha(path, make_input([int(v) for v in source.split("x")], 1, "float32"), 1)
        sweep(program, path, os.path.join(work, "cache"), sys.argv[3:])


def sweep(program, path, cache, specs):
    for spec in specs:
        names, s, d = spec.split("|")
        env = dict(os.environ, CUDANONLOCALMEANS_KERNEL_CACHE_DIR=cache)
        for item in filter(None, names.split(";")):
            name, value = item.split("=", 1)
            env["CUDANONLOCALMEANS_" + name] = value
        cmd = [program, "--input", path, "--patch-size", s, "--patch-distance", d, "--h", "0.08", "--sigma", "0.05",
               "--repeats", os.environ.get("REPEATS", "3"), "--no-cpu"] + os.environ.get("EXTRA", "").split()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            print(f"{spec:40s} FAILED {proc.stdout[-300:]} {proc.stderr[-300:]}", flush=True)
            continue
        r = json.loads(lines[0][len("RESULT "):])
        if "kernel_ms_median" not in r:
            print(f"{spec:40s} no GPU run: {lines[0][:200]}", flush=True)
            continue
        update = f" Update {r['update_ms_median']:8.2f} ms" if "update_ms_median" in r else ""
        print(f"{spec:40s} kernel {r['kernel_ms_median']:9.2f} ms {r['kernel_vops']:9.3e} vop/s{update} compile "
              f"{r.get('first_compile_ms', 0):7.0f} {r['configuration']}", flush=True)


if __name__ == "__main__":
    main()
