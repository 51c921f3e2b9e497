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
 * closest when it wins.
 *
 * The file is a template: the first pass holds the dtype-independent code
 * and includes this file again with T = float and T = double.
 */
#ifndef GSB_CPU_KMEANSPP_BODY

#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
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
 * to D, lower it to D, or leave it (the distances D to row c). */
enum { KPP_INIT, KPP_FOLD, KPP_SUMS };

typedef struct kpp_state {
    int64_t n, d, nb;
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
#include "cpu_kmeanspp.c"
#undef T
#undef SFX
#define T double
#define SFX(name) name##_f64
#include "cpu_kmeanspp.c"
#undef T
#undef SFX
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

/* One function for every distance of the op (see the top): not inlined, so
 * each call runs the same instructions in the same order. */
static __attribute__((noinline)) double SFX(kpp_sqdist)(const T *a, const T *b, int64_t d)
{
    return SFX(cpu_sqdist)(a, b, d);
}

/* closest = D (KPP_INIT) or min(closest, D) (KPP_FOLD) with D the distances
 * to row c, or as it is (KPP_SUMS, c unused); then the chunk sums of
 * w * closest. */
static void SFX(kpp_fold)(kpp_state *s, const T *X, const T *c, int mode)
{
#pragma omp parallel for if (s->n * s->d > KPP_PAR_MIN) schedule(static)
    for (int64_t b = 0; b < s->nb; b++) {
        int64_t i0 = b * KPP_CHUNK, i1 = cpu_min64(i0 + KPP_CHUNK, s->n);
        double sum = 0.0;
        for (int64_t i = i0; i < i1; i++) {
            if (mode != KPP_SUMS) {
                double D = SFX(kpp_sqdist)(X + i * s->d, c, s->d);
                if (mode == KPP_INIT || D < s->closest[i])
                    s->closest[i] = D;
            }
            sum += kpp_wd(s, i, s->closest[i]);
        }
        s->chunk[b] = sum;
    }
}

/* pots[t] = sum_i w_i min(closest_i, D_it) for the candidate rows cand[t]:
 * per fixed block of rows into part (nblk x trials), then blocks in order. */
static void SFX(kpp_potentials)(const kpp_state *s, const T *X, const int64_t *cand,
                                int64_t trials, int64_t nblk, double *part, double *pots)
{
#pragma omp parallel for if (s->n * s->d * trials > KPP_PAR_MIN) schedule(static)
    for (int64_t p = 0; p < nblk; p++) {
        int64_t i0 = s->n * p / nblk, i1 = s->n * (p + 1) / nblk;
        double acc[KPP_MAX_TRIALS];
        for (int64_t t = 0; t < trials; t++)
            acc[t] = 0.0;
        for (int64_t i = i0; i < i1; i++) {
            const T *x = X + i * s->d;
            double ci = s->closest[i];
            for (int64_t t = 0; t < trials; t++) {
                double D = SFX(kpp_sqdist)(x, X + cand[t] * s->d, s->d);
                acc[t] += kpp_wd(s, i, D < ci ? D : ci);
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
    kpp_state s = {Xt->rows, Xt->cols, (Xt->rows + KPP_CHUNK - 1) / KPP_CHUNK, w,
                   closest->data, NULL};
    int64_t nblk = cpu_min64(s.nb, KPP_MAX_BLOCKS);
    s.chunk = cpu_alloc(s.nb, sizeof(double));
    double *part = cpu_alloc(nblk * trials, sizeof(double));
    if (!s.chunk || !part) {
        free(s.chunk);
        free(part);
        return gsb__err(GSB_ENOMEM, "kmeanspp: out of memory for %lld partial sums",
                        (long long)(s.nb + nblk * trials));
    }
    if (first >= 0) {
        SFX(kpp_fold)(&s, X, X + first * s.d, KPP_INIT);
        double total = 0.0;
        for (int64_t b = 0; b < s.nb; b++)
            total += s.chunk[b];
        *pot = total;
    } else {
        SFX(kpp_fold)(&s, X, NULL, KPP_SUMS); /* continuing: the chunk sums of closest */
    }
    for (int64_t st = 0; st < steps; st++) {
        int64_t cand[KPP_MAX_TRIALS];
        double pots[KPP_MAX_TRIALS] = {0};
        for (int64_t t = 0; t < trials; t++)
            cand[t] = kpp_draw(&s, u[st * trials + t] * *pot);
        SFX(kpp_potentials)(&s, X, cand, trials, nblk, part, pots);
        int64_t best = 0;
        for (int64_t t = 1; t < trials; t++)
            if (pots[t] < pots[best])
                best = t;
        chosen[st] = cand[best];
        *pot = pots[best];
        SFX(kpp_fold)(&s, X, X + cand[best] * s.d, KPP_FOLD);
    }
    free(s.chunk);
    free(part);
    return GSB_OK;
}

#endif
