/*
 * test_preprocessing.c - StandardScaler, MinMaxScaler and LabelEncoder
 * through the public API: known answers from scikit-learn 1.9.1 (the python
 * that produced them is next to each), invariants on random data (moments
 * after scaling, inverse_transform round trips), dtypes and shapes of the
 * fitted attributes, errors in scikit-learn's words, and partial_fit
 * (batches give what one fit gives).
 *
 * The known-answer data (python):
 *   i = np.arange(6.)
 *   X = np.c_[np.full(6, 2.5), 3*np.sin(1.7*i) + 1, i*i - 4.0]
 *   w = np.array([1, 2, 0, 1, 3, 0.5])
 */
#include <math.h>

#include "test_api_helpers.h"

static gsb_session *S;

static void known_X(double *X)
{
    for (int i = 0; i < 6; i++) {
        X[i * 3 + 0] = 2.5;
        X[i * 3 + 1] = 3 * sin(1.7 * i) + 1;
        X[i * 3 + 2] = (double)(i * i) - 4.0;
    }
}
static const double known_w[6] = {1, 2, 0, 1, 3, 0.5};

static gsb_model *make(const char *est, const char *params)
{
    return testing_model(S, est, params);
}

/* call a method with up to 3 inputs (NULL = not given) */
static int call(gsb_model *m, const char *method, const gsb_array *a, const gsb_array *b,
                const gsb_array *c, gsb_result **r)
{
    const gsb_array *ins[3] = {a, b, c};
    int n = c ? 3 : b ? 2 : 1;
    return gsb_model_call(m, method, ins, n, NULL, r);
}

/* fitted attribute must exist with dtype and ndim, and match want[0..n) */
static void check_attr(gsb_model *m, const char *name, gsb_dtype dtype, int ndim,
                       const double *want, int64_t n, double tol)
{
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_get_attr(m, name, &r));
    if (!r)
        return;
    const gsb_array *a = gsb_result_array(r, 0);
    CHECK(a->dtype == dtype);
    CHECK(a->ndim == ndim);
    int64_t numel = testing_numel(a);
    CHECK(numel == n);
    for (int64_t i = 0; i < n && i < numel; i++)
        CHECK_CLOSE(testing_at(a, i), want[i], tol);
    gsb_result_free(r);
}

/* ---- StandardScaler ----------------------------------------------------- */

static void test_standard_scaler_known(void)
{
    /* s = StandardScaler().fit(X); s.mean_, s.var_, s.scale_, s.n_samples_seen_,
     * s.transform(X)[1] */
    static const double mean[3] = {2.5, 1.5514547449300016, 5.166666666666667};
    static const double var[3] = {0.0, 3.8772419391856485, 79.13888888888889};
    static const double scale[3] = {1.0, 1.9690713392829748, 8.89600409672168};
    static const double row1[3] = {0.0, 1.2308033934971196, -0.9180151647722617};
    double X[18], n_seen = 6, nf = 3;
    known_X(X);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, 6, 3);
    gsb_model *m = make("StandardScaler", NULL);
    CHECK_OK(gsb_model_fit(m, &Xa, NULL));
    check_attr(m, "mean_", GSB_F64, 1, mean, 3, 1e-12);
    check_attr(m, "var_", GSB_F64, 1, var, 3, 1e-12);
    check_attr(m, "scale_", GSB_F64, 1, scale, 3, 1e-12);
    check_attr(m, "n_samples_seen_", GSB_F64, 0, &n_seen, 1, 0);
    check_attr(m, "n_features_in_", GSB_I64, 0, &nf, 1, 0);
    gsb_result *r = NULL;
    CHECK_OK(call(m, "transform", &Xa, NULL, NULL, &r));
    const gsb_array *T = r ? gsb_result_get(r, "X") : NULL;
    CHECK(T && T->dtype == GSB_F64 && T->ndim == 2 && T->shape[0] == 6 && T->shape[1] == 3);
    for (int j = 0; T && j < 3; j++)
        CHECK_CLOSE(testing_at(T, 3 + j), row1[j], 1e-12);
    gsb_result_free(r);
    /* y is accepted and ignored, as in scikit-learn's fit(X, y=None) */
    double yy[6] = {5, 4, 3, 2, 1, 0};
    gsb_array ya = gsb_array_1d(yy, GSB_F64, 6);
    CHECK_OK(gsb_model_fit(m, &Xa, &ya));
    check_attr(m, "mean_", GSB_F64, 1, mean, 3, 1e-12);
    check_attr(m, "n_samples_seen_", GSB_F64, 0, &n_seen, 1, 0);
    gsb_model_free(m);
}

static void test_standard_scaler_weighted(void)
{
    /* s = StandardScaler().fit(X, sample_weight=w) */
    static const double mean[3] = {2.5, 2.17563941932191, 5.533333333333333};
    static const double var[3] = {0.0, 3.2680709930479273, 64.24888888888889};
    static const double scale[3] = {1.0, 1.8077806816779316, 8.015540461434206};
    static const double row1[3] = {0.0, 0.9953392191166599, -1.0645986224373047};
    double X[18], n_seen = 7.5, w[6];
    known_X(X);
    memcpy(w, known_w, sizeof w);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, 6, 3), wa = gsb_array_1d(w, GSB_F64, 6);
    gsb_model *m = make("StandardScaler", NULL);
    CHECK_OK(call(m, "fit", &Xa, NULL, &wa, NULL));
    check_attr(m, "mean_", GSB_F64, 1, mean, 3, 1e-12);
    check_attr(m, "var_", GSB_F64, 1, var, 3, 1e-12);
    check_attr(m, "scale_", GSB_F64, 1, scale, 3, 1e-12);
    check_attr(m, "n_samples_seen_", GSB_F64, 0, &n_seen, 1, 0);
    gsb_result *r = NULL;
    CHECK_OK(call(m, "transform", &Xa, NULL, NULL, &r));
    const gsb_array *T = r ? gsb_result_get(r, "X") : NULL;
    for (int j = 0; T && j < 3; j++)
        CHECK_CLOSE(testing_at(T, 3 + j), row1[j], 1e-12);
    gsb_result_free(r);
    /* all-zero weights are refused */
    double zero[6] = {0};
    gsb_array za = gsb_array_1d(zero, GSB_F64, 6);
    CHECK_ERR(call(m, "fit", &Xa, NULL, &za, NULL), GSB_EINVAL,
              "Sample weights must contain at least one non-zero number.");
    gsb_model_free(m);
}

static void test_standard_scaler_float32(void)
{
    /* s = StandardScaler().fit(X.astype(np.float32)): float64 statistics,
     * float32 transform s.transform(X.astype(np.float32))[1] */
    static const double mean[3] = {2.5, 1.5514547551671665, 5.166666666666667};
    static const double var[3] = {0.0, 3.8772418862377047, 79.13888888888889};
    static const double scale[3] = {1.0, 1.9690713258380725, 8.89600409672168};
    static const double row1[3] = {0.0, 1.230803370475769, -0.9180151224136353};
    double X[18];
    float Xf[18];
    known_X(X);
    testing_to_f32(X, Xf, 18);
    gsb_array Xa = gsb_array_2d(Xf, GSB_F32, 6, 3);
    gsb_model *m = make("StandardScaler", NULL);
    CHECK_OK(gsb_model_fit(m, &Xa, NULL));
    check_attr(m, "mean_", GSB_F64, 1, mean, 3, 1e-12);
    check_attr(m, "var_", GSB_F64, 1, var, 3, 1e-12);
    check_attr(m, "scale_", GSB_F64, 1, scale, 3, 1e-12);
    gsb_result *r = NULL;
    CHECK_OK(call(m, "transform", &Xa, NULL, NULL, &r));
    const gsb_array *T = r ? gsb_result_get(r, "X") : NULL;
    CHECK(T && T->dtype == GSB_F32);
    for (int j = 0; T && j < 3; j++)
        CHECK_CLOSE(testing_at(T, 3 + j), row1[j], 1e-6);
    gsb_result_free(r);
    gsb_model_free(m);
}

/* transform with each combination of with_mean / with_std vs a naive reference */
static void test_standard_scaler_flags(void)
{
    testing_seed(11);
    enum { N = 40, D = 4 };
    double X[N * D], mu[D] = {0}, sd[D] = {0};
    for (int i = 0; i < N * D; i++)
        X[i] = testing_normal() * (1 + i % D) + 3.0 * (i % D);
    for (int j = 0; j < D; j++) {
        for (int i = 0; i < N; i++)
            mu[j] += X[i * D + j] / N;
        for (int i = 0; i < N; i++)
            sd[j] += (X[i * D + j] - mu[j]) * (X[i * D + j] - mu[j]) / N;
        sd[j] = sqrt(sd[j]);
    }
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
    static const char *params[4] = {"{}", "{\"with_mean\": false}", "{\"with_std\": false}",
                                    "{\"with_mean\": false, \"with_std\": false}"};
    for (int f = 0; f < 4; f++) {
        int wm = f == 0 || f == 2, ws = f == 0 || f == 1;
        gsb_model *m = make("StandardScaler", params[f]);
        CHECK_OK(gsb_model_fit(m, &Xa, NULL));
        /* scikit-learn keeps mean_ unless both flags are off */
        CHECK(testing_has_attr(m, "mean_") == (wm || ws));
        CHECK(testing_has_attr(m, "var_") == ws);
        CHECK(testing_has_attr(m, "scale_") == ws);
        double n_seen = N;
        check_attr(m, "n_samples_seen_", wm || ws ? GSB_F64 : GSB_I64, 0, &n_seen, 1, 0);
        gsb_result *r = NULL;
        CHECK_OK(call(m, "transform", &Xa, NULL, NULL, &r));
        const gsb_array *T = r ? gsb_result_get(r, "X") : NULL;
        for (int i = 0; T && i < N * D; i++) {
            int j = i % D;
            double want = (X[i] - (wm ? mu[j] : 0)) / (ws ? sd[j] : 1);
            CHECK_CLOSE(testing_at(T, i), want, 1e-12);
        }
        gsb_result_free(r);
        gsb_model_free(m);
    }
}

/* random data of mixed scales, both dtypes: moments after scaling, round trip */
static void test_standard_scaler_roundtrip(void)
{
    testing_seed(12);
    enum { N = 300, D = 6 };
    double X[N * D];
    float Xf[N * D];
    for (int i = 0; i < N * D; i++) {
        int j = i % D;
        X[i] = testing_normal() * pow(10.0, j - 2) + 50.0 * j;
        Xf[i] = (float)X[i];
    }
    for (int dt = 0; dt < 2; dt++) {
        gsb_array Xa = dt ? gsb_array_2d(Xf, GSB_F32, N, D) : gsb_array_2d(X, GSB_F64, N, D);
        double tol = dt ? 1e-4 : 1e-10;
        gsb_model *m = make("StandardScaler", NULL);
        gsb_result *r = NULL, *r2 = NULL;
        CHECK_OK(call(m, "fit_transform", &Xa, NULL, NULL, &r));
        const gsb_array *T = r ? gsb_result_get(r, "X") : NULL;
        CHECK(T && T->dtype == Xa.dtype);
        for (int j = 0; T && j < D; j++) {
            double s = 0, ss = 0;
            for (int i = 0; i < N; i++)
                s += testing_at(T, i * D + j);
            for (int i = 0; i < N; i++)
                ss += (testing_at(T, i * D + j) - s / N) * (testing_at(T, i * D + j) - s / N);
            CHECK_CLOSE(s / N, 0.0, tol);
            CHECK_CLOSE(ss / N, 1.0, tol);
        }
        if (T)
            CHECK_OK(call(m, "inverse_transform", T, NULL, NULL, &r2));
        const gsb_array *B = r2 ? gsb_result_get(r2, "X") : NULL;
        for (int i = 0; B && i < N * D; i++)
            CHECK_CLOSE(testing_at(B, i), dt ? Xf[i] : X[i], tol);
        gsb_result_free(r);
        gsb_result_free(r2);
        gsb_model_free(m);
    }
}

static void test_standard_scaler_errors(void)
{
    double X[6] = {1, 2, NAN, 4, 5, 6}, X2[6] = {1, 2, 3, 4, 5, 6};
    gsb_array Xa = gsb_array_2d(X, GSB_F64, 3, 2), X2a = gsb_array_2d(X2, GSB_F64, 3, 2);
    gsb_array X3a = gsb_array_2d(X2, GSB_F64, 2, 3);
    gsb_model *m = make("StandardScaler", NULL);
    CHECK_ERR(call(m, "transform", &X2a, NULL, NULL, NULL), GSB_ENOTFITTED,
              "This StandardScaler instance is not fitted yet.");
    CHECK_ERR(gsb_model_fit(m, &Xa, NULL), GSB_EINVAL, "Input X contains NaN.");
    CHECK_OK(gsb_model_fit(m, &X2a, NULL));
    CHECK_ERR(call(m, "transform", &X3a, NULL, NULL, NULL), GSB_EINVAL,
              "X has 3 features, but StandardScaler is expecting 2 features as input.");
    CHECK_ERR(gsb_model_set_params(m, "{\"with_mean\": 1.5}"), GSB_EPARAM,
              "The 'with_mean' parameter of StandardScaler must be");
    gsb_model_free(m);
}

/* ---- MinMaxScaler ------------------------------------------------------- */

static void test_minmax_known(void)
{
    /* m = MinMaxScaler(feature_range=(-1, 2)).fit(X): data_min_, data_max_,
     * data_range_, scale_, min_, m.transform(X*1.5)[4]; with clip=True too */
    static const double dmin[3] = {2.5, -1.7774440469831974, -4.0};
    static const double dmax[3] = {2.5, 3.9749944313574055, 21.0};
    static const double drange[3] = {0.0, 5.752438478340602, 25.0};
    static const double scale[3] = {3.0, 0.5215179634333796, 0.12};
    static const double min_[3] = {-8.5, -0.07303100050053857, -0.52};
    static const double row4[3] = {2.75, 1.8688463933092527, 1.6400000000000001};
    static const double row4_clip[3] = {2.0, 1.8688463933092527, 1.6400000000000001};
    double X[18], X15[18], n_seen = 6;
    known_X(X);
    for (int i = 0; i < 18; i++)
        X15[i] = 1.5 * X[i];
    gsb_array Xa = gsb_array_2d(X, GSB_F64, 6, 3), X15a = gsb_array_2d(X15, GSB_F64, 6, 3);
    for (int clip = 0; clip < 2; clip++) {
        gsb_model *m = make("MinMaxScaler", clip ? "{\"feature_range\": [-1, 2], \"clip\": true}"
                                                 : "{\"feature_range\": [-1, 2]}");
        CHECK_OK(gsb_model_fit(m, &Xa, NULL));
        check_attr(m, "data_min_", GSB_F64, 1, dmin, 3, 1e-14);
        check_attr(m, "data_max_", GSB_F64, 1, dmax, 3, 1e-14);
        check_attr(m, "data_range_", GSB_F64, 1, drange, 3, 1e-14);
        check_attr(m, "scale_", GSB_F64, 1, scale, 3, 1e-14);
        check_attr(m, "min_", GSB_F64, 1, min_, 3, 1e-14);
        check_attr(m, "n_samples_seen_", GSB_I64, 0, &n_seen, 1, 0);
        /* y is ignored */
        CHECK_OK(gsb_model_fit(m, &Xa, &X15a));
        check_attr(m, "data_min_", GSB_F64, 1, dmin, 3, 1e-14);
        gsb_result *r = NULL;
        CHECK_OK(call(m, "transform", &X15a, NULL, NULL, &r));
        const gsb_array *T = r ? gsb_result_get(r, "X") : NULL;
        for (int j = 0; T && j < 3; j++)
            CHECK_CLOSE(testing_at(T, 12 + j), clip ? row4_clip[j] : row4[j], 1e-13);
        gsb_result_free(r);
        gsb_model_free(m);
    }
}

static void test_minmax_float32(void)
{
    /* m = MinMaxScaler().fit(X.astype(np.float32)); m.scale_, m.min_ (float32) */
    static const double scale[3] = {1.0, 0.17383931577205658, 0.03999999910593033};
    static const double min_[3] = {-2.5, 0.30898964405059814, 0.1599999964237213};
    double X[18];
    float Xf[18];
    known_X(X);
    testing_to_f32(X, Xf, 18);
    gsb_array Xa = gsb_array_2d(Xf, GSB_F32, 6, 3);
    gsb_model *m = make("MinMaxScaler", NULL);
    CHECK_OK(gsb_model_fit(m, &Xa, NULL));
    check_attr(m, "scale_", GSB_F32, 1, scale, 3, 0);
    check_attr(m, "min_", GSB_F32, 1, min_, 3, 0);
    gsb_result *r = NULL;
    CHECK_OK(call(m, "transform", &Xa, NULL, NULL, &r));
    const gsb_array *T = r ? gsb_result_get(r, "X") : NULL;
    CHECK(T && T->dtype == GSB_F32);
    gsb_result_free(r);
    gsb_model_free(m);
}

/* random data: the training columns span feature_range exactly; round trip */
static void test_minmax_roundtrip(void)
{
    testing_seed(13);
    enum { N = 200, D = 5 };
    double X[N * D];
    for (int i = 0; i < N * D; i++)
        X[i] = testing_normal() * pow(3.0, i % D) - 7.0 * (i % D);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
    gsb_model *m = make("MinMaxScaler", "{\"feature_range\": [-3, 0.5]}");
    gsb_result *r = NULL, *r2 = NULL;
    CHECK_OK(call(m, "fit_transform", &Xa, NULL, NULL, &r));
    const gsb_array *T = r ? gsb_result_get(r, "X") : NULL;
    for (int j = 0; T && j < D; j++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < N; i++) {
            lo = fmin(lo, testing_at(T, i * D + j));
            hi = fmax(hi, testing_at(T, i * D + j));
        }
        CHECK_CLOSE(lo, -3.0, 1e-12);
        CHECK_CLOSE(hi, 0.5, 1e-12);
    }
    if (T)
        CHECK_OK(call(m, "inverse_transform", T, NULL, NULL, &r2));
    const gsb_array *B = r2 ? gsb_result_get(r2, "X") : NULL;
    for (int i = 0; B && i < N * D; i++)
        CHECK_CLOSE(testing_at(B, i), X[i], 1e-12);
    gsb_result_free(r);
    gsb_result_free(r2);
    gsb_model_free(m);
}

static void test_minmax_bad_range(void)
{
    double X[4] = {1, 2, 3, 4};
    gsb_array Xa = gsb_array_2d(X, GSB_F64, 2, 2);
    static const char *params[3] = {"{\"feature_range\": [1, 0]}",
                                    "{\"feature_range\": [1.0, 0.5]}",
                                    "{\"feature_range\": [2, 2]}"};
    static const char *msgs[3] = {"Got (1, 0).", "Got (1.0, 0.5).", "Got (2, 2)."};
    for (int k = 0; k < 3; k++) {
        gsb_model *m = make("MinMaxScaler", params[k]);
        CHECK_ERR(gsb_model_fit(m, &Xa, NULL), GSB_EINVAL,
                  "Minimum of desired feature range must be smaller than maximum.");
        CHECK(strstr(gsb_errmsg(), msgs[k]) != NULL);
        CHECK(!gsb_model_is_fitted(m));
        gsb_model_free(m);
    }
}

/* ---- LabelEncoder ------------------------------------------------------- */

static void test_label_encoder_basic(void)
{
    double y[5] = {3, 1, 2, 1, 3}, cls[3] = {1, 2, 3};
    gsb_array ya = gsb_array_1d(y, GSB_F64, 5);
    gsb_model *m = make("LabelEncoder", NULL);
    gsb_result *r = NULL, *r2 = NULL;
    CHECK_OK(call(m, "fit_transform", &ya, NULL, NULL, &r));
    check_attr(m, "classes_", GSB_F64, 1, cls, 3, 0);
    const gsb_array *codes = r ? gsb_result_get(r, "y") : NULL;
    CHECK(codes && codes->dtype == GSB_I64 && codes->ndim == 1 && codes->shape[0] == 5);
    static const int64_t want[5] = {2, 0, 1, 0, 2};
    for (int i = 0; codes && i < 5; i++)
        CHECK(((const int64_t *)codes->data)[i] == want[i]);
    if (codes)
        CHECK_OK(call(m, "inverse_transform", codes, NULL, NULL, &r2));
    const gsb_array *back = r2 ? gsb_result_get(r2, "y") : NULL;
    CHECK(back && back->dtype == GSB_F64 && back->ndim == 1);
    for (int i = 0; back && i < 5; i++)
        CHECK(testing_at(back, i) == y[i]);
    gsb_result_free(r);
    gsb_result_free(r2);
    gsb_model_free(m);
}

/* random labels vs a naive reference: sorted unique classes, codes, inverse */
static void test_label_encoder_random(void)
{
    testing_seed(14);
    enum { N = 500 };
    int32_t y[N];
    for (int i = 0; i < N; i++)
        y[i] = (int32_t)(testing_uniform() * 60) * 7 - 100;
    gsb_array ya = gsb_array_1d(y, GSB_I32, N);
    gsb_model *m = make("LabelEncoder", NULL);
    CHECK_OK(call(m, "fit", &ya, NULL, NULL, NULL));
    gsb_result *rc = NULL, *r = NULL, *r2 = NULL;
    CHECK_OK(gsb_model_get_attr(m, "classes_", &rc));
    const gsb_array *cls = rc ? gsb_result_array(rc, 0) : NULL;
    int64_t k = cls ? cls->shape[0] : 0;
    /* every class occurs in y, ascending, and every label is a class */
    for (int64_t c = 0; c < k; c++) {
        int seen = 0;
        for (int i = 0; i < N; i++)
            seen |= y[i] == testing_at(cls, c);
        CHECK(seen);
        if (c > 0)
            CHECK(testing_at(cls, c - 1) < testing_at(cls, c));
    }
    CHECK_OK(call(m, "transform", &ya, NULL, NULL, &r));
    const gsb_array *codes = r ? gsb_result_get(r, "y") : NULL;
    for (int i = 0; codes && cls && i < N; i++) {
        int64_t code = ((const int64_t *)codes->data)[i];
        CHECK(code >= 0 && code < k && testing_at(cls, code) == y[i]);
    }
    if (codes)
        CHECK_OK(call(m, "inverse_transform", codes, NULL, NULL, &r2));
    const gsb_array *back = r2 ? gsb_result_get(r2, "y") : NULL;
    for (int i = 0; back && i < N; i++)
        CHECK(testing_at(back, i) == y[i]);
    gsb_result_free(rc);
    gsb_result_free(r);
    gsb_result_free(r2);
    gsb_model_free(m);
}

static void test_label_encoder_errors(void)
{
    double y[3] = {3, 1, 2};
    gsb_array ya = gsb_array_1d(y, GSB_F64, 3);
    gsb_model *m = make("LabelEncoder", NULL);
    CHECK_ERR(call(m, "transform", &ya, NULL, NULL, NULL), GSB_ENOTFITTED,
              "This LabelEncoder instance is not fitted yet.");
    CHECK_OK(call(m, "fit", &ya, NULL, NULL, NULL));

    /* le = LabelEncoder().fit(np.array([3., 1, 2])); le.transform(np.array([4.0, 0.5, 4.0, 1e20])) */
    double u[4] = {4.0, 0.5, 4.0, 1e20};
    gsb_array ua = gsb_array_1d(u, GSB_F64, 4);
    CHECK_ERR(call(m, "transform", &ua, NULL, NULL, NULL), GSB_EINVAL,
              "y contains previously unseen labels: [np.float64(0.5), np.float64(4.0), "
              "np.float64(1e+20)]");

    /* le.inverse_transform(np.array([-1, 5, 5, 0, 2])) */
    int64_t c1[5] = {-1, 5, 5, 0, 2};
    gsb_array c1a = gsb_array_1d(c1, GSB_I64, 5);
    CHECK_ERR(call(m, "inverse_transform", &c1a, NULL, NULL, NULL), GSB_EINVAL,
              "y contains previously unseen labels: [-1  5]");

    /* le.inverse_transform(np.arange(3, 40)): numpy wraps the line at 75 columns */
    int64_t c2[37];
    for (int i = 0; i < 37; i++)
        c2[i] = 3 + i;
    gsb_array c2a = gsb_array_1d(c2, GSB_I64, 37);
    CHECK_ERR(call(m, "inverse_transform", &c2a, NULL, NULL, NULL), GSB_EINVAL,
              "y contains previously unseen labels: [ 3  4  5  6  7  8  9 10 11 12 13 14 15 "
              "16 17 18 19 20 21 22 23 24 25 26\n 27 28 29 30 31 32 33 34 35 36 37 38 39]");

    /* le.inverse_transform(np.arange(-5, 1200)): summarised past 1000 values */
    static int64_t c3[1205];
    for (int i = 0; i < 1205; i++)
        c3[i] = i - 5;
    gsb_array c3a = gsb_array_1d(c3, GSB_I64, 1205);
    CHECK_ERR(call(m, "inverse_transform", &c3a, NULL, NULL, NULL), GSB_EINVAL,
              "y contains previously unseen labels: [  -5   -4   -3 ... 1197 1198 1199]");

    /* a non-integral code: le.inverse_transform(np.array([3.5])) */
    double c4[2] = {3.5, 1.0};
    gsb_array c4a = gsb_array_1d(c4, GSB_F64, 2);
    CHECK_ERR(call(m, "inverse_transform", &c4a, NULL, NULL, NULL), GSB_EINVAL,
              "y contains previously unseen labels: [3.5]");
    /* a 2-D y is not labels */
    double y2[4] = {1, 2, 3, 4};
    gsb_array y2a = gsb_array_2d(y2, GSB_F64, 2, 2);
    CHECK_ERR(call(m, "fit", &y2a, NULL, NULL, NULL), GSB_EINVAL,
              "y should be a 1d array, got an array of shape (2, 2) instead.");
    gsb_model_free(m);
}

/* fitted scalers and encoders survive export/import and transform the same */
static void test_export_import(void)
{
    double X[18];
    known_X(X);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, 6, 3), ya = gsb_array_1d(X, GSB_F64, 18);
    static const char *ests[3] = {"StandardScaler", "MinMaxScaler", "LabelEncoder"};
    for (int e = 0; e < 3; e++) {
        gsb_array *in = e == 2 ? &ya : &Xa;
        gsb_model *m = make(ests[e], NULL), *m2 = NULL;
        CHECK_OK(call(m, "fit", in, NULL, NULL, NULL));
        void *blob = NULL;
        size_t len = 0;
        CHECK_OK(gsb_model_export(m, &blob, &len));
        CHECK_OK(gsb_model_import(S, blob, len, &m2));
        gsb_free(blob);
        gsb_result *r1 = NULL, *r2 = NULL;
        CHECK_OK(call(m, "transform", in, NULL, NULL, &r1));
        if (m2)
            CHECK_OK(call(m2, "transform", in, NULL, NULL, &r2));
        const gsb_array *a = r1 ? gsb_result_array(r1, 0) : NULL;
        const gsb_array *b = r2 ? gsb_result_array(r2, 0) : NULL;
        CHECK(a && b && a->dtype == b->dtype && a->shape[0] == b->shape[0]);
        for (int64_t i = 0; a && b && i < 18; i++)
            CHECK(testing_at(a, i) == testing_at(b, i));
        gsb_result_free(r1);
        gsb_result_free(r2);
        gsb_model_free(m);
        gsb_model_free(m2);
    }
}

/* ---- partial_fit -------------------------------------------------------------- */

/* partial_fit on rows [r0, r1) of X (n x 3) and of w (NULL: unweighted) */
static int partial(gsb_model *m, const double *X, const double *w, int r0, int r1)
{
    gsb_array xa = gsb_array_2d((void *)(X + r0 * 3), GSB_F64, r1 - r0, 3);
    gsb_array wa = gsb_array_1d((void *)(w ? w + r0 : NULL), GSB_F64, r1 - r0);
    return call(m, "partial_fit", &xa, NULL, w ? &wa : NULL, NULL);
}

/* attribute name (n values) of a and b agree to tol relative */
static void same_attr(gsb_model *a, gsb_model *b, const char *name, int64_t n, double tol)
{
    double va[8], vb[8];
    CHECK(testing_attr(a, name, va, 8, NULL) == n);
    CHECK(testing_attr(b, name, vb, 8, NULL) == n);
    CHECK(testing_relerr(va, vb, n) <= tol);
}

/* Batches merged by partial_fit give what one fit of all the rows gives
 * (scikit-learn's incremental mean and variance), weighted or not. */
static void test_standard_scaler_partial(void)
{
    enum { n = 90 };
    static double X[n * 3], w[n];
    testing_seed(11);
    for (int i = 0; i < n * 3; i++)
        X[i] = 100 + 3 * testing_normal() + (i % 3) * 1e3;
    for (int i = 0; i < n; i++)
        w[i] = testing_uniform() * 2;
    for (int weighted = 0; weighted < 2; weighted++) {
        const double *ww = weighted ? w : NULL;
        gsb_model *inc = make("StandardScaler", NULL), *all = make("StandardScaler", NULL);
        if (!inc || !all)
            return;
        CHECK_OK(partial(inc, X, ww, 0, 7));
        CHECK_OK(partial(inc, X, ww, 7, 50));
        CHECK_OK(partial(inc, X, ww, 50, n));
        CHECK_OK(partial(all, X, ww, 0, n));
        same_attr(inc, all, "mean_", 3, 1e-13);
        same_attr(inc, all, "var_", 3, 1e-9);
        same_attr(inc, all, "scale_", 3, 1e-9);
        same_attr(inc, all, "n_samples_seen_", 1, 1e-13);
        double seen = -1;
        CHECK(testing_attr(inc, "n_samples_seen_", &seen, 1, NULL) == 1);
        if (!weighted)
            CHECK(seen == n);
        /* a batch of another width is refused and the model keeps its state */
        gsb_array narrow = gsb_array_2d(X, GSB_F64, 4, 2);
        CHECK_ERR(call(inc, "partial_fit", &narrow, NULL, NULL, NULL), GSB_EINVAL,
                  "X has 2 features, but StandardScaler is expecting 3 features as input.");
        CHECK(gsb_model_is_fitted(inc));
        same_attr(inc, all, "mean_", 3, 1e-13);
        /* fit starts again */
        gsb_array first = gsb_array_2d(X, GSB_F64, 7, 3);
        CHECK_OK(call(inc, "fit", &first, NULL, NULL, NULL));
        CHECK(testing_attr(inc, "n_samples_seen_", &seen, 1, NULL) == 1 && seen == 7);
        gsb_model_free(inc);
        gsb_model_free(all);
    }
    /* neither mean nor std: rows are counted, as int64 */
    gsb_model *m = make("StandardScaler", "{\"with_mean\": false, \"with_std\": false}");
    if (m) {
        CHECK_OK(partial(m, X, NULL, 0, 5));
        CHECK_OK(partial(m, X, NULL, 5, 12));
        double one = 12;
        check_attr(m, "n_samples_seen_", GSB_I64, 0, &one, 1, 0);
        CHECK(!testing_has_attr(m, "mean_"));
        gsb_model_free(m);
    }
}

static void test_minmax_partial(void)
{
    enum { n = 40 };
    static double X[n * 3];
    testing_seed(12);
    for (int i = 0; i < n * 3; i++)
        X[i] = 10 * testing_normal();
    gsb_model *inc = make("MinMaxScaler", "{\"feature_range\": [-1, 2]}");
    gsb_model *all = make("MinMaxScaler", "{\"feature_range\": [-1, 2]}");
    if (!inc || !all)
        return;
    CHECK_OK(partial(inc, X, NULL, 0, 3));
    CHECK_OK(partial(inc, X, NULL, 3, 25));
    CHECK_OK(partial(inc, X, NULL, 25, n));
    gsb_array xa = gsb_array_2d(X, GSB_F64, n, 3);
    CHECK_OK(call(all, "fit", &xa, NULL, NULL, NULL));
    static const char *const names[] = {"data_min_", "data_max_", "data_range_", "scale_",
                                        "min_"};
    for (int k = 0; k < 5; k++)
        same_attr(inc, all, names[k], 3, 0);
    double seen = n;
    check_attr(inc, "n_samples_seen_", GSB_I64, 0, &seen, 1, 0);
    gsb_array narrow = gsb_array_2d(X, GSB_F64, 4, 2);
    CHECK_ERR(call(inc, "partial_fit", &narrow, NULL, NULL, NULL), GSB_EINVAL,
              "X has 2 features, but MinMaxScaler is expecting 3 features as input.");
    CHECK(gsb_model_is_fitted(inc));
    gsb_model_free(inc);
    gsb_model_free(all);
}

int main(void)
{
    if (testing_open(&S))
        return 1;
    RUN(test_standard_scaler_known);
    RUN(test_standard_scaler_weighted);
    RUN(test_standard_scaler_float32);
    RUN(test_standard_scaler_flags);
    RUN(test_standard_scaler_roundtrip);
    RUN(test_standard_scaler_errors);
    RUN(test_minmax_known);
    RUN(test_minmax_float32);
    RUN(test_minmax_roundtrip);
    RUN(test_minmax_bad_range);
    RUN(test_label_encoder_basic);
    RUN(test_label_encoder_random);
    RUN(test_label_encoder_errors);
    RUN(test_export_import);
    RUN(test_standard_scaler_partial);
    RUN(test_minmax_partial);
    return testing_close(S);
}
