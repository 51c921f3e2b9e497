/*
 * cpu_kernel.c - the CPU backend's kernel op: K (n x m) = kernel(X[i], Y[j])
 * for the SVM kernels (kind 0 linear, 1 poly, 2 rbf, 3 sigmoid), as libsvm
 * defines them.
 *
 * Two paths, chosen by the number of rows of X:
 *  - a few rows (the SMO solver asks for one kernel row at a time): direct
 *    loops, parallel over blocks of Y, each pair one pass over the features
 *    accumulating in double, rbf as sum (x - y)^2 (exact, no cancellation,
 *    as libsvm's own prediction path).  Such a call is bound by reading Y
 *    once, which a GEMM cannot beat, and it needs no row norms of Y, which
 *    would double that reading on every call.
 *  - many rows (prediction, cross-kernels): X Y^T by GEMM in double
 *    (float32 blocks upcast: the CPU backend accumulates in double), one
 *    tile per task of an OpenMP region with BLAS made serial
 *    (gsb__cpu_blas_serial_begin), then the elementwise map on the tile
 *    while it is in cache; rbf from ||x||^2 + ||y||^2 - 2 x.y with the norms
 *    in double and the result clamped at 0, as libsvm's training kernel
 *    computes it.
 * Tiles are fixed by the sizes, not the thread count, so results do not
 * depend on the number of threads.
 *
 * The file is a template: the first pass holds the dtype-independent code
 * and includes this file again with T = float and T = double.
 */
#ifndef GSB_CPU_KERNEL_BODY

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/kernel_map.h"
#include "core/error.h"

/* At most this many rows of X take the direct path. */
#define KER_DIRECT_ROWS 8
/* Columns (rows of Y) per task, and bytes of one GEMM tile of K. */
#define KER_COL_BLOCK ((int64_t)512)
#define KER_TILE_BYTES ((int64_t)512 << 10)
/* Below this much work (multiply-adds) a parallel region costs more.  The
 * direct path serves the solver one kernel row per iteration: a region
 * there must carry enough work to pay for its barrier even when the cores
 * are shared (measured: 2 threads on a loaded 2-core machine made 80k
 * multiply-add rows 12x slower than 1 thread). */
#define KER_PAR_MIN ((int64_t)1 << 22)
#define KER_DIRECT_PAR_MIN ((int64_t)1 << 20)


/* ---- the generic bodies, once per float dtype --------------------------- */

#define GSB_CPU_KERNEL_BODY
#define T float
#define SFX(name) name##_f32
#define T_IS_F64 0
#include "cpu_kernel.c"
#undef T
#undef SFX
#undef T_IS_F64

#define T double
#define SFX(name) name##_f64
#define T_IS_F64 1
#include "cpu_kernel.c"
#undef T
#undef SFX
#undef T_IS_F64
#undef GSB_CPU_KERNEL_BODY

/* ---- the op ---------------------------------------------------------------- */

int gsb__cpu_kernel(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y, int kind,
                    double gamma, double coef0, int degree, gsb__tensor *K)
{
    (void)be;
    GSB_TRY(cpu_check(X, 0, -1, -1, "kernel", "X"));
    GSB_TRY(cpu_check(Y, X->dtype, -1, X->cols, "kernel", "Y"));
    GSB_TRY(cpu_check(K, X->dtype, X->rows, Y->rows, "kernel", "K"));
    if (kind < GSB__KER_LINEAR || kind > GSB__KER_SIGMOID)
        return gsb__err(GSB_EINTERNAL, "kernel: unknown kernel kind %d", kind);
    if (kind == GSB__KER_POLY && degree < 0)
        return gsb__err(GSB_EINVAL, "kernel: degree of polynomial kernel < 0");
    GSB_TRY(cpu_blas_dims(X->cols, Y->rows, "kernel"));
    if (X->rows == 0 || Y->rows == 0)
        return GSB_OK;
    if (X->dtype == GSB_F32)
        return kernel_f32(X, Y, kind, gamma, coef0, degree, K);
    return kernel_f64(X, Y, kind, gamma, coef0, degree, K);
}

#else /* GSB_CPU_KERNEL_BODY: generic over T, SFX, T_IS_F64 */

/* Few rows of X: each task one block of Y, each row of Y read once for all
 * rows of X. */
static void SFX(kernel_direct)(const T *X, int64_t n, const T *Y, int64_t m, int64_t d,
                               int kind, double gamma, double coef0, int degree, T *K)
{
    int64_t nb = (m + KER_COL_BLOCK - 1) / KER_COL_BLOCK;
#pragma omp parallel for if (n * m * d > KER_DIRECT_PAR_MIN) schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        int64_t j1 = cpu_min64(m, (b + 1) * KER_COL_BLOCK);
        for (int64_t j = b * KER_COL_BLOCK; j < j1; j++) {
            const T *y = Y + j * d;
            for (int64_t i = 0; i < n; i++) {
                double v = kind == GSB__KER_RBF ? SFX(cpu_sqdist)(X + i * d, y, d)
                                           : SFX(cpu_dot)(X + i * d, y, d);
                K[i * m + j] = (T)gsb__ker_map(kind, v, gamma, coef0, degree);
            }
        }
    }
}

/* Many rows of X: per task one (X block, Y block) tile, its dot products by
 * one serial double GEMM into the task's tile, then mapped into K. */
static int SFX(kernel_gemm)(const T *X, int64_t n, const T *Y, int64_t m, int64_t d, int kind,
                            double gamma, double coef0, int degree, T *K)
{
    double *xn = NULL, *yn = NULL;
    if (kind == GSB__KER_RBF) {
        xn = cpu_alloc(n, sizeof *xn);
        yn = cpu_alloc(m, sizeof *yn);
        if (!xn || !yn) {
            free(xn);
            free(yn);
            return gsb__err(GSB_ENOMEM, "kernel: out of memory for %lld row norms",
                            (long long)(n + m));
        }
#pragma omp parallel for if ((n + m) * d > KER_PAR_MIN) schedule(static)
        for (int64_t i = 0; i < n + m; i++) {
            if (i < n)
                xn[i] = SFX(cpu_dot)(X + i * d, X + i * d, d);
            else
                yn[i - n] = SFX(cpu_dot)(Y + (i - n) * d, Y + (i - n) * d, d);
        }
    }
    int64_t by = cpu_min64(m, KER_COL_BLOCK);
    int64_t bx = cpu_min64(n, cpu_max64(16, KER_TILE_BYTES / (by * (int64_t)sizeof(double))));
    int64_t nbx = (n + bx - 1) / bx, nby = (m + by - 1) / by;
    int oom = 0;
    gsb__cpu_blas_serial_begin();
#pragma omp parallel if (n * m * (d + 1) > KER_PAR_MIN)
    {
        double *tile = cpu_alloc(bx * by, sizeof *tile);
        double *xs = T_IS_F64 ? NULL : cpu_alloc(bx * d, sizeof *xs);
        double *ys = T_IS_F64 ? NULL : cpu_alloc(by * d, sizeof *ys);
        int ok = tile && (T_IS_F64 || (xs && ys));
        if (!ok) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 1) collapse(2)
        for (int64_t bi = 0; bi < nbx; bi++)
            for (int64_t bj = 0; bj < nby; bj++) {
                if (!ok)
                    continue;
                int64_t i0 = bi * bx, j0 = bj * by;
                int64_t rows = cpu_min64(bx, n - i0), cols = cpu_min64(by, m - j0);
                /* float32 blocks upcast: the CPU backend accumulates in double */
                const double *xb = SFX(cpu_block_f64)(X + i0 * d, rows * d, xs);
                const double *yb = SFX(cpu_block_f64)(Y + j0 * d, cols * d, ys);
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)cols,
                            (int)d, 1.0, xb, (int)d, yb, (int)d, 0.0, tile, (int)cols);
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t c = 0; c < cols; c++) {
                        double v = tile[r * cols + c];
                        if (kind == GSB__KER_RBF) {
                            v = xn[i0 + r] + yn[j0 + c] - 2.0 * v;
                            v = v > 0.0 ? v : 0.0;
                        }
                        K[(i0 + r) * m + j0 + c] = (T)gsb__ker_map(kind, v, gamma, coef0, degree);
                    }
            }
        free(tile);
        free(xs);
        free(ys);
    }
    gsb__cpu_blas_serial_end();
    free(xn);
    free(yn);
    if (oom)
        return gsb__err(GSB_ENOMEM, "kernel: out of memory for %lld x %lld tiles",
                        (long long)bx, (long long)by);
    return GSB_OK;
}

static int SFX(kernel)(const gsb__tensor *Xt, const gsb__tensor *Yt, int kind, double gamma,
                       double coef0, int degree, gsb__tensor *Kt)
{
    const T *X = Xt->data, *Y = Yt->data;
    T *K = Kt->data;
    int64_t n = Xt->rows, m = Yt->rows, d = Xt->cols;
    if (n <= KER_DIRECT_ROWS || d == 0) {
        SFX(kernel_direct)(X, n, Y, m, d, kind, gamma, coef0, degree, K);
        return GSB_OK;
    }
    return SFX(kernel_gemm)(X, n, Y, m, d, kind, gamma, coef0, degree, K);
}

#endif /* GSB_CPU_KERNEL_BODY */
