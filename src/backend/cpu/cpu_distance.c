/*
 * cpu_distance.c - the CPU backend's distance ops: pairwise, argmin_sqdist
 * (the KMeans assignment step) and topk (brute-force k nearest neighbours),
 * and gsb__cpu_lloyd_step, argmin_sqdist with KMeans' M-step sums folded
 * into the same pass over X (not an op: the CPU backend's Lloyd iteration).
 *
 * Dot-product metrics go through BLAS: squared distances by the expansion
 * ||x||^2 - 2 x.y + ||y||^2 with row norms accumulated in double, cosine as
 * x.y / (||x|| ||y||).  Manhattan is direct loops.
 *
 * Threading: one OpenMP pool does everything.  Each thread takes a block of
 * rows, computes its dot products with a single-threaded GEMM into its own
 * cache-sized tile and consumes the tile at once (argmin, selection, fix-up),
 * so no n x k matrix is ever materialised.  OpenBLAS here is its pthreads
 * build, which does not notice it is called inside an OpenMP region: for the
 * duration of such a region its thread count is set to 1 (what scikit-learn
 * does with threadpoolctl around its own OpenMP loops), see
 * gsb__cpu_blas_serial_begin.  Alternating the two pools instead leaves
 * OpenBLAS's workers spinning while OpenMP computes (measured: 4x the CPU
 * time for the same work).  Results do not depend on the number of threads:
 * pairwise and argmin blocks are fixed by the sizes alone, and topk's
 * results are exact distances whatever its blocks.
 *
 * The file is a template: the first pass (GSB_CPU_DIST_BODY undefined) holds
 * the dtype-independent helpers and includes this file twice more with
 * T = float and T = double to stamp out one generic body per op.
 */
#ifndef GSB_CPU_DIST_BODY

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_smalldots.h"
#include "backend/cpu/cpu_util.h"
#include "core/error.h"

/* Bytes of one thread's GEMM tile: about a core's L2, so the tile is still
 * in cache when the thread consumes it. */
#define DIST_TILE_BYTES ((int64_t)512 << 10)
/* Bytes of the k-best lists one thread keeps for its block of queries. */
#define DIST_HEAP_BYTES ((int64_t)4 << 20)
/* Below this much work (multiply-adds, ~0.2 ms on one core) a call stays
 * on one thread: a parallel region's fork/join, and worse its wait for a
 * core on a busy machine, costs more.  KMeans' E-step at 5000 x 20, k = 20
 * (2M) is above it: run serially, its 20 E-steps made the fit 1.6x
 * scikit-learn's time, which runs them on every core. */
#define DIST_PAR_MIN ((int64_t)1 << 20)
/* Fewest rows in one argmin_sqdist block: scikit-learn's Lloyd chunk (256
 * rows).  KMeans(20) 5000 x 20 on 16 cores had gone to 65 blocks of 78 rows,
 * a GEMM call of 31K multiply-adds each, on 16 threads. */
#define ARGMIN_MIN_ROWS 256

/* ---- bounded k-best lists (max-heaps on (dist, index)) ------------------ */

typedef struct dist_cand {
    double d;
    int64_t i;
} dist_cand;

/* a ranks after b: farther, or as far with a larger index */
static inline int cand_after(const dist_cand *a, const dist_cand *b)
{
    return a->d > b->d || (a->d == b->d && a->i > b->i);
}

static void heap_sift_down(dist_cand *h, int64_t n, int64_t at)
{
    for (;;) {
        int64_t l = 2 * at + 1, r = l + 1, top = at;
        if (l < n && cand_after(&h[l], &h[top]))
            top = l;
        if (r < n && cand_after(&h[r], &h[top]))
            top = r;
        if (top == at)
            return;
        dist_cand t = h[at];
        h[at] = h[top];
        h[top] = t;
        at = top;
    }
}

/*
 * Offer candidate (d, i) to the k-best list h holding *n entries.  Callers
 * offer indices in increasing order, so an equally distant newcomer never
 * displaces an entry (ties go to the smaller index).
 */
static inline void heap_offer(dist_cand *h, int64_t *n, int64_t k, double d, int64_t i)
{
    if (*n < k) {
        int64_t at = (*n)++;
        h[at] = (dist_cand){d, i};
        while (at > 0) {
            int64_t up = (at - 1) / 2;
            if (!cand_after(&h[at], &h[up]))
                break;
            dist_cand t = h[at];
            h[at] = h[up];
            h[up] = t;
            at = up;
        }
    } else if (d < h[0].d) {
        h[0] = (dist_cand){d, i};
        heap_sift_down(h, k, 0);
    }
}

/* Heap sort in place: afterwards h[0..n) ascends by (dist, index). */
static void heap_sort(dist_cand *h, int64_t n)
{
    for (int64_t end = n - 1; end > 0; end--) {
        dist_cand t = h[0];
        h[0] = h[end];
        h[end] = t;
        heap_sift_down(h, end, 0);
    }
}

/* 1 / ||row|| from squared norms, 0 for a zero row (cosine treats it as
 * orthogonal to everything, like scikit-learn's normalize-then-dot). */
static void inv_norms(double *sq, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        sq[i] = sq[i] > 0.0 ? 1.0 / sqrt(sq[i]) : 0.0;
}

/* ---- the generic bodies, once per float dtype --------------------------- */

#define GSB_CPU_DIST_ARGMIN_STEP
/* Two doubles, and the all-ones / zero lanes a compare of them gives (GCC and
 * Clang vector extensions: SSE2's cmppd, and, andn, or on x86-64). */
typedef double argmin_v2d __attribute__((vector_size(16)));
typedef int64_t argmin_v2i __attribute__((vector_size(16)));

/* Where u < *v: *v = u and *b = j (both lanes at once). */
static inline void argmin_step(argmin_v2d u, argmin_v2d j, argmin_v2d *v, argmin_v2d *b)
{
    argmin_v2i m = u < *v;
    *v = (argmin_v2d)(((argmin_v2i)u & m) | ((argmin_v2i)*v & ~m));
    *b = (argmin_v2d)(((argmin_v2i)j & m) | ((argmin_v2i)*b & ~m));
}


#define GSB_CPU_DIST_BODY
#define T float
#define SFX(name) name##_f32
#define GEMM cblas_sgemm
#define T_EPS ((double)FLT_EPSILON)
#define T_IS_F64 0
#include "cpu_distance.c"
#undef T
#undef SFX
#undef GEMM
#undef T_EPS
#undef T_IS_F64

#define T double
#define SFX(name) name##_f64
#define GEMM cblas_dgemm
#define T_EPS DBL_EPSILON
#define T_IS_F64 1
#include "cpu_distance.c"
#undef T
#undef SFX
#undef GEMM
#undef T_EPS
#undef T_IS_F64
#undef GSB_CPU_DIST_BODY

/* ---- the ops: argument checks, then the body of X's dtype ---------------- */

static int valid_metric(gsb__metric m)
{
    return m == GSB__METRIC_SQEUCLIDEAN || m == GSB__METRIC_EUCLIDEAN ||
           m == GSB__METRIC_MANHATTAN || m == GSB__METRIC_COSINE;
}

int gsb__cpu_pairwise(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y,
                      gsb__metric metric, gsb__tensor *D)
{
    (void)be;
    const char *op = "pairwise";
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    GSB_TRY(cpu_check(Y, X->dtype, -1, X->cols, op, "Y"));
    GSB_TRY(cpu_check(D, X->dtype, X->rows, Y->rows, op, "D"));
    if (!valid_metric(metric))
        return gsb__err(GSB_EINTERNAL, "%s: unknown metric %d", op, (int)metric);
    GSB_TRY(cpu_blas_dims(X->cols, Y->rows, op));
    return X->dtype == GSB_F32 ? pairwise_f32(X, Y, metric, D) : pairwise_f64(X, Y, metric, D);
}

int gsb__cpu_argmin_sqdist(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *C,
                           gsb__tensor *labels, gsb__tensor *mind)
{
    (void)be;
    const char *op = "argmin_sqdist";
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    GSB_TRY(cpu_check(C, X->dtype, -1, X->cols, op, "C"));
    GSB_TRY(cpu_check_vec(labels, GSB_I32, X->rows, op, "labels"));
    GSB_TRY(cpu_check_vec(mind, X->dtype, X->rows, op, "mind"));
    if (C->rows < 1 && X->rows > 0)
        return gsb__err(GSB_EINVAL, "%s: no centres given", op);
    GSB_TRY(cpu_blas_dims(X->cols, C->rows, op));
    return X->dtype == GSB_F32 ? argmin_f32(X, C, labels, mind) : argmin_f64(X, C, labels, mind);
}

int gsb__cpu_lloyd_step(const gsb__tensor *X, const gsb__tensor *C, const gsb__tensor *w,
                        gsb__tensor *labels, gsb__tensor *mind, gsb__tensor *sums,
                        gsb__tensor *counts, double *wdist)
{
    const char *op = "lloyd_step";
    GSB_TRY(cpu_check(X, 0, -1, -1, op, "X"));
    GSB_TRY(cpu_check(C, X->dtype, -1, X->cols, op, "C"));
    GSB_TRY(cpu_check_vec(labels, GSB_I32, X->rows, op, "labels"));
    GSB_TRY(cpu_check_vec(mind, X->dtype, X->rows, op, "mind"));
    if (w)
        GSB_TRY(cpu_check_vec(w, 0, X->rows, op, "w"));
    GSB_TRY(cpu_check(sums, GSB_F64, C->rows, X->cols, op, "sums"));
    GSB_TRY(cpu_check_vec(counts, GSB_F64, C->rows, op, "counts"));
    if (C->rows < 1 && X->rows > 0)
        return gsb__err(GSB_EINVAL, "%s: no centres given", op);
    GSB_TRY(cpu_blas_dims(X->cols, C->rows, op));
    return X->dtype == GSB_F32
               ? lloyd_f32(X, C, w, labels, mind, sums, counts, wdist)
               : lloyd_f64(X, C, w, labels, mind, sums, counts, wdist);
}

int gsb__cpu_topk(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R, int64_t k,
                  gsb__metric metric, int exclude_self, gsb__tensor *dist, gsb__tensor *idx)
{
    (void)be;
    const char *op = "topk";
    GSB_TRY(cpu_check(Q, 0, -1, -1, op, "Q"));
    GSB_TRY(cpu_check(R, Q->dtype, -1, Q->cols, op, "R"));
    if (!valid_metric(metric))
        return gsb__err(GSB_EINTERNAL, "%s: unknown metric %d", op, (int)metric);
    if (k <= 0)
        return gsb__err(GSB_EINVAL, "Expected n_neighbors > 0. Got %lld", (long long)k);
    if (exclude_self && Q->rows != R->rows)
        return gsb__err(GSB_EINTERNAL, "%s: exclude_self needs Q to be R", op);
    /* scikit-learn's wording: with the query set being the training set it
     * reports the strict inequality (it asks for one more neighbour). */
    if (k > R->rows - (exclude_self ? 1 : 0))
        return gsb__err(GSB_EINVAL,
                        "Expected n_neighbors %s n_samples_fit, but n_neighbors = %lld, "
                        "n_samples_fit = %lld, n_samples = %lld",
                        exclude_self ? "<" : "<=", (long long)k, (long long)R->rows,
                        (long long)Q->rows);
    GSB_TRY(cpu_check(dist, Q->dtype, Q->rows, k, op, "dist"));
    GSB_TRY(cpu_check(idx, GSB_I64, Q->rows, k, op, "idx"));
    GSB_TRY(cpu_blas_dims(Q->cols, R->rows, op));
    return Q->dtype == GSB_F32 ? topk_f32(Q, R, k, metric, exclude_self, dist, idx)
                               : topk_f64(Q, R, k, metric, exclude_self, dist, idx);
}

#else /* GSB_CPU_DIST_BODY: generic over T, SFX, GEMM, T_EPS, T_IS_F64 */

/* ---- exact per-pair kernels (double accumulation) ----------------------- */

static inline double SFX(l1dist)(const T *a, const T *b, int64_t d)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < d; j++)
        s += fabs((double)a[j] - (double)b[j]);
    return s;
}

/* out[i] = ||A[i]||^2 in double for the n rows of A (n x d). */
static void SFX(row_sqnorms)(const T *A, int64_t n, int64_t d, double *out)
{
#pragma omp parallel for if (n * d > DIST_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++)
        out[i] = SFX(cpu_dot)(A + i * d, A + i * d, d);
}

/* tile (rows x cols, leading dimension ld) = A (rows x d) @ B (cols x d)^T;
 * called from inside OpenMP regions, with BLAS made serial. */
static void SFX(gemm_abt)(const T *A, int64_t rows, const T *B, int64_t cols, int64_t d,
                          T *tile, int64_t ld)
{
    if (rows == 0 || cols == 0)
        return;
    if (d == 0) {
        for (int64_t i = 0; i < rows; i++)
            memset(tile + i * ld, 0, (size_t)cols * sizeof(T));
        return;
    }
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)cols, (int)d, 1.0, A, (int)d,
         B, (int)d, 0.0, tile, (int)ld);
}

/* ---- pairwise ----------------------------------------------------------- */

/*
 * Manhattan has no GEMM form: direct loops, parallel over blocks of rows of
 * X, with Y walked in blocks that stay in cache while those rows sweep them.
 */
static void SFX(pairwise_l1)(const T *X, int64_t n, const T *Y, int64_t m, int64_t d, T *D)
{
    const int64_t xb = 8;
    int64_t yb = cpu_max64(1, DIST_TILE_BYTES / (cpu_max64(d, 1) * (int64_t)sizeof(T)));
    int64_t nxb = (n + xb - 1) / xb;
#pragma omp parallel for if (n * m * d > DIST_PAR_MIN) schedule(dynamic, 1)
    for (int64_t b = 0; b < nxb; b++) {
        int64_t i1 = cpu_min64(n, (b + 1) * xb);
        for (int64_t j0 = 0; j0 < m; j0 += yb) {
            int64_t j1 = cpu_min64(m, j0 + yb);
            for (int64_t i = b * xb; i < i1; i++)
                for (int64_t j = j0; j < j1; j++)
                    D[i * m + j] = (T)SFX(l1dist)(X + i * d, Y + j * d, d);
        }
    }
}

/* Euclidean-family or cosine distances of one tile, from its dot products. */
static void SFX(pairwise_fix)(const double *tile, int64_t rows, int64_t cols, int64_t i0,
                              int64_t j0, const double *xn, const double *yn,
                              gsb__metric metric, int same, T *D, int64_t m)
{
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = i0 + r;
        const double *t = tile + r * cols;
        T *out = D + i * m + j0;
        for (int64_t c = 0; c < cols; c++) {
            int64_t j = j0 + c;
            double v;
            if (metric == GSB__METRIC_COSINE) {
                v = 1.0 - t[c] * xn[i] * yn[j];
                v = v < 0.0 ? 0.0 : (v > 2.0 ? 2.0 : v);
            } else {
                v = xn[i] + yn[j] - 2.0 * t[c];
                v = v > 0.0 ? v : 0.0;
                if (metric == GSB__METRIC_EUCLIDEAN)
                    v = sqrt(v);
            }
            out[c] = (T)(same && i == j ? 0.0 : v);
        }
    }
}

/*
 * Euclidean-family and cosine pairwise distances in double (float32 blocks
 * upcast): each thread takes (X block, Y block) tiles, one GEMM each, then
 * writes the tile's distances.  When X and Y are the same array the diagonal
 * is exactly 0, as in scikit-learn.
 */
static int SFX(pairwise)(const gsb__tensor *Xt, const gsb__tensor *Yt, gsb__metric metric,
                         gsb__tensor *Dt)
{
    const T *X = Xt->data, *Y = Yt->data;
    T *D = Dt->data;
    int64_t n = Xt->rows, m = Yt->rows, d = Xt->cols;
    if (n == 0 || m == 0)
        return GSB_OK;
    if (metric == GSB__METRIC_MANHATTAN) {
        SFX(pairwise_l1)(X, n, Y, m, d, D);
        return GSB_OK;
    }
    int same = X == Y && n == m;
    int64_t by = cpu_min64(m, 512);
    int64_t bx = cpu_min64(n, cpu_max64(16, DIST_TILE_BYTES / (by * (int64_t)sizeof(double))));
    int64_t nbx = (n + bx - 1) / bx, nby = (m + by - 1) / by;
    double *xn = cpu_alloc(n, sizeof(double)), *yn = cpu_alloc(m, sizeof(double));
    int oom = !xn || !yn;
    if (!oom) {
        SFX(row_sqnorms)(X, n, d, xn);
        SFX(row_sqnorms)(Y, m, d, yn);
        if (metric == GSB__METRIC_COSINE) {
            inv_norms(xn, n);
            inv_norms(yn, m);
        }
        gsb__cpu_blas_serial_begin();
#pragma omp parallel if (n * m * (d + 1) > DIST_PAR_MIN)
        {
            double *tile = cpu_alloc(bx * by, sizeof(double));
            double *xs = T_IS_F64 ? NULL : cpu_alloc(bx * d, sizeof(double));
            double *ys = T_IS_F64 ? NULL : cpu_alloc(by * d, sizeof(double));
            int ok = tile && (T_IS_F64 || (xs && ys));
            if (!ok) {
#pragma omp atomic write
                oom = 1;
            }
#pragma omp for schedule(dynamic, 1) collapse(2)
            for (int64_t bj = 0; bj < nby; bj++)
                for (int64_t bi = 0; bi < nbx; bi++) {
                    if (!ok)
                        continue;
                    int64_t i0 = bi * bx, j0 = bj * by;
                    int64_t rows = cpu_min64(bx, n - i0), cols = cpu_min64(by, m - j0);
                    /* float32 upcast, as scikit-learn does for euclidean
                     * distances, so the expansion keeps float64 accuracy */
                    const double *xb = SFX(cpu_block_f64)(X + i0 * d, rows * d, xs);
                    const double *yb = SFX(cpu_block_f64)(Y + j0 * d, cols * d, ys);
                    if (d > 0)
                        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows,
                                    (int)cols, (int)d, 1.0, xb, (int)d, yb, (int)d, 0.0, tile,
                                    (int)cols);
                    else
                        memset(tile, 0, (size_t)(rows * cols) * sizeof(double));
                    SFX(pairwise_fix)(tile, rows, cols, i0, j0, xn, yn, metric, same, D, m);
                }
            free(tile);
            free(xs);
            free(ys);
        }
        gsb__cpu_blas_serial_end();
    }
    free(xn);
    free(yn);
    if (oom)
        return gsb__err(GSB_ENOMEM, "pairwise: out of memory for %lld x %lld tiles",
                        (long long)bx, (long long)by);
    return GSB_OK;
}

/* ---- argmin_sqdist ------------------------------------------------------ */

/*
 * Labels of 8 consecutive rows of a dot-product tile (row stride ld, k
 * centres, x.c in X's dtype): per row the first j with the least ||c_j||^2 - 2 x.c_j in double
 * (||x||^2 is the same for every centre).  A row's running minimum is a chain
 * of dependent compare-selects (latency-bound: ~5 cycles a centre), so the 8
 * rows' chains run side by side, two to a vector register.  Same values,
 * same order per row (strict <): the labels of a one-row loop.
 */
static void SFX(argmin_rows8)(const T *t, int64_t ld, int64_t k, const double *cn,
                             int32_t *labels)
{
    const T *r0 = t, *r1 = r0 + ld, *r2 = r1 + ld, *r3 = r2 + ld, *r4 = r3 + ld, *r5 = r4 + ld,
            *r6 = r5 + ld, *r7 = r6 + ld;
    argmin_v2d c = {cn[0], cn[0]}, b0 = {0, 0}, b1 = b0, b2 = b0, b3 = b0;
    argmin_v2d v0 = c - 2.0 * (argmin_v2d){(double)r0[0], (double)r1[0]};
    argmin_v2d v1 = c - 2.0 * (argmin_v2d){(double)r2[0], (double)r3[0]};
    argmin_v2d v2 = c - 2.0 * (argmin_v2d){(double)r4[0], (double)r5[0]};
    argmin_v2d v3 = c - 2.0 * (argmin_v2d){(double)r6[0], (double)r7[0]};
    for (int64_t j = 1; j < k; j++) {
        argmin_v2d jd = {(double)j, (double)j};
        c = (argmin_v2d){cn[j], cn[j]};
        argmin_step(c - 2.0 * (argmin_v2d){(double)r0[j], (double)r1[j]}, jd, &v0, &b0);
        argmin_step(c - 2.0 * (argmin_v2d){(double)r2[j], (double)r3[j]}, jd, &v1, &b1);
        argmin_step(c - 2.0 * (argmin_v2d){(double)r4[j], (double)r5[j]}, jd, &v2, &b2);
        argmin_step(c - 2.0 * (argmin_v2d){(double)r6[j], (double)r7[j]}, jd, &v3, &b3);
    }
    const argmin_v2d bs[4] = {b0, b1, b2, b3};
    for (int q = 0; q < 8; q++)
        labels[q] = (int32_t)bs[q / 2][q % 2];
}

/* What every row block of one argmin_sqdist (or Lloyd step) shares. */
typedef struct SFX(argmin_plan) {
    const T *X, *C;
    int64_t n, k, d;
    int64_t kp;  /* > 0: cpu_smalldots.c's kernel on ct (d x kp); 0: a GEMM */
    int64_t ld;  /* the tile's row stride: kp or k */
    T *ct;       /* the packed centres (kp > 0) */
    double *cn;  /* ||c||^2 (k; padded to kp with +inf) */
    const double *cd; /* the centres in double (kp > 0): C itself, or cd_own */
    double *cd_own;
} SFX(argmin_plan);

static void SFX(argmin_plan_free)(SFX(argmin_plan) *p)
{
    free(p->ct);
    free(p->cn);
    free(p->cd_own);
}

static int SFX(argmin_plan_init)(SFX(argmin_plan) *p, const T *X, int64_t n, const T *C,
                                 int64_t k, int64_t d)
{
    memset(p, 0, sizeof *p);
    p->X = X;
    p->C = C;
    p->n = n;
    p->k = k;
    p->d = d;
    p->kp = gsb__cpu_smalldots_kp(k, d, sizeof(T));
    p->ld = p->kp ? p->kp : k;
    p->cn = cpu_alloc(p->kp ? p->kp : k, sizeof(double));
    p->ct = p->kp ? cpu_alloc(p->kp * d, sizeof(T)) : NULL;
    if (!p->cn || (p->kp && !p->ct)) {
        SFX(argmin_plan_free)(p);
        return gsb__err(GSB_ENOMEM, "argmin_sqdist: out of memory for %lld centres",
                        (long long)k);
    }
    SFX(row_sqnorms)(C, k, d, p->cn);
    if (p->kp) {
        SFX(gsb__cpu_smalldots_pack)(C, k, d, p->kp, p->ct);
        for (int64_t j = k; j < p->kp; j++)
            p->cn[j] = INFINITY;
#if T_IS_F64
        p->cd = C;
#else
        /* converted once, not once a row (the winner's distance) */
        if (!(p->cd_own = cpu_alloc(k * d, sizeof(double)))) {
            SFX(argmin_plan_free)(p);
            return gsb__err(GSB_ENOMEM, "argmin_sqdist: out of memory for %lld centres",
                            (long long)k);
        }
        for (int64_t e = 0; e < k * d; e++)
            p->cd_own[e] = (double)C[e];
        p->cd = p->cd_own;
#endif
    }
    return GSB_OK;
}

/* Rows [i0, i0 + rows) of X: labels and squared distances, by the tile
 * (rows x p->ld). */
static void SFX(argmin_block)(const SFX(argmin_plan) *p, int64_t i0, int64_t rows, T *tile,
                              int32_t *labels, T *mind)
{
    const T *X = p->X + i0 * p->d, *C = p->C;
    int64_t k = p->k, d = p->d, ld = p->ld;
    const double *cn = p->cn;
    labels += i0;
    mind += i0;
    if (p->kp) {
        SFX(gsb__cpu_smalldots)(X, rows, d, p->ct, p->kp, tile);
        SFX(gsb__cpu_smalldots_argmin)(tile, rows, p->kp, k, cn, X, d, p->cd, labels, mind);
        return;
    }
    SFX(gemm_abt)(X, rows, C, k, d, tile, k);
    int64_t r = 0;
    for (; r + 8 <= rows; r += 8) {
        SFX(argmin_rows8)(tile + r * ld, ld, k, cn, labels + r);
        for (int q = 0; q < 8; q++)
            mind[r + q] = (T)SFX(cpu_sqdist)(X + (r + q) * d, C + labels[r + q] * d, d);
    }
    for (; r < rows; r++) {
        const T *t = tile + r * ld;
        int64_t best = 0;
        double bv = cn[0] - 2.0 * (double)t[0];
        for (int64_t j = 1; j < k; j++) {
            double v = cn[j] - 2.0 * (double)t[j];
            if (v < bv) {
                bv = v;
                best = j;
            }
        }
        labels[r] = (int32_t)best;
        mind[r] = (T)SFX(cpu_sqdist)(X + r * d, C + best * d, d);
    }
}

/* Rows per argmin block: about a tile of DIST_TILE_BYTES, 64 to 1024 rows. */
static int64_t SFX(argmin_rows)(int64_t n, int64_t k)
{
    return cpu_min64(n, cpu_clamp64(DIST_TILE_BYTES / (k * (int64_t)sizeof(T)), 64, 1024));
}

/*
 * Each thread takes blocks of rows of X: the dot products of the block with
 * all centres into its tile (in X's dtype, as scikit-learn's Lloyd step
 * does; cpu_smalldots.c's kernel where it applies, else one GEMM), then per
 * row the argmin of ||c||^2 - 2 x.c (||x||^2 is the same for every centre),
 * and the winner's squared distance recomputed directly in double, which
 * costs what ||x||^2 would and spares inertia the expansion's cancellation.
 */
static int SFX(argmin)(const gsb__tensor *Xt, const gsb__tensor *Ct, gsb__tensor *labels_t,
                       gsb__tensor *mind_t)
{
    int32_t *labels = labels_t->data;
    T *mind = mind_t->data;
    int64_t n = Xt->rows, k = Ct->rows, d = Xt->cols;
    if (n == 0)
        return GSB_OK;
    int64_t bx = SFX(argmin_rows)(n, k);
    /* a few blocks per thread, so a small n still spreads over the cores,
     * but no block under ARGMIN_MIN_ROWS: on many cores tiny blocks cost more
     * in per-GEMM overhead and threads woken than they share out */
    bx = cpu_min64(bx, cpu_max64(ARGMIN_MIN_ROWS, n / (4 * (int64_t)omp_get_max_threads())));
    int64_t nb = (n + bx - 1) / bx;
    /* no more threads than blocks: the others would only be woken and joined */
    int nthreads = (int)cpu_min64(nb, omp_get_max_threads());
    SFX(argmin_plan) p;
    GSB_TRY(SFX(argmin_plan_init)(&p, Xt->data, n, Ct->data, k, d));
    int oom = 0;
    gsb__cpu_blas_serial_begin();
#pragma omp parallel num_threads(nthreads) if (n * k * (d + 1) > DIST_PAR_MIN)
    {
        T *tile = cpu_alloc(bx * p.ld, sizeof(T));
        if (!tile) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < nb; b++) {
            if (!tile)
                continue;
            int64_t i0 = b * bx;
            SFX(argmin_block)(&p, i0, cpu_min64(bx, n - i0), tile, labels, mind);
        }
        free(tile);
    }
    gsb__cpu_blas_serial_end();
    SFX(argmin_plan_free)(&p);
    if (oom)
        return gsb__err(GSB_ENOMEM, "argmin_sqdist: out of memory for a %lld x %lld tile",
                        (long long)bx, (long long)k);
    return GSB_OK;
}

/*
 * gsb__cpu_lloyd_step: argmin_sqdist's labels and distances (the same
 * blocks' code, so the same values) and, while each block is in cache,
 * segment_sum's weighted sums and counts and the weighted sum of the
 * distances (each distance as stored, in X's dtype).  The sums are summed
 * in segment_sum's own chunks (gsb__cpu_segment_chunks), each chunk's rows
 * in order, the partials added in chunk order, so the sums and counts, and
 * so the centres, are segment_sum's bit for bit (KMeans' fit must not
 * depend on whether its step is fused: on data with exact ties between
 * centres an ulp apart, other sums made the labels oscillate to max_iter
 * where the unfused CPU path and the CUDA backend converge in 6
 * iterations).  Where segment_sum takes fewer chunks than there are
 * threads (small n d, many cores), the argmin runs as the op does, over
 * all threads, and segment_sum after it: the same values.  Nothing depends
 * on the number of threads.
 */
static int SFX(lloyd)(const gsb__tensor *Xt, const gsb__tensor *Ct, const gsb__tensor *w,
                      gsb__tensor *labels_t, gsb__tensor *mind_t, gsb__tensor *sums_t,
                      gsb__tensor *counts_t, double *wdist)
{
    int32_t *labels = labels_t->data;
    T *mind = mind_t->data;
    const T *X = Xt->data;
    double *sums = sums_t->data, *counts = counts_t->data;
    int64_t n = Xt->rows, k = Ct->rows, d = Xt->cols, kd = k * d, stride = kd + k + 1;
    memset(sums, 0, (size_t)kd * sizeof(double));
    memset(counts, 0, (size_t)k * sizeof(double));
    *wdist = 0.0;
    if (n == 0)
        return GSB_OK;
    int64_t nch = gsb__cpu_segment_chunks(n, d, k);
    int maxthr = omp_get_max_threads();
    if (nch < maxthr) {
        /* fewer chunks than threads: fused, the argmin would leave threads
         * idle; the ops apart give the same values (the distance sum too:
         * the same chunks, each in row order, added in chunk order) */
        GSB_TRY(SFX(argmin)(Xt, Ct, labels_t, mind_t));
        GSB_TRY(gsb__cpu_segment_sum(NULL, Xt, labels_t, w, sums_t, counts_t));
        for (int64_t c = 0; c < nch; c++) {
            double dist = 0.0;
            for (int64_t i = n * c / nch; i < n * (c + 1) / nch; i++)
                dist += cpu_weight(w, i) * (double)mind[i];
            *wdist += dist;
        }
        return GSB_OK;
    }
    int64_t bx = SFX(argmin_rows)(n, k);
    int nthreads = (int)cpu_min64(nch, maxthr);
    /* the M-step's sums by cpu_smalldots.c's AVX2 loop (float64 or no
     * weights): the additions of gsb__cpu_segment_rows, in the same order */
    int avx2 = gsb__cpu_have_avx2_fma() && (!w || w->dtype == GSB_F64);
    const double *wd = w && w->dtype == GSB_F64 ? w->data : NULL;
    SFX(argmin_plan) p;
    GSB_TRY(SFX(argmin_plan_init)(&p, X, n, Ct->data, k, d));
    double *part = cpu_alloc(nch * stride, sizeof(double));
    int oom = !part;
    if (!oom) {
        gsb__cpu_blas_serial_begin();
#pragma omp parallel num_threads(nthreads) if (n * k * (d + 1) > DIST_PAR_MIN)
        {
            T *tile = cpu_alloc(bx * p.ld, sizeof(T));
            if (!tile) {
#pragma omp atomic write
                oom = 1;
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t c = 0; c < nch; c++) {
                if (!tile)
                    continue;
                double *acc = part + c * stride, *cnt = acc + kd, dist = 0.0;
                memset(acc, 0, (size_t)stride * sizeof(double));
                /* segment_sum's chunk c; its rows through the argmin in blocks of <= bx */
                int64_t c0 = n * c / nch, c1 = n * (c + 1) / nch;
                for (int64_t i0 = c0; i0 < c1; i0 += bx) {
                    int64_t i1 = cpu_min64(c1, i0 + bx);
                    SFX(argmin_block)(&p, i0, i1 - i0, tile, labels, mind);
                    if (avx2) {
                        SFX(gsb__cpu_smalldots_accum)(X + i0 * d, i1 - i0, d, labels + i0,
                                                      wd ? wd + i0 : NULL, mind + i0, acc, cnt,
                                                      &dist);
                        continue;
                    }
                    SFX(gsb__cpu_segment_rows)(X, d, labels, w, i0, i1, acc, cnt);
                    for (int64_t i = i0; i < i1; i++)
                        dist += cpu_weight(w, i) * (double)mind[i];
                }
                cnt[k] = dist;
            }
            free(tile);
        }
        gsb__cpu_blas_serial_end();
    }
    /* the partials added as segment_sum adds its own */
    if (!oom) {
        gsb__cpu_segment_reduce(part, nch, stride, kd, sums);
        gsb__cpu_segment_reduce(part + kd, nch, stride, k, counts);
        gsb__cpu_segment_reduce(part + kd + k, nch, stride, 1, wdist);
    }
    free(part);
    SFX(argmin_plan_free)(&p);
    if (oom)
        return gsb__err(GSB_ENOMEM, "lloyd_step: out of memory for %lld partial sums",
                        (long long)nch);
    return GSB_OK;
}

/* ---- topk --------------------------------------------------------------- */

/* Shared state of one topk call. */
typedef struct SFX(topk_ctx) {
    const T *Q, *R;
    int64_t nq, nr, d, k;
    gsb__metric metric;
    int exclude_self;
    double *qn, *rn; /* squared norms (cosine: inverse norms) */
    double *rnorm;   /* euclidean: ||r|| for the error bound */
    double slack;    /* relative error bound of the GEMM expansion */
    /* the screen's per-reference terms (topk_screen): euclidean (1 - slack)
     * ||r||^2 and slack ||r||; cosine 1 / ||r|| and unused */
    double *sa, *sb;
} SFX(topk_ctx);

/* The exact distance used for ranking: squared for the euclidean pair. */
static inline double SFX(exact)(const SFX(topk_ctx) *c, int64_t i, int64_t j)
{
    const T *q = c->Q + i * c->d, *r = c->R + j * c->d;
    switch (c->metric) {
    case GSB__METRIC_MANHATTAN: return SFX(l1dist)(q, r, c->d);
    case GSB__METRIC_COSINE: {
        double v = 1.0 - SFX(cpu_dot)(q, r, c->d) * c->qn[i] * c->rn[j];
        return v < 0.0 ? 0.0 : (v > 2.0 ? 2.0 : v);
    }
    default: return SFX(cpu_sqdist)(q, r, c->d);
    }
}

/*
 * Offer reference row j to query i's k-best list.  With dot (query i's dot
 * product with row j from a GEMM tile), a candidate whose expanded distance,
 * less its rounding-error bound, cannot beat the current k-th is skipped; the
 * rest are ranked by their exact distance.  So results are exact and ties
 * are broken by index exactly, whatever rounding the GEMM did.  Without a
 * tile (manhattan) every candidate is exact.
 */
static inline void SFX(topk_offer)(const SFX(topk_ctx) *c, int64_t i, int have_dot, double dot,
                                   double qn, double qnorm, int64_t j, dist_cand *h,
                                   int64_t *cnt)
{
    if (c->exclude_self && j == i)
        return;
    if (*cnt == c->k && have_dot) {
        double approx, err;
        if (c->metric == GSB__METRIC_COSINE) {
            approx = 1.0 - dot * qn * c->rn[j];
            err = c->slack;
        } else {
            approx = qn + c->rn[j] - 2.0 * dot;
            err = c->slack * (qnorm * c->rnorm[j] + qn + c->rn[j]);
        }
        if (approx - err > h[0].d)
            return;
    }
    heap_offer(h, cnt, c->k, SFX(exact)(c, i, j), j);
}

/* topk's query blocks: at most this many queries.  Each GEMM packs its
 * block of references anew, once per query block: 128 rather than 64 halves
 * that packing (KNeighborsClassifier 50k x 32, 2000 queries, f64, one
 * thread: 198 -> 185 ms with the tile below). */
#define TOPK_QB 128
/* topk's tile: 1 MiB, still inside a core's L2 (2 MiB here) while the scan
 * reads it back. */
#define TOPK_TILE ((int64_t)1 << 20)
/* References screened per step of topk_scan: a few vector registers' worth. */
#define TOPK_SCREEN 16

/*
 * Offer reference rows [j0, j1) to query i's k-best list (t: the tile row
 * of its dot products with them, or NULL).  Once the list is full, a
 * vectorisable screen first computes, for TOPK_SCREEN rows at a time, a
 * lower bound of each expanded distance less its error bound: (1 - slack)
 * (||q||^2 + ||r||^2) - slack ||q|| ||r|| - 2 q.r (cosine: 1 - slack -
 * (q.r) / (||q|| ||r||)), topk_offer's test rearranged: its few extra
 * roundings (a few ulps of ||q||^2 + ||r||^2) lie well inside the doubling of
 * the slack, so a row it drops could not have beaten the k-th and results
 * stay exact.  Only the rows whose bound reaches the current k-th distance
 * go on to topk_offer, which tests them again against the k-th as it stands
 * then, in index order as before.
 */
static void SFX(topk_scan)(const SFX(topk_ctx) *c, int64_t i, const T *t, int64_t j0,
                           int64_t j1, dist_cand *h, int64_t *cnt)
{
    int have = t != NULL;
    double qn = have ? c->qn[i] : 0.0;
    double qnorm = have && c->metric != GSB__METRIC_COSINE ? sqrt(qn) : 0.0;
    int64_t j = j0;
    for (; j < j1 && (*cnt < c->k || !have); j++)
        SFX(topk_offer)(c, i, have, have ? (double)t[j - j0] : 0.0, qn, qnorm, j, h, cnt);
    if (j == j1)
        return;
    int cosine = c->metric == GSB__METRIC_COSINE;
    double c0 = cosine ? 1.0 - c->slack : (1.0 - c->slack) * qn;
    double cq = cosine ? qn : qnorm;
    const argmin_v2d c0v = {c0, c0}, cqv = {cq, cq};
    for (; j + TOPK_SCREEN <= j1; j += TOPK_SCREEN) {
        const T *tj = t + (j - j0);
        double lb[TOPK_SCREEN], thr = h[0].d;
        const argmin_v2d thrv = {thr, thr};
        argmin_v2i pass = {0, 0};
        /* two lanes at a time (SSE2, the x86-64 baseline): GCC leaves the
         * plain loop's compare-and-or scalar */
        for (int q = 0; q < TOPK_SCREEN; q += 2) {
            argmin_v2d tq = {(double)tj[q], (double)tj[q + 1]}, a, l;
            memcpy(&a, c->sa + j + q, sizeof a);
            if (cosine) {
                l = c0v - cqv * (tq * a);
            } else {
                argmin_v2d b;
                memcpy(&b, c->sb + j + q, sizeof b);
                l = (c0v + a) - cqv * b - 2.0 * tq;
            }
            memcpy(lb + q, &l, sizeof l);
            pass |= (argmin_v2i)(l <= thrv);
        }
        if (!(pass[0] | pass[1]))
            continue;
        for (int q = 0; q < TOPK_SCREEN; q++)
            if (lb[q] <= h[0].d)
                SFX(topk_offer)(c, i, 1, (double)tj[q], qn, qnorm, j + q, h, cnt);
    }
    for (; j < j1; j++)
        SFX(topk_offer)(c, i, 1, (double)t[j - j0], qn, qnorm, j, h, cnt);
}

/* Sort query i's list and write its row of dist (metric's value) and idx. */
static void SFX(topk_emit)(const SFX(topk_ctx) *c, int64_t i, dist_cand *h, T *dist,
                           int64_t *idx)
{
    heap_sort(h, c->k);
    for (int64_t a = 0; a < c->k; a++) {
        double v = h[a].d;
        dist[i * c->k + a] = (T)(c->metric == GSB__METRIC_EUCLIDEAN ? sqrt(v) : v);
        idx[i * c->k + a] = h[a].i;
    }
}

/*
 * Each thread takes a block of queries, keeps their k-best lists, and sweeps
 * the references in blocks: one GEMM per (query block, reference block) into
 * its tile, then a scan of the tile per query.
 */
static int SFX(topk)(const gsb__tensor *Qt, const gsb__tensor *Rt, int64_t k,
                     gsb__metric metric, int exclude_self, gsb__tensor *dist_t,
                     gsb__tensor *idx_t)
{
    SFX(topk_ctx) c = {Qt->data, Rt->data, Qt->rows, Rt->rows, Qt->cols, k, metric,
                       exclude_self, NULL, NULL, NULL, 0.0, NULL, NULL};
    T *dist = dist_t->data;
    int64_t *idx = idx_t->data;
    if (c.nq == 0)
        return GSB_OK;
    int use_gemm = metric != GSB__METRIC_MANHATTAN;
    /* query blocks: up to TOPK_QB queries whose lists fit DIST_HEAP_BYTES, and
     * enough blocks to keep every thread busy; reference blocks: the tile */
    int64_t nt = omp_get_max_threads();
    int64_t qb = cpu_clamp64((c.nq + 4 * nt - 1) / (4 * nt), 1, TOPK_QB);
    qb = cpu_min64(qb, cpu_max64(1, DIST_HEAP_BYTES / (k * (int64_t)sizeof(dist_cand))));
    int64_t rb = cpu_min64(c.nr, cpu_max64(64, TOPK_TILE / (qb * (int64_t)sizeof(T))));
    int64_t nqb = (c.nq + qb - 1) / qb;
    /* |fl(q.r) - q.r| <= gamma_d ||q|| ||r|| for any summation order; the
     * norms and the exact recomputation add a few double roundings.  Doubled
     * for safety: a loose bound only costs a few extra exact checks. */
    c.slack = 2.0 * ((double)(c.d + 2) * T_EPS + (double)(2 * c.d + 8) * DBL_EPSILON);
    int oom = 0;
    if (use_gemm) {
        c.qn = cpu_alloc(c.nq, sizeof(double));
        c.rn = cpu_alloc(c.nr, sizeof(double));
        c.rnorm = cpu_alloc(c.nr, sizeof(double));
        c.sa = cpu_alloc(c.nr, sizeof(double));
        c.sb = cpu_alloc(c.nr, sizeof(double));
        oom = !c.qn || !c.rn || !c.rnorm || !c.sa || !c.sb;
    }
    if (use_gemm && !oom) {
        SFX(row_sqnorms)(c.Q, c.nq, c.d, c.qn);
        SFX(row_sqnorms)(c.R, c.nr, c.d, c.rn);
        for (int64_t j = 0; j < c.nr; j++)
            c.rnorm[j] = sqrt(c.rn[j]);
        if (metric == GSB__METRIC_COSINE) {
            inv_norms(c.qn, c.nq);
            inv_norms(c.rn, c.nr);
        }
        for (int64_t j = 0; j < c.nr; j++) {
            c.sa[j] = metric == GSB__METRIC_COSINE ? c.rn[j] : (1.0 - c.slack) * c.rn[j];
            c.sb[j] = c.slack * c.rnorm[j];
        }
    }
    if (!oom) {
        gsb__cpu_blas_serial_begin();
#pragma omp parallel if (c.nq * c.nr * (c.d + 1) > DIST_PAR_MIN)
        {
            dist_cand *heaps = cpu_alloc(qb * k, sizeof(dist_cand));
            int64_t *counts = cpu_alloc(qb, sizeof(int64_t));
            T *tile = use_gemm ? cpu_alloc(qb * rb, sizeof(T)) : NULL;
            int ok = heaps && counts && (!use_gemm || tile);
            if (!ok) {
#pragma omp atomic write
                oom = 1;
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = 0; b < nqb; b++) {
                if (!ok)
                    continue;
                int64_t q0 = b * qb, rows = cpu_min64(qb, c.nq - q0);
                memset(counts, 0, (size_t)rows * sizeof(int64_t));
                for (int64_t r0 = 0; r0 < c.nr; r0 += rb) {
                    int64_t cols = cpu_min64(rb, c.nr - r0);
                    if (tile)
                        SFX(gemm_abt)(c.Q + q0 * c.d, rows, c.R + r0 * c.d, cols, c.d, tile, rb);
                    for (int64_t a = 0; a < rows; a++)
                        SFX(topk_scan)(&c, q0 + a, tile ? tile + a * rb : NULL, r0, r0 + cols,
                                       heaps + a * k, &counts[a]);
                }
                for (int64_t a = 0; a < rows; a++)
                    SFX(topk_emit)(&c, q0 + a, heaps + a * k, dist, idx);
            }
            free(heaps);
            free(counts);
            free(tile);
        }
        gsb__cpu_blas_serial_end();
    }
    free(c.qn);
    free(c.rn);
    free(c.rnorm);
    free(c.sa);
    free(c.sb);
    if (oom)
        return gsb__err(GSB_ENOMEM, "topk: out of memory for %lld queries x %lld neighbours",
                        (long long)qb, (long long)k);
    return GSB_OK;
}

#endif /* GSB_CPU_DIST_BODY */
