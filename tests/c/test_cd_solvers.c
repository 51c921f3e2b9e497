/*
 * test_cd_solvers.c - the host solvers of the L1 models on their own:
 * coordinate descent (solvers/coordinate_descent.c: the Gram and residual
 * forms must run the same iterations, float32 and float64 X, edge cases:
 * zero columns, a penalty that zeroes everything, OLS, max_iter, a
 * cancelling callback) and OWL-QN (solvers/owlqn.c: the exact soft
 * threshold of a separable problem, the Lasso optimum that coordinate
 * descent finds, unpenalised coordinates crossing zero, bad options).
 */
#include <math.h>
#include <string.h>

#include "testing.h"
#include "solvers/coordinate_descent.h"
#include "solvers/owlqn.h"

enum { N = 80, P = 12 };

static double X[N * P], Xt[P * N], y[N], Q[P * P], q[P], y_norm2;
static float Xtf[P * N];

static void make_problem(void)
{
    testing_fill_normal(X, N * P);
    for (int i = 0; i < N; i++) {
        y[i] = 0.2 * testing_normal();
        for (int j = 0; j < 5; j++)
            y[i] += (j + 1) * (j % 2 ? -0.5 : 0.5) * X[i * P + j];
    }
    for (int i = 0; i < N; i++) /* a zero column */
        X[i * P + P - 1] = 0;
    memset(Q, 0, sizeof Q);
    memset(q, 0, sizeof q);
    y_norm2 = 0;
    for (int i = 0; i < N; i++) {
        y_norm2 += y[i] * y[i];
        for (int a = 0; a < P; a++) {
            Xt[a * N + i] = X[i * P + a];
            Xtf[a * N + i] = (float)X[i * P + a];
            q[a] += X[i * P + a] * y[i];
            for (int b = 0; b < P; b++)
                Q[a * P + b] += X[i * P + a] * X[i * P + b];
        }
    }
}

static gsb__cd_opts opts(double alpha, double beta)
{
    gsb__cd_opts o;
    gsb__cd_defaults(&o);
    o.alpha = alpha;
    o.beta = beta;
    o.tol = 1e-10;
    return o;
}

static void test_forms_agree(void)
{
    static const double ab[][2] = {{5, 0}, {5, 3}, {0, 4}, {30, 0}};
    for (size_t c = 0; c < sizeof ab / sizeof ab[0]; c++) {
        /* (with alpha = 0 scikit-learn's gap ignores positive: such a fit never
         * converges, there or here) */
        for (int pos = 0; pos < (ab[c][0] > 0 ? 2 : 1); pos++) {
            gsb__cd_opts o = opts(ab[c][0], ab[c][1]);
            o.positive = pos;
            double wg[P] = {0}, wr[P] = {0}, wf[P] = {0};
            gsb__cd_result rg, rr, rf;
            CHECK_OK(gsb__cd_gram(P, Q, q, y_norm2, wg, &o, &rg));
            CHECK_OK(gsb__cd_resid(N, P, Xt, GSB_F64, y, wr, &o, &rr));
            CHECK_OK(gsb__cd_resid(N, P, Xtf, GSB_F32, y, wf, &o, &rf));
            CHECK(rg.converged && rr.converged && rf.converged);
            CHECK(rg.n_iter == rr.n_iter);
            CHECK(testing_relerr(wg, wr, P) < 1e-10);
            CHECK(testing_relerr(wf, wr, P) < 1e-5);
            CHECK(wg[P - 1] == 0 && wr[P - 1] == 0); /* the zero column */
            for (int j = 0; j < P && pos; j++)
                CHECK(wg[j] >= 0);
            CHECK(fabs(rg.gap - rr.gap) <= 1e-9 * y_norm2);
            CHECK(rg.tol_abs == o.tol * y_norm2);
        }
    }
}

static void test_edges(void)
{
    /* alpha above max |X^T y|: w = 0 meets tol before any epoch */
    double top = 0;
    for (int j = 0; j < P; j++)
        top = fmax(top, fabs(q[j]));
    gsb__cd_opts o = opts(top * 1.01, 0);
    double w[P] = {0};
    gsb__cd_result r;
    CHECK_OK(gsb__cd_gram(P, Q, q, y_norm2, w, &o, &r));
    CHECK(r.n_iter == 0 && r.converged);
    for (int j = 0; j < P; j++)
        CHECK(w[j] == 0);
    /* ordinary least squares (alpha = beta = 0) on the columns that are not zero */
    o = opts(0, 0);
    o.tol = 1e-14;
    o.max_iter = 100000;
    CHECK_OK(gsb__cd_resid(N, P, Xt, GSB_F64, y, w, &o, &r));
    for (int j = 0; j < P - 1; j++) { /* normal equations */
        double g = q[j];
        for (int k = 0; k < P; k++)
            g -= Q[j * P + k] * w[k];
        CHECK(fabs(g) < 1e-6);
    }
    /* one epoch is not enough: not converged, n_iter = max_iter */
    o = opts(0.1, 0);
    o.max_iter = 1;
    memset(w, 0, sizeof w);
    CHECK_OK(gsb__cd_gram(P, Q, q, y_norm2, w, &o, &r));
    CHECK(!r.converged && r.n_iter == 1 && r.gap > r.tol_abs);
    /* random coordinates: the same stream, the same result */
    o = opts(5, 0);
    o.random = 1;
    o.seed = 99;
    double a[P] = {0}, b[P] = {0};
    gsb__cd_result ra, rb;
    CHECK_OK(gsb__cd_gram(P, Q, q, y_norm2, a, &o, &ra));
    CHECK_OK(gsb__cd_resid(N, P, Xt, GSB_F64, y, b, &o, &rb));
    CHECK(ra.n_iter == rb.n_iter && testing_relerr(a, b, P) < 1e-10);
    CHECK_ERR(gsb__cd_resid(N, P, Xt, GSB_I32, y, b, &o, &rb), GSB_EINTERNAL, "float");
}

static int stop_at_2(void *data, int64_t epoch, double gap)
{
    (void)gap;
    *(int64_t *)data = epoch;
    return epoch >= 2 ? GSB_ECANCELLED : GSB_OK;
}

/* a callback's status stops either form after that epoch */
static void test_cancel(void)
{
    gsb__cd_opts o = opts(0.01, 0);
    o.tol = 0;
    o.on_epoch = stop_at_2;
    int64_t seen = 0;
    o.data = &seen;
    double w[P] = {0};
    gsb__cd_result r;
    CHECK(gsb__cd_resid(N, P, Xt, GSB_F64, y, w, &o, &r) == GSB_ECANCELLED && seen == 2);
    seen = 0;
    CHECK(gsb__cd_gram(P, Q, q, y_norm2, w, &o, &r) == GSB_ECANCELLED && seen == 2);
}

/* ---- OWL-QN -------------------------------------------------------------------- */

/* f = 1/2 ||x - c||^2 (c = data) */
static int sep_eval(void *data, const double *x, double *f, double *g)
{
    const double *c = data;
    *f = 0;
    for (int i = 0; i < 6; i++) {
        g[i] = x[i] - c[i];
        *f += 0.5 * g[i] * g[i];
    }
    return GSB_OK;
}

static void test_owlqn_soft_threshold(void)
{
    double c[6] = {3, -2, 0.4, -0.3, 1.5, -0.2}, x[6] = {0}, l1[6] = {1, 1, 1, 1, 0.5, 0};
    gsb__owlqn_opts o;
    gsb__owlqn_defaults(&o);
    o.pgtol = 1e-12;
    gsb__owlqn_result r;
    CHECK_OK(gsb__owlqn_minimize(6, x, l1, sep_eval, NULL, c, &o, &r));
    static const double want[6] = {2, -1, 0, 0, 1, -0.2};
    for (int i = 0; i < 6; i++)
        CHECK_CLOSE(x[i], want[i], 1e-10);
    CHECK(x[2] == 0 && x[3] == 0); /* exact zeros */
    CHECK(r.stop == GSB__OWLQN_PGTOL && r.pg_norm <= 1e-12);
    o.m = 0;
    CHECK_ERR(gsb__owlqn_minimize(6, x, l1, sep_eval, NULL, c, &o, &r), GSB_EINVAL, "options");
}

/* f = 1/2 ||y - X w||^2 + beta/2 ||w||^2 for the problem above */
static double owl_beta;

static int lasso_eval(void *data, const double *w, double *f, double *g)
{
    (void)data;
    double r[N];
    *f = 0;
    for (int i = 0; i < N; i++) {
        r[i] = y[i];
        for (int j = 0; j < P; j++)
            r[i] -= X[i * P + j] * w[j];
        *f += 0.5 * r[i] * r[i];
    }
    for (int j = 0; j < P; j++) {
        g[j] = owl_beta * w[j];
        *f += 0.5 * owl_beta * w[j] * w[j];
        for (int i = 0; i < N; i++)
            g[j] -= X[i * P + j] * r[i];
    }
    return GSB_OK;
}

static void test_owlqn_matches_cd(void)
{
    static const double ab[][2] = {{5, 0}, {8, 2}, {40, 0}};
    for (size_t c = 0; c < sizeof ab / sizeof ab[0]; c++) {
        owl_beta = ab[c][1];
        double wq[P] = {0}, wc[P] = {0}, l1[P];
        for (int j = 0; j < P; j++)
            l1[j] = ab[c][0];
        gsb__owlqn_opts o;
        gsb__owlqn_defaults(&o);
        o.pgtol = 1e-10;
        o.max_iter = 1000;
        gsb__owlqn_result r;
        CHECK_OK(gsb__owlqn_minimize(P, wq, l1, lasso_eval, NULL, NULL, &o, &r));
        gsb__cd_opts co = opts(ab[c][0], ab[c][1]);
        co.tol = 1e-14;
        gsb__cd_result cr;
        CHECK_OK(gsb__cd_gram(P, Q, q, y_norm2, wc, &co, &cr));
        CHECK(testing_relerr(wq, wc, P) < 1e-7);
        for (int j = 0; j < P; j++)
            CHECK((wq[j] == 0) == (wc[j] == 0));
    }
}

int main(void)
{
    testing_seed(7);
    make_problem();
    RUN(test_forms_agree);
    RUN(test_edges);
    RUN(test_cancel);
    RUN(test_owlqn_soft_threshold);
    RUN(test_owlqn_matches_cd);
    return testing_done();
}
