/*
 * test_cuda_core.c - the CUDA backend's core (cuda_backend.cu, cuda_copy.cu,
 * cuda_linalg.cu): opening, the memory ops (staged host copies across chunk
 * boundaries, copies from and to registered (pinned) host memory, casts,
 * fills, row slices, threads sharing the staging buffer), every dense linear
 * algebra op against its CPU twin in both float dtypes (and float32 products
 * over a long inner dimension against the exact product), and running out of
 * GPU memory.  GPU outputs start poisoned (NaN) so an unwritten element
 * fails.  Decompositions whose factors are defined only up to sign (eigh,
 * svd, orthonormalize) are checked by their defining identities rather than
 * element by element.  Needs a GPU: fails loudly without one.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"

static const gsb_dtype floats[2] = {GSB_F32, GSB_F64};
static const gsb_dtype all_dtypes[4] = {GSB_F32, GSB_F64, GSB_I32, GSB_I64};

/* bound for identities of a factorisation (backward errors grow with size) */
static double dec_tol(gsb_dtype dt) { return dt == GSB_F32 ? 2e-4 : 1e-10; }

/* ---- helpers ---------------------------------------------------------------- */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        abort();
    return p;
}

/* the values of a tensor on either backend, as a fresh double array */
static double *values(const gsb__tensor *t)
{
    gsb__tensor h;
    if (gsb__tensor_to_host(t, &h) != GSB_OK) {
        fprintf(stderr, "download failed: %s\n", gsb_errmsg());
        abort();
    }
    int64_t n = gsb__tensor_numel(t);
    double *v = xmalloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = gsb__tensor_get(&h, i);
    gsb__tensor_free(&h);
    return v;
}

/* host tensor of dtype dt holding v (rounded to dt) */
static gsb__tensor host_of(gsb_dtype dt, int64_t rows, int64_t cols, const double *v)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(cpu, dt, rows, cols, &t) != GSB_OK)
        abort();
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&t, i, v[i]);
    return t;
}

/* row-major C (m x n) = op(A) op(B) in double; op(A) m x k */
static void matmul(const double *A, int ta, const double *B, int tb, int64_t m, int64_t n,
                   int64_t k, double *C)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (ta ? A[p * m + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * n + j]);
            C[i * n + j] = s;
        }
}

static double max_abs(const double *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

/* max |a - b| / max(|b|, floor); INFINITY on NaN */
static double rel_diff(const double *a, const double *b, int64_t n, double floor)
{
    double num = 0, den = fmax(max_abs(b, n), floor);
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            return INFINITY;
        num = fmax(num, fabs(a[i] - b[i]));
    }
    return num / den;
}

/* max |M^T M - I| for M (rows x cols): columns orthonormal */
static double cols_orth_err(const double *M, int64_t rows, int64_t cols)
{
    double *G = xmalloc(sizeof(double) * (size_t)(cols * cols));
    matmul(M, 1, M, 0, cols, cols, rows, G);
    double e = 0;
    for (int64_t i = 0; i < cols; i++)
        for (int64_t j = 0; j < cols; j++)
            e = fmax(e, fabs(G[i * cols + j] - (i == j)));
    free(G);
    return isnan(e) ? INFINITY : e;
}

/* a symmetric matrix (X + X^T) / 2 of N(0, 1) entries */
static double *random_symmetric(int64_t n)
{
    double *A = xmalloc(sizeof(double) * (size_t)(n * n));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j <= i; j++)
            A[i * n + j] = A[j * n + i] = testing_normal();
    return A;
}

static double *random_values(int64_t n)
{
    double *v = xmalloc(sizeof(double) * (size_t)n);
    testing_fill_normal(v, n);
    return v;
}

static void still_works(void);

/* ---- opening ----------------------------------------------------------------- */

static void test_open(void)
{
    CHECK(strcmp(gpu->name, "cuda") == 0);
    CHECK(gpu->device && strstr(gpu->device, " GiB, sm_"));
    CHECK(gsb__cuda_backend() == gpu); /* opened once, cached */
}

/* ---- memory ops ---------------------------------------------------------------- */

/* upload then download `bytes` (a multiple of dt's size) and compare */
static void roundtrip(gsb_dtype dt, size_t bytes, unsigned seed)
{
    size_t esz = gsb_dtype_size(dt);
    int64_t n = (int64_t)(bytes / esz);
    unsigned char *src = xmalloc(bytes), *back = xmalloc(bytes);
    byte_pattern(src, bytes, seed);
    memset(back, 0xA5, bytes);
    gsb__tensor g;
    CHECK_OK(gsb__tensor_alloc(gpu, dt, n, 1, &g));
    CHECK_OK(gpu->ops->upload(gpu, &g, src));
    CHECK_OK(gpu->ops->download(gpu, &g, back));
    if (memcmp(src, back, bytes) != 0) {
        fprintf(stderr, "round trip of %zu bytes (%s) differs\n", bytes, gsb_dtype_name(dt));
        testing_cur_failed = 1;
    }
    gsb__tensor_free(&g);
    free(src);
    free(back);
}

static void test_upload_download(void)
{
    /* staging (cuda_copy.cu): two 32 MiB buffers, chunks of a quarter of the
     * copy between 2 MiB and 32 MiB, split among copy threads in parts of at
     * least 256 KiB (test_cuda_copy.c tries each GSB_CUDA_COPY_* setting).  Below 2 MiB one chunk and one thread; 8 MiB + 4 four
     * chunks and a short fifth; 50 MB four chunks of 12.5 MB; 150 MB reuses
     * each buffer twice; the odd sizes end mid-chunk and mid-part */
    roundtrip(GSB_I32, 0, 1);
    roundtrip(GSB_I32, 4, 2);
    roundtrip(GSB_F32, 1000, 3);
    roundtrip(GSB_F64, 8 * 4097, 4);
    roundtrip(GSB_I32, ((size_t)1 << 20) + 4, 9);
    roundtrip(GSB_I32, ((size_t)2 << 20) - 4, 10);
    roundtrip(GSB_F32, ((size_t)8 << 20) + 4, 11);
    roundtrip(GSB_I32, 50000000, 5);
    roundtrip(GSB_F64, (size_t)8 * 18874369, 6); /* 150 MB + 8 bytes */
    roundtrip(GSB_I64, (size_t)32 << 20, 7);     /* exactly one buffer */
    roundtrip(GSB_I64, (size_t)64 << 20, 8);     /* exactly both */
}

/* upload from and download into host memory at h (n bytes), compare with src */
static int roundtrip_at(unsigned char *h, size_t n, unsigned seed)
{
    gsb__tensor g;
    unsigned char *src = xmalloc(n);
    byte_pattern(src, n, seed);
    memcpy(h, src, n);
    int ok = gsb__tensor_alloc(gpu, GSB_I32, (int64_t)(n / 4), 1, &g) == GSB_OK &&
             gpu->ops->upload(gpu, &g, h) == GSB_OK;
    memset(h, 0x5A, n);
    ok = ok && gpu->ops->download(gpu, &g, h) == GSB_OK && memcmp(h, src, n) == 0;
    if (!ok)
        fprintf(stderr, "round trip of %zu bytes at %p: %s\n", n, (void *)h, gsb_errmsg());
    gsb__tensor_free(&g);
    free(src);
    return ok;
}

/* host_register: copies from and to the range go straight (cuda_copy.cu way
 * 1); partly registered, unregistered again, registered twice and bogus
 * calls all still copy correctly or fail cleanly */
static void test_host_register(void)
{
    CHECK(gpu->ops->host_register != NULL && gpu->ops->host_unregister != NULL);
    size_t n = ((size_t)48 << 20) + 4096;
    unsigned char *mem = NULL;
    CHECK(posix_memalign((void **)&mem, 4096, n + ((size_t)4 << 20)) == 0);
    if (!mem)
        return;
    CHECK_OK(gpu->ops->host_register(gpu, mem, n));
    CHECK(roundtrip_at(mem, n, 21));                       /* the whole range */
    CHECK(roundtrip_at(mem + 4000, 3 << 20, 22));          /* inside, unaligned */
    CHECK(roundtrip_at(mem + 8, 400, 23));                 /* small, inside */
    CHECK(roundtrip_at(mem + n - (2 << 20), 4 << 20, 24)); /* runs past the end: staged */
    /* the same range again: the driver refuses, the first registration stays */
    CHECK(gpu->ops->host_register(gpu, mem, n) != GSB_OK);
    CHECK(roundtrip_at(mem, n, 25));
    CHECK_ERR(gpu->ops->host_register(gpu, NULL, 100), GSB_EINTERNAL, "no memory");
    CHECK_OK(gpu->ops->host_register(gpu, mem, 0)); /* nothing to pin */
    gpu->ops->host_unregister(gpu, mem + 64);        /* not a registered base: no-op */
    CHECK(roundtrip_at(mem, n, 26));
    gpu->ops->host_unregister(gpu, mem);
    CHECK(roundtrip_at(mem, n, 27)); /* pageable again: staged */
    gpu->ops->host_unregister(gpu, mem); /* twice: no-op */
    /* registered again after unregistering */
    CHECK_OK(gpu->ops->host_register(gpu, mem, n));
    CHECK(roundtrip_at(mem + 4096, (size_t)16 << 20, 28));
    gpu->ops->host_unregister(gpu, mem);
    free(mem);
    still_works();
}

/* an upload into a row range writes only those rows; a download of a range
 * reads only them */
static void test_row_slices(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = floats[t];
        int64_t rows = 9, cols = 3;
        gsb__tensor h = host_random(dt, rows, cols, 1.0);
        gsb__tensor g = to_gpu(&h);
        double *fresh = random_values(4 * cols);
        gsb__tensor hf = host_of(dt, 4, cols, fresh);
        gsb__tensor gs = gsb__tensor_rows(&g, 5, 4);
        CHECK_OK(gpu->ops->upload(gpu, &gs, hf.data));
        double *all = values(&g);
        for (int64_t i = 0; i < rows * cols; i++) {
            double want = i >= 5 * cols && i < 9 * cols ? gsb__tensor_get(&hf, i - 5 * cols)
                                                        : gsb__tensor_get(&h, i);
            CHECK(all[i] == want);
        }
        gsb__tensor part;
        gsb__tensor gs2 = gsb__tensor_rows(&g, 1, 2);
        CHECK_OK(gsb__tensor_to_host(&gs2, &part));
        for (int64_t i = 0; i < 2 * cols; i++)
            CHECK(gsb__tensor_get(&part, i) == gsb__tensor_get(&h, cols + i));
        gsb__tensor_free(&part);
        free(all);
        free(fresh);
        gsb__tensor_free(&hf);
        gsb__tensor_free(&g);
        gsb__tensor_free(&h);
    }
}

/* source values for casts: small enough for every dtype, negatives included */
static gsb__tensor cast_source(gsb_dtype dt, int64_t n)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(cpu, dt, n, 1, &t) != GSB_OK)
        abort();
    for (int64_t i = 0; i < n; i++) {
        double v = (testing_uniform() - 0.5) * 2e6;
        gsb__tensor_set(&t, i, gsb__is_float(dt) ? v : floor(v));
    }
    /* int64 beyond 2^53: converting to float goes through double on both backends */
    if (dt == GSB_I64 && n > 2) {
        ((int64_t *)t.data)[0] = ((int64_t)1 << 60) + 12345;
        ((int64_t *)t.data)[1] = -((int64_t)1 << 55) - 7;
    }
    return t;
}

static void test_copy_casts(void)
{
    const int64_t sizes[] = {0, 1, 1000, 100003};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (int s = 0; s < 4; s++)
            for (int d = 0; d < 4; d++) {
                gsb_dtype sdt = all_dtypes[s], ddt = all_dtypes[d];
                int64_t n = sizes[z];
                gsb__tensor hs = cast_source(sdt, n);
                if (sdt == GSB_I64 && ddt == GSB_I32 && n > 2) /* out of int32 range */
                    ((int64_t *)hs.data)[0] = ((int64_t *)hs.data)[1] = 77;
                gsb__tensor hd = host_poisoned(ddt, n, 1);
                CHECK_OK(cpu->ops->copy(cpu, &hd, &hs));
                gsb__tensor gs = to_gpu(&hs), gd = gpu_poisoned(ddt, n, 1);
                CHECK_OK(gpu->ops->copy(gpu, &gd, &gs));
                gsb__tensor back;
                CHECK_OK(gsb__tensor_to_host(&gd, &back));
                if (n > 0 && memcmp(back.data, hd.data, gsb__tensor_nbytes(&hd)) != 0) {
                    fprintf(stderr, "copy %s -> %s of %lld differs from the CPU\n",
                            gsb_dtype_name(sdt), gsb_dtype_name(ddt), (long long)n);
                    testing_cur_failed = 1;
                }
                gsb__tensor_free(&back);
                gsb__tensor_free(&gs);
                gsb__tensor_free(&gd);
                gsb__tensor_free(&hs);
                gsb__tensor_free(&hd);
            }
    /* the same element count in another shape is fine; a different count is a bug */
    gsb__tensor a, b, c;
    CHECK_OK(gsb__tensor_alloc(gpu, GSB_F32, 6, 2, &a));
    CHECK_OK(gsb__tensor_alloc(gpu, GSB_F64, 3, 4, &b));
    CHECK_OK(gsb__tensor_alloc(gpu, GSB_F64, 3, 3, &c));
    CHECK_OK(gpu->ops->fill(gpu, &a, 2.5));
    CHECK_OK(gpu->ops->copy(gpu, &b, &a));
    double *vb = values(&b);
    for (int i = 0; i < 12; i++)
        CHECK(vb[i] == 2.5);
    free(vb);
    CHECK_ERR(gpu->ops->copy(gpu, &c, &a), GSB_EINTERNAL, "element counts differ");
    gsb__tensor h = host_poisoned(GSB_F32, 6, 2);
    CHECK_ERR(gpu->ops->copy(gpu, &a, &h), GSB_EINTERNAL, "not in this GPU's memory");
    gsb__tensor_free(&h);
    gsb__tensor_free(&a);
    gsb__tensor_free(&b);
    gsb__tensor_free(&c);
}

static void test_fill(void)
{
    const double vals[] = {0.0, 1.5, -3.25, 7.9, 1e30};
    const int64_t sizes[] = {1, 1000, 70001};
    for (int d = 0; d < 4; d++)
        for (size_t v = 0; v < sizeof vals / sizeof *vals; v++)
            for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
                gsb_dtype dt = all_dtypes[d];
                if (!gsb__is_float(dt) && fabs(vals[v]) > 1e9)
                    continue; /* out of the int range: undefined in C */
                gsb__tensor hd = host_poisoned(dt, sizes[z], 1), gd = gpu_poisoned(dt, sizes[z], 1);
                CHECK_OK(cpu->ops->fill(cpu, &hd, vals[v]));
                CHECK_OK(gpu->ops->fill(gpu, &gd, vals[v]));
                gsb__tensor back;
                CHECK_OK(gsb__tensor_to_host(&gd, &back));
                if (memcmp(back.data, hd.data, gsb__tensor_nbytes(&hd)) != 0) {
                    fprintf(stderr, "fill %s with %g differs from the CPU\n",
                            gsb_dtype_name(dt), vals[v]);
                    testing_cur_failed = 1;
                }
                gsb__tensor_free(&back);
                gsb__tensor_free(&hd);
                gsb__tensor_free(&gd);
            }
    /* a row range is filled, its neighbours are not */
    gsb__tensor h = host_random(GSB_F64, 8, 3, 1.0);
    gsb__tensor g = to_gpu(&h);
    gsb__tensor s = gsb__tensor_rows(&g, 2, 3);
    CHECK_OK(gpu->ops->fill(gpu, &s, -1.0));
    double *v = values(&g);
    for (int64_t i = 0; i < 24; i++)
        CHECK(v[i] == (i >= 6 && i < 15 ? -1.0 : gsb__tensor_get(&h, i)));
    free(v);
    gsb__tensor_free(&g);
    gsb__tensor_free(&h);
}

/* several threads moving different data at once through the shared staging buffer */
enum { THREADS_N = 4 };
typedef struct {
    unsigned seed;
    int ok;
} thread_job;

static void *thread_roundtrips(void *arg)
{
    thread_job *job = arg;
    size_t bytes = 40000000; /* over one staging half */
    unsigned char *src = malloc(bytes), *back = malloc(bytes);
    job->ok = src && back;
    for (int rep = 0; rep < 3 && job->ok; rep++) {
        gsb__tensor g;
        byte_pattern(src, bytes, job->seed * 10 + (unsigned)rep);
        memset(back, 0, bytes);
        job->ok = gsb__tensor_alloc(gpu, GSB_I32, (int64_t)(bytes / 4), 1, &g) == GSB_OK;
        if (!job->ok)
            break;
        job->ok = gpu->ops->upload(gpu, &g, src) == GSB_OK &&
                  gpu->ops->download(gpu, &g, back) == GSB_OK && memcmp(src, back, bytes) == 0;
        gsb__tensor_free(&g);
    }
    free(src);
    free(back);
    return NULL;
}

static void test_threads(void)
{
    pthread_t th[THREADS_N];
    thread_job jobs[THREADS_N];
    for (int i = 0; i < THREADS_N; i++) {
        jobs[i].seed = 100 + (unsigned)i;
        jobs[i].ok = 0;
        CHECK(pthread_create(&th[i], NULL, thread_roundtrips, &jobs[i]) == 0);
    }
    for (int i = 0; i < THREADS_N; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].ok);
    }
}

/* ---- gemm and syrk --------------------------------------------------------------- */

static void gemm_case(gsb_dtype dt, int64_t m, int64_t n, int64_t k, int ta, int tb,
                      double alpha, double beta)
{
    gsb__tensor hA = ta ? host_random(dt, k, m, 1.0) : host_random(dt, m, k, 1.0);
    gsb__tensor hB = tb ? host_random(dt, n, k, 1.0) : host_random(dt, k, n, 1.0);
    gsb__tensor hC = host_random(dt, m, n, 1.0);
    gsb__tensor gA = to_gpu(&hA), gB = to_gpu(&hB);
    /* beta = 0: C is not read, so NaN in it must not show */
    gsb__tensor gC = beta == 0 ? gpu_poisoned(dt, m, n) : to_gpu(&hC);
    CHECK_OK(cpu->ops->gemm(cpu, ta, tb, alpha, &hA, &hB, beta, &hC));
    CHECK_OK(gpu->ops->gemm(gpu, ta, tb, alpha, &gA, &gB, beta, &gC));
    double e = compare(&gC, &hC);
    if (!(e <= tol_for(dt))) {
        fprintf(stderr, "gemm %s m=%lld n=%lld k=%lld ta=%d tb=%d alpha=%g beta=%g: error %g\n",
                gsb_dtype_name(dt), (long long)m, (long long)n, (long long)k, ta, tb, alpha,
                beta, e);
        testing_cur_failed = 1;
    }
    gsb__tensor_free(&hA);
    gsb__tensor_free(&hB);
    gsb__tensor_free(&hC);
    gsb__tensor_free(&gA);
    gsb__tensor_free(&gB);
    gsb__tensor_free(&gC);
}

static void test_gemm(void)
{
    const int64_t shapes[][3] = {{1, 1, 1},    {37, 29, 53}, {300, 7, 1}, {5, 300, 40},
                                 {64, 64, 300}, {0, 5, 3},    {4, 0, 3},   {4, 5, 0}};
    const double ab[][2] = {{1, 0}, {-0.5, 2}, {0, 0.5}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    for (size_t c = 0; c < sizeof ab / sizeof *ab; c++)
                        gemm_case(floats[t], shapes[s][0], shapes[s][1], shapes[s][2], ta, tb,
                                  ab[c][0], ab[c][1]);
}

/* operands that are row ranges of larger tensors (unaligned data pointers) */
static void test_gemm_slices(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = floats[t];
        gsb__tensor hA = host_random(dt, 40, 7, 1.0), hB = host_random(dt, 9, 5, 1.0);
        gsb__tensor gA = to_gpu(&hA), gB = to_gpu(&hB);
        gsb__tensor hAs = gsb__tensor_rows(&hA, 3, 30), gAs = gsb__tensor_rows(&gA, 3, 30);
        gsb__tensor hBs = gsb__tensor_rows(&hB, 1, 7), gBs = gsb__tensor_rows(&gB, 1, 7);
        gsb__tensor hC = host_poisoned(dt, 30, 5), gC = gpu_poisoned(dt, 31, 5);
        gsb__tensor gCs = gsb__tensor_rows(&gC, 1, 30);
        CHECK_OK(cpu->ops->gemm(cpu, 0, 0, 1.0, &hAs, &hBs, 0.0, &hC));
        CHECK_OK(gpu->ops->gemm(gpu, 0, 0, 1.0, &gAs, &gBs, 0.0, &gCs));
        CHECK_MATCH(&gCs, &hC, tol_for(dt));
        /* the row before the slice is untouched */
        double *all = values(&gC);
        for (int j = 0; j < 5; j++)
            CHECK(isnan(all[j]));
        free(all);
        gsb__tensor_free(&hA);
        gsb__tensor_free(&hB);
        gsb__tensor_free(&gA);
        gsb__tensor_free(&gB);
        gsb__tensor_free(&hC);
        gsb__tensor_free(&gC);
    }
}

static void test_gemm_errors(void)
{
    gsb__tensor hA = host_random(GSB_F32, 4, 3, 1.0), hB = host_random(GSB_F32, 4, 2, 1.0);
    gsb__tensor gA = to_gpu(&hA), gB = to_gpu(&hB), gC = gpu_poisoned(GSB_F32, 4, 2);
    gsb__tensor gC3 = gpu_poisoned(GSB_F32, 3, 2), gD = gpu_poisoned(GSB_F64, 3, 2);
    CHECK_ERR(gpu->ops->gemm(gpu, 0, 0, 1, &gA, &gB, 0, &gC), GSB_EINTERNAL,
              "inner dimensions differ");
    CHECK_ERR(gpu->ops->gemm(gpu, 1, 0, 1, &gA, &gB, 0, &gC), GSB_EINTERNAL, "C has shape");
    CHECK_ERR(gpu->ops->gemm(gpu, 1, 0, 1, &gA, &gB, 0, &gD), GSB_EINTERNAL, "dtype");
    CHECK_ERR(gpu->ops->gemm(gpu, 1, 0, 1, &hA, &gB, 0, &gC3), GSB_EINTERNAL,
              "not in this GPU's memory");
    gsb__tensor alias = gA;
    alias.rows = 3;
    alias.cols = 2;
    alias.owned = 0;
    CHECK_ERR(gpu->ops->gemm(gpu, 1, 0, 1, &gA, &gB, 0, &alias), GSB_EINTERNAL,
              "must not share memory");
    /* nothing was left behind: a good call works */
    CHECK_OK(gpu->ops->gemm(gpu, 1, 0, 1, &gA, &gB, 0, &gC3));
    gsb__tensor_free(&hA);
    gsb__tensor_free(&hB);
    gsb__tensor_free(&gA);
    gsb__tensor_free(&gB);
    gsb__tensor_free(&gC);
    gsb__tensor_free(&gC3);
    gsb__tensor_free(&gD);
}

static void test_syrk(void)
{
    const int64_t shapes[][2] = {{1, 1}, {50, 37}, {300, 3}, {3, 300}, {0, 5}, {17, 1}};
    const double ab[][2] = {{1, 0}, {0.7, 0.3}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (size_t c = 0; c < 2; c++) {
                gsb_dtype dt = floats[t];
                int64_t m = shapes[s][0], n = shapes[s][1];
                double alpha = ab[c][0], beta = ab[c][1];
                gsb__tensor hA = host_random(dt, m, n, 1.0);
                double *sym = random_symmetric(n);
                gsb__tensor hC = host_of(dt, n, n, sym);
                gsb__tensor gA = to_gpu(&hA);
                gsb__tensor gC = beta == 0 ? gpu_poisoned(dt, n, n) : to_gpu(&hC);
                CHECK_OK(cpu->ops->syrk(cpu, alpha, &hA, beta, &hC));
                CHECK_OK(gpu->ops->syrk(gpu, alpha, &gA, beta, &gC));
                CHECK_MATCH(&gC, &hC, tol_for(dt));
                free(sym);
                gsb__tensor_free(&hA);
                gsb__tensor_free(&hC);
                gsb__tensor_free(&gA);
                gsb__tensor_free(&gC);
            }
    gsb__tensor gA = gpu_poisoned(GSB_F64, 4, 3), gC = gpu_poisoned(GSB_F64, 4, 4);
    CHECK_ERR(gpu->ops->syrk(gpu, 1, &gA, 0, &gC), GSB_EINTERNAL, "C has shape");
    gsb__tensor_free(&gA);
    gsb__tensor_free(&gC);
}

/*
 * float32 over a long inner dimension (k >= 512 with a small C: cuda_linalg.cu
 * sums chunks of 256 in float32 and the chunks in double): against the CPU
 * twin, and against the exact product of the same float32 inputs (in
 * double).  The chunked sum stays within 2e-6 of it (relative to max |C|);
 * one float accumulator along k = 1e5 drifts to ~5e-6 on N(0, 1) data.
 */
static const double LONG_K_EXACT_TOL = 2e-6;

static void gemm_long_case(int64_t m, int64_t n, int64_t k, int ta, int tb, double alpha,
                           double beta, int exact)
{
    int before = case_begin();
    gsb__tensor hA = ta ? host_random(GSB_F32, k, m, 1.0) : host_random(GSB_F32, m, k, 1.0);
    gsb__tensor hB = tb ? host_random(GSB_F32, n, k, 1.0) : host_random(GSB_F32, k, n, 1.0);
    gsb__tensor hC = host_random(GSB_F32, m, n, 1.0);
    double *c0 = values(&hC);
    gsb__tensor gA = to_gpu(&hA), gB = to_gpu(&hB);
    gsb__tensor gC = beta == 0 ? gpu_poisoned(GSB_F32, m, n) : to_gpu(&hC);
    CHECK_OK(gpu->ops->gemm(gpu, ta, tb, alpha, &gA, &gB, beta, &gC));
    if (exact) {
        double *a = values(&hA), *b = values(&hB), *g = values(&gC);
        double *ref = xmalloc(sizeof(double) * (size_t)(m * n));
        matmul(a, ta, b, tb, m, n, k, ref);
        for (int64_t i = 0; i < m * n; i++)
            ref[i] = alpha * ref[i] + (beta != 0 ? beta * c0[i] : 0.0);
        double e = rel_diff(g, ref, m * n, 0.0);
        if (!(e <= LONG_K_EXACT_TOL)) {
            fprintf(stderr, "error %g against the exact product (tol %g)\n", e,
                    LONG_K_EXACT_TOL);
            testing_cur_failed = 1;
        }
        free(a);
        free(b);
        free(g);
        free(ref);
    }
    CHECK_OK(cpu->ops->gemm(cpu, ta, tb, alpha, &hA, &hB, beta, &hC));
    CHECK_MATCH(&gC, &hC, tol_for(GSB_F32));
    free(c0);
    gsb__tensor_free(&hA);
    gsb__tensor_free(&hB);
    gsb__tensor_free(&hC);
    gsb__tensor_free(&gA);
    gsb__tensor_free(&gB);
    gsb__tensor_free(&gC);
    CASE_END(before, "gemm float32 m=%lld n=%lld k=%lld ta=%d tb=%d alpha=%g beta=%g",
             (long long)m, (long long)n, (long long)k, ta, tb, alpha, beta);
}

static void test_gemm_long_k(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_long_case(37, 29, 5000, ta, tb, 1.0, 0.0, 1); /* 19 chunks + 136 */
            gemm_long_case(37, 29, 5000, ta, tb, -0.5, 2.0, 1);
        }
    gemm_long_case(64, 64, 100000, 1, 0, 1.0, 0.0, 1); /* a Gram matrix's shape */
    gemm_long_case(300, 1, 70000, 1, 0, 1.0, 0.0, 1);  /* X^T y's */
    gemm_long_case(10, 12, 512, 0, 0, 1.0, 0.0, 1);    /* the least k: two chunks */
    gemm_long_case(10, 12, 511, 0, 0, 1.0, 0.0, 1);    /* one below: one SGEMM */
    gemm_long_case(10, 12, 767, 1, 1, 1.0, 0.5, 1);
    gemm_long_case(20, 20, 1000, 0, 0, 0.0, 0.5, 1);   /* alpha 0: C = beta C */
    /* 2048 x 2048 partials of 16 MiB: batches of 4 chunks, then 1, then 220 */
    gemm_long_case(2048, 2048, 1500, 0, 1, 1.0, 0.0, 0);
}

/* float64 over a long inner dimension (k >= 8192, n <= 256: chunks of 4096
 * as one batched DGEMM, cuda_linalg.cu) against the exact product too */
static const double LONG_K_EXACT_TOL_F64 = 1e-12;

static void syrk_long_case_dt(gsb_dtype dt, int64_t m, int64_t n, double alpha, double beta)
{
    int before = case_begin();
    gsb__tensor hA = host_random(dt, m, n, 1.0);
    double *sym = random_symmetric(n);
    gsb__tensor hC = host_of(dt, n, n, sym);
    double *c0 = values(&hC), *a = values(&hA);
    gsb__tensor gA = to_gpu(&hA);
    gsb__tensor gC = beta == 0 ? gpu_poisoned(dt, n, n) : to_gpu(&hC);
    double exact_tol = dt == GSB_F64 ? LONG_K_EXACT_TOL_F64 : LONG_K_EXACT_TOL;
    CHECK_OK(gpu->ops->syrk(gpu, alpha, &gA, beta, &gC));
    double *ref = xmalloc(sizeof(double) * (size_t)(n * n)), *g = values(&gC);
    matmul(a, 1, a, 0, n, n, m, ref);
    for (int64_t i = 0; i < n * n; i++)
        ref[i] = alpha * ref[i] + (beta != 0 ? beta * c0[i] : 0.0);
    double e = rel_diff(g, ref, n * n, 0.0);
    if (!(e <= exact_tol)) {
        fprintf(stderr, "error %g against the exact product (tol %g)\n", e, exact_tol);
        testing_cur_failed = 1;
    }
    for (int64_t i = 0; i < n; i++) /* both triangles, exactly symmetric */
        for (int64_t j = 0; j < i; j++)
            if (g[i * n + j] != g[j * n + i]) {
                CHECK(g[i * n + j] == g[j * n + i]);
                i = n;
                break;
            }
    CHECK_OK(cpu->ops->syrk(cpu, alpha, &hA, beta, &hC));
    CHECK_MATCH(&gC, &hC, tol_for(dt));
    free(sym);
    free(c0);
    free(a);
    free(ref);
    free(g);
    gsb__tensor_free(&hA);
    gsb__tensor_free(&hC);
    gsb__tensor_free(&gA);
    gsb__tensor_free(&gC);
    CASE_END(before, "syrk %s m=%lld n=%lld alpha=%g beta=%g", gsb_dtype_name(dt),
             (long long)m, (long long)n, alpha, beta);
}

static void syrk_long_case(int64_t m, int64_t n, double alpha, double beta)
{
    syrk_long_case_dt(GSB_F32, m, n, alpha, beta);
}

static void test_syrk_long_k(void)
{
    syrk_long_case(5000, 37, 1.0, 0.0);
    syrk_long_case(20000, 100, 0.7, 0.3);
    syrk_long_case(512, 3, 1.0, 0.0);
    syrk_long_case(3000, 300, 1.0, 0.0);
    syrk_long_case(1000, 1, -2.0, 1.0);
    /* float64: a streamed batch's Gram shape (4 chunks + 3616 rows), beta = 1
     * as the streamed fits accumulate, exactly two chunks, the least n and
     * the largest, and one row and one column outside the chunked path */
    syrk_long_case_dt(GSB_F64, 20000, 64, 1.0, 0.0);
    syrk_long_case_dt(GSB_F64, 20000, 64, 1.0, 1.0);
    syrk_long_case_dt(GSB_F64, 8192, 3, 0.7, 0.3);
    syrk_long_case_dt(GSB_F64, 9000, 1, -2.0, 1.0);
    syrk_long_case_dt(GSB_F64, 9000, 256, 1.0, 0.0);
    syrk_long_case_dt(GSB_F64, 8191, 5, 1.0, 0.0);
    syrk_long_case_dt(GSB_F64, 9000, 257, 1.0, 0.0);
}

/* ---- eigh and posv --------------------------------------------------------------- */

static void test_eigh(void)
{
    const int64_t sizes[] = {1, 2, 17, 100};
    for (int t = 0; t < 2; t++)
        for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
            gsb_dtype dt = floats[t];
            int64_t n = sizes[z];
            double *a = random_symmetric(n);
            gsb__tensor hA = host_of(dt, n, n, a);
            double *ad = values(&hA); /* A as the op sees it (rounded to dt) */
            gsb__tensor hw = host_poisoned(dt, n, 1), hV = host_poisoned(dt, n, n);
            CHECK_OK(cpu->ops->eigh(cpu, &hA, &hw, &hV));
            gsb__tensor gA = to_gpu(&hA), gw = gpu_poisoned(dt, n, 1), gV = gpu_poisoned(dt, n, n);
            CHECK_OK(gpu->ops->eigh(gpu, &gA, &gw, &gV));
            CHECK_MATCH(&gw, &hw, tol_for(dt));
            double *w = values(&gw), *V = values(&gV);
            for (int64_t j = 1; j < n; j++)
                CHECK(w[j - 1] <= w[j]);
            /* A = V diag(w) V^T and V^T V = I */
            double *VW = xmalloc(sizeof(double) * (size_t)(n * n));
            double *R = xmalloc(sizeof(double) * (size_t)(n * n));
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++)
                    VW[i * n + j] = V[i * n + j] * w[j];
            matmul(VW, 0, V, 1, n, n, n, R);
            CHECK(rel_diff(R, ad, n * n, 1e-30) <= dec_tol(dt));
            CHECK(cols_orth_err(V, n, n) <= dec_tol(dt));
            /* A is left unchanged */
            double *a_after = values(&gA);
            CHECK(rel_diff(a_after, ad, n * n, 1e-30) == 0);
            free(a_after);
            /* in place (V is A) gives the same eigenvalues */
            gsb__tensor gw2 = gpu_poisoned(dt, n, 1);
            CHECK_OK(gpu->ops->eigh(gpu, &gA, &gw2, &gA));
            CHECK_MATCH(&gw2, &hw, tol_for(dt));
            double *V2 = values(&gA);
            CHECK(cols_orth_err(V2, n, n) <= dec_tol(dt));
            free(V2);
            free(VW);
            free(R);
            free(w);
            free(V);
            free(a);
            free(ad);
            gsb__tensor_free(&hA);
            gsb__tensor_free(&hw);
            gsb__tensor_free(&hV);
            gsb__tensor_free(&gA);
            gsb__tensor_free(&gw);
            gsb__tensor_free(&gw2);
            gsb__tensor_free(&gV);
        }
}

/* S (n x n) = X^T X / m + I for X (m x n) of N(0, 1): well conditioned SPD */
static double *random_spd(int64_t n)
{
    int64_t m = n + 10;
    double *X = random_values(m * n), *S = xmalloc(sizeof(double) * (size_t)(n * n));
    matmul(X, 1, X, 0, n, n, m, S);
    for (int64_t i = 0; i < n * n; i++)
        S[i] /= (double)m;
    for (int64_t i = 0; i < n; i++)
        S[i * n + i] += 1.0;
    free(X);
    return S;
}

static void test_posv(void)
{
    const int64_t sizes[][2] = {{1, 1}, {5, 3}, {64, 1}, {200, 40}, {7, 0}};
    for (int t = 0; t < 2; t++)
        for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
            gsb_dtype dt = floats[t];
            int64_t n = sizes[z][0], k = sizes[z][1];
            double *s = random_spd(n);
            gsb__tensor hA = host_of(dt, n, n, s), hB = host_random(dt, n, k, 1.0);
            gsb__tensor gA = to_gpu(&hA), gB = to_gpu(&hB);
            CHECK_OK(cpu->ops->posv(cpu, &hA, &hB));
            CHECK_OK(gpu->ops->posv(gpu, &gA, &gB));
            CHECK_MATCH(&gB, &hB, tol_for(dt));
            free(s);
            gsb__tensor_free(&hA);
            gsb__tensor_free(&hB);
            gsb__tensor_free(&gA);
            gsb__tensor_free(&gB);
        }
}

static void test_posv_not_spd(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = floats[t];
        int64_t n = 6;
        double *s = random_spd(n);
        s[3 * n + 3] = -5.0; /* a negative diagonal: not positive definite */
        gsb__tensor hA = host_of(dt, n, n, s), hB = host_random(dt, n, 2, 1.0);
        gsb__tensor gA = to_gpu(&hA), gB = to_gpu(&hB);
        CHECK_ERR(gpu->ops->posv(gpu, &gA, &gB), GSB_ENUMERIC, "not positive definite");
        CHECK_MATCH(&gB, &hB, 0.0); /* B untouched on failure */
        /* no right-hand side: the same verdict as the CPU */
        gsb__tensor gB0 = gpu_poisoned(dt, n, 0), hB0 = host_poisoned(dt, n, 0);
        CHECK(gpu->ops->posv(gpu, &gA, &gB0) == cpu->ops->posv(cpu, &hA, &hB0));
        /* the backend is still usable */
        double *good = random_spd(n);
        gsb__tensor hG = host_of(dt, n, n, good);
        gsb__tensor gG = to_gpu(&hG);
        CHECK_OK(cpu->ops->posv(cpu, &hG, &hB));
        CHECK_OK(gpu->ops->posv(gpu, &gG, &gB));
        CHECK_MATCH(&gB, &hB, tol_for(dt));
        free(good);
        free(s);
        gsb__tensor_free(&hG);
        gsb__tensor_free(&gG);
        gsb__tensor_free(&hA);
        gsb__tensor_free(&hB);
        gsb__tensor_free(&gA);
        gsb__tensor_free(&gB);
        gsb__tensor_free(&gB0);
        gsb__tensor_free(&hB0);
    }
}

/* ---- svd, lstsq, orthonormalize ----------------------------------------------------- */

/* checks of one GPU svd of A (m x n, values a) given which factors were asked for */
static void check_svd(gsb_dtype dt, int64_t m, int64_t n, const double *a, const gsb__tensor *hS,
                      const gsb__tensor *gU, const gsb__tensor *gS, const gsb__tensor *gVt)
{
    int64_t r = m < n ? m : n;
    double tol = dec_tol(dt);
    CHECK_MATCH(gS, hS, tol_for(dt));
    double *s = values(gS), smax = fmax(s[0], 1e-30);
    for (int64_t j = 0; j < r; j++)
        CHECK(s[j] >= 0 && (j == 0 || s[j] <= s[j - 1]));
    double *U = gU ? values(gU) : NULL, *Vt = gVt ? values(gVt) : NULL;
    if (U)
        CHECK(cols_orth_err(U, m, r) <= tol);
    if (Vt) {
        double *V = xmalloc(sizeof(double) * (size_t)(r * n));
        for (int64_t i = 0; i < r; i++) /* V = Vt^T, n x r */
            for (int64_t j = 0; j < n; j++)
                V[j * r + i] = Vt[i * n + j];
        CHECK(cols_orth_err(V, n, r) <= tol);
        free(V);
    }
    if (U && Vt) { /* U diag(s) Vt = A */
        double *US = xmalloc(sizeof(double) * (size_t)(m * r));
        double *R = xmalloc(sizeof(double) * (size_t)(m * n));
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < r; j++)
                US[i * r + j] = U[i * r + j] * s[j];
        matmul(US, 0, Vt, 0, m, n, r, R);
        CHECK(rel_diff(R, a, m * n, 1e-30) <= tol);
        free(US);
        free(R);
    }
    if (U) { /* ||A^T u_j|| = s_j */
        double *Atu = xmalloc(sizeof(double) * (size_t)(n * r));
        matmul(a, 1, U, 0, n, r, m, Atu);
        for (int64_t j = 0; j < r; j++) {
            double nrm = 0;
            for (int64_t i = 0; i < n; i++)
                nrm += Atu[i * r + j] * Atu[i * r + j];
            CHECK(fabs(sqrt(nrm) - s[j]) <= tol * smax);
        }
        free(Atu);
    }
    if (Vt) { /* ||A v_j|| = s_j */
        double *Av = xmalloc(sizeof(double) * (size_t)(m * r));
        matmul(a, 0, Vt, 1, m, r, n, Av);
        for (int64_t j = 0; j < r; j++) {
            double nrm = 0;
            for (int64_t i = 0; i < m; i++)
                nrm += Av[i * r + j] * Av[i * r + j];
            CHECK(fabs(sqrt(nrm) - s[j]) <= tol * smax);
        }
        free(Av);
    }
    free(s);
    free(U);
    free(Vt);
}

static void test_svd(void)
{
    const int64_t shapes[][2] = {{1, 1},   {1, 7},   {7, 1},   {40, 13},
                                 {13, 40}, {300, 20}, {20, 300}, {50, 50}};
    for (int t = 0; t < 2; t++)
        for (size_t z = 0; z < sizeof shapes / sizeof *shapes; z++) {
            gsb_dtype dt = floats[t];
            int64_t m = shapes[z][0], n = shapes[z][1], r = m < n ? m : n;
            gsb__tensor hA = host_random(dt, m, n, 1.0);
            double *a = values(&hA);
            gsb__tensor hU = host_poisoned(dt, m, r), hS = host_poisoned(dt, r, 1);
            gsb__tensor hVt = host_poisoned(dt, r, n);
            CHECK_OK(cpu->ops->svd(cpu, &hA, &hU, &hS, &hVt));
            gsb__tensor gA = to_gpu(&hA);
            /* every combination of wanted factors */
            for (int want = 0; want < 4; want++) {
                gsb__tensor gU = gpu_poisoned(dt, m, r), gS = gpu_poisoned(dt, r, 1);
                gsb__tensor gVt = gpu_poisoned(dt, r, n);
                gsb__tensor *pU = want & 1 ? &gU : NULL, *pVt = want & 2 ? &gVt : NULL;
                CHECK_OK(gpu->ops->svd(gpu, &gA, pU, &gS, pVt));
                check_svd(dt, m, n, a, &hS, pU, &gS, pVt);
                gsb__tensor_free(&gU);
                gsb__tensor_free(&gS);
                gsb__tensor_free(&gVt);
            }
            double *a_after = values(&gA); /* A unchanged */
            CHECK(rel_diff(a_after, a, m * n, 1e-30) == 0);
            free(a_after);
            free(a);
            gsb__tensor_free(&hA);
            gsb__tensor_free(&hU);
            gsb__tensor_free(&hS);
            gsb__tensor_free(&hVt);
            gsb__tensor_free(&gA);
        }
    gsb__tensor gA = gpu_poisoned(GSB_F32, 5, 3), gS = gpu_poisoned(GSB_F32, 5, 1);
    CHECK_ERR(gpu->ops->svd(gpu, &gA, NULL, &gS, NULL), GSB_EINTERNAL, "S has shape");
    gsb__tensor_free(&gA);
    gsb__tensor_free(&gS);
}

/* A (m x n) of rank `rank` (the product of N(0, 1) factors), or full rank when rank < 0 */
static gsb__tensor lstsq_matrix(gsb_dtype dt, int64_t m, int64_t n, int64_t rank)
{
    if (rank < 0)
        return host_random(dt, m, n, 1.0);
    double *L = random_values(m * rank), *R = random_values(rank * n);
    double *A = xmalloc(sizeof(double) * (size_t)(m * n));
    matmul(L, 0, R, 0, m, n, rank, A);
    gsb__tensor t = host_of(dt, m, n, A);
    free(L);
    free(R);
    free(A);
    return t;
}

static void lstsq_case(gsb_dtype dt, int64_t m, int64_t n, int64_t k, int64_t rank, double rcond)
{
    int64_t r = m < n ? m : n;
    gsb__tensor hA = lstsq_matrix(dt, m, n, rank), hB = host_random(dt, m, k, 1.0);
    gsb__tensor hX = host_poisoned(dt, n, k), hS = host_poisoned(dt, r, 1);
    int64_t cpu_rank = -1, gpu_rank = -2;
    CHECK_OK(cpu->ops->lstsq(cpu, &hA, &hB, rcond, &hX, &hS, &cpu_rank));
    gsb__tensor gA = to_gpu(&hA), gB = to_gpu(&hB);
    gsb__tensor gX = gpu_poisoned(dt, n, k), gS = gpu_poisoned(dt, r, 1);
    CHECK_OK(gpu->ops->lstsq(gpu, &gA, &gB, rcond, &gX, &gS, &gpu_rank));
    double e = compare(&gX, &hX);
    if (!(e <= dec_tol(dt))) {
        fprintf(stderr, "lstsq %s %lldx%lld k=%lld rank=%lld: X error %g\n", gsb_dtype_name(dt),
                (long long)m, (long long)n, (long long)k, (long long)rank, e);
        testing_cur_failed = 1;
    }
    CHECK_MATCH(&gS, &hS, tol_for(dt));
    CHECK(gpu_rank == cpu_rank);
    if (m > 0 && n > 0)
        CHECK(gpu_rank == (rank < 0 ? r : rank));
    /* without S and rank: the same X */
    gsb__tensor gX2 = gpu_poisoned(dt, n, k);
    CHECK_OK(gpu->ops->lstsq(gpu, &gA, &gB, rcond, &gX2, NULL, NULL));
    CHECK_MATCH(&gX2, &hX, dec_tol(dt));
    /* A and B unchanged */
    CHECK_MATCH(&gA, &hA, 0.0);
    CHECK_MATCH(&gB, &hB, 0.0);
    gsb__tensor_free(&hA);
    gsb__tensor_free(&hB);
    gsb__tensor_free(&hX);
    gsb__tensor_free(&hS);
    gsb__tensor_free(&gA);
    gsb__tensor_free(&gB);
    gsb__tensor_free(&gX);
    gsb__tensor_free(&gX2);
    gsb__tensor_free(&gS);
}

static void test_lstsq(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = floats[t];
        /* a cut well above rounding noise and well below the kept singular values */
        double cut = dt == GSB_F32 ? 1e-4 : 1e-10;
        lstsq_case(dt, 50, 10, 3, -1, -1.0); /* full rank, tall; rcond < 0: machine eps */
        lstsq_case(dt, 10, 50, 2, -1, -1.0); /* full rank, wide: minimum norm */
        lstsq_case(dt, 20, 20, 1, -1, 0.0);  /* square */
        lstsq_case(dt, 1, 1, 1, -1, -1.0);
        lstsq_case(dt, 300, 40, 33, -1, cut); /* k > 32 */
        lstsq_case(dt, 60, 8, 2, 3, cut);     /* rank deficient, tall */
        lstsq_case(dt, 6, 40, 3, 2, cut);     /* rank deficient, wide */
        lstsq_case(dt, 25, 25, 4, 5, cut);    /* rank deficient, square */
        lstsq_case(dt, 10, 4, 0, -1, cut);    /* no right-hand side: S and rank only */
        lstsq_case(dt, 0, 5, 2, -1, cut);     /* no rows: X = 0 */
        lstsq_case(dt, 5, 0, 2, -1, cut);     /* no columns */
    }
}

static void test_orthonormalize(void)
{
    const int64_t shapes[][2] = {{1, 1}, {50, 7}, {300, 40}, {33, 33}, {1000, 1}};
    for (int t = 0; t < 2; t++)
        for (size_t z = 0; z < sizeof shapes / sizeof *shapes; z++) {
            gsb_dtype dt = floats[t];
            int64_t m = shapes[z][0], n = shapes[z][1];
            double tol = dec_tol(dt);
            gsb__tensor hA = host_random(dt, m, n, 1.0);
            double *a = values(&hA);
            gsb__tensor gQ = to_gpu(&hA);
            CHECK_OK(cpu->ops->orthonormalize(cpu, &hA));
            CHECK_OK(gpu->ops->orthonormalize(gpu, &gQ));
            double *Q = values(&gQ), *Qc = values(&hA);
            CHECK(cols_orth_err(Q, m, n) <= tol);
            /* span(Q) = span(A): Q Q^T A = A */
            double *QtA = xmalloc(sizeof(double) * (size_t)(n * n));
            double *P = xmalloc(sizeof(double) * (size_t)(m * n));
            matmul(Q, 1, a, 0, n, n, m, QtA);
            matmul(Q, 0, QtA, 0, m, n, n, P);
            CHECK(rel_diff(P, a, m * n, 1e-30) <= tol);
            /* the same Q as the CPU up to the sign of each column: |Q^T Q_cpu| = I */
            double *G = xmalloc(sizeof(double) * (size_t)(n * n));
            matmul(Q, 1, Qc, 0, n, n, m, G);
            double e = 0;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++)
                    e = fmax(e, fabs(fabs(G[i * n + j]) - (i == j)));
            CHECK(e <= tol);
            free(G);
            free(QtA);
            free(P);
            free(Q);
            free(Qc);
            free(a);
            gsb__tensor_free(&hA);
            gsb__tensor_free(&gQ);
        }
    gsb__tensor g = gpu_poisoned(GSB_F64, 3, 5);
    CHECK_ERR(gpu->ops->orthonormalize(gpu, &g), GSB_EINTERNAL, "needs rows >= cols");
    gsb__tensor_free(&g);
}

/* ---- out of memory -------------------------------------------------------------- */

/* a small gemm against the CPU: the backend still works */
static void still_works(void)
{
    gemm_case(GSB_F64, 33, 17, 9, 0, 1, 1.0, 0.0);
    gsb__tensor hA = host_random(GSB_F32, 30, 6, 1.0);
    gsb__tensor hU = host_poisoned(GSB_F32, 30, 6), hS = host_poisoned(GSB_F32, 6, 1);
    gsb__tensor hVt = host_poisoned(GSB_F32, 6, 6);
    double *a = values(&hA);
    CHECK_OK(cpu->ops->svd(cpu, &hA, &hU, &hS, &hVt));
    gsb__tensor gA = to_gpu(&hA), gU = gpu_poisoned(GSB_F32, 30, 6);
    gsb__tensor gS = gpu_poisoned(GSB_F32, 6, 1), gVt = gpu_poisoned(GSB_F32, 6, 6);
    CHECK_OK(gpu->ops->svd(gpu, &gA, &gU, &gS, &gVt));
    check_svd(GSB_F32, 30, 6, a, &hS, &gU, &gS, &gVt);
    free(a);
    gsb__tensor_free(&hA);
    gsb__tensor_free(&hU);
    gsb__tensor_free(&hS);
    gsb__tensor_free(&hVt);
    gsb__tensor_free(&gA);
    gsb__tensor_free(&gU);
    gsb__tensor_free(&gS);
    gsb__tensor_free(&gVt);
}

static void test_out_of_memory(void)
{
    /* 1 TiB: more than any GPU has */
    gsb__tensor big;
    CHECK_ERR(gsb__tensor_alloc(gpu, GSB_F64, (int64_t)1 << 27, 1024, &big), GSB_ENOMEM,
              "out of GPU memory allocating 1099511627776 bytes");
    CHECK(big.data == NULL);
    still_works();

    /* fill the GPU with 1 GiB blocks until it refuses, free them, then ask for
     * one block of half that size: the pool kept the freed blocks and must
     * give them back to the device to serve it */
    enum { MAX_BLOCKS = 1024 };
    static gsb__tensor blocks[MAX_BLOCKS];
    int got = 0, rc = GSB_OK;
    while (got < MAX_BLOCKS) {
        rc = gsb__tensor_alloc(gpu, GSB_I64, (int64_t)1 << 27, 1, &blocks[got]);
        if (rc != GSB_OK)
            break;
        got++;
    }
    CHECK(rc == GSB_ENOMEM && strstr(gsb_errmsg(), "out of GPU memory"));
    CHECK(got > 0);
    printf("     %d GiB allocated before the GPU ran out\n", got);
    for (int i = 0; i < got; i++)
        gsb__tensor_free(&blocks[i]);
    if (got >= 2) {
        gsb__tensor half;
        CHECK_OK(gsb__tensor_alloc(gpu, GSB_I64, ((int64_t)got / 2) << 27, 1, &half));
        CHECK_OK(gpu->ops->fill(gpu, &half, 3.0));
        gsb__tensor_free(&half);
    }
    still_works();
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20240611);
    RUN(test_open);
    RUN(test_upload_download);
    RUN(test_host_register);
    RUN(test_row_slices);
    RUN(test_copy_casts);
    RUN(test_fill);
    RUN(test_threads);
    RUN(test_gemm);
    RUN(test_gemm_slices);
    RUN(test_gemm_errors);
    RUN(test_syrk);
    RUN(test_gemm_long_k);
    RUN(test_syrk_long_k);
    RUN(test_eigh);
    RUN(test_posv);
    RUN(test_posv_not_spd);
    RUN(test_svd);
    RUN(test_lstsq);
    RUN(test_orthonormalize);
    RUN(test_out_of_memory); /* last: it leaves the pool holding most of the GPU */
    return testing_done();
}
