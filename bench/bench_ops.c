/*
 * bench_ops.c - the fused GPU kernels against the hardware's limits, measured
 * in one run: the FP32 GEMM rate (cuBLAS through the gemm op) and the
 * device-to-device copy bandwidth are the ceilings; argmin_sqdist (KMeans)
 * and topk (kNN) report their achieved FLOP/s as a fraction of the GEMM rate
 * (counting 2*n*k*d for the distance dot products), the reductions
 * (col_moments, segment_sum: KMeans' M-step) their
 * bytes/s as a fraction of the copy bandwidth.  umap_sgd_epoch (UMAP's
 * layout SGD) reports the edge and negative-sample steps it takes per
 * second (random reads of the embedding: no meaningful ceiling).  topk's
 * fused and GEMM paths (and topk_fast's TF32 one) go against the GEMM of the
 * same shape (and, for topk, the ceiling); float32's exact mode
 * (GSB_TOPK_F32=exact) and its pruned path without the screen, float64's
 * exact mode, tile sizes and R from the host too.
 * argmin_sqdist's modes (GSB_ARGMIN) each get a row, with the share of rows
 * the tensor-core modes left to the exact path.
 * Host <-> device copies (cuda) against a pinned-memory DMA of the same
 * size, the link's ceiling: uploads and downloads of KMeans 1M x 64's X in
 * float32 (256 MB) and float64 (512 MB) and its labels (4 MB), from and to
 * pageable memory (malloc'd and touched; the 4 MB download also into
 * fresh untouched pages, as a result array), under each of cuda_copy.cu's
 * settings (GSB_CUDA_COPY_*: each row sets its own, whatever the caller's
 * environment says).
 * kmeanspp (KMeans' k-means++ init: a first centre and 99 greedy steps in
 * one call) reports the bytes of X its passes read per second against the
 * copy bandwidth (each pass must read X once).
 *
 *   bench_ops [cuda|cpu] [copy|kmeans]   prints a markdown table (copy: the copy rows
 *                                  alone; kmeans: the ceilings and the KMeans kernels'
 *                                  rows, short enough to run under ncu)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/umap_sgd.h"
#include "core/tensor.h"

static const gsb__backend *be;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_ops: %s: %s\n", what, gsb_errmsg());
    exit(1);
}

static gsb__tensor random_tensor(gsb_dtype dt, int64_t rows, int64_t cols, uint64_t seed)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(be, dt, rows, cols, &t) || be->ops->rand_normal(be, &t, seed))
        die("random tensor");
    return t;
}

/* Wait for the device: a 1-element download completes after earlier work. */
static void sync_on(const gsb__tensor *t)
{
    gsb__tensor one = *t;
    one.rows = 1;
    one.cols = 1;
    double tmp[1];
    if (be->ops->download(be, &one, tmp))
        die("sync");
}

typedef int (*bench_fn)(void *arg);

/* median seconds of reps runs of fn after one warm-up */
static double time_it(bench_fn fn, void *arg, const gsb__tensor *sync, int reps)
{
    double t[32];
    if (fn(arg))
        die("warm-up");
    sync_on(sync);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (fn(arg))
            die("run");
        sync_on(sync);
        t[r] = now_s() - t0;
    }
    for (int i = 0; i < reps; i++) /* insertion sort: reps is small */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[reps / 2];
}

struct gemm_args { gsb__tensor A, B, C; };
static int run_gemm(void *p)
{
    struct gemm_args *a = p;
    return be->ops->gemm(be, 0, 1, 1.0, &a->A, &a->B, 0.0, &a->C);
}

struct copy_args { gsb__tensor src, dst; };
static int run_copy(void *p)
{
    struct copy_args *a = p;
    return be->ops->copy(be, &a->dst, &a->src);
}

struct argmin_args { gsb__tensor X, C, labels, mind; };
static int run_argmin(void *p)
{
    struct argmin_args *a = p;
    return be->ops->argmin_sqdist(be, &a->X, &a->C, &a->labels, &a->mind);
}

struct segment_args { gsb__tensor X, labels, sums, counts; };
static int run_segment(void *p)
{
    struct segment_args *a = p;
    return be->ops->segment_sum(be, &a->X, &a->labels, NULL, &a->sums, &a->counts);
}

/* KMeans' M-step on its benchmark shape, labels from an E-step (clusters of
 * ~n / k rows in random row order), bytes/s of X and the labels against the
 * copy bandwidth.  The fourth session's shared-memory tile kernel it
 * replaced ran 0.695 ms (float32) and 0.676 ms (float64) on an H200. */
static void bench_segment(int big, gsb_dtype dt, double copy_bw)
{
    int64_t n = big ? 1000000 : 100000, d = 64, k = 100;
    struct segment_args sa = {.X = random_tensor(dt, n, d, 11)};
    struct argmin_args aa = {.X = sa.X, .C = random_tensor(dt, k, d, 12)};
    if (gsb__tensor_alloc(be, GSB_I32, n, 1, &sa.labels) ||
        gsb__tensor_alloc(be, dt, n, 1, &aa.mind) ||
        gsb__tensor_alloc(be, GSB_F64, k, d, &sa.sums) ||
        gsb__tensor_alloc(be, GSB_F64, k, 1, &sa.counts))
        die("alloc");
    aa.labels = sa.labels;
    if (run_argmin(&aa))
        die("argmin_sqdist");
    double t = time_it(run_segment, &sa, &sa.counts, 9);
    double bw = (double)n * (d * gsb_dtype_size(dt) + 4) / t;
    printf("| segment_sum %s (KMeans; s4 tile kernel: %s ms) | %lld x %lld, k=%lld | %.3f | "
           "%.0f GB/s | %.2f |\n",
           gsb_dtype_name(dt), dt == GSB_F32 ? "0.695" : "0.676", (long long)n, (long long)d,
           (long long)k, t * 1e3, bw / 1e9, bw / copy_bw);
    gsb__tensor *all[] = {&sa.X, &sa.labels, &sa.sums, &sa.counts, &aa.C, &aa.mind};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gsb__tensor_free(all[i]);
}

struct topk_args { gsb__tensor Q, R, dist, idx; int64_t k; };
static int run_topk(void *p)
{
    struct topk_args *a = p;
    return be->ops->topk(be, &a->Q, &a->R, a->k, GSB__METRIC_EUCLIDEAN, 0, &a->dist, &a->idx);
}

struct moments_args { gsb__tensor X, mean, var; };
static int run_moments(void *p)
{
    struct moments_args *a = p;
    return be->ops->col_moments(be, &a->X, NULL, &a->mean, &a->var);
}

/* UMAP's SGD: a random graph of n points, deg edges each, weights w in
 * (0.05, 1] (epochs per sample 1 / w), dim 2; one epoch per call. */
struct umap_args {
    gsb__tensor head, indptr, indices, eps, next_sample, next_negative;
    gsb__umap_sgd p;
};
static int run_umap(void *p)
{
    struct umap_args *a = p;
    int rc = be->ops->umap_sgd_epoch(be, &a->head, NULL, &a->indptr, &a->indices, &a->eps,
                                     &a->next_sample, &a->next_negative, &a->p);
    a->p.epoch++;
    return rc;
}

static uint64_t umap_rng = 0x9E3779B97F4A7C15ull;
static double umap_uniform(void)
{
    umap_rng ^= umap_rng << 13;
    umap_rng ^= umap_rng >> 7;
    umap_rng ^= umap_rng << 17;
    return (double)(umap_rng >> 11) * 0x1.0p-53;
}

/*
 * compare.py's KMeans data (make_data: 8 blob centres 3 N(0, 1), unit
 * noise, row i in blob i % 8), centred on the column means as KMeans does,
 * on the device in dtype dt.
 */
static gsb__tensor blob_tensor(gsb_dtype dt, int64_t n, int64_t d)
{
    double *h = malloc((size_t)(n * d) * sizeof(double)), *b = malloc(8 * d * sizeof(double));
    double *mu = calloc((size_t)d, sizeof(double));
    if (!h || !b || !mu)
        die("blobs");
    for (int64_t i = 0; i < n * d + 8 * d; i++) { /* Box-Muller normals */
        double u = umap_uniform() + 1e-300, v = umap_uniform();
        double z = sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
        if (i < 8 * d)
            b[i] = 3.0 * z;
        else
            h[i - 8 * d] = b[((i - 8 * d) / d % 8) * d + (i - 8 * d) % d] + z;
    }
    for (int64_t i = 0; i < n * d; i++)
        mu[i % d] += h[i] / (double)n;
    for (int64_t i = 0; i < n * d; i++)
        h[i] -= mu[i % d];
    gsb__tensor t;
    if (gsb__tensor_alloc(be, GSB_F64, n, d, &t) || be->ops->upload(be, &t, h))
        die("blobs upload");
    gsb__tensor out = t;
    if (dt != GSB_F64 && (gsb__tensor_alloc(be, dt, n, d, &out) || be->ops->copy(be, &out, &t)))
        die("blobs cast");
    if (dt != GSB_F64)
        gsb__tensor_free(&t);
    free(h);
    free(b);
    free(mu);
    return out;
}

/*
 * argmin_sqdist's modes (GSB_ARGMIN: the exact kernel, the tensor-core
 * ranking with 3xTF32 or TF32 tiles, cuda_argmin_tc.cu) at the KMeans row's
 * shape in both dtypes, on random centres, on centres that are rows of X
 * (as k-means++ picks them), and on compare.py's KMeans blobs with rows of
 * X as centres (the given-init row's first E-step), each with the share of
 * rows the tensor-core modes left to the exact path (GSB_ARGMIN_STATS).
 */
static void bench_argmin_modes(int big, double gemm_rate)
{
    static const char *const modes[] = {"exact", "3xtf32", "tf32"};
    int64_t n = big ? 1000000 : 100000, d = 64, k = 100;
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = t ? GSB_F64 : GSB_F32;
        struct argmin_args aa = {.X = random_tensor(dt, n, d, 4), .C = random_tensor(dt, k, d, 5)};
        if (gsb__tensor_alloc(be, GSB_I32, n, 1, &aa.labels) ||
            gsb__tensor_alloc(be, dt, n, 1, &aa.mind))
            die("alloc");
        for (int from_x = 0; from_x < 3; from_x++) {
            if (from_x == 2) { /* the blobs */
                gsb__tensor_free(&aa.X);
                aa.X = blob_tensor(dt, n, d);
            }
            if (from_x) { /* centres: rows 0, 10007, 20014, ... of X */
                for (int64_t j = 0; j < k; j++) {
                    gsb__tensor dst = gsb__tensor_rows(&aa.C, j, 1);
                    gsb__tensor src = gsb__tensor_rows(&aa.X, j * 10007 % n, 1);
                    if (be->ops->copy(be, &dst, &src))
                        die("copy");
                }
            }
            for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
                setenv("GSB_ARGMIN", modes[m], 1);
                double tm = time_it(run_argmin, &aa, &aa.mind, 9);
                char share[64] = "-";
                if (m > 0) {
                    setenv("GSB_ARGMIN_STATS", "quiet", 1);
                    if (run_argmin(&aa))
                        die("argmin");
                    unsetenv("GSB_ARGMIN_STATS");
                    const char *rows = getenv("GSB_ARGMIN_EXACT_ROWS");
                    snprintf(share, sizeof share, "%.3f%% of rows exact",
                             rows ? 100.0 * atof(rows) / (double)n : -1.0);
                }
                unsetenv("GSB_ARGMIN");
                double rate = 2.0 * n * k * d / tm;
                printf("| argmin_sqdist %s %s, %s centres (%s) | %lld x %lld, k=%lld | %.3f | "
                       "%.1f TFLOP/s | %.2f |\n",
                       gsb_dtype_name(dt), modes[m],
                       from_x == 2 ? "blobs, X-row" : from_x ? "X-row" : "random", share,
                       (long long)n, (long long)d, (long long)k, tm * 1e3, rate / 1e12,
                       rate / gemm_rate);
            }
        }
        gsb__tensor *all[] = {&aa.X, &aa.C, &aa.labels, &aa.mind};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            gsb__tensor_free(all[i]);
    }
}

/* steps (edges due plus negative samples) of the epochs ahead, counted on the host */
static double umap_steps_per_epoch(const double *eps, int64_t nnz, int64_t epochs)
{
    double total = 0;
    for (int64_t e = 0; e < nnz; e++)
        total += (double)epochs / eps[e] * 6.0; /* one edge step and 5 negatives */
    return total / (double)epochs;
}

static void bench_umap(int big)
{
    int64_t n = big ? 1000000 : 20000, deg = 15, nnz = n * deg, dim = 2;
    int64_t *ptr = malloc(sizeof *ptr * (size_t)(n + 1));
    int32_t *idx = malloc(sizeof *idx * (size_t)nnz);
    double *eps = malloc(sizeof *eps * (size_t)nnz), *nn = malloc(sizeof *nn * (size_t)nnz);
    float *head = malloc(sizeof *head * (size_t)(n * dim));
    if (!ptr || !idx || !eps || !nn || !head)
        die("umap data");
    for (int64_t i = 0; i <= n; i++)
        ptr[i] = i * deg;
    for (int64_t e = 0; e < nnz; e++) {
        idx[e] = (int32_t)(umap_uniform() * (double)n);
        eps[e] = 1.0 / (0.05 + 0.95 * umap_uniform());
        nn[e] = eps[e] / 5.0;
    }
    for (int64_t i = 0; i < n * dim; i++)
        head[i] = (float)(10.0 * umap_uniform());
    struct umap_args a = {.p = {0, 1.577, 0.895, 1.0, 1.0, 5.0, 2.0, 1, 0, 0}};
    if (gsb__tensor_alloc(be, GSB_F32, n, dim, &a.head) ||
        gsb__tensor_alloc(be, GSB_I64, n + 1, 1, &a.indptr) ||
        gsb__tensor_alloc(be, GSB_I32, nnz, 1, &a.indices) ||
        gsb__tensor_alloc(be, GSB_F64, nnz, 1, &a.eps) ||
        gsb__tensor_alloc(be, GSB_F64, nnz, 1, &a.next_sample) ||
        gsb__tensor_alloc(be, GSB_F64, nnz, 1, &a.next_negative) ||
        be->ops->upload(be, &a.head, head) || be->ops->upload(be, &a.indptr, ptr) ||
        be->ops->upload(be, &a.indices, idx) || be->ops->upload(be, &a.eps, eps) ||
        be->ops->upload(be, &a.next_sample, eps) || be->ops->upload(be, &a.next_negative, nn))
        die("umap upload");
    double steps = umap_steps_per_epoch(eps, nnz, 200);
    for (int hog = 0; hog < (big ? 2 : 1); hog++) {
        a.p.hogwild = hog;
        double t = time_it(run_umap, &a, &a.head, 9);
        printf("| umap_sgd_epoch%s (UMAP) | %lld x %d, %lld edges | %.3f | %.0f M steps/s | - |\n",
               hog ? " hogwild" : "", (long long)n, (int)dim, (long long)nnz, t * 1e3,
               steps / t / 1e6);
    }
    gsb__tensor *all[] = {&a.head, &a.indptr, &a.indices, &a.eps, &a.next_sample,
                          &a.next_negative};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gsb__tensor_free(all[i]);
    free(ptr), free(idx), free(eps), free(nn), free(head);
}

/* topk with op (topk or topk_fast) and metric, on the path GSB_TOPK_PATH
 * names ("gemm", "fused"; NULL: the default dispatch). */
struct topk_path_args { struct topk_args t; int fast; };
static int run_topk_path(void *p)
{
    struct topk_path_args *a = p;
    return (a->fast ? be->ops->topk_fast : be->ops->topk)(
        be, &a->t.Q, &a->t.R, a->t.k, GSB__METRIC_EUCLIDEAN, 0, &a->t.dist, &a->t.idx);
}

/* The 8192^3 FP32 GEMM's rate (main sets it): topk rows name their
 * fraction of it too. */
static double ceiling_rate;

/* One topk row: its time and its FLOP/s as a fraction of `limit` (the
 * same-shape GEMM's) and of the ceiling. */
static void topk_row(struct topk_path_args *a, const char *name, const char *path, int reps,
                     double limit)
{
    if (path)
        setenv("GSB_TOPK_PATH", path, 1);
    else
        unsetenv("GSB_TOPK_PATH");
    double t = time_it(run_topk_path, a, &a->t.dist, reps);
    unsetenv("GSB_TOPK_PATH");
    int64_t nq = a->t.Q.rows, nr = a->t.R.rows, d = a->t.Q.cols;
    double rate = 2.0 * nq * nr * d / t;
    printf("| %s | %lld q x %lld x %lld %s, k=%lld | %.3f | %.1f TFLOP/s (%.2f of the "
           "ceiling) | %.2f |\n",
           name, (long long)nq, (long long)nr, (long long)d, gsb_dtype_name(a->t.Q.dtype),
           (long long)a->t.k, t * 1e3, rate / 1e12, rate / ceiling_rate, rate / limit);
}

/* A topk row with env set to val for its runs. */
static void topk_env_row(struct topk_path_args *a, const char *name, const char *env,
                         const char *val, double limit)
{
    setenv(env, val, 1);
    topk_row(a, name, NULL, 3, limit);
    unsetenv(env);
}

/* The references uploaded from pageable host memory and searched: whole
 * first (upload, then topk), or handed to topk on the host (it uploads them
 * piece by piece behind the search; cuda_topk_gemm.cu). */
struct topk_host_args { struct topk_path_args p; gsb__tensor Rhost; int in_op; };
static int run_topk_host(void *v)
{
    struct topk_host_args *a = v;
    if (a->in_op)
        return be->ops->topk(be, &a->p.t.Q, &a->Rhost, a->p.t.k, GSB__METRIC_EUCLIDEAN, 0,
                             &a->p.t.dist, &a->p.t.idx);
    int rc = be->ops->upload(be, &a->p.t.R, a->Rhost.data);
    return rc ? rc : run_topk_path(&a->p);
}

/* float64 at the kNN row's shape: the exact mode (DGEMM tiles), smaller tile
 * buffers (GSB_TOPK_TILE_BYTES; both fit the L2 at 16 MiB), and R from the
 * host, uploaded first or behind the search. */
static void bench_topk_f64(struct topk_path_args *a, double limit)
{
    setenv("GSB_TOPK_F64", "exact", 1);
    topk_row(a, "topk float64 exact mode (DGEMM tiles)", "gemm", 3, limit);
    unsetenv("GSB_TOPK_F64");
    static const char *const tiles[] = {"33554432", "16777216"};
    static const char *const names[] = {"topk float64 pruned, 32 MiB tile buffers",
                                        "topk float64 pruned, 16 MiB tile buffers"};
    for (int i = 0; i < 2; i++) {
        setenv("GSB_TOPK_TILE_BYTES", tiles[i], 1);
        topk_row(a, names[i], "gemm", 3, limit);
        unsetenv("GSB_TOPK_TILE_BYTES");
    }
    struct topk_host_args h = {.p = *a};
    size_t bytes = (size_t)(a->t.R.rows * a->t.R.cols) * gsb_dtype_size(a->t.R.dtype);
    h.Rhost = a->t.R;
    h.Rhost.be = gsb__cpu_backend();
    h.Rhost.owned = 0;
    h.Rhost.data = malloc(bytes);
    if (!h.Rhost.data || be->ops->download(be, &a->t.R, h.Rhost.data))
        die("host R");
    int64_t nq = a->t.Q.rows, nr = a->t.R.rows, d = a->t.Q.cols;
    for (h.in_op = 0; h.in_op < 2; h.in_op++) {
        double t = time_it(run_topk_host, &h, &a->t.dist, 3);
        printf("| topk float64, R from pageable host memory, %s | %lld q x %lld x %lld, "
               "k=%lld | %.3f | %.1f GB/s of R | - |\n",
               h.in_op ? "uploaded behind the search" : "uploaded first", (long long)nq,
               (long long)nr, (long long)d, (long long)a->t.k, t * 1e3, bytes / t / 1e9);
    }
    free(h.Rhost.data);
}

/*
 * topk's two paths (cuda_topk.cu's fused kernel, cuda_topk_gemm.cu's GEMM
 * tiles; topk_fast's TF32 tiles) at the kNN row's shape (float32 and
 * float64) and at UMAP's (a 20k-query block of 70k x 784, k = 15), each
 * against the same-shape GEMM (nq x nr written whole: the fair limit of a
 * GEMM-based top-k), measured first.
 */
static void bench_topk_paths(int big)
{
    static const struct { gsb_dtype dt; int64_t nq, nr, d, k; } shapes[] = {
        {GSB_F32, 10000, 200000, 64, 10}, {GSB_F64, 10000, 200000, 64, 10},
        {GSB_F32, 20000, 70000, 784, 15}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t div = big ? 1 : 10;
        int64_t nq = shapes[s].nq / div, nr = shapes[s].nr / div, d = shapes[s].d;
        gsb_dtype dt = shapes[s].dt;
        struct topk_path_args a = {.t = {.Q = random_tensor(dt, nq, d, 11),
                                         .R = random_tensor(dt, nr, d, 12),
                                         .k = shapes[s].k}};
        struct gemm_args ga = {.A = a.t.Q, .B = a.t.R};
        if (gsb__tensor_alloc(be, dt, nq, a.t.k, &a.t.dist) ||
            gsb__tensor_alloc(be, GSB_I64, nq, a.t.k, &a.t.idx) ||
            gsb__tensor_alloc(be, dt, nq, nr, &ga.C))
            die("alloc");
        double t = time_it(run_gemm, &ga, &ga.C, 3);
        double limit = 2.0 * nq * nr * d / t;
        printf("| %s same-shape GEMM (limit) | %lld x %lld x %lld | %.3f | %.1f TFLOP/s | 1.00 |\n",
               dt == GSB_F32 ? "FP32" : "FP64", (long long)nq, (long long)nr, (long long)d,
               t * 1e3, limit / 1e12);
        gsb__tensor_free(&ga.C);
        topk_row(&a, "topk fused", "fused", 3, limit);
        topk_row(&a, "topk GEMM path", "gemm", 3, limit);
        topk_row(&a, "topk (default dispatch)", NULL, 3, limit);
        if (dt == GSB_F32) {
            /* pruned through TF32 (the default) against the exact mode */
            topk_env_row(&a, "topk float32 exact mode (GSB_TOPK_F32=exact: the unpruned path)",
                         "GSB_TOPK_F32", "exact", limit);
            topk_env_row(&a, "topk float32 pruned, GEMM tiles only (GSB_TOPK_SCREEN=off)",
                         "GSB_TOPK_SCREEN", "off", limit);
            a.fast = 1;
            topk_row(&a, "topk_fast TF32 GEMM path", "gemm", 3, limit);
        } else if (be != gsb__cpu_backend()) {
            bench_topk_f64(&a, limit);
        }
        gsb__tensor *all[] = {&a.t.Q, &a.t.R, &a.t.dist, &a.t.idx};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            gsb__tensor_free(all[i]);
    }
}

/* KMeans' k-means++ init (the kmeanspp op): a first centre and k - 1 greedy
 * steps of 2 + ln k candidates in one call (one wait). */
struct kpp_args {
    gsb__tensor X, closest;
    double *u, pot;
    int64_t steps, trials, chosen[128];
};
static int run_kpp(void *p)
{
    struct kpp_args *a = p;
    return be->ops->kmeanspp(be, &a->X, NULL, 17, a->u, a->steps, a->trials, &a->closest,
                             &a->pot, a->chosen);
}

/* Each pass reads X once (the first centre's and each step's): the rate is
 * those bytes over the time, against the device copy's. */
static void bench_kmeanspp(int big, double copy_bw)
{
    int64_t n = big ? 1000000 : 100000, d = 64, k = 100;
    struct kpp_args a = {.steps = k - 1, .trials = 6};
    a.u = malloc(sizeof(double) * (size_t)(a.steps * a.trials));
    if (!a.u)
        die("alloc");
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (int64_t q = 0; q < a.steps * a.trials; q++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a.u[q] = (double)(s >> 11) / 9007199254740992.0;
    }
    for (int di = 0; di < 2; di++) {
        gsb_dtype dt = di ? GSB_F32 : GSB_F64;
        a.X = random_tensor(dt, n, d, 9 + di);
        if (gsb__tensor_alloc(be, GSB_F64, n, 1, &a.closest))
            die("alloc");
        double t = time_it(run_kpp, &a, &a.closest, 5);
        double bw = (double)(a.steps + 1) * n * d * gsb_dtype_size(dt) / t;
        printf("| kmeanspp %s (KMeans init, %.3f ms a step) | %lld x %lld, k=%lld | %.3f | "
               "%.0f GB/s | %.2f |\n",
               gsb_dtype_name(dt), t * 1e3 / (double)(a.steps + 1), (long long)n, (long long)d,
               (long long)k, t * 1e3, bw / 1e9, bw / copy_bw);
        gsb__tensor_free(&a.X);
        gsb__tensor_free(&a.closest);
    }
    free(a.u);
}

/* ---- host <-> device copies ---------------------------------------------------- */

static const char *const copy_vars[] = {"GSB_CUDA_COPY_MODE", "GSB_CUDA_COPY_THREADS",
                                        "GSB_CUDA_COPY_CHUNK_MB", "GSB_CUDA_COPY_SPIN_US",
                                        "GSB_CUDA_COPY_PREFAULT", "GSB_CUDA_COPY_PARTS"};

/* one of cuda_copy.cu's settings: NAME=VALUE pairs over the defaults */
struct copy_alt {
    const char *name;
    const char *set[3][2];
};

static void copy_alt_apply(const struct copy_alt *a)
{
    for (size_t i = 0; i < sizeof copy_vars / sizeof copy_vars[0]; i++)
        unsetenv(copy_vars[i]);
    for (int i = 0; i < 3; i++)
        if (a->set[i][0] && setenv(a->set[i][0], a->set[i][1], 1) != 0)
            die("setenv");
}

struct xfer_args {
    gsb__tensor dev;
    void *host;     /* NULL: a fresh mapping per run (untouched pages) */
    size_t bytes;
    int down;
};

static int run_xfer(void *p)
{
    struct xfer_args *a = p;
    if (a->host)
        return a->down ? be->ops->download(be, &a->dev, a->host)
                       : be->ops->upload(be, &a->dev, a->host);
    void *h = mmap(NULL, a->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (h == MAP_FAILED)
        return GSB_ENOMEM;
    int rc = be->ops->download(be, &a->dev, h);
    munmap(h, a->bytes);
    return rc;
}

/* seconds of one upload or download of a's bytes (median of 5) */
static double xfer_time(struct xfer_args *a, int down, void *host)
{
    a->down = down;
    a->host = host;
    return time_it(run_xfer, a, &a->dev, 5);
}

static void copy_row(const char *what, const char *how, size_t bytes, double t, double ceiling)
{
    double rate = (double)bytes / t;
    printf("| %s, %s | %.0f MB | %.3f | %.1f GB/s | %.2f |\n", what, how, bytes / 1e6, t * 1e3,
           rate / 1e9, ceiling > 0 ? rate / ceiling : 1.0);
}

static void bench_copies(void)
{
    /* KMeans 1M x 64's X in float32 and float64, and its labels */
    const size_t sizes[3] = {(size_t)256000000, (size_t)512000000, (size_t)4000000};
    const size_t most = sizes[1];
    struct xfer_args a;
    if (gsb__tensor_alloc(be, GSB_F32, (int64_t)(most / 4), 1, &a.dev))
        die("alloc");
    gsb__tensor whole = a.dev;
    /* the ceiling: DMA from and to page-locked memory (host_register: one stream copy) */
    double up_ceiling[3], down_ceiling[3];
    char *pinned = NULL;
    if (posix_memalign((void **)&pinned, 4096, most) != 0)
        die("posix_memalign");
    memset(pinned, 1, most);
    if (be->ops->host_register(be, pinned, most))
        die("host_register");
    for (int i = 0; i < 3; i++) {
        a.dev = gsb__tensor_rows(&whole, 0, (int64_t)(sizes[i] / 4));
        a.bytes = sizes[i];
        up_ceiling[i] = (double)sizes[i] / xfer_time(&a, 0, pinned);
        copy_row("upload", "pinned memory (ceiling)", sizes[i], (double)sizes[i] / up_ceiling[i], 0);
        down_ceiling[i] = (double)sizes[i] / xfer_time(&a, 1, pinned);
        copy_row("download", "pinned memory (ceiling)", sizes[i],
                 (double)sizes[i] / down_ceiling[i], 0);
    }
    be->ops->host_unregister(be, pinned);
    free(pinned);

    char cpus[16];
    snprintf(cpus, sizeof cpus, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    const struct copy_alt alts[] = {
        {"staged, 8 threads, 2 parts each, no spin (the old default)",
         {{"GSB_CUDA_COPY_THREADS", "8"}, {"GSB_CUDA_COPY_SPIN_US", "0"},
          {"GSB_CUDA_COPY_PARTS", "2"}}},
        {"staged, 2 parts per thread", {{"GSB_CUDA_COPY_PARTS", "2"}}},
        {"staged (default)", {{NULL, NULL}}},
        {"staged, threads = online CPUs", {{"GSB_CUDA_COPY_THREADS", cpus}}},
        {"staged, no spin", {{"GSB_CUDA_COPY_SPIN_US", "0"}}},
        {"staged, 8 MiB chunks", {{"GSB_CUDA_COPY_CHUNK_MB", "8"}}},
        {"staged, 32 MiB chunks", {{"GSB_CUDA_COPY_CHUNK_MB", "32"}}},
        {"staged, prefault", {{"GSB_CUDA_COPY_PREFAULT", "1"}}},
        {"pipelined (8 MiB chunks)", {{"GSB_CUDA_COPY_MODE", "pipelined"}}},
        {"pipelined, 4 MiB chunks", {{"GSB_CUDA_COPY_MODE", "pipelined"},
                                     {"GSB_CUDA_COPY_CHUNK_MB", "4"}}},
        {"pipelined, 16 MiB chunks", {{"GSB_CUDA_COPY_MODE", "pipelined"},
                                      {"GSB_CUDA_COPY_CHUNK_MB", "16"}}},
        {"pinned in place (register)", {{"GSB_CUDA_COPY_MODE", "register"}}},
        {"driver's pageable copy", {{"GSB_CUDA_COPY_MODE", "driver"}}},
    };
    char *host = malloc(most);
    if (!host)
        die("malloc");
    memset(host, 2, most); /* touched: pageable memory as numpy's */
    for (size_t k = 0; k < sizeof alts / sizeof alts[0]; k++) {
        copy_alt_apply(&alts[k]);
        for (int i = 0; i < 3; i++) {
            a.dev = gsb__tensor_rows(&whole, 0, (int64_t)(sizes[i] / 4));
            a.bytes = sizes[i];
            copy_row("upload", alts[k].name, sizes[i], xfer_time(&a, 0, host), up_ceiling[i]);
            copy_row("download", alts[k].name, sizes[i], xfer_time(&a, 1, host),
                     down_ceiling[i]);
        }
        char how[160];
        snprintf(how, sizeof how, "%s, into untouched pages", alts[k].name);
        copy_row("download", how, sizes[2], xfer_time(&a, 1, NULL), down_ceiling[2]);
    }
    copy_alt_apply(&(struct copy_alt){"defaults", {{NULL, NULL}}});
    free(host);
    gsb__tensor_free(&whole);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "cuda";
    be = strcmp(which, "cpu") == 0 ? gsb__cpu_backend() : gsb__cuda_backend();
    if (!be) {
        fprintf(stderr, "bench_ops: no CUDA backend: %s\n", gsb__cuda_unavailable_reason());
        return 1;
    }
    int big = be != gsb__cpu_backend();
    printf("# bench_ops on %s (%s)\n", be->name, be->device ? be->device : "host");
    printf("| measure | size | time ms | rate | fraction of limit |\n|---|---|---:|---:|---:|\n");
    if (argc > 2 && strcmp(argv[2], "copy") == 0) {
        if (big)
            bench_copies();
        return 0;
    }
    int kmeans_only = argc > 2 && strcmp(argv[2], "kmeans") == 0;

    /* ceilings */
    int64_t g = big ? 8192 : 2048;
    struct gemm_args ga = {.A = random_tensor(GSB_F32, g, g, 1), .B = random_tensor(GSB_F32, g, g, 2)};
    if (gsb__tensor_alloc(be, GSB_F32, g, g, &ga.C))
        die("alloc");
    double t = time_it(run_gemm, &ga, &ga.C, 5);
    double gemm_rate = 2.0 * g * g * g / t;
    ceiling_rate = gemm_rate;
    printf("| FP32 GEMM (ceiling) | %lld^3 | %.3f | %.1f TFLOP/s | 1.00 |\n", (long long)g,
           t * 1e3, gemm_rate / 1e12);

    int64_t nbytes = big ? (1LL << 30) : (1LL << 27);
    struct copy_args ca = {.src = random_tensor(GSB_F32, nbytes / 4, 1, 3)};
    if (gsb__tensor_alloc(be, GSB_F32, nbytes / 4, 1, &ca.dst))
        die("alloc");
    t = time_it(run_copy, &ca, &ca.dst, 5);
    double copy_bw = 2.0 * nbytes / t;
    printf("| device copy (ceiling) | %lld MiB | %.3f | %.0f GB/s | 1.00 |\n",
           (long long)(nbytes >> 20), t * 1e3, copy_bw / 1e9);

    /* KMeans E-step: 1M x 64 against k = 100 */
    int64_t n = big ? 1000000 : 100000, d = 64, k = 100;
    struct argmin_args aa = {.X = random_tensor(GSB_F32, n, d, 4),
                             .C = random_tensor(GSB_F32, k, d, 5)};
    if (gsb__tensor_alloc(be, GSB_I32, n, 1, &aa.labels) ||
        gsb__tensor_alloc(be, GSB_F32, n, 1, &aa.mind))
        die("alloc");
    t = time_it(run_argmin, &aa, &aa.mind, 9);
    double rate = 2.0 * n * k * d / t;
    printf("| argmin_sqdist (KMeans) | %lld x %lld, k=%lld | %.3f | %.1f TFLOP/s | %.2f |\n",
           (long long)n, (long long)d, (long long)k, t * 1e3, rate / 1e12, rate / gemm_rate);
    bench_segment(big, GSB_F32, copy_bw);
    bench_segment(big, GSB_F64, copy_bw);

    if (be != gsb__cpu_backend())
        bench_argmin_modes(big, gemm_rate);
    if (kmeans_only) {
        bench_kmeanspp(big, copy_bw);
        return GSB_OK;
    }

    /* kNN: 10k queries against 200k x 64, k = 10 */
    int64_t nq = big ? 10000 : 1000, nr = big ? 200000 : 20000, kk = 10;
    struct topk_args ta = {.Q = random_tensor(GSB_F32, nq, d, 6),
                           .R = random_tensor(GSB_F32, nr, d, 7)};
    ta.k = kk;
    if (gsb__tensor_alloc(be, GSB_F32, nq, kk, &ta.dist) ||
        gsb__tensor_alloc(be, GSB_I64, nq, kk, &ta.idx))
        die("alloc");
    t = time_it(run_topk, &ta, &ta.dist, 5);
    rate = 2.0 * nq * nr * d / t;
    printf("| topk (kNN) | %lld q x %lld x %lld, k=%lld | %.3f | %.1f TFLOP/s | %.2f |\n",
           (long long)nq, (long long)nr, (long long)d, (long long)kk, t * 1e3, rate / 1e12,
           rate / gemm_rate);

    /* StandardScaler's reduction: 1M x 256 */
    int64_t rn = big ? 1000000 : 100000, rd = 256;
    struct moments_args ma = {.X = random_tensor(GSB_F32, rn, rd, 8)};
    if (gsb__tensor_alloc(be, GSB_F64, rd, 1, &ma.mean) ||
        gsb__tensor_alloc(be, GSB_F64, rd, 1, &ma.var))
        die("alloc");
    t = time_it(run_moments, &ma, &ma.var, 9);
    double bw = 2.0 * rn * rd * 4 / t; /* two passes over X */
    printf("| col_moments (scalers) | %lld x %lld | %.3f | %.0f GB/s | %.2f |\n", (long long)rn,
           (long long)rd, t * 1e3, bw / 1e9, bw / copy_bw);

    bench_kmeanspp(big, copy_bw);
    bench_umap(big);
    bench_topk_paths(big);
    if (big)
        bench_copies();

    gsb__tensor *all[] = {&ga.A, &ga.B, &ga.C, &ca.src, &ca.dst, &aa.X, &aa.C, &aa.labels,
                          &aa.mind, &ta.Q, &ta.R, &ta.dist, &ta.idx, &ma.X, &ma.mean, &ma.var};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gsb__tensor_free(all[i]);
    return 0;
}
