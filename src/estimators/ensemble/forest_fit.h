/*
 * forest_fit.h - fitting a random forest (RandomForestClassifier and
 * RandomForestRegressor share it): targets, scikit-learn's sample and class
 * weights folded into the bootstrap draw, the bins, the trees grown in
 * groups, the fitted arrays, OOB estimates, warm start.
 */
#ifndef GSB_ENSEMBLE_FOREST_FIT_H
#define GSB_ENSEMBLE_FOREST_FIT_H

#include "core/estimator.h"

/* The fit method of either forest (classify: 1 for the classifier). */
int gsb__forest_fit(gsb__ctx *c, int classify);

/* oob_score_ and oob_decision_function_ / oob_prediction_ of the trees
 * already fitted in c (their seeds give their bootstrap samples again) for
 * the inputs X, y, sample_weight of c, as gsb__forest_fit computes them. */
int gsb__forest_oob(gsb__ctx *c, int classify);

#endif
