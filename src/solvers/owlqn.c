/*
 * owlqn.c - OWL-QN for f(x) + sum_j l1_j |x_j| (see owlqn.h).
 */
#include "solvers/owlqn.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

#define ARMIJO 1e-4 /* sufficient decrease along the pseudo-gradient */

void gsb__owlqn_defaults(gsb__owlqn_opts *opts)
{
    opts->m = 10;
    opts->max_iter = 100;
    opts->max_ls = 50;
    opts->pgtol = 1e-4;
    opts->ftol = 64 * DBL_EPSILON;
}

/* The (s, y) memory, a ring of m pairs. */
typedef struct memory {
    int64_t n;
    int m, count, next;
    double *S, *Y, *rho, *a;
} memory;

static double dot(int64_t n, const double *a, const double *b)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double l1_term(int64_t n, const double *x, const double *l1)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += l1[i] * fabs(x[i]);
    return s;
}

/* The minimum-norm subgradient of F; returns its largest |component|. */
static double pseudo_grad(int64_t n, const double *x, const double *g, const double *l1,
                          double *pg)
{
    double top = 0;
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (l1[i] == 0 || x[i] > 0)
            v = g[i] + (x[i] > 0 ? l1[i] : 0.0);
        else if (x[i] < 0)
            v = g[i] - l1[i];
        else if (g[i] + l1[i] < 0)
            v = g[i] + l1[i];
        else if (g[i] - l1[i] > 0)
            v = g[i] - l1[i];
        else
            v = 0;
        pg[i] = v;
        top = fmax(top, fabs(v));
    }
    return top;
}

/*
 * d = -H pg by the two-loop recursion, then, of the penalised coordinates,
 * only the components that descend.  Unpenalised ones keep theirs: their
 * step then stays what L-BFGS takes (the multinomial intercepts keep their
 * zero sum).  Dropping terms of d'pg that are >= 0 keeps d a descent.
 */
static void direction(memory *mem, const double *pg, const double *l1, double *d)
{
    int64_t n = mem->n;
    for (int64_t i = 0; i < n; i++)
        d[i] = pg[i];
    for (int k = 0; k < mem->count; k++) {
        int s = (mem->next - 1 - k + mem->m) % mem->m;
        mem->a[s] = mem->rho[s] * dot(n, mem->S + s * n, d);
        for (int64_t i = 0; i < n; i++)
            d[i] -= mem->a[s] * mem->Y[s * n + i];
    }
    if (mem->count > 0) {
        int last = (mem->next - 1 + mem->m) % mem->m;
        double yy = dot(n, mem->Y + last * n, mem->Y + last * n);
        double gamma = 1.0 / (mem->rho[last] * yy);
        for (int64_t i = 0; i < n; i++)
            d[i] *= gamma;
    }
    for (int k = mem->count - 1; k >= 0; k--) {
        int s = (mem->next - 1 - k + mem->m) % mem->m;
        double b = mem->rho[s] * dot(n, mem->Y + s * n, d);
        for (int64_t i = 0; i < n; i++)
            d[i] += mem->S[s * n + i] * (mem->a[s] - b);
    }
    int any = 0;
    for (int64_t i = 0; i < n; i++) {
        d[i] = -d[i];
        if (l1[i] != 0 && d[i] * pg[i] >= 0)
            d[i] = 0;
        any |= d[i] != 0;
    }
    if (!any) /* nothing of the quasi-Newton step descends: steepest descent */
        for (int64_t i = 0; i < n; i++)
            d[i] = -pg[i];
}

static void remember(memory *mem, const double *s, const double *y)
{
    int64_t n = mem->n;
    double sy = dot(n, s, y), yy = dot(n, y, y);
    if (!(sy > DBL_EPSILON * yy)) /* curvature too weak to trust */
        return;
    int k = mem->next;
    memcpy(mem->S + k * n, s, (size_t)n * sizeof(double));
    memcpy(mem->Y + k * n, y, (size_t)n * sizeof(double));
    mem->rho[k] = 1.0 / sy;
    mem->next = (k + 1) % mem->m;
    if (mem->count < mem->m)
        mem->count++;
}

typedef struct state {
    int64_t n;
    const double *l1;
    gsb__owlqn_eval_fn eval;
    void *data;
    double *x, *g, *pg, *d, *xn, *gn, *s, *y;
    double f, F;
    int64_t n_eval;
} state;

/*
 * Backtrack from step t0 along d, projected onto x's orthant; on success the
 * new point is in xn, gn, *fn.  Returns GSB_OK with *ok set, or an error.
 */
static int line_search(state *st, double t0, int max_ls, double *fn, int *ok)
{
    int64_t n = st->n;
    *ok = 0;
    double t = t0;
    for (int ls = 0; ls < max_ls; ls++, t *= 0.5) {
        double dir = 0;
        for (int64_t i = 0; i < n; i++) {
            /* a penalised coordinate stays in its orthant: x's sign, or for
             * x_i = 0 the sign of -pg_i */
            double xi = st->x[i] != 0 ? st->x[i] : -st->pg[i];
            double v = st->x[i] + t * st->d[i];
            st->xn[i] = st->l1[i] == 0 || v * xi > 0 ? v : 0.0;
            dir += st->pg[i] * (st->xn[i] - st->x[i]);
        }
        GSB_TRY(st->eval(st->data, st->xn, fn, st->gn));
        st->n_eval++;
        double Fn = *fn + l1_term(n, st->xn, st->l1);
        if (!isfinite(Fn))
            continue;
        if (dir < 0 && Fn <= st->F + ARMIJO * dir) {
            *ok = 1;
            return GSB_OK;
        }
    }
    return GSB_OK;
}

static int run(state *st, memory *mem, gsb__owlqn_iter_fn on_iter, const gsb__owlqn_opts *o,
               gsb__owlqn_result *res)
{
    int64_t n = st->n;
    GSB_TRY(st->eval(st->data, st->x, &st->f, st->g));
    st->n_eval++;
    st->F = st->f + l1_term(n, st->x, st->l1);
    if (!isfinite(st->F) || !isfinite(dot(n, st->g, st->g)))
        return gsb__err(GSB_ENUMERIC, "OWL-QN: the objective is not finite at the start");
    double pg_norm = pseudo_grad(n, st->x, st->g, st->l1, st->pg);
    res->stop = GSB__OWLQN_PGTOL;
    int64_t it = 0;
    while (pg_norm > o->pgtol) {
        if (it >= o->max_iter) {
            res->stop = GSB__OWLQN_MAX_ITER;
            break;
        }
        direction(mem, st->pg, st->l1, st->d);
        /* the first step of an empty memory is 1 / ||d||, as L-BFGS-B's */
        double dn = sqrt(dot(n, st->d, st->d));
        double t0 = mem->count == 0 ? fmin(1.0, 1.0 / dn) : 1.0, fn;
        int ok;
        GSB_TRY(line_search(st, t0, o->max_ls, &fn, &ok));
        if (!ok) {
            if (mem->count == 0) {
                res->stop = GSB__OWLQN_LINE_SEARCH;
                break;
            }
            mem->count = mem->next = 0; /* drop the memory and retry from here */
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            st->s[i] = st->xn[i] - st->x[i];
            st->y[i] = st->gn[i] - st->g[i];
        }
        remember(mem, st->s, st->y);
        double F_prev = st->F;
        memcpy(st->x, st->xn, (size_t)n * sizeof(double));
        memcpy(st->g, st->gn, (size_t)n * sizeof(double));
        st->f = fn;
        st->F = fn + l1_term(n, st->x, st->l1);
        pg_norm = pseudo_grad(n, st->x, st->g, st->l1, st->pg);
        it++;
        if (on_iter)
            GSB_TRY(on_iter(st->data, it, st->F));
        if (pg_norm > o->pgtol &&
            F_prev - st->F <= o->ftol * fmax(fmax(fabs(F_prev), fabs(st->F)), 1.0)) {
            res->stop = GSB__OWLQN_FTOL;
            break;
        }
    }
    res->n_iter = it;
    res->n_eval = st->n_eval;
    res->F = st->F;
    res->pg_norm = pg_norm;
    return GSB_OK;
}

int gsb__owlqn_minimize(int64_t n, double *x, const double *l1, gsb__owlqn_eval_fn eval,
                        gsb__owlqn_iter_fn on_iter, void *data, const gsb__owlqn_opts *opts,
                        gsb__owlqn_result *res)
{
    memset(res, 0, sizeof *res);
    if (opts->m < 1 || opts->max_iter < 0 || opts->max_ls < 1)
        return gsb__err(GSB_EINVAL, "OWL-QN: bad options");
    memory mem = {n, opts->m, 0, 0, gsb__alloc_array(opts->m * n, sizeof(double)),
                  gsb__alloc_array(opts->m * n, sizeof(double)),
                  gsb__alloc_array(opts->m, sizeof(double)),
                  gsb__alloc_array(opts->m, sizeof(double))};
    double *buf = gsb__alloc_array(7 * n, sizeof(double));
    int rc;
    if (!mem.S || !mem.Y || !mem.rho || !mem.a || !buf) {
        rc = gsb__err(GSB_ENOMEM, "OWL-QN: out of memory for %lld variables", (long long)n);
    } else {
        state st = {n, l1, eval, data, x, buf, buf + n, buf + 2 * n, buf + 3 * n,
                    buf + 4 * n, buf + 5 * n, buf + 6 * n, 0, 0, 0};
        rc = run(&st, &mem, on_iter, opts, res);
    }
    free(mem.S);
    free(mem.Y);
    free(mem.rho);
    free(mem.a);
    free(buf);
    return rc;
}
