/*
 * comm.h - the communicator of a multi-device session: collectives over the
 * ranks (devices) of one process, driven from one host thread.
 *
 * A multi-device fit (multidev/) computes each device's partial statistics
 * on that device, then combines them here.  Every collective takes one host
 * buffer per rank (bufs[r] for rank r, all of `count` elements of dtype)
 * and returns when every rank's result is back in its host buffer: the
 * statistics are small (a few KB to MB), so a host-facing interface keeps
 * the fits' code identical for every transport.  Two implementations:
 *   host  (backend/comm_host.c): plain memory, ranks combined in rank order;
 *         the cpu:N test mode and the reference the NCCL one is tested against;
 *   nccl  (backend/cuda/cuda_nccl.cu, in the CUDA plugin): each rank's
 *         buffer staged in its GPU's memory, one NCCL call per rank inside
 *         ncclGroupStart/End (single-process ncclCommInitAll), copied back.
 * Results are identical on every rank (both transports guarantee it).
 * Errors: a status with the thread's message (gsb__err / the plugin's err).
 */
#ifndef GSB_BACKEND_COMM_H
#define GSB_BACKEND_COMM_H

#include <stdint.h>

#include "gsb.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gsb__comm gsb__comm;

typedef struct gsb__comm_ops {
    /* in place: every bufs[r] becomes the elementwise sum over the ranks
     * (GSB_F32, GSB_F64, GSB_I32, GSB_I64) */
    int (*allreduce_sum)(gsb__comm *c, void *const *bufs, int64_t count, gsb_dtype dtype);
    /* recv[r] (nranks * count elements) becomes send[0] | send[1] | ... */
    int (*allgather)(gsb__comm *c, const void *const *send, void *const *recv, int64_t count,
                     gsb_dtype dtype);
    /* every bufs[r] becomes bufs[root] */
    int (*broadcast)(gsb__comm *c, void *const *bufs, int64_t count, gsb_dtype dtype, int root);
    void (*destroy)(gsb__comm *c);
    /* the transport's own all-reduce (sum) of count elements already in each
     * rank's memory (no host copies), timed: *seconds per all-reduce, the
     * mean of iters after one warm-up (bench/comm_bandwidth.c).  NULL for
     * the host communicator. */
    int (*time_allreduce)(gsb__comm *c, int64_t count, gsb_dtype dtype, int iters,
                          double *seconds);
} gsb__comm_ops;

struct gsb__comm {
    const gsb__comm_ops *ops;
    int nranks;
    const char *name; /* "host", "nccl" */
    void *impl;
};

/* The host communicator over nranks ranks (backend/comm_host.c). */
int gsb__comm_host_open(int nranks, gsb__comm **out);

/* Element sizes of the dtypes a communicator carries (0: not carried). */
static inline size_t gsb__comm_dtype_size(gsb_dtype dt)
{
    return dt == GSB_F32 || dt == GSB_I32 ? 4 : dt == GSB_F64 || dt == GSB_I64 ? 8 : 0;
}

/*
 * The NCCL communicator, exported by the CUDA plugin as
 * GSB__COMM_OPEN_SYMBOL: one rank per backend of bes (devices opened with
 * GSB__BACKEND_OPEN_DEVICE_SYMBOL, distinct).  nccl_path: the library to
 * dlopen first ($GSB_NCCL_LIBRARY), or NULL.  GSB_EUNSUPPORTED with the
 * reason in why when NCCL cannot be loaded.
 */
struct gsb__backend;
typedef int (*gsb__comm_open_fn)(const struct gsb__backend *const *bes, int n,
                                 const char *nccl_path, gsb__comm **out, char *why,
                                 size_t why_len);
#define GSB__COMM_OPEN_SYMBOL "gsb_nccl_comm_open"

#ifdef __cplusplus
}
#endif

#endif
