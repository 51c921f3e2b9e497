/*
 * test_logistic.c - LogisticRegression against scikit-learn 1.9.1's answers
 * (binary and multinomial, C, sample_weight, class_weight, no penalty,
 * iteration counts), float32 and float64, invariants on fresh random data
 * (gradient of the objective ~0 at the optimum, probabilities, decision
 * function), warm start, progress and cancellation, errors, the solver
 * names (liblinear's penalised intercept) and the ConvergenceWarning.
 */
#include "test_api_helpers.h"

/* ---- scikit-learn reference answers -----------------------------------------
 * Produced by (numpy 2.4, scikit-learn 1.9.1):
 *   rng = np.random.RandomState(42); n, d = 40, 3
 *   X = np.round(rng.randn(n, d) * 1.5, 2)
 *   z = X @ [1.0, -2.0, 0.5] + rng.randn(n) * 1.5
 *   yb = np.where(z > 0.3, 5.0, 2.0)
 *   z2 = X @ [-1.0, 0.5, 1.5] + rng.randn(n)
 *   y3 = np.where(z > 1.0, 4.0, np.where(z2 > 0, 0.0, -1.0))
 *   sw = np.round(rng.uniform(0.2, 2.0, n), 2)
 *   m = LogisticRegression(**params).fit(X, y, sample_weight=...)
 *   mt = LogisticRegression(**params, tol=1e-10, max_iter=1000).fit(...)
 * and each case records m.n_iter_[0], m.score(X, y), m.coef_,
 * m.intercept_, m.predict_proba(X[:3]), mt.coef_, mt.intercept_.
 */
#define N 40
#define D 3

typedef struct ref_case {
    const char *params; /* as JSON */
    int binary;         /* y = yb (else y3) */
    int weighted;       /* sample_weight = sw */
    int n_iter;
    double score;
    double coef[9], icpt[3], proba[9]; /* default tol */
    double coef_tight[9], icpt_tight[3]; /* tol=1e-10, max_iter=1000 */
} ref_case;

static const double DATA_X[] = {
    0.75, -0.21, 0.97, 2.28, -0.35, -0.35, 2.37, 1.15, -0.70, 0.81, -0.70, -0.70,
    0.36, -2.87, -2.59, -0.84, -1.52, 0.47, -1.36, -2.12, 2.20, -0.34, 0.10, -2.14,
    -0.82, 0.17, -1.73, 0.56, -0.90, -0.44, -0.90, 2.78, -0.02, -1.59, 1.23, -1.83,
    0.31, -2.94, -1.99, 0.30, 1.11, 0.26, -0.17, -0.45, -2.22, -1.08, -0.69, 1.59,
    0.52, -2.64, 0.49, -0.58, -1.02, 0.92, 1.55, 1.40, -1.26, -0.46, 0.50, 1.46,
    -0.72, -0.28, -1.66, -1.79, 1.22, 2.03, -0.11, 1.51, 0.54, -0.97, 0.54, 2.31,
    -0.05, 2.35, -3.93, 1.23, 0.13, -0.45, 0.14, -2.98, -0.33, 0.54, 2.22, -0.78,
    -1.21, -0.75, 1.37, 0.49, -0.79, 0.77, 0.15, 1.45, -1.05, -0.49, -0.59, -2.20,
    0.44, 0.39, 0.01, -0.35, -2.12, -0.63, -0.51, -1.20, -0.24, 0.61, 2.83, 0.26,
    0.39, -0.11, -2.88, -0.04, 0.09, 3.69, -0.29, 0.45, -0.05, -1.75, 1.71, 1.13};
static const double DATA_YB[] = {
    5, 5, 5, 2, 5, 5, 5, 2, 2, 5, 2, 2, 5, 2, 2, 5, 5, 5, 2, 2,
    2, 2, 2, 2, 2, 5, 5, 2, 5, 5, 2, 2, 2, 5, 5, 2, 5, 5, 2, 2};
static const double DATA_Y3[] = {
    4, 4, 4, -1, 4, 4, 4, -1, -1, 4, 0, -1, 4, 0, -1, 4, 4, 4, -1, 0,
    -1, 0, 0, 0, -1, 4, 4, -1, 4, 4, -1, -1, -1, 4, 4, 0, 4, 4, 0, 0};
static const double DATA_SW[] = {
    1.78, 1.53, 1.45, 1.46, 0.85, 0.73, 1.66, 1.66, 1.76, 1.84, 1.12, 1.10,
    1.64, 1.37, 1.46, 1.63, 1.80, 0.81, 0.88, 0.37, 1.24, 0.26, 1.04, 1.18,
    0.72, 1.26, 0.25, 0.27, 1.68, 0.85, 0.43, 1.14, 1.59, 0.59, 1.32, 0.35,
    0.29, 1.16, 1.17, 1.35};
/* LogisticRegression(C=0.5).fit(X, yb) */
static const ref_case BIN_C05 = {
    "{\"C\": 0.5}",
    1, 0, 8, 0.925,
    {0.80291372427, -1.38415667225, 0.477811252284},
    {-0.138080318406},
    {0.228243720812, 0.771756279188, 0.118179499537, 0.881820500463,
     0.54026830795, 0.45973169205},
    {0.802924490064, -1.38409841711, 0.477761974144},
    {-0.138209827222}};
/* LogisticRegression(C=2.0, class_weight='balanced').fit(X, yb, sample_weight=sw) */
static const ref_case BIN_SW_BAL = {
    "{\"C\": 2.0, \"class_weight\": \"balanced\"}",
    1, 1, 7, 0.925,
    {1.4779572705, -2.07463756005, 1.07199073612},
    {-0.372976261332},
    {0.0987673286049, 0.901232671395, 0.0339708008414, 0.966029199159,
     0.501611054324, 0.498388945676},
    {1.47836676421, -2.07387225562, 1.07213059446},
    {-0.373962977572}};
/* LogisticRegression(C=1.5).fit(X, y3) */
static const ref_case MULTI_C15 = {
    "{\"C\": 1.5}",
    0, 0, 11, 0.9,
    {-0.225427836951, 0.290286854886, -0.957412664617, -0.658574713913,
     1.20235089459, 0.583852647841, 0.884002550864, -1.49263774948,
     0.373560016775},
    {0.010734824137, -0.772312433428, 0.761577609291},
    {0.0357596961951, 0.0434846474697, 0.920755656335, 0.0310431835324,
     0.00223913995172, 0.966717676516, 0.377651557679, 0.060000598453,
     0.562347843868},
    {-0.225028283118, 0.289859989929, -0.958073696347, -0.658230625057,
     1.2025486429, 0.584780690601, 0.883258908175, -1.49240863283,
     0.373293005745},
    {0.0105437313806, -0.773559647734, 0.763015916353}};
/* LogisticRegression(class_weight='balanced').fit(X, y3, sample_weight=sw) */
static const ref_case MULTI_SW_BAL = {
    "{\"class_weight\": \"balanced\"}",
    0, 1, 10, 0.875,
    {-0.200790754959, 0.17924264615, -1.20718559086, -0.603786431197,
     1.2972194471, 0.583526496561, 0.804577186156, -1.47646209325,
     0.623659094304},
    {-0.00426911253635, -0.331978488024, 0.336247600561},
    {0.0352430097782, 0.0843122078913, 0.880444782331, 0.0704784014038,
     0.00732084436384, 0.922200754232, 0.521897425022, 0.149431306137,
     0.328671268841},
    {-0.200506607939, 0.179342022769, -1.20724449364, -0.603686120859,
     1.29705176033, 0.583869597195, 0.804192728798, -1.4763937831,
     0.623374896442},
    {-0.00444684507425, -0.332386423703, 0.336833268777}};
/* LogisticRegression(fit_intercept=False, class_weight={-1: 2.0, 4: 0.5}).fit(X, y3) */
static const ref_case MULTI_NOINT_DICT = {
    "{\"fit_intercept\": false, \"class_weight\": {\"-1\": 2.0, \"4\": 0.5}}",
    0, 0, 8, 0.875,
    {-0.0381306381674, 0.459653231244, -1.23081835359, -0.505685740272,
     0.799592349516, 0.661199447832, 0.543816378439, -1.25924558076,
     0.569618905756},
    {0, 0, 0},
    {0.056060974155, 0.230360079685, 0.71357894616, 0.207436892171,
     0.0327078988771, 0.759855208951, 0.777705411546, 0.100963567819,
     0.121331020635},
    {-0.0383004098619, 0.459615951512, -1.23044871065, -0.505987869009,
     0.799452781582, 0.660731187788, 0.544288278871, -1.25906873309,
     0.569717522863},
    {0, 0, 0}};
/* LogisticRegression(penalty=None).fit(X, yb) */
static const ref_case BIN_NONE = {
    "{\"penalty\": null}",
    1, 0, 10, 0.95,
    {2.18570447899, -3.22400960665, 0.881089643271},
    {-0.293164978399},
    {0.0532613398495, 0.94673866015, 0.00402874605444, 0.995971253946,
     0.36295051396, 0.63704948604},
    {2.1853748473, -3.22321230128, 0.880715984953},
    {-0.293681471216}};
/* LogisticRegression(max_iter=3).fit(X, y3) */
static const ref_case MULTI_ITER3 = {
    "{\"max_iter\": 3}",
    0, 0, 3, 0.9,
    {-0.20363297409, 0.323099816367, -0.863360405093, -0.411197948561,
     0.772998178862, 0.521420453733, 0.614830922651, -1.09609799523,
     0.34193995136},
    {-0.15932742797, -0.413046245301, 0.572373673271},
    {0.0500748872397, 0.115918326181, 0.83400678658, 0.0635614478732,
     0.0161658733098, 0.920272678817, 0.397133732641, 0.119900447088,
     0.482965820272},
    {-0.203503349816, 0.270874738596, -0.910813940062, -0.569746821785,
     1.07688951032, 0.557868379337, 0.773250171601, -1.34776424892,
     0.352945560725},
    {-0.0357005386369, -0.69861642462, 0.734316963257}};
/* LogisticRegression(max_iter=0).fit(X, yb) */
static const ref_case BIN_ITER0 = {
    "{\"max_iter\": 0}",
    1, 0, 0, 0.9,
    {0.210923451717, -0.929576140583, 0.299030716358},
    {-0.0444986185057},
    {0.354580577289, 0.645419422711, 0.3413918628, 0.6586081372,
     0.694860933421, 0.305139066579},
    {1.07076517262, -1.71635846109, 0.574846845996},
    {-0.168682542902}};

/* ---- helpers ----------------------------------------------------------------- */

static gsb_session *S;

/* X as an array of dtype dt (buf holds n*d floats or doubles). */
static gsb_array as_array(const double *src, int64_t n, int64_t d, gsb_dtype dt, void *buf)
{
    if (dt == GSB_F32)
        testing_to_f32(src, buf, n * d);
    else
        memcpy(buf, src, (size_t)(n * d) * sizeof *src);
    return gsb_array_2d(buf, dt, n, d);
}

/* fit m with X, y (float64) and optional sample weights; the status */
static int fit_y(gsb_model *m, const gsb_array *X, const double *y, const double *sw)
{
    gsb_array ya = gsb_array_1d((void *)y, GSB_F64, X->shape[0]);
    gsb_array wa = gsb_array_1d((void *)sw, GSB_F64, X->shape[0]);
    return testing_fit(m, X, &ya, sw ? &wa : NULL);
}

/* a model fitted as fit_y; NULL (with a failed check) when that fails */
static gsb_model *fit_model(const char *params, const gsb_array *X, const double *y,
                            const double *sw)
{
    gsb_model *m = testing_model(S, "LogisticRegression", params);
    if (!m)
        return NULL;
    int rc = fit_y(m, X, y, sw);
    CHECK_OK(rc);
    if (rc != GSB_OK) {
        gsb_model_free(m);
        return NULL;
    }
    return m;
}

/* the status of creating a model and fitting it as fit_y (the model is freed) */
static int fit_status(const char *params, const gsb_array *X, const double *y,
                      const double *sw)
{
    gsb_model *m = NULL;
    int rc = gsb_model_create(S, "LogisticRegression", params, &m);
    if (rc != GSB_OK)
        return rc;
    rc = fit_y(m, X, y, sw);
    gsb_model_free(m);
    return rc;
}

/* "{...}" + ", extra}" */
static void merge_params(const char *params, const char *extra, char *buf, size_t n)
{
    size_t len = strlen(params);
    snprintf(buf, n, "%.*s%s%s}", (int)(len - 1), params, len > 2 ? ", " : "", extra);
}

/* ---- known answers ------------------------------------------------------------- */

static float XF[N * D];
static double XD[N * D];

static void check_case(const ref_case *rc, gsb_dtype dt, int tight)
{
    gsb_array X = as_array(DATA_X, N, D, dt, dt == GSB_F32 ? (void *)XF : (void *)XD);
    const double *y = rc->binary ? DATA_YB : DATA_Y3;
    const double *sw = rc->weighted ? DATA_SW : NULL;
    int64_t K = rc->binary ? 2 : 3, R = rc->binary ? 1 : 3;
    /* float64 takes scikit-learn's steps exactly; float32 X only rounds the data */
    double tol = dt == GSB_F64 ? 1e-6 : 1e-4;
    gsb_model *m = fit_model(rc->params, &X, y, sw);
    if (!m)
        return;
    double v[16];
    gsb_array info;
    CHECK(testing_attr(m, "classes_", v, 16, &info) == K && info.ndim == 1);
    CHECK(info.dtype == GSB_F64);
    if (rc->binary)
        CHECK(v[0] == 2 && v[1] == 5);
    else
        CHECK(v[0] == -1 && v[1] == 0 && v[2] == 4);

    CHECK(testing_attr(m, "coef_", v, 16, &info) == R * D);
    CHECK(info.ndim == 2 && info.shape[0] == R && info.shape[1] == D && info.dtype == dt);
    CHECK(testing_relerr(v, rc->coef, R * D) < tol);
    CHECK(testing_attr(m, "intercept_", v, 16, &info) == R);
    CHECK(info.ndim == 1 && info.dtype == dt);
    for (int64_t r = 0; r < R; r++)
        CHECK_CLOSE(v[r], rc->icpt[r], tol);
    CHECK(testing_attr(m, "n_iter_", v, 16, &info) == 1);
    CHECK(info.ndim == 1 && info.dtype == GSB_I32);
    if (dt == GSB_F64)
        CHECK(v[0] == rc->n_iter);
    else
        CHECK(fabs(v[0] - rc->n_iter) <= 1);

    gsb_array X3 = X;
    X3.shape[0] = 3;
    CHECK(testing_call(m, "predict_proba", &X3, "proba", v, 16, &info) == 3 * K);
    CHECK(info.ndim == 2 && info.shape[1] == K && info.dtype == dt);
    for (int64_t i = 0; i < 3 * K; i++)
        CHECK_CLOSE(v[i], rc->proba[i], dt == GSB_F64 ? 1e-6 : 1e-4);

    gsb_result *r = NULL;
    gsb_array ya = gsb_array_1d((void *)y, GSB_F64, N);
    const gsb_array *ins[2] = {&X, &ya};
    CHECK_OK(gsb_model_call(m, "score", ins, 2, NULL, &r));
    if (r) {
        CHECK_CLOSE(testing_at(gsb_result_array(r, 0), 0), rc->score, 1e-12);
        gsb_result_free(r);
    }
    gsb_model_free(m);

    if (!tight)
        return;
    char params[256];
    merge_params(rc->params, "\"tol\": 1e-10, \"max_iter\": 1000", params, sizeof params);
    m = fit_model(params, &X, y, sw);
    if (!m)
        return;
    CHECK(testing_attr(m, "coef_", v, 16, NULL) == R * D);
    CHECK(testing_relerr(v, rc->coef_tight, R * D) < tol);
    CHECK(testing_attr(m, "intercept_", v, 16, NULL) == R);
    for (int64_t k = 0; k < R; k++)
        CHECK_CLOSE(v[k], rc->icpt_tight[k], tol);
    gsb_model_free(m);
}

static void test_binary(void)
{
    for (int f = 0; f < 2; f++) {
        gsb_dtype dt = f ? GSB_F32 : GSB_F64;
        check_case(&BIN_C05, dt, 1);
        check_case(&BIN_SW_BAL, dt, 1);
        check_case(&BIN_NONE, dt, 1);
    }
}

static void test_multinomial(void)
{
    for (int f = 0; f < 2; f++) {
        gsb_dtype dt = f ? GSB_F32 : GSB_F64;
        check_case(&MULTI_C15, dt, 1);
        check_case(&MULTI_SW_BAL, dt, 1);
        check_case(&MULTI_NOINT_DICT, dt, 1);
    }
}

/* stopped early, the coefficients are those of scikit-learn's iterates */
static void test_iteration_limit(void)
{
    check_case(&MULTI_ITER3, GSB_F64, 0);
    check_case(&BIN_ITER0, GSB_F64, 0);
}

/* ---- invariants on fresh random data ------------------------------------------ */

/* naive gradient of scikit-learn's objective; returns max |g| */
static double objective_grad_max(const double *X, const double *yidx, const double *w,
                                 int64_t n, int64_t d, int64_t R, const double *coef,
                                 const double *icpt, double C)
{
    double g[8 * 9] = {0}, sw = 0;
    for (int64_t i = 0; i < n; i++) {
        double z[8], p[8], mx = -INFINITY, s = 0;
        for (int64_t r = 0; r < R; r++) {
            z[r] = icpt[r];
            for (int64_t j = 0; j < d; j++)
                z[r] += X[i * d + j] * coef[r * d + j];
        }
        if (R == 1) {
            p[0] = 1 / (1 + exp(-z[0])) - (yidx[i] == 1);
        } else {
            for (int64_t r = 0; r < R; r++)
                mx = fmax(mx, z[r]);
            for (int64_t r = 0; r < R; r++)
                s += exp(z[r] - mx);
            for (int64_t r = 0; r < R; r++)
                p[r] = exp(z[r] - mx) / s - (yidx[i] == r);
        }
        for (int64_t r = 0; r < R; r++) {
            for (int64_t j = 0; j < d; j++)
                g[r * (d + 1) + j] += w[i] * p[r] * X[i * d + j];
            g[r * (d + 1) + d] += w[i] * p[r];
        }
        sw += w[i];
    }
    double mx = 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j <= d; j++) {
            double gj = g[r * (d + 1) + j] / sw;
            if (j < d)
                gj += coef[r * d + j] / (C * sw);
            mx = fmax(mx, fabs(gj));
        }
    return mx;
}

static void check_random(int64_t K, gsb_dtype dt)
{
    enum { RN = 300, RD = 5 };
    static double X[RN * RD], Xr[RN * RD], y[RN], yidx[RN], w[RN];
    static double coef[8 * RD], icpt[8], scores[RN * 8], proba[RN * 8], logp[RN * 8],
        labels[RN];
    static float Xf[RN * RD];
    const double classes[4] = {-3, 1, 2.5 - 0.5, 10};
    testing_fill_normal(X, RN * RD);
    /* labels from a noisy linear model so the classes overlap */
    for (int64_t i = 0; i < RN; i++) {
        double best = -INFINITY;
        int64_t arg = 0;
        for (int64_t k = 0; k < K; k++) {
            double s = 0.8 * X[i * RD + k % RD] - 0.5 * X[i * RD + (k + 2) % RD] +
                       testing_normal();
            if (s > best) {
                best = s;
                arg = k;
            }
        }
        yidx[i] = (double)arg;
        y[i] = classes[arg];
        w[i] = 0.2 + 1.8 * testing_uniform();
    }
    gsb_array Xa = as_array(X, RN, RD, dt, dt == GSB_F32 ? (void *)Xf : (void *)Xr);
    /* the data as the fit saw it (float32 rounds it) */
    for (int64_t i = 0; i < RN * RD; i++)
        Xr[i] = dt == GSB_F32 ? (double)Xf[i] : X[i];
    gsb_model *m = fit_model("{\"C\": 0.7, \"tol\": 1e-8, \"max_iter\": 500}", &Xa, y, w);
    if (!m)
        return;
    int64_t R = K == 2 ? 1 : K;
    double it[1];
    CHECK(testing_attr(m, "coef_", coef, 8 * RD, NULL) == R * RD);
    CHECK(testing_attr(m, "intercept_", icpt, 8, NULL) == R);
    CHECK(testing_attr(m, "n_iter_", it, 1, NULL) == 1 && it[0] > 1 && it[0] < 500);
    double gmax = objective_grad_max(Xr, yidx, w, RN, RD, R, coef, icpt, 0.7);
    /* float32 coef_ rounds the optimum by ~1e-7 relative */
    CHECK(gmax < (dt == GSB_F64 ? 1e-6 : 1e-5));

    gsb_array info;
    CHECK(testing_call(m, "decision_function", &Xa, "scores", scores, RN * 8, &info) == RN * R);
    CHECK(info.dtype == dt && info.ndim == (R == 1 ? 1 : 2));
    CHECK(testing_call(m, "predict_proba", &Xa, "proba", proba, RN * 8, NULL) == RN * K);
    CHECK(testing_call(m, "predict_log_proba", &Xa, "log_proba", logp, RN * 8, NULL) == RN * K);
    CHECK(testing_call(m, "predict", &Xa, "labels", labels, RN, &info) == RN);
    CHECK(info.dtype == GSB_F64 && info.ndim == 1);
    double etol = dt == GSB_F64 ? 1e-12 : 1e-5;
    for (int64_t i = 0; i < RN; i++) {
        double sum = 0, best = -1;
        int64_t arg = 0;
        for (int64_t r = 0; r < R; r++) {
            double z = icpt[r];
            for (int64_t j = 0; j < RD; j++)
                z += Xr[i * RD + j] * coef[r * RD + j];
            CHECK_CLOSE(scores[i * R + r], z, etol);
        }
        for (int64_t k = 0; k < K; k++) {
            sum += proba[i * K + k];
            CHECK_CLOSE(logp[i * K + k], log(proba[i * K + k]), etol);
            if (proba[i * K + k] > best) {
                best = proba[i * K + k];
                arg = k;
            }
        }
        CHECK_CLOSE(sum, 1.0, etol);
        if (R == 1)
            CHECK_CLOSE(proba[i * 2 + 1], 1 / (1 + exp(-scores[i])), etol);
        CHECK(labels[i] == classes[arg] || fabs(proba[i * K + arg] - 0.5) < 1e-6);
    }
    gsb_model_free(m);
}

static void test_random_invariants(void)
{
    testing_seed(2024);
    check_random(2, GSB_F64);
    check_random(4, GSB_F64);
    check_random(2, GSB_F32);
    check_random(4, GSB_F32);
}

/* class_weight {c: k} is sample_weight k on class c's rows */
static void test_class_weight_is_sample_weight(void)
{
    gsb_array X = as_array(DATA_X, N, D, GSB_F64, XD);
    double sw[N], a[16], b[16];
    for (int i = 0; i < N; i++)
        sw[i] = DATA_Y3[i] == 0 ? 3.0 : DATA_Y3[i] == 4 ? 0.5 : 1.0;
    gsb_model *m1 = fit_model("{\"class_weight\": {\"0\": 3, \"4.0\": 0.5}, \"tol\": 1e-10}",
                              &X, DATA_Y3, NULL);
    gsb_model *m2 = fit_model("{\"tol\": 1e-10}", &X, DATA_Y3, sw);
    if (m1 && m2) {
        CHECK(testing_attr(m1, "coef_", a, 16, NULL) == 9);
        CHECK(testing_attr(m2, "coef_", b, 16, NULL) == 9);
        CHECK(testing_relerr(a, b, 9) < 1e-8);
        /* and 'balanced' with unit weights is n / (K * count) per class */
        gsb_model_free(m1);
        double cnt[3] = {0};
        for (int i = 0; i < N; i++)
            cnt[DATA_Y3[i] == -1 ? 0 : DATA_Y3[i] == 0 ? 1 : 2] += 1;
        for (int i = 0; i < N; i++)
            sw[i] = N / (3 * cnt[DATA_Y3[i] == -1 ? 0 : DATA_Y3[i] == 0 ? 1 : 2]);
        m1 = fit_model("{\"class_weight\": \"balanced\", \"tol\": 1e-10}", &X, DATA_Y3, NULL);
        gsb_model_free(m2);
        m2 = fit_model("{\"tol\": 1e-10}", &X, DATA_Y3, sw);
        if (m1 && m2) {
            CHECK(testing_attr(m1, "coef_", a, 16, NULL) == 9);
            CHECK(testing_attr(m2, "coef_", b, 16, NULL) == 9);
            CHECK(testing_relerr(a, b, 9) < 1e-8);
        }
    }
    gsb_model_free(m1);
    gsb_model_free(m2);
}

/* ---- warm start, progress, cancellation --------------------------------------- */

static void test_warm_start(void)
{
    gsb_array X = as_array(DATA_X, N, D, GSB_F64, XD);
    gsb_array ya = gsb_array_1d((void *)DATA_Y3, GSB_F64, N);
    const gsb_array *ins[2] = {&X, &ya};
    double cold[16], v[16], v2[16], it[1];
    gsb_model *m = fit_model("{\"tol\": 1e-10}", &X, DATA_Y3, NULL);
    if (!m)
        return;
    CHECK(testing_attr(m, "coef_", cold, 16, NULL) == 9);
    gsb_model_free(m);

    /* three iterations, then on from there to the optimum of a cold fit */
    m = fit_model("{\"warm_start\": true, \"max_iter\": 3, \"tol\": 1e-10}", &X, DATA_Y3,
                  NULL);
    if (!m)
        return;
    CHECK(testing_attr(m, "coef_", v, 16, NULL) == 9);
    CHECK(testing_relerr(v, MULTI_ITER3.coef, 9) < 1e-6);
    CHECK_OK(gsb_model_set_params(m, "{\"max_iter\": 100}"));
    CHECK_OK(gsb_model_call(m, "fit", ins, 2, NULL, NULL));
    CHECK(testing_attr(m, "coef_", v, 16, NULL) == 9);
    CHECK(testing_relerr(v, cold, 9) < 1e-6);
    CHECK(testing_attr(m, "n_iter_", it, 1, NULL) == 1);
    double first = it[0];
    /* from the optimum, a refit has (almost) nothing left to do */
    CHECK_OK(gsb_model_call(m, "fit", ins, 2, NULL, NULL));
    CHECK(testing_attr(m, "n_iter_", it, 1, NULL) == 1);
    CHECK(it[0] <= 2 && it[0] < first);
    CHECK(testing_attr(m, "coef_", v2, 16, NULL) == 9);
    CHECK(testing_relerr(v2, cold, 9) < 1e-6);

    /* scikit-learn's shape checks */
    gsb_array yb = gsb_array_1d((void *)DATA_YB, GSB_F64, N);
    const gsb_array *insb[2] = {&X, &yb};
    CHECK_ERR(gsb_model_call(m, "fit", insb, 2, NULL, NULL), GSB_EINVAL,
              "Initialization coef is of shape (3, 4), expected shape (4,) or (1, 4)");
    CHECK(!gsb_model_is_fitted(m));
    CHECK_OK(gsb_model_call(m, "fit", insb, 2, NULL, NULL)); /* unfitted: cold start */
    static double X2[N * 2];
    for (int i = 0; i < N; i++) {
        X2[i * 2] = DATA_X[i * D];
        X2[i * 2 + 1] = DATA_X[i * D + 1];
    }
    gsb_array X2a = gsb_array_2d(X2, GSB_F64, N, 2);
    const gsb_array *ins2[2] = {&X2a, &yb};
    CHECK_ERR(gsb_model_call(m, "fit", ins2, 2, NULL, NULL), GSB_EINVAL,
              "Initialization coef is of shape (1, 4), expected shape (3,) or (1, 3)");
    gsb_model_free(m);
}

typedef struct progress_log {
    int64_t calls, last_it, cancel_at;
    double last_loss;
    int bad;
} progress_log;

static int on_progress(void *data, const char *stage, int64_t it, double loss)
{
    progress_log *p = data;
    p->calls++;
    if (strcmp(stage, "iteration") != 0 || it != p->last_it + 1 || !isfinite(loss) ||
        (p->calls > 1 && loss > p->last_loss))
        p->bad = 1;
    p->last_it = it;
    p->last_loss = loss;
    return p->cancel_at && it == p->cancel_at;
}

static void test_progress_and_cancel(void)
{
    gsb_array X = as_array(DATA_X, N, D, GSB_F64, XD);
    gsb_array ya = gsb_array_1d((void *)DATA_YB, GSB_F64, N);
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(S, "LogisticRegression", "{\"C\": 0.5}", &m));
    if (!m)
        return;
    progress_log log = {0};
    gsb_model_set_progress(m, on_progress, &log);
    CHECK_OK(gsb_model_fit(m, &X, &ya));
    CHECK(log.calls == BIN_C05.n_iter && !log.bad);
    /* the loss reported is scikit-learn's objective: mean log-loss + penalty */
    double coef[3], icpt[1], f = 0, sq = 0;
    CHECK(testing_attr(m, "coef_", coef, 3, NULL) == 3);
    CHECK(testing_attr(m, "intercept_", icpt, 1, NULL) == 1);
    for (int i = 0; i < N; i++) {
        double z = icpt[0];
        for (int j = 0; j < D; j++)
            z += DATA_X[i * D + j] * coef[j];
        double t = DATA_YB[i] == 5 ? -z : z; /* log(1 + exp(t)) */
        f += t > 0 ? t + log1p(exp(-t)) : log1p(exp(t));
    }
    for (int j = 0; j < D; j++)
        sq += coef[j] * coef[j];
    f = f / N + sq / (2 * 0.5 * N);
    CHECK_CLOSE(log.last_loss, f, 1e-12);

    log = (progress_log){.cancel_at = 3};
    CHECK_ERR(gsb_model_fit(m, &X, &ya), GSB_ECANCELLED, "cancelled");
    CHECK(log.calls == 3 && !gsb_model_is_fitted(m));
    gsb_model_free(m);
}

/* ---- errors ------------------------------------------------------------------ */

static void test_errors(void)
{
    gsb_array X = as_array(DATA_X, N, D, GSB_F64, XD);
    double ones[N], cont[N], zeros[N];
    for (int i = 0; i < N; i++) {
        ones[i] = 1.0;
        cont[i] = DATA_YB[i] + 0.5 * (i % 2);
        zeros[i] = 0.0;
    }
    CHECK_ERR(fit_status(NULL, &X, ones, NULL), GSB_EINVAL,
              "This solver needs samples of at least 2 classes in the data, but the data "
              "contains only one class: 1.0");
    CHECK_ERR(fit_status(NULL, &X, cont, NULL), GSB_EINVAL, "Unknown label type: continuous.");
    CHECK_ERR(fit_status("{\"C\": 0}", &X, DATA_YB, NULL), GSB_EPARAM,
              "The 'C' parameter of LogisticRegression must be a float in the range (0");
    CHECK_ERR(fit_status("{\"C\": -1.5}", &X, DATA_YB, NULL), GSB_EPARAM, "'C' parameter");
    CHECK_ERR(fit_status("{\"tol\": -1}", &X, DATA_YB, NULL), GSB_EPARAM, "'tol' parameter");
    CHECK_ERR(fit_status("{\"max_iter\": -1}", &X, DATA_YB, NULL), GSB_EPARAM,
              "'max_iter' parameter");
    CHECK_ERR(fit_status("{\"solver\": \"bogus\"}", &X, DATA_YB, NULL), GSB_EPARAM,
              "'solver' parameter");
    CHECK_ERR(fit_status("{\"penalty\": \"l1\"}", &X, DATA_YB, NULL), GSB_EINVAL,
              "Solver lbfgs supports only 'l2' or None penalties, got l1 penalty.");
    CHECK_ERR(fit_status("{\"l1_ratio\": 0.5}", &X, DATA_YB, NULL), GSB_EINVAL,
              "Solver lbfgs supports only 'l2' or None penalties, got elasticnet penalty.");
    CHECK_ERR(fit_status("{\"l1_ratio\": 1}", &X, DATA_YB, NULL), GSB_EINVAL,
              "got l1 penalty.");
    CHECK_ERR(fit_status("{\"dual\": true}", &X, DATA_YB, NULL), GSB_EINVAL,
              "Solver lbfgs supports only dual=False, got dual=True");
    /* saga's l1 runs (OWL-QN); liblinear's, which penalises the intercept, does not */
    CHECK(fit_status("{\"solver\": \"saga\", \"l1_ratio\": 1}", &X, DATA_YB, NULL) == GSB_OK);
    CHECK_ERR(fit_status("{\"solver\": \"liblinear\", \"penalty\": \"l1\"}", &X, DATA_YB,
                         NULL),
              GSB_EUNSUPPORTED, "the 'l1' penalty with solver 'liblinear' is not supported");
    CHECK_ERR(fit_status("{\"solver\": \"liblinear\"}", &X, DATA_Y3, NULL), GSB_EINVAL,
              "The 'liblinear' solver does not support multiclass classification (n_classes "
              ">= 3). Either use another solver or wrap the estimator in a "
              "OneVsRestClassifier to keep applying a one-versus-rest scheme.");
    CHECK_ERR(fit_status("{\"solver\": \"newton-cg\", \"dual\": true}", &X, DATA_YB, NULL),
              GSB_EINVAL, "Solver newton-cg supports only dual=False, got dual=True");
    CHECK_ERR(fit_status("{\"solver\": \"liblinear\", \"penalty\": null}", &X, DATA_YB, NULL),
              GSB_EINVAL, "C=np.inf as well as penalty=None is not supported for the "
              "liblinear solver");
    CHECK_ERR(fit_status("{\"class_weight\": {\"0\": 1, \"7\": 2}}", &X, DATA_YB, NULL),
              GSB_EINVAL, "The classes, [2, 5], are not in class_weight");
    CHECK_ERR(fit_status("{\"class_weight\": {\"2\": \"x\"}}", &X, DATA_YB, NULL), GSB_EINVAL,
              "class_weight['2'] must be a number");
    CHECK_ERR(fit_status("{\"class_weight\": \"auto\"}", &X, DATA_YB, NULL), GSB_EPARAM,
              "'class_weight' parameter");
    CHECK_ERR(fit_status(NULL, &X, DATA_YB, zeros), GSB_EINVAL,
              "Sample weights must contain at least one non-zero number.");
    CHECK_ERR(fit_status("{\"class_weight\": {\"2\": 0, \"5\": 0}}", &X, DATA_YB, NULL),
              GSB_EINVAL, "positive total weight");

    static double Xn[N * D];
    memcpy(Xn, DATA_X, sizeof Xn);
    Xn[7] = NAN;
    gsb_array Xna = gsb_array_2d(Xn, GSB_F64, N, D);
    CHECK_ERR(fit_status(NULL, &Xna, DATA_YB, NULL), GSB_EINVAL, "Input X contains NaN.");
    /* X's error first, whatever else is wrong (with device=cuda X is checked
     * on the GPU after its upload, inside the fit, and y before that) */
    double negw[N];
    for (int i = 0; i < N; i++)
        negw[i] = i == 3 ? -1.0 : 1.0;
    CHECK_ERR(fit_status(NULL, &Xna, ones, NULL), GSB_EINVAL, "Input X contains NaN.");
    CHECK_ERR(fit_status(NULL, &Xna, cont, NULL), GSB_EINVAL, "Input X contains NaN.");
    CHECK_ERR(fit_status(NULL, &Xna, DATA_YB, negw), GSB_EINVAL, "Input X contains NaN.");
    Xn[7] = 1.0;
    Xn[N * D - 1] = -INFINITY;
    CHECK_ERR(fit_status(NULL, &Xna, DATA_YB, NULL), GSB_EINVAL,
              "Input X contains infinity or a value too large for dtype('float64').");
    /* a refused X leaves a fitted model as it was */
    gsb_model *kept = fit_model(NULL, &X, DATA_YB, NULL);
    double before[3] = {0}, after[3] = {0};
    CHECK(kept && testing_attr(kept, "coef_", before, 3, NULL) == 3);
    if (kept) {
        CHECK_ERR(fit_y(kept, &Xna, DATA_YB, NULL), GSB_EINVAL, "Input X contains infinity");
        CHECK(testing_attr(kept, "coef_", after, 3, NULL) == 3);
        CHECK(memcmp(before, after, sizeof before) == 0);
        gsb_model_free(kept);
    }

    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(S, "LogisticRegression", NULL, &m));
    if (!m)
        return;
    const gsb_array *ins[1] = {&X};
    gsb_result *r = NULL;
    CHECK_ERR(gsb_model_call(m, "predict_proba", ins, 1, NULL, &r), GSB_ENOTFITTED,
              "This LogisticRegression instance is not fitted yet");
    CHECK_OK(gsb_model_fit(m, &X, &(gsb_array){(void *)DATA_YB, GSB_F64, 1, {N, 0}, {0, 0}}));
    gsb_array X2 = gsb_array_2d(XD, GSB_F64, N / 2, 2 * D);
    const gsb_array *ins2[1] = {&X2};
    CHECK_ERR(gsb_model_call(m, "predict", ins2, 1, NULL, &r), GSB_EINVAL,
              "X has 6 features, but LogisticRegression is expecting 3 features as input.");
    gsb_model_free(m);
}

/* ---- solver names ------------------------------------------------------------- */

/* coef_ and intercept_ (binary: 3 + 1 values) of a fit of (X, DATA_YB). */
static int fit_binary_coef(const char *params, const gsb_array *X, const double *sw,
                           double *out)
{
    gsb_model *m = fit_model(params, X, DATA_YB, sw);
    if (!m)
        return 0;
    int ok = testing_attr(m, "coef_", out, 3, NULL) == 3 &&
             testing_attr(m, "intercept_", out + 3, 1, NULL) == 1;
    gsb_model_free(m);
    return ok;
}

/* newton-cg, newton-cholesky, sag and saga minimise lbfgs's objective: gsb
 * runs L-BFGS for them, so the answers are lbfgs's, bit for bit. */
static void test_solver_names(void)
{
    gsb_array X = as_array(DATA_X, N, D, GSB_F64, XD);
    double ref[4], v[4];
    CHECK(fit_binary_coef("{\"C\": 0.5}", &X, NULL, ref));
    static const char *const solvers[] = {"newton-cg", "newton-cholesky", "sag", "saga"};
    for (int i = 0; i < 4; i++) {
        char params[96];
        snprintf(params, sizeof params, "{\"C\": 0.5, \"solver\": \"%s\"}", solvers[i]);
        CHECK(fit_binary_coef(params, &X, NULL, v));
        CHECK(memcmp(v, ref, sizeof v) == 0);
    }
}

/*
 * liblinear also penalises the intercept (the weight of a constant feature of
 * value intercept_scaling): scikit-learn's liblinear answers, produced as the
 * reference cases above with
 *   LogisticRegression(solver='liblinear', tol=1e-12, max_iter=100000, **p)
 */
static void test_liblinear(void)
{
    static const struct {
        const char *params;
        int weighted;
        double coef[3], icpt;
    } cases[] = {
        {"{\"solver\": \"liblinear\", \"C\": 0.5, \"tol\": 1e-10}", 0,
         {0.8023065091507354, -1.3814979688278368, 0.47887392281379615}, -0.10017832422381442},
        {"{\"solver\": \"liblinear\", \"C\": 2.0, \"intercept_scaling\": 3.0, "
         "\"class_weight\": \"balanced\", \"tol\": 1e-10}", 1,
         {1.4770156167513062, -2.0724687604639, 1.0713158404623417}, -0.3685725796155209},
        {"{\"solver\": \"liblinear\", \"intercept_scaling\": 0.1, \"dual\": true, "
         "\"tol\": 1e-10}", 0,
         {1.06660565008864, -1.705832810568579, 0.5800463869886636}, -0.007199238405790568}};
    gsb_array X = as_array(DATA_X, N, D, GSB_F64, XD);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double v[4];
        CHECK(fit_binary_coef(cases[i].params, &X, cases[i].weighted ? DATA_SW : NULL, v));
        CHECK(testing_relerr(v, cases[i].coef, 3) < 1e-6);
        CHECK_CLOSE(v[3], cases[i].icpt, 1e-6);
    }
    static double big[N * D];
    for (int64_t i = 0; i < N * D; i++)
        big[i] = DATA_X[i];
    big[5] = 2e30;
    gsb_array B = gsb_array_2d(big, GSB_F64, N, D);
    CHECK_ERR(fit_status("{\"solver\": \"liblinear\"}", &B, DATA_YB, NULL), GSB_EINVAL,
              "Using the 'liblinear' solver while X contains a maximum value > 1e30 results "
              "in a frozen fit. Please choose another solver or rescale the input X.");
}

/* Not converging within max_iter warns in scikit-learn's words (gsb_warnings). */
static void test_convergence_warning(void)
{
    gsb_array X = as_array(DATA_X, N, D, GSB_F64, XD);
    gsb_model *m = fit_model("{\"max_iter\": 2}", &X, DATA_Y3, NULL);
    CHECK(strstr(gsb_warnings(), "{\"category\":\"ConvergenceWarning\",\"message\":\"lbfgs "
                                 "failed to converge after 2 iteration(s) (status=1):\\nSTOP: "
                                 "TOTAL NO. OF ITERATIONS REACHED LIMIT\\n\\nIncrease the "
                                 "number of iterations to improve the convergence "
                                 "(max_iter=2).\\nYou might also want to scale the data") != NULL);
    CHECK(strstr(gsb_warnings(), "#logistic-regression\"}]") != NULL);
    gsb_model_free(m);
    m = fit_model(NULL, &X, DATA_Y3, NULL);
    CHECK(strcmp(gsb_warnings(), "[]") == 0);
    gsb_model_free(m);
}

int main(void)
{
    if (testing_open(&S))
        return 1;
    RUN(test_binary);
    RUN(test_multinomial);
    RUN(test_iteration_limit);
    RUN(test_random_invariants);
    RUN(test_class_weight_is_sample_weight);
    RUN(test_warm_start);
    RUN(test_progress_and_cancel);
    RUN(test_errors);
    RUN(test_solver_names);
    RUN(test_liblinear);
    RUN(test_convergence_warning);
    return testing_close(S);
}
