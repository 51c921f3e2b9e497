/*
 * bench_comm.c - the measured bandwidth of the multi-device communicator's
 * all-reduce (NCCL over every visible GPU, docs/MULTIGPU.md): buffers already
 * in GPU memory, no host copies, so over NVLink where the GPUs have it.
 * bench/multigpu.py runs it to set each fit's collective time against what
 * the link moves.  Prints one JSON object per size:
 *   {"ranks": n, "bytes": per-rank bytes, "seconds": per all-reduce,
 *    "algbw": bytes / seconds, "busbw": algbw * 2 (n - 1) / n}  (GB/s, NCCL's
 * nccl-tests definitions; busbw is what the slowest link carries).
 *
 *   bench_comm [MAX_MIB]      sizes 8 KiB .. MAX_MIB (default 256), float32
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/comm.h"
#include "gsb.h"

#define MAX_RANKS 16

int main(int argc, char **argv)
{
    long max_mib = argc > 1 ? strtol(argv[1], NULL, 10) : 256;
    int n = gsb__cuda_device_count();
    if (n < 1 || max_mib < 1) {
        fprintf(stderr, "bench_comm: %s\n", n < 1 ? gsb__cuda_unavailable_reason()
                                                  : "MAX_MIB must be >= 1");
        return 1;
    }
    n = n < MAX_RANKS ? n : MAX_RANKS;
    const gsb__backend *bes[MAX_RANKS];
    for (int r = 0; r < n; r++)
        if (gsb__cuda_backend_device(r, &bes[r]) != GSB_OK) {
            fprintf(stderr, "bench_comm: %s\n", gsb_errmsg());
            return 1;
        }
    gsb__comm *c = NULL;
    if (gsb__nccl_comm_open(bes, n, &c) != GSB_OK || !c->ops->time_allreduce) {
        fprintf(stderr, "bench_comm: %s\n", c ? "no timed all-reduce" : gsb_errmsg());
        if (c)
            c->ops->destroy(c);
        return 1;
    }
    int rc = 0;
    for (long bytes = 8 << 10; bytes <= max_mib << 20 && rc == 0; bytes *= 8) {
        double s = 0;
        int iters = bytes >= (16 << 20) ? 20 : 100;
        if (c->ops->time_allreduce(c, bytes / 4, GSB_F32, iters, &s) != GSB_OK) {
            fprintf(stderr, "bench_comm: %s\n", gsb_errmsg());
            rc = 1;
            break;
        }
        double alg = s > 0 ? (double)bytes / s / 1e9 : 0;
        printf("{\"ranks\": %d, \"bytes\": %ld, \"seconds\": %.9f, \"algbw\": %.2f, "
               "\"busbw\": %.2f}\n", n, bytes, s, alg, alg * 2.0 * (n - 1) / n);
    }
    c->ops->destroy(c);
    return rc;
}
