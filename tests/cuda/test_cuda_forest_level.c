/*
 * test_cuda_forest_level.c - the level ops of breadth-first forest growth
 * (cuda_forest_level.cu) against their CPU twins (cpu_forest_level.c) on
 * fresh random data, level by level through whole trees, then GPU fits by
 * the level grower against the host grower.
 *
 *  Levels: every level of a group of trees grown to full depth, each op given
 *    the same inputs on both backends (the records from the CPU's
 *    forest_split, uploaded): forest_level_feats (both passes: half the
 *    features are constant, so drawn features are often all constant) gives
 *    the same map, candidates, segments and draws (and with slots, the
 *    segments carry each candidate's); forest_level_decide the
 *    same nodes, splits, children, stats, tree counts and count of splits,
 *    importance terms within 1e-12 relative; forest_level_partition the same
 *    samples, weights and owners, and no disagreement.  Classification with
 *    integral weights, regression with missing values, min_samples_leaf 3 and
 *    max_depth 6.
 *  Fits: a classifier and a regressor on device=cuda through the level grower
 *    and through the host grower (GSB_FOREST_GROWER=host) predict the same
 *    (the classifier bitwise: integral weights make every sum exact).
 * Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c/test_api_helpers.h"
#include "backend/forest_level.h"
#include "cuda_testing.h"

static double urand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) * 0x1.0p-53;
}

static gsb__tensor hzeros(gsb_dtype dt, int64_t rows, int64_t cols)
{
    gsb__tensor t;
    if (gsb__tensor_zeros(cpu, dt, rows, cols, &t) != GSB_OK)
        abort();
    return t;
}

/* The first rows of t (a borrowed view). */
static gsb__tensor first(const gsb__tensor *t, int64_t rows) { return gsb__tensor_rows(t, 0, rows); }

/* Equal element for element (ints, or doubles within tol relative). */
#define CHECK_SAME(g, h, tol) CHECK_MATCH((g), (h), (tol))

/* ---- the data of a group of trees, on both backends -------------------------------- */

typedef struct side {
    gsb__tensor codes, y, rows, w, srows, sw;
    gsb__forest_data d;
} side;

typedef struct group {
    int64_t n, F, T, S;
    int K, O, V1, R, n_bins, nan_code;
    side h, g;
    gsb__tensor front, stats, seeds, root_w, tcount, owner; /* host: the first level */
} group;

static void side_bind(side *s, const group *p)
{
    s->d = (gsb__forest_data){&s->codes, p->F, p->n_bins, p->nan_code, p->K, p->O, &s->y,
                              &s->rows, &s->w, &s->srows, &s->sw, NULL};
}

/* n rows of F codes (features >= F / 2 constant), T trees of distinct rows with
 * weights 1 .. 3. */
static void group_make(group *p, uint64_t seed, int64_t n, int64_t F, int64_t T, int K, int O,
                       int nan)
{
    memset(p, 0, sizeof *p);
    uint64_t s = seed * 2654435761u + 11;
    p->n = n;
    p->F = F;
    p->T = T;
    p->K = K;
    p->O = O;
    p->V1 = gsb__forest_nstats(K, O);
    p->R = gsb__forest_rec_len(p->V1);
    p->n_bins = 32;
    p->nan_code = nan ? p->n_bins - 1 : -1;
    side *h = &p->h;
    h->codes = hzeros(GSB_I32, n, (F + 3) / 4);
    uint8_t *c = h->codes.data;
    int64_t stride = 4 * h->codes.cols;
    for (int64_t i = 0; i < n; i++)
        for (int64_t f = 0; f < F; f++) {
            int v = f < F / 2 ? (int)(urand(&s) * (f == 1 ? 3 : 31)) : 5;
            if (nan && f == 0 && urand(&s) < 0.1)
                v = p->nan_code;
            c[i * stride + f] = (uint8_t)v;
        }
    if (K > 0) {
        h->y = hzeros(GSB_I32, n, 1);
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)h->y.data)[i] =
                (int32_t)((urand(&s) < 0.6 ? c[i * stride] * K / 32 : urand(&s) * K)) % K;
    } else {
        h->y = hzeros(GSB_F64, n, 2 * O);
        double *y = h->y.data;
        for (int64_t i = 0; i < n; i++)
            for (int k = 0; k < O; k++) {
                double v = 0.1 * c[i * stride + 2 + k] + urand(&s) + k;
                y[i * 2 * O + k] = v;
                y[i * 2 * O + O + k] = v * v;
            }
    }
    int32_t *rows = calloc((size_t)(n * T), sizeof *rows);
    float *w = calloc((size_t)(n * T), sizeof *w);
    int32_t *front = calloc((size_t)(T * GSB__FLV_FRONT), sizeof *front);
    if (!rows || !w || !front)
        abort();
    p->stats = hzeros(GSB_F64, T, p->V1);
    p->seeds = hzeros(GSB_I64, T, 1);
    p->root_w = hzeros(GSB_F64, T, 1);
    p->tcount = hzeros(GSB_I32, T, 1);
    for (int64_t t = 0; t < T; t++) {
        int32_t *x = front + t * GSB__FLV_FRONT;
        double *st = (double *)p->stats.data + t * p->V1;
        x[GSB__FLV_TREE] = (int32_t)t;
        x[GSB__FLV_START] = (int32_t)p->S;
        for (int64_t i = 0; i < n; i++)
            if (urand(&s) < 0.65) {
                float wi = (float)(1 + (int)(urand(&s) * 3));
                rows[p->S] = (int32_t)i;
                w[p->S++] = wi;
                st[0] += 1;
                if (K > 0) {
                    st[1 + ((int32_t *)h->y.data)[i]] += wi;
                } else {
                    st[1] += wi;
                    for (int k = 0; k < 2 * O; k++)
                        st[2 + k] += wi * ((double *)h->y.data)[i * 2 * O + k];
                }
            }
        x[GSB__FLV_END] = (int32_t)p->S;
        ((int64_t *)p->seeds.data)[t] = (int64_t)(seed * 1000 + (uint64_t)t * 7919);
        ((double *)p->root_w.data)[t] = gsb__forest_weight(st, K);
        ((int32_t *)p->tcount.data)[t] = 1;
    }
    p->front = hzeros(GSB_I32, T, GSB__FLV_FRONT);
    memcpy(p->front.data, front, (size_t)(T * GSB__FLV_FRONT) * sizeof *front);
    p->owner = hzeros(GSB_I32, p->S, 1);
    for (int64_t t = 0; t < T; t++)
        for (int32_t j = front[t * GSB__FLV_FRONT + GSB__FLV_START];
             j < front[t * GSB__FLV_FRONT + GSB__FLV_END]; j++)
            ((int32_t *)p->owner.data)[j] = (int32_t)t;
    h->rows = hzeros(GSB_I32, p->S, 1);
    h->w = hzeros(GSB_F32, p->S, 1);
    memcpy(h->rows.data, rows, (size_t)p->S * sizeof *rows);
    memcpy(h->w.data, w, (size_t)p->S * sizeof *w);
    h->srows = hzeros(GSB_I32, p->S, 1);
    h->sw = hzeros(GSB_F32, p->S, 1);
    free(rows);
    free(w);
    free(front);
    side *g = &p->g;
    g->codes = to_gpu(&h->codes);
    g->y = to_gpu(&h->y);
    g->rows = to_gpu(&h->rows);
    g->w = to_gpu(&h->w);
    g->srows = to_gpu(&h->srows);
    g->sw = to_gpu(&h->sw);
    side_bind(h, p);
    side_bind(g, p);
}

static void group_free(group *p)
{
    side *sides[2] = {&p->h, &p->g};
    for (int k = 0; k < 2; k++) {
        gsb__tensor *all[] = {&sides[k]->codes, &sides[k]->y, &sides[k]->rows, &sides[k]->w,
                              &sides[k]->srows, &sides[k]->sw};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            gsb__tensor_free(all[i]);
    }
    gsb__tensor *all[] = {&p->front, &p->stats, &p->seeds, &p->root_w, &p->tcount, &p->owner};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

/* ---- one level on both backends ---------------------------------------------------- */

/* The tensors of a level on one backend. */
typedef struct lvt {
    gsb__tensor front, stats, map, map2, seg, feats, recs, recs2, nodes, imp, splits, kids,
        kid_stats, counts;
} lvt;

static void lvt_free(lvt *t)
{
    gsb__tensor *all[] = {&t->front, &t->stats, &t->map,    &t->map2,   &t->seg,
                          &t->feats, &t->recs,  &t->recs2,  &t->nodes,  &t->imp,
                          &t->splits, &t->kids, &t->kid_stats, &t->counts};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static int32_t count0(const gsb__tensor *counts, int k)
{
    gsb__tensor h = from_gpu(counts);
    int32_t v = ((int32_t *)h.data)[k];
    gsb__tensor_free(&h);
    return v;
}

/* One pass on both: feats compared; the CPU's records, uploaded.  Returns the
 * candidates. */
static int64_t pass_both(group *p, const gsb__forest_grow_rule *rule, int pass,
                         gsb__forest_level *lh, gsb__forest_level *lg, lvt *H, lvt *G)
{
    int64_t n = lh->n, F = p->F, m = rule->max_features, w = pass ? F - m : m;
    gsb__tensor *mh = pass ? &H->map2 : &H->map, *mg = pass ? &G->map2 : &G->map;
    gsb__tensor *rh = pass ? &H->recs2 : &H->recs, *rg = pass ? &G->recs2 : &G->recs;
    *mh = hzeros(GSB_I32, n, 1);
    *mg = gpu_poisoned(GSB_I32, n, 1);
    gsb__tensor sh = hzeros(GSB_I32, n, 3), sg = gpu_poisoned(GSB_I32, n, 3);
    gsb__tensor fh = hzeros(GSB_I32, n, w), fg = gpu_poisoned(GSB_I32, n, w);
    CHECK_OK(cpu->ops->forest_level_feats(cpu, &p->h.d, lh, rule, pass, mh, &sh, &fh));
    CHECK_OK(gpu->ops->forest_level_feats(gpu, &p->g.d, lg, rule, pass, mg, &sg, &fg));
    int64_t c = ((int32_t *)H->counts.data)[0];
    CHECK(count0(&G->counts, 0) == c);
    CHECK_SAME(mg, mh, 0.0);
    gsb__tensor sh1 = first(&sh, c), sg1 = first(&sg, c), fh1 = first(&fh, c),
                fg1 = first(&fg, c);
    CHECK_SAME(&sg1, &sh1, 0.0);
    CHECK_SAME(&fg1, &fh1, 0.0);
    *rh = hzeros(GSB_F64, c > 0 ? c : 1, p->R);
    if (c > 0) {
        gsb__forest_rule r = {rule->criterion, rule->min_samples_leaf, rule->min_weight_leaf,
                              pass};
        CHECK_OK(cpu->ops->forest_split(cpu, &p->h.d, &sh1, &fh1, &r, rh));
    }
    *rg = to_gpu(rh);
    rh->rows = rg->rows = c;
    gsb__tensor_free(&sh);
    gsb__tensor_free(&sg);
    gsb__tensor_free(&fh);
    gsb__tensor_free(&fg);
    return c;
}

/* forest_level_feats with slots (lv->slots): the candidates' segments carry
 * them on both backends. */
static void feats_slots(group *p, const gsb__forest_grow_rule *rule, gsb__forest_level *lh,
                        gsb__forest_level *lg, int64_t c)
{
    int64_t n = lh->n, m = rule->max_features;
    gsb__tensor sl = hzeros(GSB_I32, n, 1);
    for (int64_t i = 0; i < n; i++)
        ((int32_t *)sl.data)[i] = (int32_t)(i % 5) - 1;
    gsb__tensor slg = to_gpu(&sl), mh = hzeros(GSB_I32, n, 1), mg = gpu_poisoned(GSB_I32, n, 1);
    gsb__tensor sh = hzeros(GSB_I32, n, 3), sg = gpu_poisoned(GSB_I32, n, 3);
    gsb__tensor fh = hzeros(GSB_I32, n, m), fg = gpu_poisoned(GSB_I32, n, m);
    gsb__forest_level h = *lh, g = *lg;
    h.slots = &sl;
    g.slots = &slg;
    CHECK_OK(cpu->ops->forest_level_feats(cpu, &p->h.d, &h, rule, 0, &mh, &sh, &fh));
    CHECK_OK(gpu->ops->forest_level_feats(gpu, &p->g.d, &g, rule, 0, &mg, &sg, &fg));
    gsb__tensor sh1 = first(&sh, c), sg1 = first(&sg, c);
    CHECK_SAME(&sg1, &sh1, 0.0);
    const int32_t *mp = mh.data, *seg = sh.data;
    for (int64_t i = 0; i < n; i++)
        CHECK(mp[i] < 0 || seg[3 * (int64_t)mp[i] + 2] == (int32_t)(i % 5) - 1);
    gsb__tensor *all[] = {&sl, &slg, &mh, &mg, &sh, &sg, &fh, &fg};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

/* Grow the group to the end on both backends, comparing every op's output. */
static void grow_both(group *p, const gsb__forest_grow_rule *rule)
{
    gsb__tensor front = hzeros(GSB_I32, p->T, GSB__FLV_FRONT), stats;
    memcpy(front.data, p->front.data, (size_t)(p->T * GSB__FLV_FRONT) * sizeof(int32_t));
    stats = hzeros(GSB_F64, p->T, p->V1);
    memcpy(stats.data, p->stats.data, (size_t)(p->T * p->V1) * sizeof(double));
    gsb__tensor tch = hzeros(GSB_I32, p->T, 1), owh = hzeros(GSB_I32, p->S, 1);
    memcpy(tch.data, p->tcount.data, (size_t)p->T * sizeof(int32_t));
    memcpy(owh.data, p->owner.data, (size_t)p->S * sizeof(int32_t));
    gsb__tensor tcg = to_gpu(&tch), owg = to_gpu(&owh), seg_ = to_gpu(&p->seeds),
                rwg = to_gpu(&p->root_w);
    int64_t n = p->T, levels = 0;
    while (n > 0 && !testing_cur_failed) {
        lvt H = {0}, G = {0};
        H.front = front;
        H.stats = stats;
        G.front = to_gpu(&front);
        G.stats = to_gpu(&stats);
        H.counts = hzeros(GSB_I32, 2, 1);
        G.counts = gpu_poisoned(GSB_I32, 2, 1);
        H.nodes = hzeros(GSB_I32, n, GSB__FLV_NODE);
        G.nodes = gpu_poisoned(GSB_I32, n, GSB__FLV_NODE);
        H.imp = hzeros(GSB_F64, n, 1);
        G.imp = gpu_poisoned(GSB_F64, n, 1);
        H.splits = hzeros(GSB_I32, n, GSB__FLS_COLS);
        G.splits = gpu_poisoned(GSB_I32, n, GSB__FLS_COLS);
        H.kids = hzeros(GSB_I32, 2 * n, GSB__FLV_FRONT);
        G.kids = gpu_poisoned(GSB_I32, 2 * n, GSB__FLV_FRONT);
        H.kid_stats = hzeros(GSB_F64, 2 * n, p->V1);
        G.kid_stats = gpu_poisoned(GSB_F64, 2 * n, p->V1);
        gsb__forest_level lh = {n, &H.front, &H.stats, NULL, NULL, NULL, NULL, &p->seeds,
                                &p->root_w, &tch, &H.nodes, &H.imp, &H.splits, &H.kids,
                                &H.kid_stats, &H.counts, &owh, NULL};
        gsb__forest_level lg = {n, &G.front, &G.stats, NULL, NULL, NULL, NULL, &seg_, &rwg,
                                &tcg, &G.nodes, &G.imp, &G.splits, &G.kids, &G.kid_stats,
                                &G.counts, &owg, NULL};
        int64_t c = pass_both(p, rule, 0, &lh, &lg, &H, &G);
        feats_slots(p, rule, &lh, &lg, c);
        lh.map = &H.map;
        lh.recs = &H.recs;
        lg.map = &G.map;
        lg.recs = &G.recs;
        if (rule->max_features < p->F) {
            pass_both(p, rule, 1, &lh, &lg, &H, &G);
            lh.map2 = &H.map2;
            lh.recs2 = &H.recs2;
            lg.map2 = &G.map2;
            lg.recs2 = &G.recs2;
        }
        CHECK_OK(cpu->ops->forest_level_decide(cpu, &p->h.d, &lh, rule));
        CHECK_OK(gpu->ops->forest_level_decide(gpu, &p->g.d, &lg, rule));
        int64_t ns = ((int32_t *)H.counts.data)[0];
        CHECK(count0(&G.counts, 0) == ns);
        CHECK_SAME(&G.nodes, &H.nodes, 0.0);
        CHECK_SAME(&G.splits, &H.splits, 0.0);
        CHECK_SAME(&G.imp, &H.imp, 1e-12);
        CHECK_SAME(&tcg, &tch, 0.0);
        gsb__tensor kh = first(&H.kids, 2 * ns), kg = first(&G.kids, 2 * ns);
        gsb__tensor sh = first(&H.kid_stats, 2 * ns), sg = first(&G.kid_stats, 2 * ns);
        CHECK_SAME(&kg, &kh, 0.0);
        CHECK_SAME(&sg, &sh, 0.0);
        CHECK_OK(cpu->ops->forest_level_partition(cpu, &p->h.d, &lh));
        CHECK_OK(gpu->ops->forest_level_partition(gpu, &p->g.d, &lg));
        CHECK(((int32_t *)H.counts.data)[1] == 0 && count0(&G.counts, 1) == 0);
        CHECK_SAME(&p->g.rows, &p->h.rows, 0.0);
        CHECK_SAME(&p->g.w, &p->h.w, 0.0);
        CHECK_SAME(&owg, &owh, 0.0);
        /* the next frontier: the CPU's children */
        front = hzeros(GSB_I32, 2 * ns > 0 ? 2 * ns : 1, GSB__FLV_FRONT);
        stats = hzeros(GSB_F64, 2 * ns > 0 ? 2 * ns : 1, p->V1);
        memcpy(front.data, H.kids.data, (size_t)(2 * ns * GSB__FLV_FRONT) * sizeof(int32_t));
        memcpy(stats.data, H.kid_stats.data, (size_t)(2 * ns * p->V1) * sizeof(double));
        front.rows = stats.rows = 2 * ns;
        lvt_free(&H);
        lvt_free(&G);
        n = 2 * ns;
        levels++;
    }
    printf("  %lld levels, %d nodes in tree 0\n", (long long)levels, ((int32_t *)tch.data)[0]);
    CHECK(levels >= 3);
    gsb__tensor *all[] = {&front, &stats, &tch, &owh, &tcg, &owg, &seg_, &rwg};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static void test_levels(void)
{
    struct {
        int K, O, nan, crit;
        int64_t F, m, leaf, depth;
    } cases[] = {
        {4, 0, 0, GSB__FOREST_GINI, 10, 3, 1, INT64_MAX},
        {3, 0, 1, GSB__FOREST_ENTROPY, 12, 12, 3, INT64_MAX},
        {0, 2, 1, GSB__FOREST_MSE, 8, 3, 1, INT64_MAX},
        {0, 1, 0, GSB__FOREST_MSE, 6, 6, 3, 6},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int before = case_begin();
        group p;
        group_make(&p, 31 + k, 1500, cases[k].F, 3, cases[k].K, cases[k].O, cases[k].nan);
        gsb__forest_grow_rule rule = {cases[k].crit, cases[k].depth, 2 * cases[k].leaf,
                                      cases[k].leaf, 0.0, 0.0, cases[k].m};
        grow_both(&p, &rule);
        group_free(&p);
        CASE_END(before, "levels K %d O %d F %lld m %lld", cases[k].K, cases[k].O,
                 (long long)cases[k].F, (long long)cases[k].m);
    }
}

/* ---- fits through both growers on the GPU ------------------------------------------ */

static double *fit_predict(gsb_session *s, const char *est, const gsb_array *X,
                           const gsb_array *y, int64_t *n)
{
    gsb_model *m = NULL;
    gsb_result *r = NULL;
    const gsb_array *ins[1] = {X};
    double *out = NULL;
    *n = 0;
    CHECK_OK(gsb_model_create(s, est, "{\"n_estimators\": 12, \"random_state\": 5}", &m));
    if (m && gsb_model_fit(m, X, y) == GSB_OK &&
        gsb_model_call(m, "predict", ins, 1, NULL, &r) == GSB_OK) {
        const gsb_array *a = gsb_result_array(r, 0);
        *n = testing_numel(a);
        out = calloc((size_t)*n, sizeof *out);
        if (!out)
            abort();
        testing_copy(a, out, *n);
    }
    CHECK(*n > 0);
    gsb_result_free(r);
    gsb_model_free(m);
    return out;
}

static void test_growers(void)
{
    int64_t n = 20000, d = 12;
    double *X = calloc((size_t)(n * d), sizeof *X), *yc = calloc((size_t)n, 8),
           *yr = calloc((size_t)n, 8);
    if (!X || !yc || !yr)
        abort();
    uint64_t s = 99;
    for (int64_t i = 0; i < n; i++) {
        double t = 0;
        for (int64_t j = 0; j < d; j++) {
            X[i * d + j] = urand(&s) < 0.02 ? NAN : 2 * urand(&s) - 1;
            t += j < 4 && !isnan(X[i * d + j]) ? X[i * d + j] * (j + 1) : 0;
        }
        yc[i] = t > 1 ? 2 : t > -1 ? 1 : 0;
        yr[i] = round(10 * t + 3 * urand(&s)); /* integral: exact sums on both growers */
    }
    gsb_array xa = gsb_array_2d(X, GSB_F64, n, d), ca = gsb_array_1d(yc, GSB_F64, n);
    gsb_array ra = gsb_array_1d(yr, GSB_F64, n);
    gsb_session *sg = NULL;
    CHECK_OK(gsb_open("local?device=cuda", &sg));
    const char *ests[2] = {"RandomForestClassifier", "RandomForestRegressor"};
    const gsb_array *ys[2] = {&ca, &ra};
    for (int e = 0; e < 2 && sg; e++) {
        int before = case_begin();
        int64_t nl = 0, nh = 0;
        unsetenv("GSB_FOREST_GROWER");
        double *pl = fit_predict(sg, ests[e], &xa, ys[e], &nl);
        setenv("GSB_FOREST_GROWER", "host", 1);
        double *ph = fit_predict(sg, ests[e], &xa, ys[e], &nh);
        unsetenv("GSB_FOREST_GROWER");
        int64_t differ = 0;
        for (int64_t i = 0; i < n && nl == n && nh == n; i++)
            differ += pl[i] != ph[i];
        printf("  %s: %lld of %lld predictions differ between the growers\n", ests[e],
               (long long)differ, (long long)n);
        CHECK(nl == n && nh == n && differ == 0);
        free(pl);
        free(ph);
        CASE_END(before, "%s", ests[e]);
    }
    gsb_close(sg);
    free(X);
    free(yc);
    free(yr);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_levels);
    RUN(test_growers);
    return testing_done();
}
