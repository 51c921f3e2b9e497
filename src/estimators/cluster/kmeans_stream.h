/*
 * kmeans_stream.h - KMeans on a host X larger than the backend's memory
 * (estimators/common/stream.h): what kmeans.c's Lloyd loop asks of X, done
 * one batch at a time.  kmeans.c keeps the algorithm (initialisation,
 * relocation of empty clusters, the convergence tests); this keeps X.
 */
#ifndef GSB_KMEANS_STREAM_H
#define GSB_KMEANS_STREAM_H

#include "core/estimator.h"

typedef struct gsb__km_stream gsb__km_stream;

/*
 * Whether X (host, n x d) must stream on c->be for k clusters: if not,
 * *out = NULL and nothing else is done.  If so, one pass computes X's
 * column means (mean, d doubles, rounded to X's dtype: what the fit centres
 * X on) and variances (the scikit-learn tolerance: *tol_scaled = tol *
 * mean variance, 0 for tol 0), and *out is ready for Lloyd passes.  sw:
 * host float64 sample weights (n) or NULL.
 */
int gsb__km_stream_open(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *sw, int64_t k,
                        double tol, double *mean, double *tol_scaled, gsb__km_stream **out);
void gsb__km_stream_close(gsb__km_stream *ks);

/*
 * One pass against the centres C (k x d on the backend, X's dtype, centred
 * coordinates): the weighted inertia, each cluster's weighted sums (k x d)
 * and weights (k) as segment_sum gives them (summed over batches, float64),
 * and each row's label and squared distance (n each, host).  Batches and
 * their order are the same every pass, so equal labels give bitwise equal
 * sums (kmeans.c's convergence test relies on it).
 */
int gsb__km_stream_pass(gsb__km_stream *ks, const gsb__tensor *C, double *inertia,
                        double *sums, double *counts, int32_t *labels, double *mind);

/* Rows idx[0..m) of the centred X (host arithmetic, rounded to X's dtype as
 * the backend's centring rounds) into out (m x d doubles). */
int gsb__km_stream_rows(const gsb__km_stream *ks, const int64_t *idx, int64_t m, double *out);

/* The host X and weights k-means++ reads (it runs on the CPU backend: each
 * of its steps needs every row). */
const gsb__tensor *gsb__km_stream_host_X(const gsb__km_stream *ks);
const gsb__tensor *gsb__km_stream_host_w(const gsb__km_stream *ks);

#endif
