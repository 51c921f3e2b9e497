/*
 * cpu_forest.c - the forest ops on the CPU (contracts in backend/backend.h;
 * the CUDA twins are in cuda/cuda_forest.cu): binning X, node histograms
 * into the pool and their subtraction, the best split of a batch of nodes,
 * and the stable partition of their samples (prediction is in
 * cpu_forest_predict.c).
 *
 * Parallelism: OpenMP over nodes (or (node, feature) pairs when a batch has
 * few nodes), over rows for binning.  Every sum runs in the
 * samples' order, so a call repeats bitwise whatever the thread count.
 *
 * forest_split builds a feature's stats in one of two ways, with the same
 * sums in the same order: a node with few samples sorts their codes (stable:
 * equal codes keep the samples' order) instead of zeroing and scanning a
 * whole histogram, the cost that dominates the many small nodes of a fully
 * grown tree; larger ones fill a histogram.  Either way the scan walks the
 * non-empty bins only, so both give bitwise the same record.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/forest_math.h"

/* Nodes of at most this many samples sort their codes instead of filling a histogram. */
#define SMALL_NODE 24
/* Below this many sample visits a call runs on the calling thread: waking a
 * team costs more, and much more on a loaded machine. */
#define PARALLEL_WORK 32768

/* ---- argument checks -------------------------------------------------------------- */

static int check_data(const gsb__forest_data *d, const char *op)
{
    if (!d || !d->codes || !d->y || !d->rows || !d->weights)
        return gsb__err(GSB_EINTERNAL, "%s: forest data incomplete", op);
    if (d->n_features < 1 || d->n_bins < 1 || d->n_bins > 256 ||
        (d->nan_code >= 0 && d->nan_code != d->n_bins - 1) ||
        (d->n_classes <= 0 && d->n_outputs <= 0))
        return gsb__err(GSB_EINTERNAL, "%s: bad forest shape (%lld features, %d bins)", op,
                        (long long)d->n_features, d->n_bins);
    int64_t n = d->codes->rows, S = d->rows->rows * d->rows->cols;
    GSB_TRY(cpu_check(d->codes, GSB_I32, n, (d->n_features + 3) / 4, op, "codes"));
    if (d->n_classes > 0)
        GSB_TRY(cpu_check_vec(d->y, GSB_I32, n, op, "y"));
    else
        GSB_TRY(cpu_check(d->y, GSB_F64, n, 2 * d->n_outputs, op, "y"));
    GSB_TRY(cpu_check_vec(d->rows, GSB_I32, S, op, "rows"));
    GSB_TRY(cpu_check_vec(d->weights, GSB_F32, S, op, "weights"));
    return GSB_OK;
}

static int64_t hist_len(const gsb__forest_data *d)
{
    return d->n_features * d->n_bins * gsb__forest_nstats(d->n_classes, d->n_outputs);
}

static int check_pool(const gsb__forest_data *d, const char *op)
{
    if (!d->pool)
        return gsb__err(GSB_EINTERNAL, "%s: no histogram pool", op);
    return cpu_check(d->pool, GSB_F64, -1, hist_len(d), op, "pool");
}

/* nodes (B x 3): segments inside the samples, slots inside the pool */
static int check_nodes(const gsb__forest_data *d, const gsb__tensor *nodes, int need_slot,
                       const char *op)
{
    GSB_TRY(cpu_check(nodes, GSB_I32, -1, 3, op, "nodes"));
    const int32_t *nd = nodes->data;
    int64_t S = d->rows->rows * d->rows->cols;
    int64_t slots = d->pool ? d->pool->rows : 0;
    for (int64_t b = 0; b < nodes->rows; b++) {
        int32_t start = nd[3 * b], end = nd[3 * b + 1], slot = nd[3 * b + 2];
        if (start < 0 || end < start || end > S || (slot >= 0 && slot >= slots) ||
            (need_slot && slot < 0))
            return gsb__err(GSB_EINTERNAL, "%s: node %lld is [%d, %d) slot %d", op,
                            (long long)b, start, end, slot);
    }
    return GSB_OK;
}

static int check_feats(const gsb__forest_data *d, const gsb__tensor *feats, int64_t B,
                       const char *op)
{
    GSB_TRY(cpu_check(feats, GSB_I32, B, -1, op, "feats"));
    const int32_t *f = feats->data;
    for (int64_t i = 0; i < feats->rows * feats->cols; i++)
        if (f[i] >= d->n_features)
            return gsb__err(GSB_EINTERNAL, "%s: feature %d out of range", op, f[i]);
    return GSB_OK;
}

/* ---- binning ---------------------------------------------------------------------- */

/* the number of entries of row e (e ascending, +inf padded) below x */
static int count_below(const float *e, int64_t ne, float x)
{
    int64_t lo = 0, hi = ne;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (e[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int)lo;
}

int gsb__cpu_forest_bin(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *edges,
                        int nan_code, gsb__tensor *codes)
{
    (void)be;
    const char *op = "forest_bin";
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    int64_t n = X->rows, d = X->cols;
    GSB_TRY(cpu_check(edges, GSB_F32, d, -1, op, "edges"));
    GSB_TRY(cpu_check(codes, GSB_I32, n, (d + 3) / 4, op, "codes"));
    if (edges->cols > 255 || nan_code > 255)
        return gsb__err(GSB_EINTERNAL, "%s: more than 256 codes", op);
    int64_t ne = edges->cols, stride = 4 * codes->cols;
    const float *e = edges->data;
#pragma omp parallel for schedule(static) if (n * d > 65536)
    for (int64_t i = 0; i < n; i++) {
        uint8_t *out = (uint8_t *)codes->data + i * stride;
        for (int64_t f = 0; f < d; f++) {
            float x = X->dtype == GSB_F32 ? ((const float *)X->data)[i * d + f]
                                          : (float)((const double *)X->data)[i * d + f];
            out[f] = (uint8_t)(isnan(x) ? nan_code : count_below(e + f * ne, ne, x));
        }
        for (int64_t f = d; f < stride; f++)
            out[f] = 0;
    }
    return GSB_OK;
}

/* ---- adding a sample to stats ----------------------------------------------------- */

typedef struct sample_src {
    const uint8_t *codes;
    int64_t stride;
    const int32_t *rows, *cls;
    const float *w;
    const double *y;
    int n_classes, n_outputs, V1;
} sample_src;

static sample_src source_of(const gsb__forest_data *d)
{
    sample_src s = {d->codes->data, 4 * d->codes->cols, d->rows->data, NULL, d->weights->data,
                    NULL, d->n_classes, d->n_outputs,
                    gsb__forest_nstats(d->n_classes, d->n_outputs)};
    if (d->n_classes > 0)
        s.cls = d->y->data;
    else
        s.y = d->y->data;
    return s;
}

/* stats h += sample i (its row and weight) */
static inline void add_sample(const sample_src *s, int64_t i, double *h)
{
    int32_t row = s->rows[i];
    double w = s->w[i];
    h[0] += 1.0;
    if (s->n_classes > 0) {
        h[1 + s->cls[row]] += w;
        return;
    }
    h[1] += w;
    const double *yr = s->y + (int64_t)row * 2 * s->n_outputs;
    for (int k = 0; k < 2 * s->n_outputs; k++)
        h[2 + k] += w * yr[k];
}

/* h (n_bins x V1) += the samples [start, end) by their code of feature f; the
 * common shapes get their own loops (this is the fit's innermost loop). */
static void accumulate(const sample_src *s, int64_t start, int64_t end, int64_t f,
                       double *restrict h)
{
    const uint8_t *restrict codes = s->codes + f;
    const int32_t *restrict rows = s->rows;
    const float *restrict w = s->w;
    int64_t stride = s->stride;
    int V1 = s->V1;
    if (s->n_classes > 0) {
        const int32_t *restrict cls = s->cls;
        for (int64_t i = start; i < end; i++) {
            int64_t r = rows[i];
            double *b = h + (int64_t)codes[r * stride] * V1;
            b[0] += 1.0;
            b[1 + cls[r]] += w[i];
        }
    } else if (s->n_outputs == 1) {
        const double *restrict y = s->y;
        for (int64_t i = start; i < end; i++) {
            int64_t r = rows[i];
            double *b = h + (int64_t)codes[r * stride] * 4, wi = w[i];
            b[0] += 1.0;
            b[1] += wi;
            b[2] += wi * y[2 * r];
            b[3] += wi * y[2 * r + 1];
        }
    } else {
        for (int64_t i = start; i < end; i++)
            add_sample(s, i, h + (int64_t)codes[(int64_t)rows[i] * stride] * V1);
    }
}

/* ---- histograms into the pool ----------------------------------------------------- */

int gsb__cpu_forest_hist(const gsb__backend *be, const gsb__forest_data *d,
                         const gsb__tensor *nodes, const gsb__tensor *feats)
{
    (void)be;
    const char *op = "forest_hist";
    GSB_TRY(check_data(d, op));
    GSB_TRY(check_pool(d, op));
    GSB_TRY(check_nodes(d, nodes, 1, op));
    if (feats)
        GSB_TRY(check_feats(d, feats, nodes->rows, op));
    sample_src src = source_of(d);
    const int32_t *nd = nodes->data;
    int64_t B = nodes->rows, m = feats ? feats->cols : d->n_features;
    int64_t per_feature = (int64_t)d->n_bins * src.V1, slot_len = hist_len(d);
    double *pool = d->pool->data;
    int32_t *fl = NULL; /* feats without repeats: each (slot, feature) one iteration's */
    if (feats) {
        int64_t *seen = cpu_alloc(d->n_features, sizeof *seen);
        fl = cpu_alloc(B * m, sizeof *fl);
        if (seen && fl)
            gsb__forest_unique_feats(feats->data, B, m, d->n_features, seen, fl);
        free(seen);
        if (!seen || !fl) {
            free(fl);
            return gsb__err(GSB_ENOMEM, "%s: out of memory", op);
        }
    }
    int64_t work = 0;
    for (int64_t b = 0; b < B; b++)
        work += (nd[3 * b + 1] - nd[3 * b]) * m;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (work > PARALLEL_WORK)
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < m; j++) {
            int64_t f = fl ? fl[b * m + j] : j;
            if (f < 0)
                continue;
            double *h = pool + nd[3 * b + 2] * slot_len + f * per_feature;
            memset(h, 0, (size_t)per_feature * sizeof *h);
            accumulate(&src, nd[3 * b], nd[3 * b + 1], f, h);
        }
    free(fl);
    return GSB_OK;
}

int gsb__cpu_forest_hist_sub(const gsb__backend *be, const gsb__forest_data *d,
                             const gsb__tensor *pairs)
{
    (void)be;
    const char *op = "forest_hist_sub";
    GSB_TRY(check_pool(d, op));
    GSB_TRY(cpu_check(pairs, GSB_I32, -1, 2, op, "pairs"));
    const int32_t *pr = pairs->data;
    int64_t P = pairs->rows, slots = d->pool->rows;
    for (int64_t p = 0; p < 2 * P; p++)
        if (pr[p] < 0 || pr[p] >= slots)
            return gsb__err(GSB_EINTERNAL, "%s: slot %d out of range", op, pr[p]);
    int V1 = gsb__forest_nstats(d->n_classes, d->n_outputs);
    int64_t bins = d->n_features * d->n_bins, slot_len = hist_len(d);
    double *pool = d->pool->data;
#pragma omp parallel for collapse(2) schedule(static) if (P * bins * V1 > PARALLEL_WORK)
    for (int64_t p = 0; p < P; p++)
        for (int64_t k = 0; k < bins; k++) {
            double *dst = pool + pr[2 * p] * slot_len + k * V1;
            const double *src = pool + pr[2 * p + 1] * slot_len + k * V1;
            double total = 0;
            for (int s = 0; s < V1; s++) {
                dst[s] -= src[s];
                total += s > 0 ? fabs(dst[s]) : 0.0;
            }
            if (dst[0] < 0.5) {
                for (int s = 0; s < V1; s++)
                    dst[s] = 0.0;
            } else if (d->n_classes > 0) {
                for (int s = 1; s < V1; s++)
                    if (dst[s] < 1e-9 * total)
                        dst[s] = 0.0;
            }
        }
    return GSB_OK;
}

/* ---- the best split --------------------------------------------------------------- */

/* One thread's scratch: a histogram, the non-empty bins in code order, sort pairs. */
typedef struct split_scratch {
    double *hist;     /* n_bins x V1 */
    double *cstats;   /* n_bins x V1: stats of the non-empty real bins, then prefix sums */
    int *ccode;       /* n_bins */
    double *nan, *tot;/* V1 each */
    int64_t *pairs;   /* SMALL_NODE: code << 32 | sample offset */
    double *rec;      /* two records */
} split_scratch;

static void scratch_free(split_scratch *s)
{
    free(s->hist);
    free(s->cstats);
    free(s->ccode);
    free(s->nan);
    free(s->pairs);
    free(s->rec);
}

static int scratch_alloc(split_scratch *s, int n_bins, int V1, int rec_len)
{
    memset(s, 0, sizeof *s);
    s->hist = cpu_alloc((int64_t)n_bins * V1, sizeof(double));
    s->cstats = cpu_alloc((int64_t)n_bins * V1, sizeof(double));
    s->ccode = cpu_alloc(n_bins, sizeof(int));
    s->nan = cpu_alloc(2 * V1, sizeof(double));
    s->pairs = cpu_alloc(SMALL_NODE, sizeof(int64_t));
    s->rec = cpu_alloc(2 * rec_len, sizeof(double));
    if (s->hist && s->cstats && s->ccode && s->nan && s->pairs && s->rec) {
        s->tot = s->nan + V1;
        return 1;
    }
    scratch_free(s);
    return 0;
}

typedef struct split_job {
    const gsb__forest_data *d;
    sample_src src;
    const gsb__forest_rule *rule;
    int n_real;   /* real (non-missing) codes */
    int rec_len;
} split_job;

/* Keep a bin's stats h (code c) in the compact list, or as the missing-value bin. */
static void keep_bin(const split_job *job, split_scratch *s, int *nc, int *has_nan, int c,
                     const double *h)
{
    int V1 = job->src.V1;
    if (c == job->d->nan_code) {
        memcpy(s->nan, h, (size_t)V1 * sizeof(double));
        *has_nan = 1;
        return;
    }
    memcpy(s->cstats + (int64_t)*nc * V1, h, (size_t)V1 * sizeof(double));
    s->ccode[(*nc)++] = c;
}

/* The non-empty bins of feature f in the node: from a histogram (pool or built). */
static void bins_from_hist(const split_job *job, split_scratch *s, const double *h, int *nc,
                           int *has_nan)
{
    int V1 = job->src.V1;
    for (int c = 0; c < job->d->n_bins; c++)
        if (h[(int64_t)c * V1] > 0.5)
            keep_bin(job, s, nc, has_nan, c, h + (int64_t)c * V1);
}

/* h = the stats of the samples start + (pairs[k] & 0xffffffff), k in [i0, i1),
 * summed in that order (the order a histogram adds them in). */
static void sum_run(const sample_src *src, int32_t start, const int64_t *pairs, int64_t i0,
                    int64_t i1, double *h)
{
    if (src->n_classes <= 0 && src->n_outputs == 1) { /* in registers */
        double W = 0, S = 0, Q = 0;
        for (int64_t k = i0; k < i1; k++) {
            int64_t i = start + (pairs[k] & 0xffffffff), r = src->rows[i];
            double w = src->w[i];
            W += w;
            S += w * src->y[2 * r];
            Q += w * src->y[2 * r + 1];
        }
        h[0] = (double)(i1 - i0);
        h[1] = W;
        h[2] = S;
        h[3] = Q;
        return;
    }
    for (int k = 0; k < src->V1; k++)
        h[k] = 0.0;
    for (int64_t k = i0; k < i1; k++)
        add_sample(src, start + (pairs[k] & 0xffffffff), h);
}

/* The same from the samples, sorted by code (stable), for a small node: each
 * run of equal codes is summed straight into its compact slot. */
static void bins_from_samples(const split_job *job, split_scratch *s, int32_t start,
                              int32_t end, int64_t f, int *nc, int *has_nan)
{
    const sample_src *src = &job->src;
    int64_t n = end - start;
    for (int64_t i = 0; i < n; i++) { /* insertion sort: n <= SMALL_NODE */
        int64_t code = gsb__forest_code(src->codes, src->stride, src->rows[start + i], f);
        int64_t key = code << 32 | i, j = i;
        while (j > 0 && s->pairs[j - 1] > key) {
            s->pairs[j] = s->pairs[j - 1];
            j--;
        }
        s->pairs[j] = key;
    }
    int V1 = src->V1;
    for (int64_t i = 0; i < n;) {
        int c = (int)(s->pairs[i] >> 32);
        double *h = c == job->d->nan_code ? s->nan : s->cstats + (int64_t)*nc * V1;
        int64_t i1 = i;
        while (i1 < n && (int)(s->pairs[i1] >> 32) == c)
            i1++;
        sum_run(src, start, s->pairs, i, i1, h);
        i = i1;
        if (c == job->d->nan_code)
            *has_nan = 1;
        else
            s->ccode[(*nc)++] = c;
    }
}

/* Write the record of candidate (prefix row i, with the missing bin left or not). */
static void write_rec(const split_job *job, split_scratch *s, int64_t f, int nc, int i,
                      int missing_left, int all_left, double proxy, double *rec)
{
    int V1 = job->src.V1;
    const double *lp = s->cstats + (int64_t)i * V1;
    rec[GSB__FREC_PROXY] = proxy;
    rec[GSB__FREC_FEATURE] = (double)f;
    rec[GSB__FREC_BIN_LO] = s->ccode[i];
    rec[GSB__FREC_BIN_HI] = all_left ? job->n_real : s->ccode[i + 1 < nc ? i + 1 : i];
    for (int k = 0; k < V1; k++) {
        double l = lp[k] + (missing_left ? s->nan[k] : 0.0);
        rec[GSB__FREC_LEFT + k] = l;
        rec[GSB__FREC_LEFT + V1 + k] = s->tot[k] - l;
    }
    if (!missing_left && !all_left && s->nan[0] < 0.5) /* no missing values: more samples */
        rec[GSB__FREC_MISSING_LEFT] = rec[GSB__FREC_LEFT] > rec[GSB__FREC_LEFT + V1];
    else
        rec[GSB__FREC_MISSING_LEFT] = missing_left;
}

/* The record of feature f in node [start, end) (slot: its pool histogram, or -1). */
static void split_feature(const split_job *job, split_scratch *s, int32_t start, int32_t end,
                          int32_t slot, int64_t f, double *rec)
{
    const gsb__forest_data *d = job->d;
    int V1 = job->src.V1, nc = 0, has_nan = 0;
    memset(s->nan, 0, (size_t)V1 * sizeof(double));
    if (slot >= 0) {
        const double *h = (const double *)d->pool->data + slot * hist_len(d) +
                          f * d->n_bins * V1;
        bins_from_hist(job, s, h, &nc, &has_nan);
    } else if (end - start <= SMALL_NODE) {
        bins_from_samples(job, s, start, end, f, &nc, &has_nan);
    } else {
        memset(s->hist, 0, (size_t)d->n_bins * V1 * sizeof(double));
        accumulate(&job->src, start, end, f, s->hist);
        bins_from_hist(job, s, s->hist, &nc, &has_nan);
    }
    /* prefix sums over the non-empty real bins; the node's total */
    for (int i = 1; i < nc; i++)
        for (int k = 0; k < V1; k++)
            s->cstats[(int64_t)i * V1 + k] += s->cstats[(int64_t)(i - 1) * V1 + k];
    for (int k = 0; k < V1; k++)
        s->tot[k] = (nc > 0 ? s->cstats[(int64_t)(nc - 1) * V1 + k] : 0.0) + s->nan[k];

    memset(rec, 0, (size_t)job->rec_len * sizeof(double));
    rec[GSB__FREC_PROXY] = -INFINITY;
    rec[GSB__FREC_FEATURE] = (double)f;
    rec[GSB__FREC_NONCONST] = nc + has_nan >= 2;
    if (nc + has_nan < 2)
        return;
    const gsb__forest_rule *r = job->rule;
    double ml = (double)r->min_samples_leaf, mw = r->min_weight_leaf;
    double best = -INFINITY;
    int best_i = -1, best_ml = 0, best_all = 0;
    /* in scikit-learn's order: missing right, all left, missing left */
    for (int pass = 0; pass < 3; pass++) {
        if (pass > 0 && !has_nan)
            break;
        int lo = pass == 1 ? nc - 1 : 0, hi = pass == 1 ? nc : nc - 1;
        for (int i = lo; i < hi; i++) {
            double p = gsb__forest_proxy(s->cstats + (int64_t)i * V1, pass == 2 ? s->nan : NULL,
                                         s->tot, d->n_classes, d->n_outputs, r->criterion, ml,
                                         mw);
            if (p > best) {
                best = p;
                best_i = i;
                best_ml = pass == 2;
                best_all = pass == 1;
            }
        }
    }
    if (best_i >= 0)
        write_rec(job, s, f, nc, best_i, best_ml, best_all, best, rec);
}

/* The record of node b over its features (feats row fr, m of them). */
static void split_node(const split_job *job, split_scratch *s, const int32_t *nd,
                       const int32_t *fr, int64_t m, double *out)
{
    double *cur = s->rec, *best = s->rec + job->rec_len;
    int nonconst = 0, have = 0;
    for (int64_t j = 0; j < m; j++) {
        if (fr[j] < 0)
            continue;
        split_feature(job, s, nd[0], nd[1], nd[2], fr[j], cur);
        if (cur[GSB__FREC_NONCONST] < 0.5)
            continue;
        nonconst++;
        if (job->rule->first_only && nonconst > 1)
            continue;
        if (cur[GSB__FREC_PROXY] > -INFINITY &&
            (!have || cur[GSB__FREC_PROXY] > best[GSB__FREC_PROXY])) {
            double *t = best;
            best = cur;
            cur = t;
            have = 1;
        }
    }
    if (have) {
        memcpy(out, best, (size_t)job->rec_len * sizeof(double));
    } else {
        memset(out, 0, (size_t)job->rec_len * sizeof(double));
        out[GSB__FREC_PROXY] = -INFINITY;
        out[GSB__FREC_FEATURE] = -1;
    }
    out[GSB__FREC_NONCONST] = nonconst;
}

int gsb__cpu_forest_split(const gsb__backend *be, const gsb__forest_data *d,
                          const gsb__tensor *nodes, const gsb__tensor *feats,
                          const gsb__forest_rule *rule, gsb__tensor *best)
{
    (void)be;
    const char *op = "forest_split";
    GSB_TRY(check_data(d, op));
    if (d->pool)
        GSB_TRY(check_pool(d, op));
    GSB_TRY(check_nodes(d, nodes, 0, op));
    GSB_TRY(check_feats(d, feats, nodes->rows, op));
    split_job job = {d, source_of(d), rule, d->nan_code >= 0 ? d->n_bins - 1 : d->n_bins, 0};
    job.rec_len = gsb__forest_rec_len(job.src.V1);
    GSB_TRY(cpu_check(best, GSB_F64, nodes->rows, job.rec_len, op, "best"));
    int64_t B = nodes->rows, m = feats->cols;
    const int32_t *nd = nodes->data, *fl = feats->data;
    double *out = best->data;
    int failed = 0;
    int64_t work = 0; /* sample visits: small batches run on this thread alone */
    for (int64_t b = 0; b < B; b++)
        work += (nd[3 * b + 1] - nd[3 * b] + d->n_bins) * m;
    int par = work > PARALLEL_WORK;
    if (B >= 4 * omp_get_max_threads() || !par) {
#pragma omp parallel reduction(| : failed) if (par)
        {
            split_scratch s;
            if (!scratch_alloc(&s, d->n_bins, job.src.V1, job.rec_len))
                failed = 1;
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = 0; b < B; b++)
                if (!failed)
                    split_node(&job, &s, nd + 3 * b, fl + b * m, m, out + b * job.rec_len);
            if (!failed)
                scratch_free(&s);
        }
    } else {
        /* few nodes: one task per (node, feature), then the same reduction */
        double *recs = cpu_alloc(B * m * job.rec_len, sizeof(double));
        if (!recs)
            return gsb__err(GSB_ENOMEM, "%s: out of memory for %lld records", op,
                            (long long)(B * m));
#pragma omp parallel reduction(| : failed) if (par)
        {
            split_scratch s;
            if (!scratch_alloc(&s, d->n_bins, job.src.V1, job.rec_len))
                failed = 1;
#pragma omp for collapse(2) schedule(dynamic, 1)
            for (int64_t b = 0; b < B; b++)
                for (int64_t j = 0; j < m; j++)
                    if (!failed && fl[b * m + j] >= 0)
                        split_feature(&job, &s, nd[3 * b], nd[3 * b + 1], nd[3 * b + 2],
                                      fl[b * m + j], recs + (b * m + j) * job.rec_len);
            if (!failed)
                scratch_free(&s);
        }
        for (int64_t b = 0; b < B && !failed; b++)
            gsb__forest_reduce(recs + b * m * job.rec_len, fl + b * m, (int)m, job.rec_len,
                               rule->first_only, out + b * job.rec_len);
        free(recs);
    }
    if (failed)
        return gsb__err(GSB_ENOMEM, "%s: out of memory for the split scratch", op);
    return GSB_OK;
}

/* ---- partition -------------------------------------------------------------------- */

int gsb__cpu_forest_partition(const gsb__backend *be, const gsb__forest_data *d,
                              const gsb__tensor *nodes, const gsb__tensor *splits,
                              gsb__tensor *n_left)
{
    (void)be;
    const char *op = "forest_partition";
    GSB_TRY(check_data(d, op));
    GSB_TRY(check_nodes(d, nodes, 0, op));
    int64_t B = nodes->rows, S = d->rows->rows * d->rows->cols;
    GSB_TRY(cpu_check(splits, GSB_I32, B, 3, op, "splits"));
    GSB_TRY(cpu_check_vec(n_left, GSB_I32, B, op, "n_left"));
    GSB_TRY(cpu_check_vec(d->scratch_rows, GSB_I32, S, op, "scratch_rows"));
    GSB_TRY(cpu_check_vec(d->scratch_weights, GSB_F32, S, op, "scratch_weights"));
    const int32_t *nd = nodes->data, *sp = splits->data;
    for (int64_t b = 0; b < B; b++)
        if (sp[3 * b] < 0 || sp[3 * b] >= d->n_features)
            return gsb__err(GSB_EINTERNAL, "%s: split feature %d", op, sp[3 * b]);
    const uint8_t *codes = d->codes->data;
    int64_t stride = 4 * d->codes->cols;
    int32_t *rows = d->rows->data, *srows = d->scratch_rows->data, *nl = n_left->data;
    float *w = d->weights->data, *sw = d->scratch_weights->data;
    int64_t work = 0;
    for (int64_t b = 0; b < B; b++)
        work += nd[3 * b + 1] - nd[3 * b];
#pragma omp parallel for schedule(dynamic, 1) if (work > PARALLEL_WORK)
    for (int64_t b = 0; b < B; b++) {
        int32_t start = nd[3 * b], end = nd[3 * b + 1], k = start;
        int f = sp[3 * b], bin = sp[3 * b + 1], miss_left = sp[3 * b + 2];
        for (int pass = 0; pass < 2; pass++) { /* left ones, then right ones, in order */
            for (int32_t i = start; i < end; i++) {
                int c = gsb__forest_code(codes, stride, rows[i], f);
                int left = c == d->nan_code ? miss_left : c <= bin;
                if (left == (pass == 0)) {
                    srows[k] = rows[i];
                    sw[k++] = w[i];
                }
            }
            if (pass == 0)
                nl[b] = k - start;
        }
        memcpy(rows + start, srows + start, (size_t)(end - start) * sizeof *rows);
        memcpy(w + start, sw + start, (size_t)(end - start) * sizeof *w);
    }
    return GSB_OK;
}
