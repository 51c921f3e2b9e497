/*
 * cuda_tc_tile.cuh - the tensor-core side of the fused float32 distance
 * kernels (sm_80+): 3xTF32 dot products on mma.sync.m16n8k8, slices copied
 * to shared memory by cp.async, and the tile engine topk streams its
 * references through (cuda_topk.cu).  cuda_argmin_tc.cu runs its own loop
 * on the same primitives.
 *
 * 3xTF32: each float is split as hi = tf32(x), lo = tf32(x - hi), and x.y
 * accumulates lo_x hi_y + hi_x lo_y + hi_x hi_y in fp32 (lo lo is below
 * fp32's resolution): about fp32 FMA's accuracy at several times its rate.
 * A bound on the error that holds whatever rounding the tensor cores do:
 * |acc - x.y| <= (8 + 33 ceil(d / 8)) 2^-23 sum |x_i y_i|
 *               + 3 d 2^-126 + 3 sqrt(d) 2^-126 (||x|| + ||y||),
 * from the split (2^-20 sum |x_i y_i|), 3 ceil(d / 8) mma per dot product
 * each counted as 11 ulps of the running magnitude (truncated alignment of
 * 9 addends and a normalisation), products below fp32's normal range
 * flushed to zero, and subnormal operands (x_i, y_i or a lo part) flushed
 * to zero.  TC_SREL(d) is twice the relative factor plus room for the
 * callers' own roundings; TC_SABS(d) covers twice the absolute terms for
 * ||x||, ||y|| <= 1 (above that the last term is within TC_SREL's room,
 * as 2^-126 sqrt(d) (||x|| + ||y||) <= 2^-125 sqrt(d) (1 + ||x||^2 +
 * ||y||^2)).  The callers turn them into a certificate (argmin) or an
 * admission margin (topk, which ranks rows with tiny norms exactly
 * instead).
 *
 * Slices: 32 columns of d per stage, rows padded to 36 floats so that the
 * fragment loads (lane 4 g + t reads row g, column t) hit 32 distinct
 * banks; three stages, so copies run two slices ahead of the arithmetic
 * with one barrier per slice.  16-byte copies when both matrices are
 * 16-byte aligned with d % 4 == 0, else 4-byte copies; rows and columns
 * outside the matrices are zero-filled, which leaves dot products
 * unchanged.
 */
#ifndef GSB_CUDA_TC_TILE_CUH
#define GSB_CUDA_TC_TILE_CUH

#include <stdint.h>

namespace gsb_tc {

constexpr int BK = 32;      /* columns of d per slice */
constexpr int LDS = BK + 4; /* shared row stride */
constexpr int STAGES = 3;

/* The relative error factor of the header comment, doubled, plus 20 ulps. */
__host__ __device__ constexpr double TC_SREL(int64_t d)
{
    return (20.0 + 66.0 * (double)((d + 7) / 8)) * 0x1p-23;
}
/* The absolute terms (flushed products and operands), doubled, plus room:
 * 2 (3 d + 6 sqrt(d)) 2^-126 <= (6 d + 8) 2^-125. */
__host__ __device__ constexpr double TC_SABS(int64_t d)
{
    return (6.0 * (double)d + 8.0) * 0x1p-125;
}

/* Shared-memory bytes of the stages of a BM x BN tile. */
constexpr size_t stage_bytes(int bm, int bn)
{
    return (size_t)STAGES * (size_t)(bm + bn) * LDS * sizeof(float);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define GSB_TC_ARCH 1

__device__ __forceinline__ void cp_async4(float *dst, const float *src, bool valid)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src),
                 "r"(valid ? 4 : 0)
                 : "memory");
}

__device__ __forceinline__ void cp_async16(float *dst, const float *src, bool valid)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* x = hi + lo (+ what fp32 cannot resolve), both as tf32 operands */
__device__ __forceinline__ void split_tf32(float x, uint32_t &hi, uint32_t &lo)
{
    uint32_t h, l;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(h) : "f"(x));
    float r = x - __uint_as_float(h); /* exact: x and hi share the leading bits */
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(l) : "f"(r));
    hi = h;
    lo = l;
}

/* c += a b: a 16 x 8 (a0 row g col t, a1 row g+8 col t, a2 row g col t+4,
 * a3 row g+8 col t+4), b 8 x 8 (b0 row t col g, b1 row t+4 col g), c 16 x 8
 * (c0 row g col 2t, c1 row g col 2t+1, c2 row g+8 col 2t, c3 row g+8 col 2t+1),
 * g = lane / 4, t = lane % 4 */
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2])
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
        "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/*
 * Copy rows [r0, r0 + ROWS) x columns [k0, k0 + BK) of M (nrows x d) into
 * dst (ROWS x LDS), zeros outside M; NT threads.  Consecutive threads take
 * consecutive columns of a row, so a warp's copies coalesce.  vec: 16-byte
 * copies (M 16-byte aligned, d % 4 == 0).
 */
template <int ROWS, int NT>
__device__ __forceinline__ void load_slice(float (*dst)[LDS], const float *__restrict__ M,
                                           int64_t nrows, int64_t r0, int d, int k0, int tid,
                                           bool vec)
{
    if (vec) {
        constexpr int PER_ROW = BK / 4;
#pragma unroll
        for (int e = tid; e < ROWS * PER_ROW; e += NT) {
            int row = e / PER_ROW, q = (e % PER_ROW) * 4;
            int64_t gr = r0 + row;
            bool ok = gr < nrows && k0 + q < d; /* d % 4 == 0: all four or none */
            cp_async16(&dst[row][q], ok ? M + gr * d + k0 + q : M, ok);
        }
    } else {
#pragma unroll
        for (int e = tid; e < ROWS * BK; e += NT) {
            int row = e / BK, q = e % BK;
            int64_t gr = r0 + row;
            bool ok = gr < nrows && k0 + q < d;
            cp_async4(&dst[row][q], ok ? M + gr * d + k0 + q : M, ok);
        }
    }
}

/*
 * acc[j] += the 16 x 8 block (A rows ar.., B rows j * 8 + bc..) over one
 * slice's first `cols` columns (the rest is zero padding), 3xTF32.
 */
template <int NJ>
__device__ __forceinline__ void slice_mma(const float (*a)[LDS], const float (*b)[LDS], int ar,
                                          int bc, int g, int t, int cols, float (&acc)[NJ][4])
{
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
        if (kk >= cols)
            break;
        uint32_t ah[4], al[4];
        split_tf32(a[ar + g][kk + t], ah[0], al[0]);
        split_tf32(a[ar + g + 8][kk + t], ah[1], al[1]);
        split_tf32(a[ar + g][kk + t + 4], ah[2], al[2]);
        split_tf32(a[ar + g + 8][kk + t + 4], ah[3], al[3]);
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            uint32_t bh[2], bl[2];
            split_tf32(b[bc + j * 8 + g][kk + t], bh[0], bl[0]);
            split_tf32(b[bc + j * 8 + g][kk + t + 4], bh[1], bl[1]);
            mma_tf32(acc[j], al, bh);
            mma_tf32(acc[j], ah, bl);
            mma_tf32(acc[j], ah, bh);
        }
    }
}
#endif

/*
 * A topk tile: WM x WN warps, each 16 rows (queries) x NJ n8 tiles of
 * columns (references); BM x BN per block.  The same names as
 * gsb_dist::tile_cfg where topk uses them: a thread holds TM x TN values,
 * element (i, j) at tile row row_of(tid, i) and column col_of(tid, j); TX
 * threads share a row.  Its stages live in dynamic shared memory (more
 * than the 48 KiB of static), so smem is empty.
 */
template <int WM_, int WN_, int NJ_>
struct tc_cfg {
    typedef float type;
    static constexpr bool TENSOR = true;
    static constexpr int WM = WM_, WN = WN_, NJ = NJ_;
    static constexpr int BM = WM * 16, BN = WN * NJ * 8, NT = WM * WN * 32;
    static constexpr int TM = 2, TN = 2 * NJ, TX = 4 * WN;
    static constexpr size_t STAGE_BYTES = stage_bytes(BM, BN);
    struct smem {};
    __device__ static int row_of(int tid, int i)
    {
        return ((tid >> 5) / WN) * 16 + ((tid & 31) >> 2) + 8 * i;
    }
    __device__ static int col_of(int tid, int j)
    {
        return ((tid >> 5) % WN) * (NJ * 8) + (j >> 1) * 8 + 2 * (tid & 3) + (j & 1);
    }
};

/*
 * A stream of slices: A rows [a0, a0 + BM) against B tiles of BN rows
 * from b_first, ntiles of them, kc_n slices each, in order; issued runs
 * STAGES - 1 slices ahead of used.
 */
struct tc_stream {
    const float *A, *B;
    int64_t na, nb, a0, b_first;
    int d, kc_n;
    bool vec;
    int64_t total, issued, used;
};

#ifdef GSB_TC_ARCH
/* Issue the next slice of s (if any) into its stage; always one commit group. */
template <class C>
__device__ __forceinline__ void tc_issue(float *stages, tc_stream &s, int tid)
{
    if (s.issued < s.total) {
        int64_t tau = s.issued / s.kc_n;
        int kc = (int)(s.issued - tau * s.kc_n);
        float(*as)[LDS] =
            reinterpret_cast<float(*)[LDS]>(stages + (s.issued % STAGES) * (C::BM + C::BN) * LDS);
        load_slice<C::BM, C::NT>(as, s.A, s.na, s.a0, s.d, kc * BK, tid, s.vec);
        load_slice<C::BN, C::NT>(as + C::BM, s.B, s.nb, s.b_first + tau * C::BN, s.d, kc * BK,
                                 tid, s.vec);
    }
    s.issued++;
    cp_async_commit();
}
#endif

/* Start s and fetch its first slices (every thread of the block). */
template <class C>
__device__ __forceinline__ void tc_begin(float *stages, tc_stream &s, const float *A, int64_t na,
                                         int64_t a0, const float *B, int64_t nb,
                                         int64_t b_first, int64_t ntiles, int d, bool vec,
                                         int tid)
{
#ifdef GSB_TC_ARCH
    s.A = A;
    s.B = B;
    s.na = na;
    s.nb = nb;
    s.a0 = a0;
    s.b_first = b_first;
    s.d = d;
    s.kc_n = (d + BK - 1) / BK;
    s.vec = vec;
    s.total = ntiles * s.kc_n;
    s.issued = s.used = 0;
#pragma unroll
    for (int p = 0; p < STAGES - 1; p++)
        tc_issue<C>(stages, s, tid);
#endif
}

/*
 * acc[i][j] = A row (a0 + row_of(tid, i)) . B row (tile's first +
 * col_of(tid, j)) for the stream's next tile.  Every thread of the block
 * calls it (it synchronises the block); between calls the caller may use
 * the block as it likes, except the stages.
 */
template <class C>
__device__ __forceinline__ void tc_tile(float *stages, tc_stream &s, int tid,
                                        float (&acc)[C::TM][C::TN])
{
#ifdef GSB_TC_ARCH
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int ar = (warp / C::WN) * 16, bc = (warp % C::WN) * (C::NJ * 8);
    float f[C::NJ][4];
#pragma unroll
    for (int j = 0; j < C::NJ; j++)
        f[j][0] = f[j][1] = f[j][2] = f[j][3] = 0.f;
    for (int kc = 0; kc < s.kc_n; kc++) {
        cp_async_wait<STAGES - 2>(); /* this thread's copies of the slice have landed */
        __syncthreads();             /* everyone's have; the previous slice's reads are done */
        const float(*as)[LDS] =
            reinterpret_cast<const float(*)[LDS]>(stages + (s.used % STAGES) * (C::BM + C::BN) * LDS);
        tc_issue<C>(stages, s, tid);
        slice_mma<C::NJ>(as, as + C::BM, ar, bc, g, t, s.d - kc * BK, f);
        s.used++;
    }
#pragma unroll
    for (int i = 0; i < C::TM; i++)
#pragma unroll
        for (int j = 0; j < C::TN; j++)
            acc[i][j] = f[j >> 1][2 * i + (j & 1)];
#else
    __trap(); /* launched only on sm_80 and newer */
#endif
}

/* No copy may outlive the block. */
__device__ __forceinline__ void tc_end()
{
#ifdef GSB_TC_ARCH
    cp_async_wait<0>();
#endif
}

} // namespace gsb_tc

#endif
