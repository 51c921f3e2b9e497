/*
 * test_core.c - the engine core without real estimators: parameter
 * validation, input validation, the dispatcher (fit swaps attributes only on
 * success, composites, unfitted use, cancellation), results and sessions.
 * A small test estimator ("Echo") is defined here.
 */
#include <math.h>

#include "core/dispatch.h"
#include "core/model.h"
#include "core/rng.h"
#include "core/xoshiro.h"
#include "core/validate.h"
#include <stdatomic.h>
#include <time.h>
#include "testing.h"

/* ---- a test estimator: fit stores column sums; predict returns row sums -- */

static const char *const mode_choices[] = {"sum", "fail", "loop", NULL};
static const gsb__param_desc echo_params[] = {
    {"n_iter", GSB__P_INT, "3", 1, INFINITY, GSB__CLOSED_LEFT, NULL, "iterations"},
    {"tol", GSB__P_FLOAT, "0.0001", 0, INFINITY, GSB__CLOSED_NEITHER, NULL, "tolerance"},
    {"mode", GSB__P_STR, "\"sum\"", 0, 0, 0, mode_choices, "what fit does"},
    {"random_state", GSB__P_INT | GSB__P_NONE, "null", 0, 4294967295.0, GSB__CLOSED_BOTH, NULL,
     "seed"},
    {"flag", GSB__P_BOOL, "true", 0, 0, 0, NULL, "a bool"},
    {"verbose", GSB__P_INT, "0", 0, INFINITY, GSB__CLOSED_LEFT, NULL, "verbosity"},
    {0}};

static int echo_fit(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X");
    if (gsb__param_is(c->params, "mode", "fail"))
        return gsb__err(GSB_ENUMERIC, "fit failed on purpose");
    for (int64_t it = 0; gsb__param_is(c->params, "mode", "loop"); it++)
        GSB_TRY(gsb__progress(c, "iteration", it, 1.0 / (double)(it + 1)));
    gsb__tensor sums;
    GSB_TRY(gsb__tensor_zeros(gsb__cpu_backend(), GSB_F64, X->cols, 1, &sums));
    for (int64_t i = 0; i < X->rows; i++)
        for (int64_t j = 0; j < X->cols; j++)
            ((double *)sums.data)[j] += gsb__tensor_get(X, i * X->cols + j);
    gsb__tensor_as_1d(&sums);
    return gsb__fit_set(c, "sums_", &sums);
}

static int echo_predict(gsb__ctx *c)
{
    const gsb__tensor *X = gsb__in(c, "X"), *sums;
    GSB_TRY(gsb__attr_need(c, "sums_", GSB_F64, X->cols, 1, &sums));
    gsb__tensor out;
    GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, X->rows, 1, &out));
    for (int64_t i = 0; i < X->rows; i++) {
        double s = 0;
        for (int64_t j = 0; j < X->cols; j++)
            s += gsb__tensor_get(X, i * X->cols + j);
        ((double *)out.data)[i] = s;
    }
    gsb__tensor_as_1d(&out);
    return gsb__out(c, "y", &out);
}

static const gsb__method_desc echo_methods[] = {
    {"fit", echo_fit,
     {{"X", GSB__IN_X}, {"y", GSB__IN_Y_LIKE_X | GSB__IN_OPTIONAL},
      {"sample_weight", GSB__IN_WEIGHTS | GSB__IN_OPTIONAL}},
     1, "fit"},
    {"predict", echo_predict, {{"X", GSB__IN_X}}, 0, "predict"},
    {0}};
static const gsb__attr_desc echo_attrs[] = {{"sums_", "column sums"}, {0}};
static const gsb__estimator_desc echo = {"Echo", "test", GSB__KIND_REGRESSOR, echo_params,
                                         echo_methods, echo_attrs, "test estimator"};

static gsb_session *sess;

static gsb_model *new_echo(void)
{
    gsb_model *m = NULL;
    CHECK_OK(gsb__model_new(sess, &echo, &m));
    return m;
}

/* ---- tests --------------------------------------------------------------- */

static void test_params_defaults_and_update(void)
{
    gsb_model *m = new_echo();
    char *json;
    CHECK_OK(gsb_model_get_params(m, &json));
    CHECK(strstr(json, "\"n_iter\":3") != NULL);
    CHECK(strstr(json, "\"random_state\":null") != NULL);
    gsb_free(json);
    CHECK_OK(gsb_model_set_params(m, "{\"n_iter\": 7, \"tol\": 1, \"random_state\": 42}"));
    CHECK(gsb__param_int(m->params, "n_iter") == 7);
    CHECK_CLOSE(gsb__param_float(m->params, "tol"), 1.0, 0);
    gsb_model_free(m);
}

static void test_params_errors(void)
{
    gsb_model *m = new_echo();
    CHECK_ERR(gsb_model_set_params(m, "{\"n_iter\": 0}"), GSB_EPARAM,
              "The 'n_iter' parameter of Echo must be an int in the range [1, inf). Got 0 "
              "instead.");
    CHECK_ERR(gsb_model_set_params(m, "{\"tol\": 0}"), GSB_EPARAM,
              "must be a float in the range (0.0, inf). Got 0 instead.");
    CHECK_ERR(gsb_model_set_params(m, "{\"mode\": \"bogus\"}"), GSB_EPARAM,
              "must be a str among {'sum', 'fail', 'loop'}. Got 'bogus' instead.");
    CHECK_ERR(gsb_model_set_params(m, "{\"n_iter\": 2.5}"), GSB_EPARAM, "Got 2.5 instead.");
    CHECK_ERR(gsb_model_set_params(m, "{\"flag\": 1}"), GSB_EPARAM,
              "must be an instance of 'bool'");
    CHECK_ERR(gsb_model_set_params(m, "{\"random_state\": \"x\"}"), GSB_EPARAM,
              "an int in the range [0, 4294967295] or None");
    CHECK_ERR(gsb_model_set_params(m, "{\"nope\": 1}"), GSB_EPARAM,
              "Invalid parameter 'nope' for estimator Echo(). Valid parameters are: "
              "['n_iter', 'tol', 'mode', 'random_state', 'flag', 'verbose'].");
    CHECK_ERR(gsb_model_set_params(m, "[1]"), GSB_EINVAL, "expected a JSON object");
    CHECK_ERR(gsb_model_set_params(m, "{bad json"), GSB_EINVAL, "invalid JSON");
    /* a failed update changes nothing, even the valid keys in it */
    CHECK_ERR(gsb_model_set_params(m, "{\"n_iter\": 9, \"tol\": -1}"), GSB_EPARAM, "tol");
    CHECK(gsb__param_int(m->params, "n_iter") == 3);
    gsb_model_free(m);
}

static gsb_array arr2(double *d, int64_t r, int64_t c) { return gsb_array_2d(d, GSB_F64, r, c); }

static void test_validation_messages(void)
{
    gsb_model *m = new_echo();
    double x[6] = {1, 2, 3, 4, 5, 6};
    gsb_array X = arr2(x, 3, 2);
    gsb_array X1 = gsb_array_1d(x, GSB_F64, 6);
    CHECK_ERR(gsb_model_fit(m, &X1, NULL), GSB_EINVAL, "Expected 2D array, got 1D array");
    gsb_array X0 = arr2(x, 0, 2);
    CHECK_ERR(gsb_model_fit(m, &X0, NULL), GSB_EINVAL,
              "Found array with 0 sample(s) (shape=(0, 2)) while a minimum of 1 is required "
              "by Echo.");
    gsb_array Xf = arr2(x, 3, 0);
    CHECK_ERR(gsb_model_fit(m, &Xf, NULL), GSB_EINVAL, "Found array with 0 feature(s)");
    x[4] = NAN;
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_EINVAL, "Input X contains NaN.");
    x[4] = INFINITY;
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_EINVAL,
              "Input X contains infinity or a value too large for dtype('float64').");
    x[4] = 5;
    double yv[2] = {1, 2};
    gsb_array y = gsb_array_1d(yv, GSB_F64, 2);
    CHECK_ERR(gsb_model_fit(m, &X, &y), GSB_EINVAL,
              "Found input variables with inconsistent numbers of samples: [3, 2]");
    double w[3] = {1, -1, 1};
    gsb_array sw = gsb_array_1d(w, GSB_F64, 3);
    const gsb_array *in[3] = {&X, NULL, &sw};
    CHECK_ERR(gsb_model_call(m, "fit", in, 3, NULL, NULL), GSB_EINVAL,
              "Negative values in data passed to `sample_weight`.");
    double w2[2] = {1, 1};
    gsb_array sw2 = gsb_array_1d(w2, GSB_F64, 2);
    in[2] = &sw2;
    CHECK_ERR(gsb_model_call(m, "fit", in, 3, NULL, NULL), GSB_EINVAL,
              "sample_weight.shape == (2,), expected (3,)!");
    const gsb_array *four[4] = {&X, NULL, NULL, &X};
    CHECK_ERR(gsb_model_call(m, "fit", four, 4, NULL, NULL), GSB_EINVAL, "takes 3 input(s)");
    gsb_array bad = X;
    bad.dtype = (gsb_dtype)99;
    CHECK_ERR(gsb_model_fit(m, &bad, NULL), GSB_EINVAL, "unknown dtype");
    CHECK_ERR(gsb_model_call(m, "fit", NULL, 0, NULL, NULL), GSB_EINVAL,
              "missing required input 'X'");
    CHECK_ERR(gsb_model_call(m, "frobnicate", in, 1, NULL, NULL), GSB_ENOTFOUND,
              "'Echo' object has no attribute 'frobnicate'");
    gsb_model_free(m);
}

static void test_unfitted_and_feature_count(void)
{
    gsb_model *m = new_echo();
    double x[6] = {1, 2, 3, 4, 5, 6};
    gsb_array X = arr2(x, 3, 2), X3 = arr2(x, 2, 3);
    const gsb_array *in[1] = {&X};
    CHECK_ERR(gsb_model_call(m, "predict", in, 1, NULL, NULL), GSB_ENOTFITTED,
              "This Echo instance is not fitted yet. Call 'fit' with appropriate arguments "
              "before using this estimator.");
    gsb_result *r;
    CHECK_ERR(gsb_model_get_attr(m, "sums_", &r), GSB_ENOTFITTED, "not fitted");
    CHECK_OK(gsb_model_fit(m, &X, NULL));
    CHECK(gsb_model_is_fitted(m));
    const gsb_array *in3[1] = {&X3};
    CHECK_ERR(gsb_model_call(m, "predict", in3, 1, NULL, NULL), GSB_EINVAL,
              "X has 3 features, but Echo is expecting 2 features as input.");
    CHECK_OK(gsb_model_get_attr(m, "n_features_in_", &r));
    const gsb_array *a = gsb_result_array(r, 0);
    CHECK(a && a->ndim == 0 && a->dtype == GSB_I64 && *(int64_t *)a->data == 2);
    gsb_result_free(r);
    CHECK_ERR(gsb_model_get_attr(m, "nope_", &r), GSB_ENOTFOUND, "no attribute 'nope_'");
    gsb_model_free(m);
}

static void test_layouts_and_dtypes(void)
{
    /* Fortran order, strided and int input all give the same answer as C order */
    gsb_model *m = new_echo();
    double c[6] = {1, 2, 3, 4, 5, 6};  /* 3 x 2, C order */
    double f[6] = {1, 3, 5, 2, 4, 6};  /* the same matrix, Fortran order */
    int32_t ic[6] = {1, 2, 3, 4, 5, 6};
    float fc[6] = {1, 2, 3, 4, 5, 6};
    gsb_array variants[4];
    variants[0] = arr2(c, 3, 2);
    variants[1] = arr2(f, 3, 2);
    variants[1].strides[0] = 8;
    variants[1].strides[1] = 24;
    variants[2] = gsb_array_2d(ic, GSB_I32, 3, 2);
    variants[3] = gsb_array_2d(fc, GSB_F32, 3, 2);
    for (int v = 0; v < 4; v++) {
        CHECK_OK(gsb_model_fit(m, &variants[v], NULL));
        const gsb_array *in[1] = {&variants[v]};
        gsb_result *r = NULL;
        CHECK_OK(gsb_model_call(m, "predict", in, 1, NULL, &r));
        const gsb_array *y = gsb_result_get(r, "y");
        CHECK(y && y->ndim == 1 && y->shape[0] == 3);
        if (y) {
            CHECK_CLOSE(((double *)y->data)[0], 3, 0);
            CHECK_CLOSE(((double *)y->data)[2], 11, 0);
        }
        gsb_result_free(r);
    }
    gsb_model_free(m);
}

static void test_fit_failure_leaves_unfitted(void)
{
    gsb_model *m = new_echo();
    double x[4] = {1, 2, 3, 4};
    gsb_array X = arr2(x, 2, 2);
    CHECK_OK(gsb_model_fit(m, &X, NULL));
    /* a validation error keeps the old fitted state, as scikit-learn does */
    x[0] = NAN;
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_EINVAL, "NaN");
    CHECK(gsb_model_is_fitted(m));
    x[0] = 1;
    /* a failure inside fit leaves the model unfitted, never half-fitted */
    CHECK_OK(gsb_model_set_params(m, "{\"mode\": \"fail\"}"));
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_ENUMERIC, "on purpose");
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_free(m);
}

static int cancel_after_5(void *data, const char *stage, int64_t it, double loss)
{
    (void)stage;
    (void)loss;
    *(int64_t *)data = it;
    return it >= 5;
}

static void test_progress_and_cancel(void)
{
    gsb_model *m = new_echo();
    double x[4] = {1, 2, 3, 4};
    gsb_array X = arr2(x, 2, 2);
    int64_t last = -1;
    CHECK_OK(gsb_model_set_params(m, "{\"mode\": \"loop\"}"));
    gsb_model_set_progress(m, cancel_after_5, &last);
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_ECANCELLED, "cancelled");
    CHECK(last == 5);
    CHECK(!gsb_model_is_fitted(m));
    /* still usable afterwards */
    gsb_model_set_progress(m, NULL, NULL);
    CHECK_OK(gsb_model_set_params(m, "{\"mode\": \"sum\"}"));
    CHECK_OK(gsb_model_fit(m, &X, NULL));
    gsb_model_free(m);
}

/* Cancels every 20 ms until the fit has returned: a call clears the flag when it
 * starts, so one cancel that fires before the fit begins (a loaded machine) would
 * leave the looping fit running for ever. */
typedef struct {
    gsb_model *m;
    atomic_int done;
} cancel_arg;

static void *cancel_thread(void *arg)
{
    cancel_arg *a = arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    while (!atomic_load(&a->done)) {
        nanosleep(&ts, NULL);
        gsb_model_cancel(a->m);
    }
    return NULL;
}

static void test_cancel_from_other_thread(void)
{
    gsb_model *m = new_echo();
    double x[4] = {1, 2, 3, 4};
    gsb_array X = arr2(x, 2, 2);
    CHECK_OK(gsb_model_set_params(m, "{\"mode\": \"loop\"}"));
    cancel_arg a = {.m = m};
    atomic_init(&a.done, 0);
    pthread_t t;
    pthread_create(&t, NULL, cancel_thread, &a);
    CHECK_ERR(gsb_model_fit(m, &X, NULL), GSB_ECANCELLED, "cancelled");
    atomic_store(&a.done, 1);
    pthread_join(t, NULL);
    gsb_model_free(m);
}

static void test_composites(void)
{
    gsb_model *m = new_echo();
    double x[6] = {1, 2, 3, 4, 5, 6}, yv[3] = {3, 7, 11};
    gsb_array X = arr2(x, 3, 2), y = gsb_array_1d(yv, GSB_F64, 3);
    const gsb_array *in[2] = {&X, &y};
    gsb_result *r = NULL;
    /* fit_predict is composed for clusterers only, as scikit-learn's ClusterMixin */
    CHECK_ERR(gsb_model_call(m, "fit_predict", in, 1, NULL, &r), GSB_ENOTFOUND, "fit_predict");
    CHECK_OK(gsb_model_fit(m, &X, NULL));
    CHECK_OK(gsb_model_call(m, "score", in, 2, NULL, &r));
    const gsb_array *s = gsb_result_get(r, "score");
    CHECK(s && s->ndim == 0);
    if (s)
        CHECK_CLOSE(*(double *)s->data, 1.0, 1e-12);
    gsb_result_free(r);
    CHECK_ERR(gsb_model_call(m, "fit_transform", in, 1, NULL, &r), GSB_ENOTFOUND,
              "fit_transform");
    gsb_model_free(m);
}

static void test_sessions_and_registry(void)
{
    gsb_session *s;
    CHECK_ERR(gsb_open("tcp://127.0.0.1:1", &s), GSB_EIO, "gsbd");
    CHECK_ERR(gsb_open("bogus", &s), GSB_EINVAL, "unknown session URL");
    CHECK_ERR(gsb_open("local?device=tpu", &s), GSB_EINVAL, "unknown device");
    CHECK_OK(gsb_open("local?device=cpu", &s));
    gsb_model *m;
    CHECK_ERR(gsb_model_create(s, "Nope", NULL, &m), GSB_ENOTFOUND, "unknown estimator");
    gsb_close(s);
    char *info;
    CHECK_OK(gsb_info_json(&info));
    CHECK(strstr(info, "\"KMeans\"") && strstr(info, "\"version\""));
    gsb_free(info);
}

static void test_meta_roundtrip(void)
{
    gsb_model *m = NULL, *back = NULL;
    double x[4] = {1, 2, 3, 5};
    gsb_array X = arr2(x, 2, 2);
    char *json = NULL;
    CHECK_OK(gsb_model_create(sess, "StandardScaler", NULL, &m));
    CHECK_OK(gsb_model_get_meta(m, &json));
    CHECK(json && strcmp(json, "{}") == 0);
    gsb_free(json);
    CHECK_ERR(gsb_model_set_meta(m, "[1, 2]"), GSB_EINVAL, "expected a JSON object");
    CHECK_OK(gsb_model_set_meta(m, "{\"classes\": [\"cat\", \"dog\"]}"));
    CHECK_OK(gsb_model_fit(m, &X, NULL));
    void *blob = NULL;
    size_t len = 0;
    CHECK_OK(gsb_model_export(m, &blob, &len));
    CHECK_OK(gsb_model_import(sess, blob, len, &back));
    CHECK_OK(gsb_model_get_meta(back, &json));
    CHECK(json && strcmp(json, "{\"classes\":[\"cat\",\"dog\"]}") == 0);
    gsb_free(json);
    gsb_free(blob);
    gsb_model_free(back);
    gsb_model_free(m);
}

static void test_rng(void)
{
    gsb__rng a, b;
    gsb__rng_seed(&a, 7);
    gsb__rng_seed(&b, 7);
    int same = 1;
    double sum = 0, sumsq = 0;
    for (int i = 0; i < 20000; i++) {
        double u = gsb__rng_normal(&a);
        same &= u == gsb__rng_normal(&b);
        sum += u;
        sumsq += u * u;
    }
    CHECK(same);
    CHECK(fabs(sum / 20000) < 0.05);
    CHECK(fabs(sumsq / 20000 - 1) < 0.05);
    int64_t counts[3] = {0};
    for (int i = 0; i < 30000; i++)
        counts[gsb__rng_below(&a, 3)]++;
    for (int k = 0; k < 3; k++)
        CHECK(counts[k] > 9000 && counts[k] < 11000);
}

/* The divider's draws are gsb__xoshiro_below's, bit for bit, for any n (small,
 * powers of two and their neighbours, large, near 2^63) */
static void test_xoshiro_divider(void)
{
    const int64_t ns[] = {1, 2, 3, 7, 10, 1000, 99991, 100000, 1 << 20, (1 << 20) + 1,
                          (int64_t)1 << 31, ((int64_t)1 << 31) - 1, (int64_t)1 << 40,
                          ((int64_t)1 << 62) + 12345, INT64_MAX - 1, INT64_MAX};
    int same = 1;
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        gsb__rng a, b;
        gsb__rng_seed(&a, 11 + k);
        gsb__rng_seed(&b, 11 + k);
        gsb__xoshiro_divider d = gsb__xoshiro_divider_of(ns[k]);
        for (int i = 0; i < 20000; i++) {
            int64_t x = gsb__xoshiro_below(a.s, ns[k]), y = gsb__xoshiro_below_div(b.s, &d);
            same &= x == y && y >= 0 && y < ns[k];
        }
        same &= memcmp(a.s, b.s, sizeof a.s) == 0;
    }
    CHECK(same);
}

/* device=auto's rule (dispatch.c): rows x cols elements, or rows^2 x cols for a
 * method whose X is GSB__IN_QUADRATIC (kernel SVMs' fits), against the default
 * thresholds (2^18, 2^27); cpu and cuda are obeyed whatever the size.  A fake
 * session: the rule only compares the GPU backend's pointer. */
static void test_auto_rule(void)
{
    static const gsb__backend fake_gpu;
    struct gsb_session s;
    memset(&s, 0, sizeof s);
    s.be = gsb__cpu_backend();
    s.gpu = &fake_gpu;
    s.device = GSB__DEVICE_AUTO;
    CHECK(gsb__session_backend(&s, 512, 512) == s.gpu);
    CHECK(gsb__session_backend(&s, 511, 512) == s.be);
    CHECK(gsb__session_backend_for(&s, 5000, 20, 0) == s.be);
    CHECK(gsb__session_backend_for(&s, 5000, 20, GSB__IN_X | GSB__IN_QUADRATIC) == s.gpu);
    CHECK(gsb__session_backend_for(&s, 3000, 20, GSB__IN_X | GSB__IN_QUADRATIC) == s.gpu);
    CHECK(gsb__session_backend_for(&s, 2000, 20, GSB__IN_X | GSB__IN_QUADRATIC) == s.be);
    /* rows^2 cols past 2^63 does not wrap */
    CHECK(gsb__session_backend_for(&s, (int64_t)1 << 40, 1 << 20, GSB__IN_QUADRATIC) == s.gpu);
    s.device = GSB__DEVICE_CPU;
    CHECK(gsb__session_backend_for(&s, 5000, 20, GSB__IN_QUADRATIC) == s.be);
    s.device = GSB__DEVICE_CUDA;
    CHECK(gsb__session_backend_for(&s, 10, 2, GSB__IN_QUADRATIC) == s.gpu);
    s.gpu = NULL; /* no GPU: every device setting computes on the CPU */
    CHECK(gsb__session_backend_for(&s, 5000, 20, GSB__IN_QUADRATIC) == s.be);
    /* the kernel SVMs' fits are the quadratic ones; their predictions are not */
    const char *svms[] = {"SVC", "SVR"};
    for (int e = 0; e < 2; e++) {
        const gsb__estimator_desc *est = gsb__registry_find(svms[e]);
        CHECK(est != NULL);
        for (const gsb__method_desc *md = est ? est->methods : NULL; md && md->name; md++)
            CHECK(!(md->inputs[0].flags & GSB__IN_QUADRATIC) == (strcmp(md->name, "fit") != 0));
    }
}

int main(void)
{
    CHECK_OK(gsb_open(NULL, &sess));
    RUN(test_params_defaults_and_update);
    RUN(test_params_errors);
    RUN(test_validation_messages);
    RUN(test_unfitted_and_feature_count);
    RUN(test_layouts_and_dtypes);
    RUN(test_fit_failure_leaves_unfitted);
    RUN(test_progress_and_cancel);
    RUN(test_cancel_from_other_thread);
    RUN(test_composites);
    RUN(test_sessions_and_registry);
    RUN(test_meta_roundtrip);
    RUN(test_rng);
    RUN(test_xoshiro_divider);
    RUN(test_auto_rule);
    gsb_close(sess);
    return testing_done();
}
