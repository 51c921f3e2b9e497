/*
 * selftest.c - the client self-test shared by gsb.exe (Windows, `gsb.exe
 * selftest URL`) and its native Linux twin (built with -DGSB_SELFTEST_MAIN by
 * tests/windows/run-wine-test.sh): against a gsbd at URL it fits KMeans,
 * LinearRegression and StandardScaler on fixed data, predicts, saves, loads
 * and predicts again, and prints every number twice: %.17g and the IEEE bits
 * in hex.  The two builds' outputs are compared byte for byte, so a Windows
 * client that moves any bit differently (byte order, dtype, layout,
 * transport) fails the comparison.  The data comes from integer arithmetic
 * only, so both builds feed the server the same bits.
 */
#ifndef __USE_MINGW_ANSI_STDIO
#define __USE_MINGW_ANSI_STDIO 1 /* C99 printf on Windows: %lld, exact %.17g */
#endif
#include "selftest.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gsb.h"

#define N 60
#define D 3
#define STORE_NAME "gsb-selftest-kmeans"

/* A fixed pseudo-random stream from integers only (an LCG), mapped to
 * multiples of 1/1024 so every value is exact in float32 and float64. */
static uint64_t lcg_state;
static double next_value(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    int v = (int)((lcg_state >> 33) % 2048) - 1024; /* -1024 .. 1023 */
    return v / 1024.0;
}

static void make_data(double *X, double *y)
{
    lcg_state = 12345;
    static const double centres[3][D] = {{0, 0, 0}, {6, 6, 0}, {0, 6, 6}};
    static const double w[D] = {1.5, -2.0, 0.25};
    for (int i = 0; i < N; i++) {
        double s = 0.5;
        for (int j = 0; j < D; j++) {
            X[i * D + j] = centres[i % 3][j] + next_value();
            s += w[j] * X[i * D + j];
        }
        y[i] = s + next_value() / 8;
    }
}

static void print_number(FILE *out, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    fprintf(out, " %.17g(%016" PRIx64 ")", v, bits);
}

/* Print every element of a (any dtype), one line, prefixed by what. */
static void print_array(FILE *out, const char *what, const gsb_array *a)
{
    int64_t n = a->ndim == 0 ? 1 : a->shape[0] * (a->ndim == 2 ? a->shape[1] : 1);
    fprintf(out, "%s dtype=%d shape=(%" PRId64 ",%" PRId64 ") ndim=%d:", what, (int)a->dtype,
            a->ndim >= 1 ? a->shape[0] : 0, a->ndim == 2 ? a->shape[1] : 0, a->ndim);
    for (int64_t i = 0; i < n; i++) {
        switch (a->dtype) {
        case GSB_F64: print_number(out, ((const double *)a->data)[i]); break;
        case GSB_F32: print_number(out, ((const float *)a->data)[i]); break;
        case GSB_I32: fprintf(out, " %" PRId32, ((const int32_t *)a->data)[i]); break;
        case GSB_I64: fprintf(out, " %" PRId64, ((const int64_t *)a->data)[i]); break;
        default: fprintf(out, " ?"); break;
        }
    }
    fprintf(out, "\n");
}

static int fail(FILE *out, const char *step, int rc)
{
    fprintf(out, "selftest FAILED at %s: %s: %s\n", step, gsb_status_name(rc), gsb_errmsg());
    return 1;
}

#define STEP(what, call)                                                                  \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != GSB_OK) {                                                              \
            status = fail(out, what, rc_);                                                \
            goto done;                                                                    \
        }                                                                                 \
    } while (0)

static int print_attr(FILE *out, gsb_model *m, const char *name)
{
    gsb_result *r = NULL;
    int rc = gsb_model_get_attr(m, name, &r);
    if (rc != GSB_OK)
        return fail(out, name, rc);
    print_array(out, name, gsb_result_array(r, 0));
    gsb_result_free(r);
    return 0;
}

static int print_call(FILE *out, gsb_model *m, const char *method, const gsb_array *X,
                      const char *label, gsb_result **keep)
{
    const gsb_array *in[1] = {X};
    gsb_result *r = NULL;
    int rc = gsb_model_call(m, method, in, 1, NULL, &r);
    if (rc != GSB_OK)
        return fail(out, label, rc);
    if (gsb_result_count(r) < 1) {
        gsb_result_free(r);
        fprintf(out, "selftest FAILED at %s: no result\n", label);
        return 1;
    }
    print_array(out, label, gsb_result_array(r, 0));
    if (keep)
        *keep = r;
    else
        gsb_result_free(r);
    return 0;
}

static int same_array(const gsb_array *a, const gsb_array *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->shape[0] != b->shape[0] ||
        a->shape[1] != b->shape[1])
        return 0;
    int64_t n = a->ndim == 0 ? 1 : a->shape[0] * (a->ndim == 2 ? a->shape[1] : 1);
    return memcmp(a->data, b->data, (size_t)n * gsb_dtype_size(a->dtype)) == 0;
}

int gsb_selftest(const char *url, FILE *out)
{
    int status = 0;
    gsb_session *s = NULL;
    gsb_model *km = NULL, *lr = NULL, *sc = NULL, *loaded = NULL;
    gsb_result *before = NULL, *after = NULL;
    double X[N * D], y[N];
    float X32[N * D];
    make_data(X, y);
    for (int i = 0; i < N * D; i++)
        X32[i] = (float)X[i];
    gsb_array ax = gsb_array_2d(X, GSB_F64, N, D);
    gsb_array ax32 = gsb_array_2d(X32, GSB_F32, N, D);
    gsb_array ay = gsb_array_1d(y, GSB_F64, N);

    fprintf(out, "gsb selftest (client %s)\n", gsb_version());
    STEP("connect", gsb_open(url, &s));
    fprintf(out, "connected\n");

    /* KMeans: deterministic with a fixed seed and one initialisation */
    STEP("KMeans create",
         gsb_model_create(s, "KMeans", "{\"n_clusters\":3,\"random_state\":0,\"n_init\":1}", &km));
    fprintf(out, "estimator %s\n", gsb_model_estimator(km));
    STEP("KMeans fit", gsb_model_fit(km, &ax, NULL));
    fprintf(out, "KMeans fitted=%d\n", gsb_model_is_fitted(km));
    if (print_attr(out, km, "cluster_centers_") || print_attr(out, km, "inertia_") ||
        print_call(out, km, "predict", &ax, "KMeans.predict", &before) ||
        print_call(out, km, "transform", &ax32, "KMeans.transform(float32)", NULL)) {
        status = 1;
        goto done;
    }

    /* LinearRegression: exact least squares, float64 */
    STEP("LinearRegression create", gsb_model_create(s, "LinearRegression", NULL, &lr));
    STEP("LinearRegression fit", gsb_model_fit(lr, &ax, &ay));
    if (print_attr(out, lr, "coef_") || print_attr(out, lr, "intercept_") ||
        print_call(out, lr, "predict", &ax, "LinearRegression.predict", NULL)) {
        status = 1;
        goto done;
    }

    /* StandardScaler on float32: the dtype must survive the trip */
    STEP("StandardScaler create", gsb_model_create(s, "StandardScaler", NULL, &sc));
    STEP("StandardScaler fit", gsb_model_fit(sc, &ax32, NULL));
    if (print_attr(out, sc, "mean_") || print_attr(out, sc, "scale_") ||
        print_call(out, sc, "transform", &ax32, "StandardScaler.transform", NULL)) {
        status = 1;
        goto done;
    }

    /* persistence: save on the server, load as a new model, same predictions */
    STEP("save", gsb_model_save(km, STORE_NAME));
    STEP("load", gsb_model_load(s, STORE_NAME, &loaded));
    fprintf(out, "loaded %s fitted=%d\n", gsb_model_estimator(loaded),
            gsb_model_is_fitted(loaded));
    if (print_call(out, loaded, "predict", &ax, "loaded KMeans.predict", &after)) {
        status = 1;
        goto done;
    }
    if (!same_array(gsb_result_array(before, 0), gsb_result_array(after, 0))) {
        fprintf(out, "selftest FAILED: the loaded model predicts differently\n");
        status = 1;
        goto done;
    }
    STEP("delete", gsb_model_delete(s, STORE_NAME));
    fprintf(out, "selftest: ok\n");
done:
    gsb_result_free(before);
    gsb_result_free(after);
    gsb_model_free(km);
    gsb_model_free(lr);
    gsb_model_free(sc);
    gsb_model_free(loaded);
    gsb_close(s);
    return status;
}

#ifdef GSB_SELFTEST_MAIN
int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s URL\n", argv[0]);
        return 2;
    }
    return gsb_selftest(argv[1], stdout);
}
#endif
