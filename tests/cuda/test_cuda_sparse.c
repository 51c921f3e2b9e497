/*
 * test_cuda_sparse.c - the CUDA backend's csr_spmm (cuda_sparse.cu) against
 * its CPU twin (cpu_sparse.c), and what runs on it: the Lanczos solver with
 * its basis on the GPU (solvers/lanczos.c) and UMAP's spectral layout of a
 * component large enough to go to the GPU (solvers/spectral_layout.c).
 *
 * csr_spmm: random CSR matrices (rows of 0 to 80 entries, so a warp walks
 * some rows more than once; repeated columns), k = 1 and 3, float32 and
 * float64, outputs poisoned with NaN: the GPU within 1e-10 (float64) / 1e-4
 * (float32) of the CPU relative to the largest output; an out-of-range
 * index makes its row NaN on both, a row end past nnz is clipped.
 * Lanczos: the 4 largest eigenpairs of a 3000-vertex clustered normalised
 * adjacency to 1e-9: the GPU's eigenvalues within 1e-8 of the CPU's, its
 * vectors within 1e-4 of the CPU's span and their residuals checked on the
 * host.  Spectral layout of a 90 x 60 lattice with random weights (5400
 * vertices): each GPU column a unit eigenvector of the normalised adjacency
 * to the solver's tolerance, and in the span of the CPU's layout.  Two
 * lattices (5400 and 5120 vertices) as two components: the GPU solves them
 * together (lanczos_seg.c on seg_dots, seg_combine, seg_normalize), the CPU
 * each alone; each component's GPU columns (less its centre) unit
 * eigenvectors of its own normalised adjacency and in the span of the CPU's.
 * Needs a GPU: run under tools/gpu-check (ctest -L gpu).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_testing.h"
#include "solvers/lanczos.h"
#include "solvers/spectral_layout.h"

/* calloc or abort */
static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        abort();
    return p;
}

/* ---- csr_spmm ----------------------------------------------------------------------- */

typedef struct csr {
    int64_t m, n, nnz;
    gsb__tensor ptr, col, val; /* host */
} csr;

static void csr_free(csr *a)
{
    gsb__tensor_free(&a->ptr);
    gsb__tensor_free(&a->col);
    gsb__tensor_free(&a->val);
}

static csr random_csr(int64_t m, int64_t n, int64_t max_row, gsb_dtype dt)
{
    csr a = {m, n, 0, GSB__TENSOR_NONE, GSB__TENSOR_NONE, GSB__TENSOR_NONE};
    if (gsb__tensor_alloc(cpu, GSB_I64, m + 1, 1, &a.ptr) != GSB_OK)
        abort();
    int64_t *p = a.ptr.data;
    p[0] = 0;
    for (int64_t i = 0; i < m; i++)
        p[i + 1] = p[i] + (int64_t)(testing_uniform() * (double)(max_row + 1));
    a.nnz = p[m];
    a.col = host_random(GSB_I32, a.nnz, 1, (double)n);
    a.val = host_random(dt, a.nnz, 1, 1.0);
    return a;
}

static void spmm_case(int64_t m, int64_t n, int64_t k, gsb_dtype dt)
{
    csr a = random_csr(m, n, 80, dt);
    gsb__tensor X = host_random(dt, n, k, 1.0), Y = host_poisoned(dt, m, k);
    gsb__tensor gp = to_gpu(&a.ptr), gc = to_gpu(&a.col), gv = to_gpu(&a.val);
    gsb__tensor gX = to_gpu(&X), gY = gpu_poisoned(dt, m, k);
    CHECK_OK(cpu->ops->csr_spmm(cpu, &a.ptr, &a.col, &a.val, &X, &Y));
    CHECK_OK(gpu->ops->csr_spmm(gpu, &gp, &gc, &gv, &gX, &gY));
    CHECK_MATCH(&gY, &Y, dt == GSB_F32 ? 1e-4 : 1e-10);

    /* an index outside [0, n) in the first non-empty row, a last row end past nnz */
    int64_t *p = a.ptr.data, bad = 0;
    while (p[bad + 1] == p[bad])
        bad++;
    ((int32_t *)a.col.data)[p[bad]] = (int32_t)n;
    p[m] = a.nnz + 1000;
    gsb__tensor_free(&gp);
    gsb__tensor_free(&gc);
    gp = to_gpu(&a.ptr);
    gc = to_gpu(&a.col);
    CHECK_OK(cpu->ops->csr_spmm(cpu, &a.ptr, &a.col, &a.val, &X, &Y));
    CHECK_OK(gpu->ops->csr_spmm(gpu, &gp, &gc, &gv, &gX, &gY));
    gsb__tensor h = from_gpu(&gY);
    for (int64_t c = 0; c < k; c++) {
        CHECK(isnan(gsb__tensor_get(&Y, bad * k + c)) && isnan(gsb__tensor_get(&h, bad * k + c)));
        gsb__tensor_set(&Y, bad * k + c, 0.0);
        gsb__tensor_set(&h, bad * k + c, 0.0);
    }
    gsb__tensor hg = to_gpu(&h);
    CHECK_MATCH(&hg, &Y, dt == GSB_F32 ? 1e-4 : 1e-10);
    gsb__tensor_free(&hg);
    gsb__tensor_free(&h);
    gsb__tensor_free(&gp);
    gsb__tensor_free(&gc);
    gsb__tensor_free(&gv);
    gsb__tensor_free(&gX);
    gsb__tensor_free(&gY);
    gsb__tensor_free(&X);
    gsb__tensor_free(&Y);
    csr_free(&a);
}

static void test_spmm_matches_cpu(void)
{
    testing_seed(41);
    for (int dt = 0; dt < 2; dt++)
        for (int64_t k = 1; k <= 3; k += 2)
            spmm_case(20011, 15013, k, dt ? GSB_F64 : GSB_F32);
}

static void test_spmm_bad_arguments(void)
{
    testing_seed(43);
    csr a = random_csr(100, 50, 5, GSB_F64);
    gsb__tensor gp = to_gpu(&a.ptr), gc = to_gpu(&a.col), gv = to_gpu(&a.val);
    gsb__tensor gX = gpu_poisoned(GSB_F64, 50, 1), gY = gpu_poisoned(GSB_F64, 100, 1);
    gsb__tensor gX32 = gpu_poisoned(GSB_F32, 50, 1);
    gsb__tensor short_ptr = gsb__tensor_rows(&gp, 0, 100);
    CHECK_ERR(gpu->ops->csr_spmm(gpu, &short_ptr, &gc, &gv, &gX, &gY), GSB_EINTERNAL, "indptr");
    CHECK_ERR(gpu->ops->csr_spmm(gpu, &gp, &gc, &gv, &gX32, &gY), GSB_EINTERNAL, "Y");
    CHECK_ERR(gpu->ops->csr_spmm(gpu, &gp, &gc, &a.val, &gX, &gY), GSB_EINTERNAL, "val");
    /* the GPU still works */
    CHECK_OK(gpu->ops->csr_spmm(gpu, &gp, &gc, &gv, &gX, &gY));
    gsb__tensor_free(&gp);
    gsb__tensor_free(&gc);
    gsb__tensor_free(&gv);
    gsb__tensor_free(&gX);
    gsb__tensor_free(&gY);
    gsb__tensor_free(&gX32);
    csr_free(&a);
}

/* ---- Lanczos on the GPU ------------------------------------------------------------- */

/* A CSR of doubles on one backend: Lanczos's operator */
typedef struct op_csr {
    const gsb__backend *be;
    gsb__tensor ptr, col, val;
} op_csr;

static int op_apply(void *data, const gsb__tensor *x, gsb__tensor *y)
{
    const op_csr *o = data;
    return o->be->ops->csr_spmm(o->be, &o->ptr, &o->col, &o->val, x, y);
}

/* y = A x on the host, A a host CSR of doubles */
static void host_apply(const csr *a, const double *x, double *y)
{
    const int64_t *p = a->ptr.data;
    const int32_t *c = a->col.data;
    const double *v = a->val.data;
    for (int64_t i = 0; i < a->m; i++) {
        double s = 0;
        for (int64_t e = p[i]; e < p[i + 1]; e++)
            s += v[e] * x[c[e]];
        y[i] = s;
    }
}

/* D^-1/2 W D^-1/2 of a symmetric graph, in double as spectral_layout.c builds it */
static csr normalised(const gsb__fcsr *g)
{
    const int64_t n = g->rows, nnz = g->indptr[n];
    csr a = {n, n, nnz, GSB__TENSOR_NONE, GSB__TENSOR_NONE, GSB__TENSOR_NONE};
    double *deg = xcalloc((size_t)n, sizeof *deg);
    for (int64_t i = 0; i < n; i++)
        for (int64_t e = g->indptr[i]; e < g->indptr[i + 1]; e++)
            deg[i] += g->data[e];
    if (gsb__tensor_alloc(cpu, GSB_I64, n + 1, 1, &a.ptr) != GSB_OK ||
        gsb__tensor_alloc(cpu, GSB_I32, nnz, 1, &a.col) != GSB_OK ||
        gsb__tensor_alloc(cpu, GSB_F64, nnz, 1, &a.val) != GSB_OK)
        abort();
    memcpy(a.ptr.data, g->indptr, (size_t)(n + 1) * sizeof(int64_t));
    memcpy(a.col.data, g->indices, (size_t)nnz * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++)
        for (int64_t e = g->indptr[i]; e < g->indptr[i + 1]; e++)
            ((double *)a.val.data)[e] = g->data[e] / sqrt(deg[i] * deg[g->indices[e]]);
    free(deg);
    return a;
}

/* the CSR of a dense symmetric weight matrix */
static void fcsr_from_dense(const double *w, int64_t n, gsb__fcsr *g)
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

/* a random graph of 4 clusters (few edges between them) */
static double *clustered_weights(int64_t n)
{
    double *w = xcalloc((size_t)(n * n), sizeof *w);
    const int64_t size = n / 4;
    for (int64_t i = 0; i < n; i++)
        for (int e = 0; e < 6; e++) {
            int64_t j = testing_uniform() < 0.97
                            ? (i / size) * size + (int64_t)(testing_uniform() * (double)size)
                            : (int64_t)(testing_uniform() * (double)n);
            if (j != i && j < n)
                w[i * n + j] = w[j * n + i] = 0.2 + testing_uniform();
        }
    return w;
}

static void run_lanczos(const gsb__backend *be, const csr *a, int64_t nev, double *evals,
                        double *evecs, int64_t *mv)
{
    op_csr o = {be, GSB__TENSOR_NONE, GSB__TENSOR_NONE, GSB__TENSOR_NONE};
    CHECK_OK(gsb__tensor_to(be, &a->ptr, &o.ptr));
    CHECK_OK(gsb__tensor_to(be, &a->col, &o.col));
    CHECK_OK(gsb__tensor_to(be, &a->val, &o.val));
    gsb__lanczos_opts opts = {a->m, nev, 24, 1e-9, 20000, NULL, NULL, NULL, be};
    int conv = 0;
    CHECK_OK(gsb__lanczos_largest(op_apply, &o, &opts, evals, evecs, &conv, mv));
    CHECK(conv);
    gsb__tensor_free(&o.ptr);
    gsb__tensor_free(&o.col);
    gsb__tensor_free(&o.val);
}

/* the norm of the part of unit x outside the span of the orthonormal rows of B (k x n) */
static double off_span(const double *x, const double *B, int64_t k, int64_t n)
{
    double proj = 0;
    for (int64_t r = 0; r < k; r++) {
        double c = 0;
        for (int64_t i = 0; i < n; i++)
            c += B[r * n + i] * x[i];
        proj += c * c;
    }
    return sqrt(fabs(1.0 - proj));
}

static void test_lanczos_on_gpu(void)
{
    const int64_t n = 3000, nev = 4;
    testing_seed(47);
    double *w = clustered_weights(n);
    gsb__fcsr g = {0};
    fcsr_from_dense(w, n, &g);
    csr a = normalised(&g);
    double ev_c[4], ev_g[4];
    double *vc = xcalloc((size_t)(nev * n), sizeof *vc), *vg = xcalloc((size_t)(nev * n), sizeof *vg);
    double *y = xcalloc((size_t)n, sizeof *y);
    int64_t mv_c = 0, mv_g = 0;
    run_lanczos(cpu, &a, nev, ev_c, vc, &mv_c);
    run_lanczos(gpu, &a, nev, ev_g, vg, &mv_g);
    printf("  matvecs: cpu %lld, gpu %lld\n", (long long)mv_c, (long long)mv_g);
    for (int64_t j = 0; j < nev; j++) {
        CHECK_CLOSE(ev_g[j], ev_c[j], 1e-8);
        CHECK(off_span(vg + j * n, vc, nev, n) <= 1e-4);
        host_apply(&a, vg + j * n, y);
        double r = 0, nn = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = y[i] - ev_g[j] * vg[j * n + i];
            r += d * d;
            nn += vg[j * n + i] * vg[j * n + i];
        }
        CHECK(sqrt(r) <= 1e-8);
        CHECK_CLOSE(nn, 1.0, 1e-10);
    }
    free(y);
    free(vc);
    free(vg);
    free(w);
    csr_free(&a);
    gsb__fcsr_free(&g);
}

/* ---- the spectral layout of a large component --------------------------------------- */

/* an nx x ny lattice, edge weights in [0.5, 1.5) (float32, as UMAP's graphs),
 * each vertex's edges by ascending neighbour */
static void lattice(int64_t nx, int64_t ny, gsb__fcsr *g)
{
    const int64_t n = nx * ny;
    float *right = xcalloc((size_t)n, sizeof *right), *up = xcalloc((size_t)n, sizeof *up);
    for (int64_t v = 0; v < n; v++) {
        right[v] = (float)(0.5 + testing_uniform()); /* edge v -- v + ny */
        up[v] = (float)(0.5 + testing_uniform());    /* edge v -- v + 1 */
    }
    g->rows = g->cols = n;
    g->indptr = xcalloc((size_t)(n + 1), sizeof *g->indptr);
    g->indices = xcalloc((size_t)(4 * n), sizeof *g->indices);
    g->data = xcalloc((size_t)(4 * n), sizeof *g->data);
    int64_t at = 0;
    for (int64_t v = 0; v < n; v++) {
        int64_t x = v / ny, yy = v % ny;
        const int64_t nb[4] = {x > 0 ? v - ny : -1, yy > 0 ? v - 1 : -1,
                               yy + 1 < ny ? v + 1 : -1, x + 1 < nx ? v + ny : -1};
        const float wt[4] = {x > 0 ? right[v - ny] : 0, yy > 0 ? up[v - 1] : 0, up[v], right[v]};
        for (int e = 0; e < 4; e++)
            if (nb[e] >= 0) {
                g->indices[at] = (int32_t)nb[e];
                g->data[at++] = wt[e];
            }
        g->indptr[v + 1] = at;
    }
    free(right);
    free(up);
}

static void test_spectral_layout_on_gpu(void)
{
    const int64_t nx = 90, ny = 60, n = nx * ny, dim = 2;
    testing_seed(53);
    gsb__fcsr g = {0};
    lattice(nx, ny, &g);
    csr a = normalised(&g);
    float *X = xcalloc((size_t)n, sizeof *X);
    double *out_c = xcalloc((size_t)(n * dim), sizeof *out_c);
    double *out_g = xcalloc((size_t)(n * dim), sizeof *out_g);
    gsb__rng rng;
    gsb__rng_seed(&rng, 3);
    gsb__spectral_opts o = {dim, X, 1, GSB__KNN_EUCLIDEAN, &rng, NULL, NULL, NULL, 0};
    int64_t failed = -1;
    CHECK_OK(gsb__spectral_layout(&g, &o, out_c, &failed));
    CHECK(failed == 0);
    o.be = gpu;
    CHECK_OK(gsb__spectral_layout(&g, &o, out_g, &failed));
    CHECK(failed == 0);
    /* the CPU's columns, orthonormal rows of B; each GPU column an eigenvector in their span */
    double *B = xcalloc((size_t)(dim * n), sizeof *B), *x = xcalloc((size_t)n, sizeof *x);
    double *y = xcalloc((size_t)n, sizeof *y);
    for (int64_t d = 0; d < dim; d++)
        for (int64_t i = 0; i < n; i++)
            B[d * n + i] = out_c[i * dim + d];
    for (int64_t d = 0; d < dim; d++) {
        double nn = 0, theta = 0, r = 0;
        for (int64_t i = 0; i < n; i++) {
            x[i] = out_g[i * dim + d];
            nn += x[i] * x[i];
        }
        CHECK_CLOSE(nn, 1.0, 1e-8);
        host_apply(&a, x, y);
        for (int64_t i = 0; i < n; i++)
            theta += x[i] * y[i];
        for (int64_t i = 0; i < n; i++)
            r += (y[i] - theta * x[i]) * (y[i] - theta * x[i]);
        printf("  column %lld: eigenvalue %.9f, residual %.2e, off the CPU's span %.2e\n",
               (long long)d, theta, sqrt(r), off_span(x, B, dim, n));
        CHECK(sqrt(r) <= 1e-5);
        CHECK(theta < 1.0 - 1e-6); /* not the trivial eigenvector */
        CHECK(off_span(x, B, dim, n) <= 1e-2);
    }
    free(B);
    free(x);
    free(y);
    free(X);
    free(out_c);
    free(out_g);
    csr_free(&a);
    gsb__fcsr_free(&g);
}

/* g: the lattices a (na vertices) and b side by side (b's indices shifted) */
static void two_components(const gsb__fcsr *a, const gsb__fcsr *b, gsb__fcsr *g)
{
    const int64_t na = a->rows, n = na + b->rows, ea = a->indptr[na];
    const int64_t nnz = ea + b->indptr[b->rows];
    g->rows = g->cols = n;
    g->indptr = xcalloc((size_t)(n + 1), sizeof *g->indptr);
    g->indices = xcalloc((size_t)nnz, sizeof *g->indices);
    g->data = xcalloc((size_t)nnz, sizeof *g->data);
    memcpy(g->indptr, a->indptr, (size_t)(na + 1) * sizeof *g->indptr);
    memcpy(g->indices, a->indices, (size_t)ea * sizeof *g->indices);
    memcpy(g->data, a->data, (size_t)ea * sizeof *g->data);
    for (int64_t i = 1; i <= b->rows; i++)
        g->indptr[na + i] = ea + b->indptr[i];
    for (int64_t e = 0; e < b->indptr[b->rows]; e++) {
        g->indices[ea + e] = (int32_t)(b->indices[e] + na);
        g->data[ea + e] = b->data[e];
    }
}

/* Component rows [first, first + len) of the layouts (less centre): each GPU
 * column a unit eigenvector of a (the component's normalised adjacency) and
 * in the span of the CPU's columns. */
static void check_component(const csr *a, const double *out_c, const double *out_g,
                            int64_t first, const double *centre)
{
    const int64_t n = a->m, dim = 2;
    double *B = xcalloc((size_t)(dim * n), sizeof *B), *x = xcalloc((size_t)n, sizeof *x);
    double *y = xcalloc((size_t)n, sizeof *y);
    for (int64_t d = 0; d < dim; d++) { /* the CPU's columns, orthonormalised */
        double *b = B + d * n, nn = 0;
        for (int64_t i = 0; i < n; i++)
            b[i] = out_c[(first + i) * dim + d] - centre[d];
        for (int64_t p = 0; p < d; p++) {
            double c = 0;
            for (int64_t i = 0; i < n; i++)
                c += B[p * n + i] * b[i];
            for (int64_t i = 0; i < n; i++)
                b[i] -= c * B[p * n + i];
        }
        for (int64_t i = 0; i < n; i++)
            nn += b[i] * b[i];
        for (int64_t i = 0; i < n; i++)
            b[i] /= sqrt(nn);
    }
    for (int64_t d = 0; d < dim; d++) {
        double nn = 0, theta = 0, r = 0;
        for (int64_t i = 0; i < n; i++) {
            x[i] = out_g[(first + i) * dim + d] - centre[d];
            nn += x[i] * x[i];
        }
        for (int64_t i = 0; i < n; i++)
            x[i] /= sqrt(nn);
        host_apply(a, x, y);
        for (int64_t i = 0; i < n; i++)
            theta += x[i] * y[i];
        for (int64_t i = 0; i < n; i++)
            r += (y[i] - theta * x[i]) * (y[i] - theta * x[i]);
        printf("  component at %lld, column %lld: eigenvalue %.9f, residual %.2e, off the "
               "CPU's span %.2e\n", (long long)first, (long long)d, theta, sqrt(r),
               off_span(x, B, dim, n));
        CHECK(sqrt(r) <= 1e-5);
        CHECK(theta < 1.0 - 1e-6);
        CHECK(off_span(x, B, dim, n) <= 1e-2);
    }
    free(B);
    free(x);
    free(y);
}

static void test_spectral_layout_lockstep_on_gpu(void)
{
    const int64_t dim = 2;
    testing_seed(59);
    gsb__fcsr la = {0}, lb = {0}, g = {0};
    lattice(90, 60, &la);
    lattice(80, 64, &lb);
    two_components(&la, &lb, &g);
    const int64_t n = g.rows;
    csr a = normalised(&la), b = normalised(&lb);
    float *X = xcalloc((size_t)n, sizeof *X);
    double *out_c = xcalloc((size_t)(n * dim), sizeof *out_c);
    double *out_g = xcalloc((size_t)(n * dim), sizeof *out_g);
    gsb__rng rng;
    gsb__rng_seed(&rng, 3);
    gsb__spectral_opts o = {dim, X, 1, GSB__KNN_EUCLIDEAN, &rng, NULL, NULL, NULL, 0};
    int64_t failed = -1;
    CHECK_OK(gsb__spectral_layout(&g, &o, out_c, &failed)); /* each alone, on the CPU */
    CHECK(failed == 0);
    o.be = gpu;
    CHECK_OK(gsb__spectral_layout(&g, &o, out_g, &failed)); /* together */
    CHECK(failed == 0);
    /* two components <= 2 dim: centred on e_0 and -e_0 */
    const double ca[2] = {1, 0}, cb[2] = {-1, 0};
    check_component(&a, out_c, out_g, 0, ca);
    check_component(&b, out_c, out_g, la.rows, cb);
    free(X);
    free(out_c);
    free(out_g);
    csr_free(&a);
    csr_free(&b);
    gsb__fcsr_free(&la);
    gsb__fcsr_free(&lb);
    gsb__fcsr_free(&g);
}

int main(void)
{
    if (!cuda_testing_init())
        return 1;
    RUN(test_spmm_matches_cpu);
    RUN(test_spmm_bad_arguments);
    RUN(test_lanczos_on_gpu);
    RUN(test_spectral_layout_on_gpu);
    RUN(test_spectral_layout_lockstep_on_gpu);
    return testing_done();
}
