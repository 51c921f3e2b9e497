/*
 * smo.h - the SMO solver of libsvm (as bundled in scikit-learn 1.9.1), for
 * the dual problems of SVC and epsilon-SVR:
 *
 *     min_a  0.5 a^T Q a + p^T a   s.t.  y^T a = y^T a0,  0 <= a_t <= C_t
 *
 * with Q[s][t] = y_s y_t K[real_s][real_t] for l variables over the n rows
 * of a kernel matrix K (SVC: l = n, real_t = t; SVR: l = 2n, real_t = t mod
 * n).  Working sets by second-order information (WSS3, Fan, Chen and Lin,
 * JMLR 2005), libsvm's shrinking, stop when the maximal violation is below
 * eps, or after max_iter iterations.
 *
 * The solver is host code; it sees K only through a row callback (the
 * estimator computes rows with the backend's kernel op) and keeps the rows
 * it fetched in an LRU cache of cache_bytes, as float (libsvm's Qfloat), so
 * the iterates are libsvm's.  Gradients are accumulated in double.
 */
#ifndef GSB_SOLVERS_SMO_H
#define GSB_SOLVERS_SMO_H

#include <stdint.h>

/* Write kernel row r (K[r][0..n)) into out; returns a gsb status. */
typedef int (*gsb__smo_row_fn)(void *data, int64_t r, float *out);
/* Called every 1000 iterations with the current violation gap; a non-OK
 * status (cancellation) stops the solver and is returned. */
typedef int (*gsb__smo_progress_fn)(void *data, int64_t iteration, double gap);

typedef struct gsb__smo_problem {
    int64_t l;             /* variables */
    int64_t n;             /* rows (and columns) of K */
    const int64_t *real;   /* row of K of each variable, l entries */
    const int8_t *y;       /* +1 or -1 per variable */
    const double *p;       /* linear term per variable */
    const double *C;       /* upper bound per variable (>= 0) */
    const double *QD;      /* Q[t][t] = K[real_t][real_t] per variable */
    double eps;            /* stopping tolerance (scikit-learn's tol) */
    int shrinking;
    int64_t max_iter;      /* -1: no limit */
    double cache_bytes;    /* kernel row cache; at least two rows are kept */
    gsb__smo_row_fn row;
    void *row_data;
    gsb__smo_progress_fn progress; /* may be NULL */
    void *progress_data;
} gsb__smo_problem;

typedef struct gsb__smo_result {
    double rho;      /* the decision function is sum_t a_t y_t K(x_t, x) - rho */
    double obj;      /* dual objective */
    int64_t n_iter;
    int timed_out;   /* stopped by max_iter */
} gsb__smo_result;

/* Solve from the feasible start alpha (l entries), which receives the
 * solution. */
int gsb__smo_solve(const gsb__smo_problem *pb, double *alpha, gsb__smo_result *res);

#endif
