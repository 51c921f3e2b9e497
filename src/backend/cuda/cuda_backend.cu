/*
 * cuda_backend.cu - opening the CUDA backend, its memory ops and its ops table.
 *
 * One backend per device: the loader opens the process's default one
 * ($GSB_CUDA_DEVICE, else 0) with gsb_backend_open; a multi-device session
 * (multidev/devset.h) opens the others with gsb_backend_open_device.  Each
 * has its own non-blocking stream that its ops enqueue on, in order, its
 * cuBLAS / cuSOLVER handles and its device's memory pool.  Memory:
 *  - device memory comes from the device's default stream-ordered pool,
 *    set to keep what is freed (release threshold UINT64_MAX), so repeated
 *    alloc/free in an estimator's loop reuses memory instead of paying for
 *    cudaMalloc each time.  When an allocation fails, the pool is trimmed
 *    once and the allocation retried; a second failure is GSB_ENOMEM and
 *    leaves the process usable.
 *  - host <-> device copies are cuda_copy.cu's: pinned memory (ranges
 *    registered through host_register) is copied directly, pageable memory
 *    through pinned staging buffers with several copy threads, the host
 *    side of one chunk overlapping the DMA of the previous one.
 *
 * Threads: ops may come from any thread (a server, a threaded client, the
 * rank threads of a multi-device fit).  Every entry of the ops table runs
 * under its device's recursive op lock, with the device made current on the
 * calling thread: the stream, the cuBLAS and cuSOLVER handles and the
 * staging buffers and copy threads (cuda_copy.cu) are the device's shared
 * state, and the GPU runs one stream in order anyway, so serialising costs
 * nothing there.  Different devices never wait for each other: the ranks of
 * a multi-device fit upload, compute and download at the same time.
 * Recursive, because an op may call other ops through the table.
 * host_register is the exception: pinning a large range takes a while and
 * needs only the device and the range table, so it runs outside the lock;
 * host_unregister takes every device's lock (any device may be copying
 * from the range).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "backend/cuda/cuda_common.h"

/* The host API as handed over at open.  The loader passes a pointer to its
 * own stack frame, so we keep a copy and point gsb__cuda_host at the copy. */
const gsb__host_api *gsb__cuda_host = NULL;

namespace {

constexpr int THREADS = 256;
/* what NVIDIA recommends for Hopper; plenty for older GPUs */
constexpr size_t BLAS_WORKSPACE_BYTES = (size_t)32 << 20;

struct cuda_state {
    gsb__cuda_ctx ctx;
    gsb__backend be;
    gsb__backend_ops ops;
    /* cuBLAS' workspace, ours: left to itself cuBLAS would cudaMalloc it,
     * which can fail while our pool holds the memory it keeps for reuse */
    void *blas_ws;
    pthread_mutex_t lock; /* the device's op lock (recursive) */
    int opened;
};

/* one state per CUDA device number, opened on demand, each with its own op
 * lock (made for every slot by the first open) */
cuda_state states[GSB__CUDA_MAX_DEVICES];
cuda_state *primary = nullptr; /* gsb_backend_open's: the process's default GPU */
gsb__host_api host_copy;
/* guards opening (host_copy, locks_made, a state's open) */
pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
int locks_made;

size_t dtype_size(gsb_dtype dt)
{
    switch (dt) {
    case GSB_F32: return 4;
    case GSB_F64: return 8;
    case GSB_I32: return 4;
    case GSB_I64: return 8;
    }
    return 0;
}

/* "src/backend/cuda/x.cu" -> "x.cu": messages stay short */
const char *base_name(const char *file)
{
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

int clamp_blocks(const gsb__backend *be, int64_t n)
{
    int64_t blocks = (n + THREADS - 1) / THREADS;
    /* grid-stride loops cover the rest: a few waves per SM are plenty */
    int64_t cap = (int64_t)(gsb__cuda_ctx_of(be)->sm_count > 0 ? gsb__cuda_ctx_of(be)->sm_count
                                                                : 16) * 16;
    if (blocks > cap)
        blocks = cap;
    return blocks < 1 ? 1 : (int)blocks;
}

/* ---- kernels -------------------------------------------------------------- */

template <typename T>
__global__ void fill_kernel(T *p, int64_t n, T v)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i] = v;
}

/* Through double, exactly as the CPU twin (get as double, set from double),
 * so int64 -> float32 rounds the same way on both backends. */
template <typename D, typename S>
__global__ void cast_kernel(D *dst, const S *src, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = static_cast<D>(static_cast<double>(src[i]));
}

/* ---- argument checks (a mismatch is a bug in the caller) ------------------ */

/* t must live on this backend; *bytes is its size */
int need_tensor(const gsb__backend *be, const char *op, const gsb__tensor *t, size_t *bytes)
{
    if (!t)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: tensor is missing", op);
    size_t esz = dtype_size(t->dtype);
    if (esz == 0 || t->rows < 0 || t->cols < 0)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: invalid tensor (dtype %d, shape (%lld, %lld))",
                            op, (int)t->dtype, (long long)t->rows, (long long)t->cols);
    if (t->cols > 0 && (uint64_t)t->rows > SIZE_MAX / esz / (uint64_t)t->cols)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: shape (%lld, %lld) is too large", op,
                            (long long)t->rows, (long long)t->cols);
    *bytes = (size_t)t->rows * (size_t)t->cols * esz;
    if (*bytes > 0 && (t->be != be || !t->data))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: tensor is not in this GPU's memory", op);
    return GSB_OK;
}

/* ---- device selection, for calls from any thread --------------------------- */

int bind_device(int device)
{
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == device)
        return GSB_OK;
    CUDA_TRY(cudaSetDevice(device));
    return GSB_OK;
}

/* Held for the length of one op: the device's lock, and the device made current. */
struct op_scope {
    int rc;
    pthread_mutex_t *mu;
    explicit op_scope(const gsb__backend *be)
    {
        int device = gsb__cuda_ctx_of(be)->device;
        mu = &states[device].lock;
        pthread_mutex_lock(mu);
        rc = bind_device(device);
    }
    ~op_scope() { pthread_mutex_unlock(mu); }
    op_scope(const op_scope &) = delete;
    op_scope &operator=(const op_scope &) = delete;
};

/* guarded<F>::call has F's signature and runs F inside an op_scope; the
 * ops table holds these instead of the ops themselves. */
template <auto F> struct guarded;
template <typename R, typename... A, R (*F)(const gsb__backend *, A...)>
struct guarded<F> {
    static R call(const gsb__backend *be, A... args)
    {
        op_scope scope(be);
        if constexpr (!std::is_void_v<R>) {
            if (scope.rc != GSB_OK)
                return scope.rc;
        }
        /* release (void) still runs: freeing on a failed bind just fails quietly */
        return F(be, args...);
    }
};

} // namespace

/* ---- errors ----------------------------------------------------------------- */

extern "C" int gsb__cuda_fail_rt(cudaError_t e, const char *what, const char *file, int line)
{
    int status = e == cudaErrorMemoryAllocation ? GSB_ENOMEM : GSB_EBACKEND;
    /* clears a non-sticky error so the next call does not see it again; a
     * sticky one (a kernel fault) stays, and every later call reports it */
    (void)cudaGetLastError();
    return GSB_CUDA_ERR(status, "CUDA error in %s (%s:%d): %s: %s", what, base_name(file), line,
                        cudaGetErrorName(e), cudaGetErrorString(e));
}

extern "C" int gsb__cuda_fail_blas(cublasStatus_t s, const char *what, const char *file,
                                   int line)
{
    int status = s == CUBLAS_STATUS_ALLOC_FAILED ? GSB_ENOMEM : GSB_EBACKEND;
    (void)cudaGetLastError();
    return GSB_CUDA_ERR(status, "CUDA error in %s (%s:%d): %s: %s", what, base_name(file), line,
                        cublasGetStatusName(s), cublasGetStatusString(s));
}

static const char *solver_status_name(cusolverStatus_t s)
{
    switch (s) {
    case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_MAPPING_ERROR: return "CUSOLVER_STATUS_MAPPING_ERROR";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED:
        return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    case CUSOLVER_STATUS_ZERO_PIVOT: return "CUSOLVER_STATUS_ZERO_PIVOT";
    case CUSOLVER_STATUS_INVALID_LICENSE: return "CUSOLVER_STATUS_INVALID_LICENSE";
    case CUSOLVER_STATUS_INVALID_WORKSPACE: return "CUSOLVER_STATUS_INVALID_WORKSPACE";
    default: return "CUSOLVER_STATUS_UNKNOWN";
    }
}

static const char *solver_status_text(cusolverStatus_t s)
{
    switch (s) {
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "resource allocation failed";
    case CUSOLVER_STATUS_INVALID_VALUE: return "an invalid value was passed";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "the device does not support this feature";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "matrix type not supported";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "operation not supported";
    default: return "cuSOLVER failed";
    }
}

extern "C" int gsb__cuda_fail_solver(cusolverStatus_t s, const char *what, const char *file,
                                     int line)
{
    int status = s == CUSOLVER_STATUS_ALLOC_FAILED ? GSB_ENOMEM : GSB_EBACKEND;
    (void)cudaGetLastError();
    return GSB_CUDA_ERR(status, "CUDA error in %s (%s:%d): %s: %s", what, base_name(file), line,
                        solver_status_name(s), solver_status_text(s));
}

/* ---- scratch memory ----------------------------------------------------------- */

static int pool_alloc(gsb__cuda_ctx *ctx, size_t bytes, void **out)
{
    /* a 0-byte request still gets a distinct pointer, as malloc-like callers expect */
    size_t n = bytes ? bytes : 1;
    void *p = NULL;
    cudaError_t e = cudaMallocFromPoolAsync(&p, n, ctx->pool, ctx->stream);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        /* the pool keeps what was freed; once the stream's pending frees are
         * done, hand everything unused back to the device and try again */
        if (cudaStreamSynchronize(ctx->stream) == cudaSuccess &&
            cudaMemPoolTrimTo(ctx->pool, 0) == cudaSuccess)
            e = cudaMallocFromPoolAsync(&p, n, ctx->pool, ctx->stream);
    }
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
            (void)cudaGetLastError();
        *out = NULL;
        return GSB_CUDA_ERR(GSB_ENOMEM,
                            "out of GPU memory allocating %zu bytes (free %.2f GiB of %.2f GiB)",
                            bytes, free_b / 1073741824.0, total_b / 1073741824.0);
    }
    if (e != cudaSuccess) {
        *out = NULL;
        return gsb__cuda_fail_rt(e, "cudaMallocFromPoolAsync", __FILE__, __LINE__);
    }
    *out = p;
    return GSB_OK;
}

extern "C" int gsb__cuda_alloc(const gsb__backend *be, size_t bytes, void **out)
{
    return pool_alloc(gsb__cuda_ctx_of(be), bytes, out);
}

extern "C" void gsb__cuda_free(const gsb__backend *be, void *p)
{
    if (!p)
        return;
    /* stream-ordered: the memory returns to the pool after the work queued
     * so far (which may still read it) has run */
    if (cudaFreeAsync(p, gsb__cuda_ctx_of(be)->stream) != cudaSuccess)
        (void)cudaGetLastError(); /* nothing a caller could do about it */
}

/* ---- memory ops ------------------------------------------------------------- */

static int cuda_alloc(const gsb__backend *be, gsb__tensor *t)
{
    if (!t || dtype_size(t->dtype) == 0 || t->rows < 0 || t->cols < 0)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "alloc: invalid tensor");
    size_t esz = dtype_size(t->dtype);
    if (t->cols > 0 && (uint64_t)t->rows > SIZE_MAX / esz / (uint64_t)t->cols)
        return GSB_CUDA_ERR(GSB_ENOMEM, "out of GPU memory: a (%lld, %lld) tensor is too large",
                            (long long)t->rows, (long long)t->cols);
    size_t bytes = (size_t)t->rows * (size_t)t->cols * esz;
    int rc = gsb__cuda_alloc(be, bytes, &t->data);
    if (rc != GSB_OK)
        return rc;
    t->be = be;
    t->owned = 1;
    return GSB_OK;
}

static void cuda_release(const gsb__backend *be, gsb__tensor *t)
{
    if (!t)
        return;
    gsb__cuda_free(be, t->data);
    t->data = NULL;
}

static int cuda_upload(const gsb__backend *be, gsb__tensor *dst, const void *host)
{
    size_t bytes;
    PASS(need_tensor(be, "upload", dst, &bytes));
    if (bytes == 0)
        return GSB_OK;
    if (!host)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "upload: no host data");
    return gsb__cuda_copy_h2d(be, dst->data, host, bytes);
}

static int cuda_download(const gsb__backend *be, const gsb__tensor *src, void *host)
{
    size_t bytes;
    PASS(need_tensor(be, "download", src, &bytes));
    if (bytes == 0)
        return GSB_OK;
    if (!host)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "download: no host buffer");
    return gsb__cuda_copy_d2h(be, host, src->data, bytes);
}

/* Outside the op lock (see the top): the device made current, then the pin. */
static int cuda_host_register(const gsb__backend *be, void *p, size_t n)
{
    PASS(bind_device(gsb__cuda_ctx_of(be)->device));
    return gsb__cuda_pin(p, n);
}

/* Under every device's op lock: no copy from or to the range (on any device)
 * can be running when it is unpinned. */
static void cuda_host_unregister(const gsb__backend *be, void *p)
{
    int all[GSB__CUDA_MAX_DEVICES];
    for (int d = 0; d < GSB__CUDA_MAX_DEVICES; d++)
        all[d] = d;
    gsb__cuda_lock_devices(all, GSB__CUDA_MAX_DEVICES);
    if (bind_device(gsb__cuda_ctx_of(be)->device) == GSB_OK)
        gsb__cuda_unpin(p);
    gsb__cuda_unlock_devices(all, GSB__CUDA_MAX_DEVICES);
}

template <typename D>
static int cast_from(const gsb__backend *be, D *dst, const gsb__tensor *src, int64_t n)
{
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    int blocks = clamp_blocks(be, n);
    switch (src->dtype) {
    case GSB_F32: cast_kernel<<<blocks, THREADS, 0, s>>>(dst, (const float *)src->data, n); break;
    case GSB_F64: cast_kernel<<<blocks, THREADS, 0, s>>>(dst, (const double *)src->data, n); break;
    case GSB_I32: cast_kernel<<<blocks, THREADS, 0, s>>>(dst, (const int32_t *)src->data, n); break;
    case GSB_I64: cast_kernel<<<blocks, THREADS, 0, s>>>(dst, (const int64_t *)src->data, n); break;
    }
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

static int cuda_copy(const gsb__backend *be, gsb__tensor *dst, const gsb__tensor *src)
{
    size_t dbytes, sbytes;
    PASS(need_tensor(be, "copy", dst, &dbytes));
    PASS(need_tensor(be, "copy", src, &sbytes));
    int64_t n = src->rows * src->cols;
    if (dst->rows * dst->cols != n)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "copy: element counts differ");
    if (n == 0)
        return GSB_OK;
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    if (dst->dtype == src->dtype) {
        if (dst->data != src->data)
            CUDA_TRY(cudaMemcpyAsync(dst->data, src->data, sbytes, cudaMemcpyDeviceToDevice,
                                     ctx->stream));
        return GSB_OK;
    }
    switch (dst->dtype) {
    case GSB_F32: return cast_from(be, (float *)dst->data, src, n);
    case GSB_F64: return cast_from(be, (double *)dst->data, src, n);
    case GSB_I32: return cast_from(be, (int32_t *)dst->data, src, n);
    case GSB_I64: return cast_from(be, (int64_t *)dst->data, src, n);
    }
    return GSB_CUDA_ERR(GSB_EINTERNAL, "copy: unknown dtype");
}

template <typename T>
static int fill_as(const gsb__backend *be, gsb__tensor *t, int64_t n, T v)
{
    fill_kernel<<<clamp_blocks(be, n), THREADS, 0, gsb__cuda_ctx_of(be)->stream>>>(
        (T *)t->data, n, v);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

static int cuda_fill(const gsb__backend *be, gsb__tensor *t, double value)
{
    size_t bytes;
    PASS(need_tensor(be, "fill", t, &bytes));
    int64_t n = t->rows * t->cols;
    if (n == 0)
        return GSB_OK;
    if (value == 0.0) { /* all-zero bits in every dtype (and +0.0, as the CPU's memset) */
        CUDA_TRY(cudaMemsetAsync(t->data, 0, bytes, gsb__cuda_ctx_of(be)->stream));
        return GSB_OK;
    }
    /* the value converted on the host exactly as the CPU twin converts it */
    switch (t->dtype) {
    case GSB_F32: return fill_as(be, t, n, (float)value);
    case GSB_F64: return fill_as(be, t, n, value);
    case GSB_I32: return fill_as(be, t, n, (int32_t)value);
    case GSB_I64: return fill_as(be, t, n, (int64_t)value);
    }
    return GSB_CUDA_ERR(GSB_EINTERNAL, "fill: unknown dtype");
}

/* ---- opening ------------------------------------------------------------------ */

static void say(char *why, size_t why_len, const char *fmt, ...)
{
    if (!why || why_len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
}

/* Which device: $GSB_CUDA_DEVICE (an index below count), else 0. */
static int pick_device(int count, int *device, char *why, size_t why_len)
{
    const char *env = getenv("GSB_CUDA_DEVICE");
    *device = 0;
    if (!env || !*env)
        return GSB_OK;
    char *end = NULL;
    long v = strtol(env, &end, 10);
    if (*end != '\0' || v < 0 || v >= count) {
        say(why, why_len, "GSB_CUDA_DEVICE=%s is not a device index (this machine has %d)", env,
            count);
        return GSB_EUNSUPPORTED;
    }
    *device = (int)v;
    return GSB_OK;
}

/* Undo a partial open (on failure only: an opened backend lives until exit). */
static void close_partial(cuda_state *g)
{
    gsb__cuda_ctx *ctx = &g->ctx;
    gsb__cuda_copy_close(ctx->device);
    if (ctx->solver)
        cusolverDnDestroy(ctx->solver);
    if (ctx->blas)
        cublasDestroy(ctx->blas);
    if (g->blas_ws)
        cudaFree(g->blas_ws);
    if (ctx->stream)
        cudaStreamDestroy(ctx->stream);
    (void)cudaGetLastError();
    memset(ctx, 0, sizeof *ctx);
    g->blas_ws = NULL;
}

/* What the device is, for messages and `gsb info`: "NVIDIA H100 80GB HBM3, 79 GiB, sm_90". */
static int describe_device(gsb__cuda_ctx *ctx, char *why, size_t why_len)
{
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, ctx->device);
    if (e != cudaSuccess) {
        say(why, why_len, "cannot query CUDA device %d: %s", ctx->device, cudaGetErrorString(e));
        return GSB_EBACKEND;
    }
    prop.name[sizeof prop.name - 1] = '\0';
    snprintf(ctx->name, sizeof ctx->name, "%.200s, %llu GiB, sm_%d%d", prop.name,
             (unsigned long long)(prop.totalGlobalMem >> 30), prop.major, prop.minor);
    ctx->sm_count = prop.multiProcessorCount;
    /* The parts whose double-precision rate is half (or more) their
     * single-precision rate: P100, V100, A100, H100/H200, B200.  Others
     * (consumer and workstation parts, 1/32 to 1/64) keep float32 cuBLAS. */
    ctx->fast_fp64 = prop.minor == 0 && (prop.major == 6 || prop.major == 7 ||
                                         prop.major == 8 || prop.major == 9 ||
                                         prop.major == 10);
    return GSB_OK;
}

/* Stream, library handles, pool and staging on the chosen device. */
static int open_device(cuda_state *g, char *why, size_t why_len)
{
    gsb__cuda_ctx *ctx = &g->ctx;
    cudaError_t e;
#define OPEN_STEP(call, what)                                                              \
    do {                                                                                   \
        e = (call);                                                                        \
        if (e != cudaSuccess) {                                                            \
            say(why, why_len, "CUDA device %d: %s failed: %s", ctx->device, what,          \
                cudaGetErrorString(e));                                                    \
            return GSB_EBACKEND;                                                           \
        }                                                                                  \
    } while (0)
    OPEN_STEP(cudaSetDevice(ctx->device), "cudaSetDevice");
    PASS(describe_device(ctx, why, why_len));
    OPEN_STEP(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking),
              "creating a stream");

    cublasStatus_t bs = cublasCreate(&ctx->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        ctx->blas = NULL;
        say(why, why_len, "cuBLAS could not start: %s", cublasGetStatusString(bs));
        return GSB_EBACKEND;
    }
    /* TF32 rounds float32 inputs to 10 mantissa bits: results would differ
     * from the CPU backend and scikit-learn, so only when the user asks */
    const char *tf32 = getenv("GSB_ALLOW_TF32");
    ctx->allow_tf32 = tf32 && strcmp(tf32, "1") == 0;
    if ((bs = cublasSetStream(ctx->blas, ctx->stream)) != CUBLAS_STATUS_SUCCESS ||
        (bs = cublasSetMathMode(ctx->blas, ctx->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                           : CUBLAS_DEFAULT_MATH)) !=
            CUBLAS_STATUS_SUCCESS) {
        say(why, why_len, "cuBLAS setup failed: %s", cublasGetStatusString(bs));
        return GSB_EBACKEND;
    }
    /* after cublasSetStream, which resets the workspace to cuBLAS' own */
    OPEN_STEP(cudaMalloc(&g->blas_ws, BLAS_WORKSPACE_BYTES), "allocating the cuBLAS workspace");
    if ((bs = cublasSetWorkspace(ctx->blas, g->blas_ws, BLAS_WORKSPACE_BYTES)) !=
        CUBLAS_STATUS_SUCCESS) {
        say(why, why_len, "cuBLAS workspace setup failed: %s", cublasGetStatusString(bs));
        return GSB_EBACKEND;
    }

    cusolverStatus_t ss = cusolverDnCreate(&ctx->solver);
    if (ss != CUSOLVER_STATUS_SUCCESS) {
        ctx->solver = NULL;
        say(why, why_len, "cuSOLVER could not start: %s", solver_status_text(ss));
        return GSB_EBACKEND;
    }
    if ((ss = cusolverDnSetStream(ctx->solver, ctx->stream)) != CUSOLVER_STATUS_SUCCESS) {
        say(why, why_len, "cuSOLVER setup failed: %s", solver_status_text(ss));
        return GSB_EBACKEND;
    }

    OPEN_STEP(cudaDeviceGetDefaultMemPool(&ctx->pool, ctx->device), "getting the memory pool");
    uint64_t keep = UINT64_MAX; /* never give freed memory back on a sync */
    OPEN_STEP(cudaMemPoolSetAttribute(ctx->pool, cudaMemPoolAttrReleaseThreshold, &keep),
              "configuring the memory pool");

    /* the device's staging buffers; pinning refused is not fatal (pageable copies) */
    if (gsb__cuda_copy_open(ctx->device) != GSB_OK) {
        say(why, why_len, "CUDA device %d: setting up host copies failed", ctx->device);
        return GSB_EBACKEND;
    }
#undef OPEN_STEP
    return GSB_OK;
}

static void bind_ops(gsb__backend_ops *o)
{
    o->alloc = guarded<cuda_alloc>::call;
    o->release = guarded<cuda_release>::call;
    o->upload = guarded<cuda_upload>::call;
    o->download = guarded<cuda_download>::call;
    o->copy = guarded<cuda_copy>::call;
    o->fill = guarded<cuda_fill>::call;
    o->gemm = guarded<gsb__cuda_gemm>::call;
    o->syrk = guarded<gsb__cuda_syrk>::call;
    o->eigh = guarded<gsb__cuda_eigh>::call;
    o->posv = guarded<gsb__cuda_posv>::call;
    o->svd = guarded<gsb__cuda_svd>::call;
    o->lstsq = guarded<gsb__cuda_lstsq>::call;
    o->orthonormalize = guarded<gsb__cuda_orthonormalize>::call;
    o->col_moments = guarded<gsb__cuda_col_moments>::call;
    o->col_minmax = guarded<gsb__cuda_col_minmax>::call;
    o->row_sqnorms = guarded<gsb__cuda_row_sqnorms>::call;
    o->col_affine = guarded<gsb__cuda_col_affine>::call;
    o->clip = guarded<gsb__cuda_clip>::call;
    o->pairwise = guarded<gsb__cuda_pairwise>::call;
    o->argmin_sqdist = guarded<gsb__cuda_argmin_sqdist>::call;
    o->topk = guarded<gsb__cuda_topk>::call;
    o->segment_sum = guarded<gsb__cuda_segment_sum>::call;
    o->kmeanspp = guarded<gsb__cuda_kmeanspp>::call;
    o->logistic_loss_grad = guarded<gsb__cuda_logistic_loss_grad>::call;
    o->kernel = guarded<gsb__cuda_kernel>::call;
    o->enet_cd_gram = guarded<gsb__cuda_enet_cd_gram>::call;
    o->gather_cols = guarded<gsb__cuda_gather_cols>::call;
    o->tsne_repulse_exact = guarded<gsb__cuda_tsne_repulse_exact>::call;
    o->tsne_repulse_bh = NULL; /* the estimator runs the FFT or exact repulsion instead */
    o->tsne_repulse_fft = guarded<gsb__cuda_tsne_repulse_fft>::call;
    o->tsne_attract = guarded<gsb__cuda_tsne_attract>::call;
    o->tsne_update = guarded<gsb__cuda_tsne_update>::call;
    o->forest_bin = guarded<gsb__cuda_forest_bin>::call;
    o->forest_hist = guarded<gsb__cuda_forest_hist>::call;
    o->forest_hist_sub = guarded<gsb__cuda_forest_hist_sub>::call;
    o->forest_split = guarded<gsb__cuda_forest_split>::call;
    o->forest_partition = guarded<gsb__cuda_forest_partition>::call;
    o->forest_predict = guarded<gsb__cuda_forest_predict>::call;
    o->radius_neighbors = guarded<gsb__cuda_radius_neighbors>::call;
    o->svm_select = guarded<gsb__cuda_svm_select>::call;
    o->svm_kernel_rows = guarded<gsb__cuda_svm_kernel_rows>::call;
    o->svm_inner = guarded<gsb__cuda_svm_inner>::call;
    o->svm_update_f = guarded<gsb__cuda_svm_update_f>::call;
    o->umap_sgd_epoch = guarded<gsb__cuda_umap_sgd_epoch>::call;
    o->axpy = guarded<gsb__cuda_axpy>::call;
    o->row_scale = guarded<gsb__cuda_row_scale>::call;
    o->stage_open = guarded<gsb__cuda_stage_open>::call;
    o->stage_fill = guarded<gsb__cuda_stage_fill>::call;
    o->stage_acquire = guarded<gsb__cuda_stage_acquire>::call;
    o->stage_release = guarded<gsb__cuda_stage_release>::call;
    o->stage_close = guarded<gsb__cuda_stage_close>::call;
    o->strided_copy = guarded<gsb__cuda_strided_copy>::call;
    o->forest_level_feats = guarded<gsb__cuda_forest_level_feats>::call;
    o->forest_level_decide = guarded<gsb__cuda_forest_level_decide>::call;
    o->forest_level_partition = guarded<gsb__cuda_forest_level_partition>::call;
    o->csr_spmm = guarded<gsb__cuda_csr_spmm>::call;
    o->vec_normalize = guarded<gsb__cuda_vec_normalize>::call;
    o->topk_fast = guarded<gsb__cuda_topk_fast>::call;
    o->seg_dots = guarded<gsb__cuda_seg_dots>::call;
    o->seg_combine = guarded<gsb__cuda_seg_combine>::call;
    o->seg_normalize = guarded<gsb__cuda_seg_normalize>::call;
    o->rand_normal = guarded<gsb__cuda_rand_normal>::call;
    o->host_register = cuda_host_register;
    o->host_unregister = cuda_host_unregister;
    o->nonfinite = guarded<gsb__cuda_nonfinite>::call;
    o->mem_info = guarded<gsb__cuda_mem_info>::call; /* on the backend's device */
    o->device_import = guarded<gsb__cuda_device_import>::call;
    o->device_export = guarded<gsb__cuda_device_export>::call;
    o->copy_stats = gsb__cuda_copy_stats; /* atomic counters: no op lock */
    o->sync = guarded<gsb__cuda_sync>::call;
}

/* devices[0..n) in ascending order into out (n small: insertion sort) */
static void ascending(const int *devices, int n, int *out)
{
    for (int i = 0; i < n; i++) {
        int v = devices[i], j = i;
        for (; j > 0 && out[j - 1] > v; j--)
            out[j] = out[j - 1];
        out[j] = v;
    }
}

extern "C" void gsb__cuda_lock_devices(const int *devices, int n)
{
    int order[GSB__CUDA_MAX_DEVICES];
    n = n < GSB__CUDA_MAX_DEVICES ? n : GSB__CUDA_MAX_DEVICES;
    ascending(devices, n, order);
    for (int i = 0; i < n; i++)
        pthread_mutex_lock(&states[order[i]].lock);
}

extern "C" void gsb__cuda_unlock_devices(const int *devices, int n)
{
    n = n < GSB__CUDA_MAX_DEVICES ? n : GSB__CUDA_MAX_DEVICES;
    for (int i = 0; i < n; i++)
        pthread_mutex_unlock(&states[devices[i]].lock);
}

/* The plugin's locks and host API, made by the first open (open_mu held). */
static int open_common_locked(const gsb__host_api *host, char *why, size_t why_len)
{
    if (!host || host->abi != GSB__BACKEND_ABI || !host->err) {
        say(why, why_len, "the CUDA backend speaks plugin ABI %d, libgsb offered %d",
            GSB__BACKEND_ABI, host ? host->abi : -1);
        return GSB_EUNSUPPORTED;
    }
    if (locks_made)
        return GSB_OK;
    host_copy = *host;
    gsb__cuda_host = &host_copy;
    pthread_mutexattr_t attr;
    if (pthread_mutexattr_init(&attr) != 0)
        goto fail;
    if (pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE) != 0) {
        pthread_mutexattr_destroy(&attr);
        goto fail;
    }
    for (int d = 0; d < GSB__CUDA_MAX_DEVICES; d++)
        if (pthread_mutex_init(&states[d].lock, &attr) != 0) {
            for (int j = 0; j < d; j++)
                pthread_mutex_destroy(&states[j].lock);
            pthread_mutexattr_destroy(&attr);
            goto fail;
        }
    pthread_mutexattr_destroy(&attr);
    locks_made = 1;
    return GSB_OK;
fail:
    say(why, why_len, "cannot create the CUDA backend's locks");
    return GSB_EBACKEND;
}

static int open_common(const gsb__host_api *host, char *why, size_t why_len)
{
    pthread_mutex_lock(&open_mu);
    int rc = open_common_locked(host, why, why_len);
    pthread_mutex_unlock(&open_mu);
    return rc;
}

static int device_count(int *count, char *why, size_t why_len)
{
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e != cudaSuccess || *count <= 0) {
        say(why, why_len, "no CUDA device: %s",
            e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
        (void)cudaGetLastError();
        *count = 0;
        return GSB_EUNSUPPORTED;
    }
    if (*count > GSB__CUDA_MAX_DEVICES)
        *count = GSB__CUDA_MAX_DEVICES;
    return GSB_OK;
}

/* Device `device`'s backend, opened on first use (under open_mu, then its op lock). */
static int open_state(int device, const gsb__backend **out, char *why, size_t why_len)
{
    cuda_state *g = &states[device];
    pthread_mutex_lock(&open_mu);
    pthread_mutex_lock(&g->lock);
    int rc = GSB_OK;
    if (!g->opened) {
        memset(&g->ctx, 0, sizeof g->ctx);
        g->ctx.device = device;
        rc = open_device(g, why, why_len);
        if (rc != GSB_OK) {
            close_partial(g);
        } else {
            bind_ops(&g->ops);
            g->be.name = "cuda";
            g->be.ops = &g->ops;
            g->be.ctx = &g->ctx;
            g->be.device = g->ctx.name;
            g->opened = 1;
        }
    }
    pthread_mutex_unlock(&g->lock);
    pthread_mutex_unlock(&open_mu);
    if (rc == GSB_OK)
        *out = &g->be;
    return rc;
}

extern "C" __attribute__((visibility("default"))) int
gsb_backend_open(const gsb__host_api *host, const gsb__backend **out, char *why, size_t why_len)
{
    if (!out) {
        say(why, why_len, "gsb_backend_open: no output");
        return GSB_EUNSUPPORTED;
    }
    *out = NULL;
    PASS(open_common(host, why, why_len));
    pthread_mutex_lock(&open_mu);
    cuda_state *opened = primary;
    pthread_mutex_unlock(&open_mu);
    if (opened) { /* the loader opens once; a second open gets the same backend */
        *out = &opened->be;
        return GSB_OK;
    }
    int count, device;
    PASS(device_count(&count, why, why_len));
    PASS(pick_device(count, &device, why, why_len));
    PASS(open_state(device, out, why, why_len));
    pthread_mutex_lock(&open_mu);
    primary = &states[device];
    pthread_mutex_unlock(&open_mu);
    return GSB_OK;
}

/* Device `ordinal`'s backend, for multi-device sessions (backend.h). */
extern "C" __attribute__((visibility("default"))) int
gsb_backend_open_device(const gsb__host_api *host, int ordinal, const gsb__backend **out,
                        char *why, size_t why_len)
{
    if (!out) {
        say(why, why_len, "gsb_backend_open_device: no output");
        return GSB_EUNSUPPORTED;
    }
    *out = NULL;
    PASS(open_common(host, why, why_len));
    int count;
    PASS(device_count(&count, why, why_len));
    if (ordinal < 0 || ordinal >= count) {
        say(why, why_len, "no CUDA device %d (this machine has %d)", ordinal, count);
        return GSB_EUNSUPPORTED;
    }
    return open_state(ordinal, out, why, why_len);
}

extern "C" __attribute__((visibility("default"))) int gsb_cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count < GSB__CUDA_MAX_DEVICES ? count : GSB__CUDA_MAX_DEVICES;
}
