/*
 * test_cpu_radius.c - the CPU backend's radius_neighbors op and the search
 * around it (estimators/neighbors/radius_search.c) against a naive
 * reference written independently here: every pair's distance from its
 * textbook formula in double.
 *
 * The op's decisions are exact, so its neighbour sets must equal the
 * reference's except for pairs whose reference value lies within 1e-9
 * (relative) of the threshold, where the two formulas may round either way;
 * random data practically never puts a pair there.  Covered: every metric,
 * both dtypes, 1 to 12 columns (the grid, the direct loop and the
 * GEMM-filtered tiles), the count and fill passes with distances, rows in
 * ascending order, a fill whose counts are wrong (an internal error, no
 * write outside a row), norms too large for the expansion (decided
 * exactly), eps = 0 (duplicates only), queries far outside the grid, and
 * the search's pieces under a budget of a few KiB, with a selection of rows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/tensor.h"
#include "estimators/neighbors/radius_search.h"
#include "testing.h"

static const gsb__backend *cpu;

/* ---- the naive reference ------------------------------------------------- */

/* The metric's value of rows a and b (d columns), textbook formulas. */
static double ref_dist(const double *a, const double *b, int64_t d, gsb__metric metric, double p)
{
    double s = 0, na = 0, nb = 0;
    for (int64_t k = 0; k < d; k++) {
        double t = fabs(a[k] - b[k]);
        switch (metric) {
        case GSB__METRIC_MANHATTAN: s += t; break;
        case GSB__METRIC_CHEBYSHEV: s = t > s ? t : s; break;
        case GSB__METRIC_MINKOWSKI: s += pow(t, p); break;
        case GSB__METRIC_COSINE:
            s += a[k] * b[k];
            na += a[k] * a[k];
            nb += b[k] * b[k];
            break;
        default: s += t * t;
        }
    }
    switch (metric) {
    case GSB__METRIC_EUCLIDEAN: return sqrt(s);
    case GSB__METRIC_MINKOWSKI: return pow(s, 1.0 / p);
    case GSB__METRIC_COSINE: {
        double v = na > 0 && nb > 0 ? 1.0 - s / sqrt(na * nb) : 1.0;
        return v < 0 ? 0 : (v > 2 ? 2 : v);
    }
    default: return s;
    }
}

/* 1: a neighbour, 0: not, -1: within rounding of eps (either answer is right) */
static int ref_near(double v, double eps)
{
    if (fabs(v - eps) <= 1e-9 * (eps > 1e-300 ? eps : 1e-300))
        return -1;
    return v <= eps;
}

/* ---- data ------------------------------------------------------------------ */

/* Host tensor of rows x cols as dt from src (double), and the values as the op sees them. */
static gsb__tensor make_tensor(const double *src, int64_t rows, int64_t cols, gsb_dtype dt,
                               double *seen)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(cpu, dt, rows, cols, &t) != GSB_OK)
        abort();
    for (int64_t i = 0; i < rows * cols; i++) {
        gsb__tensor_set(&t, i, src[i]);
        seen[i] = gsb__tensor_get(&t, i);
    }
    return t;
}

/* Clustered data: n rows around a few centres, with some exact duplicates. */
static double *clustered(int64_t n, int64_t d, double spread)
{
    double *x = malloc(sizeof(double) * (size_t)(n * d + 1));
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < d; k++)
            x[i * d + k] = i > 0 && i % 17 == 0 ? x[(i - 1) * d + k]
                                                : (double)(i % 4) * spread * (k % 2 ? 1 : -1) +
                                                      testing_normal();
    return x;
}

static const gsb__metric METRICS[6] = {GSB__METRIC_EUCLIDEAN, GSB__METRIC_SQEUCLIDEAN,
                                       GSB__METRIC_MANHATTAN, GSB__METRIC_CHEBYSHEV,
                                       GSB__METRIC_MINKOWSKI, GSB__METRIC_COSINE};
static const char *const METRIC_NAMES[6] = {"euclidean", "sqeuclidean", "manhattan",
                                            "chebyshev", "minkowski", "cosine"};

/* An eps that gives each row a few neighbours: the 8th smallest of 64 sampled distances. */
static double pick_eps(const double *q, int64_t nq, const double *r, int64_t nr, int64_t d,
                       gsb__metric metric, double p)
{
    double v[64];
    for (int s = 0; s < 64; s++)
        v[s] = ref_dist(q + (s % nq) * d, r + ((s * 7919) % nr) * d, d, metric, p);
    for (int a = 0; a < 64; a++)
        for (int b = a + 1; b < 64; b++)
            if (v[b] < v[a]) {
                double t = v[a];
                v[a] = v[b];
                v[b] = t;
            }
    return v[8] > 0 ? v[8] : 0.5;
}

/* ---- the op, brute force ------------------------------------------------------ */

/* Check one query row's neighbours (ascending, exact set, distances). */
static void check_row(const double *q, const double *r, int64_t nr, int64_t d,
                      gsb__metric metric, double p, double eps, const int64_t *idx,
                      const double *dist, int64_t len, int dtype_f32)
{
    int64_t at = 0;
    for (int64_t j = 0; j < nr; j++) {
        double v = ref_dist(q, r + j * d, d, metric, p);
        int want = ref_near(v, eps);
        int got = at < len && idx[at] == j;
        if (got) {
            double tol = dtype_f32 || metric == GSB__METRIC_MINKOWSKI ? 1e-9 : 1e-12;
            if (dist)
                CHECK(fabs(dist[at] - v) <= tol * (v > 1 ? v : 1));
            at++;
        }
        if (want >= 0 && got != want) {
            fprintf(stderr, "    pair (.., %lld): value %.17g, eps %.17g, op says %d\n",
                    (long long)j, v, eps, got);
            CHECK(got == want);
        }
    }
    CHECK(at == len); /* every listed index was visited in ascending order */
}

static void run_op_case(int64_t nq, int64_t nr, int64_t d, gsb_dtype dt, int mi)
{
    gsb__metric metric = METRICS[mi];
    double p = metric == GSB__METRIC_MINKOWSKI ? 0.7 + 2.0 * testing_uniform() : 2.0;
    double *qs = clustered(nq, d, 3.0), *rs = clustered(nr, d, 3.0);
    double *qv = malloc(sizeof(double) * (size_t)(nq * d + 1));
    double *rv = malloc(sizeof(double) * (size_t)(nr * d + 1));
    gsb__tensor Q = make_tensor(qs, nq, d, dt, qv), R = make_tensor(rs, nr, d, dt, rv);
    double eps = nq > 0 ? pick_eps(qv, nq, rv, nr, d, metric, p) : 1.0;
    /* the op compares the reduced distance: sqeuclidean's eps is a squared one */
    gsb__tensor counts, offsets, idx, dist;
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_I64, nq, 1, &counts));
    CHECK_OK(cpu->ops->radius_neighbors(cpu, &Q, &R, NULL, metric, p, eps, &counts, NULL, NULL,
                                        NULL));
    int64_t *cnt = counts.data, nnz = 0;
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_I64, nq, 1, &offsets));
    for (int64_t i = 0; i < nq; i++) {
        ((int64_t *)offsets.data)[i] = nnz;
        nnz += cnt[i];
    }
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_I64, nnz > 0 ? nnz : 1, 1, &idx));
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, nnz > 0 ? nnz : 1, 1, &dist));
    if (nnz == 0)
        idx.rows = dist.rows = 0;
    CHECK_OK(cpu->ops->radius_neighbors(cpu, &Q, &R, NULL, metric, p, eps, &counts, &offsets,
                                        &idx, &dist));
    for (int64_t i = 0; i < nq; i++) {
        int64_t o = ((int64_t *)offsets.data)[i];
        check_row(qv + i * d, rv, nr, d, metric, p, eps, (int64_t *)idx.data + o,
                  (double *)dist.data + o, cnt[i], dt == GSB_F32);
    }
    if (testing_cur_failed)
        fprintf(stderr, "    case %lld x %lld, d %lld, %s, %s, p %g\n", (long long)nq,
                (long long)nr, (long long)d, gsb_dtype_name(dt), METRIC_NAMES[mi], p);
    /* a fill whose counts disagree is an internal error, not a write elsewhere */
    if (nq > 0 && cnt[0] > 0) {
        cnt[0]--;
        CHECK_ERR(cpu->ops->radius_neighbors(cpu, &Q, &R, NULL, metric, p, eps, &counts,
                                             &offsets, &idx, NULL),
                  GSB_EINTERNAL, "the fill pass found other neighbours");
    }
    gsb__tensor_free(&counts);
    gsb__tensor_free(&offsets);
    gsb__tensor_free(&idx);
    gsb__tensor_free(&dist);
    gsb__tensor_free(&Q);
    gsb__tensor_free(&R);
    free(qs), free(rs), free(qv), free(rv);
}

static void test_op_brute(void)
{
    static const int64_t dims[4] = {1, 3, 8, 12};
    for (int t = 0; t < 2; t++)
        for (int mi = 0; mi < 6; mi++)
            for (int k = 0; k < 4; k++)
                run_op_case(37 + 11 * k, 150 + 40 * k, dims[k], t ? GSB_F64 : GSB_F32, mi);
    run_op_case(0, 10, 3, GSB_F64, 0); /* no queries */
    run_op_case(5, 300, 16, GSB_F32, 0);
}

/* Norms beyond the expansion's safe range (decided exactly), and float64 norms
 * beyond float32's (a float64 GEMM): the same neighbours all the same. */
static void test_op_wide_norms(void)
{
    for (int t = 0; t < 3; t++) {
        double big = t == 2 ? 1e20 : t ? 1e150 : 1e18; /* squared norms above 1e30 / 1e300 */
        gsb_dtype dt = t ? GSB_F64 : GSB_F32;
        int64_t n = 24, d = 9;
        double *x = malloc(sizeof(double) * (size_t)(n * d)), *v = malloc(sizeof(double) * (size_t)(n * d));
        for (int64_t i = 0; i < n * d; i++)
            x[i] = big * (1.0 + 0.01 * (double)(i / d % 3) + 0.001 * testing_normal());
        gsb__tensor X = make_tensor(x, n, d, dt, v);
        gsb__tensor counts;
        CHECK_OK(gsb__tensor_alloc(cpu, GSB_I64, n, 1, &counts));
        double eps = 0.004 * big * 3.0;
        CHECK_OK(cpu->ops->radius_neighbors(cpu, &X, &X, NULL, GSB__METRIC_EUCLIDEAN, 2, eps,
                                            &counts, NULL, NULL, NULL));
        for (int64_t i = 0; i < n; i++) {
            int64_t want = 0;
            for (int64_t j = 0; j < n; j++)
                want += ref_dist(v + i * d, v + j * d, d, GSB__METRIC_EUCLIDEAN, 2) <= eps;
            CHECK(((int64_t *)counts.data)[i] == want);
        }
        gsb__tensor_free(&counts);
        gsb__tensor_free(&X);
        free(x), free(v);
    }
}

/* ---- the search: grid, pieces, selections ------------------------------------------ */

typedef struct collect {
    int64_t n;            /* query rows */
    int64_t *len;         /* neighbours seen per query row (-1: not visited) */
    int64_t **idx;
    double **dist;
} collect;

static int collect_piece(void *data, const gsb__rpiece *pc)
{
    collect *c = data;
    for (int64_t k = 0; k < pc->n; k++) {
        int64_t row = pc->rows[k], len = pc->indptr[k + 1] - pc->indptr[k];
        if (row < 0 || row >= c->n || c->len[row] != -1)
            return gsb__err(GSB_EINTERNAL, "row %lld visited twice or out of range",
                            (long long)row);
        c->len[row] = len;
        c->idx[row] = malloc(sizeof(int64_t) * (size_t)(len + 1));
        c->dist[row] = malloc(sizeof(double) * (size_t)(len + 1));
        memcpy(c->idx[row], pc->idx + pc->indptr[k], sizeof(int64_t) * (size_t)len);
        if (pc->dist && len > 0)
            memcpy(c->dist[row], pc->dist + pc->indptr[k], sizeof(double) * (size_t)len);
    }
    return GSB_OK;
}

static void collect_init(collect *c, int64_t n)
{
    c->n = n;
    c->len = malloc(sizeof(int64_t) * (size_t)(n + 1));
    c->idx = calloc((size_t)(n + 1), sizeof(int64_t *));
    c->dist = calloc((size_t)(n + 1), sizeof(double *));
    for (int64_t i = 0; i < n; i++)
        c->len[i] = -1;
}

static void collect_free(collect *c)
{
    for (int64_t i = 0; i < c->n; i++) {
        free(c->idx[i]);
        free(c->dist[i]);
    }
    free(c->len), free(c->idx), free(c->dist);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Query row i's visited neighbours against the reference (order free). */
static void check_visited(const collect *c, int64_t i, const double *q, const double *r,
                          int64_t nr, int64_t d, gsb__metric metric, double p, double eps,
                          int with_dist)
{
    CHECK(c->len[i] >= 0);
    if (c->len[i] < 0)
        return;
    /* distances travel with their indices: check them before sorting */
    for (int64_t t = 0; t < c->len[i] && with_dist; t++) {
        double v = ref_dist(q, r + c->idx[i][t] * d, d, metric, p);
        CHECK(fabs(c->dist[i][t] - v) <= 1e-9 * (v > 1 ? v : 1));
    }
    qsort(c->idx[i], (size_t)c->len[i], sizeof(int64_t), cmp_i64);
    check_row(q, r, nr, d, metric, p, eps, c->idx[i], NULL, c->len[i], 1);
}

static void run_search_case(int64_t n, int64_t nq, int64_t d, gsb_dtype dt, int mi,
                            int64_t budget)
{
    gsb__metric metric = METRICS[mi];
    double p = metric == GSB__METRIC_MINKOWSKI ? 0.5 + 2.5 * testing_uniform() : 2.0;
    double *rs = clustered(n, d, 2.0), *qs = clustered(nq, d, 2.5);
    double *rv = malloc(sizeof(double) * (size_t)(n * d + 1));
    double *qv = malloc(sizeof(double) * (size_t)(nq * d + 1));
    if (nq > 2) { /* queries far outside the grid, on both sides */
        for (int64_t k = 0; k < d; k++) {
            qs[k] = dt == GSB_F32 ? 1e30 : 1e300;
            qs[d + k] = -3e5;
        }
    }
    gsb__tensor R = make_tensor(rs, n, d, dt, rv), Q = make_tensor(qs, nq, d, dt, qv);
    double eps = pick_eps(rv, n, rv, n, d, metric, p);
    gsb__rsearch s;
    CHECK_OK(gsb__rsearch_open(&s, NULL, cpu, &R, metric, p, eps, budget));
    int64_t *counts = malloc(sizeof(int64_t) * (size_t)(n + 1));
    CHECK_OK(gsb__rsearch_self_counts(&s, counts));
    for (int64_t i = 0; i < n; i++) {
        int64_t want = 0, amb = 0;
        for (int64_t j = 0; j < n; j++) {
            int w = ref_near(ref_dist(rv + i * d, rv + j * d, d, metric, p), eps);
            want += w == 1;
            amb += w == -1;
        }
        CHECK(counts[i] >= want && counts[i] <= want + amb);
    }
    /* every second row, with distances */
    unsigned char *sel = malloc((size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        sel[i] = i % 2 == 0;
    collect c;
    collect_init(&c, n);
    CHECK_OK(gsb__rsearch_self_visit(&s, counts, sel, 1, collect_piece, &c));
    for (int64_t i = 0; i < n; i++) {
        if (sel[i])
            check_visited(&c, i, rv + i * d, rv, n, d, metric, p, eps, 1);
        else
            CHECK(c.len[i] == -1);
    }
    collect_free(&c);
    collect_init(&c, n);
    CHECK_OK(gsb__rsearch_self_visit(&s, counts, NULL, 0, collect_piece, &c));
    for (int64_t i = 0; i < n; i++)
        check_visited(&c, i, rv + i * d, rv, n, d, metric, p, eps, 0);
    collect_free(&c);
    collect_init(&c, nq);
    CHECK_OK(gsb__rsearch_query_visit(&s, &Q, 1, collect_piece, &c));
    for (int64_t i = 0; i < nq; i++)
        check_visited(&c, i, qv + i * d, rv, n, d, metric, p, eps, 1);
    collect_free(&c);
    if (testing_cur_failed)
        fprintf(stderr, "    search %lld rows, %lld queries, d %lld, %s, %s, p %g, %s\n",
                (long long)n, (long long)nq, (long long)d, gsb_dtype_name(dt),
                METRIC_NAMES[mi], p, s.gridded ? "grid" : "brute");
    gsb__rsearch_close(&s);
    gsb__tensor_free(&R);
    gsb__tensor_free(&Q);
    free(counts), free(sel), free(rs), free(qs), free(rv), free(qv);
}

static void test_search(void)
{
    for (int t = 0; t < 2; t++)
        for (int mi = 0; mi < 6; mi++)
            for (int64_t d = 1; d <= 4; d++)
                run_search_case(300 + 50 * d, 40, d, t ? GSB_F64 : GSB_F32, mi,
                                d % 2 ? 4096 : (int64_t)1 << 30);
    run_search_case(1, 3, 2, GSB_F64, 0, 4096);
}

/* eps = 0: exact duplicates only, on the grid and by brute force */
static void test_search_eps_zero(void)
{
    for (int64_t d = 2; d <= 9; d += 7) {
        int64_t n = 50;
        double *x = malloc(sizeof(double) * (size_t)(n * d)), *v = malloc(sizeof(double) * (size_t)(n * d));
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < d; k++)
                x[i * d + k] = (double)((i % 7) * (k + 1));
        gsb__tensor X = make_tensor(x, n, d, GSB_F64, v);
        gsb__rsearch s;
        CHECK_OK(gsb__rsearch_open(&s, NULL, cpu, &X, GSB__METRIC_EUCLIDEAN, 2, 0.0, 1 << 20));
        int64_t counts[50];
        CHECK_OK(gsb__rsearch_self_counts(&s, counts));
        for (int64_t i = 0; i < n; i++)
            CHECK(counts[i] == (i % 7 < n % 7 ? n / 7 + 1 : n / 7));
        gsb__rsearch_close(&s);
        gsb__tensor_free(&X);
        free(x), free(v);
    }
}

int main(void)
{
    cpu = gsb__cpu_backend();
    testing_seed(20241);
    RUN(test_op_brute);
    RUN(test_op_wide_norms);
    RUN(test_search);
    RUN(test_search_eps_zero);
    return testing_done();
}
