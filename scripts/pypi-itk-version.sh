#!/usr/bin/env bash
# Prints the release of PyPI's itk-core that the wheel is built for and tested with: the version in
# pyproject.toml's dependency "itk-core ~= X.Y.Z", the one place it is stated.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^dependencies = \[.*"itk-core ~= \([0-9][0-9.]*\)".*/\1/p' pyproject.toml)
[ -n "$version" ] || { echo "pypi-itk-version: no \"itk-core ~= X.Y.Z\" dependency in pyproject.toml" >&2; exit 1; }
echo "$version"
