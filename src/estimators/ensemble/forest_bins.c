/*
 * forest_bins.c - the bins of a forest's features (see forest_bins.h):
 * a row subsample, a radix sort of each feature's float32 values, then
 * one bin per distinct value or quantile cuts.
 */
#include "estimators/ensemble/forest_bins.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

/* float32 x as an unsigned key of the same order (-0 before +0, no NaN here) */
static uint32_t sort_key(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static float from_key(uint32_t k)
{
    uint32_t u = (k & 0x80000000u) ? k & 0x7fffffffu : ~k;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* LSD radix sort of n keys, 3 passes of 11 bits (counts in L1) between keys and
 * tmp (n keys); a pass whose digit all keys share moves nothing.  Returns where
 * the sorted keys are (keys or tmp). */
static uint32_t *radix_sort(uint32_t *keys, uint32_t *tmp, int64_t n)
{
    uint32_t *src = keys, *dst = tmp;
    for (int shift = 0; shift < 32; shift += 11) {
        int64_t count[2049] = {0};
        for (int64_t i = 0; i < n; i++)
            count[((src[i] >> shift) & 0x7ff) + 1]++;
        if (n > 0 && count[((src[0] >> shift) & 0x7ff) + 1] == n)
            continue;
        for (int b = 0; b < 2048; b++)
            count[b + 1] += count[b];
        for (int64_t i = 0; i < n; i++)
            dst[count[(src[i] >> shift) & 0x7ff]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* A cut between a < b: their midpoint in float32, kept in [a, b). */
static float midpoint(float a, float b)
{
    float e = (float)(((double)a + (double)b) * 0.5);
    return e < b && e >= a ? e : a;
}

/* The edges of one feature from its m sorted values s; returns their count. */
static int feature_edges(const float *s, int64_t m, int n_real, float *out)
{
    int64_t distinct = m > 0 ? 1 : 0;
    for (int64_t i = 1; i < m && distinct <= n_real; i++)
        distinct += s[i] != s[i - 1];
    int ne = 0;
    if (distinct <= n_real) {
        for (int64_t i = 1; i < m; i++)
            if (s[i] != s[i - 1])
                out[ne++] = midpoint(s[i - 1], s[i]);
        return ne;
    }
    for (int j = 1; j < n_real; j++) {
        int64_t i = (int64_t)((double)j * (double)m / n_real);
        if (i < 1 || i >= m)
            continue;
        float e = s[i - 1] < s[i] ? midpoint(s[i - 1], s[i]) : s[i];
        if ((ne == 0 || e > out[ne - 1]) && e < s[m - 1])
            out[ne++] = e;
    }
    return ne;
}

int gsb__forest_has_nan(const gsb__tensor *X)
{
    int64_t n = gsb__tensor_numel(X);
    int found = 0;
    if (X->dtype == GSB_F32) {
        const float *x = X->data;
#pragma omp parallel for reduction(| : found) schedule(static) if (n > (1 << 18))
        for (int64_t i = 0; i < n; i++)
            found |= isnan(x[i]);
    } else {
        const double *x = X->data;
#pragma omp parallel for reduction(| : found) schedule(static) if (n > (1 << 18))
        for (int64_t i = 0; i < n; i++)
            found |= isnan(x[i]);
    }
    return found;
}

/* The rows used for the quantiles: all, or a random subset (sorted, so the
 * gathers stream through X). */
static int64_t *pick_rows(int64_t n, gsb__rng *rng, int64_t *m)
{
    int64_t k = n < GSB__FOREST_BIN_SUBSAMPLE ? n : GSB__FOREST_BIN_SUBSAMPLE;
    int64_t *rows = gsb__alloc_array(n, sizeof *rows);
    if (!rows)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        rows[i] = i;
    if (k < n) {
        for (int64_t i = 0; i < k; i++) { /* partial Fisher-Yates */
            int64_t j = i + gsb__rng_below(rng, n - i), t = rows[i];
            rows[i] = rows[j];
            rows[j] = t;
        }
        /* counting sort of the k picks by row */
        uint8_t *mark = gsb__calloc_array(n, 1);
        if (!mark) {
            free(rows);
            return NULL;
        }
        for (int64_t i = 0; i < k; i++)
            mark[rows[i]] = 1;
        for (int64_t i = 0, o = 0; i < n; i++)
            if (mark[i])
                rows[o++] = i;
        free(mark);
    }
    *m = k;
    return rows;
}

/* Rows rows[0..m) of columns [f0, f0 + fc) of X as float32, column after column
 * (cols[j * m + i]): X is read row by row, once, instead of a strided gather
 * per feature, whose cache misses cost more than the sorts. */
static void gather_columns(const gsb__tensor *X, const int64_t *rows, int64_t m, int64_t f0,
                           int64_t fc, float *cols)
{
    int64_t d = X->cols;
#pragma omp for schedule(static)
    for (int64_t i0 = 0; i0 < m; i0 += 256) {
        int64_t i1 = i0 + 256 < m ? i0 + 256 : m;
        for (int64_t i = i0; i < i1; i++) {
            int64_t at = rows[i] * d + f0;
            if (X->dtype == GSB_F32)
                for (int64_t j = 0; j < fc; j++)
                    cols[j * m + i] = ((const float *)X->data)[at + j];
            else
                for (int64_t j = 0; j < fc; j++)
                    cols[j * m + i] = (float)((const double *)X->data)[at + j];
        }
    }
}

/* Feature f's edges into its row of edges, from its m values v (NaN skipped);
 * keys: 2m of scratch, vals: m. */
static void one_feature(const float *v, int64_t m, int n_real, uint32_t *keys, float *vals,
                        float *row, int width)
{
    int64_t k = 0;
    for (int64_t i = 0; i < m; i++)
        if (!isnan(v[i]))
            keys[k++] = sort_key(v[i]);
    const uint32_t *sorted = radix_sort(keys, keys + m, k);
    for (int64_t i = 0; i < k; i++)
        vals[i] = from_key(sorted[i]);
    int ne = feature_edges(vals, k, n_real, row);
    for (int j = ne; j < width; j++)
        row[j] = INFINITY;
}

/* columns gathered at once: at most this many bytes of them */
#define GATHER_BYTES ((int64_t)64 << 20)

int gsb__forest_edges(const gsb__tensor *X, int n_real, gsb__rng *rng, gsb__tensor *edges)
{
    int64_t n = X->rows, d = X->cols, m = 0;
    int width = n_real > 1 ? n_real - 1 : 1;
    int64_t *rows = pick_rows(n, rng, &m);
    int64_t per = GATHER_BYTES / (4 * (m > 0 ? m : 1));
    per = per < 1 ? 1 : per > d ? d : per;
    float *cols = rows ? gsb__alloc_array(per * (m > 0 ? m : 1), sizeof *cols) : NULL;
    int rc = cols ? gsb__tensor_alloc(gsb__cpu_backend(), GSB_F32, d, width, edges)
                  : gsb__err(GSB_ENOMEM, "random forest: out of memory for the bins");
    if (rc != GSB_OK) {
        free(rows);
        free(cols);
        return rc;
    }
    int failed = 0;
#pragma omp parallel reduction(| : failed) if (m * d > 65536)
    {
        uint32_t *keys = gsb__alloc_array(2 * m, sizeof *keys);
        float *vals = gsb__alloc_array(m, sizeof *vals);
        failed = !keys || !vals;
        for (int64_t f0 = 0; f0 < d; f0 += per) {
            int64_t fc = d - f0 < per ? d - f0 : per;
            gather_columns(X, rows, m, f0, fc, cols);
#pragma omp for schedule(dynamic, 1)
            for (int64_t j = 0; j < fc; j++)
                if (!failed)
                    one_feature(cols + j * m, m, n_real, keys, vals,
                                (float *)edges->data + (f0 + j) * width, width);
        }
        free(keys);
        free(vals);
    }
    free(rows);
    free(cols);
    if (failed) {
        gsb__tensor_free(edges);
        return gsb__err(GSB_ENOMEM, "random forest: out of memory for the bins");
    }
    return GSB_OK;
}

float gsb__forest_threshold(const float *edge_row, int lo, int hi, int n_real)
{
    if (hi >= n_real)
        return INFINITY;
    float a = edge_row[lo], b = edge_row[hi - 1];
    if (!(b > a))
        return a;
    float t = (float)(((double)a + (double)b) * 0.5);
    return t < a ? a : t > b ? b : t;
}
