/*
 * cuda_topk_gemm.cu - the GPU's topk for large euclidean-family and cosine
 * shapes: cuBLAS GEMM tiles plus a selection kernel, and topk_fast, the same
 * with a TF32 tensor-core GEMM (UMAP's kNN graph opts in).  Twin: topk in
 * cpu_distance.c; the contract is cuda_topk.cu's (distances are the metric's
 * true value computed in double from the inputs, ties go to the smaller
 * index, exclude_self skips j == i), and so is the method: an approximation
 * only prunes, and every candidate it lets through is ranked by its exact
 * distance.
 *
 *  1. Squared norms in double once (row_norms), turned into the admission
 *     terms of cuda_topk_list.cuh (rb; the slack).
 *  2. Queries go in chunks of at most QCHUNK, references in tiles of nb
 *     columns (TILE_BYTES of GEMM output, less where free memory is short).
 *     GEMM (DGEMM on tensor cores for float64, SGEMM with TF32 forbidden
 *     for float32, or TF32 for topk_fast) writes the chunk x tile dot
 *     products to one of two buffers on the backend's stream; the selection
 *     of the tile runs on a second stream, so the GEMM of tile i + 1
 *     overlaps the selection of tile i (events order each buffer's reuse).
 *  3. Selection: a warp per query keeps its sorted list of the best k
 *     (exact distance, index) in global memory and admits a candidate unless
 *     its approximation, less the bound on the approximation's error,
 *     exceeds the k-th exact distance (admit_threshold: one FMA and one
 *     compare per pair, as the fused kernel).  Admitted candidates queue in
 *     shared memory; each 32 are flushed: exact distances in double, a warp
 *     sort, a merge into the list, a tighter threshold.  Fewer than 32 left
 *     at the end of a tile wait in global memory for the next tile; the last
 *     tile flushes them and writes dist (sqrt for euclidean) and idx.
 *
 * The error bound.  Exact mode: the CPU twin's (d + 2) eps of the dtype
 * plus the double terms, the same slack as the fused kernel (any summation
 * order obeys it).  TF32 (topk_fast, float32): each input keeps 10 of its 23
 * mantissa bits, so a product q_c r_c is off by at most 2 * 2^-10 of itself
 * when the conversion truncates (half that when it rounds); the dot product
 * by at most 2^-9 sum |q_c r_c| <= 2^-9 ||q|| ||r||, the distance by twice
 * that, <= 2^-9 (||q||^2 + ||r||^2), which the admission margin 1.5 s
 * (||q||^2 + ||r||^2) covers with s = TF32_SLACK = 2^-9 (cosine likewise:
 * the normalised dot's error is <= 2^-9).  The FP32 accumulation is covered
 * by the exact mode's term, which is kept.  So the margin is a distance, not
 * a count: every true neighbour passes whatever its rank, and the result is
 * exact as long as the tensor cores keep to that (they round or truncate
 * each input to TF32 and accumulate in FP32).  The margin's price is extra
 * exact distances for candidates within it.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_distance_tile.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_topk_list.cuh"

using namespace gsb_dist;
using namespace gsb_topk;

namespace {

constexpr int WARPS = 8;                   /* queries (warps) per selection block */
constexpr int CARRY = 32;                  /* pending candidates kept between tiles */
constexpr int UNROLL = 4;                  /* 32-column steps whose loads go out together */
constexpr int64_t QCHUNK = 32768;          /* queries per chunk (lists: QCHUNK k 12 bytes) */
/* one GEMM output buffer (there are two): big enough that a tile's GEMM and
 * selection (tens of microseconds each) outlast their launches */
constexpr int64_t TILE_BYTES = (int64_t)128 << 20;
constexpr int64_t TILE_ALIGN = 128;        /* tile widths are multiples of this */
constexpr double TF32_SLACK = 1.0 / 512.0; /* 2^-9: see the header comment */
/* From this many columns on, a flush gives each candidate the whole warp
 * (coalesced reads of its row); below, G lanes share a candidate's row,
 * which stays in L1 */
constexpr int64_t WARP_ROW_D = 256;

/* Everything a selection block needs (by value). */
struct sel_args {
    const void *Q, *R;   /* full query and reference matrices */
    const void *S;       /* the tile: query q of the chunk's dots at S + q ld, nb of them */
    int64_t ld, nb, j0;  /* buffer row length, tile width, the tile's first reference */
    int64_t d, k, q_begin, nqc;
    int metric, exclude_self, last;
    const double *qaux, *raux; /* as the fused kernel (cuda_topk_list.cuh's prep) */
    const void *rb;
    double slack;
    const int *wide; /* set: norms too large for the expansion, rank everything exactly */
    double *lv;      /* per query of the chunk: k distances ... */
    int *li;         /* ... and indices, sorted */
    int *len;        /* list lengths */
    int *carry;      /* per query: a count, then up to CARRY pending indices */
    void *dist;      /* outputs (all queries), written by the last tile */
    int64_t *idx;
};

/* A lane's part of the exact sum over columns part, part + G, ...: q.x
 * (cosine) or ||q - x||^2, in double. */
template <typename T>
__device__ __forceinline__ double row_sum(const T *q, const T *x, int64_t d, int part, int G,
                                          bool cosine)
{
    double s = 0.0;
#pragma unroll 4
    for (int64_t c = part; c < d; c += G) {
        double u = (double)q[c], w = (double)x[c];
        if (cosine) {
            s += u * w;
        } else {
            double t = u - w;
            s += t * t;
        }
    }
    return s;
}

/*
 * Flush the n (<= 32) pending candidates pidx of query qg into its sorted
 * list Lv / Li of length len (one warp, all lanes): exact distances, a sort,
 * a merge.  Returns the new length.  mv / mi: 32 places of shared memory.
 */
template <typename T>
__device__ __noinline__ int flush(const sel_args &a, int64_t qg, const int *pidx, int n,
                                  double *Lv, int *Li, int len, double *mv, int *mi, int lane)
{
    const int64_t d = a.d;
    const int K = (int)a.k;
    const bool cosine = a.metric == GSB__METRIC_COSINE;
    const T *q = (const T *)a.Q + qg * d;
    double v = 0.0;
    if (d >= WARP_ROW_D) {
        /* one candidate at a time, the warp across its columns */
        for (int e = 0; e < n; e++) {
            double s = row_sum<T>(q, (const T *)a.R + (int64_t)pidx[e] * d, d, lane, 32, cosine);
            for (int off = 16; off > 0; off >>= 1)
                s += __shfl_xor_sync(FULL_MASK, s, off);
            if (lane == e)
                v = s;
        }
    } else {
        /* G lanes per candidate (a power of two with n * G <= 32) share its columns */
        int G = 32;
        while (G > 1 && G * n > 32)
            G >>= 1;
        const int e = lane / G;
        double s = e < n ? row_sum<T>(q, (const T *)a.R + (int64_t)pidx[e] * d, d, lane & (G - 1),
                                      G, cosine)
                         : 0.0;
        for (int off = G >> 1; off > 0; off >>= 1)
            s += __shfl_xor_sync(FULL_MASK, s, off);
        v = __shfl_sync(FULL_MASK, s, (lane * G) & 31);
    }
    return merge_flushed(v, pidx, n, cosine, a.qaux[qg], a.raux, Lv, Li, len, K, mv, mi, lane);
}

/* The query's admission threshold for a list of length len. */
template <typename T>
__device__ __forceinline__ T threshold(const sel_args &a, const double *Lv, int len, double qa,
                                       int wide)
{
    return len == (int)a.k ? admit_threshold<T>(Lv[len - 1], qa, a.metric, a.slack, wide)
                           : (T)INFINITY;
}

/*
 * Warp w of block b: query b WARPS + w of the chunk against the tile's nb
 * references.
 */
template <typename T>
__global__ void __launch_bounds__(WARPS * 32) select_kernel(const __grid_constant__ sel_args a)
{
    __shared__ int pend[WARPS][64]; /* < 32 waiting + at most 32 admitted in a step */
    __shared__ double mv[WARPS][32];
    __shared__ int mi[WARPS][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t q = (int64_t)blockIdx.x * WARPS + w;
    if (q >= a.nqc)
        return; /* the whole warp: no block-wide barrier follows */
    const int64_t qg = a.q_begin + q;
    const int K = (int)a.k;
    double *Lv = a.lv + q * K;
    int *Li = a.li + q * K;
    int *carry = a.carry + q * (CARRY + 1);
    const int wide = *a.wide;
    const double qa = a.qaux[qg];
    const bool cosine = a.metric == GSB__METRIC_COSINE;
    const T *S = (const T *)a.S + q * a.ld, *rb = (const T *)a.rb;
    int *P = pend[w];

    int len = a.len[q], cnt = carry[0];
    if (lane < cnt)
        P[lane] = carry[1 + lane];
    __syncwarp();
    T tq = threshold<T>(a, Lv, len, qa, wide);

    for (int64_t b = 0; b < a.nb; b += 32 * UNROLL) {
        T sv[UNROLL], rv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            int64_t j = b + u * 32 + lane;
            sv[u] = j < a.nb ? S[j] : T(0);
            rv[u] = j < a.nb ? rb[a.j0 + j] : T(0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            int64_t j = b + u * 32 + lane, jg = a.j0 + j;
            /* the fused kernel's approximation, rounded the same way:
             * euclidean family (1 - 1.5 s) ||r||^2 - 2 q.r, cosine -(q.r) / ||r||;
             * NaN (overflow) is admitted: only a sure loser is turned away */
            T v = cosine ? fma(sv[u], rv[u], T(0)) : fma(sv[u], T(-2), rv[u]);
            bool ok = j < a.nb && !(a.exclude_self && jg == qg) && !(v > tq);
            unsigned m = __ballot_sync(FULL_MASK, ok);
            if (ok)
                P[cnt + __popc(m & ((1u << lane) - 1u))] = (int)jg;
            cnt += __popc(m);
            __syncwarp();
            if (cnt >= 32) {
                len = flush<T>(a, qg, P, 32, Lv, Li, len, mv[w], mi[w], lane);
                int rest = cnt - 32, t = lane < rest ? P[32 + lane] : 0;
                __syncwarp();
                if (lane < rest)
                    P[lane] = t;
                __syncwarp();
                cnt = rest;
                tq = threshold<T>(a, Lv, len, qa, wide);
            }
        }
    }

    if (!a.last) {
        if (lane < cnt)
            carry[1 + lane] = P[lane];
        if (lane == 0) {
            carry[0] = cnt;
            a.len[q] = len;
        }
        return;
    }
    if (cnt > 0)
        len = flush<T>(a, qg, P, cnt, Lv, Li, len, mv[w], mi[w], lane);
    /* k <= the references a query may take, all admitted while its list was
     * short: len == K here; empty slots would be (inf, SENTINEL) all the same */
    T *dq = (T *)a.dist + qg * K;
    int64_t *iq = a.idx + qg * K;
    const bool euclid = a.metric == GSB__METRIC_EUCLIDEAN;
    for (int p = lane; p < K; p += 32) {
        double dv = p < len ? Lv[p] : (double)INFINITY;
        dq[p] = (T)(euclid ? sqrt(dv) : dv);
        iq[p] = p < len ? Li[p] : SENTINEL;
    }
}

/* The dot products of queries [q0, q0 + nqc) against references [j0, j0 +
 * nb) into S (column-major nb x nqc, leading dimension ld: query q's row is
 * S + q ld), on the handle's stream. */
template <typename T>
int tile_gemm(cublasHandle_t h, const T *Q, const T *R, int64_t q0, int64_t nqc, int64_t j0,
              int64_t nb, int64_t d, int64_t ld, int tf32, T *S)
{
    const T one = 1, zero = 0;
    const cudaDataType dt = sizeof(T) == 4 ? CUDA_R_32F : CUDA_R_64F;
    /* float32: never TF32 unless asked for, whatever the handle's math mode */
    const cublasComputeType_t ct = sizeof(T) == 8 ? CUBLAS_COMPUTE_64F
                                   : tf32          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                   : CUBLAS_COMPUTE_32F_PEDANTIC;
    CUBLAS_TRY(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)nb, (int)nqc, (int)d, &one,
                            R + j0 * d, dt, (int)d, Q + q0 * d, dt, (int)d, &zero, S, dt,
                            (int)ld, ct, CUBLAS_GEMM_DEFAULT));
    return GSB_OK;
}

/* Device scratch of one call (freed in stream order by gemm_free). */
struct gemm_bufs {
    double *qaux = NULL, *raux = NULL, *lv = NULL;
    int *li = NULL, *len = NULL, *carry = NULL, *wide = NULL;
    void *rb = NULL, *tile[2] = {NULL, NULL};
    cudaStream_t side = NULL; /* the selections' stream */
    cudaEvent_t ready = NULL, gemm_done[2] = {NULL, NULL}, sel_done[2] = {NULL, NULL};
};

/* Wait (in the backend's stream) for the side stream, then free everything.
 * Returns rc, or the first failure of the cleanup where rc was GSB_OK. */
int gemm_free(const gsb__backend *be, gemm_bufs &g, int rc)
{
    cudaStream_t ms = gsb__cuda_ctx_of(be)->stream;
    if (g.side) {
        /* nothing is freed before the selections that read it are done */
        cudaError_t e = g.ready ? cudaEventRecord(g.ready, g.side) : cudaErrorInvalidValue;
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent(ms, g.ready, 0);
        if (e != cudaSuccess)
            e = cudaStreamSynchronize(g.side);
        if (e == cudaSuccess)
            e = cudaStreamDestroy(g.side);
        if (e != cudaSuccess && rc == GSB_OK)
            rc = gsb__cuda_fail_rt(e, "waiting for the selections", __FILE__, __LINE__);
    }
    cudaEvent_t evs[] = {g.ready, g.gemm_done[0], g.gemm_done[1], g.sel_done[0], g.sel_done[1]};
    for (cudaEvent_t ev : evs) {
        cudaError_t e = ev ? cudaEventDestroy(ev) : cudaSuccess;
        if (e != cudaSuccess && rc == GSB_OK)
            rc = gsb__cuda_fail_rt(e, "cudaEventDestroy", __FILE__, __LINE__);
    }
    void *ptrs[] = {g.qaux, g.raux, g.lv, g.li, g.len, g.carry, g.wide, g.rb, g.tile[0], g.tile[1]};
    for (void *p : ptrs)
        gsb__cuda_free(be, p);
    return rc;
}

/* A positive integer from the environment, else dflt. */
int64_t env_size(const char *name, int64_t dflt)
{
    const char *s = getenv(name);
    long long v = s ? strtoll(s, NULL, 10) : 0;
    return v > 0 ? (int64_t)v : dflt;
}

/* Queries per chunk and references per tile: a tile buffer of at most
 * TILE_BYTES and an eighth of the free memory.  GSB_TOPK_TILE_BYTES and
 * GSB_TOPK_QUERY_CHUNK override the two (tests cover many tiles and chunks
 * with small data; measurements tune them). */
template <typename T>
int plan_tiles(int64_t nq, int64_t nr, int64_t *nqc_max, int64_t *nb_max)
{
    size_t free_b = 0, total_b = 0;
    CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
    int64_t budget = env_size("GSB_TOPK_TILE_BYTES", TILE_BYTES);
    if ((int64_t)(free_b / 8) < budget)
        budget = (int64_t)(free_b / 8);
    int64_t chunk = env_size("GSB_TOPK_QUERY_CHUNK", QCHUNK);
    int64_t nqc = nq < chunk ? nq : chunk;
    int64_t nb = budget / (nqc * (int64_t)sizeof(T)) / TILE_ALIGN * TILE_ALIGN;
    if (nb < TILE_ALIGN)
        nb = TILE_ALIGN;
    if (nb > nr)
        nb = nr;
    *nqc_max = nqc;
    *nb_max = nb;
    return GSB_OK;
}

template <typename T>
int gemm_run(const gsb__backend *be, const gsb__tensor *Qt, const gsb__tensor *Rt, int64_t k,
             gsb__metric metric, int exclude_self, int tf32, gsb__tensor *dist,
             gsb__tensor *idx)
{
    const gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    cudaStream_t ms = ctx->stream;
    const int64_t nq = Qt->rows, nr = Rt->rows, d = Qt->cols;
    const double slack =
        2.0 * ((double)(d + 2) * num<T>::eps + (double)(2 * d + 8) * DBL_EPSILON) +
        (tf32 ? TF32_SLACK : 0.0);
    const T *Q = (const T *)Qt->data, *R = (const T *)Rt->data;
    gemm_bufs g;
    int64_t nqc_max = 0, nb_max = 0, t = 0;
    sel_args a;
    int rc = GSB_OK;

    GSB_CUDA_CHECK(plan_tiles<T>(nq, nr, &nqc_max, &nb_max));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, sizeof(int), (void **)&g.wide));
    CUDA_CHECK(cudaMemsetAsync(g.wide, 0, sizeof(int), ms));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nq * sizeof(double), (void **)&g.qaux));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nr * sizeof(double), (void **)&g.raux));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nr * sizeof(T), &g.rb));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(nqc_max * k) * sizeof(double), (void **)&g.lv));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(nqc_max * k) * sizeof(int), (void **)&g.li));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nqc_max * sizeof(int), (void **)&g.len));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(nqc_max * (CARRY + 1)) * sizeof(int),
                                   (void **)&g.carry));
    for (int b = 0; b < 2; b++)
        GSB_CUDA_CHECK(
            gsb__cuda_alloc(be, (size_t)(nqc_max * nb_max) * sizeof(T), &g.tile[b]));
    GSB_CUDA_CHECK((row_norms<T, double>(be, Q, nq, d, 0, g.qaux, num<T>::big, g.wide)));
    GSB_CUDA_CHECK((row_norms<T, double>(be, R, nr, d, 0, g.raux, num<T>::big, g.wide)));
    topk_prep_kernel<T><<<grid_for(be, nq > nr ? nq : nr, 256), 256, 0, ms>>>(
        g.qaux, nq, g.raux, (T *)g.rb, nr, (int)metric, slack);
    CUDA_CHECK(cudaGetLastError());

    /* the side stream starts after the allocations and norms above */
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.side, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&g.ready, cudaEventDisableTiming));
    for (int b = 0; b < 2; b++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&g.gemm_done[b], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&g.sel_done[b], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventRecord(g.ready, ms));
    CUDA_CHECK(cudaStreamWaitEvent(g.side, g.ready, 0));

    a.Q = Q;
    a.R = R;
    a.ld = nb_max;
    a.d = d;
    a.k = k;
    a.metric = (int)metric;
    a.exclude_self = exclude_self != 0;
    a.qaux = g.qaux;
    a.raux = g.raux;
    a.rb = g.rb;
    a.slack = slack;
    a.wide = g.wide;
    a.lv = g.lv;
    a.li = g.li;
    a.len = g.len;
    a.carry = g.carry;
    a.dist = dist->data;
    a.idx = (int64_t *)idx->data;
    for (int64_t q0 = 0; q0 < nq; q0 += nqc_max) {
        a.q_begin = q0;
        a.nqc = nq - q0 < nqc_max ? nq - q0 : nqc_max;
        /* the side stream reset the previous chunk's lists in its own order */
        CUDA_CHECK(cudaMemsetAsync(g.len, 0, (size_t)a.nqc * sizeof(int), g.side));
        CUDA_CHECK(cudaMemsetAsync(g.carry, 0, (size_t)(a.nqc * (CARRY + 1)) * sizeof(int),
                                   g.side));
        for (int64_t j0 = 0; j0 < nr; j0 += nb_max, t++) {
            const int b = (int)(t & 1);
            a.j0 = j0;
            a.nb = nr - j0 < nb_max ? nr - j0 : nb_max;
            a.last = j0 + a.nb >= nr;
            a.S = g.tile[b];
            /* buffer b is free once the selection of tile t - 2 is done */
            if (t >= 2)
                CUDA_CHECK(cudaStreamWaitEvent(ms, g.sel_done[b], 0));
            GSB_CUDA_CHECK(tile_gemm<T>(ctx->blas, Q, R, q0, a.nqc, j0, a.nb, d, nb_max, tf32,
                                        (T *)g.tile[b]));
            CUDA_CHECK(cudaEventRecord(g.gemm_done[b], ms));
            CUDA_CHECK(cudaStreamWaitEvent(g.side, g.gemm_done[b], 0));
            select_kernel<T><<<(unsigned)((a.nqc + WARPS - 1) / WARPS), WARPS * 32, 0, g.side>>>(
                a);
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaEventRecord(g.sel_done[b], g.side));
        }
    }
done:
    return gemm_free(be, g, rc);
}

} // namespace

/* Whether topk of these shapes goes through GEMM tiles: dot-product metrics
 * with d >= 1 and int-indexable references; where both paths apply, the
 * large shapes (GEMM's rate outruns the fused kernel's once its tiles are
 * big, ~0.4 of the FP32 GEMM rate at 10k x 200k x 64).  GSB_TOPK_PATH=gemm
 * or =fused forces one path where both apply (tests, measurements). */
/* exact_f32: exact float32 (not topk_fast's TF32), where the fused kernel
 * stays faster on narrow rows: on an H200 at 10k x 200k x 64 it took 13.5 ms
 * against the GEMM path's 16.1 (float64: 21.7 against 16.8; float32 at d = 784:
 * 98 against 63). */
extern "C" int gsb__cuda_topk_gemm_applies(int64_t nq, int64_t nr, int64_t d,
                                            gsb__metric metric, int exact_f32)
{
    if (metric == GSB__METRIC_MANHATTAN || d < 1 || d > INT_MAX || nr >= INT_MAX ||
        nq > INT_MAX)
        return 0;
    const char *force = getenv("GSB_TOPK_PATH");
    if (force && strcmp(force, "gemm") == 0)
        return 1;
    if (force && strcmp(force, "fused") == 0)
        return 0;
    return nq >= 1024 && nr >= 4096 && d >= (exact_f32 ? 256 : 32) &&
           (double)nq * (double)nr * (double)d >= 1e9;
}

extern "C" int gsb__cuda_topk_gemm(const gsb__backend *be, const gsb__tensor *Q,
                                   const gsb__tensor *R, int64_t k, gsb__metric metric,
                                   int exclude_self, int tf32, gsb__tensor *dist,
                                   gsb__tensor *idx)
{
    return Q->dtype == GSB_F32
               ? gemm_run<float>(be, Q, R, k, metric, exclude_self, tf32, dist, idx)
               : gemm_run<double>(be, Q, R, k, metric, exclude_self, 0, dist, idx);
}
