/*
 * lbfgs.c - L-BFGS with a More-Thuente line search (see lbfgs.h).
 *
 * The iteration mirrors scipy's L-BFGS-B without bounds: there the Cauchy
 * point and the subspace minimisation reduce to the quasi-Newton step
 * d = -H g, which the two-loop recursion below computes.  Keeping the same
 * step lengths, line search constants and stopping tests is what makes the
 * estimators stop at the iterate scikit-learn stops at.
 */
#include "solvers/lbfgs.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/warn.h"

/* Line search constants L-BFGS-B passes to its More-Thuente search. */
#define LS_FTOL 1e-3  /* sufficient decrease */
#define LS_GTOL 0.9   /* curvature (strong Wolfe) */
#define LS_XTOL 0.1   /* relative width of the bracket at which to give up */
#define STEP_MAX 1e10 /* L-BFGS-B's bound on the step without box constraints */
#define XTRAP_LO 1.1  /* before bracketing, the next step lies in */
#define XTRAP_HI 4.0  /* [stp + 1.1 (stp - stx), stp + 4 (stp - stx)] */

void gsb__lbfgs_defaults(gsb__lbfgs_opts *opts)
{
    opts->m = 10;
    opts->max_iter = 15000;
    opts->max_eval = 15000;
    opts->max_ls = 20;
    opts->pgtol = 1e-5;
    opts->ftol = 1e7 * DBL_EPSILON;
}

/* ---- More-Thuente line search ------------------------------------------- */

/* A step with the function value and directional derivative there. */
typedef struct mt_point {
    double st, f, g;
} mt_point;

typedef struct mt_search {
    double finit, ginit, gtest; /* phi(0), phi'(0), LS_FTOL * phi'(0) */
    mt_point x;                 /* the best step so far */
    mt_point y;                 /* the other end of the interval of uncertainty */
    double stmin, stmax;        /* where the next trial step may fall */
    double width, width1;       /* bracket widths, to force bisection when it
                                   shrinks too slowly */
    double stpmax;              /* lowered below steps where f is not finite */
    int bracketed;
    int stage;                  /* 1 until a step with sufficient decrease and
                                   phi' >= 0 is seen, then 2 */
} mt_search;

static double max3(double a, double b, double c) { return fmax(a, fmax(b, c)); }

/*
 * Minimiser of the cubic through (a, fa, ga) and (b, fb, gb), in the
 * overflow-safe form of More and Thuente.  The radicand is clamped at 0:
 * it is non-negative in exact arithmetic in every case this is used for.
 */
static double cubic_min(double a, double fa, double ga, double b, double fb, double gb)
{
    double theta = 3.0 * (fa - fb) / (b - a) + ga + gb;
    double s = max3(fabs(theta), fabs(ga), fabs(gb));
    double gamma = s * sqrt(fmax(0.0, (theta / s) * (theta / s) - (ga / s) * (gb / s)));
    if (b < a)
        gamma = -gamma;
    double p = (gamma - ga) + theta;
    double q = ((gamma - ga) + gamma) + gb;
    return a + (p / q) * (b - a);
}

/*
 * One safeguarded step: from the interval ends x (best) and y and the new
 * trial p, pick the next trial step and shrink the interval.  The four
 * cases are those of More and Thuente (1994), section 4.
 */
static double mt_step(mt_point *x, mt_point *y, mt_point p, int *bracketed, double lo,
                      double hi)
{
    double sgnd = p.g * (x->g < 0 ? -1.0 : 1.0);
    double next;
    if (p.f > x->f) {
        /* 1: higher value; the minimum is bracketed.  Take the cubic step
         * unless the quadratic one is closer to x. */
        double stpc = cubic_min(x->st, x->f, x->g, p.st, p.f, p.g);
        double stpq = x->st + ((x->g / ((x->f - p.f) / (p.st - x->st) + x->g)) / 2.0) *
                                  (p.st - x->st);
        next = fabs(stpc - x->st) < fabs(stpq - x->st) ? stpc : stpc + (stpq - stpc) / 2.0;
        *bracketed = 1;
    } else if (sgnd < 0) {
        /* 2: lower value, derivatives of opposite sign: bracketed.  Take
         * whichever of the cubic and secant steps is farther from p. */
        double stpc = cubic_min(p.st, p.f, p.g, x->st, x->f, x->g);
        double stpq = p.st + (p.g / (p.g - x->g)) * (x->st - p.st);
        next = fabs(stpc - p.st) > fabs(stpq - p.st) ? stpc : stpq;
        *bracketed = 1;
    } else if (fabs(p.g) < fabs(x->g)) {
        /* 3: lower value, same sign, smaller derivative.  The cubic may not
         * have a minimiser in the right direction: then extrapolate to the
         * bound. */
        double theta = 3.0 * (x->f - p.f) / (p.st - x->st) + x->g + p.g;
        double s = max3(fabs(theta), fabs(x->g), fabs(p.g));
        double gamma = s * sqrt(fmax(0.0, (theta / s) * (theta / s) - (x->g / s) * (p.g / s)));
        if (p.st > x->st)
            gamma = -gamma;
        double r = ((gamma - p.g) + theta) / ((gamma + (x->g - p.g)) + gamma);
        double stpc;
        if (r < 0 && gamma != 0)
            stpc = p.st + r * (x->st - p.st);
        else
            stpc = p.st > x->st ? hi : lo;
        double stpq = p.st + (p.g / (p.g - x->g)) * (x->st - p.st);
        if (*bracketed) {
            /* the closer step, but not beyond 0.66 of the way to y */
            next = fabs(stpc - p.st) < fabs(stpq - p.st) ? stpc : stpq;
            double cap = p.st + 0.66 * (y->st - p.st);
            next = p.st > x->st ? fmin(cap, next) : fmax(cap, next);
        } else {
            next = fabs(stpc - p.st) > fabs(stpq - p.st) ? stpc : stpq;
            next = fmax(lo, fmin(hi, next));
        }
    } else {
        /* 4: lower value, same sign, derivative not smaller: if bracketed,
         * the cubic through p and y, else the bound. */
        if (*bracketed)
            next = cubic_min(p.st, p.f, p.g, y->st, y->f, y->g);
        else
            next = p.st > x->st ? hi : lo;
    }

    /* shrink the interval: x stays the point with the lowest value */
    if (p.f > x->f) {
        *y = p;
    } else {
        if (sgnd < 0)
            *y = *x;
        *x = p;
    }
    return next;
}

static void mt_start(mt_search *s, double stp, double f0, double g0)
{
    s->finit = f0;
    s->ginit = g0;
    s->gtest = LS_FTOL * g0;
    s->x = s->y = (mt_point){0.0, f0, g0};
    s->stmin = 0.0;
    s->stmax = stp + XTRAP_HI * stp;
    s->width = STEP_MAX;
    s->width1 = 2.0 * STEP_MAX;
    s->stpmax = STEP_MAX;
    s->bracketed = 0;
    s->stage = 1;
}

/*
 * Given f and phi' at the trial *stp, return 1 to accept it (strong Wolfe
 * conditions met, or no further progress possible, as L-BFGS-B accepts
 * MINPACK-2's warnings), or 0 with the next trial step in *stp.
 */
static int mt_next(mt_search *s, double *stp, double f, double g)
{
    double st = *stp;
    if (!isfinite(f) || !isfinite(g)) {
        /* out of f's domain: stay below this step and halve towards x */
        s->stpmax = st;
        *stp = s->x.st + 0.5 * (st - s->x.st);
        return 0;
    }
    double ftest = s->finit + st * s->gtest;
    if (s->stage == 1 && f <= ftest && g >= 0)
        s->stage = 2;

    /* rounding errors, a bracket below xtol, or a bound reached: accept */
    if (s->bracketed && (st <= s->stmin || st >= s->stmax))
        return 1;
    if (s->bracketed && s->stmax - s->stmin <= LS_XTOL * s->stmax)
        return 1;
    if (st == s->stpmax && f <= ftest && g <= s->gtest)
        return 1;
    if (st == 0.0 && (f > ftest || g >= s->gtest))
        return 1;
    if (f <= ftest && fabs(g) <= LS_GTOL * (-s->ginit))
        return 1;

    double next;
    if (s->stage == 1 && f <= s->x.f && f > ftest) {
        /* lower than x but not sufficiently: step on the modified function
         * psi(a) = phi(a) - a * gtest, which has a minimiser with a
         * sufficient decrease, then map back */
        double gt = s->gtest;
        mt_point xm = {s->x.st, s->x.f - s->x.st * gt, s->x.g - gt};
        mt_point ym = {s->y.st, s->y.f - s->y.st * gt, s->y.g - gt};
        mt_point pm = {st, f - st * gt, g - gt};
        next = mt_step(&xm, &ym, pm, &s->bracketed, s->stmin, s->stmax);
        s->x = (mt_point){xm.st, xm.f + xm.st * gt, xm.g + gt};
        s->y = (mt_point){ym.st, ym.f + ym.st * gt, ym.g + gt};
    } else {
        next = mt_step(&s->x, &s->y, (mt_point){st, f, g}, &s->bracketed, s->stmin, s->stmax);
    }

    if (s->bracketed) {
        /* bisect when the bracket did not shrink enough in two steps */
        if (fabs(s->y.st - s->x.st) >= 0.66 * s->width1)
            next = s->x.st + 0.5 * (s->y.st - s->x.st);
        s->width1 = s->width;
        s->width = fabs(s->y.st - s->x.st);
        s->stmin = fmin(s->x.st, s->y.st);
        s->stmax = fmax(s->x.st, s->y.st);
    } else {
        s->stmin = next + XTRAP_LO * (next - s->x.st);
        s->stmax = next + XTRAP_HI * (next - s->x.st);
    }
    next = fmin(fmax(next, 0.0), s->stpmax);
    /* no progress possible inside the bracket: retry the best step */
    if (s->bracketed &&
        (next <= s->stmin || next >= s->stmax || s->stmax - s->stmin <= LS_XTOL * s->stmax))
        next = s->x.st;
    *stp = next;
    return 0;
}

/* ---- the minimiser ------------------------------------------------------- */

typedef struct lbfgs_state {
    int64_t n;
    int m, col, head;   /* memory size, pairs held, slot of the oldest */
    double *s, *y;      /* m x n pairs */
    double *rho, *alpha;
    double gamma;       /* H0 = gamma I: s'y / y'y of the newest pair */
    double *x, *g, *d, *xt, *gt;
    double f;
    int64_t n_eval;
    gsb__lbfgs_eval_fn eval;
    void *data;
} lbfgs_state;

static double dot(const double *a, const double *b, int64_t n)
{
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

static double max_abs(const double *a, int64_t n)
{
    double mx = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(a[i]) <= mx))
            mx = fabs(a[i]); /* also propagates NaN */
    return mx;
}

/* d = -H g by the two-loop recursion over the pairs held. */
static void direction(lbfgs_state *st)
{
    int64_t n = st->n;
    double *q = st->d;
    for (int64_t i = 0; i < n; i++)
        q[i] = st->g[i];
    for (int k = st->col - 1; k >= 0; k--) {
        int j = (st->head + k) % st->m;
        const double *s = st->s + (int64_t)j * n, *y = st->y + (int64_t)j * n;
        st->alpha[j] = st->rho[j] * dot(s, q, n);
        for (int64_t i = 0; i < n; i++)
            q[i] -= st->alpha[j] * y[i];
    }
    for (int64_t i = 0; i < n; i++)
        q[i] *= st->gamma;
    for (int k = 0; k < st->col; k++) {
        int j = (st->head + k) % st->m;
        const double *s = st->s + (int64_t)j * n, *y = st->y + (int64_t)j * n;
        double beta = st->rho[j] * dot(y, q, n);
        for (int64_t i = 0; i < n; i++)
            q[i] += (st->alpha[j] - beta) * s[i];
    }
    for (int64_t i = 0; i < n; i++)
        q[i] = -q[i];
}

/*
 * Search along d from x (where phi'(0) = gd < 0) starting at *stp.  On
 * success *ok = 1 and xt, gt, *ft, *gdt, *stp describe the accepted point.
 */
static int line_search(lbfgs_state *st, double gd, int max_ls, double *stp, double *ft,
                       double *gdt, int *ok)
{
    mt_search s;
    mt_start(&s, *stp, st->f, gd);
    *ok = 0;
    for (int k = 0; k < max_ls; k++) {
        for (int64_t i = 0; i < st->n; i++)
            st->xt[i] = st->x[i] + *stp * st->d[i];
        GSB_TRY(st->eval(st->data, st->xt, ft, st->gt));
        st->n_eval++;
        *gdt = dot(st->gt, st->d, st->n);
        if (mt_next(&s, stp, *ft, *gdt)) {
            *ok = 1;
            return GSB_OK;
        }
    }
    return GSB_OK;
}

/* Remember the pair s = stp d, y = gt - g unless its curvature is too small. */
static void remember(lbfgs_state *st, double stp, double gd, double gdt)
{
    int64_t n = st->n;
    double sy = (gdt - gd) * stp, yy = 0.0;
    for (int64_t i = 0; i < n; i++)
        yy += (st->gt[i] - st->g[i]) * (st->gt[i] - st->g[i]);
    if (!(sy > DBL_EPSILON * (-gd * stp)))
        return; /* skipped, as L-BFGS-B does: H would lose positive definiteness */
    int j;
    if (st->col < st->m) {
        j = (st->head + st->col) % st->m;
        st->col++;
    } else {
        j = st->head; /* overwrite the oldest */
        st->head = (st->head + 1) % st->m;
    }
    double *s = st->s + (int64_t)j * n, *y = st->y + (int64_t)j * n;
    for (int64_t i = 0; i < n; i++) {
        s[i] = stp * st->d[i];
        y[i] = st->gt[i] - st->g[i];
    }
    st->rho[j] = 1.0 / sy;
    st->gamma = sy / yy;
}

static int check_opts(int64_t n, const gsb__lbfgs_opts *o)
{
    if (n < 1 || o->m < 1 || o->max_ls < 1 || o->max_iter < 0 || o->max_eval < 1 ||
        !(o->pgtol >= 0) || !(o->ftol >= 0))
        return gsb__err(GSB_EINVAL,
                        "L-BFGS: invalid options (n=%lld, m=%d, max_ls=%d, max_iter=%lld, "
                        "max_eval=%lld, pgtol=%g, ftol=%g)",
                        (long long)n, o->m, o->max_ls, (long long)o->max_iter,
                        (long long)o->max_eval, o->pgtol, o->ftol);
    return GSB_OK;
}

static int run(lbfgs_state *st, gsb__lbfgs_iter_fn on_iter, const gsb__lbfgs_opts *o,
               gsb__lbfgs_result *res)
{
    int64_t n = st->n;
    GSB_TRY(st->eval(st->data, st->x, &st->f, st->g));
    st->n_eval = 1;
    if (!isfinite(st->f) || !isfinite(max_abs(st->g, n)))
        return gsb__err(GSB_ENUMERIC, "L-BFGS: the objective or its gradient is not finite "
                                      "at the starting point");
    res->n_iter = 0;
    if (max_abs(st->g, n) <= o->pgtol) {
        res->stop = GSB__LBFGS_PGTOL;
        return GSB_OK;
    }
    for (;;) {
        direction(st);
        double gd = dot(st->g, st->d, n), stp = 1.0, ft = 0.0, gdt = 0.0;
        int ok = 0;
        if (gd < 0) {
            if (res->n_iter == 0)
                stp = fmin(1.0 / sqrt(dot(st->d, st->d, n)), STEP_MAX);
            GSB_TRY(line_search(st, gd, o->max_ls, &stp, &ft, &gdt, &ok));
        }
        if (!ok) {
            if (st->col == 0) {
                res->stop = GSB__LBFGS_LINE_SEARCH;
                return GSB_OK;
            }
            /* drop the memory and retry from x along -g */
            st->col = 0;
            st->head = 0;
            st->gamma = 1.0;
            continue;
        }

        double fold = st->f;
        remember(st, stp, gd, gdt);
        double *t = st->x;
        st->x = st->xt;
        st->xt = t;
        t = st->g;
        st->g = st->gt;
        st->gt = t;
        st->f = ft;
        res->n_iter++;

        if (on_iter)
            GSB_TRY(on_iter(st->data, res->n_iter, st->f));
        if (res->n_iter >= o->max_iter) {
            res->stop = GSB__LBFGS_MAX_ITER;
            return GSB_OK;
        }
        if (st->n_eval > o->max_eval) {
            res->stop = GSB__LBFGS_MAX_EVAL;
            return GSB_OK;
        }
        if (max_abs(st->g, n) <= o->pgtol) {
            res->stop = GSB__LBFGS_PGTOL;
            return GSB_OK;
        }
        if (fold - st->f <= o->ftol * max3(fabs(fold), fabs(st->f), 1.0)) {
            res->stop = GSB__LBFGS_FTOL;
            return GSB_OK;
        }
    }
}

int gsb__lbfgs_minimize(int64_t n, double *x, gsb__lbfgs_eval_fn eval,
                        gsb__lbfgs_iter_fn on_iter, void *data, const gsb__lbfgs_opts *opts,
                        gsb__lbfgs_result *res)
{
    GSB_TRY(check_opts(n, opts));
    *res = (gsb__lbfgs_result){0};
    lbfgs_state st = {0};
    st.n = n;
    st.m = opts->m;
    st.gamma = 1.0;
    st.eval = eval;
    st.data = data;
    size_t un = (size_t)n, um = (size_t)opts->m;
    double *work = calloc(2 * um * un + 2 * um + 5 * un, sizeof(double));
    if (!work)
        return gsb__err(GSB_ENOMEM, "L-BFGS: out of memory for %lld variables",
                        (long long)n);
    st.s = work;
    st.y = st.s + um * un;
    st.rho = st.y + um * un;
    st.alpha = st.rho + um;
    st.g = st.alpha + um;
    st.d = st.g + un;
    st.xt = st.d + un;
    st.gt = st.xt + un;
    /* x and xt swap on every accepted step; the caller's x is copied in and out */
    st.x = st.gt + un;
    for (int64_t i = 0; i < n; i++)
        st.x[i] = x[i];

    int rc = run(&st, on_iter, opts, res);
    for (int64_t i = 0; i < n; i++)
        x[i] = st.x[i];
    res->n_eval = st.n_eval;
    res->f = st.f;
    res->pg_norm = max_abs(st.g, n);
    free(work);
    return rc;
}

void gsb__lbfgs_warn(const gsb__lbfgs_result *res, int64_t n_iter, int64_t max_iter,
                     const char *extra)
{
    if (res->stop == GSB__LBFGS_PGTOL || res->stop == GSB__LBFGS_FTOL)
        return;
    /* scipy's status and message for each way of stopping early */
    int status = res->stop == GSB__LBFGS_LINE_SEARCH ? 2 : 1;
    const char *why = "ABNORMAL: ";
    if (res->stop == GSB__LBFGS_MAX_ITER)
        why = "STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT";
    else if (res->stop == GSB__LBFGS_MAX_EVAL)
        why = "STOP: TOTAL NO. OF F,G EVALUATIONS EXCEEDS LIMIT";
    char more[96] = "";
    if (n_iter == max_iter)
        snprintf(more, sizeof more, "\nIncrease the number of iterations to improve the "
                 "convergence (max_iter=%lld).", (long long)max_iter);
    gsb__warn(GSB__CONVERGENCE_WARNING,
              "lbfgs failed to converge after %lld iteration(s) (status=%d):\n%s\n%s\n"
              "You might also want to scale the data as shown in:\n"
              "    https://scikit-learn.org/stable/modules/preprocessing.html%s%s",
              (long long)n_iter, status, why, more, extra ? "\n" : "", extra ? extra : "");
}
