/*
 * enet_stats.c - Lasso and ElasticNet fitted from merged GRAM statistics
 * (partial_stats.h): the distributed fit (gsb.dask, multi-device sessions).
 *
 * The statistics hold the weighted means of X and y and the centred,
 * weighted cross-products C = sum w (z - mean)(z - mean)^T of z = [X | y].
 * ElasticNet.fit rescales the weights to sum to n and solves on the data
 * centred and scaled by sqrt(w) (linear_common.c), whose products are
 * therefore (n / w_sum) C; without fit_intercept the uncentred products
 * (n / w_sum)(C + w_sum mean mean^T).  From those the fit is the estimator's
 * own precompute path: the Gram form of the solver (enet_solve.c) set up
 * with Q = X^T X, q = Y^T X and ||y_t||^2, then gsb__enet_fit_solver (warm
 * start, scikit-learn's duality-gap stopping rule, coef_, intercept_ from
 * the means, dual_gap_, n_iter_).  Every option of the estimator applies
 * (positive, several targets, sample_weight, fit_intercept,
 * selection='random', warm_start); precompute does not matter (the Gram
 * form is the only one here, and the single-process fit's other forms reach
 * the same optimum within tol).  Float32 data: the products are float64
 * here, where the single-process fit forms them in float32.
 *
 * Options: "dtype" ("float32" | "float64", X's, default float64) for the
 * fitted arrays, "y_1d" (y was 1-D; default: one target).
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "estimators/common/partial_stats.h"
#include "estimators/linear_model/enet.h"

/* The products of the prepared data (see above) from the statistics. */
typedef struct enet_products {
    double *Q, *q, *y_norm2; /* p x p, k x p, k */
} enet_products;

static void products_free(enet_products *e)
{
    free(e->Q);
    free(e->q);
    free(e->y_norm2);
}

static int products(const gsb__stats *st, const gsb__lin_data *d, int fit_intercept,
                    enet_products *e)
{
    int64_t p = d->p, k = d->k, q = p + k;
    double wsum = st->v[0], scale = (double)d->n / wsum;
    double un = fit_intercept ? 0.0 : wsum; /* back to uncentred products */
    const double *m = st->v + 2, *C = st->v + 2 + q;
    e->Q = gsb__alloc_array(p * p, sizeof(double));
    e->q = gsb__alloc_array(k * p, sizeof(double));
    e->y_norm2 = gsb__alloc_array(k, sizeof(double));
    if (!e->Q || !e->q || !e->y_norm2)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    for (int64_t i = 0; i < p; i++)
        for (int64_t j = 0; j < p; j++)
            e->Q[i * p + j] = scale * (C[i * q + j] + un * m[i] * m[j]);
    for (int64_t t = 0; t < k; t++) {
        for (int64_t j = 0; j < p; j++)
            e->q[t * p + j] = scale * (C[j * q + p + t] + un * m[j] * m[p + t]);
        e->y_norm2[t] = scale * (C[(p + t) * q + p + t] + un * m[p + t] * m[p + t]);
    }
    return GSB_OK;
}

/* d without X and Y: sizes, dtype and the offsets (the means, or zeros). */
static int lin_data(gsb__ctx *c, const gsb__stats *st, int fit_intercept, gsb__lin_data *d)
{
    int64_t q = st->a, k = st->b, p = q - k;
    memset(d, 0, sizeof *d);
    d->n = (int64_t)st->v[1];
    d->p = p;
    d->k = k;
    d->y_1d = gsb__opt_bool(c, "y_1d", k == 1);
    const char *dt = json_string_value(json_object_get(c->options, "dtype"));
    d->dtype = dt && strcmp(dt, "float32") == 0 ? GSB_F32 : GSB_F64;
    d->x_off = calloc((size_t)p, sizeof *d->x_off);
    d->y_off = calloc((size_t)k, sizeof *d->y_off);
    if (!d->x_off || !d->y_off)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    if (fit_intercept) { /* the means in X's dtype, as the single-process fit holds them */
        for (int64_t j = 0; j < p; j++)
            d->x_off[j] = gsb__lin_round(d->dtype, st->v[2 + j]);
        for (int64_t t = 0; t < k; t++)
            d->y_off[t] = gsb__lin_round(d->dtype, st->v[2 + p + t]);
    }
    return GSB_OK;
}

int gsb__enet_fit_from_stats(gsb__ctx *c)
{
    gsb__stats st;
    gsb__enet_fit_args a;
    GSB_TRY(gsb__stats_parse(gsb__in(c, "stats"), GSB__STATS_GRAM, &st));
    if (st.b < 1 || st.a - st.b < 1)
        return gsb__err(GSB_EINVAL, "%s: the statistics hold no targets (stats_gram without y)",
                        c->est->name);
    if (!(st.v[0] > 0))
        return gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero number.");
    GSB_TRY(gsb__enet_fit_args_read(c, &a));
    gsb__enet_warn_alpha0(&a);
    gsb__lin_data d = {0};
    enet_products e = {0};
    gsb__enet_solver s = {0};
    int rc;
    GSB_CHECK(lin_data(c, &st, a.fit_intercept, &d));
    GSB_CHECK(products(&st, &d, a.fit_intercept, &e));
    GSB_CHECK(gsb__enet_solver_init_gram(&s, c, &d, e.Q, e.q, e.y_norm2));
    GSB_CHECK(gsb__enet_fit_solver(c, &d, &a, &s));
    /* fit sets it from X; here there is none */
    rc = gsb__fit_set_scalar(c, "n_features_in_", (double)d.p, GSB_I64);
done:
    gsb__enet_solver_free(&s);
    products_free(&e);
    gsb__lin_free(&d);
    return rc;
}
