/*
 * test_enet.c - Lasso, ElasticNet, LassoCV, ElasticNetCV and the L1 /
 * elastic-net LogisticRegression through the public API: known answers from
 * scikit-learn 1.9.1 (coefficients, intercepts, epoch counts and duality
 * gaps, the CV grids, paths and choices), the optimality (KKT) conditions on
 * random data for every solver form, the forms against one another,
 * weights as repeated rows, several targets, warm starts, random
 * coordinates, float32, errors in scikit-learn's words, cancellation and
 * the blob.
 *
 * The known-answer data (python):
 *   def data(n, p):
 *       i = np.arange(n)[:, None]; j = np.arange(p)[None, :]
 *       X = np.sin(1.3*i*(j+1) + 0.7*j + 0.1)
 *       b = np.zeros(p); b[:4] = [1.5, -2, 0, 0.5]
 *       return X, X @ b + 0.3 + 0.1*np.cos(2.1*np.arange(n))
 *   X, y = data(12, 5); Y2 = np.c_[y, np.cos(0.9*np.arange(12))]
 *   w = 1.0 + np.arange(12) % 3
 *   iw = np.arange(6)[:, None]; jw = np.arange(10)[None, :]
 *   Xw = np.cos(0.8*iw*(jw+1) + 0.3*jw + 0.2); yw = np.sin(1.7*np.arange(6))
 *   X30, y30 = data(30, 5); yb = (y30 > np.median(y30)).astype(float)
 */
#include <math.h>
#include <string.h>

#include "test_api_helpers.h"

enum { N = 12, P = 5, NW = 6, PW = 10, NC = 30 };

static gsb_session *S;
static double X[N * P], y[N], Y2[N * 2], w[N], Xw[NW * PW], yw[NW], X30[NC * P], y30[NC],
    yb[NC];

static void data(int n, double *Xd, double *yd)
{
    static const double b[P] = {1.5, -2, 0, 0.5, 0};
    for (int i = 0; i < n; i++) {
        yd[i] = 0.3 + 0.1 * cos(2.1 * i);
        for (int j = 0; j < P; j++) {
            Xd[i * P + j] = sin(1.3 * i * (j + 1) + 0.7 * j + 0.1);
            yd[i] += Xd[i * P + j] * b[j];
        }
    }
}

static void make_data(void)
{
    data(N, X, y);
    data(NC, X30, y30);
    for (int i = 0; i < N; i++) {
        Y2[i * 2] = y[i];
        Y2[i * 2 + 1] = cos(0.9 * i);
        w[i] = 1.0 + i % 3;
    }
    for (int i = 0; i < NW; i++) {
        for (int j = 0; j < PW; j++)
            Xw[i * PW + j] = cos(0.8 * i * (j + 1) + 0.3 * j + 0.2);
        yw[i] = sin(1.7 * i);
    }
    double sorted[NC];
    memcpy(sorted, y30, sizeof sorted);
    for (int i = 0; i < NC; i++) /* insertion sort for the median */
        for (int k = i; k > 0 && sorted[k - 1] > sorted[k]; k--) {
            double t = sorted[k];
            sorted[k] = sorted[k - 1];
            sorted[k - 1] = t;
        }
    double med = 0.5 * (sorted[NC / 2 - 1] + sorted[NC / 2]);
    for (int i = 0; i < NC; i++)
        yb[i] = y30[i] > med;
}

/* ---- helpers ------------------------------------------------------------------- */

/* fit with call options (NULL: none); the status */
static int fit_opts(gsb_model *m, const gsb_array *Xa, const gsb_array *ya, const gsb_array *wa,
                    const char *options)
{
    const gsb_array *ins[3] = {Xa, ya, wa};
    return gsb_model_call(m, "fit", ins, wa ? 3 : 2, options, NULL);
}

static gsb_model *fitted(const char *est, const char *params, const gsb_array *Xa,
                         const gsb_array *ya, const gsb_array *wa, const char *options)
{
    gsb_model *m = testing_model(S, est, params);
    CHECK_OK(fit_opts(m, Xa, ya, wa, options));
    return m;
}

/* attribute values must match want (count of them) within tol (relative to max(1, |want|)) */
static void expect(gsb_model *m, const char *name, const double *want, int64_t count, double tol)
{
    double got[64];
    int64_t n = testing_attr(m, name, got, 64, NULL);
    CHECK(n == count);
    for (int64_t i = 0; i < n && i < count; i++)
        CHECK_CLOSE(got[i], want[i], tol);
}

static int64_t attr_int(gsb_model *m, const char *name)
{
    double v[4] = {-1};
    testing_attr(m, name, v, 4, NULL);
    return (int64_t)v[0];
}

/* ---- known answers (scikit-learn 1.9.1) --------------------------------------------- */

static void test_lasso_known(void)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, P), ya = gsb_array_1d(y, GSB_F64, N);
    static const double coef[P] = {1.4549380313776477, -1.9847936574994478, 0, 0.5078021558531144,
                                   0};
    static const double icpt = 0.30503274897595867, gap = 5.276986034559913e-05;
    /* the Gram, residual (scikit-learn's precompute=False) and working-set forms */
    for (int form = 1; form <= 3; form++) {
        char opts[32];
        snprintf(opts, sizeof opts, "{\"_cd_form\": %d}", form);
        gsb_model *m = fitted("Lasso", "{\"alpha\": 0.01}", &Xa, &ya, NULL, opts);
        /* the working sets take other iterates: another point within tol */
        expect(m, "coef_", coef, P, form == 3 ? 1e-3 : 1e-10);
        expect(m, "intercept_", &icpt, 1, form == 3 ? 1e-3 : 1e-10);
        if (form != 3) { /* and count their own epochs */
            CHECK(attr_int(m, "n_iter_") == 13);
            expect(m, "dual_gap_", &gap, 1, 1e-8);
        }
        gsb_array info;
        double v[8];
        CHECK(testing_attr(m, "coef_", v, 8, &info) == P && info.ndim == 1);
        CHECK(testing_attr(m, "intercept_", v, 8, &info) == 1 && info.ndim == 0);
        CHECK(testing_attr(m, "n_iter_", v, 8, &info) == 1 && info.dtype == GSB_I64 &&
              info.ndim == 0);
        CHECK(testing_attr(m, "dual_gap_", v, 8, &info) == 1 && info.dtype == GSB_F64);
        gsb_model_free(m);
    }
}

static void test_enet_known(void)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, P), ya = gsb_array_1d(y, GSB_F64, N);
    static const double coef[P] = {1.3281477663469663, -1.779448111400142, -0.11866091649261291,
                                   0.5603934002719757, 0};
    static const double icpt = 0.3258354414872342;
    gsb_model *m = fitted("ElasticNet", "{\"alpha\": 0.05, \"l1_ratio\": 0.3}", &Xa, &ya, NULL,
                          NULL);
    expect(m, "coef_", coef, P, 1e-10);
    expect(m, "intercept_", &icpt, 1, 1e-10);
    CHECK(attr_int(m, "n_iter_") == 12);
    gsb_model_free(m);

    static const double pcoef[P] = {1.7289552924152438, 0, 0, 0.3606275895764252, 0};
    static const double picpt = 0.26640139351247105;
    m = fitted("Lasso", "{\"alpha\": 0.01, \"positive\": true}", &Xa, &ya, NULL, NULL);
    expect(m, "coef_", pcoef, P, 1e-10);
    expect(m, "intercept_", &picpt, 1, 1e-10);
    CHECK(attr_int(m, "n_iter_") == 12);
    gsb_model_free(m);

    static const double wcoef[P] = {1.4733862183167001, -1.9851346867805553, 0,
                                    0.49008598450201485, 0};
    static const double wicpt = 0.2801923826583532;
    gsb_array wa = gsb_array_1d(w, GSB_F64, N);
    m = fitted("Lasso", "{\"alpha\": 0.01}", &Xa, &ya, &wa, NULL);
    expect(m, "coef_", wcoef, P, 1e-10);
    expect(m, "intercept_", &wicpt, 1, 1e-10);
    CHECK(attr_int(m, "n_iter_") == 11);
    gsb_model_free(m);
}

static void test_several_targets_and_wide_known(void)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, P), Ya = gsb_array_2d(Y2, GSB_F64, N, 2);
    static const double coef[2 * P] = {
        1.4549380313776477,  -1.9847936574994478, 0,    0.5078021558531144,
        0,                   -0.6732339920369204, 0.21896545708059204,
        -0.20299415547678457, 1.3018743002295743, -0.11113166430193717};
    static const double icpt[2] = {0.30503274897595867, -0.03830809759908822};
    static const double iters[2] = {13, 15};
    gsb_model *m = fitted("Lasso", "{\"alpha\": 0.01}", &Xa, &Ya, NULL, NULL);
    expect(m, "coef_", coef, 2 * P, 1e-10);
    expect(m, "intercept_", icpt, 2, 1e-10);
    expect(m, "n_iter_", iters, 2, 0);
    gsb_array info;
    double v[16];
    CHECK(testing_attr(m, "coef_", v, 16, &info) == 2 * P && info.ndim == 2 &&
          info.shape[0] == 2);
    CHECK(testing_attr(m, "dual_gap_", v, 16, &info) == 2 && info.ndim == 1);
    gsb_model_free(m);

    gsb_array Xwa = gsb_array_2d(Xw, GSB_F64, NW, PW), ywa = gsb_array_1d(yw, GSB_F64, NW);
    static const double wide[PW] = {0, 0, -0.08929811505739679, 0, -0.0011045708459956089,
                                    1.0961176155016443, 0, 0, 0.2679553343887029,
                                    -0.47591284089164976};
    m = fitted("Lasso", "{\"alpha\": 0.02, \"fit_intercept\": false}", &Xwa, &ywa, NULL, NULL);
    expect(m, "coef_", wide, PW, 1e-9);
    CHECK(attr_int(m, "n_iter_") == 38);
    double zero = 0;
    expect(m, "intercept_", &zero, 1, 0);
    gsb_model_free(m);

    static const double ewide[PW] = {0, 0, -0.25262809746191917, 0, -0.2598875064055868,
                                     1.0746409891989357, 0, 0, 0.24812454812453502,
                                     -0.5780048150461989};
    static const double eicpt = 0.019306287744374817;
    m = fitted("ElasticNet", "{\"alpha\": 0.01, \"l1_ratio\": 0.5, \"precompute\": true}", &Xwa,
               &ywa, NULL, NULL);
    expect(m, "coef_", ewide, PW, 1e-9);
    expect(m, "intercept_", &eicpt, 1, 1e-9);
    CHECK(attr_int(m, "n_iter_") == 65);
    gsb_model_free(m);
}

static void test_cv_known(void)
{
    gsb_array Xa = gsb_array_2d(X30, GSB_F64, NC, P), ya = gsb_array_1d(y30, GSB_F64, NC);
    static const double alphas[8] = {0.9812044971579901,  0.36575317219509024,
                                     0.13633792278596876, 0.05082123848177603,
                                     0.01894409294232963, 0.007061588188889053,
                                     0.0026322731788353,  0.0009812044971579902};
    static const double mse0[3] = {3.245503535357895, 2.89294455930877, 3.069221360612591};
    static const double coef[P] = {1.4794444569281266, -1.9734822176839357, 0,
                                   0.4822472097924205, 0};
    static const double icpt = 0.30009386238565544;
    gsb_model *m = fitted("LassoCV", "{\"cv\": 3, \"alphas\": 8}", &Xa, &ya, NULL, NULL);
    expect(m, "alphas_", alphas, 8, 1e-12);
    expect(m, "alpha_", &alphas[5], 1, 1e-12);
    double mse[24];
    gsb_array info;
    CHECK(testing_attr(m, "mse_path_", mse, 24, &info) == 24 && info.ndim == 2 &&
          info.shape[0] == 8 && info.shape[1] == 3);
    for (int f = 0; f < 3; f++)
        CHECK_CLOSE(mse[f], mse0[f], 1e-10);
    expect(m, "coef_", coef, P, 1e-9);
    expect(m, "intercept_", &icpt, 1, 1e-9);
    CHECK(!testing_has_attr(m, "l1_ratio_"));
    gsb_model_free(m);

    static const double alphas1[5] = {1.0902272190644335, 0.19387286159262762,
                                      0.03447601179354955, 0.006130798191272828,
                                      0.0010902272190644335};
    static const double mse12[3] = {0.033864622257687146, 0.00971837582239546,
                                    0.01092425085233259};
    static const double ecoef[P] = {1.4807367846610775, -1.9743349691791974,
                                    0.0019300385767902976, 0.48464425357986196, 0};
    static const double l1r = 0.9;
    m = fitted("ElasticNetCV", "{\"l1_ratio\": [0.3, 0.9], \"cv\": 3, \"alphas\": 5}", &Xa, &ya,
               NULL, NULL);
    double al[10];
    CHECK(testing_attr(m, "alphas_", al, 10, &info) == 10 && info.ndim == 2);
    for (int i = 0; i < 5; i++)
        CHECK_CLOSE(al[5 + i], alphas1[i], 1e-12);
    double ms[30];
    CHECK(testing_attr(m, "mse_path_", ms, 30, &info) == 30 && info.shape[0] == 10);
    for (int f = 0; f < 3; f++) /* l1_ratio 0.9, alpha 2 */
        CHECK_CLOSE(ms[(5 + 2) * 3 + f], mse12[f], 1e-9);
    expect(m, "l1_ratio_", &l1r, 1, 0);
    expect(m, "alpha_", &alphas1[3], 1, 1e-12);
    expect(m, "coef_", ecoef, P, 1e-8);
    gsb_model_free(m);
}

static void test_logistic_l1_known(void)
{
    gsb_array Xa = gsb_array_2d(X30, GSB_F64, NC, P), ya = gsb_array_1d(yb, GSB_F64, NC);
    /* scikit-learn's saga to tol 1e-12 */
    static const double c1[P] = {0.30460979244912395, -3.7035741123794446, -0.546639242518858, 0,
                                 0};
    static const double i1 = 0.14224497552193915;
    static const double c2[P] = {0.19307105140621522, -2.02432933055542, -0.2979798470633204, 0,
                                 0};
    static const double i2 = 0.066634331654229;
    gsb_model *m = fitted("LogisticRegression",
                          "{\"l1_ratio\": 1, \"solver\": \"saga\", \"tol\": 1e-10, "
                          "\"max_iter\": 1000}", &Xa, &ya, NULL, NULL);
    expect(m, "coef_", c1, P, 1e-6);
    expect(m, "intercept_", &i1, 1, 1e-6);
    double v[P];
    CHECK(testing_attr(m, "coef_", v, P, NULL) == P && v[3] == 0 && v[4] == 0);
    gsb_model_free(m);
    m = fitted("LogisticRegression",
               "{\"l1_ratio\": 0.5, \"C\": 0.5, \"solver\": \"saga\", \"tol\": 1e-10, "
               "\"max_iter\": 1000}", &Xa, &ya, NULL, NULL);
    expect(m, "coef_", c2, P, 1e-6);
    expect(m, "intercept_", &i2, 1, 1e-6);
    CHECK(testing_attr(m, "coef_", v, P, NULL) == P && v[3] == 0 && v[4] == 0);
    gsb_model_free(m);
    /* saga with the L2 penalty runs L-BFGS on the same objective: lbfgs's answer */
    m = testing_model(S, "LogisticRegression", "{\"solver\": \"saga\"}");
    gsb_model *lb = testing_model(S, "LogisticRegression", "{\"solver\": \"lbfgs\"}");
    CHECK(fit_opts(m, &Xa, &ya, NULL, NULL) == GSB_OK);
    CHECK(fit_opts(lb, &Xa, &ya, NULL, NULL) == GSB_OK);
    double vs[P], vl[P];
    CHECK(testing_attr(m, "coef_", vs, P, NULL) == P && testing_attr(lb, "coef_", vl, P, NULL) == P);
    CHECK(memcmp(vs, vl, sizeof vs) == 0);
    gsb_model_free(lb);
    gsb_model_free(m);
}

/* ---- optimality on random data ------------------------------------------------------- */

/*
 * The KKT conditions of 1/(2n) ||y - Xw - b||^2 + a r |w|_1 + a (1 - r)/2 |w|^2:
 * g_j = X_j'(y - Xw - b)/n - a (1 - r) w_j equals a r sign(w_j) where w_j != 0
 * and lies in [-a r, a r] elsewhere ([.., a r] with positive).
 */
static double kkt_violation(const double *Xd, const double *yd, int64_t n, int64_t p,
                            const double *coef, double b, double a, double r, int positive)
{
    double worst = 0;
    for (int64_t j = 0; j < p; j++) {
        double g = 0;
        for (int64_t i = 0; i < n; i++) {
            double res = yd[i] - b;
            for (int64_t k = 0; k < p; k++)
                res -= Xd[i * p + k] * coef[k];
            g += Xd[i * p + j] * res;
        }
        g = g / (double)n - a * (1 - r) * coef[j];
        double v = coef[j] > 0   ? fabs(g - a * r)
                   : coef[j] < 0 ? fabs(g + a * r)
                   : positive    ? fmax(g - a * r, 0.0)
                                 : fmax(fabs(g) - a * r, 0.0);
        worst = fmax(worst, v);
    }
    return worst;
}

static void random_problem(int64_t n, int64_t p, double *Xd, double *yd)
{
    testing_fill_normal(Xd, n * p);
    for (int64_t i = 0; i < n; i++) {
        yd[i] = 0.5 + 0.3 * testing_normal();
        for (int64_t j = 0; j < p && j < 8; j++)
            yd[i] += (j % 2 ? -1.0 : 1.0) * (1 + j) * 0.3 * Xd[i * p + j];
    }
}

static void test_kkt_every_form(void)
{
    static const int64_t shapes[][2] = {{120, 30}, {40, 90}};
    static const char *const params[] = {
        "{\"alpha\": 0.05, \"tol\": 1e-12}",
        "{\"alpha\": 0.05, \"tol\": 1e-12, \"positive\": true}",
        "{\"alpha\": 0.1, \"l1_ratio\": 0.4, \"tol\": 1e-12}",
        "{\"alpha\": 0.02, \"tol\": 1e-12, \"selection\": \"random\", \"random_state\": 3}"};
    static const double alpha[] = {0.05, 0.05, 0.1, 0.02}, ratio[] = {1, 1, 0.4, 1};
    for (size_t s = 0; s < 2; s++) {
        int64_t n = shapes[s][0], p = shapes[s][1];
        double *Xd = malloc((size_t)(n * p) * sizeof *Xd), *yd = malloc((size_t)n * sizeof *yd);
        random_problem(n, p, Xd, yd);
        gsb_array Xa = gsb_array_2d(Xd, GSB_F64, n, p), ya = gsb_array_1d(yd, GSB_F64, n);
        double ref[90];
        for (size_t c = 0; c < 4; c++) {
            for (int form = 1; form <= 3; form++) {
                char opts[32];
                snprintf(opts, sizeof opts, "{\"_cd_form\": %d}", form);
                gsb_model *m = fitted(ratio[c] < 1 ? "ElasticNet" : "Lasso", params[c], &Xa,
                                      &ya, NULL, opts);
                double coef[90], b = 0;
                CHECK(testing_attr(m, "coef_", coef, 90, NULL) == p);
                testing_attr(m, "intercept_", &b, 1, NULL);
                double v = kkt_violation(Xd, yd, n, p, coef, b, alpha[c], ratio[c], c == 1);
                if (!(v <= 1e-6)) {
                    fprintf(stderr, "  %s form %d %lldx%lld: KKT violation %g\n", params[c],
                            form, (long long)n, (long long)p, v);
                    CHECK(v <= 1e-6);
                }
                if (form == 1)
                    memcpy(ref, coef, (size_t)p * sizeof *coef);
                else /* the three forms reach the same optimum, the same zeros */
                    for (int64_t j = 0; j < p; j++) {
                        CHECK_CLOSE(coef[j], ref[j], 1e-6);
                        CHECK((coef[j] == 0) == (ref[j] == 0) || fabs(ref[j]) < 1e-9);
                    }
                gsb_model_free(m);
            }
        }
        free(Xd);
        free(yd);
    }
}

/* Integer weights give the fit of the repeated rows; targets fit independently. */
static void test_weights_targets_float32(void)
{
    enum { n = 40, p = 6 };
    double Xd[n * p], yd[n], ww[n], Xr[3 * n * p], yr[3 * n], Yd[n * 2];
    random_problem(n, p, Xd, yd);
    int64_t nr = 0;
    for (int i = 0; i < n; i++) {
        ww[i] = 1 + i % 3;
        for (int r = 0; r < ww[i]; r++, nr++) {
            memcpy(Xr + nr * p, Xd + i * p, p * sizeof(double));
            yr[nr] = yd[i];
        }
        Yd[i * 2] = yd[i];
        Yd[i * 2 + 1] = -0.5 * yd[i] + Xd[i * p];
    }
    const char *prm = "{\"alpha\": 0.03, \"l1_ratio\": 0.8, \"tol\": 1e-12}";
    gsb_array Xa = gsb_array_2d(Xd, GSB_F64, n, p), ya = gsb_array_1d(yd, GSB_F64, n),
              wa = gsb_array_1d(ww, GSB_F64, n), Xra = gsb_array_2d(Xr, GSB_F64, nr, p),
              yra = gsb_array_1d(yr, GSB_F64, nr), Ya = gsb_array_2d(Yd, GSB_F64, n, 2);
    gsb_model *a = fitted("ElasticNet", prm, &Xa, &ya, &wa, NULL),
              *b = fitted("ElasticNet", prm, &Xra, &yra, NULL, NULL);
    double ca[p], cb[p], ia, ib;
    testing_attr(a, "coef_", ca, p, NULL);
    testing_attr(b, "coef_", cb, p, NULL);
    testing_attr(a, "intercept_", &ia, 1, NULL);
    testing_attr(b, "intercept_", &ib, 1, NULL);
    for (int j = 0; j < p; j++)
        CHECK_CLOSE(ca[j], cb[j], 1e-8);
    CHECK_CLOSE(ia, ib, 1e-8);
    gsb_model_free(a);
    gsb_model_free(b);

    /* two targets: row t is the fit of target t alone */
    double Yt[n];
    a = fitted("ElasticNet", prm, &Xa, &Ya, NULL, NULL);
    double c2[2 * p];
    testing_attr(a, "coef_", c2, 2 * p, NULL);
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < n; i++)
            Yt[i] = Yd[i * 2 + t];
        gsb_array yta = gsb_array_1d(Yt, GSB_F64, n);
        b = fitted("ElasticNet", prm, &Xa, &yta, NULL, NULL);
        testing_attr(b, "coef_", cb, p, NULL);
        for (int j = 0; j < p; j++)
            CHECK_CLOSE(c2[t * p + j], cb[j], 1e-12);
        gsb_model_free(b);
    }
    gsb_model_free(a);

    /* float32 in, float32 coef_ out, near the float64 fit */
    float Xf[n * p], yf[n];
    testing_to_f32(Xd, Xf, n * p);
    testing_to_f32(yd, yf, n);
    gsb_array Xfa = gsb_array_2d(Xf, GSB_F32, n, p), yfa = gsb_array_1d(yf, GSB_F32, n);
    a = fitted("Lasso", "{\"alpha\": 0.03}", &Xfa, &yfa, NULL, NULL);
    b = fitted("Lasso", "{\"alpha\": 0.03}", &Xa, &ya, NULL, NULL);
    gsb_array info;
    CHECK(testing_attr(a, "coef_", ca, p, &info) == p && info.dtype == GSB_F32);
    CHECK(testing_attr(a, "dual_gap_", &ia, 1, &info) == 1 && info.dtype == GSB_F32);
    testing_attr(b, "coef_", cb, p, NULL);
    CHECK(testing_relerr(ca, cb, p) < 1e-4);
    gsb_model_free(a);
    gsb_model_free(b);
}

static void test_warm_start_and_random(void)
{
    enum { n = 60, p = 20 };
    double Xd[n * p], yd[n];
    random_problem(n, p, Xd, yd);
    gsb_array Xa = gsb_array_2d(Xd, GSB_F64, n, p), ya = gsb_array_1d(yd, GSB_F64, n);
    gsb_model *m = fitted("Lasso", "{\"alpha\": 0.05, \"warm_start\": true, \"tol\": 1e-10}",
                          &Xa, &ya, NULL, NULL);
    CHECK(attr_int(m, "n_iter_") > 1);
    /* from its own solution, the first gap already meets tol: no epoch */
    CHECK_OK(fit_opts(m, &Xa, &ya, NULL, NULL));
    CHECK(attr_int(m, "n_iter_") == 0);
    /* a previous coef_ of another shape is refused */
    gsb_array Xs = gsb_array_2d(Xd, GSB_F64, n / 2, p / 2);
    double Xh[(n / 2) * (p / 2)];
    for (int i = 0; i < n / 2; i++)
        for (int j = 0; j < p / 2; j++)
            Xh[i * (p / 2) + j] = Xd[i * p + j];
    Xs.data = Xh;
    gsb_array ys = gsb_array_1d(yd, GSB_F64, n / 2);
    CHECK_ERR(fit_opts(m, &Xs, &ys, NULL, NULL), GSB_EINVAL, "warm_start");
    gsb_model_free(m);

    /* random coordinates: reproducible with random_state, same optimum */
    const char *rp = "{\"alpha\": 0.05, \"tol\": 1e-12, \"selection\": \"random\", "
                     "\"random_state\": 7}";
    gsb_model *a = fitted("Lasso", rp, &Xa, &ya, NULL, NULL), *b = fitted("Lasso", rp, &Xa, &ya,
                                                                           NULL, NULL);
    gsb_model *c = fitted("Lasso", "{\"alpha\": 0.05, \"tol\": 1e-12}", &Xa, &ya, NULL, NULL);
    double ca[p], cb[p], cc[p];
    testing_attr(a, "coef_", ca, p, NULL);
    testing_attr(b, "coef_", cb, p, NULL);
    testing_attr(c, "coef_", cc, p, NULL);
    CHECK(memcmp(ca, cb, sizeof ca) == 0);
    CHECK(attr_int(a, "n_iter_") == attr_int(b, "n_iter_"));
    CHECK(testing_relerr(ca, cc, p) < 1e-8);
    gsb_model_free(a);
    gsb_model_free(b);
    gsb_model_free(c);
}

/* ---- errors, cancellation, blob ---------------------------------------------------------- */

static void test_errors(void)
{
    gsb_array Xa = gsb_array_2d(X, GSB_F64, N, P), ya = gsb_array_1d(y, GSB_F64, N),
              y1 = gsb_array_1d(y, GSB_F64, N - 1), Ya = gsb_array_2d(Y2, GSB_F64, N, 2);
    gsb_model *m = NULL;
    CHECK_ERR(gsb_model_create(S, "Lasso", "{\"alpha\": -1}", &m), GSB_EPARAM,
              "The 'alpha' parameter of Lasso must be a float in the range [0.0, inf). Got -1 "
              "instead.");
    CHECK_ERR(gsb_model_create(S, "ElasticNet", "{\"l1_ratio\": 2}", &m), GSB_EPARAM,
              "The 'l1_ratio' parameter of ElasticNet must be a float in the range [0.0, 1.0]. "
              "Got 2 instead.");
    CHECK_ERR(gsb_model_create(S, "Lasso", "{\"selection\": \"sorted\"}", &m), GSB_EPARAM,
              "The 'selection' parameter of Lasso must be a str among {'cyclic', 'random'}. "
              "Got 'sorted' instead.");
    CHECK_ERR(gsb_model_create(S, "Lasso", "{\"max_iter\": 0}", &m), GSB_EPARAM,
              "must be an int in the range [1, inf) or None. Got 0 instead.");
    CHECK_ERR(gsb_model_create(S, "LassoCV", "{\"cv\": 1}", &m), GSB_EPARAM,
              "The 'cv' parameter of LassoCV must be an int in the range [2, inf) or None.");
    m = testing_model(S, "Lasso", NULL);
    double bad[N * P];
    memcpy(bad, X, sizeof bad);
    bad[7] = NAN;
    gsb_array Xn = gsb_array_2d(bad, GSB_F64, N, P);
    CHECK_ERR(fit_opts(m, &Xn, &ya, NULL, NULL), GSB_EINVAL, "Input X contains NaN.");
    bad[7] = INFINITY;
    CHECK_ERR(fit_opts(m, &Xn, &ya, NULL, NULL), GSB_EINVAL, "Input X contains infinity");
    CHECK_ERR(fit_opts(m, &Xa, &y1, NULL, NULL), GSB_EINVAL,
              "Found input variables with inconsistent numbers of samples");
    double zeros[N] = {0};
    gsb_array wz = gsb_array_1d(zeros, GSB_F64, N);
    CHECK_ERR(fit_opts(m, &Xa, &ya, &wz, NULL), GSB_EINVAL,
              "Sample weights must contain at least one non-zero number.");
    double out[N];
    gsb_result *r = NULL;
    const gsb_array *ins[1] = {&Xa};
    CHECK_ERR(gsb_model_call(m, "predict", ins, 1, NULL, &r), GSB_ENOTFITTED,
              "This Lasso instance is not fitted yet.");
    (void)out;
    gsb_model_free(m);
    m = testing_model(S, "Lasso", "{\"max_iter\": null}");
    CHECK_ERR(fit_opts(m, &Xa, &ya, NULL, NULL), GSB_EINVAL, "an integer is required");
    gsb_model_free(m);

    m = testing_model(S, "LassoCV", NULL);
    CHECK_ERR(fit_opts(m, &Xa, &Ya, NULL, NULL), GSB_EINVAL,
              "For multi-task outputs, use MultiTaskLassoCV");
    gsb_model_free(m);
    m = testing_model(S, "LassoCV", "{\"cv\": 20}");
    CHECK_ERR(fit_opts(m, &Xa, &ya, NULL, NULL), GSB_EINVAL,
              "Cannot have number of splits n_splits=20 greater than the number of samples: "
              "n_samples=12.");
    gsb_model_free(m);
    m = testing_model(S, "LassoCV", "{\"alphas\": [0.1, -1]}");
    CHECK_ERR(fit_opts(m, &Xa, &ya, NULL, NULL), GSB_EINVAL, "alphas[1] == -1, must be >= 0.0.");
    gsb_model_free(m);
    m = testing_model(S, "ElasticNetCV", "{\"l1_ratio\": 0}");
    CHECK_ERR(fit_opts(m, &Xa, &ya, NULL, NULL), GSB_EINVAL,
              "Automatic alpha grid generation is not supported for l1_ratio=0.");
    gsb_model_free(m);
    m = testing_model(S, "ElasticNetCV", "{\"l1_ratio\": [0.5, 2]}");
    CHECK_ERR(fit_opts(m, &Xa, &ya, NULL, NULL), GSB_EINVAL, "l1_ratio must be in [0, 1]");
    gsb_model_free(m);
}

static int cancel_at_3(void *data, const char *stage, int64_t it, double loss)
{
    (void)data;
    (void)stage;
    (void)loss;
    return it >= 3;
}

static void test_cancel_and_blob(void)
{
    enum { n = 50, p = 200 };
    static double Xd[n * p], yd[n];
    random_problem(n, p, Xd, yd);
    gsb_array Xa = gsb_array_2d(Xd, GSB_F64, n, p), ya = gsb_array_1d(yd, GSB_F64, n);
    gsb_model *m = testing_model(S, "Lasso", "{\"alpha\": 0.0001, \"tol\": 0}");
    gsb_model_set_progress(m, cancel_at_3, NULL);
    CHECK_ERR(fit_opts(m, &Xa, &ya, NULL, "{\"_cd_form\": 2}"), GSB_ECANCELLED, "cancelled");
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_set_progress(m, NULL, NULL);
    gsb_model_free(m);

    m = fitted("ElasticNetCV", "{\"cv\": 3, \"alphas\": 6}", &Xa, &ya, NULL, NULL);
    void *blob = NULL;
    size_t size = 0;
    CHECK_OK(gsb_model_export(m, &blob, &size));
    gsb_model *back = NULL;
    CHECK_OK(gsb_model_import(S, blob, size, &back));
    gsb_free(blob);
    double a[n], b[n];
    CHECK(testing_call(m, "predict", &Xa, "y", a, n, NULL) == n);
    CHECK(testing_call(back, "predict", &Xa, "y", b, n, NULL) == n);
    CHECK(memcmp(a, b, sizeof a) == 0);
    gsb_model_free(m);
    gsb_model_free(back);
}

int main(void)
{
    if (testing_open(&S))
        return 1;
    make_data();
    testing_seed(20260310);
    RUN(test_lasso_known);
    RUN(test_enet_known);
    RUN(test_several_targets_and_wide_known);
    RUN(test_cv_known);
    RUN(test_logistic_l1_known);
    RUN(test_kkt_every_form);
    RUN(test_weights_targets_float32);
    RUN(test_warm_start_and_random);
    RUN(test_errors);
    RUN(test_cancel_and_blob);
    return testing_close(S);
}
