/*
 * tree_grow.h - growing a group of histogram trees at once, through the
 * backend's forest ops (backend.h), as scikit-learn's tree builders would.
 *
 * The trees of a group share the binned X and own disjoint segments of the
 * sample arrays (their bootstrap samples, weight = bootstrap count).  Nodes
 * grow a step at a time for every tree together:
 *  - breadth first (max_leaf_nodes unset): each step splits every node of
 *    the frontier that can split (scikit-learn's depth-first builder gives
 *    the same tree, in another node order);
 *  - best first (max_leaf_nodes set): each step splits, in every tree, the
 *    frontier node with the largest impurity improvement, until the tree
 *    has max_leaf_nodes leaves (scikit-learn's BestFirstTreeBuilder).
 * A node's split is found when the node is made: max_features features
 * drawn without replacement (continuing, if all of them are constant in the
 * node, until one is not: scikit-learn's rule), the best candidate of each
 * by the criterion's proxy, the leaf rules of scikit-learn's builders
 * (max_depth, min_samples_split, min_samples_leaf, min_weight_leaf,
 * impurity <= EPSILON, min_impurity_decrease).
 *
 * Histograms: a node with many samples gets a slot in the pool.  When the
 * node draws most of the features (2 max_features >= n_features) the slot
 * holds every feature and lives on: at the split the smaller child's
 * histogram is built and the larger child's is the parent's minus it.
 * Otherwise the slot holds the drawn features for the one split search.
 * Small nodes (and any node when the pool is full) have their stats built
 * inside the split search.
 *
 * Randomness: the features of node i of a tree come from a stream seeded by
 * (the tree's seed, i); node numbers follow the shared step order, so a
 * random_state grows the same trees on every backend (up to exact ties of
 * proxies that the backends round differently).
 */
#ifndef GSB_ENSEMBLE_TREE_GROW_H
#define GSB_ENSEMBLE_TREE_GROW_H

#include <stdint.h>

#include "backend/forest_level.h"
#include "core/estimator.h"

typedef struct gsb__grow_params {
    gsb__forest_grow_rule rule;   /* criterion, depth, min_samples_* (min_samples_split
                                     already >= 2 min_samples_leaf), min_weight_leaf (the
                                     same for every tree: their weights sum to the same
                                     total), min_impurity_decrease, features drawn */
    int64_t max_leaf_nodes;       /* 0: none (breadth first) */
    int64_t pool_bytes;           /* the histogram pool's budget */
} gsb__grow_params;

/* One tree of the group: its samples and seed. */
typedef struct gsb__grow_tree {
    int64_t start, end;           /* its samples in the group's arrays */
    uint64_t seed;
    const double *root_stats;     /* V1 stats of all its samples */
} gsb__grow_tree;

/* A node of a grown tree. */
typedef struct gsb__grow_node {
    int32_t feature;              /* -1: a leaf */
    int32_t bin_lo, bin_hi;       /* codes <= bin_lo go left; bin_hi: the first non-empty
                                     code right (n_real: only missing values right) */
    int32_t missing_left;
    int32_t left;                 /* the left child's index (right = left + 1) */
    int32_t start, end;           /* its samples, after the growth */
    int32_t depth;
} gsb__grow_node;

typedef struct gsb__grown {
    gsb__grow_node *nodes;        /* n_nodes, node 0 the root */
    int64_t n_nodes, cap;
    int64_t max_depth;
    double *importance;           /* n_features: sum over splits of W imp - W_l imp_l -
                                     W_r imp_r (not normalised) */
} gsb__grown;

void gsb__grown_free(gsb__grown *g);

/* Called after every step: a failing status (GSB_ECANCELLED) stops the growth. */
typedef int (*gsb__grow_progress)(void *data, int64_t step);

/*
 * Grow the n_trees trees of d (its samples on the backend be) into out
 * (n_trees of them, zeroed by the caller; freed with gsb__grown_free even
 * on failure).  d->pool and d->scratch_* are managed here.
 */
int gsb__grow_trees(const gsb__backend *be, gsb__forest_data *d, const gsb__grow_params *p,
                    const gsb__grow_tree *trees, int64_t n_trees, gsb__grown *out,
                    gsb__grow_progress progress, void *progress_data);

/*
 * The same growth breadth first (p->max_leaf_nodes 0) with the frontier in
 * be's memory (tree_level.c, the forest_level_* ops): a handful of op calls
 * and small read-backs per level instead of host work per node; the same
 * trees (up to exact ties of proxies that backends round differently).
 */
int gsb__grow_trees_level(const gsb__backend *be, gsb__forest_data *d,
                          const gsb__grow_params *p, const gsb__grow_tree *trees,
                          int64_t n_trees, gsb__grown *out, gsb__grow_progress progress,
                          void *progress_data);

/* The histogram pool both growers share: a node of at least gsb__grow_large(d)
 * samples may have a slot; at most gsb__grow_max_slots slots (of n_features x
 * n_bins x V1 doubles) within p->pool_bytes, no more than nodes large enough to
 * use them; gsb__grow_pool allocates them on be (fewer when the device refuses)
 * and returns how many (0: *pool left empty; gsb__tensor_free frees it). */
int64_t gsb__grow_large(const gsb__forest_data *d);
int64_t gsb__grow_max_slots(const gsb__forest_data *d, const gsb__grow_params *p,
                            int64_t n_trees);
int64_t gsb__grow_pool(const gsb__backend *be, const gsb__forest_data *d,
                       const gsb__grow_params *p, int64_t n_trees, gsb__tensor *pool);

/* The impurity of stats s (V1) as scikit-learn's criterion gives it. */
double gsb__forest_impurity(const double *s, int n_classes, int n_outputs, int criterion);

#endif
