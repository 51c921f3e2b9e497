/*
 * enet.c - Lasso and ElasticNet (scikit-learn 1.9.1's
 * sklearn.linear_model.Lasso / ElasticNet) for dense X.
 *
 * ElasticNet minimises, per target,
 *     1 / (2 n) ||y - X w||^2 + alpha l1_ratio ||w||_1
 *                             + alpha (1 - l1_ratio) / 2 ||w||^2
 * (Lasso: l1_ratio = 1).  As ElasticNet.fit does: sample weights are
 * rescaled to sum to n, the data centred and sqrt(w)-scaled
 * (linear_common.c), each target of a 2-D y solved on its own with
 * l1 = alpha l1_ratio n and l2 = alpha (1 - l1_ratio) n, and the solver's
 * duality gap divided by n is dual_gap_.  The solver (enet_solve.c) is
 * coordinate descent with scikit-learn's screening and stopping rule, so
 * coef_ is scikit-learn's optimum within tol and n_iter_ its epoch count.
 *
 * Differences: precompute takes True or False only (a precomputed Gram
 * array is refused by the parameter check); precompute=False lets the cost
 * model choose between the Gram and the residual form, which reach the same
 * optimum.  selection='random' draws coordinates from gsb's own stream, so
 * random_state reproduces gsb's fits, not scikit-learn's iterates.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/warn.h"
#include "core/rng.h"
#include "estimators/common/partial_stats.h"
#include "estimators/linear_model/enet.h"

/* ---- descriptors: parameters ---------------------------------------------------- */

static const char *const selection_choices[] = {"cyclic", "random", NULL};

#define P_ALPHA                                                                          \
    {"alpha", GSB__P_FLOAT, "1.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,                  \
     "Constant that multiplies the penalty terms (0 is least squares, better fitted by " \
     "LinearRegression)."}
#define P_FIT_INTERCEPT                                                  \
    {"fit_intercept", GSB__P_BOOL, "true", 0, 0, 0, NULL,                \
     "Fit an intercept (centre X and y) or assume centred data."}
#define P_PRECOMPUTE                                                                      \
    {"precompute", GSB__P_BOOL, "false", 0, 0, 0, NULL,                                   \
     "True: coordinate descent on the Gram matrix X^T X.  False: gsb picks the Gram or "  \
     "the residual form by cost (same optimum).  A precomputed Gram array is not taken."}
#define P_COPY_X                                                       \
    {"copy_X", GSB__P_BOOL, "true", 0, 0, 0, NULL,                     \
     "Accepted for compatibility: X is never modified in place."}
#define P_MAX_ITER                                                                        \
    {"max_iter", GSB__P_INT | GSB__P_NONE, "1000", 1, INFINITY, GSB__CLOSED_LEFT, NULL,   \
     "Maximum epochs of coordinate descent; n_iter_ == max_iter means it did not "        \
     "converge (None fails at fit, as in scikit-learn)."}
#define P_TOL                                                                                \
    {"tol", GSB__P_FLOAT, "0.0001", 0, INFINITY, GSB__CLOSED_LEFT, NULL,                     \
     "Stop when the duality gap is at most tol * ||y||^2 (checked once an epoch's largest "  \
     "coefficient change is at most tol times the largest coefficient)."}
#define P_WARM_START                                                                     \
    {"warm_start", GSB__P_BOOL, "false", 0, 0, 0, NULL,                                  \
     "Start from the previous fit's coef_ (its shape must fit the new problem)."}
#define P_POSITIVE                                                     \
    {"positive", GSB__P_BOOL, "false", 0, 0, 0, NULL,                  \
     "Force the coefficients to be non-negative."}
#define P_RANDOM_STATE                                                                   \
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH, \
     NULL, "Seed of the coordinate order with selection='random'."}
#define P_SELECTION                                                                        \
    {"selection", GSB__P_STR, "\"cyclic\"", 0, 0, 0, selection_choices,                   \
     "'cyclic' sweeps the features in order, 'random' updates a random one each step."}

static const gsb__param_desc lasso_params[] = {
    P_ALPHA, P_FIT_INTERCEPT, P_PRECOMPUTE, P_COPY_X, P_MAX_ITER, P_TOL, P_WARM_START,
    P_POSITIVE, P_RANDOM_STATE, P_SELECTION, {0}};

static const gsb__param_desc enet_params[] = {
    P_ALPHA,
    {"l1_ratio", GSB__P_FLOAT, "0.5", 0, 1, GSB__CLOSED_BOTH, NULL,
     "The mix of the penalties: 1 is the L1 penalty (Lasso), 0 the L2 penalty."},
    P_FIT_INTERCEPT, P_PRECOMPUTE, P_MAX_ITER, P_COPY_X, P_TOL, P_WARM_START, P_POSITIVE,
    P_RANDOM_STATE, P_SELECTION, {0}};

/* ---- fit ------------------------------------------------------------------------ */

int gsb__enet_fit_args_read(gsb__ctx *c, gsb__enet_fit_args *a)
{
    const json_t *p = c->params;
    memset(a, 0, sizeof *a);
    if (gsb__param_is_none(p, "max_iter"))
        return gsb__err(GSB_EINVAL, "an integer is required");
    /* the CV estimators have no alpha and may hold a list of l1_ratio: they set both */
    a->alpha = json_number_value(json_object_get(p, "alpha"));
    const json_t *l1r = json_object_get(p, "l1_ratio");
    a->l1_ratio = json_is_number(l1r) ? json_number_value(l1r) : 1.0;
    a->fit_intercept = gsb__param_bool(p, "fit_intercept");
    a->precompute = json_is_true(json_object_get(p, "precompute"));
    a->warm_start = json_object_get(p, "warm_start") && gsb__param_bool(p, "warm_start");
    a->pen.tol = gsb__param_float(p, "tol");
    a->pen.max_iter = gsb__param_int(p, "max_iter");
    a->pen.positive = gsb__param_bool(p, "positive");
    a->pen.random = gsb__param_is(p, "selection", "random");
    if (a->pen.random) {
        gsb__rng r;
        gsb__rng_seed_params(&r, p);
        a->pen.seed = gsb__rng_next(&r);
    }
    return GSB_OK;
}

/* W (k x p) from the previous coef_ when warm_start, else zeros; rounded to
 * X's dtype, as scikit-learn's path converts coef_init. */
static int start_coef(gsb__ctx *c, const gsb__lin_data *d, int warm, double *W)
{
    int64_t n = d->k * d->p;
    memset(W, 0, (size_t)n * sizeof *W);
    const gsb__tensor *coef = warm ? gsb__attr(c, "coef_") : NULL;
    if (!coef)
        return GSB_OK;
    if (gsb__tensor_numel(coef) != n || !gsb__is_float(coef->dtype))
        return gsb__err(GSB_EINVAL, "warm_start: the previous coef_ holds %lld values, this "
                        "fit needs %lld (n_targets %lld x n_features %lld)",
                        (long long)gsb__tensor_numel(coef), (long long)n, (long long)d->k,
                        (long long)d->p);
    for (int64_t i = 0; i < n; i++)
        W[i] = gsb__lin_round(d->dtype, gsb__tensor_get(coef, i));
    return GSB_OK;
}

/* scikit-learn's check after the fit, in its words. */
static int check_finite(const gsb__lin_data *d, const double *W)
{
    for (int64_t t = 0; t < d->k; t++) {
        double b = d->y_off[t];
        for (int64_t j = 0; j < d->p; j++)
            b -= d->x_off[j] * W[t * d->p + j];
        int ok = isfinite(b);
        for (int64_t j = 0; j < d->p && ok; j++)
            ok = isfinite(W[t * d->p + j]);
        if (!ok)
            return gsb__err(GSB_EINVAL, "Coordinate descent iterations resulted in non-finite "
                            "parameter values. The input data may contain large values and "
                            "need to be preprocessed.");
    }
    return GSB_OK;
}

/* dual_gap_ (X's dtype) and n_iter_: scalars for one target, else (k,). */
static int store_gap_iter(gsb__ctx *c, const gsb__lin_data *d, const double *gap,
                          const int64_t *n_iter)
{
    if (d->k == 1) {
        GSB_TRY(gsb__fit_set_scalar(c, "n_iter_", (double)n_iter[0], GSB_I64));
        gsb__tensor g;
        double v = gap[0] / (double)d->n;
        GSB_TRY(gsb__lin_host_tensor(d->dtype, 1, 1, 0, &v, &g));
        return gsb__fit_set(c, "dual_gap_", &g);
    }
    double *v = gsb__alloc_array(d->k, sizeof *v);
    if (!v)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    for (int64_t t = 0; t < d->k; t++)
        v[t] = gap[t] / (double)d->n;
    gsb__tensor g, it;
    int rc = gsb__lin_host_tensor(d->dtype, d->k, 1, 1, v, &g);
    for (int64_t t = 0; t < d->k; t++)
        v[t] = (double)n_iter[t];
    if (rc == GSB_OK && (rc = gsb__fit_set(c, "dual_gap_", &g)) == GSB_OK &&
        (rc = gsb__lin_host_tensor(GSB_I64, d->k, 1, 1, v, &it)) == GSB_OK)
        rc = gsb__fit_set(c, "n_iter_", &it);
    free(v);
    return rc;
}

int gsb__enet_fit_solver(gsb__ctx *c, const gsb__lin_data *d, const gsb__enet_fit_args *a,
                         gsb__enet_solver *s)
{
    int64_t k = d->k, p = d->p;
    double *W = gsb__alloc_array(k * p, sizeof *W), *gap = gsb__alloc_array(k, sizeof *gap);
    int64_t *n_iter = gsb__alloc_array(k, sizeof *n_iter);
    int rc, converged;
    if (!W || !gap || !n_iter) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    GSB_CHECK(start_coef(c, d, a->warm_start, W));
    gsb__enet_penalty pen = a->pen;
    pen.l1 = a->alpha * a->l1_ratio * (double)d->n;
    pen.l2 = a->alpha * (1.0 - a->l1_ratio) * (double)d->n;
    GSB_CHECK(gsb__enet_solver_run(s, &pen, W, gap, n_iter, &converged));
    GSB_CHECK(check_finite(d, W));
    /* coef_ in X's dtype; one target's coef_ is (n_features,) even for 2-D y */
    GSB_CHECK(gsb__lin_store(c, d, W, d->dtype, a->fit_intercept, k == 1));
    rc = store_gap_iter(c, d, gap, n_iter);
done:
    free(W);
    free(gap);
    free(n_iter);
    return rc;
}

int gsb__enet_fit_prepared(gsb__ctx *c, const gsb__lin_data *d, const gsb__enet_fit_args *a)
{
    gsb__enet_solver s;
    GSB_TRY(gsb__enet_solver_init(&s, c, d, a->precompute));
    int rc = gsb__enet_fit_solver(c, d, a, &s);
    gsb__enet_solver_free(&s);
    return rc;
}

void gsb__enet_warn_alpha0(const gsb__enet_fit_args *a)
{
    if (a->alpha == 0) /* scikit-learn's words (ElasticNet.fit) */
        gsb__warn("UserWarning", "With alpha=0, this algorithm does not converge well. You "
                  "are advised to use the LinearRegression estimator");
}

static int enet_fit(gsb__ctx *c)
{
    gsb__enet_fit_args a;
    gsb__lin_data d;
    GSB_TRY(gsb__enet_fit_args_read(c, &a));
    gsb__enet_warn_alpha0(&a);
    GSB_TRY(gsb__lin_prepare(c->be, gsb__in(c, "X"), gsb__in(c, "y"),
                             gsb__in(c, "sample_weight"), a.fit_intercept, 1, &d));
    int rc = gsb__enet_fit_prepared(c, &d, &a);
    gsb__lin_free(&d);
    return rc;
}

/* ---- descriptors ------------------------------------------------------------------- */

static const gsb__method_desc enet_methods[] = {
    {"fit", enet_fit,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK},
      {"y", GSB__IN_Y_LIKE_X},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     1, "coordinate descent (y: 1-D, or 2-D for several targets fitted independently)"},
    {"predict", gsb__lin_predict, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}}, 0,
     "X @ coef_.T + intercept_ (result \"y\")"},
    GSB__STATS_GRAM_ROW, GSB__STATS_MERGE_ROW,
    GSB__FIT_FROM_STATS_ROW(gsb__enet_fit_from_stats, "gram"),
    {0}};

static const gsb__attr_desc enet_attrs[] = {
    {"coef_", "coefficients: (n_features,) for one target, else (n_targets, n_features); "
              "X's dtype"},
    {"intercept_", "intercept: scalar for 1-D y, else (n_targets,); float 0.0 without "
                   "fit_intercept"},
    {"dual_gap_", "duality gap at the end of the optimisation, divided by n_samples: scalar "
                  "for one target, else (n_targets,)"},
    {"n_iter_", "coordinate descent epochs (int, or one per target); max_iter means not "
                "converged"},
    {"n_features_in_", "number of features seen during fit"},
    {0}};

const gsb__estimator_desc gsb__est_Lasso = {
    "Lasso", "linear_model", GSB__KIND_REGRESSOR, lasso_params, enet_methods, enet_attrs,
    "Linear Model trained with L1 prior as regularizer (aka the Lasso)."};

const gsb__estimator_desc gsb__est_ElasticNet = {
    "ElasticNet", "linear_model", GSB__KIND_REGRESSOR, enet_params, enet_methods, enet_attrs,
    "Linear regression with combined L1 and L2 priors as regularizer."};
