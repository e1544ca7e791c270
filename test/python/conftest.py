"""Shared helpers of the Python tests, which run against the installed wheel in a fresh virtual
environment with PyPI's itk-core (scripts/make-wheel-venv.sh). NLM_TEST_BACKEND (cpu, the default,
or cuda) chooses the backend the tests compute with."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from nlm_mha import ulp_distance  # noqa: E402  (shared with the scikit-image cross-check)

#: The backend the tests compute with: 'cpu' or 'cuda'.
BACKEND = os.environ.get("NLM_TEST_BACKEND", "cpu")
if BACKEND not in ("cpu", "cuda"):
    raise ValueError(f"NLM_TEST_BACKEND must be cpu or cuda, not {BACKEND!r}")

#: The random cases of test_random_cases.py: a fresh seed on every run unless NLM_RANDOM_SEED names
#: one (the report's header prints it), and NLM_RANDOM_CASES of them.
RANDOM_SEED = int(os.environ.get("NLM_RANDOM_SEED") or int.from_bytes(os.urandom(4), "little"))
RANDOM_CASES = int(os.environ.get("NLM_RANDOM_CASES") or 200)


def backend_enum():
    """The filter's Backend value for BACKEND."""
    import itk

    enums = itk.CudaNonLocalMeansImageFilterEnums
    return {"cpu": enums.Backend_CPU, "cuda": enums.Backend_CUDA}[BACKEND]


def pytest_sessionstart(session):
    """With NLM_TEST_BACKEND=cuda on a machine without a usable GPU, skip the whole suite (exit code
    77, CTest's skip code) rather than fail every test."""
    if BACKEND != "cuda":
        return
    import itk

    ImageType = itk.Image[itk.F, 2]
    probe = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New(
        itk.image_from_array(np.zeros((4, 4), np.float32)), PatchSize=1, PatchDistance=1, Backend=backend_enum())
    try:
        probe.Update()
    except RuntimeError as error:
        if "CUDA backend cannot be used" not in str(error):
            raise
        pytest.exit(f"NLM_TEST_BACKEND=cuda, but {str(error).strip().splitlines()[-1]}", returncode=77)


def pytest_report_header(config):
    """Which itk the tests import, so that every log names it."""
    import importlib.metadata as metadata

    import itk

    lines = [f"itk {itk.Version.GetITKVersion()} from {os.path.dirname(itk.__file__)} "
             f"(itk-core {metadata.version('itk-core')}, itk-cudanonlocalmeans {metadata.version('itk-cudanonlocalmeans')})",
             f"backend {BACKEND}",
             f"random cases: NLM_RANDOM_SEED={RANDOM_SEED} NLM_RANDOM_CASES={RANDOM_CASES}"]
    return lines


def smooth_noisy(shape, channels=1, dtype=np.float32, seed=0):
    """A smooth pattern plus Gaussian noise, channels last when there are several."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0.0, 1.0, n) for n in shape], indexing="ij")
    layers = [0.45 + 0.25 * np.sin(4.0 * grids[0] + 3.0 * grids[-1] + k) + 0.1 * rng.standard_normal(shape)
              for k in range(channels)]
    image = np.stack(layers, axis=-1) if channels > 1 else layers[0]
    return image.astype(dtype)


#: The integer dtypes of the random cases, and the largest magnitude their values take.
INTEGER_TOPS = {"uint8": 255, "uint16": 4000, "int16": 2000}


def random_data(rng, full, kind):
    """Random float64 values of shape `full` for the random cases: "smooth" (a pattern with noise),
    "uniform" (noise in [0, 1)) or "blocks" (thirds, with a constant corner)."""
    if kind == "smooth":
        grids = np.meshgrid(*[np.linspace(0, 1, n) for n in full], indexing="ij")
        return 0.45 + 0.25 * np.sin(4 * grids[0] + 3 * grids[-1]) + 0.1 * rng.standard_normal(full)
    if kind == "uniform":
        return rng.random(full)
    if kind == "blocks":
        image = np.round(rng.random(full) * 3) / 3
        image[tuple(slice(0, max(1, n // 2)) for n in full)] = 0.25
        return image
    raise ValueError(f"unknown kind of data {kind!r}")


def integer_values(image, dtype):
    """`image` scaled to whole numbers up to INTEGER_TOPS[dtype] (centred on 0 for int16), still
    float64; the caller converts it to `dtype`."""
    top = INTEGER_TOPS[dtype]
    unit = image / max(1e-9, float(np.abs(image).max()))
    return np.round(unit * top - (top / 2 if dtype == "int16" else 0))


def described(kwargs):
    """Keyword arguments in words, arrays (noise maps, masks) by their shape."""
    return str({k: (f"array{v.shape}" if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()})


def max_ulp_distance(a, b):
    """Largest distance in representable values between two float arrays of one dtype."""
    return int(np.max(ulp_distance(a, b))) if a.size else 0
