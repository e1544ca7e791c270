#!/usr/bin/env python3
"""4D problems whose tiled-kernel box spanning the tile and the tile shifted by -t fits no GPU, which
the CUDA backend computes with split boxes (doc/cuda-backend.md), measured in one run against our
CPU backend (whole image, all cores) and scikit-image 0.26.0 (one core, on a crop):

    python3 benchmarks/four_d_benchmarks.py --benchmark build/bin/CudaNonLocalMeansBenchmark \
        [--out results.json]

Each case is float32 input, float64 arithmetic, h 0.08, sigma 0.05. Throughput is voxel-offsets per
second: voxels x (2 patch_distance + 1)^4 / seconds (kernel time from CUDA events for the GPU, Update
wall time for the CPU backend, wall time for scikit-image).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "test", "scripts"))
from nlm_mha import write_mha  # noqa: E402
from run_benchmarks import make_input  # noqa: E402

# (NumPy shape, patch, distance, scikit-image crop per axis or None). scikit-image's 4D fast mode
# pads each axis by patch // 2 + distance and computes one integral image of the padded array per
# shift, so its time hardly falls with the crop: on the development machine (one core) a 4^4 crop
# at distance 7 takes 42 s, a 6^4 crop at patch 5 / distance 5 12 s, a 5^4 crop at patch 7 /
# distance 5 14 s, and a 3^4 crop at distance 11 (279,841 shifts of a 31^4 padded array) did not
# end in 4 minutes. That case is not run against scikit-image.
CASES = [
    ((8, 40, 40, 40), 3, 7, 4),
    ((8, 40, 40, 40), 5, 5, 6),
    ((8, 32, 32, 32), 7, 5, 5),
    ((6, 32, 32, 32), 7, 11, None),
]


def benchmark(program, path, patch, distance):
    out = subprocess.run([program, "--input", path, "--patch-size", str(patch), "--patch-distance", str(distance),
                          "--h", "0.08", "--sigma", "0.05", "--repeats", "3"],
                         capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def skimage_rate(image, patch, distance, crop):
    from skimage.restoration import denoise_nl_means
    part = np.ascontiguousarray(image[(slice(0, crop),) * image.ndim])
    started = time.perf_counter()
    denoise_nl_means(part, patch_size=patch, patch_distance=distance, h=0.08, sigma=0.05, fast_mode=True)
    seconds = time.perf_counter() - started
    return part.size * (2 * distance + 1) ** image.ndim / seconds, seconds, part.shape


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="nlm-4d-") as work:
        for shape, patch, distance, crop in CASES:
            image = make_input(list(shape), 1, "float32")
            path = os.path.join(work, "input.mha")
            write_mha(path, image, 1)
            result = benchmark(args.benchmark, path, patch, distance)
            sk, sk_seconds, sk_shape = skimage_rate(image, patch, distance, crop) if crop else (None, None, None)
            offsets = (2 * distance + 1) ** 4
            gpu = result["kernel_vops"]
            cpu = result["cpu_vops"]
            row = dict(shape=shape, patch=patch, distance=distance, configuration=result["configuration"],
                       kernel_ms=result["kernel_ms_median"], update_ms=result["update_ms_median"],
                       compile_ms=result.get("first_compile_ms"), gpu_vops=gpu, cpu_ms=result["cpu_ms"],
                       cpu_vops=cpu, cpu_threads=result.get("cpu_work_units"), skimage_vops=sk,
                       skimage_seconds=sk_seconds, skimage_crop=sk_shape, offsets=offsets,
                       device=result.get("device"))
            rows.append(row)
            versus = (f"scikit-image {sk:.3g}/s on {'x'.join(map(str, sk_shape))} ({gpu / sk:.0f}x)" if sk
                      else "scikit-image not run (hours)")
            print(f"{'x'.join(map(str, shape))} p{patch} d{distance}: kernel {row['kernel_ms']:.1f} ms "
                  f"({gpu:.3g}/s), CPU backend {row['cpu_ms']:.0f} ms ({cpu:.3g}/s, {gpu / cpu:.1f}x), "
                  f"{versus}; {row['configuration']}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
