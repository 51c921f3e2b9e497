/*
 * test_cuda_distance.c - the CUDA backend's distance ops (cuda_distance.cu,
 * cuda_topk.cu) against their CPU twins: pairwise, argmin_sqdist, topk and
 * segment_sum.
 *
 * Every op in both float dtypes on fresh random data with GPU outputs
 * poisoned (NaN / -1), shapes from 1 row to 30k rows, d = 0, 1, 3, 64, 257,
 * row counts that are not multiples of any tile, row slices (data off any
 * vector alignment), integer-valued data with exact ties (broken by index),
 * zero rows (cosine), and bad arguments (the CPU twin's statuses and
 * messages).  Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"
#include "distance_reference.h"

static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};
static const gsb__metric metrics[4] = {GSB__METRIC_SQEUCLIDEAN, GSB__METRIC_EUCLIDEAN,
                                       GSB__METRIC_MANHATTAN, GSB__METRIC_COSINE};

/* ---- helpers ------------------------------------------------------------------ */

static void zero_row(gsb__tensor *t, int64_t i)
{
    for (int64_t j = 0; j < t->cols; j++)
        gsb__tensor_set(t, i * t->cols + j, 0.0);
}

/* The CPU op's message, kept while the GPU op overwrites the thread's. */
static char cpu_msg[512];
static void keep_cpu_msg(void) { snprintf(cpu_msg, sizeof cpu_msg, "%s", gsb_errmsg()); }

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ---- pairwise ----------------------------------------------------------------- */

static void pairwise_case(gsb_dtype dt, gsb__metric m, int64_t n, int64_t mm, int64_t d,
                          int same)
{
    int before = case_begin();
    gsb__tensor X = host_random(dt, n, d, 1.0);
    gsb__tensor Y = same ? X : host_random(dt, mm, d, 1.0);
    if (same)
        mm = n;
    if (m == GSB__METRIC_COSINE && n > 1) { /* zero rows count as orthogonal: distance 1 */
        zero_row(&X, n - 1);
        if (!same)
            zero_row(&Y, 0);
    }
    gsb__tensor Dc = host_poisoned(dt, n, mm);
    CHECK_OK(cpu->ops->pairwise(cpu, &X, &Y, m, &Dc));
    gsb__tensor Xg = to_gpu(&X), Yg = same ? Xg : to_gpu(&Y);
    gsb__tensor Dg = gpu_poisoned(dt, n, mm);
    CHECK_OK(gpu->ops->pairwise(gpu, &Xg, &Yg, m, &Dg));
    /* 1 - cos lies in [0, 2] whatever the inputs' magnitude: its scale is 1,
     * and all of D can be exactly 0 (one row each, d = 1, same signs) */
    CHECK_MATCH_FLOOR(&Dg, &Dc, tol_for(dt), m == GSB__METRIC_COSINE ? 1.0 : 0.0);
    if (same) { /* the diagonal is exactly 0, every metric */
        gsb__tensor h = from_gpu(&Dg);
        for (int64_t i = 0; i < n; i++)
            if (gsb__tensor_get(&h, i * n + i) != 0.0) {
                CHECK(gsb__tensor_get(&h, i * n + i) == 0.0);
                break;
            }
        gsb__tensor_free(&h);
    }
    gsb__tensor_free(&Dg);
    gsb__tensor_free(&Dc);
    if (!same) {
        gsb__tensor_free(&Yg);
        gsb__tensor_free(&Y);
    }
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&X);
    CASE_END(before, "pairwise %s %s n=%lld m=%lld d=%lld same=%d", gsb_dtype_name(dt),
             metric_name(m), (long long)n, (long long)mm, (long long)d, same);
}

static void test_pairwise(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1},       {130, 7, 3},  {257, 65, 64},
                                        {300, 129, 257}, {64, 33, 1},  {1000, 3, 64},
                                        {7, 5, 0}};
    for (int t = 0; t < 2; t++)
        for (int mi = 0; mi < 4; mi++) {
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                pairwise_case(dtypes[t], metrics[mi], shapes[s][0], shapes[s][1], shapes[s][2],
                              0);
            pairwise_case(dtypes[t], metrics[mi], 200, 200, 5, 1);
        }
}

/* A row slice whose data is off any vector alignment (d = 3). */
static void test_pairwise_view(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        gsb__tensor X = host_random(dt, 101, 3, 1.0), Y = host_random(dt, 40, 3, 1.0);
        gsb__tensor Xv = gsb__tensor_rows(&X, 1, 99), Yv = gsb__tensor_rows(&Y, 3, 37);
        gsb__tensor Dc = host_poisoned(dt, 99, 37);
        CHECK_OK(cpu->ops->pairwise(cpu, &Xv, &Yv, GSB__METRIC_SQEUCLIDEAN, &Dc));
        gsb__tensor Xg = to_gpu(&X), Yg = to_gpu(&Y);
        gsb__tensor Xgv = gsb__tensor_rows(&Xg, 1, 99), Ygv = gsb__tensor_rows(&Yg, 3, 37);
        gsb__tensor Dg = gpu_poisoned(dt, 99, 37);
        CHECK_OK(gpu->ops->pairwise(gpu, &Xgv, &Ygv, GSB__METRIC_SQEUCLIDEAN, &Dg));
        CHECK_MATCH(&Dg, &Dc, tol_for(dt));
        gsb__tensor_free(&Dg);
        gsb__tensor_free(&Dc);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&Yg);
        gsb__tensor_free(&X);
        gsb__tensor_free(&Y);
    }
}

static void test_pairwise_errors(void)
{
    gsb__tensor X = host_random(GSB_F32, 10, 4, 1.0), Y = host_random(GSB_F32, 6, 4, 1.0);
    gsb__tensor Y5 = host_random(GSB_F32, 6, 5, 1.0);
    gsb__tensor Xg = to_gpu(&X), Yg = to_gpu(&Y), Y5g = to_gpu(&Y5);
    gsb__tensor D = gpu_poisoned(GSB_F32, 10, 6), Dbad = gpu_poisoned(GSB_F32, 10, 7);
    gsb__tensor D64 = gpu_poisoned(GSB_F64, 10, 6);
    CHECK_ERR(gpu->ops->pairwise(gpu, &Xg, &Y5g, GSB__METRIC_EUCLIDEAN, &D), GSB_EINTERNAL,
              "pairwise: Y has shape");
    CHECK_ERR(gpu->ops->pairwise(gpu, &Xg, &Yg, GSB__METRIC_EUCLIDEAN, &Dbad), GSB_EINTERNAL,
              "pairwise: D has shape");
    CHECK_ERR(gpu->ops->pairwise(gpu, &Xg, &Yg, GSB__METRIC_EUCLIDEAN, &D64), GSB_EINTERNAL,
              "pairwise: D has dtype");
    CHECK_ERR(gpu->ops->pairwise(gpu, &Xg, &Yg, (gsb__metric)9, &D), GSB_EINTERNAL,
              "unknown metric");
    /* host memory handed to the GPU op: refused, not dereferenced */
    CHECK_ERR(gpu->ops->pairwise(gpu, &X, &Yg, GSB__METRIC_EUCLIDEAN, &D), GSB_EINTERNAL,
              "not in this GPU's memory");
    /* no rows: nothing to do */
    gsb__tensor X0 = gpu_poisoned(GSB_F32, 0, 4), D0 = gpu_poisoned(GSB_F32, 0, 6);
    CHECK_OK(gpu->ops->pairwise(gpu, &X0, &Yg, GSB__METRIC_COSINE, &D0));
    gsb__tensor_free(&X0);
    gsb__tensor_free(&D0);
    gsb__tensor_free(&D);
    gsb__tensor_free(&Dbad);
    gsb__tensor_free(&D64);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&Yg);
    gsb__tensor_free(&Y5g);
    gsb__tensor_free(&X);
    gsb__tensor_free(&Y);
    gsb__tensor_free(&Y5);
}

/* ---- argmin_sqdist ------------------------------------------------------------ */

/*
 * GPU labels and distances for X (host) against C (host), checked against
 * the CPU twin: labels equal except on near ties (then the GPU's centre
 * must be as near within 1e-5 relative), every distance the exact one to
 * the chosen centre.
 */
static void argmin_check(const gsb__tensor *X, const gsb__tensor *C, const gsb__tensor *Xg,
                         const gsb__tensor *Cg)
{
    gsb_dtype dt = X->dtype;
    int64_t n = X->rows, k = C->rows;
    gsb__tensor lc = host_poisoned(GSB_I32, n, 1), mc = host_poisoned(dt, n, 1);
    CHECK_OK(cpu->ops->argmin_sqdist(cpu, X, C, &lc, &mc));
    gsb__tensor lg = gpu_poisoned(GSB_I32, n, 1), mg = gpu_poisoned(dt, n, 1);
    CHECK_OK(gpu->ops->argmin_sqdist(gpu, Xg, Cg, &lg, &mg));
    gsb__tensor lh = from_gpu(&lg), mh = from_gpu(&mg);
    int64_t bad_label = 0, not_tie = 0, bad_dist = 0, differ = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t gl = (int64_t)gsb__tensor_get(&lh, i), cl = (int64_t)gsb__tensor_get(&lc, i);
        if (gl < 0 || gl >= k) {
            bad_label++;
            continue;
        }
        double dg = ref_dist(X, i, C, gl, GSB__METRIC_SQEUCLIDEAN);
        /* the exact distance, rounded once to the dtype */
        double want = dt == GSB_F32 ? (double)(float)dg : dg;
        double got = gsb__tensor_get(&mh, i);
        if (!(fabs(got - want) <= (dt == GSB_F32 ? 1e-6 : 1e-12) * fmax(1.0, want)))
            bad_dist++;
        if (gl != cl) {
            differ++;
            double dc = ref_dist(X, i, C, cl, GSB__METRIC_SQEUCLIDEAN);
            if (!(dg <= dc * (1.0 + 1e-5) + 1e-12))
                not_tie++;
        }
    }
    CHECK(bad_label == 0);
    CHECK(bad_dist == 0);
    CHECK(not_tie == 0);
    if (differ)
        printf("    argmin: %lld of %lld labels differ from the CPU's, all near ties\n",
               (long long)differ, (long long)n);
    CHECK_MATCH(&mg, &mc, tol_for(dt));
    gsb__tensor_free(&lh);
    gsb__tensor_free(&mh);
    gsb__tensor_free(&lg);
    gsb__tensor_free(&mg);
    gsb__tensor_free(&lc);
    gsb__tensor_free(&mc);
}

static void test_argmin(void)
{
    static const int64_t shapes[][3] = {{1, 3, 1},       {1000, 1, 7},    {2049, 3, 5},
                                        {3001, 64, 100}, {1537, 257, 33}, {20000, 64, 256},
                                        {777, 16, 64},   {5000, 8, 129},  {300, 2, 1},
                                        {50, 0, 3}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int before = case_begin();
            gsb_dtype dt = dtypes[t];
            int64_t n = shapes[s][0], d = shapes[s][1], k = shapes[s][2];
            gsb__tensor X = host_random(dt, n, d, 1.0), C = host_random(dt, k, d, 1.0);
            /* rows equal to a centre: that centre, at distance exactly 0 */
            int64_t ncopy = n < 3 ? n : 3;
            for (int64_t i = 0; i < ncopy; i++)
                for (int64_t j = 0; j < d; j++)
                    gsb__tensor_set(&X, i * d + j, gsb__tensor_get(&C, ((i * 7) % k) * d + j));
            gsb__tensor Xg = to_gpu(&X), Cg = to_gpu(&C);
            argmin_check(&X, &C, &Xg, &Cg);
            gsb__tensor lg = gpu_poisoned(GSB_I32, n, 1), mg = gpu_poisoned(dt, n, 1);
            CHECK_OK(gpu->ops->argmin_sqdist(gpu, &Xg, &Cg, &lg, &mg));
            gsb__tensor lh = from_gpu(&lg), mh = from_gpu(&mg);
            for (int64_t i = 0; i < ncopy; i++) { /* (d = 0: every centre ties, the first wins) */
                CHECK(gsb__tensor_get(&mh, i) == 0.0);
                CHECK((int64_t)gsb__tensor_get(&lh, i) == (d > 0 ? (i * 7) % k : 0));
            }
            gsb__tensor_free(&lh);
            gsb__tensor_free(&mh);
            gsb__tensor_free(&lg);
            gsb__tensor_free(&mg);
            gsb__tensor_free(&Xg);
            gsb__tensor_free(&Cg);
            gsb__tensor_free(&X);
            gsb__tensor_free(&C);
            CASE_END(before, "argmin %s n=%lld d=%lld k=%lld", gsb_dtype_name(dt),
                     (long long)n, (long long)d, (long long)k);
        }
}

/* Integer data: exact ties between centres go to the smaller index. */
static void test_argmin_ties(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        int64_t n = 3000, d = 2, k = 40;
        gsb__tensor X = host_ints(dt, n, d, 5), C = host_ints(dt, k, d, 5);
        gsb__tensor Xg = to_gpu(&X), Cg = to_gpu(&C);
        gsb__tensor lc = host_poisoned(GSB_I32, n, 1), mc = host_poisoned(dt, n, 1);
        CHECK_OK(cpu->ops->argmin_sqdist(cpu, &X, &C, &lc, &mc));
        gsb__tensor lg = gpu_poisoned(GSB_I32, n, 1), mg = gpu_poisoned(dt, n, 1);
        CHECK_OK(gpu->ops->argmin_sqdist(gpu, &Xg, &Cg, &lg, &mg));
        CHECK_MATCH(&lg, &lc, 0.0);
        CHECK_MATCH(&mg, &mc, 0.0);
        gsb__tensor_free(&lg);
        gsb__tensor_free(&mg);
        gsb__tensor_free(&lc);
        gsb__tensor_free(&mc);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&Cg);
        gsb__tensor_free(&X);
        gsb__tensor_free(&C);
    }
}

static void test_argmin_view(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        gsb__tensor X = host_random(dt, 1001, 3, 1.0), C = host_random(dt, 20, 3, 1.0);
        gsb__tensor Xv = gsb__tensor_rows(&X, 1, 999), Cv = gsb__tensor_rows(&C, 1, 17);
        gsb__tensor Xg = to_gpu(&X), Cg = to_gpu(&C);
        gsb__tensor Xgv = gsb__tensor_rows(&Xg, 1, 999), Cgv = gsb__tensor_rows(&Cg, 1, 17);
        argmin_check(&Xv, &Cv, &Xgv, &Cgv);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&Cg);
        gsb__tensor_free(&X);
        gsb__tensor_free(&C);
    }
}

static void test_argmin_errors(void)
{
    gsb__tensor X = host_random(GSB_F64, 10, 4, 1.0), C = host_random(GSB_F64, 3, 4, 1.0);
    gsb__tensor Xg = to_gpu(&X), Cg = to_gpu(&C);
    gsb__tensor C0 = gpu_poisoned(GSB_F64, 0, 4), C5 = gpu_poisoned(GSB_F64, 3, 5);
    gsb__tensor lab = gpu_poisoned(GSB_I32, 10, 1), lab64 = gpu_poisoned(GSB_I64, 10, 1);
    gsb__tensor mind = gpu_poisoned(GSB_F64, 10, 1), mind9 = gpu_poisoned(GSB_F64, 9, 1);
    gsb__tensor mind32 = gpu_poisoned(GSB_F32, 10, 1);
    CHECK_ERR(gpu->ops->argmin_sqdist(gpu, &Xg, &C0, &lab, &mind), GSB_EINVAL,
              "argmin_sqdist: no centres given");
    CHECK_ERR(gpu->ops->argmin_sqdist(gpu, &Xg, &C5, &lab, &mind), GSB_EINTERNAL,
              "argmin_sqdist: C has shape");
    CHECK_ERR(gpu->ops->argmin_sqdist(gpu, &Xg, &Cg, &lab64, &mind), GSB_EINTERNAL,
              "argmin_sqdist: labels has dtype int64");
    CHECK_ERR(gpu->ops->argmin_sqdist(gpu, &Xg, &Cg, &lab, &mind9), GSB_EINTERNAL,
              "argmin_sqdist: mind has 9 elements, expected 10");
    CHECK_ERR(gpu->ops->argmin_sqdist(gpu, &Xg, &Cg, &lab, &mind32), GSB_EINTERNAL,
              "argmin_sqdist: mind has dtype float32");
    CHECK_ERR(gpu->ops->argmin_sqdist(gpu, &Xg, &C, &lab, &mind), GSB_EINTERNAL,
              "not in this GPU's memory");
    /* no rows, even with no centres: nothing to do */
    gsb__tensor X0 = gpu_poisoned(GSB_F64, 0, 4), l0 = gpu_poisoned(GSB_I32, 0, 1);
    gsb__tensor m0 = gpu_poisoned(GSB_F64, 0, 1);
    CHECK_OK(gpu->ops->argmin_sqdist(gpu, &X0, &Cg, &l0, &m0));
    CHECK_OK(gpu->ops->argmin_sqdist(gpu, &X0, &C0, &l0, &m0));
    gsb__tensor_free(&X0);
    gsb__tensor_free(&l0);
    gsb__tensor_free(&m0);
    gsb__tensor_free(&C0);
    gsb__tensor_free(&C5);
    gsb__tensor_free(&lab);
    gsb__tensor_free(&lab64);
    gsb__tensor_free(&mind);
    gsb__tensor_free(&mind9);
    gsb__tensor_free(&mind32);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&Cg);
    gsb__tensor_free(&X);
    gsb__tensor_free(&C);
}

/* ---- topk --------------------------------------------------------------------- */

/*
 * GPU topk of Q against R (host tensors; self: Q is R and each row excludes
 * itself) against the CPU twin: the same neighbours in the same order
 * (ties by index; distances are exact on both), distances within tol.
 */
static void topk_case(gsb_dtype dt, gsb__metric m, int64_t nq, int64_t nr, int64_t d, int64_t k,
                      int self, int ints)
{
    int before = case_begin();
    gsb__tensor R = ints ? host_ints(dt, nr, d, ints) : host_random(dt, nr, d, 1.0);
    gsb__tensor Q = self ? R : (ints ? host_ints(dt, nq, d, ints) : host_random(dt, nq, d, 1.0));
    if (self)
        nq = nr;
    if (m == GSB__METRIC_COSINE && !ints && nr > 3) { /* zero rows: distance 1 to all */
        zero_row(&R, 3);
        if (!self)
            zero_row(&Q, 0);
    }
    gsb__tensor dc = host_poisoned(dt, nq, k), ic = host_poisoned(GSB_I64, nq, k);
    CHECK_OK(cpu->ops->topk(cpu, &Q, &R, k, m, self, &dc, &ic));
    gsb__tensor Rg = to_gpu(&R), Qg = self ? Rg : to_gpu(&Q);
    gsb__tensor dg = gpu_poisoned(dt, nq, k), ig = gpu_poisoned(GSB_I64, nq, k);
    CHECK_OK(gpu->ops->topk(gpu, &Qg, &Rg, k, m, self, &dg, &ig));
    gsb__tensor ih = from_gpu(&ig), dh = from_gpu(&dg);
    int64_t *a = malloc((size_t)k * sizeof *a), *b = malloc((size_t)k * sizeof *b);
    int64_t set_diff = 0, order_diff = 0, wrong = 0;
    for (int64_t i = 0; i < nq; i++) {
        for (int64_t j = 0; j < k; j++) {
            a[j] = (int64_t)gsb__tensor_get(&ih, i * k + j);
            b[j] = (int64_t)gsb__tensor_get(&ic, i * k + j);
            order_diff += a[j] != b[j];
            /* each distance is the metric's value for that pair */
            if (a[j] < 0 || a[j] >= nr || (self && a[j] == i)) {
                wrong++;
                continue;
            }
            double want = ref_dist(&Q, i, &R, a[j], m), got = gsb__tensor_get(&dh, i * k + j);
            if (!(fabs(got - want) <= (dt == GSB_F32 ? 1e-5 : 1e-9) * fmax(1.0, fabs(want))))
                wrong++;
        }
        qsort(a, (size_t)k, sizeof *a, cmp_i64);
        qsort(b, (size_t)k, sizeof *b, cmp_i64);
        set_diff += memcmp(a, b, (size_t)k * sizeof *a) != 0;
    }
    CHECK(wrong == 0);
    CHECK(set_diff == 0);
    CHECK(order_diff == 0);
    CHECK_MATCH(&dg, &dc, tol_for(dt));
    if (wrong || set_diff || order_diff)
        fprintf(stderr, "    %lld wrong pairs, %lld rows with other neighbours, %lld out of order\n",
                (long long)wrong, (long long)set_diff, (long long)order_diff);
    free(a);
    free(b);
    gsb__tensor_free(&ih);
    gsb__tensor_free(&dh);
    gsb__tensor_free(&dg);
    gsb__tensor_free(&ig);
    gsb__tensor_free(&dc);
    gsb__tensor_free(&ic);
    if (!self) {
        gsb__tensor_free(&Qg);
        gsb__tensor_free(&Q);
    }
    gsb__tensor_free(&Rg);
    gsb__tensor_free(&R);
    CASE_END(before, "topk %s %s nq=%lld nr=%lld d=%lld k=%lld self=%d ints=%d",
             gsb_dtype_name(dt), metric_name(m), (long long)nq, (long long)nr, (long long)d,
             (long long)k, self, ints);
}

static void test_topk(void)
{
    /* nq, nr, d, k, self */
    static const int64_t cases[][5] = {
        {300, 3000, 64, 10, 0}, {1, 150, 1, 5, 0},     {77, 1000, 3, 64, 0},
        {130, 2500, 257, 100, 0}, {65, 200, 64, 1, 0}, {33, 40, 7, 40, 0},
        {1500, 1500, 3, 5, 1},  {600, 600, 64, 64, 1}, {90, 90, 5, 89, 1},
        {5, 20, 0, 3, 0}};
    for (int t = 0; t < 2; t++)
        for (int mi = 0; mi < 4; mi++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
                topk_case(dtypes[t], metrics[mi], cases[c][0], cases[c][1], cases[c][2],
                          cases[c][3], (int)cases[c][4], 0);
}

/* Many references: several splits and query blocks, merged per query. */
static void test_topk_large(void)
{
    for (int mi = 0; mi < 4; mi++)
        topk_case(GSB_F32, metrics[mi], 1000, 30000, 64, 10, 0, 0);
    topk_case(GSB_F64, GSB__METRIC_SQEUCLIDEAN, 700, 20000, 64, 10, 0, 0);
    topk_case(GSB_F32, GSB__METRIC_EUCLIDEAN, 300, 20000, 32, 100, 0, 0);
    topk_case(GSB_F32, GSB__METRIC_EUCLIDEAN, 200, 20000, 16, 300, 0, 0);
}

/* Integer data: exact ties everywhere, broken by index exactly as the CPU. */
static void test_topk_ties(void)
{
    for (int t = 0; t < 2; t++)
        for (int mi = 0; mi < 4; mi++) {
            topk_case(dtypes[t], metrics[mi], 200, 2000, 2, 10, 0, 4);
            topk_case(dtypes[t], metrics[mi], 257, 3000, 3, 64, 0, 3);
            topk_case(dtypes[t], metrics[mi], 1000, 1000, 3, 100, 1, 3);
            topk_case(dtypes[t], metrics[mi], 100, 5000, 1, 10, 0, 5);
        }
}

static void test_topk_view(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        gsb__tensor Q = host_random(dt, 51, 3, 1.0), R = host_random(dt, 302, 3, 1.0);
        gsb__tensor Qv = gsb__tensor_rows(&Q, 1, 50), Rv = gsb__tensor_rows(&R, 1, 301);
        gsb__tensor dc = host_poisoned(dt, 50, 7), ic = host_poisoned(GSB_I64, 50, 7);
        CHECK_OK(cpu->ops->topk(cpu, &Qv, &Rv, 7, GSB__METRIC_EUCLIDEAN, 0, &dc, &ic));
        gsb__tensor Qg = to_gpu(&Q), Rg = to_gpu(&R);
        gsb__tensor Qgv = gsb__tensor_rows(&Qg, 1, 50), Rgv = gsb__tensor_rows(&Rg, 1, 301);
        gsb__tensor dg = gpu_poisoned(dt, 50, 7), ig = gpu_poisoned(GSB_I64, 50, 7);
        CHECK_OK(gpu->ops->topk(gpu, &Qgv, &Rgv, 7, GSB__METRIC_EUCLIDEAN, 0, &dg, &ig));
        CHECK_MATCH(&ig, &ic, 0.0);
        CHECK_MATCH(&dg, &dc, tol_for(dt));
        gsb__tensor_free(&dg);
        gsb__tensor_free(&ig);
        gsb__tensor_free(&dc);
        gsb__tensor_free(&ic);
        gsb__tensor_free(&Qg);
        gsb__tensor_free(&Rg);
        gsb__tensor_free(&Q);
        gsb__tensor_free(&R);
    }
}

/* The same status and message from both backends for (Q, R, k, self). */
static void topk_error_case(const gsb__tensor *Q, const gsb__tensor *R, const gsb__tensor *Qg,
                            const gsb__tensor *Rg, int64_t k, int self, int status)
{
    int64_t kk = k > 0 ? k : 1;
    gsb__tensor dc = host_poisoned(Q->dtype, Q->rows, kk), ic = host_poisoned(GSB_I64, Q->rows, kk);
    gsb__tensor dg = gpu_poisoned(Q->dtype, Q->rows, kk), ig = gpu_poisoned(GSB_I64, Q->rows, kk);
    int rc = cpu->ops->topk(cpu, Q, R, k, GSB__METRIC_EUCLIDEAN, self, &dc, &ic);
    CHECK(rc == status);
    keep_cpu_msg();
    CHECK_ERR(gpu->ops->topk(gpu, Qg, Rg, k, GSB__METRIC_EUCLIDEAN, self, &dg, &ig), status,
              cpu_msg);
    gsb__tensor_free(&dc);
    gsb__tensor_free(&ic);
    gsb__tensor_free(&dg);
    gsb__tensor_free(&ig);
}

static void test_topk_errors(void)
{
    gsb__tensor Q = host_random(GSB_F32, 6, 3, 1.0), R = host_random(GSB_F32, 8, 3, 1.0);
    gsb__tensor Qg = to_gpu(&Q), Rg = to_gpu(&R);
    topk_error_case(&Q, &R, &Qg, &Rg, 0, 0, GSB_EINVAL);  /* "Expected n_neighbors > 0" */
    topk_error_case(&Q, &R, &Qg, &Rg, 9, 0, GSB_EINVAL);  /* more than n_samples_fit */
    topk_error_case(&R, &R, &Rg, &Rg, 8, 1, GSB_EINVAL);  /* itself excluded: "<" */
    topk_error_case(&Q, &R, &Qg, &Rg, 2, 1, GSB_EINTERNAL); /* exclude_self, Q is not R */
    CHECK(strstr(cpu_msg, "exclude_self") != NULL);
    gsb__tensor d = gpu_poisoned(GSB_F32, 6, 3), i = gpu_poisoned(GSB_I64, 6, 3);
    gsb__tensor d64 = gpu_poisoned(GSB_F64, 6, 3), i32 = gpu_poisoned(GSB_I32, 6, 3);
    gsb__tensor d4 = gpu_poisoned(GSB_F32, 6, 4);
    CHECK_ERR(gpu->ops->topk(gpu, &Qg, &Rg, 3, GSB__METRIC_COSINE, 0, &d64, &i), GSB_EINTERNAL,
              "topk: dist has dtype float64");
    CHECK_ERR(gpu->ops->topk(gpu, &Qg, &Rg, 3, GSB__METRIC_COSINE, 0, &d, &i32), GSB_EINTERNAL,
              "topk: idx has dtype int32");
    CHECK_ERR(gpu->ops->topk(gpu, &Qg, &Rg, 3, GSB__METRIC_COSINE, 0, &d4, &i), GSB_EINTERNAL,
              "topk: dist has shape (6, 4), expected (6, 3)");
    CHECK_ERR(gpu->ops->topk(gpu, &Qg, &Rg, 3, (gsb__metric)-1, 0, &d, &i), GSB_EINTERNAL,
              "unknown metric");
    CHECK_ERR(gpu->ops->topk(gpu, &Q, &Rg, 3, GSB__METRIC_COSINE, 0, &d, &i), GSB_EINTERNAL,
              "not in this GPU's memory");
    /* no queries: nothing to do */
    gsb__tensor Q0 = gpu_poisoned(GSB_F32, 0, 3), d0 = gpu_poisoned(GSB_F32, 0, 3);
    gsb__tensor i0 = gpu_poisoned(GSB_I64, 0, 3);
    CHECK_OK(gpu->ops->topk(gpu, &Q0, &Rg, 3, GSB__METRIC_MANHATTAN, 0, &d0, &i0));
    gsb__tensor_free(&Q0);
    gsb__tensor_free(&d0);
    gsb__tensor_free(&i0);
    gsb__tensor_free(&d);
    gsb__tensor_free(&i);
    gsb__tensor_free(&d64);
    gsb__tensor_free(&i32);
    gsb__tensor_free(&d4);
    gsb__tensor_free(&Qg);
    gsb__tensor_free(&Rg);
    gsb__tensor_free(&Q);
    gsb__tensor_free(&R);
}

/* ---- segment_sum -------------------------------------------------------------- */

/* How a segment case's labels are drawn: uniform in [0, k); every row in
 * cluster k - 1 (one cluster spans every segment of the sorted order); runs
 * of 37 rows alternating between the first and the last cluster;
 * nondecreasing (each cluster one block of rows, some ending on a segment
 * boundary of cuda_segment_sum.cu, 128 positions); uniform over the even
 * clusters only (every odd cluster empty). */
enum { LAB_UNIFORM, LAB_ONE, LAB_RUNS, LAB_SORTED, LAB_EVEN };

static gsb__tensor segment_labels(int64_t n, int64_t k, int lmode)
{
    gsb__tensor lab = host_random(GSB_I32, n, 1, (double)k);
    for (int64_t i = 0; lmode != LAB_UNIFORM && i < n; i++) {
        double v = gsb__tensor_get(&lab, i);
        if (lmode == LAB_ONE || lmode == LAB_RUNS)
            v = lmode == LAB_ONE || (i / 37) % 2 ? (double)(k - 1) : 0.0;
        else if (lmode == LAB_SORTED)
            v = (double)(i * k / n);
        else
            v = (double)(((int64_t)v / 2) * 2);
        gsb__tensor_set(&lab, i, v);
    }
    return lab;
}

static void segment_case(gsb_dtype dt, int64_t n, int64_t d, int64_t k, int wmode, int lmode)
{
    int before = case_begin();
    gsb__tensor X = host_random(dt, n, d, 1.0), lab = segment_labels(n, k, lmode);
    gsb__tensor w = wmode ? host_random(wmode == 1 ? GSB_F32 : GSB_F64, n, 1, 1.0)
                          : GSB__TENSOR_NONE;
    gsb__tensor sc = host_poisoned(GSB_F64, k, d), cc = host_poisoned(GSB_F64, k, 1);
    CHECK_OK(cpu->ops->segment_sum(cpu, &X, &lab, wmode ? &w : NULL, &sc, &cc));
    gsb__tensor Xg = to_gpu(&X), labg = to_gpu(&lab);
    gsb__tensor wg = wmode ? to_gpu(&w) : GSB__TENSOR_NONE;
    gsb__tensor sg = gpu_poisoned(GSB_F64, k, d), cg = gpu_poisoned(GSB_F64, k, 1);
    CHECK_OK(gpu->ops->segment_sum(gpu, &Xg, &labg, wmode ? &wg : NULL, &sg, &cg));
    CHECK_MATCH(&sg, &sc, 1e-10);
    CHECK_MATCH(&cg, &cc, 1e-10);
    /* deterministic: a second run gives the same bits */
    gsb__tensor sg2 = gpu_poisoned(GSB_F64, k, d), cg2 = gpu_poisoned(GSB_F64, k, 1);
    CHECK_OK(gpu->ops->segment_sum(gpu, &Xg, &labg, wmode ? &wg : NULL, &sg2, &cg2));
    gsb__tensor h1 = from_gpu(&sg), h2 = from_gpu(&sg2), c1 = from_gpu(&cg), c2 = from_gpu(&cg2);
    CHECK(memcmp(h1.data, h2.data, (size_t)(k * d) * sizeof(double)) == 0);
    CHECK(memcmp(c1.data, c2.data, (size_t)k * sizeof(double)) == 0);
    gsb__tensor_free(&h1);
    gsb__tensor_free(&h2);
    gsb__tensor_free(&c1);
    gsb__tensor_free(&c2);
    gsb__tensor_free(&sg2);
    gsb__tensor_free(&cg2);
    gsb__tensor_free(&sg);
    gsb__tensor_free(&cg);
    gsb__tensor_free(&sc);
    gsb__tensor_free(&cc);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&labg);
    gsb__tensor_free(&wg);
    gsb__tensor_free(&X);
    gsb__tensor_free(&lab);
    gsb__tensor_free(&w);
    CASE_END(before, "segment_sum %s n=%lld d=%lld k=%lld weights=%s labels=%s",
             gsb_dtype_name(dt), (long long)n, (long long)d, (long long)k,
             wmode == 0 ? "none" : (wmode == 1 ? "float32" : "float64"),
             lmode == LAB_UNIFORM  ? "uniform"
             : lmode == LAB_ONE    ? "one"
             : lmode == LAB_RUNS   ? "runs"
             : lmode == LAB_SORTED ? "sorted"
                                   : "even");
}

static void test_segment_sum(void)
{
    /* cuda_segment_sum.cu: segments of 128 sorted positions, column tiles of
     * 128, or one of 64 where d <= 64 (the weight totals with the first; the
     * L2 prefetch window of 6 KB: 6 to 32 rows): 6000 x 1000 and 3000 x 300 take
     * several tiles, the last partial, 4097 x 33 and 70001 x 65 columns past
     * a lane's first; k = 1 one cluster over every segment; 3000 x 300,
     * k = 700 and 12000 x 3, k = 5000 many short runs (clusters inside one
     * segment, written directly, beside longer ones); 50 x 7, k = 300 more
     * clusters than rows (most empty); 128 and 129 rows a segment boundary */
    static const int64_t shapes[][3] = {{1, 1, 1},       {1000, 3, 5},      {50000, 64, 100},
                                        {3000, 300, 700}, {20000, 2, 1},    {4097, 33, 17},
                                        {0, 4, 3},       {10, 0, 2},        {6000, 1000, 3},
                                        {20000, 64, 300}, {70001, 65, 1},   {50, 7, 300},
                                        {128, 5, 2},     {129, 5, 2},       {12000, 3, 5000},
                                        {2000, 257, 9}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int wmode = 0; wmode < 3; wmode++)
                segment_case(dtypes[t], shapes[s][0], shapes[s][1], shapes[s][2], wmode,
                             LAB_UNIFORM);
    /* skewed labels: one cluster, the first and last in turn, sorted, half empty */
    static const int64_t skewed[][3] = {{50000, 64, 100}, {20000, 64, 300}, {6000, 1000, 3},
                                        {1280, 3, 10},    {3000, 40, 2999}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof skewed / sizeof skewed[0]; s++)
            for (int lmode = LAB_ONE; lmode <= LAB_EVEN; lmode++)
                segment_case(dtypes[t], skewed[s][0], skewed[s][1], skewed[s][2], 2, lmode);
}

static void test_segment_sum_errors(void)
{
    int64_t n = 12, d = 3, k = 7;
    gsb__tensor X = host_random(GSB_F32, n, d, 1.0), lab = host_random(GSB_I32, n, 1, (double)k);
    gsb__tensor sc = host_poisoned(GSB_F64, k, d), cc = host_poisoned(GSB_F64, k, 1);
    gsb__tensor Xg = to_gpu(&X);
    gsb__tensor sg = gpu_poisoned(GSB_F64, k, d), cg = gpu_poisoned(GSB_F64, k, 1);
    /* the first bad row is named, as on the CPU */
    static const int bad[][4] = {{9, 7, 5, -1}, {2, 7, -1, 0}, {11, -3, -1, 0}};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        gsb__tensor l = host_random(GSB_I32, n, 1, (double)k);
        gsb__tensor_set(&l, bad[b][0], bad[b][1]);
        if (bad[b][2] >= 0)
            gsb__tensor_set(&l, bad[b][2], bad[b][3]);
        CHECK(cpu->ops->segment_sum(cpu, &X, &l, NULL, &sc, &cc) == GSB_EINVAL);
        keep_cpu_msg();
        CHECK(strstr(cpu_msg, "is outside [0, 7)") != NULL);
        gsb__tensor lg = to_gpu(&l);
        CHECK_ERR(gpu->ops->segment_sum(gpu, &Xg, &lg, NULL, &sg, &cg), GSB_EINVAL, cpu_msg);
        gsb__tensor_free(&lg);
        gsb__tensor_free(&l);
    }
    /* many segments: bad labels (sorted last by the GPU) in two far apart rows */
    {
        gsb__tensor Xb = host_random(GSB_F64, 50000, 5, 1.0);
        gsb__tensor lb = host_random(GSB_I32, 50000, 1, (double)k);
        gsb__tensor_set(&lb, 40000, (double)k);
        gsb__tensor_set(&lb, 7777, -5.0);
        gsb__tensor sb = host_poisoned(GSB_F64, k, 5), cb = host_poisoned(GSB_F64, k, 1);
        CHECK(cpu->ops->segment_sum(cpu, &Xb, &lb, NULL, &sb, &cb) == GSB_EINVAL);
        keep_cpu_msg();
        CHECK(strstr(cpu_msg, "label -5 of row 7777") != NULL);
        gsb__tensor Xbg = to_gpu(&Xb), lbg = to_gpu(&lb);
        gsb__tensor sbg = gpu_poisoned(GSB_F64, k, 5), cbg = gpu_poisoned(GSB_F64, k, 1);
        CHECK_ERR(gpu->ops->segment_sum(gpu, &Xbg, &lbg, NULL, &sbg, &cbg), GSB_EINVAL,
                  cpu_msg);
        gsb__tensor *all[] = {&Xb, &lb, &sb, &cb, &Xbg, &lbg, &sbg, &cbg};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            gsb__tensor_free(all[i]);
    }
    gsb__tensor labg = to_gpu(&lab);
    gsb__tensor w11 = gpu_poisoned(GSB_F64, 11, 1), wi = gpu_poisoned(GSB_I32, n, 1);
    gsb__tensor s32 = gpu_poisoned(GSB_F32, k, d), s4 = gpu_poisoned(GSB_F64, k, 4);
    gsb__tensor c6 = gpu_poisoned(GSB_F64, 6, 1), l64 = gpu_poisoned(GSB_I64, n, 1);
    CHECK_ERR(gpu->ops->segment_sum(gpu, &Xg, &labg, &w11, &sg, &cg), GSB_EINTERNAL,
              "segment_sum: w has shape");
    CHECK_ERR(gpu->ops->segment_sum(gpu, &Xg, &labg, &wi, &sg, &cg), GSB_EINTERNAL,
              "segment_sum: w has dtype int32");
    CHECK_ERR(gpu->ops->segment_sum(gpu, &Xg, &labg, NULL, &s32, &cg), GSB_EINTERNAL,
              "segment_sum: sums has dtype float32");
    CHECK_ERR(gpu->ops->segment_sum(gpu, &Xg, &labg, NULL, &s4, &cg), GSB_EINTERNAL,
              "segment_sum: sums has shape");
    CHECK_ERR(gpu->ops->segment_sum(gpu, &Xg, &labg, NULL, &sg, &c6), GSB_EINTERNAL,
              "segment_sum: counts has shape");
    CHECK_ERR(gpu->ops->segment_sum(gpu, &Xg, &l64, NULL, &sg, &cg), GSB_EINTERNAL,
              "segment_sum: labels has dtype int64");
    CHECK_ERR(gpu->ops->segment_sum(gpu, &Xg, &lab, NULL, &sg, &cg), GSB_EINTERNAL,
              "not in this GPU's memory");
    /* after the errors the op still works */
    CHECK_OK(gpu->ops->segment_sum(gpu, &Xg, &labg, NULL, &sg, &cg));
    CHECK_OK(cpu->ops->segment_sum(cpu, &X, &lab, NULL, &sc, &cc));
    CHECK_MATCH(&sg, &sc, 1e-10);
    gsb__tensor_free(&w11);
    gsb__tensor_free(&wi);
    gsb__tensor_free(&s32);
    gsb__tensor_free(&s4);
    gsb__tensor_free(&c6);
    gsb__tensor_free(&l64);
    gsb__tensor_free(&labg);
    gsb__tensor_free(&sg);
    gsb__tensor_free(&cg);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&sc);
    gsb__tensor_free(&cc);
    gsb__tensor_free(&X);
    gsb__tensor_free(&lab);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20240612);
    RUN(test_pairwise);
    RUN(test_pairwise_view);
    RUN(test_pairwise_errors);
    RUN(test_argmin);
    RUN(test_argmin_ties);
    RUN(test_argmin_view);
    RUN(test_argmin_errors);
    RUN(test_topk);
    RUN(test_topk_large);
    RUN(test_topk_ties);
    RUN(test_topk_view);
    RUN(test_topk_errors);
    RUN(test_segment_sum);
    RUN(test_segment_sum_errors);
    return testing_done();
}
