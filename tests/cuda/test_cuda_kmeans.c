/*
 * test_cuda_kmeans.c - KMeans through the public API on device=cuda against
 * device=cpu, from the same explicit initial centres.  kmeans.c keeps the
 * labels and distances on the backend (the inertia is a col_moments of the
 * distances; strict convergence without empty clusters is decided by a zero
 * centre shift; iterations with empty clusters bring labels and distances
 * to the host): both devices must stop at the same iteration with the same
 * partition, the same inertia (every iteration's, through the progress
 * callback) and the same centres.  Needs a GPU: fails loudly without one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"

enum { MAX_ITERS = 512 };

/* inertia of each iteration reported through the progress callback */
typedef struct {
    int count;
    double loss[MAX_ITERS];
} progress_log;

static int on_progress(void *data, const char *stage, int64_t it, double loss)
{
    progress_log *log = data;
    (void)it;
    if (strcmp(stage, "iteration") == 0 && log->count < MAX_ITERS)
        log->loss[log->count++] = loss;
    return 0;
}

typedef struct {
    int64_t n_iter;
    double inertia;
    int32_t *labels;  /* n */
    double *centres;  /* k x d */
    progress_log log;
} km_result;

static void result_free(km_result *r)
{
    free(r->labels);
    free(r->centres);
}

/* a fitted attribute's values as doubles (n of them) */
static double *attr_values(gsb_model *m, const char *name, int64_t n)
{
    gsb_result *r = NULL;
    double *v = calloc((size_t)n, sizeof(double));
    if (!v)
        abort();
    if (gsb_model_get_attr(m, name, &r) != GSB_OK) {
        fprintf(stderr, "attribute %s: %s\n", name, gsb_errmsg());
        testing_cur_failed = 1;
        return v;
    }
    const gsb_array *a = gsb_result_array(r, 0);
    for (int64_t i = 0; i < n; i++) {
        switch (a->dtype) {
        case GSB_F32: v[i] = ((const float *)a->data)[i]; break;
        case GSB_F64: v[i] = ((const double *)a->data)[i]; break;
        case GSB_I32: v[i] = ((const int32_t *)a->data)[i]; break;
        case GSB_I64: v[i] = (double)((const int64_t *)a->data)[i]; break;
        }
    }
    gsb_result_free(r);
    return v;
}

/* KMeans(k, max_iter, tol) on the device named in url from init (k x d, X's dtype) */
static km_result fit_on(const char *url, const gsb_array *X, const gsb_array *init,
                        const gsb_array *w, int64_t k, int max_iter, double tol)
{
    km_result out;
    memset(&out, 0, sizeof out);
    int64_t n = X->shape[0], d = X->shape[1];
    gsb_session *s = NULL;
    gsb_model *m = NULL;
    char params[160];
    snprintf(params, sizeof params, "{\"n_clusters\": %lld, \"max_iter\": %d, \"tol\": %g}",
             (long long)k, max_iter, tol);
    CHECK_OK(gsb_open(url, &s));
    CHECK_OK(gsb_model_create(s, "KMeans", params, &m));
    if (!m) {
        gsb_close(s);
        out.labels = calloc((size_t)n, sizeof(int32_t));
        out.centres = calloc((size_t)(k * d), sizeof(double));
        return out;
    }
    gsb_model_set_progress(m, on_progress, &out.log);
    const gsb_array *in[4] = {X, NULL, w, init};
    CHECK_OK(gsb_model_call(m, "fit", in, 4, NULL, NULL));
    double *it = attr_values(m, "n_iter_", 1), *in_ = attr_values(m, "inertia_", 1);
    double *lab = attr_values(m, "labels_", n);
    out.n_iter = (int64_t)it[0];
    out.inertia = in_[0];
    out.centres = attr_values(m, "cluster_centers_", k * d);
    out.labels = malloc(sizeof(int32_t) * (size_t)n);
    if (!out.labels)
        abort();
    for (int64_t i = 0; i < n; i++)
        out.labels[i] = (int32_t)lab[i];
    free(it);
    free(in_);
    free(lab);
    gsb_model_free(m);
    gsb_close(s);
    return out;
}

/* the same fit on both devices must agree (tol: relative, for inertias and centres) */
static void compare_devices(const gsb_array *X, const gsb_array *init, const gsb_array *w,
                            int64_t k, int max_iter, double tol_param, double tol)
{
    int64_t n = X->shape[0], d = X->shape[1];
    km_result c = fit_on("local?device=cpu", X, init, w, k, max_iter, tol_param);
    km_result g = fit_on("local?device=cuda", X, init, w, k, max_iter, tol_param);
    CHECK(c.n_iter == g.n_iter);
    CHECK(c.log.count == g.log.count);
    CHECK_CLOSE(g.inertia, c.inertia, tol);
    for (int i = 0; i < c.log.count && i < g.log.count; i++)
        CHECK_CLOSE(g.log.loss[i], c.log.loss[i], tol);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++)
        differ += c.labels[i] != g.labels[i];
    CHECK(differ == 0);
    double scale = 0, err = 0;
    for (int64_t q = 0; q < k * d; q++) {
        scale = fmax(scale, fabs(c.centres[q]));
        err = fmax(err, fabs(c.centres[q] - g.centres[q]));
    }
    CHECK(err <= tol * fmax(scale, 1.0));
    if (testing_cur_failed)
        fprintf(stderr, "    n=%lld d=%lld k=%lld: n_iter cpu %lld gpu %lld, inertia cpu %.12g "
                        "gpu %.12g, %lld labels differ, centres off by %g\n",
                (long long)n, (long long)d, (long long)k, (long long)c.n_iter,
                (long long)g.n_iter, c.inertia, g.inertia, (long long)differ, err);
    result_free(&c);
    result_free(&g);
}

/* X (n x d) in dtype dt from doubles */
static void *as_dtype(const double *v, int64_t count, gsb_dtype dt)
{
    void *p = malloc((size_t)count * gsb_dtype_size(dt) + 1);
    if (!p)
        abort();
    for (int64_t i = 0; i < count; i++) {
        if (dt == GSB_F32)
            ((float *)p)[i] = (float)v[i];
        else
            ((double *)p)[i] = v[i];
    }
    return p;
}

/*
 * Well separated blobs (centres uniform in [-10, 10]^d, spread 0.3), the
 * initial centres the true ones moved a little: no point is near a tie, so
 * both devices make the same choices; the labels settle after a few
 * iterations and the run ends on a zero shift (strict convergence with no
 * empty cluster).  Unit weights and weights with zeros.
 */
static void blobs_case(int64_t n, int64_t d, int64_t k)
{
    double *X = malloc(sizeof(double) * (size_t)(n * d));
    double *C = malloc(sizeof(double) * (size_t)(k * d));
    double *init = malloc(sizeof(double) * (size_t)(k * d));
    double *w = malloc(sizeof(double) * (size_t)n);
    if (!X || !C || !init || !w)
        abort();
    for (int64_t q = 0; q < k * d; q++) {
        C[q] = 20 * testing_uniform() - 10;
        init[q] = C[q] + 0.5 * testing_normal();
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t j = (int64_t)(testing_uniform() * (double)k) % k;
        for (int64_t f = 0; f < d; f++)
            X[i * d + f] = C[j * d + f] + 0.3 * testing_normal();
        w[i] = testing_uniform() < 0.1 ? 0.0 : 0.5 + testing_uniform();
    }
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = t ? GSB_F64 : GSB_F32;
        void *xv = as_dtype(X, n * d, dt), *iv = as_dtype(init, k * d, dt);
        gsb_array xa = gsb_array_2d(xv, dt, n, d), ia = gsb_array_2d(iv, dt, k, d);
        gsb_array wa = gsb_array_1d(w, GSB_F64, n);
        double tol = dt == GSB_F32 ? 1e-4 : 1e-10;
        compare_devices(&xa, &ia, NULL, k, 300, 0.0, tol);
        compare_devices(&xa, &ia, &wa, k, 300, 1e-4, tol);
        compare_devices(&xa, &ia, NULL, k, 2, 0.0, tol); /* stopped by max_iter */
        free(xv);
        free(iv);
    }
    free(X);
    free(C);
    free(init);
    free(w);
}

/* 64 columns and 100 clusters: the benchmark's shape, smaller (segment_sum's
 * clusters then span many 128-row segments of the sorted order) */
static void test_blobs(void)
{
    blobs_case(30011, 16, 9);
    blobs_case(40000, 64, 100);
}

/*
 * X with a NaN or an infinity: on the GPU the fit checks the uploaded X
 * (GSB__IN_CHECK_ON_BACKEND) instead of the host's pass before the call;
 * the error and its message must be the CPU's, and the model stays
 * unfitted.
 */
static void test_nonfinite(void)
{
    const int64_t n = 5000, d = 8;
    static const char *const urls[2] = {"local?device=cpu", "local?device=cuda"};
    for (int bad = 0; bad < 2; bad++) {
        float *X = malloc(sizeof(float) * (size_t)(n * d));
        if (!X)
            abort();
        for (int64_t q = 0; q < n * d; q++)
            X[q] = (float)testing_normal();
        X[3001 * d + 5] = bad ? INFINITY : NAN;
        gsb_array xa = gsb_array_2d(X, GSB_F32, n, d);
        char msg[2][512];
        for (int u = 0; u < 2; u++) {
            gsb_session *s = NULL;
            gsb_model *m = NULL;
            msg[u][0] = 0;
            CHECK_OK(gsb_open(urls[u], &s));
            CHECK_OK(gsb_model_create(s, "KMeans", "{\"n_clusters\": 3}", &m));
            if (m) {
                const gsb_array *in[1] = {&xa};
                CHECK(gsb_model_call(m, "fit", in, 1, NULL, NULL) == GSB_EINVAL);
                snprintf(msg[u], sizeof msg[u], "%s", gsb_errmsg());
                gsb_result *r = NULL;
                CHECK(gsb_model_get_attr(m, "cluster_centers_", &r) != GSB_OK);
                gsb_result_free(r);
            }
            gsb_model_free(m);
            gsb_close(s);
        }
        CHECK(strstr(msg[0], bad ? "infinity" : "NaN") != NULL);
        CHECK(strcmp(msg[0], msg[1]) == 0);
        if (testing_cur_failed)
            fprintf(stderr, "    cpu: %s\n    gpu: %s\n", msg[0], msg[1]);
        free(X);
    }
}

/*
 * Empty clusters: every row is one of 10 distinct integer points, and the
 * 14 initial centres are rows covering only 6 of them, some twice.  The
 * duplicates' clusters are empty at the first M-step, so relocation runs
 * (farthest points, ties to the smaller row, on the host from the
 * downloaded distances), and later iterations may repeat the labels with
 * empty clusters left (strict convergence decided on the host).  Integer
 * coordinates keep the distances exact on both devices.
 */
static void test_empty_clusters(void)
{
    const int64_t n = 3000, d = 3, k = 14, distinct = 10;
    double P[10 * 3], *X = malloc(sizeof(double) * (size_t)(n * d));
    double init[14 * 3];
    if (!X)
        abort();
    for (int64_t q = 0; q < distinct * d; q++)
        P[q] = floor(9 * testing_uniform());
    for (int64_t i = 0; i < n; i++) {
        int64_t p = i < distinct ? i : (int64_t)(testing_uniform() * (double)distinct) % distinct;
        for (int64_t f = 0; f < d; f++)
            X[i * d + f] = P[p * d + f];
    }
    /* rows 0..5 are points 0..5; the rest of the centres repeat them */
    for (int64_t j = 0; j < k; j++)
        for (int64_t f = 0; f < d; f++)
            init[j * d + f] = X[(j % 6) * d + f];
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = t ? GSB_F64 : GSB_F32;
        void *xv = as_dtype(X, n * d, dt), *iv = as_dtype(init, k * d, dt);
        gsb_array xa = gsb_array_2d(xv, dt, n, d), ia = gsb_array_2d(iv, dt, k, d);
        double tol = dt == GSB_F32 ? 1e-5 : 1e-12;
        compare_devices(&xa, &ia, NULL, k, 300, 0.0, tol);
        compare_devices(&xa, &ia, NULL, k, 300, 1e-4, tol);
        free(xv);
        free(iv);
    }
    free(X);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20261122);
    RUN(test_blobs);
    RUN(test_empty_clusters);
    RUN(test_nonfinite);
    return testing_done();
}
