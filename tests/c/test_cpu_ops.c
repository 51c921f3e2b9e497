/*
 * test_cpu_ops.c - the CPU backend's dense ops (cpu_linalg.c, cpu_reduce.c,
 * cpu_random.c) in both float dtypes, called through the ops table, against
 * naive reference loops in double on fresh random data.  Outputs start as
 * NaN so an element an op forgets to write fails its check.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/tensor.h"
#include "testing.h"

static const gsb__backend *be;
static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};

/* relative error bound for results computed in dtype dt */
static double tol(gsb_dtype dt) { return dt == GSB_F32 ? 1e-4 : 1e-10; }

/* ---- tensors for tests ---------------------------------------------------- */

static gsb__tensor make(gsb_dtype dt, int64_t rows, int64_t cols)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(be, dt, rows, cols, &t) != GSB_OK) {
        fprintf(stderr, "allocation failed: %s\n", gsb_errmsg());
        exit(2);
    }
    return t;
}

static gsb__tensor make_filled(gsb_dtype dt, int64_t rows, int64_t cols, double v)
{
    gsb__tensor t = make(dt, rows, cols);
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&t, i, v);
    return t;
}

static gsb__tensor make_nan(gsb_dtype dt, int64_t rows, int64_t cols)
{
    return make_filled(dt, rows, cols, NAN);
}

/* N(mu, sd^2) entries, already rounded to dt */
static gsb__tensor make_normal(gsb_dtype dt, int64_t rows, int64_t cols, double mu, double sd)
{
    gsb__tensor t = make(dt, rows, cols);
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&t, i, mu + sd * testing_normal());
    return t;
}

/* the tensor's values as a fresh double array */
static double *dbl(const gsb__tensor *t)
{
    int64_t n = gsb__tensor_numel(t);
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!x)
        exit(2);
    for (int64_t i = 0; i < n; i++)
        x[i] = gsb__tensor_get(t, i);
    return x;
}

static double relerr_t(const gsb__tensor *t, const double *ref)
{
    double *x = dbl(t);
    double e = testing_relerr(x, ref, gsb__tensor_numel(t));
    free(x);
    return e;
}

static int same_values(const gsb__tensor *a, const gsb__tensor *b)
{
    return a->dtype == b->dtype && gsb__tensor_numel(a) == gsb__tensor_numel(b) &&
           memcmp(a->data, b->data, gsb__tensor_nbytes(a)) == 0;
}

/* ---- naive dense helpers in double (row-major) ----------------------------- */

/* C (m x n) = op(A) op(B), op(A) m x k; A stored ar x ac, B stored br x bc */
static void ref_matmul(const double *A, int64_t ac, int ta, const double *B, int64_t bc, int tb,
                       int64_t m, int64_t k, int64_t n, double *C)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++)
                s += (ta ? A[l * ac + i] : A[i * ac + l]) * (tb ? B[j * bc + l] : B[l * bc + j]);
            C[i * n + j] = s;
        }
}

/* max |M^T M - I| over the r columns of M (m x r) */
static double orth_err_cols(const double *M, int64_t m, int64_t r)
{
    double e = 0;
    for (int64_t a = 0; a < r; a++)
        for (int64_t b = 0; b < r; b++) {
            double s = 0;
            for (int64_t i = 0; i < m; i++)
                s += M[i * r + a] * M[i * r + b];
            e = fmax(e, fabs(s - (a == b)));
        }
    return e;
}

/* max |M M^T - I| over the r rows of M (r x n) */
static double orth_err_rows(const double *M, int64_t r, int64_t n)
{
    double e = 0;
    for (int64_t a = 0; a < r; a++)
        for (int64_t b = 0; b < r; b++) {
            double s = 0;
            for (int64_t j = 0; j < n; j++)
                s += M[a * n + j] * M[b * n + j];
            e = fmax(e, fabs(s - (a == b)));
        }
    return e;
}

/* symmetric n x n with N(0, 1) entries */
static gsb__tensor make_symmetric(gsb_dtype dt, int64_t n)
{
    gsb__tensor t = make(dt, n, n);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j <= i; j++) {
            double v = testing_normal();
            gsb__tensor_set(&t, i * n + j, v);
            gsb__tensor_set(&t, j * n + i, v);
        }
    return t;
}

/* ---- gemm and syrk ------------------------------------------------------------ */

static void check_gemm(gsb_dtype dt, int ta, int tb, int64_t m, int64_t k, int64_t n,
                       double alpha, double beta)
{
    gsb__tensor A = ta ? make_normal(dt, k, m, 0, 1) : make_normal(dt, m, k, 0, 1);
    gsb__tensor B = tb ? make_normal(dt, n, k, 0, 1) : make_normal(dt, k, n, 0, 1);
    /* with beta == 0 C is not read: NaN must not leak through */
    gsb__tensor C = beta == 0 ? make_nan(dt, m, n) : make_normal(dt, m, n, 0, 1);
    double *a = dbl(&A), *b = dbl(&B), *c0 = dbl(&C);
    double *ref = malloc(sizeof(double) * (size_t)(m * n + 1));
    ref_matmul(a, A.cols, ta, b, B.cols, tb, m, k, n, ref);
    for (int64_t i = 0; i < m * n; i++)
        ref[i] = alpha * ref[i] + (beta == 0 ? 0 : beta * c0[i]);
    CHECK_OK(be->ops->gemm(be, ta, tb, alpha, &A, &B, beta, &C));
    CHECK(relerr_t(&C, ref) < tol(dt));
    free(a);
    free(b);
    free(c0);
    free(ref);
    gsb__tensor_free(&A);
    gsb__tensor_free(&B);
    gsb__tensor_free(&C);
}

static void test_gemm(void)
{
    for (int d = 0; d < 2; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                check_gemm(dtypes[d], ta, tb, 13, 7, 9, 0.7, 0.0);
                check_gemm(dtypes[d], ta, tb, 45, 33, 17, -1.25, 0.5);
                check_gemm(dtypes[d], ta, tb, 1, 20, 1, 1.0, 1.0);
            }
}

/* k == 0: the product is empty and C becomes beta * C */
static void test_gemm_empty_inner(void)
{
    for (int d = 0; d < 2; d++) {
        gsb_dtype dt = dtypes[d];
        gsb__tensor A = make(dt, 4, 0), B = make(dt, 0, 3);
        gsb__tensor C = make_nan(dt, 4, 3);
        CHECK_OK(be->ops->gemm(be, 0, 0, 1.0, &A, &B, 0.0, &C));
        for (int64_t i = 0; i < 12; i++)
            CHECK(gsb__tensor_get(&C, i) == 0.0);
        gsb__tensor_free(&C);
        C = make_normal(dt, 4, 3, 0, 1);
        double *c0 = dbl(&C);
        for (int64_t i = 0; i < 12; i++)
            c0[i] *= 2.0;
        CHECK_OK(be->ops->gemm(be, 0, 0, 1.0, &A, &B, 2.0, &C));
        CHECK(relerr_t(&C, c0) < 1e-15);
        free(c0);
        gsb__tensor_free(&A);
        gsb__tensor_free(&B);
        gsb__tensor_free(&C);
    }
}

static void test_gemm_errors(void)
{
    gsb__tensor A = make_normal(GSB_F64, 3, 4, 0, 1), B = make_normal(GSB_F64, 5, 2, 0, 1);
    gsb__tensor C = make(GSB_F64, 3, 2), Bf = make_normal(GSB_F32, 4, 2, 0, 1);
    gsb__tensor Bi = make(GSB_I32, 4, 2), Cbad = make(GSB_F64, 2, 3);
    CHECK_ERR(be->ops->gemm(be, 0, 0, 1, &A, &B, 0, &C), GSB_EINTERNAL, "inner dimensions");
    CHECK_ERR(be->ops->gemm(be, 0, 0, 1, &A, &Bf, 0, &C), GSB_EINTERNAL, "float32");
    CHECK_ERR(be->ops->gemm(be, 0, 0, 1, &A, &Bi, 0, &C), GSB_EINTERNAL, "int32");
    CHECK_ERR(be->ops->gemm(be, 0, 1, 1, &A, &B, 0, &Cbad), GSB_EINTERNAL, "inner");
    gsb__tensor B2 = make_normal(GSB_F64, 4, 2, 0, 1);
    CHECK_ERR(be->ops->gemm(be, 0, 0, 1, &A, &B2, 0, &Cbad), GSB_EINTERNAL, "shape");
    gsb__tensor S = make_normal(GSB_F64, 3, 3, 0, 1);
    CHECK_ERR(be->ops->gemm(be, 0, 0, 1, &S, &S, 0, &S), GSB_EINTERNAL, "share memory");
    gsb__tensor *all[] = {&A, &B, &C, &Bf, &Bi, &Cbad, &B2, &S};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static void check_syrk(gsb_dtype dt, int64_t m, int64_t n, double alpha, double beta)
{
    gsb__tensor A = make_normal(dt, m, n, 0, 1);
    gsb__tensor C = beta == 0 ? make_nan(dt, n, n) : make_symmetric(dt, n);
    double *a = dbl(&A), *c0 = dbl(&C);
    double *ref = malloc(sizeof(double) * (size_t)(n * n));
    ref_matmul(a, n, 1, a, n, 0, n, m, n, ref);
    for (int64_t i = 0; i < n * n; i++)
        ref[i] = alpha * ref[i] + (beta == 0 ? 0 : beta * c0[i]);
    CHECK_OK(be->ops->syrk(be, alpha, &A, beta, &C));
    CHECK(relerr_t(&C, ref) < tol(dt));
    /* both triangles written, and exactly symmetric */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++)
            CHECK(gsb__tensor_get(&C, i * n + j) == gsb__tensor_get(&C, j * n + i));
    free(a);
    free(c0);
    free(ref);
    gsb__tensor_free(&A);
    gsb__tensor_free(&C);
}

static void test_syrk(void)
{
    for (int d = 0; d < 2; d++) {
        check_syrk(dtypes[d], 23, 11, 1.5, 0.0);
        check_syrk(dtypes[d], 40, 70, 1.0, 0.0); /* n spans several 32-wide tiles */
        check_syrk(dtypes[d], 9, 35, -0.5, 2.0);
    }
    gsb__tensor A = make_normal(GSB_F32, 5, 3, 0, 1), C = make(GSB_F32, 5, 5);
    CHECK_ERR(be->ops->syrk(be, 1, &A, 0, &C), GSB_EINTERNAL, "shape");
    /* no rows: A^T A is the zero matrix */
    gsb__tensor E = make(GSB_F64, 0, 4), Z = make_nan(GSB_F64, 4, 4);
    CHECK_OK(be->ops->syrk(be, 1, &E, 0, &Z));
    for (int64_t i = 0; i < 16; i++)
        CHECK(gsb__tensor_get(&Z, i) == 0.0);
    gsb__tensor *all[] = {&A, &C, &E, &Z};
    for (size_t i = 0; i < 4; i++)
        gsb__tensor_free(all[i]);
}

/* ---- eigh and posv ---------------------------------------------------------- */

static void check_eigh(gsb_dtype dt, int64_t n)
{
    gsb__tensor A = make_symmetric(dt, n);
    gsb__tensor A0 = make(dt, n, n);
    CHECK_OK(be->ops->copy(be, &A0, &A));
    gsb__tensor w = make_nan(dt, n, 1), V = make_nan(dt, n, n);
    CHECK_OK(be->ops->eigh(be, &A, &w, &V));
    CHECK(same_values(&A, &A0));
    double *a = dbl(&A), *wv = dbl(&w), *v = dbl(&V);
    for (int64_t j = 1; j < n; j++)
        CHECK(wv[j - 1] <= wv[j]);
    /* A V = V diag(w), relative to the largest eigenvalue */
    double *av = malloc(sizeof(double) * (size_t)(n * n));
    ref_matmul(a, n, 0, v, n, 0, n, n, n, av);
    double scale = fmax(fabs(wv[0]), fabs(wv[n - 1])), err = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            err = fmax(err, fabs(av[i * n + j] - v[i * n + j] * wv[j]));
    CHECK(err / scale < tol(dt));
    CHECK(orth_err_cols(v, n, n) < tol(dt));
    free(a);
    free(wv);
    free(v);
    free(av);
    gsb__tensor *all[] = {&A, &A0, &w, &V};
    for (size_t i = 0; i < 4; i++)
        gsb__tensor_free(all[i]);
}

static void test_eigh(void)
{
    for (int d = 0; d < 2; d++) {
        check_eigh(dtypes[d], 1);
        check_eigh(dtypes[d], 6);
        check_eigh(dtypes[d], 45);
    }
    /* a known answer: [[2, 1], [1, 2]] has eigenvalues 1 and 3 */
    double a[4] = {2, 1, 1, 2};
    gsb__tensor A = gsb__tensor_host_view(a, GSB_F64, 2, 2);
    gsb__tensor w = make_nan(GSB_F64, 2, 1), V = make_nan(GSB_F64, 2, 2);
    CHECK_OK(be->ops->eigh(be, &A, &w, &V));
    CHECK_CLOSE(gsb__tensor_get(&w, 0), 1.0, 1e-14);
    CHECK_CLOSE(gsb__tensor_get(&w, 1), 3.0, 1e-14);
    CHECK_CLOSE(fabs(gsb__tensor_get(&V, 0)), sqrt(0.5), 1e-14);
    gsb__tensor w3 = make(GSB_F64, 3, 1);
    CHECK_ERR(be->ops->eigh(be, &A, &w3, &V), GSB_EINTERNAL, "w");
    gsb__tensor_free(&w);
    gsb__tensor_free(&w3);
    gsb__tensor_free(&V);
}

static void test_posv(void)
{
    for (int d = 0; d < 2; d++) {
        gsb_dtype dt = dtypes[d];
        int64_t n = 30, k = 4;
        /* SPD: M^T M + n I */
        gsb__tensor M = make_normal(dt, n, n, 0, 1), A = make(dt, n, n);
        CHECK_OK(be->ops->syrk(be, 1.0, &M, 0.0, &A));
        for (int64_t i = 0; i < n; i++)
            gsb__tensor_set(&A, i * n + i, gsb__tensor_get(&A, i * n + i) + (double)n);
        gsb__tensor A0 = make(dt, n, n);
        CHECK_OK(be->ops->copy(be, &A0, &A));
        gsb__tensor B = make_normal(dt, n, k, 0, 1);
        double *b = dbl(&B), *a = dbl(&A);
        CHECK_OK(be->ops->posv(be, &A, &B));
        CHECK(same_values(&A, &A0));
        double *x = dbl(&B), *ax = malloc(sizeof(double) * (size_t)(n * k));
        ref_matmul(a, n, 0, x, k, 0, n, n, k, ax);
        CHECK(testing_relerr(ax, b, n * k) < tol(dt));
        free(b);
        free(a);
        free(x);
        free(ax);

        /* indefinite: a negative pivot */
        gsb__tensor N = make_filled(dt, 3, 3, 0.0), B3 = make_normal(dt, 3, 2, 0, 1);
        gsb__tensor_set(&N, 0, 1.0);
        gsb__tensor_set(&N, 4, -1.0);
        gsb__tensor_set(&N, 8, 2.0);
        CHECK_ERR(be->ops->posv(be, &N, &B3), GSB_ENUMERIC, "not positive definite");
        gsb__tensor B2 = make(dt, 2, 2);
        CHECK_ERR(be->ops->posv(be, &N, &B2), GSB_EINTERNAL, "shape");
        gsb__tensor *all[] = {&M, &A, &A0, &B, &N, &B3, &B2};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            gsb__tensor_free(all[i]);
    }
}

/* ---- svd, lstsq, orthonormalize ----------------------------------------------- */

static void check_svd(gsb_dtype dt, int64_t m, int64_t n)
{
    int64_t r = m < n ? m : n;
    gsb__tensor A = make_normal(dt, m, n, 0, 1), A0 = make(dt, m, n);
    CHECK_OK(be->ops->copy(be, &A0, &A));
    gsb__tensor U = make_nan(dt, m, r), S = make_nan(dt, r, 1), Vt = make_nan(dt, r, n);
    CHECK_OK(be->ops->svd(be, &A, &U, &S, &Vt));
    CHECK(same_values(&A, &A0));
    double *a = dbl(&A), *u = dbl(&U), *s = dbl(&S), *vt = dbl(&Vt);
    for (int64_t j = 0; j < r; j++)
        CHECK(s[j] >= 0 && (j == 0 || s[j - 1] >= s[j]));
    /* U diag(S) Vt = A */
    double *us = malloc(sizeof(double) * (size_t)(m * r)), *rec = malloc(sizeof(double) * (size_t)(m * n));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < r; j++)
            us[i * r + j] = u[i * r + j] * s[j];
    ref_matmul(us, r, 0, vt, n, 0, m, r, n, rec);
    CHECK(testing_relerr(rec, a, m * n) < tol(dt));
    CHECK(orth_err_cols(u, m, r) < tol(dt));
    CHECK(orth_err_rows(vt, r, n) < tol(dt));

    /* U alone: orthonormal, and the rows of U^T A have norms S */
    gsb__tensor U2 = make_nan(dt, m, r), S2 = make_nan(dt, r, 1);
    CHECK_OK(be->ops->svd(be, &A, &U2, &S2, NULL));
    CHECK(relerr_t(&S2, s) < tol(dt));
    double *u2 = dbl(&U2);
    CHECK(orth_err_cols(u2, m, r) < tol(dt));
    for (int64_t k = 0; k < r; k++) {
        double nrm = 0;
        for (int64_t j = 0; j < n; j++) {
            double t = 0;
            for (int64_t i = 0; i < m; i++)
                t += u2[i * r + k] * a[i * n + j];
            nrm += t * t;
        }
        CHECK(fabs(sqrt(nrm) - s[k]) < tol(dt) * s[0]);
    }
    /* Vt alone: orthonormal, and the columns of A Vt^T have norms S */
    gsb__tensor Vt2 = make_nan(dt, r, n);
    CHECK_OK(be->ops->svd(be, &A, NULL, &S2, &Vt2));
    CHECK(relerr_t(&S2, s) < tol(dt));
    double *v2 = dbl(&Vt2);
    CHECK(orth_err_rows(v2, r, n) < tol(dt));
    for (int64_t k = 0; k < r; k++) {
        double nrm = 0;
        for (int64_t i = 0; i < m; i++) {
            double t = 0;
            for (int64_t j = 0; j < n; j++)
                t += a[i * n + j] * v2[k * n + j];
            nrm += t * t;
        }
        CHECK(fabs(sqrt(nrm) - s[k]) < tol(dt) * s[0]);
    }
    /* values only */
    gsb__tensor S3 = make_nan(dt, r, 1);
    CHECK_OK(be->ops->svd(be, &A, NULL, &S3, NULL));
    CHECK(relerr_t(&S3, s) < tol(dt));

    free(a);
    free(u);
    free(s);
    free(vt);
    free(us);
    free(rec);
    free(u2);
    free(v2);
    gsb__tensor *all[] = {&A, &A0, &U, &S, &Vt, &U2, &S2, &Vt2, &S3};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static void test_svd(void)
{
    for (int d = 0; d < 2; d++) {
        check_svd(dtypes[d], 20, 7);
        check_svd(dtypes[d], 7, 20);
        check_svd(dtypes[d], 12, 12);
        check_svd(dtypes[d], 1, 5);
        /* tall enough for the TSQR path when U is not asked for
         * (cpu_linalg.c, svd_tall_no_u): one block, several, all 16, and
         * a last block shorter than the others */
        check_svd(dtypes[d], 30, 7);
        check_svd(dtypes[d], 123, 3);
        check_svd(dtypes[d], 2000, 16);
        check_svd(dtypes[d], 61, 2);
    }
    /* rank-deficient and tall: TSQR's singular values match gesdd's on A,
     * the zero ones included */
    for (int d = 0; d < 2; d++) {
        int64_t m = 400, n = 6;
        gsb__tensor A = make_normal(dtypes[d], m, n, 0, 1);
        for (int64_t i = 0; i < m; i++) /* column 5 = column 0 + column 1 */
            gsb__tensor_set(&A, i * n + 5, gsb__tensor_get(&A, i * n) + gsb__tensor_get(&A, i * n + 1));
        gsb__tensor U = make_nan(dtypes[d], m, n), S = make_nan(dtypes[d], n, 1),
                    S2 = make_nan(dtypes[d], n, 1), Vt = make_nan(dtypes[d], n, n);
        CHECK_OK(be->ops->svd(be, &A, &U, &S, NULL));
        CHECK_OK(be->ops->svd(be, &A, NULL, &S2, &Vt));
        double s0 = gsb__tensor_get(&S, 0);
        for (int64_t j = 0; j < n; j++)
            CHECK(fabs(gsb__tensor_get(&S, j) - gsb__tensor_get(&S2, j)) < tol(dtypes[d]) * s0);
        CHECK(gsb__tensor_get(&S2, n - 1) < tol(dtypes[d]) * s0);
        gsb__tensor *all[] = {&A, &U, &S, &S2, &Vt};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            gsb__tensor_free(all[i]);
    }
    /* a known answer: diag(3, -2) embedded in 3 x 2 has singular values 3, 2 */
    double a[6] = {0, -2, 3, 0, 0, 0};
    gsb__tensor A = gsb__tensor_host_view(a, GSB_F64, 3, 2), S = make_nan(GSB_F64, 2, 1);
    CHECK_OK(be->ops->svd(be, &A, NULL, &S, NULL));
    CHECK_CLOSE(gsb__tensor_get(&S, 0), 3.0, 1e-15);
    CHECK_CLOSE(gsb__tensor_get(&S, 1), 2.0, 1e-15);
    gsb__tensor U = make(GSB_F64, 3, 3);
    CHECK_ERR(be->ops->svd(be, &A, &U, &S, NULL), GSB_EINTERNAL, "U");
    gsb__tensor_free(&S);
    gsb__tensor_free(&U);
}

/*
 * Minimum-norm least squares checked two ways: X equals pinv(A) B, with
 * pinv built from the svd op (singular values <= rcond * max dropped), and
 * the residual A X - B is orthogonal to the columns of A.
 */
static void check_lstsq(gsb_dtype dt, int64_t m, int64_t n, int64_t rank_true, int64_t k)
{
    int64_t r = m < n ? m : n;
    double rcond = dt == GSB_F32 ? 1e-4 : 1e-10;
    /* A = L R with L (m x rank), R (rank x n): rank deficient when rank < r */
    gsb__tensor L = make_normal(GSB_F64, m, rank_true, 0, 1);
    gsb__tensor R = make_normal(GSB_F64, rank_true, n, 0, 1);
    gsb__tensor Ad = make(GSB_F64, m, n), A = make(dt, m, n);
    CHECK_OK(be->ops->gemm(be, 0, 0, 1.0, &L, &R, 0.0, &Ad));
    CHECK_OK(be->ops->copy(be, &A, &Ad));
    gsb__tensor B = make_normal(dt, m, k, 0, 1), A0 = make(dt, m, n), B0 = make(dt, m, k);
    CHECK_OK(be->ops->copy(be, &A0, &A));
    CHECK_OK(be->ops->copy(be, &B0, &B));
    gsb__tensor X = make_nan(dt, n, k), S = make_nan(dt, r, 1);
    int64_t rank = -1;
    CHECK_OK(be->ops->lstsq(be, &A, &B, rcond, &X, &S, &rank));
    CHECK(rank == rank_true);
    CHECK(same_values(&A, &A0) && same_values(&B, &B0));

    /* pinv(A) B = V diag(1/s) U^T B over the kept singular values */
    gsb__tensor U = make(dt, m, r), S2 = make(dt, r, 1), Vt = make(dt, r, n);
    CHECK_OK(be->ops->svd(be, &A, &U, &S2, &Vt));
    double *u = dbl(&U), *s = dbl(&S2), *vt = dbl(&Vt), *b = dbl(&B), *a = dbl(&A);
    CHECK(relerr_t(&S, s) < tol(dt));
    double *utb = calloc((size_t)(r * k), sizeof(double));
    double *ref = calloc((size_t)(n * k), sizeof(double));
    for (int64_t q = 0; q < r; q++) {
        if (!(s[q] > rcond * s[0]))
            continue;
        for (int64_t c = 0; c < k; c++) {
            double t = 0;
            for (int64_t i = 0; i < m; i++)
                t += u[i * r + q] * b[i * k + c];
            utb[q * k + c] = t / s[q];
        }
    }
    ref_matmul(vt, n, 1, utb, k, 0, n, r, k, ref);
    /* f32: the dropped directions carry ~1e-7 noise, amplified by 1/s_min */
    CHECK(relerr_t(&X, ref) < (dt == GSB_F32 ? 1e-3 : 1e-9));

    /* A^T (A X - B) = 0, relative to |A| |B| */
    double *x = dbl(&X), *ax = malloc(sizeof(double) * (size_t)(m * k));
    double *g = malloc(sizeof(double) * (size_t)(n * k));
    ref_matmul(a, n, 0, x, k, 0, m, n, k, ax);
    for (int64_t i = 0; i < m * k; i++)
        ax[i] -= b[i];
    ref_matmul(a, n, 1, ax, k, 0, n, m, k, g);
    double gmax = 0, amax = 0, bmax = 0;
    for (int64_t i = 0; i < n * k; i++)
        gmax = fmax(gmax, fabs(g[i]));
    for (int64_t i = 0; i < m * n; i++)
        amax = fmax(amax, fabs(a[i]));
    for (int64_t i = 0; i < m * k; i++)
        bmax = fmax(bmax, fabs(b[i]));
    CHECK(gmax / (amax * bmax * (double)m) < tol(dt));

    free(u);
    free(s);
    free(vt);
    free(b);
    free(a);
    free(utb);
    free(ref);
    free(x);
    free(ax);
    free(g);
    gsb__tensor *all[] = {&L, &R, &Ad, &A, &B, &A0, &B0, &X, &S, &U, &S2, &Vt};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static void test_lstsq(void)
{
    for (int d = 0; d < 2; d++) {
        check_lstsq(dtypes[d], 30, 6, 6, 3);  /* overdetermined, full rank */
        check_lstsq(dtypes[d], 25, 8, 3, 2);  /* rank deficient */
        check_lstsq(dtypes[d], 5, 12, 5, 2);  /* underdetermined: minimum norm */
        check_lstsq(dtypes[d], 6, 10, 2, 1);  /* underdetermined and rank deficient */
        /* tall enough for the TSQR path (cpu_linalg.c, lstsq_tall): one
         * block, 16 blocks, rank deficient over several blocks */
        check_lstsq(dtypes[d], 30, 6, 6, 1);
        check_lstsq(dtypes[d], 2000, 16, 16, 3);
        check_lstsq(dtypes[d], 1500, 10, 4, 2);
    }
}

static void test_lstsq_edges(void)
{
    /* no rows: the minimum-norm solution is 0; S and rank may be NULL */
    gsb__tensor A = make(GSB_F64, 0, 3), B = make(GSB_F64, 0, 2), X = make_nan(GSB_F64, 3, 2);
    int64_t rank = -1;
    CHECK_OK(be->ops->lstsq(be, &A, &B, 1e-10, &X, NULL, &rank));
    CHECK(rank == 0);
    for (int64_t i = 0; i < 6; i++)
        CHECK(gsb__tensor_get(&X, i) == 0.0);
    /* a known answer: y = 1 + 2 t fitted exactly */
    double a[8] = {1, 0, 1, 1, 1, 2, 1, 3}, b[4] = {1, 3, 5, 7};
    gsb__tensor A2 = gsb__tensor_host_view(a, GSB_F64, 4, 2);
    gsb__tensor B2 = gsb__tensor_host_view(b, GSB_F64, 4, 1), X2 = make_nan(GSB_F64, 2, 1);
    CHECK_OK(be->ops->lstsq(be, &A2, &B2, -1.0, &X2, NULL, NULL));
    CHECK_CLOSE(gsb__tensor_get(&X2, 0), 1.0, 1e-13);
    CHECK_CLOSE(gsb__tensor_get(&X2, 1), 2.0, 1e-13);
    gsb__tensor Xbad = make(GSB_F64, 4, 1);
    CHECK_ERR(be->ops->lstsq(be, &A2, &B2, -1.0, &Xbad, NULL, NULL), GSB_EINTERNAL, "X");
    /* no right-hand sides: still the singular values and the rank */
    gsb__tensor B0 = make(GSB_F64, 4, 0), X0 = make(GSB_F64, 2, 0), S = make_nan(GSB_F64, 2, 1);
    CHECK_OK(be->ops->lstsq(be, &A2, &B0, 1e-12, &X0, &S, &rank));
    CHECK(rank == 2 && gsb__tensor_get(&S, 0) > gsb__tensor_get(&S, 1));
    CHECK(gsb__tensor_get(&S, 1) > 0.5);
    gsb__tensor *all[] = {&A, &B, &X, &X2, &Xbad, &B0, &X0, &S};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static void test_orthonormalize(void)
{
    for (int d = 0; d < 2; d++) {
        gsb_dtype dt = dtypes[d];
        int64_t shapes[3][2] = {{40, 9}, {10, 10}, {7, 1}};
        for (int c = 0; c < 3; c++) {
            int64_t m = shapes[c][0], n = shapes[c][1];
            gsb__tensor A = make_normal(dt, m, n, 0, 1);
            double *a = dbl(&A);
            CHECK_OK(be->ops->orthonormalize(be, &A));
            double *q = dbl(&A);
            CHECK(orth_err_cols(q, m, n) < tol(dt));
            /* R = Q^T A is upper triangular and Q R = A: same column span,
             * in the same nested order */
            double *rr = malloc(sizeof(double) * (size_t)(n * n));
            double *qr = malloc(sizeof(double) * (size_t)(m * n));
            ref_matmul(q, n, 1, a, n, 0, n, m, n, rr);
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < i; j++)
                    CHECK(fabs(rr[i * n + j]) < tol(dt) * sqrt((double)m));
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < i; j++)
                    rr[i * n + j] = 0;
            ref_matmul(q, n, 0, rr, n, 0, m, n, n, qr);
            CHECK(testing_relerr(qr, a, m * n) < tol(dt));
            free(a);
            free(q);
            free(rr);
            free(qr);
            gsb__tensor_free(&A);
        }
    }
    gsb__tensor W = make_normal(GSB_F64, 3, 5, 0, 1);
    CHECK_ERR(be->ops->orthonormalize(be, &W), GSB_EINTERNAL, "rows >= cols");
    gsb__tensor_free(&W);
}

/* ---- reductions ------------------------------------------------------------ */

static void check_col_moments(gsb_dtype dt, int64_t n, int64_t d, int wkind, gsb_dtype out_dt)
{
    /* a large offset makes a one-pass sum-of-squares formula fail */
    gsb__tensor X = make_normal(dt, n, d, 1000.0, 3.0);
    gsb__tensor w = GSB__TENSOR_NONE;
    if (wkind) {
        w = make(wkind == 1 ? GSB_F32 : GSB_F64, n, 1);
        for (int64_t i = 0; i < n; i++)
            gsb__tensor_set(&w, i, 0.1 + 2.0 * testing_uniform());
    }
    gsb__tensor mean = make_nan(out_dt, d, 1), var = make_nan(out_dt, d, 1);
    CHECK_OK(be->ops->col_moments(be, &X, wkind ? &w : NULL, &mean, &var));
    double *x = dbl(&X), *rm = malloc(sizeof(double) * (size_t)d), *rv = malloc(sizeof(double) * (size_t)d);
    for (int64_t j = 0; j < d; j++) {
        double sw = 0, s = 0, v = 0;
        for (int64_t i = 0; i < n; i++) {
            double wi = wkind ? gsb__tensor_get(&w, i) : 1.0;
            sw += wi;
            s += wi * x[i * d + j];
        }
        rm[j] = s / sw;
        for (int64_t i = 0; i < n; i++) {
            double wi = wkind ? gsb__tensor_get(&w, i) : 1.0;
            v += wi * (x[i * d + j] - rm[j]) * (x[i * d + j] - rm[j]);
        }
        rv[j] = v / sw;
    }
    /* inputs are exact in double: only the accumulation and the output
     * rounding err */
    double t = out_dt == GSB_F32 ? 1e-6 : 1e-11;
    CHECK(relerr_t(&mean, rm) < t);
    CHECK(relerr_t(&var, rv) < t);
    /* var may be skipped */
    gsb__tensor mean2 = make_nan(out_dt, d, 1);
    CHECK_OK(be->ops->col_moments(be, &X, wkind ? &w : NULL, &mean2, NULL));
    CHECK(same_values(&mean2, &mean));
    free(x);
    free(rm);
    free(rv);
    gsb__tensor *all[] = {&X, &w, &mean, &var, &mean2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static void test_col_moments(void)
{
    for (int d = 0; d < 2; d++)
        for (int wk = 0; wk < 3; wk++)
            for (int o = 0; o < 2; o++) {
                check_col_moments(dtypes[d], 17, 5, wk, dtypes[o]);
                /* several row blocks and column tiles, threaded */
                check_col_moments(dtypes[d], 2100, 300, wk, dtypes[o]);
            }
}

static void test_col_moments_numerics(void)
{
    /* x_i = 1e9 + (i mod 4): mean 1e9 + 1.5 and variance 1.25 exactly; the
     * naive E[x^2] - E[x]^2 in double would be off by far more than 1 */
    int64_t n = 4000;
    gsb__tensor X = make(GSB_F64, n, 1), mean = make_nan(GSB_F64, 1, 1), var = make_nan(GSB_F64, 1, 1);
    for (int64_t i = 0; i < n; i++)
        gsb__tensor_set(&X, i, 1e9 + (double)(i % 4));
    CHECK_OK(be->ops->col_moments(be, &X, NULL, &mean, &var));
    CHECK_CLOSE(gsb__tensor_get(&mean, 0), 1e9 + 1.5, 1e-15);
    CHECK_CLOSE(gsb__tensor_get(&var, 0), 1.25, 1e-9);
    /* zero total weight: NaN, as numpy gives */
    gsb__tensor w = make_filled(GSB_F32, n, 1, 0.0);
    CHECK_OK(be->ops->col_moments(be, &X, &w, &mean, &var));
    CHECK(isnan(gsb__tensor_get(&mean, 0)) && isnan(gsb__tensor_get(&var, 0)));
    gsb__tensor wbad = make(GSB_F64, n - 1, 1), mbad = make(GSB_F64, 2, 1);
    CHECK_ERR(be->ops->col_moments(be, &X, &wbad, &mean, &var), GSB_EINTERNAL, "w");
    CHECK_ERR(be->ops->col_moments(be, &X, NULL, &mbad, &var), GSB_EINTERNAL, "mean");
    gsb__tensor *all[] = {&X, &mean, &var, &w, &wbad, &mbad};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static void test_col_minmax(void)
{
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 2; o++) {
            int64_t sizes[2][2] = {{3, 4}, {1500, 300}};
            for (int c = 0; c < 2; c++) {
                int64_t n = sizes[c][0], dd = sizes[c][1];
                gsb__tensor X = make_normal(dtypes[d], n, dd, 0, 1);
                gsb__tensor mn = make_nan(dtypes[o], dd, 1), mx = make_nan(dtypes[o], dd, 1);
                CHECK_OK(be->ops->col_minmax(be, &X, &mn, &mx));
                gsb__tensor rmn = make(dtypes[o], dd, 1), rmx = make(dtypes[o], dd, 1);
                for (int64_t j = 0; j < dd; j++) {
                    double a = INFINITY, z = -INFINITY;
                    for (int64_t i = 0; i < n; i++) {
                        a = fmin(a, gsb__tensor_get(&X, i * dd + j));
                        z = fmax(z, gsb__tensor_get(&X, i * dd + j));
                    }
                    gsb__tensor_set(&rmn, j, a);
                    gsb__tensor_set(&rmx, j, z);
                }
                CHECK(same_values(&mn, &rmn) && same_values(&mx, &rmx));
                gsb__tensor *all[] = {&X, &mn, &mx, &rmn, &rmx};
                for (size_t i = 0; i < 5; i++)
                    gsb__tensor_free(all[i]);
            }
        }
    gsb__tensor E = make(GSB_F64, 0, 2), mn = make(GSB_F64, 2, 1), mx = make(GSB_F64, 2, 1);
    CHECK_OK(be->ops->col_minmax(be, &E, &mn, &mx));
    CHECK(isnan(gsb__tensor_get(&mn, 1)) && isnan(gsb__tensor_get(&mx, 0)));
    gsb__tensor Xi = make(GSB_I64, 3, 2);
    CHECK_ERR(be->ops->col_minmax(be, &Xi, &mn, &mx), GSB_EINTERNAL, "int64");
    gsb__tensor *all[] = {&E, &mn, &mx, &Xi};
    for (size_t i = 0; i < 4; i++)
        gsb__tensor_free(all[i]);
}

static void test_row_sqnorms(void)
{
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 2; o++) {
            int64_t n = 900, dd = 77;
            gsb__tensor X = make_normal(dtypes[d], n, dd, 0.5, 2.0);
            gsb__tensor out = make_nan(dtypes[o], n, 1);
            CHECK_OK(be->ops->row_sqnorms(be, &X, &out));
            double *x = dbl(&X), *ref = malloc(sizeof(double) * (size_t)n);
            for (int64_t i = 0; i < n; i++) {
                ref[i] = 0;
                for (int64_t j = 0; j < dd; j++)
                    ref[i] += x[i * dd + j] * x[i * dd + j];
            }
            CHECK(relerr_t(&out, ref) < (dtypes[o] == GSB_F32 ? 1e-6 : 1e-13));
            free(x);
            free(ref);
            gsb__tensor_free(&X);
            gsb__tensor_free(&out);
        }
    gsb__tensor X = make(GSB_F32, 4, 3), out = make(GSB_F32, 3, 1);
    CHECK_ERR(be->ops->row_sqnorms(be, &X, &out), GSB_EINTERNAL, "out");
    gsb__tensor_free(&X);
    gsb__tensor_free(&out);
}

static void test_col_affine(void)
{
    int64_t n = 700, d = 60;
    for (int dx = 0; dx < 2; dx++)
        for (int mask = 0; mask < 8; mask++)
            for (int inplace = 0; inplace < 2; inplace++) {
                gsb_dtype dt = dtypes[dx];
                gsb__tensor X = make_normal(dt, n, d, 0, 1);
                /* the parameter vectors take turns at being float32 */
                gsb__tensor sub = make_normal(mask & 1 ? GSB_F32 : GSB_F64, d, 1, 0, 1);
                gsb__tensor mul = make_normal(mask & 2 ? GSB_F64 : GSB_F32, d, 1, 1, 0.5);
                gsb__tensor add = make_normal(mask & 4 ? GSB_F32 : GSB_F64, 1, d, 0, 1);
                double *x = dbl(&X), *ref = malloc(sizeof(double) * (size_t)(n * d));
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < d; j++) {
                        double v = x[i * d + j];
                        if (mask & 1)
                            v -= gsb__tensor_get(&sub, j);
                        if (mask & 2)
                            v *= gsb__tensor_get(&mul, j);
                        if (mask & 4)
                            v += gsb__tensor_get(&add, j);
                        ref[i * d + j] = v;
                    }
                gsb__tensor out = inplace ? X : make_nan(dt, n, d);
                CHECK_OK(be->ops->col_affine(be, &X, mask & 1 ? &sub : NULL,
                                             mask & 2 ? &mul : NULL, mask & 4 ? &add : NULL,
                                             &out));
                CHECK(relerr_t(&out, ref) < (dt == GSB_F32 ? 1e-6 : 1e-14));
                free(x);
                free(ref);
                if (!inplace)
                    gsb__tensor_free(&out);
                gsb__tensor *all[] = {&X, &sub, &mul, &add};
                for (size_t i = 0; i < 4; i++)
                    gsb__tensor_free(all[i]);
            }
    /* all vectors skipped: every bit kept, the sign of zero included */
    double x[3] = {-0.0, 1.0 / 3.0, -7.5}, o[3];
    gsb__tensor X = gsb__tensor_host_view(x, GSB_F64, 1, 3);
    gsb__tensor O = gsb__tensor_host_view(o, GSB_F64, 1, 3);
    CHECK_OK(be->ops->col_affine(be, &X, NULL, NULL, NULL, &O));
    CHECK(memcmp(x, o, sizeof x) == 0);
    gsb__tensor bad = make(GSB_F64, 2, 1), Of = make(GSB_F32, 1, 3);
    CHECK_ERR(be->ops->col_affine(be, &X, &bad, NULL, NULL, &O), GSB_EINTERNAL, "sub");
    CHECK_ERR(be->ops->col_affine(be, &X, NULL, NULL, NULL, &Of), GSB_EINTERNAL, "dtype");
    gsb__tensor_free(&bad);
    gsb__tensor_free(&Of);
}

static void test_clip(void)
{
    for (int d = 0; d < 2; d++) {
        int64_t n = 50000; /* over the threading threshold */
        gsb__tensor X = make_normal(dtypes[d], n, 1, 0, 1);
        double *x = dbl(&X);
        CHECK_OK(be->ops->clip(be, &X, -0.5, 0.7));
        double lo = dtypes[d] == GSB_F32 ? (double)(float)-0.5 : -0.5;
        double hi = dtypes[d] == GSB_F32 ? (double)(float)0.7 : 0.7;
        int bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad += gsb__tensor_get(&X, i) != fmin(fmax(x[i], lo), hi);
        CHECK(bad == 0);
        /* lo > hi: min(max(x, lo), hi) is hi everywhere, as numpy gives */
        CHECK_OK(be->ops->clip(be, &X, 1.0, -1.0));
        bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad += gsb__tensor_get(&X, i) != -1.0;
        CHECK(bad == 0);
        free(x);
        gsb__tensor_free(&X);
    }
    gsb__tensor Xi = make(GSB_I32, 2, 2);
    CHECK_ERR(be->ops->clip(be, &Xi, 0, 1), GSB_EINTERNAL, "int32");
    gsb__tensor_free(&Xi);
}

/* ---- rand_normal ----------------------------------------------------------- */

/* An independent transcription of the formula documented in cpu_random.c
 * (the contract the CUDA backend copies). */
static uint64_t spec_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double spec_normal(uint64_t seed, uint64_t i)
{
    uint64_t key = spec_mix(seed), p = i / 2;
    uint64_t h1 = spec_mix(key + (2 * p + 1) * 0x9E3779B97F4A7C15ull);
    uint64_t h2 = spec_mix(key + (2 * p + 2) * 0x9E3779B97F4A7C15ull);
    double u1 = ldexp((double)((h1 >> 11) + 1), -53), u2 = ldexp((double)(h2 >> 11), -53);
    double r = sqrt(-2.0 * log(u1)), th = 2.0 * 3.141592653589793 * u2;
    return i % 2 ? r * sin(th) : r * cos(th);
}

static void test_rand_normal(void)
{
    int64_t n = 200001; /* odd, and over the threading threshold */
    uint64_t seed = 0x1234abcdull + (uint64_t)(testing_uniform() * 1e6);
    gsb__tensor a = make_nan(GSB_F64, n, 1), b = make_nan(GSB_F64, n, 1);
    CHECK_OK(be->ops->rand_normal(be, &a, seed));
    CHECK_OK(be->ops->rand_normal(be, &b, seed));
    CHECK(same_values(&a, &b));
    CHECK_OK(be->ops->rand_normal(be, &b, seed + 1));
    CHECK(!same_values(&a, &b));

    /* moments and shape of N(0, 1); bounds are > 4 standard errors */
    const double *x = a.data;
    double s = 0, s2 = 0, lag = 0;
    int64_t inside = 0;
    for (int64_t i = 0; i < n; i++) {
        CHECK(isfinite(x[i]));
        s += x[i];
        s2 += x[i] * x[i];
        inside += fabs(x[i]) < 1.0;
        if (i + 1 < n)
            lag += x[i] * x[i + 1];
    }
    double mean = s / (double)n, var = s2 / (double)n - mean * mean;
    CHECK(fabs(mean) < 0.01);
    CHECK(fabs(var - 1.0) < 0.015);
    CHECK(fabs((double)inside / (double)n - 0.682689) < 0.005);
    CHECK(fabs(lag / (double)(n - 1)) < 0.01);

    /* element i depends on (seed, i) only: not on length, dtype, threads */
    int64_t lens[3] = {1, 2, 37};
    for (int l = 0; l < 3; l++) {
        gsb__tensor c = make_nan(GSB_F64, 1, lens[l]);
        CHECK_OK(be->ops->rand_normal(be, &c, seed));
        CHECK(memcmp(c.data, a.data, (size_t)lens[l] * sizeof(double)) == 0);
        gsb__tensor_free(&c);
    }
    gsb__tensor f = make_nan(GSB_F32, 101, 3);
    CHECK_OK(be->ops->rand_normal(be, &f, seed));
    int bad = 0;
    for (int64_t i = 0; i < 303; i++)
        bad += ((float *)f.data)[i] != (float)x[i];
    CHECK(bad == 0);

    /* the documented formula */
    uint64_t probes[5] = {0, 1, 2, 77777, (uint64_t)n - 1};
    for (int p = 0; p < 5; p++)
        CHECK(x[probes[p]] == spec_normal(seed, probes[p]));
    CHECK(spec_normal(0, 5) != spec_normal(1, 5));

    gsb__tensor ti = make(GSB_I32, 4, 1);
    CHECK_ERR(be->ops->rand_normal(be, &ti, 1), GSB_EINTERNAL, "float");
    gsb__tensor_free(&ti);
    gsb__tensor_free(&a);
    gsb__tensor_free(&b);
    gsb__tensor_free(&f);
}

int main(void)
{
    be = gsb__cpu_backend();
    /* reproducible by default; GSB_TEST_SEED draws other data */
    uint64_t seed = 20240611;
    const char *env = getenv("GSB_TEST_SEED");
    if (env)
        seed = strtoull(env, NULL, 0);
    printf("seed %llu (set GSB_TEST_SEED to repeat)\n", (unsigned long long)seed);
    testing_seed(seed);
    RUN(test_gemm);
    RUN(test_gemm_empty_inner);
    RUN(test_gemm_errors);
    RUN(test_syrk);
    RUN(test_eigh);
    RUN(test_posv);
    RUN(test_svd);
    RUN(test_lstsq);
    RUN(test_lstsq_edges);
    RUN(test_orthonormalize);
    RUN(test_col_moments);
    RUN(test_col_moments_numerics);
    RUN(test_col_minmax);
    RUN(test_row_sqnorms);
    RUN(test_col_affine);
    RUN(test_clip);
    RUN(test_rand_normal);
    return testing_done();
}
