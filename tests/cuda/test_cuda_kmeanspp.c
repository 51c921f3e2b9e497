/*
 * test_cuda_kmeanspp.c - the CUDA backend's kmeanspp (cuda_kmeanspp.cu)
 * against its CPU twin (cpu_kmeanspp.c).
 *
 * Both dtypes, without weights and with weights in [0, 2) of which ~10% are
 * exact zeros, shapes from 1 row to 100k rows (one and several chunks of
 * 2048 rows, n not a multiple of a chunk, d = 1 to 300, k = 1 to 40): the
 * first row and every uniform are drawn on the host, and each backend runs
 * the whole greedy k-means++ in batches (a first call that starts from the
 * first row, then calls that continue from their own closest and pot).
 * After every batch the chosen rows must be identical and closest and pot
 * equal within 1e-12 relative (the twins sum in different orders; a draw
 * could only differ within rounding of a row boundary, which random
 * uniforms practically never hit).  The GPU's own variants (accumulators
 * for 1 to 64 trials, candidates staged or not, the trials' columns kept
 * (written only where they lower closest, with a mask, for up to 8 trials;
 * in full above) or the winner folded in by a second pass) each against
 * the twin.  Also: a
 * row slice of X (data off any
 * vector alignment), all rows identical (every distance 0: every draw is
 * row 0, pot 0), determinism (a repeated call, the same steps split over
 * several calls, and a first call without steps before them, as kmeans.c
 * makes, give bitwise the same outputs), and bad arguments
 * (the CPU twin's statuses and messages).  Needs a GPU: run under
 * tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"

static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};

/* Relative tolerance for closest and pot: both twins sum in double. */
#define KPP_TOL 1e-12

/* scikit-learn's n_local_trials for k centres */
static int64_t trials_for(int64_t k) { return 2 + (int64_t)log((double)k); }

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        abort();
    return p;
}

/* Weights in [0, 2), about 10% of them exactly 0 (float64, n x 1). */
static gsb__tensor host_weights(int64_t n)
{
    gsb__tensor w;
    if (gsb__tensor_alloc(cpu, GSB_F64, n, 1, &w) != GSB_OK)
        abort();
    for (int64_t i = 0; i < n; i++) {
        double z = testing_uniform();
        gsb__tensor_set(&w, i, z < 0.1 ? 0.0 : 2.0 * testing_uniform());
    }
    return w;
}

/* |a - b| <= tol |b| (both 0 passes), NaN never passes */
#define CHECK_REL(a, b, tol)                                                        \
    do {                                                                            \
        double ra_ = (a), rb_ = (b);                                                \
        if (isnan(ra_) || isnan(rb_) || !(fabs(ra_ - rb_) <= (tol) * fabs(rb_))) {  \
            fprintf(stderr, "%s:%d: %s: %s = %.17g, expected %s = %.17g (rel %g)\n",\
                    __FILE__, __LINE__, testing_cur_name, #a, ra_, #b, rb_,         \
                    (double)(tol));                                                 \
            testing_cur_failed = 1;                                                 \
        }                                                                           \
    } while (0)

/*
 * Greedy k-means++ for k centres on both backends from row `first`, in
 * batches: the first call takes min(3, k - 1) steps, the next ones up to 5
 * each.  Xh / wh on the host, Xg / wg their GPU copies (w may be NULL).
 */
static void compare_run_trials(const gsb__tensor *Xh, const gsb__tensor *wh,
                               const gsb__tensor *Xg, const gsb__tensor *wg, int64_t k,
                               int64_t trials)
{
    const int64_t n = Xh->rows, steps = k - 1;
    const int64_t first = (int64_t)floor(testing_uniform() * (double)n);
    double *u = xmalloc(sizeof(double) * (size_t)(steps * trials));
    for (int64_t q = 0; q < steps * trials; q++)
        u[q] = testing_uniform();
    int64_t *cc = xmalloc(sizeof(int64_t) * (size_t)steps);
    int64_t *gc = xmalloc(sizeof(int64_t) * (size_t)steps);
    for (int64_t s = 0; s < steps; s++)
        cc[s] = gc[s] = -7;
    gsb__tensor ccl = host_poisoned(GSB_F64, n, 1), gcl = gpu_poisoned(GSB_F64, n, 1);
    double cpot = NAN, gpot = NAN;
    int64_t done = 0, batch = steps < 3 ? steps : 3;
    int64_t start = first;
    for (int call = 0; call == 0 || done < steps; call++) {
        int crc = cpu->ops->kmeanspp(cpu, Xh, wh, start, u + done * trials, batch, trials, &ccl,
                                     &cpot, cc + done);
        CHECK_OK(crc);
        int grc = gpu->ops->kmeanspp(gpu, Xg, wg, start, u + done * trials, batch, trials, &gcl,
                                     &gpot, gc + done);
        CHECK_OK(grc);
        if (crc != GSB_OK || grc != GSB_OK)
            break;
        int differ = 0;
        for (int64_t s = done; s < done + batch; s++)
            differ |= cc[s] != gc[s];
        if (differ) {
            fprintf(stderr, "%s: chosen rows differ in steps [%lld, %lld):", testing_cur_name,
                    (long long)done, (long long)(done + batch));
            for (int64_t s = done; s < done + batch; s++)
                fprintf(stderr, " cpu %lld gpu %lld;", (long long)cc[s], (long long)gc[s]);
            fprintf(stderr, "\n");
            testing_cur_failed = 1;
        }
        CHECK_REL(gpot, cpot, KPP_TOL);
        CHECK_MATCH(&gcl, &ccl, KPP_TOL);
        if (testing_cur_failed)
            break; /* later batches would only repeat the difference */
        done += batch;
        start = -1;
        batch = steps - done < 5 ? steps - done : 5;
    }
    gsb__tensor_free(&ccl);
    gsb__tensor_free(&gcl);
    free(u);
    free(cc);
    free(gc);
}

/* compare_run_trials with scikit-learn's number of trials for k */
static void compare_run(const gsb__tensor *Xh, const gsb__tensor *wh, const gsb__tensor *Xg,
                        const gsb__tensor *wg, int64_t k)
{
    compare_run_trials(Xh, wh, Xg, wg, k, trials_for(k));
}

/* ---- the twins agree -------------------------------------------------------------- */

static void test_matches_cpu(void)
{
    static const int64_t shapes[][3] = {{1, 3, 1},      {7, 1, 5},        {2049, 3, 9},
                                        {5000, 64, 30}, {100000, 20, 40}, {3000, 300, 8}};
    testing_seed(101);
    for (int di = 0; di < 2; di++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            for (int weighted = 0; weighted < 2; weighted++) {
                const int64_t n = shapes[si][0], d = shapes[si][1], k = shapes[si][2];
                int before = case_begin();
                gsb__tensor Xh = host_random(dtypes[di], n, d, 1.0), Xg = to_gpu(&Xh);
                gsb__tensor wh = GSB__TENSOR_NONE, wg = GSB__TENSOR_NONE;
                if (weighted) {
                    wh = host_weights(n);
                    wg = to_gpu(&wh);
                }
                compare_run(&Xh, weighted ? &wh : NULL, &Xg, weighted ? &wg : NULL, k);
                CASE_END(before, "%s n=%lld d=%lld k=%lld %s",
                         gsb_dtype_name(dtypes[di]), (long long)n, (long long)d, (long long)k,
                         weighted ? "weighted" : "unweighted");
                gsb__tensor_free(&Xh);
                gsb__tensor_free(&Xg);
                gsb__tensor_free(&wh);
                gsb__tensor_free(&wg);
            }
        }
    }
}

/*
 * The GPU's variants, each against the CPU twin: per-thread accumulators
 * for 1, up to 8, 16 and 64 trials; the candidates in shared memory or read
 * from global memory (d x TMAX doubles over 12 KiB); the trials' columns
 * kept (8 (trials + 1) bytes a row below a row of X; up to 8 trials, only
 * the rows a trial lowers, with a mask byte a row) or the winner folded in
 * by a second pass over X; d a multiple of the slab's 64 bytes or not;
 * blocks of rows that end inside a warp's 32-row tile; rows of whole
 * 16-byte chunks (the pipelined pass: 1 to 8 trials, candidates staged or
 * not, partial slabs and tiles; kept columns written only where they lower
 * closest, with a mask) or not.
 */
static void test_gpu_variants(void)
{
    static const int64_t cases[][4] = {
        /* n, d, k, trials */
        {20000, 64, 12, 12},  /* 16 accumulators, staged (8 KiB), kept */
        {20000, 150, 6, 12},  /* 16, from global memory (19 KiB), kept */
        {9000, 45, 5, 40},    /* 64, global (23 KiB); kept for float64, folded for float32 */
        {9000, 7, 5, 40},     /* 64, staged (3.5 KiB), folded */
        {70001, 48, 10, 1},   /* 1 trial, kept */
        {4097, 2, 9, 3},      /* 8, folded: X narrower than the columns */
        {33, 17, 6, 2},       /* one block, a partial tile and slab, kept */
        {20000, 33, 8, 8},    /* 8, staged, kept with every bit of the mask; a partial slab */
        /* rows of whole 16-byte chunks: the pipelined pass, an instance per count */
        {12000, 24, 5, 2},    /* 2 trials; float32 a partial slab, float64 one and a part */
        {12000, 40, 5, 6},    /* 6 */
        {12000, 32, 5, 7},    /* 7; float64 two whole slabs */
        {9000, 200, 5, 8},    /* 8, candidates from global memory (12.5 KiB) */
        {37, 16, 6, 4},       /* one block, a partial tile */
    };
    testing_seed(606);
    for (int di = 0; di < 2; di++) {
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const int64_t n = cases[ci][0], d = cases[ci][1], k = cases[ci][2];
            const int64_t trials = cases[ci][3];
            int before = case_begin();
            gsb__tensor Xh = host_random(dtypes[di], n, d, 1.0), Xg = to_gpu(&Xh);
            gsb__tensor wh = host_weights(n), wg = to_gpu(&wh);
            compare_run_trials(&Xh, ci % 2 ? &wh : NULL, &Xg, ci % 2 ? &wg : NULL, k, trials);
            CASE_END(before, "%s n=%lld d=%lld k=%lld trials=%lld", gsb_dtype_name(dtypes[di]),
                     (long long)n, (long long)d, (long long)k, (long long)trials);
            gsb__tensor_free(&Xh);
            gsb__tensor_free(&Xg);
            gsb__tensor_free(&wh);
            gsb__tensor_free(&wg);
        }
    }
}

/* X a row range of a bigger tensor: data 1 row in (12 bytes for float32 d = 3). */
static void test_row_slice(void)
{
    testing_seed(202);
    for (int di = 0; di < 2; di++) {
        const int64_t n = 4100, d = 3, k = 12;
        int before = case_begin();
        gsb__tensor Bh = host_random(dtypes[di], n + 2, d, 1.0), Bg = to_gpu(&Bh);
        gsb__tensor Xh = gsb__tensor_rows(&Bh, 1, n), Xg = gsb__tensor_rows(&Bg, 1, n);
        gsb__tensor wh = host_weights(n), wg = to_gpu(&wh);
        compare_run(&Xh, &wh, &Xg, &wg, k);
        CASE_END(before, "%s slice n=%lld d=%lld k=%lld", gsb_dtype_name(dtypes[di]),
                 (long long)n, (long long)d, (long long)k);
        gsb__tensor_free(&Bh);
        gsb__tensor_free(&Bg);
        gsb__tensor_free(&wh);
        gsb__tensor_free(&wg);
    }
}

/* Every row the same: every closest is exactly 0, so pot is 0, every draw
 * (v = u * 0) is row 0 and every candidate ties at 0: row 0 wins. */
static void test_identical_rows(void)
{
    testing_seed(303);
    for (int di = 0; di < 2; di++) {
        const int64_t n = 3000, d = 5, k = 6, trials = trials_for(k), steps = k - 1;
        const int64_t first = 1234;
        int before = case_begin();
        gsb__tensor Xh = host_random(dtypes[di], n, d, 1.0);
        for (int64_t i = 1; i < n; i++)
            for (int64_t j = 0; j < d; j++)
                gsb__tensor_set(&Xh, i * d + j, gsb__tensor_get(&Xh, j));
        gsb__tensor Xg = to_gpu(&Xh), wh = host_weights(n), wg = to_gpu(&wh);
        double u[64];
        for (int64_t q = 0; q < steps * trials; q++)
            u[q] = testing_uniform();
        int64_t cc[8], gc[8];
        double cpot = NAN, gpot = NAN;
        gsb__tensor ccl = host_poisoned(GSB_F64, n, 1), gcl = gpu_poisoned(GSB_F64, n, 1);
        CHECK_OK(cpu->ops->kmeanspp(cpu, &Xh, &wh, first, u, steps, trials, &ccl, &cpot, cc));
        CHECK_OK(gpu->ops->kmeanspp(gpu, &Xg, &wg, first, u, steps, trials, &gcl, &gpot, gc));
        CHECK(cpot == 0.0);
        CHECK(gpot == 0.0);
        for (int64_t s = 0; s < steps; s++) {
            CHECK(cc[s] == 0);
            CHECK(gc[s] == 0);
        }
        gsb__tensor gh = from_gpu(&gcl);
        int64_t nonzero = 0;
        for (int64_t i = 0; i < n; i++)
            nonzero += ((double *)gh.data)[i] != 0.0 || ((double *)ccl.data)[i] != 0.0;
        CHECK(nonzero == 0);
        CASE_END(before, "%s identical rows", gsb_dtype_name(dtypes[di]));
        gsb__tensor_free(&gh);
        gsb__tensor_free(&ccl);
        gsb__tensor_free(&gcl);
        gsb__tensor_free(&Xh);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&wh);
        gsb__tensor_free(&wg);
    }
}

/* ---- determinism -------------------------------------------------------------------- */

typedef struct {
    int64_t chosen[64];
    double pot;
    gsb__tensor closest; /* host copy */
} gpu_out;

/* k - 1 steps on the GPU from row first, split into calls of `batch` steps;
 * alone: the first call takes no steps (the first centre alone, as kmeans.c
 * calls it) */
static gpu_out gpu_steps(const gsb__tensor *Xg, const gsb__tensor *wg, int64_t first,
                         const double *u, int64_t steps, int64_t trials, int64_t batch,
                         int alone)
{
    gpu_out o;
    memset(&o, 0, sizeof o);
    gsb__tensor cl = gpu_poisoned(GSB_F64, Xg->rows, 1);
    o.pot = NAN;
    if (alone) {
        CHECK_OK(gpu->ops->kmeanspp(gpu, Xg, wg, first, NULL, 0, trials, &cl, &o.pot, NULL));
        first = -1;
    }
    for (int64_t done = 0, start = first; done < steps; done += batch, start = -1) {
        int64_t b = steps - done < batch ? steps - done : batch;
        CHECK_OK(gpu->ops->kmeanspp(gpu, Xg, wg, start, u + done * trials, b, trials, &cl,
                                    &o.pot, o.chosen + done));
    }
    o.closest = from_gpu(&cl);
    gsb__tensor_free(&cl);
    return o;
}

static int same_bits(const gpu_out *a, const gpu_out *b, int64_t steps)
{
    return memcmp(a->chosen, b->chosen, sizeof(int64_t) * (size_t)steps) == 0 &&
           memcmp(&a->pot, &b->pot, sizeof(double)) == 0 &&
           memcmp(a->closest.data, b->closest.data, gsb__tensor_nbytes(&a->closest)) == 0;
}

static void test_deterministic(void)
{
    testing_seed(404);
    for (int di = 0; di < 2; di++) {
        const int64_t n = 100000, d = 20, k = 40, trials = trials_for(k), steps = k - 1;
        int before = case_begin();
        gsb__tensor Xh = host_random(dtypes[di], n, d, 1.0), Xg = to_gpu(&Xh);
        gsb__tensor wh = host_weights(n), wg = to_gpu(&wh);
        double *u = xmalloc(sizeof(double) * (size_t)(steps * trials));
        for (int64_t q = 0; q < steps * trials; q++)
            u[q] = testing_uniform();
        const int64_t first = 4321;
        gpu_out a = gpu_steps(&Xg, &wg, first, u, steps, trials, steps, 0);
        gpu_out b = gpu_steps(&Xg, &wg, first, u, steps, trials, steps, 0);
        /* the chunk sums are rebuilt from closest by the sums kernel's own code when a
         * call continues, so batches change nothing either, nor a first call that
         * only places the first centre */
        gpu_out c = gpu_steps(&Xg, &wg, first, u, steps, trials, 4, 0);
        gpu_out e = gpu_steps(&Xg, &wg, first, u, steps, trials, steps, 1);
        CHECK(same_bits(&a, &b, steps));
        CHECK(same_bits(&a, &c, steps));
        CHECK(same_bits(&a, &e, steps));
        CASE_END(before, "%s n=%lld d=%lld k=%lld", gsb_dtype_name(dtypes[di]), (long long)n,
                 (long long)d, (long long)k);
        gsb__tensor_free(&a.closest);
        gsb__tensor_free(&b.closest);
        gsb__tensor_free(&c.closest);
        gsb__tensor_free(&e.closest);
        free(u);
        gsb__tensor_free(&Xh);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&wh);
        gsb__tensor_free(&wg);
    }
}

/* ---- bad arguments: the CPU twin's status and message ---------------------------------- */

typedef struct {
    const gsb__tensor *X, *w, *closest;
    int64_t first, steps, trials;
} kpp_args;

static void check_same_error(const char *what, kpp_args c, kpp_args g, const double *u)
{
    int64_t chosen[4];
    double pot = 1.0;
    int crc = cpu->ops->kmeanspp(cpu, c.X, c.w, c.first, u, c.steps, c.trials,
                                 (gsb__tensor *)c.closest, &pot, chosen);
    char cmsg[512];
    snprintf(cmsg, sizeof cmsg, "%s", gsb_errmsg());
    pot = 1.0;
    int grc = gpu->ops->kmeanspp(gpu, g.X, g.w, g.first, u, g.steps, g.trials,
                                 (gsb__tensor *)g.closest, &pot, chosen);
    const char *gmsg = gsb_errmsg();
    if (crc == GSB_OK || grc != crc || strcmp(cmsg, gmsg) != 0) {
        fprintf(stderr, "%s: %s: cpu %s (\"%s\"), gpu %s (\"%s\")\n", testing_cur_name, what,
                gsb_status_name(crc), cmsg, gsb_status_name(grc), gmsg);
        testing_cur_failed = 1;
    }
}

static void test_bad_arguments(void)
{
    testing_seed(505);
    const int64_t n = 50, d = 4;
    gsb__tensor Xh = host_random(GSB_F64, n, d, 1.0), Xg = to_gpu(&Xh);
    gsb__tensor wh = host_weights(n), wg = to_gpu(&wh);
    gsb__tensor w32h = host_random(GSB_F32, n, 1, 1.0), w32g = to_gpu(&w32h);
    gsb__tensor clh = host_poisoned(GSB_F64, n, 1), clg = gpu_poisoned(GSB_F64, n, 1);
    gsb__tensor shorth = host_poisoned(GSB_F64, n - 1, 1), shortg = gpu_poisoned(GSB_F64, n - 1, 1);
    gsb__tensor cl32h = host_poisoned(GSB_F32, n, 1), cl32g = gpu_poisoned(GSB_F32, n, 1);
    gsb__tensor wlongh = host_weights(n + 1), wlongg = to_gpu(&wlongh);
    double u[4 * 65];
    for (int q = 0; q < 4 * 65; q++)
        u[q] = testing_uniform();
    kpp_args c = {&Xh, &wh, &clh, 0, 2, 3}, g = {&Xg, &wg, &clg, 0, 2, 3};
    kpp_args c1, g1;
    c1 = c, g1 = g;
    c1.closest = &shorth, g1.closest = &shortg;
    check_same_error("closest of n - 1 elements", c1, g1, u);
    c1 = c, g1 = g;
    c1.closest = &cl32h, g1.closest = &cl32g;
    check_same_error("closest of float32", c1, g1, u);
    c1 = c, g1 = g;
    c1.w = &w32h, g1.w = &w32g;
    check_same_error("w of float32", c1, g1, u);
    c1 = c, g1 = g;
    c1.w = &wlongh, g1.w = &wlongg;
    check_same_error("w of n + 1 elements", c1, g1, u);
    c1 = c, g1 = g;
    c1.trials = g1.trials = 0;
    check_same_error("0 trials", c1, g1, u);
    c1 = c, g1 = g;
    c1.trials = g1.trials = 65;
    check_same_error("65 trials", c1, g1, u);
    c1 = c, g1 = g;
    c1.first = g1.first = n;
    check_same_error("first = n", c1, g1, u);
    c1 = c, g1 = g;
    c1.steps = g1.steps = -1;
    check_same_error("-1 steps", c1, g1, u);
    c1 = c, g1 = g;
    c1.X = g1.X = NULL;
    check_same_error("no X", c1, g1, u);
    /* 64 trials is the most both accept */
    {
        int64_t chosen[2];
        double pot = NAN;
        CHECK_OK(gpu->ops->kmeanspp(gpu, &Xg, &wg, 0, u, 2, 64, &clg, &pot, chosen));
        CHECK(chosen[0] >= 0 && chosen[0] < n && chosen[1] >= 0 && chosen[1] < n);
    }
    /* a host tensor given to the GPU op is refused, not dereferenced */
    {
        int64_t chosen[2];
        double pot = NAN;
        CHECK_ERR(gpu->ops->kmeanspp(gpu, &Xh, &wg, 0, u, 2, 3, &clg, &pot, chosen),
                  GSB_EINTERNAL, "not in this GPU's memory");
    }
    gsb__tensor *all[] = {&Xh, &Xg, &wh, &wg, &w32h, &w32g, &clh, &clg,
                          &shorth, &shortg, &cl32h, &cl32g, &wlongh, &wlongg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gsb__tensor_free(all[i]);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_matches_cpu);
    RUN(test_gpu_variants);
    RUN(test_row_slice);
    RUN(test_identical_rows);
    RUN(test_deterministic);
    RUN(test_bad_arguments);
    return testing_done();
}
