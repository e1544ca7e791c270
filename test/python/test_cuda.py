"""With NLM_TEST_BACKEND=cuda (on a machine with an NVIDIA GPU): the CUDA backend, reached through
the wheel inside PyPI's itk, gives bitwise the CPU backend's numbers, in 2D, 3D and 4D, gray and
multichannel, float32 and float64, through the drop-in and the wrapped filter."""

import itk
import numpy as np
import pytest

from conftest import BACKEND, smooth_noisy
from itk_cudanonlocalmeans import denoise_nl_means

pytestmark = pytest.mark.skipif(BACKEND != "cuda", reason="NLM_TEST_BACKEND is not cuda")

CASES = [
    ((64, 72), 1, np.float32, dict(patch_size=7, patch_distance=11, h=0.1)),
    ((50, 60), 3, np.float64, dict(patch_size=5, patch_distance=6, h=0.08, sigma=0.05)),
    ((40, 44, 48), 1, np.float32, dict(patch_size=3, patch_distance=3, h=0.1, sigma=0.05)),
    ((30, 32, 34), 1, np.float64, dict(patch_size=5, patch_distance=4, h=0.12)),
    ((24, 26, 28), 2, np.float32, dict(patch_size=3, patch_distance=2, h=0.1)),
    ((20, 22, 24), 1, np.float64, dict(patch_size=7, patch_distance=11, h=0.1)),
    ((8, 9, 10, 11), 1, np.float64, dict(patch_size=3, patch_distance=2, h=0.15)),
    ((6, 7, 8, 9), 2, np.float32, dict(patch_size=3, patch_distance=1, h=0.1)),
    # 4D beyond every GPU's shared memory for one spanning box: the tiled kernel's split boxes.
    ((5, 6, 7, 8), 1, np.float64, dict(patch_size=5, patch_distance=5, h=0.1)),
    ((4, 5, 6, 7), 1, np.float32, dict(patch_size=7, patch_distance=11, h=0.1)),
]


@pytest.mark.parametrize("shape, channels, dtype, kwargs", CASES,
                         ids=[f"{len(c[0])}D-{c[1]}ch-{np.dtype(c[2]).name}-p{c[3]['patch_size']}d{c[3]['patch_distance']}"
                              for c in CASES])
def test_cuda_equals_cpu_bitwise(shape, channels, dtype, kwargs):
    image = smooth_noisy(shape, channels, dtype, seed=sum(shape))
    if channels > 1:
        kwargs = dict(kwargs, channel_axis=-1)
    gpu = denoise_nl_means(image, backend="cuda", **kwargs)
    cpu = denoise_nl_means(image, backend="cpu", **kwargs)
    differing = int(np.count_nonzero(gpu != cpu))
    print(f"{shape} x{channels} {np.dtype(dtype).name}: {differing} of {gpu.size} values differ")
    assert gpu.dtype == cpu.dtype and gpu.shape == cpu.shape
    assert differing == 0


def test_wrapped_filter_reports_the_gpu():
    ImageType = itk.Image[itk.F, 3]
    image = itk.image_from_array(smooth_noisy((16, 17, 18), seed=5))
    enums = itk.CudaNonLocalMeansImageFilterEnums
    f = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New(image, PatchSize=3, PatchDistance=2,
                                                                   Backend=enums.Backend_CUDA)
    f.Update()
    assert f.GetBackendUsed() == enums.Backend_CUDA
    printed = str(f)
    print(printed)
    assert "CUDA" in printed
    cpu = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New(image, PatchSize=3, PatchDistance=2,
                                                                     Backend=enums.Backend_CPU)
    cpu.Update()
    assert np.array_equal(itk.array_from_image(f.GetOutput()), itk.array_from_image(cpu.GetOutput()))


def test_auto_computes_what_cuda_refuses():
    # A GPU memory budget too small for one slab: Backend CUDA refuses it, and Auto (the drop-in's
    # default) computes on the CPU, with the same numbers, saying why.
    ImageType = itk.Image[itk.F, 3]
    image = itk.image_from_array(smooth_noisy((12, 13, 14), seed=6))
    enums = itk.CudaNonLocalMeansImageFilterEnums
    settings = dict(PatchSize=3, PatchDistance=2, MaximumGPUMemory=1)
    cuda = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New(image, Backend=enums.Backend_CUDA, **settings)
    with pytest.raises(RuntimeError, match="memory budget"):
        cuda.Update()
    auto = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New(image, Backend=enums.Backend_Auto, **settings)
    auto.Update()
    cpu = itk.CudaNonLocalMeansImageFilter[ImageType, ImageType].New(image, Backend=enums.Backend_CPU, **settings)
    cpu.Update()
    assert auto.GetBackendUsed() == enums.Backend_CPU
    assert "CPUFallbackReason: the CUDA backend could not run this problem" in str(auto)
    assert np.array_equal(itk.array_from_image(auto.GetOutput()), itk.array_from_image(cpu.GetOutput()))
