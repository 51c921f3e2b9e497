#!/usr/bin/env bash
# test.sh - the whole test suite: installs what it needs, builds gsb twice
# (release, and AddressSanitizer + UndefinedBehaviorSanitizer), runs every C
# test in both builds (the bridge's server, client, wire fuzz driver among
# them), runs the Windows client (cross-compiled with mingw-w64) under Wine
# against a Linux gsbd, checks `gsb service` under systemd, builds the sdist and wheel and
# runs the quick start from a fresh venv, then pip-installs the Python
# package and runs the Python suite (parity with scikit-learn, estimator
# checks, API, remote sessions through gsbd) against it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

echo "== C tests, release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -LE gpu -j"$jobs")

echo "== C tests, sanitizer build (ASan + UBSan)"
cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DGSB_SANITIZE=ON >/dev/null
cmake --build build-san -j"$jobs"
(cd build-san && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
   UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -LE gpu -j"$jobs")

echo "== Windows client: gsb.dll/gsb.exe (mingw-w64) under Wine against this build's gsbd"
# its work dir (jansson sources, a Wine prefix whose z: drive links to /) stays
# out of the source tree, which the sdist below packs
tests/windows/run-wine-test.sh build "${TMPDIR:-/tmp}/gsb-wine-test"

echo "== gsb service under a real systemd user manager (skips where it cannot run)"
tests/service/systemd_live.sh build

echo "== wheel: sdist, wheel, fresh venv, quick start, gsbd"
tools/test-wheel.sh --no-cuda

echo "== Python tests, pip-installed package"
tools/install-python.sh
# run from tests/ so `import gsb` finds the installed package, not python/gsb
export GSB_DATA_DIR="$PWD/build/pytest-data"
(cd tests/python && python3 -m pytest -q -p no:cacheprovider .)
