"""itk.CudaNonLocalMeansImageFilter from Python: object API, functional API, NumPy round trip,
multi-component images and exceptions."""

import itk
import numpy as np
import pytest

from conftest import backend_enum, smooth_noisy

Enums = itk.CudaNonLocalMeansImageFilterEnums


def test_object_api_parameters():
    ImageType = itk.Image[itk.F, 3]
    f = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New()
    # scikit-image's defaults
    assert f.GetPatchSize() == 7
    assert f.GetPatchDistance() == 11
    assert f.GetH() == pytest.approx(0.1)
    assert f.GetSigma() == 0.0
    assert f.GetFastMode()
    assert f.GetBackend() == Enums.Backend_Auto
    f.SetPatchSize(4)
    assert f.GetPatchSize() == 4 and f.GetEffectivePatchSize() == 5
    f.SetPatchDistance(2)
    f.SetH(0.2)
    f.SetSigma(0.05)
    f.FastModeOff()
    assert (f.GetPatchDistance(), f.GetH(), f.GetSigma(), f.GetFastMode()) == (2, 0.2, 0.05, False)
    f.SetBackend(Enums.Backend_CPU)
    assert f.GetBackend() == Enums.Backend_CPU
    f.SetSinglePrecision(True)
    assert f.GetSinglePrecision()
    f.SetMaximumGPUMemory(1 << 30)
    assert f.GetMaximumGPUMemory() == 1 << 30


def test_object_api_runs_and_keeps_metadata():
    array = smooth_noisy((12, 14, 16))
    image = itk.image_from_array(array)
    image.SetSpacing([0.5, 1.5, 2.0])
    image.SetOrigin([-1.0, 2.0, 3.0])
    direction = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    image.SetDirection(itk.matrix_from_array(direction))
    ImageType = type(image)
    f = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New()
    f.SetInput(image)
    f.SetPatchSize(3)
    f.SetPatchDistance(2)
    f.SetBackend(backend_enum())
    f.Update()
    out = f.GetOutput()
    assert f.GetBackendUsed() == backend_enum()
    assert tuple(out.GetSpacing()) == (0.5, 1.5, 2.0)
    assert tuple(out.GetOrigin()) == (-1.0, 2.0, 3.0)
    assert np.array_equal(itk.array_from_matrix(out.GetDirection()), direction)
    result = itk.array_from_image(out)
    assert result.shape == array.shape and result.dtype == np.float32
    assert np.std(np.diff(result, axis=2)) < np.std(np.diff(array, axis=2))  # smoother


def test_functional_api_matches_object_api():
    image = itk.image_from_array(smooth_noisy((20, 24), dtype=np.float64, seed=3))
    functional = itk.cuda_non_local_means_image_filter(image, patch_size=3, patch_distance=2, h=0.1, sigma=0.05,
                                                       backend=backend_enum())
    ImageType = type(image)
    f = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New(image, PatchSize=3, PatchDistance=2, H=0.1,
                                                                   Sigma=0.05, Backend=backend_enum())
    f.Update()
    assert np.array_equal(itk.array_from_image(functional), itk.array_from_image(f.GetOutput()))


@pytest.mark.parametrize("shape, channels, dtype", [
    ((18, 20), 3, np.float32),
    ((8, 9, 10), 2, np.float64),
    ((5, 6, 7, 8), 2, np.float32),
])
def test_vector_image(shape, channels, dtype):
    array = smooth_noisy(shape, channels=channels, dtype=dtype, seed=4)
    image = itk.image_from_array(array, is_vector=True)
    assert isinstance(image, itk.VectorImage[itk.F if dtype == np.float32 else itk.D, len(shape)])
    out = itk.cuda_non_local_means_image_filter(image, patch_size=3, patch_distance=1, h=0.1,
                                                backend=backend_enum())
    result = itk.array_from_image(out)
    assert result.shape == array.shape and result.dtype == dtype
    assert np.std(np.diff(result, axis=0)) < np.std(np.diff(array, axis=0))  # smoother


@pytest.mark.parametrize("pixel", [itk.F, itk.D])
def test_every_wrapped_dimension(pixel):
    for dimension, shape in ((2, (16, 18)), (3, (8, 9, 10)), (4, (5, 6, 7, 8))):
        ImageType = itk.Image[pixel, dimension]
        dtype = np.float32 if pixel is itk.F else np.float64
        array = smooth_noisy(shape, dtype=dtype, seed=dimension)
        f = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New(
            itk.image_from_array(array), PatchSize=3, PatchDistance=1, Backend=backend_enum())
        f.Update()
        result = itk.array_from_image(f.GetOutput())
        assert result.shape == shape and result.dtype == dtype and not np.array_equal(result, array)


@pytest.mark.parametrize("name, value, expected", [
    ("patch_size", 0, "PatchSize"),
    ("patch_distance", -1, "PatchDistance"),
    ("h", 0.0, "H is"),
    ("h", -0.5, "H is"),
    ("sigma", -1.0, "Sigma"),
])
def test_bad_parameters_raise_with_the_parameter_named(name, value, expected):
    image = itk.image_from_array(smooth_noisy((10, 11)))
    kwargs = dict(patch_size=3, patch_distance=2, h=0.1, backend=backend_enum())
    kwargs[name] = value
    with pytest.raises(RuntimeError, match=expected):
        itk.cuda_non_local_means_image_filter(image, **kwargs)


def test_non_finite_input_raises():
    array = smooth_noisy((10, 11))
    array[3, 4] = np.nan
    with pytest.raises(RuntimeError, match="non-finite"):
        itk.cuda_non_local_means_image_filter(itk.image_from_array(array), patch_size=3, patch_distance=1,
                                              backend=backend_enum())
