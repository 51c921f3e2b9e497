/*
 * cuda_tsne.cu - the GPU's t-SNE ops that need no grid: tsne_attract,
 * tsne_repulse_exact and tsne_update (the FFT repulsion is in
 * cuda_tsne_fft.cu; Barnes-Hut has no GPU version, see backend.h).  Twins:
 * cpu_tsne.c, whose formulas these follow in float32 arithmetic with
 * double sums where many terms add up.
 *
 * tsne_attract: one warp per row of the CSR P, its lanes over the row's
 *   entries; each lane accumulates the force (and, when asked, the row's KL
 *   terms in double), then a shuffle reduction; rows' KL shares go to scratch
 *   and are summed deterministically.
 * tsne_repulse_exact: one thread per point i; the block stages BLOCK points
 *   j at a time in shared memory (the n-body tile pattern); each tile's sum
 *   of w over j != i is taken in float, added to a double total.  The pair
 *   (i, i) stays out of the float sum: its w = 1 would round every other
 *   w_ij to float's resolution at 1 (1.2e-7), which for a point far from
 *   the rest is most of its Z share.  Rows' Z shares are summed
 *   deterministically into zsum.
 * tsne_update: one thread per element, scikit-learn's float32 steps; g^2
 *   goes to scratch for the norm only when asked.
 * Dimensions 1 to 3 are compiled in; more go through a generic path that
 * handles 4 dimensions per pass.  Sums of doubles (gsb__cuda_tsne_sum) use
 * a fixed launch shape, so every op is bitwise repeatable on a given GPU.
 * P's indices are not range-checked here (the estimator builds P; the CPU
 * twin checks them).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_block_sum.cuh"
#include "backend/cuda/cuda_tsne.cuh"

using namespace gsb_tsne;

namespace {

constexpr int SUM_BLOCKS = 256; /* partial sums of gsb__cuda_tsne_sum */
constexpr int CHUNK = 4;        /* dimensions per pass of the generic paths */

/* ---- attraction ----------------------------------------------------------------- */

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

/* D > 0: D dimensions compiled in; D == 0: d at run time, CHUNK per pass */
template <int D>
__global__ void attract_k(const float *__restrict__ Y, int64_t n, int d,
                          const int64_t *__restrict__ ip, const int32_t *__restrict__ ix,
                          const float *__restrict__ val, float scale, int dof,
                          const double *__restrict__ zsum, double floor, float *__restrict__ A,
                          double *__restrict__ klrow)
{
    const int dims = D > 0 ? D : d;
    const int lane = threadIdx.x & 31;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const double inv_z = klrow ? 1.0 / fmax(*zsum, DBL_EPSILON) : 0.0;
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n; i += warps) {
        const float *yi = Y + i * dims;
        const int64_t lo = ip[i], hi = ip[i + 1];
        for (int a0 = 0; a0 < dims; a0 += CHUNK) {
            float f[CHUNK] = {0.0f, 0.0f, 0.0f, 0.0f};
            double kl = 0.0;
            for (int64_t k = lo + lane; k < hi; k += 32) {
                const float *yj = Y + (int64_t)ix[k] * dims;
                float d2 = 0.0f;
                for (int a = 0; a < dims; a++) {
                    float t = yi[a] - yj[a];
                    d2 += t * t;
                }
                float w = student_w(d2, dof), p = scale * val[k], pw = p * w;
#pragma unroll
                for (int c = 0; c < CHUNK; c++)
                    if (a0 + c < dims)
                        f[c] += pw * (yi[a0 + c] - yj[a0 + c]);
                if (klrow && a0 == 0)
                    kl += (double)p * log(fmax((double)p, floor) / fmax((double)w * inv_z, floor));
            }
#pragma unroll
            for (int c = 0; c < CHUNK; c++)
                f[c] = warp_sum(f[c]);
            if (klrow && a0 == 0)
                kl = warp_sum(kl);
            if (lane == 0) {
                for (int c = 0; c < CHUNK && a0 + c < dims; c++)
                    A[i * dims + a0 + c] = f[c];
                if (klrow && a0 == 0)
                    klrow[i] = kl;
            }
        }
    }
}

/* ---- exact repulsion -------------------------------------------------------------- */

/* one thread per point, points j staged BLOCK at a time in shared memory */
template <int D>
__global__ void exact_k(const float *__restrict__ Y, int64_t n, int dof, float *__restrict__ R,
                        double *__restrict__ zrow)
{
    __shared__ float tile[BLOCK * D];
    const int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x;
    const bool live = i < n;
    float yi[D], f[D];
#pragma unroll
    for (int a = 0; a < D; a++) {
        yi[a] = live ? Y[i * D + a] : 0.0f;
        f[a] = 0.0f;
    }
    double z = 0.0;
    for (int64_t j0 = 0; j0 < n; j0 += BLOCK) {
        const int64_t j = j0 + threadIdx.x;
        __syncthreads(); /* the previous tile is consumed */
        if (j < n) {
#pragma unroll
            for (int a = 0; a < D; a++)
                tile[threadIdx.x * D + a] = Y[j * D + a];
        }
        __syncthreads();
        const int count = n - j0 < BLOCK ? (int)(n - j0) : BLOCK;
        const int64_t self = i - j0; /* the tile's place of i, if it holds i */
        float zt = 0.0f;
        for (int t = 0; t < count; t++) {
            float diff[D], d2 = 0.0f;
#pragma unroll
            for (int a = 0; a < D; a++) {
                diff[a] = yi[a] - tile[t * D + a];
                d2 += diff[a] * diff[a];
            }
            float w = student_w(d2, dof);
            zt += t != self ? w : 0.0f;
#pragma unroll
            for (int a = 0; a < D; a++)
                f[a] += w * w * diff[a];
        }
        z += (double)zt;
    }
    if (live) {
#pragma unroll
        for (int a = 0; a < D; a++)
            R[i * D + a] = f[a];
        zrow[i] = z;
    }
}

/* more than 3 dimensions: CHUNK of them per pass, Y read through the cache */
__global__ void exact_generic_k(const float *__restrict__ Y, int64_t n, int d, int dof,
                                float *__restrict__ R, double *__restrict__ zrow)
{
    for (int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        const float *yi = Y + i * d;
        for (int a0 = 0; a0 < d; a0 += CHUNK) {
            float f[CHUNK] = {0.0f, 0.0f, 0.0f, 0.0f};
            double z = 0.0;
            for (int64_t j = 0; j < n; j++) {
                const float *yj = Y + j * d;
                float d2 = 0.0f;
                for (int a = 0; a < d; a++) {
                    float t = yi[a] - yj[a];
                    d2 += t * t;
                }
                float w = student_w(d2, dof);
                z += (double)w;
#pragma unroll
                for (int c = 0; c < CHUNK; c++)
                    if (a0 + c < d)
                        f[c] += w * w * (yi[a0 + c] - yj[a0 + c]);
            }
            for (int c = 0; c < CHUNK && a0 + c < d; c++)
                R[i * d + a0 + c] = f[c];
            if (a0 == 0)
                zrow[i] = z - 1.0;
        }
    }
}

/* ---- the gradient-descent step ------------------------------------------------------ */

__global__ void update_k(float *__restrict__ Y, const float *__restrict__ A,
                         const float *__restrict__ R, const double *__restrict__ zsum,
                         float c, float mom, float lr, float gmin, float *__restrict__ U,
                         float *__restrict__ G, int64_t count, double *__restrict__ g2)
{
    const float inv_z = (float)(1.0 / fmax(*zsum, DBL_EPSILON));
    for (int64_t e = (int64_t)blockIdx.x * BLOCK + threadIdx.x; e < count;
         e += (int64_t)gridDim.x * BLOCK) {
        float grad = c * (A[e] - R[e] * inv_z);
        float gain = U[e] * grad < 0.0f ? G[e] + 0.2f : G[e] * 0.8f;
        gain = gain < gmin ? gmin : gain;
        G[e] = gain;
        grad *= gain;
        float u = mom * U[e] - lr * grad;
        U[e] = u;
        Y[e] += u;
        if (g2)
            g2[e] = (double)grad * (double)grad;
    }
}

int download_double(const gsb__backend *be, const double *dev, double *host)
{
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    CUDA_TRY(cudaMemcpyAsync(host, dev, sizeof *host, cudaMemcpyDeviceToHost, s));
    CUDA_TRY(cudaStreamSynchronize(s));
    return GSB_OK;
}

} // namespace

int gsb__cuda_tsne_sum(const gsb__backend *be, const double *v, int64_t n,
                       double *out)
{
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    double *part = NULL;
    int rc;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, SUM_BLOCKS * sizeof(double), (void **)&part));
    gsb__block_sums_kernel<BLOCK><<<SUM_BLOCKS, BLOCK, 0, s>>>(v, n, part);
    CUDA_CHECK(cudaGetLastError());
    gsb__block_sums_kernel<BLOCK><<<1, BLOCK, 0, s>>>(part, SUM_BLOCKS, out);
    CUDA_CHECK(cudaGetLastError());
done:
    gsb__cuda_free(be, part);
    return rc;
}

extern "C" int gsb__cuda_tsne_attract(const gsb__backend *be, const gsb__tensor *Y,
                                      const gsb__tensor *indptr, const gsb__tensor *indices,
                                      const gsb__tensor *val, double scale, int dof,
                                      const gsb__tensor *zsum, double floor, gsb__tensor *A,
                                      double *kl)
{
    const char *op = "tsne_attract";
    int rc = check(be, Y, GSB_F32, -1, -1, op, "Y");
    if (rc == GSB_OK && dof < 1)
        rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: dof %d < 1", op, dof);
    if (rc == GSB_OK)
        rc = check(be, A, GSB_F32, Y->rows, Y->cols, op, "A");
    if (rc == GSB_OK)
        rc = check(be, indptr, GSB_I64, Y->rows + 1, -2, op, "indptr");
    if (rc == GSB_OK)
        rc = check(be, indices, GSB_I32, indices ? indices->rows * indices->cols : 0, -2, op,
                   "indices");
    if (rc == GSB_OK)
        rc = check(be, val, GSB_F32, indices->rows * indices->cols, -2, op, "val");
    if (rc == GSB_OK && kl)
        rc = check(be, zsum, GSB_F64, 1, 1, op, "zsum");
    if (rc != GSB_OK)
        return rc;
    const int64_t n = Y->rows;
    const int d = (int)Y->cols;
    if (n == 0) {
        if (kl)
            *kl = 0.0;
        return GSB_OK;
    }
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    double *klrow = NULL, *total = NULL;
    if (kl) {
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(n + 1) * sizeof(double), (void **)&klrow));
        total = klrow + n;
    }
    {
        const unsigned grid = blocks_for(n * 32);
        const float *y = (const float *)Y->data;
        const int64_t *ipp = (const int64_t *)indptr->data;
        const int32_t *ixp = (const int32_t *)indices->data;
        const float *vp = (const float *)val->data;
        const double *zp = kl ? (const double *)zsum->data : NULL;
        float *ap = (float *)A->data;
        const float sc = (float)scale;
#define ATTRACT(D) \
    attract_k<D><<<grid, BLOCK, 0, s>>>(y, n, d, ipp, ixp, vp, sc, dof, zp, floor, ap, klrow)
        switch (d) {
        case 1: ATTRACT(1); break;
        case 2: ATTRACT(2); break;
        case 3: ATTRACT(3); break;
        default: ATTRACT(0); break;
        }
#undef ATTRACT
        CUDA_CHECK(cudaGetLastError());
    }
    if (kl) {
        GSB_CUDA_CHECK(gsb__cuda_tsne_sum(be, klrow, n, total));
        GSB_CUDA_CHECK(download_double(be, total, kl));
    }
done:
    gsb__cuda_free(be, klrow);
    return rc;
}

extern "C" int gsb__cuda_tsne_repulse_exact(const gsb__backend *be, const gsb__tensor *Y, int dof,
                                            gsb__tensor *R, gsb__tensor *zsum)
{
    int rc = check_repulse(be, Y, dof, R, zsum, "tsne_repulse_exact");
    if (rc != GSB_OK)
        return rc;
    const int64_t n = Y->rows;
    const int d = (int)Y->cols;
    if (d <= 3 && n > MAX_BLOCKS * BLOCK) /* the tiled kernels take one thread per point */
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "tsne_repulse_exact: %lld points (at most %lld)",
                            (long long)n, (long long)(MAX_BLOCKS * BLOCK));
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    double *zrow = NULL;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)n * sizeof(double), (void **)&zrow));
    {
        const float *y = (const float *)Y->data;
        float *r = (float *)R->data;
        const unsigned grid = blocks_for(n);
        switch (d) {
        case 1: exact_k<1><<<grid, BLOCK, 0, s>>>(y, n, dof, r, zrow); break;
        case 2: exact_k<2><<<grid, BLOCK, 0, s>>>(y, n, dof, r, zrow); break;
        case 3: exact_k<3><<<grid, BLOCK, 0, s>>>(y, n, dof, r, zrow); break;
        default: exact_generic_k<<<grid, BLOCK, 0, s>>>(y, n, d, dof, r, zrow); break;
        }
        CUDA_CHECK(cudaGetLastError());
    }
    GSB_CUDA_CHECK(gsb__cuda_tsne_sum(be, zrow, n, (double *)zsum->data));
done:
    gsb__cuda_free(be, zrow);
    return rc;
}

extern "C" int gsb__cuda_tsne_update(const gsb__backend *be, gsb__tensor *Y, const gsb__tensor *A,
                                     const gsb__tensor *R, const gsb__tensor *zsum, double c,
                                     double momentum, double learning_rate, double min_gain,
                                     gsb__tensor *update, gsb__tensor *gains, double *grad_norm)
{
    const char *op = "tsne_update";
    int rc = check(be, Y, GSB_F32, -1, -1, op, "Y");
    if (rc == GSB_OK)
        rc = check(be, A, GSB_F32, Y->rows, Y->cols, op, "A");
    if (rc == GSB_OK)
        rc = check(be, R, GSB_F32, Y->rows, Y->cols, op, "R");
    if (rc == GSB_OK)
        rc = check(be, update, GSB_F32, Y->rows, Y->cols, op, "update");
    if (rc == GSB_OK)
        rc = check(be, gains, GSB_F32, Y->rows, Y->cols, op, "gains");
    if (rc == GSB_OK)
        rc = check(be, zsum, GSB_F64, 1, 1, op, "zsum");
    if (rc != GSB_OK)
        return rc;
    const int64_t count = Y->rows * Y->cols;
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    double *g2 = NULL, *total = NULL;
    if (grad_norm) {
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(count + 1) * sizeof(double), (void **)&g2));
        total = g2 + count;
    }
    if (count > 0) {
        update_k<<<blocks_for(count), BLOCK, 0, s>>>(
            (float *)Y->data, (const float *)A->data, (const float *)R->data,
            (const double *)zsum->data, (float)c, (float)momentum, (float)learning_rate,
            (float)min_gain, (float *)update->data, (float *)gains->data, count, g2);
        CUDA_CHECK(cudaGetLastError());
    }
    if (grad_norm) {
        double sq = 0.0;
        GSB_CUDA_CHECK(gsb__cuda_tsne_sum(be, g2, count, total));
        GSB_CUDA_CHECK(download_double(be, total, &sq));
        *grad_norm = sqrt(sq);
    }
done:
    gsb__cuda_free(be, g2);
    return rc;
}
