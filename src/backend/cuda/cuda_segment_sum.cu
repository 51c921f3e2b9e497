/*
 * cuda_segment_sum.cu - the GPU's segment_sum (the KMeans centre update):
 * per-cluster weighted sums (k x d) and weight totals (k) of the rows of X,
 * in double.  Twin: cpu_family.c.
 *
 * Deterministic (KMeans' convergence test relies on it, see kmeans.c's
 * lloyd()): every sum is added in an order fixed by the inputs' shapes and
 * values alone, with no atomics, so it repeats bitwise on any GPU.  Steps:
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
 */
#include <limits.h>
#include <stdint.h>

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

/* The label check's result: GSB_EINVAL naming the first bad row, as the CPU twin. */
int seg_report(const gsb__backend *be, const int32_t *lab, unsigned long long bad, int64_t k)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    int32_t label = 0;
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
    unsigned long long bad = ~0ull, *bad_d = NULL;
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
    off[7] = cv.take(sizeof bad);
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, cv.bytes, (void **)&buf));
    bad_d = (unsigned long long *)(buf + off[7]);
    CUDA_CHECK(cudaMemsetAsync(bad_d, 0xff, sizeof bad, stream));
    seg_keys_kernel<IdxT><<<seg_grid(be, n, 256), 256, 0, stream>>>(
        lab, n, k, sentinel, (uint32_t *)(buf + off[0]), (IdxT *)(buf + off[2]), bad_d);
    CUDA_CHECK(cudaGetLastError());
    if (k > 0) /* k == 0: every label is bad, and there is nothing to sum */
        GSB_CUDA_CHECK((seg_sorted_sums<T, IdxT>(be, Xt, w, k, sentinel, buf, off, sort_bytes,
                                                 sums, counts)));
    /* the label check must reach the host */
    CUDA_CHECK(cudaMemcpyAsync(&bad, bad_d, sizeof bad, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (bad != ~0ull)
        rc = seg_report(be, lab, bad, k);
done:
    gsb__cuda_free(be, buf);
    return rc;
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
