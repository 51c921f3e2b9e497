/*
 * test_cuda_svm.c - the CUDA ops of the two-level SMO (cuda_svm.cu) against
 * their CPU twins (cpu_svm.c): svm_select, svm_kernel_rows, svm_inner,
 * svm_update_f, on fresh random states (ties in f, -0.0, alphas exactly at
 * their bounds, zero upper bounds, excluded variables, SVR's doubled
 * variables), then the whole solver (solvers/smo_blocks.c) on the GPU
 * against libsvm's SMO on the host: the same dual objective to tolerance.
 * Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda_testing.h"
#include "solvers/smo.h"
#include "solvers/smo_blocks.h"

/* ---- a random state on the host and its copy on the GPU ------------------------ */

typedef struct pair_state {
    int64_t l, n;
    gsb__tensor h[7], g[7]; /* real, y, C, QD, f, alpha, cache */
    gsb__svm_state hs, gs;
} pair_state;

/* Variables over n rows (svr: l = 2n, real = t mod n); the cache holds the
 * full float kernel matrix of random X (rbf), slot = row. */
static void state_make(pair_state *p, int64_t n, int svr, double zero_c_frac)
{
    int64_t l = svr ? 2 * n : n;
    p->l = l;
    p->n = n;
    gsb__tensor X = host_random(GSB_F64, n, 5, 1.0);
    for (int k = 0; k < 6; k++)
        if (gsb__tensor_alloc(cpu, k == 0 || k == 1 ? GSB_I32 : GSB_F64, l, 1, &p->h[k]) !=
            GSB_OK)
            abort();
    if (gsb__tensor_alloc(cpu, GSB_F32, n, n, &p->h[6]) != GSB_OK)
        abort();
    int32_t *real = p->h[0].data, *y = p->h[1].data;
    double *C = p->h[2].data, *QD = p->h[3].data, *f = p->h[4].data, *a = p->h[5].data;
    for (int64_t t = 0; t < l; t++) {
        real[t] = (int32_t)(t % n);
        y[t] = svr ? (t < n ? 1 : -1) : (testing_uniform() < 0.5 ? 1 : -1);
        C[t] = testing_uniform() < zero_c_frac ? 0.0 : 0.5 + 2.0 * testing_uniform();
        double u = testing_uniform();
        a[t] = u < 0.3 ? 0.0 : u < 0.5 ? C[t] : C[t] * testing_uniform();
        QD[t] = 1.0;
        /* ties: a quarter of the values on a coarse grid; some -0.0 */
        f[t] = testing_uniform() < 0.25 ? floor(4 * testing_normal()) / 4 : testing_normal();
        if (f[t] == 0.0 && testing_uniform() < 0.5)
            f[t] = -0.0;
    }
    int32_t *all = malloc((size_t)n * sizeof *all);
    for (int64_t r = 0; r < n; r++)
        all[r] = (int32_t)r;
    gsb__tensor rows = gsb__tensor_host_view(all, GSB_I32, n, 1);
    if (cpu->ops->svm_kernel_rows(cpu, &X, &rows, &rows, 2, 0.4, 0.0, 3, &p->h[6]) != GSB_OK)
        abort();
    free(all);
    gsb__tensor_free(&X);
    for (int k = 0; k < 7; k++)
        p->g[k] = to_gpu(&p->h[k]);
    p->hs = (gsb__svm_state){&p->h[0], &p->h[1], &p->h[2], &p->h[3], &p->h[4], &p->h[5], &p->h[6]};
    p->gs = (gsb__svm_state){&p->g[0], &p->g[1], &p->g[2], &p->g[3], &p->g[4], &p->g[5], &p->g[6]};
}

static void state_free(pair_state *p)
{
    for (int k = 0; k < 7; k++) {
        gsb__tensor_free(&p->h[k]);
        gsb__tensor_free(&p->g[k]);
    }
}

/* m distinct random values in [0, bound) (m <= bound), host GSB_I32. */
static gsb__tensor distinct(int64_t m, int64_t bound)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(cpu, GSB_I32, m, 1, &t) != GSB_OK)
        abort();
    int32_t *perm = malloc((size_t)bound * sizeof *perm);
    for (int64_t i = 0; i < bound; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = 0; i < m; i++) {
        int64_t j = i + (int64_t)(testing_uniform() * (double)(bound - i));
        int32_t v = perm[i];
        perm[i] = perm[j];
        perm[j] = v;
        ((int32_t *)t.data)[i] = perm[i];
    }
    free(perm);
    return t;
}

/* max |a - b| over two host float64 tensors of one size (INFINITY on NaN) */
static double maxdiff(const gsb__tensor *a, const gsb__tensor *b)
{
    double m = 0;
    for (int64_t i = 0; i < gsb__tensor_numel(b); i++) {
        double x = gsb__tensor_get(a, i), y = gsb__tensor_get(b, i);
        if (isnan(x) || isnan(y))
            return INFINITY;
        m = fmax(m, fabs(x - y));
    }
    return m;
}

/* ---- svm_select ------------------------------------------------------------------- */

static void select_case(int64_t n, int svr, double zero_c, int64_t m_ex, int64_t k_up,
                        int64_t k_total)
{
    int before = case_begin();
    pair_state p;
    state_make(&p, n, svr, zero_c);
    if (m_ex > p.l)
        m_ex = p.l;
    gsb__tensor exh = GSB__TENSOR_NONE, exg = GSB__TENSOR_NONE;
    if (m_ex > 0) {
        exh = distinct(m_ex, p.l);
        exg = to_gpu(&exh);
    }
    int32_t *sh = calloc((size_t)k_total + 1, sizeof *sh), *sg = calloc((size_t)k_total + 1, 4);
    int64_t uh = -1, lh = -1, ug = -2, lg = -2;
    double gh = NAN, gg = NAN;
    CHECK_OK(cpu->ops->svm_select(cpu, &p.hs, m_ex ? &exh : NULL, k_up, k_total, sh, &uh, &lh,
                                  &gh));
    CHECK_OK(gpu->ops->svm_select(gpu, &p.gs, m_ex ? &exg : NULL, k_up, k_total, sg, &ug, &lg,
                                  &gg));
    CHECK(uh == ug && lh == lg);
    CHECK(gh == gg || (isinf(gh) && isinf(gg) && gh < 0 && gg < 0));
    CHECK(uh + lh <= k_total && uh <= k_up);
    int same = 1;
    for (int64_t k = 0; k < uh + lh && uh == ug && lh == lg; k++)
        same &= sh[k] == sg[k];
    CHECK(same);
    CASE_END(before, "select n=%lld svr=%d zero_c=%g exclude=%lld k_up=%lld k_total=%lld",
             (long long)n, svr, zero_c, (long long)m_ex, (long long)k_up, (long long)k_total);
    free(sh);
    free(sg);
    gsb__tensor_free(&exh);
    gsb__tensor_free(&exg);
    state_free(&p);
}

static void test_svm_select(void)
{
    testing_seed(11);
    select_case(1, 0, 0.0, 0, 1, 2);
    select_case(7, 0, 0.0, 2, 2, 4);
    select_case(300, 0, 0.1, 0, 64, 128);
    select_case(1000, 1, 0.0, 512, 256, 512);
    select_case(1500, 0, 0.0, 512, 256, 512);
    select_case(2000, 0, 1.0, 10, 128, 256); /* every C 0: no candidate, gap -inf */
    select_case(700, 0, 0.0, 0, 512, 1024);  /* more wanted than there are */
    select_case(1200, 1, 0.3, 100, 0, 300);  /* low only */
}

/* ---- svm_kernel_rows ------------------------------------------------------------------ */

static void rows_case(gsb_dtype dt, int64_t n, int64_t d, int kind, int64_t m)
{
    int before = case_begin();
    gsb__tensor Xh = host_random(dt, n, d, 0.7), Xg = to_gpu(&Xh);
    int64_t cap = m + 5;
    gsb__tensor rh = host_random(GSB_I32, m, 1, (double)n), sh = distinct(m, cap);
    gsb__tensor rg = to_gpu(&rh), sg = to_gpu(&sh);
    gsb__tensor ch = host_poisoned(GSB_F32, cap, n), cg = gpu_poisoned(GSB_F32, cap, n);
    double gamma = 0.5 / (double)d;
    CHECK_OK(cpu->ops->svm_kernel_rows(cpu, &Xh, &rh, &sh, kind, gamma, 0.5, 3, &ch));
    CHECK_OK(gpu->ops->svm_kernel_rows(gpu, &Xg, &rg, &sg, kind, gamma, 0.5, 3, &cg));
    gsb__tensor back = from_gpu(&cg);
    /* the rows written; the others stay poisoned on both */
    double err = 0, scale = 1e-30;
    for (int64_t i = 0; i < m; i++) {
        int64_t s = ((const int32_t *)sh.data)[i];
        const float *a = (const float *)back.data + s * n, *b = (const float *)ch.data + s * n;
        for (int64_t j = 0; j < n; j++) {
            if (isnan(a[j]) || isnan(b[j]))
                err = INFINITY;
            err = fmax(err, fabs((double)a[j] - (double)b[j]));
            scale = fmax(scale, fabs((double)b[j]));
        }
    }
    CHECK(err / scale <= (dt == GSB_F32 ? 2e-5 : 1e-6));
    CASE_END(before, "kernel_rows %s n=%lld d=%lld kind=%d m=%lld: rel err %g",
             gsb_dtype_name(dt), (long long)n, (long long)d, kind, (long long)m, err / scale);
    gsb__tensor_free(&back);
    gsb__tensor *ts[] = {&Xh, &Xg, &rh, &sh, &rg, &sg, &ch, &cg};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++)
        gsb__tensor_free(ts[k]);
}

static void test_svm_kernel_rows(void)
{
    testing_seed(12);
    const gsb_dtype dts[2] = {GSB_F32, GSB_F64};
    for (int k = 0; k < 2; k++)
        for (int kind = 0; kind < 4; kind++) {
            rows_case(dts[k], 1, 3, kind, 1);
            rows_case(dts[k], 1000, 32, kind, 37);
            rows_case(dts[k], 5003, 7, kind, 600);
        }
    rows_case(GSB_F32, 100000, 32, 2, 200); /* chunks of rows */
}

/* ---- svm_inner and svm_update_f ----------------------------------------------------- */

static void inner_case(int64_t n, int svr, int64_t q, double eps, int64_t max_steps)
{
    int before = case_begin();
    pair_state p;
    state_make(&p, n, svr, 0.05);
    if (q > p.l)
        q = p.l;
    gsb__tensor wh = distinct(q, p.l), slh;
    if (gsb__tensor_alloc(cpu, GSB_I32, q, 1, &slh) != GSB_OK)
        abort();
    for (int64_t k = 0; k < q; k++) /* slot = row */
        ((int32_t *)slh.data)[k] = ((const int32_t *)p.h[0].data)[((int32_t *)wh.data)[k]];
    gsb__tensor wg = to_gpu(&wh), slg = to_gpu(&slh);
    gsb__tensor coh = host_poisoned(GSB_F64, q, 1), cog = gpu_poisoned(GSB_F64, q, 1);
    gsb__tensor sth, stg;
    CHECK_OK(gsb__tensor_zeros(cpu, GSB_F64, 2, 1, &sth));
    stg = to_gpu(&sth);
    CHECK_OK(cpu->ops->svm_inner(cpu, &p.hs, &wh, &slh, eps, max_steps, &coh, &sth));
    CHECK_OK(gpu->ops->svm_inner(gpu, &p.gs, &wg, &slg, eps, max_steps, &cog, &stg));
    /* the same arithmetic on the same values: equal but for a last bit */
    gsb__tensor ag = from_gpu(&p.g[5]), cg = from_gpu(&cog), sg = from_gpu(&stg);
    CHECK(maxdiff(&ag, &p.h[5]) <= 1e-12);
    CHECK(maxdiff(&cg, &coh) <= 1e-12);
    CHECK(((double *)sg.data)[1] == ((double *)sth.data)[1]);
    CHECK(fabs(((double *)sg.data)[0] - ((double *)sth.data)[0]) <= 1e-12 ||
          (isinf(((double *)sg.data)[0]) && isinf(((double *)sth.data)[0])));
    if (max_steps > 0 && q >= 33) /* a random set of that size violates */
        CHECK(((double *)sth.data)[1] > 0);
    /* then the gradient pass over every variable */
    CHECK_OK(cpu->ops->svm_update_f(cpu, &p.hs, &slh, &coh));
    CHECK_OK(gpu->ops->svm_update_f(gpu, &p.gs, &slg, &cog));
    gsb__tensor fg = from_gpu(&p.g[4]);
    CHECK(maxdiff(&fg, &p.h[4]) <= 1e-10);
    CASE_END(before, "inner n=%lld svr=%d q=%lld eps=%g max_steps=%lld: steps %g / %g",
             (long long)n, svr, (long long)q, eps, (long long)max_steps,
             ((double *)sth.data)[1], ((double *)sg.data)[1]);
    gsb__tensor *ts[] = {&wh, &slh, &wg, &slg, &coh, &cog, &sth, &stg, &ag, &cg, &sg, &fg};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++)
        gsb__tensor_free(ts[k]);
    state_free(&p);
}

static void test_svm_inner_update(void)
{
    testing_seed(13);
    inner_case(50, 0, 1, 1e-3, 100);
    inner_case(50, 0, 2, 1e-3, 100);
    inner_case(300, 0, 33, 1e-3, 1000);
    inner_case(2000, 0, 1024, 1e-3, 100000);
    inner_case(2000, 0, 1024, 1e-3, 5);
    inner_case(800, 1, 1000, 1e-3, 100000); /* SVR: both variables of a row may be in */
    inner_case(1500, 0, 517, 1e-5, 0);      /* no step: alphas unchanged, coef 0 */
}

/* ---- the solver on the GPU against libsvm's on the host ------------------------------ */

typedef struct host_rows {
    const gsb__tensor *X;
    gsb__tensor K;
} host_rows;

static int host_row(void *data, int64_t r, float *out)
{
    host_rows *h = data;
    gsb__tensor xr = *h->X;
    xr.data = (double *)h->X->data + r * h->X->cols;
    xr.rows = 1;
    xr.owned = 0;
    GSB_TRY(cpu->ops->kernel(cpu, &xr, h->X, 2, 0.1, 0.0, 3, &h->K));
    for (int64_t j = 0; j < h->X->rows; j++)
        out[j] = (float)((double *)h->K.data)[j];
    return GSB_OK;
}

static void solver_case(int64_t n, int64_t d, int svr)
{
    int before = case_begin();
    int64_t l = svr ? 2 * n : n;
    gsb__tensor Xh = host_random(GSB_F64, n, d, 1.0), Xg = to_gpu(&Xh);
    int64_t *real = malloc((size_t)l * sizeof *real);
    int8_t *y = malloc((size_t)l);
    double *p = malloc((size_t)l * sizeof *p), *C = malloc((size_t)l * sizeof *C);
    double *QD = malloc((size_t)l * sizeof *QD), *a1 = calloc((size_t)l, sizeof *a1);
    double *a2 = calloc((size_t)l, sizeof *a2);
    for (int64_t t = 0; t < l; t++) {
        int64_t r = t % n;
        const double *x = (const double *)Xh.data + r * d;
        double lab = x[0] + 0.5 * x[1] * x[2] + 0.3 * testing_normal();
        real[t] = r;
        y[t] = svr ? (t < n ? 1 : -1) : (lab > 0 ? 1 : -1);
        p[t] = svr ? (t < n ? 0.1 - lab : 0.1 + lab) : -1.0;
        C[t] = 1.0;
        QD[t] = 1.0;
    }
    host_rows hr = {&Xh, GSB__TENSOR_NONE};
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, 1, n, &hr.K));
    gsb__smo_problem lp = {.l = l, .n = n, .real = real, .y = y, .p = p, .C = C, .QD = QD,
                           .eps = 1e-3, .shrinking = 1, .max_iter = -1,
                           .cache_bytes = 200e6, .row = host_row, .row_data = &hr};
    gsb__smo_result r1, r2;
    CHECK_OK(gsb__smo_solve(&lp, a1, &r1));
    gsb__smo_blocks_problem bp = {.be = gpu, .l = l, .real = real, .y = y, .p = p, .C = C,
                                  .QD = QD, .X = &Xg, .kind = 2, .gamma = 0.1, .degree = 3,
                                  .eps = 1e-3, .max_iter = -1, .cache_bytes = 200e6};
    CHECK_OK(gsb__smo_blocks_solve(&bp, a2, &r2));
    /* both stop at a violation below eps: the same optimum to about eps */
    CHECK(fabs(r1.obj - r2.obj) <= 1e-3 * fabs(r1.obj));
    CHECK(fabs(r1.rho - r2.rho) <= 5e-3);
    CHECK(!r2.timed_out && r2.n_iter > 0);
    double sum = 0;
    for (int64_t t = 0; t < l; t++)
        sum += y[t] * a2[t];
    CHECK(fabs(sum) <= 1e-9 * (double)l);
    CASE_END(before, "solver n=%lld d=%lld svr=%d: obj %.10g vs libsvm %.10g, rho %.6g vs %.6g, "
             "steps %lld vs %lld", (long long)n, (long long)d, svr, r2.obj, r1.obj, r2.rho,
             r1.rho, (long long)r2.n_iter, (long long)r1.n_iter);
    gsb__tensor_free(&hr.K);
    gsb__tensor_free(&Xh);
    gsb__tensor_free(&Xg);
    free(real);
    free(y);
    free(p);
    free(C);
    free(QD);
    free(a1);
    free(a2);
}

static void test_svm_solver(void)
{
    testing_seed(14);
    solver_case(3000, 10, 0);
    solver_case(2500, 6, 1);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_svm_select);
    RUN(test_svm_kernel_rows);
    RUN(test_svm_inner_update);
    RUN(test_svm_solver);
    return testing_done();
}
