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

#include <limits.h>

namespace gsb_topk {

using gsb_dist::FULL_MASK;
using gsb_dist::num;

constexpr int SENTINEL = INT_MAX; /* index of an empty list slot: ranks last */

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

/* From this many columns on, a flush gives each candidate the whole warp
 * (coalesced reads of its row); below, a lane per candidate. */
constexpr int64_t WARP_ROW_D = 256;

/* What a flush sums over the columns: ||q - x||^2, q.x (cosine), |q - x|_1. */
enum { SUM_SQ = 0, SUM_DOT = 1, SUM_L1 = 2 };

template <typename T>
__device__ __forceinline__ double sum_term(T qc, T xc, int kind)
{
    double u = (double)qc, w = (double)xc;
    if (kind == SUM_DOT)
        return u * w;
    double t = u - w;
    return kind == SUM_L1 ? fabs(t) : t * t;
}

/*
 * The exact sums of a flush (all lanes; lane l < n gets candidate l's, of
 * query row q against reference rows R + pidx[l] d), in double, in an order
 * fixed by d alone: equal rows get equal sums whichever flush (of however
 * many candidates) they come in, so exact ties stay ties and go by index,
 * and every path (fused kernel, exact or pruned GEMM tiles) ranks by the
 * same values to the bit.
 */
template <typename T>
__device__ double exact_sums(const T *q, const T *R, const int *pidx, int n, int64_t d, int kind,
                             int lane)
{
    double v = 0.0;
    if (d >= WARP_ROW_D) {
        /* one candidate at a time, the warp across its columns */
        for (int e = 0; e < n; e++) {
            const T *x = R + (int64_t)pidx[e] * d;
            double s = 0.0;
            for (int64_t c = lane; c < d; c += 32)
                s += sum_term<T>(q[c], x[c], kind);
            for (int off = 16; off > 0; off >>= 1)
                s += __shfl_xor_sync(FULL_MASK, s, off);
            if (lane == e)
                v = s;
        }
    } else if (lane < n) {
        /* a lane per candidate: four running sums, then (s0 + s1) + (s2 + s3) */
        const T *x = R + (int64_t)pidx[lane] * d;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        int64_t c = 0;
        for (; c + 4 <= d; c += 4) {
            s0 += sum_term<T>(q[c], x[c], kind);
            s1 += sum_term<T>(q[c + 1], x[c + 1], kind);
            s2 += sum_term<T>(q[c + 2], x[c + 2], kind);
            s3 += sum_term<T>(q[c + 3], x[c + 3], kind);
        }
        for (; c < d; c++)
            s0 += sum_term<T>(q[c], x[c], kind);
        v = (s0 + s1) + (s2 + s3);
    }
    return v;
}

/*
 * A flush's last steps, the same in both paths: lane l holds candidate l's
 * summed dot product (cosine) or distance v, pidx the n (<= 32) candidates'
 * indices.  Finish the cosine (the CPU twin's formula and rounding, unfused:
 * exact ties stay ties), sort the warp, and merge into the sorted list Lv / Li
 * of length len (at most K kept) through the warp's 32 places mv / mi: an
 * entry's new place is its old place plus how many of the other sequence rank
 * before it; list entries only move up, so the top chunk goes first and each
 * chunk is read before it is written.  Returns the new length.
 */
__device__ __forceinline__ int merge_flushed(double v, const int *pidx, int n, bool cosine,
                                             double qaux, const double *raux, double *Lv,
                                             int *Li, int len, int K, double *mv, int *mi,
                                             int lane)
{
    int ci = SENTINEL;
    if (lane < n) {
        ci = pidx[lane];
        if (cosine) {
            v = __dsub_rn(1.0, __dmul_rn(__dmul_rn(v, qaux), raux[ci]));
            v = v < 0.0 ? 0.0 : (v > 2.0 ? 2.0 : v);
        }
    } else {
        v = INFINITY;
    }
    warp_sort(v, ci, lane);
    mv[lane] = v;
    mi[lane] = ci;
    __syncwarp();
    int rl = lane < n ? count_before(Lv, Li, len, v, ci) : 0;
    __syncwarp();
    for (int c = (len + 31) / 32 - 1; c >= 0; c--) {
        int p = c * 32 + lane, dest = -1, xi = 0;
        double xv = 0.0;
        if (p < len) {
            xv = Lv[p];
            xi = Li[p];
            dest = p + count_before(mv, mi, n, xv, xi);
        }
        __syncwarp();
        if (dest >= 0 && dest < K) {
            Lv[dest] = xv;
            Li[dest] = xi;
        }
        __syncwarp();
    }
    if (lane < n && lane + rl < K) {
        Lv[lane + rl] = v;
        Li[lane + rl] = ci;
    }
    __syncwarp();
    return len + n < K ? len + n : K;
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
