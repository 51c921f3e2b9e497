/*
 * test_cuda_segment_sum.c - cuda_segment_sum.cu's two paths (the chunk
 * path, a k x d accumulator per block in shared memory, and the sorted
 * path, GSB_SEGMENT_SUM=sorted) against the CPU twin, at the chunk path's
 * edges: k x d at its shared-memory budget and one past it, one chunk,
 * fewer rows than a chunk, the last chunk short, column tiles, empty
 * clusters, all rows in one warp's clusters, weights, bad labels; and
 * bitwise repeatable.  `test_cuda_segment_sum --time`: both paths' times
 * on a grid of shapes (the op waits for its label check, so a call's wall
 * time is its device time plus a launch).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_testing.h"

static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};
static const char *const paths[2] = {"chunk", "sorted"};

enum { LAB_UNIFORM, LAB_ONE, LAB_EIGHTH, LAB_EVEN, LAB_SORTED };

static gsb__tensor labels_for(int64_t n, int64_t k, int lmode)
{
    gsb__tensor lab = host_random(GSB_I32, n, 1, (double)k);
    int32_t *l = lab.data;
    for (int64_t i = 0; i < n; i++) {
        if (lmode == LAB_ONE)
            l[i] = (int32_t)(k - 1);
        else if (lmode == LAB_EIGHTH) /* every cluster of one warp (c % 8 == 3) */
            l[i] = (l[i] / 8) * 8 + 3; /* >= k: k - 1, below */
        else if (lmode == LAB_EVEN)
            l[i] = (l[i] / 2) * 2;
        else if (lmode == LAB_SORTED)
            l[i] = (int32_t)(i * k / n);
    }
    return lab;
}

static void set_path(int p) { setenv("GSB_SEGMENT_SUM", paths[p], 1); }

static void seg_case(gsb_dtype dt, int64_t n, int64_t d, int64_t k, int wmode, int lmode)
{
    int before = case_begin();
    gsb__tensor X = host_random(dt, n, d, 1.0), lab = labels_for(n, k, lmode);
    for (int64_t i = 0; i < n; i++) /* labels in range (LAB_EIGHTH's formula) */
        if (((int32_t *)lab.data)[i] >= k)
            ((int32_t *)lab.data)[i] = (int32_t)(k - 1);
    gsb__tensor w = wmode ? host_random(wmode == 1 ? GSB_F32 : GSB_F64, n, 1, 1.0)
                          : GSB__TENSOR_NONE;
    gsb__tensor sc = host_poisoned(GSB_F64, k, d), cc = host_poisoned(GSB_F64, k, 1);
    CHECK_OK(cpu->ops->segment_sum(cpu, &X, &lab, wmode ? &w : NULL, &sc, &cc));
    gsb__tensor Xg = to_gpu(&X), labg = to_gpu(&lab);
    gsb__tensor wg = wmode ? to_gpu(&w) : GSB__TENSOR_NONE;
    for (int p = 0; p < 2; p++) {
        set_path(p);
        gsb__tensor sg[2], cg[2], hs[2], hc[2];
        for (int r = 0; r < 2; r++) {
            sg[r] = gpu_poisoned(GSB_F64, k, d);
            cg[r] = gpu_poisoned(GSB_F64, k, 1);
            CHECK_OK(gpu->ops->segment_sum(gpu, &Xg, &labg, wmode ? &wg : NULL, &sg[r], &cg[r]));
            hs[r] = from_gpu(&sg[r]);
            hc[r] = from_gpu(&cg[r]);
        }
        CHECK_MATCH(&sg[0], &sc, 1e-10);
        CHECK_MATCH(&cg[0], &cc, 1e-10);
        CHECK(memcmp(hs[0].data, hs[1].data, (size_t)(k * d) * sizeof(double)) == 0);
        CHECK(memcmp(hc[0].data, hc[1].data, (size_t)k * sizeof(double)) == 0);
        for (int r = 0; r < 2; r++) {
            gsb__tensor_free(&sg[r]);
            gsb__tensor_free(&cg[r]);
            gsb__tensor_free(&hs[r]);
            gsb__tensor_free(&hc[r]);
        }
        if (testing_cur_failed) {
            fprintf(stderr, "    path %s\n", paths[p]);
            break;
        }
    }
    unsetenv("GSB_SEGMENT_SUM");
    gsb__tensor *all[] = {&X, &lab, &w, &sc, &cc, &Xg, &labg, &wg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gsb__tensor_free(all[i]);
    CASE_END(before, "segment_sum %s n=%lld d=%lld k=%lld weights=%d labels=%d",
             gsb_dtype_name(dt), (long long)n, (long long)d, (long long)k, wmode, lmode);
}

static void test_shapes(void)
{
    /* chunk path budget (96 KB: k (tc + 1) doubles, k owners, 12 KB of warp
     * buffers): d = 32: k = 320 fits, 321 goes to the sorted path; d = 64:
     * k = 164 in one tile of 64, 165 in two of 32; d = 128: k = 83 in one
     * tile of 128, 84 in two of 64.  n <= 1024: one chunk (written straight to sums);
     * 1000, 4097 rows: shorter than a chunk / a last short chunk; 300 and 200
     * columns: tiles, the last partial; k = 3 < 8 warps; k > n: most empty;
     * d = 3, k = 1000: two chunks (60000 rows), sorted above 65536 rows */
    static const int64_t shapes[][3] = {
        {1, 1, 1},        {1000, 3, 5},     {1024, 64, 100},  {1025, 64, 100},
        {4097, 33, 17},   {20000, 32, 320}, {20000, 32, 321}, {20000, 64, 164},
        {20000, 64, 165}, {9000, 128, 83},  {9000, 128, 84},  {3000, 300, 20},
        {5000, 200, 7},   {50, 7, 300},     {70001, 2, 3},    {100000, 64, 100},
        {257, 5, 2},      {30000, 16, 1000}, {60000, 3, 1000}, {70001, 3, 1000}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int wmode = 0; wmode < 3; wmode++)
                seg_case(dtypes[t], shapes[s][0], shapes[s][1], shapes[s][2], wmode,
                         LAB_UNIFORM);
    static const int64_t skewed[][3] = {{50000, 64, 100}, {20000, 5, 3}, {6000, 200, 12}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof skewed / sizeof skewed[0]; s++)
            for (int lmode = LAB_ONE; lmode <= LAB_SORTED; lmode++)
                seg_case(dtypes[t], skewed[s][0], skewed[s][1], skewed[s][2], 2, lmode);
}

/* Bad labels: the CPU's error (the first bad row) on both paths, with bad
 * rows in one chunk or several, in a later tile's block, the last row. */
static void test_bad_labels(void)
{
    static const int64_t shapes[][3] = {{1000, 4, 7}, {50000, 64, 100}, {9000, 200, 9}};
    /* (row, label, second row or -1, its label); label K: k itself */
    enum { K = INT32_MIN };
    static const int64_t bad[][4] = {{999, K, -1, 0}, {3, -1, 998, K}, {40000, K, 7777, -5},
                                     {49999, K, -1, 0}, {8999, -2, 5000, K}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            int64_t n = shapes[s][0], d = shapes[s][1], k = shapes[s][2];
            if (bad[b][0] >= n || bad[b][2] >= n)
                continue;
            int before = case_begin();
            gsb__tensor X = host_random(GSB_F32, n, d, 1.0);
            gsb__tensor l = host_random(GSB_I32, n, 1, (double)k);
            ((int32_t *)l.data)[bad[b][0]] = (int32_t)(bad[b][1] == K ? k : bad[b][1]);
            if (bad[b][2] >= 0)
                ((int32_t *)l.data)[bad[b][2]] = (int32_t)(bad[b][3] == K ? k : bad[b][3]);
            gsb__tensor sc = host_poisoned(GSB_F64, k, d), cc = host_poisoned(GSB_F64, k, 1);
            CHECK(cpu->ops->segment_sum(cpu, &X, &l, NULL, &sc, &cc) == GSB_EINVAL);
            char msg[512];
            snprintf(msg, sizeof msg, "%s", gsb_errmsg());
            gsb__tensor Xg = to_gpu(&X), lg = to_gpu(&l);
            gsb__tensor sg = gpu_poisoned(GSB_F64, k, d), cg = gpu_poisoned(GSB_F64, k, 1);
            for (int p = 0; p < 2; p++) {
                set_path(p);
                CHECK_ERR(gpu->ops->segment_sum(gpu, &Xg, &lg, NULL, &sg, &cg), GSB_EINVAL, msg);
            }
            unsetenv("GSB_SEGMENT_SUM");
            gsb__tensor *all[] = {&X, &l, &sc, &cc, &Xg, &lg, &sg, &cg};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                gsb__tensor_free(all[i]);
            CASE_END(before, "bad labels n=%lld d=%lld k=%lld case %zu", (long long)n,
                     (long long)d, (long long)k, b);
        }
}

/* ---- --time ---------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill_fast(gsb__tensor *t, int64_t k)
{
    uint64_t x = 88172645463325252ull;
    for (int64_t i = 0; i < t->rows * t->cols; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (t->dtype == GSB_F32)
            ((float *)t->data)[i] = (float)(x >> 40) * 0x1p-24f - 0.5f;
        else if (t->dtype == GSB_F64)
            ((double *)t->data)[i] = (double)(x >> 11) * 0x1p-53 - 0.5;
        else
            ((int32_t *)t->data)[i] = (int32_t)((x >> 20) % (uint64_t)k);
    }
}

static void time_shapes(void)
{
    static const int64_t shapes[][4] = {
        /* n, d, k, weighted (2: X and the labels as bench_ops makes them:
         * normal X, labels of normal centres, skewed) */
        {1000000, 64, 100, 2}, {1000000, 64, 100, 0}, {1000000, 64, 100, 1}, {1000000, 2, 2, 0},
        {1000000, 8, 10, 0},   {1000000, 16, 1000, 0}, {1000000, 32, 300, 0},
        {1000000, 128, 50, 0}, {200000, 512, 100, 0},  {1000000, 64, 8, 0},
        {10000, 64, 100, 0},   {100000, 64, 100, 0},   {100000, 300, 20, 0},
        {1000000, 3, 1000, 0}, {2000000, 64, 160, 0},  {50000, 512, 20, 0}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t n = shapes[s][0], d = shapes[s][1], k = shapes[s][2];
            gsb__tensor X, l, w;
            if (gsb__tensor_alloc(cpu, dtypes[t], n, d, &X) ||
                gsb__tensor_alloc(cpu, GSB_I32, n, 1, &l) ||
                gsb__tensor_alloc(cpu, GSB_F64, n, 1, &w))
                abort();
            fill_fast(&X, k);
            fill_fast(&l, k);
            fill_fast(&w, k);
            gsb__tensor Xg = to_gpu(&X), lg = to_gpu(&l), wg = to_gpu(&w);
            gsb__tensor sg = gpu_poisoned(GSB_F64, k, d), cg = gpu_poisoned(GSB_F64, k, 1);
            if (shapes[s][3] == 2) {
                gsb__tensor C, mind;
                if (gsb__tensor_alloc(gpu, dtypes[t], k, d, &C) ||
                    gsb__tensor_alloc(gpu, dtypes[t], n, 1, &mind) ||
                    gpu->ops->rand_normal(gpu, &Xg, 11) || gpu->ops->rand_normal(gpu, &C, 12) ||
                    gpu->ops->argmin_sqdist(gpu, &Xg, &C, &lg, &mind))
                    abort();
                gsb__tensor hl = from_gpu(&lg);
                int64_t *hist = calloc((size_t)k, sizeof *hist), big = 0;
                for (int64_t i = 0; i < n; i++)
                    hist[((int32_t *)hl.data)[i]]++;
                for (int64_t c = 0; c < k; c++)
                    big = hist[c] > big ? hist[c] : big;
                printf("bench labels: largest cluster %.3f of the rows\n", (double)big / (double)n);
                free(hist);
                gsb__tensor_free(&hl);
                gsb__tensor_free(&C);
                gsb__tensor_free(&mind);
            }
            double ms[2];
            for (int p = 0; p < 2; p++) {
                set_path(p);
                double best = 1e9;
                for (int r = 0; r < 12; r++) {
                    double t0 = now_s();
                    const gsb__tensor *wt = shapes[s][3] == 1 ? &wg : NULL;
                    if (gpu->ops->segment_sum(gpu, &Xg, &lg, wt, &sg, &cg))
                        abort();
                    double t1 = now_s() - t0;
                    best = r > 1 && t1 < best ? t1 : best;
                }
                ms[p] = best * 1e3;
            }
            unsetenv("GSB_SEGMENT_SUM");
            printf("time %s n=%lld d=%lld k=%lld w=%lld: chunk %.3f ms, sorted %.3f ms\n",
                   gsb_dtype_name(dtypes[t]), (long long)n, (long long)d, (long long)k,
                   (long long)shapes[s][3], ms[0], ms[1]);
            gsb__tensor *all[] = {&X, &l, &w, &Xg, &lg, &wg, &sg, &cg};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                gsb__tensor_free(all[i]);
        }
}

int main(int argc, char **argv)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20261126);
    if (argc > 1 && strcmp(argv[1], "--time") == 0) {
        time_shapes();
        return 0;
    }
    RUN(test_shapes);
    RUN(test_bad_labels);
    return testing_done();
}
