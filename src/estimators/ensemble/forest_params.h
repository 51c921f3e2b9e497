/*
 * forest_params.h - a random forest's parameters as a fit uses them: the
 * values scikit-learn resolves at fit (max_features, min_samples_* as
 * counts, the criterion, cuML's split_criterion), the parameter checks the
 * descriptor cannot express (an int range or a float range), and the
 * combinations scikit-learn refuses.
 */
#ifndef GSB_ENSEMBLE_FOREST_PARAMS_H
#define GSB_ENSEMBLE_FOREST_PARAMS_H

#include "core/estimator.h"
#include "estimators/ensemble/tree_grow.h"

/* cuML's split_criterion names, by its numbers 0 .. 6 */
extern const char *const gsb__forest_cuml_criteria[];

typedef struct gsb__forest_cfg {
    int classify, criterion, bootstrap, oob, warm_start, n_bins;
    int balanced_subsample;       /* class_weight='balanced_subsample' with bootstrap */
    int64_t n_estimators;
    gsb__grow_params grow;        /* criterion, depth, min_samples_*, features drawn */
    double min_weight_fraction;
    const json_t *max_samples;
} gsb__forest_cfg;

/* The parameters of c for a fit on n rows of F features, checked. */
int gsb__forest_read_cfg(gsb__ctx *c, int classify, int64_t n, int64_t F,
                         gsb__forest_cfg *cfg);

#endif
