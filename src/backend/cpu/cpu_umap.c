/*
 * cpu_umap.c - the CPU backend's umap_sgd_epoch: one epoch of UMAP's layout
 * SGD in the deterministic form backend/umap_sgd.h specifies.
 *
 * Rows of the head are independent within an epoch (every step reads the
 * epoch's starting positions), so OpenMP threads take rows in chunks and
 * sum each row's edge steps in edge order into a buffer; the head moves by
 * the buffer afterwards.  Each row's sum is done by one thread in a fixed
 * order: results are the same bitwise whatever the number of threads, and
 * the CUDA version (cuda_umap.cu) sums in the same order.
 */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "backend/umap_sgd.h"
#include "core/error.h"

/* Edges below which an epoch stays on one thread: an epoch of 30k edges
 * (digits) is ~1 ms of work, less than a parallel region's fork, join and
 * wait for a busy core (measured: 8x slower on two loaded cores). */
#define UMAP_PAR_MIN_EDGES ((int64_t)1 << 17)

/* Shapes, dtypes and the CSR structure (indptr from 0 to nnz, nondecreasing;
 * indices inside the tail): the estimator builds these, a mismatch is a bug. */
static int check_args(const gsb__tensor *head, const gsb__tensor *tail,
                      const gsb__tensor *indptr, const gsb__tensor *indices,
                      const gsb__tensor *eps, const gsb__tensor *next_sample,
                      const gsb__tensor *next_negative, const gsb__umap_sgd *p)
{
    const char *op = "umap_sgd_epoch";
    GSB_TRY(cpu_check(head, GSB_F32, -1, -1, op, "head"));
    GSB_TRY(cpu_check(tail, GSB_F32, -1, head->cols, op, "tail"));
    GSB_TRY(cpu_check_vec(indptr, GSB_I64, head->rows + 1, op, "indptr"));
    const int64_t *ptr = indptr->data;
    int64_t nnz = ptr[head->rows];
    GSB_TRY(cpu_check_vec(indices, GSB_I32, nnz, op, "indices"));
    GSB_TRY(cpu_check_vec(eps, GSB_F64, nnz, op, "epochs_per_sample"));
    GSB_TRY(cpu_check_vec(next_sample, GSB_F64, nnz, op, "next_sample"));
    GSB_TRY(cpu_check_vec(next_negative, GSB_F64, nnz, op, "next_negative"));
    if (!p || !(p->negative_sample_rate >= 0.0))
        return gsb__err(GSB_EINTERNAL, "%s: negative_sample_rate must be >= 0", op);
    if (ptr[0] != 0)
        return gsb__err(GSB_EINTERNAL, "%s: indptr[0] is %lld", op, (long long)ptr[0]);
    for (int64_t i = 0; i < head->rows; i++)
        if (ptr[i + 1] < ptr[i])
            return gsb__err(GSB_EINTERNAL, "%s: indptr decreases at row %lld", op,
                            (long long)i);
    const int32_t *idx = indices->data;
    for (int64_t e = 0; e < nnz; e++)
        if (idx[e] < 0 || idx[e] >= tail->rows)
            return gsb__err(GSB_EINTERNAL, "%s: edge %lld points at row %d of %lld", op,
                            (long long)e, (int)idx[e], (long long)tail->rows);
    return GSB_OK;
}

int gsb__cpu_umap_sgd_epoch(const gsb__backend *be, gsb__tensor *head, const gsb__tensor *tail,
                            const gsb__tensor *indptr, const gsb__tensor *indices,
                            const gsb__tensor *epochs_per_sample, gsb__tensor *next_sample,
                            gsb__tensor *next_negative, const gsb__umap_sgd *p)
{
    (void)be;
    const gsb__tensor *t = tail ? tail : head;
    GSB_TRY(check_args(head, t, indptr, indices, epochs_per_sample, next_sample,
                       next_negative, p));
    const int64_t n = head->rows, dim = head->cols, m = t->rows;
    float *move = gsb__calloc_array(n * dim, sizeof(float));
    float *steps = cpu_alloc((int64_t)omp_get_max_threads() * dim, sizeof(float));
    if (!move || !steps) {
        free(move);
        free(steps);
        return gsb__err(GSB_ENOMEM, "umap_sgd_epoch: out of memory for %lld x %lld moves",
                        (long long)n, (long long)dim);
    }
    const int64_t *ptr = indptr->data;
    const int32_t *idx = indices->data;
    const double *eps = epochs_per_sample->data;
    double *ns = next_sample->data, *nn = next_negative->data;
    const float *y = head->data, *ty = t->data;

#pragma omp parallel if (ptr[n] > UMAP_PAR_MIN_EDGES)
    {
        float *step = steps + (int64_t)omp_get_thread_num() * dim;
#pragma omp for schedule(dynamic, 256)
        for (int64_t i = 0; i < n; i++) {
            float *acc = move + i * dim;
            for (int64_t e = ptr[i]; e < ptr[i + 1]; e++) {
                gsb__umap_edge_step(y + i * dim, ty, m, dim, idx[e], e, eps[e], &ns[e], &nn[e],
                                    p, step);
                for (int64_t d = 0; d < dim; d++)
                    acc[d] += step[d];
            }
        }
    }
    float *yh = head->data;
#pragma omp parallel for if (n * dim > (1 << 16)) schedule(static)
    for (int64_t i = 0; i < n * dim; i++)
        yh[i] += move[i];
    free(move);
    free(steps);
    return GSB_OK;
}
