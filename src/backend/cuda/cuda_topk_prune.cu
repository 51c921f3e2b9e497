/*
 * cuda_topk_prune.cu - topk of the euclidean family pruned through TF32:
 * centred float32 copies of the float64 or float32 queries and references
 * for cuda_topk_gemm.cu's TF32 tiles, whose every admitted candidate is then
 * ranked by its exact distance, computed from the inputs as the exact mode
 * computes it (so the result is the exact path's; twin: topk in
 * cpu_distance.c).  Everything below holds for either input type: the
 * centring is done in double from the inputs (a float32 input converts
 * exactly).
 *
 * Why centre: the admission margin is relative to ||q||^2 + ||r||^2, and
 * distances do not change when both sides move by the same vector m; with m
 * the queries' column mean (all on the device before the first tile, while
 * the references may still be arriving) the norms, and so the margin, are
 * small for data away from the origin.  Each centred coordinate fl(x - m) is (x - m)(1 + d) with
 * |d| <= 2^-53, relative to the centred value, so the centred distances are
 * the true ones to a few units of 2^-52 of the centred norms (the exact
 * mode's double terms cover it, and PRUNE's 2^-40 below more than does).
 *
 * The bound, on the centred values q, r.  The admission takes a candidate
 * unless (1 - 1.5 s)(||q||^2 + ||r||^2) - 2 (q.r)~ exceeds the k-th exact
 * distance, so it holds when 2 |(q.r)~ - q.r| <= 1.5 s (||q||^2 + ||r||^2)
 * less the norms' own rounding; |q.r| terms are bounded by sum |q_c r_c| <=
 * (||q||^2 + ||r||^2) / 2.  (q.r)~ differs from q.r by
 *  - the float32 copies: each coordinate rounded to nearest (relative
 *    2^-24), so each product is off by <= 2^-23 + 2^-48 of itself;
 *  - TF32 and the FP32 accumulation: cuda_topk_gemm.cu's TF32 term 2^-9 and
 *    the exact mode's (d + 2) eps terms, kept; the product of the two
 *    relative errors (2^-10 x 2^-23 ...) stays below 2^-20 of the sum;
 *  - coordinates below PRUNE_FLUSH = 2^-60 stored as 0: a product q_c r_c
 *    loses at most 2^-60 |r_c| (or |q_c|), in all <= 2^-60 sqrt(d)
 *    (||q|| + ||r||) <= 2^-58 sqrt(d) M / M^2 (||q||^2 + ||r||^2), with M =
 *    max(||q||, ||r||) >= 2^-20 (the row check): 2^-38 sqrt(d) of the sum;
 *  - underflow: the kept coordinates are within [2^-60, 2^50] (squared norms
 *    <= 2^100), so products are normal floats (>= 2^-120); a partial sum that
 *    cancels below 2^-126 may be flushed, <= d 2^-126 in all, against a sum
 *    >= 2^-41: d 2^-85 of it.
 * PRUNE's slack term adds 2^-20 + 2^-37 sqrt(d) + 2^-40 + d 2^-84: twice the
 * above where it is not already the exact mode's.  Rows whose centred squared
 * norm is nonzero and below 2^-40, or above 2^100, or NaN / infinite (an
 * infinite mean), make the check fail: the caller takes the exact path.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_distance_tile.cuh"
#include "backend/cuda/cuda_topk_prune.h"

using namespace gsb_dist;

namespace {

constexpr double PRUNE_FLUSH = 0x1p-60; /* smaller coordinates are stored as 0 */
constexpr double ROW_MIN = 0x1p-40;     /* least nonzero centred squared norm */
constexpr double ROW_MAX = 0x1p100;     /* largest centred squared norm */
constexpr int SUM_ROWS = 8;             /* row lanes of a column-sum block (x 32 columns) */

/* sum += the column sums of rows [b per, (b + 1) per) of X (n x d); blocks
 * of 32 x SUM_ROWS threads: a warp reads 32 adjacent columns of a row. */
template <typename T>
__global__ void __launch_bounds__(32 * SUM_ROWS)
    col_sum_kernel(const T *__restrict__ X, int64_t n, int64_t d, int64_t per,
                   double *__restrict__ sum)
{
    __shared__ double part[SUM_ROWS][33];
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    const int64_t i0 = (int64_t)blockIdx.x * per;
    const int64_t i1 = i0 + per < n ? i0 + per : n;
    for (int64_t c0 = 0; c0 < d; c0 += 32) {
        const int64_t c = c0 + tx;
        double s = 0.0;
        if (c < d)
            for (int64_t i = i0 + ty; i < i1; i += SUM_ROWS)
                s += (double)X[i * d + c];
        part[ty][tx] = s;
        __syncthreads();
        if (ty == 0 && c < d) {
            for (int r = 1; r < SUM_ROWS; r++)
                s += part[r][tx];
            atomicAdd(&sum[c], s);
        }
        __syncthreads();
    }
}

/* A warp per row of X: the centred row (X - sum / n_sum) as float32 into
 * Xf, its squared norm in double into norm, where rb is not NULL the
 * admission term (1 - 1.5 slack) norm as float (cuda_topk_list.cuh's
 * topk_prep_kernel, euclidean family), and the range check into bad. */
template <typename T>
__global__ void centre_kernel(const T *__restrict__ X, int64_t n, int64_t d,
                              const double *__restrict__ sum, double inv_sum,
                              float *__restrict__ Xf, double *__restrict__ norm,
                              float *__restrict__ rb, double slack, int *bad)
{
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n;
         i += nwarps) {
        double s = 0.0;
        for (int64_t c = lane; c < d; c += 32) {
            double v = (double)X[i * d + c] - sum[c] * inv_sum; /* the same m_c for Q and R */
            Xf[i * d + c] = fabs(v) < PRUNE_FLUSH ? 0.0f : (float)v;
            s += v * v;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            s += __shfl_xor_sync(FULL_MASK, s, off);
        if (lane == 0) {
            norm[i] = s;
            if (rb)
                rb[i] = (float)((1.0 - 1.5 * slack) * s);
            if (!(s <= ROW_MAX) || (s > 0.0 && s < ROW_MIN)) /* NaN fails too */
                atomicOr(bad, 1);
        }
    }
}

template <typename T>
int prune_sums(const gsb__backend *be, const T *X, int64_t n, int64_t d, double *sum)
{
    cudaStream_t ms = gsb__cuda_ctx_of(be)->stream;
    /* at least 256 rows a block (few atomics), at most a few waves */
    int64_t blocks = (n + 255) / 256, cap = grid_for(be, (int64_t)1 << 40, 256);
    if (blocks > cap)
        blocks = cap;
    if (blocks < 1)
        blocks = 1;
    CUDA_TRY(cudaMemsetAsync(sum, 0, (size_t)d * sizeof(double), ms));
    col_sum_kernel<T><<<(unsigned)blocks, 32 * SUM_ROWS, 0, ms>>>(X, n, d,
                                                                  (n + blocks - 1) / blocks, sum);
    CUDA_TRY(cudaGetLastError());
    return GSB_OK;
}

template <typename T>
int prune_rows(const gsb__backend *be, const T *X, int64_t n, int64_t d, const double *sum,
               int64_t n_sum, float *xf, double *norm, float *rb, double slack, int *bad)
{
    if (n == 0)
        return GSB_OK;
    centre_kernel<T><<<grid_for(be, n * 32, 256), 256, 0, gsb__cuda_ctx_of(be)->stream>>>(
        X, n, d, sum, 1.0 / (double)n_sum, xf, norm, rb, slack, bad);
    CUDA_TRY(cudaGetLastError());
    return GSB_OK;
}

} // namespace

int gsb__cuda_topk_prune_applies(gsb__metric metric, gsb_dtype dt)
{
    const char *mode = getenv(dt == GSB_F32 ? "GSB_TOPK_F32" : "GSB_TOPK_F64");
    if (mode && strcmp(mode, "exact") == 0)
        return 0;
    return metric == GSB__METRIC_SQEUCLIDEAN || metric == GSB__METRIC_EUCLIDEAN;
}

double gsb__cuda_topk_prune_slack(int64_t d)
{
    return 0x1p-20 + 0x1p-37 * sqrt((double)d) + 0x1p-40 + (double)d * 0x1p-84;
}

int gsb__cuda_topk_prune_sums(const gsb__backend *be, const double *X, int64_t n, int64_t d,
                              double *sum)
{
    return prune_sums<double>(be, X, n, d, sum);
}

int gsb__cuda_topk_prune_sums(const gsb__backend *be, const float *X, int64_t n, int64_t d,
                              double *sum)
{
    return prune_sums<float>(be, X, n, d, sum);
}

int gsb__cuda_topk_prune_rows(const gsb__backend *be, const double *X, int64_t n, int64_t d,
                              const double *sum, int64_t n_sum, float *xf, double *norm,
                              float *rb, double slack, int *bad)
{
    return prune_rows<double>(be, X, n, d, sum, n_sum, xf, norm, rb, slack, bad);
}

int gsb__cuda_topk_prune_rows(const gsb__backend *be, const float *X, int64_t n, int64_t d,
                              const double *sum, int64_t n_sum, float *xf, double *norm,
                              float *rb, double slack, int *bad)
{
    return prune_rows<float>(be, X, n, d, sum, n_sum, xf, norm, rb, slack, bad);
}
