/*
 * lanczos_seg.h - thick-restart Lanczos (lanczos.h) for a block-diagonal
 * symmetric operator, each block's largest eigenpairs on its own: the
 * connected components of a graph, whose spectral layouts UMAP needs one
 * by one.  All blocks' recurrences advance in lockstep: one operator
 * product over the whole graph per step, per-block dot products, updates
 * and norms by the backend's segmented ops (seg_dots, seg_combine,
 * seg_normalize), so K components cost about what the slowest of them
 * costs alone instead of the sum.  Each block follows exactly the
 * recurrence lanczos.c runs on it alone (start vector, restarts,
 * convergence test), up to rounding.
 */
#ifndef GSB_SOLVERS_LANCZOS_SEG_H
#define GSB_SOLVERS_LANCZOS_SEG_H

#include <stdint.h>

#include "solvers/lanczos.h"

typedef struct gsb__lanczos_seg_opts {
    int64_t K;          /* blocks, >= 1 */
    const int64_t *seg; /* K + 1 (host): block c is elements [seg[c], seg[c + 1]) of n = seg[K] */
    int64_t nev;        /* eigenpairs wanted per block, 1 <= nev */
    int64_t ncv;        /* basis vectors per block, nev + 2 <= ncv <= every block's size */
    double tol;         /* as lanczos.h, per block */
    int64_t max_matvec; /* budget of (whole-operator) products */
    /* after each restart cycle: products so far and the largest residual of
     * the blocks still running; a status other than GSB_OK stops the solver */
    int (*progress)(void *data, int64_t matvecs, double residual);
    void *progress_data;
    const gsb__backend *be; /* NULL: CPU */
} gsb__lanczos_seg_opts;

/*
 * op applies the whole block-diagonal operator (n x 1 GSB_F64 tensors on
 * the backend).  evals (K x nev): block c's largest eigenvalues, descending;
 * evecs (host, nev x n): row r holds every block's r-th unit eigenvector in
 * that block's elements.  status (K): 1 converged, 0 budget spent (the best
 * Ritz pairs written), -1 a breakdown (an invariant subspace found: nothing
 * written for that block, which the caller solves on its own with
 * lanczos.c).  *matvecs (may be NULL) counts the products.  Errors: the
 * callbacks' status, GSB_ENOMEM, GSB_EINTERNAL for bad options.
 */
int gsb__lanczos_seg_largest(gsb__linop_fn op, void *data, const gsb__lanczos_seg_opts *o,
                             double *evals, double *evecs, int *status, int64_t *matvecs);

#endif
