/*
 * test_smo_blocks.c - the two-level SMO (solvers/smo_blocks.c) on the CPU
 * backend's twins of its ops, against libsvm's SMO (solvers/smo.c) on the
 * same problems: SVC- and SVR-shaped duals, small working sets (many outer
 * iterations: kept halves, cache evictions), a cache smaller than the
 * working set, zero upper bounds, tiny problems and max_iter.  Both stop at
 * a maximal violation below eps, so they reach the same optimum to about
 * eps: the dual objective, rho, and the violation of the result measured
 * from scratch in double.  With GSB_DEVICE=cuda (tools/gpu-check) the
 * two-level solver runs on the GPU's ops instead.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/tensor.h"
#include "solvers/smo.h"
#include "solvers/smo_blocks.h"
#include "testing.h"

typedef struct problem {
    int64_t n, d, l;
    gsb__tensor X; /* n x d float64, host */
    int64_t *real;
    int8_t *y;
    double *p, *C, *QD;
    double gamma;
} problem;

static const gsb__backend *cpu, *be; /* be: where the two-level solver runs */

/* rbf kernel rows for libsvm's solver, through the CPU kernel op */
typedef struct rows_data {
    const problem *pb;
    gsb__tensor K;
} rows_data;

static int row_fn(void *data, int64_t r, float *out)
{
    rows_data *h = data;
    gsb__tensor xr = h->pb->X;
    xr.data = (double *)h->pb->X.data + r * h->pb->d;
    xr.rows = 1;
    xr.owned = 0;
    GSB_TRY(cpu->ops->kernel(cpu, &xr, &h->pb->X, 2, h->pb->gamma, 0.0, 3, &h->K));
    for (int64_t j = 0; j < h->pb->n; j++)
        out[j] = (float)((double *)h->K.data)[j];
    return GSB_OK;
}

/* SVC (labels from a noisy nonlinear rule) or SVR (2n variables) over n rows;
 * a fraction zero_c of the variables gets C = 0 (a zero class weight). */
static void problem_make(problem *pb, int64_t n, int64_t d, int svr, double zero_c)
{
    memset(pb, 0, sizeof *pb);
    pb->n = n;
    pb->d = d;
    pb->l = svr ? 2 * n : n;
    pb->gamma = 1.0 / (double)d;
    if (gsb__tensor_alloc(cpu, GSB_F64, n, d, &pb->X) != GSB_OK)
        abort();
    testing_fill_normal(pb->X.data, n * d);
    int64_t l = pb->l;
    pb->real = malloc((size_t)l * sizeof *pb->real);
    pb->y = malloc((size_t)l);
    pb->p = malloc((size_t)l * sizeof *pb->p);
    pb->C = malloc((size_t)l * sizeof *pb->C);
    pb->QD = malloc((size_t)l * sizeof *pb->QD);
    for (int64_t t = 0; t < l; t++) {
        int64_t r = t % n;
        const double *x = (const double *)pb->X.data + r * d;
        double v = x[0] + (d > 2 ? 0.5 * x[1] * x[2] : 0.0) + 0.4 * testing_normal();
        pb->real[t] = r;
        pb->y[t] = svr ? (t < n ? 1 : -1) : (v > 0 ? 1 : -1);
        pb->p[t] = svr ? (t < n ? 0.1 - v : 0.1 + v) : -1.0;
        pb->C[t] = testing_uniform() < zero_c ? 0.0 : svr ? 1.0 : 2.0;
        pb->QD[t] = 1.0;
    }
}

static void problem_free(problem *pb)
{
    gsb__tensor_free(&pb->X);
    free(pb->real);
    free(pb->y);
    free(pb->p);
    free(pb->C);
    free(pb->QD);
}

/* libsvm's maximal violation of alpha, its gradient computed in double */
static double violation(const problem *pb, const double *alpha)
{
    int64_t l = pb->l, n = pb->n, d = pb->d;
    double up = INFINITY, low = -INFINITY;
    for (int64_t t = 0; t < l; t++) {
        const double *xt = (const double *)pb->X.data + pb->real[t] * d;
        double g = pb->p[t];
        for (int64_t s = 0; s < l; s++) {
            if (alpha[s] == 0)
                continue;
            const double *xs = (const double *)pb->X.data + pb->real[s] * d;
            double d2 = 0;
            for (int64_t k = 0; k < d; k++)
                d2 += (xt[k] - xs[k]) * (xt[k] - xs[k]);
            g += pb->y[t] * pb->y[s] * alpha[s] * exp(-pb->gamma * d2);
        }
        double f = pb->y[t] * g;
        int pos = pb->y[t] > 0;
        if (pos ? alpha[t] < pb->C[t] : alpha[t] > 0)
            up = fmin(up, f);
        if (pos ? alpha[t] > 0 : alpha[t] < pb->C[t])
            low = fmax(low, f);
    }
    (void)n;
    return isinf(up) || isinf(low) ? 0 : low - up;
}

static void compare_case(int64_t n, int64_t d, int svr, double zero_c, int64_t max_ws,
                         double cache_bytes)
{
    problem pb;
    problem_make(&pb, n, d, svr, zero_c);
    int64_t l = pb.l;
    double *a1 = calloc((size_t)l, sizeof *a1), *a2 = calloc((size_t)l, sizeof *a2);
    rows_data rd = {&pb, GSB__TENSOR_NONE};
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, 1, n, &rd.K));
    gsb__smo_problem lp = {.l = l, .n = n, .real = pb.real, .y = pb.y, .p = pb.p, .C = pb.C,
                           .QD = pb.QD, .eps = 1e-3, .shrinking = 1, .max_iter = -1,
                           .cache_bytes = 100e6, .row = row_fn, .row_data = &rd};
    gsb__smo_result r1 = {0}, r2;
    /* libsvm's SMO never ends with a zero upper bound (it keeps picking the
     * variable that cannot move): no reference then */
    if (zero_c == 0)
        CHECK_OK(gsb__smo_solve(&lp, a1, &r1));
    gsb__tensor Xb = GSB__TENSOR_NONE;
    CHECK_OK(gsb__tensor_to(be, &pb.X, &Xb));
    gsb__smo_blocks_problem bp = {.be = be, .l = l, .real = pb.real, .y = pb.y, .p = pb.p,
                                  .C = pb.C, .QD = pb.QD, .X = &Xb, .kind = 2,
                                  .gamma = pb.gamma, .degree = 3, .eps = 1e-3, .max_iter = -1,
                                  .cache_bytes = cache_bytes, .max_ws = max_ws};
    CHECK_OK(gsb__smo_blocks_solve(&bp, a2, &r2));
    gsb__tensor_free(&Xb);
    double sum = 0;
    int feasible = 1;
    for (int64_t t = 0; t < l; t++) {
        sum += pb.y[t] * a2[t];
        feasible &= a2[t] >= 0 && a2[t] <= pb.C[t];
    }
    CHECK(feasible);
    CHECK(fabs(sum) <= 1e-9 * (double)l);
    CHECK(!r2.timed_out);
    if (zero_c == 0) {
        CHECK(fabs(r1.obj - r2.obj) <= 1e-3 * fabs(r1.obj) + 1e-9);
        CHECK(fabs(r1.rho - r2.rho) <= 5e-3);
    }
    double v = violation(&pb, a2);
    CHECK(v <= 2e-3); /* eps, with the float kernel rows' rounding */
    if (testing_cur_failed)
        fprintf(stderr, "  n=%lld d=%lld svr=%d zero_c=%g ws=%lld cache=%g: obj %.10g vs "
                "%.10g, rho %.6g vs %.6g, violation %g, steps %lld vs %lld\n", (long long)n,
                (long long)d, svr, zero_c, (long long)max_ws, cache_bytes, r2.obj, r1.obj,
                r2.rho, r1.rho, v, (long long)r2.n_iter, (long long)r1.n_iter);
    gsb__tensor_free(&rd.K);
    free(a1);
    free(a2);
    problem_free(&pb);
}

static void test_svc_shaped(void)
{
    testing_seed(101);
    compare_case(600, 5, 0, 0.0, 0, 200e6);
    compare_case(900, 8, 0, 0.0, 64, 200e6);   /* many outer iterations */
    compare_case(700, 4, 0, 0.0, 32, 1.0);     /* cache below the set: rows recomputed */
    compare_case(500, 3, 0, 0.2, 16, 50e3);    /* zero upper bounds; evictions */
}

static void test_svr_shaped(void)
{
    testing_seed(102);
    compare_case(400, 5, 1, 0.0, 0, 200e6);
    compare_case(500, 3, 1, 0.0, 64, 30e3);
}

static void test_tiny(void)
{
    testing_seed(103);
    compare_case(2, 2, 0, 0.0, 0, 200e6);
    compare_case(3, 2, 0, 0.0, 0, 200e6);
    compare_case(9, 2, 1, 0.0, 4, 200e6);
}

/* max_iter bounds the SMO steps and reports timed_out */
static void test_max_iter(void)
{
    testing_seed(104);
    problem pb;
    problem_make(&pb, 800, 6, 0, 0.0);
    double *a = calloc((size_t)pb.l, sizeof *a);
    gsb__tensor Xb = GSB__TENSOR_NONE;
    CHECK_OK(gsb__tensor_to(be, &pb.X, &Xb));
    gsb__smo_blocks_problem bp = {.be = be, .l = pb.l, .real = pb.real, .y = pb.y, .p = pb.p,
                                  .C = pb.C, .QD = pb.QD, .X = &Xb, .kind = 2,
                                  .gamma = pb.gamma, .degree = 3, .eps = 1e-3, .max_iter = 7,
                                  .cache_bytes = 200e6};
    gsb__smo_result r;
    CHECK_OK(gsb__smo_blocks_solve(&bp, a, &r));
    CHECK(r.timed_out);
    CHECK(r.n_iter == 7);
    gsb__tensor_free(&Xb);
    free(a);
    problem_free(&pb);
}

int main(void)
{
    cpu = be = gsb__cpu_backend();
    const char *dev = getenv("GSB_DEVICE");
    if (dev && strcmp(dev, "cuda") == 0) {
        if (!(be = gsb__cuda_backend())) {
            fprintf(stderr, "GSB_DEVICE=cuda: no CUDA backend: %s\n",
                    gsb__cuda_unavailable_reason());
            return 1;
        }
        printf("the two-level SMO on %s\n", be->device ? be->device : "the GPU");
    }
    RUN(test_svc_shaped);
    RUN(test_svr_shaped);
    RUN(test_tiny);
    RUN(test_max_iter);
    return testing_done();
}
