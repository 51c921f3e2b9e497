/*
 * test_cuda_topk_gemm.c - topk's GEMM-tiled path and topk_fast (TF32 GEMM
 * that prunes, exact distances that rank; cuda_topk_gemm.cu) against the CPU
 * twin (topk in cpu_distance.c) on fresh random data: the same neighbours in
 * the same order (ties by index), each distance the metric's value.
 *
 * GSB_TOPK_PATH=gemm sends every dot-product shape through the GEMM path,
 * and small GSB_TOPK_TILE_BYTES / GSB_TOPK_QUERY_CHUNK split small data into
 * many reference tiles (pending candidates carried between them) and query
 * chunks, so the cases stay small.
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
                                       GSB__METRIC_COSINE, GSB__METRIC_MANHATTAN};

/* The op under test: topk (exact GEMM) or topk_fast (TF32 GEMM for float32). */
typedef int (*topk_fn)(const gsb__backend *, const gsb__tensor *, const gsb__tensor *, int64_t,
                       gsb__metric, int, gsb__tensor *, gsb__tensor *);

/* Host data: N(offset, 1) values, or integers in [0, ints) (exact ties and
 * duplicate rows) when ints > 0. */
static gsb__tensor host_data(gsb_dtype dt, int64_t rows, int64_t cols, int ints, double offset)
{
    if (ints)
        return host_ints(dt, rows, cols, ints);
    gsb__tensor t = host_random(dt, rows, cols, 1.0);
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&t, i, gsb__tensor_get(&t, i) + offset);
    return t;
}

/* Count the rows of the GPU's (dh, ih) that differ from the CPU's (dc, ic):
 * an index out of order, or a distance that is not the pair's. */
static void compare_rows(const gsb__tensor *Q, const gsb__tensor *R, gsb__metric m, int self,
                         const gsb__tensor *dh, const gsb__tensor *ih, const gsb__tensor *ic,
                         int64_t *order_diff, int64_t *wrong)
{
    const int64_t nq = dh->rows, k = dh->cols, nr = R->rows;
    const double tol = Q->dtype == GSB_F32 ? 1e-5 : 1e-9;
    for (int64_t i = 0; i < nq; i++)
        for (int64_t j = 0; j < k; j++) {
            int64_t a = (int64_t)gsb__tensor_get(ih, i * k + j);
            *order_diff += a != (int64_t)gsb__tensor_get(ic, i * k + j);
            if (a < 0 || a >= nr || (self && a == i)) {
                (*wrong)++;
                continue;
            }
            double want = ref_dist(Q, i, R, a, m), got = gsb__tensor_get(dh, i * k + j);
            if (!(fabs(got - want) <= tol * fmax(1.0, fabs(want)))) /* NaN fails */
                (*wrong)++;
        }
}

static void topk_gemm_case(int fast, gsb_dtype dt, gsb__metric m, int64_t nq, int64_t nr,
                           int64_t d, int64_t k, int self, int ints, double offset)
{
    int before = case_begin();
    topk_fn op = fast ? gpu->ops->topk_fast : gpu->ops->topk;
    gsb__tensor R = host_data(dt, nr, d, ints, offset);
    gsb__tensor Q = self ? R : host_data(dt, nq, d, ints, offset);
    if (self)
        nq = nr;
    gsb__tensor dc = host_poisoned(dt, nq, k), ic = host_poisoned(GSB_I64, nq, k);
    CHECK_OK(cpu->ops->topk(cpu, &Q, &R, k, m, self, &dc, &ic));
    gsb__tensor Rg = to_gpu(&R), Qg = self ? Rg : to_gpu(&Q);
    gsb__tensor dg = gpu_poisoned(dt, nq, k), ig = gpu_poisoned(GSB_I64, nq, k);
    CHECK(op != NULL);
    if (op)
        CHECK_OK(op(gpu, &Qg, &Rg, k, m, self, &dg, &ig));
    gsb__tensor ih = from_gpu(&ig), dh = from_gpu(&dg);
    int64_t order_diff = 0, wrong = 0;
    compare_rows(&Q, &R, m, self, &dh, &ih, &ic, &order_diff, &wrong);
    CHECK(wrong == 0);
    CHECK(order_diff == 0);
    CHECK_MATCH(&dg, &dc, tol_for(dt));
    if (wrong || order_diff)
        fprintf(stderr, "    %lld wrong distances, %lld indices out of place\n",
                (long long)wrong, (long long)order_diff);
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
    CASE_END(before, "%s %s %s nq=%lld nr=%lld d=%lld k=%lld self=%d ints=%d offset=%g",
             fast ? "topk_fast" : "topk", gsb_dtype_name(dt), metric_name(m), (long long)nq,
             (long long)nr, (long long)d, (long long)k, self, ints, offset);
}

/* Shapes through the GEMM path, one tile and many (carried candidates). */
static void shapes(int fast)
{
    /* nq, nr, d, k, self */
    static const int64_t cases[][5] = {
        {300, 3000, 64, 10, 0}, {1, 150, 1, 5, 0},      {77, 1000, 3, 64, 0},
        {130, 2500, 257, 100, 0}, {65, 200, 64, 1, 0}, {33, 40, 7, 40, 0},
        {1500, 1500, 3, 5, 1},  {600, 600, 64, 64, 1}, {90, 90, 5, 89, 1},
        {200, 5000, 16, 300, 0}};
    static const char *const tiles[] = {"33554432", "65536"};
    setenv("GSB_TOPK_PATH", "gemm", 1);
    for (int ti = 0; ti < 2; ti++) {
        setenv("GSB_TOPK_TILE_BYTES", tiles[ti], 1);
        for (int t = 0; t < 2; t++)
            for (int mi = 0; mi < 4; mi++)
                for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
                    topk_gemm_case(fast, dtypes[t], metrics[mi], cases[c][0], cases[c][1],
                                   cases[c][2], cases[c][3], (int)cases[c][4], 0, 0.0);
    }
    unsetenv("GSB_TOPK_TILE_BYTES");
    unsetenv("GSB_TOPK_PATH");
}

static void test_topk_gemm(void) { shapes(0); }
static void test_topk_fast(void) { shapes(1); }

/* Integer data: exact ties and duplicate rows everywhere, broken by index
 * exactly as the CPU; many tiles and query chunks. */
static void ties(int fast)
{
    setenv("GSB_TOPK_PATH", "gemm", 1);
    setenv("GSB_TOPK_TILE_BYTES", "20000", 1);
    setenv("GSB_TOPK_QUERY_CHUNK", "96", 1);
    for (int t = 0; t < 2; t++)
        for (int mi = 0; mi < 3; mi++) {
            topk_gemm_case(fast, dtypes[t], metrics[mi], 200, 2000, 2, 10, 0, 4, 0.0);
            topk_gemm_case(fast, dtypes[t], metrics[mi], 257, 3000, 3, 64, 0, 3, 0.0);
            topk_gemm_case(fast, dtypes[t], metrics[mi], 1000, 1000, 3, 100, 1, 3, 0.0);
            topk_gemm_case(fast, dtypes[t], metrics[mi], 100, 5000, 1, 10, 0, 5, 0.0);
        }
    unsetenv("GSB_TOPK_QUERY_CHUNK");
    unsetenv("GSB_TOPK_TILE_BYTES");
    unsetenv("GSB_TOPK_PATH");
}

static void test_topk_gemm_ties(void) { ties(0); }
static void test_topk_fast_ties(void) { ties(1); }

/* Data far from the origin (norms large against the distances: the
 * admission margin, relative to the norms, is widest) and MNIST-like width;
 * the default dispatch (no GSB_TOPK_PATH) at a shape that takes the GEMM. */
static void test_topk_fast_margin(void)
{
    setenv("GSB_TOPK_PATH", "gemm", 1);
    for (int mi = 0; mi < 3; mi++) {
        topk_gemm_case(1, GSB_F32, metrics[mi], 500, 4000, 64, 15, 0, 0, 10.0);
        topk_gemm_case(1, GSB_F32, metrics[mi], 300, 3000, 784, 15, 0, 0, 3.0);
    }
    topk_gemm_case(1, GSB_F32, GSB__METRIC_EUCLIDEAN, 2000, 2000, 100, 15, 1, 0, 1.0);
    unsetenv("GSB_TOPK_PATH");
    topk_gemm_case(0, GSB_F64, GSB__METRIC_EUCLIDEAN, 1100, 5000, 200, 10, 0, 0, 0.0);
    topk_gemm_case(1, GSB_F32, GSB__METRIC_EUCLIDEAN, 1100, 5000, 200, 10, 0, 0, 0.0);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20261126);
    RUN(test_topk_gemm);
    RUN(test_topk_fast);
    RUN(test_topk_gemm_ties);
    RUN(test_topk_fast_ties);
    RUN(test_topk_fast_margin);
    return testing_done();
}
