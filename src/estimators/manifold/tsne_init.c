/*
 * tsne_init.c - TSNE's initial embedding (see tsne.h): an explicit array,
 * 'random' or 'pca', as scikit-learn 1.9's TSNE._fit.
 *
 * 'pca' is scikit-learn's PCA(n_components).fit_transform(X) rescaled so
 * that the first column has standard deviation 1e-4.  Here the projection is
 * computed on the backend: X centred, its top principal axes from the
 * covariance's eigendecomposition (syrk + eigh, up to 1000 features) or the
 * randomized SVD (more features), signs as svd_flip (the largest |entry| of
 * each axis positive), X_centred @ axes^T.  scikit-learn's 'auto' solver may
 * take another route to the same axes; only the error for too many
 * components names the solver it would have chosen.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimators/manifold/tsne.h"
#include "solvers/randomized_svd.h"

#define COV_MAX_FEATURES 1000

/* scikit-learn's PCA svd_solver='auto' choice, for its error message */
static const char *auto_solver(int64_t n, int64_t d, int64_t k)
{
    if (d <= 1000 && n >= 10 * d)
        return "covariance_eigh";
    int64_t mx = n > d ? n : d, mn = n < d ? n : d;
    if (mx <= 500)
        return "full";
    if (k >= 1 && (double)k < 0.8 * (double)mn)
        return "randomized";
    return "full";
}

/* svd_flip(u_based_decision=False) on the k x d host axes V */
static void flip_axes(double *V, int64_t k, int64_t d)
{
    for (int64_t i = 0; i < k; i++) {
        double *row = V + i * d, best = 0.0;
        for (int64_t j = 0; j < d; j++)
            if (fabs(row[j]) > fabs(best))
                best = row[j];
        if (best < 0.0)
            for (int64_t j = 0; j < d; j++)
                row[j] = -row[j];
    }
}

/* The top k principal axes of the centred Xc (n x d on the backend): host k x d. */
static int pca_axes(gsb__ctx *c, const gsb__tensor *Xc, int64_t k, uint64_t seed, double **V)
{
    const gsb__backend *be = c->be;
    int64_t n = Xc->rows, d = Xc->cols;
    gsb__tensor C = GSB__TENSOR_NONE, w = GSB__TENSOR_NONE, E = GSB__TENSOR_NONE;
    gsb__rsvd rs = {0};
    double *eh = NULL;
    int rc;
    *V = NULL;
    if (d <= COV_MAX_FEATURES) {
        GSB_CHECK(gsb__tensor_alloc(be, Xc->dtype, d, d, &C));
        GSB_CHECK(be->ops->syrk(be, 1.0, Xc, 0.0, &C));
        GSB_CHECK(gsb__tensor_alloc(be, Xc->dtype, d, 1, &w));
        GSB_CHECK(gsb__tensor_alloc(be, Xc->dtype, d, d, &E));
        GSB_CHECK(be->ops->eigh(be, &C, &w, &E));
        GSB_CHECK(gsb__tensor_to_f64(&E, &eh));
        *V = malloc((size_t)(k * d) * sizeof **V);
        if (!*V) {
            rc = gsb__err(GSB_ENOMEM, "TSNE: out of host memory");
            goto done;
        }
        for (int64_t j = 0; j < k; j++) /* eigenvalues ascend: the last columns first */
            for (int64_t i = 0; i < d; i++)
                (*V)[j * d + i] = eh[i * d + (d - 1 - j)];
    } else {
        int64_t mn = n < d ? n : d;
        int64_t n_iter = (double)k < 0.1 * (double)mn ? 7 : 4; /* iterated_power='auto' */
        gsb__rsvd_opts o = {k, 10, n_iter, n_iter > 2, seed};
        GSB_CHECK(gsb__rsvd_compute(c, Xc, &o, &rs));
        GSB_CHECK(gsb__rsvd_right(be, &rs, &E));
        GSB_CHECK(gsb__tensor_to_f64(&E, V));
    }
    flip_axes(*V, k, d);
done:
    free(eh);
    gsb__rsvd_free(&rs);
    gsb__tensor_free(&C);
    gsb__tensor_free(&w);
    gsb__tensor_free(&E);
    if (rc != GSB_OK) {
        free(*V);
        *V = NULL;
    }
    return rc;
}

/* Y (host float32, n x k) = the PCA projection of X, first column scaled to std 1e-4 */
static int init_pca(gsb__ctx *c, const gsb__tensor *X, int64_t k, uint64_t seed, gsb__tensor *Y)
{
    const gsb__backend *be = c->be;
    int64_t n = X->rows, d = X->cols, mn = n < d ? n : d;
    const char *solver = auto_solver(n, d, k);
    if (k > mn)
        return gsb__err(GSB_EINVAL,
                        "n_components=%lld must be between %s and min(n_samples, n_features)=%lld "
                        "with svd_solver='%s'",
                        (long long)k, strcmp(solver, "randomized") == 0 ? "1" : "0",
                        (long long)mn, solver);
    gsb__tensor Xb = GSB__TENSOR_NONE, Xc = GSB__TENSOR_NONE, mean = GSB__TENSOR_NONE,
                Vb = GSB__TENSOR_NONE, T = GSB__TENSOR_NONE;
    double *V = NULL, *t = NULL;
    int rc;
    GSB_CHECK(gsb__tensor_to(be, X, &Xb));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, d, 1, &mean));
    GSB_CHECK(be->ops->col_moments(be, &Xb, NULL, &mean, NULL));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, n, d, &Xc));
    GSB_CHECK(be->ops->col_affine(be, &Xb, &mean, NULL, NULL, &Xc));
    GSB_CHECK(pca_axes(c, &Xc, k, seed, &V));
    GSB_CHECK(gsb__tensor_from_f64(be, X->dtype, V, k, d, &Vb));
    GSB_CHECK(gsb__tensor_alloc(be, X->dtype, n, k, &T));
    GSB_CHECK(be->ops->gemm(be, 0, 1, 1.0, &Xc, &Vb, 0.0, &T));
    GSB_CHECK(gsb__tensor_to_f64(&T, &t));
    /* scikit-learn: .astype(float32), then / std(column 0) * 1e-4 */
    double s = 0.0, s2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double v = (float)t[i * k];
        s += v;
        s2 += v * v;
    }
    double mu = s / (double)n, var = s2 / (double)n - mu * mu;
    double sd = var > 0.0 ? sqrt(var) : 0.0;
    double scale = sd > 0.0 ? 1e-4 / sd : 1.0; /* constant data: left unscaled, not NaN */
    GSB_CHECK(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F32, n, k, Y));
    float *y = Y->data;
    for (int64_t e = 0; e < n * k; e++)
        y[e] = (float)((double)(float)t[e] * scale);
done:
    free(V);
    free(t);
    gsb__tensor_free(&Xb);
    gsb__tensor_free(&Xc);
    gsb__tensor_free(&mean);
    gsb__tensor_free(&Vb);
    gsb__tensor_free(&T);
    return rc;
}

int gsb__tsne_init(gsb__ctx *c, const gsb__tensor *X, int64_t k, uint64_t seed, gsb__tensor *Y)
{
    const gsb__tensor *given = gsb__in(c, "init");
    int64_t n = X->rows;
    *Y = GSB__TENSOR_NONE;
    if (given) {
        if (given->rows != n || given->cols != k)
            return gsb__err(GSB_EINVAL,
                            "init.shape=(%lld, %lld) but should be (n_samples, n_components)="
                            "(%lld, %lld)",
                            (long long)given->rows, (long long)given->cols, (long long)n,
                            (long long)k);
        GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F32, n, k, Y));
        for (int64_t e = 0; e < n * k; e++)
            ((float *)Y->data)[e] = (float)gsb__tensor_get(given, e);
        return GSB_OK;
    }
    if (gsb__param_is(c->params, "init", "pca"))
        return init_pca(c, X, k, seed, Y);
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F32, n, k, Y));
    int rc = gsb__cpu_backend()->ops->rand_normal(gsb__cpu_backend(), Y, seed);
    if (rc != GSB_OK) {
        gsb__tensor_free(Y);
        return rc;
    }
    for (int64_t e = 0; e < n * k; e++)
        ((float *)Y->data)[e] *= 1e-4f;
    return GSB_OK;
}
