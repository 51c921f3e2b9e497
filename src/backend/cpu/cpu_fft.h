/*
 * cpu_fft.h - a small mixed-radix complex FFT in double for lengths whose
 * prime factors are 2, 3 and 5, in 1-D and 2-D (the CPU twin of cuFFT in
 * t-SNE's FFT repulsion, cpu_tsne_fft.c).
 *
 * Why our own: the Debian FFT libraries are FFTW (GPL, not compatible with
 * gsb's MIT licence) and KissFFT, whose Debian build is float32 only; the
 * CPU backend computes in double.  The t-SNE grids are 2-3-5-smooth a side
 * (backend/tsne_grid.h), which a short recursive transform handles.
 *
 * Data are interleaved complex numbers (re, im).  Transforms are
 * unnormalised: forward uses e^(-2 pi i jk / n), inverse e^(+2 pi i jk / n).
 */
#ifndef GSB_CPU_FFT_H
#define GSB_CPU_FFT_H

#include <stdint.h>

#define GSB__CPU_FFT_MAX_FACTORS 64

typedef struct gsb__cpu_fft {
    int64_t n;      /* >= 1, no prime factor above 5 */
    double *tw;     /* n twiddles e^(-2 pi i k / n), interleaved */
    int nf;         /* factors: (radix, remaining length) pairs */
    int64_t factor[2 * GSB__CPU_FFT_MAX_FACTORS];
} gsb__cpu_fft;

/* GSB_OK, GSB_EINTERNAL (a prime factor above 5) or GSB_ENOMEM. */
int gsb__cpu_fft_init(gsb__cpu_fft *f, int64_t n);
void gsb__cpu_fft_free(gsb__cpu_fft *f);

/* In place on f->n complex values x; inverse != 0 for the inverse transform;
 * scratch holds 2 * f->n doubles. */
void gsb__cpu_fft_1d(const gsb__cpu_fft *f, double *x, int inverse, double *scratch);

/*
 * In place on the n x n complex array x (row-major, n = f->n), rows then
 * columns (forward) or columns then rows (inverse), the column passes in
 * parallel.  live_rows < n saves work: forward assumes the rows from
 * live_rows on are zero, inverse computes only the rows below live_rows
 * correctly (the others are left half-transformed).  GSB_ENOMEM possible.
 */
int gsb__cpu_fft_2d(const gsb__cpu_fft *f, double *x, int inverse, int64_t live_rows);

#endif
