/*
 * test_cuda_vecnorm.c - the CUDA backend's vec_normalize (cuda_vecnorm.cu)
 * against its CPU twin (cpu_vecnorm.c).
 *
 * Fresh N(0, s^2) vectors of 1 to 1,000,003 elements (one partial block,
 * the capped grid with its stride), float32 and float64, outputs poisoned
 * with NaN: y within 1e-12 (float64) / 1e-6 (float32) of the CPU's relative
 * to its largest element and |x| within 1e-12 relative (both sum squares in
 * double, in different orders).  In place (y = x) gives the same; a zero
 * vector gives y = 0 and |x| = 0; bad arguments are errors and the GPU still
 * works after them.  Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdlib.h>

#include "cuda_testing.h"

/* |x| the op wrote into the one-element GPU tensor */
static double norm_of(const gsb__tensor *g)
{
    gsb__tensor h = from_gpu(g);
    double v = gsb__tensor_get(&h, 0);
    gsb__tensor_free(&h);
    return v;
}

static void normalize_case(int64_t n, gsb_dtype dt, double scale)
{
    gsb__tensor x = host_random(dt, n, 1, scale), y = host_poisoned(dt, n, 1);
    gsb__tensor nrm = host_poisoned(GSB_F64, 1, 1);
    gsb__tensor gx = to_gpu(&x), gy = gpu_poisoned(dt, n, 1), gn = gpu_poisoned(GSB_F64, 1, 1);
    const double tol = dt == GSB_F32 ? 1e-6 : 1e-12;
    CHECK_OK(cpu->ops->vec_normalize(cpu, &x, &y, &nrm));
    CHECK_OK(gpu->ops->vec_normalize(gpu, &gx, &gy, &gn));
    CHECK_MATCH(&gy, &y, tol);
    double want = gsb__tensor_get(&nrm, 0), got = norm_of(&gn);
    CHECK(want > 0 && fabs(got - want) <= 1e-12 * want);
    /* in place: the same values */
    gsb__tensor gi = to_gpu(&x);
    CHECK_OK(gpu->ops->vec_normalize(gpu, &gi, &gi, &gn));
    CHECK_MATCH(&gi, &y, tol);
    CHECK(fabs(norm_of(&gn) - want) <= 1e-12 * want);
    gsb__tensor_free(&gi);
    gsb__tensor_free(&x);
    gsb__tensor_free(&y);
    gsb__tensor_free(&nrm);
    gsb__tensor_free(&gx);
    gsb__tensor_free(&gy);
    gsb__tensor_free(&gn);
}

static void test_normalize_matches_cpu(void)
{
    testing_seed(71);
    const int64_t sizes[] = {1, 255, 257, 8750, 70001, 1000003};
    for (int dt = 0; dt < 2; dt++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            normalize_case(sizes[i], dt ? GSB_F64 : GSB_F32, i % 2 ? 1e-3 : 7.0);
}

static void test_normalize_zero(void)
{
    gsb__tensor z;
    CHECK_OK(gsb__tensor_zeros(cpu, GSB_F64, 1000, 1, &z));
    gsb__tensor gz = to_gpu(&z), gy = gpu_poisoned(GSB_F64, 1000, 1);
    gsb__tensor gn = gpu_poisoned(GSB_F64, 1, 1);
    CHECK_OK(gpu->ops->vec_normalize(gpu, &gz, &gy, &gn));
    CHECK_MATCH(&gy, &z, 0.0);
    CHECK(norm_of(&gn) == 0.0);
    gsb__tensor_free(&z);
    gsb__tensor_free(&gz);
    gsb__tensor_free(&gy);
    gsb__tensor_free(&gn);
}

static void test_normalize_bad_arguments(void)
{
    testing_seed(73);
    gsb__tensor x = host_random(GSB_F64, 100, 1, 1.0);
    gsb__tensor gx = to_gpu(&x), gy = gpu_poisoned(GSB_F64, 100, 1);
    gsb__tensor gy32 = gpu_poisoned(GSB_F32, 100, 1), gshort = gpu_poisoned(GSB_F64, 99, 1);
    gsb__tensor gn = gpu_poisoned(GSB_F64, 1, 1), gn32 = gpu_poisoned(GSB_F32, 1, 1);
    CHECK_ERR(gpu->ops->vec_normalize(gpu, &gx, &gy32, &gn), GSB_EINTERNAL, "y");
    CHECK_ERR(gpu->ops->vec_normalize(gpu, &gx, &gshort, &gn), GSB_EINTERNAL, "y");
    CHECK_ERR(gpu->ops->vec_normalize(gpu, &gx, &gy, &gn32), GSB_EINTERNAL, "nrm");
    CHECK_ERR(gpu->ops->vec_normalize(gpu, &x, &gy, &gn), GSB_EINTERNAL, "x");
    /* the GPU still works */
    CHECK_OK(gpu->ops->vec_normalize(gpu, &gx, &gy, &gn));
    CHECK(fabs(norm_of(&gn) - 10.0) < 5.0); /* |N(0, I_100)| is about 10 */
    gsb__tensor_free(&x);
    gsb__tensor_free(&gx);
    gsb__tensor_free(&gy);
    gsb__tensor_free(&gy32);
    gsb__tensor_free(&gshort);
    gsb__tensor_free(&gn);
    gsb__tensor_free(&gn32);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_normalize_matches_cpu);
    RUN(test_normalize_zero);
    RUN(test_normalize_bad_arguments);
    return testing_done();
}
