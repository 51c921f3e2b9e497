#!/usr/bin/env bash
# install-deps.sh - install what building and testing gsb needs (Debian/Ubuntu).
# Skips apt-get when everything is already there, so repeated runs are fast.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-dev liblapacke-dev libjansson-dev
      libsqlite3-dev systemd util-linux python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
