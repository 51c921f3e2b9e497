/*
 * cuda_kernel_map.cuh - the SVM kernel's parameters as the device kernels
 * of the kernel op (cuda_family.cu) and the two-level SMO's kernel rows
 * (cuda_svm.cu) take them, and their elementwise map (backend/kernel_map.h,
 * the CPU twins' own).
 */
#ifndef GSB_CUDA_KERNEL_MAP_CUH
#define GSB_CUDA_KERNEL_MAP_CUH

#include "backend/kernel_map.h"

namespace {

struct KerParams {
    int kind;
    double gamma, coef0;
    int degree;
};

/* The kernel from v (x.y, or for rbf the squared distance), as the CPU computes it. */
__device__ inline double ker_map(const KerParams &kp, double v)
{
    return gsb__ker_map(kp.kind, v, kp.gamma, kp.coef0, kp.degree);
}

} /* namespace */

#endif
