/*
 * cuda_tsne.cuh - what the CUDA backend's t-SNE files (cuda_tsne.cu,
 * cuda_tsne_fft.cu) share: argument checks, the Student-t kernel on the
 * device, a launch-size helper and a deterministic sum of doubles.
 */
#ifndef GSB_CUDA_TSNE_CUH
#define GSB_CUDA_TSNE_CUH

#include <stdint.h>

#include "backend/cuda/cuda_common.h"

namespace gsb_tsne {

constexpr int BLOCK = 256;
constexpr int64_t MAX_BLOCKS = (int64_t)1 << 20; /* grid-stride loops cover the rest */

static inline unsigned blocks_for(int64_t threads)
{
    int64_t b = (threads + BLOCK - 1) / BLOCK;
    return (unsigned)(b < 1 ? 1 : (b > MAX_BLOCKS ? MAX_BLOCKS : b));
}

/*
 * t must exist on this GPU with dtype and shape rows x cols (-1: any; cols
 * -2: a vector of rows elements in any layout), with data when it has
 * elements.  A mismatch is the caller's bug: GSB_EINTERNAL.
 */
static inline int check(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype,
                        int64_t rows, int64_t cols, const char *op, const char *name)
{
    if (!t)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (t->dtype != dtype)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                            gsb__cuda_dtype_name(t->dtype));
    if (t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    if (t->rows < 0 || t->cols < 0 || (!t->data && t->rows * t->cols > 0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is malformed", op, name);
    bool bad = cols == -2 ? t->rows * t->cols != rows
                          : (rows >= 0 && t->rows != rows) || (cols >= 0 && t->cols != cols);
    if (bad)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has shape (%lld, %lld), expected %lld x %lld",
                            op, name, (long long)t->rows, (long long)t->cols, (long long)rows,
                            (long long)(cols == -2 ? 1 : cols));
    return GSB_OK;
}

/* Y (n x d float32, n, d >= 1), R like Y, zsum (1 x 1 float64), dof >= 1: the
 * repulsion ops' common arguments. */
static inline int check_repulse(const gsb__backend *be, const gsb__tensor *Y, int dof,
                                const gsb__tensor *R, const gsb__tensor *zsum, const char *op)
{
    int rc = check(be, Y, GSB_F32, -1, -1, op, "Y");
    if (rc == GSB_OK && (Y->rows < 1 || Y->cols < 1))
        rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: Y is empty", op);
    if (rc == GSB_OK && dof < 1)
        rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: dof %d < 1", op, dof);
    if (rc == GSB_OK)
        rc = check(be, R, GSB_F32, Y->rows, Y->cols, op, "R");
    if (rc == GSB_OK)
        rc = check(be, zsum, GSB_F64, 1, 1, op, "zsum");
    return rc;
}

/* w = (dof / (dof + d2))^((dof + 1) / 2), 1 / (1 + d2) for dof 1 (the CPU twin's) */
__device__ __forceinline__ float student_w(float d2, int dof)
{
    if (dof == 1)
        return 1.0f / (1.0f + d2);
    return powf((float)dof / ((float)dof + d2), ((float)dof + 1.0f) * 0.5f);
}

} // namespace gsb_tsne

/*
 * *out (device) = sum of the n device doubles v, in an order fixed by n
 * alone (bitwise repeatable).  Queued on the backend's stream.
 */
int gsb__cuda_tsne_sum(const gsb__backend *be, const double *v, int64_t n, double *out);

#endif
