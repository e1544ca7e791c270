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

from . import _axis_values, _channels_last, _check_dimensions, _check_extensions, _check_mode, \
    _check_not_empty, _denoise_channels_last, _output_shape, _parameters, _to_float

__all__ = ["denoise_nl_means"]


def denoise_nl_means(image, patch_size=7, patch_distance=11, h=0.1, fast_mode=True, sigma=0.0, *,
                     preserve_range=False, channel_axis=None, backend="auto", rician=False, mask=None):
    """``itk_cudanonlocalmeans.denoise_nl_means`` on a ``dask.array`` (or anything
    ``dask.array.asarray`` takes), as a lazy ``dask.array`` of the same dtype and shape the drop-in
    would return. An array ``sigma`` (noise map) and ``mask`` may be Dask or NumPy arrays of the
    image's spatial shape; they are cut into the image's blocks with the same halo."""
    import dask.array as da

    patch_size, patch_distance, h, sigma = _parameters(patch_size, patch_distance, h, sigma, backend)
    image, axis = _channels_last(da.asarray(image), channel_axis, da)
    ndim = image.ndim - 1
    _check_dimensions(ndim)
    _check_not_empty(image.shape[:-1])
    float_dtype = _to_float(np.zeros((1,), image.dtype), preserve_range).dtype
    _check_mode(ndim, axis is not None, fast_mode, h, patch_distance)

    # Elementwise conversion, then blocks with their halo; the channels stay together.
    _check_extensions(image.shape[:-1], fast_mode, sigma, rician, mask, patch_size, patch_distance)
    image = image.map_blocks(_to_float, preserve_range, dtype=float_dtype)
    image = image.rechunk({ndim: -1})
    sizes, distances = _axis_values(patch_size, ndim), _axis_values(patch_distance, ndim)
    depth = {a: (sizes[a] + 1 if sizes[a] % 2 == 0 else sizes[a]) // 2 + distances[a] + 1 for a in range(ndim)}
    depth[ndim] = 0
    # The noise map and the mask travel as arrays of the image's blocks with one channel.
    spatial = image.chunks[:-1]
    extras = [da.asarray(a)[..., np.newaxis].rechunk(spatial + ((1,),)) for a in (sigma, mask)
              if a is not None and np.ndim(a) > 0]
    has_map, has_mask = np.ndim(sigma) > 0, mask is not None

    def block(values, *more):
        more = [m[..., 0] for m in more]
        noise = more.pop(0) if has_map else sigma
        return _denoise_channels_last(values, patch_size, patch_distance, h, fast_mode, noise, backend, rician,
                                      more.pop(0) if has_mask else None)

    result = da.map_overlap(block, image, *extras, depth=depth, boundary="none", trim=True, dtype=float_dtype,
                            align_arrays=False)

    return _output_shape(result, ndim, fast_mode, axis, da)
