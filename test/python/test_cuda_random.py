"""With NLM_TEST_BACKEND=cuda (on a machine with an NVIDIA GPU): random images of the sizes where the
CUDA backend's planner picks each of its kernels (2D and 3D column kernels, shared rows, buffered
weights, tiled, classic; 4D), drawn afresh on every run, give bitwise the CPU backend's numbers.

test_random_cases.py draws images small enough for the exact reference (at most 48 x 48, 18^3, 7^4),
where the planner's choices at scikit-image's default parameters are not reached. Here each case
draws its dimension, a shape of up to about 250,000 voxels (axes of length 1 and odd lengths
included), channels, dtype, data, patch size (0 to 13, even ones included), distance (0 to 11), h,
sigma, classic or fast mode and, in fast mode, the opt-in extensions (per-axis patch sizes and
distances, Rician noise, noise maps, masks). The work of a case is capped so that the CPU backend
takes at most a few seconds on a 16-core host. ``NLM_RANDOM_SEED=S`` draws the same cases again
(the report's header prints the seed); ``NLM_CUDA_RANDOM_CASES=N`` sets how many (default 60).
"""

import os
import warnings

import numpy as np
import pytest

from conftest import BACKEND, INTEGER_TOPS, RANDOM_SEED as SEED, described, integer_values, random_data
from itk_cudanonlocalmeans import denoise_nl_means

pytestmark = pytest.mark.skipif(BACKEND != "cuda", reason="NLM_TEST_BACKEND is not cuda")

COUNT = int(os.environ.get("NLM_CUDA_RANDOM_CASES") or 60)

#: Most voxel-offsets (voxels x (2 d + 1)^n, classic mode also x patch terms) of one case.
FAST_WORK = 4e9
CLASSIC_WORK = 2e10
#: Most voxels of an image, per dimension.
VOXELS = {2: 300_000, 3: 250_000, 4: 80_000}


def draw_shape(rng, ndim):
    """A shape of at most VOXELS[ndim] voxels: mostly balanced, sometimes thin along one axis."""
    longest = {2: 700, 3: 110, 4: 24}[ndim]
    while True:
        shape = [int(rng.integers(1 if rng.random() < 0.1 else 2, longest + 1)) for _ in range(ndim)]
        if rng.random() < 0.2:
            shape[int(rng.integers(0, ndim))] = int(rng.integers(1, 6))
        if np.prod(shape) <= VOXELS[ndim]:
            return tuple(shape)


def draw_extensions(rng, shape, ndim, size, distance, sigma):
    """Fast mode's opt-in keywords, each in about one case of six: per-axis patch sizes and
    distances, a noise map, Rician noise, a mask."""
    kwargs = {}
    if rng.random() < 0.15:
        sizes = [int(rng.choice([3, 4, 5, 7])) for _ in range(ndim)]
        kwargs["patch_size"] = tuple(sizes)
        kwargs["patch_distance"] = tuple(int(rng.integers(0, max(distance, 1) + 1)) for _ in range(ndim))
    if rng.random() < 0.15:
        noise_map = rng.uniform(0, 0.1, shape)
        noise_map.flat[::7] = 0.0
        kwargs["sigma"] = noise_map
    if rng.random() < 0.15 and (np.ndim(kwargs.get("sigma", sigma)) > 0 or sigma > 0):
        kwargs["rician"] = True
    if rng.random() < 0.15:
        kwargs["mask"] = rng.random(shape) < 0.7
    return kwargs


def draw(rng):
    """One case: (image, keyword arguments of the drop-in but the backend)."""
    ndim = int(rng.choice([2, 3, 4], p=[0.35, 0.5, 0.15]))
    shape = draw_shape(rng, ndim)
    fast = ndim == 4 or bool(rng.random() < 0.85)
    channels = int(rng.integers(2, 5)) if rng.random() < 0.25 and (fast or ndim == 2) else 1
    size = int(rng.integers(0, 14 if ndim < 4 else 8))
    distance = int(rng.integers(0, 12 if ndim < 4 else 5))
    # The distance shrinks until the case's work is under its mode's bar.
    patch_terms = 1 if fast else (size | 1) ** ndim
    while distance > 0 and np.prod(shape) * channels * (2 * distance + 1) ** ndim * patch_terms > (
            FAST_WORK if fast else CLASSIC_WORK):
        distance -= 1
    full = shape + ((channels,) if channels > 1 else ())
    image = random_data(rng, full, str(rng.choice(["smooth", "uniform", "blocks"])))
    dtype = str(rng.choice(["float32", "float64", "uint8", "uint16", "int16"], p=[0.4, 0.35, 0.1, 0.1, 0.05]))
    preserve_range = bool(rng.random() < 0.5)
    h = float(10 ** rng.uniform(-2, 0.3))
    sigma = float(rng.choice([0.0, 10 ** rng.uniform(-3, -0.5)]))
    if dtype in INTEGER_TOPS:
        image = integer_values(image, dtype)
        if preserve_range:
            h, sigma = h * INTEGER_TOPS[dtype], sigma * INTEGER_TOPS[dtype]
    kwargs = dict(patch_size=size, patch_distance=distance, h=h, fast_mode=fast, sigma=sigma,
                  preserve_range=preserve_range, channel_axis=-1 if channels > 1 else None)
    if fast and rng.random() < 0.4:
        kwargs.update(draw_extensions(rng, shape, ndim, size, distance, sigma))
    return image.astype(dtype), kwargs


@pytest.mark.parametrize("case", range(COUNT), ids=[f"seed{SEED}-case{i}" for i in range(COUNT)])
def test_random_case_on_the_gpu_equals_the_cpu_backend_bitwise(case):
    image, kwargs = draw(np.random.default_rng([SEED, 1 << 21, case]))
    name = f"NLM_RANDOM_SEED={SEED} case {case}: {image.dtype}{image.shape} {described(kwargs)}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gpu = denoise_nl_means(image, backend="cuda", **kwargs)
        cpu = denoise_nl_means(image, backend="cpu", **kwargs)
    assert gpu.dtype == cpu.dtype and gpu.shape == cpu.shape, name
    differing = int(np.count_nonzero((gpu != cpu) & ~(np.isnan(gpu) & np.isnan(cpu))))
    print(f"{name}: {differing} of {gpu.size} values differ")
    assert differing == 0, f"{name}: {differing} of {gpu.size} values differ from the CPU backend's"
