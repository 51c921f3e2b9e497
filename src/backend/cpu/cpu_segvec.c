/*
 * cpu_segvec.c - the CPU backend's segmented vector ops seg_dots,
 * seg_combine and seg_normalize (backend.h states the contract): dot
 * products, combinations and norms of vectors split into segments (the
 * connected components of a graph, each running its own Lanczos
 * recurrence).  Each sum in double, in element (row) order, on one thread:
 * the vectors are a graph's vertices, tens of thousands of elements.
 */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/seg_index.h"
#include "core/error.h"

/* seg (K + 1 GSB_I64) with K >= 1; *K set */
static int check_seg(const gsb__tensor *seg, const char *op, int64_t *K)
{
    GSB_TRY(cpu_check(seg, GSB_I64, -1, -1, op, "seg"));
    if (seg->rows * seg->cols < 2)
        return gsb__err(GSB_EINTERNAL, "%s: seg holds no segment", op);
    *K = seg->rows * seg->cols - 1;
    return GSB_OK;
}

int gsb__cpu_seg_dots(const gsb__backend *be, const gsb__tensor *V, const gsb__tensor *x,
                      const gsb__tensor *seg, gsb__tensor *C)
{
    (void)be;
    const char *op = "seg_dots";
    int64_t K;
    GSB_TRY(check_seg(seg, op, &K));
    GSB_TRY(cpu_check(V, GSB_F64, -1, -1, op, "V"));
    const int64_t m = V->rows, n = V->cols;
    GSB_TRY(cpu_check_vec(x, GSB_F64, n, op, "x"));
    GSB_TRY(cpu_check(C, GSB_F64, m, K, op, "C"));
    const int64_t *s = seg->data;
    const double *v = V->data, *xv = x->data;
    double *c = C->data;
    for (int64_t i = 0; i < m; i++)
        for (int64_t k = 0; k < K; k++) {
            int64_t lo, hi;
            gsb__seg_range(s, k, n, &lo, &hi);
            double sum = 0.0;
            for (int64_t e = lo; e < hi; e++)
                sum += v[i * n + e] * xv[e];
            c[i * K + k] = sum;
        }
    return GSB_OK;
}

int gsb__cpu_seg_combine(const gsb__backend *be, double alpha, const gsb__tensor *C,
                         const gsb__tensor *V, const gsb__tensor *seg, double beta,
                         gsb__tensor *Y)
{
    (void)be;
    const char *op = "seg_combine";
    int64_t K;
    GSB_TRY(check_seg(seg, op, &K));
    GSB_TRY(cpu_check(V, GSB_F64, -1, -1, op, "V"));
    const int64_t m = V->rows, n = V->cols;
    GSB_TRY(cpu_check(Y, GSB_F64, -1, n, op, "Y"));
    const int64_t l = Y->rows;
    GSB_TRY(cpu_check(C, GSB_F64, m, l * K, op, "C"));
    const int64_t *s = seg->data;
    const double *c = C->data, *vv = V->data;
    double *y = Y->data;
    for (int64_t e = 0; e < n; e++) {
        const int64_t k = gsb__seg_of(s, K, e);
        for (int64_t r = 0; r < l; r++) {
            double sum = 0.0;
            for (int64_t i = 0; i < m; i++)
                sum += c[i * l * K + r * K + k] * vv[i * n + e];
            y[r * n + e] = beta == 0.0 ? alpha * sum : beta * y[r * n + e] + alpha * sum;
        }
    }
    return GSB_OK;
}

int gsb__cpu_seg_normalize(const gsb__backend *be, const gsb__tensor *x, const gsb__tensor *seg,
                           gsb__tensor *y, gsb__tensor *nrm)
{
    (void)be;
    const char *op = "seg_normalize";
    int64_t K;
    GSB_TRY(check_seg(seg, op, &K));
    GSB_TRY(cpu_check(x, GSB_F64, -1, -1, op, "x"));
    const int64_t n = x->rows * x->cols;
    GSB_TRY(cpu_check_vec(y, GSB_F64, n, op, "y"));
    GSB_TRY(cpu_check_vec(nrm, GSB_F64, K, op, "nrm"));
    const int64_t *s = seg->data;
    const double *xv = x->data;
    double *yv = y->data, *out = nrm->data;
    for (int64_t k = 0; k < K; k++) {
        int64_t lo, hi;
        gsb__seg_range(s, k, n, &lo, &hi);
        double sq = 0.0;
        for (int64_t e = lo; e < hi; e++)
            sq += xv[e] * xv[e];
        const double norm = sqrt(sq), inv = norm > 0.0 ? 1.0 / norm : 0.0;
        for (int64_t e = lo; e < hi; e++)
            yv[e] = inv * xv[e];
        out[k] = norm;
    }
    return GSB_OK;
}
