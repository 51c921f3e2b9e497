/*
 * test_classes.c - the classifiers' shared label handling (estimators/
 * classes.c) and Python's float repr for messages (estimators/pyrepr.c),
 * called directly: classes_ and class indices of fresh random labels
 * against a naive reference, the continuous-target check, class_weight
 * (None, 'balanced' with and without sample weights, dicts, scikit-learn's
 * errors), and repr() strings produced by Python.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/estimator.h"
#include "estimators/common/classes.h"
#include "estimators/common/pyrepr.h"
#include "testing.h"

static const gsb__estimator_desc fake_est = {"Fake", "test", GSB__KIND_CLASSIFIER, NULL, NULL,
                                             NULL, "a classifier for the tests"};

/* A context whose parameters are params (JSON); free with ctx_free. */
static gsb__ctx ctx_with(const char *params)
{
    gsb__ctx c;
    memset(&c, 0, sizeof c);
    c.est = &fake_est;
    c.params = json_loads(params, 0, NULL);
    CHECK(c.params != NULL);
    return c;
}

static void ctx_free(gsb__ctx *c) { json_decref((json_t *)c->params); }

static gsb__tensor labels_of(double *y, int64_t n)
{
    gsb__tensor t = gsb__tensor_host_view(y, GSB_F64, n, 1);
    gsb__tensor_as_1d(&t);
    return t;
}

static void test_labels_encode(void)
{
    static const double pool[6] = {7, -3, 0, 2, 1e6, -1e9};
    enum { n = 300 };
    double y[n];
    int32_t idx[n];
    gsb__ctx c = ctx_with("{}");
    testing_seed(5);
    /* classes drawn from the first 5 of the pool: -1e9 never appears */
    for (int i = 0; i < n; i++)
        y[i] = pool[(int)(testing_uniform() * 5)];
    gsb__tensor yt = labels_of(y, n);
    double *cls = NULL;
    int64_t K = 0;
    CHECK_OK(gsb__labels_encode(&c, &yt, &cls, &K, idx));
    static const double want[5] = {-3, 0, 2, 7, 1e6};
    CHECK(K == 5);
    for (int64_t k = 0; cls && k < K && k < 5; k++)
        CHECK(cls[k] == want[k]);
    int ok = 1;
    for (int i = 0; cls && i < n; i++)
        ok &= idx[i] >= 0 && idx[i] < K && cls[idx[i]] == y[i];
    CHECK(ok);
    free(cls);

    /* one class: classes_ of length 1, every index 0 */
    for (int i = 0; i < n; i++)
        y[i] = -2;
    cls = NULL;
    CHECK_OK(gsb__labels_encode(&c, &yt, &cls, &K, idx));
    CHECK(K == 1 && cls && cls[0] == -2);
    ok = 1;
    for (int i = 0; i < n; i++)
        ok &= idx[i] == 0;
    CHECK(ok);
    free(cls);

    /* a non-integral value is a continuous target, whatever else y holds */
    y[n - 1] = 2.5;
    cls = NULL;
    CHECK_ERR(gsb__labels_check(&yt), GSB_EINVAL,
              "Unknown label type: continuous. Maybe you are trying to fit a classifier");
    CHECK_ERR(gsb__labels_encode(&c, &yt, &cls, &K, idx), GSB_EINVAL,
              "Unknown label type: continuous.");
    CHECK(cls == NULL);
    ctx_free(&c);
}

/* Class counts on both sides of the scan's limit (64 classes; more are found
 * by sorting): classes_ and indices as a naive reference finds them. */
static void test_labels_encode_counts(void)
{
    static const int64_t counts[] = {2, 63, 64, 65, 300};
    enum { n = 2000 };
    double *y = malloc(n * sizeof *y), *vals = malloc(300 * sizeof *vals);
    int32_t *idx = malloc(n * sizeof *idx);
    gsb__ctx c = ctx_with("{}");
    CHECK(y && vals && idx);
    testing_seed(11);
    for (size_t t = 0; y && vals && idx && t < sizeof counts / sizeof counts[0]; t++) {
        int64_t K = counts[t];
        /* K distinct integers, drawn apart (a step of 1..3), in a shuffled order */
        double v = -1000 * testing_uniform();
        for (int64_t k = 0; k < K; k++) {
            v += 1 + (int)(testing_uniform() * 3);
            vals[k] = floor(v);
        }
        for (int i = 0; i < n; i++) /* every class at least once, then at random */
            y[i] = vals[i < K ? (K - 1 - i) : (int64_t)(testing_uniform() * (double)K)];
        gsb__tensor yt = labels_of(y, n);
        double *cls = NULL;
        int64_t got = 0;
        CHECK_OK(gsb__labels_encode(&c, &yt, &cls, &got, idx));
        int ok = got == K && cls != NULL;
        for (int64_t k = 0; ok && k < K; k++)
            ok = cls[k] == vals[k]; /* vals are increasing: the sorted classes */
        for (int i = 0; ok && i < n; i++)
            ok = idx[i] >= 0 && idx[i] < K && cls[idx[i]] == y[i];
        CHECK(ok);
        free(cls);
    }
    ctx_free(&c);
    free(y);
    free(vals);
    free(idx);
}

/* Random class indices (every class present) and weights for n samples. */
static void random_problem(int64_t n, int64_t K, int32_t *yi, double *sw)
{
    for (int64_t i = 0; i < n; i++) {
        yi[i] = i < K ? (int32_t)i : (int32_t)(testing_uniform() * (double)K);
        sw[i] = 0.1 + 2 * testing_uniform();
    }
}

static void test_class_weights_balanced(void)
{
    enum { n = 200, K = 4 };
    int32_t yi[n];
    double sw[n], cw[K], cls[K] = {0, 1, 2, 3};
    testing_seed(9);
    random_problem(n, K, yi, sw);
    gsb__ctx c = ctx_with("{\"class_weight\": \"balanced\"}");
    CHECK(gsb__class_weight_given(&c));

    /* counts: n / (K * bincount(y)) */
    CHECK_OK(gsb__class_weights(&c, cls, K, yi, n, NULL, cw));
    for (int k = 0; k < K; k++) {
        int cnt = 0;
        for (int i = 0; i < n; i++)
            cnt += yi[i] == k;
        CHECK_CLOSE(cw[k], (double)n / (K * (double)cnt), 1e-15);
    }
    /* weighted: sum(w) / (K * weighted bincount(y)) */
    CHECK_OK(gsb__class_weights(&c, cls, K, yi, n, sw, cw));
    double total = 0, per[K] = {0};
    for (int i = 0; i < n; i++) {
        total += sw[i];
        per[yi[i]] += sw[i];
    }
    for (int k = 0; k < K; k++)
        CHECK_CLOSE(cw[k], total / (K * per[k]), 1e-13);
    /* a class whose samples all weigh 0 gets 0, not inf */
    for (int i = 0; i < n; i++)
        if (yi[i] == 2)
            sw[i] = 0;
    CHECK_OK(gsb__class_weights(&c, cls, K, yi, n, sw, cw));
    CHECK(cw[2] == 0 && cw[0] > 0 && isfinite(cw[0]));
    ctx_free(&c);

    c = ctx_with("{\"class_weight\": null}");
    CHECK(!gsb__class_weight_given(&c));
    CHECK_OK(gsb__class_weights(&c, cls, K, yi, n, sw, cw));
    for (int k = 0; k < K; k++)
        CHECK(cw[k] == 1.0);
    ctx_free(&c);
    c = ctx_with("{}");
    CHECK(!gsb__class_weight_given(&c));
    CHECK_OK(gsb__class_weights(&c, cls, K, yi, n, NULL, cw));
    CHECK(cw[0] == 1.0 && cw[3] == 1.0);
    ctx_free(&c);
}

static void test_class_weights_dict(void)
{
    enum { n = 6, K = 3 };
    const double cls[K] = {-1, 0, 4};
    const int32_t yi[n] = {0, 1, 2, 2, 1, 0};
    double cw[K];

    /* keys are class values written as numbers; missing classes weigh 1 */
    gsb__ctx c = ctx_with("{\"class_weight\": {\"-1\": 2.0, \"4.0\": 0.5}}");
    CHECK_OK(gsb__class_weights(&c, cls, K, yi, n, NULL, cw));
    CHECK(cw[0] == 2.0 && cw[1] == 1.0 && cw[2] == 0.5);
    ctx_free(&c);

    /* extra keys are fine when every class has one */
    c = ctx_with("{\"class_weight\": {\"-1\": 1, \"0\": 3, \"4\": 1, \"9\": 5}}");
    CHECK_OK(gsb__class_weights(&c, cls, K, yi, n, NULL, cw));
    CHECK(cw[0] == 1.0 && cw[1] == 3.0 && cw[2] == 1.0);
    ctx_free(&c);

    c = ctx_with("{\"class_weight\": {}}");
    CHECK_OK(gsb__class_weights(&c, cls, K, yi, n, NULL, cw));
    CHECK(cw[0] == 1.0 && cw[1] == 1.0 && cw[2] == 1.0);
    ctx_free(&c);

    /* scikit-learn's compute_class_weight: some classes without a key and a
     * key that matches no class */
    c = ctx_with("{\"class_weight\": {\"0\": 1, \"7\": 2}}");
    CHECK_ERR(gsb__class_weights(&c, cls, K, yi, n, NULL, cw), GSB_EINVAL,
              "The classes, [-1, 4], are not in class_weight");
    ctx_free(&c);

    c = ctx_with("{\"class_weight\": {\"0\": \"x\"}}");
    CHECK_ERR(gsb__class_weights(&c, cls, K, yi, n, NULL, cw), GSB_EINVAL,
              "Fake: class_weight['0'] must be a number");
    ctx_free(&c);
}

static void test_py_float_repr(void)
{
    /* python3 -c "print(repr(v))" for each value */
    static const struct {
        double v;
        const char *repr;
    } cases[] = {
        {1.0, "1.0"},
        {0.5, "0.5"},
        {1e-05, "1e-05"},
        {100.0, "100.0"},
        {1e16, "1e+16"},
        {2.7927080308475616e16, "2.7927080308475616e+16"},
        {-2.5, "-2.5"},
        {0.30000000000000004, "0.30000000000000004"},
        {1e22, "1e+22"},
        {123456789012.5, "123456789012.5"},
        {-0.0, "-0.0"},
        {0.0001, "0.0001"},
        {0.00015, "0.00015"},
        {1e15, "1000000000000000.0"},
        {5e-324, "5e-324"},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gsb__py_float_repr(cases[i].v, buf, sizeof buf);
        if (strcmp(buf, cases[i].repr) != 0) {
            fprintf(stderr, "repr(%.17g): got %s, expected %s\n", cases[i].v, buf,
                    cases[i].repr);
            CHECK(0);
        }
    }
    gsb__py_float_repr(INFINITY, buf, sizeof buf);
    CHECK(strcmp(buf, "inf") == 0);
    gsb__py_float_repr(-INFINITY, buf, sizeof buf);
    CHECK(strcmp(buf, "-inf") == 0);
    gsb__py_float_repr(NAN, buf, sizeof buf);
    CHECK(strcmp(buf, "nan") == 0);
    /* a short buffer is truncated, never overrun */
    char small[4];
    gsb__py_float_repr(123456.0, small, sizeof small);
    CHECK(strlen(small) == 3);
}

int main(void)
{
    RUN(test_labels_encode);
    RUN(test_labels_encode_counts);
    RUN(test_class_weights_balanced);
    RUN(test_class_weights_dict);
    RUN(test_py_float_repr);
    return testing_done();
}
