/*
 * test_cuda_copy.c - host <-> device copies (cuda_copy.cu) under each of its
 * settings (GSB_CUDA_COPY_MODE staged / pipelined / register / driver, thread counts,
 * chunk sizes, spinning, prefaulting): byte-exact round trips of odd sizes,
 * sizes around the chunk and part boundaries, unaligned host pointers, fresh
 * untouched result pages, a caller reusing its memory as soon as upload
 * returns, a range partly registered already (register mode falls back),
 * pinning in place leaving nothing pinned, staging laid out differently by
 * back-to-back uploads (pipelined, staged), and several threads (and, where
 * there are two GPUs, two devices) copying at once.
 */
#include "cuda_testing.h"

#include <pthread.h>
#include <sys/mman.h>

static const char *const copy_vars[] = {"GSB_CUDA_COPY_MODE", "GSB_CUDA_COPY_THREADS",
                                        "GSB_CUDA_COPY_CHUNK_MB", "GSB_CUDA_COPY_SPIN_US",
                                        "GSB_CUDA_COPY_PREFAULT", "GSB_CUDA_COPY_PARTS"};

/* one setting: up to three NAME=VALUE pairs over the defaults */
typedef struct {
    const char *name;
    const char *set[3][2];
} copy_alt;

static const copy_alt alts[] = {
    {"defaults", {{NULL, NULL}}},
    {"one thread", {{"GSB_CUDA_COPY_THREADS", "1"}}},
    {"3 threads, no spin, 1 part each",
     {{"GSB_CUDA_COPY_THREADS", "3"}, {"GSB_CUDA_COPY_SPIN_US", "0"}, {"GSB_CUDA_COPY_PARTS", "1"}}},
    {"24 threads", {{"GSB_CUDA_COPY_THREADS", "24"}}},
    {"1 MiB chunks", {{"GSB_CUDA_COPY_CHUNK_MB", "1"}}},
    {"3 MiB chunks, prefault", {{"GSB_CUDA_COPY_CHUNK_MB", "3"}, {"GSB_CUDA_COPY_PREFAULT", "1"}}},
    {"register", {{"GSB_CUDA_COPY_MODE", "register"}}},
    {"pipelined", {{"GSB_CUDA_COPY_MODE", "pipelined"}}},
    {"pipelined, 1 MiB chunks, 2 threads",
     {{"GSB_CUDA_COPY_MODE", "pipelined"}, {"GSB_CUDA_COPY_CHUNK_MB", "1"},
      {"GSB_CUDA_COPY_THREADS", "2"}}},
    {"pipelined, 3 MiB chunks, one thread",
     {{"GSB_CUDA_COPY_MODE", "pipelined"}, {"GSB_CUDA_COPY_CHUNK_MB", "3"},
      {"GSB_CUDA_COPY_THREADS", "1"}}},
    {"driver", {{"GSB_CUDA_COPY_MODE", "driver"}}},
};
enum { N_ALTS = sizeof alts / sizeof alts[0] };

static void apply(const copy_alt *a)
{
    for (size_t i = 0; i < sizeof copy_vars / sizeof copy_vars[0]; i++)
        unsetenv(copy_vars[i]);
    for (int i = 0; i < 3; i++)
        if (a->set[i][0])
            CHECK(setenv(a->set[i][0], a->set[i][1], 1) == 0);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

/* first differing byte of a and b (n when equal), for the message */
static size_t first_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/*
 * Upload `bytes` from src + off_up (off_up bytes into a larger buffer: an
 * unaligned pointer), overwrite the source at once (the caller may reuse
 * it when upload returns), download into back + off_down and compare.
 */
static int roundtrip_on(const gsb__backend *be, size_t bytes, size_t off_up, size_t off_down,
                        unsigned seed)
{
    unsigned char *want = xmalloc(bytes), *src = xmalloc(bytes + off_up),
                  *back = xmalloc(bytes + off_down);
    byte_pattern(want, bytes, seed);
    memcpy(src + off_up, want, bytes);
    memset(back, 0xA5, bytes + off_down);
    gsb__tensor g;
    int ok = gsb__tensor_alloc(be, GSB_I32, (int64_t)(bytes / 4), 1, &g) == GSB_OK;
    ok = ok && be->ops->upload(be, &g, src + off_up) == GSB_OK;
    memset(src, 0x3C, bytes + off_up); /* reused at once */
    ok = ok && be->ops->download(be, &g, back + off_down) == GSB_OK;
    if (!ok) {
        fprintf(stderr, "round trip of %zu bytes failed: %s\n", bytes, gsb_errmsg());
    } else if (memcmp(back + off_down, want, bytes) != 0) {
        fprintf(stderr, "round trip of %zu bytes (offsets %zu, %zu) differs at byte %zu\n",
                bytes, off_up, off_down, first_diff(back + off_down, want, bytes));
        ok = 0;
    }
    gsb__tensor_free(&g);
    free(want);
    free(src);
    free(back);
    return ok;
}

/* sizes around 1 MiB (the probe), 2 MiB (the least chunk and the least
 * copy split among threads, in parts of at least 256 KiB), 3 MiB (an odd chunk), 32 MiB (a staging buffer) and 64 MiB
 * (both), odd tails; offsets make the host pointers unaligned */
static void test_roundtrips(void)
{
    const size_t M = (size_t)1 << 20;
    const size_t sizes[] = {4,         1000,        M - 4,      M,          M + 4,
                            2 * M - 4, 2 * M + 8,   3 * M + 12, 5 * M + 4,  32 * M - 4,
                            32 * M,    32 * M + 4,  64 * M + 12, 97 * M + 400};
    const size_t offs[][2] = {{0, 0}, {1, 3}, {4092, 7}};
    for (int k = 0; k < N_ALTS; k++) {
        apply(&alts[k]);
        int before = case_begin();
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
                if (!roundtrip_on(gpu, sizes[i], offs[o][0], offs[o][1],
                                  (unsigned)(k * 100 + i * 3 + o)))
                    CHECK(!"round trip");
        CASE_END(before, "%s", alts[k].name);
    }
    apply(&alts[0]);
}

/* downloads into pages never touched (a fresh mapping, as a result array) */
static void test_fresh_pages(void)
{
    const size_t bytes = ((size_t)4 << 20) + 4096 * 3 + 8;
    unsigned char *want = xmalloc(bytes);
    byte_pattern(want, bytes, 7);
    gsb__tensor g;
    CHECK_OK(gsb__tensor_alloc(gpu, GSB_I32, (int64_t)(bytes / 4), 1, &g));
    CHECK_OK(gpu->ops->upload(gpu, &g, want));
    for (int k = 0; k < N_ALTS; k++) {
        apply(&alts[k]);
        int before = case_begin();
        size_t map = bytes + 8192;
        unsigned char *h = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                -1, 0);
        CHECK(h != MAP_FAILED);
        if (h != MAP_FAILED) {
            unsigned char *dst = h + 100; /* unaligned, and starting mid-page */
            CHECK_OK(gpu->ops->download(gpu, &g, dst));
            CHECK(memcmp(dst, want, bytes) == 0);
            /* the bytes around the destination stay as they were (zero) */
            CHECK(h[99] == 0 && dst[bytes] == 0);
            munmap(h, map);
        }
        CASE_END(before, "%s", alts[k].name);
    }
    apply(&alts[0]);
    gsb__tensor_free(&g);
    free(want);
}

/* register mode: a range partly registered already is staged instead; a
 * range pinned in place for a copy is unpinned after it (host_register of
 * the same range then succeeds, which the driver refuses for a registered one) */
static void test_register_mode(void)
{
    const size_t M = (size_t)1 << 20, n = 24 * M;
    unsigned char *mem = NULL;
    CHECK(posix_memalign((void **)&mem, 4096, n) == 0);
    if (!mem)
        return;
    setenv("GSB_CUDA_COPY_MODE", "register", 1);
    unsigned char *want = xmalloc(n);
    byte_pattern(want, n, 11);
    memcpy(mem, want, n);
    gsb__tensor g;
    CHECK_OK(gsb__tensor_alloc(gpu, GSB_I32, (int64_t)(n / 4), 1, &g));
    /* the first half registered by the caller; the copy spans both halves */
    CHECK_OK(gpu->ops->host_register(gpu, mem, n / 2));
    gsb__tensor part = gsb__tensor_rows(&g, 0, (int64_t)(n / 8)); /* n / 2 bytes */
    CHECK_OK(gpu->ops->upload(gpu, &part, mem + n / 4));
    unsigned char *back = xmalloc(n / 2);
    CHECK_OK(gpu->ops->download(gpu, &part, back));
    CHECK(memcmp(back, want + n / 4, n / 2) == 0);
    gpu->ops->host_unregister(gpu, mem);
    /* the whole range, pinned in place for each copy and unpinned again */
    CHECK_OK(gpu->ops->upload(gpu, &g, mem));
    memset(mem, 0, n);
    CHECK_OK(gpu->ops->download(gpu, &g, mem));
    CHECK(memcmp(mem, want, n) == 0);
    CHECK_OK(gpu->ops->host_register(gpu, mem, n));
    gpu->ops->host_unregister(gpu, mem);
    unsetenv("GSB_CUDA_COPY_MODE");
    gsb__tensor_free(&g);
    free(back);
    free(want);
    free(mem);
}

/* uploads laid out differently back to back: a pipelined upload returns with
 * DMAs still reading its ring of chunks, which a staged upload's halves
 * overlap (and the other way round): each must wait for the other's DMAs */
static void test_layout_switch(void)
{
    const size_t n = (size_t)40 << 20;
    unsigned char *a = xmalloc(n), *b = xmalloc(n), *back = xmalloc(n);
    byte_pattern(a, n, 31);
    byte_pattern(b, n, 32);
    gsb__tensor ga, gb;
    CHECK_OK(gsb__tensor_alloc(gpu, GSB_I32, (int64_t)(n / 4), 1, &ga));
    CHECK_OK(gsb__tensor_alloc(gpu, GSB_I32, (int64_t)(n / 4), 1, &gb));
    for (int rep = 0; rep < 4; rep++) {
        setenv("GSB_CUDA_COPY_MODE", rep & 1 ? "staged" : "pipelined", 1);
        CHECK_OK(gpu->ops->upload(gpu, &ga, a));
        setenv("GSB_CUDA_COPY_MODE", rep & 1 ? "pipelined" : "staged", 1);
        CHECK_OK(gpu->ops->upload(gpu, &gb, b));
        CHECK_OK(gpu->ops->download(gpu, &ga, back));
        CHECK(memcmp(back, a, n) == 0);
        CHECK_OK(gpu->ops->download(gpu, &gb, back));
        CHECK(memcmp(back, b, n) == 0);
    }
    unsetenv("GSB_CUDA_COPY_MODE");
    gsb__tensor_free(&ga);
    gsb__tensor_free(&gb);
    free(a);
    free(b);
    free(back);
}

/* several threads copying at once: on one device they take turns (the op
 * lock), on two devices each with its own staging and copy threads */
enum { THREADS_N = 4 };
typedef struct {
    const gsb__backend *be;
    unsigned seed;
    int ok;
} thread_job;

static void *thread_roundtrips(void *arg)
{
    thread_job *job = arg;
    job->ok = 1;
    for (int rep = 0; rep < 3 && job->ok; rep++)
        job->ok = roundtrip_on(job->be, (size_t)40000000 + 4 * (size_t)rep, (size_t)rep,
                               (size_t)(3 - rep), job->seed * 10 + (unsigned)rep);
    return NULL;
}

static void run_threads(const gsb__backend *const *bes, int n)
{
    pthread_t th[THREADS_N];
    thread_job jobs[THREADS_N];
    for (int i = 0; i < n; i++) {
        jobs[i] = (thread_job){bes[i], 100 + (unsigned)i, 0};
        CHECK(pthread_create(&th[i], NULL, thread_roundtrips, &jobs[i]) == 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].ok);
    }
}

static void test_threads(void)
{
    /* settings are changed only between the runs (setenv is not thread-safe) */
    const int which[] = {0, 2, 6, 7};
    for (size_t k = 0; k < sizeof which / sizeof which[0]; k++) {
        apply(&alts[which[k]]);
        int before = case_begin();
        const gsb__backend *same[THREADS_N] = {gpu, gpu, gpu, gpu};
        run_threads(same, THREADS_N);
        const gsb__backend *second = NULL;
        if (gsb__cuda_device_count() >= 2 && gsb__cuda_backend_device(1, &second) == GSB_OK) {
            const gsb__backend *two[THREADS_N] = {gpu, second, gpu, second};
            run_threads(two, THREADS_N);
        }
        CASE_END(before, "%s", alts[which[k]].name);
    }
    apply(&alts[0]);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_roundtrips);
    RUN(test_fresh_pages);
    RUN(test_register_mode);
    RUN(test_layout_switch);
    RUN(test_threads);
    return testing_done();
}
