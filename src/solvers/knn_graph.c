/*
 * knn_graph.c - the k-nearest-neighbour graph and its symmetrisation (see
 * knn_graph.h).
 */
#include "solvers/knn_graph.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/tensor.h"

/* Multiply-adds of one block of feature queries on the CPU (~0.1-0.5 s on
 * two cores: progress and cancellation stay responsive); the GPU takes big
 * blocks, which keep it busy. */
#define KNN_BLOCK_WORK ((int64_t)1 << 33)
#define KNN_BLOCK_MIN_ROWS 512
#define KNN_GPU_BLOCK_ROWS 16384

void gsb__knn_graph_free(gsb__knn_graph *g)
{
    free(g->dist);
    free(g->idx);
    memset(g, 0, sizeof *g);
}

void gsb__csr_free(gsb__csr *m)
{
    free(m->indptr);
    free(m->indices);
    free(m->data);
    memset(m, 0, sizeof *m);
}

/* ---- from features ------------------------------------------------------ */

/*
 * Copy a block's topk result (q rows of kq neighbours, host tensors) into the
 * graph's rows [first, first + q): all kq, or without self the kq = k + 1
 * found less the row itself (the last one when the row is not among them).
 */
static void take_block(gsb__knn_graph *g, int64_t first, const gsb__tensor *dist,
                       const gsb__tensor *idx, int64_t kq, int include_self)
{
    int64_t k = g->k;
    const int64_t *ix = idx->data;
    for (int64_t r = 0; r < dist->rows; r++) {
        int64_t row = first + r, out = 0;
        for (int64_t j = 0; j < kq && out < k; j++) {
            int64_t nb = ix[r * kq + j];
            if (!include_self && nb == row)
                continue;
            g->dist[row * k + out] = gsb__tensor_get(dist, r * kq + j);
            g->idx[row * k + out] = nb;
            out++;
        }
    }
}

static int64_t block_rows(const gsb__backend *be, int64_t n, int64_t d)
{
    if (be != gsb__cpu_backend())
        return n < KNN_GPU_BLOCK_ROWS ? n : KNN_GPU_BLOCK_ROWS;
    int64_t per_row = n * (d > 0 ? d : 1);
    int64_t rows = KNN_BLOCK_WORK / (per_row > 0 ? per_row : 1);
    rows = rows < KNN_BLOCK_MIN_ROWS ? KNN_BLOCK_MIN_ROWS : rows;
    return rows < n ? rows : n;
}

/* progress between blocks, when there is a caller to tell */
static int progress(gsb__ctx *c, int64_t rows)
{
    return c ? gsb__progress(c, "neighbors", rows, 0.0) : GSB_OK;
}

static int graph_features(gsb__ctx *c, const gsb__backend *be, const gsb__tensor *X,
                          const gsb__knn_opts *o, gsb__knn_graph *g)
{
    int64_t n = X->rows, kq = o->include_self ? o->k : o->k + 1;
    gsb__tensor R = GSB__TENSOR_NONE, d = GSB__TENSOR_NONE, ix = GSB__TENSOR_NONE;
    gsb__tensor dh = GSB__TENSOR_NONE, ih = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_to(be, X, &R));
    int64_t step = block_rows(be, n, X->cols);
    for (int64_t first = 0; first < n; first += step) {
        int64_t q = n - first < step ? n - first : step;
        gsb__tensor Q = R; /* a row range is a valid tensor on every backend */
        Q.data = (char *)R.data + (size_t)first * (size_t)R.cols * gsb_dtype_size(R.dtype);
        Q.rows = q;
        Q.owned = 0;
        GSB_CHECK(gsb__tensor_alloc(be, R.dtype, q, kq, &d));
        GSB_CHECK(gsb__tensor_alloc(be, GSB_I64, q, kq, &ix));
        GSB_CHECK(be->ops->topk(be, &Q, &R, kq, o->metric, 0, &d, &ix));
        GSB_CHECK(gsb__tensor_to_host(&d, &dh));
        GSB_CHECK(gsb__tensor_to_host(&ix, &ih));
        take_block(g, first, &dh, &ih, kq, o->include_self);
        gsb__tensor_free(&d);
        gsb__tensor_free(&ix);
        gsb__tensor_free(&dh);
        gsb__tensor_free(&ih);
        GSB_CHECK(progress(c, first + q));
    }
done:
    gsb__tensor_free(&R);
    gsb__tensor_free(&d);
    gsb__tensor_free(&ix);
    gsb__tensor_free(&dh);
    gsb__tensor_free(&ih);
    return rc;
}

/* ---- from a precomputed matrix ------------------------------------------ */

/* a ranks after b: farther, or as far with a larger index */
static inline int after(double da, int64_t ia, double db, int64_t ib)
{
    return da > db || (da == db && ia > ib);
}

/* The k smallest (distance, index) of one row into the max-heap hd/hi, then
 * sorted ascending. */
static void select_row(const gsb__tensor *D, int64_t row, int64_t k, int include_self,
                       double *hd, int64_t *hi)
{
    int64_t n = D->cols, size = 0;
    for (int64_t j = 0; j < n; j++) {
        if (!include_self && j == row)
            continue;
        double v = gsb__tensor_get(D, row * n + j);
        int64_t at;
        if (size < k) {
            at = size++;
            while (at > 0 && after(v, j, hd[(at - 1) / 2], hi[(at - 1) / 2])) {
                hd[at] = hd[(at - 1) / 2];
                hi[at] = hi[(at - 1) / 2];
                at = (at - 1) / 2;
            }
        } else if (after(hd[0], hi[0], v, j)) {
            at = 0; /* sift the newcomer down from the root */
            for (;;) {
                int64_t l = 2 * at + 1, r = l + 1, big = l;
                if (l >= k)
                    break;
                if (r < k && after(hd[r], hi[r], hd[l], hi[l]))
                    big = r;
                if (!after(hd[big], hi[big], v, j))
                    break;
                hd[at] = hd[big];
                hi[at] = hi[big];
                at = big;
            }
        } else {
            continue;
        }
        hd[at] = v;
        hi[at] = j;
    }
    /* heap sort: repeatedly move the largest to the end */
    for (int64_t end = size - 1; end > 0; end--) {
        double vd = hd[end];
        int64_t vi = hi[end], at = 0;
        hd[end] = hd[0];
        hi[end] = hi[0];
        for (;;) {
            int64_t l = 2 * at + 1, r = l + 1, big = l;
            if (l >= end)
                break;
            if (r < end && after(hd[r], hi[r], hd[l], hi[l]))
                big = r;
            if (!after(hd[big], hi[big], vd, vi))
                break;
            hd[at] = hd[big];
            hi[at] = hi[big];
            at = big;
        }
        hd[at] = vd;
        hi[at] = vi;
    }
}

static int graph_precomputed(gsb__ctx *c, const gsb__tensor *X, const gsb__knn_opts *o,
                             gsb__knn_graph *g)
{
    gsb__tensor D = GSB__TENSOR_NONE;
    GSB_TRY(gsb__tensor_to(gsb__cpu_backend(), X, &D));
    int64_t n = X->rows, k = o->k, step = 4096;
    int rc = GSB_OK;
    for (int64_t first = 0; first < n && rc == GSB_OK; first += step) {
        int64_t last = n - first < step ? n : first + step;
#pragma omp parallel for schedule(dynamic, 16) if (n > 512)
        for (int64_t row = first; row < last; row++)
            select_row(&D, row, k, o->include_self, g->dist + row * k, g->idx + row * k);
        rc = progress(c, last);
    }
    gsb__tensor_free(&D);
    return rc;
}

int gsb__knn_graph_build(gsb__ctx *c, const gsb__backend *be, const gsb__tensor *X,
                         const gsb__knn_opts *o, gsb__knn_graph *out)
{
    memset(out, 0, sizeof *out);
    int64_t n = X->rows, k = o->k;
    if (k < 1 || k > n - (o->include_self ? 0 : 1))
        return gsb__err(GSB_EINTERNAL, "knn_graph: k = %lld for %lld rows", (long long)k,
                        (long long)n);
    if (o->precomputed && X->cols != n)
        return gsb__err(GSB_EINTERNAL, "knn_graph: a precomputed matrix must be square");
    out->n = n;
    out->k = k;
    out->dist = gsb__alloc_array(n * k, sizeof *out->dist);
    out->idx = gsb__alloc_array(n * k, sizeof *out->idx);
    if (!out->dist || !out->idx) {
        gsb__knn_graph_free(out);
        return gsb__err(GSB_ENOMEM, "knn_graph: out of host memory for %lld x %lld neighbours",
                        (long long)n, (long long)k);
    }
    int rc = o->precomputed ? graph_precomputed(c, X, o, out)
                            : graph_features(c, be, X, o, out);
    if (rc != GSB_OK)
        gsb__knn_graph_free(out);
    return rc;
}

/* ---- symmetrisation --------------------------------------------------------- */

typedef struct sym_entry {
    int64_t col;
    double w;
} sym_entry;

static int by_col(const void *a, const void *b)
{
    int64_t x = ((const sym_entry *)a)->col, y = ((const sym_entry *)b)->col;
    return (x > y) - (x < y);
}

static inline double combine(gsb__sym_op op, double a, double b)
{
    return op == GSB__SYM_FUZZY_UNION ? a + b - a * b : a + b;
}

/*
 * Row i of S from row i of W (fw, sorted by column) and row i of W^T (tw,
 * sorted): the union of their columns.  Writes when cols != NULL; returns
 * the entry count.
 */
static int64_t merge_row(const sym_entry *fw, int64_t nf, const sym_entry *tw, int64_t nt,
                         gsb__sym_op op, int32_t *cols, double *vals)
{
    int64_t a = 0, b = 0, out = 0;
    while (a < nf || b < nt) {
        int64_t ca = a < nf ? fw[a].col : INT64_MAX, cb = b < nt ? tw[b].col : INT64_MAX;
        int64_t col = ca < cb ? ca : cb;
        double va = 0.0, vb = 0.0;
        for (; a < nf && fw[a].col == col; a++) /* a row repeats no column, but be safe */
            va += fw[a].w;
        for (; b < nt && tw[b].col == col; b++)
            vb += tw[b].w;
        if (cols) {
            cols[out] = (int32_t)col;
            vals[out] = combine(op, va, vb);
        }
        out++;
    }
    return out;
}

int gsb__knn_symmetrize(const gsb__knn_graph *g, const double *w, gsb__sym_op op, gsb__csr *out)
{
    memset(out, 0, sizeof *out);
    int64_t n = g->n, k = g->k, m = n * k;
    if (n > INT32_MAX)
        return gsb__err(GSB_EUNSUPPORTED, "knn_symmetrize: more than 2^31 - 1 rows");
    sym_entry *fw = gsb__alloc_array(m, sizeof *fw), *tw = gsb__alloc_array(m, sizeof *tw);
    int64_t *tstart = gsb__calloc_array(n + 1, sizeof *tstart);
    int64_t *fill = gsb__alloc_array(n, sizeof *fill);
    int64_t *counts = gsb__alloc_array(n, sizeof *counts);
    int rc = GSB_OK;
    if (!fw || !tw || !tstart || !fill || !counts) {
        rc = gsb__err(GSB_ENOMEM, "knn_symmetrize: out of host memory");
        goto done;
    }
    /* W's rows sorted by column; W^T by a counting sort (rows come in order) */
    for (int64_t e = 0; e < m; e++) {
        fw[e] = (sym_entry){g->idx[e], w[e]};
        tstart[g->idx[e] + 1]++;
    }
#pragma omp parallel for schedule(static) if (m > 65536)
    for (int64_t i = 0; i < n; i++)
        qsort(fw + i * k, (size_t)k, sizeof *fw, by_col);
    for (int64_t i = 0; i < n; i++)
        tstart[i + 1] += tstart[i];
    memcpy(fill, tstart, (size_t)n * sizeof *fill);
    for (int64_t e = 0; e < m; e++)
        tw[fill[g->idx[e]]++] = (sym_entry){e / k, w[e]};

#pragma omp parallel for schedule(static) if (m > 65536)
    for (int64_t i = 0; i < n; i++)
        counts[i] = merge_row(fw + i * k, k, tw + tstart[i], tstart[i + 1] - tstart[i], op,
                              NULL, NULL);
    out->n = n;
    out->indptr = gsb__alloc_array(n + 1, sizeof *out->indptr);
    if (!out->indptr) {
        rc = gsb__err(GSB_ENOMEM, "knn_symmetrize: out of host memory");
        goto done;
    }
    out->indptr[0] = 0;
    for (int64_t i = 0; i < n; i++)
        out->indptr[i + 1] = out->indptr[i] + counts[i];
    out->nnz = out->indptr[n];
    out->indices = gsb__alloc_array(out->nnz, sizeof *out->indices);
    out->data = gsb__alloc_array(out->nnz, sizeof *out->data);
    if (!out->indices || !out->data) {
        rc = gsb__err(GSB_ENOMEM, "knn_symmetrize: out of host memory");
        goto done;
    }
#pragma omp parallel for schedule(static) if (m > 65536)
    for (int64_t i = 0; i < n; i++)
        merge_row(fw + i * k, k, tw + tstart[i], tstart[i + 1] - tstart[i], op,
                  out->indices + out->indptr[i], out->data + out->indptr[i]);
done:
    if (rc != GSB_OK)
        gsb__csr_free(out);
    free(fw);
    free(tw);
    free(tstart);
    free(fill);
    free(counts);
    return rc;
}
