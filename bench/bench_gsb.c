/*
 * bench_gsb.c - time one estimator of the gsb engine on random data.
 *
 *   bench_gsb ESTIMATOR PARAMS_JSON N D DTYPE(f32|f64) TARGET(none|reg|bin|multi)
 *             NQUERY REPEATS [METHOD]
 *
 * Prints one JSON line: {"fit_ms": median, "predict_ms": median, "peak_rss_mb":
 * the process's peak resident memory, "gpu_pool_mb": growth of the GPU memory
 * in use over the run (the CUDA pool keeps what it reserved, so this is its
 * high-water mark; absent without a GPU)}.
 * METHOD is what is timed after fit ("predict", "transform", "kneighbors";
 * default predict; "none": nothing, for estimators that only fit, TSNE,
 * DBSCAN).  Data: with $GSB_BENCH_DATA=DIR, the raw arrays DIR/X.bin (N x D,
 * C order) and DIR/y.bin (N) in DTYPE, as the driver (bench/compare.py) writes them, so scikit-learn and gsb see the same
 * numbers: iterative solvers (SMO, L-BFGS, Lloyd) take as many steps as
 * their data asks for, so equal shapes alone would compare unequal work.
 * Otherwise X ~ N(0, 1) with a little structure so the estimators have
 * something to find; y from a fixed linear model.  DIR/init.bin, where the
 * driver writes one, holds KMeans's initial centres (K x D, K from the file's
 * size), passed as fit's "init" input.  The JSON line has "n_iter" (the last
 * fit's n_iter_, its largest entry where it is an array) for models that have
 * one, so the driver can check that both sides did the same work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "gsb.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}
static double normal(void)
{
    double s = 0;
    for (int i = 0; i < 4; i++) /* cheap near-normal: sum of uniforms */
        s += uniform();
    return (s - 2.0) * 1.7320508;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* This program's peak resident memory in MB: VmHWM (getrusage's ru_maxrss would
 * include the memory of the process that forked us before exec). */
static double peak_rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = atof(line + 6);
    if (f)
        fclose(f);
    if (kb < 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        kb = (double)ru.ru_maxrss;
    }
    return kb / 1024.0;
}

/* The GPU's free memory in bytes as the session reports it, or -1 without a GPU. */
static double gpu_free_bytes(gsb_session *s)
{
    char *json = NULL;
    double v = -1;
    if (gsb_session_info(s, &json) == GSB_OK && json) {
        const char *at = strstr(json, "\"gpu_memory\"");
        at = at ? strstr(at, "\"free\":") : NULL;
        if (at)
            v = atof(at + strlen("\"free\":"));
    }
    gsb_free(json);
    return v;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_gsb: %s: %s (%s)\n", what, gsb_errmsg(), gsb_status_name(rc));
    exit(1);
}

/* exactly `bytes` bytes of DIR/NAME into buf, or exit */
static void read_raw(const char *dir, const char *name, void *buf, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f || fread(buf, 1, bytes, f) != bytes) {
        fprintf(stderr, "bench_gsb: cannot read %zu bytes from %s\n", bytes, path);
        exit(1);
    }
    fclose(f);
}

/* DIR/init.bin as a K x D array (K from its size), or NULL where there is none */
static void *read_init(const char *dir, long d, size_t item, long *k)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/init.bin", dir);
    if (stat(path, &st) != 0)
        return NULL;
    size_t row = (size_t)d * item;
    if (st.st_size <= 0 || (size_t)st.st_size % row != 0) {
        fprintf(stderr, "bench_gsb: %s holds %lld bytes, not whole rows of %ld\n", path,
                (long long)st.st_size, d);
        exit(1);
    }
    *k = (long)((size_t)st.st_size / row);
    void *buf = malloc((size_t)st.st_size);
    if (!buf) {
        fprintf(stderr, "bench_gsb: out of memory for %s\n", path);
        exit(1);
    }
    read_raw(dir, "init.bin", buf, (size_t)st.st_size);
    return buf;
}

/* Largest entry of the fitted n_iter_ (a scalar, or one per class or pair), or -1 */
static long long fitted_n_iter(const gsb_model *m)
{
    gsb_result *r = NULL;
    if (gsb_model_get_attr(m, "n_iter_", &r) != GSB_OK)
        return -1;
    const gsb_array *a = gsb_result_array(r, 0);
    long long best = -1;
    int64_t count = !a ? 0 : a->ndim == 0 ? 1 : a->shape[0] * (a->ndim > 1 ? a->shape[1] : 1);
    for (int64_t i = 0; i < count; i++) { /* n_iter_ is contiguous */
        long long v = a->dtype == GSB_I32   ? ((const int32_t *)a->data)[i]
                      : a->dtype == GSB_I64 ? ((const int64_t *)a->data)[i]
                      : a->dtype == GSB_F32 ? (long long)((const float *)a->data)[i]
                                            : (long long)((const double *)a->data)[i];
        best = v > best ? v : best;
    }
    gsb_result_free(r);
    return best;
}

/* 8 loose blobs, targets from a fixed linear model */
static void make_data(char *X, char *Y, double *centers, double *w, long n, long d,
                      gsb_dtype dt, const char *target)
{
    for (long j = 0; j < 8 * d; j++)
        centers[j] = 3 * normal();
    for (long j = 0; j < d; j++)
        w[j] = normal();
    for (long i = 0; i < n; i++) {
        long c = i % 8;
        double t = 0;
        for (long j = 0; j < d; j++) {
            double v = centers[c * d + j] + normal();
            t += w[j] * v;
            if (dt == GSB_F32)
                ((float *)X)[i * d + j] = (float)v;
            else
                ((double *)X)[i * d + j] = v;
        }
        double yv = strcmp(target, "bin") == 0     ? (double)(t > 0)
                    : strcmp(target, "multi") == 0 ? (double)c
                                                   : t + 0.1 * normal();
        if (dt == GSB_F32)
            ((float *)Y)[i] = (float)yv;
        else
            ((double *)Y)[i] = yv;
    }
}

int main(int argc, char **argv)
{
    if (argc < 9) {
        fprintf(stderr, "usage: bench_gsb EST PARAMS N D f32|f64 none|reg|bin|multi NQ REPEATS "
                        "[METHOD]\n");
        return 2;
    }
    const char *est = argv[1], *params = argv[2], *target = argv[6];
    long n = atol(argv[3]), d = atol(argv[4]), nq = atol(argv[7]);
    int repeats = atoi(argv[8]);
    const char *method = argc > 9 ? argv[9] : "predict";
    gsb_dtype dt = strcmp(argv[5], "f32") == 0 ? GSB_F32 : GSB_F64;
    size_t item = gsb_dtype_size(dt);

    char *X = malloc((size_t)n * d * item), *Y = malloc((size_t)n * item);
    double *centers = malloc(sizeof(double) * 8 * d), *w = malloc(sizeof(double) * d);
    if (!X || !Y || !centers || !w) {
        fprintf(stderr, "bench_gsb: out of memory for %ld x %ld\n", n, d);
        return 1;
    }
    const char *data_dir = getenv("GSB_BENCH_DATA");
    void *init = NULL;
    long k = 0;
    if (data_dir && *data_dir) {
        read_raw(data_dir, "X.bin", X, (size_t)n * d * item);
        read_raw(data_dir, "y.bin", Y, (size_t)n * item);
        init = read_init(data_dir, d, item, &k);
    } else
        make_data(X, Y, centers, w, n, d, dt, target);
    if (init && strcmp(est, "KMeans") != 0) {
        fprintf(stderr, "bench_gsb: an init array is for KMeans, not %s\n", est);
        return 2;
    }
    gsb_array Xa = gsb_array_2d(X, dt, n, d), Ya = gsb_array_1d(Y, dt, n);
    gsb_array Ia = gsb_array_2d(init, dt, k, d);
    /* KMeans's fit inputs, in its declared order: X, y, sample_weight, init */
    const gsb_array *fit_in[4] = {&Xa, NULL, NULL, &Ia};
    gsb_array Qa = gsb_array_2d(X, dt, nq > 0 && nq < n ? nq : n, d);
    int supervised = strcmp(target, "none") != 0;

    /* GSB_BENCH_SESSION picks the session ("local?device=cuda"); CPU by default */
    const char *url = getenv("GSB_BENCH_SESSION");
    gsb_session *s;
    int rc = gsb_open(url && *url ? url : "local?device=cpu", &s);
    if (rc)
        die("open", rc);
    double *fit = malloc(sizeof(double) * repeats), *pred = malloc(sizeof(double) * repeats);
    double gpu_free0 = gpu_free_bytes(s), gpu_free_min = gpu_free0;
    long long n_iter = -1;
    for (int r = 0; r < repeats; r++) {
        gsb_model *m;
        if ((rc = gsb_model_create(s, est, params, &m)))
            die("create", rc);
        double t0 = now_ms();
        rc = init ? gsb_model_call(m, "fit", fit_in, 4, NULL, NULL)
                  : gsb_model_fit(m, &Xa, supervised ? &Ya : NULL);
        if (rc)
            die("fit", rc);
        fit[r] = now_ms() - t0;
        double f = gpu_free_bytes(s);
        if (f >= 0 && f < gpu_free_min)
            gpu_free_min = f;
        n_iter = fitted_n_iter(m);
        const gsb_array *in[1] = {&Qa};
        gsb_result *res = NULL;
        t0 = now_ms();
        if (strcmp(method, "none") != 0 && (rc = gsb_model_call(m, method, in, 1, NULL, &res)))
            die(method, rc);
        pred[r] = now_ms() - t0;
        gsb_result_free(res);
        gsb_model_free(m);
    }
    printf("{\"fit_ms\": %.3f, \"predict_ms\": %.3f, \"peak_rss_mb\": %.1f", median(fit, repeats),
           median(pred, repeats), peak_rss_mb());
    if (gpu_free0 >= 0)
        printf(", \"gpu_pool_mb\": %.1f", (gpu_free0 - gpu_free_min) / 1048576.0);
    if (n_iter >= 0)
        printf(", \"n_iter\": %lld", n_iter);
    printf("}\n");
    gsb_close(s);
    free(X), free(Y), free(centers), free(w), free(fit), free(pred), free(init);
    return 0;
}
