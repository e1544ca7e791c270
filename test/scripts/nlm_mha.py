"""Helpers of the test scripts: minimal MetaImage (.mha) reading and writing with NumPy (so they
need no ITK Python), and the description of one denoising case.

Arrays use NumPy's axis order as ``itk.array_from_image`` does: the last spatial axis is ITK's x
axis, and channels (components) come last when there is more than one.
"""

from dataclasses import dataclass

import numpy as np


@dataclass
class Case:
    """One denoising case: input shape (spatial, NumPy order), channels, dtype and skimage's
    parameters; `seed` fixes a committed test input, `data` names how a fresh one is drawn."""

    name: str
    shape: tuple
    channels: int
    dtype: str
    patch_size: int
    patch_distance: int
    h: float
    sigma: float
    fast_mode: bool = True
    seed: int = 0
    data: str = "smooth"

_TYPES = {
    "MET_UCHAR": np.uint8,
    "MET_CHAR": np.int8,
    "MET_USHORT": np.uint16,
    "MET_SHORT": np.int16,
    "MET_UINT": np.uint32,
    "MET_INT": np.int32,
    "MET_ULONG_LONG": np.uint64,
    "MET_LONG_LONG": np.int64,
    "MET_FLOAT": np.float32,
    "MET_DOUBLE": np.float64,
}
_NAMES = {np.dtype(v): k for k, v in _TYPES.items()}


def write_mha(path, array, channels=1):
    """Writes `array` (spatial axes first, then a channel axis when channels > 1) as one .mha file.

    The bytes depend only on the array, so the file's hash is reproducible."""
    array = np.ascontiguousarray(array)
    spatial = array.shape[:-1] if channels > 1 else array.shape
    if channels > 1 and array.shape[-1] != channels:
        raise ValueError(f"last axis has {array.shape[-1]} entries, expected {channels} channels")
    ndims = len(spatial)
    dtype = array.dtype.newbyteorder("<")
    header = [
        "ObjectType = Image",
        f"NDims = {ndims}",
        "BinaryData = True",
        "BinaryDataByteOrderMSB = False",
        "CompressedData = False",
        "TransformMatrix = " + " ".join("1" if i == j else "0" for i in range(ndims) for j in range(ndims)),
        "Offset = " + " ".join("0" for _ in range(ndims)),
        "ElementSpacing = " + " ".join("1" for _ in range(ndims)),
        "DimSize = " + " ".join(str(s) for s in reversed(spatial)),
    ]
    if channels > 1:
        header.append(f"ElementNumberOfChannels = {channels}")
    header += [f"ElementType = {_NAMES[np.dtype(array.dtype)]}", "ElementDataFile = LOCAL"]
    with open(path, "wb") as f:
        f.write(("\n".join(header) + "\n").encode("ascii"))
        f.write(array.astype(dtype, copy=False).tobytes())


def read_mha(path):
    """Returns (array, channels) of an uncompressed single-file .mha as ITK writes it."""
    with open(path, "rb") as f:
        data = f.read()
    fields = {}
    pos = 0
    while True:
        end = data.index(b"\n", pos)
        line = data[pos:end].decode("ascii").strip()
        pos = end + 1
        if not line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        fields[key] = value
        if key == "ElementDataFile":
            break
    if fields.get("ElementDataFile") != "LOCAL":
        raise ValueError(f"{path}: only single-file .mha images are supported")
    if fields.get("CompressedData", "False") == "True":
        raise ValueError(f"{path}: compressed .mha images are not supported")
    dims = [int(v) for v in fields["DimSize"].split()]
    channels = int(fields.get("ElementNumberOfChannels", "1"))
    dtype = np.dtype(_TYPES[fields["ElementType"]])
    if fields.get("BinaryDataByteOrderMSB", fields.get("ElementByteOrderMSB", "False")) == "True":
        dtype = dtype.newbyteorder(">")
    shape = tuple(reversed(dims)) + ((channels,) if channels > 1 else ())
    count = int(np.prod(shape))
    array = np.frombuffer(data, dtype=dtype, count=count, offset=pos).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=True), channels


def ulp_distance(a, b):
    """Distance in representable values between two float arrays of one type (same sign assumed
    away by the monotone integer mapping)."""
    itype = np.int32 if a.dtype == np.float32 else np.int64
    ia = a.view(itype).astype(np.int64)
    ib = b.view(itype).astype(np.int64)
    # Map the sign-magnitude encoding onto a monotone integer line.
    top = np.int64(np.iinfo(itype).min)
    ia = np.where(ia < 0, top - ia, ia)
    ib = np.where(ib < 0, top - ib, ib)
    return np.abs(ia - ib)
