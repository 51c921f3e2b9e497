/*
 * preprocessing.c - StandardScaler, MinMaxScaler and LabelEncoder
 * (scikit-learn's sklearn.preprocessing).
 *
 * The scalers reduce X column-wise through the backend (col_moments,
 * col_minmax) and apply themselves with col_affine / clip; the per-feature
 * statistics are small and are finished on the host.  LabelEncoder works on
 * 1-D label vectors on the host (sorting and binary search).
 *
 * The scalers' partial_fit update the fitted statistics with a batch as
 * scikit-learn does: StandardScaler merges the batch's count, mean and
 * centred sum of squares into the running ones (Chan, Golub and LeVeque's
 * pairwise update, scikit-learn's _incremental_mean_and_var, weighted by
 * sample_weight), MinMaxScaler keeps the running minimum and maximum.
 *
 * Deliberate differences from scikit-learn, all at the engine boundary:
 *  - NaN in X is rejected by the input validation ("Input X contains NaN"),
 *    where scikit-learn's scalers ignore NaNs in fit and keep them in
 *    transform.
 *  - LabelEncoder labels travel as float64 (classes_ is float64 always), so
 *    messages print the values the way numpy prints float64 labels (codes
 *    given to inverse_transform print as integers when they all are).
 *  - fit's ignored y, when given, is still checked like any y (rows, finite).
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/estimator.h"
#include "estimators/common/partial_stats.h"
#include "estimators/common/stream.h"

/* ======================================================================
 * Small helpers
 * ==================================================================== */

/* Python's repr() of a float: shortest round-trip digits, "1.0", "1e-05". */
static void py_float_repr(double v, char *buf, size_t n)
{
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v < 0 ? "-inf" : "inf");
        return;
    }
    char e[64];
    for (int prec = 0; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, v);
        if (strtod(e, NULL) == v)
            break;
    }
    /* e is "[-]d[.ddd]e[+-]xx": split it into sign, digits and exponent */
    const char *p = e;
    int neg = *p == '-';
    if (neg)
        p++;
    char digs[32];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digs[nd++] = *p;
    digs[nd] = '\0';
    int ex = atoi(p + 1);
    char out[96];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (ex >= -4 && ex < 16) {
        if (ex >= 0) {
            for (int i = 0; i <= ex; i++)
                out[o++] = i < nd ? digs[i] : '0';
            out[o++] = '.';
            if (nd > ex + 1)
                for (int i = ex + 1; i < nd; i++)
                    out[o++] = digs[i];
            else
                out[o++] = '0';
        } else {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -ex - 1; i++)
                out[o++] = '0';
            for (int i = 0; i < nd; i++)
                out[o++] = digs[i];
        }
        out[o] = '\0';
    } else {
        out[o++] = digs[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++)
                out[o++] = digs[i];
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
    snprintf(buf, n, "%s", out);
}

/* A JSON number as Python prints it: ints plainly, reals with repr(). */
static void py_number_repr(const json_t *v, char *buf, size_t n)
{
    if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else
        py_float_repr(json_number_value(v), buf, n);
}

/* Round v to the precision of dtype, so host arithmetic matches numpy's float32. */
static double round_to(gsb_dtype dtype, double v) { return dtype == GSB_F32 ? (double)(float)v : v; }

static double dtype_eps(gsb_dtype dtype) { return dtype == GSB_F32 ? FLT_EPSILON : DBL_EPSILON; }

/* A host float64 1-D tensor of n elements (contents undefined). */
static int host_vec(int64_t n, gsb__tensor *t)
{
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, 1, t));
    t->ndim = 1;
    return GSB_OK;
}

/* out = affine(X) computed on the backend; sub/mul/add are host vectors or NULL. */
static int apply_affine(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *sub,
                        const gsb__tensor *mul, const gsb__tensor *add, int clip, double lo,
                        double hi)
{
    const gsb__backend *be = c->be;
    gsb__tensor Xb = GSB__TENSOR_NONE, out = GSB__TENSOR_NONE;
    gsb__tensor vb[3] = {GSB__TENSOR_NONE, GSB__TENSOR_NONE, GSB__TENSOR_NONE};
    const gsb__tensor *vh[3] = {sub, mul, add};
    int rc;
    for (int k = 0; k < 3; k++)
        if (vh[k])
            GSB_CHECK(gsb__tensor_to(be, vh[k], &vb[k]));
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, X->rows, X->cols, &out));
    GSB_CHECK(be->ops->col_affine(be, &Xb, sub ? &vb[0] : NULL, mul ? &vb[1] : NULL,
                                  add ? &vb[2] : NULL, &out));
    if (clip)
        GSB_CHECK(be->ops->clip(be, &out, lo, hi));
    rc = gsb__out(c, "X", &out);
done:
    gsb__tensor_free(&out);
    gsb__tensor_free(&Xb);
    for (int k = 0; k < 3; k++)
        gsb__tensor_free(&vb[k]);
    return rc;
}

/* ======================================================================
 * StandardScaler
 * ==================================================================== */

static const gsb__param_desc ss_params[] = {
    {"copy", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "accepted for compatibility: inputs are never modified in place"},
    {"with_mean", GSB__P_BOOL, "true", 0, 0, 0, NULL, "centre the data before scaling"},
    {"with_std", GSB__P_BOOL, "true", 0, 0, 0, NULL, "scale the data to unit variance"},
    {0}};

/*
 * Sample weights as scikit-learn sees them: cast to X's dtype (so float32 X
 * rounds them), and not all zero.  *sum gets their total.
 */
static int ss_weights(const gsb__tensor *w, gsb_dtype xdtype, gsb__tensor *out, double *sum)
{
    int64_t n = w->rows;
    GSB_TRY(host_vec(n, out));
    double *o = out->data, s = 0;
    int nonzero = 0;
    for (int64_t i = 0; i < n; i++) {
        o[i] = round_to(xdtype, gsb__tensor_get(w, i));
        s += o[i];
        nonzero |= o[i] != 0;
    }
    *sum = s;
    if (!nonzero) {
        gsb__tensor_free(out);
        return gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero number.");
    }
    return GSB_OK;
}

/* The streamed moments as ss_moments' mean and population variance (sm freed). */
static int ss_streamed_moments(gsb__moments *sm, gsb__tensor *mean, gsb__tensor *var)
{
    int64_t d = sm->d;
    int rc = host_vec(d, mean);
    if (rc == GSB_OK)
        rc = host_vec(d, var);
    if (rc == GSB_OK)
        for (int64_t j = 0; j < d; j++) {
            ((double *)mean->data)[j] = sm->mean[j];
            ((double *)var->data)[j] = sm->m2[j] / sm->wsum;
        }
    if (rc != GSB_OK) {
        gsb__tensor_free(mean);
        gsb__tensor_free(var);
    }
    gsb__moments_free(sm);
    return rc;
}

/*
 * Mean and population variance per column in float64 whatever X's dtype:
 * scikit-learn accumulates these in float64 and stores float64 mean_/var_.
 * col_moments accumulates in double and writes float64 outputs for float32
 * X directly, so X is never widened (no copy of the data).
 */
static int ss_moments(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *w,
                      gsb__tensor *mean, gsb__tensor *var)
{
    const gsb__backend *be = c->be;
    gsb__tensor Xb = GSB__TENSOR_NONE, wb = GSB__TENSOR_NONE;
    gsb__tensor mb = GSB__TENSOR_NONE, vb = GSB__TENSOR_NONE;
    int rc, streamed;
    *mean = *var = GSB__TENSOR_NONE;
    gsb__moments sm;
    GSB_TRY(gsb__stream_col_moments(c, X, w, 0, &sm, &streamed));
    if (streamed) /* X larger than the backend's memory: read in batches */
        return ss_streamed_moments(&sm, mean, var);
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    if (w)
        GSB_CHECK(gsb__tensor_to(be, w, &wb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, X->cols, 1, &mb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, X->cols, 1, &vb));
    GSB_CHECK(be->ops->col_moments(be, &Xb, w ? &wb : NULL, &mb, &vb));
    GSB_CHECK(gsb__tensor_to_host(&mb, mean));
    rc = gsb__tensor_to_host(&vb, var);
    if (rc != GSB_OK)
        gsb__tensor_free(mean);
    mean->ndim = var->ndim = 1;
done:
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&wb);
    gsb__tensor_free(&mb);
    gsb__tensor_free(&vb);
    return rc;
}

/* scale_ from var_: sqrt, or 1 for a feature whose variance is within the
 * rounding error of the two-pass algorithm (scikit-learn's _is_constant_feature
 * and _handle_zeros_in_scale). */
static int ss_scale(const gsb__tensor *mean, const gsb__tensor *var, double n_seen,
                    gsb__tensor *scale)
{
    int64_t d = var->rows;
    GSB_TRY(host_vec(d, scale));
    const double *mu = mean->data, *v = var->data;
    double *s = scale->data;
    for (int64_t j = 0; j < d; j++) {
        double bound = n_seen * DBL_EPSILON * v[j] +
                       (n_seen * mu[j] * DBL_EPSILON) * (n_seen * mu[j] * DBL_EPSILON);
        s[j] = v[j] <= bound ? 1.0 : sqrt(v[j]);
    }
    return GSB_OK;
}

static int ss_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *w = gsb__in(c, "sample_weight");
    int with_mean = gsb__param_bool(c->params, "with_mean");
    int with_std = gsb__param_bool(c->params, "with_std");
    int64_t n = X->rows;
    gsb__tensor wt = GSB__TENSOR_NONE, mean = GSB__TENSOR_NONE, var = GSB__TENSOR_NONE;
    gsb__tensor scale = GSB__TENSOR_NONE;
    double n_seen = (double)n;
    int rc;
    if (w)
        GSB_CHECK(ss_weights(w, X->dtype, &wt, &n_seen));
    if (!with_mean && !with_std) {
        /* scikit-learn only counts rows here (ignoring the weights); the count is
         * int64, or X's dtype when weights were given */
        rc = gsb__fit_set_scalar(c, "n_samples_seen_", (double)n, w ? X->dtype : GSB_I64);
        goto done;
    }
    GSB_CHECK(ss_moments(c, X, w ? &wt : NULL, &mean, &var));
    if (with_std) {
        GSB_CHECK(ss_scale(&mean, &var, n_seen, &scale));
        GSB_CHECK(gsb__fit_set(c, "var_", &var));
        GSB_CHECK(gsb__fit_set(c, "scale_", &scale));
    }
    /* mean_ is kept when only with_std is set, exactly as scikit-learn does */
    GSB_CHECK(gsb__fit_set(c, "mean_", &mean));
    rc = gsb__fit_set_scalar(c, "n_samples_seen_", n_seen, GSB_F64);
done:
    gsb__tensor_free(&wt);
    gsb__tensor_free(&mean);
    gsb__tensor_free(&var);
    gsb__tensor_free(&scale);
    return rc;
}

/*
 * The running statistics before a partial_fit batch, as scikit-learn reads
 * them: the count cast to the batch's count dtype (int64 without weights,
 * so a fractional count from weighted batches is truncated; X's dtype with
 * them), and mean_ / var_ (0 on the first batch or where absent).
 */
static double ss_last_count(gsb__ctx *c, int weighted, gsb_dtype xdtype)
{
    const gsb__tensor *seen = gsb__attr(c, "n_samples_seen_");
    if (!seen || seen->rows * seen->cols < 1)
        return 0;
    double v = gsb__tensor_get(seen, 0);
    return weighted ? round_to(xdtype, v) : trunc(v);
}

static double ss_last(const gsb__tensor *t, int64_t j)
{
    return t ? ((const double *)t->data)[j] : 0.0;
}

/*
 * Merge a batch (count m, mean bm, population variance bv per column) into
 * the running count n, mean_ and var_ (scikit-learn's _incremental_mean_and_var:
 * sums and unnormalised variances, with the correction term
 * n / m / (n + m) * (n mean - m bm)^2 * ... written as it writes it).
 */
static void ss_merge(double n, const gsb__tensor *lm, const gsb__tensor *lv, double m,
                     const double *bm, const double *bv, int64_t d, double *mean, double *var)
{
    double total = n + m;
    for (int64_t j = 0; j < d; j++) {
        double last_sum = ss_last(lm, j) * n, new_sum = bm[j] * m;
        mean[j] = (last_sum + new_sum) / total;
        if (!var)
            continue;
        double new_unnorm = bv[j] * m;
        if (n == 0) {
            var[j] = new_unnorm / total;
            continue;
        }
        double ratio = n / m, diff = last_sum / ratio - new_sum;
        var[j] = (ss_last(lv, j) * n + new_unnorm + ratio / total * diff * diff) / total;
    }
}

/* partial_fit: the fitted statistics updated with the batch X (and weights). */
static int ss_partial_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *w = gsb__in(c, "sample_weight");
    int with_mean = gsb__param_bool(c->params, "with_mean");
    int with_std = gsb__param_bool(c->params, "with_std");
    int64_t n = X->rows, d = X->cols;
    gsb__tensor wt = GSB__TENSOR_NONE, bm = GSB__TENSOR_NONE, bv = GSB__TENSOR_NONE,
                mean = GSB__TENSOR_NONE, var = GSB__TENSOR_NONE, scale = GSB__TENSOR_NONE;
    double m = (double)n, last = ss_last_count(c, w != NULL, X->dtype);
    int rc;
    if (w)
        GSB_CHECK(ss_weights(w, X->dtype, &wt, &m));
    if (!with_mean && !with_std) { /* rows are counted, weights or not */
        rc = gsb__fit_set_scalar(c, "n_samples_seen_", last + (double)n, w ? X->dtype : GSB_I64);
        goto done;
    }
    const gsb__tensor *lm = gsb__attr(c, "mean_"), *lv = gsb__attr(c, "var_");
    if ((lm && (lm->dtype != GSB_F64 || lm->rows * lm->cols != d)) ||
        (lv && (lv->dtype != GSB_F64 || lv->rows * lv->cols != d))) {
        rc = gsb__err(GSB_ECORRUPT, "StandardScaler: fitted attribute 'mean_' or 'var_' is "
                      "malformed (was the model imported from a damaged blob?)");
        goto done;
    }
    if (last == 0)
        lm = lv = NULL;
    GSB_CHECK(ss_moments(c, X, w ? &wt : NULL, &bm, &bv));
    GSB_CHECK(host_vec(d, &mean));
    if (with_std)
        GSB_CHECK(host_vec(d, &var));
    ss_merge(last, lm, lv, m, bm.data, bv.data, d, mean.data, with_std ? var.data : NULL);
    if (with_std) {
        GSB_CHECK(ss_scale(&mean, &var, last + m, &scale));
        GSB_CHECK(gsb__fit_set(c, "var_", &var));
        GSB_CHECK(gsb__fit_set(c, "scale_", &scale));
    }
    GSB_CHECK(gsb__fit_set(c, "mean_", &mean));
    rc = gsb__fit_set_scalar(c, "n_samples_seen_", last + m, GSB_F64);
done:
    gsb__tensor_free(&wt);
    gsb__tensor_free(&bm);
    gsb__tensor_free(&bv);
    gsb__tensor_free(&mean);
    gsb__tensor_free(&var);
    gsb__tensor_free(&scale);
    return rc;
}

/* fit from merged MOMENTS statistics (partial_stats.h): what fit computes on
 * the concatenated partitions; option "weighted" as fit's sample_weight. */
int gsb__scaler_fit_from_stats(gsb__ctx *c)
{
    gsb__stats st;
    GSB_TRY(gsb__stats_parse(gsb__in(c, "stats"), GSB__STATS_MOMENTS, &st));
    int64_t d = st.a;
    const double *v = st.v;
    int weighted = gsb__opt_bool(c, "weighted", 0);
    GSB_TRY(gsb__fit_set_scalar(c, "n_features_in_", (double)d, GSB_I64));
    if (!gsb__param_bool(c->params, "with_mean") && !gsb__param_bool(c->params, "with_std"))
        return gsb__fit_set_scalar(c, "n_samples_seen_", v[1], weighted ? GSB_F64 : GSB_I64);
    if (!(v[0] > 0))
        return gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero number.");
    gsb__tensor mean = GSB__TENSOR_NONE, var = GSB__TENSOR_NONE, scale = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(host_vec(d, &mean));
    GSB_CHECK(host_vec(d, &var));
    for (int64_t j = 0; j < d; j++) {
        ((double *)mean.data)[j] = v[2 + j];
        ((double *)var.data)[j] = v[2 + d + j] / v[0];
    }
    if (gsb__param_bool(c->params, "with_std")) {
        GSB_CHECK(ss_scale(&mean, &var, v[0], &scale));
        GSB_CHECK(gsb__fit_set(c, "var_", &var));
        GSB_CHECK(gsb__fit_set(c, "scale_", &scale));
    }
    GSB_CHECK(gsb__fit_set(c, "mean_", &mean));
    rc = gsb__fit_set_scalar(c, "n_samples_seen_", v[0], GSB_F64);
done:
    gsb__tensor_free(&mean);
    gsb__tensor_free(&var);
    gsb__tensor_free(&scale);
    return rc;
}

/* transform: (X - mean_) / scale_; inverse: X * scale_ + mean_ (each part per flag). */
static int ss_apply(gsb__ctx *c, int inverse)
{
    const gsb__tensor *X = gsb__in(c, "X"), *mean = NULL, *scale = NULL;
    int64_t d = X->cols;
    if (gsb__param_bool(c->params, "with_mean"))
        GSB_TRY(gsb__attr_need(c, "mean_", GSB_F64, d, 1, &mean));
    if (gsb__param_bool(c->params, "with_std"))
        GSB_TRY(gsb__attr_need(c, "scale_", GSB_F64, d, 1, &scale));
    if (inverse)
        return apply_affine(c, X, NULL, scale, mean, 0, 0, 0);
    gsb__tensor inv = GSB__TENSOR_NONE;
    if (scale) {
        GSB_TRY(host_vec(d, &inv));
        for (int64_t j = 0; j < d; j++)
            ((double *)inv.data)[j] = 1.0 / ((const double *)scale->data)[j];
    }
    int rc = apply_affine(c, X, mean, scale ? &inv : NULL, NULL, 0, 0, 0);
    gsb__tensor_free(&inv);
    return rc;
}

static int ss_transform(gsb__ctx *c) { return ss_apply(c, 0); }
static int ss_inverse_transform(gsb__ctx *c) { return ss_apply(c, 1); }

static const gsb__method_desc ss_methods[] = {
    /* y is accepted and ignored, so fit(X, y, sample_weight) lines up as in scikit-learn */
    {"fit", ss_fit,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}, {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     1, "compute the per-feature mean and standard deviation (y is ignored)"},
    {"partial_fit", ss_partial_fit,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_SAME_FEATURES | GSB__IN_STREAM},
      {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     1, "update the mean and variance with a batch (incremental, as scikit-learn; y is "
        "ignored)"},
    {"transform", ss_transform, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0, "standardize X (result \"X\")"},
    {"inverse_transform", ss_inverse_transform, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0,
     "scale back to the original representation (result \"X\")"},
    GSB__STATS_MOMENTS_ROW, GSB__STATS_MERGE_ROW,
    GSB__FIT_FROM_STATS_ROW(gsb__scaler_fit_from_stats, "moments"),
    {0}};

static const gsb__attr_desc ss_attrs[] = {
    {"mean_", "per-feature mean, float64 (absent when with_mean and with_std are both false)"},
    {"var_", "per-feature population variance, float64 (absent when with_std is false)"},
    {"scale_", "per-feature scale (std, 1 for constant features), float64 (absent when "
               "with_std is false)"},
    {"n_samples_seen_", "samples seen: float64 (sum of weights when weighted), int64 when "
                        "with_mean and with_std are both false"},
    {"n_features_in_", "number of features seen during fit"},
    {0}};

const gsb__estimator_desc gsb__est_StandardScaler = {
    "StandardScaler", "preprocessing", GSB__KIND_TRANSFORMER, ss_params, ss_methods, ss_attrs,
    "Standardize features by removing the mean and scaling to unit variance."};

/* ======================================================================
 * MinMaxScaler
 * ==================================================================== */

static const gsb__param_desc mm_params[] = {
    {"feature_range", GSB__P_PAIR, "[0, 1]", 0, 0, 0, NULL,
     "desired range (min, max) of the transformed data"},
    {"copy", GSB__P_BOOL, "true", 0, 0, 0, NULL,
     "accepted for compatibility: inputs are never modified in place"},
    {"clip", GSB__P_BOOL, "false", 0, 0, 0, NULL,
     "clip transformed values of held-out data to feature_range"},
    {0}};

static void mm_range(const json_t *params, double *lo, double *hi)
{
    const json_t *fr = json_object_get(params, "feature_range");
    *lo = json_number_value(json_array_get(fr, 0));
    *hi = json_number_value(json_array_get(fr, 1));
}

static int mm_check_range(gsb__ctx *c, double lo, double hi)
{
    if (lo < hi)
        return GSB_OK;
    const json_t *fr = json_object_get(c->params, "feature_range");
    char a[48], b[48];
    py_number_repr(json_array_get(fr, 0), a, sizeof a);
    py_number_repr(json_array_get(fr, 1), b, sizeof b);
    return gsb__err(GSB_EINVAL,
                    "Minimum of desired feature range must be smaller than maximum. "
                    "Got (%s, %s).",
                    a, b);
}

/* Per-column minimum and maximum of X (host copies, X's dtype). */
static int mm_batch(gsb__ctx *c, const gsb__tensor *X, gsb__tensor *mn, gsb__tensor *mx)
{
    const gsb__backend *be = c->be;
    gsb__tensor Xb = GSB__TENSOR_NONE, mnb = GSB__TENSOR_NONE, mxb = GSB__TENSOR_NONE;
    int rc, streamed;
    *mn = *mx = GSB__TENSOR_NONE;
    gsb__moments sm;
    GSB_TRY(gsb__stream_col_moments(c, X, NULL, 1, &sm, &streamed));
    if (streamed) { /* X larger than the backend's memory: read in batches */
        rc = gsb__tensor_alloc(gsb__cpu_backend(), X->dtype, X->cols, 1, mn);
        if (rc == GSB_OK)
            rc = gsb__tensor_alloc(gsb__cpu_backend(), X->dtype, X->cols, 1, mx);
        for (int64_t j = 0; rc == GSB_OK && j < X->cols; j++) {
            gsb__tensor_set(mn, j, sm.min[j]);
            gsb__tensor_set(mx, j, sm.max[j]);
        }
        gsb__moments_free(&sm);
        goto done;
    }
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, X->cols, 1, &mnb));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, X->cols, 1, &mxb));
    GSB_CHECK(be->ops->col_minmax(be, &Xb, &mnb, &mxb));
    GSB_CHECK(gsb__tensor_to_host(&mnb, mn));
    rc = gsb__tensor_to_host(&mxb, mx);
done:
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&mnb);
    gsb__tensor_free(&mxb);
    if (rc != GSB_OK) {
        gsb__tensor_free(mn);
        gsb__tensor_free(mx);
    }
    return rc;
}

/*
 * The fitted attributes from data_min_ / data_max_ (host, dtype dt, taken
 * over) and the samples seen: every step rounded to dt, as numpy evaluates
 * it in that dtype.
 */
static int mm_store(gsb__ctx *c, gsb__tensor *mn, gsb__tensor *mx, int64_t seen)
{
    gsb_dtype dt = mn->dtype;
    int64_t d = mn->rows;
    double lo, hi;
    mm_range(c->params, &lo, &hi);
    gsb__tensor range = GSB__TENSOR_NONE, scale = GSB__TENSOR_NONE, min_ = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), dt, d, 1, &range));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), dt, d, 1, &scale));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), dt, d, 1, &min_));
    double flo = round_to(dt, lo), fhi = round_to(dt, hi), width = round_to(dt, fhi - flo);
    for (int64_t j = 0; j < d; j++) {
        double a = gsb__tensor_get(mn, j), b = gsb__tensor_get(mx, j);
        double r = round_to(dt, b - a);
        /* _handle_zeros_in_scale: a (near) constant feature is not rescaled */
        double rz = r < 10 * dtype_eps(dt) ? 1.0 : r;
        double s = round_to(dt, width / rz);
        gsb__tensor_set(&range, j, r);
        gsb__tensor_set(&scale, j, s);
        gsb__tensor_set(&min_, j, round_to(dt, flo - round_to(dt, a * s)));
    }
    mn->ndim = mx->ndim = range.ndim = scale.ndim = min_.ndim = 1;
    GSB_CHECK(gsb__fit_set_scalar(c, "n_samples_seen_", (double)seen, GSB_I64));
    GSB_CHECK(gsb__fit_set(c, "scale_", &scale));
    GSB_CHECK(gsb__fit_set(c, "min_", &min_));
    GSB_CHECK(gsb__fit_set(c, "data_min_", mn));
    GSB_CHECK(gsb__fit_set(c, "data_max_", mx));
    rc = gsb__fit_set(c, "data_range_", &range);
done:
    gsb__tensor_free(&range);
    gsb__tensor_free(&scale);
    gsb__tensor_free(&min_);
    return rc;
}

static int mm_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X");
    double lo, hi;
    mm_range(c->params, &lo, &hi);
    GSB_TRY(mm_check_range(c, lo, hi));
    gsb__tensor mn, mx;
    GSB_TRY(mm_batch(c, X, &mn, &mx));
    int rc = mm_store(c, &mn, &mx, X->rows);
    gsb__tensor_free(&mn);
    gsb__tensor_free(&mx);
    return rc;
}

/* fit from merged MOMENTS statistics (partial_stats.h): the minimum and
 * maximum of the concatenated partitions (multi-device fits, multidev/);
 * option "dtype" ("float32" | "float64") is X's. */
static int mm_fit_from_stats(gsb__ctx *c)
{
    gsb__stats st;
    GSB_TRY(gsb__stats_parse(gsb__in(c, "stats"), GSB__STATS_MOMENTS, &st));
    double lo, hi;
    mm_range(c->params, &lo, &hi);
    GSB_TRY(mm_check_range(c, lo, hi));
    const char *dts = json_string_value(json_object_get(c->options, "dtype"));
    gsb_dtype dt = dts && strcmp(dts, "float32") == 0 ? GSB_F32 : GSB_F64;
    int64_t d = st.a;
    gsb__tensor mn = GSB__TENSOR_NONE, mx = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), dt, d, 1, &mn));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), dt, d, 1, &mx));
    for (int64_t j = 0; j < d; j++) { /* values of X: exact in its dtype */
        gsb__tensor_set(&mn, j, st.v[2 + 2 * d + j]);
        gsb__tensor_set(&mx, j, st.v[2 + 3 * d + j]);
    }
    GSB_CHECK(gsb__fit_set_scalar(c, "n_features_in_", (double)d, GSB_I64));
    rc = mm_store(c, &mn, &mx, (int64_t)st.v[1]);
done:
    gsb__tensor_free(&mn);
    gsb__tensor_free(&mx);
    return rc;
}

/*
 * partial_fit: the running minimum and maximum with the batch X.  A batch of
 * another dtype than the model's promotes the statistics to float64, as
 * numpy's minimum / maximum do.
 */
static int mm_partial_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X");
    const gsb__tensor *seen = gsb__attr(c, "n_samples_seen_");
    const gsb__tensor *pmin = gsb__attr(c, "data_min_"), *pmax = gsb__attr(c, "data_max_");
    double lo, hi;
    mm_range(c->params, &lo, &hi);
    GSB_TRY(mm_check_range(c, lo, hi));
    int first = !seen || !pmin || !pmax;
    int64_t d = X->cols;
    if (!first && (pmin->rows * pmin->cols != d || pmax->rows * pmax->cols != d ||
                   pmax->dtype != pmin->dtype))
        return gsb__err(GSB_ECORRUPT, "MinMaxScaler: fitted attribute 'data_min_' or "
                        "'data_max_' is malformed (was the model imported from a damaged "
                        "blob?)");
    gsb__tensor mn, mx, m2 = GSB__TENSOR_NONE, x2 = GSB__TENSOR_NONE;
    GSB_TRY(mm_batch(c, X, &mn, &mx));
    int rc = GSB_OK;
    if (!first) {
        gsb_dtype dt = pmin->dtype == X->dtype ? X->dtype : GSB_F64;
        GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), dt, d, 1, &m2));
        GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), dt, d, 1, &x2));
        for (int64_t j = 0; j < d; j++) {
            gsb__tensor_set(&m2, j, fmin(gsb__tensor_get(pmin, j), gsb__tensor_get(&mn, j)));
            gsb__tensor_set(&x2, j, fmax(gsb__tensor_get(pmax, j), gsb__tensor_get(&mx, j)));
        }
    }
    rc = mm_store(c, first ? &mn : &m2, first ? &mx : &x2,
                  (first ? 0 : (int64_t)gsb__tensor_get(seen, 0)) + X->rows);
done:
    gsb__tensor_free(&mn);
    gsb__tensor_free(&mx);
    gsb__tensor_free(&m2);
    gsb__tensor_free(&x2);
    return rc;
}

static int mm_transform(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *scale, *min_;
    GSB_TRY(gsb__attr_need(c, "scale_", 0, X->cols, 1, &scale));
    GSB_TRY(gsb__attr_need(c, "min_", 0, X->cols, 1, &min_));
    double lo, hi;
    mm_range(c->params, &lo, &hi);
    /* clip bounds are feature_range in X's dtype, as scikit-learn casts them */
    return apply_affine(c, X, NULL, scale, min_, gsb__param_bool(c->params, "clip"),
                        round_to(X->dtype, lo), round_to(X->dtype, hi));
}

static int mm_inverse_transform(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *scale, *min_;
    GSB_TRY(gsb__attr_need(c, "scale_", 0, X->cols, 1, &scale));
    GSB_TRY(gsb__attr_need(c, "min_", 0, X->cols, 1, &min_));
    gsb__tensor inv;
    GSB_TRY(host_vec(X->cols, &inv));
    for (int64_t j = 0; j < X->cols; j++)
        ((double *)inv.data)[j] = 1.0 / gsb__tensor_get(scale, j);
    int rc = apply_affine(c, X, min_, &inv, NULL, 0, 0, 0);
    gsb__tensor_free(&inv);
    return rc;
}

static const gsb__method_desc mm_methods[] = {
    {"fit", mm_fit, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}, {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL}}, 1,
     "compute the per-feature minimum and maximum (y is ignored)"},
    {"partial_fit", mm_partial_fit,
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_SAME_FEATURES | GSB__IN_STREAM},
      {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL}},
     1, "update the per-feature minimum and maximum with a batch (y is ignored)"},
    {"transform", mm_transform, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0,
     "scale X to feature_range (result \"X\")"},
    {"inverse_transform", mm_inverse_transform, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK}}, 0,
     "undo the scaling (result \"X\")"},
    GSB__STATS_MOMENTS_ROW, GSB__STATS_MERGE_ROW,
    GSB__FIT_FROM_STATS_ROW(mm_fit_from_stats, "moments"),
    {0}};

static const gsb__attr_desc mm_attrs[] = {
    {"min_", "per-feature adjustment for the minimum, X's dtype"},
    {"scale_", "per-feature relative scaling, X's dtype"},
    {"data_min_", "per-feature minimum seen, X's dtype"},
    {"data_max_", "per-feature maximum seen, X's dtype"},
    {"data_range_", "per-feature range (data_max_ - data_min_), X's dtype"},
    {"n_samples_seen_", "number of samples seen (int64)"},
    {"n_features_in_", "number of features seen during fit"},
    {0}};

const gsb__estimator_desc gsb__est_MinMaxScaler = {
    "MinMaxScaler", "preprocessing", GSB__KIND_TRANSFORMER, mm_params, mm_methods, mm_attrs,
    "Transform features by scaling each feature to a given range."};

/* ======================================================================
 * LabelEncoder
 * ==================================================================== */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorted unique copy of v[0..n) into out (malloc'ed); *k its length. */
static int sorted_unique(const double *v, int64_t n, double **out, int64_t *k)
{
    double *u = malloc((size_t)(n ? n : 1) * sizeof *u);
    if (!u)
        return gsb__err(GSB_ENOMEM, "out of host memory sorting %lld labels", (long long)n);
    memcpy(u, v, (size_t)n * sizeof *u);
    qsort(u, (size_t)n, sizeof *u, cmp_double);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (m == 0 || u[i] != u[m - 1])
            u[m++] = u[i];
    *out = u;
    *k = m;
    return GSB_OK;
}

/* Index of x in sorted a[0..n), or -1. */
static int64_t find_sorted(const double *a, int64_t n, double x)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && a[lo] == x ? lo : -1;
}

/* Append printf output to buf (cap bytes), never overflowing; returns the new length. */
static size_t append(char *buf, size_t cap, size_t len, const char *fmt, ...)
    GSB__PRINTF(4, 5);
static size_t append(char *buf, size_t cap, size_t len, const char *fmt, ...)
{
    if (len + 1 >= cap)
        return len;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    if (k < 0)
        return len;
    return len + (size_t)k >= cap ? cap - 1 : len + (size_t)k;
}

/*
 * numpy's str() of a 1-D float64 array, for the values that are not all
 * integral: positional notation with up to 8 fractional digits, or
 * scientific when the magnitudes call for it; each column padded alike.
 */
typedef struct np_fmt {
    int sci;                 /* scientific notation */
    int pad_left, pad_right; /* positional: widths of int and fraction parts */
    int prec, exp_size;      /* scientific: mantissa digits, exponent digits */
} np_fmt;

/* Shortest digits of v rounded to at most max_frac fractional digits (numpy's
 * dragon4 in unique mode with a precision cap); trailing zeros removed. */
static void np_positional_digits(double v, int max_frac, char *buf, size_t n)
{
    char r[400];
    py_float_repr(v, r, sizeof r);
    char *dot = strchr(r, '.');
    if (strchr(r, 'e') || !dot || (int)strlen(dot + 1) > max_frac)
        snprintf(r, sizeof r, "%.*f", max_frac, v);
    dot = strchr(r, '.');
    size_t len = strlen(r);
    while (dot && len > (size_t)(dot - r + 1) && r[len - 1] == '0')
        r[--len] = '\0';
    snprintf(buf, n, "%s", r);
}

/* Scientific digits: mantissa with up to 8 fractional digits, trailing zeros removed. */
static void np_sci_parts(double v, char *mant, size_t mn, int *exp10)
{
    char e[64];
    int prec;
    for (prec = 0; prec < 8; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, v);
        if (strtod(e, NULL) == v)
            break;
    }
    snprintf(e, sizeof e, "%.*e", prec, v);
    char *ep = strchr(e, 'e');
    *exp10 = atoi(ep + 1);
    *ep = '\0';
    size_t len = strlen(e);
    char *dot = strchr(e, '.');
    while (dot && len > 0 && e[len - 1] == '0')
        e[--len] = '\0';
    if (!dot)
        e[len++] = '.', e[len] = '\0';
    snprintf(mant, mn, "%s", e);
}

static void np_fmt_fill(const double *v, int64_t n, np_fmt *f)
{
    memset(f, 0, sizeof *f);
    double mx = 0, mn = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double a = fabs(v[i]);
        if (a != 0) {
            mx = a > mx ? a : mx;
            mn = a < mn ? a : mn;
        }
    }
    f->sci = mx > 0 && (mx >= 1e8 || mn < 1e-4 || mx / mn > 1e3);
    for (int64_t i = 0; i < n; i++) {
        char s[400];
        if (f->sci) {
            int ex;
            np_sci_parts(v[i], s, sizeof s, &ex);
            char *dot = strchr(s, '.');
            int il = (int)(dot - s), fl = (int)strlen(dot + 1);
            char es[16];
            int el = snprintf(es, sizeof es, "%d", ex < 0 ? -ex : ex);
            f->pad_left = il > f->pad_left ? il : f->pad_left;
            f->prec = fl > f->prec ? fl : f->prec;
            f->exp_size = el > f->exp_size ? el : f->exp_size;
        } else {
            np_positional_digits(v[i], 8, s, sizeof s);
            char *dot = strchr(s, '.');
            int il = (int)(dot - s), fl = (int)strlen(dot + 1);
            f->pad_left = il > f->pad_left ? il : f->pad_left;
            f->pad_right = fl > f->pad_right ? fl : f->pad_right;
        }
    }
    if (f->exp_size < 2)
        f->exp_size = 2;
}

static void np_fmt_one(const np_fmt *f, double v, char *buf, size_t n)
{
    char s[400];
    if (f->sci) {
        int ex;
        np_sci_parts(v, s, sizeof s, &ex);
        char *dot = strchr(s, '.');
        *dot = '\0';
        snprintf(buf, n, "%*s.%-*s", f->pad_left, s, f->prec, dot + 1);
        /* the mantissa is zero-padded, not space-padded */
        for (char *p = strchr(buf, '.') + 1; *p; p++)
            if (*p == ' ')
                *p = '0';
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "e%c%0*d", ex < 0 ? '-' : '+', f->exp_size,
                 ex < 0 ? -ex : ex);
    } else {
        np_positional_digits(v, 8, s, sizeof s);
        char *dot = strchr(s, '.');
        *dot = '\0';
        snprintf(buf, n, "%*s.%-*s", f->pad_left, s, f->pad_right, dot + 1);
    }
}

/*
 * numpy's str() of a sorted 1-D array of the values v[0..n): integers as an
 * int64 array would print ("[-1  5]"), anything else as float64; lines wrap
 * at 75 characters and more than 1000 values are summarised with "...".
 */
static size_t np_array_str(const double *v, int64_t n, char *buf, size_t cap)
{
    int summarise = n > 1000;
    double shown[6];
    const double *fv = v;
    int64_t nf = n;
    if (summarise) {
        for (int k = 0; k < 3; k++)
            shown[k] = v[k], shown[3 + k] = v[n - 3 + k];
        fv = shown;
        nf = 6;
    }
    /* all integral: the caller passed int codes (numpy would hold int64) */
    int integral = 1;
    for (int64_t i = 0; i < n; i++)
        if (v[i] != floor(v[i]) || fabs(v[i]) >= 9.2e18)
            integral = 0;
    int width = 0;
    np_fmt f;
    if (integral) {
        for (int64_t i = 0; i < nf; i++) {
            char s[32];
            int k = snprintf(s, sizeof s, "%lld", (long long)fv[i]);
            width = k > width ? k : width;
        }
    } else {
        np_fmt_fill(fv, nf, &f);
    }
    /* numpy's _formatArray for one axis: words separated by ' ', a new line
     * (indented by one space) when the next word would pass 74 columns */
    size_t len = append(buf, cap, 0, "[");
    size_t line = 1;
    for (int64_t i = 0; i < nf + summarise; i++) {
        char word[512];
        if (summarise && i == 3)
            snprintf(word, sizeof word, "...");
        else {
            double x = fv[summarise && i > 3 ? i - 1 : i];
            if (integral)
                snprintf(word, sizeof word, "%*lld", width, (long long)x);
            else
                np_fmt_one(&f, x, word, sizeof word);
        }
        size_t wl = strlen(word);
        if (i > 0) {
            if (line + 1 + wl > 74) {
                /* a wrapped line loses its trailing padding (numpy's rstrip) */
                while (len > 1 && buf[len - 1] == ' ')
                    buf[--len] = '\0';
                len = append(buf, cap, len, "\n ");
                line = 1;
            } else {
                len = append(buf, cap, len, " ");
                line += 1;
            }
        }
        len = append(buf, cap, len, "%s", word);
        line += wl;
    }
    return append(buf, cap, len, "]");
}

static const gsb__param_desc le_params[] = {{0}};

static int le_fit(gsb__ctx *c)
{
    const gsb__tensor *y = gsb__in(c, "y");
    double *u;
    int64_t k;
    GSB_TRY(sorted_unique(y->data, y->rows, &u, &k));
    gsb__tensor cls;
    int rc = host_vec(k, &cls);
    if (rc == GSB_OK) {
        memcpy(cls.data, u, (size_t)k * sizeof *u);
        rc = gsb__fit_set(c, "classes_", &cls);
    }
    free(u);
    return rc;
}

/* GSB_EINVAL naming the sorted unique values of bad[0..nb) as scikit-learn does. */
static int unseen_error(double *bad, int64_t nb, int as_list)
{
    double *u;
    int64_t k;
    GSB_TRY(sorted_unique(bad, nb, &u, &k));
    char msg[1000];
    size_t len;
    if (as_list) {
        /* transform: a Python list of numpy float64 scalars */
        len = append(msg, sizeof msg, 0, "[");
        for (int64_t i = 0; i < k; i++) {
            char r[64];
            py_float_repr(u[i], r, sizeof r);
            len = append(msg, sizeof msg, len, "%snp.float64(%s)", i ? ", " : "", r);
        }
        append(msg, sizeof msg, len, "]");
    } else {
        /* inverse_transform: a numpy array */
        np_array_str(u, k, msg, sizeof msg);
    }
    free(u);
    return gsb__err(GSB_EINVAL, "y contains previously unseen labels: %s", msg);
}

static int le_transform(gsb__ctx *c)
{
    const gsb__tensor *y = gsb__in(c, "y"), *cls;
    GSB_TRY(gsb__attr_need(c, "classes_", GSB_F64, -1, 1, &cls));
    const double *yv = y->data, *cv = cls->data;
    int64_t n = y->rows, k = cls->rows;
    gsb__tensor codes;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_I64, n, 1, &codes));
    codes.ndim = 1;
    int64_t *o = codes.data, nbad = 0;
    double *bad = NULL;
    for (int64_t i = 0; i < n; i++) {
        o[i] = find_sorted(cv, k, yv[i]);
        if (o[i] < 0) {
            if (!bad && !(bad = malloc((size_t)n * sizeof *bad))) {
                gsb__tensor_free(&codes);
                return gsb__err(GSB_ENOMEM, "out of host memory");
            }
            bad[nbad++] = yv[i];
        }
    }
    int rc = bad ? unseen_error(bad, nbad, 1) : gsb__out(c, "y", &codes);
    free(bad);
    gsb__tensor_free(&codes);
    return rc;
}

static int le_inverse_transform(gsb__ctx *c)
{
    const gsb__tensor *y = gsb__in(c, "y"), *cls;
    GSB_TRY(gsb__attr_need(c, "classes_", GSB_F64, -1, 1, &cls));
    const double *yv = y->data, *cv = cls->data;
    int64_t n = y->rows, k = cls->rows, nbad = 0;
    gsb__tensor out;
    GSB_TRY(host_vec(n, &out));
    double *o = out.data, *bad = NULL;
    for (int64_t i = 0; i < n; i++) {
        double v = yv[i];
        /* a code is an integer in [0, n_classes) */
        if (v >= 0 && v < (double)k && v == floor(v)) {
            o[i] = cv[(int64_t)v];
            continue;
        }
        if (!bad && !(bad = malloc((size_t)n * sizeof *bad))) {
            gsb__tensor_free(&out);
            return gsb__err(GSB_ENOMEM, "out of host memory");
        }
        bad[nbad++] = v;
    }
    int rc = bad ? unseen_error(bad, nbad, 0) : gsb__out(c, "y", &out);
    free(bad);
    gsb__tensor_free(&out);
    return rc;
}

static const gsb__method_desc le_methods[] = {
    {"fit", le_fit, {{"y", GSB__IN_LABELS}}, 1, "learn the sorted unique labels"},
    {"transform", le_transform, {{"y", GSB__IN_LABELS}}, 0,
     "labels to codes 0..n_classes-1 (result \"y\", int64)"},
    {"inverse_transform", le_inverse_transform, {{"y", GSB__IN_LABELS}}, 0,
     "codes back to labels (result \"y\", float64)"},
    {0}};

static const gsb__attr_desc le_attrs[] = {
    {"classes_", "sorted unique labels seen in fit (float64)"}, {0}};

const gsb__estimator_desc gsb__est_LabelEncoder = {
    "LabelEncoder", "preprocessing", GSB__KIND_TRANSFORMER, le_params, le_methods, le_attrs,
    "Encode target labels with value between 0 and n_classes-1."};
