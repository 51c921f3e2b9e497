/*
 * cuda_distance.cu - the GPU's pairwise, argmin_sqdist (the KMeans
 * assignment step) and segment_sum (the KMeans centre update); topk is in
 * cuda_topk.cu, the tile engine they share in cuda_distance_tile.cuh.
 * Twins: cpu_distance.c and cpu_family.c.
 *
 * argmin_sqdist is fused: a block takes BM rows of X and sweeps every centre
 * through the tile engine (dot products by fp32/fp64 FMA), ranks centres by
 * ||c||^2 - 2 x.c (||x||^2 is the same for every centre; ||c||^2 is
 * computed once per call) and keeps each row's running (min, argmin) in
 * registers; the TX threads that share a row then combine theirs with warp
 * shuffles (ties to the smaller index, as the CPU twin's strict scan).  No
 * n x k matrix exists.  The winner's squared distance is then recomputed
 * directly, sum (x - c)^2 in double, as the CPU twin does: so inertia does
 * not carry the expansion's cancellation and a row equal to its centre has
 * distance exactly 0.
 *
 * pairwise materialises n x m.  Euclidean distances are summed directly as
 * (x - y)^2 rather than by the expansion: twice the arithmetic of a dot
 * product, but pairwise only serves small m (k-means++ candidates, KMeans
 * transform), and direct sums keep float32 results accurate where the
 * expansion would cancel (the CPU twin gets there by upcasting to double).
 * Cosine uses dot products and inverse norms computed in double.
 *
 * segment_sum is deterministic: results depend only on the shapes, never on
 * scheduling, and it reads X once at close to memory speed.  Each block
 * takes a fixed chunk of rows and one tile of the k x (d + 1) partial sums
 * (the last column the weight totals, the counts), in double in shared
 * memory; every accumulator element is owned by one lane of one warp, which
 * adds its rows in order (no atomics; see segment_tile_kernel), and the
 * chunks' partials are then added in a fixed order.  Labels outside [0, k)
 * are reported like the CPU twin (the first such row), found on the device
 * with an atomic min.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_argmin_tc.h"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_distance_tile.cuh"

using namespace gsb_dist;

namespace {

/* ---- argmin_sqdist -------------------------------------------------------------- */

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
 * Blocks of BM rows of X, grid-stride (the grid holds as many blocks as
 * are resident at once, so each streams many row blocks and fetches the
 * next one's first slice while finishing the current one): labels and
 * exact squared distances of the rows.  cn holds ||c||^2 in T.
 */
template <class C, typename T>
__global__ void __launch_bounds__(C::NT, 2)
    argmin_kernel(const T *__restrict__ X, int64_t n, const T *__restrict__ Cc, int64_t k,
                  int64_t d, const T *__restrict__ cn, int32_t *__restrict__ labels,
                  T *__restrict__ mind)
{
    __shared__ __align__(16) typename C::smem sm;
    const int tid = threadIdx.x, tx = tid % C::TX, ty = tid / C::TX;
    const T inf = (T)INFINITY;
    int64_t nblocks = (n + C::BM - 1) / C::BM;
    tile_pipe<C> pipe;
    if ((int64_t)blockIdx.x < nblocks)
        tile_prefetch(pipe, X, n, (int64_t)blockIdx.x * C::BM, Cc, k, 0, d, tid);
    for (int64_t blk = blockIdx.x; blk < nblocks; blk += gridDim.x) {
        int64_t r0 = blk * C::BM;
        T bv[C::TM];
        int bj[C::TM];
#pragma unroll
        for (int i = 0; i < C::TM; i++) {
            bv[i] = inf;
            bj[i] = -1;
        }
        for (int64_t c0 = 0; c0 < k; c0 += C::BN) {
            /* next: this row block's next centres, else the next row block's first */
            bool more_c = c0 + C::BN < k;
            int64_t nxt = blk + gridDim.x;
            T acc[C::TM][C::TN];
            tile_accumulate<OP_DOT, C>(sm, pipe, X, n, r0, Cc, k, c0, d, more_c || nxt < nblocks,
                                       more_c ? r0 : nxt * C::BM, more_c ? c0 + C::BN : 0, tid,
                                       tx, ty, acc);
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
        double s[C::TM];
#pragma unroll
        for (int i = 0; i < C::TM; i++) {
            int64_t r = r0 + C::row(ty, i);
            bool ok = r < n && bj[i] >= 0;
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
}

template <class C, typename T>
int argmin_launch(const gsb__backend *be, const T *X, int64_t n, const T *Cc, int64_t k,
                  int64_t d, const T *cn, int32_t *labels, T *mind)
{
    int64_t blocks = (n + C::BM - 1) / C::BM;
    int per_sm = 0, sm = gsb__cuda_ctx_of(be)->sm_count;
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, argmin_kernel<C, T>, C::NT,
                                                           0));
    int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * (sm > 0 ? sm : 16);
    if (blocks > resident)
        blocks = resident;
    argmin_kernel<C, T><<<(unsigned)blocks, C::NT, 0, gsb__cuda_ctx_of(be)->stream>>>(
        X, n, Cc, k, d, cn, labels, mind);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* The centre tile follows k, so few centres do not pay for a 128-wide tile. */
template <typename T>
int argmin_run(const gsb__backend *be, const gsb__tensor *Xt, const gsb__tensor *Ct,
               gsb__tensor *labels, gsb__tensor *mind)
{
    const T *X = (const T *)Xt->data, *Cc = (const T *)Ct->data;
    int64_t n = Xt->rows, k = Ct->rows, d = Xt->cols;
    T *cn = NULL;
    int rc = gsb__cuda_alloc(be, (size_t)k * sizeof(T), (void **)&cn);
    if (rc != GSB_OK)
        return rc;
    rc = row_norms<T, T>(be, Cc, k, d, 0, cn, 0.0, NULL);
    if (rc == GSB_OK) {
        int32_t *lab = (int32_t *)labels->data;
        T *md = (T *)mind->data;
        /* float64 stops at 4 x 4 per thread: more doubles would spill registers */
        if (k <= 32)
            rc = argmin_launch<tile_cfg<T, 128, 32, 8, 4, 4>>(be, X, n, Cc, k, d, cn, lab, md);
        else if constexpr (sizeof(T) == 8)
            rc = argmin_launch<tile_cfg<T, 64, 64, 8, 4, 4>>(be, X, n, Cc, k, d, cn, lab, md);
        else if (k <= 64)
            rc = argmin_launch<tile_cfg<T, 128, 64, 8, 8, 4>>(be, X, n, Cc, k, d, cn, lab, md);
        else
            rc = argmin_launch<tile_cfg<T, 128, 128, 8, 8, 8>>(be, X, n, Cc, k, d, cn, lab, md);
    }
    gsb__cuda_free(be, cn);
    return rc;
}

/* ---- pairwise -------------------------------------------------------------------- */

/*
 * Tiles of D (n x m), grid-stride in both directions.  xinv / yinv are the
 * inverse norms (cosine only).  same: X is Y, whose diagonal is exactly 0.
 */
template <int OP, class C, typename T>
__global__ void __launch_bounds__(C::NT, 2)
    pairwise_kernel(const T *__restrict__ X, int64_t n, const T *__restrict__ Y, int64_t m,
                    int64_t d, int metric, const T *__restrict__ xinv,
                    const T *__restrict__ yinv, int same, T *__restrict__ D)
{
    __shared__ __align__(16) typename C::smem sm;
    const int tid = threadIdx.x, tx = tid % C::TX, ty = tid / C::TX;
    int64_t nbx = (n + C::BM - 1) / C::BM, nby = (m + C::BN - 1) / C::BN;
    for (int64_t by = blockIdx.y; by < nby; by += gridDim.y)
        for (int64_t bx = blockIdx.x; bx < nbx; bx += gridDim.x) {
            T acc[C::TM][C::TN];
            tile_pipe<C> pipe;
            tile_prefetch(pipe, X, n, bx * C::BM, Y, m, by * C::BN, d, tid);
            tile_accumulate<OP, C>(sm, pipe, X, n, bx * C::BM, Y, m, by * C::BN, d, false, 0, 0,
                                   tid, tx, ty, acc);
#pragma unroll
            for (int i = 0; i < C::TM; i++) {
                int64_t r = bx * C::BM + C::row(ty, i);
                if (r >= n)
                    continue;
#pragma unroll
                for (int j = 0; j < C::TN; j++) {
                    int64_t c = by * C::BN + C::col(tx, j);
                    if (c >= m)
                        continue;
                    T v = acc[i][j];
                    if (metric == GSB__METRIC_COSINE) {
                        v = T(1) - v * xinv[r] * yinv[c];
                        v = v < T(0) ? T(0) : (v > T(2) ? T(2) : v);
                    } else if (metric == GSB__METRIC_EUCLIDEAN) {
                        v = sqrt(v);
                    }
                    D[r * m + c] = same && r == c ? T(0) : v;
                }
            }
        }
}

template <int OP, class C, typename T>
int pairwise_launch(const gsb__backend *be, const T *X, int64_t n, const T *Y, int64_t m,
                    int64_t d, int metric, const T *xinv, const T *yinv, int same, T *D)
{
    int64_t nbx = (n + C::BM - 1) / C::BM, nby = (m + C::BN - 1) / C::BN;
    dim3 grid((unsigned)(nbx < INT_MAX ? nbx : INT_MAX), (unsigned)(nby < 65535 ? nby : 65535));
    pairwise_kernel<OP, C, T><<<grid, C::NT, 0, gsb__cuda_ctx_of(be)->stream>>>(
        X, n, Y, m, d, metric, xinv, yinv, same, D);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

template <int OP, typename T>
int pairwise_pick(const gsb__backend *be, const T *X, int64_t n, const T *Y, int64_t m,
                  int64_t d, int metric, const T *xinv, const T *yinv, int same, T *D)
{
    /* pairwise serves small m: narrow tiles, two blocks per SM without spilling */
    if (m <= 32)
        return pairwise_launch<OP, tile_cfg<T, 128, 32, 8, 4, 4>>(be, X, n, Y, m, d, metric,
                                                                  xinv, yinv, same, D);
    if constexpr (sizeof(T) == 8)
        return pairwise_launch<OP, tile_cfg<T, 64, 64, 8, 4, 4>>(be, X, n, Y, m, d, metric, xinv,
                                                                 yinv, same, D);
    else
        return pairwise_launch<OP, tile_cfg<T, 128, 64, 8, 8, 4>>(be, X, n, Y, m, d, metric,
                                                                  xinv, yinv, same, D);
}

template <typename T>
int pairwise_run(const gsb__backend *be, const gsb__tensor *Xt, const gsb__tensor *Yt,
                 gsb__metric metric, gsb__tensor *Dt)
{
    const T *X = (const T *)Xt->data, *Y = (const T *)Yt->data;
    T *D = (T *)Dt->data;
    int64_t n = Xt->rows, m = Yt->rows, d = Xt->cols;
    int same = X == Y && n == m;
    if (metric == GSB__METRIC_MANHATTAN)
        return pairwise_pick<OP_L1>(be, X, n, Y, m, d, metric, (const T *)NULL,
                                    (const T *)NULL, same, D);
    if (metric != GSB__METRIC_COSINE)
        return pairwise_pick<OP_SQDIFF>(be, X, n, Y, m, d, metric, (const T *)NULL,
                                        (const T *)NULL, same, D);
    T *inv = NULL;
    int rc = gsb__cuda_alloc(be, (size_t)(n + m) * sizeof(T), (void **)&inv);
    if (rc != GSB_OK)
        return rc;
    rc = row_norms<T, T>(be, X, n, d, 1, inv, 0.0, NULL);
    if (rc == GSB_OK)
        rc = row_norms<T, T>(be, Y, m, d, 1, inv + n, 0.0, NULL);
    if (rc == GSB_OK)
        rc = pairwise_pick<OP_DOT>(be, X, n, Y, m, d, metric, inv, inv + n, same, D);
    gsb__cuda_free(be, inv);
    return rc;
}

/* ---- segment_sum ----------------------------------------------------------------- */

/* Threads of a segment_tile_kernel block, and its warps. */
constexpr int SEG_THREADS = 512;
constexpr int SEG_WARPS = SEG_THREADS / 32;
/* Most shared memory a block's tile of partial sums takes: four blocks'
 * tiles fit an SM's 228 KiB (more than 48 KiB is opt-in). */
constexpr int64_t SEG_SMEM_BYTES = 54 << 10;
/* Widest column tile: a cluster row of a tile is at most this many doubles + 1. */
constexpr int64_t SEG_COL_TILE = 512;
/* Rows per chunk at least, chunks at most, and partials' bytes at most. */
constexpr int64_t SEG_MIN_ROWS = 2048;
constexpr int64_t SEG_MAX_CHUNKS = 512;
constexpr int64_t SEG_SCRATCH_BYTES = (int64_t)256 << 20;
/* rows of a warp whose loads are issued together before their adds: 32
 * bytes a lane (8 float32 or 4 float64 rows; more float64 would spill) */
template <typename T>
__host__ __device__ constexpr int seg_unroll() { return sizeof(T) == 4 ? 6 : 4; }
/* label windows of 32 rows loaded together */
constexpr int SEG_WINDOWS = 4;
/* partials summed per reduce block: 32 elements x SEG_RGROUPS chunk groups */
constexpr int SEG_RGROUPS = 8;

/* The tiling of one segment_sum: chunks of rows x tiles of (clusters x columns). */
struct seg_plan {
    int64_t P;      /* row chunks */
    int64_t kt, dt; /* clusters and X columns per tile */
    int64_t ny, nz; /* cluster tiles, column tiles */
};

/* Rows [r0, min(r0 + 32 SEG_WINDOWS, r1)) of X (d columns) towards L2, a
 * 128-byte line per thread of the block. */
template <typename T>
__device__ __forceinline__ void seg_prefetch(const T *X, int64_t r0, int64_t r1, int64_t d)
{
    int64_t rows = r1 - r0 < 32 * SEG_WINDOWS ? r1 - r0 : 32 * SEG_WINDOWS;
    if (rows <= 0)
        return;
    const char *p = (const char *)(X + r0 * d);
    const int64_t bytes = rows * d * (int64_t)sizeof(T);
    for (int64_t off = (int64_t)threadIdx.x * 128; off < bytes; off += (int64_t)SEG_THREADS * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
}

/*
 * Block (x, t) adds the rows of chunk x = [n x / P, n (x + 1) / P) whose
 * label falls in cluster tile t % ny, over the columns of column tile
 * t / ny, into a tile of partial sums in shared memory; then writes the
 * tile to partial x of part (P x k (d + 1); the last column of a cluster's
 * row the weight total).  The weight column travels with column tile 0.
 *
 * No atomics, so the result is deterministic: a 32-column group of a
 * cluster's tile row is a "unit", owned by one warp (unit u by warp
 * u % SEG_WARPS), column j of it by lane j % 32, and the owner adds its
 * rows in increasing order.  Every warp scans the chunk's labels (32 rows
 * at a time, a ballot of the rows with a unit of its own), and issues the
 * loads of up to SEG_UNROLL such rows before their adds, so each SM has
 * many rows' loads in flight: X is read once, at close to memory speed.
 */
template <typename T>
__global__ void __launch_bounds__(SEG_THREADS, 2)
    segment_tile_kernel(const T *__restrict__ X, const int32_t *__restrict__ lab,
                        const void *w, int w_f64, int64_t n, int64_t d, int64_t k,
                        seg_plan pl, double *__restrict__ part, unsigned long long *bad)
{
    extern __shared__ double seg_acc[];
    constexpr int SEG_UNROLL = seg_unroll<T>();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t stride = k * (d + 1), x = blockIdx.x;
    const int64_t i0 = n * x / pl.P, i1 = n * (x + 1) / pl.P;
    for (int64_t t = blockIdx.y; t < pl.ny * pl.nz; t += gridDim.y) {
        const int64_t c0 = (t % pl.ny) * pl.kt, col0 = (t / pl.ny) * pl.dt;
        const int kw = (int)(k - c0 < pl.kt ? k - c0 : pl.kt);
        const int dw = (int)(d - col0 < pl.dt ? d - col0 : pl.dt);
        const int has_w = col0 == 0, ld = dw + has_w;
        const int G = dw > 32 ? (dw + 31) / 32 : 1; /* units per cluster row */
        const bool check = t == 0 && warp == 0;     /* one warp reports bad labels */
        for (int e = threadIdx.x; e < kw * ld; e += SEG_THREADS)
            seg_acc[e] = 0.0;
        __syncthreads();
        for (int64_t base = i0; base < i1; base += 32 * SEG_WINDOWS) {
            /* one tile: the next rows into L2 now, so their loads below hit
             * L2 (a hint, which takes no registers; with several tiles a
             * block reads only some rows, and would fetch them all) */
            if (pl.ny * pl.nz == 1)
                seg_prefetch(X, base + 32 * SEG_WINDOWS, i1, d);
            int cl[SEG_WINDOWS];
            double wv[SEG_WINDOWS];
#pragma unroll
            for (int q = 0; q < SEG_WINDOWS; q++) {
                int64_t r = base + q * 32 + lane;
                int v = r < i1 ? lab[r] : -1;
                cl[q] = -1;
                wv[q] = 1.0;
                if (r < i1 && (v < 0 || v >= k)) {
                    if (check)
                        atomicMin(bad, (unsigned long long)r);
                    continue;
                }
                const int64_t c = (int64_t)v - c0;
                if (r >= i1 || c < 0 || c >= kw)
                    continue;
                /* the warp owns a unit of c: (c G + g) % W == warp for a g < G */
                const int first = ((warp - (int)c * G) % SEG_WARPS + SEG_WARPS) % SEG_WARPS;
                if (G >= SEG_WARPS || first < G) {
                    cl[q] = (int)c;
                    if (w)
                        wv[q] = w_f64 ? ((const double *)w)[r] : (double)((const float *)w)[r];
                }
            }
#pragma unroll
            for (int q = 0; q < SEG_WINDOWS; q++) {
                unsigned mask = __ballot_sync(FULL_MASK, cl[q] >= 0);
                const int64_t wbase = base + q * 32;
                while (mask) { /* warp-uniform */
                    /* up to SEG_UNROLL rows: (cluster << 5) | bit, or -1 */
                    int bc[SEG_UNROLL];
#pragma unroll
                    for (int u = 0; u < SEG_UNROLL; u++) {
                        int bit = mask ? __ffs(mask) - 1 : 0;
                        int c = __shfl_sync(FULL_MASK, cl[q], bit); /* every lane: bit is uniform */
                        bc[u] = mask ? (c << 5) | bit : -1;
                        mask &= mask - 1;
                    }
                    for (int g = 0; g < G; g++) {
                        const int col = g * 32 + lane;
                        T xv[SEG_UNROLL];
#pragma unroll
                        for (int u = 0; u < SEG_UNROLL; u++) {
                            bool own = bc[u] >= 0 && ((bc[u] >> 5) * G + g) % SEG_WARPS == warp;
                            xv[u] = own && col < dw ? X[(wbase + (bc[u] & 31)) * d + col0 + col]
                                                    : T(0);
                        }
#pragma unroll
                        for (int u = 0; u < SEG_UNROLL; u++) {
                            double wu = __shfl_sync(FULL_MASK, wv[q], bc[u] & 31);
                            if (bc[u] < 0 || ((bc[u] >> 5) * G + g) % SEG_WARPS != warp)
                                continue;
                            double *row = seg_acc + (int64_t)(bc[u] >> 5) * ld;
                            if (col < dw)
                                row[col] += wu * (double)xv[u];
                            if (g == 0 && lane == 0 && has_w)
                                row[dw] += wu;
                        }
                    }
                }
            }
        }
        __syncthreads();
        double *out = part + x * stride;
        for (int e = threadIdx.x; e < kw * ld; e += SEG_THREADS) {
            int c = e / ld, j = e - c * ld;
            int64_t dst = (c0 + c) * (d + 1) + (j < dw ? col0 + j : d);
            out[dst] = seg_acc[e];
        }
        __syncthreads(); /* the tile is reused by the block's next tile */
    }
}

/*
 * sums / counts = the P partials added in a fixed order: a block takes 32
 * consecutive elements; its SEG_RGROUPS groups of 32 threads each add the
 * partials p = g, g + SEG_RGROUPS, ... in order, and the first group adds
 * the groups' totals in order.
 */
__global__ void __launch_bounds__(32 * SEG_RGROUPS)
    segment_reduce_kernel(const double *__restrict__ part, int64_t P, int64_t k, int64_t d,
                          double *__restrict__ sums, double *__restrict__ counts)
{
    __shared__ double tot[SEG_RGROUPS][32];
    const int64_t stride = k * (d + 1);
    const int g = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int64_t e0 = (int64_t)blockIdx.x * 32; e0 < stride; e0 += (int64_t)gridDim.x * 32) {
        const int64_t e = e0 + lane;
        double s = 0.0;
        if (e < stride) {
            int64_t p = g;
            /* four independent loads in flight, added in order */
            for (; p + 3 * SEG_RGROUPS < P; p += 4 * SEG_RGROUPS) {
                double a = part[p * stride + e], b = part[(p + SEG_RGROUPS) * stride + e];
                double c = part[(p + 2 * SEG_RGROUPS) * stride + e];
                double f = part[(p + 3 * SEG_RGROUPS) * stride + e];
                s += a;
                s += b;
                s += c;
                s += f;
            }
            for (; p < P; p += SEG_RGROUPS)
                s += part[p * stride + e];
        }
        tot[g][lane] = s;
        __syncthreads();
        if (g == 0 && e < stride) {
            double r = 0.0;
            for (int q = 0; q < SEG_RGROUPS; q++)
                r += tot[q][lane];
            int64_t l = e / (d + 1), j = e - l * (d + 1);
            if (j < d)
                sums[l * d + j] = r;
            else
                counts[l] = r;
        }
        __syncthreads();
    }
}

/* The chunks and tiles of a segment_sum of n rows, d columns, k clusters:
 * they depend on the shapes only, so results repeat bitwise on any GPU. */
static seg_plan segment_plan(int64_t n, int64_t d, int64_t k, size_t esize)
{
    seg_plan pl;
    pl.dt = d < SEG_COL_TILE ? d : SEG_COL_TILE;
    pl.nz = d > 0 ? (d + pl.dt - 1) / pl.dt : 1;
    pl.kt = SEG_SMEM_BYTES / ((pl.dt + 1) * (int64_t)sizeof(double));
    if (pl.kt > k)
        pl.kt = k > 0 ? k : 1;
    /* k == 0 still takes a tile: its blocks report the (then all bad) labels */
    pl.ny = k > 0 ? (k + pl.kt - 1) / pl.kt : 1;
    const int64_t stride = k * (d + 1), pbytes = stride * (int64_t)sizeof(double);
    /* enough chunks to fill the GPU, but the partials (written and read
     * back) at most a quarter of X's bytes and within the scratch bound */
    pl.P = (n + SEG_MIN_ROWS - 1) / SEG_MIN_ROWS;
    if (pl.P > SEG_MAX_CHUNKS)
        pl.P = SEG_MAX_CHUNKS;
    int64_t cap = pbytes > 0 ? n * d * (int64_t)esize / 4 / pbytes : pl.P;
    if (cap < 32)
        cap = 32;
    if (pl.P > cap)
        pl.P = cap;
    if (pbytes > 0 && pl.P * pbytes > SEG_SCRATCH_BYTES)
        pl.P = SEG_SCRATCH_BYTES / pbytes;
    if (pl.P < 1)
        pl.P = 1;
    return pl;
}

/* segment_sum's check (cpu_family.c's fam_check); cols -2: a vector of rows elements. */
int check_family(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype, int64_t rows,
                 int64_t cols, const char *op, const char *name)
{
    if (!t || !t->data)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (dtype ? t->dtype != dtype : (t->dtype != GSB_F32 && t->dtype != GSB_F64))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                            gsb__cuda_dtype_name(t->dtype));
    int bad = cols == -2 ? t->rows * t->cols != rows
                         : (rows >= 0 && t->rows != rows) || (cols >= 0 && t->cols != cols);
    if (bad)
        return GSB_CUDA_ERR(GSB_EINTERNAL,
                            "%s: %s has shape (%lld, %lld), expected %lld x %lld", op, name,
                            (long long)t->rows, (long long)t->cols, (long long)rows,
                            (long long)(cols == -2 ? 1 : cols));
    return check_on(be, t, op, name);
}

template <typename T>
int segment_run(const gsb__backend *be, const gsb__tensor *Xt, const gsb__tensor *labels,
                const gsb__tensor *w, gsb__tensor *sums, gsb__tensor *counts)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    const int64_t n = Xt->rows, d = Xt->cols, k = sums->rows, stride = k * (d + 1);
    const int32_t *lab = (const int32_t *)labels->data;
    int rc = GSB_OK;
    double *part = NULL;
    unsigned long long *bad_d = NULL, bad = ~0ull;
    int32_t bad_label = 0;
    seg_plan pl;
    size_t smem = 0;
    int64_t tiles = 0;
    if (n == 0) { /* no rows: every sum and count is 0 */
        CUDA_CHECK(cudaMemsetAsync(sums->data, 0, (size_t)(k * d) * sizeof(double), stream));
        CUDA_CHECK(cudaMemsetAsync(counts->data, 0, (size_t)k * sizeof(double), stream));
        goto done;
    }
    pl = segment_plan(n, d, k, sizeof(T));
    smem = (size_t)(pl.kt * (pl.dt + 1)) * sizeof(double);
    tiles = pl.ny * pl.nz;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(pl.P * stride) * sizeof(double), (void **)&part));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, sizeof bad, (void **)&bad_d));
    CUDA_CHECK(cudaMemsetAsync(bad_d, 0xff, sizeof bad, stream));
    if (smem > (48 << 10))
        CUDA_CHECK(cudaFuncSetAttribute(segment_tile_kernel<T>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    segment_tile_kernel<T><<<dim3((unsigned)pl.P, (unsigned)(tiles < 65535 ? tiles : 65535)),
                             SEG_THREADS, smem, stream>>>(
        (const T *)Xt->data, lab, w ? w->data : NULL, w && w->dtype == GSB_F64, n, d, k, pl, part,
        bad_d);
    CUDA_CHECK(cudaGetLastError());
    if (stride > 0) {
        int64_t blocks = (stride + 31) / 32;
        segment_reduce_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 32 * SEG_RGROUPS, 0,
                                stream>>>(part, pl.P, k, d, (double *)sums->data,
                                          (double *)counts->data);
        CUDA_CHECK(cudaGetLastError());
    }
    /* the label check must reach the host */
    CUDA_CHECK(cudaMemcpyAsync(&bad, bad_d, sizeof bad, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (bad != ~0ull) {
        CUDA_CHECK(cudaMemcpyAsync(&bad_label, lab + bad, sizeof bad_label,
                                   cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        rc = GSB_CUDA_ERR(GSB_EINVAL, "segment_sum: label %d of row %lld is outside [0, %lld)",
                          (int)bad_label, (long long)bad, (long long)k);
    }
done:
    gsb__cuda_free(be, part);
    gsb__cuda_free(be, bad_d);
    return rc;
}

} // namespace

/* ---- the ops: argument checks as the CPU twins, then the body of X's dtype ---------- */

extern "C" int gsb__cuda_pairwise(const gsb__backend *be, const gsb__tensor *X,
                                  const gsb__tensor *Y, gsb__metric metric, gsb__tensor *D)
{
    const char *op = "pairwise";
    int rc;
    if ((rc = check_tensor(be, X, (gsb_dtype)0, -1, -1, op, "X")) != GSB_OK ||
        (rc = check_tensor(be, Y, X->dtype, -1, X->cols, op, "Y")) != GSB_OK ||
        (rc = check_tensor(be, D, X->dtype, X->rows, Y->rows, op, "D")) != GSB_OK)
        return rc;
    if (!valid_metric(metric))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: unknown metric %d", op, (int)metric);
    if ((rc = check_dims(X->cols, Y->rows, op)) != GSB_OK)
        return rc;
    if (X->rows == 0 || Y->rows == 0)
        return GSB_OK;
    return X->dtype == GSB_F32 ? pairwise_run<float>(be, X, Y, metric, D)
                               : pairwise_run<double>(be, X, Y, metric, D);
}

extern "C" int gsb__cuda_argmin_sqdist(const gsb__backend *be, const gsb__tensor *X,
                                       const gsb__tensor *C, gsb__tensor *labels,
                                       gsb__tensor *mind)
{
    const char *op = "argmin_sqdist";
    int rc;
    if ((rc = check_tensor(be, X, (gsb_dtype)0, -1, -1, op, "X")) != GSB_OK ||
        (rc = check_tensor(be, C, X->dtype, -1, X->cols, op, "C")) != GSB_OK ||
        (rc = check_vector(be, labels, GSB_I32, X->rows, op, "labels")) != GSB_OK ||
        (rc = check_vector(be, mind, X->dtype, X->rows, op, "mind")) != GSB_OK)
        return rc;
    if (C->rows < 1 && X->rows > 0)
        return GSB_CUDA_ERR(GSB_EINVAL, "%s: no centres given", op);
    if ((rc = check_dims(X->cols, C->rows, op)) != GSB_OK)
        return rc;
    if (X->rows == 0)
        return GSB_OK;
    /* by default tensor cores rank, with this kernel's results bit for bit,
     * where the shapes suit them (cuda_argmin_tc.cu); GSB_ARGMIN=exact: here */
    int mode = gsb__cuda_argmin_tc_mode(), done = 0;
    if (mode && (rc = gsb__cuda_argmin_tc(be, X, C, labels, mind, mode, &done)) != GSB_OK)
        return rc;
    if (done)
        return GSB_OK;
    return X->dtype == GSB_F32 ? argmin_run<float>(be, X, C, labels, mind)
                               : argmin_run<double>(be, X, C, labels, mind);
}

extern "C" int gsb__cuda_segment_sum(const gsb__backend *be, const gsb__tensor *X,
                                     const gsb__tensor *labels, const gsb__tensor *w,
                                     gsb__tensor *sums, gsb__tensor *counts)
{
    const char *op = "segment_sum";
    int rc;
    if ((rc = check_family(be, X, (gsb_dtype)0, -1, -1, op, "X")) != GSB_OK ||
        (rc = check_family(be, labels, GSB_I32, X->rows, -2, op, "labels")) != GSB_OK ||
        (w && (rc = check_family(be, w, (gsb_dtype)0, X->rows, -2, op, "w")) != GSB_OK) ||
        (rc = check_family(be, sums, GSB_F64, -1, X->cols, op, "sums")) != GSB_OK ||
        (rc = check_family(be, counts, GSB_F64, sums->rows, -2, op, "counts")) != GSB_OK)
        return rc;
    return X->dtype == GSB_F32 ? segment_run<float>(be, X, labels, w, sums, counts)
                               : segment_run<double>(be, X, labels, w, sums, counts);
}
