#!/usr/bin/env python3
"""itk_cudanonlocalmeans.dask on a dask_cuda.LocalCUDACluster (one worker per GPU) against the
single-process drop-in, in one run:

    python3 benchmarks/dask_benchmarks.py [--size 512] [--chunk 256] [--patch-size 3] [--patch-distance 3]

For a size^3 float32 volume (smooth pattern plus noise) it times, warm (the second of two runs):
 1. the drop-in ``denoise_nl_means`` on the whole array in this process (backend 'cuda');
 2. ``itk_cudanonlocalmeans.dask.denoise_nl_means`` on chunk^3 blocks computed by a
    ``dask_cuda.LocalCUDACluster`` (one worker process per visible GPU);
 3. the same Dask graph on Dask's local threaded scheduler in this process;
and checks that 2 and 3 are bitwise equal to 1. Throughput is voxel-offsets per second: voxels x
(2 patch_distance + 1)^3 / seconds, host to host (NumPy in, NumPy out).
"""

import argparse
import json
import time

import numpy as np


def volume(n, seed=0):
    rng = np.random.default_rng(seed)
    z, y, x = np.meshgrid(*[np.linspace(0, 1, n, dtype=np.float32)] * 3, indexing="ij", sparse=True)
    clean = 0.5 + 0.25 * np.sin(6 * x + 4 * z) * np.cos(5 * y)
    return (clean + rng.normal(0, 0.1, (n, n, n)).astype(np.float32)).astype(np.float32)


def timed(function):
    function()  # warm: kernel cache, workers, imports
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--patch-size", type=int, default=3)
    parser.add_argument("--patch-distance", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import dask
    import dask.array as da
    import dask_cuda
    from distributed import Client

    from itk_cudanonlocalmeans import denoise_nl_means
    from itk_cudanonlocalmeans.dask import denoise_nl_means as dask_nlm

    image = volume(args.size)
    kwargs = dict(patch_size=args.patch_size, patch_distance=args.patch_distance, h=0.08, sigma=0.05)
    offsets = float(image.size) * (2 * args.patch_distance + 1) ** 3
    rows = {"size": args.size, "chunk": args.chunk, **kwargs, "dask": dask.__version__,
            "dask_cuda": dask_cuda.__version__}

    whole, seconds = timed(lambda: denoise_nl_means(image, backend="cuda", **kwargs))
    rows["single_process_s"] = seconds
    rows["single_process_vops"] = offsets / seconds

    lazy = dask_nlm(da.from_array(image, chunks=args.chunk), backend="cuda", **kwargs)
    threaded, seconds = timed(lambda: lazy.compute(scheduler="threads"))
    rows["threads_s"] = seconds
    rows["threads_vops"] = offsets / seconds
    rows["threads_bitwise"] = bool(np.array_equal(threaded.view(np.uint32), whole.view(np.uint32)))

    with dask_cuda.LocalCUDACluster() as cluster, Client(cluster) as client:
        rows["cuda_workers"] = len(client.scheduler_info()["workers"])
        # The input travels to the workers once (scattered), as it would be read there from Zarr.
        source = da.from_array(image, chunks=args.chunk).persist()
        distributed_lazy = dask_nlm(source, backend="cuda", **kwargs)
        clustered, seconds = timed(lambda: distributed_lazy.compute())
        rows["cluster_s"] = seconds
        rows["cluster_vops"] = offsets / seconds
        rows["cluster_bitwise"] = bool(np.array_equal(clustered.view(np.uint32), whole.view(np.uint32)))
    rows["cluster_over_single_process"] = rows["cluster_vops"] / rows["single_process_vops"]
    print(json.dumps(rows, indent=1), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
