#!/usr/bin/env python3
"""Benchmarks of CudaNonLocalMeans against scikit-image 0.26.0 and its own CPU backend, in one run.

    python3 benchmarks/run_benchmarks.py --benchmark build/bin/CudaNonLocalMeansBenchmark \
        --workdir /tmp/nlm-bench [--cases 500-f32,500-f64,...] [--out results.json]

For each case it writes a deterministic input (smooth pattern plus Gaussian noise) as .mha, then
 1. runs the benchmark program in a new process with an empty kernel cache (first Update with a
    cold NVRTC compile),
 2. runs it again in a new process with that cache (first Update with a warm disk cache), taking the
    median of the warm Updates (host-to-host wall time, and kernel time from CUDA events) and
    timing the CPU backend (on the whole image or on a crop, as the case says),
 3. times scikit-image 0.26.0 (single thread) on the same input, or on a crop of it where the
    whole would take too long (the table says which).
The "-single" cases run the CUDA backend in single precision (SinglePrecision on); the CPU backend
and scikit-image, which have no such mode, compute their float64 arithmetic on the same input.
Throughput is voxel-offsets per second: voxels x (2 patch_distance + 1)^dims / seconds; the ratios
compare throughputs measured in this run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "scripts"))
from nlm_mha import write_mha  # noqa: E402

# name: (shape, channels, dtype, patch_size, patch_distance, h, sigma, skimage_crop, cpu_crop, repeats, single)
CASES = {
    "500-f32": ((500, 500, 500), 1, "float32", 3, 3, 0.08, 0.05, 160, 0, 5, False),
    "500-f64": ((500, 500, 500), 1, "float64", 3, 3, 0.08, 0.05, 160, 0, 5, False),
    "500-f32-single": ((500, 500, 500), 1, "float32", 3, 3, 0.08, 0.05, 160, 0, 5, True),
    "256-p3d3": ((256, 256, 256), 1, "float32", 3, 3, 0.08, 0.05, 128, 0, 5, False),
    "256-p7d11": ((256, 256, 256), 1, "float32", 7, 11, 0.08, 0.05, 40, 64, 2, False),
    "256-p7d11-single": ((256, 256, 256), 1, "float32", 7, 11, 0.08, 0.05, 40, 64, 2, True),
    "2d-4096-p7d11": ((4096, 4096), 1, "float32", 7, 11, 0.08, 0.05, 1024, 0, 5, False),
    "256-3ch-p3d3": ((256, 256, 256), 3, "float32", 3, 3, 0.08, 0.05, 96, 128, 5, False),
    "smoke": ((48, 40, 36), 1, "float32", 3, 3, 0.08, 0.05, 32, 0, 2, False),
}


def make_input(shape, channels, dtype, seed=2026):
    rng = np.random.default_rng(seed)
    axes = [np.linspace(0.0, 1.0, n, dtype=np.float32) for n in shape]
    # Separable smooth pattern built by broadcasting (no full meshgrid), plus noise.
    base = np.float32(0.45)
    for i, a in enumerate(axes):
        shape_i = [1] * len(shape)
        shape_i[i] = len(a)
        base = base + np.float32(0.12) * np.sin((3.0 + i) * a).reshape(shape_i)
    layers = []
    for k in range(channels):
        noise = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.1)
        layers.append((base + np.float32(0.05 * k) + noise).astype(dtype))
    return np.stack(layers, axis=-1) if channels > 1 else layers[0]


def crop(image, size, channels):
    spatial = image.ndim - (1 if channels > 1 else 0)
    index = tuple(slice(0, min(size, image.shape[a])) for a in range(spatial))
    return np.ascontiguousarray(image[index])


def run_program(cmd, env):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"no RESULT line from {' '.join(cmd)}:\n{proc.stdout}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--out", default=None, help="write all results as JSON here")
    parser.add_argument("--no-skimage", action="store_true")
    args = parser.parse_args()

    import skimage
    from skimage.restoration import denoise_nl_means

    workdir = args.workdir or tempfile.mkdtemp(prefix="nlm-bench-")
    os.makedirs(workdir, exist_ok=True)
    results = []
    for name in args.cases.split(","):
        shape, channels, dtype, s, d, h, sigma, sk_crop, cpu_crop, repeats, single = CASES[name]
        t0 = time.perf_counter()
        image = make_input(shape, channels, dtype)
        path = os.path.join(workdir, f"{name}.mha")
        write_mha(path, image, channels)
        gen_s = time.perf_counter() - t0
        common = [args.benchmark, "--input", path, "--patch-size", str(s), "--patch-distance", str(d),
                  "--h", repr(h), "--sigma", repr(sigma)] + (["--single"] if single else [])
        cache = os.path.join(workdir, f"kernel-cache-{name}")
        shutil.rmtree(cache, ignore_errors=True)
        env = dict(os.environ, CUDANONLOCALMEANS_KERNEL_CACHE_DIR=cache)
        cold = run_program(common + ["--repeats", "1", "--no-cpu"], env)
        warm = run_program(common + ["--repeats", str(repeats)]
                           + (["--cpu-crop", str(cpu_crop)] if cpu_crop else []), env)
        r = {"case": name, "shape": list(shape), "channels": channels, "dtype": dtype, "patch_size": s,
             "patch_distance": d, "h": h, "sigma": sigma, "single_precision": single, "input_seconds": gen_s,
             "cold": cold, "warm": warm}
        offsets = (2 * d + 1) ** len(shape)
        if not args.no_skimage:
            sub = crop(image, sk_crop, channels) if sk_crop else image
            t = time.perf_counter()
            denoise_nl_means(sub, patch_size=s, patch_distance=d, h=h, fast_mode=True, sigma=sigma,
                             preserve_range=True, channel_axis=-1 if channels > 1 else None)
            sk_s = time.perf_counter() - t
            sk_vox = int(np.prod(sub.shape[: len(shape)]))
            r["skimage"] = {"version": skimage.__version__, "shape": list(sub.shape[: len(shape)]), "seconds": sk_s,
                            "vops": sk_vox * offsets / sk_s}
        results.append(r)
        print(f"{name}: {json.dumps(r)}", flush=True)

    print()
    print(f"| case | device | kernel ms (median) | Update ms (host-to-host) | first Update cold / warm cache ms (compile ms) "
          f"| kernel VOPS | vs skimage (kernel / Update) | vs CPU backend (kernel / Update) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        w, c = r["warm"], r["cold"]
        if "kernel_vops" not in w:
            continue
        sk = r.get("skimage")
        vs_sk = (f"{w['kernel_vops'] / sk['vops']:.0f}x / {w['update_vops'] / sk['vops']:.0f}x "
                 f"(skimage {sk['seconds']:.1f} s on {'x'.join(map(str, sk['shape']))})") if sk else "-"
        vs_cpu = (f"{w['kernel_vops'] / w['cpu_vops']:.0f}x / {w['update_vops'] / w['cpu_vops']:.0f}x "
                  f"(CPU {w['cpu_ms'] / 1000:.1f} s on {w['cpu_size']}, {w['cpu_work_units']} work units)"
                  if "cpu_vops" in w else "-")
        print(f"| {r['case']} | {w.get('device', '?').split(' (')[0]} | {w['kernel_ms_median']:.1f} | "
              f"{w['update_ms_median']:.1f} | {c['first_update_ms']:.0f} / {w['first_update_ms']:.0f} "
              f"({c['first_compile_ms']:.0f}) | {w['kernel_vops']:.3g} | {vs_sk} | {vs_cpu} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
