/*
 * randomized_svd.h - Halko-Martinsson-Tropp randomized truncated SVD on a
 * backend, shared by PCA(svd_solver='randomized') and TruncatedSVD, plus two
 * small host <-> backend helpers both estimators use.
 *
 * The factorisation follows scikit-learn's _randomized_svd(flip_sign=False):
 * a Gaussian test matrix (size = n_components + n_oversamples columns), n_iter
 * power iterations, an orthonormal basis Q of the sampled range, then the exact
 * SVD of the small B = Q^T A.  Like scikit-learn it works on M^T when M has
 * fewer rows than columns.  The random numbers come from the backend's
 * rand_normal op, so a seed gives the same factorisation on every backend, but
 * not numpy's stream.
 */
#ifndef GSB_SOLVERS_RANDOMIZED_SVD_H
#define GSB_SOLVERS_RANDOMIZED_SVD_H

#include "core/estimator.h"

typedef struct gsb__rsvd_opts {
    int64_t n_components;
    int64_t n_oversamples;
    int64_t n_iter;
    int normalize; /* 1: re-orthonormalise between power iterations (QR / LU), 0: 'none' */
    uint64_t seed;
} gsb__rsvd_opts;

typedef struct gsb__rsvd {
    int64_t k;          /* triplets found: min(n_components, rows, cols) */
    int64_t m, n;       /* shape of the factorised M */
    int transposed;     /* the work was done on A = M^T (M had fewer rows) */
    int64_t size;       /* columns of the basis Q */
    double *s;          /* singular values, descending (host); the first k count */
    double *uhat;       /* size x k left singular vectors of B (host, row-major) */
    gsb__tensor Q;      /* rows(A) x size orthonormal basis (backend) */
    gsb__tensor Vb;     /* size x cols(A) right singular vectors of B (backend) */
} gsb__rsvd;

/* Factorise M (m x n, float, on c->be); progress is reported per power iteration. */
int gsb__rsvd_compute(gsb__ctx *c, const gsb__tensor *M, const gsb__rsvd_opts *o, gsb__rsvd *r);
/* The top-k right singular vectors of M as rows: Vt (k x n, M's dtype, allocated on be). */
int gsb__rsvd_right(const gsb__backend *be, const gsb__rsvd *r, gsb__tensor *Vt);
/* U[:, :k] diag(w) for host weights w (k): out (m x k, M's dtype, allocated on be). */
int gsb__rsvd_left_scaled(const gsb__backend *be, const gsb__rsvd *r, const double *w,
                          gsb__tensor *out);
void gsb__rsvd_free(gsb__rsvd *r);

/* A new backend tensor of dtype holding the host doubles h (rows x cols). */
int gsb__tensor_from_f64(const gsb__backend *be, gsb_dtype dtype, const double *h, int64_t rows,
                         int64_t cols, gsb__tensor *out);
/* The elements of t (any backend, any dtype) as a malloc'd array of doubles. */
int gsb__tensor_to_f64(const gsb__tensor *t, double **out);

#endif
