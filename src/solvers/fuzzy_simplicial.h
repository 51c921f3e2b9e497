/*
 * fuzzy_simplicial.h - UMAP's fuzzy simplicial set (umap-learn's
 * fuzzy_simplicial_set and its supervised variant), as a sparse graph on
 * the host.
 *
 * From each point's k nearest neighbours: rho (the distance to the nearest
 * neighbour, by local_connectivity) and sigma (binary search so that
 * sum_j exp(-(d_j - rho) / sigma) = log2(k)) give directed memberships
 * exp(-(d - rho) / sigma); the fuzzy union A + A^T - A o A^T (mixed with the
 * intersection A o A^T by set_op_mix_ratio) makes the graph symmetric.
 * Values are float32 and combined in float32 as umap-learn's scipy
 * arithmetic does, so the graph is exactly symmetric.
 */
#ifndef GSB_SOLVERS_FUZZY_SIMPLICIAL_H
#define GSB_SOLVERS_FUZZY_SIMPLICIAL_H

#include <stdint.h>

/* A sparse matrix of float32 weights, rows sorted by column, no explicit
 * zeros; rectangular (transform's new points against the training set).
 * (t-SNE's gsb__csr in knn_graph.h is square and float64.) */
typedef struct gsb__fcsr {
    int64_t rows, cols;
    int64_t *indptr;  /* rows + 1 */
    int32_t *indices; /* indptr[rows] */
    float *data;
} gsb__fcsr;

void gsb__fcsr_free(gsb__fcsr *g);
static inline int64_t gsb__fcsr_nnz(const gsb__fcsr *g) { return g->indptr[g->rows]; }

/*
 * umap-learn's smooth_knn_dist: for each of the n rows of dist (n x k,
 * ascending; column 0 is the point itself in a fit, and is skipped by the
 * search as umap-learn skips it), rho and sigma (n doubles each).
 * `target` is log2 of umap-learn's k (n_neighbors).
 */
void gsb__smooth_knn_dist(const float *dist, int64_t n, int64_t k, double target,
                          double local_connectivity, double *sigma, double *rho);

/*
 * Directed memberships as a rows x cols CSR: edge (i, idx[i, j]) weighs
 * exp(-(d - rho_i) / sigma_i), 1 where d <= rho_i or sigma_i == 0.
 * Neighbours with idx < 0 are skipped (disconnected); self edges
 * (idx[i, j] == i) are dropped unless bipartite (transform's new points
 * against the training set).  GSB_ENOMEM on failure.
 */
int gsb__membership_csr(const float *dist, const int64_t *idx, int64_t rows, int64_t k,
                        int64_t cols, const double *sigma, const double *rho, int bipartite,
                        gsb__fcsr *out);

/* out = mix (A + A^T - A o A^T) + (1 - mix) A o A^T, zeros dropped (A square). */
int gsb__fuzzy_union(const gsb__fcsr *A, double mix, gsb__fcsr *out);

/*
 * Supervised UMAP with a categorical target (umap-learn's
 * discrete_metric_simplicial_set_intersection then reset_local_connectivity):
 * every edge (i, j) is scaled by exp(-unknown_dist) when y_i or y_j is -1
 * (unlabelled), by exp(-far_dist) when y_i != y_j; zeros are dropped, each
 * row divided by its largest value and the result symmetrised by the fuzzy
 * union.  G is replaced.
 */
int gsb__fuzzy_categorical(gsb__fcsr *G, const double *y, double far_dist, double unknown_dist);

#endif
