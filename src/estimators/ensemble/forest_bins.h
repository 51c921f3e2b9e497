/*
 * forest_bins.h - the bins of a forest's features, computed once per fit.
 *
 * Each feature gets up to n_real bins from the float32 values of X (as
 * scikit-learn's trees see X): when it has at most n_real distinct values,
 * one bin per value, cut halfway between neighbours (a tree on such a
 * feature is then the exact tree); otherwise cuts at the n_real-quantiles
 * of a random subsample of rows (halfway between the order statistics
 * around each quantile, repeated cuts merged).  A value x is in bin
 * "number of edges < x", so a split between bins lo and hi can use any
 * threshold in [edge[lo], edge[hi - 1]] and sends the training rows the
 * same way as the bins did.
 */
#ifndef GSB_ENSEMBLE_FOREST_BINS_H
#define GSB_ENSEMBLE_FOREST_BINS_H

#include "core/rng.h"
#include "core/tensor.h"

/* Rows at most used for the quantiles of one feature. */
#define GSB__FOREST_BIN_SUBSAMPLE 200000

/*
 * edges (host, allocated here): X->cols x max(1, n_real - 1) GSB_F32, each
 * row ascending and padded with +inf.  X: host, float32 or float64; NaN
 * values are ignored.
 */
int gsb__forest_edges(const gsb__tensor *X, int n_real, gsb__rng *rng, gsb__tensor *edges);

/* A split's threshold between bins lo and hi (hi == n_real: +inf, every
 * value goes left) of a feature's edge row. */
float gsb__forest_threshold(const float *edge_row, int lo, int hi, int n_real);

/* Whether host tensor X holds a NaN. */
int gsb__forest_has_nan(const gsb__tensor *X);

#endif
