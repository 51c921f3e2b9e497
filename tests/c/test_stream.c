/*
 * test_stream.c - streamed (out-of-core) fits against in-memory ones.
 *
 * A session with memory_cap set to a quarter of X's bytes makes every
 * streaming estimator read X in batches (estimators/common/stream.h); its
 * fitted attributes must equal those of a session without a cap: 1e-5
 * relative for the solvers that change route (normal equations, covariance
 * spectra; the data here is well conditioned, so 1e-8 holds and is what is
 * checked), identical labels for KMeans from the same initial centres.
 * Without a GPU both sessions run on the CPU backend, which is how CI tests
 * the batching; with GSB_DEVICE=cuda both run on the GPU and the batches go
 * through the CUDA staging ring.  Also: the backend's streaming ops' CPU
 * twins, the cap's parsing, and the clear refusal of an X too large for an
 * estimator that cannot stream.
 */
#include "backend/backend.h"
#include "core/tensor.h"
#include "test_api_helpers.h"

static gsb_session *S; /* no cap */

/* A session whose memory cap is `bytes` (device as GSB_DEVICE says). */
static gsb_session *capped(size_t bytes)
{
    char url[96];
    snprintf(url, sizeof url, "local?memory_cap=%zu", bytes);
    gsb_session *s = NULL;
    CHECK_OK(gsb_open(url, &s));
    return s;
}

/* Attribute `name` of a and b agree to rel (relative to b's largest value). */
static void same_attr(gsb_model *a, gsb_model *b, const char *name, double rel)
{
    static double va[1 << 16], vb[1 << 16];
    gsb_array ia, ib;
    int64_t na = testing_attr(a, name, va, 1 << 16, &ia);
    int64_t nb = testing_attr(b, name, vb, 1 << 16, &ib);
    CHECK(na == nb && na > 0);
    CHECK(ia.dtype == ib.dtype && ia.ndim == ib.ndim);
    if (na != nb || na <= 0)
        return;
    double e = testing_relerr(va, vb, na);
    if (!(e <= rel)) {
        fprintf(stderr, "  %s: relative error %.3g > %.3g\n", name, e, rel);
        CHECK(e <= rel);
    }
}

/* Result `res` of method(X) on a and b agree to rel. */
static void same_call(gsb_model *a, gsb_model *b, const char *method, const gsb_array *X,
                      const char *res, double rel)
{
    int64_t cap = 1 << 18;
    double *va = malloc((size_t)cap * sizeof *va), *vb = malloc((size_t)cap * sizeof *vb);
    int64_t na = testing_call(a, method, X, res, va, cap, NULL);
    int64_t nb = testing_call(b, method, X, res, vb, cap, NULL);
    CHECK(na == nb && na > 0);
    if (na == nb && na > 0) {
        double e = testing_relerr(va, vb, na);
        if (!(e <= rel))
            fprintf(stderr, "  %s.%s: relative error %.3g > %.3g\n", method, res ? res : "",
                    e, rel);
        CHECK(e <= rel);
    }
    free(va);
    free(vb);
}

enum { N = 3000, D = 8 };
static double X[N * D], Y[N * 2], W[N];
static float Xf[N * D];

/* Three well separated blobs with an offset (the shift has work to do),
 * two targets from a fixed linear model with noise, positive weights. */
static void make_data(void)
{
    testing_seed(17);
    for (int64_t i = 0; i < N; i++) {
        int blob = (int)(i % 3);
        for (int j = 0; j < D; j++)
            X[i * D + j] = 100.0 + 10.0 * blob * (j % 3 == blob) + testing_normal() * (1 + j);
        for (int t = 0; t < 2; t++) {
            double v = 3.0 - t;
            for (int j = 0; j < D; j++)
                v += (0.5 * j - 1.0 + t) * X[i * D + j];
            Y[i * 2 + t] = v + 0.1 * testing_normal();
        }
        W[i] = 0.5 + testing_uniform();
    }
    testing_to_f32(X, Xf, N * D);
}

static const size_t CAP = sizeof X / 4; /* a quarter of X */

/* Bytes the backends have copied to their memory so far: on the CPU backend
 * only its staging ring counts, so a rise of X's size proves a fit streamed. */
static uint64_t staged(void)
{
    gsb__copy_stats st = {0}, gt = {0};
    const gsb__backend *cpu = gsb__cpu_backend();
    CHECK_OK(cpu->ops->copy_stats(cpu, &st));
    const char *dev = getenv("GSB_DEVICE");
    if (dev && strcmp(dev, "cuda") == 0 && gsb__cuda_backend())
        CHECK_OK(gsb__cuda_backend()->ops->copy_stats(gsb__cuda_backend(), &gt));
    return st.h2d_bytes + gt.h2d_bytes;
}

/* fit est(params) on X (and y, w) in s and in S; both models out.  The fit in
 * s reads all of X through the staging ring (the neighbours' fit only keeps
 * X: their queries stream it). */
static void fit_both(gsb_session *s, const char *est, const char *params, const gsb_array *x,
                     const gsb_array *y, const gsb_array *w, gsb_model **mem, gsb_model **str)
{
    *mem = testing_model(S, est, params);
    *str = testing_model(s, est, params);
    CHECK_OK(testing_fit(*mem, x, y, w));
    uint64_t before = staged();
    CHECK_OK(testing_fit(*str, x, y, w));
    if (!strstr(est, "Neighbors"))
        CHECK(staged() - before >= (uint64_t)testing_numel(x) * gsb_dtype_size(x->dtype));
}

static void test_scalers(void)
{
    gsb_session *s = capped(CAP);
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D), w = gsb_array_1d(W, GSB_F64, N);
    gsb_model *a, *b;
    fit_both(s, "StandardScaler", NULL, &x, NULL, &w, &a, &b);
    same_attr(b, a, "mean_", 1e-12);
    same_attr(b, a, "var_", 1e-10);
    same_attr(b, a, "scale_", 1e-10);
    same_attr(b, a, "n_samples_seen_", 1e-12);
    gsb_model_free(a);
    gsb_model_free(b);
    fit_both(s, "MinMaxScaler", "{\"feature_range\": [-1, 2]}", &x, NULL, NULL, &a, &b);
    const char *names[] = {"data_min_", "data_max_", "data_range_", "scale_", "min_"};
    for (int i = 0; i < 5; i++)
        same_attr(b, a, names[i], 0.0);
    gsb_model_free(a);
    gsb_model_free(b);
    gsb_close(s);
}

static void test_linear(void)
{
    gsb_session *s = capped(CAP);
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D), w = gsb_array_1d(W, GSB_F64, N);
    gsb_array y2 = gsb_array_2d(Y, GSB_F64, N, 2);
    double y1[N];
    for (int i = 0; i < N; i++)
        y1[i] = Y[2 * i];
    gsb_array y = gsb_array_1d(y1, GSB_F64, N);
    gsb_model *a, *b;
    const char *cases[] = {"LinearRegression", NULL, "LinearRegression",
                           "{\"fit_intercept\": false}", "LinearRegression",
                           "{\"positive\": true}", "Ridge", "{\"alpha\": [0.5, 30.0]}",
                           "Ridge", "{\"solver\": \"svd\", \"alpha\": 3.0}", "Ridge",
                           "{\"positive\": true, \"alpha\": 2.0}"};
    for (int c = 0; c < 6; c++) {
        int two = c == 3;
        for (int weighted = 0; weighted < 2; weighted++) {
            fit_both(s, cases[2 * c], cases[2 * c + 1], &x, two ? &y2 : &y,
                     weighted ? &w : NULL, &a, &b);
            same_attr(b, a, "coef_", 1e-8);
            same_attr(b, a, "intercept_", 1e-8);
            if (c < 2) {
                same_attr(b, a, "singular_", 1e-8);
                same_attr(b, a, "rank_", 0.0);
            }
            same_call(b, a, "predict", &x, NULL, 1e-8);
            gsb_model_free(a);
            gsb_model_free(b);
        }
    }
    gsb_close(s);
}

static void test_decomposition(void)
{
    gsb_session *s = capped(CAP);
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D);
    gsb_model *a, *b;
    const char *pca[] = {"{\"n_components\": 3}", "{\"n_components\": 3, \"svd_solver\": "
                         "\"full\", \"whiten\": true}", "{\"n_components\": 0.9}"};
    for (int c = 0; c < 3; c++) {
        fit_both(s, "PCA", pca[c], &x, NULL, NULL, &a, &b);
        const char *names[] = {"components_", "explained_variance_",
                               "explained_variance_ratio_", "singular_values_", "mean_",
                               "noise_variance_", "n_components_"};
        for (int i = 0; i < 7; i++)
            same_attr(b, a, names[i], 1e-8);
        same_call(b, a, "fit_transform", &x, NULL, 1e-8);
        gsb_model_free(a);
        gsb_model_free(b);
    }
    fit_both(s, "TruncatedSVD", "{\"n_components\": 3, \"algorithm\": \"arpack\"}", &x, NULL,
             NULL, &a, &b);
    const char *names[] = {"components_", "explained_variance_", "explained_variance_ratio_",
                           "singular_values_"};
    for (int i = 0; i < 4; i++)
        same_attr(b, a, names[i], 1e-8);
    same_call(b, a, "fit_transform", &x, NULL, 1e-8);
    gsb_model_free(a);
    gsb_model_free(b);
    gsb_close(s);
}

/* KMeans from the same explicit centres: identical labels and iterations. */
static void kmeans_case(gsb_session *s, const gsb_array *x, const gsb_array *w, double rel)
{
    double init[3 * D];
    for (int c = 0; c < 3; c++)
        for (int j = 0; j < D; j++)
            init[c * D + j] = testing_at(x, (7 * c + 1) * D + j);
    gsb_array ia = gsb_array_2d(init, GSB_F64, 3, D);
    const gsb_array *ins[4] = {x, NULL, w, &ia};
    gsb_model *a = testing_model(S, "KMeans", "{\"n_clusters\": 3}");
    gsb_model *b = testing_model(s, "KMeans", "{\"n_clusters\": 3}");
    CHECK_OK(gsb_model_call(a, "fit", ins, 4, NULL, NULL));
    CHECK_OK(gsb_model_call(b, "fit", ins, 4, NULL, NULL));
    same_attr(b, a, "labels_", 0.0);
    same_attr(b, a, "n_iter_", 0.0);
    same_attr(b, a, "cluster_centers_", rel);
    same_attr(b, a, "inertia_", rel);
    same_call(b, a, "predict", x, NULL, 0.0);
    same_call(b, a, "transform", x, NULL, rel);
    same_call(b, a, "score", x, NULL, rel);
    gsb_model_free(a);
    gsb_model_free(b);
}

static void test_kmeans(void)
{
    gsb_session *s = capped(CAP);
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D), w = gsb_array_1d(W, GSB_F64, N);
    kmeans_case(s, &x, NULL, 1e-10);
    kmeans_case(s, &x, &w, 1e-10);
    gsb_array xf = gsb_array_2d(Xf, GSB_F32, N, D);
    gsb_session *sf = capped(sizeof Xf / 4);
    kmeans_case(sf, &xf, NULL, 1e-5);
    /* k-means++ runs on the host for a streamed X: the same blobs */
    gsb_model *a = testing_model(S, "KMeans", "{\"n_clusters\": 3, \"random_state\": 3}");
    gsb_model *b = testing_model(s, "KMeans", "{\"n_clusters\": 3, \"random_state\": 3}");
    CHECK_OK(testing_fit(a, &x, NULL, NULL));
    CHECK_OK(testing_fit(b, &x, NULL, NULL));
    same_attr(b, a, "inertia_", 1e-6);
    gsb_model_free(a);
    gsb_model_free(b);
    gsb_close(sf);
    gsb_close(s);
}

static void test_neighbors(void)
{
    gsb_session *s = capped(CAP);
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D), q = gsb_array_2d(X + 100 * D, GSB_F64, 500, D);
    gsb_model *a, *b;
    fit_both(s, "NearestNeighbors", "{\"n_neighbors\": 4}", &x, NULL, NULL, &a, &b);
    uint64_t before = staged();
    same_call(b, a, "kneighbors", &q, "indices", 0.0);
    CHECK(staged() - before >= sizeof X); /* the index went through the ring */
    same_call(b, a, "kneighbors", &q, "distances", 1e-12);
    same_call(b, a, "kneighbors", NULL, "indices", 0.0);
    same_call(b, a, "kneighbors", NULL, "distances", 1e-12);
    gsb_model_free(a);
    gsb_model_free(b);
    double labels[N];
    for (int i = 0; i < N; i++)
        labels[i] = i % 3;
    gsb_array yl = gsb_array_1d(labels, GSB_F64, N);
    fit_both(s, "KNeighborsClassifier", "{\"n_neighbors\": 7, \"weights\": \"distance\"}", &x,
             &yl, NULL, &a, &b);
    same_call(b, a, "predict_proba", &q, NULL, 1e-12);
    same_call(b, a, "predict", NULL, NULL, 0.0);
    gsb_model_free(a);
    gsb_model_free(b);
    gsb_close(s);
}

/* A float32 X streams as float32 (the ring keeps the dtype). */
static void test_float32(void)
{
    gsb_session *s = capped(sizeof Xf / 4);
    gsb_array x = gsb_array_2d(Xf, GSB_F32, N, D);
    double y1[N];
    for (int i = 0; i < N; i++)
        y1[i] = Y[2 * i];
    gsb_array y = gsb_array_1d(y1, GSB_F64, N);
    gsb_model *a, *b;
    /* in memory the float32 fit works in float32, streamed in float64 */
    fit_both(s, "LinearRegression", NULL, &x, &y, NULL, &a, &b);
    same_attr(b, a, "coef_", 1e-3);
    gsb_model_free(a);
    gsb_model_free(b);
    fit_both(s, "StandardScaler", NULL, &x, NULL, NULL, &a, &b);
    same_attr(b, a, "mean_", 1e-9);
    same_attr(b, a, "var_", 1e-6);
    gsb_model_free(a);
    gsb_model_free(b);
    fit_both(s, "PCA", "{\"n_components\": 2}", &x, NULL, NULL, &a, &b);
    same_attr(b, a, "explained_variance_", 1e-4);
    same_attr(b, a, "components_", 1e-3);
    gsb_model_free(a);
    gsb_model_free(b);
    gsb_close(s);
}

/*
 * NaN and infinity in a streamed X (the dispatcher leaves the check to the
 * stream: each batch on the backend as it lands): scikit-learn's error
 * wherever the bad value sits (the first, a middle and the last batch; NaN
 * before infinity over X as a whole), and a fitted model stays as it was.
 * The staged bytes show the stream found it: the whole of X went through the
 * ring before the last batch's value was seen, one batch or so before the
 * first one's (a host pass before the fit would have staged nothing).
 */
static void nonfinite_case(gsb_session *s, const char *est, const char *params,
                           const char *attr, const gsb_array *y)
{
    static double bad[N * D];
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D), xb = gsb_array_2d(bad, GSB_F64, N, D);
    gsb_model *m = testing_model(s, est, params);
    CHECK_OK(testing_fit(m, &x, y, NULL));
    static double before[1 << 12], after[1 << 12];
    gsb_array info;
    int64_t na = testing_attr(m, attr, before, 1 << 12, &info);
    const int64_t rows[3] = {0, N / 2, N - 1};
    for (int kind = 0; kind < 3; kind++)
        for (int r = 0; r < 3; r++) {
            memcpy(bad, X, sizeof bad);
            /* kind 2: an infinity first and a NaN later, which scikit-learn names */
            bad[rows[r] * D + 3] = kind == 1 ? INFINITY : NAN;
            if (kind == 2)
                bad[(r == 0 ? N - 1 : 0) * D + 5] = -INFINITY;
            uint64_t staged0 = staged();
            if (kind == 1)
                CHECK_ERR(testing_fit(m, &xb, y, NULL), GSB_EINVAL,
                          "Input X contains infinity or a value too large for dtype('float64').");
            else
                CHECK_ERR(testing_fit(m, &xb, y, NULL), GSB_EINVAL, "Input X contains NaN.");
            uint64_t moved = staged() - staged0, xbytes = sizeof bad;
            if (kind < 2 && !strstr(est, "Neighbors")) {
                CHECK(r < 2 || moved >= xbytes);
                CHECK(r > 0 || (moved > 0 && moved < xbytes / 4));
            }
            CHECK(gsb_model_is_fitted(m));
            CHECK(testing_attr(m, attr, after, 1 << 12, &info) == na);
            CHECK(na > 0 && memcmp(before, after, (size_t)na * sizeof *after) == 0);
        }
    /* NaN and an invalid weight: X's error comes first, as scikit-learn checks X first */
    if (y) {
        static double zero[N];
        gsb_array wz = gsb_array_1d(zero, GSB_F64, N);
        CHECK_ERR(testing_fit(m, &xb, y, &wz), GSB_EINVAL, "Input X contains NaN.");
    }
    gsb_model_free(m);
}

static void test_nonfinite(void)
{
    gsb_session *s = capped(CAP);
    double y1[N];
    for (int i = 0; i < N; i++)
        y1[i] = Y[2 * i];
    gsb_array y = gsb_array_1d(y1, GSB_F64, N);
    nonfinite_case(s, "LinearRegression", NULL, "coef_", &y);
    nonfinite_case(s, "Ridge", "{\"alpha\": 2.0}", "coef_", &y);
    nonfinite_case(s, "PCA", "{\"n_components\": 2}", "components_", NULL);
    nonfinite_case(s, "TruncatedSVD", "{\"n_components\": 2}", "singular_values_", NULL);
    nonfinite_case(s, "KMeans", "{\"n_clusters\": 3, \"n_init\": 1, \"random_state\": 0}",
                   "cluster_centers_", NULL);
    /* the neighbours' fit keeps X (its queries stream it): the host checks it after */
    nonfinite_case(s, "NearestNeighbors", "{\"n_neighbors\": 4}", "n_samples_fit_", NULL);
    gsb_close(s);
}

/* An estimator that cannot stream says so, and so does a too small cap. */
static void test_refusals(void)
{
    gsb_session *s = capped(CAP);
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D);
    double labels[N];
    for (int i = 0; i < N; i++)
        labels[i] = i % 2;
    gsb_array yl = gsb_array_1d(labels, GSB_F64, N);
    gsb_model *m = testing_model(s, "LogisticRegression", NULL);
    CHECK_ERR(testing_fit(m, &x, &yl, NULL), GSB_ENOMEM, "LogisticRegression.fit cannot stream");
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_free(m);
    /* transform is not streamed: a fitted scaler refuses the large X, takes a small one */
    m = testing_model(s, "StandardScaler", NULL);
    CHECK_OK(testing_fit(m, &x, NULL, NULL));
    gsb_result *r = NULL;
    const gsb_array *in[1] = {&x};
    CHECK_ERR(gsb_model_call(m, "transform", in, 1, NULL, &r), GSB_ENOMEM,
              "does not fit in the");
    gsb_array small = gsb_array_2d(X, GSB_F64, 10, D);
    in[0] = &small;
    CHECK_OK(gsb_model_call(m, "transform", in, 1, NULL, &r));
    gsb_result_free(r);
    gsb_model_free(m);
    gsb_close(s);
    /* room for nothing but a few rows */
    s = capped(256);
    m = testing_model(s, "PCA", "{\"n_components\": 2}");
    CHECK_ERR(testing_fit(m, &x, NULL, NULL), GSB_ENOMEM, "not even the model's state");
    gsb_model_free(m);
    gsb_close(s);
}

static void test_cap_parsing(void)
{
    gsb_session *s = NULL;
    CHECK_ERR(gsb_open("local?memory_cap=lots", &s), GSB_EINVAL, "memory_cap: 'lots'");
    CHECK_ERR(gsb_open("local?memory_cap=-5M", &s), GSB_EINVAL, "is not a size");
    CHECK_OK(gsb_open("local?device=cpu&memory_cap=1.5K", &s));
    char *info = NULL;
    CHECK_OK(gsb_session_info(s, &info));
    CHECK(info && strstr(info, "\"memory_cap\":1536") && strstr(info, "\"device\":\"cpu\""));
    gsb_free(info);
    gsb_close(s);
    CHECK_OK(gsb_open("local?memory_cap=2GiB&device=cpu", &s));
    CHECK_OK(gsb_session_info(s, &info));
    CHECK(info && strstr(info, "\"memory_cap\":2147483648"));
    gsb_free(info);
    gsb_close(s);
}

/* A data handle larger than the cap stays on the host and streams. */
static void test_data_handle(void)
{
    gsb_session *s = capped(CAP);
    gsb_array x = gsb_array_2d(X, GSB_F64, N, D);
    gsb_data *h = NULL;
    CHECK_OK(gsb_data_put(s, &x, &h));
    gsb_array hx = gsb_data_array(h);
    gsb_model *a = testing_model(S, "PCA", "{\"n_components\": 2}");
    gsb_model *b = testing_model(s, "PCA", "{\"n_components\": 2}");
    CHECK_OK(testing_fit(a, &x, NULL, NULL));
    CHECK_OK(testing_fit(b, &hx, NULL, NULL));
    same_attr(b, a, "components_", 1e-8);
    gsb_model_free(a);
    gsb_model_free(b);
    gsb_data_free(h);
    gsb_close(s);
}

/* ---- the CPU twins of the streaming ops --------------------------------------------- */

static void test_stage_ring(void)
{
    const gsb__backend *be = gsb__cpu_backend();
    gsb__stage *st = NULL;
    CHECK_ERR(be->ops->stage_open(be, 64, 0, &st), GSB_EINTERNAL, "buffers");
    CHECK_OK(be->ops->stage_open(be, 1024, 2, &st));
    double a[16], b[8];
    for (int i = 0; i < 16; i++)
        a[i] = i;
    for (int i = 0; i < 8; i++)
        b[i] = -i;
    gsb__stage_seg segs[2] = {{a, sizeof a, 0}, {b, sizeof b, 512}};
    gsb__copy_stats c0, c1, c2, c3;
    CHECK_OK(be->ops->copy_stats(be, &c0));
    CHECK_OK(be->ops->stage_fill(be, st, 1, segs, 2));
    CHECK_OK(be->ops->copy_stats(be, &c1));
    void *dev = NULL;
    CHECK_OK(be->ops->stage_acquire(be, st, 1, &dev));
    CHECK_OK(be->ops->copy_stats(be, &c2));
    CHECK_OK(be->ops->stage_acquire(be, st, 1, &dev)); /* again: counted once */
    CHECK_OK(be->ops->copy_stats(be, &c3));
    /* a fill counts when it is acquired (a stream's unused prefetch does not) */
    CHECK(c1.h2d_count == c0.h2d_count && c1.h2d_bytes == c0.h2d_bytes);
    CHECK(c2.h2d_count == c0.h2d_count + 1 && c2.h2d_bytes == c0.h2d_bytes + sizeof a + sizeof b);
    CHECK(c3.h2d_count == c2.h2d_count && c3.h2d_bytes == c2.h2d_bytes);
    CHECK(dev && ((uintptr_t)dev % 256) == 0);
    CHECK(memcmp(dev, a, sizeof a) == 0 && memcmp((char *)dev + 512, b, sizeof b) == 0);
    CHECK_OK(be->ops->stage_release(be, st, 1));
    gsb__stage_seg over = {a, sizeof a, 1000};
    CHECK_ERR(be->ops->stage_fill(be, st, 0, &over, 1), GSB_EINTERNAL, "overflow");
    CHECK_ERR(be->ops->stage_acquire(be, st, 2, &dev), GSB_EINTERNAL, "no buffer 2");
    be->ops->stage_close(be, st);
}

static void test_elementwise_ops(void)
{
    const gsb__backend *be = gsb__cpu_backend();
    /* strided_copy: the transpose of a 3 x 5 int32 array, as float64 */
    int32_t src[15];
    for (int i = 0; i < 15; i++)
        src[i] = i * 7 - 20;
    gsb__tensor t;
    CHECK_OK(gsb__tensor_alloc(be, GSB_F64, 5, 3, &t));
    CHECK_OK(be->ops->strided_copy(be, src, GSB_I32, 4, 20, &t));
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++)
            CHECK(((double *)t.data)[i * 3 + j] == src[j * 5 + i]);
    /* negative strides: the 3 x 5 array with its rows reversed */
    gsb__tensor r;
    CHECK_OK(gsb__tensor_alloc(be, GSB_F64, 3, 5, &r));
    CHECK_OK(be->ops->strided_copy(be, src + 10, GSB_I32, -20, 4, &r));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++)
            CHECK(((double *)r.data)[i * 5 + j] == src[(2 - i) * 5 + j]);
    gsb__tensor_free(&r);
    /* axpy and row_scale */
    double s[5] = {1, 2, 0.5, -1, 3};
    gsb__tensor sv = gsb__tensor_host_view(s, GSB_F64, 5, 1);
    gsb__tensor y;
    CHECK_OK(gsb__tensor_zeros(be, GSB_F64, 5, 3, &y));
    CHECK_OK(be->ops->axpy(be, 2.0, &t, &y));
    CHECK_OK(be->ops->row_scale(be, &y, &sv));
    for (int i = 0; i < 15; i++)
        CHECK(((double *)y.data)[i] == 2.0 * ((double *)t.data)[i] * s[i / 3]);
    gsb__tensor bad = gsb__tensor_host_view(s, GSB_F64, 4, 1);
    CHECK_ERR(be->ops->row_scale(be, &y, &bad), GSB_EINTERNAL, "row_scale");
    gsb__tensor_free(&t);
    gsb__tensor_free(&y);
}

int main(void)
{
    make_data();
    if (testing_open(&S))
        return 1;
    RUN(test_scalers);
    RUN(test_linear);
    RUN(test_decomposition);
    RUN(test_kmeans);
    RUN(test_neighbors);
    RUN(test_float32);
    RUN(test_nonfinite);
    RUN(test_refusals);
    RUN(test_cap_parsing);
    RUN(test_data_handle);
    RUN(test_stage_ring);
    RUN(test_elementwise_ops);
    return testing_close(S);
}
