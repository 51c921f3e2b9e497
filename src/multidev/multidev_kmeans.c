/*
 * multidev_kmeans.c - KMeans across the devices of a session: Lloyd's loop
 * of the single-device fit (kmeans.c's lloyd()) with the distributed steps
 * of kmeans_stats.c, as the Dask driver (python/gsb/dask/cluster.py) runs
 * them, over shards that stay on their devices for the whole loop:
 *   the column means (the "shift" the fit centres X by) and variances (tol)
 *   from the ranks' stats_moments; each shard centred once, on its device,
 *   as lloyd() centres X once (stats_lloyd's option centred: no centred copy
 *   per iteration; the raw shards come back for predict); then per
 *   iteration stats_lloyd on every
 *   rank (per-cluster sums, counts, inertia: all-reduced), when a cluster
 *   is empty the farthest points (gathered and merged), and lloyd_step on the
 *   first device; fit_from_stats stores the centres, and labels_ are each
 *   rank's predict, concatenated.
 * From the same explicit init it reaches the same centres, labels and n_iter_
 * as the one-device fit.  init='k-means++' / 'random' draw from all rows at
 * once and are not split yet: such a fit runs on the first device (the
 * caller warns).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "core/warn.h"
#include "estimators/common/partial_stats.h"
#include "multidev/multidev_impl.h"

typedef struct km_state {
    gsb__mdfit f;
    int64_t n, d, k;
    gsb_dtype dt;
    gsb__tensor centres;  /* k x d, X's dtype: the centred centres (stats_lloyd's input) */
    gsb__tensor shift;    /* 1 x d, X's dtype */
    gsb__tensor centres64, shift64; /* the same in float64 (the driver steps' inputs) */
    double tol;           /* absolute: tol * mean variance */
    json_t *opts;         /* {"dtype": X's} */
    gsb__tensor held[GSB__MAX_DEVICES]; /* per rank: X - shift (owned) while the raw
                                           shard is out of f.sh[r].x, then swapped back */
} km_state;

static double round_dt(gsb_dtype dt, double v) { return dt == GSB_F32 ? (double)(float)v : v; }

static const gsb__tensor *named(const gsb__method_desc *md, const gsb__tensor *in,
                                const char *name)
{
    for (int i = 0; i < GSB__MAX_INPUTS && md->inputs[i].name; i++)
        if (strcmp(md->inputs[i].name, name) == 0)
            return in[i].data ? &in[i] : NULL;
    return NULL;
}

/* The checks and warnings of kmeans_fit, in its words. */
static int check_inputs(const gsb__model *m, const gsb__tensor *X, const gsb__tensor *w,
                        const gsb__tensor *init, int64_t k)
{
    if (X->rows < k)
        return gsb__err(GSB_EINVAL, "n_samples=%lld should be >= n_clusters=%lld.",
                        (long long)X->rows, (long long)k);
    int nonzero = !w;
    for (int64_t i = 0; w && i < w->rows && !nonzero; i++)
        nonzero = ((const double *)w->data)[i] != 0;
    if (!nonzero)
        return gsb__err(GSB_EINVAL, "Sample weights must contain at least one non-zero number.");
    if (init->rows != k)
        return gsb__err(GSB_EINVAL, "The shape of the initial centers (%lld, %lld) does not "
                        "match the number of clusters %lld.", (long long)init->rows,
                        (long long)init->cols, (long long)k);
    if (init->cols != X->cols)
        return gsb__err(GSB_EINVAL, "The shape of the initial centers (%lld, %lld) does not "
                        "match the number of features of the data %lld.",
                        (long long)init->rows, (long long)init->cols, (long long)X->cols);
    if (!gsb__param_is(m->params, "n_init", "auto") && gsb__param_int(m->params, "n_init") != 1)
        gsb__warn("RuntimeWarning", "Explicit initial center position passed: performing only "
                  "one init in KMeans instead of n_init=%lld.",
                  (long long)gsb__param_int(m->params, "n_init"));
    return GSB_OK;
}

/* shift and tol from the ranks' unweighted column moments, as km_setup's */
static int moments(km_state *s)
{
    /* the fit's moments are unweighted: the shards' weights sit this pass out */
    gsb__tensor saved[GSB__MAX_DEVICES];
    for (int r = 0; r < s->f.ds->n; r++) {
        saved[r] = s->f.sh[r].w;
        s->f.sh[r].w = GSB__TENSOR_NONE;
    }
    gsb__tensor mom = GSB__TENSOR_NONE;
    int rc = gsb__md_stats(&s->f, "stats_moments", NULL, 0, NULL, 0, &mom);
    for (int r = 0; r < s->f.ds->n; r++)
        s->f.sh[r].w = saved[r];
    gsb__stats st;
    if (rc == GSB_OK)
        rc = gsb__stats_parse(&mom, GSB__STATS_MOMENTS, &st);
    double tol = gsb__param_float(s->f.m->params, "tol"), var = 0;
    for (int64_t j = 0; rc == GSB_OK && j < s->d; j++) {
        double mu = round_dt(s->dt, st.v[2 + j]);
        gsb__tensor_set(&s->shift, j, mu);
        gsb__tensor_set(&s->shift64, j, mu);
        var += round_dt(s->dt, st.v[2 + s->d + j] / (double)s->n);
    }
    s->tol = tol == 0 ? 0 : tol * (var / (double)s->d);
    gsb__tensor_free(&mom);
    return rc;
}

static void set_centres(km_state *s, const gsb__tensor *c)
{
    for (int64_t q = 0; q < s->k * s->d; q++) {
        double v = round_dt(s->dt, gsb__tensor_get(c, q));
        gsb__tensor_set(&s->centres, q, v);
        gsb__tensor_set(&s->centres64, q, v);
    }
}

/* Rank r's shard centred on its device (X - shift in X's dtype, as
 * stats_lloyd would centre it) into s->held[r]. */
static int centre_shard(gsb__mdfit *f, int r, void *arg)
{
    km_state *s = arg;
    const gsb__shard *sh = &f->sh[r];
    gsb__tensor Sb = GSB__TENSOR_NONE;
    int rc = gsb__tensor_to(sh->be, &s->shift, &Sb);
    Sb.rows = s->d; /* the 1 x d shift as the d-vector col_affine reads */
    Sb.cols = 1;
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(sh->be, s->dt, sh->x.rows, s->d, &s->held[r]);
    if (rc == GSB_OK)
        rc = sh->be->ops->col_affine(sh->be, &sh->x, &Sb, NULL, NULL, &s->held[r]);
    gsb__tensor_free(&Sb);
    return rc;
}

/* The centred shards in place of the raw ones, or back (an involution). */
static void swap_shards(km_state *s)
{
    for (int r = 0; r < s->f.ds->n; r++) {
        if (!s->held[r].data)
            continue; /* a rank without rows */
        gsb__tensor t = s->f.sh[r].x;
        s->f.sh[r].x = s->held[r];
        s->held[r] = t;
    }
}

/* stats_lloyd on every rank's centred shard (far: the farthest points too). */
static int lloyd_stats(km_state *s, int64_t far, gsb__tensor *out)
{
    gsb__md_extra extra[2] = {{"centers", &s->centres}, {"shift", &s->shift}};
    json_t *o = far ? json_pack("{s:b, s:I}", "centred", 1, "far", (json_int_t)far)
                    : json_pack("{s:b}", "centred", 1);
    if (!o)
        return gsb__err(GSB_ENOMEM, "out of memory");
    int rc = gsb__md_stats(&s->f, "stats_lloyd", extra, 2, o, far ? 1 : 0, out);
    json_decref(o);
    return rc;
}

/* One Lloyd iteration: the statistics of the current centres, the step. */
static int iterate(km_state *s, gsb__tensor *stats, int *moved, double *shift2)
{
    gsb__tensor far = GSB__TENSOR_NONE;
    gsb__nlist out = {0};
    gsb__tensor_free(stats);
    int rc = lloyd_stats(s, 0, stats);
    gsb__stats st;
    if (rc == GSB_OK)
        rc = gsb__stats_parse(stats, GSB__STATS_LLOYD, &st);
    int64_t n_empty = 0;
    for (int64_t j = 0; rc == GSB_OK && j < s->k; j++)
        n_empty += st.v[1 + j] == 0;
    if (rc == GSB_OK && n_empty)
        rc = lloyd_stats(s, n_empty, &far);
    if (rc == GSB_OK) {
        gsb__tensor in[GSB__MAX_INPUTS] = {*stats, far, s->centres64};
        in[0].owned = in[1].owned = in[2].owned = 0;
        rc = gsb__md_step(&s->f, "lloyd_step", in, s->opts, &out);
    }
    const gsb__tensor *c = gsb__nlist_get(&out, "centers"), *sh = gsb__nlist_get(&out, "shift"),
                      *mv = gsb__nlist_get(&out, "moved");
    if (rc == GSB_OK && (!c || !sh || !mv || gsb__tensor_numel(c) != s->k * s->d))
        rc = gsb__err(GSB_EINTERNAL, "KMeans.lloyd_step returned no centres");
    if (rc == GSB_OK) {
        set_centres(s, c);
        *moved = gsb__tensor_get(mv, 0) != 0;
        *shift2 = gsb__tensor_get(sh, 0);
    }
    gsb__tensor_free(&far);
    gsb__nlist_clear(&out);
    return rc;
}

/* labels_: each rank's predict of its rows, in row order. */
static int set_labels(km_state *s)
{
    gsb__nlist outs[GSB__MAX_DEVICES];
    memset(outs, 0, sizeof outs);
    gsb__tensor labels = GSB__TENSOR_NONE;
    int rc = gsb__md_run(&s->f, "predict", NULL, 0, NULL, 0, outs);
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_I32, s->n, 1, &labels);
    for (int r = 0; rc == GSB_OK && r < s->f.ds->n; r++) {
        const gsb__shard *sh = &s->f.sh[r];
        if (sh->r1 == sh->r0)
            continue;
        const gsb__tensor *l = gsb__nlist_get(&outs[r], "labels");
        if (!l || l->dtype != GSB_I32 || gsb__tensor_numel(l) != sh->r1 - sh->r0)
            rc = gsb__err(GSB_EINTERNAL, "KMeans.predict gave no labels on rank %d", r);
        else
            memcpy((int32_t *)labels.data + sh->r0, l->data,
                   (size_t)(sh->r1 - sh->r0) * sizeof(int32_t));
    }
    if (rc == GSB_OK) {
        gsb__tensor_as_1d(&labels);
        rc = gsb__nlist_put(&s->f.m->attrs, "labels_", &labels);
    }
    gsb__tensor_free(&labels);
    for (int r = 0; r < GSB__MAX_DEVICES; r++)
        gsb__nlist_clear(&outs[r]);
    return rc;
}

static int finish(km_state *s, gsb__tensor *stats, int64_t n_iter)
{
    json_t *o = json_deep_copy(s->opts);
    if (!o || json_object_set_new(o, "n_iter", json_integer((json_int_t)n_iter)) != 0) {
        json_decref(o);
        return gsb__err(GSB_ENOMEM, "out of memory");
    }
    gsb__tensor in[GSB__MAX_INPUTS] = {*stats, s->centres64, s->shift64};
    in[0].owned = in[1].owned = in[2].owned = 0;
    gsb__nlist ignored = {0};
    int rc = gsb__md_step(&s->f, "fit_from_stats", in, o, &ignored);
    gsb__nlist_clear(&ignored);
    json_decref(o);
    return rc == GSB_OK ? set_labels(s) : rc;
}

static int run(km_state *s, const gsb__tensor *init)
{
    GSB_TRY(moments(s));
    GSB_TRY(gsb__md_each(&s->f, centre_shard, s));
    for (int64_t q = 0; q < s->k * s->d; q++) { /* the given centres, moved like X */
        double v = round_dt(s->dt, gsb__tensor_get(init, q) - gsb__tensor_get(&s->shift, q % s->d));
        gsb__tensor_set(&s->centres, q, v);
        gsb__tensor_set(&s->centres64, q, v);
    }
    int64_t max_iter = gsb__param_int(s->f.m->params, "max_iter"), it;
    gsb__tensor stats = GSB__TENSOR_NONE;
    int moved = 1, rc = GSB_OK;
    swap_shards(s); /* centred shards for the loop */
    for (it = 0; it < max_iter && rc == GSB_OK; it++) {
        if (atomic_load(&s->f.m->cancel)) {
            rc = gsb__err(GSB_ECANCELLED, "KMeans.fit was cancelled at iteration %lld",
                          (long long)it);
            break;
        }
        double shift2 = 0;
        rc = iterate(s, &stats, &moved, &shift2);
        if (rc == GSB_OK && (!moved || shift2 <= s->tol))
            break;
    }
    int64_t n_iter = it < max_iter ? it + 1 : max_iter;
    if (rc == GSB_OK && moved) { /* the statistics of the final centres */
        gsb__tensor_free(&stats);
        rc = lloyd_stats(s, 0, &stats);
    }
    swap_shards(s); /* the raw shards back (predict's labels_, md_close) */
    if (rc == GSB_OK)
        rc = finish(s, &stats, n_iter);
    gsb__tensor_free(&stats);
    return rc;
}

int gsb__md_kmeans_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                       gsb__tensor *in, int *handled, const char **why)
{
    const gsb__tensor *X = named(md, in, "X"), *w = named(md, in, "sample_weight"),
                      *init = named(md, in, "init");
    *handled = 0;
    if (!init) {
        *why = "init='k-means++' and 'random' are not split across devices yet (an init "
               "array is)";
        return GSB_OK;
    }
    *handled = 1;
    km_state s;
    memset(&s, 0, sizeof s);
    s.n = X->rows;
    s.d = X->cols;
    s.k = gsb__param_int(m->params, "n_clusters");
    s.dt = X->dtype;
    GSB_TRY(check_inputs(m, X, w, init, s.k));
    int rc = gsb__md_open(ds, m, X, NULL, w, &s.f);
    if (rc != GSB_OK)
        return rc;
    const gsb__backend *cpu = gsb__cpu_backend();
    s.opts = json_pack("{s:s}", "dtype", s.dt == GSB_F32 ? "float32" : "float64");
    if (!s.opts)
        rc = gsb__err(GSB_ENOMEM, "out of memory");
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(cpu, s.dt, s.k, s.d, &s.centres);
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(cpu, s.dt, 1, s.d, &s.shift);
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(cpu, GSB_F64, s.k, s.d, &s.centres64);
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(cpu, GSB_F64, 1, s.d, &s.shift64);
    if (rc == GSB_OK)
        rc = run(&s, init);
    gsb__tensor_free(&s.centres);
    gsb__tensor_free(&s.shift);
    gsb__tensor_free(&s.centres64);
    gsb__tensor_free(&s.shift64);
    for (int r = 0; r < GSB__MAX_DEVICES; r++)
        gsb__tensor_free(&s.held[r]);
    json_decref(s.opts);
    gsb__md_close(&s.f);
    return rc;
}
