/*
 * test_cuda_multigpu.c - several GPUs in one session (docs/MULTIGPU.md):
 *   - the NCCL communicator against the host one (all-reduce of float32,
 *     float64, int32, int64; all-gather; broadcast) over every visible GPU,
 *     and over one GPU (one rank);
 *   - "local?device=cuda:0" (the multi-device path, NCCL with one rank) and,
 *     with two GPUs or more, "cuda:all" and "cuda:1" (a device other than the
 *     default one: its own staging buffers, copy threads and copy stream) against the
 *     one-GPU fit ("local?device=cuda") of every estimator with a
 *     multi-device fit: every fitted attribute within 1e-6 relative
 *     (float64; float32: 1e-4); and the neighbours' searches over the
 *     split index (kneighbors of queries and leave-one-out, three metrics,
 *     k up to every row; the KNeighbors* predictions): the same indices,
 *     distances within 1e-9 (float64) / 1e-5 (float32);
 *   - staged uploads and downloads (pageable host memory larger than the
 *     staging buffers) from two threads per GPU on every GPU at once, each
 *     holding only its own GPU's op lock, every byte back as it went;
 *   - NCCL's own all-reduce timed (the op bench_comm measures with), on
 *     every GPU: it runs, and takes some time.
 * NCCL comes from $GSB_NCCL_LIBRARY or the places cuda_nccl.cu searches; a
 * machine without it fails here, saying so.  Fewer than two GPUs: the parts
 * that need two are skipped with a message, not failed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c/multidev_parity.h"
#include "backend/backend.h"
#include "backend/comm.h"
#include "core/tensor.h"

#define GSB__MAX_TEST_DEVICES 16

static gsb_session *open_url(const char *url)
{
    gsb_session *s = NULL;
    int rc = gsb_open(url, &s);
    if (rc != GSB_OK)
        fprintf(stderr, "gsb_open(%s): %s\n", url, gsb_errmsg());
    CHECK_OK(rc);
    return s;
}

/* NCCL's collectives on n GPUs against the host communicator's. */
static void comm_against_host(int n)
{
    const gsb__backend *bes[GSB__MAX_TEST_DEVICES];
    for (int r = 0; r < n; r++)
        CHECK_OK(gsb__cuda_backend_device(r, &bes[r]));
    gsb__comm *nc = NULL, *hc = NULL;
    int rc = gsb__nccl_comm_open(bes, n, &nc);
    if (rc != GSB_OK)
        fprintf(stderr, "NCCL: %s\n", gsb_errmsg());
    CHECK_OK(rc);
    CHECK_OK(gsb__comm_host_open(n, &hc));
    if (!nc || !hc)
        goto out;
    CHECK(nc->nranks == n && strcmp(nc->name, "nccl") == 0);
    enum { CNT = 1000 };
    static const gsb_dtype dts[4] = {GSB_F32, GSB_F64, GSB_I32, GSB_I64};
    for (int t = 0; t < 4; t++) {
        size_t es = gsb__comm_dtype_size(dts[t]);
        void *a[GSB__MAX_TEST_DEVICES], *b[GSB__MAX_TEST_DEVICES];
        for (int r = 0; r < n; r++) {
            a[r] = malloc(CNT * es);
            b[r] = malloc(CNT * es);
            for (int i = 0; i < CNT; i++) {
                double v = dts[t] == GSB_F32 || dts[t] == GSB_F64 ? testing_normal()
                                                                  : (double)(i * 7 + r * 1000003);
                switch (dts[t]) {
                case GSB_F32: ((float *)a[r])[i] = (float)v; break;
                case GSB_F64: ((double *)a[r])[i] = v; break;
                case GSB_I32: ((int32_t *)a[r])[i] = (int32_t)v; break;
                case GSB_I64: ((int64_t *)a[r])[i] = (int64_t)v << 20; break;
                }
            }
            memcpy(b[r], a[r], CNT * es);
        }
        CHECK_OK(nc->ops->allreduce_sum(nc, a, CNT, dts[t]));
        CHECK_OK(hc->ops->allreduce_sum(hc, b, CNT, dts[t]));
        for (int r = 0; r < n; r++)
            for (int i = 0; i < CNT; i++) {
                double x, y;
                switch (dts[t]) {
                case GSB_F32: x = ((float *)a[r])[i]; y = ((float *)b[r])[i]; break;
                case GSB_F64: x = ((double *)a[r])[i]; y = ((double *)b[r])[i]; break;
                case GSB_I32: x = ((int32_t *)a[r])[i]; y = ((int32_t *)b[r])[i]; break;
                default: x = (double)((int64_t *)a[r])[i]; y = (double)((int64_t *)b[r])[i];
                }
                /* floats: the ranks' order of summation may differ */
                CHECK_CLOSE(x, y, dts[t] == GSB_F32 ? 1e-5 * (1 + fabs(y))
                                  : dts[t] == GSB_F64 ? 1e-13 * (1 + fabs(y)) : 0);
            }
        for (int r = 0; r < n; r++) {
            free(a[r]);
            free(b[r]);
        }
    }
    /* all-gather and broadcast of float64 */
    double send[GSB__MAX_TEST_DEVICES][3], recv[GSB__MAX_TEST_DEVICES][3 * GSB__MAX_TEST_DEVICES];
    const void *sp[GSB__MAX_TEST_DEVICES];
    void *rp[GSB__MAX_TEST_DEVICES];
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < 3; i++)
            send[r][i] = 10.0 * r + i;
        sp[r] = send[r];
        rp[r] = recv[r];
    }
    CHECK_OK(nc->ops->allgather(nc, sp, rp, 3, GSB_F64));
    for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++)
            for (int i = 0; i < 3; i++)
                CHECK(recv[r][q * 3 + i] == 10.0 * q + i);
    void *bp[GSB__MAX_TEST_DEVICES];
    for (int r = 0; r < n; r++)
        bp[r] = send[r];
    CHECK_OK(nc->ops->broadcast(nc, bp, 3, GSB_F64, n - 1));
    for (int r = 0; r < n; r++)
        CHECK(send[r][2] == 10.0 * (n - 1) + 2);
out:
    if (nc)
        nc->ops->destroy(nc);
    if (hc)
        hc->ops->destroy(hc);
}

#define N 2001
#define D 8
static double X[N * D], Y[N], W[N];

static void make_data(void)
{
    testing_seed(23);
    testing_fill_normal(X, N * D);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D; j++)
            X[i * D + j] = X[i * D + j] * (1 + 0.5 * j) + j;
        Y[i] = X[i * D] - 2 * X[i * D + 3] + 0.5 * X[i * D + 7] + 0.1 * testing_normal();
        W[i] = 0.5 + testing_uniform();
    }
}

static gsb_session *one_gpu;

static void fits_against_one_gpu(const char *url)
{
    gsb_session *s = open_url(url);
    if (!s)
        return;
    char *info = NULL;
    if (gsb_session_info(s, &info) == GSB_OK)
        printf("  %s: %s\n", url, info);
    gsb_free(info);
    parity_suite(s, one_gpu, X, Y, W, N, D, GSB_F64, 1e-6);
    parity_suite(s, one_gpu, X, Y, W, N, D, GSB_F32, 1e-4);
    parity_suite(s, one_gpu, X, Y, W, 3, D, GSB_F64, 1e-6); /* fewer rows than GPUs */
    gsb_close(s);
}

static int n_gpus;

/* ---- copies on every GPU at once ----------------------------------------------- */

enum { RT_FLOATS = 24 << 20, RT_ROUNDS = 2 }; /* 96 MiB: past the 64 MiB of staging */

typedef struct round_trip {
    const gsb__backend *be;
    unsigned seed;
    int bad; /* 1: a failed op or a wrong byte */
    char msg[256];
} round_trip;

static void *round_trip_main(void *p)
{
    round_trip *t = p;
    float *a = malloc((size_t)RT_FLOATS * sizeof *a), *b = malloc((size_t)RT_FLOATS * sizeof *b);
    gsb__tensor dev = GSB__TENSOR_NONE;
    if (!a || !b || gsb__tensor_alloc(t->be, GSB_F32, RT_FLOATS, 1, &dev) != GSB_OK) {
        t->bad = 1;
        snprintf(t->msg, sizeof t->msg, "allocation: %s", gsb_errmsg());
        goto out;
    }
    for (int round = 0; round < RT_ROUNDS && !t->bad; round++) {
        unsigned x = t->seed * 2654435761u + (unsigned)round;
        for (int i = 0; i < RT_FLOATS; i++) {
            x = x * 1664525u + 1013904223u;
            a[i] = (float)(x >> 8);
        }
        if (t->be->ops->upload(t->be, &dev, a) != GSB_OK ||
            t->be->ops->download(t->be, &dev, b) != GSB_OK) {
            t->bad = 1;
            snprintf(t->msg, sizeof t->msg, "copy: %s", gsb_errmsg());
        } else if (memcmp(a, b, (size_t)RT_FLOATS * sizeof *a) != 0) {
            t->bad = 1;
            snprintf(t->msg, sizeof t->msg, "round %d: the bytes came back changed", round);
        }
    }
out:
    gsb__tensor_free(&dev);
    free(a);
    free(b);
    return NULL;
}

static void test_concurrent_copies(void)
{
    int n = n_gpus < 4 ? n_gpus : 4, nt = 2 * n;
    round_trip t[8];
    pthread_t tid[8];
    int started[8] = {0};
    for (int i = 0; i < nt; i++) {
        t[i] = (round_trip){NULL, (unsigned)i + 1, 0, ""};
        CHECK_OK(gsb__cuda_backend_device(i % n, &t[i].be));
    }
    for (int i = 0; i < nt; i++)
        if (t[i].be)
            started[i] = pthread_create(&tid[i], NULL, round_trip_main, &t[i]) == 0;
    for (int i = 0; i < nt; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        if (t[i].bad)
            fprintf(stderr, "  GPU %d, thread %d: %s\n", i % n, i, t[i].msg);
        CHECK(started[i] && !t[i].bad);
    }
}

static void test_timed_allreduce(void)
{
    const gsb__backend *bes[GSB__MAX_TEST_DEVICES];
    int n = n_gpus < GSB__MAX_TEST_DEVICES ? n_gpus : GSB__MAX_TEST_DEVICES;
    for (int r = 0; r < n; r++)
        CHECK_OK(gsb__cuda_backend_device(r, &bes[r]));
    gsb__comm *nc = NULL;
    CHECK_OK(gsb__nccl_comm_open(bes, n, &nc));
    if (!nc)
        return;
    double s = -1;
    CHECK(nc->ops->time_allreduce != NULL);
    if (nc->ops->time_allreduce) {
        CHECK_OK(nc->ops->time_allreduce(nc, 1 << 20, GSB_F32, 5, &s));
        CHECK(s > 0 && s < 10);
        printf("  NCCL all-reduce of 4 MiB over %d GPU(s): %.1f us\n", n, s * 1e6);
    }
    nc->ops->destroy(nc);
}

static void test_nccl_one_rank(void) { comm_against_host(1); }
static void test_cuda0_one_rank(void) { fits_against_one_gpu("local?device=cuda:0"); }

static void test_nccl_all(void)
{
    if (n_gpus < 2) {
        printf("  skipped: %d GPU visible, this part needs 2\n", n_gpus);
        return;
    }
    comm_against_host(n_gpus < GSB__MAX_TEST_DEVICES ? n_gpus : GSB__MAX_TEST_DEVICES);
}

static void test_cuda_all(void)
{
    if (n_gpus < 2) {
        printf("  skipped: %d GPU visible, this part needs 2\n", n_gpus);
        return;
    }
    fits_against_one_gpu("local?device=cuda:all");
    fits_against_one_gpu("local?device=cuda:1,0");
}

static void test_cuda_other_device(void)
{
    if (n_gpus < 2) {
        printf("  skipped: %d GPU visible, this part needs 2\n", n_gpus);
        return;
    }
    fits_against_one_gpu("local?device=cuda:1");
}

int main(void)
{
    if (!gsb__cuda_backend()) {
        printf("skipped: no CUDA backend (%s)\n", gsb__cuda_unavailable_reason());
        return 0;
    }
    n_gpus = gsb__cuda_device_count();
    printf("%d GPU(s) visible; GSB_NCCL_LIBRARY=%s\n", n_gpus,
           getenv("GSB_NCCL_LIBRARY") ? getenv("GSB_NCCL_LIBRARY") : "(unset)");
    one_gpu = open_url("local?device=cuda");
    if (!one_gpu)
        return testing_done();
    make_data();
    RUN(test_nccl_one_rank);
    RUN(test_cuda0_one_rank);
    RUN(test_nccl_all);
    RUN(test_cuda_all);
    RUN(test_cuda_other_device);
    RUN(test_concurrent_copies);
    RUN(test_timed_allreduce);
    return testing_close(one_gpu);
}
