/*
 * test_cpu_kmeanspp.c - the CPU backend's kmeanspp against a naive greedy
 * k-means++ written as scikit-learn's _kmeans_plusplus reads (one n-long
 * cumulative sum per step, numpy's searchsorted, every candidate's distances
 * materialised), on fresh random data in float32 and float64, with and
 * without weights (some exactly zero), in one call or in batches; results
 * repeat bitwise across thread counts; degenerate data; argument errors.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "test_op_helpers.h"

static const gsb__backend *be;

/* ---- the naive reference ------------------------------------------------- */

static double ref_sqdist(const gsb__tensor *X, int64_t a, int64_t b)
{
    double s = 0;
    for (int64_t j = 0; j < X->cols; j++) {
        double t = gsb__tensor_get(X, a * X->cols + j) - gsb__tensor_get(X, b * X->cols + j);
        s += t * t;
    }
    return s;
}

/* first i with cum[i] >= v, n when none (numpy's side='left') */
static int64_t ref_searchsorted(const double *cum, int64_t n, double v)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cum[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* steps greedy choices after `first`, uniforms u; closest and *pot out */
static void ref_kmeanspp(const gsb__tensor *X, const double *w, int64_t first, const double *u,
                         int64_t steps, int64_t trials, double *closest, double *pot,
                         int64_t *chosen)
{
    int64_t n = X->rows;
    double *cum = malloc((size_t)n * sizeof(double));
    double *D = malloc((size_t)(n * trials) * sizeof(double));
    double p = 0;
    for (int64_t i = 0; i < n; i++) {
        closest[i] = ref_sqdist(X, i, first);
        p += (w ? w[i] : 1.0) * closest[i];
    }
    for (int64_t s = 0; s < steps; s++) {
        double acc = 0;
        for (int64_t i = 0; i < n; i++)
            cum[i] = acc += (w ? w[i] : 1.0) * closest[i];
        int64_t cand[64], best = 0;
        double pots[64];
        for (int64_t t = 0; t < trials; t++) {
            int64_t id = ref_searchsorted(cum, n, u[s * trials + t] * p);
            cand[t] = id < n ? id : n - 1;
            pots[t] = 0;
            for (int64_t i = 0; i < n; i++) {
                double d = D[t * n + i] = ref_sqdist(X, i, cand[t]);
                pots[t] += (w ? w[i] : 1.0) * (d < closest[i] ? d : closest[i]);
            }
            if (pots[t] < pots[best])
                best = t;
        }
        for (int64_t i = 0; i < n; i++)
            if (D[best * n + i] < closest[i])
                closest[i] = D[best * n + i];
        p = pots[best];
        chosen[s] = cand[best];
    }
    *pot = p;
    free(cum);
    free(D);
}

/* ---- helpers ------------------------------------------------------------- */

static gsb__tensor make_x(gsb_dtype dt, int64_t n, int64_t d)
{
    return testing_tensor_normal(be, dt, n, d, 1.0, 0.0);
}

/* weights in [0, 2) with about one in ten exactly 0 (never all of them) */
static gsb__tensor make_w(int64_t n)
{
    gsb__tensor t = testing_tensor(be, GSB_F64, n, 1, NULL);
    double *w = t.data;
    for (int64_t i = 0; i < n; i++)
        w[i] = testing_uniform() < 0.1 ? 0.0 : 2.0 * testing_uniform();
    w[0] = 1.0;
    return t;
}

static double *uniforms(int64_t m)
{
    double *u = malloc((size_t)(m > 0 ? m : 1) * sizeof(double));
    for (int64_t i = 0; i < m; i++)
        u[i] = testing_uniform();
    return u;
}

/* The op's answer: the first call chooses `batch` centres, later ones
 * continue (first = -1) in batches of `batch`. */
static int run_op(const gsb__tensor *X, const gsb__tensor *w, int64_t first, const double *u,
                  int64_t steps, int64_t trials, int64_t batch, gsb__tensor *closest,
                  double *pot, int64_t *chosen)
{
    int64_t done = batch < steps ? batch : steps;
    int rc = be->ops->kmeanspp(be, X, w, first, u, done, trials, closest, pot, chosen);
    while (rc == GSB_OK && done < steps) {
        int64_t m = steps - done < batch ? steps - done : batch;
        rc = be->ops->kmeanspp(be, X, w, -1, u + done * trials, m, trials, closest, pot,
                               chosen + done);
        done += m;
    }
    return rc;
}

/* ---- tests --------------------------------------------------------------- */

/* Same rows chosen, closest and potential to rounding, as the reference. */
static void matches_reference(void)
{
    static const int64_t shapes[][3] = {{1, 3, 1}, {7, 1, 5}, {2049, 3, 9}, {4100, 17, 12},
                                        {5000, 64, 6}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int dti = 0; dti < 2; dti++)
            for (int wm = 0; wm < 2; wm++) {
                int64_t n = shapes[sh][0], d = shapes[sh][1], k = shapes[sh][2];
                gsb_dtype dt = dti ? GSB_F64 : GSB_F32;
                int64_t trials = 2 + (int64_t)log((double)k), steps = k - 1;
                gsb__tensor X = make_x(dt, n, d), w = GSB__TENSOR_NONE;
                if (wm)
                    w = make_w(n);
                int64_t first = (int64_t)(testing_uniform() * (double)n);
                double *u = uniforms(steps * trials);
                double *rc_ = malloc((size_t)n * sizeof(double)), rpot = 0, pot = 0;
                int64_t rch[16] = {0}, ch[16] = {0};
                ref_kmeanspp(&X, wm ? w.data : NULL, first, u, steps, trials, rc_, &rpot, rch);
                gsb__tensor closest = testing_tensor(be, GSB_F64, n, 1, NULL);
                CHECK_OK(run_op(&X, wm ? &w : NULL, first, u, steps, trials, 3, &closest, &pot,
                                ch));
                for (int64_t s = 0; s < steps; s++)
                    CHECK(ch[s] == rch[s]);
                CHECK(testing_relerr(closest.data, rc_, n) < 1e-12);
                CHECK_CLOSE(pot, rpot, 1e-12 * fabs(rpot) + 1e-300);
                gsb__tensor_free(&X);
                gsb__tensor_free(&w);
                gsb__tensor_free(&closest);
                free(u);
                free(rc_);
            }
}

/* One call, batches of any size and any thread count: bitwise the same. */
static void repeats_bitwise(void)
{
    int64_t n = 30000, d = 8, steps = 11, trials = 4;
    gsb__tensor X = make_x(GSB_F32, n, d), w = make_w(n);
    double *u = uniforms(steps * trials);
    gsb__tensor c1 = testing_tensor(be, GSB_F64, n, 1, NULL);
    gsb__tensor c2 = testing_tensor(be, GSB_F64, n, 1, NULL);
    double p1 = 0, p2 = 0;
    int64_t ch1[11], ch2[11];
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    CHECK_OK(run_op(&X, &w, 5, u, steps, trials, steps, &c1, &p1, ch1));
    omp_set_num_threads(saved > 1 ? saved : 2);
    CHECK_OK(run_op(&X, &w, 5, u, steps, trials, 4, &c2, &p2, ch2));
    omp_set_num_threads(saved);
    CHECK(memcmp(ch1, ch2, sizeof ch1) == 0);
    CHECK(memcmp(c1.data, c2.data, (size_t)n * sizeof(double)) == 0);
    CHECK(memcmp(&p1, &p2, sizeof p1) == 0);
    /* the fold over X (trial columns not kept) gives bitwise the same */
    int64_t keep = gsb__cpu_kpp_keep_bytes;
    gsb__cpu_kpp_keep_bytes = 0;
    CHECK_OK(run_op(&X, &w, 5, u, steps, trials, 4, &c2, &p2, ch2));
    gsb__cpu_kpp_keep_bytes = keep;
    CHECK(memcmp(ch1, ch2, sizeof ch1) == 0);
    CHECK(memcmp(c1.data, c2.data, (size_t)n * sizeof(double)) == 0);
    CHECK(memcmp(&p1, &p2, sizeof p1) == 0);
    gsb__tensor_free(&X);
    gsb__tensor_free(&w);
    gsb__tensor_free(&c1);
    gsb__tensor_free(&c2);
    free(u);
}

/* Every row the same: every distance 0, so every draw is row 0 and the
 * potential stays 0.  A single row: every draw is that row. */
static void degenerate_data(void)
{
    int64_t n = 3000, d = 4, steps = 5, trials = 3;
    gsb__tensor X = testing_tensor(be, GSB_F64, n, d, NULL);
    for (int64_t i = 0; i < n * d; i++)
        ((double *)X.data)[i] = 1.5;
    double *u = uniforms(steps * trials), pot = -1;
    int64_t ch[5];
    gsb__tensor closest = testing_tensor(be, GSB_F64, n, 1, NULL);
    CHECK_OK(be->ops->kmeanspp(be, &X, NULL, 17, u, steps, trials, &closest, &pot, ch));
    CHECK(pot == 0.0);
    for (int64_t s = 0; s < steps; s++)
        CHECK(ch[s] == 0);
    for (int64_t i = 0; i < n; i++)
        CHECK(((double *)closest.data)[i] == 0.0);
    gsb__tensor one = make_x(GSB_F32, 1, 3);
    gsb__tensor c1 = testing_tensor(be, GSB_F64, 1, 1, NULL);
    CHECK_OK(be->ops->kmeanspp(be, &one, NULL, 0, u, 2, trials, &c1, &pot, ch));
    CHECK(ch[0] == 0 && ch[1] == 0 && pot == 0.0);
    gsb__tensor_free(&X);
    gsb__tensor_free(&closest);
    gsb__tensor_free(&one);
    gsb__tensor_free(&c1);
    free(u);
}

/* A zero-weight row whose distance overflows to inf adds 0, not NaN. */
static void zero_weight_overflow(void)
{
    double xv[4] = {0, 0, 1, 1e300};
    gsb__tensor X = testing_tensor(be, GSB_F64, 4, 1, xv);
    double wv[4] = {1, 1, 1, 0};
    gsb__tensor w = testing_tensor(be, GSB_F64, 4, 1, wv);
    gsb__tensor closest = testing_tensor(be, GSB_F64, 4, 1, NULL);
    double u[2] = {0.9, 0.2}, pot = 0;
    int64_t ch[1];
    CHECK_OK(be->ops->kmeanspp(be, &X, &w, 0, u, 1, 2, &closest, &pot, ch));
    CHECK(!isnan(pot) && pot == 0.0);
    CHECK(ch[0] == 2);
    gsb__tensor_free(&X);
    gsb__tensor_free(&w);
    gsb__tensor_free(&closest);
}

static void argument_errors(void)
{
    gsb__tensor X = make_x(GSB_F32, 10, 2), wf = make_x(GSB_F32, 10, 1);
    gsb__tensor c9 = testing_tensor(be, GSB_F64, 9, 1, NULL);
    gsb__tensor c10 = testing_tensor(be, GSB_F64, 10, 1, NULL);
    double u[4] = {0.1, 0.2, 0.3, 0.4}, pot = 0;
    int64_t ch[2];
    CHECK_ERR(be->ops->kmeanspp(be, &X, NULL, 0, u, 1, 2, &c9, &pot, ch), GSB_EINTERNAL,
              "closest");
    CHECK_ERR(be->ops->kmeanspp(be, &X, &wf, 0, u, 1, 2, &c10, &pot, ch), GSB_EINTERNAL,
              "w has dtype");
    CHECK_ERR(be->ops->kmeanspp(be, &X, NULL, 0, u, 1, 0, &c10, &pot, ch), GSB_EINTERNAL,
              "trials");
    CHECK_ERR(be->ops->kmeanspp(be, &X, NULL, 10, u, 1, 2, &c10, &pot, ch), GSB_EINTERNAL,
              "first");
    gsb__tensor_free(&X);
    gsb__tensor_free(&wf);
    gsb__tensor_free(&c9);
    gsb__tensor_free(&c10);
}

int main(void)
{
    be = gsb__cpu_backend();
    testing_seed(20261122);
    RUN(matches_reference);
    RUN(repeats_bitwise);
    RUN(degenerate_data);
    RUN(zero_weight_overflow);
    RUN(argument_errors);
    return testing_done();
}
