"""examples/denoise_ome_zarr.py: an OME-Zarr image read as chunks, denoised with Dask, written as
OME-Zarr with the same axes and scale; bitwise the drop-in's result on the whole array."""

import importlib.util
import os

import numpy as np
import pytest

from conftest import BACKEND, smooth_noisy

pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")

from itk_cudanonlocalmeans import denoise_nl_means  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "denoise_ome_zarr.py")


def _example():
    spec = importlib.util.spec_from_file_location("denoise_ome_zarr", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_ome_zarr_round_trip_is_bitwise_the_drop_in(tmp_path, version):
    image = np.moveaxis(smooth_noisy((12, 20, 18), channels=2, seed=3), -1, 0)[np.newaxis]  # t, c, z, y, x
    axes = [{"name": "t", "type": "time"}, {"name": "c", "type": "channel"}] + [
        {"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"]
    multiscale = {"axes": axes, "datasets": [
        {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0, 1.0, 0.5, 0.5]}]}]}
    source, target = str(tmp_path / "in.ome.zarr"), str(tmp_path / "out.ome.zarr")
    group = zarr.open_group(source, mode="w", zarr_format=2 if version == "0.4" else 3)
    if version == "0.4":
        group.attrs["multiscales"] = [dict(multiscale, version="0.4")]
    else:
        group.attrs["ome"] = {"version": "0.5", "multiscales": [multiscale]}
    array = group.create_array("0", shape=image.shape, chunks=(1, 2, 5, 7, 6), dtype=image.dtype)
    array[...] = image

    params = dict(patch_size=3, patch_distance=2, h=0.1, sigma=0.02)
    _example().denoise_ome_zarr(source, target, backend=BACKEND, **params)

    out = zarr.open_group(target, mode="r")
    expected = denoise_nl_means(image[0], channel_axis=0, backend=BACKEND, **params)[np.newaxis]
    assert np.array_equal(out["0"][...], expected)
    written = dict(out.attrs)
    written = written.get("ome", written)["multiscales"][0]
    assert written["axes"] == axes
    assert written["datasets"][0]["coordinateTransformations"] == multiscale["datasets"][0]["coordinateTransformations"]
