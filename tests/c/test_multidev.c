/*
 * test_multidev.c - multi-device sessions without GPUs: the host
 * communicator against plain sums, the row split, the device strings, and
 * every multi-device fit on "local?device=cpu:2" and "cpu:3" (the same code
 * path as cuda:0,1, over CPU ranks and the host communicator) against the
 * same fit on "local?device=cpu".  Uneven splits (n not divisible by the
 * ranks) throughout, and fewer rows than ranks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/comm.h"
#include "multidev/multidev.h"
#include "multidev_parity.h"

static gsb_session *S1, *S2, *S3;

static gsb_session *open_url(const char *url)
{
    gsb_session *s = NULL;
    CHECK_OK(gsb_open(url, &s));
    return s;
}

static void test_comm_host(void)
{
    gsb__comm *c = NULL;
    CHECK_OK(gsb__comm_host_open(3, &c));
    if (!c)
        return;
    CHECK(c->nranks == 3 && strcmp(c->name, "host") == 0);
    enum { N = 7 };
    double d[3][N], want[N];
    int64_t q[3][N];
    float f[3][N];
    int32_t k[3][N];
    testing_seed(5);
    for (int i = 0; i < N; i++) {
        want[i] = 0;
        for (int r = 0; r < 3; r++) {
            d[r][i] = testing_normal();
            want[i] += d[r][i];
            q[r][i] = (int64_t)1 << 40 | (r * 100 + i);
            f[r][i] = (float)(r + i);
            k[r][i] = -r * i;
        }
    }
    void *bd[3] = {d[0], d[1], d[2]}, *bq[3] = {q[0], q[1], q[2]};
    void *bf[3] = {f[0], f[1], f[2]}, *bk[3] = {k[0], k[1], k[2]};
    CHECK_OK(c->ops->allreduce_sum(c, bd, N, GSB_F64));
    CHECK_OK(c->ops->allreduce_sum(c, bq, N, GSB_I64));
    CHECK_OK(c->ops->allreduce_sum(c, bf, N, GSB_F32));
    CHECK_OK(c->ops->allreduce_sum(c, bk, N, GSB_I32));
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < N; i++) {
            CHECK_CLOSE(d[r][i], want[i], 1e-14);
            CHECK(d[r][i] == d[0][i]); /* bitwise the same on every rank */
            CHECK(q[r][i] == 3 * ((int64_t)1 << 40) + 300 + 3 * i);
            CHECK(f[r][i] == (float)(3 + 3 * i));
            CHECK(k[r][i] == -3 * i);
        }
    /* all-gather: every rank gets rank 0's block, then 1's, then 2's */
    double s[3][2] = {{1, 2}, {3, 4}, {5, 6}}, g[3][6];
    const void *send[3] = {s[0], s[1], s[2]};
    void *recv[3] = {g[0], g[1], g[2]};
    CHECK_OK(c->ops->allgather(c, send, recv, 2, GSB_F64));
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 6; i++)
            CHECK(g[r][i] == i + 1);
    /* broadcast from rank 1 */
    int64_t b[3][2] = {{0, 0}, {7, 8}, {0, 0}};
    void *bb[3] = {b[0], b[1], b[2]};
    CHECK_OK(c->ops->broadcast(c, bb, 2, GSB_I64, 1));
    CHECK(b[0][0] == 7 && b[2][1] == 8);
    CHECK_ERR(c->ops->broadcast(c, bb, 2, GSB_I64, 3), GSB_EINTERNAL, "root");
    CHECK_ERR(c->ops->allreduce_sum(c, bd, -1, GSB_F64), GSB_EINTERNAL, "bad count");
    c->ops->destroy(c);
    CHECK_ERR(gsb__comm_host_open(0, &c), GSB_EINVAL, "at least one rank");
}

static void test_split(void)
{
    static const int64_t ns[] = {0, 1, 2, 5, 10, 101};
    for (int a = 0; a < 6; a++)
        for (int ranks = 1; ranks <= 4; ranks++) {
            int64_t next = 0;
            for (int r = 0; r < ranks; r++) {
                int64_t r0, r1;
                gsb__multidev_split(ns[a], ranks, r, &r0, &r1);
                CHECK(r0 == next && r1 >= r0);
                CHECK(r1 - r0 <= ns[a] / ranks + 1 && r1 - r0 >= ns[a] / ranks);
                next = r1;
            }
            CHECK(next == ns[a]);
        }
}

static void test_urls(void)
{
    gsb_session *s = NULL;
    CHECK_ERR(gsb_open("local?device=cpu:0", &s), GSB_EINVAL, "cpu:N");
    CHECK_ERR(gsb_open("local?device=cpu:x", &s), GSB_EINVAL, "cpu:N");
    CHECK_ERR(gsb_open("local?device=cpu:17", &s), GSB_EINVAL, "cpu:N");
    CHECK_ERR(gsb_open("local?device=gpu:1", &s), GSB_EINVAL, "cuda:all");
    /* no GPU here: a clear refusal, never a silent single-device session */
    if (gsb_open("local?device=cuda:all", &s) == GSB_OK) {
        gsb_close(s); /* a machine with a GPU and NCCL */
    } else {
        CHECK(strstr(gsb_errmsg(), "cuda") || strstr(gsb_errmsg(), "CUDA") ||
              strstr(gsb_errmsg(), "NCCL"));
    }
    char *info = NULL;
    CHECK_OK(gsb_session_info(S3, &info));
    CHECK(info && strstr(info, "\"set\":\"cpu:3\"") && strstr(info, "\"comm\":\"host\""));
    gsb_free(info);
    s = open_url("local?device=cpu:1&memory_cap=1G"); /* one rank: the same path */
    if (s)
        gsb_close(s);
}

#define N 101
#define D 5
static double X[N * D], Y[N], W[N];

static void make_data(void)
{
    testing_seed(17);
    testing_fill_normal(X, N * D);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D; j++)
            X[i * D + j] = X[i * D + j] * (1 + j) + 3.0 * j;
        Y[i] = 1.5 * X[i * D] - X[i * D + 2] + 0.25 * X[i * D + 4] + 0.1 * testing_normal();
        W[i] = 0.5 + testing_uniform();
    }
}

static void test_fits_two(void) { parity_suite(S2, S1, X, Y, W, N, D, GSB_F64, 1e-9); }
static void test_fits_three(void) { parity_suite(S3, S1, X, Y, W, N, D, GSB_F64, 1e-9); }
static void test_fits_float32(void) { parity_suite(S3, S1, X, Y, W, N, D, GSB_F32, 1e-4); }

/* two rows over three ranks: one rank has none */
static void test_fewer_rows_than_ranks(void)
{
    parity_suite(S3, S1, X, Y, W, 2, D, GSB_F64, 1e-12);
    gsb_array xa = gsb_array_2d(X, GSB_F64, 1, D);
    CHECK(parity_check(S3, S1, "MinMaxScaler", NULL, &xa, NULL, NULL, 0));
}

/* no multi-device fit: runs on the first device, the same model, one warning */
static void test_fallback(void)
{
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D);
    const char *p = "{\"n_clusters\": 3, \"n_init\": 1, \"random_state\": 0}";
    gsb_model *a = parity_fit(S2, "KMeans", p, &xa, NULL, NULL);
    CHECK(strstr(gsb_warnings(), "first device") != NULL);
    gsb_model *b = parity_fit(S1, "KMeans", p, &xa, NULL, NULL);
    if (a && b)
        parity_all(a, b, 0);
    gsb_model *c = parity_fit(S2, "KMeans", p, &xa, NULL, NULL);
    CHECK(strstr(gsb_warnings(), "first device") == NULL); /* said once */
    gsb_model_free(a);
    gsb_model_free(b);
    gsb_model_free(c);
}

/* fit_transform composes the multi-device fit with transform on the first device */
static void test_fit_transform(void)
{
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D);
    const gsb_array *ins[1] = {&xa};
    gsb_result *ra = NULL, *rb = NULL;
    gsb_model *a = testing_model(S2, "StandardScaler", NULL);
    gsb_model *b = testing_model(S1, "StandardScaler", NULL);
    CHECK_OK(gsb_model_call(a, "fit_transform", ins, 1, NULL, &ra));
    CHECK_OK(gsb_model_call(b, "fit_transform", ins, 1, NULL, &rb));
    CHECK(strstr(gsb_warnings(), "first device") == NULL);
    if (ra && rb) {
        const gsb_array *u = gsb_result_array(ra, 0), *v = gsb_result_array(rb, 0);
        for (int64_t i = 0; i < N * D; i++)
            CHECK_CLOSE(testing_at(u, i), testing_at(v, i), 1e-12);
    }
    gsb_result_free(ra);
    gsb_result_free(rb);
    gsb_model_free(a);
    gsb_model_free(b);
    /* KMeans declares its own fit_predict: the multi-device fit, then predict */
    gsb_array ia = gsb_array_2d(X, GSB_F64, 3, D);
    const gsb_array *kin[4] = {&xa, NULL, NULL, &ia};
    const char *p = "{\"n_clusters\": 3, \"n_init\": 1}";
    a = testing_model(S3, "KMeans", p);
    b = testing_model(S1, "KMeans", p);
    ra = rb = NULL;
    CHECK_OK(gsb_model_call(a, "fit_predict", kin, 4, NULL, &ra));
    CHECK(strstr(gsb_warnings(), "first device") == NULL);
    CHECK_OK(gsb_model_call(b, "fit_predict", kin, 4, NULL, &rb));
    if (ra && rb) {
        const gsb_array *u = gsb_result_get(ra, "labels"), *v = gsb_result_get(rb, "labels");
        CHECK(u && v);
        for (int64_t i = 0; u && v && i < N; i++)
            CHECK(testing_at(u, i) == testing_at(v, i));
    }
    gsb_result_free(ra);
    gsb_result_free(rb);
    gsb_model_free(a);
    gsb_model_free(b);
}

/* kNN under a memory cap too small for the shards (cpu:N under a cap
 * behaves as small GPUs): no shards, one warning, the first device's
 * (streamed) search, the same neighbours */
static void test_knn_shards_too_big(void)
{
    enum { BIG = 2000 }; /* 80 KB: shards of 40 KB, more than half the cap */
    gsb_session *capped = open_url("local?device=cpu:2&memory_cap=64K");
    double *big = malloc(sizeof(double) * BIG * D);
    if (!capped || !big) {
        free(big);
        return;
    }
    testing_fill_normal(big, BIG * D);
    gsb_array xa = gsb_array_2d(big, GSB_F64, BIG, D);
    gsb_model *a = parity_fit(capped, "NearestNeighbors", NULL, &xa, NULL, NULL);
    CHECK(strstr(gsb_warnings(), "first device") != NULL);
    CHECK(strstr(gsb_warnings(), "does not fit") != NULL);
    gsb_model *b = parity_fit(S1, "NearestNeighbors", NULL, &xa, NULL, NULL);
    if (a && b) {
        gsb_result *ra = NULL, *rb = NULL;
        const gsb_array *ins[1] = {&xa};
        CHECK_OK(gsb_model_call(a, "kneighbors", ins, 1, NULL, &ra));
        CHECK_OK(gsb_model_call(b, "kneighbors", ins, 1, NULL, &rb));
        const gsb_array *u = ra ? gsb_result_get(ra, "indices") : NULL;
        const gsb_array *v = rb ? gsb_result_get(rb, "indices") : NULL;
        CHECK(u && v && testing_numel(u) == testing_numel(v));
        for (int64_t i = 0; u && v && i < testing_numel(v); i++)
            CHECK(testing_at(u, i) == testing_at(v, i));
        gsb_result_free(ra);
        gsb_result_free(rb);
    }
    if (a)
        gsb_model_free(a);
    if (b)
        gsb_model_free(b);
    gsb_close(capped);
    free(big);
}

/* Lasso / ElasticNet are split (no fallback warning), and warm_start starts
 * the split fit from the previous coef_ as on one device (same epochs) */
static void test_enet_warm_start(void)
{
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D), ya = gsb_array_1d(Y, GSB_F64, N);
    gsb_model *m[2] = {testing_model(S3, "Lasso", "{\"alpha\": 0.02, \"warm_start\": true}"),
                       testing_model(S1, "Lasso", "{\"alpha\": 0.02, \"warm_start\": true}")};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(testing_fit(m[i], &xa, &ya, NULL));
        if (i == 0)
            CHECK(strstr(gsb_warnings(), "first device") == NULL);
        CHECK_OK(gsb_model_set_params(m[i], "{\"alpha\": 0.021}"));
        CHECK_OK(testing_fit(m[i], &xa, &ya, NULL));
    }
    double it[2] = {0, 0}, cold = 0;
    for (int i = 0; i < 2; i++)
        CHECK(testing_attr(m[i], "n_iter_", &it[i], 1, NULL) == 1);
    parity_all(m[0], m[1], 1e-9);
    gsb_model *c = parity_fit(S1, "Lasso", "{\"alpha\": 0.021}", &xa, &ya, NULL);
    CHECK(c && testing_attr(c, "n_iter_", &cold, 1, NULL) == 1);
    CHECK(it[0] == it[1] && it[0] < cold); /* the warm start shortened the path */
    for (int i = 0; i < 2; i++)
        gsb_model_free(m[i]);
    if (c)
        gsb_model_free(c);
}

/* a fit that fails in the statistics leaves the model unfitted, as on one device */
static void test_failure_unfits(void)
{
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, D);
    gsb_array ia = gsb_array_2d(X, GSB_F64, 3, D);
    const gsb_array *kin[4] = {&xa, NULL, NULL, &ia};
    gsb_model *a = testing_model(S2, "KMeans", "{\"n_clusters\": 3, \"n_init\": 1}");
    CHECK_OK(gsb_model_call(a, "fit", kin, 4, NULL, NULL));
    CHECK(gsb_model_is_fitted(a));
    gsb_array bad = gsb_array_2d(X, GSB_F64, 2, D); /* 2 centres for n_clusters=3 */
    kin[3] = &bad;
    CHECK_ERR(gsb_model_call(a, "fit", kin, 4, NULL, NULL), GSB_EINVAL,
              "does not match the number of clusters 3");
    CHECK(!gsb_model_is_fitted(a));
    gsb_model_free(a);
}

int main(void)
{
    S1 = open_url("local?device=cpu");
    S2 = open_url("local?device=cpu:2");
    S3 = open_url("local?device=cpu:3");
    if (!S1 || !S2 || !S3)
        return 1;
    make_data();
    RUN(test_comm_host);
    RUN(test_split);
    RUN(test_urls);
    RUN(test_fits_two);
    RUN(test_fits_three);
    RUN(test_fits_float32);
    RUN(test_fewer_rows_than_ranks);
    RUN(test_fallback);
    RUN(test_fit_transform);
    RUN(test_failure_unfits);
    RUN(test_enet_warm_start);
    RUN(test_knn_shards_too_big);
    gsb_close(S2);
    gsb_close(S3);
    return testing_close(S1);
}
