/*
 * umap_embed.c - UMAP's layout stage (see umap_embed.h): find_ab_params,
 * the pruned edge schedule, the initial layout (spectral, random, pca or an
 * array) and the SGD driver around the backend's umap_sgd_epoch op.
 */
#include "estimators/manifold/umap_embed.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/umap_sgd.h"
#include "core/alloc.h"
#include "solvers/spectral_layout.h"

/* ---- find_ab_params -------------------------------------------------------- */

#define AB_POINTS 300
#define AB_MAX_ITER 500

/* sum of squared residuals of 1 / (1 + a x^2b) against y; J^T J and J^T r when
 * jtj is given */
static double ab_cost(const double *x, const double *y, double a, double b, double jtj[3],
                      double g[2])
{
    double cost = 0.0;
    if (jtj) {
        jtj[0] = jtj[1] = jtj[2] = 0.0;
        g[0] = g[1] = 0.0;
    }
    for (int i = 0; i < AB_POINTS; i++) {
        double u = x[i] > 0.0 ? pow(x[i], 2.0 * b) : 0.0;
        double den = 1.0 + a * u, f = 1.0 / den, r = f - y[i];
        cost += r * r;
        if (!jtj)
            continue;
        double da = -u / (den * den);
        double db = x[i] > 0.0 ? -a * u * 2.0 * log(x[i]) / (den * den) : 0.0;
        jtj[0] += da * da;
        jtj[1] += da * db;
        jtj[2] += db * db;
        g[0] += da * r;
        g[1] += db * r;
    }
    return cost;
}

int gsb__umap_find_ab(double spread, double min_dist, double *a_out, double *b_out)
{
    double x[AB_POINTS], y[AB_POINTS];
    for (int i = 0; i < AB_POINTS; i++) {
        x[i] = spread * 3.0 * (double)i / (AB_POINTS - 1);
        y[i] = x[i] < min_dist ? 1.0 : exp(-(x[i] - min_dist) / spread);
    }
    double a = 1.0, b = 1.0, lambda = 1e-3, jtj[3], g[2];
    double cost = ab_cost(x, y, a, b, jtj, g);
    for (int it = 0; it < AB_MAX_ITER && isfinite(cost); it++) {
        /* (J^T J + lambda diag(J^T J)) delta = -J^T r */
        double m00 = jtj[0] * (1.0 + lambda), m11 = jtj[2] * (1.0 + lambda), m01 = jtj[1];
        double det = m00 * m11 - m01 * m01;
        if (!(fabs(det) > 0.0))
            break;
        double da = -(m11 * g[0] - m01 * g[1]) / det;
        double db = -(m00 * g[1] - m01 * g[0]) / det;
        double trial = ab_cost(x, y, a + da, b + db, NULL, NULL);
        if (isfinite(trial) && trial <= cost) {
            a += da;
            b += db;
            int done = fabs(da) <= 1e-12 * (fabs(a) + 1e-12) &&
                       fabs(db) <= 1e-12 * (fabs(b) + 1e-12);
            done |= cost - trial <= 1e-16 * cost;
            cost = ab_cost(x, y, a, b, jtj, g);
            lambda = lambda / 10.0 > 1e-12 ? lambda / 10.0 : 1e-12;
            if (done)
                break;
        } else {
            lambda *= 10.0;
            if (lambda > 1e12)
                break;
        }
    }
    if (!isfinite(a) || !isfinite(b) || !(a > 0.0))
        return gsb__err(GSB_ENUMERIC,
                        "UMAP: fitting a and b to spread=%g, min_dist=%g failed; pass a and b",
                        spread, min_dist);
    *a_out = a;
    *b_out = b;
    return GSB_OK;
}

/* ---- the pruned graph -------------------------------------------------------- */

/* rows from which the pruning runs on several threads */
#define PRUNE_PAR_ROWS 20000

int gsb__umap_prune(const gsb__fcsr *G, double n_epochs, gsb__fcsr *out)
{
    memset(out, 0, sizeof *out);
    const int64_t nnz = gsb__fcsr_nnz(G), rows = G->rows;
    float mx = 0.0f;
#pragma omp parallel for schedule(static) reduction(max : mx) if (rows > PRUNE_PAR_ROWS)
    for (int64_t e = 0; e < nnz; e++)
        mx = G->data[e] > mx ? G->data[e] : mx;
    /* in float32, as umap-learn compares graph.data < graph.data.max() / n */
    const float cut = (float)((double)mx / n_epochs);
    out->rows = rows;
    out->cols = G->cols;
    out->indptr = gsb__alloc_array(rows + 1, sizeof *out->indptr);
    if (!out->indptr)
        return gsb__err(GSB_ENOMEM, "out of memory for a graph of %lld rows", (long long)rows);
    out->indptr[0] = 0;
#pragma omp parallel for schedule(static) if (rows > PRUNE_PAR_ROWS)
    for (int64_t i = 0; i < rows; i++) { /* row i's kept edges, at indptr[i + 1] for now */
        int64_t kept = 0;
        for (int64_t e = G->indptr[i]; e < G->indptr[i + 1]; e++)
            kept += !(G->data[e] < cut);
        out->indptr[i + 1] = kept;
    }
    for (int64_t i = 0; i < rows; i++)
        out->indptr[i + 1] += out->indptr[i];
    const int64_t keep = out->indptr[rows];
    out->indices = gsb__alloc_array(keep, sizeof *out->indices);
    out->data = gsb__alloc_array(keep, sizeof *out->data);
    if (!out->indices || !out->data) {
        gsb__fcsr_free(out);
        return gsb__err(GSB_ENOMEM, "out of memory for a graph of %lld edges", (long long)keep);
    }
#pragma omp parallel for schedule(static) if (rows > PRUNE_PAR_ROWS)
    for (int64_t i = 0; i < rows; i++) {
        int64_t at = out->indptr[i];
        for (int64_t e = G->indptr[i]; e < G->indptr[i + 1]; e++)
            if (!(G->data[e] < cut)) {
                out->indices[at] = G->indices[e];
                out->data[at++] = G->data[e];
            }
    }
    return GSB_OK;
}

/* ---- initial layouts ------------------------------------------------------------ */

/* umap-learn's noisy_scale_coords: largest |coordinate| 10, plus N(0, 1e-4) noise */
static void noisy_scale(const double *v, int64_t count, gsb__rng *rng, float *out)
{
    double big = 0.0;
    for (int64_t i = 0; i < count; i++)
        big = fabs(v[i]) > big ? fabs(v[i]) : big;
    double expansion = big > 0.0 ? 10.0 / big : 1.0;
    for (int64_t i = 0; i < count; i++)
        out[i] = (float)(v[i] * expansion) + (float)(1e-4 * gsb__rng_normal(rng));
}

/* The top dim eigenvectors of the p x p covariance eigh's V (host), largest
 * first, as a p x dim host tensor. */
static int top_columns(const gsb__tensor *V, int64_t dim, gsb__tensor *out)
{
    const int64_t p = V->rows;
    gsb__tensor Vh;
    GSB_TRY(gsb__tensor_to_host(V, &Vh));
    int rc = gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, p, dim, out);
    if (rc == GSB_OK) {
        const double *v = Vh.data;
        double *o = out->data;
        for (int64_t i = 0; i < p; i++)
            for (int64_t d = 0; d < dim; d++)
                o[i * dim + d] = v[i * p + (p - 1 - d)];
    }
    gsb__tensor_free(&Vh);
    return rc;
}

/* PCA scores of X (n x p) on its top dim components, by the covariance's eigh on c->be. */
static int pca_scores(gsb__ctx *c, const gsb__tensor *X, int64_t dim, double *out)
{
    const gsb__backend *be = c->be;
    const int64_t n = X->rows, p = X->cols;
    if (dim > p)
        return gsb__err(GSB_EINVAL, "UMAP: init='pca' needs n_components (%lld) <= n_features "
                        "(%lld)", (long long)dim, (long long)p);
    gsb__tensor x = GSB__TENSOR_NONE, mean = GSB__TENSOR_NONE, xc = GSB__TENSOR_NONE;
    gsb__tensor C = GSB__TENSOR_NONE, w = GSB__TENSOR_NONE, V = GSB__TENSOR_NONE;
    gsb__tensor Vk = GSB__TENSOR_NONE, S = GSB__TENSOR_NONE, top = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_to_dtype(be, X, GSB_F64, &x));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, p, 1, &mean));
    GSB_CHECK(be->ops->col_moments(be, &x, NULL, &mean, NULL));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, n, p, &xc));
    GSB_CHECK(be->ops->col_affine(be, &x, &mean, NULL, NULL, &xc));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, p, p, &C));
    GSB_CHECK(be->ops->syrk(be, 1.0, &xc, 0.0, &C));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, p, 1, &w));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, p, p, &V));
    GSB_CHECK(be->ops->eigh(be, &C, &w, &V));
    GSB_CHECK(top_columns(&V, dim, &top));
    GSB_CHECK(gsb__tensor_to(be, &top, &Vk));
    GSB_CHECK(gsb__tensor_alloc(be, GSB_F64, n, dim, &S));
    GSB_CHECK(be->ops->gemm(be, 0, 0, 1.0, &xc, &Vk, 0.0, &S));
    GSB_CHECK(be->ops->download(be, &S, out));
done:
    gsb__tensor_free(&x);
    gsb__tensor_free(&mean);
    gsb__tensor_free(&xc);
    gsb__tensor_free(&C);
    gsb__tensor_free(&w);
    gsb__tensor_free(&V);
    gsb__tensor_free(&Vk);
    gsb__tensor_free(&S);
    gsb__tensor_free(&top);
    return rc;
}

static int cmp_rows_ctx(const void *pa, const void *pb, void *ctx)
{
    const gsb__tensor *t = ctx;
    int64_t ia = *(const int64_t *)pa, ib = *(const int64_t *)pb;
    for (int64_t d = 0; d < t->cols; d++) {
        double a = gsb__tensor_get(t, ia * t->cols + d), b = gsb__tensor_get(t, ib * t->cols + d);
        if (a != b)
            return a < b ? -1 : 1;
    }
    return 0;
}

/* 1 when two rows of t are equal (sorting row indices lexicographically) */
static int has_duplicate_rows(const gsb__tensor *t, int *dup)
{
    int64_t *order = gsb__alloc_array(t->rows, sizeof *order);
    if (!order)
        return gsb__err(GSB_ENOMEM, "out of memory for %lld rows", (long long)t->rows);
    for (int64_t i = 0; i < t->rows; i++)
        order[i] = i;
    qsort_r(order, (size_t)t->rows, sizeof *order, cmp_rows_ctx, (void *)t);
    *dup = 0;
    for (int64_t i = 1; i < t->rows && !*dup; i++)
        *dup = cmp_rows_ctx(&order[i - 1], &order[i], (void *)t) == 0;
    free(order);
    return GSB_OK;
}

/* An init array as the layout; duplicated rows get N(0, 0.001 * mean nn distance)
 * jitter, as umap-learn adds. */
static int array_layout(gsb__ctx *c, gsb__umap_init *in, double *out)
{
    const gsb__tensor *A = in->array;
    const int64_t count = A->rows * A->cols;
    for (int64_t i = 0; i < count; i++)
        out[i] = gsb__tensor_get(A, i);
    int dup = 0;
    GSB_TRY(has_duplicate_rows(A, &dup));
    if (!dup || A->rows < 2)
        return GSB_OK;
    gsb__tensor a32 = GSB__TENSOR_NONE, dist = GSB__TENSOR_NONE, idx = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_to_dtype(gsb__cpu_backend(), A, GSB_F32, &a32));
    GSB_CHECK(gsb__knn_graph_exact(c, &a32, NULL, 2, GSB__KNN_EUCLIDEAN, &dist, &idx));
    double mean = 0.0;
    const float *d = dist.data;
    for (int64_t i = 0; i < A->rows; i++)
        mean += d[i * 2 + 1];
    mean /= (double)A->rows;
    for (int64_t i = 0; i < count; i++)
        out[i] += 0.001 * mean * gsb__rng_normal(in->rng);
done:
    gsb__tensor_free(&a32);
    gsb__tensor_free(&dist);
    gsb__tensor_free(&idx);
    return rc;
}

/* each coordinate scaled to [0, 10], in float32 as umap-learn's */
static void scale_to_box(float *e, int64_t n, int64_t dim)
{
    for (int64_t d = 0; d < dim; d++) {
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            lo = e[i * dim + d] < lo ? e[i * dim + d] : lo;
            hi = e[i * dim + d] > hi ? e[i * dim + d] : hi;
        }
        float range = hi > lo ? hi - lo : 1.0f;
        for (int64_t i = 0; i < n; i++)
            e[i * dim + d] = 10.0f * (e[i * dim + d] - lo) / range;
    }
}

/* the eigensolver's progress ("spectral": operator applications, residual) and
 * cancellation */
static int spectral_progress(void *data, int64_t matvecs, double residual)
{
    return gsb__progress(data, "spectral", matvecs, residual);
}

int gsb__umap_initial_layout(gsb__ctx *c, const gsb__fcsr *G, gsb__umap_init *in, float *out)
{
    const int64_t n = G->rows, dim = in->dim;
    in->spectral_failures = 0;
    double *v = gsb__alloc_array(n * dim, sizeof *v);
    if (!v)
        return gsb__err(GSB_ENOMEM, "out of memory for a layout of %lld points",
                        (long long)n);
    int rc = GSB_OK;
    switch (in->kind) {
    case GSB__UMAP_INIT_RANDOM:
        for (int64_t i = 0; i < n * dim; i++)
            out[i] = (float)(-10.0 + 20.0 * gsb__rng_uniform(in->rng));
        break;
    case GSB__UMAP_INIT_SPECTRAL: {
        gsb__spectral_opts so = {dim,     in->X->data,       in->X->cols, in->metric,
                                 in->rng, spectral_progress, c,           c->be, 0};
        GSB_CHECK(gsb__spectral_layout(G, &so, v, &in->spectral_failures));
        noisy_scale(v, n * dim, in->rng, out);
        break;
    }
    case GSB__UMAP_INIT_PCA:
        GSB_CHECK(pca_scores(c, in->X, dim, v));
        noisy_scale(v, n * dim, in->rng, out);
        break;
    case GSB__UMAP_INIT_ARRAY:
        GSB_CHECK(array_layout(c, in, v));
        for (int64_t i = 0; i < n * dim; i++)
            out[i] = (float)v[i];
        break;
    }
    scale_to_box(out, n, dim);
done:
    free(v);
    return rc;
}

/* ---- the SGD ----------------------------------------------------------------------- */

/* umap-learn's make_epochs_per_sample (its float32 ratios included) and the
 * two schedules' starting points. */
static void edge_schedule(const gsb__fcsr *G, const gsb__umap_sgd_run *r, double *eps,
                          double *next_sample, double *next_negative)
{
    const int64_t nnz = gsb__fcsr_nnz(G);
    float mx = 0.0f;
    for (int64_t e = 0; e < nnz; e++)
        mx = G->data[e] > mx ? G->data[e] : mx;
    for (int64_t e = 0; e < nnz; e++) {
        float samples = (float)r->n_epochs * (G->data[e] / mx);
        eps[e] = samples > 0.0f ? (double)r->n_epochs / (double)samples : -1.0;
        next_sample[e] = eps[e];
        next_negative[e] = r->negative_sample_rate > 0.0 ? eps[e] / r->negative_sample_rate
                                                         : INFINITY;
    }
}

typedef struct sgd_state {
    gsb__tensor head, tail, indptr, indices, eps, next_sample, next_negative;
} sgd_state;

static void sgd_state_free(sgd_state *s)
{
    gsb__tensor_free(&s->head);
    gsb__tensor_free(&s->tail);
    gsb__tensor_free(&s->indptr);
    gsb__tensor_free(&s->indices);
    gsb__tensor_free(&s->eps);
    gsb__tensor_free(&s->next_sample);
    gsb__tensor_free(&s->next_negative);
}

/* host arrays onto be (borrowed on the CPU backend: head then moves in place) */
static int sgd_upload(const gsb__backend *be, const gsb__fcsr *G, float *head, const float *tail,
                      int64_t dim, double *sched, sgd_state *s)
{
    const int64_t nnz = gsb__fcsr_nnz(G);
    gsb__tensor v = gsb__tensor_host_view(head, GSB_F32, G->rows, dim);
    GSB_TRY(gsb__tensor_to(be, &v, &s->head));
    if (tail) {
        v = gsb__tensor_host_view((void *)tail, GSB_F32, G->cols, dim);
        GSB_TRY(gsb__tensor_to(be, &v, &s->tail));
    }
    v = gsb__tensor_host_view(G->indptr, GSB_I64, G->rows + 1, 1);
    GSB_TRY(gsb__tensor_to(be, &v, &s->indptr));
    v = gsb__tensor_host_view(G->indices, GSB_I32, nnz, 1);
    GSB_TRY(gsb__tensor_to(be, &v, &s->indices));
    v = gsb__tensor_host_view(sched, GSB_F64, nnz, 1);
    GSB_TRY(gsb__tensor_to(be, &v, &s->eps));
    v = gsb__tensor_host_view(sched + nnz, GSB_F64, nnz, 1);
    GSB_TRY(gsb__tensor_to(be, &v, &s->next_sample));
    v = gsb__tensor_host_view(sched + 2 * nnz, GSB_F64, nnz, 1);
    return gsb__tensor_to(be, &v, &s->next_negative);
}

int gsb__umap_optimize(gsb__ctx *c, const gsb__fcsr *G, float *head, const float *tail,
                       int64_t dim, const gsb__umap_sgd_run *r)
{
    const int64_t nnz = gsb__fcsr_nnz(G);
    if (r->n_epochs <= 0 || nnz == 0)
        return GSB_OK;
    const gsb__backend *be = c->be;
    double *sched = gsb__alloc_array(3 * nnz, sizeof *sched);
    if (!sched)
        return gsb__err(GSB_ENOMEM, "out of memory for the schedule of %lld edges",
                        (long long)nnz);
    edge_schedule(G, r, sched, sched + nnz, sched + 2 * nnz);
    sgd_state s = {0};
    int rc;
    GSB_CHECK(sgd_upload(be, G, head, tail, dim, sched, &s));
    gsb__umap_sgd p = {0, r->a, r->b, r->gamma, r->initial_alpha, r->negative_sample_rate,
                       r->attraction_scale, r->seed, r->hogwild, 0};
    /* progress about 50 times a run: a cancel waits at most that long */
    const int64_t every = r->n_epochs / 50 > 1 ? r->n_epochs / 50 : 1;
    for (int64_t ep = 0; ep < r->n_epochs; ep++) {
        p.epoch = ep;
        p.edges_checked = ep > 0; /* the first epoch checked them (a GPU waits for that) */
        /* umap-learn sets alpha after epoch n to initial * (1 - n / n_epochs) */
        p.alpha = ep == 0 ? r->initial_alpha
                          : r->initial_alpha * (1.0 - (double)(ep - 1) / (double)r->n_epochs);
        GSB_CHECK(be->ops->umap_sgd_epoch(be, &s.head, tail ? &s.tail : NULL, &s.indptr,
                                          &s.indices, &s.eps, &s.next_sample, &s.next_negative,
                                          &p));
        if ((ep + 1) % every == 0 || ep + 1 == r->n_epochs)
            GSB_CHECK(gsb__progress(c, r->stage, ep + 1, 0.0));
    }
    if (s.head.data != head)
        GSB_CHECK(be->ops->download(be, &s.head, head));
done:
    sgd_state_free(&s);
    free(sched);
    return rc;
}
