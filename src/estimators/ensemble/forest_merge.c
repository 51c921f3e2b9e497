/*
 * forest_merge.c - forests packed, concatenated and fitted from their
 * trees (see forest_merge.h for the packed form and the methods).
 */
#include "estimators/ensemble/forest_merge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/tensor.h"
#include "estimators/ensemble/forest_fit.h"
#include "estimators/ensemble/forest_model.h"

#define HEAD 7

/* A packed forest's sections (views into the array). */
typedef struct packed {
    int classify;
    int64_t T, N, L, K, F;
    const double *classes, *split, *thr, *child, *root, *depth, *shi, *slo, *imp, *val;
} packed;

/* How many arrays sections() lays out per node and per tree: the length must
 * count exactly those, or a slot nothing writes ends the array (a stray NaN
 * that the inputs' checks of merge_trees then refuse). */
#define PER_NODE 3 /* split, threshold, child */
#define PER_TREE 4 /* root, depth, seed high, seed low */

static int64_t packed_len(int classify, int64_t T, int64_t N, int64_t L, int64_t K, int64_t F)
{
    return HEAD + (classify ? K : 0) + PER_NODE * N + PER_TREE * T + T * F + L * K;
}

/* Point p's sections into d (whose header is already read). */
static void sections(double *d, packed *p)
{
    double *q = d + HEAD;
    p->classes = p->classify ? q : NULL;
    q += p->classify ? p->K : 0;
    p->split = q, q += p->N;
    p->thr = q, q += p->N;
    p->child = q, q += p->N;
    p->root = q, q += p->T;
    p->depth = q, q += p->T;
    p->shi = q, q += p->T;
    p->slo = q, q += p->T;
    p->imp = q, q += p->T * p->F;
    p->val = q;
}

static int bad(const char *why)
{
    return gsb__err(GSB_EINVAL, "random forest: the packed trees are malformed (%s); they "
                    "come from export_trees or merge_trees", why);
}

static int parse(const gsb__tensor *t, packed *p)
{
    int64_t n = gsb__tensor_numel(t);
    const double *d = t->data;
    if (t->dtype != GSB_F64 || n < HEAD || d[0] != GSB__FOREST_MAGIC)
        return bad("no header");
    for (int i = 1; i < HEAD; i++)
        if (!(d[i] >= 0 && d[i] <= 9e15) || d[i] != floor(d[i]))
            return bad("header");
    *p = (packed){(int)d[1], (int64_t)d[2], (int64_t)d[3], (int64_t)d[4], (int64_t)d[5],
                  (int64_t)d[6], NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    if (p->classify > 1 || p->T < 1 || p->N < p->T || p->L < 1 || p->K < 1 || p->F < 1 ||
        p->N > INT32_MAX || p->L > INT32_MAX)
        return bad("sizes");
    if (packed_len(p->classify, p->T, p->N, p->L, p->K, p->F) != n)
        return bad("length");
    sections((double *)d, p);
    return GSB_OK;
}

/* A new packed array of these sizes (header written, sections in *p). */
static int packed_alloc(int classify, int64_t T, int64_t N, int64_t L, int64_t K, int64_t F,
                        gsb__tensor *out, packed *p)
{
    int64_t n = packed_len(classify, T, N, L, K, F);
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, 1, out));
    gsb__tensor_as_1d(out);
    double *d = out->data;
    d[0] = GSB__FOREST_MAGIC;
    d[1] = classify, d[2] = (double)T, d[3] = (double)N, d[4] = (double)L, d[5] = (double)K;
    d[6] = (double)F;
    *p = (packed){classify, T, N, L, K, F, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                  NULL, NULL};
    sections(d, p);
    return GSB_OK;
}

/* A threshold as its float32 bits (a finite integer, so that an infinite
 * threshold passes the packed array's checks), and back. */
static double float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (double)u;
}

static float bits_float(double d)
{
    uint32_t u = (uint32_t)d;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- export ------------------------------------------------------------------------ */

int gsb__forest_pack(gsb__ctx *c, gsb__tensor *out)
{
    int classify = c->est->kind == GSB__KIND_CLASSIFIER;
    const gsb__tensor *imp, *depth, *seed, *cls = NULL, *no;
    GSB_TRY(gsb__attr_need(c, "_tree_importance", GSB_F64, -1, -1, &imp));
    int64_t F = imp->cols, K, T;
    if (classify) {
        GSB_TRY(gsb__attr_need(c, "classes_", GSB_F64, -1, -1, &cls));
        K = cls->rows * cls->cols;
    } else {
        GSB_TRY(gsb__attr_need(c, "n_outputs_", 0, 1, 1, &no));
        K = (int64_t)gsb__tensor_get(no, 0);
    }
    gsb__forest_trees v;
    GSB_TRY(gsb__forest_model_view(c, F, K, &v, &T));
    GSB_TRY(gsb__attr_need(c, "_tree_depth", GSB_I32, T, 1, &depth));
    GSB_TRY(gsb__attr_need(c, "_tree_seed", GSB_I64, T, 1, &seed));
    GSB_TRY(gsb__attr_need(c, "_tree_importance", GSB_F64, T, F, &imp));
    int64_t N = v.split->rows, L = v.value->rows;
    packed p;
    GSB_TRY(packed_alloc(classify, T, N, L, K, F, out, &p));
    double *d = (double *)p.split;
    for (int64_t k = 0; classify && k < K; k++)
        ((double *)p.classes)[k] = ((const double *)cls->data)[k];
    for (int64_t i = 0; i < N; i++) {
        d[i] = ((const int32_t *)v.split->data)[i];
        d[N + i] = float_bits(((const float *)v.threshold->data)[i]);
        d[2 * N + i] = ((const int32_t *)v.child->data)[i];
    }
    double *dt = (double *)p.root;
    for (int64_t t = 0; t < T; t++) {
        uint64_t s = (uint64_t)((const int64_t *)seed->data)[t];
        dt[t] = ((const int32_t *)v.root->data)[t];
        dt[T + t] = ((const int32_t *)depth->data)[t];
        dt[2 * T + t] = (double)(s >> 32);
        dt[3 * T + t] = (double)(s & 0xffffffffu);
    }
    memcpy((double *)p.imp, imp->data, (size_t)(T * F) * sizeof(double));
    for (int64_t i = 0; i < L * K; i++)
        ((double *)p.val)[i] = ((const float *)v.value->data)[i];
    return GSB_OK;
}

int gsb__forest_export_method(gsb__ctx *c)
{
    gsb__tensor t;
    GSB_TRY(gsb__forest_pack(c, &t));
    return gsb__out(c, "trees", &t);
}

/* ---- concatenation ----------------------------------------------------------------- */

/* The sorted union of a's and b's classes into u (room for both); its size. */
static int64_t class_union(const packed *a, const packed *b, double *u)
{
    int64_t i = 0, j = 0, n = 0;
    while (i < a->K || j < b->K) {
        double x = j >= b->K || (i < a->K && a->classes[i] <= b->classes[j]) ? a->classes[i]
                                                                            : b->classes[j];
        u[n++] = x;
        while (i < a->K && a->classes[i] == x)
            i++;
        while (j < b->K && b->classes[j] == x)
            j++;
    }
    return n;
}

/* Copy part p into o at offsets (trees t0, nodes n0, leaves l0); leaf values
 * to the columns map[k] of o's K (map NULL: the same columns). */
static void place(const packed *p, packed *o, int64_t t0, int64_t n0, int64_t l0,
                  const int64_t *map)
{
    double *split = (double *)o->split, *thr = (double *)o->thr, *child = (double *)o->child;
    for (int64_t i = 0; i < p->N; i++) {
        split[n0 + i] = p->split[i];
        thr[n0 + i] = p->thr[i];
        child[n0 + i] = p->child[i] + (double)(p->split[i] >= 0 ? n0 : l0);
    }
    for (int64_t t = 0; t < p->T; t++) {
        ((double *)o->root)[t0 + t] = p->root[t] + (double)n0;
        ((double *)o->depth)[t0 + t] = p->depth[t];
        ((double *)o->shi)[t0 + t] = p->shi[t];
        ((double *)o->slo)[t0 + t] = p->slo[t];
    }
    memcpy((double *)o->imp + t0 * o->F, p->imp, (size_t)(p->T * p->F) * sizeof(double));
    double *val = (double *)o->val + l0 * o->K;
    for (int64_t l = 0; l < p->L; l++)
        for (int64_t k = 0; k < p->K; k++)
            val[l * o->K + (map ? map[k] : k)] = p->val[l * p->K + k];
}

/* Where each of p's classes sits in the union u (of n). */
static void class_map(const packed *p, const double *u, int64_t n, int64_t *map)
{
    for (int64_t k = 0, j = 0; k < p->K; k++) {
        while (j < n && u[j] != p->classes[k])
            j++;
        map[k] = j;
    }
}

int gsb__forest_concat(const gsb__tensor *ta, const gsb__tensor *tb, gsb__tensor *out)
{
    packed a, b, o;
    GSB_TRY(parse(ta, &a));
    GSB_TRY(parse(tb, &b));
    if (a.classify != b.classify || a.F != b.F || (!a.classify && a.K != b.K))
        return gsb__err(GSB_EINVAL, "merge_trees: the forests differ (%s)",
                        a.classify != b.classify ? "a classifier and a regressor"
                        : a.F != b.F ? "numbers of features" : "numbers of outputs");
    int64_t K = a.K;
    double *u = NULL;
    int64_t *map = NULL;
    if (a.classify) {
        u = gsb__alloc_array(a.K + b.K, sizeof *u);
        map = gsb__alloc_array(a.K + b.K, sizeof *map);
        if (!u || !map) {
            free(u);
            free(map);
            return gsb__err(GSB_ENOMEM, "merge_trees: out of memory");
        }
        K = class_union(&a, &b, u);
    }
    int rc = packed_alloc(a.classify, a.T + b.T, a.N + b.N, a.L + b.L, K, a.F, out, &o);
    if (rc == GSB_OK) {
        memset((double *)o.val, 0, (size_t)(o.L * K) * sizeof(double));
        if (a.classify) {
            memcpy((double *)o.classes, u, (size_t)K * sizeof(double));
            class_map(&a, u, K, map);
            class_map(&b, u, K, map + a.K);
        }
        place(&a, &o, 0, 0, 0, map);
        place(&b, &o, a.T, a.N, a.L, map ? map + a.K : NULL);
    }
    free(u);
    free(map);
    return rc;
}

int gsb__forest_merge_method(gsb__ctx *c)
{
    gsb__tensor t;
    GSB_TRY(gsb__forest_concat(gsb__in(c, "a"), gsb__in(c, "b"), &t));
    return gsb__out(c, "trees", &t);
}

/* ---- fit from trees ---------------------------------------------------------------- */

/* The forest model of packed p (arrays allocated exactly). */
static int unpack(const packed *p, gsb__forest_model *m)
{
    int64_t T = p->T, N = p->N, L = p->L, K = p->K, F = p->F;
    *m = (gsb__forest_model){T, N, L, K, F, T, N, L, NULL, NULL, NULL, NULL, NULL, NULL,
                             NULL, NULL};
    m->split = gsb__forest_model_array(N, sizeof *m->split);
    m->child = gsb__forest_model_array(N, sizeof *m->child);
    m->threshold = gsb__forest_model_array(N, sizeof *m->threshold);
    m->root = gsb__forest_model_array(T, sizeof *m->root);
    m->depth = gsb__forest_model_array(T, sizeof *m->depth);
    m->seed = gsb__forest_model_array(T, sizeof *m->seed);
    m->importance = gsb__forest_model_array(T * F, sizeof *m->importance);
    m->value = gsb__forest_model_array(L * K, sizeof *m->value);
    if (!m->split || !m->child || !m->threshold || !m->root || !m->depth || !m->seed ||
        !m->importance || !m->value)
        return gsb__err(GSB_ENOMEM, "fit_from_trees: out of memory");
    for (int64_t i = 0; i < N; i++) {
        /* indices stay in int32 (checked again, with the tree structure, at predict) */
        if (fabs(p->split[i]) > INT32_MAX || fabs(p->child[i]) > INT32_MAX)
            return bad("node indices");
        m->split[i] = (int32_t)p->split[i];
        m->child[i] = (int32_t)p->child[i];
        if (!(p->thr[i] >= 0 && p->thr[i] <= 4294967295.0))
            return bad("thresholds");
        m->threshold[i] = bits_float(p->thr[i]);
    }
    for (int64_t t = 0; t < T; t++) {
        if (!(p->root[t] >= 0 && p->root[t] < (double)N) || fabs(p->depth[t]) > INT32_MAX ||
            !(p->shi[t] >= 0 && p->shi[t] <= 4294967295.0) ||
            !(p->slo[t] >= 0 && p->slo[t] <= 4294967295.0))
            return bad("trees");
        m->root[t] = (int32_t)p->root[t];
        m->depth[t] = (int32_t)p->depth[t];
        m->seed[t] = (int64_t)((uint64_t)p->shi[t] << 32 | (uint64_t)p->slo[t]);
    }
    memcpy(m->importance, p->imp, (size_t)(T * F) * sizeof(double));
    for (int64_t i = 0; i < L * K; i++)
        m->value[i] = (float)p->val[i];
    return GSB_OK;
}

static int store_targets(gsb__ctx *c, const packed *p)
{
    if (p->classify) {
        gsb__tensor cls;
        GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, p->K, 1, &cls));
        memcpy(cls.data, p->classes, (size_t)p->K * sizeof(double));
        gsb__tensor_as_1d(&cls);
        GSB_TRY(gsb__fit_set(c, "classes_", &cls));
        GSB_TRY(gsb__fit_set_scalar(c, "n_classes_", (double)p->K, GSB_I64));
        return gsb__fit_set_scalar(c, "n_outputs_", 1.0, GSB_I64);
    }
    return gsb__fit_set_scalar(c, "n_outputs_", (double)p->K, GSB_I64);
}

static int fit_from_trees(gsb__ctx *c, int classify)
{
    packed p;
    GSB_TRY(parse(gsb__in(c, "trees"), &p));
    if (p.classify != classify)
        return bad(classify ? "a regressor's" : "a classifier's");
    const gsb__tensor *X = gsb__in(c, "X"), *y = gsb__in(c, "y");
    if (X && X->cols != p.F)
        return gsb__err(GSB_EINVAL, "X has %lld features, but the trees were grown on %lld",
                        (long long)X->cols, (long long)p.F);
    if (!!X != !!y)
        return gsb__err(GSB_EINVAL, "%s.fit_from_trees: give X and y together (for the OOB "
                        "estimates) or neither", c->est->name);
    gsb__forest_model m;
    int rc = unpack(&p, &m);
    if (rc == GSB_OK)
        rc = gsb__forest_model_store(c, &m);
    gsb__forest_model_free(&m);
    GSB_TRY(rc);
    GSB_TRY(store_targets(c, &p));
    if (!X) /* the fit sets it from X otherwise */
        GSB_TRY(gsb__fit_set_scalar(c, "n_features_in_", (double)p.F, GSB_I64));
    if (X && gsb__param_bool(c->params, "oob_score"))
        return gsb__forest_oob(c, classify);
    return GSB_OK;
}

int gsb__forest_clf_fit_from_trees(gsb__ctx *c) { return fit_from_trees(c, 1); }
int gsb__forest_reg_fit_from_trees(gsb__ctx *c) { return fit_from_trees(c, 0); }
