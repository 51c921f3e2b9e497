/*
 * lanczos_state.h - what the two forms of thick-restart Lanczos share: the
 * single operator's (lanczos.c) and the block-diagonal one's, all blocks in
 * lockstep (lanczos_seg.c).  Both keep the same state (the basis V on the
 * backend, each block's projected matrix H and its eigenpairs on the host)
 * and take the same steps on it between their own Gram-Schmidt passes and
 * Ritz vector products: the option check, the storage, the start vector,
 * H's eigenproblem, the residual test and the restart.  lanczos.c is the
 * case of one block.
 */
#ifndef GSB_SOLVERS_LANCZOS_STATE_H
#define GSB_SOLVERS_LANCZOS_STATE_H

#include <stdint.h>

#include "backend/backend.h"

typedef struct gsb__lz_state {
    const gsb__backend *be;
    int64_t n, ncv;
    int64_t K;     /* blocks: 1 for lanczos.c */
    int64_t width; /* elements of a hist row */
    /* on be */
    gsb__tensor V;     /* (ncv + 1) x n: V[j] holds every block's basis vector j */
    gsb__tensor w;     /* n x 1: the direction being orthogonalised */
    gsb__tensor tmp;   /* ncv x n: Ritz vectors */
    gsb__tensor sel_d; /* ncv x (ncv K): sel */
    gsb__tensor hist;  /* ncv x width, zeroed: step j's projections and norms in row j */
    /* on the host */
    double *H;     /* K x ncv x ncv, row-major, symmetric (zeroed) */
    double *S;     /* K x ncv x ncv: eigenvectors of H (column j = vector j) */
    double *theta; /* K x ncv: eigenvalues of H, ascending per block */
    double *sel;   /* as sel_d: the Ritz vectors' combinations of V */
    double *xh;    /* n: a start or random vector */
    double *hh;    /* hist downloaded */
} gsb__lz_state;

/* 1 when nev, ncv, max_matvec and tol are usable (nev >= 1, ncv >= nev + 2,
 * max_matvec >= 1, tol > 0), else 0 */
int gsb__lz_opts_ok(int64_t nev, int64_t ncv, int64_t max_matvec, double tol);

/* The state of K blocks of ncv vectors over n elements on be, hist rows of
 * width; GSB_ENOMEM (its message naming `who`), after which, as after
 * success, gsb__lz_state_free releases what was allocated. */
int gsb__lz_state_alloc(gsb__lz_state *s, const gsb__backend *be, int64_t n, int64_t ncv,
                        int64_t K, int64_t width, const char *who);
void gsb__lz_state_free(gsb__lz_state *s);

/* the first rows x cols elements of t as a view of that shape */
gsb__tensor gsb__lz_shaped(const gsb__tensor *t, int64_t rows, int64_t cols);

/* basis vector j (all blocks) as an n x 1 view */
gsb__tensor gsb__lz_basis(const gsb__lz_state *s, int64_t j);

/* rows x cols elements of hist's row j from element off, as a view */
gsb__tensor gsb__lz_hist_at(const gsb__lz_state *s, int64_t j, int64_t off, int64_t rows,
                            int64_t cols);

/* A fixed pseudo-random vector (splitmix64 of (seed, i)), entries in [-1, 1). */
void gsb__lz_fixed_random(double *x, int64_t n, uint64_t seed);

/* The start vector the solvers take without one given: ones slightly
 * perturbed by a fixed pseudo-random vector (so no eigenvector is missed by
 * symmetry); lanczos_seg.c starts each block from it. */
void gsb__lanczos_default_start(double *x, int64_t n);

/* block c's theta and S from its H (LAPACK on the host) */
int gsb__lz_ritz(gsb__lz_state *s, int64_t c);

/* the largest residual norm |beta S[last, i]| of block c's nev best Ritz
 * pairs, beta its residual's norm (NaN compares as not converged) */
double gsb__lz_worst_residual(const gsb__lz_state *s, int64_t c, double beta, int64_t nev);

/* Ritz vectors kept at a restart: nev + half the rest, at most ncv - 2 */
int64_t gsb__lz_keep(int64_t nev, int64_t ncv);

/* The restart once tmp's rows [0, l) hold the Ritz vectors to keep: they
 * become V[0, l), the residual V[ncv] becomes V[l], and each block's H is
 * the diagonal of its l largest Ritz values. */
int gsb__lz_restart(gsb__lz_state *s, int64_t l);

#endif
