/*
 * lanczos.h - the largest eigenpairs of a symmetric operator by the
 * thick-restart Lanczos method (Wu and Simon's TRLan, the scheme ARPACK's
 * implicit restarts amount to for symmetric problems), with full
 * reorthogonalisation.  The operator is a callback, so any sparse or
 * structured matrix works.  The basis lives on a backend (the CPU's, or a
 * GPU's: operator, orthogonalisation and restarts then run on the device,
 * with one small download per restart cycle); only the projected
 * ncv x ncv problem is solved on the host.  UMAP's spectral initialisation
 * uses it for the normalised graph Laplacian (umap-learn calls scipy's
 * eigsh).
 */
#ifndef GSB_SOLVERS_LANCZOS_H
#define GSB_SOLVERS_LANCZOS_H

#include <stdint.h>

#include "backend/backend.h"

/* y = A x for x and y (n x 1, GSB_F64) on the solver's backend; GSB_OK or a
 * status set with gsb__err. */
typedef int (*gsb__linop_fn)(void *data, const gsb__tensor *x, gsb__tensor *y);

typedef struct gsb__lanczos_opts {
    int64_t n;          /* operator size */
    int64_t nev;        /* eigenpairs wanted, 1 <= nev */
    int64_t ncv;        /* basis vectors, nev + 2 <= ncv <= n */
    double tol;         /* converged when ||A x - theta x|| <= tol for each pair (x unit) */
    int64_t max_matvec; /* budget of operator applications */
    const double *v0;   /* start vector (n, not all zero), or NULL for
                         * gsb__lanczos_default_start (lanczos_state.h) */
    /* called after each restart cycle with the operator applications so far
     * and the largest residual of the wanted pairs; a status other than
     * GSB_OK stops the solver with that status (cancellation); may be NULL */
    int (*progress)(void *data, int64_t matvecs, double residual);
    void *progress_data;
    const gsb__backend *be; /* where the basis lives and the operator runs; NULL: CPU */
} gsb__lanczos_opts;

/*
 * The nev largest eigenvalues (evals, descending) and their unit
 * eigenvectors (evecs, host, nev x n row-major: vector j at evecs + j * n).
 * *converged is 1 when every pair met tol within the budget; 0 otherwise,
 * with the best Ritz pairs found written all the same.  *matvecs (may be
 * NULL) counts the operator applications.  Errors: the callbacks' status,
 * GSB_ENOMEM, GSB_EINTERNAL for bad options.
 */
int gsb__lanczos_largest(gsb__linop_fn op, void *data, const gsb__lanczos_opts *o,
                         double *evals, double *evecs, int *converged, int64_t *matvecs);

#endif
