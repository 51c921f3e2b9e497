/*
 * enet_solve.c - the elastic-net solver on prepared data (see enet.h): the
 * choice of form, and the gram, residual and working-set forms.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/warn.h"
#include "estimators/linear_model/enet.h"
#include "solvers/cd_rule.h"
#include "solvers/coordinate_descent.h"

/*
 * The cost model.  CPU: the Gram matrix (n p^2 / 2 BLAS-3 flops) pays for
 * itself after about p / 15 epochs of the residual form (2 n p memory-bound
 * flops each), and scikit-learn's fits take tens of epochs; it also needs
 * n > p to be the smaller object.  GPU: a p x p Gram matrix and one
 * persistent kernel up to a few thousand features (more for tall data);
 * beyond, working sets.
 */
#define CPU_GRAM_MAX_FEATURES 2048
#define GPU_GRAM_MAX_FEATURES 4096
/* tall data keeps the Gram form on the GPU up to this many features (a 2 GiB Q):
 * cheaper than a float64 copy of X for the working sets */
#define GPU_GRAM_MAX_FEATURES_TALL 16384
/* working sets: the first size, the most rounds, the inner tolerance */
#define WS_START 128
#define WS_MAX_ROUNDS 40
#define WS_INNER_FRACTION 0.3

static int on_cpu(const gsb__enet_solver *s) { return s->c->be == gsb__cpu_backend(); }

static gsb__enet_form choose_form(gsb__enet_solver *s, int precompute)
{
    int64_t forced = gsb__opt_int(s->c, "_cd_form", 0);
    if (forced >= GSB__ENET_GRAM && forced <= GSB__ENET_WORKING_SET)
        return (gsb__enet_form)forced;
    int64_t n = s->d->n, p = s->d->p;
    if (on_cpu(s))
        return precompute || (n > p && p <= CPU_GRAM_MAX_FEATURES) ? GSB__ENET_GRAM
                                                                    : GSB__ENET_RESIDUAL;
    int tall = n >= 2 * p && p <= GPU_GRAM_MAX_FEATURES_TALL;
    return precompute || p <= GPU_GRAM_MAX_FEATURES || tall ? GSB__ENET_GRAM
                                                            : GSB__ENET_WORKING_SET;
}

static int oom(void) { return gsb__err(GSB_ENOMEM, "out of host memory"); }

/* The targets as k x n host doubles (Y is n x k on the backend). */
static int targets_host(const gsb__lin_data *d, double **out)
{
    double *y;
    GSB_TRY(gsb__lin_download_f64(&d->Y, &y));
    double *t = gsb__alloc_array(d->k * d->n, sizeof *t);
    if (!t) {
        free(y);
        return oom();
    }
    for (int64_t i = 0; i < d->n; i++)
        for (int64_t j = 0; j < d->k; j++)
            t[j * d->n + i] = y[i * d->k + j];
    free(y);
    *out = t;
    return GSB_OK;
}

static int y_norms(gsb__enet_solver *s)
{
    const gsb__lin_data *d = s->d;
    if (!(s->y_norm2 = gsb__alloc_array(d->k, sizeof(double))))
        return oom();
    for (int64_t t = 0; t < d->k; t++) {
        double v = 0;
        for (int64_t i = 0; i < d->n; i++)
            v += s->Yh[t * d->n + i] * s->Yh[t * d->n + i];
        s->y_norm2[t] = v;
    }
    return GSB_OK;
}

/* ---- setting up ------------------------------------------------------------ */

/* *out = t in float64, owning its memory; t is emptied. */
static int take_f64(const gsb__backend *be, gsb__tensor *t, gsb__tensor *out)
{
    if (t->dtype == GSB_F64) {
        *out = *t;
        *t = GSB__TENSOR_NONE;
        return GSB_OK;
    }
    return gsb__tensor_to_dtype(be, t, GSB_F64, out);
}

/* Q = X^T X and q = Y^T X in X's dtype (as scikit-learn forms them), then
 * float64 for the solver; ||y_t||^2 from the diagonal of Y^T Y. */
static int init_gram(gsb__enet_solver *s)
{
    const gsb__backend *be = s->c->be;
    const gsb__lin_data *d = s->d;
    gsb__tensor Q = GSB__TENSOR_NONE, q = GSB__TENSOR_NONE, YY = GSB__TENSOR_NONE;
    double *yy = NULL;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, d->p, d->p, &Q));
    GSB_CHECK(be->ops->syrk(be, 1.0, &d->X, 0.0, &Q));
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, d->k, d->p, &q));
    GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &d->Y, &d->X, 0.0, &q));
    GSB_CHECK(gsb__tensor_alloc(be, d->dtype, d->k, d->k, &YY));
    GSB_CHECK(be->ops->syrk(be, 1.0, &d->Y, 0.0, &YY));
    GSB_CHECK(take_f64(be, &Q, &s->Q));
    GSB_CHECK(take_f64(be, &q, &s->q));
    GSB_CHECK(gsb__lin_download_f64(&YY, &yy));
    if (!(s->y_norm2 = gsb__alloc_array(d->k, sizeof(double)))) {
        rc = oom();
        goto done;
    }
    for (int64_t t = 0; t < d->k; t++)
        s->y_norm2[t] = yy[t * d->k + t];
done:
    gsb__tensor_free(&Q);
    gsb__tensor_free(&q);
    gsb__tensor_free(&YY);
    free(yy);
    return rc;
}

/* X^T on the host in X's dtype (column j of X contiguous), and the targets.
 * A host solver: another backend's X comes down first (only when forced). */
static int init_residual(gsb__enet_solver *s)
{
    const gsb__lin_data *d = s->d;
    int64_t n = d->n, p = d->p;
    size_t es = gsb_dtype_size(d->dtype);
    gsb__tensor Xh = d->X;
    if (!on_cpu(s))
        GSB_TRY(gsb__tensor_to_host(&d->X, &Xh));
    char *xt = gsb__alloc_array(n * p, es);
    if (!xt) {
        if (!on_cpu(s))
            gsb__tensor_free(&Xh);
        return oom();
    }
    const char *x = Xh.data;
    /* blocks of rows keep both sides of the transpose in cache */
    for (int64_t i0 = 0; i0 < n; i0 += 64)
        for (int64_t j = 0; j < p; j++)
            for (int64_t i = i0; i < n && i < i0 + 64; i++)
                memcpy(xt + (size_t)(j * n + i) * es, x + (size_t)(i * p + j) * es, es);
    if (!on_cpu(s))
        gsb__tensor_free(&Xh);
    s->Xt = xt;
    GSB_TRY(targets_host(d, &s->Yh));
    return y_norms(s);
}

/* X in float64 on the backend, the targets, X^T y_t and the column norms. */
static int init_working_set(gsb__enet_solver *s)
{
    const gsb__backend *be = s->c->be;
    const gsb__lin_data *d = s->d;
    int64_t n = d->n, p = d->p, k = d->k;
    gsb__tensor Yb = GSB__TENSOR_NONE, XY = GSB__TENSOR_NONE, mean = GSB__TENSOR_NONE,
                var = GSB__TENSOR_NONE;
    double *mh = NULL, *vh = NULL;
    int rc;
    /* float64 throughout: the gap needs R = y - X w to far better than float32 */
    GSB_CHECK(gsb__tensor_to_dtype(be, &d->X, GSB_F64, &s->Xd));
    GSB_CHECK(targets_host(d, &s->Yh));
    GSB_CHECK(y_norms(s));
    GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, k, n, s->Yh, &Yb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, k, p, &XY));
    GSB_CHECK(be->ops->gemm(be, 0, 0, 1.0, &Yb, &s->Xd, 0.0, &XY));
    GSB_CHECK(gsb__lin_download_f64(&XY, &s->Xy));
    /* ||X_j||^2 = n (var_j + mean_j^2): only to rank features, never to exclude one */
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, p, 1, &mean));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, p, 1, &var));
    GSB_CHECK(be->ops->col_moments(be, &s->Xd, NULL, &mean, &var));
    GSB_CHECK(gsb__lin_download_f64(&mean, &mh));
    GSB_CHECK(gsb__lin_download_f64(&var, &vh));
    if (!(s->norm2 = gsb__alloc_array(p, sizeof(double)))) {
        rc = oom();
        goto done;
    }
    for (int64_t j = 0; j < p; j++)
        s->norm2[j] = (double)n * (vh[j] + mh[j] * mh[j]);
done:
    gsb__tensor_free(&Yb);
    gsb__tensor_free(&XY);
    gsb__tensor_free(&mean);
    gsb__tensor_free(&var);
    free(mh);
    free(vh);
    return rc;
}

int gsb__enet_solver_init(gsb__enet_solver *s, gsb__ctx *c, const gsb__lin_data *d,
                          int precompute)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    s->d = d;
    s->form = choose_form(s, precompute);
    int rc = s->form == GSB__ENET_GRAM       ? init_gram(s)
             : s->form == GSB__ENET_RESIDUAL ? init_residual(s)
                                             : init_working_set(s);
    if (rc != GSB_OK)
        gsb__enet_solver_free(s);
    return rc;
}

int gsb__enet_solver_init_gram(gsb__enet_solver *s, gsb__ctx *c, const gsb__lin_data *d,
                               const double *Q, const double *q, const double *y_norm2)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    s->d = d;
    s->form = GSB__ENET_GRAM;
    int rc = gsb__lin_upload_f64(c->be, GSB_F64, d->p, d->p, Q, &s->Q);
    if (rc == GSB_OK)
        rc = gsb__lin_upload_f64(c->be, GSB_F64, d->k, d->p, q, &s->q);
    if (rc == GSB_OK && !(s->y_norm2 = gsb__alloc_array(d->k, sizeof(double))))
        rc = oom();
    if (rc == GSB_OK)
        memcpy(s->y_norm2, y_norm2, (size_t)d->k * sizeof(double));
    if (rc != GSB_OK)
        gsb__enet_solver_free(s);
    return rc;
}

void gsb__enet_solver_free(gsb__enet_solver *s)
{
    gsb__tensor_free(&s->Q);
    gsb__tensor_free(&s->q);
    gsb__tensor_free(&s->Xd);
    free(s->y_norm2);
    free(s->Xt);
    free(s->Yh);
    free(s->Xy);
    free(s->norm2);
    memset(s, 0, sizeof *s);
}

/* ---- running ---------------------------------------------------------------- */

static gsb__enet_cd_params cd_params(const gsb__enet_penalty *pen, double tol, uint64_t seed)
{
    gsb__enet_cd_params cd = {pen->l1, pen->l2, tol, pen->max_iter, pen->positive,
                              pen->random, 1, seed};
    return cd;
}

/* One enet_cd_gram call for every target: W (k x p host) in and out. */
static int run_gram(gsb__enet_solver *s, const gsb__enet_penalty *pen, double *W, double *gap,
                    int64_t *n_iter)
{
    const gsb__backend *be = s->c->be;
    gsb__tensor Wb = GSB__TENSOR_NONE;
    int rc;
    gsb__enet_cd_params cd = cd_params(pen, pen->tol, pen->seed);
    GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, s->d->k, s->d->p, W, &Wb));
    GSB_CHECK(be->ops->enet_cd_gram(be, &s->Q, &s->q, s->y_norm2, &cd, &Wb, gap, n_iter));
    GSB_CHECK(be->ops->download(be, &Wb, W));
    rc = gsb__progress(s->c, "epoch", n_iter[0], gap[0]);
done:
    gsb__tensor_free(&Wb);
    return rc;
}

static int epoch_progress(void *data, int64_t epoch, double gap)
{
    return gsb__progress(data, "epoch", epoch, gap);
}

static int run_residual(gsb__enet_solver *s, const gsb__enet_penalty *pen, double *W,
                        double *gap, int64_t *n_iter)
{
    const gsb__lin_data *d = s->d;
    for (int64_t t = 0; t < d->k; t++) {
        gsb__cd_opts o;
        gsb__cd_defaults(&o);
        o.alpha = pen->l1;
        o.beta = pen->l2;
        o.tol = pen->tol;
        o.max_iter = pen->max_iter;
        o.positive = pen->positive;
        o.random = pen->random;
        o.seed = pen->seed + (uint64_t)t;
        o.on_epoch = epoch_progress;
        o.data = s->c;
        gsb__cd_result r;
        GSB_TRY(gsb__cd_resid(d->n, d->p, s->Xt, d->dtype, s->Yh + t * d->n, W + t * d->p, &o,
                              &r));
        gap[t] = r.gap;
        n_iter[t] = r.n_iter;
    }
    return GSB_OK;
}

/* ---- the working-set form ------------------------------------------------------ */

typedef struct ws_gap {
    double gap, dual_norm;
    double *XtA; /* p: X^T R - l2 w (X^T R when l1 == 0) */
} ws_gap;

/* The full problem's duality gap at w (target t), exactly scikit-learn's gap_enet. */
static int ws_full_gap(gsb__enet_solver *s, const gsb__enet_penalty *pen, int64_t t,
                       const double *w, ws_gap *g)
{
    const gsb__backend *be = s->c->be;
    int64_t n = s->d->n, p = s->d->p;
    const double *y = s->Yh + t * n;
    gsb__tensor wb = GSB__TENSOR_NONE, Xw = GSB__TENSOR_NONE, Rb = GSB__TENSOR_NONE,
                XtR = GSB__TENSOR_NONE;
    double *R = NULL;
    int rc;
    GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, p, 1, w, &wb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, n, 1, &Xw));
    GSB_CHECK(be->ops->gemm(be, 0, 0, 1.0, &s->Xd, &wb, 0.0, &Xw));
    GSB_CHECK(gsb__lin_download_f64(&Xw, &R));
    double rr = 0, ry = 0, l2 = 0, l1 = 0;
    for (int64_t i = 0; i < n; i++) {
        R[i] = y[i] - R[i];
        rr += R[i] * R[i];
        ry += R[i] * y[i];
    }
    GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, n, 1, R, &Rb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, p, 1, &XtR));
    GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &s->Xd, &Rb, 0.0, &XtR));
    GSB_CHECK(be->ops->download(be, &XtR, g->XtA));
    double dn = pen->l1 == 0 ? 0.0 : -INFINITY;
    for (int64_t j = 0; j < p; j++) {
        l2 += w[j] * w[j];
        l1 += fabs(w[j]);
        if (pen->l1 != 0) {
            g->XtA[j] -= pen->l2 * w[j];
            dn = fmax(dn, pen->positive ? g->XtA[j] : fabs(g->XtA[j]));
        } else {
            dn += g->XtA[j] * g->XtA[j];
        }
    }
    g->dual_norm = dn;
    g->gap = gsb__cd_gap(pen->l1, pen->l2, rr, ry, pen->l2 > 0 ? l2 : 0.0, l1, dn);
done:
    gsb__tensor_free(&wb);
    gsb__tensor_free(&Xw);
    gsb__tensor_free(&Rb);
    gsb__tensor_free(&XtR);
    free(R);
    return rc;
}

typedef struct ws_rank {
    double score;
    int64_t j;
} ws_rank;

static int by_score(const void *a, const void *b)
{
    const ws_rank *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return x->j < y->j ? -1 : x->j > y->j;
}

static int by_index(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * The working set (sorted): the current support first, then the features
 * nearest the dual constraint by gap-safe distance, size features at most
 * (more when the support is larger).  Returns its size.
 */
static int64_t ws_pick(const gsb__enet_solver *s, const gsb__enet_penalty *pen, const double *w,
                       const ws_gap *g, int64_t size, ws_rank *rank, int64_t *set)
{
    int64_t p = s->d->p, m = 0;
    double scale = fmax(pen->l1, g->dual_norm);
    for (int64_t j = 0; j < p; j++) {
        if (s->norm2[j] <= 0)
            continue;
        double theta = pen->l1 == 0 || !(scale > 0) ? 0.0 : fabs(g->XtA[j]) / scale;
        rank[m].score = w[j] != 0 ? -INFINITY : (1 - theta) / sqrt(s->norm2[j] + pen->l2);
        rank[m].j = j;
        m++;
    }
    qsort(rank, (size_t)m, sizeof *rank, by_score);
    int64_t count = 0;
    for (int64_t r = 0; r < m && (count < size || rank[r].score == -INFINITY); r++)
        set[count++] = rank[r].j;
    qsort(set, (size_t)count, sizeof *set, by_index);
    return count;
}

/* The Gram form on the columns set[0..m) to tol_in: w[set] in and out. */
static int ws_inner(gsb__enet_solver *s, const gsb__enet_penalty *pen, int64_t t,
                    const int64_t *set, int64_t m, double tol_in, uint64_t seed, double *w,
                    double *gap, int64_t *n_iter)
{
    const gsb__backend *be = s->c->be;
    int64_t n = s->d->n, p = s->d->p;
    gsb__tensor XW = GSB__TENSOR_NONE, QW = GSB__TENSOR_NONE, qW = GSB__TENSOR_NONE,
                wW = GSB__TENSOR_NONE;
    double *buf = gsb__alloc_array(2 * m, sizeof *buf);
    int rc;
    if (!buf)
        return oom();
    for (int64_t c = 0; c < m; c++) {
        buf[c] = s->Xy[t * p + set[c]];
        buf[m + c] = w[set[c]];
    }
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, n, m, &XW));
    GSB_CHECK(be->ops->gather_cols(be, &s->Xd, set, m, &XW));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, m, m, &QW));
    GSB_CHECK(be->ops->syrk(be, 1.0, &XW, 0.0, &QW));
    GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, 1, m, buf, &qW));
    GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, 1, m, buf + m, &wW));
    gsb__enet_cd_params cd = cd_params(pen, tol_in, seed);
    GSB_CHECK(be->ops->enet_cd_gram(be, &QW, &qW, &s->y_norm2[t], &cd, &wW, gap, n_iter));
    GSB_CHECK(be->ops->download(be, &wW, buf + m));
    for (int64_t c = 0; c < m; c++)
        w[set[c]] = buf[m + c];
done:
    gsb__tensor_free(&XW);
    gsb__tensor_free(&QW);
    gsb__tensor_free(&qW);
    gsb__tensor_free(&wW);
    free(buf);
    return rc;
}

static int run_ws_target(gsb__enet_solver *s, const gsb__enet_penalty *pen, int64_t t,
                         double *w, double *gap, int64_t *n_iter)
{
    int64_t p = s->d->p, epochs = 0, size = WS_START, nnz = 0;
    double tol_abs = pen->tol * s->y_norm2[t];
    ws_gap g = {0, 0, gsb__alloc_array(p, sizeof(double))};
    ws_rank *rank = gsb__alloc_array(p, sizeof *rank);
    int64_t *set = gsb__alloc_array(p, sizeof *set);
    int rc = GSB_OK, inner_failed = 0;
    if (!g.XtA || !rank || !set) {
        rc = oom();
        goto done;
    }
    /* as scikit-learn's first screening: a feature whose column is 0 gets 0;
     * y = 0 has the solution w = 0 */
    for (int64_t j = 0; j < p; j++) {
        if (s->norm2[j] <= 0 || s->y_norm2[t] == 0)
            w[j] = 0;
        nnz += w[j] != 0;
    }
    if (2 * nnz > size)
        size = 2 * nnz;
    for (int round = 0;; round++) {
        GSB_CHECK(ws_full_gap(s, pen, t, w, &g));
        if (g.gap <= tol_abs || inner_failed || round == WS_MAX_ROUNDS)
            break;
        int64_t m = ws_pick(s, pen, w, &g, size < p ? size : p, rank, set);
        /* one round's inner problem to a fraction of the full gap */
        double tol_in = WS_INNER_FRACTION * g.gap / s->y_norm2[t], inner_gap;
        int64_t inner_iter;
        GSB_CHECK(ws_inner(s, pen, t, set, m, tol_in, pen->seed + (uint64_t)(t * 1000003 + round),
                           w, &inner_gap, &inner_iter));
        epochs += inner_iter;
        inner_failed = inner_gap > tol_in * s->y_norm2[t];
        GSB_CHECK(gsb__progress(s->c, "working set", round + 1, g.gap));
        size *= 2;
    }
    *gap = g.gap;
    /* not converged (an inner solve ran out of epochs, or the rounds did) shows
     * as scikit-learn's n_iter_ == max_iter */
    *n_iter = g.gap > tol_abs || epochs > pen->max_iter ? pen->max_iter : epochs;
done:
    free(g.XtA);
    free(rank);
    free(set);
    return rc;
}

int gsb__enet_solver_run(gsb__enet_solver *s, const gsb__enet_penalty *pen, double *W,
                         double *gap, int64_t *n_iter, int *converged)
{
    const gsb__lin_data *d = s->d;
    int rc = GSB_OK;
    if (s->form == GSB__ENET_GRAM)
        rc = run_gram(s, pen, W, gap, n_iter);
    else if (s->form == GSB__ENET_RESIDUAL)
        rc = run_residual(s, pen, W, gap, n_iter);
    else
        for (int64_t t = 0; t < d->k && rc == GSB_OK; t++)
            rc = run_ws_target(s, pen, t, W + t * d->p, &gap[t], &n_iter[t]);
    GSB_TRY(rc);
    *converged = 1;
    for (int64_t t = 0; t < d->k; t++) {
        double tol_abs = pen->tol * s->y_norm2[t];
        if (gap[t] <= tol_abs)
            continue;
        *converged = 0;
        /* every Lasso/ElasticNet fit and every alpha of a CV path comes
         * through here: scikit-learn's ConvergenceWarning (_cd_fast.pyx) */
        gsb__warn(GSB__CONVERGENCE_WARNING,
                  "Objective did not converge. You might want to increase the number of "
                  "iterations, check the scale of the features or consider increasing "
                  "regularisation. Duality gap: %.6e, tolerance: %.3e%s",
                  gap[t], tol_abs,
                  pen->l1 < DBL_EPSILON
                      ? "\nLinear regression models with a zero l1 penalization strength "
                        "are more efficiently fitted using one of the solvers implemented "
                        "in sklearn.linear_model.Ridge/RidgeCV instead."
                      : "");
    }
    return GSB_OK;
}
