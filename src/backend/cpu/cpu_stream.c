/*
 * cpu_stream.c - the CPU twins of the streaming and device-array ops:
 * axpy, row_scale, the staging ring (stage_open/fill/acquire/release/close),
 * strided_copy and copy_stats (the ring's copies).  The CUDA ops (cuda_stream.cu) are tested against these.
 *
 * The ring's buffers are host memory and a fill copies at once, so acquire
 * and release have nothing to order: a streamed fit on the CPU backend (a
 * session with memory_cap, docs/CUDA.md) runs the same batches through the
 * same calls as on the GPU, which is how CI tests the batching without one.
 */
#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "core/tensor.h"

/* ---- axpy ------------------------------------------------------------------- */

int gsb__cpu_axpy(const gsb__backend *be, double alpha, const gsb__tensor *x, gsb__tensor *y)
{
    (void)be;
    GSB_TRY(cpu_check(x, 0, -1, -1, "axpy", "x"));
    GSB_TRY(cpu_check(y, x->dtype, x->rows, x->cols, "axpy", "y"));
    int64_t n = gsb__tensor_numel(x);
    /* BLAS takes an int count: long vectors go in pieces */
    for (int64_t off = 0; off < n; off += INT_MAX) {
        int len = (int)cpu_min64(n - off, INT_MAX);
        if (x->dtype == GSB_F64)
            cblas_daxpy(len, alpha, (const double *)x->data + off, 1, (double *)y->data + off,
                        1);
        else
            cblas_saxpy(len, (float)alpha, (const float *)x->data + off, 1,
                        (float *)y->data + off, 1);
    }
    return GSB_OK;
}

/* ---- row_scale -------------------------------------------------------------- */

int gsb__cpu_row_scale(const gsb__backend *be, gsb__tensor *X, const gsb__tensor *s)
{
    (void)be;
    GSB_TRY(cpu_check(X, 0, -1, -1, "row_scale", "X"));
    GSB_TRY(cpu_check_vec(s, GSB_F64, X->rows, "row_scale", "s"));
    int64_t n = X->rows, d = X->cols;
    const double *f = s->data;
#pragma omp parallel for if (n * d > (1 << 18)) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        if (X->dtype == GSB_F64) {
            double *row = (double *)X->data + i * d;
            for (int64_t j = 0; j < d; j++)
                row[j] *= f[i];
        } else {
            float *row = (float *)X->data + i * d;
            for (int64_t j = 0; j < d; j++)
                row[j] = (float)((double)row[j] * f[i]);
        }
    }
    return GSB_OK;
}

/* ---- the staging ring ------------------------------------------------------- */

struct gsb__stage {
    size_t bytes;
    int nbuf;
    void *buf[GSB__STAGE_MAX_BUFFERS];
    size_t pending[GSB__STAGE_MAX_BUFFERS]; /* bytes of k's fill, counted at acquire */
    int unread[GSB__STAGE_MAX_BUFFERS];     /* k was filled and not acquired since */
};

int gsb__cpu_stage_open(const gsb__backend *be, size_t bytes, int nbuf, gsb__stage **out)
{
    (void)be;
    *out = NULL;
    if (nbuf < 1 || nbuf > GSB__STAGE_MAX_BUFFERS)
        return gsb__err(GSB_EINTERNAL, "stage_open: %d buffers (1..%d)", nbuf,
                        GSB__STAGE_MAX_BUFFERS);
    gsb__stage *st = calloc(1, sizeof *st);
    if (!st)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    st->bytes = bytes;
    st->nbuf = nbuf;
    for (int k = 0; k < nbuf; k++)
        if (posix_memalign(&st->buf[k], 256, bytes ? bytes : 1) != 0) {
            gsb__cpu_stage_close(be, st);
            return gsb__err(GSB_ENOMEM, "out of host memory allocating %zu bytes of staging",
                            bytes);
        }
    *out = st;
    return GSB_OK;
}

static int check_buffer(const gsb__stage *st, int k, const char *op)
{
    if (!st || k < 0 || k >= st->nbuf)
        return gsb__err(GSB_EINTERNAL, "%s: no buffer %d", op, k);
    return GSB_OK;
}

/* memcpy on every core for large ranges (one thread reaches a fraction of
 * the memory bandwidth) */
static void copy_bytes(void *dst, const void *src, size_t n)
{
    const size_t block = (size_t)4 << 20;
    int64_t blocks = (int64_t)((n + block - 1) / block);
#pragma omp parallel for schedule(static) if (blocks > 2)
    for (int64_t b = 0; b < blocks; b++) {
        size_t off = (size_t)b * block;
        memcpy((char *)dst + off, (const char *)src + off, n - off < block ? n - off : block);
    }
}

/* the ring's copies, for copy_stats: on the CPU backend the only "uploads"
 * that move memory, so tests can see that a fit streamed (a fill counts when
 * it is acquired, as on the GPU) */
static _Atomic uint64_t staged_count, staged_bytes;

int gsb__cpu_copy_stats(const gsb__backend *be, gsb__copy_stats *out)
{
    (void)be;
    memset(out, 0, sizeof *out);
    out->h2d_count = atomic_load(&staged_count);
    out->h2d_bytes = atomic_load(&staged_bytes);
    return GSB_OK;
}

int gsb__cpu_stage_fill(const gsb__backend *be, gsb__stage *st, int k, const gsb__stage_seg *segs,
                        int nseg)
{
    (void)be;
    GSB_TRY(check_buffer(st, k, "stage_fill"));
    for (int i = 0; i < nseg; i++) {
        if (segs[i].offset > st->bytes || segs[i].bytes > st->bytes - segs[i].offset)
            return gsb__err(GSB_EINTERNAL, "stage_fill: %zu bytes at %zu overflow the %zu-byte "
                            "buffer", segs[i].bytes, segs[i].offset, st->bytes);
        if (segs[i].bytes && !segs[i].host)
            return gsb__err(GSB_EINTERNAL, "stage_fill: no host memory");
    }
    size_t total = 0;
    for (int i = 0; i < nseg; i++)
        if (segs[i].bytes) {
            copy_bytes((char *)st->buf[k] + segs[i].offset, segs[i].host, segs[i].bytes);
            total += segs[i].bytes;
        }
    st->pending[k] = total;
    st->unread[k] = 1;
    return GSB_OK;
}

int gsb__cpu_stage_acquire(const gsb__backend *be, gsb__stage *st, int k, void **dev)
{
    (void)be;
    *dev = NULL;
    GSB_TRY(check_buffer(st, k, "stage_acquire"));
    *dev = st->buf[k];
    if (st->unread[k]) { /* counted when used, as the CUDA ring counts */
        atomic_fetch_add(&staged_count, 1);
        atomic_fetch_add(&staged_bytes, st->pending[k]);
    }
    st->unread[k] = 0;
    return GSB_OK;
}

int gsb__cpu_stage_release(const gsb__backend *be, gsb__stage *st, int k)
{
    (void)be;
    return check_buffer(st, k, "stage_release");
}

void gsb__cpu_stage_close(const gsb__backend *be, gsb__stage *st)
{
    (void)be;
    if (!st)
        return;
    for (int k = 0; k < st->nbuf; k++)
        free(st->buf[k]);
    free(st);
}

/* ---- strided_copy ------------------------------------------------------------ */

int gsb__cpu_strided_copy(const gsb__backend *be, const void *src, gsb_dtype dtype, int64_t s0,
                          int64_t s1, gsb__tensor *dst)
{
    (void)be;
    if (!dst || !dst->data || gsb_dtype_size(dst->dtype) == 0 || gsb_dtype_size(dtype) == 0)
        return gsb__err(GSB_EINTERNAL, "strided_copy: bad arguments");
    int64_t rows = dst->rows, cols = dst->cols;
    if (rows * cols > 0 && !src)
        return gsb__err(GSB_EINTERNAL, "strided_copy: no source");
    gsb__tensor_gather_strided(dst, rows, cols, src, dtype, s0, s1);
    return GSB_OK;
}
