/*
 * cuda_stream.cu - what streamed (out-of-core) fits and callers' device
 * arrays need of the GPU: axpy, row_scale, the staging ring (stage_open, stage_fill,
 * stage_acquire, stage_release, stage_close) and strided_copy.  Twins:
 * cpu_stream.c.
 *
 * The ring.  Buffer k of nbuf is device memory (from the pool, ordered on
 * the compute stream) with two events:
 *   copied[k]    recorded on the copy stream after the DMA that filled it;
 *   consumed[k]  recorded on the compute stream at release (and at open,
 *                after the allocation, so the first DMA follows it).
 * fill: the copy stream waits for consumed[k] (on the GPU: the host goes
 * on), then each segment is DMAed on the copy stream, a second stream
 * created once (non-blocking, so neither stream waits for the legacy one):
 *   - straight from the caller's memory when it is page-locked (a range
 *     registered with host_register, gsb_arena_alloc's blocks, CuPy's or
 *     PyTorch's pinned buffers: cuda_copy.cu's test);
 *   - otherwise through pinned[k], a page-locked twin of the buffer: the
 *     host first waits for copied[k] (the DMA that last read pinned[k]),
 *     then copies the segment in with the copy threads.  pinned[k] is made
 *     on the first pageable fill and kept in a small cache for the next
 *     ring, since pinning costs ~0.3 ms per MiB.  When pinning is refused,
 *     the DMA goes from pageable memory and the host waits for it.
 * acquire makes the compute stream wait for copied[k] (and counts the fill
 * in copy_stats: a fill never acquired, a stream's prefetch of a pass that
 * does not come, is not counted); release records consumed[k] after the
 * compute queued on the buffer.  So with two buffers
 * the DMA of batch i + 1 runs while the kernels of batch i do, and with
 * pageable memory the host's copy of batch i + 2 too.
 *
 * Every entry runs under the backend's op lock (cuda_backend.cu), like any
 * op; a ring lives between its open and close across many ops, so the ring
 * owns its buffers and events and the lock only guards its device's copy
 * stream.  The cache of pinned buffers is every device's (they are
 * portable), under a lock of its own.
 *
 * $GSB_STREAM_TRACE (set, not "0"): each ring times its fills with events
 * (the DMAs on the copy stream, the compute between acquire and release on
 * the compute stream) and the host's staging, and prints one line to stderr
 * at close: whether a streamed fit is bound by the link, the compute or the
 * host (docs/CUDA.md, "Out of core"), and a second with the link's idle time
 * between DMAs and its largest gaps (which fill each came before: a pass
 * boundary or a stall inside a pass).  Off, it costs nothing.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_common.h"

/* one traced fill: events around its DMAs (copy stream) and around the
 * compute on its batch (compute stream, acquire to release) */
struct trace_fill {
    cudaEvent_t ev[4]; /* DMA start, DMA end, compute start, compute end */
    int recorded;      /* how many of ev have been recorded, in that order */
    size_t bytes;
};

struct stage_trace {
    trace_fill *f;
    int n, cap;
    int last[GSB__STAGE_MAX_BUFFERS]; /* the fill last queued into buffer k */
    double t_open, host_wait_s, host_copy_s;
    size_t host_bytes;
};

struct gsb__stage {
    size_t bytes;
    int nbuf;
    void *dev[GSB__STAGE_MAX_BUFFERS];
    char *pinned[GSB__STAGE_MAX_BUFFERS]; /* NULL until a pageable fill needs it */
    size_t pinned_cap[GSB__STAGE_MAX_BUFFERS];
    int pin_refused;                       /* cudaHostAlloc failed: pageable DMAs */
    cudaEvent_t copied[GSB__STAGE_MAX_BUFFERS];
    cudaEvent_t consumed[GSB__STAGE_MAX_BUFFERS];
    int filled[GSB__STAGE_MAX_BUFFERS];    /* copied[k] has been recorded */
    size_t pending[GSB__STAGE_MAX_BUFFERS]; /* bytes of k's fill, counted at acquire */
    int unread[GSB__STAGE_MAX_BUFFERS];    /* k was filled and not acquired since */
    cudaStream_t copy_stream;              /* the ring's device's copy stream */
    const gsb__backend *be;                /* the ring's device (its copy threads) */
    stage_trace *trace;                    /* $GSB_STREAM_TRACE, else NULL */
};

namespace {

constexpr int COPY_THREADS = 256;
/* pinned buffers kept between rings (pinning a 256 MiB buffer takes ~80 ms) */
constexpr int CACHE_SLOTS = 2 * GSB__STAGE_MAX_BUFFERS;

/* one copy stream per device (a stream belongs to the device it was made on) */
cudaStream_t copy_streams[GSB__CUDA_MAX_DEVICES];

struct pinned_cache {
    char *p[CACHE_SLOTS];
    size_t cap[CACHE_SLOTS];
};
pinned_cache cache;
pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

int ensure_copy_stream(int device, cudaStream_t *out)
{
    if (device < 0 || device >= GSB__CUDA_MAX_DEVICES)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "stage_open: device %d", device);
    if (!copy_streams[device])
        CUDA_TRY(cudaStreamCreateWithFlags(&copy_streams[device], cudaStreamNonBlocking));
    *out = copy_streams[device];
    return GSB_OK;
}

/* a cached pinned buffer of at least n bytes (taken out of the cache), or NULL */
char *cache_take(size_t n, size_t *cap)
{
    char *p = nullptr;
    pthread_mutex_lock(&cache_mu);
    for (int i = 0; i < CACHE_SLOTS && !p; i++)
        if (cache.p[i] && cache.cap[i] >= n) {
            p = cache.p[i];
            *cap = cache.cap[i];
            cache.p[i] = nullptr;
            cache.cap[i] = 0;
        }
    pthread_mutex_unlock(&cache_mu);
    return p;
}

/* back into the cache; the smallest cached buffer goes when it is full */
void cache_put_locked(char *p, size_t cap)
{
    int slot = -1;
    for (int i = 0; i < CACHE_SLOTS && slot < 0; i++)
        if (!cache.p[i])
            slot = i;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < CACHE_SLOTS; i++)
            if (cache.cap[i] < cache.cap[slot])
                slot = i;
        if (cache.cap[slot] >= cap) { /* every cached one is larger: drop this one */
            if (cudaFreeHost(p) != cudaSuccess)
                (void)cudaGetLastError();
            return;
        }
        if (cudaFreeHost(cache.p[slot]) != cudaSuccess)
            (void)cudaGetLastError();
    }
    cache.p[slot] = p;
    cache.cap[slot] = cap;
}

void cache_put(char *p, size_t cap)
{
    pthread_mutex_lock(&cache_mu);
    cache_put_locked(p, cap);
    pthread_mutex_unlock(&cache_mu);
}

int check_buffer(const gsb__stage *st, int k, const char *op)
{
    if (!st || k < 0 || k >= st->nbuf)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: no buffer %d", op, k);
    return GSB_OK;
}

/* ---- $GSB_STREAM_TRACE ---------------------------------------------------------- */

double now_s()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void trace_free(stage_trace *tr)
{
    if (!tr)
        return;
    for (int i = 0; i < tr->n; i++)
        for (int e = 0; e < 4; e++)
            if (cudaEventDestroy(tr->f[i].ev[e]) != cudaSuccess)
                (void)cudaGetLastError();
    free(tr->f);
    free(tr);
}

/* A CUDA call of the trace failed: the ring goes on untraced. */
void trace_off(gsb__stage *st)
{
    (void)cudaGetLastError();
    fprintf(stderr, "gsb stream trace: off for this ring (a CUDA event call failed)\n");
    trace_free(st->trace);
    st->trace = nullptr;
}

void trace_open(gsb__stage *st)
{
    const char *env = getenv("GSB_STREAM_TRACE");
    if (!env || !*env || strcmp(env, "0") == 0)
        return;
    stage_trace *tr = (stage_trace *)calloc(1, sizeof *tr);
    if (!tr)
        return;
    for (int k = 0; k < GSB__STAGE_MAX_BUFFERS; k++)
        tr->last[k] = -1;
    tr->t_open = now_s();
    st->trace = tr;
}

/* Record event e of buffer k's current fill on stream s (e in order). */
void trace_mark(gsb__stage *st, int k, int e, cudaStream_t s)
{
    stage_trace *tr = st->trace;
    if (!tr || tr->last[k] < 0)
        return;
    trace_fill *f = &tr->f[tr->last[k]];
    if (f->recorded != e)
        return;
    if (cudaEventRecord(f->ev[e], s) != cudaSuccess) {
        trace_off(st);
        return;
    }
    f->recorded = e + 1;
}

/* A new traced fill of `bytes` into buffer k: its events (the first DMA of
 * the fill records the start: after the host's staging, so a DMA's time is
 * the link's). */
void trace_fill_begin(gsb__stage *st, int k, size_t bytes)
{
    stage_trace *tr = st->trace;
    if (!tr)
        return;
    if (tr->n == tr->cap) {
        int cap = tr->cap ? 2 * tr->cap : 64;
        trace_fill *f = (trace_fill *)realloc(tr->f, (size_t)cap * sizeof *f);
        if (!f) {
            trace_off(st);
            return;
        }
        tr->f = f;
        tr->cap = cap;
    }
    trace_fill *f = &tr->f[tr->n];
    memset(f, 0, sizeof *f);
    for (int e = 0; e < 4; e++)
        if (cudaEventCreate(&f->ev[e]) != cudaSuccess) {
            for (int j = 0; j < e; j++)
                if (cudaEventDestroy(f->ev[j]) != cudaSuccess)
                    (void)cudaGetLastError();
            trace_off(st);
            return;
        }
    f->bytes = bytes;
    tr->last[k] = tr->n++;
}

/* ms between two recorded events, 0 when unreadable */
float elapsed_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return ms;
}

/* The link's idle time between consecutive traced DMAs (the end of fill i - 1
 * to the start of fill i), its total and the GAPS largest gaps with the fill
 * they came before: fill g of a stream is batch g mod (batches per pass), so
 * a gap before a multiple of the pass's batch count is a pass boundary. */
constexpr int GAPS = 4;
struct link_gaps {
    double idle_ms;
    int over_half_ms;
    double ms[GAPS];
    int before[GAPS];
};

void find_gaps(const stage_trace *tr, link_gaps *g)
{
    memset(g, 0, sizeof *g);
    for (int j = 0; j < GAPS; j++)
        g->before[j] = -1;
    int prev = -1;
    for (int i = 0; i < tr->n; i++) {
        if (tr->f[i].recorded < 2)
            continue;
        if (prev >= 0) {
            double ms = elapsed_ms(tr->f[prev].ev[1], tr->f[i].ev[0]);
            ms = ms > 0 ? ms : 0;
            g->idle_ms += ms;
            g->over_half_ms += ms > 0.5;
            for (int j = 0; j < GAPS; j++)
                if (g->before[j] < 0 || ms > g->ms[j]) { /* insert at j, shift the rest */
                    memmove(&g->ms[j + 1], &g->ms[j], (size_t)(GAPS - 1 - j) * sizeof *g->ms);
                    memmove(&g->before[j + 1], &g->before[j],
                            (size_t)(GAPS - 1 - j) * sizeof *g->before);
                    g->ms[j] = ms;
                    g->before[j] = i;
                    break;
                }
        }
        prev = i;
    }
}

/* At close (the copy stream drained): wait for the traced compute, print the line. */
void trace_report(gsb__stage *st)
{
    stage_trace *tr = st->trace;
    if (!tr)
        return;
    double dma_ms = 0, cmp_ms = 0, span_ms = 0;
    size_t bytes = 0;
    int batches = 0, first = -1, last = -1;
    for (int i = 0; i < tr->n; i++) {
        trace_fill *f = &tr->f[i];
        if (f->recorded == 4 && cudaEventSynchronize(f->ev[3]) != cudaSuccess)
            (void)cudaGetLastError();
        if (f->recorded >= 2) {
            dma_ms += elapsed_ms(f->ev[0], f->ev[1]);
            bytes += f->bytes;
            first = first < 0 ? i : first;
            last = i;
        }
        if (f->recorded == 4) {
            cmp_ms += elapsed_ms(f->ev[2], f->ev[3]);
            batches++;
        }
    }
    if (first >= 0)
        span_ms = elapsed_ms(tr->f[first].ev[0], tr->f[last].ev[1]);
    double gb = (double)bytes / 1e9;
    fprintf(stderr,
            "gsb stream trace: %d fills of %.1f MiB, %d buffers | link: %.3f GB, DMAs busy "
            "%.1f ms (%.1f GB/s), first DMA start to last DMA end %.1f ms (%.1f GB/s) | "
            "compute: %d batches, %.1f ms (%.2f ms each) | host staging: waited %.1f ms, "
            "copied %.3f GB in %.1f ms | ring open to close %.1f ms\n",
            tr->n, (double)st->bytes / 1048576.0, st->nbuf, gb, dma_ms,
            dma_ms > 0 ? gb / (dma_ms / 1e3) : 0.0, span_ms,
            span_ms > 0 ? gb / (span_ms / 1e3) : 0.0, batches, cmp_ms,
            batches ? cmp_ms / batches : 0.0, 1e3 * tr->host_wait_s,
            (double)tr->host_bytes / 1e9, 1e3 * tr->host_copy_s, 1e3 * (now_s() - tr->t_open));
    link_gaps g;
    find_gaps(tr, &g);
    char largest[GAPS * 40] = "";
    for (int j = 0, len = 0; j < GAPS && g.before[j] >= 0; j++)
        len += snprintf(largest + len, sizeof largest - (size_t)len, "%s%.2f ms before fill %d",
                        j ? ", " : "", g.ms[j], g.before[j]);
    fprintf(stderr, "gsb stream trace: link idle between DMAs %.1f ms (%d gaps over 0.5 ms); "
            "largest: %s\n", g.idle_ms, g.over_half_ms, largest[0] ? largest : "none");
}

/* pinned[k], made (or taken from the cache) on first use; false when refused */
bool ensure_pinned(gsb__stage *st, int k)
{
    if (st->pinned[k])
        return true;
    if (st->pin_refused)
        return false;
    size_t cap = 0;
    char *p = cache_take(st->bytes, &cap);
    if (!p) {
        cap = st->bytes ? st->bytes : 1;
        /* portable: the cache hands it to any device's ring later */
        if (cudaHostAlloc((void **)&p, cap, cudaHostAllocPortable) != cudaSuccess) {
            (void)cudaGetLastError();
            st->pin_refused = 1;
            return false;
        }
    }
    st->pinned[k] = p;
    st->pinned_cap[k] = cap;
    return true;
}

/* one segment of a fill into buffer k, on the copy stream */
int fill_segment(gsb__stage *st, int k, const gsb__stage_seg *seg)
{
    char *dst = (char *)st->dev[k] + seg->offset;
    if (gsb__cuda_host_pinned(seg->host, seg->bytes)) {
        trace_mark(st, k, 0, st->copy_stream);
        CUDA_TRY(cudaMemcpyAsync(dst, seg->host, seg->bytes, cudaMemcpyHostToDevice,
                                 st->copy_stream));
        return GSB_OK;
    }
    if (!ensure_pinned(st, k)) {
        /* pageable DMA: the driver stages it and may return before it is done */
        trace_mark(st, k, 0, st->copy_stream);
        CUDA_TRY(cudaMemcpyAsync(dst, seg->host, seg->bytes, cudaMemcpyHostToDevice,
                                 st->copy_stream));
        CUDA_TRY(cudaStreamSynchronize(st->copy_stream));
        return GSB_OK;
    }
    /* the DMA that last read pinned[k] (this buffer's previous fill) is done */
    double t0 = st->trace ? now_s() : 0;
    if (st->filled[k])
        CUDA_TRY(cudaEventSynchronize(st->copied[k]));
    st->filled[k] = 0; /* waited for: only this fill's record counts from here */
    double t1 = st->trace ? now_s() : 0;
    gsb__cuda_parallel_copy(st->be, st->pinned[k] + seg->offset, seg->host, seg->bytes);
    if (st->trace) {
        st->trace->host_wait_s += t1 - t0;
        st->trace->host_copy_s += now_s() - t1;
        st->trace->host_bytes += seg->bytes;
    }
    trace_mark(st, k, 0, st->copy_stream);
    CUDA_TRY(cudaMemcpyAsync(dst, st->pinned[k] + seg->offset, seg->bytes,
                             cudaMemcpyHostToDevice, st->copy_stream));
    return GSB_OK;
}

template <typename D, typename S>
__global__ void strided_kernel(D *dst, const char *src, int64_t rows, int64_t cols, int64_t s0,
                               int64_t s1)
{
    const int64_t total = rows * cols, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        int64_t i = t / cols, j = t - i * cols;
        S v = *(const S *)(src + i * s0 + j * s1);
        /* through double, as the CPU twin and the copy op convert */
        dst[t] = static_cast<D>(static_cast<double>(v));
    }
}

bool known_dtype(gsb_dtype dt)
{
    return dt == GSB_F32 || dt == GSB_F64 || dt == GSB_I32 || dt == GSB_I64;
}

/* X[i, j] *= s[i], the product in double as the CPU twin forms it */
template <typename T>
__global__ void row_scale_kernel(T *X, const double *s, int64_t n, int64_t d)
{
    const int64_t total = n * d, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride)
        X[t] = static_cast<T>(static_cast<double>(X[t]) * s[t / d]);
}

unsigned blocks_for(const gsb__backend *be, int64_t work)
{
    int64_t blocks = (work + COPY_THREADS - 1) / COPY_THREADS;
    int64_t cap = (int64_t)(gsb__cuda_ctx_of(be)->sm_count > 0 ? gsb__cuda_ctx_of(be)->sm_count
                                                                : 16) * 16;
    if (blocks > cap)
        blocks = cap;
    return blocks < 1 ? 1u : (unsigned)blocks;
}

template <typename D>
int strided_from(const gsb__backend *be, const void *src, gsb_dtype dtype, int64_t s0, int64_t s1,
                 gsb__tensor *dst)
{
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    int64_t rows = dst->rows, cols = dst->cols;
    unsigned g = blocks_for(be, rows * cols);
    D *d = (D *)dst->data;
    const char *p = (const char *)src;
    switch (dtype) {
    case GSB_F32: strided_kernel<D, float><<<g, COPY_THREADS, 0, s>>>(d, p, rows, cols, s0, s1); break;
    case GSB_F64: strided_kernel<D, double><<<g, COPY_THREADS, 0, s>>>(d, p, rows, cols, s0, s1); break;
    case GSB_I32: strided_kernel<D, int32_t><<<g, COPY_THREADS, 0, s>>>(d, p, rows, cols, s0, s1); break;
    case GSB_I64: strided_kernel<D, int64_t><<<g, COPY_THREADS, 0, s>>>(d, p, rows, cols, s0, s1); break;
    }
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

} // namespace

/* ---- axpy ------------------------------------------------------------------------------ */

extern "C" int gsb__cuda_axpy(const gsb__backend *be, double alpha, const gsb__tensor *x,
                              gsb__tensor *y)
{
    if (!x || !y || (x->dtype != GSB_F32 && x->dtype != GSB_F64) || y->dtype != x->dtype ||
        y->rows != x->rows || y->cols != x->cols || x->be != be || y->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "axpy: x and y must be float tensors of one shape "
                            "and dtype in this GPU's memory");
    int64_t n = x->rows * x->cols;
    if (n > 0 && (!x->data || !y->data))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "axpy: a tensor has no data");
    cublasHandle_t h = gsb__cuda_ctx_of(be)->blas;
    /* cuBLAS takes an int count: long vectors go in pieces */
    for (int64_t off = 0; off < n; off += INT32_MAX) {
        int len = (int)(n - off < INT32_MAX ? n - off : INT32_MAX);
        if (x->dtype == GSB_F64) {
            CUBLAS_TRY(cublasDaxpy(h, len, &alpha, (const double *)x->data + off, 1,
                                   (double *)y->data + off, 1));
        } else {
            float a = (float)alpha;
            CUBLAS_TRY(cublasSaxpy(h, len, &a, (const float *)x->data + off, 1,
                                   (float *)y->data + off, 1));
        }
    }
    return GSB_OK;
}

/* ---- row_scale --------------------------------------------------------------------- */

extern "C" int gsb__cuda_row_scale(const gsb__backend *be, gsb__tensor *X, const gsb__tensor *s)
{
    if (!X || !s || (X->dtype != GSB_F32 && X->dtype != GSB_F64) || s->dtype != GSB_F64 ||
        s->rows * s->cols != X->rows || X->be != be || s->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "row_scale: X must be a float tensor and s float64 "
                            "with one value per row of X, both in this GPU's memory");
    int64_t n = X->rows, d = X->cols;
    if (n * d == 0)
        return GSB_OK;
    if (!X->data || !s->data)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "row_scale: a tensor has no data");
    cudaStream_t st = gsb__cuda_ctx_of(be)->stream;
    unsigned g = blocks_for(be, n * d);
    if (X->dtype == GSB_F64)
        row_scale_kernel<double><<<g, COPY_THREADS, 0, st>>>((double *)X->data,
                                                             (const double *)s->data, n, d);
    else
        row_scale_kernel<float><<<g, COPY_THREADS, 0, st>>>((float *)X->data,
                                                            (const double *)s->data, n, d);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* ---- the staging ring ---------------------------------------------------------------- */

extern "C" void gsb__cuda_stage_close(const gsb__backend *be, gsb__stage *st)
{
    if (!st)
        return;
    /* no DMA may still write a buffer or read a pinned twin when they go */
    if (st->copy_stream && cudaStreamSynchronize(st->copy_stream) != cudaSuccess)
        (void)cudaGetLastError();
    trace_report(st);
    trace_free(st->trace);
    for (int k = 0; k < st->nbuf; k++) {
        gsb__cuda_free(be, st->dev[k]);
        if (st->pinned[k])
            cache_put(st->pinned[k], st->pinned_cap[k]);
        if (st->copied[k])
            cudaEventDestroy(st->copied[k]);
        if (st->consumed[k])
            cudaEventDestroy(st->consumed[k]);
    }
    (void)cudaGetLastError();
    free(st);
}

extern "C" int gsb__cuda_stage_open(const gsb__backend *be, size_t bytes, int nbuf,
                                    gsb__stage **out)
{
    *out = NULL;
    if (nbuf < 1 || nbuf > GSB__STAGE_MAX_BUFFERS)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "stage_open: %d buffers (1..%d)", nbuf,
                            GSB__STAGE_MAX_BUFFERS);
    cudaStream_t cs = nullptr;
    int rc = ensure_copy_stream(gsb__cuda_ctx_of(be)->device, &cs);
    if (rc != GSB_OK)
        return rc;
    gsb__stage *st = (gsb__stage *)calloc(1, sizeof *st);
    if (!st)
        return GSB_CUDA_ERR(GSB_ENOMEM, "out of host memory");
    st->copy_stream = cs;
    st->be = be;
    st->bytes = bytes;
    st->nbuf = nbuf;
    cudaStream_t compute = gsb__cuda_ctx_of(be)->stream;
    for (int k = 0; k < nbuf; k++) {
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, bytes, &st->dev[k]));
        CUDA_CHECK(cudaEventCreateWithFlags(&st->copied[k], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&st->consumed[k], cudaEventDisableTiming));
        /* the first DMA into the buffer comes after its stream-ordered allocation */
        CUDA_CHECK(cudaEventRecord(st->consumed[k], compute));
    }
    trace_open(st);
    *out = st;
    return GSB_OK;
done:
    gsb__cuda_stage_close(be, st);
    return rc;
}

extern "C" int gsb__cuda_stage_fill(const gsb__backend *be, gsb__stage *st, int k,
                                    const gsb__stage_seg *segs, int nseg)
{
    (void)be;
    int rc = check_buffer(st, k, "stage_fill");
    if (rc != GSB_OK)
        return rc;
    size_t total = 0;
    for (int i = 0; i < nseg; i++) {
        if (segs[i].offset > st->bytes || segs[i].bytes > st->bytes - segs[i].offset)
            return GSB_CUDA_ERR(GSB_EINTERNAL, "stage_fill: %zu bytes at %zu overflow the "
                                "%zu-byte buffer", segs[i].bytes, segs[i].offset, st->bytes);
        if (segs[i].bytes && !segs[i].host)
            return GSB_CUDA_ERR(GSB_EINTERNAL, "stage_fill: no host memory");
        total += segs[i].bytes;
    }
    /* the compute that read the buffer last (queued before its release) comes first */
    CUDA_TRY(cudaStreamWaitEvent(st->copy_stream, st->consumed[k], 0));
    trace_fill_begin(st, k, total);
    for (int i = 0; i < nseg; i++)
        if (segs[i].bytes) {
            rc = fill_segment(st, k, &segs[i]);
            if (rc != GSB_OK)
                return rc;
        }
    CUDA_TRY(cudaEventRecord(st->copied[k], st->copy_stream));
    st->filled[k] = 1;
    trace_mark(st, k, 1, st->copy_stream);
    st->pending[k] = total;
    st->unread[k] = 1;
    return GSB_OK;
}

extern "C" int gsb__cuda_stage_acquire(const gsb__backend *be, gsb__stage *st, int k, void **dev)
{
    *dev = NULL;
    int rc = check_buffer(st, k, "stage_acquire");
    if (rc != GSB_OK)
        return rc;
    CUDA_TRY(cudaStreamWaitEvent(gsb__cuda_ctx_of(be)->stream, st->copied[k], 0));
    trace_mark(st, k, 2, gsb__cuda_ctx_of(be)->stream);
    if (st->unread[k]) /* copy_stats: the fills used (a stream's prefetch may go unused) */
        gsb__cuda_count_copy(1, st->pending[k]);
    st->unread[k] = 0;
    *dev = st->dev[k];
    return GSB_OK;
}

extern "C" int gsb__cuda_stage_release(const gsb__backend *be, gsb__stage *st, int k)
{
    int rc = check_buffer(st, k, "stage_release");
    if (rc != GSB_OK)
        return rc;
    CUDA_TRY(cudaEventRecord(st->consumed[k], gsb__cuda_ctx_of(be)->stream));
    trace_mark(st, k, 3, gsb__cuda_ctx_of(be)->stream);
    return GSB_OK;
}

/* ---- strided_copy -------------------------------------------------------------------- */

extern "C" int gsb__cuda_strided_copy(const gsb__backend *be, const void *src, gsb_dtype dtype,
                                      int64_t s0, int64_t s1, gsb__tensor *dst)
{
    if (!dst || dst->be != be || dst->rows < 0 || dst->cols < 0 || !known_dtype(dtype) ||
        !known_dtype(dst->dtype))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "strided_copy: bad arguments");
    if (dst->rows * dst->cols == 0)
        return GSB_OK;
    if (!src || !dst->data)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "strided_copy: no memory");
    switch (dst->dtype) {
    case GSB_F32: return strided_from<float>(be, src, dtype, s0, s1, dst);
    case GSB_F64: return strided_from<double>(be, src, dtype, s0, s1, dst);
    case GSB_I32: return strided_from<int32_t>(be, src, dtype, s0, s1, dst);
    case GSB_I64: return strided_from<int64_t>(be, src, dtype, s0, s1, dst);
    }
    return GSB_CUDA_ERR(GSB_EINTERNAL, "strided_copy: unknown dtype");
}
