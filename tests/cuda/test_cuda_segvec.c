/*
 * test_cuda_segvec.c - the CUDA backend's segmented vector ops seg_dots,
 * seg_combine and seg_normalize (cuda_segvec.cu) against their CPU twins
 * (cpu_segvec.c).
 *
 * Fresh N(0, 1) V (m x n) and x, segment lengths random (some empty, one
 * segment of everything, one of 1,000,003 elements so seg_dots cuts it into
 * slices and adds their partials, MNIST's 8 x 8750 with m = 27), outputs
 * poisoned with NaN: C, Y and y within 1e-10 of the CPU's relative to
 * their largest element (both sum in double, in different orders), the
 * norms within 1e-12 relative.  seg_combine with l = 1 (alpha -1, beta 1:
 * Lanczos's projection) and l = 4 (beta 0 over a NaN Y: the Ritz vectors);
 * seg_normalize in place and out of place, an empty or zero segment giving
 * y = 0 and norm 0.  Bad arguments are errors and the GPU still works after
 * them.  Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdlib.h>

#include "cuda_testing.h"

/* K + 1 ascending offsets from 0 to n: random cuts (repeated cuts: empty segments) */
static gsb__tensor random_seg(int64_t n, int64_t K)
{
    gsb__tensor s;
    if (gsb__tensor_alloc(cpu, GSB_I64, K + 1, 1, &s) != GSB_OK)
        abort();
    int64_t *v = s.data;
    v[0] = 0;
    v[K] = n;
    for (int64_t c = 1; c < K; c++) /* sorted by insertion: K is small */
    {
        int64_t cut = (int64_t)(testing_uniform() * (double)(n + 1));
        int64_t at = c;
        while (at > 1 && v[at - 1] > cut) {
            v[at] = v[at - 1];
            at--;
        }
        v[at] = cut;
    }
    return s;
}

/* K + 1 offsets of K equal segments of len */
static gsb__tensor equal_seg(int64_t K, int64_t len)
{
    gsb__tensor s;
    if (gsb__tensor_alloc(cpu, GSB_I64, K + 1, 1, &s) != GSB_OK)
        abort();
    for (int64_t c = 0; c <= K; c++)
        ((int64_t *)s.data)[c] = c * len;
    return s;
}

static void dots_and_combine(int64_t m, int64_t n, const gsb__tensor *seg, int64_t l)
{
    const int64_t K = seg->rows - 1;
    int before = case_begin();
    gsb__tensor V = host_random(GSB_F64, m, n, 1.0), x = host_random(GSB_F64, 1, n, 1.0);
    gsb__tensor gV = to_gpu(&V), gx = to_gpu(&x), gs = to_gpu(seg);
    /* seg_dots */
    gsb__tensor C = host_poisoned(GSB_F64, m, K), gC = gpu_poisoned(GSB_F64, m, K);
    CHECK_OK(cpu->ops->seg_dots(cpu, &V, &x, seg, &C));
    CHECK_OK(gpu->ops->seg_dots(gpu, &gV, &gx, &gs, &gC));
    CHECK_MATCH(&gC, &C, 1e-10);
    /* seg_combine, l = 1: x -= V C (Lanczos's projection) */
    gsb__tensor gx2 = to_gpu(&x);
    CHECK_OK(cpu->ops->seg_combine(cpu, -1.0, &C, &V, seg, 1.0, &x));
    CHECK_OK(gpu->ops->seg_combine(gpu, -1.0, &gC, &gV, &gs, 1.0, &gx2));
    CHECK_MATCH(&gx2, &x, 1e-10);
    /* seg_combine, l rows over a NaN Y with beta 0 */
    gsb__tensor W = host_random(GSB_F64, m, l * K, 1.0), gW = to_gpu(&W);
    gsb__tensor Y = host_poisoned(GSB_F64, l, n), gY = gpu_poisoned(GSB_F64, l, n);
    CHECK_OK(cpu->ops->seg_combine(cpu, 0.5, &W, &V, seg, 0.0, &Y));
    CHECK_OK(gpu->ops->seg_combine(gpu, 0.5, &gW, &gV, &gs, 0.0, &gY));
    CHECK_MATCH(&gY, &Y, 1e-10);
    CASE_END(before, "m %lld, n %lld, K %lld, l %lld", (long long)m, (long long)n, (long long)K,
             (long long)l);
    gsb__tensor *all[] = {&V, &x, &gV, &gx, &gs, &C, &gC, &gx2, &W, &gW, &Y, &gY};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static void normalize_case(int64_t n, const gsb__tensor *seg, int zero_first)
{
    const int64_t K = seg->rows - 1;
    int before = case_begin();
    gsb__tensor x = host_random(GSB_F64, n, 1, 3.0);
    if (zero_first) /* segment 0 all zero */
        for (int64_t e = ((int64_t *)seg->data)[0]; e < ((int64_t *)seg->data)[1]; e++)
            ((double *)x.data)[e] = 0.0;
    gsb__tensor y = host_poisoned(GSB_F64, n, 1), nrm = host_poisoned(GSB_F64, K, 1);
    gsb__tensor gx = to_gpu(&x), gs = to_gpu(seg), gy = gpu_poisoned(GSB_F64, n, 1);
    gsb__tensor gn = gpu_poisoned(GSB_F64, K, 1);
    CHECK_OK(cpu->ops->seg_normalize(cpu, &x, seg, &y, &nrm));
    CHECK_OK(gpu->ops->seg_normalize(gpu, &gx, &gs, &gy, &gn));
    CHECK_MATCH(&gy, &y, 1e-10);
    CHECK_MATCH(&gn, &nrm, 1e-12);
    if (zero_first)
        CHECK(gsb__tensor_get(&nrm, 0) == 0.0);
    /* in place */
    CHECK_OK(gpu->ops->seg_normalize(gpu, &gx, &gs, &gx, &gn));
    CHECK_MATCH(&gx, &y, 1e-10);
    CHECK_MATCH(&gn, &nrm, 1e-12);
    CASE_END(before, "n %lld, K %lld, zero_first %d", (long long)n, (long long)K, zero_first);
    gsb__tensor *all[] = {&x, &y, &nrm, &gx, &gs, &gy, &gn};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

static void test_seg_ops_match_cpu(void)
{
    testing_seed(91);
    gsb__tensor s;
    s = equal_seg(1, 1); /* one element */
    dots_and_combine(1, 1, &s, 1);
    normalize_case(1, &s, 0);
    gsb__tensor_free(&s);
    s = equal_seg(8, 8750); /* MNIST's components */
    dots_and_combine(27, 70000, &s, 1);
    dots_and_combine(27, 70000, &s, 15);
    normalize_case(70000, &s, 1);
    gsb__tensor_free(&s);
    s = equal_seg(1, 1000003); /* one big segment: slices */
    dots_and_combine(3, 1000003, &s, 2);
    normalize_case(1000003, &s, 0);
    gsb__tensor_free(&s);
    s = random_seg(200000, 3); /* slices of unequal segments */
    dots_and_combine(5, 200000, &s, 3);
    normalize_case(200000, &s, 0);
    gsb__tensor_free(&s);
    s = random_seg(5000, 40); /* many segments, some empty */
    dots_and_combine(4, 5000, &s, 2);
    normalize_case(5000, &s, 1);
    gsb__tensor_free(&s);
}

static void test_seg_ops_bad_arguments(void)
{
    testing_seed(93);
    gsb__tensor seg = equal_seg(2, 50), one = equal_seg(0, 0);
    gsb__tensor V = host_random(GSB_F64, 3, 100, 1.0), x = host_random(GSB_F64, 100, 1, 1.0);
    gsb__tensor gV = to_gpu(&V), gx = to_gpu(&x), gs = to_gpu(&seg), g1 = to_gpu(&one);
    gsb__tensor gC = gpu_poisoned(GSB_F64, 3, 2), gCbad = gpu_poisoned(GSB_F64, 3, 3);
    gsb__tensor gx32 = gpu_poisoned(GSB_F32, 100, 1), gn = gpu_poisoned(GSB_F64, 2, 1);
    gsb__tensor gY = gpu_poisoned(GSB_F64, 1, 100);
    CHECK_ERR(gpu->ops->seg_dots(gpu, &gV, &gx, &gs, &gCbad), GSB_EINTERNAL, "C");
    CHECK_ERR(gpu->ops->seg_dots(gpu, &gV, &gx32, &gs, &gC), GSB_EINTERNAL, "x");
    CHECK_ERR(gpu->ops->seg_dots(gpu, &V, &gx, &gs, &gC), GSB_EINTERNAL, "V");
    CHECK_ERR(gpu->ops->seg_dots(gpu, &gV, &gx, &g1, &gC), GSB_EINTERNAL, "seg");
    CHECK_ERR(gpu->ops->seg_combine(gpu, 1.0, &gCbad, &gV, &gs, 0.0, &gY), GSB_EINTERNAL, "C");
    CHECK_ERR(gpu->ops->seg_combine(gpu, 1.0, &gC, &gV, &gs, 0.0, &gx), GSB_EINTERNAL, "Y");
    CHECK_ERR(gpu->ops->seg_normalize(gpu, &gx, &gs, &gx32, &gn), GSB_EINTERNAL, "y");
    CHECK_ERR(gpu->ops->seg_normalize(gpu, &gx, &gs, &gx, &gCbad), GSB_EINTERNAL, "nrm");
    /* the GPU still works */
    gsb__tensor C = host_poisoned(GSB_F64, 3, 2);
    CHECK_OK(cpu->ops->seg_dots(cpu, &V, &x, &seg, &C));
    CHECK_OK(gpu->ops->seg_dots(gpu, &gV, &gx, &gs, &gC));
    CHECK_MATCH(&gC, &C, 1e-10);
    gsb__tensor *all[] = {&seg, &one, &V, &x, &gV, &gx, &gs, &g1, &gC, &gCbad, &gx32, &gn, &gY, &C};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gsb__tensor_free(all[i]);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_seg_ops_match_cpu);
    RUN(test_seg_ops_bad_arguments);
    return testing_done();
}
