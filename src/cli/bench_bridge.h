/*
 * bench_bridge.h - `gsb bench-bridge`: the bridge benchmark (bench/bench_bridge.c
 * is the same program as its own executable).  Public API only.
 */
#ifndef GSB_CLI_BENCH_BRIDGE_H
#define GSB_CLI_BENCH_BRIDGE_H

#include <stddef.h>

/* argc/argv as main's: argv[0] names the program or the command ("bench-bridge"),
 * options follow.  Returns the process exit status (0: ran; 1: failed; 2: usage). */
int gsb__cli_bench_bridge(int argc, char **argv);

/* bench_rawtcp.c: best GB/s of reps transfers of bytes from src over one plain
 * TCP loopback connection (the machine's ceiling for the "tcp loopback" row);
 * 0, or -1 with a line on stderr. */
int gsb__cli_raw_tcp_gbs(const void *src, size_t bytes, int reps, double *best_gbs);

#endif
