"""The opt-in extensions (doc/numerical-contract.md, section 6) through Python: the drop-in's
``rician=``, ``mask=`` and array ``sigma=`` against an independent long-double NumPy reference
(test/scripts/nlm_extensions_reference.py), their reductions, their errors, the wrapping's Set methods
and snake_case keywords, and the Dask function with them."""

import numpy as np
import pytest

from conftest import BACKEND, backend_enum, smooth_noisy
from itk_cudanonlocalmeans import denoise_nl_means
from nlm_extensions_reference import classic_nl_means_reference, nl_means_reference

#: Largest |filter - reference| allowed (measured: at most 6e-16): the float64 rounding on unit-range data is about
#: 1e-15 per operation; a wrong formula differs by the size of the noise (1e-2).
TOLERANCE = 1e-12


def ball(shape, radius=0.35):
    """A boolean ball around the centre of `shape` (a share of the extent)."""
    grids = np.meshgrid(*[(np.arange(n) + 0.5) / n - 0.5 for n in shape], indexing="ij")
    return sum(g * g for g in grids) < radius * radius


def noise_map(shape, seed, top=0.1):
    """A noise map in [0, top) with some exact zeros."""
    rng = np.random.default_rng(seed)
    sigma = rng.uniform(0.0, top, shape)
    sigma.flat[::7] = 0.0
    return sigma


CASES = [
    # name, image (channels last), channel_axis, keyword arguments of both
    ("2D Rician", smooth_noisy((26, 22), dtype=np.float64, seed=31), None,
     dict(patch_size=5, patch_distance=3, h=0.12, sigma=0.05, rician=True)),
    ("2D noise map", smooth_noisy((26, 22), dtype=np.float64, seed=32), None,
     dict(patch_size=5, patch_distance=3, h=0.12, sigma=noise_map((26, 22), 33))),
    ("2D mask", smooth_noisy((26, 22), dtype=np.float64, seed=34), None,
     dict(patch_size=3, patch_distance=4, h=0.1, sigma=0.02, mask=ball((26, 22)))),
    ("2D RGB Rician, noise map, integer mask", smooth_noisy((20, 18), 3, np.float64, 35), -1,
     dict(patch_size=3, patch_distance=2, h=0.1, sigma=noise_map((20, 18), 36), rician=True,
          mask=ball((20, 18)).astype(np.int16) * 5)),
    ("3D Rician, noise map, mask", smooth_noisy((12, 11, 10), dtype=np.float64, seed=37), None,
     dict(patch_size=3, patch_distance=2, h=0.15, sigma=noise_map((12, 11, 10), 38), rician=True,
          mask=ball((12, 11, 10)))),
    ("3D float32 Rician", smooth_noisy((10, 9, 11), seed=39), None,
     dict(patch_size=4, patch_distance=2, h=0.15, sigma=0.04, rician=True)),
    ("4D noise map, mask", smooth_noisy((5, 6, 5, 7), dtype=np.float64, seed=40), None,
     dict(patch_size=3, patch_distance=1, h=0.12, sigma=noise_map((5, 6, 5, 7), 41), mask=ball((5, 6, 5, 7)))),
    ("3D per-axis patch (3, 5, 5), distance (1, 3, 3)", smooth_noisy((9, 14, 13), dtype=np.float64, seed=49), None,
     dict(patch_size=(3, 5, 5), patch_distance=(1, 3, 3), h=0.15, sigma=0.03)),
    ("2D RGB per-axis patch (6, 3), Rician, mask", smooth_noisy((18, 21), 3, np.float64, 50), -1,
     dict(patch_size=(6, 3), patch_distance=2, h=0.12, sigma=0.04, rician=True, mask=ball((18, 21)))),
    ("2D per-axis distance (0, 4), noise map", smooth_noisy((20, 17), dtype=np.float64, seed=51), None,
     dict(patch_size=5, patch_distance=(0, 4), h=0.1, sigma=noise_map((20, 17), 52))),
]


@pytest.mark.parametrize("name, image, channel_axis, kwargs", CASES, ids=[c[0] for c in CASES])
def test_matches_the_long_double_reference(name, image, channel_axis, kwargs):
    result = denoise_nl_means(image, channel_axis=channel_axis, backend=BACKEND, **kwargs)
    channels = image if channel_axis is not None else image[..., np.newaxis]
    reference = nl_means_reference(channels, **kwargs)
    if channel_axis is None:
        reference = reference[..., 0]
    reference = reference.astype(result.dtype)  # the working type, as the filter rounds
    difference = np.abs(result.astype(np.float64) - reference.astype(np.float64))
    tolerance = TOLERANCE if result.dtype == np.float64 else 2 * np.finfo(np.float32).eps
    print(f"{name}: max |filter - reference| = {difference.max():.3g}, "
          f"{np.count_nonzero(difference):d} of {difference.size} differ")
    assert difference.max() <= tolerance
    if "mask" in kwargs:
        outside = np.asarray(kwargs["mask"]) == 0
        assert np.array_equal(result[outside], image[outside].astype(result.dtype))


def test_arrays_with_one_long_axis_keep_their_axes():
    # An array with at most one axis longer than 1 (13 x 1) is both C- and Fortran-contiguous, and
    # itk.image_from_array takes it as Fortran-ordered, unreversed: per-axis radii then applied to
    # the wrong axes. The drop-in must give the reference's numbers for such arrays too.
    for shape, size, distance in (((13, 1), 3, (3, 1)), ((1, 1, 11), (3, 3, 5), (0, 1, 2)), ((9, 1, 1), 3, (2, 1, 0))):
        image = smooth_noisy(shape, dtype=np.float64, seed=54)
        sigma, mask = noise_map(shape, 55), np.arange(image.size).reshape(shape) % 4 != 1
        result = denoise_nl_means(image, size, distance, 0.12, sigma=sigma, mask=mask, backend=BACKEND)
        reference = nl_means_reference(image[..., np.newaxis], size, distance, 0.12, sigma, mask=mask)
        assert result.shape == np.squeeze(image).shape
        assert np.abs(result - reference.reshape(result.shape)).max() <= TOLERANCE, shape


def test_reductions_are_bitwise():
    image = smooth_noisy((30, 28), dtype=np.float64, seed=42)
    plain = denoise_nl_means(image, 5, 3, 0.1, sigma=0.04, backend=BACKEND)
    constant = denoise_nl_means(image, 5, 3, 0.1, sigma=np.full(image.shape, 0.04), backend=BACKEND)
    full = denoise_nl_means(image, 5, 3, 0.1, sigma=0.04, mask=np.ones(image.shape, bool), backend=BACKEND)
    assert np.array_equal(plain.view(np.uint64), constant.view(np.uint64))
    assert np.array_equal(plain.view(np.uint64), full.view(np.uint64))
    empty = denoise_nl_means(image, 5, 3, 0.1, mask=np.zeros(image.shape, np.uint8), backend=BACKEND)
    assert np.array_equal(empty, image)


def test_equal_per_axis_parameters_are_the_plain_integers_bitwise():
    image = smooth_noisy((11, 12, 13), dtype=np.float64, seed=53)
    plain = denoise_nl_means(image, 5, 2, 0.12, sigma=0.02, backend=BACKEND)
    axes = denoise_nl_means(image, (5, 5, 5), (2, 2, 2), 0.12, sigma=0.02, backend=BACKEND)
    even = denoise_nl_means(image, (4, 4, 4), 2, 0.12, sigma=0.02, backend=BACKEND)  # 4 -> 5, as scikit-image
    assert np.array_equal(plain.view(np.uint64), axes.view(np.uint64))
    assert np.array_equal(plain.view(np.uint64), even.view(np.uint64))
    with pytest.raises(ValueError, match="one entry per spatial axis"):
        denoise_nl_means(image, (3, 3), 2, 0.1, backend=BACKEND)
    with pytest.raises(ValueError, match="fast_mode=True"):
        denoise_nl_means(image[0], (3, 5), 2, 0.1, fast_mode=False, backend=BACKEND)


def test_rician_lowers_the_background_bias():
    rng = np.random.default_rng(43)
    yy, xx = np.mgrid[:80, :80] - 39.5
    signal = (xx * xx + yy * yy < 25 ** 2).astype(float)
    sigma = 0.1
    magnitude = np.hypot(signal + rng.normal(0, sigma, signal.shape), rng.normal(0, sigma, signal.shape))
    background = xx * xx + yy * yy > 33 ** 2
    gaussian = denoise_nl_means(magnitude, 5, 3, 0.1, sigma=sigma, backend=BACKEND)[background].mean()
    rician = denoise_nl_means(magnitude, 5, 3, 0.1, sigma=sigma, rician=True, backend=BACKEND)[background].mean()
    print(f"background mean (true 0): Gaussian {gaussian:.4f}, Rician {rician:.4f}")
    assert gaussian > 0.08 and abs(rician) < 0.5 * gaussian


@pytest.mark.parametrize("kwargs, message", [
    (dict(rician=True), "sigma > 0"),
    (dict(sigma=np.full((5, 5), 0.1)), "spatial shape"),
    (dict(mask=np.ones((5, 5), bool)), "spatial shape"),
    (dict(mask=np.ones((12, 10), np.float32)), "boolean or integer"),
    (dict(sigma=np.full((12, 10), 0.1), fast_mode=False), "fast_mode=True"),
])
def test_bad_extension_arguments_raise_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        denoise_nl_means(np.zeros((12, 10)), 3, 2, 0.1, backend=BACKEND, **kwargs)


def test_a_negative_noise_map_is_refused_naming_the_pixel():
    sigma = np.full((12, 10), 0.1)
    sigma[4, 7] = -1.0
    with pytest.raises(RuntimeError, match=r"\[7, 4\]"):  # ITK's index order (x, y)
        denoise_nl_means(np.zeros((12, 10)), 3, 2, 0.1, sigma=sigma, backend=BACKEND)


@pytest.mark.parametrize("shape, channels", [((22, 20), 1), ((16, 14), 3), ((9, 10, 8), 1)])
def test_classic_mode_with_rician_and_a_mask_matches_the_long_double_reference(shape, channels):
    image = smooth_noisy(shape, channels, np.float64, seed=44)
    mask = ball(shape)
    axis = -1 if channels > 1 else None
    kwargs = dict(patch_size=5 if len(shape) == 2 else 3, patch_distance=3 if len(shape) == 2 else 2, h=0.3,
                  sigma=0.03, rician=True, mask=mask)
    result = denoise_nl_means(image, fast_mode=False, channel_axis=axis, backend=BACKEND, **kwargs)
    reference = classic_nl_means_reference(image if channels > 1 else image[..., np.newaxis], **kwargs)
    if channels == 1:
        reference = reference[..., 0]
    difference = np.abs(result - reference)
    print(f"classic {shape} x {channels}: max |filter - reference| = {difference.max():.3g}")
    assert difference.max() <= TOLERANCE
    assert np.array_equal(result[~mask], image[~mask])


def test_wrapping_sets_and_snake_case_keywords():
    import itk

    image = smooth_noisy((24, 21), dtype=np.float64, seed=45)
    itk_image = itk.image_from_array(image)
    mask = itk.image_from_array(ball(image.shape).astype(np.uint8))
    sigma = itk.image_from_array(noise_map(image.shape, 46))
    enums = itk.CudaNonLocalMeansImageFilterEnums
    result = itk.cuda_non_local_means_image_filter(itk_image, patch_size=3, patch_distance=2, h=0.1,
                                                   noise_model=enums.NoiseModel_Rician, mask_image=mask,
                                                   noise_sigma_image=sigma, backend=backend_enum())
    expected = denoise_nl_means(image, 3, 2, 0.1, sigma=itk.array_from_image(sigma), rician=True,
                                mask=itk.array_from_image(mask), backend=BACKEND)
    assert np.array_equal(itk.array_from_image(result), expected)
    filt = itk.CudaNonLocalMeansImageFilter[type(itk_image), type(itk_image)].New()
    filt.SetPatchRadius([2, 1])
    filt.SetSearchRadius([1, 3])
    assert list(filt.GetPatchRadius()) == [2, 1] and list(filt.GetSearchRadius()) == [1, 3]
    filt.SetPhysicalPatchRadius(1.5)
    assert filt.GetPhysicalPatchRadius() == 1.5
    filt.SetNoiseModel(enums.NoiseModel_Rician)
    assert filt.GetNoiseModel() == enums.NoiseModel_Rician
    assert "NoiseModel: CudaNonLocalMeansImageFilterEnums::NoiseModel::Rician" in str(filt)


def test_dask_with_the_extensions_is_bitwise_the_whole_array():
    da = pytest.importorskip("dask.array")
    from itk_cudanonlocalmeans.dask import denoise_nl_means as dask_nlm

    image = smooth_noisy((26, 23, 21), dtype=np.float64, seed=47)
    kwargs = dict(patch_size=(3, 5, 3), patch_distance=(2, 1, 3), h=0.12, sigma=noise_map(image.shape, 48),
                  rician=True, mask=ball(image.shape), backend=BACKEND)
    whole = denoise_nl_means(image, **kwargs)
    chunks = ((9, 4, 13), (12, 11), (2, 19))  # uneven, and smaller than the halo
    lazy = dask_nlm(da.from_array(image, chunks=chunks),
                    **dict(kwargs, sigma=da.from_array(kwargs["sigma"], chunks=chunks)))
    assert np.array_equal(lazy.compute(scheduler="threads").view(np.uint64), whole.view(np.uint64))
