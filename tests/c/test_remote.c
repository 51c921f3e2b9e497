/*
 * test_remote.c - remote sessions (src/session/remote.c) against an in-process
 * gsbd (gsb_server_start), over TCP and a Unix socket.
 *
 * The main check is parity: the same scenarios run on a local session and on
 * both remote ones, and every result, error status and message, JSON text
 * and exported blob is appended to a transcript; the transcripts must be
 * equal byte for byte.  Then the transfer routes (data handles, the shared
 * arena with zero and one copy, chunked streaming), progress and
 * cancellation, 64 threads on one session, and the failure modes (closed
 * port, a server that stops, a server that breaks the protocol, tokens).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"
#include "core/model.h"
#include "net/arena.h"
#include "net/wire.h"
#include "session/remote.h"

static char DIR_[256];
static gsb_server *SRV;
static char TCP_URL[300], UNIX_URL[300];
static gsb_session *LOCAL, *TCP, *UNX;

#define N 300
#define D 6
static double X[N * D], YREG[N], YCLS[N];
static float XF[N * D];
/* for long fits: KMeans iterations of about a millisecond */
#define PR 4000
#define PC 8
static double PX[PR * PC];

/* ---- transcripts ------------------------------------------------------------ */

typedef struct tr {
    unsigned char *b;
    size_t n, cap;
} tr;

static void tr_bytes(tr *t, const void *p, size_t n)
{
    if (t->n + n > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->n + n)
            cap *= 2;
        unsigned char *b = realloc(t->b, cap);
        if (!b)
            abort();
        t->b = b;
        t->cap = cap;
    }
    if (n)
        memcpy(t->b + t->n, p, n);
    t->n += n;
}
static void tr_str(tr *t, const char *s) { tr_bytes(t, s ? s : "(null)", strlen(s ? s : "(null)") + 1); }
static void tr_i64(tr *t, int64_t v) { tr_bytes(t, &v, sizeof v); }

static int64_t numel(const gsb_array *a)
{
    return a->ndim == 0 ? 1 : a->ndim == 1 ? a->shape[0] : a->shape[0] * a->shape[1];
}

static void tr_array(tr *t, const gsb_array *a)
{
    tr_i64(t, a->dtype);
    tr_i64(t, a->ndim);
    tr_i64(t, a->ndim >= 1 ? a->shape[0] : 0);
    tr_i64(t, a->ndim == 2 ? a->shape[1] : 0);
    tr_bytes(t, a->data, (size_t)numel(a) * gsb_dtype_size(a->dtype));
}

static void tr_result(tr *t, const gsb_result *r)
{
    tr_i64(t, gsb_result_count(r));
    for (int i = 0; i < gsb_result_count(r); i++) {
        tr_str(t, gsb_result_name(r, i));
        tr_array(t, gsb_result_array(r, i));
    }
}

/* the status, and the message when it failed */
static void tr_status(tr *t, int rc)
{
    tr_i64(t, rc);
    if (rc != GSB_OK)
        tr_str(t, gsb_errmsg());
}

static void tr_json(tr *t, int rc, char *s)
{
    tr_status(t, rc);
    if (rc == GSB_OK)
        tr_str(t, s);
    gsb_free(s);
}

static int tr_eq(const tr *a, const tr *b)
{
    return a->n == b->n && memcmp(a->b, b->b, a->n) == 0;
}

/* Equal transcripts; on a difference, say where. */
static int tr_same(const tr *a, const tr *b, const char *what)
{
    if (tr_eq(a, b))
        return 1;
    size_t i = 0;
    while (i < a->n && i < b->n && a->b[i] == b->b[i])
        i++;
    fprintf(stderr, "%s: transcripts differ at byte %zu (sizes %zu and %zu)\n", what, i, a->n,
            b->n);
    return 0;
}

static void tr_free(tr *t) { free(t->b); }

/* ---- helpers ------------------------------------------------------------------ */

static void call_into(tr *t, gsb_model *m, const char *method, const gsb_array *const *in,
                      int n, const char *opts)
{
    gsb_result *r = NULL;
    int rc = gsb_model_call(m, method, in, n, opts, &r);
    tr_str(t, method);
    tr_status(t, rc);
    if (rc == GSB_OK)
        tr_result(t, r);
    gsb_result_free(r);
}

static void call1(tr *t, gsb_model *m, const char *method, const gsb_array *a)
{
    const gsb_array *in[1] = {a};
    call_into(t, m, method, in, 1, NULL);
}

static void call2(tr *t, gsb_model *m, const char *method, const gsb_array *a, const gsb_array *b)
{
    const gsb_array *in[2] = {a, b};
    call_into(t, m, method, in, 2, NULL);
}

static void attrs_into(tr *t, gsb_model *m, const char *const *names)
{
    for (; *names; names++) {
        gsb_result *r = NULL;
        int rc = gsb_model_get_attr(m, *names, &r);
        tr_str(t, *names);
        tr_status(t, rc);
        if (rc == GSB_OK)
            tr_result(t, r);
        gsb_result_free(r);
    }
    char *s = NULL;
    int rc = gsb_model_list_attrs(m, &s);
    tr_json(t, rc, s);
    tr_i64(t, gsb_model_is_fitted(m));
}

static void export_into(tr *t, gsb_model *m)
{
    void *b = NULL;
    size_t n = 0;
    int rc = gsb_model_export(m, &b, &n);
    tr_status(t, rc);
    if (rc == GSB_OK)
        tr_bytes(t, b, n);
    gsb_free(b);
}

static void params_into(tr *t, gsb_model *m)
{
    char *s = NULL;
    int rc = gsb_model_get_params(m, &s);
    tr_json(t, rc, s);
}

static gsb_model *create(tr *t, gsb_session *s, const char *est, const char *params)
{
    gsb_model *m = NULL;
    int rc = gsb_model_create(s, est, params, &m);
    tr_str(t, est);
    tr_status(t, rc);
    return m;
}

static int64_t stat_of(gsb_session *s, int which)
{
    gsb__remote_stats st;
    gsb__remote_get_stats(gsb__remote_of(s), &st);
    switch (which) {
    case 0: return (int64_t)st.shm_zero_copy;
    case 1: return (int64_t)st.shm_one_copy;
    case 2: return (int64_t)st.chunked;
    default: return st.shm;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the parity scenarios ------------------------------------------------------ */

static void scenario_estimators(gsb_session *s, tr *t)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D), Xf = gsb_array_2d(XF, GSB_F32, N, D);
    gsb_array yr = gsb_array_1d(YREG, GSB_F64, N), yc = gsb_array_1d(YCLS, GSB_F64, N);

    gsb_model *km = create(t, s, "KMeans", "{\"n_clusters\": 3, \"random_state\": 0, \"n_init\": 2}");
    if (km) {
        call1(t, km, "fit", &Xa);
        call1(t, km, "predict", &Xa);
        call1(t, km, "transform", &Xa);
        call1(t, km, "score", &Xa);
        call1(t, km, "fit_predict", &Xf);
        static const char *const names[] = {"cluster_centers_", "labels_", "inertia_", "n_iter_",
                                            "n_features_in_", NULL};
        attrs_into(t, km, names);
        params_into(t, km);
        tr_status(t, gsb_model_set_params(km, "{\"max_iter\": 77, \"tol\": 0.001}"));
        params_into(t, km);
        tr_status(t, gsb_model_set_meta(km, "{\"labels\": [\"a\", \"b\"], \"v\": 2.5}"));
        char *meta = NULL;
        int rc = gsb_model_get_meta(km, &meta);
        tr_json(t, rc, meta);
        export_into(t, km);
        gsb_model_free(km);
    }

    gsb_model *lr = create(t, s, "LinearRegression", NULL);
    if (lr) {
        call2(t, lr, "fit", &Xa, &yr);
        call1(t, lr, "predict", &Xa);
        call2(t, lr, "score", &Xa, &yr);
        static const char *const names[] = {"coef_", "intercept_", "rank_", "singular_values_",
                                            NULL};
        attrs_into(t, lr, names);
        float yf[N];
        for (int i = 0; i < N; i++)
            yf[i] = (float)YREG[i];
        gsb_array yfa = gsb_array_1d(yf, GSB_F32, N);
        call2(t, lr, "fit", &Xf, &yfa);
        call1(t, lr, "predict", &Xf);
        attrs_into(t, lr, names);
        export_into(t, lr);
        gsb_model_free(lr);
    }

    gsb_model *lg = create(t, s, "LogisticRegression", "{\"max_iter\": 200}");
    if (lg) {
        call2(t, lg, "fit", &Xa, &yc);
        call1(t, lg, "predict", &Xa);
        call1(t, lg, "predict_proba", &Xa);
        call2(t, lg, "score", &Xa, &yc);
        static const char *const names[] = {"coef_", "intercept_", "classes_", "n_iter_", NULL};
        attrs_into(t, lg, names);
        export_into(t, lg);
        gsb_model_free(lg);
    }

    gsb_model *pca = create(t, s, "PCA", "{\"n_components\": 3}");
    if (pca) {
        call1(t, pca, "fit", &Xa);
        gsb_result *r = NULL;
        const gsb_array *in[1] = {&Xa};
        int rc = gsb_model_call(pca, "transform", in, 1, NULL, &r);
        tr_status(t, rc);
        if (rc == GSB_OK) {
            tr_result(t, r);
            call1(t, pca, "inverse_transform", gsb_result_array(r, 0));
        }
        gsb_result_free(r);
        call1(t, pca, "fit_transform", &Xf);
        static const char *const names[] = {"components_", "explained_variance_",
                                            "explained_variance_ratio_", "singular_values_",
                                            "mean_", NULL};
        attrs_into(t, pca, names);
        export_into(t, pca);
        gsb_model_free(pca);
    }

    gsb_model *ss = create(t, s, "StandardScaler", NULL);
    if (ss) {
        call1(t, ss, "fit", &Xf);
        call1(t, ss, "transform", &Xf);
        call1(t, ss, "inverse_transform", &Xf);
        /* Fortran order: the transpose of a D x N C array */
        static double xt[D * N];
        for (int i = 0; i < N; i++)
            for (int j = 0; j < D; j++)
                xt[j * N + i] = X[i * D + j];
        gsb_array F = {xt, GSB_F64, 2, {N, D}, {8, 8 * N}};
        call1(t, ss, "fit", &F);
        /* strided: every other row */
        gsb_array S = {X, GSB_F64, 2, {N / 2, D}, {16 * D, 8}};
        call1(t, ss, "transform", &S);
        static const char *const names[] = {"mean_", "scale_", "var_", "n_samples_seen_", NULL};
        attrs_into(t, ss, names);
        export_into(t, ss);
        gsb_model_free(ss);
    }
}

static void scenario_errors(gsb_session *s, tr *t)
{
    static double bad[N * D];
    memcpy(bad, X, sizeof bad);
    bad[7] = NAN;
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D), Xb = gsb_array_2d(bad, GSB_F64, N, D);
    gsb_array X3 = gsb_array_2d(X, GSB_F64, 3, D), Xn = gsb_array_2d(X, GSB_F64, N, D - 1);

    gsb_model *m = create(t, s, "KMeans", "{\"n_clusters\": 0}");
    gsb_model_free(m);
    m = create(t, s, "NoSuchEstimator", NULL);
    gsb_model_free(m);
    m = create(t, s, "KMeans", "{\"n_clusters\": 3, \"bogus\": 1}");
    gsb_model_free(m);
    m = create(t, s, "KMeans", "{\"n_clusters\": ");
    gsb_model_free(m);

    m = create(t, s, "KMeans", "{\"n_clusters\": 8, \"random_state\": 1, \"n_init\": 1}");
    if (!m)
        return;
    call1(t, m, "predict", &Xa);  /* unfitted */
    gsb_result *r = NULL;
    tr_status(t, gsb_model_get_attr(m, "cluster_centers_", &r));
    gsb_result_free(r);
    call1(t, m, "fit", &Xb);      /* NaN */
    tr_i64(t, gsb_model_is_fitted(m));
    call1(t, m, "fit", &Xa);
    tr_i64(t, gsb_model_is_fitted(m));
    call1(t, m, "fit", &Xb);      /* a validation error leaves it fitted */
    tr_i64(t, gsb_model_is_fitted(m));
    call1(t, m, "fit", &X3);      /* fails inside fit: unfitted */
    tr_i64(t, gsb_model_is_fitted(m));
    call1(t, m, "fit", &Xa);
    call1(t, m, "predict", &Xn);  /* wrong number of features */
    call1(t, m, "frobnicate", &Xa);
    tr_status(t, gsb_model_get_attr(m, "nope_", &r));
    gsb_result_free(r);
    tr_status(t, gsb_model_set_params(m, "{\"n_clusters\": \"x\"}"));
    tr_status(t, gsb_model_set_params(m, "[1]"));
    tr_status(t, gsb_model_set_meta(m, "{"));
    const gsb_array *in3[3] = {&Xa, NULL, NULL};
    call_into(t, m, "fit", in3, 3, "{");
    call_into(t, m, "predict", in3, 3, NULL); /* too many inputs */
    gsb_model_free(m);

    m = create(t, s, "LinearRegression", NULL);
    call1(t, m, "fit", &Xa); /* no y */
    gsb_model_free(m);

    tr_status(t, gsb_model_load(s, "no-such-model", &m));
    tr_status(t, gsb_model_import(s, "garbage!", 8, &m));
}

static void test_parity(void)
{
    tr l = {0}, a = {0}, b = {0};
    scenario_estimators(LOCAL, &l);
    scenario_estimators(TCP, &a);
    scenario_estimators(UNX, &b);
    CHECK(l.n > 10000);
    CHECK(tr_same(&l, &a, "estimators tcp"));
    CHECK(tr_same(&l, &b, "estimators unix"));
    tr_free(&l), tr_free(&a), tr_free(&b);
    memset(&l, 0, sizeof l), memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    scenario_errors(LOCAL, &l);
    scenario_errors(TCP, &a);
    scenario_errors(UNX, &b);
    CHECK(tr_same(&l, &a, "errors tcp"));
    CHECK(tr_same(&l, &b, "errors unix"));
    tr_free(&l), tr_free(&a), tr_free(&b);
}

/* The engine's words, checked by name too (parity alone would pass if both were wrong). */
static void test_error_words(void)
{
    static double bad[N * D];
    memcpy(bad, X, sizeof bad);
    bad[3] = NAN;
    gsb_array Xb = gsb_array_2d(bad, GSB_F64, N, D), Xa = gsb_array_2d(X, GSB_F64, N, D);
    gsb_session *ss[2] = {TCP, UNX};
    for (int i = 0; i < 2; i++) {
        gsb_model *m = NULL;
        CHECK_OK(gsb_model_create(ss[i], "KMeans", "{\"n_clusters\": 2}", &m));
        CHECK_ERR(gsb_model_fit(m, &Xb, NULL), GSB_EINVAL, "Input X contains NaN");
        const gsb_array *in[1] = {&Xa};
        CHECK_ERR(gsb_model_call(m, "predict", in, 1, NULL, NULL), GSB_ENOTFITTED,
                  "This KMeans instance is not fitted yet");
        CHECK_ERR(gsb_model_set_params(m, "{\"n_clusters\": -1}"), GSB_EPARAM, "n_clusters");
        gsb_model_free(m);
        m = NULL;
        CHECK_ERR(gsb_model_create(ss[i], "Nope", NULL, &m), GSB_ENOTFOUND,
                  "unknown estimator 'Nope'");
        CHECK(m == NULL);
        /* freeing a model keeps the thread's last message */
        CHECK_OK(gsb_model_create(ss[i], "PCA", NULL, &m));
        CHECK_ERR(gsb_model_call(m, "transform", in, 1, NULL, NULL), GSB_ENOTFITTED, "PCA");
        gsb_model_free(m);
        CHECK(strstr(gsb_errmsg(), "PCA") != NULL);
    }
}

/* A call's warnings travel in the reply: each session lists what a local one
 * lists, and the next call starts with none. */
static void test_warnings(void)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D), ya = gsb_array_1d(YCLS, GSB_F64, N);
    gsb_session *ss[3] = {LOCAL, TCP, UNX};
    char local[4096] = "";
    for (int i = 0; i < 3; i++) {
        gsb_model *m = NULL;
        CHECK_OK(gsb_model_create(ss[i], "LogisticRegression", "{\"max_iter\": 1}", &m));
        CHECK_OK(gsb_model_fit(m, &Xa, &ya));
        CHECK(strstr(gsb_warnings(), "lbfgs failed to converge after 1 iteration(s)") != NULL);
        if (i == 0)
            snprintf(local, sizeof local, "%s", gsb_warnings());
        else
            CHECK(strcmp(gsb_warnings(), local) == 0);
        const gsb_array *in[1] = {&Xa};
        CHECK_OK(gsb_model_call(m, "predict", in, 1, NULL, NULL));
        CHECK(strcmp(gsb_warnings(), "[]") == 0);
        gsb_model_free(m);
    }
}

/* ---- blobs and the store ----------------------------------------------------------- */

static void predict_into(tr *t, gsb_model *m, const char *method)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
    call1(t, m, method, &Xa);
}

static void test_export_import(void)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D), yc = gsb_array_1d(YCLS, GSB_F64, N);
    gsb_session *remote[2] = {TCP, UNX};
    for (int k = 0; k < 2; k++) {
        /* local -> remote */
        gsb_model *m = NULL, *r = NULL, *back = NULL;
        CHECK_OK(gsb_model_create(LOCAL, "LogisticRegression", NULL, &m));
        CHECK_OK(gsb_model_fit(m, &Xa, &yc));
        CHECK_OK(gsb_model_set_meta(m, "{\"who\": \"local\"}"));
        void *blob = NULL, *blob2 = NULL, *blob3 = NULL;
        size_t n = 0, n2 = 0, n3 = 0;
        CHECK_OK(gsb_model_export(m, &blob, &n));
        CHECK_OK(gsb_model_import(remote[k], blob, n, &r));
        if (!r) {
            gsb_model_free(m);
            gsb_free(blob);
            continue;
        }
        CHECK(gsb_model_is_fitted(r));
        CHECK(strcmp(gsb_model_estimator(r), "LogisticRegression") == 0);
        tr a = {0}, b = {0};
        predict_into(&a, m, "predict_proba");
        predict_into(&b, r, "predict_proba");
        CHECK(tr_same(&a, &b, "import into remote"));
        /* remote -> local: the same bytes come back */
        CHECK_OK(gsb_model_export(r, &blob2, &n2));
        CHECK(n2 == n && blob2 && memcmp(blob, blob2, n) == 0);
        CHECK_OK(gsb_model_import(LOCAL, blob2, n2, &back));
        CHECK_OK(gsb_model_export(back, &blob3, &n3));
        CHECK(n3 == n && blob3 && memcmp(blob, blob3, n) == 0);
        char *meta = NULL;
        CHECK_OK(gsb_model_get_meta(r, &meta));
        CHECK(meta && strcmp(meta, "{\"who\":\"local\"}") == 0);
        gsb_free(meta);
        tr_free(&a), tr_free(&b);
        gsb_free(blob), gsb_free(blob2), gsb_free(blob3);
        gsb_model_free(m), gsb_model_free(r), gsb_model_free(back);
    }
    /* a blob too large for one frame travels as chunks */
    gsb_session *small = NULL;
    char url[400];
    snprintf(url, sizeof url, "%s?max_inline=4096", TCP_URL);
    CHECK_OK(gsb_open(url, &small));
    if (small) {
        gsb_model *m = NULL, *r = NULL;
        CHECK_OK(gsb_model_create(LOCAL, "KMeans", "{\"n_clusters\": 100, \"n_init\": 1, "
                                  "\"random_state\": 3, \"max_iter\": 2}", &m));
        CHECK_OK(gsb_model_fit(m, &Xa, NULL));
        void *blob = NULL, *blob2 = NULL;
        size_t n = 0, n2 = 0;
        CHECK_OK(gsb_model_export(m, &blob, &n));
        CHECK(n > 4096);
        int64_t before = stat_of(small, 2);
        CHECK_OK(gsb_model_import(small, blob, n, &r));
        CHECK(stat_of(small, 2) == before + 1);
        if (r) {
            CHECK_OK(gsb_model_export(r, &blob2, &n2));
            CHECK(n2 == n && blob2 && memcmp(blob, blob2, n) == 0);
        }
        gsb_free(blob), gsb_free(blob2);
        gsb_model_free(m), gsb_model_free(r);
        gsb_close(small);
    }
}

static void test_store(void)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D), yr = gsb_array_1d(YREG, GSB_F64, N);
    gsb_model *m = NULL, *loaded = NULL;
    CHECK_OK(gsb_model_create(TCP, "Ridge", "{\"alpha\": 0.5}", &m));
    if (!m)
        return;
    CHECK_OK(gsb_model_fit(m, &Xa, &yr));
    CHECK_OK(gsb_model_save(m, "remote-test-ridge"));
    char *list = NULL;
    CHECK_OK(gsb_model_list(UNX, &list)); /* the store is the server's, shared */
    CHECK(list && strstr(list, "\"remote-test-ridge\"") && strstr(list, "\"Ridge\""));
    gsb_free(list);
    CHECK_OK(gsb_model_load(UNX, "remote-test-ridge", &loaded));
    if (loaded) {
        CHECK(gsb_model_is_fitted(loaded));
        tr a = {0}, b = {0};
        predict_into(&a, m, "predict");
        predict_into(&b, loaded, "predict");
        CHECK(tr_same(&a, &b, "store load"));
        char *p1 = NULL, *p2 = NULL;
        CHECK_OK(gsb_model_get_params(m, &p1));
        CHECK_OK(gsb_model_get_params(loaded, &p2));
        CHECK(p1 && p2 && strcmp(p1, p2) == 0);
        gsb_free(p1), gsb_free(p2);
        tr_free(&a), tr_free(&b);
    }
    CHECK_OK(gsb_model_delete(UNX, "remote-test-ridge"));
    gsb_model *again = NULL;
    int rc = gsb_model_load(TCP, "remote-test-ridge", &again);
    CHECK(rc == GSB_ENOTFOUND);
    CHECK(again == NULL);
    CHECK_OK(gsb_model_list(TCP, &list));
    CHECK(list && !strstr(list, "remote-test-ridge"));
    gsb_free(list);
    gsb_model_free(m);
    gsb_model_free(loaded);
}

/* ---- transfer routes ------------------------------------------------------------------ */

/* Data handles above the inline size stream into the server's handle (TCP:
 * CHUNK frames read piecewise; C and Fortran order, float32 and float64). */
static void test_data_streamed(void)
{
    const int64_t n = 150000, d = 6; /* 3.6-7.2 MB: well past 1 MiB inline */
    double *x = malloc(sizeof(double) * (size_t)(n * d));
    float *xf = malloc(sizeof(float) * (size_t)(n * d));
    if (!x || !xf) {
        CHECK(0);
        free(x);
        free(xf);
        return;
    }
    for (int64_t i = 0; i < n * d; i++) {
        x[i] = sin(0.001 * (double)i) * (double)(i % 7) + 0.25 * (double)(i % d);
        xf[i] = (float)x[i];
    }
    gsb_array arrays[3] = {gsb_array_2d(x, GSB_F64, n, d), gsb_array_2d(xf, GSB_F32, n, d),
                           gsb_array_2d(x, GSB_F64, d, n)};
    /* the third: the same memory read as a Fortran-ordered n x d matrix */
    arrays[2].shape[0] = n;
    arrays[2].shape[1] = d;
    arrays[2].strides[0] = sizeof(double);
    arrays[2].strides[1] = sizeof(double) * n;
    for (int a = 0; a < 3; a++) {
        tr want = {0}, got = {0};
        gsb_model *m = NULL;
        CHECK_OK(gsb_model_create(LOCAL, "StandardScaler", NULL, &m));
        call1(&want, m, "fit_transform", &arrays[a]);
        gsb_model_free(m);
        gsb_data *h = NULL;
        CHECK_OK(gsb_data_put(TCP, &arrays[a], &h));
        if (!h)
            continue;
        gsb_array ref = gsb_data_array(h);
        CHECK_OK(gsb_model_create(TCP, "StandardScaler", NULL, &m));
        call1(&got, m, "fit_transform", &ref);
        CHECK(tr_same(&want, &got, a == 0 ? "streamed f64" : a == 1 ? "streamed f32"
                                                            : "streamed fortran"));
        gsb_model_free(m);
        gsb_data_free(h);
        tr_free(&want);
        tr_free(&got);
    }
    free(x);
    free(xf);
}

static void test_data_handles(void)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D), yc = gsb_array_1d(YCLS, GSB_F64, N);
    tr want = {0};
    {
        gsb_model *m = NULL;
        CHECK_OK(gsb_model_create(LOCAL, "LogisticRegression", NULL, &m));
        call2(&want, m, "fit", &Xa, &yc);
        call1(&want, m, "predict", &Xa);
        call2(&want, m, "score", &Xa, &yc);
        gsb_model_free(m);
    }
    gsb_session *ss[3] = {LOCAL, TCP, UNX};
    gsb_data *dx[3] = {0}, *dy[3] = {0};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(gsb_data_put(ss[k], &Xa, &dx[k]));
        CHECK_OK(gsb_data_put(ss[k], &yc, &dy[k]));
        if (!dx[k] || !dy[k])
            continue;
        gsb_array hx = gsb_data_array(dx[k]), hy = gsb_data_array(dy[k]);
        gsb_model *m = NULL;
        CHECK_OK(gsb_model_create(ss[k], "LogisticRegression", NULL, &m));
        tr got = {0};
        call2(&got, m, "fit", &hx, &hy);
        call1(&got, m, "predict", &hx);
        call2(&got, m, "score", &hx, &yc); /* a handle and an array together */
        CHECK(tr_same(&want, &got, k == 0 ? "data local" : k == 1 ? "data tcp" : "data unix"));
        tr_free(&got);
        gsb_model_free(m);
    }
    /* a handle of one session is refused by another */
    if (dx[1] && dx[2]) {
        gsb_array foreign = gsb_data_array(dx[1]);
        gsb_model *m = NULL;
        CHECK_OK(gsb_model_create(UNX, "KMeans", "{\"n_clusters\": 2}", &m));
        CHECK_ERR(gsb_model_fit(m, &foreign, NULL), GSB_EINVAL, "another session");
        gsb_model_free(m);
    }
    for (int k = 0; k < 3; k++) {
        gsb_data_free(dx[k]);
        gsb_data_free(dy[k]);
    }
    tr_free(&want);
}

/* StandardScaler fit + transform of a (rows x cols) array on s into t */
static void scale_into(tr *t, gsb_session *s, const gsb_array *a)
{
    gsb_model *m = NULL;
    int rc = gsb_model_create(s, "StandardScaler", NULL, &m);
    tr_status(t, rc);
    if (rc != GSB_OK)
        return;
    call1(t, m, "fit", a);
    call1(t, m, "transform", a);
    static const char *const names[] = {"mean_", "scale_", NULL};
    attrs_into(t, m, names);
    gsb_model_free(m);
}

static void test_arena_unix(void)
{
    CHECK(stat_of(UNX, 3) == 1); /* the Unix session shares memory */
    CHECK(stat_of(TCP, 3) == 0);
    char *info = NULL;
    CHECK_OK(gsb_session_info(UNX, &info));
    CHECK(info && strstr(info, "\"transport\":\"unix\"") && strstr(info, "\"shm\":true"));
    gsb_free(info);
    CHECK_OK(gsb_session_info(TCP, &info));
    CHECK(info && strstr(info, "\"transport\":\"tcp\"") && strstr(info, "\"shm\":false") &&
          strstr(info, "\"status\":\"ok\""));
    gsb_free(info);

    /* zero copies: an array that lives in the arena */
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
    double *p = NULL;
    CHECK_OK(gsb_arena_alloc(UNX, sizeof X, (void **)&p));
    if (!p)
        return;
    CHECK(((uintptr_t)p & 63) == 0);
    memcpy(p, X, sizeof X);
    gsb_array Pa = gsb_array_2d(p, GSB_F64, N, D);
    tr want = {0}, got = {0};
    scale_into(&want, LOCAL, &Xa);
    int64_t z0 = stat_of(UNX, 0), c0 = stat_of(UNX, 1);
    scale_into(&got, UNX, &Pa);
    CHECK(stat_of(UNX, 0) == z0 + 2); /* fit and transform, no copy */
    CHECK(stat_of(UNX, 1) == c0);
    CHECK(tr_same(&want, &got, "arena array"));
    tr_free(&got);
    memset(&got, 0, sizeof got);
    /* the arena memory is the caller's: change it and the next call sees it */
    p[0] += 1.0;
    tr w2 = {0}, g2 = {0};
    gsb_array Pl = gsb_array_2d(p, GSB_F64, N, D); /* local reads the same buffer */
    scale_into(&w2, LOCAL, &Pl);
    scale_into(&g2, UNX, &Pa);
    CHECK(tr_same(&w2, &g2, "arena array changed"));
    CHECK(!tr_eq(&want, &g2));
    tr_free(&w2), tr_free(&g2);
    gsb_arena_free(UNX, p);

    /* many blocks: allocate, free out of order, allocate again (first fit + coalescing) */
    void *blk[40] = {0};
    for (int i = 0; i < 40; i++) {
        CHECK_OK(gsb_arena_alloc(UNX, (size_t)(i + 1) * 4096 + 8, &blk[i]));
        if (blk[i])
            memset(blk[i], i, (size_t)(i + 1) * 4096 + 8);
    }
    for (int i = 0; i < 40; i++) /* no two blocks overlap */
        for (int j = 0; j < 40; j++)
            if (i != j && blk[i] && blk[j]) {
                char *a = blk[i], *b = blk[j];
                size_t na = (size_t)(i + 1) * 4096 + 8;
                CHECK(!(b >= a && b < a + na));
            }
    for (int i = 0; i < 40; i += 2)
        gsb_arena_free(UNX, blk[i]);
    for (int i = 1; i < 40; i += 2) {
        unsigned char *b = blk[i];
        CHECK(b && b[0] == i && b[(size_t)(i + 1) * 4096 + 7] == i);
        gsb_arena_free(UNX, blk[i]);
    }
    void *big = NULL; /* larger than a default segment: a segment of its own */
    CHECK_OK(gsb_arena_alloc(UNX, (size_t)70 << 20, &big));
    CHECK(big != NULL);
    gsb_arena_free(UNX, big);
    gsb_arena_free(UNX, (void *)X); /* not an arena block: ignored */

    /* one copy: a large ordinary array goes through a scratch block */
    enum { BR = 40000, BC = 8 };
    double *xb = malloc(sizeof(double) * BR * BC);
    if (!xb)
        return;
    testing_seed(77);
    testing_fill_normal(xb, (int64_t)BR * BC);
    gsb_array Ba = gsb_array_2d(xb, GSB_F64, BR, BC);
    tr bw = {0}, bg = {0};
    scale_into(&bw, LOCAL, &Ba);
    c0 = stat_of(UNX, 1);
    z0 = stat_of(UNX, 0);
    scale_into(&bg, UNX, &Ba);
    CHECK(stat_of(UNX, 1) == c0 + 2);
    CHECK(stat_of(UNX, 0) == z0);
    CHECK(tr_same(&bw, &bg, "big array, one copy"));
    /* and a data handle of it */
    gsb_data *d = NULL;
    CHECK_OK(gsb_data_put(UNX, &Ba, &d));
    CHECK(stat_of(UNX, 1) == c0 + 3);
    gsb_data_free(d);
    tr_free(&bw), tr_free(&bg), tr_free(&want);
    free(xb);

    /* TCP: arena memory is ordinary memory, sent on the socket */
    void *q = NULL;
    CHECK_OK(gsb_arena_alloc(TCP, sizeof X, &q));
    if (q) {
        memcpy(q, X, sizeof X);
        gsb_array Qa = gsb_array_2d(q, GSB_F64, N, D);
        tr a = {0}, b = {0};
        scale_into(&a, LOCAL, &Xa);
        scale_into(&b, TCP, &Qa);
        CHECK(tr_same(&a, &b, "tcp arena"));
        tr_free(&a), tr_free(&b);
        gsb_arena_free(TCP, q);
    }
}

/* The shared arena's allocator alone (no server: attach only counts). */
static int n_attached;
static int count_attach(void *ctx, uint64_t seg, int fd, size_t size)
{
    (void)ctx, (void)seg;
    CHECK(fd >= 0 && size % GSB__RARENA_SEGMENT_ROUND == 0 && size >= GSB__RARENA_MIN_SEGMENT);
    n_attached++;
    return GSB_OK;
}

static void test_arena_allocator(void)
{
    gsb__rarena *a = NULL;
    CHECK_OK(gsb__rarena_create(1, count_attach, NULL, NULL, &a));
    if (!a)
        return;
    enum { K = 200 };
    void *p[K] = {0};
    size_t sz[K];
    testing_seed(31);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < K; i++) {
            if (p[i] && testing_uniform() < 0.5) {
                CHECK(gsb__rarena_free(a, p[i]) == 1);
                p[i] = NULL;
            }
            if (!p[i]) {
                sz[i] = (size_t)(testing_uniform() * 200000);
                CHECK_OK(gsb__rarena_alloc(a, sz[i], &p[i]));
                if (p[i])
                    memset(p[i], i & 0xff, sz[i]);
            }
        }
        for (int i = 0; i < K; i++) { /* aligned, intact, located */
            unsigned char *b = p[i];
            uint64_t seg, off;
            CHECK(b && ((uintptr_t)b & 63) == 0);
            CHECK(!sz[i] || (b[0] == (i & 0xff) && b[sz[i] - 1] == (i & 0xff)));
            CHECK(gsb__rarena_locate(a, b, sz[i], &seg, &off) == 1 && seg >= 1 && off % 64 == 0);
        }
    }
    CHECK(n_attached == 1); /* 200 blocks below 200 kB fit one 64 MiB segment */
    for (int i = 0; i < K; i++)
        CHECK(gsb__rarena_free(a, p[i]) == 1);
    CHECK(gsb__rarena_free(a, p[0]) == 0); /* already free */
    /* everything coalesced back: the whole segment is one block again */
    void *whole = NULL;
    CHECK_OK(gsb__rarena_alloc(a, GSB__RARENA_MIN_SEGMENT, &whole));
    CHECK(n_attached == 1);
    uint64_t seg, off;
    CHECK(gsb__rarena_locate(a, whole, GSB__RARENA_MIN_SEGMENT, &seg, &off) == 1 && off == 0);
    CHECK(gsb__rarena_locate(a, whole, GSB__RARENA_MIN_SEGMENT + 1, &seg, &off) == 0);
    void *more = NULL; /* no room left: a second segment */
    CHECK_OK(gsb__rarena_alloc(a, 1, &more));
    CHECK(n_attached == 2);
    CHECK(gsb__rarena_locate(a, X, 8, &seg, &off) == 0);
    gsb__rarena_destroy(a); /* frees what is still allocated */

    /* private mode: ordinary memory, still tracked */
    CHECK_OK(gsb__rarena_create(0, NULL, NULL, NULL, &a));
    if (!a)
        return;
    void *q = NULL;
    CHECK_OK(gsb__rarena_alloc(a, 0, &q));
    CHECK(q && ((uintptr_t)q & 63) == 0);
    CHECK(gsb__rarena_locate(a, q, 1, &seg, &off) == 0);
    CHECK(gsb__rarena_free(a, X) == 0);
    CHECK(gsb__rarena_free(a, q) == 1);
    CHECK_OK(gsb__rarena_alloc(a, 1000, &q));
    gsb__rarena_destroy(a);
}

static void test_chunks_tcp(void)
{
    /* 20 MiB of float64 with a 4 MiB inline limit: streamed as CHUNK frames */
    enum { BR = 327680, BC = 8 };
    double *xb = malloc(sizeof(double) * BR * BC);
    if (!xb)
        return;
    testing_seed(5);
    for (int64_t i = 0; i < (int64_t)BR * BC; i++)
        xb[i] = testing_uniform() * 10 - 3;
    char url[400];
    snprintf(url, sizeof url, "%s?max_inline=4194304", TCP_URL);
    gsb_session *s = NULL;
    CHECK_OK(gsb_open(url, &s));
    if (s) {
        gsb_array Ba = gsb_array_2d(xb, GSB_F64, BR, BC);
        tr a = {0}, b = {0};
        scale_into(&a, LOCAL, &Ba);
        int64_t c0 = stat_of(s, 2);
        scale_into(&b, s, &Ba);
        CHECK(stat_of(s, 2) == c0 + 2);
        CHECK(tr_same(&a, &b, "20 MiB in chunks"));
        tr_free(&a), tr_free(&b);
        gsb_close(s);
    }
    free(xb);
}

/* ---- progress and cancellation ----------------------------------------------------------- */

typedef struct prog {
    tr t;
    int calls;
    int stop_at;          /* return 1 at this call (0: never) */
    atomic_int started;
} prog;

static int on_progress(void *data, const char *stage, int64_t it, double loss)
{
    prog *p = data;
    p->calls++;
    tr_str(&p->t, stage);
    tr_i64(&p->t, it);
    tr_bytes(&p->t, &loss, sizeof loss);
    atomic_store(&p->started, 1);
    return p->stop_at && p->calls >= p->stop_at;
}

static void progress_run(gsb_session *s, int stop_at, prog *p, int *rc, int *fitted)
{
    memset(p, 0, sizeof *p);
    p->stop_at = stop_at;
    /* iterations long enough that a CANCEL sent after one of them arrives
     * long before the fit could end on its own */
    gsb_array Xa = gsb_array_2d(PX, GSB_F64, PR, PC);
    gsb_model *m = NULL;
    *rc = -1;
    *fitted = -1;
    CHECK_OK(gsb_model_create(s, "KMeans", "{\"n_clusters\": 16, \"n_init\": 1, "
                              "\"random_state\": 4, \"init\": \"random\"}", &m));
    if (!m)
        return;
    CHECK_OK(gsb_model_fit(m, &Xa, NULL)); /* fitted before, so "left unfitted" shows */
    gsb_model_set_progress(m, on_progress, p);
    *rc = gsb_model_fit(m, &Xa, NULL);
    tr_i64(&p->t, *rc); /* not the message: a remote stop lands an iteration later */
    *fitted = gsb_model_is_fitted(m);
    gsb_model_free(m);
}

static void test_progress(void)
{
    gsb_session *ss[3] = {LOCAL, TCP, UNX};
    prog p[3];
    int rc[3], fitted[3];
    /* every iteration, in order, with the same loss */
    for (int k = 0; k < 3; k++)
        progress_run(ss[k], 0, &p[k], &rc[k], &fitted[k]);
    CHECK(rc[0] == GSB_OK && fitted[0] == 1 && p[0].calls > 8);
    for (int k = 1; k < 3; k++) {
        CHECK(rc[k] == GSB_OK && fitted[k] == 1);
        CHECK(p[k].calls == p[0].calls);
        CHECK(tr_same(&p[0].t, &p[k].t, "progress"));
    }
    for (int k = 0; k < 3; k++)
        tr_free(&p[k].t);
    /* stopping from the callback: cancelled, unfitted, no further callbacks */
    for (int k = 0; k < 3; k++)
        progress_run(ss[k], 3, &p[k], &rc[k], &fitted[k]);
    for (int k = 0; k < 3; k++) {
        CHECK(rc[k] == GSB_ECANCELLED);
        CHECK(fitted[k] == 0);
        CHECK(p[k].calls == 3);
        if (k)
            CHECK(tr_same(&p[0].t, &p[k].t, "progress cancelled"));
    }
    for (int k = 0; k < 3; k++)
        tr_free(&p[k].t);
}

typedef struct long_fit {
    gsb_model *m;
    const gsb_array *X;
    int rc;
} long_fit;

static void *long_fit_main(void *arg)
{
    long_fit *f = arg;
    f->rc = gsb_model_fit(f->m, f->X, NULL);
    return NULL;
}

static void test_cancel_thread(void)
{
    /* a fit of several seconds, stopped from another thread */
    enum { R = PR, C = PC };
    double *xb = malloc(sizeof(double) * R * C);
    if (!xb)
        return;
    memcpy(xb, PX, sizeof PX);
    gsb_array Ba = gsb_array_2d(xb, GSB_F64, R, C);
    gsb_session *ss[2] = {TCP, UNX};
    for (int k = 0; k < 4; k++) {
        int with_callback = k >= 2;
        gsb_model *m = NULL;
        CHECK_OK(gsb_model_create(ss[k % 2], "KMeans", "{\"n_clusters\": 16, \"n_init\": 2000, "
                                  "\"init\": \"random\", \"random_state\": 0}", &m));
        if (!m)
            continue;
        prog p;
        memset(&p, 0, sizeof p);
        if (with_callback)
            gsb_model_set_progress(m, on_progress, &p);
        gsb_model_cancel(m); /* before the call: forgotten when it starts, as locally */
        long_fit f = {m, &Ba, -1};
        pthread_t th;
        double t0 = now_s();
        CHECK(pthread_create(&th, NULL, long_fit_main, &f) == 0);
        if (with_callback)
            while (!atomic_load(&p.started) && now_s() - t0 < 20)
                usleep(1000);
        else
            usleep(150000);
        double t1 = now_s();
        gsb_model_cancel(m);
        pthread_join(th, NULL);
        double t2 = now_s();
        CHECK(f.rc == GSB_ECANCELLED);
        CHECK(!gsb_model_is_fitted(m));
        CHECK(t2 - t1 < 2.0); /* stopped promptly, not run to the end */
        gsb_model_free(m);
        tr_free(&p.t);
    }
    free(xb);
}

/* ---- many threads on one session -------------------------------------------------------- */

#define THREADS 64
static const char *const T_EST[4] = {"KMeans", "LogisticRegression", "LinearRegression",
                                     "StandardScaler"};
static const char *const T_PAR[4] = {"{\"n_clusters\": 3, \"random_state\": 2, \"n_init\": 1}",
                                     NULL, NULL, NULL};
static const char *const T_METHOD[4] = {"predict", "predict", "predict", "transform"};
static gsb_result *T_WANT[4];
static gsb_session *T_SESS;

static int run_one(gsb_session *s, int e, gsb_result **out)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
    gsb_array y = gsb_array_1d(e == 1 ? YCLS : YREG, GSB_F64, N);
    gsb_model *m = NULL;
    *out = NULL;
    int rc = gsb_model_create(s, T_EST[e], T_PAR[e], &m);
    if (rc == GSB_OK)
        rc = gsb_model_fit(m, &Xa, e == 1 || e == 2 ? &y : NULL);
    const gsb_array *in[1] = {&Xa};
    if (rc == GSB_OK)
        rc = gsb_model_call(m, T_METHOD[e], in, 1, NULL, out);
    gsb_model_free(m);
    return rc;
}

/* labels exactly; floats up to rounding (BLAS splits sums by free threads) */
static int same_answer(const gsb_result *a, const gsb_result *b)
{
    const gsb_array *x = gsb_result_array(a, 0), *y = gsb_result_array(b, 0);
    if (!x || !y || x->dtype != y->dtype || x->ndim != y->ndim || numel(x) != numel(y))
        return 0;
    for (int64_t i = 0; i < numel(x); i++) {
        double u, v;
        switch (x->dtype) {
        case GSB_F64: u = ((double *)x->data)[i], v = ((double *)y->data)[i]; break;
        case GSB_F32: u = ((float *)x->data)[i], v = ((float *)y->data)[i]; break;
        case GSB_I32: u = ((int32_t *)x->data)[i], v = ((int32_t *)y->data)[i]; break;
        default: u = (double)((int64_t *)x->data)[i], v = (double)((int64_t *)y->data)[i];
        }
        if (!(fabs(u - v) <= 1e-9 * (1 + fabs(v))))
            return 0;
    }
    return 1;
}

static atomic_int t_bad;

static void *thread_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int rep = 0; rep < 3; rep++) {
        int e = (id + rep) % 4;
        gsb_result *r = NULL;
        int rc = run_one(T_SESS, e, &r);
        if (rc != GSB_OK || !same_answer(r, T_WANT[e])) {
            fprintf(stderr, "thread %d: %s: %s\n", id, T_EST[e],
                    rc ? gsb_errmsg() : "wrong answer");
            atomic_fetch_add(&t_bad, 1);
        }
        gsb_result_free(r);
    }
    return NULL;
}

static void test_threads(void)
{
    for (int e = 0; e < 4; e++)
        CHECK_OK(run_one(LOCAL, e, &T_WANT[e]));
    gsb_session *ss[2] = {TCP, UNX};
    for (int k = 0; k < 2; k++) {
        T_SESS = ss[k];
        atomic_store(&t_bad, 0);
        pthread_t th[THREADS];
        int started[THREADS];
        for (int i = 0; i < THREADS; i++)
            started[i] = pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i) == 0;
        for (int i = 0; i < THREADS; i++)
            if (started[i])
                pthread_join(th[i], NULL);
            else
                atomic_fetch_add(&t_bad, 1);
        CHECK(atomic_load(&t_bad) == 0);
    }
    for (int e = 0; e < 4; e++)
        gsb_result_free(T_WANT[e]);
}

/* ---- failures ---------------------------------------------------------------------------- */

static void test_closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof sa;
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&sa, &l) == 0);
    close(fd); /* nobody listens there now */
    char url[64], want[96];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", ntohs(sa.sin_port));
    snprintf(want, sizeof want, "cannot reach gsbd at %s", url);
    gsb_session *s = NULL;
    CHECK_ERR(gsb_open(url, &s), GSB_EIO, want);
    CHECK(strstr(gsb_errmsg(), "gsb serve") && strstr(gsb_errmsg(), "refused"));
    CHECK(s == NULL);
    char upath[400];
    snprintf(upath, sizeof upath, "unix://%s/nobody.sock", DIR_);
    CHECK_ERR(gsb_open(upath, &s), GSB_EIO, "cannot reach gsbd at unix://");
    CHECK_ERR(gsb_open("tcp://127.0.0.1", &s), GSB_EINVAL, "port");
    CHECK_ERR(gsb_open("tcp://127.0.0.1:1?tokenfile=x", &s), GSB_EINVAL, "tokenfile");
    CHECK_ERR(gsb_open("tcp://127.0.0.1:1?token_file=/nonexistent/t", &s), GSB_EIO,
              "/nonexistent/t");
}

static char *server_opts(const char *extra, const char *listen)
{
    char *o = malloc(2048);
    snprintf(o, 2048, "{\"listen\": [%s], \"data_dir\": \"%s/store\", \"device\": \"cpu\", "
             "\"log_file\": \"%s/gsbd.log\", \"log_stderr\": false%s}", listen, DIR_, DIR_,
             extra ? extra : "");
    return o;
}

static void test_server_stops(void)
{
    char listen[600];
    snprintf(listen, sizeof listen, "\"tcp://127.0.0.1:0\", \"unix://%s/s2.sock\"", DIR_);
    char *o = server_opts(NULL, listen);
    gsb_server *srv = NULL;
    CHECK_OK(gsb_server_start(o, &srv));
    free(o);
    if (!srv)
        return;
    gsb_session *s[2] = {0};
    gsb_model *m[2] = {0};
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
    for (int k = 0; k < 2; k++) {
        CHECK_OK(gsb_open(gsb_server_url(srv, k), &s[k]));
        if (s[k]) {
            CHECK_OK(gsb_model_create(s[k], "KMeans", "{\"n_clusters\": 2}", &m[k]));
            CHECK_OK(gsb_model_fit(m[k], &Xa, NULL));
        }
    }
    gsb_server_stop(srv);
    /* a new server on the same socket path does not know the old session */
    snprintf(listen, sizeof listen, "\"unix://%s/s2.sock\"", DIR_);
    o = server_opts(NULL, listen);
    gsb_server *again = NULL;
    CHECK_OK(gsb_server_start(o, &again));
    free(o);
    if (m[1]) {
        const gsb_array *in[1] = {&Xa};
        CHECK_ERR(gsb_model_call(m[1], "predict", in, 1, NULL, NULL), GSB_EIO,
                  "no longer has this session");
    }
    gsb_server_stop(again);
    for (int k = 0; k < 2; k++) {
        if (!m[k])
            continue;
        const gsb_array *in[1] = {&Xa};
        CHECK_ERR(gsb_model_call(m[k], "predict", in, 1, NULL, NULL), GSB_EIO, "gsbd");
        CHECK_ERR(gsb_model_call(m[k], "predict", in, 1, NULL, NULL), GSB_EIO, "gsbd");
        char *j = NULL;
        CHECK_ERR(gsb_session_info(s[k], &j), GSB_EIO, "gsbd");
        gsb_model_free(m[k]);
        gsb_close(s[k]);
    }
}

/*
 * A fake server.  Modes 0-3 break the protocol at the first request: 0
 * vanishes, 1 answers another request, 2 sends an ERROR with a code that
 * does not exist, 3 replies without the model handle.  Mode 4 serves a
 * model whose get_attr answer has a Fortran-ordered array in CHUNK frames
 * and an inline one (a real server chunks only results above 64 MiB).
 */
typedef struct fake {
    int lfd, mode;
} fake;

#define FR 100
#define FC 3

static void fake_serve(int c, int mode)
{
    gsb__frame fr;
    while (gsb__wire_recv(c, &fr, GSB__WIRE_MAX_INLINE, 5000) == GSB_OK) {
        uint64_t id = fr.hdr.req_id;
        const char *op = json_string_value(json_object_get(fr.head, "op"));
        int create = op && strcmp(op, "model.create") == 0;
        int get_attr = op && strcmp(op, "model.get_attr") == 0;
        gsb__frame_clear(&fr);
        json_t *h = NULL;
        int type = GSB__F_REPLY;
        if (mode == 0)
            return; /* vanish mid-request */
        if (mode == 1)
            h = json_pack("{s:I, s:s, s:b}", "model", (json_int_t)1, "estimator", "KMeans",
                          "fitted", 0), id += 1000;
        else if (mode == 2)
            h = json_pack("{s:i, s:s}", "code", 99, "message", "odd"), type = GSB__F_ERROR;
        else if (mode == 3 || !create)
            h = json_pack("{s:b}", "fitted", 1);
        else
            h = json_pack("{s:I, s:s, s:b}", "model", (json_int_t)1, "estimator", "KMeans",
                          "fitted", 1);
        if (mode == 4 && get_attr) {
            static double f[FR * FC];
            static int64_t b[4] = {7, -1, 1LL << 40, 3};
            for (int j = 0; j < FC; j++)
                for (int i = 0; i < FR; i++)
                    f[j * FR + i] = i * 10 + j; /* column-major: value = 10 * row + col */
            gsb_array fa = {f, GSB_F64, 2, {FR, FC}, {8, 8 * FR}};
            gsb_array ba = gsb_array_1d(b, GSB_I64, 4);
            gsb__outmsg m;
            gsb__outmsg_init(&m, 64);
            gsb__outmsg_add(&m, &fa);
            gsb__outmsg_add(&m, &ba);
            json_object_set_new(h, "names", json_pack("[s,s]", "a", "b"));
            gsb__wire_send(c, type, id, h, "arrays", &m, -1);
            gsb__outmsg_clear(&m);
        } else if (h) {
            gsb__wire_send(c, type, id, h, NULL, NULL, -1);
        }
        json_decref(h);
        if (mode != 4)
            return;
    }
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    int c = accept(f->lfd, NULL, NULL);
    if (c < 0)
        return NULL;
    gsb__frame fr;
    if (gsb__wire_recv(c, &fr, GSB__WIRE_MAX_INLINE, 5000) == GSB_OK) {
        uint64_t hello = fr.hdr.req_id;
        gsb__frame_clear(&fr);
        json_t *w = json_pack("{s:i, s:s, s:[s], s:I}", "version", 1, "session", "fake",
                              "features", "chunks", "max_inline", (json_int_t)1 << 20);
        gsb__wire_send(c, GSB__F_WELCOME, hello, w, NULL, NULL, -1);
        json_decref(w);
        fake_serve(c, f->mode);
    }
    close(c);
    return NULL;
}

static void test_bad_servers(void)
{
    const char *want[4] = {"lost the connection", "malformed", "malformed", "malformed"};
    for (int mode = 0; mode < 5; mode++) {
        char *url = NULL;
        fake f = {-1, mode};
        CHECK_OK(gsb__sock_listen("tcp://127.0.0.1:0", &f.lfd, &url));
        if (f.lfd < 0)
            continue;
        pthread_t th;
        CHECK(pthread_create(&th, NULL, fake_main, &f) == 0);
        gsb_session *s = NULL;
        CHECK_OK(gsb_open(url, &s));
        if (s && mode < 4) {
            gsb_model *m = NULL;
            CHECK_ERR(gsb_model_create(s, "KMeans", NULL, &m), GSB_EIO, want[mode]);
            CHECK(m == NULL);
        } else if (s) {
            gsb_model *m = NULL;
            gsb_result *r = NULL;
            CHECK_OK(gsb_model_create(s, "KMeans", NULL, &m));
            CHECK(gsb_model_is_fitted(m));
            CHECK_OK(gsb_model_get_attr(m, "a", &r));
            const gsb_array *a = gsb_result_get(r, "a"), *b = gsb_result_get(r, "b");
            CHECK(a && a->dtype == GSB_F64 && a->ndim == 2 && a->shape[0] == FR &&
                  a->shape[1] == FC);
            int ok = a != NULL;
            for (int i = 0; ok && i < FR * FC; i++)
                ok = ((double *)a->data)[i] == (i / FC) * 10 + i % FC; /* C order now */
            CHECK(ok);
            CHECK(b && b->dtype == GSB_I64 && b->ndim == 1 && b->shape[0] == 4 &&
                  ((int64_t *)b->data)[2] == 1LL << 40);
            gsb_result_free(r);
            /* the connection is still in step: another request works */
            CHECK_OK(gsb_model_get_attr(m, "a", &r));
            gsb_result_free(r);
            gsb_model_free(m);
        }
        gsb_close(s);
        pthread_join(th, NULL);
        close(f.lfd);
        free(url);
    }
}

static void test_token(void)
{
    char tok[400];
    snprintf(tok, sizeof tok, "%s/token", DIR_);
    FILE *f = fopen(tok, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("s3cret-token\n", f);
    fclose(f);
    char wrong[400];
    snprintf(wrong, sizeof wrong, "%s/wrong", DIR_);
    f = fopen(wrong, "w");
    if (f) {
        fputs("not-it\n", f);
        fclose(f);
    }
    char extra[600];
    snprintf(extra, sizeof extra, ", \"token_file\": \"%s\"", tok);
    char *o = server_opts(extra, "\"tcp://127.0.0.1:0\"");
    gsb_server *srv = NULL;
    CHECK_OK(gsb_server_start(o, &srv));
    free(o);
    if (!srv)
        return;
    const char *base = gsb_server_url(srv, 0);
    unsetenv("GSB_TOKEN");
    unsetenv("GSB_TOKEN_FILE");
    gsb_session *s = NULL;
    int rc = gsb_open(base, &s);
    CHECK(rc == GSB_EPARAM && s == NULL);
    CHECK(strstr(gsb_errmsg(), "token") != NULL);
    char url[900];
    snprintf(url, sizeof url, "%s?token_file=%s", base, wrong);
    CHECK(gsb_open(url, &s) == GSB_EPARAM && s == NULL);
    snprintf(url, sizeof url, "%s?token_file=%s", base, tok);
    CHECK_OK(gsb_open(url, &s));
    if (s) {
        gsb_model *m = NULL;
        gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
        CHECK_OK(gsb_model_create(s, "KMeans", "{\"n_clusters\": 2}", &m));
        CHECK_OK(gsb_model_fit(m, &Xa, NULL)); /* a second connection joins with the token */
        gsb_model_free(m);
        gsb_close(s);
    }
    setenv("GSB_TOKEN", "s3cret-token", 1);
    s = NULL;
    CHECK_OK(gsb_open(base, &s));
    gsb_close(s);
    unsetenv("GSB_TOKEN");
    setenv("GSB_TOKEN_FILE", tok, 1);
    s = NULL;
    CHECK_OK(gsb_open(base, &s));
    gsb_close(s);
    unsetenv("GSB_TOKEN_FILE");
    gsb_server_stop(srv);
}

static void sort_d(double *t, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: small */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
}

/* Tiny round trips: printed, not checked (sanitizer builds are slow). */
static void test_latency(void)
{
    gsb_session *ss[3] = {UNX, TCP, LOCAL};
    for (int k = 0; k < 3; k++) {
        gsb_model *m = NULL;
        gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D), one = gsb_array_2d(X, GSB_F64, 1, D);
        CHECK_OK(gsb_model_create(ss[k], "LinearRegression", NULL, &m));
        if (!m)
            continue;
        gsb_array yr = gsb_array_1d(YREG, GSB_F64, N);
        CHECK_OK(gsb_model_fit(m, &Xa, &yr));
        enum { REPS = 400 };
        double t[REPS], tp[REPS];
        for (int i = 0; i < REPS && gsb__remote_of(ss[k]); i++) {
            double t0 = now_s();
            int rc = gsb__remote_ping(gsb__remote_of(ss[k]));
            tp[i] = now_s() - t0;
            if (rc != GSB_OK)
                CHECK_OK(rc);
        }
        const gsb_array *in[1] = {&one};
        for (int i = 0; i < REPS; i++) {
            gsb_result *r = NULL;
            double t0 = now_s();
            int rc = gsb_model_call(m, "predict", in, 1, NULL, &r);
            t[i] = now_s() - t0;
            if (rc != GSB_OK)
                CHECK_OK(rc);
            gsb_result_free(r);
        }
        sort_d(t, REPS);
        if (!gsb__remote_of(ss[k])) {
            printf("     the same predict on a local session: p50 %.1f us\n", t[REPS / 2] * 1e6);
            gsb_model_free(m);
            continue;
        }
        sort_d(tp, REPS);
        printf("     round trip over %s: ping p50 %.1f us (p90 %.1f); 1-row predict p50 %.1f "
               "us (p90 %.1f)\n", k == 0 ? "unix" : "tcp", tp[REPS / 2] * 1e6,
               tp[REPS * 9 / 10] * 1e6, t[REPS / 2] * 1e6, t[REPS * 9 / 10] * 1e6);
        gsb_model_free(m);
    }
}

/* ---- setup --------------------------------------------------------------------------------- */

static void make_data(void)
{
    testing_seed(2024);
    static const double centers[3][D] = {{0, 0, 0, 0, 0, 0},
                                         {4, 4, 0, -2, 1, 0},
                                         {-3, 3, 3, 0, -1, 2}};
    double w[D] = {1.5, -2, 0.5, 3, -1, 0.25};
    for (int i = 0; i < N; i++) {
        int c = i % 3;
        YCLS[i] = c;
        double s = 0.7;
        for (int j = 0; j < D; j++) {
            X[i * D + j] = centers[c][j] + testing_normal();
            s += w[j] * X[i * D + j];
        }
        YREG[i] = s + 0.1 * testing_normal();
    }
    for (int i = 0; i < N * D; i++)
        XF[i] = (float)X[i];
    testing_fill_normal(PX, PR * PC);
}

int main(void)
{
    make_data();
    snprintf(DIR_, sizeof DIR_, "/tmp/gsb-remote-XXXXXX");
    if (!mkdtemp(DIR_)) {
        perror("mkdtemp");
        return 1;
    }
    unsetenv("GSB_TOKEN");
    unsetenv("GSB_TOKEN_FILE");
    char listen[600];
    snprintf(listen, sizeof listen, "\"tcp://127.0.0.1:0\", \"unix://%s/s.sock\"", DIR_);
    char *o = server_opts(NULL, listen);
    int rc = gsb_server_start(o, &SRV);
    free(o);
    if (rc != GSB_OK) {
        fprintf(stderr, "gsb_server_start: %s\n", gsb_errmsg());
        return 1;
    }
    for (int i = 0; gsb_server_url(SRV, i); i++) {
        const char *u = gsb_server_url(SRV, i);
        snprintf(strncmp(u, "tcp", 3) == 0 ? TCP_URL : UNIX_URL, 300, "%s", u);
    }
    if (gsb_open("local?device=cpu", &LOCAL) != GSB_OK || gsb_open(TCP_URL, &TCP) != GSB_OK ||
        gsb_open(UNIX_URL, &UNX) != GSB_OK) {
        fprintf(stderr, "gsb_open: %s\n", gsb_errmsg());
        return 1;
    }
    RUN(test_parity);
    RUN(test_error_words);
    RUN(test_warnings);
    RUN(test_export_import);
    RUN(test_store);
    RUN(test_data_handles);
    RUN(test_data_streamed);
    RUN(test_arena_allocator);
    RUN(test_arena_unix);
    RUN(test_chunks_tcp);
    RUN(test_progress);
    RUN(test_cancel_thread);
    RUN(test_threads);
    RUN(test_closed_port);
    RUN(test_server_stops);
    RUN(test_bad_servers);
    RUN(test_token);
    RUN(test_latency);
    gsb_close(TCP);
    gsb_close(UNX);
    gsb_close(LOCAL);
    gsb_server_stop(SRV);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", DIR_);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", DIR_);
    return testing_done();
}
