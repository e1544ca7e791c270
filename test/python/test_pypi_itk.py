"""The wheel inside PyPI's itk: which itk is imported, and images crossing between PyPI's wrapped
filters and this module's in both directions (one SWIG type table, shared ITK globals)."""

import importlib.metadata as metadata
import re
import sys
from pathlib import Path

import itk
import numpy as np
import pytest

from conftest import backend_enum, smooth_noisy

SOURCE = Path(__file__).resolve().parents[2]
#: The release of PyPI's itk-core the wheel is built for: pyproject.toml's "itk-core ~= X.Y.Z".
EXPECTED_ITK = re.search(r'"itk-core ~= ([0-9.]+)"', (SOURCE / "pyproject.toml").read_text()).group(1)


def _installed_by(distribution, path):
    """Whether the file at `path` is one that the named distribution installed (its RECORD)."""
    files = metadata.distribution(distribution).files or []
    return any(Path(f.locate()).resolve() == Path(path).resolve() for f in files)


def test_itk_is_pypi_itk_core_in_this_environment():
    package = Path(itk.__file__).resolve().parent
    print(f"itk {itk.Version.GetITKVersion()} imported from {package}; Python {sys.version.split()[0]}")
    assert metadata.version("itk-core") == EXPECTED_ITK
    assert itk.Version.GetITKVersion() == EXPECTED_ITK
    # The folder itk-core installed: this environment's site-packages, or a `pip install --target`
    # folder on PYTHONPATH.
    site = Path(metadata.distribution("itk-core").locate_file("")).resolve()
    assert package.parent == site, f"itk comes from {package}, not from itk-core's folder {site}"
    # Its compiled core is the file PyPI's itk-core wheel installed, not one built here.
    common = next(package.glob("_ITKCommonPython*.so"))
    assert _installed_by("itk-core", common), f"{common} is not itk-core's"
    assert common.name.endswith(".abi3.so")
    # No ITK build tree or source folder on the import path.
    for entry in sys.path:
        assert not Path(entry, "itk", "support").is_dir() or Path(entry).resolve() == site, entry


def test_module_comes_from_the_wheel():
    package = Path(itk.__file__).resolve().parent
    library = next(package.glob("_CudaNonLocalMeansPython*.so"))
    assert library.name == "_CudaNonLocalMeansPython.abi3.so"
    assert _installed_by("itk-cudanonlocalmeans", library)
    import itk_cudanonlocalmeans
    assert _installed_by("itk-cudanonlocalmeans", itk_cudanonlocalmeans.__file__)
    # One version, stated in CMakeLists.txt, carried by the wheel's metadata and the package.
    cmake = (SOURCE / "CMakeLists.txt").read_text()
    stated = re.search(r"project\(CudaNonLocalMeans\s+VERSION\s+([0-9.]+)", cmake).group(1)
    assert itk_cudanonlocalmeans.__version__ == metadata.version("itk-cudanonlocalmeans") == stated
    # PyPI's lazy loader finds the filter in the wheel's generated module.
    cls = itk.CudaNonLocalMeansImageFilter[itk.Image[itk.F, 2], itk.Image[itk.F, 2]]
    assert _installed_by("itk-cudanonlocalmeans", sys.modules[cls.__module__].__file__)


@pytest.mark.parametrize("pixel, dimension", [(itk.F, 2), (itk.F, 3), (itk.D, 3), (itk.F, 4)])
def test_pipeline_through_pypi_filters(pixel, dimension, tmp_path):
    dtype = np.float32 if pixel is itk.F else np.float64
    shape = {2: (30, 34), 3: (12, 14, 16), 4: (6, 7, 8, 9)}[dimension]
    array = smooth_noisy(shape, dtype=dtype, seed=dimension)
    image = itk.image_from_array(array)  # PyPI's NumPy bridge
    ImageType = itk.Image[pixel, dimension]
    assert isinstance(image, ImageType)
    # A PyPI filter feeds ours in a pipeline: our filter updates PyPI's upstream.
    caster = itk.CastImageFilter[ImageType, ImageType].New(image)
    nlm = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New(caster.GetOutput(), PatchSize=3,
                                                                     PatchDistance=1, H=0.1, Backend=backend_enum())
    # And ours feeds PyPI's: a region of interest, then statistics and a file writer.
    region = itk.ImageRegion[dimension]()
    region.SetIndex([1] * dimension)
    region.SetSize([n - 2 for n in reversed(shape)])
    roi = itk.RegionOfInterestImageFilter[ImageType, ImageType].New(nlm.GetOutput(), RegionOfInterest=region)
    roi.Update()
    assert nlm.GetBackendUsed() == backend_enum()
    whole = itk.array_from_image(nlm.GetOutput())
    inner = itk.array_from_image(roi.GetOutput())
    assert np.array_equal(inner, whole[(slice(1, -1),) * dimension])
    calculator = itk.MinimumMaximumImageCalculator[ImageType].New(Image=nlm.GetOutput())
    calculator.SetRegion(nlm.GetOutput().GetLargestPossibleRegion())
    calculator.Compute()
    assert calculator.GetMaximum() == whole.max() and calculator.GetMinimum() == whole.min()
    path = str(tmp_path / "denoised.mha")
    itk.imwrite(nlm.GetOutput(), path)
    assert np.array_equal(itk.array_from_image(itk.imread(path, pixel)), whole)
    # The denoised image is smoother than the input.
    assert np.std(np.diff(whole, axis=-1)) < np.std(np.diff(array, axis=-1))


def test_pypi_threading_settings_reach_the_module():
    # ITK's globals (default threader, number of threads) are one set, shared through ITKCommon's
    # singleton index: what PyPI's itk sets, the module's filters see, and both make the same
    # multithreader (TBB in PyPI's build, which the module's build must match).
    ImageType = itk.Image[itk.F, 2]
    saved = itk.MultiThreaderBase.GetGlobalDefaultNumberOfThreads()
    threads = saved - 1 if saved > 1 else 2
    try:
        itk.MultiThreaderBase.SetGlobalDefaultNumberOfThreads(threads)
        ours = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New()
        pypi = itk.CastImageFilter[ImageType, ImageType].New()
        assert ours.GetMultiThreader().GetMaximumNumberOfThreads() == threads
        assert ours.GetMultiThreader().GetNameOfClass() == pypi.GetMultiThreader().GetNameOfClass()
        assert ours.GetNumberOfWorkUnits() == pypi.GetNumberOfWorkUnits()
    finally:
        itk.MultiThreaderBase.SetGlobalDefaultNumberOfThreads(saved)
