/*
 * linear_gram.c - least squares through the float64 normal equations: the
 * eigendecomposition C = V diag(l) V^T of C = Xc^T W Xc (p x p, host LAPACK)
 * and coef_t = V diag(f_t(l)) V^T Xc^T W yc_t.
 *
 * Two routes use it:
 *  - the streamed (out-of-core) LinearRegression and Ridge (linear_stream.c),
 *    whose batches only ever give the cross-products;
 *  - float32 LinearRegression in memory (gsb__lin_lstsq_gram).  Its SVD of
 *    the float32 X (the lstsq op: cuSOLVER's gesvd on the GPU, ~60 ms for
 *    1M x 256, most of the fit) has a relative error of about
 *    cond(Xc) eps32, scikit-learn's float32 gelsd the same.  The normal
 *    equations formed in float64 (each product of two floats is exact in a
 *    double; one DSYRK pass over X in row chunks on the backend, a few ms)
 *    have about cond(Xc)^2 eps64, smaller while cond(Xc) < eps32 / eps64
 *    (~5e8).  The route is taken only where the spectrum shows
 *    cond(Xc) < 1e4 (errors of 1e-8 at worst) and no singular value near the
 *    rank cut, so rank_ is p as the SVD would say; anywhere else (rank-
 *    deficient or ill-conditioned X, wide X, p above GRAM_MAX_P) the SVD
 *    runs as before.  float64 keeps the SVD: there the normal equations
 *    would be the less accurate of the two.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/profile.h"
#include "estimators/common/stream.h"
#include "estimators/linear_model/linear_common.h"

/* the host eigendecomposition of p x p stays a few ms */
#define GRAM_MAX_P 512
/* l_min / l_max at least this: cond(Xc) < 1e4 */
#define GRAM_MIN_RATIO 1e-8
/* float64 rows of X and y converted per chunk */
#define GRAM_CHUNK_BYTES ((int64_t)128 << 20)

int gsb__lin_eigen(const double *C, int64_t p, gsb__tensor *w, gsb__tensor *V)
{
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor A = gsb__tensor_host_view((void *)C, GSB_F64, p, p);
    *w = *V = GSB__TENSOR_NONE;
    int rc = gsb__tensor_alloc(cpu, GSB_F64, p, 1, w);
    if (rc == GSB_OK)
        rc = gsb__tensor_alloc(cpu, GSB_F64, p, p, V);
    if (rc == GSB_OK)
        rc = cpu->ops->eigh(cpu, &A, w, V);
    if (rc != GSB_OK) {
        gsb__tensor_free(w);
        gsb__tensor_free(V);
    }
    return rc;
}

int gsb__lin_spectral_solve(const double *w, const double *V, const double *Cxy, int64_t p,
                            int64_t k, const double *shift, double cut2, double **coef)
{
    double *proj = malloc((size_t)(p > 0 ? p : 1) * sizeof *proj);
    double *out = calloc((size_t)(k * p > 0 ? k * p : 1), sizeof *out);
    if (!proj || !out) {
        free(proj);
        free(out);
        return gsb__err(GSB_ENOMEM, "out of host memory");
    }
    for (int64_t t = 0; t < k; t++) {
        for (int64_t j = 0; j < p; j++) { /* proj_j = f(l_j) v_j . b */
            double dot = 0;
            for (int64_t i = 0; i < p; i++)
                dot += V[i * p + j] * Cxy[i * k + t];
            double den = w[j] + (shift ? shift[t] : 0.0);
            proj[j] = w[j] > cut2 && den > 0 ? dot / den : 0.0;
        }
        for (int64_t i = 0; i < p; i++) {
            double acc = 0;
            for (int64_t j = 0; j < p; j++)
                acc += V[i * p + j] * proj[j];
            out[t * p + i] = acc;
        }
    }
    free(proj);
    *coef = out;
    return GSB_OK;
}

int gsb__lin_store_spectrum(gsb__ctx *c, const double *w, int64_t p, int64_t n, gsb_dtype dt,
                            int64_t rank)
{
    int64_t r = n < p ? n : p;
    gsb__tensor S;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, r, 1, &S));
    for (int64_t j = 0; j < r; j++) /* descending: w ascends */
        gsb__tensor_set(&S, j, sqrt(fmax(w[p - 1 - j], 0.0)));
    S.ndim = 1;
    GSB_TRY(gsb__fit_set(c, "singular_", &S));
    return gsb__fit_set_scalar(c, "rank_", (double)rank, GSB_I64);
}

int gsb__lin_lstsq_gram(gsb__ctx *c, const gsb__lin_data *d, double tol, double **coef,
                        int *done)
{
    int64_t n = d->n, p = d->p, k = d->k;
    *coef = NULL;
    *done = 0;
    if (d->dtype != GSB_F32 || p < 1 || k < 1 || n < p || p > GRAM_MAX_P)
        return GSB_OK;
    gsb__gram g;
    gsb__tensor w = GSB__TENSOR_NONE, V = GSB__TENSOR_NONE;
    double *mx = NULL, *my = NULL, *Cxx = NULL, *Cxy = NULL;
    int rc;
    /* d's X and y are centred and weighted already: uncentred sums */
    GSB_TRY(gsb__gram_init(c, &g, p, k, 0));
    int64_t rows = GRAM_CHUNK_BYTES / (int64_t)(sizeof(double) * (size_t)(p + k));
    if (rows < 1)
        rows = 1;
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
        int64_t m = n - r0 < rows ? n - r0 : rows;
        gsb__tensor Xb = gsb__tensor_rows(&d->X, r0, m), Yb = gsb__tensor_rows(&d->Y, r0, m);
        GSB_CHECK(gsb__gram_add(c, &g, &Xb, &Yb, NULL, (double)m));
    }
    GSB_CHECK(gsb__gram_finish(&g, &mx, &my, &Cxx, &Cxy));
    gsb__profile_mark("normal equations: X^T X, X^T y in float64");
    GSB_CHECK(gsb__lin_eigen(Cxx, p, &w, &V));
    gsb__profile_mark("normal equations: eigendecomposition (host)");
    const double *l = w.data;
    double top = l[p - 1], least = fmax(GRAM_MIN_RATIO, 4.0 * tol * tol) * top;
    if (!(top > 0) || !(l[0] > least))
        goto done; /* ill-conditioned or rank-deficient: the SVD decides */
    GSB_CHECK(gsb__lin_spectral_solve(l, V.data, Cxy, p, k, NULL, 0.0, coef));
    GSB_CHECK(gsb__lin_store_spectrum(c, l, p, n, d->dtype, p));
    *done = 1;
done:
    if (rc != GSB_OK) {
        free(*coef);
        *coef = NULL;
    }
    free(mx);
    free(my);
    free(Cxx);
    free(Cxy);
    gsb__tensor_free(&w);
    gsb__tensor_free(&V);
    gsb__gram_free(&g);
    return rc;
}
