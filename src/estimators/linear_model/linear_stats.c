/*
 * linear_stats.c - LinearRegression and Ridge fitted from merged GRAM
 * statistics (partial_stats.h): the distributed fit.
 *
 * The statistics hold the weighted means of X and y and the centred,
 * weighted cross-products C = sum w (z - mean)(z - mean)^T of z = [X | y],
 * which is exactly Xc^T Xc, Xc^T yc of the data linear.c prepares (centred
 * on the weighted means, rows scaled by sqrt(w)).  Without fit_intercept the
 * uncentred products are C + w_sum mean mean^T.  Both estimators then solve
 * the normal equations through the eigendecomposition G = V diag(l) V^T of
 * the p x p Gram matrix:
 *   LinearRegression  coef = V diag(1/l) V^T b over the l with sqrt(l) >
 *                     tol * sqrt(l_max) (lstsq's cut, minimum norm);
 *                     singular_ = sqrt(l) descending, rank_ the kept count;
 *   Ridge             coef_t = V diag(1/(l + alpha_t)) V^T b_t, the solution
 *                     of (G + alpha_t I) w = b_t that Cholesky and the SVD
 *                     solver compute (a direction with l + alpha_t <= 0 is
 *                     dropped, as the SVD solver drops zero singular values).
 * The error is that of the normal equations, cond(Xc)^2 eps, where the
 * single-process LinearRegression's SVD has cond(Xc) eps (docs/DASK.md).
 * positive=True (non-negative least squares) is not offered here.
 *
 * Options: "dtype" ("float32" | "float64", X's, default float64) for the
 * fitted arrays, "y_1d" (y was 1-D; default: one target).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimators/common/partial_stats.h"

/* The data of a fit from statistics. */
typedef struct lin_stats {
    int64_t n, p, k;     /* rows, features, targets */
    double wsum;
    const double *mean;  /* q = p + k means */
    double *G, *B;       /* p x p Gram, p x k right-hand sides (owned) */
    double *lam, *V;     /* eigenvalues ascending, eigenvectors as columns (owned) */
    gsb_dtype dtype;
    int y_1d, fit_intercept;
} lin_stats;

static void ls_free(lin_stats *s)
{
    free(s->G);
    free(s->B);
    free(s->lam);
    free(s->V);
}

static gsb_dtype opt_dtype(gsb__ctx *c)
{
    const char *s = json_string_value(json_object_get(c->options, "dtype"));
    return s && strcmp(s, "float32") == 0 ? GSB_F32 : GSB_F64;
}

/* G, B from the statistics, then G's eigendecomposition (CPU backend, float64). */
static int ls_setup(gsb__ctx *c, lin_stats *s)
{
    gsb__stats st;
    memset(s, 0, sizeof *s);
    GSB_TRY(gsb__stats_parse(gsb__in(c, "stats"), GSB__STATS_GRAM, &st));
    int64_t q = st.a, k = st.b, p = q - k;
    if (k < 1 || p < 1)
        return gsb__err(GSB_EINVAL, "%s: the statistics hold no targets (stats_gram without y)",
                        c->est->name);
    s->wsum = st.v[0];
    s->n = (int64_t)st.v[1];
    s->p = p;
    s->k = k;
    s->mean = st.v + 2;
    s->dtype = opt_dtype(c);
    s->y_1d = gsb__opt_bool(c, "y_1d", k == 1);
    s->fit_intercept = gsb__param_bool(c->params, "fit_intercept");
    if (!(s->wsum > 0))
        return gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero number.");
    const double *C = st.v + 2 + q, *m = s->mean;
    double un = s->fit_intercept ? 0.0 : s->wsum; /* back to uncentred products */
    s->G = malloc((size_t)(p * p) * sizeof *s->G);
    s->B = malloc((size_t)(p * k) * sizeof *s->B);
    s->lam = malloc((size_t)p * sizeof *s->lam);
    s->V = malloc((size_t)(p * p) * sizeof *s->V);
    if (!s->G || !s->B || !s->lam || !s->V) {
        ls_free(s);
        return gsb__err(GSB_ENOMEM, "out of host memory");
    }
    for (int64_t i = 0; i < p; i++) {
        for (int64_t j = 0; j < p; j++)
            s->G[i * p + j] = C[i * q + j] + un * m[i] * m[j];
        for (int64_t t = 0; t < k; t++)
            s->B[i * k + t] = C[i * q + p + t] + un * m[i] * m[p + t];
    }
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor G = gsb__tensor_host_view(s->G, GSB_F64, p, p);
    gsb__tensor w = gsb__tensor_host_view(s->lam, GSB_F64, p, 1);
    gsb__tensor V = gsb__tensor_host_view(s->V, GSB_F64, p, p);
    int rc = cpu->ops->eigh(cpu, &G, &w, &V);
    if (rc != GSB_OK)
        ls_free(s);
    return rc;
}

/* coef (k x p) = V diag(f(l)) V^T B, f(l) = inv[j] per eigenvalue j, per target t. */
static void ls_apply(const lin_stats *s, const double *inv, int64_t t, double *coef)
{
    int64_t p = s->p, k = s->k;
    for (int64_t i = 0; i < p; i++)
        coef[t * p + i] = 0;
    for (int64_t j = 0; j < p; j++) {
        double f = inv[j];
        if (f == 0)
            continue;
        double proj = 0; /* v_j . b_t */
        for (int64_t i = 0; i < p; i++)
            proj += s->V[i * p + j] * s->B[i * k + t];
        for (int64_t i = 0; i < p; i++)
            coef[t * p + i] += s->V[i * p + j] * f * proj;
    }
}

static double round_to(gsb_dtype dt, double v) { return dt == GSB_F32 ? (double)(float)v : v; }

/* A host tensor of dtype and user shape filled from doubles. */
static int host_tensor(gsb_dtype dt, int64_t rows, int64_t cols, int ndim, const double *v,
                       gsb__tensor *out)
{
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, rows, cols, out));
    out->ndim = ndim;
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(out, i, v[i]);
    return GSB_OK;
}

/* coef_, intercept_ (= y_mean - x_mean @ coef_) and n_features_in_, as linear.c's fit stores them. */
static int ls_store(gsb__ctx *c, const lin_stats *s, const double *coef, int coef_1d)
{
    int64_t p = s->p, k = s->k;
    gsb__tensor t;
    GSB_TRY(host_tensor(s->dtype, coef_1d ? p : k, coef_1d ? 1 : p, coef_1d ? 1 : 2, coef, &t));
    GSB_TRY(gsb__fit_set(c, "coef_", &t));
    GSB_TRY(gsb__fit_set_scalar(c, "n_features_in_", (double)p, GSB_I64));
    if (!s->fit_intercept)
        return gsb__fit_set_scalar(c, "intercept_", 0.0, GSB_F64);
    double *b = malloc((size_t)k * sizeof *b);
    if (!b)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    for (int64_t j = 0; j < k; j++) {
        double acc = 0;
        for (int64_t i = 0; i < p; i++)
            acc += round_to(s->dtype, s->mean[i]) * round_to(s->dtype, coef[j * p + i]);
        b[j] = round_to(s->dtype, s->mean[p + j]) - acc;
    }
    int rc = s->y_1d ? host_tensor(s->dtype, 1, 1, 0, b, &t)
                     : host_tensor(s->dtype, k, 1, 1, b, &t);
    free(b);
    GSB_TRY(rc);
    return gsb__fit_set(c, "intercept_", &t);
}

static int refuse_positive(gsb__ctx *c)
{
    if (gsb__param_bool(c->params, "positive"))
        return gsb__err(GSB_EUNSUPPORTED, "%s: positive=True is not supported by the "
                        "distributed fit (fit_from_stats); fit on one process instead",
                        c->est->name);
    return GSB_OK;
}

int gsb__linreg_fit_from_stats(gsb__ctx *c)
{
    GSB_TRY(refuse_positive(c));
    lin_stats s;
    GSB_TRY(ls_setup(c, &s));
    int64_t p = s.p, r = s.n < p ? s.n : p, rank = 0;
    double tol = gsb__param_float(c->params, "tol");
    double *sv = malloc((size_t)p * sizeof *sv), *inv = malloc((size_t)p * sizeof *inv);
    double *coef = malloc((size_t)(s.k * p) * sizeof *coef);
    gsb__tensor t = GSB__TENSOR_NONE;
    int rc = GSB_OK;
    if (!sv || !inv || !coef) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    double smax = sqrt(fmax(s.lam[p - 1], 0.0));
    for (int64_t j = 0; j < p; j++) {
        double sj = sqrt(fmax(s.lam[j], 0.0));
        sv[p - 1 - j] = sj; /* descending */
        inv[j] = sj > tol * smax && sj > 0 ? 1.0 / s.lam[j] : 0.0;
        rank += inv[j] != 0;
    }
    for (int64_t tt = 0; tt < s.k; tt++)
        ls_apply(&s, inv, tt, coef);
    GSB_CHECK(host_tensor(s.dtype, r, 1, 1, sv, &t));
    GSB_CHECK(gsb__fit_set(c, "singular_", &t));
    GSB_CHECK(gsb__fit_set_scalar(c, "rank_", (double)rank, GSB_I64));
    rc = ls_store(c, &s, coef, s.y_1d);
done:
    gsb__tensor_free(&t);
    free(sv);
    free(inv);
    free(coef);
    ls_free(&s);
    return rc;
}

/* One alpha per target, from a number or a list (Ridge's alpha parameter). */
static int ridge_alpha_of(gsb__ctx *c, int64_t k, int64_t t, double *out)
{
    const json_t *a = json_object_get(c->params, "alpha");
    size_t na = json_is_array(a) ? json_array_size(a) : 1;
    if (na != 1 && (int64_t)na != k)
        return gsb__err(GSB_EINVAL, "Number of targets and number of penalties do not "
                        "correspond: %zu != %lld", na, (long long)k);
    *out = json_number_value(json_is_array(a) ? json_array_get(a, na == 1 ? 0 : (size_t)t) : a);
    return GSB_OK;
}

int gsb__ridge_fit_from_stats(gsb__ctx *c)
{
    GSB_TRY(refuse_positive(c));
    if (gsb__param_is(c->params, "solver", "lbfgs"))
        return gsb__err(GSB_EINVAL, "'lbfgs' solver can be used only when positive=True. "
                        "Please use another solver.");
    lin_stats s;
    GSB_TRY(ls_setup(c, &s));
    int64_t p = s.p;
    double *inv = malloc((size_t)p * sizeof *inv);
    double *coef = malloc((size_t)(s.k * p) * sizeof *coef);
    int rc = GSB_OK;
    if (!inv || !coef) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    for (int64_t t = 0; t < s.k; t++) {
        double alpha = 0;
        GSB_CHECK(ridge_alpha_of(c, s.k, t, &alpha));
        for (int64_t j = 0; j < p; j++)
            inv[j] = s.lam[j] + alpha > 0 ? 1.0 / (s.lam[j] + alpha) : 0.0;
        ls_apply(&s, inv, t, coef);
    }
    /* Ridge ravels a single target's coefficients even for 2-D y */
    rc = ls_store(c, &s, coef, s.k == 1);
done:
    free(inv);
    free(coef);
    ls_free(&s);
    return rc;
}
