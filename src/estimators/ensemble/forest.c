/*
 * forest.c - RandomForestClassifier and RandomForestRegressor, as
 * scikit-learn 1.9.1's sklearn.ensemble forests, on histogram trees: the
 * parameters, the prediction methods and the descriptors.  The fit is in
 * forest_fit.c, the fitted arrays in forest_model.c, the growth in
 * tree_grow.c, the bins in forest_bins.c.
 *
 * What differs from scikit-learn: the candidate thresholds are the bins'
 * edges (n_bins, default 128 as cuML; a feature with at most n_bins distinct
 * values is split exactly), and random streams are gsb's, so quality matches
 * scikit-learn's, not the trees themselves.  Not supported
 * (GSB_EUNSUPPORTED): criterion='absolute_error', ccp_alpha > 0,
 * monotonic_cst, multi-output classification.
 */
#include <math.h>
#include <stdlib.h>

#include "core/estimator.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "estimators/ensemble/forest_cache.h"
#include "estimators/ensemble/forest_fit.h"
#include "estimators/ensemble/forest_merge.h"
#include "estimators/ensemble/forest_model.h"
#include "estimators/ensemble/forest_params.h"

/* ---- parameters ------------------------------------------------------------------- */

static const char *const clf_criteria[] = {"gini", "entropy", "log_loss", NULL};
static const char *const reg_criteria[] = {"squared_error", "absolute_error", "poisson",
                                           "~friedman_mse", NULL};
static const char *const max_features_choices[] = {"log2", "sqrt", NULL};
static const char *const class_weight_choices[] = {"balanced", "balanced_subsample", NULL};

#define P_TREE_COMMON                                                                        \
    {"max_depth", GSB__P_INT | GSB__P_NONE, "null", 1, INFINITY, GSB__CLOSED_LEFT, NULL,     \
     "Maximum depth of the trees; None grows until the other rules stop."},                  \
    {"min_samples_split", GSB__P_INT | GSB__P_FLOAT, "2", 0, 0, 0, NULL,                     \
     "Samples a node needs to split: an int >= 2, or a fraction in (0, 1] of n_samples."},   \
    {"min_samples_leaf", GSB__P_INT | GSB__P_FLOAT, "1", 0, 0, 0, NULL,                      \
     "Samples each leaf keeps at least: an int >= 1, or a fraction in (0, 1) of n_samples."},\
    {"min_weight_fraction_leaf", GSB__P_FLOAT, "0.0", 0, 0.5, GSB__CLOSED_BOTH, NULL,        \
     "Fraction of the total (bootstrap) weight each leaf keeps at least."}

#define P_FOREST_COMMON                                                                      \
    {"max_leaf_nodes", GSB__P_INT | GSB__P_NONE, "null", 2, INFINITY, GSB__CLOSED_LEFT,      \
     NULL, "Grow each tree best first to at most this many leaves; None: no limit."},        \
    {"min_impurity_decrease", GSB__P_FLOAT, "0.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,      \
     "A node splits only when the weighted impurity decrease is at least this."},            \
    {"bootstrap", GSB__P_BOOL, "true", 0, 0, 0, NULL,                                        \
     "Fit each tree on a bootstrap sample (else on every row)."},                            \
    {"oob_score", GSB__P_BOOL, "false", 0, 0, 0, NULL,                                       \
     "Estimate the score on the out-of-bag rows (oob_score_); a callable is not "            \
     "supported."},                                                                          \
    {"n_jobs", GSB__P_INT | GSB__P_NONE, "null", 0, 0, 0, NULL,                              \
     "Accepted for compatibility: the backend uses every core (OpenMP) or the GPU."},        \
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH,    \
     NULL, "Seed of the bootstrap samples and feature draws (gsb's streams: reproducible in " \
     "gsb, not scikit-learn's trees)."},                                                     \
    {"verbose", GSB__P_INT | GSB__P_BOOL, "0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,          \
     "Print progress (tree levels and trees built) when no progress callback is set."},      \
    {"warm_start", GSB__P_BOOL, "false", 0, 0, 0, NULL,                                      \
     "Keep the fitted trees and add trees up to n_estimators."}

#define P_FOREST_TAIL                                                                        \
    {"ccp_alpha", GSB__P_FLOAT, "0.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,                  \
     "Cost-complexity pruning: only 0.0 is supported."},                                     \
    {"max_samples", GSB__P_INT | GSB__P_FLOAT | GSB__P_NONE, "null", 0, 0, 0, NULL,          \
     "Bootstrap sample size: None (n_samples), an int >= 1, or a fraction > 0 of "           \
     "n_samples (of the summed sample weights when given)."},                                \
    {"monotonic_cst", GSB__P_ARRAY | GSB__P_NONE, "null", 0, 0, 0, NULL,                     \
     "Monotonic constraints: only None is supported."},                                      \
    {"n_bins", GSB__P_INT, "128", 2, 256, GSB__CLOSED_BOTH, NULL,                            \
     "Bins per feature (as cuML's n_bins): split thresholds are cut between bins; a "        \
     "feature with at most n_bins distinct values is split exactly.  With NaN in X at most " \
     "255 (one code marks missing values)."},                                                \
    {"split_criterion", GSB__P_INT | GSB__P_STR | GSB__P_NONE, "null", 0, 6,                 \
     GSB__CLOSED_BOTH, gsb__forest_cuml_criteria,                                            \
     "cuML's name for the criterion (0 'gini', 1 'entropy', 2 'mse', 4 'poisson'); "         \
     "overrides criterion when set."}

static const gsb__param_desc clf_params[] = {
    {"n_estimators", GSB__P_INT, "100", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Number of trees."},
    {"criterion", GSB__P_STR, "\"gini\"", 0, 0, 0, clf_criteria,
     "Split quality: 'gini', or 'entropy' / 'log_loss' (the same)."},
    P_TREE_COMMON,
    {"max_features", GSB__P_INT | GSB__P_FLOAT | GSB__P_STR | GSB__P_NONE, "\"sqrt\"", 0, 0,
     0, max_features_choices,
     "Features drawn per split: 'sqrt', 'log2', an int, a fraction, or None (all)."},
    P_FOREST_COMMON,
    {"class_weight", GSB__P_DICT | GSB__P_STR | GSB__P_NONE, "null", 0, 0, 0,
     class_weight_choices,
     "None, 'balanced', 'balanced_subsample' (from each bootstrap sample) or {class: "
     "weight}; folded into the bootstrap draw as scikit-learn does."},
    P_FOREST_TAIL,
    {0}};

static const gsb__param_desc reg_params[] = {
    {"n_estimators", GSB__P_INT, "100", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Number of trees."},
    {"criterion", GSB__P_STR, "\"squared_error\"", 0, 0, 0, reg_criteria,
     "Split quality: 'squared_error' or 'poisson'; 'absolute_error' is not supported."},
    P_TREE_COMMON,
    {"max_features", GSB__P_INT | GSB__P_FLOAT | GSB__P_STR | GSB__P_NONE, "1.0", 0, 0, 0,
     max_features_choices,
     "Features drawn per split: 'sqrt', 'log2', an int, a fraction, or None (all)."},
    P_FOREST_COMMON,
    P_FOREST_TAIL,
    {0}};

/* ---- prediction ------------------------------------------------------------------- */

/* The outputs forest_predict fills for a call (host tensors, NULL: not wanted). */
typedef struct predict_out {
    gsb__tensor *mean, *best, *leaves;
} predict_out;

/* forest_predict on a GPU backend: X up, the outputs down (o's host tensors). */
static int predict_device(const gsb__backend *be, const gsb__tensor *X,
                          const gsb__forest_trees *trees, const predict_out *o)
{
    gsb__tensor dX = GSB__TENSOR_NONE, d[3] = {GSB__TENSOR_NONE, GSB__TENSOR_NONE,
                                              GSB__TENSOR_NONE};
    gsb__tensor *host[3] = {o->mean, o->best, o->leaves};
    int rc;
    GSB_CHECK(gsb__tensor_to(be, X, &dX));
    for (int i = 0; i < 3; i++)
        if (host[i])
            GSB_CHECK(gsb__tensor_alloc(be, host[i]->dtype, host[i]->rows, host[i]->cols, &d[i]));
    gsb__profile_mark("X to the device");
    GSB_CHECK(be->ops->forest_predict(be, &dX, trees, o->mean ? &d[0] : NULL,
                                      o->best ? &d[1] : NULL, o->leaves ? &d[2] : NULL));
    gsb__profile_mark("forest_predict");
    for (int i = 0; i < 3; i++)
        if (host[i])
            GSB_CHECK(be->ops->download(be, &d[i], host[i]->data));
    gsb__profile_mark("results to the host");
done:
    gsb__tensor_free(&dX);
    for (int i = 0; i < 3; i++)
        gsb__tensor_free(&d[i]);
    return rc;
}

/* forest_predict on be for the model's trees (K values a leaf) into o. */
static int predict_on(gsb__ctx *c, const gsb__backend *be, const gsb__tensor *X, int64_t K,
                      const predict_out *o)
{
    gsb__forest_on on;
    GSB_TRY(gsb__forest_on_open(c, be, X->cols, K, &on));
    int rc;
    if (be == gsb__cpu_backend()) {
        rc = be->ops->forest_predict(be, X, &on.trees, o->mean, o->best, o->leaves);
        gsb__profile_mark("forest_predict");
    } else {
        rc = predict_device(be, X, &on.trees, o);
    }
    gsb__forest_on_close(&on);
    return rc;
}

/* The number of values per leaf: classes, or outputs. */
static int64_t values_per_leaf(gsb__ctx *c)
{
    const gsb__tensor *cls = gsb__attr(c, "classes_"), *no = gsb__attr(c, "n_outputs_");
    if (c->est->kind == GSB__KIND_CLASSIFIER)
        return cls ? cls->rows * cls->cols : -1;
    return no ? (int64_t)gsb__tensor_get(no, 0) : -1;
}

/* Every tree on each row of X: the outputs not NULL (mean n x K, best n,
 * leaves n x T), allocated here on the host. */
static int forest_predict(gsb__ctx *c, gsb__tensor *mean, gsb__tensor *best,
                          gsb__tensor *leaves)
{
    const gsb__tensor *X = gsb__in(c, "X"), *root;
    int64_t K = values_per_leaf(c);
    if (K < 1)
        return gsb__err(GSB_ECORRUPT, "%s: fitted attribute 'classes_' or 'n_outputs_' is "
                        "missing or malformed", c->est->name);
    GSB_TRY(gsb__attr_need(c, "_tree_root", GSB_I32, -1, 1, &root));
    const gsb__backend *cpu = gsb__cpu_backend();
    predict_out o = {mean, best, leaves};
    gsb__tensor *all[3] = {mean, best, leaves};
    for (int i = 0; i < 3; i++)
        if (all[i])
            *all[i] = GSB__TENSOR_NONE;
    int rc = GSB_OK;
    if (o.mean)
        rc = gsb__tensor_alloc(cpu, GSB_F64, X->rows, K, o.mean);
    if (rc == GSB_OK && o.best)
        rc = gsb__tensor_alloc(cpu, GSB_I32, X->rows, 1, o.best);
    if (rc == GSB_OK && o.leaves)
        rc = gsb__tensor_alloc(cpu, GSB_I32, X->rows, root->rows, o.leaves);
    if (rc == GSB_OK)
        rc = predict_on(c, c->be, X, K, &o);
    if (rc == GSB_EUNSUPPORTED && c->be != cpu)
        rc = predict_on(c, cpu, X, K, &o);
    if (rc != GSB_OK) {
        for (int i = 0; i < 3; i++)
            if (all[i])
                gsb__tensor_free(all[i]);
    }
    return rc;
}

static int classifier_predict_proba(gsb__ctx *c)
{
    gsb__tensor p;
    GSB_TRY(forest_predict(c, &p, NULL, NULL));
    return gsb__out(c, "proba", &p);
}

static int classifier_predict_log_proba(gsb__ctx *c)
{
    gsb__tensor p;
    GSB_TRY(forest_predict(c, &p, NULL, NULL));
    double *v = p.data;
    int64_t len = p.rows * p.cols;
#pragma omp parallel for schedule(static) if (len > 65536)
    for (int64_t i = 0; i < len; i++)
        v[i] = log(v[i]);
    return gsb__out(c, "log_proba", &p);
}

static int classifier_predict(gsb__ctx *c)
{
    gsb__tensor best, labels;
    GSB_TRY(forest_predict(c, NULL, &best, NULL));
    const double *cls = gsb__attr(c, "classes_")->data;
    const int32_t *b = best.data; /* in [0, n_classes): forest_predict's contract */
    int64_t n = best.rows;
    int rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, 1, &labels);
    if (rc == GSB_OK) {
        double *out = labels.data;
#pragma omp parallel for schedule(static) if (n > 65536)
        for (int64_t i = 0; i < n; i++)
            out[i] = cls[b[i]];
        gsb__tensor_as_1d(&labels);
        rc = gsb__out(c, "labels", &labels);
    }
    gsb__tensor_free(&best);
    gsb__profile_mark("labels");
    return rc;
}

static int regressor_predict(gsb__ctx *c)
{
    gsb__tensor y;
    GSB_TRY(forest_predict(c, &y, NULL, NULL));
    if (y.cols == 1)
        gsb__tensor_as_1d(&y);
    return gsb__out(c, "y", &y);
}

static int forest_apply(gsb__ctx *c)
{
    gsb__tensor leaves, out;
    GSB_TRY(forest_predict(c, NULL, NULL, &leaves));
    int rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_I64, leaves.rows, leaves.cols, &out);
    if (rc == GSB_OK) {
        for (int64_t i = 0; i < leaves.rows * leaves.cols; i++)
            ((int64_t *)out.data)[i] = ((const int32_t *)leaves.data)[i];
        rc = gsb__out(c, "leaves", &out);
    }
    gsb__tensor_free(&leaves);
    return rc;
}

/* Each tree's leaves and depth (int64): what Python's estimators_ views show. */
static int forest_tree_info(gsb__ctx *c)
{
    const gsb__tensor *leaves, *depth;
    GSB_TRY(gsb__attr_need(c, "_tree_n_leaves", GSB_I32, -1, 1, &leaves));
    GSB_TRY(gsb__attr_need(c, "_tree_depth", GSB_I32, leaves->rows, 1, &depth));
    const gsb__tensor *src[2] = {leaves, depth};
    const char *names[2] = {"n_leaves", "depth"};
    for (int k = 0; k < 2; k++) {
        gsb__tensor t;
        GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_I64, leaves->rows, 1, &t));
        for (int64_t i = 0; i < leaves->rows; i++)
            ((int64_t *)t.data)[i] = ((const int32_t *)src[k]->data)[i];
        gsb__tensor_as_1d(&t);
        GSB_TRY(gsb__out(c, names[k], &t));
    }
    return GSB_OK;
}

/* ---- descriptors ------------------------------------------------------------------ */

#define IN_X {"X", GSB__IN_X | GSB__IN_ALLOW_NAN}
#define APPLY_METHOD                                                                             \
    {"apply", forest_apply, {IN_X}, 0,                                                           \
     "leaves (n_samples, n_estimators) int64: the leaf each tree sends each row to (node "        \
     "index within the tree, gsb's breadth-first numbering)"},                                    \
    {"export_trees", gsb__forest_export_method, {{0}}, 0,                                        \
     "trees: the fitted forest packed in one float64 array (forest_merge.h), for merge_trees "    \
     "and fit_from_trees"},                                                                       \
    {"merge_trees", gsb__forest_merge_method, {{"a", GSB__IN_STATS}, {"b", GSB__IN_STATS}},      \
     GSB__METHOD_STATELESS,                                                                       \
     "trees: packed forests a and b concatenated (a's trees first; classes united)"},             \
    {"tree_info", forest_tree_info, {{0}}, 0,                                                    \
     "n_leaves and depth (int64) of each tree (a tree has 2 n_leaves - 1 nodes)"}

/* The fit, then the trees made ready for prediction on the fit's backend (the
 * first predict would otherwise pay the checks and the upload). */
static int forest_fit(gsb__ctx *c, int classifier)
{
    GSB_TRY(gsb__forest_fit(c, classifier));
    gsb__profile_mark("fit's host arrays freed");
    int64_t K = values_per_leaf(c);
    if (K >= 1)
        gsb__forest_cache_fit(c, gsb__in(c, "X")->cols, K);
    gsb__profile_mark("trees ready for prediction");
    return GSB_OK;
}

static int classifier_fit(gsb__ctx *c) { return forest_fit(c, 1); }
static int regressor_fit(gsb__ctx *c) { return forest_fit(c, 0); }

static const gsb__method_desc clf_methods[] = {
    {"fit", classifier_fit,
     {IN_X, {"y", GSB__IN_LABELS}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}}, 1,
     "Grow n_estimators trees (y: class labels as float64; NaN in X is a missing value)."},
    {"predict", classifier_predict, {IN_X}, 0,
     "labels: the class of the highest mean probability over the trees (float64)."},
    {"predict_proba", classifier_predict_proba, {IN_X}, 0,
     "proba (n, n_classes) float64: the mean over the trees of the leaves' class fractions."},
    {"predict_log_proba", classifier_predict_log_proba, {IN_X}, 0,
     "log_proba: the log of predict_proba."},
    APPLY_METHOD,
    {"fit_from_trees", gsb__forest_clf_fit_from_trees,
     {{"trees", GSB__IN_STATS}, {"X", GSB__IN_X | GSB__IN_ALLOW_NAN | GSB__IN_OPTIONAL},
      {"y", GSB__IN_LABELS | GSB__IN_OPTIONAL},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}}, 1,
     "The forest of packed trees (merge_trees' result); with X and y (the training data) and "
     "oob_score=True, the OOB estimates too."},
    {0}};

static const gsb__method_desc reg_methods[] = {
    {"fit", regressor_fit,
     {IN_X, {"y", GSB__IN_Y_LIKE_X}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}}, 1,
     "Grow n_estimators trees (y: 1-D, or 2-D for several outputs; NaN in X is a missing "
     "value)."},
    {"predict", regressor_predict, {IN_X}, 0,
     "y: the mean over the trees of the leaves' target means (float64; (n,) for one output)."},
    APPLY_METHOD,
    {"fit_from_trees", gsb__forest_reg_fit_from_trees,
     {{"trees", GSB__IN_STATS}, {"X", GSB__IN_X | GSB__IN_ALLOW_NAN | GSB__IN_OPTIONAL},
      {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}}, 1,
     "The forest of packed trees (merge_trees' result); with X and y (the training data) and "
     "oob_score=True, the OOB estimates too."},
    {0}};

#define A_MODEL                                                                                  \
    {"n_outputs_", "Number of outputs (int)."},                                                  \
    {"feature_importances_", "Impurity-based importances (float64, sum 1 unless every tree is "  \
                             "a single leaf)."},                                                 \
    {"oob_score_", "Score on the out-of-bag rows (oob_score=True)."},                           \
    {"_node_split", "Each node's 2 * feature + (1 if NaN goes left), -1 at leaves (int32); "     \
                    "all trees concatenated."},                                                  \
    {"_node_threshold", "Each node's threshold: float32(x) <= threshold goes left (float32)."},  \
    {"_node_child", "Each split node's left child (right = left + 1), each leaf's row of "       \
                    "_leaf_value (int32)."},                                                     \
    {"_tree_root", "Each tree's root node (int32); its nodes run to the next root."},           \
    {"_tree_depth", "Each tree's depth (int32)."},                                               \
    {"_tree_seed", "Each tree's seed (int64): its bootstrap sample, for OOB estimates."},       \
    {"_tree_n_leaves", "Each tree's number of leaves (int32)."},                                 \
    {"_tree_importance", "Each tree's normalised importances (n_estimators, n_features)."},     \
    {"_leaf_value", "Each leaf's values (float32): class fractions or target means."}

static const gsb__attr_desc clf_attrs[] = {
    {"classes_", "Sorted class labels (float64)."},
    {"n_classes_", "Number of classes (int)."},
    {"oob_decision_function_", "Mean out-of-bag class probabilities (n_samples, n_classes)."},
    A_MODEL,
    {0}};

static const gsb__attr_desc reg_attrs[] = {
    {"oob_prediction_", "Mean out-of-bag prediction ((n_samples,) or (n_samples, n_outputs))."},
    A_MODEL,
    {0}};

const gsb__estimator_desc gsb__est_RandomForestClassifier = {
    "RandomForestClassifier", "ensemble", GSB__KIND_CLASSIFIER, clf_params, clf_methods,
    clf_attrs,
    "A random forest of histogram classification trees, as scikit-learn's "
    "RandomForestClassifier (cuML's n_bins and split_criterion accepted)."};

const gsb__estimator_desc gsb__est_RandomForestRegressor = {
    "RandomForestRegressor", "ensemble", GSB__KIND_REGRESSOR, reg_params, reg_methods,
    reg_attrs,
    "A random forest of histogram regression trees, as scikit-learn's RandomForestRegressor "
    "(cuML's n_bins and split_criterion accepted)."};
