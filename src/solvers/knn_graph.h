/*
 * knn_graph.h - the k-nearest-neighbour graph of a data set, and its
 * symmetrisation into a sparse matrix: the first step of the manifold
 * learners (TSNE; UMAP reuses it).
 *
 * From features the graph is exact: the backend's fused topk op (brute
 * force, tiled; CPU or GPU), queried in blocks of rows so that a long search
 * reports progress and can be cancelled between blocks.  From a precomputed
 * n x n distance matrix each row's k smallest entries are selected on the
 * host.  Ties go to the smaller index.  Without self, a row is never its own
 * neighbour (as scikit-learn's kneighbors() on the training data: k + 1
 * found, the row dropped, or the farthest one when duplicates crowd the row
 * out of its own list).
 */
#ifndef GSB_SOLVERS_KNN_GRAPH_H
#define GSB_SOLVERS_KNN_GRAPH_H

#include "core/estimator.h"

typedef struct gsb__knn_opts {
    int64_t k;           /* neighbours per row, 1 <= k <= n (n - 1 without self) */
    gsb__metric metric;  /* features: the distance (the op's value, e.g. squared) */
    int precomputed;     /* 1: X is an n x n matrix of distances, metric unused */
    int include_self;    /* 1: a row may be its own neighbour (UMAP), 0: never (t-SNE) */
} gsb__knn_opts;

typedef struct gsb__knn_graph {
    int64_t n, k;
    double *dist;  /* n x k (host): each row's distances, ascending */
    int64_t *idx;  /* n x k (host): the neighbours' row indices */
} gsb__knn_graph;

/*
 * The graph of X (n x d on any backend; precomputed: n x n), searched on be,
 * with progress reported to c (may be NULL) as stage "neighbors" (rows
 * done).  Errors: the backend's, GSB_ENOMEM, GSB_ECANCELLED.
 */
int gsb__knn_graph_build(gsb__ctx *c, const gsb__backend *be, const gsb__tensor *X,
                         const gsb__knn_opts *o, gsb__knn_graph *out);
void gsb__knn_graph_free(gsb__knn_graph *g);

/* A sparse n x n matrix in CSR form (host). */
typedef struct gsb__csr {
    int64_t n, nnz;
    int64_t *indptr;   /* n + 1 */
    int32_t *indices;  /* nnz, ascending within each row */
    double *data;      /* nnz */
} gsb__csr;

void gsb__csr_free(gsb__csr *m);

/* How a weight and its transpose combine. */
typedef enum gsb__sym_op {
    GSB__SYM_SUM = 0,        /* a + b (t-SNE's P + P^T) */
    GSB__SYM_FUZZY_UNION = 1 /* a + b - a b (UMAP's fuzzy union) */
} gsb__sym_op;

/*
 * S = op(W, W^T) for the weights w (n x k, aligned with g->idx) of the graph
 * read as W[i, idx[i, j]] = w[i * k + j]: S has an entry wherever W or W^T
 * has one (the absent side counts as 0), its rows sorted by column.
 */
int gsb__knn_symmetrize(const gsb__knn_graph *g, const double *w, gsb__sym_op op, gsb__csr *out);

#endif
