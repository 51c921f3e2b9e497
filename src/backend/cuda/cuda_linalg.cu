/*
 * cuda_linalg.cu - dense linear algebra on the GPU: gemm and syrk through
 * cuBLAS; eigh, posv, svd, lstsq and orthonormalize through cuSOLVER.  The
 * same functions as cpu_linalg.c, with the same conventions.
 *
 * Layout.  Our tensors are row-major; cuBLAS and cuSOLVER are column-major.
 * A row-major m x n array read column-major is its transpose (n x m), so:
 *  - gemm: C = op(A) op(B) is, read column-major, C^T = op(B)^T op(A)^T:
 *    one cuBLAS call with the operands swapped, no copies.
 *  - syrk: C = A^T A with row-major A (m x n) is, column-major, At At^T
 *    for At (n x m): cuBLAS syrk with OP_N.  Column-major lower triangle ==
 *    row-major upper triangle, the one the CPU twin reads and writes; a
 *    small kernel then mirrors it so both triangles are written.
 *  - eigh, posv: A is symmetric, so its column-major view is A itself; the
 *    column-major eigenvectors (vector j in column j) are transposed into
 *    V's rows by a kernel.  B of posv is transposed into column-major
 *    scratch and back.
 *  - svd: gesvd needs rows >= cols in column-major terms.  A wide row-major
 *    A (m <= n) is, column-major, A^T (n x m), which is tall: gesvd of A^T =
 *    V S U^T writes V as its left vectors (n x r, ld n), whose memory read
 *    row-major is exactly Vt (r x n), and U^T as its right vectors (r x m,
 *    ld r), whose memory read row-major is U (m x r): no transposes.  A
 *    tall A (m > n) is transposed into column-major scratch first and its
 *    U and Vt transposed back.  (gesvd, not gesvdj: it is the QR-iteration
 *    SVD, as accurate as the CPU's gesdd for the ill-conditioned matrices
 *    that PCA and lstsq get; gesvdj's accuracy depends on a tolerance.)
 *  - lstsq: through the thin SVD, X = V diag(s_i > tol ? 1 / s_i : 0) U^T B,
 *    the minimum-norm solution that the CPU's gelsd computes.
 *  - orthonormalize: a tall row-major A is a wide column-major array, so it
 *    is transposed into column-major scratch (tall) for geqrf + orgqr and
 *    back.
 * cuSOLVER's 64-bit (X) API is used where it exists (its workspace sizes do
 * not overflow int); orgqr exists only in the legacy int API.
 *
 * float32 gemm and syrk over a long inner dimension (k >= ACC_MIN_K) with a
 * small result (at most ACC_MAX_MN elements: Gram matrices, X^T y, U^T B)
 * are summed in chunks.  A float32 GEMM keeps one float accumulator per
 * element of C along all of k, so its error grows with k: X^T X over 5000
 * rows lost enough digits that Ridge's float32 coef_ was 15x less accurate
 * than scikit-learn's (OpenBLAS blocks k, which bounds the run of float
 * additions).  Here a strided-batched SGEMM computes the product of each
 * chunk of ACC_KC = 256 along k into its own float32 partial, a kernel adds
 * the partials into a double accumulator in chunk order, and C gets
 * alpha * acc + beta * C rounded to float32 once: float additions run over
 * at most 256 terms, the rest is exact to double.  The same products, twice
 * the flops of syrk (both triangles), and the partials' traffic: a few ms
 * for X^T X of 1M x 256.  Large results (C of GEMM-benchmark size) and short
 * k keep one SGEMM.
 *
 * float64 syrk over a long inner dimension with a small result (n <= 256,
 * k >= 2 ACC64_KC: the Gram matrices of the streamed fits, 64 x 64 over
 * ~300k rows a batch) goes the same way, for speed rather than accuracy:
 * cuBLAS' DSYRK tiles only the small n x n output, so a handful of blocks
 * walk all of k while the rest of the GPU idles (several times slower than
 * the same product through DGEMM for tall-skinny A).  Chunks of ACC64_KC
 * rows are independent DGEMMs of one strided batch, their float64 partials
 * added in chunk order as above: deterministic, and the additions along k
 * run over at most ACC64_KC terms at a time.  Other float64 gemms are
 * untouched.
 *
 * Every op checks its arguments like the CPU twin (GSB_EINTERNAL on a
 * mismatch), works on ctx->stream, takes scratch from the pool, and syncs
 * the stream only to read a factorisation's info (or a rank) back.
 */
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "backend/cuda/cuda_common.h"

namespace {

constexpr int THREADS = 256;
constexpr int TILE = 32, TILE_ROWS = 8; /* transpose: 32 x 32 tiles, 32 x 8 threads */
/* float32 products summed in chunks (see the top): the chunk along k, the
 * least k that takes that path, the largest C, the bytes of float32
 * partials per batched call */
constexpr int64_t ACC_KC = 256;
constexpr int64_t ACC_MIN_K = 2 * ACC_KC;
constexpr int64_t ACC_MAX_MN = (int64_t)1 << 22;
constexpr int64_t ACC_PART_BYTES = (int64_t)64 << 20;
/* float64 syrk in chunks (see the top): the chunk along k, the largest n */
constexpr int64_t ACC64_KC = 4096;
constexpr int64_t ACC64_MAX_N = 256;

/* ---- argument checks (a mismatch is a bug in the caller) ------------------ */

int need_float(const gsb__backend *be, const char *op, const char *name, const gsb__tensor *t)
{
    if (!t)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (t->dtype != GSB_F32 && t->dtype != GSB_F64)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %d, expected a float dtype", op,
                            name, (int)t->dtype);
    /* cuBLAS' and cuSOLVER's legacy entry points take 32-bit dimensions */
    if (t->rows < 0 || t->cols < 0 || t->rows > INT_MAX || t->cols > INT_MAX)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s shape (%lld, %lld) is out of range", op,
                            name, (long long)t->rows, (long long)t->cols);
    if (t->rows * t->cols > 0 && (t->be != be || !t->data))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    return GSB_OK;
}

/* t must be a float tensor of dtype dt and shape rows x cols */
int need_matrix(const gsb__backend *be, const char *op, const char *name, const gsb__tensor *t,
                gsb_dtype dt, int64_t rows, int64_t cols)
{
    PASS(need_float(be, op, name, t));
    if (t->dtype != dt)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s, expected %s", op, name,
                            gsb__cuda_dtype_name(t->dtype), gsb__cuda_dtype_name(dt));
    if (t->rows != rows || t->cols != cols)
        return GSB_CUDA_ERR(GSB_EINTERNAL,
                            "%s: %s has shape (%lld, %lld), expected (%lld, %lld)", op, name,
                            (long long)t->rows, (long long)t->cols, (long long)rows,
                            (long long)cols);
    return GSB_OK;
}

/* t must be a float vector of dtype dt with n elements (n x 1 or 1 x n) */
int need_vector(const gsb__backend *be, const char *op, const char *name, const gsb__tensor *t,
                gsb_dtype dt, int64_t n)
{
    PASS(need_float(be, op, name, t));
    if (t->dtype != dt)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s, expected %s", op, name,
                            gsb__cuda_dtype_name(t->dtype), gsb__cuda_dtype_name(dt));
    if (t->rows * t->cols != n || (t->rows != 1 && t->cols != 1))
        return GSB_CUDA_ERR(GSB_EINTERNAL,
                            "%s: %s has shape (%lld, %lld), expected %lld elements", op, name,
                            (long long)t->rows, (long long)t->cols, (long long)n);
    return GSB_OK;
}

inline int64_t ld(int64_t n) { return n > 1 ? n : 1; }
inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

cudaStream_t stream_of(const gsb__backend *be) { return gsb__cuda_ctx_of(be)->stream; }

int blocks_for(const gsb__backend *be, int64_t n)
{
    int64_t blocks = (n + THREADS - 1) / THREADS;
    int sms = gsb__cuda_ctx_of(be)->sm_count;
    int64_t cap = (int64_t)(sms > 0 ? sms : 16) * 16; /* grid-stride loops do the rest */
    return (int)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

/* ---- scratch owned by one op: freed (stream-ordered) when it goes out of scope */

struct dev_buf {
    const gsb__backend *be;
    void *p = nullptr;
    explicit dev_buf(const gsb__backend *b) : be(b) {}
    ~dev_buf() { gsb__cuda_free(be, p); }
    dev_buf(const dev_buf &) = delete;
    dev_buf &operator=(const dev_buf &) = delete;
    int alloc(size_t bytes) { return gsb__cuda_alloc(be, bytes, &p); }
    template <typename T> int alloc_n(int64_t count) { return alloc((size_t)count * sizeof(T)); }
    template <typename T> T *as() const { return static_cast<T *>(p); }
};

/* cuSOLVER's host workspace.  Freed only after the stream has drained, in
 * case the library still refers to it from queued work. */
struct host_buf {
    cudaStream_t stream;
    void *p = nullptr;
    explicit host_buf(cudaStream_t s) : stream(s) {}
    ~host_buf()
    {
        if (p) {
            if (cudaStreamSynchronize(stream) != cudaSuccess)
                (void)cudaGetLastError();
            free(p);
        }
    }
    host_buf(const host_buf &) = delete;
    host_buf &operator=(const host_buf &) = delete;
    int alloc(size_t bytes)
    {
        if (bytes == 0)
            return GSB_OK;
        p = malloc(bytes);
        if (!p)
            return GSB_CUDA_ERR(GSB_ENOMEM, "out of host memory allocating %zu bytes of "
                                            "cuSOLVER workspace", bytes);
        return GSB_OK;
    }
};

struct solver_params {
    cusolverDnParams_t p = nullptr;
    solver_params() = default;
    ~solver_params()
    {
        if (p)
            cusolverDnDestroyParams(p);
    }
    solver_params(const solver_params &) = delete;
    solver_params &operator=(const solver_params &) = delete;
    int create()
    {
        CUSOLVER_TRY(cusolverDnCreateParams(&p));
        return GSB_OK;
    }
};

/* Device ints (a factorisation's info) read back to the host: waits for the stream. */
int read_infos(const gsb__backend *be, const int *dev, int *host, int count)
{
    CUDA_TRY(cudaMemcpyAsync(host, dev, sizeof(int) * (size_t)count, cudaMemcpyDeviceToHost,
                             stream_of(be)));
    CUDA_TRY(cudaStreamSynchronize(stream_of(be)));
    return GSB_OK;
}

/* ---- per-type library entry points ------------------------------------------- */

template <typename T> struct la;

template <> struct la<float> {
    static constexpr cudaDataType type = CUDA_R_32F;
    static constexpr double eps = FLT_EPSILON / 2; /* LAPACK's slamch('E') */
    static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                               int m, int n, int k, const float *alpha, const float *A, int lda,
                               const float *B, int ldb, const float *beta, float *C, int ldc)
    {
        return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    static cublasStatus_t gemm_sb(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                  int m, int n, int k, const float *alpha, const float *A,
                                  int lda, long long sa, const float *B, int ldb, long long sb,
                                  const float *beta, float *C, int ldc, long long sc, int count)
    {
        return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta,
                                         C, ldc, sc, count);
    }
    static cublasStatus_t syrk(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t t,
                               int n, int k, const float *alpha, const float *A, int lda,
                               const float *beta, float *C, int ldc)
    {
        return cublasSsyrk(h, uplo, t, n, k, alpha, A, lda, beta, C, ldc);
    }
    static cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, const float *A,
                                       int lda, const float *tau, int *lwork)
    {
        return cusolverDnSorgqr_bufferSize(h, m, n, n, A, lda, tau, lwork);
    }
    static cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, float *A, int lda,
                                  const float *tau, float *work, int lwork, int *info)
    {
        return cusolverDnSorgqr(h, m, n, n, A, lda, tau, work, lwork, info);
    }
};

template <> struct la<double> {
    static constexpr cudaDataType type = CUDA_R_64F;
    static constexpr double eps = DBL_EPSILON / 2; /* LAPACK's dlamch('E') */
    static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                               int m, int n, int k, const double *alpha, const double *A,
                               int lda, const double *B, int ldb, const double *beta, double *C,
                               int ldc)
    {
        return cublasDgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    static cublasStatus_t gemm_sb(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                  int m, int n, int k, const double *alpha, const double *A,
                                  int lda, long long sa, const double *B, int ldb, long long sb,
                                  const double *beta, double *C, int ldc, long long sc, int count)
    {
        return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta,
                                         C, ldc, sc, count);
    }
    static cublasStatus_t syrk(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t t,
                               int n, int k, const double *alpha, const double *A, int lda,
                               const double *beta, double *C, int ldc)
    {
        return cublasDsyrk(h, uplo, t, n, k, alpha, A, lda, beta, C, ldc);
    }
    static cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, const double *A,
                                       int lda, const double *tau, int *lwork)
    {
        return cusolverDnDorgqr_bufferSize(h, m, n, n, A, lda, tau, lwork);
    }
    static cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, double *A, int lda,
                                  const double *tau, double *work, int lwork, int *info)
    {
        return cusolverDnDorgqr(h, m, n, n, A, lda, tau, work, lwork, info);
    }
};

/* ---- kernels ------------------------------------------------------------------ */

/*
 * dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols (the CPU
 * twin's transpose).  A 32 x 32 tile passes through shared memory so that
 * both the reads and the writes are coalesced; the +1 column keeps the
 * column reads free of bank conflicts.  Tiles are grid-strided, so any
 * shape fits the grid.  The loop bounds depend on the block only, so every
 * thread reaches each __syncthreads.
 */
template <typename T>
__global__ void transpose_kernel(int64_t rows, int64_t cols, const T *__restrict__ src,
                                 int64_t lds, T *__restrict__ dst, int64_t ldd)
{
    __shared__ T tile[TILE][TILE + 1];
    for (int64_t r0 = (int64_t)blockIdx.y * TILE; r0 < rows; r0 += (int64_t)gridDim.y * TILE)
        for (int64_t c0 = (int64_t)blockIdx.x * TILE; c0 < cols;
             c0 += (int64_t)gridDim.x * TILE) {
            for (int k = threadIdx.y; k < TILE; k += TILE_ROWS) {
                int64_t i = r0 + k, j = c0 + threadIdx.x;
                if (i < rows && j < cols)
                    tile[k][threadIdx.x] = src[i * lds + j];
            }
            __syncthreads();
            for (int k = threadIdx.y; k < TILE; k += TILE_ROWS) {
                int64_t j = c0 + k, i = r0 + threadIdx.x;
                if (i < rows && j < cols)
                    dst[j * ldd + i] = tile[threadIdx.x][k];
            }
            __syncthreads();
        }
}

/* C (n x n, row-major): the strict lower triangle := the upper one */
template <typename T> __global__ void mirror_upper_kernel(int64_t n, T *C)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n * n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = idx / n, j = idx - i * n;
        if (j < i)
            C[idx] = C[j * n + i];
    }
}

/* p[0..n) *= beta; beta == 0 writes zeros (BLAS: C is not read then) */
template <typename T> __global__ void scale_kernel(int64_t n, T beta, T *p)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i] = beta == T(0) ? T(0) : beta * p[i];
}

/* acc[e] = (first ? 0 : acc[e]) + sum over b < nb of part[b mn + e], in
 * double, b ascending: a fixed order, so results repeat bit for bit */
template <typename P>
__global__ void acc_partials_kernel(int64_t mn, int64_t nb, const P *__restrict__ part,
                                    double *__restrict__ acc, int first)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < mn;
         e += (int64_t)gridDim.x * blockDim.x) {
        double s = first ? 0.0 : acc[e];
        for (int64_t b = 0; b < nb; b++)
            s += (double)part[b * mn + e];
        acc[e] = s;
    }
}

/* C[i ldc + j] = alpha acc[i n + j] + beta C[i ldc + j] in double, rounded
 * once; C is not read when beta == 0 (BLAS); upper: only j >= i (syrk, whose
 * mirror fills the rest: each element is read and written by one thread) */
template <typename T>
__global__ void acc_finish_kernel(int64_t m, int64_t n, const double *__restrict__ acc,
                                  double alpha, double beta, T *C, int64_t ldc, int upper)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < m * n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = idx / n, j = idx - i * n;
        if (upper && j < i)
            continue;
        double v = alpha * acc[idx];
        if (beta != 0.0)
            v += beta * (double)C[i * ldc + j];
        C[i * ldc + j] = (T)v;
    }
}

/*
 * lstsq: row i of C (r x k) times 1 / s_i, or 0 when s_i <= tol * s_0
 * (s descending, so s_0 is the largest).  The comparison is made in
 * double, exactly as count_rank does on the host.
 */
template <typename T>
__global__ void pinv_scale_rows_kernel(int64_t r, int64_t k, const T *s, double tol, T *C)
{
    double thresh = tol * (double)s[0];
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < r * k;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = idx / k;
        C[idx] = (double)s[i] > thresh ? C[idx] / s[i] : T(0);
    }
}

/* ---- kernel launchers --------------------------------------------------------- */

template <typename T>
int transpose(const gsb__backend *be, int64_t rows, int64_t cols, const T *src, int64_t lds,
              T *dst, int64_t ldd)
{
    if (rows == 0 || cols == 0)
        return GSB_OK;
    int64_t gx = (cols + TILE - 1) / TILE, gy = (rows + TILE - 1) / TILE;
    dim3 grid((unsigned)min64(gx, 65535), (unsigned)min64(gy, 65535));
    dim3 block(TILE, TILE_ROWS);
    transpose_kernel<T><<<grid, block, 0, stream_of(be)>>>(rows, cols, src, lds, dst, ldd);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

template <typename T> int mirror_upper(const gsb__backend *be, int64_t n, T *C)
{
    if (n < 2)
        return GSB_OK;
    mirror_upper_kernel<T><<<blocks_for(be, n * n), THREADS, 0, stream_of(be)>>>(n, C);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

template <typename T> int scale(const gsb__backend *be, int64_t n, double beta, T *p)
{
    if (n == 0 || beta == 1.0)
        return GSB_OK;
    scale_kernel<T><<<blocks_for(be, n), THREADS, 0, stream_of(be)>>>(n, (T)beta, p);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* D2D copy of count elements on the stream */
template <typename T> int copy_n(const gsb__backend *be, T *dst, const T *src, int64_t count)
{
    if (count == 0 || dst == src)
        return GSB_OK;
    CUDA_TRY(cudaMemcpyAsync(dst, src, (size_t)count * sizeof(T), cudaMemcpyDeviceToDevice,
                             stream_of(be)));
    return GSB_OK;
}

/* ---- the ops, one body per float type ----------------------------------------- */

/*
 * Row-major C (m x n, row stride ldc) = alpha op(A) op(B) + beta C, op(A)
 * m x k, op(B) k x n, row strides lda, ldb.  Column-major this is C^T =
 * op(B)^T op(A)^T, and B's memory read column-major is already B^T: so
 * cuBLAS gets (B, A) with the same transpose flags and the dimensions swapped.
 */
template <typename T>
int gemm_rm(const gsb__backend *be, int ta, int tb, int64_t m, int64_t n, int64_t k,
            double alpha, const T *A, int64_t lda, const T *B, int64_t ldb, double beta, T *C,
            int64_t ldc)
{
    if (m == 0 || n == 0)
        return GSB_OK;
    if (k == 0) /* an empty product: C = beta C (done here so C is zeroed, not read, at 0) */
        return scale(be, m * n, beta, C);
    const T a = (T)alpha, b = (T)beta;
    CUBLAS_TRY(la<T>::gemm(gsb__cuda_ctx_of(be)->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                           ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k, &a, B,
                           (int)ld(ldb), A, (int)ld(lda), &b, C, (int)ld(ldc)));
    return GSB_OK;
}

/* The chunked float32 path applies (see the top). */
bool use_acc(int64_t m, int64_t n, int64_t k, double alpha)
{
    return m > 0 && n > 0 && k >= ACC_MIN_K && m * n <= ACC_MAX_MN && alpha != 0.0;
}

/* The chunked float64 syrk applies (see the top): A has k rows, n columns. */
bool use_acc64(int64_t n, int64_t k, double alpha)
{
    return n > 0 && n <= ACC64_MAX_N && k >= 2 * ACC64_KC && alpha != 0.0;
}

/*
 * gemm_rm's product summed in chunks of kc along k (use_acc holds for
 * float32 with kc = ACC_KC, use_acc64 for float64 syrk with ACC64_KC).
 * Chunk c of op(A) is columns [c kc, (c + 1) kc) of the m x k operand:
 * A + c kc for row-major m x k A (ta = 0), rows c kc.. of the k x m A
 * (ta = 1); op(B)'s chunk is rows c kc.. of k x n B (tb = 0) or columns of
 * n x k B (tb = 1).  So the full chunks are one strided batch per group
 * (the partials of a group fit ACC_PART_BYTES), and the remainder, shorter
 * than kc, one plain GEMM; the partials (in T) are added into a double
 * accumulator in chunk order.  upper: write C's upper triangle only (syrk).
 */
template <typename T>
int gemm_acc(const gsb__backend *be, int ta, int tb, int64_t m, int64_t n, int64_t k,
             double alpha, const T *A, int64_t lda, const T *B, int64_t ldb, double beta, T *C,
             int64_t ldc, int upper, int64_t kc)
{
    const int64_t mn = m * n, nfull = k / kc, rem = k - nfull * kc;
    int64_t group = ACC_PART_BYTES / (mn * (int64_t)sizeof(T));
    group = group < 1 ? 1 : group > nfull ? nfull : group;
    const long long sa = ta ? kc * lda : kc, sb = tb ? kc : kc * ldb;
    dev_buf accb(be), partb(be);
    PASS(accb.alloc_n<double>(mn));
    PASS(partb.alloc_n<T>(group * mn));
    double *acc = accb.as<double>();
    T *part = partb.as<T>();
    const T one = T(1), zero = T(0);
    for (int64_t c0 = 0; c0 < nfull; c0 += group) {
        const int64_t nb = min64(group, nfull - c0);
        /* column-major, as gemm_rm: part_b^T (n x m, ld n) = op(B_b)^T op(A_b)^T */
        CUBLAS_TRY(la<T>::gemm_sb(gsb__cuda_ctx_of(be)->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)kc, &one,
                                  B + c0 * sb, (int)ld(ldb), sb, A + c0 * sa, (int)ld(lda), sa,
                                  &zero, part, (int)n, (long long)mn, (int)nb));
        acc_partials_kernel<T><<<blocks_for(be, mn), THREADS, 0, stream_of(be)>>>(mn, nb, part,
                                                                                   acc, c0 == 0);
        CUDA_LAUNCH_CHECK();
    }
    if (rem > 0) {
        PASS(gemm_rm<T>(be, ta, tb, m, n, rem, 1.0, A + nfull * sa, lda, B + nfull * sb, ldb, 0.0,
                        part, n));
        acc_partials_kernel<T><<<blocks_for(be, mn), THREADS, 0, stream_of(be)>>>(mn, 1, part,
                                                                                   acc, 0);
        CUDA_LAUNCH_CHECK();
    }
    acc_finish_kernel<T><<<blocks_for(be, mn), THREADS, 0, stream_of(be)>>>(m, n, acc, alpha,
                                                                             beta, C, ldc, upper);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* gemm_rm, float32 through the chunked sum where it applies */
template <typename T>
int gemm_best(const gsb__backend *be, int ta, int tb, int64_t m, int64_t n, int64_t k,
              double alpha, const T *A, int64_t lda, const T *B, int64_t ldb, double beta, T *C,
              int64_t ldc)
{
    if constexpr (std::is_same_v<T, float>) {
        if (use_acc(m, n, k, alpha))
            return gemm_acc<float>(be, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, 0,
                                   ACC_KC);
    }
    return gemm_rm<T>(be, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <typename T>
int syrk_t(const gsb__backend *be, double alpha, const gsb__tensor *A, double beta,
           gsb__tensor *C)
{
    int64_t m = A->rows, n = A->cols;
    T *c = (T *)C->data;
    if (m == 0) {
        PASS(scale(be, n * n, beta, c));
        return mirror_upper(be, n, c);
    }
    /* C = A^T A: op(A) = A^T (A is the k x m operand, k = rows), op(B) = A;
     * the upper triangle, then the mirror */
    const T *at = (const T *)A->data;
    if constexpr (std::is_same_v<T, float>) {
        if (use_acc(n, n, m, alpha)) {
            PASS(gemm_acc<float>(be, 1, 0, n, n, m, alpha, at, n, at, n, beta, c, n, 1, ACC_KC));
            return mirror_upper(be, n, c);
        }
    } else {
        if (use_acc64(n, m, alpha)) {
            PASS(gemm_acc<double>(be, 1, 0, n, n, m, alpha, at, n, at, n, beta, c, n, 1,
                                  ACC64_KC));
            return mirror_upper(be, n, c);
        }
    }
    const T a = (T)alpha, b = (T)beta;
    /* column-major At (n x m, ld n): C = At At^T, lower (= row-major upper) */
    CUBLAS_TRY(la<T>::syrk(gsb__cuda_ctx_of(be)->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                           (int)n, (int)m, &a, at, (int)ld(n), &b, c, (int)ld(n)));
    return mirror_upper(be, n, c);
}

template <typename T>
int eigh_t(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *w, gsb__tensor *V)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    int64_t n = A->rows;
    dev_buf a(be), work(be), info(be);
    host_buf hwork(ctx->stream);
    solver_params params;
    PASS(a.alloc_n<T>(n * n));
    PASS(info.alloc_n<int>(1));
    PASS(params.create());
    PASS(copy_n(be, a.as<T>(), (const T *)A->data, n * n));
    /* symmetric: column-major A is A; its lower triangle is the row-major
     * upper one that the CPU twin reads */
    size_t dbytes = 0, hbytes = 0;
    CUSOLVER_TRY(cusolverDnXsyevd_bufferSize(ctx->solver, params.p, CUSOLVER_EIG_MODE_VECTOR,
                                             CUBLAS_FILL_MODE_LOWER, n, la<T>::type, a.p, n,
                                             la<T>::type, w->data, la<T>::type, &dbytes,
                                             &hbytes));
    PASS(work.alloc(dbytes));
    PASS(hwork.alloc(hbytes));
    CUSOLVER_TRY(cusolverDnXsyevd(ctx->solver, params.p, CUSOLVER_EIG_MODE_VECTOR,
                                  CUBLAS_FILL_MODE_LOWER, n, la<T>::type, a.p, n, la<T>::type,
                                  w->data, la<T>::type, work.p, dbytes, hwork.p, hbytes,
                                  info.as<int>()));
    int h_info = 0;
    PASS(read_infos(be, info.as<int>(), &h_info, 1));
    if (h_info > 0)
        return GSB_CUDA_ERR(GSB_ENUMERIC, "eigh: the eigenvalue algorithm did not converge "
                                          "(syevd info %d)", h_info);
    if (h_info < 0)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "eigh: cuSOLVER syevd rejected argument %d",
                            -h_info);
    /* column j of the column-major result is eigenvector j: V = its transpose */
    return transpose(be, n, n, a.as<T>(), n, (T *)V->data, n);
}

template <typename T> int posv_t(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *B)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    int64_t n = A->rows, k = B->cols;
    dev_buf a(be), bt(be), work(be), info(be);
    host_buf hwork(ctx->stream);
    solver_params params;
    PASS(a.alloc_n<T>(n * n));
    PASS(bt.alloc_n<T>(n * k));
    PASS(info.alloc_n<int>(2));
    PASS(params.create());
    PASS(copy_n(be, a.as<T>(), (const T *)A->data, n * n));
    size_t dbytes = 0, hbytes = 0;
    CUSOLVER_TRY(cusolverDnXpotrf_bufferSize(ctx->solver, params.p, CUBLAS_FILL_MODE_LOWER, n,
                                             la<T>::type, a.p, n, la<T>::type, &dbytes,
                                             &hbytes));
    PASS(work.alloc(dbytes));
    PASS(hwork.alloc(hbytes));
    CUSOLVER_TRY(cusolverDnXpotrf(ctx->solver, params.p, CUBLAS_FILL_MODE_LOWER, n, la<T>::type,
                                  a.p, n, la<T>::type, work.p, dbytes, hwork.p, hbytes,
                                  info.as<int>()));
    int h_info[2] = {0, 0};
    if (k > 0) {
        /* B (row-major n x k) -> column-major n x k; the solve runs there even
         * if the factorisation failed, but B is written only after the check */
        PASS(transpose(be, n, k, (const T *)B->data, k, bt.as<T>(), n));
        CUSOLVER_TRY(cusolverDnXpotrs(ctx->solver, params.p, CUBLAS_FILL_MODE_LOWER, n, k,
                                      la<T>::type, a.p, n, la<T>::type, bt.p, n,
                                      info.as<int>() + 1));
    }
    PASS(read_infos(be, info.as<int>(), h_info, k > 0 ? 2 : 1));
    if (h_info[0] > 0)
        return GSB_CUDA_ERR(GSB_ENUMERIC, "posv: matrix is not positive definite (leading "
                                          "minor %d)", h_info[0]);
    if (h_info[0] < 0 || h_info[1] != 0)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "posv: cuSOLVER %s rejected argument %d",
                            h_info[0] < 0 ? "potrf" : "potrs",
                            h_info[0] < 0 ? -h_info[0] : -h_info[1]);
    return transpose(be, k, n, bt.as<T>(), n, (T *)B->data, k);
}

/* SVD of A (m x n); U (m x r) and Vt (r x n) may be NULL; S (r) descending */
template <typename T>
int svd_raw(const gsb__backend *be, int64_t m, int64_t n, const T *A, T *U, T *S, T *Vt)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    int tall = m > n;
    dev_buf a(be), u(be), vt(be), work(be), info(be);
    host_buf hwork(ctx->stream);
    solver_params params;
    PASS(a.alloc_n<T>(m * n));
    PASS(info.alloc_n<int>(1));
    PASS(params.create());

    /* gesvd's problem: M x N column-major (M >= N, so r = N), thin left
     * vectors lu (M x N, ld M), right vectors lvt (N x N, ld N) */
    int64_t M, N;
    T *lu, *lvt;
    if (tall) {
        M = m;
        N = n;
        PASS(transpose(be, m, n, A, n, a.as<T>(), m)); /* column-major A */
        if (U)
            PASS(u.alloc_n<T>(m * n));
        if (Vt)
            PASS(vt.alloc_n<T>(n * n));
        lu = u.as<T>();
        lvt = vt.as<T>();
    } else {
        /* column-major view of A is A^T (n x m, tall) = V S U^T: its left
         * vectors are Vt's memory, its right vectors U's (see the top) */
        M = n;
        N = m;
        PASS(copy_n(be, a.as<T>(), A, m * n));
        lu = Vt;
        lvt = U;
    }
    signed char jobu = lu ? 'S' : 'N', jobvt = lvt ? 'S' : 'N';
    size_t dbytes = 0, hbytes = 0;
    CUSOLVER_TRY(cusolverDnXgesvd_bufferSize(ctx->solver, params.p, jobu, jobvt, M, N,
                                             la<T>::type, a.p, M, la<T>::type, S, la<T>::type,
                                             lu, M, la<T>::type, lvt, N, la<T>::type, &dbytes,
                                             &hbytes));
    PASS(work.alloc(dbytes));
    PASS(hwork.alloc(hbytes));
    CUSOLVER_TRY(cusolverDnXgesvd(ctx->solver, params.p, jobu, jobvt, M, N, la<T>::type, a.p, M,
                                  la<T>::type, S, la<T>::type, lu, M, la<T>::type, lvt, N,
                                  la<T>::type, work.p, dbytes, hwork.p, hbytes,
                                  info.as<int>()));
    int h_info = 0;
    PASS(read_infos(be, info.as<int>(), &h_info, 1));
    if (h_info > 0)
        return GSB_CUDA_ERR(GSB_ENUMERIC, "svd: the SVD did not converge (gesvd info %d)",
                            h_info);
    if (h_info < 0)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "svd: cuSOLVER gesvd rejected argument %d", -h_info);
    if (tall && U) /* column-major U (m x r, r = n) -> row-major */
        PASS(transpose(be, n, m, lu, m, U, n));
    if (tall && Vt) /* column-major Vt (n x n) -> row-major */
        PASS(transpose(be, n, n, lvt, n, Vt, n));
    return GSB_OK;
}

/* LAPACK gelsd's rule: rcond <= 0 or >= 1 means machine precision */
template <typename T> double effective_rcond(double rcond)
{
    return rcond <= 0 || rcond >= 1 ? la<T>::eps : rcond;
}

template <typename T>
int lstsq_t(const gsb__backend *be, const gsb__tensor *A, const gsb__tensor *B, double rcond,
            gsb__tensor *X, gsb__tensor *S, int64_t *rank)
{
    int64_t m = A->rows, n = A->cols, k = B->cols, r = min64(m, n);
    T *x = (T *)X->data;
    if (m == 0 || n == 0) { /* the minimum-norm solution of an empty system */
        if (n * k > 0)
            CUDA_TRY(cudaMemsetAsync(x, 0, (size_t)(n * k) * sizeof(T), stream_of(be)));
        if (rank)
            *rank = 0;
        return GSB_OK;
    }
    double tol = effective_rcond<T>(rcond);
    dev_buf u(be), vt(be), s(be), c(be);
    T *sv = S ? (T *)S->data : nullptr;
    if (!sv) {
        PASS(s.alloc_n<T>(r));
        sv = s.as<T>();
    }
    if (k > 0) {
        PASS(u.alloc_n<T>(m * r));
        PASS(vt.alloc_n<T>(r * n));
        PASS(c.alloc_n<T>(r * k));
    }
    /* A = U diag(s) Vt, so the minimum-norm X = Vt^T diag(1/s, cut at tol) U^T B */
    PASS(svd_raw<T>(be, m, n, (const T *)A->data, k > 0 ? u.as<T>() : nullptr, sv,
                    k > 0 ? vt.as<T>() : nullptr));
    if (k > 0) {
        /* U^T B runs along all m rows: the chunked float32 sum where it applies */
        PASS(gemm_best<T>(be, 1, 0, r, k, m, 1.0, u.as<T>(), r, (const T *)B->data, k, 0.0,
                          c.as<T>(), k));
        pinv_scale_rows_kernel<T><<<blocks_for(be, r * k), THREADS, 0, stream_of(be)>>>(
            r, k, sv, tol, c.as<T>());
        CUDA_LAUNCH_CHECK();
        PASS(gemm_rm<T>(be, 1, 0, n, k, r, 1.0, vt.as<T>(), n, c.as<T>(), k, 0.0, x, k));
    }
    if (rank) {
        T *hs = (T *)malloc((size_t)r * sizeof(T));
        if (!hs)
            return GSB_CUDA_ERR(GSB_ENOMEM, "lstsq: out of host memory");
        cudaError_t e = cudaMemcpyAsync(hs, sv, (size_t)r * sizeof(T), cudaMemcpyDeviceToHost,
                                        stream_of(be));
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(stream_of(be));
        if (e != cudaSuccess) {
            free(hs);
            return gsb__cuda_fail_rt(e, "lstsq: reading singular values", __FILE__, __LINE__);
        }
        double thresh = tol * (double)hs[0];
        int64_t count = 0;
        for (int64_t i = 0; i < r; i++)
            count += (double)hs[i] > thresh;
        free(hs);
        *rank = count;
    }
    return GSB_OK;
}

template <typename T> int orthonormalize_t(const gsb__backend *be, gsb__tensor *A)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    int64_t m = A->rows, n = A->cols;
    dev_buf a(be), tau(be), work(be), owork(be), info(be);
    host_buf hwork(ctx->stream);
    solver_params params;
    PASS(a.alloc_n<T>(m * n));
    PASS(tau.alloc_n<T>(n));
    PASS(info.alloc_n<int>(2));
    PASS(params.create());
    PASS(transpose(be, m, n, (const T *)A->data, n, a.as<T>(), m)); /* column-major, tall */
    size_t dbytes = 0, hbytes = 0;
    CUSOLVER_TRY(cusolverDnXgeqrf_bufferSize(ctx->solver, params.p, m, n, la<T>::type, a.p, m,
                                             la<T>::type, tau.p, la<T>::type, &dbytes,
                                             &hbytes));
    PASS(work.alloc(dbytes));
    PASS(hwork.alloc(hbytes));
    CUSOLVER_TRY(cusolverDnXgeqrf(ctx->solver, params.p, m, n, la<T>::type, a.p, m, la<T>::type,
                                  tau.p, la<T>::type, work.p, dbytes, hwork.p, hbytes,
                                  info.as<int>()));
    int lwork = 0;
    CUSOLVER_TRY(la<T>::orgqr_size(ctx->solver, (int)m, (int)n, a.as<T>(), (int)m, tau.as<T>(),
                                   &lwork));
    PASS(owork.alloc_n<T>(lwork > 0 ? lwork : 1));
    CUSOLVER_TRY(la<T>::orgqr(ctx->solver, (int)m, (int)n, a.as<T>(), (int)m, tau.as<T>(),
                              owork.as<T>(), lwork, info.as<int>() + 1));
    int h_info[2] = {0, 0};
    PASS(read_infos(be, info.as<int>(), h_info, 2));
    if (h_info[0] != 0 || h_info[1] != 0)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "orthonormalize: cuSOLVER %s rejected argument %d",
                            h_info[0] ? "geqrf" : "orgqr",
                            h_info[0] ? -h_info[0] : -h_info[1]);
    /* column-major Q (m x n, ld m) -> row-major */
    return transpose(be, n, m, a.as<T>(), m, (T *)A->data, n);
}

} // namespace

/* ---- the ops ------------------------------------------------------------------ */

extern "C" int gsb__cuda_gemm(const gsb__backend *be, int trans_a, int trans_b, double alpha,
                              const gsb__tensor *A, const gsb__tensor *B, double beta,
                              gsb__tensor *C)
{
    PASS(need_float(be, "gemm", "A", A));
    PASS(need_matrix(be, "gemm", "B", B, A->dtype, B ? B->rows : 0, B ? B->cols : 0));
    int64_t m = trans_a ? A->cols : A->rows, k = trans_a ? A->rows : A->cols;
    int64_t kb = trans_b ? B->cols : B->rows, n = trans_b ? B->rows : B->cols;
    if (kb != k)
        return GSB_CUDA_ERR(GSB_EINTERNAL,
                            "gemm: inner dimensions differ: op(A) is (%lld, %lld), op(B) is "
                            "(%lld, %lld)",
                            (long long)m, (long long)k, (long long)kb, (long long)n);
    PASS(need_matrix(be, "gemm", "C", C, A->dtype, m, n));
    if (m * n > 0 && (C->data == A->data || C->data == B->data))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "gemm: C must not share memory with A or B");
    if (A->dtype == GSB_F32)
        return gemm_best<float>(be, trans_a, trans_b, m, n, k, alpha, (const float *)A->data,
                                A->cols, (const float *)B->data, B->cols, beta,
                                (float *)C->data, n);
    return gemm_best<double>(be, trans_a, trans_b, m, n, k, alpha, (const double *)A->data,
                           A->cols, (const double *)B->data, B->cols, beta, (double *)C->data,
                           n);
}

/* With beta != 0, C must be symmetric on entry: only its upper triangle is read. */
extern "C" int gsb__cuda_syrk(const gsb__backend *be, double alpha, const gsb__tensor *A,
                              double beta, gsb__tensor *C)
{
    PASS(need_float(be, "syrk", "A", A));
    int64_t n = A->cols;
    PASS(need_matrix(be, "syrk", "C", C, A->dtype, n, n));
    if (n > 0 && C->data == A->data)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "syrk: C must not share memory with A");
    if (n == 0)
        return GSB_OK;
    return A->dtype == GSB_F32 ? syrk_t<float>(be, alpha, A, beta, C)
                               : syrk_t<double>(be, alpha, A, beta, C);
}

extern "C" int gsb__cuda_eigh(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *w,
                              gsb__tensor *V)
{
    PASS(need_float(be, "eigh", "A", A));
    gsb_dtype dt = A->dtype;
    int64_t n = A->rows;
    PASS(need_matrix(be, "eigh", "A", A, dt, n, n));
    PASS(need_vector(be, "eigh", "w", w, dt, n));
    PASS(need_matrix(be, "eigh", "V", V, dt, n, n));
    if (n == 0)
        return GSB_OK;
    return dt == GSB_F32 ? eigh_t<float>(be, A, w, V) : eigh_t<double>(be, A, w, V);
}

extern "C" int gsb__cuda_posv(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *B)
{
    PASS(need_float(be, "posv", "A", A));
    gsb_dtype dt = A->dtype;
    int64_t n = A->rows;
    PASS(need_matrix(be, "posv", "A", A, dt, n, n));
    PASS(need_matrix(be, "posv", "B", B, dt, n, B ? B->cols : 0));
    if (n == 0)
        return GSB_OK;
    return dt == GSB_F32 ? posv_t<float>(be, A, B) : posv_t<double>(be, A, B);
}

extern "C" int gsb__cuda_svd(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *U,
                             gsb__tensor *S, gsb__tensor *Vt)
{
    PASS(need_float(be, "svd", "A", A));
    gsb_dtype dt = A->dtype;
    int64_t m = A->rows, n = A->cols, r = min64(m, n);
    PASS(need_vector(be, "svd", "S", S, dt, r));
    if (U)
        PASS(need_matrix(be, "svd", "U", U, dt, m, r));
    if (Vt)
        PASS(need_matrix(be, "svd", "Vt", Vt, dt, r, n));
    if (r == 0)
        return GSB_OK;
    if (dt == GSB_F32)
        return svd_raw<float>(be, m, n, (const float *)A->data, U ? (float *)U->data : nullptr,
                              (float *)S->data, Vt ? (float *)Vt->data : nullptr);
    return svd_raw<double>(be, m, n, (const double *)A->data, U ? (double *)U->data : nullptr,
                           (double *)S->data, Vt ? (double *)Vt->data : nullptr);
}

/* S and rank may be NULL when the caller does not want them. */
extern "C" int gsb__cuda_lstsq(const gsb__backend *be, const gsb__tensor *A,
                               const gsb__tensor *B, double rcond, gsb__tensor *X,
                               gsb__tensor *S, int64_t *rank)
{
    PASS(need_float(be, "lstsq", "A", A));
    gsb_dtype dt = A->dtype;
    int64_t m = A->rows, n = A->cols, k = B ? B->cols : 0;
    PASS(need_matrix(be, "lstsq", "B", B, dt, m, k));
    PASS(need_matrix(be, "lstsq", "X", X, dt, n, k));
    if (S)
        PASS(need_vector(be, "lstsq", "S", S, dt, min64(m, n)));
    return dt == GSB_F32 ? lstsq_t<float>(be, A, B, rcond, X, S, rank)
                         : lstsq_t<double>(be, A, B, rcond, X, S, rank);
}

extern "C" int gsb__cuda_orthonormalize(const gsb__backend *be, gsb__tensor *A)
{
    PASS(need_float(be, "orthonormalize", "A", A));
    int64_t m = A->rows, n = A->cols;
    if (m < n)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "orthonormalize: A has shape (%lld, %lld), needs "
                                           "rows >= cols", (long long)m, (long long)n);
    if (n == 0)
        return GSB_OK;
    return A->dtype == GSB_F32 ? orthonormalize_t<float>(be, A) : orthonormalize_t<double>(be, A);
}
