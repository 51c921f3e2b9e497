/*
 * cpu_fft.c - iterative radix-2 complex FFT in double, 1-D and 2-D (see
 * cpu_fft.h for why the CPU backend has its own).
 *
 * 1-D: bit-reversal permutation, then log2(n) butterfly passes with
 * twiddles from a table computed once per length (cos and sin of 2 pi k / n
 * evaluated directly, not by recurrence, so the table is accurate to an ulp).
 * 2-D: independent 1-D transforms of the rows, then of the columns (each
 * column copied to a contiguous buffer and back), shared over OpenMP threads.
 */
#include "backend/cpu/cpu_fft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_util.h"

int gsb__cpu_fft_init(gsb__cpu_fft *f, int64_t n)
{
    memset(f, 0, sizeof *f);
    if (n < 1 || (n & (n - 1)) != 0)
        return gsb__err(GSB_EINTERNAL, "fft: length %lld is not a power of two", (long long)n);
    f->n = n;
    f->tw = cpu_alloc(2 * n, sizeof *f->tw);
    f->rev = cpu_alloc(n, sizeof *f->rev);
    if (!f->tw || !f->rev) {
        gsb__cpu_fft_free(f);
        return gsb__err(GSB_ENOMEM, "fft: out of host memory");
    }
    /* per stage of length len, its len / 2 twiddles e^(-2 pi i j / len) from
     * offset len / 2 - 1: contiguous for the butterfly loop */
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t len = 2; len <= n; len *= 2)
        for (int64_t j = 0; j < len / 2; j++) {
            double t = two_pi * (double)j / (double)len;
            f->tw[2 * (len / 2 - 1 + j)] = cos(t);
            f->tw[2 * (len / 2 - 1 + j) + 1] = -sin(t);
        }
    int bits = 0;
    while (((int64_t)1 << bits) < n)
        bits++;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = 0;
        for (int b = 0; b < bits; b++)
            r |= ((i >> b) & 1) << (bits - 1 - b);
        f->rev[i] = r;
    }
    return GSB_OK;
}

void gsb__cpu_fft_free(gsb__cpu_fft *f)
{
    free(f->tw);
    free(f->rev);
    memset(f, 0, sizeof *f);
}

void gsb__cpu_fft_1d(const gsb__cpu_fft *f, double *x, int inverse)
{
    int64_t n = f->n;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = f->rev[i];
        if (r > i) {
            double re = x[2 * i], im = x[2 * i + 1];
            x[2 * i] = x[2 * r];
            x[2 * i + 1] = x[2 * r + 1];
            x[2 * r] = re;
            x[2 * r + 1] = im;
        }
    }
    double sign = inverse ? -1.0 : 1.0; /* the inverse conjugates the twiddles */
    for (int64_t s = 0; s + 1 < n; s += 2) { /* length 2: no twiddle */
        double ur = x[2 * s], ui = x[2 * s + 1], vr = x[2 * s + 2], vi = x[2 * s + 3];
        x[2 * s] = ur + vr;
        x[2 * s + 1] = ui + vi;
        x[2 * s + 2] = ur - vr;
        x[2 * s + 3] = ui - vi;
    }
    for (int64_t len = 4; len <= n; len *= 2) {
        int64_t half = len / 2;
        const double *tw = f->tw + 2 * (half - 1);
        for (int64_t s = 0; s < n; s += len) {
            double *a = x + 2 * s, *b = x + 2 * (s + half);
            for (int64_t j = 0; j < half; j++) {
                double wr = tw[2 * j], wi = sign * tw[2 * j + 1];
                double vr = b[2 * j] * wr - b[2 * j + 1] * wi;
                double vi = b[2 * j] * wi + b[2 * j + 1] * wr;
                double ur = a[2 * j], ui = a[2 * j + 1];
                a[2 * j] = ur + vr;
                a[2 * j + 1] = ui + vi;
                b[2 * j] = ur - vr;
                b[2 * j + 1] = ui - vi;
            }
        }
    }
}

/* the 1-D transforms of rows [0, rows) */
static void fft_rows(const gsb__cpu_fft *f, double *x, int inverse, int64_t rows)
{
    int64_t n = f->n;
#pragma omp parallel for schedule(static) if (rows * n >= 65536)
    for (int64_t r = 0; r < rows; r++)
        gsb__cpu_fft_1d(f, x + 2 * r * n, inverse);
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
        double *buf = cpu_alloc(2 * n * COL_BLOCK, sizeof *buf);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
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
                gsb__cpu_fft_1d(f, buf + 2 * c * n, inverse);
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
        fft_rows(f, x, 0, rows);
        return fft_cols(f, x, 0);
    }
    GSB_TRY(fft_cols(f, x, 1));
    fft_rows(f, x, 1, rows);
    return GSB_OK;
}
