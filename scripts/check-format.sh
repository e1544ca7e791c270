#!/usr/bin/env bash
# Every C++ and CUDA source follows ITK's .clang-format, as clang-format 19 applies it (installed
# here when missing). Fails, listing the files and the changes, when one does not.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format-19 >/dev/null; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "check-format: installing clang-format-19" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang-format-19 >&2
fi
mapfile -t files < <(git ls-files '*.h' '*.hxx' '*.cxx' '*.cu' '*.cuh')
clang-format-19 --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files formatted as .clang-format says"
