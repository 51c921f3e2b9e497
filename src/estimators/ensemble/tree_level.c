/*
 * tree_level.c - growing a group of trees breadth first with the frontier in
 * the backend's memory (the forest_level_* ops, backend.h): the GPU's
 * grower.  tree_grow.c grows the same trees with the frontier on the host,
 * which costs the GPU a round trip and host work per node.
 *
 * A level, for every tree of the group at once:
 *   forest_level_feats   the candidates (leaf rules) and their drawn features
 *   forest_split         their best splits
 *   (forest_level_feats and forest_split again, first_only, for the
 *   candidates whose drawn features were all constant, when m < n_features)
 *   forest_level_decide  leaves, splits, the children numbered (the next
 *                        frontier, its stats)
 *   forest_level_partition  the samples of the nodes that split
 * The host reads back the candidate counts and the count of splits (to size
 * the next calls).  The levels' nodes and importances stay in a store on the
 * backend, one level after another, read back once when the growth ends (or
 * when the store would pass STORE_MAX nodes) and joined to their trees on
 * the host, a tree per thread: a read-back per level and a serial append of
 * millions of nodes cost the GPU more than the split searches.
 *
 * Histograms: when the nodes draw most of the features (2 max_features >=
 * n_features), nodes of at least gsb__grow_large samples keep every
 * feature's histogram in a pool slot, as tree_grow.c's full-histogram mode,
 * with the same slot rules in the same order (so both growers give a node a
 * slot alike and grow the same trees): the roots' are built; after a level's
 * partition the smaller child's are built (forest_hist) and the larger
 * child's are the parent's minus them (forest_hist_sub).  The host keeps the
 * slots (it reads back the level's splits while any node has one) and hands
 * them to forest_level_feats, whose segments carry them to forest_split.
 * Other nodes' stats are summed from their samples by forest_split.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/forest_level.h"
#include "core/alloc.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "estimators/ensemble/tree_grow.h"

/* the most nodes the store keeps on the backend before its levels join their
 * trees (48 bytes each: 768 MiB) */
#define STORE_MAX ((int64_t)1 << 24)

/* The kinds of step a level takes, as GSB_PROFILE reports them. */
enum { PH_FEATS, PH_SPLIT, PH_DECIDE, PH_PART, PH_READ, PH_SLOTS, PH_HOST, PH_N };
static const char *const ph_name[PH_N] = {
    "  level: candidates and feature draws (forest_level_feats + count read)",
    "  level: split search (forest_split)",
    "  level: decide (forest_level_decide)",
    "  level: partition (forest_level_partition + count read)",
    "  level: nodes stored; read back and appended at the end (host)",
    "  level: histogram slots (read-back, forest_hist, forest_hist_sub)",
    "  level: room, slots upload, progress (host)"};

typedef struct lgrow {
    const gsb__backend *be;
    gsb__forest_data *d;
    const gsb__grow_params *p;
    int64_t T, F, m, V1, R;
    gsb__tensor seeds, root_w, tcount, counts, owner, srows, sw;
    gsb__tensor front[2], stats[2];                  /* the frontier, ping-pong */
    gsb__tensor map, map2, seg, feats, feats2, recs, recs2, splits;
    int32_t *h_nodes;                                 /* a level's nodes on the host (slots) */
    int64_t h_cap;
    /* the store: levels' nodes and importances on the backend, not yet appended */
    gsb__tensor all_nodes, all_imp;
    int64_t n_all, store_cap;
    int64_t *lvl_off, n_lvl, lvl_cap;                 /* where each stored level starts */
    int32_t *h_all;                                   /* the store read back */
    double *h_all_imp;
    int64_t h_all_cap;
    /* histogram slots (none unless full) */
    gsb__tensor pool, slots;
    int64_t large, n_free;
    int32_t *free_slots;
    int32_t *h_slot, *h_kslot;                        /* the frontier's, the next one's */
    int32_t *h_splits, *h_build, *h_pairs, *h_drop;   /* a level's splits, derivations */
    int any_slot;                                     /* a frontier node has a slot */
    /* GSB_PROFILE: time per kind of step summed over the levels (ms; each step
     * waits for the device, so these add up to the growth), and counts */
    double ms[PH_N], t_last;
    int64_t n_levels, n_nodes, n_cands[2], n_splits, n_waits, n_slot_nodes;
} lgrow;

static int oom(const char *what)
{
    return gsb__err(GSB_ENOMEM, "random forest: out of memory for %s", what);
}

/* GSB_PROFILE: the time since the last tick goes to step ph (nothing when off). */
static void tick(lgrow *g, int ph)
{
    if (!gsb__profile_on())
        return;
    double t = gsb__profile_clock(g->be);
    g->ms[ph] += t - g->t_last;
    g->t_last = t;
}

static void report(const lgrow *g)
{
    if (!gsb__profile_on())
        return;
    for (int k = 0; k < PH_N; k++)
        gsb__profile_note(ph_name[k], g->ms[k]);
    gsb__profile_count("  levels", g->n_levels);
    gsb__profile_count("  level nodes (all levels)", g->n_nodes);
    gsb__profile_count("  split-search candidates, pass 0", g->n_cands[0]);
    gsb__profile_count("  split-search candidates, pass 1 (first drawn features constant)",
                       g->n_cands[1]);
    gsb__profile_count("  splits", g->n_splits);
    gsb__profile_count("  nodes searched from a histogram slot", g->n_slot_nodes);
    gsb__profile_count("  host waits (read-backs)", g->n_waits);
}

/* t holds at least rows x cols of dtype (contents dropped when it grows). */
static int ensure(const gsb__backend *be, gsb_dtype dt, int64_t rows, int64_t cols,
                  gsb__tensor *t)
{
    if (t->data && t->rows >= rows)
        return GSB_OK;
    gsb__tensor_free(t);
    rows = rows + rows / 2 + 16;
    return gsb__tensor_alloc(be, dt, rows, cols, t);
}

/* The first rows of t. */
static gsb__tensor head(const gsb__tensor *t, int64_t rows)
{
    gsb__tensor v = *t;
    v.owned = 0;
    v.rows = rows;
    return v;
}

/* Rows [r0, r0 + rows) of t (a row range is a tensor on every backend). */
static gsb__tensor rows_of(const gsb__tensor *t, int64_t r0, int64_t rows)
{
    gsb__tensor v = head(t, rows);
    v.data = (char *)t->data + (size_t)(r0 * t->cols) * gsb_dtype_size(t->dtype);
    return v;
}

static int read_counts(lgrow *g, int32_t *out)
{
    g->n_waits++;
    return g->be->ops->download(g->be, &g->counts, out);
}

/* A host array as a tensor (forest_hist and forest_hist_sub plan from it). */
static gsb__tensor host_i32(int32_t *p, int64_t rows, int64_t cols)
{
    return gsb__tensor_host_view(p, GSB_I32, rows, cols);
}

/* ---- histogram slots (tree_grow.c's stack of free slots, the same order) ------------ */

static int32_t take_slot(lgrow *g) { return g->n_free > 0 ? g->free_slots[--g->n_free] : -1; }

static void give_slot(lgrow *g, int32_t slot)
{
    if (slot >= 0)
        g->free_slots[g->n_free++] = slot;
}

/* The pool, when the nodes draw most features (else no slots). */
static int pool_setup(lgrow *g)
{
    if (2 * g->m < g->F)
        return GSB_OK;
    int64_t n_slots = gsb__grow_pool(g->be, g->d, g->p, g->T, &g->pool);
    g->large = gsb__grow_large(g->d);
    g->free_slots = gsb__alloc_array(n_slots + 1, sizeof *g->free_slots);
    if (!g->free_slots)
        return oom("histogram slots");
    for (int64_t s = 0; s < n_slots; s++)
        g->free_slots[s] = (int32_t)(n_slots - 1 - s);
    g->n_free = n_slots;
    return GSB_OK;
}

/* The roots of many samples start with their histograms. */
static int root_histograms(lgrow *g, const gsb__grow_tree *trees)
{
    int64_t nb = 0;
    for (int64_t t = 0; t < g->T; t++) {
        g->h_slot[t] = -1;
        if (g->n_free > 0 && trees[t].end - trees[t].start >= g->large) {
            int32_t s = take_slot(g);
            g->h_slot[t] = s;
            g->h_build[3 * nb] = (int32_t)trees[t].start;
            g->h_build[3 * nb + 1] = (int32_t)trees[t].end;
            g->h_build[3 * nb + 2] = s;
            nb++;
        }
    }
    g->any_slot = nb > 0;
    gsb__tensor tn = host_i32(g->h_build, nb, 3);
    return nb > 0 ? g->be->ops->forest_hist(g->be, g->d, &tn, NULL) : GSB_OK;
}

/* ---- setup ------------------------------------------------------------------------ */

/* A new tensor on be holding a copy of host data. */
static int upload_new(const gsb__backend *be, const void *host, gsb_dtype dt, int64_t rows,
                      int64_t cols, gsb__tensor *out)
{
    GSB_TRY(gsb__tensor_alloc(be, dt, rows, cols, out));
    return be->ops->upload(be, out, host);
}

/* The roots (the first frontier), seeds, root weights, counts, owners. */
static int setup(lgrow *g, const gsb__grow_tree *trees)
{
    const gsb__backend *be = g->be;
    int64_t T = g->T, S = g->d->rows->rows * g->d->rows->cols;
    int32_t *front = gsb__alloc_array(T * GSB__FLV_FRONT, sizeof *front);
    int32_t *tc = gsb__alloc_array(T, sizeof *tc), *owner = gsb__alloc_array(S, sizeof *owner);
    int64_t *seeds = gsb__alloc_array(T, sizeof *seeds);
    double *stats = gsb__alloc_array(T * g->V1, sizeof *stats);
    double *rw = gsb__alloc_array(T, sizeof *rw);
    int K = g->d->n_classes > 0 ? g->d->n_classes : 0;
    int rc = GSB_OK;
    if (!front || !tc || !owner || !seeds || !stats || !rw) {
        rc = oom("the roots");
        goto done;
    }
    for (int64_t t = 0; t < T; t++) {
        int32_t *x = front + t * GSB__FLV_FRONT;
        x[GSB__FLV_TREE] = (int32_t)t;
        x[GSB__FLV_ID] = 0;
        x[GSB__FLV_START] = (int32_t)trees[t].start;
        x[GSB__FLV_END] = (int32_t)trees[t].end;
        x[GSB__FLV_DEPTH] = 0;
        tc[t] = 1;
        seeds[t] = (int64_t)trees[t].seed;
        memcpy(stats + t * g->V1, trees[t].root_stats, (size_t)g->V1 * sizeof *stats);
        rw[t] = gsb__forest_weight(trees[t].root_stats, K);
        for (int64_t j = trees[t].start; j < trees[t].end; j++)
            owner[j] = (int32_t)t;
    }
    GSB_CHECK(upload_new(be, front, GSB_I32, T, GSB__FLV_FRONT, &g->front[0]));
    GSB_CHECK(upload_new(be, stats, GSB_F64, T, g->V1, &g->stats[0]));
    GSB_CHECK(upload_new(be, tc, GSB_I32, T, 1, &g->tcount));
    GSB_CHECK(upload_new(be, seeds, GSB_I64, T, 1, &g->seeds));
    GSB_CHECK(upload_new(be, rw, GSB_F64, T, 1, &g->root_w));
    GSB_CHECK(upload_new(be, owner, GSB_I32, S, 1, &g->owner));
    GSB_CHECK(gsb__tensor_zeros(be, GSB_I32, 2, 1, &g->counts));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_I32, S, 1, &g->srows));
    rc = gsb__tensor_alloc(be, GSB_F32, S, 1, &g->sw);
done:
    free(front);
    free(tc);
    free(owner);
    free(seeds);
    free(stats);
    free(rw);
    return rc;
}

/* ---- a level ---------------------------------------------------------------------- */

/* Room for a level of n nodes (and its 2n children in the other buffer). */
static int level_room(lgrow *g, int64_t n, int nxt)
{
    const gsb__backend *be = g->be;
    GSB_TRY(ensure(be, GSB_I32, n, 1, &g->map));
    GSB_TRY(ensure(be, GSB_I32, n, 3, &g->seg));
    GSB_TRY(ensure(be, GSB_I32, n, g->m, &g->feats));
    GSB_TRY(ensure(be, GSB_F64, n, g->R, &g->recs));
    if (g->m < g->F) {
        GSB_TRY(ensure(be, GSB_I32, n, 1, &g->map2));
        GSB_TRY(ensure(be, GSB_I32, n, g->F - g->m, &g->feats2));
        GSB_TRY(ensure(be, GSB_F64, n, g->R, &g->recs2));
    }
    GSB_TRY(ensure(be, GSB_I32, n, GSB__FLS_COLS, &g->splits));
    GSB_TRY(ensure(be, GSB_I32, 2 * n, GSB__FLV_FRONT, &g->front[nxt]));
    GSB_TRY(ensure(be, GSB_F64, 2 * n, g->V1, &g->stats[nxt]));
    if (g->any_slot)
        GSB_TRY(ensure(be, GSB_I32, n, 1, &g->slots));
    if (n > g->h_cap) {
        int64_t cap = n + n / 2 + 16;
        int32_t *kslot = g->h_kslot;
        g->h_kslot = NULL;
        free(g->h_nodes);
        free(g->h_splits);
        free(g->h_build);
        free(g->h_pairs);
        free(g->h_drop);
        g->h_nodes = gsb__alloc_array(cap * GSB__FLV_NODE, sizeof *g->h_nodes);
        g->h_splits = gsb__alloc_array(cap * GSB__FLS_COLS, sizeof *g->h_splits);
        g->h_build = gsb__alloc_array(3 * cap, sizeof *g->h_build);
        g->h_pairs = gsb__alloc_array(2 * cap, sizeof *g->h_pairs);
        g->h_drop = gsb__alloc_array(cap, sizeof *g->h_drop);
        /* this level's slots (the last level's children's) carry over */
        int32_t *slot = gsb__alloc_array(2 * cap, sizeof *slot);
        g->h_kslot = gsb__alloc_array(2 * cap, sizeof *g->h_kslot);
        if (slot && g->h_slot && g->any_slot)
            memcpy(slot, g->h_slot, (size_t)n * sizeof *slot);
        free(g->h_slot);
        free(kslot);
        g->h_slot = slot;
        if (!g->h_nodes || !g->h_splits || !g->h_build || !g->h_pairs ||
            !g->h_drop || !g->h_slot || !g->h_kslot)
            return oom("a level's nodes");
        g->h_cap = cap;
    }
    return GSB_OK;
}

/* One pass of split searches: the candidates' features, then their records. */
static int search_pass(lgrow *g, gsb__forest_level *lv, int pass, gsb__tensor *map,
                       gsb__tensor *feats, gsb__tensor *recs, gsb__tensor *recs_view)
{
    const gsb__backend *be = g->be;
    int64_t n = lv->n;
    gsb__tensor mv = head(map, n), sv = head(&g->seg, n), fv = head(feats, n);
    int32_t counts[2];
    GSB_TRY(be->ops->forest_level_feats(be, g->d, lv, &g->p->rule, pass, &mv, &sv, &fv));
    GSB_TRY(read_counts(g, counts));
    tick(g, PH_FEATS);
    int64_t c = counts[0];
    if (c < 0 || c > n)
        return gsb__err(GSB_EINTERNAL, "random forest: %lld candidates of %lld nodes",
                        (long long)c, (long long)n);
    g->n_cands[pass ? 1 : 0] += c;
    *recs_view = head(recs, c);
    if (c == 0)
        return GSB_OK;
    gsb__forest_rule rule = {g->p->rule.criterion, g->p->rule.min_samples_leaf,
                             g->p->rule.min_weight_leaf, pass};
    gsb__tensor sc = head(&g->seg, c), fc = head(feats, c);
    GSB_TRY(be->ops->forest_split(be, g->d, &sc, &fc, &rule, recs_view));
    tick(g, PH_SPLIT);
    return GSB_OK;
}

/*
 * After the partition, the children's slots (tree_grow.c's derive_histograms):
 * the slots of the nodes that did not split go back, in frontier order; then
 * for each split of a node with a slot, in order, the larger child takes the
 * parent's slot minus the smaller child's histograms, built in a new slot the
 * smaller child keeps if it is large itself.  h_nodes and h_splits hold the
 * level; n_split the count of splits.
 */
static int derive_slots(lgrow *g, int64_t n, int64_t n_split)
{
    const gsb__backend *be = g->be;
    int64_t nb = 0, nd = 0, any = 0;
    for (int64_t k = 0; k < 2 * n_split; k++)
        g->h_kslot[k] = -1;
    for (int64_t i = 0; i < n; i++)
        if (g->h_splits[i * GSB__FLS_COLS + GSB__FLS_FEATURE] < 0)
            give_slot(g, g->h_slot[i]);
    for (int64_t i = 0; i < n; i++) {
        const int32_t *sp = g->h_splits + i * GSB__FLS_COLS, *x = g->h_nodes + i * GSB__FLV_NODE;
        int32_t ps = g->h_slot[i], c = sp[GSB__FLS_CHILD], s;
        if (sp[GSB__FLS_FEATURE] < 0 || ps < 0)
            continue;
        if (c < 0 || c + 1 >= 2 * n_split)
            return gsb__err(GSB_EINTERNAL, "random forest: split %lld has child %d of %lld",
                            (long long)i, c, (long long)(2 * n_split));
        int32_t start = x[GSB__FLV_START], mid = start + sp[GSB__FLS_N_LEFT],
                end = x[GSB__FLV_END];
        int left_small = mid - start <= end - mid;
        int32_t s_lo = left_small ? start : mid, s_hi = left_small ? mid : end;
        int64_t big_n = left_small ? end - mid : mid - start;
        if (big_n < g->large || (s = take_slot(g)) < 0) {
            give_slot(g, ps);
            continue;
        }
        g->h_build[3 * nb] = s_lo;
        g->h_build[3 * nb + 1] = s_hi;
        g->h_build[3 * nb + 2] = s;
        g->h_pairs[2 * nb] = ps;
        g->h_pairs[2 * nb + 1] = s;
        nb++;
        g->h_kslot[c + (left_small ? 1 : 0)] = ps;
        any = 1;
        if (s_hi - s_lo >= g->large)
            g->h_kslot[c + (left_small ? 0 : 1)] = s;
        else
            g->h_drop[nd++] = s;
    }
    gsb__tensor tn = host_i32(g->h_build, nb, 3), tp = host_i32(g->h_pairs, nb, 2);
    if (nb > 0) {
        GSB_TRY(be->ops->forest_hist(be, g->d, &tn, NULL));
        GSB_TRY(be->ops->forest_hist_sub(be, g->d, &tp));
    }
    for (int64_t k = 0; k < nd; k++)
        give_slot(g, g->h_drop[k]);
    g->any_slot = any;
    return GSB_OK;
}

/* Tree o takes nodes [i0, i1) of x0 / imp (its own, in order): 0, 1 when one
 * is out of order, 2 when out of memory.  Room grows once for them all. */
static int append_tree(const lgrow *g, const int32_t *x0, const double *imp, int64_t i0,
                       int64_t i1, gsb__grown *o)
{
    int64_t need = o->n_nodes + (i1 - i0);
    if (need > o->cap) {
        int64_t cap = o->cap ? 2 * o->cap : 64;
        while (cap < need)
            cap *= 2;
        gsb__grow_node *nn = realloc(o->nodes, (size_t)cap * sizeof *nn);
        if (!nn)
            return 2;
        o->nodes = nn;
        o->cap = cap;
    }
    for (int64_t i = i0; i < i1; i++) {
        const int32_t *x = x0 + i * GSB__FLV_NODE;
        if (x[GSB__FLV_ID] != o->n_nodes)
            return 1;
        gsb__grow_node *nd = &o->nodes[o->n_nodes++];
        *nd = (gsb__grow_node){x[GSB__FLV_FEATURE], x[GSB__FLV_BIN_LO], x[GSB__FLV_BIN_HI],
                               x[GSB__FLV_MISSING_LEFT], x[GSB__FLV_LEFT], x[GSB__FLV_START],
                               x[GSB__FLV_END], x[GSB__FLV_DEPTH]};
        if (nd->depth > o->max_depth)
            o->max_depth = nd->depth;
        /* per tree in level order: the sums of a serial append, bit for bit */
        if (nd->feature >= 0 && nd->feature < g->F)
            o->importance[nd->feature] += imp[i];
    }
    return 0;
}

/* The first of nodes [lo, hi) (of a level: sorted by tree) of tree >= t, else hi. */
static int64_t first_of(const int32_t *x, int64_t lo, int64_t hi, int64_t t)
{
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (x[mid * GSB__FLV_NODE + GSB__FLV_TREE] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * The stored levels join their trees: read back at once, then a tree per
 * thread takes its nodes level by level.  A level lists each tree's nodes
 * together, trees in order (the roots are; forest_level_decide numbers the
 * children in frontier order), so a tree finds its run of a level by
 * bisection; the runs must cover the store.
 */
static int flush(lgrow *g, gsb__grown *out)
{
    int64_t N = g->n_all, appended = 0;
    if (N == 0)
        return GSB_OK;
    if (N > g->h_all_cap) {
        free(g->h_all);
        free(g->h_all_imp);
        g->h_all = gsb__alloc_array(N * GSB__FLV_NODE, sizeof *g->h_all);
        g->h_all_imp = gsb__alloc_array(N, sizeof *g->h_all_imp);
        g->h_all_cap = g->h_all && g->h_all_imp ? N : 0;
        if (!g->h_all_cap)
            return oom("the trees' nodes");
    }
    gsb__tensor nv = head(&g->all_nodes, N), iv = head(&g->all_imp, N);
    GSB_TRY(g->be->ops->download(g->be, &nv, g->h_all));
    GSB_TRY(g->be->ops->download(g->be, &iv, g->h_all_imp));
    g->n_waits += 2;
    g->lvl_off[g->n_lvl] = N;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : failed) reduction(+ : appended) \
    if (N > 8192)
    for (int64_t t = 0; t < g->T; t++)
        for (int64_t L = 0; L < g->n_lvl && !failed; L++) {
            int64_t lo = first_of(g->h_all, g->lvl_off[L], g->lvl_off[L + 1], t);
            int64_t hi = first_of(g->h_all, lo, g->lvl_off[L + 1], t + 1);
            failed |= append_tree(g, g->h_all, g->h_all_imp, lo, hi, &out[t]);
            appended += hi - lo;
        }
    g->n_all = g->n_lvl = 0;
    if (failed & 2)
        return oom("tree nodes");
    if (failed || appended != N)
        return gsb__err(GSB_EINTERNAL, "random forest: level nodes out of order");
    return GSB_OK;
}

/* Room in the store for a level of n nodes: it grows (the stored levels
 * copied over) up to STORE_MAX nodes; past that its levels join their trees
 * first. */
static int store_room(lgrow *g, int64_t n, gsb__grown *out)
{
    const gsb__backend *be = g->be;
    if (g->n_lvl + 2 > g->lvl_cap) {
        int64_t cap = 2 * g->lvl_cap + 16;
        int64_t *lo = realloc(g->lvl_off, (size_t)cap * sizeof *lo);
        if (!lo)
            return oom("the stored levels");
        g->lvl_off = lo;
        g->lvl_cap = cap;
    }
    if (g->n_all + n <= g->store_cap)
        return GSB_OK;
    if (g->n_all + n > STORE_MAX) {
        GSB_TRY(flush(g, out));
        if (n <= g->store_cap)
            return GSB_OK;
    }
    int64_t need = g->n_all + n, cap = need + need / 2 + 4096;
    if (cap > STORE_MAX)
        cap = need > STORE_MAX ? need : STORE_MAX;
    gsb__tensor nn = GSB__TENSOR_NONE, ni = GSB__TENSOR_NONE;
    int rc = gsb__tensor_alloc(be, GSB_I32, cap, GSB__FLV_NODE, &nn);
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(be, GSB_F64, cap, 1, &ni);
    if (rc == GSB_OK && g->n_all > 0) {
        gsb__tensor dn = head(&nn, g->n_all), di = head(&ni, g->n_all);
        gsb__tensor sn = head(&g->all_nodes, g->n_all), si = head(&g->all_imp, g->n_all);
        rc = be->ops->copy(be, &dn, &sn);
        if (rc == GSB_OK)
            rc = be->ops->copy(be, &di, &si);
    }
    if (rc != GSB_OK) {
        gsb__tensor_free(&nn);
        gsb__tensor_free(&ni);
        return rc;
    }
    gsb__tensor_free(&g->all_nodes);
    gsb__tensor_free(&g->all_imp);
    g->all_nodes = nn;
    g->all_imp = ni;
    g->store_cap = cap;
    return GSB_OK;
}

/* Grow level by level until no node splits. */
static int grow(lgrow *g, gsb__grown *out, gsb__grow_progress progress, void *progress_data)
{
    const gsb__backend *be = g->be;
    int64_t n = g->T;
    int cur = 0;
    g->t_last = gsb__profile_clock(be);
    for (int64_t step = 0; n > 0; step++) {
        g->n_levels++;
        g->n_nodes += n;
        GSB_TRY(level_room(g, n, 1 - cur));
        GSB_TRY(store_room(g, n, out));
        gsb__tensor fr = head(&g->front[cur], n), st = head(&g->stats[cur], n);
        gsb__tensor nv = rows_of(&g->all_nodes, g->n_all, n);
        gsb__tensor iv = rows_of(&g->all_imp, g->n_all, n), sp = head(&g->splits, n);
        gsb__tensor kv = head(&g->front[1 - cur], 2 * n), ks = head(&g->stats[1 - cur], 2 * n);
        gsb__tensor mv = head(&g->map, n), m2 = head(&g->map2, n), rv, r2;
        gsb__tensor slv = head(&g->slots, n);
        gsb__forest_level lv = {n, &fr, &st, NULL, NULL, NULL, NULL, &g->seeds, &g->root_w,
                                &g->tcount, &nv, &iv, &sp, &kv, &ks, &g->counts, &g->owner,
                                NULL};
        int with_slots = g->any_slot;
        if (with_slots) {
            GSB_TRY(be->ops->upload(be, &slv, g->h_slot));
            lv.slots = &slv;
            for (int64_t i = 0; i < n; i++)
                g->n_slot_nodes += g->h_slot[i] >= 0;
        }
        tick(g, PH_HOST);
        GSB_TRY(search_pass(g, &lv, 0, &g->map, &g->feats, &g->recs, &rv));
        lv.map = &mv;
        lv.recs = &rv;
        if (g->m < g->F) {
            GSB_TRY(search_pass(g, &lv, 1, &g->map2, &g->feats2, &g->recs2, &r2));
            lv.map2 = &m2;
            lv.recs2 = &r2;
        }
        GSB_TRY(be->ops->forest_level_decide(be, g->d, &lv, &g->p->rule));
        tick(g, PH_DECIDE);
        GSB_TRY(be->ops->forest_level_partition(be, g->d, &lv));
        int32_t counts[2];
        GSB_TRY(read_counts(g, counts));
        tick(g, PH_PART);
        g->n_splits += counts[0];
        if (counts[1] != 0 || counts[0] < 0 || counts[0] > n)
            return gsb__err(GSB_EINTERNAL, "random forest: %d of %d partitions disagree with "
                            "the split search", counts[1], counts[0]);
        g->lvl_off[g->n_lvl++] = g->n_all;
        g->n_all += n;
        if (with_slots) {
            GSB_TRY(be->ops->download(be, &nv, g->h_nodes));
            GSB_TRY(be->ops->download(be, &sp, g->h_splits));
            g->n_waits += 2;
            GSB_TRY(derive_slots(g, n, counts[0]));
            tick(g, PH_SLOTS);
            int32_t *t = g->h_slot;
            g->h_slot = g->h_kslot;
            g->h_kslot = t;
        }
        n = 2 * (int64_t)counts[0];
        cur = 1 - cur;
        if (progress)
            GSB_TRY(progress(progress_data, step + 1));
    }
    GSB_TRY(flush(g, out));
    tick(g, PH_READ);
    return GSB_OK;
}

int gsb__grow_trees_level(const gsb__backend *be, gsb__forest_data *d, const gsb__grow_params *p,
                          const gsb__grow_tree *trees, int64_t n_trees, gsb__grown *out,
                          gsb__grow_progress progress, void *progress_data)
{
    lgrow g = {0};
    g.be = be;
    g.d = d;
    g.p = p;
    g.T = n_trees;
    g.F = d->n_features;
    g.m = p->rule.max_features < g.F ? p->rule.max_features : g.F;
    g.V1 = gsb__forest_nstats(d->n_classes, d->n_outputs);
    g.R = gsb__forest_rec_len((int)g.V1);
    int rc = GSB_OK;
    if (p->max_leaf_nodes > 0 || g.m < 1)
        return gsb__err(GSB_EINTERNAL, "random forest: the level grower grows breadth first");
    for (int64_t t = 0; t < n_trees; t++)
        if (!(out[t].importance = gsb__calloc_array(g.F, sizeof(double))))
            return oom("importances");
    GSB_CHECK(setup(&g, trees));
    GSB_CHECK(pool_setup(&g));
    d->pool = g.pool.data ? &g.pool : NULL;
    d->scratch_rows = &g.srows;
    d->scratch_weights = &g.sw;
    GSB_CHECK(level_room(&g, g.T, 1));
    if (d->pool)
        GSB_CHECK(root_histograms(&g, trees));
    rc = grow(&g, out, progress, progress_data);
    report(&g);
done:
    d->pool = NULL;
    d->scratch_rows = d->scratch_weights = NULL;
    gsb__tensor *all[] = {&g.seeds, &g.root_w, &g.tcount, &g.counts, &g.owner, &g.srows, &g.sw,
                          &g.front[0], &g.front[1], &g.stats[0], &g.stats[1], &g.map, &g.map2,
                          &g.seg, &g.feats, &g.feats2, &g.recs, &g.recs2, &g.all_nodes,
                          &g.all_imp, &g.splits, &g.pool, &g.slots};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
    free(g.h_nodes);
    free(g.lvl_off);
    free(g.h_all);
    free(g.h_all_imp);
    free(g.free_slots);
    free(g.h_slot);
    free(g.h_kslot);
    free(g.h_splits);
    free(g.h_build);
    free(g.h_pairs);
    free(g.h_drop);
    return rc;
}
