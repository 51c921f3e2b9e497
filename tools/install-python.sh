#!/usr/bin/env bash
# install-python.sh - pip-install gsb (scikit-build-core builds libgsb into the
# package) and the optional cuml shim, plus what the tests use (matplotlib: the
# bench pictures and the clustering example; polars: set_output="polars"; umap-learn:
# the reference of the UMAP tests and benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="python3 -m pip"
$PIP --version >/dev/null 2>&1 || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null
}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
# --break-system-packages: a distribution's own python refuses plain pip installs
flags=""
$PIP install --help 2>/dev/null | grep -q -- --break-system-packages && flags="--break-system-packages"
$PIP install -q $flags "numpy>=1.22" "scikit-learn>=1.3" pytest pandas matplotlib polars
# gsb.dask and its tests (tests/python/test_dask.py: a LocalCluster of worker processes)
$PIP install -q $flags "dask[array,dataframe]>=2024.8" "distributed>=2024.8"
# UMAP's reference library (tests/python/test_parity_umap.py, bench/compare.py)
$PIP install -q $flags "umap-learn==0.5.12"
$PIP install -q $flags --force-reinstall --no-deps . ./python/cuml_shim
