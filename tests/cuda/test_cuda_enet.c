/*
 * test_cuda_enet.c - the CUDA elastic-net ops (cuda_enet.cu) against their
 * CPU twins, and Lasso / ElasticNet through the public API on device=cuda
 * against device=cpu.
 *
 * enet_cd_gram: fresh random problems (Q = X^T X, q = Y^T X in float64),
 * sizes from 1 to 6000 features (the last beyond the shared-memory limit:
 * the block's vectors in global memory), one or several targets, cyclic and
 * random coordinates, positive, alpha = 0 (no screening), warm starts and a
 * max_iter that stops the solve early.  Both backends run the same
 * iterates (the per-coordinate arithmetic is rounded identically; only the
 * gap's sums associate differently), so the epoch counts must be equal and
 * the solutions agree to ~1e-10.  gather_cols: exact, both dtypes, repeated
 * and out-of-order columns.  The estimators: the Gram form (p <= 4096) and
 * the working-set form (forced, and p > 4096) give the CPU's coefficients.
 * Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"

/* ---- enet_cd_gram ------------------------------------------------------------ */

typedef struct cd_case {
    int64_t n, p, k;
    double alpha, beta; /* relative to n (as the estimators scale them) */
    int positive, random, warm;
    int64_t max_iter;
} cd_case;

/* One problem on both backends; returns after checking every output. */
static void cd_compare(const cd_case *cc)
{
    int before = case_begin();
    int64_t n = cc->n, p = cc->p, k = cc->k;
    gsb__tensor X = host_random(GSB_F64, n, p, 1.0), B = host_random(GSB_F64, k, p, 1.0);
    gsb__tensor Y, Q, q, W0;
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, n, k, &Y));
    /* y_t = X b_t (a sparse b_t) + noise: a Lasso with some support */
    for (int64_t i = 0; i < n; i++)
        for (int64_t t = 0; t < k; t++) {
            double s = 0.1 * testing_normal();
            for (int64_t j = 0; j < p && j < 10; j++)
                s += ((double *)X.data)[i * p + j] * ((double *)B.data)[t * p + j];
            ((double *)Y.data)[i * k + t] = s;
        }
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, p, p, &Q));
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, k, p, &q));
    CHECK_OK(cpu->ops->syrk(cpu, 1.0, &X, 0.0, &Q));
    CHECK_OK(cpu->ops->gemm(cpu, 1, 0, 1.0, &Y, &X, 0.0, &q));
    double *yn = calloc((size_t)k, sizeof *yn);
    for (int64_t i = 0; i < n; i++)
        for (int64_t t = 0; t < k; t++)
            yn[t] += ((double *)Y.data)[i * k + t] * ((double *)Y.data)[i * k + t];
    W0 = host_random(GSB_F64, k, p, cc->warm ? 0.5 : 0.0);
    gsb__enet_cd_params cd = {cc->alpha * (double)n, cc->beta * (double)n, 1e-6, cc->max_iter,
                              cc->positive, cc->random, 1, 42};

    gsb__tensor Wc = host_random(GSB_F64, k, p, 0.0);
    memcpy(Wc.data, W0.data, gsb__tensor_nbytes(&W0));
    double *gc = calloc((size_t)k, sizeof *gc), *gg = calloc((size_t)k, sizeof *gg);
    int64_t *ic = calloc((size_t)k, sizeof *ic), *ig = calloc((size_t)k, sizeof *ig);
    CHECK_OK(cpu->ops->enet_cd_gram(cpu, &Q, &q, yn, &cd, &Wc, gc, ic));

    gsb__tensor Qg = to_gpu(&Q), qg = to_gpu(&q), Wg = to_gpu(&W0);
    for (int64_t t = 0; t < k; t++)
        gg[t] = NAN, ig[t] = -1;
    CHECK_OK(gpu->ops->enet_cd_gram(gpu, &Qg, &qg, yn, &cd, &Wg, gg, ig));
    CHECK_MATCH_FLOOR(&Wg, &Wc, 1e-9, 1e-12);
    for (int64_t t = 0; t < k; t++) {
        CHECK(ig[t] == ic[t]);
        CHECK(ic[t] >= 0 && ic[t] <= cc->max_iter);
        /* the gaps: the same iterate, sums in another order */
        CHECK(fabs(gg[t] - gc[t]) <= 1e-9 * yn[t] + 1e-12);
    }
    CASE_END(before, "n %lld p %lld k %lld alpha %g beta %g positive %d random %d warm %d "
             "max_iter %lld (epochs cpu %lld gpu %lld)", (long long)n, (long long)p,
             (long long)k, cc->alpha, cc->beta, cc->positive, cc->random, cc->warm,
             (long long)cc->max_iter, (long long)ic[0], (long long)ig[0]);
    free(yn);
    free(gc);
    free(gg);
    free(ic);
    free(ig);
    gsb__tensor_free(&X);
    gsb__tensor_free(&B);
    gsb__tensor_free(&Y);
    gsb__tensor_free(&Q);
    gsb__tensor_free(&q);
    gsb__tensor_free(&W0);
    gsb__tensor_free(&Wc);
    gsb__tensor_free(&Qg);
    gsb__tensor_free(&qg);
    gsb__tensor_free(&Wg);
}

static void test_enet_cd_gram(void)
{
    static const cd_case cases[] = {
        {50, 1, 1, 0.01, 0, 0, 0, 0, 1000},
        {200, 7, 1, 0.05, 0, 0, 0, 0, 1000},
        {300, 256, 1, 0.02, 0, 0, 0, 0, 1000},
        {300, 257, 3, 0.02, 0.01, 0, 0, 0, 1000},   /* several targets, elastic net */
        {500, 300, 1, 0.01, 0, 1, 0, 0, 1000},      /* positive */
        {500, 300, 2, 0.01, 0, 0, 1, 0, 1000},      /* random coordinates */
        {200, 100, 1, 0.0, 0.05, 0, 0, 0, 1000},    /* alpha 0: no screening */
        {200, 100, 1, 0.02, 0, 0, 0, 1, 1000},      /* warm start */
        {200, 100, 1, 0.001, 0, 0, 0, 0, 3},        /* stopped by max_iter */
        {100, 1500, 1, 0.05, 0, 0, 0, 0, 1000},     /* wide: a singular Q */
        {200, 6000, 1, 0.2, 0, 0, 0, 0, 1000},      /* vectors in global memory */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        cd_compare(&cases[c]);
}

static void test_enet_cd_gram_errors(void)
{
    gsb__tensor Q = gpu_poisoned(GSB_F64, 3, 3), q = gpu_poisoned(GSB_F64, 1, 4),
                W = gpu_poisoned(GSB_F64, 1, 3), Qh = host_poisoned(GSB_F64, 3, 3);
    double yn = 1, gap;
    int64_t it;
    gsb__enet_cd_params cd = {1, 0, 1e-4, 10, 0, 0, 1, 0};
    CHECK_ERR(gpu->ops->enet_cd_gram(gpu, &Q, &q, &yn, &cd, &W, &gap, &it), GSB_EINTERNAL, "q");
    CHECK_ERR(gpu->ops->enet_cd_gram(gpu, &Qh, &q, &yn, &cd, &W, &gap, &it), GSB_EINTERNAL,
              "GPU");
    cd.max_iter = 0;
    gsb__tensor q3 = gpu_poisoned(GSB_F64, 1, 3);
    CHECK_ERR(gpu->ops->enet_cd_gram(gpu, &Q, &q3, &yn, &cd, &W, &gap, &it), GSB_EINTERNAL,
              "max_iter");
    gsb__tensor_free(&Q);
    gsb__tensor_free(&q);
    gsb__tensor_free(&q3);
    gsb__tensor_free(&W);
    gsb__tensor_free(&Qh);
}

/* ---- gather_cols ---------------------------------------------------------------- */

static void test_gather_cols(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {1000, 37, 50}, {3, 5000, 700}, {777, 64, 0}};
    for (int d = 0; d < 2; d++) {
        gsb_dtype dt = d ? GSB_F64 : GSB_F32;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int before = case_begin();
            int64_t n = shapes[s][0], p = shapes[s][1], m = shapes[s][2];
            gsb__tensor X = host_random(dt, n, p, 1.0), ref = host_poisoned(dt, n, m);
            int64_t *idx = malloc((size_t)(m ? m : 1) * sizeof *idx);
            for (int64_t c = 0; c < m; c++) /* out of order, with repeats */
                idx[c] = (int64_t)(testing_uniform() * (double)p) % p;
            CHECK_OK(cpu->ops->gather_cols(cpu, &X, idx, m, &ref));
            gsb__tensor Xg = to_gpu(&X), out = gpu_poisoned(dt, n, m);
            CHECK_OK(gpu->ops->gather_cols(gpu, &Xg, idx, m, &out));
            CHECK_MATCH(&out, &ref, 0.0);
            if (m > 0) {
                idx[0] = p;
                CHECK_ERR(gpu->ops->gather_cols(gpu, &Xg, idx, m, &out), GSB_EINTERNAL,
                          "outside");
            }
            CASE_END(before, "%s n %lld p %lld m %lld", dt == GSB_F32 ? "f32" : "f64",
                     (long long)n, (long long)p, (long long)m);
            free(idx);
            gsb__tensor_free(&X);
            gsb__tensor_free(&ref);
            gsb__tensor_free(&Xg);
            gsb__tensor_free(&out);
        }
    }
}

/* ---- the estimators on both devices -------------------------------------------------- */

/* coef_ (k * p values) of a fit on the device named in url; n_iter_ of target 0 */
static double *fit_coef(const char *url, const char *est, const char *params,
                        const char *options, const gsb_array *X, const gsb_array *y,
                        int64_t count, int64_t *n_iter)
{
    gsb_session *s = NULL;
    gsb_model *m = NULL;
    gsb_result *r = NULL;
    double *coef = calloc((size_t)count, sizeof *coef);
    *n_iter = -1;
    CHECK_OK(gsb_open(url, &s));
    CHECK_OK(gsb_model_create(s, est, params, &m));
    const gsb_array *ins[2] = {X, y};
    CHECK_OK(gsb_model_call(m, "fit", ins, 2, options, NULL));
    if (gsb_model_get_attr(m, "coef_", &r) == GSB_OK) {
        const gsb_array *a = gsb_result_array(r, 0);
        for (int64_t i = 0; i < count; i++)
            coef[i] = a->dtype == GSB_F32 ? ((const float *)a->data)[i]
                                          : ((const double *)a->data)[i];
        gsb_result_free(r);
    }
    if (gsb_model_get_attr(m, "n_iter_", &r) == GSB_OK) {
        *n_iter = ((const int64_t *)gsb_result_array(r, 0)->data)[0];
        gsb_result_free(r);
    }
    gsb_model_free(m);
    gsb_close(s);
    return coef;
}

static void estimator_case(int64_t n, int64_t p, gsb_dtype dt, const char *est,
                           const char *params, const char *options, int same_epochs)
{
    int before = case_begin();
    double *X = malloc((size_t)(n * p) * sizeof *X), *y = malloc((size_t)n * sizeof *y);
    testing_fill_normal(X, n * p);
    for (int64_t i = 0; i < n; i++) {
        y[i] = 0.1 * testing_normal();
        for (int64_t j = 0; j < 20 && j < p; j++)
            y[i] += (j % 3 - 1.0) * X[i * p + j];
    }
    float *Xf = malloc((size_t)(n * p) * sizeof *Xf), *yf = malloc((size_t)n * sizeof *yf);
    for (int64_t i = 0; i < n * p; i++)
        Xf[i] = (float)X[i];
    for (int64_t i = 0; i < n; i++)
        yf[i] = (float)y[i];
    gsb_array Xa = dt == GSB_F32 ? gsb_array_2d(Xf, dt, n, p) : gsb_array_2d(X, dt, n, p);
    gsb_array ya = dt == GSB_F32 ? gsb_array_1d(yf, dt, n) : gsb_array_1d(y, dt, n);
    int64_t ic, ig;
    double *c = fit_coef("local?device=cpu", est, params, options, &Xa, &ya, p, &ic);
    double *g = fit_coef("local?device=cuda", est, params, options, &Xa, &ya, p, &ig);
    double err = 0, scale = 1e-30;
    int support_same = 1;
    for (int64_t j = 0; j < p; j++) {
        err = fmax(err, fabs(g[j] - c[j]));
        scale = fmax(scale, fabs(c[j]));
    }
    for (int64_t j = 0; j < p; j++) /* a coefficient within rounding of 0 may be 0 */
        support_same &= (g[j] != 0) == (c[j] != 0) || fabs(c[j]) < 1e-6 * scale;
    /* float32: the Gram matrix is formed in float32 on both, in different orders */
    double tol = dt == GSB_F32 ? 1e-4 : 1e-8;
    CHECK(err / scale <= tol);
    CHECK(support_same);
    if (same_epochs)
        CHECK(ic == ig);
    CASE_END(before, "%s %s %s n %lld p %lld %s: relative error %g, epochs cpu %lld gpu %lld",
             est, params, options ? options : "", (long long)n, (long long)p,
             dt == GSB_F32 ? "f32" : "f64", err / scale, (long long)ic, (long long)ig);
    free(X);
    free(y);
    free(Xf);
    free(yf);
    free(c);
    free(g);
}

static void test_estimators(void)
{
    for (int d = 0; d < 2; d++) {
        gsb_dtype dt = d ? GSB_F64 : GSB_F32;
        /* the Gram form on both devices */
        estimator_case(5000, 64, dt, "Lasso", "{\"alpha\": 0.01, \"tol\": 1e-8}",
                       "{\"_cd_form\": 1}", dt == GSB_F64);
        estimator_case(3000, 300, dt, "ElasticNet",
                       "{\"alpha\": 0.01, \"l1_ratio\": 0.7, \"tol\": 1e-8}", NULL, 0);
        /* working sets on the GPU (p > 4096) against the CPU's residual form */
        estimator_case(400, 5000, dt, "Lasso", "{\"alpha\": 0.05, \"tol\": 1e-8}", NULL, 0);
        /* working sets forced on both */
        estimator_case(300, 800, dt, "Lasso",
                       "{\"alpha\": 0.02, \"tol\": 1e-8, \"positive\": true}",
                       "{\"_cd_form\": 3}", 0);
    }
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20260310);
    RUN(test_enet_cd_gram);
    RUN(test_enet_cd_gram_errors);
    RUN(test_gather_cols);
    RUN(test_estimators);
    return testing_done();
}
