/*
 * forest_fit.c - fitting a random forest, as scikit-learn 1.9.1's forests do
 * it, on histogram trees (see forest_fit.h).
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
 * impurity importances; OOB estimates; warm_start adding trees with the
 * seeds a cold fit of all trees would use.  Random streams are gsb's.
 */
#include "estimators/ensemble/forest_fit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/forest_math.h"
#include "core/alloc.h"
#include "core/hostmem.h"
#include "core/model.h"
#include "core/profile.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/warn.h"
#include "core/xoshiro.h"
#include "estimators/common/classes.h"
#include "estimators/ensemble/forest_bins.h"
#include "estimators/ensemble/forest_model.h"
#include "estimators/ensemble/forest_params.h"
#include "estimators/ensemble/tree_grow.h"

/* Samples (bootstrap rows) of one group of trees grown together, at most. */
#define GROUP_SAMPLES ((int64_t)1 << 25)
/* The histogram pool's budget on the CPU and on a GPU. */
#define POOL_BYTES_CPU ((int64_t)256 << 20)
#define POOL_BYTES_GPU ((int64_t)1 << 30)

/* ---- targets ---------------------------------------------------------------------- */

/* What the trees are fitted to: class indices, or targets. */
typedef struct targets {
    int64_t n, K;            /* K: classes, or outputs */
    double *classes;         /* classification: the sorted classes */
    int32_t *cls;            /* classification: each row's class index */
    double *y;               /* regression: n x K targets (float64) */
    double *ys;              /* regression: n x 2K [y, q] as the ops take them */
} targets;

static void targets_free(targets *t)
{
    free(t->classes);
    free(t->cls);
    free(t->y);
    free(t->ys);
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
 * Regression targets: float64 copies, and the ops' [y, q], q = y^2 (or
 * y log y for Poisson), as scikit-learn's criteria sum them (unscaled: with
 * integral targets and bootstrap counts every sum is then exact, so both
 * backends grow the same trees).
 */
static int regression_targets(gsb__ctx *c, int criterion, targets *t)
{
    const gsb__tensor *y = gsb__in(c, "y");
    int64_t n = y->rows, K = y->cols;
    t->n = n;
    t->K = K;
    t->y = gsb__alloc_array(n * K, sizeof *t->y);
    t->ys = gsb__alloc_array(n * 2 * K, sizeof *t->ys);
    if (!t->y || !t->ys)
        return oom(c, "targets");
    int poisson = criterion == GSB__FOREST_POISSON;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < K; k++) {
            double v = gsb__tensor_get(y, i * K + k);
            if (poisson && v < 0)
                return gsb__err(GSB_EINVAL, "Some value(s) of y are negative which is not "
                                "allowed for Poisson regression.");
            sum += v;
            t->y[i * K + k] = v;
            t->ys[i * 2 * K + k] = v;
            t->ys[i * 2 * K + K + k] = poisson ? (v > 0 ? v * log(v) : 0.0) : v * v;
        }
    if (poisson && !(sum > 0))
        return gsb__err(GSB_EINVAL, "Sum of y is not strictly positive which is necessary for "
                        "Poisson regression.");
    return GSB_OK;
}

/* ---- weights and bootstrap samples ------------------------------------------------ */

/*
 * scikit-learn's _sample_weight: sample_weight x expanded class weight (NULL
 * when both are absent).  'balanced_subsample' with bootstrap is per tree.
 */
static int sample_weights(gsb__ctx *c, const gsb__forest_cfg *cfg, const targets *t, double **out)
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
        total = 0;
        int negative = 0;
        for (int64_t i = 0; i < t->n; i++) {
            w[i] *= cw[t->cls[i]];
            total += w[i];
            negative |= w[i] < 0;
        }
        free(cw);
        /* the bootstrap draws rows with these weights as probabilities */
        if (negative || !(total > 0)) {
            free(w);
            return gsb__err(GSB_EINVAL, negative ? "%s: class_weight gives negative sample "
                            "weights: probabilities are not non-negative"
                            : "%s: Sample weights must contain at least one non-zero number "
                            "(after class_weight).", c->est->name);
        }
    }
    *out = w;
    return GSB_OK;
}

/* The bootstrap sample size (scikit-learn's _get_n_samples_bootstrap). */
static int64_t bootstrap_size(const gsb__forest_cfg *cfg, int64_t n, const double *w)
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

/* x as Python's repr of a float prints it: the shortest text that reads back. */
static void float_repr(double x, char *buf, size_t n)
{
    if (x == floor(x) && fabs(x) < 1e16) {
        snprintf(buf, n, "%.1f", x);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

/* The warnings scikit-learn gives about these settings at fit. */
static void warn_settings(gsb__ctx *c, const gsb__forest_cfg *cfg, int64_t n, const double *w)
{
    if (gsb__param_is(c->params, "criterion", "friedman_mse") &&
        gsb__param_is_none(c->params, "split_criterion"))
        gsb__warn("FutureWarning", "Value `\"friedman_mse\"` for `criterion` is deprecated and "
                  "will be removed in 1.11. It maps to `\"squared_error\"` as both were always "
                  "equivalent. Use `criterion=\"squared_error\"` to remove this warning.");
    if (cfg->classify && cfg->warm_start &&
        (gsb__param_is(c->params, "class_weight", "balanced") ||
         gsb__param_is(c->params, "class_weight", "balanced_subsample")))
        gsb__warn("UserWarning", "class_weight presets \"balanced\" or \"balanced_subsample\" "
                  "are not recommended for warm_start if the fitted data differs from the full "
                  "dataset. In order to use \"balanced\" weights, use compute_class_weight "
                  "(\"balanced\", classes, y). In place of y you can use a large enough sample "
                  "of the full training set target to properly estimate the class frequency "
                  "distributions. Pass the resulting weights as the class_weight parameter.");
    const json_t *ms = cfg->max_samples;
    if (!cfg->bootstrap || !json_is_real(ms))
        return;
    int64_t k = bootstrap_size(cfg, n, w);
    if ((double)k >= fmax(10.0, cbrt((double)n)))
        return;
    char frac[40], total[40];
    double sum = 0;
    for (int64_t i = 0; w && i < n; i++)
        sum += w[i];
    float_repr(json_real_value(ms), frac, sizeof frac);
    float_repr(sum, total, sizeof total);
    if (w)
        gsb__warn("UserWarning", "Using the fractional value max_samples=%s when the total sum "
                  "of sample weights is %s results in a low number (%lld) of bootstrap samples. "
                  "We recommend passing `max_samples` as an integer instead.", frac, total,
                  (long long)k);
    else
        gsb__warn("UserWarning", "Using the fractional value max_samples=%s when the number of "
                  "samples is %lld results in a low number (%lld) of bootstrap samples. We "
                  "recommend passing `max_samples` as an integer instead.", frac, (long long)n,
                  (long long)k);
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
    if (!s->cdf) { /* gsb__rng_below(&r, n)'s draws, the division done once */
        gsb__xoshiro_divider d = gsb__xoshiro_divider_of(s->n);
        for (int64_t k = 0; k < s->n_boot; k++)
            counts[gsb__xoshiro_below_div(r.s, &d)]++;
        return;
    }
    /* weighted: the first row whose cumulative weight exceeds u */
    for (int64_t k = 0; k < s->n_boot; k++) {
        double u = gsb__rng_uniform(&r) * s->cdf[s->n - 1];
        int64_t lo = 0, hi = s->n - 1;
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (s->cdf[mid] > u)
                hi = mid;
            else
                lo = mid + 1;
        }
        counts[lo]++;
    }
}

/* The bootstrap's cumulative weights (weighted bootstrap only). */
static int sampler_cdf(gsb__ctx *c, const gsb__forest_cfg *cfg, const double *w, sampler *smp)
{
    if (!w || !cfg->bootstrap)
        return GSB_OK;
    if (!(smp->cdf = gsb__alloc_array(smp->n, sizeof *smp->cdf)))
        return oom(c, "the bootstrap weights");
    for (int64_t i = 0; i < smp->n; i++)
        smp->cdf[i] = (i ? smp->cdf[i - 1] : 0.0) + w[i];
    return GSB_OK;
}

/* ---- growing the trees ------------------------------------------------------------ */

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
    const gsb__forest_cfg *cfg;
    const targets *t;
    const double *w;            /* _sample_weight, or NULL */
    sampler smp;
    gsb__tensor codes, yb;      /* on be */
    const gsb__tensor *edges;   /* host */
    int n_real, nan_code, V1;
    int64_t F, trees_done;
    gsb__forest_model *model;
} fit_state;

/* 'balanced_subsample': cw[k] = n_boot / (classes present x draws of class k)
 * (0 for a class not drawn), as compute_sample_weight('balanced', y, indices=
 * the bootstrap sample); cc: K entries of scratch. */
static void subsample_weights(const fit_state *s, const int32_t *counts, double *cc, double *cw)
{
    int64_t K = s->t->K, present = 0;
    for (int64_t k = 0; k < K; k++)
        cc[k] = 0;
    for (int64_t i = 0; i < s->t->n; i++)
        cc[s->t->cls[i]] += counts[i];
    for (int64_t k = 0; k < K; k++)
        present += cc[k] > 0;
    for (int64_t k = 0; k < K; k++)
        cw[k] = cc[k] > 0 ? (double)s->smp.n_boot / ((double)present * cc[k]) : 0.0;
}

/* The samples of one tree: rows with their weights (bootstrap counts, or the
 * sample weights without bootstrap), into rows/w (both NULL: only counted);
 * returns their number.  Scratch: counts (n), cw (2K: balanced_subsample). */
static int64_t tree_samples(const fit_state *s, uint64_t seed, int32_t *counts, double *cw,
                            int32_t *rows, float *w)
{
    int64_t n = s->t->n, k = 0;
    if (!s->cfg->bootstrap) {
        for (int64_t i = 0; i < n; i++)
            if (!s->w || s->w[i] > 0) {
                if (rows) {
                    rows[k] = (int32_t)i;
                    w[k] = s->w ? (float)s->w[i] : 1.0f;
                }
                k++;
            }
        return k;
    }
    bootstrap_counts(&s->smp, seed, counts);
    if (!rows) {
        for (int64_t i = 0; i < n; i++)
            k += counts[i] > 0;
        return k;
    }
    if (s->cfg->balanced_subsample)
        subsample_weights(s, counts, cw + s->t->K, cw);
    for (int64_t i = 0; i < n; i++)
        if (counts[i] > 0) {
            rows[k] = (int32_t)i;
            w[k++] = (float)(counts[i] * (s->cfg->balanced_subsample ? cw[s->t->cls[i]] : 1.0));
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

/* The samples a tree may take at most (rows, and bootstrap draws). */
static int64_t tree_cap(const fit_state *s)
{
    return s->cfg->bootstrap && s->smp.n_boot < s->t->n ? s->smp.n_boot : s->t->n;
}

/* Tree g's samples at offset off[g] of rows/w, and their root stats. */
static void place_tree(const fit_state *s, uint64_t seed, int64_t g, const int64_t *off,
                       int32_t *counts, double *cw, int32_t *rows, float *w, double *stats)
{
    int64_t k = tree_samples(s, seed, counts, cw, rows + off[g], w + off[g]);
    root_stats(s, rows + off[g], w + off[g], k, stats + g * s->V1);
}

/*
 * The samples of trees [t0, t0 + G) packed one tree after the other into
 * *rows / *w (allocated here: gsb__host_free them), their root stats (G x
 * V1) and the trees' segments; the number of samples, or -1 (with the status
 * set) on failure.  A tree per thread, twice: each tree's samples counted
 * (its offset follows), then drawn again (the same seed, the same draws)
 * straight into their place: the threads pack the trees, and only the
 * samples' room is touched.
 */
static int64_t draw_samples(fit_state *s, const uint64_t *seeds, int64_t t0, int64_t G,
                            int32_t **rows, float **w, double *stats, gsb__grow_tree *trees)
{
    int64_t n = s->t->n, *off = gsb__alloc_array(G + 1, sizeof *off), S = -1;
    int bad = 0; /* shared: a thread's scratch, or the samples' room, missing */
    if (!off) {
        oom(s->c, "the bootstrap samples");
        return -1;
    }
    seeds += t0;
#pragma omp parallel if (n * G > 65536)
    {
        int32_t *counts = gsb__alloc_array(n, sizeof *counts);
        double *cw = gsb__alloc_array(2 * s->t->K, sizeof *cw);
        if (!counts || !cw) {
#pragma omp atomic write
            bad = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t g = 0; g < G; g++)
            if (counts && cw)
                off[g + 1] = tree_samples(s, seeds[g], counts, cw, NULL, NULL);
#pragma omp single
        if (!bad) {
            off[0] = 0;
            for (int64_t g = 0; g < G; g++)
                off[g + 1] += off[g];
            *rows = gsb__host_alloc((size_t)off[G] * sizeof **rows);
            *w = gsb__host_alloc((size_t)off[G] * sizeof **w);
            bad = !*rows || !*w;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t g = 0; g < G; g++)
            if (!bad && counts && cw)
                place_tree(s, seeds[g], g, off, counts, cw, *rows, *w, stats);
        free(counts);
        free(cw);
    }
    if (bad) {
        oom(s->c, "the bootstrap samples");
    } else {
        for (int64_t g = 0; g < G; g++)
            trees[g] = (gsb__grow_tree){off[g], off[g + 1], seeds[g], stats + g * s->V1};
        S = off[G];
    }
    free(off);
    return S;
}

/*
 * Whether a group grows through the level grower (tree_level.c): on a GPU
 * when breadth first; GSB_FOREST_GROWER=host or =level overrides it (tests
 * compare the two on the CPU; "host" keeps the old GPU path selectable).
 */
static int level_grower(const gsb__backend *be, const gsb__grow_params *gp)
{
    const char *env = getenv("GSB_FOREST_GROWER");
    if (gp->max_leaf_nodes > 0 || (env && strcmp(env, "host") == 0))
        return 0;
    return be != gsb__cpu_backend() || (env && strcmp(env, "level") == 0);
}

/* Grow trees [t0, t1) (seeds) as one group and append them to the model. */
static int grow_group(fit_state *s, const uint64_t *seeds, int64_t t0, int64_t t1)
{
    const gsb__backend *be = s->be;
    int64_t G = t1 - t0, K = s->cfg->classify ? s->t->K : 0;
    int32_t *rows = NULL;
    float *w = NULL;
    double *stats = gsb__alloc_array(G * s->V1, sizeof *stats);
    gsb__grow_tree *trees = gsb__calloc_array(G, sizeof *trees);
    gsb__grown *grown = gsb__calloc_array(G, sizeof *grown);
    double *root_w = NULL;
    gsb__tensor rb = GSB__TENSOR_NONE, wb = GSB__TENSOR_NONE;
    int rc = GSB_OK;
    if (!stats || !trees || !grown) {
        rc = oom(s->c, "the bootstrap samples");
        goto done;
    }
    int64_t S = draw_samples(s, seeds, t0, G, &rows, &w, stats, trees);
    if (S < 0) {
        rc = GSB_ENOMEM;
        goto done;
    }
    gsb__profile_mark("bootstrap samples drawn (host)");
    gsb__profile_count("trees in the group", G);
    gsb__profile_count("samples in the group", S);
    GSB_CHECK(to_backend(be, rows, GSB_I32, S, 1, &rb));
    GSB_CHECK(to_backend(be, w, GSB_F32, S, 1, &wb));
    gsb__profile_mark("samples to the backend");
    gsb__forest_data d = {&s->codes, s->F, s->n_real + (s->nan_code >= 0), s->nan_code,
                          (int)K, K ? 0 : (int)s->t->K, &s->yb, &rb, &wb, NULL, NULL, NULL};
    gsb__grow_params gp = s->cfg->grow;
    gp.rule.min_weight_leaf = s->cfg->min_weight_fraction * gsb__forest_weight(stats, (int)K);
    gp.pool_bytes = be == gsb__cpu_backend() ? POOL_BYTES_CPU : POOL_BYTES_GPU;
    if (level_grower(be, &gp))
        GSB_CHECK(gsb__grow_trees_level(be, &d, &gp, trees, G, grown, on_step, s));
    else
        GSB_CHECK(gsb__grow_trees(be, &d, &gp, trees, G, grown, on_step, s));
    gsb__profile_mark("trees grown (the growers)");
    /* the samples as the growth left them: each leaf's are a segment */
    if (rb.data != rows)
        GSB_CHECK(be->ops->download(be, &rb, rows));
    if (wb.data != w)
        GSB_CHECK(be->ops->download(be, &wb, w));
    gsb__profile_mark("samples read back");
    gsb__leaf_source src = {rows, w, s->t->cls, s->t->y, s->edges->data, s->edges->cols,
                            s->n_real};
    if (!(root_w = gsb__alloc_array(G, sizeof *root_w))) {
        rc = oom(s->c, "the root weights");
        goto done;
    }
    for (int64_t g = 0; g < G; g++)
        root_w[g] = gsb__forest_weight(stats + g * s->V1, (int)K);
    GSB_CHECK(gsb__forest_model_append(s->model, grown, G, seeds + t0, root_w, &src));
    gsb__profile_mark("trees appended: thresholds, leaf values (host)");
    s->trees_done += G;
    rc = gsb__progress(s->c, "trees", s->trees_done, 0.0);
done:
    for (int64_t g = 0; grown && g < G; g++)
        gsb__grown_free(&grown[g]);
    gsb__tensor_free(&rb);
    gsb__tensor_free(&wb);
    gsb__host_free(rows);
    gsb__host_free(w);
    free(stats);
    free(trees);
    free(grown);
    free(root_w);
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
    gsb__profile_mark("X to the backend, binned");
    int64_t per_tree = tree_cap(s);
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

/* ---- out-of-bag estimates --------------------------------------------------------- */

/* oob_score_ and oob_decision_function_ / oob_prediction_ of the fitted
 * trees (their seeds give their samples again), as scikit-learn's. */
static int compute_oob(gsb__ctx *c, const gsb__forest_cfg *cfg, const targets *t,
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
    /* rows no tree left out predict 0, as scikit-learn's */
    for (int64_t i = 0; i < n; i++)
        if (cnt[i] == 0) {
            gsb__warn("UserWarning", "Some inputs do not have OOB scores. This probably means "
                      "too few trees were used to compute any reliable OOB estimates.");
            break;
        }
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

/* The options "_tree_start" / "_tree_stop" (both or neither): grow only trees
 * [start, stop) of the n_estimators a cold fit grows, with the same seeds.
 * 1 (*from, *to set) when given, 0 when not, -1 (status set) when invalid. */
static int tree_share(gsb__ctx *c, int64_t n_old, int64_t *from, int64_t *to)
{
    int64_t a = gsb__opt_int(c, "_tree_start", -1), b = gsb__opt_int(c, "_tree_stop", -1);
    if (a < 0 && b < 0)
        return 0;
    if (n_old > 0 || a < 0 || b <= a || b > *to) {
        gsb__err(GSB_EINVAL, "%s: _tree_start=%lld, _tree_stop=%lld must give 0 <= start < "
                 "stop <= n_estimators=%lld on a fit without warm-started trees",
                 c->est->name, (long long)a, (long long)b, (long long)*to);
        return -1;
    }
    *from = a;
    *to = b;
    return 1;
}

int gsb__forest_oob(gsb__ctx *c, int classify)
{
    const gsb__tensor *X = gsb__in(c, "X");
    int64_t n = X->rows;
    gsb__forest_cfg cfg;
    targets t = {0};
    double *w = NULL;
    sampler smp = {n, 0, NULL};
    int rc;
    GSB_CHECK(gsb__forest_read_cfg(c, classify, n, X->cols, &cfg));
    GSB_CHECK(classify ? class_targets(c, &t) : regression_targets(c, cfg.criterion, &t));
    GSB_CHECK(sample_weights(c, &cfg, &t, &w));
    smp.n_boot = bootstrap_size(&cfg, n, w);
    GSB_CHECK(sampler_cdf(c, &cfg, w, &smp));
    rc = compute_oob(c, &cfg, &t, &smp);
done:
    targets_free(&t);
    free(w);
    free(smp.cdf);
    return rc;
}

/* ---- fit -------------------------------------------------------------------------- */

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

int gsb__forest_fit(gsb__ctx *c, int classify)
{
    const gsb__tensor *X = gsb__in(c, "X");
    int64_t n = X->rows, F = X->cols, n_old = 0;
    gsb__forest_cfg cfg;
    targets t = {0};
    double *w = NULL;
    uint64_t *seeds = NULL, bin_seed;
    gsb__tensor edges = GSB__TENSOR_NONE;
    gsb__forest_model model = {0};
    fit_state s = {0};
    int rc;
    if (n > INT32_MAX) {
        rc = gsb__err(GSB_EUNSUPPORTED, "%s: more than 2^31 - 1 rows", c->est->name);
        goto done;
    }
    gsb__profile_mark("inputs (dispatch)");
    GSB_CHECK(gsb__forest_read_cfg(c, classify, n, F, &cfg));
    GSB_CHECK(classify ? class_targets(c, &t) : regression_targets(c, cfg.criterion, &t));
    GSB_CHECK(sample_weights(c, &cfg, &t, &w));
    warn_settings(c, &cfg, n, w);
    gsb__profile_mark("targets, sample weights (host)");
    s = (fit_state){c, c->be, &cfg, &t, w, {n, bootstrap_size(&cfg, n, w), NULL},
                    GSB__TENSOR_NONE, GSB__TENSOR_NONE, &edges, 0, -1,
                    gsb__forest_nstats(classify ? (int)t.K : 0, (int)t.K), F, 0, &model};
    GSB_CHECK(sampler_cdf(c, &cfg, w, &s.smp));
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
            gsb__warn("UserWarning", "Warm-start fitting without increasing n_estimators does "
                      "not fit new trees.");
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
    gsb__profile_mark("bin edges (host)");
    /* a share of the trees (multidev_forest.c): trees [from, to) of the cold fit's seeds */
    int64_t from = n_old, to = cfg.n_estimators;
    int share = tree_share(c, n_old, &from, &to);
    if (share < 0) {
        rc = GSB_EINVAL;
        goto done;
    }
    rc = grow_all(&s, seeds, from, to);
    gsb__profile_mark(rc == GSB_OK ? "trees grown (rest)" : "trees tried");
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
        rc = grow_all(&s, seeds, from, to);
        gsb__profile_mark("trees grown again on the CPU (the GPU's kernels refused)");
    }
    if (rc != GSB_OK)
        goto done;
    gsb__profile_count("tree nodes", model.n_nodes);
    gsb__profile_count("tree leaves", model.n_leaves);
    GSB_CHECK(gsb__forest_model_store(c, &model));
    GSB_CHECK(store_targets(c, &t));
    gsb__profile_mark("trees stored as attributes");
    if (cfg.oob && !share) /* a share's OOB estimate is the whole forest's to make */
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
