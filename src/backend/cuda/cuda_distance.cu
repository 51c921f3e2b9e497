/*
 * cuda_distance.cu - the GPU's pairwise and argmin_sqdist (the KMeans
 * assignment step); topk is in cuda_topk.cu, the tile engine they share in
 * cuda_distance_tile.cuh, segment_sum (the KMeans centre update) in
 * cuda_segment_sum.cu.  Twin: cpu_distance.c.
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

/*
 * Blocks of BM rows of X, grid-stride (the grid holds as many blocks as
 * are resident at once, so each streams many row blocks and fetches the
 * next one's first slice while finishing the current one): labels and
 * exact squared distances of the rows.  cn holds ||c||^2 in T.  MAP: the
 * rows are X's rows map[0 .. n-1], read and written in place; a row's
 * results depend only on the row and C, not on where it sits in a tile.
 */
template <class C, typename T, bool MAP>
__device__ __forceinline__ void
argmin_rows(typename C::smem &sm, const T *__restrict__ X, int64_t n, const T *__restrict__ Cc,
            int64_t k, int64_t d, const T *__restrict__ cn, int32_t *__restrict__ labels,
            T *__restrict__ mind, const int32_t *__restrict__ map)
{
    const int tid = threadIdx.x, tx = tid % C::TX, ty = tid / C::TX;
    const T inf = (T)INFINITY;
    int64_t nblocks = (n + C::BM - 1) / C::BM;
    tile_pipe<C> pipe;
    if ((int64_t)blockIdx.x < nblocks)
        tile_prefetch<C, T, MAP>(pipe, X, n, (int64_t)blockIdx.x * C::BM, Cc, k, 0, d, tid, map);
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
            tile_accumulate<OP_DOT, C, T, MAP>(sm, pipe, X, n, r0, Cc, k, c0, d,
                                               more_c || nxt < nblocks,
                                               more_c ? r0 : nxt * C::BM,
                                               more_c ? c0 + C::BN : 0, tid, tx, ty, acc, map);
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
        int64_t rx[C::TM]; /* X's row */
        double s[C::TM];
#pragma unroll
        for (int i = 0; i < C::TM; i++) {
            int64_t r = r0 + C::row(ty, i);
            bool ok = r < n && bj[i] >= 0;
            if constexpr (MAP)
                rx[i] = r < n ? map[r] : 0;
            else
                rx[i] = r;
            xr[i] = ok ? X + rx[i] * d : NULL;
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
                labels[rx[i]] = bj[i];
                mind[rx[i]] = (T)s[i];
            }
        }
    }
}

/* All n rows of X; LIST: the *count rows listed in rows (cuda_argmin_tc.cu's
 * near ties), or all of X where they are more than half of it. */
template <class C, typename T, bool LIST>
__global__ void __launch_bounds__(C::NT, 2)
    argmin_kernel(const T *__restrict__ X, int64_t n, const T *__restrict__ Cc, int64_t k,
                  int64_t d, const T *__restrict__ cn, int32_t *__restrict__ labels,
                  T *__restrict__ mind, const int32_t *__restrict__ rows,
                  const int *__restrict__ count)
{
    __shared__ __align__(16) typename C::smem sm;
    if constexpr (LIST) {
        const int64_t listed = *count;
        if (listed <= n / 2)
            argmin_rows<C, T, true>(sm, X, listed, Cc, k, d, cn, labels, mind, rows);
        else
            argmin_rows<C, T, false>(sm, X, n, Cc, k, d, cn, labels, mind, NULL);
    } else {
        argmin_rows<C, T, false>(sm, X, n, Cc, k, d, cn, labels, mind, NULL);
    }
}

/* (LIST: a grid of the resident blocks whatever the count, which only the
 * device knows; blocks past the listed rows' exit at once) */
template <class C, bool LIST, typename T>
int argmin_launch(const gsb__backend *be, const T *X, int64_t n, const T *Cc, int64_t k,
                  int64_t d, const T *cn, int32_t *labels, T *mind, const int32_t *rows,
                  const int *count)
{
    int64_t blocks = (n + C::BM - 1) / C::BM;
    int per_sm = 0, sm = gsb__cuda_ctx_of(be)->sm_count, rc;
    if ((rc = gsb__cuda_resident_per_sm((const void *)argmin_kernel<C, T, LIST>,
                                        gsb__cuda_ctx_of(be)->device, C::NT, 0, 0, &per_sm)) !=
        GSB_OK)
        return rc;
    int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * (sm > 0 ? sm : 16);
    if (blocks > resident)
        blocks = resident;
    argmin_kernel<C, T, LIST><<<(unsigned)blocks, C::NT, 0, gsb__cuda_ctx_of(be)->stream>>>(
        X, n, Cc, k, d, cn, labels, mind, rows, count);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* The centre tile follows k, so few centres do not pay for a 128-wide tile. */
template <bool LIST, typename T>
int argmin_pick(const gsb__backend *be, const T *X, int64_t n, const T *Cc, int64_t k,
                int64_t d, const T *cn, int32_t *lab, T *md, const int32_t *rows,
                const int *count)
{
    /* float64 stops at 4 x 4 per thread: more doubles would spill registers */
    if (k <= 32)
        return argmin_launch<tile_cfg<T, 128, 32, 8, 4, 4>, LIST>(be, X, n, Cc, k, d, cn, lab,
                                                                  md, rows, count);
    if constexpr (sizeof(T) == 8)
        return argmin_launch<tile_cfg<T, 64, 64, 8, 4, 4>, LIST>(be, X, n, Cc, k, d, cn, lab,
                                                                 md, rows, count);
    else if (k <= 64)
        return argmin_launch<tile_cfg<T, 128, 64, 8, 8, 4>, LIST>(be, X, n, Cc, k, d, cn, lab,
                                                                  md, rows, count);
    else
        return argmin_launch<tile_cfg<T, 128, 128, 8, 8, 8>, LIST>(be, X, n, Cc, k, d, cn, lab,
                                                                   md, rows, count);
}

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
    if (rc == GSB_OK)
        rc = argmin_pick<false>(be, X, n, Cc, k, d, cn, (int32_t *)labels->data, (T *)mind->data,
                                (const int32_t *)NULL, (const int *)NULL);
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

int gsb__cuda_argmin_exact(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *C,
                           gsb__tensor *labels, gsb__tensor *mind)
{
    return X->dtype == GSB_F32 ? argmin_run<float>(be, X, C, labels, mind)
                               : argmin_run<double>(be, X, C, labels, mind);
}

int gsb__cuda_argmin_listed(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *C,
                            const void *cn, const int32_t *rows, const int *count,
                            gsb__tensor *labels, gsb__tensor *mind)
{
    const int64_t n = X->rows, k = C->rows, d = X->cols;
    int32_t *lab = (int32_t *)labels->data;
    if (X->dtype == GSB_F32)
        return argmin_pick<true>(be, (const float *)X->data, n, (const float *)C->data, k, d,
                                 (const float *)cn, lab, (float *)mind->data, rows, count);
    return argmin_pick<true>(be, (const double *)X->data, n, (const double *)C->data, k, d,
                             (const double *)cn, lab, (double *)mind->data, rows, count);
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
    /* by default (float32: k > 32 and n >= 2^18; GSB_ARGMIN chooses) tensor
     * cores rank, with this kernel's results bit for bit, where the shapes
     * suit them (cuda_argmin_tc.cu) */
    int mode = gsb__cuda_argmin_tc_mode(X->dtype, X->rows, C->rows), done = 0;
    if (mode && (rc = gsb__cuda_argmin_tc(be, X, C, labels, mind, mode, &done)) != GSB_OK)
        return rc;
    if (done)
        return GSB_OK;
    return gsb__cuda_argmin_exact(be, X, C, labels, mind);
}
