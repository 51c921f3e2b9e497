/*
 * tsne.c - TSNE, as scikit-learn 1.9.1's sklearn.manifold.TSNE, plus
 * method='fft' (FIt-SNE, cuML's default).
 *
 * The fit, step by step as scikit-learn's _fit and _tsne:
 *  1. checks, in scikit-learn's order and words;
 *  2. the neighbour graph (solvers/knn_graph.c): k = min(n - 1,
 *     int(3 * perplexity + 1)) exact nearest neighbours, or every other row
 *     for method='exact'; distances squared (euclidean is searched squared);
 *  3. P (tsne_affinity.c): per-row bisection for the perplexity, P + P^T,
 *     normalised; uploaded to the backend as CSR;
 *  4. the initial embedding (tsne_init.c);
 *  5. _gradient_descent twice: 250 iterations with P * early_exaggeration
 *     and momentum 0.5, then the rest with momentum 0.8, each with fresh
 *     update (0) and gains (1).  Per iteration three backend ops: a
 *     repulsion (exact, Barnes-Hut or FFT), tsne_attract (with the KL
 *     divergence every 50th iteration and at the last) and tsne_update
 *     (gains, momentum, step; the gradient norm every 50th iteration).
 *     Every 50th iteration checks progress (n_iter_without_progress) and the
 *     gradient norm (min_grad_norm) as scikit-learn does, and reports
 *     (iteration, KL) through gsb__progress, which is also where a cancel
 *     is noticed (and at least once a second in between).
 * The embedding, Y, update and gains stay on the backend; per iteration
 * nothing comes to the host but, every 50th, two doubles.
 *
 * What each method runs (degrees of freedom dof = max(n_components - 1, 1)):
 *   'exact'       every pair (tsne_repulse_exact), P over every pair;
 *   'barnes_hut'  CPU: Barnes-Hut with `angle` (tsne_repulse_bh).  A backend
 *                 without Barnes-Hut (CUDA) runs FIt-SNE's FFT repulsion for
 *                 1 or 2 components (at least as accurate as Barnes-Hut at
 *                 angle 0.5) and the exact repulsion for 3;
 *   'fft'         FIt-SNE (tsne_repulse_fft), 1 or 2 components.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/profile.h"
#include "core/rng.h"
#include "estimators/common/pyrepr.h"
#include "backend/tsne_grid.h"
#include "estimators/manifold/tsne.h"

#define EXPLORATION_ITER 250
#define CHECK_EVERY 50
#define MIN_GAIN 0.01
#define REPORT_SECONDS 1.0

/* ---- parameters ------------------------------------------------------------ */

enum { M_EXACT, M_BH, M_FFT };

typedef struct tsne_cfg {
    int64_t n, k;           /* samples, components */
    int method;             /* M_* as asked */
    int dof;
    double perplexity, exaggeration, learning_rate, angle, min_grad_norm;
    int64_t max_iter, n_iter_without_progress;
    gsb__metric metric;
    int precomputed, square; /* square: the op's distances are squared afterwards */
} tsne_cfg;

/* scikit-learn's str(perplexity): "30.0" for a float, "30" for an int */
static void perplexity_text(const json_t *params, char *buf, size_t n)
{
    const json_t *v = json_object_get(params, "perplexity");
    if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else
        gsb__py_float_repr(json_number_value(v), buf, n);
}

static int is_one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

static int resolve_metric(gsb__ctx *c, tsne_cfg *cfg)
{
    const json_t *mp = json_object_get(c->params, "metric_params");
    if (mp && !json_is_null(mp) && json_object_size(mp) > 0)
        return gsb__err(GSB_EUNSUPPORTED, "TSNE: metric_params is not supported (got a "
                        "non-empty dict)");
    const char *m = gsb__param_str(c->params, "metric");
    static const char *const euclid[] = {"euclidean", "l2", NULL};
    static const char *const manhattan[] = {"manhattan", "l1", "cityblock", NULL};
    cfg->precomputed = strcmp(m, "precomputed") == 0;
    cfg->square = 1;
    if (cfg->precomputed)
        return GSB_OK;
    if (is_one_of(m, euclid)) {
        cfg->metric = GSB__METRIC_SQEUCLIDEAN; /* scikit-learn squares euclidean */
        cfg->square = 0;
    } else if (strcmp(m, "sqeuclidean") == 0) {
        cfg->metric = GSB__METRIC_SQEUCLIDEAN; /* and squares sqeuclidean again */
    } else if (is_one_of(m, manhattan)) {
        cfg->metric = GSB__METRIC_MANHATTAN;
    } else if (strcmp(m, "cosine") == 0) {
        cfg->metric = GSB__METRIC_COSINE;
    } else {
        return gsb__err(GSB_EUNSUPPORTED,
                        "TSNE: metric='%s' is not supported; supported metrics: 'euclidean', "
                        "'l2', 'sqeuclidean', 'manhattan', 'l1', 'cityblock', 'cosine', "
                        "'precomputed'", m);
    }
    return GSB_OK;
}

/* check_non_negative on a precomputed matrix (on a host copy when X is on the GPU) */
static int check_non_negative(const gsb__tensor *X)
{
    gsb__tensor h;
    GSB_TRY(gsb__tensor_to(gsb__cpu_backend(), X, &h));
    int negative = 0;
    for (int64_t e = 0; e < h.rows * h.cols && !negative; e++)
        negative = gsb__tensor_get(&h, e) < 0.0;
    gsb__tensor_free(&h);
    if (negative)
        return gsb__err(GSB_EINVAL, "Negative values in data passed to TSNE.fit(). With "
                        "metric='precomputed', X should contain positive distances..");
    return GSB_OK;
}

/* scikit-learn's checks of the parameters against X, in its order */
static int check_input(gsb__ctx *c, const gsb__tensor *X, tsne_cfg *cfg)
{
    const json_t *p = c->params;
    cfg->n = X->rows;
    cfg->k = gsb__param_int(p, "n_components");
    cfg->perplexity = gsb__param_float(p, "perplexity");
    cfg->exaggeration = gsb__param_float(p, "early_exaggeration");
    cfg->angle = gsb__param_float(p, "angle");
    cfg->min_grad_norm = gsb__param_float(p, "min_grad_norm");
    cfg->max_iter = gsb__param_int(p, "max_iter");
    cfg->n_iter_without_progress = gsb__param_int(p, "n_iter_without_progress");
    cfg->method = gsb__param_is(p, "method", "exact") ? M_EXACT
                  : gsb__param_is(p, "method", "fft") ? M_FFT : M_BH;
    cfg->dof = cfg->k - 1 > 1 ? (int)(cfg->k - 1) : 1;
    if (cfg->perplexity >= (double)cfg->n) {
        char text[48];
        perplexity_text(p, text, sizeof text);
        return gsb__err(GSB_EINVAL, "perplexity (%s) must be less than n_samples (%lld)", text,
                        (long long)cfg->n);
    }
    cfg->learning_rate = gsb__param_is(p, "learning_rate", "auto")
                             ? fmax((double)cfg->n / cfg->exaggeration / 4.0, 50.0)
                             : gsb__param_float(p, "learning_rate");
    if (cfg->method != M_EXACT && cfg->n < 2)
        return gsb__err(GSB_EINVAL, "Found array with %lld sample(s) (shape=(%lld, %lld)) while "
                        "a minimum of 2 is required by TSNE.",
                        (long long)X->rows, (long long)X->rows, (long long)X->cols);
    GSB_TRY(resolve_metric(c, cfg));
    if (cfg->precomputed) {
        if (!gsb__in(c, "init") && gsb__param_is(p, "init", "pca"))
            return gsb__err(GSB_EINVAL, "The parameter init=\"pca\" cannot be used with "
                            "metric=\"precomputed\".");
        if (X->rows != X->cols)
            return gsb__err(GSB_EINVAL, "X should be a square distance matrix");
        GSB_TRY(check_non_negative(X));
    }
    if (cfg->method == M_BH && cfg->k > 3)
        return gsb__err(GSB_EINVAL, "'n_components' should be inferior to 4 for the barnes_hut "
                        "algorithm as it relies on quad-tree or oct-tree.");
    if (cfg->method == M_FFT && cfg->k > 2)
        return gsb__err(GSB_EINVAL, "'n_components' should be 1 or 2 for the fft method, whose "
                        "interpolation grid is 1-D or 2-D (got %lld)", (long long)cfg->k);
    return GSB_OK;
}

/* ---- affinities -------------------------------------------------------------- */

typedef struct p_dev {
    gsb__tensor indptr, indices, val; /* CSR on the backend */
} p_dev;

static void p_dev_free(p_dev *P)
{
    gsb__tensor_free(&P->indptr);
    gsb__tensor_free(&P->indices);
    gsb__tensor_free(&P->val);
}

/* An owned backend tensor (at least one element) holding count host values. */
static int upload_vec(const gsb__backend *be, gsb_dtype dt, const void *host, int64_t count,
                      gsb__tensor *out)
{
    GSB_TRY(gsb__tensor_alloc(be, dt, count > 0 ? count : 1, 1, out));
    if (count == 0)
        return be->ops->fill(be, out, 0.0);
    out->rows = count;
    int rc = be->ops->upload(be, out, host);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

/* host CSR -> backend tensors (values as float32, as scikit-learn's Barnes-Hut takes them) */
static int upload_p(const gsb__backend *be, const gsb__csr *P, p_dev *out)
{
    float *v = malloc((size_t)(P->nnz > 0 ? P->nnz : 1) * sizeof *v);
    if (!v)
        return gsb__err(GSB_ENOMEM, "TSNE: out of host memory");
    for (int64_t e = 0; e < P->nnz; e++)
        v[e] = (float)P->data[e];
    int rc;
    GSB_CHECK(upload_vec(be, GSB_I64, P->indptr, P->n + 1, &out->indptr));
    GSB_CHECK(upload_vec(be, GSB_I32, P->indices, P->nnz, &out->indices));
    GSB_CHECK(upload_vec(be, GSB_F32, v, P->nnz, &out->val));
done:
    free(v);
    return rc;
}

/* P on the backend, from the neighbour graph of X */
static int affinities(gsb__ctx *c, const gsb__tensor *X, const tsne_cfg *cfg, p_dev *out)
{
    int64_t n = cfg->n;
    int64_t k = (int64_t)(3.0 * cfg->perplexity + 1.0); /* scikit-learn's int(...) */
    if (cfg->method == M_EXACT || k > n - 1)
        k = n - 1;
    gsb__knn_graph g = {0};
    gsb__csr P = {0};
    int rc;
    if (k < 1) { /* a single sample: no pairs */
        int64_t zero[2] = {0, 0};
        gsb__csr empty = {n, 0, zero, NULL, NULL};
        return upload_p(c->be, &empty, out);
    }
    gsb__knn_opts o = {k, cfg->metric, cfg->precomputed, 0};
    GSB_CHECK(gsb__knn_graph_build(c, c->be, X, &o, &g));
    gsb__profile_mark("knn graph");
    if (cfg->square)
        for (int64_t e = 0; e < n * k; e++)
            g.dist[e] *= g.dist[e];
    double mean_sigma;
    GSB_CHECK(gsb__tsne_joint_p(&g, cfg->perplexity, cfg->method == M_EXACT, &P, &mean_sigma));
    GSB_CHECK(gsb__progress(c, "mean sigma", n, mean_sigma));
    GSB_CHECK(upload_p(c->be, &P, out));
    gsb__profile_mark("P (sigmas, symmetrised) and its upload");
done:
    gsb__knn_graph_free(&g);
    gsb__csr_free(&P);
    return rc;
}

/* ---- gradient descent ---------------------------------------------------------- */

typedef struct descent {
    gsb__ctx *c;
    const tsne_cfg *cfg;
    const p_dev *P;
    gsb__tensor Y, A, R, update, gains, zsum; /* on the backend */
    int repulsion;                            /* M_* actually run */
    double floor;                             /* the KL's clamp */
    double last_report;                       /* monotonic seconds */
    double last_kl;
} descent;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The repulsion a method runs on this backend (see the header comment). */
static int choose_repulsion(const gsb__backend *be, const tsne_cfg *cfg)
{
    if (cfg->method != M_BH)
        return cfg->method;
    if (be->ops->tsne_repulse_bh)
        return M_BH;
    return cfg->k <= 2 ? M_FFT : M_EXACT;
}

static int repulse(descent *s)
{
    const gsb__backend *be = s->c->be;
    switch (s->repulsion) {
    case M_EXACT: return be->ops->tsne_repulse_exact(be, &s->Y, s->cfg->dof, &s->R, &s->zsum);
    case M_BH:
        return be->ops->tsne_repulse_bh(be, &s->Y, s->cfg->dof, s->cfg->angle, &s->R, &s->zsum);
    default:
        return be->ops->tsne_repulse_fft(be, &s->Y, GSB__TSNE_FFT_INTERP,
                                         GSB__TSNE_FFT_MIN_BOXES, &s->R, &s->zsum);
    }
}

/* Report progress (and notice a cancel) at check iterations and at least
 * once every REPORT_SECONDS in between. */
static int report(descent *s, int64_t iteration, int check)
{
    double t = now_seconds();
    if (!check && t - s->last_report < REPORT_SECONDS)
        return GSB_OK;
    s->last_report = t;
    return gsb__progress(s->c, "iteration", iteration, s->last_kl);
}

typedef struct gd_run {
    int64_t it, max_iter, n_iter_without_progress;
    double momentum, scale;
    double error;  /* out: the last KL computed (DBL_MAX when no iteration ran) */
    int64_t last;  /* out: the last iteration */
} gd_run;

/* scikit-learn's _gradient_descent (n_iter_check = 50) */
static int gradient_descent(descent *s, gd_run *r)
{
    const gsb__backend *be = s->c->be;
    const tsne_cfg *cfg = s->cfg;
    double c_grad = 2.0 * (cfg->dof + 1.0) / cfg->dof, best = DBL_MAX;
    int64_t best_iter = r->it, i = r->it;
    r->error = DBL_MAX;
    GSB_TRY(be->ops->fill(be, &s->update, 0.0));
    GSB_TRY(be->ops->fill(be, &s->gains, 1.0));
    for (i = r->it; i < r->max_iter; i++) {
        int check = (i + 1) % CHECK_EVERY == 0;
        int want_error = check || i == r->max_iter - 1;
        double kl = NAN, grad_norm = 0.0;
        GSB_TRY(repulse(s));
        GSB_TRY(be->ops->tsne_attract(be, &s->Y, &s->P->indptr, &s->P->indices, &s->P->val,
                                      r->scale, cfg->dof, &s->zsum, s->floor, &s->A,
                                      want_error ? &kl : NULL));
        GSB_TRY(be->ops->tsne_update(be, &s->Y, &s->A, &s->R, &s->zsum, c_grad, r->momentum,
                                     cfg->learning_rate, MIN_GAIN, &s->update, &s->gains,
                                     check ? &grad_norm : NULL));
        r->error = kl;
        if (want_error)
            s->last_kl = kl;
        GSB_TRY(report(s, i + 1, check));
        if (!check)
            continue;
        if (kl < best) {
            best = kl;
            best_iter = i;
        } else if (i - best_iter > r->n_iter_without_progress) {
            break;
        }
        if (grad_norm <= cfg->min_grad_norm)
            break;
    }
    r->last = i < r->max_iter ? i : (r->max_iter > r->it ? r->max_iter - 1 : r->it);
    return GSB_OK;
}

/* scikit-learn's _tsne: the two phases; *n_iter and *kl as it reports them */
static int optimize(descent *s, int64_t *n_iter, double *kl)
{
    const tsne_cfg *cfg = s->cfg;
    gd_run one = {0, EXPLORATION_ITER, EXPLORATION_ITER, 0.5, cfg->exaggeration, 0, 0};
    GSB_TRY(gradient_descent(s, &one));
    gsb__profile_mark("early exaggeration");
    GSB_TRY(gsb__progress(s->c, "early exaggeration done", one.last + 1, one.error));
    /* scikit-learn's condition, which its first phase always meets */
    gd_run two = {one.last + 1, cfg->max_iter, cfg->n_iter_without_progress, 0.8, 1.0, 0, 0};
    if (one.last < EXPLORATION_ITER || cfg->max_iter - EXPLORATION_ITER > 0) {
        GSB_TRY(gradient_descent(s, &two));
        gsb__profile_mark("second phase");
        *n_iter = two.last;
        *kl = two.error;
    } else {
        *n_iter = one.last;
        *kl = one.error;
    }
    return gsb__progress(s->c, "done", *n_iter + 1, *kl);
}

static void descent_free(descent *s)
{
    gsb__tensor_free(&s->Y);
    gsb__tensor_free(&s->A);
    gsb__tensor_free(&s->R);
    gsb__tensor_free(&s->update);
    gsb__tensor_free(&s->gains);
    gsb__tensor_free(&s->zsum);
}

static int descent_alloc(descent *s, const gsb__tensor *Y0)
{
    const gsb__backend *be = s->c->be;
    int64_t n = s->cfg->n, k = s->cfg->k;
    GSB_TRY(gsb__tensor_alloc(be, GSB_F32, n, k, &s->Y));
    GSB_TRY(be->ops->upload(be, &s->Y, Y0->data));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F32, n, k, &s->A));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F32, n, k, &s->R));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F32, n, k, &s->update));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F32, n, k, &s->gains));
    GSB_TRY(gsb__tensor_zeros(be, GSB_F64, 1, 1, &s->zsum));
    return GSB_OK;
}

/* ---- fit ----------------------------------------------------------------------- */

static int tsne_fit_impl(gsb__ctx *c, int want_out)
{
    const gsb__tensor *X = gsb__in(c, "X");
    tsne_cfg cfg = {0};
    GSB_TRY(check_input(c, X, &cfg));
    gsb__rng rng;
    gsb__rng_seed_params(&rng, c->params);
    uint64_t seed = gsb__rng_next(&rng);

    p_dev P = {GSB__TENSOR_NONE, GSB__TENSOR_NONE, GSB__TENSOR_NONE};
    descent s = {0};
    gsb__tensor Y0 = GSB__TENSOR_NONE, emb = GSB__TENSOR_NONE;
    int64_t n_iter = 0;
    double kl = 0.0;
    int rc;
    GSB_CHECK(affinities(c, X, &cfg, &P));
    GSB_CHECK(gsb__tsne_init(c, X, cfg.k, seed, &Y0));
    gsb__profile_mark("initial embedding");
    s.c = c;
    s.cfg = &cfg;
    s.P = &P;
    s.repulsion = choose_repulsion(c->be, &cfg);
    s.floor = cfg.method == M_EXACT ? DBL_EPSILON : FLT_MIN;
    s.last_report = now_seconds();
    s.last_kl = NAN;
    GSB_CHECK(descent_alloc(&s, &Y0));
    GSB_CHECK(optimize(&s, &n_iter, &kl));

    GSB_CHECK(gsb__tensor_to_host(&s.Y, &emb));
    GSB_CHECK(gsb__fit_set_scalar(c, "kl_divergence_", kl, GSB_F64));
    GSB_CHECK(gsb__fit_set_scalar(c, "n_iter_", (double)n_iter, GSB_I64));
    GSB_CHECK(gsb__fit_set_scalar(c, "learning_rate_", cfg.learning_rate, GSB_F64));
    if (want_out) {
        gsb__tensor copy;
        GSB_CHECK(gsb__tensor_to_host(&emb, &copy));
        GSB_CHECK(gsb__out(c, "X_new", &copy));
    }
    GSB_CHECK(gsb__fit_set(c, "embedding_", &emb));
done:
    gsb__tensor_free(&emb);
    gsb__tensor_free(&Y0);
    descent_free(&s);
    p_dev_free(&P);
    return rc;
}

static int tsne_fit(gsb__ctx *c) { return tsne_fit_impl(c, 0); }
static int tsne_fit_transform(gsb__ctx *c) { return tsne_fit_impl(c, 1); }

/* ---- descriptor ------------------------------------------------------------------ */

static const char *const auto_choice[] = {"auto", NULL};
static const char *const init_choices[] = {"pca", "random", NULL};
static const char *const method_choices[] = {"barnes_hut", "exact", "fft", NULL};
/* scikit-learn's _VALID_METRICS and 'precomputed', sorted; those not computed here fail at
 * fit with GSB_EUNSUPPORTED */
static const char *const metric_choices[] = {
    "braycurtis", "canberra", "chebyshev", "cityblock", "correlation", "cosine", "dice",
    "euclidean", "hamming", "haversine", "jaccard", "l1", "l2", "mahalanobis", "manhattan",
    "matching", "minkowski", "nan_euclidean", "precomputed", "rogerstanimoto", "russellrao",
    "seuclidean", "sokalsneath", "sqeuclidean", "wminkowski", "yule", NULL};

static const gsb__param_desc tsne_params[] = {
    {"n_components", GSB__P_INT, "2", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Dimension of the embedded space."},
    {"perplexity", GSB__P_FLOAT, "30.0", 0, INFINITY, GSB__CLOSED_NEITHER, NULL,
     "Effective number of neighbours; the graph has min(n - 1, 3 * perplexity + 1) of them."},
    {"early_exaggeration", GSB__P_FLOAT, "12.0", 1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Factor on P during the first 250 iterations."},
    {"learning_rate", GSB__P_FLOAT | GSB__P_STR, "\"auto\"", 0, INFINITY, GSB__CLOSED_NEITHER,
     auto_choice, "Step size; 'auto' is max(n_samples / early_exaggeration / 4, 50)."},
    {"max_iter", GSB__P_INT, "1000", 250, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Maximum number of iterations (the first 250 exaggerated)."},
    {"n_iter_without_progress", GSB__P_INT, "300", -1, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Stop after this many iterations without a lower KL divergence (checked every 50)."},
    {"min_grad_norm", GSB__P_FLOAT, "1e-07", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Stop when the gradient norm falls to this (checked every 50 iterations)."},
    {"metric", GSB__P_STR, "\"euclidean\"", 0, 0, 0, metric_choices,
     "Input distance; supported: euclidean, l2, sqeuclidean, manhattan, l1, cityblock, "
     "cosine, precomputed (X is then a square distance matrix). Distances are squared, as "
     "scikit-learn does."},
    {"metric_params", GSB__P_DICT | GSB__P_NONE, "null", 0, 0, 0, NULL,
     "Must be None or an empty dict."},
    {"init", GSB__P_STR, "\"pca\"", 0, 0, 0, init_choices,
     "'pca' (scaled to std 1e-4) or 'random' (N(0, 1e-4^2)); an (n_samples, n_components) "
     "array is passed as the fit input 'init'."},
    {"verbose", GSB__P_INT | GSB__P_BOOL, "0", 0, INFINITY, GSB__CLOSED_LEFT, NULL,
     "Print progress (every 50 iterations: iteration, KL divergence) when no progress "
     "callback is set."},
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH, NULL,
     "Seed of the 'random' init and of PCA's randomized solver (gsb's own stream, not "
     "numpy's)."},
    {"method", GSB__P_STR, "\"barnes_hut\"", 0, 0, 0, method_choices,
     "'barnes_hut' (CPU: Barnes-Hut; GPU: FIt-SNE for 1-2 components, exact for 3), 'exact' "
     "or 'fft' (FIt-SNE interpolation, 1-2 components)."},
    {"angle", GSB__P_FLOAT, "0.5", 0, 1, GSB__CLOSED_BOTH, NULL,
     "Barnes-Hut's opening angle (theta)."},
    {"n_jobs", GSB__P_INT | GSB__P_NONE, "null", 0, 0, 0, NULL,
     "Accepted for compatibility: the backend sets the parallelism."},
    {0}};

#define TSNE_FIT_INPUTS                                                                     \
    {{"X", GSB__IN_X | GSB__IN_DEVICE_OK},                                                  \
     {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL},                                            \
     {"init", GSB__IN_MATRIX | GSB__IN_OPTIONAL}}

static const gsb__method_desc tsne_methods[] = {
    {"fit", tsne_fit, TSNE_FIT_INPUTS, 1,
     "Fit X into an embedded space (y is ignored; init: optional initial embedding)."},
    {"fit_transform", tsne_fit_transform, TSNE_FIT_INPUTS, 1,
     "Fit X and return the embedding X_new."},
    {0}};

static const gsb__attr_desc tsne_attrs[] = {
    {"embedding_", "the embedding (n_samples x n_components, float32)"},
    {"kl_divergence_", "Kullback-Leibler divergence after optimisation"},
    {"n_iter_", "number of iterations run"},
    {"learning_rate_", "the effective learning rate"},
    {0}};

const gsb__estimator_desc gsb__est_TSNE = {
    "TSNE", "manifold", GSB__KIND_TRANSFORMER, tsne_params, tsne_methods, tsne_attrs,
    "T-distributed Stochastic Neighbor Embedding (scikit-learn's TSNE; method='fft' runs "
    "FIt-SNE)"};
