/*
 * cuda_common.h - what every file of the CUDA backend shares: the backend's
 * state, the host API handed over at load, and turning CUDA, cuBLAS and
 * cuSOLVER statuses into gsb statuses with a message (out of GPU memory is
 * GSB_ENOMEM and leaves the process usable).
 */
#ifndef GSB_CUDA_COMMON_H
#define GSB_CUDA_COMMON_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "backend/cuda/cuda_ops.h"

/* The backend's state (gsb__backend.ctx). Ops run on `stream`, in order. */
typedef struct gsb__cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    cudaMemPool_t pool;          /* stream-ordered allocations: no cudaMalloc in hot loops */
    int allow_tf32;              /* GSB_ALLOW_TF32=1: the user opted in */
    int fast_fp64;               /* FP64 throughput near FP32's (datacenter parts: compute
                                    capability 6.0, 7.0, 8.0, 9.0, 10.0); unused by the
                                    ops at present (float32 Gram matrices are summed in
                                    chunks on every GPU: cuda_linalg.cu) */
    int sm_count;
    char name[256];              /* "NVIDIA H200, 139 GiB" */
} gsb__cuda_ctx;

/* CUDA device numbers the plugin keeps state for (a backend per device) */
#define GSB__CUDA_MAX_DEVICES 64

#ifdef __cplusplus
extern "C" {
#endif

/* Set by gsb_backend_open: the engine's error setter and CPU backend. */
extern const gsb__host_api *gsb__cuda_host;

static inline gsb__cuda_ctx *gsb__cuda_ctx_of(const gsb__backend *be)
{
    return (gsb__cuda_ctx *)be->ctx;
}

/* Return a failing status (its message already set). */
#define PASS(expr)                                                                  \
    do {                                                                            \
        int pass_rc_ = (expr);                                                      \
        if (pass_rc_ != GSB_OK)                                                     \
            return pass_rc_;                                                        \
    } while (0)

/* A mismatch of an op's argument is a bug in the caller: GSB_EINTERNAL unless t is
 * present, of dtype, rows x cols (-1: any), in be's memory or (host_ok) the host's. */
int gsb__cuda_check_tensor(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype,
                           int64_t rows, int64_t cols, bool host_ok, const char *op,
                           const char *name);

/* Status of a failed call, with "what" (the call's text) in the message. */
int gsb__cuda_fail_rt(cudaError_t e, const char *what, const char *file, int line);
int gsb__cuda_fail_blas(cublasStatus_t s, const char *what, const char *file, int line);
int gsb__cuda_fail_solver(cusolverStatus_t s, const char *what, const char *file, int line);

/* The op locks (recursive, one per device) of the n devices named, taken in
 * ascending device order (so two such callers cannot deadlock): held around
 * work that enqueues on several devices' streams at once (cuda_nccl.cu's
 * collectives).  The op lock of one device is every op's on that device. */
void gsb__cuda_lock_devices(const int *devices, int n);
void gsb__cuda_unlock_devices(const int *devices, int n);

/* Scratch device memory from the pool, in stream order (free with gsb__cuda_free). */
int gsb__cuda_alloc(const gsb__backend *be, size_t bytes, void **out);
void gsb__cuda_free(const gsb__backend *be, void *p);

/*
 * cuda_copy.cu: host <-> device bytes (upload and download's engine) and
 * pinned host ranges.  copy_open pins a device's staging buffers at its open
 * (refused: a log line, and its copies go pageable); h2d returns once the
 * host bytes may be reused, d2h once they have arrived.  Called under the
 * device's op lock, except pin (host_register), which only touches the
 * range table and the driver.
 */
int gsb__cuda_copy_open(int device);
void gsb__cuda_copy_close(int device);
int gsb__cuda_copy_h2d(const gsb__backend *be, void *dst, const void *src, size_t bytes);
int gsb__cuda_copy_d2h(const gsb__backend *be, void *dst, const void *src, size_t bytes);
int gsb__cuda_pin(void *p, size_t n);
void gsb__cuda_unpin(void *p);
/* [p, p + n) is page-locked (registered with host_register, or the driver says so
 * for n >= 1 MiB); a memcpy on be's device's copy threads (its op lock held); the
 * traffic counters of copy_stats (uploads and downloads count themselves;
 * cuda_stream.cu's fills call it) */
int gsb__cuda_host_pinned(const void *p, size_t n);
void gsb__cuda_parallel_copy(const gsb__backend *be, void *dst, const void *src, size_t n);
void gsb__cuda_count_copy(int to_device, size_t bytes);

#ifdef __cplusplus
}
#endif

#define GSB_CUDA_ERR(status, ...) (gsb__cuda_host->err((status), __VA_ARGS__))

#ifdef __cplusplus
/* One scratch allocation cut into pieces aligned to 256 bytes: take() each
 * piece's size in turn for its offset, then allocate bytes once. */
struct gsb__cuda_carve {
    size_t bytes = 0;
    size_t take(size_t n)
    {
        size_t at = bytes;
        bytes += (n + 255) & ~(size_t)255;
        return at;
    }
};
#endif

/* A dtype's name in argument-check messages, the words of the CPU twins'
 * gsb_dtype_name (the plugin calls no libgsb function, see loader.c). */
static inline const char *gsb__cuda_dtype_name(gsb_dtype dt)
{
    switch (dt) {
    case GSB_F32: return "float32";
    case GSB_F64: return "float64";
    case GSB_I32: return "int32";
    case GSB_I64: return "int64";
    }
    return "unknown";
}

#define CUDA_TRY(call)                                                              \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess)                                                      \
            return gsb__cuda_fail_rt(e_, #call, __FILE__, __LINE__);                \
    } while (0)

/* after a kernel launch: launch errors (bad configuration, ...) */
#define CUDA_LAUNCH_CHECK() CUDA_TRY(cudaGetLastError())

#define CUBLAS_TRY(call)                                                            \
    do {                                                                            \
        cublasStatus_t s_ = (call);                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                            \
            return gsb__cuda_fail_blas(s_, #call, __FILE__, __LINE__);              \
    } while (0)

#define CUSOLVER_TRY(call)                                                          \
    do {                                                                            \
        cusolverStatus_t s_ = (call);                                               \
        if (s_ != CUSOLVER_STATUS_SUCCESS)                                          \
            return gsb__cuda_fail_solver(s_, #call, __FILE__, __LINE__);            \
    } while (0)

/* GSB_CHECK-style variants that jump to a cleanup label (rc in scope) */
#define CUDA_CHECK(call)                                                            \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            rc = gsb__cuda_fail_rt(e_, #call, __FILE__, __LINE__);                  \
            goto done;                                                              \
        }                                                                           \
    } while (0)
#define CUBLAS_CHECK(call)                                                          \
    do {                                                                            \
        cublasStatus_t s_ = (call);                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                          \
            rc = gsb__cuda_fail_blas(s_, #call, __FILE__, __LINE__);                \
            goto done;                                                              \
        }                                                                           \
    } while (0)
#define CUSOLVER_CHECK(call)                                                        \
    do {                                                                            \
        cusolverStatus_t s_ = (call);                                               \
        if (s_ != CUSOLVER_STATUS_SUCCESS) {                                        \
            rc = gsb__cuda_fail_solver(s_, #call, __FILE__, __LINE__);              \
            goto done;                                                              \
        }                                                                           \
    } while (0)
#define GSB_CUDA_CHECK(expr)                                                        \
    do {                                                                            \
        rc = (expr);                                                                \
        if (rc != GSB_OK)                                                           \
            goto done;                                                              \
    } while (0)

#endif
