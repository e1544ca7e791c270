"""Non-local means on Dask arrays, for volumes larger than one machine's memory or spread over a cluster.

    import dask.array as da
    from itk_cudanonlocalmeans.dask import denoise_nl_means
    volume = da.from_zarr("volume.zarr")
    denoised = denoise_nl_means(volume, patch_size=5, patch_distance=6, h=0.08)   # lazy
    denoised.to_zarr("denoised.zarr")

takes the arguments of ``itk_cudanonlocalmeans.denoise_nl_means`` (scikit-image's) and returns a lazy
``dask.array``. Each block is computed with the halo it needs, ``patch_size // 2 + patch_distance + 1``
voxels on every side (clipped at the volume's border, where the filter reflects about the border
exactly as on the whole volume), so the result is bitwise equal to the drop-in on the whole array,
whatever the chunking: chunks smaller than the halo are merged by Dask first, and the channel axis is
kept in one chunk.
"""

import numpy as np

from . import _channels_last, _check_dimensions, _check_mode, _denoise_channels_last, _output_shape, _parameters, \
    _to_float

__all__ = ["denoise_nl_means"]


def denoise_nl_means(image, patch_size=7, patch_distance=11, h=0.1, fast_mode=True, sigma=0.0, *,
                     preserve_range=False, channel_axis=None, backend="auto"):
    """``itk_cudanonlocalmeans.denoise_nl_means`` on a ``dask.array`` (or anything
    ``dask.array.asarray`` takes), as a lazy ``dask.array`` of the same dtype and shape the drop-in
    would return."""
    import dask.array as da

    patch_size, patch_distance, h, sigma = _parameters(patch_size, patch_distance, h, sigma, backend)
    image, axis = _channels_last(da.asarray(image), channel_axis, da)
    ndim = image.ndim - 1
    _check_dimensions(ndim)
    float_dtype = _to_float(np.zeros((1,), image.dtype), preserve_range).dtype
    _check_mode(ndim, axis is not None, fast_mode, h, patch_distance)

    # Elementwise conversion, then blocks with their halo; the channels stay together.
    image = image.map_blocks(_to_float, preserve_range, dtype=float_dtype)
    image = image.rechunk({ndim: -1})
    halo = (patch_size + 1 if patch_size % 2 == 0 else patch_size) // 2 + patch_distance + 1
    depth = {a: halo for a in range(ndim)}
    depth[ndim] = 0
    result = image.map_overlap(_denoise_channels_last, depth=depth, boundary="none", trim=True, dtype=float_dtype,
                               patch_size=patch_size, patch_distance=patch_distance, h=h, fast_mode=fast_mode,
                               sigma=sigma, backend=backend)

    return _output_shape(result, ndim, fast_mode, axis, da)
