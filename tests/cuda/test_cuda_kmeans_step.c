/*
 * test_cuda_kmeans_step.c - the GPU's kmeans_step (one Lloyd iteration in
 * one pass over X, cuda_kmeans_step.cu) against its CPU twin: argmin_sqdist,
 * then segment_sum by the labels, then sum_i w_i mind_i.  Labels equal the
 * CPU's except on near ties (then the GPU's centre is as near within 1e-5
 * relative); distances are the exact ones to the chosen centre; sums and
 * counts are the CPU's segment_sum of X by the GPU's labels; the inertia is
 * the weighted sum of the GPU's distances; a second run repeats every bit.
 * Shapes cover the fused kernel (every tile shape, several row blocks per
 * block, 32-column units) and the unfused fallback (partial sums too large
 * for shared memory).  Needs a GPU: fails loudly without one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"

static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};

/* How a case's X is drawn: normal; integers in [0, 5) (exact ties between
 * centres, which go to the smaller index); rows half-way between two
 * centres (near ties). */
enum { X_NORMAL, X_INTS, X_MIDPOINTS };

static gsb__tensor case_x(gsb_dtype dt, int64_t n, int64_t d, const gsb__tensor *C, int mode)
{
    gsb__tensor X = host_random(dt, n, d, 1.0);
    int64_t k = C->rows;
    for (int64_t i = 0; i < n && mode != X_NORMAL; i++)
        for (int64_t j = 0; j < d; j++) {
            double v = floor(testing_uniform() * 5);
            if (mode == X_MIDPOINTS) {
                int64_t a = i % k, b = (i * 7 + 1) % k;
                v = 0.5 * (gsb__tensor_get(C, a * d + j) + gsb__tensor_get(C, b * d + j));
            }
            gsb__tensor_set(&X, i * d + j, v);
        }
    return X;
}

static double sqdist(const gsb__tensor *X, int64_t i, const gsb__tensor *C, int64_t j)
{
    double s = 0;
    for (int64_t c = 0; c < X->cols; c++) {
        double t = gsb__tensor_get(X, i * X->cols + c) - gsb__tensor_get(C, j * C->cols + c);
        s += t * t;
    }
    return s;
}

/* The GPU's labels (lh) and distances (mh) against the CPU's labels (lc). */
static void check_assignment(const gsb__tensor *X, const gsb__tensor *C, const gsb__tensor *lh,
                             const gsb__tensor *mh, const gsb__tensor *lc, int exact_ties)
{
    int64_t n = X->rows, k = C->rows, bad_label = 0, not_tie = 0, bad_dist = 0, differ = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t gl = (int64_t)gsb__tensor_get(lh, i), cl = (int64_t)gsb__tensor_get(lc, i);
        if (gl < 0 || gl >= k) {
            bad_label++;
            continue;
        }
        double dg = sqdist(X, i, C, gl);
        double want = X->dtype == GSB_F32 ? (double)(float)dg : dg;
        double got = gsb__tensor_get(mh, i);
        if (!(fabs(got - want) <= (X->dtype == GSB_F32 ? 1e-6 : 1e-12) * fmax(1.0, want)))
            bad_dist++;
        if (gl != cl) {
            differ++;
            if (!(dg <= sqdist(X, i, C, cl) * (1.0 + 1e-5) + 1e-12))
                not_tie++;
        }
    }
    CHECK(bad_label == 0);
    CHECK(bad_dist == 0);
    CHECK(not_tie == 0);
    if (exact_ties) /* integer data: distances are exact, ties go to the smaller index */
        CHECK(differ == 0);
    if (differ)
        printf("    kmeans_step: %lld of %lld labels differ from the CPU's, all near ties\n",
               (long long)differ, (long long)n);
}

typedef struct {
    gsb__tensor lab, mind, sums, counts, inertia; /* on the GPU */
} step_out;

static step_out run_gpu(const gsb__tensor *Xg, const gsb__tensor *Cg, const gsb__tensor *wg,
                        gsb_dtype dt, int64_t n, int64_t d, int64_t k)
{
    step_out o;
    o.lab = gpu_poisoned(GSB_I32, n, 1);
    o.mind = gpu_poisoned(dt, n, 1);
    o.sums = gpu_poisoned(GSB_F64, k, d);
    o.counts = gpu_poisoned(GSB_F64, k, 1);
    o.inertia = gpu_poisoned(GSB_F64, 1, 1);
    CHECK_OK(gpu->ops->kmeans_step(gpu, Xg, Cg, wg, &o.lab, &o.mind, &o.sums, &o.counts,
                                   &o.inertia));
    return o;
}

static void out_free(step_out *o)
{
    gsb__tensor_free(&o->lab);
    gsb__tensor_free(&o->mind);
    gsb__tensor_free(&o->sums);
    gsb__tensor_free(&o->counts);
    gsb__tensor_free(&o->inertia);
}

/* Two GPU tensors hold the same bits. */
static int same_bits(const gsb__tensor *a, const gsb__tensor *b)
{
    gsb__tensor ha = from_gpu(a), hb = from_gpu(b);
    size_t bytes = (size_t)(a->rows * a->cols) * gsb_dtype_size(a->dtype);
    int same = a->rows == b->rows && a->cols == b->cols && memcmp(ha.data, hb.data, bytes) == 0;
    gsb__tensor_free(&ha);
    gsb__tensor_free(&hb);
    return same;
}

static void step_case(gsb_dtype dt, int64_t n, int64_t d, int64_t k, int weighted, int xmode)
{
    int before = case_begin();
    gsb__tensor C = host_random(dt, k, d, 1.0);
    if (xmode == X_INTS)
        for (int64_t i = 0; i < k * d; i++)
            gsb__tensor_set(&C, i, floor(testing_uniform() * 5));
    gsb__tensor X = case_x(dt, n, d, &C, xmode);
    /* non-negative weights, as KMeans passes them (the inertia then has no cancellation) */
    gsb__tensor w = weighted ? host_random(GSB_F64, n, 1, 1.0) : GSB__TENSOR_NONE;
    for (int64_t i = 0; weighted && i < n; i++)
        gsb__tensor_set(&w, i, fabs(gsb__tensor_get(&w, i)));
    gsb__tensor Xg = to_gpu(&X), Cg = to_gpu(&C);
    gsb__tensor wg = weighted ? to_gpu(&w) : GSB__TENSOR_NONE;

    step_out g = run_gpu(&Xg, &Cg, weighted ? &wg : NULL, dt, n, d, k);
    gsb__tensor lh = from_gpu(&g.lab), mh = from_gpu(&g.mind);

    /* the CPU twin: its own assignment, then the sums by the GPU's labels */
    gsb__tensor lc = host_poisoned(GSB_I32, n, 1), mc = host_poisoned(dt, n, 1);
    CHECK_OK(cpu->ops->argmin_sqdist(cpu, &X, &C, &lc, &mc));
    check_assignment(&X, &C, &lh, &mh, &lc, xmode == X_INTS);
    gsb__tensor sc = host_poisoned(GSB_F64, k, d), cc = host_poisoned(GSB_F64, k, 1);
    CHECK_OK(cpu->ops->segment_sum(cpu, &X, &lh, weighted ? &w : NULL, &sc, &cc));
    CHECK_MATCH(&g.sums, &sc, 1e-10);
    CHECK_MATCH(&g.counts, &cc, 1e-10);
    gsb__tensor ic = host_poisoned(GSB_F64, 1, 1);
    double inertia = 0;
    for (int64_t i = 0; i < n; i++)
        inertia += (weighted ? gsb__tensor_get(&w, i) : 1.0) * gsb__tensor_get(&mh, i);
    gsb__tensor_set(&ic, 0, inertia);
    CHECK_MATCH_FLOOR(&g.inertia, &ic, 1e-10, 1e-300);

    /* deterministic: a second run gives the same bits */
    step_out g2 = run_gpu(&Xg, &Cg, weighted ? &wg : NULL, dt, n, d, k);
    CHECK(same_bits(&g.lab, &g2.lab));
    CHECK(same_bits(&g.mind, &g2.mind));
    CHECK(same_bits(&g.sums, &g2.sums));
    CHECK(same_bits(&g.counts, &g2.counts));
    CHECK(same_bits(&g.inertia, &g2.inertia));

    out_free(&g);
    out_free(&g2);
    gsb__tensor_free(&lh);
    gsb__tensor_free(&mh);
    gsb__tensor_free(&lc);
    gsb__tensor_free(&mc);
    gsb__tensor_free(&sc);
    gsb__tensor_free(&cc);
    gsb__tensor_free(&ic);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&Cg);
    gsb__tensor_free(&wg);
    gsb__tensor_free(&X);
    gsb__tensor_free(&C);
    gsb__tensor_free(&w);
    CASE_END(before, "kmeans_step %s n=%lld d=%lld k=%lld weights=%s x=%s", gsb_dtype_name(dt),
             (long long)n, (long long)d, (long long)k, weighted ? "float64" : "none",
             xmode == X_NORMAL ? "normal" : (xmode == X_INTS ? "ints" : "midpoints"));
}

static void test_kmeans_step(void)
{
    /* k <= 32, <= 64 and > 64 take argmin's three float32 tile shapes (two
     * for float64); 200000 rows give blocks several row blocks each (at most
     * 512 blocks); d = 33 and 257: a last 32-column unit of one column;
     * 2000 x 300, k = 700: partial sums too large for shared memory (the
     * unfused fallback); d = 0: counts only */
    static const int64_t shapes[][3] = {{1, 1, 1},      {1000, 3, 5},    {3001, 64, 100},
                                        {4097, 33, 17}, {777, 16, 64},   {5000, 8, 129},
                                        {1537, 257, 33}, {200000, 16, 100}, {2000, 300, 700},
                                        {50, 0, 3}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int weighted = 0; weighted < 2; weighted++)
                step_case(dtypes[t], shapes[s][0], shapes[s][1], shapes[s][2], weighted,
                          X_NORMAL);
}

/* Exact ties (integer data) and near ties (rows half-way between two centres). */
static void test_kmeans_step_ties(void)
{
    for (int t = 0; t < 2; t++) {
        step_case(dtypes[t], 3000, 2, 40, 0, X_INTS);
        step_case(dtypes[t], 20000, 64, 100, 1, X_INTS);
        step_case(dtypes[t], 3000, 64, 100, 0, X_MIDPOINTS);
        step_case(dtypes[t], 3000, 300, 700, 1, X_MIDPOINTS);
    }
}

static void test_kmeans_step_errors(void)
{
    int64_t n = 12, d = 3, k = 4;
    gsb__tensor X = host_random(GSB_F32, n, d, 1.0), C = host_random(GSB_F32, k, d, 1.0);
    gsb__tensor Xg = to_gpu(&X), Cg = to_gpu(&C), C0 = gsb__tensor_rows(&Cg, 0, 0);
    gsb__tensor lab = gpu_poisoned(GSB_I32, n, 1), mind = gpu_poisoned(GSB_F32, n, 1);
    gsb__tensor sums = gpu_poisoned(GSB_F64, k, d), counts = gpu_poisoned(GSB_F64, k, 1);
    gsb__tensor inertia = gpu_poisoned(GSB_F64, 1, 1), wf = gpu_poisoned(GSB_F32, n, 1);
    /* no centres; float32 weights; counts of the wrong length; X on the host */
    CHECK(gpu->ops->kmeans_step(gpu, &Xg, &C0, NULL, &lab, &mind, &sums, &counts, &inertia) ==
          GSB_EINVAL);
    CHECK(gpu->ops->kmeans_step(gpu, &Xg, &Cg, &wf, &lab, &mind, &sums, &counts, &inertia) !=
          GSB_OK);
    CHECK(gpu->ops->kmeans_step(gpu, &Xg, &Cg, NULL, &lab, &mind, &sums, &inertia, &inertia) !=
          GSB_OK);
    CHECK(gpu->ops->kmeans_step(gpu, &X, &Cg, NULL, &lab, &mind, &sums, &counts, &inertia) !=
          GSB_OK);
    gsb__tensor_free(&lab);
    gsb__tensor_free(&mind);
    gsb__tensor_free(&sums);
    gsb__tensor_free(&counts);
    gsb__tensor_free(&inertia);
    gsb__tensor_free(&wf);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&Cg);
    gsb__tensor_free(&X);
    gsb__tensor_free(&C);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20261126);
    if (!gpu->ops->kmeans_step) {
        fprintf(stderr, "the CUDA backend has no kmeans_step\n");
        return 1;
    }
    RUN(test_kmeans_step);
    RUN(test_kmeans_step_ties);
    RUN(test_kmeans_step_errors);
    return testing_done();
}
