/*
 * cuda_topk_list.cuh - what the two GPU topk paths share (cuda_topk.cu's
 * fused kernel, cuda_topk_gemm.cu's GEMM tiles + selection): the order of
 * (distance, index) entries, a warp's bitonic sort and the binary search its
 * merge uses, and the admission threshold that turns a query's k-th exact
 * distance into a bound on the approximation a GEMM or tile computes.
 */
#ifndef GSB_CUDA_TOPK_LIST_CUH
#define GSB_CUDA_TOPK_LIST_CUH

#include "backend/cuda/cuda_distance_tile.cuh"

namespace gsb_topk {

using gsb_dist::FULL_MASK;
using gsb_dist::num;

__device__ __forceinline__ bool ranks_before(double av, int ai, double bv, int bi)
{
    return av < bv || (av == bv && ai < bi);
}

/* How many of the n sorted entries (v, ix) rank before (x, xi). */
__device__ __forceinline__ int count_before(const double *v, const int *ix, int n, double x,
                                            int xi)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (ranks_before(v[mid], ix[mid], x, xi))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Bitonic sort of one (v, i) per lane, ascending by (v, i) across the warp. */
__device__ __forceinline__ void warp_sort(double &v, int &i, int lane)
{
#pragma unroll
    for (int k = 2; k <= 32; k <<= 1)
#pragma unroll
        for (int j = k >> 1; j > 0; j >>= 1) {
            double ov = __shfl_xor_sync(FULL_MASK, v, j);
            int oi = __shfl_xor_sync(FULL_MASK, i, j);
            bool ascending = (lane & k) == 0, low = (lane & j) == 0;
            bool take = low == ascending ? ranks_before(ov, oi, v, i) : ranks_before(v, i, ov, oi);
            if (take) {
                v = ov;
                i = oi;
            }
        }
}

/*
 * The admission threshold for a query whose k-th exact distance is thr:
 * a candidate is admitted unless its approximation (as the tile computes
 * it) exceeds this.  Rounded up to T so the comparison stays conservative.
 */
template <typename T>
__device__ T admit_threshold(double thr, double qaux, int metric, double slack, int wide)
{
    const T inf = (T)INFINITY;
    if (wide || isinf(thr))
        return inf;
    double x;
    if (metric == GSB__METRIC_COSINE) {
        /* 1 - (q.r) qinv rinv - slack <= thr  <=>  -(q.r) rinv <= (thr + slack - 1) / qinv */
        if (!(qaux > 0.0))
            return thr + slack >= 1.0 ? inf : -inf; /* a zero query: every distance is 1 */
        x = (thr + slack - 1.0) / qaux;
    } else if (metric == GSB__METRIC_MANHATTAN) {
        x = thr * (1.0 + slack);
    } else {
        x = thr - (1.0 - 1.5 * slack) * qaux;
    }
    return num<T>::up(x);
}

/* qaux / raux hold squared norms: turn them (and rb) into what the topk kernels
 * take: cosine: qaux = 1 / ||q||, raux = 1 / ||r||, rb = -1 / ||r||; else rb =
 * (1 - 1.5 slack) ||r||^2 (qaux stays ||q||^2). */
template <typename T>
__global__ void topk_prep_kernel(double *qaux, int64_t nq, double *raux, T *rb, int64_t nr,
                                 int metric, double slack)
{
    int64_t n = nq > nr ? nq : nr;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        if (metric == GSB__METRIC_COSINE) {
            if (i < nq)
                qaux[i] = qaux[i] > 0.0 ? 1.0 / sqrt(qaux[i]) : 0.0;
            if (i < nr) {
                double inv = raux[i] > 0.0 ? 1.0 / sqrt(raux[i]) : 0.0;
                raux[i] = inv;
                rb[i] = (T)(-inv);
            }
        } else if (i < nr) {
            rb[i] = (T)((1.0 - 1.5 * slack) * raux[i]);
        }
    }
}

} // namespace gsb_topk

#endif
