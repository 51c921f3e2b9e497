/*
 * test_cuda_argmin_tc.c - argmin_sqdist's tensor-core ranking
 * (cuda_argmin_tc.cu) against the exact kernel (GSB_ARGMIN=exact) bit for
 * bit, in both modes (3xtf32, the default, and tf32), and against the CPU
 * twin as test_cuda_distance.c does (labels except near ties, distances the
 * exact ones; NaN never passes).
 *
 * Fresh random data in float32 and float64; shapes with k = 1, k and d not
 * multiples of the tiles (8), n not a multiple of the 32-row unit, d past
 * what the tiles take (the exact kernel then), X only element-aligned; and
 * adversarial data: centres duplicated bit for bit, rows at the midpoint of
 * two centres (equidistant up to rounding), rows equal to centres, rows of
 * huge and tiny magnitude, a large common offset (most rows near ties for
 * the bound: the exact path), integer data with exact ties, and non-finite
 * rows; and that the tiles decide most rows of ordinary data while near ties
 * reach the exact path (GSB_ARGMIN_STATS).  Needs a GPU.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"
#include "distance_reference.h"

static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};
static const char *const modes[2] = {"3xtf32", "tf32"};

/* labels and mind of X against C (on the GPU) with GSB_ARGMIN = mode, on the host. */
static void run_mode(const char *mode, const gsb__tensor *Xg, const gsb__tensor *Cg,
                     gsb__tensor *lab, gsb__tensor *mind)
{
    setenv("GSB_ARGMIN", mode, 1);
    int64_t n = Xg->rows;
    gsb__tensor lg = gpu_poisoned(GSB_I32, n, 1), mg = gpu_poisoned(Xg->dtype, n, 1);
    CHECK_OK(gpu->ops->argmin_sqdist(gpu, Xg, Cg, &lg, &mg));
    unsetenv("GSB_ARGMIN");
    *lab = from_gpu(&lg);
    *mind = from_gpu(&mg);
    gsb__tensor_free(&lg);
    gsb__tensor_free(&mg);
}

/* Elements of a and b (same shape and dtype) whose bits differ. */
static int64_t bits_differ(const gsb__tensor *a, const gsb__tensor *b, const char *what,
                           const char *mode)
{
    size_t es = gsb_dtype_size(a->dtype);
    int64_t n = a->rows * a->cols, bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)a->data + i * es, (const char *)b->data + i * es, es) != 0) {
            if (bad < 3)
                printf("    %s %s row %lld: %.17g against the exact kernel's %.17g\n", mode,
                       what, (long long)i, gsb__tensor_get(a, i), gsb__tensor_get(b, i));
            bad++;
        }
    return bad;
}

static double sq_norm(const gsb__tensor *A, int64_t i)
{
    double s = 0.0;
    for (int64_t q = 0; q < A->cols; q++) {
        double v = gsb__tensor_get(A, i * A->cols + q);
        s += v * v;
    }
    return s;
}

/* The CPU twin's check (test_cuda_distance.c's argmin_check): finite rows only. */
static void check_cpu(const gsb__tensor *X, const gsb__tensor *C, const gsb__tensor *lab,
                      const gsb__tensor *mind)
{
    gsb_dtype dt = X->dtype;
    int64_t n = X->rows, k = C->rows;
    gsb__tensor lc = host_poisoned(GSB_I32, n, 1), mc = host_poisoned(dt, n, 1);
    CHECK_OK(cpu->ops->argmin_sqdist(cpu, X, C, &lc, &mc));
    int64_t bad_label = 0, bad_dist = 0, not_tie = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t gl = (int64_t)gsb__tensor_get(lab, i), cl = (int64_t)gsb__tensor_get(&lc, i);
        if (gl < 0 || gl >= k) {
            bad_label++;
            continue;
        }
        double dg = ref_dist(X, i, C, gl, GSB__METRIC_SQEUCLIDEAN);
        double want = dt == GSB_F32 ? (double)(float)dg : dg, got = gsb__tensor_get(mind, i);
        if (!(fabs(got - want) <= (dt == GSB_F32 ? 1e-6 : 1e-12) * fmax(1.0, want)))
            bad_dist++;
        if (gl != cl) {
            double dc = ref_dist(X, i, C, cl, GSB__METRIC_SQEUCLIDEAN);
            /* near ties: within the expansion's error, relative to ||x||^2 + ||c||^2 */
            double scale = sq_norm(X, i) + sq_norm(C, cl) + 1e-300;
            if (!(dg <= dc + 1e-5 * scale))
                not_tie++;
        }
    }
    CHECK(bad_label == 0);
    CHECK(bad_dist == 0);
    CHECK(not_tie == 0);
    gsb__tensor_free(&lc);
    gsb__tensor_free(&mc);
}

/* Both tensor-core modes on Xg, Cg (X, C on the GPU) against the exact
 * kernel, bit for bit; cpu_check: also the CPU twin (finite, moderate data). */
static void compare_on(const gsb__tensor *Xg, const gsb__tensor *Cg, const gsb__tensor *X,
                       const gsb__tensor *C, int cpu_check)
{
    gsb__tensor le, me;
    run_mode("exact", Xg, Cg, &le, &me);
    for (int m = 0; m < 2; m++) {
        gsb__tensor lt, mt;
        run_mode(modes[m], Xg, Cg, &lt, &mt);
        CHECK(bits_differ(&lt, &le, "label", modes[m]) == 0);
        CHECK(bits_differ(&mt, &me, "distance", modes[m]) == 0);
        if (cpu_check)
            check_cpu(X, C, &lt, &mt);
        gsb__tensor_free(&lt);
        gsb__tensor_free(&mt);
    }
    gsb__tensor_free(&le);
    gsb__tensor_free(&me);
}

/* compare_on with X and C uploaded. */
static void compare_all(const gsb__tensor *X, const gsb__tensor *C, int cpu_check)
{
    gsb__tensor Xg = to_gpu(X), Cg = to_gpu(C);
    compare_on(&Xg, &Cg, X, C, cpu_check);
    gsb__tensor_free(&Xg);
    gsb__tensor_free(&Cg);
}


static void set_row(gsb__tensor *X, int64_t i, const gsb__tensor *C, int64_t j)
{
    int64_t d = X->cols;
    for (int64_t q = 0; q < d; q++)
        gsb__tensor_set(X, i * d + q, gsb__tensor_get(C, j * d + q));
}

/* Random shapes: k = 1, k and d off the tiles, n off the unit (the last
 * unit's staging), d past the tiles; every chunk width of the kernel: 4
 * n-tiles (k <= 32), 5 (k = 33), 6 (k = 129), 7 (k = 100), 8 (k = 256). */
static void test_shapes(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1},      {1000, 3, 1},   {4097, 64, 100},
                                        {3001, 7, 13},  {2049, 17, 33}, {1025, 64, 256},
                                        {777, 130, 9},  {333, 600, 20}, {5000, 8, 129},
                                        {31, 64, 100},  {65, 1, 3}};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int before = case_begin();
            gsb_dtype dt = dtypes[t];
            int64_t n = shapes[s][0], d = shapes[s][1], k = shapes[s][2];
            gsb__tensor X = host_random(dt, n, d, 1.0), C = host_random(dt, k, d, 1.0);
            compare_all(&X, &C, 1);
            gsb__tensor_free(&X);
            gsb__tensor_free(&C);
            CASE_END(before, "argmin tc %s n=%lld d=%lld k=%lld", gsb_dtype_name(dt),
                     (long long)n, (long long)d, (long long)k);
        }
}

/*
 * X at an address that is element-aligned only (a row range of another
 * tensor, or a caller's array, can start anywhere): the tiles then read it
 * element by element rather than 16 bytes at a time.  d = 64 would take
 * 16-byte loads where aligned; n off the unit.
 */
static void test_misaligned(void)
{
    for (int t = 0; t < 2; t++) {
        int before = case_begin();
        gsb_dtype dt = dtypes[t];
        int64_t n = 3001, d = 64, k = 100;
        size_t es = gsb_dtype_size(dt);
        gsb__tensor X = host_random(dt, n, d, 1.0), C = host_random(dt, k, d, 1.0);
        gsb__tensor big = host_random(dt, 1, n * d + 1, 1.0); /* X from element 1 on */
        memcpy((char *)big.data + es, X.data, (size_t)(n * d) * es);
        gsb__tensor bigg = to_gpu(&big), Cg = to_gpu(&C), Xg = bigg;
        Xg.data = (char *)bigg.data + es;
        Xg.rows = n;
        Xg.cols = d;
        Xg.ndim = 2;
        Xg.owned = 0;
        compare_on(&Xg, &Cg, &X, &C, 1);
        gsb__tensor_free(&bigg);
        gsb__tensor_free(&Cg);
        gsb__tensor_free(&big);
        gsb__tensor_free(&X);
        gsb__tensor_free(&C);
        CASE_END(before, "argmin tc %s X misaligned for 16-byte loads", gsb_dtype_name(dt));
    }
}

/*
 * Near ties: duplicated centres, rows at midpoints of two centres, rows on
 * centres, then magnitudes from 1e-30 to 1e30 row by row (the range check
 * and underflow), in one data set per dtype.
 */
static void test_adversarial(void)
{
    for (int t = 0; t < 2; t++) {
        int before = case_begin();
        gsb_dtype dt = dtypes[t];
        int64_t n = 6001, d = 19, k = 37;
        gsb__tensor X = host_random(dt, n, d, 1.0), C = host_random(dt, k, d, 1.0);
        for (int64_t j = 5; j < k; j += 6) /* C[j] == C[j - 1] bit for bit */
            set_row(&C, j, &C, j - 1);
        for (int64_t i = 0; i < 2000; i++) { /* midpoints: equidistant up to rounding */
            int64_t a = i % k, b = (i * 7 + 3) % k;
            for (int64_t q = 0; q < d; q++)
                gsb__tensor_set(&X, i * d + q,
                                0.5 * (gsb__tensor_get(&C, a * d + q) +
                                       gsb__tensor_get(&C, b * d + q)));
        }
        for (int64_t i = 2000; i < 2500; i++) /* on centres, duplicated ones included */
            set_row(&X, i, &C, i % k);
        compare_all(&X, &C, 1);
        /* magnitudes: row i scaled by 10^(-30 .. 30), centres at a moderate scale */
        for (int64_t i = 2500; i < n; i++) {
            double s = pow(10.0, (double)((i % 61) - 30));
            for (int64_t q = 0; q < d; q++)
                gsb__tensor_set(&X, i * d + q, s * gsb__tensor_get(&X, i * d + q));
        }
        compare_all(&X, &C, 0);
        gsb__tensor_free(&X);
        gsb__tensor_free(&C);
        CASE_END(before, "argmin tc %s near ties and magnitudes", gsb_dtype_name(dt));
    }
}

/* A large common offset: the bound is relative to ||x|| ||c||, so most rows
 * take the exact path; integer data: exact ties, broken by index. */
static void test_offset_and_ints(void)
{
    for (int t = 0; t < 2; t++) {
        int before = case_begin();
        gsb_dtype dt = dtypes[t];
        int64_t n = 4000, d = 16, k = 50;
        gsb__tensor X = host_random(dt, n, d, 1.0), C = host_random(dt, k, d, 1.0);
        for (int64_t i = 0; i < n * d; i++)
            gsb__tensor_set(&X, i, 1000.0 + gsb__tensor_get(&X, i));
        for (int64_t i = 0; i < k * d; i++)
            gsb__tensor_set(&C, i, 1000.0 + gsb__tensor_get(&C, i));
        compare_all(&X, &C, 0);
        gsb__tensor_free(&X);
        gsb__tensor_free(&C);
        gsb__tensor Xi = host_ints(dt, 3000, 2, 5), Ci = host_ints(dt, 40, 2, 5);
        compare_all(&Xi, &Ci, 1);
        gsb__tensor_free(&Xi);
        gsb__tensor_free(&Ci);
        CASE_END(before, "argmin tc %s offset data and integer ties", gsb_dtype_name(dt));
    }
}

/* Non-finite rows and a non-finite centre: the exact kernel's answers
 * (every centre at +inf: the first; the distance NaN or inf) bit for bit. */
static void test_nonfinite(void)
{
    for (int t = 0; t < 2; t++) {
        int before = case_begin();
        gsb_dtype dt = dtypes[t];
        int64_t n = 300, d = 9, k = 12;
        gsb__tensor X = host_random(dt, n, d, 1.0), C = host_random(dt, k, d, 1.0);
        gsb__tensor_set(&X, 3 * d + 4, NAN);
        gsb__tensor_set(&X, 7 * d, INFINITY);
        gsb__tensor_set(&X, 11 * d + 8, dt == GSB_F32 ? 1e30 : 1e300);
        compare_all(&X, &C, 0);
        gsb__tensor_set(&C, 5 * d + 2, INFINITY);
        compare_all(&X, &C, 0);
        gsb__tensor_free(&X);
        gsb__tensor_free(&C);
        CASE_END(before, "argmin tc %s non-finite rows and centres", gsb_dtype_name(dt));
    }
}

/* Rows the mode left to the exact path (GSB_ARGMIN_STATS), -1 if none reported. */
static int64_t exact_rows(const char *mode, const gsb__tensor *Xg, const gsb__tensor *Cg)
{
    gsb__tensor lab, mind;
    unsetenv("GSB_ARGMIN_EXACT_ROWS");
    setenv("GSB_ARGMIN_STATS", "quiet", 1);
    run_mode(mode, Xg, Cg, &lab, &mind);
    unsetenv("GSB_ARGMIN_STATS");
    gsb__tensor_free(&lab);
    gsb__tensor_free(&mind);
    const char *rows = getenv("GSB_ARGMIN_EXACT_ROWS");
    return rows ? atoll(rows) : -1;
}

/*
 * The tiles decide most rows of ordinary data (a bound that failed every
 * row would still pass the bit-for-bit tests above), and the exact path
 * does get the near ties: random normal data, 64 columns, 100 centres
 * (a CPU emulation leaves 0.05% of rows to the exact path with 3xTF32, 5%
 * with TF32), and the same rows with a common offset of 1000.  (The exact
 * kernel reads the listed rows in place where they are at most half of X,
 * as in test_adversarial's, test_nonfinite's and test_listed_many's data;
 * past that, as with the offset and the integer data, it runs on all of X.)
 */
static void test_exact_share(void)
{
    for (int t = 0; t < 2; t++) {
        int before = case_begin();
        gsb_dtype dt = dtypes[t];
        int64_t n = 20000, d = 64, k = 100;
        gsb__tensor X = host_random(dt, n, d, 1.0), C = host_random(dt, k, d, 1.0);
        gsb__tensor Xg = to_gpu(&X), Cg = to_gpu(&C);
        int64_t r3 = exact_rows("3xtf32", &Xg, &Cg), r1 = exact_rows("tf32", &Xg, &Cg);
        printf("    %s random: %lld (3xtf32), %lld (tf32) of %lld rows exact\n",
               gsb_dtype_name(dt), (long long)r3, (long long)r1, (long long)n);
        CHECK(r3 >= 0 && r3 <= n / 50);
        CHECK(r1 >= 0 && r1 <= n / 5);
        gsb__tensor_free(&Xg);
        for (int64_t i = 0; i < n * d; i++)
            gsb__tensor_set(&X, i, 1000.0 + gsb__tensor_get(&X, i));
        for (int64_t i = 0; i < k * d; i++)
            gsb__tensor_set(&C, i, 1000.0 + gsb__tensor_get(&C, i));
        gsb__tensor_free(&Cg);
        Xg = to_gpu(&X);
        Cg = to_gpu(&C);
        r3 = exact_rows("3xtf32", &Xg, &Cg);
        printf("    %s offset 1000: %lld of %lld rows exact (3xtf32)\n", gsb_dtype_name(dt),
               (long long)r3, (long long)n);
        CHECK(r3 > 0);
        gsb__tensor_free(&Xg);
        gsb__tensor_free(&Cg);
        gsb__tensor_free(&X);
        gsb__tensor_free(&C);
        CASE_END(before, "argmin tc %s share of rows on the exact path", gsb_dtype_name(dt));
    }
}

/*
 * The listed rows read in place by the exact kernel (one tile config each:
 * k = 20 for the 32-wide centre tile, 70 for float32's 128-wide and
 * float64's 64-wide): a large share of near ties, midpoints of two centres
 * (on an H200 18% to 36% of the rows listed), but under half of X, so the
 * list rather than all of X is run, and more listed rows than one wave of
 * the exact kernel's blocks takes.
 */
static void test_listed_many(void)
{
    static const int64_t ks[2] = {70, 20};
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < 2; s++) {
            int before = case_begin();
            gsb_dtype dt = dtypes[t];
            int64_t n = 150000, d = 16, k = ks[s];
            gsb__tensor X = host_random(dt, n, d, 1.0), C = host_random(dt, k, d, 1.0);
            for (int64_t i = 0; i < n; i += 20) /* 9 rows of 20: midpoints */
                for (int64_t m = i; m < i + 9 && m < n; m++) {
                    int64_t a = m % k, b = (m * 7 + 3) % k;
                    for (int64_t q = 0; q < d; q++)
                        gsb__tensor_set(&X, m * d + q,
                                        0.5 * (gsb__tensor_get(&C, a * d + q) +
                                               gsb__tensor_get(&C, b * d + q)));
                }
            compare_all(&X, &C, 0);
            gsb__tensor Xg = to_gpu(&X), Cg = to_gpu(&C);
            int64_t r3 = exact_rows("3xtf32", &Xg, &Cg), r1 = exact_rows("tf32", &Xg, &Cg);
            printf("    %s k=%lld midpoints: %lld (3xtf32), %lld (tf32) of %lld rows exact\n",
                   gsb_dtype_name(dt), (long long)k, (long long)r3, (long long)r1,
                   (long long)n);
            CHECK(r3 >= n / 8 && r3 <= n / 2);
            CHECK(r1 >= n / 8 && r1 <= n / 2);
            gsb__tensor_free(&Xg);
            gsb__tensor_free(&Cg);
            gsb__tensor_free(&X);
            gsb__tensor_free(&C);
            CASE_END(before, "argmin tc %s k=%lld many listed rows", gsb_dtype_name(dt),
                     (long long)k);
        }
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    testing_seed(20261126);
    RUN(test_shapes);
    RUN(test_misaligned);
    RUN(test_adversarial);
    RUN(test_offset_and_ints);
    RUN(test_nonfinite);
    RUN(test_exact_share);
    RUN(test_listed_many);
    return testing_done();
}
