/*
 * radius_exact.h - what both twins of the radius_neighbors op compute the
 * same way (header only, C and CUDA): a pair's exact "reduced" distance in
 * double, the threshold it is compared with, the metric's value from it,
 * and the grid's cell arithmetic.
 *
 * The reduced distance is what is compared with the threshold: the sum of
 * squares for euclidean (against eps^2), the sum of |q - r|^p for minkowski
 * (against eps^p), the distance itself for the others.  Sums run over the
 * columns in order with every operation rounded on its own (no FMA
 * contraction: the CUDA build uses the _rn intrinsics), so the CPU and the
 * GPU decide every pair identically except minkowski, whose pow() may
 * differ in the last bit between the C library and CUDA.  The threshold is
 * computed once on the host by both.
 */
#ifndef GSB_BACKEND_RADIUS_EXACT_H
#define GSB_BACKEND_RADIUS_EXACT_H

#include <math.h>
#include <stdint.h>

#include "backend/backend.h"

#ifdef __CUDACC__
#define GSB__RHD static __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define GSB__RMUL(a, b) __dmul_rn((a), (b))
#define GSB__RADD(a, b) __dadd_rn((a), (b))
#define GSB__RSUB(a, b) __dsub_rn((a), (b))
#endif
#else
/* always inlined: the scan loops pass the metric as a constant, which folds the switch */
#define GSB__RHD static inline __attribute__((always_inline))
#endif
#ifndef GSB__RMUL
#define GSB__RMUL(a, b) ((a) * (b))
#define GSB__RADD(a, b) ((a) + (b))
#define GSB__RSUB(a, b) ((a) - (b))
#endif

/* The threshold the reduced distance is compared with (<=). */
static inline double gsb__radius_threshold(gsb__metric metric, double p, double eps)
{
    switch (metric) {
    case GSB__METRIC_EUCLIDEAN: return eps * eps;
    case GSB__METRIC_MINKOWSKI: return pow(eps, p);
    default: return eps;
    }
}

/* The metric's value of a reduced distance s. */
GSB__RHD double gsb__radius_value(int metric, double p, double s)
{
    if (metric == GSB__METRIC_EUCLIDEAN)
        return sqrt(s);
    if (metric == GSB__METRIC_MINKOWSKI)
        return p == 1.0 ? s : pow(s, 1.0 / p);
    return s;
}

/* 1 / ||x|| in double, 0 for a zero row (cosine's convention: distance 1). */
#define GSB__RADIUS_INVNORM(T, SUF)                                                      \
    GSB__RHD double gsb__radius_invnorm_##SUF(const T *x, int64_t d)                     \
    {                                                                                    \
        double s = 0.0;                                                                  \
        for (int64_t k = 0; k < d; k++)                                                  \
            s = GSB__RADD(s, GSB__RMUL((double)x[k], (double)x[k]));                     \
        return s > 0.0 ? 1.0 / sqrt(s) : 0.0;                                            \
    }

/* The reduced distance of rows q and r (d columns); qinv and rinv are their
 * inverse norms (cosine only). */
#define GSB__RADIUS_REDUCED(T, SUF)                                                      \
    GSB__RHD double gsb__radius_reduced_##SUF(const T *q, const T *r, int64_t d,         \
                                              int metric, double p, double qinv,         \
                                              double rinv)                               \
    {                                                                                    \
        double s = 0.0;                                                                  \
        switch (metric) {                                                                \
        case GSB__METRIC_COSINE: {                                                       \
            for (int64_t k = 0; k < d; k++)                                              \
                s = GSB__RADD(s, GSB__RMUL((double)q[k], (double)r[k]));                 \
            double v = GSB__RSUB(1.0, GSB__RMUL(GSB__RMUL(s, qinv), rinv));              \
            return v < 0.0 ? 0.0 : (v > 2.0 ? 2.0 : v);                                  \
        }                                                                                \
        case GSB__METRIC_MANHATTAN:                                                      \
            for (int64_t k = 0; k < d; k++)                                              \
                s = GSB__RADD(s, fabs(GSB__RSUB((double)q[k], (double)r[k])));           \
            return s;                                                                    \
        case GSB__METRIC_CHEBYSHEV:                                                      \
            for (int64_t k = 0; k < d; k++) {                                            \
                double t = fabs(GSB__RSUB((double)q[k], (double)r[k]));                  \
                s = t > s ? t : s;                                                       \
            }                                                                            \
            return s;                                                                    \
        case GSB__METRIC_MINKOWSKI:                                                      \
            for (int64_t k = 0; k < d; k++)                                              \
                s = GSB__RADD(s, pow(fabs(GSB__RSUB((double)q[k], (double)r[k])), p));   \
            return s;                                                                    \
        default: /* euclidean, sqeuclidean */                                           \
            for (int64_t k = 0; k < d; k++) {                                            \
                double t = GSB__RSUB((double)q[k], (double)r[k]);                        \
                s = GSB__RADD(s, GSB__RMUL(t, t));                                       \
            }                                                                            \
            return s;                                                                    \
        }                                                                                \
    }

GSB__RADIUS_INVNORM(float, f32)
GSB__RADIUS_INVNORM(double, f64)
GSB__RADIUS_REDUCED(float, f32)
GSB__RADIUS_REDUCED(double, f64)
#undef GSB__RADIUS_INVNORM
#undef GSB__RADIUS_REDUCED

/* ---- the grid (gsb__radius_grid) ------------------------------------------ */

/* The cell of coordinate x along one column, clamped to [-2, ncell + 1]: a
 * cell that far out has no occupied neighbour, and the clamp keeps the
 * conversion to int64 defined for any x (NaN too). */
GSB__RHD int64_t gsb__grid_coord(double x, double origin, double cell, int64_t ncell)
{
    double v = floor((x - origin) / cell);
    if (!(v >= -2.0))
        v = -2.0;
    if (v > (double)ncell + 1.0)
        v = (double)ncell + 1.0;
    return (int64_t)v;
}

/* First position in keys[0, n) whose key is >= key. */
GSB__RHD int64_t gsb__grid_lower_bound(const int64_t *keys, int64_t n, int64_t key)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * The cells around a query, as runs of consecutive keys: the leading
 * columns (all but the last) take every cell within +-1 of the query's,
 * the last column a run of up to three keys.  Fills lo/hi per column and
 * returns 0 when some column has no occupied cell in reach.
 */
typedef struct gsb__grid_reach {
    int64_t lo[3], hi[3]; /* cell ranges per column, inclusive */
} gsb__grid_reach;

#define GSB__GRID_REACH(T, SUF)                                                          \
    GSB__RHD int gsb__grid_reach_##SUF(const gsb__radius_grid *g, const T *q,            \
                                       gsb__grid_reach *out)                             \
    {                                                                                    \
        for (int k = 0; k < 3; k++) {                                                    \
            out->lo[k] = 0;                                                              \
            out->hi[k] = 0;                                                              \
        }                                                                                \
        for (int k = 0; k < g->dims; k++) {                                              \
            int64_t c = gsb__grid_coord((double)q[k], g->origin[k], g->cell[k],          \
                                        g->ncell[k]);                                    \
            out->lo[k] = c - 1 > 0 ? c - 1 : 0;                                          \
            out->hi[k] = c + 1 < g->ncell[k] - 1 ? c + 1 : g->ncell[k] - 1;              \
            if (out->lo[k] > out->hi[k])                                                 \
                return 0;                                                                \
        }                                                                                \
        return 1;                                                                        \
    }
GSB__GRID_REACH(float, f32)
GSB__GRID_REACH(double, f64)
#undef GSB__GRID_REACH

/* Number of runs of a reach (the product of the leading columns' ranges). */
GSB__RHD int gsb__grid_runs(const gsb__radius_grid *g, const gsb__grid_reach *r)
{
    int n = 1;
    for (int k = 0; k + 1 < g->dims; k++)
        n *= (int)(r->hi[k] - r->lo[k] + 1);
    return n;
}

/* Run t of a reach (0 <= t < gsb__grid_runs) as a range of keys. */
GSB__RHD void gsb__grid_run(const gsb__radius_grid *g, const gsb__grid_reach *r, int t,
                            int64_t *key_lo, int64_t *key_hi)
{
    int64_t base = 0;
    for (int k = g->dims - 2; k >= 0; k--) {
        int64_t span = r->hi[k] - r->lo[k] + 1;
        base += (r->lo[k] + t % span) * g->stride[k];
        t /= (int)span;
    }
    int last = g->dims - 1;
    *key_lo = base + r->lo[last];
    *key_hi = base + r->hi[last];
}

#endif
