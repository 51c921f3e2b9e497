/*
 * cuda_kernel_map.cuh - the SVM kernels' elementwise map on the device,
 * shared by the kernel op (cuda_family.cu) and the two-level SMO's kernel
 * rows (cuda_svm.cu): libsvm's kinds and powi, with explicit roundings (no
 * fused multiply-add) as the CPU twins compute them.
 */
#ifndef GSB_CUDA_KERNEL_MAP_CUH
#define GSB_CUDA_KERNEL_MAP_CUH

namespace {

enum { KER_LINEAR = 0, KER_POLY = 1, KER_RBF = 2, KER_SIGMOID = 3 };

struct KerParams {
    int kind;
    double gamma, coef0;
    int degree;
};

/* base^times by repeated squaring: libsvm's powi, as the CPU twin */
__device__ inline double ker_powi(double base, int times)
{
    double tmp = base, ret = 1.0;
    for (int t = times; t > 0; t /= 2) {
        if (t % 2 == 1)
            ret = __dmul_rn(ret, tmp);
        tmp = __dmul_rn(tmp, tmp);
    }
    return ret;
}

/* The kernel from v (x.y, or for rbf the squared distance); explicit
 * roundings (no fused multiply-add) as the CPU computes it. */
__device__ inline double ker_map(const KerParams &kp, double v)
{
    switch (kp.kind) {
    case KER_POLY: return ker_powi(__dadd_rn(__dmul_rn(kp.gamma, v), kp.coef0), kp.degree);
    case KER_RBF: return exp(__dmul_rn(-kp.gamma, v));
    case KER_SIGMOID: return tanh(__dadd_rn(__dmul_rn(kp.gamma, v), kp.coef0));
    default: return v;
    }
}

} /* namespace */

#endif
