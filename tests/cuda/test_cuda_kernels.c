/*
 * test_cuda_kernels.c - the CUDA backend's reductions, elementwise maps,
 * counter-based normals and family ops (cuda_reduce.cu, cuda_family.cu)
 * against their CPU twins: col_moments, col_minmax, row_sqnorms,
 * col_affine, clip, rand_normal, logistic_loss_grad, kernel.
 *
 * Every op in both float dtypes on fresh random data, GPU outputs poisoned
 * with NaN, shapes from 1 x 1 to 100k x 64 including sizes that are not a
 * multiple of any block or tile, NULL optional arguments, aliasing, row
 * slices (data pointers off any vector alignment) and bad arguments.
 * Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"

static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};

/* ---- helpers ------------------------------------------------------------------ */

/* Host tensor of uniform values in [lo, hi). */
static gsb__tensor host_uniform(gsb_dtype dt, int64_t rows, int64_t cols, double lo, double hi)
{
    gsb__tensor t = host_random(dt, rows, cols, 1.0);
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&t, i, lo + (hi - lo) * testing_uniform());
    return t;
}

/* 1 when every element of the GPU tensor g is NaN. */
static int all_nan(const gsb__tensor *g)
{
    gsb__tensor h = from_gpu(g);
    int ok = 1;
    for (int64_t i = 0; i < gsb__tensor_numel(&h); i++)
        ok &= isnan(gsb__tensor_get(&h, i)) != 0;
    gsb__tensor_free(&h);
    return ok;
}

/* Shapes every column/row op runs on: tiny, narrow, wide, tall, not a
 * multiple of the 256-thread blocks or 32-column tiles, d > 256. */
static const int64_t shapes[][2] = {{1, 1},    {1000, 3},  {3, 1000}, {100000, 64},
                                    {1001, 300}, {513, 256}, {777, 129}, {2, 1}};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* ---- col_moments ---------------------------------------------------------------- */

/* wkind: 0 no weights, 1 float64 weights, 2 float32 weights, 3 all zero */
static void moments_case(gsb_dtype dt, int64_t n, int64_t d, int wkind, int with_var,
                         gsb_dtype out_dt, double offset)
{
    int before = case_begin();
    gsb__tensor Xh = host_random(dt, n, d, 1.0);
    for (int64_t i = 0; i < n * d; i++)
        gsb__tensor_set(&Xh, i, gsb__tensor_get(&Xh, i) + offset);
    gsb__tensor wh = GSB__TENSOR_NONE, wg = GSB__TENSOR_NONE;
    if (wkind)
        wh = wkind == 3 ? host_uniform(GSB_F64, n, 1, 0.0, 0.0)
                        : host_uniform(wkind == 1 ? GSB_F64 : GSB_F32, n, 1, 0.0, 2.0);
    gsb__tensor mh = host_poisoned(out_dt, d, 1), vh = host_poisoned(out_dt, 1, d);
    CHECK_OK(cpu->ops->col_moments(cpu, &Xh, wkind ? &wh : NULL, &mh, with_var ? &vh : NULL));

    gsb__tensor Xg = to_gpu(&Xh);
    if (wkind)
        wg = to_gpu(&wh);
    gsb__tensor mg = gpu_poisoned(out_dt, d, 1), vg = gpu_poisoned(out_dt, 1, d);
    CHECK_OK(gpu->ops->col_moments(gpu, &Xg, wkind ? &wg : NULL, &mg, with_var ? &vg : NULL));
    /* both sum the same values in double: only the order differs */
    double tol = out_dt == GSB_F32 ? 1e-6 : 1e-10;
    if (wkind == 3) {
        CHECK(all_nan(&mg));
        if (with_var)
            CHECK(all_nan(&vg));
    } else {
        CHECK_MATCH(&mg, &mh, tol);
        if (with_var)
            CHECK_MATCH(&vg, &vh, tol);
    }
    if (!with_var) /* var untouched when not asked for */
        CHECK(all_nan(&vg));
    CASE_END(before, "col_moments %s %lld x %lld, weights %d, var %d, out %s, offset %g",
             gsb_dtype_name(dt), (long long)n, (long long)d, wkind, with_var,
             gsb_dtype_name(out_dt), offset);
    gsb__tensor_free(&Xh);
    gsb__tensor_free(&wh);
    gsb__tensor_free(&mh);
    gsb__tensor_free(&vh);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&wg);
    gsb__tensor_free(&mg);
    gsb__tensor_free(&vg);
}

static void test_col_moments(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        for (int s = 0; s < NSHAPES; s++) {
            int64_t n = shapes[s][0], d = shapes[s][1];
            if (n * d > 1000000) { /* the big one: a few variants only */
                moments_case(dt, n, d, 0, 1, dt, 0.0);
                moments_case(dt, n, d, 1, 1, GSB_F64, 0.0);
                continue;
            }
            for (int wkind = 0; wkind < 3; wkind++)
                moments_case(dt, n, d, wkind, 1, dt, 0.0);
            moments_case(dt, n, d, 0, 0, dt, 0.0);
            moments_case(dt, n, d, 2, 1, GSB_F64, 0.0);
        }
        /* a mean far from zero: the corrected two-pass scheme keeps the variance */
        moments_case(dt, 5000, 7, 0, 1, GSB_F64, 1000.0);
        moments_case(dt, 5000, 7, 1, 1, dt, 1000.0);
        /* zero total weight: NaN as numpy */
        moments_case(dt, 50, 4, 3, 1, dt, 0.0);
    }
}

/* No rows: NaN means and variances; no columns: nothing to do. */
static void test_col_moments_empty(void)
{
    for (int t = 0; t < 2; t++) {
        gsb__tensor Xh = host_random(dtypes[t], 1, 5, 1.0);
        gsb__tensor Xg = to_gpu(&Xh);
        gsb__tensor X0 = gsb__tensor_rows(&Xg, 0, 0);
        gsb__tensor mg = gpu_poisoned(dtypes[t], 5, 1), vg = gpu_poisoned(GSB_F64, 5, 1);
        CHECK_OK(gpu->ops->col_moments(gpu, &X0, NULL, &mg, &vg));
        CHECK(all_nan(&mg) && all_nan(&vg));
        gsb__tensor lo = gpu_poisoned(dtypes[t], 5, 1), hi = gpu_poisoned(dtypes[t], 5, 1);
        CHECK_OK(gpu->ops->col_minmax(gpu, &X0, &lo, &hi));
        CHECK(all_nan(&lo) && all_nan(&hi));
        gsb__tensor_free(&Xh);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&mg);
        gsb__tensor_free(&vg);
        gsb__tensor_free(&lo);
        gsb__tensor_free(&hi);
    }
}

/* Same inputs, same bits: the partials are combined in a fixed order. */
static void test_col_moments_deterministic(void)
{
    for (int t = 0; t < 2; t++) {
        gsb__tensor Xh = host_random(dtypes[t], 100000, 64, 1.0);
        gsb__tensor wh = host_uniform(GSB_F64, 100000, 1, 0.0, 2.0);
        gsb__tensor Xg = to_gpu(&Xh), wg = to_gpu(&wh);
        gsb__tensor m1 = gpu_poisoned(GSB_F64, 64, 1), v1 = gpu_poisoned(GSB_F64, 64, 1);
        gsb__tensor m2 = gpu_poisoned(GSB_F64, 64, 1), v2 = gpu_poisoned(GSB_F64, 64, 1);
        CHECK_OK(gpu->ops->col_moments(gpu, &Xg, &wg, &m1, &v1));
        CHECK_OK(gpu->ops->col_moments(gpu, &Xg, &wg, &m2, &v2));
        gsb__tensor m1h = from_gpu(&m1), v1h = from_gpu(&v1);
        CHECK_MATCH(&m2, &m1h, 0.0);
        CHECK_MATCH(&v2, &v1h, 0.0);
        gsb__tensor_free(&Xh);
        gsb__tensor_free(&wh);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&wg);
        gsb__tensor_free(&m1);
        gsb__tensor_free(&v1);
        gsb__tensor_free(&m2);
        gsb__tensor_free(&v2);
        gsb__tensor_free(&m1h);
        gsb__tensor_free(&v1h);
    }
}

/* ---- col_minmax ---------------------------------------------------------------- */

static void test_col_minmax(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        for (int s = 0; s < NSHAPES; s++) {
            int64_t n = shapes[s][0], d = shapes[s][1];
            for (int o = 0; o < 2; o++) {
                int before = case_begin();
                gsb_dtype out_dt = o ? GSB_F64 : dt;
                gsb__tensor Xh = host_random(dt, n, d, 3.0);
                gsb__tensor lh = host_poisoned(out_dt, d, 1), hh = host_poisoned(out_dt, d, 1);
                CHECK_OK(cpu->ops->col_minmax(cpu, &Xh, &lh, &hh));
                gsb__tensor Xg = to_gpu(&Xh);
                gsb__tensor lg = gpu_poisoned(out_dt, d, 1), hg = gpu_poisoned(out_dt, d, 1);
                CHECK_OK(gpu->ops->col_minmax(gpu, &Xg, &lg, &hg));
                CHECK_MATCH(&lg, &lh, 0.0); /* a min or max is one of the values: exact */
                CHECK_MATCH(&hg, &hh, 0.0);
                CASE_END(before, "col_minmax %s %lld x %lld out %s", gsb_dtype_name(dt),
                         (long long)n, (long long)d, gsb_dtype_name(out_dt));
                gsb__tensor_free(&Xh);
                gsb__tensor_free(&lh);
                gsb__tensor_free(&hh);
                gsb__tensor_free(&Xg);
                gsb__tensor_free(&lg);
                gsb__tensor_free(&hg);
            }
        }
    }
}

/* ---- row_sqnorms ---------------------------------------------------------------- */

static void test_row_sqnorms(void)
{
    static const int64_t rs[][2] = {{1, 1},    {1000, 3},  {3, 1000}, {100000, 64}, {1001, 16},
                                    {999, 17}, {257, 300}, {5, 0},    {40, 33}};
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        for (size_t s = 0; s < sizeof rs / sizeof rs[0]; s++) {
            int64_t n = rs[s][0], d = rs[s][1];
            for (int o = 0; o < 2; o++) {
                int before = case_begin();
                gsb_dtype out_dt = o ? GSB_F64 : dt;
                gsb__tensor Xh = host_random(dt, n, d, 1.0);
                gsb__tensor oh = host_poisoned(out_dt, n, 1);
                CHECK_OK(cpu->ops->row_sqnorms(cpu, &Xh, &oh));
                gsb__tensor Xg = to_gpu(&Xh), og = gpu_poisoned(out_dt, n, 1);
                CHECK_OK(gpu->ops->row_sqnorms(gpu, &Xg, &og));
                CHECK_MATCH(&og, &oh, out_dt == GSB_F32 ? 1e-6 : 1e-12);
                CASE_END(before, "row_sqnorms %s %lld x %lld out %s", gsb_dtype_name(dt),
                         (long long)n, (long long)d, gsb_dtype_name(out_dt));
                gsb__tensor_free(&Xh);
                gsb__tensor_free(&oh);
                gsb__tensor_free(&Xg);
                gsb__tensor_free(&og);
            }
        }
    }
}

/* ---- col_affine ---------------------------------------------------------------- */

/* mask bit 0 sub, 1 mul, 2 add present; vdt the vectors' dtype; alias: out is X */
static void affine_case(gsb_dtype dt, int64_t n, int64_t d, int mask, gsb_dtype vdt, int alias,
                        int64_t skip_rows)
{
    int before = case_begin();
    gsb__tensor Xfull = host_random(dt, n + skip_rows, d, 2.0);
    gsb__tensor Xh = gsb__tensor_rows(&Xfull, skip_rows, n);
    gsb__tensor vh[3], vg[3];
    for (int k = 0; k < 3; k++) {
        vh[k] = host_random(vdt, 1, d, 1.0);
        vg[k] = to_gpu(&vh[k]);
    }
    gsb__tensor Xgfull = to_gpu(&Xfull);
    gsb__tensor Xg = gsb__tensor_rows(&Xgfull, skip_rows, n);
    gsb__tensor oh = host_poisoned(dt, n, d);
    gsb__tensor og = alias ? GSB__TENSOR_NONE : gpu_poisoned(dt, n, d);
    const gsb__tensor *sh = mask & 1 ? &vh[0] : NULL, *mh = mask & 2 ? &vh[1] : NULL,
                      *ah = mask & 4 ? &vh[2] : NULL;
    const gsb__tensor *sg = mask & 1 ? &vg[0] : NULL, *mg = mask & 2 ? &vg[1] : NULL,
                      *ag = mask & 4 ? &vg[2] : NULL;
    CHECK_OK(cpu->ops->col_affine(cpu, &Xh, sh, mh, ah, &oh));
    CHECK_OK(gpu->ops->col_affine(gpu, &Xg, sg, mg, ag, alias ? &Xg : &og));
    /* the same double operations, each rounded once: the same values */
    CHECK_MATCH(alias ? &Xg : &og, &oh, dt == GSB_F32 ? 1e-6 : 1e-15);
    if (mask == 0) /* every vector skipped: X bit for bit */
        CHECK_MATCH(alias ? &Xg : &og, &Xh, 0.0);
    if (alias && skip_rows > 0) { /* rows before the view untouched */
        gsb__tensor head = gsb__tensor_rows(&Xgfull, 0, skip_rows);
        gsb__tensor headh = gsb__tensor_rows(&Xfull, 0, skip_rows);
        CHECK_MATCH(&head, &headh, 0.0);
    }
    CASE_END(before, "col_affine %s %lld x %lld mask %d vectors %s alias %d skip %lld",
             gsb_dtype_name(dt), (long long)n, (long long)d, mask, gsb_dtype_name(vdt), alias,
             (long long)skip_rows);
    for (int k = 0; k < 3; k++) {
        gsb__tensor_free(&vh[k]);
        gsb__tensor_free(&vg[k]);
    }
    gsb__tensor_free(&Xfull);
    gsb__tensor_free(&Xgfull);
    gsb__tensor_free(&oh);
    gsb__tensor_free(&og);
}

static void test_col_affine(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t], other = dtypes[1 - t];
        for (int s = 0; s < NSHAPES; s++) {
            int64_t n = shapes[s][0], d = shapes[s][1];
            if (n * d > 1000000) {
                affine_case(dt, n, d, 7, dt, 0, 0);
                affine_case(dt, n, d, 3, other, 1, 0);
                continue;
            }
            for (int mask = 0; mask < 8; mask++)
                affine_case(dt, n, d, mask, mask & 1 ? other : dt, mask & 2, 0);
        }
        /* row slices whose data pointer is off any 16-byte boundary */
        affine_case(dt, 999, 3, 7, dt, 1, 1);
        affine_case(dt, 1000, 5, 5, other, 0, 3);
    }
}

/* ---- clip ------------------------------------------------------------------------ */

static void test_clip(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        for (int s = 0; s < NSHAPES; s++) {
            int64_t n = shapes[s][0], d = shapes[s][1];
            int before = case_begin();
            gsb__tensor Xh = host_random(dt, n, d, 2.0);
            gsb__tensor Xg = to_gpu(&Xh);
            CHECK_OK(cpu->ops->clip(cpu, &Xh, -1.1, 0.3));
            CHECK_OK(gpu->ops->clip(gpu, &Xg, -1.1, 0.3));
            CHECK_MATCH(&Xg, &Xh, 0.0);
            CASE_END(before, "clip %s %lld x %lld", gsb_dtype_name(dt), (long long)n,
                     (long long)d);
            gsb__tensor_free(&Xh);
            gsb__tensor_free(&Xg);
        }
    }
}

/* ---- rand_normal ------------------------------------------------------------------- */

static void test_rand_normal(void)
{
    static const uint64_t seeds[] = {0, 1, 42, 0x8000000000000005ull, 0xFFFFFFFFFFFFFFFFull};
    static const int64_t lens[][2] = {{1, 1}, {2, 1}, {7, 1}, {33, 7}, {1001, 1}, {100001, 1},
                                      {1, 4}};
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++)
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                int before = case_begin();
                int64_t r = lens[l][0], c = lens[l][1];
                gsb__tensor h = host_poisoned(dt, r, c), g = gpu_poisoned(dt, r, c);
                CHECK_OK(cpu->ops->rand_normal(cpu, &h, seeds[s]));
                CHECK_OK(gpu->ops->rand_normal(gpu, &g, seeds[s]));
                /* the integers are exact; only log/sqrt/cos/sin may differ in the
                 * last bit of a double */
                CHECK_MATCH(&g, &h, dt == GSB_F32 ? 1e-6 : 1e-12);
                CASE_END(before, "rand_normal %s %lld x %lld seed %llu", gsb_dtype_name(dt),
                         (long long)r, (long long)c, (unsigned long long)seeds[s]);
                gsb__tensor_free(&h);
                gsb__tensor_free(&g);
            }
    }
    /* element i depends on (seed, i) only: a prefix of a longer draw */
    gsb__tensor a = gpu_poisoned(GSB_F64, 1000, 1), b = gpu_poisoned(GSB_F64, 999, 1);
    CHECK_OK(gpu->ops->rand_normal(gpu, &a, 7));
    CHECK_OK(gpu->ops->rand_normal(gpu, &b, 7));
    gsb__tensor a999 = gsb__tensor_rows(&a, 0, 999), bh = from_gpu(&b);
    CHECK_MATCH(&a999, &bh, 0.0);
    gsb__tensor_free(&a);
    gsb__tensor_free(&b);
    gsb__tensor_free(&bh);
}

/* ---- logistic_loss_grad ---------------------------------------------------------------- */

/* wkind: 0 none, 1 float64, 2 float32; host_params: coef and grad on the host */
static void logistic_case(gsb_dtype dt, int64_t n, int64_t d, int64_t K, int fi, int wkind,
                          int host_params)
{
    int before = case_begin();
    int64_t p = d + (fi ? 1 : 0);
    gsb__tensor Xh = host_random(dt, n, d, 1.0);
    gsb__tensor yh = host_random(GSB_I32, n, 1, K == 1 ? 2.0 : (double)K);
    gsb__tensor wh = wkind ? host_uniform(wkind == 1 ? GSB_F64 : GSB_F32, n, 1, 0.0, 2.0)
                           : GSB__TENSOR_NONE;
    gsb__tensor ch = host_random(GSB_F64, K, p, 0.5);
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
    /* float32 X is converted to double on the GPU as on the CPU, so both
     * dtypes agree with the CPU twin to rounding in the summation order */
    double tol = 1e-10;
    CHECK_CLOSE(loss_g, loss_c, tol);
    CHECK_MATCH(&gg, &gh, tol); /* gg is on the host when host_params */
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

static void test_logistic(void)
{
    static const int64_t ls[][2] = {{1, 1}, {1000, 3}, {3, 1000}, {1001, 300}, {257, 1}};
    static const int64_t Ks[] = {1, 4};
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = dtypes[t];
        for (size_t s = 0; s < sizeof ls / sizeof ls[0]; s++)
            for (int k = 0; k < 2; k++)
                for (int fi = 0; fi < 2; fi++)
                    for (int wkind = 0; wkind < 3; wkind++)
                        logistic_case(dt, ls[s][0], ls[s][1], Ks[k], fi, wkind, 0);
        for (int k = 0; k < 2; k++) {
            logistic_case(dt, 100000, 64, Ks[k], 1, 1, 0);
            logistic_case(dt, 1000, 20, Ks[k], 1, 0, 1); /* coef and grad on the host */
            logistic_case(dt, 1000, 20, Ks[k], 0, 2, 1);
        }
        logistic_case(dt, 500, 10, 3, 1, 0, 0);   /* three classes */
        logistic_case(dt, 300, 40, 40, 1, 1, 0);  /* many classes */
    }
    /* float32 X is converted to double a block of rows at a time, each at most
     * 2^24 doubles (cuda_family.cu): 60000 x 300 takes two blocks, the second
     * adding to the gradient of the first */
    logistic_case(GSB_F32, 60000, 300, 1, 1, 1, 0);
}

/* A class index out of range fails as the CPU twin, naming the first bad row. */
static void test_logistic_bad_label(void)
{
    for (int t = 0; t < 2; t++) {
        gsb__tensor Xh = host_random(dtypes[t], 600, 4, 1.0);
        gsb__tensor yh = host_random(GSB_I32, 600, 1, 2.0);
        gsb__tensor_set(&yh, 517, 2);
        gsb__tensor_set(&yh, 300, -1);
        gsb__tensor ch = host_random(GSB_F64, 1, 5, 0.5);
        gsb__tensor Xg = to_gpu(&Xh), yg = to_gpu(&yh), cg = to_gpu(&ch);
        gsb__tensor gg = gpu_poisoned(GSB_F64, 1, 5), gh = host_poisoned(GSB_F64, 1, 5);
        double loss = 0;
        CHECK_ERR(cpu->ops->logistic_loss_grad(cpu, &Xh, &yh, NULL, &ch, 1, &loss, &gh),
                  GSB_EINVAL, "class index -1 of row 300 is outside [0, 2)");
        CHECK_ERR(gpu->ops->logistic_loss_grad(gpu, &Xg, &yg, NULL, &cg, 1, &loss, &gg),
                  GSB_EINVAL, "class index -1 of row 300 is outside [0, 2)");
        /* wrong gradient shape, X on the host */
        gsb__tensor bad = gpu_poisoned(GSB_F64, 1, 4);
        CHECK_ERR(gpu->ops->logistic_loss_grad(gpu, &Xg, &yg, NULL, &cg, 1, &loss, &bad),
                  GSB_EINTERNAL, "grad");
        CHECK_ERR(gpu->ops->logistic_loss_grad(gpu, &Xh, &yg, NULL, &cg, 1, &loss, &gg),
                  GSB_EINTERNAL, "X");
        gsb__tensor_free(&Xh);
        gsb__tensor_free(&yh);
        gsb__tensor_free(&ch);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&yg);
        gsb__tensor_free(&cg);
        gsb__tensor_free(&gg);
        gsb__tensor_free(&gh);
        gsb__tensor_free(&bad);
    }
}

/* ---- kernel ------------------------------------------------------------------------- */

static void kernel_case(gsb_dtype dt, int64_t n, int64_t m, int64_t d, int kind, int same)
{
    int before = case_begin();
    double gamma = 1.0 / (double)(d > 0 ? d : 1), coef0 = 0.5;
    int degree = 3;
    gsb__tensor Xh = host_random(dt, n, d, 1.0);
    gsb__tensor Yh = same ? Xh : host_random(dt, m, d, 1.0);
    if (same)
        m = n;
    gsb__tensor Kh = host_poisoned(dt, n, m);
    CHECK_OK(cpu->ops->kernel(cpu, &Xh, &Yh, kind, gamma, coef0, degree, &Kh));
    gsb__tensor Xg = to_gpu(&Xh);
    gsb__tensor Yg = same ? Xg : to_gpu(&Yh);
    gsb__tensor Kg = gpu_poisoned(dt, n, m);
    CHECK_OK(gpu->ops->kernel(gpu, &Xg, &Yg, kind, gamma, coef0, degree, &Kg));
    CHECK_MATCH(&Kg, &Kh, tol_for(dt));
    CASE_END(before, "kernel %s kind %d X %lld x %lld, Y %lld rows%s", gsb_dtype_name(dt), kind,
             (long long)n, (long long)d, (long long)m, same ? " (Y is X)" : "");
    gsb__tensor_free(&Xh);
    if (!same)
        gsb__tensor_free(&Yh);
    gsb__tensor_free(&Kh);
    gsb__tensor_free(&Xg);
    if (!same)
        gsb__tensor_free(&Yg);
    gsb__tensor_free(&Kg);
}

static void test_kernel(void)
{
    /* n <= 8 takes the direct path (narrow and warp variants), more the GEMM */
    static const int64_t ks[][3] = {{1, 1, 1},   {1, 700, 3},   {5, 1000, 31}, {8, 333, 32},
                                    {2, 50, 300}, {9, 700, 3},  {300, 1000, 64}, {1000, 3, 5},
                                    {3, 1000, 64}, {257, 129, 300}};
    for (int t = 0; t < 2; t++)
        for (int kind = 0; kind < 4; kind++) {
            for (size_t s = 0; s < sizeof ks / sizeof ks[0]; s++)
                kernel_case(dtypes[t], ks[s][0], ks[s][1], ks[s][2], kind, 0);
            kernel_case(dtypes[t], 400, 0, 17, kind, 1); /* K(X, X) */
            kernel_case(dtypes[t], 6, 0, 40, kind, 1);
        }
}

static void test_kernel_errors(void)
{
    gsb__tensor Xh = host_random(GSB_F64, 10, 3, 1.0);
    gsb__tensor Xg = to_gpu(&Xh), Kg = gpu_poisoned(GSB_F64, 10, 10);
    gsb__tensor Kbad = gpu_poisoned(GSB_F64, 10, 9), Kf = gpu_poisoned(GSB_F32, 10, 10);
    CHECK_ERR(gpu->ops->kernel(gpu, &Xg, &Xg, 1, 1.0, 0.0, -1, &Kg), GSB_EINVAL,
              "degree of polynomial kernel < 0");
    CHECK_ERR(gpu->ops->kernel(gpu, &Xg, &Xg, 7, 1.0, 0.0, 3, &Kg), GSB_EINTERNAL,
              "unknown kernel kind 7");
    CHECK_ERR(gpu->ops->kernel(gpu, &Xg, &Xg, 2, 1.0, 0.0, 3, &Kbad), GSB_EINTERNAL, "K");
    CHECK_ERR(gpu->ops->kernel(gpu, &Xg, &Xg, 2, 1.0, 0.0, 3, &Kf), GSB_EINTERNAL, "K");
    CHECK_ERR(gpu->ops->kernel(gpu, &Xh, &Xg, 2, 1.0, 0.0, 3, &Kg), GSB_EINTERNAL, "X");
    gsb__tensor_free(&Xh);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&Kg);
    gsb__tensor_free(&Kbad);
    gsb__tensor_free(&Kf);
}

/* ---- bad arguments of the reductions ----------------------------------------------- */

static void test_reduce_errors(void)
{
    gsb__tensor Xh = host_random(GSB_F32, 20, 4, 1.0);
    gsb__tensor Xg = to_gpu(&Xh);
    gsb__tensor v3 = gpu_poisoned(GSB_F32, 3, 1), v4 = gpu_poisoned(GSB_F32, 4, 1);
    gsb__tensor m22 = gpu_poisoned(GSB_F32, 2, 2), w19 = gpu_poisoned(GSB_F32, 19, 1);
    gsb__tensor Yi = host_random(GSB_I32, 20, 4, 5.0), Yig = to_gpu(&Yi);
    gsb__tensor o3 = gpu_poisoned(GSB_F64, 20, 4);
    CHECK_ERR(gpu->ops->col_moments(gpu, &Xg, NULL, &v3, NULL), GSB_EINTERNAL, "mean");
    CHECK_ERR(gpu->ops->col_moments(gpu, &Xg, NULL, &m22, NULL), GSB_EINTERNAL, "mean");
    CHECK_ERR(gpu->ops->col_moments(gpu, &Xg, &w19, &v4, NULL), GSB_EINTERNAL, "w");
    CHECK_ERR(gpu->ops->col_moments(gpu, &Xh, NULL, &v4, NULL), GSB_EINTERNAL, "X");
    CHECK_ERR(gpu->ops->col_moments(gpu, &Yig, NULL, &v4, NULL), GSB_EINTERNAL, "int32");
    CHECK_ERR(gpu->ops->col_minmax(gpu, &Xg, &v4, &v3), GSB_EINTERNAL, "max");
    CHECK_ERR(gpu->ops->row_sqnorms(gpu, &Xg, &v4), GSB_EINTERNAL, "out");
    CHECK_ERR(gpu->ops->col_affine(gpu, &Xg, &v3, NULL, NULL, &Xg), GSB_EINTERNAL, "sub");
    CHECK_ERR(gpu->ops->col_affine(gpu, &Xg, NULL, NULL, NULL, &o3), GSB_EINTERNAL,
              "X's shape and dtype");
    CHECK_ERR(gpu->ops->clip(gpu, &Yig, 0, 1), GSB_EINTERNAL, "float");
    CHECK_ERR(gpu->ops->rand_normal(gpu, &Xh, 1), GSB_EINTERNAL, "t");
    gsb__tensor_free(&Xh);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&v3);
    gsb__tensor_free(&v4);
    gsb__tensor_free(&m22);
    gsb__tensor_free(&w19);
    gsb__tensor_free(&Yi);
    gsb__tensor_free(&Yig);
    gsb__tensor_free(&o3);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20240611);
    RUN(test_col_moments);
    RUN(test_col_moments_empty);
    RUN(test_col_moments_deterministic);
    RUN(test_col_minmax);
    RUN(test_row_sqnorms);
    RUN(test_col_affine);
    RUN(test_clip);
    RUN(test_rand_normal);
    RUN(test_logistic);
    RUN(test_logistic_bad_label);
    RUN(test_kernel);
    RUN(test_kernel_errors);
    RUN(test_reduce_errors);
    return testing_done();
}
