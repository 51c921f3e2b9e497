/*
 * cuda_argmin_rows.cuh - the KMeans assignment of one block of rows, as
 * argmin_sqdist (cuda_distance.cu) and the fused KMeans step
 * (cuda_kmeans_step.cu) both run it: a block of C::BM rows of X sweeps
 * every centre through the tile engine (cuda_distance_tile.cuh), ranks
 * centres by ||c||^2 - 2 x.c (||x||^2 is the same for every centre), keeps
 * each row's running (min, argmin) in registers, combines the TX threads of
 * a row with warp shuffles (ties to the smaller index, as the CPU twin's
 * strict scan), then recomputes the winner's squared distance directly,
 * sum (x - c)^2 in double, as the CPU twin does: inertia then does not carry
 * the expansion's cancellation, and a row equal to its centre has distance
 * exactly 0.
 */
#ifndef GSB_CUDA_ARGMIN_ROWS_CUH
#define GSB_CUDA_ARGMIN_ROWS_CUH

#include "backend/cuda/cuda_distance_tile.cuh"

namespace gsb_dist {

/* (av, aj) ranks before (bv, bj): closer, or as close with a smaller index;
 * j < 0 is "no candidate yet" and ranks last. */
template <typename T>
__device__ __forceinline__ bool argmin_before(T av, int aj, T bv, int bj)
{
    if (aj < 0)
        return false;
    if (bj < 0)
        return true;
    return av < bv || (av == bv && aj < bj);
}

/*
 * Rows [r0, r0 + C::BM) of X (n x d) against the k centres Cc (cn: their
 * ||c||^2 in T).  pipe holds the first slice of this block (tile_prefetch
 * or the previous call); with has_next, the first slice of the row block at
 * r0n is fetched into it during the last step.  On return every one of the
 * TX threads of the thread's i-th row (tile row C::row(ty, i)) holds its
 * label in bj[i] (-1 past n) and its exact squared distance in s[i]; the
 * thread with tx == 0 has stored them in labels and mind (as T).  Every
 * thread of the block must call it (it synchronises the block).
 */
template <class C, typename T>
__device__ __forceinline__ void
argmin_rows(typename C::smem &sm, tile_pipe<C> &pipe, const T *__restrict__ X, int64_t n,
            int64_t r0, const T *__restrict__ Cc, int64_t k, int64_t d,
            const T *__restrict__ cn, bool has_next, int64_t r0n, int tid, int tx, int ty,
            int32_t *__restrict__ labels, T *__restrict__ mind, int (&bj)[C::TM],
            double (&s)[C::TM])
{
    const T inf = (T)INFINITY;
    T bv[C::TM];
#pragma unroll
    for (int i = 0; i < C::TM; i++) {
        bv[i] = inf;
        bj[i] = -1;
    }
    for (int64_t c0 = 0; c0 < k; c0 += C::BN) {
        /* next: this row block's next centres, else the next row block's first */
        bool more_c = c0 + C::BN < k;
        T acc[C::TM][C::TN];
        tile_accumulate<OP_DOT, C>(sm, pipe, X, n, r0, Cc, k, c0, d, more_c || has_next,
                                   more_c ? r0 : r0n, more_c ? c0 + C::BN : 0, tid, tx, ty, acc);
        /* columns in increasing order, so a strict < keeps the smaller index */
#pragma unroll
        for (int j = 0; j < C::TN; j++) {
            int64_t c = c0 + C::col(tx, j);
            if (c >= k)
                continue;
            T cnj = cn[c];
#pragma unroll
            for (int i = 0; i < C::TM; i++) {
                T v = fma(T(-2), acc[i][j], cnj);
                v = isnan(v) ? inf : v; /* overflowed inputs: still a valid label */
                if (bj[i] < 0 || v < bv[i]) {
                    bv[i] = v;
                    bj[i] = (int)c;
                }
            }
        }
    }
    /* the TX threads of a row are TX consecutive lanes: a butterfly
     * leaves every one of them with the row's winner */
#pragma unroll
    for (int i = 0; i < C::TM; i++)
#pragma unroll
        for (int off = C::TX / 2; off > 0; off >>= 1) {
            T ov = __shfl_xor_sync(FULL_MASK, bv[i], off);
            int oj = __shfl_xor_sync(FULL_MASK, bj[i], off);
            if (argmin_before(ov, oj, bv[i], bj[i])) {
                bv[i] = ov;
                bj[i] = oj;
            }
        }
    /* the winners' exact distances: the TX threads of a row split its
     * columns, all TM rows at once so their loads are in flight together */
    const T *xr[C::TM], *cr[C::TM];
#pragma unroll
    for (int i = 0; i < C::TM; i++) {
        int64_t r = r0 + C::row(ty, i);
        bool ok = r < n && bj[i] >= 0;
        if (r >= n)
            bj[i] = -1;
        xr[i] = ok ? X + r * d : NULL;
        cr[i] = ok ? Cc + (int64_t)bj[i] * d : NULL;
        s[i] = 0.0;
    }
    for (int64_t q = tx; q < d; q += C::TX)
#pragma unroll
        for (int i = 0; i < C::TM; i++)
            if (xr[i]) {
                double t = (double)xr[i][q] - (double)cr[i][q];
                s[i] += t * t;
            }
#pragma unroll
    for (int i = 0; i < C::TM; i++) {
#pragma unroll
        for (int off = C::TX / 2; off > 0; off >>= 1)
            s[i] += __shfl_xor_sync(FULL_MASK, s[i], off);
        int64_t r = r0 + C::row(ty, i);
        if (tx == 0 && r < n) {
            labels[r] = bj[i];
            mind[r] = (T)s[i];
        }
    }
}

/* A tile shape as a value, for argmin_with_cfg's callbacks. */
template <class C>
struct cfg_tag {
    typedef C type;
};

/*
 * f(cfg_tag<C>()) with the tile shape C that argmin uses for k centres of
 * T: the centre tile follows k, so few centres do not pay for a 128-wide
 * tile; float64 stops at 4 x 4 per thread (more doubles would spill
 * registers).
 */
template <typename T, class F>
int argmin_with_cfg(int64_t k, F &&f)
{
    if (k <= 32)
        return f(cfg_tag<tile_cfg<T, 128, 32, 8, 4, 4>>());
    if constexpr (sizeof(T) == 8)
        return f(cfg_tag<tile_cfg<T, 64, 64, 8, 4, 4>>());
    else if (k <= 64)
        return f(cfg_tag<tile_cfg<T, 128, 64, 8, 8, 4>>());
    else
        return f(cfg_tag<tile_cfg<T, 128, 128, 8, 8, 8>>());
}

} // namespace gsb_dist

#endif
