#!/usr/bin/env bash
# test-wheel.sh - the wheel as a user gets it: a fresh virtual environment,
# `pip install` of the gsb wheel and the cuml shim's wheel (numpy and
# scikit-learn come from the package index as for anyone), then, from a
# directory outside the source tree:
#   - gsb loads the libgsb.so inside the installed package (and the CUDA
#     plugin beside it where the wheel has one), and its version is the wheel's;
#   - examples/quickstart.py (the original project's quick start) runs;
#   - the `gsbd` console script serves: GSB_AUTOSTART's ensure_server starts it
#     on a Unix socket, a model fitted through it matches the embedded one;
#   - the `gsb` and `gsbd` commands work as README.md and docs/ write them
#     (version, info, serve, health in every URL form, models with and without
#     GSB_URL, logs, service install --dry-run, python -m gsb.server,
#     bench-bridge --quick), on ports of their own.
#
#   tools/test-wheel.sh [--no-build] [build-wheel.sh options...]
#     --no-build  test the wheels already in dist/ (else tools/build-wheel.sh
#                 builds them first, with the options given)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build=1
args=()
for a in "$@"; do
  if [ "$a" = --no-build ]; then build=0; else args+=("$a"); fi
done
[ $build = 1 ] && tools/build-wheel.sh "${args[@]}"
wheel=$(ls dist/gsb-*.whl 2>/dev/null | head -1)
shim=$(ls dist/gsb_cuml_shim-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] && [ -n "$shim" ] || { echo "test-wheel: no wheels in dist/ (run tools/build-wheel.sh)" >&2; exit 1; }

venv=build/wheel-venv
rm -rf "$venv"
python3 -m venv "$venv"
venv=$(cd "$venv" && pwd)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
echo "== pip install $wheel $shim into a fresh venv"
"$venv/bin/python" -m pip install -q "$wheel" "$shim"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # nothing of the source tree on sys.path
# the installed package alone: no library path or server from this shell
unset GSB_LIBRARY GSB_URL GSB_AUTOSTART GSB_AUTOSTART_CMD PYTHONPATH
export GSB_DATA_DIR=$work/data PATH="$venv/bin:$PATH"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

echo "== the installed package"
WHEEL="$repo/$wheel" python - <<'EOF'
import os, sys, zipfile
import gsb, gsb._lib as lib
pkg = os.path.dirname(gsb.__file__)
where = os.path.realpath(lib.lib._name)
assert sys.prefix in pkg, f"gsb imported from {pkg}, not the venv {sys.prefix}"
assert where == os.path.realpath(os.path.join(pkg, "libgsb.so")), \
    f"libgsb loaded from {where}, not from the package {pkg}"
name = os.path.basename(os.environ["WHEEL"])
assert name.startswith(f"gsb-{gsb.__version__}-"), f"version {gsb.__version__} vs wheel {name}"
in_wheel = set(zipfile.ZipFile(os.environ["WHEEL"]).namelist())
if "gsb/libgsb-cuda.so" in in_wheel:
    assert os.path.exists(os.path.join(pkg, "libgsb-cuda.so"))
info = gsb.info()
print(f"gsb {gsb.__version__} from {pkg}; library {where}; "
      f"backends compiled {info['backends_compiled']}, available {info['backends_available']}; "
      f"{len(info['estimators'])} estimators")
EOF

# every library libgsb needs resolves (a --repair wheel: from gsb.libs/ inside it)
lib=$(python -c "import gsb._lib as l, os; print(os.path.realpath(l.lib._name))")
if ldd "$lib" | grep -q "not found"; then
  ldd "$lib"; echo "test-wheel: $lib needs libraries that are not there" >&2; exit 1
fi
ldd "$lib" | grep -q "gsb.libs/" && echo "libgsb's dependencies come from the wheel (gsb.libs/)"

echo "== examples/quickstart.py"
python "$repo/examples/quickstart.py" > "$work/quickstart.out" 2>&1 || {
  cat "$work/quickstart.out"; echo "test-wheel: quickstart.py failed" >&2; exit 1; }
tail -n 25 "$work/quickstart.out"

echo "== gsbd (console script) through GSB_AUTOSTART"
command -v gsbd >/dev/null || { echo "test-wheel: the wheel installed no gsbd command" >&2; exit 1; }
python - <<'EOF'
import os
import numpy as np
import gsb
from gsb import _autostart
from gsb.preprocessing import StandardScaler
url = f"unix://{os.environ['GSB_DATA_DIR']}/gsbd.sock"
cmd = _autostart.server_command(url)
assert cmd[0].endswith("/gsbd"), cmd
try:
    health = _autostart.ensure_server(url, timeout=60)
    assert health["status"] == "ok" and health["version"] == gsb.__version__, health
    X = np.random.default_rng(1).normal(size=(200, 6))
    gsb.connect(url)
    remote = StandardScaler().fit_transform(X)
    gsb.connect(None)
    local = StandardScaler().fit_transform(X)
    assert np.array_equal(remote, local)
    print(f"gsbd {health['version']} ({health['backend']}) answered at {url}; "
          f"remote == embedded")
finally:
    gsb.connect(None)
    _autostart.stop_started()
EOF
echo "== the gsb and gsbd commands, as README.md and docs/ show them"
fail() { echo "test-wheel: $*" >&2; exit 1; }
for c in gsb gsbd; do
  command -v $c >/dev/null || fail "the wheel installed no $c command"
done
ver=$(python -c "import gsb; print(gsb.__version__)")
[ "$(gsb version)" = "gsb $ver" ] || fail "gsb version: $(gsb version)"
gsbd --version | grep -q "$ver" || fail "gsbd --version: $(gsbd --version)"
gsb --help | grep -q "health \[URL\]" || fail "gsb --help"
gsb info | grep -q "parameters:  n_clusters=8, init='k-means++'" || fail "gsb info shows no parameters"
gsb info | grep -q "attributes:  cluster_centers_ labels_" || fail "gsb info shows no attributes"
gsb info SVC | grep -q "kernel='rbf'" || fail "gsb info SVC"
gsb info --json | python -c "import json, sys; assert json.load(sys.stdin)['estimators']" \
  || fail "gsb info --json"
free_port() { python -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }
wait_up() {  # wait_up URL PID: until gsb health answers, or the server died
  for _ in $(seq 100); do
    gsb health "$1" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
stop() { kill "$1" && wait "$1"; }  # SIGTERM: exits 0 after finishing in-flight work

# gsb serve (README: "gsbd  # or: gsb serve, python -m gsb.server")
port=$(free_port)
srv=$work/srv
mkdir -p "$srv"
gsb serve --listen "tcp://127.0.0.1:$port" --listen "unix://$srv/gsbd.sock" --data-dir "$srv" \
  > "$work/serve.out" 2>&1 &
spid=$!
wait_up "tcp://127.0.0.1:$port" $spid || { cat "$work/serve.out"; fail "gsb serve did not come up"; }
for u in "http://127.0.0.1:$port/health" "http://127.0.0.1:$port" "127.0.0.1:$port" \
         "tcp://127.0.0.1:$port" "unix://$srv/gsbd.sock"; do
  gsb health "$u" | grep -q '"status":"ok"' || fail "gsb health $u"
done
GSB_URL="tcp://127.0.0.1:$port" gsb health | grep -q '"status":"ok"' || fail "GSB_URL= gsb health"
# a model saved through the server is the server's: gsb models with GSB_URL sees it
GSB_URL="unix://$srv/gsbd.sock" python -c '
import numpy as np
from gsb.preprocessing import StandardScaler
StandardScaler().fit(np.arange(12.0).reshape(6, 2)).save("wheel_scaler")'
GSB_URL="tcp://127.0.0.1:$port" gsb models list | grep -q "^wheel_scaler .*StandardScaler" \
  || fail "GSB_URL= gsb models list does not list the server's model"
if gsb models list | grep -q wheel_scaler; then fail "gsb models list without GSB_URL read the server's store"; fi
GSB_URL="tcp://127.0.0.1:$port" gsb models rm wheel_scaler || fail "GSB_URL= gsb models rm"
if GSB_URL="tcp://127.0.0.1:$port" gsb models list | grep -q wheel_scaler; then fail "gsb models rm kept it"; fi
gsb logs --data-dir "$srv" -n 20 | grep -q . || fail "gsb logs --data-dir shows nothing"
GSB_DATA_DIR="$srv" gsb logs -n 20 | grep -q . || fail "gsb logs shows nothing"
stop $spid || fail "gsb serve did not exit cleanly on SIGTERM"
if gsb health "tcp://127.0.0.1:$port" >/dev/null 2>&1; then fail "gsb health says up after the stop"; fi

# gsbd and python -m gsb.server, the same way
for cmd in gsbd "python -m gsb.server"; do
  port=$(free_port)
  $cmd --listen "tcp://127.0.0.1:$port" --data-dir "$srv" > "$work/serve.out" 2>&1 &
  spid=$!
  wait_up "http://127.0.0.1:$port/health" $spid || { cat "$work/serve.out"; fail "$cmd did not come up"; }
  stop $spid || fail "$cmd did not exit cleanly on SIGTERM"
done

# gsb service: the unit it would install runs the gsbd the wheel carries
pkg=$(python -c "import gsb, os; print(os.path.dirname(gsb.__file__))")
unit=$(gsb service install --dry-run --unit-dir "$work/units")
grep -q "^ExecStart=$pkg/bin/gsbd" <<<"$unit" || { echo "$unit"; fail "gsb service install --dry-run names another gsbd"; }
# gsb bench-bridge --quick (docs/REMOTE.md): its own gsbd, small sizes, nothing judged
gsb bench-bridge --quick | grep -q "StandardScaler fit_transform" || fail "gsb bench-bridge --quick"
echo "gsb and gsbd: version, info, serve, health (5 URL forms), models (GSB_URL), logs, service,"
echo "  bench-bridge"

echo "test-wheel: ok ($wheel)"
