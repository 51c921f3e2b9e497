/*
 * classes.c - class labels and class weights for the classifiers: the
 * continuous-target check, classes_ and the samples' class indices, the
 * class_weight parameter as per-class weights.  See classes.h.
 */
#include "estimators/common/classes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- labels ---------------------------------------------------------------- */

int gsb__labels_check(const gsb__tensor *y)
{
    const double *yv = y->data;
    for (int64_t i = 0; i < y->rows; i++)
        if (yv[i] != trunc(yv[i]))
            return gsb__err(GSB_EINVAL, "Unknown label type: continuous. Maybe you are trying "
                            "to fit a classifier, which expects discrete classes on a "
                            "regression target with continuous values.");
    return GSB_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Up to this many classes are found by one scan of y (each label looked up
 * among the classes seen so far); more by sorting a copy of y.  Sorting 1M
 * labels took ~50-150 ms (qsort's calls per comparison), the scan a few. */
#define LABELS_SCAN_MAX 64

/* The number of cls[0..k) (sorted, k >= 1) below v: a binary search whose
 * steps are conditional moves, so random labels cost no mispredicted
 * branches. */
static int64_t rank_of(const double *cls, int64_t k, double v)
{
    const double *base = cls;
    for (int64_t len = k; len > 1;) {
        int64_t half = len / 2;
        base = base[half - 1] < v ? base + half : base;
        len -= half;
    }
    return (base - cls) + (*base < v);
}

/* The sorted distinct values of yv[0..n) into cls (room for n), their count,
 * when there are at most LABELS_SCAN_MAX; else 0.  Of equal values (0.0 and
 * -0.0) the first met is kept. */
static int64_t scan_classes(const double *yv, int64_t n, double *cls)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = yv[i];
        int64_t at = k ? rank_of(cls, k, v) : 0;
        if (at < k && cls[at] == v)
            continue;
        if (k == LABELS_SCAN_MAX)
            return 0;
        /* k < i + 1 <= n: there is room */
        memmove(cls + at + 1, cls + at, (size_t)(k - at) * sizeof *cls);
        cls[at] = v;
        k++;
    }
    return k;
}

int gsb__labels_encode(const gsb__ctx *c, const gsb__tensor *y, double **classes,
                       int64_t *n_classes, int32_t *index)
{
    GSB_TRY(gsb__labels_check(y));
    int64_t n = y->rows;
    const double *yv = y->data;
    double *cls = malloc((size_t)(n > 0 ? n : 1) * sizeof *cls);
    if (!cls)
        return gsb__err(GSB_ENOMEM, "%s: out of memory for %lld labels", c->est->name,
                        (long long)n);
    int64_t k = scan_classes(yv, n, cls);
    if (k == 0) { /* many classes (or no labels) */
        memcpy(cls, yv, (size_t)n * sizeof *cls);
        qsort(cls, (size_t)n, sizeof *cls, cmp_double);
        for (int64_t i = 0; i < n; i++)
            if (k == 0 || cls[i] != cls[k - 1])
                cls[k++] = cls[i];
    }
    if (k > INT32_MAX) { /* the indices are int32 */
        free(cls);
        return gsb__err(GSB_EUNSUPPORTED, "%s: too many classes (%lld)", c->est->name,
                        (long long)k);
    }
    for (int64_t i = 0; i < n; i++) /* yv[i] is one of cls[0..k) */
        index[i] = (int32_t)rank_of(cls, k, yv[i]);
    *classes = cls;
    *n_classes = k;
    return GSB_OK;
}

/* ---- class weights ----------------------------------------------------------- */

int gsb__class_weight_given(const gsb__ctx *c)
{
    const json_t *cwp = json_object_get(c->params, "class_weight");
    return cwp && !json_is_null(cwp);
}

/* A class_weight key: a number written as a JSON object key ("1", "2.0"). */
static int parse_key(const char *key, double *v)
{
    char *end;
    *v = strtod(key, &end);
    return end != key && *end == '\0';
}

/* The weight *w of class value cls in the dict (the last key equal to
 * int(cls)); *found 0 when it has none. */
static int dict_lookup(const gsb__ctx *c, const json_t *dict, double cls, double *w,
                       int *found)
{
    const char *key;
    const json_t *val;
    *found = 0;
    json_object_foreach((json_t *)dict, key, val) {
        double kv;
        if (!parse_key(key, &kv) || kv != trunc(cls))
            continue;
        if (!json_is_number(val))
            return gsb__err(GSB_EINVAL, "%s: class_weight['%s'] must be a number",
                            c->est->name, key);
        *w = json_number_value(val);
        *found = 1;
    }
    return GSB_OK;
}

int gsb__class_weights(const gsb__ctx *c, const double *classes, int64_t n_classes,
                       const int32_t *yi, int64_t n, const double *sw, double *cw)
{
    const json_t *cwp = json_object_get(c->params, "class_weight");
    int64_t K = n_classes;
    for (int64_t k = 0; k < K; k++)
        cw[k] = 1.0;
    if (!cwp || json_is_null(cwp))
        return GSB_OK;
    if (json_is_string(cwp)) { /* 'balanced', the only string the parameter takes */
        double total = 0;
        for (int64_t k = 0; k < K; k++)
            cw[k] = 0;
        for (int64_t i = 0; i < n; i++) {
            double w = sw ? sw[i] : 1.0;
            cw[yi[i]] += w;
            total += w;
        }
        for (int64_t k = 0; k < K; k++)
            cw[k] = cw[k] > 0 ? total / ((double)K * cw[k]) : 0.0;
        return GSB_OK;
    }
    int64_t n_weighted = 0;
    char missing[512];
    size_t off = 0;
    missing[0] = '\0';
    for (int64_t k = 0; k < K; k++) {
        double w = 1.0;
        int found;
        GSB_TRY(dict_lookup(c, cwp, classes[k], &w, &found));
        if (found) {
            cw[k] = w;
            n_weighted++;
        } else if (off < sizeof missing) {
            off += (size_t)snprintf(missing + off, sizeof missing - off, "%s%.0f",
                                    off ? ", " : "", trunc(classes[k]));
        }
    }
    if (n_weighted < K && n_weighted != (int64_t)json_object_size(cwp))
        return gsb__err(GSB_EINVAL, "The classes, [%s], are not in class_weight", missing);
    return GSB_OK;
}
