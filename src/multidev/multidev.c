/*
 * multidev.c - the multi-device fit (multidev.h).
 *
 * A recipe per estimator names its stats method and the options its
 * fit_from_stats needs.  The fit:
 *   1. splits X's rows (and y's, sample_weight's) into one contiguous range
 *      per rank (gsb__multidev_split);
 *   2. runs the stats method on every rank at once, one host thread per rank
 *      (the calling thread is rank 0), each on its rank's backend: a GPU
 *      rank uploads its rows to its GPU first, so the stats method computes
 *      there (the backend ops bind their device on whichever thread calls);
 *   3. combines the packed statistics with the communicator: kinds that
 *      merge by summing (LLOYD, LOSSGRAD, COST) by an all-reduce of their
 *      payloads; the centred kinds (MOMENTS, GRAM), whose exact merge is the
 *      pairwise update rather than a sum, by an all-gather and the merge
 *      (gsb__stats_merge) folded in rank order, so every run combines the
 *      same way;
 *   4. fits the model from the combination with fit_from_stats on the first
 *      device (a fit: the attributes are swapped in only on success).
 * Ranks with no rows (fewer rows than devices) contribute nothing: a zeroed
 * buffer, the identity of a sum, skipped by the fold.
 */
#include "multidev/multidev.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dispatch.h"
#include "core/tensor.h"
#include "core/warn.h"
#include "estimators/common/partial_stats.h"

/* ---- recipes ------------------------------------------------------------------ */

typedef int (*options_fn)(const gsb__tensor *X, const gsb__tensor *y, const gsb__tensor *w,
                          json_t *o);

typedef struct recipe {
    const char *estimator;
    const char *stats; /* the stats method, on the rank's rows */
    options_fn options; /* fit_from_stats's options */
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
    {"StandardScaler", "stats_moments", opt_weighted},
    {"MinMaxScaler", "stats_moments", opt_dtype},
    {"LinearRegression", "stats_gram", opt_regressor},
    {"Ridge", "stats_gram", opt_regressor},
    {"PCA", "stats_gram", opt_dtype},
    {"TruncatedSVD", "stats_gram", opt_dtype},
    {NULL, NULL, NULL}};

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

static void warn_once(gsb__devset *ds, const gsb__model *m, const char *method, const char *why)
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

/* ---- the ranks ---------------------------------------------------------------- */

typedef struct rank_job {
    gsb__model *m;
    const gsb__method_desc *smd; /* the stats method */
    const gsb__backend *be;
    gsb__tensor in[GSB__MAX_INPUTS]; /* row views of the fit's inputs, as smd declares */
    int xi;                          /* X's place in in */
    gsb__tensor dev;                 /* X's rows on a GPU rank's device */
    gsb__nlist out;
    int rc, has_rows;
    char msg[1024];
} rank_job;

/* Rows [r0, r1) of a host tensor, borrowed. */
static gsb__tensor row_view(const gsb__tensor *t, int64_t r0, int64_t r1)
{
    gsb__tensor v = *t;
    v.data = (char *)t->data + (size_t)r0 * (size_t)t->cols * gsb_dtype_size(t->dtype);
    v.rows = r1 - r0;
    v.owned = 0;
    return v;
}

static void *rank_run(void *p)
{
    rank_job *j = p;
    int rc = GSB_OK;
    if (j->be != gsb__cpu_backend()) {
        rc = gsb__tensor_to(j->be, &j->in[j->xi], &j->dev);
        if (rc == GSB_OK) {
            j->dev.ndim = j->in[j->xi].ndim;
            j->in[j->xi] = j->dev;
            j->in[j->xi].owned = 0; /* j->dev owns it */
        }
    }
    if (rc == GSB_OK)
        rc = gsb__dispatch_validated(j->m, j->smd, j->in, NULL, &j->out);
    if (rc != GSB_OK)
        snprintf(j->msg, sizeof j->msg, "%s", gsb_errmsg());
    gsb__tensor_free(&j->dev);
    j->rc = rc;
    return NULL;
}

/* Set up rank r's job: its rows of the fit's inputs, placed as smd declares. */
static int rank_setup(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                      const gsb__tensor *in, const gsb__method_desc *smd, int r, rank_job *j)
{
    j->m = m;
    j->smd = smd;
    j->be = ds->be[r];
    j->xi = -1;
    int64_t n = 0;
    for (int i = 0; i < GSB__MAX_INPUTS && md->inputs[i].name; i++)
        if ((md->inputs[i].flags & GSB__IN_KIND_MASK) == GSB__IN_X)
            n = in[i].rows;
    int64_t r0, r1;
    gsb__multidev_split(n, ds->n, r, &r0, &r1);
    j->has_rows = r1 > r0;
    for (int s = 0; s < GSB__MAX_INPUTS && smd->inputs[s].name; s++) {
        for (int i = 0; i < GSB__MAX_INPUTS && md->inputs[i].name; i++)
            if (strcmp(md->inputs[i].name, smd->inputs[s].name) == 0 && in[i].data)
                j->in[s] = row_view(&in[i], r0, r1);
        if ((smd->inputs[s].flags & GSB__IN_KIND_MASK) == GSB__IN_X)
            j->xi = s;
    }
    if (j->xi < 0 || !j->in[j->xi].data)
        return gsb__err(GSB_EINTERNAL, "%s.%s: no X for the multi-device fit", m->est->name,
                        smd->name);
    return GSB_OK;
}

/* Every rank with rows runs its job, ranks 1.. on threads of their own. */
static int run_ranks(gsb__devset *ds, rank_job *jobs)
{
    pthread_t tid[GSB__MAX_DEVICES];
    int started[GSB__MAX_DEVICES] = {0};
    for (int r = 1; r < ds->n; r++)
        if (jobs[r].has_rows)
            started[r] = pthread_create(&tid[r], NULL, rank_run, &jobs[r]) == 0;
    if (jobs[0].has_rows)
        rank_run(&jobs[0]);
    for (int r = 1; r < ds->n; r++) {
        if (started[r])
            pthread_join(tid[r], NULL);
        else if (jobs[r].has_rows)
            rank_run(&jobs[r]); /* no thread to be had: in turn */
    }
    for (int r = 0; r < ds->n; r++)
        if (jobs[r].has_rows && jobs[r].rc != GSB_OK)
            return gsb__err(jobs[r].rc, "%s", jobs[r].msg);
    return GSB_OK;
}

/* ---- combining ---------------------------------------------------------------- */

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

/* The ranks' "stats" results combined through the communicator into *out. */
static int combine(gsb__devset *ds, rank_job *jobs, gsb__tensor *out)
{
    int n = ds->n, first = -1;
    int64_t len = 0;
    for (int r = 0; r < n; r++) {
        if (!jobs[r].has_rows)
            continue;
        const gsb__tensor *t = gsb__nlist_get(&jobs[r].out, "stats");
        if (!t || t->dtype != GSB_F64 || (first >= 0 && gsb__tensor_numel(t) != len))
            return gsb__err(GSB_EINTERNAL, "multi-device fit: rank %d's statistics are "
                            "missing or of another size", r);
        if (first < 0) {
            first = r;
            len = gsb__tensor_numel(t);
        }
    }
    if (first < 0 || len < GSB__STATS_HEAD)
        return gsb__err(GSB_EINTERNAL, "multi-device fit: no statistics");
    int kind = (int)((const double *)gsb__nlist_get(&jobs[first].out, "stats")->data)[1];
    size_t blk = (size_t)len * sizeof(double);
    /* one buffer per rank (its statistics, zeros without rows), and for a
     * gather n times that for each rank's result */
    size_t per = sum_kind(kind) ? blk : blk * (size_t)(n + 1);
    char *mem = calloc((size_t)n, per);
    if (!mem)
        return gsb__err(GSB_ENOMEM, "out of memory");
    void *send[GSB__MAX_DEVICES], *recv[GSB__MAX_DEVICES];
    for (int r = 0; r < n; r++) {
        send[r] = mem + (size_t)r * per;
        recv[r] = (char *)send[r] + blk;
        if (jobs[r].has_rows)
            memcpy(send[r], gsb__nlist_get(&jobs[r].out, "stats")->data, blk);
    }
    int rc;
    if (sum_kind(kind)) {
        void *payload[GSB__MAX_DEVICES];
        for (int r = 0; r < n; r++)
            payload[r] = (double *)send[r] + GSB__STATS_HEAD;
        rc = ds->comm->ops->allreduce_sum(ds->comm, payload, len - GSB__STATS_HEAD, GSB_F64);
        if (rc == GSB_OK) {
            gsb__tensor v = gsb__tensor_host_view(send[first], GSB_F64, len, 1);
            rc = gsb__tensor_to_host(&v, out); /* the header is the first rank's */
            out->ndim = 1;
        }
    } else {
        rc = ds->comm->ops->allgather(ds->comm, (const void *const *)send, recv, len, GSB_F64);
        if (rc == GSB_OK)
            rc = fold(recv[0], n, len, out);
    }
    free(mem);
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

static int finish(gsb__model *m, const recipe *rc_, const gsb__method_desc *md,
                  const gsb__tensor *in, gsb__tensor *stats, gsb__nlist *out)
{
    const gsb__method_desc *ffs = gsb__method_find(m->est, "fit_from_stats");
    if (!ffs)
        return gsb__err(GSB_EINTERNAL, "%s has no fit_from_stats", m->est->name);
    json_t *opts = json_object();
    if (!opts)
        return gsb__err(GSB_ENOMEM, "out of memory");
    int rc = rc_->options(fit_input(md, in, "X"), fit_input(md, in, "y"),
                          fit_input(md, in, "sample_weight"), opts);
    if (rc == GSB_OK) {
        gsb__tensor fin[GSB__MAX_INPUTS] = {*stats};
        rc = gsb__dispatch_validated(m, ffs, fin, opts, out);
    }
    json_decref(opts);
    return rc;
}

int gsb__multidev_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md,
                      gsb__tensor *in, const json_t *options, gsb__nlist *out, int *handled)
{
    (void)options; /* the fits' options are those of the single-device fit: none used */
    *handled = 0;
    if (strcmp(md->name, "fit") != 0) {
        if (strcmp(md->name, "fit_from_stats") != 0) /* a driver's own step: no warning */
            warn_once(ds, m, md->name, "only fit is split across devices");
        return GSB_OK;
    }
    const char *why;
    const recipe *rcp = find_recipe(m, &why);
    const gsb__tensor *X = fit_input(md, in, "X");
    if (rcp && X && X->be != gsb__cpu_backend()) {
        rcp = NULL;
        why = "X is already in one device's memory";
    }
    const gsb__method_desc *smd = rcp ? gsb__method_find(m->est, rcp->stats) : NULL;
    if (!smd || !X) {
        warn_once(ds, m, md->name, why);
        return GSB_OK;
    }
    *handled = 1;
    rank_job *jobs = calloc((size_t)ds->n, sizeof *jobs);
    if (!jobs)
        return gsb__err(GSB_ENOMEM, "out of memory");
    int rc = GSB_OK;
    for (int r = 0; r < ds->n && rc == GSB_OK; r++)
        rc = rank_setup(ds, m, md, in, smd, r, &jobs[r]);
    if (rc == GSB_OK)
        rc = run_ranks(ds, jobs);
    gsb__tensor stats = GSB__TENSOR_NONE;
    if (rc == GSB_OK)
        rc = combine(ds, jobs, &stats);
    for (int r = 0; r < ds->n; r++)
        gsb__nlist_clear(&jobs[r].out);
    free(jobs);
    if (rc == GSB_OK) {
        rc = finish(m, rcp, md, in, &stats, out);
    } else { /* as a failed single-device fit: the model is left unfitted */
        gsb__nlist_clear(&m->attrs);
        m->fitted = 0;
    }
    gsb__tensor_free(&stats);
    return rc;
}
