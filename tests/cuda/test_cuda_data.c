/*
 * test_cuda_data.c - data handles on the GPU (core/data.h): with device=cuda
 * gsb_data_put uploads straight to the GPU; calls on the handle give the
 * same numbers as calls on the array; NaN/inf are caught on the device with
 * scikit-learn's words; inputs that need the host get a downloaded copy;
 * pinned arena memory uploads too.  Also the backend's nonfinite and
 * mem_info ops against their meaning.
 */
#include "cuda_testing.h"

static gsb_session *s;

static void fit_predict(const char *est, const char *params, const gsb_array *X,
                        const gsb_array *y, const char *method, double *out, int64_t n)
{
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(s, est, params, &m));
    CHECK_OK(gsb_model_fit(m, X, y));
    gsb_result *r = NULL;
    const gsb_array *in[1] = {X};
    CHECK_OK(gsb_model_call(m, method, in, 1, NULL, &r));
    const gsb_array *p = r ? gsb_result_array(r, 0) : NULL;
    CHECK(p != NULL);
    for (int64_t i = 0; p && i < n; i++)
        out[i] = p->dtype == GSB_F32 ? ((float *)p->data)[i]
                 : p->dtype == GSB_F64 ? ((double *)p->data)[i]
                 : p->dtype == GSB_I32 ? ((int32_t *)p->data)[i]
                                       : (double)((int64_t *)p->data)[i];
    gsb_result_free(r);
    gsb_model_free(m);
}

static void test_handle_equals_array(void)
{
    const int64_t n = 20000, d = 16;
    gsb_dtype dts[2] = {GSB_F32, GSB_F64};
    for (int k = 0; k < 2; k++) {
        gsb__tensor X = host_random(dts[k], n, d, 1.0), y = host_random(dts[k], n, 1, 1.0);
        gsb_array Xa = gsb_array_2d(X.data, dts[k], n, d), ya = gsb_array_1d(y.data, dts[k], n);
        gsb_data *dx = NULL, *dy = NULL;
        CHECK_OK(gsb_data_put(s, &Xa, &dx));
        CHECK_OK(gsb_data_put(s, &ya, &dy));
        gsb_array hx = gsb_data_array(dx), hy = gsb_data_array(dy);
        double *want = calloc((size_t)(n * d), sizeof *want);
        double *got = calloc((size_t)(n * d), sizeof *got);
        const char *cases[][3] = {{"LinearRegression", "{}", "predict"},
                                  {"KMeans", "{\"n_clusters\": 5, \"n_init\": 1, \"random_state\": 0}", "predict"},
                                  {"StandardScaler", "{}", "transform"},
                                  {"PCA", "{\"n_components\": 4}", "transform"}};
        for (int c = 0; c < 4; c++) {
            int sup = c == 0;
            int64_t len = c >= 2 ? n * (c == 3 ? 4 : d) : n;
            fit_predict(cases[c][0], cases[c][1], &Xa, sup ? &ya : NULL, cases[c][2], want, len);
            fit_predict(cases[c][0], cases[c][1], &hx, sup ? &hy : NULL, cases[c][2], got, len);
            double err = 0;
            for (int64_t i = 0; i < len; i++)
                err = fmax(err, fabs(got[i] - want[i]) / fmax(1.0, fabs(want[i])));
            if (!(err <= (dts[k] == GSB_F32 ? 1e-4 : 1e-10)))
                fprintf(stderr, "%s %s: handle vs array max rel err %g\n", cases[c][0],
                        gsb_dtype_name(dts[k]), err);
            CHECK(err <= (dts[k] == GSB_F32 ? 1e-4 : 1e-10));
        }
        free(want);
        free(got);
        gsb_data_free(dx);
        gsb_data_free(dy);
        gsb__tensor_free(&X);
        gsb__tensor_free(&y);
    }
}

static void test_nonfinite_on_device(void)
{
    const int64_t n = 5000, d = 8;
    for (int kind = 1; kind <= 2; kind++) {
        gsb__tensor X = host_random(GSB_F32, n, d, 1.0);
        ((float *)X.data)[n * d - 3] = kind == 1 ? NAN : INFINITY;
        gsb_array Xa = gsb_array_2d(X.data, GSB_F32, n, d);
        gsb_data *dx = NULL;
        CHECK_OK(gsb_data_put(s, &Xa, &dx));
        gsb_array hx = gsb_data_array(dx);
        gsb_model *m = NULL;
        CHECK_OK(gsb_model_create(s, "StandardScaler", NULL, &m));
        if (kind == 1)
            CHECK_ERR(gsb_model_fit(m, &hx, NULL), GSB_EINVAL, "Input X contains NaN.");
        else
            CHECK_ERR(gsb_model_fit(m, &hx, NULL), GSB_EINVAL, "contains infinity");
        gsb_model_free(m);
        gsb_data_free(dx);
        /* the op itself, on a tensor */
        gsb__tensor g = to_gpu(&X);
        int bad = -1;
        if (gpu->ops->nonfinite) {
            CHECK_OK(gpu->ops->nonfinite(gpu, &g, &bad));
            CHECK(bad == kind);
            ((float *)X.data)[n * d - 3] = 1.0f;
            gsb__tensor g2 = to_gpu(&X);
            CHECK_OK(gpu->ops->nonfinite(gpu, &g2, &bad));
            CHECK(bad == 0);
            gsb__tensor_free(&g2);
        }
        gsb__tensor_free(&g);
        gsb__tensor_free(&X);
    }
}

static void test_arena_and_meminfo(void)
{
    const int64_t n = 100000, d = 32;
    float *x = NULL;
    CHECK_OK(gsb_arena_alloc(s, (size_t)(n * d) * sizeof(float), (void **)&x));
    if (!x)
        return;
    for (int64_t i = 0; i < n * d; i++)
        x[i] = (float)testing_normal();
    gsb_array Xa = gsb_array_2d(x, GSB_F32, n, d);
    gsb_data *dx = NULL;
    CHECK_OK(gsb_data_put(s, &Xa, &dx));
    gsb_array hx = gsb_data_array(dx);
    double want[4], got[4];
    fit_predict("StandardScaler", NULL, &Xa, NULL, "transform", want, 4);
    fit_predict("StandardScaler", NULL, &hx, NULL, "transform", got, 4);
    for (int i = 0; i < 4; i++)
        CHECK_CLOSE(got[i], want[i], 1e-5);
    gsb_data_free(dx);
    gsb_arena_free(s, x);
    if (gpu->ops->mem_info) {
        size_t fr = 0, tot = 0;
        CHECK_OK(gpu->ops->mem_info(gpu, &fr, &tot));
        CHECK(tot > ((size_t)1 << 30) && fr <= tot);
    }
    char *info = NULL;
    CHECK_OK(gsb_session_info(s, &info));
    CHECK(info && strstr(info, "gpu_memory"));
    gsb_free(info);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    if (gsb_open("local?device=cuda", &s) != GSB_OK) {
        fprintf(stderr, "gsb_open: %s\n", gsb_errmsg());
        return 1;
    }
    RUN(test_handle_equals_array);
    RUN(test_nonfinite_on_device);
    RUN(test_arena_and_meminfo);
    gsb_close(s);
    return testing_done();
}
