/*
 * linear_common.c - the least-squares linear models' shared preparation,
 * coefficients and prediction (see linear_common.h).
 */
#include "estimators/linear_model/linear_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimators/common/stream.h"

/* ======================================================================
 * Host <-> backend helpers
 * ==================================================================== */

/* Allocate rows x cols of dtype on be and fill it from host doubles. */
int gsb__lin_upload_f64(const gsb__backend *be, gsb_dtype dtype, int64_t rows, int64_t cols,
                      const double *src, gsb__tensor *out)
{
    GSB_TRY(gsb__tensor_alloc(be, dtype, rows, cols, out));
    int rc;
    if (dtype == GSB_F64) {
        rc = be->ops->upload(be, out, src);
    } else {
        int64_t n = rows * cols;
        float *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
        if (!tmp) {
            gsb__tensor_free(out);
            return gsb__err(GSB_ENOMEM, "out of host memory");
        }
        for (int64_t i = 0; i < n; i++)
            tmp[i] = (float)src[i];
        rc = be->ops->upload(be, out, tmp);
        free(tmp);
    }
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

/* A malloc'ed array of doubles holding t (any backend, any dtype). */
int gsb__lin_download_f64(const gsb__tensor *t, double **out)
{
    *out = NULL;
    gsb__tensor h;
    GSB_TRY(gsb__tensor_to_host(t, &h));
    int64_t n = gsb__tensor_numel(t);
    double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    if (!d) {
        gsb__tensor_free(&h);
        return gsb__err(GSB_ENOMEM, "out of host memory");
    }
    for (int64_t i = 0; i < n; i++)
        d[i] = gsb__tensor_get(&h, i);
    gsb__tensor_free(&h);
    *out = d;
    return GSB_OK;
}

/* A host tensor of dtype with the given user-facing shape, filled from doubles. */
int gsb__lin_host_tensor(gsb_dtype dtype, int64_t rows, int64_t cols, int ndim, const double *src,
                       gsb__tensor *out)
{
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dtype, rows, cols, out));
    out->ndim = ndim;
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(out, i, src[i]);
    return GSB_OK;
}

/*
 * Multiply row i of T by s[i], in place.  There is no row-scaling op, so a
 * tensor off the host makes one round trip (the CPU backend works in place).
 */
static int scale_rows(const gsb__backend *be, gsb__tensor *T, const double *s)
{
    gsb__tensor h = *T;
    int rc = GSB_OK;
    if (T->be != gsb__cpu_backend())
        GSB_TRY(gsb__tensor_to_host(T, &h));
    int64_t cols = T->cols;
    for (int64_t i = 0; i < T->rows; i++)
        for (int64_t j = 0; j < cols; j++)
            gsb__tensor_set(&h, i * cols + j, gsb__tensor_get(&h, i * cols + j) * s[i]);
    if (T->be != gsb__cpu_backend()) {
        rc = be->ops->upload(be, T, h.data);
        gsb__tensor_free(&h);
    }
    return rc;
}

/* ======================================================================
 * Data preparation
 * ==================================================================== */

void gsb__lin_free(gsb__lin_data *d)
{
    gsb__tensor_free(&d->X);
    gsb__tensor_free(&d->Y);
    free(d->x_off);
    free(d->y_off);
    memset(d, 0, sizeof *d);
}

/* Weighted column means of T (on be) into a host array, rounded to T's dtype. */
static int col_means(const gsb__backend *be, const gsb__tensor *T, const gsb__tensor *w,
                     double **out)
{
    gsb__tensor mean = GSB__TENSOR_NONE;
    int rc;
    *out = NULL;
    GSB_CHECK(gsb__tensor_alloc(be, T->dtype, T->cols, 1, &mean));
    /* no variance: col_moments then skips its second pass over T */
    GSB_CHECK(be->ops->col_moments(be, T, w, &mean, NULL));
    rc = gsb__lin_download_f64(&mean, out);
done:
    gsb__tensor_free(&mean);
    return rc;
}

/* T (on be, owned) = src - off per column; off is a host array of src->cols. */
static int centred_copy(const gsb__backend *be, const gsb__tensor *src, const double *off,
                        gsb__tensor *out)
{
    gsb__tensor ob = GSB__TENSOR_NONE;
    int rc;
    *out = GSB__TENSOR_NONE;
    GSB_CHECK(gsb__tensor_alloc(be, src->dtype, src->rows, src->cols, out));
    if (off) {
        GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, src->cols, 1, off, &ob));
        GSB_CHECK(be->ops->col_affine(be, src, &ob, NULL, NULL, out));
    } else {
        GSB_CHECK(be->ops->copy(be, out, src));
    }
done:
    gsb__tensor_free(&ob);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

int gsb__lin_prepare(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y,
                     const gsb__tensor *w, int fit_intercept, int weights_to_n,
                     gsb__lin_data *d)
{
    gsb__tensor Xb = GSB__TENSOR_NONE, Yb = GSB__TENSOR_NONE, wb = GSB__TENSOR_NONE;
    double *sw = NULL;
    int rc = GSB_OK;
    memset(d, 0, sizeof *d);
    d->n = X->rows;
    d->p = X->cols;
    d->k = Y->cols;
    d->y_1d = Y->ndim < 2;
    d->dtype = X->dtype;
    if (w) {
        /* scikit-learn casts the weights to X's dtype and rejects all zeros */
        sw = malloc((size_t)d->n * sizeof *sw);
        if (!sw)
            return gsb__err(GSB_ENOMEM, "out of host memory");
        int nonzero = 0;
        for (int64_t i = 0; i < d->n; i++) {
            sw[i] = gsb__lin_round(d->dtype, gsb__tensor_get(w, i));
            nonzero |= sw[i] != 0;
        }
        if (!nonzero) {
            rc = gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero "
                                      "number.");
            goto done;
        }
        if (weights_to_n) {
            /* sw * (n / sum(sw)) in X's dtype, as ElasticNet.fit rescales them */
            double sum = 0;
            for (int64_t i = 0; i < d->n; i++)
                sum += sw[i];
            double scale = gsb__lin_round(d->dtype, (double)d->n / gsb__lin_round(d->dtype, sum));
            for (int64_t i = 0; i < d->n; i++)
                sw[i] = gsb__lin_round(d->dtype, sw[i] * scale);
        }
        GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, d->n, 1, sw, &wb));
    }
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    GSB_CHECK(gsb__tensor_to(be, Y, &Yb));
    d->x_off = calloc((size_t)d->p, sizeof *d->x_off);
    d->y_off = calloc((size_t)d->k, sizeof *d->y_off);
    if (!d->x_off || !d->y_off) {
        rc = gsb__err(GSB_ENOMEM, "out of host memory");
        goto done;
    }
    if (fit_intercept) {
        free(d->x_off);
        free(d->y_off);
        d->x_off = d->y_off = NULL;
        GSB_CHECK(col_means(be, &Xb, w ? &wb : NULL, &d->x_off));
        GSB_CHECK(col_means(be, &Yb, w ? &wb : NULL, &d->y_off));
    }
    /* owned copies: the solvers may not touch the caller's arrays */
    GSB_CHECK(centred_copy(be, &Xb, fit_intercept ? d->x_off : NULL, &d->X));
    GSB_CHECK(centred_copy(be, &Yb, fit_intercept ? d->y_off : NULL, &d->Y));
    if (w) {
        for (int64_t i = 0; i < d->n; i++)
            sw[i] = sqrt(sw[i]);
        GSB_CHECK(scale_rows(be, &d->X, sw));
        GSB_CHECK(scale_rows(be, &d->Y, sw));
    }
done:
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Yb);
    gsb__tensor_free(&wb);
    free(sw);
    if (rc != GSB_OK)
        gsb__lin_free(d);
    return rc;
}

/*
 * Store coef_ (host k x p doubles, row t = target t) in coef_dtype and the
 * intercept y_off - x_off @ coef_.  coef_ is (p,) when coef_1d, else (k, p);
 * intercept_ is a scalar for 1-D y, else (k,).  Without fit_intercept,
 * intercept_ is the float 0.0, as in scikit-learn.
 */
int gsb__lin_store(gsb__ctx *c, const gsb__lin_data *d, const double *coef, gsb_dtype coef_dtype,
                     int fit_intercept, int coef_1d)
{
    gsb__tensor t;
    if (coef_1d)
        GSB_TRY(gsb__lin_host_tensor(coef_dtype, d->p, 1, 1, coef, &t));
    else
        GSB_TRY(gsb__lin_host_tensor(coef_dtype, d->k, d->p, 2, coef, &t));
    GSB_TRY(gsb__fit_set(c, "coef_", &t));
    if (!fit_intercept)
        return gsb__fit_set_scalar(c, "intercept_", 0.0, GSB_F64);
    double *b = malloc((size_t)d->k * sizeof *b);
    if (!b)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    for (int64_t j = 0; j < d->k; j++) {
        double s = 0;
        for (int64_t i = 0; i < d->p; i++)
            s += d->x_off[i] * gsb__lin_round(coef_dtype, coef[j * d->p + i]);
        b[j] = d->y_off[j] - s;
    }
    int rc = d->y_1d ? gsb__lin_host_tensor(d->dtype, 1, 1, 0, b, &t)
                     : gsb__lin_host_tensor(d->dtype, d->k, 1, 1, b, &t);
    free(b);
    GSB_TRY(rc);
    return gsb__fit_set(c, "intercept_", &t);
}

/* ======================================================================
 * Prediction
 * ==================================================================== */

/* X @ coef_.T + intercept_ for X on any backend: a new (n x k) tensor on c->be. */
static int predict_rows(gsb__ctx *c, const gsb__tensor *X, void *arg, gsb__tensor *out)
{
    (void)arg;
    const gsb__backend *be = c->be;
    const gsb__tensor *coef, *icpt;
    int64_t n = X->rows, p = X->cols;
    *out = GSB__TENSOR_NONE;
    GSB_TRY(gsb__attr_need(c, "coef_", 0, -1, -1, &coef));
    int coef_1d = coef->ndim < 2;
    int64_t k = coef_1d ? 1 : coef->rows;
    if (gsb__tensor_numel(coef) != k * p)
        return gsb__attr_need(c, "coef_", 0, p, 1, &coef); /* reports the bad shape */
    GSB_TRY(gsb__attr_need(c, "intercept_", 0, -1, -1, &icpt));
    int64_t ni = gsb__tensor_numel(icpt);
    if (ni != 1 && ni != k)
        return gsb__attr_need(c, "intercept_", 0, k, 1, &icpt);

    gsb_dtype odt = gsb__lin_predict_dtype(X->dtype, coef->dtype);
    gsb__tensor cview = *coef;
    cview.rows = k;
    cview.cols = p;
    cview.ndim = 2;
    gsb__tensor Xb = GSB__TENSOR_NONE, Cb = GSB__TENSOR_NONE, Ib = GSB__TENSOR_NONE;
    double *b = malloc((size_t)k * sizeof *b);
    int rc, any = 0;
    if (!b)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    for (int64_t j = 0; j < k; j++) {
        b[j] = gsb__tensor_get(icpt, ni == 1 ? 0 : j);
        any |= b[j] != 0;
    }
    GSB_CHECK(gsb__tensor_to_dtype(be, X, odt, &Xb));
    GSB_CHECK(gsb__tensor_to_dtype(be, &cview, odt, &Cb));
    GSB_CHECK(gsb__tensor_alloc(be, odt, n, k, out));
    GSB_CHECK(be->ops->gemm(be, 0, 1, 1.0, &Xb, &Cb, 0.0, out));
    if (any) {
        GSB_CHECK(gsb__lin_upload_f64(be, GSB_F64, k, 1, b, &Ib));
        GSB_CHECK(be->ops->col_affine(be, out, NULL, NULL, &Ib, out));
    }
done:
    free(b);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Cb);
    gsb__tensor_free(&Ib);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

int gsb__lin_predict(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *coef;
    GSB_TRY(gsb__attr_need(c, "coef_", 0, -1, -1, &coef));
    int coef_1d = coef->ndim < 2;
    int64_t k = coef_1d ? 1 : coef->rows;
    gsb_dtype odt = gsb__lin_predict_dtype(X->dtype, coef->dtype);
    gsb__tensor out = GSB__TENSOR_NONE;
    gsb__stream_plan plan;
    /* an X larger than the backend's memory is predicted batch by batch */
    GSB_TRY(gsb__stream_plan_for(c, X, 1.0, (size_t)gsb__tensor_numel(coef) * 8,
                                 (size_t)k * gsb_dtype_size(odt) +
                                     (odt != X->dtype ? (size_t)X->cols * 8 : 0),
                                 &plan));
    if (plan.streamed)
        GSB_TRY(gsb__stream_map(c, &plan, X, predict_rows, NULL, odt, k, &out));
    else
        GSB_TRY(predict_rows(c, X, NULL, &out));
    if (coef_1d)
        gsb__tensor_as_1d(&out);
    int rc = gsb__out(c, "y", &out);
    gsb__tensor_free(&out);
    return rc;
}
