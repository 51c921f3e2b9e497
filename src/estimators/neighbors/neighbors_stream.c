/*
 * neighbors_stream.c - the k-nearest-neighbour search when the training rows
 * (the index) and the queries do not fit the backend's memory together
 * (estimators/common/stream.h).
 *
 * The queries go in blocks small enough to leave most of the memory to the
 * index.  For each block, the index is read whole when it fits (once, kept)
 * or streamed in batches through the staging ring; each batch's top k (the
 * backend's topk op) comes to the host and is merged into the block's
 * running lists by (distance, global row), which is the order topk itself
 * uses, so the result equals the in-memory search's: the k smallest
 * distances, ties to the smaller row.  A query of the training rows against
 * themselves (X absent) asks each batch for k + 1 and drops the query's own
 * row: the first k of the rest are exactly the k nearest other rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/budget.h"
#include "core/model.h"
#include "estimators/common/stream.h"
#include "estimators/neighbors/neighbors_stream.h"

/* One block of queries and its running lists (host). */
typedef struct block {
    int64_t q0, nq, k;     /* rows q0.. of the queries; k neighbours each */
    int self;              /* the queries are the index rows q0..: skip each one's own */
    double *dist;          /* nq x k, sorted ascending; HUGE_VAL-padded */
    int64_t *idx;          /* nq x k; -1 padding */
} block;

/* Merge a batch's lists (nq x kk, ascending; rows offset first) into b's. */
static void merge(block *b, const gsb__tensor *bd, const gsb__tensor *bi, int64_t kk,
                  int64_t first, double *td, int64_t *ti)
{
    int64_t k = b->k;
    for (int64_t q = 0; q < b->nq; q++) {
        double *od = b->dist + q * k;
        int64_t *oi = b->idx + q * k;
        int64_t i = 0, j = 0, n = 0, self = b->self ? b->q0 + q : -1;
        while (n < k && (i < k || j < kk)) {
            int64_t cj = -1;
            double vj = 0;
            if (j < kk) {
                cj = (int64_t)gsb__tensor_get(bi, q * kk + j) + first;
                vj = gsb__tensor_get(bd, q * kk + j);
                if (cj == self) { /* a row is not its own neighbour */
                    j++;
                    continue;
                }
            }
            /* (distance, row): the new one first only when strictly smaller */
            int take_new = j < kk && (i >= k || oi[i] < 0 || vj < od[i] ||
                                      (vj == od[i] && cj < oi[i]));
            if (take_new) {
                td[n] = vj;
                ti[n++] = cj;
                j++;
            } else {
                if (oi[i] < 0) /* padding: nothing more in the old list */
                    break;
                td[n] = od[i];
                ti[n++] = oi[i++];
            }
        }
        for (; n < k; n++) {
            td[n] = HUGE_VAL;
            ti[n] = -1;
        }
        memcpy(od, td, (size_t)k * sizeof *od);
        memcpy(oi, ti, (size_t)k * sizeof *oi);
    }
}

/* topk of the block's queries Q (on the backend) against index rows R
 * (rows first.. of the index), merged into the block. */
static int search_batch(gsb__ctx *c, block *b, const gsb__tensor *Q, const gsb__tensor *R,
                        int64_t first, gsb__metric metric, double *td, int64_t *ti)
{
    const gsb__backend *be = c->be;
    int64_t kk = b->k + (b->self ? 1 : 0);
    if (kk > R->rows)
        kk = R->rows;
    gsb__tensor d = GSB__TENSOR_NONE, ix = GSB__TENSOR_NONE, hd = GSB__TENSOR_NONE,
                hi = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(be, Q->dtype, Q->rows, kk, &d));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_I64, Q->rows, kk, &ix));
    GSB_CHECK(be->ops->topk(be, Q, R, kk, metric, 0, &d, &ix));
    GSB_CHECK(gsb__tensor_to_host(&d, &hd));
    GSB_CHECK(gsb__tensor_to_host(&ix, &hi));
    merge(b, &hd, &hi, kk, first, td, ti);
done:
    gsb__tensor_free(&d);
    gsb__tensor_free(&ix);
    gsb__tensor_free(&hd);
    gsb__tensor_free(&hi);
    return rc;
}

/* The index batches of one pass against the block (the stream rewound after). */
static int search_streamed(gsb__ctx *c, gsb__stream *st, block *b, const gsb__tensor *Q,
                           gsb_dtype cdt, gsb__metric metric, double *td, int64_t *ti)
{
    int rc = GSB_OK;
    for (int more = 1; rc == GSB_OK && more;) {
        gsb__batch bt;
        rc = gsb__stream_next(st, &bt, &more);
        if (rc != GSB_OK || !more)
            break;
        gsb__tensor R = GSB__TENSOR_NONE;
        rc = gsb__tensor_to_dtype(c->be, &bt.X, cdt, &R);
        if (rc == GSB_OK)
            rc = search_batch(c, b, Q, &R, bt.first, metric, td, ti);
        gsb__tensor_free(&R);
    }
    if (rc == GSB_OK)
        rc = gsb__stream_rewind(st);
    return rc;
}

/* The search block by block; results into the host tensors dist and idx. */
static int search_blocks(gsb__ctx *c, const gsb__tensor *Qall, const gsb__tensor *fit_X,
                         int64_t k, gsb__metric metric, gsb_dtype cdt, int64_t qrows,
                         const gsb__stream_plan *iplan, gsb__tensor *dist, gsb__tensor *idx)
{
    const gsb__backend *be = c->be;
    int self = Qall == fit_X;
    gsb__stream st;
    gsb__tensor Rall = GSB__TENSOR_NONE, Q = GSB__TENSOR_NONE;
    block b = {0, 0, k, self, NULL, NULL};
    double *td = malloc((size_t)k * sizeof *td);
    int64_t *ti = malloc((size_t)k * sizeof *ti);
    b.dist = malloc((size_t)(qrows * k) * sizeof *b.dist);
    b.idx = malloc((size_t)(qrows * k) * sizeof *b.idx);
    memset(&st, 0, sizeof st);
    int rc = td && ti && b.dist && b.idx ? GSB_OK : gsb__err(GSB_ENOMEM, "out of host memory");
    if (rc == GSB_OK && iplan->streamed)
        rc = gsb__stream_open(c, iplan, fit_X, NULL, 0, 2, &st);
    else if (rc == GSB_OK) /* the index fits: once, for every block */
        rc = gsb__tensor_to_dtype(be, fit_X, cdt, &Rall);
    for (int64_t q0 = 0; rc == GSB_OK && q0 < Qall->rows; q0 += qrows) {
        b.q0 = q0;
        b.nq = Qall->rows - q0 < qrows ? Qall->rows - q0 : qrows;
        for (int64_t i = 0; i < b.nq * k; i++) {
            b.dist[i] = HUGE_VAL;
            b.idx[i] = -1;
        }
        gsb__tensor qh = gsb__tensor_rows(Qall, q0, b.nq);
        rc = gsb__tensor_to_dtype(be, &qh, cdt, &Q);
        if (rc == GSB_OK)
            rc = iplan->streamed ? search_streamed(c, &st, &b, &Q, cdt, metric, td, ti)
                                 : search_batch(c, &b, &Q, &Rall, 0, metric, td, ti);
        gsb__tensor_free(&Q);
        for (int64_t i = 0; rc == GSB_OK && i < b.nq * k; i++) {
            gsb__tensor_set(dist, q0 * k + i, b.dist[i]);
            ((int64_t *)idx->data)[q0 * k + i] = b.idx[i];
        }
    }
    gsb__stream_close(&st);
    gsb__tensor_free(&Rall);
    free(td);
    free(ti);
    free(b.dist);
    free(b.idx);
    return rc;
}

int gsb__knn_search_streamed(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *fit_X,
                             int64_t k, gsb__metric metric, gsb_dtype cdt, gsb__tensor *dist,
                             gsb__tensor *idx, int *streamed)
{
    *streamed = 0;
    const gsb__tensor *Qall = X ? X : fit_X;
    int64_t d = fit_X->cols, nq = Qall->rows;
    size_t cs = gsb_dtype_size(cdt), conv = cdt != fit_X->dtype ? (size_t)d * cs : 0;
    /* per query: its row and two lists of k (the block's and a batch's) */
    size_t qrow = (size_t)d * cs + (size_t)(k + 1) * (cs + 8) * 2;
    const gsb_session *s = c->model->session;
    if (Qall->be != gsb__cpu_backend() || fit_X->be != gsb__cpu_backend() ||
        (c->be == gsb__cpu_backend() && !s->memory_cap))
        return GSB_OK; /* queries already on the device, or no limit: in memory */
    size_t budget;
    GSB_TRY(gsb__memory_budget(s, c->be, &budget));
    if ((double)gsb__tensor_nbytes(fit_X) + (double)nq * (double)qrow <= (double)budget)
        return GSB_OK;
    /* queries in blocks of a quarter of the memory; the index in what is left,
     * whole when it fits beside a block, else streamed */
    gsb__stream_plan plan;
    int64_t qrows = (int64_t)(budget / 4 / qrow);
    qrows = qrows < 1 ? 1 : qrows > nq ? nq : qrows;
    GSB_TRY(gsb__stream_plan_for(c, fit_X, 1.0, (size_t)qrows * qrow, conv, &plan));
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), cdt, nq, k, dist));
    int rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_I64, nq, k, idx);
    if (rc == GSB_OK)
        rc = search_blocks(c, Qall, fit_X, k, metric, cdt, qrows, &plan, dist, idx);
    if (rc != GSB_OK) {
        gsb__tensor_free(dist);
        gsb__tensor_free(idx);
        return rc;
    }
    *streamed = 1;
    return GSB_OK;
}
