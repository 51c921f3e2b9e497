/*
 * cuda_family.cu - the CUDA backend's family ops: logistic_loss_grad
 * (LogisticRegression's objective) and kernel (the SVM kernels).  Twins:
 * cpu_family.c and cpu_kernel.c, whose numerics these follow (stable
 * log-sigmoid and logsumexp in double, libsvm's powi, rbf from row norms).
 *
 * logistic_loss_grad: where its register tiles hold the shape (binary up to
 * 256 features, a few classes up to 128 or 64), one pass over X
 * (cuda_logistic_fused.cu); otherwise per block of rows (Z, and for float32
 * the block of X converted to double, each stay under LOGI_BLOCK_ELEMS
 * doubles):
 *   float32 X: the block X_b converted to double in scratch, as the CPU
 *   twin does, so everything below runs in double for both dtypes;
 *   Z = X_b coef[:, :d]^T by DGEMM;
 *   one thread per row: intercept added, the row's loss and w_i dloss/dz,
 *   the latter written over Z, the loss summed per CUDA block by a fixed
 *   tree;
 *   grad[:, :d] += Z^T X_b by DGEMM (accumulating into the double gradient),
 *   grad[:, d] += column sums of Z by DGEMV.
 * Why double for float32 X too: near the optimum the gradient is a small
 * difference of large sums over all rows, which float32 GEMMs (relative
 * error ~1e-7 sqrt(rows)) cannot resolve: L-BFGS then stops where the true
 * gradient is not ~0 (LogisticRegression's coef_ off by 1e-3 against
 * scikit-learn).  In double the result matches the CPU twin to ~1e-12
 * relative.  This holds on every GPU, whatever its FP64 rate: it decides
 * where the solver stops, not only the last digits.  Block losses are added
 * in a fixed order: results are bitwise repeatable on a given GPU.  The
 * loss and (for a host gradient) the gradient come back in one copy, one
 * wait: L-BFGS's one host sync per evaluation.
 *
 * kernel: a few rows of X (the SMO solver asks for one kernel row at a time)
 * take a direct kernel that reads Y once, accumulates in double and forms
 * rbf from the exact squared differences, as the CPU's direct path; more
 * rows take a GEMM of X Y^T into K followed by an elementwise map (rbf from
 * ||x||^2 + ||y||^2 - 2 x.y with the norms in double, clamped at 0).
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_block_sum.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_logistic_fused.h"
#include "backend/cuda/cuda_kernel_map.cuh"
#include "backend/logistic_math.h"

namespace {

constexpr int BLOCK = 256;
constexpr int64_t LOGI_BLOCK_ELEMS = (int64_t)1 << 24; /* elements of Z per block of rows */
constexpr int KER_DIRECT_ROWS = 8; /* at most this many rows of X take the direct path */


/* ---- argument checks (a mismatch is a bug in the caller: GSB_EINTERNAL) --- */

/*
 * t must exist with dtype (0: either float dtype), rows and cols (-1: any;
 * cols -2: a vector of `rows` elements in either layout), live on be (or on
 * the host when host_ok), and have data when it has elements.
 */
int check(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype, int64_t rows,
          int64_t cols, bool host_ok, const char *op, const char *name)
{
    if (!t)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (dtype ? t->dtype != dtype : (t->dtype != GSB_F32 && t->dtype != GSB_F64))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                            gsb__cuda_dtype_name(t->dtype));
    if (t->be != be && !(host_ok && t->be == gsb__cuda_host->cpu))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    if (t->rows < 0 || t->cols < 0 || (!t->data && t->rows * t->cols > 0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is malformed", op, name);
    bool bad = cols == -2 ? t->rows * t->cols != rows
                          : (rows >= 0 && t->rows != rows) || (cols >= 0 && t->cols != cols);
    if (bad)
        return GSB_CUDA_ERR(GSB_EINTERNAL,
                            "%s: %s has shape (%lld, %lld), expected %lld x %lld", op, name,
                            (long long)t->rows, (long long)t->cols, (long long)rows,
                            (long long)(cols == -2 ? 1 : cols));
    return GSB_OK;
}

/* Sample weights of either float dtype (p NULL: unit weights). */
struct DVec {
    const void *p;
    int f64;
    __device__ double get(int64_t i) const
    {
        return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
    }
};

/* cuBLAS entry points per dtype (float: float32 compute, used by kernel; the
 * handle's math mode keeps TF32 off unless GSB_ALLOW_TF32=1). */
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const double *A, int lda, const double *B, int ldb, double beta,
                    double *C, int ldc)
{
    const double one = 1.0;
    return cublasDgemm(h, ta, tb, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc);
}

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const float *A, int lda, const float *B, int ldb, double beta,
                    float *C, int ldc)
{
    const float one = 1.0f, b = (float)beta;
    return cublasGemmEx(h, ta, tb, m, n, k, &one, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &b, C,
                        CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t gemv(cublasHandle_t h, int m, int n, const double *A, int lda, const double *x,
                    double beta, double *y, int incy)
{
    const double one = 1.0;
    return cublasDgemv(h, CUBLAS_OP_N, m, n, &one, A, lda, x, 1, &beta, y, incy);
}

/* Grid for a grid-stride loop over `work` items. */
unsigned grid_for(const gsb__backend *be, int64_t work, int block)
{
    int64_t sms = gsb__cuda_ctx_of(be)->sm_count;
    int64_t cap = (sms > 0 ? sms : 80) * 16;
    int64_t want = (work + block - 1) / block;
    return (unsigned)(want < 1 ? 1 : want < cap ? want : cap);
}

/* ---- logistic_loss_grad kernels -------------------------------------------- */

/* dst[i] = (double)src[i] */
__global__ void to_double(const float *__restrict__ src, double *__restrict__ dst, int64_t count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = (double)src[i];
}

template <typename T>
__global__ void fill_value(T *dst, int64_t count, T v)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = v;
}

/*
 * Rows [i0, i0 + rows) with Z (rows x K) holding X_b coef^T: thread r takes
 * row r, adds the intercept, and replaces z by w_i dloss/dz, as the CPU's
 * row_loss_grad (binary: sigmoid(z) - y, taken as -sigmoid(-z) for y = 1 to
 * keep relative accuracy; multinomial: softmax(z) - onehot(y)).  Block b's
 * weighted loss goes to loss_part[b]; a class index outside [0, ncls) sets
 * *bad to the smallest such row (its residual becomes 0).
 */
template <typename T>
__global__ void logistic_rows(T *Z, int64_t rows, int64_t K, const int32_t *__restrict__ y,
                              DVec w, int64_t i0, const double *__restrict__ coef, int64_t p,
                              int64_t d, int fit_intercept, double *loss_part,
                              unsigned long long *bad)
{
    __shared__ double sh[BLOCK];
    const int64_t r = blockIdx.x * (int64_t)BLOCK + threadIdx.x;
    double li = 0.0;
    if (r < rows) {
        const int64_t i = i0 + r;
        const int32_t yi = y[i];
        T *z = Z + r * K;
        if (yi < 0 || yi >= (K == 1 ? 2 : K)) {
            atomicMin(bad, (unsigned long long)i);
            for (int64_t c = 0; c < K; c++)
                z[c] = (T)0;
        } else {
            const double wi = w.p ? w.get(i) : 1.0;
            auto zc = [&](int64_t c) {
                return (double)z[c] + (fit_intercept ? coef[c * p + d] : 0.0);
            };
            if (K == 1) {
                double t = zc(0);
                double g = yi ? -gsb__sigmoid(-t) : gsb__sigmoid(t);
                li = wi * gsb__log1pexp(yi ? -t : t);
                z[0] = (T)(g * wi);
            } else {
                double m = zc(0);
                for (int64_t c = 1; c < K; c++) {
                    double v = zc(c);
                    m = v > m ? v : m;
                }
                double s = 0.0;
                for (int64_t c = 0; c < K; c++)
                    s += exp(zc(c) - m);
                double lse = m + log(s);
                li = wi * (lse - zc(yi));
                for (int64_t c = 0; c < K; c++)
                    z[c] = (T)((exp(zc(c) - lse) - (c == yi ? 1.0 : 0.0)) * wi);
            }
        }
    }
    double loss = gsb__block_sum<BLOCK>(li, sh);
    if (threadIdx.x == 0)
        loss_part[blockIdx.x] = loss;
}

/* What the host reads back at the end of logistic_loss_grad. */
struct LogiResult {
    double loss;
    unsigned long long bad; /* smallest row with a bad class index, or ULLONG_MAX */
};

/* count elements of X as double: float64 X is used in place, float32 X is
 * converted into xs (count doubles of scratch) */
int block_f64(const gsb__backend *, const double *Xb, int64_t, double *, const double **out)
{
    *out = Xb;
    return GSB_OK;
}

int block_f64(const gsb__backend *be, const float *Xb, int64_t count, double *xs,
              const double **out)
{
    if (count > 0) {
        to_double<<<grid_for(be, count, BLOCK), BLOCK, 0, gsb__cuda_ctx_of(be)->stream>>>(
            Xb, xs, count);
        CUDA_LAUNCH_CHECK();
    }
    *out = xs;
    return GSB_OK;
}

/*
 * The blocks of rows of X (T: its dtype), all arithmetic in double.  coef64
 * (K x p, device), gacc (K x p, device) receives the gradient; Z (bl x K),
 * ones (bl) and, for float32 X, xs (bl x d: the block converted) are
 * scratch.
 */
template <typename T>
int logistic_blocks(const gsb__backend *be, const T *X, int64_t n, int64_t d, const int32_t *y,
                    DVec w, const double *coef64, int64_t K, int64_t p, int fit_intercept,
                    int64_t bl, double *Z, const double *ones, double *gacc, double *xs,
                    double *loss_part, LogiResult *res)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    int64_t nparts = 0;
    for (int64_t i0 = 0; i0 < n; i0 += bl) {
        const int rows = (int)(n - i0 < bl ? n - i0 : bl);
        const double *Xb = NULL;
        int rc = block_f64(be, X + i0 * d, (int64_t)rows * d, xs, &Xb);
        if (rc != GSB_OK)
            return rc;
        if (d > 0)
            CUBLAS_TRY(gemm(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)K, rows, (int)d, coef64,
                            (int)p, Xb, (int)d, 0.0, Z, (int)K));
        else
            CUDA_TRY(cudaMemsetAsync(Z, 0, (size_t)rows * (size_t)K * sizeof(double),
                                     ctx->stream));
        const int64_t nb = (rows + BLOCK - 1) / BLOCK;
        logistic_rows<double><<<(unsigned)nb, BLOCK, 0, ctx->stream>>>(
            Z, rows, K, y, w, i0, coef64, p, d, fit_intercept, loss_part + nparts, &res->bad);
        CUDA_LAUNCH_CHECK();
        nparts += nb;
        /* the first block writes the gradient, the others add to it */
        const double beta = i0 == 0 ? 0.0 : 1.0;
        if (d > 0)
            CUBLAS_TRY(gemm(ctx->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)d, (int)K, rows, Xb,
                            (int)d, Z, (int)K, beta, gacc, (int)p));
        if (fit_intercept)
            CUBLAS_TRY(gemv(ctx->blas, (int)K, rows, Z, (int)K, ones, beta, gacc + d, (int)p));
    }
    /* the blocks' losses added in a fixed order */
    gsb__block_sums_kernel<BLOCK><<<1, BLOCK, 0, ctx->stream>>>(loss_part, nparts, &res->loss);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* ---- kernel kernels --------------------------------------------------------------- */

/*
 * Direct path, n <= KER_DIRECT_ROWS: a group of LANES threads (a warp, or
 * one thread for narrow data) per row j of Y reads it once and accumulates,
 * in double, its dot products with (rbf: squared distances to) every row of
 * X; lanes are merged by a fixed butterfly.
 */
template <typename T, int LANES>
__global__ void kernel_direct(const T *__restrict__ X, int64_t n, const T *__restrict__ Y,
                              int64_t m, int64_t d, KerParams kp, T *__restrict__ K)
{
    const int lane = LANES == 1 ? 0 : (int)(threadIdx.x % LANES);
    const int64_t groups = (int64_t)gridDim.x * blockDim.x / LANES;
    const bool rbf = kp.kind == GSB__KER_RBF;
    for (int64_t j = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / LANES; j < m;
         j += groups) {
        double acc[KER_DIRECT_ROWS];
#pragma unroll
        for (int i = 0; i < KER_DIRECT_ROWS; i++)
            acc[i] = 0.0;
        const T *yj = Y + j * d;
        for (int64_t k = lane; k < d; k += LANES) {
            const double yk = (double)yj[k];
#pragma unroll
            for (int i = 0; i < KER_DIRECT_ROWS; i++) {
                if (i < n) {
                    const double xk = (double)X[i * d + k];
                    if (rbf) {
                        const double t = xk - yk;
                        acc[i] += t * t;
                    } else {
                        acc[i] += xk * yk;
                    }
                }
            }
        }
#pragma unroll
        for (int i = 0; i < KER_DIRECT_ROWS; i++) {
            if (LANES > 1)
                for (int off = LANES / 2; off > 0; off >>= 1)
                    acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], off);
            if (i < n && lane == 0)
                K[i * m + j] = (T)ker_map(kp, acc[i]);
        }
    }
}

/* GEMM path: K holds x.y (T); map it in place, rbf through the norms. */
template <typename T>
__global__ void kernel_map(T *K, int64_t n, int64_t m, const double *__restrict__ xn,
                           const double *__restrict__ yn, KerParams kp)
{
    for (int64_t i = blockIdx.y * (int64_t)blockDim.y + threadIdx.y; i < n;
         i += (int64_t)gridDim.y * blockDim.y)
        for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < m;
             j += (int64_t)gridDim.x * blockDim.x) {
            double v = (double)K[i * m + j];
            if (kp.kind == GSB__KER_RBF) {
                v = __dsub_rn(__dadd_rn(xn[i], yn[j]), __dmul_rn(2.0, v));
                v = v > 0.0 ? v : 0.0;
            }
            K[i * m + j] = (T)ker_map(kp, v);
        }
}

template <typename T>
int kernel_typed(const gsb__backend *be, const gsb__tensor *Xt, const gsb__tensor *Yt,
                 const KerParams &kp, gsb__tensor *Kt)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    const T *X = (const T *)Xt->data, *Y = (const T *)Yt->data;
    T *K = (T *)Kt->data;
    const int64_t n = Xt->rows, m = Yt->rows, d = Xt->cols;
    if (n <= KER_DIRECT_ROWS) {
        if (d >= 32)
            kernel_direct<T, 32><<<grid_for(be, m * 32, BLOCK), BLOCK, 0, ctx->stream>>>(
                X, n, Y, m, d, kp, K);
        else
            kernel_direct<T, 1><<<grid_for(be, m, BLOCK), BLOCK, 0, ctx->stream>>>(X, n, Y, m,
                                                                                   d, kp, K);
        CUDA_LAUNCH_CHECK();
        return GSB_OK;
    }

    int rc = GSB_OK;
    double *norms = NULL;
    if (kp.kind == GSB__KER_RBF) {
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(n + m) * sizeof(double), (void **)&norms));
        gsb__tensor xn = {norms, GSB_F64, n, 1, 1, be, 0};
        gsb__tensor yn = {norms + n, GSB_F64, m, 1, 1, be, 0};
        GSB_CUDA_CHECK(gsb__cuda_row_sqnorms(be, Xt, &xn));
        GSB_CUDA_CHECK(gsb__cuda_row_sqnorms(be, Yt, &yn));
    }
    /* K^T (m x n, column-major) = Y X^T; rows of X in blocks cuBLAS can index */
    for (int64_t i0 = 0; i0 < n; i0 += INT_MAX / 2) {
        const int rows = (int)(n - i0 < INT_MAX / 2 ? n - i0 : INT_MAX / 2);
        if (d > 0)
            CUBLAS_CHECK(gemm(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, rows, (int)d, Y,
                              (int)d, X + i0 * d, (int)d, 0.0, K + i0 * m, (int)m));
        else
            CUDA_CHECK(cudaMemsetAsync(K + i0 * m, 0, (size_t)rows * (size_t)m * sizeof(T),
                                       ctx->stream));
    }
    if (kp.kind != GSB__KER_LINEAR) {
        dim3 block(32, 8);
        int64_t gx = (m + 31) / 32, gy = (n + 7) / 8;
        dim3 grid((unsigned)(gx < 1024 ? gx : 1024), (unsigned)(gy < 4096 ? gy : 4096));
        kernel_map<T><<<grid, block, 0, ctx->stream>>>(K, n, m, norms, norms ? norms + n : NULL,
                                                       kp);
        CUDA_CHECK(cudaGetLastError());
    }
done:
    if (norms)
        gsb__cuda_free(be, norms);
    return rc;
}

} /* namespace */

/* ---- the ops --------------------------------------------------------------------------- */

/*
 * coef and grad may live on the GPU (the estimator allocates them on its
 * backend) or on the host; *loss is a host scalar, so this op waits for the
 * stream before returning.
 */
extern "C" int gsb__cuda_logistic_loss_grad(const gsb__backend *be, const gsb__tensor *X,
                                            const gsb__tensor *y, const gsb__tensor *w,
                                            const gsb__tensor *coef, int fit_intercept,
                                            double *loss, gsb__tensor *grad)
{
    const char *op = "logistic_loss_grad";
    int rc = check(be, X, (gsb_dtype)0, -1, -1, false, op, "X");
    if (rc != GSB_OK)
        return rc;
    const int64_t n = X->rows, d = X->cols, p = d + (fit_intercept ? 1 : 0);
    if ((rc = check(be, y, GSB_I32, n, -2, false, op, "y")) != GSB_OK)
        return rc;
    if (w && (rc = check(be, w, (gsb_dtype)0, n, -2, false, op, "w")) != GSB_OK)
        return rc;
    if ((rc = check(be, coef, GSB_F64, -1, p, true, op, "coef")) != GSB_OK)
        return rc;
    if ((rc = check(be, grad, GSB_F64, coef->rows, p, true, op, "grad")) != GSB_OK)
        return rc;
    if (!loss)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: loss is missing", op);
    const int64_t K = coef->rows;
    if (K < 1)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: coef has no rows", op);
    if (p > INT_MAX || K > INT_MAX)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "%s: dimension too large for cuBLAS", op);

    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    const bool f32 = X->dtype == GSB_F32;
    const bool coef_host = coef->be != be, grad_host = grad->be != be;
    const int64_t kp = K * p;
    /* one read of X where the one-pass kernel's tiles hold the shape, else
     * blocks of rows by GEMM */
    const bool fused = n > 0 && gsb__cuda_logistic_fused_fits(d, K);
    /* rows per block: Z (bl x K) and, for float32, the converted block
     * (bl x d) each hold at most LOGI_BLOCK_ELEMS doubles (128 MiB) */
    int64_t bl = LOGI_BLOCK_ELEMS / K;
    if (f32 && d > 0 && LOGI_BLOCK_ELEMS / d < bl)
        bl = LOGI_BLOCK_ELEMS / d;
    bl = bl < 1 ? 1 : bl;
    bl = n < bl ? n : bl;
    const int64_t nparts = n == 0 ? 0 : (n + BLOCK - 1) / BLOCK + (n + bl - 1) / bl;

    /* the result and a host gradient side by side: one copy back, one wait */
    const size_t back = sizeof(LogiResult) + (grad_host ? (size_t)kp * sizeof(double) : 0);
    gsb__cuda_carve cv;
    const size_t o_res = cv.take(back);
    const size_t o_coef = coef_host ? cv.take((size_t)kp * sizeof(double)) : 0;
    const size_t o_part = fused ? 0 : cv.take((size_t)(nparts > 0 ? nparts : 1) * sizeof(double));
    const size_t o_z = fused ? 0 : cv.take((size_t)(bl * K) * sizeof(double));
    const size_t o_ones = fused ? 0 : cv.take((size_t)bl * sizeof(double));
    const size_t o_xs = f32 && !fused ? cv.take((size_t)(bl * d) * sizeof(double)) : 0;
    char *buf = NULL, *hbuf = (char *)malloc(back);
    if (!hbuf)
        return GSB_CUDA_ERR(GSB_ENOMEM, "%s: out of host memory", op);
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, cv.bytes, (void **)&buf));
    {
        LogiResult *res = (LogiResult *)(buf + o_res);
        LogiResult host_res;
        double *coef64 = coef_host ? (double *)(buf + o_coef) : (double *)coef->data;
        double *gacc = grad_host ? (double *)(buf + o_res + sizeof(LogiResult))
                                 : (double *)grad->data;
        CUDA_CHECK(cudaMemsetAsync(res, 0, sizeof *res, ctx->stream));
        CUDA_CHECK(cudaMemsetAsync(&res->bad, 0xFF, sizeof res->bad, ctx->stream));
        if (coef_host && kp > 0)
            CUDA_CHECK(cudaMemcpyAsync(coef64, coef->data, (size_t)kp * sizeof(double),
                                       cudaMemcpyHostToDevice, ctx->stream));
        if (n == 0 && kp > 0) /* no rows: zero loss and gradient, as the CPU */
            CUDA_CHECK(cudaMemsetAsync(gacc, 0, (size_t)kp * sizeof(double), ctx->stream));
        if (fused) {
            GSB_CUDA_CHECK(gsb__cuda_logistic_fused(
                be, f32, X->data, n, d, (const int32_t *)y->data, w ? w->data : NULL,
                w && w->dtype == GSB_F64, coef64, K, fit_intercept, gacc, &res->loss, &res->bad));
        } else if (n > 0) {
            double *ones = (double *)(buf + o_ones), *Z = (double *)(buf + o_z);
            double *part = (double *)(buf + o_part);
            const DVec wv = {w ? w->data : NULL, w && w->dtype == GSB_F64};
            fill_value<double><<<grid_for(be, bl, BLOCK), BLOCK, 0, ctx->stream>>>(ones, bl, 1.0);
            CUDA_CHECK(cudaGetLastError());
            if (f32)
                GSB_CUDA_CHECK(logistic_blocks<float>(
                    be, (const float *)X->data, n, d, (const int32_t *)y->data, wv, coef64, K, p,
                    fit_intercept, bl, Z, ones, gacc, (double *)(buf + o_xs), part, res));
            else
                GSB_CUDA_CHECK(logistic_blocks<double>(
                    be, (const double *)X->data, n, d, (const int32_t *)y->data, wv, coef64, K,
                    p, fit_intercept, bl, Z, ones, gacc, (double *)NULL, part, res));
        }
        CUDA_CHECK(cudaMemcpyAsync(hbuf, res, back, cudaMemcpyDeviceToHost, ctx->stream));
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        memcpy(&host_res, hbuf, sizeof host_res);
        if (host_res.bad != ~0ull) {
            int32_t cls = 0;
            CUDA_CHECK(cudaMemcpyAsync(&cls, (const int32_t *)y->data + host_res.bad,
                                       sizeof cls, cudaMemcpyDeviceToHost, ctx->stream));
            CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
            rc = GSB_CUDA_ERR(GSB_EINVAL,
                              "logistic_loss_grad: class index %d of row %lld is outside "
                              "[0, %lld)",
                              (int)cls, (long long)host_res.bad, (long long)(K == 1 ? 2 : K));
            goto done;
        }
        if (grad_host && kp > 0)
            memcpy(grad->data, hbuf + sizeof(LogiResult), (size_t)kp * sizeof(double));
        *loss = host_res.loss;
    }
done:
    if (buf)
        gsb__cuda_free(be, buf);
    free(hbuf);
    return rc;
}

extern "C" int gsb__cuda_kernel(const gsb__backend *be, const gsb__tensor *X,
                                const gsb__tensor *Y, int kind, double gamma, double coef0,
                                int degree, gsb__tensor *K)
{
    const char *op = "kernel";
    int rc = check(be, X, (gsb_dtype)0, -1, -1, false, op, "X");
    if (rc == GSB_OK)
        rc = check(be, Y, X->dtype, -1, X->cols, false, op, "Y");
    if (rc == GSB_OK)
        rc = check(be, K, X->dtype, X->rows, Y->rows, false, op, "K");
    if (rc != GSB_OK)
        return rc;
    if (kind < GSB__KER_LINEAR || kind > GSB__KER_SIGMOID)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "kernel: unknown kernel kind %d", kind);
    if (kind == GSB__KER_POLY && degree < 0)
        return GSB_CUDA_ERR(GSB_EINVAL, "kernel: degree of polynomial kernel < 0");
    if (X->cols > INT_MAX || Y->rows > INT_MAX)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "kernel: dimension too large for cuBLAS (%lld)",
                            (long long)(X->cols > Y->rows ? X->cols : Y->rows));
    if (X->rows == 0 || Y->rows == 0)
        return GSB_OK;
    const KerParams kp = {kind, gamma, coef0, degree};
    return X->dtype == GSB_F32 ? kernel_typed<float>(be, X, Y, kp, K)
                               : kernel_typed<double>(be, X, Y, kp, K);
}
