/*
 * test_cpu_tsne.c - the CPU backend's t-SNE ops and their helpers:
 * tsne_repulse_exact and tsne_attract against naive double loops (several
 * dimensions, dof 1 and 2), Barnes-Hut against exact (angle 0: equal; 0.5:
 * close; duplicates skipped), the FFT repulsion against exact (1-D and 2-D,
 * wide and tiny spreads, a few points far apart, one point), tsne_update against scikit-learn's
 * steps, results independent of the thread count, the radix-2 FFT against
 * a naive DFT, the kNN graph against brute force (features and
 * precomputed, with and without self), the symmetrisation against dense
 * sums, and the perplexity search (each row's entropy is log(perplexity)).
 * Outputs start as NaN so an unwritten element fails.
 */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_fft.h"
#include "estimators/manifold/tsne.h"
#include "solvers/knn_graph.h"
#include "test_op_helpers.h"

static const gsb__backend *be;

/* ---- references (double) --------------------------------------------------- */

static double ref_w(double d2, int dof)
{
    return pow((double)dof / ((double)dof + d2), ((double)dof + 1.0) / 2.0);
}

static double sqdist(const gsb__tensor *Y, int64_t i, int64_t j)
{
    double s = 0.0;
    for (int64_t a = 0; a < Y->cols; a++) {
        double t = gsb__tensor_get(Y, i * Y->cols + a) - gsb__tensor_get(Y, j * Y->cols + a);
        s += t * t;
    }
    return s;
}

/* R[i] = sum_j w^2 (y_i - y_j), Z = sum_{i != j} w; skip_close: pairs within
 * 1e-6 per coordinate are left out (Barnes-Hut's duplicates) */
static double ref_repulse(const gsb__tensor *Y, int dof, int skip_close, double *R)
{
    int64_t n = Y->rows, d = Y->cols;
    double z = 0.0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t a = 0; a < d; a++)
            R[i * d + a] = 0.0;
        for (int64_t j = 0; j < n; j++) {
            if (j == i)
                continue;
            int close = 1;
            for (int64_t a = 0; a < d; a++)
                close &= fabs(gsb__tensor_get(Y, i * d + a) - gsb__tensor_get(Y, j * d + a)) <=
                         1e-6;
            if (skip_close && close)
                continue;
            double w = ref_w(sqdist(Y, i, j), dof);
            z += w;
            for (int64_t a = 0; a < d; a++)
                R[i * d + a] += w * w *
                                (gsb__tensor_get(Y, i * d + a) - gsb__tensor_get(Y, j * d + a));
        }
    }
    return z;
}

/* Y: n x d float32, N(0, scale^2) around cluster centres (clusters > 0) */
static gsb__tensor make_embedding(int64_t n, int64_t d, double scale, int clusters)
{
    gsb__tensor Y = testing_tensor(be, GSB_F32, n, d, NULL);
    for (int64_t i = 0; i < n; i++)
        for (int64_t a = 0; a < d; a++) {
            double centre = clusters ? 4.0 * scale * (double)((i % clusters) - clusters / 2) : 0;
            gsb__tensor_set(&Y, i * d + a, centre + scale * testing_normal());
        }
    return Y;
}

static double max_rel(const gsb__tensor *got, const double *ref)
{
    int64_t m = got->rows * got->cols;
    double *g = malloc((size_t)m * sizeof *g);
    for (int64_t e = 0; e < m; e++)
        g[e] = gsb__tensor_get(got, e);
    double r = testing_relerr(g, ref, m);
    free(g);
    return r;
}

typedef int (*repulse_fn)(const gsb__tensor *Y, int dof, gsb__tensor *R, gsb__tensor *z);

static int run_exact(const gsb__tensor *Y, int dof, gsb__tensor *R, gsb__tensor *z)
{
    return be->ops->tsne_repulse_exact(be, Y, dof, R, z);
}

static double bh_angle;
static int run_bh(const gsb__tensor *Y, int dof, gsb__tensor *R, gsb__tensor *z)
{
    return be->ops->tsne_repulse_bh(be, Y, dof, bh_angle, R, z);
}

static int run_fft(const gsb__tensor *Y, int dof, gsb__tensor *R, gsb__tensor *z)
{
    (void)dof;
    return be->ops->tsne_repulse_fft(be, Y, 3, 50, R, z);
}

/* relative errors of a repulsion op against the reference */
static void repulse_errors(repulse_fn fn, const gsb__tensor *Y, int dof, int skip_close,
                           double *err_r, double *err_z)
{
    int64_t n = Y->rows, d = Y->cols;
    gsb__tensor R = testing_tensor(be, GSB_F32, n, d, NULL);
    gsb__tensor z = testing_tensor(be, GSB_F64, 1, 1, NULL);
    double *ref = malloc((size_t)(n * d) * sizeof *ref);
    double zr = ref_repulse(Y, dof, skip_close, ref);
    CHECK_OK(fn(Y, dof, &R, &z));
    *err_r = max_rel(&R, ref);
    double zg = gsb__tensor_get(&z, 0);
    *err_z = isnan(zg) ? INFINITY : fabs(zg - zr) / fabs(zr);
    free(ref);
    gsb__tensor_free(&R);
    gsb__tensor_free(&z);
}

/* ---- repulsion --------------------------------------------------------------- */

static void test_exact_vs_reference(void)
{
    static const int64_t dims[] = {1, 2, 3, 5};
    for (int k = 0; k < 4; k++)
        for (int dof = 1; dof <= 2; dof++) {
            gsb__tensor Y = make_embedding(57, dims[k], 3.0, 0);
            double er, ez;
            repulse_errors(run_exact, &Y, dof, 0, &er, &ez);
            CHECK(er < 1e-6);
            CHECK(ez < 1e-12);
            gsb__tensor_free(&Y);
        }
}

static void test_bh_angle0_is_exact(void)
{
    bh_angle = 0.0;
    for (int64_t d = 1; d <= 3; d++)
        for (int dof = 1; dof <= 2; dof++) {
            gsb__tensor Y = make_embedding(300, d, 5.0, 3);
            double er, ez;
            repulse_errors(run_bh, &Y, dof, 1, &er, &ez);
            CHECK(er < 1e-6);
            CHECK(ez < 1e-12);
            gsb__tensor_free(&Y);
        }
}

static void test_bh_accuracy(void)
{
    bh_angle = 0.5;
    for (int64_t d = 2; d <= 3; d++) {
        gsb__tensor Y = make_embedding(1200, d, 5.0, 4);
        double er, ez;
        repulse_errors(run_bh, &Y, 1, 1, &er, &ez);
        CHECK(er < 5e-2);
        CHECK(ez < 1e-2);
        gsb__tensor_free(&Y);
    }
}

/* Barnes-Hut skips duplicates of a point (scikit-learn's behaviour): three
 * copies of one point among others, angle 0 */
static void test_bh_duplicates(void)
{
    bh_angle = 0.0;
    gsb__tensor Y = make_embedding(40, 2, 2.0, 0);
    for (int64_t c = 1; c <= 2; c++)
        for (int64_t a = 0; a < 2; a++)
            gsb__tensor_set(&Y, (7 * c) * 2 + a, gsb__tensor_get(&Y, a));
    double er, ez;
    repulse_errors(run_bh, &Y, 1, 1, &er, &ez);
    CHECK(er < 1e-6);
    CHECK(ez < 1e-12);
    gsb__tensor_free(&Y);
}

static void test_fft_vs_exact(void)
{
    for (int64_t d = 1; d <= 2; d++) {
        /* a spread like a converged embedding's (boxes of width ~1, FIt-SNE's
         * default grid), a small one, and early optimisation's tiny one.
         * FIt-SNE's error with 3 nodes a box falls like the box width cubed;
         * at width 1 the largest is a few % of max |R| (rms ~1-3%), Barnes-Hut
         * at angle 0.5 errs as much. */
        static const double spreads[] = {4.0, 0.5, 1e-3};
        for (int s = 0; s < 3; s++) {
            gsb__tensor Y = make_embedding(800, d, spreads[s], 3);
            double er, ez;
            repulse_errors(run_fft, &Y, 1, 0, &er, &ez);
            CHECK(er < 8e-2);
            CHECK(ez < 4e-4); /* 8.5e-5 at most; 1.4e-3 with FIt-SNE's Z less n */
            gsb__tensor_free(&Y);
        }
    }
}

/* A few points far apart (boxes about 1 wide, most of them empty): the forces
 * are 1e-6 of the potentials they are the difference of, and Z is a few
 * hundredths, less than the interpolation's error on a point's own w (up to
 * 0.25): Z less each point's own interpolated share (gsb__tsne_grid_self). */
static void test_fft_sparse(void)
{
    for (int64_t d = 1; d <= 2; d++) {
        gsb__tensor Y = make_embedding(7, d, 20.0, 3);
        double er, ez;
        repulse_errors(run_fft, &Y, 1, 0, &er, &ez);
        CHECK(er < 1e-2);
        CHECK(ez < 1e-3);
        gsb__tensor_free(&Y);
    }
}

static void test_fft_one_point(void)
{
    gsb__tensor Y = make_embedding(1, 2, 1.0, 0);
    gsb__tensor R = testing_tensor(be, GSB_F32, 1, 2, NULL);
    gsb__tensor z = testing_tensor(be, GSB_F64, 1, 1, NULL);
    CHECK_OK(run_fft(&Y, 1, &R, &z));
    CHECK(fabs(gsb__tensor_get(&R, 0)) < 1e-6 && fabs(gsb__tensor_get(&R, 1)) < 1e-6);
    CHECK(fabs(gsb__tensor_get(&z, 0)) < 1e-12); /* its own w, interpolated, less itself */
    gsb__tensor_set(&Y, 0, NAN);
    CHECK_ERR(run_fft(&Y, 1, &R, &z), GSB_EINTERNAL, "no grid");
    gsb__tensor_free(&Y);
    gsb__tensor_free(&R);
    gsb__tensor_free(&z);
}

/* ---- attraction ----------------------------------------------------------- */

typedef struct csr_t {
    gsb__tensor ip, ix, val;
} csr_t;

static csr_t make_csr(int64_t n, int64_t max_per_row)
{
    csr_t m;
    m.ip = testing_tensor(be, GSB_I64, n + 1, 1, NULL);
    int64_t *ip = m.ip.data, nnz = 0;
    ip[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        nnz += (int64_t)(testing_uniform() * (double)(max_per_row + 1));
        ip[i + 1] = nnz;
    }
    m.ix = testing_tensor(be, GSB_I32, nnz > 0 ? nnz : 1, 1, NULL);
    m.val = testing_tensor(be, GSB_F32, nnz > 0 ? nnz : 1, 1, NULL);
    for (int64_t e = 0; e < nnz; e++) {
        ((int32_t *)m.ix.data)[e] = (int32_t)(testing_uniform() * (double)n);
        ((float *)m.val.data)[e] = (float)(testing_uniform() * 1e-3);
    }
    return m;
}

static void free_csr(csr_t *m)
{
    gsb__tensor_free(&m->ip);
    gsb__tensor_free(&m->ix);
    gsb__tensor_free(&m->val);
}

static void test_attract_vs_reference(void)
{
    for (int64_t d = 1; d <= 4; d++)
        for (int dof = 1; dof <= 2; dof++) {
            int64_t n = 80;
            gsb__tensor Y = make_embedding(n, d, 2.0, 0);
            csr_t P = make_csr(n, 12);
            gsb__tensor A = testing_tensor(be, GSB_F32, n, d, NULL);
            double zv = 1234.5, scale = 12.0, floor = FLT_MIN;
            gsb__tensor z = testing_tensor(be, GSB_F64, 1, 1, &zv);
            double kl = NAN, *ref = calloc((size_t)(n * d), sizeof *ref), klr = 0.0;
            const int64_t *ip = P.ip.data;
            for (int64_t i = 0; i < n; i++)
                for (int64_t k = ip[i]; k < ip[i + 1]; k++) {
                    int64_t j = ((int32_t *)P.ix.data)[k];
                    double p = scale * ((float *)P.val.data)[k], w = ref_w(sqdist(&Y, i, j), dof);
                    for (int64_t a = 0; a < d; a++)
                        ref[i * d + a] += p * w * (gsb__tensor_get(&Y, i * d + a) -
                                                   gsb__tensor_get(&Y, j * d + a));
                    klr += p * log(fmax(p, floor) / fmax(w / zv, floor));
                }
            CHECK_OK(be->ops->tsne_attract(be, &Y, &P.ip, &P.ix, &P.val, scale, dof, &z, floor,
                                           &A, &kl));
            CHECK(max_rel(&A, ref) < 1e-6);
            CHECK_CLOSE(kl, klr, 1e-9);
            /* without kl the forces are the same */
            gsb__tensor A2 = testing_tensor(be, GSB_F32, n, d, NULL);
            CHECK_OK(be->ops->tsne_attract(be, &Y, &P.ip, &P.ix, &P.val, scale, dof, NULL, floor,
                                           &A2, NULL));
            CHECK(memcmp(A.data, A2.data, (size_t)(n * d) * sizeof(float)) == 0);
            free(ref);
            free_csr(&P);
            gsb__tensor_free(&Y);
            gsb__tensor_free(&A);
            gsb__tensor_free(&A2);
            gsb__tensor_free(&z);
        }
}

static void test_attract_bad_indices(void)
{
    gsb__tensor Y = make_embedding(10, 2, 1.0, 0), A = testing_tensor(be, GSB_F32, 10, 2, NULL);
    csr_t P = make_csr(10, 3);
    if (((int64_t *)P.ip.data)[10] > 0)
        ((int32_t *)P.ix.data)[0] = 10;
    else
        ((int64_t *)P.ip.data)[10] = -1;
    CHECK_ERR(be->ops->tsne_attract(be, &Y, &P.ip, &P.ix, &P.val, 1.0, 1, NULL, 0.0, &A, NULL),
              GSB_EINTERNAL, "tsne_attract");
    free_csr(&P);
    gsb__tensor_free(&Y);
    gsb__tensor_free(&A);
}

/* ---- update ----------------------------------------------------------------- */

static void test_update_vs_sklearn_steps(void)
{
    int64_t n = 50, d = 2, m = n * d;
    gsb__tensor Y = make_embedding(n, d, 1.0, 0), A = make_embedding(n, d, 1e-3, 0);
    gsb__tensor R = make_embedding(n, d, 0.3, 0), U = make_embedding(n, d, 1e-2, 0);
    gsb__tensor G = testing_tensor(be, GSB_F32, n, d, NULL);
    for (int64_t e = 0; e < m; e++)
        gsb__tensor_set(&G, e, e % 7 == 0 ? 0.011 : 0.5 + testing_uniform());
    double zv = 250.0;
    gsb__tensor z = testing_tensor(be, GSB_F64, 1, 1, &zv);
    float *y0 = malloc((size_t)m * sizeof *y0), *u0 = malloc((size_t)m * sizeof *u0),
          *g0 = malloc((size_t)m * sizeof *g0);
    memcpy(y0, Y.data, (size_t)m * sizeof *y0);
    memcpy(u0, U.data, (size_t)m * sizeof *u0);
    memcpy(g0, G.data, (size_t)m * sizeof *g0);
    double norm = NAN, ref_norm = 0.0, c = 4.0, mom = 0.5, lr = 200.0;
    CHECK_OK(be->ops->tsne_update(be, &Y, &A, &R, &z, c, mom, lr, 0.01, &U, &G, &norm));
    int bad = 0;
    for (int64_t e = 0; e < m; e++) {
        float grad = (float)(c * (((float *)A.data)[e] - ((float *)R.data)[e] / zv));
        float gain = u0[e] * grad < 0.0f ? g0[e] + 0.2f : g0[e] * 0.8f;
        gain = gain < 0.01f ? 0.01f : gain;
        grad *= gain;
        float u = 0.5f * u0[e] - 200.0f * grad;
        ref_norm += (double)grad * grad;
        bad += ((float *)G.data)[e] != gain || ((float *)U.data)[e] != u ||
               ((float *)Y.data)[e] != y0[e] + u;
    }
    CHECK(bad == 0);
    CHECK_CLOSE(norm, sqrt(ref_norm), 1e-12);
    free(y0);
    free(u0);
    free(g0);
    gsb__tensor_free(&Y);
    gsb__tensor_free(&A);
    gsb__tensor_free(&R);
    gsb__tensor_free(&U);
    gsb__tensor_free(&G);
    gsb__tensor_free(&z);
}

/* ---- thread-count independence ------------------------------------------------ */

static void run_all(const gsb__tensor *Y, const csr_t *P, float *out, double *zs)
{
    int64_t n = Y->rows, d = Y->cols;
    gsb__tensor R = testing_tensor(be, GSB_F32, n, d, NULL);
    gsb__tensor z = testing_tensor(be, GSB_F64, 1, 1, NULL);
    bh_angle = 0.5;
    repulse_fn fns[3] = {run_exact, run_bh, run_fft};
    for (int f = 0; f < 3; f++) {
        CHECK_OK(fns[f](Y, 1, &R, &z));
        memcpy(out + f * n * d, R.data, (size_t)(n * d) * sizeof(float));
        zs[f] = gsb__tensor_get(&z, 0);
    }
    CHECK_OK(be->ops->tsne_attract(be, Y, &P->ip, &P->ix, &P->val, 1.0, 1, &z, FLT_MIN, &R,
                                   &zs[3]));
    memcpy(out + 3 * n * d, R.data, (size_t)(n * d) * sizeof(float));
    gsb__tensor_free(&R);
    gsb__tensor_free(&z);
}

static void test_thread_count_independent(void)
{
    int64_t n = 3000, d = 2; /* above every op's parallel threshold */
    gsb__tensor Y = make_embedding(n, d, 10.0, 5);
    csr_t P = make_csr(n, 400);
    float *a = malloc((size_t)(4 * n * d) * sizeof *a);
    float *b = malloc((size_t)(4 * n * d) * sizeof *b);
    double za[4], zb[4];
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    run_all(&Y, &P, a, za);
    omp_set_num_threads(3);
    run_all(&Y, &P, b, zb);
    omp_set_num_threads(saved);
    CHECK(memcmp(a, b, (size_t)(4 * n * d) * sizeof *a) == 0);
    CHECK(memcmp(za, zb, sizeof za) == 0);
    free(a);
    free(b);
    free_csr(&P);
    gsb__tensor_free(&Y);
}

/* ---- FFT ------------------------------------------------------------------------- */

static void naive_dft(const double *x, int64_t n, int inverse, double *out)
{
    for (int64_t k = 0; k < n; k++) {
        double re = 0.0, im = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double t = (inverse ? 2.0 : -2.0) * M_PI * (double)(j * k % n) / (double)n;
            re += x[2 * j] * cos(t) - x[2 * j + 1] * sin(t);
            im += x[2 * j] * sin(t) + x[2 * j + 1] * cos(t);
        }
        out[2 * k] = re;
        out[2 * k + 1] = im;
    }
}

static void test_fft_vs_dft(void)
{
    static const int64_t sizes[] = {1, 2, 3, 4, 5, 8, 12, 30, 64, 90, 256, 300, 750};
    for (int s = 0; s < 13; s++)
        for (int inverse = 0; inverse <= 1; inverse++) {
            int64_t n = sizes[s];
            double *x = malloc((size_t)(2 * n) * sizeof *x);
            double *ref = malloc((size_t)(2 * n) * sizeof *ref);
            testing_fill_normal(x, 2 * n);
            naive_dft(x, n, inverse, ref);
            gsb__cpu_fft f;
            double *scratch = malloc((size_t)(2 * n) * sizeof *scratch);
            CHECK_OK(gsb__cpu_fft_init(&f, n));
            gsb__cpu_fft_1d(&f, x, inverse, scratch);
            CHECK(testing_relerr(x, ref, 2 * n) < 1e-13);
            gsb__cpu_fft_free(&f);
            free(scratch);
            free(x);
            free(ref);
        }
    gsb__cpu_fft f;
    CHECK_ERR(gsb__cpu_fft_init(&f, 14), GSB_EINTERNAL, "prime factor above 5");
}

/* 2-D: rows then columns of the naive DFT, with live_rows pruning */
static void test_fft_2d(void)
{
    int64_t n = 30, live = 7;
    double *x = calloc((size_t)(2 * n * n), sizeof *x);
    double *ref = malloc((size_t)(2 * n * n) * sizeof *ref);
    double *row = malloc((size_t)(2 * n) * sizeof *row);
    double *tmp = malloc((size_t)(2 * n) * sizeof *tmp);
    testing_fill_normal(x, 2 * live * n); /* rows >= live are zero */
    memcpy(ref, x, (size_t)(2 * n * n) * sizeof *ref);
    for (int64_t r = 0; r < n; r++) {
        naive_dft(ref + 2 * r * n, n, 0, tmp);
        memcpy(ref + 2 * r * n, tmp, (size_t)(2 * n) * sizeof *tmp);
    }
    for (int64_t c = 0; c < n; c++) {
        for (int64_t r = 0; r < n; r++) {
            row[2 * r] = ref[2 * (r * n + c)];
            row[2 * r + 1] = ref[2 * (r * n + c) + 1];
        }
        naive_dft(row, n, 0, tmp);
        for (int64_t r = 0; r < n; r++) {
            ref[2 * (r * n + c)] = tmp[2 * r];
            ref[2 * (r * n + c) + 1] = tmp[2 * r + 1];
        }
    }
    double *orig = malloc((size_t)(2 * n * n) * sizeof *orig);
    memcpy(orig, x, (size_t)(2 * n * n) * sizeof *orig);
    gsb__cpu_fft f;
    CHECK_OK(gsb__cpu_fft_init(&f, n));
    CHECK_OK(gsb__cpu_fft_2d(&f, x, 0, live));
    CHECK(testing_relerr(x, ref, 2 * n * n) < 1e-13);
    /* the inverse brings back the live rows, times n^2 */
    CHECK_OK(gsb__cpu_fft_2d(&f, x, 1, live));
    for (int64_t e = 0; e < 2 * live * n; e++)
        x[e] /= (double)(n * n);
    CHECK(testing_relerr(x, orig, 2 * live * n) < 1e-13);
    gsb__cpu_fft_free(&f);
    free(x);
    free(ref);
    free(row);
    free(tmp);
    free(orig);
}

/* ---- kNN graph and symmetrisation ------------------------------------------------ */

/* brute-force neighbour lists of row i by (distance, index) */
static void brute_row(const double *D, int64_t n, int64_t i, int64_t k, int self, int64_t *idx)
{
    char *used = calloc((size_t)n, 1);
    for (int64_t t = 0; t < k; t++) {
        int64_t best = -1;
        for (int64_t j = 0; j < n; j++) {
            if (used[j] || (!self && j == i))
                continue;
            if (best < 0 || D[i * n + j] < D[i * n + best])
                best = j;
        }
        used[best] = 1;
        idx[t] = best;
    }
    free(used);
}

static void test_knn_graph(void)
{
    int64_t n = 90, d = 4, k = 7;
    gsb__tensor X = testing_tensor_normal(be, GSB_F64, n, d, 1.0, 0.0);
    for (int64_t a = 0; a < d; a++) /* an exact duplicate pair: rows 3 and 11 */
        gsb__tensor_set(&X, 11 * d + a, gsb__tensor_get(&X, 3 * d + a));
    double *D = malloc((size_t)(n * n) * sizeof *D);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t a = 0; a < d; a++) {
                double t = gsb__tensor_get(&X, i * d + a) - gsb__tensor_get(&X, j * d + a);
                s += t * t;
            }
            D[i * n + j] = s;
        }
    gsb__tensor Dt = testing_tensor(be, GSB_F64, n, n, D);
    int64_t *want = malloc((size_t)k * sizeof *want);
    for (int self = 0; self <= 1; self++)
        for (int pre = 0; pre <= 1; pre++) {
            gsb__knn_opts o = {k, GSB__METRIC_SQEUCLIDEAN, pre, self};
            gsb__knn_graph g;
            CHECK_OK(gsb__knn_graph_build(NULL, be, pre ? &Dt : &X, &o, &g));
            int bad = 0;
            for (int64_t i = 0; i < n; i++) {
                brute_row(D, n, i, k, self, want);
                for (int64_t t = 0; t < k; t++) {
                    /* the duplicate pair may swap with the row itself (both at 0) */
                    int64_t got = g.idx[i * k + t];
                    int same = got == want[t] || D[i * n + got] == D[i * n + want[t]];
                    bad += !same || fabs(g.dist[i * k + t] - D[i * n + want[t]]) > 1e-9;
                    bad += !self && got == i;
                }
            }
            CHECK(bad == 0);
            gsb__knn_graph_free(&g);
        }
    free(want);
    free(D);
    gsb__tensor_free(&X);
    gsb__tensor_free(&Dt);
}

static void test_symmetrize(void)
{
    int64_t n = 30, k = 5;
    gsb__knn_graph g = {n, k, malloc((size_t)(n * k) * sizeof(double)),
                        malloc((size_t)(n * k) * sizeof(int64_t))};
    double *w = malloc((size_t)(n * k) * sizeof *w);
    double *dense = calloc((size_t)(n * n), sizeof *dense);
    for (int64_t i = 0; i < n; i++)
        for (int64_t t = 0; t < k; t++) { /* distinct neighbours, in no order */
            g.idx[i * k + t] = (i + 1 + 3 * t + (t * i) % 2) % n;
            g.dist[i * k + t] = 0.0;
            w[i * k + t] = testing_uniform();
            dense[i * n + g.idx[i * k + t]] = w[i * k + t];
        }
    for (int op = 0; op <= 1; op++) {
        gsb__csr S;
        CHECK_OK(gsb__knn_symmetrize(&g, w, (gsb__sym_op)op, &S));
        int bad = 0;
        int64_t count = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                double a = dense[i * n + j], b = dense[j * n + i];
                if (a == 0.0 && b == 0.0)
                    continue;
                double want = op ? a + b - a * b : a + b, got = NAN;
                for (int64_t e = S.indptr[i]; e < S.indptr[i + 1]; e++)
                    if (S.indices[e] == j)
                        got = S.data[e];
                bad += !(fabs(got - want) < 1e-15);
                count++;
            }
        for (int64_t i = 0; i < n; i++)
            for (int64_t e = S.indptr[i] + 1; e < S.indptr[i + 1]; e++)
                bad += S.indices[e] <= S.indices[e - 1];
        CHECK(bad == 0);
        CHECK(S.nnz == count);
        gsb__csr_free(&S);
    }
    free(w);
    free(dense);
    gsb__knn_graph_free(&g);
}

/* each row's conditional distribution has entropy log(perplexity); P is
 * symmetric and sums to 1 */
static void test_joint_p(void)
{
    int64_t n = 120, d = 3;
    double perp = 10.0;
    int64_t k = (int64_t)(3 * perp + 1);
    gsb__tensor X = testing_tensor_normal(be, GSB_F64, n, d, 2.0, 0.0);
    gsb__knn_opts o = {k, GSB__METRIC_SQEUCLIDEAN, 0, 0};
    gsb__knn_graph g;
    CHECK_OK(gsb__knn_graph_build(NULL, be, &X, &o, &g));
    gsb__csr P;
    double sigma = NAN;
    CHECK_OK(gsb__tsne_joint_p(&g, perp, 0, &P, &sigma));
    CHECK(sigma > 0.0 && isfinite(sigma));
    double total = 0.0;
    int asym = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t e = P.indptr[i]; e < P.indptr[i + 1]; e++) {
            total += P.data[e];
            int64_t j = P.indices[e];
            double back = NAN;
            for (int64_t f = P.indptr[j]; f < P.indptr[j + 1]; f++)
                if (P.indices[f] == i)
                    back = P.data[f];
            asym += !(back == P.data[e]);
        }
    CHECK_CLOSE(total, 1.0, 1e-12);
    CHECK(asym == 0);
    /* the expected P from each row's beta found by a long bisection of its own */
    double *cond = calloc((size_t)(n * n), sizeof *cond), csum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double lo = 1e-10, hi = 1e10, beta = 1.0, s = 0.0;
        for (int it = 0; it < 200; it++) {
            beta = sqrt(lo * hi);
            double sd = 0;
            s = 0;
            for (int64_t t = 0; t < k; t++) {
                double dd = (float)g.dist[i * k + t], e = exp(-dd * beta);
                s += e;
                sd += dd * e;
            }
            if (log(s) + beta * sd / s > log(perp))
                lo = beta;
            else
                hi = beta;
        }
        for (int64_t t = 0; t < k; t++)
            cond[i * n + g.idx[i * k + t]] = exp(-(float)g.dist[i * k + t] * beta) / s;
    }
    for (int64_t e = 0; e < n * n; e++)
        csum += cond[e];
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t e = P.indptr[i]; e < P.indptr[i + 1]; e++) {
            int64_t j = P.indices[e];
            double want = (cond[i * n + j] + cond[j * n + i]) / (2.0 * csum / 2.0) / 2.0;
            bad += !(fabs(P.data[e] - want) <= 1e-3 * want + 1e-12);
        }
    CHECK(bad == 0);
    free(cond);
    gsb__csr_free(&P);
    gsb__knn_graph_free(&g);
    gsb__tensor_free(&X);
}

int main(void)
{
    be = gsb__cpu_backend();
    testing_seed(42);
    RUN(test_exact_vs_reference);
    RUN(test_bh_angle0_is_exact);
    RUN(test_bh_accuracy);
    RUN(test_bh_duplicates);
    RUN(test_fft_vs_exact);
    RUN(test_fft_sparse);
    RUN(test_fft_one_point);
    RUN(test_attract_vs_reference);
    RUN(test_attract_bad_indices);
    RUN(test_update_vs_sklearn_steps);
    RUN(test_thread_count_independent);
    RUN(test_fft_vs_dft);
    RUN(test_fft_2d);
    RUN(test_knn_graph);
    RUN(test_symmetrize);
    RUN(test_joint_p);
    return testing_done();
}
