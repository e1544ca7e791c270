#!/usr/bin/env bash
# Installs what building and testing ITKCudaNonLocalMeans needs on Debian 12 (bookworm):
#  - Debian packages: a C++ toolchain, CMake, Ninja, ITK 5.2.1 (libinsighttoolkit5-dev), GoogleTest;
#  - a Python virtual environment with scikit-image 0.26.0 (the numerical oracle of the tests),
#    auditwheel (the wheel check), and NVRTC 12 from pip (to check that the
#    kernels compile for sm_61, which CUDA 13 dropped), kept outside the repository and reused: ${NLM_VENV:-$HOME/.cache/itk-cudanonlocalmeans/venv}.
# Prints the virtual environment's python on its last line. Safe to run again.
set -euo pipefail

packages=(g++ cmake ninja-build libinsighttoolkit5-dev libgtest-dev libgdcm-tools)
# A python3 outside Debian's packages (pyenv, ...) serves as well as Debian's.
if ! (command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null); then
  packages+=(python3 python3-venv)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "bootstrap: installing ${missing[*]}" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
fi

venv="${NLM_VENV:-$HOME/.cache/itk-cudanonlocalmeans/venv}"
check='import skimage, sys, auditwheel, nvidia.cuda_nvrtc; sys.exit(skimage.__version__ != "0.26.0")'
if ! "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "bootstrap: making $venv with scikit-image 0.26.0, auditwheel and NVRTC 12" >&2
  if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "scikit-image==0.26.0" \
    "auditwheel==6.8.2" "nvidia-cuda-nvrtc-cu12==12.9.86" >&2
fi
echo "$venv/bin/python"
