/*
 * test_cpu_distance.c - the CPU backend's distance ops (pairwise,
 * argmin_sqdist, topk) against naive double loops on fresh random data, in
 * float32 and float64, with sizes that cross the ops' internal blocks.
 * References read the inputs back from the tensors, so float32 rounding of
 * the data is not counted as error; outputs start as NaN so an unwritten
 * element fails.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "test_op_helpers.h"

static const gsb__backend *be;
static const gsb_dtype dtypes[2] = {GSB_F32, GSB_F64};
static const gsb__metric metrics[4] = {GSB__METRIC_SQEUCLIDEAN, GSB__METRIC_EUCLIDEAN,
                                       GSB__METRIC_MANHATTAN, GSB__METRIC_COSINE};

static gsb__tensor make(gsb_dtype dt, int64_t rows, int64_t cols, const double *vals)
{
    return testing_tensor(be, dt, rows, cols, vals);
}

/* A tensor of n x d standard normals shifted by offset. */
static gsb__tensor make_normal(gsb_dtype dt, int64_t n, int64_t d, double offset)
{
    return testing_tensor_normal(be, dt, n, d, 1.0, offset);
}

/* A tensor of small integers in [-r, r] (exact ties galore). */
static gsb__tensor make_ints(gsb_dtype dt, int64_t n, int64_t d, int r)
{
    double *v = malloc((size_t)(n * d + 1) * sizeof(double));
    for (int64_t i = 0; i < n * d; i++)
        v[i] = floor(testing_uniform() * (2 * r + 1)) - r;
    gsb__tensor t = make(dt, n, d, v);
    free(v);
    return t;
}

static double *to_doubles(const gsb__tensor *t)
{
    int64_t n = t->rows * t->cols;
    double *v = malloc((size_t)(n + 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        v[i] = gsb__tensor_get(t, i);
    return v;
}

/* The metric by its definition, in double. */
static double ref_dist(const double *a, const double *b, int64_t d, gsb__metric m)
{
    double s = 0, aa = 0, bb = 0, ab = 0;
    for (int64_t j = 0; j < d; j++) {
        double t = a[j] - b[j];
        s += m == GSB__METRIC_MANHATTAN ? fabs(t) : t * t;
        aa += a[j] * a[j];
        bb += b[j] * b[j];
        ab += a[j] * b[j];
    }
    switch (m) {
    case GSB__METRIC_EUCLIDEAN: return sqrt(s);
    case GSB__METRIC_COSINE: return aa > 0 && bb > 0 ? 1.0 - ab / (sqrt(aa) * sqrt(bb)) : 1.0;
    default: return s;
    }
}

static double tol_of(gsb_dtype dt) { return dt == GSB_F32 ? 2e-6 : 1e-12; }

/* ---- pairwise ----------------------------------------------------------- */

static void check_pairwise(gsb_dtype dt, int64_t n, int64_t m, int64_t d, gsb__metric metric)
{
    gsb__tensor X = make_normal(dt, n, d, 0.5), Y = make_normal(dt, m, d, -0.25);
    gsb__tensor D = make(dt, n, m, NULL);
    CHECK_OK(be->ops->pairwise(be, &X, &Y, metric, &D));
    double *x = to_doubles(&X), *y = to_doubles(&Y), *got = to_doubles(&D);
    double *want = malloc((size_t)(n * m) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++)
            want[i * m + j] = ref_dist(x + i * d, y + j * d, d, metric);
    double err = testing_relerr(got, want, n * m);
    if (!(err <= tol_of(dt)))
        fprintf(stderr, "pairwise dtype %d metric %d n %lld m %lld: relerr %g\n", (int)dt,
                (int)metric, (long long)n, (long long)m, err);
    CHECK(err <= tol_of(dt));
    free(x);
    free(y);
    free(got);
    free(want);
    gsb__tensor_free(&X);
    gsb__tensor_free(&Y);
    gsb__tensor_free(&D);
}

static void test_pairwise_vs_naive(void)
{
    testing_seed(11);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b++) {
            check_pairwise(dtypes[a], 37, 53, 19, metrics[b]);
            /* crosses the 2048-column and the row blocks of the GEMM tiles */
            check_pairwise(dtypes[a], 300, 2100, 5, metrics[b]);
        }
}

/* X against itself: exact zero diagonal (scikit-learn fills it), symmetric. */
static void test_pairwise_self(void)
{
    testing_seed(12);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b++) {
            int64_t n = 41, d = 6;
            gsb__tensor X = make_normal(dtypes[a], n, d, 3.0), D = make(dtypes[a], n, n, NULL);
            CHECK_OK(be->ops->pairwise(be, &X, &X, metrics[b], &D));
            for (int64_t i = 0; i < n; i++) {
                CHECK(gsb__tensor_get(&D, i * n + i) == 0.0);
                for (int64_t j = 0; j < i; j++)
                    CHECK_CLOSE(gsb__tensor_get(&D, i * n + j), gsb__tensor_get(&D, j * n + i),
                                tol_of(dtypes[a]));
            }
            gsb__tensor_free(&X);
            gsb__tensor_free(&D);
        }
}

/* X against a copy of itself far from the origin: the expansion cancels to
 * about +-1e-12 on the diagonal, which must come out clamped at >= 0. */
static void test_pairwise_copy_clamps(void)
{
    testing_seed(14);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b++) {
            int64_t n = 60, d = 7;
            gsb__tensor X = make_normal(dtypes[a], n, d, 100.0), Y = make(dtypes[a], n, d, NULL);
            gsb__tensor D = make(dtypes[a], n, n, NULL);
            CHECK_OK(be->ops->copy(be, &Y, &X));
            CHECK_OK(be->ops->pairwise(be, &X, &Y, metrics[b], &D));
            for (int64_t i = 0; i < n * n; i++) {
                double v = gsb__tensor_get(&D, i);
                CHECK(v >= 0.0 && v <= 2e3);
            }
            for (int64_t i = 0; i < n; i++) /* sqrt(1e-12) for the euclidean metric */
                CHECK(gsb__tensor_get(&D, i * n + i) <= (dtypes[a] == GSB_F32 ? 1e-3 : 1e-5));
            gsb__tensor_free(&X);
            gsb__tensor_free(&Y);
            gsb__tensor_free(&D);
        }
}

/* Cosine: a zero row has cos = 0 with everything, so distance 1; results
 * stay within [0, 2]. */
static void test_pairwise_cosine_zero_rows(void)
{
    testing_seed(13);
    for (int a = 0; a < 2; a++) {
        int64_t n = 5, m = 4, d = 3;
        double xv[15] = {0, 0, 0, 1, 2, 3, -1, -2, -3, 0, 0, 0, 2, 0, 0};
        double yv[12] = {1, 2, 3, 0, 0, 0, 5, 0, 0, -4, 0, 0};
        gsb__tensor X = make(dtypes[a], n, d, xv), Y = make(dtypes[a], m, d, yv);
        gsb__tensor D = make(dtypes[a], n, m, NULL);
        CHECK_OK(be->ops->pairwise(be, &X, &Y, GSB__METRIC_COSINE, &D));
        for (int64_t j = 0; j < m; j++) {
            CHECK(gsb__tensor_get(&D, 0 * m + j) == 1.0);
            CHECK(gsb__tensor_get(&D, 3 * m + j) == 1.0);
        }
        for (int64_t i = 0; i < n; i++)
            CHECK(gsb__tensor_get(&D, i * m + 1) == 1.0);
        CHECK_CLOSE(gsb__tensor_get(&D, 1 * m + 0), 0.0, tol_of(dtypes[a]));
        CHECK_CLOSE(gsb__tensor_get(&D, 2 * m + 0), 2.0, tol_of(dtypes[a]));
        CHECK_CLOSE(gsb__tensor_get(&D, 4 * m + 2), 0.0, tol_of(dtypes[a]));
        CHECK_CLOSE(gsb__tensor_get(&D, 4 * m + 3), 2.0, tol_of(dtypes[a]));
        for (int64_t i = 0; i < n * m; i++) {
            double v = gsb__tensor_get(&D, i);
            CHECK(v >= 0.0 && v <= 2.0);
        }
        gsb__tensor_free(&X);
        gsb__tensor_free(&Y);
        gsb__tensor_free(&D);
    }
}

/* No features: every distance is 0 (cosine: 1). */
static void test_pairwise_no_features(void)
{
    for (int b = 0; b < 4; b++) {
        gsb__tensor X = make(GSB_F64, 3, 0, NULL), Y = make(GSB_F64, 2, 0, NULL);
        gsb__tensor D = make(GSB_F64, 3, 2, NULL);
        CHECK_OK(be->ops->pairwise(be, &X, &Y, metrics[b], &D));
        for (int64_t i = 0; i < 6; i++)
            CHECK(gsb__tensor_get(&D, i) == (metrics[b] == GSB__METRIC_COSINE ? 1.0 : 0.0));
        gsb__tensor_free(&X);
        gsb__tensor_free(&Y);
        gsb__tensor_free(&D);
    }
}

static void test_pairwise_bad_args(void)
{
    gsb__tensor X = make(GSB_F64, 3, 2, NULL), Y = make(GSB_F64, 4, 3, NULL);
    gsb__tensor Yf = make(GSB_F32, 4, 2, NULL), D = make(GSB_F64, 3, 4, NULL);
    gsb__tensor Dbad = make(GSB_F64, 4, 3, NULL);
    CHECK_ERR(be->ops->pairwise(be, &X, &Y, GSB__METRIC_EUCLIDEAN, &D), GSB_EINTERNAL, "Y");
    CHECK_ERR(be->ops->pairwise(be, &X, &Yf, GSB__METRIC_EUCLIDEAN, &D), GSB_EINTERNAL,
              "dtype");
    Y.cols = 2;
    Y.rows = 4;
    CHECK_ERR(be->ops->pairwise(be, &X, &Y, GSB__METRIC_EUCLIDEAN, &Dbad), GSB_EINTERNAL,
              "shape");
    CHECK_ERR(be->ops->pairwise(be, &X, &Y, (gsb__metric)9, &D), GSB_EINTERNAL, "metric");
    gsb__tensor_free(&X);
    gsb__tensor_free(&Y);
    gsb__tensor_free(&Yf);
    gsb__tensor_free(&D);
    gsb__tensor_free(&Dbad);
}

/* ---- argmin_sqdist ------------------------------------------------------ */

static void check_argmin(gsb_dtype dt, int64_t n, int64_t k, int64_t d)
{
    gsb__tensor X = make_normal(dt, n, d, 1.0), C = make_normal(dt, k, d, 1.0);
    gsb__tensor lab = make(GSB_I32, n, 1, NULL), mind = make(dt, n, 1, NULL);
    CHECK_OK(be->ops->argmin_sqdist(be, &X, &C, &lab, &mind));
    double *x = to_doubles(&X), *c = to_doubles(&C);
    int64_t exact_hits = 0;
    for (int64_t i = 0; i < n; i++) {
        double best = INFINITY, scale = 0;
        int64_t arg = -1;
        for (int64_t j = 0; j < k; j++) {
            double v = ref_dist(x + i * d, c + j * d, d, GSB__METRIC_SQEUCLIDEAN);
            if (v < best) {
                best = v;
                arg = j;
            }
        }
        for (int64_t j = 0; j < d; j++)
            scale += x[i * d + j] * x[i * d + j] + c[arg * d + j] * c[arg * d + j];
        int32_t got = ((int32_t *)lab.data)[i];
        CHECK(got >= 0 && got < k);
        if (got < 0 || got >= k)
            break;
        exact_hits += got == arg;
        /* a different label is only allowed for a near-tie within the
         * expansion's rounding (float32) */
        double dgot = ref_dist(x + i * d, c + got * d, d, GSB__METRIC_SQEUCLIDEAN);
        CHECK(dgot - best <= 8 * d * (dt == GSB_F32 ? 1.2e-7 : 2.3e-16) * scale);
        /* mind is the chosen centre's squared distance, computed directly */
        CHECK_CLOSE(gsb__tensor_get(&mind, i), dgot, tol_of(dt));
    }
    CHECK(exact_hits >= n - n / 1000);
    free(x);
    free(c);
    gsb__tensor_free(&X);
    gsb__tensor_free(&C);
    gsb__tensor_free(&lab);
    gsb__tensor_free(&mind);
}

static void test_argmin_vs_naive(void)
{
    testing_seed(21);
    for (int a = 0; a < 2; a++) {
        check_argmin(dtypes[a], 2000, 7, 33);
        /* k = 1000 makes the row blocks ~1000 rows: crosses block edges */
        check_argmin(dtypes[a], 3000, 1000, 5);
        check_argmin(dtypes[a], 50, 1, 3);
        /* cpu_smalldots.c's widest case: 64 centres (kp = 64), d % 4 != 0 */
        check_argmin(dtypes[a], 1001, 64, 13);
        /* centres too many for cpu_smalldots.c's kernel: the GEMM path */
        check_argmin(dtypes[a], 700, 65, 60);
    }
}

/* Integer data gives exact ties: the smaller centre index must win, also
 * for duplicated centres. */
static void test_argmin_ties(void)
{
    testing_seed(22);
    for (int a = 0; a < 2; a++) {
        int64_t n = 400, k = 9, d = 3;
        gsb__tensor X = make_ints(dtypes[a], n, d, 2), C = make_ints(dtypes[a], k, d, 2);
        /* duplicate centres 1 -> 4 and 2 -> 7 */
        for (int64_t j = 0; j < d; j++) {
            gsb__tensor_set(&C, 4 * d + j, gsb__tensor_get(&C, 1 * d + j));
            gsb__tensor_set(&C, 7 * d + j, gsb__tensor_get(&C, 2 * d + j));
        }
        gsb__tensor lab = make(GSB_I32, n, 1, NULL), mind = make(dtypes[a], n, 1, NULL);
        CHECK_OK(be->ops->argmin_sqdist(be, &X, &C, &lab, &mind));
        double *x = to_doubles(&X), *c = to_doubles(&C);
        int64_t ties = 0;
        for (int64_t i = 0; i < n; i++) {
            double best = INFINITY;
            int64_t arg = -1, nbest = 0;
            for (int64_t j = 0; j < k; j++) {
                double v = ref_dist(x + i * d, c + j * d, d, GSB__METRIC_SQEUCLIDEAN);
                nbest = v == best ? nbest + 1 : (v < best ? 1 : nbest);
                if (v < best) {
                    best = v;
                    arg = j;
                }
            }
            ties += nbest > 1;
            CHECK(((int32_t *)lab.data)[i] == arg);
            CHECK(gsb__tensor_get(&mind, i) == best);
        }
        CHECK(ties > 20); /* the data did exercise ties */
        free(x);
        free(c);
        gsb__tensor_free(&X);
        gsb__tensor_free(&C);
        gsb__tensor_free(&lab);
        gsb__tensor_free(&mind);
    }
}

/* Far from the origin the expansion cancels badly in float32; mind is
 * still accurate because it is recomputed directly. */
static void test_argmin_offset_accuracy(void)
{
    testing_seed(23);
    int64_t n = 500, k = 4, d = 8;
    gsb__tensor X = make_normal(GSB_F32, n, d, 1000.0), C = make_normal(GSB_F32, k, d, 1000.0);
    gsb__tensor lab = make(GSB_I32, n, 1, NULL), mind = make(GSB_F32, n, 1, NULL);
    CHECK_OK(be->ops->argmin_sqdist(be, &X, &C, &lab, &mind));
    double *x = to_doubles(&X), *c = to_doubles(&C);
    for (int64_t i = 0; i < n; i++) {
        int32_t l = ((int32_t *)lab.data)[i];
        CHECK(l >= 0 && l < k);
        if (l < 0 || l >= k)
            break;
        double want = ref_dist(x + i * d, c + l * d, d, GSB__METRIC_SQEUCLIDEAN);
        CHECK(fabs(gsb__tensor_get(&mind, i) - want) <= 1e-6 * want);
    }
    free(x);
    free(c);
    gsb__tensor_free(&X);
    gsb__tensor_free(&C);
    gsb__tensor_free(&lab);
    gsb__tensor_free(&mind);
}

static void test_argmin_bad_args(void)
{
    gsb__tensor X = make(GSB_F64, 5, 2, NULL), C = make(GSB_F64, 0, 2, NULL);
    gsb__tensor lab = make(GSB_I32, 5, 1, NULL), mind = make(GSB_F64, 5, 1, NULL);
    gsb__tensor labw = make(GSB_I64, 5, 1, NULL);
    CHECK_ERR(be->ops->argmin_sqdist(be, &X, &C, &lab, &mind), GSB_EINVAL, "no centres");
    gsb__tensor_free(&C);
    C = make_normal(GSB_F64, 2, 2, 0.0);
    CHECK_ERR(be->ops->argmin_sqdist(be, &X, &C, &labw, &mind), GSB_EINTERNAL, "labels");
    mind.rows = 4;
    CHECK_ERR(be->ops->argmin_sqdist(be, &X, &C, &lab, &mind), GSB_EINTERNAL, "mind");
    mind.rows = 5;
    /* no rows: nothing to do */
    X.rows = 0;
    lab.rows = 0;
    mind.rows = 0;
    CHECK_OK(be->ops->argmin_sqdist(be, &X, &C, &lab, &mind));
    gsb__tensor_free(&X);
    gsb__tensor_free(&C);
    gsb__tensor_free(&lab);
    gsb__tensor_free(&mind);
    gsb__tensor_free(&labw);
}

/* ---- gsb__cpu_lloyd_step ------------------------------------------------ */

/*
 * The fused Lloyd step against argmin_sqdist then segment_sum: labels,
 * distances, sums and counts bit for bit (KMeans' centres must not depend
 * on the step being fused: test_cuda_kmeans' empty-cluster case ran to
 * max_iter when they were summed in other chunks), the weighted distance
 * sum against a plain one; without weights, with float64 weights (the AVX2
 * accumulation) and float32 ones (the portable loop); shapes where
 * segment_sum takes 9 chunks (150000 x 15: chunk edges inside argmin
 * blocks), 3 (25000 x 32) and one (3000 x 3); the same outputs on 1, 3
 * and 16 threads (16: more threads than chunks, argmin then segment_sum).
 */
static void test_lloyd_step(void)
{
    testing_seed(37);
    static const int64_t shapes[3][3] = {{150000, 15, 7}, {25000, 32, 20}, {3000, 3, 14}};
    for (int sh = 0; sh < 3; sh++)
        for (int t = 0; t < 6; t++) {
            const int64_t n = shapes[sh][0], d = shapes[sh][1], k = shapes[sh][2];
            gsb_dtype dt = dtypes[t / 3];
            int weighted = t % 3;
            gsb__tensor X = make_normal(dt, n, d, 0.0), C = make_normal(dt, k, d, 0.0);
            double *wv = malloc((size_t)n * sizeof(double));
            for (int64_t i = 0; i < n; i++)
                wv[i] = i % 10 == 0 ? 0.0 : 2.0 * testing_uniform();
            if (weighted == 2) /* float32 weights: the values it holds */
                for (int64_t i = 0; i < n; i++)
                    wv[i] = (double)(float)wv[i];
            gsb__tensor W = make(weighted == 2 ? GSB_F32 : GSB_F64, n, 1, wv);
            const gsb__tensor *w = weighted ? &W : NULL;
            gsb__tensor lab0 = make(GSB_I32, n, 1, NULL), mind0 = make(dt, n, 1, NULL);
            gsb__tensor sums0 = make(GSB_F64, k, d, NULL), counts0 = make(GSB_F64, k, 1, NULL);
            CHECK_OK(be->ops->argmin_sqdist(be, &X, &C, &lab0, &mind0));
            CHECK_OK(be->ops->segment_sum(be, &X, &lab0, w, &sums0, &counts0));
            double want = 0;
            for (int64_t i = 0; i < n; i++)
                want += (weighted ? wv[i] : 1.0) * gsb__tensor_get(&mind0, i);
            gsb__tensor lab[3], mind[3], sums[3], counts[3];
            double wdist[3];
            static const int nthr[3] = {1, 3, 16};
            int saved = omp_get_max_threads();
            for (int r = 0; r < 3; r++) {
                omp_set_num_threads(nthr[r]);
                lab[r] = make(GSB_I32, n, 1, NULL);
                mind[r] = make(dt, n, 1, NULL);
                sums[r] = make(GSB_F64, k, d, NULL);
                counts[r] = make(GSB_F64, k, 1, NULL);
                CHECK_OK(gsb__cpu_lloyd_step(&X, &C, w, &lab[r], &mind[r], &sums[r], &counts[r],
                                             &wdist[r]));
            }
            omp_set_num_threads(saved);
            CHECK(memcmp(lab[0].data, lab0.data, gsb__tensor_nbytes(&lab0)) == 0);
            CHECK(memcmp(mind[0].data, mind0.data, gsb__tensor_nbytes(&mind0)) == 0);
            CHECK(memcmp(sums[0].data, sums0.data, gsb__tensor_nbytes(&sums0)) == 0);
            CHECK(memcmp(counts[0].data, counts0.data, gsb__tensor_nbytes(&counts0)) == 0);
            CHECK_CLOSE(wdist[0], want, 1e-12);
            for (int r = 1; r < 3; r++) {
                CHECK(memcmp(lab[r].data, lab[0].data, gsb__tensor_nbytes(&lab0)) == 0);
                CHECK(memcmp(mind[r].data, mind[0].data, gsb__tensor_nbytes(&mind0)) == 0);
                CHECK(memcmp(sums[r].data, sums[0].data, gsb__tensor_nbytes(&sums0)) == 0);
                CHECK(memcmp(counts[r].data, counts[0].data, gsb__tensor_nbytes(&counts0)) == 0);
                CHECK(wdist[r] == wdist[0]);
            }
            for (int r = 0; r < 3; r++) {
                gsb__tensor_free(&lab[r]);
                gsb__tensor_free(&mind[r]);
                gsb__tensor_free(&sums[r]);
                gsb__tensor_free(&counts[r]);
            }
            gsb__tensor_free(&lab0);
            gsb__tensor_free(&mind0);
            gsb__tensor_free(&sums0);
            gsb__tensor_free(&counts0);
            gsb__tensor_free(&W);
            gsb__tensor_free(&X);
            gsb__tensor_free(&C);
            free(wv);
        }
}

/* ---- topk --------------------------------------------------------------- */

typedef struct ref_cand {
    double d;
    int64_t i;
} ref_cand;

static int cmp_cand(const void *pa, const void *pb)
{
    const ref_cand *a = pa, *b = pb;
    if (a->d != b->d)
        return a->d < b->d ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/*
 * topk(Q, R) against a full sort of all reference distances by (distance,
 * index); with self set, Q is R and row i is left out of its own list.
 * Returns the number of index mismatches.
 */
static int64_t check_topk(gsb_dtype dt, const gsb__tensor *Q, const gsb__tensor *R, int64_t k,
                          gsb__metric metric, int self)
{
    int64_t nq = Q->rows, nr = R->rows, d = Q->cols, bad = 0;
    gsb__tensor dist = make(dt, nq, k, NULL), idx = make(GSB_I64, nq, k, NULL);
    CHECK_OK(be->ops->topk(be, Q, R, k, metric, self, &dist, &idx));
    double *q = to_doubles(Q), *r = to_doubles(R);
    ref_cand *all = malloc((size_t)nr * sizeof(ref_cand));
    for (int64_t i = 0; i < nq; i++) {
        int64_t m = 0;
        for (int64_t j = 0; j < nr; j++)
            if (!self || j != i)
                all[m++] = (ref_cand){ref_dist(q + i * d, r + j * d, d, metric), j};
        qsort(all, (size_t)m, sizeof(ref_cand), cmp_cand);
        for (int64_t a = 0; a < k; a++) {
            int64_t gi = ((int64_t *)idx.data)[i * k + a];
            bad += gi != all[a].i;
            CHECK_CLOSE(gsb__tensor_get(&dist, i * k + a), all[a].d, tol_of(dt));
        }
    }
    free(all);
    free(q);
    free(r);
    gsb__tensor_free(&dist);
    gsb__tensor_free(&idx);
    return bad;
}

static void test_topk_vs_naive(void)
{
    testing_seed(31);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b++) {
            gsb__tensor Q = make_normal(dtypes[a], 70, 9, 0.0);
            gsb__tensor R = make_normal(dtypes[a], 400, 9, 0.0);
            CHECK(check_topk(dtypes[a], &Q, &R, 10, metrics[b], 0) == 0);
            CHECK(check_topk(dtypes[a], &Q, &R, 1, metrics[b], 0) == 0);
            CHECK(check_topk(dtypes[a], &Q, &R, 400, metrics[b], 0) == 0); /* k = nr */
            gsb__tensor_free(&Q);
            gsb__tensor_free(&R);
        }
}

/* 300 queries x 9000 references cross the query blocks (at most 128) and,
 * on up to a few threads, the reference blocks (a 1 MiB tile: 6898 float32
 * references for the 38-query blocks of two threads, 3449 float64). */
static void test_topk_blocks(void)
{
    testing_seed(32);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b += 3) {
            gsb__tensor Q = make_normal(dtypes[a], 300, 4, 0.0);
            gsb__tensor R = make_normal(dtypes[a], 9000, 4, 0.0);
            CHECK(check_topk(dtypes[a], &Q, &R, 5, metrics[b], 0) == 0);
            gsb__tensor_free(&Q);
            gsb__tensor_free(&R);
        }
}

static void test_topk_exclude_self(void)
{
    testing_seed(33);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b++) {
            gsb__tensor X = make_normal(dtypes[a], 120, 5, 0.0);
            CHECK(check_topk(dtypes[a], &X, &X, 6, metrics[b], 1) == 0);
            CHECK(check_topk(dtypes[a], &X, &X, 119, metrics[b], 1) == 0);
            gsb__tensor_free(&X);
        }
}

/* Integer data with duplicated rows: many exact ties, which must go to the
 * smaller index, also for the query's own duplicates under exclude_self. */
static void test_topk_ties(void)
{
    testing_seed(34);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b++) {
            int64_t n = 150, d = 3;
            gsb__tensor X = make_ints(dtypes[a], n, d, 1);
            for (int64_t i = 0; i < n; i += 4) /* and some literal duplicates */
                for (int64_t j = 0; j < d; j++)
                    gsb__tensor_set(&X, ((i * 37) % n) * d + j, gsb__tensor_get(&X, i * d + j));
            gsb__tensor Q = make_ints(dtypes[a], 40, d, 1);
            CHECK(check_topk(dtypes[a], &Q, &X, 12, metrics[b], 0) == 0);
            CHECK(check_topk(dtypes[a], &X, &X, 12, metrics[b], 1) == 0);
            gsb__tensor_free(&X);
            gsb__tensor_free(&Q);
        }
}

/* Data far from the origin: the float32 expansion's error is larger than
 * the gaps between neighbours, yet the result is exact (the candidates are
 * re-ranked by their direct distance). */
static void test_topk_offset_exact(void)
{
    testing_seed(35);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b += 1) {
            gsb__tensor Q = make_normal(dtypes[a], 50, 6, 500.0);
            gsb__tensor R = make_normal(dtypes[a], 600, 6, 500.0);
            CHECK(check_topk(dtypes[a], &Q, &R, 7, metrics[b], 0) == 0);
            gsb__tensor_free(&Q);
            gsb__tensor_free(&R);
        }
}

/* Cosine with zero rows: distance 1 to everything, ties by index. */
static void test_topk_cosine_zero(void)
{
    double rv[12] = {1, 0, 0, 0, 0, 0, 0, 1, 0, -1, 0, 0};
    double qv[6] = {0, 0, 0, 2, 0, 0};
    for (int a = 0; a < 2; a++) {
        gsb__tensor R = make(dtypes[a], 4, 3, rv), Q = make(dtypes[a], 2, 3, qv);
        gsb__tensor dist = make(dtypes[a], 2, 4, NULL), idx = make(GSB_I64, 2, 4, NULL);
        CHECK_OK(be->ops->topk(be, &Q, &R, 4, GSB__METRIC_COSINE, 0, &dist, &idx));
        const int64_t *ix = idx.data;
        for (int64_t j = 0; j < 4; j++) {
            CHECK(ix[j] == j);
            CHECK(gsb__tensor_get(&dist, j) == 1.0);
        }
        /* query (2,0,0): R0 at 0, then R1 (zero) and R2 (orthogonal) at 1, R3 at 2 */
        CHECK(ix[4] == 0 && ix[5] == 1 && ix[6] == 2 && ix[7] == 3);
        CHECK(gsb__tensor_get(&dist, 4) == 0.0 && gsb__tensor_get(&dist, 7) == 2.0);
        gsb__tensor_free(&R);
        gsb__tensor_free(&Q);
        gsb__tensor_free(&dist);
        gsb__tensor_free(&idx);
    }
}

static void test_topk_bad_args(void)
{
    gsb__tensor R = make_normal(GSB_F64, 5, 2, 0.0), Q = make_normal(GSB_F64, 3, 2, 0.0);
    gsb__tensor dist = make(GSB_F64, 3, 6, NULL), idx = make(GSB_I64, 3, 6, NULL);
    CHECK_ERR(be->ops->topk(be, &Q, &R, 6, GSB__METRIC_EUCLIDEAN, 0, &dist, &idx), GSB_EINVAL,
              "Expected n_neighbors <= n_samples_fit, but n_neighbors = 6, n_samples_fit = 5, "
              "n_samples = 3");
    gsb__tensor d5 = make(GSB_F64, 5, 5, NULL), i5 = make(GSB_I64, 5, 5, NULL);
    CHECK_ERR(be->ops->topk(be, &R, &R, 5, GSB__METRIC_EUCLIDEAN, 1, &d5, &i5), GSB_EINVAL,
              "Expected n_neighbors < n_samples_fit, but n_neighbors = 5, n_samples_fit = 5, "
              "n_samples = 5");
    CHECK_ERR(be->ops->topk(be, &Q, &R, 0, GSB__METRIC_EUCLIDEAN, 0, &dist, &idx), GSB_EINVAL,
              "Expected n_neighbors > 0. Got 0");
    dist.cols = idx.cols = 4;
    CHECK_ERR(be->ops->topk(be, &Q, &R, 3, GSB__METRIC_EUCLIDEAN, 0, &dist, &idx),
              GSB_EINTERNAL, "dist");
    CHECK_ERR(be->ops->topk(be, &Q, &R, 4, GSB__METRIC_EUCLIDEAN, 0, &dist, &d5),
              GSB_EINTERNAL, "idx");
    CHECK_ERR(be->ops->topk(be, &Q, &R, 2, GSB__METRIC_EUCLIDEAN, 1, &dist, &idx),
              GSB_EINTERNAL, "exclude_self");
    gsb__tensor_free(&R);
    gsb__tensor_free(&Q);
    gsb__tensor_free(&dist);
    gsb__tensor_free(&idx);
    gsb__tensor_free(&d5);
    gsb__tensor_free(&i5);
}

/* Results do not depend on the number of threads (blocks are fixed by the
 * sizes), and BLAS gets its thread count back afterwards. */
static void test_thread_count_independent(void)
{
    testing_seed(36);
    int64_t n = 3000, m = 700, d = 17, k = 9;
    gsb__tensor X = make_normal(GSB_F32, n, d, 0.0), Y = make_normal(GSB_F32, m, d, 0.0);
    gsb__tensor D[2], lab[2], mind[2], dist[2], idx[2];
    int saved_omp = omp_get_max_threads();
    openblas_set_num_threads(2);
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r == 0 ? 1 : 3);
        D[r] = make(GSB_F32, n, m, NULL);
        lab[r] = make(GSB_I32, n, 1, NULL);
        mind[r] = make(GSB_F32, n, 1, NULL);
        dist[r] = make(GSB_F32, n, k, NULL);
        idx[r] = make(GSB_I64, n, k, NULL);
        CHECK_OK(be->ops->pairwise(be, &X, &Y, GSB__METRIC_EUCLIDEAN, &D[r]));
        CHECK_OK(be->ops->argmin_sqdist(be, &X, &Y, &lab[r], &mind[r]));
        CHECK_OK(be->ops->topk(be, &X, &Y, k, GSB__METRIC_COSINE, 0, &dist[r], &idx[r]));
        CHECK(openblas_get_num_threads() == 2);
    }
    omp_set_num_threads(saved_omp);
    CHECK(memcmp(D[0].data, D[1].data, gsb__tensor_nbytes(&D[0])) == 0);
    CHECK(memcmp(lab[0].data, lab[1].data, gsb__tensor_nbytes(&lab[0])) == 0);
    CHECK(memcmp(mind[0].data, mind[1].data, gsb__tensor_nbytes(&mind[0])) == 0);
    CHECK(memcmp(dist[0].data, dist[1].data, gsb__tensor_nbytes(&dist[0])) == 0);
    CHECK(memcmp(idx[0].data, idx[1].data, gsb__tensor_nbytes(&idx[0])) == 0);
    for (int r = 0; r < 2; r++) {
        gsb__tensor_free(&D[r]);
        gsb__tensor_free(&lab[r]);
        gsb__tensor_free(&mind[r]);
        gsb__tensor_free(&dist[r]);
        gsb__tensor_free(&idx[r]);
    }
    gsb__tensor_free(&X);
    gsb__tensor_free(&Y);
}

int main(void)
{
    be = gsb__cpu_backend();
    RUN(test_pairwise_vs_naive);
    RUN(test_pairwise_self);
    RUN(test_pairwise_copy_clamps);
    RUN(test_pairwise_cosine_zero_rows);
    RUN(test_pairwise_no_features);
    RUN(test_pairwise_bad_args);
    RUN(test_argmin_vs_naive);
    RUN(test_argmin_ties);
    RUN(test_argmin_offset_accuracy);
    RUN(test_argmin_bad_args);
    RUN(test_lloyd_step);
    RUN(test_topk_vs_naive);
    RUN(test_topk_blocks);
    RUN(test_topk_exclude_self);
    RUN(test_topk_ties);
    RUN(test_topk_offset_exact);
    RUN(test_topk_cosine_zero);
    RUN(test_topk_bad_args);
    RUN(test_thread_count_independent);
    return testing_done();
}
