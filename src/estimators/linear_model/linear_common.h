/*
 * linear_common.h - what the least-squares linear models share
 * (LinearRegression, Ridge in linear.c; Lasso, ElasticNet and their CV
 * variants in enet.c): scikit-learn's data preparation, the fitted
 * coef_/intercept_ and prediction.
 *
 * Preparation, as scikit-learn's _preprocess_data does it for dense X:
 *   1. when fit_intercept, centre X and y on their (weighted) column means,
 *   2. with sample_weight, scale each row of X and y by sqrt(w) (its
 *      _rescale_data), so the weighted problem becomes an ordinary one.
 * The model is then solved on the prepared data, and
 * intercept_ = y_mean - x_mean @ coef_.
 */
#ifndef GSB_LINEAR_COMMON_H
#define GSB_LINEAR_COMMON_H

#include "core/estimator.h"

typedef struct gsb__lin_data {
    gsb__tensor X, Y;   /* on the backend: centred and sqrt(w)-scaled (n x p, n x k) */
    double *x_off;      /* p weighted column means of X (zeros without intercept) */
    double *y_off;      /* k weighted column means of y */
    int64_t n, p, k;
    int y_1d;           /* y was 1-D: coef_ is (p,), intercept_ a scalar */
    gsb_dtype dtype;    /* X's dtype */
} gsb__lin_data;

/*
 * Prepare X (n x p) and Y (n x k, 1-D or 2-D) on be, with sample weights w
 * (n, float64, may be NULL; all zeros is scikit-learn's error).  The weights
 * are cast to X's dtype as scikit-learn casts them; with weights_to_n they
 * are first rescaled to sum to n, as ElasticNet.fit does.  X and Y may live
 * on any backend; d->X and d->Y are owned copies on be.
 */
int gsb__lin_prepare(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y,
                     const gsb__tensor *w, int fit_intercept, int weights_to_n,
                     gsb__lin_data *d);
void gsb__lin_free(gsb__lin_data *d);

/*
 * Store coef_ (host k x p doubles, row t = target t) in coef_dtype and the
 * intercept y_off - x_off @ coef_.  coef_ is (p,) when coef_1d, else (k, p);
 * intercept_ is a scalar for 1-D y, else (k,).  Without fit_intercept,
 * intercept_ is the float 0.0, as in scikit-learn.
 */
int gsb__lin_store(gsb__ctx *c, const gsb__lin_data *d, const double *coef,
                   gsb_dtype coef_dtype, int fit_intercept, int coef_1d);

/* predict: X @ coef_.T + intercept_ as result "y" (any coef_ layout above); an
 * X larger than the backend's memory in batches (GSB__IN_STREAM). */
int gsb__lin_predict(gsb__ctx *c);
/* numpy's promotion: float32 X with float64 coef_ predicts in float64 */
static inline gsb_dtype gsb__lin_predict_dtype(gsb_dtype x, gsb_dtype coef)
{
    return x == GSB_F64 || coef == GSB_F64 ? GSB_F64 : GSB_F32;
}

/* min 0.5 x^T G x - b^T x subject to x >= 0 for symmetric positive
 * semi-definite G (p x p, host): Lawson-Hanson (linear.c). */
int gsb__lin_nnls(gsb__ctx *c, const double *G, const double *b, int64_t p, double *x);
/* Ridge's alpha, one per target (k), from a number or a list (linear.c). */
int gsb__lin_ridge_alphas(gsb__ctx *c, int64_t k, double **out, int *one_alpha);

/*
 * The fit of LinearRegression (ridge == 0) or Ridge (ridge == 1) streamed
 * when X does not fit the backend (estimators/common/stream.h), else
 * *streamed = 0 and nothing is done (linear_stream.c).
 */
int gsb__lin_fit_streamed(gsb__ctx *c, int ridge, int *streamed);

/* ---- host <-> backend helpers ------------------------------------------------ */

/* Allocate rows x cols of dtype on be and fill it from host doubles. */
int gsb__lin_upload_f64(const gsb__backend *be, gsb_dtype dtype, int64_t rows, int64_t cols,
                        const double *src, gsb__tensor *out);
/* A malloc'ed array of doubles holding t (any backend, any dtype). */
int gsb__lin_download_f64(const gsb__tensor *t, double **out);
/* A host tensor of dtype with the given user-facing shape, filled from doubles. */
int gsb__lin_host_tensor(gsb_dtype dtype, int64_t rows, int64_t cols, int ndim,
                         const double *src, gsb__tensor *out);
/* v rounded to dtype (float32 or float64), as numpy stores it. */
static inline double gsb__lin_round(gsb_dtype dtype, double v)
{
    return dtype == GSB_F32 ? (double)(float)v : v;
}

/* ---- the float64 normal equations (linear_gram.c) ------------------------------- */

/* Eigenvalues (ascending, p) and eigenvectors (columns of V, p x p) of the
 * host p x p C, as host float64 tensors (LAPACK). */
int gsb__lin_eigen(const double *C, int64_t p, gsb__tensor *w, gsb__tensor *V);
/* coef (k x p, malloc'ed) = for each target t: V diag(f_t(l)) V^T Cxy[:, t],
 * f_t(l) = 1 / (l + shift[t]) (shift may be NULL: 0) where l > cut2 and
 * l + shift[t] > 0, else 0. */
int gsb__lin_spectral_solve(const double *w, const double *V, const double *Cxy,
                            int64_t p, int64_t k, const double *shift, double cut2,
                            double **coef);
/* LinearRegression's singular_ = sqrt(w) descending (X's dtype, the first
 * min(n, p)) and rank_. */
int gsb__lin_store_spectrum(gsb__ctx *c, const double *w, int64_t p, int64_t n, gsb_dtype dt,
                            int64_t rank);
/* float32 LinearRegression's least squares through the float64 normal
 * equations when X is well conditioned: coef (k x p), singular_ and rank_
 * stored, *done = 1; else *done = 0, nothing stored (the caller's SVD). */
int gsb__lin_lstsq_gram(gsb__ctx *c, const gsb__lin_data *d, double tol, double **coef,
                        int *done);

#endif
