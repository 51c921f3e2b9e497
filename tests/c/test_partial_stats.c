/*
 * test_partial_stats.c - the distributed-fit methods (partial_stats.h)
 * through the public API, as a C client driving several partitions would use
 * them: each estimator's stats_* on row slices, merge_stats in two different
 * groupings, then fit_from_stats (or the KMeans / L-BFGS steps) must give the
 * fit on the whole data.  Also: the packed arrays' checks, stateless methods
 * on unfitted and fitted models, merging mismatched kinds.
 *
 * Tolerances: the merged statistics equal the whole data's up to summation
 * order (1e-12 relative on this well-conditioned data); LinearRegression
 * solves the normal equations where fit runs an SVD (cond^2 eps, 1e-10 here).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_api_helpers.h"

static gsb_session *S;

#define N 240
#define D 4
static double X[N * D], Y[N], W[N];

static void make_data(void)
{
    testing_seed(11);
    testing_fill_normal(X, N * D);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D; j++)
            X[i * D + j] = X[i * D + j] * (j + 1) + 10.0 * j;
        Y[i] = 0.5 * X[i * D] - 2.0 * X[i * D + 1] + X[i * D + 3] + testing_normal();
        W[i] = 0.25 + testing_uniform();
    }
}

/* row slices [0,70) [70,150) [150,240) */
static const int cut[4] = {0, 70, 150, N};

/* method(inputs) -> its "stats" result, a malloc'ed copy (*len values); NULL on failure. */
static double *call_stats(gsb_model *m, const char *method, const gsb_array *const *ins, int n,
                          const char *opts, int64_t *len)
{
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_call(m, method, ins, n, opts, &r));
    const gsb_array *a = r ? gsb_result_get(r, "stats") : NULL;
    CHECK(a != NULL);
    double *v = NULL;
    if (a) {
        *len = testing_numel(a);
        v = malloc((size_t)*len * sizeof *v);
        testing_copy(a, v, *len);
    }
    gsb_result_free(r);
    return v;
}

static double *merge(gsb_model *m, double *a, int64_t la, double *b, int64_t lb, int64_t *len)
{
    gsb_array x = gsb_array_1d(a, GSB_F64, la), y = gsb_array_1d(b, GSB_F64, lb);
    const gsb_array *ins[2] = {&x, &y};
    double *v = call_stats(m, "merge_stats", ins, 2, NULL, len);
    free(a);
    free(b);
    return v;
}

/* The three slices' stats of method merged as (s0 + s1) + s2, or s0 + (s1 + s2). */
static double *sliced(gsb_model *m, const char *method, int with_y, int with_w, int grouping,
                      int64_t *len)
{
    double *s[3];
    int64_t l[3];
    for (int p = 0; p < 3; p++) {
        int64_t r0 = cut[p], rows = cut[p + 1] - cut[p];
        gsb_array xa = gsb_array_2d(X + r0 * D, GSB_F64, rows, D);
        gsb_array ya = gsb_array_1d(Y + r0, GSB_F64, rows);
        gsb_array wa = gsb_array_1d(W + r0, GSB_F64, rows);
        /* stats_gram takes (X, y, sample_weight), stats_moments (X, sample_weight) */
        const gsb_array *ins[3] = {&xa, with_y ? &ya : NULL, with_w ? &wa : NULL};
        if (strcmp(method, "stats_moments") == 0)
            ins[1] = ins[2];
        s[p] = call_stats(m, method, ins, strcmp(method, "stats_moments") == 0 ? 2 : 3, NULL,
                          &l[p]);
    }
    if (grouping == 0) {
        int64_t l01;
        double *s01 = merge(m, s[0], l[0], s[1], l[1], &l01);
        return merge(m, s01, l01, s[2], l[2], len);
    }
    int64_t l12;
    double *s12 = merge(m, s[1], l[1], s[2], l[2], &l12);
    return merge(m, s[0], l[0], s12, l12, len);
}

static int fit_from(gsb_model *m, double *stats, int64_t len, const char *opts)
{
    gsb_array a = gsb_array_1d(stats, GSB_F64, len);
    const gsb_array *ins[1] = {&a};
    int rc = gsb_model_call(m, "fit_from_stats", ins, 1, opts, NULL);
    free(stats);
    return rc;
}

static void same_attr(gsb_model *a, gsb_model *b, const char *name, double tol)
{
    double va[64], vb[64];
    int64_t na = testing_attr(a, name, va, 64, NULL), nb = testing_attr(b, name, vb, 64, NULL);
    CHECK(na == nb && na > 0);
    for (int64_t i = 0; i < na && i < 64; i++)
        CHECK_CLOSE(va[i], vb[i], tol * (1 + fabs(vb[i])));
}

static void test_scaler(void)
{
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D), wa = gsb_array_1d(W, GSB_F64, N);
    for (int grouping = 0; grouping < 2; grouping++) {
        gsb_model *whole = testing_model(S, "StandardScaler", NULL);
        gsb_model *dist = testing_model(S, "StandardScaler", NULL);
        const gsb_array *ins[3] = {&xa, NULL, &wa};
        CHECK_OK(gsb_model_call(whole, "fit", ins, 3, NULL, NULL));
        int64_t len = 0;
        double *st = sliced(dist, "stats_moments", 0, 1, grouping, &len);
        CHECK(len == 5 + 2 + 4 * D);
        CHECK(!gsb_model_is_fitted(dist)); /* stateless */
        CHECK_OK(fit_from(dist, st, len, "{\"weighted\": true}"));
        same_attr(dist, whole, "mean_", 1e-12);
        same_attr(dist, whole, "var_", 1e-12);
        same_attr(dist, whole, "scale_", 1e-12);
        same_attr(dist, whole, "n_samples_seen_", 1e-12);
        same_attr(dist, whole, "n_features_in_", 0);
        gsb_model_free(whole);
        gsb_model_free(dist);
    }
}

static void test_linear(void)
{
    static const char *const est[4] = {"LinearRegression", "Ridge", "Lasso", "ElasticNet"};
    static const char *const params[4] = {NULL, "{\"alpha\": 3.0}", "{\"alpha\": 0.1}",
                                          "{\"alpha\": 0.2, \"positive\": true}"};
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D), ya = gsb_array_1d(Y, GSB_F64, N),
              wa = gsb_array_1d(W, GSB_F64, N);
    for (int e = 0; e < 4; e++) {
        gsb_model *whole = testing_model(S, est[e], params[e]);
        gsb_model *dist = testing_model(S, est[e], params[e]);
        CHECK_OK(testing_fit(whole, &xa, &ya, &wa));
        int64_t len = 0;
        double *st = sliced(dist, "stats_gram", 1, 1, e % 2, &len);
        CHECK(len == 5 + 2 + (D + 1) + (D + 1) * (D + 1));
        CHECK_OK(fit_from(dist, st, len, NULL));
        same_attr(dist, whole, "coef_", 1e-10);
        same_attr(dist, whole, "intercept_", 1e-10);
        if (e == 0) {
            same_attr(dist, whole, "singular_", 1e-10);
            same_attr(dist, whole, "rank_", 0);
        }
        if (e >= 2) { /* the Gram coordinate descent: the same epochs and gap */
            same_attr(dist, whole, "n_iter_", 0);
            same_attr(dist, whole, "dual_gap_", 1e-6);
            int64_t lx = 0;
            double *sx = sliced(dist, "stats_gram", 0, 1, 0, &lx); /* no y */
            CHECK_ERR(fit_from(dist, sx, lx, NULL), GSB_EINVAL, "hold no targets");
        }
        gsb_model_free(whole);
        gsb_model_free(dist);
    }
}

static void test_pca(void)
{
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D);
    gsb_model *whole = testing_model(S, "PCA", "{\"n_components\": 2}");
    gsb_model *dist = testing_model(S, "PCA", "{\"n_components\": 2}");
    CHECK_OK(testing_fit(whole, &xa, NULL, NULL));
    int64_t len = 0;
    double *st = sliced(dist, "stats_gram", 0, 0, 1, &len);
    CHECK_OK(fit_from(dist, st, len, NULL));
    same_attr(dist, whole, "components_", 1e-9);
    same_attr(dist, whole, "explained_variance_", 1e-10);
    same_attr(dist, whole, "mean_", 1e-12);
    same_attr(dist, whole, "noise_variance_", 1e-9);
    gsb_model_free(whole);
    gsb_model_free(dist);
}

/* KMeans from a given init: the driver loop of python/gsb/dask/cluster.py in C. */
static void test_kmeans_loop(void)
{
    const int k = 3;
    double init[3 * D], mean[D] = {0}, C[3 * D];
    for (int q = 0; q < k * D; q++)
        init[q] = X[q]; /* the first rows */
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D), ia = gsb_array_2d(init, GSB_F64, k, D);
    gsb_model *whole = testing_model(S, "KMeans", "{\"n_clusters\": 3, \"n_init\": 1, \"tol\": 0}");
    gsb_model *dist = testing_model(S, "KMeans", "{\"n_clusters\": 3, \"n_init\": 1, \"tol\": 0}");
    const gsb_array *fins[4] = {&xa, NULL, NULL, &ia};
    CHECK_OK(gsb_model_call(whole, "fit", fins, 4, NULL, NULL));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            mean[j] += X[i * D + j] / N;
    for (int q = 0; q < k * D; q++)
        C[q] = init[q] - mean[q % D];
    gsb_array sa = gsb_array_2d(mean, GSB_F64, 1, D);
    double *st = NULL;
    int64_t len = 0, it, moved = 1;
    for (it = 0; it < 300 && moved; it++) {
        gsb_array ca = gsb_array_2d(C, GSB_F64, k, D);
        double *s[3];
        int64_t l[3];
        for (int p = 0; p < 3; p++) {
            gsb_array xp = gsb_array_2d(X + cut[p] * D, GSB_F64, cut[p + 1] - cut[p], D);
            const gsb_array *ins[4] = {&xp, NULL, &ca, &sa};
            s[p] = call_stats(dist, "stats_lloyd", ins, 4, NULL, &l[p]);
        }
        int64_t l01;
        double *s01 = merge(dist, s[0], l[0], s[1], l[1], &l01);
        free(st);
        st = merge(dist, s01, l01, s[2], l[2], &len);
        gsb_array stats = gsb_array_1d(st, GSB_F64, len);
        const gsb_array *step_in[3] = {&stats, NULL, &ca};
        gsb_result *r = NULL;
        CHECK_OK(gsb_model_call(dist, "lloyd_step", step_in, 3, NULL, &r));
        if (!r)
            break;
        testing_copy(gsb_result_get(r, "centers"), C, k * D);
        moved = (int64_t)testing_at(gsb_result_get(r, "moved"), 0);
        gsb_result_free(r);
    }
    /* converged without moving: the last statistics are those of the final centres */
    gsb_array ca = gsb_array_2d(C, GSB_F64, k, D), stats = gsb_array_1d(st, GSB_F64, len);
    const gsb_array *ins[3] = {&stats, &ca, &sa};
    char opts[64];
    snprintf(opts, sizeof opts, "{\"n_iter\": %lld}", (long long)it);
    CHECK_OK(gsb_model_call(dist, "fit_from_stats", ins, 3, opts, NULL));
    same_attr(dist, whole, "cluster_centers_", 1e-10);
    same_attr(dist, whole, "inertia_", 1e-10);
    same_attr(dist, whole, "n_iter_", 0);
    free(st);
    gsb_model_free(whole);
    gsb_model_free(dist);
}

/* LogisticRegression: the driver's loop over lbfgs_next, with losses summed over slices. */
static void test_logistic_replay(void)
{
    double yc[N], Xs[N * D];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D; j++)
            Xs[i * D + j] = (X[i * D + j] - 10.0 * j) / (j + 1);
        yc[i] = Xs[i * D] + 0.5 * Xs[i * D + 1] + 0.3 * testing_normal() > 0;
    }
    gsb_array xa = gsb_array_2d(Xs, GSB_F64, N, D), ya = gsb_array_1d(yc, GSB_F64, N);
    gsb_model *whole = testing_model(S, "LogisticRegression", "{\"C\": 0.5}");
    gsb_model *dist = testing_model(S, "LogisticRegression", "{\"C\": 0.5}");
    CHECK_OK(testing_fit(whole, &xa, &ya, NULL));
    const int P = D + 1, cols = 2 * P + 2;
    double *H = NULL, x[D + 1] = {0};
    int rows = 0, done = 0;
    while (!done && rows < 200) {
        double *acc = NULL;
        int64_t len = 0;
        for (int p = 0; p < 3; p++) {
            gsb_array xp = gsb_array_2d(Xs + cut[p] * D, GSB_F64, cut[p + 1] - cut[p], D);
            gsb_array yp = gsb_array_1d(yc + cut[p], GSB_F64, cut[p + 1] - cut[p]);
            gsb_array cp = gsb_array_1d(x, GSB_F64, P);
            const gsb_array *ins[4] = {&xp, &yp, NULL, &cp};
            int64_t l;
            double *s = call_stats(dist, "stats_lossgrad", ins, 4, "{\"n_classes\": 2}", &l);
            if (acc) {
                acc = merge(dist, acc, len, s, l, &len);
            } else {
                acc = s;
                len = l;
            }
        }
        H = realloc(H, (size_t)(rows + 1) * cols * sizeof *H);
        memcpy(H + rows * cols, x, (size_t)P * sizeof *x);
        memcpy(H + rows * cols + P, acc + 5, (size_t)(P + 2) * sizeof *H);
        free(acc);
        rows++;
        gsb_array ha = gsb_array_2d(H, GSB_F64, rows, cols);
        const gsb_array *ins[1] = {&ha};
        gsb_result *r = NULL;
        CHECK_OK(gsb_model_call(dist, "lbfgs_next", ins, 1, "{\"n_features\": 4}", &r));
        if (!r)
            break;
        done = (int)testing_at(gsb_result_get(r, "done"), 0);
        testing_copy(gsb_result_get(r, "x"), x, P);
        gsb_result_free(r);
    }
    CHECK(done);
    double classes[2] = {0, 1};
    gsb_array ha = gsb_array_2d(H, GSB_F64, rows, cols), ca = gsb_array_1d(classes, GSB_F64, 2);
    const gsb_array *ins[2] = {&ha, &ca};
    CHECK_OK(gsb_model_call(dist, "fit_from_stats", ins, 2, "{\"n_features\": 4}", NULL));
    same_attr(dist, whole, "coef_", 1e-9);
    same_attr(dist, whole, "intercept_", 1e-9);
    same_attr(dist, whole, "n_iter_", 0);
    /* a history that is not the minimiser's path is refused */
    H[0] = 1.0;
    CHECK_ERR(gsb_model_call(dist, "lbfgs_next", ins, 1, "{\"n_features\": 4}", NULL),
              GSB_EINVAL, "not at the point the minimiser asks for");
    free(H);
    gsb_model_free(whole);
    gsb_model_free(dist);
}

static void test_neighbors(void)
{
    const int k = 5, nq = 9;
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D), qa = gsb_array_2d(X + 3 * D, GSB_F64, nq, D);
    gsb_model *whole = testing_model(S, "NearestNeighbors", "{\"n_neighbors\": 5}");
    CHECK_OK(testing_fit(whole, &xa, NULL, NULL));
    double want_d[45], want_i[45];
    const gsb_array *qin[1] = {&qa};
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_call(whole, "kneighbors", qin, 1, NULL, &r));
    testing_copy(gsb_result_get(r, "distances"), want_d, 45);
    testing_copy(gsb_result_get(r, "indices"), want_i, 45);
    gsb_result_free(r);
    double *acc = NULL;
    int64_t len = 0;
    for (int p = 0; p < 3; p++) {
        gsb_model *part = testing_model(S, "NearestNeighbors", "{\"n_neighbors\": 5}");
        gsb_array xp = gsb_array_2d(X + cut[p] * D, GSB_F64, cut[p + 1] - cut[p], D);
        CHECK_OK(testing_fit(part, &xp, NULL, NULL));
        char opts[64];
        snprintf(opts, sizeof opts, "{\"offset\": %d}", cut[p]);
        int64_t l;
        double *s = call_stats(part, "stats_kneighbors", qin, 1, opts, &l);
        if (acc) {
            acc = merge(part, acc, len, s, l, &len);
        } else {
            acc = s;
            len = l;
        }
        gsb_model_free(part);
    }
    CHECK(len == 5 + 2 * nq * k);
    for (int q = 0; q < nq * k && acc; q++) {
        CHECK_CLOSE(acc[5 + q], want_d[q], 1e-12);
        CHECK(acc[5 + nq * k + q] == want_i[q]);
    }
    free(acc);
    gsb_model_free(whole);
}

static void test_errors(void)
{
    gsb_model *m = testing_model(S, "StandardScaler", NULL);
    gsb_array xa = gsb_array_2d(X, GSB_F64, 10, D);
    const gsb_array *ins[1] = {&xa};
    int64_t lm, lg;
    double *mom = call_stats(m, "stats_moments", ins, 1, NULL, &lm);
    gsb_model *r = testing_model(S, "Ridge", NULL);
    double *gram = call_stats(r, "stats_gram", ins, 1, NULL, &lg);
    gsb_array a = gsb_array_1d(mom, GSB_F64, lm), b = gsb_array_1d(gram, GSB_F64, lg);
    const gsb_array *mix[2] = {&a, &b};
    CHECK_ERR(gsb_model_call(m, "merge_stats", mix, 2, NULL, NULL), GSB_EINVAL,
              "cannot merge partial statistics of kinds 'moments' and 'gram'");
    const gsb_array *wrong[1] = {&a};
    CHECK_ERR(gsb_model_call(r, "fit_from_stats", wrong, 1, NULL, NULL), GSB_EINVAL,
              "of kind 'moments' where 'gram' are expected");
    CHECK(!gsb_model_is_fitted(r));
    /* a gram without targets cannot fit a regressor */
    CHECK_ERR(gsb_model_call(r, "fit_from_stats", mix + 1, 1, NULL, NULL), GSB_EINVAL,
              "hold no targets");
    mom[0] = 1.0; /* not the magic */
    CHECK_ERR(gsb_model_call(m, "fit_from_stats", wrong, 1, NULL, NULL), GSB_EINVAL,
              "not a gsb partial-statistics array");
    a.shape[0] = lm - 1; /* truncated */
    mom[0] = 4674386.0;
    CHECK_ERR(gsb_model_call(m, "fit_from_stats", wrong, 1, NULL, NULL), GSB_EINVAL,
              "truncated");
    /* a stats call on a fitted model leaves it fitted and unchanged */
    CHECK_OK(testing_fit(m, &xa, NULL, NULL));
    free(call_stats(m, "stats_moments", ins, 1, NULL, &lm));
    CHECK(gsb_model_is_fitted(m));
    free(mom);
    free(gram);
    gsb_model_free(m);
    gsb_model_free(r);
}

int main(void)
{
    if (testing_open(&S))
        return 1;
    make_data();
    RUN(test_scaler);
    RUN(test_linear);
    RUN(test_pca);
    RUN(test_kmeans_loop);
    RUN(test_logistic_replay);
    RUN(test_neighbors);
    RUN(test_errors);
    return testing_close(S);
}
