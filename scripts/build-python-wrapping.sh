#!/usr/bin/env bash
# Builds this module's Python wrapping. ITK's Python wrapping needs an ITK *build tree* made with
# ITK_WRAP_PYTHON=ON, which Debian does not ship, so this script first builds a minimal ITK 5.2.1
# with Python wrapping from Debian's own source package (apt-get source insighttoolkit5), with
# Debian's castxml and swig, into a cache folder outside the repository:
#   ${NLM_WRAPPED_ITK_CACHE:-$HOME/.cache/itk-cudanonlocalmeans/itk-5.2.1-python}
# It is reused when complete and built with the same settings (about 20 minutes on 2 cores
# otherwise). Then it builds the module against it, with wrapping, in ${NLM_PYTHON_BUILD_DIR:-build-python}.
# The last line printed is the PYTHONPATH under which `import itk` finds the module.
# Recipe and the three one-line ITK patches: ../shared/docs/itk-python-wrapping-recipe.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
python=$(scripts/bootstrap.sh | tail -n 1)
cache="${NLM_WRAPPED_ITK_CACHE:-$HOME/.cache/itk-cudanonlocalmeans/itk-5.2.1-python}"
build_type=MinSizeRel
jobs=$(nproc)
log() { echo "build-python-wrapping: $*" >&2; }

# Debian packages: the wrapping tools, and the source package tools.
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
need=()
wanted=(castxml swig dpkg-dev xz-utils)
# The wrapping compiles against Python's headers: Debian's python3 needs python3-dev for them.
"$python" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
  wanted+=(python3-dev)
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
fi

# The ITK configuration; its hash (with the Python and NumPy versions) names a complete build.
itk_options=(
  -DCMAKE_BUILD_TYPE=$build_type
  -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF -DBUILD_EXAMPLES=OFF
  -DITK_BUILD_DEFAULT_MODULES=OFF -DITKGroup_Core=OFF
  -DModule_ITKCommon=ON -DModule_ITKImageFilterBase=ON -DModule_ITKIOImageBase=ON
  -DModule_ITKIOMeta=ON -DModule_ITKBridgeNumPy=ON
  -DITK_WRAP_PYTHON=ON
  -DITK_USE_SYSTEM_SWIG=ON -DSWIG_EXECUTABLE=/usr/bin/swig
  -DITK_USE_SYSTEM_CASTXML=ON -DCASTXML_EXECUTABLE=/usr/bin/castxml
  -DITK_WRAP_float=ON -DITK_WRAP_double=ON
  -DITK_WRAP_unsigned_char=OFF -DITK_WRAP_unsigned_short=OFF -DITK_WRAP_unsigned_long_long=OFF
  -DITK_WRAP_signed_char=OFF -DITK_WRAP_signed_short=OFF -DITK_WRAP_signed_long_long=OFF
  -DITK_WRAP_vector_float=OFF -DITK_WRAP_vector_double=OFF
  -DITK_WRAP_covariant_vector_float=OFF -DITK_WRAP_covariant_vector_double=OFF
  -DITK_WRAP_rgb_unsigned_char=OFF -DITK_WRAP_rgb_unsigned_short=OFF
  -DITK_WRAP_rgba_unsigned_char=OFF -DITK_WRAP_rgba_unsigned_short=OFF
  -DITK_WRAP_complex_float=OFF -DITK_WRAP_complex_double=OFF
  "-DITK_WRAP_DIMS=2;3"
)
versions=$("$python" -c 'import sys, numpy; print(sys.version.split()[0], numpy.__version__)')
key=$(printf '%s\n' "${itk_options[@]}" "$versions" "patches 3" | sha256sum | cut -c1-16)
itk_build="$cache/build"

if [ "$(cat "$itk_build/.complete" 2>/dev/null || true)" = "$key" ]; then
  log "reusing the wrapped ITK in $itk_build"
else
  log "building a wrapped ITK 5.2.1 in $cache (about 20 minutes on 2 cores)"
  rm -rf "$cache"
  mkdir -p "$cache"
  if ! grep -rqs "^Types: deb-src" /etc/apt/sources.list.d/ /etc/apt/sources.list 2>/dev/null; then
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
      $sudo tee /etc/apt/sources.list.d/itk-cudanonlocalmeans-src.sources >/dev/null
    $sudo apt-get update -qq >&2
  fi
  (cd "$cache" && apt-get source -qq insighttoolkit5 >&2)
  src=$(ls -d "$cache"/insighttoolkit5-*/ | head -n 1)
  rm -rf "$src/.ExternalData" "$cache"/*.orig.tar.* # test data and the tarball, not needed
  # The three patches of the recipe: an unquoted empty list, a header of a module that is off, and
  # NumPy's removed np.bool alias.
  sed -i 's/VectorTypes ${WRAP_ITK_VECTOR})/VectorTypes "${WRAP_ITK_VECTOR}")/' \
    "$src/Modules/Core/Common/wrapping/itkImageDuplicator.wrap"
  sed -i '/itk_wrap_simple_class("itk::MeshRegion")/d' "$src/Modules/Core/Common/wrapping/ITKCommonBase.wrap"
  sed -i 's/"B", np.bool)/"B", np.bool_)/' "$src/Wrapping/Generators/Python/itk/support/types.py"
  start=$(date +%s)
  cmake -G Ninja -S "$src" -B "$itk_build" "${itk_options[@]}" -DPython3_EXECUTABLE="$python" > "$cache/configure.log" 2>&1 ||
    { tail -40 "$cache/configure.log"; exit 1; }
  ninja -C "$itk_build" -j "$jobs" > "$cache/build.log" 2>&1 || { tail -60 "$cache/build.log"; exit 1; }
  echo "$key" > "$itk_build/.complete"
  log "wrapped ITK built in $(( $(date +%s) - start )) s"
fi

# The module against the wrapped ITK build tree (the ITKModuleExternal path), with wrapping.
module_build="${NLM_PYTHON_BUILD_DIR:-build-python}"
mkdir -p "$module_build"
cmake -G Ninja -S "$root" -B "$module_build" -DCMAKE_BUILD_TYPE=Release -DITK_DIR="$itk_build" \
  -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$python" \
  -DITK_USE_SYSTEM_SWIG=ON -DSWIG_EXECUTABLE=/usr/bin/swig \
  -DITK_USE_SYSTEM_CASTXML=ON -DCASTXML_EXECUTABLE=/usr/bin/castxml > "$module_build/configure.log" 2>&1 ||
  { tail -40 "$module_build/configure.log"; exit 1; }
ninja -C "$module_build" -j "$jobs" >&2
echo "$itk_build/Wrapping/Generators/Python:$root/python"
