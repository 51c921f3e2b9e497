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

/* Every output of method on model m as doubles, appended to out (cap values). */
static int64_t call_all(gsb_model *m, const char *method, const gsb_array *const *in, int n_in,
                        double *out, int64_t cap)
{
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_call(m, method, in, n_in, NULL, &r));
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

/* fit on (X, y, w) then each method on X; everything into out. */
static int64_t run_case(const char *est, const char *params, const gsb_array *X,
                        const gsb_array *y, const gsb_array *w, const char *const *methods,
                        double *out, int64_t cap)
{
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(s, est, params, &m));
    const gsb_array *fit_in[3] = {X, y, w};
    CHECK_OK(gsb_model_call(m, "fit", fit_in, w ? 3 : y ? 2 : 1, NULL, NULL));
    int64_t k = 0;
    const gsb_array *in[1] = {X};
    for (int i = 0; methods[i]; i++)
        k += call_all(m, methods[i], in, 1, out + k, cap - k);
    gsb_model_free(m);
    return k;
}

static void test_handle_equals_array(void)
{
    const int64_t n = 20000, d = 16, cap = 4 * n * d;
    gsb_dtype dts[2] = {GSB_F32, GSB_F64};
    static const char *const pred[] = {"predict", NULL}, *const trans[] = {"transform", NULL},
                             *const both[] = {"transform", "inverse_transform", NULL},
                             *const km[] = {"predict", "transform", "score", NULL},
                             *const clf[] = {"predict", "predict_proba", NULL},
                             *const knn[] = {"predict", "kneighbors", NULL};
    struct {
        const char *est, *params;
        int y, w; /* y: 1 float targets, 2 class labels */
        const char *const *methods;
    } cases[] = {
        {"LinearRegression", "{}", 1, 0, pred},
        {"LinearRegression", "{}", 1, 1, pred},
        {"Ridge", "{\"alpha\": 2.0}", 1, 1, pred},
        {"LogisticRegression", "{}", 2, 0, clf},
        {"KMeans", "{\"n_clusters\": 5, \"n_init\": 1, \"random_state\": 0}", 0, 0, km},
        {"KMeans", "{\"n_clusters\": 5, \"n_init\": 1, \"random_state\": 0}", 0, 1, km},
        {"StandardScaler", "{}", 0, 0, both},
        {"StandardScaler", "{}", 0, 1, both},
        {"MinMaxScaler", "{}", 0, 0, both},
        {"PCA", "{\"n_components\": 4}", 0, 0, trans},
        {"TruncatedSVD", "{\"n_components\": 4, \"random_state\": 0}", 0, 0, trans},
        {"KNeighborsClassifier", "{\"n_neighbors\": 3}", 2, 0, knn},
        {"KNeighborsRegressor", "{\"n_neighbors\": 3}", 1, 0, knn},
    };
    double *want = calloc((size_t)cap, sizeof *want), *got = calloc((size_t)cap, sizeof *got);
    for (int k = 0; k < 2; k++) {
        gsb__tensor X = host_random(dts[k], n, d, 1.0), y = host_random(dts[k], n, 1, 1.0);
        gsb__tensor lab = host_random(GSB_F64, n, 1, 3.0), w = host_random(GSB_F64, n, 1, 1.0);
        for (int64_t i = 0; i < n; i++) {
            ((double *)w.data)[i] = fabs(((double *)w.data)[i]) + 0.1;
            ((double *)lab.data)[i] = (double)(i % 3); /* three classes */
        }
        gsb_array Xa = gsb_array_2d(X.data, dts[k], n, d), ya = gsb_array_1d(y.data, dts[k], n);
        gsb_array la = gsb_array_1d(lab.data, GSB_F64, n), wa = gsb_array_1d(w.data, GSB_F64, n);
        gsb_data *dx = NULL, *dy = NULL, *dl = NULL, *dw = NULL;
        CHECK_OK(gsb_data_put(s, &Xa, &dx));
        CHECK_OK(gsb_data_put(s, &ya, &dy));
        CHECK_OK(gsb_data_put(s, &la, &dl));
        CHECK_OK(gsb_data_put(s, &wa, &dw));
        gsb_array hx = gsb_data_array(dx), hy = gsb_data_array(dy), hl = gsb_data_array(dl),
                  hw = gsb_data_array(dw);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const gsb_array *y1 = cases[c].y == 1 ? &ya : cases[c].y == 2 ? &la : NULL;
            const gsb_array *y2 = cases[c].y == 1 ? &hy : cases[c].y == 2 ? &hl : NULL;
            if (cases[c].w && !y1) { /* unsupervised with weights: y is None */
                y1 = NULL;
                y2 = NULL;
            }
            int64_t a = run_case(cases[c].est, cases[c].params, &Xa, y1, cases[c].w ? &wa : NULL,
                                 cases[c].methods, want, cap);
            int64_t b = run_case(cases[c].est, cases[c].params, &hx, y2, cases[c].w ? &hw : NULL,
                                 cases[c].methods, got, cap);
            CHECK(a == b && a > 0);
            double err = 0;
            for (int64_t i = 0; i < a && i < b; i++)
                err = fmax(err, fabs(got[i] - want[i]) / fmax(1.0, fabs(want[i])));
            double tol = dts[k] == GSB_F32 ? 1e-4 : 1e-10;
            if (!(err <= tol))
                fprintf(stderr, "%s (w=%d) %s: handle vs array max rel err %g\n",
                        cases[c].est, cases[c].w, gsb_dtype_name(dts[k]), err);
            CHECK(err <= tol);
        }
        gsb_data_free(dx);
        gsb_data_free(dy);
        gsb_data_free(dl);
        gsb_data_free(dw);
        gsb__tensor_free(&X);
        gsb__tensor_free(&y);
        gsb__tensor_free(&lab);
        gsb__tensor_free(&w);
    }
    free(want);
    free(got);
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
    static const char *const trans[] = {"transform", NULL};
    double *want = calloc((size_t)(n * d), sizeof *want), *got = calloc((size_t)(n * d), sizeof *got);
    CHECK(run_case("StandardScaler", NULL, &Xa, NULL, NULL, trans, want, n * d) == n * d);
    CHECK(run_case("StandardScaler", NULL, &hx, NULL, NULL, trans, got, n * d) == n * d);
    for (int64_t i = 0; i < n * d; i += 997)
        CHECK_CLOSE(got[i], want[i], 1e-5);
    free(want);
    free(got);
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
