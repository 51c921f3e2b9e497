/*
 * cuda_argmin_tc.h - argmin_sqdist for float32 on tensor cores
 * (cuda_argmin_tc.cu), called by cuda_distance.cu's argmin_sqdist, and the
 * switch that topk's tensor-core tile (cuda_topk.cu) also obeys.
 */
#ifndef GSB_CUDA_ARGMIN_TC_H
#define GSB_CUDA_ARGMIN_TC_H

#include <stdint.h>

#include "backend/backend.h"

/* GSB_DISTANCE_KERNEL=old in the environment: the fused distance ops keep
 * their previous (fp32 FMA tile engine) kernels, for comparison and as a
 * fallback; read at every call. */
int gsb__cuda_distance_kernel_old(void);

/* The tensor-core kernels (argmin_sqdist, topk) apply: compute capability
 * 8.0 or newer, and not switched off by GSB_DISTANCE_KERNEL=old. */
int gsb__cuda_tc_usable(const gsb__backend *be);

/* labels / mind of the n rows of X (n x d) against the k centres C (k x d),
 * all device memory; the argmin_sqdist contract (backend.h) with the
 * winner guaranteed as described in cuda_argmin_tc.cu. */
int gsb__cuda_argmin_tc(const gsb__backend *be, const float *X, int64_t n, const float *C,
                        int64_t k, int64_t d, int32_t *labels, float *mind);

#endif
