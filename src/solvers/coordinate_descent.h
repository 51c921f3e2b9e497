/*
 * coordinate_descent.h - scikit-learn's elastic-net coordinate descent on the
 * host, in its two forms:
 *
 *   Gram form      Q = X^T X and q = X^T y are given (p x p): a coordinate
 *                  update costs O(p) (an axpy on Q w), independent of n;
 *                  scikit-learn's enet_coordinate_descent_gram.
 *   residual form  X itself, column by column, and the residual R = y - X w:
 *                  an update costs O(n); enet_coordinate_descent.
 *
 * Both minimise 1/2 ||y - X w||^2 + alpha ||w||_1 + beta/2 ||w||^2 (the
 * estimator scales alpha and beta by n_samples) and follow
 * sklearn/linear_model/_cd_fast.pyx step for step: cyclic or random
 * coordinates, gap-safe screening, and the stopping rule (an epoch whose
 * largest coefficient change is at most tol times the largest coefficient,
 * or the last epoch, computes the duality gap; the solver stops when
 * gap <= tol ||y||^2).  So n_iter and the gap mean what scikit-learn's
 * n_iter_ and dual_gap_ (times n_samples) mean.  Arithmetic is in double
 * whatever X's dtype (scikit-learn works in X's dtype).
 */
#ifndef GSB_SOLVERS_COORDINATE_DESCENT_H
#define GSB_SOLVERS_COORDINATE_DESCENT_H

#include <stdint.h>

#include "gsb.h"

/* After each epoch (1, 2, ...) with the last gap computed (NaN before the
 * first); a status other than GSB_OK (cancellation) stops the solver. */
typedef int (*gsb__cd_epoch_fn)(void *data, int64_t epoch, double gap);

typedef struct gsb__cd_opts {
    double alpha;      /* L1 strength (>= 0) */
    double beta;       /* L2 strength (>= 0) */
    double tol;        /* relative: stop at gap <= tol * ||y||^2 */
    int64_t max_iter;  /* epochs, >= 1 */
    int positive;      /* w >= 0 */
    int random;        /* selection='random' */
    uint64_t seed;     /* the random coordinate stream (cd_rule.h) */
    int screening;     /* gap-safe screening (scikit-learn always screens when alpha > 0) */
    gsb__cd_epoch_fn on_epoch; /* may be NULL */
    void *data;
} gsb__cd_opts;

typedef struct gsb__cd_result {
    double gap;      /* the last duality gap computed */
    double tol_abs;  /* tol * ||y||^2, what gap was compared with */
    int64_t n_iter;  /* epochs run, as scikit-learn counts them (0: w met tol at the start) */
    int converged;   /* gap <= tol_abs */
} gsb__cd_result;

/* Defaults: alpha 1, beta 0, tol 1e-4, max_iter 1000, cyclic, screening. */
void gsb__cd_defaults(gsb__cd_opts *o);

/*
 * Gram form.  Q (p x p, row-major, symmetric positive semi-definite), q (p)
 * and y_norm2 = ||y||^2 describe the problem; w (p) is the start and
 * receives the solution.  Not converging is not an error (res->converged).
 * Errors: GSB_ENOMEM, or a status from on_epoch.
 */
int gsb__cd_gram(int64_t p, const double *Q, const double *q, double y_norm2, double *w,
                 const gsb__cd_opts *o, gsb__cd_result *res);

/*
 * Residual form.  Xt is X transposed (p x n, row-major: column j of X is
 * contiguous), float32 or float64 (dtype); y (n) in double.  w as above.
 */
int gsb__cd_resid(int64_t n, int64_t p, const void *Xt, gsb_dtype dtype, const double *y,
                  double *w, const gsb__cd_opts *o, gsb__cd_result *res);

#endif
