/*
 * cuda_topk.cu - the GPU's topk: for each query row the k nearest reference
 * rows (brute force, fused).  Twin: topk in cpu_distance.c, whose contract
 * this keeps exactly: distances are the metric's true value computed in
 * double, ties go to the smaller index, exclude_self skips j == i.
 *
 * Why not exact distances throughout: an exact (double, direct-difference)
 * distance costs several times a fp32 dot product, and the GEMM expansion
 * alone cannot rank exactly (its rounding can swap near ties and it cannot
 * break exact ties the way the CPU does).  So, like the CPU twin, the
 * expansion only prunes, and the few candidates that survive are ranked by
 * their exact distance:
 *
 *  1. A block takes BM queries and one split of the references (splits keep
 *     the GPU busy when there are few queries; their lists are merged at the
 *     end; their number is chosen for whole waves of blocks).  It streams the split through the tile engine BN references at
 *     a time: dot products (euclidean family, cosine: with norms computed
 *     once in double) or sums of |q - r| (manhattan), in the inputs' dtype.
 *  2. Each query keeps a sorted list of its best k (exact distance, index)
 *     and an admission threshold derived from the list's k-th distance.  A
 *     candidate is admitted unless its approximate distance, less a bound on
 *     the approximation's error (the CPU twin's bound), exceeds the k-th
 *     exact distance; so no member of the true top k is ever turned away,
 *     whatever the rounding.  The test costs one FMA and one compare per
 *     pair: ||r||^2 (1 - 1.5 s) - 2 q.r <= thr - ||q||^2 (1 - 1.5 s) with
 *     s the relative slack (1.5 s (||q||^2 + ||r||^2) bounds the CPU's
 *     s (||q|| ||r|| + ||q||^2 + ||r||^2)); cosine and manhattan likewise.
 *  3. Admitted candidates wait in a per-query pending list in shared memory
 *     (32 places).  They are handed over in rounds, each of the TX threads
 *     of a query's row giving its best (lowest approximation) first, at
 *     most 16 per query per round; once some pending list holds 16, every
 *     list is flushed: each pending query goes to one warp, which computes
 *     the exact distances (a group of lanes per candidate, over the
 *     columns), sorts them with a warp bitonic sort and merges them into
 *     the query's list (parallel merge by ranks, in place), then tightens
 *     the threshold, and candidates of the tile that the new thresholds
 *     exclude are dropped.  The first tile of a split admits everything,
 *     but best-first hand-over makes its first flush set a tight
 *     threshold; after that admissions trickle in, wait for a flush, and a
 *     tile that admits nothing costs one block-wide vote.  Splits end with
 *     a flush of what is still pending.
 *  4. A merge kernel combines the splits' sorted lists per query (one warp
 *     per query, one lane per split) and writes dist (sqrt for euclidean)
 *     and idx.  Because every list holds exact values ranked by (distance,
 *     index), the result does not depend on the split or the order in
 *     which candidates arrived.
 *
 * Lists live in shared memory when BM * k entries fit in LIST_SMEM_BYTES,
 * else in the global scratch that the merge reads anyway (correct for any
 * k; slower flushes).  Queries are processed in chunks so that scratch stays
 * bounded.  Inputs whose squared norms could overflow the dtype in the
 * expansion (above num<T>::big) switch the pruning off (every candidate is
 * ranked exactly): slow but right.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_distance_tile.cuh"
#include "backend/cuda/cuda_topk_list.cuh"

using namespace gsb_dist;
using namespace gsb_topk;

namespace {

constexpr int64_t LIST_SMEM_BYTES = 64 << 10;
constexpr int64_t LIST_SCRATCH_BYTES = (int64_t)256 << 20;
constexpr int64_t MAX_SPLITS = 32;      /* one lane per split in the merge */
constexpr int64_t MIN_SPLIT_REFS = 2048; /* a split shorter than this is not worth its fill */
/* Pending lists hold 32 candidates per query; a round hands over at most 16
 * per query, so they are flushed once one holds FLUSH_AT. */
constexpr int PENDING = 32;
constexpr int FLUSH_AT = 16;
static_assert(PENDING <= 32, "a flush gives each pending candidate one lane");
/* A split's fill (its first tiles admit nearly everything) costs about as
 * much as streaming this many more references. */
constexpr int64_t FILL_REFS = 2560;

/* Everything a topk block needs (by value). */
struct topk_args {
    const void *Q, *R; /* full query and reference matrices */
    int64_t nr, d, k;
    int64_t q_begin, nqc; /* this launch's queries [q_begin, q_begin + nqc) */
    int64_t split_len;    /* references per split, a multiple of BN */
    int metric, exclude_self;
    const double *qaux; /* per query: ||q||^2, or 1 / ||q|| for cosine (NULL: manhattan) */
    const double *raux; /* per reference: 1 / ||r|| (cosine) */
    const void *rb;     /* per reference, in T: (1 - 1.5 s) ||r||^2, or -1 / ||r|| for cosine */
    double slack;
    const int *wide;    /* set: norms too large for the expansion, rank everything exactly */
    double *lv;         /* lists out: [split][query of the chunk][k] distances ... */
    int *li;            /* ... and indices */
    int lists_in_smem;
};

template <class C>
struct topk_smem {
    typename C::smem tile;
    typename C::type tq[C::BM]; /* admission thresholds, in the approximation's terms */
    double qaux[C::BM];
    int len[C::BM];  /* list lengths */
    int pcnt[C::BM]; /* pending counts */
    int pidx[C::BM][PENDING];
    double mv[C::NT / 32][32]; /* a warp's sorted pending candidates, for the merge */
    int mi[C::NT / 32][32];
};

/*
 * Flush query row r's pending candidates into its list (one warp, all
 * lanes): exact distances (cuda_topk_list.cuh's exact_sums), a sort, a
 * merge, a new threshold.
 */
template <typename T, int OP, class C>
__device__ __noinline__ void flush_row(const topk_args &a, topk_smem<C> &S, int r, int lane, int warp,
                          double *lv, int *li, int wide)
{
    const int n = S.pcnt[r];
    if (n == 0)
        return;
    const int64_t qg = a.q_begin + (int64_t)blockIdx.x * C::BM + r;
    const bool cosine = OP == OP_DOT && a.metric == GSB__METRIC_COSINE;
    const int K = (int)a.k;
    const double v = exact_sums<T>((const T *)a.Q + qg * a.d, (const T *)a.R, S.pidx[r], n, a.d,
                                   OP == OP_L1 ? SUM_L1 : (cosine ? SUM_DOT : SUM_SQ), lane);
    double *Lv = lv + (int64_t)r * K;
    int *Li = li + (int64_t)r * K;
    const int nl = merge_flushed(v, S.pidx[r], n, cosine, S.qaux[r], a.raux, Lv, Li, S.len[r], K,
                                 S.mv[warp], S.mi[warp], lane);
    if (lane == 0) {
        S.len[r] = nl;
        S.pcnt[r] = 0;
        if (nl == K)
            S.tq[r] = admit_threshold<T>(Lv[K - 1], S.qaux[r], a.metric, a.slack, wide);
    }
    __syncwarp();
}

/*
 * Block (x, y): queries [x BM, x BM + BM) of the chunk against split y of
 * the references; leaves each query's sorted list (padded with empty
 * slots) in a.lv / a.li.
 */
template <typename T, class C, int OP>
__global__ void __launch_bounds__(C::NT, 2) topk_kernel(const __grid_constant__ topk_args a)
{
    constexpr int BM = C::BM, TM = C::TM, TN = C::TN, NW = C::NT / 32;
    constexpr int HAND = (PENDING - FLUSH_AT) / C::TX; /* per thread, row and round */
    static_assert(TM * TN <= 32, "the admission mask has 32 bits");
    static_assert(HAND >= 1, "a round must hand over something");
    __shared__ __align__(16) topk_smem<C> S;
    extern __shared__ __align__(16) unsigned char topk_dyn[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int tx = tid % C::TX, ty = tid / C::TX;
    const T *R = (const T *)a.R, *rb = (const T *)a.rb;
    const int64_t K = a.k, d = a.d;
    const int64_t qb0 = (int64_t)blockIdx.x * BM; /* first query of the block, in the chunk */
    const int64_t split = blockIdx.y;
    const int64_t j_begin = split * a.split_len;
    const int64_t j_end = j_begin + a.split_len < a.nr ? j_begin + a.split_len : a.nr;
    const int wide = *a.wide;
    const T *Qc = (const T *)a.Q + a.q_begin * d;

    double *lv;
    int *li;
    if (a.lists_in_smem) {
        lv = (double *)topk_dyn;
        li = (int *)(lv + BM * K);
    } else {
        size_t off = ((size_t)split * (size_t)a.nqc + (size_t)qb0) * (size_t)K;
        lv = a.lv + off;
        li = a.li + off;
    }
    for (int r = tid; r < BM; r += C::NT) {
        bool valid = qb0 + r < a.nqc;
        S.len[r] = 0;
        S.pcnt[r] = 0;
        S.tq[r] = valid ? (T)INFINITY : -(T)INFINITY;
        S.qaux[r] = valid && a.qaux ? a.qaux[a.q_begin + qb0 + r] : 0.0;
    }
    __syncthreads();

    tile_pipe<C> pipe;
    tile_prefetch(pipe, Qc, a.nqc, qb0, R, j_end, j_begin, d, tid);
    for (int64_t c0 = j_begin; c0 < j_end; c0 += C::BN) {
        T acc[TM][TN];
        tile_accumulate<OP, C>(S.tile, pipe, Qc, a.nqc, qb0, R, j_end, c0, d, c0 + C::BN < j_end,
                               qb0, c0 + C::BN, tid, tx, ty, acc);

        /* approximations and the admission mask (bit i * TN + j) */
        T tq[TM];
#pragma unroll
        for (int i = 0; i < TM; i++)
            tq[i] = S.tq[C::row(ty, i)];
        unsigned mask = 0;
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int64_t c = c0 + C::col(tx, j);
            bool cv = c < j_end;
            if constexpr (OP == OP_DOT) {
                /* euclidean family: (1 - 1.5 s) ||r||^2 - 2 q.r; cosine: -(q.r) / ||r|| */
                T rbc = cv ? rb[c] : T(0);
                bool cos = a.metric == GSB__METRIC_COSINE;
                T mul = cos ? rbc : T(-2), add = cos ? T(0) : rbc;
#pragma unroll
                for (int i = 0; i < TM; i++)
                    acc[i][j] = fma(acc[i][j], mul, add);
            }
#pragma unroll
            for (int i = 0; i < TM; i++) {
                int64_t q = qb0 + C::row(ty, i);
                /* NaN (overflow) is admitted: only a sure loser is turned away */
                bool ok = cv && q < a.nqc && !(a.exclude_self && c == a.q_begin + q) &&
                          !(acc[i][j] > tq[i]);
                if (ok)
                    mask |= 1u << (i * TN + j);
            }
        }

        /* rounds: hand the admitted candidates over, best first; once a
         * pending list is half full, flush them all and drop what the new
         * thresholds exclude.  Flushing only then (not after every tile
         * that admits something) keeps the steady state, where a few
         * candidates trickle in per tile, nearly free. */
        while (__syncthreads_or(mask != 0)) {
            int full = 0;
#pragma unroll
            for (int i = 0; i < TM; i++) {
                int r = C::row(ty, i);
                for (int h = 0; h < HAND; h++) {
                    int b = -1;
                    T best = T(0);
#pragma unroll
                    for (int j = 0; j < TN; j++)
                        if (((mask >> (i * TN + j)) & 1u) && (b < 0 || acc[i][j] < best)) {
                            b = j;
                            best = acc[i][j];
                        }
                    if (b < 0)
                        break;
                    mask &= ~(1u << (i * TN + b));
                    int p = atomicAdd(&S.pcnt[r], 1);
                    S.pidx[r][p] = (int)(c0 + C::col(tx, b));
                    full |= p + 1 >= FLUSH_AT;
                }
            }
            if (__syncthreads_or(full)) {
                for (int r = warp; r < BM; r += NW)
                    flush_row<T, OP, C>(a, S, r, lane, warp, lv, li, wide);
                __syncthreads();
#pragma unroll
                for (int i = 0; i < TM; i++) {
                    T t = S.tq[C::row(ty, i)];
#pragma unroll
                    for (int j = 0; j < TN; j++)
                        if (acc[i][j] > t)
                            mask &= ~(1u << (i * TN + j));
                }
            }
        }
    }
    /* what is still pending goes into the lists */
    __syncthreads();
    for (int r = warp; r < BM; r += NW)
        flush_row<T, OP, C>(a, S, r, lane, warp, lv, li, wide);
    __syncthreads();

    /* the lists out, empty slots as (inf, SENTINEL) */
    for (int r = warp; r < BM; r += NW) {
        int64_t q = qb0 + r;
        if (q >= a.nqc)
            continue;
        int len = S.len[r];
        size_t off = ((size_t)split * (size_t)a.nqc + (size_t)q) * (size_t)K;
        double *gv = a.lv + off;
        int *gi = a.li + off;
        const double *sv = lv + (int64_t)r * K;
        const int *si = li + (int64_t)r * K;
        for (int64_t p = lane; p < K; p += 32) {
            if (p >= len) {
                gv[p] = INFINITY;
                gi[p] = SENTINEL;
            } else if (a.lists_in_smem) {
                gv[p] = sv[p];
                gi[p] = si[p];
            }
        }
    }
}

/*
 * Query q of the chunk: merge the nsplit sorted lists (one lane per split)
 * into its row of dist (the metric's value) and idx.
 */
template <typename T>
__global__ void topk_merge_kernel(const double *__restrict__ lv, const int *__restrict__ li,
                                  int64_t nqc, int64_t K, int nsplit, int euclid,
                                  T *__restrict__ dist, int64_t *__restrict__ idx)
{
    const int lane = threadIdx.x & 31;
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t q = warp; q < nqc; q += nwarps) {
        T *dq = dist + q * K;
        int64_t *iq = idx + q * K;
        if (nsplit == 1) {
            const double *v = lv + q * K;
            const int *ix = li + q * K;
            for (int64_t p = lane; p < K; p += 32) {
                dq[p] = (T)(euclid ? sqrt(v[p]) : v[p]);
                iq[p] = ix[p];
            }
            continue;
        }
        const double *mv = lv + ((int64_t)lane * nqc + q) * K;
        const int *mi = li + ((int64_t)lane * nqc + q) * K;
        int64_t pos = 0;
        double hv = INFINITY;
        int hi = SENTINEL;
        if (lane < nsplit) {
            hv = mv[0];
            hi = mi[0];
        }
        for (int64_t o = 0; o < K; o++) {
            double bv = hv;
            int bi = hi;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) {
                double ov = __shfl_xor_sync(FULL_MASK, bv, off);
                int oi = __shfl_xor_sync(FULL_MASK, bi, off);
                if (ranks_before(ov, oi, bv, bi)) {
                    bv = ov;
                    bi = oi;
                }
            }
            /* a reference belongs to one split: the winner's lane advances */
            if (lane < nsplit && hi == bi && hi != SENTINEL) {
                pos++;
                hv = pos < K ? mv[pos] : (double)INFINITY;
                hi = pos < K ? mi[pos] : SENTINEL;
            }
            if (lane == 0) {
                dq[o] = (T)(euclid ? sqrt(bv) : bv);
                iq[o] = bi;
            }
        }
    }
}

template <typename T, class C, int OP>
int topk_launch(const gsb__backend *be, topk_args &a, int64_t nq, int64_t nqc_max,
                int64_t nsplit, size_t dyn, T *dist, int64_t *idx)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    if (dyn > 0)
        CUDA_TRY(cudaFuncSetAttribute(topk_kernel<T, C, OP>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
    for (int64_t q0 = 0; q0 < nq; q0 += nqc_max) {
        a.q_begin = q0;
        a.nqc = nq - q0 < nqc_max ? nq - q0 : nqc_max;
        dim3 grid((unsigned)((a.nqc + C::BM - 1) / C::BM), (unsigned)nsplit);
        topk_kernel<T, C, OP><<<grid, C::NT, dyn, stream>>>(a);
        CUDA_LAUNCH_CHECK();
        topk_merge_kernel<T><<<grid_for(be, a.nqc * 32, 256), 256, 0, stream>>>(
            a.lv, a.li, a.nqc, a.k, (int)nsplit, a.metric == GSB__METRIC_EUCLIDEAN,
            dist + q0 * a.k, idx + q0 * a.k);
        CUDA_LAUNCH_CHECK();
    }
    return GSB_OK;
}

template <typename T>
int topk_run(const gsb__backend *be, const gsb__tensor *Qt, const gsb__tensor *Rt, int64_t k,
             gsb__metric metric, int exclude_self, gsb__tensor *dist, gsb__tensor *idx)
{
    /* float32: 64 queries x 128 references, 4 x 8 per thread; float64 halves
     * the references so the accumulators fit the registers */
    typedef typename std::conditional<sizeof(T) == 4, tile_cfg<float, 64, 128, 8, 4, 8>,
                                      tile_cfg<double, 64, 64, 8, 4, 4>>::type C;
    const gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    const int64_t nq = Qt->rows, nr = Rt->rows, d = Qt->cols;
    const int use_dot = metric != GSB__METRIC_MANHATTAN;
    /* the CPU twin's bound on the expansion's relative error (doubled there) */
    const double slack =
        2.0 * ((double)(d + 2) * num<T>::eps + (double)(2 * d + 8) * DBL_EPSILON);
    int rc = GSB_OK;
    double *qaux = NULL, *raux = NULL, *lv = NULL;
    int *li = NULL, *wide = NULL;
    T *rb = NULL;
    int64_t qblocks = 0, nsplit = 0, split_len = 0, per_query = 0, nqc_max = 0;
    int64_t list_bytes = 0;
    size_t dyn = 0;
    topk_args a;

    GSB_CUDA_CHECK(gsb__cuda_alloc(be, sizeof(int), (void **)&wide));
    CUDA_CHECK(cudaMemsetAsync(wide, 0, sizeof(int), ctx->stream));
    if (use_dot) {
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nq * sizeof(double), (void **)&qaux));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nr * sizeof(double), (void **)&raux));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nr * sizeof(T), (void **)&rb));
        GSB_CUDA_CHECK((row_norms<T, double>(be, (const T *)Qt->data, nq, d, 0, qaux,
                                             num<T>::big, wide)));
        GSB_CUDA_CHECK((row_norms<T, double>(be, (const T *)Rt->data, nr, d, 0, raux,
                                             num<T>::big, wide)));
        topk_prep_kernel<T><<<grid_for(be, nq > nr ? nq : nr, 256), 256, 0, ctx->stream>>>(
            qaux, nq, raux, rb, nr, (int)metric, slack);
        CUDA_CHECK(cudaGetLastError());
    }

    /* splits of the references: the count that should finish first, with
     * blocks running in waves of two per SM and each split paying its fill */
    qblocks = (nq + C::BM - 1) / C::BM;
    {
        int64_t slots = 2 * (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 16);
        int64_t most = nr / MIN_SPLIT_REFS < MAX_SPLITS ? nr / MIN_SPLIT_REFS : MAX_SPLITS;
        double best = INFINITY;
        nsplit = 1;
        split_len = nr;
        for (int64_t ns = 1; ns <= (most > 1 ? most : 1); ns++) {
            int64_t len = ((nr + ns - 1) / ns + C::BN - 1) / C::BN * C::BN;
            int64_t used = (nr + len - 1) / len;
            int64_t waves = (qblocks * used + slots - 1) / slots;
            double cost = (double)waves * (double)(len + FILL_REFS);
            if (cost < best) {
                best = cost;
                nsplit = used;
                split_len = len;
            }
        }
    }

    /* query chunks: the lists of a chunk fit LIST_SCRATCH_BYTES */
    per_query = nsplit * k * (int64_t)(sizeof(double) + sizeof(int));
    nqc_max = LIST_SCRATCH_BYTES / per_query / C::BM * C::BM;
    if (nqc_max < C::BM)
        nqc_max = C::BM;
    if (nqc_max > nq)
        nqc_max = nq;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(nsplit * nqc_max * k) * sizeof(double),
                                   (void **)&lv));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(nsplit * nqc_max * k) * sizeof(int),
                                   (void **)&li));
    list_bytes = C::BM * k * (int64_t)(sizeof(double) + sizeof(int));
    dyn = list_bytes <= LIST_SMEM_BYTES ? (size_t)list_bytes : 0;

    a.Q = Qt->data;
    a.R = Rt->data;
    a.nr = nr;
    a.d = d;
    a.k = k;
    a.q_begin = 0;
    a.nqc = 0;
    a.split_len = split_len;
    a.metric = (int)metric;
    a.exclude_self = exclude_self != 0;
    a.qaux = qaux;
    a.raux = raux;
    a.rb = rb;
    a.slack = slack;
    a.wide = wide;
    a.lv = lv;
    a.li = li;
    a.lists_in_smem = dyn > 0;
    if (use_dot)
        rc = topk_launch<T, C, OP_DOT>(be, a, nq, nqc_max, nsplit, dyn, (T *)dist->data,
                                       (int64_t *)idx->data);
    else
        rc = topk_launch<T, C, OP_L1>(be, a, nq, nqc_max, nsplit, dyn, (T *)dist->data,
                                      (int64_t *)idx->data);
done:
    gsb__cuda_free(be, wide);
    gsb__cuda_free(be, qaux);
    gsb__cuda_free(be, raux);
    gsb__cuda_free(be, rb);
    gsb__cuda_free(be, lv);
    gsb__cuda_free(be, li);
    return rc;
}

} // namespace

/* R in host memory (the CPU backend's tensor): topk moves it itself. */
static int on_host(const gsb__backend *be, const gsb__tensor *t)
{
    return t && t->be != be && t->be && t->be->name && strcmp(t->be->name, "cpu") == 0;
}

/* topk and topk_fast: the checks, then the fused kernel or, for large
 * dot-product shapes, cuda_topk_gemm.cu's GEMM tiles (TF32 ones for
 * topk_fast of float32).  R may be on the host: the GEMM path then uploads
 * it tile by tile, overlapping the search; the fused kernel gets it whole. */
static int topk_entry(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *Rin,
                      int64_t k, gsb__metric metric, int exclude_self, int fast,
                      gsb__tensor *dist, gsb__tensor *idx)
{
    const char *op = fast ? "topk_fast" : "topk";
    const void *Rhost = on_host(be, Rin) ? Rin->data : NULL;
    gsb__tensor Rv = {}; /* R as the op sees it: on the device */
    const gsb__tensor *R = &Rv;
    void *Rdev = NULL;
    int rc;
    if (Rin)
        Rv = *Rin;
    if (Rhost)
        Rv.be = be; /* checked as if there; its device buffer comes below */
    if ((rc = check_tensor(be, Q, (gsb_dtype)0, -1, -1, op, "Q")) != GSB_OK ||
        (rc = check_tensor(be, R, Q->dtype, -1, Q->cols, op, "R")) != GSB_OK)
        return rc;
    if (!valid_metric(metric))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: unknown metric %d", op, (int)metric);
    if (k <= 0)
        return GSB_CUDA_ERR(GSB_EINVAL, "Expected n_neighbors > 0. Got %lld", (long long)k);
    if (exclude_self && Q->rows != R->rows)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: exclude_self needs Q to be R", op);
    /* scikit-learn's wording, as the CPU twin */
    if (k > R->rows - (exclude_self ? 1 : 0))
        return GSB_CUDA_ERR(GSB_EINVAL,
                            "Expected n_neighbors %s n_samples_fit, but n_neighbors = %lld, "
                            "n_samples_fit = %lld, n_samples = %lld",
                            exclude_self ? "<" : "<=", (long long)k, (long long)R->rows,
                            (long long)Q->rows);
    if ((rc = check_tensor(be, dist, Q->dtype, Q->rows, k, op, "dist")) != GSB_OK ||
        (rc = check_tensor(be, idx, GSB_I64, Q->rows, k, op, "idx")) != GSB_OK ||
        (rc = check_dims(Q->cols, R->rows, op)) != GSB_OK)
        return rc;
    if (Q->rows == 0)
        return GSB_OK;
    const int gemm = gsb__cuda_topk_gemm_applies(Q->rows, R->rows, Q->cols, metric,
                                                 Q->dtype == GSB_F32 && !fast);
    if (Rhost) {
        const size_t bytes = (size_t)(R->rows * R->cols) * (R->dtype == GSB_F32 ? 4 : 8);
        if ((rc = gsb__cuda_alloc(be, bytes, &Rdev)) != GSB_OK)
            return rc;
        Rv.data = Rdev;
        Rv.owned = 0;
        if (!gemm && (rc = gsb__cuda_copy_h2d(be, Rdev, Rhost, bytes)) != GSB_OK) {
            gsb__cuda_free(be, Rdev);
            return rc;
        }
    }
    if (gemm)
        rc = gsb__cuda_topk_gemm(be, Q, R, Rhost, k, metric, exclude_self, fast, dist, idx);
    else
        rc = Q->dtype == GSB_F32
                 ? topk_run<float>(be, Q, R, k, metric, exclude_self, dist, idx)
                 : topk_run<double>(be, Q, R, k, metric, exclude_self, dist, idx);
    gsb__cuda_free(be, Rdev); /* in stream order, after the search */
    return rc;
}

extern "C" int gsb__cuda_topk(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R,
                              int64_t k, gsb__metric metric, int exclude_self, gsb__tensor *dist,
                              gsb__tensor *idx)
{
    return topk_entry(be, Q, R, k, metric, exclude_self, 0, dist, idx);
}

extern "C" int gsb__cuda_topk_fast(const gsb__backend *be, const gsb__tensor *Q,
                                   const gsb__tensor *R, int64_t k, gsb__metric metric,
                                   int exclude_self, gsb__tensor *dist, gsb__tensor *idx)
{
    return topk_entry(be, Q, R, k, metric, exclude_self, 1, dist, idx);
}
