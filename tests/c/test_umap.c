/*
 * test_umap.c - UMAP through the public API: the embedding of well separated
 * blobs keeps them apart (unsupervised, supervised, every init and metric),
 * fit_transform / transform / the "graph" method agree with the fitted
 * state, a random_state reproduces the fit, progress and cancellation, a
 * model exported and imported transforms alike, and bad input fails with
 * scikit-learn's and umap-learn's messages.  Runs on the device the session
 * picks ($GSB_DEVICE=cuda under tools/gpu-check).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_api_helpers.h"

static gsb_session *S;

enum { NB = 4, PER = 60, N = NB * PER, D = 6 };

/* NB blobs of PER points in D dimensions, centres 10 apart; labels */
static void blobs(double *X, double *y, uint64_t seed)
{
    testing_seed(seed);
    for (int i = 0; i < N; i++) {
        int b = i % NB;
        y[i] = b;
        for (int j = 0; j < D; j++)
            X[i * D + j] = (j == b ? 10.0 : 0.0) + testing_normal();
    }
}

/* a fit's embedding (N x 2 as doubles); the status */
static int fit_embed(const char *params, const double *X, const double *y, const double *init,
                     double *emb)
{
    gsb_model *m = testing_model(S, "UMAP", params);
    if (!m)
        return GSB_EINTERNAL;
    gsb_array Xa = gsb_array_2d((void *)X, GSB_F64, N, D), ya = gsb_array_1d((void *)y, GSB_F64, N);
    gsb_array ia = gsb_array_2d((void *)init, GSB_F64, N, 2);
    const gsb_array *ins[3] = {&Xa, y ? &ya : NULL, init ? &ia : NULL};
    int rc = gsb_model_call(m, "fit", ins, init ? 3 : y ? 2 : 1, NULL, NULL);
    if (rc == GSB_OK) {
        gsb_array info;
        CHECK(testing_attr(m, "embedding_", emb, N * 2, &info) == N * 2);
        CHECK(info.dtype == GSB_F32 && info.ndim == 2 && info.shape[1] == 2);
    }
    gsb_model_free(m);
    return rc;
}

/* ratio of the largest within-blob distance to the smallest distance between
 * blob means: < 1 when every blob is a separate island */
static double separation(const double *emb, const double *y)
{
    double mean[NB][2] = {{0}};
    for (int i = 0; i < N; i++)
        for (int d = 0; d < 2; d++)
            mean[(int)y[i]][d] += emb[i * 2 + d] / PER;
    double within = 0, between = INFINITY;
    for (int i = 0; i < N; i++) {
        double r = hypot(emb[i * 2] - mean[(int)y[i]][0], emb[i * 2 + 1] - mean[(int)y[i]][1]);
        within = r > within ? r : within;
    }
    for (int a = 0; a < NB; a++)
        for (int b = a + 1; b < NB; b++) {
            double r = hypot(mean[a][0] - mean[b][0], mean[a][1] - mean[b][1]);
            between = r < between ? r : between;
        }
    return within / between;
}

static void test_blobs_separate(void)
{
    double X[N * D], y[N], emb[N * 2];
    blobs(X, y, 1);
    static const char *const params[] = {
        "{\"random_state\": 0, \"n_neighbors\": 10}",
        "{\"random_state\": 1, \"init\": \"random\"}",
        "{\"random_state\": 2, \"init\": \"pca\", \"n_epochs\": 100}",
        "{\"random_state\": 3, \"metric\": \"manhattan\", \"min_dist\": 0.5, \"spread\": 2}",
        "{\"random_state\": 4, \"metric\": \"cosine\"}",
        "{\"random_state\": 5, \"metric\": \"correlation\", \"set_op_mix_ratio\": 0.5}",
        "{\"random_state\": 6, \"a\": 1.8, \"b\": 0.8, \"negative_sample_rate\": 2}",
        "{\"random_state\": 7, \"local_connectivity\": 2.0, \"repulsion_strength\": 2.0}"};
    for (size_t t = 0; t < sizeof params / sizeof params[0]; t++) {
        CHECK_OK(fit_embed(params[t], X, NULL, NULL, emb));
        double s = separation(emb, y);
        if (!(s < 0.5))
            fprintf(stderr, "params %s: separation %g\n", params[t], s);
        CHECK(s < 0.5);
    }
}

static void test_init_array_and_supervised(void)
{
    double X[N * D], y[N], emb[N * 2], init[N * 2];
    blobs(X, y, 2);
    for (int i = 0; i < N; i++) { /* start each blob on its own corner */
        init[i * 2] = (double)((int)y[i] % 2) * 5 + 0.01 * i;
        init[i * 2 + 1] = (double)((int)y[i] / 2) * 5 - 0.01 * i;
    }
    CHECK_OK(fit_embed("{\"random_state\": 0}", X, NULL, init, emb));
    CHECK(separation(emb, y) < 0.5);
    /* supervised: mixed blobs (each label spread over two blobs) are pulled
     * together by label, and -1 (unlabelled) is accepted */
    double ymix[N];
    for (int i = 0; i < N; i++)
        ymix[i] = i % 13 == 0 ? -1 : (double)(((int)y[i]) / 2);
    CHECK_OK(fit_embed("{\"random_state\": 0, \"target_weight\": 0.9}", X, ymix, NULL, emb));
    CHECK(separation(emb, y) < 1.5); /* still finite, still laid out */
    for (int i = 0; i < N * 2; i++)
        CHECK(isfinite(emb[i]));
}

static void test_reproducible_and_transform(void)
{
    double X[N * D], y[N];
    blobs(X, y, 3);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
    double e1[N * 2], e2[N * 2], ft[N * 2], tr[N * 2];
    gsb_model *a = testing_model(S, "UMAP", "{\"random_state\": 42, \"n_epochs\": 120}");
    gsb_model *b = testing_model(S, "UMAP", "{\"random_state\": 42, \"n_epochs\": 120}");
    CHECK_OK(gsb_model_fit(a, &Xa, NULL));
    CHECK(testing_call(b, "fit_transform", &Xa, "embedding", ft, N * 2, NULL) == N * 2);
    CHECK(testing_attr(a, "embedding_", e1, N * 2, NULL) == N * 2);
    CHECK(testing_attr(b, "embedding_", e2, N * 2, NULL) == N * 2);
    CHECK(memcmp(e1, e2, sizeof e1) == 0);
    CHECK(memcmp(e1, ft, sizeof e1) == 0);
    /* transform of the training data is embedding_ (umap-learn's shortcut) */
    CHECK(testing_call(a, "transform", &Xa, "embedding", tr, N * 2, NULL) == N * 2);
    CHECK(memcmp(e1, tr, sizeof e1) == 0);
    /* new points from the blobs land next to their own blob */
    double Q[N * D], yq[N], eq[N * 2];
    blobs(Q, yq, 4);
    gsb_array Qa = gsb_array_2d(Q, GSB_F64, N, D);
    CHECK(testing_call(a, "transform", &Qa, "embedding", eq, N * 2, NULL) == N * 2);
    int right = 0;
    for (int i = 0; i < N; i++) {
        int best = -1;
        double bd = INFINITY;
        for (int j = 0; j < N; j++) {
            double d = hypot(eq[i * 2] - e1[j * 2], eq[i * 2 + 1] - e1[j * 2 + 1]);
            if (d < bd)
                bd = d, best = j;
        }
        right += y[best] == yq[i];
    }
    CHECK(right >= N * 95 / 100);
    /* the transform is reproducible too (transform_seed) */
    double eq2[N * 2];
    CHECK(testing_call(a, "transform", &Qa, "embedding", eq2, N * 2, NULL) == N * 2);
    CHECK(memcmp(eq, eq2, sizeof eq) == 0);
    gsb_model_free(a);
    gsb_model_free(b);
}

static void test_graph_method(void)
{
    double X[N * D], y[N];
    blobs(X, y, 5);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
    gsb_model *m = testing_model(S, "UMAP", "{\"n_epochs\": 0, \"n_neighbors\": 8}");
    CHECK_OK(gsb_model_fit(m, &Xa, NULL));
    gsb_result *r = NULL;
    CHECK_OK(gsb_model_call(m, "graph", NULL, 0, NULL, &r));
    const gsb_array *ptr = gsb_result_get(r, "indptr"), *ind = gsb_result_get(r, "indices");
    const gsb_array *val = gsb_result_get(r, "data");
    CHECK(ptr && ind && val && ptr->shape[0] == N + 1 && ptr->dtype == GSB_I64);
    if (ptr && ind && val) {
        const int64_t *p = ptr->data;
        const int32_t *c = ind->data;
        const float *v = val->data;
        CHECK(p[0] == 0 && p[N] == ind->shape[0] && p[N] == val->shape[0]);
        /* symmetric, memberships in (0, 1], every point has its nearest neighbour at 1
         * (up to float32's rounding of 1 + b - b, as umap-learn's scipy sums) */
        for (int i = 0; i < N; i++) {
            float top = 0;
            for (int64_t e = p[i]; e < p[i + 1]; e++) {
                CHECK(v[e] > 0 && v[e] <= 1.0f + 1e-6f && c[e] != i);
                top = v[e] > top ? v[e] : top;
                int found = 0;
                for (int64_t f = p[c[e]]; f < p[c[e] + 1]; f++)
                    found |= c[f] == i && v[f] == v[e];
                CHECK(found);
            }
            CHECK(fabsf(top - 1.0f) <= 1e-6f);
        }
        /* at least n_neighbors - 1 edges a point (its own neighbours) */
        for (int i = 0; i < N; i++)
            CHECK(p[i + 1] - p[i] >= 7);
    }
    gsb_result_free(r);
    gsb_model_free(m);
}

static int cancel_at_epoch_30(void *data, const char *stage, int64_t it, double loss)
{
    (void)loss;
    int64_t *last = data;
    if (strcmp(stage, "epoch") == 0)
        *last = it;
    return strcmp(stage, "epoch") == 0 && it >= 30;
}

static void test_progress_and_cancel(void)
{
    double X[N * D], y[N];
    blobs(X, y, 6);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D);
    gsb_model *m = testing_model(S, "UMAP", "{\"n_epochs\": 100}");
    int64_t last = 0;
    gsb_model_set_progress(m, cancel_at_epoch_30, &last);
    CHECK_ERR(gsb_model_fit(m, &Xa, NULL), GSB_ECANCELLED, "cancelled at epoch");
    CHECK(last >= 30 && last < 40);
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_set_progress(m, NULL, NULL);
    CHECK_OK(gsb_model_fit(m, &Xa, NULL));
    gsb_model_free(m);
}

static void test_export_import(void)
{
    double X[N * D], y[N], Q[N * D], yq[N], e1[N * 2], e2[N * 2];
    blobs(X, y, 7);
    blobs(Q, yq, 8);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D), Qa = gsb_array_2d(Q, GSB_F64, N, D);
    gsb_model *m = testing_model(S, "UMAP", "{\"random_state\": 3, \"n_epochs\": 60}");
    CHECK_OK(gsb_model_fit(m, &Xa, NULL));
    void *blob = NULL;
    size_t len = 0;
    CHECK_OK(gsb_model_export(m, &blob, &len));
    gsb_model *m2 = NULL;
    CHECK_OK(gsb_model_import(S, blob, len, &m2));
    gsb_free(blob);
    CHECK(testing_call(m, "transform", &Qa, "embedding", e1, N * 2, NULL) == N * 2);
    CHECK(m2 && testing_call(m2, "transform", &Qa, "embedding", e2, N * 2, NULL) == N * 2);
    CHECK(memcmp(e1, e2, sizeof e1) == 0);
    gsb_model_free(m);
    gsb_model_free(m2);
}

static void test_bad_input(void)
{
    double X[N * D], y[N], emb[N * 2];
    blobs(X, y, 9);
    gsb_model *m = NULL;
    CHECK_ERR(gsb_model_create(S, "UMAP", "{\"n_neighbors\": 1}", &m), GSB_EPARAM,
              "The 'n_neighbors' parameter of UMAP must be an int in the range [2, inf). "
              "Got 1 instead.");
    CHECK_ERR(fit_embed("{\"n_neighbors\": 241}", X, NULL, NULL, emb), GSB_EINVAL,
              "Expected n_neighbors <= n_samples, but n_neighbors = 241, n_samples = 240");
    CHECK_OK(fit_embed("{\"n_neighbors\": 240, \"n_epochs\": 20}", X, NULL, NULL, emb));
    CHECK_ERR(fit_embed("{\"min_dist\": 2.0, \"spread\": 1.0}", X, NULL, NULL, emb), GSB_EINVAL,
              "min_dist must be less than or equal to spread");
    CHECK_ERR(fit_embed("{\"metric\": \"chebyshev\"}", X, NULL, NULL, emb), GSB_EUNSUPPORTED,
              "metric='chebyshev' is not supported");
    CHECK_ERR(fit_embed("{\"densmap\": true}", X, NULL, NULL, emb), GSB_EUNSUPPORTED,
              "densmap=True");
    CHECK_ERR(gsb_model_create(S, "UMAP", "{\"set_op_mix_ratio\": 1.5}", &m), GSB_EPARAM,
              "'set_op_mix_ratio' parameter of UMAP");
    double init[N * 3] = {0};
    gsb_model *u = testing_model(S, "UMAP", NULL);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, D), ia = gsb_array_2d(init, GSB_F64, N, 3);
    const gsb_array *ins[3] = {&Xa, NULL, &ia};
    CHECK_ERR(gsb_model_call(u, "fit", ins, 3, NULL, NULL), GSB_EINVAL,
              "init ndarray must match n_components");
    X[17] = NAN;
    CHECK_ERR(gsb_model_fit(u, &Xa, NULL), GSB_EINVAL, "Input X contains NaN.");
    X[17] = 0;
    CHECK_OK(gsb_model_call(u, "fit", ins, 1, NULL, NULL));
    double Q[5 * (D + 1)] = {0};
    gsb_array Qa = gsb_array_2d(Q, GSB_F64, 5, D + 1);
    const gsb_array *qin[1] = {&Qa};
    gsb_result *r = NULL;
    CHECK_ERR(gsb_model_call(u, "transform", qin, 1, NULL, &r), GSB_EINVAL,
              "X has 7 features, but UMAP is expecting 6 features as input.");
    gsb_model_free(u);
    gsb_model *fresh = testing_model(S, "UMAP", NULL);
    CHECK_ERR(gsb_model_call(fresh, "transform", ins, 1, NULL, &r), GSB_ENOTFITTED,
              "not fitted");
    gsb_model_free(fresh);
}

/* more components than 30 points have eigenvectors: umap-learn's warning, a
 * random layout, still finite; none for a spectral layout that works */
static void test_spectral_fallback_warns(void)
{
    double X[30 * 5];
    testing_seed(10);
    testing_fill_normal(X, 30 * 5);
    gsb_array Xa = gsb_array_2d(X, GSB_F64, 30, 5);
    gsb_model *m = testing_model(S, "UMAP", "{\"n_components\": 40, \"n_neighbors\": 5, "
                                            "\"n_epochs\": 10}");
    CHECK_OK(gsb_model_fit(m, &Xa, NULL));
    const char *w = gsb_warnings();
    CHECK(w && strstr(w, "UserWarning") && strstr(w, "Spectral initialisation failed!"));
    double emb[30 * 40];
    CHECK(testing_attr(m, "embedding_", emb, 30 * 40, NULL) == 30 * 40);
    for (int i = 0; i < 30 * 40; i++)
        CHECK(isfinite(emb[i]));
    CHECK_OK(gsb_model_set_params(m, "{\"n_components\": 2}"));
    CHECK_OK(gsb_model_fit(m, &Xa, NULL));
    w = gsb_warnings();
    CHECK(!w || !strstr(w, "Spectral"));
    gsb_model_free(m);
}

int main(void)
{
    if (testing_open(&S))
        return 1;
    RUN(test_blobs_separate);
    RUN(test_init_array_and_supervised);
    RUN(test_reproducible_and_transform);
    RUN(test_graph_method);
    RUN(test_progress_and_cancel);
    RUN(test_export_import);
    RUN(test_bad_input);
    RUN(test_spectral_fallback_warns);
    return testing_close(S);
}
