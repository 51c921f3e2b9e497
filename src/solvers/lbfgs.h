/*
 * lbfgs.h - a host-side L-BFGS minimiser on double vectors.
 *
 * Minimises a smooth unconstrained f(x) given a callback that returns f and
 * its gradient.  It follows scipy's L-BFGS-B (as scikit-learn calls it with
 * no bounds) step for step, so an estimator built on it stops where
 * scikit-learn stops:
 *   - direction -H g from the last m (s, y) pairs, H0 = (s'y / y'y) I; a pair
 *     with s'y <= eps * (-g's) is skipped;
 *   - first step length min(1 / ||d||, 1e10), later ones 1, refined by a
 *     More-Thuente line search (strong Wolfe, ftol 1e-3, gtol 0.9, xtol 0.1);
 *   - a failed line search (max_ls evaluations, or an ascent direction)
 *     drops the memory and retries from the same point; a second failure
 *     with empty memory stops (GSB__LBFGS_LINE_SEARCH);
 *   - after each iteration, in this order: the progress hook, max_iter,
 *     max_eval, then max_i |g_i| <= pgtol, then
 *     f_prev - f <= ftol * max(|f_prev|, |f|, 1).
 * As in scipy, max_iter is checked only after an iteration, so max_iter = 0
 * still runs one iteration (unless x0 already meets pgtol).
 *
 * A trial point where f or the directional derivative is not finite halves
 * the step (scipy has no such guard; it lets a barrier-like f be minimised).
 */
#ifndef GSB_SOLVERS_LBFGS_H
#define GSB_SOLVERS_LBFGS_H

#include <stdint.h>

/* f and grad (n doubles) at x; return GSB_OK or a status set with gsb__err(). */
typedef int (*gsb__lbfgs_eval_fn)(void *data, const double *x, double *f, double *grad);
/* Called once per completed iteration (1, 2, ...) with the new f; a status
 * other than GSB_OK (e.g. GSB_ECANCELLED) stops the minimiser with it. */
typedef int (*gsb__lbfgs_iter_fn)(void *data, int64_t iteration, double f);

typedef struct gsb__lbfgs_opts {
    int m;            /* (s, y) pairs kept: scipy's maxcor, 10 */
    int64_t max_iter; /* scipy's maxiter, 15000 */
    int64_t max_eval; /* scipy's maxfun, 15000 (checked after an iteration) */
    int max_ls;       /* evaluations per line search: scipy's maxls, 20 */
    double pgtol;     /* stop when max_i |g_i| <= pgtol: scipy's gtol, 1e-5 */
    double ftol;      /* relative reduction: scipy's ftol, 1e7 * DBL_EPSILON */
} gsb__lbfgs_opts;

typedef enum gsb__lbfgs_stop {
    GSB__LBFGS_PGTOL = 0,    /* converged: max_i |g_i| <= pgtol */
    GSB__LBFGS_FTOL,         /* converged: relative reduction of f <= ftol */
    GSB__LBFGS_MAX_ITER,     /* not converged: max_iter iterations done */
    GSB__LBFGS_MAX_EVAL,     /* not converged: more than max_eval evaluations */
    GSB__LBFGS_LINE_SEARCH   /* not converged: the line search failed twice */
} gsb__lbfgs_stop;

typedef struct gsb__lbfgs_result {
    int64_t n_iter;  /* completed iterations (scipy's nit) */
    int64_t n_eval;  /* calls of eval (scipy's nfev) */
    double f;        /* f at the returned x */
    double pg_norm;  /* max_i |g_i| at the returned x */
    gsb__lbfgs_stop stop;
} gsb__lbfgs_result;

/* scipy.optimize.minimize(method="L-BFGS-B")'s defaults. */
void gsb__lbfgs_defaults(gsb__lbfgs_opts *opts);

/*
 * Minimise from x (n values), which is overwritten with the result.  Not
 * converging is not an error: res->stop says why it stopped.  Errors: a
 * status returned by eval or on_iter (x then holds the last accepted
 * point), GSB_ENUMERIC when f or the gradient is not finite at x0,
 * GSB_EINVAL for bad options, GSB_ENOMEM.  on_iter may be NULL.
 */
int gsb__lbfgs_minimize(int64_t n, double *x, gsb__lbfgs_eval_fn eval,
                        gsb__lbfgs_iter_fn on_iter, void *data, const gsb__lbfgs_opts *opts,
                        gsb__lbfgs_result *res);

/*
 * Warn as scikit-learn's _check_optimize_result("lbfgs", ...) does when the
 * minimiser did not converge: a ConvergenceWarning "lbfgs failed to converge
 * after N iteration(s) (status=S):" with scipy's message, the advice to
 * raise max_iter when n_iter reached it, to scale the data, and extra (an
 * estimator's own advice, or NULL) on a last line.  n_iter as reported.
 */
void gsb__lbfgs_warn(const gsb__lbfgs_result *res, int64_t n_iter, int64_t max_iter,
                     const char *extra);

#endif
