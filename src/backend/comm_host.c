/*
 * comm_host.c - the host communicator (comm.h): collectives over host
 * buffers, ranks combined in rank order, so every rank gets bitwise the same
 * result and a run is reproducible.  The cpu:N session mode uses it, and the
 * NCCL communicator's test compares against it.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/comm.h"
#include "core/error.h"

static int check(int64_t count, gsb_dtype dtype, const char *op)
{
    if (count < 0 || gsb__comm_dtype_size(dtype) == 0)
        return gsb__err(GSB_EINTERNAL, "comm %s: bad count %lld or dtype %d", op,
                        (long long)count, (int)dtype);
    return GSB_OK;
}

#define SUM_INTO(T)                                                                    \
    do {                                                                               \
        T *acc = (T *)bufs[0];                                                         \
        for (int r = 1; r < c->nranks; r++)                                            \
            for (int64_t i = 0; i < count; i++)                                        \
                acc[i] += ((const T *)bufs[r])[i];                                     \
    } while (0)

static int host_allreduce(gsb__comm *c, void *const *bufs, int64_t count, gsb_dtype dtype)
{
    GSB_TRY(check(count, dtype, "allreduce"));
    switch (dtype) {
    case GSB_F32: SUM_INTO(float); break;
    case GSB_F64: SUM_INTO(double); break;
    case GSB_I32: SUM_INTO(int32_t); break;
    case GSB_I64: SUM_INTO(int64_t); break;
    }
    size_t bytes = (size_t)count * gsb__comm_dtype_size(dtype);
    for (int r = 1; r < c->nranks; r++)
        if (bytes)
            memcpy(bufs[r], bufs[0], bytes);
    return GSB_OK;
}

static int host_allgather(gsb__comm *c, const void *const *send, void *const *recv,
                          int64_t count, gsb_dtype dtype)
{
    GSB_TRY(check(count, dtype, "allgather"));
    size_t bytes = (size_t)count * gsb__comm_dtype_size(dtype);
    if (!bytes)
        return GSB_OK;
    for (int r = 0; r < c->nranks; r++)
        for (int q = 0; q < c->nranks; q++)
            memmove((char *)recv[r] + (size_t)q * bytes, send[q], bytes);
    return GSB_OK;
}

static int host_broadcast(gsb__comm *c, void *const *bufs, int64_t count, gsb_dtype dtype,
                          int root)
{
    GSB_TRY(check(count, dtype, "broadcast"));
    if (root < 0 || root >= c->nranks)
        return gsb__err(GSB_EINTERNAL, "comm broadcast: root %d of %d ranks", root, c->nranks);
    size_t bytes = (size_t)count * gsb__comm_dtype_size(dtype);
    for (int r = 0; r < c->nranks; r++)
        if (r != root && bytes)
            memcpy(bufs[r], bufs[root], bytes);
    return GSB_OK;
}

static void host_destroy(gsb__comm *c) { free(c); }

static const gsb__comm_ops host_ops = {host_allreduce, host_allgather, host_broadcast,
                                       host_destroy, NULL};

int gsb__comm_host_open(int nranks, gsb__comm **out)
{
    *out = NULL;
    if (nranks < 1)
        return gsb__err(GSB_EINVAL, "a communicator needs at least one rank, got %d", nranks);
    gsb__comm *c = calloc(1, sizeof *c);
    if (!c)
        return gsb__err(GSB_ENOMEM, "out of memory");
    c->ops = &host_ops;
    c->nranks = nranks;
    c->name = "host";
    *out = c;
    return GSB_OK;
}
