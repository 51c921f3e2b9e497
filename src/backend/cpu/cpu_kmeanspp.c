/*
 * cpu_kmeanspp.c - the CPU backend's kmeanspp: greedy k-means++ (the
 * contract is in backend/backend.h; the GPU twin is cuda_kmeanspp.cu).
 *
 * The two twins share one shape so that they draw the same rows:
 *  - rows are grouped in fixed chunks of KPP_CHUNK; after each step one
 *    pass folds the winner into closest and sums w_i * closest_i per chunk;
 *  - a draw finds its chunk from the chunk sums, then its row by a scan
 *    inside the chunk (no n-long cumulative sum is ever stored);
 *  - the trials' potentials are summed per fixed block of rows, then the
 *    blocks in order.
 * Every sum runs in a fixed order that depends on the sizes only, so
 * results repeat bitwise whatever the number of threads.  Distances are
 * sums of squared differences in double through one non-inlined function,
 * so the distance a trial was scored with is bitwise the one folded into
 * closest when it wins.  Where the CPU has AVX2, that function and the
 * trials' loop use one AVX2 sequence instead (4 features a step: the same
 * operations in the same order in both, so again bitwise the same
 * distance; its order differs from the portable one's, within the twins'
 * tolerance).
 *
 * The file is a template: the first pass holds the dtype-independent code
 * and includes this file again with T = float and T = double.
 */
#ifndef GSB_CPU_KMEANSPP_BODY

#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_smalldots.h"
#include "backend/cpu/cpu_util.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KPP_X86 1
#include <immintrin.h>
#define KPP_AVX2 __attribute__((target("avx2,fma")))
#endif
#include "core/error.h"

/* Rows per chunk of the sampling sums (the GPU twin uses the same). */
#define KPP_CHUNK 2048
/* Most blocks of rows whose partial potentials are kept per step. */
#define KPP_MAX_BLOCKS 1024
/* Most candidates per step (the GPU twin keeps them in registers). */
#define KPP_MAX_TRIALS 64
/* Below this much work (rows x columns) a pass stays on one thread: a step of
 * a 5000 x 20 fit is ~0.1 ms of arithmetic, and on a busy machine waking a
 * second thread can take a scheduler slice (KMeans++ 5000 x 20 on the 2-core
 * VM: 15 ms with 2^16 here, against scikit-learn's 10). */
#define KPP_PAR_MIN ((int64_t)1 << 20)

/* What a fold does to closest before summing w * closest per chunk: set it
 * to D, lower it to D, or leave it (the distances D to row c), or take the
 * winning trial's min(closest, D) kept by the potentials' pass. */
enum { KPP_INIT, KPP_FOLD, KPP_SUMS, KPP_TAKE };
/* Most bytes of the trials' kept columns (n x trials doubles): with them the
 * fold reads 8 bytes a row instead of the row of X (KMeans++ 100k x 32 on
 * the 2-core VM: the fold's pass over X was a tenth of the fit). */
#define KPP_KEEP_BYTES ((int64_t)64 << 20)
int64_t gsb__cpu_kpp_keep_bytes = KPP_KEEP_BYTES;

typedef struct kpp_state {
    int64_t n, d, nb;
    int avx2;        /* the distances by the AVX2 sequence */
    const double *w; /* NULL: all ones */
    double *closest;
    double *chunk;   /* nb chunk sums of w_i * closest_i */
} kpp_state;

/* w_i * v; 0 for a zero weight even when v is infinite (a distance that
 * overflowed), so such rows never turn a sum into NaN. */
static inline double kpp_wd(const kpp_state *s, int64_t i, double v)
{
    if (!s->w)
        return v;
    return s->w[i] == 0.0 ? 0.0 : s->w[i] * v;
}

/*
 * The first row i with (sum of w * closest up to and including i) >= v, as
 * numpy's searchsorted(cumsum, v, side='left'); n - 1 when no row reaches
 * it; the chunk's last row when the chunk's sum reaches v but the running
 * sum inside it falls short by rounding.
 */
static int64_t kpp_draw(const kpp_state *s, double v)
{
    double base = 0.0;
    for (int64_t b = 0; b < s->nb; b++) {
        if (!(base + s->chunk[b] >= v)) {
            base += s->chunk[b];
            continue;
        }
        int64_t i0 = b * KPP_CHUNK, i1 = cpu_min64(i0 + KPP_CHUNK, s->n);
        double run = base;
        for (int64_t i = i0; i < i1; i++) {
            run += kpp_wd(s, i, s->closest[i]);
            if (run >= v)
                return i;
        }
        return i1 - 1;
    }
    return s->n - 1;
}

#define GSB_CPU_KMEANSPP_BODY
#define T float
#define SFX(name) name##_f32
#define T_IS_F64 0
#include "cpu_kmeanspp.c"
#undef T
#undef SFX
#undef T_IS_F64
#define T double
#define SFX(name) name##_f64
#define T_IS_F64 1
#include "cpu_kmeanspp.c"
#undef T
#undef SFX
#undef T_IS_F64
#undef GSB_CPU_KMEANSPP_BODY

int gsb__cpu_kmeanspp(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *w,
                      int64_t first, const double *u, int64_t steps, int64_t trials,
                      gsb__tensor *closest, double *pot, int64_t *chosen)
{
    (void)be;
    const char *op = "kmeanspp";
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    int64_t n = X->rows;
    if (n < 1)
        return gsb__err(GSB_EINTERNAL, "%s: X has no rows", op);
    if (w)
        GSB_TRY(cpu_check_vec(w, GSB_F64, n, op, "w"));
    GSB_TRY(cpu_check_vec(closest, GSB_F64, n, op, "closest"));
    if (trials < 1 || trials > KPP_MAX_TRIALS)
        return gsb__err(GSB_EINTERNAL, "%s: %lld trials, expected 1 to %d", op,
                        (long long)trials, KPP_MAX_TRIALS);
    if (steps < 0 || first >= n || !pot || (steps > 0 && (!u || !chosen)))
        return gsb__err(GSB_EINTERNAL, "%s: bad arguments (first %lld, steps %lld)", op,
                        (long long)first, (long long)steps);
    if (first < 0 && steps == 0)
        return GSB_OK;
    return X->dtype == GSB_F32
               ? kpp_run_f32(X, w ? w->data : NULL, first, u, steps, trials, closest, pot, chosen)
               : kpp_run_f64(X, w ? w->data : NULL, first, u, steps, trials, closest, pot,
                             chosen);
}

#else /* GSB_CPU_KMEANSPP_BODY: the dtype-dependent part, T and SFX defined */

#ifdef KPP_X86
/* 4 elements of p as doubles */
KPP_AVX2 static inline __m256d SFX(kpp_load4)(const T *p)
{
#if T_IS_F64
    return _mm256_loadu_pd(p);
#else
    return _mm256_cvtps_pd(_mm_loadu_ps(p));
#endif
}

/* The AVX2 distance: lanes of 4 features a step, added as ((0 + 2) + (1 +
 * 3)), then the remaining features in order (explicit operations: nothing
 * to contract or reorder). */
KPP_AVX2 static inline double SFX(kpp_sqdist_v)(const T *a, const T *b, int64_t d)
{
    __m256d acc = _mm256_setzero_pd();
    int64_t f = 0;
    for (; f + 4 <= d; f += 4) {
        __m256d t = _mm256_sub_pd(SFX(kpp_load4)(a + f), SFX(kpp_load4)(b + f));
        acc = _mm256_add_pd(acc, _mm256_mul_pd(t, t));
    }
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
    double s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; f < d; f++) {
        double t = (double)a[f] - (double)b[f];
        s += t * t;
    }
    return s;
}

KPP_AVX2 static __attribute__((noinline)) double SFX(kpp_sqdist_avx2)(const T *a, const T *b,
                                                                      int64_t d)
{
    return SFX(kpp_sqdist_v)(a, b, d);
}

/* D[t] = the distances of x to the trials' rows, by the same sequence: four
 * trials at a time share each load of x, each with its own accumulator, the
 * operations of each distance those of kpp_sqdist_v in the same order. */
KPP_AVX2 static __attribute__((noinline)) void SFX(kpp_trials_avx2)(const T *x, const T *X,
                                                                    const int64_t *cand,
                                                                    int64_t trials, int64_t d,
                                                                    double *D)
{
    int64_t t = 0;
    for (; t + 4 <= trials; t += 4) {
        const T *c0 = X + cand[t] * d, *c1 = X + cand[t + 1] * d, *c2 = X + cand[t + 2] * d,
                *c3 = X + cand[t + 3] * d;
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        int64_t f = 0;
        for (; f + 4 <= d; f += 4) {
            __m256d xv = SFX(kpp_load4)(x + f);
            __m256d e0 = _mm256_sub_pd(xv, SFX(kpp_load4)(c0 + f));
            __m256d e1 = _mm256_sub_pd(xv, SFX(kpp_load4)(c1 + f));
            __m256d e2 = _mm256_sub_pd(xv, SFX(kpp_load4)(c2 + f));
            __m256d e3 = _mm256_sub_pd(xv, SFX(kpp_load4)(c3 + f));
            a0 = _mm256_add_pd(a0, _mm256_mul_pd(e0, e0));
            a1 = _mm256_add_pd(a1, _mm256_mul_pd(e1, e1));
            a2 = _mm256_add_pd(a2, _mm256_mul_pd(e2, e2));
            a3 = _mm256_add_pd(a3, _mm256_mul_pd(e3, e3));
        }
        const __m256d acc[4] = {a0, a1, a2, a3};
        const T *cs[4] = {c0, c1, c2, c3};
        for (int q = 0; q < 4; q++) {
            __m128d h = _mm_add_pd(_mm256_castpd256_pd128(acc[q]),
                                   _mm256_extractf128_pd(acc[q], 1));
            double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
            for (int64_t g = f; g < d; g++) {
                double e = (double)x[g] - (double)cs[q][g];
                sum += e * e;
            }
            D[t + q] = sum;
        }
    }
    for (; t < trials; t++)
        D[t] = SFX(kpp_sqdist_v)(x, X + cand[t] * d, d);
}
#endif

/* One function for every distance of the op (see the top): not inlined, so
 * each call runs the same instructions in the same order. */
static __attribute__((noinline)) double SFX(kpp_sqdist)(const kpp_state *s, const T *a,
                                                         const T *b, int64_t d)
{
#ifdef KPP_X86
    if (s->avx2)
        return SFX(kpp_sqdist_avx2)(a, b, d);
#else
    (void)s;
#endif
    return SFX(cpu_sqdist)(a, b, d);
}

/* closest = D (KPP_INIT) or min(closest, D) (KPP_FOLD) with D the distances
 * to row c, or as it is (KPP_SUMS, c unused); then the chunk sums of
 * w * closest. */
static void SFX(kpp_fold)(kpp_state *s, const T *X, const T *c, const double *col, int mode)
{
#pragma omp parallel for if (s->n * s->d > KPP_PAR_MIN) schedule(static)
    for (int64_t b = 0; b < s->nb; b++) {
        int64_t i0 = b * KPP_CHUNK, i1 = cpu_min64(i0 + KPP_CHUNK, s->n);
        double sum = 0.0;
        for (int64_t i = i0; i < i1; i++) {
            if (mode == KPP_TAKE) {
                s->closest[i] = col[i];
            } else if (mode != KPP_SUMS) {
                double D = SFX(kpp_sqdist)(s, X + i * s->d, c, s->d);
                if (mode == KPP_INIT || D < s->closest[i])
                    s->closest[i] = D;
            }
            sum += kpp_wd(s, i, s->closest[i]);
        }
        s->chunk[b] = sum;
    }
}

/* pots[t] = sum_i w_i min(closest_i, D_it) for the candidate rows cand[t]:
 * per fixed block of rows into part (nblk x trials), then blocks in order;
 * cols (or NULL): min(closest_i, D_it) kept at cols[t * n + i]. */
static void SFX(kpp_potentials)(const kpp_state *s, const T *X, const int64_t *cand,
                                int64_t trials, int64_t nblk, double *part, double *pots,
                                double *cols)
{
#pragma omp parallel for if (s->n * s->d * trials > KPP_PAR_MIN) schedule(static)
    for (int64_t p = 0; p < nblk; p++) {
        int64_t i0 = s->n * p / nblk, i1 = s->n * (p + 1) / nblk;
        double acc[KPP_MAX_TRIALS];
        for (int64_t t = 0; t < trials; t++)
            acc[t] = 0.0;
        double D[KPP_MAX_TRIALS];
        for (int64_t i = i0; i < i1; i++) {
            const T *x = X + i * s->d;
            double ci = s->closest[i];
#ifdef KPP_X86
            if (s->avx2)
                SFX(kpp_trials_avx2)(x, X, cand, trials, s->d, D);
            else
#endif
                for (int64_t t = 0; t < trials; t++)
                    D[t] = SFX(kpp_sqdist)(s, x, X + cand[t] * s->d, s->d);
            for (int64_t t = 0; t < trials; t++) {
                double m = D[t] < ci ? D[t] : ci;
                if (cols)
                    cols[t * s->n + i] = m;
                acc[t] += kpp_wd(s, i, m);
            }
        }
        for (int64_t t = 0; t < trials; t++)
            part[p * trials + t] = acc[t];
    }
    for (int64_t t = 0; t < trials; t++) {
        double sum = 0.0;
        for (int64_t p = 0; p < nblk; p++)
            sum += part[p * trials + t];
        pots[t] = sum;
    }
}

static int SFX(kpp_run)(const gsb__tensor *Xt, const double *w, int64_t first, const double *u,
                        int64_t steps, int64_t trials, gsb__tensor *closest, double *pot,
                        int64_t *chosen)
{
    const T *X = Xt->data;
    kpp_state s = {Xt->rows, Xt->cols, (Xt->rows + KPP_CHUNK - 1) / KPP_CHUNK,
                   gsb__cpu_have_avx2_fma(), w, closest->data, NULL};
    int64_t nblk = cpu_min64(s.nb, KPP_MAX_BLOCKS);
    s.chunk = cpu_alloc(s.nb, sizeof(double));
    double *part = cpu_alloc(nblk * trials, sizeof(double));
    /* the trials' columns, where they fit (otherwise the fold reads X) */
    double *cols = steps > 0 && s.n * trials * (int64_t)sizeof(double) <= gsb__cpu_kpp_keep_bytes
                       ? cpu_alloc(s.n * trials, sizeof(double))
                       : NULL;
    if (!s.chunk || !part) {
        free(s.chunk);
        free(part);
        free(cols);
        return gsb__err(GSB_ENOMEM, "kmeanspp: out of memory for %lld partial sums",
                        (long long)(s.nb + nblk * trials));
    }
    if (first >= 0) {
        SFX(kpp_fold)(&s, X, X + first * s.d, NULL, KPP_INIT);
        double total = 0.0;
        for (int64_t b = 0; b < s.nb; b++)
            total += s.chunk[b];
        *pot = total;
    } else {
        SFX(kpp_fold)(&s, X, NULL, NULL, KPP_SUMS); /* continuing: the chunk sums of closest */
    }
    for (int64_t st = 0; st < steps; st++) {
        int64_t cand[KPP_MAX_TRIALS];
        double pots[KPP_MAX_TRIALS] = {0};
        for (int64_t t = 0; t < trials; t++)
            cand[t] = kpp_draw(&s, u[st * trials + t] * *pot);
        SFX(kpp_potentials)(&s, X, cand, trials, nblk, part, pots, cols);
        int64_t best = 0;
        for (int64_t t = 1; t < trials; t++)
            if (pots[t] < pots[best])
                best = t;
        chosen[st] = cand[best];
        *pot = pots[best];
        if (cols) /* bitwise what KPP_FOLD computes: the same distances, the same min */
            SFX(kpp_fold)(&s, X, NULL, cols + best * s.n, KPP_TAKE);
        else
            SFX(kpp_fold)(&s, X, X + cand[best] * s.d, NULL, KPP_FOLD);
    }
    free(s.chunk);
    free(part);
    free(cols);
    return GSB_OK;
}

#endif
