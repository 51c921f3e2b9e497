/*
 * forest_model.h - a fitted forest as the model keeps it: every tree's nodes
 * concatenated in flat arrays (the fitted attributes below), built tree by
 * tree at fit, read back (and checked, since an imported blob can hold
 * anything) for prediction.
 *
 *   _node_split      N   int32    2 * feature + (1 if missing values go left); -1 at a leaf
 *   _node_threshold  N   float32  float32(x) <= threshold goes left
 *   _node_child      N   int32    the left child (right = left + 1), global index;
 *                                 at a leaf its row of _leaf_value
 *   _tree_root       T   int32    each tree's first node (its root); a tree's nodes run
 *                                 to the next tree's root
 *   _tree_depth      T   int32    each tree's depth
 *   _tree_seed       T   int64    each tree's seed (its bootstrap, for OOB estimates)
 *   _tree_n_leaves   T   int32    each tree's leaves (it has 2 n_leaves - 1 nodes)
 *   _tree_importance T x F float64  each tree's normalised impurity importances
 *   _leaf_value      L x K float32  class fractions (classifier) or means (regressor)
 */
#ifndef GSB_ENSEMBLE_FOREST_MODEL_H
#define GSB_ENSEMBLE_FOREST_MODEL_H

#include <stdint.h>

#include "core/estimator.h"
#include "estimators/ensemble/tree_grow.h"

typedef struct gsb__forest_model {
    int64_t n_trees, n_nodes, n_leaves, K, F;
    int64_t cap_trees, cap_nodes, cap_leaves;
    int32_t *split, *child, *root, *depth;
    float *threshold, *value;
    int64_t *seed;
    double *importance;
} gsb__forest_model;

/* An array for a model (n elements of size; NULL when out of memory): the
 * model's arrays all come from here, and gsb__forest_model_free frees them. */
void *gsb__forest_model_array(int64_t n, size_t size);
void gsb__forest_model_free(gsb__forest_model *m);

/* What a grown tree's leaves are computed from: its samples after the
 * growth (host copies) and the targets. */
typedef struct gsb__leaf_source {
    const int32_t *rows;
    const float *weights;
    const int32_t *cls;   /* classification: class index of each row */
    const double *y;      /* regression: n x K targets */
    const float *edges;   /* n_features x edge_width */
    int64_t edge_width;
    int n_real;
} gsb__leaf_source;

/* Append the G grown trees g (their seeds and root weights) to m, in order,
 * the trees filled in parallel; their importances are normalised as
 * scikit-learn's tree does (by the root weight, then to sum 1). */
int gsb__forest_model_append(gsb__forest_model *m, const gsb__grown *g, int64_t G,
                             const uint64_t *seeds, const double *root_weights,
                             const gsb__leaf_source *src);

/* Append the trees of the model's current fitted attributes (warm start). */
int gsb__forest_model_append_fitted(gsb__ctx *c, gsb__forest_model *m);

/* Store m as fitted attributes (and feature_importances_); the node and leaf
 * arrays are handed over, not copied (m keeps the rest: free it as before). */
int gsb__forest_model_store(gsb__ctx *c, gsb__forest_model *m);

/*
 * The fitted trees as the forest ops take them (views of the attributes),
 * after checking them: every split's feature < n_features, children after
 * their parent and inside its tree, leaf rows < L, K values per leaf.
 * *T and *K get the tree and value counts.
 */
int gsb__forest_model_view(gsb__ctx *c, int64_t n_features, int64_t K, gsb__forest_trees *out,
                           int64_t *T);

/* The fitted trees' arrays with their dtypes and shapes checked, not their
 * links: for a model whose links gsb__forest_model_view has checked. */
int gsb__forest_model_arrays(gsb__ctx *c, int64_t K, gsb__forest_trees *out, int64_t *T);

/* The leaf of tree t (root r) for row x (d features, float32 or float64). */
int64_t gsb__forest_walk(const gsb__forest_trees *t, int64_t root, const void *x,
                         gsb_dtype dtype);

#endif
