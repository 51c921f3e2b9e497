/*
 * test_cpu_threads.c - how many threads BLAS gets (backend/cpu/cpu_threads.c):
 * libgsb runs on the OpenBLAS build CMake linked (its OpenMP build where
 * installed: one thread pool), a small call outside parallel regions runs on
 * one thread and a large one on all (a LAPACK routine only from a larger
 * size), nothing changes inside a parallel region, every setting comes back, and many threads mixing small and large
 * products at once get the answers each gets alone, with the settings intact.
 */
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "test_op_helpers.h"

#ifndef GSB_TEST_OPENBLAS_OPENMP
#error "CMake passes GSB_TEST_OPENBLAS_OPENMP: 1 where it linked OpenBLAS's OpenMP build, else 0"
#endif

/* openblas_get_parallel()'s answers */
#define OPENBLAS_SERIAL 0
#define OPENBLAS_PTHREADS 1
#define OPENBLAS_OPENMP 2

static const gsb__backend *be;

/* The build CMake chose (cmake/openblas.cmake) is the one that runs: a
 * loader that found another libopenblas.so.0 first would bring back the
 * second thread pool. */
static void test_linked_build_runs(void)
{
    if (GSB_TEST_OPENBLAS_OPENMP)
        CHECK(openblas_get_parallel() == OPENBLAS_OPENMP);
    else
        CHECK(openblas_get_parallel() != OPENBLAS_OPENMP);
}

/* Inside a small call's window: one thread, by the means of the build. */
static int window_is_serial(void)
{
    if (openblas_get_parallel() == OPENBLAS_OPENMP)
        return omp_get_max_threads() == 1;
    return openblas_get_num_threads() == 1;
}

static void test_small_call_serial_large_not(void)
{
    if (openblas_get_parallel() == OPENBLAS_SERIAL)
        return; /* nothing to switch */
    openblas_set_num_threads(2);
    omp_set_num_threads(2);
    int token = gsb__cpu_blas_call_begin(1e3);
    CHECK(window_is_serial());
    if (openblas_get_parallel() == OPENBLAS_OPENMP)
        CHECK(openblas_get_num_threads() == 2); /* the process-wide count is left alone */
    gsb__cpu_blas_call_end(token);
    CHECK(omp_get_max_threads() == 2);
    CHECK(openblas_get_num_threads() == 2);

    token = gsb__cpu_blas_call_begin(1e12);
    CHECK(token == 0);
    CHECK(omp_get_max_threads() == 2);
    CHECK(openblas_get_num_threads() == 2);
    gsb__cpu_blas_call_end(token);

    /* 1e8 flops: threaded as one BLAS call, serial as a LAPACK routine's chain */
    token = gsb__cpu_blas_call_begin(1e8);
    CHECK(token == 0);
    gsb__cpu_blas_call_end(token);
    token = gsb__cpu_lapack_call_begin(1e8);
    CHECK(window_is_serial());
    gsb__cpu_blas_call_end(token);
    CHECK(omp_get_max_threads() == 2);
    CHECK(openblas_get_num_threads() == 2);
}

/* In a parallel region a BLAS call is already serial: nothing to change. */
static void test_inside_region_untouched(void)
{
    int tokens[2] = {-7, -7}, threads = 0;
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num();
        tokens[t] = gsb__cpu_blas_call_begin(1e3);
        gsb__cpu_blas_call_end(tokens[t]);
#pragma omp single
        threads = omp_get_num_threads();
    }
    if (threads == 2) /* an active region (a team of one is not) */
        CHECK(tokens[0] == 0 && tokens[1] == 0);
}

/* Nested windows of parallel regions restore the count once, at the last end. */
static void test_serial_windows_nest(void)
{
    openblas_set_num_threads(2);
    gsb__cpu_blas_serial_begin();
    gsb__cpu_blas_serial_begin();
    gsb__cpu_blas_serial_end();
    if (openblas_get_parallel() == OPENBLAS_PTHREADS)
        CHECK(openblas_get_num_threads() == 1);
    else
        CHECK(openblas_get_num_threads() == 2);
    gsb__cpu_blas_serial_end();
    CHECK(openblas_get_num_threads() == 2);
}

/* ---- many threads at once ------------------------------------------------ */

#define WORKERS 6
#define ROUNDS 6

/* Each worker multiplies its own pair of matrices, small and large by turns. */
typedef struct {
    gsb__tensor A[2], B[2], C[2], ref[2]; /* [0] small, [1] large */
    int ok;
} worker;

static int close_to(const gsb__tensor *x, const gsb__tensor *ref)
{
    const double *a = x->data, *b = ref->data;
    for (int64_t i = 0; i < x->rows * x->cols; i++)
        if (!(fabs(a[i] - b[i]) <= 1e-9 * (1.0 + fabs(b[i]))))
            return 0;
    return 1;
}

static void *work(void *arg)
{
    worker *w = arg;
    w->ok = 1;
    for (int r = 0; r < ROUNDS; r++) {
        int s = r & 1;
        if (gsb__cpu_gemm(be, 0, 0, 1.0, &w->A[s], &w->B[s], 0.0, &w->C[s]) != GSB_OK ||
            !close_to(&w->C[s], &w->ref[s]))
            w->ok = 0;
    }
    return NULL;
}

/* 2 x 40 x 12 x 10 flops is far below the serial threshold, 2 x 160^3 above it */
static const int64_t sizes[2][3] = {{40, 12, 10}, {160, 160, 160}};

static void make_worker(worker *w)
{
    for (int s = 0; s < 2; s++) {
        int64_t m = sizes[s][0], k = sizes[s][1], n = sizes[s][2];
        w->A[s] = testing_tensor_normal(be, GSB_F64, m, k, 1.0, 0.0);
        w->B[s] = testing_tensor_normal(be, GSB_F64, k, n, 1.0, 0.0);
        w->C[s] = testing_tensor(be, GSB_F64, m, n, NULL);
        w->ref[s] = testing_tensor(be, GSB_F64, m, n, NULL);
        CHECK_OK(gsb__cpu_gemm(be, 0, 0, 1.0, &w->A[s], &w->B[s], 0.0, &w->ref[s]));
    }
}

static void free_worker(worker *w)
{
    for (int s = 0; s < 2; s++) {
        gsb__tensor_free(&w->A[s]);
        gsb__tensor_free(&w->B[s]);
        gsb__tensor_free(&w->C[s]);
        gsb__tensor_free(&w->ref[s]);
    }
}

static void test_many_threads_mixing_sizes(void)
{
    testing_seed(15);
    openblas_set_num_threads(2);
    int saved_omp = omp_get_max_threads();
    worker w[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        make_worker(&w[i]);
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    for (int i = 0; i < WORKERS; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(w[i].ok);
        free_worker(&w[i]);
    }
    CHECK(openblas_get_num_threads() == 2);
    CHECK(omp_get_max_threads() == saved_omp);
}

/* cpu_blas_core.c: OpenBLAS's Prescott fallback is replaced by the kernels
 * the CPU calls for, unless the user chose (OPENBLAS_CORETYPE) or opted out
 * (GSB_OPENBLAS_KEEP_CORE); any other choice OpenBLAS made stands. */
static void test_blas_core_choice(void)
{
    CHECK(strcmp(gsb__cpu_blas_core_choice("Prescott", NULL, NULL, "SkylakeX"), "SkylakeX") == 0);
    CHECK(strcmp(gsb__cpu_blas_core_choice("Prescott", NULL, "0", "Haswell"), "Haswell") == 0);
    CHECK(!gsb__cpu_blas_core_choice("Prescott", "Prescott", NULL, "SkylakeX"));
    CHECK(!gsb__cpu_blas_core_choice("Prescott", "", NULL, "SkylakeX"));
    CHECK(!gsb__cpu_blas_core_choice("Prescott", NULL, "1", "SkylakeX"));
    CHECK(!gsb__cpu_blas_core_choice("Prescott", NULL, NULL, NULL));
    CHECK(!gsb__cpu_blas_core_choice("Haswell", NULL, NULL, "SkylakeX"));
    CHECK(!gsb__cpu_blas_core_choice(NULL, NULL, NULL, "SkylakeX"));
}

/* Where the switch applied, it took, and the new kernels compute: a GEMM
 * checked against a direct sum (exact here: small integers). */
static void test_blas_core_switched(void)
{
#if defined(__linux__) && defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    /* an OpenBLAS built for one target has no selection to redo */
    if (!getenv("OPENBLAS_CORETYPE") && !getenv("GSB_OPENBLAS_KEEP_CORE") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"))
        CHECK(strcmp(openblas_get_corename(), "Prescott") != 0);
#endif
    if (gsb__cpu_blas_core_switched())
        CHECK(strcmp(openblas_get_corename(), "Prescott") != 0);
    enum { M = 37, N = 29, K = 41 };
    static double a[M * K], b[K * N], c[M * N];
    static float af[M * K], bf[K * N], cf[M * N];
    for (int i = 0; i < M * K; i++)
        af[i] = (float)(a[i] = (double)(i % 7) - 3.0);
    for (int i = 0; i < K * N; i++)
        bf[i] = (float)(b[i] = (double)(i % 5) - 2.0);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, a, K, b, N, 0.0, c, N);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, af, K, bf, N, 0.0f, cf,
                N);
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int l = 0; l < K; l++)
                s += a[i * K + l] * b[l * N + j];
            bad += c[i * N + j] != s || cf[i * N + j] != (float)s;
        }
    CHECK(bad == 0);
}

int main(void)
{
    be = gsb__cpu_backend();
    RUN(test_linked_build_runs);
    RUN(test_small_call_serial_large_not);
    RUN(test_inside_region_untouched);
    RUN(test_serial_windows_nest);
    RUN(test_many_threads_mixing_sizes);
    RUN(test_blas_core_choice);
    RUN(test_blas_core_switched);
    return testing_done();
}
