/*
 * cpu_smalldots.c - dot products of a block of rows with a few centres
 * (argmin_sqdist's tile: KMeans' E-step and predict), by AVX2 + FMA where
 * the CPU has them.
 *
 * Why not BLAS: the tile is thin (k columns, here up to 64) and the
 * distro's OpenBLAS 0.3.21 (DYNAMIC_ARCH) takes CPUs it does not know for
 * Prescott and runs SSE3 kernels on them: on the 2-core VM (an AVX-512
 * Xeon) its sgemm did a 100k x 32 by 20 product in 5.3 ms against 1.8 ms
 * for its own SkylakeX kernel, and that product is most of a Lloyd
 * iteration.  This kernel keeps 4 rows x up to 24 (float) or 12 (double)
 * centres in registers, one broadcast and one FMA per element, with the
 * centres transposed and zero-padded once per call (gsb__cpu_smalldots_pack)
 * so each row element meets contiguous centre coordinates.  Each dot product
 * is accumulated in X's dtype in feature order, whatever the blocking: the
 * tile does not depend on the row blocks or the thread count.
 *
 * Where the CPU has AVX-512F the same kernel runs on 64-byte registers
 * (each tile element is the same FMA chain, so the same bits).
 *
 * Without AVX2 + FMA, or for more than 64 centres (or packed centres that
 * would not stay in L2), gsb__cpu_smalldots_kp returns 0 and callers keep
 * their GEMM.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_smalldots.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SMALLDOTS_X86 1
#include <immintrin.h>
#endif

/* Most bytes of packed centres (d x kp): they are re-read for every row
 * block, so they must stay in a core's L2. */
#define SMALLDOTS_MAX_PACKED ((int64_t)256 << 10)
/* Most padded centres: the argmin gathers one compare bit per centre into a
 * 64-bit word. */
#define SD_ARGMIN_MAX_KP 64

/* GSB_CPU_NO_AVX2=1 in the environment: as if the CPU had no AVX2 (the
 * tests run the portable paths so, ctest's *_noavx2 entries). */
int gsb__cpu_have_avx2_fma(void)
{
#ifdef SMALLDOTS_X86
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *off = getenv("GSB_CPU_NO_AVX2");
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            !(off && *off && strcmp(off, "0") != 0);
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return 0;
#endif
}

/* AVX-512F as well (then the kernel's registers are 64 bytes);
 * GSB_CPU_NO_AVX512=1: as if not (ctest's *_noavx512 entries). */
static int have_avx512(void)
{
#ifdef SMALLDOTS_X86
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *off = getenv("GSB_CPU_NO_AVX512");
        v = gsb__cpu_have_avx2_fma() && __builtin_cpu_supports("avx512f") &&
            !(off && *off && strcmp(off, "0") != 0);
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return 0;
#endif
}

int64_t gsb__cpu_smalldots_kp(int64_t k, int64_t d, size_t esize)
{
    /* one register holds 32 (AVX2) or 64 (AVX-512) bytes of centres */
    int64_t lanes = (int64_t)((have_avx512() ? 64 : 32) / esize);
    int64_t kp = (k + lanes - 1) / lanes * lanes;
    if (!gsb__cpu_have_avx2_fma() || k < 1 || d < 1 || kp > SD_ARGMIN_MAX_KP ||
        kp * d * (int64_t)esize > SMALLDOTS_MAX_PACKED)
        return 0;
    return kp;
}

void gsb__cpu_smalldots_pack_f32(const float *C, int64_t k, int64_t d, int64_t kp, float *ct)
{
    memset(ct, 0, (size_t)(kp * d) * sizeof(float));
    for (int64_t c = 0; c < k; c++)
        for (int64_t j = 0; j < d; j++)
            ct[j * kp + c] = C[c * d + j];
}

void gsb__cpu_smalldots_pack_f64(const double *C, int64_t k, int64_t d, int64_t kp, double *ct)
{
    memset(ct, 0, (size_t)(kp * d) * sizeof(double));
    for (int64_t c = 0; c < k; c++)
        for (int64_t j = 0; j < d; j++)
            ct[j * kp + c] = C[c * d + j];
}

#ifdef SMALLDOTS_X86

#define SD_TARGET __attribute__((target("avx2,fma")))
#define SD_TARGET512 __attribute__((target("avx512f")))

/*
 * One kernel per (dtype, register count NV): rows [r0, r0 + R) (R = 4, or
 * 1 for the last rows) against centre columns [c0, c0 + NV * lanes) of the
 * packed ct, into tile (row stride kp).  Written as a macro so that NV and
 * R are constants and the accumulators stay in registers.
 */
#define SD_KERNEL(TGT, W, SUF, T, V, ZERO, SET1, LOAD, STORE, FMA, NV)                       \
    TGT static void sd_##SUF##_nv##NV(const T *X, int64_t rows, int64_t d, const T *ct,       \
                                      int64_t kp, int64_t c0, T *tile)                        \
    {                                                                                         \
        const int lanes = (int)(W / sizeof(T));                                               \
        int64_t r = 0;                                                                        \
        for (; r + 4 <= rows; r += 4) {                                                       \
            V acc[4][NV];                                                                     \
            for (int q = 0; q < 4; q++)                                                       \
                for (int v = 0; v < NV; v++)                                                  \
                    acc[q][v] = ZERO();                                                       \
            const T *x = X + r * d;                                                           \
            for (int64_t j = 0; j < d; j++) {                                                 \
                const T *cj = ct + j * kp + c0;                                               \
                V cv[NV];                                                                     \
                for (int v = 0; v < NV; v++)                                                  \
                    cv[v] = LOAD(cj + v * lanes);                                             \
                for (int q = 0; q < 4; q++) {                                                 \
                    V b = SET1(x[q * d + j]);                                                 \
                    for (int v = 0; v < NV; v++)                                              \
                        acc[q][v] = FMA(b, cv[v], acc[q][v]);                                 \
                }                                                                             \
            }                                                                                 \
            for (int q = 0; q < 4; q++)                                                       \
                for (int v = 0; v < NV; v++)                                                  \
                    STORE(tile + (r + q) * kp + c0 + v * lanes, acc[q][v]);                   \
        }                                                                                     \
        for (; r < rows; r++) {                                                               \
            V acc[NV];                                                                        \
            for (int v = 0; v < NV; v++)                                                      \
                acc[v] = ZERO();                                                              \
            const T *x = X + r * d;                                                           \
            for (int64_t j = 0; j < d; j++) {                                                 \
                V b = SET1(x[j]);                                                             \
                for (int v = 0; v < NV; v++)                                                  \
                    acc[v] = FMA(b, LOAD(ct + j * kp + c0 + v * lanes), acc[v]);              \
            }                                                                                 \
            for (int v = 0; v < NV; v++)                                                      \
                STORE(tile + r * kp + c0 + v * lanes, acc[v]);                                \
        }                                                                                     \
    }

#define SD_KERNELS(TGT, W, SUF, T, V, ZERO, SET1, LOAD, STORE, FMA)                          \
    SD_KERNEL(TGT, W, SUF, T, V, ZERO, SET1, LOAD, STORE, FMA, 1)                             \
    SD_KERNEL(TGT, W, SUF, T, V, ZERO, SET1, LOAD, STORE, FMA, 2)                             \
    SD_KERNEL(TGT, W, SUF, T, V, ZERO, SET1, LOAD, STORE, FMA, 3)                             \
    TGT static void sd_##SUF(const T *X, int64_t rows, int64_t d, const T *ct, int64_t kp,    \
                             T *tile)                                                         \
    {                                                                                         \
        const int64_t lanes = (int64_t)(W / sizeof(T));                                       \
        for (int64_t c0 = 0; c0 < kp;) {                                                      \
            int64_t nv = (kp - c0) / lanes;                                                   \
            if (nv >= 3) {                                                                    \
                sd_##SUF##_nv3(X, rows, d, ct, kp, c0, tile);                                 \
                c0 += 3 * lanes;                                                              \
            } else if (nv == 2) {                                                             \
                sd_##SUF##_nv2(X, rows, d, ct, kp, c0, tile);                                 \
                c0 += 2 * lanes;                                                              \
            } else {                                                                          \
                sd_##SUF##_nv1(X, rows, d, ct, kp, c0, tile);                                 \
                c0 += lanes;                                                                  \
            }                                                                                 \
        }                                                                                     \
    }

SD_KERNELS(SD_TARGET, 32, f32, float, __m256, _mm256_setzero_ps, _mm256_set1_ps,
           _mm256_loadu_ps, _mm256_storeu_ps, _mm256_fmadd_ps)
SD_KERNELS(SD_TARGET, 32, f64, double, __m256d, _mm256_setzero_pd, _mm256_set1_pd,
           _mm256_loadu_pd, _mm256_storeu_pd, _mm256_fmadd_pd)
/* AVX-512: the same FMA chain per element (so bitwise the same tile), 16
 * floats or 8 doubles a register: fewer padded lanes and instructions */
SD_KERNELS(SD_TARGET512, 64, f32x, float, __m512, _mm512_setzero_ps, _mm512_set1_ps,
           _mm512_loadu_ps, _mm512_storeu_ps, _mm512_fmadd_ps)
SD_KERNELS(SD_TARGET512, 64, f64x, double, __m512d, _mm512_setzero_pd, _mm512_set1_pd,
           _mm512_loadu_pd, _mm512_storeu_pd, _mm512_fmadd_pd)

/* 4 floats or 4 doubles of p as doubles */
SD_TARGET static inline __m256d sd_load4_f32(const float *p)
{
    return _mm256_cvtps_pd(_mm_loadu_ps(p));
}
SD_TARGET static inline __m256d sd_load4_f64(const double *p) { return _mm256_loadu_pd(p); }

/* The lanes of v added as ((v0 + v2) + (v1 + v3)). */
SD_TARGET static inline double sd_hsum(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/*
 * Per tile row: the first j < k with the least cn[j] - 2 t[j] in double, and
 * the squared distance to that centre computed directly in double (4
 * features a step, lanes added as ((0 + 2) + (1 + 3)), then the rest in
 * order).  The least value first (a chain of vector minima), then the
 * first j holding it, from the compare masks gathered into one word: the
 * labels of a strict-< scan over j, without a data-dependent branch (a
 * mispredicted one per row cost more than the arithmetic, and stopped the
 * next rows from overlapping).  cnp is ||c||^2 padded to kp with +inf, so
 * padding never wins; a NaN value is passed over (no label then: 0).
 */
#define SD_ARGMIN(SUF, T)                                                                     \
    SD_TARGET static void sd_argmin_##SUF(const T *tile, int64_t rows, int64_t kp, int64_t k,  \
                                          const double *cnp, const T *X, int64_t d,           \
                                          const double *Cd, int32_t *labels, T *mind)         \
    {                                                                                         \
        const __m256d two = _mm256_set1_pd(2.0);                                              \
        const int64_t k4 = (k + 3) / 4 * 4; /* <= kp: the padding past it is never read */    \
        double vb[SD_ARGMIN_MAX_KP] __attribute__((aligned(32)));                            \
        for (int64_t r = 0; r < rows; r++) {                                                  \
            const T *t = tile + r * kp;                                                       \
            __m256d m = _mm256_set1_pd(__builtin_inf());                                      \
            for (int64_t j = 0; j < k4; j += 4) {                                             \
                __m256d v = _mm256_sub_pd(_mm256_loadu_pd(cnp + j),                           \
                                          _mm256_mul_pd(two, sd_load4_##SUF(t + j)));         \
                _mm256_store_pd(vb + j, v);                                                   \
                m = _mm256_min_pd(v, m);                                                      \
            }                                                                                 \
            __m128d h = _mm_min_pd(_mm256_castpd256_pd128(m), _mm256_extractf128_pd(m, 1));   \
            h = _mm_min_pd(h, _mm_unpackhi_pd(h, h));                                         \
            __m256d mb = _mm256_broadcastsd_pd(h);                                            \
            uint64_t bits = 0;                                                                \
            for (int64_t j = 0; j < k4; j += 4)                                               \
                bits |= (uint64_t)_mm256_movemask_pd(                                         \
                            _mm256_cmp_pd(_mm256_load_pd(vb + j), mb, _CMP_EQ_OQ))            \
                        << j;                                                                 \
            int64_t best = bits ? __builtin_ctzll(bits) : 0;                                  \
            const T *x = X + r * d;                                                           \
            const double *c = Cd + best * d;                                                  \
            __m256d acc = _mm256_setzero_pd();                                                \
            int64_t f = 0;                                                                    \
            for (; f + 4 <= d; f += 4) {                                                      \
                __m256d diff = _mm256_sub_pd(sd_load4_##SUF(x + f), _mm256_loadu_pd(c + f));  \
                acc = _mm256_add_pd(acc, _mm256_mul_pd(diff, diff));                          \
            }                                                                                 \
            double s = sd_hsum(acc);                                                          \
            for (; f < d; f++) {                                                              \
                double diff = (double)x[f] - c[f];                                            \
                s += diff * diff;                                                             \
            }                                                                                 \
            labels[r] = (int32_t)best;                                                        \
            mind[r] = (T)s;                                                                   \
        }                                                                                     \
    }

SD_ARGMIN(f32, float)
SD_ARGMIN(f64, double)

/*
 * Lloyd's M-step for rows already labelled: acc[lab_r] (d doubles) += w_r
 * x_r, cnt[lab_r] += w_r and *dist += w_r mind_r, rows in order (w NULL:
 * unit weights, added without the multiply: the same bits).  Each element's
 * additions are those of a scalar loop in the same order, 4 elements a step.
 */
#define SD_ACCUM(SUF, T)                                                                      \
    SD_TARGET static void sd_accum_##SUF(const T *X, int64_t rows, int64_t d,                 \
                                         const int32_t *lab, const double *w, const T *mind,  \
                                         double *acc, double *cnt, double *dist)              \
    {                                                                                         \
        double ds = *dist;                                                                    \
        for (int64_t r = 0; r < rows; r++) {                                                  \
            double wi = w ? w[r] : 1.0;                                                       \
            double *dst = acc + (int64_t)lab[r] * d;                                          \
            const T *x = X + r * d;                                                           \
            int64_t f = 0;                                                                    \
            if (w) {                                                                          \
                __m256d wv = _mm256_set1_pd(wi);                                              \
                for (; f + 4 <= d; f += 4)                                                    \
                    _mm256_storeu_pd(dst + f,                                                 \
                                     _mm256_add_pd(_mm256_loadu_pd(dst + f),                  \
                                                   _mm256_mul_pd(wv, sd_load4_##SUF(x + f)))); \
            } else {                                                                          \
                for (; f + 4 <= d; f += 4)                                                    \
                    _mm256_storeu_pd(dst + f, _mm256_add_pd(_mm256_loadu_pd(dst + f),         \
                                                            sd_load4_##SUF(x + f)));          \
            }                                                                                 \
            for (; f < d; f++)                                                                \
                dst[f] += wi * (double)x[f];                                                  \
            cnt[lab[r]] += wi;                                                                \
            ds += wi * (double)mind[r];                                                       \
        }                                                                                     \
        *dist = ds;                                                                           \
    }

SD_ACCUM(f32, float)
SD_ACCUM(f64, double)

void gsb__cpu_smalldots_accum_f32(const float *X, int64_t rows, int64_t d, const int32_t *lab,
                                  const double *w, const float *mind, double *acc, double *cnt,
                                  double *dist)
{
    sd_accum_f32(X, rows, d, lab, w, mind, acc, cnt, dist);
}

void gsb__cpu_smalldots_accum_f64(const double *X, int64_t rows, int64_t d, const int32_t *lab,
                                  const double *w, const double *mind, double *acc, double *cnt,
                                  double *dist)
{
    sd_accum_f64(X, rows, d, lab, w, mind, acc, cnt, dist);
}

void gsb__cpu_smalldots_f32(const float *X, int64_t rows, int64_t d, const float *ct,
                            int64_t kp, float *tile)
{
    if (have_avx512())
        sd_f32x(X, rows, d, ct, kp, tile);
    else
        sd_f32(X, rows, d, ct, kp, tile);
}

void gsb__cpu_smalldots_f64(const double *X, int64_t rows, int64_t d, const double *ct,
                            int64_t kp, double *tile)
{
    if (have_avx512())
        sd_f64x(X, rows, d, ct, kp, tile);
    else
        sd_f64(X, rows, d, ct, kp, tile);
}

void gsb__cpu_smalldots_argmin_f32(const float *tile, int64_t rows, int64_t kp, int64_t k,
                                   const double *cnp, const float *X, int64_t d, const double *Cd,
                                   int32_t *labels, float *mind)
{
    sd_argmin_f32(tile, rows, kp, k, cnp, X, d, Cd, labels, mind);
}

void gsb__cpu_smalldots_argmin_f64(const double *tile, int64_t rows, int64_t kp, int64_t k,
                                   const double *cnp, const double *X, int64_t d,
                                   const double *Cd, int32_t *labels, double *mind)
{
    sd_argmin_f64(tile, rows, kp, k, cnp, X, d, Cd, labels, mind);
}

#else /* not x86-64: gsb__cpu_smalldots_kp is 0, so these are never called */

void gsb__cpu_smalldots_f32(const float *X, int64_t rows, int64_t d, const float *ct,
                            int64_t kp, float *tile)
{
    (void)X, (void)rows, (void)d, (void)ct, (void)kp, (void)tile;
}

void gsb__cpu_smalldots_f64(const double *X, int64_t rows, int64_t d, const double *ct,
                            int64_t kp, double *tile)
{
    (void)X, (void)rows, (void)d, (void)ct, (void)kp, (void)tile;
}

void gsb__cpu_smalldots_argmin_f32(const float *tile, int64_t rows, int64_t kp, int64_t k,
                                   const double *cnp, const float *X, int64_t d, const double *Cd,
                                   int32_t *labels, float *mind)
{
    (void)tile, (void)rows, (void)kp, (void)k, (void)cnp, (void)X, (void)d, (void)Cd, (void)labels,
        (void)mind;
}

void gsb__cpu_smalldots_argmin_f64(const double *tile, int64_t rows, int64_t kp, int64_t k,
                                   const double *cnp, const double *X, int64_t d,
                                   const double *Cd, int32_t *labels, double *mind)
{
    (void)tile, (void)rows, (void)kp, (void)k, (void)cnp, (void)X, (void)d, (void)Cd, (void)labels,
        (void)mind;
}


void gsb__cpu_smalldots_accum_f32(const float *X, int64_t rows, int64_t d, const int32_t *lab,
                                  const double *w, const float *mind, double *acc, double *cnt,
                                  double *dist)
{
    (void)X, (void)rows, (void)d, (void)lab, (void)w, (void)mind, (void)acc, (void)cnt,
        (void)dist;
}

void gsb__cpu_smalldots_accum_f64(const double *X, int64_t rows, int64_t d, const int32_t *lab,
                                  const double *w, const double *mind, double *acc, double *cnt,
                                  double *dist)
{
    (void)X, (void)rows, (void)d, (void)lab, (void)w, (void)mind, (void)acc, (void)cnt,
        (void)dist;
}

#endif
