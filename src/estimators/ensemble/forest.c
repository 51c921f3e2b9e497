/*
 * forest.c - RandomForestClassifier and RandomForestRegressor, as
 * scikit-learn 1.9.1's sklearn.ensemble forests, on histogram trees.
 *
 * A fit: X rounded to float32 (scikit-learn's trees do the same) is cut
 * into bins once (forest_bins.c) and binned by the backend; the trees grow
 * in groups (tree_grow.c), each tree on its bootstrap sample given as
 * per-row counts; the grown trees become flat arrays (forest_model.c) whose
 * thresholds are values, not bins, so prediction reads raw X.
 *
 * scikit-learn's semantics kept: bootstrap rows drawn with probability
 * proportional to sample_weight x class weight, the tree then weighting
 * rows by their counts only; max_samples as int or fraction (of the summed
 * weights); 'balanced_subsample' weights from each bootstrap sample;
 * max_features drawn per node; min_* rules, max_leaf_nodes best first;
 * missing values (NaN in X) sent to the side that scores best at fit, or
 * to the side with more samples when the node saw none; impurity
 * importances; OOB estimates; warm_start adding trees with the seeds a
 * cold fit of all trees would use.  What differs: the candidate thresholds
 * are the bins' edges (n_bins, default 128 as cuML; a feature with at most
 * n_bins distinct values is split exactly), and random streams are gsb's,
 * so quality matches scikit-learn's, not the trees themselves.
 *
 * Not supported (GSB_EUNSUPPORTED): criterion='absolute_error', ccp_alpha
 * > 0, monotonic_cst, callable oob_score, multi-output classification.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/forest_math.h"
#include "core/alloc.h"
#include "core/model.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "estimators/common/classes.h"
#include "estimators/ensemble/forest_bins.h"
#include "estimators/ensemble/forest_model.h"
#include "estimators/ensemble/tree_grow.h"

/* Samples (bootstrap rows) of one group of trees grown together, at most. */
#define GROUP_SAMPLES ((int64_t)1 << 25)
/* The histogram pool's budget on the CPU and on a GPU. */
#define POOL_BYTES_CPU ((int64_t)256 << 20)
#define POOL_BYTES_GPU ((int64_t)1 << 30)

/* ---- parameters ------------------------------------------------------------------ */

static const char *const clf_criteria[] = {"gini", "entropy", "log_loss", NULL};
static const char *const reg_criteria[] = {"squared_error", "absolute_error", "poisson",
                                           "~friedman_mse", NULL};
static const char *const max_features_choices[] = {"log2", "sqrt", NULL};
static const char *const class_weight_choices[] = {"balanced", "balanced_subsample", NULL};
/* cuML's split_criterion names (its numbers 0 .. 6 are accepted too) */
static const char *const cuml_criteria[] = {"gini", "entropy", "mse", "mae", "poisson",
                                            "gamma", "inverse_gaussian", NULL};

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
     GSB__CLOSED_BOTH, cuml_criteria,                                                        \
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

/* ---- the fit's settings ------------------------------------------------------------------- */

typedef struct forest_cfg {
    int classify, criterion, bootstrap, oob, warm_start, n_bins;
    int balanced_subsample;
    int64_t n_estimators;
    gsb__grow_params grow;
    double min_weight_fraction;
    const json_t *max_samples;
} forest_cfg;

static int is_int(const json_t *v) { return json_is_integer(v); }
static int is_real(const json_t *v) { return json_is_real(v); }

/* scikit-learn's InvalidParameterError text for value v of parameter name */
static int bad_param(const gsb__ctx *c, const char *name, const char *want, const json_t *v)
{
    char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    int rc = gsb__err(GSB_EPARAM, "The '%s' parameter of %s must be %s. Got %s instead.", name,
                      c->est->name, want,
                      json_is_string(v) ? json_string_value(v)
                      : json_is_true(v) ? "True"
                      : json_is_false(v) ? "False"
                      : json_is_null(v) ? "None" : got ? got : "?");
    free(got);
    return rc;
}

/* An int >= int_lo or a float in (0, hi] (closed_hi) / (0, hi): its count of n. */
static int count_param(const gsb__ctx *c, const char *name, int64_t int_lo, int closed_hi,
                       int64_t n, int64_t *out)
{
    const json_t *v = json_object_get(c->params, name);
    char want[128];
    snprintf(want, sizeof want, "an int in the range [%lld, inf) or a float in the range "
             "(0.0, 1.0%s", (long long)int_lo, closed_hi ? "]" : ")");
    if (is_int(v)) {
        if (json_integer_value(v) < int_lo)
            return bad_param(c, name, want, v);
        *out = (int64_t)json_integer_value(v);
        return GSB_OK;
    }
    double x = json_number_value(v);
    if (!is_real(v) || !(x > 0) || (closed_hi ? x > 1 : x >= 1))
        return bad_param(c, name, want, v);
    *out = (int64_t)ceil(x * (double)n);
    return GSB_OK;
}

/* max_features as scikit-learn's BaseDecisionTree._fit resolves it. */
static int resolve_max_features(const gsb__ctx *c, int64_t F, int64_t *out)
{
    const json_t *v = json_object_get(c->params, "max_features");
    const char *want = "an int in the range [1, inf), a float in the range (0.0, 1.0], a str "
                       "among {'log2', 'sqrt'} or None";
    if (!v || json_is_null(v))
        *out = F;
    else if (json_is_string(v))
        *out = strcmp(json_string_value(v), "sqrt") == 0 ? (int64_t)sqrt((double)F)
                                                         : (int64_t)log2((double)F);
    else if (is_int(v) && json_integer_value(v) >= 1)
        *out = (int64_t)json_integer_value(v);
    else if (is_real(v) && json_real_value(v) > 0 && json_real_value(v) <= 1)
        *out = (int64_t)(json_real_value(v) * (double)F);
    else
        return bad_param(c, "max_features", want, v);
    *out = *out < 1 ? 1 : *out > F ? F : *out;
    return GSB_OK;
}

static int check_max_samples(const gsb__ctx *c)
{
    const json_t *v = json_object_get(c->params, "max_samples");
    if (!v || json_is_null(v) || (is_int(v) && json_integer_value(v) >= 1) ||
        (is_real(v) && json_real_value(v) > 0))
        return GSB_OK;
    return bad_param(c, "max_samples",
                     "None, a float in the range (0.0, inf) or an int in the range [1, inf)", v);
}

/* The criterion, from split_criterion (cuML) when set, else criterion. */
static int resolve_criterion(const gsb__ctx *c, int classify, int *out)
{
    const json_t *sc = json_object_get(c->params, "split_criterion");
    const char *name = NULL;
    if (sc && !json_is_null(sc)) {
        int64_t code = -1;
        if (is_int(sc))
            code = json_integer_value(sc);
        else
            for (int i = 0; cuml_criteria[i]; i++)
                if (strcmp(json_string_value(sc), cuml_criteria[i]) == 0)
                    code = i;
        static const int map[] = {GSB__FOREST_GINI, GSB__FOREST_ENTROPY, GSB__FOREST_MSE, -1,
                                  GSB__FOREST_POISSON, -1, -1};
        if (code < 0 || code > 6 || map[code] < 0)
            return gsb__err(GSB_EUNSUPPORTED, "%s: split_criterion=%lld ('%s') is not supported "
                            "by gsb; use 0 ('gini'), 1 ('entropy'), 2 ('mse') or 4 ('poisson')",
                            c->est->name, (long long)code,
                            code >= 0 && code <= 6 ? cuml_criteria[code] : "?");
        *out = map[code];
        if ((*out <= GSB__FOREST_ENTROPY) != classify)
            return gsb__err(GSB_EINVAL, "%s: split_criterion=%lld ('%s') is a %s criterion",
                            c->est->name, (long long)code, cuml_criteria[code],
                            classify ? "regression" : "classification");
        return GSB_OK;
    }
    name = gsb__param_str(c->params, "criterion");
    if (!name)
        return gsb__err(GSB_EINTERNAL, "%s: criterion missing", c->est->name);
    if (strcmp(name, "absolute_error") == 0)
        return gsb__err(GSB_EUNSUPPORTED, "%s: criterion='absolute_error' is not supported by "
                        "gsb; use 'squared_error' or 'poisson'", c->est->name);
    *out = strcmp(name, "gini") == 0        ? GSB__FOREST_GINI
           : classify                       ? GSB__FOREST_ENTROPY /* entropy, log_loss */
           : strcmp(name, "poisson") == 0   ? GSB__FOREST_POISSON
                                            : GSB__FOREST_MSE; /* squared_error, friedman_mse */
    return GSB_OK;
}

static int unsupported_params(const gsb__ctx *c)
{
    if (gsb__param_float(c->params, "ccp_alpha") != 0.0)
        return gsb__err(GSB_EUNSUPPORTED, "%s: ccp_alpha=%g is not supported by gsb (no "
                        "pruning); use 0.0", c->est->name,
                        gsb__param_float(c->params, "ccp_alpha"));
    if (!gsb__param_is_none(c->params, "monotonic_cst"))
        return gsb__err(GSB_EUNSUPPORTED, "%s: monotonic_cst is not supported by gsb; use None",
                        c->est->name);
    return GSB_OK;
}

static int read_cfg(gsb__ctx *c, int classify, int64_t n, int64_t F, forest_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    const json_t *P = c->params;
    cfg->classify = classify;
    GSB_TRY(resolve_criterion(c, classify, &cfg->criterion));
    GSB_TRY(unsupported_params(c));
    int64_t mss = 0, msl = 0;
    GSB_TRY(count_param(c, "min_samples_split", 2, 1, n, &mss));
    GSB_TRY(count_param(c, "min_samples_leaf", 1, 0, n, &msl));
    GSB_TRY(check_max_samples(c));
    GSB_TRY(resolve_max_features(c, F, &cfg->grow.max_features));
    mss = mss < 2 ? 2 : mss;
    cfg->grow.min_samples_leaf = msl;
    cfg->grow.min_samples_split = mss > 2 * msl ? mss : 2 * msl;
    cfg->grow.criterion = cfg->criterion;
    cfg->grow.max_depth = gsb__param_is_none(P, "max_depth") ? INT64_MAX
                                                              : gsb__param_int(P, "max_depth");
    cfg->grow.max_leaf_nodes = gsb__param_is_none(P, "max_leaf_nodes")
                                   ? 0 : gsb__param_int(P, "max_leaf_nodes");
    cfg->grow.min_impurity_decrease = gsb__param_float(P, "min_impurity_decrease");
    cfg->min_weight_fraction = gsb__param_float(P, "min_weight_fraction_leaf");
    cfg->n_estimators = gsb__param_int(P, "n_estimators");
    cfg->bootstrap = gsb__param_bool(P, "bootstrap");
    cfg->oob = gsb__param_bool(P, "oob_score");
    cfg->warm_start = gsb__param_bool(P, "warm_start");
    cfg->n_bins = (int)gsb__param_int(P, "n_bins");
    cfg->max_samples = json_object_get(P, "max_samples");
    if (!cfg->bootstrap && cfg->max_samples && !json_is_null(cfg->max_samples))
        return gsb__err(GSB_EINVAL, "`max_sample` cannot be set if `bootstrap=False`. Either "
                        "switch to `bootstrap=True` or set `max_sample=None`.");
    if (!cfg->bootstrap && cfg->oob)
        return gsb__err(GSB_EINVAL, "Out of bag estimation only available if bootstrap=True");
    cfg->balanced_subsample = classify && cfg->bootstrap &&
                              gsb__param_is(P, "class_weight", "balanced_subsample");
    return GSB_OK;
}

/* ---- targets ------------------------------------------------------------------------------ */

/* What the trees are fitted to: class indices, or (scaled) targets. */
typedef struct targets {
    int64_t n, K;            /* K: classes, or outputs */
    double *classes;         /* classification: the sorted classes */
    int32_t *cls;            /* classification: each row's class index */
    double *y;               /* regression: n x K targets (float64) */
    double *ys;              /* regression: n x 2K [y scaled, q] as the ops take them */
    double *scale2;          /* regression: each output's scale, squared */
} targets;

static void targets_free(targets *t)
{
    free(t->classes);
    free(t->cls);
    free(t->y);
    free(t->ys);
    free(t->scale2);
    memset(t, 0, sizeof *t);
}

static int oom(const gsb__ctx *c, const char *what)
{
    return gsb__err(GSB_ENOMEM, "%s: out of memory for %s", c->est->name, what);
}

static int class_targets(gsb__ctx *c, targets *t)
{
    const gsb__tensor *y = gsb__in(c, "y");
    t->n = y->rows;
    if (!(t->cls = gsb__alloc_array(t->n, sizeof *t->cls)))
        return oom(c, "labels");
    return gsb__labels_encode(c, y, &t->classes, &t->K, t->cls);
}

/*
 * Regression targets: float64 copies, and the ops' [y', q] with y' centred
 * and scaled per output for squared error (the split search is invariant to
 * it, and the impurities E[y'^2] - E[y']^2 lose less to cancellation), y
 * itself and q = y log y for Poisson.
 */
static int regression_targets(gsb__ctx *c, int criterion, targets *t)
{
    const gsb__tensor *y = gsb__in(c, "y");
    int64_t n = y->rows, K = y->cols;
    t->n = n;
    t->K = K;
    t->y = gsb__alloc_array(n * K, sizeof *t->y);
    t->ys = gsb__alloc_array(n * 2 * K, sizeof *t->ys);
    t->scale2 = gsb__alloc_array(K, sizeof *t->scale2);
    if (!t->y || !t->ys || !t->scale2)
        return oom(c, "targets");
    for (int64_t i = 0; i < n * K; i++)
        t->y[i] = gsb__tensor_get(y, i);
    if (criterion == GSB__FOREST_POISSON) {
        double sum = 0;
        for (int64_t i = 0; i < n * K; i++) {
            if (t->y[i] < 0)
                return gsb__err(GSB_EINVAL, "Some value(s) of y are negative which is not "
                                "allowed for Poisson regression.");
            sum += t->y[i];
        }
        if (!(sum > 0))
            return gsb__err(GSB_EINVAL, "Sum of y is not strictly positive which is necessary "
                            "for Poisson regression.");
    }
    for (int64_t k = 0; k < K; k++) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < n; i++)
            mean += t->y[i * K + k];
        mean /= (double)n;
        for (int64_t i = 0; i < n; i++)
            var += (t->y[i * K + k] - mean) * (t->y[i * K + k] - mean);
        double sd = sqrt(var / (double)n);
        int poisson = criterion == GSB__FOREST_POISSON;
        double shift = poisson ? 0.0 : mean, scale = poisson || !(sd > 0) ? 1.0 : sd;
        t->scale2[k] = scale * scale;
        for (int64_t i = 0; i < n; i++) {
            double v = (t->y[i * K + k] - shift) / scale;
            t->ys[i * 2 * K + k] = v;
            t->ys[i * 2 * K + K + k] = poisson ? (v > 0 ? v * log(v) : 0.0) : v * v;
        }
    }
    return GSB_OK;
}

/* ---- weights and bootstrap samples ------------------------------------------------------------ */

/*
 * scikit-learn's _sample_weight: sample_weight x expanded class weight (NULL
 * when both are absent).  'balanced_subsample' with bootstrap is per tree.
 */
static int sample_weights(gsb__ctx *c, const forest_cfg *cfg, const targets *t, double **out)
{
    const gsb__tensor *sw = gsb__in(c, "sample_weight");
    int use_cw = cfg->classify && gsb__class_weight_given(c) && !cfg->balanced_subsample;
    *out = NULL;
    if (!sw && !use_cw)
        return GSB_OK;
    double *w = gsb__alloc_array(t->n, sizeof *w), *cw = NULL;
    if (!w)
        return oom(c, "sample weights");
    double total = 0;
    for (int64_t i = 0; i < t->n; i++)
        total += w[i] = sw ? ((const double *)sw->data)[i] : 1.0;
    if (sw && !(total > 0)) {
        free(w);
        return gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero number.");
    }
    if (use_cw) {
        int rc = GSB_OK;
        if (!(cw = gsb__alloc_array(t->K, sizeof *cw)))
            rc = oom(c, "class weights");
        if (rc == GSB_OK)
            rc = gsb__class_weights(c, t->classes, t->K, t->cls, t->n, sw ? sw->data : NULL,
                                    cw);
        if (rc != GSB_OK) {
            free(w);
            free(cw);
            return rc;
        }
        for (int64_t i = 0; i < t->n; i++)
            w[i] *= cw[t->cls[i]];
        free(cw);
    }
    *out = w;
    return GSB_OK;
}

/* The bootstrap sample size (scikit-learn's _get_n_samples_bootstrap). */
static int64_t bootstrap_size(const forest_cfg *cfg, int64_t n, const double *w)
{
    const json_t *v = cfg->max_samples;
    if (!v || json_is_null(v))
        return n;
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    double total = (double)n;
    if (w) {
        total = 0;
        for (int64_t i = 0; i < n; i++)
            total += w[i];
    }
    int64_t k = (int64_t)(json_real_value(v) * total);
    return k < 1 ? 1 : k;
}

/* How bootstrap samples are drawn: uniformly, or by the cumulative weights. */
typedef struct sampler {
    int64_t n, n_boot;
    double *cdf;   /* n cumulative weights, or NULL */
} sampler;

/* counts[i]: the times row i is drawn into the sample of tree seed. */
static void bootstrap_counts(const sampler *s, uint64_t seed, int32_t *counts)
{
    gsb__rng r;
    gsb__rng_seed(&r, seed);
    memset(counts, 0, (size_t)s->n * sizeof *counts);
    for (int64_t k = 0; k < s->n_boot; k++) {
        int64_t i;
        if (!s->cdf) {
            i = gsb__rng_below(&r, s->n);
        } else { /* the first row whose cumulative weight exceeds u */
            double u = gsb__rng_uniform(&r) * s->cdf[s->n - 1];
            int64_t lo = 0, hi = s->n - 1;
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (s->cdf[mid] > u)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            i = lo;
        }
        counts[i]++;
    }
}

/* ---- growing the trees ------------------------------------------------------------------------- */

/* A host vector as a tensor on be: a view on the CPU (ops then work in place
 * in the host array), else an uploaded copy. */
static int to_backend(const gsb__backend *be, void *host, gsb_dtype dt, int64_t rows,
                      int64_t cols, gsb__tensor *out)
{
    gsb__tensor h = gsb__tensor_host_view(host, dt, rows, cols);
    return gsb__tensor_to(be, &h, out);
}

/* What every group of a fit shares. */
typedef struct fit_state {
    gsb__ctx *c;
    const gsb__backend *be;
    const forest_cfg *cfg;
    const targets *t;
    const double *w;            /* _sample_weight, or NULL */
    sampler smp;
    gsb__tensor codes, yb;      /* on be */
    const gsb__tensor *edges;   /* host */
    int n_real, nan_code, V1;
    int64_t F, trees_done;
    gsb__forest_model *model;
} fit_state;

/* The samples of one tree: rows with their weights (bootstrap counts, or the
 * sample weights without bootstrap), into rows/w; returns their number. */
static int64_t tree_samples(const fit_state *s, uint64_t seed, int32_t *counts, int32_t *rows,
                            float *w)
{
    int64_t n = s->t->n, k = 0;
    if (!s->cfg->bootstrap) {
        for (int64_t i = 0; i < n; i++)
            if (!s->w || s->w[i] > 0) {
                rows[k] = (int32_t)i;
                w[k++] = s->w ? (float)s->w[i] : 1.0f;
            }
        return k;
    }
    bootstrap_counts(&s->smp, seed, counts);
    double cw[256], *cwp = NULL;
    if (s->cfg->balanced_subsample && s->t->K <= 256) { /* weights of this sample's classes */
        double cc[256] = {0};
        int64_t present = 0;
        for (int64_t i = 0; i < n; i++)
            cc[s->t->cls[i]] += counts[i];
        for (int64_t k2 = 0; k2 < s->t->K; k2++)
            present += cc[k2] > 0;
        for (int64_t k2 = 0; k2 < s->t->K; k2++)
            cw[k2] = cc[k2] > 0 ? (double)s->smp.n_boot / ((double)present * cc[k2]) : 0.0;
        cwp = cw;
    }
    for (int64_t i = 0; i < n; i++)
        if (counts[i] > 0) {
            rows[k] = (int32_t)i;
            w[k++] = (float)(counts[i] * (cwp ? cwp[s->t->cls[i]] : 1.0));
        }
    return k;
}

/* V1 stats of samples rows/w (as the ops would sum them). */
static void root_stats(const fit_state *s, const int32_t *rows, const float *w, int64_t k,
                       double *st)
{
    memset(st, 0, (size_t)s->V1 * sizeof *st);
    int64_t K = s->t->K;
    for (int64_t i = 0; i < k; i++) {
        st[0] += 1;
        if (s->cfg->classify) {
            st[1 + s->t->cls[rows[i]]] += w[i];
        } else {
            st[1] += w[i];
            for (int64_t j = 0; j < 2 * K; j++)
                st[2 + j] += (double)w[i] * s->t->ys[(int64_t)rows[i] * 2 * K + j];
        }
    }
}

static int on_step(void *data, int64_t step)
{
    fit_state *s = data;
    return gsb__progress(s->c, "tree level", step, (double)s->trees_done);
}

/* Grow trees [t0, t1) (seeds) as one group and append them to the model. */
static int grow_group(fit_state *s, const uint64_t *seeds, int64_t t0, int64_t t1)
{
    const gsb__backend *be = s->be;
    int64_t n = s->t->n, G = t1 - t0, cap = 0;
    for (int64_t t = t0; t < t1; t++)
        cap += s->cfg->bootstrap && s->smp.n_boot < n ? s->smp.n_boot : n;
    int32_t *rows = gsb__alloc_array(cap, sizeof *rows);
    float *w = gsb__alloc_array(cap, sizeof *w);
    int64_t *start = gsb__alloc_array(G + 1, sizeof *start);
    double *stats = gsb__alloc_array(G * s->V1, sizeof *stats);
    gsb__grow_tree *trees = gsb__calloc_array(G, sizeof *trees);
    gsb__grown *grown = gsb__calloc_array(G, sizeof *grown);
    gsb__tensor rb = GSB__TENSOR_NONE, wb = GSB__TENSOR_NONE;
    int rc = GSB_OK, failed = 0;
    if (!rows || !w || !start || !stats || !trees || !grown) {
        rc = oom(s->c, "the bootstrap samples");
        goto done;
    }
    /* each tree's samples at its own offset, then packed */
    int64_t off = 0;
    for (int64_t g = 0; g < G; g++) {
        start[g] = off;
        off += s->cfg->bootstrap && s->smp.n_boot < n ? s->smp.n_boot : n;
    }
    int64_t *len = gsb__alloc_array(G, sizeof *len);
    if (!len) {
        rc = oom(s->c, "the bootstrap samples");
        goto done;
    }
#pragma omp parallel reduction(| : failed) if (n * G > 65536)
    {
        int32_t *counts = gsb__alloc_array(n, sizeof *counts);
        failed = !counts;
#pragma omp for schedule(dynamic, 1)
        for (int64_t g = 0; g < G; g++)
            if (!failed) {
                len[g] = tree_samples(s, seeds[t0 + g], counts, rows + start[g], w + start[g]);
                root_stats(s, rows + start[g], w + start[g], len[g], stats + g * s->V1);
            }
        free(counts);
    }
    if (failed) {
        free(len);
        rc = oom(s->c, "the bootstrap counts");
        goto done;
    }
    off = 0;
    for (int64_t g = 0; g < G; g++) {
        memmove(rows + off, rows + start[g], (size_t)len[g] * sizeof *rows);
        memmove(w + off, w + start[g], (size_t)len[g] * sizeof *w);
        trees[g].start = off;
        trees[g].end = off + len[g];
        trees[g].seed = seeds[t0 + g];
        trees[g].root_stats = stats + g * s->V1;
        off += len[g];
    }
    free(len);
    GSB_CHECK(to_backend(be, rows, GSB_I32, off, 1, &rb));
    GSB_CHECK(to_backend(be, w, GSB_F32, off, 1, &wb));
    gsb__forest_data d = {&s->codes, s->F, s->n_real + (s->nan_code >= 0), s->nan_code,
                          s->cfg->classify ? (int)s->t->K : 0,
                          s->cfg->classify ? 0 : (int)s->t->K, &s->yb, &rb, &wb,
                          NULL, NULL, NULL};
    gsb__grow_params gp = s->cfg->grow;
    gp.min_weight_leaf = s->cfg->min_weight_fraction *
                         gsb__forest_weight(stats, s->cfg->classify ? (int)s->t->K : 0);
    gp.y_scale2 = s->t->scale2;
    gp.pool_bytes = be == gsb__cpu_backend() ? POOL_BYTES_CPU : POOL_BYTES_GPU;
    GSB_CHECK(gsb__grow_trees(be, &d, &gp, trees, G, grown, on_step, s));
    /* the samples as the growth left them: each leaf's are a segment */
    if (rb.data != rows)
        GSB_CHECK(be->ops->download(be, &rb, rows));
    if (wb.data != w)
        GSB_CHECK(be->ops->download(be, &wb, w));
    gsb__leaf_source src = {rows, w, s->t->cls, s->t->y, s->edges->data, s->edges->cols,
                            s->n_real};
    for (int64_t g = 0; g < G; g++)
        GSB_CHECK(gsb__forest_model_append(s->model, &grown[g], seeds[t0 + g],
                                           gsb__forest_weight(stats + g * s->V1,
                                                              s->cfg->classify ? (int)s->t->K : 0),
                                           &src));
    s->trees_done += G;
    rc = gsb__progress(s->c, "trees", s->trees_done, 0.0);
done:
    for (int64_t g = 0; grown && g < G; g++)
        gsb__grown_free(&grown[g]);
    gsb__tensor_free(&rb);
    gsb__tensor_free(&wb);
    free(rows);
    free(w);
    free(start);
    free(stats);
    free(trees);
    free(grown);
    return rc;
}

/* Bin X and put the targets on the state's backend. */
static int prepare_data(fit_state *s)
{
    const gsb__backend *be = s->be;
    const gsb__tensor *X = gsb__in(s->c, "X");
    gsb__tensor Xb = GSB__TENSOR_NONE, eb = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    GSB_CHECK(gsb__tensor_to(be, s->edges, &eb));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_I32, X->rows, (X->cols + 3) / 4, &s->codes));
    GSB_CHECK(be->ops->forest_bin(be, &Xb, &eb, s->nan_code, &s->codes));
    if (s->cfg->classify)
        rc = to_backend(be, s->t->cls, GSB_I32, s->t->n, 1, &s->yb);
    else
        rc = to_backend(be, s->t->ys, GSB_F64, s->t->n, 2 * s->t->K, &s->yb);
done:
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&eb);
    return rc;
}

/* Grow the trees of seeds[from .. to) in groups of at most GROUP_SAMPLES samples. */
static int grow_all(fit_state *s, const uint64_t *seeds, int64_t from, int64_t to)
{
    int rc = prepare_data(s);
    int64_t per_tree = s->cfg->bootstrap && s->smp.n_boot < s->t->n ? s->smp.n_boot : s->t->n;
    for (int64_t t0 = from; t0 < to && rc == GSB_OK;) {
        int64_t t1 = t0 + 1;
        while (t1 < to && (t1 - t0 + 1) * per_tree <= GROUP_SAMPLES)
            t1++;
        rc = grow_group(s, seeds, t0, t1);
        t0 = t1;
    }
    gsb__tensor_free(&s->codes);
    gsb__tensor_free(&s->yb);
    return rc;
}

/* ---- out-of-bag estimates ---------------------------------------------------------------------- */

/* oob_score_ and oob_decision_function_ / oob_prediction_ of the fitted
 * trees (their seeds give their samples again), as scikit-learn's. */
static int compute_oob(gsb__ctx *c, const forest_cfg *cfg, const targets *t,
                       const sampler *smp)
{
    const gsb__tensor *X = gsb__in(c, "X"), *seed_attr;
    gsb__forest_trees v;
    int64_t T, n = t->n, K = t->K, F = X->cols;
    GSB_TRY(gsb__forest_model_view(c, F, K, &v, &T));
    GSB_TRY(gsb__attr_need(c, "_tree_seed", GSB_I64, T, 1, &seed_attr));
    int64_t words = (n + 63) / 64;
    uint64_t *inbag = gsb__calloc_array(T * words, sizeof *inbag);
    double *sum = gsb__calloc_array(n * K, sizeof *sum);
    int64_t *cnt = gsb__calloc_array(n, sizeof *cnt);
    gsb__tensor out = GSB__TENSOR_NONE;
    int rc = GSB_OK, failed = 0;
    if (!inbag || !sum || !cnt) {
        rc = oom(c, "the out-of-bag estimates");
        goto done;
    }
#pragma omp parallel reduction(| : failed) if (n * T > 65536)
    {
        int32_t *counts = gsb__alloc_array(n, sizeof *counts);
        failed = !counts;
#pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < T; k++)
            if (!failed) {
                bootstrap_counts(smp, (uint64_t)((const int64_t *)seed_attr->data)[k], counts);
                for (int64_t i = 0; i < n; i++)
                    if (counts[i] > 0)
                        inbag[k * words + i / 64] |= (uint64_t)1 << (i % 64);
            }
        free(counts);
    }
    if (failed) {
        rc = oom(c, "the out-of-bag estimates");
        goto done;
    }
    const int32_t *root = v.root->data, *child = v.child->data;
    const float *val = v.value->data;
    size_t row_bytes = (size_t)F * gsb_dtype_size(X->dtype);
#pragma omp parallel for schedule(static) if (n * T > 65536)
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < T; k++) {
            if (inbag[k * words + i / 64] >> (i % 64) & 1)
                continue;
            int64_t leaf = gsb__forest_walk(&v, root[k], (const char *)X->data + i * row_bytes,
                                            X->dtype);
            for (int64_t j = 0; j < K; j++)
                sum[i * K + j] += val[(int64_t)child[leaf] * K + j];
            cnt[i]++;
        }
    /* rows no tree left out predict 0, as scikit-learn's (which warns) */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < K; j++)
            sum[i * K + j] /= (double)(cnt[i] > 0 ? cnt[i] : 1);
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n, K, &out));
    memcpy(out.data, sum, (size_t)(n * K) * sizeof(double));
    double score = 0;
    if (cfg->classify) {
        for (int64_t i = 0; i < n; i++) {
            int64_t best = 0;
            for (int64_t j = 1; j < K; j++)
                if (sum[i * K + j] > sum[i * K + best])
                    best = j;
            score += best == t->cls[i];
        }
        score /= (double)n;
        GSB_CHECK(gsb__fit_set(c, "oob_decision_function_", &out));
    } else {
        GSB_CHECK(gsb__score_r2(gsb__in(c, "y"), &out, NULL, &score));
        if (K == 1)
            gsb__tensor_as_1d(&out);
        GSB_CHECK(gsb__fit_set(c, "oob_prediction_", &out));
    }
    rc = gsb__fit_set_scalar(c, "oob_score_", score, GSB_F64);
done:
    gsb__tensor_free(&out);
    free(inbag);
    free(sum);
    free(cnt);
    return rc;
}

/* ---- fit -------------------------------------------------------------------------------------------- */

/* warm_start with no tree to add: the fitted state stays as it is. */
static int keep_fitted(gsb__ctx *c)
{
    const gsb__nlist *old = &c->model->attrs;
    for (int i = 0; i < old->n; i++) {
        if (strcmp(old->names[i], "n_features_in_") == 0)
            continue;
        gsb__tensor copy;
        GSB_TRY(gsb__tensor_to_host(&old->items[i], &copy));
        copy.ndim = old->items[i].ndim;
        GSB_TRY(gsb__fit_set(c, old->names[i], &copy));
    }
    return GSB_OK;
}

/* The fitted trees warm_start builds on must describe the same problem. */
static int check_warm(gsb__ctx *c, const targets *t, int64_t F)
{
    const gsb__tensor *nf = gsb__attr(c, "n_features_in_"), *cls = gsb__attr(c, "classes_"),
                      *no = gsb__attr(c, "n_outputs_");
    if (nf && (int64_t)gsb__tensor_get(nf, 0) != F)
        return gsb__err(GSB_EINVAL, "X has %lld features, but %s is expecting %lld features as "
                        "input.", (long long)F, c->est->name,
                        (long long)gsb__tensor_get(nf, 0));
    int same = t->classes ? cls && cls->rows * cls->cols == t->K
                          : no && (int64_t)gsb__tensor_get(no, 0) == t->K;
    for (int64_t k = 0; same && t->classes && k < t->K; k++)
        same = gsb__tensor_get(cls, k) == t->classes[k];
    if (!same)
        return gsb__err(GSB_EINVAL, "%s: warm_start=True adds trees to the fitted ones, but y "
                        "has other %s than the fitted trees' (fit with warm_start=False to "
                        "start afresh)", c->est->name, t->classes ? "classes" : "outputs");
    return GSB_OK;
}

static int store_targets(gsb__ctx *c, const targets *t)
{
    if (t->classes) {
        gsb__tensor cls;
        GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, t->K, 1, &cls));
        memcpy(cls.data, t->classes, (size_t)t->K * sizeof(double));
        gsb__tensor_as_1d(&cls);
        GSB_TRY(gsb__fit_set(c, "classes_", &cls));
        GSB_TRY(gsb__fit_set_scalar(c, "n_classes_", (double)t->K, GSB_I64));
        return gsb__fit_set_scalar(c, "n_outputs_", 1.0, GSB_I64);
    }
    return gsb__fit_set_scalar(c, "n_outputs_", (double)t->K, GSB_I64);
}

/* Draw the bins' seed and the trees' seeds as a cold fit of n trees would. */
static int draw_seeds(gsb__ctx *c, int64_t n, uint64_t *bin_seed, uint64_t **seeds)
{
    gsb__rng r;
    gsb__rng_seed_params(&r, c->params);
    *bin_seed = gsb__rng_next(&r);
    if (!(*seeds = gsb__alloc_array(n, sizeof **seeds)))
        return oom(c, "seeds");
    for (int64_t i = 0; i < n; i++)
        (*seeds)[i] = gsb__rng_next(&r);
    return GSB_OK;
}

static int forest_fit(gsb__ctx *c, int classify)
{
    const gsb__tensor *X = gsb__in(c, "X");
    int64_t n = X->rows, F = X->cols, n_old = 0;
    forest_cfg cfg;
    targets t = {0};
    double *w = NULL;
    uint64_t *seeds = NULL, bin_seed;
    gsb__tensor edges = GSB__TENSOR_NONE;
    gsb__forest_model model = {0};
    fit_state s = {0};
    int rc;
    GSB_CHECK(read_cfg(c, classify, n, F, &cfg));
    GSB_CHECK(classify ? class_targets(c, &t) : regression_targets(c, cfg.criterion, &t));
    GSB_CHECK(sample_weights(c, &cfg, &t, &w));
    s = (fit_state){c, c->be, &cfg, &t, w, {n, bootstrap_size(&cfg, n, w), NULL},
                    GSB__TENSOR_NONE, GSB__TENSOR_NONE, &edges, 0, -1,
                    gsb__forest_nstats(classify ? (int)t.K : 0, (int)t.K), F, 0, &model};
    if (w && cfg.bootstrap) {
        if (!(s.smp.cdf = gsb__alloc_array(n, sizeof *s.smp.cdf))) {
            rc = oom(c, "the bootstrap weights");
            goto done;
        }
        for (int64_t i = 0; i < n; i++)
            s.smp.cdf[i] = (i ? s.smp.cdf[i - 1] : 0.0) + w[i];
    }
    model.F = F;
    model.K = t.K;
    if (cfg.warm_start && gsb__attr(c, "_tree_root")) {
        GSB_CHECK(check_warm(c, &t, F));
        n_old = gsb__attr(c, "_tree_root")->rows;
        if (cfg.n_estimators < n_old) {
            rc = gsb__err(GSB_EINVAL, "n_estimators=%lld must be larger or equal to "
                          "len(estimators_)=%lld when warm_start==True",
                          (long long)cfg.n_estimators, (long long)n_old);
            goto done;
        }
        if (cfg.n_estimators == n_old) {
            GSB_CHECK(keep_fitted(c));
            if (cfg.oob && !gsb__attr(c, "oob_score_"))
                rc = compute_oob(c, &cfg, &t, &s.smp);
            goto done;
        }
        GSB_CHECK(gsb__forest_model_append_fitted(c, &model));
    }
    GSB_CHECK(draw_seeds(c, cfg.n_estimators, &bin_seed, &seeds));
    int has_nan = gsb__forest_has_nan(X);
    s.n_real = cfg.n_bins > 255 && has_nan ? 255 : cfg.n_bins;
    s.nan_code = has_nan ? s.n_real : -1;
    gsb__rng bin_rng;
    gsb__rng_seed(&bin_rng, bin_seed);
    GSB_CHECK(gsb__forest_edges(X, s.n_real, &bin_rng, &edges));
    rc = grow_all(&s, seeds, n_old, cfg.n_estimators);
    if (rc == GSB_EUNSUPPORTED && s.be != gsb__cpu_backend()) {
        /* a limit of the GPU kernels (shared memory per histogram): the CPU can */
        while (model.n_trees > n_old) {
            model.n_trees--;
            model.n_nodes = model.root[model.n_trees];
        }
        model.n_leaves = 0;
        for (int64_t i = 0; i < model.n_nodes; i++)
            model.n_leaves += model.split[i] < 0;
        s.be = gsb__cpu_backend();
        s.trees_done = 0;
        rc = grow_all(&s, seeds, n_old, cfg.n_estimators);
    }
    if (rc != GSB_OK)
        goto done;
    GSB_CHECK(gsb__forest_model_store(c, &model));
    GSB_CHECK(store_targets(c, &t));
    if (cfg.oob)
        rc = compute_oob(c, &cfg, &t, &s.smp);
done:
    gsb__forest_model_free(&model);
    gsb__tensor_free(&edges);
    targets_free(&t);
    free(w);
    free(seeds);
    free(s.smp.cdf);
    return rc;
}

static int classifier_fit(gsb__ctx *c) { return forest_fit(c, 1); }
static int regressor_fit(gsb__ctx *c) { return forest_fit(c, 0); }

/* ---- prediction -------------------------------------------------------------------------------------- */

/* forest_predict on be for the model's trees v (host): sum and/or leaves (host). */
static int predict_on(const gsb__backend *be, const gsb__tensor *X, const gsb__forest_trees *v,
                      gsb__tensor *sum, gsb__tensor *leaves)
{
    if (be == gsb__cpu_backend())
        return be->ops->forest_predict(be, X, v, sum, leaves);
    gsb__tensor d[6] = {GSB__TENSOR_NONE, GSB__TENSOR_NONE, GSB__TENSOR_NONE,
                        GSB__TENSOR_NONE, GSB__TENSOR_NONE, GSB__TENSOR_NONE};
    gsb__tensor ds = GSB__TENSOR_NONE, dl = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_to(be, v->split, &d[0]));
    GSB_CHECK(gsb__tensor_to(be, v->threshold, &d[1]));
    GSB_CHECK(gsb__tensor_to(be, v->child, &d[2]));
    GSB_CHECK(gsb__tensor_to(be, v->root, &d[3]));
    GSB_CHECK(gsb__tensor_to(be, v->value, &d[4]));
    GSB_CHECK(gsb__tensor_to(be, X, &d[5]));
    gsb__forest_trees dv = {&d[0], &d[1], &d[2], &d[3], &d[4]};
    if (sum)
        GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, sum->rows, sum->cols, &ds));
    if (leaves)
        GSB_CHECK(gsb__tensor_alloc(be, GSB_I32, leaves->rows, leaves->cols, &dl));
    GSB_CHECK(be->ops->forest_predict(be, &d[5], &dv, sum ? &ds : NULL, leaves ? &dl : NULL));
    if (sum)
        GSB_CHECK(be->ops->download(be, &ds, sum->data));
    if (leaves)
        rc = be->ops->download(be, &dl, leaves->data);
done:
    for (int i = 0; i < 6; i++)
        gsb__tensor_free(&d[i]);
    gsb__tensor_free(&ds);
    gsb__tensor_free(&dl);
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

/* The mean over trees of the leaf values of each row of X (host, n x K), or
 * the leaves (n x T int32) when leaves is not NULL. */
static int forest_predict(gsb__ctx *c, gsb__tensor *mean, gsb__tensor *leaves)
{
    const gsb__tensor *X = gsb__in(c, "X");
    int64_t K = values_per_leaf(c), T;
    gsb__forest_trees v;
    if (K < 1)
        return gsb__err(GSB_ECORRUPT, "%s: fitted attribute 'classes_' or 'n_outputs_' is "
                        "missing or malformed", c->est->name);
    GSB_TRY(gsb__forest_model_view(c, X->cols, K, &v, &T));
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor *out = mean ? mean : leaves;
    GSB_TRY(gsb__tensor_alloc(cpu, mean ? GSB_F64 : GSB_I32, X->rows, mean ? K : T, out));
    int rc = predict_on(c->be, X, &v, mean, leaves);
    if (rc == GSB_EUNSUPPORTED && c->be != cpu)
        rc = predict_on(cpu, X, &v, mean, leaves);
    if (rc != GSB_OK) {
        gsb__tensor_free(out);
        return rc;
    }
    if (mean)
        for (int64_t i = 0; i < X->rows * K; i++)
            ((double *)mean->data)[i] /= (double)T;
    return GSB_OK;
}

static int classifier_predict_proba(gsb__ctx *c)
{
    gsb__tensor p;
    GSB_TRY(forest_predict(c, &p, NULL));
    return gsb__out(c, "proba", &p);
}

static int classifier_predict_log_proba(gsb__ctx *c)
{
    gsb__tensor p;
    GSB_TRY(forest_predict(c, &p, NULL));
    for (int64_t i = 0; i < p.rows * p.cols; i++)
        ((double *)p.data)[i] = log(((double *)p.data)[i]);
    return gsb__out(c, "log_proba", &p);
}

static int classifier_predict(gsb__ctx *c)
{
    gsb__tensor p, labels;
    GSB_TRY(forest_predict(c, &p, NULL));
    const double *cls = gsb__attr(c, "classes_")->data, *pr = p.data;
    int rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, p.rows, 1, &labels);
    if (rc == GSB_OK) {
        for (int64_t i = 0; i < p.rows; i++) {
            int64_t best = 0;
            for (int64_t k = 1; k < p.cols; k++)
                if (pr[i * p.cols + k] > pr[i * p.cols + best])
                    best = k;
            ((double *)labels.data)[i] = cls[best];
        }
        gsb__tensor_as_1d(&labels);
        rc = gsb__out(c, "labels", &labels);
    }
    gsb__tensor_free(&p);
    return rc;
}

static int regressor_predict(gsb__ctx *c)
{
    gsb__tensor y;
    GSB_TRY(forest_predict(c, &y, NULL));
    if (y.cols == 1)
        gsb__tensor_as_1d(&y);
    return gsb__out(c, "y", &y);
}

static int forest_apply(gsb__ctx *c)
{
    gsb__tensor leaves, out;
    GSB_TRY(forest_predict(c, NULL, &leaves));
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

/* ---- descriptors --------------------------------------------------------------------------------------- */

#define IN_X {"X", GSB__IN_X | GSB__IN_ALLOW_NAN}
#define APPLY_METHOD                                                                             \
    {"apply", forest_apply, {IN_X}, 0,                                                           \
     "leaves (n_samples, n_estimators) int64: the leaf each tree sends each row to (node "        \
     "index within the tree, gsb's breadth-first numbering)"},                                    \
    {"tree_info", forest_tree_info, {{0}}, 0,                                                    \
     "n_leaves and depth (int64) of each tree (a tree has 2 n_leaves - 1 nodes)"}

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
    {0}};

static const gsb__method_desc reg_methods[] = {
    {"fit", regressor_fit,
     {IN_X, {"y", GSB__IN_Y_LIKE_X}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}}, 1,
     "Grow n_estimators trees (y: 1-D, or 2-D for several outputs; NaN in X is a missing "
     "value)."},
    {"predict", regressor_predict, {IN_X}, 0,
     "y: the mean over the trees of the leaves' target means (float64; (n,) for one output)."},
    APPLY_METHOD,
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
