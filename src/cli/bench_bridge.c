/*
 * bench_bridge.c - `gsb bench-bridge`: how fast the bridge is, in one run,
 * against the targets of issue 5 ("How it is judged").
 *
 *   gsb bench-bridge [--url URL]... [--device auto|cpu|cuda] [--quick] [--json FILE]
 *
 * Without --url it starts gsbd in this process (gsb_server_start) on a Unix
 * socket in a temporary directory and on tcp://127.0.0.1:0, and measures:
 *   1. round trip of a tiny call: LinearRegression (20 features, fitted)
 *      predict on 1 row; 2000 calls after 200 warm-up; p50/p99 in us, over
 *      the Unix socket, over TCP, and in-process for reference;
 *   2. 1 GiB of float32 client -> server with gsb_data_put, best of 3, in
 *      GB/s: Unix socket with the array already in the arena
 *      (gsb_arena_alloc: zero copies), Unix socket with a malloc'd array (one
 *      copy into the arena), TCP loopback; in-process and a plain TCP
 *      loopback socket without gsb (bench_rawtcp.c) for reference;
 *   3. the original project's table (shared/REFERENCE.md) through the
 *      bridge: StandardScaler fit_transform of 5000x20 float32 (563 ms there)
 *      and the "fit_transform stress" of 10000x1280 float32, 51 MB (4185 ms
 *      there), each the whole user-visible operation (create the model, send
 *      X, fit_transform, receive the result, free the model), median of 5
 *      after one warm-up.
 * With --url (repeatable) it measures the given servers instead, by their
 * scheme.  --quick shrinks every size for a CI smoke run (targets are then
 * shown but not judged).  --json FILE also writes every number as JSON.
 *
 * Only the public API (gsb.h): this is what any client sees.
 */
#include "cli/bench_bridge.h"

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gsb.h"

enum { T_UNIX, T_TCP, T_LOCAL, N_T };
static const char *const t_name[N_T] = {"unix", "tcp", "in-process"};

typedef struct {
    int quick;
    const char *device;
    const char *json_path;
    const char *urls[2];
    int n_urls;
} bb_opts;

typedef struct {
    char *url;          /* NULL: transport not measured */
    gsb_session *s;
} bb_transport;

/* one measured number, for the table's verdicts and for --json */
typedef struct {
    char what[96];
    const char *transport;
    double value;
    const char *unit;
    int has_target, higher_is_better;
    double target;
    int pass;
} bb_record;

typedef struct {
    bb_opts o;
    bb_transport t[N_T];
    gsb_server *srv;
    char dir[64];
    bb_record rec[48];
    int n_rec;
    int judged; /* full sizes: targets are judged */
} bb;

/* ---- small helpers ---------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the q-quantile of v[0..n) (sorts v) */
static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double pos = q * (n - 1);
    int i = (int)pos;
    double f = pos - i;
    return i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float uniformf(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * 0x1.0p-24) * 2.0f - 1.0f;
}

static float *random_matrix(size_t n)
{
    float *x = malloc(n * sizeof *x);
    if (x)
        for (size_t i = 0; i < n; i++)
            x[i] = uniformf();
    return x;
}

static int report(const char *what, int rc)
{
    fprintf(stderr, "gsb bench-bridge: %s: %s (%s)\n", what, gsb_errmsg(), gsb_status_name(rc));
    return rc;
}

static void add(bb *b, const char *what, const char *transport, double value, const char *unit,
                int has_target, int higher_is_better, double target)
{
    if (b->n_rec >= (int)(sizeof b->rec / sizeof b->rec[0]))
        return;
    bb_record *r = &b->rec[b->n_rec++];
    snprintf(r->what, sizeof r->what, "%s", what);
    r->transport = transport;
    r->value = value;
    r->unit = unit;
    r->has_target = has_target;
    r->higher_is_better = higher_is_better;
    r->target = target;
    r->pass = !has_target || (higher_is_better ? value >= target : value <= target);
}

static const char *verdict(const bb *b, int has_target, int pass)
{
    if (!has_target)
        return "";
    if (!b->judged)
        return "(quick: not judged)";
    return pass ? "PASS" : "MISS";
}

/* The value of "key":"..." in a flat JSON text (enough for /health's strings). */
static void json_str(const char *json, const char *key, char *out, size_t n)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    out[0] = '\0';
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p)
        return;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != '"')
        return;
    p++;
    size_t i = 0;
    while (*p && *p != '"' && i + 1 < n)
        out[i++] = *p++;
    out[i] = '\0';
}

/* ---- 1. round trip of a tiny call ---------------------------------------------- */

static int bench_rtt(gsb_session *s, int warm, int calls, double *p50_us, double *p99_us)
{
    enum { N = 1000, D = 20 };
    int rc = GSB_OK;
    gsb_model *m = NULL;
    float *X = random_matrix((size_t)N * D), *y = malloc(N * sizeof *y);
    double *t = malloc((size_t)calls * sizeof *t);
    if (!X || !y || !t) {
        fprintf(stderr, "gsb bench-bridge: out of memory\n");
        rc = GSB_ENOMEM;
        goto done;
    }
    for (int i = 0; i < N; i++) {
        float v = 0.5f;
        for (int j = 0; j < D; j++)
            v += (float)(j % 5 - 2) * X[i * D + j];
        y[i] = v + 0.01f * uniformf();
    }
    gsb_array xa = gsb_array_2d(X, GSB_F32, N, D), ya = gsb_array_1d(y, GSB_F32, N);
    if ((rc = gsb_model_create(s, "LinearRegression", NULL, &m)) != GSB_OK ||
        (rc = gsb_model_fit(m, &xa, &ya)) != GSB_OK) {
        report("LinearRegression fit", rc);
        goto done;
    }
    gsb_array row = gsb_array_2d(X, GSB_F32, 1, D);
    const gsb_array *in[1] = {&row};
    for (int i = 0; i < warm + calls; i++) {
        gsb_result *r = NULL;
        double t0 = now_s();
        rc = gsb_model_call(m, "predict", in, 1, NULL, &r);
        double t1 = now_s();
        gsb_result_free(r);
        if (rc != GSB_OK) {
            report("predict", rc);
            goto done;
        }
        if (i >= warm)
            t[i - warm] = (t1 - t0) * 1e6;
    }
    *p99_us = quantile(t, calls, 0.99);
    *p50_us = quantile(t, calls, 0.50);
done:
    gsb_model_free(m);
    free(X);
    free(y);
    free(t);
    return rc;
}

/* ---- 2. bulk transfer ---------------------------------------------------------- */

/* best GB/s of reps gsb_data_put calls of the n floats at x (as rows x 256) */
static int bench_put(gsb_session *s, float *x, size_t n, int reps, double *best_gbs)
{
    gsb_array a = gsb_array_2d(x, GSB_F32, (int64_t)(n / 256), 256);
    double bytes = (double)n * sizeof(float);
    *best_gbs = 0;
    for (int r = 0; r < reps; r++) {
        gsb_data *d = NULL;
        double t0 = now_s();
        int rc = gsb_data_put(s, &a, &d);
        double t1 = now_s();
        gsb_data_free(d);
        if (rc != GSB_OK)
            return report("gsb_data_put", rc);
        double gbs = bytes / (t1 - t0) / 1e9;
        if (gbs > *best_gbs)
            *best_gbs = gbs;
    }
    return GSB_OK;
}

static void fill(float *x, size_t n)
{
    /* touches every page now, so page faults are not timed as transfer */
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i & 1023) * 0.25f;
}

/* ---- 3. the original project's table --------------------------------------------- */

/* median ms of create StandardScaler + fit_transform(X) + free, after one warm-up */
static int bench_scaler(gsb_session *s, const float *X, int64_t rows, int64_t cols, int reps,
                        double *median_ms)
{
    double t[16];
    if (reps > 16)
        reps = 16;
    gsb_array xa = gsb_array_2d((void *)X, GSB_F32, rows, cols);
    const gsb_array *in[1] = {&xa};
    for (int r = -1; r < reps; r++) {
        gsb_model *m = NULL;
        gsb_result *res = NULL;
        double t0 = now_s();
        int rc = gsb_model_create(s, "StandardScaler", NULL, &m);
        if (rc == GSB_OK)
            rc = gsb_model_call(m, "fit_transform", in, 1, NULL, &res);
        const gsb_array *out = rc == GSB_OK ? gsb_result_array(res, 0) : NULL;
        if (rc == GSB_OK && (!out || out->shape[0] != rows || out->shape[1] != cols))
            rc = GSB_EINTERNAL;
        gsb_result_free(res);
        gsb_model_free(m);
        double t1 = now_s();
        if (rc != GSB_OK)
            return report("StandardScaler fit_transform", rc);
        if (r >= 0)
            t[r] = (t1 - t0) * 1e3;
    }
    *median_ms = quantile(t, reps, 0.5);
    return GSB_OK;
}

/* ---- set-up and tear-down -------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static int setup(bb *b)
{
    char local[64];
    snprintf(local, sizeof local, "local?device=%s", b->o.device);
    b->t[T_LOCAL].url = dup_str(local);
    if (b->o.n_urls == 0) {
        snprintf(b->dir, sizeof b->dir, "/tmp/gsb-bench-XXXXXX");
        if (!mkdtemp(b->dir)) {
            perror("gsb bench-bridge: mkdtemp");
            b->dir[0] = '\0';
            return GSB_EIO;
        }
        char opts[512];
        snprintf(opts, sizeof opts,
                 "{\"listen\": [\"unix://%s/s.sock\", \"tcp://127.0.0.1:0\"], "
                 "\"data_dir\": \"%s\", \"device\": \"%s\", \"log_file\": \"%s/gsbd.log\", "
                 "\"log_level\": \"warn\"}",
                 b->dir, b->dir, b->o.device, b->dir);
        int rc = gsb_server_start(opts, &b->srv);
        if (rc != GSB_OK)
            return report("starting the server", rc);
        for (int i = 0; gsb_server_url(b->srv, i); i++) {
            const char *u = gsb_server_url(b->srv, i);
            int k = strncmp(u, "unix://", 7) == 0 ? T_UNIX : T_TCP;
            if (!b->t[k].url)
                b->t[k].url = dup_str(u);
        }
    } else {
        for (int i = 0; i < b->o.n_urls; i++) {
            int k = strncmp(b->o.urls[i], "unix://", 7) == 0 ? T_UNIX : T_TCP;
            free(b->t[k].url);
            b->t[k].url = dup_str(b->o.urls[i]);
        }
    }
    for (int k = 0; k < N_T; k++) {
        if (!b->t[k].url)
            continue;
        int rc = gsb_open(b->t[k].url, &b->t[k].s);
        if (rc != GSB_OK) {
            char what[300];
            snprintf(what, sizeof what, "opening %s", b->t[k].url);
            return report(what, rc);
        }
    }
    return GSB_OK;
}

static void teardown(bb *b)
{
    for (int k = 0; k < N_T; k++) {
        gsb_close(b->t[k].s);
        free(b->t[k].url);
    }
    if (b->srv)
        gsb_server_stop(b->srv);
    if (b->dir[0])
        nftw(b->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---- output ----------------------------------------------------------------------- */

static void json_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
    fputc('"', f);
}

static int write_json(const bb *b, const char *server_info)
{
    FILE *f = fopen(b->o.json_path, "w");
    if (!f) {
        perror(b->o.json_path);
        return 1;
    }
    fprintf(f, "{\"gsb\": \"%s\", \"quick\": %s, \"device\": ", gsb_version(),
            b->o.quick ? "true" : "false");
    json_escaped(f, b->o.device);
    fprintf(f, ",\n \"server\": %s,\n \"results\": [\n", server_info ? server_info : "null");
    for (int i = 0; i < b->n_rec; i++) {
        const bb_record *r = &b->rec[i];
        fprintf(f, "  {\"what\": ");
        json_escaped(f, r->what);
        fprintf(f, ", \"transport\": ");
        json_escaped(f, r->transport);
        fprintf(f, ", \"value\": %.6g, \"unit\": \"%s\"", r->value, r->unit);
        if (r->has_target)
            fprintf(f, ", \"target\": %.6g, \"target_is\": \"%s\", \"pass\": %s", r->target,
                    r->higher_is_better ? "min" : "max", r->pass ? "true" : "false");
        fprintf(f, "}%s\n", i + 1 < b->n_rec ? "," : "");
    }
    fprintf(f, " ]}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        perror(b->o.json_path);
        return 1;
    }
    return 0;
}

static int usage(FILE *f)
{
    fprintf(f,
            "usage: gsb bench-bridge [--url URL]... [--device auto|cpu|cuda] [--quick] "
            "[--json FILE]\n"
            "  Measures the bridge against issue 5's targets: tiny-call round trip\n"
            "  (Unix socket, TCP, in-process), 1 GiB client -> server transfer (arena,\n"
            "  malloc'd, TCP), and the original project's table over TCP.\n"
            "  --url URL     measure this gsbd (tcp:// or unix://, repeatable) instead of\n"
            "                one started in this process\n"
            "  --device D    device of the in-process server and reference (default auto)\n"
            "  --quick       small sizes (a smoke run; targets not judged)\n"
            "  --json FILE   also write the results as JSON\n");
    return f == stderr ? 2 : 0;
}

static int parse(int argc, char **argv, bb_opts *o)
{
    o->device = "auto";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(a, "--url") == 0 && v) {
            if (o->n_urls == 2 || (strncmp(v, "unix://", 7) != 0 && strncmp(v, "tcp://", 6) != 0)) {
                fprintf(stderr, "gsb bench-bridge: --url takes one tcp:// and one unix:// URL\n");
                return 2;
            }
            o->urls[o->n_urls++] = v;
            i++;
        } else if (strcmp(a, "--device") == 0 && v) {
            if (strcmp(v, "auto") != 0 && strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
                fprintf(stderr, "gsb bench-bridge: --device is auto, cpu or cuda\n");
                return 2;
            }
            o->device = v;
            i++;
        } else if (strcmp(a, "--json") == 0 && v) {
            o->json_path = v;
            i++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            return usage(stdout) + 1; /* 1: stop, successfully */
        } else {
            fprintf(stderr, "gsb bench-bridge: unknown or incomplete option '%s'\n", a);
            return usage(stderr);
        }
    }
    return 0;
}

/* The kernel's socket buffer limits, which bound the tcp row (net/sock.c). */
static void print_tcp_sysctls(void)
{
    static const char *const names[] = {"net/core/rmem_max", "net/core/wmem_max",
                                        "net/ipv4/tcp_rmem", "net/ipv4/tcp_wmem"};
    printf("#   sysctl    ");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[64], val[96] = "?";
        snprintf(path, sizeof path, "/proc/sys/%s", names[i]);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(val, sizeof val, f))
                snprintf(val, sizeof val, "?");
            fclose(f);
        }
        val[strcspn(val, "\n")] = '\0';
        for (char *c = val; *c; c++)
            if (*c == '\t')
                *c = ' ';
        printf("%s%s=%s", i ? ", " : "", names[i] + 4, val);
    }
    printf("\n");
}

/* ---- the benchmark ----------------------------------------------------------------- */

static int run_all(bb *b)
{
    const int quick = b->o.quick;
    const int warm = quick ? 20 : 200, calls = quick ? 200 : 2000;
    const size_t put_bytes = quick ? ((size_t)64 << 20) : ((size_t)1 << 30);
    const int reps = quick ? 2 : 3, table_reps = quick ? 3 : 5;
    const int64_t stress_rows = quick ? 1000 : 10000;
    int rc;

    /* 1. round trip */
    printf("\n## Round trip of a tiny call: LinearRegression (20 features) predict on 1 row\n"
           "%d calls after %d warm-up\n\n"
           "| transport | p50 us | p99 us | target (p50) | |\n|---|---:|---:|---|---|\n",
           calls, warm);
    const double rtt_target[N_T] = {100, 150, 0};
    for (int k = 0; k < N_T; k++) {
        if (!b->t[k].s)
            continue;
        double p50, p99;
        if ((rc = bench_rtt(b->t[k].s, warm, calls, &p50, &p99)) != GSB_OK)
            return rc;
        int has = k != T_LOCAL;
        add(b, "round trip p50", t_name[k], p50, "us", has, 0, rtt_target[k]);
        add(b, "round trip p99", t_name[k], p99, "us", 0, 0, 0);
        char target[32] = "(reference)";
        if (has)
            snprintf(target, sizeof target, "<= %.0f us", rtt_target[k]);
        printf("| %s | %.1f | %.1f | %s | %s |\n", t_name[k], p50, p99, target,
               verdict(b, has, b->rec[b->n_rec - 2].pass));
        fflush(stdout);
    }

    /* 2. transfer */
    size_t n = put_bytes / sizeof(float);
    printf("\n## %s float32 client -> server with gsb_data_put, best of %d\n\n"
           "| path | GB/s | target | |\n|---|---:|---|---|\n",
           quick ? "64 MiB" : "1 GiB", reps);
    struct {
        int k, arena;
        const char *what;
        double target;
    } paths[] = {
        {T_UNIX, 1, "unix, array already in the arena (zero copies)", 40},
        {T_UNIX, 0, "unix, malloc'd array (one copy into the arena)", 20},
        {T_TCP, 0, "tcp loopback", 2.5},
        {T_LOCAL, 0, "in-process (gsb_data_put's own copy)", 0},
    };
    float *heap = NULL;
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        gsb_session *s = b->t[paths[p].k].s;
        if (!s)
            continue;
        float *x = NULL;
        if (paths[p].arena) {
            if ((rc = gsb_arena_alloc(s, put_bytes, (void **)&x)) != GSB_OK) {
                report("gsb_arena_alloc", rc);
                free(heap);
                return rc;
            }
            fill(x, n);
        } else {
            if (!heap) {
                heap = malloc(put_bytes);
                if (!heap) {
                    fprintf(stderr, "gsb bench-bridge: cannot allocate %zu bytes\n", put_bytes);
                    return GSB_ENOMEM;
                }
                fill(heap, n);
            }
            x = heap;
        }
        double gbs;
        rc = bench_put(s, x, n, reps, &gbs);
        if (paths[p].arena)
            gsb_arena_free(s, x);
        if (rc != GSB_OK) {
            free(heap);
            return rc;
        }
        int has = paths[p].target > 0;
        add(b, paths[p].what, t_name[paths[p].k], gbs, "GB/s", has, 1, paths[p].target);
        char target[32] = "(reference)";
        if (has)
            snprintf(target, sizeof target, ">= %g GB/s", paths[p].target);
        printf("| %s | %.2f | %s | %s |\n", paths[p].what, gbs, target,
               verdict(b, has, b->rec[b->n_rec - 1].pass));
        fflush(stdout);
    }
    /* the kernel's own loopback rate, when the server is this machine's */
    double raw;
    if (b->srv && heap && gsb__cli_raw_tcp_gbs(heap, put_bytes, reps, &raw) == 0) {
        add(b, "tcp loopback, plain socket (the kernel's rate)", "tcp", raw, "GB/s", 0, 1, 0);
        printf("| tcp loopback, plain socket without gsb (the kernel's rate) | %.2f | "
               "(reference) |  |\n", raw);
    }
    free(heap);

    /* 3. the original project's table */
    printf("\n## The original project's table through the bridge "
           "(create + fit_transform + result + free; median of %d after 1 warm-up)\n\n"
           "| work | size | original ms | tcp ms | unix ms | in-process ms | target (tcp) | |\n"
           "|---|---|---:|---:|---:|---:|---|---|\n",
           table_reps);
    struct {
        const char *what;
        int64_t rows, cols;
        double original_ms, target_ms;
    } work[] = {
        {"StandardScaler fit_transform", 5000, 20, 563, 2},
        {"fit_transform stress (StandardScaler)", stress_rows, 1280, 4185, 60},
    };
    for (size_t w = 0; w < sizeof work / sizeof work[0]; w++) {
        float *X = random_matrix((size_t)(work[w].rows * work[w].cols));
        if (!X) {
            fprintf(stderr, "gsb bench-bridge: out of memory\n");
            return GSB_ENOMEM;
        }
        double ms[N_T] = {-1, -1, -1};
        for (int k = 0; k < N_T; k++) {
            if (!b->t[k].s)
                continue;
            if ((rc = bench_scaler(b->t[k].s, X, work[w].rows, work[w].cols, table_reps,
                                   &ms[k])) != GSB_OK) {
                free(X);
                return rc;
            }
            char what[96];
            snprintf(what, sizeof what, "%s %lldx%lld", work[w].what, (long long)work[w].rows,
                     (long long)work[w].cols);
            add(b, what, t_name[k], ms[k], "ms", k == T_TCP, 0, work[w].target_ms);
        }
        free(X);
        char cell[N_T][24];
        for (int k = 0; k < N_T; k++)
            snprintf(cell[k], sizeof cell[k], ms[k] < 0 ? "-" : "%.2f", ms[k]);
        int pass = ms[T_TCP] >= 0 && ms[T_TCP] <= work[w].target_ms;
        printf("| %s | %lldx%lld | %.0f | %s | %s | %s | <= %.0f ms | %s |\n", work[w].what,
               (long long)work[w].rows, (long long)work[w].cols, work[w].original_ms,
               cell[T_TCP], cell[T_UNIX], cell[T_LOCAL], work[w].target_ms,
               ms[T_TCP] < 0 ? "" : verdict(b, 1, pass));
        fflush(stdout);
    }
    return GSB_OK;
}

int gsb__cli_bench_bridge(int argc, char **argv)
{
    bb *b = calloc(1, sizeof *b);
    if (!b) {
        fprintf(stderr, "gsb bench-bridge: out of memory\n");
        return 1;
    }
    int status = parse(argc, argv, &b->o);
    if (status != 0) {
        free(b);
        return status == 1 ? 0 : status;
    }
    b->judged = !b->o.quick;
    char *server_info = NULL;
    int rc = setup(b);
    if (rc == GSB_OK) {
        gsb_session *remote = b->t[T_UNIX].s ? b->t[T_UNIX].s : b->t[T_TCP].s;
        char backend[64], device[128], local_backend[64];
        if (remote && gsb_session_info(remote, &server_info) != GSB_OK)
            server_info = NULL;
        char *local_info = NULL;
        if (gsb_session_info(b->t[T_LOCAL].s, &local_info) != GSB_OK)
            local_info = NULL;
        json_str(server_info, "backend", backend, sizeof backend);
        json_str(server_info, "device", device, sizeof device);
        json_str(local_info, "backend", local_backend, sizeof local_backend);
        gsb_free(local_info);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        printf("# gsb bench-bridge: gsb %s, %ld cores, server %s (backend %s%s%s), "
               "in-process reference device=%s (backend %s)%s\n",
               gsb_version(), cores, b->srv ? "in this process" : "given by --url",
               backend[0] ? backend : "?", device[0] ? ", " : "", device, b->o.device,
               local_backend[0] ? local_backend : "?", b->o.quick ? "; --quick sizes" : "");
        for (int k = 0; k < N_T; k++)
            if (b->t[k].url)
                printf("#   %-10s %s\n", t_name[k], b->t[k].url);
        print_tcp_sysctls();
        fflush(stdout);
        rc = run_all(b);
    }
    if (rc == GSB_OK && b->o.json_path && write_json(b, server_info) != 0)
        rc = GSB_EIO;
    if (rc == GSB_OK && b->judged) {
        int missed = 0, judged = 0;
        for (int i = 0; i < b->n_rec; i++)
            if (b->rec[i].has_target) {
                judged++;
                missed += !b->rec[i].pass;
            }
        printf("\n%d of %d targets met\n", judged - missed, judged);
    }
    gsb_free(server_info);
    teardown(b);
    free(b);
    return rc == GSB_OK ? 0 : 1;
}
