/*
 * kmeans_stats.h - KMeans's distributed steps (kmeans_stats.c) and the
 * centre averaging they share with the single-process fit (kmeans.c).
 */
#ifndef GSB_ESTIMATORS_CLUSTER_KMEANS_STATS_H
#define GSB_ESTIMATORS_CLUSTER_KMEANS_STATS_H

#include <stdint.h>

#include "core/estimator.h"

/*
 * scikit-learn's _average_centers: each centre is its cluster's weighted
 * mean (sums k x d, counts k); a cluster with no weight left goes to the
 * heaviest cluster (the first of equal weights), copying that cluster's row
 * as scikit-learn's in-place loop leaves it (see kmeans_stats.c).
 */
void gsb__kmeans_average_centres(const double *sums, const double *counts, int64_t k, int64_t d,
                                 double *out);

/* Methods of the KMeans descriptor (docs/DASK.md). */
int gsb__kmeans_stats_lloyd(gsb__ctx *c);
int gsb__kmeans_stats_par(gsb__ctx *c);
int gsb__kmeans_lloyd_step(gsb__ctx *c);
int gsb__kmeans_fit_from_stats(gsb__ctx *c);

#define GSB__KMEANS_STATS_ROWS                                                                 \
    {"stats_lloyd", gsb__kmeans_stats_lloyd,                                                   \
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}, \
      {"centers", GSB__IN_MATRIX}, {"shift", GSB__IN_MATRIX}},                                 \
     GSB__METHOD_STATELESS,                                                                    \
     "a partition's Lloyd statistics against centred centres (X - shift): 'lloyd' (per-"       \
     "cluster sums, counts, inertia), or with option far=m its m farthest points ('far')"},    \
    {"stats_kmeans_par", gsb__kmeans_stats_par,                                                \
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}, \
      {"centers", GSB__IN_MATRIX}, {"shift", GSB__IN_MATRIX}},                                 \
     GSB__METHOD_STATELESS,                                                                    \
     "k-means|| on a partition: option phase='cost' (sum w d^2 to the candidates) or "         \
     "'sample' (rows drawn with probability l w d^2 / phi)"},                                  \
    {"lloyd_step", gsb__kmeans_lloyd_step,                                                     \
     {{"stats", GSB__IN_STATS}, {"far", GSB__IN_STATS | GSB__IN_OPTIONAL},                     \
      {"centers", GSB__IN_MATRIX}},                                                            \
     GSB__METHOD_STATELESS,                                                                    \
     "the M-step from merged Lloyd statistics: new 'centers', squared 'shift', 'moved'"},      \
    {"fit_from_stats", gsb__kmeans_fit_from_stats,                                             \
     {{"stats", GSB__IN_STATS}, {"centers", GSB__IN_MATRIX}, {"shift", GSB__IN_MATRIX}}, 1,    \
     "fit from the final centred centres and their merged Lloyd statistics"}

#endif
