/*
 * cpu_forest_level.c - the level ops of breadth-first forest growth on the
 * CPU (contracts in backend/backend.h, gsb__forest_level; per-node rules in
 * backend/forest_level.h; the CUDA twins are in cuda/cuda_forest_level.cu).
 *
 * The CPU grower (estimators/ensemble/tree_grow.c) does this work on the
 * host itself; these twins define what the GPU's kernels must compute, and
 * let the level grower (tree_level.c) run, and be tested, on the CPU.
 * Nodes are independent in feats (OpenMP over nodes); decide numbers the
 * children in one ordered pass; partition splits each node's samples as
 * forest_partition does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/forest_level.h"

/* Nodes per call above which feats runs on every thread. */
#define PARALLEL_NODES 2048

/* The shapes every level op relies on. */
static int check_level(const gsb__forest_data *d, const gsb__forest_level *lv, const char *op)
{
    if (!d || !lv || !d->rows || lv->n < 0)
        return gsb__err(GSB_EINTERNAL, "%s: no level", op);
    int V1 = gsb__forest_nstats(d->n_classes, d->n_outputs);
    int64_t n = lv->n, T = lv->seeds ? lv->seeds->rows * lv->seeds->cols : 0;
    GSB_TRY(cpu_check(lv->front, GSB_I32, n, GSB__FLV_FRONT, op, "front"));
    GSB_TRY(cpu_check(lv->stats, GSB_F64, n, V1, op, "stats"));
    GSB_TRY(cpu_check_vec(lv->seeds, GSB_I64, T, op, "seeds"));
    const int32_t *fr = lv->front->data;
    int64_t S = d->rows->rows * d->rows->cols;
    for (int64_t i = 0; i < n; i++) {
        const int32_t *x = fr + i * GSB__FLV_FRONT;
        if (x[GSB__FLV_TREE] < 0 || x[GSB__FLV_TREE] >= T || x[GSB__FLV_START] < 0 ||
            x[GSB__FLV_END] <= x[GSB__FLV_START] || x[GSB__FLV_END] > S ||
            (i > 0 && x[GSB__FLV_TREE] < fr[(i - 1) * GSB__FLV_FRONT + GSB__FLV_TREE]))
            return gsb__err(GSB_EINTERNAL, "%s: frontier node %lld is bad", op, (long long)i);
    }
    return GSB_OK;
}

/* Node i's impurity and whether it is a split candidate (pass 0's rule). */
static int candidate(const gsb__forest_data *d, const gsb__forest_level *lv,
                     const gsb__forest_grow_rule *rule, int64_t i, double *imp)
{
    int K = d->n_classes > 0 ? d->n_classes : 0, O = K ? 0 : d->n_outputs;
    int V1 = gsb__forest_nstats(K, O);
    const int32_t *x = (const int32_t *)lv->front->data + i * GSB__FLV_FRONT;
    const double *s = (const double *)lv->stats->data + i * V1;
    *imp = gsb__forest_node_impurity(s, K, O, rule->criterion);
    return !gsb__forest_leaf_before(rule, x[GSB__FLV_DEPTH], x[GSB__FLV_END] - x[GSB__FLV_START],
                                    gsb__forest_weight(s, K), *imp);
}

/* Node i's pass-0 record, or NULL when it was no candidate. */
static const double *rec0(const gsb__forest_level *lv, int rec_len, int64_t i)
{
    int32_t k = ((const int32_t *)lv->map->data)[i];
    return k < 0 ? NULL : (const double *)lv->recs->data + (int64_t)k * rec_len;
}

/* The rows of a pass's records: one more than the map's largest entry. */
static int check_recs(const gsb__tensor *map, const gsb__tensor *recs, int64_t n, int rec_len,
                      const char *op, const char *name)
{
    GSB_TRY(cpu_check_vec(map, GSB_I32, n, op, name));
    int32_t top = -1;
    for (int64_t i = 0; i < n; i++)
        top = ((const int32_t *)map->data)[i] > top ? ((const int32_t *)map->data)[i] : top;
    if (top < 0)
        return GSB_OK;
    GSB_TRY(cpu_check(recs, GSB_F64, -1, rec_len, op, name));
    if (recs->rows <= top)
        return gsb__err(GSB_EINTERNAL, "%s: %s has %lld records, row %d wanted", op, name,
                        (long long)recs->rows, top);
    return GSB_OK;
}

int gsb__cpu_forest_level_feats(const gsb__backend *be, const gsb__forest_data *d,
                                const gsb__forest_level *lv, const gsb__forest_grow_rule *rule,
                                int pass, gsb__tensor *map, gsb__tensor *seg, gsb__tensor *feats)
{
    (void)be;
    const char *op = "forest_level_feats";
    GSB_TRY(check_level(d, lv, op));
    int64_t F = d->n_features, m = rule->max_features < F ? rule->max_features : F;
    int64_t from = pass ? m : 0, to = pass ? F : m, w = to - from, n = lv->n;
    if (m < 1 || (pass && m >= F))
        return gsb__err(GSB_EINTERNAL, "%s: pass %d with %lld of %lld features", op, pass,
                        (long long)m, (long long)F);
    int rec_len = gsb__forest_rec_len(gsb__forest_nstats(d->n_classes, d->n_outputs));
    if (pass)
        GSB_TRY(check_recs(lv->map, lv->recs, n, rec_len, op, "map"));
    GSB_TRY(cpu_check_vec(map, GSB_I32, n, op, "map"));
    GSB_TRY(cpu_check(seg, GSB_I32, n, 3, op, "seg"));
    GSB_TRY(cpu_check(feats, GSB_I32, n, w, op, "feats"));
    GSB_TRY(cpu_check_vec(lv->counts, GSB_I32, 2, op, "counts"));
    if (lv->slots)
        GSB_TRY(cpu_check_vec(lv->slots, GSB_I32, n, op, "slots"));
    const int32_t *fr = lv->front->data, *slots = lv->slots ? lv->slots->data : NULL;
    const int64_t *seeds = lv->seeds->data;
    int32_t *mp = map->data, *sg = seg->data, *out = feats->data, c = 0;
    for (int64_t i = 0; i < n; i++) { /* the candidates, numbered in node order */
        double imp;
        const double *r;
        int cand = candidate(d, lv, rule, i, &imp) &&
                   (!pass || ((r = rec0(lv, rec_len, i)) && r[GSB__FREC_NONCONST] < 0.5));
        mp[i] = cand ? c++ : -1;
    }
    int failed = 0;
#pragma omp parallel reduction(| : failed) if (n > PARALLEL_NODES)
    {
        int32_t *perm = cpu_alloc(F, sizeof *perm), *swaps = cpu_alloc(F, sizeof *swaps);
        failed = !perm || !swaps;
        for (int64_t f = 0; !failed && f < F; f++)
            perm[f] = (int32_t)f;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            const int32_t *x = fr + i * GSB__FLV_FRONT;
            int64_t k = mp[i];
            if (failed || k < 0)
                continue;
            sg[3 * k] = x[GSB__FLV_START];
            sg[3 * k + 1] = x[GSB__FLV_END];
            sg[3 * k + 2] = slots ? slots[i] : -1;
            gsb__forest_draw(F, (uint64_t)seeds[x[GSB__FLV_TREE]], x[GSB__FLV_ID], from, to,
                             perm, swaps, 1, out + k * w);
        }
        free(perm);
        free(swaps);
    }
    if (failed)
        return gsb__err(GSB_ENOMEM, "%s: out of memory", op);
    ((int32_t *)lv->counts->data)[0] = c;
    return GSB_OK;
}

/* The record node i's fate rests on (pass 1's where it ran), or NULL. */
static const double *final_rec(const gsb__forest_level *lv, int rec_len, int64_t i)
{
    int32_t k = lv->map2 ? ((const int32_t *)lv->map2->data)[i] : -1;
    if (k >= 0)
        return (const double *)lv->recs2->data + (int64_t)k * rec_len;
    return rec0(lv, rec_len, i);
}

static int check_decide(const gsb__forest_data *d, const gsb__forest_level *lv, int V1,
                        int rec_len, const char *op)
{
    int64_t n = lv->n, T = lv->seeds->rows * lv->seeds->cols;
    GSB_TRY(check_recs(lv->map, lv->recs, n, rec_len, op, "map"));
    if (lv->map2)
        GSB_TRY(check_recs(lv->map2, lv->recs2, n, rec_len, op, "map2"));
    GSB_TRY(cpu_check_vec(lv->root_w, GSB_F64, T, op, "root_w"));
    GSB_TRY(cpu_check_vec(lv->tcount, GSB_I32, T, op, "tcount"));
    GSB_TRY(cpu_check(lv->nodes, GSB_I32, n, GSB__FLV_NODE, op, "nodes"));
    GSB_TRY(cpu_check_vec(lv->imp, GSB_F64, n, op, "imp"));
    GSB_TRY(cpu_check(lv->splits, GSB_I32, n, GSB__FLS_COLS, op, "splits"));
    GSB_TRY(cpu_check(lv->kids, GSB_I32, 2 * n, GSB__FLV_FRONT, op, "kids"));
    GSB_TRY(cpu_check(lv->kid_stats, GSB_F64, 2 * n, V1, op, "kid_stats"));
    GSB_TRY(cpu_check_vec(lv->counts, GSB_I32, 2, op, "counts"));
    for (int64_t i = 0; i < n; i++) {
        const double *r = final_rec(lv, rec_len, i);
        if (r && r[GSB__FREC_PROXY] > -INFINITY &&
            (r[GSB__FREC_FEATURE] < 0 || r[GSB__FREC_FEATURE] >= d->n_features))
            return gsb__err(GSB_EINTERNAL, "%s: a record's feature is out of range", op);
    }
    return GSB_OK;
}

int gsb__cpu_forest_level_decide(const gsb__backend *be, const gsb__forest_data *d,
                                 const gsb__forest_level *lv, const gsb__forest_grow_rule *rule)
{
    (void)be;
    const char *op = "forest_level_decide";
    GSB_TRY(check_level(d, lv, op));
    int K = d->n_classes > 0 ? d->n_classes : 0, O = K ? 0 : d->n_outputs;
    int V1 = gsb__forest_nstats(K, O), rec_len = gsb__forest_rec_len(V1);
    GSB_TRY(check_decide(d, lv, V1, rec_len, op));
    const int32_t *fr = lv->front->data;
    const double *stats = lv->stats->data, *root_w = lv->root_w->data;
    int32_t *tc = lv->tcount->data, *nodes = lv->nodes->data, *sp = lv->splits->data;
    int32_t *kids = lv->kids->data;
    double *imp_out = lv->imp->data, *kst = lv->kid_stats->data;
    int32_t k = 0; /* splits so far */
    for (int64_t i = 0; i < lv->n; i++) {
        const int32_t *x = fr + i * GSB__FLV_FRONT;
        const double *s = stats + i * V1, *r = final_rec(lv, rec_len, i);
        int32_t *nd = nodes + i * GSB__FLV_NODE, *spl = sp + i * GSB__FLS_COLS;
        double imp, improvement;
        int split = candidate(d, lv, rule, i, &imp) && r &&
                    gsb__forest_accept(rule, s, imp, r, root_w[x[GSB__FLV_TREE]], K, O,
                                       &improvement);
        memcpy(nd, x, GSB__FLV_FRONT * sizeof *nd);
        nd[GSB__FLV_FEATURE] = -1;
        nd[GSB__FLV_BIN_LO] = nd[GSB__FLV_BIN_HI] = nd[GSB__FLV_MISSING_LEFT] = 0;
        nd[GSB__FLV_LEFT] = -1;
        imp_out[i] = 0.0;
        memset(spl, 0, GSB__FLS_COLS * sizeof *spl);
        spl[GSB__FLS_FEATURE] = spl[GSB__FLS_CHILD] = -1;
        if (!split)
            continue;
        const double *left = r + GSB__FREC_LEFT, *right = left + V1;
        int32_t id = tc[x[GSB__FLV_TREE]], nl = (int32_t)left[0];
        tc[x[GSB__FLV_TREE]] += 2;
        nd[GSB__FLV_FEATURE] = (int32_t)r[GSB__FREC_FEATURE];
        nd[GSB__FLV_BIN_LO] = (int32_t)r[GSB__FREC_BIN_LO];
        nd[GSB__FLV_BIN_HI] = (int32_t)r[GSB__FREC_BIN_HI];
        nd[GSB__FLV_MISSING_LEFT] = (int32_t)r[GSB__FREC_MISSING_LEFT];
        nd[GSB__FLV_LEFT] = id;
        imp_out[i] = gsb__forest_importance(s, imp, left, right, K, O, rule->criterion);
        spl[GSB__FLS_FEATURE] = nd[GSB__FLV_FEATURE];
        spl[GSB__FLS_BIN] = nd[GSB__FLV_BIN_LO];
        spl[GSB__FLS_MISSING_LEFT] = nd[GSB__FLV_MISSING_LEFT];
        spl[GSB__FLS_CHILD] = 2 * k;
        spl[GSB__FLS_N_LEFT] = nl;
        int32_t mid = x[GSB__FLV_START] + nl;
        for (int c = 0; c < 2; c++) {
            int32_t *kd = kids + (2 * k + c) * GSB__FLV_FRONT;
            kd[GSB__FLV_TREE] = x[GSB__FLV_TREE];
            kd[GSB__FLV_ID] = id + c;
            kd[GSB__FLV_START] = c ? mid : x[GSB__FLV_START];
            kd[GSB__FLV_END] = c ? x[GSB__FLV_END] : mid;
            kd[GSB__FLV_DEPTH] = x[GSB__FLV_DEPTH] + 1;
            memcpy(kst + (2 * k + c) * V1, c ? right : left, (size_t)V1 * sizeof *kst);
        }
        k++;
    }
    ((int32_t *)lv->counts->data)[0] = k;
    return GSB_OK;
}

int gsb__cpu_forest_level_partition(const gsb__backend *be, const gsb__forest_data *d,
                                    const gsb__forest_level *lv)
{
    (void)be;
    const char *op = "forest_level_partition";
    GSB_TRY(check_level(d, lv, op));
    int64_t n = lv->n, S = d->rows->rows * d->rows->cols;
    GSB_TRY(cpu_check(lv->splits, GSB_I32, n, GSB__FLS_COLS, op, "splits"));
    GSB_TRY(cpu_check_vec(lv->owner, GSB_I32, S, op, "owner"));
    GSB_TRY(cpu_check_vec(lv->counts, GSB_I32, 2, op, "counts"));
    GSB_TRY(cpu_check_vec(d->scratch_rows, GSB_I32, S, op, "scratch_rows"));
    GSB_TRY(cpu_check_vec(d->scratch_weights, GSB_F32, S, op, "scratch_weights"));
    if (!d->codes)
        return gsb__err(GSB_EINTERNAL, "%s: no codes", op);
    const int32_t *fr = lv->front->data, *sp = lv->splits->data;
    for (int64_t i = 0; i < n; i++)
        if (sp[i * GSB__FLS_COLS] >= d->n_features)
            return gsb__err(GSB_EINTERNAL, "%s: split feature out of range", op);
    const uint8_t *codes = d->codes->data;
    int64_t stride = 4 * d->codes->cols;
    int32_t *rows = d->rows->data, *srows = d->scratch_rows->data, *owner = lv->owner->data;
    float *w = d->weights->data, *sw = d->scratch_weights->data;
    int32_t bad = 0;
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : bad) if (S > 65536)
    for (int64_t i = 0; i < n; i++) {
        const int32_t *x = fr + i * GSB__FLV_FRONT, *spl = sp + i * GSB__FLS_COLS;
        int32_t start = x[GSB__FLV_START], end = x[GSB__FLV_END], k = start;
        int f = spl[GSB__FLS_FEATURE], bin = spl[GSB__FLS_BIN];
        int miss_left = spl[GSB__FLS_MISSING_LEFT];
        if (f < 0) {
            for (int32_t j = start; j < end; j++)
                owner[j] = -1;
            continue;
        }
        int32_t nl = 0;
        for (int pass = 0; pass < 2; pass++) { /* left ones, then right ones, in order */
            for (int32_t j = start; j < end; j++) {
                int c = gsb__forest_code(codes, stride, rows[j], f);
                int left = c == d->nan_code ? miss_left : c <= bin;
                if (left == (pass == 0)) {
                    srows[k] = rows[j];
                    sw[k++] = w[j];
                }
            }
            if (pass == 0)
                nl = k - start;
        }
        memcpy(rows + start, srows + start, (size_t)(end - start) * sizeof *rows);
        memcpy(w + start, sw + start, (size_t)(end - start) * sizeof *w);
        for (int32_t j = start; j < end; j++)
            owner[j] = spl[GSB__FLS_CHILD] + (j - start >= nl);
        bad += nl != spl[GSB__FLS_N_LEFT];
    }
    ((int32_t *)lv->counts->data)[1] = bad;
    return GSB_OK;
}
