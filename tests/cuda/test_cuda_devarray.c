/*
 * test_cuda_devarray.c - callers' device arrays (gsb_device_array) on a
 * device=cuda session: each GPU estimator fitted and used on X in device
 * memory gives the numbers of X in host memory, and X is not copied (the
 * backend's host-to-device counter grows by far less than X's size); the
 * NaN check runs on the device; strided, Fortran-ordered and int arrays
 * work (packed on the device); y in device memory is fetched; wrong
 * ordinals and host memory passed as device memory fail with clear words;
 * gsb_data_put takes a device array; DLPack CUDA tensors reach the engine.
 */
#include "../c/test_api_helpers.h"
#include "cuda_testing.h"
#include "core/arena.h"
#include "gsb_dlpack.h"

static gsb_session *s;

/* The ordinal the engine computes on ($GSB_CUDA_DEVICE, else 0). */
static int engine_device(void)
{
    const char *env = getenv("GSB_CUDA_DEVICE");
    return env && *env ? atoi(env) : 0;
}

/* A device copy of host doubles as dtype (rows x cols), owned by the backend. */
static gsb__tensor device_copy(const double *v, gsb_dtype dt, int64_t rows, int64_t cols)
{
    gsb__tensor h;
    if (gsb__tensor_alloc(cpu, dt, rows, cols, &h) != GSB_OK)
        abort();
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&h, i, v[i]);
    gsb__tensor g = to_gpu(&h);
    gsb__tensor_free(&h);
    return g;
}

static uint64_t h2d_bytes(void)
{
    gsb__copy_stats st;
    CHECK_OK(gpu->ops->copy_stats(gpu, &st));
    return st.h2d_bytes;
}

/* All outputs of method(in) as doubles into out; the count. */
static int64_t call_all(gsb_model *m, const char *method, const gsb_array *X, double *out,
                        int64_t cap)
{
    gsb_result *r = NULL;
    const gsb_array *in[1] = {X};
    CHECK_OK(gsb_model_call(m, method, in, 1, NULL, &r));
    int64_t k = 0;
    for (int i = 0; r && i < gsb_result_count(r); i++) {
        const gsb_array *p = gsb_result_array(r, i);
        int64_t cnt = p->ndim == 0 ? 1 : p->shape[0] * (p->ndim == 2 ? p->shape[1] : 1);
        for (int64_t j = 0; j < cnt && k < cap; j++, k++)
            out[k] = p->dtype == GSB_F32   ? ((float *)p->data)[j]
                     : p->dtype == GSB_F64 ? ((double *)p->data)[j]
                     : p->dtype == GSB_I32 ? ((int32_t *)p->data)[j]
                                           : (double)((int64_t *)p->data)[j];
    }
    gsb_result_free(r);
    return k;
}

/* fit on X (and y) then the methods, the outputs of each into out. */
static int64_t run(const char *est, const char *params, const gsb_array *X, const gsb_array *y,
                   const char *const *methods, double *out, int64_t cap)
{
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(s, est, params, &m));
    const gsb_array *fit_in[2] = {X, y};
    CHECK_OK(gsb_model_call(m, "fit", fit_in, y ? 2 : 1, NULL, NULL));
    int64_t k = 0;
    for (int i = 0; methods[i]; i++)
        k += call_all(m, methods[i], X, out + k, cap - k);
    gsb_model_free(m);
    return k;
}

static void test_estimators_in_place(void)
{
    const int64_t n = 50000, d = 16, cap = 6 * n * d;
    double *x = malloc((size_t)(n * d) * sizeof *x), *yv = malloc((size_t)n * sizeof *yv);
    double *a = malloc((size_t)cap * sizeof *a), *b = malloc((size_t)cap * sizeof *b);
    testing_fill_normal(x, n * d);
    for (int64_t i = 0; i < n; i++)
        yv[i] = x[i * d] - 2 * x[i * d + 3] + 0.1 * testing_normal();
    static const char *const pred[] = {"predict", NULL}, *const trans[] = {"transform", NULL},
                             *const km[] = {"predict", "transform", "score", NULL},
                             *const nn[] = {"kneighbors", NULL};
    struct {
        const char *est, *params;
        const char *const *methods;
        int y;
    } cases[] = {{"StandardScaler", NULL, trans, 0},
                 {"MinMaxScaler", NULL, trans, 0},
                 {"PCA", "{\"n_components\": 4}", trans, 0},
                 /* a seed: random_state=None draws a new test matrix per fit, and on
                  * isotropic X the top-4 subspace is anyone's (rel. error ~1.5) */
                 {"TruncatedSVD", "{\"n_components\": 4, \"random_state\": 0}", trans, 0},
                 {"KMeans", "{\"n_clusters\": 5, \"random_state\": 0}", km, 0},
                 {"LinearRegression", NULL, pred, 1},
                 {"Ridge", "{\"alpha\": 2.0}", pred, 1},
                 {"NearestNeighbors", "{\"n_neighbors\": 3}", nn, 0}};
    for (int dt_i = 0; dt_i < 2; dt_i++) {
        gsb_dtype dt = dt_i ? GSB_F64 : GSB_F32;
        gsb__tensor gx = device_copy(x, dt, n, d);
        gsb_device_array dx =
            gsb_device_array_2d(gx.data, dt, n, d, engine_device(), GSB_STREAM_LEGACY);
        gsb_array xd = gsb_array_on_device(&dx);
        gsb__tensor hx;
        CHECK_OK(gsb__tensor_to_host(&gx, &hx));
        gsb_array xh = gsb_array_2d(hx.data, dt, n, d);
        gsb_array y = gsb_array_1d(yv, GSB_F64, n);
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            int before = case_begin();
            int64_t ka = run(cases[c].est, cases[c].params, &xh, cases[c].y ? &y : NULL,
                             cases[c].methods, a, cap);
            uint64_t h0 = h2d_bytes();
            int64_t kb = run(cases[c].est, cases[c].params, &xd, cases[c].y ? &y : NULL,
                             cases[c].methods, b, cap);
            uint64_t moved = h2d_bytes() - h0;
            CHECK(ka == kb && ka > 0);
            double e = testing_relerr(b, a, ka);
            CHECK(e <= (dt == GSB_F32 ? 1e-5 : 1e-12));
            /* the model's state and y may go up; X (n * d elements) never.  The
             * neighbours' index is fitted state, kept on the host (a copy of X)
             * and uploaded by each query call: one X's worth */
            uint64_t xbytes = (uint64_t)(n * d) * gsb_dtype_size(dt);
            CHECK(moved < (strcmp(cases[c].est, "NearestNeighbors") == 0 ? xbytes + xbytes / 4
                                                                          : xbytes / 4));
            CASE_END(before, "%s %s (rel %g, %llu bytes uploaded)", cases[c].est,
                     gsb_dtype_name(dt), e, (unsigned long long)moved);
        }
        gsb__tensor_free(&gx);
        gsb__tensor_free(&hx);
    }
    free(x);
    free(yv);
    free(a);
    free(b);
}

/* Fortran order, a row stride, int64 data and a device y: packed on the device. */
static void test_layouts_and_dtypes(void)
{
    const int64_t n = 3000, d = 5;
    double *x = malloc((size_t)(n * d) * sizeof *x), *xt = malloc((size_t)(n * d) * sizeof *xt);
    for (int64_t i = 0; i < n * d; i++)
        x[i] = floor(100 * testing_uniform());
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++)
            xt[j * n + i] = x[i * d + j];
    gsb_array xh = gsb_array_2d(x, GSB_F64, n, d);
    double ref[64], got[64];
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(s, "StandardScaler", NULL, &m));
    CHECK_OK(gsb_model_fit(m, &xh, NULL));
    CHECK(testing_attr(m, "mean_", ref, 64, NULL) == d);
    gsb_model_free(m);
    /* Fortran order */
    gsb__tensor gF = device_copy(xt, GSB_F64, d, n);
    gsb_device_array dF = gsb_device_array_2d(gF.data, GSB_F64, n, d, engine_device(), NULL);
    dF.array.strides[0] = 8;
    dF.array.strides[1] = 8 * n;
    /* int64, every other row of a 2n x d array */
    double *x2 = calloc((size_t)(2 * n * d), sizeof *x2);
    for (int64_t i = 0; i < n; i++)
        memcpy(x2 + 2 * i * d, x + i * d, (size_t)d * sizeof *x2);
    gsb__tensor gI = device_copy(x2, GSB_I64, 2 * n, d);
    gsb_device_array dI = gsb_device_array_2d(gI.data, GSB_I64, n, d, engine_device(), GSB_STREAM_PER_THREAD);
    dI.array.strides[0] = 2 * d * 8;
    dI.array.strides[1] = 8;
    gsb_device_array *cases[2] = {&dF, &dI};
    for (int c = 0; c < 2; c++) {
        gsb_array a = gsb_array_on_device(cases[c]);
        CHECK_OK(gsb_model_create(s, "StandardScaler", NULL, &m));
        CHECK_OK(gsb_model_fit(m, &a, NULL));
        CHECK(testing_attr(m, "mean_", got, 64, NULL) == d);
        CHECK(testing_relerr(got, ref, d) <= 1e-12);
        gsb_model_free(m);
    }
    /* a device y (fetched to the host) with a host X */
    gsb__tensor gy = device_copy(x, GSB_F64, n, 1); /* the first n values */
    gsb_device_array dy = gsb_device_array_2d(gy.data, GSB_F64, n, 1, engine_device(), NULL);
    dy.array = gsb_array_1d(gy.data, GSB_F64, n);
    gsb_array ya = gsb_array_on_device(&dy), yh = gsb_array_1d(x, GSB_F64, n);
    double c1[8], c2[8];
    CHECK_OK(gsb_model_create(s, "LinearRegression", NULL, &m));
    CHECK_OK(testing_fit(m, &xh, &yh, NULL));
    CHECK(testing_attr(m, "coef_", c1, 8, NULL) == d);
    CHECK_OK(testing_fit(m, &xh, &ya, NULL));
    CHECK(testing_attr(m, "coef_", c2, 8, NULL) == d);
    CHECK(testing_relerr(c2, c1, d) <= 1e-12);
    gsb_model_free(m);
    gsb__tensor_free(&gF);
    gsb__tensor_free(&gI);
    gsb__tensor_free(&gy);
    free(x);
    free(xt);
    free(x2);
}

/* What cannot be read is refused with the reason; NaN is found on the device. */
static void test_refusals(void)
{
    const int64_t n = 100, d = 4;
    double v[400];
    for (int i = 0; i < 400; i++)
        v[i] = i;
    gsb__tensor g = device_copy(v, GSB_F64, n, d);
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(s, "PCA", NULL, &m));
    /* the wrong ordinal */
    gsb_device_array d1 = gsb_device_array_2d(g.data, GSB_F64, n, d, engine_device() + 7, NULL);
    gsb_array a = gsb_array_on_device(&d1);
    CHECK_ERR(gsb_model_fit(m, &a, NULL), GSB_EINVAL, "but this session computes on CUDA device");
    /* host memory, pageable and pinned, described as device memory */
    gsb_device_array dh = gsb_device_array_2d(v, GSB_F64, n, d, engine_device(), NULL);
    a = gsb_array_on_device(&dh);
    int rc = gsb_model_fit(m, &a, NULL);
    CHECK(rc == GSB_EINVAL && strstr(gsb_errmsg(), "not CUDA device memory"));
    /* arena blocks are page-locked from GSB__ARENA_REGISTER_MIN bytes on (a
     * block of sizeof v stays pageable and gets the words above) */
    void *pinned = NULL;
    CHECK_OK(gsb_arena_alloc(s, GSB__ARENA_REGISTER_MIN, &pinned));
    if (pinned) {
        memcpy(pinned, v, sizeof v);
        dh.array.data = pinned;
        a = gsb_array_on_device(&dh);
        CHECK_ERR(gsb_model_fit(m, &a, NULL), GSB_EINVAL, "page-locked host memory");
        gsb_arena_free(s, pinned);
    }
    /* NaN and inf, found on the device */
    v[57] = NAN;
    gsb__tensor gn = device_copy(v, GSB_F64, n, d);
    gsb_device_array dn = gsb_device_array_2d(gn.data, GSB_F64, n, d, engine_device(), NULL);
    a = gsb_array_on_device(&dn);
    CHECK_ERR(gsb_model_fit(m, &a, NULL), GSB_EINVAL, "Input X contains NaN.");
    v[57] = INFINITY;
    gsb__tensor gi = device_copy(v, GSB_F32, n, d);
    gsb_device_array di = gsb_device_array_2d(gi.data, GSB_F32, n, d, engine_device(), NULL);
    a = gsb_array_on_device(&di);
    CHECK_ERR(gsb_model_fit(m, &a, NULL), GSB_EINVAL,
              "Input X contains infinity or a value too large for dtype('float32').");
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_free(m);
    gsb__tensor_free(&g);
    gsb__tensor_free(&gn);
    gsb__tensor_free(&gi);
}

/* gsb_data_put of a device array, and a DLPack CUDA tensor as input. */
static void test_data_put_and_dlpack(void)
{
    const int64_t n = 2000, d = 6;
    double *x = malloc((size_t)(n * d) * sizeof *x);
    testing_fill_normal(x, n * d);
    gsb__tensor g = device_copy(x, GSB_F32, n, d);
    gsb_array xh = gsb_array_2d(x, GSB_F64, n, d);
    double ref[8], got[8];
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(s, "StandardScaler", NULL, &m));
    CHECK_OK(gsb_model_fit(m, &xh, NULL));
    CHECK(testing_attr(m, "mean_", ref, 8, NULL) == d);
    gsb_device_array dx = gsb_device_array_2d(g.data, GSB_F32, n, d, engine_device(), NULL);
    gsb_array a = gsb_array_on_device(&dx);
    gsb_data *h = NULL;
    CHECK_OK(gsb_data_put(s, &a, &h));
    gsb_array ha = gsb_data_array(h);
    CHECK_OK(gsb_model_fit(m, &ha, NULL));
    CHECK(testing_attr(m, "mean_", got, 8, NULL) == d);
    CHECK(testing_relerr(got, ref, d) <= 1e-6);
    gsb_data_free(h);
    int64_t shape[2] = {n, d};
    DLTensor t = {g.data, {kDLCUDA, engine_device()}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
    gsb_device_array storage;
    CHECK_OK(gsb_array_from_dlpack(&t, GSB_STREAM_LEGACY, &storage, &a));
    CHECK_OK(gsb_model_fit(m, &a, NULL));
    CHECK(testing_attr(m, "mean_", got, 8, NULL) == d);
    CHECK(testing_relerr(got, ref, d) <= 1e-6);
    gsb_model_free(m);
    gsb__tensor_free(&g);
    free(x);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    if (gsb_open("local?device=cuda", &s) != GSB_OK) {
        fprintf(stderr, "gsb_open: %s\n", gsb_errmsg());
        return 1;
    }
    testing_seed(23);
    RUN(test_estimators_in_place);
    RUN(test_layouts_and_dtypes);
    RUN(test_refusals);
    RUN(test_data_put_and_dlpack);
    gsb_close(s);
    return testing_done();
}
