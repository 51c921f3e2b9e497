/*
 * test_cuda_logistic.c - logistic_loss_grad's one-pass kernel
 * (cuda_logistic_fused.cu) against the CPU twin, and LogisticRegression
 * through the public API on device=cuda against device=cpu.
 *
 * The kernel's tiles: binary up to 256 features (1, 2, 4 or 8 columns a
 * lane), up to 4 classes up to 128 features, up to 8 classes up to 64; each
 * tile at its edges (d = 32k and 32k + 1), the shapes just past them (the
 * blocked GEMM path), row counts that leave a warp's last step part empty,
 * weights of both dtypes, with and without an intercept, coefficients and
 * gradient on the host (LogisticRegression's one round trip) and on the GPU.
 * Also: bitwise repeatable results, a bad class index in the multinomial
 * tile, and fits whose coef_ match the CPU backend's.
 * Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c/test_api_helpers.h"
#include "cuda_testing.h"

static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};

/* ---- logistic_loss_grad: the one-pass kernel against the CPU ---------------------------- */

/* Weights: 0 none, 1 float64, 2 float32 (uniform in [0, 2), some exactly 0). */
static gsb__tensor weights(int wkind, int64_t n)
{
    if (!wkind)
        return GSB__TENSOR_NONE;
    gsb__tensor w = host_random(wkind == 1 ? GSB_F64 : GSB_F32, n, 1, 1.0);
    for (int64_t i = 0; i < n; i++)
        gsb__tensor_set(&w, i, i % 7 == 3 ? 0.0 : 2.0 * testing_uniform());
    return w;
}

/* One call on both backends; host_params: coef and grad on the host. */
static void fused_case(gsb_dtype dt, int64_t n, int64_t d, int64_t K, int fi, int wkind,
                       int host_params)
{
    int before = case_begin();
    int64_t p = d + (fi ? 1 : 0);
    gsb__tensor Xh = host_random(dt, n, d, 1.0);
    gsb__tensor yh = host_random(GSB_I32, n, 1, K == 1 ? 2.0 : (double)K);
    gsb__tensor wh = weights(wkind, n);
    gsb__tensor ch = host_random(GSB_F64, K, p, 0.3);
    gsb__tensor gh = host_poisoned(GSB_F64, K, p);
    double loss_c = NAN, loss_g = NAN;
    CHECK_OK(cpu->ops->logistic_loss_grad(cpu, &Xh, &yh, wkind ? &wh : NULL, &ch, fi, &loss_c,
                                          &gh));
    gsb__tensor Xg = to_gpu(&Xh), yg = to_gpu(&yh);
    gsb__tensor wg = wkind ? to_gpu(&wh) : GSB__TENSOR_NONE;
    gsb__tensor cg = host_params ? GSB__TENSOR_NONE : to_gpu(&ch);
    gsb__tensor gg = host_params ? host_poisoned(GSB_F64, K, p) : gpu_poisoned(GSB_F64, K, p);
    CHECK_OK(gpu->ops->logistic_loss_grad(gpu, &Xg, &yg, wkind ? &wg : NULL,
                                          host_params ? &ch : &cg, fi, &loss_g, &gg));
    /* everything in double on both: rounding in the order of the sums only */
    CHECK_CLOSE(loss_g, loss_c, 1e-10);
    CHECK_MATCH(&gg, &gh, 1e-10);
    CASE_END(before, "logistic %s %lld x %lld K %lld intercept %d weights %d host %d",
             gsb_dtype_name(dt), (long long)n, (long long)d, (long long)K, fi, wkind,
             host_params);
    gsb__tensor_free(&Xh);
    gsb__tensor_free(&yh);
    gsb__tensor_free(&wh);
    gsb__tensor_free(&ch);
    gsb__tensor_free(&gh);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&yg);
    gsb__tensor_free(&wg);
    gsb__tensor_free(&cg);
    gsb__tensor_free(&gg);
}

/* Every tile at its edges and just past them, in both dtypes. */
static void test_fused_tiles(void)
{
    /* {K, d}: binary 1..8 columns a lane and 257 (blocked); 4 classes 1..4 and
     * 129 (blocked); 8 classes 1..2 and 65 (blocked); 9 classes (blocked) */
    static const int64_t kd[][2] = {{1, 1},   {1, 31},  {1, 32},  {1, 33},  {1, 64},
                                    {1, 65},  {1, 128}, {1, 129}, {1, 256}, {1, 257},
                                    {2, 5},   {3, 32},  {4, 33},  {4, 100}, {4, 128},
                                    {4, 129}, {5, 20},  {8, 32},  {7, 64},  {8, 65},
                                    {9, 16}};
    /* rows: fewer than a warp's step, a step and one more, many steps */
    static const int64_t ns[] = {1, 17, 3001};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof kd / sizeof kd[0]; s++)
            for (size_t r = 0; r < sizeof ns / sizeof ns[0]; r++) {
                int variant = (int)((s + r) % 6); /* intercept, weights, host in turn */
                fused_case(dtypes[t], ns[r], kd[s][1], kd[s][0], variant % 2, variant % 3,
                           (int)(r % 2));
            }
    /* many rows (the grid's blocks each take many steps), every variant */
    for (int t = 0; t < 2; t++)
        for (int fi = 0; fi < 2; fi++)
            for (int wkind = 0; wkind < 3; wkind++) {
                fused_case(dtypes[t], 200003, 64, 1, fi, wkind, 1);
                fused_case(dtypes[t], 50001, 20, 3, fi, wkind, 0);
            }
}

/* The same call twice gives the same bits (fixed grid, fixed summation order). */
static void test_fused_repeatable(void)
{
    for (int t = 0; t < 2; t++) {
        const int64_t n = 100000, d = 64, K = 1, p = d + 1;
        gsb__tensor Xh = host_random(dtypes[t], n, d, 1.0);
        gsb__tensor yh = host_random(GSB_I32, n, 1, 2.0);
        gsb__tensor ch = host_random(GSB_F64, K, p, 0.3);
        gsb__tensor g1 = host_poisoned(GSB_F64, K, p), g2 = host_poisoned(GSB_F64, K, p);
        gsb__tensor Xg = to_gpu(&Xh), yg = to_gpu(&yh);
        double l1 = NAN, l2 = NAN;
        CHECK_OK(gpu->ops->logistic_loss_grad(gpu, &Xg, &yg, NULL, &ch, 1, &l1, &g1));
        CHECK_OK(gpu->ops->logistic_loss_grad(gpu, &Xg, &yg, NULL, &ch, 1, &l2, &g2));
        CHECK(memcmp(&l1, &l2, sizeof l1) == 0);
        CHECK(memcmp(g1.data, g2.data, gsb__tensor_nbytes(&g1)) == 0);
        gsb__tensor_free(&Xh);
        gsb__tensor_free(&yh);
        gsb__tensor_free(&ch);
        gsb__tensor_free(&g1);
        gsb__tensor_free(&g2);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&yg);
    }
}

/* A class index out of range in the multinomial tile fails naming the first bad row. */
static void test_fused_bad_label(void)
{
    gsb__tensor Xh = host_random(GSB_F32, 5000, 10, 1.0);
    gsb__tensor yh = host_random(GSB_I32, 5000, 1, 3.0);
    gsb__tensor_set(&yh, 4321, 3);
    gsb__tensor_set(&yh, 1234, 7);
    gsb__tensor ch = host_random(GSB_F64, 3, 11, 0.3), gh = host_poisoned(GSB_F64, 3, 11);
    gsb__tensor Xg = to_gpu(&Xh), yg = to_gpu(&yh);
    double loss = 0;
    CHECK_ERR(gpu->ops->logistic_loss_grad(gpu, &Xg, &yg, NULL, &ch, 1, &loss, &gh), GSB_EINVAL,
              "class index 7 of row 1234 is outside [0, 3)");
    gsb__tensor_free(&Xh);
    gsb__tensor_free(&yh);
    gsb__tensor_free(&ch);
    gsb__tensor_free(&gh);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&yg);
}

/* ---- LogisticRegression on device=cuda against device=cpu -------------------------------- */

/* coef_, intercept_ and n_iter_ of a fit on device=`device`; 0 on failure. */
static int fit_coef(const char *device, const gsb_array *X, const gsb_array *y, double *coef,
                    int64_t ncoef, double *icpt, int64_t nicpt, double *n_iter)
{
    gsb_session *s = NULL;
    char url[64];
    snprintf(url, sizeof url, "local?device=%s", device);
    CHECK_OK(gsb_open(url, &s));
    if (!s)
        return 0;
    gsb_model *m = testing_model(s, "LogisticRegression", "{\"max_iter\": 1000}");
    int ok = m && testing_fit(m, X, y, NULL) == GSB_OK;
    if (m && !ok)
        fprintf(stderr, "fit on %s: %s\n", device, gsb_errmsg());
    ok = ok && testing_attr(m, "coef_", coef, ncoef, NULL) == ncoef &&
         testing_attr(m, "intercept_", icpt, nicpt, NULL) == nicpt &&
         testing_attr(m, "n_iter_", n_iter, 1, NULL) == 1;
    gsb_model_free(m);
    gsb_close(s);
    return ok;
}

/* Binary and 4-class fits of float64 data from a linear model: the same
 * iterations on both devices, coef_ within the solver's tolerance. */
static void test_fit_matches_cpu(void)
{
    static const int64_t Ks[] = {2, 4};
    const int64_t n = 20000, d = 24;
    double *X = malloc((size_t)(n * d) * sizeof *X), *y = malloc((size_t)n * sizeof *y);
    double *B = malloc((size_t)(4 * d) * sizeof *B);
    CHECK(X && y && B);
    for (size_t k = 0; X && y && B && k < sizeof Ks / sizeof Ks[0]; k++) {
        int64_t K = Ks[k], R = K == 2 ? 1 : K;
        testing_fill_normal(X, n * d);
        testing_fill_normal(B, K * d);
        for (int64_t i = 0; i < n; i++) { /* the class of the largest score, noisy */
            int64_t best = 0;
            double top = -INFINITY;
            for (int64_t c = 0; c < K; c++) {
                double s = 2.0 * testing_normal();
                for (int64_t j = 0; j < d; j++)
                    s += B[c * d + j] * X[i * d + j];
                if (s > top)
                    top = s, best = c;
            }
            y[i] = (double)(best * 3); /* class values 0, 3, 6, 9 */
        }
        gsb_array Xa = gsb_array_2d(X, GSB_F64, n, d), ya = gsb_array_1d(y, GSB_F64, n);
        double cc[4 * 24], cg[4 * 24], ic[4], ig[4];
        double itc = -1, itg = -2;
        CHECK(fit_coef("cpu", &Xa, &ya, cc, R * d, ic, R, &itc));
        CHECK(fit_coef("cuda", &Xa, &ya, cg, R * d, ig, R, &itg));
        /* the gradients agree to ~1e-12: the same L-BFGS path */
        CHECK(itc == itg);
        CHECK(testing_relerr(cg, cc, R * d) < 1e-6);
        CHECK(testing_relerr(ig, ic, R) < 1e-6);
    }
    free(X);
    free(y);
    free(B);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20261126);
    RUN(test_fused_tiles);
    RUN(test_fused_repeatable);
    RUN(test_fused_bad_label);
    RUN(test_fit_matches_cpu);
    return testing_done();
}
