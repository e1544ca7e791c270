#!/usr/bin/env python3
"""GPU throughput over patch size and patch distance (issue 12), with a plot.

    python3 benchmarks/grid_benchmarks.py --benchmark build/bin/CudaNonLocalMeansBenchmark \
        [--before /path/to/older/CudaNonLocalMeansBenchmark] [--out grid.json] [--plot grid.png]
    python3 benchmarks/grid_benchmarks.py --replot grid3d.json,grid2d.json [--before-json old.json] --plot grid.png

Grids: 3D 256^3, patch {3, 5, 7, 9, 11} x distance {3, 5, 7, 11}; 2D 4096^2, patch {3, 7, 11} x
distance {5, 11}. Float32 input, float64 arithmetic (the default), h 0.08, sigma 0.05. For each cell
the benchmark program (a new process, its own kernel cache) gives the median kernel time (CUDA
events) of --repeats warm Updates and, unless --no-cpu, the CPU backend's time on a crop (32^3,
512^2); scikit-image 0.26.0 runs in the same session on the same crop. Throughput is voxel-offsets per second: voxels x (2 d + 1)^dims / s. The plot shows the
kernel throughput of each program against the patch size, a line per distance. The table also
gives a floor: the kernel time at the H200's full FP64 rate with only the contract's FP64 operations
(fp64_per_voxel_offset), with each weight computed once per pair of offsets or once per offset, and
the share of it each cell reaches.
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

GRIDS = {
    "3d": {"shape": (256, 256, 256), "patches": [3, 5, 7, 9, 11], "distances": [3, 5, 7, 11], "crop": 32},
    "2d": {"shape": (4096, 4096), "patches": [3, 7, 11], "distances": [5, 11], "crop": 512},
}


# The H200's FP64 rate (132 SMs x 64 FP64 lanes x 1.98 GHz; performance-model.md) and the FP64
# operations per voxel-offset that the contract needs at the least (one channel, fast mode): per
# cell and shift a term (difference, square, minus the noise term: 3), the separable box sums in
# the contract's order (s - 2 additions per axis), a weight (about 4: a multiplication, two
# additions and a comparison) and the accumulation (3: a multiplication, two additions).
FP64_PER_SECOND = 132 * 64 * 1.98e9


def fp64_per_voxel_offset(s, dims, halved):
    """FP64 operations per voxel-offset: each raw and weight computed once for a pair of offsets
    (raw(c, -t) = raw(c - t, t), the floor) or once per offset (as the kernels here do)."""
    per_raw = 3 + dims * (s - 2) + 4
    return (per_raw / 2 if halved else per_raw) + 3


def floor_ms(voxels, s, d, dims, halved=True):
    """Kernel time at full FP64 issue with nothing but the contract's FP64 arithmetic."""
    return 1e3 * voxels * (2 * d + 1) ** dims * fp64_per_voxel_offset(s, dims, halved) / FP64_PER_SECOND


def time_cell(program, path, s, d, repeats, cache, cpu_crop=0):
    env = dict(os.environ, CUDANONLOCALMEANS_KERNEL_CACHE_DIR=cache)
    cmd = [program, "--input", path, "--patch-size", str(s), "--patch-distance", str(d), "--h", "0.08",
           "--sigma", "0.05", "--repeats", str(repeats)]
    cmd += ["--cpu-crop", str(cpu_crop), "--cpu-repeats", "1"] if cpu_crop else ["--no-cpu"]
    try:
        r = run_program(cmd, env)
    except RuntimeError as e:  # e.g. a configuration beyond the GPU's shared memory
        return {"error": str(e).splitlines()[-1][:300]}
    keys = ("kernel_ms_median", "kernel_vops", "first_compile_ms", "configuration", "cpu_size", "cpu_ms", "cpu_vops")
    return {k: r[k] for k in keys if k in r}


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results["grids"]), figsize=(6 * len(results["grids"]), 4.5))
    axes = np.atleast_1d(axes)
    styles = {"after": "-", "before": "--"}
    for ax, (name, grid) in zip(axes, results["grids"].items()):
        for d_index, d in enumerate(grid["distances"]):
            color = f"C{d_index}"
            for program in ("before", "after"):
                cells = [c for c in grid["cells"] if c["d"] == d and program in c and "kernel_vops" in c[program]]
                if cells:
                    ax.plot([c["s"] for c in cells], [c[program]["kernel_vops"] for c in cells], styles[program],
                            color=color, marker="o", label=f"d {d} ({program})")
        ax.set_title(f"{name.upper()} {'x'.join(map(str, grid['shape']))}, float64 arithmetic")
        ax.set_xlabel("patch size")
        ax.set_ylabel("kernel voxel-offsets / s")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(results.get("title", "CudaNonLocalMeans on the GPU"))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def print_table(results, programs):
    """The grid as a Markdown table."""
    print("| grid | patch | distance | " + " | ".join(f"{p} kernel ms (VOPS)" for p in programs) +
          " | FP64 floor ms, halved / per offset (share reached) | vs scikit-image | vs CPU backend |")
    print("|---|---|---|" + "---|" * len(programs) + "---|---|---|")
    for name, grid in results["grids"].items():
        for c in grid["cells"]:
            cols = []
            for p in programs:
                r = c.get(p, {})
                cols.append(f"{r['kernel_ms_median']:.1f} ({r['kernel_vops']:.2e})" if "kernel_vops" in r else "-")
            a = c.get("after", {})
            ratio = f"{a['kernel_vops'] / c['skimage']['vops']:.0f}x" if "kernel_vops" in a else "-"
            cpu = f"{a['kernel_vops'] / a['cpu_vops']:.0f}x" if "kernel_vops" in a and "cpu_vops" in a else "-"
            voxels, dims = 1, len(grid["shape"])
            for n in grid["shape"]:
                voxels *= n
            fh, fp = (floor_ms(voxels, c["s"], c["d"], dims, h) for h in (True, False))
            share = f" ({fh / a['kernel_ms_median']:.0%} / {fp / a['kernel_ms_median']:.0%})" if "kernel_vops" in a else ""
            print(f"| {name} | {c['s']} | {c['d']} | " + " | ".join(cols) + f" | {fh:.1f} / {fp:.1f}{share} | {ratio} | {cpu} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark")
    parser.add_argument("--before", default=None)
    parser.add_argument("--grids", default="3d,2d")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--plot", default=None)
    parser.add_argument("--replot", default=None,
                        help="comma-separated JSON files of this script: print their grids and plot them instead of measuring")
    parser.add_argument("--before-json", default=None,
                        help="with --replot: a JSON file whose cells' 'after' figures become the cells' 'before'")
    parser.add_argument("--title", default=None)
    parser.add_argument("--patches", default=None, help="comma-separated patch sizes instead of each grid's")
    parser.add_argument("--distances", default=None, help="comma-separated distances instead of each grid's")
    parser.add_argument("--no-cpu", action="store_true", help="do not time the CPU backend on the crop")
    args = parser.parse_args()
    if args.replot:
        results = {"grids": {}}
        for name in args.replot.split(","):
            with open(name) as f:
                part = json.load(f)
            results["grids"].update(part["grids"])
            if "title" in part and "title" not in results:
                results["title"] = part["title"]
        if args.before_json:
            with open(args.before_json) as f:
                before = json.load(f)["grids"]
            for name, grid in results["grids"].items():
                cells = {(c["s"], c["d"]): c for c in before.get(name, {}).get("cells", [])}
                for c in grid["cells"]:
                    if (c["s"], c["d"]) in cells and "after" in cells[(c["s"], c["d"])]:
                        c["before"] = cells[(c["s"], c["d"])]["after"]
        if args.title:
            results["title"] = args.title
        programs = [p for p in ("after", "before") if any(p in c for g in results["grids"].values() for c in g["cells"])]
        print_table(results, programs)
        if args.plot:
            plot(results, args.plot)
        return

    import skimage
    from skimage.restoration import denoise_nl_means

    workdir = args.workdir or tempfile.mkdtemp(prefix="nlm-grid-")
    os.makedirs(workdir, exist_ok=True)
    programs = {"after": args.benchmark}
    if args.before:
        programs["before"] = args.before
    results = {"skimage": skimage.__version__, "grids": {}}
    if args.title:
        results["title"] = args.title
    for name in args.grids.split(","):
        g = dict(GRIDS[name])
        if args.patches:
            g["patches"] = [int(v) for v in args.patches.split(",")]
        if args.distances:
            g["distances"] = [int(v) for v in args.distances.split(",")]
        image = make_input(g["shape"], 1, "float32")
        path = os.path.join(workdir, f"grid-{name}.mha")
        write_mha(path, image, 1)
        crop = np.ascontiguousarray(image[tuple(slice(0, g["crop"]) for _ in g["shape"])])
        grid = {"shape": list(g["shape"]), "patches": g["patches"], "distances": g["distances"], "cells": []}
        for d in g["distances"]:
            for s in g["patches"]:
                offsets = (2 * d + 1) ** len(g["shape"])
                cell = {"s": s, "d": d}
                for label, program in programs.items():
                    cpu_crop = g["crop"] if label == "after" and not args.no_cpu else 0
                    cell[label] = time_cell(program, path, s, d, args.repeats, os.path.join(workdir, f"cache-{label}"),
                                            cpu_crop)
                t = time.perf_counter()
                denoise_nl_means(crop, patch_size=s, patch_distance=d, h=0.08, sigma=0.05, fast_mode=True,
                                 preserve_range=True)
                seconds = time.perf_counter() - t
                cell["skimage"] = {"shape": list(crop.shape), "seconds": seconds, "vops": crop.size * offsets / seconds}
                grid["cells"].append(cell)
                print(f"{name} s{s} d{d}: {json.dumps(cell)}", flush=True)
        results["grids"][name] = grid
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    print()
    print_table(results, list(programs))
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
