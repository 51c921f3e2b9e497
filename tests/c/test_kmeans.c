/*
 * test_kmeans.c - KMeans against scikit-learn 1.9.1's answers for explicit
 * initial centres (where the result is deterministic), and against naive
 * references and invariants for k-means++ / 'random' on random data, in
 * float32 and float64; progress, cancellation and error messages.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_api_helpers.h"

/*
 * Known answers, produced by scikit-learn 1.9.1:
 *
 *   import numpy as np
 *   from sklearn.cluster import KMeans
 *   rs = np.random.RandomState(7)
 *   means = np.array([[0, 0, 0], [2.5, 1.5, 0], [1, 3, 1.5]])
 *   X = np.vstack([rs.randn(12, 3) * 0.9 + m for m in means]).round(2); rs.shuffle(X)
 *   init = X[[0, 1, 4]]
 *   W = (np.arange(36) % 3 + 1).astype(float)
 *   MAIN     = KMeans(3, init=init, n_init=1).fit(X)
 *   TOL      = KMeans(3, init=init, n_init=1, tol=0.03).fit(X)
 *   MAXIT    = KMeans(3, init=init, n_init=1, max_iter=2).fit(X)
 *   RELOC    = KMeans(3, init=np.array(X[[0, 1]].tolist() + [[10., 10., 10.]]),
 *                     n_init=1).fit(X)      # cluster 2 is empty at the first M-step
 *   F32      = KMeans(3, init=init.astype(np.float32), n_init=1).fit(X.astype(np.float32))
 *   WEIGHTED = KMeans(3, init=init, n_init=1).fit(X, sample_weight=W)
 *   XQ = [[0, 0, 0], [3, 3, 3], [2, .5, -1]]
 *   MAIN.predict(XQ), MAIN.transform(XQ), MAIN.score(XQ),
 *   MAIN.score(XQ, sample_weight=[1, 2, .5])
 * (each: cluster_centers_, labels_, inertia_, n_iter_)
 */
#define N 36
#define D 3
#define K 3
static const double X[N * D] = {
    0.48, -1.86, -0.6,  2.17,  -0.22, -0.09, 0.88,  1.84,  2.02,  0.83,  1.4,   2.09,
    -1.31, 0.5,  0.11,  1.43,  0.55,  -0.27, 2.17,  4.38,  2.1,   -0.0,  -1.58, 0.92,
    1.1,  4.29,  2.85,  1.8,   3.37,  0.67,  0.14,  -0.35, 1.83,  1.44,  2.85,  -0.25,
    0.25, -1.37, 1.49,  0.54,  -0.56, -0.15, 1.42,  2.82,  1.59,  -2.06, 0.94,  -0.37,
    0.45, -0.24, -0.22, 0.82,  2.47,  1.23,  -0.04, -1.31, -0.36, -0.67, 0.97,  -1.49,
    0.49, 4.28,  1.64,  1.52,  -0.42, 0.03,  2.38,  1.22,  -1.29, 2.95,  1.41,  1.07,
    1.35, 1.7,   1.94,  0.58,  2.22,  1.84,  3.03,  3.78,  1.19,  2.71,  1.59,  0.23,
    0.81, 3.3,   2.16,  1.49,  3.61,  1.49,  2.74,  1.03,  1.72,  3.01,  0.82,  -1.54,
    0.93, 2.39,  1.45,  0.37,  -0.71, 0.0,   4.03,  1.15,  -0.8,  2.2,   2.26,  -0.16};
static const double INIT[K * D] = {0.48, -1.86, -0.6, 2.17, -0.22, -0.09, -1.31, 0.5, 0.11};
static const double INIT_RELOC[K * D] = {0.48, -1.86, -0.6, 2.17, -0.22, -0.09, 10, 10, 10};

typedef struct known {
    int64_t n_iter;
    double inertia;
    int32_t labels[N];
    double centers[K * D];
} known;

static const known MAIN = {
    8, 72.732769761904748,
    {0, 1, 2, 2, 0, 1, 2, 0, 2, 2, 0, 1, 0, 0, 2, 0, 0, 2,
     0, 0, 2, 0, 1, 1, 2, 2, 2, 1, 2, 2, 1, 1, 2, 0, 1, 1},
    {-0.027499999999999858, -0.49916666666666676, 0.099166666666666736, 2.5060000000000002, 1.266,
     -0.13800000000000012, 1.2642857142857142, 2.9892857142857139, 1.7328571428571427}};
static const known TOL = {
    4, 76.079724298967875,
    {0, 0, 2, 2, 0, 0, 2, 0, 2, 2, 0, 1, 0, 0, 2, 0, 0, 2,
     0, 0, 2, 0, 1, 1, 2, 2, 2, 1, 2, 2, 1, 1, 2, 0, 1, 1},
    {0.23357142857142876, -0.40428571428571414, 0.059285714285714275, 2.721111111111111,
     1.7899999999999998, 0.018888888888888844, 1.1284615384615384, 2.9284615384615384,
     1.7746153846153843}};
static const known MAXIT = {
    2, 82.323531944444454,
    {0, 0, 2, 2, 0, 0, 2, 0, 2, 1, 0, 1, 0, 0, 2, 0, 0, 2,
     0, 0, 2, 0, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 0, 1, 1},
    {0.32499999999999996, -0.59583333333333299, 0.12250000000000016, 2.4908333333333332,
     2.0341666666666667, 0.22249999999999998, 0.71999999999999997, 2.6049999999999995,
     1.6608333333333332}};
/* RELOC ends where MAIN does, in as many iterations, after relocating */
static const known F32 = {
    8, 72.732772827148438,
    {0, 1, 2, 2, 0, 1, 2, 0, 2, 2, 0, 1, 0, 0, 2, 0, 0, 2,
     0, 0, 2, 0, 1, 1, 2, 2, 2, 1, 2, 2, 1, 1, 2, 0, 1, 1},
    {-0.027500033378601074, -0.49916660785675049, 0.099166572093963623, 2.5060000419616699,
     1.2660000324249268, -0.13799995183944702, 1.264285683631897, 2.989285945892334,
     1.7328572273254395}};
static const known WEIGHTED = {
    4, 140.83809768222508,
    {0, 0, 2, 2, 0, 0, 2, 0, 2, 2, 0, 1, 0, 0, 2, 0, 0, 2,
     0, 0, 2, 0, 1, 1, 2, 2, 2, 1, 2, 2, 1, 1, 2, 0, 1, 1},
    {0.32391304347826078, -0.2626086956521736, 0.052173913043478404, 2.591764705882353,
     1.6799999999999999, -0.1958823529411764, 1.2315624999999999, 3.0728125000000004,
     1.7243750000000002}};
static const double XQ[3 * D] = {0, 0, 0, 3, 3, 3, 2, 0.5, -1};
static const double XQ_W[3] = {1, 2, 0.5};
static const int32_t XQ_PREDICT[3] = {0, 2, 1};
static const double XQ_TRANSFORM[3 * K] = {
    0.5096642413284348, 2.8110204552795417, 3.67927184732667,  5.461204779065595, 3.619093256604477,
    2.149062562597744,  2.5134155324754577, 1.259299805447456, 3.769128153939094};
static const double XQ_SCORE = -6.464063536848073, XQ_SCORE_W = -10.289615434807258;

static gsb_session *S;

/* ---- helpers ------------------------------------------------------------- */

static gsb_model *make(const char *params) { return testing_model(S, "KMeans", params); }

/* fit(X, y=None, sample_weight, init); NULL pointers are "not given" */
static int fit4(gsb_model *m, const gsb_array *x, const gsb_array *w, const gsb_array *init)
{
    const gsb_array *in[4] = {x, NULL, w, init};
    return gsb_model_call(m, "fit", in, 4, NULL, NULL);
}

/* A fitted attribute as doubles (caller frees); *n its element count. */
static double *attr(gsb_model *m, const char *name, int64_t *n, gsb_dtype *dtype, int *ndim)
{
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_get_attr(m, name, &r));
    if (!r)
        return NULL;
    const gsb_array *a = gsb_result_array(r, 0);
    int64_t cnt = testing_numel(a);
    double *v = malloc((size_t)cnt * sizeof *v);
    testing_copy(a, v, cnt);
    if (n)
        *n = cnt;
    if (dtype)
        *dtype = a->dtype;
    if (ndim)
        *ndim = a->ndim;
    gsb_result_free(r);
    return v;
}

static double scalar_attr(gsb_model *m, const char *name)
{
    double *v = attr(m, name, NULL, NULL, NULL);
    double s = v ? v[0] : NAN;
    free(v);
    return s;
}

/* The fitted model matches a scikit-learn answer: same labels and n_iter_,
 * inertia within rel_tol and never above it (beyond rounding), centres
 * within ctol. */
static void check_known(gsb_model *m, const known *ref, double rel_tol, double ctol)
{
    int64_t n = 0;
    double *labels = attr(m, "labels_", &n, NULL, NULL);
    CHECK(n == N);
    int same = labels != NULL && n == N;
    for (int64_t i = 0; same && i < N; i++)
        same = labels[i] == ref->labels[i];
    CHECK(same);
    free(labels);
    double *centers = attr(m, "cluster_centers_", &n, NULL, NULL);
    CHECK(n == K * D);
    if (centers && n == K * D)
        CHECK(testing_relerr(centers, ref->centers, K * D) <= ctol);
    free(centers);
    double inertia = scalar_attr(m, "inertia_");
    CHECK(fabs(inertia - ref->inertia) <= rel_tol * ref->inertia);
    CHECK(inertia <= ref->inertia * (1 + 1e-12) || rel_tol > 1e-9);
    CHECK(scalar_attr(m, "n_iter_") == (double)ref->n_iter);
}

static void fit_known(const char *params, const double *init, const double *w,
                      const known *ref)
{
    gsb_model *m = make(params);
    gsb_array x = gsb_array_2d((void *)X, GSB_F64, N, D);
    gsb_array in = gsb_array_2d((void *)init, GSB_F64, K, D);
    gsb_array wa = gsb_array_1d((void *)w, GSB_F64, N);
    CHECK_OK(fit4(m, &x, w ? &wa : NULL, &in));
    check_known(m, ref, 1e-6, 1e-9);
    gsb_model_free(m);
}

/* ---- known answers ------------------------------------------------------- */

static void test_explicit_init_matches_sklearn(void)
{
    fit_known("{\"n_clusters\": 3}", INIT, NULL, &MAIN);
    /* the 'init' parameter and n_init are overridden by an explicit array */
    fit_known("{\"n_clusters\": 3, \"init\": \"random\", \"n_init\": 5, \"random_state\": 1}",
              INIT, NULL, &MAIN);
    /* elkan converges to the same answer */
    fit_known("{\"n_clusters\": 3, \"algorithm\": \"elkan\"}", INIT, NULL, &MAIN);
}

static void test_tol_is_scaled_by_variance(void)
{
    /* 0.03 * mean variance stops at iteration 4, before the labels settle;
     * the final E-step then relabels against the final centres */
    fit_known("{\"n_clusters\": 3, \"tol\": 0.03}", INIT, NULL, &TOL);
}

/* stopped by max_iter: n_iter_ == 2 and labels_ still match the final centres */
static void test_max_iter(void)
{
    fit_known("{\"n_clusters\": 3, \"max_iter\": 2}", INIT, NULL, &MAXIT);
}

/* the centre at (10, 10, 10) gets no point and must move to the farthest one */
static void test_empty_cluster_relocation(void)
{
    fit_known("{\"n_clusters\": 3}", INIT_RELOC, NULL, &MAIN);
}

/* Fit 1-D or 2-D data from an explicit init and compare with scikit-learn. */
static void fit_small(const double *x, int n, int d, const double *init, int k, int max_iter,
                      const double *centers, const int32_t *labels, double inertia,
                      int64_t n_iter)
{
    char params[96];
    snprintf(params, sizeof params, "{\"n_clusters\": %d, \"max_iter\": %d}", k, max_iter);
    gsb_model *m = make(params);
    gsb_array xa = gsb_array_2d((void *)x, GSB_F64, n, d);
    gsb_array ia = gsb_array_2d((void *)init, GSB_F64, k, d);
    CHECK_OK(fit4(m, &xa, NULL, &ia));
    int64_t cnt = 0;
    double *c = attr(m, "cluster_centers_", &cnt, NULL, NULL);
    for (int64_t i = 0; c && i < cnt && cnt == k * d; i++)
        CHECK_CLOSE(c[i], centers[i], 1e-12);
    free(c);
    double *l = attr(m, "labels_", &cnt, NULL, NULL);
    for (int64_t i = 0; l && i < cnt && cnt == n; i++)
        CHECK(l[i] == labels[i]);
    free(l);
    CHECK_CLOSE(scalar_attr(m, "inertia_"), inertia, 1e-12);
    CHECK(scalar_attr(m, "n_iter_") == n_iter);
    gsb_model_free(m);
}

/*
 * Corner cases of scikit-learn's M-step, known answers from 1.9.1:
 *   X1 = [[-.5], [-.3], [-.1], [0], [.1], [.2], [.4], [.5], [10]]
 *   KMeans(3, init=[[0], [18], [1000]], n_init=1, max_iter=1).fit(X1)
 *   KMeans(3, init=[[18], [0], [1000]], n_init=1, max_iter=1).fit(X1)
 *   KMeans(3, init=[[18], [0], [1000]], n_init=1).fit(X1)
 *   X2 = np.array([[0., 1], [2, 0], [5, 5]])[[0, 1, 2, 0, 1, 2, 0]]
 *   KMeans(5, init=X2[[0, 3, 1, 2, 6]], n_init=1).fit(X2)
 * In X1 the point 10 is alone in cluster "18" and is the farthest from its
 * centre, so relocating it into the empty cluster "1000" empties its donor,
 * which then goes to the heaviest cluster: its mean when that cluster comes
 * first, its weighted sum (scikit-learn's in-place order) when it comes
 * later.  In X2 every point sits on its centre, so nothing is relocated and
 * the two empty clusters join the heaviest one.
 */
static void test_empty_cluster_corner_cases(void)
{
    static const double x1[9] = {-0.5, -0.3, -0.1, 0, 0.1, 0.2, 0.4, 0.5, 10};
    static const double init_a[3] = {0, 18, 1000}, init_b[3] = {18, 0, 1000};
    static const double ca1[3] = {0.037500000000000089, 0.037500000000000089, 10};
    static const int32_t la1[9] = {0, 0, 0, 0, 0, 0, 0, 0, 2};
    fit_small(x1, 9, 1, init_a, 3, 1, ca1, la1, 0.79875000000000007, 1);
    static const double cb1[3] = {-7.7111111111111112, 0.037500000000000089, 10};
    static const int32_t lb1[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
    fit_small(x1, 9, 1, init_b, 3, 1, cb1, lb1, 0.79875000000000007, 1);
    static const double cb[3] = {-0.40000000000000013, 0.18333333333333335, 10};
    static const int32_t lb[9] = {0, 0, 1, 1, 1, 1, 1, 1, 2};
    fit_small(x1, 9, 1, init_b, 3, 300, cb, lb, 0.28833333333333333, 4);

    static const double x2[14] = {0, 1, 2, 0, 5, 5, 0, 1, 2, 0, 5, 5, 0, 1};
    static const double init2[10] = {0, 1, 0, 1, 2, 0, 5, 5, 0, 1};
    static const double c2[10] = {0, 1, 0, 1, 2, 0, 5, 5, 0, 1};
    static const int32_t l2[7] = {0, 2, 3, 0, 2, 3, 0};
    fit_small(x2, 7, 2, init2, 5, 300, c2, l2, 0.0, 1);
}

static void test_float32(void)
{
    float xf[N * D], initf[K * D];
    testing_to_f32(X, xf, N * D);
    testing_to_f32(INIT, initf, K * D);
    gsb_model *m = make("{\"n_clusters\": 3}");
    gsb_array x = gsb_array_2d(xf, GSB_F32, N, D);
    gsb_array in = gsb_array_2d(initf, GSB_F32, K, D);
    CHECK_OK(fit4(m, &x, NULL, &in));
    check_known(m, &F32, 1e-5, 1e-5);
    gsb_dtype dt = 0;
    int ndim = 0;
    free(attr(m, "cluster_centers_", NULL, &dt, &ndim));
    CHECK(dt == GSB_F32 && ndim == 2);

    /* float32 results of the methods too */
    const gsb_array *q[1] = {&x};
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_call(m, "transform", q, 1, NULL, &r));
    const gsb_array *t = gsb_result_get(r, "X");
    CHECK(t && t->dtype == GSB_F32 && t->shape[0] == N && t->shape[1] == K);
    gsb_result_free(r);
    gsb_model_free(m);
}

static void test_attribute_types(void)
{
    gsb_model *m = make("{\"n_clusters\": 3}");
    gsb_array x = gsb_array_2d((void *)X, GSB_F64, N, D);
    gsb_array in = gsb_array_2d((void *)INIT, GSB_F64, K, D);
    CHECK_OK(fit4(m, &x, NULL, &in));
    gsb_dtype dt = 0;
    int ndim = -1;
    int64_t n = 0;
    free(attr(m, "labels_", &n, &dt, &ndim));
    CHECK(dt == GSB_I32 && ndim == 1 && n == N);
    free(attr(m, "inertia_", &n, &dt, &ndim));
    CHECK(dt == GSB_F64 && ndim == 0);
    free(attr(m, "n_iter_", &n, &dt, &ndim));
    CHECK(dt == GSB_I64 && ndim == 0);
    free(attr(m, "cluster_centers_", &n, &dt, &ndim));
    CHECK(dt == GSB_F64 && ndim == 2 && n == K * D);
    CHECK(scalar_attr(m, "n_features_in_") == D);
    gsb_model_free(m);
}

static void test_methods_match_sklearn(void)
{
    gsb_model *m = make("{\"n_clusters\": 3}");
    gsb_array x = gsb_array_2d((void *)X, GSB_F64, N, D);
    gsb_array in = gsb_array_2d((void *)INIT, GSB_F64, K, D);
    CHECK_OK(fit4(m, &x, NULL, &in));
    gsb_array q = gsb_array_2d((void *)XQ, GSB_F64, 3, D);
    gsb_array qw = gsb_array_1d((void *)XQ_W, GSB_F64, 3);
    const gsb_array *q1[1] = {&q};
    const gsb_array *q3[3] = {&q, NULL, &qw};
    gsb_result *r = NULL;

    CHECK_OK(gsb_model_call(m, "predict", q1, 1, NULL, &r));
    const gsb_array *a = gsb_result_get(r, "labels");
    CHECK(a && a->dtype == GSB_I32 && a->ndim == 1 && a->shape[0] == 3);
    for (int i = 0; a && i < 3; i++)
        CHECK(testing_at(a, i) == XQ_PREDICT[i]);
    gsb_result_free(r);

    CHECK_OK(gsb_model_call(m, "transform", q1, 1, NULL, &r));
    a = gsb_result_get(r, "X");
    CHECK(a && a->ndim == 2 && a->shape[0] == 3 && a->shape[1] == K);
    for (int i = 0; a && i < 3 * K; i++)
        CHECK_CLOSE(testing_at(a, i), XQ_TRANSFORM[i], 1e-9);
    gsb_result_free(r);

    CHECK_OK(gsb_model_call(m, "score", q1, 1, NULL, &r));
    a = gsb_result_get(r, "score");
    CHECK(a && a->ndim == 0);
    if (a)
        CHECK_CLOSE(testing_at(a, 0), XQ_SCORE, 1e-9);
    gsb_result_free(r);

    CHECK_OK(gsb_model_call(m, "score", q3, 3, NULL, &r));
    a = gsb_result_get(r, "score");
    if (a)
        CHECK_CLOSE(testing_at(a, 0), XQ_SCORE_W, 1e-9);
    gsb_result_free(r);

    /* score on the training data is -inertia_ */
    const gsb_array *x1[1] = {&x};
    CHECK_OK(gsb_model_call(m, "score", x1, 1, NULL, &r));
    a = gsb_result_get(r, "score");
    if (a)
        CHECK_CLOSE(testing_at(a, 0), -MAIN.inertia, 1e-9);
    gsb_result_free(r);
    gsb_model_free(m);
}

static void test_fit_predict_and_fit_transform(void)
{
    gsb_array x = gsb_array_2d((void *)X, GSB_F64, N, D);
    gsb_array in = gsb_array_2d((void *)INIT, GSB_F64, K, D);
    const gsb_array *args[4] = {&x, NULL, NULL, &in};
    gsb_model *m = make("{\"n_clusters\": 3}");
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_call(m, "fit_predict", args, 4, NULL, &r));
    const gsb_array *a = gsb_result_get(r, "labels");
    CHECK(a && a->dtype == GSB_I32 && a->shape[0] == N);
    for (int i = 0; a && i < N; i++)
        CHECK(testing_at(a, i) == MAIN.labels[i]);
    gsb_result_free(r);
    CHECK(gsb_model_is_fitted(m));
    CHECK(scalar_attr(m, "n_iter_") == MAIN.n_iter);

    CHECK_OK(gsb_model_call(m, "fit_transform", args, 4, NULL, &r));
    a = gsb_result_get(r, "X");
    CHECK(a && a->shape[0] == N && a->shape[1] == K);
    for (int i = 0; a && i < N; i++)
        for (int j = 0; j < K; j++) {
            double s = 0;
            for (int f = 0; f < D; f++) {
                double diff = X[i * D + f] - MAIN.centers[j * D + f];
                s += diff * diff;
            }
            CHECK_CLOSE(testing_at(a, i * K + j), sqrt(s), 1e-9);
        }
    gsb_result_free(r);
    gsb_model_free(m);
}

/* A float64 model labels float32 data; an exported model predicts the same. */
static void test_dtype_mix_and_round_trip(void)
{
    gsb_model *m = make("{\"n_clusters\": 3}");
    gsb_array x = gsb_array_2d((void *)X, GSB_F64, N, D);
    gsb_array in = gsb_array_2d((void *)INIT, GSB_F64, K, D);
    CHECK_OK(fit4(m, &x, NULL, &in));
    float xf[N * D];
    testing_to_f32(X, xf, N * D);
    gsb_array x32 = gsb_array_2d(xf, GSB_F32, N, D);
    const gsb_array *q[1] = {&x32};
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_call(m, "predict", q, 1, NULL, &r));
    const gsb_array *a = gsb_result_get(r, "labels");
    for (int i = 0; a && i < N; i++)
        CHECK(testing_at(a, i) == MAIN.labels[i]);
    gsb_result_free(r);

    void *blob = NULL;
    size_t len = 0;
    gsb_model *back = NULL;
    CHECK_OK(gsb_model_export(m, &blob, &len));
    CHECK_OK(gsb_model_import(S, blob, len, &back));
    gsb_free(blob);
    if (back) {
        const gsb_array *q64[1] = {&x};
        CHECK_OK(gsb_model_call(back, "predict", q64, 1, NULL, &r));
        a = gsb_result_get(r, "labels");
        for (int i = 0; a && i < N; i++)
            CHECK(testing_at(a, i) == MAIN.labels[i]);
        gsb_result_free(r);
        CHECK(scalar_attr(back, "inertia_") == scalar_attr(m, "inertia_"));
        gsb_model_free(back);
    }
    gsb_model_free(m);
}

/* ---- sample weights ------------------------------------------------------ */

static void test_sample_weight(void)
{
    double w[N];
    for (int i = 0; i < N; i++)
        w[i] = i % 3 + 1;
    fit_known("{\"n_clusters\": 3}", INIT, w, &WEIGHTED);

    /* integer weights act as repeated rows */
    double rep[2 * N * D];
    int nrep = 0;
    for (int i = 0; i < N; i++)
        for (int r = 0; r < (int)w[i]; r++, nrep++)
            memcpy(rep + nrep * D, X + i * D, D * sizeof(double));
    gsb_model *m = make("{\"n_clusters\": 3}");
    gsb_array xr = gsb_array_2d(rep, GSB_F64, nrep, D);
    gsb_array in = gsb_array_2d((void *)INIT, GSB_F64, K, D);
    CHECK_OK(fit4(m, &xr, NULL, &in));
    double *c = attr(m, "cluster_centers_", NULL, NULL, NULL);
    if (c)
        CHECK(testing_relerr(c, WEIGHTED.centers, K * D) <= 1e-9);
    free(c);
    CHECK_CLOSE(scalar_attr(m, "inertia_"), WEIGHTED.inertia, 1e-9);
    gsb_model_free(m);
}

/* ---- random data: k-means++ / 'random' vs naive references -------------- */

/* Well separated blobs: n rows around k centres at distance ~20. */
static void make_blobs(double *x, int *truth, int n, int d, int k, double *means)
{
    for (int j = 0; j < k * d; j++)
        means[j] = 20.0 * testing_uniform() - 10.0;
    for (int j = 0; j < k; j++) /* push the means apart */
        means[j * d] = 25.0 * j;
    for (int i = 0; i < n; i++) {
        truth[i] = i % k;
        for (int f = 0; f < d; f++)
            x[i * d + f] = means[truth[i] * d + f] + 0.5 * testing_normal();
    }
}

/* labels_ recover the true partition (up to a relabelling) */
static int same_partition(const double *labels, const int *truth, int n, int k)
{
    int map[16];
    for (int j = 0; j < k; j++)
        map[j] = -1;
    for (int i = 0; i < n; i++) {
        int t = truth[i], l = (int)labels[i];
        if (l < 0 || l >= k)
            return 0;
        if (map[t] == -1)
            map[t] = l;
        else if (map[t] != l)
            return 0;
    }
    for (int a = 0; a < k; a++)
        for (int b = a + 1; b < k; b++)
            if (map[a] == map[b])
                return 0;
    return 1;
}

static void blobs_case(const char *params, gsb_dtype dt)
{
    enum { n = 400, d = 5, k = 4 };
    double x[n * d], means[k * d];
    float xf[n * d];
    int truth[n];
    make_blobs(x, truth, n, d, k, means);
    testing_to_f32(x, xf, n * d);
    gsb_model *m = make(params);
    gsb_array xa = gsb_array_2d(dt == GSB_F32 ? (void *)xf : (void *)x, dt, n, d);
    CHECK_OK(gsb_model_fit(m, &xa, NULL));
    double *labels = attr(m, "labels_", NULL, NULL, NULL);
    double *c = attr(m, "cluster_centers_", NULL, NULL, NULL);
    if (labels && c) {
        CHECK(same_partition(labels, truth, n, k));
        /* each centre is near its true mean and is the mean of its points */
        for (int j = 0; j < k; j++) {
            int t = -1;
            for (int i = 0; i < n && t < 0; i++)
                if ((int)labels[i] == j)
                    t = truth[i];
            double err = 0;
            for (int f = 0; f < d && t >= 0; f++)
                err = fmax(err, fabs(c[j * d + f] - means[t * d + f]));
            CHECK(t >= 0 && err < 0.3);
        }
    }
    free(labels);
    free(c);
    gsb_model_free(m);
}

static void test_kmeanspp_finds_blobs(void)
{
    testing_seed(11);
    blobs_case("{\"n_clusters\": 4, \"random_state\": 0}", GSB_F64);
    blobs_case("{\"n_clusters\": 4, \"random_state\": 3}", GSB_F32);
    blobs_case("{\"n_clusters\": 4, \"init\": \"random\", \"random_state\": 5}", GSB_F64);
    blobs_case("{\"n_clusters\": 4}", GSB_F64); /* random_state None */
}

/*
 * With tol=0 a run stops only when the labels repeat, so the result is a
 * fixed point: every label is the nearest centre, every non-empty centre is
 * the weighted mean of its points, and inertia_ is their weighted sum.
 */
static void check_fixed_point(const double *x, const double *w, int n, int d, int k,
                              gsb_model *m, double tol)
{
    double *labels = attr(m, "labels_", NULL, NULL, NULL);
    double *c = attr(m, "cluster_centers_", NULL, NULL, NULL);
    if (!labels || !c) {
        free(labels);
        free(c);
        return;
    }
    double inertia = 0;
    int wrong_label = 0;
    for (int i = 0; i < n; i++) {
        double best = INFINITY, own = 0;
        for (int j = 0; j < k; j++) {
            double s = 0;
            for (int f = 0; f < d; f++) {
                double diff = x[i * d + f] - c[j * d + f];
                s += diff * diff;
            }
            best = fmin(best, s);
            if (j == (int)labels[i])
                own = s;
        }
        wrong_label += own > best * (1 + tol) + tol;
        inertia += (w ? w[i] : 1.0) * own;
    }
    CHECK(wrong_label == 0);
    CHECK_CLOSE(scalar_attr(m, "inertia_"), inertia, tol);
    double *sum = calloc((size_t)(k * d), sizeof(double)), *cnt = calloc((size_t)k, sizeof(double));
    for (int i = 0; i < n; i++) {
        int l = (int)labels[i];
        cnt[l] += w ? w[i] : 1.0;
        for (int f = 0; f < d; f++)
            sum[l * d + f] += (w ? w[i] : 1.0) * x[i * d + f];
    }
    for (int j = 0; j < k; j++)
        for (int f = 0; f < d && cnt[j] > 0; f++)
            CHECK_CLOSE(c[j * d + f], sum[j * d + f] / cnt[j], tol);
    free(sum);
    free(cnt);
    free(labels);
    free(c);
}

static void test_random_data_fixed_point(void)
{
    enum { n = 1500, d = 6, k = 9 };
    double *x = malloc(n * d * sizeof(double)), *w = malloc(n * sizeof(double));
    float *xf = malloc(n * d * sizeof(float));
    testing_seed(21);
    testing_fill_normal(x, n * d);
    for (int i = 0; i < n; i++)
        w[i] = testing_uniform() < 0.1 ? 0.0 : 0.5 + 2 * testing_uniform();
    testing_to_f32(x, xf, n * d);
    gsb_array xa = gsb_array_2d(x, GSB_F64, n, d), xfa = gsb_array_2d(xf, GSB_F32, n, d);
    gsb_array wa = gsb_array_1d(w, GSB_F64, n);

    gsb_model *m = make("{\"n_clusters\": 9, \"tol\": 0, \"random_state\": 4}");
    CHECK_OK(gsb_model_fit(m, &xa, NULL));
    check_fixed_point(x, NULL, n, d, k, m, 1e-9);
    CHECK(scalar_attr(m, "n_iter_") < 300);
    gsb_model_free(m);

    m = make("{\"n_clusters\": 9, \"tol\": 0, \"random_state\": 4, \"init\": \"random\"}");
    CHECK_OK(fit4(m, &xa, &wa, NULL));
    check_fixed_point(x, w, n, d, k, m, 1e-9);
    gsb_model_free(m);

    m = make("{\"n_clusters\": 9, \"tol\": 0, \"random_state\": 8}");
    CHECK_OK(fit4(m, &xfa, &wa, NULL));
    check_fixed_point(x, w, n, d, k, m, 2e-4);
    gsb_model_free(m);
    free(x);
    free(w);
    free(xf);
}

static void test_random_state_reproducible(void)
{
    enum { n = 300, d = 4, k = 6 };
    double x[n * d];
    testing_seed(5);
    testing_fill_normal(x, n * d);
    gsb_array xa = gsb_array_2d(x, GSB_F64, n, d);
    const char *params[] = {"{\"n_clusters\": 6, \"random_state\": 42}",
                            "{\"n_clusters\": 6, \"random_state\": 42, \"init\": \"random\"}"};
    for (int p = 0; p < 2; p++) {
        double *c[2] = {NULL, NULL};
        for (int rep = 0; rep < 2; rep++) {
            gsb_model *m = make(params[p]);
            CHECK_OK(gsb_model_fit(m, &xa, NULL));
            c[rep] = attr(m, "cluster_centers_", NULL, NULL, NULL);
            gsb_model_free(m);
        }
        CHECK(c[0] && c[1] && memcmp(c[0], c[1], k * d * sizeof(double)) == 0);
        free(c[0]);
        free(c[1]);
    }
}

/* The first of n_init runs uses the same draws as a single run, and the best
 * run is kept, so more runs never give a higher inertia. */
static void test_n_init_keeps_best(void)
{
    enum { n = 400, d = 3, k = 12 };
    double x[n * d];
    testing_seed(9);
    testing_fill_normal(x, n * d);
    gsb_array xa = gsb_array_2d(x, GSB_F64, n, d);
    gsb_model *one = make("{\"n_clusters\": 12, \"init\": \"random\", \"n_init\": 1, "
                          "\"random_state\": 3}");
    gsb_model *ten = make("{\"n_clusters\": 12, \"init\": \"random\", \"random_state\": 3}");
    CHECK_OK(gsb_model_fit(one, &xa, NULL));
    CHECK_OK(gsb_model_fit(ten, &xa, NULL)); /* n_init='auto' is 10 for 'random' */
    double i1 = scalar_attr(one, "inertia_"), i10 = scalar_attr(ten, "inertia_");
    CHECK(i10 <= i1);
    check_fixed_point(x, NULL, n, d, k, ten, 1e-6);
    gsb_model_free(one);
    gsb_model_free(ten);
}

/* ---- progress and cancellation ------------------------------------------- */

typedef struct progress_log {
    int iterations, inits, cancel_at, monotone;
    int64_t last_it;
    double last_loss;
} progress_log;

static int on_progress(void *data, const char *stage, int64_t it, double loss)
{
    progress_log *p = data;
    if (strcmp(stage, "iteration") == 0) {
        if (it != p->iterations)
            p->monotone = 0;
        if (p->iterations > 0 && loss > p->last_loss * (1 + 1e-12))
            p->monotone = 0;
        p->iterations++;
        p->last_loss = loss;
    } else {
        p->inits++;
    }
    return p->cancel_at >= 0 && p->iterations + p->inits > p->cancel_at;
}

static void test_progress_and_cancel(void)
{
    gsb_array x = gsb_array_2d((void *)X, GSB_F64, N, D);
    gsb_array in = gsb_array_2d((void *)INIT, GSB_F64, K, D);
    gsb_model *m = make("{\"n_clusters\": 3}");
    progress_log log = {0, 0, -1, 1, 0, 0};
    gsb_model_set_progress(m, on_progress, &log);
    CHECK_OK(fit4(m, &x, NULL, &in));
    CHECK(log.iterations == MAIN.n_iter); /* once per iteration, numbered from 0 */
    CHECK(log.monotone);                  /* Lloyd never increases the inertia */
    CHECK(log.inits == 0);
    CHECK(gsb_model_is_fitted(m));

    progress_log stop = {0, 0, 2, 1, 0, 0};
    gsb_model_set_progress(m, on_progress, &stop);
    CHECK_ERR(fit4(m, &x, NULL, &in), GSB_ECANCELLED, "cancelled");
    CHECK(stop.iterations == 3);
    CHECK(!gsb_model_is_fitted(m));
    gsb_result *r = NULL;
    CHECK_ERR(gsb_model_get_attr(m, "cluster_centers_", &r), GSB_ENOTFITTED, "not fitted");
    gsb_result_free(r);

    /* k-means++ reports (and can be stopped during) its initialisation */
    gsb_model *pp = make("{\"n_clusters\": 3, \"random_state\": 0}");
    progress_log init_stop = {0, 0, 0, 1, 0, 0};
    gsb_model_set_progress(pp, on_progress, &init_stop);
    CHECK_ERR(gsb_model_fit(pp, &x, NULL), GSB_ECANCELLED, "cancelled");
    CHECK(init_stop.inits == 1 && init_stop.iterations == 0);
    CHECK(!gsb_model_is_fitted(pp));
    gsb_model_free(pp);
    gsb_model_free(m);
}

/* ---- errors -------------------------------------------------------------- */

static void test_errors(void)
{
    gsb_array x = gsb_array_2d((void *)X, GSB_F64, N, D);
    gsb_model *m = make("{\"n_clusters\": 40}");
    CHECK_ERR(gsb_model_fit(m, &x, NULL), GSB_EINVAL, "n_samples=36 should be >= n_clusters=40.");
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_free(m);

    m = make("{\"n_clusters\": 3}");
    gsb_array bad_rows = gsb_array_2d((void *)INIT, GSB_F64, 2, D);
    CHECK_ERR(fit4(m, &x, NULL, &bad_rows), GSB_EINVAL,
              "The shape of the initial centers (2, 3) does not match the number of clusters 3.");
    double wide[K * 4] = {0};
    gsb_array bad_cols = gsb_array_2d(wide, GSB_F64, K, 4);
    CHECK_ERR(fit4(m, &x, NULL, &bad_cols), GSB_EINVAL,
              "The shape of the initial centers (3, 4) does not match the number of features "
              "of the data 3.");
    double zeros[N] = {0};
    gsb_array zw = gsb_array_1d(zeros, GSB_F64, N);
    CHECK_ERR(fit4(m, &x, &zw, NULL), GSB_EINVAL,
              "Sample weights must contain at least one non-zero number.");

    /* not fitted yet */
    const gsb_array *x1[1] = {&x};
    CHECK_ERR(gsb_model_call(m, "predict", x1, 1, NULL, NULL), GSB_ENOTFITTED, "not fitted");
    gsb_model_free(m);

    /* 'random' needs n_clusters rows of non-zero weight */
    double few[N] = {0};
    few[3] = few[7] = 1;
    m = make("{\"n_clusters\": 3, \"init\": \"random\", \"random_state\": 0}");
    gsb_array fw = gsb_array_1d(few, GSB_F64, N);
    CHECK_ERR(fit4(m, &x, &fw, NULL), GSB_EINVAL, "Fewer non-zero entries in p than size");
    gsb_model_free(m);
    /* k-means++ accepts it (scikit-learn does too): the rest repeat a drawn row */
    m = make("{\"n_clusters\": 3, \"random_state\": 0}");
    CHECK_OK(fit4(m, &x, &fw, NULL));
    CHECK_CLOSE(scalar_attr(m, "inertia_"), 0.0, 1e-12);

    /* wrong feature count after fit */
    double q[4] = {0};
    gsb_array qa = gsb_array_2d(q, GSB_F64, 1, 4);
    const gsb_array *q1[1] = {&qa};
    CHECK_ERR(gsb_model_call(m, "predict", q1, 1, NULL, NULL), GSB_EINVAL,
              "X has 4 features, but KMeans is expecting 3 features as input.");
    gsb_model_free(m);

    const char *bad[][2] = {
        {"{\"n_clusters\": 0}", "The 'n_clusters' parameter of KMeans must be an int"},
        {"{\"init\": \"foo\"}", "The 'init' parameter of KMeans must be"},
        {"{\"n_init\": 0}", "The 'n_init' parameter of KMeans must be"},
        {"{\"n_init\": \"x\"}", "The 'n_init' parameter of KMeans must be"},
        {"{\"max_iter\": 0}", "The 'max_iter' parameter of KMeans must be"},
        {"{\"tol\": -1}", "The 'tol' parameter of KMeans must be"},
        {"{\"algorithm\": \"full\"}", "The 'algorithm' parameter of KMeans must be"},
        {"{\"verbose\": -1}", "The 'verbose' parameter of KMeans must be"},
        {"{\"random_state\": -1}", "The 'random_state' parameter of KMeans must be"},
        {"{\"copy_x\": 1}", "The 'copy_x' parameter of KMeans must be"},
        {"{\"n_jobs\": 1}", "Invalid parameter 'n_jobs' for estimator KMeans()"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gsb_model *b = NULL;
        CHECK_ERR(gsb_model_create(S, "KMeans", bad[i][0], &b), GSB_EPARAM, bad[i][1]);
        gsb_model_free(b);
    }
}

static void test_defaults(void)
{
    gsb_model *m = make(NULL);
    char *json = NULL;
    CHECK_OK(gsb_model_get_params(m, &json));
    const char *want[] = {"\"n_clusters\":8", "\"init\":\"k-means++\"", "\"n_init\":\"auto\"",
                          "\"max_iter\":300", "\"random_state\":null", "\"copy_x\":true",
                          "\"algorithm\":\"lloyd\"", "\"verbose\":0"};
    for (size_t i = 0; json && i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(json, want[i]) != NULL);
    const char *tol = json ? strstr(json, "\"tol\":") : NULL;
    CHECK(tol && strtod(tol + 6, NULL) == 1e-4);
    gsb_free(json);
    gsb_model_free(m);
}

/* scikit-learn's two KMeans warnings: fewer distinct clusters than asked
 * (duplicate points), and an explicit init with n_init other than 1. */
static void test_warnings(void)
{
    static const double dup[8 * 2] = {0, 0, 0, 0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 5, 5, 5};
    gsb_array x = gsb_array_2d((void *)dup, GSB_F64, 8, 2);
    gsb_model *m = make("{\"n_clusters\": 3, \"random_state\": 0}");
    if (m) {
        CHECK_OK(fit4(m, &x, NULL, NULL));
        CHECK(strcmp(gsb_warnings(), "[{\"category\":\"ConvergenceWarning\",\"message\":"
                                     "\"Number of distinct clusters (2) found smaller than "
                                     "n_clusters (3). Possibly due to duplicate points in "
                                     "X.\"}]") == 0);
        gsb_model_free(m);
    }
    gsb_array xa = gsb_array_2d((void *)X, GSB_F64, N, D), ia = gsb_array_2d((void *)INIT,
                                                                             GSB_F64, K, D);
    m = make("{\"n_clusters\": 3, \"n_init\": 4}");
    if (m) {
        CHECK_OK(fit4(m, &xa, NULL, &ia));
        CHECK(strcmp(gsb_warnings(), "[{\"category\":\"RuntimeWarning\",\"message\":"
                                     "\"Explicit initial center position passed: performing "
                                     "only one init in KMeans instead of n_init=4.\"}]") == 0);
        CHECK_OK(gsb_model_set_params(m, "{\"n_init\": \"auto\"}"));
        CHECK_OK(fit4(m, &xa, NULL, &ia));
        CHECK(strcmp(gsb_warnings(), "[]") == 0);
        gsb_model_free(m);
    }
}

int main(void)
{
    if (testing_open(&S))
        return 1;
    RUN(test_explicit_init_matches_sklearn);
    RUN(test_tol_is_scaled_by_variance);
    RUN(test_max_iter);
    RUN(test_empty_cluster_relocation);
    RUN(test_empty_cluster_corner_cases);
    RUN(test_float32);
    RUN(test_attribute_types);
    RUN(test_methods_match_sklearn);
    RUN(test_fit_predict_and_fit_transform);
    RUN(test_dtype_mix_and_round_trip);
    RUN(test_sample_weight);
    RUN(test_kmeanspp_finds_blobs);
    RUN(test_random_data_fixed_point);
    RUN(test_random_state_reproducible);
    RUN(test_n_init_keeps_best);
    RUN(test_progress_and_cancel);
    RUN(test_errors);
    RUN(test_defaults);
    RUN(test_warnings);
    return testing_close(S);
}
