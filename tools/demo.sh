#!/usr/bin/env bash
# demo.sh - the main job: the original project's quick start (import cuml,
# fit, save / load / list_saved) on gsb, next to scikit-learn, first on the
# embedded default, then through a local gsbd that this script starts itself
# (the bridge, over a Unix socket), then the same models from C.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/install-python.sh >/dev/null
export GSB_DATA_DIR=${GSB_DATA_DIR:-$PWD/build/demo-data}
echo "== Python: the original quick start on gsb (embedded engine)"
(cd examples && python3 quickstart.py)
echo
echo "== Python: the same quick start through the bridge (a gsbd started here)"
sock_dir=$(mktemp -d)
python3 -m gsb.server --listen "unix://$sock_dir/gsbd.sock" --data-dir "$GSB_DATA_DIR/gsbd" \
  --log-level warn &
gsbd_pid=$!
trap 'kill -TERM $gsbd_pid 2>/dev/null; wait $gsbd_pid 2>/dev/null; rm -rf "$sock_dir"' EXIT
for _ in $(seq 100); do [ -S "$sock_dir/gsbd.sock" ] && break; sleep 0.1; done
(cd examples && GSB_URL="unix://$sock_dir/gsbd.sock" python3 quickstart.py)
echo
echo "== C: the same models through include/gsb.h"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target gsb_demo gsb_cli >/dev/null
build/gsb info
echo
build/gsb_demo
