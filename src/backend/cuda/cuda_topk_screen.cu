/*
 * cuda_topk_screen.cu - the pruned topk's screen: TF32 tensor-core dot
 * products (mma.sync m16n8k8) of the centred float32 copies of a block of
 * queries and a slice of references, tested against each query's admission
 * threshold in the registers that hold them; only admitted candidates are
 * written (index and approximation, into the query's places).  It replaces
 * the GEMM tile's round trip through memory (an nq x nr matrix written and
 * read again: 16 GB at 10k x 200k) on narrow rows, where that traffic, not
 * the arithmetic, set the time.
 *
 * The test is the selection kernel's, on the same terms: fl((1 - 1.5 s)
 * ||r||^2 - 2 (q.r)~) not above tq (the query's k-th exact distance less
 * (1 - 1.5 s) ||q||^2, rounded up; cuda_topk_list.cuh's admit_threshold), so
 * cuda_topk_prune.cu's bound covers it: the inputs are rounded to TF32 (cvt.rna:
 * 2^-11 relative, inside the 2^-10 the bound allows for truncation) and the
 * products summed in FP32 (the exact mode's (d + 2) eps term).  The
 * threshold is a snapshot taken before the screen (the rank step after it
 * tightens it again); a looser threshold only admits more.
 *
 * Block: 128 queries x 128 references per step, 8 warps of 64 x 32, the
 * columns in slices of 32 through shared memory (rows padded to 36 words:
 * the fragment reads hit 32 banks); the query block (rows of at most 128
 * columns) stays there for the whole block, so only the references stream
 * (from L2).
 */
#include <stdint.h>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_topk_screen.h"

namespace {

constexpr int BM = 128, BN = 128, BK = 32, LDS = BK + 4, NT = 256;
constexpr int64_t PER_BLOCK = 8; /* at most this many 128-reference tiles a block */
/* The query block stays in shared memory for the whole block: QRES slices
 * (90 KiB with the reference slice: two blocks an SM). */
constexpr int QRES = 4;
static_assert(GSB_TOPK_SCREEN_MAX_D <= QRES * BK, "the query block fits its slices");
constexpr size_t SMEM_BYTES = (size_t)(QRES * BM + BN) * LDS * sizeof(uint32_t);

struct screen_args {
    gsb__topk_screen s;
    int64_t per_block; /* references per block (a multiple of BN) */
    int vec;           /* 16-byte loads: d % 4 == 0 */
};

/* TF32 and mma.sync need sm_80: older devices never launch the screen
 * (gsb__cuda_topk_screen_supported), their PTX traps. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define SCREEN_NO_TC 1
#endif

__device__ __forceinline__ uint32_t to_tf32(float x)
{
    uint32_t u = 0;
#ifndef SCREEN_NO_TC
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(u) : "f"(x));
#else
    (void)x;
    __trap();
#endif
    return u;
}

/* c += a b: a 16 x 8 (a0 row g col t, a1 row g+8 col t, a2 row g col t+4,
 * a3 row g+8 col t+4), b 8 x 8 (b0 row t col g, b1 row t+4 col g), c 16 x 8
 * (c0 row g col 2t, c1 row g col 2t+1, c2 row g+8 col 2t, c3 row g+8 col
 * 2t+1), g = lane / 4, t = lane % 4 */
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2])
{
#ifndef SCREEN_NO_TC
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)c, (void)a, (void)b;
    __trap();
#endif
}

/* Rows [r0, r0 + 128) (those below n) x columns [k0, k0 + 32) (those below
 * d) of M (n x d) into dst as TF32, zeros elsewhere.  The references stream
 * (read once a block: through L2 only, leaving L1 to the queries). */
__device__ __forceinline__ void load_slice(uint32_t (*dst)[LDS], const float *__restrict__ M,
                                           int64_t n, int64_t r0, int64_t d, int64_t k0,
                                           int vec, int tid)
{
    if (vec) {
        for (int e = tid; e < BM * (BK / 4); e += NT) {
            const int r = e >> 3, c = (e & 7) * 4;
            const int64_t row = r0 + r, col = k0 + c;
            float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
            if (row < n && col < d)
                x = __ldcg((const float4 *)(M + row * d + col));
            *(uint4 *)&dst[r][c] = make_uint4(to_tf32(x.x), to_tf32(x.y), to_tf32(x.z),
                                              to_tf32(x.w));
        }
    } else {
        for (int e = tid; e < BM * BK; e += NT) {
            const int r = e >> 5, c = e & 31;
            const int64_t row = r0 + r, col = k0 + c;
            dst[r][c] = to_tf32(row < n && col < d ? __ldcg(M + row * d + col) : 0.f);
        }
    }
}

__global__ void __launch_bounds__(NT, 2) screen_kernel(const __grid_constant__ screen_args a)
{
    extern __shared__ __align__(16) uint32_t screen_smem[];
    uint32_t(*As)[BM][LDS] = (uint32_t(*)[BM][LDS])screen_smem; /* QRES query slices */
    uint32_t(*Bs)[LDS] = (uint32_t(*)[LDS])(screen_smem + QRES * BM * LDS);
    __shared__ float tqs[BM];
    const gsb__topk_screen &s = a.s;
    if (s.abort && *s.abort)
        return; /* the whole block: before any barrier */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm = (warp & 1) * 64, wn = (warp >> 1) * 32;
    const int64_t qb0 = (int64_t)blockIdx.x * BM; /* first query of the block, in the chunk */
    const int64_t jb = s.j0 + (int64_t)blockIdx.y * a.per_block;
    const int64_t je = jb + a.per_block < s.j1 ? jb + a.per_block : s.j1;
    const float *Qc = s.Q + s.q_begin * s.d;

    for (int r = tid; r < BM; r += NT)
        tqs[r] = qb0 + r < s.nqc ? s.tq[qb0 + r] : 0.f;
    for (int ks = 0; ks * BK < s.d; ks++)
        load_slice(As[ks], Qc, s.nqc, qb0, s.d, ks * BK, a.vec, tid);

    for (int64_t c0 = jb; c0 < je; c0 += BN) {
        float acc[4][4][4];
#pragma unroll
        for (int mi = 0; mi < 4; mi++)
#pragma unroll
            for (int ni = 0; ni < 4; ni++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[mi][ni][e] = 0.f;
        for (int64_t k0 = 0; k0 < s.d; k0 += BK) {
            const uint32_t(*Aq)[LDS] = As[k0 / BK];
            __syncthreads(); /* the previous slice (and tile) is read */
            load_slice(Bs, s.R, je, c0, s.d, k0, a.vec, tid);
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < BK; kk += 8) {
                uint32_t af[4][4], bf[4][2];
#pragma unroll
                for (int mi = 0; mi < 4; mi++) {
                    const int r = wm + mi * 16 + g;
                    af[mi][0] = Aq[r][kk + t];
                    af[mi][1] = Aq[r + 8][kk + t];
                    af[mi][2] = Aq[r][kk + t + 4];
                    af[mi][3] = Aq[r + 8][kk + t + 4];
                }
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    const int c = wn + ni * 8 + g;
                    bf[ni][0] = Bs[c][kk + t];
                    bf[ni][1] = Bs[c][kk + t + 4];
                }
#pragma unroll
                for (int mi = 0; mi < 4; mi++)
#pragma unroll
                    for (int ni = 0; ni < 4; ni++)
                        mma_tf32(acc[mi][ni], af[mi], bf[ni]);
            }
        }
        /* the epilogue: the admission test, as the selection kernel's */
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int64_t j = c0 + wn + ni * 8 + 2 * t + e;
                if (j >= je)
                    continue;
                const float rbj = s.rb[j];
#pragma unroll
                for (int mi = 0; mi < 4; mi++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = wm + mi * 16 + g + 8 * h;
                        const int64_t q = qb0 + r;
                        /* NaN (overflow) is admitted: only a sure loser is turned away */
                        const float v = fmaf(acc[mi][ni][2 * h + e], -2.f, rbj);
                        if (q >= s.nqc || (s.exclude_self && j == s.q_begin + q) ||
                            v > tqs[r])
                            continue;
                        const int p = atomicAdd(&s.cnt[q], 1);
                        if (p < GSB_TOPK_SCREEN_CAP)
                            s.cand[q * GSB_TOPK_SCREEN_CAP + p] =
                                make_int2((int)j, __float_as_int(v));
                    }
            }
    }
}

} // namespace

int gsb__cuda_topk_screen_supported(const gsb__backend *be)
{
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                               gsb__cuda_ctx_of(be)->device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major >= 8;
}

int gsb__cuda_topk_screen(const gsb__backend *be, const gsb__topk_screen &s, cudaStream_t st)
{
    if (s.nqc <= 0 || s.j1 <= s.j0)
        return GSB_OK;
    if (s.d < 1 || s.d > GSB_TOPK_SCREEN_MAX_D)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "topk screen: d = %lld", (long long)s.d);
    const gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    screen_args a;
    a.s = s;
    a.vec = s.d % 4 == 0 && (uintptr_t)s.Q % 16 == 0 && (uintptr_t)s.R % 16 == 0;
    /* query blocks x reference slices: at least four blocks per SM, and at
     * most PER_BLOCK tiles a block (many short blocks: the last wave is short) */
    const int64_t gx = (s.nqc + BM - 1) / BM, tiles = (s.j1 - s.j0 + BN - 1) / BN;
    const int64_t want = 4 * (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 16);
    int64_t gy = (want + gx - 1) / gx;
    if (gy < (tiles + PER_BLOCK - 1) / PER_BLOCK)
        gy = (tiles + PER_BLOCK - 1) / PER_BLOCK;
    if (gy > tiles)
        gy = tiles;
    if (gy > 65535) /* the grid's y limit: longer blocks */
        gy = 65535;
    const int64_t per = (tiles + gy - 1) / gy;
    a.per_block = per * BN;
    gy = (tiles + per - 1) / per;
    CUDA_TRY(cudaFuncSetAttribute(screen_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)SMEM_BYTES));
    screen_kernel<<<dim3((unsigned)gx, (unsigned)gy), NT, SMEM_BYTES, st>>>(a);
    CUDA_TRY(cudaGetLastError());
    return GSB_OK;
}
