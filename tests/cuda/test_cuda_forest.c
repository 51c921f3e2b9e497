/*
 * test_cuda_forest.c - the CUDA forest ops (cuda_forest.cu) against their CPU
 * twins (cpu_forest.c) on fresh random data, then the estimators on
 * device=cuda against device=cpu.
 *
 *  forest_bin: codes equal, float32 and float64 X with NaN, padded edges.
 *  forest_hist: every pool slot, all features and feature lists (-1
 *    entries, a feature listed twice in a row: its histogram once; lists on
 *    the host and on the device): counts equal, weighted sums within 1e-12
 *    relative (the GPU adds in another order); classification and
 *    regression, with and without missing values, histograms through shared
 *    memory and (many classes) straight to the pool.
 *  forest_hist_sub: the same subtraction on equal pools gives equal pools.
 *  forest_split: the records of nodes with and without pool slots, feature
 *    lists with -1 entries, first_only, min_samples_leaf, min_weight_leaf,
 *    every criterion: the same feature, bins, direction of missing values and
 *    count of non-constant features, proxies and stats within 1e-9 relative;
 *    a different choice is accepted only when the two proxies tie within it,
 *    and never with integral weights and gini (every sum is then exact);
 *    index tensors on the host and on the device; large nodes (thousands of
 *    samples: split_kernel's block per (node, feature), from a slot or
 *    summed), nodes of 0 to 160 samples, tiny ones (0 to 24: many constant
 *    features) so nodes of at most 64 samples without a slot go through the
 *    warp-per-node path (split_small), nodes of ~1200 samples (the warp per
 *    node and feature of split_mid where the histogram fits, split_kernel
 *    otherwise); over 4224 (node, feature) items of small and mid-size nodes
 *    mixed, so split_kernel's blocks take chunks of several items and skip
 *    the others'.
 *  forest_partition: samples and counts equal.
 *  (forest_predict: test_cuda_forest_predict.c.)
 *  Estimators: a classifier and a regressor fitted on each device predict
 *  the same classes on >= 99% of rows and close values; the classifier's GPU
 *  fit reproduces itself bitwise.
 * Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c/test_api_helpers.h"
#include "backend/forest_math.h"
#include "cuda_testing.h"

static double urand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) * 0x1.0p-53;
}

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        abort();
    return p;
}

static gsb__tensor hzeros(gsb_dtype dt, int64_t rows, int64_t cols)
{
    gsb__tensor t;
    if (gsb__tensor_zeros(cpu, dt, rows, cols, &t) != GSB_OK)
        abort();
    return t;
}

/* ---- a random problem, on both backends ------------------------------------------- */

typedef struct side {
    gsb__tensor codes, y, rows, w, srows, sw, pool;
    gsb__forest_data d;
} side;

typedef struct problem {
    int64_t n, F, S, B;
    int n_bins, nan_code, K, O, V1;
    int exact;         /* integral weights: every histogram sum exact */
    side h, g;         /* host (CPU twin) and GPU */
    int32_t *nodes;    /* B x 3 */
} problem;

static void side_data(side *s, const problem *p)
{
    s->d = (gsb__forest_data){&s->codes, p->F, p->n_bins, p->nan_code, p->K, p->O, &s->y,
                              &s->rows, &s->w, &s->srows, &s->sw, &s->pool};
}

/* As test_forest.c's: n rows of F codes, classes or outputs, samples with weights
 * (integral: 1 or 2), B nodes in random segments (one empty), slot b for node b. */
static void problem_make(problem *p, uint64_t seed, int64_t n, int64_t F, int n_bins, int nan,
                         int K, int O, int64_t B, int integral)
{
    memset(p, 0, sizeof *p);
    uint64_t s = seed * 2654435761u + 7;
    p->n = n;
    p->F = F;
    p->n_bins = n_bins;
    p->nan_code = nan ? n_bins - 1 : -1;
    p->K = K;
    p->O = O;
    p->V1 = gsb__forest_nstats(K, O);
    p->B = B;
    p->exact = integral && K > 0;
    side *h = &p->h;
    h->codes = hzeros(GSB_I32, n, (F + 3) / 4);
    uint8_t *c = h->codes.data;
    int64_t stride = 4 * h->codes.cols;
    int n_real = nan ? n_bins - 1 : n_bins;
    for (int64_t i = 0; i < n; i++)
        for (int64_t f = 0; f < F; f++) {
            int v = f == 1 ? (int)(urand(&s) * 3) * (n_real / 3) : (int)(urand(&s) * n_real);
            if (nan && (f == 0 || f == 2) && urand(&s) < 0.125)
                v = p->nan_code;
            c[i * stride + f] = (uint8_t)v;
        }
    if (K > 0) {
        h->y = hzeros(GSB_I32, n, 1);
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)h->y.data)[i] = (int32_t)(urand(&s) < 0.5 ? c[i * stride] * K / n_bins
                                                                  : urand(&s) * K) % K;
    } else {
        h->y = hzeros(GSB_F64, n, 2 * O);
        double *y = h->y.data;
        for (int64_t i = 0; i < n; i++)
            for (int k = 0; k < O; k++) {
                double v = 0.01 * c[i * stride + k % F] + urand(&s) + k;
                y[i * 2 * O + k] = v;
                y[i * 2 * O + O + k] = v * v;
            }
    }
    int32_t *rows = xmalloc((size_t)n * sizeof *rows);
    float *w = xmalloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < n; i++)
        if (urand(&s) < 0.8) {
            rows[p->S] = (int32_t)i;
            w[p->S++] = integral ? (float)(1 + (urand(&s) < 0.3))
                                 : (float)(0.5 + 2.5 * urand(&s));
        }
    h->rows = hzeros(GSB_I32, p->S, 1);
    h->w = hzeros(GSB_F32, p->S, 1);
    memcpy(h->rows.data, rows, (size_t)p->S * sizeof *rows);
    memcpy(h->w.data, w, (size_t)p->S * sizeof *w);
    free(rows);
    free(w);
    h->srows = hzeros(GSB_I32, p->S, 1);
    h->sw = hzeros(GSB_F32, p->S, 1);
    h->pool = hzeros(GSB_F64, B + 2, F * n_bins * p->V1);
    p->nodes = xmalloc((size_t)B * 3 * sizeof *p->nodes);
    int64_t at = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t len = b == B - 1 ? p->S - at : b == 1 ? 0 : (int64_t)(urand(&s) * 2.0 * p->S / B);
        if (at + len > p->S)
            len = p->S - at;
        p->nodes[3 * b] = (int32_t)at;
        p->nodes[3 * b + 1] = (int32_t)(at + len);
        p->nodes[3 * b + 2] = (int32_t)b;
        at += len;
    }
    side *g = &p->g;
    g->codes = to_gpu(&h->codes);
    g->y = to_gpu(&h->y);
    g->rows = to_gpu(&h->rows);
    g->w = to_gpu(&h->w);
    g->srows = to_gpu(&h->srows);
    g->sw = to_gpu(&h->sw);
    g->pool = gpu_poisoned(GSB_F64, B + 2, F * n_bins * p->V1);
    side_data(h, p);
    side_data(g, p);
}

static void side_free(side *s)
{
    gsb__tensor_free(&s->codes);
    gsb__tensor_free(&s->y);
    gsb__tensor_free(&s->rows);
    gsb__tensor_free(&s->w);
    gsb__tensor_free(&s->srows);
    gsb__tensor_free(&s->sw);
    gsb__tensor_free(&s->pool);
}

static void problem_free(problem *p)
{
    side_free(&p->h);
    side_free(&p->g);
    free(p->nodes);
}

/* the pools of both sides agree: counts (stat 0) equal, sums within tol; NaN
 * (the poison of what neither side wrote) only where both have it */
static int pools_agree(const problem *p, double tol)
{
    gsb__tensor gh = from_gpu(&p->g.pool);
    int64_t N = gh.rows * gh.cols;
    const double *a = gh.data, *b = p->h.pool.data;
    int bad = 0;
    for (int64_t i = 0; i < N; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            bad += isnan(a[i]) != isnan(b[i]);
            continue;
        }
        double scale = fmax(1.0, fabs(b[i]));
        bad += i % p->V1 == 0 ? a[i] != b[i] : fabs(a[i] - b[i]) > tol * scale;
    }
    gsb__tensor_free(&gh);
    return bad;
}

/* ---- ops -------------------------------------------------------------------------- */

static void test_bin(void)
{
    for (int dt = 0; dt < 2; dt++) {
        int before = case_begin();
        uint64_t s = 5 + dt;
        int64_t n = 20011, d = 13, e = 9;
        gsb__tensor X = hzeros(dt ? GSB_F64 : GSB_F32, n, d), E = hzeros(GSB_F32, d, e);
        for (int64_t f = 0; f < d; f++)
            for (int64_t j = 0; j < e; j++)
                ((float *)E.data)[f * e + j] = f % 3 == 0 && j >= 4 ? INFINITY : (float)(j - 4);
        for (int64_t i = 0; i < n * d; i++)
            gsb__tensor_set(&X, i, urand(&s) < 0.05 ? NAN : urand(&s) < 0.2
                                                             ? (double)(int)(9 * urand(&s)) - 4
                                                             : 12 * urand(&s) - 6);
        gsb__tensor ch = host_poisoned(GSB_I32, n, (d + 3) / 4);
        gsb__tensor cg = gpu_poisoned(GSB_I32, n, (d + 3) / 4);
        gsb__tensor Xg = to_gpu(&X), Eg = to_gpu(&E);
        CHECK_OK(cpu->ops->forest_bin(cpu, &X, &E, 200, &ch));
        CHECK_OK(gpu->ops->forest_bin(gpu, &Xg, &Eg, 200, &cg));
        CHECK_MATCH(&cg, &ch, 0.0);
        gsb__tensor_free(&X);
        gsb__tensor_free(&E);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&Eg);
        gsb__tensor_free(&ch);
        gsb__tensor_free(&cg);
        CASE_END(before, "bin dtype %d", dt);
    }
}

/* K, O, nan, bins, features, rows */
static const int shapes[][6] = {
    {3, 0, 1, 64, 7, 30000},   {2, 0, 0, 128, 32, 20000}, {0, 1, 0, 128, 9, 40000},
    {0, 3, 1, 32, 5, 15000},   {10, 0, 1, 255, 6, 8000},  {300, 0, 0, 128, 3, 5000},
    {20, 0, 1, 16, 5, 8000}, /* 21 stats: no warp-per-node path; split_mid from 0 samples */
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

static void test_hist(void)
{
    for (int sh = 0; sh < N_SHAPES; sh++) {
        for (int with_list = 0; with_list < 2; with_list++) {
            int before = case_begin();
            problem p;
            problem_make(&p, 11 + sh, shapes[sh][5], shapes[sh][4], shapes[sh][3], shapes[sh][2],
                         shapes[sh][0], shapes[sh][1], 9, sh % 2);
            /* the host pool starts as the GPU's (poisoned): unlisted features stay */
            gsb__tensor poisoned = from_gpu(&p.g.pool);
            memcpy(p.h.pool.data, poisoned.data, gsb__tensor_nbytes(&poisoned));
            gsb__tensor_free(&poisoned);
            int64_t m = with_list ? 3 : p.F;
            int32_t *feats = xmalloc((size_t)(p.B * m) * sizeof *feats);
            uint64_t s = 3;
            for (int64_t i = 0; i < p.B * m; i++)
                feats[i] = urand(&s) < 0.2 ? -1 : (int32_t)(urand(&s) * p.F);
            if (with_list) /* a repeat in node 0's row, whatever F: set once, not added twice */
                feats[0] = feats[2] = 0;
            gsb__tensor nt = gsb__tensor_host_view(p.nodes, GSB_I32, p.B, 3);
            gsb__tensor ft = gsb__tensor_host_view(feats, GSB_I32, p.B, m);
            CHECK_OK(cpu->ops->forest_hist(cpu, &p.h.d, &nt, with_list ? &ft : NULL));
            /* odd shapes: the list on the device */
            gsb__tensor fg = with_list && sh % 2 ? to_gpu(&ft) : ft;
            CHECK_OK(gpu->ops->forest_hist(gpu, &p.g.d, &nt, with_list ? &fg : NULL));
            if (fg.data != ft.data)
                gsb__tensor_free(&fg);
            int bad = pools_agree(&p, 1e-12);
            if (bad)
                fprintf(stderr, "  %d pool values differ\n", bad);
            CHECK(bad == 0);
            /* subtraction of equal pools: equal pools */
            gsb__tensor hp = to_gpu(&p.h.pool);
            gsb__tensor_free(&p.g.pool);
            p.g.pool = hp;
            int32_t pairs[4] = {0, 1, 2, (int32_t)p.B};
            gsb__tensor pt = gsb__tensor_host_view(pairs, GSB_I32, 2, 2);
            CHECK_OK(cpu->ops->forest_hist_sub(cpu, &p.h.d, &pt));
            CHECK_OK(gpu->ops->forest_hist_sub(gpu, &p.g.d, &pt));
            CHECK(pools_agree(&p, 0.0) == 0);
            free(feats);
            problem_free(&p);
            CASE_END(before, "hist shape %d list %d", sh, with_list);
        }
    }
}

/* The GPU's and the CPU's records of one split call agree. */
static void compare_split(problem *p, int crit, int64_t m, int first_only, int64_t min_leaf,
                          double min_weight, int use_pool, int device_index)
{
    int32_t *feats = xmalloc((size_t)(p->B * m) * sizeof *feats);
    int32_t *nodes = xmalloc((size_t)p->B * 3 * sizeof *nodes);
    uint64_t s = 77 + (uint64_t)m + (uint64_t)crit;
    for (int64_t i = 0; i < p->B * m; i++)
        feats[i] = urand(&s) < 0.1 ? -1 : (int32_t)(urand(&s) * p->F);
    memcpy(nodes, p->nodes, (size_t)p->B * 3 * sizeof *nodes);
    gsb__tensor nt = gsb__tensor_host_view(nodes, GSB_I32, p->B, 3);
    if (use_pool) {
        CHECK_OK(cpu->ops->forest_hist(cpu, &p->h.d, &nt, NULL));
        CHECK_OK(gpu->ops->forest_hist(gpu, &p->g.d, &nt, NULL));
    } else {
        for (int64_t b = 0; b < p->B; b++)
            nodes[3 * b + 2] = -1;
    }
    int R = gsb__forest_rec_len(p->V1);
    gsb__tensor ft = gsb__tensor_host_view(feats, GSB_I32, p->B, m);
    gsb__tensor bh = host_poisoned(GSB_F64, p->B, R), bg = host_poisoned(GSB_F64, p->B, R);
    gsb__forest_rule rule = {crit, min_leaf, min_weight, first_only};
    CHECK_OK(cpu->ops->forest_split(cpu, &p->h.d, &nt, &ft, &rule, &bh));
    if (device_index) { /* index tensors and the result on the device */
        gsb__tensor ng = to_gpu(&nt), fg = to_gpu(&ft), og = gpu_poisoned(GSB_F64, p->B, R);
        CHECK_OK(gpu->ops->forest_split(gpu, &p->g.d, &ng, &fg, &rule, &og));
        gsb__tensor back = from_gpu(&og);
        memcpy(bg.data, back.data, gsb__tensor_nbytes(&back));
        gsb__tensor_free(&back);
        gsb__tensor_free(&ng);
        gsb__tensor_free(&fg);
        gsb__tensor_free(&og);
    } else {
        CHECK_OK(gpu->ops->forest_split(gpu, &p->g.d, &nt, &ft, &rule, &bg));
    }
    int bad = 0, ties = 0;
    for (int64_t b = 0; b < p->B; b++) {
        const double *c = (const double *)bh.data + b * R, *g = (const double *)bg.data + b * R;
        double pc = c[GSB__FREC_PROXY], pg = g[GSB__FREC_PROXY];
        int same = c[GSB__FREC_FEATURE] == g[GSB__FREC_FEATURE] &&
                   c[GSB__FREC_BIN_LO] == g[GSB__FREC_BIN_LO] &&
                   c[GSB__FREC_BIN_HI] == g[GSB__FREC_BIN_HI] &&
                   c[GSB__FREC_MISSING_LEFT] == g[GSB__FREC_MISSING_LEFT];
        bad += c[GSB__FREC_NONCONST] != g[GSB__FREC_NONCONST] || isnan(pg);
        if (pc == -INFINITY || pg == -INFINITY) {
            bad += pc != pg || !same;
            continue;
        }
        double tol = 1e-9 * fmax(1.0, fabs(pc));
        if (!same) { /* only a tie may be broken otherwise */
            ties++;
            bad += fabs(pc - pg) > tol;
            continue;
        }
        bad += fabs(pc - pg) > tol;
        for (int k = GSB__FREC_LEFT; k < R; k++)
            bad += !(fabs(c[k] - g[k]) <= 1e-9 * fmax(1.0, fabs(c[k])));
    }
    if (ties)
        printf("  split crit %d: %d near-ties broken differently\n", crit, ties);
    CHECK(bad == 0);
    CHECK(!(p->exact && crit == GSB__FOREST_GINI) || ties == 0);
    gsb__tensor_free(&bh);
    gsb__tensor_free(&bg);
    free(feats);
    free(nodes);
}

static void test_split(void)
{
    static const int crits[] = {GSB__FOREST_GINI, GSB__FOREST_GINI,    GSB__FOREST_MSE,
                                GSB__FOREST_MSE,  GSB__FOREST_ENTROPY, GSB__FOREST_GINI,
                                GSB__FOREST_ENTROPY};
    for (int sh = 0; sh < N_SHAPES; sh++) {
        /* 4 large nodes (split_kernel, also without a slot), 300 of ~80 samples, tiny;
         * many (node, feature) items of small and mid-size nodes mixed (more than
         * split_kernel's grid: its blocks take chunks of items and skip the others');
         * nodes of ~1200 samples (split_mid's, a few split_kernel's) */
        for (int many = 0; many < 5; many++) {
            int before = case_begin();
            problem p;
            int64_t rows = shapes[sh][5] / (many == 2 ? 10 : 1);
            problem_make(&p, 40 + sh, rows, shapes[sh][4], shapes[sh][3], shapes[sh][2],
                         shapes[sh][0], shapes[sh][1],
                         many == 0 ? 4 : many == 1 ? 300 : many == 2 ? rows / 15
                         : many == 3 ? rows / 75 : rows / 1500 + 1,
                         sh % 2);
            int crit = crits[sh];
            if (p.V1 * p.n_bins * 8 > 200 * 1024) { /* too big for shared memory */
                int32_t f[4] = {0, 1, 2, 0};
                gsb__tensor nt = gsb__tensor_host_view(p.nodes, GSB_I32, p.B, 3);
                gsb__tensor ft = gsb__tensor_host_view(f, GSB_I32, p.B, 1);
                gsb__tensor best = hzeros(GSB_F64, p.B, gsb__forest_rec_len(p.V1));
                gsb__forest_rule rule = {crit, 1, 0.0, 0};
                if (p.B == 4)
                    CHECK_ERR(gpu->ops->forest_split(gpu, &p.g.d, &nt, &ft, &rule, &best),
                              GSB_EUNSUPPORTED, "shared memory");
                gsb__tensor_free(&best);
                problem_free(&p);
                CASE_END(before, "split shape %d many %d", sh, many);
                continue;
            }
            if (many == 3) { /* 24 features a node: over 4224 items (132 SMs x 32) */
                compare_split(&p, crit, 24, 0, 1, 0.0, 0, 1);
                compare_split(&p, crit, 24, 1, 1, 0.0, 0, 0);
                problem_free(&p);
                CASE_END(before, "split shape %d many %d", sh, many);
                continue;
            }
            compare_split(&p, crit, 3, 0, 1, 0.0, 0, 0);
            compare_split(&p, crit, 3, 0, 1, 0.0, 1, 1);
            compare_split(&p, crit, 4, 1, 1, 0.0, 0, 0);
            compare_split(&p, crit, 2, 0, 9, 0.0, 1, 0);
            compare_split(&p, crit, 3, 0, 1, 40.0, 0, 1);
            if (p.K == 0)
                compare_split(&p, GSB__FOREST_POISSON, 3, 0, 1, 0.0, 1, 0);
            problem_free(&p);
            CASE_END(before, "split shape %d many %d", sh, many);
        }
    }
}

static void test_partition(void)
{
    for (int sh = 0; sh < 3; sh++) {
        int before = case_begin();
        problem p;
        /* one big node (many chunks) among small ones */
        problem_make(&p, 60 + sh, sh == 0 ? 200000 : 20000, 6, 40, sh != 1, 3, 0,
                     sh == 0 ? 3 : 500, 1);
        int32_t *splits = xmalloc((size_t)p.B * 3 * sizeof *splits);
        uint64_t s = 17 + sh;
        for (int64_t b = 0; b < p.B; b++) {
            splits[3 * b] = (int32_t)(urand(&s) * p.F);
            splits[3 * b + 1] = (int32_t)(urand(&s) * 40);
            splits[3 * b + 2] = urand(&s) < 0.5;
        }
        gsb__tensor nt = gsb__tensor_host_view(p.nodes, GSB_I32, p.B, 3);
        gsb__tensor st = gsb__tensor_host_view(splits, GSB_I32, p.B, 3);
        gsb__tensor lh = host_poisoned(GSB_I32, p.B, 1), lg = host_poisoned(GSB_I32, p.B, 1);
        CHECK_OK(cpu->ops->forest_partition(cpu, &p.h.d, &nt, &st, &lh));
        CHECK_OK(gpu->ops->forest_partition(gpu, &p.g.d, &nt, &st, &lg));
        CHECK_MATCH(&lg, &lh, 0.0);
        CHECK_MATCH(&p.g.rows, &p.h.rows, 0.0);
        CHECK_MATCH(&p.g.w, &p.h.w, 0.0);
        free(splits);
        gsb__tensor_free(&lh);
        gsb__tensor_free(&lg);
        problem_free(&p);
        CASE_END(before, "partition shape %d", sh);
    }
}

/* ---- the estimators on both devices ----------------------------------------------- */

static double *predict_values(gsb_model *m, const char *method, const gsb_array *X, int64_t *n)
{
    gsb_result *r = NULL;
    const gsb_array *ins[1] = {X};
    int rc = gsb_model_call(m, method, ins, 1, NULL, &r);
    CHECK_OK(rc);
    *n = 0;
    if (rc != GSB_OK)
        return xmalloc(8);
    const gsb_array *a = gsb_result_array(r, 0);
    *n = testing_numel(a);
    double *out = xmalloc((size_t)*n * sizeof *out);
    testing_copy(a, out, *n);
    gsb_result_free(r);
    return out;
}

static gsb_model *fit_on(gsb_session *s, const char *est, const char *params,
                         const gsb_array *X, const gsb_array *y)
{
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(s, est, params, &m));
    if (m)
        CHECK_OK(gsb_model_fit(m, X, y));
    return m;
}

static void test_estimators(void)
{
    int64_t n = 30000, d = 16;
    double *X = xmalloc((size_t)(n * d) * sizeof *X), *yc = xmalloc((size_t)n * 8);
    double *yr = xmalloc((size_t)n * 8);
    uint64_t s = 123;
    for (int64_t i = 0; i < n; i++) {
        double t = 0;
        for (int64_t j = 0; j < d; j++) {
            X[i * d + j] = urand(&s) < 0.02 ? NAN : 2 * urand(&s) - 1;
            t += j < 4 && !isnan(X[i * d + j]) ? X[i * d + j] * (j + 1) : 0;
        }
        yc[i] = t > 1 ? 2 : t > -1 ? 1 : 0;
        yr[i] = t + 0.1 * urand(&s);
    }
    gsb_array xa = gsb_array_2d(X, GSB_F64, n, d), ca = gsb_array_1d(yc, GSB_F64, n);
    gsb_array ra = gsb_array_1d(yr, GSB_F64, n);
    gsb_session *sc = NULL, *sg = NULL;
    CHECK_OK(gsb_open("local?device=cpu", &sc));
    CHECK_OK(gsb_open("local?device=cuda", &sg));
    const char *ests[2] = {"RandomForestClassifier", "RandomForestRegressor"};
    const gsb_array *ys[2] = {&ca, &ra};
    const char *params = "{\"n_estimators\": 20, \"random_state\": 3, \"max_depth\": 14}";
    for (int e = 0; e < 2 && sc && sg; e++) {
        int before = case_begin();
        gsb_model *mc = fit_on(sc, ests[e], params, &xa, ys[e]);
        gsb_model *mg = fit_on(sg, ests[e], params, &xa, ys[e]);
        gsb_model *mg2 = fit_on(sg, ests[e], params, &xa, ys[e]);
        int64_t nc = 0, ng = 0, ng2 = 0;
        double *pc = mc ? predict_values(mc, "predict", &xa, &nc) : NULL;
        double *pg = mg ? predict_values(mg, "predict", &xa, &ng) : NULL;
        double *pg2 = mg2 ? predict_values(mg2, "predict", &xa, &ng2) : NULL;
        CHECK(nc == n && ng == n && ng2 == n);
        int64_t differ = 0;
        double worst = 0;
        for (int64_t i = 0; i < n && nc == n && ng == n; i++) {
            differ += pc[i] != pg[i];
            worst = fmax(worst, fabs(pc[i] - pg[i]));
        }
        if (e == 0)
            CHECK(differ <= n / 100);
        else
            CHECK(worst <= 0.5);
        /* repeatable: bitwise for the classifier (bootstrap counts: exact sums); the
         * regressor's sums of targets are added in any order by the atomics */
        int same = ng2 == ng && memcmp(pg, pg2, (size_t)ng * sizeof *pg) == 0;
        if (e == 0)
            CHECK(same);
        else if (!same)
            printf("  %s: two GPU fits differ (a near tie broken otherwise)\n", ests[e]);
        printf("  %s: %lld of %lld predictions differ between devices (max %g)\n", ests[e],
               (long long)differ, (long long)n, worst);
        free(pc);
        free(pg);
        free(pg2);
        gsb_model_free(mc);
        gsb_model_free(mg);
        gsb_model_free(mg2);
        CASE_END(before, "%s", ests[e]);
    }
    gsb_close(sc);
    gsb_close(sg);
    free(X);
    free(yc);
    free(yr);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_bin);
    RUN(test_hist);
    RUN(test_split);
    RUN(test_partition);
    RUN(test_estimators);
    return testing_done();
}
