#!/usr/bin/env python3
"""Classic (slow) mode: our CPU backend against an earlier build and scikit-image 0.26.0, in one run.

    python3 benchmarks/classic_benchmarks.py --benchmark build/bin/CudaNonLocalMeansBenchmark \
        [--baseline /path/to/older/CudaNonLocalMeansBenchmark] [--threads 2] [--repeats 2] \
        [--cases 2d-384-p5d5,2d-384-f64-p5d5,48-p3d3] [--gpu] [--out results.json]

For each case it writes the deterministic input of run_benchmarks.py as .mha, then times
 1. our CPU backend in classic mode (`--classic --no-gpu`, median of --repeats Updates,
    ITK_GLOBAL_DEFAULT_NUMBER_OF_THREADS threads), and with --gpu also the GPU's classic kernel;
 2. the --baseline program, if given, on the same input, the same way;
 3. scikit-image 0.26.0's denoise_nl_means(fast_mode=False) on one thread (minimum of --repeats).
Throughput is voxel-offsets per second: voxels x (2 patch_distance + 1)^dims / seconds.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "scripts"))
from nlm_mha import write_mha  # noqa: E402
from run_benchmarks import make_input, run_program  # noqa: E402

# name: (shape, channels, dtype, patch_size, patch_distance)
CASES = {
    "2d-384-p5d5": ((384, 384), 1, np.float32, 5, 5),
    "2d-384-f64-p5d5": ((384, 384), 1, np.float64, 5, 5),
    "2d-rgb-256-p5d5": ((256, 256), 3, np.float32, 5, 5),
    "48-p3d3": ((48, 48, 48), 1, np.float32, 3, 3),
    "2d-512-p5d5": ((512, 512), 1, np.float32, 5, 5),
    "2d-rgb-512-p5d5": ((512, 512), 3, np.float32, 5, 5),
    "96-p3d3": ((96, 96, 96), 1, np.float32, 3, 3),
}
H, SIGMA = 0.08, 0.05


def time_program(program, path, s, d, repeats, threads, gpu):
    env = dict(os.environ, ITK_GLOBAL_DEFAULT_NUMBER_OF_THREADS=str(threads))
    cmd = [program, "--input", path, "--patch-size", str(s), "--patch-distance", str(d), "--h", repr(H),
           "--sigma", repr(SIGMA), "--classic", "--cpu-repeats", str(repeats)]
    cmd += ["--repeats", str(repeats)] if gpu else ["--no-gpu"]
    return run_program(cmd, env)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--baseline", default=None, help="an earlier CudaNonLocalMeansBenchmark to compare with")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cases", default="2d-384-p5d5,2d-384-f64-p5d5,2d-rgb-256-p5d5,48-p3d3")
    parser.add_argument("--gpu", action="store_true", help="also time the GPU's classic kernel")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import skimage
    from skimage.restoration import denoise_nl_means

    results = []
    with tempfile.TemporaryDirectory(prefix="nlm-classic-bench-") as work:
        for name in args.cases.split(","):
            shape, channels, dtype, s, d = CASES[name]
            image = make_input(shape, channels, dtype)
            path = os.path.join(work, name + ".mha")
            write_mha(path, image, channels)
            vops = float(np.prod(shape)) * (2 * d + 1) ** len(shape)
            entry = {"case": name, "shape": list(shape), "channels": channels, "dtype": np.dtype(dtype).name,
                     "patch_size": s,
                     "patch_distance": d, "threads": args.threads, "voxel_offsets": vops,
                     "ours": time_program(args.benchmark, path, s, d, args.repeats, args.threads, args.gpu)}
            if args.baseline:
                entry["baseline"] = time_program(args.baseline, path, s, d, args.repeats, args.threads, False)
            best = float("inf")
            for _ in range(args.repeats):
                t = time.perf_counter()
                denoise_nl_means(image, patch_size=s, patch_distance=d, h=H, sigma=SIGMA, fast_mode=False,
                                 channel_axis=-1 if channels > 1 else None)
                best = min(best, time.perf_counter() - t)
            entry["skimage"] = {"version": skimage.__version__, "seconds": best, "vops": vops / best}
            results.append(entry)
            print(name + ": " + json.dumps(entry), flush=True)

    print("\n| case | ours ms | voxel-offsets/s | vs scikit-image (1 thread) | vs before | GPU classic kernel ms |")
    print("|---|---|---|---|---|---|")
    for e in results:
        ours = e["ours"]["cpu_ms"]
        before = f"{e['baseline']['cpu_ms'] / ours:.2f}x (before {e['baseline']['cpu_ms']:.0f} ms)" if "baseline" in e else "-"
        gpu = f"{e['ours']['kernel_ms_median']:.3f}" if e["ours"].get("kernel_ms_median") else "-"
        sk = e["skimage"]["seconds"]
        print(f"| {e['case']} ({e['threads']} threads) | {ours:.1f} | {e['voxel_offsets'] / (ours / 1000):.3g} | "
              f"{sk * 1000 / ours:.1f}x (skimage {sk:.2f} s) | {before} | {gpu} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
