/*
 * multidev.h - fits across the devices of a multi-device session
 * (devset.h): rows split across the ranks, each rank's partial statistics
 * (estimators/common/partial_stats.h) computed on its own device by the
 * estimator's stats method, combined by the session's communicator, and the
 * model finished from the combination by the estimator's fit_from_stats, as
 * the single-device and Dask fits finish it.  Exact (the statistics of the
 * concatenated rows up to rounding), not an average of per-device models.
 */
#ifndef GSB_MULTIDEV_MULTIDEV_H
#define GSB_MULTIDEV_MULTIDEV_H

#include "core/model.h"
#include "multidev/devset.h"

/*
 * Fit method md of m (inputs validated) across ds.  *handled = 1: the fit
 * ran (rc is its status); 0: the estimator or method has no multi-device
 * fit, a warning said so (once per estimator and session), and the caller
 * runs the ordinary fit on the first device.
 */
int gsb__multidev_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                      gsb__tensor *in, const json_t *options, gsb__nlist *out, int *handled);

/* The row range [*r0, *r1) of rank r when n rows are split over nranks
 * (the first n % nranks ranks take one more row; ranks past n take none). */
void gsb__multidev_split(int64_t n, int nranks, int r, int64_t *r0, int64_t *r1);

#endif
