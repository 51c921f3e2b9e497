/*
 * tensor.h - helpers around gsb__tensor: allocation on a backend, host
 * tensors, moving between backends, and reading small tensors on the host.
 */
#ifndef GSB_CORE_TENSOR_H
#define GSB_CORE_TENSOR_H

#include <stddef.h>

#include "backend/backend.h"

/* An empty tensor: data NULL, nothing to release. */
#define GSB__TENSOR_NONE ((gsb__tensor){0})

static inline int64_t gsb__tensor_numel(const gsb__tensor *t) { return t->rows * t->cols; }
static inline size_t gsb__tensor_nbytes(const gsb__tensor *t)
{
    return (size_t)gsb__tensor_numel(t) * gsb_dtype_size(t->dtype);
}
static inline int gsb__is_float(gsb_dtype d) { return d == GSB_F32 || d == GSB_F64; }

/* Allocate rows x cols of dtype on be (contents undefined). */
int gsb__tensor_alloc(const gsb__backend *be, gsb_dtype dtype, int64_t rows, int64_t cols,
                      gsb__tensor *out);
/* Allocate and fill with zeros. */
int gsb__tensor_zeros(const gsb__backend *be, gsb_dtype dtype, int64_t rows, int64_t cols,
                      gsb__tensor *out);
/* Mark as a 1-D vector for users (rows x 1 or 1 x cols become n x 1). */
static inline void gsb__tensor_as_1d(gsb__tensor *t)
{
    t->rows = t->rows * t->cols;
    t->cols = 1;
    t->ndim = 1;
}
/* Release if owned and reset to GSB__TENSOR_NONE; safe on NONE. */
void gsb__tensor_free(gsb__tensor *t);

/* Rows [r0, r0 + rows) of row-major t (any backend), borrowed: not owned. */
static inline gsb__tensor gsb__tensor_rows(const gsb__tensor *t, int64_t r0, int64_t rows)
{
    gsb__tensor v = *t;
    v.data = (char *)t->data + (size_t)r0 * (size_t)t->cols * gsb_dtype_size(t->dtype);
    v.rows = rows;
    v.owned = 0;
    return v;
}

/* A tensor borrowing host memory on the CPU backend (not owned). */
gsb__tensor gsb__tensor_host_view(void *data, gsb_dtype dtype, int64_t rows, int64_t cols);

/*
 * Make src available on backend be: a borrowed view when src already lives
 * there (no copy), else an owned copy.  Free the result with gsb__tensor_free.
 */
int gsb__tensor_to(const gsb__backend *be, const gsb__tensor *src, gsb__tensor *out);
/* Like gsb__tensor_to but also converts to dtype (a copy when it differs). */
int gsb__tensor_to_dtype(const gsb__backend *be, const gsb__tensor *src, gsb_dtype dtype,
                         gsb__tensor *out);
/* Owned host copy of src (for results and fitted attributes). */
int gsb__tensor_to_host(const gsb__tensor *src, gsb__tensor *out);

/* Read element i of a host tensor of any dtype as double / write it. */
double gsb__tensor_get(const gsb__tensor *t, int64_t i);
void gsb__tensor_set(gsb__tensor *t, int64_t i, double v);
/* dst[i, j] (host, contiguous, rows x cols) = the dtype element at base + i * s0 + j * s1
 * bytes (strides may be negative or 0), converted as gsb__tensor_set converts. */
void gsb__tensor_gather_strided(gsb__tensor *dst, int64_t rows, int64_t cols, const void *base,
                                gsb_dtype dtype, int64_t s0, int64_t s1);

#endif
