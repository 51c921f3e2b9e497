/*
 * multidev.c - the multi-device fit (multidev.h) and its building blocks
 * (multidev_impl.h).
 *
 * A recipe per estimator names its stats method and the options its
 * fit_from_stats needs.  The fit:
 *   1. splits X's rows (and y's, sample_weight's) into one contiguous range
 *      per rank (gsb__multidev_split) and places each on its rank's device
 *      (a GPU rank uploads its rows once, on its own thread);
 *   2. runs the stats method on every rank at once, one host thread per rank
 *      (the calling thread is rank 0), each on its rank's backend: the
 *      backend ops bind their device on whichever thread calls them;
 *   3. combines the packed statistics with the communicator: kinds that
 *      merge by summing (LLOYD, LOSSGRAD, COST) by an all-reduce of their
 *      payloads; the others (MOMENTS, GRAM: centred, whose exact merge is the
 *      pairwise update rather than a sum; FAR: a top-m) by an all-gather and
 *      the kind's merge (gsb__stats_merge) folded in rank order, so every run
 *      combines the same way;
 *   4. fits the model from the combination with fit_from_stats on the first
 *      device (a fit: the attributes are swapped in only on success).
 * Ranks with no rows (fewer rows than devices) contribute nothing: a zeroed
 * buffer, the identity of a sum, skipped by the fold.  fit_transform and
 * fit_predict are the multi-device fit, then transform / predict of X on
 * the first device.
 */
#include "multidev/multidev.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dispatch.h"
#include "core/tensor.h"
#include "core/warn.h"
#include "estimators/common/partial_stats.h"
#include "multidev/multidev_impl.h"

/* ---- recipes ------------------------------------------------------------------ */

typedef int (*options_fn)(const gsb__tensor *X, const gsb__tensor *y, const gsb__tensor *w,
                          json_t *o);

typedef struct recipe {
    const char *estimator;
    const char *stats;  /* the stats method, on the rank's rows */
    options_fn options; /* fit_from_stats's options */
    int uses_y;         /* 0: fit's y is accepted and ignored (scikit-learn's transformers) */
} recipe;

static int set(json_t *o, const char *key, json_t *v)
{
    if (!v || json_object_set_new(o, key, v) != 0)
        return gsb__err(GSB_ENOMEM, "out of memory");
    return GSB_OK;
}

static int opt_dtype(const gsb__tensor *X, const gsb__tensor *y, const gsb__tensor *w, json_t *o)
{
    (void)y;
    (void)w;
    return set(o, "dtype", json_string(X->dtype == GSB_F32 ? "float32" : "float64"));
}

static int opt_regressor(const gsb__tensor *X, const gsb__tensor *y, const gsb__tensor *w,
                         json_t *o)
{
    GSB_TRY(opt_dtype(X, y, w, o));
    return set(o, "y_1d", json_boolean(y && y->ndim == 1));
}

static int opt_weighted(const gsb__tensor *X, const gsb__tensor *y, const gsb__tensor *w,
                        json_t *o)
{
    (void)X;
    (void)y;
    return set(o, "weighted", json_boolean(w != NULL));
}

static const recipe recipes[] = {
    {"StandardScaler", "stats_moments", opt_weighted, 0},
    {"MinMaxScaler", "stats_moments", opt_dtype, 0},
    {"LinearRegression", "stats_gram", opt_regressor, 1},
    {"Ridge", "stats_gram", opt_regressor, 1},
    {"Lasso", "stats_gram", opt_regressor, 1},
    {"ElasticNet", "stats_gram", opt_regressor, 1},
    {"PCA", "stats_gram", opt_dtype, 0},
    {"TruncatedSVD", "stats_gram", opt_dtype, 0},
    {NULL, NULL, NULL, 0}};

/* The recipe for m's parameters, or NULL (with *why) when it has none. */
static const recipe *find_recipe(const gsb__model *m, const char **why)
{
    *why = "it has no multi-device fit yet";
    for (const recipe *r = recipes; r->estimator; r++) {
        if (strcmp(r->estimator, m->est->name) != 0)
            continue;
        /* positive=True is a constrained solve, not the normal equations */
        if (strcmp(r->estimator, "LinearRegression") == 0 &&
            gsb__param_bool(m->params, "positive")) {
            *why = "positive=True has no multi-device fit";
            return NULL;
        }
        return r;
    }
    return NULL;
}

void gsb__md_warn_once(gsb__devset *ds, const gsb__model *m, const char *method, const char *why)
{
    pthread_mutex_lock(&ds->warn_lock);
    int seen = 0;
    for (int i = 0; i < ds->n_warned; i++)
        seen |= ds->warned[i] == (const void *)m->est;
    if (!seen && ds->n_warned < (int)(sizeof ds->warned / sizeof ds->warned[0]))
        ds->warned[ds->n_warned++] = m->est;
    pthread_mutex_unlock(&ds->warn_lock);
    if (!seen)
        gsb__warn("UserWarning", "%s.%s runs on the first device of the %s session only: %s "
                  "(docs/MULTIGPU.md)", m->est->name, method, ds->label, why);
}

void gsb__multidev_split(int64_t n, int nranks, int r, int64_t *r0, int64_t *r1)
{
    int64_t base = n / nranks, extra = n % nranks;
    *r0 = r * base + (r < extra ? r : extra);
    *r1 = *r0 + base + (r < extra ? 1 : 0);
}

/* ---- running something on every rank ------------------------------------------ */

typedef struct rank_task {
    gsb__mdfit *f;
    int r;
    gsb__md_rank_fn fn;
    void *arg;
    int rc;
    char msg[1024];
} rank_task;

static void *task_main(void *p)
{
    rank_task *t = p;
    t->rc = t->fn(t->f, t->r, t->arg);
    if (t->rc != GSB_OK)
        snprintf(t->msg, sizeof t->msg, "%s", gsb_errmsg());
    return NULL;
}

int gsb__md_each(gsb__mdfit *f, gsb__md_rank_fn fn, void *arg)
{
    int n = f->ds->n;
    rank_task t[GSB__MAX_DEVICES];
    pthread_t tid[GSB__MAX_DEVICES];
    int started[GSB__MAX_DEVICES] = {0};
    for (int r = 0; r < n; r++)
        t[r] = (rank_task){f, r, fn, arg, GSB_OK, ""};
    for (int r = 1; r < n; r++)
        if (f->sh[r].r1 > f->sh[r].r0)
            started[r] = pthread_create(&tid[r], NULL, task_main, &t[r]) == 0;
    for (int r = 0; r < n; r++) {
        if (started[r])
            pthread_join(tid[r], NULL);
        else if (f->sh[r].r1 > f->sh[r].r0)
            task_main(&t[r]); /* rank 0, or no thread to be had: in turn */
    }
    for (int r = 0; r < n; r++)
        if (t[r].rc != GSB_OK)
            return gsb__err(t[r].rc, "%s", t[r].msg);
    return GSB_OK;
}

/* ---- shards --------------------------------------------------------------------- */

static int place_shard(gsb__mdfit *f, int r, void *arg)
{
    (void)arg;
    gsb__shard *s = &f->sh[r];
    if (s->be == gsb__cpu_backend())
        return GSB_OK; /* the host view is the shard */
    gsb__tensor view = s->x, dev = GSB__TENSOR_NONE;
    GSB_TRY(gsb__tensor_to(s->be, &view, &dev));
    dev.ndim = view.ndim;
    s->x = dev;
    return GSB_OK;
}

int gsb__md_open(gsb__devset *ds, gsb__model *m, const gsb__tensor *X, const gsb__tensor *y,
                 const gsb__tensor *w, gsb__mdfit *f)
{
    memset(f, 0, sizeof *f);
    f->ds = ds;
    f->m = m;
    f->X = X;
    f->y = y;
    f->w = w;
    for (int r = 0; r < ds->n; r++) {
        gsb__shard *s = &f->sh[r];
        s->be = ds->be[r];
        gsb__multidev_split(X->rows, ds->n, r, &s->r0, &s->r1);
        s->x = gsb__tensor_rows(X, s->r0, s->r1 - s->r0);
        if (y)
            s->y = gsb__tensor_rows(y, s->r0, s->r1 - s->r0);
        if (w)
            s->w = gsb__tensor_rows(w, s->r0, s->r1 - s->r0);
    }
    int rc = gsb__md_each(f, place_shard, NULL);
    if (rc != GSB_OK)
        gsb__md_close(f);
    return rc;
}

void gsb__md_close(gsb__mdfit *f)
{
    for (int r = 0; r < GSB__MAX_DEVICES; r++)
        if (f->sh[r].x.owned)
            gsb__tensor_free(&f->sh[r].x);
}

/* ---- methods on every shard ------------------------------------------------------- */

typedef struct run_args {
    const gsb__method_desc *smd;
    const gsb__md_extra *extra;
    int n_extra;
    const json_t *options;
    int with_offset;
    gsb__nlist *outs;
} run_args;

static int run_shard(gsb__mdfit *f, int r, void *arg)
{
    run_args *a = arg;
    const gsb__shard *s = &f->sh[r];
    gsb__tensor in[GSB__MAX_INPUTS];
    for (int i = 0; i < GSB__MAX_INPUTS; i++) {
        in[i] = GSB__TENSOR_NONE;
        const char *name = a->smd->inputs[i].name;
        if (!name)
            break;
        if ((a->smd->inputs[i].flags & GSB__IN_KIND_MASK) == GSB__IN_X) {
            in[i] = s->x;
            in[i].owned = 0; /* the shard owns it */
        } else if (strcmp(name, "y") == 0) {
            in[i] = s->y;
        } else if (strcmp(name, "sample_weight") == 0) {
            in[i] = s->w;
        } else {
            for (int e = 0; e < a->n_extra; e++)
                if (strcmp(a->extra[e].name, name) == 0 && a->extra[e].t)
                    in[i] = *a->extra[e].t, in[i].owned = 0;
        }
    }
    json_t *opts = NULL;
    if (a->with_offset) {
        opts = a->options ? json_deep_copy(a->options) : json_object();
        if (!opts || json_object_set_new(opts, "offset", json_integer((json_int_t)s->r0)) != 0) {
            json_decref(opts);
            return gsb__err(GSB_ENOMEM, "out of memory");
        }
    }
    int rc = gsb__dispatch_validated(f->m, a->smd, in, opts ? opts : a->options, &a->outs[r]);
    json_decref(opts);
    return rc;
}

int gsb__md_run(gsb__mdfit *f, const char *method, const gsb__md_extra *extra, int n_extra,
                const json_t *options, int with_offset, gsb__nlist *outs)
{
    const gsb__method_desc *smd = gsb__method_find(f->m->est, method);
    if (!smd)
        return gsb__err(GSB_EINTERNAL, "%s has no method %s", f->m->est->name, method);
    run_args a = {smd, extra, n_extra, options, with_offset, outs};
    return gsb__md_each(f, run_shard, &a);
}

int gsb__md_step(gsb__mdfit *f, const char *method, gsb__tensor *in, const json_t *options,
                 gsb__nlist *out)
{
    const gsb__method_desc *smd = gsb__method_find(f->m->est, method);
    if (!smd)
        return gsb__err(GSB_EINTERNAL, "%s has no method %s", f->m->est->name, method);
    return gsb__dispatch_validated(f->m, smd, in, options, out);
}

/* ---- combining ------------------------------------------------------------------- */

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

static int sum_kind(int kind)
{
    return kind == GSB__STATS_LLOYD || kind == GSB__STATS_LOSSGRAD || kind == GSB__STATS_COST;
}

/* Fold the gathered packed arrays (n blocks of len, zero blocks empty) in
 * rank order with the kind's merge; *out a new host tensor. */
static int fold(double *all, int n, int64_t len, gsb__tensor *out)
{
    gsb__tensor acc = GSB__TENSOR_NONE;
    int rc = GSB_OK;
    for (int q = 0; q < n && rc == GSB_OK; q++) {
        gsb__tensor blk = gsb__tensor_host_view(all + (size_t)q * (size_t)len, GSB_F64, len, 1);
        blk.ndim = 1;
        if (((double *)blk.data)[0] != GSB__STATS_MAGIC)
            continue; /* a rank without rows */
        if (!acc.data) {
            rc = gsb__tensor_to_host(&blk, &acc);
            continue;
        }
        gsb__stats a, b;
        gsb__tensor merged = GSB__TENSOR_NONE;
        rc = gsb__stats_parse(&acc, 0, &a);
        if (rc == GSB_OK)
            rc = gsb__stats_parse(&blk, 0, &b);
        if (rc == GSB_OK)
            rc = gsb__stats_merge(&a, &b, &merged);
        gsb__tensor_free(&acc);
        acc = merged;
    }
    if (rc == GSB_OK && !acc.data)
        rc = gsb__err(GSB_EINTERNAL, "multi-device fit: no rank had rows");
    if (rc != GSB_OK) {
        gsb__tensor_free(&acc);
        return rc;
    }
    acc.ndim = 1;
    *out = acc;
    return GSB_OK;
}

int gsb__md_combine(gsb__mdfit *f, gsb__nlist *outs, gsb__tensor *out)
{
    gsb__devset *ds = f->ds;
    int n = ds->n, first = -1;
    int64_t len = 0;
    const gsb__tensor *st[GSB__MAX_DEVICES] = {0};
    for (int r = 0; r < n; r++) {
        if (f->sh[r].r1 == f->sh[r].r0)
            continue;
        st[r] = gsb__nlist_get(&outs[r], "stats");
        if (!st[r] || st[r]->dtype != GSB_F64 || (first >= 0 && gsb__tensor_numel(st[r]) != len))
            return gsb__err(GSB_EINTERNAL, "multi-device fit: rank %d's statistics are "
                            "missing or of another size", r);
        if (first < 0) {
            first = r;
            len = gsb__tensor_numel(st[r]);
        }
    }
    if (first < 0 || len < GSB__STATS_HEAD)
        return gsb__err(GSB_EINTERNAL, "multi-device fit: no statistics");
    int kind = (int)((const double *)st[first]->data)[1];
    size_t blk = (size_t)len * sizeof(double);
    /* per rank: its statistics (zeros without rows), then for a gather n blocks */
    size_t per = sum_kind(kind) ? blk : blk * (size_t)(n + 1);
    char *mem = calloc((size_t)n, per);
    if (!mem)
        return gsb__err(GSB_ENOMEM, "out of memory");
    void *send[GSB__MAX_DEVICES], *recv[GSB__MAX_DEVICES];
    for (int r = 0; r < n; r++) {
        send[r] = mem + (size_t)r * per;
        recv[r] = (char *)send[r] + blk;
        if (st[r])
            memcpy(send[r], st[r]->data, blk);
    }
    int rc;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (sum_kind(kind)) {
        void *payload[GSB__MAX_DEVICES];
        for (int r = 0; r < n; r++)
            payload[r] = (double *)send[r] + GSB__STATS_HEAD;
        rc = ds->comm->ops->allreduce_sum(ds->comm, payload, len - GSB__STATS_HEAD, GSB_F64);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        gsb__devset_count_collective(ds, (len - GSB__STATS_HEAD) * (int64_t)sizeof(double),
                                     seconds_between(&t0, &t1));
        if (rc == GSB_OK) {
            gsb__tensor v = gsb__tensor_host_view(send[first], GSB_F64, len, 1);
            rc = gsb__tensor_to_host(&v, out); /* the header is the first rank's */
            out->ndim = 1;
        }
    } else {
        rc = ds->comm->ops->allgather(ds->comm, (const void *const *)send, recv, len, GSB_F64);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        gsb__devset_count_collective(ds, len * (int64_t)sizeof(double),
                                     seconds_between(&t0, &t1));
        if (rc == GSB_OK)
            rc = fold(recv[0], n, len, out);
    }
    free(mem);
    return rc;
}

int gsb__md_stats(gsb__mdfit *f, const char *method, const gsb__md_extra *extra, int n_extra,
                  const json_t *options, int with_offset, gsb__tensor *out)
{
    gsb__nlist outs[GSB__MAX_DEVICES];
    memset(outs, 0, sizeof outs);
    int rc = gsb__md_run(f, method, extra, n_extra, options, with_offset, outs);
    if (rc == GSB_OK)
        rc = gsb__md_combine(f, outs, out);
    for (int r = 0; r < GSB__MAX_DEVICES; r++)
        gsb__nlist_clear(&outs[r]);
    return rc;
}

/* ---- the fit --------------------------------------------------------------------- */

static const gsb__tensor *fit_input(const gsb__method_desc *md, const gsb__tensor *in,
                                    const char *name)
{
    for (int i = 0; i < GSB__MAX_INPUTS && md->inputs[i].name; i++)
        if (strcmp(md->inputs[i].name, name) == 0)
            return in[i].data ? &in[i] : NULL;
    return NULL;
}

/* A recipe's fit: the statistics once, then fit_from_stats. */
static int recipe_fit(gsb__devset *ds, gsb__model *m, const recipe *rcp,
                      const gsb__method_desc *md, gsb__tensor *in)
{
    const gsb__tensor *X = fit_input(md, in, "X"),
                      *y = rcp->uses_y ? fit_input(md, in, "y") : NULL,
                      *w = fit_input(md, in, "sample_weight");
    gsb__mdfit f;
    GSB_TRY(gsb__md_open(ds, m, X, y, w, &f));
    gsb__tensor stats = GSB__TENSOR_NONE;
    int rc = gsb__md_stats(&f, rcp->stats, NULL, 0, NULL, 0, &stats);
    json_t *opts = NULL;
    if (rc == GSB_OK && !(opts = json_object()))
        rc = gsb__err(GSB_ENOMEM, "out of memory");
    if (rc == GSB_OK)
        rc = rcp->options(X, y, w, opts);
    gsb__nlist ignored = {0};
    if (rc == GSB_OK) {
        gsb__tensor fin[GSB__MAX_INPUTS] = {stats};
        rc = gsb__md_step(&f, "fit_from_stats", fin, opts, &ignored);
    }
    gsb__nlist_clear(&ignored);
    json_decref(opts);
    gsb__tensor_free(&stats);
    gsb__md_close(&f);
    return rc;
}

/* fit_transform / fit_predict: the fit, then transform / predict of X here. */
static int then_apply(gsb__model *m, const gsb__method_desc *md, gsb__tensor *in,
                      const json_t *options, gsb__nlist *out)
{
    const char *then = strcmp(md->name, "fit_predict") == 0 ? "predict" : "transform";
    const gsb__method_desc *next = gsb__method_find(m->est, then);
    if (!next)
        return gsb__err(GSB_EINTERNAL, "%s has no %s", m->est->name, then);
    gsb__tensor nin[GSB__MAX_INPUTS] = {*fit_input(md, in, "X")};
    nin[0].owned = 0;
    return gsb__dispatch_validated(m, next, nin, options, out);
}

int gsb__multidev_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                      gsb__tensor *in, const json_t *options, gsb__nlist *out, int *handled)
{
    *handled = 0;
    int composite = strcmp(md->name, "fit_transform") == 0 || strcmp(md->name, "fit_predict") == 0;
    if (strcmp(md->name, "fit") != 0 && !composite) {
        if (strcmp(md->name, "fit_from_stats") != 0 && /* a driver's own step: no warning */
            strcmp(md->name, "fit_from_trees") != 0)
            gsb__md_warn_once(ds, m, md->name, "only fit is split across devices");
        return GSB_OK;
    }
    const char *why = "it has no multi-device fit yet";
    const recipe *rcp = find_recipe(m, &why);
    const gsb__tensor *X = fit_input(md, in, "X");
    if (!X) {
        gsb__md_warn_once(ds, m, md->name, "no X");
        return GSB_OK;
    }
    if (gsb__md_knn_estimator(m) && !composite) /* X (wherever it is) becomes the shards */
        return gsb__md_knn_fit(ds, m, md, in, options, out, handled);
    if (X->be != gsb__cpu_backend()) {
        gsb__md_warn_once(ds, m, md->name, "X is already in one device's memory");
        return GSB_OK;
    }
    int rc = GSB_OK;
    if (rcp) {
        *handled = 1;
        rc = recipe_fit(ds, m, rcp, md, in);
    } else if (strcmp(m->est->name, "KMeans") == 0) {
        rc = gsb__md_kmeans_fit(ds, m, md, in, handled, &why);
    } else if (strcmp(m->est->name, "LogisticRegression") == 0) {
        rc = gsb__md_logistic_fit(ds, m, md, in, handled, &why);
    } else if (gsb__md_forest_estimator(m) && !composite) {
        rc = gsb__md_forest_fit(ds, m, md, in, handled, &why);
    }
    if (!*handled) {
        gsb__md_warn_once(ds, m, md->name, why);
        return GSB_OK;
    }
    if (rc != GSB_OK) { /* as a failed single-device fit: the model is left unfitted */
        gsb__model_drop_devstate(m);
        gsb__nlist_clear(&m->attrs);
        m->fitted = 0;
        return rc;
    }
    return composite ? then_apply(m, md, in, options, out) : GSB_OK;
}
