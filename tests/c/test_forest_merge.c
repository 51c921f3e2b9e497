/*
 * test_forest_merge.c - the forests' packed form (forest_merge.h) through
 * the public API: export_trees' array has exactly the documented length
 * (header, classes, 3 x nodes, 4 x trees, importances, leaf values; no slot
 * that nothing writes) and every element finite; merge_trees of two
 * regressors and of two classifiers with different classes has the merged
 * sizes, stays finite, and fit_from_trees of it predicts as the two forests
 * together (apply: a's trees' leaves, then b's); malformed arrays are
 * refused.  Run under valgrind, the element checks also read every slot.
 */
#include "test_api_helpers.h"

static gsb_session *S;

enum { N = 300, F = 5, HEAD = 7 };

static double urand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) * 0x1.0p-53;
}

/* N x F uniform X; y: a regression target, lab: 3 classes, lab01 / lab12:
 * the classes {0, 1} and {1, 2} (so that merged classifiers unite classes). */
static void make_data(double *X, double *y, double *lab, double *lab01, double *lab12)
{
    uint64_t s = 99;
    for (int64_t i = 0; i < N; i++) {
        for (int j = 0; j < F; j++)
            X[i * F + j] = 2 * urand(&s) - 1;
        y[i] = 3 * X[i * F] - X[i * F + 1] + 0.1 * urand(&s);
        lab[i] = X[i * F] < -0.3 ? 0 : X[i * F] < 0.3 ? 1 : 2;
        lab01[i] = X[i * F + 1] > 0;
        lab12[i] = 1 + (X[i * F + 2] > 0);
    }
}

/* One named result of m.method(inputs) (owned by *r, freed by the caller). */
static const gsb_array *call(gsb_model *m, const char *method, const gsb_array **ins, int n_in,
                             const char *name, gsb_result **r)
{
    *r = NULL;
    int rc = gsb_model_call(m, method, ins, n_in, NULL, r);
    CHECK_OK(rc);
    const gsb_array *a = rc == GSB_OK ? gsb_result_get(*r, name) : NULL;
    CHECK(a != NULL);
    return a;
}

static gsb_model *fit(const char *est, const char *params, const gsb_array *X,
                      const gsb_array *y)
{
    gsb_model *m = testing_model(S, est, params);
    if (m && testing_fit(m, X, y, NULL) != GSB_OK) {
        CHECK(!"fit failed");
        gsb_model_free(m);
        return NULL;
    }
    return m;
}

/* The packed array's length from its header (forest_merge.h's layout). */
static int64_t layout_len(const double *d)
{
    int64_t cls = (int64_t)d[1], T = (int64_t)d[2], Nn = (int64_t)d[3], L = (int64_t)d[4];
    int64_t K = (int64_t)d[5], Fh = (int64_t)d[6];
    return HEAD + (cls ? K : 0) + 3 * Nn + 4 * T + T * Fh + L * K;
}

/* export_trees of m: the right length for its trees (from tree_info), every
 * element finite; *T and the array's length returned. */
static void check_export(gsb_model *m, int classify, int64_t K, int64_t *T, int64_t *len)
{
    gsb_result *ri, *re;
    const gsb_array *nl = call(m, "tree_info", NULL, 0, "n_leaves", &ri);
    const gsb_array *p = call(m, "export_trees", NULL, 0, "trees", &re);
    *T = *len = 0;
    if (nl && p) {
        int64_t nodes = 0, leaves = 0;
        *T = testing_numel(nl);
        for (int64_t t = 0; t < *T; t++) {
            nodes += 2 * (int64_t)testing_at(nl, t) - 1;
            leaves += (int64_t)testing_at(nl, t);
        }
        const double *d = p->data;
        *len = testing_numel(p);
        CHECK(p->dtype == GSB_F64 && p->ndim == 1 && *len > HEAD);
        CHECK(d[1] == classify && d[2] == (double)*T && d[3] == (double)nodes &&
              d[4] == (double)leaves && d[5] == (double)K && d[6] == F);
        CHECK(*len == layout_len(d));
        int64_t finite = 0;
        for (int64_t i = 0; i < *len; i++)
            finite += isfinite(d[i]) != 0;
        CHECK(finite == *len);
    }
    gsb_result_free(ri);
    gsb_result_free(re);
}

/* a and b merged, fitted from their trees into a fresh model of est. */
static gsb_model *merged_model(const char *est, gsb_model *a, gsb_model *b, int64_t K)
{
    gsb_result *ra, *rb, *rm;
    const gsb_array *pa = call(a, "export_trees", NULL, 0, "trees", &ra);
    const gsb_array *pb = call(b, "export_trees", NULL, 0, "trees", &rb);
    gsb_model *m = testing_model(S, est, NULL);
    if (pa && pb && m) {
        const gsb_array *ins[2] = {pa, pb};
        const gsb_array *pm = call(m, "merge_trees", ins, 2, "trees", &rm);
        if (pm) {
            const double *d = pm->data;
            int64_t len = testing_numel(pm), finite = 0;
            CHECK(len == layout_len(d) && d[5] == (double)K);
            CHECK(d[2] == ((const double *)pa->data)[2] + ((const double *)pb->data)[2]);
            for (int64_t i = 0; i < len; i++)
                finite += isfinite(d[i]) != 0;
            CHECK(finite == len);
            const gsb_array *fin[1] = {pm};
            CHECK_OK(gsb_model_call(m, "fit_from_trees", fin, 1, NULL, NULL));
        }
        gsb_result_free(rm);
    }
    gsb_result_free(ra);
    gsb_result_free(rb);
    return m;
}

/* apply(m) is apply(a)'s columns then apply(b)'s. */
static void check_apply(gsb_model *m, gsb_model *a, gsb_model *b, int64_t Ta, int64_t Tb,
                        const gsb_array *X)
{
    static double lm[N * 16], la[N * 16], lb[N * 16];
    CHECK(Ta + Tb <= 16);
    CHECK(testing_call(m, "apply", X, NULL, lm, N * 16, NULL) == N * (Ta + Tb));
    CHECK(testing_call(a, "apply", X, NULL, la, N * 16, NULL) == N * Ta);
    CHECK(testing_call(b, "apply", X, NULL, lb, N * 16, NULL) == N * Tb);
    int64_t off = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t t = 0; t < Ta + Tb; t++)
            off += lm[i * (Ta + Tb) + t] != (t < Ta ? la[i * Ta + t] : lb[i * Tb + t - Ta]);
    CHECK(off == 0);
}

static void test_regressors(void)
{
    static double X[N * F], y[N], Y2[N * 2], lab[N], l01[N], l12[N];
    make_data(X, y, lab, l01, l12);
    for (int64_t i = 0; i < N; i++) {
        Y2[2 * i] = y[i];
        Y2[2 * i + 1] = -X[i * F + 3];
    }
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, F), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_array y2 = gsb_array_2d(Y2, GSB_F64, N, 2);
    for (int outputs = 1; outputs <= 2; outputs++) {
        const gsb_array *t = outputs == 1 ? &ya : &y2;
        gsb_model *a = fit("RandomForestRegressor", "{\"n_estimators\": 3, \"random_state\": 1}",
                           &xa, t);
        gsb_model *b = fit("RandomForestRegressor", "{\"n_estimators\": 2, \"max_depth\": 4, "
                           "\"random_state\": 2}", &xa, t);
        if (!a || !b)
            return;
        int64_t Ta, Tb, lena, lenb;
        check_export(a, 0, outputs, &Ta, &lena);
        check_export(b, 0, outputs, &Tb, &lenb);
        CHECK(Ta == 3 && Tb == 2);
        gsb_model *m = merged_model("RandomForestRegressor", a, b, outputs);
        if (m) {
            static double pm[N * 2], pa[N * 2], pb[N * 2];
            int64_t n = N * outputs;
            CHECK(testing_call(m, "predict", &xa, NULL, pm, n, NULL) == n);
            CHECK(testing_call(a, "predict", &xa, NULL, pa, n, NULL) == n);
            CHECK(testing_call(b, "predict", &xa, NULL, pb, n, NULL) == n);
            double worst = 0;
            for (int64_t i = 0; i < n; i++)
                worst = fmax(worst, fabs(pm[i] - (3 * pa[i] + 2 * pb[i]) / 5) /
                                        (1 + fabs(pm[i])));
            CHECK(worst < 1e-5); /* float32 leaf values, summed in another order */
            check_apply(m, a, b, Ta, Tb, &xa);
            gsb_model_free(m);
        }
        gsb_model_free(a);
        gsb_model_free(b);
    }
}

static void test_classifiers(void)
{
    static double X[N * F], y[N], lab[N], l01[N], l12[N];
    make_data(X, y, lab, l01, l12);
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, F);
    gsb_array a01 = gsb_array_1d(l01, GSB_F64, N), a12 = gsb_array_1d(l12, GSB_F64, N);
    gsb_model *a = fit("RandomForestClassifier", "{\"n_estimators\": 4, \"random_state\": 3}",
                       &xa, &a01);
    gsb_model *b = fit("RandomForestClassifier", "{\"n_estimators\": 3, \"random_state\": 4}",
                       &xa, &a12);
    if (!a || !b)
        return;
    int64_t Ta, Tb, len;
    check_export(a, 1, 2, &Ta, &len);
    check_export(b, 1, 2, &Tb, &len);
    gsb_model *m = merged_model("RandomForestClassifier", a, b, 3);
    if (m) {
        double cls[4];
        CHECK(testing_attr(m, "classes_", cls, 4, NULL) == 3);
        CHECK(cls[0] == 0 && cls[1] == 1 && cls[2] == 2);
        /* proba: a's columns 0, 1 and b's 1, 2 placed in the union, weighted by trees */
        static double pm[N * 3], pa[N * 2], pb[N * 2];
        CHECK(testing_call(m, "predict_proba", &xa, NULL, pm, N * 3, NULL) == N * 3);
        CHECK(testing_call(a, "predict_proba", &xa, NULL, pa, N * 2, NULL) == N * 2);
        CHECK(testing_call(b, "predict_proba", &xa, NULL, pb, N * 2, NULL) == N * 2);
        double worst = 0;
        for (int64_t i = 0; i < N; i++) {
            double want[3] = {4 * pa[2 * i] / 7, (4 * pa[2 * i + 1] + 3 * pb[2 * i]) / 7,
                              3 * pb[2 * i + 1] / 7};
            for (int k = 0; k < 3; k++)
                worst = fmax(worst, fabs(pm[3 * i + k] - want[k]));
        }
        CHECK(worst < 1e-5); /* float32 leaf values, summed in another order */
        check_apply(m, a, b, Ta, Tb, &xa);
        gsb_model_free(m);
    }
    gsb_model_free(a);
    gsb_model_free(b);
}

static void test_malformed(void)
{
    static double X[N * F], y[N], lab[N], l01[N], l12[N];
    make_data(X, y, lab, l01, l12);
    gsb_array xa = gsb_array_2d(X, GSB_F64, N, F), ya = gsb_array_1d(y, GSB_F64, N);
    gsb_array la = gsb_array_1d(lab, GSB_F64, N);
    gsb_model *a = fit("RandomForestRegressor", "{\"n_estimators\": 2, \"random_state\": 1}",
                       &xa, &ya);
    gsb_model *c = fit("RandomForestClassifier", "{\"n_estimators\": 2, \"random_state\": 1}",
                       &xa, &la);
    if (!a || !c)
        return;
    gsb_result *ra, *rc;
    const gsb_array *pa = call(a, "export_trees", NULL, 0, "trees", &ra);
    const gsb_array *pc = call(c, "export_trees", NULL, 0, "trees", &rc);
    if (pa && pc) {
        int64_t len = testing_numel(pa);
        double *d = malloc((size_t)(len + 1) * sizeof *d);
        memcpy(d, pa->data, (size_t)len * sizeof *d);
        gsb_array t = gsb_array_1d(d, GSB_F64, len - 1);
        const gsb_array *ins[2] = {&t, pa};
        CHECK_ERR(gsb_model_call(a, "merge_trees", ins, 2, NULL, NULL), GSB_EINVAL, "length");
        d[len] = 0; /* one slot too many */
        t = gsb_array_1d(d, GSB_F64, len + 1);
        CHECK_ERR(gsb_model_call(a, "merge_trees", ins, 2, NULL, NULL), GSB_EINVAL, "length");
        t = gsb_array_1d(d, GSB_F64, len);
        d[3] += 1; /* a node count that does not match */
        CHECK_ERR(gsb_model_call(a, "merge_trees", ins, 2, NULL, NULL), GSB_EINVAL, "malformed");
        d[3] -= 1;
        ins[1] = pc; /* a regressor's trees with a classifier's */
        CHECK_ERR(gsb_model_call(a, "merge_trees", ins, 2, NULL, NULL), GSB_EINVAL,
                  "a classifier and a regressor");
        const gsb_array *fin[1] = {pc};
        gsb_model *m = testing_model(S, "RandomForestRegressor", NULL);
        CHECK_ERR(gsb_model_call(m, "fit_from_trees", fin, 1, NULL, NULL), GSB_EINVAL,
                  "classifier");
        gsb_model_free(m);
        free(d);
    }
    gsb_result_free(ra);
    gsb_result_free(rc);
    gsb_model_free(a);
    gsb_model_free(c);
}

int main(void)
{
    if (testing_open(&S))
        return 1;
    RUN(test_regressors);
    RUN(test_classifiers);
    RUN(test_malformed);
    return testing_close(S);
}
