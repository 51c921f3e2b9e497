/*
 * tree_grow.c - growing a group of histogram trees through the backend's
 * forest ops; the rules and their reasons are in tree_grow.h.
 *
 * Host side: the frontier (nodes whose split is known but not applied),
 * feature draws, the leaf rules, node numbering, pool slots, importances.
 * Backend side (in batches of nodes): histograms, split search, partition.
 */
#include "estimators/ensemble/tree_grow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/forest_level.h"
#include "core/alloc.h"
#include "core/tensor.h"

/* A node with at least LARGE_BINS x n_bins samples gets a histogram slot. */
#define LARGE_BINS 8
/* Nodes per op call. */
#define BATCH_MAX 16384
/* Host buffers of an op call stay under this many 4-byte words. */
#define BATCH_WORDS ((int64_t)1 << 23)

/* A frontier node: made, its split searched, not yet split (or a leaf). */
typedef struct fnode {
    int32_t tree, id, start, end, depth, slot;
    double *stats;       /* V1, then the split record (rec_len) */
    double impurity, improvement;
    int can_split, chosen;
} fnode;

typedef struct block {
    struct block *next;
    double data[];
} block;

typedef struct grower {
    const gsb__backend *be;
    gsb__forest_data *d;
    const gsb__grow_params *p;
    const gsb__grow_tree *trees;
    int64_t T, F, m, batch;
    int V1, R, K, O, n_real, full;
    int64_t large;
    int32_t *free_slots;
    int64_t n_free;
    block *blocks;         /* stats storage of live nodes */
    gsb__grown *out;
    /* host buffers of an op call, batch rows */
    int32_t *nodes3, *feats, *splits3;
    double *recs;
} grower;

/* ---- small helpers ---------------------------------------------------------------- */

static int oom(const char *what)
{
    return gsb__err(GSB_ENOMEM, "random forest: out of memory for %s", what);
}

/* A host array as a tensor (the ops take the small ones from the host). */
static gsb__tensor view(void *host, int64_t rows, int64_t cols)
{
    return gsb__tensor_host_view(host, GSB_I32, rows, cols);
}

/* Storage for n nodes' stats and records. */
static double *new_stats(grower *g, int64_t n)
{
    block *b = gsb__alloc_array(1, sizeof(block) + (size_t)(n > 0 ? n : 1) *
                                                       (size_t)(g->V1 + g->R) * sizeof(double));
    if (!b)
        return NULL;
    b->next = g->blocks;
    g->blocks = b;
    return b->data;
}

static void free_blocks(block *b)
{
    while (b) {
        block *next = b->next;
        free(b);
        b = next;
    }
}

/* Append a node to tree t; its index, or -1 when out of memory. */
static int32_t add_node(grower *g, int32_t t, int32_t start, int32_t end, int32_t depth)
{
    gsb__grown *o = &g->out[t];
    if (o->n_nodes == o->cap) {
        int64_t cap = o->cap ? 2 * o->cap : 64;
        if (cap > INT32_MAX)
            return -1;
        gsb__grow_node *nn = realloc(o->nodes, (size_t)cap * sizeof *nn);
        if (!nn)
            return -1;
        o->nodes = nn;
        o->cap = cap;
    }
    gsb__grow_node *n = &o->nodes[o->n_nodes];
    memset(n, 0, sizeof *n);
    n->feature = -1;
    n->left = -1;
    n->start = start;
    n->end = end;
    n->depth = depth;
    if (depth > o->max_depth)
        o->max_depth = depth;
    return (int32_t)o->n_nodes++;
}

static int32_t take_slot(grower *g) { return g->n_free > 0 ? g->free_slots[--g->n_free] : -1; }

static void give_slot(grower *g, int32_t slot)
{
    if (slot >= 0)
        g->free_slots[g->n_free++] = slot;
}

/* ---- impurity --------------------------------------------------------------------- */

double gsb__forest_impurity(const double *s, int K, int O, int criterion)
{
    return gsb__forest_node_impurity(s, K, O, criterion);
}

static double impurity_of(const grower *g, const double *s)
{
    return gsb__forest_impurity(s, g->K, g->O, g->p->rule.criterion);
}

static double weight_of(const grower *g, const double *s) { return gsb__forest_weight(s, g->K); }

/* ---- feature draws ---------------------------------------------------------------- */

/* Node arrays of a batch above this size are filled by every thread. */
#define PARALLEL_NODES 2048

/* The drawn features of nodes list[0..B) into feats (B x (to - from)); 0 when
 * out of memory. */
static int draw_batch(grower *g, fnode **list, int64_t B, int64_t from, int64_t to,
                      int32_t *feats)
{
    int failed = 0;
    int64_t m = to - from, F = g->F;
#pragma omp parallel reduction(| : failed) if (B > PARALLEL_NODES)
    {
        int32_t *perm = gsb__alloc_array(F, sizeof *perm);
        int32_t *swaps = gsb__alloc_array(F, sizeof *swaps);
        failed = !perm || !swaps;
        for (int64_t f = 0; !failed && f < F; f++)
            perm[f] = (int32_t)f;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < B; b++)
            if (!failed)
                gsb__forest_draw(F, g->trees[list[b]->tree].seed, list[b]->id, from, to, perm,
                                 swaps, 1, feats + b * m);
        free(perm);
        free(swaps);
    }
    return !failed;
}

/* ---- split search ----------------------------------------------------------------- */

/*
 * Search the splits of nodes list[0..n) over their features [from, to) of
 * the permutation (m = to - from per node), first_only as forest_split.
 * Nodes of at least `large` samples without a slot get one for the search
 * when temp_slots (and one is free), filled with their drawn features.
 */
static int search(grower *g, fnode **list, int64_t n, int64_t from, int64_t to,
                  int first_only, int temp_slots)
{
    const gsb__backend *be = g->be;
    int64_t m = to - from;
    int rc = GSB_OK;
    gsb__forest_rule rule = {g->p->rule.criterion, g->p->rule.min_samples_leaf, g->p->rule.min_weight_leaf,
                             first_only};
    for (int64_t b0 = 0; b0 < n && rc == GSB_OK; b0 += g->batch) {
        int64_t B = n - b0 < g->batch ? n - b0 : g->batch, n_temp = 0;
        if (!draw_batch(g, list + b0, B, from, to, g->feats)) {
            rc = oom("feature draws");
            break;
        }
        for (int64_t b = 0; b < B; b++) {
            fnode *x = list[b0 + b];
            int32_t slot = x->slot;
            if (slot < 0 && temp_slots && x->end - x->start >= g->large &&
                (slot = take_slot(g)) >= 0)
                n_temp++;
            g->nodes3[3 * b] = x->start;
            g->nodes3[3 * b + 1] = x->end;
            g->nodes3[3 * b + 2] = slot;
        }
        if (n_temp > 0) { /* fill the temporary slots with the drawn features */
            int32_t *hn = gsb__alloc_array(n_temp * 3, sizeof *hn);
            int32_t *hf = gsb__alloc_array(n_temp * m, sizeof *hf);
            if (!hn || !hf) {
                free(hn);
                free(hf);
                rc = oom("histogram batches");
                break;
            }
            for (int64_t b = 0, k = 0; b < B; b++)
                if (g->nodes3[3 * b + 2] >= 0 && list[b0 + b]->slot < 0) {
                    memcpy(hn + 3 * k, g->nodes3 + 3 * b, 3 * sizeof *hn);
                    memcpy(hf + m * k, g->feats + m * b, (size_t)m * sizeof *hf);
                    k++;
                }
            gsb__tensor th = view(hn, n_temp, 3), thf = view(hf, n_temp, m);
            rc = be->ops->forest_hist(be, g->d, &th, &thf);
            free(hn);
            free(hf);
        }
        gsb__tensor tn = view(g->nodes3, B, 3), tf = view(g->feats, B, m);
        gsb__tensor tr = gsb__tensor_host_view(g->recs, GSB_F64, B, g->R);
        if (rc == GSB_OK)
            rc = be->ops->forest_split(be, g->d, &tn, &tf, &rule, &tr);
        for (int64_t b = 0; b < B; b++) {
            if (g->nodes3[3 * b + 2] >= 0 && list[b0 + b]->slot < 0)
                give_slot(g, g->nodes3[3 * b + 2]);
            if (rc == GSB_OK)
                memcpy(list[b0 + b]->stats + g->V1, g->recs + b * g->R,
                       (size_t)g->R * sizeof(double));
        }
    }
    return rc;
}

/* The leaf rules before a split search (scikit-learn's builders). */
static int leaf_before_search(const grower *g, const fnode *x)
{
    return gsb__forest_leaf_before(&g->p->rule, x->depth, x->end - x->start,
                                   weight_of(g, x->stats), x->impurity);
}

/* Whether record r of x is a split scikit-learn would make; sets x->improvement. */
static int accept_split(grower *g, fnode *x, const double *r)
{
    return gsb__forest_accept(&g->p->rule, x->stats, x->impurity, r,
                              weight_of(g, g->trees[x->tree].root_stats), g->K, g->O,
                              &x->improvement);
}

/* Find the splits of new nodes list[0..n): can_split and the record. */
static int evaluate(grower *g, fnode **list, int64_t n)
{
    fnode **cand = gsb__alloc_array(n, sizeof *cand);
    if (!cand)
        return oom("the split search");
    int64_t nc = 0;
#pragma omp parallel for schedule(static) if (n > PARALLEL_NODES)
    for (int64_t i = 0; i < n; i++) {
        list[i]->can_split = 0;
        list[i]->impurity = impurity_of(g, list[i]->stats);
    }
    for (int64_t i = 0; i < n; i++)
        if (!leaf_before_search(g, list[i]))
            cand[nc++] = list[i];
    int rc = search(g, cand, nc, 0, g->m, 0, !g->full);
    /* all drawn features constant: go on through the rest, up to the first non-constant */
    int64_t nr = 0;
    for (int64_t i = 0; i < nc && rc == GSB_OK && g->m < g->F; i++)
        if (cand[i]->stats[g->V1 + GSB__FREC_NONCONST] < 0.5)
            cand[nr++] = cand[i];
    if (rc == GSB_OK && nr > 0 && g->m < g->F)
        rc = search(g, cand, nr, g->m, g->F, 1, 0);
#pragma omp parallel for schedule(static) if (n > PARALLEL_NODES && rc == GSB_OK)
    for (int64_t i = 0; i < n; i++)
        list[i]->can_split = rc == GSB_OK && !leaf_before_search(g, list[i]) &&
                             accept_split(g, list[i], list[i]->stats + g->V1);
    free(cand);
    return rc;
}

/* ---- applying splits -------------------------------------------------------------- */

/* Partition the samples of the nodes that split, check the counts. */
static int partition(grower *g, fnode **list, int64_t n, int32_t *n_left)
{
    const gsb__backend *be = g->be;
    int rc = GSB_OK;
    for (int64_t b0 = 0; b0 < n && rc == GSB_OK; b0 += g->batch) {
        int64_t B = n - b0 < g->batch ? n - b0 : g->batch;
        for (int64_t b = 0; b < B; b++) {
            const fnode *x = list[b0 + b];
            const double *r = x->stats + g->V1;
            g->nodes3[3 * b] = x->start;
            g->nodes3[3 * b + 1] = x->end;
            g->nodes3[3 * b + 2] = -1;
            g->splits3[3 * b] = (int32_t)r[GSB__FREC_FEATURE];
            g->splits3[3 * b + 1] = (int32_t)r[GSB__FREC_BIN_LO];
            g->splits3[3 * b + 2] = (int32_t)r[GSB__FREC_MISSING_LEFT];
        }
        gsb__tensor tn = view(g->nodes3, B, 3), ts = view(g->splits3, B, 3);
        gsb__tensor tl = view(n_left + b0, B, 1);
        rc = be->ops->forest_partition(be, g->d, &tn, &ts, &tl);
    }
    for (int64_t i = 0; i < n && rc == GSB_OK; i++) {
        double want = list[i]->stats[g->V1 + GSB__FREC_LEFT];
        if (fabs((double)n_left[i] - want) > 0.5)
            rc = gsb__err(GSB_EINTERNAL, "random forest: partition sent %d samples left, the "
                          "split search counted %.0f", n_left[i], want);
    }
    return rc;
}

/*
 * Full-histogram mode: for each parent with a slot, the smaller child's
 * histogram is built and the larger child takes the parent's slot minus it.
 */
static int derive_histograms(grower *g, fnode **parents, int64_t n, fnode *children)
{
    const gsb__backend *be = g->be;
    int32_t *build = gsb__alloc_array(3 * n, sizeof *build);
    int32_t *pairs = gsb__alloc_array(2 * n, sizeof *pairs);
    int32_t *drop = gsb__alloc_array(n, sizeof *drop);
    int rc = GSB_OK;
    if (!build || !pairs || !drop) {
        rc = oom("histogram subtraction");
        goto done;
    }
    int64_t nb = 0, nd = 0;
    for (int64_t i = 0; i < n; i++) {
        fnode *l = &children[2 * i], *r = &children[2 * i + 1];
        int32_t ps = parents[i]->slot;
        l->slot = r->slot = -1;
        if (ps < 0)
            continue;
        fnode *small = l->end - l->start <= r->end - r->start ? l : r;
        fnode *big = small == l ? r : l;
        int32_t s;
        if (big->end - big->start < g->large || (s = take_slot(g)) < 0) {
            give_slot(g, ps);
            continue;
        }
        build[3 * nb] = small->start;
        build[3 * nb + 1] = small->end;
        build[3 * nb + 2] = s;
        pairs[2 * nb] = ps;
        pairs[2 * nb + 1] = s;
        nb++;
        big->slot = ps;
        if (small->end - small->start >= g->large)
            small->slot = s;
        else
            drop[nd++] = s;
    }
    for (int64_t b0 = 0; b0 < nb && rc == GSB_OK; b0 += g->batch) {
        int64_t B = nb - b0 < g->batch ? nb - b0 : g->batch;
        gsb__tensor tn = view(build + 3 * b0, B, 3), tp = view(pairs + 2 * b0, B, 2);
        rc = be->ops->forest_hist(be, g->d, &tn, NULL);
        if (rc == GSB_OK)
            rc = be->ops->forest_hist_sub(be, g->d, &tp);
    }
    for (int64_t i = 0; i < nd; i++)
        give_slot(g, drop[i]);
done:
    free(build);
    free(pairs);
    free(drop);
    return rc;
}

/* Split the nodes list[0..n): children into *children (2n, left then right). */
static int expand(grower *g, fnode **list, int64_t n, fnode **children)
{
    int32_t *n_left = gsb__alloc_array(n, sizeof *n_left);
    fnode *kids = gsb__alloc_array(2 * n, sizeof *kids);
    double *stats = new_stats(g, 2 * n);
    int rc = GSB_OK;
    *children = kids;
    if (!n_left || !kids || !stats) {
        free(n_left);
        return oom("new nodes");
    }
    rc = partition(g, list, n, n_left);
    for (int64_t i = 0; i < n && rc == GSB_OK; i++) {
        fnode *x = list[i];
        const double *r = x->stats + g->V1;
        int32_t mid = x->start + n_left[i];
        int32_t li = add_node(g, x->tree, x->start, mid, x->depth + 1);
        int32_t ri = li < 0 ? -1 : add_node(g, x->tree, mid, x->end, x->depth + 1);
        if (ri < 0) {
            rc = oom("tree nodes");
            break;
        }
        gsb__grow_node *pn = &g->out[x->tree].nodes[x->id];
        pn->feature = (int32_t)r[GSB__FREC_FEATURE];
        pn->bin_lo = (int32_t)r[GSB__FREC_BIN_LO];
        pn->bin_hi = (int32_t)r[GSB__FREC_BIN_HI];
        pn->missing_left = (int32_t)r[GSB__FREC_MISSING_LEFT];
        pn->left = li;
        fnode *l = &kids[2 * i], *rt = &kids[2 * i + 1];
        *l = (fnode){x->tree, li, x->start, mid, x->depth + 1, -1, stats + 2 * i * (g->V1 + g->R),
                     0, 0, 0, 0};
        *rt = (fnode){x->tree, ri, mid, x->end, x->depth + 1, -1,
                      stats + (2 * i + 1) * (g->V1 + g->R), 0, 0, 0, 0};
        memcpy(l->stats, r + GSB__FREC_LEFT, (size_t)g->V1 * sizeof(double));
        memcpy(rt->stats, r + GSB__FREC_LEFT + g->V1, (size_t)g->V1 * sizeof(double));
        /* scikit-learn's importance: W imp - W_l imp_l - W_r imp_r */
        g->out[x->tree].importance[pn->feature] +=
            gsb__forest_importance(x->stats, x->impurity, l->stats, rt->stats, g->K, g->O,
                                   g->p->rule.criterion);
    }
    if (rc == GSB_OK && g->full)
        rc = derive_histograms(g, list, n, kids);
    else
        for (int64_t i = 0; i < n; i++)
            give_slot(g, list[i]->slot);
    free(n_left);
    return rc;
}

/* ---- the growth loop -------------------------------------------------------------- */

/* Which frontier nodes split this step (marked chosen): all that can
 * (breadth first), or in each tree that may still grow the one of the
 * largest improvement, ties to the older node (best first).  best: T
 * entries of scratch. */
static int64_t choose(grower *g, fnode *front, int64_t nf, int64_t *budget, int64_t *best,
                      fnode **chosen)
{
    int64_t n = 0;
    for (int64_t i = 0; i < nf; i++)
        front[i].chosen = 0;
    if (g->p->max_leaf_nodes <= 0) {
        for (int64_t i = 0; i < nf; i++)
            if (front[i].can_split) {
                front[i].chosen = 1;
                chosen[n++] = &front[i];
            }
        return n;
    }
    for (int64_t t = 0; t < g->T; t++)
        best[t] = -1;
    for (int64_t i = 0; i < nf; i++) {
        fnode *x = &front[i];
        if (!x->can_split || budget[x->tree] <= 0)
            continue;
        int64_t *bt = &best[x->tree];
        if (*bt < 0 || x->improvement > front[*bt].improvement ||
            (x->improvement == front[*bt].improvement && x->id < front[*bt].id))
            *bt = i;
    }
    for (int64_t t = 0; t < g->T; t++)
        if (best[t] >= 0) {
            front[best[t]].chosen = 1;
            chosen[n++] = &front[best[t]];
            budget[t]--;
        }
    return n;
}

static int grow(grower *g, gsb__grow_progress progress, void *progress_data)
{
    int64_t T = g->T, nf = T, cap = T;
    fnode *front = gsb__alloc_array(cap, sizeof *front);
    fnode **ptrs = NULL, **chosen = NULL;
    int64_t *budget = gsb__alloc_array(T, sizeof *budget);
    int64_t *best = gsb__alloc_array(T, sizeof *best);
    double *stats = new_stats(g, T);
    int rc = GSB_OK;
    if (!front || !budget || !best || !stats) {
        rc = oom("the frontier");
        goto done;
    }
    for (int64_t t = 0; t < T; t++) {
        const gsb__grow_tree *tr = &g->trees[t];
        int32_t id = add_node(g, (int32_t)t, (int32_t)tr->start, (int32_t)tr->end, 0);
        if (id < 0) {
            rc = oom("tree nodes");
            goto done;
        }
        front[t] = (fnode){(int32_t)t, id, (int32_t)tr->start, (int32_t)tr->end, 0, -1,
                           stats + t * (g->V1 + g->R), 0, 0, 0, 0};
        memcpy(front[t].stats, tr->root_stats, (size_t)g->V1 * sizeof(double));
        budget[t] = g->p->max_leaf_nodes > 0 ? g->p->max_leaf_nodes - 1 : INT64_MAX;
    }
    if (g->full) { /* roots with many samples start with a full histogram */
        for (int64_t t = 0; t < T; t++)
            if (front[t].end - front[t].start >= g->large)
                front[t].slot = take_slot(g);
        int32_t *build = gsb__alloc_array(3 * T, sizeof *build);
        int64_t nb = 0;
        if (!build) {
            rc = oom("root histograms");
            goto done;
        }
        for (int64_t t = 0; t < T; t++)
            if (front[t].slot >= 0) {
                build[3 * nb] = front[t].start;
                build[3 * nb + 1] = front[t].end;
                build[3 * nb + 2] = front[t].slot;
                nb++;
            }
        gsb__tensor tn = view(build, nb, 3);
        if (nb > 0)
            rc = g->be->ops->forest_hist(g->be, g->d, &tn, NULL);
        free(build);
        if (rc != GSB_OK)
            goto done;
    }
    ptrs = gsb__alloc_array(nf, sizeof *ptrs);
    if (!ptrs) {
        rc = oom("the frontier");
        goto done;
    }
    for (int64_t i = 0; i < nf; i++)
        ptrs[i] = &front[i];
    GSB_CHECK(evaluate(g, ptrs, nf));
    for (int64_t step = 0;; step++) {
        free(chosen);
        chosen = gsb__alloc_array(nf, sizeof *chosen);
        if (!chosen) {
            rc = oom("the frontier");
            goto done;
        }
        int64_t ne = choose(g, front, nf, budget, best, chosen);
        /* the nodes that stay: not chosen, and able to split later (best first) */
        int64_t keep = 0;
        for (int64_t i = 0; i < nf; i++) {
            fnode *x = &front[i];
            if (x->chosen)
                continue;
            if (g->p->max_leaf_nodes > 0 && x->can_split && budget[x->tree] > 0)
                keep++;
            else
                give_slot(g, x->slot); /* a leaf */
        }
        if (ne == 0)
            break;
        fnode *kids = NULL;
        rc = expand(g, chosen, ne, &kids);
        if (rc == GSB_OK) {
            free(ptrs);
            ptrs = gsb__alloc_array(2 * ne, sizeof *ptrs);
            if (!ptrs)
                rc = oom("the frontier");
        }
        if (rc == GSB_OK) {
            for (int64_t i = 0; i < 2 * ne; i++)
                ptrs[i] = &kids[i];
            rc = evaluate(g, ptrs, 2 * ne);
        }
        if (rc != GSB_OK) {
            free(kids);
            goto done;
        }
        /* the new frontier: the nodes that stay, then the children */
        keep = 0;
        for (int64_t i = 0; i < nf; i++)
            if (!front[i].chosen && g->p->max_leaf_nodes > 0 && front[i].can_split &&
                budget[front[i].tree] > 0)
                front[keep++] = front[i];
        if (keep + 2 * ne > cap) {
            cap = keep + 2 * ne;
            fnode *nfr = realloc(front, (size_t)cap * sizeof *nfr);
            if (!nfr) {
                free(kids);
                rc = oom("the frontier");
                goto done;
            }
            front = nfr;
        }
        memcpy(front + keep, kids, (size_t)(2 * ne) * sizeof *kids);
        free(kids);
        nf = keep + 2 * ne;
        if (g->p->max_leaf_nodes <= 0) { /* breadth first: older stats are dead */
            block *b = g->blocks->next;
            g->blocks->next = NULL;
            free_blocks(b);
        }
        if (progress)
            GSB_CHECK(progress(progress_data, step + 1));
    }
done:
    free(front);
    free(ptrs);
    free(chosen);
    free(budget);
    free(best);
    return rc;
}

/* ---- setup ------------------------------------------------------------------------ */

int64_t gsb__grow_large(const gsb__forest_data *d) { return (int64_t)LARGE_BINS * d->n_bins; }

int64_t gsb__grow_max_slots(const gsb__forest_data *d, const gsb__grow_params *p,
                            int64_t n_trees)
{
    int64_t S = d->rows->rows * d->rows->cols, large = gsb__grow_large(d);
    int64_t slot_bytes = d->n_features * d->n_bins *
                         gsb__forest_nstats(d->n_classes, d->n_outputs) * (int64_t)sizeof(double);
    int64_t n_slots = p->pool_bytes / slot_bytes;
    /* more slots than nodes large enough to use them would be wasted */
    if (n_slots > 2 * (S / large + n_trees))
        n_slots = 2 * (S / large + n_trees);
    return n_slots > INT32_MAX ? INT32_MAX : n_slots;
}

int64_t gsb__grow_pool(const gsb__backend *be, const gsb__forest_data *d,
                       const gsb__grow_params *p, int64_t n_trees, gsb__tensor *pool)
{
    int64_t n_slots = gsb__grow_max_slots(d, p, n_trees);
    int64_t slot_len = d->n_features * d->n_bins * gsb__forest_nstats(d->n_classes, d->n_outputs);
    *pool = GSB__TENSOR_NONE;
    /* fewer slots when the device has less memory than the budget */
    while (n_slots > 0 && gsb__tensor_alloc(be, GSB_F64, n_slots, slot_len, pool) != GSB_OK)
        n_slots /= 2;
    return n_slots;
}

void gsb__grown_free(gsb__grown *g)
{
    free(g->nodes);
    free(g->importance);
    memset(g, 0, sizeof *g);
}

int gsb__grow_trees(const gsb__backend *be, gsb__forest_data *d, const gsb__grow_params *p,
                    const gsb__grow_tree *trees, int64_t n_trees, gsb__grown *out,
                    gsb__grow_progress progress, void *progress_data)
{
    grower g = {0};
    g.be = be;
    g.d = d;
    g.p = p;
    g.trees = trees;
    g.T = n_trees;
    g.F = d->n_features;
    g.m = p->rule.max_features < g.F ? p->rule.max_features : g.F;
    g.K = d->n_classes > 0 ? d->n_classes : 0;
    g.O = d->n_classes > 0 ? 0 : d->n_outputs;
    g.V1 = gsb__forest_nstats(d->n_classes, d->n_outputs);
    g.R = gsb__forest_rec_len(g.V1);
    g.n_real = d->nan_code >= 0 ? d->n_bins - 1 : d->n_bins;
    g.full = 2 * g.m >= g.F;
    g.large = gsb__grow_large(d);
    g.out = out;
    g.batch = BATCH_WORDS / (g.F + 2 * g.R + 8);
    g.batch = g.batch < 1 ? 1 : g.batch > BATCH_MAX ? BATCH_MAX : g.batch;
    int64_t S = d->rows->rows * d->rows->cols, n_slots = 0;
    gsb__tensor pool = GSB__TENSOR_NONE, srows = GSB__TENSOR_NONE, sw = GSB__TENSOR_NONE;
    int rc = GSB_OK;
    for (int64_t t = 0; t < n_trees; t++)
        if (!(out[t].importance = gsb__calloc_array(g.F, sizeof(double)))) {
            rc = oom("importances");
            goto done;
        }
    g.free_slots = gsb__alloc_array(gsb__grow_max_slots(d, p, n_trees) + 1,
                                    sizeof *g.free_slots);
    g.nodes3 = gsb__alloc_array(3 * g.batch, sizeof *g.nodes3);
    g.splits3 = gsb__alloc_array(3 * g.batch, sizeof *g.splits3);
    g.feats = gsb__alloc_array(g.batch * g.F, sizeof *g.feats);
    g.recs = gsb__alloc_array(g.batch * g.R, sizeof *g.recs);
    if (!g.free_slots || !g.nodes3 || !g.splits3 || !g.feats || !g.recs) {
        rc = oom("the tree grower");
        goto done;
    }
    n_slots = gsb__grow_pool(be, d, p, n_trees, &pool);
    for (int64_t s = 0; s < n_slots; s++)
        g.free_slots[s] = (int32_t)(n_slots - 1 - s);
    g.n_free = n_slots;
    d->pool = n_slots > 0 ? &pool : NULL;
    GSB_CHECK(gsb__tensor_alloc(be, GSB_I32, S, 1, &srows));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F32, S, 1, &sw));
    d->scratch_rows = &srows;
    d->scratch_weights = &sw;
    rc = grow(&g, progress, progress_data);
done:
    d->pool = NULL;
    d->scratch_rows = d->scratch_weights = NULL;
    gsb__tensor_free(&pool);
    gsb__tensor_free(&srows);
    gsb__tensor_free(&sw);
    free_blocks(g.blocks);
    free(g.free_slots);
    free(g.nodes3);
    free(g.splits3);
    free(g.feats);
    free(g.recs);
    return rc;
}
