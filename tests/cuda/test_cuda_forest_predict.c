/*
 * test_cuda_forest_predict.c - forest_predict on the GPU
 * (cuda_forest_predict.cu) against its CPU twin (cpu_forest_predict.c), then
 * the forests' prediction methods on device=cuda against device=cpu.
 *
 *  The op: fresh random trees (depth up to 12) and rows, float32 and float64
 *    X with NaN and with values on (and, in float64, rounding onto) the
 *    thresholds; 1, 3, 10 and 20 values per leaf (each register width and
 *    the in-memory sums), rows staged in shared memory (11 features) and
 *    read from global memory (150), a partial last block: mean, best and
 *    leaves EXACTLY equal (the same float32 comparisons, float64 sums in
 *    tree order, IEEE division), with all outputs and with each alone.
 *  The estimators: a model fitted on the CPU, imported into a CUDA session
 *    (its trees checked and uploaded at the first predict) and one fitted on
 *    the GPU (trees uploaded by the fit), each against the same model on the
 *    CPU: predict, predict_proba / predict and apply bitwise equal, twice
 *    (the second call on the kept trees); and under a memory cap that keeps
 *    the trees from staying on the GPU (uploaded for each call).
 * Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c/test_api_helpers.h"
#include "cuda_testing.h"

static double urand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) * 0x1.0p-53;
}

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        abort();
    return p;
}

#define QUEUE (1 << 13)

/* A random tree, breadth first, each split's children a pair after it;
 * returns its root. */
static int32_t random_tree(uint64_t *s, int64_t d, int max_depth, int32_t *split, float *thr,
                           int32_t *child, int64_t *next, int64_t *leaves)
{
    static int64_t queue[QUEUE], depth[QUEUE];
    int64_t head = 0, tail = 0, root = (*next)++;
    queue[tail] = root;
    depth[tail++] = 0;
    while (head < tail) {
        int64_t at = queue[head], dep = depth[head++];
        if (dep >= max_depth || urand(s) < 0.1 || tail + 2 > QUEUE) {
            split[at] = -1;
            thr[at] = 0;
            child[at] = (int32_t)(*leaves)++;
            continue;
        }
        split[at] = (int32_t)(2 * (int64_t)(urand(s) * d) + (urand(s) < 0.5));
        thr[at] = (float)(2 * urand(s) - 1);
        child[at] = (int32_t)*next;
        for (int k = 0; k < 2; k++) {
            queue[tail] = (*next)++;
            depth[tail++] = dep + 1;
        }
    }
    return (int32_t)root;
}

/* X's value i: NaN, a threshold itself, a float64 a hair off a threshold (it
 * rounds onto it in float32), or uniform. */
static double x_value(uint64_t *s, const float *thr, int64_t N)
{
    double u = urand(s);
    float t = thr[(int64_t)(urand(s) * N)];
    if (u < 0.05)
        return NAN;
    if (u < 0.15)
        return t;
    if (u < 0.25)
        return (double)t + (urand(s) - 0.5) * 1e-9 * fabs((double)t);
    return 2.2 * urand(s) - 1.1;
}

typedef struct forest {
    int64_t T, N, L, K;
    int32_t *split, *child, *root;
    float *thr;
    gsb__tensor ts, tt, tc, tr, val; /* host */
    gsb__tensor gs, gt, gc, gr, gv;  /* GPU */
} forest;

static void forest_make(forest *f, uint64_t *s, int64_t T, int64_t d, int64_t K)
{
    int64_t cap = T * QUEUE;
    f->T = T;
    f->K = K;
    f->split = xmalloc((size_t)cap * 4);
    f->child = xmalloc((size_t)cap * 4);
    f->thr = xmalloc((size_t)cap * 4);
    f->root = xmalloc((size_t)T * 4);
    f->N = f->L = 0;
    for (int64_t t = 0; t < T; t++)
        f->root[t] = random_tree(s, d, 12, f->split, f->thr, f->child, &f->N, &f->L);
    if (gsb__tensor_zeros(cpu, GSB_F32, f->L, K, &f->val) != GSB_OK)
        abort();
    for (int64_t i = 0; i < f->L * K; i++) /* fractions with few bits, and arbitrary ones */
        ((float *)f->val.data)[i] = (float)(i % 3 ? floor(urand(s) * 8) / 8 : urand(s));
    f->ts = gsb__tensor_host_view(f->split, GSB_I32, f->N, 1);
    f->tt = gsb__tensor_host_view(f->thr, GSB_F32, f->N, 1);
    f->tc = gsb__tensor_host_view(f->child, GSB_I32, f->N, 1);
    f->tr = gsb__tensor_host_view(f->root, GSB_I32, T, 1);
    f->gs = to_gpu(&f->ts);
    f->gt = to_gpu(&f->tt);
    f->gc = to_gpu(&f->tc);
    f->gr = to_gpu(&f->tr);
    f->gv = to_gpu(&f->val);
}

static void forest_free(forest *f)
{
    gsb__tensor *all[] = {&f->val, &f->gs, &f->gt, &f->gc, &f->gr, &f->gv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gsb__tensor_free(all[i]);
    free(f->split);
    free(f->child);
    free(f->thr);
    free(f->root);
}

static void test_op(void)
{
    const int64_t Ks[4] = {1, 3, 10, 20}, ds[2] = {11, 150};
    for (int kc = 0; kc < 4; kc++)
        for (int dc = 0; dc < 2; dc++)
            for (int dt = 0; dt < 2; dt++) {
                int before = case_begin();
                uint64_t s = 90 + kc * 4 + dc * 2 + dt;
                int64_t T = 19, d = ds[dc], n = 20000 + 77, K = Ks[kc];
                forest f;
                forest_make(&f, &s, T, d, K);
                gsb__tensor X;
                if (gsb__tensor_zeros(cpu, dt ? GSB_F64 : GSB_F32, n, d, &X) != GSB_OK)
                    abort();
                for (int64_t i = 0; i < n * d; i++)
                    gsb__tensor_set(&X, i, x_value(&s, f.thr, f.N));
                gsb__tensor gX = to_gpu(&X);
                gsb__forest_trees th = {&f.ts, &f.tt, &f.tc, &f.tr, &f.val};
                gsb__forest_trees tg = {&f.gs, &f.gt, &f.gc, &f.gr, &f.gv};
                gsb__tensor mh = host_poisoned(GSB_F64, n, K), bh = host_poisoned(GSB_I32, n, 1);
                gsb__tensor lh = host_poisoned(GSB_I32, n, T);
                gsb__tensor mg = gpu_poisoned(GSB_F64, n, K), bg = gpu_poisoned(GSB_I32, n, 1);
                gsb__tensor lg = gpu_poisoned(GSB_I32, n, T);
                CHECK_OK(cpu->ops->forest_predict(cpu, &X, &th, &mh, &bh, &lh));
                CHECK_OK(gpu->ops->forest_predict(gpu, &gX, &tg, &mg, &bg, &lg));
                CHECK_MATCH(&mg, &mh, 0.0);
                CHECK_MATCH(&bg, &bh, 0.0);
                CHECK_MATCH(&lg, &lh, 0.0);
                /* each output alone (best alone with 20 values: sums in scratch) */
                gsb__tensor mg2 = gpu_poisoned(GSB_F64, n, K), bg2 = gpu_poisoned(GSB_I32, n, 1);
                gsb__tensor lg2 = gpu_poisoned(GSB_I32, n, T);
                CHECK_OK(gpu->ops->forest_predict(gpu, &gX, &tg, &mg2, NULL, NULL));
                CHECK_OK(gpu->ops->forest_predict(gpu, &gX, &tg, NULL, &bg2, NULL));
                CHECK_OK(gpu->ops->forest_predict(gpu, &gX, &tg, NULL, NULL, &lg2));
                CHECK_MATCH(&mg2, &mh, 0.0);
                CHECK_MATCH(&bg2, &bh, 0.0);
                CHECK_MATCH(&lg2, &lh, 0.0);
                gsb__tensor *all[] = {&X, &gX, &mh, &bh, &lh, &mg, &bg, &lg, &mg2, &bg2, &lg2};
                for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                    gsb__tensor_free(all[i]);
                forest_free(&f);
                CASE_END(before, "K %lld d %lld dtype %d", (long long)K, (long long)d, dt);
            }
}

/* ---- the estimators on both devices ----------------------------------------------- */

/* The first result of m.method(X) as doubles (NULL on failure); *n its size. */
static double *call_values(gsb_model *m, const char *method, const gsb_array *X, int64_t *n)
{
    gsb_result *r = NULL;
    const gsb_array *ins[1] = {X};
    int rc = gsb_model_call(m, method, ins, 1, NULL, &r);
    CHECK_OK(rc);
    *n = 0;
    if (rc != GSB_OK)
        return NULL;
    const gsb_array *a = gsb_result_array(r, 0);
    *n = testing_numel(a);
    double *out = xmalloc((size_t)*n * sizeof *out);
    testing_copy(a, out, *n);
    gsb_result_free(r);
    return out;
}

/* m (of any session) in session s, through the blob format */
static gsb_model *copy_into(gsb_session *s, gsb_model *m)
{
    void *bytes = NULL;
    size_t len = 0;
    gsb_model *out = NULL;
    CHECK_OK(gsb_model_export(m, &bytes, &len));
    if (bytes)
        CHECK_OK(gsb_model_import(s, bytes, len, &out));
    gsb_free(bytes);
    return out;
}

/* Every prediction method of a and b (the same trees) equal, bitwise, twice. */
static void same_predictions(gsb_model *a, gsb_model *b, const char *const *methods,
                             const gsb_array *X)
{
    for (int rep = 0; rep < 2; rep++)
        for (int k = 0; methods[k]; k++) {
            int64_t na = 0, nb = 0;
            double *pa = call_values(a, methods[k], X, &na);
            double *pb = call_values(b, methods[k], X, &nb);
            int same = pa && pb && na == nb && memcmp(pa, pb, (size_t)na * sizeof *pa) == 0;
            if (!same)
                fprintf(stderr, "  %s differs between devices (call %d)\n", methods[k], rep);
            CHECK(same);
            free(pa);
            free(pb);
        }
}

static void test_estimators(void)
{
    int64_t n = 3000, d = 16;
    double *X = xmalloc((size_t)(n * d) * sizeof *X), *yc = xmalloc((size_t)n * 8);
    double *yr = xmalloc((size_t)n * 16);
    uint64_t s = 321;
    for (int64_t i = 0; i < n; i++) {
        double t = 0;
        for (int64_t j = 0; j < d; j++) {
            X[i * d + j] = urand(&s) < 0.03 ? NAN : 2 * urand(&s) - 1;
            t += j < 4 && !isnan(X[i * d + j]) ? X[i * d + j] * (j + 1) : 0;
        }
        yc[i] = t > 1.5 ? 3 : t > 0 ? 2 : t > -1.5 ? 1 : 0;
        yr[2 * i] = t + 0.1 * urand(&s);
        yr[2 * i + 1] = t * t;
    }
    gsb_array xa = gsb_array_2d(X, GSB_F64, n, d), ca = gsb_array_1d(yc, GSB_F64, n);
    gsb_array ra = gsb_array_2d(yr, GSB_F64, n, 2);
    gsb_session *sc = NULL, *sg = NULL, *scap = NULL;
    CHECK_OK(gsb_open("local?device=cpu", &sc));
    CHECK_OK(gsb_open("local?device=cuda", &sg));
    /* X (384 kB) fits the cap; the trees (> 256 kB) are not kept under it */
    CHECK_OK(gsb_open("local?device=cuda&memory_cap=1M", &scap));
    const char *ests[2] = {"RandomForestClassifier", "RandomForestRegressor"};
    const char *const clf_methods[] = {"predict", "predict_proba", "apply", NULL};
    const char *const reg_methods[] = {"predict", "apply", NULL};
    const gsb_array *ys[2] = {&ca, &ra};
    const char *params = "{\"n_estimators\": 20, \"random_state\": 3, \"max_depth\": 14}";
    for (int e = 0; e < 2 && sc && sg && scap; e++) {
        int before = case_begin();
        const char *const *methods = e ? reg_methods : clf_methods;
        gsb_model *on_cpu = NULL, *on_gpu = NULL;
        CHECK_OK(gsb_model_create(sc, ests[e], params, &on_cpu));
        CHECK_OK(gsb_model_create(sg, ests[e], params, &on_gpu));
        if (on_cpu && on_gpu) {
            CHECK_OK(gsb_model_fit(on_cpu, &xa, ys[e]));
            CHECK_OK(gsb_model_fit(on_gpu, &xa, ys[e]));
            /* CPU-fitted trees predicted on the GPU (checked, uploaded at first use) */
            gsb_model *cpu_fit_gpu = copy_into(sg, on_cpu);
            /* GPU-fitted trees (uploaded by the fit) against the CPU */
            gsb_model *gpu_fit_cpu = copy_into(sc, on_gpu);
            /* trees too large for the cap: uploaded for each call */
            gsb_model *capped = copy_into(scap, on_cpu);
            if (cpu_fit_gpu && gpu_fit_cpu && capped) {
                same_predictions(on_cpu, cpu_fit_gpu, methods, &xa);
                same_predictions(gpu_fit_cpu, on_gpu, methods, &xa);
                same_predictions(on_cpu, capped, methods, &xa);
            }
            gsb_model_free(cpu_fit_gpu);
            gsb_model_free(gpu_fit_cpu);
            gsb_model_free(capped);
        }
        gsb_model_free(on_cpu);
        gsb_model_free(on_gpu);
        CASE_END(before, "%s", ests[e]);
    }
    gsb_close(sc);
    gsb_close(sg);
    gsb_close(scap);
    free(X);
    free(yc);
    free(yr);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_op);
    RUN(test_estimators);
    return testing_done();
}
