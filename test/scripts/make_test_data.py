#!/usr/bin/env python3
"""Makes the regression test data: deterministic inputs and scikit-image 0.26.0 outputs.

    python test/scripts/make_test_data.py            # (re)write the data and the case list
    python test/scripts/make_test_data.py --check    # regenerate elsewhere; verify the committed hashes

For every case it writes an input image and scikit-image's output as .mha, stores both in the
repository's ExternalData object store (.ExternalData/SHA512/<hash>), writes the content links
test/Input/<case>.mha.sha512 and test/Baseline/<case>.mha.sha512, and writes
test/RegressionCases.cmake, which test/CMakeLists.txt turns into one baseline test per case.
Inputs come from NumPy's PCG64 generator with fixed seeds, so the bytes (and the hashes) are
reproducible; --check proves that the committed baselines are what scikit-image 0.26.0 computes.
"""

import argparse
import hashlib
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nlm_mha import Case, write_mha  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ORACLE_VERSION = "0.26.0"


# Covers: 2D gray, 2D RGB, 3D gray, 3D 3-channel, 4D (1 and 2 channels); float32, float64 and uint8
# inputs; sigma 0 and > 0; patch sizes 1, 3, 4 (-> 5), 5, 7; distances 0..7; images smaller than
# the padding; fast and slow mode.
CASES = [
    Case("Gray2DFloat32", (40, 48), 1, "float32", 7, 5, 0.2, 0.0, True, 1),
    Case("Gray2DFloat64Sigma", (33, 41), 1, "float64", 5, 4, 0.15, 0.1, True, 2),
    Case("RGB2DFloat32", (30, 36), 3, "float32", 3, 5, 0.075, 0.05, True, 3),
    Case("RGB2DUInt8", (28, 34), 3, "uint8", 5, 3, 25.0, 10.0, True, 4),
    Case("Gray2DPatch1Distance3", (20, 24), 1, "float64", 1, 3, 0.1, 0.0, True, 5),
    Case("Gray2DEvenPatch4Distance7", (30, 26), 1, "float64", 4, 7, 0.12, 0.05, True, 6),
    Case("Gray2DDistance0", (16, 18), 1, "float32", 5, 0, 0.1, 0.0, True, 7),
    Case("Gray2DSmallerThanPadding", (5, 6), 1, "float64", 7, 5, 0.1, 0.0, True, 8),
    Case("Gray3DFloat32", (16, 20, 24), 1, "float32", 3, 3, 0.1, 0.05, True, 9),
    Case("Gray3DFloat64Patch5", (14, 17, 19), 1, "float64", 5, 2, 0.2, 0.0, True, 10),
    Case("Gray3DPatch7Distance1", (12, 13, 14), 1, "float64", 7, 1, 0.3, 0.1, True, 11),
    Case("Gray3DSmallerThanPadding", (3, 4, 5), 1, "float32", 5, 4, 0.1, 0.05, True, 12),
    Case("ThreeChannel3DFloat32", (10, 12, 14), 3, "float32", 3, 2, 0.12, 0.1, True, 13),
    Case("Gray4DFloat64", (6, 7, 8, 9), 1, "float64", 3, 2, 0.1, 0.05, True, 14),
    Case("TwoChannel4DFloat32", (5, 6, 6, 7), 2, "float32", 3, 1, 0.15, 0.1, True, 15),
    Case("Gray2DSlowFloat32", (24, 28), 1, "float32", 5, 3, 0.15, 0.05, False, 16),
    Case("RGB2DSlowFloat64", (20, 22), 3, "float64", 3, 4, 0.1, 0.05, False, 17),
    Case("Gray3DSlowFloat32", (10, 11, 12), 1, "float32", 3, 2, 0.2, 0.1, False, 18),
    Case("Gray3DSlowFloat64", (9, 10, 11), 1, "float64", 5, 2, 0.25, 0.0, False, 19),
]


def make_input(shape, channels, dtype, seed):
    """A smooth pattern with an edge, per channel, plus Gaussian noise of standard deviation 0.1."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0.0, 1.0, n) for n in shape], indexing="ij")
    layers = []
    for k in range(channels):
        phase = 0.7 * k
        base = 0.45 + 0.25 * np.sin(3.0 * grids[0] + 2.0 * grids[-1] + phase)
        edge = sum(grids) / len(grids) > 0.5 + 0.1 * k
        layers.append(base + 0.3 * edge + 0.1 * rng.standard_normal(shape))
    image = np.stack(layers, axis=-1) if channels > 1 else layers[0]
    if dtype == "uint8":
        return np.clip(np.round(255.0 * image), 0, 255).astype(np.uint8)
    return image.astype(dtype)


def skimage_output(case, image):
    from skimage.restoration import denoise_nl_means

    out = denoise_nl_means(
        image,
        patch_size=case.patch_size,
        patch_distance=case.patch_distance,
        h=case.h,
        fast_mode=case.fast_mode,
        sigma=case.sigma,
        preserve_range=True,
        channel_axis=-1 if case.channels > 1 else None,
    )
    expected_dtype = np.float32 if case.dtype == "float32" else np.float64
    assert out.dtype == expected_dtype and out.shape == image.shape, (case.name, out.dtype, out.shape)
    return out


def tolerance(case, baseline):
    """Absolute tolerance for ITK's --compare: float32 outputs 1 ulp of the largest value; float64
    outputs 5e-9 relative to the data range (skimage's own integral-image rounding sets that floor)."""
    peak = float(np.max(np.abs(baseline)))
    if baseline.dtype == np.float32:
        return float(np.spacing(np.float32(peak)))
    return 5e-9 * max(1.0, peak)


def cmake_args(case):
    args = [
        "--patch-size", str(case.patch_size),
        "--patch-distance", str(case.patch_distance),
        "--h", repr(case.h),
        "--sigma", repr(case.sigma),
    ]
    if not case.fast_mode:
        args.append("--slow")
    if case.dtype not in ("float32", "float64"):
        # scikit-image's result is float64; the program writes the input's type unless told.
        args += ["--output-type", "float64"]
    return " ".join(args)


def sha512(path):
    with open(path, "rb") as f:
        return hashlib.sha512(f.read()).hexdigest()


def generate(outdir):
    """Writes <outdir>/Input/<case>.mha and <outdir>/Baseline/<case>.mha; returns the cmake lines."""
    os.makedirs(os.path.join(outdir, "Input"), exist_ok=True)
    os.makedirs(os.path.join(outdir, "Baseline"), exist_ok=True)
    lines = [
        "# Generated by test/scripts/make_test_data.py from scikit-image " + ORACLE_VERSION + "; do not edit.",
        "set(CudaNonLocalMeans_REGRESSION_CASES",
    ]
    lines += [f"  {c.name}" for c in CASES] + ["  )"]
    for case in CASES:
        image = make_input(case.shape, case.channels, case.dtype, case.seed)
        out = skimage_output(case, image)
        write_mha(os.path.join(outdir, "Input", case.name + ".mha"), image, case.channels)
        write_mha(os.path.join(outdir, "Baseline", case.name + ".mha"), out, case.channels)
        lines.append(f"set(CudaNonLocalMeans_{case.name}_ARGS {cmake_args(case)})")
        lines.append(f"set(CudaNonLocalMeans_{case.name}_TOLERANCE {tolerance(case, out):.6g})")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="verify the committed data instead of writing it")
    parser.add_argument("--workdir", help="scratch folder (default: a temporary one)")
    args = parser.parse_args()

    import skimage

    if skimage.__version__ != ORACLE_VERSION:
        sys.exit(f"scikit-image {ORACLE_VERSION} is the oracle; this Python has {skimage.__version__}")

    workdir = args.workdir or tempfile.mkdtemp(prefix="nlm-test-data-")
    if os.path.isdir(workdir):
        shutil.rmtree(workdir)
    lines = generate(workdir)
    cmake_text = "\n".join(lines) + "\n"
    store = os.path.join(ROOT, ".ExternalData", "SHA512")
    cmake_path = os.path.join(ROOT, "test", "RegressionCases.cmake")

    if args.check:
        failures = 0
        for kind in ("Input", "Baseline"):
            for case in CASES:
                digest = sha512(os.path.join(workdir, kind, case.name + ".mha"))
                link = os.path.join(ROOT, "test", kind, case.name + ".mha.sha512")
                committed = open(link).read().strip() if os.path.exists(link) else "(missing)"
                ok = committed == digest and os.path.exists(os.path.join(store, digest))
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {kind}/{case.name}.mha")
        with open(cmake_path) as f:
            if f.read() != cmake_text:
                failures += 1
                print("FAIL test/RegressionCases.cmake differs from what the script writes")
        print(f"{len(CASES) * 2 - failures + (0 if failures else 1)} checks passed, {failures} failed "
              f"(scikit-image {skimage.__version__}, numpy {np.__version__})")
        return 1 if failures else 0

    os.makedirs(store, exist_ok=True)
    for kind in ("Input", "Baseline"):
        for case in CASES:
            path = os.path.join(workdir, kind, case.name + ".mha")
            digest = sha512(path)
            shutil.copyfile(path, os.path.join(store, digest))
            with open(os.path.join(ROOT, "test", kind, case.name + ".mha.sha512"), "w") as f:
                f.write(digest + "\n")
    with open(cmake_path, "w") as f:
        f.write(cmake_text)
    total = sum(os.path.getsize(os.path.join(workdir, k, c.name + ".mha")) for k in ("Input", "Baseline") for c in CASES)
    print(f"wrote {len(CASES)} cases ({total / 1024:.0f} KiB) to the object store and {cmake_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
