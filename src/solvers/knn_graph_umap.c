/*
 * knn_graph_umap.c - exact k-nearest-neighbour graph through the backend's
 * topk op (see knn_graph_umap.h), its topk_fast form: on the GPU a TF32
 * GEMM prunes and exact distances rank (the same neighbours, backend.h).
 *
 * The reference rows go to the backend once; the queries are searched in
 * row blocks of about KNN_BLOCK_WORK_* multiply-adds (a fraction of a
 * second), which is where progress is reported and a cancel is noticed.
 */
#include "solvers/knn_graph_umap.h"

#include <string.h>

#include "core/alloc.h"

/* multiply-adds of one block of queries: ~0.1 s of a CPU core; ~50 ms of a
 * datacenter GPU (a block that small would leave the GPU's topk few queries
 * to spread over its SMs) */
#define KNN_BLOCK_WORK_CPU ((int64_t)1 << 31)
#define KNN_BLOCK_WORK_GPU ((int64_t)1 << 40)

int gsb__knn_metric_parse(const char *name, const char *who, gsb__knn_metric *out)
{
    static const struct {
        const char *name;
        gsb__knn_metric metric;
    } names[] = {{"euclidean", GSB__KNN_EUCLIDEAN}, {"l2", GSB__KNN_EUCLIDEAN},
                 {"manhattan", GSB__KNN_MANHATTAN}, {"l1", GSB__KNN_MANHATTAN},
                 {"taxicab", GSB__KNN_MANHATTAN},   {"cosine", GSB__KNN_COSINE},
                 {"correlation", GSB__KNN_CORRELATION}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].metric;
            return GSB_OK;
        }
    return gsb__err(GSB_EUNSUPPORTED,
                    "%s: metric='%s' is not supported; supported metrics: 'euclidean', 'l2', "
                    "'manhattan', 'l1', 'taxicab', 'cosine', 'correlation'",
                    who, name ? name : "(not a string)");
}

/* A float32 copy of X with each row's mean subtracted (for correlation). */
static int centred_rows(const gsb__tensor *X, gsb__tensor *out)
{
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F32, X->rows, X->cols, out));
    const float *x = X->data;
    float *o = out->data;
    for (int64_t i = 0; i < X->rows; i++) {
        double s = 0.0;
        for (int64_t j = 0; j < X->cols; j++)
            s += x[i * X->cols + j];
        float mean = (float)(s / (double)X->cols);
        for (int64_t j = 0; j < X->cols; j++)
            o[i * X->cols + j] = x[i * X->cols + j] - mean;
    }
    return GSB_OK;
}

/* X on be as the metric wants it (centred rows for correlation). */
static int prepare(const gsb__backend *be, const gsb__tensor *X, gsb__knn_metric metric,
                   gsb__tensor *out)
{
    if (metric != GSB__KNN_CORRELATION)
        return gsb__tensor_to(be, X, out);
    gsb__tensor centred;
    GSB_TRY(centred_rows(X, &centred));
    if (be == gsb__cpu_backend()) {
        *out = centred;
        return GSB_OK;
    }
    int rc = gsb__tensor_to(be, &centred, out);
    gsb__tensor_free(&centred);
    return rc;
}

static gsb__metric op_metric(gsb__knn_metric m)
{
    switch (m) {
    case GSB__KNN_MANHATTAN: return GSB__METRIC_MANHATTAN;
    case GSB__KNN_COSINE:
    case GSB__KNN_CORRELATION: return GSB__METRIC_COSINE;
    default: return GSB__METRIC_EUCLIDEAN;
    }
}

/* Search rows [r0, r0 + rows) of q into the host outputs' same rows (the
 * CPU backend writes them in place, another backend through a download). */
static int search_block(const gsb__backend *be, const gsb__tensor *q, const gsb__tensor *r,
                        int64_t r0, int64_t rows, int64_t k, gsb__metric metric,
                        gsb__tensor *dist, gsb__tensor *idx)
{
    gsb__tensor qb = gsb__tensor_rows(q, r0, rows);
    gsb__tensor dh = gsb__tensor_rows(dist, r0, rows), ih = gsb__tensor_rows(idx, r0, rows);
    int (*topk)(const gsb__backend *, const gsb__tensor *, const gsb__tensor *, int64_t,
                gsb__metric, int, gsb__tensor *, gsb__tensor *) =
        be->ops->topk_fast ? be->ops->topk_fast : be->ops->topk;
    if (be == gsb__cpu_backend())
        return topk(be, &qb, r, k, metric, 0, &dh, &ih);
    gsb__tensor d = GSB__TENSOR_NONE, ix = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F32, rows, k, &d));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_I64, rows, k, &ix));
    GSB_CHECK(topk(be, &qb, r, k, metric, 0, &d, &ix));
    GSB_CHECK(be->ops->download(be, &d, dh.data));
    GSB_CHECK(be->ops->download(be, &ix, ih.data));
done:
    gsb__tensor_free(&d);
    gsb__tensor_free(&ix);
    return rc;
}

/*
 * A row's own distance is 0 and no distance is negative (the dot-product
 * forms of euclidean and cosine leave rounding residue, ~1e-7, which would
 * shift UMAP's rho), then each row sorted again by (distance, index).
 */
static void self_fixup(gsb__tensor *dist, gsb__tensor *idx)
{
    const int64_t k = dist->cols;
    for (int64_t i = 0; i < dist->rows; i++) {
        float *d = (float *)dist->data + i * k;
        int64_t *ix = (int64_t *)idx->data + i * k;
        for (int64_t j = 0; j < k; j++)
            d[j] = ix[j] == i || d[j] < 0.0f ? 0.0f : d[j];
        for (int64_t a = 1; a < k; a++) {
            float dv = d[a];
            int64_t iv = ix[a], b = a;
            for (; b > 0 && (d[b - 1] > dv || (d[b - 1] == dv && ix[b - 1] > iv)); b--) {
                d[b] = d[b - 1];
                ix[b] = ix[b - 1];
            }
            d[b] = dv;
            ix[b] = iv;
        }
    }
}

int gsb__knn_graph_exact(gsb__ctx *c, const gsb__tensor *R, const gsb__tensor *Q, int64_t k,
                         gsb__knn_metric metric, gsb__tensor *dist, gsb__tensor *idx)
{
    *dist = *idx = GSB__TENSOR_NONE;
    const gsb__tensor *queries = Q ? Q : R;
    if (R->dtype != GSB_F32 || queries->dtype != GSB_F32 || k < 1 || k > R->rows ||
        queries->cols != R->cols)
        return gsb__err(GSB_EINTERNAL, "knn graph: bad arguments (k %lld of %lld rows)",
                        (long long)k, (long long)R->rows);
    const gsb__backend *be = c->be;
    const int64_t nq = queries->rows;
    gsb__tensor r = GSB__TENSOR_NONE, q = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F32, nq, k, dist));
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_I64, nq, k, idx));
    GSB_CHECK(prepare(be, R, metric, &r));
    if (Q)
        GSB_CHECK(prepare(be, Q, metric, &q));
    const gsb__tensor *qq = Q ? &q : &r;

    int64_t per_row = R->rows * (R->cols > 0 ? R->cols : 1);
    int64_t work = be == gsb__cpu_backend() ? KNN_BLOCK_WORK_CPU : KNN_BLOCK_WORK_GPU;
    int64_t block = work / (per_row > 0 ? per_row : 1);
    block = block < 1024 ? 1024 : block;
    for (int64_t r0 = 0; r0 < nq; r0 += block) {
        int64_t rows = nq - r0 < block ? nq - r0 : block;
        GSB_CHECK(search_block(be, qq, &r, r0, rows, k, op_metric(metric), dist, idx));
        GSB_CHECK(gsb__progress(c, "knn", r0 + rows, 0.0));
    }
    if (!Q)
        self_fixup(dist, idx);
done:
    gsb__tensor_free(&q);
    gsb__tensor_free(&r);
    if (rc != GSB_OK) {
        gsb__tensor_free(dist);
        gsb__tensor_free(idx);
    }
    return rc;
}
