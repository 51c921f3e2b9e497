/*
 * logistic_stats.c - LogisticRegression across partitions (the distributed
 * fit's engine side; the driver's loop is python/gsb/dask/linear_model.py).
 *
 * The single-process fit (logistic.c) minimises
 *     sum_i s_i loss_i / sum_i s_i + ||W||^2 / (2 C sum_i s_i)
 * with the engine's L-BFGS.  Here the sums over samples are split:
 *   stats_lossgrad  a partition's [sum s, sum s loss, gradient] at a given
 *                   coefficient vector (the backend's logistic_loss_grad, as
 *                   the single-process fit evaluates it), merged by summing;
 *   lbfgs_next      the driver's L-BFGS, in reverse communication by replay:
 *                   given the history of evaluations so far (each row the
 *                   point x and the merged statistics there), it runs
 *                   gsb__lbfgs_minimize from the first point, answering each
 *                   evaluation from the history; the first point not in the
 *                   history is returned ("x", done 0) for the driver to
 *                   evaluate on the partitions, or the minimiser stops
 *                   (done 1).  The minimiser is deterministic, so every replay
 *                   retraces the same points bit for bit (a row that differs
 *                   is refused), and the iterates are those of the
 *                   single-process fit up to the summation order of the
 *                   losses: the same stopping tests stop it at the same
 *                   iteration.  Replaying costs host arithmetic on R x p
 *                   vectors only, nothing against one pass over the data;
 *   fit_from_stats  the final replay, storing classes_, coef_, intercept_ and
 *                   n_iter_ and warning (ConvergenceWarning) as fit does.
 * History row layout: [x (P), sum s, sum s loss, gradient (P)], P = R x p,
 * R = 1 (two classes) or K, p = n_features + fit_intercept.
 * Supported: the L2 penalty or none, every solver name but liblinear (whose
 * intercept penalty the distributed fit does not carry), no warm start.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimators/common/partial_stats.h"
#include "solvers/lbfgs.h"
#include "solvers/randomized_svd.h" /* gsb__tensor_from_f64 */

/* scikit-learn's extra advice when LogisticRegression does not converge (logistic.c's) */
#define ADVICE                                                                    \
    "Please also refer to the documentation for alternative solver options:\n"    \
    "    https://scikit-learn.org/stable/modules/linear_model.html#logistic-regression"

/* ---- the partition's loss and gradient ----------------------------------------- */

/* Effective weights s_i = sample_weight_i * class_weight[y_i] (option "class_weight",
 * one per class; absent: 1). */
static int effective(gsb__ctx *c, const gsb__tensor *sw, const int32_t *yi, int64_t n,
                     int64_t K, double *s)
{
    const json_t *cw = json_object_get(c->options, "class_weight");
    if (cw && (!json_is_array(cw) || (int64_t)json_array_size(cw) != K))
        return gsb__err(GSB_EINVAL, "LogisticRegression.stats_lossgrad: option class_weight "
                        "must list n_classes numbers");
    for (int64_t i = 0; i < n; i++) {
        double w = sw ? ((const double *)sw->data)[i] : 1.0;
        s[i] = cw ? w * json_number_value(json_array_get(cw, (size_t)yi[i])) : w;
    }
    return GSB_OK;
}

int gsb__logistic_stats_lossgrad(gsb__ctx *c)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X"), *y = gsb__in(c, "y"), *co = gsb__in(c, "coef");
    int64_t n = X->rows, d = X->cols, K = gsb__opt_int(c, "n_classes", 0);
    int fit_intercept = gsb__param_bool(c->params, "fit_intercept");
    int64_t R = K == 2 ? 1 : K, p = d + (fit_intercept ? 1 : 0);
    if (K < 2 || co->rows != R * p)
        return gsb__err(GSB_EINVAL, "LogisticRegression.stats_lossgrad: option n_classes >= 2 "
                        "and a coef of n_rows * (n_features + fit_intercept) = %lld values "
                        "needed (got %lld)", (long long)(R * p), (long long)co->rows);
    int32_t *yi = malloc((size_t)n * sizeof *yi);
    double *s = malloc((size_t)n * sizeof *s), *g = NULL, *o = NULL, loss = 0, ssum = 0;
    gsb__tensor Xb = GSB__TENSOR_NONE, yb = GSB__TENSOR_NONE, wb = GSB__TENSOR_NONE,
                cb = GSB__TENSOR_NONE, gb = GSB__TENSOR_NONE, out = GSB__TENSOR_NONE;
    int rc;
    if (!yi || !s) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = ((const double *)y->data)[i];
        if (!(v >= 0 && v < (double)K && v == floor(v))) {
            rc = gsb__err(GSB_EINVAL, "LogisticRegression.stats_lossgrad: y must hold class "
                          "indices 0..n_classes-1");
            goto done;
        }
        yi[i] = (int32_t)v;
    }
    GSB_CHECK(effective(c, gsb__in(c, "sample_weight"), yi, n, K, s));
    for (int64_t i = 0; i < n; i++)
        ssum += s[i];
    /* float32 X evaluates in double, as the single-process CPU fit does */
    GSB_CHECK(gsb__tensor_to_dtype(be, X, be == gsb__cpu_backend() ? GSB_F64 : X->dtype, &Xb));
    gsb__tensor yh = gsb__tensor_host_view(yi, GSB_I32, n, 1);
    GSB_CHECK(gsb__tensor_to(be, &yh, &yb));
    GSB_CHECK(gsb__tensor_from_f64(be, GSB_F64, s, n, 1, &wb));
    GSB_CHECK(gsb__tensor_from_f64(be, GSB_F64, co->data, R, p, &cb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, R, p, &gb));
    GSB_CHECK(be->ops->logistic_loss_grad(be, &Xb, &yb, &wb, &cb, fit_intercept, &loss, &gb));
    GSB_CHECK(gsb__tensor_to_f64(&gb, &g));
    GSB_CHECK(gsb__stats_alloc(GSB__STATS_LOSSGRAD, R, p, 0, &out, &o));
    o[0] = ssum;
    o[1] = loss;
    memcpy(o + 2, g, (size_t)(R * p) * sizeof *o);
    rc = gsb__out(c, "stats", &out);
done:
    free(yi);
    free(s);
    free(g);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&yb);
    gsb__tensor_free(&wb);
    gsb__tensor_free(&cb);
    gsb__tensor_free(&gb);
    gsb__tensor_free(&out);
    return rc;
}

/* ---- the driver's L-BFGS by replay ------------------------------------------------ */

/* 1/C for the L2 penalty, 0 without one; the penalties lbfgs lacks are refused. */
static int l2_scale(gsb__ctx *c, double *out)
{
    const json_t *p = c->params;
    if (gsb__param_is(p, "solver", "liblinear"))
        return gsb__err(GSB_EUNSUPPORTED, "LogisticRegression: solver='liblinear' is not "
                        "supported by the distributed fit; use 'lbfgs'");
    if (gsb__param_bool(p, "warm_start"))
        return gsb__err(GSB_EUNSUPPORTED, "LogisticRegression: warm_start is not supported by "
                        "the distributed fit");
    const char *penalty = "l2";
    if (gsb__param_is(p, "penalty", "deprecated")) {
        double l1r = gsb__param_is_none(p, "l1_ratio") ? 0 : gsb__param_float(p, "l1_ratio");
        if (l1r != 0)
            penalty = "l1 or elasticnet";
    } else if (gsb__param_is_none(p, "penalty")) {
        penalty = NULL;
    } else if (!gsb__param_is(p, "penalty", "l2")) {
        penalty = "l1 or elasticnet";
    }
    if (penalty && strcmp(penalty, "l2") != 0)
        return gsb__err(GSB_EUNSUPPORTED, "LogisticRegression: only the L2 penalty (or none) "
                        "is supported by the distributed fit");
    double C = gsb__param_float(p, "C");
    *out = !penalty || isinf(C) ? 0.0 : 1.0 / C;
    return GSB_OK;
}

typedef struct replay {
    gsb__ctx *c;
    const double *H; /* history rows: [x (P), sum s, loss, grad (P)] */
    int64_t rows, P, d, p;
    int64_t next;    /* the next evaluation's row */
    double l2;       /* 1 / C (0: none) */
    double *want;    /* the point asked for past the history (P) */
    int need;
} replay;

static int replay_eval(void *data, const double *x, double *f, double *g)
{
    replay *r = data;
    if (r->next >= r->rows) {
        memcpy(r->want, x, (size_t)r->P * sizeof *x);
        r->need = 1;
        return gsb__err(GSB_ECANCELLED, "evaluation needed"); /* stops the minimiser */
    }
    const double *row = r->H + r->next * (2 * r->P + 2);
    if (memcmp(row, x, (size_t)r->P * sizeof *x) != 0)
        return gsb__err(GSB_EINVAL, "LogisticRegression: evaluation %lld of the history is "
                        "not at the point the minimiser asks for (a history from another "
                        "fit or other parameters?)", (long long)r->next);
    double ssum = row[r->P], inv = 1.0 / ssum, l2 = r->l2 * inv, sq = 0;
    const double *gr = row + r->P + 2;
    for (int64_t k = 0; k < r->P; k++) {
        g[k] = gr[k] * inv;
        if (k % r->p < r->d) { /* the intercepts are not penalised */
            g[k] += l2 * x[k];
            sq += x[k] * x[k];
        }
    }
    *f = row[r->P + 1] * inv + 0.5 * l2 * sq;
    r->next++;
    return GSB_OK;
}

static int replay_iter(void *data, int64_t iteration, double f)
{
    replay *r = data;
    return gsb__progress(r->c, "iteration", iteration, f);
}

/* Replay the history: *done 0 with r->want the next point, or 1 with x the result. */
static int replay_run(gsb__ctx *c, replay *r, double *x, gsb__lbfgs_result *res,
                      gsb__lbfgs_opts *opts, int *done)
{
    const gsb__tensor *H = gsb__in(c, "history");
    r->c = c;
    r->d = gsb__opt_int(c, "n_features", -1);
    int fit_intercept = gsb__param_bool(c->params, "fit_intercept");
    r->p = r->d + (fit_intercept ? 1 : 0);
    r->P = (H->cols - 2) / 2;
    if (r->d < 1 || H->cols != 2 * r->P + 2 || r->P % r->p != 0 || H->dtype != GSB_F64)
        return gsb__err(GSB_EINVAL, "LogisticRegression: the history must be float64 rows of "
                        "[x, sum w, loss, gradient] for option n_features");
    r->H = H->data;
    r->rows = H->rows;
    r->next = 0;
    r->need = 0;
    if (!(r->H[r->P] > 0))
        return gsb__err(GSB_EINVAL, "The sample weights times class_weight sum to %g: "
                        "LogisticRegression needs a positive total weight.", r->H[r->P]);
    GSB_TRY(l2_scale(c, &r->l2));
    memcpy(x, r->H, (size_t)r->P * sizeof *x); /* the start: the first row's point */
    gsb__lbfgs_defaults(opts); /* as logistic.c's minimise() sets them up */
    opts->max_iter = gsb__param_int(c->params, "max_iter");
    opts->max_ls = 50;
    opts->pgtol = gsb__param_float(c->params, "tol");
    opts->ftol = 64 * DBL_EPSILON;
    int rc = gsb__lbfgs_minimize(r->P, x, replay_eval, replay_iter, r, opts, res);
    if (rc == GSB_ECANCELLED && r->need) {
        gsb__err_clear();
        *done = 0;
        return GSB_OK;
    }
    *done = 1;
    return rc;
}

int gsb__logistic_lbfgs_next(gsb__ctx *c)
{
    const gsb__tensor *H = gsb__in(c, "history");
    int64_t P = (H->cols - 2) / 2;
    double *x = malloc((size_t)(P > 0 ? P : 1) * sizeof *x);
    double *want = malloc((size_t)(P > 0 ? P : 1) * sizeof *want);
    gsb__tensor t = GSB__TENSOR_NONE;
    replay r = {.want = want};
    gsb__lbfgs_result res;
    gsb__lbfgs_opts opts;
    int done = 0, rc;
    if (!x || !want) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    GSB_CHECK(replay_run(c, &r, x, &res, &opts, &done));
    GSB_CHECK(gsb__tensor_from_f64(gsb__cpu_backend(), GSB_F64, done ? x : want, P, 1, &t));
    gsb__tensor_as_1d(&t);
    GSB_CHECK(gsb__out(c, "x", &t));
    rc = gsb__out_scalar(c, "done", done, GSB_I64);
done:
    free(x);
    free(want);
    gsb__tensor_free(&t);
    return rc;
}

/* classes_, coef_ (R x d), intercept_ (R), n_iter_ (1,) as logistic.c stores them. */
static int store(gsb__ctx *c, const replay *r, const double *x, int64_t n_iter)
{
    const gsb__tensor *cls = gsb__in(c, "classes");
    const char *dts = json_string_value(json_object_get(c->options, "dtype"));
    gsb_dtype dt = dts && strcmp(dts, "float32") == 0 ? GSB_F32 : GSB_F64;
    int64_t K = cls->rows, R = r->P / r->p, d = r->d;
    if (R != (K == 2 ? 1 : K))
        return gsb__err(GSB_EINVAL, "LogisticRegression: %lld classes for %lld coefficient "
                        "rows", (long long)K, (long long)R);
    int fit_intercept = r->p > r->d;
    gsb__tensor t;
    GSB_TRY(gsb__tensor_to_host(cls, &t));
    gsb__tensor_as_1d(&t);
    GSB_TRY(gsb__fit_set(c, "classes_", &t));
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, R, d, &t));
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < d; j++)
            gsb__tensor_set(&t, i * d + j, x[i * r->p + j]);
    GSB_TRY(gsb__fit_set(c, "coef_", &t));
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, R, 1, &t));
    for (int64_t i = 0; i < R; i++)
        gsb__tensor_set(&t, i, fit_intercept ? x[i * r->p + d] : 0.0);
    gsb__tensor_as_1d(&t);
    GSB_TRY(gsb__fit_set(c, "intercept_", &t));
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_I32, 1, 1, &t));
    gsb__tensor_set(&t, 0, (double)n_iter);
    gsb__tensor_as_1d(&t);
    GSB_TRY(gsb__fit_set(c, "n_iter_", &t));
    return gsb__fit_set_scalar(c, "n_features_in_", (double)d, GSB_I64);
}

int gsb__logistic_fit_from_stats(gsb__ctx *c)
{
    const gsb__tensor *H = gsb__in(c, "history");
    int64_t P = (H->cols - 2) / 2;
    double *x = malloc((size_t)(P > 0 ? P : 1) * sizeof *x);
    double *want = malloc((size_t)(P > 0 ? P : 1) * sizeof *want);
    replay r = {.want = want};
    gsb__lbfgs_result res;
    gsb__lbfgs_opts opts;
    int done = 0, rc;
    if (!x || !want) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    GSB_CHECK(replay_run(c, &r, x, &res, &opts, &done));
    if (!done) {
        rc = gsb__err(GSB_EINVAL, "LogisticRegression.fit_from_stats: the history ends before "
                      "the minimiser stops (call lbfgs_next until done)");
        goto done;
    }
    /* scipy may run one iteration past max_iter = 0; scikit-learn clips */
    int64_t n_iter = res.n_iter < opts.max_iter ? res.n_iter : opts.max_iter;
    gsb__lbfgs_warn(&res, n_iter, opts.max_iter, ADVICE);
    rc = store(c, &r, x, n_iter);
done:
    free(x);
    free(want);
    return rc;
}
