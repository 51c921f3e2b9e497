/*
 * multidev_knn.c - NearestNeighbors, KNeighborsClassifier and
 * KNeighborsRegressor across the devices of a session (multidev_knn.h).
 *
 * fit is the one-device fit (the training rows, "_fit_X", kept on the host
 * as always), then the rows split into one contiguous shard per rank
 * (gsb__multidev_split) and each shard placed on its rank's device, where
 * it stays (the model's devstate) for every search until the model is
 * refitted or freed.  A model without shards (imported from a blob) gets
 * them at its first search.
 *
 * A search (kneighbors, predict, predict_proba, score: every call of
 * neighbors.c's search) sends the queries to every rank; each rank, on its
 * own host thread, runs the backend's topk of the queries against its
 * shard, in blocks of queries that fit beside the shard, and brings its
 * lists home.  The host merges the ranks' lists of each query by (distance,
 * global row): shards are contiguous and ascending, each rank's list is
 * sorted by (distance, local row), so the merge gives the k smallest
 * distances with ties to the smaller row, as the one-device topk does: the
 * same neighbours, the distances as the same kernel computes them.  A search
 * of the training rows themselves (X absent, leave-one-out) asks each shard
 * for k + 1 and skips the query's own row in the merge: the first k of the
 * rest are exactly the k nearest other rows (as neighbors_stream.c does).
 *
 * A shard that does not fit in half of its device's memory budget (core/
 * budget.h) is not placed: the session warns once and searches on the first
 * device (streamed there when it must be).  The host merge is a k-way
 * merge of at most 16 lists per query, O(nq k ranks).
 */
#include "multidev/multidev_knn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/budget.h"
#include "core/dispatch.h"
#include "core/model.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "multidev/multidev.h"
#include "multidev/multidev_impl.h"

/* ---- the shards -------------------------------------------------------------------- */

typedef struct knn_state {
    gsb__mdfit f;         /* f.sh[r]: rank r's rows of the index (a GPU rank: a copy
                             on its device; a CPU rank: a view of _fit_X) */
    const void *data;     /* the _fit_X they were made from */
    int64_t rows, cols;
    gsb_dtype dtype;
    int resident;         /* 0: some shard does not fit its device: not placed */
} knn_state;

static void knn_state_free(void *p)
{
    knn_state *st = p;
    gsb__md_close(&st->f);
    free(st);
}

int gsb__md_knn_estimator(const gsb__model *m)
{
    const char *n = m->est->name;
    return strcmp(n, "NearestNeighbors") == 0 || strcmp(n, "KNeighborsClassifier") == 0 ||
           strcmp(n, "KNeighborsRegressor") == 0;
}

/* *fits 1 when every rank's shard of fit_X fits in half of its device's
 * budget (the other half for the queries and their lists); CPU ranks count
 * only under a memory cap, which makes cpu:N behave as small GPUs. */
static int shards_fit(gsb__devset *ds, const gsb_session *s, const gsb__tensor *fit_X, int *fits)
{
    *fits = 1;
    for (int r = 0; r < ds->n; r++) {
        if (ds->be[r] == gsb__cpu_backend() && !s->memory_cap)
            continue; /* a view of the host rows; a cap (cpu:N) makes it a device's */
        int64_t r0, r1;
        gsb__multidev_split(fit_X->rows, ds->n, r, &r0, &r1);
        size_t bytes = (size_t)(r1 - r0) * (size_t)fit_X->cols * gsb_dtype_size(fit_X->dtype);
        size_t budget;
        GSB_TRY(gsb__memory_budget(s, ds->be[r], &budget));
        if (bytes > budget / 2)
            *fits = 0;
    }
    return GSB_OK;
}

/* Place m's training rows fit_X on ds's devices; *out the model's new state. */
static int place(gsb__devset *ds, gsb__model *m, const gsb__tensor *fit_X, knn_state **out)
{
    gsb__model_drop_devstate(m);
    knn_state *st = calloc(1, sizeof *st);
    if (!st)
        return gsb__err(GSB_ENOMEM, "out of memory");
    st->data = fit_X->data;
    st->rows = fit_X->rows;
    st->cols = fit_X->cols;
    st->dtype = fit_X->dtype;
    int rc = shards_fit(ds, m->session, fit_X, &st->resident);
    if (rc == GSB_OK && st->resident)
        rc = gsb__md_open(ds, m, fit_X, NULL, NULL, &st->f); /* closes itself on failure */
    if (rc != GSB_OK) {
        free(st);
        return rc;
    }
    st->f.X = NULL; /* the shards outlive this call; the views are of _fit_X's data */
    m->devstate = st;
    m->devstate_free = knn_state_free;
    *out = st;
    return GSB_OK;
}

int gsb__md_knn_fit(gsb__devset *ds, gsb__model *m, const gsb__method_desc *md, gsb__tensor *in,
                    const json_t *options, gsb__nlist *out, int *handled)
{
    *handled = 1;
    GSB_TRY(gsb__dispatch_validated(m, md, in, options, out)); /* _fit_X on the host */
    const gsb__tensor *fit_X = gsb__nlist_get(&m->attrs, "_fit_X");
    knn_state *st = NULL;
    int rc = fit_X ? place(ds, m, fit_X, &st)
                   : gsb__err(GSB_EINTERNAL, "%s.fit stored no training rows", m->est->name);
    if (rc == GSB_OK && !st->resident)
        gsb__md_warn_once(ds, m, "kneighbors", "a shard of the training rows does not fit "
                          "in half of its device's free memory (or the memory cap)");
    if (rc != GSB_OK) { /* as a failed fit: unfitted */
        gsb__model_drop_devstate(m);
        gsb__nlist_clear(&m->attrs);
        m->fitted = 0;
    }
    return rc;
}

/* ---- the search on every rank --------------------------------------------------- */

typedef struct knn_job {
    const gsb_session *s;
    const gsb__tensor *Q; /* host queries (X, or _fit_X for leave-one-out) */
    const gsb__tensor *R; /* the index, _fit_X (host) */
    int self;             /* the queries are the index rows: skip each one's own row */
    gsb__metric metric;
    gsb_dtype cdt;
    int64_t kk[GSB__MAX_DEVICES];   /* rank r's list length: min(k + self, its rows) */
    gsb__tensor D[GSB__MAX_DEVICES]; /* rank r's lists (host, nq x kk[r], cdt) ... */
    gsb__tensor I[GSB__MAX_DEVICES]; /* ... and their local rows (int64) */
} knn_job;

/* Queries per block on rank r: a quarter of what its device has beside the
 * shard, per query its row and two lists (the op's and its scratch). */
static int block_rows(const knn_job *j, const gsb__shard *sh, int64_t kk, int64_t *out)
{
    int64_t nq = j->Q->rows;
    size_t cs = gsb_dtype_size(j->cdt);
    size_t qrow = (size_t)j->Q->cols * cs + (size_t)kk * (cs + 8) * 2;
    size_t budget;
    GSB_TRY(gsb__memory_budget(j->s, sh->be, &budget));
    size_t held = sh->x.owned ? gsb__tensor_nbytes(&sh->x) : 0;
    if (j->s->memory_cap) /* the cap counts the resident shard too */
        budget = budget > held ? budget - held : 0;
    double fit = (double)budget / 4.0 / (double)qrow;
    *out = fit >= (double)nq ? nq : fit < 1 ? 1 : (int64_t)fit;
    return GSB_OK;
}

/* Rank r: the top kk[r] of its shard for every query, into D[r], I[r]. */
static int rank_search(gsb__mdfit *f, int r, void *arg)
{
    knn_job *j = arg;
    const gsb__shard *sh = &f->sh[r];
    const gsb__backend *be = sh->be;
    int64_t kk = j->kk[r], nq = j->Q->rows, qrows;
    size_t cs = gsb_dtype_size(j->cdt);
    gsb__tensor R = GSB__TENSOR_NONE, Q = GSB__TENSOR_NONE, d = GSB__TENSOR_NONE,
                ix = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(block_rows(j, sh, kk, &qrows));
    /* the shard in the compute dtype (itself when X's dtype is the index's) */
    GSB_CHECK(gsb__tensor_to_dtype(be, &sh->x, j->cdt, &R));
    for (int64_t q0 = 0; q0 < nq; q0 += qrows) {
        int64_t nb = nq - q0 < qrows ? nq - q0 : qrows;
        gsb__tensor qh = gsb__tensor_rows(j->Q, q0, nb);
        GSB_CHECK(gsb__tensor_to_dtype(be, &qh, j->cdt, &Q));
        GSB_CHECK(gsb__tensor_alloc(be, j->cdt, nb, kk, &d));
        GSB_CHECK(gsb__tensor_alloc(be, GSB_I64, nb, kk, &ix));
        GSB_CHECK(be->ops->topk(be, &Q, &R, kk, j->metric, 0, &d, &ix));
        GSB_CHECK(be->ops->download(be, &d, (char *)j->D[r].data + (size_t)(q0 * kk) * cs));
        GSB_CHECK(be->ops->download(be, &ix, (int64_t *)j->I[r].data + q0 * kk));
        gsb__tensor_free(&Q);
        gsb__tensor_free(&d);
        gsb__tensor_free(&ix);
    }
done:
    gsb__tensor_free(&Q);
    gsb__tensor_free(&d);
    gsb__tensor_free(&ix);
    gsb__tensor_free(&R);
    return rc;
}

/* ---- the merge ------------------------------------------------------------------- */

/* (distance, row) order; a NaN distance after every number. */
static int before(double da, int64_t ia, double db, int64_t ib)
{
    if (da == db || (isnan(da) && isnan(db)))
        return ia < ib;
    return isnan(db) || da < db;
}

/* The distance of float32 query q and index row g in double, as the topk op
 * ranks them (its CPU twin's exact kernels; euclidean squared). */
static double exact_f32(const knn_job *j, int64_t q, int64_t g)
{
    int64_t d = j->R->cols;
    const float *a = (const float *)j->Q->data + q * d, *b = (const float *)j->R->data + g * d;
    double s = 0, aa = 0, bb = 0;
    for (int64_t c = 0; c < d; c++) {
        double x = a[c], y = b[c];
        if (j->metric == GSB__METRIC_MANHATTAN) {
            s += fabs(x - y);
        } else if (j->metric == GSB__METRIC_COSINE) {
            s += x * y;
            aa += x * x;
            bb += y * y;
        } else {
            s += (x - y) * (x - y);
        }
    }
    if (j->metric == GSB__METRIC_COSINE) {
        double v = 1.0 - s * (aa > 0 ? 1 / sqrt(aa) : 0) * (bb > 0 ? 1 / sqrt(bb) : 0);
        return v < 0.0 ? 0.0 : v > 2.0 ? 2.0 : v;
    }
    return s;
}

/* Whether the head (va, ga) of one rank's list of query q goes before the
 * head (vb, gb) of another's.  float32 distances that round alike are
 * ranked by their double values, as the one-device op ranks them (it
 * computes in double, and rounds only what it returns). */
static int head_before(const knn_job *j, int64_t q, double va, int64_t ga, double vb,
                       int64_t gb)
{
    if (va == vb && j->cdt == GSB_F32) {
        double ea = exact_f32(j, q, ga), eb = exact_f32(j, q, gb);
        if (ea != eb)
            return ea < eb;
    }
    return before(va, ga, vb, gb);
}

/* The k nearest of each query from the ranks' lists, into dist and idx. */
static int merge(const gsb__mdfit *f, const knn_job *j, int64_t k, gsb__tensor *dist,
                 gsb__tensor *idx)
{
    int n = f->ds->n;
    int64_t *oi = idx->data;
    for (int64_t q = 0; q < j->Q->rows; q++) {
        int64_t pos[GSB__MAX_DEVICES] = {0}, self = j->self ? q : -1;
        for (int64_t t = 0; t < k; t++) {
            int best = -1;
            double bd = 0;
            int64_t bi = 0;
            for (int r = 0; r < n; r++) {
                int64_t kk = j->kk[r];
                const int64_t *ir = (const int64_t *)j->I[r].data + q * kk;
                while (pos[r] < kk && ir[pos[r]] + f->sh[r].r0 == self)
                    pos[r]++; /* a row is not its own neighbour */
                if (pos[r] == kk)
                    continue;
                double v = gsb__tensor_get(&j->D[r], q * kk + pos[r]);
                int64_t g = ir[pos[r]] + f->sh[r].r0;
                if (best < 0 || head_before(j, q, v, g, bd, bi)) {
                    best = r;
                    bd = v;
                    bi = g;
                }
            }
            if (best < 0)
                return gsb__err(GSB_EINTERNAL, "multi-device kneighbors: %lld lists of query "
                                "%lld ran out before %lld neighbours", (long long)n,
                                (long long)q, (long long)k);
            gsb__tensor_set(dist, q * k + t, bd);
            oi[q * k + t] = bi;
            pos[best]++;
        }
    }
    return GSB_OK;
}

/* ---- the search ------------------------------------------------------------------ */

/* The k nearest rows of R (the index, whose shards st holds) to each row of
 * Q (host; Q is R with self), computed in cdt, into new host dist and idx. */
static int search(gsb__ctx *c, knn_state *st, const gsb__tensor *Q, const gsb__tensor *R,
                  int self, int64_t k, gsb__metric metric, gsb_dtype cdt, gsb__tensor *dist,
                  gsb__tensor *idx)
{
    gsb__mdfit *f = &st->f;
    knn_job j;
    memset(&j, 0, sizeof j);
    *dist = *idx = GSB__TENSOR_NONE;
    j.s = c->model->session;
    j.Q = Q;
    j.R = R;
    j.self = self;
    j.metric = metric;
    j.cdt = cdt;
    int rc = GSB_OK;
    for (int r = 0; r < f->ds->n && rc == GSB_OK; r++) {
        int64_t rows = f->sh[r].r1 - f->sh[r].r0;
        j.kk[r] = k + self < rows ? k + self : rows;
        if (j.kk[r] == 0)
            continue;
        rc = gsb__tensor_alloc(gsb__cpu_backend(), cdt, Q->rows, j.kk[r], &j.D[r]);
        if (rc == GSB_OK)
            rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_I64, Q->rows, j.kk[r], &j.I[r]);
    }
    if (rc == GSB_OK)
        rc = gsb__md_each(f, rank_search, &j);
    gsb__profile_mark("shards' top k");
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(gsb__cpu_backend(), cdt, Q->rows, k, dist);
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_I64, Q->rows, k, idx);
    if (rc == GSB_OK)
        rc = merge(f, &j, k, dist, idx);
    if (rc != GSB_OK) {
        gsb__tensor_free(dist);
        gsb__tensor_free(idx);
    }
    gsb__profile_mark("merge");
    for (int r = 0; r < GSB__MAX_DEVICES; r++) {
        gsb__tensor_free(&j.D[r]);
        gsb__tensor_free(&j.I[r]);
    }
    return rc;
}

int gsb__md_knn_search(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *fit_X, int64_t k,
                       gsb__metric metric, gsb_dtype cdt, gsb__tensor *dist, gsb__tensor *idx,
                       int *handled)
{
    *handled = 0;
    gsb__model *m = c->model;
    gsb__devset *ds = m->session->devset;
    if (!ds)
        return GSB_OK;
    if (X && X->be != gsb__cpu_backend()) {
        gsb__md_warn_once(ds, m, c->method->name, "X is already in one device's memory");
        return GSB_OK;
    }
    knn_state *st = m->devstate_free == knn_state_free ? m->devstate : NULL;
    if (!st || st->data != fit_X->data || st->rows != fit_X->rows || st->cols != fit_X->cols ||
        st->dtype != fit_X->dtype)
        GSB_TRY(place(ds, m, fit_X, &st)); /* an imported model: its first search */
    if (!st->resident) {
        gsb__md_warn_once(ds, m, c->method->name, "a shard of the training rows does not fit "
                          "in half of its device's free memory (or the memory cap)");
        return GSB_OK;
    }
    *handled = 1;
    return search(c, st, X ? X : fit_X, fit_X, X == NULL, k, metric, cdt, dist, idx);
}

void gsb__md_knn_unsplit(gsb__ctx *c, const char *why)
{
    gsb__devset *ds = c->model->session->devset;
    if (ds)
        gsb__md_warn_once(ds, c->model, c->method->name, why);
}
