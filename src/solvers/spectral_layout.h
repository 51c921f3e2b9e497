/*
 * spectral_layout.h - UMAP's spectral initialisation (umap-learn's
 * spectral_layout and multi_component_layout): the eigenvectors of the
 * graph's normalised Laplacian L = I - D^-1/2 W D^-1/2 for its smallest
 * non-trivial eigenvalues, found as the largest eigenpairs of
 * D^-1/2 W D^-1/2 by thick-restart Lanczos (dense eigh for small graphs).
 *
 * A graph of several connected components is laid out per component:
 * each component's own spectral layout, scaled into a box around the
 * component's place in a meta layout (the corners +-e_i when there are at
 * most 2 dim components, else a spectral embedding of the components'
 * centroids).  Components too small for a spectral layout get uniform
 * random positions in their box, as umap-learn gives them.  On a GPU the
 * components of DEVICE_MIN vertices or more share one Lanczos run, their
 * recurrences in lockstep (lanczos_seg.h).
 *
 * One documented simplification: the centroids' affinity is
 * exp(-(d / s)^2) with s^2 the mean squared centroid distance, where
 * umap-learn takes exp(-d^2), which underflows to an identity matrix (and
 * an arbitrary meta layout) whenever centroids are more than ~30 apart.
 */
#ifndef GSB_SOLVERS_SPECTRAL_LAYOUT_H
#define GSB_SOLVERS_SPECTRAL_LAYOUT_H

#include "core/rng.h"
#include "solvers/fuzzy_simplicial.h"
#include "solvers/knn_graph_umap.h"

typedef struct gsb__spectral_opts {
    int64_t dim;           /* coordinates per point */
    const float *X;        /* the data (rows = graph rows, p columns): component centroids */
    int64_t p;
    gsb__knn_metric metric; /* distance between centroids */
    gsb__rng *rng;         /* the random parts (small components, fallbacks) */
    /* the eigensolver's progress (see gsb__lanczos_opts); may be NULL */
    int (*progress)(void *data, int64_t matvecs, double residual);
    void *progress_data;
    const gsb__backend *be; /* the eigensolver's backend for large components; NULL: CPU */
    /* nonzero: the large components in one lockstep Lanczos (lanczos_seg.h)
     * on the CPU too (tests; a GPU backend always takes it) */
    int lockstep;
} gsb__spectral_opts;

/*
 * out (G->rows x dim doubles, row-major).  *n_failed counts the components
 * whose eigensolver did not converge: they were given uniform random
 * coordinates in [-10, 10) (scaled into their box), umap-learn's fallback,
 * for which the caller warns (umap.c: a UserWarning, as umap-learn's).  Errors: GSB_ENOMEM, the progress callback's
 * status.
 */
int gsb__spectral_layout(const gsb__fcsr *G, const gsb__spectral_opts *o, double *out,
                         int64_t *n_failed);

/* Connected components of a symmetric graph: label (rows) in [0, count), in
 * the order of each component's smallest vertex. */
int gsb__connected_components(const gsb__fcsr *G, int32_t *label, int64_t *count);

#endif
