/*
 * stream.c - streamed fits (stream.h): the plan, the batch stream over the
 * backend's staging ring, and the statistics accumulated over batches.
 *
 * The stream keeps nbuf buffers in flight (2 to 4): when batch i is handed
 * out, the fills of batches i + 1 .. i + nbuf - 1 are already queued (their
 * copies run while the caller computes on batch i), and the buffer of batch
 * i - 1 was released just before, after the caller had queued its compute.
 * One buffer holds a batch's rows of X and of each extra input, each at a
 * 256-byte aligned offset.  Batches are at most TARGET_BATCH_BYTES of X:
 * large enough that a copy's fixed costs (an event, a launch: ~10-20 us) are
 * noise next to its milliseconds on the link, small enough to leave the
 * budget to the model.
 *
 * The batch size is planned for two buffers (PLAN_BUFFERS), so the batches,
 * and with them every result, do not depend on the ring's depth; the ring
 * then takes up to GSB__STAGE_MAX_BUFFERS of them where the plan's memory
 * allows (plan->ring_bytes).  Two buffers leave the link idle whenever the
 * caller waits on the host within a batch (KMeans reads its labels back,
 * the moments their means): with nbuf - 1 copies queued ahead, the copy
 * engine keeps going through such waits and through a slow batch.
 *
 * An X whose NaN / infinity check the dispatcher left to the fit (a fit sure
 * to stream: core/dispatch.c) is checked here instead, batch by batch on the
 * backend (its nonfinite op: a read of the batch at the device's memory
 * bandwidth, and one small read-back) as each batch lands and before the
 * caller computes on it, during the first pass, until one pass has checked
 * every batch.  A bad batch ends the fit; the host pass over all of X that
 * it replaces cost as much as a third of an out-of-core fit.
 */
#include "estimators/common/stream.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/budget.h"
#include "core/dispatch.h"
#include "core/model.h"
#include "core/validate.h"

#define TARGET_BATCH_BYTES ((size_t)256 << 20)
#define PLAN_BUFFERS 2
/* fills a stream of several passes queues past the end of a pass (at most
 * the ring's depth): they keep the link busy while the caller ends the pass
 * (KMeans: the last batch's compute, the sums read back, the centres
 * updated and uploaded), which one fill (~1.2 ms on PCIe 5) did not always
 * cover; the cost is as many batches' copies wasted at the end of the fit,
 * running while the caller finishes (a fill never acquired is not counted as
 * a copy) */
#define NEXT_PASS_AHEAD 2
#define ALIGN 256

static size_t align_up(size_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

/* ---- planning --------------------------------------------------------------- */

int gsb__stream_plan_for(gsb__ctx *c, const gsb__tensor *X, double copies, size_t fixed,
                         size_t row_bytes, gsb__stream_plan *out)
{
    memset(out, 0, sizeof *out);
    out->batch_rows = X->rows;
    const gsb_session *s = c->model->session;
    GSB_TRY(gsb__memory_budget(s, c->be, &out->budget));
    /* X already where the compute is (a device array, a data handle, the CPU
     * without a cap) is read in place */
    if (X->be == c->be && (c->be != gsb__cpu_backend() || !s->memory_cap))
        return GSB_OK;
    double need = copies * (double)gsb__tensor_nbytes(X) + (double)fixed;
    if (need <= (double)out->budget || X->rows <= 1)
        return GSB_OK;
    size_t xrow = (size_t)X->cols * gsb_dtype_size(X->dtype);
    size_t per_row = PLAN_BUFFERS * (xrow + row_bytes) + row_bytes;
    char bb[32], fb[32];
    if (fixed >= out->budget || (out->budget - fixed) / 2 < per_row + PLAN_BUFFERS * ALIGN * 4)
        return gsb__err(GSB_ENOMEM, "%s: not even the model's state (%s) and one row of X fit "
                        "in the %s memory gsb may use (%s)", c->est->name,
                        gsb__format_bytes(fixed, fb, sizeof fb), c->be->name,
                        gsb__format_bytes(out->budget, bb, sizeof bb));
    /* half of what is left for the ring and the batch's temporaries: the rest
     * stays free for the backend's own workspaces (cuBLAS, cuSOLVER) */
    size_t usable = (out->budget - fixed) / 2 - PLAN_BUFFERS * ALIGN * 4;
    int64_t rows = (int64_t)(usable / per_row);
    int64_t target = (int64_t)(TARGET_BATCH_BYTES / (xrow ? xrow : 1));
    if (rows > target)
        rows = target;
    if (rows < 1)
        rows = 1;
    out->streamed = 1;
    out->batch_rows = rows < X->rows ? rows : X->rows;
    /* the ring may deepen into three quarters of what is left after the
     * model's state, less the batch's temporaries (row_bytes per row, an
     * overestimate: it counts the extras too); a quarter stays free for the
     * backend's workspaces.  Two buffers always fit (the plan above). */
    size_t temps = (size_t)out->batch_rows * row_bytes, share = (out->budget - fixed) / 4 * 3;
    out->ring_bytes = share > temps ? share - temps : 0;
    return GSB_OK;
}

/* Buffers for a ring of `bytes` each: PLAN_BUFFERS, more while they fit
 * plan->ring_bytes, never more than the pass has batches (nor than 4). */
static int ring_depth(const gsb__stream_plan *plan, size_t bytes, int64_t nbatches)
{
    int nbuf = PLAN_BUFFERS;
    while (nbuf < GSB__STAGE_MAX_BUFFERS && nbuf < nbatches &&
           (size_t)(nbuf + 1) * bytes <= plan->ring_bytes)
        nbuf++;
    return nbuf;
}

/* ---- the stream --------------------------------------------------------------- */

static int64_t rows_of_batch(const gsb__stream *s, int64_t i)
{
    int64_t first = i * s->batch_rows;
    return s->n - first < s->batch_rows ? s->n - first : s->batch_rows;
}

/* $GSB_STREAM_TRACE set (not "0"): the backend's ring times its fills
 * (backend/cuda/cuda_stream.cu), and the stream says when its ring opened. */
static int trace_on(void)
{
    const char *e = getenv("GSB_STREAM_TRACE");
    return e && *e && strcmp(e, "0") != 0;
}

/* Batch Xb (on the backend) holds no NaN nor infinity, else scikit-learn's
 * error for it: the backend's nonfinite op, or the host twin on the CPU. */
static int check_batch(const gsb__backend *be, const gsb__tensor *Xb)
{
    int bad = 0;
    if (be->ops->nonfinite)
        GSB_TRY(be->ops->nonfinite(be, Xb, &bad));
    else if (Xb->be == gsb__cpu_backend())
        bad = gsb__host_nonfinite(Xb);
    else
        return gsb__err(GSB_EINTERNAL, "the %s backend cannot check a batch's values",
                        be->name);
    return bad ? gsb__nonfinite_error(bad, "X", Xb->dtype) : GSB_OK;
}

/* Queue fill number g, batch (g - pass_start) mod nbatches (past the pass's
 * end: the next pass's), into buffer g % nbuf. */
static int fill(gsb__stream *s, int64_t g)
{
    gsb__stage_seg segs[1 + GSB__STREAM_MAX_EXTRA];
    int nseg = 0;
    int64_t i = (g - s->pass_start) % s->nbatches;
    int64_t first = i * s->batch_rows, rows = rows_of_batch(s, i);
    for (int k = 0; k < s->nsrc; k++) {
        if (!s->src[k])
            continue;
        segs[nseg].host = (const char *)s->src[k]->data + (size_t)first * s->row_bytes[k];
        segs[nseg].bytes = (size_t)rows * s->row_bytes[k];
        segs[nseg].offset = s->offset[k];
        nseg++;
    }
    return s->be->ops->stage_fill(s->be, s->ring, (int)(g % s->nbuf), segs, nseg);
}

int gsb__stream_open(gsb__ctx *c, const gsb__stream_plan *plan, const gsb__tensor *X,
                     const gsb__tensor *const *extra, int n_extra, int passes, gsb__stream *s)
{
    memset(s, 0, sizeof *s);
    if (n_extra < 0 || n_extra > GSB__STREAM_MAX_EXTRA || X->be != gsb__cpu_backend())
        return gsb__err(GSB_EINTERNAL, "stream_open: a host X and at most %d extras",
                        GSB__STREAM_MAX_EXTRA);
    const gsb__backend *be = c->be;
    if (!be->ops->stage_open)
        return gsb__err(GSB_EUNSUPPORTED, "the %s backend cannot stream", be->name);
    s->c = c;
    s->be = be;
    s->n = X->rows;
    s->batch_rows = plan->batch_rows > 0 ? plan->batch_rows : 1;
    s->nbatches = (s->n + s->batch_rows - 1) / s->batch_rows;
    s->src[0] = X;
    for (int k = 0; k < n_extra; k++) {
        if (extra[k] && (extra[k]->rows != X->rows || extra[k]->be != gsb__cpu_backend()))
            return gsb__err(GSB_EINTERNAL, "stream_open: extra %d is not %lld host rows", k,
                            (long long)X->rows);
        s->src[1 + k] = extra[k];
    }
    s->nsrc = 1 + n_extra;
    s->repeat = passes > 1;
    size_t bytes = 0;
    for (int k = 0; k < s->nsrc; k++) {
        if (!s->src[k])
            continue;
        s->row_bytes[k] = (size_t)s->src[k]->cols * gsb_dtype_size(s->src[k]->dtype);
        s->offset[k] = bytes;
        bytes += align_up((size_t)s->batch_rows * s->row_bytes[k]);
    }
    /* an iterative fit reads X many times: page-locked, every pass after the
     * first goes by DMA straight from it (pinning refused: staged copies) */
    if (passes > 1 && be->ops->host_register && gsb__tensor_nbytes(X) > 0) {
        s->registered = be->ops->host_register(be, X->data, gsb__tensor_nbytes(X)) == GSB_OK;
        gsb__err_clear();
    }
    const gsb__tensor *u = c->x_unchecked;
    s->check = u && u->data == X->data && u->rows == X->rows && u->cols == X->cols;
    s->nbuf = ring_depth(plan, bytes, s->nbatches);
    s->trace = trace_on();
    s->pass_end_ms = -1;
    int rc = be->ops->stage_open(be, bytes, s->nbuf, &s->ring);
    if (rc != GSB_OK)
        gsb__stream_close(s);
    else if (trace_on())
        fprintf(stderr, "gsb stream trace: %s.%s: call start to ring open %.2f ms\n",
                c->est->name, c->method->name, gsb__call_elapsed_ms());
    return rc;
}

static int cancelled(gsb__stream *s)
{
    gsb__model *m = s->c->model;
    if (!atomic_load(&m->cancel))
        return GSB_OK;
    return gsb__err(GSB_ECANCELLED, "%s.%s was cancelled at batch %lld", s->c->est->name,
                    s->c->method->name, (long long)(s->next_out - s->pass_start));
}

int gsb__stream_next(gsb__stream *s, gsb__batch *b, int *more)
{
    const gsb__backend *be = s->be;
    *more = 0;
    memset(b, 0, sizeof *b);
    if (s->held) { /* the caller has queued its work on the previous batch */
        GSB_TRY(be->ops->stage_release(be, s->ring, (int)((s->next_out - 1) % s->nbuf)));
        s->held = 0;
    }
    GSB_TRY(cancelled(s));
    if (s->trace && s->pass_end_ms >= 0 && s->next_out - s->pass_start < s->nbatches) {
        double gap = gsb__call_elapsed_ms() - s->pass_end_ms;
        s->gap_sum_ms += gap;
        if (gap > s->gap_max_ms) {
            s->gap_max_ms = gap;
            s->gap_max_before = s->passes;
        }
        s->gaps++;
        s->pass_end_ms = -1;
    }
    /* keep the ring full: this batch and the next ones up to nbuf, and for a
     * stream of several passes the next pass's first batch, whose copy then
     * runs while the caller ends this pass (KMeans: its Lloyd step) */
    int64_t end = s->pass_start + s->nbatches + (s->repeat && s->nbatches ? NEXT_PASS_AHEAD : 0);
    while (s->next_fill < end && s->next_fill < s->next_out + s->nbuf) {
        GSB_TRY(fill(s, s->next_fill));
        s->next_fill++;
    }
    if (s->next_out - s->pass_start >= s->nbatches) {
        if (s->check) { /* this pass checked every batch: X is finite */
            s->check = 0;
            s->c->x_unchecked = NULL;
        }
        if (s->trace && s->pass_end_ms < 0) {
            s->pass_end_ms = gsb__call_elapsed_ms();
            s->passes++;
        }
        return GSB_OK;
    }
    int64_t i = s->next_out - s->pass_start, k = s->next_out % s->nbuf;
    void *dev;
    GSB_TRY(be->ops->stage_acquire(be, s->ring, (int)k, &dev));
    s->held = 1;
    s->next_out++;
    b->index = i;
    b->first = i * s->batch_rows;
    b->rows = rows_of_batch(s, i);
    for (int j = 0; j < s->nsrc; j++) {
        if (!s->src[j])
            continue;
        gsb__tensor t = {(char *)dev + s->offset[j], s->src[j]->dtype, b->rows,
                         s->src[j]->cols, s->src[j]->ndim, be, 0};
        if (j == 0)
            b->X = t;
        else
            b->extra[j - 1] = t;
    }
    if (s->check)
        GSB_TRY(check_batch(be, &b->X));
    *more = 1;
    return GSB_OK;
}

int gsb__stream_rewind(gsb__stream *s)
{
    if (s->held) {
        GSB_TRY(s->be->ops->stage_release(s->be, s->ring, (int)((s->next_out - 1) % s->nbuf)));
        s->held = 0;
    }
    int64_t read = s->next_out - s->pass_start;
    if (read >= s->nbatches) { /* at the end: the fills queued are the next pass's first */
        s->pass_start += s->nbatches;
        return GSB_OK;
    }
    if (read == 0) /* nothing read yet: the fills queued are this pass's first */
        return GSB_OK;
    /* in the middle: acquire the fills queued ahead so the ring's buffers are
     * consumed in order (fills g and g + nbuf share a buffer), then start
     * afresh from an empty ring */
    while (s->next_out < s->next_fill) {
        int k = (int)(s->next_out % s->nbuf);
        void *dev;
        GSB_TRY(s->be->ops->stage_acquire(s->be, s->ring, k, &dev));
        GSB_TRY(s->be->ops->stage_release(s->be, s->ring, k));
        s->next_out++;
    }
    s->pass_start = s->next_out;
    return GSB_OK;
}

void gsb__stream_close(gsb__stream *s)
{
    if (s->trace && s->passes > 1)
        fprintf(stderr, "gsb stream trace: %s.%s: %lld passes of %lld batches; host time from "
                "a pass's end to the next one's first batch: %.2f ms in all, largest %.2f ms "
                "(before pass %lld)\n", s->c->est->name, s->c->method->name,
                (long long)s->passes, (long long)s->nbatches, s->gap_sum_ms, s->gap_max_ms,
                (long long)s->gap_max_before);
    if (s->ring)
        s->be->ops->stage_close(s->be, s->ring);
    if (s->registered && s->be->ops->host_unregister)
        s->be->ops->host_unregister(s->be, s->src[0]->data);
    memset(s, 0, sizeof *s);
}

/* ---- column moments ------------------------------------------------------------- */

int gsb__moments_init(gsb__moments *m, int64_t d, int want_minmax)
{
    memset(m, 0, sizeof *m);
    m->d = d;
    size_t n = (size_t)(d > 0 ? d : 1);
    m->mean = calloc(n, sizeof *m->mean);
    m->m2 = calloc(n, sizeof *m->m2);
    if (want_minmax) {
        m->min = malloc(n * sizeof *m->min);
        m->max = malloc(n * sizeof *m->max);
    }
    if (!m->mean || !m->m2 || (want_minmax && (!m->min || !m->max))) {
        gsb__moments_free(m);
        return gsb__err(GSB_ENOMEM, "out of host memory");
    }
    return GSB_OK;
}

void gsb__moments_free(gsb__moments *m)
{
    free(m->mean);
    free(m->m2);
    free(m->min);
    free(m->max);
    memset(m, 0, sizeof *m);
}

/* A backend vector of d float64 (or X's dtype) to host doubles. */
static int vec_to_host(const gsb__tensor *t, double *out)
{
    gsb__tensor h;
    GSB_TRY(gsb__tensor_to_host(t, &h));
    for (int64_t j = 0; j < gsb__tensor_numel(&h); j++)
        out[j] = gsb__tensor_get(&h, j);
    gsb__tensor_free(&h);
    return GSB_OK;
}

/* The batch's mean and population variance per column, its min and max. */
static int batch_moments(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *w, double *mean,
                         double *var, double *mn, double *mx)
{
    const gsb__backend *be = c->be;
    int64_t d = X->cols;
    gsb__tensor tm = GSB__TENSOR_NONE, tv = GSB__TENSOR_NONE, tn = GSB__TENSOR_NONE,
                tx = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, d, 1, &tm));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, d, 1, &tv));
    GSB_CHECK(be->ops->col_moments(be, X, w, &tm, &tv));
    GSB_CHECK(vec_to_host(&tm, mean));
    GSB_CHECK(vec_to_host(&tv, var));
    if (mn) {
        GSB_CHECK(gsb__tensor_alloc(be, X->dtype, d, 1, &tn));
        GSB_CHECK(gsb__tensor_alloc(be, X->dtype, d, 1, &tx));
        GSB_CHECK(be->ops->col_minmax(be, X, &tn, &tx));
        GSB_CHECK(vec_to_host(&tn, mn));
        GSB_CHECK(vec_to_host(&tx, mx));
    }
done:
    gsb__tensor_free(&tm);
    gsb__tensor_free(&tv);
    gsb__tensor_free(&tn);
    gsb__tensor_free(&tx);
    return rc;
}

int gsb__moments_add(gsb__ctx *c, gsb__moments *m, const gsb__tensor *X, const gsb__tensor *w,
                     double wsum)
{
    int64_t d = m->d;
    double *bm = malloc((size_t)(4 * (d > 0 ? d : 1)) * sizeof *bm);
    if (!bm)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    double *bv = bm + d, *bn = bv + d, *bx = bn + d;
    int rc = batch_moments(c, X, w, bm, bv, m->min ? bn : NULL, m->min ? bx : NULL);
    if (rc == GSB_OK && m->min)
        for (int64_t j = 0; j < d; j++) {
            m->min[j] = m->rows == 0 ? bn[j] : fmin(m->min[j], bn[j]);
            m->max[j] = m->rows == 0 ? bx[j] : fmax(m->max[j], bx[j]);
        }
    /* Chan et al.: a batch of weight wb, mean bm, M2 wb * bv merged in; a
     * batch of zero weight (all-zero weights) changes nothing */
    if (rc == GSB_OK && wsum > 0) {
        double wa = m->wsum, wt = wa + wsum;
        for (int64_t j = 0; j < d; j++) {
            double delta = bm[j] - m->mean[j];
            m->mean[j] += delta * (wsum / wt);
            m->m2[j] += bv[j] * wsum + delta * delta * (wa * wsum / wt);
        }
        m->wsum = wt;
    }
    if (rc == GSB_OK)
        m->rows += X->rows;
    free(bm);
    return rc;
}

/* ---- centred cross-products ------------------------------------------------------ */

void gsb__gram_free(gsb__gram *g)
{
    gsb__tensor_free(&g->G);
    gsb__tensor_free(&g->B);
    gsb__tensor_free(&g->U);
    gsb__tensor_free(&g->V);
    gsb__tensor_free(&g->S);
    gsb__tensor_free(&g->T);
    free(g->shift_x);
    free(g->shift_y);
    memset(g, 0, sizeof *g);
}

int gsb__gram_init(gsb__ctx *c, gsb__gram *g, int64_t p, int64_t k, int centre)
{
    memset(g, 0, sizeof *g);
    g->p = p;
    g->k = k;
    g->centre = centre;
    int rc = gsb__tensor_zeros(c->be, GSB_F64, p, p, &g->G);
    if (rc == GSB_OK && centre) /* u and v only serve the centring */
        rc = gsb__tensor_zeros(c->be, GSB_F64, p, 1, &g->U);
    if (rc == GSB_OK && k > 0)
        rc = gsb__tensor_zeros(c->be, GSB_F64, p, k, &g->B);
    if (rc == GSB_OK && k > 0 && centre)
        rc = gsb__tensor_zeros(c->be, GSB_F64, k, 1, &g->V);
    if (rc != GSB_OK)
        gsb__gram_free(g);
    return rc;
}

/* The shift: T's (unweighted) column means, on the host (*out) and on the
 * backend (*dev); any shift is exact, one near the mean keeps G precise. */
static int first_shift(gsb__ctx *c, const gsb__tensor *T, double **out, gsb__tensor *dev)
{
    int64_t d = T->cols;
    *out = calloc((size_t)(d > 0 ? d : 1), sizeof **out);
    if (!*out)
        return gsb__err(GSB_ENOMEM, "out of host memory");
    GSB_TRY(gsb__tensor_alloc(c->be, GSB_F64, d, 1, dev));
    GSB_TRY(c->be->ops->col_moments(c->be, T, NULL, dev, NULL));
    GSB_TRY(vec_to_host(dev, *out));
    for (int64_t j = 0; j < d; j++)
        if (!isfinite((*out)[j])) /* no rows: no shift */
            (*out)[j] = 0;
    return c->be->ops->upload(c->be, dev, *out);
}

/* T (on the backend, any float dtype) - shift (a backend vector, or none) as
 * a new float64 tensor, rows scaled by sw when given. */
static int shifted(gsb__ctx *c, const gsb__tensor *T, const gsb__tensor *shift,
                   const gsb__tensor *sw, gsb__tensor *out)
{
    const gsb__backend *be = c->be;
    int rc;
    *out = GSB__TENSOR_NONE;
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, T->rows, T->cols, out));
    GSB_CHECK(be->ops->copy(be, out, T));
    if (shift)
        GSB_CHECK(be->ops->col_affine(be, out, shift, NULL, NULL, out));
    if (sw)
        GSB_CHECK(be->ops->row_scale(be, out, sw));
done:
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}

int gsb__gram_add(gsb__ctx *c, gsb__gram *g, const gsb__tensor *X, const gsb__tensor *Y,
                  const gsb__tensor *sw, double wsum)
{
    const gsb__backend *be = c->be;
    gsb__tensor Xs = GSB__TENSOR_NONE, Ys = GSB__TENSOR_NONE, ones = GSB__TENSOR_NONE;
    int rc;
    if (g->centre && !g->shift_x) {
        GSB_CHECK(first_shift(c, X, &g->shift_x, &g->S));
        if (g->k > 0)
            GSB_CHECK(first_shift(c, Y, &g->shift_y, &g->T));
    }
    /* every sum stays on the backend: no host wait per batch */
    GSB_CHECK(shifted(c, X, g->centre ? &g->S : NULL, sw, &Xs));
    GSB_CHECK(be->ops->syrk(be, 1.0, &Xs, 1.0, &g->G));
    if (g->centre && !sw) {
        GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, X->rows, 1, &ones));
        GSB_CHECK(be->ops->fill(be, &ones, 1.0));
    }
    /* u += Xs^T sqrt(w): the rows already carry one sqrt(w) */
    if (g->centre)
        GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &Xs, sw ? sw : &ones, 1.0, &g->U));
    if (g->k > 0) {
        GSB_CHECK(shifted(c, Y, g->centre ? &g->T : NULL, sw, &Ys));
        GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &Xs, &Ys, 1.0, &g->B));
        if (g->centre)
            GSB_CHECK(be->ops->gemm(be, 1, 0, 1.0, &Ys, sw ? sw : &ones, 1.0, &g->V));
    }
    g->rows += X->rows;
    g->wsum += wsum;
done:
    gsb__tensor_free(&Xs);
    gsb__tensor_free(&Ys);
    gsb__tensor_free(&ones);
    return rc;
}

int gsb__gram_finish(gsb__gram *g, double **mean_x, double **mean_y, double **Cxx, double **Cxy)
{
    int64_t p = g->p, k = g->k;
    *mean_x = *mean_y = *Cxx = *Cxy = NULL;
    double *mx = calloc((size_t)(p > 0 ? p : 1), sizeof *mx);
    double *my = calloc((size_t)(k > 0 ? k : 1), sizeof *my);
    double *G = malloc((size_t)(p * p > 0 ? p * p : 1) * sizeof *G);
    double *B = calloc((size_t)(p * k > 0 ? p * k : 1), sizeof *B);
    double *u = calloc((size_t)(p > 0 ? p : 1), sizeof *u);
    double *v = calloc((size_t)(k > 0 ? k : 1), sizeof *v);
    int rc = mx && my && G && B && u && v ? GSB_OK : gsb__err(GSB_ENOMEM, "out of host memory");
    if (rc == GSB_OK)
        rc = vec_to_host(&g->G, G);
    if (rc == GSB_OK && g->centre)
        rc = vec_to_host(&g->U, u);
    if (rc == GSB_OK && k > 0)
        rc = vec_to_host(&g->B, B);
    if (rc == GSB_OK && k > 0 && g->centre)
        rc = vec_to_host(&g->V, v);
    double W = g->wsum;
    /* the sums are about the shift; the co-moments about the mean lose only
     * u u^T / W, small because the shift is near the mean */
    if (rc == GSB_OK && g->centre && W > 0) {
        for (int64_t i = 0; i < p; i++) {
            mx[i] = g->shift_x[i] + u[i] / W;
            for (int64_t j = 0; j < p; j++)
                G[i * p + j] -= u[i] * u[j] / W;
            for (int64_t t = 0; t < k; t++)
                B[i * k + t] -= u[i] * v[t] / W;
        }
        for (int64_t t = 0; t < k; t++)
            my[t] = g->shift_y[t] + v[t] / W;
    }
    free(u);
    free(v);
    if (rc != GSB_OK) {
        free(mx);
        free(my);
        free(G);
        free(B);
        return rc;
    }
    *mean_x = mx;
    *mean_y = my;
    *Cxx = G;
    *Cxy = B;
    return GSB_OK;
}

/* ---- whole passes ----------------------------------------------------------------- */

/* The total of host weights w (float64) over rows [first, first + rows), or rows. */
double gsb__stream_wsum(const gsb__tensor *w, int64_t first, int64_t rows)
{
    if (!w)
        return (double)rows;
    const double *v = (const double *)w->data + first;
    double acc = 0;
    for (int64_t i = 0; i < rows; i++)
        acc += v[i];
    return acc;
}

int gsb__stream_col_moments(gsb__ctx *c, const gsb__tensor *X, const gsb__tensor *w,
                            int want_minmax, gsb__moments *m, int *streamed)
{
    *streamed = 0;
    gsb__stream_plan plan;
    /* in memory: X (uploaded) and the column statistics */
    GSB_TRY(gsb__stream_plan_for(c, X, 1.0, 0, w ? sizeof(double) : 0, &plan));
    if (!plan.streamed)
        return GSB_OK;
    gsb__stream st;
    const gsb__tensor *extra[1] = {w};
    GSB_TRY(gsb__moments_init(m, X->cols, want_minmax));
    int rc = gsb__stream_open(c, &plan, X, extra, 1, 1, &st);
    for (int more = 1; rc == GSB_OK && more;) {
        gsb__batch b;
        rc = gsb__stream_next(&st, &b, &more);
        if (rc == GSB_OK && more)
            rc = gsb__moments_add(c, m, &b.X, w ? &b.extra[0] : NULL,
                                  gsb__stream_wsum(w, b.first, b.rows));
    }
    gsb__stream_close(&st);
    if (rc != GSB_OK)
        gsb__moments_free(m);
    else
        *streamed = 1;
    return rc;
}

int gsb__stream_map(gsb__ctx *c, const gsb__stream_plan *plan, const gsb__tensor *X,
                    gsb__batch_fn fn, void *arg, gsb_dtype dtype, int64_t out_cols,
                    gsb__tensor *out)
{
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dtype, X->rows, out_cols, out));
    size_t row = (size_t)out_cols * gsb_dtype_size(dtype);
    gsb__stream st;
    int rc = gsb__stream_open(c, plan, X, NULL, 0, 1, &st);
    for (int more = 1; rc == GSB_OK && more;) {
        gsb__batch b;
        rc = gsb__stream_next(&st, &b, &more);
        if (rc != GSB_OK || !more)
            break;
        gsb__tensor res = GSB__TENSOR_NONE;
        rc = fn(c, &b.X, arg, &res);
        if (rc == GSB_OK && (res.dtype != dtype || res.rows != b.rows || res.cols != out_cols))
            rc = gsb__err(GSB_EINTERNAL, "stream_map: a batch result of the wrong shape");
        if (rc == GSB_OK)
            rc = res.be->ops->download(res.be, &res, (char *)out->data + b.first * row);
        gsb__tensor_free(&res);
    }
    gsb__stream_close(&st);
    if (rc != GSB_OK)
        gsb__tensor_free(out);
    return rc;
}
