"""itk_cudanonlocalmeans.dask: lazy, and bitwise the drop-in on the whole array whatever the chunking
(uneven chunks, chunks smaller than the halo, channels), with Dask's threads and a LocalCluster of
processes."""

import numpy as np
import pytest

from conftest import BACKEND, smooth_noisy

da = pytest.importorskip("dask.array")

from itk_cudanonlocalmeans import denoise_nl_means  # noqa: E402
from itk_cudanonlocalmeans.dask import denoise_nl_means as dask_denoise_nl_means  # noqa: E402

CASES = [
    # (shape, dtype, channel_axis, chunks, parameters)
    ((21, 26, 17), np.float32, None, (7, 9, 5), dict(patch_size=3, patch_distance=2, h=0.1)),
    ((21, 26, 17), np.float64, None, (3, 3, 4), dict(patch_size=3, patch_distance=2, h=0.1, sigma=0.05)),
    ((40, 33, 3), np.float32, -1, (13, 8, 3), dict(patch_size=5, patch_distance=3, h=0.08)),
    ((3, 40, 33), np.float64, 0, (3, 17, 11), dict(patch_size=4, patch_distance=2, h=0.1)),
    ((9, 8, 7, 6), np.float32, None, (4, 3, 7, 2), dict(patch_size=3, patch_distance=1, h=0.15)),
    ((30, 31), np.float32, None, (10, 7), dict(patch_size=5, patch_distance=4, h=0.1, fast_mode=False)),
]


def _image(shape, dtype, channel_axis, seed):
    if channel_axis is None:
        return smooth_noisy(shape, dtype=dtype, seed=seed)
    moved = list(shape)
    channels = moved.pop(channel_axis)
    image = smooth_noisy(tuple(moved), channels=channels, dtype=dtype, seed=seed)
    return np.moveaxis(image, -1, channel_axis)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_dask_equals_the_whole_array_bitwise(case):
    shape, dtype, channel_axis, chunks, params = CASES[case]
    image = _image(shape, dtype, channel_axis, seed=case)
    whole = denoise_nl_means(image, channel_axis=channel_axis, backend=BACKEND, **params)
    lazy = dask_denoise_nl_means(da.from_array(image, chunks=chunks), channel_axis=channel_axis, backend=BACKEND,
                                 **params)
    assert isinstance(lazy, da.Array)
    assert lazy.dtype == whole.dtype and lazy.shape == whole.shape
    result = lazy.compute(scheduler="threads")
    assert np.array_equal(result, whole), f"{np.count_nonzero(result != whole)} values differ"


def test_dask_integers_are_converted_as_by_the_drop_in():
    image = (smooth_noisy((24, 20), seed=7) * 200).clip(0, 255).astype(np.uint8)
    whole = denoise_nl_means(image, patch_size=3, patch_distance=2, h=0.1, backend=BACKEND)
    lazy = dask_denoise_nl_means(da.from_array(image, chunks=(7, 6)), patch_size=3, patch_distance=2, h=0.1,
                                 backend=BACKEND)
    assert np.array_equal(lazy.compute(scheduler="threads"), whole)


def test_dask_refuses_what_the_drop_in_refuses():
    with pytest.raises(NotImplementedError):
        dask_denoise_nl_means(da.zeros((4, 5, 6, 7, 8), chunks=3))
    with pytest.raises(ValueError, match="h is 0"):
        dask_denoise_nl_means(da.zeros((8, 8), chunks=4), h=0)
    with pytest.raises(ValueError, match="empty"):
        dask_denoise_nl_means(da.zeros((0, 8), chunks=4))


def test_dask_big_endian_blocks_give_the_native_result():
    image = smooth_noisy((20, 24), dtype=np.float64, seed=12).astype(">f8")
    lazy = dask_denoise_nl_means(da.from_array(image, chunks=(10, 12)), 3, 2, 0.1, backend=BACKEND)
    assert np.array_equal(lazy.compute(), denoise_nl_means(image, 3, 2, 0.1, backend=BACKEND))


def test_dask_on_a_local_cluster_of_processes():
    distributed = pytest.importorskip("distributed")
    image = smooth_noisy((25, 22, 19), seed=11)
    params = dict(patch_size=3, patch_distance=2, h=0.1, sigma=0.02)
    whole = denoise_nl_means(image, backend=BACKEND, **params)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            lazy = dask_denoise_nl_means(da.from_array(image, chunks=(9, 8, 7)), backend=BACKEND, **params)
            result = client.compute(lazy).result()
    assert np.array_equal(result, whole)
