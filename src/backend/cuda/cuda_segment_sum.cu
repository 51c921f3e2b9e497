/*
 * cuda_segment_sum.cu - the GPU's segment_sum (the KMeans centre update):
 * per-cluster weighted sums (k x d) and weight totals (k) of the rows of X,
 * in double.  Twin: cpu_family.c.
 *
 * Deterministic (KMeans' convergence test relies on it, see kmeans.c's
 * lloyd()): every sum is added in an order fixed by the inputs' shapes and
 * values alone, with no floating-point atomics, so it repeats bitwise on any
 * GPU.  Two paths, chosen from the shapes alone (so the order, too):
 *
 * The chunk path (where a block's k x tc accumulator fits CH_SMEM_BUDGET
 * of shared memory, a budget every GPU since sm_80 grants): no sort.
 *  1. the rows are cut into contiguous chunks (their number a function of
 *     n, d, k and X's dtype, never of the GPU: ch_plan_for); block
 *     (chunk, column tile) counts its chunk's rows per cluster (integer
 *     atomics), gives each of its 8 warps a run of clusters of about equal
 *     rows, then every warp reads the chunk's labels in order and adds the
 *     rows of its own clusters, lane l owning columns l + 32 q of the tile:
 *     each cluster's sum gets its chunk's rows in row order (one fma per
 *     row, x * w added to the running sum), whatever the warps' timing;
 *  2. with several chunks, the partials are added per element in a fixed
 *     tree: eight strided runs over the chunks, then those eight in order.
 *  Sums therefore associate differently from the sorted path's (and from
 *  the CPU twin's, which differs anyway): each order is fixed.
 *
 * The sorted path (larger k x d, or too many partials for the rows):
 *  1. keys: each row's label, or k (a sentinel sorting last) for a label
 *     outside [0, k), whose first row an atomic min records; and the row
 *     indices 0 .. n - 1;
 *  2. cub's radix sort of (key, row) over the bits that k needs: stable, so
 *     each cluster's rows become a contiguous range of the sorted order, in
 *     increasing row order;
 *  3. info (one block): each cluster's first sorted position (a binary
 *     search) and where its partial sums go;
 *  4. the sorted order is cut into segments of SEG_ROWS positions; a warp
 *     takes a segment and one tile of columns and adds its rows in order in
 *     registers (a lane owns SEG_LANE_COLS columns; a row's columns are one
 *     coalesced read), each cluster's run of rows in the segment giving one
 *     partial.  A cluster inside one segment has one run, written straight
 *     to sums and counts; a longer one's runs go to a partial buffer;
 *  5. reduce: each longer cluster's partials added in segment order, and
 *     zeros for clusters without rows.
 * X is read once, row by row in cluster order (rows of 4 d or 8 d bytes:
 * whole memory lines for the KMeans widths), so the op runs at close to
 * memory speed whatever k is, with no k x d accumulator per block.  The
 * rows are scattered, so each warp asks L2 for the rows a few batches
 * ahead of their adds (prefetches, which never block) to keep more bytes
 * in flight than its in-order adds would; the order of the adds is the
 * same with or without them.
 *
 * Both paths: a label outside [0, k) fails the call with GSB_EINVAL naming
 * the first such row (an integer atomic min), as the CPU twin does.
 * GSB_SEGMENT_SUM=sorted forces the sorted path (tests, measurements).
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_common.h"

namespace {

constexpr unsigned FULL_MASK = 0xffffffffu;
/* Sorted positions per segment: one warp's work (rows, for d = 64 float32,
 * of 32 KiB; ~8k warps for a million rows, a few waves of an H200). */
constexpr int64_t SEG_ROWS = 128;
/* Columns per lane: a column tile is 32 SEG_LANE_COLS wide; 2 where d <= 64
 * (one tile, no lane idle on the narrow KMeans widths, and twice the rows
 * a batch for the same registers). */
constexpr int SEG_LANE_COLS = 4;
constexpr int64_t SEG_TILE = 32 * SEG_LANE_COLS;
/* Warps per block of the segment kernel, threads of the info block. */
constexpr int SEG_WARPS = 8;
constexpr int SEG_INFO_THREADS = 256;
/* Rows whose loads a warp issues before their adds (32 values a lane of
 * float32, 16 of float64, whatever LC). */
template <typename T, int LC>
__host__ __device__ constexpr int seg_unroll() { return (sizeof(T) == 4 ? 32 : 16) / LC; }
/* Bytes of rows a warp has asked L2 for ahead of its adds: ~3k resident
 * warps of an H100 / H200 keep ~20 MB of the 50 MB L2 waiting for them. */
constexpr int64_t SEG_PREFETCH_BYTES = 6144;

/* Step 1: keys[i] = lab[i], or sentinel when outside [0, k); idx[i] = i. */
template <typename IdxT>
__global__ void seg_keys_kernel(const int32_t *__restrict__ lab, int64_t n, int64_t k,
                                uint32_t sentinel, uint32_t *__restrict__ keys,
                                IdxT *__restrict__ idx, unsigned long long *bad)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int32_t v = lab[i];
        const bool ok = v >= 0 && (int64_t)v < k;
        keys[i] = ok ? (uint32_t)v : sentinel;
        idx[i] = (IdxT)i;
        if (!ok)
            atomicMin(bad, (unsigned long long)i);
    }
}

/* First sorted position whose key is >= c or the sentinel (sentinels sort
 * last, after every valid key; so start[k] is the count of valid rows). */
__device__ int64_t seg_lower_bound(const uint32_t *keys, int64_t n, uint32_t sentinel, int64_t c)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        const uint32_t key = keys[mid];
        if (key != sentinel && (int64_t)key < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Runs of a cluster whose sorted positions are [a, b): one per segment it
 * touches, 0 when empty. */
__host__ __device__ inline int64_t seg_runs(int64_t a, int64_t b)
{
    return b > a ? (b - 1) / SEG_ROWS - a / SEG_ROWS + 1 : 0;
}

/*
 * Step 3, one block: info[0 .. k] = start (cluster c's sorted positions are
 * [start[c], start[c + 1]), start[k] the valid rows) and info[k + 1 ..
 * 2k + 1] = base: cluster c's partials are base[c] .. base[c] + runs - 1
 * when it has two runs or more (an exclusive scan of those counts).
 */
__global__ void __launch_bounds__(SEG_INFO_THREADS)
    seg_info_kernel(const uint32_t *__restrict__ keys, int64_t n, int64_t k, uint32_t sentinel,
                    int64_t *__restrict__ info)
{
    using Scan = cub::BlockScan<int64_t, SEG_INFO_THREADS>;
    __shared__ typename Scan::TempStorage scan_tmp;
    __shared__ int64_t carry;
    int64_t *start = info, *base = info + k + 1;
    for (int64_t c = threadIdx.x; c <= k; c += SEG_INFO_THREADS)
        start[c] = seg_lower_bound(keys, n, sentinel, c);
    if (threadIdx.x == 0)
        carry = 0;
    __syncthreads(); /* start[] (global, this block's writes) and carry visible */
    for (int64_t c0 = 0; c0 <= k; c0 += SEG_INFO_THREADS) { /* block-uniform bounds */
        const int64_t c = c0 + threadIdx.x;
        int64_t runs = c < k ? seg_runs(start[c], start[c + 1]) : 0;
        runs = runs >= 2 ? runs : 0;
        int64_t before, total;
        Scan(scan_tmp).ExclusiveSum(runs, before, total);
        if (c <= k)
            base[c] = carry + before;
        __syncthreads(); /* every thread has read carry and is done with scan_tmp */
        if (threadIdx.x == 0)
            carry += total;
        __syncthreads();
    }
}

/* A run's totals (this lane's columns of the tile, the weight total from
 * lane 0 of column tile 0): straight to sums / counts when it is its
 * cluster's only run, else to the cluster's partial for segment s. */
template <int LC>
__device__ __forceinline__ void seg_flush(uint32_t c, int64_t s, const double (&acc)[LC],
                                          double wsum, int64_t col0, int64_t d,
                                          const int64_t *start, const int64_t *base,
                                          double *part, double *sums, double *counts)
{
    const int lane = threadIdx.x % 32;
    const int64_t first = start[c] / SEG_ROWS, last = (start[c + 1] - 1) / SEG_ROWS;
    double *dst, *cnt;
    if (first == last) {
        dst = sums + (int64_t)c * d;
        cnt = counts + c;
    } else {
        dst = part + (base[c] + s - first) * (d + 1);
        cnt = dst + d;
    }
#pragma unroll
    for (int q = 0; q < LC; q++) {
        const int64_t col = col0 + lane + 32 * q;
        if (col < d)
            dst[col] = acc[q];
    }
    if (col0 == 0 && lane == 0)
        *cnt = wsum;
}

/* Asks L2 for a row's columns [col0, col1) (col1 > col0), a prefetch per
 * 128-byte line; nothing waits for them. */
template <typename T>
__device__ __forceinline__ void seg_prefetch(const T *X, int64_t row, int64_t d, int64_t col0,
                                             int64_t col1)
{
    const size_t a = __cvta_generic_to_global(X + row * d + col0);
    const size_t z = a + (size_t)(col1 - col0) * sizeof(T) - 1; /* the last byte */
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
    for (size_t l = (a | 127) + 1; l <= z; l += 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(l));
}

/*
 * Step 4: warp w of block b takes segment s = b SEG_WARPS + w (sorted
 * positions [s SEG_ROWS, (s + 1) SEG_ROWS) of the valid ones) and column
 * tile blockIdx.y (32 LC columns).  Lane l owns columns col0 + l + 32 q;
 * the rows are added in sorted order (each cluster's in increasing row
 * order), in double.  Per 32 positions (a chunk) the lanes hold the keys,
 * rows and weights, and the warp walks them U rows at a time: all U rows'
 * loads first, then their adds.  The row indices are loaded two chunks
 * ahead, the keys one, and the rows P positions ahead of each batch are
 * prefetched into L2 (P: about SEG_PREFETCH_BYTES of rows, U <= P <= 32;
 * so a prefetched position is in this chunk or the next).
 */
template <typename T, typename IdxT, int LC>
__global__ void __launch_bounds__(SEG_WARPS * 32, 3)
    seg_sum_kernel(const T *__restrict__ X, int64_t d, const uint32_t *__restrict__ keys,
                   const IdxT *__restrict__ idx, const void *w, int w_f64, int64_t k,
                   const int64_t *__restrict__ info, double *__restrict__ part,
                   double *__restrict__ sums, double *__restrict__ counts)
{
    constexpr int U = seg_unroll<T, LC>();
    const int lane = threadIdx.x % 32;
    const int64_t *start = info, *base = info + k + 1;
    const int64_t s = (int64_t)blockIdx.x * SEG_WARPS + threadIdx.x / 32;
    const int64_t p0 = s * SEG_ROWS, valid = start[k];
    if (p0 >= valid) /* warp-uniform */
        return;
    const int64_t p1 = p0 + SEG_ROWS < valid ? p0 + SEG_ROWS : valid;
    const int64_t col0 = (int64_t)blockIdx.y * 32 * LC;
    const int64_t col1 = col0 + 32 * LC < d ? col0 + 32 * LC : d;
    const bool pf = col1 > col0; /* a column to prefetch (d > 0) */
    int P = pf ? (int)(SEG_PREFETCH_BYTES / ((col1 - col0) * (int64_t)sizeof(T))) : U;
    P = P < U ? U : P > 32 ? 32 : P;
    double acc[LC], wsum = 0.0;
#pragma unroll
    for (int q = 0; q < LC; q++)
        acc[q] = 0.0;
    uint32_t cur = keys[p0];
    /* rows of this chunk and the next (loaded a chunk ahead of their
     * prefetches), keys of this chunk; the first P rows prefetched */
    IdxT row_a = p0 + lane < p1 ? idx[p0 + lane] : (IdxT)0;
    IdxT row_b = p0 + 32 + lane < p1 ? idx[p0 + 32 + lane] : (IdxT)0;
    uint32_t key_a = p0 + lane < p1 ? keys[p0 + lane] : 0u;
    if (pf && lane < P && p0 + lane < p1)
        seg_prefetch(X, (int64_t)row_a, d, col0, col1);
    for (int64_t wb = p0; wb < p1; wb += 32) {
        const int m = (int)(p1 - wb < 32 ? p1 - wb : 32); /* warp-uniform */
        const IdxT my_row = row_a, nxt_row = row_b;
        const uint32_t my_key = key_a;
        const bool nxt_ok = wb + 32 + lane < p1; /* this lane's position of the next chunk */
        row_a = row_b;
        row_b = wb + 64 + lane < p1 ? idx[wb + 64 + lane] : (IdxT)0;
        key_a = nxt_ok ? keys[wb + 32 + lane] : 0u;
        double my_w = 1.0;
        if (w && lane < m)
            my_w = w_f64 ? ((const double *)w)[my_row] : (double)((const float *)w)[my_row];
        for (int q0 = 0; q0 < m; q0 += U) {
            T xv[U][LC];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int64_t row = (int64_t)__shfl_sync(FULL_MASK, my_row, q0 + u);
#pragma unroll
                for (int q = 0; q < LC; q++) {
                    const int64_t col = col0 + lane + 32 * q;
                    xv[u][q] = q0 + u < m && col < d ? X[row * d + col] : T(0);
                }
            }
            /* prefetch positions [q0 + P, q0 + P + U) of this chunk and the next */
            if (pf && lane < m && lane >= q0 + P && lane < q0 + P + U)
                seg_prefetch(X, (int64_t)my_row, d, col0, col1);
            if (pf && nxt_ok && lane + 32 >= q0 + P && lane + 32 < q0 + P + U)
                seg_prefetch(X, (int64_t)nxt_row, d, col0, col1);
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint32_t key = __shfl_sync(FULL_MASK, my_key, q0 + u);
                const double wu = __shfl_sync(FULL_MASK, my_w, q0 + u);
                if (q0 + u >= m) /* warp-uniform */
                    break;
                if (key != cur) { /* a run ends */
                    seg_flush<LC>(cur, s, acc, wsum, col0, d, start, base, part, sums, counts);
#pragma unroll
                    for (int q = 0; q < LC; q++)
                        acc[q] = 0.0;
                    wsum = 0.0;
                    cur = key;
                }
#pragma unroll
                for (int q = 0; q < LC; q++)
                    acc[q] += wu * (double)xv[u][q];
                wsum += wu;
            }
        }
    }
    seg_flush<LC>(cur, s, acc, wsum, col0, d, start, base, part, sums, counts);
}

/* Step 5: element e = c (d + 1) + j of [sums | counts]: cluster c's
 * partials added in segment order when it has two runs or more, 0 when it
 * has none (one run: the segment kernel wrote it). */
__global__ void seg_reduce_kernel(const double *__restrict__ part, const int64_t *__restrict__ info,
                                  int64_t k, int64_t d, double *__restrict__ sums,
                                  double *__restrict__ counts)
{
    const int64_t *start = info, *base = info + k + 1;
    const int64_t total = k * (d + 1);
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = e / (d + 1), j = e - c * (d + 1);
        const int64_t runs = seg_runs(start[c], start[c + 1]);
        if (runs == 1)
            continue;
        double s = 0.0;
        const double *p = part + base[c] * (d + 1) + j;
        for (int64_t r = 0; r < runs; r++)
            s += p[r * (d + 1)];
        if (j < d)
            sums[c * d + j] = s;
        else
            counts[c] = s;
    }
}

/* ---- the chunk path: no sort, a k x TC accumulator per block ----------- */

/* Warps of a chunk block; warp w owns the clusters c with c % CH_WARPS == w
 * (its rows' adds, in row order, with no other warp touching them). */
constexpr int CH_WARPS = 8;
/* Labels a warp stages per group (8 a lane, loaded a group ahead). */
constexpr int CH_GROUP = 256;
/* A warp's queue of its rows (offsets in the chunk) and their labels: a
 * ring of 64 (a batch is at most 32 rows, a window adds at most 32). */
constexpr int CH_QUEUE = 64;
/* Shared memory a chunk block may take: every GPU since sm_80 grants it,
 * so the path (and so the order of the sums) does not depend on the GPU. */
constexpr size_t CH_SMEM_BUDGET = 96 * 1024;
constexpr size_t CH_WARP_BYTES = (CH_GROUP + 2 * CH_QUEUE) * sizeof(int32_t);
/* Chunks: at least CH_MIN_ROWS rows each, enough for ~CH_WARPS_WANTED
 * warps, and partials (written and read once) of at most 1/4 of X's bytes;
 * where that bound leaves too few chunks above CH_FEW_ROWS rows, the sorted
 * path. */
constexpr int64_t CH_MIN_ROWS = 1024;
constexpr int64_t CH_WARPS_WANTED = 2048;
constexpr int64_t CH_FEW_ROWS = 65536;

/* The chunk path's plan, a function of the shapes and dtype alone. */
struct ch_plan {
    int lc;              /* columns a lane: 1, 2 or 4 (a tile of 32 lc) */
    int64_t tc, tiles;   /* tile width (<= d), tiles */
    int64_t chunks, rows; /* chunks of `rows` rows (the last shorter) */
    size_t smem;
};

/* Shared bytes of a block: the k x tc sums, k counts, the warps' buffers,
 * the clusters' owners. */
size_t ch_smem(int64_t k, int64_t tc)
{
    return (size_t)(k * (tc + 1)) * sizeof(double) + CH_WARPS * CH_WARP_BYTES +
           (size_t)k * sizeof(int32_t);
}

/* 1 and the plan when the chunk path applies. */
int ch_plan_for(int64_t n, int64_t d, int64_t k, size_t xsize, ch_plan *p)
{
    if (n < 1 || n > INT32_MAX || d < 1 || k < 1 || k > INT32_MAX)
        return 0;
    int lc = d <= 32 ? 1 : d <= 64 ? 2 : 4;
    while (lc > 1 && ch_smem(k, 32 * lc) > CH_SMEM_BUDGET)
        lc /= 2;
    const int64_t tc = d < 32 * lc ? d : 32 * lc;
    if (ch_smem(k, tc) > CH_SMEM_BUDGET)
        return 0;
    p->lc = lc;
    p->tc = tc;
    p->tiles = (d + tc - 1) / tc;
    if (p->tiles > 65535)
        return 0;
    const int64_t busy = k < CH_WARPS ? k : CH_WARPS; /* warps with clusters */
    int64_t want = (CH_WARPS_WANTED + p->tiles * busy - 1) / (p->tiles * busy);
    const int64_t by_rows = (n + CH_MIN_ROWS - 1) / CH_MIN_ROWS;
    const double xbytes = (double)n * (double)d * (double)xsize;
    const double by_traffic = xbytes / (8.0 * sizeof(double) * (double)k * (double)(d + 1));
    want = want < by_rows ? want : by_rows;
    if ((double)want > by_traffic) {
        /* too few chunks to keep the GPU busy without partials that cost
         * more than the sort (large k x d for the rows; e.g. d = 3, k = 1000
         * ran 2x slower than sorted): below 64k rows the partials stay in
         * L2 and the chunk path's fewer launches still win */
        if (n > CH_FEW_ROWS)
            return 0;
        want = by_traffic < 1.0 ? 1 : (int64_t)by_traffic;
    }
    p->rows = (n + want - 1) / want;
    p->rows = (p->rows + CH_GROUP - 1) / CH_GROUP * CH_GROUP;
    p->chunks = (n + p->rows - 1) / p->rows;
    p->smem = ch_smem(k, tc);
    return 1;
}

/*
 * Adds a warp's batch of m <= U queued rows (queue positions head ..
 * head + m - 1) to the block's sums, in queue (= row) order per cluster:
 * all U rows' loads first, then the adds, four rows at a time where their
 * four clusters differ (independent read-add-writes), else one by one.
 */
template <typename T, int LC, int U>
__device__ __forceinline__ void ch_batch(const T *__restrict__ X, int64_t d, int64_t r0,
                                         int64_t col0, int64_t tc, const void *w, int w_f64,
                                         const int32_t *qrow, const int32_t *qlab, unsigned head,
                                         int m, double *acc, double *cnt, bool counts)
{
    const int lane = threadIdx.x % 32;
    int my_r = 0, my_l = 0;
    double my_w = 1.0;
    if (lane < m) {
        my_r = qrow[(head + lane) % CH_QUEUE];
        my_l = qlab[(head + lane) % CH_QUEUE];
        if (w)
            my_w = w_f64 ? ((const double *)w)[r0 + my_r]
                         : (double)((const float *)w)[r0 + my_r];
    }
    T xv[U][LC];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int64_t row = r0 + __shfl_sync(FULL_MASK, my_r, u);
#pragma unroll
        for (int q = 0; q < LC; q++) {
            const int64_t col = lane + 32 * q;
            xv[u][q] = u < m && col < tc ? X[row * d + col0 + col] : T(0);
        }
    }
    const bool cnt_lane = counts && lane == 0;
    /* a run of rows of one cluster (cur >= 0) is added in registers and
     * stored when the next row's cluster differs: the same adds in the same
     * order as one read-add-write per row, without a shared-memory round
     * trip per row of a long run */
    int cur = -1;
    double v[LC], vc = 0.0;
#pragma unroll
    for (int q = 0; q < LC; q++)
        v[q] = 0.0;
    auto store_run = [&]() { /* the pending run's sums back to the accumulator */
#pragma unroll
        for (int q = 0; q < LC; q++)
            if (lane + 32 * q < tc)
                acc[cur * tc + lane + 32 * q] = v[q];
        if (cnt_lane)
            cnt[cur] = vc;
    };
#pragma unroll
    for (int u = 0; u < U; u += 4) {
        int l[4];
        double wu[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            l[i] = __shfl_sync(FULL_MASK, my_l, u + i);
            wu[i] = __shfl_sync(FULL_MASK, my_w, u + i);
        }
        if (u >= m) /* warp-uniform */
            break;
        const bool apart = u + 4 <= m && l[0] != l[1] && l[0] != l[2] && l[0] != l[3] &&
                           l[1] != l[2] && l[1] != l[3] && l[2] != l[3] && l[0] != cur &&
                           l[1] != cur && l[2] != cur && l[3] != cur;
        if (apart) { /* four clusters, none the pending run's: independent */
            double a[4][LC], c[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
#pragma unroll
                for (int q = 0; q < LC; q++)
                    a[i][q] = lane + 32 * q < tc ? acc[l[i] * tc + lane + 32 * q] : 0.0;
                c[i] = cnt_lane ? cnt[l[i]] : 0.0;
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
#pragma unroll
                for (int q = 0; q < LC; q++)
                    if (lane + 32 * q < tc)
                        acc[l[i] * tc + lane + 32 * q] = fma(wu[i], (double)xv[u + i][q], a[i][q]);
                if (cnt_lane)
                    cnt[l[i]] = c[i] + wu[i];
            }
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if (u + i >= m)
                    break;
                if (l[i] != cur) { /* warp-uniform: the run ends */
                    if (cur >= 0)
                        store_run();
                    cur = l[i];
#pragma unroll
                    for (int q = 0; q < LC; q++)
                        v[q] = lane + 32 * q < tc ? acc[cur * tc + lane + 32 * q] : 0.0;
                    vc = cnt_lane ? cnt[cur] : 0.0;
                }
#pragma unroll
                for (int q = 0; q < LC; q++)
                    v[q] = fma(wu[i], (double)xv[u + i][q], v[q]);
                vc += wu[i];
            }
        }
    }
    if (cur >= 0)
        store_run();
}

/*
 * Block (chunk blockIdx.x, column tile blockIdx.y): the chunk's rows
 * [r0, r0 + rows) summed into a k x tc accumulator in shared memory, then
 * written to the chunk's partial (or straight to sums / counts when there
 * is one chunk).  Every warp reads every label of the chunk (staged in
 * groups of CH_GROUP, a group ahead) and queues its own clusters' rows;
 * lane l of a warp owns columns col0 + l + 32 q of its clusters, so every
 * sum gets its rows in row order with no races.  Labels outside [0, k):
 * the first one's row goes to *bad (an integer atomic min), its row is
 * skipped.  The counts: lane 0 of the warps of column tile 0.
 */
template <typename T, int LC>
__global__ void __launch_bounds__(CH_WARPS * 32)
    ch_sum_kernel(const T *__restrict__ X, int64_t n, int64_t d, const int32_t *__restrict__ lab,
                  const void *w, int w_f64, int64_t k, int64_t tc, int64_t rows,
                  double *__restrict__ part, double *__restrict__ sums,
                  double *__restrict__ counts, unsigned long long *bad)
{
    constexpr int U = seg_unroll<T, LC>();
    extern __shared__ double ch_smem_d[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t r0 = (int64_t)blockIdx.x * rows;
    const int nr = (int)(n - r0 < rows ? n - r0 : rows);
    const int64_t col0 = (int64_t)blockIdx.y * tc;
    const int64_t tw = d - col0 < tc ? d - col0 : tc; /* this tile's columns, acc's stride */
    double *acc = ch_smem_d, *cnt = acc + k * tw;
    int32_t *lbuf = (int32_t *)(cnt + k) + warp * (CH_WARP_BYTES / sizeof(int32_t));
    int32_t *qrow = lbuf + CH_GROUP, *qlab = qrow + CH_QUEUE;
    int32_t *own = (int32_t *)(cnt + k) + CH_WARPS * (CH_WARP_BYTES / sizeof(int32_t));
    const bool counts_here = blockIdx.y == 0;
    using Scan = cub::BlockScan<int, CH_WARPS * 32>;
    __shared__ typename Scan::TempStorage scan_tmp;
    __shared__ int valid;
    for (int64_t e = threadIdx.x; e < k * (tw + 1); e += blockDim.x)
        acc[e] = 0.0; /* cnt follows acc */
    for (int64_t c = threadIdx.x; c < k; c += blockDim.x)
        own[c] = 0;
    if (threadIdx.x == 0)
        valid = 0;
    int32_t nxt[CH_GROUP / 32];
#pragma unroll
    for (int j = 0; j < CH_GROUP / 32; j++)
        nxt[j] = j * 32 + lane < nr ? lab[r0 + j * 32 + lane] : 0;
    __syncthreads();
    /* the chunk's rows per cluster and in all (integer atomics: exact) */
    int mine_valid = 0;
    for (int r = threadIdx.x; r < nr; r += blockDim.x) {
        const int32_t v = lab[r0 + r];
        if (v >= 0 && (int64_t)v < k) {
            atomicAdd(&own[v], 1);
            mine_valid++;
        }
    }
    atomicAdd(&valid, mine_valid);
    __syncthreads();
    /* owners: the clusters in order cut into CH_WARPS ranges of about equal
     * rows (cluster c to the warp of its rows' middle), so that skewed
     * clusters spread the work as evenly as whole clusters can; a function
     * of the labels alone */
    for (int64_t c0 = 0, carry = 0; c0 < k; c0 += blockDim.x) { /* block-uniform bounds */
        const int64_t c = c0 + threadIdx.x;
        const int cn = c < k ? own[c] : 0;
        int before, total;
        Scan(scan_tmp).ExclusiveSum(cn, before, total);
        if (c < k) {
            const int64_t mid2 = 2 * (carry + before) + cn; /* twice the middle */
            const int64_t o = valid > 0 ? mid2 * CH_WARPS / (2 * (int64_t)valid) : 0;
            own[c] = (int)(o < CH_WARPS - 1 ? o : CH_WARPS - 1);
        }
        __syncthreads(); /* scan_tmp reused */
        carry += total;
    }
    unsigned head = 0, tail = 0;
    for (int g0 = 0; g0 < nr; g0 += CH_GROUP) {
#pragma unroll
        for (int j = 0; j < CH_GROUP / 32; j++)
            lbuf[j * 32 + lane] = nxt[j];
        __syncwarp();
#pragma unroll
        for (int j = 0; j < CH_GROUP / 32; j++) {
            const int r = g0 + CH_GROUP + j * 32 + lane;
            nxt[j] = r < nr ? lab[r0 + r] : 0;
        }
        const int gn = nr - g0 < CH_GROUP ? nr - g0 : CH_GROUP;
        for (int j0 = 0; j0 < gn; j0 += 32) {
            const bool in = j0 + lane < gn;
            const int32_t v = in ? lbuf[j0 + lane] : 0;
            const bool ok = v >= 0 && (int64_t)v < k;
            if (warp == 0 && counts_here) {
                const unsigned badm = __ballot_sync(FULL_MASK, in && !ok);
                if (badm && lane == 0)
                    atomicMin(bad, (unsigned long long)(r0 + g0 + j0 + __ffs(badm) - 1));
            }
            const bool mine = in && ok && own[v] == warp;
            const unsigned mm = __ballot_sync(FULL_MASK, mine);
            if (mine) {
                const unsigned at = (tail + __popc(mm & ((1u << lane) - 1))) % CH_QUEUE;
                qrow[at] = g0 + j0 + lane;
                qlab[at] = v;
            }
            tail += __popc(mm);
            __syncwarp();
            while (tail - head >= (unsigned)U) {
                ch_batch<T, LC, U>(X, d, r0, col0, tw, w, w_f64, qrow, qlab, head, U, acc, cnt,
                                   counts_here);
                head += U;
            }
            __syncwarp(); /* the batch's queue reads before the next window's writes */
        }
    }
    if (tail > head)
        ch_batch<T, LC, U>(X, d, r0, col0, tw, w, w_f64, qrow, qlab, head, (int)(tail - head),
                           acc, cnt, counts_here);
    __syncthreads();
    const bool direct = gridDim.x == 1;
    for (int64_t e = threadIdx.x; e < k * tw; e += blockDim.x) {
        const int64_t c = e / tw, j = e - c * tw;
        if (direct)
            sums[c * d + col0 + j] = acc[c * tw + j];
        else
            part[((int64_t)blockIdx.x * k + c) * (d + 1) + col0 + j] = acc[c * tw + j];
    }
    if (counts_here)
        for (int64_t c = threadIdx.x; c < k; c += blockDim.x) {
            if (direct)
                counts[c] = cnt[c];
            else
                part[((int64_t)blockIdx.x * k + c) * (d + 1) + d] = cnt[c];
        }
}

/* Element e of [sums | counts] (k x (d + 1)): the chunks' partials added
 * in chunk order, as thread row y's sum of chunks y, y + 8, ... in order,
 * then those eight sums in order of y. */
__global__ void __launch_bounds__(256)
    ch_reduce_kernel(const double *__restrict__ part, int64_t chunks, int64_t k, int64_t d,
                     double *__restrict__ sums, double *__restrict__ counts)
{
    __shared__ double s8[8][32];
    const int64_t total = k * (d + 1);
    const int64_t e = (int64_t)blockIdx.x * 32 + threadIdx.x;
    double s = 0.0;
    if (e < total)
        for (int64_t p = threadIdx.y; p < chunks; p += 8)
            s += part[p * total + e];
    s8[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && e < total) {
        double t = s8[0][threadIdx.x];
#pragma unroll
        for (int y = 1; y < 8; y++)
            t += s8[y][threadIdx.x];
        const int64_t c = e / (d + 1), j = e - c * (d + 1);
        if (j < d)
            sums[c * d + j] = t;
        else
            counts[c] = t;
    }
}

/* Blocks of `threads` for a grid-stride loop over `items`, a few waves at most. */
unsigned seg_grid(const gsb__backend *be, int64_t items, int threads)
{
    int64_t blocks = (items + threads - 1) / threads;
    int sm = gsb__cuda_ctx_of(be)->sm_count;
    int64_t cap = (int64_t)(sm > 0 ? sm : 16) * 32;
    blocks = blocks < cap ? blocks : cap;
    return (unsigned)(blocks < 1 ? 1 : blocks);
}

/* Bits the sort looks at: those of the largest key, the sentinel (>= 1). */
int seg_key_bits(uint32_t sentinel) { return 32 - __builtin_clz(sentinel); }

/* The label check to the host (a call's one wait): GSB_OK, or GSB_EINVAL
 * naming the first bad row (bad_d: its index, ~0 for none), as the CPU twin. */
int seg_check_labels(const gsb__backend *be, const int32_t *lab,
                     const unsigned long long *bad_d, int64_t k)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    unsigned long long bad = ~0ull;
    int32_t label = 0;
    CUDA_TRY(cudaMemcpyAsync(&bad, bad_d, sizeof bad, cudaMemcpyDeviceToHost, stream));
    CUDA_TRY(cudaStreamSynchronize(stream));
    if (bad == ~0ull)
        return GSB_OK;
    CUDA_TRY(cudaMemcpyAsync(&label, lab + bad, sizeof label, cudaMemcpyDeviceToHost, stream));
    CUDA_TRY(cudaStreamSynchronize(stream));
    return GSB_CUDA_ERR(GSB_EINVAL, "segment_sum: label %d of row %lld is outside [0, %lld)",
                        (int)label, (long long)bad, (long long)k);
}

/* Steps 2 to 5 on the keys and row indices of step 1 (scratch cut from buf). */
template <typename T, typename IdxT>
int seg_sorted_sums(const gsb__backend *be, const gsb__tensor *Xt, const gsb__tensor *w,
                    int64_t k, uint32_t sentinel, char *buf, const size_t *off, size_t sort_bytes,
                    gsb__tensor *sums, gsb__tensor *counts)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    const int64_t n = Xt->rows, d = Xt->cols;
    uint32_t *kin = (uint32_t *)(buf + off[0]), *kout = (uint32_t *)(buf + off[1]);
    IdxT *iin = (IdxT *)(buf + off[2]), *iout = (IdxT *)(buf + off[3]);
    int64_t *info = (int64_t *)(buf + off[4]);
    double *part = (double *)(buf + off[5]);
    CUDA_TRY(cub::DeviceRadixSort::SortPairs(buf + off[6], sort_bytes, kin, kout, iin, iout,
                                             (IdxT)n, 0, seg_key_bits(sentinel), stream));
    seg_info_kernel<<<1, SEG_INFO_THREADS, 0, stream>>>(kout, n, k, sentinel, info);
    CUDA_LAUNCH_CHECK();
    const int64_t nseg = (n + SEG_ROWS - 1) / SEG_ROWS;
    const int64_t tiles = d > SEG_TILE ? (d + SEG_TILE - 1) / SEG_TILE : 1;
    if (tiles > 65535)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "segment_sum: %lld columns are too many",
                            (long long)d);
    /* d <= 64: one tile either way, of 64 columns (2 a lane) */
    auto *kern = d <= 32 * SEG_LANE_COLS / 2 ? seg_sum_kernel<T, IdxT, SEG_LANE_COLS / 2>
                                             : seg_sum_kernel<T, IdxT, SEG_LANE_COLS>;
    kern<<<dim3((unsigned)((nseg + SEG_WARPS - 1) / SEG_WARPS), (unsigned)tiles), SEG_WARPS * 32,
           0, stream>>>((const T *)Xt->data, d, kout, iout, w ? w->data : NULL,
                        w && w->dtype == GSB_F64, k, info, part, (double *)sums->data,
                        (double *)counts->data);
    CUDA_LAUNCH_CHECK();
    seg_reduce_kernel<<<seg_grid(be, k * (d + 1), 256), 256, 0, stream>>>(
        part, info, k, d, (double *)sums->data, (double *)counts->data);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

template <typename T, typename IdxT>
int segment_run(const gsb__backend *be, const gsb__tensor *Xt, const gsb__tensor *labels,
                const gsb__tensor *w, gsb__tensor *sums, gsb__tensor *counts)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    const int64_t n = Xt->rows, d = Xt->cols, k = sums->rows;
    const int32_t *lab = (const int32_t *)labels->data;
    /* valid keys are < 2^31 (int32 labels): a sentinel above them all */
    const uint32_t sentinel = k < ((int64_t)1 << 31) ? (uint32_t)k : (uint32_t)1 << 31;
    const int64_t nseg = (n + SEG_ROWS - 1) / SEG_ROWS;
    /* clusters of two runs or more: each of their runs touches a segment
     * boundary, and each boundary is touched by two runs at most */
    const int64_t nparts = 2 * nseg;
    size_t sort_bytes = 0;
    gsb__cuda_carve cv;
    size_t off[8];
    char *buf = NULL;
    unsigned long long *bad_d = NULL;
    int rc = GSB_OK;
    if (n == 0) { /* no rows: every sum and count is 0 */
        CUDA_CHECK(cudaMemsetAsync(sums->data, 0, (size_t)(k * d) * sizeof(double), stream));
        CUDA_CHECK(cudaMemsetAsync(counts->data, 0, (size_t)k * sizeof(double), stream));
        goto done;
    }
    if (k > 0)
        CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, (const uint32_t *)NULL,
                                                   (uint32_t *)NULL, (const IdxT *)NULL,
                                                   (IdxT *)NULL, (IdxT)n, 0,
                                                   seg_key_bits(sentinel), stream));
    off[0] = cv.take((size_t)n * sizeof(uint32_t));
    off[1] = cv.take((size_t)n * sizeof(uint32_t));
    off[2] = cv.take((size_t)n * sizeof(IdxT));
    off[3] = cv.take((size_t)n * sizeof(IdxT));
    off[4] = cv.take((size_t)(2 * (k + 1)) * sizeof(int64_t));
    off[5] = cv.take((size_t)(nparts * (d + 1)) * sizeof(double));
    off[6] = cv.take(sort_bytes);
    off[7] = cv.take(sizeof *bad_d);
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, cv.bytes, (void **)&buf));
    bad_d = (unsigned long long *)(buf + off[7]);
    CUDA_CHECK(cudaMemsetAsync(bad_d, 0xff, sizeof *bad_d, stream));
    seg_keys_kernel<IdxT><<<seg_grid(be, n, 256), 256, 0, stream>>>(
        lab, n, k, sentinel, (uint32_t *)(buf + off[0]), (IdxT *)(buf + off[2]), bad_d);
    CUDA_CHECK(cudaGetLastError());
    if (k > 0) /* k == 0: every label is bad, and there is nothing to sum */
        GSB_CUDA_CHECK((seg_sorted_sums<T, IdxT>(be, Xt, w, k, sentinel, buf, off, sort_bytes,
                                                 sums, counts)));
    rc = seg_check_labels(be, lab, bad_d, k);
done:
    gsb__cuda_free(be, buf);
    return rc;
}


/* The chunk path: the chunk kernel, the reduce when there are several
 * chunks, the label check (as the sorted path's). */
template <typename T>
int ch_run(const gsb__backend *be, const gsb__tensor *Xt, const gsb__tensor *labels,
           const gsb__tensor *w, const ch_plan &p, gsb__tensor *sums, gsb__tensor *counts)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    const int64_t n = Xt->rows, d = Xt->cols, k = sums->rows;
    const int32_t *lab = (const int32_t *)labels->data;
    gsb__cuda_carve cv;
    const size_t off_bad = cv.take(sizeof(unsigned long long));
    const size_t part_bytes = (size_t)(p.chunks * k * (d + 1)) * sizeof(double);
    const size_t off_part = cv.take(p.chunks > 1 ? part_bytes : 0);
    char *buf = NULL;
    unsigned long long *bad_d;
    double *part;
    int rc = GSB_OK;
    void (*kern)(const T *, int64_t, int64_t, const int32_t *, const void *, int, int64_t,
                 int64_t, int64_t, double *, double *, double *, unsigned long long *) =
        p.lc == 1 ? ch_sum_kernel<T, 1> : p.lc == 2 ? ch_sum_kernel<T, 2> : ch_sum_kernel<T, 4>;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, cv.bytes, (void **)&buf));
    bad_d = (unsigned long long *)(buf + off_bad);
    part = (double *)(buf + off_part);
    CUDA_CHECK(cudaMemsetAsync(bad_d, 0xff, sizeof *bad_d, stream));
    CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)p.smem));
    kern<<<dim3((unsigned)p.chunks, (unsigned)p.tiles), CH_WARPS * 32, p.smem, stream>>>(
        (const T *)Xt->data, n, d, lab, w ? w->data : NULL, w && w->dtype == GSB_F64, k, p.tc,
        p.rows, part, (double *)sums->data, (double *)counts->data, bad_d);
    CUDA_CHECK(cudaGetLastError());
    if (p.chunks > 1) {
        ch_reduce_kernel<<<(unsigned)((k * (d + 1) + 31) / 32), dim3(32, 8), 0, stream>>>(
            part, p.chunks, k, d, (double *)sums->data, (double *)counts->data);
        CUDA_CHECK(cudaGetLastError());
    }
    rc = seg_check_labels(be, lab, bad_d, k);
done:
    gsb__cuda_free(be, buf);
    return rc;
}

/* 1 when the chunk path takes this call: its plan exists and the device
 * grants its shared memory (every GPU since sm_80 does), unless
 * GSB_SEGMENT_SUM=sorted; GSB_SEGMENT_SUM=chunk takes it wherever a plan
 * exists (tests and measurements). */
int ch_applies(const gsb__backend *be, const gsb__tensor *X, int64_t k, ch_plan *p, int *out)
{
    *out = 0;
    if (!ch_plan_for(X->rows, X->cols, k, X->dtype == GSB_F32 ? sizeof(float) : sizeof(double), p))
        return GSB_OK;
    const char *force = getenv("GSB_SEGMENT_SUM");
    if (force && strcmp(force, "sorted") == 0)
        return GSB_OK;
    int optin = 0;
    CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                    gsb__cuda_ctx_of(be)->device));
    *out = (size_t)optin >= p->smem;
    return GSB_OK;
}

/* segment_sum's argument check (cpu_family.c's fam_check); cols -2: a vector of rows elements. */
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
    if (t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    return GSB_OK;
}

/* X's dtype, and row indices of 32 bits where they suffice (half the sort's traffic). */
template <typename T>
int segment_dispatch(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *labels,
                     const gsb__tensor *w, gsb__tensor *sums, gsb__tensor *counts)
{
    ch_plan p;
    int chunk = 0;
    int rc = ch_applies(be, X, sums->rows, &p, &chunk);
    if (rc != GSB_OK)
        return rc;
    if (chunk)
        return ch_run<T>(be, X, labels, w, p, sums, counts);
    return X->rows <= INT32_MAX ? segment_run<T, int32_t>(be, X, labels, w, sums, counts)
                                : segment_run<T, int64_t>(be, X, labels, w, sums, counts);
}

} // namespace

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
    return X->dtype == GSB_F32 ? segment_dispatch<float>(be, X, labels, w, sums, counts)
                               : segment_dispatch<double>(be, X, labels, w, sums, counts);
}
