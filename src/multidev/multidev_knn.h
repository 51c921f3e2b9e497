/*
 * multidev_knn.h - the k-nearest-neighbour search of a multi-device session
 * (multidev_knn.c): the index split into one shard per device, kept there,
 * each device's top k of its shard, merged on the host into the global k
 * nearest.  Called by the neighbours estimators' search (neighbors.c).
 */
#ifndef GSB_MULTIDEV_KNN_H
#define GSB_MULTIDEV_KNN_H

#include "core/estimator.h"

/*
 * The k nearest rows of fit_X (the model's "_fit_X", host) to each row of X
 * (NULL: fit_X's own rows, each excluding itself) by metric, computed in cdt,
 * across the devices of c's session: host tensors dist (nq x k, cdt) and idx
 * (nq x k, int64), exactly as neighbors.c's one-device search gives them
 * (ascending by distance, ties to the smaller row), with *handled = 1.
 * *handled = 0 and nothing done when the session has no device set, X is
 * already in one device's memory, or a shard does not fit its device (both
 * said once by a warning): the caller searches on the first device.
 */
int gsb__md_knn_search(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *fit_X, int64_t k,
                       gsb__metric metric, gsb_dtype cdt, gsb__tensor *dist, gsb__tensor *idx,
                       int *handled);

/* A neighbours search that is not split (radius_neighbors): in a
 * multi-device session, warn once that it runs on the first device. */
void gsb__md_knn_unsplit(gsb__ctx *c, const char *why);

#endif
