/*
 * bench_bridge.h - `gsb bench-bridge`: the bridge benchmark (bench/bench_bridge.c
 * is the same program as its own executable).  Public API only.
 */
#ifndef GSB_CLI_BENCH_BRIDGE_H
#define GSB_CLI_BENCH_BRIDGE_H

/* argc/argv as main's: argv[0] names the program or the command ("bench-bridge"),
 * options follow.  Returns the process exit status (0: ran; 1: failed; 2: usage). */
int gsb__cli_bench_bridge(int argc, char **argv);

#endif
