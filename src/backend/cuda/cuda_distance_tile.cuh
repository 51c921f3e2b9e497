/*
 * cuda_distance_tile.cuh - what the fused distance kernels share
 * (cuda_distance.cu: pairwise, argmin_sqdist; cuda_topk.cu:
 * topk): argument checks in the CPU twin's words, row norms, and the tile
 * engine that computes a block of "distances" between rows of A and rows of
 * B with SGEMM-style register tiling.
 *
 * The tile engine.  A block of NT threads owns a BM x BN tile: BM rows of A
 * against BN rows of B, reduced over the d columns BK at a time.  Each step
 * stages a BK-column slice of both row sets in shared memory, transposed
 * (slice[c][row]) so that a thread reads its rows' and columns' values as
 * 16-byte vectors, and each thread accumulates a TM x TN sub-tile in
 * registers: TM + TN shared loads feed TM * TN multiply-adds.  Slices are
 * double buffered: the next slice is fetched from global memory into
 * registers while the current one is consumed, so one barrier per step
 * suffices and the loads' latency hides behind the arithmetic; the first
 * slice of the next tile is fetched during the last step of the current
 * one, so its latency hides behind the caller's epilogue.
 *
 * A thread's TM rows are V-wide runs spread BM / (TM / V) apart (V = 16
 * bytes of T), and likewise its TN columns: neighbouring threads then read
 * neighbouring 16-byte words of a slice row, which is free of bank
 * conflicts.  Global loads are scalar: a tensor may be a row range of
 * another (any element-aligned address), so no wider alignment is assumed;
 * consecutive threads read consecutive elements of a row, so they coalesce.
 * Rows past the end and columns past d load as 0, which leaves dot
 * products, squared differences and absolute differences unchanged.
 *
 * The accumulation runs in T: fp32 FMA for float32 (never TF32), fp64 for
 * float64.  Ops that need exact values (argmin's winning distance, topk's
 * candidates) recompute them in double from the inputs.
 */
#ifndef GSB_CUDA_DISTANCE_TILE_CUH
#define GSB_CUDA_DISTANCE_TILE_CUH

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_common.h"

namespace gsb_dist {

constexpr unsigned FULL_MASK = 0xffffffffu;

/* (av, aj) ranks before (bv, bj): closer, or as close with a smaller index;
 * j < 0 is "no candidate yet" and ranks last (argmin_sqdist's order, shared
 * by its exact kernel and the tensor-core ranking). */
template <typename T>
__device__ __forceinline__ bool argmin_before(T av, int aj, T bv, int bj)
{
    if (aj < 0)
        return false;
    if (bj < 0)
        return true;
    return av < bv || (av == bv && aj < bj);
}

/* What a tile accumulates per (row of A, row of B). */
enum tile_op {
    OP_DOT = 0,    /* sum a * b */
    OP_SQDIFF = 1, /* sum (a - b)^2: no cancellation, for materialised distances */
    OP_L1 = 2      /* sum |a - b| */
};

/* Per float type: the 16-byte vector, its width, and rounding up from double. */
template <typename T> struct num;
template <> struct num<float> {
    typedef float4 vec;
    static constexpr int V = 4;
    static constexpr double eps = (double)FLT_EPSILON;
    /* overflow guard for squared norms, see cuda_topk.cu */
    static constexpr double big = 1e30;
    __device__ static float up(double x) { return __double2float_ru(x); }
    __device__ static void unpack(const float *s, float *r)
    {
        float4 v = *reinterpret_cast<const float4 *>(s);
        r[0] = v.x;
        r[1] = v.y;
        r[2] = v.z;
        r[3] = v.w;
    }
};
template <> struct num<double> {
    typedef double2 vec;
    static constexpr int V = 2;
    static constexpr double eps = DBL_EPSILON;
    static constexpr double big = 1e300;
    __device__ static double up(double x) { return x; }
    __device__ static void unpack(const double *s, double *r)
    {
        double2 v = *reinterpret_cast<const double2 *>(s);
        r[0] = v.x;
        r[1] = v.y;
    }
};

/* A tile shape: BM x BN outputs per block, BK columns per step, TM x TN per thread. */
template <typename T, int BM_, int BN_, int BK_, int TM_, int TN_>
struct tile_cfg {
    typedef T type;
    static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_;
    static constexpr int V = num<T>::V;
    static constexpr int TX = BN / TN; /* threads across a row of the tile */
    static constexpr int TY = BM / TM;
    static constexpr int NT = TX * TY;
    /* padding by one vector keeps slice rows 16-byte aligned and spreads the
     * transposed stores of a warp over all banks */
    static constexpr int LDA = BM + V, LDB = BN + V;
    static constexpr int LA = BM * BK / NT, LB = BN * BK / NT; /* loads per thread per step */
    static_assert(BM % TM == 0 && BN % TN == 0, "tile must divide");
    static_assert(TM % V == 0 && TN % V == 0, "thread tile must hold whole vectors");
    static_assert((BM * BK) % NT == 0 && (BN * BK) % NT == 0, "slices must divide");
    static_assert(32 % TX == 0, "a row's threads must sit in one warp");
    struct smem {
        T a[2][BK][LDA];
        T b[2][BK][LDB];
    };
    /* tile-local row of a thread's i-th row, column of its j-th column */
    __device__ static int row(int ty, int i) { return (i / V) * (TY * V) + ty * V + i % V; }
    __device__ static int col(int tx, int j) { return (j / V) * (TX * V) + tx * V + j % V; }
};

template <int OP, typename T>
__device__ __forceinline__ T tile_combine(T a, T b, T acc)
{
    if constexpr (OP == OP_DOT) {
        return fma(a, b, acc);
    } else if constexpr (OP == OP_SQDIFF) {
        T t = a - b;
        return fma(t, t, acc);
    } else {
        return acc + fabs(a - b);
    }
}

/*
 * Where a thread's share of a slice comes from: element p of its share is
 * row (first + p * NT / BK) and column (k0 + tid % BK) of the slice, so one
 * pointer and one row step describe all of them.
 */
template <typename T>
struct tile_src {
    const T *ptr;  /* element (first row, tid % BK) */
    int64_t row;   /* first row */
    int64_t col;   /* tid % BK */
    int64_t step;  /* elements between consecutive rows of the share */
    int64_t nrows;
};

template <int BK, int NT, typename T>
__device__ __forceinline__ tile_src<T> tile_source(const T *M, int64_t nrows, int64_t r0,
                                                   int64_t d, int tid)
{
    static_assert(NT % BK == 0, "a thread keeps its slice column");
    tile_src<T> s;
    s.row = r0 + tid / BK;
    s.col = tid % BK;
    s.step = (int64_t)(NT / BK) * d;
    s.nrows = nrows;
    s.ptr = M + s.row * d + s.col;
    return s;
}

/* The thread's share of the slice at column k0, into registers. */
template <int L, int BK, int NT, typename T>
__device__ __forceinline__ void tile_fetch(const tile_src<T> &s, int64_t d, int64_t k0,
                                           T (&reg)[L])
{
    const bool col_ok = s.col + k0 < d;
    const T *p = s.ptr + k0;
#pragma unroll
    for (int q = 0; q < L; q++)
        reg[q] = col_ok && s.row + q * (NT / BK) < s.nrows ? p[q * s.step] : T(0);
}

template <int L, int BK, int NT, int LD, typename T>
__device__ __forceinline__ void tile_stash(T (*s)[LD], int tid, const T (&reg)[L])
{
#pragma unroll
    for (int q = 0; q < L; q++)
        s[tid % BK][tid / BK + q * (NT / BK)] = reg[q];
}

/*
 * A's rows through a list (MAP): tile row r is A row map[r], for r < nrows
 * (argmin_sqdist's rows left by the tensor cores, read in place).  A pointer
 * per element of the thread's share, NULL past nrows (loads 0).
 */
template <typename T, int L>
struct tile_msrc {
    const T *ptr[L]; /* element (map[row], tid % BK) */
    int64_t col;     /* tid % BK */
};

template <int L, int BK, int NT, typename T>
__device__ __forceinline__ tile_msrc<T, L> tile_msource(const T *M, const int32_t *map,
                                                        int64_t nrows, int64_t r0, int64_t d,
                                                        int tid)
{
    static_assert(NT % BK == 0, "a thread keeps its slice column");
    tile_msrc<T, L> s;
    s.col = tid % BK;
#pragma unroll
    for (int q = 0; q < L; q++) {
        const int64_t r = r0 + tid / BK + q * (NT / BK);
        s.ptr[q] = r < nrows ? M + (int64_t)map[r] * d + s.col : NULL;
    }
    return s;
}

template <int L, typename T>
__device__ __forceinline__ void tile_mfetch(const tile_msrc<T, L> &s, int64_t d, int64_t k0,
                                            T (&reg)[L])
{
    const bool col_ok = s.col + k0 < d;
#pragma unroll
    for (int q = 0; q < L; q++)
        reg[q] = col_ok && s.ptr[q] ? s.ptr[q][k0] : T(0);
}

/* A thread's share of a tile's first slice, fetched ahead (see tile_accumulate). */
template <class C>
struct tile_pipe {
    typename C::type ra[C::LA], rb[C::LB];
};

/* Fetch the first slice of the tile (A rows from a0, through amap where
 * MAP; B rows from b0) into p. */
template <class C, typename T, bool MAP = false>
__device__ __forceinline__ void tile_prefetch(tile_pipe<C> &p, const T *__restrict__ A,
                                              int64_t na, int64_t a0, const T *__restrict__ B,
                                              int64_t nb, int64_t b0, int64_t d, int tid,
                                              const int32_t *__restrict__ amap = NULL)
{
    if (d <= 0)
        return;
    if constexpr (MAP)
        tile_mfetch(tile_msource<C::LA, C::BK, C::NT>(A, amap, na, a0, d, tid), d, 0, p.ra);
    else
        tile_fetch<C::LA, C::BK, C::NT>(tile_source<C::BK, C::NT>(A, na, a0, d, tid), d, 0,
                                        p.ra);
    tile_fetch<C::LB, C::BK, C::NT>(tile_source<C::BK, C::NT>(B, nb, b0, d, tid), d, 0, p.rb);
}

/*
 * acc[i][j] = OP over the d columns of A row (a0 + row(ty, i)) and B row
 * (b0 + col(tx, j)); A has na rows, B nb.  p holds the tile's first slice
 * (tile_prefetch, or the previous call); during the last step the first
 * slice of the next tile (rows from a0n and b0n, when has_next) is fetched
 * into p, so its loads are in flight while the caller consumes acc.  Every
 * thread of the block must call it (it synchronises the block); on return
 * the shared slices may be reused by the next call.  MAP: A's rows through
 * amap (tile_msource), with the same arithmetic.
 */
template <int OP, class C, typename T, bool MAP = false>
__device__ __forceinline__ void
tile_accumulate(typename C::smem &sm, tile_pipe<C> &p, const T *__restrict__ A, int64_t na,
                int64_t a0, const T *__restrict__ B, int64_t nb, int64_t b0, int64_t d,
                bool has_next, int64_t a0n, int64_t b0n, int tid, int tx, int ty,
                T (&acc)[C::TM][C::TN], const int32_t *__restrict__ amap = NULL)
{
#pragma unroll
    for (int i = 0; i < C::TM; i++)
#pragma unroll
        for (int j = 0; j < C::TN; j++)
            acc[i][j] = T(0);
    if (d <= 0)
        return;
    tile_src<T> sa;
    tile_msrc<T, C::LA> ma;
    if constexpr (MAP)
        ma = tile_msource<C::LA, C::BK, C::NT>(A, amap, na, a0, d, tid);
    else
        sa = tile_source<C::BK, C::NT>(A, na, a0, d, tid);
    const tile_src<T> sb = tile_source<C::BK, C::NT>(B, nb, b0, d, tid);
    tile_stash<C::LA, C::BK, C::NT, C::LDA>(sm.a[0], tid, p.ra);
    tile_stash<C::LB, C::BK, C::NT, C::LDB>(sm.b[0], tid, p.rb);
    __syncthreads();
    int64_t steps = (d + C::BK - 1) / C::BK;
    for (int64_t s = 0; s < steps; s++) {
        int cur = (int)(s & 1);
        bool more = s + 1 < steps;
        if (more) {
            if constexpr (MAP)
                tile_mfetch(ma, d, (s + 1) * C::BK, p.ra);
            else
                tile_fetch<C::LA, C::BK, C::NT>(sa, d, (s + 1) * C::BK, p.ra);
            tile_fetch<C::LB, C::BK, C::NT>(sb, d, (s + 1) * C::BK, p.rb);
        } else if (has_next) {
            tile_prefetch<C, T, MAP>(p, A, na, a0n, B, nb, b0n, d, tid, amap);
        }
#pragma unroll
        for (int kk = 0; kk < C::BK; kk++) {
            T a[C::TM], b[C::TN];
#pragma unroll
            for (int g = 0; g < C::TM / C::V; g++)
                num<T>::unpack(&sm.a[cur][kk][g * C::TY * C::V + ty * C::V], &a[g * C::V]);
#pragma unroll
            for (int g = 0; g < C::TN / C::V; g++)
                num<T>::unpack(&sm.b[cur][kk][g * C::TX * C::V + tx * C::V], &b[g * C::V]);
#pragma unroll
            for (int i = 0; i < C::TM; i++)
#pragma unroll
                for (int j = 0; j < C::TN; j++)
                    acc[i][j] = tile_combine<OP>(a[i], b[j], acc[i][j]);
        }
        if (more) {
            tile_stash<C::LA, C::BK, C::NT, C::LDA>(sm.a[cur ^ 1], tid, p.ra);
            tile_stash<C::LB, C::BK, C::NT, C::LDB>(sm.b[cur ^ 1], tid, p.rb);
        }
        __syncthreads();
    }
}

/*
 * out[i] = ||A[i]||^2 accumulated in double, or with inv its inverse norm
 * (0 for a zero row, as the CPU twin's cosine), as O; one warp per row.
 * wide (may be NULL) is set when a squared norm exceeds limit.
 */
template <typename T, typename O>
__global__ void row_norms_kernel(const T *__restrict__ A, int64_t n, int64_t d, int inv,
                                 O *__restrict__ out, double limit, int *wide)
{
    int lane = threadIdx.x & 31;
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t i = warp; i < n; i += nwarps) {
        const T *a = A + i * d;
        double s = 0.0;
        for (int64_t j = lane; j < d; j += 32) {
            double v = (double)a[j];
            s += v * v;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            s += __shfl_xor_sync(FULL_MASK, s, off);
        if (lane == 0) {
            if (wide && !(s <= limit))
                atomicOr(wide, 1);
            out[i] = (O)(inv ? (s > 0.0 ? 1.0 / sqrt(s) : 0.0) : s);
        }
    }
}

/* Blocks of `threads` for grid-stride work over `items` items, a few waves at most. */
static inline int grid_for(const gsb__backend *be, int64_t items, int threads)
{
    int64_t blocks = (items + threads - 1) / threads;
    int sm = gsb__cuda_ctx_of(be)->sm_count;
    int64_t cap = (int64_t)(sm > 0 ? sm : 16) * 32;
    if (blocks > cap)
        blocks = cap;
    return blocks < 1 ? 1 : (int)blocks;
}

/* Launch row_norms_kernel over the n rows of A (n x d, device). */
template <typename T, typename O>
static int row_norms(const gsb__backend *be, const T *A, int64_t n, int64_t d, int inv, O *out,
                     double limit, int *wide)
{
    if (n == 0)
        return GSB_OK;
    row_norms_kernel<T, O><<<grid_for(be, n * 32, 256), 256, 0, gsb__cuda_ctx_of(be)->stream>>>(
        A, n, d, inv, out, limit, wide);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* ---- argument checks: the CPU twin's checks and messages ------------------------- */

/* t on this GPU: a host tensor here would be an illegal address in a kernel. */
static inline int check_on(const gsb__backend *be, const gsb__tensor *t, const char *op,
                           const char *name)
{
    if (t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    return GSB_OK;
}

/* Shape/dtype check of a distance op's argument (cpu_distance.c's dist_check);
 * dtype 0 accepts any float dtype, rows or cols -1 any. */
static inline int check_tensor(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype,
                               int64_t rows, int64_t cols, const char *op, const char *name)
{
    if (!t || !t->data)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (dtype ? t->dtype != dtype : (t->dtype != GSB_F32 && t->dtype != GSB_F64))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                            gsb__cuda_dtype_name(t->dtype));
    if ((rows >= 0 && t->rows != rows) || (cols >= 0 && t->cols != cols))
        return GSB_CUDA_ERR(GSB_EINTERNAL,
                            "%s: %s has shape (%lld, %lld), expected (%lld, %lld)", op, name,
                            (long long)t->rows, (long long)t->cols, (long long)rows,
                            (long long)cols);
    return check_on(be, t, op, name);
}

/* A vector argument: any rows x cols layout holding n elements. */
static inline int check_vector(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype,
                               int64_t n, const char *op, const char *name)
{
    int rc = check_tensor(be, t, dtype, -1, -1, op, name);
    if (rc != GSB_OK)
        return rc;
    if (t->rows * t->cols != n)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has %lld elements, expected %lld", op, name,
                            (long long)(t->rows * t->cols), (long long)n);
    return GSB_OK;
}

/* The CPU twin hands these to BLAS as int; the kernels index references and
 * centres with int as well. */
static inline int check_dims(int64_t a, int64_t b, const char *op)
{
    if (a > INT_MAX || b > INT_MAX)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "%s: dimension too large for BLAS (%lld)", op,
                            (long long)(a > b ? a : b));
    return GSB_OK;
}

static inline int valid_metric(gsb__metric m)
{
    return m == GSB__METRIC_SQEUCLIDEAN || m == GSB__METRIC_EUCLIDEAN ||
           m == GSB__METRIC_MANHATTAN || m == GSB__METRIC_COSINE;
}

} // namespace gsb_dist

#endif
