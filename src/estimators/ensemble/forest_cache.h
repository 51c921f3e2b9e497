/*
 * forest_cache.h - the fitted trees as prediction takes them, prepared once
 * per model: the attributes' links checked (forest_model.c) and, for a GPU,
 * the five arrays uploaded and kept there.  The model keeps this state as its
 * devstate (core/model.h): dropped whenever its attributes change, freed
 * with it.  A fit builds it for its own backend before returning (so the
 * first predict finds it); a loaded model builds it at its first predict.
 *
 * Device copies stay resident only while they take at most a quarter of the
 * backend's memory budget (core/budget.h); larger forests are uploaded for
 * each call and freed after it, as a forest with no state is.
 */
#ifndef GSB_ENSEMBLE_FOREST_CACHE_H
#define GSB_ENSEMBLE_FOREST_CACHE_H

#include <stdint.h>

#include "core/estimator.h"

/* The trees on a backend for one call: trees the views to pass to
 * forest_predict, T their count; tmp the copies this call owns (none when
 * the state holds them). */
typedef struct gsb__forest_on {
    gsb__forest_trees trees;
    int64_t T;
    gsb__tensor tmp[5];
} gsb__forest_on;

/* The model's trees (F features, K values a leaf) on be, from its state
 * (built first when missing).  Release with gsb__forest_on_close. */
int gsb__forest_on_open(gsb__ctx *c, const gsb__backend *be, int64_t F, int64_t K,
                        gsb__forest_on *out);
void gsb__forest_on_close(gsb__forest_on *on);

/* At the end of a fit: build the state for c->be from the new attributes
 * (handed to the model with them).  A failure only leaves the state to the
 * first predict: the fit itself stands. */
void gsb__forest_cache_fit(gsb__ctx *c, int64_t F, int64_t K);

#endif
