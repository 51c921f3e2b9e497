/*
 * umap.c - UMAP, as umap-learn 0.5's umap.UMAP (and cuML's cuml.UMAP).
 *
 * fit: the exact k nearest neighbours (self included) through the backend's
 * topk op (solvers/knn_graph_umap.c); the fuzzy simplicial set and, with a
 * categorical y, its intersection with the labels
 * (solvers/fuzzy_simplicial.c); a and b fitted to min_dist and spread; the
 * initial layout (spectral, random, pca or an array) and the SGD epochs on
 * the backend's umap_sgd_epoch op (umap_embed.c).  transform places new
 * points against the training embedding as umap-learn does: their
 * neighbours in the training data, a weighted mean of those neighbours'
 * positions, then n_epochs / 3 epochs (100 or 30 by default) moving only
 * the new points.
 *
 * Where it differs from umap-learn (docs/PARITY.md):
 *   - the neighbours are exact at every size (umap-learn: NN-descent above
 *     4096 rows); float32 throughout, as umap-learn converts;
 *   - the SGD is the deterministic form of backend/umap_sgd.h (all steps
 *     of an epoch from the epoch's starting positions, cuML's
 *     deterministic mode): parallel and reproducible with random_state on
 *     the CPU backend at any thread count; on the GPU a random_state of
 *     None runs cuML's lock-free (Hogwild) updates;
 *   - random streams are gsb's, so random_state gives other numbers than
 *     umap-learn's;
 *   - n_neighbors greater than the number of samples is an error
 *     (umap-learn warns and truncates); equal takes every sample;
 *   - graph_ holds the fuzzy set before the weak edges are dropped for the
 *     SGD (umap-learn's graph_ keeps those as explicit zeros).
 *
 * Fitted state: embedding_ (float32), "_raw_data" (the training rows,
 * float32, for transform), the graph as CSR arrays "_graph_indptr",
 * "_graph_indices", "_graph_data" (read by the "graph" method, which the
 * Python class turns into graph_) and the scalars "_a", "_b".
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/estimator.h"
#include "core/profile.h"
#include "core/rng.h"
#include "core/warn.h"
#include "estimators/manifold/umap_embed.h"
#include "solvers/fuzzy_simplicial.h"
#include "solvers/knn_graph_umap.h"

/* ---- parameters ------------------------------------------------------------- */

/* umap-learn's named distances: every name is a valid value; those the
 * neighbour search cannot compute fail at fit with GSB_EUNSUPPORTED. */
static const char *const metric_choices[] = {
    "euclidean", "l2", "manhattan", "taxicab", "l1", "chebyshev", "linfinity", "linfty",
    "linf", "minkowski", "poincare", "seuclidean", "standardised_euclidean", "wminkowski",
    "weighted_minkowski", "mahalanobis", "canberra", "cosine", "correlation", "hellinger",
    "haversine", "braycurtis", "ll_dirichlet", "symmetric_kl", "hamming", "jaccard", "dice",
    "matching", "kulsinski", "rogerstanimoto", "russellrao", "sokalsneath", "sokalmichener",
    "yule", "precomputed", NULL};
static const char *const target_metric_choices[] = {
    "categorical", "euclidean", "l2", "manhattan", "l1", "cosine", "correlation", "hamming",
    "jaccard", "ordinal", "count", "string", NULL};
static const char *const init_choices[] = {"spectral", "random", "pca", "tswspectral", NULL};
static const char *const output_metric_choices[] = {"euclidean", "l2", NULL};
static const char *const transform_mode_choices[] = {"embedding", "graph", NULL};
static const char *const build_algo_choices[] = {"auto", "brute_force_knn", "nn_descent", NULL};

#define COMPAT "accepted for compatibility"

static const gsb__param_desc umap_params[] = {
    {"n_neighbors", GSB__P_INT, "15", 2, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Size of the local neighbourhood (the point itself included) used to learn the "
     "manifold; at most n_samples."},
    {"n_components", GSB__P_INT, "2", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Dimension of the embedding."},
    {"metric", GSB__P_STR, "\"euclidean\"", 0, 0, 0, metric_choices,
     "Input distance; supported: euclidean (l2), manhattan (l1, taxicab), cosine, "
     "correlation."},
    {"metric_kwds", GSB__P_DICT | GSB__P_NONE, "null", 0, 0, 0, NULL,
     "Must be None or empty (the supported metrics take no arguments)."},
    {"output_metric", GSB__P_STR, "\"euclidean\"", 0, 0, 0, output_metric_choices,
     "Distance of the embedding space: euclidean only."},
    {"output_metric_kwds", GSB__P_DICT | GSB__P_NONE, "null", 0, 0, 0, NULL, COMPAT},
    {"n_epochs", GSB__P_INT | GSB__P_NONE, "null", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "SGD epochs; None: 500 up to 10000 samples, 200 above."},
    {"learning_rate", GSB__P_FLOAT, "1.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Initial SGD learning rate (decays linearly to 0)."},
    {"init", GSB__P_STR, "\"spectral\"", 0, 0, 0, init_choices,
     "'spectral' (normalised Laplacian eigenvectors; 'tswspectral' is the same), 'random', "
     "'pca', or an (n_samples, n_components) array passed as the fit input 'init'."},
    {"min_dist", GSB__P_FLOAT, "0.1", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Smallest distance between embedded points; <= spread."},
    {"spread", GSB__P_FLOAT, "1.0", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,
     "Scale of the embedded points' spread."},
    {"low_memory", GSB__P_BOOL, "true", 0, 0, 0, NULL, COMPAT},
    {"n_jobs", GSB__P_INT, "-1", 0, 0, 0, NULL, COMPAT " (the backend sets the parallelism)"},
    {"set_op_mix_ratio", GSB__P_FLOAT, "1.0", 0, 1, GSB__CLOSED_BOTH, NULL,
     "1: fuzzy union of the local sets, 0: fuzzy intersection, between: a mix."},
    {"local_connectivity", GSB__P_FLOAT, "1.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Nearest neighbours assumed connected at full strength."},
    {"repulsion_strength", GSB__P_FLOAT, "1.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Weight of the negative samples."},
    {"negative_sample_rate", GSB__P_INT, "5", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Negative samples per positive sample."},
    {"transform_queue_size", GSB__P_FLOAT, "4.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     COMPAT " (transform's search is exact)"},
    {"a", GSB__P_FLOAT | GSB__P_NONE, "null", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,
     "Curve parameter a; None: fitted with b to min_dist and spread."},
    {"b", GSB__P_FLOAT | GSB__P_NONE, "null", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,
     "Curve parameter b; None: fitted with a to min_dist and spread."},
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH, NULL,
     "Seed of the initial layout and negative sampling (gsb's streams, reproducible on the "
     "CPU backend; None on the GPU: lock-free updates)."},
    {"angular_rp_forest", GSB__P_BOOL, "false", 0, 0, 0, NULL, COMPAT},
    {"target_n_neighbors", GSB__P_INT, "-1", -1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Neighbours of a non-categorical target (-1: n_neighbors); " COMPAT},
    {"target_metric", GSB__P_STR, "\"categorical\"", 0, 0, 0, target_metric_choices,
     "Distance of y in supervised UMAP: 'categorical' (labels; -1 is unlabelled)."},
    {"target_metric_kwds", GSB__P_DICT | GSB__P_NONE, "null", 0, 0, 0, NULL, COMPAT},
    {"target_weight", GSB__P_FLOAT, "0.5", 0, 1, GSB__CLOSED_BOTH, NULL,
     "Weight of y against X in supervised UMAP (1: labels separate fully)."},
    {"transform_seed", GSB__P_INT, "42", 0, 4294967295.0, GSB__CLOSED_BOTH, NULL,
     "Seed of transform's negative sampling."},
    {"transform_mode", GSB__P_STR, "\"embedding\"", 0, 0, 0, transform_mode_choices,
     "'embedding' (the only mode supported)."},
    {"force_approximation_algorithm", GSB__P_BOOL, "false", 0, 0, 0, NULL,
     COMPAT " (the search is exact)"},
    {"verbose", GSB__P_INT | GSB__P_BOOL, "false", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Print the epochs when no progress callback is set."},
    {"tqdm_kwds", GSB__P_DICT | GSB__P_NONE, "null", 0, 0, 0, NULL, COMPAT},
    {"unique", GSB__P_BOOL, "false", 0, 0, 0, NULL, "False only."},
    {"densmap", GSB__P_BOOL, "false", 0, 0, 0, NULL, "False only (densMAP is not provided)."},
    {"dens_lambda", GSB__P_FLOAT, "2.0", 0, INFINITY, GSB__CLOSED_LEFT, NULL, COMPAT},
    {"dens_frac", GSB__P_FLOAT, "0.3", 0, 1, GSB__CLOSED_BOTH, NULL, COMPAT},
    {"dens_var_shift", GSB__P_FLOAT, "0.1", 0, INFINITY, GSB__CLOSED_LEFT, NULL, COMPAT},
    {"output_dens", GSB__P_BOOL, "false", 0, 0, 0, NULL, "False only."},
    {"disconnection_distance", GSB__P_FLOAT | GSB__P_NONE, "null", 0, INFINITY,
     GSB__CLOSED_NEITHER, NULL,
     "Neighbours at least this far are dropped; None: 2 for cosine and correlation, "
     "else none."},
    {"hash_input", GSB__P_BOOL, "false", 0, 0, 0, NULL, "cuML's; " COMPAT},
    {"build_algo", GSB__P_STR, "\"auto\"", 0, 0, 0, build_algo_choices,
     "cuML's; " COMPAT " (the search is exact)"},
    {0}};

/* ---- settings read from the parameters ------------------------------------------ */

typedef struct umap_cfg {
    int64_t n_neighbors, dim, n_epochs; /* n_epochs -1: None */
    gsb__knn_metric metric;
    double disconnection;
    double learning_rate, min_dist, spread, mix, local_connectivity, gamma, neg_rate;
    double target_weight;
    gsb__umap_init_kind init;
} umap_cfg;

static int empty_dict(const gsb__ctx *c, const char *name)
{
    const json_t *v = json_object_get(c->params, name);
    return !v || json_is_null(v) || (json_is_object(v) && json_object_size(v) == 0);
}

/* Options umap-learn has that this UMAP does not provide. */
static int check_unsupported(const gsb__ctx *c)
{
    static const char *const off[] = {"unique", "densmap", "output_dens", NULL};
    for (const char *const *p = off; *p; p++)
        if (gsb__param_bool(c->params, *p))
            return gsb__err(GSB_EUNSUPPORTED, "UMAP: %s=True is not supported", *p);
    if (!empty_dict(c, "metric_kwds"))
        return gsb__err(GSB_EUNSUPPORTED, "UMAP: metric_kwds must be None or empty (the "
                        "supported metrics take no arguments)");
    if (gsb__param_is(c->params, "transform_mode", "graph"))
        return gsb__err(GSB_EUNSUPPORTED, "UMAP: transform_mode='graph' is not supported; "
                        "read graph_ after fit");
    return GSB_OK;
}

static int read_cfg(gsb__ctx *c, umap_cfg *g)
{
    const json_t *P = c->params;
    GSB_TRY(check_unsupported(c));
    GSB_TRY(gsb__knn_metric_parse(gsb__param_str(P, "metric"), "UMAP", &g->metric));
    g->n_neighbors = gsb__param_int(P, "n_neighbors");
    g->dim = gsb__param_int(P, "n_components");
    g->n_epochs = gsb__param_is_none(P, "n_epochs") ? -1 : gsb__param_int(P, "n_epochs");
    g->learning_rate = gsb__param_float(P, "learning_rate");
    g->min_dist = gsb__param_float(P, "min_dist");
    g->spread = gsb__param_float(P, "spread");
    g->mix = gsb__param_float(P, "set_op_mix_ratio");
    g->local_connectivity = gsb__param_float(P, "local_connectivity");
    g->gamma = gsb__param_float(P, "repulsion_strength");
    g->neg_rate = (double)gsb__param_int(P, "negative_sample_rate");
    g->target_weight = gsb__param_float(P, "target_weight");
    if (g->min_dist > g->spread)
        return gsb__err(GSB_EINVAL, "min_dist must be less than or equal to spread (got "
                        "min_dist=%g, spread=%g)", g->min_dist, g->spread);
    int64_t tnn = gsb__param_int(P, "target_n_neighbors");
    if (tnn < 2 && tnn != -1)
        return gsb__err(GSB_EINVAL, "target_n_neighbors must be greater than 1 (or -1)");
    if (gsb__param_is_none(P, "disconnection_distance"))
        g->disconnection = g->metric == GSB__KNN_COSINE || g->metric == GSB__KNN_CORRELATION
                               ? 2.0 : INFINITY;
    else
        g->disconnection = gsb__param_float(P, "disconnection_distance");
    g->init = gsb__param_is(P, "init", "random") ? GSB__UMAP_INIT_RANDOM
              : gsb__param_is(P, "init", "pca")  ? GSB__UMAP_INIT_PCA
                                                 : GSB__UMAP_INIT_SPECTRAL;
    return GSB_OK;
}

/* ---- the neighbour graph ------------------------------------------------------------- */

/* umap-learn drops neighbours at or beyond the disconnection distance. */
static void disconnect(gsb__tensor *dist, gsb__tensor *idx, double limit)
{
    float *d = dist->data;
    int64_t *ix = idx->data;
    for (int64_t i = 0; i < dist->rows * dist->cols; i++)
        if (d[i] >= limit) {
            d[i] = INFINITY;
            ix[i] = -1;
        }
}

/* kNN distances and indices -> memberships (CSR, rows x cols). */
static int memberships(const gsb__tensor *dist, const gsb__tensor *idx, int64_t cols,
                       double target, double local_connectivity, int bipartite, gsb__fcsr *out)
{
    const int64_t n = dist->rows, k = dist->cols;
    double *sigma = gsb__alloc_array(n, sizeof *sigma), *rho = gsb__alloc_array(n, sizeof *rho);
    int rc;
    if (!sigma || !rho) {
        rc = gsb__err(GSB_ENOMEM, "UMAP: out of memory for %lld rows", (long long)n);
        goto done;
    }
    gsb__smooth_knn_dist(dist->data, n, k, target, local_connectivity, sigma, rho);
    gsb__profile_mark("fuzzy: smooth_knn_dist (rho, sigma)");
    rc = gsb__membership_csr(dist->data, idx->data, n, k, cols, sigma, rho, bipartite, out);
done:
    free(sigma);
    free(rho);
    return rc;
}

/* X in float32 on the host (umap-learn works in float32): a view when it is. */
static int to_f32(const gsb__tensor *X, gsb__tensor *out)
{
    return gsb__tensor_to_dtype(gsb__cpu_backend(), X, GSB_F32, out);
}

/* The fuzzy simplicial set of the training rows, and its labelled intersection. */
static int fit_graph(gsb__ctx *c, const umap_cfg *g, const gsb__tensor *X32, gsb__fcsr *G)
{
    gsb__tensor dist = GSB__TENSOR_NONE, idx = GSB__TENSOR_NONE;
    gsb__fcsr A = {0};
    int rc;
    GSB_CHECK(gsb__knn_graph_exact(c, X32, NULL, g->n_neighbors, g->metric, &dist, &idx));
    gsb__profile_mark("knn graph");
    disconnect(&dist, &idx, g->disconnection);
    GSB_CHECK(memberships(&dist, &idx, X32->rows, log2((double)g->n_neighbors),
                          g->local_connectivity, 0, &A));
    gsb__profile_mark("fuzzy: memberships");
    GSB_CHECK(gsb__fuzzy_union(&A, g->mix, G));
    gsb__profile_mark("fuzzy: union with the transpose");
    const gsb__tensor *y = gsb__in(c, "y");
    if (y) {
        if (!gsb__param_is(c->params, "target_metric", "categorical")) {
            rc = gsb__err(GSB_EUNSUPPORTED, "UMAP: target_metric='%s' is not supported; "
                          "supervised UMAP takes target_metric='categorical'",
                          gsb__param_str(c->params, "target_metric"));
            goto done;
        }
        double far = g->target_weight < 1.0 ? 2.5 * (1.0 / (1.0 - g->target_weight)) : 1e12;
        GSB_CHECK(gsb__fuzzy_categorical(G, y->data, far, 1.0));
    }
done:
    gsb__tensor_free(&dist);
    gsb__tensor_free(&idx);
    gsb__fcsr_free(&A);
    return rc;
}

/* ---- fit ----------------------------------------------------------------------------------- */

static int64_t default_epochs(int64_t n) { return n <= 10000 ? 500 : 200; }

/* The layout of a fit: initial layout and SGD on the pruned graph. */
static int fit_layout(gsb__ctx *c, const umap_cfg *g, const gsb__tensor *X32, const gsb__fcsr *G,
                      double a, double b, float *emb, int64_t *spectral_failures)
{
    const int64_t n = X32->rows;
    const int64_t n_epochs = g->n_epochs < 0 ? default_epochs(n) : g->n_epochs;
    gsb__rng rng;
    gsb__rng_seed_params(&rng, c->params);
    gsb__fcsr P = {0};
    GSB_TRY(gsb__umap_prune(G, (double)(n_epochs > 10 ? n_epochs : default_epochs(n)), &P));
    gsb__profile_mark("prune");
    const gsb__tensor *array = gsb__in(c, "init");
    gsb__umap_init in = {array ? GSB__UMAP_INIT_ARRAY : g->init, array, X32, g->metric, g->dim,
                         &rng, 0};
    int rc;
    GSB_CHECK(gsb__umap_initial_layout(c, &P, &in, emb));
    gsb__profile_mark("initial layout (the rest: noise, scaling)");
    *spectral_failures = in.spectral_failures;
    gsb__umap_sgd_run r = {n_epochs, a, b, g->gamma, g->learning_rate, g->neg_rate, 2.0,
                           gsb__rng_next(&rng), gsb__param_is_none(c->params, "random_state"),
                           "epoch"};
    GSB_CHECK(gsb__umap_optimize(c, &P, emb, NULL, g->dim, &r));
    gsb__profile_mark("SGD epochs");
done:
    gsb__fcsr_free(&P);
    return rc;
}

/* Points without any edge left in the graph are NaN, as umap-learn leaves them. */
static void mark_disconnected(const gsb__fcsr *G, float *emb, int64_t dim)
{
    for (int64_t i = 0; i < G->rows; i++)
        if (G->indptr[i + 1] == G->indptr[i])
            for (int64_t d = 0; d < dim; d++)
                emb[i * dim + d] = NAN;
}

static int check_fit_inputs(const umap_cfg *g, const gsb__tensor *X, const gsb__tensor *init)
{
    if (g->n_neighbors > X->rows)
        return gsb__err(GSB_EINVAL, "Expected n_neighbors <= n_samples, but n_neighbors = %lld, "
                        "n_samples = %lld", (long long)g->n_neighbors, (long long)X->rows);
    if (init && (init->rows != X->rows || init->cols != g->dim))
        return gsb__err(GSB_EINVAL, "init ndarray must match n_components value: expected "
                        "shape (%lld, %lld), got (%lld, %lld)", (long long)X->rows,
                        (long long)g->dim, (long long)init->rows, (long long)init->cols);
    return GSB_OK;
}

/* A host tensor holding a copy of n values of size bytes each. */
static int host_copy(gsb_dtype dt, int64_t rows, int64_t cols, const void *src, gsb__tensor *t)
{
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, rows, cols, t));
    memcpy(t->data, src, gsb__tensor_nbytes(t));
    return GSB_OK;
}

static int store_graph(gsb__ctx *c, const gsb__fcsr *G)
{
    gsb__tensor t = GSB__TENSOR_NONE;
    int64_t nnz = gsb__fcsr_nnz(G);
    GSB_TRY(host_copy(GSB_I64, G->rows + 1, 1, G->indptr, &t));
    GSB_TRY(gsb__fit_set(c, "_graph_indptr", &t));
    GSB_TRY(host_copy(GSB_I32, nnz, 1, G->indices, &t));
    GSB_TRY(gsb__fit_set(c, "_graph_indices", &t));
    GSB_TRY(host_copy(GSB_F32, nnz, 1, G->data, &t));
    return gsb__fit_set(c, "_graph_data", &t);
}

static int umap_fit_core(gsb__ctx *c)
{
    umap_cfg g;
    GSB_TRY(read_cfg(c, &g));
    const gsb__tensor *X = gsb__in(c, "X");
    GSB_TRY(check_fit_inputs(&g, X, gsb__in(c, "init")));
    double a, b;
    if (gsb__param_is_none(c->params, "a") || gsb__param_is_none(c->params, "b"))
        GSB_TRY(gsb__umap_find_ab(g.spread, g.min_dist, &a, &b));
    else {
        a = gsb__param_float(c->params, "a");
        b = gsb__param_float(c->params, "b");
    }
    gsb__tensor X32 = GSB__TENSOR_NONE, emb = GSB__TENSOR_NONE;
    gsb__fcsr G = {0};
    int64_t failures = 0;
    int rc;
    GSB_CHECK(to_f32(X, &X32));
    GSB_CHECK(fit_graph(c, &g, &X32, &G));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F32, X->rows, g.dim, &emb));
    GSB_CHECK(fit_layout(c, &g, &X32, &G, a, b, emb.data, &failures));
    mark_disconnected(&G, emb.data, g.dim);
    GSB_CHECK(gsb__fit_set(c, "embedding_", &emb));
    GSB_CHECK(gsb__fit_set(c, "_raw_data", &X32));
    GSB_CHECK(store_graph(c, &G));
    GSB_CHECK(gsb__fit_set_scalar(c, "_a", a, GSB_F64));
    GSB_CHECK(gsb__fit_set_scalar(c, "_b", b, GSB_F64));
    if (failures > 0) /* umap-learn's words */
        gsb__warn("UserWarning", "Spectral initialisation failed! The eigenvector solver\n"
                  "failed. This is likely due to too small an eigengap. Consider\n"
                  "adding some noise or jitter to your data.\n\n"
                  "Falling back to random initialisation!");
done:
    gsb__tensor_free(&X32);
    gsb__tensor_free(&emb);
    gsb__fcsr_free(&G);
    return rc;
}

static int umap_fit(gsb__ctx *c) { return umap_fit_core(c); }

/* fit, then the training embedding as "embedding" */
static int umap_fit_transform(gsb__ctx *c)
{
    GSB_TRY(umap_fit_core(c));
    gsb__tensor copy;
    GSB_TRY(gsb__tensor_to_host(gsb__attr(c, "embedding_"), &copy));
    return gsb__out(c, "embedding", &copy);
}

/* ---- transform --------------------------------------------------------------------------- */

typedef struct fitted {
    const gsb__tensor *raw, *emb;
    double a, b;
} fitted;

static int read_fitted(gsb__ctx *c, int64_t dim, fitted *f)
{
    const gsb__tensor *ta, *tb;
    GSB_TRY(gsb__attr_need(c, "_raw_data", GSB_F32, -1, -1, &f->raw));
    GSB_TRY(gsb__attr_need(c, "embedding_", GSB_F32, f->raw->rows, dim, &f->emb));
    GSB_TRY(gsb__attr_need(c, "_a", GSB_F64, 1, 1, &ta));
    GSB_TRY(gsb__attr_need(c, "_b", GSB_F64, 1, 1, &tb));
    f->a = ((const double *)ta->data)[0];
    f->b = ((const double *)tb->data)[0];
    return GSB_OK;
}

/* umap-learn's init_graph_transform: each new point at the membership-weighted
 * mean of its training neighbours' positions (exactly on a neighbour of
 * membership 1; NaN without neighbours). */
static void graph_transform_init(const gsb__fcsr *T, const float *emb, int64_t dim, float *out)
{
    for (int64_t i = 0; i < T->rows; i++) {
        float *o = out + i * dim;
        double sum = 0.0;
        for (int64_t e = T->indptr[i]; e < T->indptr[i + 1]; e++)
            sum += T->data[e];
        for (int64_t d = 0; d < dim; d++)
            o[d] = T->indptr[i + 1] > T->indptr[i] ? 0.0f : NAN;
        for (int64_t e = T->indptr[i]; e < T->indptr[i + 1]; e++) {
            const float *src = emb + (int64_t)T->indices[e] * dim;
            if (T->data[e] == 1.0f) {
                memcpy(o, src, (size_t)dim * sizeof *o);
                break;
            }
            for (int64_t d = 0; d < dim; d++)
                o[d] += (float)(T->data[e] / sum) * src[d];
        }
    }
}

/* The new points' layout: their initial positions, then the SGD against the
 * fixed training embedding. */
static int transform_layout(gsb__ctx *c, const umap_cfg *g, const fitted *f, const gsb__fcsr *T,
                            float *out)
{
    graph_transform_init(T, f->emb->data, g->dim, out);
    int64_t n_epochs = g->n_epochs < 0 ? (T->rows <= 10000 ? 100 : 30) : g->n_epochs / 3;
    if (n_epochs <= 0)
        return GSB_OK;
    gsb__fcsr P = {0};
    GSB_TRY(gsb__umap_prune(T, (double)n_epochs, &P));
    gsb__rng rng;
    gsb__rng_seed(&rng, (uint64_t)gsb__param_int(c->params, "transform_seed"));
    gsb__umap_sgd_run r = {n_epochs, f->a, f->b, g->gamma, g->learning_rate / 4.0,
                           g->neg_rate, 1.0, gsb__rng_next(&rng),
                           gsb__param_is_none(c->params, "random_state"), "transform epoch"};
    int rc = gsb__umap_optimize(c, &P, out, f->emb->data, g->dim, &r);
    gsb__fcsr_free(&P);
    return rc;
}

static int same_rows(const gsb__tensor *a, const gsb__tensor *b)
{
    return a->rows == b->rows && a->cols == b->cols &&
           memcmp(a->data, b->data, gsb__tensor_nbytes(a)) == 0;
}

static int umap_transform(gsb__ctx *c)
{
    umap_cfg g;
    fitted f;
    GSB_TRY(read_cfg(c, &g));
    GSB_TRY(read_fitted(c, g.dim, &f));
    gsb__tensor X32 = GSB__TENSOR_NONE, dist = GSB__TENSOR_NONE, idx = GSB__TENSOR_NONE;
    gsb__tensor out = GSB__TENSOR_NONE;
    gsb__fcsr T = {0};
    int rc;
    GSB_CHECK(to_f32(gsb__in(c, "X"), &X32));
    if (same_rows(&X32, f.raw)) { /* the training data: its embedding, as umap-learn */
        GSB_CHECK(gsb__tensor_to_host(f.emb, &out));
        rc = gsb__out(c, "embedding", &out);
        goto done;
    }
    int64_t k = g.n_neighbors < f.raw->rows ? g.n_neighbors : f.raw->rows;
    GSB_CHECK(gsb__knn_graph_exact(c, f.raw, &X32, k, g.metric, &dist, &idx));
    gsb__profile_mark("knn of the new points");
    disconnect(&dist, &idx, g.disconnection);
    double lc = g.local_connectivity - 1.0 > 0.0 ? g.local_connectivity - 1.0 : 0.0;
    GSB_CHECK(memberships(&dist, &idx, f.raw->rows, log2((double)k), lc, 1, &T));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F32, X32.rows, g.dim, &out));
    GSB_CHECK(transform_layout(c, &g, &f, &T, out.data));
    rc = gsb__out(c, "embedding", &out);
done:
    gsb__tensor_free(&X32);
    gsb__tensor_free(&dist);
    gsb__tensor_free(&idx);
    gsb__tensor_free(&out);
    gsb__fcsr_free(&T);
    return rc;
}

/* ---- graph_ ------------------------------------------------------------------------------ */

/* The fitted fuzzy set as CSR arrays "indptr", "indices", "data". */
static int umap_graph(gsb__ctx *c)
{
    const gsb__tensor *emb, *ptr, *ind, *val;
    GSB_TRY(gsb__attr_need(c, "embedding_", GSB_F32, -1, -1, &emb));
    GSB_TRY(gsb__attr_need(c, "_graph_indptr", GSB_I64, emb->rows + 1, 1, &ptr));
    int64_t nnz = ((const int64_t *)ptr->data)[emb->rows];
    GSB_TRY(gsb__attr_need(c, "_graph_indices", GSB_I32, nnz, 1, &ind));
    GSB_TRY(gsb__attr_need(c, "_graph_data", GSB_F32, nnz, 1, &val));
    const char *names[3] = {"indptr", "indices", "data"};
    const gsb__tensor *src[3] = {ptr, ind, val};
    for (int i = 0; i < 3; i++) {
        gsb__tensor t;
        GSB_TRY(gsb__tensor_to_host(src[i], &t));
        gsb__tensor_as_1d(&t);
        GSB_TRY(gsb__out(c, names[i], &t));
    }
    return GSB_OK;
}

/* ---- descriptor ------------------------------------------------------------------------------ */

#define UMAP_FIT_INPUTS                                                                    \
    {                                                                                      \
        {"X", GSB__IN_X}, {"y", GSB__IN_LABELS | GSB__IN_OPTIONAL},                        \
            {"init", GSB__IN_MATRIX | GSB__IN_OPTIONAL},                                   \
    }

static const gsb__method_desc umap_methods[] = {
    {"fit", umap_fit, UMAP_FIT_INPUTS, 1,
     "Fit the embedding of X (y: optional categorical labels for supervised UMAP, -1 "
     "unlabelled; init: optional initial layout).  A UserWarning when the spectral "
     "initialisation fell back to a random layout."},
    {"fit_transform", umap_fit_transform, UMAP_FIT_INPUTS, 1,
     "Fit, then return embedding_ as 'embedding'."},
    {"transform", umap_transform, {{"X", GSB__IN_X}}, 0,
     "Embed new points into the fitted embedding, as 'embedding' (float32)."},
    {"graph", umap_graph, {{NULL, 0}}, 0,
     "The fitted fuzzy simplicial set as CSR arrays 'indptr', 'indices', 'data'."},
    {0}};

static const gsb__attr_desc umap_attrs[] = {
    {"embedding_", "The embedding of the training data (n_samples, n_components), float32."},
    {0}};

const gsb__estimator_desc gsb__est_UMAP = {
    "UMAP", "manifold", GSB__KIND_TRANSFORMER, umap_params, umap_methods, umap_attrs,
    "Uniform Manifold Approximation and Projection, as umap-learn's UMAP (graph_ in "
    "Python: the fuzzy simplicial set as a scipy.sparse CSR matrix)."};
