/*
 * cuda_umap.cu - the CUDA backend's umap_sgd_epoch: one epoch of UMAP's
 * layout SGD, one thread per edge, with the arithmetic of
 * backend/umap_sgd.h (the same function the CPU twin, cpu_umap.c, runs).
 *
 * Three kernels per epoch:
 *   edge_rows: one thread per head row writes the row of each of its edges
 *   (the per-edge kernel's head) and checks the CSR structure the CPU twin
 *   checks (indptr from 0 to nnz, nondecreasing; indices inside the tail);
 *   a bad structure is reported (GSB_EINTERNAL) before any edge is read.
 *   Reading the verdict is a host wait, so it happens only in a run's first
 *   epoch (p->edges_checked is 0): the later ones queue without one;
 *   edge_steps: one thread per edge computes its step from the positions
 *   the epoch starts from and advances its schedule;
 *   row_sums: one thread per (row, coordinate) adds the row's steps in
 *   edge order and moves the point: the CPU twin's order, so the two agree
 *   to the last bits of powf, and a run repeats bitwise on a given GPU.
 * With p->hogwild (cuML's default when no seed is given) edge_steps adds
 * each step to its head at once with atomics, reading positions other
 * threads may already have moved, and row_sums does not run.
 * Scratch (the rows, nnz int32, and the steps, nnz x dim float32) comes
 * from the stream-ordered pool, so the epochs of a run reuse it.
 */
#include <stdint.h>

#include "backend/cuda/cuda_common.h"
#include "backend/umap_sgd.h"

namespace {

constexpr int BLOCK = 256;

/* t exists with dtype and n elements (cols -1: rows x cols as given) on be */
int check(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype, int64_t rows,
          int64_t cols, const char *name)
{
    const char *op = "umap_sgd_epoch";
    if (!t || (!t->data && t->rows * t->cols > 0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (t->dtype != dtype)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                            gsb__cuda_dtype_name(t->dtype));
    if (t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    bool bad = cols < 0 ? t->rows * t->cols != rows
                        : (rows >= 0 && t->rows != rows) || t->cols != cols;
    if (bad)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has shape (%lld, %lld)", op, name,
                            (long long)t->rows, (long long)t->cols);
    return GSB_OK;
}

__global__ void edge_rows(const int64_t *indptr, int64_t n, const int32_t *indices,
                          int64_t nnz, int64_t m, int32_t *rows, int *bad)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int64_t lo = indptr[i], hi = indptr[i + 1];
    if ((i == 0 && lo != 0) || (i == n - 1 && hi != nnz) || hi < lo || lo < 0 || hi > nnz) {
        atomicExch(bad, 1);
        return;
    }
    for (int64_t e = lo; e < hi; e++) {
        if (indices[e] < 0 || indices[e] >= m)
            atomicExch(bad, 1);
        rows[e] = (int32_t)i;
    }
}

__global__ void edge_steps(float *head, const float *tail, int64_t m, int64_t dim,
                           const int32_t *rows, const int32_t *indices, const double *eps,
                           double *next_sample, double *next_negative, int64_t nnz,
                           gsb__umap_sgd p, float *steps)
{
    int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (e >= nnz)
        return;
    if (p.hogwild && !(next_sample[e] <= (double)p.epoch))
        return;
    const int64_t i = rows[e];
    float *step = steps + e * dim;
    gsb__umap_edge_step(head + i * dim, tail ? tail : head, m, dim, indices[e], e, eps[e],
                        &next_sample[e], &next_negative[e], &p, step);
    if (p.hogwild)
        for (int64_t d = 0; d < dim; d++)
            atomicAdd(&head[i * dim + d], step[d]);
}

__global__ void row_sums(float *head, const int64_t *indptr, int64_t n, int64_t dim,
                         const float *steps)
{
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= n * dim)
        return;
    const int64_t i = t / dim, d = t % dim;
    float s = 0.0f;
    for (int64_t e = indptr[i]; e < indptr[i + 1]; e++)
        s += steps[e * dim + d];
    head[t] += s;
}

unsigned blocks_for(int64_t work) { return (unsigned)((work + BLOCK - 1) / BLOCK); }

} // namespace

extern "C" int gsb__cuda_umap_sgd_epoch(const gsb__backend *be, gsb__tensor *head,
                                        const gsb__tensor *tail, const gsb__tensor *indptr,
                                        const gsb__tensor *indices,
                                        const gsb__tensor *epochs_per_sample,
                                        gsb__tensor *next_sample, gsb__tensor *next_negative,
                                        const gsb__umap_sgd *p)
{
    if (!p || !(p->negative_sample_rate >= 0.0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "umap_sgd_epoch: negative_sample_rate must be >= 0");
    const gsb__tensor *t = tail ? tail : head;
    PASS(check(be, head, GSB_F32, -1, head ? head->cols : 0, "head"));
    PASS(check(be, t, GSB_F32, -1, head->cols, "tail"));
    PASS(check(be, indptr, GSB_I64, head->rows + 1, -1, "indptr"));
    const int64_t nnz = indices ? indices->rows * indices->cols : 0;
    PASS(check(be, indices, GSB_I32, nnz, -1, "indices"));
    PASS(check(be, epochs_per_sample, GSB_F64, nnz, -1, "epochs_per_sample"));
    PASS(check(be, next_sample, GSB_F64, nnz, -1, "next_sample"));
    PASS(check(be, next_negative, GSB_F64, nnz, -1, "next_negative"));
    const int64_t n = head->rows, dim = head->cols, m = t->rows;
    if (n == 0 || nnz == 0 || dim == 0)
        return GSB_OK;
    if (nnz > INT32_MAX || n > INT32_MAX)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "umap_sgd_epoch: %lld edges of %lld rows: at "
                            "most 2^31 - 1 each", (long long)nnz, (long long)n);

    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    const size_t rows_bytes = ((size_t)nnz * sizeof(int32_t) + 255) & ~(size_t)255;
    char *buf = NULL;
    int bad = 0;
    int rc = GSB_OK;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, rows_bytes + (size_t)(nnz * dim) * sizeof(float) +
                                           sizeof(int), (void **)&buf));
    {
        int32_t *rows = (int32_t *)buf;
        float *steps = (float *)(buf + rows_bytes);
        int *flag = (int *)(steps + nnz * dim);
        const bool verify = !p->edges_checked;
        CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), ctx->stream));
        edge_rows<<<blocks_for(n), BLOCK, 0, ctx->stream>>>(
            (const int64_t *)indptr->data, n, (const int32_t *)indices->data, nnz, m, rows,
            flag);
        CUDA_CHECK(cudaGetLastError());
        if (verify) {
            CUDA_CHECK(cudaMemcpyAsync(&bad, flag, sizeof bad, cudaMemcpyDeviceToHost,
                                       ctx->stream));
            CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        }
        if (bad) {
            rc = GSB_CUDA_ERR(GSB_EINTERNAL, "umap_sgd_epoch: malformed edges (indptr not "
                              "from 0 to %lld, or an index outside [0, %lld))",
                              (long long)nnz, (long long)m);
            goto done;
        }
        edge_steps<<<blocks_for(nnz), BLOCK, 0, ctx->stream>>>(
            (float *)head->data, tail ? (const float *)tail->data : NULL, m, dim, rows,
            (const int32_t *)indices->data, (const double *)epochs_per_sample->data,
            (double *)next_sample->data, (double *)next_negative->data, nnz, *p, steps);
        CUDA_CHECK(cudaGetLastError());
        if (!p->hogwild) {
            row_sums<<<blocks_for(n * dim), BLOCK, 0, ctx->stream>>>(
                (float *)head->data, (const int64_t *)indptr->data, n, dim, steps);
            CUDA_CHECK(cudaGetLastError());
        }
    }
done:
    if (buf)
        gsb__cuda_free(be, buf);
    return rc;
}
