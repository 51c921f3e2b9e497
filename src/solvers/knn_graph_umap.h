/*
 * knn_graph_umap.h - the k-nearest-neighbour graph of a data set (UMAP's
 * first step): exact, brute force, through the backend's topk_fast op.
 *
 * Every row's neighbours include the row itself (at distance exactly 0)
 * when the queries are the reference rows, as umap-learn's nearest_neighbors
 * returns them.  t-SNE's knn_graph.h builds the same graph of a data set with
 * itself (float64 distances, precomputed input); this one adds queries
 * against another set (transform), correlation, and the exact zero of a
 * row's own distance: the two are candidates for one module.  Metrics: euclidean, manhattan, cosine, and correlation (the cosine
 * distance of the row-centred data).  Exact search is what umap-learn does
 * below 4096 rows; above, umap-learn approximates (NN-descent) and this
 * finds the true neighbours, a superset of the quality.
 */
#ifndef GSB_SOLVERS_KNN_GRAPH_UMAP_H
#define GSB_SOLVERS_KNN_GRAPH_UMAP_H

#include "core/estimator.h"

typedef enum gsb__knn_metric {
    GSB__KNN_EUCLIDEAN = 0,
    GSB__KNN_MANHATTAN,
    GSB__KNN_COSINE,
    GSB__KNN_CORRELATION
} gsb__knn_metric;

/* The metric of a name ("euclidean", "l2", "manhattan", "l1", "taxicab",
 * "cosine", "correlation"); GSB_EUNSUPPORTED with a message naming `who`
 * and the supported names otherwise. */
int gsb__knn_metric_parse(const char *name, const char *who, gsb__knn_metric *out);

/*
 * The k nearest rows of R (n x d, host, float32) for each row of Q (host,
 * float32; NULL: R's own rows, each its own first neighbour), searched on
 * c->be in blocks of queries with progress ("knn", queries done) and
 * cancellation between blocks.  Outputs, allocated on the host: dist
 * (nq x k, float32, ascending; ties to the smaller index) and idx (nq x k,
 * int64).  k <= n.
 */
int gsb__knn_graph_exact(gsb__ctx *c, const gsb__tensor *R, const gsb__tensor *Q, int64_t k,
                         gsb__knn_metric metric, gsb__tensor *dist, gsb__tensor *idx);

#endif
