/*
 * cpu_sparse.c - the CPU backend's csr_spmm: a sparse matrix in CSR form
 * times a dense one (backend.h states the contract).  Rows of the result
 * are independent, so OpenMP threads take them in static chunks; each
 * element is summed in double in the order of its row's entries, whatever
 * the thread count.
 */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "core/error.h"

/* Multiply-adds below which a product stays on one thread (a Lanczos
 * step on a small graph is microseconds of work). */
#define SPMM_PAR_MIN_WORK ((int64_t)1 << 16)

static int check_args(const gsb__tensor *indptr, const gsb__tensor *indices,
                      const gsb__tensor *val, const gsb__tensor *X, const gsb__tensor *Y)
{
    const char *op = "csr_spmm";
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    GSB_TRY(cpu_check(Y, X->dtype, -1, X->cols, op, "Y"));
    GSB_TRY(cpu_check_vec(indptr, GSB_I64, Y->rows + 1, op, "indptr"));
    GSB_TRY(cpu_check(indices, GSB_I32, -1, -1, op, "indices"));
    return cpu_check_vec(val, X->dtype, indices->rows * indices->cols, op, "val");
}

/* The row's entries [lo, hi) clipped to [0, nnz) */
static void row_range(const int64_t *ptr, int64_t i, int64_t nnz, int64_t *lo, int64_t *hi)
{
    *lo = cpu_clamp64(ptr[i], 0, nnz);
    *hi = cpu_clamp64(ptr[i + 1], *lo, nnz);
}

/* row i of Y, for each dtype */
#define DEFINE_ROW(SUF, T)                                                                  \
    static void row_##SUF(const int64_t *ptr, const int32_t *col, const T *v, int64_t nnz,  \
                          const T *x, int64_t n, int64_t k, int64_t i, T *y)                \
    {                                                                                       \
        int64_t lo, hi;                                                                     \
        row_range(ptr, i, nnz, &lo, &hi);                                                   \
        for (int64_t c = 0; c < k; c++) {                                                   \
            double s = 0.0;                                                                 \
            for (int64_t e = lo; e < hi; e++) {                                             \
                int64_t j = col[e];                                                         \
                s += j >= 0 && j < n ? (double)v[e] * (double)x[j * k + c] : NAN;           \
            }                                                                               \
            y[i * k + c] = (T)s;                                                            \
        }                                                                                   \
    }
DEFINE_ROW(f32, float)
DEFINE_ROW(f64, double)

int gsb__cpu_csr_spmm(const gsb__backend *be, const gsb__tensor *indptr,
                      const gsb__tensor *indices, const gsb__tensor *val, const gsb__tensor *X,
                      gsb__tensor *Y)
{
    (void)be;
    GSB_TRY(check_args(indptr, indices, val, X, Y));
    const int64_t nnz = indices->rows * indices->cols, m = Y->rows, n = X->rows, k = X->cols;
    const int64_t *ptr = indptr->data;
    const int32_t *col = indices->data;
    const int f64 = X->dtype == GSB_F64;
#pragma omp parallel for schedule(static) if (nnz * k > SPMM_PAR_MIN_WORK)
    for (int64_t i = 0; i < m; i++) {
        if (f64)
            row_f64(ptr, col, val->data, nnz, X->data, n, k, i, Y->data);
        else
            row_f32(ptr, col, val->data, nnz, X->data, n, k, i, Y->data);
    }
    return GSB_OK;
}
