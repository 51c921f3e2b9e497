/*
 * cpu_radius.c - the CPU backend's radius_neighbors: eps-neighbourhoods as
 * CSR in a count pass and a fill pass (backend.h has the contract).
 *
 * Three ways to find a query's neighbours, one decision per pair:
 *  - grid (R sorted into cells, 1-3 columns): the runs of keys around the
 *    query's cell (radius_exact.h), each found by binary search in the
 *    sorted keys, every candidate decided on its exact reduced distance;
 *  - GEMM (brute force, euclidean / sqeuclidean / cosine, d >= 8): each
 *    thread takes a block of queries and sweeps R in cache-sized tiles of
 *    dot products (single-threaded SGEMM: float64 data is rounded to
 *    float32 for this estimate when its norms fit float32's range, and the
 *    bound covers that rounding; DGEMM otherwise); a pair whose expanded
 *    distance lies beyond the rounding bound of cpu_distance.c's topk on
 *    either side of the threshold is decided by it, the few within the
 *    bound on their exact value (from the data as given).  A valid bound makes the decision the
 *    exact one, so the count and fill passes agree whatever tiles each used;
 *  - direct (brute force, every other case): exact values for every pair.
 * In the fill pass a thread owns whole rows, so each row comes out in
 * ascending j; a row that finds more or fewer neighbours than its count is
 * an internal error (never a write past its slot).
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/radius_exact.h"
#include "core/error.h"

/* Bytes of one thread's tile of dot products (about a core's L2). */
#define RAD_TILE_BYTES ((int64_t)512 << 10)
/* Below this many columns the direct loop beats a GEMM and its epilogue. */
#define RAD_GEMM_MIN_D 8
/* Below this many pair-columns (~0.2 ms on one core) a call stays serial. */
#define RAD_PAR_MIN ((int64_t)1 << 20)

typedef struct rad_ctx {
    const void *Q, *R;
    int f32;
    int64_t nq, nr, d;
    int metric;
    double p, thr;
    const gsb__radius_grid *grid;
    const int64_t *keys;
    double *qinv, *rinv;         /* cosine: inverse norms */
    double *qn, *rn, *rnorm;     /* GEMM: squared norms and ||r|| */
    double *rb;                  /* GEMM: the cut's per-reference term (rad_cut) ... */
    float *rbf;                  /* ... rounded to float32 for float32 tiles */
    double slack;                /* GEMM: relative error bound of the expansion */
    int wide;                    /* GEMM: norms outside the bound's range: decide exactly */
    int tile_f32;                /* GEMM in float32 (the tiles hold floats) */
    float *Qs, *Rs;              /* float64 data rounded to float32 for the GEMM, or NULL */
    int64_t *counts;
    const int64_t *offsets;      /* fill pass; NULL in the count pass */
    int64_t *idx;
    double *dist;
    int64_t nnz;
    atomic_int mismatch;         /* fill: a row found another count than the count pass */
} rad_ctx;

static inline const void *rad_row(const void *M, int f32, int64_t i, int64_t d)
{
    return f32 ? (const void *)((const float *)M + i * d) : (const void *)((const double *)M + i * d);
}

static inline double rad_reduced(const rad_ctx *c, int64_t i, int64_t j)
{
    double qi = c->qinv ? c->qinv[i] : 0.0, rj = c->rinv ? c->rinv[j] : 0.0;
    if (c->f32)
        return gsb__radius_reduced_f32((const float *)c->Q + i * c->d,
                                       (const float *)c->R + j * c->d, c->d, c->metric, c->p,
                                       qi, rj);
    return gsb__radius_reduced_f64((const double *)c->Q + i * c->d,
                                   (const double *)c->R + j * c->d, c->d, c->metric, c->p, qi,
                                   rj);
}

/* One query row's output cursor: how many neighbours so far, where they go. */
typedef struct rad_out {
    int64_t n, cap, base;
} rad_out;

static inline void rad_begin(const rad_ctx *c, int64_t i, rad_out *o)
{
    o->n = 0;
    o->base = c->offsets ? c->offsets[i] : 0;
    o->cap = c->offsets ? c->counts[i] : INT64_MAX;
}

/* A neighbour j of the row; s is its reduced distance, or NaN when the
 * decision did not need it (computed here if the fill pass wants dist). */
static inline void rad_emit(const rad_ctx *c, int64_t i, int64_t j, double s, rad_out *o)
{
    if (c->offsets && o->n < o->cap) {
        int64_t at = o->base + o->n;
        if (at >= 0 && at < c->nnz) {
            c->idx[at] = j;
            if (c->dist) {
                if (isnan(s))
                    s = rad_reduced(c, i, j);
                c->dist[at] = gsb__radius_value(c->metric, c->p, s);
            }
        }
    }
    o->n++;
}

static inline void rad_end(rad_ctx *c, int64_t i, const rad_out *o)
{
    if (!c->offsets)
        c->counts[i] = o->n;
    else if (o->n != o->cap)
        atomic_store(&c->mismatch, 1);
}

/* Candidates [j0, j1) of row i, decided on their exact values: one loop
 * per dtype and metric, the metric a constant in each. */
#define RAD_SCAN_ARM(SUF, T, M)                                                          \
    case M:                                                                              \
        for (int64_t j = j0; j < j1; j++) {                                              \
            double s = gsb__radius_reduced_##SUF(q, R + j * d, d, M, p, qi,              \
                                                 c->rinv ? c->rinv[j] : 0.0);            \
            if (s <= thr)                                                                \
                rad_emit(c, i, j, s, o);                                                 \
        }                                                                                \
        break;
#define RAD_SCAN(SUF, T)                                                                 \
    static void rad_scan_##SUF(const rad_ctx *c, int64_t i, int64_t j0, int64_t j1,      \
                               rad_out *o)                                               \
    {                                                                                    \
        const int64_t d = c->d;                                                          \
        const T *q = (const T *)c->Q + i * d, *R = (const T *)c->R;                      \
        const double thr = c->thr, p = c->p, qi = c->qinv ? c->qinv[i] : 0.0;            \
        switch (c->metric) {                                                             \
            RAD_SCAN_ARM(SUF, T, GSB__METRIC_SQEUCLIDEAN)                                \
            RAD_SCAN_ARM(SUF, T, GSB__METRIC_EUCLIDEAN)                                  \
            RAD_SCAN_ARM(SUF, T, GSB__METRIC_MANHATTAN)                                  \
            RAD_SCAN_ARM(SUF, T, GSB__METRIC_COSINE)                                     \
            RAD_SCAN_ARM(SUF, T, GSB__METRIC_MINKOWSKI)                                  \
            RAD_SCAN_ARM(SUF, T, GSB__METRIC_CHEBYSHEV)                                  \
        }                                                                                \
    }
RAD_SCAN(f32, float)
RAD_SCAN(f64, double)
#undef RAD_SCAN
#undef RAD_SCAN_ARM

static void rad_scan(const rad_ctx *c, int64_t i, int64_t j0, int64_t j1, rad_out *o)
{
    if (c->f32)
        rad_scan_f32(c, i, j0, j1, o);
    else
        rad_scan_f64(c, i, j0, j1, o);
}

/* ---- grid and direct: parallel over rows --------------------------------- */

static void rad_grid_row(rad_ctx *c, int64_t i, rad_out *o)
{
    const gsb__radius_grid *g = c->grid;
    gsb__grid_reach reach;
    const void *q = rad_row(c->Q, c->f32, i, c->d);
    int any = c->f32 ? gsb__grid_reach_f32(g, q, &reach) : gsb__grid_reach_f64(g, q, &reach);
    if (!any)
        return;
    int runs = gsb__grid_runs(g, &reach);
    for (int t = 0; t < runs; t++) {
        int64_t klo, khi;
        gsb__grid_run(g, &reach, t, &klo, &khi);
        int64_t a = gsb__grid_lower_bound(c->keys, c->nr, klo);
        int64_t b = a + gsb__grid_lower_bound(c->keys + a, c->nr - a, khi + 1);
        rad_scan(c, i, a, b, o);
    }
}

static void rad_by_rows(rad_ctx *c)
{
    /* work per row: a few cells' worth for the grid, all of R for direct */
    int64_t per_row = c->grid ? 64 * (c->d + 1) : c->nr * (c->d + 1);
#pragma omp parallel for schedule(dynamic, 64) if (c->nq * per_row > RAD_PAR_MIN)
    for (int64_t i = 0; i < c->nq; i++) {
        rad_out o;
        rad_begin(c, i, &o);
        if (c->grid)
            rad_grid_row(c, i, &o);
        else
            rad_scan(c, i, 0, c->nr, &o);
        rad_end(c, i, &o);
    }
}

/* ---- GEMM-filtered brute force ------------------------------------------- */

/* tile (rows x cols, leading dimension ld) = Q[q0..] (rows x d) @ R[r0..] (cols x d)^T,
 * in float32 when c->tile_f32 (from the float32 copies of float64 data) */
static void rad_gemm(const rad_ctx *c, int64_t q0, int64_t rows, int64_t r0, int64_t cols,
                     void *tile, int64_t ld)
{
    int d = (int)c->d;
    if (c->tile_f32) {
        const float *Q = c->Qs ? c->Qs : (const float *)c->Q;
        const float *R = c->Rs ? c->Rs : (const float *)c->R;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)cols, d, 1.0f,
                    Q + q0 * c->d, d, R + r0 * c->d, d, 0.0f, tile, (int)ld);
    } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)cols, d, 1.0,
                    (const double *)c->Q + q0 * c->d, d, (const double *)c->R + r0 * c->d, d,
                    0.0, tile, (int)ld);
    }
}

/*
 * The cheap test that discards most pairs of a tile row: v_t > cut means
 * the pair is surely apart, with
 *   euclidean: v_t = ||r||^2 (1 - 2s) - 2 q.r,  cut = thr - ||q||^2 (1 - 2s),
 *   cosine:    v_t = -q.r / ||r||,             cut = (thr - 1 + 2s) / ||q||^-1
 * (s the relative slack).  Both follow from the bound below with
 * ||q|| ||r|| <= (||q||^2 + ||r||^2) / 2; the extra s/2 covers this test's own
 * roundings.  A zero query row (cosine) is at distance exactly 1 from all.
 */
static double rad_cut(const rad_ctx *c, int64_t i)
{
    double s2 = 2.0 * c->slack;
    if (c->metric != GSB__METRIC_COSINE)
        return c->thr - c->qn[i] * (1.0 - s2);
    if (c->qinv[i] > 0.0)
        return (c->thr - 1.0 + s2) / c->qinv[i];
    return 1.0 > c->thr ? -INFINITY : INFINITY;
}

/* The cut in float32 for float32 tiles, rounded up: the test then runs in the
 * tiles' precision, and its own roundings (about 3 u (||q||^2 + ||r||^2) with the
 * per-reference term rounded to float32) stay within the spare s/2 (s >= 10 u). */
static float rad_cut_f32(const rad_ctx *c, int64_t i)
{
    double cut = rad_cut(c, i);
    float f = (float)cut;
    return isinf(f) || (double)f >= cut ? f : nextafterf(f, INFINITY);
}

static double rad_cut_f64(const rad_ctx *c, int64_t i) { return rad_cut(c, i); }

#define RAD_MIN(x, y) ((x) < (y) ? (x) : (y))
#define RAD_CUT(SUF, T)                                                                  \
    static inline T rad_v_##SUF(int cosine, T rb, T dot)                                 \
    {                                                                                    \
        return cosine ? rb * dot : rb - (T)2 * dot;                                      \
    }                                                                                    \
    /* the least v of 16 pairs: the values in one vectorisable loop, then a      \
     * tree of named minima (registers; a running minimum would wait on itself) */      \
    static inline T rad_min16_##SUF(int cosine, const T *rb, const T *dot)               \
    {                                                                                    \
        T v[16];                                                                         \
        if (cosine)                                                                      \
            for (int k = 0; k < 16; k++)                                                 \
                v[k] = rb[k] * dot[k];                                                   \
        else                                                                             \
            for (int k = 0; k < 16; k++)                                                 \
                v[k] = rb[k] - (T)2 * dot[k];                                            \
        T a = RAD_MIN(RAD_MIN(v[0], v[1]), RAD_MIN(v[2], v[3]));                         \
        T b = RAD_MIN(RAD_MIN(v[4], v[5]), RAD_MIN(v[6], v[7]));                         \
        T e = RAD_MIN(RAD_MIN(v[8], v[9]), RAD_MIN(v[10], v[11]));                       \
        T f = RAD_MIN(RAD_MIN(v[12], v[13]), RAD_MIN(v[14], v[15]));                     \
        return RAD_MIN(RAD_MIN(a, b), RAD_MIN(e, f));                                    \
    }
RAD_CUT(f32, float)
RAD_CUT(f64, double)
#undef RAD_CUT
#undef RAD_MIN

/* Pair (i, j) past the cut: the full bound on both sides, else the exact value. */
static void rad_classify(const rad_ctx *c, int64_t i, int64_t j, double dot, rad_out *o)
{
    double lo, hi;
    if (c->metric == GSB__METRIC_COSINE) {
        double a = 1.0 - dot * c->qinv[i] * c->rinv[j];
        lo = a - c->slack;
        hi = a + c->slack;
    } else {
        double a = c->qn[i] + c->rn[j] - 2.0 * dot;
        double err = c->slack * (sqrt(c->qn[i]) * c->rnorm[j] + c->qn[i] + c->rn[j]);
        lo = a - err;
        hi = a + err;
    }
    if (lo > c->thr)
        return;
    if (hi < c->thr) {
        rad_emit(c, i, j, NAN, o);
        return;
    }
    double s = rad_reduced(c, i, j); /* within the bound */
    if (s <= c->thr)
        rad_emit(c, i, j, s, o);
}

/*
 * Decide row i against references [j0, j0 + cols) from its row of dot
 * products: the cut discards blocks of 16 that hold no candidate (a tile
 * row has a handful among thousands), the rest are classified one by one.
 */
#define RAD_TILE_ROW(SUF, T, RB)                                                         \
    static void rad_tile_row_##SUF(const rad_ctx *c, int64_t i, const T *dot, int64_t j0,\
                                   int64_t cols, rad_out *o)                             \
    {                                                                                    \
        const int cosine = c->metric == GSB__METRIC_COSINE;                              \
        const T cut = rad_cut_##SUF(c, i), *rb = c->RB + j0;                             \
        for (int64_t t0 = 0; t0 < cols; t0 += 16) {                                      \
            int64_t t1 = cpu_min64(t0 + 16, cols);                                       \
            if (t1 - t0 == 16 && rad_min16_##SUF(cosine, rb + t0, dot + t0) > cut)       \
                continue;                                                                \
            for (int64_t t = t0; t < t1; t++)                                            \
                if (!(rad_v_##SUF(cosine, rb[t], dot[t]) > cut))                         \
                    rad_classify(c, i, j0 + t, (double)dot[t], o);                       \
        }                                                                                \
    }
RAD_TILE_ROW(f32, float, rbf)
RAD_TILE_ROW(f64, double, rb)
#undef RAD_TILE_ROW

static void rad_tile_row(const rad_ctx *c, int64_t i, const void *trow, int64_t j0,
                         int64_t cols, rad_out *o)
{
    if (c->wide)
        rad_scan(c, i, j0, j0 + cols, o);
    else if (c->tile_f32)
        rad_tile_row_f32(c, i, trow, j0, cols, o);
    else
        rad_tile_row_f64(c, i, trow, j0, cols, o);
}

static int rad_by_tiles(rad_ctx *c)
{
    size_t esz = c->tile_f32 ? sizeof(float) : sizeof(double);
    int64_t nt = omp_get_max_threads();
    int64_t qb = cpu_clamp64((c->nq + 4 * nt - 1) / (4 * nt), 1, 64);
    int64_t rb = cpu_min64(c->nr, cpu_max64(64, RAD_TILE_BYTES / (qb * (int64_t)esz)));
    int64_t nqb = (c->nq + qb - 1) / qb;
    atomic_int oom = 0;
    gsb__cpu_blas_serial_begin();
#pragma omp parallel if (c->nq * c->nr * (c->d + 1) > RAD_PAR_MIN)
    {
        void *tile = cpu_alloc(qb * rb, esz);
        rad_out *outs = cpu_alloc(qb, sizeof(rad_out));
        if (!tile || !outs)
            atomic_store(&oom, 1);
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < nqb; b++) {
            if (!tile || !outs)
                continue;
            int64_t q0 = b * qb, rows = cpu_min64(qb, c->nq - q0);
            for (int64_t a = 0; a < rows; a++)
                rad_begin(c, q0 + a, &outs[a]);
            for (int64_t r0 = 0; r0 < c->nr; r0 += rb) {
                int64_t cols = cpu_min64(rb, c->nr - r0);
                rad_gemm(c, q0, rows, r0, cols, tile, rb);
                for (int64_t a = 0; a < rows; a++)
                    rad_tile_row(c, q0 + a, (const char *)tile + (size_t)(a * rb) * esz, r0,
                                 cols, &outs[a]);
            }
            for (int64_t a = 0; a < rows; a++)
                rad_end(c, q0 + a, &outs[a]);
        }
        free(tile);
        free(outs);
    }
    gsb__cpu_blas_serial_end();
    if (atomic_load(&oom))
        return gsb__err(GSB_ENOMEM, "radius_neighbors: out of memory for a %lld x %lld tile",
                        (long long)qb, (long long)rb);
    return GSB_OK;
}

/*
 * The bound |fl(q.r) - q.r| <= gamma_d ||q|| ||r|| holds while no product
 * overflows or underflows: squared norms of nonzero rows within [lo, hi]
 * (the dtype's range with room for d products) keep it valid.
 */
static int rad_wide(const double *sq, int64_t n, int f32)
{
    double lo = f32 ? 1e-28 : 1e-280, hi = f32 ? 1e30 : 1e300;
    for (int64_t i = 0; i < n; i++)
        if (sq[i] != 0.0 && !(sq[i] >= lo && sq[i] <= hi))
            return 1;
    return 0;
}

/* out[i] = ||row i||^2 in double for the n rows of M (n x d). */
static void rad_sqnorms(const void *M, int f32, int64_t n, int64_t d, double *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = f32 ? cpu_dot_f32((const float *)M + i * d, (const float *)M + i * d, d)
                     : cpu_dot_f64((const double *)M + i * d, (const double *)M + i * d, d);
}

/* A float32 copy of n doubles, or NULL. */
static float *rad_to_f32(const void *src, int64_t n)
{
    float *out = cpu_alloc(n, sizeof(float));
    for (int64_t i = 0; out && i < n; i++)
        out[i] = (float)((const double *)src)[i];
    return out;
}

/* Norms the GEMM bound and cosine need (NULL arrays for the others). */
static int rad_norms(rad_ctx *c, int use_gemm)
{
    int cosine = c->metric == GSB__METRIC_COSINE;
    if (cosine) {
        c->qinv = cpu_alloc(c->nq, sizeof(double));
        c->rinv = cpu_alloc(c->nr, sizeof(double));
        if (!c->qinv || !c->rinv)
            return gsb__err(GSB_ENOMEM, "radius_neighbors: out of memory for row norms");
        for (int64_t i = 0; i < c->nq; i++)
            c->qinv[i] = c->f32 ? gsb__radius_invnorm_f32((const float *)c->Q + i * c->d, c->d)
                                : gsb__radius_invnorm_f64((const double *)c->Q + i * c->d, c->d);
        for (int64_t j = 0; j < c->nr; j++)
            c->rinv[j] = c->f32 ? gsb__radius_invnorm_f32((const float *)c->R + j * c->d, c->d)
                                : gsb__radius_invnorm_f64((const double *)c->R + j * c->d, c->d);
    }
    if (!use_gemm)
        return GSB_OK;
    c->qn = cpu_alloc(c->nq, sizeof(double));
    c->rn = cpu_alloc(c->nr, sizeof(double));
    c->rnorm = cpu_alloc(c->nr, sizeof(double));
    c->rb = cpu_alloc(c->nr, sizeof(double));
    if (!c->qn || !c->rn || !c->rnorm || !c->rb)
        return gsb__err(GSB_ENOMEM, "radius_neighbors: out of memory for row norms");
    rad_sqnorms(c->Q, c->f32, c->nq, c->d, c->qn);
    rad_sqnorms(c->R, c->f32, c->nr, c->d, c->rn);
    /* float32 tiles where the norms fit float32's range (float64 data: rounded
     * copies); the bound then is float32's */
    c->tile_f32 = !rad_wide(c->qn, c->nq, 1) && !rad_wide(c->rn, c->nr, 1);
    c->wide = !c->tile_f32 && (c->f32 || rad_wide(c->qn, c->nq, 0) || rad_wide(c->rn, c->nr, 0));
    if (!c->tile_f32)
        c->tile_f32 = c->f32; /* float32 data whose norms are wide: decided exactly */
    if (c->tile_f32 && !c->f32) {
        c->Qs = rad_to_f32(c->Q, c->nq * c->d);
        c->Rs = rad_to_f32(c->R, c->nr * c->d);
        if (!c->Qs || !c->Rs)
            return gsb__err(GSB_ENOMEM, "radius_neighbors: out of memory for float32 copies");
    }
    /* |fl(q.r) - q.r| <= gamma_d ||q|| ||r|| (float64 data rounded to float32
     * adds 2 u ||q|| ||r||), plus a few double roundings: topk's bound
     * (cpu_distance.c), doubled there already */
    double teps = c->tile_f32 ? (double)FLT_EPSILON : DBL_EPSILON;
    c->slack = 2.0 * ((double)(c->d + 2 + (c->f32 ? 0 : 2)) * teps +
                      (double)(2 * c->d + 8) * DBL_EPSILON);
    if (c->tile_f32 && !(c->rbf = cpu_alloc(c->nr, sizeof(float))))
        return gsb__err(GSB_ENOMEM, "radius_neighbors: out of memory for row norms");
    for (int64_t j = 0; j < c->nr; j++) {
        c->rnorm[j] = sqrt(c->rn[j]);
        c->rb[j] = c->metric == GSB__METRIC_COSINE ? -c->rinv[j]
                                                   : c->rn[j] * (1.0 - 2.0 * c->slack);
        if (c->rbf)
            c->rbf[j] = (float)c->rb[j];
    }
    return GSB_OK;
}

/* ---- the op --------------------------------------------------------------- */

static int rad_check_grid(const gsb__radius_grid *g, const gsb__tensor *R, const char *op)
{
    if (g->dims < 1 || g->dims > 3 || g->dims != R->cols)
        return gsb__err(GSB_EINTERNAL, "%s: a grid of %d columns for %lld columns", op, g->dims,
                        (long long)R->cols);
    GSB_TRY(cpu_check_vec(g->keys, GSB_I64, R->rows, op, "grid keys"));
    for (int k = 0; k < g->dims; k++)
        if (!(g->cell[k] > 0) || g->ncell[k] < 1)
            return gsb__err(GSB_EINTERNAL, "%s: grid column %d has no cells", op, k);
    return GSB_OK;
}

static int rad_check(const gsb__tensor *Q, const gsb__tensor *R, const gsb__radius_grid *grid,
                     gsb__metric metric, double p, double eps, const gsb__tensor *counts,
                     const gsb__tensor *offsets, const gsb__tensor *idx, const gsb__tensor *dist)
{
    const char *op = "radius_neighbors";
    GSB_TRY(cpu_check(Q, 0, -1, -1, op, "Q"));
    GSB_TRY(cpu_check(R, Q->dtype, -1, Q->cols, op, "R"));
    if (metric < GSB__METRIC_SQEUCLIDEAN || metric > GSB__METRIC_CHEBYSHEV)
        return gsb__err(GSB_EINTERNAL, "%s: unknown metric %d", op, (int)metric);
    if (metric == GSB__METRIC_MINKOWSKI && !(p > 0 && isfinite(p)))
        return gsb__err(GSB_EINTERNAL, "%s: minkowski power %g", op, p);
    if (!(eps >= 0) || isinf(eps))
        return gsb__err(GSB_EINTERNAL, "%s: radius %g", op, eps);
    if (grid)
        GSB_TRY(rad_check_grid(grid, R, op));
    GSB_TRY(cpu_check_vec(counts, GSB_I64, Q->rows, op, "counts"));
    if (offsets) {
        GSB_TRY(cpu_check_vec(offsets, GSB_I64, Q->rows, op, "offsets"));
        GSB_TRY(cpu_check(idx, GSB_I64, -1, -1, op, "idx"));
        if (dist)
            GSB_TRY(cpu_check_vec(dist, GSB_F64, idx->rows * idx->cols, op, "dist"));
    }
    return cpu_blas_dims(Q->cols, R->rows, op);
}

int gsb__cpu_radius_neighbors(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R,
                              const gsb__radius_grid *grid, gsb__metric metric, double p,
                              double eps, gsb__tensor *counts, const gsb__tensor *offsets,
                              gsb__tensor *idx, gsb__tensor *dist)
{
    (void)be;
    GSB_TRY(rad_check(Q, R, grid, metric, p, eps, counts, offsets, idx, dist));
    rad_ctx c = {0};
    c.Q = Q->data;
    c.R = R->data;
    c.f32 = Q->dtype == GSB_F32;
    c.nq = Q->rows;
    c.nr = R->rows;
    c.d = Q->cols;
    c.metric = (int)metric;
    c.p = p;
    c.thr = gsb__radius_threshold(metric, p, eps);
    c.grid = grid;
    c.keys = grid ? grid->keys->data : NULL;
    c.counts = counts->data;
    c.offsets = offsets ? offsets->data : NULL;
    c.idx = offsets ? idx->data : NULL;
    c.dist = offsets && dist ? dist->data : NULL;
    c.nnz = offsets ? idx->rows * idx->cols : 0;
    atomic_init(&c.mismatch, 0);
    if (c.nq == 0)
        return GSB_OK;
    int use_gemm = !grid && c.d >= RAD_GEMM_MIN_D && c.nr > 0 &&
                   (metric == GSB__METRIC_EUCLIDEAN || metric == GSB__METRIC_SQEUCLIDEAN ||
                    metric == GSB__METRIC_COSINE);
    int rc = rad_norms(&c, use_gemm);
    if (rc == GSB_OK) {
        if (use_gemm)
            rc = rad_by_tiles(&c);
        else
            rad_by_rows(&c);
    }
    free(c.qinv);
    free(c.rinv);
    free(c.qn);
    free(c.rn);
    free(c.rnorm);
    free(c.rb);
    free(c.rbf);
    free(c.Qs);
    free(c.Rs);
    if (rc == GSB_OK && atomic_load(&c.mismatch))
        rc = gsb__err(GSB_EINTERNAL,
                      "radius_neighbors: the fill pass found other neighbours than the counts "
                      "say");
    return rc;
}
