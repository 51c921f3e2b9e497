/*
 * enet_cv.c - LassoCV and ElasticNetCV (scikit-learn 1.9.1's LinearModelCV
 * for one target): the penalty picked by K-fold cross-validation along a
 * warm-started path of alphas, then a refit on all the data.
 *
 * As LinearModelCV.fit does:
 *   - the alpha grid per l1_ratio: alphas (an int) values from alpha_max
 *     (the smallest alpha giving coef = 0: max |X^T y| / (n l1_ratio) on the
 *     centred, weighted data) down to eps alpha_max, geometric; or the
 *     alphas given, sorted decreasingly;
 *   - folds: KFold(cv) without shuffling (cv None: 5), contiguous test
 *     blocks, the first n % cv of them one sample longer; or any folds given
 *     as the cv_folds input (the Python class turns a splitter or an
 *     iterable of (train, test) into it);
 *   - per l1_ratio and fold, the path on the training rows (weights
 *     rescaled to sum to their count, data centred there), each alpha
 *     starting from the previous alpha's coefficients, and the test rows'
 *     mean squared error (weighted by the test weights) per alpha;
 *   - the best (l1_ratio, alpha) by the fold-mean MSE (the first minimum),
 *     then Lasso / ElasticNet on all the data with it (enet.c), with
 *     precompute='auto' turned into False.
 * The path reuses one solver (and its Gram matrix) per fold.  The test MSE
 * comes from the backend: E = B X_test^T + b 1^T - 1 y_test^T (A x n_test)
 * by three products, rows scaled by sqrt(w) and squared norms per alpha.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "estimators/common/pyrepr.h"
#include "estimators/linear_model/enet.h"

/* ---- descriptors: parameters ---------------------------------------------------- */

static const char *const precompute_choices[] = {"auto", NULL};
static const char *const selection_choices[] = {"cyclic", "random", NULL};

#define CV_COMMON_PARAMS(verbose_default)                                                    \
    {"eps", GSB__P_FLOAT, "0.001", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,                  \
     "Length of the path: alpha_min / alpha_max."},                                          \
    {"alphas", GSB__P_INT | GSB__P_ARRAY, "100", 1, INFINITY, GSB__CLOSED_LEFT, NULL,       \
     "The number of alphas on the automatic grid, or the alphas themselves."},               \
    {"fit_intercept", GSB__P_BOOL, "true", 0, 0, 0, NULL,                                    \
     "Fit an intercept (centre X and y) or assume centred data."},                           \
    {"precompute", GSB__P_STR | GSB__P_BOOL, "\"auto\"", 0, 0, 0, precompute_choices,        \
     "True: the Gram form on every fold; 'auto' and False: gsb picks by cost (same "         \
     "optimum).  The final refit takes False for 'auto', as scikit-learn."},                 \
    {"max_iter", GSB__P_INT, "1000", 1, INFINITY, GSB__CLOSED_LEFT, NULL,                    \
     "Maximum epochs of coordinate descent per alpha."},                                     \
    {"tol", GSB__P_FLOAT, "0.0001", 0, INFINITY, GSB__CLOSED_LEFT, NULL,                     \
     "Stop each fit when the duality gap is at most tol * ||y||^2."},                        \
    {"copy_X", GSB__P_BOOL, "true", 0, 0, 0, NULL,                                           \
     "Accepted for compatibility: X is never modified in place."},                           \
    {"cv", GSB__P_INT | GSB__P_NONE, "null", 2, INFINITY, GSB__CLOSED_LEFT, NULL,            \
     "Number of folds (KFold without shuffling); None is 5.  The Python class also takes "   \
     "a splitter or an iterable of (train, test), passed on as the fit input cv_folds."},    \
    {"verbose", GSB__P_BOOL | GSB__P_INT, verbose_default, 0, INFINITY, GSB__CLOSED_LEFT,    \
     NULL, "Print the progress of the path when no progress callback is set."},              \
    {"n_jobs", GSB__P_INT | GSB__P_NONE, "null", 0, 0, 0, NULL,                              \
     "Accepted for compatibility: the backend decides its own parallelism."},                \
    {"positive", GSB__P_BOOL, "false", 0, 0, 0, NULL,                                        \
     "Force the coefficients to be non-negative."},                                          \
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH,    \
     NULL, "Seed of the coordinate order with selection='random'."},                         \
    {"selection", GSB__P_STR, "\"cyclic\"", 0, 0, 0, selection_choices,                      \
     "'cyclic' sweeps the features in order, 'random' updates a random one each step."}

static const gsb__param_desc lassocv_params[] = {CV_COMMON_PARAMS("false"), {0}};

static const gsb__param_desc enetcv_params[] = {
    {"l1_ratio", GSB__P_FLOAT | GSB__P_ARRAY, "0.5", 0, 1, GSB__CLOSED_BOTH, NULL,
     "The mix of the penalties (1: L1, 0: L2), or a list of mixes to cross-validate."},
    CV_COMMON_PARAMS("0"), {0}};

/* ---- the settings ------------------------------------------------------------------ */

typedef struct cv_plan {
    double *l1_ratios; /* L of them */
    int64_t L;
    double *alphas;    /* L x A, each row decreasing */
    int64_t A;
    int alphas_given;  /* a list: alphas_ is that list, sorted */
    int64_t folds;
} cv_plan;

static void plan_free(cv_plan *pl)
{
    free(pl->l1_ratios);
    free(pl->alphas);
}

static int oom(void) { return gsb__err(GSB_ENOMEM, "out of host memory"); }

static int read_l1_ratios(gsb__ctx *c, cv_plan *pl)
{
    const json_t *v = json_object_get(c->params, "l1_ratio");
    pl->L = json_is_array(v) ? (int64_t)json_array_size(v) : 1;
    if (!(pl->l1_ratios = gsb__alloc_array(pl->L, sizeof(double))))
        return oom();
    for (int64_t a = 0; a < pl->L; a++) {
        double r = !v ? 1.0 : json_number_value(json_is_array(v) ? json_array_get(v, (size_t)a)
                                                                  : v);
        if (!(r >= 0 && r <= 1)) {
            char txt[40];
            gsb__py_float_repr(r, txt, sizeof txt);
            return gsb__err(GSB_EINVAL, "Each l1_ratio must be in [0, 1]; got %s.", txt);
        }
        pl->l1_ratios[a] = r;
    }
    return GSB_OK;
}

static int by_decreasing(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

/* The alphas given as a list: scikit-learn's check_scalar per entry, then sorted. */
static int given_alphas(gsb__ctx *c, cv_plan *pl)
{
    const json_t *v = json_object_get(c->params, "alphas");
    pl->A = (int64_t)json_array_size(v);
    pl->alphas_given = 1;
    if (!(pl->alphas = gsb__alloc_array(pl->L * pl->A, sizeof(double))))
        return oom();
    for (int64_t i = 0; i < pl->A; i++) {
        const json_t *e = json_array_get(v, (size_t)i);
        double a = json_number_value(e);
        if (!(a >= 0)) {
            char txt[40];
            if (json_is_integer(e))
                snprintf(txt, sizeof txt, "%lld", (long long)json_integer_value(e));
            else
                gsb__py_float_repr(a, txt, sizeof txt);
            return gsb__err(GSB_EINVAL, "alphas[%lld] == %s, must be >= 0.0.", (long long)i,
                            txt);
        }
        pl->alphas[i] = a;
    }
    qsort(pl->alphas, (size_t)pl->A, sizeof(double), by_decreasing);
    for (int64_t r = 1; r < pl->L; r++)
        memcpy(pl->alphas + r * pl->A, pl->alphas, (size_t)pl->A * sizeof(double));
    return GSB_OK;
}

/*
 * scikit-learn's _alpha_grid from the prepared data: X^T y there is n / sum(w)
 * times its X^T (w (y - y_mean)), so alpha_max = max |X^T y| / (n l1_ratio).
 */
static int alpha_grid(gsb__ctx *c, const gsb__lin_data *d, cv_plan *pl)
{
    const gsb__backend *be = c->be;
    double eps = gsb__param_float(c->params, "eps");
    int positive = gsb__param_bool(c->params, "positive");
    gsb__tensor xy = GSB__TENSOR_NONE;
    double *h = NULL;
    int rc;
    pl->A = gsb__param_int(c->params, "alphas");
    if (!(pl->alphas = gsb__alloc_array(pl->L * pl->A, sizeof(double))))
        return oom();
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, 1, d->p, &xy));
    GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &d->Y, &d->X, 0.0, &xy));
    GSB_CHECK(gsb__lin_download_f64(&xy, &h));
    double top = 0.0; /* positive: max(0, max X^T y) */
    for (int64_t j = 0; j < d->p; j++)
        top = fmax(top, positive ? h[j] : fabs(h[j]));
    for (int64_t r = 0; r < pl->L; r++) {
        double l1r = pl->l1_ratios[r], *row = pl->alphas + r * pl->A;
        if (l1r == 0) {
            rc = gsb__err(GSB_EINVAL, "Automatic alpha grid generation is not supported for "
                          "l1_ratio=0. Please supply a grid by providing your estimator with "
                          "the appropriate `alphas=` argument.");
            goto done;
        }
        double amax = top / ((double)d->n * l1r);
        if (amax <= 1e-15) { /* np.finfo(float64).resolution */
            for (int64_t i = 0; i < pl->A; i++)
                row[i] = 1e-15;
            continue;
        }
        /* np.geomspace(amax, amax * eps, A): 10 ** linspace of the logs, ends exact */
        double lo = log10(amax), hi = log10(amax * eps);
        double step = pl->A > 1 ? (hi - lo) / (double)(pl->A - 1) : 0.0;
        for (int64_t i = 0; i < pl->A; i++)
            row[i] = pow(10.0, lo + (double)i * step);
        row[0] = amax;
        if (pl->A > 1)
            row[pl->A - 1] = amax * eps;
    }
done:
    gsb__tensor_free(&xy);
    free(h);
    return rc;
}

/* ---- one fold's path ---------------------------------------------------------------- */

/* A fold over the n rows: 1 training, 2 test, 0 neither. */
enum { ROW_UNUSED = 0, ROW_TRAIN = 1, ROW_TEST = 2 };

typedef struct cv_data {
    const gsb__tensor *X, *y; /* all rows, on the backend: n x p, n x 1 */
    const double *w;          /* n weights (X's dtype values) or NULL */
    int64_t n;
} cv_data;

/* The rows of T (on be) whose code is want, in order, into a new tensor of
 * count rows: one copy per run of consecutive rows. */
static int gather_rows(const gsb__backend *be, const gsb__tensor *T, const unsigned char *code,
                       unsigned char want, int64_t count, gsb__tensor *out)
{
    size_t row = (size_t)T->cols * gsb_dtype_size(T->dtype);
    GSB_TRY(gsb__tensor_alloc(be, T->dtype, count, T->cols, out));
    int64_t at = 0;
    for (int64_t i = 0; i < T->rows;) {
        if (code[i] != want) {
            i++;
            continue;
        }
        int64_t j = i;
        while (j < T->rows && code[j] == want)
            j++;
        gsb__tensor src = *T, dst = *out;
        src.data = (char *)T->data + (size_t)i * row;
        dst.data = (char *)out->data + (size_t)at * row;
        src.rows = dst.rows = j - i;
        src.owned = dst.owned = 0;
        int rc = be->ops->copy(be, &dst, &src);
        if (rc != GSB_OK) {
            gsb__tensor_free(out);
            return rc;
        }
        at += j - i;
        i = j;
    }
    return GSB_OK;
}

/* The weights of the rows whose code is want (NULL without weights). */
static double *gather_weights(const double *w, const unsigned char *code, unsigned char want,
                              int64_t n, int64_t count)
{
    double *out = gsb__alloc_array(count, sizeof *out);
    if (out)
        for (int64_t i = 0, k = 0; i < n; i++)
            if (code[i] == want)
                out[k++] = w[i];
    return out;
}

/*
 * Test MSE per alpha: coefs (A x p host, the path) with intercepts
 * y_off - x_off coef, on the test rows Xt (nt x p), yt (nt x 1), weighted
 * by wt (nt, or NULL).
 */
static int test_mse(gsb__ctx *c, const gsb__lin_data *d, const gsb__tensor *Xt,
                    const gsb__tensor *yt_col, const double *wt, const double *coefs,
                    int64_t A, double *mse)
{
    const gsb__backend *be = c->be;
    int64_t p = d->p, nt = Xt->rows;
    gsb_dtype dt = d->dtype;
    gsb__tensor B = GSB__TENSOR_NONE, E = GSB__TENSOR_NONE, bv = GSB__TENSOR_NONE,
                ones_r = GSB__TENSOR_NONE, ones_c = GSB__TENSOR_NONE, sw = GSB__TENSOR_NONE,
                sq = GSB__TENSOR_NONE;
    double *h = gsb__alloc_array(A > nt ? A : nt, sizeof *h), *sqh = NULL;
    int rc;
    if (!h)
        return oom();
    gsb__tensor yt = *yt_col; /* (n_test, 1) read as (1, n_test) */
    yt.rows = 1;
    yt.cols = nt;
    yt.owned = 0;
    GSB_CHECK(gsb__lin_upload_f64(be, dt, A, p, coefs, &B));
    GSB_CHECK(gsb__tensor_alloc(be, dt, A, nt, &E));
    GSB_CHECK(be->ops->gemm(be, 0, 1, 1.0, &B, Xt, 0.0, &E));
    for (int64_t r = 0; r < A; r++) { /* in X's dtype, as scikit-learn's intercepts */
        double s = 0;
        for (int64_t j = 0; j < p; j++)
            s += d->x_off[j] * gsb__lin_round(dt, coefs[r * p + j]);
        h[r] = d->y_off[0] - s;
    }
    GSB_CHECK(gsb__lin_upload_f64(be, dt, A, 1, h, &bv));
    GSB_CHECK(gsb__tensor_alloc(be, dt, 1, nt, &ones_r));
    GSB_CHECK(be->ops->fill(be, &ones_r, 1.0));
    GSB_CHECK(gsb__tensor_alloc(be, dt, A, 1, &ones_c));
    GSB_CHECK(be->ops->fill(be, &ones_c, 1.0));
    GSB_CHECK(be->ops->gemm(be, 0, 0, 1.0, &bv, &ones_r, 1.0, &E));
    GSB_CHECK(be->ops->gemm(be, 0, 0, -1.0, &ones_c, &yt, 1.0, &E));
    double denom = (double)nt;
    if (wt) {
        denom = 0;
        for (int64_t i = 0; i < nt; i++) {
            h[i] = sqrt(wt[i]);
            denom += wt[i];
        }
        GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, nt, 1, h, &sw));
        GSB_CHECK(be->ops->col_affine(be, &E, NULL, &sw, NULL, &E));
    }
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, A, 1, &sq));
    GSB_CHECK(be->ops->row_sqnorms(be, &E, &sq));
    GSB_CHECK(gsb__lin_download_f64(&sq, &sqh));
    for (int64_t r = 0; r < A; r++)
        mse[r] = gsb__lin_round(dt, sqh[r] / denom);
done:
    gsb__tensor_free(&B);
    gsb__tensor_free(&E);
    gsb__tensor_free(&bv);
    gsb__tensor_free(&ones_r);
    gsb__tensor_free(&ones_c);
    gsb__tensor_free(&sw);
    gsb__tensor_free(&sq);
    free(h);
    free(sqh);
    return rc;
}

/* The path for one l1_ratio on the fold's training rows: the test MSE (A). */
static int fold_path(gsb__ctx *c, const cv_data *cd, const gsb__enet_fit_args *fa,
                     double l1r, const double *alphas, int64_t A, const unsigned char *code,
                     double *mse)
{
    const gsb__backend *be = c->be;
    int64_t n = cd->n, p = cd->X->cols, ntr = 0, nte = 0;
    for (int64_t i = 0; i < n; i++) {
        ntr += code[i] == ROW_TRAIN;
        nte += code[i] == ROW_TEST;
    }
    if (ntr == 0 || nte == 0)
        return gsb__err(GSB_EINVAL, "every cross-validation fold needs training and test "
                        "samples (this one has %lld and %lld)", (long long)ntr, (long long)nte);
    gsb__tensor Xtr = GSB__TENSOR_NONE, ytr = GSB__TENSOR_NONE, Xte = GSB__TENSOR_NONE,
                yte = GSB__TENSOR_NONE, wtr = GSB__TENSOR_NONE;
    gsb__lin_data d = {0};
    gsb__enet_solver s = {0};
    double *coefs = gsb__calloc_array(A * p, sizeof *coefs), *wh = NULL, *wte = NULL, gap;
    int64_t n_iter;
    int rc, converged;
    if (!coefs)
        return oom();
    GSB_CHECK(gather_rows(be, cd->X, code, ROW_TRAIN, ntr, &Xtr));
    GSB_CHECK(gather_rows(be, cd->y, code, ROW_TRAIN, ntr, &ytr));
    if (cd->w) {
        wh = gather_weights(cd->w, code, ROW_TRAIN, n, ntr);
        wte = gather_weights(cd->w, code, ROW_TEST, n, nte);
        if (!wh || !wte) {
            rc = oom();
            goto done;
        }
        wtr = gsb__tensor_host_view(wh, GSB_F64, ntr, 1);
    }
    GSB_CHECK(gsb__lin_prepare(be, &Xtr, &ytr, cd->w ? &wtr : NULL, fa->fit_intercept, 1, &d));
    gsb__tensor_free(&Xtr); /* d holds its own prepared copy */
    GSB_CHECK(gsb__enet_solver_init(&s, c, &d, fa->precompute));
    for (int64_t i = 0; i < A; i++) {
        gsb__enet_penalty pen = fa->pen;
        pen.l1 = alphas[i] * l1r * (double)ntr;
        pen.l2 = alphas[i] * (1.0 - l1r) * (double)ntr;
        if (i > 0) /* warm start from the previous alpha */
            memcpy(coefs + i * p, coefs + (i - 1) * p, (size_t)p * sizeof *coefs);
        GSB_CHECK(gsb__enet_solver_run(&s, &pen, coefs + i * p, &gap, &n_iter, &converged));
    }
    gsb__enet_solver_free(&s);
    GSB_CHECK(gather_rows(be, cd->X, code, ROW_TEST, nte, &Xte));
    GSB_CHECK(gather_rows(be, cd->y, code, ROW_TEST, nte, &yte));
    rc = test_mse(c, &d, &Xte, &yte, wte, coefs, A, mse);
done:
    gsb__enet_solver_free(&s);
    gsb__lin_free(&d);
    gsb__tensor_free(&Xtr);
    gsb__tensor_free(&ytr);
    gsb__tensor_free(&Xte);
    gsb__tensor_free(&yte);
    free(coefs);
    free(wh);
    free(wte);
    return rc;
}

/*
 * Fold f's row codes: from the cv_folds input (n x folds, codes as numbers),
 * else KFold without shuffling: contiguous test blocks, the first n % folds
 * of them one row longer.
 */
static int fold_codes(const gsb__tensor *folds, int64_t n, int64_t nf, int64_t f,
                      unsigned char *code)
{
    if (folds) {
        for (int64_t i = 0; i < n; i++) {
            double v = gsb__tensor_get(folds, i * nf + f);
            if (v != ROW_UNUSED && v != ROW_TRAIN && v != ROW_TEST)
                return gsb__err(GSB_EINVAL, "cv_folds holds %g: each entry must be 0 (unused), "
                                "1 (training) or 2 (test)", v);
            code[i] = (unsigned char)v;
        }
        return GSB_OK;
    }
    int64_t a = 0;
    for (int64_t g = 0; g < f; g++)
        a += n / nf + (g < n % nf ? 1 : 0);
    int64_t b = a + n / nf + (f < n % nf ? 1 : 0);
    for (int64_t i = 0; i < n; i++)
        code[i] = i >= a && i < b ? ROW_TEST : ROW_TRAIN;
    return GSB_OK;
}

/* ---- fit ------------------------------------------------------------------------------- */

static int check_target(gsb__ctx *c, const gsb__tensor *y)
{
    if (y->cols > 1)
        return gsb__err(GSB_EINVAL, "For multi-task outputs, use MultiTask%s", c->est->name);
    return GSB_OK;
}

/* sample_weight cast to X's dtype, as _check_sample_weight (NULL without). */
static int weights(gsb__ctx *c, gsb_dtype dt, double **out)
{
    const gsb__tensor *w = gsb__in(c, "sample_weight");
    *out = NULL;
    if (!w)
        return GSB_OK;
    double *h = gsb__alloc_array(w->rows, sizeof *h);
    if (!h)
        return oom();
    for (int64_t i = 0; i < w->rows; i++)
        h[i] = gsb__lin_round(dt, gsb__tensor_get(w, i));
    *out = h;
    return GSB_OK;
}

/* mse (L x folds x A) -> best (l1_ratio index, alpha index): fold means, first minimum. */
static void pick_best(const cv_plan *pl, const double *mse, int64_t *best_l, int64_t *best_a)
{
    double best = INFINITY;
    *best_l = *best_a = 0;
    for (int64_t r = 0; r < pl->L; r++) {
        int64_t arg = 0;
        double low = INFINITY;
        for (int64_t i = 0; i < pl->A; i++) {
            double m = 0;
            for (int64_t f = 0; f < pl->folds; f++)
                m += mse[(r * pl->folds + f) * pl->A + i];
            m /= (double)pl->folds;
            if (m < low || i == 0)
                low = m, arg = i;
        }
        if (low < best || r == 0) {
            best = low;
            *best_l = r;
            *best_a = arg;
        }
    }
}

/* alphas_, mse_path_ (L A x folds, squeezed as np.squeeze leaves it), alpha_, l1_ratio_. */
static int store_cv(gsb__ctx *c, const cv_plan *pl, const double *mse, gsb_dtype dt,
                    int64_t best_l, int64_t best_a)
{
    int64_t L = pl->alphas_given ? 1 : pl->L, rows = pl->L * pl->A;
    gsb__tensor t;
    GSB_TRY(L == 1 ? gsb__lin_host_tensor(GSB_F64, pl->A, 1, 1, pl->alphas, &t)
                   : gsb__lin_host_tensor(GSB_F64, L, pl->A, 2, pl->alphas, &t));
    GSB_TRY(gsb__fit_set(c, "alphas_", &t));
    double *m = gsb__alloc_array(rows * pl->folds, sizeof *m);
    if (!m)
        return oom();
    /* (L, folds, A) -> (L, A, folds), np.moveaxis */
    for (int64_t r = 0; r < pl->L; r++)
        for (int64_t f = 0; f < pl->folds; f++)
            for (int64_t i = 0; i < pl->A; i++)
                m[(r * pl->A + i) * pl->folds + f] = mse[(r * pl->folds + f) * pl->A + i];
    int rc = rows == 1 ? gsb__lin_host_tensor(dt, pl->folds, 1, 1, m, &t)
                       : gsb__lin_host_tensor(dt, rows, pl->folds, 2, m, &t);
    free(m);
    GSB_TRY(rc);
    GSB_TRY(gsb__fit_set(c, "mse_path_", &t));
    GSB_TRY(gsb__fit_set_scalar(c, "alpha_", pl->alphas[best_l * pl->A + best_a], GSB_F64));
    if (json_object_get(c->params, "l1_ratio"))
        GSB_TRY(gsb__fit_set_scalar(c, "l1_ratio_", pl->l1_ratios[best_l], GSB_F64));
    return GSB_OK;
}

static int cv_fit(gsb__ctx *c)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X"), *y = gsb__in(c, "y");
    GSB_TRY(check_target(c, y));
    const gsb__tensor *folds = gsb__in(c, "cv_folds");
    int64_t n = X->rows;
    cv_plan pl = {0};
    pl.folds = folds                                ? folds->cols
               : gsb__param_is_none(c->params, "cv") ? 5
                                                     : gsb__param_int(c->params, "cv");
    if (folds && folds->rows != n)
        return gsb__err(GSB_EINVAL, "cv_folds has %lld rows, X has %lld", (long long)folds->rows,
                        (long long)n);
    if (!folds && pl.folds > n)
        return gsb__err(GSB_EINVAL, "Cannot have number of splits n_splits=%lld greater than "
                        "the number of samples: n_samples=%lld.", (long long)pl.folds,
                        (long long)n);
    gsb__enet_fit_args fa;
    gsb__lin_data d = {0};
    gsb__tensor Xb = GSB__TENSOR_NONE, yb = GSB__TENSOR_NONE;
    double *w = NULL, *mse = NULL;
    unsigned char *code = NULL;
    int rc;
    GSB_CHECK(gsb__enet_fit_args_read(c, &fa));
    /* True: the Gram form on the folds; 'auto' (and the refit's False) lets the cost pick */
    fa.precompute = json_is_true(json_object_get(c->params, "precompute"));
    GSB_CHECK(read_l1_ratios(c, &pl));
    GSB_CHECK(weights(c, X->dtype, &w));
    GSB_CHECK(gsb__lin_prepare(be, X, y, gsb__in(c, "sample_weight"), fa.fit_intercept, 1, &d));
    d.y_1d = 1; /* a (n, 1) y is raveled, as column_or_1d */
    if (json_is_array(json_object_get(c->params, "alphas")))
        GSB_CHECK(given_alphas(c, &pl));
    else
        GSB_CHECK(alpha_grid(c, &d, &pl));

    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    GSB_CHECK(gsb__tensor_to(be, y, &yb));
    cv_data cd = {&Xb, &yb, w, n};
    if (!(mse = gsb__alloc_array(pl.L * pl.folds * pl.A, sizeof *mse))) {
        rc = oom();
        goto done;
    }
    if (!(code = gsb__alloc_array(n, 1))) {
        rc = oom();
        goto done;
    }
    for (int64_t r = 0; r < pl.L; r++) {
        for (int64_t f = 0; f < pl.folds; f++) {
            GSB_CHECK(fold_codes(folds, n, pl.folds, f, code));
            GSB_CHECK(fold_path(c, &cd, &fa, pl.l1_ratios[r], pl.alphas + r * pl.A, pl.A, code,
                                mse + (r * pl.folds + f) * pl.A));
            GSB_CHECK(gsb__progress(c, "fold", r * pl.folds + f + 1, NAN));
        }
    }
    int64_t bl, ba;
    pick_best(&pl, mse, &bl, &ba);
    fa.alpha = pl.alphas[bl * pl.A + ba];
    fa.l1_ratio = pl.l1_ratios[bl];
    fa.warm_start = 0;
    GSB_CHECK(gsb__enet_fit_prepared(c, &d, &fa));
    rc = store_cv(c, &pl, mse, X->dtype, bl, ba);
done:
    gsb__lin_free(&d);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&yb);
    plan_free(&pl);
    free(w);
    free(mse);
    free(code);
    return rc;
}

/* ---- descriptors ---------------------------------------------------------------------- */

static const gsb__method_desc cv_methods[] = {
    {"fit", cv_fit,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK},
      {"y", GSB__IN_Y_LIKE_X},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL},
      {"cv_folds", GSB__IN_MATRIX | GSB__IN_OPTIONAL}},
     1, "cross-validated path, then a refit with the best penalty (y: 1-D; cv_folds, "
        "n_samples x n_folds, 1 training / 2 test / 0 unused, gives the folds of any "
        "splitter, which the Python class derives from cv)"},
    {"predict", gsb__lin_predict, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}}, 0,
     "X @ coef_ + intercept_ (result \"y\")"},
    {0}};

#define CV_ATTRS                                                                              \
    {"alpha_", "the penalty chosen by cross-validation"},                                     \
    {"alphas_", "the grid of alphas: (n_alphas,), or (n_l1_ratio, n_alphas) for an automatic " \
                "grid over several l1_ratio"},                                                \
    {"mse_path_", "test MSE per alpha and fold: (n_alphas, n_folds); with several l1_ratio, "  \
                  "(n_l1_ratio * n_alphas, n_folds) (the Python class reshapes it to "         \
                  "scikit-learn's (n_l1_ratio, n_alphas, n_folds))"},                          \
    {"coef_", "coefficients of the refit, (n_features,)"},                                    \
    {"intercept_", "intercept of the refit (0.0 without fit_intercept)"},                     \
    {"dual_gap_", "duality gap of the refit, divided by n_samples"},                          \
    {"n_iter_", "coordinate descent epochs of the refit"},                                    \
    {"n_features_in_", "number of features seen during fit"}

static const gsb__attr_desc lassocv_attrs[] = {CV_ATTRS, {0}};
static const gsb__attr_desc enetcv_attrs[] = {
    {"l1_ratio_", "the l1_ratio chosen by cross-validation"}, CV_ATTRS, {0}};

const gsb__estimator_desc gsb__est_LassoCV = {
    "LassoCV", "linear_model", GSB__KIND_REGRESSOR, lassocv_params, cv_methods, lassocv_attrs,
    "Lasso linear model with iterative fitting along a regularization path."};

const gsb__estimator_desc gsb__est_ElasticNetCV = {
    "ElasticNetCV", "linear_model", GSB__KIND_REGRESSOR, enetcv_params, cv_methods, enetcv_attrs,
    "Elastic Net model with iterative fitting along a regularization path."};
