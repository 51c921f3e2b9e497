/*
 * test_lbfgs.c - the host L-BFGS minimiser: known minimisers, scipy's
 * L-BFGS-B iteration counts, stopping rules, progress, cancellation and
 * errors.
 */
#include <float.h>

#include "core/error.h"
#include "solvers/lbfgs.h"
#include "testing.h"

/* ---- test problems ------------------------------------------------------- */

typedef struct problem {
    int64_t n;
    const double *A, *b;   /* quadratic: 0.5 x'Ax - b'x */
    int64_t evals;
    int64_t fail_at_eval;  /* eval returns GSB_EBACKEND at this call (0: never) */
    int64_t cancel_at_iter;/* on_iter returns GSB_ECANCELLED here (0: never) */
    int64_t iters_seen;
    double last_f;
    int f_increased;
} problem;

static int rosenbrock(void *data, const double *x, double *f, double *g)
{
    problem *p = data;
    int64_t n = p->n;
    p->evals++;
    if (p->fail_at_eval && p->evals == p->fail_at_eval)
        return gsb__err(GSB_EBACKEND, "injected failure");
    *f = 0;
    for (int64_t i = 0; i < n; i++)
        g[i] = 0;
    for (int64_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1 - x[i];
        *f += 100 * a * a + b * b;
        g[i] += -400 * x[i] * a - 2 * b;
        g[i + 1] += 200 * a;
    }
    return GSB_OK;
}

static int quadratic(void *data, const double *x, double *f, double *g)
{
    problem *p = data;
    int64_t n = p->n;
    p->evals++;
    *f = 0;
    for (int64_t i = 0; i < n; i++) {
        double ax = 0;
        for (int64_t j = 0; j < n; j++)
            ax += p->A[i * n + j] * x[j];
        g[i] = ax - p->b[i];
        *f += 0.5 * x[i] * ax - p->b[i] * x[i];
    }
    return GSB_OK;
}

/* f = 1e12 + sum (x_i - 1)^2: any step lowers f by far less than ftol * |f| */
static int huge_offset(void *data, const double *x, double *f, double *g)
{
    problem *p = data;
    p->evals++;
    *f = 1e12;
    for (int64_t i = 0; i < p->n; i++) {
        *f += (x[i] - 1) * (x[i] - 1);
        g[i] = 2 * (x[i] - 1);
    }
    return GSB_OK;
}

/* f = x - log(x): NaN for x < 0, minimum at 1; the second quasi-Newton step
 * from x0 = 10 overshoots to x < 0 */
static int barrier(void *data, const double *x, double *f, double *g)
{
    problem *p = data;
    p->evals++;
    *f = x[0] - log(x[0]);
    g[0] = 1 - 1 / x[0];
    return GSB_OK;
}

static int nan_everywhere(void *data, const double *x, double *f, double *g)
{
    (void)data;
    *f = NAN;
    g[0] = x[0];
    return GSB_OK;
}

static int track(void *data, int64_t it, double f)
{
    problem *p = data;
    if (it != p->iters_seen + 1)
        return gsb__err(GSB_EINTERNAL, "iteration %lld after %lld", (long long)it,
                        (long long)p->iters_seen);
    if (p->iters_seen > 0 && f > p->last_f)
        p->f_increased = 1;
    p->iters_seen = it;
    p->last_f = f;
    if (p->cancel_at_iter && it == p->cancel_at_iter)
        return gsb__err(GSB_ECANCELLED, "cancelled");
    return GSB_OK;
}

static void rosen_x0(double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = i % 2 == 0 ? -1.2 : 1.0;
}

/* ---- against scipy's L-BFGS-B ----------------------------------------------
 * Reference runs (scipy 1.17.1):
 *   from scipy.optimize import minimize, rosen, rosen_der
 *   x0 = np.array([-1.2 if i % 2 == 0 else 1.0 for i in range(n)])
 *   minimize(rosen, x0, jac=rosen_der, method="L-BFGS-B")           # defaults
 *   minimize(rosen, x0, jac=rosen_der, method="L-BFGS-B",
 *            options=dict(maxls=50, gtol=1e-8, ftol=64*np.finfo(float).eps))
 * n=2:  nit 36, nfev 44 (defaults); nit 38, nfev 46 (tight)
 * n=10: nit 71, nfev 88 (defaults); nit 75, nfev 93 (tight)
 * The same algorithm takes the same steps (all four counts match exactly at
 * the time of writing); rounding may shift a count by one on these long,
 * curved valleys. */
static void check_rosenbrock(int64_t n, int tight, int64_t nit, int64_t nfev)
{
    double x[10];
    rosen_x0(x, n);
    problem p = {.n = n};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    if (tight) {
        o.max_ls = 50;
        o.pgtol = 1e-8;
        o.ftol = 64 * DBL_EPSILON;
    }
    gsb__lbfgs_result r;
    CHECK_OK(gsb__lbfgs_minimize(n, x, rosenbrock, track, &p, &o, &r));
    for (int64_t i = 0; i < n; i++)
        CHECK_CLOSE(x[i], 1.0, tight ? 1e-7 : 1e-5);
    CHECK(llabs(r.n_iter - nit) <= 1);
    CHECK(llabs(r.n_eval - nfev) <= 2);
    CHECK(r.n_eval == p.evals);
    CHECK(r.stop == GSB__LBFGS_PGTOL || r.stop == GSB__LBFGS_FTOL);
    CHECK(r.stop != GSB__LBFGS_PGTOL || r.pg_norm <= o.pgtol);
    CHECK(p.iters_seen == r.n_iter && !p.f_increased);
    double f, g[10];
    rosenbrock(&p, x, &f, g);
    CHECK_CLOSE(r.f, f, 1e-12);
    CHECK(r.f < (tight ? 1e-15 : 1e-10));
}

static void test_rosenbrock_2d(void)
{
    check_rosenbrock(2, 0, 36, 44);
    check_rosenbrock(2, 1, 38, 46);
}

static void test_rosenbrock_10d(void)
{
    check_rosenbrock(10, 0, 71, 88);
    check_rosenbrock(10, 1, 75, 93);
}

/* ---- a convex quadratic with a known minimiser ----------------------------- */

/* solve A x = b for SPD A by Cholesky (naive reference) */
static void chol_solve(const double *A, const double *b, double *x, int n)
{
    double L[40 * 40] = {0};
    for (int j = 0; j < n; j++) {
        double s = A[j * n + j];
        for (int k = 0; k < j; k++)
            s -= L[j * n + k] * L[j * n + k];
        L[j * n + j] = sqrt(s);
        for (int i = j + 1; i < n; i++) {
            double t = A[i * n + j];
            for (int k = 0; k < j; k++)
                t -= L[i * n + k] * L[j * n + k];
            L[i * n + j] = t / L[j * n + j];
        }
    }
    double z[40];
    for (int i = 0; i < n; i++) {
        double t = b[i];
        for (int k = 0; k < i; k++)
            t -= L[i * n + k] * z[k];
        z[i] = t / L[i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        double t = z[i];
        for (int k = i + 1; k < n; k++)
            t -= L[k * n + i] * x[k];
        x[i] = t / L[i * n + i];
    }
}

static void test_quadratic(void)
{
    enum { N = 30 };
    static double B[N * N], A[N * N], b[N], xstar[N], x[N];
    testing_seed(11);
    testing_fill_normal(B, N * N);
    testing_fill_normal(b, N);
    /* A = B'B / N + 0.1 I: SPD with a condition number in the hundreds */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < N; k++)
                s += B[k * N + i] * B[k * N + j];
            A[i * N + j] = s / N + (i == j ? 0.1 : 0.0);
        }
    chol_solve(A, b, xstar, N);
    for (int i = 0; i < N; i++)
        x[i] = 0;
    problem p = {.n = N, .A = A, .b = b};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    /* tighter than 1e-8 is below what f's rounding lets a line search see */
    o.pgtol = 1e-7;
    o.ftol = 0;
    gsb__lbfgs_result r;
    CHECK_OK(gsb__lbfgs_minimize(N, x, quadratic, track, &p, &o, &r));
    CHECK(r.stop == GSB__LBFGS_PGTOL);
    CHECK(r.pg_norm <= 1e-7);
    /* |x - x*| <= |A^-1| |g| <= 10 * sqrt(N) * 1e-7 */
    CHECK(testing_relerr(x, xstar, N) < 1e-6);
    CHECK(!p.f_increased);
    /* L-BFGS on a quadratic needs far fewer iterations than the 15000 cap */
    CHECK(r.n_iter > 5 && r.n_iter < 500);
}

/* ---- stopping rules ----------------------------------------------------- */

static void test_max_iter(void)
{
    double x[2];
    rosen_x0(x, 2);
    problem p = {.n = 2};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    o.max_iter = 5;
    gsb__lbfgs_result r;
    CHECK_OK(gsb__lbfgs_minimize(2, x, rosenbrock, track, &p, &o, &r));
    CHECK(r.n_iter == 5 && r.stop == GSB__LBFGS_MAX_ITER);
    CHECK(p.iters_seen == 5 && !p.f_increased);
    CHECK(r.f < 24.2); /* f(x0) = 24.2 */
    CHECK_CLOSE(r.f, p.last_f, 0);

    /* as scipy: max_iter = 0 still takes one step (nit 1, nfev 3 there) */
    rosen_x0(x, 2);
    p = (problem){.n = 2};
    o.max_iter = 0;
    CHECK_OK(gsb__lbfgs_minimize(2, x, rosenbrock, track, &p, &o, &r));
    CHECK(r.n_iter == 1 && r.stop == GSB__LBFGS_MAX_ITER && r.n_eval == 3);
    /* scipy: x = [-1.0174098, 1.07452661] */
    CHECK_CLOSE(x[0], -1.0174098, 1e-6);
    CHECK_CLOSE(x[1], 1.07452661, 1e-6);
}

static void test_max_eval(void)
{
    double x[2];
    rosen_x0(x, 2);
    problem p = {.n = 2};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    o.max_eval = 10;
    gsb__lbfgs_result r;
    CHECK_OK(gsb__lbfgs_minimize(2, x, rosenbrock, NULL, &p, &o, &r));
    CHECK(r.stop == GSB__LBFGS_MAX_EVAL);
    /* checked after each iteration, as scipy does: at most one line search over */
    CHECK(r.n_eval > 10 && r.n_eval <= 10 + o.max_ls);
}

static void test_converged_at_start(void)
{
    double x[3] = {1, 1, 1};
    problem p = {.n = 3};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    gsb__lbfgs_result r;
    CHECK_OK(gsb__lbfgs_minimize(3, x, rosenbrock, track, &p, &o, &r));
    CHECK(r.n_iter == 0 && r.n_eval == 1 && r.stop == GSB__LBFGS_PGTOL);
    CHECK(p.iters_seen == 0);
    CHECK(x[0] == 1 && x[1] == 1 && x[2] == 1 && r.f == 0);
}

static void test_ftol(void)
{
    double x[2] = {0, 0};
    problem p = {.n = 2};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    gsb__lbfgs_result r;
    CHECK_OK(gsb__lbfgs_minimize(2, x, huge_offset, NULL, &p, &o, &r));
    CHECK(r.stop == GSB__LBFGS_FTOL && r.n_iter == 1);
    CHECK(r.f < 1e12 + 2); /* the one step still went downhill */
}

/* ---- robustness, callbacks and errors ------------------------------------ */

static void test_outside_domain(void)
{
    double x[1] = {10};
    problem p = {.n = 1};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    gsb__lbfgs_result r;
    CHECK_OK(gsb__lbfgs_minimize(1, x, barrier, NULL, &p, &o, &r));
    CHECK(r.stop == GSB__LBFGS_PGTOL || r.stop == GSB__LBFGS_FTOL);
    CHECK_CLOSE(x[0], 1.0, 1e-4);
    CHECK(isfinite(r.f));
}

static void test_cancel(void)
{
    double x[2];
    rosen_x0(x, 2);
    problem p = {.n = 2, .cancel_at_iter = 3};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    gsb__lbfgs_result r;
    CHECK_ERR(gsb__lbfgs_minimize(2, x, rosenbrock, track, &p, &o, &r), GSB_ECANCELLED,
              "cancelled");
    CHECK(r.n_iter == 3 && p.iters_seen == 3);
    /* x is the point of iteration 3 */
    double f, g[2];
    rosenbrock(&p, x, &f, g);
    CHECK_CLOSE(f, p.last_f, 1e-15);
}

static void test_eval_error(void)
{
    double x[2];
    rosen_x0(x, 2);
    problem p = {.n = 2, .fail_at_eval = 7};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    gsb__lbfgs_result r;
    CHECK_ERR(gsb__lbfgs_minimize(2, x, rosenbrock, NULL, &p, &o, &r), GSB_EBACKEND,
              "injected failure");
    CHECK(p.evals == 7 && r.n_eval == 6);
    CHECK(isfinite(x[0]) && isfinite(x[1]));

    p = (problem){.n = 2, .fail_at_eval = 1};
    CHECK_ERR(gsb__lbfgs_minimize(2, x, rosenbrock, NULL, &p, &o, &r), GSB_EBACKEND,
              "injected failure");
}

static void test_bad_start_and_options(void)
{
    double x[1] = {1};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    gsb__lbfgs_result r;
    CHECK_ERR(gsb__lbfgs_minimize(1, x, nan_everywhere, NULL, NULL, &o, &r), GSB_ENUMERIC,
              "not finite at the starting point");
    problem p = {.n = 1};
    CHECK_ERR(gsb__lbfgs_minimize(0, x, barrier, NULL, &p, &o, &r), GSB_EINVAL,
              "invalid options");
    o.m = 0;
    CHECK_ERR(gsb__lbfgs_minimize(1, x, barrier, NULL, &p, &o, &r), GSB_EINVAL,
              "invalid options");
    gsb__lbfgs_defaults(&o);
    o.pgtol = NAN;
    CHECK_ERR(gsb__lbfgs_minimize(1, x, barrier, NULL, &p, &o, &r), GSB_EINVAL,
              "invalid options");
    CHECK(p.evals == 0);
}

/* m = 1 (one pair) still converges, only slower */
static void test_small_memory(void)
{
    double x[10];
    rosen_x0(x, 10);
    problem p = {.n = 10};
    gsb__lbfgs_opts o;
    gsb__lbfgs_defaults(&o);
    o.m = 1;
    gsb__lbfgs_result r;
    CHECK_OK(gsb__lbfgs_minimize(10, x, rosenbrock, NULL, &p, &o, &r));
    CHECK(r.stop == GSB__LBFGS_PGTOL || r.stop == GSB__LBFGS_FTOL);
    CHECK(r.f < 1e-7);
    for (int i = 0; i < 10; i++)
        CHECK_CLOSE(x[i], 1.0, 1e-3);
}

int main(void)
{
    RUN(test_rosenbrock_2d);
    RUN(test_rosenbrock_10d);
    RUN(test_quadratic);
    RUN(test_max_iter);
    RUN(test_max_eval);
    RUN(test_converged_at_start);
    RUN(test_ftol);
    RUN(test_outside_domain);
    RUN(test_cancel);
    RUN(test_eval_error);
    RUN(test_bad_start_and_options);
    RUN(test_small_memory);
    return testing_done();
}
