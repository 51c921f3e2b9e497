/*
 * cuda_copy.cu - moving bytes between host and device memory: the engine
 * behind upload and download, and the pinned host ranges of host_register /
 * host_unregister.
 *
 * Each copy takes one of three ways:
 *
 *  1. Pinned host memory: a range registered through host_register (found
 *     in a small table, no driver call), or, for copies of 1 MiB and more,
 *     memory the driver reports as page-locked at both ends (a caller's
 *     cudaHostAlloc buffer, CuPy's or PyTorch's pinned pools).  One
 *     cudaMemcpyAsync reads or writes it directly at the link's rate, then
 *     a wait: the caller may reuse its memory as soon as we return.
 *
 *  2. Pageable memory (numpy arrays, C arrays): through two pinned staging
 *     buffers, in chunks.  A single memcpy thread moves 5-10 GB/s, well
 *     below PCIe 5 (~50 GB/s) or even PCIe 4 (~25 GB/s), so the host side
 *     of each chunk is split among several threads (a small pool, started
 *     on the first copy large enough to need it), and the host side of one
 *     chunk overlaps the DMA of the previous one:
 *       upload:   wait until buffer b's last DMA is done, copy chunk i into
 *                 b (threads), queue its DMA, record b's event; chunk i + 1
 *                 goes to the other buffer while that DMA runs.
 *       download: queue the DMA of chunk i into buffer b and record b's
 *                 event; then wait for chunk i - 1's event and copy it out
 *                 of the other buffer (threads) while chunk i's DMA runs.
 *     An upload returns once the caller's bytes are all in staging (the
 *     last DMAs may still run; later work on the stream is ordered after
 *     them); a download once the bytes are in the caller's memory.
 *     Chunks are a quarter of the copy, between 2 MiB and a buffer (32 MiB),
 *     so medium copies overlap too.
 *
 *  3. No staging (pinning the 64 MiB at open was refused): plain stream
 *     copies from pageable memory, which the driver stages itself, then a
 *     wait.
 *
 * Every device has its own staging buffers, events and copy pool (a
 * "copier"), used only under that device's op lock (upload and download are
 * ops): one copy at a time per device, while the devices of a multi-device
 * session copy at once, their host sides on their own threads, so the ranks'
 * uploads overlap instead of taking turns (and none falls back to the
 * driver's slow pageable copy).  The range table has its own lock:
 * host_register runs outside the op locks (pinning a large range takes a
 * while and touches nothing else).
 *
 * A range that was freed without host_unregister stays in the table; if
 * malloc later hands out the same addresses, copies from there take way 1
 * with pageable memory, which the driver still copies correctly (staged by
 * itself), only more slowly.  Nothing is torn down at exit.
 */
#include <pthread.h>
#include <stdint.h>

#include <atomic>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda_common.h"

namespace {

/* two staging buffers of 32 MiB: per-chunk overheads (an event, a copy
 * launch, waking the copy threads: ~10-20 us) are noise next to a chunk's
 * ~0.6-1.3 ms on the link; small enough to pin on any machine */
constexpr size_t STAGING_BYTES = (size_t)64 << 20;
constexpr size_t MIN_CHUNK = (size_t)2 << 20;
/* the least bytes one copy thread takes: below, waking it costs more than it saves */
constexpr size_t PART_MIN = (size_t)1 << 20;
/* pageable copies at least this large ask the driver whether the memory is
 * pinned after all (~1 us, noise at this size; skipped for small copies) */
constexpr size_t PROBE_MIN = (size_t)1 << 20;
/* copy threads (the calling thread included) by default: a few saturate
 * the memory bus; $GSB_CUDA_COPY_THREADS overrides (1 = no pool) */
constexpr int DEFAULT_COPY_THREADS = 8;
constexpr int MAX_COPY_THREADS = 64;

inline size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* ---- staging ---------------------------------------------------------------- */

struct staging_state {
    char *buf[2];         /* halves of one pinned allocation; NULL: no staging */
    size_t half;
    cudaEvent_t done[2];  /* recorded after the last DMA that used buf[b] (its device's) */
};

/* Bytes per chunk of a staged copy of `bytes` (see the file comment). */
size_t chunk_for(const staging_state &st, size_t bytes)
{
    size_t c = (bytes / 4 + 63) & ~(size_t)63;
    if (c < MIN_CHUNK)
        c = MIN_CHUNK;
    return c < st.half ? c : st.half;
}

/* ---- the copy pool ------------------------------------------------------------ */

/*
 * A job is len bytes from src to dst cut into nparts parts of `part` bytes
 * (the last shorter).  Threads, the caller included, take the next part
 * under the lock and copy it without; the caller returns when `left` is 0.
 * The caller copies parts too, so a job finishes even if no worker wakes.
 */
struct copy_pool {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t go = PTHREAD_COND_INITIALIZER, fin = PTHREAD_COND_INITIALIZER;
    int tried = 0;               /* start attempted (once per device and process) */
    int workers = 0;             /* threads started besides the caller */
    unsigned long long gen = 0;  /* bumped per job: workers wake on a change */
    char *dst = nullptr;
    const char *src = nullptr;
    size_t len = 0, part = 0, nparts = 0, next = 0, left = 0;
};

/* A device's staging and copy threads (its op lock guards both). */
struct copier {
    staging_state st;
    copy_pool pool;
};
copier copiers[GSB__CUDA_MAX_DEVICES];

/* Copies parts of the current job until none is left; pool.m held on entry and exit. */
void take_parts_locked(copy_pool &pool)
{
    while (pool.next < pool.nparts) {
        size_t i = pool.next++;
        size_t off = i * pool.part, len = min_sz(pool.part, pool.len - off);
        char *d = pool.dst + off;
        const char *s = pool.src + off;
        pthread_mutex_unlock(&pool.m);
        memcpy(d, s, len);
        pthread_mutex_lock(&pool.m);
        if (--pool.left == 0)
            pthread_cond_signal(&pool.fin);
    }
}

void *pool_worker(void *arg)
{
    copy_pool &pool = *(copy_pool *)arg;
    pthread_mutex_lock(&pool.m);
    unsigned long long seen = pool.gen; /* a job already running finishes without us */
    for (;;) {
        while (pool.gen == seen)
            pthread_cond_wait(&pool.go, &pool.m);
        seen = pool.gen;
        take_parts_locked(pool);
    }
    return nullptr;
}

/* Threads per copy (per device), the caller included: $GSB_CUDA_COPY_THREADS,
 * else DEFAULT_COPY_THREADS capped by the processors online. */
int copy_threads()
{
    const char *env = getenv("GSB_CUDA_COPY_THREADS");
    if (env && *env) {
        char *end = nullptr;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1)
            return (int)(v < MAX_COPY_THREADS ? v : MAX_COPY_THREADS);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = DEFAULT_COPY_THREADS;
    if (cpus >= 1 && cpus < n)
        n = (int)cpus;
    return n;
}

/* Starts the workers once; a thread that cannot be created just means fewer. */
void pool_start(copy_pool &pool)
{
    if (pool.tried)
        return;
    pool.tried = 1;
    int want = copy_threads() - 1;
    pthread_attr_t attr;
    if (want < 1 || pthread_attr_init(&attr) != 0)
        return;
    /* detached: they sleep on pool.go until the process exits */
    if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0) {
        for (int i = 0; i < want; i++) {
            pthread_t t;
            if (pthread_create(&t, &attr, pool_worker, &pool) != 0)
                break;
            pool.workers++;
        }
    }
    pthread_attr_destroy(&attr);
}

/* memcpy with the pool's threads (one thread for small copies). */
void parallel_copy(copy_pool &pool, char *dst, const char *src, size_t len)
{
    if (len < 2 * PART_MIN) {
        memcpy(dst, src, len);
        return;
    }
    pool_start(pool);
    if (pool.workers == 0) {
        memcpy(dst, src, len);
        return;
    }
    /* two parts per thread, so a descheduled thread's share is picked up by the others */
    size_t nparts = min_sz(len / PART_MIN, 2 * ((size_t)pool.workers + 1));
    size_t part = ((len + nparts - 1) / nparts + 63) & ~(size_t)63;
    pthread_mutex_lock(&pool.m);
    pool.dst = dst;
    pool.src = src;
    pool.len = len;
    pool.part = part;
    pool.nparts = (len + part - 1) / part;
    pool.next = 0;
    pool.left = pool.nparts;
    pool.gen++;
    pthread_cond_broadcast(&pool.go);
    take_parts_locked(pool);
    while (pool.left > 0)
        pthread_cond_wait(&pool.fin, &pool.m);
    pthread_mutex_unlock(&pool.m);
}

/* ---- pinned ranges --------------------------------------------------------------- */

struct pinned_range {
    uintptr_t base;
    size_t len;
};

struct range_table {
    pthread_mutex_t m;
    pinned_range *r;
    size_t count, cap;
};
range_table ranges = {PTHREAD_MUTEX_INITIALIZER, nullptr, 0, 0};

/* [p, p + n) lies wholly inside one registered range */
bool ranges_contain(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    bool found = false;
    pthread_mutex_lock(&ranges.m);
    for (size_t i = 0; i < ranges.count && !found; i++)
        found = a >= ranges.r[i].base && a - ranges.r[i].base <= ranges.r[i].len &&
                n <= ranges.r[i].len - (a - ranges.r[i].base);
    pthread_mutex_unlock(&ranges.m);
    return found;
}

bool ranges_add(void *p, size_t n)
{
    bool ok = true;
    pthread_mutex_lock(&ranges.m);
    if (ranges.count == ranges.cap) {
        size_t cap = ranges.cap ? 2 * ranges.cap : 16;
        pinned_range *r = (pinned_range *)realloc(ranges.r, cap * sizeof *r);
        if (r) {
            ranges.r = r;
            ranges.cap = cap;
        } else {
            ok = false;
        }
    }
    if (ok)
        ranges.r[ranges.count++] = pinned_range{(uintptr_t)p, n};
    pthread_mutex_unlock(&ranges.m);
    return ok;
}

/* Removes the range registered at p; false when there is none. */
bool ranges_remove(void *p)
{
    bool found = false;
    pthread_mutex_lock(&ranges.m);
    for (size_t i = 0; i < ranges.count; i++)
        if (ranges.r[i].base == (uintptr_t)p) {
            ranges.r[i] = ranges.r[--ranges.count];
            found = true;
            break;
        }
    pthread_mutex_unlock(&ranges.m);
    return found;
}

/* the driver's view: p is in page-locked host memory */
bool driver_pinned(const void *p)
{
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return attr.type == cudaMemoryTypeHost;
}

/* Way 1 applies to [p, p + n) (n > 0). */
bool host_pinned(const void *p, size_t n)
{
    if (ranges_contain(p, n))
        return true;
    return n >= PROBE_MIN && driver_pinned(p) && driver_pinned((const char *)p + (n - 1));
}

/* ---- traffic counters (the copy_stats op) ---------------------------------------------- */

struct copy_counters {
    std::atomic<uint64_t> h2d_count{0}, h2d_bytes{0}, d2h_count{0}, d2h_bytes{0};
};
copy_counters counters;

} // namespace

extern "C" void gsb__cuda_count_copy(int to_device, size_t bytes)
{
    if (to_device) {
        counters.h2d_count.fetch_add(1, std::memory_order_relaxed);
        counters.h2d_bytes.fetch_add(bytes, std::memory_order_relaxed);
    } else {
        counters.d2h_count.fetch_add(1, std::memory_order_relaxed);
        counters.d2h_bytes.fetch_add(bytes, std::memory_order_relaxed);
    }
}

extern "C" int gsb__cuda_copy_stats(const gsb__backend *be, gsb__copy_stats *out)
{
    (void)be;
    out->h2d_count = counters.h2d_count.load(std::memory_order_relaxed);
    out->h2d_bytes = counters.h2d_bytes.load(std::memory_order_relaxed);
    out->d2h_count = counters.d2h_count.load(std::memory_order_relaxed);
    out->d2h_bytes = counters.d2h_bytes.load(std::memory_order_relaxed);
    return GSB_OK;
}

extern "C" int gsb__cuda_host_pinned(const void *p, size_t n) { return n > 0 && host_pinned(p, n); }

extern "C" void gsb__cuda_parallel_copy(const gsb__backend *be, void *dst, const void *src,
                                        size_t n)
{
    parallel_copy(copiers[gsb__cuda_ctx_of(be)->device].pool, (char *)dst, (const char *)src, n);
}

/* ---- opening ------------------------------------------------------------------------ */

/* device current; its op lock (or the open lock) held */
extern "C" int gsb__cuda_copy_open(int device)
{
    staging_state &st = copiers[device].st;
    void *p = nullptr;
    /* portable: page-locked for every device (implied with unified addressing anyway) */
    cudaError_t e = cudaHostAlloc(&p, STAGING_BYTES, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "gsb: cannot pin host memory (%s); using pageable copies\n",
                cudaGetErrorString(e));
        return GSB_OK;
    }
    for (int b = 0; b < 2; b++) {
        e = cudaEventCreateWithFlags(&st.done[b], cudaEventDisableTiming);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            for (int j = 0; j < b; j++)
                cudaEventDestroy(st.done[j]);
            cudaFreeHost(p);
            memset(&st, 0, sizeof st);
            return GSB_CUDA_ERR(GSB_EBACKEND, "creating a staging event failed: %s",
                                cudaGetErrorString(e));
        }
    }
    st.half = STAGING_BYTES / 2;
    st.buf[0] = (char *)p;
    st.buf[1] = (char *)p + st.half;
    return GSB_OK;
}

extern "C" void gsb__cuda_copy_close(int device)
{
    staging_state &st = copiers[device].st;
    if (st.buf[0]) {
        for (int b = 0; b < 2; b++)
            cudaEventDestroy(st.done[b]);
        cudaFreeHost(st.buf[0]);
        (void)cudaGetLastError();
    }
    memset(&st, 0, sizeof st);
}

/* ---- copies ------------------------------------------------------------------------- */

extern "C" int gsb__cuda_copy_h2d(const gsb__backend *be, void *dst, const void *src,
                                  size_t bytes)
{
    if (bytes == 0)
        return GSB_OK;
    gsb__cuda_count_copy(1, bytes);
    const gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    cudaStream_t stream = ctx->stream;
    copier &cp = copiers[ctx->device];
    staging_state &st = cp.st;
    char *d = (char *)dst;
    const char *h = (const char *)src;
    if (!st.buf[0] || host_pinned(h, bytes)) {
        /* ways 1 and 3 (a stream copy: the legacy stream does not order with ours) */
        CUDA_TRY(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream));
        CUDA_TRY(cudaStreamSynchronize(stream));
        return GSB_OK;
    }
    size_t chunk = chunk_for(st, bytes);
    for (size_t off = 0, i = 0; off < bytes; off += chunk, i++) {
        size_t len = min_sz(chunk, bytes - off);
        int b = (int)(i & 1);
        /* the DMA that last read this buffer (chunk i - 2, or an earlier copy) is done */
        CUDA_TRY(cudaEventSynchronize(st.done[b]));
        parallel_copy(cp.pool, st.buf[b], h + off, len);
        CUDA_TRY(cudaMemcpyAsync(d + off, st.buf[b], len, cudaMemcpyHostToDevice, stream));
        CUDA_TRY(cudaEventRecord(st.done[b], stream));
    }
    return GSB_OK;
}

extern "C" int gsb__cuda_copy_d2h(const gsb__backend *be, void *dst, const void *src,
                                  size_t bytes)
{
    if (bytes == 0)
        return GSB_OK;
    gsb__cuda_count_copy(0, bytes);
    const gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    cudaStream_t stream = ctx->stream;
    copier &cp = copiers[ctx->device];
    staging_state &st = cp.st;
    char *h = (char *)dst;
    const char *d = (const char *)src;
    if (!st.buf[0] || host_pinned(h, bytes)) {
        CUDA_TRY(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, stream));
        CUDA_TRY(cudaStreamSynchronize(stream));
        return GSB_OK;
    }
    size_t chunk = chunk_for(st, bytes), chunks = (bytes + chunk - 1) / chunk;
    /* chunk i lands in buffer i & 1.  Buffer (i & 1) was last read by the
     * host copy of chunk i - 2, finished before chunk i is queued; an
     * upload's DMA still reading it is ahead of ours on the stream. */
    for (size_t i = 0; i <= chunks; i++) {
        if (i < chunks) {
            size_t off = i * chunk, len = min_sz(chunk, bytes - off);
            int b = (int)(i & 1);
            CUDA_TRY(cudaMemcpyAsync(st.buf[b], d + off, len, cudaMemcpyDeviceToHost, stream));
            CUDA_TRY(cudaEventRecord(st.done[b], stream));
        }
        if (i > 0) {
            size_t j = i - 1, off = j * chunk, len = min_sz(chunk, bytes - off);
            int b = (int)(j & 1);
            CUDA_TRY(cudaEventSynchronize(st.done[b]));
            parallel_copy(cp.pool, h + off, st.buf[b], len);
        }
    }
    return GSB_OK;
}

/* ---- pinned ranges ---------------------------------------------------------------- */

extern "C" int gsb__cuda_pin(void *p, size_t n)
{
    if (!p)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "host_register: no memory given");
    if (n == 0) /* nothing to pin: nothing recorded, and unregistering it does nothing */
        return GSB_OK;
    /* Default: on a unified-address system the range is mapped and portable */
    cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterDefault);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return GSB_CUDA_ERR(e == cudaErrorMemoryAllocation ? GSB_ENOMEM : GSB_EBACKEND,
                            "cannot pin %zu bytes of host memory for the GPU: %s", n,
                            cudaGetErrorString(e));
    }
    if (!ranges_add(p, n)) {
        if (cudaHostUnregister(p) != cudaSuccess)
            (void)cudaGetLastError();
        return GSB_CUDA_ERR(GSB_ENOMEM, "out of host memory recording a pinned range");
    }
    return GSB_OK;
}

extern "C" void gsb__cuda_unpin(void *p)
{
    /* only ranges we pinned: another pinning of the same memory is not ours to undo */
    if (!p || !ranges_remove(p))
        return;
    if (cudaHostUnregister(p) != cudaSuccess)
        (void)cudaGetLastError();
}
