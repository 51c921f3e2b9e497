/*
 * spectral_layout.c - UMAP's spectral initialisation (see spectral_layout.h).
 *
 * Per connected component: the normalised adjacency M = D^-1/2 W D^-1/2 of
 * its subgraph (as a CSR of doubles), whose largest eigenvectors are the
 * Laplacian's smallest; the first (sqrt(degree), eigenvalue 1) is dropped
 * and the next dim are the layout, unscaled, as umap-learn's.  Components
 * up to DENSE_MAX vertices take LAPACK's dense eigh, larger ones Lanczos
 * (lanczos.c) with a basis of k + 24 vectors (umap-learn's eigsh takes
 * max(2k + 1, sqrt(n)); with thick restarts more vectors cost more
 * orthogonalisation than they save in operator applications: on a 20000-point
 * swiss roll, 27 vectors need 700 applications and 0.5 s, 141 vectors 555
 * and 1.8 s), capped so the basis stays under LANCZOS_BASIS_BYTES.
 * Lanczos runs on the caller's backend (the GPU's: operator products by its
 * csr_spmm op, the basis in its memory) for components of DEVICE_MIN
 * vertices or more, else on the CPU.  On a GPU all such components are
 * solved together (lanczos_seg.c: one product over their block-diagonal
 * graph per step, every component's recurrence in lockstep, on the seg_*
 * ops: no cuBLAS, the fit's only user of it, whose first calls are the
 * likely cause of the first solve's 75 ms against 9-14 ms for the same
 * work later): MNIST's 8 components of 8750 vertices took 8 solves one
 * after the other.
 * lanczos.c on the GPU remains for a component whose lockstep run broke
 * down.
 */
#include "solvers/spectral_layout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "solvers/lanczos.h"
#include "solvers/lanczos_seg.h"

#define DENSE_MAX 512
#define LANCZOS_BASIS_BYTES ((int64_t)1 << 30)
/* ||M x - theta x|| at which an eigenpair is taken (M has norm 1) */
#define LANCZOS_TOL 1e-6
/* operator applications before giving up (each is one pass over the edges):
 * well run graphs need a few hundred */
#define LANCZOS_BUDGET 5000
/* vertices from which a component's Lanczos runs on the caller's backend (a
 * GPU: one step costs ~0.1 ms of launches and a download there, and a CPU
 * step on a graph this size takes about as long) */
#define DEVICE_MIN 4096
/* edges from which the normalised adjacency is built on several threads */
#define PAR_MIN_EDGES 100000

/* ---- connected components ------------------------------------------------ */

int gsb__connected_components(const gsb__fcsr *G, int32_t *label, int64_t *count)
{
    const int64_t n = G->rows;
    int32_t *queue = gsb__alloc_array(n, sizeof *queue);
    if (!queue)
        return gsb__err(GSB_ENOMEM, "out of memory for the components of %lld vertices",
                        (long long)n);
    for (int64_t i = 0; i < n; i++)
        label[i] = -1;
    int32_t next = 0;
    for (int64_t s = 0; s < n; s++) {
        if (label[s] >= 0)
            continue;
        int64_t head = 0, tail = 0;
        label[s] = next;
        queue[tail++] = (int32_t)s;
        while (head < tail) {
            int32_t v = queue[head++];
            for (int64_t e = G->indptr[v]; e < G->indptr[v + 1]; e++) {
                int32_t u = G->indices[e];
                if (label[u] < 0) {
                    label[u] = next;
                    queue[tail++] = u;
                }
            }
        }
        next++;
    }
    free(queue);
    *count = next;
    return GSB_OK;
}

/* ---- one component ---------------------------------------------------------- */

/* The normalised adjacency of a component's subgraph, local indices. */
typedef struct norm_adj {
    int64_t n;
    int64_t *ptr;
    int32_t *col;
    double *val;
} norm_adj;

static void norm_adj_free(norm_adj *a)
{
    free(a->ptr);
    free(a->col);
    free(a->val);
}

/* verts: the component's vertices (ascending), local: global -> local index */
static int build_norm_adj(const gsb__fcsr *G, const int32_t *verts, int64_t nc,
                          const int32_t *local, norm_adj *a)
{
    memset(a, 0, sizeof *a);
    a->n = nc;
    a->ptr = gsb__alloc_array(nc + 1, sizeof *a->ptr);
    double *deg = gsb__alloc_array(nc, sizeof *deg);
    int64_t nnz = 0;
    for (int64_t r = 0; r < nc; r++)
        nnz += G->indptr[verts[r] + 1] - G->indptr[verts[r]];
    a->col = gsb__alloc_array(nnz, sizeof *a->col);
    a->val = gsb__alloc_array(nnz, sizeof *a->val);
    if (!a->ptr || !deg || !a->col || !a->val) {
        free(deg);
        norm_adj_free(a);
        return gsb__err(GSB_ENOMEM, "out of memory for a graph of %lld edges",
                        (long long)nnz);
    }
    a->ptr[0] = 0;
    for (int64_t r = 0; r < nc; r++)
        a->ptr[r + 1] = a->ptr[r] + G->indptr[verts[r] + 1] - G->indptr[verts[r]];
    /* rows in parallel (each its own range; the same sums in any thread count) */
#pragma omp parallel for schedule(static) if (nnz > PAR_MIN_EDGES)
    for (int64_t r = 0; r < nc; r++) {
        int64_t at = a->ptr[r];
        double s = 0.0;
        for (int64_t e = G->indptr[verts[r]]; e < G->indptr[verts[r] + 1]; e++) {
            a->col[at] = local[G->indices[e]];
            a->val[at++] = G->data[e];
            s += G->data[e];
        }
        deg[r] = s;
    }
#pragma omp parallel for schedule(static) if (nnz > PAR_MIN_EDGES)
    for (int64_t r = 0; r < nc; r++)
        for (int64_t e = a->ptr[r]; e < a->ptr[r + 1]; e++)
            a->val[e] /= sqrt(deg[r] * deg[a->col[e]]);
    free(deg);
    return GSB_OK;
}

/* A normalised adjacency on a backend, for Lanczos's products. */
typedef struct adj_on {
    const gsb__backend *be;
    gsb__tensor ptr, col, val;
} adj_on;

static void adj_on_free(adj_on *d)
{
    gsb__tensor_free(&d->ptr);
    gsb__tensor_free(&d->col);
    gsb__tensor_free(&d->val);
}

/* a's arrays on be (borrowed on the CPU backend) */
static int adj_on_open(const norm_adj *a, const gsb__backend *be, adj_on *d)
{
    const int64_t nnz = a->ptr[a->n];
    memset(d, 0, sizeof *d);
    d->be = be;
    gsb__tensor t = gsb__tensor_host_view(a->ptr, GSB_I64, a->n + 1, 1);
    GSB_TRY(gsb__tensor_to(be, &t, &d->ptr));
    t = gsb__tensor_host_view(a->col, GSB_I32, nnz, 1);
    GSB_TRY(gsb__tensor_to(be, &t, &d->col));
    t = gsb__tensor_host_view(a->val, GSB_F64, nnz, 1);
    return gsb__tensor_to(be, &t, &d->val);
}

static int adj_on_apply(void *data, const gsb__tensor *x, gsb__tensor *y)
{
    const adj_on *d = data;
    return d->be->ops->csr_spmm(d->be, &d->ptr, &d->col, &d->val, x, y);
}

/* evecs (nev x n): the nev largest eigenvectors of the dense M, descending */
static int dense_largest(const norm_adj *a, int64_t nev, double *evecs)
{
    const int64_t n = a->n;
    const gsb__backend *cpu = gsb__cpu_backend();
    gsb__tensor M = GSB__TENSOR_NONE, w = GSB__TENSOR_NONE, V = GSB__TENSOR_NONE;
    int rc;
    GSB_CHECK(gsb__tensor_zeros(cpu, GSB_F64, n, n, &M));
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_F64, n, 1, &w));
    GSB_CHECK(gsb__tensor_alloc(cpu, GSB_F64, n, n, &V));
    double *m = M.data;
    for (int64_t r = 0; r < n; r++)
        for (int64_t e = a->ptr[r]; e < a->ptr[r + 1]; e++)
            m[r * n + a->col[e]] = a->val[e];
    GSB_CHECK(cpu->ops->eigh(cpu, &M, &w, &V));
    const double *v = V.data;
    for (int64_t j = 0; j < nev; j++)
        for (int64_t i = 0; i < n; i++)
            evecs[j * n + i] = v[i * n + (n - 1 - j)];
done:
    gsb__tensor_free(&M);
    gsb__tensor_free(&w);
    gsb__tensor_free(&V);
    return rc;
}

/* the caller's progress callback, and the restart cycles counted for the profile */
typedef struct cycle_count {
    int (*progress)(void *data, int64_t matvecs, double residual);
    void *data;
    int64_t cycles;
} cycle_count;

static int count_cycle(void *data, int64_t matvecs, double residual)
{
    cycle_count *cc = data;
    cc->cycles++;
    return cc->progress ? cc->progress(cc->data, matvecs, residual) : GSB_OK;
}

/* GSB_PROFILE's line for one Lanczos run */
static void mark_lanczos(int64_t n, int64_t ncv, int64_t matvecs, int64_t cycles, int ok,
                         const gsb__backend *be)
{
    if (!gsb__profile_on())
        return;
    char what[160];
    snprintf(what, sizeof what, "spectral: lanczos [%s] (%lld vertices, ncv %lld, %lld matvecs, "
             "%lld cycles%s)", be->name, (long long)n, (long long)ncv, (long long)matvecs,
             (long long)cycles, ok ? "" : ", not converged");
    gsb__profile_mark(what);
}

static int64_t lanczos_ncv(int64_t n, int64_t nev)
{
    int64_t ncv = nev + 24;
    int64_t cap = LANCZOS_BASIS_BYTES / (2 * (int64_t)sizeof(double) * n);
    ncv = ncv > cap ? cap : ncv;
    ncv = ncv < nev + 2 ? nev + 2 : ncv;
    return ncv > n ? n : ncv;
}

/*
 * The spectral layout of one component (nc >= dim + 1 vertices) into emb
 * (nc x dim); *ok = 0 when the eigensolver did not converge (emb unset).
 */
static int component_spectral(const norm_adj *a, const gsb__spectral_opts *so, double *emb,
                              int *ok)
{
    const int64_t n = a->n, dim = so->dim, nev = dim + 1;
    *ok = 0;
    double *evecs = gsb__alloc_array(nev * n, sizeof *evecs);
    double *evals = gsb__alloc_array(nev, sizeof *evals);
    int rc = GSB_OK;
    if (!evecs || !evals) {
        rc = gsb__err(GSB_ENOMEM, "out of memory for %lld eigenvectors of %lld",
                      (long long)nev, (long long)n);
        goto done;
    }
    if (n <= DENSE_MAX || lanczos_ncv(n, nev) < nev + 2) {
        GSB_CHECK(dense_largest(a, nev, evecs));
        *ok = 1;
    } else {
        const gsb__backend *be = so->be && n >= DEVICE_MIN ? so->be : gsb__cpu_backend();
        cycle_count cc = {so->progress, so->progress_data, 0};
        gsb__lanczos_opts o = {n,    nev,           lanczos_ncv(n, nev), LANCZOS_TOL,
                               LANCZOS_BUDGET, NULL, count_cycle, &cc, be};
        adj_on d;
        int64_t matvecs = 0;
        rc = adj_on_open(a, be, &d);
        gsb__profile_mark("spectral: graph upload");
        if (rc == GSB_OK)
            rc = gsb__lanczos_largest(adj_on_apply, &d, &o, evals, evecs, ok, &matvecs);
        adj_on_free(&d);
        if (rc != GSB_OK)
            goto done;
        mark_lanczos(n, o.ncv, matvecs, cc.cycles, *ok, be);
    }
    if (*ok)
        for (int64_t i = 0; i < n; i++)
            for (int64_t d = 0; d < dim; d++)
                emb[i * dim + d] = evecs[(d + 1) * n + i];
done:
    free(evecs);
    free(evals);
    return rc;
}

/* ---- the meta layout of several components -------------------------------- */

typedef struct comp_work {
    int32_t *label, *verts, *local;
    int64_t *start; /* component c's vertices: verts[start[c] .. start[c + 1]) */
    double *meta, *emb;
} comp_work;

/*
 * cen (k x p) = each component's sum of its rows of X, added in ascending
 * vertex order (so the result does not depend on the thread count).  The
 * tasks are (component, block of CEN_COLS columns): 70000 x 784 floats
 * took 45 ms on one thread, the whole meta layout's time.
 */
#define CEN_COLS 128
static void centroid_sums(const float *X, int64_t p, const comp_work *w, int64_t k, double *cen)
{
    const int64_t blocks = (p + CEN_COLS - 1) / CEN_COLS;
#pragma omp parallel for schedule(dynamic, 1) if (w->start[k] * p > (int64_t)1 << 20)
    for (int64_t t = 0; t < k * blocks; t++) {
        const int64_t c = t / blocks, j0 = (t % blocks) * CEN_COLS;
        const int64_t j1 = j0 + CEN_COLS < p ? j0 + CEN_COLS : p;
        double acc[CEN_COLS] = {0};
        for (int64_t v = w->start[c]; v < w->start[c + 1]; v++) {
            const float *x = X + (int64_t)w->verts[v] * p;
            for (int64_t j = j0; j < j1; j++)
                acc[j - j0] += (double)x[j];
        }
        for (int64_t j = j0; j < j1; j++)
            cen[c * p + j] = acc[j - j0];
    }
}

static double centroid_distance(const double *x, const double *y, int64_t p,
                                gsb__knn_metric metric)
{
    double s = 0.0, xx = 0.0, yy = 0.0, mx = 0.0, my = 0.0;
    if (metric == GSB__KNN_CORRELATION) {
        for (int64_t j = 0; j < p; j++) {
            mx += x[j];
            my += y[j];
        }
        mx /= (double)p;
        my /= (double)p;
    }
    for (int64_t j = 0; j < p; j++) {
        double a = x[j] - mx, b = y[j] - my;
        switch (metric) {
        case GSB__KNN_MANHATTAN: s += fabs(a - b); break;
        case GSB__KNN_EUCLIDEAN: s += (a - b) * (a - b); break;
        default:
            s += a * b;
            xx += a * a;
            yy += b * b;
        }
    }
    if (metric == GSB__KNN_EUCLIDEAN)
        return sqrt(s);
    if (metric == GSB__KNN_MANHATTAN)
        return s;
    return xx > 0.0 && yy > 0.0 ? 1.0 - s / sqrt(xx * yy) : 1.0;
}

/*
 * umap-learn's component_layout: scikit-learn's spectral_embedding of the
 * centroids' affinity (normalised Laplacian, first eigenvector dropped,
 * divided by sqrt(degree), signs fixed so each vector's largest entry is
 * positive), scaled by its largest value.  meta (k x dim).
 */
static int centroid_layout(const comp_work *w, int64_t k, const gsb__spectral_opts *o,
                           double *meta)
{
    const int64_t p = o->p, dim = o->dim;
    double *cen = gsb__calloc_array(k * p, sizeof *cen);
    double *W = gsb__calloc_array(k * k, sizeof *W);
    double *deg = gsb__calloc_array(k, sizeof *deg);
    int rc = GSB_OK;
    if (!cen || !W || !deg) {
        rc = gsb__err(GSB_ENOMEM, "out of memory for %lld component centroids", (long long)k);
        goto done;
    }
    centroid_sums(o->X, p, w, k, cen);
    for (int64_t c = 0; c < k; c++)
        for (int64_t j = 0; j < p; j++)
            cen[c * p + j] /= (double)(w->start[c + 1] - w->start[c]);
    double msq = 0.0;
    for (int64_t a = 0; a < k; a++)
        for (int64_t b = a + 1; b < k; b++) {
            double d = centroid_distance(cen + a * p, cen + b * p, p, o->metric);
            W[a * k + b] = W[b * k + a] = d * d;
            msq += d * d;
        }
    msq = msq > 0.0 ? msq / (double)(k * (k - 1) / 2) : 1.0;
    for (int64_t a = 0; a < k; a++)
        for (int64_t b = 0; b < k; b++) {
            W[a * k + b] = a == b ? 0.0 : exp(-W[a * k + b] / msq);
            deg[a] += W[a * k + b];
        }
    norm_adj adj = {k, NULL, NULL, NULL};
    /* dense M as a CSR of every pair (k is small: the number of components) */
    adj.ptr = gsb__alloc_array(k + 1, sizeof *adj.ptr);
    adj.col = gsb__alloc_array(k * k, sizeof *adj.col);
    adj.val = gsb__alloc_array(k * k, sizeof *adj.val);
    if (!adj.ptr || !adj.col || !adj.val) {
        norm_adj_free(&adj);
        rc = gsb__err(GSB_ENOMEM, "out of memory for %lld component centroids", (long long)k);
        goto done;
    }
    for (int64_t a = 0; a < k; a++) {
        adj.ptr[a] = a * k;
        for (int64_t b = 0; b < k; b++) {
            adj.col[a * k + b] = (int32_t)b;
            adj.val[a * k + b] = deg[a] > 0 && deg[b] > 0 ? W[a * k + b] / sqrt(deg[a] * deg[b])
                                                          : 0.0;
        }
    }
    adj.ptr[k] = k * k;
    double *evecs = W; /* reuse: (dim + 1) x k fits in k x k since dim + 1 < 2 dim < k */
    rc = dense_largest(&adj, dim + 1, evecs);
    norm_adj_free(&adj);
    if (rc != GSB_OK)
        goto done;
    double top = -INFINITY;
    for (int64_t d = 0; d < dim; d++) {
        const double *v = evecs + (d + 1) * k;
        double big = 0.0, sign = 1.0;
        for (int64_t c = 0; c < k; c++)
            if (fabs(v[c]) > big) {
                big = fabs(v[c]);
                sign = v[c] < 0 ? -1.0 : 1.0;
            }
        for (int64_t c = 0; c < k; c++) {
            double val = sign * v[c] / (deg[c] > 0 ? sqrt(deg[c]) : 1.0);
            meta[c * dim + d] = val;
            top = val > top ? val : top;
        }
    }
    for (int64_t i = 0; i < k * dim; i++)
        meta[i] /= top > 0.0 ? top : 1.0;
done:
    free(cen);
    free(W);
    free(deg);
    return rc;
}

/* umap-learn's meta layout: +-e_i for up to 2 dim components, else centroids. */
static int meta_layout(const comp_work *w, int64_t k, const gsb__spectral_opts *o,
                       double *meta)
{
    const int64_t dim = o->dim;
    if (k > 2 * dim)
        return centroid_layout(w, k, o, meta);
    int64_t half = (k + 1) / 2;
    memset(meta, 0, (size_t)(k * dim) * sizeof *meta);
    for (int64_t c = 0; c < k; c++)
        meta[c * dim + (c % half)] = c < half ? 1.0 : -1.0;
    return GSB_OK;
}

/* Half the distance from meta point c to the nearest other (distinct) one. */
static double box_half_width(const double *meta, int64_t k, int64_t dim, int64_t c)
{
    double best = INFINITY;
    for (int64_t o = 0; o < k; o++) {
        double s = 0.0;
        for (int64_t d = 0; d < dim; d++)
            s += (meta[c * dim + d] - meta[o * dim + d]) * (meta[c * dim + d] - meta[o * dim + d]);
        if (s > 0.0 && sqrt(s) < best)
            best = sqrt(s);
    }
    return isfinite(best) ? best / 2.0 : 1.0;
}

static void uniform_fill(gsb__rng *rng, double lo, double hi, double *x, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        x[i] = lo + (hi - lo) * gsb__rng_uniform(rng);
}

/* ---- the layout --------------------------------------------------------------- */

static void comp_work_free(comp_work *w)
{
    free(w->label);
    free(w->verts);
    free(w->local);
    free(w->start);
    free(w->meta);
    free(w->emb);
}

/* The vertices of each component, grouped, and their local indices. */
static int group_components(const gsb__fcsr *G, int64_t k, comp_work *w)
{
    const int64_t n = G->rows;
    w->verts = gsb__alloc_array(n, sizeof *w->verts);
    w->local = gsb__alloc_array(n, sizeof *w->local);
    w->start = gsb__calloc_array(k + 1, sizeof *w->start);
    if (!w->verts || !w->local || !w->start)
        return gsb__err(GSB_ENOMEM, "out of memory for %lld components", (long long)k);
    for (int64_t i = 0; i < n; i++)
        w->start[w->label[i] + 1]++;
    for (int64_t c = 0; c < k; c++)
        w->start[c + 1] += w->start[c];
    int64_t *fill = gsb__alloc_array(k, sizeof *fill);
    if (!fill)
        return gsb__err(GSB_ENOMEM, "out of memory for %lld components", (long long)k);
    memcpy(fill, w->start, (size_t)k * sizeof *fill);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = w->label[i];
        w->local[i] = (int32_t)(fill[c] - w->start[c]);
        w->verts[fill[c]++] = (int32_t)i;
    }
    free(fill);
    return GSB_OK;
}

/* ---- the large components together (GPU) ------------------------------------- */

/* The components whose Lanczos runs in lockstep, and its results. */
typedef struct batch {
    int64_t count;  /* components in the batch */
    int64_t *slot;  /* k: a component's place in the batch, -1 when not in it */
    int64_t *seg;   /* count + 1: each member's vertices in the batch order */
    int32_t *verts; /* seg[count]: the members' vertices, member by member */
    double *evecs;  /* (dim + 1) x seg[count]: the members' eigenvectors */
    double *evals;  /* count x (dim + 1) */
    int *status;    /* count: lanczos_seg.h's (1, 0, -1: solve it alone) */
} batch;

static void batch_free(batch *b)
{
    free(b->slot);
    free(b->seg);
    free(b->verts);
    free(b->evecs);
    free(b->evals);
    free(b->status);
}

/* Component c joins the batch: a Lanczos on the device with the basis it
 * would have alone (ncv for the batch's size equal to its own). */
static int batch_member(const comp_work *w, const gsb__spectral_opts *o, int64_t c)
{
    const int64_t nc = w->start[c + 1] - w->start[c], dim = o->dim;
    return nc >= DEVICE_MIN && nc > DENSE_MAX && nc >= 2 * dim && nc > dim + 1 &&
           lanczos_ncv(nc, dim + 1) >= dim + 3;
}

/* b's members and their vertices (b->count 0: none) */
static int batch_select(const comp_work *w, int64_t k, const gsb__spectral_opts *o, batch *b)
{
    const int64_t nev = o->dim + 1;
    int64_t count = 0, total = 0;
    for (int64_t c = 0; c < k; c++)
        if (batch_member(w, o, c)) {
            count++;
            total += w->start[c + 1] - w->start[c];
        }
    for (int64_t c = 0; c < k && count > 0; c++) /* the same basis size as alone */
        if (batch_member(w, o, c) &&
            lanczos_ncv(w->start[c + 1] - w->start[c], nev) != lanczos_ncv(total, nev))
            count = 0;
    if (count == 0)
        return GSB_OK;
    b->slot = gsb__alloc_array(k, sizeof *b->slot);
    b->seg = gsb__alloc_array(count + 1, sizeof *b->seg);
    b->verts = gsb__alloc_array(total, sizeof *b->verts);
    if (!b->slot || !b->seg || !b->verts)
        return gsb__err(GSB_ENOMEM, "out of memory for %lld components", (long long)count);
    b->seg[0] = 0;
    for (int64_t c = 0; c < k; c++) {
        b->slot[c] = -1;
        if (!batch_member(w, o, c))
            continue;
        const int64_t nc = w->start[c + 1] - w->start[c];
        b->slot[c] = b->count;
        memcpy(b->verts + b->seg[b->count], w->verts + w->start[c], (size_t)nc * sizeof(int32_t));
        b->seg[b->count + 1] = b->seg[b->count] + nc;
        b->count++;
    }
    return GSB_OK;
}

/* GSB_PROFILE's line for the batch's Lanczos */
static void mark_batch(const batch *b, int64_t ncv, int64_t matvecs, int64_t cycles,
                       const gsb__backend *be)
{
    if (!gsb__profile_on())
        return;
    int64_t failed = 0;
    for (int64_t i = 0; i < b->count; i++)
        failed += b->status[i] != 1;
    char what[200];
    snprintf(what, sizeof what, "spectral: lanczos [%s] (%lld components in lockstep, %lld "
             "vertices, ncv %lld, %lld matvecs, %lld cycles, %lld not converged)", be->name,
             (long long)b->count, (long long)b->seg[b->count], (long long)ncv,
             (long long)matvecs, (long long)cycles, (long long)failed);
    gsb__profile_mark(what);
}

/* The members' eigenvectors by one lockstep Lanczos on o->be. */
static int batch_solve(const gsb__fcsr *G, const gsb__spectral_opts *o, batch *b)
{
    const int64_t total = b->seg[b->count], nev = o->dim + 1;
    const gsb__backend *be = o->be ? o->be : gsb__cpu_backend();
    int32_t *pos = gsb__alloc_array(G->rows, sizeof *pos);
    b->evecs = gsb__alloc_array(nev * total, sizeof *b->evecs);
    b->evals = gsb__alloc_array(nev * b->count, sizeof *b->evals);
    b->status = gsb__alloc_array(b->count, sizeof *b->status);
    if (!pos || !b->evecs || !b->evals || !b->status) {
        free(pos);
        return gsb__err(GSB_ENOMEM, "out of memory for the layout of %lld vertices",
                        (long long)total);
    }
    for (int64_t i = 0; i < total; i++) /* the members' edges stay inside them */
        pos[b->verts[i]] = (int32_t)i;
    norm_adj a;
    int rc = build_norm_adj(G, b->verts, total, pos, &a);
    free(pos);
    GSB_TRY(rc);
    gsb__profile_mark("spectral: normalised adjacency (the large components)");
    cycle_count cc = {o->progress, o->progress_data, 0};
    gsb__lanczos_seg_opts so = {b->count, b->seg, nev,         lanczos_ncv(total, nev),
                                LANCZOS_TOL, LANCZOS_BUDGET, count_cycle, &cc, be};
    adj_on d;
    int64_t matvecs = 0;
    rc = adj_on_open(&a, be, &d);
    gsb__profile_mark("spectral: graph upload");
    if (rc == GSB_OK)
        rc = gsb__lanczos_seg_largest(adj_on_apply, &d, &so, b->evals, b->evecs, b->status,
                                      &matvecs);
    adj_on_free(&d);
    norm_adj_free(&a);
    GSB_TRY(rc);
    mark_batch(b, so.ncv, matvecs, cc.cycles, be);
    return GSB_OK;
}

/* Component c's spectral layout into w->emb: from the batch when solved
 * there, else on its own. */
static int component_layout(const gsb__fcsr *G, const gsb__spectral_opts *o, comp_work *w,
                            const batch *b, int64_t c, int *ok)
{
    const int64_t dim = o->dim, nc = w->start[c + 1] - w->start[c];
    const int64_t at = b->slot ? b->slot[c] : -1;
    if (at >= 0 && b->status[at] >= 0) {
        const int64_t total = b->seg[b->count], off = b->seg[at];
        for (int64_t i = 0; i < nc; i++)
            for (int64_t d = 0; d < dim; d++)
                w->emb[i * dim + d] = b->evecs[(d + 1) * total + off + i];
        *ok = b->status[at] == 1;
        return GSB_OK;
    }
    norm_adj a;
    GSB_TRY(build_norm_adj(G, w->verts + w->start[c], nc, w->local, &a));
    if (nc > DENSE_MAX)
        gsb__profile_mark("spectral: normalised adjacency");
    int rc = component_spectral(&a, o, w->emb, ok);
    norm_adj_free(&a);
    return rc;
}

/* Lay out component c into out (its rows), inside its box around meta[c]. */
static int place_component(const gsb__fcsr *G, const gsb__spectral_opts *o, comp_work *w,
                           const batch *b, int64_t k, int64_t c, double *out,
                           int64_t *n_failed)
{
    const int64_t dim = o->dim, nc = w->start[c + 1] - w->start[c];
    const int32_t *verts = w->verts + w->start[c];
    const double *centre = w->meta + c * dim;
    double half = box_half_width(w->meta, k, dim, c);
    double *emb = w->emb;
    int ok = 0;
    if (nc >= 2 * dim && nc > dim + 1) {
        GSB_TRY(component_layout(G, o, w, b, c, &ok));
        if (!ok) { /* umap-learn's fallback for a failed eigensolver */
            (*n_failed)++;
            uniform_fill(o->rng, -10.0, 10.0, emb, nc * dim);
        }
        double big = 0.0;
        for (int64_t i = 0; i < nc * dim; i++)
            big = fabs(emb[i]) > big ? fabs(emb[i]) : big;
        double scale = big > 0.0 ? half / big : 1.0;
        for (int64_t i = 0; i < nc * dim; i++)
            emb[i] *= scale;
    } else {
        uniform_fill(o->rng, -half, half, emb, nc * dim);
    }
    for (int64_t r = 0; r < nc; r++)
        for (int64_t d = 0; d < dim; d++)
            out[(int64_t)verts[r] * dim + d] = emb[r * dim + d] + centre[d];
    return GSB_OK;
}

/* A connected graph: its spectral layout, or umap-learn's random fallback. */
static int single_component(const gsb__fcsr *G, const gsb__spectral_opts *o, comp_work *w,
                            const batch *b, double *out, int64_t *n_failed)
{
    const int64_t n = G->rows, dim = o->dim;
    int ok = 0;
    if (n >= dim + 1) {
        GSB_TRY(component_layout(G, o, w, b, 0, &ok));
        if (ok)
            memcpy(out, w->emb, (size_t)(n * dim) * sizeof *out);
    }
    if (!ok) {
        (*n_failed)++;
        uniform_fill(o->rng, -10.0, 10.0, out, n * dim);
    }
    return GSB_OK;
}

int gsb__spectral_layout(const gsb__fcsr *G, const gsb__spectral_opts *o, double *out,
                         int64_t *n_failed)
{
    const int64_t n = G->rows, dim = o->dim;
    *n_failed = 0;
    comp_work w = {0};
    batch b = {0};
    int64_t k = 0;
    int rc;
    w.label = gsb__alloc_array(n, sizeof *w.label);
    w.emb = gsb__alloc_array(n * dim, sizeof *w.emb);
    if (!w.label || !w.emb) {
        rc = gsb__err(GSB_ENOMEM, "out of memory for the layout of %lld points", (long long)n);
        goto done;
    }
    GSB_CHECK(gsb__connected_components(G, w.label, &k));
    GSB_CHECK(group_components(G, k, &w));
    gsb__profile_mark("spectral: connected components");
    if ((o->be && o->be != gsb__cpu_backend()) || o->lockstep) {
        GSB_CHECK(batch_select(&w, k, o, &b));
        if (b.count > 0)
            GSB_CHECK(batch_solve(G, o, &b));
    }
    if (k == 1) {
        rc = single_component(G, o, &w, &b, out, n_failed);
        goto done;
    }
    w.meta = gsb__alloc_array(k * dim, sizeof *w.meta);
    if (!w.meta) {
        rc = gsb__err(GSB_ENOMEM, "out of memory for %lld components", (long long)k);
        goto done;
    }
    GSB_CHECK(meta_layout(&w, k, o, w.meta));
    gsb__profile_mark("spectral: meta layout");
    for (int64_t c = 0; c < k; c++)
        GSB_CHECK(place_component(G, o, &w, &b, k, c, out, n_failed));
    gsb__profile_mark("spectral: the small components, placement");
done:
    batch_free(&b);
    comp_work_free(&w);
    return rc;
}
