/*
 * smo_blocks.h - the two-level SMO (ThunderSVM's and cuML's scheme) for the
 * dual problems smo.h describes, with every array on a backend: each outer
 * iteration picks a working set of q (<= 1024) variables, the most violating
 * half from I_up and half from I_low by their gradient (the backend's
 * svm_select: a sort on the device), keeping the newest half of the previous
 * set; their kernel rows come from a row cache of cache_bytes on the backend
 * (LRU by row, rows computed by GEMM: svm_kernel_rows); an SMO with libsvm's
 * second-order pair selection solves the q-variable subproblem to a tenth of
 * its gap (svm_inner: one thread block on the GPU), then one pass updates the
 * gradient of every variable (svm_update_f).  Only the working set's indices
 * and a few scalars cross between host and device per outer iteration.
 *
 * It stops on libsvm's criterion (maximal violation below eps), at max_iter
 * SMO steps in all, or when the violation repeats exactly for
 * SMO_BLOCKS_STALL outer iterations (the float kernel rows allow no further
 * progress); max(2000, 100 l / q) outer iterations end it too, as max_iter
 * does (timed_out).  The solution is libsvm's to within eps, not its iterates: the
 * support vectors and coefficients agree with libsvm's up to that tolerance
 * (docs/PARITY.md).  No shrinking: each outer iteration looks at every
 * variable.
 */
#ifndef GSB_SOLVERS_SMO_BLOCKS_H
#define GSB_SOLVERS_SMO_BLOCKS_H

#include <stdint.h>

#include "backend/backend.h"
#include "solvers/smo.h"

typedef struct gsb__smo_blocks_problem {
    const gsb__backend *be;
    int64_t l;             /* variables */
    const int64_t *real;   /* row of X (and K) of each variable, l entries, host */
    const int8_t *y;       /* +1 or -1 per variable, host */
    const double *p;       /* linear term per variable, host */
    const double *C;       /* upper bound per variable (>= 0), host */
    const double *QD;      /* K[real_t][real_t] per variable, host */
    const gsb__tensor *X;  /* the n samples (n x d) on be; K = kernel(X, X) */
    int kind;              /* the kernel op's kind, gamma, coef0, degree */
    double gamma, coef0;
    int degree;
    double eps;            /* stopping tolerance */
    int64_t max_iter;      /* SMO steps in all; -1: libsvm's own cap */
    double cache_bytes;    /* kernel rows kept on be (at least the working set's) */
    int64_t max_ws;        /* working-set size cap (a power of two >= 2), 0: 1024 */
    gsb__smo_progress_fn progress; /* may be NULL */
    void *progress_data;
} gsb__smo_blocks_problem;

/* Solve from alpha = 0; alpha (l, host) receives the solution, res the rest
 * (n_iter: SMO steps in all). */
int gsb__smo_blocks_solve(const gsb__smo_blocks_problem *pb, double *alpha,
                          gsb__smo_result *res);

#endif
