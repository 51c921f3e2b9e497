/*
 * cuda_copy.cu - moving bytes between host and device memory: the engine
 * behind upload and download, and the pinned host ranges of host_register /
 * host_unregister.
 *
 * Each copy takes one of these ways:
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
 *     of each chunk is split among several threads (a pool, started when
 *     the device opens), and the host side of one chunk overlaps the DMA of
 *     the previous one:
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
 *  3. No staging (pinning the 64 MiB at open was refused), or
 *     GSB_CUDA_COPY_MODE=driver: plain stream copies from pageable memory,
 *     which the driver stages itself, then a wait.
 *
 *  4. GSB_CUDA_COPY_MODE=register: a pageable range of 1 MiB or more is
 *     pinned in place for the one copy (cudaHostRegister), copied directly,
 *     waited for and unpinned; where the driver refuses the pinning (a
 *     read-only mapping, a range overlapping another registration) the copy
 *     is staged.  No host pass over the bytes, but pinning walks every page.
 *
 * Settings, read from the environment at each copy of 1 MiB or more (so one
 * process, bench_ops, can compare them side by side):
 *   GSB_CUDA_COPY_MODE      staged (default), pipelined (uploads: way 2
 *                           as one job over a ring of 8 MiB chunks, see
 *                           pipelined_h2d), register (way 4), driver (way 3)
 *   GSB_CUDA_COPY_THREADS   copy threads, the caller included (1 = no pool);
 *                           default the processors this process may run on,
 *                           at most 16
 *   GSB_CUDA_COPY_CHUNK_MB  a staged copy's chunk (1..32 MiB; default above)
 *   GSB_CUDA_COPY_PARTS     parts per copy thread of a chunk (default 4)
 *   GSB_CUDA_COPY_SPIN_US   how long an idle copy thread spins before it
 *                           sleeps (default 50 us): the chunks of one copy
 *                           then do not each pay for waking the threads
 *   GSB_CUDA_COPY_PREFAULT  1: a download's threads first fault in their
 *                           part of the caller's memory in one call
 *                           (MADV_POPULATE_WRITE) instead of a page fault
 *                           per page inside memcpy (fresh malloc'd results)
 *   GSB_CUDA_COPY_WARM      0: start the copy pool at the first large copy
 *                           instead of when the device opens (and running
 *                           each thread once over the staging memory)
 *   GSB_CUDA_POOL_WARM_MB   N: the device's memory pool grown by N MiB at
 *                           open (default 0), so a fit's first large
 *                           allocation maps no memory
 * With GSB_PROFILE set, each copy of 1 MiB or more prints a line on stderr
 * saying where its time went (it then also waits for its last DMA).
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
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#include <atomic>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda_common.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL (ignored) */
#endif

namespace {

/* two staging buffers of 32 MiB: per-chunk overheads (an event, a copy
 * launch, waking the copy threads: ~10-20 us) are noise next to a chunk's
 * ~0.6-1.3 ms on the link; small enough to pin on any machine */
constexpr size_t STAGING_BYTES = (size_t)64 << 20;
constexpr size_t MIN_CHUNK = (size_t)2 << 20;
/* below this a copy is one memcpy: waking threads costs more than they save */
constexpr size_t POOL_MIN = (size_t)2 << 20;
/* the least bytes of a part (the unit threads take) */
constexpr size_t PART_MIN = (size_t)256 << 10;
/* parts per thread by default: a thread that is late (woken last, or
 * descheduled) leaves a small share for the others, so the threads finish a
 * chunk together (with 2 parts per thread the chunk waited up to a part of
 * 1/32 of it, 1/2 of a thread's share) */
constexpr int DEFAULT_PARTS = 4;
/* pageable copies at least this large ask the driver whether the memory is
 * pinned after all (~1 us, noise at this size; skipped for small copies);
 * also the least a copy must be to read the settings, to be pinned in place
 * (way 4) or to print a profile line */
constexpr size_t PROBE_MIN = (size_t)1 << 20;
/* copy threads (the calling thread included) by default: the processors we
 * may run on, at most this many (a few more than saturate a socket's memory) */
constexpr int DEFAULT_MAX_COPY_THREADS = 16;
constexpr int MAX_COPY_THREADS = 64;
constexpr int DEFAULT_SPIN_US = 50;

inline size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- settings ------------------------------------------------------------------ */

enum copy_mode { MODE_STAGED, MODE_PIPELINED, MODE_REGISTER, MODE_DRIVER };

struct copy_settings {
    copy_mode mode;
    int threads;   /* the caller included */
    size_t chunk;  /* 0: the default rule (chunk_for) */
    int spin_us;
    int parts;     /* per thread */
    bool prefault;
};

/* $name as an integer in [lo, hi], else dflt (unset, empty or not a number) */
long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *env = getenv(name);
    if (!env || !*env)
        return dflt;
    char *end = nullptr;
    long v = strtol(env, &end, 10);
    if (*end != '\0')
        return dflt;
    return v < lo ? lo : v > hi ? hi : v;
}

/* the processors this process may run on (taskset, cgroup cpusets), else online */
int usable_cpus()
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n >= 1)
            return n;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus >= 1 ? (int)(cpus < MAX_COPY_THREADS ? cpus : MAX_COPY_THREADS) : 1;
}

int default_threads()
{
    static const int n = [] {
        int c = usable_cpus();
        return c < DEFAULT_MAX_COPY_THREADS ? c : DEFAULT_MAX_COPY_THREADS;
    }();
    return n;
}

copy_settings read_settings()
{
    copy_settings s;
    const char *mode = getenv("GSB_CUDA_COPY_MODE");
    s.mode = mode && strcmp(mode, "pipelined") == 0  ? MODE_PIPELINED
             : mode && strcmp(mode, "register") == 0 ? MODE_REGISTER
             : mode && strcmp(mode, "driver") == 0 ? MODE_DRIVER
                                                   : MODE_STAGED;
    s.threads = (int)env_long("GSB_CUDA_COPY_THREADS", default_threads(), 1, MAX_COPY_THREADS);
    s.chunk = (size_t)env_long("GSB_CUDA_COPY_CHUNK_MB", 0, 0, (long)(STAGING_BYTES >> 21)) << 20;
    s.spin_us = (int)env_long("GSB_CUDA_COPY_SPIN_US", DEFAULT_SPIN_US, 0, 100000);
    s.parts = (int)env_long("GSB_CUDA_COPY_PARTS", DEFAULT_PARTS, 1, 64);
    s.prefault = env_long("GSB_CUDA_COPY_PREFAULT", 0, 0, 1) == 1;
    return s;
}

/* the settings of a copy of `bytes`: small copies take the defaults without
 * reading the environment (they are one thread's memcpy anyway) */
copy_settings settings_for(size_t bytes)
{
    if (bytes >= PROBE_MIN)
        return read_settings();
    return copy_settings{MODE_STAGED, default_threads(), 0, DEFAULT_SPIN_US, DEFAULT_PARTS, false};
}

/* GSB_PROFILE set: a line per large copy (read once, as core/profile.c does) */
bool trace_on()
{
    static const bool on = [] {
        const char *e = getenv("GSB_PROFILE");
        return e && *e && strcmp(e, "0") != 0;
    }();
    return on;
}

/* ---- where a copy's time goes (GSB_PROFILE) ---------------------------------------- */

struct copy_trace {
    bool on;
    double start, probe, pool, host, wait, calls, reg, unreg;
    size_t chunk, chunks;
    int threads;
    const char *way;
};

copy_trace trace_begin(size_t bytes)
{
    copy_trace t = {};
    t.on = bytes >= PROBE_MIN && trace_on();
    if (t.on)
        t.start = now_ms();
    return t;
}

/* adds the time since *t0 to *acc and restarts *t0 (when tracing) */
inline void lap(const copy_trace &t, double *t0, double *acc)
{
    if (!t.on)
        return;
    double now = now_ms();
    *acc += now - *t0;
    *t0 = now;
}

/* The copy's line; an upload first waits for its last DMAs ("last DMA"). */
void trace_end(copy_trace &t, const char *dir, size_t bytes, cudaStream_t stream)
{
    if (!t.on)
        return;
    double tail0 = now_ms(), tail = 0;
    if (cudaStreamSynchronize(stream) != cudaSuccess)
        (void)cudaGetLastError(); /* the next op reports it */
    tail = now_ms() - tail0;
    double total = now_ms() - t.start, mib = (double)bytes / 1048576.0;
    fprintf(stderr,
            "gsb profile: cuda copy %s %.1f MiB (%s, %zu chunks of %.1f MiB, %d threads): "
            "%.2f ms, %.1f GB/s; pinned probe %.3f, pool start %.3f, host copies %.2f "
            "(%.1f GB/s), waits for a buffer %.2f, copy calls %.3f, pin %.2f, unpin %.2f, "
            "last DMA %.2f ms\n",
            dir, mib, t.way, t.chunks, (double)t.chunk / 1048576.0, t.threads, total,
            (double)bytes / (total * 1e6), t.probe, t.pool, t.host,
            t.host > 0 ? (double)bytes / (t.host * 1e6) : 0.0, t.wait, t.calls, t.reg, t.unreg,
            tail);
}

/* ---- staging ---------------------------------------------------------------- */

constexpr size_t MAX_RING = 8;  /* staging buffers of a pipelined upload, at most */
/* a pipelined upload's chunk by default: 8 of them in flight */
constexpr size_t PIPELINE_CHUNK = (size_t)8 << 20;

/*
 * The staging memory is laid out as nring buffers `stride` apart: the two
 * halves for staged copies, or a pipelined upload's ring of chunks; done[b]
 * is recorded after the last DMA that used buffer b of the layout in use.
 * A copy that lays it out otherwise first waits for every DMA of the last
 * layout (staging_layout).
 */
struct staging_state {
    char *buf[2];         /* halves of one pinned allocation; NULL: no staging */
    size_t half;
    cudaEvent_t done[MAX_RING]; /* (its device's) */
    size_t lay_nring, lay_stride;
};

/* Bytes per chunk of a staged copy of `bytes` (see the file comment), or the
 * chunk the settings ask for. */
size_t chunk_for(const staging_state &st, size_t bytes, const copy_settings &s)
{
    size_t c = s.chunk;
    if (c == 0) {
        c = (bytes / 4 + 63) & ~(size_t)63;
        if (c < MIN_CHUNK)
            c = MIN_CHUNK;
    }
    return c < st.half ? c : st.half;
}

/* ---- the copy pool ------------------------------------------------------------ */

/*
 * A job is len bytes from src to dst in chunks of `chunk` bytes (the last
 * shorter), each cut into ppc parts of `part` bytes; chunk c lands at
 * dst + (c % nring) * stride (a plain copy is one chunk).  Threads, the caller
 * included, take the next part below `limit` (the parts released so far)
 * under the lock and copy it without; a chunk is done when its count in
 * `left` (a ring of nring) is 0.  The caller copies parts too, so a job
 * finishes even if no worker wakes.
 * Thread i (the caller is 0, workers 1..) takes parts only while i < active,
 * so a copy asking for fewer threads than were started gets that many.
 * gen changes only under the lock; an idle worker spins on it for spin_us
 * before it sleeps on `go` (checked again under the lock: no lost wake-up).
 */
struct copy_pool;
struct worker_slot {
    copy_pool *pool;
    int index;
};
struct copy_pool {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t go = PTHREAD_COND_INITIALIZER, fin = PTHREAD_COND_INITIALIZER;
    int workers = 0;  /* threads started besides the caller (only grows) */
    bool refused = false; /* a thread could not be created: start no more */
    std::atomic<unsigned long long> gen{0}; /* bumped per job: workers wake on a change */
    std::atomic<int> spin_us{DEFAULT_SPIN_US};
    int active = 0;
    bool prefault = false;
    char *dst = nullptr;
    const char *src = nullptr;
    size_t len = 0, chunk = 0, stride = 0, part = 0, ppc = 0, next = 0, limit = 0;
    size_t nring = 1, left[MAX_RING] = {};
    worker_slot slots[MAX_COPY_THREADS];
};

/* A device's staging and copy threads (its op lock guards both). */
struct copier {
    staging_state st;
    copy_pool pool;
};
copier copiers[GSB__CUDA_MAX_DEVICES];

/* memcpy, after faulting in dst's whole pages in one call when asked */
void part_copy(char *dst, const char *src, size_t len, bool prefault)
{
    if (prefault) {
        const uintptr_t page = 4096;
        uintptr_t a = ((uintptr_t)dst + page - 1) & ~(page - 1);
        uintptr_t b = ((uintptr_t)dst + len) & ~(page - 1);
        if (b > a) /* best effort: an old kernel or an odd mapping just faults as before */
            (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
    }
    memcpy(dst, src, len);
}

/* Copies the next part of the current job (one below limit); pool.m held
 * on entry and exit, not during the copy. */
void take_one_locked(copy_pool &pool)
{
    size_t i = pool.next++;
    size_t c = i / pool.ppc, off = (i % pool.ppc) * pool.part;
    size_t clen = min_sz(pool.chunk, pool.len - c * pool.chunk);
    size_t len = off < clen ? min_sz(pool.part, clen - off) : 0; /* the last chunk's tail */
    char *d = pool.dst + (c % pool.nring) * pool.stride + off;
    const char *s = pool.src + c * pool.chunk + off;
    bool prefault = pool.prefault;
    pthread_mutex_unlock(&pool.m);
    if (len > 0)
        part_copy(d, s, len, prefault);
    pthread_mutex_lock(&pool.m);
    if (--pool.left[c % pool.nring] == 0)
        pthread_cond_signal(&pool.fin); /* only the caller waits on fin */
}

/* Copies parts of the current job until none is released (or thread `index`
 * is not one of the job's); pool.m held on entry and exit. */
void take_parts_locked(copy_pool &pool, int index)
{
    while (index < pool.active && pool.next < pool.limit)
        take_one_locked(pool);
}

/* spins until gen leaves `seen` or spin_us pass; true when it left */
bool spin_for_job(const copy_pool &pool, unsigned long long seen, int spin_us)
{
    double until = now_ms() + spin_us * 1e-3;
    for (unsigned i = 0;; i++) {
        if (pool.gen.load(std::memory_order_acquire) != seen)
            return true;
        if ((i & 63) == 63 && now_ms() >= until)
            return false;
    }
}

void *pool_worker(void *arg)
{
    worker_slot &slot = *(worker_slot *)arg;
    copy_pool &pool = *slot.pool;
    pthread_mutex_lock(&pool.m);
    /* a job already running finishes without us */
    unsigned long long seen = pool.gen.load(std::memory_order_relaxed);
    for (;;) {
        int spin = pool.spin_us.load(std::memory_order_relaxed);
        if (spin > 0 && pool.gen.load(std::memory_order_relaxed) == seen) {
            pthread_mutex_unlock(&pool.m);
            spin_for_job(pool, seen, spin);
            pthread_mutex_lock(&pool.m);
        }
        while (pool.gen.load(std::memory_order_relaxed) == seen)
            pthread_cond_wait(&pool.go, &pool.m);
        seen = pool.gen.load(std::memory_order_relaxed);
        take_parts_locked(pool, slot.index);
    }
    return nullptr;
}

/* Starts workers until threads - 1 run (never fewer than before); a thread
 * that cannot be created just means fewer, and no more tries. */
void pool_grow(copy_pool &pool, int threads)
{
    int want = threads - 1;
    if (want > MAX_COPY_THREADS - 1)
        want = MAX_COPY_THREADS - 1;
    if (pool.refused || want <= pool.workers)
        return;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) {
        pool.refused = true;
        return;
    }
    /* detached: they sleep on pool.go until the process exits */
    if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0)
        pool.refused = true;
    while (!pool.refused && pool.workers < want) {
        worker_slot *slot = &pool.slots[pool.workers + 1];
        slot->pool = &pool;
        slot->index = pool.workers + 1;
        pthread_t t;
        if (pthread_create(&t, &attr, pool_worker, slot) != 0)
            pool.refused = true;
        else
            pool.workers++;
    }
    pthread_attr_destroy(&attr);
}

/* The pool's threads for a copy (the caller included), started if need be. */
int pool_threads(copy_pool &pool, const copy_settings &s)
{
    pool_grow(pool, s.threads);
    return pool.workers + 1 < s.threads ? pool.workers + 1 : s.threads;
}

/* Sets up a job (pool.m held; nothing released yet): see copy_pool. */
void job_begin_locked(copy_pool &pool, char *dst, size_t stride, size_t nring, const char *src,
                      size_t len, size_t chunk, int threads, const copy_settings &s,
                      bool prefault)
{
    /* several parts per thread, so a late thread's share is picked up by the others */
    size_t ppc = min_sz(chunk / PART_MIN, (size_t)s.parts * (size_t)threads);
    ppc = ppc < 1 ? 1 : ppc;
    size_t part = ((chunk + ppc - 1) / ppc + 63) & ~(size_t)63;
    pool.dst = dst;
    pool.stride = stride;
    pool.nring = nring;
    pool.src = src;
    pool.len = len;
    pool.chunk = chunk;
    pool.part = part;
    pool.ppc = (chunk + part - 1) / part;
    pool.next = pool.limit = 0;
    pool.active = threads;
    pool.prefault = prefault;
    pool.spin_us.store(s.spin_us, std::memory_order_relaxed);
}

/* Releases chunk c's parts to the threads (pool.m held). */
void job_release_locked(copy_pool &pool, size_t c)
{
    pool.left[c % pool.nring] = pool.ppc;
    pool.limit = (c + 1) * pool.ppc;
    pool.gen.fetch_add(1, std::memory_order_release);
    pthread_cond_broadcast(&pool.go);
}

/* Waits until chunk c is copied, copying its parts meanwhile (pool.m held). */
void job_wait_chunk_locked(copy_pool &pool, size_t c)
{
    while (pool.left[c % pool.nring] > 0) {
        if (pool.next < pool.limit && pool.next / pool.ppc == c)
            take_one_locked(pool); /* never a later chunk's: c's DMA waits for nothing else */
        else
            pthread_cond_wait(&pool.fin, &pool.m);
    }
}

/* memcpy with the settings' threads of the pool (one thread for small copies). */
void parallel_copy(copy_pool &pool, char *dst, const char *src, size_t len,
                   const copy_settings &s, bool prefault_dst)
{
    bool prefault = prefault_dst && s.prefault;
    int threads = len < POOL_MIN || s.threads <= 1 ? 1 : pool_threads(pool, s);
    if (threads <= 1) {
        part_copy(dst, src, len, prefault);
        return;
    }
    pthread_mutex_lock(&pool.m);
    job_begin_locked(pool, dst, 0, 1, src, len, len, threads, s, prefault);
    job_release_locked(pool, 0);
    job_wait_chunk_locked(pool, 0);
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
    /* into pinned staging (cuda_stream.cu's fills): nothing to fault in */
    parallel_copy(copiers[gsb__cuda_ctx_of(be)->device].pool, (char *)dst, (const char *)src, n,
                  settings_for(n), false);
}

/* ---- opening ------------------------------------------------------------------------ */

namespace {

/*
 * GSB_CUDA_POOL_WARM_MB=N: N MiB taken from the device's memory pool and
 * given back at open, so that the first large allocation (a fit's X) is
 * served from memory the pool already holds instead of mapping new memory
 * inside the fit (the pool keeps what is freed: cuda_backend.cu).  Best
 * effort: a refusal only means the first allocation maps its own.
 */
void warm_device_pool(int device)
{
    size_t mb = (size_t)env_long("GSB_CUDA_POOL_WARM_MB", 0, 0, 1L << 24);
    cudaMemPool_t pool;
    void *p = nullptr;
    if (mb == 0 || cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
        cudaMallocFromPoolAsync(&p, mb << 20, pool, 0) != cudaSuccess ||
        cudaFreeAsync(p, 0) != cudaSuccess || cudaStreamSynchronize(0) != cudaSuccess)
        (void)cudaGetLastError();
}

} // namespace

/* device current; its op lock (or the open lock) held */
extern "C" int gsb__cuda_copy_open(int device)
{
    copier &cp = copiers[device];
    staging_state &st = cp.st;
    /* the copy threads now, not inside the first large copy (a fit's upload);
     * GSB_CUDA_COPY_WARM=0 leaves that to the first copy that needs them */
    bool warm = env_long("GSB_CUDA_COPY_WARM", 1, 0, 1) == 1;
    if (warm)
        pool_grow(cp.pool, read_settings().threads);
    void *p = nullptr;
    /* portable: page-locked for every device (implied with unified addressing anyway) */
    cudaError_t e = cudaHostAlloc(&p, STAGING_BYTES, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "gsb: cannot pin host memory (%s); using pageable copies\n",
                cudaGetErrorString(e));
        return GSB_OK;
    }
    for (size_t b = 0; b < MAX_RING; b++) {
        e = cudaEventCreateWithFlags(&st.done[b], cudaEventDisableTiming);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            for (size_t j = 0; j < b; j++)
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
    copy_settings s = read_settings();
    if (warm && s.threads > 1) /* every copy thread run once, on the staging it will fill */
        parallel_copy(cp.pool, st.buf[1], st.buf[0], st.half, s, false);
    warm_device_pool(device);
    return GSB_OK;
}

extern "C" void gsb__cuda_copy_close(int device)
{
    staging_state &st = copiers[device].st;
    if (st.buf[0]) {
        for (size_t b = 0; b < MAX_RING; b++)
            cudaEventDestroy(st.done[b]);
        cudaFreeHost(st.buf[0]);
        (void)cudaGetLastError();
    }
    memset(&st, 0, sizeof st);
}

/* ---- copies ------------------------------------------------------------------------- */

namespace {

/* Ways 1 and 3: one stream copy (the legacy stream does not order with ours), then a wait. */
int copy_direct(cudaStream_t stream, void *dst, const void *src, size_t bytes,
                cudaMemcpyKind kind, copy_trace &t)
{
    double t0 = t.on ? now_ms() : 0;
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, stream));
    CUDA_TRY(cudaStreamSynchronize(stream));
    lap(t, &t0, &t.calls);
    return GSB_OK;
}

/*
 * Way 4: host's bytes pinned in place for this copy, copied, waited for and
 * unpinned.  *done false (and GSB_OK) when the driver refuses the pinning:
 * the caller stages the copy instead.  The range is unpinned whatever the
 * copy did, after the wait (the DMA must not outlive the pinning).
 */
int copy_registered(cudaStream_t stream, void *dst, const void *src, size_t bytes,
                    cudaMemcpyKind kind, void *host, copy_trace &t, bool *done)
{
    *done = false;
    double t0 = t.on ? now_ms() : 0;
    cudaError_t e = cudaHostRegister(host, bytes, cudaHostRegisterDefault);
    lap(t, &t0, &t.reg);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return GSB_OK;
    }
    *done = true;
    t.way = "pinned in place";
    e = cudaMemcpyAsync(dst, src, bytes, kind, stream);
    const char *what = "cudaMemcpyAsync (pinned in place)";
    if (e == cudaSuccess) {
        e = cudaStreamSynchronize(stream);
        what = "cudaStreamSynchronize (pinned in place)";
    }
    lap(t, &t0, &t.calls);
    cudaError_t u = cudaHostUnregister(host);
    lap(t, &t0, &t.unreg);
    if (e != cudaSuccess)
        return gsb__cuda_fail_rt(e, what, __FILE__, __LINE__);
    if (u != cudaSuccess)
        return gsb__cuda_fail_rt(u, "cudaHostUnregister", __FILE__, __LINE__);
    return GSB_OK;
}

#define PASS_RC(expr)                                                                      \
    do {                                                                                   \
        int rc_ = (expr);                                                                  \
        if (rc_ != GSB_OK)                                                                 \
            return rc_;                                                                    \
    } while (0)

/* Staging laid out as nring buffers `stride` apart (see staging_state). */
int staging_layout(staging_state &st, size_t nring, size_t stride)
{
    if (st.lay_nring == nring && st.lay_stride == stride)
        return GSB_OK;
    for (size_t b = 0; b < st.lay_nring; b++)
        CUDA_TRY(cudaEventSynchronize(st.done[b]));
    st.lay_nring = nring;
    st.lay_stride = stride;
    return GSB_OK;
}

/* Way 2 upload (see the file comment). */
int staged_h2d(copier &cp, cudaStream_t stream, char *d, const char *h, size_t bytes,
               const copy_settings &s, copy_trace &t)
{
    staging_state &st = cp.st;
    size_t chunk = chunk_for(st, bytes, s);
    t.chunk = chunk;
    t.chunks = (bytes + chunk - 1) / chunk;
    double t0 = t.on ? now_ms() : 0;
    PASS_RC(staging_layout(st, 2, st.half));
    for (size_t off = 0, i = 0; off < bytes; off += chunk, i++) {
        size_t len = min_sz(chunk, bytes - off);
        int b = (int)(i & 1);
        /* the DMA that last read this buffer (chunk i - 2, or an earlier copy) is done */
        CUDA_TRY(cudaEventSynchronize(st.done[b]));
        lap(t, &t0, &t.wait);
        parallel_copy(cp.pool, st.buf[b], h + off, len, s, false);
        lap(t, &t0, &t.host);
        CUDA_TRY(cudaMemcpyAsync(d + off, st.buf[b], len, cudaMemcpyHostToDevice, stream));
        CUDA_TRY(cudaEventRecord(st.done[b], stream));
        lap(t, &t0, &t.calls);
    }
    return GSB_OK;
}

/*
 * Way 2, pipelined (GSB_CUDA_COPY_MODE=pipelined; uploads): the copy is one
 * job for the threads over a ring of nring chunk buffers, with no wait for
 * all threads at each chunk's end.  Chunk c's parts are released once its
 * buffer's last DMA is done; the caller copies parts of the oldest chunk
 * not yet sent, queues its DMA as soon as it is complete, and then frees
 * the buffer of the chunk before (its DMA queued one chunk ago) for the
 * chunk nring later, while the threads go on with the chunks in between.
 * On an error every released part is still waited for: no thread may be
 * left writing staging (or counting into the next job).
 */
int pipelined_h2d(copier &cp, cudaStream_t stream, char *d, const char *h, size_t bytes,
                  const copy_settings &s, copy_trace &t)
{
    staging_state &st = cp.st;
    copy_pool &pool = cp.pool;
    size_t chunk = min_sz(s.chunk ? s.chunk : PIPELINE_CHUNK, st.half);
    size_t nring = min_sz(MAX_RING, (2 * st.half) / chunk), chunks = (bytes + chunk - 1) / chunk;
    int threads = pool_threads(pool, s);
    t.chunk = chunk;
    t.chunks = chunks;
    t.threads = threads;
    double t0 = t.on ? now_ms() : 0;
    PASS_RC(staging_layout(st, nring, chunk));
    pthread_mutex_lock(&pool.m);
    job_begin_locked(pool, st.buf[0], chunk, nring, h, bytes, chunk, threads, s, false);
    pthread_mutex_unlock(&pool.m);
    size_t released = 0, sent = 0;
    cudaError_t e = cudaSuccess;
    const char *what = "cudaEventSynchronize (a staging buffer)";
    for (; released < min_sz(nring, chunks); released++) {
        if ((e = cudaEventSynchronize(st.done[released])) != cudaSuccess)
            goto drain;
        pthread_mutex_lock(&pool.m);
        job_release_locked(pool, released);
        pthread_mutex_unlock(&pool.m);
    }
    lap(t, &t0, &t.wait);
    for (; sent < chunks; sent++) {
        size_t c = sent, len = min_sz(chunk, bytes - c * chunk);
        pthread_mutex_lock(&pool.m);
        job_wait_chunk_locked(pool, c);
        pthread_mutex_unlock(&pool.m);
        lap(t, &t0, &t.host);
        what = "cudaMemcpyAsync (a staged chunk)";
        if ((e = cudaMemcpyAsync(d + c * chunk, st.buf[0] + (c % nring) * chunk, len,
                                 cudaMemcpyHostToDevice, stream)) != cudaSuccess)
            goto drain;
        what = "cudaEventRecord (a staging buffer)";
        if ((e = cudaEventRecord(st.done[c % nring], stream)) != cudaSuccess)
            goto drain;
        lap(t, &t0, &t.calls);
        if (c >= 1 && released < chunks) { /* released == c - 1 + nring */
            what = "cudaEventSynchronize (a staging buffer)";
            if ((e = cudaEventSynchronize(st.done[(c - 1) % nring])) != cudaSuccess)
                goto drain;
            pthread_mutex_lock(&pool.m);
            job_release_locked(pool, released++);
            pthread_mutex_unlock(&pool.m);
            lap(t, &t0, &t.wait);
        }
    }
    return GSB_OK;
drain:
    (void)cudaGetLastError();
    pthread_mutex_lock(&pool.m);
    for (size_t c = sent; c < released; c++)
        job_wait_chunk_locked(pool, c);
    pthread_mutex_unlock(&pool.m);
    return gsb__cuda_fail_rt(e, what, __FILE__, __LINE__);
}

/* Way 2 download (see the file comment). */
int staged_d2h(copier &cp, cudaStream_t stream, char *h, const char *d, size_t bytes,
               const copy_settings &s, copy_trace &t)
{
    staging_state &st = cp.st;
    size_t chunk = chunk_for(st, bytes, s), chunks = (bytes + chunk - 1) / chunk;
    t.chunk = chunk;
    t.chunks = chunks;
    double t0 = t.on ? now_ms() : 0;
    PASS_RC(staging_layout(st, 2, st.half));
    /* chunk i lands in buffer i & 1.  Buffer (i & 1) was last read by the
     * host copy of chunk i - 2, finished before chunk i is queued; an
     * upload's DMA still reading it is ahead of ours on the stream. */
    for (size_t i = 0; i <= chunks; i++) {
        if (i < chunks) {
            size_t off = i * chunk, len = min_sz(chunk, bytes - off);
            int b = (int)(i & 1);
            CUDA_TRY(cudaMemcpyAsync(st.buf[b], d + off, len, cudaMemcpyDeviceToHost, stream));
            CUDA_TRY(cudaEventRecord(st.done[b], stream));
            lap(t, &t0, &t.calls);
        }
        if (i > 0) {
            size_t j = i - 1, off = j * chunk, len = min_sz(chunk, bytes - off);
            int b = (int)(j & 1);
            CUDA_TRY(cudaEventSynchronize(st.done[b]));
            lap(t, &t0, &t.wait);
            parallel_copy(cp.pool, h + off, st.buf[b], len, s, true);
            lap(t, &t0, &t.host);
        }
    }
    return GSB_OK;
}

/*
 * One copy between the host range `host` and device memory: dst/src are
 * the copy's ends in cudaMemcpy's order; to_device says which end is the
 * host's.  Picks the way (see the file comment) and traces it.
 */
int copy_any(const gsb__backend *be, void *dst, const void *src, size_t bytes, bool to_device)
{
    gsb__cuda_count_copy(to_device, bytes);
    const gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    cudaStream_t stream = ctx->stream;
    copier &cp = copiers[ctx->device];
    cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    void *host = to_device ? const_cast<void *>(src) : dst;
    const char *dir = to_device ? "h2d" : "d2h";
    copy_settings s = settings_for(bytes);
    copy_trace t = trace_begin(bytes);
    t.threads = 1;
    double t0 = t.on ? now_ms() : 0;
    bool pinned = host_pinned(host, bytes);
    lap(t, &t0, &t.probe);
    int rc = GSB_OK;
    if (pinned || !cp.st.buf[0] || s.mode == MODE_DRIVER) {
        t.way = pinned ? "pinned" : "driver-staged";
        rc = copy_direct(stream, dst, src, bytes, kind, t);
        if (rc == GSB_OK)
            trace_end(t, dir, bytes, stream);
        return rc;
    }
    if (s.mode == MODE_REGISTER && bytes >= PROBE_MIN) {
        bool done;
        rc = copy_registered(stream, dst, src, bytes, kind, host, t, &done);
        if (done) {
            if (rc == GSB_OK)
                trace_end(t, dir, bytes, stream);
            return rc;
        }
    }
    if (to_device && s.mode == MODE_PIPELINED) {
        t.way = "pipelined";
        if (t.on) { /* the pool's start, apart from the host copies (nothing once it runs) */
            pool_grow(cp.pool, s.threads);
            lap(t, &t0, &t.pool);
        }
        rc = pipelined_h2d(cp, stream, (char *)dst, (const char *)src, bytes, s, t);
        if (rc == GSB_OK)
            trace_end(t, dir, bytes, stream);
        return rc;
    }
    t.way = "staged";
    if (t.on && s.threads > 1 && bytes >= POOL_MIN) {
        /* the pool's start, apart from the host copies (nothing once it runs) */
        pool_grow(cp.pool, s.threads);
        lap(t, &t0, &t.pool);
    }
    t.threads = s.threads < cp.pool.workers + 1 ? s.threads : cp.pool.workers + 1;
    rc = to_device ? staged_h2d(cp, stream, (char *)dst, (const char *)src, bytes, s, t)
                   : staged_d2h(cp, stream, (char *)dst, (const char *)src, bytes, s, t);
    if (rc == GSB_OK)
        trace_end(t, dir, bytes, stream);
    return rc;
}

} // namespace

extern "C" int gsb__cuda_copy_h2d(const gsb__backend *be, void *dst, const void *src,
                                  size_t bytes)
{
    return bytes == 0 ? GSB_OK : copy_any(be, dst, src, bytes, true);
}

extern "C" int gsb__cuda_copy_d2h(const gsb__backend *be, void *dst, const void *src,
                                  size_t bytes)
{
    return bytes == 0 ? GSB_OK : copy_any(be, dst, src, bytes, false);
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
