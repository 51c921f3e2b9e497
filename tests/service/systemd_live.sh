#!/usr/bin/env bash
# systemd_live.sh - `gsb service install` against a real systemd user manager:
# the unit starts gsbd, and after kill -9 systemd starts it again
# (test_service's test_live_systemd, run with GSB_TEST_SYSTEMD=1).
#
#   tests/service/systemd_live.sh [BUILD_DIR]     (default: build; needs test_service and gsbd built)
#
# Where systemd runs (a desktop, WSL2 with systemd) it uses your user manager
# (the test unit has its own name and socket, and is removed afterwards).
# Where it does not (CI containers), it starts a private `systemd --user` in a
# mount namespace of its own (unshare -m, as root), with /run/systemd/system
# on a private tmpfs so systemd believes it was booted, and config and runtime
# directories in a temporary directory: nothing outside is touched.  Prints
# "skip" and succeeds when neither is possible.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "${1:-build}" && pwd)
test_bin=$build/test_service
[ -x "$test_bin" ] && [ -x "$build/gsbd" ] || {
  echo "systemd_live: build test_service and gsbd in $build first" >&2; exit 1; }

if [ -d /run/systemd/system ] && systemctl --user is-system-running >/dev/null 2>&1; then
  echo "systemd_live: using this user's systemd"
  out=$(GSB_TEST_SYSTEMD=1 "$test_bin")
  echo "$out" | grep -E "live systemd|passed"
  grep -q "^ok   test_live_systemd" <<<"$out" && ! grep -q "^skip test_live_systemd" <<<"$out"
  exit
fi

sd=""
for c in /usr/lib/systemd/systemd /lib/systemd/systemd; do [ -x "$c" ] && sd=$c && break; done
if [ -z "$sd" ] || [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || ! command -v systemctl >/dev/null; then
  echo "systemd_live: skip (no systemd here, and a private one needs root, unshare and systemd installed)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -m 700 "$tmp/run" "$tmp/config"
if ! unshare -m --propagation private true 2>/dev/null; then
  echo "systemd_live: skip (unshare -m is not allowed here)"
  exit 0
fi
echo "systemd_live: a private systemd --user in a mount namespace"
export TEST_BIN=$test_bin SD=$sd TMPD=$tmp
unshare -m --propagation private bash -c '
  set -u
  mount -t tmpfs tmpfs /run/systemd 2>/dev/null || { mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd; } || exit 90
  mkdir -p /run/systemd/system
  export XDG_RUNTIME_DIR=$TMPD/run XDG_CONFIG_HOME=$TMPD/config
  "$SD" --user --log-target=console > "$TMPD/systemd.log" 2>&1 &
  sd_pid=$!
  for i in $(seq 100); do systemctl --user is-system-running >/dev/null 2>&1 && break; sleep 0.1; done
  GSB_TEST_SYSTEMD=1 "$TEST_BIN" > "$TMPD/test.out" 2>&1
  rc=$?
  kill -TERM "$sd_pid"; wait "$sd_pid"
  exit $rc
' && rc=0 || rc=$?
if [ $rc = 90 ]; then
  echo "systemd_live: skip (cannot mount a private /run/systemd)"
  exit 0
fi
grep -E "live systemd|test_live_systemd|passed|FAIL|check failed" "$tmp/test.out" || true
if [ $rc != 0 ] || ! grep -q "^live systemd:" "$tmp/test.out"; then
  echo "systemd_live: FAILED (systemd's log follows)" >&2
  tail -30 "$tmp/systemd.log" >&2
  exit 1
fi
echo "systemd_live: ok"
