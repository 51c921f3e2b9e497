/*
 * cpu_linalg.c - dense linear algebra on the CPU: gemm and syrk through
 * CBLAS (OpenBLAS threads them itself), eigh, posv, svd, lstsq and
 * orthonormalize through LAPACKE.
 *
 * One body serves both float dtypes: the ops work on untyped data and call
 * the thin wrappers below, which pick the s- or d- routine.  LAPACK works
 * in place, so const inputs are first copied into scratch buffers.
 *
 * Layout: LAPACK is column-major; LAPACKE's row-major mode transposes
 * every matrix into a hidden copy and back.  Square symmetric problems
 * (eigh, posv) use it as is.  For the rectangular ones (svd, lstsq,
 * orthonormalize) we transpose into our own scratch instead, which is the
 * copy we need anyway, and we take care that LAPACK sees a tall matrix:
 * its QR step runs down contiguous columns, whereas a wide column-major
 * matrix makes every Householder step sweep the whole array (measured 20x
 * slower on 1e6 x 50).  A row-major m x n array read column-major is A^T,
 * so for m < n it is already the tall problem and needs no transpose; the
 * comments at those calls give the algebra.
 */
#include <cblas.h>
#include <lapacke.h>
#include <limits.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/alloc.h"
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
    if (!t->data && gsb__tensor_numel(t) > 0)
        return gsb__err(GSB_EINTERNAL, "%s: %s has no data", op, name);
    /* BLAS and LAPACK here take 32-bit dimensions */
    if (t->rows < 0 || t->cols < 0 || t->rows > INT_MAX || t->cols > INT_MAX)
        return gsb__err(GSB_EINTERNAL, "%s: %s shape (%lld, %lld) is out of range", op, name,
                        (long long)t->rows, (long long)t->cols);
    return GSB_OK;
}

/* t must be a float tensor of dtype dt and shape rows x cols */
static int need_matrix(const char *op, const char *name, const gsb__tensor *t, gsb_dtype dt,
                       int64_t rows, int64_t cols)
{
    GSB_TRY(need_float(op, name, t));
    if (t->dtype != dt)
        return gsb__err(GSB_EINTERNAL, "%s: %s has dtype %s, expected %s", op, name,
                        gsb_dtype_name(t->dtype), gsb_dtype_name(dt));
    if (t->rows != rows || t->cols != cols)
        return gsb__err(GSB_EINTERNAL, "%s: %s has shape (%lld, %lld), expected (%lld, %lld)",
                        op, name, (long long)t->rows, (long long)t->cols, (long long)rows,
                        (long long)cols);
    return GSB_OK;
}

/* t must be a float vector of dtype dt with n elements (n x 1 or 1 x n) */
static int need_vector(const char *op, const char *name, const gsb__tensor *t, gsb_dtype dt,
                       int64_t n)
{
    GSB_TRY(need_float(op, name, t));
    if (t->dtype != dt)
        return gsb__err(GSB_EINTERNAL, "%s: %s has dtype %s, expected %s", op, name,
                        gsb_dtype_name(t->dtype), gsb_dtype_name(dt));
    if (gsb__tensor_numel(t) != n || (t->rows != 1 && t->cols != 1))
        return gsb__err(GSB_EINTERNAL, "%s: %s has shape (%lld, %lld), expected %lld elements",
                        op, name, (long long)t->rows, (long long)t->cols, (long long)n);
    return GSB_OK;
}

/* A LAPACKE status other than success or a documented numerical failure. */
static int lapack_fail(const char *op, const char *routine, lapack_int info)
{
    if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR)
        return gsb__err(GSB_ENOMEM, "%s: out of memory in LAPACK %s", op, routine);
    /* our arguments are checked above, so a rejected one is almost always
     * LAPACKE's NaN scan of the input matrix */
    return gsb__err(GSB_ENUMERIC,
                    "%s: LAPACK %s rejected argument %d (does the input contain NaN or "
                    "infinity?)",
                    op, routine, (int)-info);
}

static inline int ld(int64_t n) { return n > 1 ? (int)n : 1; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* malloc of count elements of dtype dt (never a NULL for 0 elements) */
static void *scratch(gsb_dtype dt, int64_t count)
{
    return gsb__alloc_array(count, gsb_dtype_size(dt));
}

/* ---- layout helpers, one instance per float type ------------------------ */

enum { TILE = 32 }; /* square tiles keep both sides of a transpose in cache */

/* transpose_T: dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols.
 * mirror_upper_T: copy the upper triangle of the n x n C into its lower. */
#define DEFINE_LAYOUT_HELPERS(T, SUF)                                                       \
    static void transpose_##SUF(int64_t rows, int64_t cols, const T *restrict src,          \
                                int64_t lds, T *restrict dst, int64_t ldd)                  \
    {                                                                                       \
        _Pragma("omp parallel for schedule(static) if (rows * cols > (1 << 18) && !omp_in_parallel())") \
        for (int64_t i0 = 0; i0 < rows; i0 += TILE)                                         \
            for (int64_t j0 = 0; j0 < cols; j0 += TILE)                                     \
                for (int64_t i = i0; i < min64(i0 + TILE, rows); i++)                       \
                    for (int64_t j = j0; j < min64(j0 + TILE, cols); j++)                   \
                        dst[j * ldd + i] = src[i * lds + j];                                \
    }                                                                                       \
    static void mirror_upper_##SUF(int64_t n, T *C)                                         \
    {                                                                                       \
        _Pragma("omp parallel for schedule(dynamic) if (n > 512)")                          \
        for (int64_t i0 = 0; i0 < n; i0 += TILE)                                            \
            for (int64_t j0 = 0; j0 <= i0; j0 += TILE)                                      \
                for (int64_t i = i0; i < min64(i0 + TILE, n); i++)                          \
                    for (int64_t j = j0; j < min64(j0 + TILE, i); j++)                      \
                        C[i * n + j] = C[j * n + i];                                        \
    }

DEFINE_LAYOUT_HELPERS(float, f32)
DEFINE_LAYOUT_HELPERS(double, f64)

static void transpose(gsb_dtype dt, int64_t rows, int64_t cols, const void *src, int64_t lds,
                      void *dst, int64_t ldd)
{
    if (dt == GSB_F32)
        transpose_f32(rows, cols, src, lds, dst, ldd);
    else
        transpose_f64(rows, cols, src, lds, dst, ldd);
}

/* ---- s/d dispatch of the BLAS and LAPACK routines we use ---------------- */
/* Each runs single-threaded when small: waking a pool of threads for a small
 * call, or for each of the many tiny calls inside LAPACK on a small problem,
 * costs more than the arithmetic (gsb__cpu_blas_call_begin and
 * gsb__cpu_lapack_call_begin, cpu_threads.c). */

static void blas_gemm(gsb_dtype dt, int ta, int tb, int m, int n, int k, double alpha,
                      const void *a, int lda, const void *b, int ldb, double beta, void *c,
                      int ldc)
{
    enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    int serial = gsb__cpu_blas_call_begin(2.0 * m * n * k);
    if (dt == GSB_F32)
        cblas_sgemm(CblasRowMajor, opa, opb, m, n, k, (float)alpha, a, lda, b, ldb,
                    (float)beta, c, ldc);
    else
        cblas_dgemm(CblasRowMajor, opa, opb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    gsb__cpu_blas_call_end(serial);
}

/*
 * y (m) = alpha op(A) x + beta y for row-major A (rows x cols): the product
 * with a single column (a linear model's predict).  GEMM with n = 1 packs
 * all of A first, a second pass over it; GEMV streams A once.  beta == 0
 * overwrites y (zeroed first, so garbage in it never leaks through a
 * 0 * NaN).
 */
static void blas_gemv(gsb_dtype dt, int ta, int rows, int cols, double alpha, const void *a,
                      const void *x, double beta, void *y, int m)
{
    enum CBLAS_TRANSPOSE op = ta ? CblasTrans : CblasNoTrans;
    if (beta == 0.0)
        memset(y, 0, (size_t)m * gsb_dtype_size(dt));
    int serial = gsb__cpu_blas_call_begin(2.0 * rows * cols);
    if (dt == GSB_F32)
        cblas_sgemv(CblasRowMajor, op, rows, cols, (float)alpha, a, ld(cols), x, 1, (float)beta,
                    y, 1);
    else
        cblas_dgemv(CblasRowMajor, op, rows, cols, alpha, a, ld(cols), x, 1, beta, y, 1);
    gsb__cpu_blas_call_end(serial);
}

/* upper triangle of C (n x n) = alpha A^T A + beta C for row-major A (k x n) */
static void blas_syrk_t(gsb_dtype dt, int n, int k, double alpha, const void *a, double beta,
                        void *c)
{
    int serial = gsb__cpu_blas_call_begin((double)n * n * k);
    if (dt == GSB_F32)
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, n, k, (float)alpha, a, ld(n),
                    (float)beta, c, ld(n));
    else
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, n, k, alpha, a, ld(n), beta, c,
                    ld(n));
    gsb__cpu_blas_call_end(serial);
}

static lapack_int lapack_syevd(gsb_dtype dt, lapack_int n, void *a, void *w)
{
    int serial = gsb__cpu_lapack_call_begin(9.0 * n * n * n);
    lapack_int info = dt == GSB_F32 ? LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, a, ld(n), w)
                         : LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, a, ld(n), w);
    gsb__cpu_blas_call_end(serial);
    return info;
}

static lapack_int lapack_posv(gsb_dtype dt, lapack_int n, lapack_int k, void *a, void *b)
{
    int serial = gsb__cpu_lapack_call_begin((double)n * n * n / 3.0 + 2.0 * n * n * k);
    lapack_int info = dt == GSB_F32 ? LAPACKE_sposv(LAPACK_ROW_MAJOR, 'U', n, k, a, ld(n), b, ld(k))
                         : LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', n, k, a, ld(n), b, ld(k));
    gsb__cpu_blas_call_end(serial);
    return info;
}

static lapack_int lapack_gesdd(gsb_dtype dt, char jobz, lapack_int m, lapack_int n, void *a,
                               void *s, void *u, lapack_int ldu, void *vt, lapack_int ldvt)
{
    int serial = gsb__cpu_lapack_call_begin(8.0 * m * n * (m < n ? m : n));
    lapack_int info = dt == GSB_F32
               ? LAPACKE_sgesdd(LAPACK_COL_MAJOR, jobz, m, n, a, ld(m), s, u, ldu, vt, ldvt)
               : LAPACKE_dgesdd(LAPACK_COL_MAJOR, jobz, m, n, a, ld(m), s, u, ldu, vt, ldvt);
    gsb__cpu_blas_call_end(serial);
    return info;
}

static lapack_int lapack_gelsd(gsb_dtype dt, lapack_int m, lapack_int n, lapack_int k,
                               void *a, void *b, lapack_int ldb, void *s, double rcond,
                               lapack_int *rank)
{
    int serial = gsb__cpu_lapack_call_begin(8.0 * m * n * (m < n ? m : n) + 2.0 * m * n * k);
    lapack_int info = dt == GSB_F32 ? LAPACKE_sgelsd(LAPACK_COL_MAJOR, m, n, k, a, ld(m), b, ldb, s,
                                          (float)rcond, rank)
                         : LAPACKE_dgelsd(LAPACK_COL_MAJOR, m, n, k, a, ld(m), b, ldb, s,
                                          rcond, rank);
    gsb__cpu_blas_call_end(serial);
    return info;
}

static lapack_int lapack_geqrf(gsb_dtype dt, lapack_int m, lapack_int n, void *a, void *tau)
{
    int serial = gsb__cpu_lapack_call_begin(4.0 * m * n * n);
    lapack_int info = dt == GSB_F32 ? LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, a, ld(m), tau)
                         : LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, a, ld(m), tau);
    gsb__cpu_blas_call_end(serial);
    return info;
}

static lapack_int lapack_orgqr(gsb_dtype dt, lapack_int m, lapack_int n, void *a,
                               const void *tau)
{
    int serial = gsb__cpu_lapack_call_begin(4.0 * m * n * n);
    lapack_int info = dt == GSB_F32 ? LAPACKE_sorgqr(LAPACK_COL_MAJOR, m, n, n, a, ld(m), tau)
                         : LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, n, n, a, ld(m), tau);
    gsb__cpu_blas_call_end(serial);
    return info;
}

/* ---- the ops -------------------------------------------------------------- */

/*
 * Tall products (many rows of A, few columns of C: a transform or a
 * predict) run as fixed blocks of rows over the OpenMP pool, each block one
 * single-threaded BLAS call, instead of one call on OpenBLAS's pool: the
 * OpenMP region that just checked the input for NaN leaves its workers
 * spinning for a while, and OpenBLAS's workers then fight them for the
 * cores (TruncatedSVD.transform 100k x 128 -> 16 on 2 cores: half the time
 * went to the two pools' spinning and yielding).  Blocks depend on the
 * sizes only, so results do not depend on the thread count.  A product
 * below GSB__BLAS_SERIAL_FLOPS stays one call on this thread: on a busy
 * machine, waking another thread can take a scheduler slice (a 5000 x 20
 * Ridge.predict took 7 ms that way on the 2-core VM, 0.1 ms on one thread).
 */
#define GEMM_SPLIT_MIN_ROWS 4096
#define GEMM_SPLIT_MAX_COLS 512
#define GEMM_SPLIT_BLOCK 1024

/* C (m x n, row stride ldc) = alpha op(A) op(B) + beta C for row-major A (arows x acols);
 * a single output column through GEMV, which streams A once (GEMM packs it first). */
static void gemm_rows(gsb_dtype dt, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                      double alpha, const void *a, int64_t arows, int64_t acols,
                      const gsb__tensor *B, double beta, void *c, int64_t ldc)
{
    if (n == 1 && k > 0) /* op(B) is one column, contiguous whether B is k x 1 or 1 x k */
        blas_gemv(dt, trans_a, (int)arows, (int)acols, alpha, a, B->data, beta, c, (int)m);
    else
        blas_gemm(dt, trans_a, trans_b, (int)m, (int)n, (int)k, alpha, a, ld(acols), B->data,
                  ld(B->cols), beta, c, ld(ldc));
}

static void gemm_row_blocks(const gsb__tensor *A, int trans_b, double alpha,
                            const gsb__tensor *B, double beta, gsb__tensor *C, int64_t n,
                            int64_t k)
{
    const int64_t m = A->rows, nb = (m + GEMM_SPLIT_BLOCK - 1) / GEMM_SPLIT_BLOCK;
    const size_t es = gsb_dtype_size(A->dtype);
    gsb__cpu_blas_serial_begin();
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        int64_t r0 = b * GEMM_SPLIT_BLOCK, rows = m - r0 < GEMM_SPLIT_BLOCK ? m - r0 : GEMM_SPLIT_BLOCK;
        const char *a = (const char *)A->data + (size_t)(r0 * A->cols) * es;
        char *c = (char *)C->data + (size_t)(r0 * C->cols) * es;
        gemm_rows(A->dtype, 0, trans_b, rows, n, k, alpha, a, rows, A->cols, B, beta, c,
                  C->cols);
    }
    gsb__cpu_blas_serial_end();
}

int gsb__cpu_gemm(const gsb__backend *be, int trans_a, int trans_b, double alpha,
                  const gsb__tensor *A, const gsb__tensor *B, double beta, gsb__tensor *C)
{
    (void)be;
    GSB_TRY(need_float("gemm", "A", A));
    GSB_TRY(need_matrix("gemm", "B", B, A->dtype, B ? B->rows : 0, B ? B->cols : 0));
    int64_t m = trans_a ? A->cols : A->rows, k = trans_a ? A->rows : A->cols;
    int64_t kb = trans_b ? B->cols : B->rows, n = trans_b ? B->rows : B->cols;
    if (kb != k)
        return gsb__err(GSB_EINTERNAL,
                        "gemm: inner dimensions differ: op(A) is (%lld, %lld), op(B) is "
                        "(%lld, %lld)",
                        (long long)m, (long long)k, (long long)kb, (long long)n);
    GSB_TRY(need_matrix("gemm", "C", C, A->dtype, m, n));
    if (m * n > 0 && (C->data == A->data || C->data == B->data))
        return gsb__err(GSB_EINTERNAL, "gemm: C must not share memory with A or B");
    if (m == 0 || n == 0)
        return GSB_OK;
    if (!trans_a && m >= GEMM_SPLIT_MIN_ROWS && n <= GEMM_SPLIT_MAX_COLS &&
        2.0 * (double)m * (double)n * (double)k >= GSB__BLAS_SERIAL_FLOPS &&
        omp_get_max_threads() > 1) {
        gemm_row_blocks(A, trans_b, alpha, B, beta, C, n, k);
        return GSB_OK;
    }
    gemm_rows(A->dtype, trans_a, trans_b, m, n, k, alpha, A->data, A->rows, A->cols, B, beta,
              C->data, C->cols);
    return GSB_OK;
}

/* With beta != 0, C must be symmetric on entry: only its upper triangle is read. */
int gsb__cpu_syrk(const gsb__backend *be, double alpha, const gsb__tensor *A, double beta,
                  gsb__tensor *C)
{
    (void)be;
    GSB_TRY(need_float("syrk", "A", A));
    int64_t n = A->cols;
    GSB_TRY(need_matrix("syrk", "C", C, A->dtype, n, n));
    if (n > 0 && C->data == A->data)
        return gsb__err(GSB_EINTERNAL, "syrk: C must not share memory with A");
    if (n == 0)
        return GSB_OK;
    /* row-major A (m x n) with Trans: C = alpha A^T A + beta C */
    blas_syrk_t(A->dtype, (int)n, (int)A->rows, alpha, A->data, beta, C->data);
    if (A->dtype == GSB_F32)
        mirror_upper_f32(n, C->data);
    else
        mirror_upper_f64(n, C->data);
    return GSB_OK;
}

int gsb__cpu_eigh(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *w, gsb__tensor *V)
{
    (void)be;
    GSB_TRY(need_float("eigh", "A", A));
    gsb_dtype dt = A->dtype;
    int64_t n = A->rows;
    GSB_TRY(need_matrix("eigh", "A", A, dt, n, n));
    GSB_TRY(need_vector("eigh", "w", w, dt, n));
    GSB_TRY(need_matrix("eigh", "V", V, dt, n, n));
    if (n == 0)
        return GSB_OK;
    /* V is the workspace: syevd replaces the matrix with its eigenvectors */
    if (V->data != A->data)
        memcpy(V->data, A->data, gsb__tensor_nbytes(A));
    lapack_int info = lapack_syevd(dt, (lapack_int)n, V->data, w->data);
    if (info > 0)
        return gsb__err(GSB_ENUMERIC, "eigh: the eigenvalue algorithm did not converge "
                                      "(syevd info %d)", (int)info);
    if (info < 0)
        return lapack_fail("eigh", "syevd", info);
    return GSB_OK;
}

int gsb__cpu_posv(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *B)
{
    (void)be;
    GSB_TRY(need_float("posv", "A", A));
    gsb_dtype dt = A->dtype;
    int64_t n = A->rows;
    GSB_TRY(need_matrix("posv", "A", A, dt, n, n));
    GSB_TRY(need_matrix("posv", "B", B, dt, n, B ? B->cols : 0));
    if (n == 0)
        return GSB_OK;
    void *a = scratch(dt, n * n);
    if (!a)
        return gsb__err(GSB_ENOMEM, "posv: out of memory for a %lld x %lld copy", (long long)n,
                        (long long)n);
    memcpy(a, A->data, gsb__tensor_nbytes(A));
    lapack_int info = lapack_posv(dt, (lapack_int)n, (lapack_int)B->cols, a, B->data);
    free(a);
    if (info > 0)
        return gsb__err(GSB_ENUMERIC, "posv: matrix is not positive definite (leading minor "
                                      "%d)", (int)info);
    if (info < 0)
        return lapack_fail("posv", "posv", info);
    return GSB_OK;
}

/* ---- TSQR: the R factor of a tall matrix, its row blocks in parallel ---- */

/* Fewest rows of a TSQR block per column, and most blocks. */
enum { TSQR_ROWS_PER_COL = 4, TSQR_MAX_BLOCKS = 16 };

/* Copy the upper triangle (at most h rows) of the column-major rows x c
 * block src (ld lds) into dst (ld ldd); dst is zero below it already. */
static void copy_upper(gsb_dtype dt, int64_t h, int64_t c, const void *src, int64_t lds,
                       void *dst, int64_t ldd)
{
    size_t es = gsb_dtype_size(dt);
    for (int64_t j = 0; j < c; j++)
        memcpy((char *)dst + (size_t)(j * ldd) * es, (const char *)src + (size_t)(j * lds) * es,
               (size_t)min64(j + 1, h) * es);
}

/*
 * R (c x c, column-major, zero below the diagonal) of the QR factorisation
 * of the tall m x c matrix [A B] (row-major A m x n, B m x k or k = 0), as
 * TSQR: the rows cut into p blocks fixed by the shape alone (at least
 * TSQR_ROWS_PER_COL * c rows each, at most TSQR_MAX_BLOCKS), each block
 * transposed and factored (geqrf) by one thread, then the stacked triangles
 * factored once more.  Householder QR of each piece, so as stable as one
 * geqrf of the whole (R equal up to the signs of its rows), but one parallel
 * region where LAPACK's own threading opens several per column of the
 * panels (on the busy 2-core VM, a wait on a descheduled thread each), and
 * no Q is ever formed.  *info gets a LAPACK failure (< 0) where one happens.
 */
static int tsqr_r(gsb_dtype dt, int64_t m, int64_t n, const void *A, int64_t k, const void *B,
                  void *R, lapack_int *info)
{
    int64_t c = n + k;
    size_t es = gsb_dtype_size(dt);
    int64_t p = max64(1, min64(TSQR_MAX_BLOCKS, m / (TSQR_ROWS_PER_COL * c)));
    int64_t rb = (m + p - 1) / p, rr = 0;
    for (int64_t b = 0; b < p; b++)
        rr += min64(c, max64(0, min64(rb, m - b * rb)));
    void *w = scratch(dt, m * c), *tau = scratch(dt, p * c), *st = scratch(dt, rr * c);
    int rc = GSB_OK;
    lapack_int worst = 0;
    if (!w || !tau || !st) {
        rc = gsb__err(GSB_ENOMEM, "tsqr: out of memory for a %lld x %lld problem", (long long)m,
                      (long long)c);
        goto done;
    }
    gsb__cpu_blas_serial_begin();
#pragma omp parallel for schedule(dynamic, 1) reduction(min : worst) if (p > 1)
    for (int64_t b = 0; b < p; b++) {
        int64_t r0 = b * rb, rows = min64(rb, m - r0);
        if (rows <= 0)
            continue;
        char *wb = (char *)w + (size_t)(r0 * c) * es;
        transpose(dt, rows, n, (const char *)A + (size_t)(r0 * n) * es, n, wb, rows);
        if (k > 0)
            transpose(dt, rows, k, (const char *)B + (size_t)(r0 * k) * es, k,
                      wb + (size_t)(n * rows) * es, rows);
        lapack_int got = lapack_geqrf(dt, (lapack_int)rows, (lapack_int)c, wb,
                                      (char *)tau + (size_t)(b * c) * es);
        worst = got < worst ? got : worst;
    }
    gsb__cpu_blas_serial_end();
    if (worst < 0) {
        *info = worst;
        goto done;
    }
    /* stack the blocks' triangles and factor them once more */
    memset(st, 0, (size_t)(rr * c) * es);
    for (int64_t b = 0, off = 0; b < p; b++) {
        int64_t r0 = b * rb, rows = min64(rb, m - r0);
        if (rows <= 0)
            continue;
        copy_upper(dt, min64(rows, c), c, (char *)w + (size_t)(r0 * c) * es, rows,
                   (char *)st + (size_t)off * es, rr);
        off += min64(rows, c);
    }
    if (p > 1) {
        lapack_int got = lapack_geqrf(dt, (lapack_int)rr, (lapack_int)c, st, tau);
        if (got < 0) {
            *info = got;
            goto done;
        }
    }
    memset(R, 0, (size_t)(c * c) * es);
    copy_upper(dt, min64(rr, c), c, st, rr, R, c);
    *info = 0;
done:
    free(w);
    free(tau);
    free(st);
    return rc;
}

/* gesdd's status as svd's error: not converged (info > 0) or a bad argument. */
static int gesdd_status(lapack_int info)
{
    if (info > 0)
        return gsb__err(GSB_ENUMERIC, "svd: the SVD did not converge (gesdd info %d)", (int)info);
    if (info < 0)
        return lapack_fail("svd", "gesdd", info);
    return GSB_OK;
}

/*
 * The SVD of a tall A (m >= TSQR_ROWS_PER_COL n) without U (PCA's fit):
 * A = Q R, so A's singular values and right vectors are R's, and the n x n
 * SVD of R is all that is left.  gesdd on A itself does the same QR first,
 * then also forms Q and U = Q U_R, twice the QR's work for a U not asked for.
 */
static int svd_tall_no_u(const gsb__tensor *A, gsb__tensor *S, gsb__tensor *Vt)
{
    gsb_dtype dt = A->dtype;
    int64_t m = A->rows, n = A->cols;
    void *r = scratch(dt, n * n), *vt = Vt ? scratch(dt, n * n) : NULL;
    lapack_int info = 0;
    int rc = GSB_OK;
    if (!r || (Vt && !vt)) {
        rc = gsb__err(GSB_ENOMEM, "svd: out of memory for a %lld x %lld problem", (long long)m,
                      (long long)n);
        goto done;
    }
    GSB_CHECK(tsqr_r(dt, m, n, A->data, 0, NULL, r, &info));
    if (info < 0) {
        rc = lapack_fail("svd", "geqrf", info);
        goto done;
    }
    /* column-major R (n x n): jobz 'O' leaves U_R in r, Vt in vt */
    info = lapack_gesdd(dt, Vt ? 'O' : 'N', (lapack_int)n, (lapack_int)n, r, S->data, NULL, 1,
                        vt, (lapack_int)n);
    if ((rc = gesdd_status(info)) != GSB_OK)
        goto done;
    if (Vt)
        transpose(dt, n, n, vt, n, Vt->data, n);
done:
    free(r);
    free(vt);
    return rc;
}

int gsb__cpu_svd(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *U, gsb__tensor *S,
                 gsb__tensor *Vt)
{
    (void)be;
    GSB_TRY(need_float("svd", "A", A));
    gsb_dtype dt = A->dtype;
    int64_t m = A->rows, n = A->cols, r = min64(m, n);
    GSB_TRY(need_vector("svd", "S", S, dt, r));
    if (U)
        GSB_TRY(need_matrix("svd", "U", U, dt, m, r));
    if (Vt)
        GSB_TRY(need_matrix("svd", "Vt", Vt, dt, r, n));
    if (r == 0)
        return GSB_OK;
    if (!U && m >= TSQR_ROWS_PER_COL * n)
        return svd_tall_no_u(A, S, Vt);

    int rc = GSB_OK;
    int vectors = U || Vt, tall = m > n;
    void *a = scratch(dt, m * n), *u = NULL, *vt = NULL;
    if (tall) {
        /* column-major A (m x n): jobz 'O' leaves U in a, Vt (r x n) in vt */
        vt = vectors ? scratch(dt, r * n) : NULL;
    } else {
        u = U ? U->data : vectors ? scratch(dt, m * r) : NULL;
        vt = Vt ? Vt->data : vectors ? scratch(dt, r * n) : NULL;
    }
    if (!a || (vectors && (!vt || (!tall && !u)))) {
        rc = gsb__err(GSB_ENOMEM, "svd: out of memory for a %lld x %lld problem",
                      (long long)m, (long long)n);
        goto done;
    }
    lapack_int info;
    if (tall) {
        transpose(dt, m, n, A->data, n, a, m);
        info = lapack_gesdd(dt, vectors ? 'O' : 'N', (lapack_int)m, (lapack_int)n, a, S->data,
                            NULL, 1, vt, (lapack_int)r);
    } else {
        /*
         * Row-major A (m x n) is, read column-major, A^T (n x m, tall), whose
         * SVD is A^T = V S U^T.  Column-major gesdd of it returns V as its
         * left vectors (n x r, ld n), whose memory read row-major is exactly
         * Vt (r x n), and U^T as its right vectors (r x m, ld r), whose
         * memory read row-major is exactly U (m x r): no transposes.
         */
        memcpy(a, A->data, gsb__tensor_nbytes(A));
        info = lapack_gesdd(dt, vectors ? 'S' : 'N', (lapack_int)n, (lapack_int)m, a, S->data,
                            vt, (lapack_int)n, u, (lapack_int)r);
    }
    if ((rc = gesdd_status(info)) != GSB_OK)
        goto done;
    if (tall && U) /* a holds column-major U (m x r = m x n) */
        transpose(dt, n, m, a, m, U->data, n);
    if (tall && Vt) /* vt holds column-major Vt (r x n, r = n) */
        transpose(dt, n, n, vt, n, Vt->data, n);
done:
    free(a);
    if (tall || !U)
        free(u);
    if (tall || !Vt)
        free(vt);
    return rc;
}

/*
 * gelsd on column-major a (m x n) and b (ldb x nrhs), then X (n x k) from the
 * first n rows of b's first k columns (b read row-major is nrhs x ldb: X is
 * the transpose of its first n columns); the rank where wanted.
 */
static int gelsd_into(gsb_dtype dt, int64_t m, int64_t n, int64_t nrhs, void *a, void *b,
                      int64_t ldb, void *s, double rcond, gsb__tensor *X, int64_t *rank)
{
    lapack_int got_rank = 0;
    lapack_int info = lapack_gelsd(dt, (lapack_int)m, (lapack_int)n, (lapack_int)nrhs, a, b,
                                   (lapack_int)ldb, s, rcond, &got_rank);
    if (info > 0)
        return gsb__err(GSB_ENUMERIC, "lstsq: the SVD did not converge (gelsd info %d)",
                        (int)info);
    if (info < 0)
        return lapack_fail("lstsq", "gelsd", info);
    transpose(dt, X->cols, n, b, ldb, X->data, X->cols);
    if (rank)
        *rank = got_rank;
    return GSB_OK;
}

/*
 * Least squares with a tall A (m >= TSQR_ROWS_PER_COL (n + k)): [A B] = Q R
 * with R = [R1 C; 0 D], so min ||A x - b|| is min ||R1 x - c||, and R1 has
 * A's singular values: gelsd on the n x n R1 and the n x k C gives the same
 * minimum-norm solution, rank and S that gelsd on A does (which itself
 * starts from a QR of A), from one TSQR pass (tsqr_r) over the data.
 */
static int lstsq_tall(const gsb__tensor *A, const gsb__tensor *B, double rcond, gsb__tensor *X,
                      gsb__tensor *S, int64_t *rank)
{
    gsb_dtype dt = A->dtype;
    size_t es = gsb_dtype_size(dt);
    int64_t m = A->rows, n = A->cols, k = B->cols, c = n + k;
    void *r = scratch(dt, c * c), *a = scratch(dt, n * n), *b = scratch(dt, n * k);
    void *s = S ? S->data : scratch(dt, n);
    lapack_int info = 0;
    int rc = GSB_OK;
    if (!r || !a || !b || !s) {
        rc = gsb__err(GSB_ENOMEM, "lstsq: out of memory for a %lld x %lld problem",
                      (long long)m, (long long)n);
        goto done;
    }
    GSB_CHECK(tsqr_r(dt, m, n, A->data, k, B->data, r, &info));
    if (info < 0) {
        rc = lapack_fail("lstsq", "geqrf", info);
        goto done;
    }
    for (int64_t j = 0; j < n; j++) /* R1: the leading n x n of R (ld c) */
        memcpy((char *)a + (size_t)(j * n) * es, (char *)r + (size_t)(j * c) * es,
               (size_t)n * es);
    for (int64_t j = 0; j < k; j++) /* C: rows 0..n-1 of R's last k columns */
        memcpy((char *)b + (size_t)(j * n) * es, (char *)r + (size_t)((n + j) * c) * es,
               (size_t)n * es);
    rc = gelsd_into(dt, n, n, k, a, b, n, s, rcond, X, rank);
done:
    free(r);
    free(a);
    free(b);
    if (!S)
        free(s);
    return rc;
}

/* S and rank may be NULL when the caller does not want them. */
int gsb__cpu_lstsq(const gsb__backend *be, const gsb__tensor *A, const gsb__tensor *B,
                   double rcond, gsb__tensor *X, gsb__tensor *S, int64_t *rank)
{
    (void)be;
    GSB_TRY(need_float("lstsq", "A", A));
    gsb_dtype dt = A->dtype;
    int64_t m = A->rows, n = A->cols, k = B ? B->cols : 0, mx = max64(m, n);
    GSB_TRY(need_matrix("lstsq", "B", B, dt, m, k));
    GSB_TRY(need_matrix("lstsq", "X", X, dt, n, k));
    if (S)
        GSB_TRY(need_vector("lstsq", "S", S, dt, min64(m, n)));
    if (mx > INT_MAX)
        return gsb__err(GSB_EINTERNAL, "lstsq: %lld rows is out of range", (long long)mx);
    if (m == 0 || n == 0) { /* the minimum-norm solution of an empty system */
        memset(X->data, 0, gsb__tensor_nbytes(X));
        if (rank)
            *rank = 0;
        return GSB_OK;
    }
    if (k > 0 && m >= TSQR_ROWS_PER_COL * (n + k))
        return lstsq_tall(A, B, rcond, X, S, rank);

    int rc = GSB_OK;
    /* gelsd wants A and B column-major, B with max(m, n) rows (it returns
     * X in the first n); transposing into our own scratch spares LAPACKE's
     * hidden row-major copies.  It refuses 0 right-hand sides, so with
     * k == 0 it gets one zero column (for S and the rank). */
    int64_t nrhs = max64(k, 1);
    void *a = scratch(dt, m * n);
    void *b = scratch(dt, mx * nrhs);
    void *s = S ? S->data : scratch(dt, min64(m, n));
    if (!a || !b || !s) {
        rc = gsb__err(GSB_ENOMEM, "lstsq: out of memory for a %lld x %lld problem",
                      (long long)m, (long long)n);
        goto done;
    }
    transpose(dt, m, n, A->data, n, a, m);
    /* rows m..mx-1 of b are only output space, but LAPACKE scans all of
     * them for NaN */
    if (m < n || k == 0)
        memset(b, 0, (size_t)(mx * nrhs) * gsb_dtype_size(dt));
    transpose(dt, m, k, B->data, k, b, mx);
    rc = gelsd_into(dt, m, n, nrhs, a, b, mx, s, rcond, X, rank);
done:
    free(a);
    free(b);
    if (!S)
        free(s);
    return rc;
}

int gsb__cpu_orthonormalize(const gsb__backend *be, gsb__tensor *A)
{
    (void)be;
    GSB_TRY(need_float("orthonormalize", "A", A));
    gsb_dtype dt = A->dtype;
    int64_t m = A->rows, n = A->cols;
    if (m < n)
        return gsb__err(GSB_EINTERNAL, "orthonormalize: A has shape (%lld, %lld), needs "
                                       "rows >= cols", (long long)m, (long long)n);
    if (n == 0)
        return GSB_OK;
    /* geqrf + orgqr on a column-major copy (tall, see the top of the file) */
    void *a = scratch(dt, m * n), *tau = scratch(dt, n);
    int rc = GSB_OK;
    if (!a || !tau) {
        rc = gsb__err(GSB_ENOMEM, "orthonormalize: out of memory for a %lld x %lld copy",
                      (long long)m, (long long)n);
        goto done;
    }
    transpose(dt, m, n, A->data, n, a, m);
    lapack_int info = lapack_geqrf(dt, (lapack_int)m, (lapack_int)n, a, tau);
    if (info != 0) {
        rc = lapack_fail("orthonormalize", "geqrf", info);
        goto done;
    }
    info = lapack_orgqr(dt, (lapack_int)m, (lapack_int)n, a, tau);
    if (info != 0) {
        rc = lapack_fail("orthonormalize", "orgqr", info);
        goto done;
    }
    /* a read row-major is Q^T (n x m, ld m) */
    transpose(dt, n, m, a, m, A->data, n);
done:
    free(a);
    free(tau);
    return rc;
}
