/*
 * forest_merge.h - forests as one packed array, and forests concatenated:
 * how the trees grown in several places (the ranks of a multi-device
 * session, the workers of gsb.dask) become one ordinary forest model.
 *
 * Packed form: one 1-D float64 array (every value below is exact in it):
 *     [GSB__FOREST_MAGIC, classify, T, N, L, K, F,
 *      classes (K, classifier only), split (N), threshold (N: the float32's bits as
 *      an integer, infinity included), child (N),
 *      root (T), depth (T), seed high 32 bits (T), seed low 32 bits (T),
 *      importance (T x F), leaf values (L x K)]
 * with the arrays of forest_model.h (children, roots and leaf rows indices
 * into this forest's own arrays).
 *
 * Methods (forest.c declares them on both forests):
 *   export_trees()           -> "trees": the fitted forest, packed;
 *   merge_trees(a, b)        -> "trees": a's trees, then b's (stateless): one
 *                               entry that concatenates forests; classifiers'
 *                               classes become the union (sorted), each
 *                               leaf's fractions placed at its classes';
 *   fit_from_trees(trees, X, y, sample_weight)
 *                            -> the fitted forest of those trees; with
 *                               oob_score=True and X, y given, its OOB
 *                               estimates as the ordinary fit makes them.
 */
#ifndef GSB_ENSEMBLE_FOREST_MERGE_H
#define GSB_ENSEMBLE_FOREST_MERGE_H

#include "core/estimator.h"

#define GSB__FOREST_MAGIC 4674390.0 /* 0x475356: 'G' 'S' 'V' */

/* The forest fitted in c (its new attributes inside a fit), packed (host). */
int gsb__forest_pack(gsb__ctx *c, gsb__tensor *out);
/* a's trees then b's, packed (host). */
int gsb__forest_concat(const gsb__tensor *a, const gsb__tensor *b, gsb__tensor *out);

int gsb__forest_export_method(gsb__ctx *c);
int gsb__forest_merge_method(gsb__ctx *c);
int gsb__forest_clf_fit_from_trees(gsb__ctx *c);
int gsb__forest_reg_fit_from_trees(gsb__ctx *c);

#endif
