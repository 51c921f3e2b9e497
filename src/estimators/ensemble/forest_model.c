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
#include "core/tensor.h"
#include "estimators/ensemble/forest_bins.h"

void gsb__forest_model_free(gsb__forest_model *m)
{
    free(m->split);
    free(m->child);
    free(m->root);
    free(m->depth);
    free(m->threshold);
    free(m->value);
    free(m->seed);
    free(m->importance);
    memset(m, 0, sizeof *m);
}

/* realloc *p to n elements of size bytes */
static int resize(void **p, int64_t n, size_t size)
{
    if (gsb__array_too_big(n, size))
        return 0;
    void *q = realloc(*p, (size_t)(n > 0 ? n : 1) * size);
    if (!q)
        return 0;
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

/* Room for one more tree, nodes more nodes and leaves more leaves. */
static int make_room(gsb__forest_model *m, int64_t nodes, int64_t leaves)
{
    int64_t ct = next_cap(m->cap_trees, m->n_trees + 1);
    int64_t cn = next_cap(m->cap_nodes, m->n_nodes + nodes);
    int64_t cl = next_cap(m->cap_leaves, m->n_leaves + leaves);
    int ok = 1;
    if (ct != m->cap_trees) {
        ok = resize((void **)&m->root, ct, sizeof *m->root) &&
             resize((void **)&m->depth, ct, sizeof *m->depth) &&
             resize((void **)&m->seed, ct, sizeof *m->seed) &&
             resize((void **)&m->importance, ct * m->F, sizeof *m->importance);
        if (ok)
            m->cap_trees = ct;
    }
    if (ok && cn != m->cap_nodes) {
        ok = resize((void **)&m->split, cn, sizeof *m->split) &&
             resize((void **)&m->child, cn, sizeof *m->child) &&
             resize((void **)&m->threshold, cn, sizeof *m->threshold);
        if (ok)
            m->cap_nodes = cn;
    }
    if (ok && cl != m->cap_leaves) {
        ok = resize((void **)&m->value, cl * m->K, sizeof *m->value);
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

int gsb__forest_model_append(gsb__forest_model *m, const gsb__grown *g, uint64_t seed,
                             double root_weight, const gsb__leaf_source *src)
{
    int64_t leaves = 0;
    for (int64_t i = 0; i < g->n_nodes; i++)
        leaves += g->nodes[i].feature < 0;
    if (m->n_nodes + g->n_nodes > INT32_MAX || m->n_leaves + leaves > INT32_MAX)
        return gsb__err(GSB_EUNSUPPORTED, "random forest: more than 2^31 nodes");
    GSB_TRY(make_room(m, g->n_nodes, leaves));
    int64_t base = m->n_nodes, t = m->n_trees;
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
            m->child[at] = (int32_t)m->n_leaves;
            leaf_values(m, nd, src, m->value + m->n_leaves * m->K);
            m->n_leaves++;
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
    m->n_nodes += g->n_nodes;
    m->n_trees++;
    return GSB_OK;
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

int gsb__forest_model_store(gsb__ctx *c, const gsb__forest_model *m)
{
    int64_t T = m->n_trees, N = m->n_nodes;
    GSB_TRY(put(c, "_node_split", GSB_I32, N, 1, m->split, 1));
    GSB_TRY(put(c, "_node_threshold", GSB_F32, N, 1, m->threshold, 1));
    GSB_TRY(put(c, "_node_child", GSB_I32, N, 1, m->child, 1));
    GSB_TRY(put(c, "_tree_root", GSB_I32, T, 1, m->root, 1));
    GSB_TRY(put(c, "_tree_depth", GSB_I32, T, 1, m->depth, 1));
    GSB_TRY(put(c, "_tree_seed", GSB_I64, T, 1, m->seed, 1));
    GSB_TRY(store_leaf_counts(c, m));
    GSB_TRY(put(c, "_tree_importance", GSB_F64, T, m->F, m->importance, 0));
    GSB_TRY(put(c, "_leaf_value", GSB_F32, m->n_leaves, m->K, m->value, 0));
    return store_importances(c, m);
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
        GSB_TRY(make_room(m, end - rt[t], leaves));
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
