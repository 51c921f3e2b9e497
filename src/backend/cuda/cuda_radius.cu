/*
 * cuda_radius.cu - the GPU's radius_neighbors: eps-neighbourhoods as CSR in
 * a count pass and a fill pass (contract in backend/backend.h; CPU twin
 * cpu_radius.c).  Every pair is decided on the value both twins compute the
 * same way (backend/radius_exact.h: double, column order, no contraction),
 * or by an expansion whose rounding bound puts it surely on one side.
 *
 * Two kernels:
 *  - scan: one thread per query row walks its candidates and decides each on
 *    its exact value: the runs of keys around its cell for a grid (binary
 *    searches in the sorted keys), else all of R (brute force for metrics
 *    without a tile form, or few columns).  A thread owns its row, so the
 *    count is a plain store and the fill writes the row in ascending j with
 *    no atomics.
 *  - tile (brute force, euclidean / sqeuclidean / cosine / manhattan, d >= 4):
 *    cuda_distance_tile.cuh's engine computes BM x BN tiles of dot products
 *    or L1 sums in the inputs' dtype; each pair's expansion, with the CPU
 *    twin's bound (norms in double), decides it when it is beyond the bound
 *    on either side of the threshold, its exact value otherwise.  Blocks
 *    take BM queries and one split of R (enough blocks for the GPU);
 *    counts add up through shared then global atomics (integers: the order
 *    does not matter), the fill claims slots with a per-row atomic cursor,
 *    so a row's neighbours come in any order (the contract allows it).
 *    Norms whose squares leave [1e-28, 1e30] (float32; double [1e-280,
 *    1e300]) could overflow or underflow the expansion: every pair is then
 *    decided exactly.
 * The fill pass checks that each row found as many neighbours as its count
 * (no write outside a row's slot, none past idx's end) and reports a
 * mismatch as an internal error, as the twin does.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_distance_tile.cuh"
#include "backend/radius_exact.h"

using namespace gsb_dist;

namespace {

constexpr int SCAN_THREADS = 128;
constexpr int NORM_THREADS = 256;
/* below this many columns a thread per query beats the tile engine */
constexpr int64_t TILE_MIN_D = 4;

/* What both kernels read (by value). */
struct radius_args {
    const void *Q, *R;
    int64_t nq, nr, d;
    int metric;
    double p, thr;
    const double *qinv, *rinv;   /* cosine: inverse norms (else NULL) */
    /* tile kernel only */
    const double *qn, *rn, *qnorm, *rnorm; /* squared norms and norms (DOT) */
    double slack;
    const int *wide;             /* norms beyond the expansion's range */
    int64_t split_len;
    /* grid (scan kernel only; keys NULL: brute force) */
    gsb__radius_grid grid;       /* its keys pointer unused (host memory) */
    const int64_t *keys;
    /* passes */
    int fill;
    unsigned long long *counts;  /* count: accumulated (tile) or stored (scan) */
    const int64_t *cap;          /* fill: the counts */
    const int64_t *offsets;
    unsigned long long *cursor;  /* fill, tile: per-row slots claimed */
    int64_t *idx;
    double *dist;
    int64_t nnz;
    int *mismatch;
};

template <typename T>
__device__ __forceinline__ double reduced(const radius_args &a, int metric, int64_t i, int64_t j)
{
    const T *q = (const T *)a.Q + i * a.d, *r = (const T *)a.R + j * a.d;
    double qi = a.qinv ? a.qinv[i] : 0.0, rj = a.rinv ? a.rinv[j] : 0.0;
    if constexpr (std::is_same<T, float>::value)
        return gsb__radius_reduced_f32(q, r, a.d, metric, a.p, qi, rj);
    else
        return gsb__radius_reduced_f64(q, r, a.d, metric, a.p, qi, rj);
}

/* Write neighbour j of row i at slot `at` of the row (fill pass). */
__device__ __forceinline__ void put(const radius_args &a, int64_t i, int64_t j, int64_t at,
                                    double s)
{
    int64_t pos = a.offsets[i] + at;
    if (at >= a.cap[i] || pos < 0 || pos >= a.nnz) {
        atomicOr(a.mismatch, 1);
        return;
    }
    a.idx[pos] = j;
    if (a.dist)
        a.dist[pos] = gsb__radius_value(a.metric, a.p, s);
}

/* ---- scan: a thread per query row --------------------------------------------- */

template <typename T, int M>
__device__ __forceinline__ void scan_range(const radius_args &a, int64_t i, int64_t j0,
                                           int64_t j1, int64_t &n)
{
    for (int64_t j = j0; j < j1; j++) {
        double s = reduced<T>(a, M, i, j);
        if (s <= a.thr) {
            if (a.fill)
                put(a, i, j, n, s);
            n++;
        }
    }
}

template <typename T, int M>
__global__ void radius_scan_kernel(const __grid_constant__ radius_args a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.nq;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = 0;
        if (a.keys) {
            const T *q = (const T *)a.Q + i * a.d;
            gsb__grid_reach reach;
            int any;
            if constexpr (std::is_same<T, float>::value)
                any = gsb__grid_reach_f32(&a.grid, q, &reach);
            else
                any = gsb__grid_reach_f64(&a.grid, q, &reach);
            int runs = any ? gsb__grid_runs(&a.grid, &reach) : 0;
            for (int t = 0; t < runs; t++) {
                int64_t klo, khi;
                gsb__grid_run(&a.grid, &reach, t, &klo, &khi);
                int64_t b0 = gsb__grid_lower_bound(a.keys, a.nr, klo);
                int64_t b1 = b0 + gsb__grid_lower_bound(a.keys + b0, a.nr - b0, khi + 1);
                scan_range<T, M>(a, i, b0, b1, n);
            }
        } else {
            scan_range<T, M>(a, i, 0, a.nr, n);
        }
        if (!a.fill)
            a.counts[i] = (unsigned long long)n;
        else if (n != a.cap[i])
            atomicOr(a.mismatch, 1);
    }
}

/* ---- tile: expansions, exact where they cannot decide ---------------------------- */

/*
 * 1 when pair (i, j) is a neighbour; v is the tile's dot product (DOT) or
 * L1 sum.  *s gets the exact reduced distance when it was computed (else
 * NaN).
 */
template <typename T, int OP>
__device__ __forceinline__ int tile_decide(const radius_args &a, int wide, int64_t i, int64_t j,
                                           T v, double *s)
{
    *s = NAN;
    if (!wide) {
        double approx, err;
        if constexpr (OP == OP_L1) {
            approx = (double)v;
            err = a.slack * approx;
        } else if (a.metric == GSB__METRIC_COSINE) {
            approx = 1.0 - (double)v * a.qinv[i] * a.rinv[j];
            err = a.slack;
        } else {
            approx = a.qn[i] + a.rn[j] - 2.0 * (double)v;
            err = a.slack * (a.qnorm[i] * a.rnorm[j] + a.qn[i] + a.rn[j]);
        }
        if (approx - err > a.thr)
            return 0;
        if (approx + err < a.thr)
            return 1;
    }
    *s = reduced<T>(a, a.metric, i, j); /* within the bound, NaN (overflow), or wide */
    return *s <= a.thr;
}

template <typename T, class C, int OP>
__global__ void __launch_bounds__(C::NT) radius_tile_kernel(const __grid_constant__ radius_args a)
{
    __shared__ __align__(16) typename C::smem sm;
    __shared__ unsigned int rowcnt[C::BM];
    const int tid = threadIdx.x, tx = tid % C::TX, ty = tid / C::TX;
    const T *Q = (const T *)a.Q, *R = (const T *)a.R;
    const int64_t q0 = (int64_t)blockIdx.x * C::BM;
    const int64_t j_begin = (int64_t)blockIdx.y * a.split_len;
    const int64_t j_end = j_begin + a.split_len < a.nr ? j_begin + a.split_len : a.nr;
    const int wide = a.wide ? *a.wide : 0;
    for (int r = tid; r < C::BM; r += C::NT)
        rowcnt[r] = 0;
    __syncthreads();

    tile_pipe<C> pipe;
    tile_prefetch(pipe, Q, a.nq, q0, R, j_end, j_begin, a.d, tid);
    for (int64_t c0 = j_begin; c0 < j_end; c0 += C::BN) {
        T acc[C::TM][C::TN];
        tile_accumulate<OP, C>(sm, pipe, Q, a.nq, q0, R, j_end, c0, a.d, c0 + C::BN < j_end, q0,
                               c0 + C::BN, tid, tx, ty, acc);
        unsigned local[C::TM];
#pragma unroll
        for (int i = 0; i < C::TM; i++)
            local[i] = 0;
#pragma unroll
        for (int jj = 0; jj < C::TN; jj++) {
            int64_t j = c0 + C::col(tx, jj);
            if (j >= j_end)
                continue;
#pragma unroll
            for (int i = 0; i < C::TM; i++) {
                int64_t row = q0 + C::row(ty, i);
                if (row >= a.nq)
                    continue;
                double s;
                if (!tile_decide<T, OP>(a, wide, row, j, acc[i][jj], &s))
                    continue;
                if (!a.fill) {
                    local[i]++;
                } else {
                    if (isnan(s) && a.dist)
                        s = reduced<T>(a, a.metric, row, j);
                    put(a, row, j, (int64_t)atomicAdd(&a.cursor[row], 1ull), s);
                }
            }
        }
        if (!a.fill) {
#pragma unroll
            for (int i = 0; i < C::TM; i++)
                if (local[i])
                    atomicAdd(&rowcnt[C::row(ty, i)], local[i]);
        }
    }
    __syncthreads();
    if (!a.fill)
        for (int r = tid; r < C::BM; r += C::NT)
            if (q0 + r < a.nq && rowcnt[r])
                atomicAdd(&a.counts[q0 + r], (unsigned long long)rowcnt[r]);
}

/* Rows whose claimed slots differ from their count (tile fill). */
__global__ void cursor_check_kernel(const unsigned long long *cursor, const int64_t *cap,
                                    int64_t n, int *mismatch)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        if ((int64_t)cursor[i] != cap[i])
            atomicOr(mismatch, 1);
}

/*
 * Per row of A (n x d): squared norm and norm (sq, nrm; may be NULL), the
 * twins' inverse norm (inv; may be NULL), and *wide set when a nonzero
 * squared norm leaves [lo, hi].
 */
template <typename T>
__global__ void radius_norms_kernel(const T *A, int64_t n, int64_t d, double *sq, double *nrm,
                                    double *inv, double lo, double hi, int *wide)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const T *x = A + i * d;
        if (inv) {
            if constexpr (std::is_same<T, float>::value)
                inv[i] = gsb__radius_invnorm_f32(x, d);
            else
                inv[i] = gsb__radius_invnorm_f64(x, d);
        }
        if (!sq && !wide)
            continue;
        double s = 0.0;
        for (int64_t k = 0; k < d; k++)
            s = fma((double)x[k], (double)x[k], s);
        if (sq) {
            sq[i] = s;
            nrm[i] = sqrt(s);
        }
        if (wide && s != 0.0 && !(s >= lo && s <= hi))
            atomicOr(wide, 1);
    }
}

/* ---- host side ---------------------------------------------------------------------- */

/* Scratch of one call, freed together. */
struct scratch {
    const gsb__backend *be;
    void *p[8];
    int n;
    ~scratch()
    {
        for (int k = 0; k < n; k++)
            gsb__cuda_free(be, p[k]);
    }
    template <typename P> int get(size_t count, P **out)
    {
        *out = NULL;
        if (n == 8)
            return GSB_CUDA_ERR(GSB_EINTERNAL, "radius_neighbors: scratch table full");
        int rc = gsb__cuda_alloc(be, (count ? count : 1) * sizeof(P), &p[n]);
        if (rc == GSB_OK)
            *out = (P *)p[n++];
        return rc;
    }
};

template <typename T, int M>
int launch_scan(const gsb__backend *be, const radius_args &a)
{
    radius_scan_kernel<T, M><<<grid_for(be, a.nq, SCAN_THREADS), SCAN_THREADS, 0,
                              gsb__cuda_ctx_of(be)->stream>>>(a);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

template <typename T>
int run_scan(const gsb__backend *be, const radius_args &a)
{
    switch (a.metric) {
    case GSB__METRIC_SQEUCLIDEAN: return launch_scan<T, GSB__METRIC_SQEUCLIDEAN>(be, a);
    case GSB__METRIC_EUCLIDEAN: return launch_scan<T, GSB__METRIC_EUCLIDEAN>(be, a);
    case GSB__METRIC_MANHATTAN: return launch_scan<T, GSB__METRIC_MANHATTAN>(be, a);
    case GSB__METRIC_COSINE: return launch_scan<T, GSB__METRIC_COSINE>(be, a);
    case GSB__METRIC_MINKOWSKI: return launch_scan<T, GSB__METRIC_MINKOWSKI>(be, a);
    default: return launch_scan<T, GSB__METRIC_CHEBYSHEV>(be, a);
    }
}

/* The tile kernel over every (query block, split of R). */
template <typename T>
int run_tile(const gsb__backend *be, radius_args &a)
{
    /* float32: 64 queries x 128 references, 4 x 8 per thread; float64 halves
     * the references so the accumulators fit the registers (topk's shapes) */
    typedef typename std::conditional<sizeof(T) == 4, tile_cfg<float, 64, 128, 8, 4, 8>,
                                      tile_cfg<double, 64, 64, 8, 4, 4>>::type C;
    const gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    int64_t qblocks = (a.nq + C::BM - 1) / C::BM;
    int64_t rtiles = (a.nr + C::BN - 1) / C::BN;
    /* enough blocks for a few waves, each split a whole number of tiles */
    int64_t want = 4 * (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 16);
    int64_t nsplit = (want + qblocks - 1) / qblocks;
    if (nsplit > rtiles)
        nsplit = rtiles;
    if (nsplit > 65535)
        nsplit = 65535;
    if (nsplit < 1)
        nsplit = 1;
    a.split_len = (rtiles + nsplit - 1) / nsplit * C::BN;
    nsplit = (a.nr + a.split_len - 1) / a.split_len;
    dim3 grid((unsigned)qblocks, (unsigned)(nsplit > 0 ? nsplit : 1));
    if (a.metric == GSB__METRIC_MANHATTAN)
        radius_tile_kernel<T, C, OP_L1><<<grid, C::NT, 0, ctx->stream>>>(a);
    else
        radius_tile_kernel<T, C, OP_DOT><<<grid, C::NT, 0, ctx->stream>>>(a);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

template <typename T>
int radius_run(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R,
               const gsb__radius_grid *grid, gsb__metric metric, double p, double eps,
               gsb__tensor *counts, const gsb__tensor *offsets, gsb__tensor *idx,
               gsb__tensor *dist)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    const int64_t nq = Q->rows, nr = R->rows, d = Q->cols;
    const bool f32 = sizeof(T) == 4;
    const bool tile = !grid && d >= TILE_MIN_D && nr > 0 &&
                      (metric == GSB__METRIC_EUCLIDEAN || metric == GSB__METRIC_SQEUCLIDEAN ||
                       metric == GSB__METRIC_COSINE || metric == GSB__METRIC_MANHATTAN);
    const bool cosine = metric == GSB__METRIC_COSINE;
    const bool dot = tile && metric != GSB__METRIC_MANHATTAN;
    scratch sc = {be, {0}, 0};
    radius_args a;
    memset(&a, 0, sizeof a);
    a.Q = Q->data;
    a.R = R->data;
    a.nq = nq;
    a.nr = nr;
    a.d = d;
    a.metric = (int)metric;
    a.p = p;
    a.thr = gsb__radius_threshold(metric, p, eps);
    /* cpu_radius.c's bound: topk's, already doubled */
    a.slack = 2.0 * ((double)(d + 2) * (f32 ? (double)FLT_EPSILON : DBL_EPSILON) +
                     (double)(2 * d + 8) * DBL_EPSILON);
    a.fill = offsets != NULL;
    a.counts = (unsigned long long *)counts->data;
    a.cap = (const int64_t *)counts->data;
    a.offsets = offsets ? (const int64_t *)offsets->data : NULL;
    a.idx = offsets ? (int64_t *)idx->data : NULL;
    a.dist = offsets && dist ? (double *)dist->data : NULL;
    a.nnz = offsets ? idx->rows * idx->cols : 0;
    if (grid) {
        a.grid = *grid;
        a.grid.keys = NULL;
        a.keys = (const int64_t *)grid->keys->data;
    }
    int rc = GSB_OK, host_mismatch = 0;
    int *flags = NULL;
    double *buf = NULL;
    GSB_CUDA_CHECK(sc.get(2, &flags)); /* [0] mismatch, [1] wide */
    CUDA_CHECK(cudaMemsetAsync(flags, 0, 2 * sizeof(int), stream));
    a.mismatch = flags;
    a.wide = flags + 1;
    if (cosine || dot) {
        /* per row of Q then R: [inv | sq | norm] as needed */
        GSB_CUDA_CHECK(sc.get((size_t)(3 * (nq + nr)), &buf));
        double *qinv = buf, *rinv = buf + nq, *qsq = buf + nq + nr, *rsq = qsq + nq;
        double *qnrm = rsq + nr, *rnrm = qnrm + nq;
        double lo = f32 ? 1e-28 : 1e-280, hi = f32 ? 1e30 : 1e300;
        if (cosine) {
            a.qinv = qinv;
            a.rinv = rinv;
        }
        if (dot) {
            a.qn = qsq;
            a.rn = rsq;
            a.qnorm = qnrm;
            a.rnorm = rnrm;
        }
        const T *Qd = (const T *)Q->data, *Rd = (const T *)R->data;
        if (nq > 0)
            radius_norms_kernel<T><<<grid_for(be, nq, NORM_THREADS), NORM_THREADS, 0, stream>>>(
                Qd, nq, d, dot ? qsq : NULL, qnrm, cosine ? qinv : NULL, lo, hi,
                dot ? flags + 1 : NULL);
        CUDA_CHECK(cudaGetLastError());
        if (nr > 0)
            radius_norms_kernel<T><<<grid_for(be, nr, NORM_THREADS), NORM_THREADS, 0, stream>>>(
                Rd, nr, d, dot ? rsq : NULL, rnrm, cosine ? rinv : NULL, lo, hi,
                dot ? flags + 1 : NULL);
        CUDA_CHECK(cudaGetLastError());
    }
    if (tile) {
        unsigned long long *cursor = NULL;
        if (a.fill) {
            GSB_CUDA_CHECK(sc.get((size_t)nq, &cursor));
            CUDA_CHECK(cudaMemsetAsync(cursor, 0, (size_t)nq * sizeof(*cursor), stream));
            a.cursor = cursor;
        } else {
            CUDA_CHECK(cudaMemsetAsync(counts->data, 0, (size_t)nq * sizeof(int64_t), stream));
        }
        GSB_CUDA_CHECK(run_tile<T>(be, a));
        if (a.fill) {
            cursor_check_kernel<<<grid_for(be, nq, 256), 256, 0, stream>>>(cursor, a.cap, nq,
                                                                          flags);
            CUDA_CHECK(cudaGetLastError());
        }
    } else {
        GSB_CUDA_CHECK(run_scan<T>(be, a));
    }
    if (a.fill) {
        GSB_CUDA_CHECK(gsb__cuda_copy_d2h(be, &host_mismatch, flags, sizeof(int)));
        if (host_mismatch)
            rc = GSB_CUDA_ERR(GSB_EINTERNAL, "radius_neighbors: the fill pass found other "
                                             "neighbours than the counts say");
    }
done:
    return rc;
}

int check_grid(const gsb__backend *be, const gsb__radius_grid *g, const gsb__tensor *R,
               const char *op)
{
    if (g->dims < 1 || g->dims > 3 || g->dims != R->cols)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: a grid of %d columns for %lld columns", op,
                            g->dims, (long long)R->cols);
    int rc = check_vector(be, g->keys, GSB_I64, R->rows, op, "grid keys");
    if (rc != GSB_OK)
        return rc;
    for (int k = 0; k < g->dims; k++)
        if (!(g->cell[k] > 0) || g->ncell[k] < 1)
            return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: grid column %d has no cells", op, k);
    return GSB_OK;
}

} // namespace

extern "C" int gsb__cuda_radius_neighbors(const gsb__backend *be, const gsb__tensor *Q,
                                          const gsb__tensor *R, const gsb__radius_grid *grid,
                                          gsb__metric metric, double p, double eps,
                                          gsb__tensor *counts, const gsb__tensor *offsets,
                                          gsb__tensor *idx, gsb__tensor *dist)
{
    const char *op = "radius_neighbors";
    int rc;
    if ((rc = check_tensor(be, Q, (gsb_dtype)0, -1, -1, op, "Q")) != GSB_OK ||
        (rc = check_tensor(be, R, Q->dtype, -1, Q->cols, op, "R")) != GSB_OK)
        return rc;
    if (metric < GSB__METRIC_SQEUCLIDEAN || metric > GSB__METRIC_CHEBYSHEV)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: unknown metric %d", op, (int)metric);
    if (metric == GSB__METRIC_MINKOWSKI && !(p > 0 && isfinite(p)))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: minkowski power %g", op, p);
    if (!(eps >= 0) || isinf(eps))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: radius %g", op, eps);
    if (grid && (rc = check_grid(be, grid, R, op)) != GSB_OK)
        return rc;
    if ((rc = check_vector(be, counts, GSB_I64, Q->rows, op, "counts")) != GSB_OK)
        return rc;
    if (offsets) {
        if ((rc = check_vector(be, offsets, GSB_I64, Q->rows, op, "offsets")) != GSB_OK ||
            (rc = check_tensor(be, idx, GSB_I64, -1, -1, op, "idx")) != GSB_OK)
            return rc;
        if (dist && (rc = check_vector(be, dist, GSB_F64, idx->rows * idx->cols, op, "dist")) !=
                        GSB_OK)
            return rc;
    }
    if ((rc = check_dims(Q->cols, R->rows, op)) != GSB_OK)
        return rc;
    if (Q->rows == 0)
        return GSB_OK;
    return Q->dtype == GSB_F32
               ? radius_run<float>(be, Q, R, grid, metric, p, eps, counts, offsets, idx, dist)
               : radius_run<double>(be, Q, R, grid, metric, p, eps, counts, offsets, idx, dist);
}
