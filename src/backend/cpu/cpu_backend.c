/*
 * cpu_backend.c - the CPU backend's memory ops and its ops table.
 *
 * CPU tensors are plain host memory (64-byte aligned for vector loads), so
 * upload/download are memcpy and gsb__tensor_to() on host data borrows it
 * without a copy.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/hostmem.h"
#include "core/error.h"
#include "core/tensor.h"

static int cpu_alloc(const gsb__backend *be, gsb__tensor *t)
{
    size_t bytes = gsb__tensor_nbytes(t);
    size_t rounded = (bytes + 63) / 64 * 64;
    t->data = gsb__host_alloc(rounded);
    if (!t->data)
        return gsb__err(GSB_ENOMEM, "out of host memory allocating %zu bytes", bytes);
    t->be = be;
    t->owned = 1;
    return GSB_OK;
}

static void cpu_release(const gsb__backend *be, gsb__tensor *t)
{
    (void)be;
    gsb__host_free(t->data);
    t->data = NULL;
}

static int cpu_upload(const gsb__backend *be, gsb__tensor *dst, const void *host)
{
    (void)be;
    if (dst->data != host)
        memcpy(dst->data, host, gsb__tensor_nbytes(dst));
    return GSB_OK;
}

static int cpu_download(const gsb__backend *be, const gsb__tensor *src, void *host)
{
    (void)be;
    if (src->data != host)
        memcpy(host, src->data, gsb__tensor_nbytes(src));
    return GSB_OK;
}

/* Large copies and fills on every core: a single thread reaches a fraction of
 * the memory bandwidth, and first touches of fresh pages fault in parallel. */
#define PAR_BLOCK ((size_t)4 << 20)

static void par_memcpy(void *dst, const void *src, size_t n)
{
    int64_t blocks = (int64_t)((n + PAR_BLOCK - 1) / PAR_BLOCK);
#pragma omp parallel for schedule(static) if (blocks > 2)
    for (int64_t b = 0; b < blocks; b++) {
        size_t off = (size_t)b * PAR_BLOCK;
        size_t len = n - off < PAR_BLOCK ? n - off : PAR_BLOCK;
        memcpy((char *)dst + off, (const char *)src + off, len);
    }
}

static void par_memset0(void *dst, size_t n)
{
    int64_t blocks = (int64_t)((n + PAR_BLOCK - 1) / PAR_BLOCK);
#pragma omp parallel for schedule(static) if (blocks > 2)
    for (int64_t b = 0; b < blocks; b++) {
        size_t off = (size_t)b * PAR_BLOCK;
        memset((char *)dst + off, 0, n - off < PAR_BLOCK ? n - off : PAR_BLOCK);
    }
}

static int cpu_copy(const gsb__backend *be, gsb__tensor *dst, const gsb__tensor *src)
{
    (void)be;
    int64_t n = gsb__tensor_numel(src);
    if (gsb__tensor_numel(dst) != n)
        return gsb__err(GSB_EINTERNAL, "copy: element counts differ");
    if (dst->dtype == src->dtype) {
        if (dst->data != src->data)
            par_memcpy(dst->data, src->data, gsb__tensor_nbytes(src));
        return GSB_OK;
    }
#pragma omp parallel for if (n > (1 << 18)) schedule(static)
    for (int64_t i = 0; i < n; i++)
        gsb__tensor_set(dst, i, gsb__tensor_get(src, i));
    return GSB_OK;
}

static int cpu_fill(const gsb__backend *be, gsb__tensor *t, double value)
{
    (void)be;
    int64_t n = gsb__tensor_numel(t);
    if (value == 0.0) {
        par_memset0(t->data, gsb__tensor_nbytes(t));
        return GSB_OK;
    }
#pragma omp parallel for if (n > (1 << 18)) schedule(static)
    for (int64_t i = 0; i < n; i++)
        gsb__tensor_set(t, i, value);
    return GSB_OK;
}

static const gsb__backend_ops cpu_ops = {
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .gemm = gsb__cpu_gemm,
    .syrk = gsb__cpu_syrk,
    .eigh = gsb__cpu_eigh,
    .posv = gsb__cpu_posv,
    .svd = gsb__cpu_svd,
    .lstsq = gsb__cpu_lstsq,
    .orthonormalize = gsb__cpu_orthonormalize,
    .col_moments = gsb__cpu_col_moments,
    .col_minmax = gsb__cpu_col_minmax,
    .row_sqnorms = gsb__cpu_row_sqnorms,
    .col_affine = gsb__cpu_col_affine,
    .clip = gsb__cpu_clip,
    .pairwise = gsb__cpu_pairwise,
    .argmin_sqdist = gsb__cpu_argmin_sqdist,
    .topk = gsb__cpu_topk,
    .segment_sum = gsb__cpu_segment_sum,
    .kmeanspp = gsb__cpu_kmeanspp,
    .logistic_loss_grad = gsb__cpu_logistic_loss_grad,
    .kernel = gsb__cpu_kernel,
    .enet_cd_gram = gsb__cpu_enet_cd_gram,
    .gather_cols = gsb__cpu_gather_cols,
    .tsne_repulse_exact = gsb__cpu_tsne_repulse_exact,
    .tsne_repulse_bh = gsb__cpu_tsne_repulse_bh,
    .tsne_repulse_fft = gsb__cpu_tsne_repulse_fft,
    .tsne_attract = gsb__cpu_tsne_attract,
    .tsne_update = gsb__cpu_tsne_update,
    .forest_bin = gsb__cpu_forest_bin,
    .forest_hist = gsb__cpu_forest_hist,
    .forest_hist_sub = gsb__cpu_forest_hist_sub,
    .forest_split = gsb__cpu_forest_split,
    .forest_partition = gsb__cpu_forest_partition,
    .forest_predict = gsb__cpu_forest_predict,
    .radius_neighbors = gsb__cpu_radius_neighbors,
    .svm_select = gsb__cpu_svm_select,
    .svm_kernel_rows = gsb__cpu_svm_kernel_rows,
    .svm_inner = gsb__cpu_svm_inner,
    .svm_update_f = gsb__cpu_svm_update_f,
    .umap_sgd_epoch = gsb__cpu_umap_sgd_epoch,
    .axpy = gsb__cpu_axpy,
    .row_scale = gsb__cpu_row_scale,
    .stage_open = gsb__cpu_stage_open,
    .stage_fill = gsb__cpu_stage_fill,
    .stage_acquire = gsb__cpu_stage_acquire,
    .stage_release = gsb__cpu_stage_release,
    .stage_close = gsb__cpu_stage_close,
    .strided_copy = gsb__cpu_strided_copy,
    .forest_level_feats = gsb__cpu_forest_level_feats,
    .forest_level_decide = gsb__cpu_forest_level_decide,
    .forest_level_partition = gsb__cpu_forest_level_partition,
    .csr_spmm = gsb__cpu_csr_spmm,
    .vec_normalize = gsb__cpu_vec_normalize,
    .topk_fast = gsb__cpu_topk, /* no faster approximation on the CPU */
    .seg_dots = gsb__cpu_seg_dots,
    .seg_combine = gsb__cpu_seg_combine,
    .seg_normalize = gsb__cpu_seg_normalize,
    .rand_normal = gsb__cpu_rand_normal,
    .copy_stats = gsb__cpu_copy_stats,
};

static const gsb__backend cpu_backend = {"cpu", &cpu_ops, NULL, NULL};

const gsb__backend *gsb__cpu_backend(void) { return &cpu_backend; }
