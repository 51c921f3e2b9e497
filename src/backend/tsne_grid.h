/*
 * tsne_grid.h - the interpolation grid of t-SNE's FFT repulsion
 * (tsne_repulse_fft in backend.h), shared by the CPU and CUDA backends so
 * that both lay exactly the same grid over the same embedding.
 *
 * FIt-SNE (Linderman et al. 2019) covers the embedding's bounding square
 * [lo, hi]^d with boxes of width about 1 (at least min_boxes a side) and puts
 * p equispaced nodes in each box, at (k + 1/2) / p of its width: together
 * they form one equispaced grid of boxes * p nodes a side, node g at
 * lo + (g + 1/2) h.  The convolution of node charges with a kernel is then a
 * Toeplitz product, done as a circular convolution of length m >= 2 * nodes
 * by FFT.  FIt-SNE rounds the box count up to sizes FFTW handles well; here
 * m is the next length whose prime factors are 2, 3 and 5 (cuFFT's fast
 * sizes, and the CPU's own mixed-radix FFT's only ones) and the box count is
 * then raised to the most that m holds, which refines the grid at no extra
 * FFT cost.
 *
 * Coordinates are taken relative to the square's centre: the charges y_j
 * and the product y_i * phi then stay small, which keeps float32 sums on
 * the GPU accurate.
 */
#ifndef GSB_BACKEND_TSNE_GRID_H
#define GSB_BACKEND_TSNE_GRID_H

#include <math.h>
#include <stdint.h>

/* FIt-SNE's defaults (interpolation nodes per box, fewest boxes a side) */
#define GSB__TSNE_FFT_INTERP 3
#define GSB__TSNE_FFT_MIN_BOXES 50
/* Largest FFT length a side (about): 2-D grids hold m^2 nodes per channel. */
#define GSB__TSNE_FFT_MAX_M_2D 2048
#define GSB__TSNE_FFT_MAX_M_1D (1 << 20)
/* Most nodes per box (callers size their weight arrays by it). */
#define GSB__TSNE_FFT_MAX_P 8

/* The point-wise helpers run on the host and, in the CUDA backend, on the device. */
#ifdef __CUDACC__
#define GSB__TSNE_HD __host__ __device__
#else
#define GSB__TSNE_HD
#endif

typedef struct gsb__tsne_grid {
    int d;          /* 1 or 2 */
    int p;          /* nodes per box and dimension */
    int64_t boxes;  /* boxes a side */
    int64_t nodes;  /* nodes a side: boxes * p */
    int64_t m;      /* FFT length a side: 2-3-5-smooth, >= 2 * nodes */
    double centre;  /* coordinates are relative to this */
    double lo;      /* the square's low corner, relative to centre */
    double box;     /* box width */
    double h;       /* node spacing: box / p */
} gsb__tsne_grid;

/* 1 when n's prime factors are all 2, 3 or 5 */
static inline int gsb__tsne_grid_smooth(int64_t n)
{
    static const int64_t primes[3] = {2, 3, 5};
    for (int k = 0; k < 3; k++)
        while (n % primes[k] == 0)
            n /= primes[k];
    return n == 1;
}

/*
 * The grid for an embedding whose coordinates (all dimensions together) lie
 * in [lo, hi]: 0, or -1 when the bounds are not finite or p, d, min_boxes
 * are out of range.  A single point (hi == lo) gets a tiny square.
 */
static inline int gsb__tsne_grid_plan(double lo, double hi, int d, int p, int min_boxes,
                                      gsb__tsne_grid *g)
{
    if (!isfinite(lo) || !isfinite(hi) || hi < lo || (d != 1 && d != 2) || p < 1 ||
        p > GSB__TSNE_FFT_MAX_P || min_boxes < 1)
        return -1;
    double span = hi - lo;
    double floor_span = 1e-6 * fmax(1.0, fmax(fabs(lo), fabs(hi)));
    if (span < floor_span)
        span = floor_span;
    int64_t max_m = d == 2 ? GSB__TSNE_FFT_MAX_M_2D : GSB__TSNE_FFT_MAX_M_1D;
    double want = fmax((double)min_boxes, ceil(span)); /* about one box per unit */
    double need = fmin(2.0 * want * p, (double)max_m);
    int64_t m = 2 * (int64_t)p;
    while ((double)m < need || !gsb__tsne_grid_smooth(m))
        m++;
    g->d = d;
    g->p = p;
    g->m = m;
    g->boxes = m / (2 * (int64_t)p);
    g->nodes = g->boxes * p;
    g->centre = lo + 0.5 * (hi - lo);
    g->lo = -0.5 * span;
    g->box = span / (double)g->boxes;
    g->h = g->box / p;
    return 0;
}

/*
 * Point coordinate x (relative to the centre) -> its box (clamped: the top
 * edge belongs to the last box) and the p Lagrange weights of its position in
 * the box on the box's nodes.
 */
GSB__TSNE_HD static inline int64_t gsb__tsne_grid_weights(const gsb__tsne_grid *g, double x,
                                                        double *w)
{
    double t = (x - g->lo) / g->box;
    int64_t b = (int64_t)floor(t);
    if (b < 0)
        b = 0;
    if (b > g->boxes - 1)
        b = g->boxes - 1;
    double u = t - (double)b; /* position in the box, in [0, 1] */
    int p = g->p;
    for (int k = 0; k < p; k++) {
        double tk = (k + 0.5) / p, num = 1.0, den = 1.0;
        for (int l = 0; l < p; l++) {
            if (l == k)
                continue;
            double tl = (l + 0.5) / p;
            num *= u - tl;
            den *= tk - tl;
        }
        w[k] = num / den;
    }
    return b;
}

/*
 * A point's own share of its interpolated w-potential: the convolution adds
 * the point's charge to its own potential as sum over its box's node pairs
 * (a, b) of W_a W_b w(node_a - node_b), weights w as gsb__tsne_grid_weights
 * gives them (d x p).  Not 1, the exact w_ii (which FIt-SNE subtracts): the
 * Lagrange weights overshoot near a box's edges (up to ~1.25 with 3 nodes,
 * boxes 1 wide), so Z less n came out 33 times Z on 7 points some 20 apart
 * and 1.3% high on 1000; less this share, 7e-7 and 6e-6 off.  Node pairs
 * are grouped by their distance along each side (p of them), so the kernel
 * is evaluated p^d times, with the kernel grid's own arithmetic.
 */
GSB__TSNE_HD static inline double gsb__tsne_grid_self(const gsb__tsne_grid *g, const double *w)
{
    int p = g->p;
    double c[2][GSB__TSNE_FFT_MAX_P] = {{0.0}}; /* c[a][k]: sum of W_u W_v, |u - v| = k, side a */
    for (int a = 0; a < g->d; a++) {
        for (int u = 0; u < p; u++)
            for (int v = 0; v < p; v++)
                c[a][u > v ? u - v : v - u] += w[a * p + u] * w[a * p + v];
    }
    double s = 0.0;
    for (int k0 = 0; k0 < p; k0++)
        for (int k1 = 0; k1 < (g->d == 1 ? 1 : p); k1++) {
            double r2 = g->h * g->h * (double)(k0 * k0 + k1 * k1), k = 1.0 / (1.0 + r2);
            s += (g->d == 1 ? c[0][k0] : c[0][k0] * c[1][k1]) * k;
        }
    return s;
}

/*
 * The circular kernel's offset along one side for FFT index a in [0, m):
 * a for a < nodes, a - m for a > m - nodes; *ok = 0 elsewhere (entries the
 * convolution never reads).
 */
GSB__TSNE_HD static inline int64_t gsb__tsne_grid_offset(const gsb__tsne_grid *g, int64_t a,
                                                       int *ok)
{
    *ok = 1;
    if (a < g->nodes)
        return a;
    if (a > g->m - g->nodes)
        return a - g->m;
    *ok = 0;
    return 0;
}

#endif
