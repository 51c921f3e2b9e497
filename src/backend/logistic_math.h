/*
 * logistic_math.h - the log-loss's scalar functions, written once for the
 * CPU twin (cpu/cpu_family.c) and the GPU (cuda/cuda_family.cu's blocked
 * path of logistic_loss_grad, cuda/cuda_logistic_fused.cu's one-pass
 * kernel), so both take the same forms.
 */
#ifndef GSB_BACKEND_LOGISTIC_MATH_H
#define GSB_BACKEND_LOGISTIC_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define GSB__LOGI_FN static __host__ __device__ inline
#else
#define GSB__LOGI_FN static inline
#endif

/* log(1 + exp(t)) without overflow or loss of precision for large |t| */
GSB__LOGI_FN double gsb__log1pexp(double t)
{
    return t > 0.0 ? t + log1p(exp(-t)) : log1p(exp(t));
}

/* 1 / (1 + exp(-t)) without overflow */
GSB__LOGI_FN double gsb__sigmoid(double t)
{
    if (t >= 0.0)
        return 1.0 / (1.0 + exp(-t));
    double e = exp(t);
    return e / (1.0 + e);
}

#endif
