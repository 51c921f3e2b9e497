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
 *  0. float64 and float32 of the euclidean family are pruned through TF32:
 *     centred float32 copies of Q and R (cuda_topk_prune.cu), TF32 GEMM
 *     tiles and the TF32 slack plus the copies' own terms, exact ranking as
 *     always (the flush below, from the inputs, in double: the exact mode's
 *     distances to the bit); rows out of the copies' range (checked on the
 *     device, read once at the end; the selections skip their work once it
 *     fails) send the call to the exact mode (DGEMM or FP32 SGEMM tiles).
 *     GSB_TOPK_F64=exact forces that mode for float64; GSB_TOPK_F32=exact
 *     turns float32's pruning off (the fused kernel below d = 256, as
 *     before).
 *  1. Squared norms in double once (row_norms), turned into the admission
 *     terms of cuda_topk_list.cuh (rb; the slack).  R may still be on the
 *     host (topk's caller left it there): it then goes up in pieces of
 *     PIECE_BYTES on the backend's stream (cuda_copy.cu's staged copy),
 *     each piece's norms right after it, as the tiles come to need them;
 *     the GEMMs run on a stream and cuBLAS handle of their own
 *     (gemm_lane_of), so the uploads never queue behind them and the
 *     upload overlaps the search.
 *  2. Queries go in chunks of at most QCHUNK, references in tiles of nb
 *     columns (TILE_BYTES of GEMM output, less where free memory is short).
 *     GEMM (DGEMM on tensor cores for float64, SGEMM with TF32 forbidden
 *     for float32, or TF32 for topk_fast) writes the chunk x tile dot
 *     products to one of two buffers on the GEMM stream; the selection
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
#include "backend/cuda/cuda_topk_prune.h"
#include "backend/cuda/cuda_topk_screen.h"

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
/* references still on the host go up in pieces of at least this: per-piece
 * costs (a few copy chunks, an event) stay small, and the first GEMM starts
 * after ~0.5 ms of upload */
constexpr int64_t PIECE_BYTES = (int64_t)8 << 20;
constexpr double TF32_SLACK = 1.0 / 512.0; /* 2^-9: see the header comment */
/* the largest k a pruned run screens (~k admissions a query per screen,
 * GSB_TOPK_SCREEN_CAP places) */
constexpr int64_t SCREEN_MAX_K = 32;

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
    const int *abort; /* or NULL; set: the float32 copies are out of range (cuda_topk_prune.h),
                         the caller reruns exactly: skip the work */
    float *tq;       /* or NULL: per query of the chunk, the threshold for the screen */
    double *lv;      /* per query of the chunk: k distances ... */
    int *li;         /* ... and indices, sorted */
    int *len;        /* list lengths */
    int *carry;      /* per query: a count, then up to CARRY pending indices */
    void *dist;      /* outputs (all queries), written by the last tile */
    int64_t *idx;
};

/*
 * Flush the n (<= 32) pending candidates pidx of query qg into its sorted
 * list Lv / Li of length len (one warp, all lanes): exact distances
 * (cuda_topk_list.cuh's exact_sums: the fused kernel's, to the bit), a sort,
 * a merge.  Returns the new length.  mv / mi: 32 places of shared memory.
 */
template <typename T>
__device__ __noinline__ int flush(const sel_args &a, int64_t qg, const int *pidx, int n,
                                  double *Lv, int *Li, int len, double *mv, int *mi, int lane)
{ /* T: the exact data's type */
    const bool cosine = a.metric == GSB__METRIC_COSINE;
    const double v = exact_sums<T>((const T *)a.Q + qg * a.d, (const T *)a.R, pidx, n, a.d,
                                   cosine ? SUM_DOT : SUM_SQ, lane);
    return merge_flushed(v, pidx, n, cosine, a.qaux[qg], a.raux, Lv, Li, len, (int)a.k, mv, mi,
                         lane);
}

/* The query's admission threshold for a list of length len. */
template <typename T>
__device__ __forceinline__ T threshold(const sel_args &a, const double *Lv, int len, double qa,
                                       int wide)
{
    return len == (int)a.k ? admit_threshold<T>(Lv[len - 1], qa, a.metric, a.slack, wide)
                           : (T)INFINITY;
}

/* A warp's selection of one query of the chunk: its sorted list, its
 * pending candidates (P: 64 places of shared memory) and threshold. */
template <typename T>
struct sel_state {
    int64_t q, qg;
    double *Lv;
    int *Li, *carry, *P;
    int len, cnt, wide;
    double qa;
    T tq;
};

/* Query q's state as the previous tile left it (its carried candidates). */
template <typename T>
__device__ __forceinline__ sel_state<T> sel_begin(const sel_args &a, int64_t q, int *P, int lane)
{
    sel_state<T> st;
    st.q = q;
    st.qg = a.q_begin + q;
    st.Lv = a.lv + q * a.k;
    st.Li = a.li + q * a.k;
    st.carry = a.carry + q * (CARRY + 1);
    st.P = P;
    st.wide = *a.wide;
    st.qa = a.qaux[st.qg];
    st.len = a.len[q];
    st.cnt = st.carry[0];
    if (lane < st.cnt)
        P[lane] = st.carry[1 + lane];
    __syncwarp();
    st.tq = threshold<T>(a, st.Lv, st.len, st.qa, st.wide);
    return st;
}

/* One step of the warp: each lane's candidate jg joins the pending list
 * where ok; once 32 are pending they are flushed (TX: the exact data's
 * type) and the threshold tightens. */
template <typename T, typename TX>
__device__ __forceinline__ void sel_offer(const sel_args &a, sel_state<T> &st, bool ok,
                                          int64_t jg, double *mv, int *mi, int lane)
{
    unsigned m = __ballot_sync(FULL_MASK, ok);
    if (ok)
        st.P[st.cnt + __popc(m & ((1u << lane) - 1u))] = (int)jg;
    st.cnt += __popc(m);
    __syncwarp();
    if (st.cnt >= 32) {
        st.len = flush<TX>(a, st.qg, st.P, 32, st.Lv, st.Li, st.len, mv, mi, lane);
        int rest = st.cnt - 32, t = lane < rest ? st.P[32 + lane] : 0;
        __syncwarp();
        if (lane < rest)
            st.P[lane] = t;
        __syncwarp();
        st.cnt = rest;
        st.tq = threshold<T>(a, st.Lv, st.len, st.qa, st.wide);
    }
}

/* The tile's end: carry the pending candidates to the next tile, or, after
 * the last, flush them and write the query's dist (sqrt for euclidean) and
 * idx.  Screened (a.tq set): flush them now and leave the float threshold
 * for the next screen, as tight as every candidate so far makes it. */
template <typename T, typename TX>
__device__ void sel_end(const sel_args &a, sel_state<T> &st, double *mv, int *mi, int lane)
{
    const int K = (int)a.k;
    if (!a.last && a.tq && st.cnt > 0) {
        st.len = flush<TX>(a, st.qg, st.P, st.cnt, st.Lv, st.Li, st.len, mv, mi, lane);
        st.cnt = 0;
        st.tq = threshold<T>(a, st.Lv, st.len, st.qa, st.wide);
    }
    if (!a.last) {
        if (lane < st.cnt)
            st.carry[1 + lane] = st.P[lane];
        if (lane == 0) {
            st.carry[0] = st.cnt;
            a.len[st.q] = st.len;
            if (sizeof(T) == sizeof(float) && a.tq)
                a.tq[st.q] = (float)st.tq; /* exact: T is float */
        }
        return;
    }
    if (st.cnt > 0)
        st.len = flush<TX>(a, st.qg, st.P, st.cnt, st.Lv, st.Li, st.len, mv, mi, lane);
    /* k <= the references a query may take, all admitted while its list was
     * short: len == K here; empty slots would be (inf, SENTINEL) all the same */
    TX *dq = (TX *)a.dist + st.qg * K;
    int64_t *iq = a.idx + st.qg * K;
    const bool euclid = a.metric == GSB__METRIC_EUCLIDEAN;
    for (int p = lane; p < K; p += 32) {
        double dv = p < st.len ? st.Lv[p] : (double)INFINITY;
        dq[p] = (TX)(euclid ? sqrt(dv) : dv);
        iq[p] = p < st.len ? st.Li[p] : SENTINEL;
    }
}

/*
 * Warp w of block b: query b WARPS + w of the chunk against the tile's nb
 * references.  T: the tile's (approximation's) type; TX: the exact data's
 * (float64 pruned through float32 tiles: float, double).
 */
template <typename T, typename TX>
__global__ void __launch_bounds__(WARPS * 32) select_kernel(const __grid_constant__ sel_args a)
{
    __shared__ int pend[WARPS][64]; /* < 32 waiting + at most 32 admitted in a step */
    __shared__ double mv[WARPS][32];
    __shared__ int mi[WARPS][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t q = (int64_t)blockIdx.x * WARPS + w;
    if (q >= a.nqc || (a.abort && *a.abort))
        return; /* the whole warp: no block-wide barrier follows */
    const bool cosine = a.metric == GSB__METRIC_COSINE;
    const T *S = (const T *)a.S + q * a.ld, *rb = (const T *)a.rb;
    sel_state<T> st = sel_begin<T>(a, q, pend[w], lane);

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
            bool ok = j < a.nb && !(a.exclude_self && jg == st.qg) && !(v > st.tq);
            sel_offer<T, TX>(a, st, ok, jg, mv[w], mi[w], lane);
        }
    }
    sel_end<T, TX>(a, st, mv[w], mi[w], lane);
}

/* What a rank step reads besides the selection's arguments: the screen's
 * places and the centred copies (for a query whose places overflowed). */
struct rank_in {
    int *cnt;
    const int2 *cand;
    const float *qf, *rf;
};

/*
 * After a screen of references [j0, j0 + nb) (cuda_topk_screen.cu): warp w
 * of block b takes query b WARPS + w of the chunk and offers its admitted
 * candidates to its list, tested again against the threshold as it
 * tightens.  A query whose places overflowed screens the slice again here,
 * its dot products summed in FP32 from the centred copies (inside the same
 * slack: no TF32 rounding).  Resets the query's count for the next screen.
 */
template <typename TX>
__global__ void __launch_bounds__(WARPS * 32)
    rank_kernel(const __grid_constant__ sel_args a, const __grid_constant__ rank_in r)
{
    __shared__ int pend[WARPS][64];
    __shared__ double mv[WARPS][32];
    __shared__ int mi[WARPS][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t q = (int64_t)blockIdx.x * WARPS + w;
    if (q >= a.nqc || (a.abort && *a.abort))
        return; /* the whole warp */
    const float *rb = (const float *)a.rb;
    sel_state<float> st = sel_begin<float>(a, q, pend[w], lane);
    const int n = r.cnt[q];
    __syncwarp();
    if (lane == 0)
        r.cnt[q] = 0;
    if (n <= GSB_TOPK_SCREEN_CAP) {
        const int2 *c = r.cand + q * GSB_TOPK_SCREEN_CAP;
        for (int b = 0; b < n; b += 32) {
            const int e = b + lane;
            const int2 x = e < n ? c[e] : make_int2(0, 0);
            const bool ok = e < n && !(__int_as_float(x.y) > st.tq);
            sel_offer<float, TX>(a, st, ok, x.x, mv[w], mi[w], lane);
        }
    } else {
        const float *qf = r.qf + st.qg * a.d;
        for (int64_t b = a.j0; b < a.j0 + a.nb; b += 32) {
            const int64_t j = b + lane;
            const bool in = j < a.j0 + a.nb;
            float dot = 0.f;
            for (int64_t c = 0; in && c < a.d; c++)
                dot = fmaf(qf[c], r.rf[j * a.d + c], dot);
            const float v = fmaf(dot, -2.f, in ? rb[j] : 0.f);
            const bool ok = in && !(a.exclude_self && j == st.qg) && !(v > st.tq);
            sel_offer<float, TX>(a, st, ok, j, mv[w], mi[w], lane);
        }
    }
    sel_end<float, TX>(a, st, mv[w], mi[w], lane);
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
    double *qaux = NULL, *raux = NULL, *lv = NULL, *mean = NULL;
    int *li = NULL, *len = NULL, *carry = NULL, *wide = NULL, *bad = NULL;
    void *rb = NULL, *tile[2] = {NULL, NULL};
    float *qf = NULL, *rf = NULL; /* pruned: the float32 copies the GEMM reads */
    float *tq = NULL;             /* screened: thresholds, the screens' places */
    int *cnt = NULL;
    int2 *cand = NULL;
    cudaStream_t side = NULL;     /* the selections' stream */
    cudaStream_t gs = NULL;       /* the GEMMs' (gemm_lane_of) */
    cublasHandle_t blas = NULL;
    cudaEvent_t ready = NULL, uploaded = NULL, gemm_done[2] = {NULL, NULL},
                sel_done[2] = {NULL, NULL};
};

/* The GEMM tiles' own cuBLAS handle and stream, one pair per device: with the
 * GEMMs off the backend's stream, the uploads of references still on the host
 * (on the backend's stream, cuda_copy.cu) never queue behind them, so they
 * overlap the search.  Made on first use, under the device's op lock, and
 * kept, as the staging buffers are; where that failed, the backend's own. */
struct gemm_lane {
    cublasHandle_t h;
    cudaStream_t s;
    int tried;
};
constexpr int MAX_LANES = 64;
gemm_lane lanes[MAX_LANES];

void gemm_lane_of(const gsb__cuda_ctx *ctx, cublasHandle_t *h, cudaStream_t *s)
{
    *h = ctx->blas;
    *s = ctx->stream;
    if (ctx->device < 0 || ctx->device >= MAX_LANES)
        return;
    gemm_lane &L = lanes[ctx->device];
    if (!L.tried) {
        L.tried = 1;
        if (cudaStreamCreateWithFlags(&L.s, cudaStreamNonBlocking) != cudaSuccess) {
            (void)cudaGetLastError();
            L.s = NULL;
        } else if (cublasCreate(&L.h) != CUBLAS_STATUS_SUCCESS ||
                   cublasSetStream(L.h, L.s) != CUBLAS_STATUS_SUCCESS) {
            if (L.h)
                (void)cublasDestroy(L.h);
            L.h = NULL;
            (void)cudaStreamDestroy(L.s);
            L.s = NULL;
        }
    }
    if (L.h) {
        *h = L.h;
        *s = L.s;
    }
}

/* Stream b waits for everything queued on stream a so far (ev: a scratch event). */
int stream_after(cudaStream_t b, cudaStream_t a, cudaEvent_t ev)
{
    if (a == b)
        return GSB_OK;
    CUDA_TRY(cudaEventRecord(ev, a));
    CUDA_TRY(cudaStreamWaitEvent(b, ev, 0));
    return GSB_OK;
}

/* Wait (in the backend's stream) for the GEMM and side streams, then free
 * everything.  Returns rc, or the first failure of the cleanup where rc was
 * GSB_OK. */
int gemm_free(const gsb__backend *be, gemm_bufs &g, int rc)
{
    cudaStream_t ms = gsb__cuda_ctx_of(be)->stream;
    if (g.side) {
        /* nothing is freed before the GEMMs and selections that read it are done */
        int r = g.ready ? stream_after(ms, g.side, g.ready) : GSB_EINTERNAL;
        if (r == GSB_OK && g.gs)
            r = stream_after(ms, g.gs, g.ready);
        cudaError_t e = cudaSuccess;
        if (r != GSB_OK) {
            e = cudaStreamSynchronize(g.side);
            if (e == cudaSuccess && g.gs)
                e = cudaStreamSynchronize(g.gs);
        }
        if (e == cudaSuccess)
            e = cudaStreamDestroy(g.side);
        if (e != cudaSuccess && rc == GSB_OK)
            rc = gsb__cuda_fail_rt(e, "waiting for the selections", __FILE__, __LINE__);
    }
    cudaEvent_t evs[] = {g.ready,       g.uploaded,    g.gemm_done[0],
                         g.gemm_done[1], g.sel_done[0], g.sel_done[1]};
    for (cudaEvent_t ev : evs) {
        cudaError_t e = ev ? cudaEventDestroy(ev) : cudaSuccess;
        if (e != cudaSuccess && rc == GSB_OK)
            rc = gsb__cuda_fail_rt(e, "cudaEventDestroy", __FILE__, __LINE__);
    }
    void *ptrs[] = {g.qaux, g.raux, g.lv, g.li,  g.len, g.carry,   g.wide,   g.bad,
                    g.mean, g.rb,   g.qf, g.rf,  g.tq,  g.cnt,     g.cand,   g.tile[0],
                    g.tile[1]};
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

/* The admission slack of a run (the header comment says why each term). */
template <typename T>
double run_slack(int64_t d, int tf32, bool prune)
{
    double s = 2.0 * ((double)(d + 2) * num<T>::eps + (double)(2 * d + 8) * DBL_EPSILON) +
               (tf32 ? TF32_SLACK : 0.0);
    if (prune)
        s += gsb__cuda_topk_prune_slack(d);
    return s;
}

/* One run's inputs as the tiles see them: the GEMM operands (the inputs, or
 * their float32 copies) and, while the references are still arriving, how
 * many rows of them are on the device and prepared. */
template <typename T, typename TX>
struct run_in {
    const TX *Qx, *Rx;   /* exact data on the device (Rx: filled as it arrives) */
    const T *Q, *R;      /* the GEMM's operands */
    const TX *Rhost;     /* the references on the host, or NULL: all on the device */
    int64_t nq, nr, d, ready_rows;
    int metric;
    bool prune;          /* the GEMM reads centred float32 copies (cuda_topk_prune.h) */
    double slack;
};

/* Norms and admission terms of reference rows [r0, r1) (centred float32
 * copies too, where pruned), on the backend's stream. */
template <typename T, typename TX>
int prep_refs(const gsb__backend *be, const run_in<T, TX> &in, gemm_bufs &g, int64_t r0,
              int64_t r1)
{
    const int64_t n = r1 - r0, d = in.d;
    if (in.prune)
        return gsb__cuda_topk_prune_rows(be, in.Rx + r0 * d, n, d, g.mean, in.nq,
                                         g.rf + r0 * d, g.raux + r0, (float *)g.rb + r0,
                                         in.slack, g.bad);
    int rc = row_norms<T, double>(be, in.R + r0 * d, n, d, 0, g.raux + r0, num<T>::big, g.wide);
    if (rc != GSB_OK)
        return rc;
    topk_prep_kernel<T><<<grid_for(be, n, 256), 256, 0, gsb__cuda_ctx_of(be)->stream>>>(
        g.qaux, 0, g.raux + r0, (T *)g.rb + r0, n, in.metric, in.slack);
    CUDA_TRY(cudaGetLastError());
    return GSB_OK;
}

/* The references a tile ending at row need reads: while they are still on
 * the host, upload (on the backend's stream, cuda_copy.cu) and prepare the
 * next pieces of at least PIECE_BYTES up to it, and make the GEMM stream wait
 * for them. */
template <typename T, typename TX>
int refs_ready(const gsb__backend *be, run_in<T, TX> &in, gemm_bufs &g, int64_t need)
{
    if (in.ready_rows >= need)
        return GSB_OK;
    const int64_t row_bytes = in.d * (int64_t)sizeof(TX);
    const int64_t piece_bytes = env_size("GSB_TOPK_PIECE_BYTES", PIECE_BYTES);
    int64_t piece = piece_bytes / row_bytes > 0 ? piece_bytes / row_bytes : 1;
    int64_t to = in.ready_rows + piece > need ? in.ready_rows + piece : need;
    if (to > in.nr)
        to = in.nr;
    int rc = gsb__cuda_copy_h2d(be, (void *)(in.Rx + in.ready_rows * in.d),
                                in.Rhost + in.ready_rows * in.d,
                                (size_t)((to - in.ready_rows) * row_bytes));
    if (rc == GSB_OK)
        rc = prep_refs<T, TX>(be, in, g, in.ready_rows, to);
    if (rc != GSB_OK)
        return rc;
    in.ready_rows = to;
    return stream_after(g.gs, gsb__cuda_ctx_of(be)->stream, g.uploaded);
}

/* Whether a pruned run screens (cuda_topk_screen.cu) the references after
 * its first GEMM tile: narrow rows (the GEMM output's round trip through
 * memory sets the time there), k small enough that the screens' places
 * hold what a query admits (each screen is as wide as all before it: ~k
 * admissions a query), GSB_TOPK_SCREEN=off not set. */
bool screen_applies(bool prune, int64_t d, int64_t k)
{
    const char *mode = getenv("GSB_TOPK_SCREEN");
    return prune && d <= GSB_TOPK_SCREEN_MAX_D && k <= SCREEN_MAX_K &&
           !(mode && strcmp(mode, "off") == 0);
}

/* A screened run's references [from, nr) for the chunk a describes: screens
 * of doubling width (each as wide as all before it), each followed by the
 * rank step of its admitted candidates (rank_kernel), on the side stream;
 * the last writes the chunk's results. */
template <typename T, typename TX>
int screen_rest(const gsb__backend *be, run_in<T, TX> &in, gemm_bufs &g, sel_args &a,
                int64_t from)
{
    gsb__topk_screen s;
    s.Q = g.qf;
    s.R = g.rf;
    s.rb = (const float *)g.rb;
    s.tq = g.tq;
    s.d = in.d;
    s.q_begin = a.q_begin;
    s.nqc = a.nqc;
    s.exclude_self = a.exclude_self;
    s.abort = g.bad;
    s.cnt = g.cnt;
    s.cand = g.cand;
    const rank_in r = {g.cnt, g.cand, g.qf, g.rf};
    for (int64_t j0 = from; j0 < in.nr;) {
        const int64_t nb = j0 < in.nr - j0 ? j0 : in.nr - j0;
        PASS((refs_ready<T, TX>(be, in, g, j0 + nb)));
        CUDA_TRY(cudaStreamWaitEvent(g.side, g.uploaded, 0));
        s.j0 = j0;
        s.j1 = j0 + nb;
        PASS(gsb__cuda_topk_screen(be, s, g.side));
        a.j0 = j0;
        a.nb = nb;
        a.last = j0 + nb >= in.nr;
        rank_kernel<TX><<<(unsigned)((a.nqc + WARPS - 1) / WARPS), WARPS * 32, 0, g.side>>>(a, r);
        CUDA_TRY(cudaGetLastError());
        j0 += nb;
    }
    return GSB_OK;
}

/*
 * topk of Qt against Rt (both TX) through GEMM tiles of type T: T == TX
 * without prune is the exact mode (or topk_fast's TF32 for float32); prune
 * (T float, tf32) prunes float64 or float32 through centred float32 copies
 * and TF32 tiles (cuda_topk_prune.cu), where *pruned says whether the data
 * allowed it (0: the results are not written; the caller runs the exact
 * mode).  Rhost: the
 * references are still on the host; Rt's device buffer is filled as the
 * tiles come to need them, so the upload overlaps the search (the GEMMs run
 * on their own stream, gemm_lane_of); the whole of Rt is on the device when
 * this returns GSB_OK.
 */
template <typename T, typename TX>
int gemm_run(const gsb__backend *be, const gsb__tensor *Qt, const gsb__tensor *Rt,
             const void *Rhost, int64_t k, gsb__metric metric, int exclude_self, int tf32,
             bool prune, gsb__tensor *dist, gsb__tensor *idx, int *pruned)
{
    static_assert(sizeof(T) == sizeof(TX) || sizeof(T) == sizeof(float),
                  "float64 goes through float32 copies or DGEMM tiles");
    const gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    cudaStream_t ms = ctx->stream;
    const int64_t nq = Qt->rows, nr = Rt->rows, d = Qt->cols;
    run_in<T, TX> in;
    gemm_bufs g;
    int64_t nqc_max = 0, nb_max = 0, t = 0;
    sel_args a;
    int rc = GSB_OK, host_bad = 1;
    bool screen = false;

    in.Qx = (const TX *)Qt->data;
    in.Rx = (const TX *)Rt->data;
    in.Q = (const T *)Qt->data; /* the float32 copies instead, below, where pruned */
    in.R = (const T *)Rt->data;
    in.Rhost = (const TX *)Rhost;
    in.nq = nq;
    in.nr = nr;
    in.d = d;
    in.ready_rows = Rhost ? 0 : nr;
    in.metric = (int)metric;
    in.prune = prune;
    in.slack = run_slack<T>(d, tf32, prune);
    gemm_lane_of(ctx, &g.blas, &g.gs);

    GSB_CUDA_CHECK(plan_tiles<T>(nq, nr, &nqc_max, &nb_max));
    screen = sizeof(T) == sizeof(float) && screen_applies(prune, d, k) && nb_max < nr &&
             gsb__cuda_topk_screen_supported(be);
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, sizeof(int), (void **)&g.wide));
    CUDA_CHECK(cudaMemsetAsync(g.wide, 0, sizeof(int), ms));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nq * sizeof(double), (void **)&g.qaux));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nr * sizeof(double), (void **)&g.raux));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nr * sizeof(T), &g.rb));
    if (prune) {
        rc = gsb__cuda_alloc(be, (size_t)(nq * d) * sizeof(float), (void **)&g.qf);
        if (rc == GSB_OK)
            rc = gsb__cuda_alloc(be, (size_t)(nr * d) * sizeof(float), (void **)&g.rf);
        if (rc == GSB_ENOMEM) {
            /* no room for the copies: the exact mode needs none, only all of R */
            rc = Rhost ? gsb__cuda_copy_h2d(be, Rt->data, Rhost,
                                            (size_t)(nr * d) * sizeof(TX))
                       : GSB_OK;
            goto done;
        }
        GSB_CUDA_CHECK(rc);
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)d * sizeof(double), (void **)&g.mean));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, sizeof(int), (void **)&g.bad));
        CUDA_CHECK(cudaMemsetAsync(g.bad, 0, sizeof(int), ms));
        /* centred on the queries' mean: all of them are here already */
        GSB_CUDA_CHECK(gsb__cuda_topk_prune_sums(be, in.Qx, nq, d, g.mean));
        GSB_CUDA_CHECK(gsb__cuda_topk_prune_rows(be, in.Qx, nq, d, g.mean, nq, g.qf, g.qaux,
                                                 NULL, in.slack, g.bad));
        in.Q = (const T *)g.qf;
        in.R = (const T *)g.rf;
    } else {
        GSB_CUDA_CHECK((row_norms<T, double>(be, in.Q, nq, d, 0, g.qaux, num<T>::big, g.wide)));
        topk_prep_kernel<T><<<grid_for(be, nq, 256), 256, 0, ms>>>(g.qaux, nq, g.raux,
                                                                  (T *)g.rb, 0, (int)metric,
                                                                  in.slack);
        CUDA_CHECK(cudaGetLastError());
    }
    if (!Rhost)
        GSB_CUDA_CHECK((prep_refs<T, TX>(be, in, g, 0, nr)));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(nqc_max * k) * sizeof(double), (void **)&g.lv));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(nqc_max * k) * sizeof(int), (void **)&g.li));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nqc_max * sizeof(int), (void **)&g.len));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(nqc_max * (CARRY + 1)) * sizeof(int),
                                   (void **)&g.carry));
    for (int b = 0; b < 2; b++)
        GSB_CUDA_CHECK(
            gsb__cuda_alloc(be, (size_t)(nqc_max * nb_max) * sizeof(T), &g.tile[b]));
    if (screen) {
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nqc_max * sizeof(float), (void **)&g.tq));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)nqc_max * sizeof(int), (void **)&g.cnt));
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(nqc_max * GSB_TOPK_SCREEN_CAP) * sizeof(int2),
                                       (void **)&g.cand));
        CUDA_CHECK(cudaMemsetAsync(g.cnt, 0, (size_t)nqc_max * sizeof(int), ms));
    }

    /* the GEMM and side streams start after the allocations and norms above */
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.side, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&g.ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g.uploaded, cudaEventDisableTiming));
    for (int b = 0; b < 2; b++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&g.gemm_done[b], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&g.sel_done[b], cudaEventDisableTiming));
    }
    GSB_CUDA_CHECK(stream_after(g.side, ms, g.ready));
    GSB_CUDA_CHECK(stream_after(g.gs, ms, g.ready));

    a.Q = in.Qx;
    a.R = in.Rx;
    a.ld = nb_max;
    a.d = d;
    a.k = k;
    a.metric = (int)metric;
    a.exclude_self = exclude_self != 0;
    a.qaux = g.qaux;
    a.raux = g.raux;
    a.rb = g.rb;
    a.slack = in.slack;
    a.wide = g.wide;
    a.abort = g.bad;
    a.lv = g.lv;
    a.li = g.li;
    a.len = g.len;
    a.carry = g.carry;
    a.tq = g.tq;
    a.dist = dist->data;
    a.idx = (int64_t *)idx->data;
    for (int64_t q0 = 0; q0 < nq; q0 += nqc_max) {
        a.q_begin = q0;
        a.nqc = nq - q0 < nqc_max ? nq - q0 : nqc_max;
        /* the side stream reset the previous chunk's lists in its own order */
        CUDA_CHECK(cudaMemsetAsync(g.len, 0, (size_t)a.nqc * sizeof(int), g.side));
        CUDA_CHECK(cudaMemsetAsync(g.carry, 0, (size_t)(a.nqc * (CARRY + 1)) * sizeof(int),
                                   g.side));
        /* screened: the first tile only through the GEMM (its selection
         * fills the lists and sets the thresholds the screens start from) */
        for (int64_t j0 = 0; j0 < (screen ? nb_max : nr); j0 += nb_max, t++) {
            const int b = (int)(t & 1);
            a.j0 = j0;
            a.nb = nr - j0 < nb_max ? nr - j0 : nb_max;
            a.last = j0 + a.nb >= nr;
            a.S = g.tile[b];
            GSB_CUDA_CHECK((refs_ready<T, TX>(be, in, g, j0 + a.nb)));
            /* buffer b is free once the selection of tile t - 2 is done */
            if (t >= 2)
                CUDA_CHECK(cudaStreamWaitEvent(g.gs, g.sel_done[b], 0));
            GSB_CUDA_CHECK(tile_gemm<T>(g.blas, in.Q, in.R, q0, a.nqc, j0, a.nb, d, nb_max,
                                        tf32, (T *)g.tile[b]));
            CUDA_CHECK(cudaEventRecord(g.gemm_done[b], g.gs));
            CUDA_CHECK(cudaStreamWaitEvent(g.side, g.gemm_done[b], 0));
            select_kernel<T, TX>
                <<<(unsigned)((a.nqc + WARPS - 1) / WARPS), WARPS * 32, 0, g.side>>>(a);
            CUDA_CHECK(cudaGetLastError());
            CUDA_CHECK(cudaEventRecord(g.sel_done[b], g.side));
        }
        if (screen)
            GSB_CUDA_CHECK((screen_rest<T, TX>(be, in, g, a, nb_max)));
    }
    if (prune) {
        /* the range check of every copy (on the backend's stream, which the
         * GEMMs and selections do not hold up) */
        CUDA_CHECK(cudaMemcpyAsync(&host_bad, g.bad, sizeof(int), cudaMemcpyDeviceToHost, ms));
        CUDA_CHECK(cudaStreamSynchronize(ms));
        *pruned = host_bad == 0;
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
/* exact_f32: exact float32 (not topk_fast's TF32) that is not pruned
 * (cosine, GSB_TOPK_F32=exact), where the fused kernel stays faster on
 * narrow rows: on an H200 at 10k x 200k x 64 it took 13.5 ms against the
 * GEMM path's 16.1 (float64: 21.7 against 16.8; float32 at d = 784: 98
 * against 63). */
extern "C" int gsb__cuda_topk_gemm_applies(int64_t nq, int64_t nr, int64_t d,
                                            gsb__metric metric, int exact_f32)
{
    if (exact_f32 && gsb__cuda_topk_prune_applies(metric, GSB_F32))
        exact_f32 = 0;
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
                                   const gsb__tensor *R, const void *Rhost, int64_t k,
                                   gsb__metric metric, int exclude_self, int tf32,
                                   gsb__tensor *dist, gsb__tensor *idx)
{
    /* pruned through TF32 tiles (topk_fast keeps its own uncentred TF32) */
    if ((Q->dtype == GSB_F64 || !tf32) && gsb__cuda_topk_prune_applies(metric, Q->dtype)) {
        int pruned = 0;
        int rc = Q->dtype == GSB_F32
                     ? gemm_run<float, float>(be, Q, R, Rhost, k, metric, exclude_self, 1, true,
                                              dist, idx, &pruned)
                     : gemm_run<float, double>(be, Q, R, Rhost, k, metric, exclude_self, 1,
                                               true, dist, idx, &pruned);
        if (rc != GSB_OK || pruned)
            return rc;
        Rhost = NULL; /* all of R is on the device now */
    }
    if (Q->dtype == GSB_F32)
        return gemm_run<float, float>(be, Q, R, Rhost, k, metric, exclude_self, tf32, false,
                                      dist, idx, NULL);
    return gemm_run<double, double>(be, Q, R, Rhost, k, metric, exclude_self, 0, false, dist,
                                    idx, NULL);
}
