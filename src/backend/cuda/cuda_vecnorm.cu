/*
 * cuda_vecnorm.cu - the CUDA backend's vec_normalize (twin: cpu_vecnorm.c):
 * y = x / |x| and |x| written to device memory, so Lanczos's steps queue
 * without a host wait.
 *
 * Two kernels: up to MAX_PARTS blocks each sum their grid-stride share of
 * the squares (in double, a fixed tree in shared memory) into a partial;
 * then every block of the second kernel adds the partials in the same fixed
 * order (so all see the same |x|, and results repeat bitwise), scales its
 * share of the elements, and block 0 writes |x|.  The partials live in the
 * backend's stream-ordered pool for the length of the call.
 */
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_block_sum.cuh"
#include "backend/cuda/cuda_common.h"

namespace {

constexpr int BLOCK = 256;
constexpr int64_t MAX_PARTS = BLOCK; /* one partial per thread of the second kernel */

template <typename T>
__global__ void partial_sqsums(const T *__restrict__ x, int64_t n, double *__restrict__ part)
{
    __shared__ double sh[BLOCK];
    double s = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK)
        s += (double)x[i] * (double)x[i];
    double total = gsb__block_sum<BLOCK>(s, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = total;
}

template <typename T>
__global__ void scale_by_norm(const T *x, int64_t n, const double *__restrict__ part,
                              int nparts, T *y, double *__restrict__ nrm_out)
{
    __shared__ double sh[BLOCK];
    double mine = (int)threadIdx.x < nparts ? part[threadIdx.x] : 0.0;
    double total = gsb__block_sum<BLOCK>(mine, sh);
    const double nrm = sqrt(total), inv = nrm > 0.0 ? 1.0 / nrm : 0.0;
    for (int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK)
        y[i] = (T)(inv * (double)x[i]);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *nrm_out = nrm;
}

/* t: on this GPU, dtype (0: a float dtype), n elements (-1: any) */
int check(const gsb__backend *be, const char *name, const gsb__tensor *t, gsb_dtype dtype,
          int64_t n)
{
    if (!t || !t->data)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "vec_normalize: %s is missing", name);
    if (dtype ? t->dtype != dtype : (t->dtype != GSB_F32 && t->dtype != GSB_F64))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "vec_normalize: %s has dtype %s", name,
                            gsb__cuda_dtype_name(t->dtype));
    if (t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "vec_normalize: %s is not in this GPU's memory",
                            name);
    if (n >= 0 && t->rows * t->cols != n)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "vec_normalize: %s has %lld elements, expected %lld",
                            name, (long long)(t->rows * t->cols), (long long)n);
    return GSB_OK;
}

template <typename T>
int launch(const gsb__backend *be, const T *x, int64_t n, T *y, double *nrm)
{
    cudaStream_t st = gsb__cuda_ctx_of(be)->stream;
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    blocks = blocks > MAX_PARTS ? MAX_PARTS : (blocks < 1 ? 1 : blocks);
    double *part = NULL;
    int rc = gsb__cuda_alloc(be, (size_t)blocks * sizeof(double), (void **)&part);
    if (rc != GSB_OK)
        return rc;
    partial_sqsums<T><<<(unsigned)blocks, BLOCK, 0, st>>>(x, n, part);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) {
        scale_by_norm<T><<<(unsigned)blocks, BLOCK, 0, st>>>(x, n, part, (int)blocks, y, nrm);
        e = cudaGetLastError();
    }
    gsb__cuda_free(be, part); /* stream-ordered: after the kernels */
    return e == cudaSuccess ? GSB_OK
                            : gsb__cuda_fail_rt(e, "vec_normalize kernels", __FILE__, __LINE__);
}

} // namespace

extern "C" int gsb__cuda_vec_normalize(const gsb__backend *be, const gsb__tensor *x,
                                       gsb__tensor *y, gsb__tensor *nrm)
{
    int rc = check(be, "x", x, (gsb_dtype)0, -1);
    const int64_t n = rc == GSB_OK ? x->rows * x->cols : 0;
    if (rc == GSB_OK)
        rc = check(be, "y", y, x->dtype, n);
    if (rc == GSB_OK)
        rc = check(be, "nrm", nrm, GSB_F64, 1);
    if (rc != GSB_OK)
        return rc;
    if (x->dtype == GSB_F32)
        return launch<float>(be, (const float *)x->data, n, (float *)y->data,
                             (double *)nrm->data);
    return launch<double>(be, (const double *)x->data, n, (double *)y->data,
                          (double *)nrm->data);
}
