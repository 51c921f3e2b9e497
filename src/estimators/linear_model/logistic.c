/*
 * logistic.c - LogisticRegression, as scikit-learn 1.9.1's
 * sklearn.linear_model.LogisticRegression with solver='lbfgs'.
 *
 * The objective is scikit-learn's (LinearModelLoss), so the optimum is the
 * same:
 *     sum_i s_i loss_i / sum_i s_i  +  ||W||^2 / (2 C sum_i s_i)
 * with s = sample_weight * class_weight[y], W the coefficients without the
 * intercept, loss the binary log-loss (2 classes: one row of coefficients,
 * sigmoid, classes_[1] positive) or the multinomial one (K >= 3: K rows,
 * softmax).  The loss and its gradient are the backend's
 * logistic_loss_grad op; the minimiser is core/lbfgs.c on the host, set up
 * as scikit-learn sets up scipy's L-BFGS-B (m 10, gtol = tol, ftol
 * 64 eps, maxls 50, maxiter = max_iter), so it stops where scikit-learn
 * stops, in double whatever X's dtype.  On a GPU, X is uploaded once (while
 * the host finds the classes) and checked there for NaN / infinity; each
 * evaluation is one pass over X and one host wait for the loss and gradient
 * (docs/CUDA.md: LogisticRegression).
 *
 * Every solver name runs this L-BFGS (docs/PARITY.md): with the L2 penalty
 * or none, 'newton-cg', 'newton-cholesky', 'sag' and 'saga' minimise the
 * same objective, whose optimum is unique, so they differ from lbfgs only in
 * the path and in where within tol they stop.  'liblinear' penalises the
 * intercept as well (it is the weight of a constant feature of value
 * intercept_scaling): its objective, C * sum_i s_i loss_i + ||W||^2 / 2 +
 * b^2 / (2 intercept_scaling^2), is the one above times C sum(s) plus that
 * term, which the objective here then carries too.
 *
 * The L1 and elastic-net penalties (l1_ratio > 0, which scikit-learn
 * solves with solver='saga' only) add l1_ratio ||W||_1 / (C sum_i s_i) and
 * scale the L2 term by (1 - l1_ratio): saga's objective, minimised by
 * OWL-QN (solvers/owlqn.h) from the same loss and gradient, so coef_ is
 * saga's optimum within tol, with the same zeros; n_iter_ counts OWL-QN's
 * iterations, not saga's epochs.  liblinear's L1 penalty (which also
 * penalises the intercept) is not supported.
 *
 * Not converging within max_iter warns as scikit-learn does (a
 * ConvergenceWarning in its words, core/warn.h); ignored parameters (n_jobs,
 * random_state) are documented below.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/estimator.h"
#include "core/profile.h"
#include "core/warn.h"
#include "solvers/lbfgs.h"
#include "solvers/owlqn.h"
#include "estimators/common/classes.h"
#include "estimators/common/partial_stats.h"
#include "estimators/common/pyrepr.h"

/* ---- descriptor: parameters ---------------------------------------------- */

/* 'deprecated' is scikit-learn's hidden default: the penalty follows l1_ratio */
static const char *const penalty_choices[] = {"l1", "l2", "elasticnet", "~deprecated", NULL};
static const char *const class_weight_choices[] = {"balanced", NULL};
static const char *const solver_choices[] = {"lbfgs",           "liblinear", "newton-cg",
                                             "newton-cholesky", "sag",       "saga",
                                             NULL};

static const gsb__param_desc logistic_params[] = {
    {"penalty", GSB__P_STR | GSB__P_NONE, "\"deprecated\"", 0, 0, 0, penalty_choices,
     "Deprecated in scikit-learn 1.8: use l1_ratio and C. 'l2' or None (no penalty, C "
     "ignored) with lbfgs; 'l1' and 'elasticnet' with saga (as in scikit-learn)."},
    {"C", GSB__P_FLOAT, "1.0", 0, INFINITY, GSB__CLOSED_RIGHT, NULL,
     "Inverse of the regularisation strength: the L2 term is ||coef||^2 / (2 C sum(w))."},
    {"l1_ratio", GSB__P_FLOAT | GSB__P_NONE, "0.0", 0, 1, GSB__CLOSED_BOTH, NULL,
     "Elastic-net mixing: 0 (or None) is the L2 penalty (lbfgs); > 0 needs solver='saga' "
     "(fitted by OWL-QN on saga's objective)."},
    {"dual", GSB__P_BOOL, "false", 0, 0, 0, NULL,
     "Dual formulation (liblinear only): must be false."},
    {"tol", GSB__P_FLOAT, "0.0001", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Stop when max |gradient_i| <= tol (or the objective stops decreasing)."},
    {"fit_intercept", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "Fit an (unpenalised) intercept per coefficient row."},
    {"intercept_scaling", GSB__P_FLOAT, "1", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,
     "Used by liblinear only, which penalises the intercept b by b^2 / (2 "
     "intercept_scaling^2); ignored by the other solvers."},
    {"class_weight", GSB__P_DICT | GSB__P_STR | GSB__P_NONE, "null", 0, 0, 0,
     class_weight_choices,
     "None, 'balanced' (sum(w) / (n_classes * weighted bincount(y))) or an object "
     "{class value: weight} (keys are class values written as numbers, e.g. \"1\"); "
     "multiplies sample_weight."},
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH, NULL,
     "Accepted; unused: every solver name runs gsb's deterministic L-BFGS."},
    {"solver", GSB__P_STR, "\"lbfgs\"", 0, 0, 0, solver_choices,
     "Every name runs L-BFGS to the same optimum (with scikit-learn's checks of each "
     "solver); 'liblinear' also penalises the intercept, as liblinear does; 'saga' with "
     "l1_ratio > 0 runs OWL-QN on saga's L1 / elastic-net objective."},
    {"max_iter", GSB__P_INT, "100", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Maximum L-BFGS iterations; stopping there warns (ConvergenceWarning) as "
     "scikit-learn does."},
    {"verbose", GSB__P_INT | GSB__P_BOOL, "0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Print the objective of each iteration when no progress callback is set."},
    {"warm_start", GSB__P_BOOL, "false", 0, 0, 0, NULL,
     "Start from the previous fit's coef_ and intercept_ (their shape must fit the new "
     "problem, as in scikit-learn)."},
    {"n_jobs", GSB__P_INT | GSB__P_NONE, "null", 0, 0, 0, NULL,
     "No effect (deprecated in scikit-learn 1.8); the backend picks its own threads."},
    {0}};

/* ---- fit: penalty and solver, as LogisticRegression.fit checks them ------ */

/* Sets *l2_scale and *l1_scale: the penalty's (1 - r) / C and r / C for the
 * L1 share r (0 for 'l2', 1 for 'l1'), both 0 without a penalty; and
 * *icpt_scale, the intercept's share of the L2 penalty (liblinear's
 * 1 / intercept_scaling^2). */
static int check_penalty_solver(gsb__ctx *c, double *l2_scale, double *l1_scale,
                                double *icpt_scale)
{
    const json_t *p = c->params;
    const char *solver = gsb__param_str(p, "solver");
    double C = gsb__param_float(p, "C");
    int deprecated = gsb__param_is(p, "penalty", "deprecated");
    const char *penalty; /* NULL: None */
    if (deprecated) {
        double l1r = gsb__param_is_none(p, "l1_ratio") ? 0.0 : gsb__param_float(p, "l1_ratio");
        penalty = l1r == 0 ? "l2" : l1r == 1 ? "l1" : "elasticnet";
        if (isinf(C))
            penalty = NULL;
    } else {
        penalty = gsb__param_str(p, "penalty");
    }

    /* scikit-learn's _check_solver, in its order */
    int liblinear = strcmp(solver, "liblinear") == 0;
    if (!liblinear && strcmp(solver, "saga") != 0 && penalty && strcmp(penalty, "l2") != 0)
        return gsb__err(GSB_EINVAL, "Solver %s supports only 'l2' or None penalties, got %s "
                        "penalty.", solver, penalty);
    if (!liblinear && gsb__param_bool(p, "dual"))
        return gsb__err(GSB_EINVAL, "Solver %s supports only dual=False, got dual=True",
                        solver);
    if (penalty && strcmp(penalty, "elasticnet") == 0 && strcmp(solver, "saga") != 0)
        return gsb__err(GSB_EINVAL, "Only 'saga' solver supports elasticnet penalty, got "
                        "solver=%s.", solver);
    if (liblinear && !penalty)
        return gsb__err(GSB_EINVAL, "C=np.inf as well as penalty=None is not supported for "
                        "the liblinear solver");
    if (penalty && strcmp(penalty, "elasticnet") == 0 && gsb__param_is_none(p, "l1_ratio"))
        return gsb__err(GSB_EINVAL, "l1_ratio must be specified when penalty is elasticnet.");
    /* saga with the L1 or elastic-net penalty: OWL-QN on saga's objective
     * (its optimum within tol; owlqn.h) */
    int l1_path = penalty && strcmp(solver, "saga") == 0 &&
                  (strcmp(penalty, "l1") == 0 || strcmp(penalty, "elasticnet") == 0);
    /* liblinear's l1: another objective (the intercept penalised too) */
    if (penalty && strcmp(penalty, "l2") != 0 && !l1_path)
        return gsb__err(GSB_EUNSUPPORTED, "LogisticRegression: the '%s' penalty with solver "
                        "'%s' is not supported by gsb yet; use solver='saga'", penalty, solver);

    /* penalty None (given, or from C = inf) drops the L2 term */
    double r = !l1_path ? 0.0 : strcmp(penalty, "l1") == 0 ? 1.0
                                                         : gsb__param_float(p, "l1_ratio");
    *l2_scale = !penalty || isinf(C) ? 0.0 : (1.0 - r) / C;
    *l1_scale = !penalty || isinf(C) ? 0.0 : r / C;
    double s = gsb__param_float(p, "intercept_scaling");
    *icpt_scale = liblinear ? 1.0 / (s * s) : 0.0;
    return GSB_OK;
}

/* liblinear's own refusals, which LogisticRegression.fit raises before fitting. */
static int check_liblinear(gsb__ctx *c, const gsb__tensor *X, int64_t n_classes)
{
    if (!gsb__param_is(c->params, "solver", "liblinear"))
        return GSB_OK;
    if (n_classes >= 3)
        return gsb__err(GSB_EINVAL, "The 'liblinear' solver does not support multiclass "
                        "classification (n_classes >= 3). Either use another solver or wrap "
                        "the estimator in a OneVsRestClassifier to keep applying a "
                        "one-versus-rest scheme.");
    /* X may be on the device: its column maxima come through the backend */
    const gsb__backend *be = c->be;
    gsb__tensor Xb = GSB__TENSOR_NONE, lo = GSB__TENSOR_NONE, hi = GSB__TENSOR_NONE,
                hh = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, X->cols, 1, &lo));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, X->cols, 1, &hi));
    GSB_CHECK(be->ops->col_minmax(be, &Xb, &lo, &hi));
    GSB_CHECK(gsb__tensor_to_host(&hi, &hh));
    for (int64_t j = 0; j < X->cols; j++)
        if (gsb__tensor_get(&hh, j) > 1e30) {
            rc = gsb__err(GSB_EINVAL, "Using the 'liblinear' solver while X contains a "
                          "maximum value > 1e30 results in a frozen fit. Please choose "
                          "another solver or rescale the input X.");
            break;
        }
done:
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&lo);
    gsb__tensor_free(&hi);
    gsb__tensor_free(&hh);
    return rc;
}

/* ---- fit: classes, labels and weights -------------------------------------- */

/*
 * The effective sample weights s = sample_weight * class_weight[y]
 * (malloc'ed), or NULL for unit weights; *sum = sum(s).
 */
static int effective_weights(gsb__ctx *c, const gsb__tensor *sw, const int32_t *yi,
                             const double *classes, int64_t K, int64_t n, double **out,
                             double *sum)
{
    int has_cw = gsb__class_weight_given(c);
    *out = NULL;
    *sum = (double)n;
    if (sw) {
        const double *s = sw->data;
        int64_t i = 0;
        while (i < n && s[i] == 0)
            i++;
        if (i == n)
            return gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero "
                            "number.");
    }
    if (!sw && !has_cw)
        return GSB_OK;

    double *w = malloc((size_t)n * sizeof *w), *cw = malloc((size_t)K * sizeof *cw);
    int rc = GSB_OK;
    if (!w || !cw) {
        rc = gsb__err(GSB_ENOMEM, "LogisticRegression: out of memory for sample weights");
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        w[i] = sw ? ((const double *)sw->data)[i] : 1.0;
    /* 'balanced' counts with the sample weights, as LogisticRegression passes
     * them to compute_class_weight */
    GSB_CHECK(gsb__class_weights(c, classes, K, yi, n, w, cw));
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        if (has_cw)
            w[i] *= cw[yi[i]];
        s += w[i];
    }
    if (!(s > 0) || !isfinite(s)) {
        rc = gsb__err(GSB_EINVAL, "The sample weights times class_weight sum to %g: "
                      "LogisticRegression needs a positive total weight.", s);
        goto done;
    }
    *out = w;
    *sum = s;
    w = NULL;
done:
    free(w);
    free(cw);
    return rc;
}

/* ---- fit: warm start ------------------------------------------------------- */

/* x (R x p, intercept last) from the previous coef_ and intercept_, as
 * scikit-learn's warm start concatenates them, with its shape checks. */
static int warm_start(gsb__ctx *c, int64_t K, int64_t R, int64_t p, int fit_intercept,
                      double *x)
{
    /* liblinear has no warm start (scikit-learn ignores the flag for it) */
    if (!gsb__param_bool(c->params, "warm_start") || !gsb__attr(c, "coef_") ||
        gsb__param_is(c->params, "solver", "liblinear"))
        return GSB_OK;
    const gsb__tensor *coef, *icpt;
    GSB_TRY(gsb__attr_need(c, "coef_", 0, -1, -1, &coef));
    GSB_TRY(gsb__attr_need(c, "intercept_", coef->dtype, coef->rows, 1, &icpt));
    int64_t rows = coef->rows, cols = coef->cols + (fit_intercept ? 1 : 0);
    if (rows != R || cols != p) {
        if (K == 2)
            return gsb__err(GSB_EINVAL, "Initialization coef is of shape (%lld, %lld), "
                            "expected shape (%lld,) or (1, %lld)", (long long)rows,
                            (long long)cols, (long long)p, (long long)p);
        return gsb__err(GSB_EINVAL, "Initialization coef is of shape (%lld, %lld), expected "
                        "shape (%lld, %lld)", (long long)rows, (long long)cols,
                        (long long)K, (long long)p);
    }
    int64_t d = coef->cols;
    for (int64_t r = 0; r < R; r++) {
        for (int64_t j = 0; j < d; j++)
            x[r * p + j] = gsb__tensor_get(coef, r * d + j);
        if (fit_intercept)
            x[r * p + d] = gsb__tensor_get(icpt, r);
    }
    return GSB_OK;
}

/* ---- fit: the objective for L-BFGS ----------------------------------------- */

typedef struct objective {
    gsb__ctx *c;
    gsb__tensor X, y, w; /* on the backend; w.data NULL: unit weights */
    int64_t R, d, p;
    int64_t n_eval; /* evaluations: on the GPU, one host wait each */
    int fit_intercept;
    double inv_sw; /* 1 / sum(s) */
    double l2;     /* 1 / (C sum(s)), 0 without a penalty */
    double l2_icpt; /* the intercepts' penalty: l2 / intercept_scaling^2 (liblinear), or 0 */
} objective;

/* f = loss / sum(s) + l2/2 ||W||^2 (+ l2_icpt/2 ||b||^2) and its gradient, at x (R x p). */
static int objective_eval(void *data, const double *x, double *f, double *g)
{
    objective *o = data;
    const gsb__backend *be = o->c->be;
    double loss;
    /* x and g as host tensors: the op sends x and returns the loss and g in
     * one round trip (on the GPU one copy each way, one host wait) */
    gsb__tensor coef = gsb__tensor_host_view((void *)x, GSB_F64, o->R, o->p);
    gsb__tensor grad = gsb__tensor_host_view(g, GSB_F64, o->R, o->p);
    GSB_TRY(be->ops->logistic_loss_grad(be, &o->X, &o->y, o->w.data ? &o->w : NULL, &coef,
                                        o->fit_intercept, &loss, &grad));
    o->n_eval++;
    double sq = 0, sq_icpt = 0;
    for (int64_t r = 0; r < o->R; r++) {
        for (int64_t j = 0; j < o->p; j++) {
            int64_t k = r * o->p + j;
            g[k] *= o->inv_sw;
            if (j < o->d) {
                g[k] += o->l2 * x[k];
                sq += x[k] * x[k];
            } else { /* the intercept: penalised by liblinear only */
                g[k] += o->l2_icpt * x[k];
                sq_icpt += x[k] * x[k];
            }
        }
    }
    *f = loss * o->inv_sw + 0.5 * o->l2 * sq + 0.5 * o->l2_icpt * sq_icpt;
    return GSB_OK;
}

static int objective_iter(void *data, int64_t iteration, double f)
{
    objective *o = data;
    return gsb__progress(o->c, "iteration", iteration, f);
}

/* GSB_PROFILE's mark of the solver's phase, with its counts: on the GPU each
 * evaluation is one pass over X and one host wait (the line search's). */
static void profile_solver(const objective *o, const char *solver, int64_t n_iter)
{
    if (!gsb__profile_on())
        return;
    char phase[128];
    snprintf(phase, sizeof phase, "%s: %lld iterations, %lld evaluations (host waits)",
             solver, (long long)n_iter, (long long)o->n_eval);
    gsb__profile_mark(phase);
}

/* Most elements of float32 X upcast to one float64 copy per fit (256 MB). */
#define LOGISTIC_UPCAST_MAX_ELEMENTS ((int64_t)1 << 25)

/* scikit-learn's extra advice when LogisticRegression does not converge */
#define LOGISTIC_SOLVER_ADVICE                                                    \
    "Please also refer to the documentation for alternative solver options:\n"    \
    "    https://scikit-learn.org/stable/modules/linear_model.html#logistic-regression"

/* OWL-QN for the L1 share: weights l1 on the coefficients, none on intercepts. */
static int minimise_l1(objective *o, double l1, int64_t max_iter, double tol, double *x,
                       int64_t *n_iter)
{
    int64_t n = o->R * o->p;
    double *w = malloc((size_t)n * sizeof *w);
    if (!w)
        return gsb__err(GSB_ENOMEM, "LogisticRegression: out of memory for %lld weights",
                        (long long)n);
    for (int64_t k = 0; k < n; k++)
        w[k] = k % o->p < o->d ? l1 : 0.0;
    gsb__owlqn_opts opts;
    gsb__owlqn_defaults(&opts);
    opts.max_iter = max_iter;
    opts.pgtol = tol;
    gsb__owlqn_result res;
    int rc = gsb__owlqn_minimize(n, x, w, objective_eval, objective_iter, o, &opts, &res);
    free(w);
    *n_iter = res.n_iter;
    /* saga's own words when it stops at max_iter (sklearn/linear_model/_sag.py) */
    if (rc == GSB_OK && res.stop == GSB__OWLQN_MAX_ITER)
        gsb__warn(GSB__CONVERGENCE_WARNING,
                  "The max_iter was reached which means the coef_ did not converge");
    return rc;
}

/* Minimise from x; *n_iter as scikit-learn reports it.  Xb: X already on
 * the backend (taken over, left empty), or empty: X is moved here. */
static int minimise(gsb__ctx *c, const gsb__tensor *X, gsb__tensor *Xb, const int32_t *yi,
                    const double *w, double sw_sum, double l2_scale, double l1_scale,
                    double icpt_scale, int64_t R, int fit_intercept, double *x,
                    int64_t *n_iter)
{
    const gsb__backend *be = c->be;
    int64_t n = X->rows, d = X->cols, p = d + (fit_intercept ? 1 : 0);
    objective o = {.c = c, .R = R, .d = d, .p = p, .fit_intercept = fit_intercept,
                   .inv_sw = 1.0 / sw_sum, .l2 = l2_scale / sw_sum,
                   .l2_icpt = l2_scale * icpt_scale / sw_sum};
    gsb__tensor yh = gsb__tensor_host_view((void *)yi, GSB_I32, n, 1);
    int rc;
    /* The CPU twin evaluates in double, upcasting float32 X block by block at
     * every evaluation; upcast it once instead (the same doubles, so the same
     * results) unless the copy would be large. */
    const int uploaded = Xb->data != NULL;
    if (uploaded) {
        o.X = *Xb;
        *Xb = GSB__TENSOR_NONE;
    } else if (be == gsb__cpu_backend() && X->dtype == GSB_F32 &&
               n * d <= LOGISTIC_UPCAST_MAX_ELEMENTS) {
        GSB_CHECK(gsb__tensor_to_dtype(be, X, GSB_F64, &o.X));
    } else {
        GSB_CHECK(gsb__tensor_to(be, X, &o.X));
    }
    GSB_CHECK(gsb__tensor_to(be, &yh, &o.y));
    if (w) {
        gsb__tensor wh = gsb__tensor_host_view((void *)w, GSB_F64, n, 1);
        GSB_CHECK(gsb__tensor_to(be, &wh, &o.w));
    }
    gsb__profile_mark(uploaded ? "upload y, sample weights" : "upload X, y, sample weights");
    /* X's NaN / infinity check, when the dispatcher left it to the backend */
    GSB_CHECK(gsb__x_check_on_backend(c, X, &o.X));
    gsb__profile_mark("X checked for NaN / infinity");
    if (l1_scale > 0) {
        rc = minimise_l1(&o, l1_scale / sw_sum, gsb__param_int(c->params, "max_iter"),
                         gsb__param_float(c->params, "tol"), x, n_iter);
        profile_solver(&o, "OWL-QN", *n_iter);
        goto done;
    }

    gsb__lbfgs_opts opts;
    gsb__lbfgs_defaults(&opts); /* m 10 and maxfun 15000, as scikit-learn leaves them */
    opts.max_iter = gsb__param_int(c->params, "max_iter");
    opts.max_ls = 50;
    opts.pgtol = gsb__param_float(c->params, "tol");
    opts.ftol = 64 * DBL_EPSILON;
    gsb__lbfgs_result res;
    GSB_CHECK(gsb__lbfgs_minimize(R * p, x, objective_eval, objective_iter, &o, &opts, &res));
    profile_solver(&o, "L-BFGS", res.n_iter);
    /* scipy may run one iteration past max_iter = 0; scikit-learn clips */
    *n_iter = res.n_iter < opts.max_iter ? res.n_iter : opts.max_iter;
    gsb__lbfgs_warn(&res, *n_iter, opts.max_iter, LOGISTIC_SOLVER_ADVICE);
done:
    gsb__tensor_free(&o.X);
    gsb__tensor_free(&o.y);
    gsb__tensor_free(&o.w);
    return rc;
}

/* ---- fit -------------------------------------------------------------------- */

/*
 * The classes and class indices of y (host work: ~4 ms for 1M labels) and,
 * when the fit runs on a GPU, X's upload there (*Xb: ~11 ms for a 256 MB X
 * from pageable memory) at the same time, in two OpenMP sections; else *Xb
 * stays empty and the solver moves X itself.  A label error wins over a
 * failed upload (scikit-learn refuses y before anything could run out of
 * memory); errors are per thread, so each section's message is carried back.
 */
static int labels_while_uploading(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *y,
                                  double **classes, int64_t *K, int32_t *yi, gsb__tensor *Xb)
{
    const gsb__backend *be = c->be, *cpu = gsb__cpu_backend();
    *Xb = GSB__TENSOR_NONE;
    if (be == cpu || X->be != cpu)
        return gsb__labels_encode(c, y, classes, K, yi);
    int rc_up = GSB_OK, rc_lab = GSB_OK;
    char up_msg[512] = "", lab_msg[512] = "";
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
        {
            rc_up = gsb__tensor_to(be, X, Xb);
            if (rc_up != GSB_OK)
                snprintf(up_msg, sizeof up_msg, "%s", gsb_errmsg());
        }
#pragma omp section
        {
            rc_lab = gsb__labels_encode(c, y, classes, K, yi);
            if (rc_lab != GSB_OK)
                snprintf(lab_msg, sizeof lab_msg, "%s", gsb_errmsg());
        }
    }
    if (rc_lab != GSB_OK) {
        gsb__tensor_free(Xb);
        return gsb__err(rc_lab, "%s", lab_msg);
    }
    if (rc_up != GSB_OK) {
        free(*classes);
        *classes = NULL;
        return gsb__err(rc_up, "%s", up_msg);
    }
    return GSB_OK;
}

static int store_fit(gsb__ctx *c, gsb_dtype dtype, const double *classes, int64_t K,
                     int64_t R, int64_t d, int fit_intercept, const double *x, int64_t n_iter)
{
    const gsb__backend *cpu = gsb__cpu_backend();
    int64_t p = d + (fit_intercept ? 1 : 0);
    gsb__tensor cls = GSB__TENSOR_NONE, coef = GSB__TENSOR_NONE, icpt = GSB__TENSOR_NONE,
                it = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_F64, K, 1, &cls));
    GSB_CHECK(gsb__tensor_alloc(cpu, dtype, R, d, &coef));
    GSB_CHECK(gsb__tensor_alloc(cpu, dtype, R, 1, &icpt));
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_I32, 1, 1, &it));
    memcpy(cls.data, classes, (size_t)K * sizeof(double));
    for (int64_t r = 0; r < R; r++) {
        for (int64_t j = 0; j < d; j++)
            gsb__tensor_set(&coef, r * d + j, x[r * p + j]);
        gsb__tensor_set(&icpt, r, fit_intercept ? x[r * p + d] : 0.0);
    }
    gsb__tensor_set(&it, 0, (double)n_iter);
    gsb__tensor_as_1d(&cls);
    gsb__tensor_as_1d(&icpt);
    /* liblinear without an intercept: scikit-learn's intercept_ is the scalar 0.0 */
    if (!fit_intercept && gsb__param_is(c->params, "solver", "liblinear"))
        icpt.ndim = 0;
    gsb__tensor_as_1d(&it);
    GSB_CHECK(gsb__fit_set(c, "classes_", &cls));
    GSB_CHECK(gsb__fit_set(c, "coef_", &coef));
    GSB_CHECK(gsb__fit_set(c, "intercept_", &icpt));
    rc = gsb__fit_set(c, "n_iter_", &it);
done:
    gsb__tensor_free(&cls);
    gsb__tensor_free(&coef);
    gsb__tensor_free(&icpt);
    gsb__tensor_free(&it);
    return rc;
}

static int logistic_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *y = gsb__in(c, "y");
    const gsb__tensor *sw = gsb__in(c, "sample_weight");
    double l2_scale = 0, l1_scale = 0, icpt_scale = 0;
    GSB_TRY(check_penalty_solver(c, &l2_scale, &l1_scale, &icpt_scale));

    int64_t n = X->rows, d = X->cols, K = 0;
    int fit_intercept = gsb__param_bool(c->params, "fit_intercept");
    double *classes = NULL, *w = NULL, *x = NULL, sw_sum = 0;
    int32_t *yi = malloc((size_t)n * sizeof *yi);
    gsb__tensor Xb = GSB__TENSOR_NONE; /* X on a GPU (labels_while_uploading) */
    int rc;
    if (!yi) {
        rc = gsb__err(GSB_ENOMEM, "LogisticRegression: out of memory for %lld labels",
                      (long long)n);
        goto done;
    }
    GSB_CHECK(labels_while_uploading(c, X, y, &classes, &K, yi, &Xb));
    GSB_CHECK(check_liblinear(c, Xb.data ? &Xb : X, K));
    if (K < 2) {
        char v[40];
        gsb__py_float_repr(classes[0], v, sizeof v);
        rc = gsb__err(GSB_EINVAL, "This solver needs samples of at least 2 classes in the "
                      "data, but the data contains only one class: %s", v);
        goto done;
    }
    GSB_CHECK(effective_weights(c, sw, yi, classes, K, n, &w, &sw_sum));
    gsb__profile_mark(Xb.data ? "classes and weights (host) while X uploads"
                              : "classes and weights (host)");

    int64_t R = K == 2 ? 1 : K, p = d + (fit_intercept ? 1 : 0);
    x = calloc((size_t)(R * p), sizeof *x);
    if (!x) {
        rc = gsb__err(GSB_ENOMEM, "LogisticRegression: out of memory for %lld coefficients",
                      (long long)(R * p));
        goto done;
    }
    GSB_CHECK(warm_start(c, K, R, p, fit_intercept, x));
    int64_t n_iter = 0;
    GSB_CHECK(minimise(c, X, &Xb, yi, w, sw_sum, l2_scale, l1_scale, icpt_scale, R,
                       fit_intercept, x, &n_iter));
    rc = store_fit(c, X->dtype, classes, K, R, d, fit_intercept, x, n_iter);
done:
    gsb__tensor_free(&Xb);
    free(yi);
    free(classes);
    free(w);
    free(x);
    return rc;
}

/* ---- prediction -------------------------------------------------------------- */

/*
 * decision_function on the host: S (n x R) = X coef_^T + intercept_, in
 * float64 unless both X and coef_ are float32 (numpy's promotion).  Also
 * checks the fitted state and returns classes_.
 */
static int decision(gsb__ctx *c, gsb__tensor *S, const gsb__tensor **classes)
{
    const gsb__tensor *X = gsb__in(c, "X"), *coef, *icpt;
    GSB_TRY(gsb__attr_need(c, "classes_", GSB_F64, -1, 1, classes));
    int64_t K = (*classes)->rows, R = K == 2 ? 1 : K;
    if (K < 2)
        return gsb__err(GSB_ECORRUPT, "%s: fitted attribute 'classes_' holds %lld class(es)",
                        c->est->name, (long long)K);
    GSB_TRY(gsb__attr_need(c, "coef_", 0, R, X->cols, &coef));
    GSB_TRY(gsb__attr_need(c, "intercept_", coef->dtype, R, 1, &icpt));

    const gsb__backend *be = c->be;
    gsb_dtype dt = X->dtype == GSB_F32 && coef->dtype == GSB_F32 ? GSB_F32 : GSB_F64;
    gsb__tensor Xb = GSB__TENSOR_NONE, Wb = GSB__TENSOR_NONE, Ib = GSB__TENSOR_NONE,
                Sb = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_to_dtype(be, X, dt, &Xb));
    GSB_CHECK(gsb__tensor_to_dtype(be, coef, dt, &Wb));
    GSB_CHECK(gsb__tensor_to_dtype(be, icpt, dt, &Ib));
    GSB_CHECK(gsb__tensor_alloc(be, dt, X->rows, R, &Sb));
    GSB_CHECK(be->ops->gemm(be, 0, 1, 1.0, &Xb, &Wb, 0.0, &Sb));
    GSB_CHECK(be->ops->col_affine(be, &Sb, NULL, NULL, &Ib, &Sb));
    GSB_CHECK(gsb__tensor_to_host(&Sb, S));
done:
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Wb);
    gsb__tensor_free(&Ib);
    gsb__tensor_free(&Sb);
    return rc;
}

static int logistic_decision_function(gsb__ctx *c)
{
    gsb__tensor S;
    const gsb__tensor *classes;
    GSB_TRY(decision(c, &S, &classes));
    if (S.cols == 1) /* binary: (n,) as scikit-learn ravels it */
        gsb__tensor_as_1d(&S);
    else
        S.ndim = 2;
    return gsb__out(c, "scores", &S);
}

static int logistic_predict(gsb__ctx *c)
{
    gsb__tensor S, labels;
    const gsb__tensor *classes;
    GSB_TRY(decision(c, &S, &classes));
    int64_t n = S.rows, R = S.cols;
    int rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, 1, &labels);
    if (rc == GSB_OK) {
        const double *cls = classes->data;
        double *out = labels.data;
        for (int64_t i = 0; i < n; i++) {
            int64_t best = 0;
            if (R == 1) {
                best = gsb__tensor_get(&S, i) > 0;
            } else {
                /* argmax; the first of equal scores wins, as numpy's */
                for (int64_t k = 1; k < R; k++)
                    if (gsb__tensor_get(&S, i * R + k) > gsb__tensor_get(&S, i * R + best))
                        best = k;
            }
            out[i] = cls[best];
        }
        gsb__tensor_as_1d(&labels);
        rc = gsb__out(c, "labels", &labels);
    }
    gsb__tensor_free(&S);
    return rc;
}

/*
 * Probabilities (n x K) in the scores' dtype: [1 - sigmoid, sigmoid] for
 * binary, softmax otherwise; with take_log, their logarithm (scikit-learn
 * takes log(predict_proba), so a probability that rounds to 0 gives -inf).
 */
static int probabilities(gsb__ctx *c, int take_log)
{
    gsb__tensor S, P;
    const gsb__tensor *classes;
    GSB_TRY(decision(c, &S, &classes));
    int64_t n = S.rows, R = S.cols, K = classes->rows;
    int rc = gsb__tensor_alloc(gsb__cpu_backend(), S.dtype, n, K, &P);
    if (rc != GSB_OK) {
        gsb__tensor_free(&S);
        return rc;
    }
    for (int64_t i = 0; i < n; i++) {
        if (R == 1) {
            double t = gsb__tensor_get(&S, i);
            double e = exp(-fabs(t)), p = t >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
            gsb__tensor_set(&P, i * 2 + 1, p);
            /* 1 - p from the stored (maybe float32) p, as numpy does */
            gsb__tensor_set(&P, i * 2, 1.0 - gsb__tensor_get(&P, i * 2 + 1));
        } else {
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < K; k++)
                mx = fmax(mx, gsb__tensor_get(&S, i * K + k));
            for (int64_t k = 0; k < K; k++)
                sum += exp(gsb__tensor_get(&S, i * K + k) - mx);
            for (int64_t k = 0; k < K; k++)
                gsb__tensor_set(&P, i * K + k, exp(gsb__tensor_get(&S, i * K + k) - mx) / sum);
        }
        if (take_log)
            for (int64_t k = 0; k < K; k++)
                gsb__tensor_set(&P, i * K + k, log(gsb__tensor_get(&P, i * K + k)));
    }
    gsb__tensor_free(&S);
    P.ndim = 2;
    return gsb__out(c, take_log ? "log_proba" : "proba", &P);
}

static int logistic_predict_proba(gsb__ctx *c) { return probabilities(c, 0); }
static int logistic_predict_log_proba(gsb__ctx *c) { return probabilities(c, 1); }

/* ---- descriptor ------------------------------------------------------------- */

static const gsb__method_desc logistic_methods[] = {
    {"fit", logistic_fit,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_CHECK_ON_BACKEND},
      {"y", GSB__IN_LABELS},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     1, "Fit by L-BFGS on scikit-learn's objective (y: class labels as float64)."},
    {"predict", logistic_predict, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0,
     "Class of each sample (argmax of the scores), as 'labels' (float64 class values)."},
    {"predict_proba", logistic_predict_proba, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0,
     "Probability of each class (columns in classes_ order), as 'proba' (n, n_classes)."},
    {"predict_log_proba", logistic_predict_log_proba, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0,
     "Logarithm of predict_proba, as 'log_proba'."},
    {"decision_function", logistic_decision_function, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0,
     "X @ coef_.T + intercept_, as 'scores': (n,) for two classes, else (n, n_classes)."},
    GSB__LOGISTIC_STATS_ROWS, GSB__STATS_MERGE_ROW,
    {0}};

static const gsb__attr_desc logistic_attrs[] = {
    {"classes_", "Sorted class labels (float64)."},
    {"coef_", "Coefficients (1, n_features) for two classes, else (n_classes, n_features); "
              "X's dtype."},
    {"intercept_", "Intercepts (1,) or (n_classes,), X's dtype; zeros without fit_intercept."},
    {"n_iter_", "L-BFGS (OWL-QN with l1_ratio > 0) iterations as int32 of shape (1,); equal to max_iter when the fit did "
                "not converge."},
    {0}};

const gsb__estimator_desc gsb__est_LogisticRegression = {
    "LogisticRegression", "linear_model", GSB__KIND_CLASSIFIER, logistic_params,
    logistic_methods, logistic_attrs,
    "Logistic regression (binary or multinomial) with an L2 penalty, fitted by L-BFGS as "
    "scikit-learn's solver='lbfgs', or L1 / elastic-net penalties (solver='saga', fitted by "
    "OWL-QN)."};
