/*
 * cpu_ops.h - the CPU backend's op implementations (OpenBLAS, LAPACKE,
 * OpenMP).  Each op is documented in backend/backend.h; the table that
 * binds them is in cpu_backend.c.  Files:
 *   cpu_backend.c   memory ops and the ops table
 *   cpu_threads.c   how many threads BLAS and LAPACK use
 *   cpu_blas_core.c which kernels OpenBLAS runs (its fallback corrected)
 *   cpu_linalg.c    gemm, syrk, eigh, posv, svd, lstsq, orthonormalize
 *   cpu_reduce.c    col_moments, col_minmax, row_sqnorms, col_affine, clip
 *   cpu_distance.c  pairwise, argmin_sqdist, topk; gsb__cpu_lloyd_step
 *   cpu_smalldots.c argmin_sqdist's tile for few centres (AVX2 + FMA)
 *   cpu_family.c    segment_sum, logistic_loss_grad
 *   cpu_kmeanspp.c  kmeanspp (greedy k-means++)
 *   cpu_kernel.c    kernel (the SVM kernels)
 *   cpu_enet.c      enet_cd_gram, gather_cols (coordinate descent)
 *   cpu_forest.c    forest_bin, forest_hist, forest_hist_sub, forest_split,
 *                   forest_partition, forest_predict (random forests)
 *   cpu_forest_level.c  forest_level_feats, forest_level_decide,
 *                   forest_level_partition (breadth-first forest growth)
 *   cpu_radius.c    radius_neighbors (eps-neighbourhoods as CSR)
 *   cpu_svm.c       svm_select, svm_kernel_rows, svm_inner, svm_update_f (the
 *                   two-level SMO of SVC/SVR)
 *   cpu_random.c    rand_normal
 *   cpu_tsne.c      tsne_attract, tsne_repulse_exact, tsne_update
 *   cpu_tsne_bh.c   tsne_repulse_bh (Barnes-Hut)
 *   cpu_tsne_fft.c  tsne_repulse_fft (FIt-SNE; its FFT is cpu_fft.c)
 *   cpu_umap.c      umap_sgd_epoch (UMAP's layout SGD)
 *   cpu_stream.c    axpy, row_scale, stage_* (the streaming ring), strided_copy,
 *                   copy_stats
 *   cpu_sparse.c    csr_spmm (sparse times dense)
 *   cpu_vecnorm.c   vec_normalize
 *   cpu_segvec.c    seg_dots, seg_combine, seg_normalize (segmented vectors)
 */
#ifndef GSB_CPU_OPS_H
#define GSB_CPU_OPS_H

#include "backend/backend.h"

/* Make BLAS single-threaded around OpenMP regions whose threads each call it
 * on their own tile (OpenBLAS's OpenMP build does so by itself; its pthreads
 * build: reference counted, restores the user's setting). cpu_threads.c. */
void gsb__cpu_blas_serial_begin(void);
void gsb__cpu_blas_serial_end(void);
/* Below this many flops a BLAS or LAPACK call, or a product the engine would
 * split over its threads, runs on one thread (cpu_threads.c says why). */
#define GSB__BLAS_SERIAL_FLOPS ((double)(1 << 24))
/* The same for a LAPACK routine, many BLAS calls in a row. */
#define GSB__LAPACK_SERIAL_FLOPS ((double)(1 << 30))
/* Around one BLAS or LAPACK call of `flops` outside parallel regions: small
 * ones run single-threaded.  Pass begin's token to end. */
int gsb__cpu_blas_call_begin(double flops);
int gsb__cpu_lapack_call_begin(double flops);
void gsb__cpu_blas_call_end(int token);
/* OpenBLAS's kernels chosen again when it fell back to Prescott on a CPU it
 * did not know (cpu_blas_core.c): the kernel set to switch to, or NULL, from
 * its current core name, $OPENBLAS_CORETYPE, $GSB_OPENBLAS_KEEP_CORE and the
 * set the CPU's features call for; and whether the switch happened. */
const char *gsb__cpu_blas_core_choice(const char *current, const char *user_coretype,
                                      const char *keep, const char *cpu_wants);
int gsb__cpu_blas_core_switched(void);

int gsb__cpu_gemm(const gsb__backend *be, int trans_a, int trans_b, double alpha,
                  const gsb__tensor *A, const gsb__tensor *B, double beta, gsb__tensor *C);
int gsb__cpu_syrk(const gsb__backend *be, double alpha, const gsb__tensor *A, double beta,
                  gsb__tensor *C);
int gsb__cpu_eigh(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *w, gsb__tensor *V);
int gsb__cpu_posv(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *B);
int gsb__cpu_svd(const gsb__backend *be, const gsb__tensor *A, gsb__tensor *U, gsb__tensor *S,
                 gsb__tensor *Vt);
int gsb__cpu_lstsq(const gsb__backend *be, const gsb__tensor *A, const gsb__tensor *B,
                   double rcond, gsb__tensor *X, gsb__tensor *S, int64_t *rank);
int gsb__cpu_orthonormalize(const gsb__backend *be, gsb__tensor *A);

int gsb__cpu_col_moments(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *w,
                         gsb__tensor *mean, gsb__tensor *var);
int gsb__cpu_col_minmax(const gsb__backend *be, const gsb__tensor *X, gsb__tensor *min,
                        gsb__tensor *max);
int gsb__cpu_row_sqnorms(const gsb__backend *be, const gsb__tensor *X, gsb__tensor *out);
int gsb__cpu_col_affine(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *sub,
                        const gsb__tensor *mul, const gsb__tensor *add, gsb__tensor *out);
int gsb__cpu_clip(const gsb__backend *be, gsb__tensor *X, double lo, double hi);

int gsb__cpu_pairwise(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y,
                      gsb__metric metric, gsb__tensor *D);
int gsb__cpu_argmin_sqdist(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *C,
                           gsb__tensor *labels, gsb__tensor *mind);
/*
 * One Lloyd iteration in one pass over X (not an op; kmeans.c calls it on
 * the CPU backend): argmin_sqdist's labels and mind, bit for bit, plus
 * segment_sum's weighted sums (k x d, float64) and counts (k, float64) of
 * those labels and *wdist = sum_i w_i mind_i (w NULL: unit weights).
 */
int gsb__cpu_lloyd_step(const gsb__tensor *X, const gsb__tensor *C, const gsb__tensor *w,
                        gsb__tensor *labels, gsb__tensor *mind, gsb__tensor *sums,
                        gsb__tensor *counts, double *wdist);
int gsb__cpu_topk(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R, int64_t k,
                  gsb__metric metric, int exclude_self, gsb__tensor *dist, gsb__tensor *idx);

/*
 * segment_sum's chunks of rows for n x d data and k segments: chunk c is
 * rows [n c / nch, n (c + 1) / nch), summed in row order into its own
 * partial, the partials added in chunk order; with one chunk, every sum is
 * over all rows in row order.  gsb__cpu_lloyd_step sums in the same chunks,
 * so its centres are segment_sum's bit for bit.
 */
int64_t gsb__cpu_segment_chunks(int64_t n, int64_t d, int64_t k);
/* segment_sum's pieces, which gsb__cpu_lloyd_step calls so that its sums stay
 * segment_sum's: acc (k x d) += w_i x_i and cnt (k) += w_i over rows [i0, i1)
 * in row order; out[e] = the partials part[c stride + e] added in chunk order. */
void gsb__cpu_segment_rows_f32(const float *X, int64_t d, const int32_t *lab,
                               const gsb__tensor *w, int64_t i0, int64_t i1, double *acc,
                               double *cnt);
void gsb__cpu_segment_rows_f64(const double *X, int64_t d, const int32_t *lab,
                               const gsb__tensor *w, int64_t i0, int64_t i1, double *acc,
                               double *cnt);
void gsb__cpu_segment_reduce(const double *part, int64_t nch, int64_t stride, int64_t count,
                             double *out);
int gsb__cpu_segment_sum(const gsb__backend *be, const gsb__tensor *X,
                         const gsb__tensor *labels, const gsb__tensor *w, gsb__tensor *sums,
                         gsb__tensor *counts);
/* Most bytes of kmeanspp's kept trial columns (cpu_kmeanspp.c); tests set 0
 * to run its fold over X. */
extern int64_t gsb__cpu_kpp_keep_bytes;
int gsb__cpu_kmeanspp(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *w,
                      int64_t first, const double *u, int64_t steps, int64_t trials,
                      gsb__tensor *closest, double *pot, int64_t *chosen);
int gsb__cpu_logistic_loss_grad(const gsb__backend *be, const gsb__tensor *X,
                                const gsb__tensor *y, const gsb__tensor *w,
                                const gsb__tensor *coef, int fit_intercept, double *loss,
                                gsb__tensor *grad);
int gsb__cpu_kernel(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *Y, int kind,
                    double gamma, double coef0, int degree, gsb__tensor *K);

int gsb__cpu_enet_cd_gram(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *q,
                          const double *y_norm2, const gsb__enet_cd_params *cd, gsb__tensor *W,
                          double *gap, int64_t *n_iter);
int gsb__cpu_gather_cols(const gsb__backend *be, const gsb__tensor *X, const int64_t *idx,
                         int64_t m, gsb__tensor *out);
int gsb__cpu_tsne_repulse_exact(const gsb__backend *be, const gsb__tensor *Y, int dof,
                                gsb__tensor *R, gsb__tensor *zsum);
int gsb__cpu_tsne_repulse_bh(const gsb__backend *be, const gsb__tensor *Y, int dof, double angle,
                             gsb__tensor *R, gsb__tensor *zsum);
int gsb__cpu_tsne_repulse_fft(const gsb__backend *be, const gsb__tensor *Y, int n_interp,
                              int min_boxes, gsb__tensor *R, gsb__tensor *zsum);
int gsb__cpu_tsne_attract(const gsb__backend *be, const gsb__tensor *Y,
                          const gsb__tensor *indptr, const gsb__tensor *indices,
                          const gsb__tensor *val, double scale, int dof,
                          const gsb__tensor *zsum, double floor, gsb__tensor *A, double *kl);
int gsb__cpu_tsne_update(const gsb__backend *be, gsb__tensor *Y, const gsb__tensor *A,
                         const gsb__tensor *R, const gsb__tensor *zsum, double c,
                         double momentum, double learning_rate, double min_gain,
                         gsb__tensor *update, gsb__tensor *gains, double *grad_norm);
int gsb__cpu_forest_bin(const gsb__backend *be, const gsb__tensor *X, const gsb__tensor *edges,
                        int nan_code, gsb__tensor *codes);
int gsb__cpu_forest_hist(const gsb__backend *be, const gsb__forest_data *d,
                         const gsb__tensor *nodes, const gsb__tensor *feats);
int gsb__cpu_forest_hist_sub(const gsb__backend *be, const gsb__forest_data *d,
                             const gsb__tensor *pairs);
int gsb__cpu_forest_split(const gsb__backend *be, const gsb__forest_data *d,
                          const gsb__tensor *nodes, const gsb__tensor *feats,
                          const gsb__forest_rule *rule, gsb__tensor *best);
int gsb__cpu_forest_partition(const gsb__backend *be, const gsb__forest_data *d,
                              const gsb__tensor *nodes, const gsb__tensor *splits,
                              gsb__tensor *n_left);
int gsb__cpu_forest_predict(const gsb__backend *be, const gsb__tensor *X,
                            const gsb__forest_trees *t, gsb__tensor *mean,
                            gsb__tensor *best, gsb__tensor *leaves);
int gsb__cpu_forest_level_feats(const gsb__backend *be, const gsb__forest_data *d,
                                const gsb__forest_level *lv, const gsb__forest_grow_rule *rule,
                                int pass, gsb__tensor *map, gsb__tensor *seg, gsb__tensor *feats);
int gsb__cpu_forest_level_decide(const gsb__backend *be, const gsb__forest_data *d,
                                 const gsb__forest_level *lv, const gsb__forest_grow_rule *rule);
int gsb__cpu_forest_level_partition(const gsb__backend *be, const gsb__forest_data *d,
                                    const gsb__forest_level *lv);
int gsb__cpu_radius_neighbors(const gsb__backend *be, const gsb__tensor *Q, const gsb__tensor *R,
                              const gsb__radius_grid *grid, gsb__metric metric, double p,
                              double eps, gsb__tensor *counts, const gsb__tensor *offsets,
                              gsb__tensor *idx, gsb__tensor *dist);
int gsb__cpu_svm_select(const gsb__backend *be, const gsb__svm_state *s,
                        const gsb__tensor *exclude, int64_t k_up, int64_t k_total, int32_t *sel,
                        int64_t *n_up, int64_t *n_low, double *gap);
int gsb__cpu_svm_kernel_rows(const gsb__backend *be, const gsb__tensor *X,
                             const gsb__tensor *rows, const gsb__tensor *slots, int kind,
                             double gamma, double coef0, int degree, gsb__tensor *cache);
int gsb__cpu_svm_inner(const gsb__backend *be, const gsb__svm_state *s, const gsb__tensor *ws,
                       const gsb__tensor *slots, double eps, int64_t max_steps,
                       gsb__tensor *coef, gsb__tensor *stats);
int gsb__cpu_svm_update_f(const gsb__backend *be, const gsb__svm_state *s,
                          const gsb__tensor *slots, const gsb__tensor *coef);
struct gsb__umap_sgd;
int gsb__cpu_umap_sgd_epoch(const gsb__backend *be, gsb__tensor *head, const gsb__tensor *tail,
                            const gsb__tensor *indptr, const gsb__tensor *indices,
                            const gsb__tensor *epochs_per_sample, gsb__tensor *next_sample,
                            gsb__tensor *next_negative, const struct gsb__umap_sgd *p);

int gsb__cpu_rand_normal(const gsb__backend *be, gsb__tensor *t, uint64_t seed);

int gsb__cpu_axpy(const gsb__backend *be, double alpha, const gsb__tensor *x, gsb__tensor *y);
int gsb__cpu_row_scale(const gsb__backend *be, gsb__tensor *X, const gsb__tensor *s);
int gsb__cpu_stage_open(const gsb__backend *be, size_t bytes, int nbuf, gsb__stage **out);
int gsb__cpu_stage_fill(const gsb__backend *be, gsb__stage *st, int k, const gsb__stage_seg *segs,
                        int nseg);
int gsb__cpu_stage_acquire(const gsb__backend *be, gsb__stage *st, int k, void **dev);
int gsb__cpu_stage_release(const gsb__backend *be, gsb__stage *st, int k);
void gsb__cpu_stage_close(const gsb__backend *be, gsb__stage *st);
int gsb__cpu_copy_stats(const gsb__backend *be, gsb__copy_stats *out);
int gsb__cpu_strided_copy(const gsb__backend *be, const void *src, gsb_dtype dtype, int64_t s0,
                          int64_t s1, gsb__tensor *dst);
int gsb__cpu_csr_spmm(const gsb__backend *be, const gsb__tensor *indptr,
                      const gsb__tensor *indices, const gsb__tensor *val, const gsb__tensor *X,
                      gsb__tensor *Y);
int gsb__cpu_vec_normalize(const gsb__backend *be, const gsb__tensor *x, gsb__tensor *y,
                           gsb__tensor *nrm);
int gsb__cpu_seg_dots(const gsb__backend *be, const gsb__tensor *V, const gsb__tensor *x,
                      const gsb__tensor *seg, gsb__tensor *C);
int gsb__cpu_seg_combine(const gsb__backend *be, double alpha, const gsb__tensor *C,
                         const gsb__tensor *V, const gsb__tensor *seg, double beta,
                         gsb__tensor *Y);
int gsb__cpu_seg_normalize(const gsb__backend *be, const gsb__tensor *x, const gsb__tensor *seg,
                           gsb__tensor *y, gsb__tensor *nrm);

#endif
