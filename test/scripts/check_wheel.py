#!/usr/bin/env python3
"""Checks the wheel that scripts/build-wheel.sh built, as PyPI would receive it:

- its name: itk_cudanonlocalmeans-<version of CMakeLists.txt>-cp311-abi3-manylinux_<glibc>_x86_64;
- what it holds: the wrapping (itk/_CudaNonLocalMeansPython.abi3.so, the generated .py files, the
  Configuration files) and the scikit-image drop-in (itk_cudanonlocalmeans/__init__.py);
- its metadata: the version, and pyproject.toml's dependency on PyPI's itk-core;
- `auditwheel show`: the wheel is consistent with a manylinux platform tag, and every library it
  loads is either grafted into it or allowed by that policy;
- no shared object in it needs a CUDA library (libcuda, libcudart, libnvrtc) or libpython: the
  module opens the driver and NVRTC at run time, and an abi3 module takes Python's symbols from the
  interpreter, so the wheel installs and imports anywhere.
"""

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

EXPECTED = [
    "itk/_CudaNonLocalMeansPython.abi3.so",
    "itk/CudaNonLocalMeansPython.py",
    "itk/itkCudaNonLocalMeansImageFilterPython.py",
    "itk/Configuration/CudaNonLocalMeansConfig.py",
    "itk/Configuration/CudaNonLocalMeans_snake_case.py",
    "itk_cudanonlocalmeans/__init__.py",
    "itk_cudanonlocalmeans/dask.py",
]
FORBIDDEN_LIBRARY = re.compile(r"lib(cuda|cudart|nvrtc|python3)[.-]")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", required=True, help="the repaired wheel")
    parser.add_argument("--source", required=True, help="the module's source folder (with CMakeLists.txt)")
    parser.add_argument("--workdir", required=True, help="scratch folder")
    args = parser.parse_args()
    wheel = Path(args.wheel)
    problems = []

    version = re.search(r"project\(CudaNonLocalMeans\s+VERSION\s+([0-9.]+)",
                        (Path(args.source) / "CMakeLists.txt").read_text()).group(1)
    pattern = rf"itk_cudanonlocalmeans-{re.escape(version)}-cp311-abi3-manylinux\w*_x86_64(\.manylinux\w*_x86_64)*\.whl"
    if not re.fullmatch(pattern, wheel.name):
        problems.append(f"wheel name {wheel.name} does not match {pattern}")

    unpacked = Path(args.workdir) / "unpacked"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(unpacked)
    problems += [f"{name} is missing from {wheel.name}" for name in EXPECTED if name not in names]
    metadata = (unpacked / next(n for n in names if n.endswith(".dist-info/METADATA"))).read_text()
    if not re.search(rf"^Version: {re.escape(version)}$", metadata, re.M):
        problems.append(f"the metadata does not give version {version}")
    pin = re.search(r'"(itk-core ~= [0-9.]+)"', (Path(args.source) / "pyproject.toml").read_text()).group(1)
    required = re.findall(r"^Requires-Dist: (itk-core\b.*)$", metadata, re.M)
    if [r.replace(" ", "") for r in required] != [pin.replace(" ", "")]:
        problems.append(f"the metadata requires {required}, not pyproject.toml's {pin}")

    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], check=True, capture_output=True,
                           text=True).stdout
    print(shown)
    tag = re.search(r"consistent with the following platform tag:\s*\"?(manylinux_\d+_\d+_x86_64)", shown)
    if not tag:
        problems.append("auditwheel finds no manylinux platform tag the wheel is consistent with")
    else:
        print(f"auditwheel: consistent with {tag.group(1)}")

    for library in sorted(p for p in unpacked.rglob("*.so*") if p.is_file()):
        dynamic = subprocess.run(["readelf", "-d", str(library)], check=True, capture_output=True, text=True).stdout
        needed = re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic)
        print(f"{library.relative_to(unpacked)} needs {', '.join(needed)}")
        problems += [f"{library.name} needs {lib}" for lib in needed if FORBIDDEN_LIBRARY.match(lib)]
    print(f"{wheel.name}: {len(names)} files")
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
