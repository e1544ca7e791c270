"""ITKCudaNonLocalMeans for Python: a drop-in replacement of scikit-image's ``denoise_nl_means``.

    from itk_cudanonlocalmeans import denoise_nl_means
    denoised = denoise_nl_means(image, patch_size=5, patch_distance=6, h=0.08, channel_axis=-1)

takes the same arguments as ``skimage.restoration.denoise_nl_means`` (scikit-image 0.26.0), applies
the same input conversions (integers scaled to [0, 1] or [-1, 1] unless ``preserve_range``,
float16 computed as float32, output squeezed) and raises the same errors for unsupported
dimensions, and computes with ``itk.CudaNonLocalMeansImageFilter`` (on the GPU when one is usable,
otherwise on the CPU). The numbers equal scikit-image's to 1 ulp for float32 and to a few 1e-9 for
float64 (see the module's README).

Three opt-in keywords go beyond scikit-image (doc/numerical-contract.md, section 6); without them
the function is scikit-image's:

- ``rician=True``: the Rician noise model of magnitude MR images, sqrt(max(NLM(x^2) - 2 sigma^2, 0));
  it needs ``sigma > 0`` or an array ``sigma``.
- ``mask=``: a boolean or integer array of the image's spatial shape; pixels where it is 0 (False)
  keep their input value, the others are computed exactly as without a mask, and work outside it
  is skipped.
- ``sigma=`` an array of the image's spatial shape: the noise standard deviation of every pixel (a
  noise map), finite and 0 or more; fast mode only.
- ``patch_size=`` and ``patch_distance=`` as tuples, one entry per spatial axis (NumPy's order):
  anisotropic patches and search windows, e.g. ``patch_size=(3, 5, 5), patch_distance=(2, 6, 6)``
  for voxels five times longer along the first axis; fast mode only. Equal entries give the
  output of the plain integer, bit for bit.

Where scikit-image accepts input it cannot process meaningfully, this function refuses it:
``h == 0`` and ``patch_distance < 0`` raise ``ValueError`` (scikit-image returns a degenerate mean
or NaN). A negative ``h`` or ``sigma`` is used by its absolute value, as scikit-image does. Arrays
in the other byte order (big-endian), which scikit-image refuses, are taken with the same values.
"""

import glob
import importlib.metadata
import operator
import os

import numpy as np

__all__ = ["denoise_nl_means", "BACKENDS", "__version__"]

try:
    #: The module's version (stated once, in CMakeLists.txt; the wheel's metadata carries it).
    __version__ = importlib.metadata.version("itk-cudanonlocalmeans")
except importlib.metadata.PackageNotFoundError:  # imported from a source tree
    __version__ = "unknown"

_NVRTC_FALLBACK_VARIABLE = "CUDANONLOCALMEANS_NVRTC_FALLBACK"


def _pip_nvrtc_library():
    """The NVRTC library of pip's nvidia-cuda-nvrtc-cu12 / -cu13 package, or None."""
    try:
        import nvidia.cuda_nvrtc as package
    except ImportError:
        return None
    for folder in package.__path__:
        found = sorted(glob.glob(os.path.join(folder, "lib", "libnvrtc.so.*")) +
                       glob.glob(os.path.join(folder, "bin", "nvrtc64_*.dll")))
        found = [f for f in found if "builtins" not in os.path.basename(f) and ".alt." not in f]
        if found:
            return found[-1]
    return None


def _use_pip_nvrtc_when_needed():
    """Lets `pip install itk-cudanonlocalmeans[nvrtc]` work without a CUDA toolkit: pip's NVRTC is
    named as the fallback of the filter's own NVRTC search, tried when the search finds none."""
    if os.environ.get(_NVRTC_FALLBACK_VARIABLE) or os.name == "nt":
        return
    library = _pip_nvrtc_library()
    if library:
        os.environ[_NVRTC_FALLBACK_VARIABLE] = library


_use_pip_nvrtc_when_needed()

#: Values of the ``backend`` keyword.
BACKENDS = ("auto", "cpu", "cuda")


def _to_float(image, preserve_range):
    """scikit-image 0.26.0's ``convert_to_float``: float16 -> float32; with preserve_range float32
    and float64 are kept and everything else becomes float64 with its values; otherwise
    ``img_as_float`` (floats unchanged, unsigned integers times 1/max, signed integers times 1/max
    clipped at -1, booleans 0/1, complex refused). Data in the other byte order are taken in this
    machine's order first."""
    if not image.dtype.isnative:  # big-endian data (scikit-image refuses it): the same values
        image = image.astype(image.dtype.newbyteorder("="))
    if image.dtype == np.float16:
        image = image.astype(np.float32)
    if preserve_range:
        if image.dtype.char not in "fd":
            image = image.astype(float)
        return image
    kind = image.dtype.kind
    if kind == "f":
        return image
    if kind == "b":
        return image.astype(np.float64)
    if kind == "u":
        return image * (1.0 / np.iinfo(image.dtype).max)
    if kind == "i":
        return np.maximum(image * (1.0 / np.iinfo(image.dtype).max), -1.0)
    raise ValueError(f"Cannot convert from {image.dtype} to float64.")  # complex, object, ...


def denoise_nl_means(image, patch_size=7, patch_distance=11, h=0.1, fast_mode=True, sigma=0.0, *,
                     preserve_range=False, channel_axis=None, backend="auto", rician=False, mask=None):
    """Non-local means denoising, as ``skimage.restoration.denoise_nl_means`` 0.26.0.

    Parameters are scikit-image's; ``backend`` ('auto', 'cpu' or 'cuda') selects where to compute.
    The opt-in ``rician``, ``mask`` and array ``sigma`` are described in the module's docstring.
    Returns a float32 array for float16 and float32 input, float64 otherwise.
    """
    patch_size, patch_distance, h, sigma = _parameters(patch_size, patch_distance, h, sigma, backend)

    image, axis = _channels_last(image, channel_axis, np)  # TypeError for lists, as in scikit-image
    ndim = image.ndim - 1
    _check_dimensions(ndim)
    _check_not_empty(image.shape[:-1])
    image = _to_float(np.asarray(image), preserve_range)
    _check_mode(ndim, axis is not None, fast_mode, h, patch_distance)
    _check_extensions(image.shape[:-1], fast_mode, sigma, rician, mask, patch_size, patch_distance)
    result = _denoise_channels_last(image, patch_size, patch_distance, h, fast_mode, sigma, backend, rician, mask)
    return _output_shape(result, ndim, fast_mode, axis, np)


def _parameters(patch_size, patch_distance, h, sigma, backend):
    """The parameters as the filter takes them, with scikit-image's conversions and errors."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if isinstance(patch_size, (tuple, list)) or isinstance(patch_distance, (tuple, list)):
        return _per_axis_parameters(patch_size, patch_distance, h, sigma)
    patch_size = operator.index(patch_size)
    patch_distance = operator.index(patch_distance)
    if isinstance(h, (str, bytes)):  # float() would parse it; scikit-image's typed h refuses it
        raise TypeError(f"h must be a real number, not {type(h).__name__}")
    h = float(h)
    sigma * sigma  # TypeError for None, as in scikit-image, which uses only sigma * sigma
    if np.ndim(sigma) > 0:  # a noise map (an extension): checked by _check_extensions
        return max(patch_size, 1), patch_distance, h, sigma
    sigma = abs(float(sigma))
    return max(patch_size, 1), patch_distance, h, sigma  # scikit-image treats 0 as 1; negative crash it


def _per_axis_parameters(patch_size, patch_distance, h, sigma):
    """_parameters for per-axis patch sizes or distances (tuples, NumPy's axis order): each as a tuple
    of integers, checked by _check_extensions against the image's dimension."""
    def axes(value, name):
        if not isinstance(value, (tuple, list)):
            return operator.index(value)
        values = tuple(operator.index(v) for v in value)
        if any(v < 0 for v in values):
            raise ValueError(f"{name} must hold values of 0 or more, not {value!r}")
        return values
    sizes, distances = axes(patch_size, "patch_size"), axes(patch_distance, "patch_distance")
    sizes = tuple(max(s, 1) for s in sizes) if isinstance(sizes, tuple) else max(sizes, 1)
    first = (lambda v: v[0] if isinstance(v, tuple) else v)
    _, _, h, sigma = _parameters(first(sizes), first(distances), h, sigma, "auto")
    return sizes, distances, h, sigma


def _axis_values(value, ndim):
    """A per-axis parameter for `ndim` spatial axes: a tuple as given, a number repeated."""
    return tuple(value) if isinstance(value, tuple) else (value,) * ndim


def _check_extensions(spatial_shape, fast_mode, sigma, rician, mask, patch_size=0, patch_distance=0):
    """The opt-in keywords' errors, in the words of this function's parameters."""
    ndim = len(spatial_shape)
    for name, value in (("patch_size", patch_size), ("patch_distance", patch_distance)):
        if isinstance(value, tuple):
            if len(value) != ndim:
                raise ValueError(f"{name} {value} must have one entry per spatial axis ({ndim})")
            if not fast_mode:
                raise ValueError(f"per-axis {name} needs fast_mode=True")
    if isinstance(patch_size, tuple):
        radii = [s // 2 if s % 2 else (s + 1) // 2 for s in patch_size]
        if 0 in radii and any(radii):
            raise ValueError(f"patch_size {patch_size}: a patch size of 1 (an empty patch box) on some axes needs it "
                             "on all")
    if np.ndim(sigma) > 0:
        if tuple(np.shape(sigma)) != tuple(spatial_shape):
            raise ValueError(f"an array sigma (a noise map) must have the image's spatial shape {tuple(spatial_shape)}, "
                             f"not {tuple(np.shape(sigma))}")
        if not fast_mode:
            raise ValueError("an array sigma (a noise map) needs fast_mode=True; give a scalar sigma in classic mode")
    if rician and np.ndim(sigma) == 0 and not sigma > 0:
        raise ValueError("rician=True subtracts the noise bias 2*sigma**2: give sigma > 0 or an array sigma")
    if mask is not None:
        if np.asarray(mask).dtype.kind not in "biu":
            raise ValueError(f"mask must be a boolean or integer array, not {np.asarray(mask).dtype}")
        if tuple(np.shape(mask)) != tuple(spatial_shape):
            raise ValueError(f"mask must have the image's spatial shape {tuple(spatial_shape)}, not "
                             f"{tuple(np.shape(mask))}")


def _channels_last(image, channel_axis, xp):
    """The image with its channels on a last axis (added when there is none), as scikit-image's
    channel_as_last_axis decorator, and the channel axis (None without one). `xp`: numpy or
    dask.array."""
    if channel_axis is None:
        return image[..., np.newaxis], None
    axes = channel_axis if isinstance(channel_axis, tuple) else (channel_axis,)
    if len(axes) > 1:
        raise ValueError("only a single channel axis is currently supported")
    axis = axes[0]
    return (image if axis == -1 else xp.moveaxis(image, axis, -1)), axis


def _output_shape(result, ndim, fast_mode, axis, xp):
    """scikit-image's output shape: squeezed (but the slow 3D kernel's), the channels moved back."""
    result = result[..., 0] if ndim == 3 and not fast_mode else xp.squeeze(result)
    return result if axis is None or axis == -1 else xp.moveaxis(result, -1, axis)


def _check_dimensions(ndim):
    if ndim not in (2, 3, 4):
        raise NotImplementedError(
            "Non-local means denoising is only implemented for 2D, 3D or 4D grayscale or multichannel images.")


def _check_not_empty(spatial_shape):
    """scikit-image cannot pad an axis of length 0 (ValueError); nor does the filter take it."""
    if 0 in tuple(spatial_shape):
        raise ValueError(f"the image is empty (spatial shape {tuple(spatial_shape)}): give at least one pixel "
                         "along every axis")


def _check_mode(ndim, multichannel, fast_mode, h, patch_distance):
    """scikit-image's refusals, and this function's own for input it computes meaninglessly."""
    if ndim == 3 and multichannel and not fast_mode:
        raise NotImplementedError("Multichannel 3D requires fast_mode to be True.")
    if ndim == 4 and not fast_mode:
        raise NotImplementedError("4D requires fast_mode to be True.")
    if h == 0:
        raise ValueError("h is 0: give a non-zero cut-off distance (scikit-image computes a degenerate mean).")
    if not isinstance(patch_distance, tuple) and patch_distance < 0:
        raise ValueError(f"patch_distance is {patch_distance}; it must be 0 or more.")


def _itk_image(array, pixel, vector=False):
    """An ITK image (a VectorImage when `vector`: the last axis holds the components) of `pixel`
    holding `array`, whose axes are reversed into ITK's. Unlike itk.image_from_array, which takes an
    array that is both C- and Fortran-contiguous (at most one axis longer than 1, e.g. 13 x 1) as
    Fortran-ordered and so keeps its axes unreversed, whatever the array's layout."""
    import itk

    ndim = array.ndim - 1 if vector else array.ndim
    image = (itk.VectorImage[pixel, ndim] if vector else itk.Image[pixel, ndim]).New()
    image.SetRegions([int(n) for n in reversed(array.shape[:ndim])])
    if vector:
        image.SetNumberOfComponentsPerPixel(array.shape[-1])
    image.Allocate()
    itk.array_view_from_image(image)[...] = array
    return image


def _denoise_channels_last(image, patch_size, patch_distance, h, fast_mode, sigma, backend, rician=False,
                           mask=None):
    """The filter on a float32/float64 array whose last axis holds the channels (checked and
    converted by the caller); returns an array of the same shape and type. `sigma` is a number or
    an array of the spatial shape (a noise map), `mask` None or such an array."""
    import itk

    ndim = image.ndim - 1
    channels = image.shape[-1]  # _itk_image copies any layout: no contiguous copy first
    if channels == 0:  # no channel: nothing to compute (scikit-image returns the empty array too)
        return np.empty(image.shape, image.dtype)

    # To ITK: one component per pixel as a scalar image, several as a VectorImage.
    pixel = itk.F if image.dtype == np.float32 else itk.D
    try:
        image_type = itk.Image[pixel, ndim] if channels == 1 else itk.VectorImage[pixel, ndim]
        filter_type = itk.CudaNonLocalMeansImageFilter[image_type, image_type]
    except (KeyError, TypeError, AttributeError):  # ITK 5.2 raises any of them for a missing type
        kind = "scalar" if channels == 1 else "VectorImage"
        raise NotImplementedError(
            f"this ITK's Python wrapping has no {ndim}D {kind} {image.dtype} CudaNonLocalMeansImageFilter; "
            f"build ITK with {ndim} in ITK_WRAP_IMAGE_DIMS (and ITK_WRAP_float, ITK_WRAP_double on)") from None
    itk_image = _itk_image(image[..., 0] if channels == 1 else image, pixel, channels > 1)
    enums = itk.CudaNonLocalMeansImageFilterEnums
    filt = filter_type.New()
    filt.SetInput(itk_image)
    if isinstance(patch_size, tuple):  # per axis, NumPy's order: ITK's axes reversed
        filt.SetPatchRadius([s // 2 if s % 2 else (s + 1) // 2 for s in reversed(patch_size)])
    else:
        filt.SetPatchSize(patch_size)
    if isinstance(patch_distance, tuple):
        filt.SetSearchRadius(list(reversed(patch_distance)))
    else:
        filt.SetPatchDistance(patch_distance)
    filt.SetH(abs(h))
    if np.ndim(sigma) > 0:
        filt.SetNoiseSigmaImage(_itk_image(np.asarray(sigma, dtype=np.float64), itk.D))
    else:
        filt.SetSigma(sigma)
    if mask is not None:
        filt.SetMaskImage(_itk_image((np.asarray(mask) != 0).astype(np.uint8), itk.UC))
    filt.SetNoiseModel(enums.NoiseModel_Rician if rician else enums.NoiseModel_Gaussian)
    filt.SetFastMode(bool(fast_mode))
    filt.SetBackend({"auto": enums.Backend_Auto, "cpu": enums.Backend_CPU, "cuda": enums.Backend_CUDA}[backend])
    filt.Update()
    result = itk.array_from_image(filt.GetOutput())
    if channels == 1:
        result = result[..., np.newaxis]
    return np.array(result, copy=True)
