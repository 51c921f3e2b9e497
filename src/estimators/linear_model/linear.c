/*
 * linear.c - LinearRegression and Ridge (scikit-learn's sklearn.linear_model).
 *
 * Both prepare the data as scikit-learn does for dense X (centring and
 * sqrt(sample_weight) scaling, linear_common.c), solve for coef_ on the
 * backend, then set intercept_ = y_mean - x_mean @ coef_.
 *
 * LinearRegression solves least squares exactly with the lstsq op (minimum
 * norm for rank-deficient X; singular values below tol * max are cut, as
 * scipy.linalg.lstsq(cond=tol) does); float32 X that is well conditioned
 * goes through the float64 normal equations instead, more accurate there and
 * a fraction of the SVD's time (linear_gram.c).  Ridge solves (X^T X + alpha I) w = X^T y
 * by Cholesky (posv), or the dual (X X^T + alpha I) d = y, w = X^T d when there
 * are more features than samples, or via the SVD for solver='svd'.  For
 * float32 data the Gram matrix and X^T y are formed in float32 (as
 * scikit-learn does; the backends accumulate them carefully, see
 * docs/CUDA.md) but the small p x p (or n x n) system is converted to
 * float64 and solved there: the float32 Cholesky would add an error of
 * cond(A) * eps32 of its own on top of the Gram matrix's rounding.  The
 * solution is rounded back to float32 when stored.  The
 * iterative solvers scikit-learn offers ('sparse_cg', 'lsqr', 'sag', 'saga')
 * minimise the same objective; here they get the exact solution, which those
 * solvers approach within tol.
 *
 * positive=True (both estimators) is non-negative least squares, solved on
 * the host with the Lawson-Hanson active-set method on the normal equations
 * X^T X, X^T y (computed on the backend; Ridge adds alpha to the diagonal).
 * The result is the exact constrained optimum that scipy.optimize.nnls
 * (LinearRegression) and L-BFGS-B (Ridge, within tol) compute.
 *
 * Ridge's n_iter_ (None for the exact solvers in scikit-learn, iteration
 * counts for lsqr/sag/saga) is not stored, and neither is solver_: fitted
 * attributes are arrays and solver_ is a string.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/estimator.h"
#include "core/profile.h"
#include "estimators/common/partial_stats.h"
#include "estimators/linear_model/linear_common.h"

/* n x n host matrix a * I. */
static double *scaled_identity(int64_t n, double a)
{
    double *m = calloc((size_t)(n > 0 ? n * n : 1), sizeof *m);
    if (m)
        for (int64_t i = 0; i < n; i++)
            m[i * n + i] = a;
    return m;
}


/* Transpose a host p x k array (the solvers' X^T-shaped result) into k x p. */
static double *transpose(const double *a, int64_t p, int64_t k)
{
    double *t = malloc((size_t)(p > 0 && k > 0 ? p * k : 1) * sizeof *t);
    if (t)
        for (int64_t i = 0; i < p; i++)
            for (int64_t j = 0; j < k; j++)
                t[j * p + i] = a[i * k + j];
    return t;
}

/* ======================================================================
 * Non-negative least squares (Lawson-Hanson on the normal equations)
 * ==================================================================== */

/* Cholesky solve of the m x m system G[idx, idx] z = b[idx]; 0 when not SPD. */
static int chol_solve_sub(const double *G, int64_t p, const int64_t *idx, int64_t m,
                          const double *b, double *L, double *z)
{
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j <= i; j++) {
            double s = G[idx[i] * p + idx[j]];
            for (int64_t q = 0; q < j; q++)
                s -= L[i * m + q] * L[j * m + q];
            if (i == j) {
                /* a pivot lost to rounding means a column in the span of the others */
                if (!(s > 1e-12 * fabs(G[idx[i] * p + idx[i]])) || s <= 0)
                    return 0;
                L[i * m + i] = sqrt(s);
            } else {
                L[i * m + j] = s / L[j * m + j];
            }
        }
    }
    for (int64_t i = 0; i < m; i++) {
        double s = b[idx[i]];
        for (int64_t q = 0; q < i; q++)
            s -= L[i * m + q] * z[q];
        z[i] = s / L[i * m + i];
    }
    for (int64_t i = m - 1; i >= 0; i--) {
        double s = z[i];
        for (int64_t q = i + 1; q < m; q++)
            s -= L[q * m + i] * z[q];
        z[i] = s / L[i * m + i];
    }
    return 1;
}

/*
 * min 0.5 x^T G x - b^T x subject to x >= 0, G (p x p) symmetric positive
 * semi-definite: the normal-equation form of min ||A x - y|| with G = A^T A,
 * b = A^T y.  Lawson & Hanson's active-set algorithm: grow the passive
 * (free) set by the most promising variable, solve the unconstrained problem
 * on it, and step back to the boundary when a free variable would go
 * negative.
 */
int gsb__lin_nnls(gsb__ctx *c, const double *G, const double *b, int64_t p, double *x)
{
    int64_t *idx = malloc((size_t)p * sizeof *idx);
    char *passive = calloc((size_t)p, 1), *excluded = calloc((size_t)p, 1);
    double *w = malloc((size_t)p * sizeof *w), *z = malloc((size_t)p * sizeof *z);
    double *L = malloc((size_t)(p * p) * sizeof *L);
    int rc = GSB_OK;
    if (!idx || !passive || !excluded || !w || !z || !L) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    for (int64_t j = 0; j < p; j++)
        x[j] = 0;
    double gmax = 0, bmax = 0;
    for (int64_t j = 0; j < p * p; j++)
        gmax = fmax(gmax, fabs(G[j]));
    for (int64_t j = 0; j < p; j++)
        bmax = fmax(bmax, fabs(b[j]));
    /* scipy's nnls gives up after 3 * n iterations; Lawson-Hanson needs far fewer */
    int64_t max_iter = 3 * p + 10, iter = 0;
    for (;;) {
        double xmax = 0;
        for (int64_t j = 0; j < p; j++)
            xmax = fmax(xmax, x[j]);
        /* w = b - G x is the negative gradient; below tol it is rounding noise */
        double tol = 10 * DBL_EPSILON * (double)p * (bmax + gmax * xmax);
        int64_t best = -1;
        for (int64_t j = 0; j < p; j++) {
            if (passive[j] || excluded[j])
                continue;
            double s = b[j];
            for (int64_t q = 0; q < p; q++)
                s -= G[j * p + q] * x[q];
            w[j] = s;
            if (s > tol && (best < 0 || s > w[best]))
                best = j;
        }
        if (best < 0)
            break;
        if (++iter > max_iter) {
            rc = gsb__err(GSB_ENUMERIC, "Maximum number of iterations reached.");
            goto done;
        }
        GSB_CHECK(gsb__progress(c, "nnls iteration", iter, 0.0));
        passive[best] = 1;
        for (;;) {
            int64_t m = 0;
            for (int64_t j = 0; j < p; j++)
                if (passive[j])
                    idx[m++] = j;
            if (!chol_solve_sub(G, p, idx, m, b, L, z)) {
                /* the new column depends on the free ones: it cannot help */
                passive[best] = 0;
                excluded[best] = 1;
                break;
            }
            int all_pos = 1;
            for (int64_t i = 0; i < m; i++)
                all_pos &= z[i] > 0;
            if (all_pos) {
                for (int64_t i = 0; i < m; i++)
                    x[idx[i]] = z[i];
                break;
            }
            /* step from x toward z until the first free variable reaches 0; that
             * one (at least) leaves the free set, so this loop ends */
            double alpha = INFINITY;
            int64_t first = -1;
            for (int64_t i = 0; i < m; i++)
                if (z[i] <= 0) {
                    double a = x[idx[i]] / (x[idx[i]] - z[i]);
                    if (a < alpha)
                        alpha = a, first = i;
                }
            for (int64_t i = 0; i < m; i++) {
                int64_t j = idx[i];
                x[j] += alpha * (z[i] - x[j]);
                if (i == first || x[j] <= 0 || (z[i] <= 0 && x[j] <= DBL_EPSILON * fabs(z[i]))) {
                    x[j] = 0;
                    passive[j] = 0;
                }
            }
            memset(excluded, 0, (size_t)p); /* the free set changed its span */
        }
    }
done:
    free(idx);
    free(passive);
    free(excluded);
    free(w);
    free(z);
    free(L);
    return rc;
}

/*
 * Non-negative coefficients for every target: G = X^T X + diag(alpha) and
 * B = X^T Y in float64 on the backend, then NNLS per target on the host.
 * coef (k x p host doubles) is allocated here.  alpha may be NULL (no penalty).
 */
static int positive_coef(gsb__ctx *c, const gsb__lin_data *d, const double *alpha, double **coef)
{
    const gsb__backend *be = c->be;
    int64_t p = d->p, k = d->k;
    gsb__tensor X64 = GSB__TENSOR_NONE, Y64 = GSB__TENSOR_NONE;
    gsb__tensor Gb = GSB__TENSOR_NONE, Bb = GSB__TENSOR_NONE;
    double *G = NULL, *B = NULL, *bt = NULL, *x = NULL;
    int rc;
    *coef = NULL;
    /* float64 even for float32 X: the normal equations square the condition number */
    GSB_CHECK(gsb__tensor_to_dtype(be, &d->X, GSB_F64, &X64));
    GSB_CHECK(gsb__tensor_to_dtype(be, &d->Y, GSB_F64, &Y64));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, p, p, &Gb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, p, k, &Bb));
    GSB_CHECK(be->ops->syrk(be, 1.0, &X64, 0.0, &Gb));
    GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &X64, &Y64, 0.0, &Bb));
    GSB_CHECK(gsb__lin_download_f64(&Gb, &G));
    GSB_CHECK(gsb__lin_download_f64(&Bb, &B));
    bt = malloc((size_t)p * sizeof *bt);
    x = malloc((size_t)(p * k) * sizeof *x);
    if (!bt || !x) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    for (int64_t t = 0; t < k; t++) {
        double a = alpha ? alpha[t] : 0.0, prev = alpha && t > 0 ? alpha[t - 1] : 0.0;
        for (int64_t i = 0; i < p; i++) {
            G[i * p + i] += a - prev; /* diagonal moves from the last target's alpha */
            bt[i] = B[i * k + t];
        }
        GSB_CHECK(gsb__lin_nnls(c, G, bt, p, x + t * p));
    }
    *coef = x;
    x = NULL;
done:
    gsb__tensor_free(&X64);
    gsb__tensor_free(&Y64);
    gsb__tensor_free(&Gb);
    gsb__tensor_free(&Bb);
    free(G);
    free(B);
    free(bt);
    free(x);
    return rc;
}

/* ======================================================================
 * Prediction (both estimators)
 * ==================================================================== */

/* ======================================================================
 * LinearRegression
 * ==================================================================== */

static const gsb__param_desc lr_params[] = {
    {"fit_intercept", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "fit an intercept (centre X and y) or assume centred data"},
    {"copy_X", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "accepted for compatibility: X is never modified in place"},
    {"tol", GSB__P_FLOAT, "1e-06", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "singular values below tol * the largest are treated as zero (lstsq cond)"},
    {"n_jobs", GSB__P_INT | GSB__P_NONE, "null", 0, 0, 0, NULL,
     "accepted for compatibility: the backend decides its own parallelism"},
    {"positive", GSB__P_BOOL, "false", 0, 0, 0, NULL,
     "force non-negative coefficients (non-negative least squares)"},
    {0}};

/* Exact least squares on the prepared data: coef (k x p), singular values, rank. */
static int lr_lstsq(gsb__ctx *c, const gsb__lin_data *d, double tol, double **coef)
{
    const gsb__backend *be = c->be;
    int64_t r = d->n < d->p ? d->n : d->p, rank = 0;
    gsb__tensor Bt = GSB__TENSOR_NONE, S = GSB__TENSOR_NONE;
    double *bt = NULL;
    int rc;
    *coef = NULL;
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, d->p, d->k, &Bt));
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, r, 1, &S));
    GSB_CHECK(be->ops->lstsq(be, &d->X, &d->Y, tol, &Bt, &S, &rank));
    GSB_CHECK(gsb__lin_download_f64(&Bt, &bt));
    if (!(*coef = transpose(bt, d->p, d->k))) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    S.ndim = 1;
    GSB_CHECK(gsb__fit_set(c, "singular_", &S));
    rc = gsb__fit_set_scalar(c, "rank_", (double)rank, GSB_I64);
done:
    gsb__tensor_free(&Bt);
    gsb__tensor_free(&S);
    free(bt);
    if (rc != GSB_OK) {
        free(*coef);
        *coef = NULL;
    }
    return rc;
}

static int lr_fit(gsb__ctx *c)
{
    int fit_intercept = gsb__param_bool(c->params, "fit_intercept");
    int positive = gsb__param_bool(c->params, "positive");
    gsb__lin_data d;
    double *coef = NULL;
    int rc, streamed;
    GSB_TRY(gsb__lin_fit_streamed(c, 0, &streamed)); /* X larger than the backend's memory */
    if (streamed)
        return GSB_OK;
    GSB_TRY(gsb__lin_prepare(c->be, gsb__in(c, "X"), gsb__in(c, "y"), gsb__in(c, "sample_weight"),
                             fit_intercept, 0, &d));
    gsb__profile_mark("X, y to the backend, centred");
    /* X's NaN / infinity check, when the dispatcher left it to the backend: a
     * non-finite entry stays non-finite through centring and weighting */
    GSB_CHECK(gsb__x_check_on_backend(c, gsb__in(c, "X"), &d.X));
    gsb__profile_mark("X checked for NaN / infinity");
    gsb_dtype coef_dtype = d.dtype;
    if (positive) {
        GSB_CHECK(positive_coef(c, &d, NULL, &coef));
        /* scikit-learn keeps scipy's float64 nnls result unless the intercept
         * step casts it back to X's dtype */
        if (!fit_intercept)
            coef_dtype = GSB_F64;
    } else {
        double tol = gsb__param_float(c->params, "tol");
        int done = 0; /* float32: the float64 normal equations where X is well conditioned */
        GSB_CHECK(gsb__lin_lstsq_gram(c, &d, tol, &coef, &done));
        if (!done)
            GSB_CHECK(lr_lstsq(c, &d, tol, &coef));
    }
    gsb__profile_mark(positive ? "non-negative least squares" : "least squares (lstsq)");
    rc = gsb__lin_store(c, &d, coef, coef_dtype, fit_intercept, d.y_1d);
done:
    free(coef);
    gsb__lin_free(&d);
    return rc;
}

static const gsb__method_desc lr_methods[] = {
    {"fit", lr_fit,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM | GSB__IN_CHECK_ON_BACKEND}, {"y", GSB__IN_Y_LIKE_X}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     1, "ordinary least squares (non-negative with positive=True)"},
    {"predict", gsb__lin_predict, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}}, 0, "X @ coef_.T + intercept_ (result \"y\")"},
    GSB__STATS_GRAM_ROW, GSB__STATS_MERGE_ROW,
    GSB__FIT_FROM_STATS_ROW(gsb__linreg_fit_from_stats, "gram"),
    {0}};

static const gsb__attr_desc lr_attrs[] = {
    {"coef_", "coefficients: (n_features,) for 1-D y, else (n_targets, n_features)"},
    {"intercept_", "intercept: scalar for 1-D y, else (n_targets,); float 0.0 without "
                   "fit_intercept"},
    {"rank_", "rank of the (centred, weighted) X (absent with positive=True)"},
    {"singular_", "singular values of the (centred, weighted) X (absent with positive=True)"},
    {"n_features_in_", "number of features seen during fit"},
    {0}};

const gsb__estimator_desc gsb__est_LinearRegression = {
    "LinearRegression", "linear_model", GSB__KIND_REGRESSOR, lr_params, lr_methods, lr_attrs,
    "Ordinary least squares Linear Regression."};

/* ======================================================================
 * Ridge
 * ==================================================================== */

static const char *const ridge_solvers[] = {"auto", "svd", "cholesky", "lsqr", "sparse_cg",
                                            "sag", "saga", "lbfgs", NULL};

static const gsb__param_desc ridge_params[] = {
    {"alpha", GSB__P_FLOAT | GSB__P_ARRAY, "1.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "L2 penalty: one value, or one per target"},
    {"fit_intercept", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "fit an intercept (centre X and y) or assume centred data"},
    {"copy_X", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "accepted for compatibility: X is never modified in place"},
    {"max_iter", GSB__P_INT | GSB__P_NONE, "null", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "accepted for compatibility: every solver here is exact (no iterations)"},
    {"tol", GSB__P_FLOAT, "0.0001", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "accepted for compatibility: every solver here is exact"},
    {"solver", GSB__P_STR, "\"auto\"", 0, 0, 0, ridge_solvers,
     "'svd' uses the SVD; 'auto', 'cholesky' and the iterative solvers get the exact "
     "Cholesky (primal or dual) solution of the same objective; 'lbfgs' requires positive"},
    {"positive", GSB__P_BOOL, "false", 0, 0, 0, NULL,
     "force non-negative coefficients (exact active-set solution)"},
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH, NULL,
     "accepted for compatibility: no solver here is random"},
    {0}};

/* One alpha per target (k of them), from a number or a list of numbers. */
int gsb__lin_ridge_alphas(gsb__ctx *c, int64_t k, double **out, int *one_alpha)
{
    const json_t *a = json_object_get(c->params, "alpha");
    size_t na = json_is_array(a) ? json_array_size(a) : 1;
    *out = NULL;
    if (na != 1 && (int64_t)na != k)
        return gsb__err(GSB_EINVAL, "Number of targets and number of penalties do not "
                                    "correspond: %zu != %lld",
                        na, (long long)k);
    double *al = malloc((size_t)k * sizeof *al);
    if (!al)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    *one_alpha = 1;
    for (int64_t t = 0; t < k; t++) {
        const json_t *v = json_is_array(a) ? json_array_get(a, na == 1 ? 0 : (size_t)t) : a;
        al[t] = json_number_value(v);
        *one_alpha &= al[t] == al[0];
    }
    *out = al;
    return GSB_OK;
}

/* scikit-learn's solver checks, in its words. */
static int ridge_check_solver(const char *solver, int positive)
{
    if (strcmp(solver, "lbfgs") == 0 && !positive)
        return gsb__err(GSB_EINVAL, "'lbfgs' solver can be used only when positive=True. "
                                    "Please use another solver.");
    if (positive && strcmp(solver, "auto") != 0 && strcmp(solver, "lbfgs") != 0)
        return gsb__err(GSB_EINVAL,
                        "solver='%s' does not support positive fitting. Please set the solver "
                        "to 'auto' or 'lbfgs', or set `positive=False`",
                        solver);
    return GSB_OK;
}

/*
 * solver='svd': with X = U S Vt, coef^T = Vt^T diag(s / (s^2 + alpha)) U^T y,
 * singular values <= 1e-15 dropped (scikit-learn's _solve_svd).
 */
static int ridge_svd(gsb__ctx *c, const gsb__lin_data *d, const double *alpha, double **coef)
{
    const gsb__backend *be = c->be;
    int64_t n = d->n, p = d->p, k = d->k, r = n < p ? n : p;
    gsb__tensor U = GSB__TENSOR_NONE, S = GSB__TENSOR_NONE, Vt = GSB__TENSOR_NONE;
    gsb__tensor UTy = GSB__TENSOR_NONE, M = GSB__TENSOR_NONE, Bt = GSB__TENSOR_NONE;
    double *s = NULL, *uty = NULL, *bt = NULL;
    int rc;
    *coef = NULL;
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, n, r, &U));
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, r, 1, &S));
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, r, p, &Vt));
    GSB_CHECK(be->ops->svd(be, &d->X, &U, &S, &Vt));
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, r, k, &UTy));
    GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &U, &d->Y, 0.0, &UTy));
    GSB_CHECK(gsb__lin_download_f64(&S, &s));
    GSB_CHECK(gsb__lin_download_f64(&UTy, &uty));
    for (int64_t i = 0; i < r; i++)
        for (int64_t t = 0; t < k; t++)
            uty[i * k + t] *= s[i] > 1e-15 ? s[i] / (s[i] * s[i] + alpha[t]) : 0.0;
    GSB_CHECK(gsb__lin_upload_f64(be, d->dtype, r, k, uty, &M));
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, p, k, &Bt));
    GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &Vt, &M, 0.0, &Bt));
    GSB_CHECK(gsb__lin_download_f64(&Bt, &bt));
    if (!(*coef = transpose(bt, p, k)))
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
done:
    gsb__tensor_free(&U);
    gsb__tensor_free(&S);
    gsb__tensor_free(&Vt);
    gsb__tensor_free(&UTy);
    gsb__tensor_free(&M);
    gsb__tensor_free(&Bt);
    free(s);
    free(uty);
    free(bt);
    return rc;
}

/*
 * Solve (A + alpha_t I) X_t = R_t for every target t; A (m x m) and R (m x k)
 * are on the backend and the solution (m x k) lands in *sol.  With one
 * shared alpha the caller has already added it to A's diagonal, so a single
 * posv solves every target.  Per-target alphas: A goes to the host once and
 * each shifted system is solved in turn.  GSB_ENUMERIC when a system is not
 * positive definite.
 */
static int shifted_solve(const gsb__backend *be, const gsb__tensor *A, const gsb__tensor *R,
                         const double *alpha, int one_alpha, gsb__tensor *sol)
{
    gsb_dtype dt = A->dtype;
    int64_t m = A->rows, k = R->cols;
    gsb__tensor As = GSB__TENSOR_NONE, bt = GSB__TENSOR_NONE;
    double *Ah = NULL, *Rh = NULL, *Xh = NULL, *col = NULL;
    int rc;
    *sol = GSB__TENSOR_NONE;
    if (one_alpha) {
        GSB_CHECK(gsb__tensor_alloc(be, dt, m, k, sol));
        GSB_CHECK(be->ops->copy(be, sol, R));
        rc = be->ops->posv(be, A, sol);
        goto done;
    }
    GSB_CHECK(gsb__lin_download_f64(A, &Ah));
    GSB_CHECK(gsb__lin_download_f64(R, &Rh));
    Xh = malloc((size_t)(m * k) * sizeof *Xh);
    if (!Xh) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    for (int64_t t = 0; t < k; t++) {
        free(col);
        col = malloc((size_t)m * sizeof *col);
        if (!col) {
            rc = gsb__err(GSB_ENOMEM, "out of host memory");
            goto done;
        }
        for (int64_t i = 0; i < m; i++) {
            /* the diagonal moves from the previous target's alpha to this one's */
            Ah[i * m + i] += alpha[t] - (t > 0 ? alpha[t - 1] : 0.0);
            col[i] = Rh[i * k + t];
        }
        gsb__tensor_free(&As);
        gsb__tensor_free(&bt);
        GSB_CHECK(gsb__lin_upload_f64(be, dt, m, m, Ah, &As));
        GSB_CHECK(gsb__lin_upload_f64(be, dt, m, 1, col, &bt));
        GSB_CHECK(be->ops->posv(be, &As, &bt));
        free(col);
        col = NULL;
        GSB_CHECK(gsb__lin_download_f64(&bt, &col));
        for (int64_t i = 0; i < m; i++)
            Xh[i * k + t] = col[i];
    }
    rc = gsb__lin_upload_f64(be, dt, m, k, Xh, sol);
done:
    gsb__tensor_free(&As);
    gsb__tensor_free(&bt);
    free(Ah);
    free(Rh);
    free(Xh);
    free(col);
    if (rc != GSB_OK)
        gsb__tensor_free(sol);
    return rc;
}

/* t (on be) replaced by its float64 copy; a float64 t is left as it is. */
static int widen(const gsb__backend *be, gsb__tensor *t)
{
    if (t->dtype == GSB_F64)
        return GSB_OK;
    gsb__tensor w;
    GSB_TRY(gsb__tensor_to_dtype(be, t, GSB_F64, &w));
    gsb__tensor_free(t);
    *t = w;
    return GSB_OK;
}

/* m x m on the backend: alpha I for one shared alpha (the Gram matrix is
 * accumulated onto it), else uninitialised (overwritten with beta = 0). */
static int gram_start(const gsb__backend *be, gsb_dtype dt, int64_t m, const double *alpha,
                      int one_alpha, gsb__tensor *A)
{
    if (!one_alpha)
        return gsb__tensor_alloc(be, dt, m, m, A);
    double *shift = scaled_identity(m, alpha[0]);
    if (!shift)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    int rc = gsb__lin_upload_f64(be, dt, m, m, shift, A);
    free(shift);
    return rc;
}

/*
 * scikit-learn's 'cholesky' solver.  n_features <= n_samples: the primal
 * (X^T X + alpha I) w = X^T y.  Otherwise the dual (X X^T + alpha I) d = y,
 * w = X^T d, which only needs an n x n system; a singular dual system with
 * one alpha is solved by least squares, as scikit-learn's
 * _solve_cholesky_kernel does.  GSB_ENUMERIC when a system is singular
 * otherwise (the caller falls back to the SVD, as scikit-learn does).  The
 * systems are solved in float64 whatever X's dtype (see the top).
 */
static int ridge_cholesky(gsb__ctx *c, const gsb__lin_data *d, const double *alpha, int one_alpha,
                          double **coef)
{
    const gsb__backend *be = c->be;
    int64_t n = d->n, p = d->p, k = d->k;
    double beta = one_alpha ? 1.0 : 0.0;
    gsb__tensor A = GSB__TENSOR_NONE, R = GSB__TENSOR_NONE, sol = GSB__TENSOR_NONE;
    gsb__tensor Bt = GSB__TENSOR_NONE, S = GSB__TENSOR_NONE, Y64 = GSB__TENSOR_NONE;
    gsb__tensor dual = GSB__TENSOR_NONE;
    double *bt = NULL;
    int rc;
    *coef = NULL;
    if (p <= n) {
        GSB_CHECK(gram_start(be, d->dtype, p, alpha, one_alpha, &A));
        GSB_CHECK(be->ops->syrk(be, 1.0, &d->X, beta, &A));
        GSB_CHECK(gsb__tensor_alloc(be, d->dtype, p, k, &R));
        GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &d->X, &d->Y, 0.0, &R));
        GSB_CHECK(widen(be, &A));
        GSB_CHECK(widen(be, &R));
        GSB_CHECK(shifted_solve(be, &A, &R, alpha, one_alpha, &sol));
        GSB_CHECK(gsb__lin_download_f64(&sol, &bt));
    } else {
        GSB_CHECK(gram_start(be, d->dtype, n, alpha, one_alpha, &A));
        GSB_CHECK(be->ops->gemm(be, 0, 1, 1.0, &d->X, &d->X, beta, &A));
        GSB_CHECK(widen(be, &A));
        GSB_CHECK(gsb__tensor_to_dtype(be, &d->Y, GSB_F64, &Y64));
        rc = shifted_solve(be, &A, &Y64, alpha, one_alpha, &sol);
        if (rc == GSB_ENUMERIC && one_alpha) {
            int64_t rank;
            gsb__err_clear();
            GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, n, k, &sol));
            GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, n, 1, &S));
            /* scikit-learn's lstsq cut-off is the eps of X's dtype */
            GSB_CHECK(be->ops->lstsq(be, &A, &Y64,
                                     d->dtype == GSB_F32 ? FLT_EPSILON : DBL_EPSILON, &sol,
                                     &S, &rank));
        }
        GSB_CHECK(rc);
        /* w = X^T d in X's dtype, as scikit-learn's X.T @ dual_coef */
        GSB_CHECK(gsb__tensor_to_dtype(be, &sol, d->dtype, &dual));
        GSB_CHECK(gsb__tensor_alloc(be, d->dtype, p, k, &Bt));
        GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &d->X, &dual, 0.0, &Bt));
        GSB_CHECK(gsb__lin_download_f64(&Bt, &bt));
    }
    if (!(*coef = transpose(bt, p, k)))
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
done:
    gsb__tensor_free(&A);
    gsb__tensor_free(&R);
    gsb__tensor_free(&sol);
    gsb__tensor_free(&Bt);
    gsb__tensor_free(&S);
    gsb__tensor_free(&Y64);
    gsb__tensor_free(&dual);
    free(bt);
    return rc;
}

static int ridge_fit(gsb__ctx *c)
{
    int fit_intercept = gsb__param_bool(c->params, "fit_intercept");
    int positive = gsb__param_bool(c->params, "positive");
    const char *solver = gsb__param_str(c->params, "solver");
    GSB_TRY(ridge_check_solver(solver, positive));
    gsb__lin_data d;
    double *alpha = NULL, *coef = NULL;
    int one_alpha = 1, rc, streamed;
    GSB_TRY(gsb__lin_fit_streamed(c, 1, &streamed)); /* X larger than the backend's memory */
    if (streamed)
        return GSB_OK;
    GSB_TRY(gsb__lin_prepare(c->be, gsb__in(c, "X"), gsb__in(c, "y"), gsb__in(c, "sample_weight"),
                             fit_intercept, 0, &d));
    GSB_CHECK(gsb__lin_ridge_alphas(c, d.k, &alpha, &one_alpha));
    if (positive) {
        GSB_CHECK(positive_coef(c, &d, alpha, &coef));
    } else if (strcmp(solver, "svd") == 0) {
        GSB_CHECK(ridge_svd(c, &d, alpha, &coef));
    } else {
        rc = ridge_cholesky(c, &d, alpha, one_alpha, &coef);
        /* scikit-learn falls back to the SVD when Cholesky meets a singular system */
        if (rc == GSB_ENUMERIC) {
            gsb__err_clear();
            rc = ridge_svd(c, &d, alpha, &coef);
        }
        GSB_CHECK(rc);
    }
    /* Ridge ravels the coefficients of a single target even for 2-D y (its
     * intercept_ stays (1,)) */
    rc = gsb__lin_store(c, &d, coef, d.dtype, fit_intercept, d.k == 1);
done:
    free(alpha);
    free(coef);
    gsb__lin_free(&d);
    return rc;
}

static const gsb__method_desc ridge_methods[] = {
    {"fit", ridge_fit,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}, {"y", GSB__IN_Y_LIKE_X}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     1, "L2-regularised least squares"},
    {"predict", gsb__lin_predict, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}}, 0, "X @ coef_.T + intercept_ (result \"y\")"},
    GSB__STATS_GRAM_ROW, GSB__STATS_MERGE_ROW,
    GSB__FIT_FROM_STATS_ROW(gsb__ridge_fit_from_stats, "gram"),
    {0}};

static const gsb__attr_desc ridge_attrs[] = {
    {"coef_", "coefficients: (n_features,) for 1-D y, else (n_targets, n_features)"},
    {"intercept_", "intercept: scalar for 1-D y, else (n_targets,); float 0.0 without "
                   "fit_intercept"},
    {"n_features_in_", "number of features seen during fit"},
    {0}};

const gsb__estimator_desc gsb__est_Ridge = {
    "Ridge", "linear_model", GSB__KIND_REGRESSOR, ridge_params, ridge_methods, ridge_attrs,
    "Linear least squares with l2 regularization."};
