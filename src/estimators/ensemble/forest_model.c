/*
 * forest_model.c - a fitted forest's flat arrays (see forest_model.h):
 * appending grown trees (thresholds from the bins, leaf values from the
 * samples), storing them as attributes, reading them back with checks.
 */
#include "estimators/ensemble/forest_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/hostmem.h"
#include "core/tensor.h"
#include "estimators/ensemble/forest_bins.h"

/*
 * The model's arrays come from the host allocator of tensors (hostmem.h:
 * large ones are huge-page mappings), so gsb__forest_model_store hands the
 * node and leaf arrays over to the attributes without a copy, and the fit's
 * end has no large free.
 */
void *gsb__forest_model_array(int64_t n, size_t size)
{
    if (gsb__array_too_big(n, size))
        return NULL;
    return gsb__host_alloc((size_t)(n > 0 ? n : 1) * size);
}

void gsb__forest_model_free(gsb__forest_model *m)
{
    void *all[] = {m->split, m->child, m->root, m->depth, m->threshold, m->value, m->seed,
                   m->importance};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__host_free(all[i]);
    memset(m, 0, sizeof *m);
}

/* *p (old elements kept) grown to n elements of size bytes */
static int resize(void **p, int64_t old, int64_t n, size_t size)
{
    void *q = gsb__forest_model_array(n, size);
    if (!q)
        return 0;
    if (*p && old > 0)
        memcpy(q, *p, (size_t)old * size);
    gsb__host_free(*p);
    *p = q;
    return 1;
}

/* The capacity after *cap for need elements (doubling), or *cap when enough. */
static int64_t next_cap(int64_t cap, int64_t need)
{
    if (need <= cap)
        return cap;
    int64_t nc = cap > 16 ? cap : 16;
    while (nc < need)
        nc *= 2;
    return nc;
}

/* Room for trees more trees, nodes more nodes and leaves more leaves. */
static int make_room(gsb__forest_model *m, int64_t trees, int64_t nodes, int64_t leaves)
{
    int64_t ct = next_cap(m->cap_trees, m->n_trees + trees);
    int64_t cn = next_cap(m->cap_nodes, m->n_nodes + nodes);
    int64_t cl = next_cap(m->cap_leaves, m->n_leaves + leaves);
    int64_t nt = m->n_trees, nn = m->n_nodes, nl = m->n_leaves;
    int ok = 1;
    if (ct != m->cap_trees) {
        ok = resize((void **)&m->root, nt, ct, sizeof *m->root) &&
             resize((void **)&m->depth, nt, ct, sizeof *m->depth) &&
             resize((void **)&m->seed, nt, ct, sizeof *m->seed) &&
             resize((void **)&m->importance, nt * m->F, ct * m->F, sizeof *m->importance);
        if (ok)
            m->cap_trees = ct;
    }
    if (ok && cn != m->cap_nodes) {
        ok = resize((void **)&m->split, nn, cn, sizeof *m->split) &&
             resize((void **)&m->child, nn, cn, sizeof *m->child) &&
             resize((void **)&m->threshold, nn, cn, sizeof *m->threshold);
        if (ok)
            m->cap_nodes = cn;
    }
    if (ok && cl != m->cap_leaves) {
        ok = resize((void **)&m->value, nl * m->K, cl * m->K, sizeof *m->value);
        if (ok)
            m->cap_leaves = cl;
    }
    if (!ok)
        return gsb__err(GSB_ENOMEM, "random forest: out of memory for the fitted trees");
    return GSB_OK;
}

/* A leaf's values: class fractions, or target means, from its samples. */
static void leaf_values(const gsb__forest_model *m, const gsb__grow_node *nd,
                        const gsb__leaf_source *src, float *out)
{
    double acc[64], *a = m->K <= 64 ? acc : NULL, W = 0;
    int64_t K = m->K;
    if (!a) { /* many values: accumulate in place, in float64 per value */
        for (int64_t k = 0; k < K; k++) {
            double s = 0;
            W = 0;
            for (int32_t i = nd->start; i < nd->end; i++) {
                int32_t r = src->rows[i];
                double w = src->weights[i];
                s += src->cls ? (src->cls[r] == k ? w : 0.0) : w * src->y[(int64_t)r * K + k];
                W += w;
            }
            out[k] = (float)(W > 0 ? s / W : 0.0);
        }
        return;
    }
    for (int64_t k = 0; k < K; k++)
        a[k] = 0;
    for (int32_t i = nd->start; i < nd->end; i++) {
        int32_t r = src->rows[i];
        double w = src->weights[i];
        if (src->cls)
            a[src->cls[r]] += w;
        else
            for (int64_t k = 0; k < K; k++)
                a[k] += w * src->y[(int64_t)r * K + k];
        W += w;
    }
    for (int64_t k = 0; k < K; k++)
        out[k] = (float)(W > 0 ? a[k] / W : 0.0);
}

/* Tree g's nodes at node base and leaf base of m (its slot t). */
static void put_tree(gsb__forest_model *m, int64_t t, int64_t base, int64_t leaf,
                     const gsb__grown *g, uint64_t seed, double root_weight,
                     const gsb__leaf_source *src)
{
    for (int64_t i = 0; i < g->n_nodes; i++) {
        const gsb__grow_node *nd = &g->nodes[i];
        int64_t at = base + i;
        if (nd->feature >= 0) {
            m->split[at] = 2 * nd->feature + (nd->missing_left ? 1 : 0);
            m->threshold[at] = gsb__forest_threshold(src->edges + nd->feature * src->edge_width,
                                                     nd->bin_lo, nd->bin_hi, src->n_real);
            m->child[at] = (int32_t)(base + nd->left);
        } else {
            m->split[at] = -1;
            m->threshold[at] = 0.0f;
            m->child[at] = (int32_t)leaf;
            leaf_values(m, nd, src, m->value + leaf * m->K);
            leaf++;
        }
    }
    m->root[t] = (int32_t)base;
    m->depth[t] = (int32_t)g->max_depth;
    m->seed[t] = (int64_t)seed;
    double *imp = m->importance + t * m->F, total = 0;
    for (int64_t f = 0; f < m->F; f++) {
        imp[f] = root_weight > 0 ? g->importance[f] / root_weight : 0.0;
        total += imp[f];
    }
    for (int64_t f = 0; f < m->F && total > 0; f++)
        imp[f] /= total;
}

int gsb__forest_model_append(gsb__forest_model *m, const gsb__grown *g, int64_t G,
                             const uint64_t *seeds, const double *root_weights,
                             const gsb__leaf_source *src)
{
    /* each tree's first node and first leaf: the offsets serial appends give */
    int64_t *base = gsb__alloc_array(2 * (G + 1), sizeof *base), *leaf = base + G + 1;
    if (!base)
        return gsb__err(GSB_ENOMEM, "random forest: out of memory for the fitted trees");
    /* each tree's leaves counted by a thread (a serial pass over millions of
     * nodes cost a GPU fit more than the rest of the append) */
#pragma omp parallel for schedule(dynamic, 1) if (G > 1)
    for (int64_t k = 0; k < G; k++) {
        int64_t leaves = 0;
        for (int64_t i = 0; i < g[k].n_nodes; i++)
            leaves += g[k].nodes[i].feature < 0;
        leaf[k + 1] = leaves;
    }
    base[0] = m->n_nodes;
    leaf[0] = m->n_leaves;
    for (int64_t k = 0; k < G; k++) {
        base[k + 1] = base[k] + g[k].n_nodes;
        leaf[k + 1] += leaf[k];
    }
    int rc = GSB_OK;
    if (base[G] > INT32_MAX || leaf[G] > INT32_MAX)
        rc = gsb__err(GSB_EUNSUPPORTED, "random forest: more than 2^31 nodes");
    if (rc == GSB_OK)
        rc = make_room(m, G, base[G] - m->n_nodes, leaf[G] - m->n_leaves);
    if (rc == GSB_OK) {
        /* the trees are independent: each fills its own ranges */
#pragma omp parallel for schedule(dynamic, 1) if (G > 1 && base[G] - base[0] > 65536)
        for (int64_t k = 0; k < G; k++)
            put_tree(m, m->n_trees + k, base[k], leaf[k], &g[k], seeds[k], root_weights[k],
                     src);
        m->n_trees += G;
        m->n_nodes = base[G];
        m->n_leaves = leaf[G];
    }
    free(base);
    return rc;
}

/* ---- attributes ------------------------------------------------------------------- */

static int put(gsb__ctx *c, const char *name, gsb_dtype dt, int64_t rows, int64_t cols,
               const void *data, int as_1d)
{
    gsb__tensor t;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, rows, cols, &t));
    if (rows * cols > 0)
        memcpy(t.data, data, gsb__tensor_nbytes(&t));
    if (as_1d)
        gsb__tensor_as_1d(&t);
    return gsb__fit_set(c, name, &t);
}

/* scikit-learn's forest feature_importances_: the mean of the trees' (those
 * with more than a root), normalised to sum 1; zeros when there are none. */
static int store_importances(gsb__ctx *c, const gsb__forest_model *m)
{
    double *fi = gsb__calloc_array(m->F, sizeof *fi), total = 0;
    int64_t used = 0;
    if (!fi)
        return gsb__err(GSB_ENOMEM, "random forest: out of memory for the importances");
    for (int64_t t = 0; t < m->n_trees; t++) {
        int64_t end = t + 1 < m->n_trees ? m->root[t + 1] : m->n_nodes;
        if (end - m->root[t] <= 1)
            continue;
        used++;
        for (int64_t f = 0; f < m->F; f++)
            fi[f] += m->importance[t * m->F + f];
    }
    for (int64_t f = 0; f < m->F && used > 0; f++)
        total += fi[f] / (double)used;
    for (int64_t f = 0; f < m->F; f++)
        fi[f] = used > 0 && total > 0 ? fi[f] / (double)used / total : 0.0;
    int rc = put(c, "feature_importances_", GSB_F64, m->F, 1, fi, 1);
    free(fi);
    return rc;
}

/* _tree_n_leaves: each tree's leaves (its nodes: 2 leaves - 1), for light views. */
static int store_leaf_counts(gsb__ctx *c, const gsb__forest_model *m)
{
    int32_t *leaves = gsb__calloc_array(m->n_trees, sizeof *leaves);
    if (!leaves)
        return gsb__err(GSB_ENOMEM, "random forest: out of memory for the leaf counts");
    for (int64_t t = 0; t < m->n_trees; t++) {
        int64_t end = t + 1 < m->n_trees ? m->root[t + 1] : m->n_nodes;
        for (int64_t i = m->root[t]; i < end; i++)
            leaves[t] += m->split[i] < 0;
    }
    int rc = put(c, "_tree_n_leaves", GSB_I32, m->n_trees, 1, leaves, 1);
    free(leaves);
    return rc;
}

/* The model's array *p (rows x cols) handed over as attribute name, no copy;
 * *p is the attribute's from then on (NULL in m). */
static int hand_over(gsb__ctx *c, const char *name, gsb_dtype dt, int64_t rows, int64_t cols,
                     void **p, int as_1d)
{
    gsb__tensor t = gsb__tensor_host_view(*p, dt, rows, cols);
    t.owned = 1; /* allocated as a host tensor's data is (gsb__forest_model_array) */
    *p = NULL;
    if (as_1d)
        gsb__tensor_as_1d(&t);
    return gsb__fit_set(c, name, &t);
}

int gsb__forest_model_store(gsb__ctx *c, gsb__forest_model *m)
{
    int64_t T = m->n_trees, N = m->n_nodes;
    GSB_TRY(hand_over(c, "_node_threshold", GSB_F32, N, 1, (void **)&m->threshold, 1));
    GSB_TRY(hand_over(c, "_node_child", GSB_I32, N, 1, (void **)&m->child, 1));
    GSB_TRY(put(c, "_tree_root", GSB_I32, T, 1, m->root, 1));
    GSB_TRY(put(c, "_tree_depth", GSB_I32, T, 1, m->depth, 1));
    GSB_TRY(put(c, "_tree_seed", GSB_I64, T, 1, m->seed, 1));
    GSB_TRY(store_leaf_counts(c, m));
    GSB_TRY(put(c, "_tree_importance", GSB_F64, T, m->F, m->importance, 0));
    GSB_TRY(hand_over(c, "_leaf_value", GSB_F32, m->n_leaves, m->K, (void **)&m->value, 0));
    GSB_TRY(store_importances(c, m));
    /* last: the counts above read it */
    return hand_over(c, "_node_split", GSB_I32, N, 1, (void **)&m->split, 1);
}

/* ---- reading back ----------------------------------------------------------------- */

static int altered(gsb__ctx *c, const char *what)
{
    return gsb__err(GSB_ECORRUPT, "The internal representation of %s was altered (%s)",
                    c->est->name, what);
}

int gsb__forest_model_arrays(gsb__ctx *c, int64_t K, gsb__forest_trees *out, int64_t *n_trees)
{
    const gsb__tensor *split, *thr, *child, *root, *value;
    GSB_TRY(gsb__attr_need(c, "_node_split", GSB_I32, -1, 1, &split));
    int64_t N = split->rows;
    GSB_TRY(gsb__attr_need(c, "_node_threshold", GSB_F32, N, 1, &thr));
    GSB_TRY(gsb__attr_need(c, "_node_child", GSB_I32, N, 1, &child));
    GSB_TRY(gsb__attr_need(c, "_tree_root", GSB_I32, -1, 1, &root));
    GSB_TRY(gsb__attr_need(c, "_leaf_value", GSB_F32, -1, K, &value));
    *out = (gsb__forest_trees){split, thr, child, root, value};
    *n_trees = root->rows;
    return GSB_OK;
}

int gsb__forest_model_view(gsb__ctx *c, int64_t n_features, int64_t K, gsb__forest_trees *out,
                           int64_t *n_trees)
{
    gsb__forest_trees v;
    int64_t T;
    GSB_TRY(gsb__forest_model_arrays(c, K, &v, &T));
    int64_t N = v.split->rows, L = v.value->rows;
    const int32_t *sp = v.split->data, *ch = v.child->data, *rt = v.root->data;
    if (T < 1 || N < 1 || rt[0] != 0)
        return altered(c, "no trees");
    for (int64_t t = 0; t < T; t++) {
        int64_t end = t + 1 < T ? rt[t + 1] : N;
        if (end <= rt[t] || end > N)
            return altered(c, "tree offsets");
    }
    int bad = 0;
    /* every walk moves forward inside its tree, so it ends at a leaf */
#pragma omp parallel for reduction(| : bad) schedule(dynamic, 1) if (N > 65536)
    for (int64_t t = 0; t < T; t++) {
        int64_t end = t + 1 < T ? rt[t + 1] : N;
        for (int64_t i = rt[t]; i < end; i++)
            bad |= sp[i] >= 0 ? (sp[i] >> 1) >= n_features || ch[i] <= i || ch[i] + 1 >= end
                              : ch[i] < 0 || ch[i] >= L;
    }
    if (bad)
        return altered(c, "node links");
    *out = v;
    *n_trees = T;
    return GSB_OK;
}

int gsb__forest_model_append_fitted(gsb__ctx *c, gsb__forest_model *m)
{
    gsb__forest_trees v;
    int64_t T;
    const gsb__tensor *depth, *seed, *imp;
    GSB_TRY(gsb__forest_model_view(c, m->F, m->K, &v, &T));
    GSB_TRY(gsb__attr_need(c, "_tree_depth", GSB_I32, T, 1, &depth));
    GSB_TRY(gsb__attr_need(c, "_tree_seed", GSB_I64, T, 1, &seed));
    GSB_TRY(gsb__attr_need(c, "_tree_importance", GSB_F64, T, m->F, &imp));
    int64_t N = v.split->rows;
    const int32_t *sp = v.split->data, *ch = v.child->data, *rt = v.root->data;
    for (int64_t t = 0; t < T; t++) {
        int64_t end = t + 1 < T ? rt[t + 1] : N, base = m->n_nodes, leaves = 0;
        for (int64_t i = rt[t]; i < end; i++)
            leaves += sp[i] < 0;
        GSB_TRY(make_room(m, 1, end - rt[t], leaves));
        for (int64_t i = rt[t]; i < end; i++) {
            int64_t at = base + i - rt[t];
            m->split[at] = sp[i];
            m->threshold[at] = ((const float *)v.threshold->data)[i];
            if (sp[i] >= 0) {
                m->child[at] = (int32_t)(base + ch[i] - rt[t]);
            } else {
                m->child[at] = (int32_t)m->n_leaves;
                memcpy(m->value + m->n_leaves * m->K,
                       (const float *)v.value->data + (int64_t)ch[i] * m->K,
                       (size_t)m->K * sizeof(float));
                m->n_leaves++;
            }
        }
        m->root[m->n_trees] = (int32_t)base;
        m->depth[m->n_trees] = ((const int32_t *)depth->data)[t];
        m->seed[m->n_trees] = ((const int64_t *)seed->data)[t];
        memcpy(m->importance + m->n_trees * m->F, (const double *)imp->data + t * m->F,
               (size_t)m->F * sizeof(double));
        m->n_nodes += end - rt[t];
        m->n_trees++;
    }
    return GSB_OK;
}

int64_t gsb__forest_walk(const gsb__forest_trees *t, int64_t root, const void *x,
                         gsb_dtype dtype)
{
    const int32_t *split = t->split->data, *child = t->child->data;
    const float *thr = t->threshold->data;
    int64_t node = root;
    while (split[node] >= 0) {
        int64_t f = split[node] >> 1;
        float v = dtype == GSB_F32 ? ((const float *)x)[f] : (float)((const double *)x)[f];
        int left = isnan(v) ? (split[node] & 1) : v <= thr[node];
        node = child[node] + (left ? 0 : 1);
    }
    return node;
}
