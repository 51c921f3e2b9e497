/*
 * cuda_kmeanspp.cu - kmeanspp: greedy k-means++ on the GPU (the contract is
 * in backend/backend.h; the CPU twin is cpu_kmeanspp.c).
 *
 * Why an op: KMeans' default init (k-means++, e.g. k = 100 on 1M x 64) used
 * to bring n x trials distances to the host at every step.  Here a whole
 * call runs on ctx->stream without waiting on the host; the only wait is at
 * the end, to return chosen[] and *pot.
 *
 * Shape, shared with the CPU twin so both draw the same rows:
 *  - rows are grouped in fixed chunks of KPP_CHUNK; after each step one pass
 *    (fold) folds the winner into closest and sums w_i * closest_i per chunk;
 *  - a draw (sample) finds its chunk from the chunk sums, then its row by a
 *    scan inside the chunk;
 *  - the trials' potentials are summed per fixed block of rows (trials, one
 *    partial per block and trial), then the blocks in order (pick).
 * Every sum runs in an order fixed by the shapes only (never by the grid or
 * the scheduling), so a call repeats bitwise.  The sums associate
 * differently from the CPU twin's (which the contract allows); a draw can
 * then differ only when it lands within rounding of a row boundary.
 *
 * One device function computes every distance (first centre, trials, fold):
 * the lanes of a warp split the columns, each accumulates fma(t, t, s) in
 * double with t = x - c, then an xor butterfly, which leaves the same bits
 * in every lane; a warp takes KPP_ROWS rows at once, each with its own
 * accumulators, so several rows' loads are in flight.  Intrinsics (__dsub_rn, __fma_rn, __dadd_rn, __dmul_rn)
 * keep the compiler from contracting or reordering, so the distance a trial
 * was scored with is bitwise the one folded into closest when it wins, and
 * a candidate staged in shared memory as double gives the same bits as one
 * read from X.
 *
 * Chunk sums and the in-chunk scan share one scheme (chunk_scan): thread t
 * of 256 owns rows 8t .. 8t + 7 of the chunk, sums them in order, and a
 * fixed-tree exclusive scan combines the threads; the chunk's sum is
 * E_255 + run_255.  So for a full chunk the last row's running sum, formed
 * as base + (E + run), is bitwise base + chunk sum, the value that selected
 * the chunk, and a draw that picks a chunk always finds a row in it.
 *
 * Continuing (first < 0): the chunk sums are recomputed from closest (the
 * scratch lives for one call), by the fold's own code, so splitting the
 * steps over several calls gives bitwise the results of one call.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* Rows per chunk of the sampling sums (the CPU twin uses the same). */
constexpr int KPP_CHUNK = 2048;
/* Threads of the fold, sample and trials kernels: 8 warps; each thread of
 * a chunk scan owns KPP_PER_THREAD consecutive rows. */
constexpr int KPP_THREADS = 256;
constexpr int KPP_WARPS = KPP_THREADS / 32;
constexpr int KPP_PER_THREAD = KPP_CHUNK / KPP_THREADS;
static_assert(KPP_PER_THREAD * KPP_THREADS == KPP_CHUNK, "a chunk is split evenly");
/* Most blocks of rows whose partial potentials are kept per step (as the
 * CPU twin's KPP_MAX_BLOCKS). */
constexpr int64_t KPP_MAX_BLOCKS = 1024;
/* Most candidates per step: each lane of a warp keeps the running sums of
 * two of them in registers. */
constexpr int KPP_MAX_TRIALS = 64;
/* Candidate rows (as double) are staged in shared memory up to this size. */
constexpr int64_t KPP_CAND_SMEM = 32 << 10;
constexpr unsigned FULL_MASK = 0xffffffffu;

/* One step's uniforms, passed by value as a kernel argument (512 bytes):
 * no upload, so nothing waits on the host before the call's end. */
struct kpp_uniforms {
    double u[KPP_MAX_TRIALS];
};

/* fold modes */
enum { KPP_INIT = 0, KPP_FOLD = 1, KPP_SUMS = 2 };

/* ---- device helpers ---------------------------------------------------------------- */

/*
 * Squared euclidean distances between R rows x[r] (NULL: skipped, 0) and
 * one centre c (d columns), in double, by the whole warp: lane l takes
 * columns l, l + 32, ...; every lane returns the same bits.  Each row gets
 * exactly the operations it would get alone (its own accumulator, columns
 * in order, then the butterfly), so R only changes how many rows' loads are
 * in flight together, never a result: the one distance function of the op
 * (see the top).
 */
template <int R, typename T, typename C>
__device__ __forceinline__ void kpp_sqdist_rows(const T *const (&x)[R],
                                                const C *__restrict__ c, int64_t d, int lane,
                                                double (&out)[R])
{
    double s[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        s[r] = 0.0;
    for (int64_t j = lane; j < d; j += 32) {
        const double cj = (double)c[j];
        double xv[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            xv[r] = x[r] ? (double)x[r][j] : cj;
#pragma unroll
        for (int r = 0; r < R; r++) {
            double t = __dsub_rn(xv[r], cj);
            s[r] = __fma_rn(t, t, s[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            s[r] = __dadd_rn(s[r], __shfl_xor_sync(FULL_MASK, s[r], o));
        out[r] = s[r];
    }
}

/* Rows a warp handles at once in the passes over X: more loads in flight
 * (each row is one coalesced read of d values), the same results. */
constexpr int KPP_ROWS = 4;

/* w_i * v; 0 for a zero weight even when v is infinite (the CPU twin's
 * kpp_wd): such rows never turn a sum into NaN. */
__device__ __forceinline__ double kpp_wd(const double *__restrict__ w, int64_t i, double v)
{
    if (!w)
        return v;
    double wi = w[i];
    return wi == 0.0 ? 0.0 : __dmul_rn(wi, v);
}

/* Exclusive scan of one value per thread (KPP_THREADS threads) in a fixed
 * tree (Hillis-Steele); buf holds KPP_THREADS doubles.  Ends with a barrier,
 * so buf may be reused at once. */
__device__ __forceinline__ double kpp_block_excl_scan(double v, double *buf)
{
    const int t = threadIdx.x;
    buf[t] = v;
    __syncthreads();
    for (int off = 1; off < KPP_THREADS; off <<= 1) {
        double add = t >= off ? buf[t - off] : 0.0;
        __syncthreads();
        if (t >= off)
            buf[t] = __dadd_rn(buf[t], add);
        __syncthreads();
    }
    double e = t > 0 ? buf[t - 1] : 0.0;
    __syncthreads();
    return e;
}

/*
 * The chunk scan (see the top): p holds this thread's KPP_PER_THREAD
 * products (0 past the last row); run gets their running sums from 0, and
 * the return value is the exclusive scan E of the threads' totals.  Row j's
 * prefix inside the chunk is E + run[j]; the chunk's sum is thread
 * KPP_THREADS - 1's E + run[KPP_PER_THREAD - 1].
 */
__device__ __forceinline__ double kpp_chunk_scan(const double (&p)[KPP_PER_THREAD],
                                                 double (&run)[KPP_PER_THREAD], double *buf)
{
    double s = 0.0;
#pragma unroll
    for (int j = 0; j < KPP_PER_THREAD; j++) {
        s = __dadd_rn(s, p[j]);
        run[j] = s;
    }
    return kpp_block_excl_scan(s, buf);
}

/* ---- kernels ----------------------------------------------------------------------- */

/*
 * Per chunk (one block at a time, grid-stride over chunks): mode KPP_INIT
 * sets closest_i = D_i, KPP_FOLD closest_i = min(closest_i, D_i) (as the
 * CPU twin: replaced when D_i < closest_i), with D_i the distance to row
 * *src_dev (or src when src_dev is NULL); KPP_SUMS leaves closest as it is.
 * Then chunk_sums[b] = the chunk scan's sum of w_i * closest_i.  A warp per
 * row; lane 0 writes the row's closest and product.
 */
template <typename T>
__global__ void __launch_bounds__(KPP_THREADS)
    kpp_fold_kernel(const T *__restrict__ X, int64_t n, int64_t d, const double *__restrict__ w,
                    double *__restrict__ closest, const int64_t *__restrict__ src_dev,
                    int64_t src, int mode, int64_t nb, double *__restrict__ chunk_sums)
{
    __shared__ double prod[KPP_CHUNK];
    __shared__ double buf[KPP_THREADS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const T *c = NULL;
    if (mode != KPP_SUMS) {
        int64_t r = src_dev ? *src_dev : src;
        r = r < 0 ? 0 : (r >= n ? n - 1 : r); /* guard: the host checked first, pick clamps */
        c = X + r * d;
    }
    static_assert(KPP_CHUNK % (KPP_WARPS * KPP_ROWS) == 0, "a chunk splits into row groups");
    for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {
        const int64_t i0 = b * KPP_CHUNK;
        /* warp q takes rows q, q + 8, ... of the chunk, KPP_ROWS at a time */
        for (int r0 = warp; r0 < KPP_CHUNK; r0 += KPP_WARPS * KPP_ROWS) {
            const T *xs[KPP_ROWS];
            double D[KPP_ROWS];
#pragma unroll
            for (int q = 0; q < KPP_ROWS; q++) {
                const int64_t i = i0 + r0 + q * KPP_WARPS;
                xs[q] = i < n ? X + i * d : NULL; /* warp-uniform */
            }
            if (mode != KPP_SUMS)
                kpp_sqdist_rows<KPP_ROWS>(xs, c, d, lane, D);
            if (lane == 0) {
#pragma unroll
                for (int q = 0; q < KPP_ROWS; q++) {
                    const int64_t i = i0 + r0 + q * KPP_WARPS;
                    double p = 0.0;
                    if (xs[q]) {
                        double ci;
                        if (mode == KPP_SUMS) {
                            ci = closest[i];
                        } else {
                            ci = D[q];
                            if (mode == KPP_FOLD) {
                                double old = closest[i];
                                ci = D[q] < old ? D[q] : old;
                            }
                            closest[i] = ci;
                        }
                        p = kpp_wd(w, i, ci);
                    }
                    prod[r0 + q * KPP_WARPS] = p;
                }
            }
        }
        __syncthreads();
        double pv[KPP_PER_THREAD], run[KPP_PER_THREAD];
#pragma unroll
        for (int j = 0; j < KPP_PER_THREAD; j++)
            pv[j] = prod[threadIdx.x * KPP_PER_THREAD + j];
        /* ends with a barrier: prod may be rewritten by the next chunk */
        double e = kpp_chunk_scan(pv, run, buf);
        if (threadIdx.x == KPP_THREADS - 1)
            chunk_sums[b] = __dadd_rn(e, run[KPP_PER_THREAD - 1]);
    }
}

/* *pot = the chunk sums added in index order (the CPU twin's order). */
__global__ void kpp_total_kernel(const double *__restrict__ chunk_sums, int64_t nb,
                                 double *__restrict__ pot)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++)
        s = __dadd_rn(s, chunk_sums[b]);
    *pot = s;
}

__global__ void kpp_set_kernel(double *p, double v)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *p = v;
}

/*
 * One block per trial t: v = u[t] * *pot; the first chunk b whose inclusive
 * prefix reaches v (each thread owns a contiguous run of chunks; the fixed
 * tree scans the threads' totals, then each thread walks its run from its
 * exclusive prefix, so a chunk's inclusive prefix is bitwise its exclusive
 * prefix + its sum); then the first row of b whose base + (E + run) reaches
 * v.  No chunk: row n - 1 (the CPU twin's clamp).  A chunk but no row (only
 * possible through rounding in a last, partial chunk): its last row,
 * clamped to n - 1.
 */
__global__ void __launch_bounds__(KPP_THREADS)
    kpp_sample_kernel(const double *__restrict__ closest, const double *__restrict__ w,
                      int64_t n, int64_t nb, const double *__restrict__ chunk_sums,
                      const kpp_uniforms uni, const double *__restrict__ pot,
                      int64_t *__restrict__ cand)
{
    __shared__ double buf[KPP_THREADS];
    __shared__ unsigned long long found;
    __shared__ double found_excl;
    const int tid = threadIdx.x;
    const int64_t t = blockIdx.x;
    const double v = __dmul_rn(uni.u[t], *pot);
    if (tid == 0)
        found = ULLONG_MAX;

    /* the chunk */
    const int64_t per = (nb + KPP_THREADS - 1) / KPP_THREADS;
    const int64_t b0 = (int64_t)tid * per < nb ? (int64_t)tid * per : nb;
    const int64_t b1 = b0 + per < nb ? b0 + per : nb;
    double tot = 0.0;
    for (int64_t b = b0; b < b1; b++)
        tot = __dadd_rn(tot, chunk_sums[b]);
    double acc = kpp_block_excl_scan(tot, buf); /* its barriers order found's reset */
    int64_t mine = -1;
    double mine_excl = 0.0;
    for (int64_t b = b0; b < b1; b++) {
        double nxt = __dadd_rn(acc, chunk_sums[b]);
        if (nxt >= v) {
            mine = b;
            mine_excl = acc;
            break;
        }
        acc = nxt;
    }
    if (mine >= 0)
        atomicMin(&found, (unsigned long long)mine);
    __syncthreads();
    if (mine >= 0 && (unsigned long long)mine == found)
        found_excl = mine_excl; /* runs are disjoint: one writer */
    __syncthreads();
    const unsigned long long fb = found;
    if (fb == ULLONG_MAX) { /* the same for the whole block */
        if (tid == 0)
            cand[t] = n - 1;
        return;
    }
    const double base = found_excl;
    const int64_t c0 = (int64_t)fb * KPP_CHUNK;
    __syncthreads(); /* everyone has read found before it is reset */
    if (tid == 0)
        found = ULLONG_MAX;

    /* the row inside chunk fb */
    double pv[KPP_PER_THREAD], run[KPP_PER_THREAD];
#pragma unroll
    for (int j = 0; j < KPP_PER_THREAD; j++) {
        int64_t i = c0 + (int64_t)tid * KPP_PER_THREAD + j;
        pv[j] = i < n ? kpp_wd(w, i, closest[i]) : 0.0;
    }
    const double e = kpp_chunk_scan(pv, run, buf); /* its barriers order the reset */
    int row = -1;
#pragma unroll
    for (int j = 0; j < KPP_PER_THREAD; j++) {
        if (row < 0 && __dadd_rn(base, __dadd_rn(e, run[j])) >= v)
            row = tid * KPP_PER_THREAD + j;
    }
    if (row >= 0)
        atomicMin(&found, (unsigned long long)row);
    __syncthreads();
    if (tid == 0) {
        int64_t r = found == ULLONG_MAX ? KPP_CHUNK - 1 : (int64_t)found;
        int64_t i = c0 + r;
        cand[t] = i < n ? i : n - 1;
    }
}

/*
 * Block p of the fixed grid (P = gridDim.x, from the shapes only) owns rows
 * [n p / P, n (p + 1) / P), as the CPU twin's blocks; warp q takes rows
 * q, q + 8, ... of them in order, and for trial t lane t % 32 adds
 * w_i min(closest_i, D_it) into its register for t < 32 (a0) or t >= 32
 * (a1).  The warps' sums are added in warp order into
 * partials[p * trials + t].  stage: the candidate rows are in shared
 * memory (as double, trials x d), else read from X.
 */
template <typename T>
__global__ void __launch_bounds__(KPP_THREADS)
    kpp_trials_kernel(const T *__restrict__ X, int64_t n, int64_t d,
                      const double *__restrict__ w, const double *__restrict__ closest,
                      const int64_t *__restrict__ cand, int trials, int stage,
                      double *__restrict__ partials)
{
    extern __shared__ double cand_rows[];
    __shared__ double wsum[KPP_WARPS][KPP_MAX_TRIALS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (stage) {
        for (int64_t e = tid; e < (int64_t)trials * d; e += KPP_THREADS) {
            int64_t t = e / d, j = e - t * d;
            cand_rows[e] = (double)X[cand[t] * d + j];
        }
    }
    __syncthreads();
    const int64_t P = gridDim.x, p = blockIdx.x;
    const int64_t i0 = n * p / P, i1 = n * (p + 1) / P;
    double a0 = 0.0, a1 = 0.0;
    /* rows i, i + 8, ... of the block, KPP_ROWS at a time, added in that order */
    for (int64_t i = i0 + warp; i < i1; i += KPP_WARPS * KPP_ROWS) {
        const T *xs[KPP_ROWS];
        double ci[KPP_ROWS];
#pragma unroll
        for (int q = 0; q < KPP_ROWS; q++) {
            const int64_t iq = i + q * KPP_WARPS;
            xs[q] = iq < i1 ? X + iq * d : NULL; /* warp-uniform */
            ci[q] = iq < i1 ? closest[iq] : 0.0;
        }
        for (int t = 0; t < trials; t++) {
            double D[KPP_ROWS];
            if (stage)
                kpp_sqdist_rows<KPP_ROWS>(xs, cand_rows + (int64_t)t * d, d, lane, D);
            else
                kpp_sqdist_rows<KPP_ROWS>(xs, X + cand[t] * d, d, lane, D);
            if (lane == (t & 31)) {
#pragma unroll
                for (int q = 0; q < KPP_ROWS; q++) {
                    if (!xs[q])
                        continue;
                    double v = kpp_wd(w, i + q * KPP_WARPS, D[q] < ci[q] ? D[q] : ci[q]);
                    if (t < 32)
                        a0 = __dadd_rn(a0, v);
                    else
                        a1 = __dadd_rn(a1, v);
                }
            }
        }
    }
    if (lane < trials)
        wsum[warp][lane] = a0;
    if (lane + 32 < trials)
        wsum[warp][lane + 32] = a1;
    __syncthreads();
    if (tid < trials) {
        double s = 0.0;
        for (int q = 0; q < KPP_WARPS; q++)
            s = __dadd_rn(s, wsum[q][tid]);
        partials[p * trials + tid] = s;
    }
}

/*
 * pots[t] = the P partials of trial t in block order; the winner is the
 * first of the lowest, by the CPU twin's scan (best = 0, replaced by a
 * strictly lower pot); *pot = its pot, *chosen = its row.  KPP_MAX_TRIALS
 * threads.
 */
__global__ void kpp_pick_kernel(const double *__restrict__ partials, int64_t P, int trials,
                                const int64_t *__restrict__ cand, double *__restrict__ pot,
                                int64_t *__restrict__ chosen)
{
    __shared__ double pots[KPP_MAX_TRIALS];
    const int t = threadIdx.x;
    if (t < trials) {
        double s = 0.0;
        for (int64_t p = 0; p < P; p++)
            s = __dadd_rn(s, partials[p * trials + t]);
        pots[t] = s;
    }
    __syncthreads();
    if (t == 0) {
        int best = 0;
        for (int k = 1; k < trials; k++)
            if (pots[k] < pots[best])
                best = k;
        *pot = pots[best];
        *chosen = cand[best];
    }
}

/* ---- argument checks: the CPU twin's (cpu_util.h's cpu_check) words ------------------ */

/* present, of dtype (0: either float dtype), on this GPU */
int kpp_check(const gsb__tensor *t, gsb_dtype dtype, const char *op, const char *name)
{
    if (!t || !t->data)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (dtype ? t->dtype != dtype : (t->dtype != GSB_F32 && t->dtype != GSB_F64))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                            gsb__cuda_dtype_name(t->dtype));
    return GSB_OK;
}

/* as cpu_check_vec: any rows x cols layout holding n elements */
int kpp_check_vec(const gsb__tensor *t, gsb_dtype dtype, int64_t n, const char *op,
                  const char *name)
{
    int rc = kpp_check(t, dtype, op, name);
    if (rc != GSB_OK)
        return rc;
    if (t->rows * t->cols != n)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has %lld elements, expected %lld", op, name,
                            (long long)(t->rows * t->cols), (long long)n);
    return GSB_OK;
}

/* after the CPU twin's checks: a host tensor here would be an illegal address */
int kpp_check_on(const gsb__backend *be, const gsb__tensor *t, const char *op, const char *name)
{
    if (t && t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    return GSB_OK;
}

/* ---- the body --------------------------------------------------------------------- */

template <typename T>
int kpp_run(const gsb__backend *be, const gsb__tensor *Xt, const gsb__tensor *wt, int64_t first,
            const double *u, int64_t steps, int64_t trials64, gsb__tensor *closest_t,
            double *pot, int64_t *chosen)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    cudaStream_t stream = ctx->stream;
    const T *X = (const T *)Xt->data;
    const double *w = wt ? (const double *)wt->data : NULL;
    double *closest = (double *)closest_t->data;
    const int64_t n = Xt->rows, d = Xt->cols;
    const int trials = (int)trials64;
    const int64_t nb = (n + KPP_CHUNK - 1) / KPP_CHUNK;
    const int64_t P = nb < KPP_MAX_BLOCKS ? nb : KPP_MAX_BLOCKS;
    /* the fold's grid only spreads chunks over blocks: results do not depend on it */
    const int64_t fold_cap = (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 16) * 8;
    const unsigned fold_grid = (unsigned)(nb < fold_cap ? nb : fold_cap);
    const int stage = (int64_t)trials * d * (int64_t)sizeof(double) <= KPP_CAND_SMEM;
    const size_t trials_smem = stage ? (size_t)trials * (size_t)d * sizeof(double) : 0;
    /* one scratch allocation of 8-byte words: chunk sums, partials, the
     * candidates, then chosen (steps) and pot right after, for one copy back */
    const int64_t words = nb + P * trials + trials + steps + 1;
    int rc = GSB_OK;
    void *scratch = NULL;
    double *chunk_sums, *partials, *pot_dev;
    int64_t *cand, *chosen_dev, *back = NULL;
    kpp_uniforms uni;
    if (steps > INT64_MAX / 8 - (nb + P * trials + trials + 1))
        return GSB_CUDA_ERR(GSB_ENOMEM, "kmeanspp: %lld steps do not fit in memory",
                            (long long)steps);
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)words * 8, &scratch));
    chunk_sums = (double *)scratch;
    partials = chunk_sums + nb;
    cand = (int64_t *)(partials + P * trials);
    chosen_dev = cand + trials;
    pot_dev = (double *)(chosen_dev + steps);
    memset(&uni, 0, sizeof uni);

    if (first >= 0) {
        kpp_fold_kernel<T><<<fold_grid, KPP_THREADS, 0, stream>>>(X, n, d, w, closest, NULL, first,
                                                                  KPP_INIT, nb, chunk_sums);
        CUDA_CHECK(cudaGetLastError());
        kpp_total_kernel<<<1, 1, 0, stream>>>(chunk_sums, nb, pot_dev);
        CUDA_CHECK(cudaGetLastError());
    } else {
        kpp_fold_kernel<T><<<fold_grid, KPP_THREADS, 0, stream>>>(X, n, d, w, closest, NULL, 0,
                                                                  KPP_SUMS, nb, chunk_sums);
        CUDA_CHECK(cudaGetLastError());
        kpp_set_kernel<<<1, 1, 0, stream>>>(pot_dev, *pot);
        CUDA_CHECK(cudaGetLastError());
    }
    for (int64_t s = 0; s < steps; s++) {
        for (int t = 0; t < trials; t++)
            uni.u[t] = u[s * trials + t];
        kpp_sample_kernel<<<(unsigned)trials, KPP_THREADS, 0, stream>>>(
            closest, w, n, nb, chunk_sums, uni, pot_dev, cand);
        CUDA_CHECK(cudaGetLastError());
        kpp_trials_kernel<T><<<(unsigned)P, KPP_THREADS, trials_smem, stream>>>(
            X, n, d, w, closest, cand, trials, stage, partials);
        CUDA_CHECK(cudaGetLastError());
        kpp_pick_kernel<<<1, KPP_MAX_TRIALS, 0, stream>>>(partials, P, trials, cand, pot_dev,
                                                          chosen_dev + s);
        CUDA_CHECK(cudaGetLastError());
        kpp_fold_kernel<T><<<fold_grid, KPP_THREADS, 0, stream>>>(
            X, n, d, w, closest, chosen_dev + s, 0, KPP_FOLD, nb, chunk_sums);
        CUDA_CHECK(cudaGetLastError());
    }
    /* the one wait: chosen and pot reach the host in one copy */
    back = (int64_t *)malloc((size_t)(steps + 1) * sizeof(int64_t));
    if (!back) {
        rc = GSB_CUDA_ERR(GSB_ENOMEM, "kmeanspp: out of host memory for %lld results",
                          (long long)(steps + 1));
        goto done;
    }
    CUDA_CHECK(cudaMemcpyAsync(back, chosen_dev, (size_t)(steps + 1) * sizeof(int64_t),
                               cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (steps > 0)
        memcpy(chosen, back, (size_t)steps * sizeof(int64_t));
    memcpy(pot, back + steps, sizeof(double));
done:
    free(back);
    gsb__cuda_free(be, scratch);
    return rc;
}

} // namespace

/* ---- the op: the CPU twin's checks and messages, then the body of X's dtype ------------ */

extern "C" int gsb__cuda_kmeanspp(const gsb__backend *be, const gsb__tensor *X,
                                  const gsb__tensor *w, int64_t first, const double *u,
                                  int64_t steps, int64_t trials, gsb__tensor *closest,
                                  double *pot, int64_t *chosen)
{
    const char *op = "kmeanspp";
    int rc;
    if ((rc = kpp_check(X, (gsb_dtype)0, op, "X")) != GSB_OK)
        return rc;
    const int64_t n = X->rows;
    if (n < 1)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: X has no rows", op);
    if (w && (rc = kpp_check_vec(w, GSB_F64, n, op, "w")) != GSB_OK)
        return rc;
    if ((rc = kpp_check_vec(closest, GSB_F64, n, op, "closest")) != GSB_OK)
        return rc;
    if (trials < 1 || trials > KPP_MAX_TRIALS)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %lld trials, expected 1 to %d", op,
                            (long long)trials, KPP_MAX_TRIALS);
    if (steps < 0 || first >= n || !pot || (steps > 0 && (!u || !chosen)))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: bad arguments (first %lld, steps %lld)", op,
                            (long long)first, (long long)steps);
    if ((rc = kpp_check_on(be, X, op, "X")) != GSB_OK ||
        (rc = kpp_check_on(be, w, op, "w")) != GSB_OK ||
        (rc = kpp_check_on(be, closest, op, "closest")) != GSB_OK)
        return rc;
    if (first < 0 && steps == 0)
        return GSB_OK;
    return X->dtype == GSB_F32
               ? kpp_run<float>(be, X, w, first, u, steps, trials, closest, pot, chosen)
               : kpp_run<double>(be, X, w, first, u, steps, trials, closest, pot, chosen);
}
