/*
 * cuda_topk_prune.h - float64 and float32 topk pruned through TF32: the
 * centred float32 copies that cuda_topk_gemm.cu's TF32 tiles read, their
 * range check and the admission slack they add (cuda_topk_prune.cu says why
 * it holds).  The float and double overloads mean the same.
 */
#ifndef GSB_CUDA_TOPK_PRUNE_H
#define GSB_CUDA_TOPK_PRUNE_H

#include <stdint.h>

#include "backend/backend.h"

/* Whether topk of this metric and dtype may prune through float32 copies
 * (euclidean family; GSB_TOPK_F64=exact turns it off for float64: DGEMM
 * tiles; GSB_TOPK_F32=exact for float32: the unpruned dispatch). */
int gsb__cuda_topk_prune_applies(gsb__metric metric, gsb_dtype dt = GSB_F64);

/* What the copies add to the relative admission slack at d columns. */
double gsb__cuda_topk_prune_slack(int64_t d);

/* The column sums of X (n x d, float64 or float32 on the device) into sum (d doubles),
 * on the backend's stream: the centre is sum / n (the queries' mean). */
int gsb__cuda_topk_prune_sums(const gsb__backend *be, const double *X, int64_t n, int64_t d,
                              double *sum);
int gsb__cuda_topk_prune_sums(const gsb__backend *be, const float *X, int64_t n, int64_t d,
                              double *sum);

/*
 * Rows X (n x d, float64 or float32 on the device) centred on sum / n_sum, on the
 * backend's stream: float32 copies xf (coordinates below 2^-60 in magnitude
 * stored as 0), the centred squared norms norm (double) and, where rb is not
 * NULL, the admission terms (1 - 1.5 slack) norm as float.  *bad is set
 * (device int) unless every row's centred squared norm is 0 or within
 * [2^-40, 2^100], the range where the slack holds; then the caller must rank
 * with the exact path instead.
 */
int gsb__cuda_topk_prune_rows(const gsb__backend *be, const double *X, int64_t n, int64_t d,
                              const double *sum, int64_t n_sum, float *xf, double *norm,
                              float *rb, double slack, int *bad);
int gsb__cuda_topk_prune_rows(const gsb__backend *be, const float *X, int64_t n, int64_t d,
                              const double *sum, int64_t n_sum, float *xf, double *norm,
                              float *rb, double slack, int *bad);

#endif
