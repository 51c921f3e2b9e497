/*
 * cpu_tsne_fft.c - tsne_repulse_fft on the CPU: t-SNE's repulsion by
 * FIt-SNE's polynomial interpolation and FFT convolution (Linderman et al.
 * 2019), for 1-D and 2-D embeddings, written for this engine.
 *
 * Per call, with the grid of backend/tsne_grid.h over the points' square:
 *  1. each point's box and its Lagrange weights on the box's p^d nodes;
 *  2. charges spread onto the nodes: for the kernel w^2 = (1 + r^2)^-2 the
 *     charges 1 and y (d + 1 channels), for the kernel w = (1 + r^2)^-1 the
 *     charge 1 (one channel, for Z).  The points are sorted by box first and
 *     each box's nodes are its own, so boxes are spread in parallel without
 *     two threads touching a node, in a fixed order;
 *  3. each channel convolved with its kernel over the grid, as a circular
 *     convolution of length m a side by FFT (cpu_fft.c).  Two real channels
 *     share one complex transform (a + i b): with the kernels' spectra Ka, Kb
 *     (real, as the kernels are even) the product's spectrum is
 *     X[k] (Ka + Kb) / 2 + conj(X[-k]) (Ka - Kb) / 2, whose inverse holds
 *     a * ka in its real part and b * kb in its imaginary part.  Both kernels
 *     share one transform the same way (k2 + i k1, whose spectrum is
 *     K2 + i K1);
 *  4. the potentials interpolated back to each point: phi_c(y_i);
 *  5. R_i = y_i phi_0 - (phi_1 .. phi_d) (w^2-weighted sums of y_i - y_j) and
 *     Z_i = phi_Z(y_i) less the point's own share of it, as interpolated
 *     (gsb__tsne_grid_self; FIt-SNE removes 1, the exact w_ii, and so keeps
 *     the interpolation's error on it); Z is the sum of the Z_i in index
 *     order.
 * Everything is in double; results do not depend on the thread count.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_fft.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_tsne.h"
#include "backend/tsne_grid.h"

#define FFT_MAX_CHANNELS 4 /* d + 2 for d <= 2 */

typedef struct fft_work {
    gsb__tsne_grid g;
    int64_t n, cells;      /* points; grid cells per channel: m^d */
    int64_t nb;            /* boxes in all: boxes^d */
    double *wts;           /* n x d x p Lagrange weights */
    int64_t *box;          /* n: each point's box (row-major over dimensions) */
    int64_t *order;        /* n: the points sorted by box */
    int64_t *start;        /* nb + 1: each box's first place in order */
    double *pair[2];       /* channels (0, 1) and (2, 3), complex m^d each */
    double *ker;           /* kernels w^2 (re) and w (im), then their spectra */
    double *tmp;           /* complex m^d */
} fft_work;

static void work_free(fft_work *w)
{
    free(w->wts);
    free(w->box);
    free(w->order);
    free(w->start);
    free(w->pair[0]);
    free(w->pair[1]);
    free(w->ker);
    free(w->tmp);
}

static int work_alloc(fft_work *w)
{
    int64_t n = w->n, d = w->g.d;
    w->wts = cpu_alloc(n * d * w->g.p, sizeof *w->wts);
    w->box = cpu_alloc(n, sizeof *w->box);
    w->order = cpu_alloc(n, sizeof *w->order);
    w->start = gsb__calloc_array(w->nb + 1, sizeof *w->start);
    w->pair[0] = gsb__calloc_array(2 * w->cells, sizeof(double));
    w->pair[1] = gsb__calloc_array(2 * w->cells, sizeof(double));
    w->ker = cpu_alloc(2 * w->cells, sizeof(double));
    w->tmp = cpu_alloc(2 * w->cells, sizeof(double));
    if (!w->wts || !w->box || !w->order || !w->start || !w->pair[0] || !w->pair[1] ||
        !w->ker || !w->tmp)
        return gsb__err(GSB_ENOMEM, "tsne_repulse_fft: out of host memory");
    return GSB_OK;
}

/* steps 1 and the sort: weights, boxes, points in box order (stable) */
static void locate(fft_work *w, const float *y)
{
    const gsb__tsne_grid *g = &w->g;
    int64_t n = w->n, d = g->d, p = g->p;
#pragma omp parallel for schedule(static) if (n > 16384)
    for (int64_t i = 0; i < n; i++) {
        int64_t b = 0;
        for (int64_t a = 0; a < d; a++) {
            int64_t ba = gsb__tsne_grid_weights(g, (double)y[i * d + a] - g->centre,
                                                w->wts + (i * d + a) * p);
            b = b * g->boxes + ba;
        }
        w->box[i] = b;
    }
    for (int64_t i = 0; i < n; i++)
        w->start[w->box[i] + 1]++;
    for (int64_t b = 0; b < w->nb; b++)
        w->start[b + 1] += w->start[b];
    int64_t *fill = (int64_t *)w->tmp; /* scratch: nb <= cells, and tmp is not in use yet */
    memcpy(fill, w->start, (size_t)w->nb * sizeof *fill);
    for (int64_t i = 0; i < n; i++)
        w->order[fill[w->box[i]]++] = i;
}

/* The node (flat index into a channel) of point-local node k (k < p^d) of box b. */
static inline int64_t node_of(const gsb__tsne_grid *g, int64_t b, int64_t k)
{
    if (g->d == 1)
        return b * g->p + k;
    int64_t b0 = b / g->boxes, b1 = b % g->boxes, k0 = k / g->p, k1 = k % g->p;
    return (b0 * g->p + k0) * g->m + (b1 * g->p + k1);
}

/* weight of point-local node k for point i */
static inline double weight_of(const fft_work *w, int64_t i, int64_t k)
{
    int64_t p = w->g.p;
    if (w->g.d == 1)
        return w->wts[i * p + k];
    return w->wts[(i * 2) * p + k / p] * w->wts[(i * 2 + 1) * p + k % p];
}

/* the channels' charges for point i: 1, y - centre, ..., 1 (for Z) */
static inline void charges_of(const fft_work *w, const float *y, int64_t i, double *q)
{
    int64_t d = w->g.d;
    q[0] = 1.0;
    for (int64_t a = 0; a < d; a++)
        q[1 + a] = (double)y[i * d + a] - w->g.centre;
    q[d + 1] = 1.0;
}

/* step 2: spread the charges, box by box */
static void spread(fft_work *w, const float *y)
{
    const gsb__tsne_grid *g = &w->g;
    int64_t pd = g->d == 1 ? g->p : (int64_t)g->p * g->p, channels = g->d + 2;
#pragma omp parallel for schedule(dynamic, 16) if (w->n > 16384)
    for (int64_t b = 0; b < w->nb; b++) {
        for (int64_t s = w->start[b]; s < w->start[b + 1]; s++) {
            int64_t i = w->order[s];
            double q[FFT_MAX_CHANNELS];
            charges_of(w, y, i, q);
            for (int64_t k = 0; k < pd; k++) {
                int64_t node = node_of(g, b, k);
                double wk = weight_of(w, i, k);
                for (int64_t c = 0; c < channels; c++)
                    w->pair[c / 2][2 * node + (c % 2)] += wk * q[c];
            }
        }
    }
}

/* the two kernels on the circular grid: w^2 in the real parts, w in the imaginary */
static void fill_kernels(fft_work *w)
{
    const gsb__tsne_grid *g = &w->g;
    int64_t m = g->m, rows = g->d == 1 ? 1 : m;
#pragma omp parallel for schedule(static) if (w->cells > 65536)
    for (int64_t r = 0; r < rows; r++) {
        int ok0 = 1;
        int64_t o0 = g->d == 1 ? 0 : gsb__tsne_grid_offset(g, r, &ok0);
        for (int64_t c = 0; c < m; c++) {
            int ok1;
            int64_t o1 = gsb__tsne_grid_offset(g, c, &ok1);
            double r2 = g->h * g->h * (double)(o0 * o0 + o1 * o1), k1 = 1.0 / (1.0 + r2);
            double *cell = w->ker + 2 * (r * m + c);
            cell[0] = ok0 && ok1 ? k1 * k1 : 0.0;
            cell[1] = ok0 && ok1 ? k1 : 0.0;
        }
    }
}

static int transform(const fft_work *w, const gsb__cpu_fft *f, double *x, int inverse,
                     int64_t live_rows)
{
    if (w->g.d == 1) {
        double *scratch = cpu_alloc(2 * f->n, sizeof *scratch);
        if (!scratch)
            return gsb__err(GSB_ENOMEM, "tsne_repulse_fft: out of host memory");
        gsb__cpu_fft_1d(f, x, inverse, scratch);
        free(scratch);
        return GSB_OK;
    }
    return gsb__cpu_fft_2d(f, x, inverse, live_rows);
}

/* flat index of -k on the circular grid */
static inline int64_t negate(const gsb__tsne_grid *g, int64_t k)
{
    int64_t m = g->m;
    if (g->d == 1)
        return (m - k) % m;
    return ((m - k / m) % m) * m + (m - k % m) % m;
}

/* step 3 for one pair: X (transformed in place) -> the spectrum of the
 * product in out; kb_im selects the kernel of the second channel (0: w^2,
 * 1: w); the kernel spectra are in w->ker. */
static void multiply(const fft_work *w, const double *X, int kb_im, double *out)
{
    const double *K = w->ker;
#pragma omp parallel for schedule(static) if (w->cells > 65536)
    for (int64_t k = 0; k < w->cells; k++) {
        int64_t nk = negate(&w->g, k);
        double ka = K[2 * k], kb = K[2 * k + kb_im];
        double sp = 0.5 * (ka + kb), sm = 0.5 * (ka - kb);
        double xr = X[2 * k], xi = X[2 * k + 1], cr = X[2 * nk], ci = -X[2 * nk + 1];
        out[2 * k] = xr * sp + cr * sm;
        out[2 * k + 1] = xi * sp + ci * sm;
    }
}

/* step 3: every channel convolved with its kernel; the results replace the pairs */
static int convolve(fft_work *w)
{
    const gsb__tsne_grid *g = &w->g;
    gsb__cpu_fft f;
    GSB_TRY(gsb__cpu_fft_init(&f, g->m));
    int rc;
    GSB_CHECK(transform(w, &f, w->ker, 0, g->m));
    for (int p = 0; p < 2; p++) {
        /* pair 1's second channel is Z's (kernel w) in 2-D; in 1-D pair 1
         * holds Z's channel first and nothing second */
        int second_is_z = g->d == 2 && p == 1;
        double *X = w->pair[p];
        GSB_CHECK(transform(w, &f, X, 0, g->nodes));
        if (g->d == 1 && p == 1) { /* Z's channel alone: kernel w on the real part */
            const double *K = w->ker;
            for (int64_t k = 0; k < w->cells; k++) {
                double ka = K[2 * k + 1];
                w->tmp[2 * k] = X[2 * k] * ka;
                w->tmp[2 * k + 1] = X[2 * k + 1] * ka;
            }
        } else {
            multiply(w, X, second_is_z, w->tmp);
        }
        GSB_CHECK(transform(w, &f, w->tmp, 1, g->nodes));
        w->pair[p] = w->tmp; /* the result takes the pair's place */
        w->tmp = X;
    }
    rc = GSB_OK;
done:
    gsb__cpu_fft_free(&f);
    return rc;
}

/* steps 4 and 5 */
static void gather(const fft_work *w, const float *y, float *out, double *zrow)
{
    const gsb__tsne_grid *g = &w->g;
    int64_t d = g->d, pd = d == 1 ? g->p : (int64_t)g->p * g->p, channels = d + 2;
    double scale = 1.0 / (double)w->cells; /* the inverse FFT's normalisation */
#pragma omp parallel for schedule(static) if (w->n > 16384)
    for (int64_t i = 0; i < w->n; i++) {
        double phi[FFT_MAX_CHANNELS] = {0}, q[FFT_MAX_CHANNELS];
        for (int64_t k = 0; k < pd; k++) {
            int64_t node = node_of(g, w->box[i], k);
            double wk = weight_of(w, i, k);
            for (int64_t c = 0; c < channels; c++)
                phi[c] += wk * w->pair[c / 2][2 * node + (c % 2)];
        }
        charges_of(w, y, i, q);
        for (int64_t a = 0; a < d; a++)
            out[i * d + a] = (float)(scale * (q[1 + a] * phi[0] - phi[1 + a]));
        zrow[i] = scale * phi[d + 1] - gsb__tsne_grid_self(g, w->wts + i * d * g->p);
    }
}

int gsb__cpu_tsne_repulse_fft(const gsb__backend *be, const gsb__tensor *Y, int n_interp,
                              int min_boxes, gsb__tensor *R, gsb__tensor *zsum)
{
    (void)be;
    const char *op = "tsne_repulse_fft";
    GSB_TRY(cpu_tsne_check_repulse(Y, 1, R, zsum, op));
    if (Y->cols > 2)
        return gsb__err(GSB_EINTERNAL, "%s: %lld dimensions (1 or 2)", op, (long long)Y->cols);
    const float *y = Y->data;
    int64_t n = Y->rows, count = n * Y->cols;
    double lo = y[0], hi = y[0];
    for (int64_t e = 1; e < count; e++) {
        lo = y[e] < lo ? y[e] : lo;
        hi = y[e] > hi ? y[e] : hi;
    }
    fft_work w;
    memset(&w, 0, sizeof w);
    if (gsb__tsne_grid_plan(lo, hi, (int)Y->cols, n_interp, min_boxes, &w.g) != 0)
        return gsb__err(GSB_EINTERNAL, "%s: no grid for bounds [%g, %g] with %d nodes per box",
                        op, lo, hi, n_interp);
    w.n = n;
    w.cells = w.g.d == 1 ? w.g.m : w.g.m * w.g.m;
    w.nb = w.g.d == 1 ? w.g.boxes : w.g.boxes * w.g.boxes;
    double *zrow = cpu_alloc(n, sizeof *zrow);
    int rc;
    if (!zrow) {
        rc = gsb__err(GSB_ENOMEM, "%s: out of host memory", op);
        goto done;
    }
    GSB_CHECK(work_alloc(&w));
    locate(&w, y);
    spread(&w, y);
    fill_kernels(&w);
    GSB_CHECK(convolve(&w));
    gather(&w, y, R->data, zrow);
    ((double *)zsum->data)[0] = cpu_tsne_sum(zrow, n);
done:
    free(zrow);
    work_free(&w);
    return rc;
}
