/*
 * cuda_devarray.cu - callers' device memory (gsb.h's gsb_device_array):
 * device_import checks that a range is memory this backend's GPU may read
 * and orders the backend's stream after the caller's; device_export orders
 * the caller's stream after the backend's work.  No CPU twin: the CPU
 * backend has no device memory (the engine refuses device arrays there).
 *
 * The check asks the driver (cudaPointerGetAttributes) about the first and
 * the last byte: memory of the backend's device or managed memory passes;
 * another device's memory, page-locked host memory and addresses CUDA does
 * not know fail with a message saying which.  Pointers from other CUDA
 * runtimes in the process (CuPy, PyTorch, Numba link their own) are the
 * same driver's, so the answer holds for them too.
 *
 * The ordering is an event recorded on one stream and waited for by the
 * other (cudaStreamWaitEvent), so neither the host nor unrelated work
 * waits.  The caller's stream may be a handle or one of gsb.h's
 * GSB_STREAM_* values: NULL and GSB_STREAM_LEGACY are the legacy default
 * stream, GSB_STREAM_PER_THREAD the calling thread's default stream (both
 * the driver's, whichever runtime the caller uses), GSB_STREAM_NONE no
 * ordering at all.
 */
#include <stdint.h>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* one event per device (an event is recorded on its own device's streams),
 * recorded and waited for at once under that device's op lock */
cudaEvent_t order_event[GSB__CUDA_MAX_DEVICES];

bool no_ordering(void *stream) { return stream == (void *)(intptr_t)-1; }

cudaStream_t caller_stream(void *stream)
{
    if (stream == nullptr || stream == (void *)1)
        return cudaStreamLegacy;
    if (stream == (void *)2)
        return cudaStreamPerThread;
    return (cudaStream_t)stream;
}

/* `after` waits (on the GPU) for the work queued so far on `before` (device's) */
int order(int device, cudaStream_t before, cudaStream_t after)
{
    cudaEvent_t &ev = order_event[device];
    if (!ev)
        CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_TRY(cudaEventRecord(ev, before));
    CUDA_TRY(cudaStreamWaitEvent(after, ev, 0));
    return GSB_OK;
}

/* what the driver says about the byte at p, as a status with a message */
int check_byte(const void *p, int device, const char *which)
{
    cudaPointerAttributes attr;
    cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return GSB_CUDA_ERR(GSB_EINVAL, "the device array's %s byte (%p) is not memory CUDA "
                            "knows: %s", which, p, cudaGetErrorString(e));
    }
    switch (attr.type) {
    case cudaMemoryTypeDevice:
        if (attr.device != device)
            return GSB_CUDA_ERR(GSB_EINVAL, "the device array's memory (%p) is on CUDA device "
                                "%d, not on device %d that it names and the session computes "
                                "on", p, attr.device, device);
        return GSB_OK;
    case cudaMemoryTypeManaged:
        return GSB_OK;
    case cudaMemoryTypeHost:
        return GSB_CUDA_ERR(GSB_EINVAL, "the device array's memory (%p) is page-locked host "
                            "memory: pass it as a host array (a plain gsb_array)", p);
    default:
        return GSB_CUDA_ERR(GSB_EINVAL, "the device array's %s byte (%p) is not CUDA device "
                            "memory (host memory? pass it as a plain gsb_array)", which, p);
    }
}

} // namespace

extern "C" int gsb__cuda_device_import(const gsb__backend *be, const void *ptr, size_t bytes,
                                       int device_id, void *stream)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    if (device_id >= 0 && device_id != ctx->device) /* < 0: the memory's own device */
        return GSB_CUDA_ERR(GSB_EINVAL, "the device array is on CUDA device %d, but this "
                            "session computes on CUDA device %d (GSB_CUDA_DEVICE picks the "
                            "device; or copy the array there first)", device_id, ctx->device);
    if (bytes > 0) {
        if (!ptr)
            return GSB_CUDA_ERR(GSB_EINVAL, "the device array has no data pointer");
        int rc = check_byte(ptr, ctx->device, "first");
        if (rc == GSB_OK)
            rc = check_byte((const char *)ptr + (bytes - 1), ctx->device, "last");
        if (rc != GSB_OK)
            return rc;
    }
    if (no_ordering(stream))
        return GSB_OK;
    return order(ctx->device, caller_stream(stream), ctx->stream);
}

extern "C" int gsb__cuda_device_export(const gsb__backend *be, void *stream)
{
    if (no_ordering(stream))
        return GSB_OK;
    return order(gsb__cuda_ctx_of(be)->device, gsb__cuda_ctx_of(be)->stream,
                 caller_stream(stream));
}
