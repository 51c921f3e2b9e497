/*
 * radius_search.c - eps-neighbourhoods in bounded memory (radius_search.h):
 * the grid of cells, the chunks of query rows and the pieces of neighbour
 * lists around the backend's radius_neighbors op.
 *
 * The grid (1-3 columns, every metric but cosine): each column is cut into
 * cells a little wider than the largest per-column difference a neighbour
 * can have (eps; sqrt(eps) for sqeuclidean: every metric here bounds each
 * column's difference by the distance), so a query's neighbours lie in the
 * cells within +-1 of its own.  Cells are at most 2^32 / 2^26 / 2^20 per
 * column (1 / 2 / 3 columns), widened when eps is tiny against the data's
 * extent: the keys then fit in int64, and the division that places a value
 * in its cell is off by far less than the cells' 1e-4 margin.  R's rows are
 * sorted by key (a stable radix sort: rows of a cell keep their order), and
 * the sorted copy is what the backend sees; row numbers are mapped back
 * before a visitor sees them.  Queries from R itself run in that sorted
 * order too, so neighbouring queries read neighbouring cells.
 */
#include "estimators/neighbors/radius_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/radius_exact.h"
#include "core/alloc.h"

/* Query rows per count pass (the counts of a chunk come to the host). */
#define RS_CHUNK_ROWS ((int64_t)1 << 16)
/* Relative margin of a cell's width over the per-column radius. */
#define RS_CELL_MARGIN 1e-4
/* Below this minkowski power |q - r|^p loses the margin to rounding of pow: brute force. */
#define RS_GRID_MIN_P 0.01
/* The smallest budget honoured: below it pieces would be tiny. */
#define RS_MIN_BUDGET ((int64_t)4 << 10)

static const int64_t rs_cell_cap[3] = {(int64_t)1 << 32, (int64_t)1 << 26, (int64_t)1 << 20};

static int rs_oom(const char *what)
{
    return gsb__err(GSB_ENOMEM, "radius neighbours: out of memory for %s", what);
}

static int rs_progress(gsb__rsearch *s, int64_t done)
{
    return s->ctx ? gsb__progress(s->ctx, "neighbourhood rows", done, 0.0) : GSB_OK;
}

/* ---- the grid ------------------------------------------------------------- */

static int rs_wants_grid(gsb__metric metric, double p, int64_t d)
{
    return d >= 1 && d <= 3 && metric != GSB__METRIC_COSINE &&
           !(metric == GSB__METRIC_MINKOWSKI && p < RS_GRID_MIN_P);
}

/* Stable LSD radix sort of (key, val) by key, 16 bits a pass; keys >= 0. */
static int rs_radix_sort(int64_t *key, int64_t *val, int64_t n, int64_t maxkey)
{
    int64_t *tk = gsb__alloc_array(n, sizeof *tk), *tv = gsb__alloc_array(n, sizeof *tv);
    int64_t *hist = gsb__alloc_array(1 << 16, sizeof *hist);
    if (!tk || !tv || !hist) {
        free(tk), free(tv), free(hist);
        return rs_oom("sorting the grid");
    }
    int64_t *k0 = key, *v0 = val, *k1 = tk, *v1 = tv;
    for (int shift = 0; shift < 64 && ((uint64_t)maxkey >> shift) != 0; shift += 16) {
        memset(hist, 0, sizeof(int64_t) << 16);
        for (int64_t i = 0; i < n; i++)
            hist[((uint64_t)k0[i] >> shift) & 0xffff]++;
        int64_t sum = 0;
        for (int b = 0; b < (1 << 16); b++) {
            int64_t c = hist[b];
            hist[b] = sum;
            sum += c;
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t at = hist[((uint64_t)k0[i] >> shift) & 0xffff]++;
            k1[at] = k0[i];
            v1[at] = v0[i];
        }
        int64_t *t = k0;
        k0 = k1, k1 = t;
        t = v0, v0 = v1, v1 = t;
    }
    if (k0 != key) {
        memcpy(key, k0, (size_t)n * sizeof *key);
        memcpy(val, v0, (size_t)n * sizeof *val);
    }
    free(tk), free(tv), free(hist);
    return GSB_OK;
}

/* Cells of the grid from the extent of R's columns. */
static void rs_grid_cells(gsb__rsearch *s, const gsb__tensor *R)
{
    int d = (int)R->cols;
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t i = 0; i < R->rows; i++)
        for (int k = 0; k < d; k++) {
            double v = gsb__tensor_get(R, i * d + k);
            lo[k] = v < lo[k] ? v : lo[k];
            hi[k] = v > hi[k] ? v : hi[k];
        }
    double rc = s->metric == GSB__METRIC_SQEUCLIDEAN ? sqrt(s->eps) : s->eps;
    gsb__radius_grid *g = &s->grid;
    g->dims = d;
    for (int k = 0; k < d; k++) {
        double extent = R->rows ? hi[k] - lo[k] : 0.0;
        double cell = rc * (1.0 + RS_CELL_MARGIN);
        if (extent / (double)rs_cell_cap[d - 1] > cell)
            cell = extent / (double)rs_cell_cap[d - 1];
        if (!(cell > 0))
            cell = extent > 0 ? extent : 1.0;
        g->origin[k] = R->rows ? lo[k] : 0.0;
        g->cell[k] = cell;
        g->ncell[k] = R->rows ? (int64_t)floor((hi[k] - lo[k]) / cell) + 1 : 1;
    }
    g->stride[d - 1] = 1;
    for (int k = d - 2; k >= 0; k--)
        g->stride[k] = g->stride[k + 1] * g->ncell[k + 1];
}

/* Sort R into the grid: s->Rh (sorted copy), s->perm, s->keys_h. */
static int rs_build_grid(gsb__rsearch *s, const gsb__tensor *R)
{
    rs_grid_cells(s, R);
    const gsb__radius_grid *g = &s->grid;
    int64_t n = R->rows, d = R->cols, maxkey = 0;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_I64, n, 1, &s->keys_h));
    s->perm = gsb__alloc_array(n, sizeof *s->perm);
    if (!s->perm)
        return rs_oom("the grid");
    int64_t *key = s->keys_h.data;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = 0;
        for (int c = 0; c < g->dims; c++)
            k += gsb__grid_coord(gsb__tensor_get(R, i * d + c), g->origin[c], g->cell[c],
                                 g->ncell[c]) *
                 g->stride[c];
        key[i] = k;
        s->perm[i] = i;
        maxkey = k > maxkey ? k : maxkey;
    }
    GSB_TRY(rs_radix_sort(key, s->perm, n, maxkey));
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), R->dtype, n, d, &s->Rh));
    size_t row = (size_t)d * gsb_dtype_size(R->dtype);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)s->Rh.data + (size_t)i * row, (const char *)R->data + (size_t)s->perm[i] * row,
               row);
    return GSB_OK;
}

/* ---- open / close ----------------------------------------------------------- */

int gsb__rsearch_open(gsb__rsearch *s, gsb__ctx *ctx, const gsb__backend *be,
                      const gsb__tensor *R, gsb__metric metric, double p, double eps,
                      int64_t budget_bytes)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->be = be;
    s->metric = metric;
    s->p = p;
    s->eps = eps;
    s->n = R->rows;
    s->d = R->cols;
    s->dtype = R->dtype;
    s->budget = budget_bytes > RS_MIN_BUDGET ? budget_bytes : RS_MIN_BUDGET;
    if (!be->ops->radius_neighbors)
        return gsb__err(GSB_EUNSUPPORTED, "the %s backend has no radius_neighbors op",
                        be->name);
    s->gridded = rs_wants_grid(metric, p, R->cols);
    if (s->gridded) {
        GSB_TRY(rs_build_grid(s, R));
        GSB_TRY(gsb__tensor_to(be, &s->keys_h, &s->keys_b));
        s->grid.keys = &s->keys_b;
    } else {
        s->Rh = *R;
        s->Rh.owned = 0;
    }
    return gsb__tensor_to(be, &s->Rh, &s->Rb);
}

void gsb__rsearch_close(gsb__rsearch *s)
{
    gsb__tensor_free(&s->Rb);
    gsb__tensor_free(&s->Rh);
    gsb__tensor_free(&s->keys_b);
    gsb__tensor_free(&s->keys_h);
    free(s->perm);
    memset(s, 0, sizeof *s);
}

/* ---- passes ------------------------------------------------------------------- */

static int rs_op(gsb__rsearch *s, const gsb__tensor *Q, gsb__tensor *counts,
                 const gsb__tensor *offsets, gsb__tensor *idx, gsb__tensor *dist)
{
    return s->be->ops->radius_neighbors(s->be, Q, &s->Rb, s->gridded ? &s->grid : NULL,
                                        s->metric, s->p, s->eps, counts, offsets, idx, dist);
}

/* The neighbour counts of the rows of Qb (on the backend) into cnt (host). */
static int rs_count(gsb__rsearch *s, const gsb__tensor *Qb, int64_t *cnt)
{
    gsb__tensor c = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(s->be, GSB_I64, Qb->rows, 1, &c));
    GSB_CHECK(rs_op(s, Qb, &c, NULL, NULL, NULL));
    GSB_CHECK(s->be->ops->download(s->be, &c, cnt));
done:
    gsb__tensor_free(&c);
    return rc;
}

/* An owned host copy of a backend tensor, or the tensor itself on the CPU. */
static int rs_to_host(gsb__tensor *t)
{
    if (t->be == gsb__cpu_backend())
        return GSB_OK;
    gsb__tensor h;
    int rc = gsb__tensor_to_host(t, &h);
    gsb__tensor_free(t);
    if (rc == GSB_OK)
        *t = h;
    return rc;
}

/* Fill and visit rows [0, m) of Qb, whose counts are cnt, as one piece. */
static int rs_piece(gsb__rsearch *s, const gsb__tensor *Qb, int64_t m, const int64_t *ids,
                    const int64_t *cnt, int want_dist, gsb__rvisit fn, void *data)
{
    int64_t *indptr = gsb__alloc_array(m + 1, sizeof *indptr);
    gsb__tensor cb = GSB__TENSOR_NONE, ob = GSB__TENSOR_NONE;
    gsb__tensor ib = GSB__TENSOR_NONE, db = GSB__TENSOR_NONE;
    int rc = GSB_OK;
    if (!indptr)
        return rs_oom("a piece of neighbourhoods");
    indptr[0] = 0;
    for (int64_t k = 0; k < m; k++)
        indptr[k + 1] = indptr[k] + cnt[k];
    int64_t nnz = indptr[m];
    if (nnz > 0) {
        GSB_CHECK(gsb__tensor_alloc(s->be, GSB_I64, m, 1, &cb));
        GSB_CHECK(gsb__tensor_alloc(s->be, GSB_I64, m, 1, &ob));
        GSB_CHECK(s->be->ops->upload(s->be, &cb, cnt));
        GSB_CHECK(s->be->ops->upload(s->be, &ob, indptr));
        GSB_CHECK(gsb__tensor_alloc(s->be, GSB_I64, nnz, 1, &ib));
        if (want_dist)
            GSB_CHECK(gsb__tensor_alloc(s->be, GSB_F64, nnz, 1, &db));
        gsb__tensor Qv = gsb__tensor_rows(Qb, 0, m);
        GSB_CHECK(rs_op(s, &Qv, &cb, &ob, &ib, want_dist ? &db : NULL));
        GSB_CHECK(rs_to_host(&ib));
        if (want_dist)
            GSB_CHECK(rs_to_host(&db));
        if (s->perm) {
            int64_t *ix = ib.data;
            for (int64_t t = 0; t < nnz; t++)
                ix[t] = s->perm[ix[t]];
        }
    }
    /* an empty piece still gets valid (empty) arrays */
    static const int64_t no_idx[1] = {0};
    static const double no_dist[1] = {0};
    gsb__rpiece piece = {m, ids, indptr, nnz > 0 ? ib.data : no_idx,
                         !want_dist ? NULL : nnz > 0 ? db.data : no_dist};
    rc = fn(data, &piece);
done:
    free(indptr);
    gsb__tensor_free(&cb);
    gsb__tensor_free(&ob);
    gsb__tensor_free(&ib);
    gsb__tensor_free(&db);
    return rc;
}

/* The rows of a chunk (Qb on the backend) in pieces whose lists fit the budget. */
static int rs_pieces(gsb__rsearch *s, const gsb__tensor *Qb, const int64_t *ids,
                     const int64_t *cnt, int64_t *done, int want_dist, gsb__rvisit fn,
                     void *data)
{
    int64_t per = (int64_t)sizeof(int64_t) + (want_dist ? (int64_t)sizeof(double) : 0);
    int64_t cap = s->budget / per;
    for (int64_t k = 0; k < Qb->rows;) {
        int64_t e = k, nnz = 0;
        while (e < Qb->rows && (e == k || nnz + cnt[e] <= cap))
            nnz += cnt[e++];
        gsb__tensor Qv = gsb__tensor_rows(Qb, k, e - k);
        GSB_TRY(rs_piece(s, &Qv, e - k, ids + k, cnt + k, want_dist, fn, data));
        *done += e - k;
        GSB_TRY(rs_progress(s, *done));
        k = e;
    }
    return GSB_OK;
}

int gsb__rsearch_self_counts(gsb__rsearch *s, int64_t *counts)
{
    int64_t *cnt = gsb__alloc_array(s->n < RS_CHUNK_ROWS ? s->n : RS_CHUNK_ROWS, sizeof *cnt);
    if (!cnt)
        return rs_oom("neighbour counts");
    int rc = GSB_OK;
    for (int64_t p0 = 0; p0 < s->n && rc == GSB_OK; p0 += RS_CHUNK_ROWS) {
        int64_t rows = s->n - p0 < RS_CHUNK_ROWS ? s->n - p0 : RS_CHUNK_ROWS;
        gsb__tensor Qv = gsb__tensor_rows(&s->Rb, p0, rows);
        rc = rs_count(s, &Qv, cnt);
        for (int64_t k = 0; k < rows && rc == GSB_OK; k++)
            counts[s->perm ? s->perm[p0 + k] : p0 + k] = cnt[k];
        if (rc == GSB_OK)
            rc = rs_progress(s, p0 + rows);
    }
    free(cnt);
    return rc;
}

/*
 * The next chunk of selected rows of R from sorted position *pos on: their
 * row numbers and counts, and the rows themselves on the backend (a view of
 * Rb when every row is selected, else gathered from Rh and uploaded).
 */
static int rs_next_chunk(gsb__rsearch *s, const int64_t *counts, const unsigned char *select,
                         int64_t *pos, int64_t *ids, int64_t *cnt, gsb__tensor *Qh,
                         gsb__tensor *Qb, int64_t *rows)
{
    size_t row = (size_t)s->d * gsb_dtype_size(s->dtype);
    int64_t m = 0, p = *pos;
    for (; p < s->n && m < RS_CHUNK_ROWS; p++) {
        int64_t id = s->perm ? s->perm[p] : p;
        if (select && !select[id])
            continue;
        ids[m] = id;
        cnt[m] = counts[id];
        if (select)
            memcpy((char *)Qh->data + (size_t)m * row, (const char *)s->Rh.data + (size_t)p * row,
                   row);
        m++;
    }
    *rows = m;
    if (!select) {
        *Qb = gsb__tensor_rows(&s->Rb, *pos, m);
        *pos = p;
        return GSB_OK;
    }
    *pos = p;
    gsb__tensor Qv = gsb__tensor_rows(Qh, 0, m);
    return gsb__tensor_to(s->be, &Qv, Qb);
}

int gsb__rsearch_self_visit(gsb__rsearch *s, const int64_t *counts, const unsigned char *select,
                            int want_dist, gsb__rvisit fn, void *data)
{
    int64_t chunk = s->n < RS_CHUNK_ROWS ? s->n : RS_CHUNK_ROWS;
    int64_t *ids = gsb__alloc_array(chunk, sizeof *ids), *cnt = gsb__alloc_array(chunk, sizeof *cnt);
    gsb__tensor Qh = GSB__TENSOR_NONE, Qb = GSB__TENSOR_NONE;
    int64_t pos = 0, done = 0, rows = 0;
    int rc = GSB_OK;
    if (!ids || !cnt) {
        rc = rs_oom("a chunk of queries");
        goto done;
    }
    if (select)
        GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), s->dtype, chunk, s->d, &Qh));
    while (pos < s->n) {
        GSB_CHECK(rs_next_chunk(s, counts, select, &pos, ids, cnt, &Qh, &Qb, &rows));
        if (rows > 0)
            GSB_CHECK(rs_pieces(s, &Qb, ids, cnt, &done, want_dist, fn, data));
        gsb__tensor_free(&Qb);
    }
done:
    gsb__tensor_free(&Qb);
    gsb__tensor_free(&Qh);
    free(ids);
    free(cnt);
    return rc;
}

int gsb__rsearch_query_visit(gsb__rsearch *s, const gsb__tensor *Q, int want_dist,
                             gsb__rvisit fn, void *data)
{
    int64_t chunk = Q->rows < RS_CHUNK_ROWS ? Q->rows : RS_CHUNK_ROWS;
    int64_t *ids = gsb__alloc_array(chunk, sizeof *ids), *cnt = gsb__alloc_array(chunk, sizeof *cnt);
    gsb__tensor Qb = GSB__TENSOR_NONE;
    int64_t done = 0;
    int rc = GSB_OK;
    if (!ids || !cnt) {
        rc = rs_oom("a chunk of queries");
        goto done;
    }
    for (int64_t q0 = 0; q0 < Q->rows; q0 += RS_CHUNK_ROWS) {
        int64_t rows = Q->rows - q0 < RS_CHUNK_ROWS ? Q->rows - q0 : RS_CHUNK_ROWS;
        gsb__tensor Qv = gsb__tensor_rows(Q, q0, rows);
        GSB_CHECK(gsb__tensor_to(s->be, &Qv, &Qb));
        for (int64_t k = 0; k < rows; k++)
            ids[k] = q0 + k;
        GSB_CHECK(rs_count(s, &Qb, cnt));
        GSB_CHECK(rs_pieces(s, &Qb, ids, cnt, &done, want_dist, fn, data));
        gsb__tensor_free(&Qb);
    }
done:
    gsb__tensor_free(&Qb);
    free(ids);
    free(cnt);
    return rc;
}
