/*
 * umap_embed.h - UMAP's layout stage (umap-learn's simplicial_set_embedding
 * and the layout half of transform): the curve parameters a and b, the
 * edge schedule, the initial layout and the SGD epochs on the backend's
 * umap_sgd_epoch op.
 */
#ifndef GSB_ESTIMATORS_MANIFOLD_UMAP_EMBED_H
#define GSB_ESTIMATORS_MANIFOLD_UMAP_EMBED_H

#include "core/estimator.h"
#include "core/rng.h"
#include "solvers/fuzzy_simplicial.h"
#include "solvers/knn_graph_umap.h"

/*
 * umap-learn's find_ab_params: a and b of 1 / (1 + a x^2b) fitted by
 * least squares (Levenberg-Marquardt from (1, 1), as scipy's curve_fit) to
 * 1 for x < min_dist and exp(-(x - min_dist) / spread) beyond, on 300
 * points of [0, 3 spread].  GSB_ENUMERIC when the fit fails.
 */
int gsb__umap_find_ab(double spread, double min_dist, double *a, double *b);

/*
 * The graph the SGD samples: the entries of G of at least max / n_epochs
 * (umap-learn drops weaker edges: they would never be sampled), into out.
 */
int gsb__umap_prune(const gsb__fcsr *G, double n_epochs, gsb__fcsr *out);

/* How a fit starts its layout. */
typedef enum { GSB__UMAP_INIT_SPECTRAL, GSB__UMAP_INIT_RANDOM, GSB__UMAP_INIT_PCA,
               GSB__UMAP_INIT_ARRAY } gsb__umap_init_kind;

typedef struct gsb__umap_init {
    gsb__umap_init_kind kind;
    const gsb__tensor *array;  /* INIT_ARRAY: n x dim (host, float) */
    const gsb__tensor *X;      /* the data (host, float32): spectral centroids, pca */
    gsb__knn_metric metric;
    int64_t dim;
    gsb__rng *rng;
    int64_t spectral_failures; /* out: components laid out at random instead */
} gsb__umap_init;

/*
 * The starting layout of a fit on the pruned graph G: out (n x dim, float32
 * host) scaled, as umap-learn does, so each coordinate spans [0, 10].
 */
int gsb__umap_initial_layout(gsb__ctx *c, const gsb__fcsr *G, gsb__umap_init *in, float *out);

/* The SGD's settings (see backend/umap_sgd.h). */
typedef struct gsb__umap_sgd_run {
    int64_t n_epochs;
    double a, b, gamma, initial_alpha, negative_sample_rate, attraction_scale;
    uint64_t seed;
    int hogwild;
    const char *stage; /* progress stage name */
} gsb__umap_sgd_run;

/*
 * n_epochs of SGD on c->be over the edges of G (pruned, CSR rows = head
 * points): head (G->rows x dim, host, float32) is moved in place; tail
 * (host, float32, G->cols rows) is fixed, or NULL for a fit (tail = head).
 * alpha decays linearly from initial_alpha, as umap-learn's; progress and
 * cancellation every few epochs.
 */
int gsb__umap_optimize(gsb__ctx *c, const gsb__fcsr *G, float *head, const float *tail,
                       int64_t dim, const gsb__umap_sgd_run *r);

#endif
