/*
 * enet.h - solving the elastic-net problem on prepared data, shared by
 * Lasso/ElasticNet (enet.c) and their CV variants (enet_cv.c).
 *
 * A solver is set up once for a prepared problem (linear_common.h: centred,
 * sqrt(w)-scaled X and Y on the backend) and then run for one or several
 * penalties with warm starts (an alpha path reuses the Gram matrix).  Each
 * run minimises, for every target t,
 *     1/2 ||y_t - X w_t||^2 + l1 ||w_t||_1 + l2/2 ||w_t||^2
 * (the estimators pass l1 = alpha l1_ratio n, l2 = alpha (1 - l1_ratio) n,
 * as scikit-learn's enet_path) to scikit-learn's stopping rule: duality gap
 * <= tol ||y_t||^2.  Three forms reach that optimum:
 *
 *   gram         Q = X^T X and q = X^T y once (syrk, gemm on the backend),
 *                then the enet_cd_gram op: on the GPU one persistent kernel
 *                per call.  Cheap per epoch when p is small.
 *   residual     the host solver on X^T (column-major X): an epoch costs
 *                O(n p), no p x p matrix.  The CPU backend's choice for wide
 *                data; on the GPU only when forced (X comes to the host).
 *   working_set  for wide data on the GPU (too many features for a p x p
 *                Gram): the full duality gap from two products with X
 *                (gemm), a working set of the features closest to the dual
 *                constraint (gap-safe distance) plus the current support,
 *                the Gram form on that set (gather_cols, syrk, enet_cd_gram)
 *                to 0.3 of the current gap, the set doubled until the full
 *                gap meets tol (Massias et al.'s Celer in spirit).
 *
 * The gram and residual forms follow scikit-learn's iterations exactly (same
 * n_iter); working_set reports the epochs of its inner solves, capped at
 * max_iter.  The form is picked by cost (enet_solve.c) unless the call
 * option "_cd_form" (1 gram, 2 residual, 3 working_set) forces one: tests
 * and benchmarks use it to reach every form on every backend.
 */
#ifndef GSB_ENET_H
#define GSB_ENET_H

#include "estimators/linear_model/linear_common.h"

typedef enum gsb__enet_form {
    GSB__ENET_AUTO = 0,
    GSB__ENET_GRAM = 1,
    GSB__ENET_RESIDUAL = 2,
    GSB__ENET_WORKING_SET = 3
} gsb__enet_form;

typedef struct gsb__enet_penalty {
    double l1, l2;    /* alpha l1_ratio n, alpha (1 - l1_ratio) n */
    double tol;
    int64_t max_iter;
    int positive, random;
    uint64_t seed;    /* random coordinates (target t, working-set round r: seed + ...) */
} gsb__enet_penalty;

typedef struct gsb__enet_solver {
    gsb__ctx *c;
    const gsb__lin_data *d;
    gsb__enet_form form;
    gsb__tensor Q, q;  /* gram: X^T X (p x p), Y^T X (k x p), float64 on the backend */
    double *y_norm2;   /* k: ||y_t||^2 */
    void *Xt;          /* residual: X^T (p x n, X's dtype), host */
    double *Yh;        /* residual, working_set: the targets, k x n, host */
    gsb__tensor Xd;    /* working_set: X as float64 on the backend */
    double *Xy;        /* working_set: X^T y_t, k x p, host */
    double *norm2;     /* working_set: ||X_j||^2, host */
} gsb__enet_solver;

/*
 * Set up for d (which must outlive the solver).  precompute 1 forces the
 * Gram form (scikit-learn's precompute=True); 0 lets the cost decide.  The
 * call option "_cd_form" overrides both.
 */
int gsb__enet_solver_init(gsb__enet_solver *s, gsb__ctx *c, const gsb__lin_data *d,
                          int precompute);
/*
 * Set up the Gram form from given products (host doubles, row-major): Q =
 * X^T X (p x p), q = Y^T X (k x p), y_norm2 (k) = ||y_t||^2, of the prepared
 * data d describes (d->X and d->Y may be empty): the fit from merged
 * statistics (enet_stats.c), where no X is at hand.
 */
int gsb__enet_solver_init_gram(gsb__enet_solver *s, gsb__ctx *c, const gsb__lin_data *d,
                               const double *Q, const double *q, const double *y_norm2);
/*
 * Solve every target from W (k x p host doubles, row t = w_t), which receives
 * the solutions; gap and n_iter (k each): the final duality gaps (of the
 * problem above, not divided by n) and epochs.  *converged: every target met
 * tol.  Reports progress (and honours cancellation) between epochs or calls.
 */
int gsb__enet_solver_run(gsb__enet_solver *s, const gsb__enet_penalty *pen, double *W,
                         double *gap, int64_t *n_iter, int *converged);
void gsb__enet_solver_free(gsb__enet_solver *s);

/* ---- fitting Lasso / ElasticNet (enet.c) -------------------------------------- */

typedef struct gsb__enet_fit_args {
    double alpha, l1_ratio;
    int fit_intercept, precompute, warm_start;
    gsb__enet_penalty pen; /* tol, max_iter, positive, random, seed (l1, l2 set from alpha) */
} gsb__enet_fit_args;

/* The estimator's settings from its parameters (l1_ratio 1 for Lasso). */
int gsb__enet_fit_args_read(gsb__ctx *c, gsb__enet_fit_args *a);
/*
 * Fit on prepared data and store coef_, intercept_, dual_gap_ (gap / n, X's
 * dtype) and n_iter_, scalars for one target as scikit-learn: ElasticNet.fit
 * after its _pre_fit.  LassoCV and ElasticNetCV refit through it.
 */
int gsb__enet_fit_prepared(gsb__ctx *c, const gsb__lin_data *d, const gsb__enet_fit_args *a);
/* The same with the solver s already set up for d (the fit from statistics). */
int gsb__enet_fit_solver(gsb__ctx *c, const gsb__lin_data *d, const gsb__enet_fit_args *a,
                         gsb__enet_solver *s);
/* scikit-learn's UserWarning for alpha = 0. */
void gsb__enet_warn_alpha0(const gsb__enet_fit_args *a);
/* "fit_from_stats": Lasso / ElasticNet from merged GRAM statistics (enet_stats.c). */
int gsb__enet_fit_from_stats(gsb__ctx *c);

#endif
