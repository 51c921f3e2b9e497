#!/bin/sh
# run-wine-test.sh LINUX_BUILD_DIR [WORK_DIR]
#
# The Windows client's CI test: cross-compiles gsb.dll and gsb.exe with
# Debian's mingw-w64 (jansson built from Debian's source package), starts the
# Linux gsbd of LINUX_BUILD_DIR on a free loopback port with a temporary data
# directory, runs the self-test (tests/windows/selftest.c) natively against
# libgsb and as `wine gsb.exe selftest`, and compares the two outputs byte
# for byte (every number is printed as %.17g and as its IEEE bits).
# Prints "wine test: ok" on success.  Needs root (or the packages already
# installed) for apt-get; WORK_DIR (default $TMPDIR/gsb-wine-test, outside the
# source tree: its Wine prefix links z: to /) keeps
# the jansson and mingw builds and the Wine prefix between runs.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 LINUX_BUILD_DIR [WORK_DIR]" >&2; exit 2; }
lbuild=$(cd "$1" && pwd)
work=${2:-${TMPDIR:-/tmp}/gsb-wine-test}
mkdir -p "$work"
work=$(cd "$work" && pwd)
[ -x "$lbuild/gsbd" ] && [ -e "$lbuild/libgsb.so" ] || {
    echo "wine test: no gsbd/libgsb.so in $lbuild (build the Linux tree first)" >&2; exit 1; }

# ---- packages -----------------------------------------------------------------
need=""
command -v x86_64-w64-mingw32-gcc-posix >/dev/null 2>&1 || need="$need gcc-mingw-w64-x86-64"
command -v wine >/dev/null 2>&1 || need="$need wine64 wine"
if [ -n "$need" ]; then
    echo "wine test: installing$need"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need >"$work/apt.log" 2>&1 || {
        apt-get update >>"$work/apt.log" 2>&1
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need >>"$work/apt.log" 2>&1
    } || { echo "wine test: cannot install$need (see $work/apt.log)" >&2; exit 1; }
fi

# ---- jansson for mingw (no Debian mingw package: built from the source package)
jroot=$work/jansson-mingw
if [ ! -e "$jroot/lib/libjansson.a" ]; then
    src=$work/jansson-src
    mkdir -p "$src"
    if ! ls "$src"/jansson_*.orig.tar.gz >/dev/null 2>&1; then
        if ! apt-cache showsrc jansson >/dev/null 2>&1 || [ -z "$(apt-cache showsrc jansson 2>/dev/null)" ]; then
            cat >/etc/apt/sources.list.d/gsb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
            apt-get update >"$work/apt-src.log" 2>&1
        fi
        (cd "$src" && apt-get source --download-only jansson >"$work/apt-src.log" 2>&1) || {
            echo "wine test: cannot fetch jansson's source (see $work/apt-src.log)" >&2; exit 1; }
    fi
    rm -rf "$work/jansson-build" && mkdir -p "$work/jansson-build"
    tar xzf "$src"/jansson_*.orig.tar.gz -C "$work/jansson-build"
    jdir=$(ls -d "$work"/jansson-build/jansson-*)
    cmake -S "$jdir" -B "$work/jansson-build/b" -DCMAKE_TOOLCHAIN_FILE="$root/windows/mingw-w64.cmake" \
        -DCMAKE_BUILD_TYPE=Release -DJANSSON_BUILD_DOCS=OFF -DJANSSON_EXAMPLES=OFF \
        -DJANSSON_WITHOUT_TESTS=ON -DJANSSON_BUILD_SHARED_LIBS=OFF \
        -DCMAKE_INSTALL_PREFIX="$jroot" >"$work/jansson.log" 2>&1 &&
    cmake --build "$work/jansson-build/b" -j2 >>"$work/jansson.log" 2>&1 &&
    cmake --install "$work/jansson-build/b" >>"$work/jansson.log" 2>&1 || {
        echo "wine test: jansson's mingw build failed (see $work/jansson.log)" >&2; exit 1; }
fi

# ---- gsb.dll and gsb.exe --------------------------------------------------------
# Per checkout: CMake refuses a build dir configured from another source tree,
# and several clones (CI, a fresh-clone check) may share one WORK_DIR.
tree=$work/tree-$(printf '%s' "$root" | cksum | cut -d' ' -f1)
mkdir -p "$tree"
wb=$tree/mingw
cmake -S "$root/windows" -B "$wb" -DCMAKE_TOOLCHAIN_FILE="$root/windows/mingw-w64.cmake" \
    -DJANSSON_ROOT="$jroot" -DCMAKE_BUILD_TYPE=Release >"$tree/mingw.log" 2>&1 &&
cmake --build "$wb" -j2 >>"$tree/mingw.log" 2>&1 || {
    tail -30 "$tree/mingw.log" >&2; echo "wine test: the mingw build failed" >&2; exit 1; }

# ---- the native twin of the self-test -------------------------------------------
cc -std=c11 -O1 -Wall -Wextra -Werror -DGSB_SELFTEST_MAIN -I"$root/include" -I"$here" \
    "$here/selftest.c" -o "$tree/selftest-linux" -L"$lbuild" -lgsb -Wl,-rpath,"$lbuild"

# ---- a gsbd on a free loopback port -----------------------------------------------
tmp=$(mktemp -d)
gsbd_pid=""
cleanup() {
    if [ -n "$gsbd_pid" ]; then kill "$gsbd_pid" 2>/dev/null || true; wait "$gsbd_pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
url=tcp://127.0.0.1:$port
"$lbuild/gsbd" --listen "$url" --data-dir "$tmp/data" --device cpu --log-file "$tmp/gsbd.log" \
    >"$tmp/gsbd.out" 2>&1 &
gsbd_pid=$!
i=0
until "$tree/selftest-linux" "$url" >/dev/null 2>&1 || [ $i -ge 100 ]; do
    kill -0 "$gsbd_pid" 2>/dev/null || { cat "$tmp/gsbd.out" >&2; echo "wine test: gsbd died" >&2; exit 1; }
    sleep 0.1; i=$((i + 1))
done

# ---- run both, compare ----------------------------------------------------------
"$tree/selftest-linux" "$url" >"$tmp/linux.txt" 2>&1 || {
    cat "$tmp/linux.txt" >&2; echo "wine test: the native self-test failed" >&2; exit 1; }
export WINEPREFIX="$work/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
[ -d "$WINEPREFIX" ] || wineboot -i >"$work/wineboot.log" 2>&1 || true
(cd "$wb" && wine ./gsb.exe selftest "$url") >"$tmp/wine.raw" 2>"$tmp/wine.err" || {
    cat "$tmp/wine.raw" "$tmp/wine.err" >&2; echo "wine test: gsb.exe selftest failed" >&2; exit 1; }
tr -d '\r' <"$tmp/wine.raw" >"$tmp/wine.txt"
(cd "$wb" && wine ./gsb.exe health "$url") >"$tmp/health.txt" 2>&1 || {
    cat "$tmp/health.txt" >&2; echo "wine test: gsb.exe health failed" >&2; exit 1; }
grep -q "selftest: ok" "$tmp/linux.txt" || { echo "wine test: no 'selftest: ok'" >&2; exit 1; }
if ! diff -u "$tmp/linux.txt" "$tmp/wine.txt" >&2; then
    echo "wine test: the Windows client's numbers differ from the Linux client's" >&2; exit 1
fi
echo "wine test: $(grep -c . "$tmp/linux.txt") lines identical ($(grep -o '(' "$tmp/linux.txt" | wc -l) floats bit for bit)"
# the Windows wheel: the Python package with this gsb.dll; check it is whole
whl=$(python3 "$root/tools/make-windows-wheel.py" "$wb/gsb.dll" "$tree/dist")
python3 - "$whl" <<'PY' || { echo "wine test: the Windows wheel is incomplete" >&2; exit 1; }
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = {"gsb/__init__.py", "gsb/_lib.py", "gsb/gsb.dll", "gsb/scripts/windows/gsb-wsl.ps1"}
missing = need - names
assert not missing, missing
assert any(n.endswith(".dist-info/RECORD") for n in names)
PY
echo "wine test: Windows wheel $whl"
echo "wine test: ok"
