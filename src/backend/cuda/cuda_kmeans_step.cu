/*
 * cuda_kmeans_step.cu - the GPU's kmeans_step: one Lloyd iteration's E-step
 * and M-step statistics in one pass over X (backend.h).  Twin: the CPU's
 * argmin_sqdist then segment_sum (cpu_distance.c, cpu_family.c) and the
 * weighted sum of the distances; the CPU backend has no kmeans_step.
 *
 * argmin_sqdist and segment_sum each read X (1M x 64 float32: 256 MB) and
 * segment_sum's tiling cost ~0.5 ms an iteration against ~0.7 ms for the
 * assignment.  Here each block, right after a row block's assignment
 * (cuda_argmin_rows.cuh), adds those rows (still in L2) into its own
 * k x (d + 1) partial sums in shared memory, in double, the last column the
 * weight totals, plus the weighted distances into its inertia.  Determinism
 * without atomics, as segment_sum: every accumulator element is owned by
 * one lane of one warp (unit (c, g) = cluster c's columns [32 g, 32 g + 32)
 * belongs to warp (c G + g) mod W), which adds the block's rows in row
 * order; the blocks' partials are then added in a fixed order.  Block x
 * takes the fixed range of row blocks [nb x / P, nb (x + 1) / P) with P
 * from the shapes only, so results repeat bitwise on any GPU.
 *
 * The partial sums must fit shared memory with two blocks resident per SM
 * (k (d + 1) doubles; k = 100, d = 64 takes 52 KB): larger shapes run
 * argmin_sqdist, segment_sum and a one-block sum of the distances instead.
 */
#include <stdint.h>

#include "backend/cuda/cuda_argmin_rows.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_ops.h"

using namespace gsb_dist;

namespace {

/* Most blocks (partials) of one step: two waves of an H100 / H200 at two
 * blocks an SM; a shape's partials are at most 512 x k (d + 1) doubles. */
constexpr int64_t STEP_CHUNKS = 512;
/* Most shared memory for the partial sums: with the tiles' ~17 KB, two
 * blocks fit an SM's 228 KB (the occupancy query below decides). */
constexpr size_t STEP_SMEM_BYTES = (size_t)96 << 10;
/* rows of a warp whose loads are issued together before their adds */
constexpr int STEP_UNROLL = 6;
/* partials summed per reduce block: 32 elements x STEP_RGROUPS chunk groups */
constexpr int STEP_RGROUPS = 8;
/* threads of the one-block distance sum (the unfused shapes) */
constexpr int WSUM_THREADS = 1024;

/*
 * Add the rows of the current row block (tile rows [0, BM), labels in lab,
 * weights in wr; label -1: no row) into acc (k x ld doubles, ld = d + 1):
 * the warp adds the units it owns, rows in order.  Loads of up to
 * STEP_UNROLL rows are issued before their adds.
 */
template <class C, typename T>
__device__ __forceinline__ void step_accumulate(double *acc, const int *lab, const double *wr,
                                                const T *__restrict__ X, int64_t r0, int64_t d,
                                                int warp, int lane)
{
    constexpr int NW = C::NT / 32;
    /* units per cluster row (one at least: its first lane adds the weights) */
    const int64_t ld = d + 1, G = d > 32 ? (d + 31) / 32 : 1;
    for (int base = 0; base < C::BM; base += 32) {
        const int c = lab[base + lane];
        for (int64_t g = 0; g < G; g++) {
            const int64_t col = g * 32 + lane;
            unsigned mask = __ballot_sync(FULL_MASK, c >= 0 && ((int64_t)c * G + g) % NW == warp);
            while (mask) { /* warp-uniform */
                int bit[STEP_UNROLL];
                T xv[STEP_UNROLL];
#pragma unroll
                for (int u = 0; u < STEP_UNROLL; u++) {
                    bit[u] = mask ? __ffs(mask) - 1 : -1;
                    mask &= mask - 1;
                    xv[u] = bit[u] >= 0 && col < d ? X[(r0 + base + bit[u]) * d + col] : T(0);
                }
#pragma unroll
                for (int u = 0; u < STEP_UNROLL; u++) {
                    if (bit[u] < 0)
                        continue;
                    const int row = base + bit[u];
                    double *dst = acc + (int64_t)lab[row] * ld;
                    if (col < d)
                        dst[col] += wr[row] * (double)xv[u];
                    if (g == 0 && lane == 0)
                        dst[d] += wr[row];
                }
            }
        }
    }
}

/*
 * Block x: the assignment of its row blocks (labels, mind) and their
 * partial statistics into part + x * stride, stride = k (d + 1) + 1: the
 * k x (d + 1) sums and weight totals, then sum w_i mind_i.  w (n doubles)
 * may be NULL (unit weights).  Dynamic shared memory: k (d + 1) doubles.
 */
template <class C, typename T>
__global__ void __launch_bounds__(C::NT, 2)
    step_kernel(const T *__restrict__ X, int64_t n, const T *__restrict__ Cc, int64_t k,
                int64_t d, const T *__restrict__ cn, const double *__restrict__ w, int64_t P,
                int32_t *__restrict__ labels, T *__restrict__ mind, double *__restrict__ part)
{
    extern __shared__ double step_acc[];
    __shared__ __align__(16) typename C::smem sm;
    __shared__ int lab_s[C::BM];
    __shared__ double wr_s[C::BM], wd_s[C::BM];
    /* lane l of warp 0: rows l, l + 32, ... of each row block's sum w mind, in
     * order (in shared memory: registers are the assignment's) */
    __shared__ double inert_s[32];
    const int tid = threadIdx.x, tx = tid % C::TX, ty = tid / C::TX;
    const int warp = tid / 32, lane = tid % 32;
    const int64_t acc_len = k * (d + 1), stride = acc_len + 1;
    const int64_t nb = (n + C::BM - 1) / C::BM;
    const int64_t b0 = nb * (int64_t)blockIdx.x / P, b1 = nb * ((int64_t)blockIdx.x + 1) / P;
    for (int64_t e = tid; e < acc_len; e += C::NT)
        step_acc[e] = 0.0;
    if (tid < 32)
        inert_s[tid] = 0.0;
    tile_pipe<C> pipe;
    if (b0 < b1)
        tile_prefetch(pipe, X, n, b0 * C::BM, Cc, k, 0, d, tid);
    for (int64_t blk = b0; blk < b1; blk++) {
        const int64_t r0 = blk * C::BM;
        int bj[C::TM];
        double s[C::TM];
        argmin_rows<C>(sm, pipe, X, n, r0, Cc, k, d, cn, blk + 1 < b1, r0 + C::BM, tid, tx, ty,
                       labels, mind, bj, s);
        __syncthreads(); /* the previous row block's lab_s, wr_s, wd_s are read */
        if (tx == 0)
#pragma unroll
            for (int i = 0; i < C::TM; i++) {
                const int t = C::row(ty, i);
                const double wi = bj[i] >= 0 ? (w ? w[r0 + t] : 1.0) : 0.0;
                lab_s[t] = bj[i];
                wr_s[t] = wi;
                /* the distance as stored (T), as the unfused inertia sums mind */
                wd_s[t] = bj[i] >= 0 ? wi * (double)(T)s[i] : 0.0;
            }
        __syncthreads();
        step_accumulate<C>(step_acc, lab_s, wr_s, X, r0, d, warp, lane);
        if (warp == 0)
            for (int t = lane; t < C::BM; t += 32)
                inert_s[lane] += wd_s[t];
    }
    __syncthreads();
    double *out = part + (int64_t)blockIdx.x * stride;
    for (int64_t e = tid; e < acc_len; e += C::NT)
        out[e] = step_acc[e];
    if (warp == 0) {
        double inert = inert_s[lane];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            inert += __shfl_down_sync(FULL_MASK, inert, off);
        if (lane == 0)
            out[acc_len] = inert;
    }
}

/*
 * The P partials (stride doubles each) added in a fixed order: a block
 * takes 32 consecutive elements; its STEP_RGROUPS groups of 32 threads each
 * add the partials p = g, g + STEP_RGROUPS, ... in order, and the first
 * group adds the groups' totals in order.  Element e < k (d + 1) is sums
 * or counts (segment_sum's layout), the last the inertia.
 */
__global__ void __launch_bounds__(32 * STEP_RGROUPS)
    step_reduce_kernel(const double *__restrict__ part, int64_t P, int64_t k, int64_t d,
                       double *__restrict__ sums, double *__restrict__ counts,
                       double *__restrict__ inertia)
{
    __shared__ double tot[STEP_RGROUPS][32];
    const int64_t acc_len = k * (d + 1), stride = acc_len + 1;
    const int g = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int64_t e0 = (int64_t)blockIdx.x * 32; e0 < stride; e0 += (int64_t)gridDim.x * 32) {
        const int64_t e = e0 + lane;
        double s = 0.0;
        if (e < stride) {
            int64_t p = g;
            /* four independent loads in flight, added in order */
            for (; p + 3 * STEP_RGROUPS < P; p += 4 * STEP_RGROUPS) {
                double a = part[p * stride + e], b = part[(p + STEP_RGROUPS) * stride + e];
                double c = part[(p + 2 * STEP_RGROUPS) * stride + e];
                double f = part[(p + 3 * STEP_RGROUPS) * stride + e];
                s += a;
                s += b;
                s += c;
                s += f;
            }
            for (; p < P; p += STEP_RGROUPS)
                s += part[p * stride + e];
        }
        tot[g][lane] = s;
        __syncthreads();
        if (g == 0 && e < stride) {
            double r = 0.0;
            for (int q = 0; q < STEP_RGROUPS; q++)
                r += tot[q][lane];
            const int64_t l = e / (d + 1), j = e - l * (d + 1);
            if (e == acc_len)
                inertia[0] = r;
            else if (j < d)
                sums[l * d + j] = r;
            else
                counts[l] = r;
        }
        __syncthreads();
    }
}

/* inertia = sum_i w_i mind_i in double, one block: thread t adds rows t,
 * t + WSUM_THREADS, ... in order, then a fixed tree. */
template <typename T>
__global__ void __launch_bounds__(WSUM_THREADS)
    wsum_kernel(const T *__restrict__ mind, const double *__restrict__ w, int64_t n,
                double *__restrict__ inertia)
{
    __shared__ double red[WSUM_THREADS];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += WSUM_THREADS)
        s += (w ? w[i] : 1.0) * (double)mind[i];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int h = WSUM_THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h)
            red[threadIdx.x] += red[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        inertia[0] = red[0];
}

/* What one step works on. */
template <typename T>
struct step_args {
    const T *X, *Cc;
    int64_t n, k, d;
    const T *cn;     /* ||c||^2 (k) */
    const double *w; /* n, or NULL */
    int32_t *labels;
    T *mind;
    double *sums, *counts, *inertia;
};

/*
 * The fused step with tile shape C; *fused = 0 (nothing launched) when its
 * partial sums do not fit two blocks an SM.
 */
template <class C, typename T>
int step_launch(const gsb__backend *be, const step_args<T> &a, int *fused)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    const int64_t acc_len = a.k * (a.d + 1), stride = acc_len + 1;
    const int64_t nb = (a.n + C::BM - 1) / C::BM;
    const int64_t P = nb < STEP_CHUNKS ? nb : STEP_CHUNKS;
    const size_t smem = (size_t)acc_len * sizeof(double);
    int per_sm = 0, rc = GSB_OK;
    double *part = NULL;
    *fused = 0;
    if (smem > STEP_SMEM_BYTES)
        return GSB_OK;
    CUDA_TRY(cudaFuncSetAttribute(step_kernel<C, T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, step_kernel<C, T>, C::NT,
                                                           smem));
    if (per_sm < 2)
        return GSB_OK;
    *fused = 1;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(P * stride) * sizeof(double), (void **)&part));
    step_kernel<C, T><<<(unsigned)P, C::NT, smem, stream>>>(a.X, a.n, a.Cc, a.k, a.d, a.cn, a.w,
                                                           P, a.labels, a.mind, part);
    CUDA_CHECK(cudaGetLastError());
    {
        int64_t blocks = (stride + 31) / 32;
        step_reduce_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 32 * STEP_RGROUPS, 0,
                             stream>>>(part, P, a.k, a.d, a.sums, a.counts, a.inertia);
        CUDA_CHECK(cudaGetLastError());
    }
done:
    gsb__cuda_free(be, part);
    return rc;
}

template <typename T>
int step_run(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *C,
             const gsb__tensor *w, gsb__tensor *labels, gsb__tensor *mind, gsb__tensor *sums,
             gsb__tensor *counts, gsb__tensor *inertia)
{
    step_args<T> a;
    a.X = (const T *)X->data;
    a.Cc = (const T *)C->data;
    a.n = X->rows;
    a.k = C->rows;
    a.d = X->cols;
    a.w = w ? (const double *)w->data : NULL;
    a.labels = (int32_t *)labels->data;
    a.mind = (T *)mind->data;
    a.sums = (double *)sums->data;
    a.counts = (double *)counts->data;
    a.inertia = (double *)inertia->data;
    T *cn = NULL;
    int fused = 0;
    int rc = gsb__cuda_alloc(be, (size_t)a.k * sizeof(T), (void **)&cn);
    if (rc != GSB_OK)
        return rc;
    a.cn = cn;
    rc = row_norms<T, T>(be, a.Cc, a.k, a.d, 0, cn, 0.0, NULL);
    if (rc == GSB_OK)
        rc = argmin_with_cfg<T>(a.k, [&](auto cfg) {
            return step_launch<typename decltype(cfg)::type>(be, a, &fused);
        });
    gsb__cuda_free(be, cn);
    if (rc != GSB_OK || fused)
        return rc;
    /* too many partial sums for shared memory: the two ops, then the distances' sum */
    if ((rc = gsb__cuda_argmin_sqdist(be, X, C, labels, mind)) != GSB_OK ||
        (rc = gsb__cuda_segment_sum(be, X, labels, w, sums, counts)) != GSB_OK)
        return rc;
    wsum_kernel<T><<<1, WSUM_THREADS, 0, gsb__cuda_ctx_of(be)->stream>>>(a.mind, a.w, a.n,
                                                                         a.inertia);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

} // namespace

extern "C" int gsb__cuda_kmeans_step(const gsb__backend *be, const gsb__tensor *X,
                                     const gsb__tensor *C, const gsb__tensor *w,
                                     gsb__tensor *labels, gsb__tensor *mind, gsb__tensor *sums,
                                     gsb__tensor *counts, gsb__tensor *inertia)
{
    const char *op = "kmeans_step";
    int rc;
    if ((rc = check_tensor(be, X, (gsb_dtype)0, -1, -1, op, "X")) != GSB_OK ||
        (rc = check_tensor(be, C, X->dtype, -1, X->cols, op, "C")) != GSB_OK)
        return rc;
    if (C->rows < 1)
        return GSB_CUDA_ERR(GSB_EINVAL, "%s: no centres given", op);
    if ((w && (rc = check_vector(be, w, GSB_F64, X->rows, op, "w")) != GSB_OK) ||
        (rc = check_vector(be, labels, GSB_I32, X->rows, op, "labels")) != GSB_OK ||
        (rc = check_vector(be, mind, X->dtype, X->rows, op, "mind")) != GSB_OK ||
        (rc = check_tensor(be, sums, GSB_F64, C->rows, X->cols, op, "sums")) != GSB_OK ||
        (rc = check_vector(be, counts, GSB_F64, C->rows, op, "counts")) != GSB_OK ||
        (rc = check_vector(be, inertia, GSB_F64, 1, op, "inertia")) != GSB_OK)
        return rc;
    if ((rc = check_dims(X->cols, C->rows, op)) != GSB_OK)
        return rc;
    if (X->rows == 0) { /* no rows: every sum, count and the inertia are 0 */
        cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
        CUDA_TRY(cudaMemsetAsync(sums->data, 0,
                                 (size_t)(C->rows * X->cols) * sizeof(double), stream));
        CUDA_TRY(cudaMemsetAsync(counts->data, 0, (size_t)C->rows * sizeof(double), stream));
        CUDA_TRY(cudaMemsetAsync(inertia->data, 0, sizeof(double), stream));
        return GSB_OK;
    }
    return X->dtype == GSB_F32
               ? step_run<float>(be, X, C, w, labels, mind, sums, counts, inertia)
               : step_run<double>(be, X, C, w, labels, mind, sums, counts, inertia);
}
