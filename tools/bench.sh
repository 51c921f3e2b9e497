#!/usr/bin/env bash
# bench.sh - build gsb and compare its CPU backend with scikit-learn: prints a
# markdown table (paste it into bench/RESULTS.md with the date) and draws it
# (bench/plot.py) into bench/ratios-*.png when matplotlib is installed.
# Arguments go to bench/compare.py (--suite small|cpu|gpu, --session, --cases ...).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
python3 -c "import sklearn, numpy" 2>/dev/null || python3 -m pip install -q scikit-learn numpy
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target bench_gsb >/dev/null
json=build/bench-results.json
python3 bench/compare.py --bench build/bench_gsb --json "$json" "$@"
if python3 -c "import matplotlib" 2>/dev/null; then
  echo "picture: $(python3 bench/plot.py "$json")"
else
  echo "(no matplotlib: \`pip install matplotlib\`, then \`python3 bench/plot.py $json\` draws it)"
fi
