/*
 * smo_blocks.c - the two-level SMO (see smo_blocks.h): the host keeps the
 * working set's indices and the kernel-row cache's map (row -> slot, LRU);
 * the gradient, the alphas and the cached rows live on the backend, and the
 * four svm_* ops of backend.h do the work.  Per outer iteration the host
 * waits once (svm_select returns the new indices and the maximal
 * violation) and uploads one small index buffer.
 */
#include "solvers/smo_blocks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/profile.h"
#include "core/tensor.h"

#define SMO_BLOCKS_WS 1024      /* working-set size (ThunderSVM's and cuML's) */
#define SMO_BLOCKS_STALL 10     /* outer iterations of a repeating violation */
#define SMO_BLOCKS_INNER 100    /* inner steps per call at most, per variable of the set */
#define SMO_BLOCKS_PROGRESS 10  /* outer iterations between progress reports */
#define SMO_BLOCKS_OUTER 100    /* outer iterations at most, per working set in l (>= 2000) */

/* ---- the kernel-row cache's map (host) --------------------------------------- */

/* Slots in a doubly linked list by use (sentinel cap), least recently used first. */
typedef struct rows_lru {
    int64_t cap, used;
    int32_t *slot_row, *row_slot, *prev, *next;
} rows_lru;

static void lru_unlink(rows_lru *c, int32_t s)
{
    c->next[c->prev[s]] = c->next[s];
    c->prev[c->next[s]] = c->prev[s];
}

static void lru_push(rows_lru *c, int32_t s)
{
    int32_t head = (int32_t)c->cap;
    c->prev[s] = c->prev[head];
    c->next[s] = head;
    c->next[c->prev[head]] = s;
    c->prev[head] = s;
}

static int lru_init(rows_lru *c, int64_t n, int64_t cap)
{
    memset(c, 0, sizeof *c);
    c->cap = cap;
    c->slot_row = gsb__alloc_array(cap, sizeof *c->slot_row);
    c->row_slot = gsb__alloc_array(n, sizeof *c->row_slot);
    c->prev = gsb__alloc_array(cap + 1, sizeof *c->prev);
    c->next = gsb__alloc_array(cap + 1, sizeof *c->next);
    if (!c->slot_row || !c->row_slot || !c->prev || !c->next)
        return gsb__err(GSB_ENOMEM, "SVM solver: out of memory for the kernel cache's map");
    for (int64_t r = 0; r < n; r++)
        c->row_slot[r] = -1;
    c->prev[cap] = c->next[cap] = (int32_t)cap;
    return GSB_OK;
}

static void lru_free(rows_lru *c)
{
    free(c->slot_row);
    free(c->row_slot);
    free(c->prev);
    free(c->next);
}

/*
 * The slot of row r, now the most recently used; *miss when r was not cached
 * (its slot taken from the least recently used row).  Rows looked up since
 * the last outer iteration are never evicted while fewer than cap distinct
 * rows have been: they are all more recent than any other.
 */
static int32_t lru_slot(rows_lru *c, int32_t r, int *miss)
{
    int32_t s = c->row_slot[r];
    *miss = s < 0;
    if (s >= 0) {
        lru_unlink(c, s);
    } else if (c->used < c->cap) {
        s = (int32_t)c->used++;
    } else {
        s = c->next[c->cap];
        lru_unlink(c, s);
        c->row_slot[c->slot_row[s]] = -1;
    }
    if (*miss) {
        c->slot_row[s] = r;
        c->row_slot[r] = s;
    }
    lru_push(c, s);
    return s;
}

/* ---- solver state --------------------------------------------------------------- */

typedef struct blocks {
    const gsb__smo_blocks_problem *pb;
    const gsb__backend *be;
    int64_t l, n, q;
    gsb__tensor real, y, C, QD, f, alpha, cache, idx, coef, stats;
    gsb__svm_state st;
    int32_t *real_h, *hidx, *sel, *ws, *slots;
    int64_t q_eff, n_keep;   /* the working set's size; its newest entries kept next */
    rows_lru lru;
    double ms_select, ms_rows, ms_inner, ms_update;
    int64_t outer;
} blocks;

/* A view of count entries of the index buffer from entry `at`. */
static gsb__tensor idx_view(const blocks *b, int64_t at, int64_t count)
{
    gsb__tensor v = b->idx;
    v.data = (int32_t *)b->idx.data + at;
    v.rows = count;
    v.cols = 1;
    v.owned = 0;
    return v;
}

static gsb__tensor coef_view(const blocks *b, int64_t count)
{
    gsb__tensor v = b->coef;
    v.rows = count;
    v.owned = 0;
    return v;
}

/* The working-set size: a power of two <= l and the cap; cache rows: at least
 * the set's distinct rows, at most n, shrunk to half the device's free memory. */
static void plan_sizes(const gsb__smo_blocks_problem *pb, int64_t n, int64_t *q, int64_t *cap)
{
    int64_t want = pb->max_ws > 1 ? pb->max_ws : SMO_BLOCKS_WS;
    int64_t w = 2;
    while (w * 2 <= want && w * 2 <= pb->l)
        w *= 2;
    *q = pb->l < 2 ? pb->l : w;
    int64_t need = *q < n ? *q : n;
    double rows = floor(pb->cache_bytes / ((double)n * sizeof(float)));
    int64_t c = rows > (double)n ? n : (int64_t)rows;
    size_t free_b = 0, total_b = 0;
    if (pb->be->ops->mem_info && pb->be->ops->mem_info(pb->be, &free_b, &total_b) == GSB_OK) {
        int64_t fit = (int64_t)(free_b / 2 / ((size_t)n * sizeof(float)));
        c = c < fit ? c : fit;
    }
    *cap = c > need ? c : need;
}

static int upload_problem(blocks *b)
{
    const gsb__smo_blocks_problem *pb = b->pb;
    const gsb__backend *be = b->be;
    int64_t l = b->l;
    int32_t *y = gsb__alloc_array(l, sizeof *y);
    double *f = gsb__alloc_array(l, sizeof *f);
    int rc = GSB_OK;
    if (!y || !f) {
        rc = gsb__err(GSB_ENOMEM, "SVM solver: out of memory for %lld variables", (long long)l);
        goto done;
    }
    for (int64_t t = 0; t < l; t++) {
        b->real_h[t] = (int32_t)pb->real[t];
        y[t] = pb->y[t] > 0 ? 1 : -1;
        f[t] = (double)y[t] * pb->p[t]; /* alpha = 0: G = p */
    }
    gsb__tensor rh = gsb__tensor_host_view(b->real_h, GSB_I32, l, 1);
    gsb__tensor yh = gsb__tensor_host_view(y, GSB_I32, l, 1);
    gsb__tensor Ch = gsb__tensor_host_view((void *)pb->C, GSB_F64, l, 1);
    gsb__tensor Qh = gsb__tensor_host_view((void *)pb->QD, GSB_F64, l, 1);
    gsb__tensor fh = gsb__tensor_host_view(f, GSB_F64, l, 1);
    GSB_CHECK(gsb__tensor_alloc(be, GSB_I32, l, 1, &b->real));
    GSB_CHECK(be->ops->upload(be, &b->real, rh.data));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_I32, l, 1, &b->y));
    GSB_CHECK(be->ops->upload(be, &b->y, yh.data));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, l, 1, &b->C));
    GSB_CHECK(be->ops->upload(be, &b->C, Ch.data));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, l, 1, &b->QD));
    GSB_CHECK(be->ops->upload(be, &b->QD, Qh.data));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, l, 1, &b->f));
    GSB_CHECK(be->ops->upload(be, &b->f, fh.data));
    GSB_CHECK(gsb__tensor_zeros(be, GSB_F64, l, 1, &b->alpha));
done:
    free(y);
    free(f);
    return rc;
}

static int blocks_init(blocks *b)
{
    const gsb__smo_blocks_problem *pb = b->pb;
    const gsb__backend *be = b->be;
    int64_t cap;
    plan_sizes(pb, b->n, &b->q, &cap);
    int64_t q = b->q;
    b->real_h = gsb__alloc_array(b->l, sizeof *b->real_h);
    b->hidx = gsb__alloc_array(4 * q, sizeof *b->hidx);
    b->sel = gsb__alloc_array(q, sizeof *b->sel);
    b->ws = gsb__alloc_array(q, sizeof *b->ws);
    b->slots = gsb__alloc_array(q, sizeof *b->slots);
    if (!b->real_h || !b->hidx || !b->sel || !b->ws || !b->slots)
        return gsb__err(GSB_ENOMEM, "SVM solver: out of memory for a working set of %lld",
                        (long long)q);
    GSB_TRY(lru_init(&b->lru, b->n, cap));
    GSB_TRY(upload_problem(b));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F32, cap, b->n, &b->cache));
    GSB_TRY(gsb__tensor_alloc(be, GSB_I32, 4 * q, 1, &b->idx));
    GSB_TRY(gsb__tensor_alloc(be, GSB_F64, q, 1, &b->coef));
    GSB_TRY(gsb__tensor_zeros(be, GSB_F64, 2, 1, &b->stats));
    b->st = (gsb__svm_state){&b->real, &b->y, &b->C, &b->QD, &b->f, &b->alpha, &b->cache};
    return GSB_OK;
}

static void blocks_free(blocks *b)
{
    gsb__tensor *ts[] = {&b->real, &b->y, &b->C, &b->QD, &b->f, &b->alpha,
                         &b->cache, &b->idx, &b->coef, &b->stats};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++)
        gsb__tensor_free(ts[k]);
    free(b->real_h);
    free(b->hidx);
    free(b->sel);
    free(b->ws);
    free(b->slots);
    lru_free(&b->lru);
}

/* ---- one outer iteration ---------------------------------------------------------- */

/*
 * The next working set: the newest n_keep entries of the last one first,
 * then the selected ones, up and low interleaved (so that the newest half,
 * kept next time, mixes both).  *gap: the maximal violation.
 */
static int next_working_set(blocks *b, double *gap)
{
    int64_t keep = b->n_keep, q = b->q, n_up, n_low;
    gsb__tensor ex = idx_view(b, b->q_eff - keep, keep);
    double t0 = gsb__profile_clock(b->be);
    int64_t k_new = q - keep;
    GSB_TRY(b->be->ops->svm_select(b->be, &b->st, keep ? &ex : NULL, k_new / 2, k_new, b->sel,
                                   &n_up, &n_low, gap));
    b->ms_select += gsb__profile_clock(b->be) - t0;
    memmove(b->ws, b->ws + b->q_eff - keep, (size_t)keep * sizeof *b->ws);
    int64_t at = keep;
    for (int64_t r = 0; r < n_up || r < n_low; r++) {
        if (r < n_up)
            b->ws[at++] = b->sel[r];
        if (r < n_low)
            b->ws[at++] = b->sel[n_up + r];
    }
    b->q_eff = at;
    int64_t n_new = at - keep;
    /* (a set of 2 or 3 keeps nothing: it must hold both extremes) */
    b->n_keep = q < 4 ? 0 : n_new < q / 2 ? n_new : q / 2;
    return GSB_OK;
}

/* The set's kernel rows into the cache, and the index buffer uploaded:
 * ws | slots | rows computed | their slots. */
static int fetch_rows(blocks *b)
{
    const gsb__smo_blocks_problem *pb = b->pb;
    int64_t qe = b->q_eff, m = 0;
    int32_t *ws = b->hidx, *slots = ws + qe, *mrows = slots + qe;
    int32_t *mslots = b->slots; /* scratch, copied after mrows below */
    for (int64_t k = 0; k < qe; k++) {
        int miss;
        int32_t r = b->real_h[b->ws[k]];
        ws[k] = b->ws[k];
        slots[k] = lru_slot(&b->lru, r, &miss);
        if (miss) {
            mrows[m] = r;
            mslots[m++] = slots[k];
        }
    }
    memcpy(mrows + m, mslots, (size_t)m * sizeof *mslots);
    gsb__tensor up = idx_view(b, 0, 2 * qe + 2 * m);
    GSB_TRY(b->be->ops->upload(b->be, &up, b->hidx));
    if (m == 0)
        return GSB_OK;
    double t0 = gsb__profile_clock(b->be);
    gsb__tensor rv = idx_view(b, 2 * qe, m), sv = idx_view(b, 2 * qe + m, m);
    GSB_TRY(b->be->ops->svm_kernel_rows(b->be, pb->X, &rv, &sv, pb->kind, pb->gamma, pb->coef0,
                                        pb->degree, &b->cache));
    b->ms_rows += gsb__profile_clock(b->be) - t0;
    return GSB_OK;
}

static int solve_working_set(blocks *b, int64_t max_steps)
{
    gsb__tensor wv = idx_view(b, 0, b->q_eff), sv = idx_view(b, b->q_eff, b->q_eff);
    gsb__tensor cv = coef_view(b, b->q_eff);
    double t0 = gsb__profile_clock(b->be);
    GSB_TRY(b->be->ops->svm_inner(b->be, &b->st, &wv, &sv, b->pb->eps, max_steps, &cv,
                                  &b->stats));
    double t1 = gsb__profile_clock(b->be);
    GSB_TRY(b->be->ops->svm_update_f(b->be, &b->st, &sv, &cv));
    b->ms_inner += t1 - t0;
    b->ms_update += gsb__profile_clock(b->be) - t1;
    return GSB_OK;
}

/* SMO steps taken so far (the stats' running count). */
static int steps_so_far(blocks *b, int64_t *steps)
{
    double st[2];
    GSB_TRY(b->be->ops->download(b->be, &b->stats, st));
    *steps = (int64_t)st[1];
    return GSB_OK;
}

/* libsvm's cap on the iterations when the caller sets none. */
static int64_t step_cap(const gsb__smo_blocks_problem *pb)
{
    if (pb->max_iter >= 0)
        return pb->max_iter;
    int64_t c = pb->l > INT32_MAX / 100 ? INT32_MAX : 100 * pb->l;
    return c > 10000000 ? c : 10000000;
}

/* Has the violation repeated (equal to one of the last two) for long? */
static int stalled(double gap, double *last, int *repeats)
{
    *repeats = gap == last[0] || gap == last[1] ? *repeats + 1 : 0;
    last[1] = last[0];
    last[0] = gap;
    return *repeats >= SMO_BLOCKS_STALL;
}

static int optimise(blocks *b, gsb__smo_result *res)
{
    const gsb__smo_blocks_problem *pb = b->pb;
    int64_t cap = step_cap(pb), steps = 0;
    /* a safety net: every outer iteration takes a step, but one that crawls
     * (no repeat for the stall test) must still end */
    int64_t outer_cap = SMO_BLOCKS_OUTER * (pb->l / (b->q > 0 ? b->q : 1));
    outer_cap = outer_cap > 2000 ? outer_cap : 2000;
    double last[2] = {NAN, NAN}, gap;
    int repeats = 0;
    for (b->outer = 0;; b->outer++) {
        GSB_TRY(next_working_set(b, &gap));
        if (!(gap >= pb->eps) || b->q_eff < 2 || stalled(gap, last, &repeats))
            break;
        if (steps >= cap || b->outer >= outer_cap) {
            res->timed_out = 1;
            break;
        }
        GSB_TRY(fetch_rows(b));
        int64_t most = SMO_BLOCKS_INNER * b->q;
        GSB_TRY(solve_working_set(b, cap - steps < most ? cap - steps : most));
        if (pb->max_iter >= 0 || (b->outer + 1) % SMO_BLOCKS_PROGRESS == 0) {
            GSB_TRY(steps_so_far(b, &steps));
            if (pb->progress)
                GSB_TRY(pb->progress(pb->progress_data, steps, gap));
        }
    }
    GSB_TRY(steps_so_far(b, &steps));
    res->n_iter = steps;
    return GSB_OK;
}

/* libsvm's rho (calculate_rho, with y G = f) and dual objective. */
static void finish(const gsb__smo_blocks_problem *pb, const double *alpha, const double *f,
                   gsb__smo_result *res)
{
    int64_t nr_free = 0;
    double ub = INFINITY, lb = -INFINITY, sum_free = 0, obj = 0;
    for (int64_t t = 0; t < pb->l; t++) {
        int pos = pb->y[t] > 0;
        double yG = f[t];
        if (alpha[t] >= pb->C[t]) {
            if (!pos)
                ub = fmin(ub, yG);
            else
                lb = fmax(lb, yG);
        } else if (alpha[t] <= 0) {
            if (pos)
                ub = fmin(ub, yG);
            else
                lb = fmax(lb, yG);
        } else {
            nr_free++;
            sum_free += yG;
        }
        obj += alpha[t] * ((pos ? yG : -yG) + pb->p[t]);
    }
    res->rho = nr_free > 0 ? sum_free / (double)nr_free : (ub + lb) / 2;
    res->obj = obj / 2;
}

static void profile_notes(const blocks *b)
{
    if (!gsb__profile_on())
        return;
    char name[96];
    snprintf(name, sizeof name, "  smo select (%lld outer iterations, q %lld)",
             (long long)b->outer + 1, (long long)b->q);
    gsb__profile_note(name, b->ms_select);
    gsb__profile_note("  smo kernel rows", b->ms_rows);
    gsb__profile_note("  smo inner", b->ms_inner);
    gsb__profile_note("  smo update f", b->ms_update);
}

int gsb__smo_blocks_solve(const gsb__smo_blocks_problem *pb, double *alpha,
                          gsb__smo_result *res)
{
    memset(res, 0, sizeof *res);
    if (pb->l <= 0 || !pb->X || pb->X->rows <= 0)
        return gsb__err(GSB_EINTERNAL, "SVM solver: empty problem");
    const gsb__backend *be = pb->be;
    if (!be->ops->svm_select || !be->ops->svm_kernel_rows || !be->ops->svm_inner ||
        !be->ops->svm_update_f)
        return gsb__err(GSB_EUNSUPPORTED, "SVM solver: the %s backend has no two-level SMO",
                        be->name);
    if (pb->X->rows > INT32_MAX || pb->l > INT32_MAX)
        return gsb__err(GSB_EUNSUPPORTED, "SVM solver: more than 2^31 variables");
    blocks b = {.pb = pb, .be = be, .l = pb->l, .n = pb->X->rows};
    double *f = NULL;
    int rc;
    GSB_CHECK(blocks_init(&b));
    GSB_CHECK(optimise(&b, res));
    if (!(f = gsb__alloc_array(b.l, sizeof *f))) {
        rc = gsb__err(GSB_ENOMEM, "SVM solver: out of memory for %lld variables",
                      (long long)b.l);
        goto done;
    }
    GSB_CHECK(be->ops->download(be, &b.alpha, alpha));
    GSB_CHECK(be->ops->download(be, &b.f, f));
    finish(pb, alpha, f, res);
    profile_notes(&b);
done:
    free(f);
    blocks_free(&b);
    return rc;
}
