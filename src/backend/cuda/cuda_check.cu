/*
 * cuda_check.cu - nonfinite (NaN/inf scan of data already on the GPU: the
 * engine validates data handles and callers' device arrays there instead of
 * scanning on the host), mem_info and sync.  Twins: gsb__host_nonfinite in
 * core/validate.c; mem_info and sync have no CPU meaning.  Also the ops'
 * shared argument check, gsb__cuda_check_tensor (cuda_common.h).
 */
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_ops.h"

int gsb__cuda_check_tensor(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype,
                           int64_t rows, int64_t cols, bool host_ok, const char *op,
                           const char *name)
{
    if (!t || (!t->data && t->rows * t->cols > 0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (t->dtype != dtype)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                            gsb__cuda_dtype_name(t->dtype));
    if (t->be != be && !(host_ok && t->be == gsb__cuda_host->cpu))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    if ((rows >= 0 && t->rows != rows) || (cols >= 0 && t->cols != cols))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has shape (%lld, %lld)", op, name,
                            (long long)t->rows, (long long)t->cols);
    return GSB_OK;
}

namespace {

const int CHECK_BLOCK = 256;

/* flags |= 1 on a NaN, 2 on an infinity; a warp votes before one atomic. */
template <typename T>
__global__ void nonfinite_kernel(const T *x, int64_t count, int *flags)
{
    int mine = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x) {
        T v = x[i];
        if (!isfinite(v))
            mine |= isnan(v) ? 1 : 2;
    }
    for (int off = 16; off; off >>= 1) /* __reduce_or_sync needs sm_80; PTX targets sm_75 */
        mine |= __shfl_xor_sync(0xffffffffu, mine, off);
    if (mine && (threadIdx.x & 31) == 0)
        atomicOr(flags, mine);
}

} // namespace

extern "C" int gsb__cuda_nonfinite(const gsb__backend *be, const gsb__tensor *t, int *out)
{
    *out = 0;
    if (t->dtype != GSB_F32 && t->dtype != GSB_F64)
        return GSB_OK; /* integers are always finite */
    const int64_t count = t->rows * t->cols;
    if (count == 0)
        return GSB_OK;
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    int *flags = NULL;
    int rc = gsb__cuda_alloc(be, sizeof(int), (void **)&flags);
    if (rc != GSB_OK)
        return rc;
    int host = 0;
    int64_t blocks = (count + CHECK_BLOCK - 1) / CHECK_BLOCK;
    unsigned grid = (unsigned)(blocks < 4096 ? blocks : 4096);
    CUDA_CHECK(cudaMemsetAsync(flags, 0, sizeof(int), ctx->stream));
    if (t->dtype == GSB_F32)
        nonfinite_kernel<float><<<grid, CHECK_BLOCK, 0, ctx->stream>>>((const float *)t->data,
                                                                       count, flags);
    else
        nonfinite_kernel<double><<<grid, CHECK_BLOCK, 0, ctx->stream>>>(
            (const double *)t->data, count, flags);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(&host, flags, sizeof(int), cudaMemcpyDeviceToHost, ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    *out = (host & 1) ? 1 : host ? 2 : 0;
done:
    gsb__cuda_free(be, flags);
    return rc;
}

/* The driver's free memory plus what the backend's pool holds unused (it keeps
 * freed blocks for reuse, so they count as used for the driver but are ours to
 * allocate): what a fit can plan with (estimators/common/stream.c). */
extern "C" int gsb__cuda_mem_info(const gsb__backend *be, size_t *free_bytes, size_t *total_bytes)
{
    CUDA_TRY(cudaMemGetInfo(free_bytes, total_bytes));
    cudaMemPool_t pool = gsb__cuda_ctx_of(be)->pool;
    uint64_t reserved = 0, used = 0;
    if (pool &&
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) ==
            cudaSuccess &&
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess &&
        reserved > used)
        *free_bytes += (size_t)(reserved - used);
    (void)cudaGetLastError();
    return GSB_OK;
}

/* The backend's stream drained (the sync op: GSB_PROFILE's phase marks). */
extern "C" int gsb__cuda_sync(const gsb__backend *be)
{
    CUDA_TRY(cudaStreamSynchronize(gsb__cuda_ctx_of(be)->stream));
    return GSB_OK;
}
