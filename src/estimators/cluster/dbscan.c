/*
 * dbscan.c - DBSCAN, as scikit-learn 1.9.1's sklearn.cluster.DBSCAN, in
 * bounded memory.
 *
 * scikit-learn computes every eps-neighbourhood at once (O(n * neighbours)
 * memory, O(n^2) in the worst case) and then labels by a depth-first search
 * (_dbscan_inner.pyx).  Here the neighbourhoods come from the backend's
 * radius_neighbors op through radius_search.c, a piece at a time:
 *   1. counts: every row's neighbour count (itself included) -> with no
 *      sample_weight, the core samples (count >= min_samples);
 *   2. when all the neighbour lists fit the working-memory budget (the
 *      call option working_memory, MiB, default 1024 as scikit-learn's) they
 *      are kept and passes 3-5 read them; otherwise each pass recomputes
 *      the neighbourhoods it needs, in pieces;
 *   3. with sample_weight: each row's weight sum -> the core samples;
 *   4. union-find over the core rows' core neighbours: the clusters;
 *   5. border rows: the cluster of a core neighbour.
 *
 * Labels identical to scikit-learn's.  Its search starts a new cluster at
 * each unlabelled core sample in index order and labels everything the
 * cluster reaches before the next starts, so for symmetric neighbourhoods:
 *   - cluster k is the connected component (of core samples, linked when
 *     within eps) whose smallest index is the k-th smallest of those
 *     minima, so the union-find keeps the smallest index as a root and
 *     numbers roots in increasing order;
 *   - a border sample (not core, within eps of a core sample) belongs to
 *     the first cluster that reaches it, the one with the smallest label
 *     among its core neighbours' clusters (whatever the order in which the
 *     search visits a neighbourhood);
 *   - everything else is noise (-1).
 * metric='precomputed' reads the n x n matrix row by row (its rows are the
 * neighbourhoods, need not be symmetric) and runs scikit-learn's search
 * itself, which for asymmetric matrices follows row i's entries from core
 * sample i only; a value v of a float32 matrix is compared as float32 with
 * eps rounded to float32 (numpy's comparison of a float32 array with a
 * Python float).  That path runs on the host whatever the device.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/profile.h"
#include "estimators/neighbors/radius_search.h"

/* ---- parameters ----------------------------------------------------------- */

static const char *const algorithm_choices[] = {"auto", "ball_tree", "kd_tree", "brute", NULL};
/* scikit-learn's sorted(set(_VALID_METRICS) | {"precomputed"}); those gsb cannot compute
 * fail at fit with GSB_EUNSUPPORTED */
static const char *const metric_choices[] = {
    "braycurtis", "canberra",    "chebyshev",      "cityblock",   "correlation",
    "cosine",     "dice",        "euclidean",      "hamming",     "haversine",
    "jaccard",    "l1",          "l2",             "mahalanobis", "manhattan",
    "matching",   "minkowski",   "nan_euclidean",  "precomputed", "rogerstanimoto",
    "russellrao", "seuclidean",  "sokalsneath",    "sqeuclidean", "wminkowski",
    "yule",       NULL};

static const gsb__param_desc dbscan_params[] = {
    {"eps", GSB__P_FLOAT, "0.5", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,
     "The maximum distance between two samples for one to be in the neighbourhood of the "
     "other."},
    {"min_samples", GSB__P_INT, "5", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Samples (or total sample weight) in a neighbourhood, the point itself included, for "
     "a core point."},
    {"metric", GSB__P_STR, "\"euclidean\"", 0, 0, 0, metric_choices,
     "supported: euclidean, l2, sqeuclidean, manhattan, l1, cityblock, chebyshev, cosine, "
     "minkowski (any p > 0), precomputed (a square distance matrix)"},
    {"metric_params", GSB__P_DICT | GSB__P_NONE, "null", 0, 0, 0, NULL,
     "must be None or an empty dict"},
    {"algorithm", GSB__P_STR, "\"auto\"", 0, 0, 0, algorithm_choices,
     "accepted for compatibility (checked against the metric as scikit-learn does): "
     "neighbourhoods come from a grid of cells (1-3 features) or brute-force tiles"},
    {"leaf_size", GSB__P_INT, "30", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "accepted for compatibility (no tree is built)"},
    {"p", GSB__P_FLOAT | GSB__P_NONE, "null", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Minkowski power (metric='minkowski'; None is 2)"},
    {"n_jobs", GSB__P_INT | GSB__P_NONE, "null", 0, 0, 0, NULL,
     "accepted for compatibility: the backend sets the parallelism"},
    {0}};

/* ---- metric ----------------------------------------------------------------- */

static int is_one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

/* What NearestNeighbors (which scikit-learn's DBSCAN builds) checks at fit. */
static int check_like_neighbors(gsb__ctx *c, const char *metric, const char *algorithm)
{
    static const char *const not_neighbors[] = {"matching", "wminkowski", NULL};
    static const char *const kd_tree_metrics[] = {"chebyshev", "cityblock", "euclidean",
                                                  "l1",        "l2",        "manhattan",
                                                  "minkowski", NULL};
    static const char *const not_ball_tree[] = {"correlation", "cosine",      "nan_euclidean",
                                                "precomputed", "sqeuclidean", "yule",
                                                NULL};
    if (!gsb__param_is_none(c->params, "p") && gsb__param_float(c->params, "p") == 0.0)
        return gsb__err(GSB_EPARAM, "The 'p' parameter of NearestNeighbors must be a float in "
                        "the range (0.0, inf] or None. Got 0 instead.");
    if (is_one_of(metric, not_neighbors))
        return gsb__err(GSB_EPARAM, "The 'metric' parameter of NearestNeighbors must be a str "
                        "among the metrics of sklearn.neighbors.VALID_METRICS, a callable or an "
                        "instance of 'sklearn.metrics._dist_metrics.DistanceMetric'. Got '%s' "
                        "instead.", metric);
    if ((strcmp(algorithm, "kd_tree") == 0 && !is_one_of(metric, kd_tree_metrics)) ||
        (strcmp(algorithm, "ball_tree") == 0 && is_one_of(metric, not_ball_tree)))
        return gsb__err(GSB_EINVAL,
                        "Metric '%s' not valid. Use sorted(sklearn.neighbors.VALID_METRICS"
                        "['%s']) to get valid options. Metric can also be a callable function.",
                        metric, algorithm);
    return GSB_OK;
}

/* The metric as the op computes it; *precomputed set for a distance matrix. */
static int resolve_metric(gsb__ctx *c, gsb__metric *out, double *p, int *precomputed)
{
    const json_t *mp = json_object_get(c->params, "metric_params");
    if (mp && !json_is_null(mp) && (!json_is_object(mp) || json_object_size(mp) > 0))
        return gsb__err(GSB_EUNSUPPORTED, "DBSCAN: metric_params is not supported (got a "
                        "non-empty dict); pass the metric and p parameters instead");
    const char *metric = gsb__param_str(c->params, "metric");
    const char *algorithm = gsb__param_str(c->params, "algorithm");
    if (!metric || !algorithm)
        return gsb__err(GSB_EINTERNAL, "DBSCAN: metric or algorithm parameter missing");
    GSB_TRY(check_like_neighbors(c, metric, algorithm));
    static const char *const euclidean[] = {"euclidean", "l2", NULL};
    static const char *const manhattan[] = {"manhattan", "l1", "cityblock", NULL};
    *precomputed = strcmp(metric, "precomputed") == 0;
    *p = 2.0;
    if (*precomputed || is_one_of(metric, euclidean))
        *out = GSB__METRIC_EUCLIDEAN;
    else if (is_one_of(metric, manhattan))
        *out = GSB__METRIC_MANHATTAN;
    else if (strcmp(metric, "sqeuclidean") == 0)
        *out = GSB__METRIC_SQEUCLIDEAN;
    else if (strcmp(metric, "cosine") == 0)
        *out = GSB__METRIC_COSINE;
    else if (strcmp(metric, "chebyshev") == 0)
        *out = GSB__METRIC_CHEBYSHEV;
    else if (strcmp(metric, "minkowski") == 0) {
        if (gsb__param_is_none(c->params, "p"))
            return gsb__err(GSB_EINVAL, "DBSCAN: metric='minkowski' needs p (scikit-learn "
                            "fails on p=None here too); pass p=2 for euclidean");
        *p = gsb__param_float(c->params, "p");
        *out = *p == 1.0 ? GSB__METRIC_MANHATTAN
               : *p == 2.0 ? GSB__METRIC_EUCLIDEAN
                           : GSB__METRIC_MINKOWSKI;
    } else
        return gsb__err(GSB_EUNSUPPORTED,
                        "DBSCAN: metric='%s' is not supported; supported metrics: 'euclidean', "
                        "'l2', 'sqeuclidean', 'manhattan', 'l1', 'cityblock', 'chebyshev', "
                        "'cosine', 'minkowski', 'precomputed'",
                        metric);
    return GSB_OK;
}

/* The working-memory budget in bytes: option working_memory (MiB), scikit-learn's 1024. */
static int64_t budget_bytes(gsb__ctx *c)
{
    const json_t *v = json_object_get(c->options, "working_memory");
    double mib = json_is_number(v) ? json_number_value(v) : 1024.0;
    if (!(mib > 0) || mib > 1e12)
        mib = 1024.0;
    return (int64_t)(mib * 1048576.0);
}

/* ---- union-find (roots are the smallest index of their set) ----------------- */

static int64_t uf_find(int64_t *parent, int64_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static void uf_union(int64_t *parent, int64_t a, int64_t b)
{
    a = uf_find(parent, a);
    b = uf_find(parent, b);
    if (a < b)
        parent[b] = a;
    else if (b < a)
        parent[a] = b;
}

/* ---- the clustering state ------------------------------------------------------ */

typedef struct db_state {
    int64_t n;
    double min_samples;
    const double *w;        /* sample weights (host, float64) or NULL */
    unsigned char *core;
    int64_t *parent;        /* union-find over the core rows */
    int64_t *labels;
    int64_t *counts;
    /* the kept neighbour lists (by row number), when they fit the budget */
    int64_t *kept_ptr, *kept_idx;
} db_state;

/* visitor: weight sums -> core flags */
static int visit_core_weights(void *data, const gsb__rpiece *pc)
{
    db_state *st = data;
    for (int64_t k = 0; k < pc->n; k++) {
        double s = 0.0;
        for (int64_t t = pc->indptr[k]; t < pc->indptr[k + 1]; t++)
            s += st->w[pc->idx[t]];
        st->core[pc->rows[k]] = s >= st->min_samples;
    }
    return GSB_OK;
}

/* visitor: a core row joins its core neighbours */
static int visit_union(void *data, const gsb__rpiece *pc)
{
    db_state *st = data;
    for (int64_t k = 0; k < pc->n; k++) {
        int64_t i = pc->rows[k];
        for (int64_t t = pc->indptr[k]; t < pc->indptr[k + 1]; t++)
            if (st->core[pc->idx[t]])
                uf_union(st->parent, i, pc->idx[t]);
    }
    return GSB_OK;
}

/* visitor: a non-core row takes the smallest label among its core neighbours */
static int visit_border(void *data, const gsb__rpiece *pc)
{
    db_state *st = data;
    for (int64_t k = 0; k < pc->n; k++) {
        int64_t best = -1;
        for (int64_t t = pc->indptr[k]; t < pc->indptr[k + 1]; t++) {
            int64_t j = pc->idx[t];
            if (st->core[j] && (best < 0 || st->labels[j] < best))
                best = st->labels[j];
        }
        st->labels[pc->rows[k]] = best;
    }
    return GSB_OK;
}

/* visitor: keep the lists (kept_ptr by row number is already laid out) */
static int visit_keep(void *data, const gsb__rpiece *pc)
{
    db_state *st = data;
    for (int64_t k = 0; k < pc->n; k++) {
        int64_t len = pc->indptr[k + 1] - pc->indptr[k];
        memcpy(st->kept_idx + st->kept_ptr[pc->rows[k]], pc->idx + pc->indptr[k],
               (size_t)len * sizeof(int64_t));
    }
    return GSB_OK;
}

/* Run a visitor over the kept lists of the rows with select[i] == want. */
static int visit_kept(db_state *st, const unsigned char *select, int want, gsb__rvisit fn)
{
    for (int64_t i = 0; i < st->n; i++) {
        if (select && !select[i] != !want)
            continue;
        int64_t ptr[2] = {0, st->kept_ptr[i + 1] - st->kept_ptr[i]};
        gsb__rpiece pc = {1, &i, ptr, st->kept_idx + st->kept_ptr[i], NULL};
        GSB_TRY(fn(st, &pc));
    }
    return GSB_OK;
}

/* Labels of the core rows: components numbered by their smallest index. */
static void label_cores(db_state *st)
{
    int64_t next = 0;
    for (int64_t i = 0; i < st->n; i++) {
        if (!st->core[i]) {
            st->labels[i] = -1;
            continue;
        }
        int64_t r = uf_find(st->parent, i);
        st->labels[i] = r == i ? next++ : st->labels[r];
    }
}

/* Stages 2-5 on the neighbourhoods of a search (counts already in st). */
static int cluster_search(gsb__rsearch *s, db_state *st, int64_t budget)
{
    int64_t total = 0;
    for (int64_t i = 0; i < st->n; i++)
        total += st->counts[i];
    unsigned char *noncore = NULL;
    int rc = GSB_OK;
    int keep = total <= (budget - st->n * (int64_t)sizeof(int64_t)) / (int64_t)sizeof(int64_t);
    if (keep) {
        st->kept_ptr = gsb__alloc_array(st->n + 1, sizeof(int64_t));
        st->kept_idx = gsb__alloc_array(total, sizeof(int64_t));
        keep = st->kept_ptr && st->kept_idx; /* no room after all: recompute instead */
    }
    if (keep) {
        st->kept_ptr[0] = 0;
        for (int64_t i = 0; i < st->n; i++)
            st->kept_ptr[i + 1] = st->kept_ptr[i] + st->counts[i];
        GSB_CHECK(gsb__rsearch_self_visit(s, st->counts, NULL, 0, visit_keep, st));
        gsb__profile_mark("neighbourhoods kept");
        if (st->w)
            GSB_CHECK(visit_kept(st, NULL, 1, visit_core_weights));
        GSB_CHECK(visit_kept(st, st->core, 1, visit_union));
        label_cores(st);
        gsb__profile_mark("core components");
        GSB_CHECK(visit_kept(st, st->core, 0, visit_border));
        gsb__profile_mark("border samples");
        goto done;
    }
    if (st->w)
        GSB_CHECK(gsb__rsearch_self_visit(s, st->counts, NULL, 0, visit_core_weights, st));
    noncore = gsb__alloc_array(st->n, 1);
    if (!noncore) {
        rc = gsb__err(GSB_ENOMEM, "DBSCAN: out of memory for %lld flags", (long long)st->n);
        goto done;
    }
    for (int64_t i = 0; i < st->n; i++)
        noncore[i] = !st->core[i];
    GSB_CHECK(gsb__rsearch_self_visit(s, st->counts, st->core, 0, visit_union, st));
    label_cores(st);
    GSB_CHECK(gsb__rsearch_self_visit(s, st->counts, noncore, 0, visit_border, st));
done:
    free(noncore);
    return rc;
}

/* ---- metric='precomputed': scikit-learn's search over the matrix's rows ------- */

#define PRE_ROW(T)                                                                       \
    static int pre_near_##T(const void *D, int64_t n, int64_t i, int64_t j, double eps)  \
    {                                                                                    \
        return ((const T *)D)[i * n + j] <= (T)eps;                                      \
    }
PRE_ROW(float)
PRE_ROW(double)
#undef PRE_ROW

static int pre_near(const gsb__tensor *D, int64_t i, int64_t j, double eps)
{
    return D->dtype == GSB_F32 ? pre_near_float(D->data, D->rows, i, j, eps)
                               : pre_near_double(D->data, D->rows, i, j, eps);
}

static int pre_check(const gsb__tensor *D)
{
    for (int64_t i = 0; i < D->rows * D->cols; i++)
        if (gsb__tensor_get(D, i) < 0)
            return gsb__err(GSB_EINVAL, "Negative values in data passed to X.");
    if (D->rows != D->cols)
        return gsb__err(GSB_EINVAL, "Precomputed matrix must be square. Input is a %lldx%lld "
                        "matrix.", (long long)D->rows, (long long)D->cols);
    return GSB_OK;
}

static int cluster_precomputed(const gsb__tensor *D, double eps, db_state *st)
{
    int64_t n = st->n;
#pragma omp parallel for schedule(dynamic, 16) if (n > 512)
    for (int64_t i = 0; i < n; i++) {
        double s = 0.0;
        for (int64_t j = 0; j < n; j++)
            if (pre_near(D, i, j, eps))
                s += st->w ? st->w[j] : 1.0;
        st->core[i] = s >= st->min_samples;
    }
    /* the stack holds each row at most once: a row is labelled when pushed */
    int64_t *stack = gsb__alloc_array(n, sizeof *stack);
    if (!stack)
        return gsb__err(GSB_ENOMEM, "DBSCAN: out of memory for a stack of %lld rows",
                        (long long)n);
    for (int64_t i = 0; i < n; i++)
        st->labels[i] = -1;
    int64_t next = 0;
    for (int64_t i = 0; i < n; i++) {
        if (st->labels[i] != -1 || !st->core[i])
            continue;
        int64_t top = 0;
        st->labels[i] = next;
        stack[top++] = i;
        while (top > 0) {
            int64_t x = stack[--top];
            for (int64_t j = 0; j < n; j++)
                if (st->labels[j] == -1 && pre_near(D, x, j, eps)) {
                    st->labels[j] = next;
                    if (st->core[j])
                        stack[top++] = j;
                }
        }
        next++;
    }
    free(stack);
    return GSB_OK;
}

/* ---- fit ------------------------------------------------------------------------- */

/* labels_, core_sample_indices_ and components_ from the state. */
static int set_attrs(gsb__ctx *c, const gsb__tensor *X, const db_state *st)
{
    int64_t n = st->n, ncore = 0;
    for (int64_t i = 0; i < n; i++)
        ncore += st->core[i] != 0;
    gsb__tensor lab = GSB__TENSOR_NONE, ci = GSB__TENSOR_NONE, comp = GSB__TENSOR_NONE;
    const gsb__backend *cpu = gsb__cpu_backend();
    int rc;
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_I64, n, 1, &lab));
    memcpy(lab.data, st->labels, (size_t)n * sizeof(int64_t));
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_I64, ncore, 1, &ci));
    /* scikit-learn's np.empty((0, n_features)) is float64 */
    GSB_CHECK(gsb__tensor_alloc(cpu, ncore ? X->dtype : GSB_F64, ncore, X->cols, &comp));
    size_t row = (size_t)X->cols * gsb_dtype_size(X->dtype);
    for (int64_t i = 0, k = 0; i < n; i++)
        if (st->core[i]) {
            ((int64_t *)ci.data)[k] = i;
            memcpy((char *)comp.data + (size_t)k * row, (const char *)X->data + (size_t)i * row,
                   row);
            k++;
        }
    gsb__tensor_as_1d(&lab);
    gsb__tensor_as_1d(&ci);
    GSB_CHECK(gsb__fit_set(c, "labels_", &lab));
    GSB_CHECK(gsb__fit_set(c, "core_sample_indices_", &ci));
    GSB_CHECK(gsb__fit_set(c, "components_", &comp));
done:
    gsb__tensor_free(&lab);
    gsb__tensor_free(&ci);
    gsb__tensor_free(&comp);
    return rc;
}

static void state_free(db_state *st)
{
    free(st->core);
    free(st->parent);
    free(st->labels);
    free(st->counts);
    free(st->kept_ptr);
    free(st->kept_idx);
}

static int dbscan_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *sw = gsb__in(c, "sample_weight");
    gsb__metric metric = GSB__METRIC_EUCLIDEAN;
    double p = 2.0;
    int precomputed = 0;
    GSB_TRY(resolve_metric(c, &metric, &p, &precomputed));
    if (precomputed)
        GSB_TRY(pre_check(X));
    if (sw) { /* scikit-learn's _check_sample_weight */
        int64_t nz = 0;
        for (int64_t i = 0; i < sw->rows && !nz; i++)
            nz = ((const double *)sw->data)[i] != 0.0;
        if (!nz && sw->rows > 0)
            return gsb__err(GSB_EINVAL,
                            "Sample weights must contain at least one non-zero number.");
    }
    double eps = gsb__param_float(c->params, "eps");
    db_state st = {0};
    gsb__rsearch s = {0};
    int rc = GSB_OK;
    st.n = X->rows;
    st.min_samples = (double)gsb__param_int(c->params, "min_samples");
    st.w = sw ? sw->data : NULL;
    st.core = gsb__calloc_array(st.n, 1);
    st.labels = gsb__alloc_array(st.n, sizeof(int64_t));
    st.parent = gsb__alloc_array(st.n, sizeof(int64_t));
    if (!st.core || !st.labels || !st.parent) {
        rc = gsb__err(GSB_ENOMEM, "DBSCAN: out of memory for %lld rows", (long long)st.n);
        goto done;
    }
    for (int64_t i = 0; i < st.n; i++)
        st.parent[i] = i;
    if (precomputed) {
        GSB_CHECK(cluster_precomputed(X, eps, &st));
    } else {
        int64_t budget = budget_bytes(c);
        st.counts = gsb__alloc_array(st.n, sizeof(int64_t));
        if (!st.counts) {
            rc = gsb__err(GSB_ENOMEM, "DBSCAN: out of memory for %lld counts", (long long)st.n);
            goto done;
        }
        GSB_CHECK(gsb__rsearch_open(&s, c, c->be, X, metric, p, eps, budget));
        gsb__profile_mark("search set up");
        GSB_CHECK(gsb__rsearch_self_counts(&s, st.counts));
        gsb__profile_mark("neighbour counts");
        for (int64_t i = 0; i < st.n; i++)
            st.core[i] = (double)st.counts[i] >= st.min_samples;
        GSB_CHECK(cluster_search(&s, &st, budget));
    }
    GSB_CHECK(set_attrs(c, X, &st));
done:
    gsb__rsearch_close(&s);
    state_free(&st);
    return rc;
}

static int dbscan_fit_predict(gsb__ctx *c)
{
    GSB_TRY(dbscan_fit(c));
    gsb__tensor labels;
    GSB_TRY(gsb__tensor_to_host(gsb__attr(c, "labels_"), &labels));
    return gsb__out(c, "labels", &labels);
}

/* ---- descriptor -------------------------------------------------------------------- */

#define DBSCAN_INPUTS                                                                    \
    {{"X", GSB__IN_X},                                                                   \
     {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL},                                         \
     {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL | GSB__IN_SIGNED}}

static const gsb__method_desc dbscan_methods[] = {
    {"fit", dbscan_fit, DBSCAN_INPUTS, 1,
     "cluster X (n x d features, or an n x n distance matrix with metric='precomputed'); y "
     "is ignored; sample_weight may be negative.  Option working_memory: MiB for neighbour "
     "lists (default 1024)"},
    {"fit_predict", dbscan_fit_predict, DBSCAN_INPUTS, 1, "fit, then labels: labels_"},
    {0}};

static const gsb__attr_desc dbscan_attrs[] = {
    {"labels_", "cluster of each sample (int64), -1 for noise"},
    {"core_sample_indices_", "indices of the core samples (int64, ascending)"},
    {"components_", "copy of each core sample (X's dtype; (0, n_features) float64 if none)"},
    {"n_features_in_", "number of features seen during fit"},
    {0}};

const gsb__estimator_desc gsb__est_DBSCAN = {
    "DBSCAN", "cluster", GSB__KIND_CLUSTERER, dbscan_params, dbscan_methods, dbscan_attrs,
    "Density-based clustering (scikit-learn's labels), neighbourhoods in bounded memory"};
