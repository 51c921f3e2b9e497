/*
 * neighbors_stream.h - the neighbours search of an index and queries larger
 * than the backend's memory together (neighbors_stream.c): queries in
 * blocks, the index streamed in batches (estimators/common/stream.h).
 */
#ifndef GSB_NEIGHBORS_STREAM_H
#define GSB_NEIGHBORS_STREAM_H

#include "core/estimator.h"

/*
 * The k nearest rows of fit_X (host) to each row of X (host; NULL: fit_X's
 * own rows, each excluding itself) by metric, computed in cdt: host tensors
 * dist (nq x k, cdt) and idx (nq x k, int64), as neighbors.c's search gives
 * them, with *streamed = 1.  When the index and the queries fit the backend
 * together, *streamed = 0 and nothing is done.
 */
int gsb__knn_search_streamed(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *fit_X,
                             int64_t k, gsb__metric metric, gsb_dtype cdt, gsb__tensor *dist,
                             gsb__tensor *idx, int *streamed);

#endif
