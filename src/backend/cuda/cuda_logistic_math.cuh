/*
 * cuda_logistic_math.cuh - the log-loss's scalar functions on the GPU, in
 * the forms of the CPU twin (cpu_family.c): shared by logistic_loss_grad's
 * blocked path (cuda_family.cu) and its one-pass kernel
 * (cuda_logistic_fused.cu).
 */
#ifndef GSB_CUDA_LOGISTIC_MATH_CUH
#define GSB_CUDA_LOGISTIC_MATH_CUH

/* log(1 + exp(t)) without overflow or loss of precision for large |t| */
__device__ inline double gsb__log1pexp(double t)
{
    return t > 0.0 ? t + log1p(exp(-t)) : log1p(exp(t));
}

/* 1 / (1 + exp(-t)) without overflow */
__device__ inline double gsb__sigmoid(double t)
{
    if (t >= 0.0)
        return 1.0 / (1.0 + exp(-t));
    double e = exp(t);
    return e / (1.0 + e);
}

#endif
