/*
 * multidev_parity.h - a multi-device fit against the one-device fit (header
 * only): the same estimator, parameters and data fitted in two sessions, and
 * every public fitted attribute compared (names, shapes, values).  Shared by
 * tests/c/test_multidev.c (cpu:N against cpu) and
 * tests/cuda/test_cuda_multigpu.c (cuda:all against cuda:0).
 */
#ifndef GSB_TEST_MULTIDEV_PARITY_H
#define GSB_TEST_MULTIDEV_PARITY_H

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_api_helpers.h"

/* fit(X[, y][, w]) of est in session s; NULL (a failed check) on error. */
static inline gsb_model *parity_fit(gsb_session *s, const char *est, const char *params,
                                    const gsb_array *X, const gsb_array *y, const gsb_array *w)
{
    gsb_model *m = testing_model(s, est, params);
    if (!m)
        return NULL;
    int rc = testing_fit(m, X, y, w);
    CHECK_OK(rc);
    if (rc != GSB_OK) {
        gsb_model_free(m);
        return NULL;
    }
    return m;
}

/* Attribute name of a and b: same shape, values within tol relative
 * (|a - b| <= tol (|b| + scale), scale the attribute's largest |b|, at least
 * 1: an intercept near 0 is the difference of terms of the data's size). */
static inline void parity_attr(gsb_model *a, gsb_model *b, const char *name, double tol)
{
    gsb_result *ra = NULL, *rb = NULL;
    CHECK_OK(gsb_model_get_attr(a, name, &ra));
    CHECK_OK(gsb_model_get_attr(b, name, &rb));
    if (!ra || !rb) {
        gsb_result_free(ra);
        gsb_result_free(rb);
        return;
    }
    const gsb_array *x = gsb_result_array(ra, 0), *y = gsb_result_array(rb, 0);
    int64_t n = testing_numel(y);
    CHECK(x->ndim == y->ndim && testing_numel(x) == n);
    CHECK(x->dtype == y->dtype);
    double scale = 1, worst = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(testing_at(y, i)));
    int bad = 0;
    for (int64_t i = 0; i < n && testing_numel(x) == n; i++) {
        double u = testing_at(x, i), v = testing_at(y, i);
        double err = fabs(u - v) / (fabs(v) + scale);
        if (!(err <= tol)) /* NaN fails */
            bad = 1;
        if (err > worst || err != err)
            worst = err;
    }
    if (bad)
        fprintf(stderr, "  attribute %s: relative error %.3g > %.3g\n", name, worst, tol);
    CHECK(!bad);
    gsb_result_free(ra);
    gsb_result_free(rb);
}

/* Every public attribute of the one-device model one, in multi too. */
static inline void parity_all(gsb_model *multi, gsb_model *one, double tol)
{
    char *ja = NULL, *jb = NULL;
    CHECK_OK(gsb_model_list_attrs(multi, &ja));
    CHECK_OK(gsb_model_list_attrs(one, &jb));
    json_t *la = ja ? json_loads(ja, 0, NULL) : NULL, *lb = jb ? json_loads(jb, 0, NULL) : NULL;
    CHECK(la && lb && json_array_size(la) == json_array_size(lb));
    if (la && lb && json_array_size(la) != json_array_size(lb))
        fprintf(stderr, "  attributes: multi-device %s, one device %s\n", ja, jb);
    size_t i;
    json_t *v;
    json_array_foreach(lb, i, v) parity_attr(multi, one, json_string_value(v), tol);
    json_decref(la);
    json_decref(lb);
    gsb_free(ja);
    gsb_free(jb);
}

/* est fitted in both sessions, compared; 1 when both fits ran. */
static inline int parity_check(gsb_session *multi, gsb_session *one, const char *est,
                               const char *params, const gsb_array *X, const gsb_array *y,
                               const gsb_array *w, double tol)
{
    gsb_model *a = parity_fit(multi, est, params, X, y, w);
    gsb_model *b = parity_fit(one, est, params, X, y, w);
    if (a && b)
        parity_all(a, b, tol);
    int ok = a && b;
    if (a)
        gsb_model_free(a);
    if (b)
        gsb_model_free(b);
    return ok;
}

/* KMeans from an explicit init (the k x d rows given) in both sessions: the
 * same labels, centres and inertia (within tol), and n_iter_ in float64 (in
 * float32 the centring mean may round one ulp apart between a GPU's
 * float32 column means and the merged float64 moments, and with tol=0 the
 * last iteration can hinge on that). */
static inline void parity_kmeans(gsb_session *multi, gsb_session *one, const gsb_array *X,
                                 const gsb_array *w, const gsb_array *init, double tol)
{
    char params[96];
    snprintf(params, sizeof params, "{\"n_clusters\": %lld, \"n_init\": 1, \"tol\": 0}",
             (long long)init->shape[0]);
    gsb_model *a = testing_model(multi, "KMeans", params);
    gsb_model *b = testing_model(one, "KMeans", params);
    const gsb_array *ins[4] = {X, NULL, w, init};
    if (a && b) {
        CHECK_OK(gsb_model_call(a, "fit", ins, 4, NULL, NULL));
        CHECK(strstr(gsb_warnings(), "first device") == NULL);
        CHECK_OK(gsb_model_call(b, "fit", ins, 4, NULL, NULL));
        parity_attr(a, b, "labels_", 0); /* identical */
        parity_attr(a, b, "cluster_centers_", tol);
        parity_attr(a, b, "inertia_", tol);
        parity_attr(a, b, "n_features_in_", 0);
        if (X->dtype == GSB_F64)
            parity_attr(a, b, "n_iter_", 0);
    }
    if (a)
        gsb_model_free(a);
    if (b)
        gsb_model_free(b);
}

/* LogisticRegression in both sessions: the same classes and coefficients
 * (within tol), n_iter_ in float64 (float32 on a GPU sums the losses in
 * float32, and the last iteration can hinge on that). */
static inline void parity_logistic(gsb_session *multi, gsb_session *one, const char *params,
                                   const gsb_array *X, const gsb_array *y, const gsb_array *w,
                                   double tol)
{
    gsb_model *a = parity_fit(multi, "LogisticRegression", params, X, y, w);
    CHECK(strstr(gsb_warnings(), "first device") == NULL);
    gsb_model *b = parity_fit(one, "LogisticRegression", params, X, y, w);
    if (a && b) {
        parity_attr(a, b, "classes_", 0);
        parity_attr(a, b, "coef_", tol);
        parity_attr(a, b, "intercept_", tol);
        parity_attr(a, b, "n_features_in_", 0);
        if (X->dtype == GSB_F64)
            parity_attr(a, b, "n_iter_", 0);
    }
    if (a)
        gsb_model_free(a);
    if (b)
        gsb_model_free(b);
}

/* Result res of method(X) (X NULL: none) with options opts on a and b: the
 * same shape and dtype; integers (indices, labels) identical, floats within
 * tol relative (to the largest |value|, at least 1). */
static inline void parity_call(gsb_model *a, gsb_model *b, const char *method,
                               const gsb_array *X, const char *opts, const char *res,
                               double tol)
{
    const gsb_array *ins[1] = {X};
    gsb_result *ra = NULL, *rb = NULL;
    CHECK_OK(gsb_model_call(a, method, ins, X ? 1 : 0, opts, &ra));
    CHECK(strstr(gsb_warnings(), "first device") == NULL);
    CHECK_OK(gsb_model_call(b, method, ins, X ? 1 : 0, opts, &rb));
    const gsb_array *u = ra ? gsb_result_get(ra, res) : NULL;
    const gsb_array *v = rb ? gsb_result_get(rb, res) : NULL;
    CHECK(u && v);
    if (u && v) {
        int64_t n = testing_numel(v);
        CHECK(u->ndim == v->ndim && u->dtype == v->dtype && testing_numel(u) == n);
        int exact = v->dtype != GSB_F32 && v->dtype != GSB_F64;
        double scale = 1, worst = 0;
        for (int64_t i = 0; i < n; i++)
            scale = fmax(scale, fabs(testing_at(v, i)));
        for (int64_t i = 0; i < n && testing_numel(u) == n; i++) {
            double err = fabs(testing_at(u, i) - testing_at(v, i)) / scale;
            if (!(exact ? err == 0 : err <= tol) && !(err <= worst)) /* NaN counts */
                worst = err != err ? INFINITY : err;
        }
        if (worst > 0)
            fprintf(stderr, "  %s.%s %s (%s): relative error %.3g > %.3g\n",
                    gsb_model_estimator(a), method, res, opts ? opts : "", worst,
                    exact ? 0 : tol);
        CHECK(worst == 0);
    }
    gsb_result_free(ra);
    gsb_result_free(rb);
}

/* The neighbours estimators fitted on X (n rows) in both sessions, the
 * multi-device search (split index, merged top k) against the one-device
 * one: kneighbors of queries Q and of the training rows themselves
 * (leave-one-out), the same indices and distances within tol; k up to
 * every row (a shard shorter than k); the classifier's and regressor's
 * predictions, which read the merged lists. */
static inline void parity_knn(gsb_session *multi, gsb_session *one, const gsb_array *X,
                              const gsb_array *Q, const gsb_array *y, const gsb_array *labels,
                              double tol)
{
    int64_t n = X->shape[0];
    static const char *const metrics[] = {"{\"n_neighbors\": 5}",
                                          "{\"n_neighbors\": 4, \"metric\": \"manhattan\"}",
                                          "{\"n_neighbors\": 3, \"metric\": \"cosine\"}"};
    for (int t = 0; t < 3; t++) {
        gsb_model *a = parity_fit(multi, "NearestNeighbors", metrics[t], X, NULL, NULL);
        CHECK(strstr(gsb_warnings(), "first device") == NULL);
        gsb_model *b = parity_fit(one, "NearestNeighbors", metrics[t], X, NULL, NULL);
        if (a && b) {
            char opt[64];
            int64_t ks[3] = {1, n < 5 ? n : 5, n};
            for (int i = 0; i < 3; i++) {
                snprintf(opt, sizeof opt, "{\"n_neighbors\": %lld}", (long long)ks[i]);
                parity_call(a, b, "kneighbors", Q, opt, "indices", 0);
                parity_call(a, b, "kneighbors", Q, opt, "distances", tol);
                if (ks[i] < n) { /* leave-one-out: k < n */
                    parity_call(a, b, "kneighbors", NULL, opt, "indices", 0);
                    parity_call(a, b, "kneighbors", NULL, opt, "distances", tol);
                }
            }
            /* refitted on fewer rows: the shards follow the new training rows */
            gsb_array head = *X;
            head.shape[0] = n > 1 ? n - 1 : n;
            CHECK_OK(testing_fit(a, &head, NULL, NULL));
            CHECK_OK(testing_fit(b, &head, NULL, NULL));
            parity_call(a, b, "kneighbors", Q, "{\"n_neighbors\": 1}", "indices", 0);
        }
        if (a)
            gsb_model_free(a);
        if (b)
            gsb_model_free(b);
    }
    const char *p = n >= 3 ? "{\"n_neighbors\": 3, \"weights\": \"distance\"}"
                           : "{\"n_neighbors\": 1}";
    gsb_model *a = parity_fit(multi, "KNeighborsClassifier", p, X, labels, NULL);
    gsb_model *b = parity_fit(one, "KNeighborsClassifier", p, X, labels, NULL);
    if (a && b) {
        parity_call(a, b, "predict_proba", Q, NULL, "proba", tol);
        parity_call(a, b, "predict", Q, NULL, "labels", 0);
    }
    if (a)
        gsb_model_free(a);
    if (b)
        gsb_model_free(b);
    a = parity_fit(multi, "KNeighborsRegressor", p, X, y, NULL);
    b = parity_fit(one, "KNeighborsRegressor", p, X, y, NULL);
    if (a && b) {
        parity_call(a, b, "predict", Q, NULL, "y", tol);
        if (n >= 4)
            parity_call(a, b, "predict", NULL, NULL, "y", tol); /* leave-one-out */
    }
    if (a)
        gsb_model_free(a);
    if (b)
        gsb_model_free(b);
}

/* The forests in both sessions (the trees shared out over the ranks): every
 * attribute identical (the same trees in the same order, the OOB estimates,
 * the importances) and the same predictions.  Labels and integral targets
 * with bootstrap counts as weights keep every split's sums exact, so a GPU's
 * atomic summation order cannot break a near tie differently. */
static inline void parity_forest(gsb_session *multi, gsb_session *one, const gsb_array *X,
                                 const double *y, const gsb_array *w)
{
    int64_t n = X->shape[0];
    double *lab = malloc((size_t)n * 8), *yi = malloc((size_t)n * 8), mean = 0;
    for (int64_t i = 0; i < n; i++)
        mean += y[i] / (double)n;
    for (int64_t i = 0; i < n; i++) {
        lab[i] = y[i] > mean + 1 ? 2 : y[i] > mean - 1 ? 1 : 0;
        yi[i] = round(3 * y[i]);
    }
    gsb_array la = gsb_array_1d(lab, GSB_F64, n), ya = gsb_array_1d(yi, GSB_F64, n);
    const char *oob = n >= 20 ? "true" : "false";
    char p[4][160];
    snprintf(p[0], sizeof p[0], "{\"n_estimators\": 7, \"max_depth\": 5, \"random_state\": 3, "
             "\"oob_score\": %s}", oob);
    snprintf(p[1], sizeof p[1], "{\"n_estimators\": 2, \"random_state\": 4}");
    snprintf(p[2], sizeof p[2], "{\"n_estimators\": 5, \"max_features\": 0.5, "
             "\"random_state\": 5, \"oob_score\": %s}", oob);
    snprintf(p[3], sizeof p[3], "{\"n_estimators\": 4, \"bootstrap\": false, "
             "\"max_leaf_nodes\": 6, \"random_state\": 6}");
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 2; c++) {
            const char *est = c ? "RandomForestRegressor" : "RandomForestClassifier";
            const gsb_array *t = c ? &ya : &la, *sw = k == 2 ? w : NULL;
            gsb_model *a = parity_fit(multi, est, p[k], X, t, sw);
            CHECK(strstr(gsb_warnings(), "first device") == NULL);
            gsb_model *b = parity_fit(one, est, p[k], X, t, sw);
            if (a && b) {
                parity_all(a, b, 0);
                parity_call(a, b, "predict", X, NULL, c ? "y" : "labels", 0);
                parity_call(a, b, "apply", X, NULL, "leaves", 0);
            }
            if (a)
                gsb_model_free(a);
            if (b)
                gsb_model_free(b);
        }
    free(lab);
    free(yi);
}

/* The estimators with a multi-device fit, on data X (n x d), y, w (doubles)
 * in dtype dt; tol for float64 (float32: 1e-4, its own rounding). */
static inline void parity_suite(gsb_session *multi, gsb_session *one, const double *X,
                                const double *y, const double *w, int64_t n, int64_t d,
                                gsb_dtype dt, double tol)
{
    void *xb = malloc((size_t)(n * d) * 8), *yb = malloc((size_t)n * 8);
    if (dt == GSB_F32) {
        testing_to_f32(X, xb, n * d);
        testing_to_f32(y, yb, n);
        tol = 1e-4;
    } else {
        memcpy(xb, X, (size_t)(n * d) * 8);
        memcpy(yb, y, (size_t)n * 8);
    }
    gsb_array xa = gsb_array_2d(xb, dt, n, d), ya = gsb_array_1d(yb, dt, n);
    gsb_array y2 = gsb_array_2d(yb, dt, n, 1), wa = gsb_array_1d((void *)w, GSB_F64, n);
    CHECK(parity_check(multi, one, "StandardScaler", NULL, &xa, NULL, NULL, tol));
    CHECK(parity_check(multi, one, "StandardScaler", NULL, &xa, NULL, &wa, tol));
    CHECK(parity_check(multi, one, "StandardScaler", "{\"with_mean\": false}", &xa, NULL, NULL,
                       tol));
    CHECK(parity_check(multi, one, "MinMaxScaler", "{\"feature_range\": [-1, 2]}", &xa, NULL,
                       NULL, 0));
    { /* the neighbours: queries are the rows perturbed, labels two classes */
        int64_t nq = n < 37 ? n : 37;
        void *qb = malloc((size_t)(nq * d) * 8), *lb = malloc((size_t)n * 8);
        for (int64_t i = 0; i < nq * d; i++) {
            double v = X[i] + 0.25 * sin((double)(3 * i + 1));
            if (dt == GSB_F32)
                ((float *)qb)[i] = (float)v;
            else
                ((double *)qb)[i] = v;
        }
        for (int64_t i = 0; i < n; i++)
            ((double *)lb)[i] = y[i] > y[0] ? 1 : 0;
        gsb_array qa = gsb_array_2d(qb, dt, nq, d), la = gsb_array_1d(lb, GSB_F64, n);
        parity_knn(multi, one, &xa, &qa, &ya, &la, dt == GSB_F32 ? 1e-5 : 1e-9);
        free(qb);
        free(lb);
    }
    parity_forest(multi, one, &xa, y, &wa);
    if (n > d + 1) {
        CHECK(parity_check(multi, one, "LinearRegression", NULL, &xa, &ya, NULL, tol));
        CHECK(parity_check(multi, one, "LinearRegression", NULL, &xa, &y2, &wa, tol));
        CHECK(parity_check(multi, one, "Ridge", "{\"alpha\": 2.5}", &xa, &ya, &wa, tol));
        CHECK(parity_check(multi, one, "Ridge", "{\"fit_intercept\": false}", &xa, &y2, NULL,
                           tol));
        /* Lasso / ElasticNet: the Gram coordinate descent on the merged statistics */
        CHECK(parity_check(multi, one, "Lasso", "{\"alpha\": 0.05}", &xa, &ya, &wa, tol));
        CHECK(parity_check(multi, one, "ElasticNet",
                           "{\"alpha\": 0.2, \"l1_ratio\": 0.7, \"positive\": true}", &xa,
                           &y2, NULL, tol));
        CHECK(parity_check(multi, one, "ElasticNet",
                           "{\"fit_intercept\": false, \"selection\": \"random\", "
                           "\"random_state\": 3}", &xa, &ya, &wa, tol));
        CHECK(parity_check(multi, one, "PCA", "{\"n_components\": 2}", &xa, NULL, NULL, tol));
        CHECK(parity_check(multi, one, "PCA", "{\"whiten\": true}", &xa, NULL, NULL, tol));
        /* a y given to a transformer is ignored, as scikit-learn's fit(X, y=None) */
        CHECK(parity_check(multi, one, "PCA", "{\"n_components\": 2}", &xa, &ya, NULL, tol));
        CHECK(parity_check(multi, one, "MinMaxScaler", NULL, &xa, &ya, NULL, tol));
        CHECK(parity_check(multi, one, "TruncatedSVD",
                           "{\"n_components\": 2, \"algorithm\": \"arpack\"}", &xa, NULL, NULL,
                           tol));
        /* KMeans from the first rows; then with a centre far from every point
         * (an empty cluster: the farthest points relocate it) */
        void *ib = malloc((size_t)(4 * d) * 8);
        memcpy(ib, xb, (size_t)(3 * d) * (dt == GSB_F32 ? 4 : 8));
        gsb_array ia = gsb_array_2d(ib, dt, 3, d);
        parity_kmeans(multi, one, &xa, NULL, &ia, tol);
        parity_kmeans(multi, one, &xa, &wa, &ia, tol);
        memcpy(ib, xb, (size_t)(4 * d) * (dt == GSB_F32 ? 4 : 8));
        for (int64_t j = 0; j < d; j++) {
            if (dt == GSB_F32)
                ((float *)ib)[3 * d + j] = 1e4f;
            else
                ((double *)ib)[3 * d + j] = 1e4;
        }
        gsb_array ie = gsb_array_2d(ib, dt, 4, d);
        parity_kmeans(multi, one, &xa, NULL, &ie, tol);
        free(ib);
        /* LogisticRegression: two classes, and three with balanced class weights;
         * 1e-5 (the bar): the iterates differ by the losses' summation
         * order only, but L-BFGS stops at its tolerance, which lets ~1e-7 show */
        double ltol = tol > 1e-5 ? tol : 1e-5;
        if (dt == GSB_F32) /* a GPU sums float32 losses: L-BFGS stops within ~1e-4 */
            ltol = 1e-3;
        double *l2 = malloc((size_t)n * 8), *l3 = malloc((size_t)n * 8), mean = 0;
        for (int64_t i = 0; i < n; i++)
            mean += y[i] / (double)n;
        for (int64_t i = 0; i < n; i++) {
            l2[i] = y[i] > mean ? 7 : -1;
            l3[i] = y[i] > mean + 1 ? 2 : y[i] > mean - 1 ? 1 : 0;
        }
        gsb_array la = gsb_array_1d(l2, GSB_F64, n), lb = gsb_array_1d(l3, GSB_F64, n);
        parity_logistic(multi, one, "{\"C\": 0.5}", &xa, &la, NULL, ltol);
        parity_logistic(multi, one, "{\"class_weight\": \"balanced\"}", &xa, &lb, &wa, ltol);
        parity_logistic(multi, one, "{\"fit_intercept\": false, \"C\": 2}", &xa, &lb, NULL,
                        ltol);
        free(l2);
        free(l3);
    }
    free(xb);
    free(yb);
}

#endif
