#!/usr/bin/env python3
"""The opt-in extensions (doc/numerical-contract.md section 6) measured, in one run:

    python3 benchmarks/extensions_benchmarks.py --benchmark build/bin/CudaNonLocalMeansBenchmark \
        [--mask-size 256] [--dipy-size 128] [--threads 16] [--no-dipy] [--out results.json]

 1. Mask: an MR-like head phantom (--mask-size^3, float64) with a brain-like mask (a folded
    ellipsoid, 30% of the volume) is denoised on the GPU and on the CPU with and without the mask;
    the times show how the work falls with the mask's share.
 2. Rician: the phantom (--dipy-size^3) with Rician noise is denoised by DIPY's nlmeans(rician=True)
    (patch radius 1, block radius 5, --threads threads) and by this filter with NoiseModel Rician
    (patch 3, distance 5) on the GPU (float64 and single precision) and on the CPU; speed in
    voxel-offsets per second and quality (RMS against the clean phantom, inside the head and
    overall) for each, and our Gaussian model for comparison. h is swept for ours (DIPY sets its own
    from sigma).
 3. Classic mode (fast_mode=False) on the GPU against scikit-image 0.26.0's classic mode (one core,
    on a crop) and our CPU backend, on the cases scikit-image supports: 2D gray, 2D RGB, 3D gray.
Throughput is voxel-offsets per second: voxels x (2 patch_distance + 1)^3 / seconds (kernel time
from CUDA events for the GPU, Update wall time for the CPU, wall time for DIPY).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "scripts"))
from nlm_mha import read_mha, write_mha  # noqa: E402


def head_phantom(n, seed=0):
    """An MR-like head on an n^3 grid (values in [0, 1]): background 0, a skull shell (0.35), a brain
    of grey matter (0.75) around white matter (1.0) with a folded surface, ventricles of CSF (0.2),
    and a smooth bias field. Also the brain mask (the folded ellipsoid, about 30% of the volume)."""
    z, y, x = np.meshgrid(*[np.linspace(-1, 1, n)] * 3, indexing="ij")
    r = np.sqrt((x / 0.95) ** 2 + (y / 0.82) ** 2 + (z / 0.76) ** 2)
    theta, phi = np.arccos(np.clip(z / np.maximum(np.sqrt(x * x + y * y + z * z), 1e-9), -1, 1)), np.arctan2(y, x)
    folds = 1.0 + 0.04 * np.sin(7 * theta) * np.sin(6 * phi)
    brain = r < 0.98 * folds
    head = np.zeros((n, n, n))
    head[(r < 1.12) & ~brain] = 0.35
    head[brain] = 0.75
    head[brain & (r < 0.62 * folds)] = 1.0
    ventricles = ((x / 0.18) ** 2 + (y / 0.35) ** 2 + (z / 0.2) ** 2) < 1.0
    head[ventricles] = 0.2
    head *= 0.9 + 0.1 * np.cos(1.3 * x + 0.7 * y)  # a smooth bias field
    return head, brain


def rician(clean, sigma, seed):
    rng = np.random.default_rng(seed)
    return np.hypot(clean + rng.normal(0, sigma, clean.shape), rng.normal(0, sigma, clean.shape))


def run(program, env=None, **options):
    cmd = [program]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            cmd.append(flag)
        elif value is not False and value is not None:
            cmd += [flag, str(value)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])


def rms(a, b, where=None):
    d = (a - b) if where is None else (a - b)[where]
    return float(np.sqrt(np.mean(d * d)))


def mask_timing(args, work):
    clean, brain = head_phantom(args.mask_size)
    noisy = rician(clean, 0.05, 1)
    write_mha(f"{work}/mask-input.mha", noisy)
    write_mha(f"{work}/mask.mha", brain.astype(np.uint8))
    rows = []
    for s, d in ((3, 5), (7, 11)):
        for masked in (False, True):
            common = dict(input=f"{work}/mask-input.mha", patch_size=s, patch_distance=d, h=0.04, sigma=0.05,
                          mask=f"{work}/mask.mha" if masked else None)
            gpu = run(args.benchmark, repeats=3, no_cpu=True, **common)
            cpu = run(args.benchmark, cpu_repeats=1, no_gpu=True, **common) if s == 3 else {}
            row = dict(patch_size=s, patch_distance=d, mask_share=gpu["mask_share"], kernel_ms=gpu.get("kernel_ms_median"),
                       update_ms=gpu.get("update_ms_median"), configuration=gpu.get("configuration"),
                       cpu_ms=cpu.get("cpu_ms"), cpu_simd=cpu.get("cpu_simd"))
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def rician_comparison(args, work):
    n = args.dipy_size
    clean, brain = head_phantom(n)
    sigma = 0.05
    noisy = rician(clean, sigma, 2)
    head = clean > 0
    write_mha(f"{work}/rician-input.mha", noisy)
    voxel_offsets = float(n ** 3) * 11 ** 3
    rows = [dict(method="noisy input", rms_head=rms(noisy, clean, head), rms_all=rms(noisy, clean))]
    for h_factor in (0.5, 0.75, 1.0, 1.5):
        h = h_factor * sigma
        for model in ("Rician", "Gaussian"):
            out = f"{work}/out-{model}-{h_factor}.mha"
            r = run(args.benchmark, input=f"{work}/rician-input.mha", patch_size=3, patch_distance=5, h=h, sigma=sigma,
                    rician=(model == "Rician"), repeats=3, cpu_repeats=1, write=out)
            result = read_mha(out)[0]
            row = dict(method=f"ours {model}, h = {h_factor} sigma", gpu_kernel_ms=r.get("kernel_ms_median"),
                       gpu_update_ms=r.get("update_ms_median"), gpu_vops=r.get("kernel_vops"), cpu_ms=r["cpu_ms"],
                       cpu_vops=r["cpu_vops"], cpu_simd=r["cpu_simd"], rms_head=rms(result, clean, head),
                       rms_all=rms(result, clean), background_mean=float(result[~head].mean()))
            if model == "Rician" and h_factor == 1.0:
                single = run(args.benchmark, input=f"{work}/rician-input.mha", patch_size=3, patch_distance=5, h=h,
                             sigma=sigma, rician=True, repeats=3, no_cpu=True, single=True)
                row["gpu_single_kernel_ms"] = single.get("kernel_ms_median")
                row["gpu_single_vops"] = single.get("kernel_vops")
            print(json.dumps(row), flush=True)
            rows.append(row)
    if not args.no_dipy:
        import dipy
        from dipy.denoise.nlmeans import nlmeans
        nlmeans(noisy[:16, :16, :16], sigma, patch_radius=1, block_radius=5, rician=True, num_threads=args.threads)
        t = time.perf_counter()
        result = nlmeans(noisy, sigma, patch_radius=1, block_radius=5, rician=True, num_threads=args.threads)
        seconds = time.perf_counter() - t
        row = dict(method=f"DIPY {dipy.__version__} nlmeans(rician=True), {args.threads} threads",
                   seconds=seconds, vops=voxel_offsets / seconds, rms_head=rms(result, clean, head),
                   rms_all=rms(result, clean), background_mean=float(result[~head].mean()))
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


# Classic mode: name: (shape, channels, patch_size, patch_distance, h, sigma, scikit-image crop, CPU crop)
CLASSIC = {
    "2D 1024^2 p7 d11": ((1024, 1024), 1, 7, 11, 0.08, 0.05, 128, 0),
    "2D RGB 512^2 p5 d5": ((512, 512), 3, 5, 5, 0.08, 0.05, 128, 0),
    "3D 128^3 p3 d3": ((128, 128, 128), 1, 3, 3, 0.08, 0.05, 32, 64),
    "3D 96^3 p5 d5": ((96, 96, 96), 1, 5, 5, 0.08, 0.05, 24, 48),
}


def smooth_noisy(shape, channels, seed):
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0.0, 1.0, n) for n in shape], indexing="ij")
    layers = [0.45 + 0.25 * np.sin(6.0 * grids[0] + 4.0 * grids[-1] + k) + 0.05 * rng.standard_normal(shape)
              for k in range(channels)]
    return (np.stack(layers, axis=-1) if channels > 1 else layers[0]).astype(np.float32)


def classic_comparison(args, work):
    from skimage.restoration import denoise_nl_means
    rows = []
    for name, (shape, channels, s, d, h, sigma, crop, cpu_crop) in CLASSIC.items():
        image = smooth_noisy(shape, channels, 3)
        path = f"{work}/classic.mha"
        write_mha(path, image, channels)
        r = run(args.benchmark, input=path, patch_size=s, patch_distance=d, h=h, sigma=sigma, classic=True, repeats=3,
                cpu_repeats=1, cpu_crop=cpu_crop or None)
        offsets = (2 * d + 1) ** len(shape)
        part = image[tuple(slice(0, crop) for _ in shape)]
        t = time.perf_counter()
        denoise_nl_means(part, s, d, h, fast_mode=False, sigma=sigma, channel_axis=-1 if channels > 1 else None)
        sk_vops = part.size / channels * offsets / (time.perf_counter() - t)
        row = dict(case=name, gpu_kernel_ms=r.get("kernel_ms_median"), gpu_update_ms=r.get("update_ms_median"),
                   gpu_vops=r.get("kernel_vops"), configuration=r.get("configuration"), cpu_ms=r["cpu_ms"],
                   cpu_size=r["cpu_size"], cpu_vops=r["cpu_vops"], skimage_crop=crop, skimage_vops=sk_vops)
        if row["gpu_vops"]:
            row["gpu_over_skimage"] = row["gpu_vops"] / sk_vops
            row["gpu_over_cpu"] = row["gpu_vops"] / row["cpu_vops"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--mask-size", type=int, default=256)
    parser.add_argument("--dipy-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--no-dipy", action="store_true")
    parser.add_argument("--no-mask", action="store_true")
    parser.add_argument("--no-rician", action="store_true")
    parser.add_argument("--no-classic", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="nlm-extensions-")
    results = {}
    if not args.no_mask:
        results["mask"] = mask_timing(args, work)
    if not args.no_rician:
        results["rician"] = rician_comparison(args, work)
    if not args.no_classic:
        results["classic"] = classic_comparison(args, work)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
