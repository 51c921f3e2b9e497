/*
 * tsne.h - the parts of TSNE (tsne.c) that live in their own files:
 * the input affinities P (tsne_affinity.c) and the initial embedding
 * (tsne_init.c).
 */
#ifndef GSB_ESTIMATORS_TSNE_H
#define GSB_ESTIMATORS_TSNE_H

#include "core/estimator.h"
#include "solvers/knn_graph.h"

/*
 * scikit-learn's joint probabilities from a neighbour graph whose distances
 * are already squared: each row's conditional distribution exp(-beta d) /
 * sum, beta found by _binary_search_perplexity's bisection (on the distances
 * rounded to float32, as scikit-learn does), then P = (Pc + Pc^T) / sum,
 * clamped below at float64's eps when clamp is set (method='exact').
 * mean_sigma: scikit-learn's verbose "Mean sigma", sqrt(n / sum beta).
 */
int gsb__tsne_joint_p(const gsb__knn_graph *sq, double perplexity, int clamp, gsb__csr *P,
                      double *mean_sigma);

/*
 * The initial embedding Y (host, float32, n x n_components): the fit input
 * "init" when given, else the 'init' parameter: 'pca' (PCA of X scaled so the
 * first column has standard deviation 1e-4) or 'random' (N(0, 1e-4^2) from
 * the backend's counter-based generator, seeded from the rng).
 */
int gsb__tsne_init(gsb__ctx *c, const gsb__tensor *X, int64_t n_components, uint64_t seed,
                   gsb__tensor *Y);

#endif
