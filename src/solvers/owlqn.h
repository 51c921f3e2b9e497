/*
 * owlqn.h - OWL-QN (orthant-wise limited-memory quasi-Newton, Andrew and
 * Gao, ICML 2007) on the host: minimises
 *
 *     F(x) = f(x) + sum_j l1_j |x_j|
 *
 * for a smooth f given with its gradient and per-coordinate L1 weights
 * l1_j >= 0 (0 leaves a coordinate unpenalised, e.g. an intercept).  Each
 * iteration takes the L-BFGS direction of the pseudo-gradient (the
 * minimum-norm subgradient of F), drops the components that disagree with
 * its sign, and backtracks along the direction with every trial point
 * projected onto the orthant of the current point (a coordinate that
 * would change sign stops at 0), accepting the first step with
 * F(x_new) <= F(x) + 1e-4 pg'(x_new - x).  The (s, y) pairs come from the
 * smooth part's gradients.  Coefficients that belong at zero land exactly
 * on zero, as the proximal solvers (scikit-learn's saga) leave them.
 *
 * Stops when max_j |pg_j| <= pgtol (converged), when the relative decrease
 * of F falls to ftol, after max_iter iterations, or when a line search
 * fails twice in a row (once with the memory dropped).
 */
#ifndef GSB_SOLVERS_OWLQN_H
#define GSB_SOLVERS_OWLQN_H

#include <stdint.h>

/* f and its gradient (n doubles) at x; GSB_OK or a status set with gsb__err(). */
typedef int (*gsb__owlqn_eval_fn)(void *data, const double *x, double *f, double *grad);
/* After each iteration (1, 2, ...) with F; a non-OK status stops the solver with it. */
typedef int (*gsb__owlqn_iter_fn)(void *data, int64_t iteration, double F);

typedef struct gsb__owlqn_opts {
    int m;            /* (s, y) pairs kept (10) */
    int64_t max_iter; /* iterations (100) */
    int max_ls;       /* trial points per line search (50) */
    double pgtol;     /* converged when max |pseudo-gradient| <= pgtol (1e-4) */
    double ftol;      /* stop when (F_prev - F) <= ftol max(|F_prev|, |F|, 1) (64 eps) */
} gsb__owlqn_opts;

typedef enum gsb__owlqn_stop {
    GSB__OWLQN_PGTOL = 0,
    GSB__OWLQN_FTOL,
    GSB__OWLQN_MAX_ITER,
    GSB__OWLQN_LINE_SEARCH
} gsb__owlqn_stop;

typedef struct gsb__owlqn_result {
    int64_t n_iter;
    int64_t n_eval;
    double F;        /* F at the returned x */
    double pg_norm;  /* max |pseudo-gradient| there */
    gsb__owlqn_stop stop;
} gsb__owlqn_result;

void gsb__owlqn_defaults(gsb__owlqn_opts *opts);

/*
 * Minimise from x (n values, overwritten with the result); l1 (n) the
 * weights.  Not converging is not an error (res->stop).  Errors: a status of
 * eval or on_iter, GSB_ENUMERIC when f or its gradient is not finite at x0,
 * GSB_ENOMEM.  on_iter may be NULL.
 */
int gsb__owlqn_minimize(int64_t n, double *x, const double *l1, gsb__owlqn_eval_fn eval,
                        gsb__owlqn_iter_fn on_iter, void *data, const gsb__owlqn_opts *opts,
                        gsb__owlqn_result *res);

#endif
