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
 *    (sums) sums w_i * closest_i per chunk;
 *  - a draw (sample) finds its chunk from the chunk sums, then its row by a
 *    scan inside the chunk;
 *  - the trials' potentials are summed per fixed block of rows (scan, one
 *    partial per block and trial), then the blocks in order (pick; when
 *    the trials' columns are kept, every sums block does pick's work
 *    itself, one launch less a step).
 *
 * A step reads X once (the job is memory-bound: 1M x 64 float64 is 512 MB):
 * the scan kernel computes each row's distance to every candidate, keeps
 * min(closest_i, D_it) for every trial t in a scratch column (store, when
 * those columns cost less to write and read back than X costs to read
 * again: kpp_keeps_trials), and the winner's column becomes closest (sums
 * with take; for the pipelined pass, below, only the rows a trial lowers
 * are written, with a mask byte a row).  Otherwise the winner is folded in by the same scan kernel
 * run again with one candidate (a second pass over X).  Both give the same
 * bits.
 *
 * Every sum runs in an order fixed by the shapes only (never by the grid or
 * the scheduling), so a call repeats bitwise.  The sums associate
 * differently from the CPU twin's (which the contract allows); a draw can
 * then differ only when it lands within rounding of a row boundary.
 *
 * One step computes every distance (first centre, trials, fold): a thread
 * owns a row and adds (x_j - c_j)^2 over the columns in order with
 * __fma_rn(t, t, s), t = __dsub_rn(x_j, c_j), from s = 0.  The intrinsics
 * keep the compiler from contracting or reordering, so the distance a trial
 * was scored with is bitwise the one folded into closest when it wins,
 * whichever pass computes it.  A warp stages 32 rows x KPP_COLS columns of
 * X in shared memory (coalesced reads, converted to double), so each row
 * is read from DRAM once per pass whatever the number of trials; the
 * candidates (as double, gathered by the sample kernel) sit in shared
 * memory when they fit.  Rows of whole 16-byte chunks with up to 8 trials
 * (KMeans' usual case) take the pipelined pass instead
 * (kpp_scan_async_kernel: cp.async rings, bitwise the same results).
 *
 * Chunk sums and the in-chunk scan share one scheme (chunk_scan): thread t
 * of 256 owns rows 8t .. 8t + 7 of the chunk, sums them in order, and a
 * fixed-tree exclusive scan combines the threads; the chunk's sum is
 * E_255 + run_255.  So for a full chunk the last row's running sum, formed
 * as base + (E + run), is bitwise base + chunk sum, the value that selected
 * the chunk, and a draw that picks a chunk always finds a row in it.
 *
 * The sequential sums over blocks (pick: P partials per trial; total: the
 * chunk sums) read their inputs into shared memory in coalesced tiles
 * first, so the dependent additions wait on shared memory, not on global
 * loads one at a time.
 *
 * Continuing (first < 0): the chunk sums are recomputed from closest (the
 * scratch lives for one call) by the sums kernel's own code, so splitting
 * the steps over several calls gives bitwise the results of one call.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* Rows per chunk of the sampling sums (the CPU twin uses the same). */
constexpr int KPP_CHUNK = 2048;
/* Threads of every kernel but the one-row gather: 8 warps; each thread of
 * a chunk scan owns KPP_PER_THREAD consecutive rows. */
constexpr int KPP_THREADS = 256;
constexpr int KPP_WARPS = KPP_THREADS / 32;
constexpr int KPP_PER_THREAD = KPP_CHUNK / KPP_THREADS;
static_assert(KPP_PER_THREAD * KPP_THREADS == KPP_CHUNK, "a chunk is split evenly");
/* Most blocks of rows whose partial potentials are kept per step (as the
 * CPU twin's KPP_MAX_BLOCKS). */
constexpr int64_t KPP_MAX_BLOCKS = 1024;
/* Most candidates per step. */
constexpr int KPP_MAX_TRIALS = 64;
/* Columns of X a warp stages at a time (32 rows x KPP_COLS doubles, one
 * more column of padding: a half-warp reading a column of its rows hits
 * 16 distinct bank pairs). */
constexpr int KPP_COLS = 16;
constexpr int KPP_SLAB = 32 * (KPP_COLS + 1);
/* Loads a lane issues at once while staging a slab: 8 made the scan
 * kernel spill at 64 registers a thread (ptxas -v, sm_90). */
constexpr int KPP_LOADS = 4;
static_assert(KPP_COLS % KPP_LOADS == 0, "a slab is staged in whole rounds");
/* The candidates (d x TMAX doubles) are staged in shared memory up to this
 * size: with the slabs (8 x 4352 bytes) it stays under the 48 KiB a block
 * gets without opting in. */
constexpr int64_t KPP_CAND_SMEM = 12 << 10;
static_assert(KPP_WARPS * KPP_SLAB * 8 + KPP_CAND_SMEM <= 48 << 10, "default shared memory");
static_assert(KPP_SLAB >= 2 * 32, "a warp's slab holds its two partial sums per lane");
/* Doubles per tile of the sequential sums (pick, total). */
constexpr int KPP_TILE = 2048;
constexpr unsigned FULL_MASK = 0xffffffffu;

/* One step's uniforms, passed by value as a kernel argument (512 bytes):
 * no upload, so nothing waits on the host before the call's end. */
struct kpp_uniforms {
    double u[KPP_MAX_TRIALS];
};

/* ---- device helpers ---------------------------------------------------------------- */

/* The one distance step of the op (see the top): s + (x - c)^2, rounded
 * as written. */
__device__ __forceinline__ double kpp_sq_add(double s, double x, double c)
{
    const double t = __dsub_rn(x, c);
    return __fma_rn(t, t, s);
}

/* w_i * v; 0 for a zero weight even when v is infinite (the CPU twin's
 * kpp_wd): such rows never turn a sum into NaN. */
__device__ __forceinline__ double kpp_wd(const double *__restrict__ w, int64_t i, double v)
{
    if (!w)
        return v;
    double wi = w[i];
    return wi == 0.0 ? 0.0 : __dmul_rn(wi, v);
}

/* The sum of v over the warp by an xor butterfly: commutative steps, so
 * every lane gets the same bits. */
__device__ __forceinline__ double kpp_warp_sum(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = __dadd_rn(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
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

/* out[0 .. d) = row r of X as double (the first centre: the scan kernel's
 * candidate). */
template <typename T>
__global__ void kpp_row_kernel(const T *__restrict__ X, int64_t d, int64_t r,
                               double *__restrict__ out)
{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < d;
         j += (int64_t)gridDim.x * blockDim.x)
        out[j] = (double)X[r * d + j];
}

/* What one scan pass reads and writes (see kpp_scan_kernel). */
struct kpp_scan_args {
    const void *X;          /* n x d, T */
    int64_t n, d;
    const double *w;        /* n or NULL */
    const double *closest;  /* n, or NULL: +inf (the first centre) */
    const double *cands;    /* trials x d, double */
    int trials;
    double *store;          /* trials x n (column t at t * n), or NULL; may be closest */
    double *partials;       /* P x trials, or NULL */
    unsigned char *mask;    /* n, or NULL (kpp_scan_async_kernel only, with store) */
};

/* Blocks of the scan kernel per SM that its registers must allow: 4 (64
 * registers a thread) for up to 8 trials, the common case (a step's pass
 * is memory-bound and needs the warps to keep enough loads in flight). */
constexpr int kpp_scan_min_blocks(int tmax) { return tmax <= 8 ? 4 : tmax <= 16 ? 2 : 1; }

/*
 * One pass over X for `trials` candidate rows.  Block p of the fixed grid
 * (P = gridDim.x, from the shapes only) owns rows [n p / P, n (p + 1) / P),
 * as the CPU twin's blocks; warp q takes its tiles of 32 rows q, q + 8, ...
 * in order, a lane per row.  For row i and trial t: D_it (the distance, see
 * the top) and v_it = min(closest_i, D_it) (closest_i replaced when
 * D_it < closest_i, as the CPU twin); store[t n + i] = v_it; and, for
 * partials, each tile's w_i v_it summed over the warp by the butterfly is
 * added (tiles in order) into lane t % 32's register for t < 32 (a0) or
 * t >= 32 (a1); the warps' sums are added in warp order into
 * partials[p * trials + t].  A thread reads closest_i before it writes
 * store[i], so store may be closest itself (the fold: one candidate).
 * STAGE: the candidates are in shared memory as d x TMAX (column j's
 * trials side by side), else read from cands.  TMAX >= trials.
 */
template <typename T, int TMAX, bool STAGE>
__global__ void __launch_bounds__(KPP_THREADS, kpp_scan_min_blocks(TMAX))
    kpp_scan_kernel(const kpp_scan_args a)
{
    __shared__ double slab[KPP_WARPS][KPP_SLAB];
    extern __shared__ double cand_smem[]; /* d x TMAX when STAGE */
    const T *__restrict__ X = (const T *)a.X;
    const int64_t n = a.n, d = a.d;
    const int trials = a.trials;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (STAGE) {
        for (int64_t e = tid; e < d * TMAX; e += KPP_THREADS) {
            const int64_t j = e / TMAX, t = e - j * TMAX;
            cand_smem[e] = t < trials ? a.cands[t * d + j] : 0.0;
        }
        __syncthreads();
    }
    const int64_t P = gridDim.x, p = blockIdx.x;
    const int64_t i0 = n * p / P, i1 = n * (p + 1) / P;
    double *xs = slab[warp];
    double a0 = 0.0, a1 = 0.0;
    for (int64_t r0 = i0 + (int64_t)warp * 32; r0 < i1; r0 += KPP_WARPS * 32) {
        const int rows = i1 - r0 < 32 ? (int)(i1 - r0) : 32;
        double acc[TMAX];
#pragma unroll
        for (int t = 0; t < TMAX; t++)
            acc[t] = 0.0;
        for (int64_t j0 = 0; j0 < d; j0 += KPP_COLS) {
            const int cols = d - j0 < KPP_COLS ? (int)(d - j0) : KPP_COLS;
            const T *src = X + r0 * d + j0;
            __syncwarp(); /* the lanes are done with the previous slab */
            if (cols == KPP_COLS) {
                /* a half-warp per row segment, in rounds of KPP_LOADS loads
                 * issued before their stores (in flight together) */
#pragma unroll
                for (int q0 = 0; q0 < KPP_COLS; q0 += KPP_LOADS) {
                    double v[KPP_LOADS];
#pragma unroll
                    for (int q = 0; q < KPP_LOADS; q++) {
                        const int e = lane + 32 * (q0 + q), r = e / KPP_COLS, c = e % KPP_COLS;
                        v[q] = r < rows ? (double)src[r * d + c] : 0.0;
                    }
#pragma unroll
                    for (int q = 0; q < KPP_LOADS; q++) {
                        const int e = lane + 32 * (q0 + q), r = e / KPP_COLS, c = e % KPP_COLS;
                        xs[r * (KPP_COLS + 1) + c] = v[q];
                    }
                }
            } else {
                for (int e = lane; e < 32 * cols; e += 32) {
                    const int r = e / cols, c = e - r * cols;
                    xs[r * (KPP_COLS + 1) + c] = r < rows ? (double)src[r * d + c] : 0.0;
                }
            }
            __syncwarp();
            const double *xr = xs + lane * (KPP_COLS + 1);
            /* column j's candidates: TMAX side by side in shared memory, or
             * a stride of d in global memory */
            const double *cj = STAGE ? cand_smem + j0 * TMAX : a.cands + j0;
            const int64_t cstride = STAGE ? 1 : d;
#pragma unroll 1
            for (int c = 0; c < cols; c++) {
                const double x = xr[c];
#pragma unroll
                for (int t = 0; t < TMAX; t++)
                    if (t < trials)
                        acc[t] = kpp_sq_add(acc[t], x, cj[t * cstride]);
                cj += STAGE ? TMAX : 1;
            }
        }
        const int64_t i = r0 + lane;
        const bool valid = lane < rows;
        const double ci = !valid ? 0.0 : a.closest ? a.closest[i] : (double)INFINITY;
#pragma unroll
        for (int t = 0; t < TMAX; t++) {
            if (t < trials) {
                const double v = acc[t] < ci ? acc[t] : ci;
                if (a.store && valid)
                    a.store[t * n + i] = v;
                if (a.partials) {
                    const double s = kpp_warp_sum(valid ? kpp_wd(a.w, i, v) : 0.0);
                    if (lane == (t & 31)) {
                        if (t < 32)
                            a0 = __dadd_rn(a0, s);
                        else
                            a1 = __dadd_rn(a1, s);
                    }
                }
            }
        }
    }
    if (!a.partials)
        return;
    /* the warp's sums into its own slab (done with it), then in warp order */
    __syncwarp();
    xs[lane] = a0;
    xs[32 + lane] = a1;
    __syncthreads();
    if (tid < trials) {
        double s = 0.0;
        for (int q = 0; q < KPP_WARPS; q++)
            s = __dadd_rn(s, slab[q][tid]);
        a.partials[p * trials + tid] = s;
    }
}

/* ---- the pipelined scan (X rows of whole 16-byte chunks) ------------------------- */

/* Warps of the pipelined scan's block: each runs two of kpp_scan_kernel's
 * eight warps' tile sequences, one after the other. */
constexpr int KPP_AWARPS = 4;
constexpr int KPP_ATHREADS = 32 * KPP_AWARPS;
constexpr int KPP_ALOGICAL = KPP_WARPS / KPP_AWARPS;
static_assert(KPP_ALOGICAL * KPP_AWARPS == KPP_WARPS, "whole sequences a warp");
/* Stages of a warp's copy ring: the next slab loads while one is computed
 * (2 measured a little faster than 3 on an H200: the blocks are few, ~3.7
 * an SM, and their warps keep enough in flight). */
constexpr int KPP_ASTAGES = 2;
/* A slab: 32 rows x 8 chunks of 16 bytes (16 doubles or 32 floats a row):
 * each row's piece is a whole 128-byte line. */
constexpr int KPP_ACHUNKS = 8;
constexpr int KPP_ASLAB = 32 * KPP_ACHUNKS * 16;
constexpr int KPP_AWARP = KPP_ASTAGES * KPP_ASLAB;
/* the rings, red and up to KPP_CAND_SMEM of candidates: 4 blocks an SM
 * (of its 228 KiB, 1 KiB a block the driver's) */
static_assert(KPP_AWARPS * KPP_AWARP + KPP_CAND_SMEM + (3 << 10) <= 57 << 10, "4 blocks an SM");

/* Chunk m of row r sits at 16-byte slot r * 8 + (m ^ (r & 7)): the 8 lanes
 * of a quarter-warp reading chunk m of their rows hit the 8 distinct
 * 16-byte bank groups. */
__device__ __forceinline__ int kpp_aslot(int r, int m)
{
    return r * KPP_ACHUNKS + (m ^ (r & 7));
}

__device__ __forceinline__ void kpp_cp16(void *dst, const void *src)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void kpp_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void kpp_cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/*
 * kpp_scan_kernel's pass, bitwise (the same blocks, the same eight tile
 * sequences a block and their sums in the same order, the same per-row
 * distance order), for X whose rows are whole 16-byte chunks at a 16-byte
 * aligned address and exactly NT <= 32 trials.  Why: that kernel waits on
 * its loads before each slab's arithmetic, so a warp has little in flight
 * (the pass ran at about half the device's copy rate, float32 no faster
 * than float64).  Here each warp keeps a ring of KPP_ASTAGES slabs filled
 * by cp.async (X's own bytes: float32 is converted where it is used, which
 * is exact), so the next slabs load while one is computed; closest_i and
 * w_i are loaded at a tile's start.  A warp runs sequences h and h + 4 of
 * kpp_scan_kernel's eight (4 warps a block: the rings of 4 blocks fit an SM,
 * so the whole grid is resident, and with 128 threads the registers allow
 * 128 a thread).  Dynamic shared memory: the rings, then the candidates
 * (STAGE: d x NT, column j's trials side by side).
 */
template <typename T, int NT, bool STAGE>
__global__ void __launch_bounds__(KPP_ATHREADS, 4) kpp_scan_async_kernel(const kpp_scan_args a)
{
    constexpr int VEC = 16 / (int)sizeof(T); /* elements per chunk */
    constexpr int SC = KPP_ACHUNKS * VEC;    /* columns per slab */
    constexpr int STRIDE = KPP_WARPS * 32;   /* rows between a sequence's tiles */
    static_assert(NT >= 1 && NT <= 32, "one partial register a lane");
    extern __shared__ __align__(16) unsigned char kpp_asmem[];
    __shared__ double red[KPP_WARPS][32];
    const T *__restrict__ X = (const T *)a.X;
    const int64_t n = a.n, d = a.d;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    unsigned char *ring = kpp_asmem + warp * KPP_AWARP;
    const double *cs = (const double *)(kpp_asmem + KPP_AWARPS * KPP_AWARP);
    if (STAGE) {
        double *cw = (double *)(kpp_asmem + KPP_AWARPS * KPP_AWARP);
        for (int64_t e = tid; e < d * NT; e += KPP_ATHREADS) {
            const int64_t j = e / NT, t = e - j * NT;
            cw[e] = a.cands[t * d + j];
        }
        __syncthreads();
    }
    const int64_t P = gridDim.x, p = blockIdx.x;
    const int64_t i0 = n * p / P, i1 = n * (p + 1) / P;
    const int nslab = (int)((d + SC - 1) / SC);
    /* sequence q (of kpp_scan_kernel's warps): tiles from i0 + 32 q, STRIDE apart */
    auto tiles = [&](int q) {
        const int64_t f = i0 + (int64_t)q * 32;
        return f < i1 ? (int)((i1 - f + STRIDE - 1) / STRIDE) : 0;
    };

    /* the copies of the units (sequence, tile, slab) in order, one group
     * a unit, into stage (unit % KPP_ASTAGES) */
    int ih = 0, it = 0, is = 0, iu = 0, intile = tiles(warp);
    auto issue = [&]() {
        while (ih < KPP_ALOGICAL && it == intile) { /* next sequence */
            if (++ih < KPP_ALOGICAL) {
                it = 0;
                intile = tiles(warp + ih * KPP_AWARPS);
            }
        }
        if (ih < KPP_ALOGICAL) {
            const int64_t r0 = i0 + (int64_t)(warp + ih * KPP_AWARPS) * 32 + (int64_t)it * STRIDE;
            const int rows = i1 - r0 < 32 ? (int)(i1 - r0) : 32;
            const int64_t j0 = (int64_t)is * SC;
            const int chunks = (int)((d - j0 < SC ? d - j0 : SC) / VEC);
            unsigned char *dst = ring + (iu % KPP_ASTAGES) * KPP_ASLAB;
            const T *src = X + r0 * d + j0;
#pragma unroll
            for (int q = 0; q < 32 * KPP_ACHUNKS / 32; q++) {
                const int e = lane + 32 * q, r = e / KPP_ACHUNKS, m = e % KPP_ACHUNKS;
                if (r < rows && m < chunks)
                    kpp_cp16(dst + kpp_aslot(r, m) * 16, src + r * d + m * VEC);
            }
            if (++is == nslab) {
                is = 0;
                it++;
            }
            iu++;
        }
        kpp_cp_commit(); /* empty past the end: the waits count uniformly */
    };
#pragma unroll
    for (int k = 0; k < KPP_ASTAGES - 1; k++)
        issue();

    int u = 0;
#pragma unroll 1
    for (int h = 0; h < KPP_ALOGICAL; h++) {
        const int q = warp + h * KPP_AWARPS, ntile = tiles(q);
        double a0 = 0.0;
        for (int tk = 0; tk < ntile; tk++) {
            const int64_t r0 = i0 + (int64_t)q * 32 + (int64_t)tk * STRIDE;
            const int rows = i1 - r0 < 32 ? (int)(i1 - r0) : 32;
            const int64_t i = r0 + lane;
            const bool valid = lane < rows;
            /* in flight while the slabs are computed */
            const double ci = !valid ? 0.0 : a.closest ? a.closest[i] : (double)INFINITY;
            const double wi = valid && a.w ? a.w[i] : 1.0;
            double acc[NT];
#pragma unroll
            for (int t = 0; t < NT; t++)
                acc[t] = 0.0;
            for (int s = 0; s < nslab; s++, u++) {
                issue(); /* into the stage computed last (the warp synced after it) */
                kpp_cp_wait<KPP_ASTAGES - 1>(); /* this lane's copies of unit u landed */
                __syncwarp();                   /* and every lane's */
                const int64_t j0 = (int64_t)s * SC;
                const int chunks = (int)((d - j0 < SC ? d - j0 : SC) / VEC);
                const uint4 *xs = (const uint4 *)(ring + (u % KPP_ASTAGES) * KPP_ASLAB);
#pragma unroll
                for (int m = 0; m < KPP_ACHUNKS; m++) {
                    if (m < chunks) {
                        const uint4 raw = xs[kpp_aslot(lane, m)];
                        T xv[VEC];
                        memcpy(xv, &raw, 16);
#pragma unroll
                        for (int c = 0; c < VEC; c++) {
                            const double x = (double)xv[c];
                            const int64_t j = j0 + m * VEC + c;
                            if (STAGE) {
                                const double *cj = cs + j * NT;
#pragma unroll
                                for (int t = 0; t < NT; t++)
                                    acc[t] = kpp_sq_add(acc[t], x, cj[t]);
                            } else {
#pragma unroll
                                for (int t = 0; t < NT; t++)
                                    acc[t] = kpp_sq_add(acc[t], x, a.cands[t * d + j]);
                            }
                        }
                    }
                }
                __syncwarp(); /* the lanes are done with this stage */
            }
            /* as kpp_scan_kernel's tile end; with mask, column t is written
             * only where trial t lowers closest (bit t of the row's byte) */
            unsigned bits = 0;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const bool low = acc[t] < ci;
                const double v = low ? acc[t] : ci;
                bits |= low ? 1u << t : 0u;
                if (a.store && valid && (low || !a.mask))
                    a.store[t * n + i] = v;
                if (a.partials) {
                    const double pw = !a.w ? v : wi == 0.0 ? 0.0 : __dmul_rn(wi, v);
                    const double sum = kpp_warp_sum(valid ? pw : 0.0);
                    if (lane == t)
                        a0 = __dadd_rn(a0, sum);
                }
            }
            if (a.mask && valid)
                a.mask[i] = (unsigned char)bits;
        }
        red[q][lane] = a0;
    }
    kpp_cp_wait<0>(); /* nothing left in flight (the empty groups) */
    if (!a.partials)
        return;
    __syncthreads();
    if (tid < NT) {
        double s = 0.0;
        for (int q = 0; q < KPP_WARPS; q++)
            s = __dadd_rn(s, red[q][tid]);
        a.partials[p * NT + tid] = s;
    }
}

/*
 * The trials' pots (the P partials of trial t in block order, read in
 * tiles of KPP_TILE doubles; pots[t]) and the winner, returned to every
 * thread of the block: the first of the lowest, by the CPU twin's scan
 * (best = 0, replaced by a strictly lower pot).  tile: KPP_TILE doubles.
 */
__device__ int kpp_winner(const double *__restrict__ partials, int64_t P, int trials,
                          double *tile, double *pots)
{
    const int tid = threadIdx.x;
    const int64_t per = KPP_TILE / trials; /* rows of partials per tile, >= 32 */
    double s = 0.0;
    for (int64_t p0 = 0; p0 < P; p0 += per) {
        const int64_t rows = P - p0 < per ? P - p0 : per;
        {
            /* every load of the tile in flight at once, then the stores */
            const int64_t m = rows * trials;
            double v[KPP_TILE / KPP_THREADS];
#pragma unroll
            for (int k = 0; k < KPP_TILE / KPP_THREADS; k++) {
                const int64_t e = tid + (int64_t)k * KPP_THREADS;
                v[k] = e < m ? partials[p0 * trials + e] : 0.0;
            }
#pragma unroll
            for (int k = 0; k < KPP_TILE / KPP_THREADS; k++)
                tile[tid + k * KPP_THREADS] = v[k];
        }
        __syncthreads();
        if (tid < trials) {
            /* loads ahead of the dependent additions (the order is unchanged) */
            int64_t q = 0;
            for (; q + 8 <= rows; q += 8) {
                double v[8];
#pragma unroll
                for (int k = 0; k < 8; k++)
                    v[k] = tile[(q + k) * trials + tid];
#pragma unroll
                for (int k = 0; k < 8; k++)
                    s = __dadd_rn(s, v[k]);
            }
            for (; q < rows; q++)
                s = __dadd_rn(s, tile[q * trials + tid]);
        }
        __syncthreads();
    }
    if (tid < trials)
        pots[tid] = s;
    __syncthreads();
    int b = 0;
    for (int k = 1; k < trials; k++)
        if (pots[k] < pots[b])
            b = k;
    return b;
}

/* pick's inputs and outputs, for sums to pick the winner itself (partials
 * not NULL; kpp_pick_kernel writes the same) */
struct kpp_pick_args {
    const double *partials;
    int64_t P;
    int trials;
    const int64_t *cand;
    double *pot;
    int64_t *chosen, *best;
};

/*
 * Per chunk (one block at a time, grid-stride over chunks): with pk's
 * partials, first pick's winner (each block computes it: one launch less a
 * step); with store,
 * closest_i = store[*best * n + i] (the winner's column: take; with mask,
 * only where the winner's bit is set: elsewhere it did not lower closest),
 * else closest as it is; then chunk_sums[b] = the chunk scan's sum of
 * w_i * closest_i.  The rows are read coalesced into shared memory, padded
 * (row r at r + r / 8) so that thread t reading its 8 rows 8t .. 8t + 7
 * hits distinct banks.
 */
__global__ void __launch_bounds__(KPP_THREADS)
    kpp_sums_kernel(int64_t n, const double *__restrict__ w, double *closest,
                    const double *store, const unsigned char *__restrict__ mask,
                    const int64_t *__restrict__ best, int64_t nb, double *__restrict__ chunk_sums,
                    const kpp_pick_args pk)
{
    __shared__ double prod[KPP_CHUNK + KPP_CHUNK / KPP_PER_THREAD];
    __shared__ double buf[KPP_THREADS];
    __shared__ double pots[KPP_MAX_TRIALS];
    static_assert(KPP_CHUNK + KPP_CHUNK / KPP_PER_THREAD >= KPP_TILE, "prod holds pick's tile");
    const int tid = threadIdx.x;
    int64_t bw = 0;
    if (pk.partials) { /* pick's work, the same in every block (prod is free until the chunks) */
        const int b = kpp_winner(pk.partials, pk.P, pk.trials, prod, pots);
        if (blockIdx.x == 0 && tid == 0) {
            *pk.pot = pots[b];
            *pk.chosen = pk.cand[b];
            *pk.best = b;
        }
        bw = b;
    } else if (store) {
        bw = *best;
    }
    const double *src = store ? store + bw * n : closest;
    for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {
        const int64_t i0 = b * KPP_CHUNK;
#pragma unroll
        for (int q = 0; q < KPP_PER_THREAD; q++) {
            const int r = q * KPP_THREADS + tid;
            const int64_t i = i0 + r;
            double p = 0.0;
            if (i < n) {
                double ci;
                if (mask) {
                    ci = closest[i];
                    if ((mask[i] >> bw) & 1) {
                        ci = src[i];
                        closest[i] = ci;
                    }
                } else {
                    ci = src[i];
                    if (store)
                        closest[i] = ci;
                }
                p = kpp_wd(w, i, ci);
            }
            prod[r + r / KPP_PER_THREAD] = p;
        }
        __syncthreads();
        double pv[KPP_PER_THREAD], run[KPP_PER_THREAD];
#pragma unroll
        for (int j = 0; j < KPP_PER_THREAD; j++)
            pv[j] = prod[tid * (KPP_PER_THREAD + 1) + j];
        /* ends with a barrier: prod may be rewritten by the next chunk */
        double e = kpp_chunk_scan(pv, run, buf);
        if (tid == KPP_THREADS - 1)
            chunk_sums[b] = __dadd_rn(e, run[KPP_PER_THREAD - 1]);
    }
}

/* *pot = the chunk sums added in index order (the CPU twin's order), by
 * one block. */
__global__ void __launch_bounds__(KPP_THREADS)
    kpp_total_kernel(const double *__restrict__ chunk_sums, int64_t nb, double *__restrict__ pot)
{
    __shared__ double tile[KPP_TILE];
    const int tid = threadIdx.x;
    double s = 0.0;
    for (int64_t b0 = 0; b0 < nb; b0 += KPP_TILE) {
        const int m = nb - b0 < KPP_TILE ? (int)(nb - b0) : KPP_TILE;
        for (int e = tid; e < m; e += KPP_THREADS)
            tile[e] = chunk_sums[b0 + e];
        __syncthreads();
        if (tid == 0)
            for (int e = 0; e < m; e++)
                s = __dadd_rn(s, tile[e]);
        __syncthreads();
    }
    if (tid == 0)
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
 * clamped to n - 1.  cand[t] = the row, cands[t d ..] = the row as double.
 */
template <typename T>
__global__ void __launch_bounds__(KPP_THREADS)
    kpp_sample_kernel(const T *__restrict__ X, int64_t d, const double *__restrict__ closest,
                      const double *__restrict__ w, int64_t n, int64_t nb,
                      const double *__restrict__ chunk_sums, const kpp_uniforms uni,
                      const double *__restrict__ pot, int64_t *__restrict__ cand,
                      double *__restrict__ cands)
{
    __shared__ double buf[KPP_THREADS];
    __shared__ unsigned long long found;
    __shared__ double found_excl;
    __shared__ int64_t row_s;
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
            row_s = n - 1;
    } else {
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
            row_s = i < n ? i : n - 1;
        }
    }
    __syncthreads(); /* row_s is set */
    const int64_t r = row_s;
    if (tid == 0)
        cand[t] = r;
    for (int64_t j = tid; j < d; j += KPP_THREADS)
        cands[t * d + j] = (double)X[r * d + j];
}

/*
 * pots[t] = the P partials of trial t in block order (read in tiles of
 * KPP_TILE doubles); the winner is the first of the lowest, by the CPU
 * twin's scan (best = 0, replaced by a strictly lower pot); *pot = its pot,
 * *chosen = its row, *best = its index, and win (when not NULL) = its row
 * as double (the candidate of the fold pass).  One block.
 */
__global__ void __launch_bounds__(KPP_THREADS)
    kpp_pick_kernel(const double *__restrict__ partials, int64_t P, int trials,
                    const int64_t *__restrict__ cand, const double *__restrict__ cands, int64_t d,
                    double *__restrict__ pot, int64_t *__restrict__ chosen,
                    int64_t *__restrict__ best, double *__restrict__ win)
{
    __shared__ double tile[KPP_TILE];
    __shared__ double pots[KPP_MAX_TRIALS];
    const int tid = threadIdx.x;
    const int b = kpp_winner(partials, P, trials, tile, pots);
    if (tid == 0) {
        *pot = pots[b];
        *chosen = cand[b];
        *best = b;
    }
    if (win)
        for (int64_t j = tid; j < d; j += KPP_THREADS)
            win[j] = cands[b * d + j];
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

/*
 * Keep the trials' columns (store, trials x n doubles) when writing them and
 * reading the winner's back (8 (trials + 1) bytes a row) costs less than
 * reading X again (d x the element size a row): 1M x 64 float64 with 6
 * trials keeps 56 bytes a row instead of reading 512.  Either way gives
 * the same bits (see the top).
 */
bool kpp_keeps_trials(int64_t d, size_t esize, int64_t trials)
{
    return 8 * (trials + 1) < d * (int64_t)esize;
}

/* One scan pass (kpp_scan_kernel) on P blocks; the candidates are staged
 * in shared memory when d x TMAX doubles fit in KPP_CAND_SMEM. */
template <typename T, int TMAX>
void kpp_scan_tmax(const kpp_scan_args &a, unsigned P, cudaStream_t stream)
{
    const int64_t smem = a.d * TMAX * (int64_t)sizeof(double);
    if (smem <= KPP_CAND_SMEM)
        kpp_scan_kernel<T, TMAX, true><<<P, KPP_THREADS, (size_t)smem, stream>>>(a);
    else
        kpp_scan_kernel<T, TMAX, false><<<P, KPP_THREADS, 0, stream>>>(a);
}

/* The pipelined pass (kpp_scan_async_kernel) for exactly NT trials. */
template <typename T, int NT>
cudaError_t kpp_scan_async(const kpp_scan_args &a, unsigned P, cudaStream_t stream)
{
    const int64_t cand = a.d * NT * (int64_t)sizeof(double);
    const bool stage = cand <= KPP_CAND_SMEM;
    const size_t smem = (size_t)(KPP_AWARPS * KPP_AWARP + (stage ? cand : 0));
    auto kern = stage ? kpp_scan_async_kernel<T, NT, true> : kpp_scan_async_kernel<T, NT, false>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem);
    if (e != cudaSuccess)
        return e;
    kern<<<P, KPP_ATHREADS, smem, stream>>>(a);
    return cudaGetLastError();
}

/* Rows of X are whole 16-byte chunks at a 16-byte aligned address: the
 * pipelined pass may copy them as they are. */
bool kpp_chunked(const void *X, int64_t d, size_t esize)
{
    return (uintptr_t)X % 16 == 0 && (d * (int64_t)esize) % 16 == 0;
}

/* The pipelined pass runs (and may write a mask): rows of whole chunks, up
 * to 8 trials. */
bool kpp_async(const void *X, int64_t d, size_t esize, int64_t trials)
{
    return kpp_chunked(X, d, esize) && trials >= 1 && trials <= 8;
}

/* The pipelined pass for up to 8 trials over chunked rows (an instance per
 * count: no lane computes a trial that is not there); else the instance
 * whose TMAX is the smallest of 1, 8, 16, 64 that holds the trials (the
 * accumulators are registers).  Both give the same bits. */
template <typename T>
cudaError_t kpp_scan(const kpp_scan_args &a, unsigned P, cudaStream_t stream)
{
    if (kpp_async(a.X, a.d, sizeof(T), a.trials)) {
        switch (a.trials) {
        case 1: return kpp_scan_async<T, 1>(a, P, stream);
        case 2: return kpp_scan_async<T, 2>(a, P, stream);
        case 3: return kpp_scan_async<T, 3>(a, P, stream);
        case 4: return kpp_scan_async<T, 4>(a, P, stream);
        case 5: return kpp_scan_async<T, 5>(a, P, stream);
        case 6: return kpp_scan_async<T, 6>(a, P, stream);
        case 7: return kpp_scan_async<T, 7>(a, P, stream);
        case 8: return kpp_scan_async<T, 8>(a, P, stream);
        default: break;
        }
    }
    if (a.mask) /* only the pipelined pass writes one */
        return cudaErrorInvalidValue;
    if (a.trials == 1)
        kpp_scan_tmax<T, 1>(a, P, stream);
    else if (a.trials <= 8)
        kpp_scan_tmax<T, 8>(a, P, stream);
    else if (a.trials <= 16)
        kpp_scan_tmax<T, 16>(a, P, stream);
    else
        kpp_scan_tmax<T, KPP_MAX_TRIALS>(a, P, stream);
    return cudaGetLastError();
}

/* 8-byte words of a call's scratch (see kpp_run), or -1 when they overflow. */
int64_t kpp_scratch_words(int64_t n, int64_t d, int64_t nb, int64_t P, int64_t trials,
                          int64_t steps, bool keep, bool masked)
{
    const int64_t lim = INT64_MAX / 16;
    if (n > lim / KPP_MAX_TRIALS || d > lim / KPP_MAX_TRIALS || steps > lim)
        return -1;
    return steps + 2 + trials + nb + P * trials + trials * d + d + (keep ? trials * n : 0) +
           (masked ? (n + 7) / 8 : 0);
}

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
    /* the sums' grid only spreads chunks over blocks: results do not depend on it */
    const int64_t sums_cap = (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 16) * 8;
    const unsigned sums_grid = (unsigned)(nb < sums_cap ? nb : sums_cap);
    const bool keep = kpp_keeps_trials(d, sizeof(T), trials64);
    /* kept columns written only where they lower closest, with a mask byte a
     * row (the pipelined pass): 1 MB a step for 1M rows, and the lowered
     * rows, instead of trials x 8 MB; fewer as the centres fill in */
    const bool masked = keep && kpp_async(X, d, sizeof(T), trials64);
    /* one scratch allocation of 8-byte words: chosen (steps) and pot first,
     * for one copy back; then the winner's index, the candidates' rows, the
     * chunk sums, the partials, the candidates as double, the winner as
     * double (the fold's candidate), the trials' columns (keep), the mask
     * (masked) */
    const int64_t words = kpp_scratch_words(n, d, nb, P, trials64, steps, keep, masked);
    int rc = GSB_OK;
    void *scratch = NULL;
    int64_t *chosen_dev, *best_dev, *cand, *back = NULL;
    double *pot_dev, *chunk_sums, *partials, *cands, *win, *store;
    unsigned char *mask;
    kpp_uniforms uni;
    kpp_scan_args trial_args, fold_args;
    const kpp_pick_args no_pick = {NULL, 0, 0, NULL, NULL, NULL, NULL};
    if (words < 0)
        return GSB_CUDA_ERR(GSB_ENOMEM, "kmeanspp: %lld rows x %lld columns, %lld steps do not "
                            "fit in memory", (long long)n, (long long)d, (long long)steps);
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)words * 8, &scratch));
    chosen_dev = (int64_t *)scratch;
    pot_dev = (double *)(chosen_dev + steps);
    best_dev = (int64_t *)(pot_dev + 1);
    cand = best_dev + 1;
    chunk_sums = (double *)(cand + trials);
    partials = chunk_sums + nb;
    cands = partials + P * trials;
    win = cands + (int64_t)trials * d;
    store = keep ? win + d : NULL;
    mask = masked ? (unsigned char *)(store + (int64_t)trials * n) : NULL;
    memset(&uni, 0, sizeof uni);
    /* a step's pass over X for the trials, and (not keep) the winner's fold */
    trial_args = {X, n, d, w, closest, cands, trials, store, partials, mask};
    fold_args = {X, n, d, w, closest, win, 1, closest, NULL, NULL};

    if (first >= 0) {
        kpp_row_kernel<T><<<1, KPP_THREADS, 0, stream>>>(X, d, first, win);
        CUDA_CHECK(cudaGetLastError());
        kpp_scan_args init_args = fold_args;
        init_args.closest = NULL; /* closest = D */
        CUDA_CHECK(kpp_scan<T>(init_args, (unsigned)P, stream));
        kpp_sums_kernel<<<sums_grid, KPP_THREADS, 0, stream>>>(n, w, closest, NULL, NULL, NULL, nb,
                                                              chunk_sums, no_pick);
        CUDA_CHECK(cudaGetLastError());
        kpp_total_kernel<<<1, KPP_THREADS, 0, stream>>>(chunk_sums, nb, pot_dev);
        CUDA_CHECK(cudaGetLastError());
    } else {
        kpp_sums_kernel<<<sums_grid, KPP_THREADS, 0, stream>>>(n, w, closest, NULL, NULL, NULL, nb,
                                                              chunk_sums, no_pick);
        CUDA_CHECK(cudaGetLastError());
        kpp_set_kernel<<<1, 1, 0, stream>>>(pot_dev, *pot);
        CUDA_CHECK(cudaGetLastError());
    }
    for (int64_t s = 0; s < steps; s++) {
        for (int t = 0; t < trials; t++)
            uni.u[t] = u[s * trials + t];
        kpp_sample_kernel<T><<<(unsigned)trials, KPP_THREADS, 0, stream>>>(
            X, d, closest, w, n, nb, chunk_sums, uni, pot_dev, cand, cands);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(kpp_scan<T>(trial_args, (unsigned)P, stream));
        kpp_pick_args pick = no_pick;
        if (keep) { /* sums picks the winner itself */
            pick = {partials, P, trials, cand, pot_dev, chosen_dev + s, best_dev};
        } else {
            kpp_pick_kernel<<<1, KPP_THREADS, 0, stream>>>(partials, P, trials, cand, cands, d,
                                                          pot_dev, chosen_dev + s, best_dev,
                                                          win);
            CUDA_CHECK(cudaGetLastError());
            /* the winner folded into closest by a second pass over X */
            CUDA_CHECK(kpp_scan<T>(fold_args, (unsigned)P, stream));
        }
        kpp_sums_kernel<<<sums_grid, KPP_THREADS, 0, stream>>>(n, w, closest, store, mask, best_dev,
                                                              nb, chunk_sums, pick);
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
