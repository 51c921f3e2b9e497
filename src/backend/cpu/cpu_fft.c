/*
 * cpu_fft.c - mixed-radix complex FFT in double, 1-D and 2-D (see cpu_fft.h
 * for why the CPU backend has its own).
 *
 * 1-D: recursive decimation in time over the factors of n (4s first, then
 * 2, 3, 5): the transform of length p m is p transforms of length m (every
 * p-th input), then m butterflies of radix p, each input scaled by its
 * twiddle first.  Radix 2 and 4 have their own butterflies, 3 and 5 a
 * generic one.  Twiddles e^(-2 pi i k / n) come from a table computed once
 * per length (cos and sin evaluated directly: accurate to an ulp); the
 * inverse conjugates them.  Out of place: the input is copied to scratch.
 * 2-D: 1-D transforms of the rows, then of the columns (copied out in blocks
 * of COL_BLOCK columns, which share cache lines, and back), over OpenMP
 * threads.
 */
#include "backend/cpu/cpu_fft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_util.h"

int gsb__cpu_fft_init(gsb__cpu_fft *f, int64_t n)
{
    memset(f, 0, sizeof *f);
    int64_t rest = n;
    while (rest > 1 && f->nf < GSB__CPU_FFT_MAX_FACTORS) {
        int p = rest % 4 == 0 ? 4 : rest % 2 == 0 ? 2 : rest % 3 == 0 ? 3 : rest % 5 == 0 ? 5 : 0;
        if (!p)
            break;
        rest /= p;
        f->factor[2 * f->nf] = p;
        f->factor[2 * f->nf + 1] = rest;
        f->nf++;
    }
    if (n < 1 || rest != 1)
        return gsb__err(GSB_EINTERNAL, "fft: length %lld has a prime factor above 5",
                        (long long)n);
    f->n = n;
    f->tw = cpu_alloc(2 * n, sizeof *f->tw);
    if (!f->tw)
        return gsb__err(GSB_ENOMEM, "fft: out of host memory");
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t k = 0; k < n; k++) {
        double t = two_pi * (double)k / (double)n;
        f->tw[2 * k] = cos(t);
        f->tw[2 * k + 1] = -sin(t);
    }
    return GSB_OK;
}

void gsb__cpu_fft_free(gsb__cpu_fft *f)
{
    free(f->tw);
    memset(f, 0, sizeof *f);
}

/* complex helpers on interleaved pairs */
typedef struct cpx {
    double r, i;
} cpx;

static inline cpx cmul(cpx a, cpx b) { return (cpx){a.r * b.r - a.i * b.i, a.r * b.i + a.i * b.r}; }

/* twiddle k (< n: every caller's index is) of the table, conjugated for the inverse */
static inline cpx twiddle(const gsb__cpu_fft *f, int64_t k, double sign)
{
    return (cpx){f->tw[2 * k], sign * f->tw[2 * k + 1]};
}

static inline cpx at(const double *x, int64_t k) { return (cpx){x[2 * k], x[2 * k + 1]}; }

static inline void put(double *x, int64_t k, cpx v)
{
    x[2 * k] = v.r;
    x[2 * k + 1] = v.i;
}

/* m butterflies of radix p over out (p m values, output of the p sub-transforms
 * of length m, each laid out contiguously); fstride = n / (p m) */
static void butterfly(const gsb__cpu_fft *f, double *out, int p, int64_t m, int64_t fstride,
                      double sign)
{
    if (p == 2) {
        for (int64_t k = 0; k < m; k++) {
            cpx a = at(out, k), b = cmul(at(out, k + m), twiddle(f, k * fstride, sign));
            put(out, k, (cpx){a.r + b.r, a.i + b.i});
            put(out, k + m, (cpx){a.r - b.r, a.i - b.i});
        }
        return;
    }
    if (p == 4) {
        for (int64_t k = 0; k < m; k++) {
            cpx a = at(out, k), b = cmul(at(out, k + m), twiddle(f, k * fstride, sign));
            cpx c = cmul(at(out, k + 2 * m), twiddle(f, 2 * k * fstride, sign));
            cpx d = cmul(at(out, k + 3 * m), twiddle(f, 3 * k * fstride, sign));
            cpx s0 = {a.r + c.r, a.i + c.i}, s1 = {a.r - c.r, a.i - c.i};
            cpx s2 = {b.r + d.r, b.i + d.i}, s3 = {b.r - d.r, b.i - d.i};
            /* -i (s3) forward, +i (s3) inverse */
            cpx r3 = {sign * s3.i, -sign * s3.r};
            put(out, k, (cpx){s0.r + s2.r, s0.i + s2.i});
            put(out, k + m, (cpx){s1.r + r3.r, s1.i + r3.i});
            put(out, k + 2 * m, (cpx){s0.r - s2.r, s0.i - s2.i});
            put(out, k + 3 * m, (cpx){s1.r - r3.r, s1.i - r3.i});
        }
        return;
    }
    /* radix 3 and 5: the p-point DFT of the twiddled inputs */
    cpx x[5];
    int64_t root = f->n / p; /* e^(-2 pi i / p) is twiddle `root` */
    for (int64_t k = 0; k < m; k++) {
        for (int q = 0; q < p; q++)
            x[q] = cmul(at(out, k + q * m), twiddle(f, q * k * fstride, sign));
        for (int u = 0; u < p; u++) {
            cpx s = x[0];
            for (int q = 1; q < p; q++) {
                cpx t = cmul(x[q], twiddle(f, (int64_t)(u * q % p) * root, sign));
                s.r += t.r;
                s.i += t.i;
            }
            put(out, k + u * m, s);
        }
    }
}

/* the transform of in (every fstride-th value, fac's length) into out */
static void work(const gsb__cpu_fft *f, double *out, const double *in, int64_t fstride,
                 const int64_t *fac, double sign)
{
    int p = (int)fac[0];
    int64_t m = fac[1];
    if (m == 1) {
        for (int q = 0; q < p; q++)
            put(out, q, at(in, q * fstride));
    } else {
        for (int q = 0; q < p; q++)
            work(f, out + 2 * q * m, in + 2 * q * fstride, fstride * p, fac + 2, sign);
    }
    butterfly(f, out, p, m, fstride, sign);
}

void gsb__cpu_fft_1d(const gsb__cpu_fft *f, double *x, int inverse, double *scratch)
{
    if (f->n < 2)
        return;
    memcpy(scratch, x, (size_t)(2 * f->n) * sizeof *x);
    work(f, x, scratch, 1, f->factor, inverse ? -1.0 : 1.0);
}

/* the 1-D transforms of rows [0, rows) */
static int fft_rows(const gsb__cpu_fft *f, double *x, int inverse, int64_t rows)
{
    int64_t n = f->n;
    int failed = 0;
#pragma omp parallel if (rows * n >= 65536)
    {
        double *scratch = cpu_alloc(2 * n, sizeof *scratch);
        if (!scratch) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            if (scratch)
                gsb__cpu_fft_1d(f, x + 2 * r * n, inverse, scratch);
        free(scratch);
    }
    return failed ? gsb__err(GSB_ENOMEM, "fft: out of host memory") : GSB_OK;
}

/* Columns per gather: a row's COL_BLOCK adjacent complex values share cache
 * lines, so copying a block of columns out and back reads memory in lines,
 * not one element per line (3x faster at 512 x 512). */
#define COL_BLOCK 8

/* the 1-D transforms of every column */
static int fft_cols(const gsb__cpu_fft *f, double *x, int inverse)
{
    int64_t n = f->n, blocks = (n + COL_BLOCK - 1) / COL_BLOCK;
    int failed = 0;
#pragma omp parallel if (n * n >= 65536)
    {
        double *buf = cpu_alloc(2 * n * (COL_BLOCK + 1), sizeof *buf);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
        double *scratch = buf ? buf + 2 * n * COL_BLOCK : NULL;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < blocks; b++) {
            if (!buf)
                continue;
            int64_t c0 = b * COL_BLOCK, w = n - c0 < COL_BLOCK ? n - c0 : COL_BLOCK;
            for (int64_t r = 0; r < n; r++)
                for (int64_t c = 0; c < w; c++) {
                    buf[2 * (c * n + r)] = x[2 * (r * n + c0 + c)];
                    buf[2 * (c * n + r) + 1] = x[2 * (r * n + c0 + c) + 1];
                }
            for (int64_t c = 0; c < w; c++)
                gsb__cpu_fft_1d(f, buf + 2 * c * n, inverse, scratch);
            for (int64_t r = 0; r < n; r++)
                for (int64_t c = 0; c < w; c++) {
                    x[2 * (r * n + c0 + c)] = buf[2 * (c * n + r)];
                    x[2 * (r * n + c0 + c) + 1] = buf[2 * (c * n + r) + 1];
                }
        }
        free(buf);
    }
    return failed ? gsb__err(GSB_ENOMEM, "fft: out of host memory") : GSB_OK;
}

int gsb__cpu_fft_2d(const gsb__cpu_fft *f, double *x, int inverse, int64_t live_rows)
{
    int64_t rows = live_rows < f->n ? live_rows : f->n;
    if (!inverse) {
        GSB_TRY(fft_rows(f, x, 0, rows));
        return fft_cols(f, x, 0);
    }
    GSB_TRY(fft_cols(f, x, 1));
    return fft_rows(f, x, 1, rows);
}
