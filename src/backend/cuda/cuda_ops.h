/*
 * cuda_ops.h - the CUDA backend's op implementations.  Each op is documented
 * in backend/backend.h; the table that binds them is in cuda_backend.cu.
 *   cuda_backend.cu   open, device memory pool, pinned staging, memory ops, table
 *   cuda_linalg.cu    gemm, syrk, eigh, posv, svd, lstsq, orthonormalize (cuBLAS/cuSOLVER)
 *   cuda_reduce.cu    col_moments, col_minmax, row_sqnorms, col_affine, clip, rand_normal
 *   cuda_distance.cu  pairwise, argmin_sqdist, topk (fused kernels)
 *   cuda_segment_sum.cu segment_sum (chunked in shared memory, or sorted by label; fixed order)
 *   cuda_topk.cu      topk, topk_fast (fused kernel; large shapes go to ...)
 *   cuda_topk_gemm.cu ... GEMM tiles + selection; topk_fast's TF32 GEMM
 *   cuda_family.cu    logistic_loss_grad, kernel
 *   cuda_kmeanspp.cu  kmeanspp (greedy k-means++, no host wait inside a call)
 *   cuda_enet.cu      enet_cd_gram (coordinate descent in one launch), gather_cols
 *   cuda_tsne.cu      tsne_attract, tsne_repulse_exact, tsne_update
 *   cuda_tsne_fft.cu  tsne_repulse_fft (FIt-SNE with cuFFT); no tsne_repulse_bh
 *   cuda_forest.cu    forest_bin, forest_hist, forest_hist_sub, forest_split,
 *                     forest_partition, forest_predict (random forests)
 *   cuda_forest_level.cu  forest_level_feats, forest_level_decide,
 *                     forest_level_partition (breadth-first forest growth)
 *   cuda_radius.cu    radius_neighbors (eps-neighbourhoods as CSR: grid scan, tiles)
 *   cuda_svm.cu       svm_select, svm_kernel_rows, svm_inner, svm_update_f (the
 *                     two-level SMO: radix-sort selection, GEMM rows, one-block SMO)
 *   cuda_umap.cu      umap_sgd_epoch (UMAP's layout SGD, one thread per edge)
 *   cuda_stream.cu    axpy, row_scale, stage_* (the streaming ring on a copy stream),
 *                     strided_copy
 *   cuda_sparse.cu    csr_spmm (sparse times dense, a warp per row)
 *   cuda_vecnorm.cu   vec_normalize (two passes, no host wait)
 *   cuda_segvec.cu    seg_dots, seg_combine, seg_normalize (segmented vectors)
 *   cuda_devarray.cu  device_import, device_export (callers' device memory)
 *   cuda_copy.cu      (upload/download's engine) copy_stats
 * Device errors become gsb statuses through cuda_common.h; no op uses
 * managed memory; float32 stays float32 (no TF32 unless GSB_ALLOW_TF32=1).
 */
#ifndef GSB_CUDA_OPS_H
#define GSB_CUDA_OPS_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int gsb__cuda_gemm(const gsb__backend *be, int trans_a, int trans_b, double alpha,
                   const gsb__tensor *A, const gsb__tensor *B, double beta, gsb__tensor *C);
int gsb__cuda_syrk(const gsb__backend *be, double alpha, const gsb__tensor *A, double beta,
                   gsb__tensor *C);
int gsb__cuda_eigh(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *w,
                   gsb__tensor *V);
int gsb__cuda_posv(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *B);
int gsb__cuda_svd(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *U, gsb__tensor *S,
                  gsb__tensor *Vt);
int gsb__cuda_lstsq(const gsb__backend *be, const gsb__tensor *A, const gsb__tensor *B,
                    double rcond, gsb__tensor *X, gsb__tensor *S, int64_t *rank);
int gsb__cuda_orthonormalize(const gsb__backend *be, gsb__tensor *A);

int gsb__cuda_col_moments(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *w,
                          gsb__tensor *mean, gsb__tensor *var);
int gsb__cuda_col_minmax(const gsb__backend *be, const gsb__tensor *X, gsb__tensor *min,
                         gsb__tensor *max);
int gsb__cuda_row_sqnorms(const gsb__backend *be, const gsb__tensor *X, gsb__tensor *out);
int gsb__cuda_col_affine(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *sub,
                         const gsb__tensor *mul, const gsb__tensor *add, gsb__tensor *out);
int gsb__cuda_clip(const gsb__backend *be, gsb__tensor *X, double lo, double hi);
int gsb__cuda_rand_normal(const gsb__backend *be, gsb__tensor *t, uint64_t seed);

/* cuda_check.cu */
int gsb__cuda_nonfinite(const gsb__backend *be, const gsb__tensor *t, int *out);
int gsb__cuda_mem_info(const gsb__backend *be, size_t *free_bytes, size_t *total_bytes);
int gsb__cuda_sync(const gsb__backend *be);

int gsb__cuda_pairwise(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y,
                       gsb__metric metric, gsb__tensor *D);
int gsb__cuda_argmin_sqdist(const gsb__backend *be, const gsb__tensor *X,
                            const gsb__tensor *C, gsb__tensor *labels, gsb__tensor *mind);
int gsb__cuda_topk(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R,
                   int64_t k, gsb__metric metric, int exclude_self, gsb__tensor *dist,
                   gsb__tensor *idx);
int gsb__cuda_segment_sum(const gsb__backend *be, const gsb__tensor *X,
                          const gsb__tensor *labels, const gsb__tensor *w, gsb__tensor *sums,
                          gsb__tensor *counts);

int gsb__cuda_kmeanspp(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *w,
                       int64_t first, const double *u, int64_t steps, int64_t trials,
                       gsb__tensor *closest, double *pot, int64_t *chosen);

int gsb__cuda_forest_level_feats(const gsb__backend *be, const gsb__forest_data *d,
                                 const gsb__forest_level *lv, const gsb__forest_grow_rule *rule,
                                 int pass, gsb__tensor *map, gsb__tensor *seg, gsb__tensor *feats);
int gsb__cuda_forest_level_decide(const gsb__backend *be, const gsb__forest_data *d,
                                  const gsb__forest_level *lv, const gsb__forest_grow_rule *rule);
int gsb__cuda_forest_level_partition(const gsb__backend *be, const gsb__forest_data *d,
                                     const gsb__forest_level *lv);
int gsb__cuda_radius_neighbors(const gsb__backend *be, const gsb__tensor *Q,
                               const gsb__tensor *R, const gsb__radius_grid *grid,
                               gsb__metric metric, double p, double eps, gsb__tensor *counts,
                               const gsb__tensor *offsets, gsb__tensor *idx, gsb__tensor *dist);
int gsb__cuda_svm_select(const gsb__backend *be, const gsb__svm_state *s,
                         const gsb__tensor *exclude, int64_t k_up, int64_t k_total,
                         int32_t *sel, int64_t *n_up, int64_t *n_low, double *gap);
int gsb__cuda_svm_kernel_rows(const gsb__backend *be, const gsb__tensor *X,
                              const gsb__tensor *rows, const gsb__tensor *slots, int kind,
                              double gamma, double coef0, int degree, gsb__tensor *cache);
int gsb__cuda_svm_inner(const gsb__backend *be, const gsb__svm_state *s, const gsb__tensor *ws,
                        const gsb__tensor *slots, double eps, int64_t max_steps,
                        gsb__tensor *coef, gsb__tensor *stats);
int gsb__cuda_svm_update_f(const gsb__backend *be, const gsb__svm_state *s,
                           const gsb__tensor *slots, const gsb__tensor *coef);

int gsb__cuda_logistic_loss_grad(const gsb__backend *be, const gsb__tensor *X,
                                 const gsb__tensor *y, const gsb__tensor *w,
                                 const gsb__tensor *coef, int fit_intercept, double *loss,
                                 gsb__tensor *grad);
int gsb__cuda_kernel(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y,
                     int kind, double gamma, double coef0, int degree, gsb__tensor *K);

int gsb__cuda_enet_cd_gram(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *q,
                           const double *y_norm2, const gsb__enet_cd_params *cd, gsb__tensor *W,
                           double *gap, int64_t *n_iter);
int gsb__cuda_gather_cols(const gsb__backend *be, const gsb__tensor *X, const int64_t *idx,
                          int64_t m, gsb__tensor *out);
int gsb__cuda_tsne_repulse_exact(const gsb__backend *be, const gsb__tensor *Y, int dof,
                                 gsb__tensor *R, gsb__tensor *zsum);
int gsb__cuda_tsne_repulse_fft(const gsb__backend *be, const gsb__tensor *Y, int n_interp,
                               int min_boxes, gsb__tensor *R, gsb__tensor *zsum);
int gsb__cuda_tsne_attract(const gsb__backend *be, const gsb__tensor *Y,
                           const gsb__tensor *indptr, const gsb__tensor *indices,
                           const gsb__tensor *val, double scale, int dof,
                           const gsb__tensor *zsum, double floor, gsb__tensor *A, double *kl);
int gsb__cuda_tsne_update(const gsb__backend *be, gsb__tensor *Y, const gsb__tensor *A,
                          const gsb__tensor *R, const gsb__tensor *zsum, double c,
                          double momentum, double learning_rate, double min_gain,
                          gsb__tensor *update, gsb__tensor *gains, double *grad_norm);
int gsb__cuda_forest_bin(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *edges,
                         int nan_code, gsb__tensor *codes);
int gsb__cuda_forest_hist(const gsb__backend *be, const gsb__forest_data *d,
                          const gsb__tensor *nodes, const gsb__tensor *feats);
int gsb__cuda_forest_hist_sub(const gsb__backend *be, const gsb__forest_data *d,
                              const gsb__tensor *pairs);
int gsb__cuda_forest_split(const gsb__backend *be, const gsb__forest_data *d,
                           const gsb__tensor *nodes, const gsb__tensor *feats,
                           const gsb__forest_rule *rule, gsb__tensor *best);
int gsb__cuda_forest_partition(const gsb__backend *be, const gsb__forest_data *d,
                               const gsb__tensor *nodes, const gsb__tensor *splits,
                               gsb__tensor *n_left);
int gsb__cuda_forest_predict(const gsb__backend *be, const gsb__tensor *X,
                             const gsb__forest_trees *t, gsb__tensor *mean,
                             gsb__tensor *best, gsb__tensor *leaves);
struct gsb__umap_sgd;
int gsb__cuda_umap_sgd_epoch(const gsb__backend *be, gsb__tensor *head, const gsb__tensor *tail,
                             const gsb__tensor *indptr, const gsb__tensor *indices,
                             const gsb__tensor *epochs_per_sample, gsb__tensor *next_sample,
                             gsb__tensor *next_negative, const struct gsb__umap_sgd *p);

int gsb__cuda_axpy(const gsb__backend *be, double alpha, const gsb__tensor *x, gsb__tensor *y);
int gsb__cuda_row_scale(const gsb__backend *be, gsb__tensor *X, const gsb__tensor *s);
int gsb__cuda_stage_open(const gsb__backend *be, size_t bytes, int nbuf, gsb__stage **out);
int gsb__cuda_stage_fill(const gsb__backend *be, gsb__stage *st, int k, const gsb__stage_seg *segs,
                         int nseg);
int gsb__cuda_stage_acquire(const gsb__backend *be, gsb__stage *st, int k, void **dev);
int gsb__cuda_stage_release(const gsb__backend *be, gsb__stage *st, int k);
void gsb__cuda_stage_close(const gsb__backend *be, gsb__stage *st);
int gsb__cuda_strided_copy(const gsb__backend *be, const void *src, gsb_dtype dtype, int64_t s0,
                           int64_t s1, gsb__tensor *dst);
int gsb__cuda_csr_spmm(const gsb__backend *be, const gsb__tensor *indptr,
                       const gsb__tensor *indices, const gsb__tensor *val, const gsb__tensor *X,
                       gsb__tensor *Y);
int gsb__cuda_vec_normalize(const gsb__backend *be, const gsb__tensor *x, gsb__tensor *y,
                            gsb__tensor *nrm);
int gsb__cuda_seg_dots(const gsb__backend *be, const gsb__tensor *V, const gsb__tensor *x,
                       const gsb__tensor *seg, gsb__tensor *C);
int gsb__cuda_seg_combine(const gsb__backend *be, double alpha, const gsb__tensor *C,
                          const gsb__tensor *V, const gsb__tensor *seg, double beta,
                          gsb__tensor *Y);
int gsb__cuda_seg_normalize(const gsb__backend *be, const gsb__tensor *x,
                            const gsb__tensor *seg, gsb__tensor *y, gsb__tensor *nrm);
int gsb__cuda_device_import(const gsb__backend *be, const void *ptr, size_t bytes, int device_id,
                            void *stream);
int gsb__cuda_device_export(const gsb__backend *be, void *stream);
int gsb__cuda_copy_stats(const gsb__backend *be, gsb__copy_stats *out);
int gsb__cuda_topk_fast(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R,
                        int64_t k, gsb__metric metric, int exclude_self, gsb__tensor *dist,
                        gsb__tensor *idx);
/* cuda_topk_gemm.cu: topk's GEMM-tiled path (cuda_topk.cu dispatches to it) */
int gsb__cuda_topk_gemm_applies(int64_t nq, int64_t nr, int64_t d, gsb__metric metric,
                                int exact_f32);
/* Rhost: R's rows still on the host (R: the device buffer they go to, filled
 * as the search goes), or NULL */
int gsb__cuda_topk_gemm(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R,
                        const void *Rhost, int64_t k, gsb__metric metric, int exclude_self,
                        int tf32, gsb__tensor *dist, gsb__tensor *idx);

#ifdef __cplusplus
}
#endif
#endif
