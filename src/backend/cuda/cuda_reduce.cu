/*
 * cuda_reduce.cu - column and row reductions, column-wise elementwise maps
 * and counter-based normal numbers on the GPU: col_moments, col_minmax,
 * row_sqnorms, col_affine, clip, rand_normal.  Twins: cpu_reduce.c and
 * cpu_random.c, whose conventions these follow (double accumulation, the
 * corrected two-pass variance, NaN for no rows or zero weight).
 *
 * Column reductions of a row-major n x d matrix run in two kernels:
 *  - col_partials: block (tile, chunk) reduces one chunk of rows over one
 *    tile of columns.  Its threads cover `rstep` consecutive rows of the
 *    tile at a time, thread t on column t % width and row t / width, so a
 *    block reads whole contiguous runs of memory (coalesced) and a narrow
 *    matrix (d = 3) still keeps most threads busy.  The rows' contributions
 *    are added into one double partial per (column, chunk).
 *  - col_combine: one block per column adds that column's chunk partials by
 *    a fixed tree and writes the result.
 * The split depends only on (n, d), and every sum runs in a fixed order (no
 * atomics), so results are bitwise repeatable on a given GPU.
 */
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_common.h"
#include "backend/rand_normal.h"

namespace {

constexpr int BLOCK = 256;             /* threads per block of most kernels */
constexpr int64_t MAX_CHUNKS = 1024;   /* row chunks of a column reduction, at most */
constexpr int64_t MAX_PARTIALS = 1 << 22; /* doubles of partials (32 MiB), at most */

/* ---- argument checks (a mismatch is a bug in the caller: GSB_EINTERNAL) --- */

bool is_float(gsb_dtype dt) { return dt == GSB_F32 || dt == GSB_F64; }

int need_float(const gsb__backend *be, const char *op, const char *name, const gsb__tensor *t)
{
    if (!t)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (!is_float(t->dtype))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s, expected a float dtype", op,
                            name, gsb__cuda_dtype_name(t->dtype));
    if (t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    if (t->rows < 0 || t->cols < 0 || (!t->data && t->rows * t->cols > 0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is malformed", op, name);
    return GSB_OK;
}

/* a float vector (n x 1 or 1 x n) of either float dtype */
int need_vector(const gsb__backend *be, const char *op, const char *name, const gsb__tensor *t,
                int64_t n)
{
    int rc = need_float(be, op, name, t);
    if (rc != GSB_OK)
        return rc;
    if (t->rows * t->cols != n || (t->rows != 1 && t->cols != 1))
        return GSB_CUDA_ERR(GSB_EINTERNAL,
                            "%s: %s has shape (%lld, %lld), expected %lld elements", op, name,
                            (long long)t->rows, (long long)t->cols, (long long)n);
    return GSB_OK;
}

/* ---- vectors of either float dtype, as kernels see them ------------------ */

struct DVec { /* read-only; p NULL: absent */
    const void *p;
    int f64;
    __device__ double get(int64_t i) const
    {
        return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
    }
};

struct DOut { /* written; p NULL: skipped */
    void *p;
    int f64;
    __device__ void set(int64_t i, double v) const
    {
        if (f64)
            ((double *)p)[i] = v;
        else
            ((float *)p)[i] = (float)v;
    }
};

DVec dvec(const gsb__tensor *t) { return t ? DVec{t->data, t->dtype == GSB_F64} : DVec{NULL, 0}; }
DOut dout(gsb__tensor *t) { return t ? DOut{t->data, t->dtype == GSB_F64} : DOut{NULL, 0}; }

/* Blocks for a grid-stride loop over `work` items: enough to fill the GPU,
 * never more than the work needs. */
unsigned grid_for(const gsb__backend *be, int64_t work, int block)
{
    int64_t sms = gsb__cuda_ctx_of(be)->sm_count;
    int64_t cap = (sms > 0 ? sms : 80) * 16;
    int64_t want = (work + block - 1) / block;
    return (unsigned)(want < 1 ? 1 : want < cap ? want : cap);
}

/* ---- column reductions ---------------------------------------------------- */

enum ColMode {
    COL_SUM = 0,     /* a1 = sum w x */
    COL_CENTRED = 1, /* a1 = sum w (x - mean), a2 = sum w (x - mean)^2 */
    COL_MINMAX = 2   /* a1 = min x, a2 = max x */
};

/* How a column reduction is cut (see the file comment). */
struct ColSplit {
    int64_t n, d;
    int width;      /* columns per tile: d when d <= BLOCK, else 32 */
    int rstep;      /* rows a block covers at a time: BLOCK / width */
    int64_t ntile;  /* column tiles (grid x) */
    int64_t crows;  /* rows per chunk */
    int64_t nch;    /* row chunks (grid y), each non-empty */
};

ColSplit make_split(int64_t n, int64_t d)
{
    ColSplit s;
    s.n = n;
    s.d = d;
    s.width = d <= BLOCK ? (int)d : 32;
    s.rstep = BLOCK / s.width;
    s.ntile = (d + s.width - 1) / s.width;
    /* each thread gets a few rows of its chunk; partials stay small */
    int64_t min_rows = 4 * (int64_t)s.rstep > 64 ? 4 * (int64_t)s.rstep : 64;
    int64_t nch = (n + min_rows - 1) / min_rows;
    int64_t cap = MAX_PARTIALS / d;
    nch = nch > MAX_CHUNKS ? MAX_CHUNKS : nch;
    nch = nch > cap ? cap : nch;
    nch = nch < 1 ? 1 : nch;
    s.crows = (n + nch - 1) / nch;
    s.nch = (n + s.crows - 1) / s.crows;
    return s;
}

template <int MODE>
__device__ inline void col_merge(double &a1, double &a2, double b1, double b2)
{
    if (MODE == COL_MINMAX) {
        a1 = b1 < a1 ? b1 : a1;
        a2 = b2 > a2 ? b2 : a2;
    } else {
        a1 += b1;
        a2 += b2;
    }
}

/*
 * Block (tile, chunk): partials of its rows for its columns, written to
 * out1/out2[column * nch + chunk] (column-major, so col_combine reads each
 * column's partials contiguously).  w: row weights (COL_SUM, COL_CENTRED;
 * absent = 1); mean: the column means (COL_CENTRED).
 */
template <typename T, int MODE>
__global__ void col_partials(const T *__restrict__ x, ColSplit s, DVec w,
                             const double *__restrict__ mean, double *__restrict__ out1,
                             double *__restrict__ out2)
{
    __shared__ double sh1[BLOCK], sh2[BLOCK];
    const int t = threadIdx.x;
    const int64_t j0 = (int64_t)blockIdx.x * s.width;
    const int cw = (int)(s.d - j0 < s.width ? s.d - j0 : s.width); /* columns of this tile */
    const int col = t % s.width, r = t / s.width;
    const int64_t c = blockIdx.y;
    const int64_t i1 = (c + 1) * s.crows < s.n ? (c + 1) * s.crows : s.n;
    double a1 = MODE == COL_MINMAX ? INFINITY : 0.0;
    double a2 = MODE == COL_MINMAX ? -INFINITY : 0.0;
    if (r < s.rstep && col < cw) {
        const int64_t j = j0 + col;
        const double mu = MODE == COL_CENTRED ? mean[j] : 0.0;
#pragma unroll 4
        for (int64_t i = c * s.crows + r; i < i1; i += s.rstep) {
            double v = (double)x[i * s.d + j];
            if (MODE == COL_MINMAX) {
                a1 = v < a1 ? v : a1;
                a2 = v > a2 ? v : a2;
            } else {
                double wi = w.p ? w.get(i) : 1.0;
                if (MODE == COL_CENTRED) {
                    double dev = v - mu;
                    a1 += wi * dev;
                    a2 += wi * dev * dev;
                } else {
                    a1 += wi * v;
                }
            }
        }
    }
    sh1[t] = a1;
    sh2[t] = a2;
    __syncthreads();
    /* tree over the rstep rows of each column, in a fixed order: after the
     * step of half-width h, row r < h holds rows r and r + h merged */
    int h = 1;
    while (2 * h < s.rstep)
        h *= 2;
    for (; h >= 1; h /= 2) {
        if (r < h && r + h < s.rstep && col < cw) {
            double b1 = sh1[t], b2 = sh2[t];
            col_merge<MODE>(b1, b2, sh1[t + h * s.width], sh2[t + h * s.width]);
            sh1[t] = b1;
            sh2[t] = b2;
        }
        __syncthreads();
    }
    if (t < cw) {
        out1[(j0 + t) * s.nch + c] = sh1[t];
        if (MODE != COL_SUM)
            out2[(j0 + t) * s.nch + c] = sh2[t];
    }
}

/*
 * One block per column j (blockDim a power of two): merge its nch partials
 * by a fixed tree, then
 *   COL_SUM:     mean = a1 / W  -> mu[j] (double, may be NULL) and o1[j]
 *   COL_CENTRED: var = (a2 - a1^2 / W) / W, clamped at 0 -> o1[j]
 *   COL_MINMAX:  o1[j] = min, o2[j] = max
 * W is *Wdev when given (a weight total computed on the GPU), else Wconst.
 */
template <int MODE>
__global__ void col_combine(const double *__restrict__ p1, const double *__restrict__ p2,
                            int64_t nch, int64_t d, const double *__restrict__ Wdev,
                            double Wconst, double *__restrict__ mu, DOut o1, DOut o2)
{
    __shared__ double sh1[BLOCK], sh2[BLOCK];
    const int t = threadIdx.x;
    for (int64_t j = blockIdx.x; j < d; j += gridDim.x) {
        double a1 = MODE == COL_MINMAX ? INFINITY : 0.0;
        double a2 = MODE == COL_MINMAX ? -INFINITY : 0.0;
        for (int64_t c = t; c < nch; c += blockDim.x)
            col_merge<MODE>(a1, a2, p1[j * nch + c], MODE == COL_SUM ? 0.0 : p2[j * nch + c]);
        sh1[t] = a1;
        sh2[t] = a2;
        __syncthreads();
        for (int h = blockDim.x / 2; h >= 1; h /= 2) {
            if (t < h) {
                double b1 = sh1[t], b2 = sh2[t];
                col_merge<MODE>(b1, b2, sh1[t + h], sh2[t + h]);
                sh1[t] = b1;
                sh2[t] = b2;
            }
            __syncthreads();
        }
        if (t == 0) {
            double W = Wdev ? *Wdev : Wconst;
            if (MODE == COL_SUM) {
                double m = sh1[0] / W;
                if (mu)
                    mu[j] = m;
                if (o1.p)
                    o1.set(j, m);
            } else if (MODE == COL_CENTRED) {
                double v = (sh2[0] - sh1[0] * sh1[0] / W) / W;
                /* the correction can push a zero variance a hair below zero */
                o1.set(j, v < 0.0 ? 0.0 : v);
            } else {
                o1.set(j, sh1[0]);
                o2.set(j, sh2[0]);
            }
        }
        __syncthreads(); /* sh is reused by the next column */
    }
}

/* partials then combine for one ColMode over X (n x d, dtype dt) */
template <int MODE>
int col_reduce(const gsb__backend *be, const void *x, gsb_dtype dt, const ColSplit &s, DVec w,
               const double *mean, double *part1, double *part2, const double *Wdev,
               double Wconst, double *mu, DOut o1, DOut o2)
{
    cudaStream_t st = gsb__cuda_ctx_of(be)->stream;
    dim3 grid((unsigned)s.ntile, (unsigned)s.nch);
    if (dt == GSB_F32)
        col_partials<float, MODE><<<grid, BLOCK, 0, st>>>((const float *)x, s, w, mean, part1,
                                                          part2);
    else
        col_partials<double, MODE><<<grid, BLOCK, 0, st>>>((const double *)x, s, w, mean,
                                                           part1, part2);
    CUDA_LAUNCH_CHECK();
    int cb = 32;
    while (cb < s.nch && cb < BLOCK)
        cb *= 2;
    unsigned g = (unsigned)(s.d < (1 << 20) ? s.d : (1 << 20));
    col_combine<MODE><<<g, cb, 0, st>>>(part1, part2, s.nch, s.d, Wdev, Wconst, mu, o1, o2);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

__global__ void fill_nan(DOut o, int64_t count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        o.set(i, NAN);
}

int fill_nan_vec(const gsb__backend *be, gsb__tensor *t, int64_t count)
{
    if (!t || count == 0)
        return GSB_OK;
    fill_nan<<<grid_for(be, count, BLOCK), BLOCK, 0, gsb__cuda_ctx_of(be)->stream>>>(dout(t),
                                                                                      count);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* ---- row and elementwise kernels -------------------------------------------- */

/* out[i] = sum_j x_ij^2 in double: one thread per row (narrow X) ... */
template <typename T>
__global__ void row_sqnorms_thread(const T *__restrict__ x, int64_t n, int64_t d, DOut out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const T *xi = x + i * d;
        double acc = 0.0;
        for (int64_t j = 0; j < d; j++)
            acc += (double)xi[j] * (double)xi[j];
        out.set(i, acc);
    }
}

/* ... or one warp per row, lanes along the row, a fixed butterfly at the end */
template <typename T>
__global__ void row_sqnorms_warp(const T *__restrict__ x, int64_t n, int64_t d, DOut out)
{
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t i = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; i < n;
         i += nwarps) {
        const T *xi = x + i * d;
        double acc = 0.0;
        for (int64_t j = lane; j < d; j += 32)
            acc += (double)xi[j] * (double)xi[j];
        for (int off = 16; off > 0; off >>= 1)
            acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (lane == 0)
            out.set(i, acc);
    }
}

/* vec (3 d doubles) = sub, mul, add; an absent vector becomes the identity
 * that keeps every value bit for bit: x - (+0), x * 1, x + (-0) */
__global__ void affine_vectors(DVec sub, DVec mul, DVec add, int64_t d, double *vec)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < d;
         j += (int64_t)gridDim.x * blockDim.x) {
        vec[j] = sub.p ? sub.get(j) : 0.0;
        vec[d + j] = mul.p ? mul.get(j) : 1.0;
        vec[2 * d + j] = add.p ? add.get(j) : -0.0;
    }
}

/*
 * o = (x - sub[j]) * mul[j] + add[j] in double, rounded once to T; o may be
 * x (each element is read, then written, by one thread).  The column of the
 * grid-stride walk advances by stride % d per step, so no element needs a
 * division.  Explicit roundings (no fused multiply-add) give the CPU twin's
 * bits exactly.
 */
template <typename T>
__global__ void col_affine_kernel(const T *x, T *o, int64_t total, int64_t d,
                                  const double *__restrict__ vec)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t step = stride % d;
    int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t j = e % d;
    for (; e < total; e += stride) {
        double v = __dsub_rn((double)x[e], vec[j]);
        v = __dadd_rn(__dmul_rn(v, vec[d + j]), vec[2 * d + j]);
        o[e] = (T)v;
        j += step;
        if (j >= d)
            j -= d;
    }
}

/* x = min(max(x, lo), hi); NaN stays NaN */
template <typename T>
__global__ void clip_kernel(T *x, int64_t count, T lo, T hi)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x) {
        T v = x[i];
        v = v < lo ? lo : v;
        x[i] = v > hi ? hi : v;
    }
}

/* ---- counter-based normals (the formula: backend/rand_normal.h) ----------- */

/* pair p gives elements 2p (r cos) and 2p + 1 (r sin); an odd count drops
 * the last sine */
template <typename T>
__global__ void rand_normal_kernel(T *x, int64_t count, uint64_t key)
{
    const int64_t pairs = (count + 1) / 2;
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < pairs;
         p += (int64_t)gridDim.x * blockDim.x) {
        double r, theta;
        gsb__rand_normal_polar(key, (uint64_t)p, &r, &theta);
        int64_t i = 2 * p;
        x[i] = (T)(r * cos(theta));
        if (i + 1 < count)
            x[i + 1] = (T)(r * sin(theta));
    }
}

} /* namespace */

/* ---- the ops ----------------------------------------------------------------- */

/*
 * mean_j = sum_i w_i x_ij / W, var_j = sum_i w_i (x_ij - mean_j)^2 / W by
 * the corrected two-pass scheme (as cpu_reduce.c), W = sum_i w_i (n without
 * weights, exactly as the CPU's sum of ones).  W == 0 gives NaN.
 */
extern "C" int gsb__cuda_col_moments(const gsb__backend *be, const gsb__tensor *X,
                                     const gsb__tensor *w, gsb__tensor *mean, gsb__tensor *var)
{
    const char *op = "col_moments";
    int rc = need_float(be, op, "X", X);
    if (rc == GSB_OK && w)
        rc = need_vector(be, op, "w", w, X->rows);
    if (rc == GSB_OK)
        rc = need_vector(be, op, "mean", mean, X->cols);
    if (rc == GSB_OK && var)
        rc = need_vector(be, op, "var", var, X->cols);
    if (rc != GSB_OK)
        return rc;
    const int64_t n = X->rows, d = X->cols;
    if (d == 0)
        return GSB_OK;
    if (n == 0) {
        rc = fill_nan_vec(be, mean, d);
        return rc == GSB_OK ? fill_nan_vec(be, var, d) : rc;
    }

    const ColSplit s = make_split(n, d);
    const ColSplit sw = make_split(n, 1); /* the weight total: w as an n x 1 matrix */
    const int64_t npart = s.nch * d;
    size_t count = (size_t)(npart * (var ? 2 : 1) + d + (w ? sw.nch + 1 : 0));
    double *buf = NULL;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, count * sizeof(double), (void **)&buf));
    {
        double *part1 = buf, *part2 = var ? buf + npart : NULL;
        double *mu = buf + npart * (var ? 2 : 1);
        double *wpart = mu + d, *wtot = w ? wpart + sw.nch : NULL;
        DVec none = {NULL, 0};
        if (w)
            GSB_CUDA_CHECK(col_reduce<COL_SUM>(be, w->data, w->dtype, sw, none, NULL, wpart,
                                               NULL, NULL, 1.0, wtot, DOut{NULL, 0},
                                               DOut{NULL, 0}));
        GSB_CUDA_CHECK(col_reduce<COL_SUM>(be, X->data, X->dtype, s, dvec(w), NULL, part1, NULL,
                                           wtot, (double)n, mu, dout(mean), DOut{NULL, 0}));
        if (var)
            GSB_CUDA_CHECK(col_reduce<COL_CENTRED>(be, X->data, X->dtype, s, dvec(w), mu, part1,
                                                   part2, wtot, (double)n, NULL, dout(var),
                                                   DOut{NULL, 0}));
    }
done:
    if (buf)
        gsb__cuda_free(be, buf);
    return rc;
}

/* With no rows, min and max are NaN. */
extern "C" int gsb__cuda_col_minmax(const gsb__backend *be, const gsb__tensor *X,
                                    gsb__tensor *min, gsb__tensor *max)
{
    const char *op = "col_minmax";
    int rc = need_float(be, op, "X", X);
    if (rc == GSB_OK)
        rc = need_vector(be, op, "min", min, X->cols);
    if (rc == GSB_OK)
        rc = need_vector(be, op, "max", max, X->cols);
    if (rc != GSB_OK)
        return rc;
    const int64_t n = X->rows, d = X->cols;
    if (d == 0)
        return GSB_OK;
    if (n == 0) {
        rc = fill_nan_vec(be, min, d);
        return rc == GSB_OK ? fill_nan_vec(be, max, d) : rc;
    }
    const ColSplit s = make_split(n, d);
    double *buf = NULL;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(2 * s.nch * d) * sizeof(double), (void **)&buf));
    GSB_CUDA_CHECK(col_reduce<COL_MINMAX>(be, X->data, X->dtype, s, DVec{NULL, 0}, NULL, buf,
                                          buf + s.nch * d, NULL, 1.0, NULL, dout(min),
                                          dout(max)));
done:
    if (buf)
        gsb__cuda_free(be, buf);
    return rc;
}

extern "C" int gsb__cuda_row_sqnorms(const gsb__backend *be, const gsb__tensor *X,
                                     gsb__tensor *out)
{
    int rc = need_float(be, "row_sqnorms", "X", X);
    if (rc == GSB_OK)
        rc = need_vector(be, "row_sqnorms", "out", out, X->rows);
    if (rc != GSB_OK)
        return rc;
    const int64_t n = X->rows, d = X->cols;
    if (n == 0)
        return GSB_OK;
    cudaStream_t st = gsb__cuda_ctx_of(be)->stream;
    const bool f32 = X->dtype == GSB_F32;
    if (d <= 16) {
        unsigned g = grid_for(be, n, BLOCK);
        if (f32)
            row_sqnorms_thread<float><<<g, BLOCK, 0, st>>>((const float *)X->data, n, d, dout(out));
        else
            row_sqnorms_thread<double><<<g, BLOCK, 0, st>>>((const double *)X->data, n, d,
                                                            dout(out));
    } else {
        unsigned g = grid_for(be, n * 32, BLOCK);
        if (f32)
            row_sqnorms_warp<float><<<g, BLOCK, 0, st>>>((const float *)X->data, n, d, dout(out));
        else
            row_sqnorms_warp<double><<<g, BLOCK, 0, st>>>((const double *)X->data, n, d,
                                                          dout(out));
    }
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

extern "C" int gsb__cuda_col_affine(const gsb__backend *be, const gsb__tensor *X,
                                    const gsb__tensor *sub, const gsb__tensor *mul,
                                    const gsb__tensor *add, gsb__tensor *out)
{
    const char *op = "col_affine";
    int rc = need_float(be, op, "X", X);
    if (rc != GSB_OK)
        return rc;
    const int64_t n = X->rows, d = X->cols;
    if (rc == GSB_OK && sub)
        rc = need_vector(be, op, "sub", sub, d);
    if (rc == GSB_OK && mul)
        rc = need_vector(be, op, "mul", mul, d);
    if (rc == GSB_OK && add)
        rc = need_vector(be, op, "add", add, d);
    if (rc == GSB_OK)
        rc = need_float(be, op, "out", out);
    if (rc != GSB_OK)
        return rc;
    if (out->dtype != X->dtype || out->rows != n || out->cols != d)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: out must have X's shape and dtype", op);
    if (n == 0 || d == 0)
        return GSB_OK;

    cudaStream_t st = gsb__cuda_ctx_of(be)->stream;
    double *vec = NULL;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(3 * d) * sizeof(double), (void **)&vec));
    affine_vectors<<<grid_for(be, d, BLOCK), BLOCK, 0, st>>>(dvec(sub), dvec(mul), dvec(add), d,
                                                             vec);
    CUDA_CHECK(cudaGetLastError());
    {
        unsigned g = grid_for(be, n * d, BLOCK);
        if (X->dtype == GSB_F32)
            col_affine_kernel<float><<<g, BLOCK, 0, st>>>((const float *)X->data,
                                                          (float *)out->data, n * d, d, vec);
        else
            col_affine_kernel<double><<<g, BLOCK, 0, st>>>((const double *)X->data,
                                                           (double *)out->data, n * d, d, vec);
    }
    CUDA_CHECK(cudaGetLastError());
done:
    if (vec)
        gsb__cuda_free(be, vec);
    return rc;
}

extern "C" int gsb__cuda_clip(const gsb__backend *be, gsb__tensor *X, double lo, double hi)
{
    int rc = need_float(be, "clip", "X", X);
    if (rc != GSB_OK)
        return rc;
    const int64_t count = X->rows * X->cols;
    if (count == 0)
        return GSB_OK;
    cudaStream_t st = gsb__cuda_ctx_of(be)->stream;
    unsigned g = grid_for(be, count, BLOCK);
    if (X->dtype == GSB_F32)
        clip_kernel<float><<<g, BLOCK, 0, st>>>((float *)X->data, count, (float)lo, (float)hi);
    else
        clip_kernel<double><<<g, BLOCK, 0, st>>>((double *)X->data, count, lo, hi);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

extern "C" int gsb__cuda_rand_normal(const gsb__backend *be, gsb__tensor *t, uint64_t seed)
{
    int rc = need_float(be, "rand_normal", "t", t);
    if (rc != GSB_OK)
        return rc;
    const int64_t count = t->rows * t->cols;
    if (count == 0)
        return GSB_OK;
    cudaStream_t st = gsb__cuda_ctx_of(be)->stream;
    const uint64_t key = gsb__rand_mix(seed);
    unsigned g = grid_for(be, (count + 1) / 2, BLOCK);
    if (t->dtype == GSB_F32)
        rand_normal_kernel<float><<<g, BLOCK, 0, st>>>((float *)t->data, count, key);
    else
        rand_normal_kernel<double><<<g, BLOCK, 0, st>>>((double *)t->data, count, key);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}
