#!/usr/bin/env bash
# install-deps.sh - install what building and testing gsb needs (Debian/Ubuntu).
# Skips apt-get when everything is already there, so repeated runs are fast.
set -euo pipefail
# OpenBLAS's OpenMP build: BLAS shares the engine's OpenMP threads (one pool; the
# pthreads build of libopenblas-dev would keep a second). Beside an installed
# pthreads build, CMake still picks this one (cmake/openblas.cmake).
pkgs=(build-essential cmake pkg-config libopenblas-openmp-dev liblapacke-dev libjansson-dev
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
