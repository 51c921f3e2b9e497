/*
 * test_cuda_radius.c - the CUDA backend's radius_neighbors (cuda_radius.cu)
 * against its CPU twin (cpu_radius.c), and the search around it
 * (radius_search.c: the grid, chunks and pieces) on the GPU against the same
 * search on the CPU.
 *
 * Both twins decide every pair on the same exact value (radius_exact.h), or
 * by an expansion only where its bound makes the decision that value's, so
 * the neighbour sets must be equal; a pair may differ only when its exact
 * value lies within 1e-9 (relative) of the threshold, where minkowski's
 * pow() may round differently on the GPU.  Random data practically never
 * puts a pair there, and such pairs are reported.  Counts are compared per
 * row, the fill's lists as sets (the GPU's tile path writes a row in any
 * order) with their distances (1e-12 relative; minkowski 1e-9).  GPU outputs
 * are poisoned first, so an unwritten element fails.
 *
 * Cases: every metric, both dtypes, 2 to 33 columns (the thread-per-row scan
 * and the tile engine, several splits of R), a query block that is a row
 * range off any vector alignment, norms too large for the expansion, a
 * fill whose counts are wrong (an internal error), and searches on 1-3
 * columns (the grid) with a budget of a few KiB.  The searches' eps is
 * set from nearest-neighbour distances (search_eps), so a row has a few
 * neighbours however many rows R has, or a few hundred where a case wants
 * rows over the budget: an eps from the distances of random pairs (as
 * pick_eps) gives every row a fixed share of R, billions of pairs for the
 * 150000-row grid, and a 4 KiB budget then cut them into one-row pieces
 * (the run never ended).  Needs a GPU: run under tools/gpu-check (ctest -L
 * gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/radius_exact.h"
#include "cuda_testing.h"
#include "estimators/neighbors/radius_search.h"

static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};
static const gsb__metric METRICS[6] = {GSB__METRIC_EUCLIDEAN, GSB__METRIC_SQEUCLIDEAN,
                                       GSB__METRIC_MANHATTAN, GSB__METRIC_CHEBYSHEV,
                                       GSB__METRIC_MINKOWSKI, GSB__METRIC_COSINE};
static const char *const NAMES[6] = {"euclidean", "sqeuclidean", "manhattan", "chebyshev",
                                     "minkowski", "cosine"};

/* The exact reduced distance of two host rows, as both twins compute it. */
static double exact(const gsb__tensor *Q, int64_t i, const gsb__tensor *R, int64_t j,
                    gsb__metric metric, double p)
{
    int64_t d = Q->cols;
    if (Q->dtype == GSB_F32) {
        const float *q = (const float *)Q->data + i * d, *r = (const float *)R->data + j * d;
        return gsb__radius_reduced_f32(q, r, d, metric, p, gsb__radius_invnorm_f32(q, d),
                                       gsb__radius_invnorm_f32(r, d));
    }
    const double *q = (const double *)Q->data + i * d, *r = (const double *)R->data + j * d;
    return gsb__radius_reduced_f64(q, r, d, metric, p, gsb__radius_invnorm_f64(q, d),
                                   gsb__radius_invnorm_f64(r, d));
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_f64(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* (index, distance) pairs of a row, sorted by index */
typedef struct nb {
    int64_t j;
    double d;
} nb;

static int cmp_nb(const void *a, const void *b)
{
    return cmp_i64(&((const nb *)a)->j, &((const nb *)b)->j);
}

/* A differing neighbour j of row i is allowed only within rounding of eps. */
static void check_difference(const gsb__tensor *Q, int64_t i, const gsb__tensor *R, int64_t j,
                             gsb__metric metric, double p, double thr)
{
    double s = exact(Q, i, R, j, metric, p);
    if (fabs(s - thr) <= 1e-9 * fabs(thr)) {
        fprintf(stderr, "    (row %lld, %lld): within rounding of eps, either answer\n",
                (long long)i, (long long)j);
        return;
    }
    fprintf(stderr, "%s: row %lld, reference %lld: exact %.17g vs threshold %.17g, twins "
            "disagree\n", testing_cur_name, (long long)i, (long long)j, s, thr);
    testing_cur_failed = 1;
}

/* Compare row i's lists a (GPU) and b (CPU), n and m long, sorted by index. */
static void compare_lists(const nb *a, int64_t n, const nb *b, int64_t m, const gsb__tensor *Q,
                          int64_t i, const gsb__tensor *R, gsb__metric metric, double p,
                          double thr, double dtol)
{
    int64_t x = 0, y = 0;
    while (x < n || y < m) {
        if (y >= m || (x < n && a[x].j < b[y].j)) {
            check_difference(Q, i, R, a[x++].j, metric, p, thr);
        } else if (x >= n || b[y].j < a[x].j) {
            check_difference(Q, i, R, b[y++].j, metric, p, thr);
        } else {
            double u = a[x].d, v = b[y].d;
            if (isnan(u) || isnan(v) || !(fabs(u - v) <= dtol * (fabs(v) > 1 ? fabs(v) : 1))) {
                fprintf(stderr, "%s: row %lld, reference %lld: distance %.17g vs CPU %.17g\n",
                        testing_cur_name, (long long)i, (long long)a[x].j, u, v);
                testing_cur_failed = 1;
            }
            x++, y++;
        }
    }
}

/* Clustered rows with exact duplicates (every 13th repeats the one before). */
static gsb__tensor clustered(gsb_dtype dt, int64_t n, int64_t d, double spread)
{
    gsb__tensor t = host_random(dt, n, d, 1.0);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < d; k++) {
            double v = i > 0 && i % 13 == 0 ? gsb__tensor_get(&t, (i - 1) * d + k)
                                            : gsb__tensor_get(&t, i * d + k) +
                                                  spread * (double)(i % 5) * (k % 2 ? 1 : -1);
            gsb__tensor_set(&t, i * d + k, v);
        }
    return t;
}

/* An eps giving a few neighbours a row: the 6th smallest of 48 sampled distances. */
static double pick_eps(const gsb__tensor *Q, const gsb__tensor *R, gsb__metric metric, double p)
{
    double v[48];
    for (int s = 0; s < 48; s++)
        v[s] = gsb__radius_value(metric, p,
                                 exact(Q, s % Q->rows, R, (s * 7919) % R->rows, metric, p));
    qsort(v, 48, sizeof *v, cmp_f64);
    return v[6] > 0 ? v[6] : 0.5;
}

/* An eps giving the rows of R about k neighbours each (k < R->rows): the
 * median over 15 sampled rows of the distance to their k-th nearest row. */
static double search_eps(const gsb__tensor *R, gsb__metric metric, double p, int64_t k)
{
    double v[15], *all = malloc(sizeof(double) * (size_t)R->rows);
    for (int s = 0; s < 15; s++) {
        int64_t i = (s * 7919) % R->rows;
        for (int64_t j = 0; j < R->rows; j++)
            all[j] = exact(R, i, R, j, metric, p);
        qsort(all, (size_t)R->rows, sizeof *all, cmp_f64);
        v[s] = gsb__radius_value(metric, p, all[k - 1]);
    }
    free(all);
    qsort(v, 15, sizeof *v, cmp_f64);
    return v[7] > 0 ? v[7] : 0.5;
}

/* Count and fill passes of both twins on Q (a row range of Qfull from q0) and R. */
static void compare_op(const gsb__tensor *Qfull, int64_t q0, int64_t nq, const gsb__tensor *R,
                       gsb__metric metric, double p, double eps)
{
    gsb__tensor Qh = gsb__tensor_rows(Qfull, q0, nq);
    gsb__tensor Qfull_g = to_gpu(Qfull), Rg = to_gpu(R);
    gsb__tensor Qg = gsb__tensor_rows(&Qfull_g, q0, nq);
    double thr = gsb__radius_threshold(metric, p, eps);
    double dtol = metric == GSB__METRIC_MINKOWSKI ? 1e-9 : 1e-12;

    gsb__tensor cnt_c = host_poisoned(GSB_I64, nq, 1), cnt_g = gpu_poisoned(GSB_I64, nq, 1);
    CHECK_OK(cpu->ops->radius_neighbors(cpu, &Qh, R, NULL, metric, p, eps, &cnt_c, NULL, NULL,
                                        NULL));
    CHECK_OK(gpu->ops->radius_neighbors(gpu, &Qg, &Rg, NULL, metric, p, eps, &cnt_g, NULL, NULL,
                                        NULL));
    gsb__tensor cg = from_gpu(&cnt_g);
    const int64_t *cc = cnt_c.data, *gc = cg.data;
    int64_t nnz_c = 0, nnz_g = 0;
    for (int64_t i = 0; i < nq; i++) {
        nnz_c += cc[i];
        nnz_g += gc[i] > 0 ? gc[i] : 0;
    }
    /* fill on each side with its own counts */
    gsb__tensor off_c, off_g_h, idx_c, dist_c;
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_I64, nq, 1, &off_c));
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_I64, nq, 1, &off_g_h));
    for (int64_t i = 0, a = 0, b = 0; i < nq; i++) {
        ((int64_t *)off_c.data)[i] = a;
        ((int64_t *)off_g_h.data)[i] = b;
        a += cc[i];
        b += gc[i] > 0 ? gc[i] : 0;
    }
    idx_c = host_poisoned(GSB_I64, nnz_c > 0 ? nnz_c : 1, 1);
    dist_c = host_poisoned(GSB_F64, nnz_c > 0 ? nnz_c : 1, 1);
    gsb__tensor idx_g = gpu_poisoned(GSB_I64, nnz_g > 0 ? nnz_g : 1, 1);
    gsb__tensor dist_g = gpu_poisoned(GSB_F64, nnz_g > 0 ? nnz_g : 1, 1);
    gsb__tensor off_g = to_gpu(&off_g_h);
    CHECK_OK(cpu->ops->radius_neighbors(cpu, &Qh, R, NULL, metric, p, eps, &cnt_c, &off_c,
                                        &idx_c, &dist_c));
    CHECK_OK(gpu->ops->radius_neighbors(gpu, &Qg, &Rg, NULL, metric, p, eps, &cnt_g, &off_g,
                                        &idx_g, &dist_g));
    gsb__tensor ig = from_gpu(&idx_g), dg = from_gpu(&dist_g);
    nb *a = malloc(sizeof(nb) * (size_t)(R->rows + 1)), *b = malloc(sizeof(nb) * (size_t)(R->rows + 1));
    for (int64_t i = 0; i < nq; i++) {
        int64_t n = gc[i] > 0 ? gc[i] : 0, m = cc[i];
        for (int64_t t = 0; t < n; t++) {
            a[t].j = ((int64_t *)ig.data)[((int64_t *)off_g_h.data)[i] + t];
            a[t].d = ((double *)dg.data)[((int64_t *)off_g_h.data)[i] + t];
        }
        for (int64_t t = 0; t < m; t++) {
            b[t].j = ((int64_t *)idx_c.data)[((int64_t *)off_c.data)[i] + t];
            b[t].d = ((double *)dist_c.data)[((int64_t *)off_c.data)[i] + t];
        }
        qsort(a, (size_t)n, sizeof *a, cmp_nb);
        compare_lists(a, n, b, m, &Qh, i, R, metric, p, thr, dtol);
    }
    /* a fill whose counts disagree: the CPU twin's status and words */
    if (nq > 0 && gc[0] > 0) {
        ((int64_t *)cg.data)[0]--;
        gsb__tensor bad = to_gpu(&cg);
        CHECK_ERR(gpu->ops->radius_neighbors(gpu, &Qg, &Rg, NULL, metric, p, eps, &bad, &off_g,
                                             &idx_g, NULL),
                  GSB_EINTERNAL, "the fill pass found other neighbours");
        gsb__tensor_free(&bad);
    }
    free(a), free(b);
    gsb__tensor *all[] = {&Qfull_g, &Rg, &cnt_c, &cnt_g, &cg, &off_c, &off_g_h, &off_g,
                          &idx_c, &dist_c, &idx_g, &dist_g, &ig, &dg};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        gsb__tensor_free(all[k]);
}

static void test_op_brute(void)
{
    static const int64_t dims[5] = {2, 5, 16, 33, 8};
    static const int64_t sizes[5][2] = {{70, 300}, {130, 1000}, {257, 3000}, {64, 700},
                                        {40, 20000}};
    for (int t = 0; t < 2; t++)
        for (int mi = 0; mi < 6; mi++)
            for (int k = 0; k < 5; k++) {
                int before = case_begin();
                gsb__metric metric = METRICS[mi];
                double p = metric == GSB__METRIC_MINKOWSKI ? 0.6 + 2.2 * testing_uniform() : 2;
                int64_t nq = sizes[k][0], nr = sizes[k][1], d = dims[k];
                gsb__tensor Q = clustered(dtypes[t], nq + 3, d, 2.0);
                gsb__tensor R = clustered(dtypes[t], nr, d, 2.0);
                gsb__tensor Qv = gsb__tensor_rows(&Q, 3, nq);
                double eps = pick_eps(&Qv, &R, metric, p);
                compare_op(&Q, 3, nq, &R, metric, p, eps); /* a row range: odd alignment */
                gsb__tensor_free(&Q);
                gsb__tensor_free(&R);
                CASE_END(before, "%s, %s, %lld x %lld, d %lld, p %g, eps %g",
                         gsb_dtype_name(dtypes[t]), NAMES[mi], (long long)nq, (long long)nr,
                         (long long)d, p, eps);
            }
}

/* Norms too large for the expansion: the tile path decides every pair exactly. */
static void test_op_wide_norms(void)
{
    for (int t = 0; t < 2; t++) {
        int before = case_begin();
        double big = t ? 1e150 : 1e18;
        gsb__tensor X = host_random(dtypes[t], 96, 9, 1.0);
        for (int64_t i = 0; i < 96 * 9; i++)
            gsb__tensor_set(&X, i, big * (1.0 + 0.01 * (double)(i / 9 % 3) +
                                          0.001 * gsb__tensor_get(&X, i)));
        compare_op(&X, 0, 96, &X, GSB__METRIC_EUCLIDEAN, 2, 0.012 * big);
        gsb__tensor_free(&X);
        CASE_END(before, "%s, wide norms", gsb_dtype_name(dtypes[t]));
    }
}

/* ---- the search on each backend ----------------------------------------------------- */

typedef struct lists {
    int64_t n, *len;
    nb **row;
} lists;

static int keep(void *data, const gsb__rpiece *pc)
{
    lists *l = data;
    for (int64_t k = 0; k < pc->n; k++) {
        int64_t r = pc->rows[k], len = pc->indptr[k + 1] - pc->indptr[k];
        l->len[r] = len;
        l->row[r] = malloc(sizeof(nb) * (size_t)(len + 1));
        for (int64_t t = 0; t < len; t++) {
            l->row[r][t].j = pc->idx[pc->indptr[k] + t];
            l->row[r][t].d = pc->dist ? pc->dist[pc->indptr[k] + t] : 0.0;
        }
        qsort(l->row[r], (size_t)len, sizeof(nb), cmp_nb);
    }
    return GSB_OK;
}

static void lists_init(lists *l, int64_t n)
{
    l->n = n;
    l->len = calloc((size_t)(n + 1), sizeof(int64_t));
    l->row = calloc((size_t)(n + 1), sizeof(nb *));
}

static void lists_free(lists *l)
{
    for (int64_t i = 0; i < l->n; i++)
        free(l->row[i]);
    free(l->len), free(l->row);
}

/* The search of R (n rows) on both backends, rows of about `per_row`
 * neighbours, a budget of `budget` bytes of lists per piece. */
static void compare_search(int64_t n, int64_t nq, int64_t d, gsb_dtype dt, int mi,
                           int64_t per_row, int64_t budget)
{
    gsb__metric metric = METRICS[mi];
    double p = metric == GSB__METRIC_MINKOWSKI ? 0.5 + 2.5 * testing_uniform() : 2;
    gsb__tensor R = clustered(dt, n, d, 1.5), Q = clustered(dt, nq, d, 2.0);
    gsb__tensor_set(&Q, 0, 1e30); /* a query far outside the grid */
    double eps = search_eps(&R, metric, p, per_row), thr = gsb__radius_threshold(metric, p, eps);
    double dtol = metric == GSB__METRIC_MINKOWSKI ? 1e-9 : 1e-12;
    gsb__rsearch sc, sg;
    CHECK_OK(gsb__rsearch_open(&sc, NULL, cpu, &R, metric, p, eps, budget));
    CHECK_OK(gsb__rsearch_open(&sg, NULL, gpu, &R, metric, p, eps, budget));
    int64_t *cc = calloc((size_t)(n + 1), sizeof(int64_t)), *gc = calloc((size_t)(n + 1), sizeof(int64_t));
    CHECK_OK(gsb__rsearch_self_counts(&sc, cc));
    CHECK_OK(gsb__rsearch_self_counts(&sg, gc));
    lists lc, lg;
    lists_init(&lc, n);
    lists_init(&lg, n);
    CHECK_OK(gsb__rsearch_self_visit(&sc, cc, NULL, 1, keep, &lc));
    CHECK_OK(gsb__rsearch_self_visit(&sg, gc, NULL, 1, keep, &lg));
    for (int64_t i = 0; i < n; i++)
        compare_lists(lg.row[i], lg.len[i], lc.row[i], lc.len[i], &R, i, &R, metric, p, thr,
                      dtol);
    lists_free(&lc);
    lists_free(&lg);
    lists_init(&lc, nq);
    lists_init(&lg, nq);
    CHECK_OK(gsb__rsearch_query_visit(&sc, &Q, 1, keep, &lc));
    CHECK_OK(gsb__rsearch_query_visit(&sg, &Q, 1, keep, &lg));
    for (int64_t i = 0; i < nq; i++)
        compare_lists(lg.row[i], lg.len[i], lc.row[i], lc.len[i], &Q, i, &R, metric, p, thr,
                      dtol);
    lists_free(&lc);
    lists_free(&lg);
    gsb__rsearch_close(&sc);
    gsb__rsearch_close(&sg);
    gsb__tensor_free(&R);
    gsb__tensor_free(&Q);
    free(cc), free(gc);
}

static void test_search(void)
{
    /* 4 KiB hold 256 neighbours (with distances): rows of ~400 (one column)
     * make one-row pieces over the budget, rows of ~12 pieces of many rows */
    for (int t = 0; t < 2; t++)
        for (int mi = 0; mi < 6; mi++)
            for (int64_t d = 1; d <= 4; d++) {
                int before = case_begin();
                int64_t n = 500 + 700 * d, per_row = d == 1 ? 400 : 12;
                compare_search(n, 90, d, dtypes[t], mi, per_row, 4096);
                CASE_END(before, "search %s, %s, %lld rows, d %lld, ~%lld neighbours a row",
                         gsb_dtype_name(dtypes[t]), NAMES[mi], (long long)n, (long long)d,
                         (long long)per_row);
            }
    /* a larger grid: many cells, several chunks of queries, pieces of
     * thousands of rows */
    int before = case_begin();
    compare_search(150000, 70000, 2, GSB_F32, 0, 12, (int64_t)1 << 20);
    CASE_END(before, "search float32, euclidean, 150000 rows, d 2");
}

static void test_bad_arguments(void)
{
    gsb__tensor Qh = host_random(GSB_F32, 4, 3, 1.0), Q = to_gpu(&Qh);
    gsb__tensor c = gpu_poisoned(GSB_I64, 4, 1);
    CHECK_ERR(gpu->ops->radius_neighbors(gpu, &Q, &Q, NULL, (gsb__metric)9, 2, 1, &c, NULL, NULL,
                                         NULL),
              GSB_EINTERNAL, "radius_neighbors: unknown metric 9");
    CHECK_ERR(gpu->ops->radius_neighbors(gpu, &Q, &Q, NULL, GSB__METRIC_EUCLIDEAN, 2, -1, &c,
                                         NULL, NULL, NULL),
              GSB_EINTERNAL, "radius_neighbors: radius -1");
    CHECK_ERR(gpu->ops->radius_neighbors(gpu, &Qh, &Q, NULL, GSB__METRIC_EUCLIDEAN, 2, 1, &c,
                                         NULL, NULL, NULL),
              GSB_EINTERNAL, "not in this GPU's memory");
    gsb__tensor_free(&Qh);
    gsb__tensor_free(&Q);
    gsb__tensor_free(&c);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(911);
    RUN(test_op_brute);
    RUN(test_op_wide_norms);
    RUN(test_search);
    RUN(test_bad_arguments);
    return testing_done();
}
