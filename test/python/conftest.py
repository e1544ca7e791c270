"""Shared helpers of the Python tests (run by CTest against a wrapped build; see
scripts/build-python-wrapping.sh)."""

import numpy as np
import pytest


def smooth_noisy(shape, channels=1, dtype=np.float32, seed=0):
    """A smooth pattern plus Gaussian noise, channels last when there are several."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0.0, 1.0, n) for n in shape], indexing="ij")
    layers = [0.45 + 0.25 * np.sin(4.0 * grids[0] + 3.0 * grids[-1] + k) + 0.1 * rng.standard_normal(shape)
              for k in range(channels)]
    image = np.stack(layers, axis=-1) if channels > 1 else layers[0]
    return image.astype(dtype)


@pytest.fixture
def make_image():
    return smooth_noisy


def ulp_distance(a, b):
    """Largest distance in representable values between two float arrays of one dtype."""
    itype = np.int32 if a.dtype == np.float32 else np.int64
    ia = a.view(itype).astype(np.int64)
    ib = b.view(itype).astype(np.int64)
    top = np.int64(np.iinfo(itype).min)
    ia = np.where(ia < 0, top - ia, ia)
    ib = np.where(ib < 0, top - ib, ib)
    return int(np.max(np.abs(ia - ib))) if a.size else 0
