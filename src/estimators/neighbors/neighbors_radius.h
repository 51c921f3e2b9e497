/*
 * neighbors_radius.h - what neighbors.c (the estimators' descriptors and
 * metric) and radius_neighbors.c (NearestNeighbors.radius_neighbors) share.
 */
#ifndef GSB_NEIGHBORS_RADIUS_H
#define GSB_NEIGHBORS_RADIUS_H

#include "core/estimator.h"

/* The metric the estimator's parameters ask for, as the ops compute it
 * (scikit-learn's effective_metric_); GSB_EUNSUPPORTED / GSB_EINVAL with
 * scikit-learn's words otherwise. */
int gsb__neighbors_metric(const gsb__ctx *c, gsb__metric *out);

/* The radius_neighbors method: fitted "_fit_X", optional query X. */
int gsb__neighbors_radius(gsb__ctx *c);

#endif
