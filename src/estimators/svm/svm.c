/*
 * svm.c - SVC and SVR, as scikit-learn 1.9.1's sklearn.svm.SVC (C-SVC) and
 * sklearn.svm.SVR (epsilon-SVR), which call the libsvm bundled with it.
 *
 * Each dual problem is solved by estimators/smo.c, libsvm's SMO, set up as
 * libsvm sets it up, so the fitted attributes are scikit-learn's:
 *  - SVC: samples with a zero sample_weight are dropped first (libsvm's
 *    remove_zero_weight; support_ then indexes the remaining samples, as in
 *    scikit-learn), the rest grouped by class in sorted class order, and one
 *    binary problem solved per pair of classes (i < j: class i is +1) with
 *    C_t = C * class_weight_[class] * sample_weight_t.  dual_coef_ and
 *    intercept_ (= -rho) are laid out as libsvm's sv_coef and rho; with two
 *    classes scikit-learn flips both signs so that a positive decision
 *    means classes_[1].
 *  - SVR: 2n variables (a+ and a-), p = epsilon -/+ y, dual_coef_ = a+ - a-.
 * The kernel rows the solver asks for come from the backend's kernel op in
 * X's dtype (float32 X: float32 kernels; libsvm caches rows as float
 * anyway); prediction computes kernels in float64 against the float64
 * support vectors, as scikit-learn converts everything to float64.
 *
 * kernel='precomputed': X is the Gram matrix (n x n at fit, n_test x n_train
 * at predict); problems read their kernel rows from it, support_vectors_ is
 * empty as in scikit-learn, and the hidden _support_cols keep the training
 * columns of the support vectors for prediction.  (scikit-learn's dense libsvm
 * reads the columns at support_, which index the samples left after dropping
 * zero weights: with zero sample weights its precomputed predictions use the
 * wrong columns.  gsb uses the right ones.)
 *
 * SVC(probability=True) is libsvm's: per pair of classes, decision values by
 * 5-fold cross-validation (folds shuffled by the generator scikit-learn's
 * libsvm uses, seeded as SVC.fit seeds it, libsvm_rand.h), then Platt's
 * sigmoid (platt.h) gives probA_ and probB_; predict_proba couples the
 * pairwise probabilities (Wu, Lin and Weng).  With an int random_state the
 * folds, and so the probabilities, are scikit-learn's.
 *
 * Where scikit-learn warns (max_iter reached: fit_status_ = 1; the
 * deprecated probability parameter given), gsb warns alike (core/warn.h).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernel_map.h"
#include "core/alloc.h"
#include "core/estimator.h"
#include "core/profile.h"
#include "core/rng.h"
#include "core/warn.h"
#include "estimators/common/classes.h"
#include "estimators/common/pyrepr.h"
#include "estimators/svm/libsvm_rand.h"
#include "estimators/svm/platt.h"
#include "solvers/smo.h"
#include "solvers/smo_blocks.h"

/* Problems of at least this many rows take the two-level SMO on a GPU
 * (use_blocks): above the largest of the parity suite's (2000). */
#define SVM_BLOCKS_MIN_ROWS 3000

/* ---- descriptors: parameters --------------------------------------------- */

static const char *const kernel_choices[] = {"linear", "poly", "rbf", "sigmoid", "precomputed",
                                             NULL};
static const char *const gamma_choices[] = {"scale", "auto", NULL};
static const char *const class_weight_choices[] = {"balanced", NULL};
static const char *const dfs_choices[] = {"ovo", "ovr", NULL};
/* 'deprecated' is scikit-learn 1.9's hidden default (probability deprecated) */
static const char *const probability_choices[] = {"~deprecated", NULL};

#define SVM_COMMON_PARAMS                                                                     \
    {"kernel", GSB__P_STR, "\"rbf\"", 0, 0, 0, kernel_choices,                                \
     "Kernel: 'linear' x.y, 'poly' (gamma x.y + coef0)^degree, 'rbf' exp(-gamma ||x-y||^2), " \
     "'sigmoid' tanh(gamma x.y + coef0), or 'precomputed' (X is the Gram matrix); "          \
     "callables are not supported."},                                                         \
    {"degree", GSB__P_INT, "3", 0, INFINITY, GSB__CLOSED_LEFT, NULL,                          \
     "Degree of the 'poly' kernel; ignored by the others."},                                  \
    {"gamma", GSB__P_STR | GSB__P_FLOAT, "\"scale\"", 0, INFINITY, GSB__CLOSED_LEFT,          \
     gamma_choices,                                                                           \
     "Kernel coefficient: 'scale' = 1 / (n_features * X.var()) (1 if X.var() is 0), "        \
     "'auto' = 1 / n_features, or a float >= 0; the value used is the attribute _gamma."},    \
    {"coef0", GSB__P_FLOAT, "0.0", -INFINITY, INFINITY, GSB__CLOSED_NEITHER, NULL,            \
     "Independent term of the 'poly' and 'sigmoid' kernels."}

#define SVM_TOL_PARAM                                                                         \
    {"tol", GSB__P_FLOAT, "0.001", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,                    \
     "Stop when the maximal KKT violation of the dual is below tol (libsvm's eps)."}

static const gsb__param_desc svc_params[] = {
    {"C", GSB__P_FLOAT, "1.0", 0, INFINITY, GSB__CLOSED_RIGHT, NULL,
     "Regularisation: the box 0 <= alpha_i <= C * class_weight * sample_weight."},
    SVM_COMMON_PARAMS,
    {"shrinking", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "Use libsvm's shrinking heuristic (speed only: the result is the same within tol)."},
    {"probability", GSB__P_BOOL | GSB__P_STR, "\"deprecated\"", 0, 0, 0, probability_choices,
     "true: Platt scaling by 5-fold cross-validation (probA_, probB_, predict_proba); "
     "deprecated in scikit-learn 1.9 ('deprecated' and false mean no; giving it warns)."},
    SVM_TOL_PARAM,
    {"cache_size", GSB__P_FLOAT, "200", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,
     "Kernel row cache of the solver, in MB (at least two rows are kept)."},
    {"class_weight", GSB__P_DICT | GSB__P_STR | GSB__P_NONE, "null", 0, 0, 0,
     class_weight_choices,
     "None, 'balanced' (n_samples / (n_classes * bincount(y)), ignoring sample_weight as "
     "scikit-learn's SVC does) or an object {class value: weight} (keys are class values "
     "written as numbers, e.g. \"1\"); scales C per class."},
    {"verbose", GSB__P_INT | GSB__P_BOOL, "false", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Print the solver's progress (every 1000 iterations) when no progress callback is set."},
    {"max_iter", GSB__P_INT, "-1", -1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Iteration limit per binary problem, -1 for none; reaching it sets fit_status_ = 1."},
    {"decision_function_shape", GSB__P_STR, "\"ovr\"", 0, 0, 0, dfs_choices,
     "'ovr': decision_function (n, n_classes) from the one-vs-one votes and confidences; "
     "'ovo': libsvm's raw (n, n_classes * (n_classes - 1) / 2)."},
    {"break_ties", GSB__P_BOOL, "false", 0, 0, 0, NULL,
     "With 'ovr' and more than two classes, predict by the argmax of decision_function "
     "instead of the votes."},
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH, NULL,
     "Seed of the cross-validation folds of probability=True (scikit-learn's folds for an "
     "int; fresh ones for None)."},
    {0}};

static const gsb__param_desc svr_params[] = {
    SVM_COMMON_PARAMS,
    SVM_TOL_PARAM,
    {"C", GSB__P_FLOAT, "1.0", 0, INFINITY, GSB__CLOSED_RIGHT, NULL,
     "Regularisation: the box 0 <= alpha_i <= C * sample_weight."},
    {"epsilon", GSB__P_FLOAT, "0.1", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Half-width of the tube within which errors cost nothing."},
    {"shrinking", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "Use libsvm's shrinking heuristic (speed only: the result is the same within tol)."},
    {"cache_size", GSB__P_FLOAT, "200", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,
     "Kernel row cache of the solver, in MB (at least two rows are kept)."},
    {"verbose", GSB__P_INT | GSB__P_BOOL, "false", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Print the solver's progress (every 1000 iterations) when no progress callback is set."},
    {"max_iter", GSB__P_INT, "-1", -1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Iteration limit, -1 for none; reaching it sets fit_status_ = 1."},
    {0}};

/* ---- small helpers ------------------------------------------------------- */

/* libsvm's kernel_type numbering, which the backend's kernel op shares
 * (except the precomputed one, which never reaches the op) */
enum { KIND_LINEAR = 0, KIND_POLY = 1, KIND_RBF = 2, KIND_SIGMOID = 3, KIND_PRECOMPUTED = 4 };

typedef struct svm_kernel {
    int kind;
    double gamma, coef0;
    int degree;
} svm_kernel;


static int oom(const gsb__ctx *c, const char *what)
{
    return gsb__err(GSB_ENOMEM, "%s: out of memory for %s", c->est->name, what);
}


/* The kernel kind, degree and coef0 from the parameters (gamma is set by
 * the caller: computed at fit, the fitted _gamma afterwards). */
static int kernel_from_params(gsb__ctx *c, svm_kernel *k)
{
    const char *name = gsb__param_str(c->params, "kernel");
    static const char *const kinds[] = {"linear", "poly", "rbf", "sigmoid", "precomputed"};
    int64_t degree = gsb__param_int(c->params, "degree");
    if (degree > INT_MAX) /* libsvm's degree is an int */
        return gsb__err(GSB_EUNSUPPORTED, "%s: degree=%lld is too large", c->est->name,
                        (long long)degree);
    for (int i = 0; i < 5; i++)
        if (name && strcmp(name, kinds[i]) == 0) {
            k->kind = i;
            k->degree = (int)degree;
            k->coef0 = gsb__param_float(c->params, "coef0");
            k->gamma = 0;
            return GSB_OK;
        }
    return gsb__err(GSB_EUNSUPPORTED, "%s: kernel='%s' is not supported by gsb yet; use "
                    "'linear', 'poly', 'rbf', 'sigmoid' or 'precomputed'", c->est->name,
                    name ? name : "?");
}

/* gamma as scikit-learn resolves it at fit, from the whole X in float64
 * (0 for a precomputed kernel, which has none). */
static double resolve_gamma(gsb__ctx *c, const svm_kernel *k, const gsb__tensor *X)
{
    int64_t n = X->rows, d = X->cols, N = n * d;
    if (k->kind == KIND_PRECOMPUTED)
        return 0.0;
    if (gsb__param_is(c->params, "gamma", "auto"))
        return 1.0 / (double)d;
    if (!gsb__param_is(c->params, "gamma", "scale"))
        return gsb__param_float(c->params, "gamma");
    double mean = 0, var = 0;
    for (int64_t i = 0; i < N; i++)
        mean += gsb__tensor_get(X, i);
    mean /= (double)N;
    for (int64_t i = 0; i < N; i++) {
        double t = gsb__tensor_get(X, i) - mean;
        var += t * t;
    }
    var /= (double)N;
    return var != 0 ? 1.0 / ((double)d * var) : 1.0;
}

/* K(x, x) in double, as libsvm's QD. */
static double kernel_diag(const svm_kernel *k, double sqnorm)
{
    switch (k->kind) {
    case KIND_POLY: return gsb__ker_powi(k->gamma * sqnorm + k->coef0, k->degree);
    case KIND_RBF: return 1.0;
    case KIND_SIGMOID: return tanh(k->gamma * sqnorm + k->coef0);
    default: return sqnorm;
    }
}

/* Copy row src of X into row dst of out (both host tensors, X's dtype). */
static void copy_row(const gsb__tensor *X, int64_t src, gsb__tensor *out, int64_t dst)
{
    size_t bytes = (size_t)X->cols * gsb_dtype_size(X->dtype);
    memcpy((char *)out->data + (size_t)dst * bytes, (const char *)X->data + (size_t)src * bytes,
           bytes);
}

/* A fitted array from host memory: rows x cols of dtype, 1-D when as_1d. */
static int set_array(gsb__ctx *c, const char *name, gsb_dtype dtype, int64_t rows, int64_t cols,
                     const void *data, int as_1d)
{
    gsb__tensor t;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dtype, rows, cols, &t));
    if (rows * cols > 0)
        memcpy(t.data, data, gsb__tensor_nbytes(&t));
    if (as_1d)
        gsb__tensor_as_1d(&t);
    return gsb__fit_set(c, name, &t);
}

/* ---- one dual problem on the backend ------------------------------------- */

typedef struct svm_rows {
    gsb__ctx *c;
    const svm_kernel *k;
    const gsb__tensor *Xh; /* the problem matrix on the host (read for 'precomputed') */
    gsb__tensor Xb;  /* the problem's samples on the backend */
    gsb__tensor Kb;  /* one kernel row (1 x n) on the backend */
    double *host64;  /* float64 rows come down here before rounding to float */
    int64_t iter_base;
} svm_rows;

/* Kernel row r of the problem's samples through the backend's kernel op. */
static int svm_row(void *data, int64_t r, float *out)
{
    svm_rows *s = data;
    const gsb__backend *be = s->c->be;
    if (s->k->kind == KIND_PRECOMPUTED) { /* the row of the Gram block, as float */
        int64_t n = s->Xh->cols;
        for (int64_t j = 0; j < n; j++)
            out[j] = (float)gsb__tensor_get(s->Xh, r * n + j);
        return GSB_OK;
    }
    gsb__tensor xr = s->Xb;
    xr.data = (char *)s->Xb.data + (size_t)(r * s->Xb.cols) * gsb_dtype_size(s->Xb.dtype);
    xr.rows = 1;
    xr.owned = 0;
    GSB_TRY(be->ops->kernel(be, &xr, &s->Xb, s->k->kind, s->k->gamma, s->k->coef0,
                            s->k->degree, &s->Kb));
    if (s->Kb.dtype == GSB_F32)
        return be->ops->download(be, &s->Kb, out);
    GSB_TRY(be->ops->download(be, &s->Kb, s->host64));
    for (int64_t j = 0; j < s->Kb.cols; j++)
        out[j] = (float)s->host64[j];
    return GSB_OK;
}

static int svm_progress(void *data, int64_t iteration, double gap)
{
    svm_rows *s = data;
    return gsb__progress(s->c, "iteration", s->iter_base + iteration, gap);
}

/*
 * Which solver a problem of n rows takes: the two-level SMO (solvers/
 * smo_blocks.h) on a GPU backend from SVM_BLOCKS_MIN_ROWS rows, where one
 * kernel row at a time leaves the device idle; libsvm's own SMO otherwise,
 * whose iterates are scikit-learn's exactly.  GSB_SVM_SOLVER=libsvm or
 * =blocks forces one (blocks on any backend: its CPU ops are the twins).
 */
static int use_blocks(const gsb__ctx *c, const svm_kernel *k, int64_t n)
{
    const char *force = getenv("GSB_SVM_SOLVER");
    const gsb__backend *be = c->be;
    if (k->kind == KIND_PRECOMPUTED || !be->ops->svm_inner)
        return 0;
    if (force && strcmp(force, "libsvm") == 0)
        return 0;
    if (force && strcmp(force, "blocks") == 0)
        return 1;
    return be != gsb__cpu_backend() && n >= SVM_BLOCKS_MIN_ROWS;
}

/*
 * Solve the dual over the samples of Xh (host, X's dtype, problem_matrix()):
 * their n x d rows, or their n x n block of a precomputed Gram matrix.  pb
 * holds l, real, y, p and C; this fills the rest (QD, kernel rows, cache,
 * tol, shrinking, max_iter) from the parameters.  alpha (l) starts at 0.
 */
static int solve_dual(gsb__ctx *c, const gsb__tensor *Xh, const svm_kernel *k,
                      gsb__smo_problem *pb, int64_t iter_base, double *alpha,
                      gsb__smo_result *res)
{
    const gsb__backend *be = c->be;
    int64_t n = Xh->rows, d = Xh->cols;
    svm_rows rows = {.c = c, .k = k, .Xh = Xh, .iter_base = iter_base};
    double *diag = gsb__alloc_array(n, sizeof *diag), *QD = gsb__alloc_array(pb->l, sizeof *QD);
    int rc;
    if (!diag || !QD) {
        rc = oom(c, "the kernel diagonal");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        double sq = 0;
        for (int64_t j = 0; j < d && k->kind != KIND_PRECOMPUTED; j++) {
            double v = gsb__tensor_get(Xh, i * d + j);
            sq += v * v;
        }
        diag[i] = k->kind == KIND_PRECOMPUTED ? gsb__tensor_get(Xh, i * d + i)
                                              : kernel_diag(k, sq);
    }
    for (int64_t t = 0; t < pb->l; t++) {
        QD[t] = diag[pb->real[t]];
        alpha[t] = 0;
    }
    int blocks = use_blocks(c, k, n);
    if (k->kind != KIND_PRECOMPUTED) { /* rows come from the backend's kernel op */
        if (Xh->dtype == GSB_F64 && !(rows.host64 = gsb__alloc_array(n, sizeof *rows.host64))) {
            rc = oom(c, "a kernel row");
            goto done;
        }
        GSB_CHECK(gsb__tensor_to(be, Xh, &rows.Xb));
        if (!blocks)
            GSB_CHECK(gsb__tensor_alloc(be, Xh->dtype, 1, n, &rows.Kb));
    }
    gsb__profile_mark("svm problem setup");
    pb->n = n;
    pb->QD = QD;
    pb->eps = gsb__param_float(c->params, "tol");
    pb->shrinking = gsb__param_bool(c->params, "shrinking");
    pb->max_iter = gsb__param_int(c->params, "max_iter");
    pb->cache_bytes = gsb__param_float(c->params, "cache_size") * (double)(1 << 20);
    pb->row = svm_row;
    pb->row_data = &rows;
    pb->progress = svm_progress;
    pb->progress_data = &rows;
    if (blocks) {
        gsb__smo_blocks_problem bp = {
            .be = be, .l = pb->l, .real = pb->real, .y = pb->y, .p = pb->p, .C = pb->C,
            .QD = QD, .X = &rows.Xb, .kind = k->kind, .gamma = k->gamma, .coef0 = k->coef0,
            .degree = k->degree, .eps = pb->eps, .max_iter = pb->max_iter,
            .cache_bytes = pb->cache_bytes, .progress = svm_progress, .progress_data = &rows};
        rc = gsb__smo_blocks_solve(&bp, alpha, res);
        gsb__profile_mark("svm two-level smo");
    } else {
        rc = gsb__smo_solve(pb, alpha, res);
        gsb__profile_mark("svm smo");
    }
done:
    gsb__tensor_free(&rows.Xb);
    gsb__tensor_free(&rows.Kb);
    free(rows.host64);
    free(diag);
    free(QD);
    return rc;
}

/*
 * The samples idx[0..l) of X as a problem matrix for solve_dual (host, X's
 * dtype): their rows (l x d), or for a precomputed kernel their block
 * X[idx][idx] of the Gram matrix (l x l).
 */
static int problem_matrix(const gsb__tensor *X, const svm_kernel *k, const int64_t *idx,
                          int64_t l, gsb__tensor *out)
{
    int pre = k->kind == KIND_PRECOMPUTED;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), X->dtype, l, pre ? l : X->cols, out));
    for (int64_t t = 0; t < l; t++) {
        if (!pre) {
            copy_row(X, idx[t], out, t);
            continue;
        }
        for (int64_t u = 0; u < l; u++)
            gsb__tensor_set(out, t * l + u, gsb__tensor_get(X, idx[t] * X->cols + idx[u]));
    }
    return GSB_OK;
}

/*
 * out (nr x nc, host float64) = K(X[rows[i]], X[cols[j]]): from the
 * backend's kernel op in float64, or read from a precomputed Gram matrix X.
 */
static int kernel_block(gsb__ctx *c, const gsb__tensor *X, const svm_kernel *k,
                        const int64_t *rows, int64_t nr, const int64_t *cols, int64_t nc,
                        double *out)
{
    int64_t d = X->cols;
    if (k->kind == KIND_PRECOMPUTED) {
        for (int64_t i = 0; i < nr; i++)
            for (int64_t j = 0; j < nc; j++)
                out[i * nc + j] = gsb__tensor_get(X, rows[i] * d + cols[j]);
        return GSB_OK;
    }
    if (nr == 0 || nc == 0)
        return GSB_OK;
    const gsb__backend *be = c->be;
    gsb__tensor A = GSB__TENSOR_NONE, B = GSB__TENSOR_NONE, Ab = GSB__TENSOR_NONE,
                Bb = GSB__TENSOR_NONE, Kb = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, nr, d, &A));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, nc, d, &B));
    for (int64_t i = 0; i < nr; i++)
        for (int64_t j = 0; j < d; j++)
            ((double *)A.data)[i * d + j] = gsb__tensor_get(X, rows[i] * d + j);
    for (int64_t i = 0; i < nc; i++)
        for (int64_t j = 0; j < d; j++)
            ((double *)B.data)[i * d + j] = gsb__tensor_get(X, cols[i] * d + j);
    GSB_CHECK(gsb__tensor_to(be, &A, &Ab));
    GSB_CHECK(gsb__tensor_to(be, &B, &Bb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, nr, nc, &Kb));
    GSB_CHECK(be->ops->kernel(be, &Ab, &Bb, k->kind, k->gamma, k->coef0, k->degree, &Kb));
    rc = be->ops->download(be, &Kb, out);
done:
    gsb__tensor_free(&A);
    gsb__tensor_free(&B);
    gsb__tensor_free(&Ab);
    gsb__tensor_free(&Bb);
    gsb__tensor_free(&Kb);
    return rc;
}

/*
 * libsvm's solve_c_svc over the samples idx (l) of X with labels y (+1 /
 * -1) and upper bounds Ct: coef (l) receives alpha_t y_t, res the rest.
 */
static int solve_binary(gsb__ctx *c, const gsb__tensor *X, const svm_kernel *k,
                        const int64_t *idx, const int8_t *y, const double *Ct, int64_t l,
                        int64_t iter_base, double *coef, gsb__smo_result *res)
{
    gsb__tensor Xh = GSB__TENSOR_NONE;
    double *p = gsb__alloc_array(l, sizeof *p);
    int64_t *real = gsb__alloc_array(l, sizeof *real);
    int rc;
    if (!p || !real) {
        rc = oom(c, "a binary problem");
        goto done;
    }
    for (int64_t t = 0; t < l; t++) {
        p[t] = -1;
        real[t] = t;
    }
    GSB_CHECK(problem_matrix(X, k, idx, l, &Xh));
    gsb__smo_problem pb = {.l = l, .real = real, .y = y, .p = p, .C = Ct};
    GSB_CHECK(solve_dual(c, &Xh, k, &pb, iter_base, coef, res));
    for (int64_t t = 0; t < l; t++)
        coef[t] *= y[t];
done:
    gsb__tensor_free(&Xh);
    free(p);
    free(real);
    return rc;
}

/* ---- fit: shared pieces -------------------------------------------------- */

/* Indices of the samples with a positive weight (all without weights). */
static int positive_samples(gsb__ctx *c, const gsb__tensor *sw, int64_t n, int64_t **keep,
                            int64_t *n_keep)
{
    *keep = gsb__alloc_array(n, sizeof **keep);
    if (!*keep)
        return oom(c, "sample indices");
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!sw || ((const double *)sw->data)[i] > 0)
            (*keep)[m++] = i;
    *n_keep = m;
    if (m == 0)
        return gsb__err(GSB_EINVAL, "Invalid input - all samples have zero or negative "
                        "weights.");
    return GSB_OK;
}

/* The kernel at the start of both fits; SVC warns, as scikit-learn 1.9 does,
 * when the deprecated probability parameter is given (true or false). */
static int fit_setup(gsb__ctx *c, svm_kernel *k)
{
    GSB_TRY(kernel_from_params(c, k));
    const json_t *prob = json_object_get(c->params, "probability");
    if (prob && !json_is_string(prob))
        gsb__warn("FutureWarning", "The `probability` parameter was deprecated in 1.9 and will "
                  "be removed in version 1.11. Use `CalibratedClassifierCV(SVC(), "
                  "ensemble=False)` instead of `SVC(probability=True)`");
    return GSB_OK;
}

/* scikit-learn's check of a precomputed kernel's training matrix. */
static int check_square(const svm_kernel *k, const gsb__tensor *X)
{
    if (k->kind != KIND_PRECOMPUTED || X->rows == X->cols)
        return GSB_OK;
    return gsb__err(GSB_EINVAL, "Precomputed matrix must be a square matrix. Input is a "
                    "%lldx%lld matrix.", (long long)X->rows, (long long)X->cols);
}

/* The attributes both estimators share; a solver stopped by max_iter warns. */
static int set_common(gsb__ctx *c, const gsb__tensor *X, const svm_kernel *k, int timed_out)
{
    if (timed_out)
        gsb__warn(GSB__CONVERGENCE_WARNING, "Solver terminated early (max_iter=%lld).  Consider "
                  "pre-processing your data with StandardScaler or MinMaxScaler.",
                  (long long)gsb__param_int(c->params, "max_iter"));
    int64_t shape[2] = {X->rows, X->cols};
    GSB_TRY(set_array(c, "shape_fit_", GSB_I64, 2, 1, shape, 1));
    GSB_TRY(gsb__fit_set_scalar(c, "fit_status_", timed_out ? 1 : 0, GSB_I64));
    return gsb__fit_set_scalar(c, "_gamma", k->gamma, GSB_F64);
}

/* coef_ (P x d) = W^T SV for the linear kernel, W (nSV x P) as ovo_weights() lays it. */
static int set_linear_coef(gsb__ctx *c, const double *W, int64_t nsv, int64_t P,
                           const double *sv, int64_t d)
{
    const gsb__backend *be = c->be;
    gsb__tensor Wh = gsb__tensor_host_view((void *)W, GSB_F64, nsv, P);
    gsb__tensor Sh = gsb__tensor_host_view((void *)sv, GSB_F64, nsv, d);
    gsb__tensor Wb = GSB__TENSOR_NONE, Sb = GSB__TENSOR_NONE, Cb = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_zeros(be, GSB_F64, P, d, &Cb));
    if (nsv > 0) {
        GSB_CHECK(gsb__tensor_to(be, &Wh, &Wb));
        GSB_CHECK(gsb__tensor_to(be, &Sh, &Sb));
        GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &Wb, &Sb, 0.0, &Cb));
    }
    rc = gsb__fit_set(c, "coef_", &Cb);
done:
    gsb__tensor_free(&Wb);
    gsb__tensor_free(&Sb);
    gsb__tensor_free(&Cb);
    return rc;
}

/*
 * support_vectors_ from the training samples cols (nsv) of X: their rows; for
 * a precomputed kernel none (0 x 0, as scikit-learn) and the hidden
 * _support_cols, the columns of the Gram matrix that prediction reads.
 * *sv (host, nsv x d) receives the rows when wanted and not precomputed.
 */
static int set_support_vectors(gsb__ctx *c, const gsb__tensor *X, const svm_kernel *k,
                               const int64_t *cols, int64_t nsv, double **sv)
{
    int64_t d = X->cols;
    if (sv)
        *sv = NULL;
    if (k->kind == KIND_PRECOMPUTED) {
        GSB_TRY(set_array(c, "support_vectors_", GSB_F64, 0, 0, NULL, 0));
        return set_array(c, "_support_cols", GSB_I64, nsv, 1, cols, 1);
    }
    double *rows = gsb__alloc_array(nsv * d, sizeof *rows);
    if (!rows)
        return oom(c, "the support vectors");
    for (int64_t s = 0; s < nsv; s++)
        for (int64_t j = 0; j < d; j++)
            rows[s * d + j] = gsb__tensor_get(X, cols[s] * d + j);
    int rc = set_array(c, "support_vectors_", GSB_F64, nsv, d, rows, 0);
    if (rc == GSB_OK && sv)
        *sv = rows;
    else
        free(rows);
    return rc;
}

static int check_finite(const double *a, int64_t n, const double *b, int64_t m)
{
    int ok = 1;
    for (int64_t i = 0; i < n; i++)
        ok &= isfinite(a[i]) != 0;
    for (int64_t i = 0; i < m; i++)
        ok &= isfinite(b[i]) != 0;
    if (ok)
        return GSB_OK;
    return gsb__err(GSB_EINVAL, "The dual coefficients or intercepts are not finite. The input "
                    "data may contain large values and need to be preprocessed.");
}

/* ---- SVC fit: class weights --------------------------------------------- */

/*
 * class_weight_ as compute_class_weight(class_weight, classes, y) gives it
 * for SVC: 'balanced' from unweighted counts (SVC does not pass
 * sample_weight), and weights that must be usable as factors of C.
 */
static int class_weights(gsb__ctx *c, const double *classes, int64_t K, const int32_t *yi,
                         int64_t n, double *cw)
{
    GSB_TRY(gsb__class_weights(c, classes, K, yi, n, NULL, cw));
    for (int64_t k = 0; k < K; k++)
        if (!(cw[k] >= 0) || !isfinite(cw[k]))
            return gsb__err(GSB_EINVAL, "%s: class_weight must be finite and non-negative, "
                            "got %g for class %g", c->est->name, cw[k], classes[k]);
    return GSB_OK;
}

/* ---- SVC fit ------------------------------------------------------------- */

/*
 * The kept samples grouped by class (libsvm's svm_group_classes, labels
 * sorted): order[] lists positions in keep[] class by class, stable;
 * start[k] and count[k] delimit class k.
 */
typedef struct svc_groups {
    int64_t K, n;        /* classes, kept samples */
    int64_t *order;      /* n: index into keep[] */
    int64_t *start, *count;
} svc_groups;

static int group_classes(gsb__ctx *c, const int32_t *yi, const int64_t *keep, int64_t n_keep,
                         int64_t K, const double *classes, svc_groups *g)
{
    g->K = K;
    g->n = n_keep;
    g->order = gsb__alloc_array(n_keep, sizeof *g->order);
    g->start = gsb__calloc_array(K, sizeof *g->start);
    g->count = gsb__calloc_array(K, sizeof *g->count);
    if (!g->order || !g->start || !g->count)
        return oom(c, "class groups");
    for (int64_t i = 0; i < n_keep; i++)
        g->count[yi[keep[i]]]++;
    int64_t present = 0, absent = -1;
    for (int64_t k = 0; k < K; k++) {
        if (g->count[k] > 0)
            present++;
        else if (absent < 0)
            absent = k;
    }
    if (present < 2)
        return gsb__err(GSB_EINVAL, "Invalid input - all samples with positive weights belong "
                        "to the same class.");
    if (absent >= 0) {
        /* libsvm would silently fit fewer classes than classes_ lists, which
         * scikit-learn cannot then use: refuse instead */
        char v[40];
        gsb__py_float_repr(classes[absent], v, sizeof v);
        return gsb__err(GSB_EINVAL, "Invalid input - every sample of class %s has zero "
                        "weight; SVC needs samples with positive weights in each class.", v);
    }
    for (int64_t k = 1; k < K; k++)
        g->start[k] = g->start[k - 1] + g->count[k - 1];
    int64_t *fill = gsb__alloc_array(K, sizeof *fill);
    if (!fill)
        return oom(c, "class groups");
    memcpy(fill, g->start, (size_t)K * sizeof *fill);
    for (int64_t i = 0; i < n_keep; i++)
        g->order[fill[yi[keep[i]]]++] = i;
    free(fill);
    return GSB_OK;
}

static void groups_free(svc_groups *g)
{
    free(g->order);
    free(g->start);
    free(g->count);
}

/* The result of all pairs: alpha * y per grouped sample and pair. */
typedef struct svc_pairs {
    int64_t P;
    double **coef;  /* P arrays: coefficients of class a's then class b's samples */
    double *rho;
    int32_t *n_iter;
    double *probA, *probB; /* probability=True: Platt's sigmoid of each pair, else NULL */
    int timed_out;
} svc_pairs;

static void pairs_free(svc_pairs *pr)
{
    for (int64_t p = 0; pr->coef && p < pr->P; p++)
        free(pr->coef[p]);
    free(pr->coef);
    free(pr->rho);
    free(pr->n_iter);
    free(pr->probA);
    free(pr->probB);
}

/* ---- SVC fit: probability=True ------------------------------------------- */

/* libsvm's generator during a fit: its seed, and the generator itself, which
 * every cross-validation training reseeds (libsvm's svm_train does). */
typedef struct svc_rand {
    uint32_t seed;
    gsb__mt19937 g;
} svc_rand;

static void svc_rand_init(const gsb__ctx *c, svc_rand *r)
{
    const json_t *rs = json_object_get(c->params, "random_state");
    if (json_is_integer(rs)) {
        r->seed = gsb__libsvm_seed_for((uint32_t)json_integer_value(rs));
    } else { /* None: a fresh seed, as numpy's global generator would give */
        gsb__rng fresh;
        gsb__rng_seed_params(&fresh, c->params);
        r->seed = (uint32_t)(gsb__rng_next(&fresh) >> 33);
    }
    gsb__mt19937_seed(&r->g, r->seed);
}

/* Decision values of a trained fold (coef, rho over the samples sub[0..m))
 * at the samples at[0..na), oriented so that positive means y = +1 (the fold
 * was trained with its -1 class first, as libsvm orders sorted labels). */
static int fold_decisions(gsb__ctx *c, const gsb__tensor *X, const svm_kernel *k,
                          const int64_t *sub, const double *coef, int64_t m, double rho,
                          const int64_t *at, int64_t na, double *out)
{
    int64_t nsv = 0;
    int64_t *sv = gsb__alloc_array(m, sizeof *sv);
    double *w = gsb__alloc_array(m, sizeof *w), *K = NULL;
    int rc = GSB_OK;
    if (!sv || !w) {
        rc = oom(c, "cross-validation decision values");
        goto done;
    }
    for (int64_t t = 0; t < m; t++)
        if (fabs(coef[t]) > 0) { /* libsvm's support vectors */
            sv[nsv] = sub[t];
            w[nsv++] = coef[t];
        }
    if (!(K = gsb__alloc_array(na * (nsv ? nsv : 1), sizeof *K))) {
        rc = oom(c, "cross-validation kernels");
        goto done;
    }
    GSB_CHECK(kernel_block(c, X, k, at, na, sv, nsv, K));
    for (int64_t i = 0; i < na; i++) {
        double sum = 0;
        for (int64_t s = 0; s < nsv; s++)
            sum += w[s] * K[i * nsv + s];
        out[i] = -(sum - rho);
    }
done:
    free(sv);
    free(w);
    free(K);
    return rc;
}

/* Scratch of one pair's cross-validation, l entries each. */
typedef struct svc_cv {
    int64_t *perm, *sub, *at;
    int8_t *sub_y;
    double *sub_C, *coef, *dec, *fold_dec;
} svc_cv;

static void cv_free(svc_cv *v)
{
    free(v->perm);
    free(v->sub);
    free(v->at);
    free(v->sub_y);
    free(v->sub_C);
    free(v->coef);
    free(v->dec);
    free(v->fold_dec);
}

static int cv_alloc(gsb__ctx *c, int64_t l, svc_cv *v)
{
    v->perm = gsb__alloc_array(l, sizeof *v->perm);
    v->sub = gsb__alloc_array(l, sizeof *v->sub);
    v->at = gsb__alloc_array(l, sizeof *v->at);
    v->sub_y = gsb__alloc_array(l, sizeof *v->sub_y);
    v->sub_C = gsb__alloc_array(l, sizeof *v->sub_C);
    v->coef = gsb__alloc_array(l, sizeof *v->coef);
    v->dec = gsb__alloc_array(l, sizeof *v->dec);
    v->fold_dec = gsb__alloc_array(l, sizeof *v->fold_dec);
    if (!v->perm || !v->sub || !v->at || !v->sub_y || !v->sub_C || !v->coef || !v->dec ||
        !v->fold_dec)
        return oom(c, "the probability cross-validation");
    return GSB_OK;
}

/*
 * One fold f of libsvm's svm_binary_svc_probability: train on the samples
 * outside it (the -1 class first, as libsvm's sorted labels order them, each
 * class in shuffled order) and write the decision values of the fold's
 * samples into v->dec.  A training part of one class gives +1 or -1.
 */
static int cv_fold(gsb__ctx *c, const gsb__tensor *X, const svm_kernel *k, const int64_t *idx,
                   const int8_t *y, const double *Ct, int64_t l, int f, svc_rand *rnd,
                   int64_t *iter_base, int *timed_out, svc_cv *v)
{
    int64_t begin = f * l / 5, end = (f + 1) * l / 5, m = 0, npos = 0, nneg = 0;
    for (int cls = -1; cls <= 1; cls += 2)
        for (int64_t j = 0; j < l; j++) {
            int64_t t = v->perm[j];
            if ((j >= begin && j < end) || y[t] != cls)
                continue;
            v->sub[m] = idx[t];
            v->sub_y[m] = (int8_t)-cls; /* libsvm's first class (-1) is its +1 */
            v->sub_C[m++] = Ct[t];
            npos += cls > 0;
            nneg += cls < 0;
        }
    int64_t na = end - begin;
    for (int64_t j = begin; j < end; j++)
        v->at[j - begin] = idx[v->perm[j]];
    if (npos == 0 || nneg == 0) {
        for (int64_t j = begin; j < end; j++)
            v->dec[v->perm[j]] = npos ? 1 : nneg ? -1 : 0;
        return GSB_OK;
    }
    gsb__smo_result res;
    GSB_TRY(solve_binary(c, X, k, v->sub, v->sub_y, v->sub_C, m, *iter_base, v->coef, &res));
    *iter_base += res.n_iter;
    *timed_out |= res.timed_out;
    gsb__mt19937_seed(&rnd->g, rnd->seed); /* libsvm's svm_train reseeds */
    GSB_TRY(fold_decisions(c, X, k, v->sub, v->coef, m, res.rho, v->at, na, v->fold_dec));
    for (int64_t j = begin; j < end; j++)
        v->dec[v->perm[j]] = v->fold_dec[j - begin];
    return GSB_OK;
}

/* probA and probB of one pair: its samples idx (l) with labels y and bounds
 * Ct shuffled into 5 folds, cross-validated, then Platt's sigmoid fitted. */
static int svc_pair_probability(gsb__ctx *c, const gsb__tensor *X, const svm_kernel *k,
                                const int64_t *idx, const int8_t *y, const double *Ct,
                                int64_t l, svc_rand *rnd, int64_t *iter_base, int *timed_out,
                                double *A, double *B)
{
    svc_cv v = {0};
    int rc;
    GSB_CHECK(cv_alloc(c, l, &v));
    for (int64_t i = 0; i < l; i++)
        v.perm[i] = i;
    for (int64_t i = 0; i < l; i++) {
        int64_t j = i + gsb__libsvm_bounded(&rnd->g, (uint32_t)(l - i));
        int64_t t = v.perm[i];
        v.perm[i] = v.perm[j];
        v.perm[j] = t;
    }
    for (int f = 0; f < 5; f++)
        GSB_CHECK(cv_fold(c, X, k, idx, y, Ct, l, f, rnd, iter_base, timed_out, &v));
    gsb__platt_fit(l, v.dec, y, A, B);
done:
    cv_free(&v);
    return rc;
}

/* ---- SVC fit: the pairs -------------------------------------------------- */

/* One binary problem: class a (+1) against class b (-1), after its
 * probability cross-validation when rnd is given (libsvm's order). */
static int svc_pair(gsb__ctx *c, const gsb__tensor *X, const svc_groups *g, const int64_t *keep,
                    const gsb__tensor *sw, const double *cw, const svm_kernel *k, int64_t a,
                    int64_t b, svc_rand *rnd, int64_t p, int64_t *iter_base, svc_pairs *pr)
{
    int64_t ca = g->count[a], cb = g->count[b], l = ca + cb;
    double C = gsb__param_float(c->params, "C");
    int8_t *y = gsb__alloc_array(l, sizeof *y);
    double *Ct = gsb__alloc_array(l, sizeof *Ct);
    int64_t *idx = gsb__alloc_array(l, sizeof *idx);
    int rc = GSB_OK;
    if (!y || !Ct || !idx) {
        rc = oom(c, "a binary problem");
        goto done;
    }
    for (int64_t t = 0; t < l; t++) {
        int first = t < ca;
        int64_t sample = keep[g->order[first ? g->start[a] + t : g->start[b] + t - ca]];
        double w = cw[first ? a : b] * (sw ? ((const double *)sw->data)[sample] : 1.0);
        idx[t] = sample;
        y[t] = first ? 1 : -1;
        Ct[t] = w == 0 ? 0 : C * w; /* C may be inf: a zero weight stays 0 */
    }
    if (rnd)
        GSB_CHECK(svc_pair_probability(c, X, k, idx, y, Ct, l, rnd, iter_base, &pr->timed_out,
                                       &pr->probA[p], &pr->probB[p]));
    gsb__smo_result res;
    GSB_CHECK(solve_binary(c, X, k, idx, y, Ct, l, *iter_base, pr->coef[p], &res));
    pr->rho[p] = res.rho;
    pr->n_iter[p] = res.n_iter > INT32_MAX ? INT32_MAX : (int32_t)res.n_iter;
    pr->timed_out |= res.timed_out;
    *iter_base += res.n_iter;
done:
    free(y);
    free(Ct);
    free(idx);
    return rc;
}

static int svc_solve_pairs(gsb__ctx *c, const gsb__tensor *X, const svc_groups *g,
                           const int64_t *keep, const gsb__tensor *sw, const double *cw,
                           const svm_kernel *k, svc_pairs *pr)
{
    int64_t K = g->K, P = K * (K - 1) / 2, p = 0, iter_base = 0;
    int probability = json_is_true(json_object_get(c->params, "probability"));
    svc_rand rnd;
    if (probability)
        svc_rand_init(c, &rnd);
    pr->P = P;
    pr->coef = gsb__calloc_array(P, sizeof *pr->coef);
    pr->rho = gsb__alloc_array(P, sizeof *pr->rho);
    pr->n_iter = gsb__alloc_array(P, sizeof *pr->n_iter);
    if (!pr->coef || !pr->rho || !pr->n_iter)
        return oom(c, "the pairwise problems");
    if (probability && (!(pr->probA = gsb__alloc_array(P, sizeof *pr->probA)) ||
                        !(pr->probB = gsb__alloc_array(P, sizeof *pr->probB))))
        return oom(c, "the probability model");
    for (int64_t a = 0; a < K; a++)
        for (int64_t b = a + 1; b < K; b++, p++) {
            pr->coef[p] = gsb__alloc_array(g->count[a] + g->count[b], sizeof(double));
            if (!pr->coef[p])
                return oom(c, "dual coefficients");
            GSB_TRY(svc_pair(c, X, g, keep, sw, cw, k, a, b, probability ? &rnd : NULL, p,
                             &iter_base, pr));
        }
    return GSB_OK;
}

/*
 * The ovo coefficient matrix W (nsv x P) of the decision function
 * dec[:, p] = K(X, SV) W[:, p] + intercept[p], from dual_coef_ (K-1 x nsv)
 * laid out as libsvm's sv_coef: pair (a, b) reads class a's support vectors
 * in row b - 1 and class b's in row a.
 */
static void ovo_weights(const double *dual, const int64_t *sv_start, const int64_t *nsv_k,
                        int64_t K, int64_t nsv, double *W)
{
    int64_t P = K * (K - 1) / 2, p = 0;
    memset(W, 0, (size_t)(nsv * P) * sizeof *W);
    for (int64_t a = 0; a < K; a++)
        for (int64_t b = a + 1; b < K; b++, p++) {
            for (int64_t s = sv_start[a]; s < sv_start[a] + nsv_k[a]; s++)
                W[s * P + p] = dual[(b - 1) * nsv + s];
            for (int64_t s = sv_start[b]; s < sv_start[b] + nsv_k[b]; s++)
                W[s * P + p] = dual[a * nsv + s];
        }
}

/* The fitted attributes from the pairs' solutions, as libsvm's svm_train
 * builds its model and scikit-learn's fit then flips the binary case. */
static int svc_store(gsb__ctx *c, const gsb__tensor *X, const svc_groups *g,
                     const int64_t *keep, const svc_pairs *pr, const double *classes,
                     const double *cw, const svm_kernel *k)
{
    int64_t K = g->K, n = g->n, d = X->cols, P = pr->P, p = 0;
    char *nonzero = gsb__calloc_array(n, 1);
    int64_t *nsv_k = gsb__calloc_array(K, sizeof *nsv_k), *sv_start = gsb__calloc_array(K, sizeof *sv_start);
    int64_t *sv_of = gsb__alloc_array(n, sizeof *sv_of); /* grouped position -> SV index or -1 */
    double *dual = NULL, *icpt = gsb__alloc_array(P, sizeof *icpt), *sv = NULL, *W = NULL;
    int32_t *support = NULL, *nsup = gsb__alloc_array(K, sizeof *nsup);
    int64_t *cols = NULL;
    int rc = GSB_OK;
    if (!nonzero || !nsv_k || !sv_start || !sv_of || !icpt || !nsup) {
        rc = oom(c, "the support vectors");
        goto done;
    }
    for (int64_t a = 0; a < K; a++)
        for (int64_t b = a + 1; b < K; b++, p++) {
            for (int64_t t = 0; t < g->count[a]; t++)
                nonzero[g->start[a] + t] |= fabs(pr->coef[p][t]) > 0;
            for (int64_t t = 0; t < g->count[b]; t++)
                nonzero[g->start[b] + t] |= fabs(pr->coef[p][g->count[a] + t]) > 0;
        }
    int64_t nsv = 0;
    for (int64_t kk = 0; kk < K; kk++) {
        sv_start[kk] = nsv;
        for (int64_t t = g->start[kk]; t < g->start[kk] + g->count[kk]; t++) {
            sv_of[t] = nonzero[t] ? nsv : -1;
            nsv += nonzero[t];
        }
        nsv_k[kk] = nsv - sv_start[kk];
        nsup[kk] = (int32_t)nsv_k[kk];
    }
    support = gsb__alloc_array(nsv, sizeof *support);
    cols = gsb__alloc_array(nsv, sizeof *cols);
    dual = gsb__calloc_array((K - 1) * nsv, sizeof *dual);
    W = gsb__alloc_array(nsv * P, sizeof *W);
    if (!support || !cols || !dual || !W) {
        rc = oom(c, "the support vectors");
        goto done;
    }
    for (int64_t t = 0; t < n; t++) {
        int64_t s = sv_of[t];
        if (s < 0)
            continue;
        /* support_ indexes the samples left after dropping zero weights */
        support[s] = (int32_t)g->order[t];
        cols[s] = keep[g->order[t]];
    }
    p = 0;
    for (int64_t a = 0; a < K; a++)
        for (int64_t b = a + 1; b < K; b++, p++) {
            for (int64_t t = 0; t < g->count[a]; t++)
                if (sv_of[g->start[a] + t] >= 0)
                    dual[(b - 1) * nsv + sv_of[g->start[a] + t]] = pr->coef[p][t];
            for (int64_t t = 0; t < g->count[b]; t++)
                if (sv_of[g->start[b] + t] >= 0)
                    dual[a * nsv + sv_of[g->start[b] + t]] = pr->coef[p][g->count[a] + t];
            icpt[p] = pr->rho[p] != 0 ? -pr->rho[p] : 0.0;
        }
    if (K == 2) { /* scikit-learn: a positive decision means classes_[1] */
        for (int64_t s = 0; s < nsv; s++)
            dual[s] = -dual[s];
        icpt[0] = -icpt[0];
    }
    GSB_CHECK(check_finite(dual, (K - 1) * nsv, icpt, P));
    GSB_CHECK(set_array(c, "classes_", GSB_F64, K, 1, classes, 1));
    GSB_CHECK(set_array(c, "class_weight_", GSB_F64, K, 1, cw, 1));
    GSB_CHECK(set_array(c, "support_", GSB_I32, nsv, 1, support, 1));
    GSB_CHECK(set_support_vectors(c, X, k, cols, nsv, k->kind == KIND_LINEAR ? &sv : NULL));
    GSB_CHECK(set_array(c, "n_support_", GSB_I32, K, 1, nsup, 1));
    GSB_CHECK(set_array(c, "dual_coef_", GSB_F64, K - 1, nsv, dual, 0));
    GSB_CHECK(set_array(c, "intercept_", GSB_F64, P, 1, icpt, 1));
    GSB_CHECK(set_array(c, "n_iter_", GSB_I32, P, 1, pr->n_iter, 1));
    /* Platt's sigmoids; empty without probability=True, as scikit-learn's */
    GSB_CHECK(set_array(c, "probA_", GSB_F64, pr->probA ? P : 0, 1, pr->probA, 1));
    GSB_CHECK(set_array(c, "probB_", GSB_F64, pr->probB ? P : 0, 1, pr->probB, 1));
    GSB_CHECK(set_common(c, X, k, pr->timed_out));
    if (k->kind == KIND_LINEAR) {
        ovo_weights(dual, sv_start, nsv_k, K, nsv, W);
        GSB_CHECK(set_linear_coef(c, W, nsv, P, sv, d));
    }
done:
    free(nonzero);
    free(nsv_k);
    free(sv_start);
    free(sv_of);
    free(dual);
    free(icpt);
    free(sv);
    free(W);
    free(support);
    free(cols);
    free(nsup);
    return rc;
}

static int svc_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *y = gsb__in(c, "y");
    const gsb__tensor *sw = gsb__in(c, "sample_weight");
    svm_kernel k;
    GSB_TRY(fit_setup(c, &k));
    int64_t n = X->rows, K = 0, n_keep = 0;
    double *classes = NULL, *cw = NULL;
    int64_t *keep = NULL;
    int32_t *yi = gsb__alloc_array(n, sizeof *yi);
    svc_groups g = {0};
    svc_pairs pr = {0};
    int rc;
    if (!yi) {
        rc = oom(c, "labels");
        goto done;
    }
    GSB_CHECK(gsb__labels_encode(c, y, &classes, &K, yi));
    if (!(cw = gsb__alloc_array(K, sizeof *cw))) {
        rc = oom(c, "class weights");
        goto done;
    }
    GSB_CHECK(class_weights(c, classes, K, yi, n, cw));
    if (K < 2) {
        rc = gsb__err(GSB_EINVAL, "The number of classes has to be greater than one; got %lld "
                      "class", (long long)K);
        goto done;
    }
    GSB_CHECK(check_square(&k, X));
    GSB_CHECK(positive_samples(c, sw, n, &keep, &n_keep));
    GSB_CHECK(group_classes(c, yi, keep, n_keep, K, classes, &g));
    k.gamma = resolve_gamma(c, &k, X);
    GSB_CHECK(svc_solve_pairs(c, X, &g, keep, sw, cw, &k, &pr));
    rc = svc_store(c, X, &g, keep, &pr, classes, cw, &k);
done:
    free(yi);
    free(classes);
    free(cw);
    free(keep);
    groups_free(&g);
    pairs_free(&pr);
    return rc;
}

/* ---- SVR fit ------------------------------------------------------------- */

static int svr_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *y = gsb__in(c, "y");
    const gsb__tensor *sw = gsb__in(c, "sample_weight");
    svm_kernel k;
    GSB_TRY(fit_setup(c, &k));
    if (y->cols != 1)
        return gsb__err(GSB_EINVAL, "y should be a 1d array, got an array of shape (%lld, "
                        "%lld) instead.", (long long)y->rows, (long long)y->cols);
    GSB_TRY(check_square(&k, X));
    int64_t n = X->rows, d = X->cols, m = 0;
    int64_t *keep = NULL, *real = NULL, *cols = NULL;
    int8_t *ys = NULL;
    double *p = NULL, *Ct = NULL, *alpha = NULL, *coef = NULL, *sv = NULL;
    int32_t *support = NULL;
    gsb__tensor Xh = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(positive_samples(c, sw, n, &keep, &m));
    k.gamma = resolve_gamma(c, &k, X);
    int64_t l = 2 * m;
    double C = gsb__param_float(c->params, "C"), eps = gsb__param_float(c->params, "epsilon");
    ys = gsb__alloc_array(l, sizeof *ys);
    real = gsb__alloc_array(l, sizeof *real);
    p = gsb__alloc_array(l, sizeof *p);
    Ct = gsb__alloc_array(l, sizeof *Ct);
    alpha = gsb__alloc_array(l, sizeof *alpha);
    coef = gsb__alloc_array(m, sizeof *coef);
    if (!ys || !real || !p || !Ct || !alpha || !coef) {
        rc = oom(c, "the dual problem");
        goto done;
    }
    GSB_CHECK(problem_matrix(X, &k, keep, m, &Xh));
    for (int64_t i = 0; i < m; i++) {
        double yv = gsb__tensor_get(y, keep[i]);
        double w = sw ? ((const double *)sw->data)[keep[i]] : 1.0;
        /* a+ (upper half of the tube) then a- for each sample */
        ys[i] = 1;
        ys[i + m] = -1;
        p[i] = eps - yv;
        p[i + m] = eps + yv;
        Ct[i] = Ct[i + m] = C * w;
        real[i] = real[i + m] = i;
    }
    gsb__smo_problem pb = {.l = l, .real = real, .y = ys, .p = p, .C = Ct};
    gsb__smo_result res;
    GSB_CHECK(solve_dual(c, &Xh, &k, &pb, 0, alpha, &res));
    int64_t nsv = 0;
    for (int64_t i = 0; i < m; i++) {
        coef[i] = alpha[i] - alpha[i + m];
        nsv += fabs(coef[i]) > 0;
    }
    support = gsb__alloc_array(nsv, sizeof *support);
    cols = gsb__alloc_array(nsv, sizeof *cols);
    if (!support || !cols) {
        rc = oom(c, "the support vectors");
        goto done;
    }
    for (int64_t i = 0, s = 0; i < m; i++) {
        if (!(fabs(coef[i]) > 0))
            continue;
        support[s] = (int32_t)i; /* index among the samples of positive weight */
        cols[s] = keep[i];
        coef[s++] = coef[i];
    }
    double icpt = res.rho != 0 ? -res.rho : 0.0;
    int32_t nsup = (int32_t)nsv;
    GSB_CHECK(check_finite(coef, nsv, &icpt, 1));
    GSB_CHECK(set_array(c, "support_", GSB_I32, nsv, 1, support, 1));
    GSB_CHECK(set_support_vectors(c, X, &k, cols, nsv, k.kind == KIND_LINEAR ? &sv : NULL));
    GSB_CHECK(set_array(c, "n_support_", GSB_I32, 1, 1, &nsup, 1));
    GSB_CHECK(set_array(c, "dual_coef_", GSB_F64, 1, nsv, coef, 0));
    GSB_CHECK(set_array(c, "intercept_", GSB_F64, 1, 1, &icpt, 1));
    GSB_CHECK(gsb__fit_set_scalar(c, "n_iter_", (double)res.n_iter, GSB_I64));
    GSB_CHECK(set_common(c, X, &k, res.timed_out));
    if (k.kind == KIND_LINEAR)
        GSB_CHECK(set_linear_coef(c, coef, nsv, 1, sv, d));
done:
    gsb__tensor_free(&Xh);
    free(keep);
    free(real);
    free(ys);
    free(p);
    free(Ct);
    free(alpha);
    free(coef);
    free(sv);
    free(support);
    free(cols);
    return rc;
}

/* ---- prediction ---------------------------------------------------------- */

/* Bytes of the kernel block (test rows x support vectors) per step. */
#define SVM_PREDICT_BLOCK_BYTES ((int64_t)32 << 20)

/* The kernel of the fitted model: parameters as they are now, _gamma from fit. */
static int fitted_kernel(gsb__ctx *c, svm_kernel *k)
{
    const gsb__tensor *g;
    GSB_TRY(kernel_from_params(c, k));
    GSB_TRY(gsb__attr_need(c, "_gamma", GSB_F64, 1, 1, &g));
    k->gamma = ((const double *)g->data)[0];
    if (!isfinite(k->gamma) || k->gamma < 0)
        return gsb__err(GSB_ECORRUPT, "%s: fitted attribute '_gamma' is %g", c->est->name,
                        k->gamma);
    return GSB_OK;
}

/* The support vectors of a fitted model as prediction reads them: their rows
 * (sv), or for a precomputed kernel the Gram columns cols; nsv of them. */
typedef struct svm_svs {
    const gsb__tensor *sv;
    const int64_t *cols;
    int64_t nsv;
} svm_svs;

/* The fitted support vectors, checked against X and the kernel (an imported
 * blob can hold anything). */
static int load_svs(gsb__ctx *c, const svm_kernel *k, svm_svs *out)
{
    const gsb__tensor *X = gsb__in(c, "X"), *t;
    memset(out, 0, sizeof *out);
    if (k->kind != KIND_PRECOMPUTED) {
        GSB_TRY(gsb__attr_need(c, "support_vectors_", GSB_F64, -1, X->cols, &out->sv));
        out->nsv = out->sv->rows;
        return GSB_OK;
    }
    GSB_TRY(gsb__attr_need(c, "_support_cols", GSB_I64, -1, 1, &t));
    out->cols = t->data;
    out->nsv = t->rows;
    for (int64_t s = 0; s < out->nsv; s++)
        if (out->cols[s] < 0 || out->cols[s] >= X->cols)
            return gsb__err(GSB_ECORRUPT, "The internal representation of %s was altered",
                            c->est->name);
    return GSB_OK;
}

/* Kernel rows i0.. (rows of them) of X against the support vectors, into kv
 * (rows x nsv, float64, on the backend): the kernel op, or the columns of a
 * precomputed Gram matrix. */
static int predict_kernels(gsb__ctx *c, const svm_kernel *k, const svm_svs *svs,
                           const gsb__tensor *Xb, const gsb__tensor *Sb, int64_t i0,
                           int64_t rows, double *host, gsb__tensor *kv)
{
    const gsb__backend *be = c->be;
    if (k->kind == KIND_PRECOMPUTED) {
        const gsb__tensor *X = gsb__in(c, "X");
        for (int64_t i = 0; i < rows; i++)
            for (int64_t s = 0; s < svs->nsv; s++)
                host[i * svs->nsv + s] = gsb__tensor_get(X, (i0 + i) * X->cols + svs->cols[s]);
        return be->ops->upload(be, kv, host);
    }
    gsb__tensor xv = *Xb;
    xv.data = (double *)Xb->data + i0 * Xb->cols;
    xv.rows = rows;
    xv.owned = 0;
    return be->ops->kernel(be, &xv, Sb, k->kind, k->gamma, k->coef0, k->degree, kv);
}

/*
 * dec (host, n x P, float64) = K(X, SV) W + intercept, in float64, through
 * the backend's kernel and gemm ops, a block of test rows at a time.
 */
static int decision_values(gsb__ctx *c, const svm_kernel *k, const svm_svs *svs,
                           const double *W, int64_t P, const double *icpt, double *dec)
{
    const gsb__backend *be = c->be;
    const gsb__tensor *X = gsb__in(c, "X");
    int64_t n = X->rows, nsv = svs->nsv;
    if (nsv == 0) {
        for (int64_t i = 0; i < n; i++)
            for (int64_t p = 0; p < P; p++)
                dec[i * P + p] = icpt[p];
        return GSB_OK;
    }
    int64_t bs = SVM_PREDICT_BLOCK_BYTES / (nsv * (int64_t)sizeof(double));
    bs = bs < 1 ? 1 : bs > n ? n : bs;
    int pre = k->kind == KIND_PRECOMPUTED;
    gsb__tensor Wh = gsb__tensor_host_view((void *)W, GSB_F64, nsv, P);
    gsb__tensor Xb = GSB__TENSOR_NONE, Sb = GSB__TENSOR_NONE, Wb = GSB__TENSOR_NONE,
                Kb = GSB__TENSOR_NONE, Db = GSB__TENSOR_NONE;
    double *host = pre ? gsb__alloc_array(bs * nsv, sizeof *host) : NULL;
    int rc;
    if (pre && !host) {
        rc = oom(c, "kernel values");
        goto done;
    }
    if (!pre) {
        GSB_CHECK(gsb__tensor_to_dtype(be, X, GSB_F64, &Xb));
        GSB_CHECK(gsb__tensor_to(be, svs->sv, &Sb));
    }
    GSB_CHECK(gsb__tensor_to(be, &Wh, &Wb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, bs, nsv, &Kb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, bs, P, &Db));
    for (int64_t i0 = 0; i0 < n; i0 += bs) {
        int64_t rows = n - i0 < bs ? n - i0 : bs;
        gsb__tensor kv = Kb, dv = Db;
        kv.rows = dv.rows = rows;
        kv.owned = dv.owned = 0;
        GSB_CHECK(predict_kernels(c, k, svs, &Xb, &Sb, i0, rows, host, &kv));
        GSB_CHECK(be->ops->gemm(be, 0, 0, 1.0, &kv, &Wb, 0.0, &dv));
        GSB_CHECK(be->ops->download(be, &dv, dec + i0 * P));
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < P; p++)
            dec[i * P + p] += icpt[p];
done:
    free(host);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Sb);
    gsb__tensor_free(&Wb);
    gsb__tensor_free(&Kb);
    gsb__tensor_free(&Db);
    return rc;
}

/* The fitted SVC, checked for consistency (an imported blob can hold anything). */
typedef struct svc_model {
    const gsb__tensor *classes, *dual, *icpt;
    svm_svs svs;
    int64_t K, P, nsv;
    int64_t *sv_start, *nsv_k;
} svc_model;

static int svc_load(gsb__ctx *c, const svm_kernel *k, svc_model *m)
{
    const gsb__tensor *nsup;
    memset(m, 0, sizeof *m);
    GSB_TRY(gsb__attr_need(c, "classes_", GSB_F64, -1, 1, &m->classes));
    m->K = m->classes->rows;
    if (m->K < 2 || m->K > (1 << 20))
        return gsb__err(GSB_ECORRUPT, "%s: fitted attribute 'classes_' holds %lld class(es)",
                        c->est->name, (long long)m->K);
    m->P = m->K * (m->K - 1) / 2;
    GSB_TRY(load_svs(c, k, &m->svs));
    m->nsv = m->svs.nsv;
    GSB_TRY(gsb__attr_need(c, "n_support_", GSB_I32, m->K, 1, &nsup));
    GSB_TRY(gsb__attr_need(c, "dual_coef_", GSB_F64, m->K - 1, m->nsv, &m->dual));
    GSB_TRY(gsb__attr_need(c, "intercept_", GSB_F64, m->P, 1, &m->icpt));
    m->sv_start = gsb__alloc_array(m->K, sizeof *m->sv_start);
    m->nsv_k = gsb__alloc_array(m->K, sizeof *m->nsv_k);
    if (!m->sv_start || !m->nsv_k)
        return oom(c, "the model");
    int64_t total = 0;
    int ok = 1;
    for (int64_t k = 0; k < m->K; k++) {
        int32_t v = ((const int32_t *)nsup->data)[k];
        ok &= v >= 0;
        m->sv_start[k] = total;
        m->nsv_k[k] = v;
        total += v;
    }
    if (!ok || total != m->nsv)
        return gsb__err(GSB_ECORRUPT, "The internal representation of %s was altered",
                        c->est->name);
    return GSB_OK;
}

static void svc_model_free(svc_model *m)
{
    free(m->sv_start);
    free(m->nsv_k);
}

/* SVC decision values (host, n x P): scikit-learn's for two classes, else
 * libsvm's one-vs-one values.  On failure m and *dec are released. */
static int svc_decision(gsb__ctx *c, svc_model *m, double **dec)
{
    svm_kernel k;
    double *W = NULL;
    int rc;
    *dec = NULL;
    memset(m, 0, sizeof *m);
    GSB_CHECK(fitted_kernel(c, &k));
    GSB_CHECK(svc_load(c, &k, m));
    W = gsb__alloc_array(m->nsv * m->P, sizeof *W);
    *dec = gsb__alloc_array(gsb__in(c, "X")->rows * m->P, sizeof **dec);
    if (!W || !*dec) {
        rc = oom(c, "decision values");
        goto done;
    }
    ovo_weights(m->dual->data, m->sv_start, m->nsv_k, m->K, m->nsv, W);
    rc = decision_values(c, &k, &m->svs, W, m->P, m->icpt->data, *dec);
done:
    free(W);
    if (rc != GSB_OK) {
        free(*dec);
        *dec = NULL;
        svc_model_free(m);
    }
    return rc;
}

/* sklearn's _ovr_decision_function(dec < 0, -dec, K) for one sample. */
static void ovr_row(const double *dec, int64_t K, double *out)
{
    double *conf = out + K; /* scratch: K sums of confidences */
    for (int64_t k = 0; k < K; k++)
        out[k] = conf[k] = 0;
    int64_t p = 0;
    for (int64_t a = 0; a < K; a++)
        for (int64_t b = a + 1; b < K; b++, p++) {
            conf[a] += dec[p];
            conf[b] -= dec[p];
            out[dec[p] < 0 ? b : a] += 1;
        }
    for (int64_t k = 0; k < K; k++)
        out[k] += conf[k] / (3 * (fabs(conf[k]) + 1));
}

static int svc_decision_function(gsb__ctx *c)
{
    svc_model m;
    double *dec;
    GSB_TRY(svc_decision(c, &m, &dec));
    int rc;
    int64_t n = gsb__in(c, "X")->rows, K = m.K, P = m.P;
    int ovr = K > 2 && gsb__param_is(c->params, "decision_function_shape", "ovr");
    int64_t cols = ovr ? K : P;
    gsb__tensor S;
    double *scratch = NULL;
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, cols, &S));
    if (ovr) {
        if (!(scratch = gsb__alloc_array(2 * K, sizeof *scratch))) {
            gsb__tensor_free(&S);
            rc = oom(c, "decision values");
            goto done;
        }
        for (int64_t i = 0; i < n; i++) {
            ovr_row(dec + i * P, K, scratch);
            memcpy((double *)S.data + i * K, scratch, (size_t)K * sizeof(double));
        }
    } else {
        memcpy(S.data, dec, (size_t)(n * P) * sizeof(double));
    }
    if (K == 2)
        gsb__tensor_as_1d(&S);
    rc = gsb__out(c, "scores", &S);
done:
    free(dec);
    free(scratch);
    svc_model_free(&m);
    return rc;
}

static int svc_predict(gsb__ctx *c)
{
    int break_ties = gsb__param_bool(c->params, "break_ties");
    int ovo = gsb__param_is(c->params, "decision_function_shape", "ovo");
    if (break_ties && ovo)
        return gsb__err(GSB_EINVAL, "break_ties must be False when decision_function_shape is "
                        "'ovo'");
    svc_model m;
    double *dec;
    GSB_TRY(svc_decision(c, &m, &dec));
    int rc;
    int64_t n = gsb__in(c, "X")->rows, K = m.K, P = m.P;
    const double *cls = m.classes->data;
    double *score = gsb__alloc_array(2 * K, sizeof *score);
    gsb__tensor labels = GSB__TENSOR_NONE;
    if (!score) {
        rc = oom(c, "votes");
        goto done;
    }
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, 1, &labels));
    for (int64_t i = 0; i < n; i++) {
        const double *di = dec + i * P;
        int64_t best = 0;
        if (K == 2) {
            best = di[0] < 0 ? 0 : 1; /* libsvm's value is -di[0]: > 0 votes class 0 */
        } else {
            if (break_ties) {
                ovr_row(di, K, score); /* argmax of decision_function, first max */
            } else {
                /* libsvm's votes: > 0 for the first class of the pair */
                for (int64_t k = 0; k < K; k++)
                    score[k] = 0;
                int64_t p = 0;
                for (int64_t a = 0; a < K; a++)
                    for (int64_t b = a + 1; b < K; b++, p++)
                        score[di[p] > 0 ? a : b] += 1;
            }
            for (int64_t k = 1; k < K; k++)
                if (score[k] > score[best])
                    best = k;
        }
        ((double *)labels.data)[i] = cls[best];
    }
    gsb__tensor_as_1d(&labels);
    rc = gsb__out(c, "labels", &labels);
done:
    gsb__tensor_free(&labels);
    free(score);
    free(dec);
    svc_model_free(&m);
    return rc;
}

/*
 * Class probabilities (n x K, float64) as libsvm's svm_predict_probability:
 * each pair's sigmoid of its decision value, clipped to [1e-7, 1 - 1e-7],
 * coupled into K probabilities.  Not available without probability=True
 * (scikit-learn: AttributeError), nor for a model fitted without it.
 */
static int svc_probabilities(gsb__ctx *c, int take_log)
{
    /* a model fitted without probabilities says so whatever the parameter is now
     * (the Python classes pass parameters on at fit only) */
    const gsb__tensor *A = gsb__attr(c, "probA_"), *B = gsb__attr(c, "probB_");
    if (!A || !B || A->rows * A->cols == 0 || B->rows * B->cols == 0)
        return gsb__err(GSB_ENOTFITTED, "predict_proba is not available when fitted with "
                        "probability=False");
    if (!json_is_true(json_object_get(c->params, "probability")))
        return gsb__err(GSB_ENOTFOUND, "predict_proba is not available when probability=False");
    svc_model m;
    double *dec;
    GSB_TRY(svc_decision(c, &m, &dec));
    int64_t n = gsb__in(c, "X")->rows, K = m.K, P = m.P;
    gsb__tensor out = GSB__TENSOR_NONE;
    double *r = gsb__alloc_array(K * K, sizeof *r), *Q = gsb__alloc_array(K * K, sizeof *Q);
    double *Qp = gsb__alloc_array(K, sizeof *Qp);
    int rc;
    if (!r || !Q || !Qp) {
        rc = oom(c, "probabilities");
        goto done;
    }
    GSB_CHECK(gsb__attr_need(c, "probA_", GSB_F64, P, 1, &A));
    GSB_CHECK(gsb__attr_need(c, "probB_", GSB_F64, P, 1, &B));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, K, &out));
    for (int64_t i = 0; i < n; i++) {
        double *pi = (double *)out.data + i * K;
        int64_t p = 0;
        for (int64_t a = 0; a < K; a++)
            for (int64_t b = a + 1; b < K; b++, p++) {
                /* libsvm's value: two classes are stored with scikit-learn's sign */
                double f = K == 2 ? -dec[i * P + p] : dec[i * P + p];
                double q = gsb__platt_predict(f, ((const double *)A->data)[p],
                                              ((const double *)B->data)[p]);
                q = fmin(fmax(q, 1e-7), 1 - 1e-7);
                r[a * K + b] = q;
                r[b * K + a] = 1 - q;
            }
        gsb__platt_couple((int)K, r, pi, Q, Qp);
        for (int64_t k = 0; take_log && k < K; k++)
            pi[k] = log(pi[k]);
    }
    rc = gsb__out(c, take_log ? "log_proba" : "proba", &out);
done:
    gsb__tensor_free(&out);
    free(r);
    free(Q);
    free(Qp);
    free(dec);
    svc_model_free(&m);
    return rc;
}

static int svc_predict_proba(gsb__ctx *c) { return svc_probabilities(c, 0); }
static int svc_predict_log_proba(gsb__ctx *c) { return svc_probabilities(c, 1); }

static int svr_predict(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *dual, *icpt, *nsup;
    svm_kernel k;
    svm_svs svs;
    GSB_TRY(fitted_kernel(c, &k));
    GSB_TRY(load_svs(c, &k, &svs));
    GSB_TRY(gsb__attr_need(c, "dual_coef_", GSB_F64, 1, svs.nsv, &dual));
    GSB_TRY(gsb__attr_need(c, "intercept_", GSB_F64, 1, 1, &icpt));
    GSB_TRY(gsb__attr_need(c, "n_support_", GSB_I32, 1, 1, &nsup));
    if (((const int32_t *)nsup->data)[0] != svs.nsv)
        return gsb__err(GSB_ECORRUPT, "The internal representation of %s was altered",
                        c->est->name);
    gsb__tensor out;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, X->rows, 1, &out));
    int rc = decision_values(c, &k, &svs, dual->data, 1, icpt->data, out.data);
    if (rc != GSB_OK) {
        gsb__tensor_free(&out);
        return rc;
    }
    gsb__tensor_as_1d(&out);
    return gsb__out(c, "y", &out);
}

/* ---- descriptors --------------------------------------------------------- */

static const gsb__method_desc svc_methods[] = {
    {"fit", svc_fit, /* the SMO: rows^2 kernel terms, device=auto weighs them */
     {{"X", GSB__IN_X | GSB__IN_QUADRATIC},
      {"y", GSB__IN_LABELS},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     1,
     "Fit one libsvm C-SVC per pair of classes (y: class labels as float64; sample_weight "
     "scales C per sample, zero weights drop the sample)."},
    {"predict", svc_predict, {{"X", GSB__IN_X}}, 0,
     "Class of each sample by libsvm's one-vs-one votes (first class of the most votes), or "
     "the argmax of decision_function with break_ties, as 'labels' (float64)."},
    {"decision_function", svc_decision_function, {{"X", GSB__IN_X}}, 0,
     "As 'scores' (float64): (n,) for two classes (positive means classes_[1]); else (n, "
     "n_classes) for 'ovr' or (n, n_classes * (n_classes - 1) / 2) for 'ovo'."},
    {"predict_proba", svc_predict_proba, {{"X", GSB__IN_X}}, 0,
     "With probability=True: class probabilities (n, n_classes), libsvm's Platt sigmoids "
     "coupled pairwise, as 'proba'."},
    {"predict_log_proba", svc_predict_log_proba, {{"X", GSB__IN_X}}, 0,
     "With probability=True: log of predict_proba, as 'log_proba'."},
    {0}};

static const gsb__attr_desc svc_attrs[] = {
    {"classes_", "Sorted class labels (float64)."},
    {"class_weight_", "Weight of each class (float64), from class_weight."},
    {"support_", "Indices of the support vectors (int32), grouped by class; with zero sample "
                 "weights they index the samples left after dropping those (as scikit-learn)."},
    {"support_vectors_", "The support vectors (n_SV, n_features), float64; empty (0, 0) for "
                         "kernel='precomputed'."},
    {"n_support_", "Number of support vectors of each class (int32)."},
    {"dual_coef_", "Dual coefficients y_i alpha_i (n_classes - 1, n_SV), libsvm's layout; "
                   "two classes: signed so that positive favours classes_[1]."},
    {"intercept_", "Intercepts (n_classes * (n_classes - 1) / 2,), float64."},
    {"coef_", "With kernel='linear' only: primal weights (n_classes * (n_classes - 1) / 2, "
              "n_features), float64."},
    {"n_iter_", "Solver iterations of each pair of classes (int32)."},
    {"fit_status_", "0 when every solver converged, 1 when one stopped at max_iter."},
    {"probA_", "Platt's A of each pair of classes (float64); empty without probability=True."},
    {"probB_", "Platt's B of each pair of classes (float64); empty without probability=True."},
    {"shape_fit_", "Shape of the training X (int64, 2 values)."},
    {"_gamma", "The numeric gamma used by the kernel."},
    {"_support_cols", "kernel='precomputed': the training columns of the support vectors."},
    {0}};

static const gsb__method_desc svr_methods[] = {
    {"fit", svr_fit, /* the SMO: rows^2 kernel terms, device=auto weighs them */
     {{"X", GSB__IN_X | GSB__IN_QUADRATIC},
      {"y", GSB__IN_Y_LIKE_X},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     1, "Fit libsvm's epsilon-SVR (sample_weight scales C per sample, zero weights drop the "
        "sample)."},
    {"predict", svr_predict, {{"X", GSB__IN_X}}, 0,
     "sum_i dual_coef_i K(x_i, x) + intercept_, as 'y' (float64, (n,))."},
    {0}};

static const gsb__attr_desc svr_attrs[] = {
    {"support_", "Indices of the support vectors (int32) among the samples of positive "
                 "weight."},
    {"support_vectors_", "The support vectors (n_SV, n_features), float64; empty (0, 0) for "
                         "kernel='precomputed'."},
    {"n_support_", "Number of support vectors, int32 of shape (1,)."},
    {"dual_coef_", "alpha+ - alpha- of each support vector, (1, n_SV)."},
    {"intercept_", "Intercept (1,), float64."},
    {"coef_", "With kernel='linear' only: primal weights (1, n_features), float64."},
    {"n_iter_", "Solver iterations."},
    {"fit_status_", "0 when the solver converged, 1 when it stopped at max_iter."},
    {"shape_fit_", "Shape of the training X (int64, 2 values)."},
    {"_gamma", "The numeric gamma used by the kernel."},
    {"_support_cols", "kernel='precomputed': the training columns of the support vectors."},
    {0}};

const gsb__estimator_desc gsb__est_SVC = {
    "SVC", "svm", GSB__KIND_CLASSIFIER, svc_params, svc_methods, svc_attrs,
    "C-support vector classification (libsvm's SMO, one-vs-one for several classes), as "
    "scikit-learn's SVC."};

const gsb__estimator_desc gsb__est_SVR = {
    "SVR", "svm", GSB__KIND_REGRESSOR, svr_params, svr_methods, svr_attrs,
    "Epsilon-support vector regression (libsvm's SMO), as scikit-learn's SVR."};
