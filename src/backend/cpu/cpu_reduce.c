/*
 * cpu_reduce.c - column and row reductions and column-wise elementwise maps
 * on the CPU: col_moments, col_minmax, row_sqnorms, col_affine, clip.
 *
 * Typed kernels are written once as macros and instantiated for float and
 * double; sums accumulate in double.  Column reductions over a row-major
 * n x d matrix are cut into tasks of (block of rows) x (tile of columns):
 * a task streams its rows' slice of contiguous columns and adds into its
 * own partial row, so the inner loop runs along memory and vectorises, and
 * the tasks cover both tall and wide matrices.  Partials are merged in a
 * fixed order, so results do not depend on the number of threads.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/tensor.h"

/* ---- argument checks (a mismatch is a bug in the caller) ---------------- */

static int need_float(const char *op, const char *name, const gsb__tensor *t)
{
    if (!t)
        return gsb__err(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (!gsb__is_float(t->dtype))
        return gsb__err(GSB_EINTERNAL, "%s: %s has dtype %s, expected a float dtype", op, name,
                        gsb_dtype_name(t->dtype));
    if (t->be && t->be != gsb__cpu_backend())
        return gsb__err(GSB_EINTERNAL, "%s: %s is not in host memory", op, name);
    if (t->rows < 0 || t->cols < 0 || (!t->data && gsb__tensor_numel(t) > 0))
        return gsb__err(GSB_EINTERNAL, "%s: %s is malformed", op, name);
    return GSB_OK;
}

/* t must be a float vector (n x 1 or 1 x n) of either float dtype */
static int need_vector(const char *op, const char *name, const gsb__tensor *t, int64_t n)
{
    GSB_TRY(need_float(op, name, t));
    if (gsb__tensor_numel(t) != n || (t->rows != 1 && t->cols != 1))
        return gsb__err(GSB_EINTERNAL, "%s: %s has shape (%lld, %lld), expected %lld elements",
                        op, name, (long long)t->rows, (long long)t->cols, (long long)n);
    return GSB_OK;
}

/* ---- work split for column reductions ------------------------------------ */

enum {
    COL_TILE = 256,        /* columns per task: 2 KiB of double partials */
    MIN_BLOCK_ROWS = 512,  /* rows per block at least ... */
    MAX_BLOCKS = 64,       /* ... and at most this many blocks */
    PAR_MIN = 1 << 18      /* elements below which a loop stays serial */
};

/* The row blocking depends on n only (never on the thread count); partial
 * rows take at most 1/MIN_BLOCK_ROWS of X's memory. */
typedef struct split {
    int64_t n, d, nblk, brows, ntile;
} split;

static split make_split(int64_t n, int64_t d)
{
    split s = {n, d, 1, n, (d + COL_TILE - 1) / COL_TILE};
    s.nblk = n / MIN_BLOCK_ROWS;
    s.nblk = s.nblk < 1 ? 1 : s.nblk > MAX_BLOCKS ? MAX_BLOCKS : s.nblk;
    s.brows = (n + s.nblk - 1) / s.nblk;
    return s;
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/*
 * The elementwise maps (col_affine, clip) and the column passes hand out
 * their work in pieces as threads come free (schedule(dynamic)), not in one
 * fixed share per thread: on a machine busier than its cores (the 2-core VM
 * beside other jobs) a thread the kernel deschedules then holds up one
 * piece, not half the loop, while the other thread takes the rest.  Results
 * do not depend on it: every element and partial has its one writer.
 * StandardScaler 200k x 64 float32 transform on two threads at load 2-3:
 * see the commit.  A piece of the maps: 64 KiB of X, some rows.
 */
#define CHUNK_BYTES 65536
#define ROWS_PER_CHUNK(d, T) \
    ((d) > 0 && (int64_t)(CHUNK_BYTES / sizeof(T)) > (d) ? (int64_t)(CHUNK_BYTES / sizeof(T)) / (d) : 1)

/* weight of row i: 1 without weights; weights are of either float dtype */
static inline double weight_at(const gsb__tensor *w, int64_t i)
{
    if (!w)
        return 1.0;
    return w->dtype == GSB_F32 ? (double)((const float *)w->data)[i]
                               : ((const double *)w->data)[i];
}

/* ---- typed kernels ---------------------------------------------------------- */

/*
 * moments_pass1_T: for each block b, s1[b*d + j] = sum_i w_i x_ij.
 * moments_pass2_T: around the mean, c1[b*d + j] = sum_i w_i (x_ij - mean_j)
 *   and c2[b*d + j] = sum_i w_i (x_ij - mean_j)^2 (the corrected two-pass
 *   scheme: c1 would be 0 in exact arithmetic and removes the rounding
 *   error of the mean from the variance).
 * minmax_T: per block, the column min and max over its rows.
 */
#define DEFINE_COLUMN_KERNELS(T, SUF)                                                       \
    static void moments_pass1_##SUF(split s, const T *x, const gsb__tensor *w, double *s1)  \
    {                                                                                       \
        _Pragma("omp parallel for collapse(2) schedule(dynamic, 1) if (s.n * s.d > PAR_MIN)") \
        for (int64_t b = 0; b < s.nblk; b++)                                                \
            for (int64_t t = 0; t < s.ntile; t++) {                                         \
                int64_t j0 = t * COL_TILE, j1 = min64(j0 + COL_TILE, s.d);                  \
                double *acc = s1 + b * s.d;                                                 \
                for (int64_t j = j0; j < j1; j++)                                           \
                    acc[j] = 0.0;                                                           \
                for (int64_t i = b * s.brows; i < min64((b + 1) * s.brows, s.n); i++) {     \
                    const T *xi = x + i * s.d;                                              \
                    double wi = weight_at(w, i);                                            \
                    _Pragma("omp simd")                                                     \
                    for (int64_t j = j0; j < j1; j++)                                       \
                        acc[j] += wi * (double)xi[j];                                       \
                }                                                                           \
            }                                                                               \
    }                                                                                       \
    static void moments_pass2_##SUF(split s, const T *x, const gsb__tensor *w,              \
                                    const double *mean, double *c1, double *c2)             \
    {                                                                                       \
        _Pragma("omp parallel for collapse(2) schedule(dynamic, 1) if (s.n * s.d > PAR_MIN)") \
        for (int64_t b = 0; b < s.nblk; b++)                                                \
            for (int64_t t = 0; t < s.ntile; t++) {                                         \
                int64_t j0 = t * COL_TILE, j1 = min64(j0 + COL_TILE, s.d);                  \
                double *a1 = c1 + b * s.d, *a2 = c2 + b * s.d;                              \
                for (int64_t j = j0; j < j1; j++)                                           \
                    a1[j] = a2[j] = 0.0;                                                    \
                for (int64_t i = b * s.brows; i < min64((b + 1) * s.brows, s.n); i++) {     \
                    const T *xi = x + i * s.d;                                              \
                    double wi = weight_at(w, i);                                            \
                    _Pragma("omp simd")                                                     \
                    for (int64_t j = j0; j < j1; j++) {                                     \
                        double dev = (double)xi[j] - mean[j];                               \
                        a1[j] += wi * dev;                                                  \
                        a2[j] += wi * dev * dev;                                            \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
    }                                                                                       \
    static void minmax_##SUF(split s, const T *x, double *mn, double *mx)                   \
    {                                                                                       \
        _Pragma("omp parallel for collapse(2) schedule(dynamic, 1) if (s.n * s.d > PAR_MIN)") \
        for (int64_t b = 0; b < s.nblk; b++)                                                \
            for (int64_t t = 0; t < s.ntile; t++) {                                         \
                int64_t j0 = t * COL_TILE, j1 = min64(j0 + COL_TILE, s.d);                  \
                int64_t i0 = b * s.brows, i1 = min64(i0 + s.brows, s.n);                    \
                double *lo = mn + b * s.d, *hi = mx + b * s.d;                              \
                for (int64_t j = j0; j < j1; j++)                                           \
                    lo[j] = hi[j] = (double)x[i0 * s.d + j];                                \
                for (int64_t i = i0 + 1; i < i1; i++) {                                     \
                    const T *xi = x + i * s.d;                                              \
                    _Pragma("omp simd")                                                     \
                    for (int64_t j = j0; j < j1; j++) {                                     \
                        double v = (double)xi[j];                                           \
                        lo[j] = v < lo[j] ? v : lo[j];                                      \
                        hi[j] = v > hi[j] ? v : hi[j];                                      \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
    }

/*
 * row_sqnorms_T: out[i] = sum_j x_ij^2 in double.
 * col_affine_T: o_ij = (x_ij - sub_j) * mul_j + add_j in double; o may be x.
 * clip_T: x = min(max(x, lo), hi); NaN stays NaN.
 */
#define DEFINE_ROW_KERNELS(T, SUF)                                                          \
    static void row_sqnorms_##SUF(int64_t n, int64_t d, const T *x, gsb__tensor *out)       \
    {                                                                                       \
        _Pragma("omp parallel for schedule(static) if (n * d > PAR_MIN)")                   \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const T *xi = x + i * d;                                                        \
            double acc = 0.0;                                                               \
            _Pragma("omp simd reduction(+ : acc)")                                          \
            for (int64_t j = 0; j < d; j++)                                                 \
                acc += (double)xi[j] * (double)xi[j];                                       \
            gsb__tensor_set(out, i, acc);                                                   \
        }                                                                                   \
    }                                                                                       \
    static void col_affine_##SUF(int64_t n, int64_t d, const T *x, const double *sub,       \
                                 const double *mul, const double *add, T *o)                \
    {                                                                                       \
        int64_t rows = ROWS_PER_CHUNK(d, T);                                                \
        _Pragma("omp parallel for schedule(dynamic, rows) if (n * d > PAR_MIN)")            \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const T *xi = x + i * d;                                                        \
            T *oi = o + i * d;                                                              \
            _Pragma("omp simd")                                                             \
            for (int64_t j = 0; j < d; j++)                                                 \
                oi[j] = (T)(((double)xi[j] - sub[j]) * mul[j] + add[j]);                    \
        }                                                                                   \
    }                                                                                       \
    static void clip_##SUF(int64_t count, T *x, T lo, T hi)                                 \
    {                                                                                       \
        int64_t chunk = CHUNK_BYTES / (int64_t)sizeof(T);                                   \
        _Pragma("omp parallel for simd schedule(dynamic, chunk) if (count > PAR_MIN)")       \
        for (int64_t i = 0; i < count; i++) {                                               \
            T v = x[i];                                                                     \
            v = v < lo ? lo : v;                                                            \
            x[i] = v > hi ? hi : v;                                                         \
        }                                                                                   \
    }

DEFINE_COLUMN_KERNELS(float, f32)
DEFINE_COLUMN_KERNELS(double, f64)
DEFINE_ROW_KERNELS(float, f32)
DEFINE_ROW_KERNELS(double, f64)

/* ---- the ops -------------------------------------------------------------- */

/*
 * mean_j = sum_i w_i x_ij / W and var_j = sum_i w_i (x_ij - mean_j)^2 / W
 * with W = sum_i w_i, by the corrected two-pass scheme (see the kernels).
 * W == 0 (no rows, or all weights zero) gives NaN, as numpy does.  var may
 * be NULL when only the means are wanted (skips the second pass).
 */
int gsb__cpu_col_moments(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *w,
                         gsb__tensor *mean, gsb__tensor *var)
{
    (void)be;
    GSB_TRY(need_float("col_moments", "X", X));
    int64_t n = X->rows, d = X->cols;
    if (w)
        GSB_TRY(need_vector("col_moments", "w", w, n));
    GSB_TRY(need_vector("col_moments", "mean", mean, d));
    if (var)
        GSB_TRY(need_vector("col_moments", "var", var, d));
    if (d == 0)
        return GSB_OK;

    split s = make_split(n, d);
    double *part1 = malloc(sizeof(double) * (size_t)(s.nblk * d));
    double *part2 = var ? malloc(sizeof(double) * (size_t)(s.nblk * d)) : NULL;
    double *mu = malloc(sizeof(double) * (size_t)d);
    if (!part1 || !mu || (var && !part2)) {
        free(part1);
        free(part2);
        free(mu);
        return gsb__err(GSB_ENOMEM, "col_moments: out of memory for %lld columns",
                        (long long)d);
    }

    double W = 0.0;
    for (int64_t i = 0; i < n; i++)
        W += weight_at(w, i);

    if (X->dtype == GSB_F32)
        moments_pass1_f32(s, X->data, w, part1);
    else
        moments_pass1_f64(s, X->data, w, part1);
    for (int64_t j = 0; j < d; j++) {
        double acc = 0.0;
        for (int64_t b = 0; b < s.nblk; b++)
            acc += part1[b * d + j];
        mu[j] = acc / W;
        gsb__tensor_set(mean, j, mu[j]);
    }

    if (var) {
        if (X->dtype == GSB_F32)
            moments_pass2_f32(s, X->data, w, mu, part1, part2);
        else
            moments_pass2_f64(s, X->data, w, mu, part1, part2);
        for (int64_t j = 0; j < d; j++) {
            double a1 = 0.0, a2 = 0.0;
            for (int64_t b = 0; b < s.nblk; b++) {
                a1 += part1[b * d + j];
                a2 += part2[b * d + j];
            }
            double v = (a2 - a1 * a1 / W) / W;
            /* the correction can push a zero variance a hair below zero */
            gsb__tensor_set(var, j, v < 0.0 ? 0.0 : v);
        }
    }
    free(part1);
    free(part2);
    free(mu);
    return GSB_OK;
}

/* With no rows, min and max are NaN. */
int gsb__cpu_col_minmax(const gsb__backend *be, const gsb__tensor *X, gsb__tensor *min,
                        gsb__tensor *max)
{
    (void)be;
    GSB_TRY(need_float("col_minmax", "X", X));
    int64_t n = X->rows, d = X->cols;
    GSB_TRY(need_vector("col_minmax", "min", min, d));
    GSB_TRY(need_vector("col_minmax", "max", max, d));
    if (n == 0) {
        for (int64_t j = 0; j < d; j++) {
            gsb__tensor_set(min, j, NAN);
            gsb__tensor_set(max, j, NAN);
        }
        return GSB_OK;
    }
    if (d == 0)
        return GSB_OK;

    split s = make_split(n, d);
    double *lo = malloc(sizeof(double) * (size_t)(s.nblk * d));
    double *hi = malloc(sizeof(double) * (size_t)(s.nblk * d));
    if (!lo || !hi) {
        free(lo);
        free(hi);
        return gsb__err(GSB_ENOMEM, "col_minmax: out of memory for %lld columns", (long long)d);
    }
    if (X->dtype == GSB_F32)
        minmax_f32(s, X->data, lo, hi);
    else
        minmax_f64(s, X->data, lo, hi);
    for (int64_t j = 0; j < d; j++) {
        double a = lo[j], z = hi[j];
        for (int64_t b = 1; b < s.nblk; b++) {
            a = lo[b * d + j] < a ? lo[b * d + j] : a;
            z = hi[b * d + j] > z ? hi[b * d + j] : z;
        }
        gsb__tensor_set(min, j, a);
        gsb__tensor_set(max, j, z);
    }
    free(lo);
    free(hi);
    return GSB_OK;
}

int gsb__cpu_row_sqnorms(const gsb__backend *be, const gsb__tensor *X, gsb__tensor *out)
{
    (void)be;
    GSB_TRY(need_float("row_sqnorms", "X", X));
    GSB_TRY(need_vector("row_sqnorms", "out", out, X->rows));
    if (X->dtype == GSB_F32)
        row_sqnorms_f32(X->rows, X->cols, X->data, out);
    else
        row_sqnorms_f64(X->rows, X->cols, X->data, out);
    return GSB_OK;
}

/* v (either float dtype, d elements, may be NULL) as doubles in dst, or
 * fill when NULL */
static void load_vector(const gsb__tensor *v, int64_t d, double fill, double *dst)
{
    for (int64_t j = 0; j < d; j++)
        dst[j] = v ? gsb__tensor_get(v, j) : fill;
}

int gsb__cpu_col_affine(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *sub,
                        const gsb__tensor *mul, const gsb__tensor *add, gsb__tensor *out)
{
    (void)be;
    GSB_TRY(need_float("col_affine", "X", X));
    int64_t n = X->rows, d = X->cols;
    if (sub)
        GSB_TRY(need_vector("col_affine", "sub", sub, d));
    if (mul)
        GSB_TRY(need_vector("col_affine", "mul", mul, d));
    if (add)
        GSB_TRY(need_vector("col_affine", "add", add, d));
    GSB_TRY(need_float("col_affine", "out", out));
    if (out->dtype != X->dtype || out->rows != n || out->cols != d)
        return gsb__err(GSB_EINTERNAL, "col_affine: out must have X's shape and dtype");
    if (d == 0 || n == 0)
        return GSB_OK;

    double *vec = malloc(sizeof(double) * 3 * (size_t)d);
    if (!vec)
        return gsb__err(GSB_ENOMEM, "col_affine: out of memory for %lld columns", (long long)d);
    /* A skipped vector becomes an identity that leaves every value bit for
     * bit unchanged: x - (+0) = x, x * 1 = x, and x + (-0) = x (x + (+0)
     * would turn -0 into +0). */
    load_vector(sub, d, 0.0, vec);
    load_vector(mul, d, 1.0, vec + d);
    load_vector(add, d, -0.0, vec + 2 * d);
    if (X->dtype == GSB_F32)
        col_affine_f32(n, d, X->data, vec, vec + d, vec + 2 * d, out->data);
    else
        col_affine_f64(n, d, X->data, vec, vec + d, vec + 2 * d, out->data);
    free(vec);
    return GSB_OK;
}

int gsb__cpu_clip(const gsb__backend *be, gsb__tensor *X, double lo, double hi)
{
    (void)be;
    GSB_TRY(need_float("clip", "X", X));
    if (X->dtype == GSB_F32)
        clip_f32(gsb__tensor_numel(X), X->data, (float)lo, (float)hi);
    else
        clip_f64(gsb__tensor_numel(X), X->data, lo, hi);
    return GSB_OK;
}
