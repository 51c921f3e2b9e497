/*
 * coordinate_descent.c - elastic-net coordinate descent (see
 * coordinate_descent.h).
 *
 * One driver (cd_run) holds scikit-learn's loop: the first gap and
 * screening, the epochs over the active set, the stopping test and the
 * re-screening.  The two forms plug in below it through a small table: the
 * coordinate's tmp = X_j'(R + w_j X_j), the move of w_j by delta (an axpy
 * on R or on Q w) and the gap's sums.  The per-coordinate arithmetic and
 * the gap formula come from cd_rule.h, which the CUDA kernel shares.
 *
 * The residual form is a template over X's dtype: the first pass holds the
 * dtype-independent code and includes this file again with T = float and
 * T = double.
 */
#ifndef GSB_CD_BODY

#include "solvers/coordinate_descent.h"

#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "solvers/cd_rule.h"

/* The sums the gap needs, and XtA (p) filled on the way. */
typedef struct cd_sums {
    double R_norm2, Ry, w_l2, w_l1, dual_norm;
} cd_sums;

typedef struct cd_form {
    int64_t p;
    const double *norm2; /* ||X_j||^2 (Gram: Q_jj) */
    double (*tmp)(void *self, int64_t j, double wj);
    void (*move)(void *self, int64_t j, double delta);
    /* XtA and the sums at w (alpha > 0: XtA = X'R - beta w, else X'R) */
    void (*sums)(void *self, const double *w, double alpha, double beta, int positive,
                 double *XtA, cd_sums *s);
    void *self;
} cd_form;

void gsb__cd_defaults(gsb__cd_opts *o)
{
    memset(o, 0, sizeof *o);
    o->alpha = 1.0;
    o->tol = 1e-4;
    o->max_iter = 1000;
    o->screening = 1;
}

/* The w-only sums and dual_norm from a filled XtA, as gap_enet computes them. */
static void finish_sums(int64_t p, const double *w, const double *XtA, double alpha,
                        double beta, int positive, cd_sums *s)
{
    double l2 = 0, l1 = 0, dn;
    for (int64_t j = 0; j < p; j++) {
        l2 += w[j] * w[j];
        l1 += fabs(w[j]);
    }
    s->w_l2 = beta > 0 ? l2 : 0.0;
    s->w_l1 = l1;
    if (alpha == 0) {
        dn = 0;
        for (int64_t j = 0; j < p; j++)
            dn += XtA[j] * XtA[j];
    } else {
        dn = p == 0 ? 0.0 : positive ? XtA[0] : fabs(XtA[0]);
        for (int64_t j = 1; j < p; j++)
            dn = fmax(dn, positive ? XtA[j] : fabs(XtA[j]));
    }
    s->dual_norm = dn;
}

static double form_gap(const cd_form *f, const double *w, const gsb__cd_opts *o, double *XtA,
                       cd_sums *s)
{
    f->sums(f->self, w, o->alpha, o->beta, o->positive, XtA, s);
    return gsb__cd_gap(o->alpha, o->beta, s->R_norm2, s->Ry, s->w_l2, s->w_l1, s->dual_norm);
}

/*
 * Gap-safe screening: rebuild the active set (increasing j) from the features
 * not yet excluded; a newly excluded feature's coefficient goes to 0.  first:
 * the pass before the epochs, which also drops features with ||X_j|| = 0.
 */
static int64_t screen(const cd_form *f, double *w, const gsb__cd_opts *o, const double *XtA,
                      const cd_sums *s, double gap, int first, int64_t *active, char *excluded)
{
    double radius = gsb__cd_radius(gap, o->alpha);
    int64_t n_active = 0;
    for (int64_t j = 0; j < f->p; j++) {
        if (first && f->norm2[j] == 0) {
            w[j] = 0;
            excluded[j] = 1;
            continue;
        }
        if (!first && excluded[j])
            continue;
        if (gsb__cd_keep(XtA[j], f->norm2[j], o->alpha, o->beta, s->dual_norm, radius)) {
            active[n_active++] = j;
            excluded[j] = 0;
        } else {
            if (w[j] != 0) {
                f->move(f->self, j, -w[j]);
                w[j] = 0;
            }
            excluded[j] = 1;
        }
    }
    return n_active;
}

/* One epoch over the active set; *d_w_max and *w_max as scikit-learn tracks them. */
static void epoch(const cd_form *f, double *w, const gsb__cd_opts *o, const int64_t *active,
                  int64_t n_active, int screening, uint64_t *rng, double *d_w_max,
                  double *w_max)
{
    double dmax = 0, wmax = 0;
    for (int64_t it = 0; it < n_active; it++) {
        int64_t j = o->random ? (int64_t)(gsb__cd_rand(rng) % (uint64_t)n_active) : it;
        if (screening)
            j = active[j];
        if (f->norm2[j] == 0.0)
            continue;
        double wj = w[j];
        double tmp = f->tmp(f->self, j, wj);
        w[j] = gsb__cd_update(tmp, o->alpha, f->norm2[j] + o->beta, o->positive);
        if (w[j] != wj)
            f->move(f->self, j, w[j] - wj);
        dmax = fmax(dmax, fabs(w[j] - wj));
        wmax = fmax(wmax, fabs(w[j]));
    }
    *d_w_max = dmax;
    *w_max = wmax;
}

/* scikit-learn's loop (enet_coordinate_descent / _gram) around a form. */
static int cd_run(const cd_form *f, double y_norm2, int gram, double *w, const gsb__cd_opts *o,
                  gsb__cd_result *res)
{
    int64_t p = f->p;
    double *XtA = gsb__alloc_array(p, sizeof *XtA);
    int64_t *active = gsb__alloc_array(p, sizeof *active);
    char *excluded = gsb__calloc_array(p, 1);
    int rc = GSB_OK;
    memset(res, 0, sizeof *res);
    if (!XtA || !active || !excluded) {
        rc = gsb__err(GSB_ENOMEM, "coordinate descent: out of memory for %lld features",
                      (long long)p);
        goto done;
    }
    int screening = o->screening && o->alpha != 0;
    uint64_t rng = o->seed;
    int64_t n_active = p;
    for (int64_t j = 0; j < p; j++)
        active[j] = j;
    cd_sums s;
    res->tol_abs = o->tol * y_norm2;
    res->gap = form_gap(f, w, o, XtA, &s);
    /* the Gram form's gap can come out slightly negative for a singular Q;
     * scikit-learn trusts only a gap >= 0 there before the first epoch */
    if ((!gram || res->gap >= 0) && res->gap <= res->tol_abs) {
        res->converged = 1;
        goto done;
    }
    if (screening)
        n_active = screen(f, w, o, XtA, &s, res->gap, 1, active, excluded);

    int64_t it;
    for (it = 0; it < o->max_iter; it++) {
        double d_w_max, w_max;
        epoch(f, w, o, active, n_active, screening, &rng, &d_w_max, &w_max);
        if (w_max == 0.0 || d_w_max / w_max <= o->tol || it == o->max_iter - 1) {
            res->gap = form_gap(f, w, o, XtA, &s);
            if (res->gap <= res->tol_abs) {
                res->converged = 1;
                break;
            }
            if (screening)
                n_active = screen(f, w, o, XtA, &s, res->gap, 0, active, excluded);
        }
        if (o->on_epoch)
            GSB_CHECK(o->on_epoch(o->data, it + 1, res->gap));
    }
    res->n_iter = it < o->max_iter ? it + 1 : o->max_iter;
done:
    free(XtA);
    free(active);
    free(excluded);
    return rc;
}

/* ---- the Gram form --------------------------------------------------------- */

typedef struct gram_form {
    int64_t p;
    const double *Q, *q;
    double y_norm2;
    double *Qw; /* Q w, kept up to date */
} gram_form;

static double gram_tmp(void *self, int64_t j, double wj)
{
    gram_form *g = self;
    return g->q[j] - g->Qw[j] + wj * g->Q[j * g->p + j];
}

static void gram_move(void *self, int64_t j, double delta)
{
    gram_form *g = self;
    const double *row = g->Q + j * g->p;
    for (int64_t i = 0; i < g->p; i++)
        g->Qw[i] += delta * row[i];
}

/* R'R = y'y + w'Qw - 2 q'w and R'y = y'y - q'w, as gap_enet_gram. */
static void gram_sums(void *self, const double *w, double alpha, double beta, int positive,
                      double *XtA, cd_sums *s)
{
    gram_form *g = self;
    double qw = 0, wQw = 0;
    for (int64_t j = 0; j < g->p; j++) {
        qw += w[j] * g->q[j];
        wQw += w[j] * g->Qw[j];
    }
    s->R_norm2 = g->y_norm2 + wQw - 2.0 * qw;
    s->Ry = g->y_norm2 - qw;
    for (int64_t j = 0; j < g->p; j++)
        XtA[j] = g->q[j] - g->Qw[j] - (alpha != 0 ? beta * w[j] : 0.0);
    finish_sums(g->p, w, XtA, alpha, beta, positive, s);
}

int gsb__cd_gram(int64_t p, const double *Q, const double *q, double y_norm2, double *w,
                 const gsb__cd_opts *o, gsb__cd_result *res)
{
    gram_form g = {p, Q, q, y_norm2, gsb__alloc_array(p, sizeof(double))};
    double *diag = gsb__alloc_array(p, sizeof *diag);
    int rc;
    if (!g.Qw || !diag) {
        free(g.Qw);
        free(diag);
        memset(res, 0, sizeof *res);
        return gsb__err(GSB_ENOMEM, "coordinate descent: out of memory for %lld features",
                        (long long)p);
    }
    for (int64_t i = 0; i < p; i++) {
        double s = 0;
        for (int64_t j = 0; j < p; j++)
            s += Q[i * p + j] * w[j];
        g.Qw[i] = s;
        diag[i] = Q[i * p + i];
    }
    cd_form f = {p, diag, gram_tmp, gram_move, gram_sums, &g};
    rc = cd_run(&f, y_norm2, 1, w, o, res);
    free(g.Qw);
    free(diag);
    return rc;
}

/* ---- the residual form (per dtype) ------------------------------------------ */

#define GSB_CD_BODY
#define T float
#define SFX(name) name##_f32
#include "coordinate_descent.c"
#undef T
#undef SFX

#define T double
#define SFX(name) name##_f64
#include "coordinate_descent.c"
#undef T
#undef SFX
#undef GSB_CD_BODY

int gsb__cd_resid(int64_t n, int64_t p, const void *Xt, gsb_dtype dtype, const double *y,
                  double *w, const gsb__cd_opts *o, gsb__cd_result *res)
{
    if (dtype != GSB_F32 && dtype != GSB_F64) {
        memset(res, 0, sizeof *res);
        return gsb__err(GSB_EINTERNAL, "coordinate descent: X must be float32 or float64");
    }
    return dtype == GSB_F32 ? resid_f32(n, p, Xt, y, w, o, res)
                            : resid_f64(n, p, Xt, y, w, o, res);
}

#else /* GSB_CD_BODY: the residual form for T */

typedef struct SFX(resid_form) {
    int64_t n, p;
    const T *Xt;
    const double *y, *norm2;
    double *R; /* y - X w, kept up to date */
} SFX(resid_form);

static double SFX(col_dot)(const T *x, const double *r, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * r[i];
    return s;
}

static double SFX(resid_tmp)(void *self, int64_t j, double wj)
{
    SFX(resid_form) *r = self;
    return SFX(col_dot)(r->Xt + j * r->n, r->R, r->n) + wj * r->norm2[j];
}

/* w_j moved by delta: R -= delta X_j */
static void SFX(resid_move)(void *self, int64_t j, double delta)
{
    SFX(resid_form) *r = self;
    const T *x = r->Xt + j * r->n;
    for (int64_t i = 0; i < r->n; i++)
        r->R[i] -= delta * (double)x[i];
}

static void SFX(resid_sums)(void *self, const double *w, double alpha, double beta,
                            int positive, double *XtA, cd_sums *s)
{
    SFX(resid_form) *r = self;
    double rr = 0, ry = 0;
    for (int64_t i = 0; i < r->n; i++) {
        rr += r->R[i] * r->R[i];
        ry += r->R[i] * r->y[i];
    }
    s->R_norm2 = rr;
    s->Ry = ry;
    for (int64_t j = 0; j < r->p; j++)
        XtA[j] = SFX(col_dot)(r->Xt + j * r->n, r->R, r->n) - (alpha != 0 ? beta * w[j] : 0.0);
    finish_sums(r->p, w, XtA, alpha, beta, positive, s);
}

static int SFX(resid)(int64_t n, int64_t p, const T *Xt, const double *y, double *w,
                      const gsb__cd_opts *o, gsb__cd_result *res)
{
    double *norm2 = gsb__alloc_array(p, sizeof *norm2);
    double *R = gsb__alloc_array(n, sizeof *R);
    int rc;
    if (!norm2 || !R) {
        free(norm2);
        free(R);
        memset(res, 0, sizeof *res);
        return gsb__err(GSB_ENOMEM, "coordinate descent: out of memory for %lld x %lld",
                        (long long)n, (long long)p);
    }
    double y_norm2 = 0;
    for (int64_t i = 0; i < n; i++) {
        R[i] = y[i];
        y_norm2 += y[i] * y[i];
    }
    for (int64_t j = 0; j < p; j++) {
        const T *x = Xt + j * n;
        double s = 0;
        for (int64_t i = 0; i < n; i++)
            s += (double)x[i] * (double)x[i];
        norm2[j] = s;
        if (w[j] != 0)
            for (int64_t i = 0; i < n; i++)
                R[i] -= w[j] * (double)x[i];
    }
    SFX(resid_form) r = {n, p, Xt, y, norm2, R};
    cd_form f = {p, norm2, SFX(resid_tmp), SFX(resid_move), SFX(resid_sums), &r};
    rc = cd_run(&f, y_norm2, 0, w, o, res);
    free(norm2);
    free(R);
    return rc;
}

#endif
