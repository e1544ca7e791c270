"""itk_cudanonlocalmeans.denoise_nl_means against scikit-image 0.26.0's denoise_nl_means."""

import re

import numpy as np
import pytest
import skimage
from skimage.restoration import denoise_nl_means as skimage_nlm

from conftest import BACKEND, max_ulp_distance, smooth_noisy
from itk_cudanonlocalmeans import denoise_nl_means

assert skimage.__version__ == "0.26.0", "scikit-image 0.26.0 is the oracle"

CASES = [
    # name, array, keyword arguments
    ("2D gray float32", smooth_noisy((40, 44), seed=1), dict(patch_size=5, patch_distance=4, h=0.1, sigma=0.05)),
    ("2D gray float64", smooth_noisy((36, 30), dtype=np.float64, seed=2), dict(patch_size=7, patch_distance=5, h=0.12)),
    ("2D RGB float32", smooth_noisy((30, 32), 3, seed=3), dict(patch_size=3, patch_distance=5, h=0.08, channel_axis=-1)),
    ("2D RGB channel_axis=0", np.moveaxis(smooth_noisy((24, 26), 3, np.float64, 4), -1, 0),
     dict(patch_size=3, patch_distance=3, h=0.1, channel_axis=0)),
    ("2D uint8", np.clip(255 * smooth_noisy((32, 30), seed=5), 0, 255).astype(np.uint8),
     dict(patch_size=5, patch_distance=3, h=0.1)),
    ("2D uint8 preserve_range", np.clip(255 * smooth_noisy((32, 30), seed=6), 0, 255).astype(np.uint8),
     dict(patch_size=5, patch_distance=3, h=25.0, sigma=8.0, preserve_range=True)),
    ("2D float16", smooth_noisy((24, 20), dtype=np.float16, seed=7), dict(patch_size=3, patch_distance=2, h=0.1)),
    ("3D float32", smooth_noisy((16, 18, 20), seed=8), dict(patch_size=3, patch_distance=3, h=0.1, sigma=0.05)),
    ("3D float64", smooth_noisy((14, 15, 16), dtype=np.float64, seed=9), dict(patch_size=5, patch_distance=2, h=0.2)),
    ("3D 2-channel float32", smooth_noisy((12, 13, 14), 2, seed=10),
     dict(patch_size=3, patch_distance=2, h=0.12, channel_axis=-1)),
    ("3D singleton axis squeezed", smooth_noisy((1, 20, 22), seed=11), dict(patch_size=3, patch_distance=2, h=0.1)),
    ("2D slow float32", smooth_noisy((24, 22), seed=12), dict(patch_size=5, patch_distance=3, h=0.15, fast_mode=False)),
    ("3D slow float64", smooth_noisy((10, 11, 12), dtype=np.float64, seed=13),
     dict(patch_size=3, patch_distance=2, h=0.2, fast_mode=False)),
    ("4D float32", smooth_noisy((6, 7, 8, 9), seed=16), dict(patch_size=3, patch_distance=1, h=0.1, sigma=0.05)),
    ("4D float64", smooth_noisy((5, 6, 7, 8), dtype=np.float64, seed=17), dict(patch_size=3, patch_distance=2, h=0.15)),
    ("4D 2-channel float32", smooth_noisy((5, 6, 6, 7), 2, seed=18),
     dict(patch_size=3, patch_distance=1, h=0.12, channel_axis=-1)),
    ("3D 3-channel float64", smooth_noisy((9, 10, 11), 3, np.float64, 19),
     dict(patch_size=5, patch_distance=2, h=0.1, channel_axis=-1)),
    ("negative h and sigma", smooth_noisy((20, 20), dtype=np.float64, seed=14), dict(patch_size=3, patch_distance=2,
                                                                                     h=-0.1, sigma=-0.05)),
]


@pytest.mark.parametrize("name, image, kwargs", CASES, ids=[c[0] for c in CASES])
def test_matches_scikit_image(name, image, kwargs):
    expected = skimage_nlm(image, **kwargs)
    got = denoise_nl_means(image, backend=BACKEND, **kwargs)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    differing = int(np.count_nonzero(got != expected))
    print(f"{name}: max|diff| {diff.max():.3g}, {differing} of {got.size} values differ")
    if got.dtype == np.float32:
        assert max_ulp_distance(got, expected) <= (1 if kwargs.get("fast_mode", True) else 2)
    else:
        scale = max(1.0, float(np.ptp(expected)))
        assert diff.max() <= (5e-9 if kwargs.get("fast_mode", True) else 1e-12) * scale


@pytest.mark.parametrize("shape, kwargs", [
    ((5,), dict()),
    ((5, 3), dict(channel_axis=-1)),
    ((5, 5, 5, 5, 5), dict()),
    ((5, 5, 5, 5), dict(fast_mode=False)),
    ((4, 5, 6, 2), dict(channel_axis=-1, fast_mode=False)),
])
def test_unsupported_dimensions_raise_like_scikit_image(shape, kwargs):
    image = np.zeros(shape, np.float32)
    with pytest.raises(NotImplementedError):
        skimage_nlm(image, **kwargs)
    with pytest.raises(NotImplementedError):
        denoise_nl_means(image, **kwargs)


def test_other_errors_like_scikit_image():
    image = np.zeros((6, 7), np.float32)
    for call in (skimage_nlm, denoise_nl_means):
        with pytest.raises(TypeError):
            call(image, patch_size=7.0)
        with pytest.raises(TypeError):
            call([[0.0, 1.0], [1.0, 0.0]])
        with pytest.raises(ValueError):
            call(np.zeros((6, 7, 2), np.float32), channel_axis=(0, 1))
        with pytest.raises(ValueError):
            call(np.zeros((6, 7), np.complex64))


def test_empty_images_like_scikit_image():
    # An axis of length 0: scikit-image cannot pad it (ValueError); no channel: an empty result.
    for shape, kwargs in (((0, 5), {}), ((4, 0, 5), {}), ((3, 0, 2), dict(channel_axis=-1))):
        for call in (skimage_nlm, denoise_nl_means):
            with pytest.raises(ValueError):
                call(np.zeros(shape, np.float32), patch_size=3, patch_distance=2, **kwargs)
    for shape, axis in (((5, 6, 0), -1), ((0, 5, 6), 0), ((4, 5, 6, 0), -1)):
        image = np.zeros(shape, np.float32)
        expected = skimage_nlm(image, patch_size=3, patch_distance=2, channel_axis=axis)
        got = denoise_nl_means(image, patch_size=3, patch_distance=2, channel_axis=axis, backend=BACKEND)
        assert got.shape == expected.shape == shape and got.dtype == expected.dtype


def test_big_endian_data_give_the_native_result():
    # scikit-image refuses big-endian buffers; the drop-in takes their values in this machine's order.
    image = smooth_noisy((20, 22), dtype=np.float64, seed=20)
    for dtype in (">f8", ">f4", ">u2"):
        data = (1000 * image).astype(dtype) if dtype == ">u2" else image.astype(dtype)
        native = data.astype(data.dtype.newbyteorder("="))
        got = denoise_nl_means(data, 3, 2, 0.1, backend=BACKEND)
        assert got.dtype.isnative and np.array_equal(got, skimage_nlm(native, 3, 2, 0.1)), dtype


def test_h_must_be_a_number_as_in_scikit_image():
    image = smooth_noisy((10, 10))
    for call in (skimage_nlm, denoise_nl_means):
        with pytest.raises(TypeError):
            call(image, 3, 2, h="0.1")


def test_refuses_what_scikit_image_computes_meaninglessly():
    image = smooth_noisy((12, 12))
    with pytest.raises(ValueError, match="h is 0"):
        denoise_nl_means(image, h=0.0)
    with pytest.raises(ValueError, match="patch_distance"):
        denoise_nl_means(image, patch_distance=-1)


def test_default_backend_gives_the_cpu_result():
    # backend="auto" computes on the GPU where one is usable (bitwise equal to the CPU backend) and
    # otherwise on the CPU.
    image = smooth_noisy((22, 26), seed=15)
    assert np.array_equal(denoise_nl_means(image, 3, 2, 0.1), denoise_nl_means(image, 3, 2, 0.1, backend="cpu"))
    with pytest.raises(ValueError, match="backend"):
        denoise_nl_means(image, backend="gpu")


def test_dimension_without_wrapping_raises_clearly(monkeypatch):
    # An ITK whose wrapping lacks the image type (PyPI's wraps 2, 3 and 4 dimensions): the error
    # names the setting that adds it.
    import itk

    class Unwrapped:
        def __getitem__(self, types):
            raise KeyError(types)

    monkeypatch.setattr(itk, "CudaNonLocalMeansImageFilter", Unwrapped())
    with pytest.raises(NotImplementedError, match="ITK_WRAP_IMAGE_DIMS"):
        denoise_nl_means(np.zeros((4, 5, 6, 7), np.float32), 3, 1)


def test_pip_nvrtc_is_found():
    # `pip install itk-cudanonlocalmeans[nvrtc]` (scripts/make-wheel-venv.sh installs the extra):
    # the package names pip's NVRTC as the fallback of the filter's NVRTC search (used when no CUDA
    # toolkit's NVRTC is found).
    pytest.importorskip("nvidia.cuda_nvrtc", reason="the nvrtc extra is not installed")
    import ctypes
    import itk_cudanonlocalmeans as package
    library = package._pip_nvrtc_library()
    assert library is not None and re.search(r"libnvrtc\.so\.1[2-9]$", library), library
    ctypes.CDLL(library)
    assert package.os.environ.get("CUDANONLOCALMEANS_NVRTC_FALLBACK") == library
