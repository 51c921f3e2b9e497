/*
 * test_decomposition.c - PCA and TruncatedSVD through the public API:
 * scikit-learn 1.9.1 known answers on a small fixed dataset (every solver),
 * solvers agreeing with 'full' on fresh random data with a spectrum gap,
 * whitening, reconstruction, automatic component counts, the probabilistic
 * model (score, covariance, precision), randomized reproducibility, dtypes
 * and errors.
 */
#include "test_api_helpers.h"

static gsb_session *sess;

/*
 * Known answers.  Produced by (scikit-learn 1.9.1, numpy 1.x/2.x):
 *   import numpy as np; from sklearn.decomposition import PCA, TruncatedSVD
 *   rng = np.random.RandomState(7)
 *   X = np.round(rng.randn(12, 2) @ rng.randn(2, 5) * 2 + 0.1 * rng.randn(12, 5)
 *                + np.arange(5), 3)
 *   p = PCA(n_components=3, svd_solver="full").fit(X)
 *   p.components_, p.explained_variance_, p.explained_variance_ratio_,
 *   p.singular_values_, p.mean_, p.noise_variance_, p.transform(X[:3]),
 *   p.score_samples(X[:3]), p.score(X), np.diag(p.get_covariance())
 *   PCA(0.9).fit(X).n_components_, PCA(0.9995).fit(X).n_components_
 *   q = PCA("mle").fit(X); q.n_components_, q.noise_variance_
 *   w = PCA(n_components=2, whiten=True).fit(X); w.transform(X[:2]), w.score_samples(X[:2])
 *   t = TruncatedSVD(n_components=2, algorithm="arpack").fit(X)
 *   t.components_, t.explained_variance_, t.explained_variance_ratio_,
 *   t.singular_values_, t.transform(X[:2])
 * (svd_solver "covariance_eigh", "arpack" and "randomized" give the same
 * values on this data; so does TruncatedSVD's "randomized".)
 */
static const double XA[60] = {
    0.028,  -3.279, -0.49,  -3.052, 7.226, -0.375, 0.384,  2.83,   1.561,  4.43,
    -0.101, 3.106,  2.682,  6.829,  2.373, 1.409,  3.8,    -1.739, 8.809,  2.144,
    -0.606, -2.875, 2.32,   -3.59,  6.769, 0.319,  3.032,  1.948,  6.419,  2.674,
    0.133,  -0.167, 0.911,  1.445,  4.751, 1.115,  4.012,  -0.949, 8.921,  2.078,
    -0.003, -0.814, 1.849,  0.126,  5.277, 1.069,  2.536,  -1.407, 6.826,  2.849,
    -0.298, -4.078, 0.963,  -4.935, 7.783, -1.588, -0.835, 6.734,  -1.93,  5.353};
static const double KA_COMPONENTS[15] = {
    0.100246477,   0.4513891583, -0.1668240249, 0.8090900163,  -0.3220893694,
    -0.2339771662, 0.2187171177, 0.9304995478,  0.0290225316,  -0.1753447815,
    0.5857229254,  0.5924891858, -0.0205112691, -0.5005963072, -0.2342388618};
static const double KA_EV[3] = {39.39043463, 5.099217421, 0.01546262346};
static const double KA_RATIO[3] = {0.8848242551, 0.1145433225, 0.0003473357025};
static const double KA_SV[3] = {20.81573397, 7.489418645, 0.4124183047};
static const double KA_MEAN[5] = {0.09183333333, 0.4018333333, 1.304333333, 2.28575,
                                  4.475583333};
static const double KA_NOISE = 0.006345716667269236;
static const double KA_T[9] = {-6.573149623, -3.096938298, -0.1536350684,
                               -0.8810721065, 1.511918748, 0.05819015941,
                               5.324590711,  2.419017978, -0.3208425351};
static const double KA_LL[3] = {-2.958715386, -1.04983059, -4.662353845};
static const double KA_SCORE = -2.3930243659065904;
static const double KA_COV_DIAG[5] = {0.6840690641, 8.27776842, 5.511976896, 25.79479451,
                                      4.249197216};
static const double KA_MLE_NOISE = 0.009384685596794866;
static const double KA_WHITE_T[4] = {-1.047316949, -1.371452554, -0.1403835, 0.669540246};
static const double KA_WHITE_LL[2] = {-4.758869296, -3.527185933};
static const double KT_COMPONENTS[10] = {0.09951359244, 0.4517107829,  -0.1074297911,
                                         0.8692055151,  -0.1378224437, -0.01543823616,
                                         -0.04294879747, 0.3117279563, 0.209393643,
                                         0.9256873366};
static const double KT_EV[2] = {34.6424583, 1.552615952};
static const double KT_RATIO[2] = {0.8489136371, 0.03804686271};
static const double KT_SV[2] = {20.97433138, 17.88229576};
static const double KT_T[4] = {-5.074452889, 6.037597434, 0.5783894181, 5.299145495};

/* ---- helpers --------------------------------------------------------------- */

/* An array's values as doubles, with its shape and dtype. */
typedef struct vals {
    double *v;
    int64_t n, rows, cols;
    int ndim;
    gsb_dtype dt;
} vals;

static vals vals_of(const gsb_array *a)
{
    vals r = {0};
    r.n = -1;
    if (!a)
        return r;
    r.ndim = a->ndim;
    r.dt = a->dtype;
    r.rows = a->ndim >= 1 ? a->shape[0] : 1;
    r.cols = a->ndim == 2 ? a->shape[1] : 1;
    r.n = r.rows * r.cols;
    r.v = malloc((size_t)(r.n > 0 ? r.n : 1) * sizeof *r.v);
    for (int64_t i = 0; i < r.n; i++)
        r.v[i] = testing_at(a, i);
    return r;
}

static void vals_free(vals *v)
{
    free(v->v);
    v->v = NULL;
}

static vals get_attr(gsb_model *m, const char *name)
{
    gsb_result *r = NULL;
    vals out = {0};
    out.n = -1;
    CHECK_OK(gsb_model_get_attr(m, name, &r));
    if (r)
        out = vals_of(gsb_result_array(r, 0));
    gsb_result_free(r);
    return out;
}

static double get_scalar(gsb_model *m, const char *name)
{
    vals v = get_attr(m, name);
    double x = v.n == 1 ? v.v[0] : NAN;
    vals_free(&v);
    return x;
}

/* The first result of method(X). */
static vals call_x(gsb_model *m, const char *method, const gsb_array *X)
{
    gsb_result *r = NULL;
    const gsb_array *in[1] = {X};
    vals out = {0};
    out.n = -1;
    CHECK_OK(gsb_model_call(m, method, in, X ? 1 : 0, NULL, &r));
    if (r && gsb_result_count(r) > 0)
        out = vals_of(gsb_result_array(r, 0));
    gsb_result_free(r);
    return out;
}

static gsb_model *make(const char *est, const char *params)
{
    return testing_model(sess, est, params);
}

/* |a_i - b_i| <= tol * max(1, |b_i|) for all i, with n elements in a */
static int close_all(const vals *a, const double *b, int64_t n, double tol)
{
    if (a->n != n)
        return 0;
    for (int64_t i = 0; i < n; i++) {
        double s = fabs(b[i]) > 1 ? fabs(b[i]) : 1;
        if (!(fabs(a->v[i] - b[i]) <= tol * s))
            return 0;
    }
    return 1;
}

/* the same on the first n elements of a (leading rows of a result) */
static int close_first(const vals *a, const double *b, int64_t n, double tol)
{
    vals head = *a;
    if (head.n < n)
        return 0;
    head.n = n;
    return close_all(&head, b, n, tol);
}

#define CHECK_VALS(a, b, n, tol)                                                     \
    do {                                                                             \
        vals va_ = (a);                                                              \
        CHECK(close_all(&va_, (b), (n), (tol)));                                     \
        vals_free(&va_);                                                             \
    } while (0)

/* x as dtype dt in a malloc'd buffer */
static void *as_dtype(const double *x, int64_t n, gsb_dtype dt)
{
    if (dt == GSB_F64) {
        double *p = malloc((size_t)n * sizeof *p);
        memcpy(p, x, (size_t)n * sizeof *p);
        return p;
    }
    float *p = malloc((size_t)n * sizeof *p);
    testing_to_f32(x, p, n);
    return p;
}

/* n x d data of rank `rank` with singular values far above the noise (gap) */
static double *gap_data(int64_t n, int64_t d, int64_t rank, double noise)
{
    double *A = malloc((size_t)(n * rank) * sizeof *A), *B = malloc((size_t)(rank * d) * sizeof *B);
    double *X = malloc((size_t)(n * d) * sizeof *X);
    testing_fill_normal(A, n * rank);
    testing_fill_normal(B, rank * d);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) {
            double s = 3.0 * (double)j / (double)d; /* a shifted mean per column */
            for (int64_t r = 0; r < rank; r++)
                s += A[i * rank + r] * B[r * d + j] * (double)(rank - r) * 2.0;
            X[i * d + j] = s + noise * testing_normal();
        }
    free(A);
    free(B);
    return X;
}

/* ---- PCA known answers, every solver, both dtypes ------------------------------ */

static void pca_known(const char *solver, gsb_dtype dt)
{
    double tol = dt == GSB_F64 ? 1e-7 : 2e-3;
    char params[128];
    snprintf(params, sizeof params,
             "{\"n_components\": 3, \"svd_solver\": \"%s\", \"random_state\": 0}", solver);
    gsb_model *m = make("PCA", params);
    void *x = as_dtype(XA, 60, dt);
    gsb_array X = gsb_array_2d(x, dt, 12, 5), X3 = gsb_array_2d(x, dt, 3, 5);
    CHECK_OK(gsb_model_fit(m, &X, NULL));

    vals comp = get_attr(m, "components_");
    CHECK(comp.ndim == 2 && comp.rows == 3 && comp.cols == 5 && comp.dt == dt);
    CHECK(close_all(&comp, KA_COMPONENTS, 15, tol));
    vals_free(&comp);
    vals ev = get_attr(m, "explained_variance_");
    CHECK(ev.ndim == 1 && ev.dt == dt);
    CHECK(close_all(&ev, KA_EV, 3, tol));
    vals_free(&ev);
    CHECK_VALS(get_attr(m, "explained_variance_ratio_"), KA_RATIO, 3, tol);
    CHECK_VALS(get_attr(m, "singular_values_"), KA_SV, 3, tol);
    CHECK_VALS(get_attr(m, "mean_"), KA_MEAN, 5, tol);
    CHECK_CLOSE(get_scalar(m, "noise_variance_"), KA_NOISE, dt == GSB_F64 ? 1e-6 : 1e-3);
    CHECK(get_scalar(m, "n_components_") == 3);
    CHECK(get_scalar(m, "n_samples_") == 12);
    vals t = call_x(m, "transform", &X3);
    CHECK(t.rows == 3 && t.cols == 3 && t.dt == dt);
    CHECK(close_all(&t, KA_T, 9, tol));
    vals_free(&t);
    CHECK_VALS(call_x(m, "score_samples", &X3), KA_LL, 3, tol);
    vals sc = call_x(m, "score", &X);
    CHECK(sc.n == 1 && sc.ndim == 0);
    CHECK(close_all(&sc, &KA_SCORE, 1, tol));
    vals_free(&sc);
    vals cov = call_x(m, "get_covariance", NULL);
    CHECK(cov.rows == 5 && cov.cols == 5);
    for (int i = 0; i < 5 && cov.n == 25; i++)
        CHECK_CLOSE(cov.v[i * 5 + i], KA_COV_DIAG[i], tol);
    vals_free(&cov);
    gsb_model_free(m);
    free(x);
}

static void test_pca_known_full(void) { pca_known("full", GSB_F64); pca_known("full", GSB_F32); }
static void test_pca_known_covariance_eigh(void)
{
    pca_known("covariance_eigh", GSB_F64);
    pca_known("covariance_eigh", GSB_F32);
}
static void test_pca_known_arpack(void)
{
    pca_known("arpack", GSB_F64);
    pca_known("arpack", GSB_F32);
}
static void test_pca_known_randomized(void)
{
    pca_known("randomized", GSB_F64);
    pca_known("randomized", GSB_F32);
}

static void test_pca_known_whiten(void)
{
    gsb_model *m = make("PCA", "{\"n_components\": 2, \"whiten\": true}");
    gsb_array X = gsb_array_2d((void *)XA, GSB_F64, 12, 5);
    gsb_array X2 = gsb_array_2d((void *)XA, GSB_F64, 2, 5);
    vals ft = call_x(m, "fit_transform", &X);
    CHECK(ft.rows == 12 && ft.cols == 2);
    CHECK(close_first(&ft, KA_WHITE_T, 4, 1e-7)); /* first two rows */
    vals_free(&ft);
    CHECK_VALS(call_x(m, "transform", &X2), KA_WHITE_T, 4, 1e-7);
    CHECK_VALS(call_x(m, "score_samples", &X2), KA_WHITE_LL, 2, 1e-7);
    gsb_model_free(m);
}

static void test_pca_auto_component_counts(void)
{
    gsb_array X = gsb_array_2d((void *)XA, GSB_F64, 12, 5);
    const char *params[3] = {"{\"n_components\": 0.9}", "{\"n_components\": 0.9995}",
                             "{\"n_components\": \"mle\"}"};
    const int want[3] = {2, 3, 2};
    for (int i = 0; i < 3; i++) {
        gsb_model *m = make("PCA", params[i]);
        CHECK_OK(gsb_model_fit(m, &X, NULL));
        CHECK(get_scalar(m, "n_components_") == want[i]);
        vals comp = get_attr(m, "components_");
        CHECK(comp.rows == want[i] && comp.cols == 5);
        CHECK(close_all(&comp, KA_COMPONENTS, 5 * want[i], 1e-7));
        vals_free(&comp);
        if (i == 2)
            CHECK_CLOSE(get_scalar(m, "noise_variance_"), KA_MLE_NOISE, 1e-7);
        gsb_model_free(m);
    }
    /* float thresholds on random data: the smallest k whose cumulative ratio exceeds it */
    testing_seed(11);
    double *R = gap_data(60, 8, 8, 0.0);
    gsb_array XR = gsb_array_2d(R, GSB_F64, 60, 8);
    gsb_model *full = make("PCA", NULL);
    CHECK_OK(gsb_model_fit(full, &XR, NULL));
    vals ratio = get_attr(full, "explained_variance_ratio_");
    const double fracs[3] = {0.3, 0.75, 0.97};
    for (int f = 0; f < 3 && ratio.n == 8; f++) {
        int k = 1;
        double cum = 0;
        for (int j = 0; j < 8; j++) {
            cum += ratio.v[j];
            if (cum <= fracs[f])
                k++;
        }
        char p[64];
        snprintf(p, sizeof p, "{\"n_components\": %.2f}", fracs[f]);
        gsb_model *m = make("PCA", p);
        CHECK_OK(gsb_model_fit(m, &XR, NULL));
        CHECK(get_scalar(m, "n_components_") == k);
        gsb_model_free(m);
    }
    vals_free(&ratio);
    gsb_model_free(full);
    free(R);
}

/* ---- solvers agree with 'full' on data with a clear spectrum gap ------------- */

static void agree_with_full(int64_t n, int64_t d, gsb_dtype dt)
{
    double tol = dt == GSB_F64 ? 1e-6 : 2e-3;
    int64_t k = 4;
    double *Xd = gap_data(n, d, k, 0.01);
    void *x = as_dtype(Xd, n * d, dt);
    gsb_array X = gsb_array_2d(x, dt, n, d);
    gsb_model *ref = make("PCA", "{\"n_components\": 4, \"svd_solver\": \"full\"}");
    CHECK_OK(gsb_model_fit(ref, &X, NULL));
    vals rc = get_attr(ref, "components_"), rev = get_attr(ref, "explained_variance_"),
         rsv = get_attr(ref, "singular_values_"), rt = call_x(ref, "transform", &X);
    const char *solvers[4] = {"covariance_eigh", "randomized", "arpack", "auto"};
    for (int s = 0; s < 4 && rc.n == k * d; s++) {
        char p[128];
        snprintf(p, sizeof p, "{\"n_components\": 4, \"svd_solver\": \"%s\", "
                 "\"random_state\": 1}", solvers[s]);
        gsb_model *m = make("PCA", p);
        vals ft = call_x(m, "fit_transform", &X);
        CHECK_VALS(get_attr(m, "components_"), rc.v, k * d, tol);
        CHECK_VALS(get_attr(m, "explained_variance_"), rev.v, k, tol);
        CHECK_VALS(get_attr(m, "singular_values_"), rsv.v, k, tol);
        /* fit_transform (U * S) equals transform (X V) when the fit is exact */
        CHECK(close_all(&ft, rt.v, n * k, tol * 10));
        CHECK_VALS(call_x(m, "transform", &X), rt.v, n * k, tol * 10);
        vals_free(&ft);
        gsb_model_free(m);
    }
    vals_free(&rc);
    vals_free(&rev);
    vals_free(&rsv);
    vals_free(&rt);
    gsb_model_free(ref);
    free(Xd);
    free(x);
}

static void test_pca_solvers_agree(void)
{
    testing_seed(21);
    agree_with_full(300, 12, GSB_F64); /* tall */
    agree_with_full(25, 90, GSB_F64);  /* wide: the randomized solver works on X^T */
    agree_with_full(200, 10, GSB_F32);
}

static void test_pca_components_orthonormal_and_signs(void)
{
    testing_seed(5);
    double X[40 * 7];
    testing_fill_normal(X, 40 * 7);
    gsb_array A = gsb_array_2d(X, GSB_F64, 40, 7);
    const char *solvers[4] = {"full", "covariance_eigh", "randomized", "arpack"};
    for (int s = 0; s < 4; s++) {
        char p[96];
        snprintf(p, sizeof p, "{\"n_components\": 5, \"svd_solver\": \"%s\"}", solvers[s]);
        gsb_model *m = make("PCA", p);
        CHECK_OK(gsb_model_fit(m, &A, NULL));
        vals c = get_attr(m, "components_");
        for (int i = 0; i < 5 && c.n == 35; i++) {
            int big = 0;
            for (int j = 0; j < 7; j++)
                if (fabs(c.v[i * 7 + j]) > fabs(c.v[i * 7 + big]))
                    big = j;
            CHECK(c.v[i * 7 + big] > 0); /* svd_flip(u_based_decision=False) */
            for (int l = 0; l < 5; l++) {
                double dot = 0;
                for (int j = 0; j < 7; j++)
                    dot += c.v[i * 7 + j] * c.v[l * 7 + j];
                CHECK_CLOSE(dot, i == l ? 1.0 : 0.0, 1e-9);
            }
        }
        vals ev = get_attr(m, "explained_variance_");
        for (int i = 1; i < ev.n; i++)
            CHECK(ev.v[i] <= ev.v[i - 1] + 1e-12);
        vals_free(&ev);
        vals_free(&c);
        gsb_model_free(m);
    }
}

/* ---- whitening, reconstruction ----------------------------------------------- */

static void test_pca_whiten_unit_variance(void)
{
    testing_seed(9);
    double *Xd = gap_data(120, 6, 6, 0.1);
    gsb_array X = gsb_array_2d(Xd, GSB_F64, 120, 6);
    const char *solvers[4] = {"full", "covariance_eigh", "randomized", "arpack"};
    for (int s = 0; s < 4; s++) {
        char p[128];
        snprintf(p, sizeof p, "{\"n_components\": 4, \"whiten\": true, \"svd_solver\": \"%s\"}",
                 solvers[s]);
        gsb_model *m = make("PCA", p);
        vals ft = call_x(m, "fit_transform", &X);
        CHECK(ft.rows == 120 && ft.cols == 4);
        for (int j = 0; j < 4 && ft.n == 480; j++) {
            double mu = 0, v = 0;
            for (int i = 0; i < 120; i++)
                mu += ft.v[i * 4 + j] / 120;
            for (int i = 0; i < 120; i++)
                v += (ft.v[i * 4 + j] - mu) * (ft.v[i * 4 + j] - mu) / 119;
            CHECK_CLOSE(mu, 0.0, 1e-9);
            CHECK_CLOSE(v, 1.0, 1e-9);
        }
        CHECK_VALS(call_x(m, "transform", &X), ft.v, 480, 1e-8);
        vals_free(&ft);
        gsb_model_free(m);
    }
    free(Xd);
}

static void reconstruct(int64_t n, int64_t d, const char *params)
{
    double *Xd = malloc((size_t)(n * d) * sizeof *Xd);
    testing_fill_normal(Xd, n * d);
    for (int64_t i = 0; i < n * d; i++)
        Xd[i] = Xd[i] * 3 + 1;
    gsb_array X = gsb_array_2d(Xd, GSB_F64, n, d);
    gsb_model *m = make("PCA", params);
    vals t = call_x(m, "fit_transform", &X);
    CHECK(t.rows == n);
    if (t.n > 0) {
        gsb_array T = gsb_array_2d(t.v, GSB_F64, t.rows, t.cols);
        vals back = call_x(m, "inverse_transform", &T);
        CHECK(back.rows == n && back.cols == d);
        CHECK(close_all(&back, Xd, n * d, 1e-9));
        vals_free(&back);
    }
    vals_free(&t);
    gsb_model_free(m);
    free(Xd);
}

static void test_pca_inverse_transform_reconstructs(void)
{
    testing_seed(3);
    reconstruct(50, 6, NULL);
    reconstruct(50, 6, "{\"whiten\": true}");
    reconstruct(50, 6, "{\"svd_solver\": \"covariance_eigh\"}");
    reconstruct(6, 40, NULL); /* wide: min(n, d) components still span the centred rows */
    reconstruct(6, 40, "{\"n_components\": 6, \"svd_solver\": \"randomized\"}");
}

/* ---- the probabilistic model ---------------------------------------------------- */

static void test_pca_covariance_precision_score(void)
{
    testing_seed(17);
    double *Xd = gap_data(80, 6, 3, 0.3);
    gsb_array X = gsb_array_2d(Xd, GSB_F64, 80, 6);
    const char *params[3] = {"{\"n_components\": 3}", "{\"n_components\": 3, \"whiten\": true}",
                             "{\"n_components\": 6}"};
    for (int p = 0; p < 3; p++) {
        gsb_model *m = make("PCA", params[p]);
        CHECK_OK(gsb_model_fit(m, &X, NULL));
        vals cov = call_x(m, "get_covariance", NULL), prec = call_x(m, "get_precision", NULL);
        CHECK(cov.n == 36 && prec.n == 36);
        for (int i = 0; i < 6 && cov.n == 36 && prec.n == 36; i++)
            for (int j = 0; j < 6; j++) {
                double s = 0;
                for (int l = 0; l < 6; l++)
                    s += cov.v[i * 6 + l] * prec.v[l * 6 + j];
                CHECK_CLOSE(s, i == j ? 1.0 : 0.0, 1e-8);
            }
        /* score_samples is the Gaussian log-density with that covariance (naive check) */
        vals ll = call_x(m, "score_samples", &X), mean = get_attr(m, "mean_");
        double logdet = 0, L[36];
        memcpy(L, cov.v, sizeof L); /* Cholesky of cov */
        for (int j = 0; j < 6; j++) {
            for (int l = 0; l < j; l++)
                L[j * 6 + j] -= L[j * 6 + l] * L[j * 6 + l];
            L[j * 6 + j] = sqrt(L[j * 6 + j]);
            logdet += 2 * log(L[j * 6 + j]);
            for (int i = j + 1; i < 6; i++) {
                for (int l = 0; l < j; l++)
                    L[i * 6 + j] -= L[i * 6 + l] * L[j * 6 + l];
                L[i * 6 + j] /= L[j * 6 + j];
            }
        }
        double total = 0;
        for (int i = 0; i < 80 && ll.n == 80; i++) {
            double z[6], q = 0;
            for (int j = 0; j < 6; j++) { /* forward solve L z = x - mean */
                z[j] = Xd[i * 6 + j] - mean.v[j];
                for (int l = 0; l < j; l++)
                    z[j] -= L[j * 6 + l] * z[l];
                z[j] /= L[j * 6 + j];
                q += z[j] * z[j];
            }
            double want = -0.5 * q - 0.5 * (6 * log(2 * M_PI) + logdet);
            CHECK_CLOSE(ll.v[i], want, 1e-8);
            total += ll.v[i];
        }
        vals sc = call_x(m, "score", &X);
        CHECK(close_all(&sc, &(double){total / 80}, 1, 1e-10));
        vals_free(&sc);
        vals_free(&ll);
        vals_free(&mean);
        vals_free(&cov);
        vals_free(&prec);
        gsb_model_free(m);
    }
    free(Xd);
}

/* ---- randomized: reproducibility ---------------------------------------------- */

static void test_randomized_random_state(void)
{
    testing_seed(33);
    double X[30 * 50];
    testing_fill_normal(X, 30 * 50); /* flat spectrum: the seed shows */
    gsb_array A = gsb_array_2d(X, GSB_F64, 30, 50);
    const char *est[2] = {"PCA", "TruncatedSVD"};
    const char *fmt[2] = {"{\"n_components\": 5, \"svd_solver\": \"randomized\", "
                          "\"iterated_power\": 1, \"random_state\": %s}",
                          "{\"n_components\": 5, \"n_iter\": 1, \"random_state\": %s}"};
    for (int e = 0; e < 2; e++) {
        vals c[3];
        const char *seeds[3] = {"3", "3", "4"};
        for (int s = 0; s < 3; s++) {
            char p[160];
            snprintf(p, sizeof p, fmt[e], seeds[s]);
            gsb_model *m = make(est[e], p);
            CHECK_OK(gsb_model_fit(m, &A, NULL));
            c[s] = get_attr(m, "components_");
            gsb_model_free(m);
        }
        CHECK(c[0].n == 250 && c[1].n == 250 && c[2].n == 250);
        if (c[0].n == 250 && c[1].n == 250 && c[2].n == 250) {
            CHECK(memcmp(c[0].v, c[1].v, 250 * sizeof(double)) == 0);
            CHECK(memcmp(c[0].v, c[2].v, 250 * sizeof(double)) != 0);
        }
        /* random_state=None still fits */
        gsb_model *m = make(est[e], e ? "{\"n_components\": 5}"
                                      : "{\"n_components\": 5, \"svd_solver\": \"randomized\"}");
        CHECK_OK(gsb_model_fit(m, &A, NULL));
        gsb_model_free(m);
        for (int s = 0; s < 3; s++)
            vals_free(&c[s]);
    }
    /* every normalizer works and stays near the exact answer on gap data */
    double *G = gap_data(60, 20, 3, 0.001);
    gsb_array XG = gsb_array_2d(G, GSB_F64, 60, 20);
    gsb_model *ref = make("TruncatedSVD", "{\"n_components\": 3, \"algorithm\": \"arpack\"}");
    CHECK_OK(gsb_model_fit(ref, &XG, NULL));
    vals rc = get_attr(ref, "components_");
    const char *norms[4] = {"auto", "QR", "LU", "none"};
    for (int i = 0; i < 4 && rc.n == 60; i++) {
        char p[160];
        snprintf(p, sizeof p, "{\"n_components\": 3, \"n_oversamples\": 2, \"n_iter\": 4, "
                 "\"power_iteration_normalizer\": \"%s\", \"random_state\": 0}", norms[i]);
        gsb_model *m = make("TruncatedSVD", p);
        CHECK_OK(gsb_model_fit(m, &XG, NULL));
        CHECK_VALS(get_attr(m, "components_"), rc.v, 60, 1e-6);
        gsb_model_free(m);
    }
    vals_free(&rc);
    gsb_model_free(ref);
    free(G);
}

/*
 * n_components + n_oversamples >= the short side of X (5000 x 20 with 16
 * components, the default oversampling): the randomized solver's basis then
 * spans all of X's range and its answer is X's exact truncated SVD, so it
 * matches 'arpack' (the exact thin SVD here) to rounding, whatever the seed,
 * n_iter and normalizer; tall and wide X (wide: the work is on X^T), both
 * dtypes, and a rank-deficient X (duplicated columns) whose range is smaller
 * than the basis.
 */
static void test_randomized_full_width_is_exact(void)
{
    testing_seed(52);
    const int64_t shapes[3][2] = {{300, 9}, {9, 300}, {200, 12}};
    for (int sh = 0; sh < 3; sh++)
        for (int f = 0; f < 2; f++) {
            int64_t n = shapes[sh][0], d = shapes[sh][1], k = 4;
            gsb_dtype dt = f ? GSB_F32 : GSB_F64;
            double tol = f ? 2e-4 : 1e-9;
            double *X = malloc((size_t)(n * d) * sizeof *X);
            testing_fill_normal(X, n * d);
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < d; j++) {
                    X[i * d + j] *= 1.0 + (double)j; /* distinct singular values */
                    if (sh == 2 && j >= 8)           /* rank 8 < 12 columns */
                        X[i * d + j] = X[i * d + j - 8];
                }
            void *x = as_dtype(X, n * d, dt);
            gsb_array A = gsb_array_2d(x, dt, n, d);
            gsb_model *ref = make("TruncatedSVD", "{\"n_components\": 4, \"algorithm\": \"arpack\"}");
            CHECK_OK(gsb_model_fit(ref, &A, NULL));
            vals rc = get_attr(ref, "components_"), rs = get_attr(ref, "singular_values_");
            vals rt = call_x(ref, "transform", &A);
            const char *params[3] = {
                "{\"n_components\": 4, \"random_state\": 0}",
                "{\"n_components\": 4, \"random_state\": 7, \"n_iter\": 0}",
                "{\"n_components\": 4, \"random_state\": 1, \"n_iter\": 9, "
                "\"power_iteration_normalizer\": \"none\"}"};
            for (int p = 0; p < 3 && rc.n == k * d && rs.n == k && rt.n == n * k; p++) {
                gsb_model *m = make("TruncatedSVD", params[p]);
                vals t = call_x(m, "fit_transform", &A);
                CHECK(t.rows == n && t.cols == k && t.dt == dt);
                CHECK(close_all(&t, rt.v, n * k, tol * rs.v[0]));
                vals_free(&t);
                vals c = get_attr(m, "components_");
                CHECK(c.rows == k && c.cols == d && c.dt == dt);
                CHECK(close_all(&c, rc.v, k * d, tol * 10));
                vals_free(&c);
                vals s = get_attr(m, "singular_values_");
                CHECK(close_all(&s, rs.v, k, tol));
                for (int64_t j = 0; j < s.n && j < k; j++)
                    CHECK(fabs(s.v[j] - rs.v[j]) <= tol * rs.v[0]);
                vals_free(&s);
                gsb_model_free(m);
            }
            /* PCA's randomized solver shares the path: it matches 'full' */
            gsb_model *pf = make("PCA", "{\"n_components\": 4, \"svd_solver\": \"full\"}");
            gsb_model *pr = make("PCA", "{\"n_components\": 4, \"svd_solver\": \"randomized\", "
                                        "\"random_state\": 0}");
            CHECK_OK(gsb_model_fit(pf, &A, NULL));
            CHECK_OK(gsb_model_fit(pr, &A, NULL));
            vals pfc = get_attr(pf, "components_");
            if (pfc.n == k * d)
                CHECK_VALS(get_attr(pr, "components_"), pfc.v, k * d, tol * 10);
            vals_free(&pfc);
            gsb_model_free(pf);
            gsb_model_free(pr);
            vals_free(&rc);
            vals_free(&rs);
            vals_free(&rt);
            gsb_model_free(ref);
            free(x);
            free(X);
        }
}

static int stop_at_second(void *data, const char *stage, int64_t it, double loss)
{
    (void)stage;
    (void)loss;
    ++*(int *)data;
    return it >= 1;
}

/* the power iterations report progress and stop when asked; the model stays unfitted */
static void test_randomized_cancel(void)
{
    testing_seed(8);
    double X[40 * 30];
    testing_fill_normal(X, 40 * 30);
    gsb_array A = gsb_array_2d(X, GSB_F64, 40, 30);
    gsb_model *m = make("TruncatedSVD", "{\"n_components\": 3, \"n_iter\": 6}");
    int calls = 0;
    gsb_model_set_progress(m, stop_at_second, &calls);
    CHECK_ERR(gsb_model_fit(m, &A, NULL), GSB_ECANCELLED, "cancelled");
    CHECK(calls == 2);
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_free(m);
}

/* ---- TruncatedSVD -------------------------------------------------------------- */

static void test_tsvd_known(void)
{
    const char *params[2] = {"{\"algorithm\": \"arpack\"}", "{\"random_state\": 0}"};
    for (int p = 0; p < 2; p++)
        for (int f = 0; f < 2; f++) {
            gsb_dtype dt = f ? GSB_F32 : GSB_F64;
            double tol = f ? 2e-3 : 1e-7;
            void *x = as_dtype(XA, 60, dt);
            gsb_array X = gsb_array_2d(x, dt, 12, 5), X2 = gsb_array_2d(x, dt, 2, 5);
            gsb_model *m = make("TruncatedSVD", params[p]);
            vals ft = call_x(m, "fit_transform", &X);
            CHECK(ft.rows == 12 && ft.cols == 2 && ft.dt == dt);
            CHECK(close_first(&ft, KT_T, 4, tol));
            vals_free(&ft);
            vals comp = get_attr(m, "components_");
            CHECK(comp.rows == 2 && comp.cols == 5 && comp.dt == dt);
            CHECK(close_all(&comp, KT_COMPONENTS, 10, tol));
            vals_free(&comp);
            CHECK_VALS(get_attr(m, "explained_variance_"), KT_EV, 2, tol);
            CHECK_VALS(get_attr(m, "explained_variance_ratio_"), KT_RATIO, 2, tol);
            CHECK_VALS(get_attr(m, "singular_values_"), KT_SV, 2, tol);
            CHECK_VALS(call_x(m, "transform", &X2), KT_T, 4, tol);
            gsb_model_free(m);
            free(x);
        }
}

static void test_tsvd_wide_and_inverse(void)
{
    testing_seed(41);
    double X[3 * 10];
    testing_fill_normal(X, 30);
    gsb_array A = gsb_array_2d(X, GSB_F64, 3, 10);
    /* more components than samples: as scikit-learn, only min(n, d) come back */
    gsb_model *m = make("TruncatedSVD", "{\"n_components\": 5, \"random_state\": 0}");
    vals t = call_x(m, "fit_transform", &A);
    CHECK(t.rows == 3 && t.cols == 3);
    vals c = get_attr(m, "components_");
    CHECK(c.rows == 3 && c.cols == 10);
    /* with all of X's rank kept, inverse_transform reconstructs X (no centring) */
    if (t.n == 9) {
        gsb_array T = gsb_array_2d(t.v, GSB_F64, 3, 3);
        CHECK_VALS(call_x(m, "inverse_transform", &T), X, 30, 1e-10);
    }
    vals_free(&t);
    vals_free(&c);
    gsb_model_free(m);

    /* wide randomized agrees with the exact SVD on gap data */
    double *G = gap_data(15, 70, 2, 0.001);
    gsb_array XG = gsb_array_2d(G, GSB_F64, 15, 70);
    gsb_model *ex = make("TruncatedSVD", "{\"n_components\": 2, \"algorithm\": \"arpack\"}");
    gsb_model *rz = make("TruncatedSVD", "{\"n_components\": 2, \"random_state\": 5}");
    CHECK_OK(gsb_model_fit(ex, &XG, NULL));
    CHECK_OK(gsb_model_fit(rz, &XG, NULL));
    const char *names[4] = {"components_", "singular_values_", "explained_variance_",
                            "explained_variance_ratio_"};
    for (int i = 0; i < 4; i++) {
        vals a = get_attr(ex, names[i]);
        CHECK_VALS(get_attr(rz, names[i]), a.v, a.n, 1e-7);
        vals_free(&a);
    }
    gsb_model_free(ex);
    gsb_model_free(rz);
    free(G);
}

/* ---- dtypes, edge cases, errors ----------------------------------------------------- */

static void test_mixed_dtypes(void)
{
    float xf[60];
    for (int i = 0; i < 60; i++)
        xf[i] = (float)XA[i];
    gsb_array X32 = gsb_array_2d(xf, GSB_F32, 12, 5);
    gsb_array X64 = gsb_array_2d((void *)XA, GSB_F64, 12, 5);
    const char *est[2] = {"PCA", "TruncatedSVD"};
    for (int e = 0; e < 2; e++) {
        gsb_model *m = make(est[e], "{\"n_components\": 2}");
        CHECK_OK(gsb_model_fit(m, &X32, NULL));
        vals a = call_x(m, "transform", &X32), b = call_x(m, "transform", &X64);
        CHECK(a.dt == GSB_F32 && b.dt == GSB_F64); /* numpy's promotion */
        CHECK(a.n == 24 && b.n == 24);
        if (a.n == 24 && b.n == 24)
            CHECK(testing_relerr(a.v, b.v, 24) < 1e-5);
        gsb_array T = gsb_array_2d(a.v, GSB_F64, 12, 2);
        vals inv = call_x(m, "inverse_transform", &T);
        CHECK(inv.dt == GSB_F64 && inv.rows == 12 && inv.cols == 5);
        vals_free(&inv);
        vals_free(&a);
        vals_free(&b);
        gsb_model_free(m);
    }
}

static void test_pca_zero_components(void)
{
    gsb_model *m = make("PCA", "{\"n_components\": 0}");
    gsb_array X = gsb_array_2d((void *)XA, GSB_F64, 12, 5);
    vals t = call_x(m, "fit_transform", &X);
    CHECK(t.rows == 12 && t.cols == 0);
    vals_free(&t);
    vals c = get_attr(m, "components_");
    CHECK(c.rows == 0 && c.cols == 5);
    vals_free(&c);
    /* everything is noise: the mean of all explained variances */
    double tot = 0;
    for (int i = 0; i < 3; i++)
        tot += KA_EV[i];
    CHECK(get_scalar(m, "noise_variance_") > KA_NOISE);
    CHECK(get_scalar(m, "noise_variance_") < tot);
    vals ll = call_x(m, "score_samples", &X);
    CHECK(ll.n == 12);
    vals_free(&ll);
    gsb_model_free(m);
}

/* a fitted model survives export and import: same parameters, same projections */
static void test_export_import(void)
{
    gsb_array X = gsb_array_2d((void *)XA, GSB_F64, 12, 5);
    const char *est[2] = {"PCA", "TruncatedSVD"};
    const char *params[2] = {"{\"n_components\": 2, \"whiten\": true}", "{\"n_components\": 3}"};
    for (int e = 0; e < 2; e++) {
        gsb_model *m = make(est[e], params[e]), *back = NULL;
        CHECK_OK(gsb_model_fit(m, &X, NULL));
        void *blob = NULL;
        size_t len = 0;
        CHECK_OK(gsb_model_export(m, &blob, &len));
        CHECK_OK(gsb_model_import(sess, blob, len, &back));
        gsb_free(blob);
        if (back) {
            vals a = call_x(m, "transform", &X), b = call_x(back, "transform", &X);
            CHECK(a.n == b.n && a.n > 0 && memcmp(a.v, b.v, (size_t)a.n * sizeof *a.v) == 0);
            vals_free(&a);
            vals_free(&b);
            gsb_model_free(back);
        }
        gsb_model_free(m);
    }
}

static void test_errors(void)
{
    gsb_array X = gsb_array_2d((void *)XA, GSB_F64, 12, 5);
    gsb_array X4 = gsb_array_2d((void *)XA, GSB_F64, 4, 5);
    gsb_array Xw = gsb_array_2d((void *)XA, GSB_F64, 3, 20);
    gsb_array X1 = gsb_array_2d((void *)XA, GSB_F64, 12, 1);
    gsb_model *m;

    m = make("PCA", "{\"n_components\": 6}");
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_EINVAL,
              "n_components=6 must be between 0 and min(n_samples, n_features)=5 with "
              "svd_solver='full'");
    CHECK(!gsb_model_is_fitted(m));
    CHECK_OK(gsb_model_set_params(m, "{\"n_components\": 6, \"svd_solver\": \"randomized\"}"));
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_EINVAL,
              "n_components=6 must be between 1 and min(n_samples, n_features)=5 with "
              "svd_solver='randomized'");
    CHECK_OK(gsb_model_set_params(m, "{\"n_components\": 4, \"svd_solver\": \"arpack\"}"));
    CHECK_ERR(gsb_model_fit(m, &X4, NULL), GSB_EINVAL,
              "n_components=4 must be strictly less than min(n_samples, n_features)=4 with "
              "svd_solver='arpack'");
    CHECK_OK(gsb_model_set_params(m, "{\"n_components\": \"mle\"}"));
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_EINVAL,
              "n_components='mle' cannot be a string with svd_solver='arpack'");
    CHECK_OK(gsb_model_set_params(m, "{\"svd_solver\": \"full\"}"));
    CHECK_ERR(gsb_model_fit(m, &X4, NULL), GSB_EINVAL,
              "n_components='mle' is only supported if n_samples >= n_features");
    CHECK_OK(gsb_model_set_params(m, "{\"n_components\": 1.5}"));
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_EPARAM,
              "The 'n_components' parameter of PCA must be an int in the range [0, inf), a "
              "float in the range (0.0, 1.0), a str among {'mle'} or None. Got 1.5 instead.");
    CHECK_OK(gsb_model_set_params(m, "{\"n_components\": 1.0}"));
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_EPARAM, "Got 1.0 instead.");
    CHECK_ERR(gsb_model_set_params(m, "{\"n_components\": -1}"), GSB_EPARAM, "n_components");
    CHECK_ERR(gsb_model_set_params(m, "{\"svd_solver\": \"lobpcg\"}"), GSB_EPARAM,
              "svd_solver");
    CHECK_ERR(gsb_model_set_params(m, "{\"n_oversamples\": 0}"), GSB_EPARAM, "n_oversamples");
    CHECK_ERR(gsb_model_set_params(m, "{\"iterated_power\": \"x\"}"), GSB_EPARAM,
              "iterated_power");
    CHECK_OK(gsb_model_set_params(m, "{\"n_components\": 2}"));
    const gsb_array *in[1] = {&X};
    CHECK_ERR(gsb_model_call(m, "transform", in, 1, NULL, NULL), GSB_ENOTFITTED, "not fitted");
    CHECK_OK(gsb_model_fit(m, &X, NULL));
    const gsb_array *in1[1] = {&X1};
    CHECK_ERR(gsb_model_call(m, "transform", in1, 1, NULL, NULL), GSB_EINVAL,
              "X has 1 features, but PCA is expecting 5 features as input.");
    CHECK_ERR(gsb_model_call(m, "inverse_transform", in, 1, NULL, NULL), GSB_EINVAL,
              "(size 2 is different from 5)");
    gsb_model_free(m);

    m = make("TruncatedSVD", "{\"n_components\": 6}");
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_EINVAL, "n_components(6) must be <= n_features(5).");
    CHECK_ERR(gsb_model_fit(m, &X1, NULL), GSB_EINVAL,
              "Found array with 1 feature(s) (shape=(12, 1)) while a minimum of 2 is required "
              "by TruncatedSVD.");
    CHECK_OK(gsb_model_set_params(m, "{\"n_components\": 3, \"algorithm\": \"arpack\"}"));
    CHECK_ERR(gsb_model_fit(m, &Xw, NULL), GSB_EINVAL,
              "`k` must be an integer satisfying `0 < k < min(A.shape)`.");
    CHECK_ERR(gsb_model_set_params(m, "{\"n_components\": 0}"), GSB_EPARAM, "n_components");
    CHECK_ERR(gsb_model_set_params(m, "{\"algorithm\": \"full\"}"), GSB_EPARAM, "algorithm");
    CHECK_OK(gsb_model_set_params(m, "{\"n_components\": 2}"));
    CHECK_OK(gsb_model_fit(m, &X, NULL));
    CHECK_ERR(gsb_model_call(m, "inverse_transform", in, 1, NULL, NULL), GSB_EINVAL,
              "shapes (12,5) and (2,5) not aligned: 5 (dim 1) != 2 (dim 0)");
    gsb_model_free(m);

    /* NaN input is refused before any solver runs */
    double bad[10] = {1, 2, 3, NAN, 5, 6, 7, 8, 9, 10};
    gsb_array B = gsb_array_2d(bad, GSB_F64, 5, 2);
    m = make("PCA", NULL);
    CHECK_ERR(gsb_model_fit(m, &B, NULL), GSB_EINVAL, "NaN");
    gsb_model_free(m);
}

int main(void)
{
    if (testing_open(&sess))
        return 1;
    RUN(test_pca_known_full);
    RUN(test_pca_known_covariance_eigh);
    RUN(test_pca_known_arpack);
    RUN(test_pca_known_randomized);
    RUN(test_pca_known_whiten);
    RUN(test_pca_auto_component_counts);
    RUN(test_pca_solvers_agree);
    RUN(test_pca_components_orthonormal_and_signs);
    RUN(test_pca_whiten_unit_variance);
    RUN(test_pca_inverse_transform_reconstructs);
    RUN(test_pca_covariance_precision_score);
    RUN(test_randomized_random_state);
    RUN(test_randomized_cancel);
    RUN(test_randomized_full_width_is_exact);
    RUN(test_tsvd_known);
    RUN(test_tsvd_wide_and_inverse);
    RUN(test_mixed_dtypes);
    RUN(test_pca_zero_components);
    RUN(test_export_import);
    RUN(test_errors);
    return testing_close(sess);
}
