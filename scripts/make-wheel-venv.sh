#!/usr/bin/env bash
# The real user's environment for the Python tests: a fresh virtual environment with PyPI's
# itk-core (the version the wheel is built for) and, from its file, the module's wheel with its
# `nvrtc` extra, plus pytest and scikit-image 0.26.0 (the oracle). Nothing built here is on its
# import path. Usage: scripts/make-wheel-venv.sh WHEEL [VENV]; prints the environment's python on
# its last line. VENV defaults to build/wheel-venv and is made anew on every call.
set -euo pipefail
wheel=$(realpath "${1:?usage: scripts/make-wheel-venv.sh WHEEL [VENV]}")
venv=$(realpath -m "${2:-$(dirname "$0")/../build/wheel-venv}")
cd "$(dirname "$0")/.."
itk_core="itk-core==$(scripts/pypi-itk-version.sh)" # the release the wheel is built for
log() { echo "make-wheel-venv: $*" >&2; }

rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"${NLM_WHEEL_PYTHON:-python3}" -m venv "$venv" # the Python scripts/build-wheel.sh builds with
log "installing $itk_core from PyPI, then $(basename "$wheel")[nvrtc] from its file, into $venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$itk_core" "scikit-image==0.26.0" pytest \
  "dask[array]==2026.8.0" "distributed==2026.8.0" "zarr==3.1.6" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel[nvrtc]" >&2
"$venv/bin/python" -m pip check >&2
# Which itk this environment imports (from outside the source tree, with no PYTHONPATH).
(cd / && env -u PYTHONPATH "$venv/bin/python" -W ignore - >&2) <<'PY'
import importlib.metadata as m, itk, os
print(f"make-wheel-venv: imports itk {itk.Version.GetITKVersion()} from {os.path.dirname(itk.__file__)} "
      f"(itk-core {m.version('itk-core')}, itk-cudanonlocalmeans {m.version('itk-cudanonlocalmeans')})")
PY
echo "$venv/bin/python"
