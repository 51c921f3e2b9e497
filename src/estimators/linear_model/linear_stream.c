/*
 * linear_stream.c - LinearRegression and Ridge fitted from a host X larger
 * than the backend's memory (estimators/common/stream.h).
 *
 * One pass over X in batches accumulates the centred cross-products of
 * [X | y] in float64 on the backend (gsb__gram: rows scaled by
 * sqrt(sample_weight), shifted by the first batch's means), then the small
 * p x p problem is solved on the host from the eigendecomposition of
 * C = Xc^T W Xc (float64, LAPACK; linear_gram.c):
 *   LinearRegression  coef^T = V diag(1 / l) V^T Xc^T W yc over the
 *                     eigenvalues l whose singular value sqrt(l) exceeds
 *                     tol * the largest (lstsq's cut-off: the minimum-norm
 *                     solution); singular_ = sqrt(l) (descending, the first
 *                     min(n, p)), rank_ = the count kept;
 *   Ridge             coef_t^T = V diag(1 / (l + alpha_t)) V^T Xc^T W yc_t,
 *                     dropping sqrt(l) <= 1e-15 as the SVD solver does, one
 *                     decomposition for every alpha and every solver (the
 *                     exact solution the in-memory solvers also give);
 *   positive=True     the non-negative least squares of linear.c on C
 *                     (+ alpha I).
 * intercept_ = y_mean - x_mean @ coef_ (gsb__lin_store).  The normal
 * equations square X's condition number: for cond(X) up to ~1e5 the result
 * matches the in-memory fit to 1e-6 relative or better in float64, which
 * the tests check; beyond, the in-memory SVD route is the more accurate one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimators/common/stream.h"
#include "estimators/linear_model/linear_common.h"

/* Host sqrt(w) (n, float64) for the stream, sample weights rounded to X's
 * dtype as gsb__lin_prepare rounds them, and their all-zero error. */
static int sqrt_weights(const gsb__tensor *w, gsb_dtype dt, gsb__tensor *sw, gsb__tensor *wr)
{
    *sw = *wr = GSB__TENSOR_NONE;
    if (!w)
        return GSB_OK;
    int64_t n = w->rows * w->cols;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, 1, sw));
    int rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, 1, wr);
    int nonzero = 0;
    for (int64_t i = 0; rc == GSB_OK && i < n; i++) {
        double v = gsb__lin_round(dt, gsb__tensor_get(w, i));
        ((double *)wr->data)[i] = v;
        ((double *)sw->data)[i] = sqrt(v);
        nonzero |= v != 0;
    }
    if (rc == GSB_OK && !nonzero)
        rc = gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero number.");
    if (rc != GSB_OK) {
        gsb__tensor_free(sw);
        gsb__tensor_free(wr);
    }
    return rc;
}

/* One pass over X, y (and sqrt(w)): the gram's sums. */
static int accumulate(gsb__ctx *c, const gsb__stream_plan *plan, const gsb__tensor *X,
                      const gsb__tensor *Y, const gsb__tensor *sw, const gsb__tensor *wr,
                      gsb__gram *g)
{
    gsb__stream st;
    const gsb__tensor *extra[2] = {Y, sw};
    int rc = gsb__stream_open(c, plan, X, extra, 2, 1, &st);
    for (int more = 1; rc == GSB_OK && more;) {
        gsb__batch b;
        rc = gsb__stream_next(&st, &b, &more);
        if (rc == GSB_OK && more)
            rc = gsb__gram_add(c, g, &b.X, &b.extra[0], sw ? &b.extra[1] : NULL,
                               gsb__stream_wsum(wr, b.first, b.rows));
    }
    gsb__stream_close(&st);
    return rc;
}

/* Non-negative coefficients from the co-moments (linear.c's NNLS per target). */
static int positive_solve(gsb__ctx *c, double *Cxx, const double *Cxy, int64_t p, int64_t k,
                          const double *alpha, double **coef)
{
    double *b = malloc((size_t)(p > 0 ? p : 1) * sizeof *b);
    double *x = calloc((size_t)(k * p > 0 ? k * p : 1), sizeof *x);
    int rc = b && x ? GSB_OK : gsb__err(GSB_ENOMEM, "out of host memory");
    for (int64_t t = 0; rc == GSB_OK && t < k; t++) {
        double a = alpha ? alpha[t] : 0.0, prev = alpha && t > 0 ? alpha[t - 1] : 0.0;
        for (int64_t i = 0; i < p; i++) {
            Cxx[i * p + i] += a - prev; /* the diagonal moves to this target's alpha */
            b[i] = Cxy[i * k + t];
        }
        rc = gsb__lin_nnls(c, Cxx, b, p, x + t * p);
    }
    free(b);
    if (rc != GSB_OK) {
        free(x);
        x = NULL;
    }
    *coef = x;
    return rc;
}

/* Solve from the co-moments and store coef_ / intercept_ (and LR's spectrum). */
static int solve_and_store(gsb__ctx *c, int ridge, gsb__lin_data *d, double *Cxx,
                           const double *Cxy)
{
    int fit_intercept = gsb__param_bool(c->params, "fit_intercept");
    int positive = gsb__param_bool(c->params, "positive");
    int64_t p = d->p, k = d->k;
    double *alpha = NULL, *coef = NULL;
    gsb__tensor tw = GSB__TENSOR_NONE, tV = GSB__TENSOR_NONE;
    int one_alpha = 1, rc = GSB_OK;
    gsb_dtype coef_dtype = d->dtype;
    if (ridge)
        GSB_CHECK(gsb__lin_ridge_alphas(c, k, &alpha, &one_alpha));
    if (positive) {
        GSB_CHECK(positive_solve(c, Cxx, Cxy, p, k, alpha, &coef));
        if (!ridge && !fit_intercept) /* scipy's float64 nnls result, as linear.c keeps */
            coef_dtype = GSB_F64;
    } else {
        GSB_CHECK(gsb__lin_eigen(Cxx, p, &tw, &tV));
        const double *w = tw.data, *V = tV.data;
        double top = p > 0 ? fmax(w[p - 1], 0.0) : 0.0;
        double tol = ridge ? 0.0 : gsb__param_float(c->params, "tol");
        /* sqrt(l) > tol * sqrt(top) (lstsq) or > 1e-15 (Ridge's SVD solver) */
        double cut2 = ridge ? 1e-30 : tol * tol * top;
        GSB_CHECK(gsb__lin_spectral_solve(w, V, Cxy, p, k, alpha, cut2, &coef));
        if (!ridge) {
            int64_t rank = 0;
            for (int64_t j = 0; j < p; j++)
                rank += w[j] > cut2;
            GSB_CHECK(gsb__lin_store_spectrum(c, w, p, d->n, d->dtype, rank));
        }
    }
    rc = gsb__lin_store(c, d, coef, coef_dtype, fit_intercept, ridge ? k == 1 : d->y_1d);
done:
    free(alpha);
    free(coef);
    gsb__tensor_free(&tw);
    gsb__tensor_free(&tV);
    return rc;
}

int gsb__lin_fit_streamed(gsb__ctx *c, int ridge, int *streamed)
{
    *streamed = 0;
    const gsb__tensor *X = gsb__in(c, "X"), *Y = gsb__in(c, "y");
    const gsb__tensor *w = gsb__in(c, "sample_weight");
    int64_t p = X->cols, k = Y->cols;
    size_t f64 = sizeof(double);
    gsb__stream_plan plan;
    /* in memory: X, its centred copy and the solver's workspace (an SVD);
     * streamed: the p x (p + k) sums, and per row y, sqrt(w) and float64 copies */
    GSB_TRY(gsb__stream_plan_for(c, X, 3.0, (size_t)(p * (p + k + 2)) * f64,
                                 (size_t)(k + 1) * f64 + (size_t)(p + k + 1) * f64, &plan));
    if (!plan.streamed)
        return GSB_OK;
    int fit_intercept = gsb__param_bool(c->params, "fit_intercept");
    gsb__tensor sw, wr;
    GSB_TRY(sqrt_weights(w, X->dtype, &sw, &wr));
    gsb__gram g;
    gsb__lin_data d;
    memset(&d, 0, sizeof d);
    double *Cxx = NULL, *Cxy = NULL;
    int rc = gsb__gram_init(c, &g, p, k, fit_intercept);
    if (rc == GSB_OK)
        rc = accumulate(c, &plan, X, Y, w ? &sw : NULL, w ? &wr : NULL, &g);
    if (rc == GSB_OK)
        rc = gsb__gram_finish(&g, &d.x_off, &d.y_off, &Cxx, &Cxy);
    if (rc == GSB_OK) {
        d.n = X->rows;
        d.p = p;
        d.k = k;
        d.y_1d = Y->ndim < 2;
        d.dtype = X->dtype;
        /* the offsets as gsb__lin_prepare has them: rounded to X's dtype */
        for (int64_t j = 0; j < p; j++)
            d.x_off[j] = gsb__lin_round(d.dtype, d.x_off[j]);
        for (int64_t t = 0; t < k; t++)
            d.y_off[t] = gsb__lin_round(d.dtype, d.y_off[t]);
        rc = solve_and_store(c, ridge, &d, Cxx, Cxy);
    }
    if (rc == GSB_OK)
        *streamed = 1;
    free(Cxx);
    free(Cxy);
    gsb__lin_free(&d);
    gsb__gram_free(&g);
    gsb__tensor_free(&sw);
    gsb__tensor_free(&wr);
    return rc;
}
