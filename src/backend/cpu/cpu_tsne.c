/*
 * cpu_tsne.c - the CPU backend's t-SNE ops that need no tree or grid:
 * tsne_attract (the attraction over the sparse P, and the KL divergence),
 * tsne_repulse_exact (every pair) and tsne_update (one gradient-descent step
 * with gains and momentum).  Barnes-Hut is in cpu_tsne_bh.c, the FFT
 * repulsion in cpu_tsne_fft.c.
 *
 * Each row's sums are accumulated in double by one thread and whole-array
 * sums (Z, KL, the gradient norm) are added in index order afterwards, so
 * the results do not depend on the number of threads: a random_state fit
 * repeats bitwise on the CPU.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_tsne.h"

/* Below this many pair terms (~1 ms of work) a loop stays on one thread: t-SNE
 * calls these ops a thousand times, and on a busy machine each parallel
 * region's fork and join can wait milliseconds for a core. */
#define TSNE_PAR_MIN ((int64_t)1 << 20)

/* ---- attraction ------------------------------------------------------------ */

static int check_csr(const gsb__tensor *Y, const gsb__tensor *indptr, const gsb__tensor *indices,
                     const gsb__tensor *val, const char *op)
{
    int64_t n = Y->rows;
    GSB_TRY(cpu_check_vec(indptr, GSB_I64, n + 1, op, "indptr"));
    const int64_t *ip = indptr->data;
    int64_t nnz = ip[n];
    if (ip[0] != 0 || nnz < 0)
        return gsb__err(GSB_EINTERNAL, "%s: indptr is malformed", op);
    if (nnz > 0) {
        GSB_TRY(cpu_check_vec(indices, GSB_I32, nnz, op, "indices"));
        GSB_TRY(cpu_check_vec(val, GSB_F32, nnz, op, "val"));
    }
    for (int64_t i = 0; i < n; i++)
        if (ip[i + 1] < ip[i])
            return gsb__err(GSB_EINTERNAL, "%s: indptr is not ascending", op);
    const int32_t *ix = nnz > 0 ? indices->data : NULL;
    for (int64_t k = 0; k < nnz; k++)
        if (ix[k] < 0 || ix[k] >= n)
            return gsb__err(GSB_EINTERNAL, "%s: column index %d out of range", op, (int)ix[k]);
    return GSB_OK;
}

int gsb__cpu_tsne_attract(const gsb__backend *be, const gsb__tensor *Y,
                          const gsb__tensor *indptr, const gsb__tensor *indices,
                          const gsb__tensor *val, double scale, int dof,
                          const gsb__tensor *zsum, double floor, gsb__tensor *A, double *kl)
{
    (void)be;
    const char *op = "tsne_attract";
    GSB_TRY(cpu_check(Y, GSB_F32, -1, -1, op, "Y"));
    if (dof < 1)
        return gsb__err(GSB_EINTERNAL, "%s: dof %d < 1", op, dof);
    GSB_TRY(cpu_check(A, GSB_F32, Y->rows, Y->cols, op, "A"));
    GSB_TRY(check_csr(Y, indptr, indices, val, op));
    if (kl)
        GSB_TRY(cpu_check(zsum, GSB_F64, 1, 1, op, "zsum"));
    int64_t n = Y->rows, d = Y->cols;
    const int64_t *ip = indptr->data;
    const int32_t *ix = indices->data;
    const float *pv = val->data, *y = Y->data;
    float *out = A->data;
    double *rowkl = NULL, *acc = cpu_alloc(n * d, sizeof *acc);
    if (kl && !(rowkl = cpu_alloc(n, sizeof *rowkl))) {
        free(acc);
        return gsb__err(GSB_ENOMEM, "%s: out of host memory", op);
    }
    if (!acc)
        return gsb__err(GSB_ENOMEM, "%s: out of host memory", op);
    double inv_z = kl ? 1.0 / fmax(((const double *)zsum->data)[0], DBL_EPSILON) : 0.0;

#pragma omp parallel for schedule(static) if (ip[n] * d > TSNE_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float *yi = y + i * d;
        double *f = acc + i * d, c = 0.0;
        for (int64_t a = 0; a < d; a++)
            f[a] = 0.0;
        for (int64_t k = ip[i]; k < ip[i + 1]; k++) {
            const float *yj = y + (int64_t)ix[k] * d;
            double d2 = 0.0;
            for (int64_t a = 0; a < d; a++) {
                double t = (double)yi[a] - (double)yj[a];
                d2 += t * t;
            }
            double w = cpu_tsne_w(d2, dof), p = scale * (double)pv[k], pw = p * w;
            for (int64_t a = 0; a < d; a++)
                f[a] += pw * ((double)yi[a] - (double)yj[a]);
            if (rowkl)
                c += p * log(fmax(p, floor) / fmax(w * inv_z, floor));
        }
        for (int64_t a = 0; a < d; a++)
            out[i * d + a] = (float)f[a];
        if (rowkl)
            rowkl[i] = c;
    }
    if (kl)
        *kl = cpu_tsne_sum(rowkl, n);
    free(rowkl);
    free(acc);
    return GSB_OK;
}

/* ---- exact repulsion ----------------------------------------------------- */

int gsb__cpu_tsne_repulse_exact(const gsb__backend *be, const gsb__tensor *Y, int dof,
                                gsb__tensor *R, gsb__tensor *zsum)
{
    (void)be;
    const char *op = "tsne_repulse_exact";
    GSB_TRY(cpu_tsne_check_repulse(Y, dof, R, zsum, op));
    int64_t n = Y->rows, d = Y->cols;
    const float *y = Y->data;
    float *out = R->data;
    double *zrow = cpu_alloc(n, sizeof *zrow), *acc = cpu_alloc(n * d, sizeof *acc);
    if (!zrow || !acc) {
        free(zrow);
        free(acc);
        return gsb__err(GSB_ENOMEM, "%s: out of host memory", op);
    }

#pragma omp parallel for schedule(dynamic, 16) if (n * n * d > TSNE_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float *yi = y + i * d;
        double *f = acc + i * d, z = 0.0;
        for (int64_t a = 0; a < d; a++)
            f[a] = 0.0;
        for (int64_t j = 0; j < n; j++) {
            const float *yj = y + j * d;
            double d2 = 0.0;
            for (int64_t a = 0; a < d; a++) {
                double t = (double)yi[a] - (double)yj[a];
                d2 += t * t;
            }
            double w = cpu_tsne_w(d2, dof), w2 = w * w;
            z += w;
            for (int64_t a = 0; a < d; a++)
                f[a] += w2 * ((double)yi[a] - (double)yj[a]);
        }
        zrow[i] = z - 1.0; /* the pair (i, i): w = 1 exactly */
        for (int64_t a = 0; a < d; a++)
            out[i * d + a] = (float)f[a];
    }
    ((double *)zsum->data)[0] = cpu_tsne_sum(zrow, n);
    free(zrow);
    free(acc);
    return GSB_OK;
}

/* ---- the gradient-descent step -------------------------------------------- */

/* Elements per partial sum of the gradient norm: fixed, so the sum's order
 * does not depend on the thread count. */
#define UPDATE_CHUNK ((int64_t)4096)

int gsb__cpu_tsne_update(const gsb__backend *be, gsb__tensor *Y, const gsb__tensor *A,
                         const gsb__tensor *R, const gsb__tensor *zsum, double c,
                         double momentum, double learning_rate, double min_gain,
                         gsb__tensor *update, gsb__tensor *gains, double *grad_norm)
{
    (void)be;
    const char *op = "tsne_update";
    GSB_TRY(cpu_check(Y, GSB_F32, -1, -1, op, "Y"));
    int64_t n = Y->rows, d = Y->cols, count = n * d;
    GSB_TRY(cpu_check(A, GSB_F32, n, d, op, "A"));
    GSB_TRY(cpu_check(R, GSB_F32, n, d, op, "R"));
    GSB_TRY(cpu_check(update, GSB_F32, n, d, op, "update"));
    GSB_TRY(cpu_check(gains, GSB_F32, n, d, op, "gains"));
    GSB_TRY(cpu_check(zsum, GSB_F64, 1, 1, op, "zsum"));
    int64_t chunks = (count + UPDATE_CHUNK - 1) / UPDATE_CHUNK;
    double *part = cpu_alloc(chunks, sizeof *part);
    if (!part)
        return gsb__err(GSB_ENOMEM, "%s: out of host memory", op);
    float *y = Y->data, *u = update->data, *g = gains->data;
    const float *a = A->data, *r = R->data;
    double inv_z = 1.0 / fmax(((const double *)zsum->data)[0], DBL_EPSILON);
    /* scikit-learn's arithmetic on float32 arrays, step by step */
    float mom = (float)momentum, lr = (float)learning_rate, gmin = (float)min_gain;

#pragma omp parallel for schedule(static) if (count > TSNE_PAR_MIN)
    for (int64_t ch = 0; ch < chunks; ch++) {
        int64_t lo = ch * UPDATE_CHUNK, hi = cpu_min64(count, lo + UPDATE_CHUNK);
        double s = 0.0;
        for (int64_t e = lo; e < hi; e++) {
            float grad = (float)(c * ((double)a[e] - (double)r[e] * inv_z));
            float gain = u[e] * grad < 0.0f ? g[e] + 0.2f : g[e] * 0.8f;
            gain = gain < gmin ? gmin : gain;
            g[e] = gain;
            grad *= gain;
            u[e] = mom * u[e] - lr * grad;
            y[e] += u[e];
            s += (double)grad * (double)grad;
        }
        part[ch] = s;
    }
    if (grad_norm)
        *grad_norm = sqrt(cpu_tsne_sum(part, chunks));
    free(part);
    return GSB_OK;
}
