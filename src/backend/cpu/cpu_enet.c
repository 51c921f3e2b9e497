/*
 * cpu_enet.c - the CPU backend's elastic-net ops: enet_cd_gram (the Gram
 * form of coordinate descent, the host solver of solvers/coordinate_descent.c
 * per target, targets in parallel) and gather_cols (a column subset of X,
 * the working sets of the wide-data path).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "core/error.h"
#include "solvers/coordinate_descent.h"

int gsb__cpu_enet_cd_gram(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *q,
                          const double *y_norm2, const gsb__enet_cd_params *cd, gsb__tensor *W,
                          double *gap, int64_t *n_iter)
{
    (void)be;
    const char *op = "enet_cd_gram";
    GSB_TRY(cpu_check(Q, GSB_F64, -1, -1, op, "Q"));
    int64_t p = Q->rows;
    GSB_TRY(cpu_check(Q, GSB_F64, p, p, op, "Q"));
    GSB_TRY(cpu_check(q, GSB_F64, -1, p, op, "q"));
    int64_t k = q->rows;
    GSB_TRY(cpu_check(W, GSB_F64, k, p, op, "W"));
    if (!y_norm2 || !cd || !gap || !n_iter)
        return gsb__err(GSB_EINTERNAL, "%s: a host argument is missing", op);
    if (cd->max_iter < 1)
        return gsb__err(GSB_EINTERNAL, "%s: max_iter must be >= 1", op);

    const double *Qd = Q->data, *qd = q->data;
    double *Wd = W->data;
    int rc = GSB_OK;
    /* targets are independent problems: one per thread, each solved serially */
#pragma omp parallel for schedule(dynamic) if (k > 1)
    for (int64_t t = 0; t < k; t++) {
        gsb__cd_opts o;
        gsb__cd_defaults(&o);
        o.alpha = cd->alpha;
        o.beta = cd->beta;
        o.tol = cd->tol;
        o.max_iter = cd->max_iter;
        o.positive = cd->positive;
        o.random = cd->random;
        o.screening = cd->screening;
        o.seed = cd->seed + (uint64_t)t;
        gsb__cd_result r;
        int trc = gsb__cd_gram(p, Qd, qd + t * p, y_norm2[t], Wd + t * p, &o, &r);
        gap[t] = r.gap;
        n_iter[t] = r.n_iter;
        if (trc != GSB_OK) {
#pragma omp critical(gsb_cpu_enet_rc)
            rc = trc;
        }
    }
    return rc;
}

int gsb__cpu_gather_cols(const gsb__backend *be, const gsb__tensor *X, const int64_t *idx,
                         int64_t m, gsb__tensor *out)
{
    (void)be;
    const char *op = "gather_cols";
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    int64_t n = X->rows, p = X->cols;
    GSB_TRY(cpu_check(out, X->dtype, n, m, op, "out"));
    if (m > 0 && !idx)
        return gsb__err(GSB_EINTERNAL, "%s: idx is missing", op);
    for (int64_t c = 0; c < m; c++)
        if (idx[c] < 0 || idx[c] >= p)
            return gsb__err(GSB_EINTERNAL, "%s: column %lld is outside [0, %lld)", op,
                            (long long)idx[c], (long long)p);
    size_t es = gsb_dtype_size(X->dtype);
    const char *src = X->data;
    char *dst = out->data;
#pragma omp parallel for schedule(static) if (n * m > (1 << 18))
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < m; c++)
            memcpy(dst + (size_t)(i * m + c) * es, src + (size_t)(i * p + idx[c]) * es, es);
    return GSB_OK;
}
