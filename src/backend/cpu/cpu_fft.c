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
    f->tw = cpu_alloc(n > 1 ? n : 2, sizeof *f->tw);
    f->rev = cpu_alloc(n, sizeof *f->rev);
    if (!f->tw || !f->rev) {
        gsb__cpu_fft_free(f);
        return gsb__err(GSB_ENOMEM, "fft: out of host memory");
    }
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t k = 0; k < n / 2; k++) {
        double t = two_pi * (double)k / (double)n;
        f->tw[2 * k] = cos(t);
        f->tw[2 * k + 1] = -sin(t);
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
    for (int64_t len = 2; len <= n; len *= 2) {
        int64_t half = len / 2, step = n / len;
        for (int64_t s = 0; s < n; s += len) {
            double *a = x + 2 * s, *b = x + 2 * (s + half);
            for (int64_t j = 0; j < half; j++) {
                double wr = f->tw[2 * j * step], wi = sign * f->tw[2 * j * step + 1];
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
#pragma omp parallel for schedule(static) if (rows * n >= 4096)
    for (int64_t r = 0; r < rows; r++)
        gsb__cpu_fft_1d(f, x + 2 * r * n, inverse);
}

/* the 1-D transforms of every column */
static int fft_cols(const gsb__cpu_fft *f, double *x, int inverse)
{
    int64_t n = f->n;
    int failed = 0;
#pragma omp parallel if (n * n >= 4096)
    {
        double *col = cpu_alloc(2 * n, sizeof *col);
        if (!col) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t c = 0; c < n; c++) {
            if (!col)
                continue;
            for (int64_t r = 0; r < n; r++) {
                col[2 * r] = x[2 * (r * n + c)];
                col[2 * r + 1] = x[2 * (r * n + c) + 1];
            }
            gsb__cpu_fft_1d(f, col, inverse);
            for (int64_t r = 0; r < n; r++) {
                x[2 * (r * n + c)] = col[2 * r];
                x[2 * (r * n + c) + 1] = col[2 * r + 1];
            }
        }
        free(col);
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
