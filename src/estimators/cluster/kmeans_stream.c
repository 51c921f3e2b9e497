/*
 * kmeans_stream.c - KMeans's X in batches (kmeans_stream.h).
 *
 * One stream over X and its weights serves every pass of the fit (X is
 * page-locked for it where the backend allows: a Lloyd fit reads it once per
 * iteration).  A pass centres each batch on the backend exactly as the
 * in-memory fit centres the whole X (col_affine in X's dtype), runs the same
 * E-step (argmin_sqdist) and M-step (segment_sum) on it, and adds the
 * batch's sums, weights and inertia into float64 accumulators with axpy, so
 * the only host waits are the batch's labels and distances coming back (the
 * relocation of empty clusters and labels_ need them on the host).
 */
#include "estimators/cluster/kmeans_stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimators/common/stream.h"

struct gsb__km_stream {
    gsb__ctx *c;
    const gsb__backend *be;
    const gsb__tensor *X, *w; /* host */
    int64_t k, d;
    gsb_dtype dtype;
    double *mean;             /* d, rounded to dtype */
    gsb__stream st;
    gsb__tensor mean_t;       /* d, dtype, on be: the centring */
    gsb__tensor Xc, labels, mind;             /* one batch's temporaries */
    gsb__tensor sums, counts, inertia;        /* the pass's accumulators (float64) */
    gsb__tensor bsums, bcounts, bmean;        /* one batch's */
    void *stage;              /* a batch of distances in X's dtype, host */
};

void gsb__km_stream_close(gsb__km_stream *ks)
{
    if (!ks)
        return;
    gsb__stream_close(&ks->st);
    gsb__tensor *t[] = {&ks->mean_t, &ks->Xc, &ks->labels, &ks->mind, &ks->sums,
                        &ks->counts, &ks->inertia, &ks->bsums, &ks->bcounts, &ks->bmean};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        gsb__tensor_free(t[i]);
    free(ks->mean);
    free(ks->stage);
    free(ks);
}

static gsb__tensor first_rows(const gsb__tensor *t, int64_t rows)
{
    gsb__tensor v = *t;
    v.rows = rows;
    v.owned = 0;
    return v;
}

/* The pass of column moments: the mean to centre on and the scaled tol. */
static int moments_pass(gsb__km_stream *ks, double tol, double *tol_scaled)
{
    gsb__moments m;
    GSB_TRY(gsb__moments_init(&m, ks->d, 0));
    int rc = GSB_OK;
    for (int more = 1; rc == GSB_OK && more;) {
        gsb__batch b;
        rc = gsb__stream_next(&ks->st, &b, &more);
        /* unweighted, as the in-memory fit's col_moments */
        if (rc == GSB_OK && more)
            rc = gsb__moments_add(ks->c, &m, &b.X, NULL, (double)b.rows);
    }
    if (rc == GSB_OK)
        rc = gsb__stream_rewind(&ks->st);
    double mean_var = 0;
    for (int64_t j = 0; rc == GSB_OK && j < ks->d; j++) {
        ks->mean[j] = ks->dtype == GSB_F32 ? (double)(float)m.mean[j] : m.mean[j];
        double v = m.m2[j] / m.wsum;
        mean_var += ks->dtype == GSB_F32 ? (double)(float)v : v;
    }
    *tol_scaled = tol == 0 ? 0 : tol * (mean_var / (double)ks->d);
    gsb__moments_free(&m);
    return rc;
}

/* The backend's buffers: centring, a batch's temporaries, the accumulators. */
static int buffers(gsb__km_stream *ks, int64_t batch_rows)
{
    const gsb__backend *be = ks->be;
    int64_t k = ks->k, d = ks->d;
    GSB_TRY(gsb__tensor_alloc(be, ks->dtype, d, 1, &ks->mean_t));
    double *tmp = malloc((size_t)d * gsb_dtype_size(ks->dtype));
    if (!tmp)
        return gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
    gsb__tensor mh = gsb__tensor_host_view(tmp, ks->dtype, d, 1);
    for (int64_t j = 0; j < d; j++)
        gsb__tensor_set(&mh, j, ks->mean[j]);
    int rc = be->ops->upload(be, &ks->mean_t, tmp);
    free(tmp);
    GSB_TRY(rc);
    GSB_TRY(gsb__tensor_alloc(be, ks->dtype, batch_rows, d, &ks->Xc));
    GSB_TRY(gsb__tensor_alloc(be, GSB_I32, batch_rows, 1, &ks->labels));
    GSB_TRY(gsb__tensor_alloc(be, ks->dtype, batch_rows, 1, &ks->mind));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, k, d, &ks->sums));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, k, 1, &ks->counts));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, 1, 1, &ks->inertia));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, k, d, &ks->bsums));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, k, 1, &ks->bcounts));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, 1, 1, &ks->bmean));
    ks->stage = malloc((size_t)batch_rows * gsb_dtype_size(ks->dtype));
    return ks->stage ? GSB_OK : gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
}

int gsb__km_stream_open(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *sw, int64_t k,
                        double tol, double *mean, double *tol_scaled, gsb__km_stream **out)
{
    *out = NULL;
    int64_t d = X->cols;
    size_t esize = gsb_dtype_size(X->dtype);
    gsb__stream_plan plan;
    /* in memory: X and its centred copy, and per row the label, the distance
     * and segment_sum's scratch (on a GPU the sorted labels and row indices
     * and the sort's workspace, ~32 bytes: a narrow X's copies alone would
     * leave too little room); streamed: centres and sums, and per row its
     * weight, the centred copy, the label, the distance and that scratch */
    const size_t row_extra = 4 + esize + 32;
    const double xrow = (double)(d > 0 ? d : 1) * (double)esize;
    GSB_TRY(gsb__stream_plan_for(c, X, 2.0 + (double)row_extra / xrow,
                                 (size_t)(4 * k * (d + 1)) * sizeof(double),
                                 (size_t)d * esize + row_extra + (sw ? 8 : 0), &plan));
    if (!plan.streamed)
        return GSB_OK;
    gsb__km_stream *ks = calloc(1, sizeof *ks);
    if (!ks)
        return gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
    ks->c = c;
    ks->be = c->be;
    ks->X = X;
    ks->w = sw;
    ks->k = k;
    ks->d = d;
    ks->dtype = X->dtype;
    ks->mean = calloc((size_t)(d > 0 ? d : 1), sizeof *ks->mean);
    int rc = ks->mean ? GSB_OK : gsb__err(GSB_ENOMEM, "KMeans: out of host memory");
    const gsb__tensor *extra[1] = {sw};
    if (rc == GSB_OK) /* many passes: X page-locked for the fit where possible */
        rc = gsb__stream_open(c, &plan, X, extra, 1, 2, &ks->st);
    if (rc == GSB_OK)
        rc = moments_pass(ks, tol, tol_scaled);
    if (rc == GSB_OK)
        rc = buffers(ks, plan.batch_rows);
    if (rc != GSB_OK) {
        gsb__km_stream_close(ks);
        return rc;
    }
    memcpy(mean, ks->mean, (size_t)d * sizeof *mean);
    *out = ks;
    return GSB_OK;
}

/* out[i] = the i-th of n values of float dtype dt at src, as doubles.  A
 * typed loop: it runs on the host between a batch's compute and the next
 * fill, so its time adds to every batch (gsb__tensor_get, a call and a
 * switch per element, took a sizeable share of a batch's copy time) */
static void widen(const void *src, gsb_dtype dt, int64_t n, double *out)
{
    if (dt == GSB_F32) {
        const float *f = src;
        for (int64_t i = 0; i < n; i++)
            out[i] = f[i];
    } else {
        memcpy(out, src, (size_t)n * sizeof *out);
    }
}

/* E-step and M-step of one batch, its sums added to the pass's. */
static int batch_step(gsb__km_stream *ks, const gsb__batch *b, const gsb__tensor *C, double wb,
                      int32_t *labels, double *mind)
{
    const gsb__backend *be = ks->be;
    gsb__tensor Xc = first_rows(&ks->Xc, b->rows), lab = first_rows(&ks->labels, b->rows),
                md = first_rows(&ks->mind, b->rows);
    const gsb__tensor *w = ks->w ? &b->extra[0] : NULL;
    GSB_TRY(be->ops->col_affine(be, &b->X, &ks->mean_t, NULL, NULL, &Xc));
    GSB_TRY(be->ops->argmin_sqdist(be, &Xc, C, &lab, &md));
    if (wb > 0) { /* a batch without weight adds no inertia (its mean is NaN) */
        GSB_TRY(be->ops->col_moments(be, &md, w, &ks->bmean, NULL));
        GSB_TRY(be->ops->axpy(be, wb, &ks->bmean, &ks->inertia));
    }
    GSB_TRY(be->ops->segment_sum(be, &Xc, &lab, w, &ks->bsums, &ks->bcounts));
    GSB_TRY(be->ops->axpy(be, 1.0, &ks->bsums, &ks->sums));
    GSB_TRY(be->ops->axpy(be, 1.0, &ks->bcounts, &ks->counts));
    GSB_TRY(be->ops->download(be, &lab, labels + b->first));
    GSB_TRY(be->ops->download(be, &md, ks->stage));
    widen(ks->stage, ks->dtype, b->rows, mind + b->first);
    return GSB_OK;
}

int gsb__km_stream_pass(gsb__km_stream *ks, const gsb__tensor *C, double *inertia,
                        double *sums, double *counts, int32_t *labels, double *mind)
{
    const gsb__backend *be = ks->be;
    GSB_TRY(gsb__stream_rewind(&ks->st));
    GSB_TRY(be->ops->fill(be, &ks->sums, 0.0));
    GSB_TRY(be->ops->fill(be, &ks->counts, 0.0));
    GSB_TRY(be->ops->fill(be, &ks->inertia, 0.0));
    for (int more = 1; more;) {
        gsb__batch b;
        GSB_TRY(gsb__stream_next(&ks->st, &b, &more));
        if (more)
            GSB_TRY(batch_step(ks, &b, C, gsb__stream_wsum(ks->w, b.first, b.rows), labels,
                               mind));
    }
    GSB_TRY(be->ops->download(be, &ks->inertia, inertia));
    GSB_TRY(be->ops->download(be, &ks->sums, sums));
    return be->ops->download(be, &ks->counts, counts);
}

int gsb__km_stream_rows(const gsb__km_stream *ks, const int64_t *idx, int64_t m, double *out)
{
    int64_t d = ks->d;
    for (int64_t j = 0; j < m; j++)
        for (int64_t f = 0; f < d; f++) {
            double v = gsb__tensor_get(ks->X, idx[j] * d + f) - ks->mean[f];
            out[j * d + f] = ks->dtype == GSB_F32 ? (double)(float)v : v;
        }
    return GSB_OK;
}

const gsb__tensor *gsb__km_stream_host_X(const gsb__km_stream *ks) { return ks->X; }
const gsb__tensor *gsb__km_stream_host_w(const gsb__km_stream *ks) { return ks->w; }
