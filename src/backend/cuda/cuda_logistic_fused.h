/*
 * cuda_logistic_fused.h - logistic_loss_grad in one pass over X
 * (cuda_logistic_fused.cu), for the shapes its register tiles hold; the op
 * (cuda_family.cu) falls back to its blocked GEMMs for the others.
 */
#ifndef GSB_CUDA_LOGISTIC_FUSED_H
#define GSB_CUDA_LOGISTIC_FUSED_H

#include <stdint.h>

#include "backend/cuda/cuda_common.h"

/* Whether the one-pass kernel takes d features and K coefficient rows. */
bool gsb__cuda_logistic_fused_fits(int64_t d, int64_t K);

/*
 * Queue on be's stream: *loss = sum_i w_i loss_i and gacc (K x p, p = d +
 * fit_intercept, device) = the gradient, as the op defines them, reading
 * each row of X (n x d, float32 or float64, n >= 1) once; coef (K x p,
 * device, double).  w (n, float32 or float64 by w_f64) may be NULL.  A class
 * index outside [0, K == 1 ? 2 : K) lowers *bad (device) to its row, and the
 * row adds nothing.  loss, gacc and bad are device memory; nothing waits.
 */
int gsb__cuda_logistic_fused(const gsb__backend *be, bool f32, const void *X, int64_t n,
                             int64_t d, const int32_t *y, const void *w, bool w_f64,
                             const double *coef, int64_t K, int fit_intercept, double *gacc,
                             double *loss, unsigned long long *bad);

#endif
