/*
 * bench_bridge.c - the bridge benchmark as its own program; the same code is
 * `gsb bench-bridge` (src/cli/bench_bridge.c, built with this file).
 *
 *   bench_bridge [--url URL]... [--device auto|cpu|cuda] [--quick] [--json FILE]
 */
#include "cli/bench_bridge.h"

int main(int argc, char **argv) { return gsb__cli_bench_bridge(argc, argv); }
