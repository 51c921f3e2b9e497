/*
 * kernel_map.h - the SVM kernels' elementwise map (libsvm's kinds: linear,
 * poly, rbf, sigmoid; and its powi), written once for the CPU (the kernel op
 * in cpu/cpu_kernel.c, K(x, x) in estimators/svm/svm.c) and the GPU (the
 * kernel op in cuda/cuda_family.cu, the SMO's kernel rows in
 * cuda/cuda_svm.cu through cuda/cuda_kernel_map.cuh).  On the device every
 * product and sum is rounded on its own (nvcc would otherwise fuse them into
 * multiply-adds), as the host computes them.
 */
#ifndef GSB_BACKEND_KERNEL_MAP_H
#define GSB_BACKEND_KERNEL_MAP_H

#include <math.h>

#ifdef __CUDACC__
#define GSB__KER_FN static __host__ __device__ inline
#else
#define GSB__KER_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define GSB__KER_MUL(a, b) __dmul_rn((a), (b))
#define GSB__KER_ADD(a, b) __dadd_rn((a), (b))
#else
#define GSB__KER_MUL(a, b) ((a) * (b))
#define GSB__KER_ADD(a, b) ((a) + (b))
#endif

/* the kernel op's kind argument (backend.h) */
enum { GSB__KER_LINEAR = 0, GSB__KER_POLY = 1, GSB__KER_RBF = 2, GSB__KER_SIGMOID = 3 };

/* base^times by repeated squaring: libsvm's powi, so poly kernels round as
 * scikit-learn's do (pow() would differ in the last bits). */
GSB__KER_FN double gsb__ker_powi(double base, int times)
{
    double tmp = base, ret = 1.0;
    for (int t = times; t > 0; t /= 2) {
        if (t % 2 == 1)
            ret = GSB__KER_MUL(ret, tmp);
        tmp = GSB__KER_MUL(tmp, tmp);
    }
    return ret;
}

/* The kernel from v: the dot product x.y, or for rbf the squared distance. */
GSB__KER_FN double gsb__ker_map(int kind, double v, double gamma, double coef0, int degree)
{
    switch (kind) {
    case GSB__KER_POLY: return gsb__ker_powi(GSB__KER_ADD(GSB__KER_MUL(gamma, v), coef0), degree);
    case GSB__KER_RBF: return exp(GSB__KER_MUL(-gamma, v));
    case GSB__KER_SIGMOID: return tanh(GSB__KER_ADD(GSB__KER_MUL(gamma, v), coef0));
    default: return v;
    }
}

#endif
