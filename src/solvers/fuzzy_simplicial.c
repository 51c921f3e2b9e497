/*
 * fuzzy_simplicial.c - UMAP's fuzzy simplicial set on the host (see
 * fuzzy_simplicial.h): smooth_knn_dist, the membership strengths, the fuzzy
 * union of a graph with its transpose, and the categorical intersection of
 * supervised UMAP.  Rows are independent, so the per-row work runs on
 * OpenMP threads; every result is the same whatever the thread count.
 */
#include "solvers/fuzzy_simplicial.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "core/alloc.h"
#include "core/error.h"

/* umap-learn's constants */
#define SMOOTH_K_TOLERANCE 1e-5
#define MIN_K_DIST_SCALE 1e-3
#define SMOOTH_K_ITERATIONS 64

/* rows of work below which a loop stays on one thread */
#define PAR_MIN_ROWS 4096

void gsb__fcsr_free(gsb__fcsr *g)
{
    free(g->indptr);
    free(g->indices);
    free(g->data);
    memset(g, 0, sizeof *g);
}

/* A csr of rows x cols with room for nnz entries (indptr zeroed). */
static int csr_alloc(int64_t rows, int64_t cols, int64_t nnz, gsb__fcsr *g)
{
    memset(g, 0, sizeof *g);
    g->rows = rows;
    g->cols = cols;
    g->indptr = gsb__calloc_array(rows + 1, sizeof *g->indptr);
    g->indices = gsb__alloc_array(nnz, sizeof *g->indices);
    g->data = gsb__alloc_array(nnz, sizeof *g->data);
    if (g->indptr && g->indices && g->data)
        return GSB_OK;
    gsb__fcsr_free(g);
    return gsb__err(GSB_ENOMEM, "out of memory for a %lld x %lld graph of %lld edges",
                    (long long)rows, (long long)cols, (long long)nnz);
}

/* ---- smooth_knn_dist ---------------------------------------------------- */

/* rho of one row (ascending distances): the local_connectivity-th smallest
 * non-zero distance, interpolated; the largest when there are fewer. */
static float row_rho(const float *d, int64_t k, double lc)
{
    int64_t z = 0;
    while (z < k && !(d[z] > 0.0f))
        z++;
    int64_t cnt = k - z;
    if ((double)cnt >= lc) {
        int64_t index = (int64_t)floor(lc);
        double interp = lc - (double)index;
        if (index > 0) {
            float r = d[z + index - 1];
            if (interp > SMOOTH_K_TOLERANCE)
                r += (float)(interp * (double)(d[z + index] - d[z + index - 1]));
            return r;
        }
        return cnt > 0 ? (float)(interp * (double)d[z]) : 0.0f;
    }
    return cnt > 0 ? d[k - 1] : 0.0f;
}

/* sigma by bisection on sum_{j >= 1} exp(-max(d_j - rho, 0) / sigma) = target */
static double row_sigma(const float *d, int64_t k, float rho, double target)
{
    double lo = 0.0, hi = FLT_MAX, mid = 1.0;
    for (int it = 0; it < SMOOTH_K_ITERATIONS; it++) {
        double psum = 0.0;
        for (int64_t j = 1; j < k; j++) {
            float dj = d[j] - rho;
            psum += dj > 0.0f ? exp(-((double)dj / mid)) : 1.0;
        }
        if (fabs(psum - target) < SMOOTH_K_TOLERANCE)
            break;
        if (psum > target) {
            hi = mid;
            mid = (lo + hi) / 2.0;
        } else {
            lo = mid;
            mid = hi >= FLT_MAX ? mid * 2.0 : (lo + hi) / 2.0;
        }
    }
    return mid;
}

void gsb__smooth_knn_dist(const float *dist, int64_t n, int64_t k, double target,
                          double local_connectivity, double *sigma, double *rho)
{
    double total = 0.0;
    for (int64_t i = 0; i < n * k; i++)
        total += dist[i];
    const double mean_all = n * k > 0 ? total / (double)(n * k) : 0.0;
#pragma omp parallel for schedule(static) if (n > PAR_MIN_ROWS)
    for (int64_t i = 0; i < n; i++) {
        const float *d = dist + i * k;
        float r = row_rho(d, k, local_connectivity);
        double s = row_sigma(d, k, r, target);
        double floor_mean = mean_all;
        if (r > 0.0f) {
            double row_total = 0.0;
            for (int64_t j = 0; j < k; j++)
                row_total += d[j];
            floor_mean = row_total / (double)k;
        }
        if (s < MIN_K_DIST_SCALE * floor_mean)
            s = MIN_K_DIST_SCALE * floor_mean;
        rho[i] = r;
        sigma[i] = (float)s; /* umap-learn keeps both in float32 */
    }
}

/* ---- memberships ---------------------------------------------------------- */

static float membership(float d, double rho, double sigma)
{
    float r = (float)rho, s = (float)sigma;
    if (d - r <= 0.0f || s == 0.0f)
        return 1.0f;
    return expf(-((d - r) / s));
}

static int keep_edge(const int64_t *idx, int64_t i, int64_t j, int64_t k, int64_t cols,
                     int bipartite)
{
    int64_t c = idx[i * k + j];
    return c >= 0 && c < cols && (bipartite || c != i);
}

/* insertion sort of one row's (column, value) pairs by column */
static void sort_row(int32_t *col, float *val, int64_t len)
{
    for (int64_t a = 1; a < len; a++) {
        int32_t c = col[a];
        float v = val[a];
        int64_t b = a;
        for (; b > 0 && col[b - 1] > c; b--) {
            col[b] = col[b - 1];
            val[b] = val[b - 1];
        }
        col[b] = c;
        val[b] = v;
    }
}

int gsb__membership_csr(const float *dist, const int64_t *idx, int64_t rows, int64_t k,
                        int64_t cols, const double *sigma, const double *rho, int bipartite,
                        gsb__fcsr *out)
{
    if (cols > INT32_MAX)
        return gsb__err(GSB_EUNSUPPORTED, "graph of %lld columns: at most 2^31 - 1",
                        (long long)cols);
    /* pass 1: entries kept per row (non-zero memberships) */
    int64_t *count = gsb__calloc_array(rows + 1, sizeof *count);
    if (!count)
        return gsb__err(GSB_ENOMEM, "out of memory for %lld row counts", (long long)rows);
#pragma omp parallel for schedule(static) if (rows > PAR_MIN_ROWS)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < k; j++)
            if (keep_edge(idx, i, j, k, cols, bipartite) &&
                membership(dist[i * k + j], rho[i], sigma[i]) != 0.0f)
                count[i + 1]++;
    for (int64_t i = 0; i < rows; i++)
        count[i + 1] += count[i];
    int rc = csr_alloc(rows, cols, count[rows], out);
    if (rc != GSB_OK) {
        free(count);
        return rc;
    }
    memcpy(out->indptr, count, (size_t)(rows + 1) * sizeof *count);
    free(count);
    /* pass 2: fill and sort each row by column */
#pragma omp parallel for schedule(static) if (rows > PAR_MIN_ROWS)
    for (int64_t i = 0; i < rows; i++) {
        int64_t at = out->indptr[i];
        for (int64_t j = 0; j < k; j++) {
            if (!keep_edge(idx, i, j, k, cols, bipartite))
                continue;
            float v = membership(dist[i * k + j], rho[i], sigma[i]);
            if (v == 0.0f)
                continue;
            out->indices[at] = (int32_t)idx[i * k + j];
            out->data[at++] = v;
        }
        sort_row(out->indices + out->indptr[i], out->data + out->indptr[i],
                 at - out->indptr[i]);
    }
    return GSB_OK;
}

/* ---- the fuzzy union -------------------------------------------------------- */

/* chunks of rows the transpose's counting sort splits A into (threads) */
static int64_t transpose_chunks(int64_t rows)
{
    int64_t p = rows > PAR_MIN_ROWS ? omp_get_max_threads() : 1;
    return p > 16 ? 16 : (p < 1 ? 1 : p);
}

/*
 * A^T of a csr, rows sorted by column: a counting sort by column, in
 * parallel over P chunks of A's rows.  Chunk t counts its entries per
 * column (cnt[t][c]); column c's entries from chunk t start after those of
 * the chunks before it, so each chunk scatters its rows on its own and the
 * result is the serial sort's, whatever P.
 */
static int transpose(const gsb__fcsr *A, gsb__fcsr *T)
{
    const int64_t nnz = gsb__fcsr_nnz(A), n = A->cols, P = transpose_chunks(A->rows);
    GSB_TRY(csr_alloc(n, A->rows, nnz, T));
    int64_t *cnt = gsb__calloc_array(P * n, sizeof *cnt);
    if (!cnt) {
        gsb__fcsr_free(T);
        return gsb__err(GSB_ENOMEM, "out of memory transposing a graph");
    }
#pragma omp parallel for schedule(static, 1) num_threads((int)P) if (P > 1)
    for (int64_t t = 0; t < P; t++) {
        int64_t *c = cnt + t * n;
        for (int64_t e = A->indptr[A->rows * t / P]; e < A->indptr[A->rows * (t + 1) / P]; e++)
            c[A->indices[e]]++;
    }
    /* column starts, then each chunk's start inside each column */
    for (int64_t c = 0; c < n; c++) {
        int64_t at = T->indptr[c];
        for (int64_t t = 0; t < P; t++) {
            int64_t k = cnt[t * n + c];
            cnt[t * n + c] = at;
            at += k;
        }
        T->indptr[c + 1] = at;
    }
#pragma omp parallel for schedule(static, 1) num_threads((int)P) if (P > 1)
    for (int64_t t = 0; t < P; t++) {
        int64_t *next = cnt + t * n;
        for (int64_t i = A->rows * t / P; i < A->rows * (t + 1) / P; i++)
            for (int64_t e = A->indptr[i]; e < A->indptr[i + 1]; e++) {
                int64_t at = next[A->indices[e]]++;
                T->indices[at] = (int32_t)i;
                T->data[at] = A->data[e];
            }
    }
    free(cnt);
    return GSB_OK;
}

/* The combined value of a (A's entry) and b (A^T's), in float32 as scipy
 * sums them: ((a + b) - a b) and the mix of union and intersection. */
static float combine(float a, float b, float mix)
{
    float prod = a * b;
    float uni = (a + b) - prod;
    return mix * uni + (1.0f - mix) * prod;
}

/* Merge row i of A and T: writes (when col/val are given) and returns the
 * number of non-zero entries. */
static int64_t merge_row(const gsb__fcsr *A, const gsb__fcsr *T, int64_t i, float mix,
                         int32_t *col, float *val)
{
    int64_t p = A->indptr[i], pe = A->indptr[i + 1];
    int64_t q = T->indptr[i], qe = T->indptr[i + 1], n = 0;
    while (p < pe || q < qe) {
        int32_t c;
        float a = 0.0f, b = 0.0f;
        if (q >= qe || (p < pe && A->indices[p] < T->indices[q])) {
            c = A->indices[p];
            a = A->data[p++];
        } else if (p >= pe || T->indices[q] < A->indices[p]) {
            c = T->indices[q];
            b = T->data[q++];
        } else {
            c = A->indices[p];
            a = A->data[p++];
            b = T->data[q++];
        }
        float v = combine(a, b, mix);
        if (v == 0.0f)
            continue;
        if (col) {
            col[n] = c;
            val[n] = v;
        }
        n++;
    }
    return n;
}

int gsb__fuzzy_union(const gsb__fcsr *A, double mix, gsb__fcsr *out)
{
    memset(out, 0, sizeof *out);
    if (A->rows != A->cols)
        return gsb__err(GSB_EINTERNAL, "fuzzy union of a %lld x %lld graph",
                        (long long)A->rows, (long long)A->cols);
    gsb__fcsr T;
    GSB_TRY(transpose(A, &T));
    const float m = (float)mix;
    const int64_t n = A->rows;
    int64_t *count = gsb__calloc_array(n + 1, sizeof *count);
    int rc = GSB_OK;
    if (!count) {
        rc = gsb__err(GSB_ENOMEM, "out of memory for %lld row counts", (long long)n);
        goto done;
    }
#pragma omp parallel for schedule(static) if (n > PAR_MIN_ROWS)
    for (int64_t i = 0; i < n; i++)
        count[i + 1] = merge_row(A, &T, i, m, NULL, NULL);
    for (int64_t i = 0; i < n; i++)
        count[i + 1] += count[i];
    GSB_CHECK(csr_alloc(n, n, count[n], out));
    memcpy(out->indptr, count, (size_t)(n + 1) * sizeof *count);
#pragma omp parallel for schedule(static) if (n > PAR_MIN_ROWS)
    for (int64_t i = 0; i < n; i++)
        merge_row(A, &T, i, m, out->indices + out->indptr[i], out->data + out->indptr[i]);
done:
    free(count);
    gsb__fcsr_free(&T);
    return rc;
}

/* ---- supervised: categorical intersection --------------------------------- */

/* Drop explicit zeros in place. */
static void drop_zeros(gsb__fcsr *G)
{
    int64_t at = 0, start = 0;
    for (int64_t i = 0; i < G->rows; i++) {
        int64_t end = G->indptr[i + 1];
        for (int64_t e = start; e < end; e++)
            if (G->data[e] != 0.0f) {
                G->indices[at] = G->indices[e];
                G->data[at++] = G->data[e];
            }
        start = end;
        G->indptr[i + 1] = at;
    }
}

int gsb__fuzzy_categorical(gsb__fcsr *G, const double *y, double far_dist, double unknown_dist)
{
    const double far = exp(-far_dist), unknown = exp(-unknown_dist);
#pragma omp parallel for schedule(static) if (G->rows > PAR_MIN_ROWS)
    for (int64_t i = 0; i < G->rows; i++)
        for (int64_t e = G->indptr[i]; e < G->indptr[i + 1]; e++) {
            double yi = y[i], yj = y[G->indices[e]];
            if (yi == -1.0 || yj == -1.0)
                G->data[e] = (float)(G->data[e] * unknown);
            else if (yi != yj)
                G->data[e] = (float)(G->data[e] * far);
        }
    drop_zeros(G);
    /* reset_local_connectivity: each row scaled to a largest value of 1 */
#pragma omp parallel for schedule(static) if (G->rows > PAR_MIN_ROWS)
    for (int64_t i = 0; i < G->rows; i++) {
        float mx = 0.0f;
        for (int64_t e = G->indptr[i]; e < G->indptr[i + 1]; e++)
            mx = G->data[e] > mx ? G->data[e] : mx;
        if (mx > 0.0f)
            for (int64_t e = G->indptr[i]; e < G->indptr[i + 1]; e++)
                G->data[e] /= mx;
    }
    gsb__fcsr U;
    GSB_TRY(gsb__fuzzy_union(G, 1.0, &U));
    gsb__fcsr_free(G);
    *G = U;
    return GSB_OK;
}
