/*
 * neighbors.c - NearestNeighbors, KNeighborsClassifier, KNeighborsRegressor
 * (scikit-learn 1.9.1's sklearn.neighbors).
 *
 * Every search is brute force through the backend's fused top-k op, whatever
 * `algorithm` says: kd_tree, ball_tree and brute return the same neighbours
 * (up to the order of exact ties), so the parameter is accepted for
 * compatibility and only checked the way scikit-learn checks it (cosine is
 * not a tree metric).  Ties in distance go to the smaller training index.
 *
 * Fitted state: "_fit_X" (the training rows, X's dtype), n_samples_fit_, and
 * for the supervised estimators "_y" (classifier: int64 class indices into
 * classes_; regressor: the targets in X's dtype, 1-D or 2-D).  The effective
 * metric is not stored (attributes are arrays): it is derived from the
 * parameters at each call (minkowski with p=2 is euclidean, p=1 manhattan).
 *
 * Queries with X absent (kneighbors, predict, predict_proba, score) use the
 * training rows and exclude each row from its own neighbours, as scikit-learn
 * does (leave-one-out): the k nearest other rows.  (scikit-learn searches
 * k + 1 and drops the row itself, or the first hit when exact duplicates
 * crowd it out; only the order among distance-0 duplicates can differ.)
 *
 * In a multi-device session (docs/MULTIGPU.md) the search runs across the
 * devices, the training rows split into one shard per device and kept there
 * (multidev/multidev_knn.c), with the same result.
 *
 * Dtypes, where they differ from scikit-learn: kneighbors distances are in
 * the query's dtype (scikit-learn gives float64 for float32 euclidean and
 * manhattan), regressor predictions in the targets' fitted dtype (X's), and
 * classifier labels are float64 (classes_ is float64 here).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/estimator.h"
#include "core/profile.h"
#include "estimators/common/classes.h"
#include "estimators/common/partial_stats.h"
#include "estimators/neighbors/neighbors_radius.h"
#include "estimators/neighbors/neighbors_stream.h"
#include "multidev/multidev_knn.h"

/* ---- parameters ---------------------------------------------------------- */

static const char *const algorithm_choices[] = {"auto", "ball_tree", "kd_tree", "brute", NULL};
static const char *const weights_choices[] = {"uniform", "distance", NULL};
/* scikit-learn's sorted(set(itertools.chain(*VALID_METRICS.values()))): every name is a
 * valid parameter value; those we cannot compute fail at fit with GSB_EUNSUPPORTED. */
static const char *const metric_choices[] = {
    "braycurtis", "canberra",   "chebyshev", "cityblock",     "correlation",
    "cosine",     "dice",       "euclidean", "hamming",       "haversine",
    "infinity",   "jaccard",    "l1",        "l2",            "mahalanobis",
    "manhattan",  "minkowski",  "nan_euclidean", "p",         "precomputed",
    "pyfunc",     "rogerstanimoto", "russellrao", "seuclidean", "sokalmichener",
    "sokalsneath", "sqeuclidean", "yule",    NULL};

#define P_N_NEIGHBORS                                                                      \
    {"n_neighbors", GSB__P_INT | GSB__P_NONE, "5", 1, INFINITY, GSB__CLOSED_LEFT, NULL,    \
     "number of neighbours used by default for queries"}
#define P_WEIGHTS                                                                          \
    {"weights", GSB__P_STR | GSB__P_NONE, "\"uniform\"", 0, 0, 0, weights_choices,         \
     "'uniform' (None) or 'distance' (1/d; exact matches take all the weight); callables " \
     "are the Python layer's"}
#define P_COMMON                                                                           \
    {"algorithm", GSB__P_STR, "\"auto\"", 0, 0, 0, algorithm_choices,                      \
     "accepted for compatibility: every search is brute force (same neighbours)"},         \
    {"leaf_size", GSB__P_INT, "30", 1, INFINITY, GSB__CLOSED_LEFT, NULL,                   \
     "accepted for compatibility (trees are not built)"},                                  \
    {"metric", GSB__P_STR, "\"minkowski\"", 0, 0, 0, metric_choices,                       \
     "supported: euclidean, l2, manhattan, l1, cityblock, cosine, minkowski (p 1 or 2)"},  \
    {"p", GSB__P_FLOAT | GSB__P_NONE, "2", 0, INFINITY, GSB__CLOSED_RIGHT, NULL,           \
     "Minkowski power; only 1 and 2 are supported, used when metric='minkowski'"},         \
    {"metric_params", GSB__P_DICT | GSB__P_NONE, "null", 0, 0, 0, NULL,                    \
     "must be None or an empty dict"},                                                     \
    {"n_jobs", GSB__P_INT | GSB__P_NONE, "null", 0, 0, 0, NULL,                            \
     "accepted for compatibility: the backend sets the parallelism"}

static const gsb__param_desc nn_params[] = {
    P_N_NEIGHBORS,
    {"radius", GSB__P_FLOAT | GSB__P_NONE, "1.0", 0, INFINITY, GSB__CLOSED_BOTH, NULL,
     "range of parameter space to use by default for radius_neighbors queries"},
    P_COMMON,
    {0}};

static const gsb__param_desc knn_params[] = {P_N_NEIGHBORS, P_WEIGHTS, P_COMMON, {0}};

/* ---- metric -------------------------------------------------------------- */

static int is_one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

/* scikit-learn's _check_algorithm_metric: a tree algorithm rejects metrics it lacks. */
static int check_algorithm_metric(const char *algorithm, const char *metric)
{
    static const char *const kd_tree_metrics[] = {"chebyshev", "cityblock", "euclidean",
                                                  "infinity",  "l1",        "l2",
                                                  "manhattan", "minkowski", "p",
                                                  NULL};
    static const char *const not_ball_tree[] = {"correlation", "cosine",      "nan_euclidean",
                                                "precomputed", "sqeuclidean", "yule",
                                                NULL};
    int bad = (strcmp(algorithm, "kd_tree") == 0 && !is_one_of(metric, kd_tree_metrics)) ||
              (strcmp(algorithm, "ball_tree") == 0 && is_one_of(metric, not_ball_tree));
    if (bad)
        return gsb__err(GSB_EINVAL,
                        "Metric '%s' not valid. Use sorted(sklearn.neighbors.VALID_METRICS"
                        "['%s']) to get valid options. Metric can also be a callable function.",
                        metric, algorithm);
    return GSB_OK;
}

/* The metric the parameters ask for, as the op computes it (scikit-learn's
 * effective_metric_: minkowski with p=2 is euclidean, with p=1 manhattan). */
int gsb__neighbors_metric(const gsb__ctx *c, gsb__metric *out)
{
    const json_t *mp = json_object_get(c->params, "metric_params");
    if (mp && !json_is_null(mp) && (!json_is_object(mp) || json_object_size(mp) > 0))
        return gsb__err(GSB_EUNSUPPORTED,
                        "%s: metric_params is not supported (got a non-empty dict); pass the "
                        "metric and p parameters instead",
                        c->est->name);
    const char *metric = gsb__param_str(c->params, "metric");
    const char *algorithm = gsb__param_str(c->params, "algorithm");
    if (!metric || !algorithm)
        return gsb__err(GSB_EINTERNAL, "%s: metric or algorithm parameter missing",
                        c->est->name);
    GSB_TRY(check_algorithm_metric(algorithm, metric));

    static const char *const euclidean[] = {"euclidean", "l2", NULL};
    static const char *const manhattan[] = {"manhattan", "l1", "cityblock", NULL};
    if (is_one_of(metric, euclidean)) {
        *out = GSB__METRIC_EUCLIDEAN;
        return GSB_OK;
    }
    if (is_one_of(metric, manhattan)) {
        *out = GSB__METRIC_MANHATTAN;
        return GSB_OK;
    }
    if (strcmp(metric, "cosine") == 0) {
        *out = GSB__METRIC_COSINE;
        return GSB_OK;
    }
    if (strcmp(metric, "minkowski") == 0) {
        /* p is read only for minkowski: scikit-learn ignores it for other metrics */
        if (gsb__param_is_none(c->params, "p"))
            return gsb__err(GSB_EUNSUPPORTED,
                            "%s: metric='minkowski' with p=None is not supported (use p=1 or "
                            "p=2)",
                            c->est->name);
        double p = gsb__param_float(c->params, "p");
        if (p == 1.0 || p == 2.0) {
            *out = p == 1.0 ? GSB__METRIC_MANHATTAN : GSB__METRIC_EUCLIDEAN;
            return GSB_OK;
        }
        return gsb__err(GSB_EUNSUPPORTED,
                        "%s: metric='minkowski' with p=%g is not supported (only p=1, "
                        "manhattan, and p=2, euclidean)",
                        c->est->name, p);
    }
    return gsb__err(GSB_EUNSUPPORTED,
                    "%s: metric='%s' is not supported; supported metrics: 'euclidean', 'l2', "
                    "'manhattan', 'l1', 'cityblock', 'cosine', 'minkowski' (p=1 or p=2)",
                    c->est->name, metric);
}

/* ---- the search ---------------------------------------------------------- */

/* Move a tensor to an owned host tensor (no copy when it already is one). */
static int move_to_host(gsb__tensor *t)
{
    if (t->be == gsb__cpu_backend() && t->owned)
        return GSB_OK;
    gsb__tensor h;
    int rc = gsb__tensor_to_host(t, &h);
    gsb__tensor_free(t);
    if (rc == GSB_OK)
        *t = h;
    return rc;
}

static const gsb__tensor *fit_X_of(gsb__ctx *c)
{
    return gsb__attr(c, "_fit_X");
}

/* The n_neighbors parameter (None is valid at construction, not at query time). */
static int param_k(gsb__ctx *c, int64_t *k)
{
    if (gsb__param_is_none(c->params, "n_neighbors"))
        return gsb__err(GSB_EINVAL, "%s: n_neighbors is None; set n_neighbors to an int >= 1",
                        c->est->name);
    *k = gsb__param_int(c->params, "n_neighbors");
    return GSB_OK;
}

/*
 * The k nearest training rows of each row of X, or with X NULL of each
 * training row with itself excluded: host tensors dist (nq x k, the compute
 * dtype: X's, or float64 when X and the training data differ) and idx
 * (nq x k, int64), ascending by distance.
 */
static int knn_search(gsb__ctx *c, const gsb__tensor *X, int64_t k, gsb__tensor *dist,
                      gsb__tensor *idx)
{
    *dist = *idx = GSB__TENSOR_NONE;
    gsb__metric metric;
    GSB_TRY(gsb__neighbors_metric(c, &metric));
    const gsb__tensor *fit_X = fit_X_of(c);
    if (!fit_X)
        return gsb__err(GSB_ENOTFITTED, "This %s instance is not fitted yet.", c->est->name);
    int64_t n_fit = fit_X->rows;
    /* scikit-learn asks for k + 1 neighbours of training rows (one is the row itself) */
    if (X ? k > n_fit : k >= n_fit)
        return gsb__err(GSB_EINVAL,
                        "Expected n_neighbors %s n_samples_fit, but n_neighbors = %lld, "
                        "n_samples_fit = %lld, n_samples = %lld",
                        X ? "<=" : "<", (long long)k, (long long)n_fit,
                        (long long)(X ? X->rows : n_fit));

    gsb_dtype cdt = !X || X->dtype == fit_X->dtype ? fit_X->dtype : GSB_F64;
    gsb__tensor R = GSB__TENSOR_NONE, Q = GSB__TENSOR_NONE;
    gsb__tensor d = GSB__TENSOR_NONE, ix = GSB__TENSOR_NONE;
    int rc, streamed, split;
    /* a multi-device session: the index split across its devices */
    GSB_TRY(gsb__md_knn_search(c, X, fit_X, k, metric, cdt, dist, idx, &split));
    if (split)
        return GSB_OK;
    /* index and queries larger than the backend's memory: in blocks and batches */
    GSB_TRY(gsb__knn_search_streamed(c, X, fit_X, k, metric, cdt, dist, idx, &streamed));
    if (streamed)
        return GSB_OK;
    if (X && c->be != gsb__cpu_backend() && fit_X->be == gsb__cpu_backend() &&
        fit_X->dtype == cdt) {
        /* the training rows stay on the host: a device's topk uploads them
         * itself, behind its search (backend.h) */
        R = *fit_X;
        R.owned = 0;
    } else {
        GSB_CHECK(gsb__tensor_to_dtype(c->be, fit_X, cdt, &R));
        gsb__profile_mark("training rows to the backend");
    }
    if (X) {
        GSB_CHECK(gsb__tensor_to_dtype(c->be, X, cdt, &Q));
        gsb__profile_mark("queries to the backend");
    }
    const gsb__tensor *q = X ? &Q : &R;
    GSB_CHECK(gsb__tensor_alloc(c->be, cdt, q->rows, k, &d));
    GSB_CHECK(gsb__tensor_alloc(c->be, GSB_I64, q->rows, k, &ix));
    GSB_CHECK(c->be->ops->topk(c->be, q, &R, k, metric, X == NULL, &d, &ix));
    gsb__profile_mark("search");
    GSB_CHECK(move_to_host(&d));
    GSB_CHECK(move_to_host(&ix));
    gsb__profile_mark("neighbours to the host");
    *dist = d;
    *idx = ix;
    d = ix = GSB__TENSOR_NONE;
done:
    gsb__tensor_free(&d);
    gsb__tensor_free(&ix);
    gsb__tensor_free(&Q);
    gsb__tensor_free(&R);
    return rc;
}

/*
 * scikit-learn's _get_weights(dist, 'distance') for one query row: 1/d, but
 * when some neighbour is at distance 0 (1/d is infinite) those neighbours get
 * weight 1 and the others 0.  Distances are read as double.
 */
static void distance_weights(const gsb__tensor *dist, int64_t row, int64_t k, double *w)
{
    int any_inf = 0;
    for (int64_t j = 0; j < k; j++) {
        w[j] = 1.0 / gsb__tensor_get(dist, row * k + j);
        any_inf |= isinf(w[j]);
    }
    if (any_inf)
        for (int64_t j = 0; j < k; j++)
            w[j] = isinf(w[j]) ? 1.0 : 0.0;
}

static int uses_distance_weights(gsb__ctx *c)
{
    return gsb__param_is(c->params, "weights", "distance");
}

/* ---- shared fit ---------------------------------------------------------- */

/* What every neighbours estimator learns: the training rows. */
static int fit_common(gsb__ctx *c)
{
    gsb__metric metric;
    GSB_TRY(gsb__neighbors_metric(c, &metric)); /* scikit-learn rejects bad metrics at fit */
    const gsb__tensor *X = gsb__in(c, "X");
    gsb__tensor copy;
    GSB_TRY(gsb__tensor_to_host(X, &copy));
    GSB_TRY(gsb__fit_set(c, "_fit_X", &copy));
    return gsb__fit_set_scalar(c, "n_samples_fit_", (double)X->rows, GSB_I64);
}

/* ---- NearestNeighbors ---------------------------------------------------- */

/* The n_neighbors option of kneighbors: absent or None means the parameter. */
static int option_k(gsb__ctx *c, int64_t *k)
{
    const json_t *v = json_object_get(c->options, "n_neighbors");
    if (!v || json_is_null(v))
        return param_k(c, k);
    int64_t val;
    if (json_is_integer(v))
        val = (int64_t)json_integer_value(v);
    else if (json_is_boolean(v)) /* a Python bool is an Integral */
        val = json_is_true(v);
    else if (json_is_real(v) && json_real_value(v) <= 0)
        val = (int64_t)json_real_value(v);
    else
        return gsb__err(GSB_EINVAL, "n_neighbors does not take <class '%s'> value, enter "
                        "integer value",
                        json_is_real(v) ? "float" : json_is_string(v) ? "str" : "object");
    if (val <= 0)
        return gsb__err(GSB_EINVAL, "Expected n_neighbors > 0. Got %lld", (long long)val);
    *k = val;
    return GSB_OK;
}

static int neighbors_fit(gsb__ctx *c) { return fit_common(c); }

static int neighbors_kneighbors(gsb__ctx *c)
{
    int64_t k = 0;
    GSB_TRY(option_k(c, &k));
    int return_distance = gsb__opt_bool(c, "return_distance", 1);
    const gsb__tensor *X = gsb__in(c, "X");
    gsb__tensor dist, idx;
    GSB_TRY(knn_search(c, X, k, &dist, &idx));
    int rc = GSB_OK;
    if (return_distance) {
        /* distances in the query's dtype (the training data's when X is absent) */
        gsb_dtype want = X ? X->dtype : fit_X_of(c)->dtype;
        if (dist.dtype != want) {
            gsb__tensor conv;
            GSB_CHECK(gsb__tensor_to_dtype(gsb__cpu_backend(), &dist, want, &conv));
            gsb__tensor_free(&dist);
            dist = conv;
        }
        GSB_CHECK(gsb__out(c, "distances", &dist)); /* consumes dist */
    }
    GSB_CHECK(gsb__out(c, "indices", &idx));
done:
    gsb__tensor_free(&dist);
    gsb__tensor_free(&idx);
    return rc;
}

/*
 * stats_kneighbors: this model's training rows are one partition of a
 * distributed index.  The n_neighbors (option) nearest of each query row (X,
 * or without X the training rows, each excluding itself) as TOPK statistics
 * (partial_stats.h) with global indices (option offset + row), padded when
 * the partition has fewer rows; the payload is each neighbour's target (the
 * classifier's class value, the regressor's y row), so that the merged
 * statistics of all partitions are the global neighbours and what they vote.
 */
static int neighbors_stats_kneighbors(gsb__ctx *c)
{
    int64_t k = 0, offset = gsb__opt_int(c, "offset", 0);
    GSB_TRY(option_k(c, &k));
    const gsb__tensor *X = gsb__in(c, "X"), *fit_X = fit_X_of(c);
    const gsb__tensor *y = gsb__attr(c, "_y"), *classes = gsb__attr(c, "classes_");
    if (!fit_X)
        return gsb__err(GSB_ENOTFITTED, "This %s instance is not fitted yet.", c->est->name);
    int64_t n_fit = fit_X->rows, nq = X ? X->rows : n_fit;
    int64_t kk = X ? n_fit : n_fit - 1, t = y ? y->cols : 0;
    kk = kk < k ? kk : k;
    gsb__tensor dist = GSB__TENSOR_NONE, idx = GSB__TENSOR_NONE, out = GSB__TENSOR_NONE;
    double *o = NULL;
    int rc;
    if (kk > 0)
        GSB_CHECK(knn_search(c, X, kk, &dist, &idx));
    GSB_CHECK(gsb__stats_alloc(GSB__STATS_TOPK, nq, k, t, &out, &o));
    double *od = o, *oi = o + nq * k, *op = o + 2 * nq * k;
    for (int64_t q = 0; q < nq; q++)
        for (int64_t r = 0; r < k; r++) {
            int64_t at = q * k + r;
            if (r >= kk) {
                od[at] = DBL_MAX;
                oi[at] = -1;
                continue;
            }
            int64_t row = ((const int64_t *)idx.data)[q * kk + r];
            od[at] = gsb__tensor_get(&dist, q * kk + r);
            oi[at] = (double)(offset + row);
            for (int64_t m = 0; m < t; m++) {
                double v = gsb__tensor_get(y, row * t + m);
                op[at * t + m] = classes ? gsb__tensor_get(classes, (int64_t)v) : v;
            }
        }
    rc = gsb__out(c, "stats", &out);
done:
    gsb__tensor_free(&dist);
    gsb__tensor_free(&idx);
    gsb__tensor_free(&out);
    return rc;
}

#define STATS_KNEIGHBORS_ROW                                                              \
    {"stats_kneighbors", neighbors_stats_kneighbors,                                      \
     {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_OPTIONAL}}, 0,                         \
     "this partition's nearest neighbours of X as global-index statistics (options "      \
     "n_neighbors, offset; docs/DASK.md)"}

/* ---- KNeighborsClassifier ------------------------------------------------ */

static int classifier_fit(gsb__ctx *c)
{
    const gsb__tensor *y = gsb__in(c, "y");
    int64_t n = y->rows, n_classes = 0;
    /* the labels are checked before the metric, as scikit-learn's fit does */
    GSB_TRY(gsb__labels_check(y));
    GSB_TRY(fit_common(c));

    gsb__tensor classes = GSB__TENSOR_NONE, codes = GSB__TENSOR_NONE;
    double *cls = NULL;
    int32_t *yi = malloc((size_t)(n > 0 ? n : 1) * sizeof *yi);
    int rc;
    if (!yi) {
        rc = gsb__err(GSB_ENOMEM, "%s: out of memory for %lld labels", c->est->name,
                      (long long)n);
        goto done;
    }
    GSB_CHECK(gsb__labels_encode(c, y, &cls, &n_classes, yi));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, n_classes, 1, &classes));
    memcpy(classes.data, cls, (size_t)n_classes * sizeof *cls);
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_I64, n, 1, &codes));
    int64_t *code = codes.data;
    for (int64_t i = 0; i < n; i++)
        code[i] = yi[i];
    gsb__tensor_as_1d(&classes);
    gsb__tensor_as_1d(&codes);
    GSB_CHECK(gsb__fit_set(c, "classes_", &classes));
    GSB_CHECK(gsb__fit_set(c, "_y", &codes));
    GSB_CHECK(gsb__fit_set_scalar(c, "outputs_2d_", 0, GSB_I64));
done:
    free(yi);
    free(cls);
    gsb__tensor_free(&classes);
    gsb__tensor_free(&codes);
    return rc;
}

/*
 * Class probabilities (nq x n_classes, float64) of the rows of X (NULL: the
 * training rows, leave-one-out): each neighbour votes for its class with its
 * weight; the votes of a row are normalised to sum to 1.
 */
static int class_proba(gsb__ctx *c, const gsb__tensor *X, gsb__tensor *proba)
{
    *proba = GSB__TENSOR_NONE;
    const gsb__tensor *classes = gsb__attr(c, "classes_");
    const gsb__tensor *codes = gsb__attr(c, "_y");
    if (!classes || !codes)
        return gsb__err(GSB_ENOTFITTED, "This %s instance is not fitted yet.", c->est->name);
    int64_t k = 0;
    GSB_TRY(param_k(c, &k));
    gsb__tensor dist = GSB__TENSOR_NONE, idx = GSB__TENSOR_NONE, p = GSB__TENSOR_NONE;
    double *w = NULL;
    int rc;
    GSB_CHECK(knn_search(c, X, k, &dist, &idx));
    int64_t nq = idx.rows, nc = classes->rows;
    GSB_CHECK(gsb__tensor_zeros(gsb__cpu_backend(), GSB_F64, nq, nc, &p));
    w = malloc((size_t)k * sizeof *w);
    if (!w) {
        rc = gsb__err(GSB_ENOMEM, "out of memory for %lld neighbour weights", (long long)k);
        goto done;
    }
    int by_distance = uses_distance_weights(c);
    const int64_t *ix = idx.data, *y = codes->data;
    double *pr = p.data;
    for (int64_t i = 0; i < nq; i++) {
        double total = 0;
        if (by_distance)
            distance_weights(&dist, i, k, w);
        for (int64_t j = 0; j < k; j++) {
            double wj = by_distance ? w[j] : 1.0;
            pr[i * nc + y[ix[i * k + j]]] += wj;
            total += wj;
        }
        /* only infinite distances (overflowing coordinates) give all-zero weights */
        if (total == 0) {
            rc = gsb__err(GSB_EINVAL,
                          "All neighbors of some sample is getting zero weights. Please "
                          "modify 'weights' to avoid this case if you are using a "
                          "user-defined function.");
            goto done;
        }
        for (int64_t j = 0; j < nc; j++)
            pr[i * nc + j] /= total;
    }
    *proba = p;
    p = GSB__TENSOR_NONE;
done:
    free(w);
    gsb__tensor_free(&p);
    gsb__tensor_free(&dist);
    gsb__tensor_free(&idx);
    return rc;
}

/* The most probable class of each row (ties: the smallest class, as argmax). */
static int class_predict(gsb__ctx *c, const gsb__tensor *X, gsb__tensor *labels)
{
    *labels = GSB__TENSOR_NONE;
    gsb__tensor proba;
    GSB_TRY(class_proba(c, X, &proba));
    const gsb__tensor *classes = gsb__attr(c, "classes_");
    int64_t nq = proba.rows, nc = proba.cols;
    int rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, nq, 1, labels);
    if (rc == GSB_OK) {
        const double *pr = proba.data, *cls = classes->data;
        double *out = labels->data;
        for (int64_t i = 0; i < nq; i++) {
            int64_t best = 0;
            for (int64_t j = 1; j < nc; j++)
                if (pr[i * nc + j] > pr[i * nc + best])
                    best = j;
            out[i] = cls[best];
        }
        gsb__tensor_as_1d(labels);
    }
    gsb__tensor_free(&proba);
    return rc;
}

static int classifier_predict(gsb__ctx *c)
{
    gsb__tensor labels;
    GSB_TRY(class_predict(c, gsb__in(c, "X"), &labels));
    return gsb__out(c, "labels", &labels);
}

static int classifier_predict_proba(gsb__ctx *c)
{
    gsb__tensor proba;
    GSB_TRY(class_proba(c, gsb__in(c, "X"), &proba));
    return gsb__out(c, "proba", &proba);
}

/* Lengths of y and sample_weight against the predictions (checked by the
 * dispatcher when X is given, here when X is absent). */
static int check_score_lengths(const gsb__tensor *y, const gsb__tensor *sw, int64_t n_pred)
{
    if (sw && (y->rows != n_pred || sw->rows != n_pred))
        return gsb__err(GSB_EINVAL,
                        "Found input variables with inconsistent numbers of samples: [%lld, "
                        "%lld, %lld]",
                        (long long)y->rows, (long long)n_pred, (long long)sw->rows);
    if (y->rows != n_pred)
        return gsb__err(GSB_EINVAL,
                        "Found input variables with inconsistent numbers of samples: [%lld, "
                        "%lld]",
                        (long long)y->rows, (long long)n_pred);
    return GSB_OK;
}

static int classifier_score(gsb__ctx *c)
{
    const gsb__tensor *y = gsb__in(c, "y"), *sw = gsb__in(c, "sample_weight");
    gsb__tensor pred;
    GSB_TRY(class_predict(c, gsb__in(c, "X"), &pred));
    double acc = 0;
    int rc = check_score_lengths(y, sw, pred.rows);
    if (rc == GSB_OK)
        rc = gsb__score_accuracy(y, &pred, sw, &acc);
    gsb__tensor_free(&pred);
    if (rc != GSB_OK)
        return rc;
    return gsb__out_scalar(c, "score", acc, GSB_F64);
}

/* ---- KNeighborsRegressor ------------------------------------------------- */

static int regressor_fit(gsb__ctx *c)
{
    GSB_TRY(fit_common(c));
    gsb__tensor copy;
    GSB_TRY(gsb__tensor_to_host(gsb__in(c, "y"), &copy)); /* keeps y's ndim */
    return gsb__fit_set(c, "_y", &copy);
}

/*
 * Predicted targets of the rows of X (NULL: leave-one-out): the mean, or the
 * 1/d-weighted mean, of the neighbours' targets; in the targets' dtype, 1-D
 * when they were.
 */
static int regress(gsb__ctx *c, const gsb__tensor *X, gsb__tensor *pred)
{
    *pred = GSB__TENSOR_NONE;
    const gsb__tensor *y = gsb__attr(c, "_y");
    if (!y)
        return gsb__err(GSB_ENOTFITTED, "This %s instance is not fitted yet.", c->est->name);
    int64_t k = 0;
    GSB_TRY(param_k(c, &k));
    gsb__tensor dist = GSB__TENSOR_NONE, idx = GSB__TENSOR_NONE, out = GSB__TENSOR_NONE;
    double *w = NULL, *acc = NULL;
    int rc;
    GSB_CHECK(knn_search(c, X, k, &dist, &idx));
    int64_t nq = idx.rows, t = y->cols;
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), y->dtype, nq, t, &out));
    w = malloc((size_t)k * sizeof *w);
    acc = malloc((size_t)t * sizeof *acc);
    if (!w || !acc) {
        rc = gsb__err(GSB_ENOMEM, "out of memory for the regression of %lld outputs",
                      (long long)t);
        goto done;
    }
    int by_distance = uses_distance_weights(c);
    const int64_t *ix = idx.data;
    for (int64_t i = 0; i < nq; i++) {
        double total = 0;
        if (by_distance)
            distance_weights(&dist, i, k, w);
        for (int64_t m = 0; m < t; m++)
            acc[m] = 0;
        for (int64_t j = 0; j < k; j++) {
            double wj = by_distance ? w[j] : 1.0;
            int64_t row = ix[i * k + j];
            for (int64_t m = 0; m < t; m++)
                acc[m] += wj * gsb__tensor_get(y, row * t + m);
            total += wj;
        }
        /* all-zero weights (infinite distances) give NaN, as scikit-learn's 0/0 */
        for (int64_t m = 0; m < t; m++)
            gsb__tensor_set(&out, i * t + m, acc[m] / total);
    }
    if (y->ndim == 1)
        gsb__tensor_as_1d(&out);
    *pred = out;
    out = GSB__TENSOR_NONE;
done:
    free(w);
    free(acc);
    gsb__tensor_free(&out);
    gsb__tensor_free(&dist);
    gsb__tensor_free(&idx);
    return rc;
}

static int regressor_predict(gsb__ctx *c)
{
    gsb__tensor pred;
    GSB_TRY(regress(c, gsb__in(c, "X"), &pred));
    return gsb__out(c, "y", &pred);
}

static int regressor_score(gsb__ctx *c)
{
    const gsb__tensor *y = gsb__in(c, "y"), *sw = gsb__in(c, "sample_weight");
    gsb__tensor pred;
    GSB_TRY(regress(c, gsb__in(c, "X"), &pred));
    double r2 = 0;
    int rc = check_score_lengths(y, sw, pred.rows);
    if (rc == GSB_OK)
        rc = gsb__score_r2(y, &pred, sw, &r2);
    gsb__tensor_free(&pred);
    if (rc != GSB_OK)
        return rc;
    return gsb__out_scalar(c, "score", r2, GSB_F64);
}

/* ---- descriptors --------------------------------------------------------- */

#define IN_QUERY {"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_OPTIONAL | GSB__IN_STREAM}
#define KNEIGHBORS_METHOD                                                                  \
    {"kneighbors", neighbors_kneighbors, {IN_QUERY}, 0,                                    \
     "distances (X's dtype) and indices (int64) of the n_neighbors nearest training rows, "\
     "ascending; X absent: of each training row, itself excluded.  Options: n_neighbors, " \
     "return_distance"}

static const gsb__method_desc nn_methods[] = {
    {"fit", neighbors_fit, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}, {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL}}, 1,
     "store the training rows (y is ignored)"},
    KNEIGHBORS_METHOD,
    STATS_KNEIGHBORS_ROW, GSB__STATS_MERGE_ROW,
    {"radius_neighbors", gsb__neighbors_radius, {{"X", GSB__IN_X | GSB__IN_OPTIONAL}}, 0,
     "the training rows within radius of each row of X as CSR: indptr (n + 1), indices and "
     "distances (float64), each row ascending by index (by distance with sort_results); X "
     "absent: of each training row, itself excluded.  Options: radius, return_distance, "
     "sort_results, working_memory (MiB per piece of neighbour lists)"},
    {0}};

static const gsb__method_desc classifier_methods[] = {
    {"fit", classifier_fit, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}, {"y", GSB__IN_LABELS}}, 1,
     "store the training rows and their class labels (1-D)"},
    KNEIGHBORS_METHOD,
    {"predict", classifier_predict, {IN_QUERY}, 0,
     "labels: the class with the largest (weighted) vote; X absent: leave-one-out"},
    {"predict_proba", classifier_predict_proba, {IN_QUERY}, 0,
     "proba (n, n_classes) float64: the normalised (weighted) votes"},
    {"score", classifier_score,
     {IN_QUERY, {"y", GSB__IN_LABELS}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     0, "mean accuracy of predict(X); X absent: leave-one-out"},
    STATS_KNEIGHBORS_ROW, GSB__STATS_MERGE_ROW,
    {0}};

static const gsb__method_desc regressor_methods[] = {
    {"fit", regressor_fit, {{"X", GSB__IN_X | GSB__IN_DEVICE_OK | GSB__IN_STREAM}, {"y", GSB__IN_Y_LIKE_X}}, 1,
     "store the training rows and targets (1-D or 2-D)"},
    KNEIGHBORS_METHOD,
    {"predict", regressor_predict, {IN_QUERY}, 0,
     "y: the (1/d-weighted) mean of the neighbours' targets; X absent: "
     "leave-one-out"},
    {"score", regressor_score,
     {IN_QUERY, {"y", GSB__IN_Y_LIKE_X}, {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     0, "R^2 of predict(X); X absent: leave-one-out"},
    STATS_KNEIGHBORS_ROW, GSB__STATS_MERGE_ROW,
    {0}};

#define A_COMMON                                                                           \
    {"n_features_in_", "number of features seen during fit"},                              \
    {"n_samples_fit_", "number of training rows"},                                         \
    {"_fit_X", "the training rows (X's dtype)"}

static const gsb__attr_desc nn_attrs[] = {A_COMMON, {0}};
static const gsb__attr_desc classifier_attrs[] = {
    A_COMMON,
    {"classes_", "sorted class labels (float64)"},
    {"outputs_2d_", "always 0: one output"},
    {"_y", "class index of each training row (int64)"},
    {0}};
static const gsb__attr_desc regressor_attrs[] = {
    A_COMMON, {"_y", "training targets (X's dtype, 1-D or 2-D)"}, {0}};

const gsb__estimator_desc gsb__est_NearestNeighbors = {
    "NearestNeighbors", "neighbors", GSB__KIND_NEIGHBORS, nn_params, nn_methods, nn_attrs,
    "Unsupervised nearest-neighbour search (brute force; effective_metric_ is derived from "
    "metric and p)"};

const gsb__estimator_desc gsb__est_KNeighborsClassifier = {
    "KNeighborsClassifier", "neighbors", GSB__KIND_CLASSIFIER, knn_params, classifier_methods,
    classifier_attrs, "Classifier voting among the k nearest neighbours (brute force)"};

const gsb__estimator_desc gsb__est_KNeighborsRegressor = {
    "KNeighborsRegressor", "neighbors", GSB__KIND_REGRESSOR, knn_params, regressor_methods,
    regressor_attrs, "Regression by the mean of the k nearest neighbours' targets (brute force)"};
