/*
 * cuda_argmin_tc.cu - argmin_sqdist for float32 on tensor cores (sm_80+):
 * the KMeans assignment step near GEMM speed, with every label the exact
 * argmin.  cuda_distance.cu calls it for float32 unless
 * GSB_DISTANCE_KERNEL=old; float64 keeps the fp64 tile engine there.  The
 * 3xTF32 dot products, the cp.async slices and the error bound are
 * cuda_tc_tile.cuh's.
 *
 * Tiles.  A block of 8 warps owns 128 rows of X (16 per warp, one m16 tile)
 * and sweeps the centres BN = 8 NJ at a time (NJ n8 tiles per warp, so a
 * warp holds whole rows of the distance block and a row's argmin never
 * leaves its warp), reducing over d one 32-column slice per stage.  The
 * three-stage cp.async pipeline runs over the block's whole sequence (row
 * block, centre tile, slice), so the next tile's first slices are in
 * flight during an epilogue.
 *
 * The rule for BN: the centres are swept in ct = ceil(k / 128) tiles of
 * ceil(k / ct) columns, rounded up to the next NJ in {2, 4, 6, 8, 10, 13,
 * 16} n8 tiles (k = 100: one tile of 104).
 *
 * Epilogue per centre tile: each thread ranks its accumulators by
 * v = ||c||^2 - 2 x.c (||c||^2 in double, rounded once to float) and keeps
 * per row, in registers, the best (v1, j1) and the second best value v2
 * (over the other centres).  At the row block's end the four lanes of a row
 * merge theirs with shuffles (ties to the smaller index), then compute in
 * double the winner's exact distance sum (x - c)^2 and ||x||^2.
 *
 * How ties and near ties are guaranteed.  For every centre j,
 * |v_j - (||c_j||^2 - 2 x.c_j)| <= E = TC_SREL(d) (||x||^2 + max ||c||^2)
 * + TC_SABS(d): twice the dot product's bound (cuda_tc_tile.cuh; 2 x.c <=
 * ||x||^2 + ||c||^2) with room for the roundings of ||c||^2 and of v.  A
 * row whose v2 - v1 > 2 E has j1 as its strict exact argmin.  Every other
 * row (a gap within 2 E, exact ties, duplicates, inputs so large that
 * ||x||^2 + max ||c||^2 > 1e30, NaN or inf) is listed, and a second kernel
 * recomputes its k distances directly in double, sum (x - c)^2, taking the
 * smallest index among equal values: the CPU twin's rule.  So labels are
 * the exact argmin of the squared distance (to double rounding), ties to
 * the smaller index, whatever the tensor cores' rounding; mind is the
 * winner's distance computed in double, rounded once to float.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_argmin_tc.h"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_tc_tile.cuh"

namespace {

using namespace gsb_tc;

constexpr int WARPS = 8;
constexpr int NT = WARPS * 32;
constexpr int BM = WARPS * 16; /* rows of X per block */
constexpr int MAX_NJ = 16;     /* BN <= 128 */
constexpr unsigned FULL = 0xffffffffu;

#ifdef GSB_TC_ARCH
/* ||x||^2 + max ||c||^2 above this: fp32 intermediates could overflow */
constexpr double TC_BIG = 1e30;

/* (av, aj) ranks before (bv, bj): smaller, or equal with a smaller index; j < 0 last */
__device__ __forceinline__ bool ranks_before(float av, int aj, float bv, int bj)
{
    if (aj < 0)
        return false;
    if (bj < 0)
        return true;
    return av < bv || (av == bv && aj < bj);
}
#endif

/*
 * Block-stride over row blocks of BM rows: labels, mind, and the rows
 * whose label the approximation cannot certify appended to flagged
 * (count in *nflag).  cn: ||c||^2 rounded to float; cmax2: max ||c||^2.
 */
template <int NJ>
__global__ void __launch_bounds__(NT, 2)
    argmin_tc_kernel(const float *__restrict__ X, int64_t n, const float *__restrict__ C, int k,
                     int d, bool vec, const float *__restrict__ cn,
                     const double *__restrict__ cmax2, double srel, double sabs,
                     int32_t *__restrict__ labels,
                     float *__restrict__ mind, int *__restrict__ nflag,
                     int64_t *__restrict__ flagged)
{
#ifdef GSB_TC_ARCH
    constexpr int BN = NJ * 8;
    extern __shared__ __align__(16) float tc_smem[];
    float(*As)[BM][LDS] = reinterpret_cast<float(*)[BM][LDS]>(tc_smem);
    float(*Bs)[BN][LDS] = reinterpret_cast<float(*)[BN][LDS]>(tc_smem + STAGES * BM * LDS);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int64_t nrb = (n + BM - 1) / BM;
    const int ct_n = (k + BN - 1) / BN, kc_n = (d + BK - 1) / BK;
    const int64_t per_rb = (int64_t)ct_n * kc_n;
    const int64_t mine =
        (int64_t)blockIdx.x < nrb ? (nrb - 1 - (int64_t)blockIdx.x) / gridDim.x + 1 : 0;
    const int64_t steps = mine * per_rb;
    const double cm2 = *cmax2;

    /* step s: row block i-th of this block, centre tile ct, d chunk kc */
    auto issue = [&](int64_t s) {
        int64_t i = s / per_rb;
        int rem = (int)(s - i * per_rb);
        int ct = rem / kc_n, kc = rem - ct * kc_n;
        int st = (int)(s % STAGES);
        int64_t r0 = ((int64_t)blockIdx.x + i * (int64_t)gridDim.x) * BM;
        load_slice<BM, NT>(As[st], X, n, r0, d, kc * BK, tid, vec);
        load_slice<BN, NT>(Bs[st], C, k, (int64_t)ct * BN, d, kc * BK, tid, vec);
    };

#pragma unroll
    for (int p = 0; p < STAGES - 1; p++) {
        if (p < steps)
            issue(p);
        cp_async_commit();
    }

    float acc[NJ][4];
#pragma unroll
    for (int j = 0; j < NJ; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    /* per row (g, g + 8): best value, its centre, second best value */
    float b1[2] = {INFINITY, INFINITY}, b2[2] = {INFINITY, INFINITY};
    int j1[2] = {-1, -1};

    for (int64_t s = 0; s < steps; s++) {
        cp_async_wait<STAGES - 2>(); /* this thread's copies of step s have landed */
        __syncthreads();             /* everyone's have; step s - 1's reads are done */
        if (s + STAGES - 1 < steps)
            issue(s + STAGES - 1);
        cp_async_commit(); /* possibly empty: keeps the group count per step */

        const int64_t i = s / per_rb;
        const int rem = (int)(s - i * per_rb);
        const int ct = rem / kc_n, kc = rem - ct * kc_n;
        slice_mma<NJ>(As[s % STAGES], Bs[s % STAGES], warp * 16, 0, g, t, d - kc * BK, acc);
        if (kc != kc_n - 1)
            continue;

        /* a centre tile is done: rank its columns (in increasing order per
         * thread, so a strict < keeps the smaller index) */
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int c = ct * BN + j * 8 + 2 * t + h;
                if (c < k) {
                    float cc = __ldg(cn + c);
#pragma unroll
                    for (int half = 0; half < 2; half++) {
                        float v = fmaf(-2.f, acc[j][2 * half + h], cc);
                        v = isnan(v) ? INFINITY : v; /* flagged below: sure to be re-ranked */
                        if (j1[half] < 0 || v < b1[half]) {
                            b2[half] = b1[half];
                            b1[half] = v;
                            j1[half] = c;
                        } else if (v < b2[half]) {
                            b2[half] = v;
                        }
                    }
                }
                acc[j][h] = acc[j][2 + h] = 0.f;
            }
        if (ct != ct_n - 1)
            continue;

        /* the row block is done: the 4 lanes of a row (xor 1, 2) merge */
#pragma unroll
        for (int half = 0; half < 2; half++)
#pragma unroll
            for (int off = 1; off <= 2; off <<= 1) {
                float o1 = __shfl_xor_sync(FULL, b1[half], off);
                float o2 = __shfl_xor_sync(FULL, b2[half], off);
                int oj = __shfl_xor_sync(FULL, j1[half], off);
                if (ranks_before(o1, oj, b1[half], j1[half])) {
                    b2[half] = fminf(b1[half], o2);
                    b1[half] = o1;
                    j1[half] = oj;
                } else {
                    b2[half] = fminf(b2[half], o1);
                }
            }
        /* the winner's exact distance and ||x||^2, the row's columns split
         * over its 4 lanes (16-byte loads when aligned: runs of 4 columns),
         * both rows' loads in flight together */
        const int64_t r0 = ((int64_t)blockIdx.x + i * (int64_t)gridDim.x) * BM + warp * 16 + g;
        double sd[2] = {0.0, 0.0}, sx[2] = {0.0, 0.0};
        const float *xr[2], *cr[2];
#pragma unroll
        for (int half = 0; half < 2; half++) {
            bool ok = r0 + 8 * half < n;
            xr[half] = ok ? X + (r0 + 8 * half) * d : NULL;
            cr[half] = ok ? C + (int64_t)j1[half] * d : NULL;
        }
        if (vec) {
            for (int q = 4 * t; q < d; q += 16)
#pragma unroll
                for (int half = 0; half < 2; half++)
                    if (xr[half]) {
                        float4 x4 = *reinterpret_cast<const float4 *>(xr[half] + q);
                        float4 c4 = __ldg(reinterpret_cast<const float4 *>(cr[half] + q));
                        const float xs[4] = {x4.x, x4.y, x4.z, x4.w};
                        const float cs[4] = {c4.x, c4.y, c4.z, c4.w};
#pragma unroll
                        for (int u = 0; u < 4; u++) {
                            double xv = (double)xs[u], df = xv - (double)cs[u];
                            sd[half] += df * df;
                            sx[half] += xv * xv;
                        }
                    }
        } else {
            for (int q = t; q < d; q += 4)
#pragma unroll
                for (int half = 0; half < 2; half++)
                    if (xr[half]) {
                        double xv = (double)xr[half][q], df = xv - (double)cr[half][q];
                        sd[half] += df * df;
                        sx[half] += xv * xv;
                    }
        }
#pragma unroll
        for (int half = 0; half < 2; half++) {
#pragma unroll
            for (int off = 1; off <= 2; off <<= 1) {
                sd[half] += __shfl_xor_sync(FULL, sd[half], off);
                sx[half] += __shfl_xor_sync(FULL, sx[half], off);
            }
            const int64_t r = r0 + 8 * half;
            if (t == 0 && r < n) {
                labels[r] = j1[half];
                mind[r] = (float)sd[half];
                double scale = sx[half] + cm2;
                double e = srel * scale + sabs;
                bool sure = scale <= TC_BIG && (double)b2[half] - (double)b1[half] > 2.0 * e;
                if (!sure)
                    flagged[atomicAdd(nflag, 1)] = r;
            }
            b1[half] = b2[half] = INFINITY;
            j1[half] = -1;
        }
    }
    cp_async_wait<0>(); /* no copy outlives the block */
#else
    __trap(); /* the host launches this only on sm_80 and newer */
#endif
}

/*
 * The flagged rows, one warp each: every centre's exact distance, sum
 * (x - c)^2 in double (lanes over the columns, a butterfly sum that leaves
 * every lane the same value), the smallest index among the smallest.
 */
__global__ void argmin_recheck_kernel(const float *__restrict__ X, const float *__restrict__ C,
                                      int k, int d, const int *__restrict__ nflag,
                                      const int64_t *__restrict__ flagged,
                                      int32_t *__restrict__ labels, float *__restrict__ mind)
{
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const int64_t cnt = *nflag;
    for (int64_t f = warp; f < cnt; f += nwarps) {
        const int64_t r = flagged[f];
        const float *x = X + r * d;
        double best = INFINITY;
        int bj = -1;
        for (int j = 0; j < k; j++) {
            const float *c = C + (int64_t)j * d;
            double s = 0.0;
            for (int q = lane; q < d; q += 32) {
                double df = (double)x[q] - (double)c[q];
                s += df * df;
            }
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                s += __shfl_xor_sync(FULL, s, off);
            if (bj < 0 || s < best) { /* NaN never wins: the first centre stays */
                best = s;
                bj = j;
            }
        }
        if (lane == 0) {
            labels[r] = bj;
            mind[r] = (float)best;
        }
    }
}

/* cn[j] = ||c_j||^2 (double, rounded once to float); *cmax2 = the largest, in double. */
__global__ void centre_norms_kernel(const float *__restrict__ C, int k, int d,
                                    float *__restrict__ cn, double *__restrict__ cmax2)
{
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t j = warp; j < k; j += nwarps) {
        double s = 0.0;
        for (int q = lane; q < d; q += 32) {
            double v = (double)C[j * d + q];
            s += v * v;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            s += __shfl_xor_sync(FULL, s, off);
        if (lane == 0) {
            cn[j] = (float)s;
            /* non-negative doubles order as their bit patterns; NaN (all
             * bits high after the sign) wins, and flags every row */
            atomicMax((unsigned long long *)cmax2, (unsigned long long)__double_as_longlong(s));
        }
    }
}

/* Warps for grid-stride work over items (one warp each), a few waves at most. */
unsigned warp_grid(const gsb__backend *be, int64_t items)
{
    int64_t blocks = (items * 32 + 255) / 256;
    int sm = gsb__cuda_ctx_of(be)->sm_count;
    int64_t cap = (int64_t)(sm > 0 ? sm : 16) * 8;
    if (blocks > cap)
        blocks = cap;
    return blocks < 1 ? 1u : (unsigned)blocks;
}

template <int NJ>
int tc_launch(const gsb__backend *be, const float *X, int64_t n, const float *C, int k, int d,
              const float *cn, const double *cmax2, int32_t *labels, float *mind, int *nflag,
              int64_t *flagged)
{
    auto kern = argmin_tc_kernel<NJ>;
    const size_t smem = stage_bytes(BM, NJ * 8);
    const bool vec = d % 4 == 0 && (uintptr_t)X % 16 == 0 && (uintptr_t)C % 16 == 0;
    CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0, sm = gsb__cuda_ctx_of(be)->sm_count;
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, NT, smem));
    int64_t blocks = (n + BM - 1) / BM;
    int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * (sm > 0 ? sm : 16);
    if (blocks > resident)
        blocks = resident;
    kern<<<(unsigned)blocks, NT, smem, gsb__cuda_ctx_of(be)->stream>>>(
        X, n, C, k, d, vec, cn, cmax2, TC_SREL(d), TC_SABS(d), labels, mind, nflag, flagged);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* The rule for the centre tile (see the header comment): n8 tiles per warp. */
int pick_nj(int64_t k)
{
    static const int choices[] = {2, 4, 6, 8, 10, 13, MAX_NJ};
    int64_t tiles = (k + MAX_NJ * 8 - 1) / (MAX_NJ * 8);
    int64_t cols = (k + tiles - 1) / tiles;
    int64_t n8 = (cols + 7) / 8;
    for (int c : choices)
        if (c >= n8)
            return c;
    return MAX_NJ;
}

} // namespace

int gsb__cuda_distance_kernel_old(void)
{
    const char *env = getenv("GSB_DISTANCE_KERNEL");
    return env && strcmp(env, "old") == 0;
}

int gsb__cuda_tc_usable(const gsb__backend *be)
{
    if (gsb__cuda_distance_kernel_old())
        return 0;
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                               gsb__cuda_ctx_of(be)->device) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: the fp32 tile engine serves */
        return 0;
    }
    return major >= 8;
}

int gsb__cuda_argmin_tc(const gsb__backend *be, const float *X, int64_t n,
                                   const float *C, int64_t k, int64_t d, int32_t *labels,
                                   float *mind)
{
    cudaStream_t stream = gsb__cuda_ctx_of(be)->stream;
    int rc = GSB_OK;
    float *cn = NULL;
    unsigned char *small = NULL; /* max ||c||^2 (double) and the flagged count (int) */
    double *cmax2 = NULL;
    int *nflag = NULL;
    int64_t *flagged = NULL;
    const int ki = (int)k, di = (int)d; /* both <= INT_MAX: check_dims */
    int nj = pick_nj(k);

    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)k * sizeof(float), (void **)&cn));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, 2 * sizeof(double), (void **)&small));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)n * sizeof(int64_t), (void **)&flagged));
    cmax2 = (double *)small;
    nflag = (int *)(small + sizeof(double));
    CUDA_CHECK(cudaMemsetAsync(small, 0, 2 * sizeof(double), stream));
    centre_norms_kernel<<<warp_grid(be, k), 256, 0, stream>>>(C, ki, di, cn, cmax2);
    CUDA_CHECK(cudaGetLastError());
#define TC_CASE(NJ)                                                                        \
    case NJ:                                                                               \
        rc = tc_launch<NJ>(be, X, n, C, ki, di, cn, cmax2, labels, mind, nflag, flagged);     \
        break;
    switch (nj) {
        TC_CASE(2)
        TC_CASE(4)
        TC_CASE(6)
        TC_CASE(8)
        TC_CASE(10)
        TC_CASE(13)
        TC_CASE(16)
    default: rc = GSB_CUDA_ERR(GSB_EINTERNAL, "argmin_sqdist: no tile of %d n8 tiles", nj);
    }
#undef TC_CASE
    if (rc != GSB_OK)
        goto done;
    argmin_recheck_kernel<<<warp_grid(be, n), 256, 0, stream>>>(X, C, ki, di, nflag, flagged,
                                                                labels, mind);
    CUDA_CHECK(cudaGetLastError());
done:
    gsb__cuda_free(be, cn);
    gsb__cuda_free(be, small);
    gsb__cuda_free(be, flagged);
    return rc;
}
