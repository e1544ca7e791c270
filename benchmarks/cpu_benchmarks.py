#!/usr/bin/env python3
"""CPU backend against scikit-image 0.26.0 (one thread) and against an earlier build, in one run.

    python3 benchmarks/cpu_benchmarks.py --benchmark build/bin/CudaNonLocalMeansBenchmark \
        [--baseline /path/to/older/CudaNonLocalMeansBenchmark] [--threads 2] [--cases ...] \
        [--targets avx512,avx2,sse2] [--opencv] [--out results.json]

For each case it writes the deterministic input of run_benchmarks.py as .mha, then times
 1. our CPU backend (`--no-gpu`, median of --repeats Updates, ITK_GLOBAL_DEFAULT_NUMBER_OF_THREADS
    threads), once per SIMD target named in --targets (CUDANONLOCALMEANS_CPU_SIMD), the first of
    them being the one a user gets;
 2. the --baseline program (the CPU backend before a change), if given, on the same input;
 3. scikit-image 0.26.0's denoise_nl_means on one thread, on the same input (or a crop of it);
 4. with --opencv, OpenCV's CPU fastNlMeansDenoising (8-bit) on the 2D cases, same threads.
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

# name: (shape, channels, patch_size, patch_distance, h, sigma, scikit-image crop (0: whole))
CASES = {
    "128-p3d3": ((128, 128, 128), 1, 3, 3, 0.08, 0.05, 0),
    "96-p7d11": ((96, 96, 96), 1, 7, 11, 0.08, 0.05, 0),
    "2d-1024-p7d11": ((1024, 1024), 1, 7, 11, 0.08, 0.05, 0),
    "2d-4096-p7d10": ((4096, 4096), 1, 7, 10, 0.08, 0.05, 1024),
    "500-p3d3": ((500, 500, 500), 1, 3, 3, 0.08, 0.05, 160),
    "64-3ch-p3d3": ((64, 64, 64), 3, 3, 3, 0.08, 0.05, 0),
}


def time_opencv(image, s, d, threads):
    """OpenCV's CPU fastNlMeansDenoising (8-bit) on the same image scaled to 0..255: template s,
    search window 2d+1, h 10 (OpenCV's default), `threads` threads; seconds (median of 3)."""
    import cv2
    cv2.setNumThreads(threads)
    u8 = np.clip(image * 255.0, 0, 255).astype(np.uint8)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        cv2.fastNlMeansDenoising(u8, None, h=10, templateWindowSize=s, searchWindowSize=2 * d + 1)
        times.append(time.perf_counter() - t)
    return {"version": cv2.__version__, "threads": threads, "seconds": sorted(times)[1]}


def time_program(program, path, s, d, h, sigma, repeats, threads, target):
    env = dict(os.environ, ITK_GLOBAL_DEFAULT_NUMBER_OF_THREADS=str(threads))
    if target:
        env["CUDANONLOCALMEANS_CPU_SIMD"] = target
    cmd = [program, "--input", path, "--patch-size", str(s), "--patch-distance", str(d), "--h", repr(h),
           "--sigma", repr(sigma), "--no-gpu", "--cpu-repeats", str(repeats)]
    return run_program(cmd, env)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--baseline", default=None, help="an earlier CudaNonLocalMeansBenchmark to compare with")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default="128-p3d3,96-p7d11,2d-1024-p7d11")
    parser.add_argument("--targets", default="", help="comma-separated SIMD targets to force, '' = default only")
    parser.add_argument("--opencv", action="store_true", help="also time OpenCV's fastNlMeansDenoising on 2D cases")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import skimage
    from skimage.restoration import denoise_nl_means

    workdir = args.workdir or tempfile.mkdtemp(prefix="nlm-cpu-bench-")
    os.makedirs(workdir, exist_ok=True)
    targets = [t for t in args.targets.split(",") if t] or [""]
    results = []
    for name in args.cases.split(","):
        shape, channels, s, d, h, sigma, sk_crop = CASES[name]
        image = make_input(shape, channels, "float32")
        path = os.path.join(workdir, f"{name}.mha")
        write_mha(path, image, channels)
        offsets = (2 * d + 1) ** len(shape)
        r = {"case": name, "shape": list(shape), "channels": channels, "patch_size": s, "patch_distance": d,
             "threads": args.threads, "ours": {}}
        for target in targets:
            res = time_program(args.benchmark, path, s, d, h, sigma, args.repeats, args.threads, target)
            r["ours"][target or "default"] = res
        if args.baseline:
            r["baseline"] = time_program(args.baseline, path, s, d, h, sigma, args.repeats, args.threads, "")
        if args.opencv and len(shape) == 2 and channels == 1:
            r["opencv"] = time_opencv(image, s, d, args.threads)
            r["opencv"]["vops"] = int(np.prod(shape)) * offsets / r["opencv"]["seconds"]
        sub = image
        if sk_crop:
            sub = np.ascontiguousarray(image[tuple(slice(0, sk_crop) for _ in shape)])
        t = time.perf_counter()
        denoise_nl_means(sub, patch_size=s, patch_distance=d, h=h, fast_mode=True, sigma=sigma,
                         preserve_range=True, channel_axis=-1 if channels > 1 else None)
        sk_s = time.perf_counter() - t
        r["skimage"] = {"version": skimage.__version__, "shape": list(sub.shape[: len(shape)]), "seconds": sk_s,
                        "vops": int(np.prod(sub.shape[: len(shape)])) * offsets / sk_s}
        results.append(r)
        print(f"{name}: {json.dumps(r)}", flush=True)

    print()
    print("| case | target | our CPU backend ms | voxel-offsets/s | vs scikit-image (1 thread) | vs before |")
    print("|---|---|---|---|---|---|")
    for r in results:
        sk = r["skimage"]
        base = r.get("baseline")
        for target, w in r["ours"].items():
            vs_base = f"{w['cpu_vops'] / base['cpu_vops']:.2f}x (before {base['cpu_ms']:.0f} ms)" if base else "-"
            cv = r.get("opencv")
            vs_cv = f"; {w['cpu_vops'] / cv['vops']:.2f}x OpenCV {cv['version']} ({cv['seconds'] * 1000:.0f} ms)" if cv else ""
            print(f"| {r['case']} ({r['threads']} threads) | {w.get('cpu_simd', target)} | {w['cpu_ms']:.0f} | "
                  f"{w['cpu_vops']:.3g} | {w['cpu_vops'] / sk['vops']:.2f}x (skimage {sk['seconds']:.2f} s on "
                  f"{'x'.join(map(str, sk['shape']))}, {sk['vops']:.3g}){vs_cv} | {vs_base} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
