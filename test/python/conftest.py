"""Shared helpers of the Python tests (run by CTest against a wrapped build; see
scripts/build-python-wrapping.sh)."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from nlm_mha import ulp_distance  # noqa: E402  (shared with the scikit-image cross-check)


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


def max_ulp_distance(a, b):
    """Largest distance in representable values between two float arrays of one dtype."""
    return int(np.max(ulp_distance(a, b))) if a.size else 0
