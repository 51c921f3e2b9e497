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
 * scheduling.  Each block takes a fixed chunk of rows and accumulates its
 * partial k x (d + 1) sums (the last column the weight totals, the counts)
 * in double, each accumulator element owned by one thread that adds its
 * rows in order; the partials are then added in chunk order.  The partial
 * lives in shared memory when it fits (several independent copies, "slots",
 * when d is narrow, so every thread has work), else in the block's own
 * region of global scratch.  Labels outside [0, k) are reported like the
 * CPU twin (the first such row), found on the device with an atomic min.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

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

/* Most shared memory a block's partials may take (more than 48 KiB is opt-in). */
constexpr int64_t SEG_SMEM_BYTES = 96 << 10;
/* Most bytes of partials in global scratch, and the fewest rows per block. */
constexpr int64_t SEG_SCRATCH_BYTES = (int64_t)256 << 20;
constexpr int64_t SEG_MIN_ROWS = 2048;
constexpr int64_t SEG_MAX_BLOCKS = 1024;
/* rows whose loads are issued together before their adds */
constexpr int SEG_UNROLL = 8;

/*
 * Block b adds rows [n b / P, n (b + 1) / P) (P = gridDim.x) into partial b
 * of part (P x stride, stride = k (d + 1)).  Thread t works in slot
 * t / slot_threads on columns t % slot_threads + multiples of slot_threads;
 * slot s takes every slots-th row.  in_smem: the slots' partials are in
 * shared memory and summed into part at the end; else the single slot adds
 * straight into part (zeroed beforehand).
 */
template <typename T>
__global__ void segment_partial_kernel(const T *__restrict__ X, const int32_t *__restrict__ lab,
                                       const void *w, int w_f64, int64_t n, int64_t d,
                                       int64_t k, int slots, int slot_threads, int in_smem,
                                       double *__restrict__ part, unsigned long long *bad)
{
    extern __shared__ double seg_smem[];
    const int64_t stride = k * (d + 1);
    const int slot = threadIdx.x / slot_threads, lt = threadIdx.x % slot_threads;
    double *acc = in_smem ? seg_smem + (int64_t)slot * stride : part + blockIdx.x * stride;
    if (in_smem) {
        for (int64_t e = threadIdx.x; e < (int64_t)slots * stride; e += blockDim.x)
            seg_smem[e] = 0.0;
        __syncthreads();
    }
    const int64_t P = gridDim.x;
    const int64_t i0 = n * (int64_t)blockIdx.x / P, i1 = n * ((int64_t)blockIdx.x + 1) / P;
    if (slot < slots) {
        for (int64_t i = i0 + slot; i < i1; i += (int64_t)slots * SEG_UNROLL) {
            int l[SEG_UNROLL];
            double wi[SEG_UNROLL];
#pragma unroll
            for (int u = 0; u < SEG_UNROLL; u++) {
                int64_t r = i + (int64_t)u * slots;
                l[u] = -1;
                wi[u] = 0.0;
                if (r >= i1)
                    continue;
                int v = lab[r];
                if (v < 0 || v >= k) {
                    if (lt == 0)
                        atomicMin(bad, (unsigned long long)r);
                    continue;
                }
                l[u] = v;
                wi[u] = !w ? 1.0 : (w_f64 ? ((const double *)w)[r] : (double)((const float *)w)[r]);
            }
            for (int64_t j = lt; j < d; j += slot_threads) {
                double xv[SEG_UNROLL];
#pragma unroll
                for (int u = 0; u < SEG_UNROLL; u++)
                    xv[u] = l[u] >= 0 ? (double)X[(i + (int64_t)u * slots) * d + j] : 0.0;
#pragma unroll
                for (int u = 0; u < SEG_UNROLL; u++)
                    if (l[u] >= 0)
                        acc[(int64_t)l[u] * (d + 1) + j] += wi[u] * xv[u];
            }
            if (lt == 0) {
#pragma unroll
                for (int u = 0; u < SEG_UNROLL; u++)
                    if (l[u] >= 0)
                        acc[(int64_t)l[u] * (d + 1) + d] += wi[u];
            }
        }
    }
    if (in_smem) {
        __syncthreads();
        for (int64_t e = threadIdx.x; e < stride; e += blockDim.x) {
            double s = 0.0;
            for (int sl = 0; sl < slots; sl++)
                s += seg_smem[(int64_t)sl * stride + e];
            part[blockIdx.x * stride + e] = s;
        }
    }
}

/* sums / counts = the P partials added in order. */
__global__ void segment_reduce_kernel(const double *__restrict__ part, int64_t P, int64_t k,
                                      int64_t d, double *__restrict__ sums,
                                      double *__restrict__ counts)
{
    const int64_t stride = k * (d + 1);
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < stride;
         e += (int64_t)gridDim.x * blockDim.x) {
        double s = 0.0;
        for (int64_t p = 0; p < P; p++)
            s += part[p * stride + e];
        int64_t l = e / (d + 1), j = e - l * (d + 1);
        if (j < d)
            sums[l * d + j] = s;
        else
            counts[l] = s;
    }
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
    int slot_threads = 0, slots = 0, in_smem = 0;
    int64_t P = 0;
    size_t smem = 0;
    if (n == 0) { /* no rows: every sum and count is 0 */
        CUDA_CHECK(cudaMemsetAsync(sums->data, 0, (size_t)(k * d) * sizeof(double), stream));
        CUDA_CHECK(cudaMemsetAsync(counts->data, 0, (size_t)k * sizeof(double), stream));
        goto done;
    }
    /* a slot is one warp-multiple of threads across the columns (at most 256);
     * as many slots as fit in 256 threads and the shared-memory budget */
    slot_threads = (int)(d < 1 ? 32 : (d >= 256 ? 256 : (d + 31) / 32 * 32));
    if (stride * (int64_t)sizeof(double) <= SEG_SMEM_BYTES) {
        int64_t fit = SEG_SMEM_BYTES / (stride > 0 ? stride * (int64_t)sizeof(double) : 1);
        slots = (int)(256 / slot_threads < fit ? 256 / slot_threads : fit);
        in_smem = 1;
    } else {
        slots = 1;
    }
    /* chunks of rows: enough blocks to fill the GPU, bounded scratch; the
     * split depends on the shapes only, so results repeat bitwise */
    P = (n + SEG_MIN_ROWS - 1) / SEG_MIN_ROWS;
    if (P > SEG_MAX_BLOCKS)
        P = SEG_MAX_BLOCKS;
    if (stride > 0 && P * stride * (int64_t)sizeof(double) > SEG_SCRATCH_BYTES)
        P = SEG_SCRATCH_BYTES / (stride * (int64_t)sizeof(double));
    if (P < 1)
        P = 1;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(P * stride) * sizeof(double), (void **)&part));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, sizeof bad, (void **)&bad_d));
    CUDA_CHECK(cudaMemsetAsync(bad_d, 0xff, sizeof bad, stream));
    if (!in_smem)
        CUDA_CHECK(cudaMemsetAsync(part, 0, (size_t)(P * stride) * sizeof(double), stream));
    smem = in_smem ? (size_t)slots * (size_t)stride * sizeof(double) : 0;
    if (smem > (48 << 10))
        CUDA_CHECK(cudaFuncSetAttribute(segment_partial_kernel<T>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    segment_partial_kernel<T><<<(unsigned)P, slots * slot_threads, smem, stream>>>(
        (const T *)Xt->data, lab, w ? w->data : NULL, w && w->dtype == GSB_F64, n, d, k, slots,
        slot_threads, in_smem, part, bad_d);
    CUDA_CHECK(cudaGetLastError());
    if (stride > 0) {
        segment_reduce_kernel<<<grid_for(be, stride, 256), 256, 0, stream>>>(
            part, P, k, d, (double *)sums->data, (double *)counts->data);
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
