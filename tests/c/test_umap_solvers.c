/*
 * test_umap_solvers.c - the pieces of UMAP below the estimator: find_ab_params
 * against scipy's curve_fit (umap-learn's values), smooth_knn_dist, the
 * membership graph and fuzzy union against dense references, the categorical
 * intersection, Lanczos against LAPACK's dense eigh, connected components
 * and the spectral layout, and the CPU umap_sgd_epoch op against a plain
 * reference of backend/umap_sgd.h (and its independence from the thread
 * count).
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/umap_sgd.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "estimators/manifold/umap_embed.h"
#include "solvers/fuzzy_simplicial.h"
#include "solvers/lanczos.h"
#include "solvers/lanczos_seg.h"
#include "solvers/spectral_layout.h"
#include "testing.h"

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        abort();
    return p;
}

/* ---- find_ab_params --------------------------------------------------------- */

/* umap-learn 0.5.12's find_ab_params (scipy's curve_fit) */
static void test_find_ab_matches_curve_fit(void)
{
    static const double ref[][4] = {
        {1.0, 0.1, 1.57694346027, 0.895060877852}, {1.0, 0.0, 1.93280839734, 0.790494973223},
        {1.0, 0.5, 0.583030020341, 1.33416699243}, {2.0, 0.1, 0.544660539942, 0.842055426834},
        {0.5, 0.25, 3.70629020242, 1.33416724685}, {3.0, 1.0, 0.0730786241201, 1.14888943708},
        {1.0, 1.0, 0.114975683274, 1.92923714408}};
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        double a = 0, b = 0;
        CHECK_OK(gsb__umap_find_ab(ref[i][0], ref[i][1], &a, &b));
        CHECK_CLOSE(a, ref[i][2], 1e-5);
        CHECK_CLOSE(b, ref[i][3], 1e-5);
    }
}

/* ---- smooth_knn_dist and memberships ------------------------------------------ */

/* n rows of k ascending distances, column 0 the point itself (0) */
static float *knn_distances(int64_t n, int64_t k)
{
    float *d = xcalloc((size_t)(n * k), sizeof *d);
    for (int64_t i = 0; i < n; i++) {
        float acc = 0.0f;
        for (int64_t j = 1; j < k; j++) {
            acc += (float)(0.05 + testing_uniform());
            d[i * k + j] = acc;
        }
    }
    return d;
}

static void test_smooth_knn_reaches_log2_k(void)
{
    const int64_t n = 50, k = 12;
    testing_seed(11);
    float *d = knn_distances(n, k);
    double sigma[50], rho[50];
    gsb__smooth_knn_dist(d, n, k, log2((double)k), 1.0, sigma, rho);
    for (int64_t i = 0; i < n; i++) {
        CHECK(rho[i] == d[i * k + 1]); /* the nearest non-zero distance */
        double psum = 0.0;
        for (int64_t j = 1; j < k; j++) {
            double t = d[i * k + j] - rho[i];
            psum += t > 0 ? exp(-t / sigma[i]) : 1.0;
        }
        CHECK_CLOSE(psum, log2((double)k), 1e-4);
    }
    /* local_connectivity 1.5: rho halfway between the first two non-zero distances */
    gsb__smooth_knn_dist(d, n, k, log2((double)k), 1.5, sigma, rho);
    for (int64_t i = 0; i < n; i++)
        CHECK_CLOSE(rho[i], 0.5 * (d[i * k + 1] + d[i * k + 2]), 1e-6);
    /* a row of zeros: rho 0 and sigma floored at 1e-3 of the mean distance */
    memset(d, 0, (size_t)k * sizeof *d);
    gsb__smooth_knn_dist(d, n, k, log2((double)k), 1.0, sigma, rho);
    CHECK(rho[0] == 0.0);
    CHECK(sigma[0] > 0.0 && isfinite(sigma[0]));
    free(d);
}

/* dense n x n of a CSR */
static double *dense(const gsb__fcsr *g)
{
    double *m = xcalloc((size_t)(g->rows * g->cols), sizeof *m);
    for (int64_t i = 0; i < g->rows; i++) {
        for (int64_t e = g->indptr[i]; e < g->indptr[i + 1]; e++) {
            CHECK(g->data[e] != 0.0f);
            if (e > g->indptr[i])
                CHECK(g->indices[e] > g->indices[e - 1]); /* sorted, no duplicates */
            m[i * g->cols + g->indices[e]] = g->data[e];
        }
    }
    return m;
}

/* a random kNN graph of n points (self first), its memberships as a CSR */
static void random_memberships(int64_t n, int64_t k, gsb__fcsr *A, int64_t **idx_out,
                               float **d_out)
{
    float *d = knn_distances(n, k);
    int64_t *idx = xcalloc((size_t)(n * k), sizeof *idx);
    for (int64_t i = 0; i < n; i++) {
        idx[i * k] = i;
        for (int64_t j = 1; j < k; j++) { /* distinct other points */
            int64_t c;
            int dup;
            do {
                c = (int64_t)(testing_uniform() * (double)n);
                dup = c == i;
                for (int64_t q = 1; q < j; q++)
                    dup |= idx[i * k + q] == c;
            } while (dup);
            idx[i * k + j] = c;
        }
    }
    double *sigma = xcalloc((size_t)n, sizeof *sigma), *rho = xcalloc((size_t)n, sizeof *rho);
    gsb__smooth_knn_dist(d, n, k, log2((double)k), 1.0, sigma, rho);
    CHECK_OK(gsb__membership_csr(d, idx, n, k, n, sigma, rho, 0, A));
    /* the memberships as umap-learn defines them */
    double *m = dense(A);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 1; j < k; j++) {
            double t = d[i * k + j] - rho[i];
            double want = t <= 0 ? 1.0 : exp(-t / sigma[i]);
            CHECK_CLOSE(m[i * n + idx[i * k + j]], want, 1e-6);
        }
    for (int64_t i = 0; i < n; i++)
        CHECK(m[i * n + i] == 0.0); /* no self edges */
    free(m);
    free(sigma);
    free(rho);
    *idx_out = idx;
    *d_out = d;
}

static void test_fuzzy_union_matches_dense(void)
{
    const int64_t n = 60, k = 6;
    testing_seed(12);
    gsb__fcsr A = {0};
    int64_t *idx;
    float *d;
    random_memberships(n, k, &A, &idx, &d);
    double *a = dense(&A);
    const double mixes[3] = {1.0, 0.0, 0.3};
    for (int t = 0; t < 3; t++) {
        gsb__fcsr U = {0};
        CHECK_OK(gsb__fuzzy_union(&A, mixes[t], &U));
        double *u = dense(&U);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                double x = a[i * n + j], y = a[j * n + i], p = x * y;
                double want = mixes[t] * (x + y - p) + (1 - mixes[t]) * p;
                CHECK_CLOSE(u[i * n + j], want, 1e-6);
                CHECK(u[i * n + j] == u[j * n + i]); /* exactly symmetric */
            }
        free(u);
        gsb__fcsr_free(&U);
    }
    free(a);
    free(idx);
    free(d);
    gsb__fcsr_free(&A);
}

static void test_categorical_intersection(void)
{
    const int64_t n = 40, k = 6;
    testing_seed(13);
    gsb__fcsr A = {0}, G = {0};
    int64_t *idx;
    float *d;
    random_memberships(n, k, &A, &idx, &d);
    CHECK_OK(gsb__fuzzy_union(&A, 1.0, &G));
    double *g = dense(&G), y[40];
    for (int64_t i = 0; i < n; i++)
        y[i] = i % 7 == 0 ? -1.0 : (double)(i % 3);
    CHECK_OK(gsb__fuzzy_categorical(&G, y, 5.0, 1.0));
    /* reference: scale, rows to max 1, fuzzy union */
    double *s = xcalloc((size_t)(n * n), sizeof *s);
    for (int64_t i = 0; i < n; i++) {
        double mx = 0;
        for (int64_t j = 0; j < n; j++) {
            double f = y[i] == -1 || y[j] == -1 ? exp(-1.0) : y[i] != y[j] ? exp(-5.0) : 1.0;
            s[i * n + j] = (float)(g[i * n + j] * f);
            mx = s[i * n + j] > mx ? s[i * n + j] : mx;
        }
        for (int64_t j = 0; mx > 0 && j < n; j++)
            s[i * n + j] /= mx;
    }
    double *r = dense(&G);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double x = s[i * n + j], z = s[j * n + i];
            CHECK_CLOSE(r[i * n + j], x + z - x * z, 1e-5);
        }
    free(g);
    free(s);
    free(r);
    free(idx);
    free(d);
    gsb__fcsr_free(&A);
    gsb__fcsr_free(&G);
}

/* ---- Lanczos ------------------------------------------------------------------------ */

typedef struct dense_op {
    int64_t n;
    const double *m;
} dense_op;

/* y = M x for host vectors (the solver's default backend is the CPU's) */
static void dense_product(const dense_op *o, const double *x, double *y)
{
    for (int64_t i = 0; i < o->n; i++) {
        double s = 0;
        for (int64_t j = 0; j < o->n; j++)
            s += o->m[i * o->n + j] * x[j];
        y[i] = s;
    }
}

static int dense_apply(void *data, const gsb__tensor *x, gsb__tensor *y)
{
    dense_product(data, x->data, y->data);
    return GSB_OK;
}

/* the normalised adjacency of a random sparse graph with a few clusters */
static double *clustered_adjacency(int64_t n, int clusters)
{
    double *w = xcalloc((size_t)(n * n), sizeof *w), *deg = xcalloc((size_t)n, sizeof *deg);
    for (int64_t i = 0; i < n; i++)
        for (int e = 0; e < 6; e++) {
            int64_t j = testing_uniform() < 0.97
                            ? (i / (n / clusters)) * (n / clusters) +
                                  (int64_t)(testing_uniform() * (double)(n / clusters))
                            : (int64_t)(testing_uniform() * (double)n);
            if (j == i || j >= n)
                continue;
            double v = 0.2 + testing_uniform();
            w[i * n + j] = w[j * n + i] = v;
        }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            deg[i] += w[i * n + j];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            if (w[i * n + j] != 0)
                w[i * n + j] /= sqrt(deg[i] * deg[j]);
    free(deg);
    return w;
}

static int stop_second(void *data, int64_t matvecs, double residual)
{
    int *calls = data;
    CHECK(matvecs > 0 && residual >= 0);
    return ++*calls == 2 ? gsb__err(GSB_ECANCELLED, "stopped") : GSB_OK;
}

static void test_lanczos_matches_dense_eigh(void)
{
    const int64_t n = 400, nev = 4;
    testing_seed(14);
    double *m = clustered_adjacency(n, 4);
    dense_op op = {n, m};
    double evals[4], *evecs = xcalloc((size_t)(nev * n), sizeof *evecs);
    gsb__lanczos_opts o = {n, nev, 24, 1e-9, 20000, NULL, NULL, NULL, NULL};
    int conv = 0;
    int64_t mv = 0;
    CHECK_OK(gsb__lanczos_largest(dense_apply, &op, &o, evals, evecs, &conv, &mv));
    CHECK(conv);
    /* reference: LAPACK */
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor M = gsb__tensor_host_view(m, GSB_F64, n, n), w, V;
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, n, 1, &w));
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, n, n, &V));
    CHECK_OK(cpu->ops->eigh(cpu, &M, &w, &V));
    const double *wv = w.data;
    double *y = xcalloc((size_t)n, sizeof *y);
    for (int64_t j = 0; j < nev; j++) {
        CHECK_CLOSE(evals[j], wv[n - 1 - j], 1e-8);
        dense_product(&op, evecs + j * n, y); /* residual and unit norm */
        double r = 0, nn = 0;
        for (int64_t i = 0; i < n; i++) {
            r += (y[i] - evals[j] * evecs[j * n + i]) * (y[i] - evals[j] * evecs[j * n + i]);
            nn += evecs[j * n + i] * evecs[j * n + i];
        }
        CHECK(sqrt(r) <= 1e-8);
        CHECK_CLOSE(nn, 1.0, 1e-10);
    }
    /* a budget too small to converge: converged = 0, pairs still written */
    o.max_matvec = 30;
    o.tol = 1e-14;
    CHECK_OK(gsb__lanczos_largest(dense_apply, &op, &o, evals, evecs, &conv, &mv));
    CHECK(!conv && mv <= 30 + o.ncv);
    CHECK(isfinite(evals[0]) && isfinite(evecs[0]));
    /* the progress callback sees each restart and can stop the solver */
    o.max_matvec = 20000;
    int calls = 0;
    o.progress = stop_second;
    o.progress_data = &calls;
    CHECK_ERR(gsb__lanczos_largest(dense_apply, &op, &o, evals, evecs, &conv, &mv),
              GSB_ECANCELLED, "stopped");
    CHECK(calls == 2);
    o.progress = NULL;
    /* bad options are a caller's bug */
    o.ncv = nev + 1;
    CHECK_ERR(gsb__lanczos_largest(dense_apply, &op, &o, evals, evecs, &conv, &mv),
              GSB_EINTERNAL, "lanczos");
    gsb__tensor_free(&w);
    gsb__tensor_free(&V);
    free(y);
    free(evecs);
    free(m);
}

/* ---- the csr_spmm op (Lanczos's operator products) ----------------------------------- */

/* csr_spmm on the CPU against a dense product in double, float32 and float64, k = 1
 * and 3, a product small enough for one thread and one threaded; indptr outside [0, nnz) is clipped; an index outside [0, n) makes its row NaN */
static void test_csr_spmm_matches_dense(void)
{
    const gsb__backend *cpu = gsb__cpu_backend();
    testing_seed(31);
    for (int64_t m = 37, n = 23; m <= 3001; m += 2964, n += 1977) /* one small, one threaded */
    for (int dt = 0; dt < 2; dt++)
        for (int64_t k = 1; k <= 3; k += 2) {
            gsb_dtype type = dt ? GSB_F64 : GSB_F32;
            gsb__tensor ptr, col, val, X, Y;
            CHECK_OK(gsb__tensor_alloc(cpu, GSB_I64, m + 1, 1, &ptr));
            int64_t *p = ptr.data;
            p[0] = 0;
            for (int64_t i = 0; i < m; i++) /* rows of 0 .. 40 entries, repeats allowed */
                p[i + 1] = p[i] + (int64_t)(testing_uniform() * 41.0);
            const int64_t nnz = p[m];
            CHECK_OK(gsb__tensor_alloc(cpu, GSB_I32, nnz, 1, &col));
            CHECK_OK(gsb__tensor_alloc(cpu, type, nnz, 1, &val));
            CHECK_OK(gsb__tensor_alloc(cpu, type, n, k, &X));
            CHECK_OK(gsb__tensor_alloc(cpu, type, m, k, &Y));
            for (int64_t e = 0; e < nnz; e++) {
                ((int32_t *)col.data)[e] = (int32_t)(testing_uniform() * (double)n);
                gsb__tensor_set(&val, e, testing_normal());
            }
            for (int64_t i = 0; i < n * k; i++)
                gsb__tensor_set(&X, i, testing_normal());
            CHECK_OK(cpu->ops->csr_spmm(cpu, &ptr, &col, &val, &X, &Y));
            double worst = 0;
            for (int64_t i = 0; i < m; i++)
                for (int64_t c = 0; c < k; c++) {
                    double ref = 0, mag = 0;
                    for (int64_t e = p[i]; e < p[i + 1]; e++) {
                        double t = gsb__tensor_get(&val, e) *
                                   gsb__tensor_get(&X, ((int32_t *)col.data)[e] * k + c);
                        ref += t;
                        mag += fabs(t);
                    }
                    double err = fabs(gsb__tensor_get(&Y, i * k + c) - ref) / (mag + 1e-30);
                    worst = err > worst || isnan(err) ? err : worst;
                }
            CHECK(worst <= (dt ? 1e-14 : 1e-6));
            /* a bad index: its row is NaN, the others unchanged; a clipped end */
            int64_t bad_row = 0;
            while (p[bad_row + 1] == p[bad_row])
                bad_row++;
            ((int32_t *)col.data)[p[bad_row]] = (int32_t)n;
            p[m] = nnz + 100;
            CHECK_OK(cpu->ops->csr_spmm(cpu, &ptr, &col, &val, &X, &Y));
            CHECK(isnan(gsb__tensor_get(&Y, bad_row * k)));
            CHECK(isfinite(gsb__tensor_get(&Y, (m - 1) * k)));
            /* shapes are the caller's bug */
            gsb__tensor short_ptr = ptr;
            short_ptr.rows = m;
            CHECK_ERR(cpu->ops->csr_spmm(cpu, &short_ptr, &col, &val, &X, &Y), GSB_EINTERNAL,
                      "indptr");
            gsb__tensor_free(&ptr);
            gsb__tensor_free(&col);
            gsb__tensor_free(&val);
            gsb__tensor_free(&X);
            gsb__tensor_free(&Y);
        }
}

/* ---- Lanczos on several blocks in lockstep (lanczos_seg.c) -------------------------- */

/* a block-diagonal operator of dense blocks */
typedef struct blocks_op {
    int64_t K;
    const int64_t *seg;
    dense_op *block;
} blocks_op;

static int blocks_apply(void *data, const gsb__tensor *x, gsb__tensor *y)
{
    const blocks_op *b = data;
    const double *xv = x->data;
    double *yv = y->data;
    for (int64_t c = 0; c < b->K; c++)
        dense_product(&b->block[c], xv + b->seg[c], yv + b->seg[c]);
    return GSB_OK;
}

/* |<a, b>| for unit vectors of n: 1 when they are the same up to sign */
static double abs_dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return fabs(s);
}

static void test_lanczos_seg_matches_each_alone(void)
{
    enum { K = 3 };
    const int64_t size[K] = {400, 300, 500}, nev = 3, ncv = 27;
    const int clusters[K] = {4, 3, 5};
    testing_seed(23);
    int64_t seg[K + 1] = {0};
    dense_op block[K];
    double *m[K];
    for (int c = 0; c < K; c++) {
        m[c] = clustered_adjacency(size[c], clusters[c]);
        block[c] = (dense_op){size[c], m[c]};
        seg[c + 1] = seg[c] + size[c];
    }
    const int64_t n = seg[K];
    blocks_op bo = {K, seg, block};
    double evals[K * 3], *evecs = xcalloc((size_t)(nev * n), sizeof *evecs);
    int status[K];
    int64_t mv = 0, most = 0;
    gsb__lanczos_seg_opts o = {K, seg, nev, ncv, 1e-9, 20000, NULL, NULL, NULL};
    CHECK_OK(gsb__lanczos_seg_largest(blocks_apply, &bo, &o, evals, evecs, status, &mv));
    for (int c = 0; c < K; c++) {
        /* the same pairs as the block's own run (the same recurrence up to rounding) */
        double ev1[3], *vec1 = xcalloc((size_t)(nev * size[c]), sizeof *vec1);
        gsb__lanczos_opts o1 = {size[c], nev, ncv, 1e-9, 20000, NULL, NULL, NULL, NULL};
        int conv = 0;
        int64_t mv1 = 0;
        CHECK_OK(gsb__lanczos_largest(dense_apply, &block[c], &o1, ev1, vec1, &conv, &mv1));
        CHECK(conv && status[c] == 1);
        most = mv1 > most ? mv1 : most;
        for (int64_t r = 0; r < nev; r++) {
            CHECK_CLOSE(evals[c * nev + r], ev1[r], 1e-8);
            CHECK(abs_dot(evecs + r * n + seg[c], vec1 + r * size[c], size[c]) > 1 - 1e-8);
        }
        free(vec1);
    }
    /* lockstep: as many products as the slowest block alone */
    CHECK(mv == most);
    /* a budget too small: status 0, the best pairs written */
    o.max_matvec = 30;
    o.tol = 1e-14;
    for (int64_t i = 0; i < nev * n; i++)
        evecs[i] = NAN;
    CHECK_OK(gsb__lanczos_seg_largest(blocks_apply, &bo, &o, evals, evecs, status, &mv));
    for (int c = 0; c < K; c++)
        CHECK(status[c] == 0 && isfinite(evals[c * nev]));
    for (int64_t i = 0; i < nev * n; i++)
        CHECK(isfinite(evecs[i]));
    /* the progress callback can stop it */
    o.max_matvec = 20000;
    int calls = 0;
    o.progress = stop_second;
    o.progress_data = &calls;
    CHECK_ERR(gsb__lanczos_seg_largest(blocks_apply, &bo, &o, evals, evecs, status, &mv),
              GSB_ECANCELLED, "stopped");
    CHECK(calls == 2);
    o.progress = NULL;
    /* bad options: a block smaller than the basis */
    o.ncv = 301;
    CHECK_ERR(gsb__lanczos_seg_largest(blocks_apply, &bo, &o, evals, evecs, status, &mv),
              GSB_EINTERNAL, "lanczos_seg");
    for (int c = 0; c < K; c++)
        free(m[c]);
    free(evecs);
}

/* a block of one zero row: its recurrence breaks down at once (status -1),
 * the other block is unaffected */
static void test_lanczos_seg_breakdown(void)
{
    testing_seed(29);
    int64_t seg[3] = {0, 300, 330};
    double *m0 = clustered_adjacency(300, 3), *m1 = xcalloc(900, sizeof(double));
    dense_op block[2] = {{300, m0}, {30, m1}};
    blocks_op bo = {2, seg, block};
    double evals[6], *evecs = xcalloc(3 * 330, sizeof *evecs);
    int status[2];
    gsb__lanczos_seg_opts o = {2, seg, 3, 27, 1e-9, 20000, NULL, NULL, NULL};
    CHECK_OK(gsb__lanczos_seg_largest(blocks_apply, &bo, &o, evals, evecs, status, NULL));
    CHECK(status[0] == 1 && status[1] == -1);
    free(m0);
    free(m1);
    free(evecs);
}

/* ---- components and the spectral layout ---------------------------------------------- */

/* edges of a ring of len vertices from `first` (neighbours at +-1 and +-2),
 * random weights in [0.5, 1.5) so no eigenvalue is exactly repeated */
static void ring(double *w, int64_t n, int64_t first, int64_t len)
{
    for (int64_t v = 0; v < len; v++)
        for (int64_t step = 1; step <= 2; step++) {
            int64_t a = first + v, b = first + (v + step) % len;
            w[a * n + b] = w[b * n + a] = 0.5 + testing_uniform();
        }
}

/* the CSR of a dense symmetric weight matrix */
static void csr_from_dense(const double *w, int64_t n, gsb__fcsr *g)
{
    int64_t nnz = 0;
    for (int64_t i = 0; i < n * n; i++)
        nnz += w[i] != 0;
    g->rows = g->cols = n;
    g->indptr = xcalloc((size_t)(n + 1), sizeof *g->indptr);
    g->indices = xcalloc((size_t)nnz, sizeof *g->indices);
    g->data = xcalloc((size_t)nnz, sizeof *g->data);
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < n; j++)
            if (w[i * n + j] != 0) {
                g->indices[at] = (int32_t)j;
                g->data[at++] = (float)w[i * n + j];
            }
        g->indptr[i + 1] = at;
    }
}

/* How far the columns of emb (rows first..first+len of an n x 2 layout,
 * less the component's centre) are from the span of the normalised
 * adjacency's eigenvectors 2 and 3 of that block: the largest residual of
 * a unit column. */
static double off_spectral_subspace(const double *w, int64_t n, int64_t first, int64_t len,
                                    const double *emb, const double *centre)
{
    double *m = xcalloc((size_t)(len * len), sizeof *m), *deg = xcalloc((size_t)len, sizeof *deg);
    for (int64_t i = 0; i < len; i++)
        for (int64_t j = 0; j < len; j++)
            deg[i] += (float)w[(first + i) * n + first + j];
    for (int64_t i = 0; i < len; i++)
        for (int64_t j = 0; j < len; j++)
            m[i * len + j] = (float)w[(first + i) * n + first + j] / sqrt(deg[i] * deg[j]);
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor M = gsb__tensor_host_view(m, GSB_F64, len, len), ev, V;
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, len, 1, &ev));
    CHECK_OK(gsb__tensor_alloc(cpu, GSB_F64, len, len, &V));
    CHECK_OK(cpu->ops->eigh(cpu, &M, &ev, &V));
    const double *v = V.data;
    double worst = 0;
    for (int d = 0; d < 2; d++) {
        double *x = xcalloc((size_t)len, sizeof *x), nx = 0;
        for (int64_t i = 0; i < len; i++) {
            x[i] = emb[(first + i) * 2 + d] - centre[d];
            nx += x[i] * x[i];
        }
        for (int64_t i = 0; i < len; i++)
            x[i] /= sqrt(nx);
        double proj = 0;
        for (int64_t col = len - 3; col <= len - 2; col++) { /* the 2nd and 3rd largest */
            double c = 0;
            for (int64_t i = 0; i < len; i++)
                c += v[i * len + col] * x[i];
            proj += c * c;
        }
        double res = sqrt(fabs(1.0 - proj));
        worst = res > worst ? res : worst;
        free(x);
    }
    gsb__tensor_free(&ev);
    gsb__tensor_free(&V);
    free(m);
    free(deg);
    return worst;
}

static void test_components_and_layout(void)
{
    /* three rings (700, 300 and 3 vertices): Lanczos, dense eigh, too small (random) */
    const int64_t n = 1003;
    testing_seed(19);
    double *w = xcalloc((size_t)(n * n), sizeof *w);
    ring(w, n, 0, 700);
    ring(w, n, 700, 300);
    ring(w, n, 1000, 3);
    gsb__fcsr G = {0};
    csr_from_dense(w, n, &G);
    int32_t *label = xcalloc((size_t)n, sizeof *label);
    int64_t count = 0;
    CHECK_OK(gsb__connected_components(&G, label, &count));
    CHECK(count == 3);
    CHECK(label[0] == 0 && label[699] == 0 && label[700] == 1 && label[1002] == 2);

    float *X = xcalloc((size_t)n * 2, sizeof *X);
    for (int64_t i = 0; i < n; i++)
        X[i * 2] = (float)label[i];
    gsb__rng rng;
    gsb__rng_seed(&rng, 5);
    gsb__spectral_opts o = {2, X, 2, GSB__KNN_EUCLIDEAN, &rng, NULL, NULL, NULL, 0};
    double *out = xcalloc((size_t)n * 2, sizeof *out);
    int64_t failed = -1;
    CHECK_OK(gsb__spectral_layout(&G, &o, out, &failed));
    CHECK(failed == 0);
    /* 3 components <= 2 dim: centred on e_0, e_1, -e_0, each inside its box (half
     * the distance to the nearest other centre, sqrt(2) / 2) */
    const double centre[3][2] = {{1, 0}, {0, 1}, {-1, 0}};
    for (int64_t i = 0; i < n; i++) {
        double dx = out[i * 2] - centre[label[i]][0], dy = out[i * 2 + 1] - centre[label[i]][1];
        CHECK(fabs(dx) <= sqrt(2.0) / 2 + 1e-9 && fabs(dy) <= sqrt(2.0) / 2 + 1e-9);
    }
    /* the rings' layouts are their Laplacians' eigenvectors 2 and 3 */
    CHECK(off_spectral_subspace(w, n, 0, 700, out, centre[0]) < 1e-3);   /* Lanczos */
    CHECK(off_spectral_subspace(w, n, 700, 300, out, centre[1]) < 1e-6); /* dense */
    /* one component: the same eigenvectors, unshifted */
    gsb__fcsr R = {0};
    csr_from_dense(w, 700, &R); /* the first 700 rows and columns are the big ring */
    double *w700 = xcalloc(700 * 700, sizeof *w700);
    for (int64_t i = 0; i < 700; i++)
        memcpy(w700 + i * 700, w + i * n, 700 * sizeof *w700);
    gsb__fcsr_free(&R);
    csr_from_dense(w700, 700, &R);
    CHECK_OK(gsb__spectral_layout(&R, &o, out, &failed));
    CHECK(failed == 0);
    const double origin[2] = {0, 0};
    CHECK(off_spectral_subspace(w700, 700, 0, 700, out, origin) < 1e-3);
    gsb__fcsr_free(&R);
    gsb__fcsr_free(&G);
    free(w);
    free(w700);
    free(label);
    free(X);
    free(out);
}

/* two weighted lattices, nx0 x ny and nx1 x ny vertices, as two components */
static void two_lattices(int64_t nx0, int64_t nx1, int64_t ny, gsb__fcsr *g)
{
    const int64_t n = (nx0 + nx1) * ny;
    g->rows = g->cols = n;
    g->indptr = xcalloc((size_t)(n + 1), sizeof *g->indptr);
    g->indices = xcalloc((size_t)(4 * n), sizeof *g->indices);
    g->data = xcalloc((size_t)(4 * n), sizeof *g->data);
    float *wr = xcalloc((size_t)n, sizeof *wr), *wu = xcalloc((size_t)n, sizeof *wu);
    for (int64_t v = 0; v < n; v++) {
        wr[v] = (float)(0.5 + testing_uniform()); /* edge v -- v + ny */
        wu[v] = (float)(0.5 + testing_uniform()); /* edge v -- v + 1 */
    }
    int64_t at = 0;
    for (int64_t v = 0; v < n; v++) {
        const int64_t x = v / ny, y = v % ny;
        const int left = x > 0 && x != nx0, right = x + 1 < nx0 + nx1 && x + 1 != nx0;
        const int64_t nb[4] = {left ? v - ny : -1, y > 0 ? v - 1 : -1, y + 1 < ny ? v + 1 : -1,
                               right ? v + ny : -1};
        const float wt[4] = {left ? wr[v - ny] : 0, y > 0 ? wu[v - 1] : 0, wu[v], wr[v]};
        for (int e = 0; e < 4; e++)
            if (nb[e] >= 0) {
                g->indices[at] = (int32_t)nb[e];
                g->data[at++] = wt[e];
            }
        g->indptr[v + 1] = at;
    }
    free(wr);
    free(wu);
}

static int count_calls(void *data, int64_t matvecs, double residual)
{
    (void)matvecs;
    (void)residual;
    ++*(int *)data;
    return GSB_OK;
}

/* The large components solved together (as on a GPU) give the layout each
 * gives alone, in fewer restart cycles. */
static void test_spectral_layout_lockstep(void)
{
    testing_seed(31);
    gsb__fcsr G = {0};
    two_lattices(90, 80, 60, &G); /* 5400 and 4800 vertices: both >= DEVICE_MIN */
    const int64_t n = G.rows;
    float *X = xcalloc((size_t)n, sizeof *X);
    double *alone = xcalloc((size_t)n * 2, sizeof *alone);
    double *together = xcalloc((size_t)n * 2, sizeof *together);
    int calls_alone = 0, calls_together = 0;
    int64_t failed = -1;
    gsb__rng rng;
    gsb__rng_seed(&rng, 5);
    gsb__spectral_opts o = {2, X, 1, GSB__KNN_EUCLIDEAN, &rng, count_calls, &calls_alone,
                            NULL, 0};
    CHECK_OK(gsb__spectral_layout(&G, &o, alone, &failed));
    CHECK(failed == 0);
    gsb__rng_seed(&rng, 5);
    o.progress_data = &calls_together;
    o.lockstep = 1;
    CHECK_OK(gsb__spectral_layout(&G, &o, together, &failed));
    CHECK(failed == 0);
    double worst = 0;
    for (int64_t i = 0; i < n * 2; i++)
        worst = fmax(worst, fabs(alone[i] - together[i]));
    printf("  restart cycles: alone %d, together %d; largest difference %.2e\n", calls_alone,
           calls_together, worst);
    CHECK(worst <= 1e-6);
    CHECK(calls_together < calls_alone);
    free(X);
    free(alone);
    free(together);
    gsb__fcsr_free(&G);
}

/* ---- the SGD op --------------------------------------------------------------------- */

typedef struct sgd_case {
    int64_t n, m, dim, nnz;
    int64_t *indptr;
    int32_t *indices;
    double *eps;
    float *head, *tail; /* tail NULL: a fit */
} sgd_case;

static void sgd_case_free(sgd_case *s)
{
    free(s->indptr);
    free(s->indices);
    free(s->eps);
    free(s->head);
    free(s->tail);
}

/* n heads with up to deg edges each into m tails, epochs per sample in [1, 8] */
static sgd_case make_case(int64_t n, int64_t m, int64_t dim, int64_t deg, int with_tail)
{
    sgd_case s = {n, m, dim, 0, NULL, NULL, NULL, NULL, NULL};
    s.indptr = xcalloc((size_t)(n + 1), sizeof *s.indptr);
    s.indices = xcalloc((size_t)(n * deg), sizeof *s.indices);
    s.eps = xcalloc((size_t)(n * deg), sizeof *s.eps);
    for (int64_t i = 0; i < n; i++) {
        int64_t cnt = 1 + (int64_t)(testing_uniform() * (double)deg);
        for (int64_t e = 0; e < cnt; e++) {
            s.indices[s.nnz] = (int32_t)(testing_uniform() * (double)m);
            s.eps[s.nnz++] = 1.0 + 7.0 * testing_uniform();
        }
        s.indptr[i + 1] = s.nnz;
    }
    s.head = xcalloc((size_t)(n * dim), sizeof *s.head);
    for (int64_t i = 0; i < n * dim; i++)
        s.head[i] = (float)(10.0 * testing_uniform());
    if (with_tail) {
        s.tail = xcalloc((size_t)(m * dim), sizeof *s.tail);
        for (int64_t i = 0; i < m * dim; i++)
            s.tail[i] = (float)(10.0 * testing_uniform());
    }
    return s;
}

/* run `epochs` epochs of the CPU op; ns/nn are the schedules (in and out) */
static int run_op(const sgd_case *s, float *head, double *ns, double *nn, int64_t epochs,
                  const gsb__umap_sgd *p0)
{
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor h = gsb__tensor_host_view(head, GSB_F32, s->n, s->dim);
    gsb__tensor t = gsb__tensor_host_view(s->tail, GSB_F32, s->m, s->dim);
    gsb__tensor ip = gsb__tensor_host_view(s->indptr, GSB_I64, s->n + 1, 1);
    gsb__tensor ix = gsb__tensor_host_view(s->indices, GSB_I32, s->nnz, 1);
    gsb__tensor ep = gsb__tensor_host_view(s->eps, GSB_F64, s->nnz, 1);
    gsb__tensor a = gsb__tensor_host_view(ns, GSB_F64, s->nnz, 1);
    gsb__tensor b = gsb__tensor_host_view(nn, GSB_F64, s->nnz, 1);
    gsb__umap_sgd p = *p0;
    for (int64_t ep_i = 0; ep_i < epochs; ep_i++) {
        p.epoch = p0->epoch + ep_i;
        int rc = cpu->ops->umap_sgd_epoch(cpu, &h, s->tail ? &t : NULL, &ip, &ix, &ep, &a, &b, &p);
        if (rc != GSB_OK)
            return rc;
    }
    return GSB_OK;
}

static double clip4(double v) { return v > 4 ? 4 : v < -4 ? -4 : v; }

/* One epoch as backend/umap_sgd.h specifies it, in double, written out plainly. */
static void reference_epoch(const sgd_case *s, float *head, double *ns, double *nn,
                            const gsb__umap_sgd *p)
{
    const int64_t n = s->n, dim = s->dim;
    const float *tail = s->tail ? s->tail : head;
    const int64_t m = s->tail ? s->m : n;
    double *move = xcalloc((size_t)(n * dim), sizeof *move);
    for (int64_t i = 0; i < n; i++)
        for (int64_t e = s->indptr[i]; e < s->indptr[i + 1]; e++) {
            if (!(ns[e] <= (double)p->epoch))
                continue;
            const float *y = head + i * dim, *t = tail + (int64_t)s->indices[e] * dim;
            double d2 = 0;
            for (int64_t d = 0; d < dim; d++)
                d2 += ((double)y[d] - t[d]) * ((double)y[d] - t[d]);
            if (d2 > 0) {
                double c = -2 * p->a * p->b * pow(d2, p->b - 1) / (1 + p->a * pow(d2, p->b));
                for (int64_t d = 0; d < dim; d++)
                    move[i * dim + d] +=
                        p->attraction_scale * p->alpha * clip4(c * ((double)y[d] - t[d]));
            }
            ns[e] += s->eps[e];
            double eneg = s->eps[e] / p->negative_sample_rate;
            int64_t k = (int64_t)(((double)p->epoch - nn[e]) / eneg);
            uint64_t key = gsb__umap_edge_key(p->seed, e);
            for (int64_t q = 0; q < k; q++) {
                const float *u = tail + gsb__umap_negative(key, p->epoch, q, m) * dim;
                double u2 = 0;
                for (int64_t d = 0; d < dim; d++)
                    u2 += ((double)y[d] - u[d]) * ((double)y[d] - u[d]);
                if (!(u2 > 0))
                    continue;
                double c = 2 * p->gamma * p->b / ((0.001 + u2) * (1 + p->a * pow(u2, p->b)));
                for (int64_t d = 0; d < dim; d++)
                    move[i * dim + d] += p->alpha * clip4(c * ((double)y[d] - u[d]));
            }
            if (k > 0)
                nn[e] += (double)k * eneg;
        }
    for (int64_t i = 0; i < n * dim; i++)
        head[i] = (float)(head[i] + move[i]);
    free(move);
}

static void schedules(const sgd_case *s, double rate, double **ns, double **nn)
{
    *ns = xcalloc((size_t)s->nnz, sizeof **ns);
    *nn = xcalloc((size_t)s->nnz, sizeof **nn);
    for (int64_t e = 0; e < s->nnz; e++) {
        (*ns)[e] = s->eps[e];
        (*nn)[e] = s->eps[e] / rate;
    }
}

static void compare_with_reference(int64_t dim, int with_tail, double scale)
{
    sgd_case s = make_case(300, with_tail ? 200 : 300, dim, 12, with_tail);
    gsb__umap_sgd p = {0, 1.577, 0.895, 1.0, 0.7, 5.0, scale, 1234, 0, 0};
    double *ns, *nn, *rs, *rn;
    schedules(&s, p.negative_sample_rate, &ns, &nn);
    schedules(&s, p.negative_sample_rate, &rs, &rn);
    float *head = xcalloc((size_t)(s.n * dim), sizeof *head);
    float *ref = xcalloc((size_t)(s.n * dim), sizeof *ref);
    memcpy(head, s.head, (size_t)(s.n * dim) * sizeof *head);
    memcpy(ref, s.head, (size_t)(s.n * dim) * sizeof *ref);
    double worst = 0;
    for (int64_t epoch = 0; epoch < 12; epoch++) {
        p.epoch = epoch;
        CHECK_OK(run_op(&s, head, ns, nn, 1, &p));
        reference_epoch(&s, ref, rs, rn, &p);
        for (int64_t e = 0; e < s.nnz; e++)
            CHECK(ns[e] == rs[e] && nn[e] == rn[e]); /* the same edges and samples */
        for (int64_t i = 0; i < s.n * dim; i++) {
            double err = fabs((double)head[i] - ref[i]) / (1.0 + fabs(ref[i]));
            worst = err > worst ? err : worst;
        }
        memcpy(head, ref, (size_t)(s.n * dim) * sizeof *head); /* no drift between epochs */
    }
    CHECK(worst < 1e-5);
    /* something moved: an op that did nothing would fail above, but check anyway */
    double moved = 0;
    for (int64_t i = 0; i < s.n * dim; i++)
        moved += fabs((double)ref[i] - s.head[i]);
    CHECK(moved > 1.0);
    free(ns), free(nn), free(rs), free(rn), free(head), free(ref);
    sgd_case_free(&s);
}

static void test_sgd_op_matches_reference(void)
{
    testing_seed(15);
    compare_with_reference(2, 0, 2.0); /* fit: tail = head */
    compare_with_reference(3, 1, 1.0); /* transform: a fixed tail */
    compare_with_reference(1, 0, 2.0);
}

/* enough edges for the parallel path: the same bits with 1 and 3 threads */
static void test_sgd_op_thread_independent(void)
{
    testing_seed(16);
    sgd_case s = make_case(20000, 20000, 2, 16, 0);
    CHECK(s.nnz > ((int64_t)1 << 17));
    gsb__umap_sgd p = {0, 1.577, 0.895, 1.0, 1.0, 5.0, 2.0, 99, 0, 0};
    float *h1 = xcalloc((size_t)(s.n * 2), sizeof *h1), *h3 = xcalloc((size_t)(s.n * 2), sizeof *h3);
    memcpy(h1, s.head, (size_t)(s.n * 2) * sizeof *h1);
    memcpy(h3, s.head, (size_t)(s.n * 2) * sizeof *h3);
    double *ns1, *nn1, *ns3, *nn3;
    schedules(&s, 5.0, &ns1, &nn1);
    schedules(&s, 5.0, &ns3, &nn3);
    int before = omp_get_max_threads();
    omp_set_num_threads(1);
    CHECK_OK(run_op(&s, h1, ns1, nn1, 6, &p));
    omp_set_num_threads(3);
    CHECK_OK(run_op(&s, h3, ns3, nn3, 6, &p));
    omp_set_num_threads(before);
    CHECK(memcmp(h1, h3, (size_t)(s.n * 2) * sizeof *h1) == 0);
    CHECK(memcmp(nn1, nn3, (size_t)s.nnz * sizeof *nn1) == 0);
    free(h1), free(h3), free(ns1), free(nn1), free(ns3), free(nn3);
    sgd_case_free(&s);
}

static void test_sgd_op_bad_arguments(void)
{
    testing_seed(17);
    sgd_case s = make_case(20, 20, 2, 4, 0);
    gsb__umap_sgd p = {0, 1.577, 0.895, 1.0, 1.0, 5.0, 2.0, 1, 0, 0};
    double *ns, *nn;
    schedules(&s, 5.0, &ns, &nn);
    s.indices[3] = 20; /* outside the tail */
    CHECK_ERR(run_op(&s, s.head, ns, nn, 1, &p), GSB_EINTERNAL, "points at row 20");
    s.indices[3] = 0;
    s.indptr[5] = s.indptr[4] - 1; /* every row has an edge: indptr[4] >= 4 */
    CHECK_ERR(run_op(&s, s.head, ns, nn, 1, &p), GSB_EINTERNAL, "indptr decreases");
    free(ns), free(nn);
    sgd_case_free(&s);
}

/* n_neg = 0 with negative_sample_rate 0: attraction only, nothing drawn */
static void test_sgd_op_no_negatives(void)
{
    testing_seed(18);
    sgd_case s = make_case(50, 50, 2, 5, 0);
    gsb__umap_sgd p = {0, 1.577, 0.895, 1.0, 0.5, 0.0, 2.0, 1, 0, 0};
    double *ns, *nn;
    schedules(&s, 1.0, &ns, &nn);
    for (int64_t e = 0; e < s.nnz; e++)
        nn[e] = INFINITY;
    float *ref = xcalloc((size_t)(s.n * 2), sizeof *ref);
    memcpy(ref, s.head, (size_t)(s.n * 2) * sizeof *ref);
    CHECK_OK(run_op(&s, s.head, ns, nn, 3, &p));
    for (int64_t e = 0; e < s.nnz; e++)
        CHECK(isinf(nn[e]));
    double moved = 0;
    for (int64_t i = 0; i < s.n * 2; i++)
        moved += fabs((double)s.head[i] - ref[i]);
    CHECK(moved > 0 && isfinite(moved));
    free(ns), free(nn), free(ref);
    sgd_case_free(&s);
}

int main(void)
{
    RUN(test_find_ab_matches_curve_fit);
    RUN(test_smooth_knn_reaches_log2_k);
    RUN(test_fuzzy_union_matches_dense);
    RUN(test_categorical_intersection);
    RUN(test_lanczos_matches_dense_eigh);
    RUN(test_lanczos_seg_matches_each_alone);
    RUN(test_lanczos_seg_breakdown);
    RUN(test_csr_spmm_matches_dense);
    RUN(test_components_and_layout);
    RUN(test_spectral_layout_lockstep);
    RUN(test_sgd_op_matches_reference);
    RUN(test_sgd_op_thread_independent);
    RUN(test_sgd_op_bad_arguments);
    RUN(test_sgd_op_no_negatives);
    return testing_done();
}
