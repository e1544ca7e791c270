#!/usr/bin/env python3
"""Builds the module's Python wheel with pyproject.toml (scikit-build-core) against a wrapped ITK
build tree, the way ITK's wheel scripts call it, and checks what the wheel holds:

- a platform wheel named itk_cudanonlocalmeans-<version of CMakeLists.txt>-...;
- the wrapping (itk/_CudaNonLocalMeansPython.so, the generated .py files, the Configuration files)
  and the scikit-image drop-in (itk_cudanonlocalmeans/__init__.py);
- a dependency on itk in its metadata;
- no shared object in it that needs a CUDA library (libcuda, libcudart, libnvrtc): the module
  opens the driver and NVRTC at run time, so the wheel must install and import without CUDA.

It does not test the wheel against PyPI's itk 5.4 packages (no such ITK build tree here).
"""

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

EXPECTED = [
    "itk/_CudaNonLocalMeansPython.so",
    "itk/CudaNonLocalMeansPython.py",
    "itk/itkCudaNonLocalMeansImageFilterPython.py",
    "itk/Configuration/CudaNonLocalMeansConfig.py",
    "itk/Configuration/CudaNonLocalMeans_snake_case.py",
    "itk_cudanonlocalmeans/__init__.py",
]
CUDA_LIBRARY = re.compile(r"lib(cuda|cudart|nvrtc)[.-]")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--itk-dir", required=True, help="a wrapped ITK build tree")
    parser.add_argument("--source", required=True, help="the module's source folder (with pyproject.toml)")
    parser.add_argument("--workdir", required=True, help="scratch folder for the build and the wheel")
    args = parser.parse_args()
    source = Path(args.source).resolve()
    work = Path(args.workdir).resolve()
    dist = work / "dist"
    for old in dist.glob("*.whl"):
        old.unlink()
    defines = {
        "ITK_DIR:PATH": args.itk_dir,
        "WRAP_ITK_INSTALL_COMPONENT_IDENTIFIER:STRING": "PythonWheel",
        "PY_SITE_PACKAGES_PATH:PATH": ".",
        "Python3_EXECUTABLE:FILEPATH": sys.executable,
        "ITK_USE_SYSTEM_SWIG:BOOL": "ON",
        "SWIG_EXECUTABLE:FILEPATH": "/usr/bin/swig",
        "ITK_USE_SYSTEM_CASTXML:BOOL": "ON",
        "CASTXML_EXECUTABLE:FILEPATH": "/usr/bin/castxml",
    }
    command = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check",
               "--outdir", str(dist), f"-Cbuild-dir={work / 'build'}"]
    command += [f"-Ccmake.define.{key}={value}" for key, value in defines.items()]
    command.append(str(source))
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)

    wheels = list(dist.glob("*.whl"))
    if len(wheels) != 1:
        sys.exit(f"expected one wheel in {dist}, found {wheels}")
    wheel = wheels[0]
    problems = []
    version = re.search(r"project\(CudaNonLocalMeans VERSION ([0-9.]+)", (source / "CMakeLists.txt").read_text())
    pattern = rf"itk_cudanonlocalmeans-{re.escape(version.group(1))}-cp\d+-cp\d+-linux_\w+\.whl"
    if not re.fullmatch(pattern, wheel.name):
        problems.append(f"wheel name {wheel.name} does not match {pattern}")
    unpacked = work / "unpacked"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(unpacked)
    for name in EXPECTED:
        if name not in names:
            problems.append(f"{name} is missing from {wheel.name}")
    metadata = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
    if metadata is None or not re.search(r"^Requires-Dist: itk\b", (unpacked / metadata).read_text(), re.M):
        problems.append("the metadata does not require itk")
    # The shared objects in the wheel, and the module's own library, which ITK's wheel scripts
    # (auditwheel) add next to the wrapping.
    shared = [unpacked / name for name in names if ".so" in Path(name).name]
    shared += sorted(Path(args.itk_dir).rglob("libitkCudaNonLocalMeans-*.so*"))
    for library in shared:
        dynamic = subprocess.run(["readelf", "-d", str(library)], check=True, capture_output=True, text=True).stdout
        needed = re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic)
        print(f"{library.name} needs {', '.join(needed)}")
        problems += [f"{library.name} needs {lib}" for lib in needed if CUDA_LIBRARY.match(lib)]
    print(f"{wheel.name}: {len(names)} files")
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
