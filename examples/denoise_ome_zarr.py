#!/usr/bin/env python3
"""Denoise the full-resolution level of an OME-Zarr image with Dask, without loading it whole.

    python3 examples/denoise_ome_zarr.py input.ome.zarr output.ome.zarr --patch-size 5 --patch-distance 6 --h 0.08

Reads level 0 of the image's first multiscale (OME-Zarr 0.4 or 0.5 metadata) as a dask.array
chunked as stored, denoises it with itk_cudanonlocalmeans.dask.denoise_nl_means (bitwise what the
drop-in gives on the whole array; an axis of type "channel" is scikit-image's channel_axis; axes of
size 1, such as a single time point, are kept), and writes it as a one-level OME-Zarr image with the
same axes and scale. Needs dask[array] and zarr (pip install itk-cudanonlocalmeans[dask] zarr).
"""

import argparse
import json

import numpy as np


def multiscale_of(group):
    attributes = dict(group.attrs)
    ome = attributes.get("ome", attributes)  # 0.5 keeps the metadata under "ome"
    return ome["multiscales"][0], "ome" in attributes


def denoise_ome_zarr(source, target, backend="auto", **parameters):
    import dask.array as da
    import zarr

    from itk_cudanonlocalmeans.dask import denoise_nl_means

    group = zarr.open_group(source, mode="r")
    multiscale, version05 = multiscale_of(group)
    level = multiscale["datasets"][0]
    image = da.from_zarr(group[level["path"]])
    axes = multiscale.get("axes", [])
    channel = [i for i, a in enumerate(axes) if isinstance(a, dict) and a.get("type") == "channel"]
    # Axes of size 1 (a single time point or channel) are set aside, as scikit-image would squeeze them.
    single = [i for i in range(image.ndim) if image.shape[i] == 1]
    squeezed = image[tuple(0 if i in single else slice(None) for i in range(image.ndim))]
    kept = [i for i in range(image.ndim) if i not in single]
    channel_axis = kept.index(channel[0]) if channel and channel[0] in kept else None
    denoised = denoise_nl_means(squeezed, channel_axis=channel_axis, backend=backend, **parameters)
    denoised = denoised.reshape(image.shape)

    out = zarr.open_group(target, mode="w")
    out_level = dict(level)
    out_multiscale = dict(multiscale, datasets=[out_level])
    if version05:
        out.attrs["ome"] = dict(group.attrs["ome"], multiscales=[out_multiscale])
    else:
        out.attrs["multiscales"] = [out_multiscale]
    da.to_zarr(denoised.rechunk(image.chunksize), target, component=level["path"], overwrite=True)
    return denoised.shape, denoised.dtype


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--patch-size", type=int, default=7)
    parser.add_argument("--patch-distance", type=int, default=11)
    parser.add_argument("--h", type=float, default=0.1)
    parser.add_argument("--sigma", type=float, default=0.0)
    parser.add_argument("--preserve-range", action="store_true")
    parser.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    args = parser.parse_args()
    shape, dtype = denoise_ome_zarr(args.source, args.target, backend=args.backend, patch_size=args.patch_size,
                                    patch_distance=args.patch_distance, h=args.h, sigma=args.sigma,
                                    preserve_range=args.preserve_range)
    print(json.dumps({"wrote": args.target, "shape": list(shape), "dtype": np.dtype(dtype).name}))


if __name__ == "__main__":
    main()
