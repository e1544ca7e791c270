"""Random cases, drawn afresh on every run: the drop-in ``denoise_nl_means`` against scikit-image
0.26.0 and, in fast mode, against the exact algorithm (the long-double reference of
test/scripts/nlm_extensions_reference.py); and the opt-in extensions (per-axis patch sizes and
distances, Rician noise, noise maps, masks) against that reference.

Each case draws its dimension (2D to 4D), shape (axes of length 1 included), channels, dtype
(float16/32/64, uint8, uint16, int16), data (smooth with noise, uniform, constant blocks, values
around 300), patch size (0 to 9, even ones included), distance (0 to 6), h, sigma, preserve_range
and mode, from ``numpy.random.default_rng([seed, case])``. The seed is printed in the report's
header; ``NLM_RANDOM_SEED=S`` draws the same cases again and ``NLM_RANDOM_CASES=N`` sets how many
(default 200). Bars, those of the scikit-image cross-check:

- the same errors (exception types) as scikit-image, the same dtype and shape, NaN where it has NaN;
- fast mode: float32 output within 1 ulp of scikit-image, float64 within 5e-9 x max(1, range);
- classic mode: float32 within 2 ulp, float64 within 1e-12 x max(1, range);
- fast mode, float input: no farther from the exact algorithm than 5e-9 x max(1, range) or twice
  scikit-image's own distance from it, whichever is larger (scikit-image's integral images round;
  a weight's Schraudolph truncation can step by 2^-20 on either side);
- extensions (float64 data of range 1 or 100): within 1e-11 x max(1, range) of the reference.
"""

import warnings

import numpy as np
import pytest
from skimage.restoration import denoise_nl_means as skimage_nlm

from conftest import (BACKEND, INTEGER_TOPS, RANDOM_CASES as COUNT, RANDOM_SEED as SEED, described, integer_values,
                      max_ulp_distance, random_data)
from itk_cudanonlocalmeans import denoise_nl_means
from nlm_extensions_reference import nl_means_reference

#: The long-double reference runs where it takes at most about a second: images of at most
#: EXACT_VALUES values, and at most EXACT_SUMS box terms over all shifts (one NumPy pass each).
EXACT_VALUES = 6000
EXACT_SUMS = 4000


def draw(rng):
    """One case: (image, keyword arguments of both functions)."""
    ndim = int(rng.choice([2, 3, 4], p=[0.45, 0.45, 0.10]))
    fast = ndim == 4 or bool(rng.random() < 0.75)
    longest = {2: 48, 3: 18, 4: 7}[ndim]
    shape = tuple(int(rng.integers(1 if rng.random() < 0.15 else 2, longest + 1)) for _ in range(ndim))
    channels = int(rng.integers(2, 5)) if rng.random() < 0.3 and (fast or ndim == 2) else 1
    dtype = str(rng.choice(["float32", "float64", "uint8", "uint16", "int16", "float16"],
                           p=[0.35, 0.35, 0.1, 0.05, 0.05, 0.1]))
    data = str(rng.choice(["smooth", "uniform", "blocks", "offset"]))
    patch_size = int(rng.integers(0, 10))
    distance = int(rng.integers(0, 7 if ndim < 4 else 3))
    if ndim == 3 and not fast:
        patch_size, distance = min(patch_size, 5), min(distance, 3)
    h = float(10 ** rng.uniform(-2.5, 0.5))
    sigma = float(rng.choice([0.0, 10 ** rng.uniform(-3, -0.3)]))
    preserve_range = bool(rng.random() < 0.5)
    full = shape + ((channels,) if channels > 1 else ())
    if data == "offset":
        image = 300.0 + 40.0 * rng.standard_normal(full)
        h, sigma = 100 * h, 100 * sigma
    else:
        image = random_data(rng, full, data)
    if dtype in INTEGER_TOPS:
        image = integer_values(image, dtype)
        if data == "offset":
            h, sigma = h / 100, sigma / 100
        if preserve_range:
            h, sigma = h * INTEGER_TOPS[dtype], sigma * INTEGER_TOPS[dtype]
    image = image.astype(dtype)
    kwargs = dict(patch_size=patch_size, patch_distance=distance, h=h, fast_mode=fast, sigma=sigma,
                  preserve_range=preserve_range, channel_axis=-1 if channels > 1 else None)
    return image, kwargs


def compute(function, image, kwargs):
    """function(image, **kwargs), or the exception it raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scikit-image's 0/0 where h is tiny
        try:
            return function(image, **kwargs)
        except Exception as error:  # noqa: BLE001 (compared with the other function's)
            return error


def data_range(expected):
    """max(1, range of the finite values): what the float64 bars scale with."""
    finite = expected[np.isfinite(expected)]
    return max(1.0, float(np.ptp(finite))) if finite.size else 1.0


def within(got, expected, fast):
    """Whether `got` meets the bar against `expected` (same dtype, same NaN), and the figure."""
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    if got.dtype == np.float32:
        ulp = max_ulp_distance(np.where(same, 0, got), np.where(same, 0, expected))
        return ulp <= (1 if fast else 2), f"{ulp} ulp"
    diff = float(np.max(np.where(same, 0.0, np.abs(got - expected)), initial=0.0))
    scale = data_range(expected)
    return diff <= (5e-9 if fast else 1e-12) * scale, f"max|diff| {diff:.3g} (range {scale:.3g})"


def exact_runs(image, kwargs):
    """Whether the case is compared with the exact algorithm (fast mode, float input, small)."""
    ndim = image.ndim - (kwargs["channel_axis"] is not None)
    size = max(kwargs["patch_size"], 1) | 1
    d = kwargs["patch_distance"]
    sums = max(size - 1, 1) ** ndim * (2 * d + 1) ** (ndim - 1) * (d + 1)
    return (kwargs["fast_mode"] and image.dtype in (np.float32, np.float64) and image.size <= EXACT_VALUES
            and sums <= EXACT_SUMS)


def exact_result(image, kwargs, shape):
    """The fast mode's exact result (long double), in the output's shape."""
    values = image.astype(np.float64)
    if kwargs["channel_axis"] is None:
        values = values[..., None]
    exact = nl_means_reference(values, max(kwargs["patch_size"], 1), kwargs["patch_distance"], kwargs["h"],
                               kwargs["sigma"])
    return exact.astype(np.longdouble).reshape(shape)


@pytest.mark.parametrize("case", range(COUNT), ids=[f"seed{SEED}-case{i}" for i in range(COUNT)])
def test_random_case_matches_scikit_image(case):
    image, kwargs = draw(np.random.default_rng([SEED, case]))
    name = f"NLM_RANDOM_SEED={SEED} case {case}: {image.dtype}{image.shape} {kwargs}"
    expected = compute(skimage_nlm, image, kwargs)
    got = compute(lambda a, **k: denoise_nl_means(a, backend=BACKEND, **k), image, kwargs)
    if isinstance(expected, Exception) or isinstance(got, Exception):
        assert type(got) is type(expected), f"{name}: scikit-image {expected!r}, ours {got!r}"
        return
    assert got.dtype == expected.dtype and got.shape == expected.shape, name
    assert np.array_equal(np.isnan(got), np.isnan(expected)), f"{name}: NaN elsewhere than scikit-image's"
    ok, figure = within(got, expected, kwargs["fast_mode"])
    print(f"{name}: {figure}")
    assert ok, f"{name}: {figure} against scikit-image"
    if exact_runs(image, kwargs):
        exact = exact_result(image, kwargs, got.shape)
        ours = float(np.max(np.abs(got.astype(np.longdouble) - exact), initial=0.0))
        theirs = float(np.max(np.abs(expected.astype(np.longdouble) - exact), initial=0.0))
        # float64: the cross-check's bar; float32: one unit in the last place of the output.
        if got.dtype == np.float64:
            own_bar = 5e-9 * data_range(expected)
        else:
            own_bar = float(np.max(np.abs(np.spacing(got)), initial=0.0))
        print(f"  from the exact algorithm: ours {ours:.3g}, scikit-image's {theirs:.3g}")
        assert ours <= max(own_bar, 2 * theirs), \
            f"{name}: {ours:.3g} from the exact algorithm (scikit-image {theirs:.3g})"


def draw_extension(rng):
    """One case of the extensions: (image with a channel axis, channel_axis, keyword arguments)."""
    ndim = int(rng.choice([2, 3, 4], p=[0.5, 0.4, 0.1]))
    shape = tuple(1 if rng.random() < 0.15 else int(rng.integers(3, {2: 30, 3: 13, 4: 6}[ndim] + 1))
                  for _ in range(ndim))
    channels = int(rng.choice([1, 1, 2, 3]))
    scale = float(rng.choice([1.0, 100.0]))
    image = scale * rng.random(shape + (channels,))
    longest = 4 if ndim < 4 else 2
    if rng.random() < 0.5:  # per-axis; a patch size of 1 on all axes or on none
        sizes = [int(rng.choice([1, 3, 4, 5])) for _ in range(ndim)]
        sizes = [1] * ndim if 1 in sizes and rng.random() < 0.3 else [3 if v == 1 else v for v in sizes]
        size, distance = tuple(sizes), tuple(int(rng.integers(0, longest)) for _ in range(ndim))
    else:
        size, distance = int(rng.integers(1, 6)), int(rng.integers(0, longest))
    rician = bool(rng.random() < 0.3)
    if rng.random() < 0.4:
        sigma = scale * rng.uniform(0, 0.1, shape)
        sigma.flat[::5] = 0.0
    else:
        sigma = scale * float(rng.uniform(0.01, 0.1)) if rician or rng.random() < 0.5 else 0.0
    mask = rng.random(shape) < 0.6 if rng.random() < 0.4 else None
    kwargs = dict(patch_size=size, patch_distance=distance, h=scale * float(rng.uniform(0.05, 0.4)), sigma=sigma,
                  rician=rician, mask=mask)
    return image, (-1 if channels > 1 else None), kwargs


@pytest.mark.parametrize("case", range(COUNT // 2), ids=[f"seed{SEED}-extension{i}" for i in range(COUNT // 2)])
def test_random_extension_case_matches_the_reference(case):
    image, axis, kwargs = draw_extension(np.random.default_rng([SEED, 1 << 20, case]))
    name = f"NLM_RANDOM_SEED={SEED} extension case {case}: {image.shape} channel_axis={axis} {described(kwargs)}"
    got = denoise_nl_means(image if axis is not None else image[..., 0], channel_axis=axis, preserve_range=True,
                           backend=BACKEND, **kwargs)
    reference = nl_means_reference(image, **kwargs)
    reference = reference if axis is not None else reference[..., 0]
    difference = float(np.max(np.abs(got - reference.reshape(got.shape)), initial=0.0))
    print(f"{name}: max|diff| {difference:.3g}")
    assert difference <= 1e-11 * max(1.0, float(np.max(image, initial=0.0))), name
