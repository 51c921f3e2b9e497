/*
 * svm_smo.h - the arithmetic of one SMO step of the two-level solver's inner
 * op (svm_inner), written once for the CPU twin (cpu_svm.c) and the CUDA
 * kernel (cuda_svm.cu): every sum and product is rounded on its own (the
 * device would otherwise fuse them into multiply-adds), so both backends take
 * the same steps bit for bit from the same inputs.
 *
 * In the scaled gradient f_t = y_t G_t (backend.h, gsb__svm_state), a step
 * moves the pair (i in I_up with the smallest f, j in I_low) by l:
 * alpha_i += l y_i, alpha_j -= l y_j (y^T alpha is kept), which changes f_k by
 * l (K_ik - K_jk); l is the unconstrained optimum (f_j - f_i) / (K_ii + K_jj -
 * 2 K_ij) clipped to both boxes (ThunderSVM's and cuML's form of libsvm's
 * update).  j minimises -(f_j - f_i)^2 / quad, libsvm's second-order rule.
 */
#ifndef GSB_BACKEND_SVM_SMO_H
#define GSB_BACKEND_SVM_SMO_H

#ifdef __CUDACC__
#define GSB_SVM_FN static __host__ __device__ inline
#else
#define GSB_SVM_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define GSB__SVM_ADD(a, b) __dadd_rn((a), (b))
#define GSB__SVM_SUB(a, b) __dsub_rn((a), (b))
#define GSB__SVM_MUL(a, b) __dmul_rn((a), (b))
#define GSB__SVM_DIV(a, b) __ddiv_rn((a), (b))
#else
#define GSB__SVM_ADD(a, b) ((a) + (b))
#define GSB__SVM_SUB(a, b) ((a) - (b))
#define GSB__SVM_MUL(a, b) ((a) * (b))
#define GSB__SVM_DIV(a, b) ((a) / (b))
#endif

/* libsvm's TAU: the curvature used where K_ii + K_jj - 2 K_ij <= 0 */
#define GSB__SVM_TAU 1e-12
/* the inner solve stops at this fraction of its first gap (or at eps) */
#define GSB__SVM_INNER_RATIO 0.1

GSB_SVM_FN int gsb__svm_in_up(int y, double a, double C) { return y > 0 ? a < C : a > 0; }
GSB_SVM_FN int gsb__svm_in_low(int y, double a, double C) { return y > 0 ? a > 0 : a < C; }

/* How far alpha may move: i (in I_up) by +l y_i, j (in I_low) by -l y_j. */
GSB_SVM_FN double gsb__svm_room_up(int y, double a, double C)
{
    return y > 0 ? GSB__SVM_SUB(C, a) : a;
}
GSB_SVM_FN double gsb__svm_room_low(int y, double a, double C)
{
    return y > 0 ? a : GSB__SVM_SUB(C, a);
}

GSB_SVM_FN double gsb__svm_quad(double kd_i, double kd_j, float k_ij)
{
    double q = GSB__SVM_SUB(GSB__SVM_ADD(kd_i, kd_j), GSB__SVM_MUL(2.0, (double)k_ij));
    return q > 0 ? q : GSB__SVM_TAU;
}

/* The second-order key of candidate j (f_j > f_i): smaller is better. */
GSB_SVM_FN double gsb__svm_j_key(double f_i, double kd_i, double f_j, double kd_j, float k_ij)
{
    double b = GSB__SVM_SUB(f_j, f_i);
    return GSB__SVM_DIV(-GSB__SVM_MUL(b, b), gsb__svm_quad(kd_i, kd_j, k_ij));
}

/* The step j allows: its room, or the unconstrained optimum if smaller. */
GSB_SVM_FN double gsb__svm_j_step(double f_i, double kd_i, double f_j, double kd_j, float k_ij,
                                  double room_j)
{
    double t = GSB__SVM_DIV(GSB__SVM_SUB(f_j, f_i), gsb__svm_quad(kd_i, kd_j, k_ij));
    return t < room_j ? t : room_j;
}

/* alpha_i after the step l (room_i: its room); exactly on the bound when l
 * reaches it. */
GSB_SVM_FN double gsb__svm_new_alpha_i(int y, double a, double C, double l, double room_i)
{
    if (l == room_i)
        return y > 0 ? C : 0.0;
    return y > 0 ? GSB__SVM_ADD(a, l) : GSB__SVM_SUB(a, l);
}
GSB_SVM_FN double gsb__svm_new_alpha_j(int y, double a, double C, double l, double room_j)
{
    if (l == room_j)
        return y > 0 ? 0.0 : C;
    return y > 0 ? GSB__SVM_SUB(a, l) : GSB__SVM_ADD(a, l);
}

/* f_k after the step: f_k + l (K_ik - K_jk) */
GSB_SVM_FN double gsb__svm_new_f(double f, double l, float k_ik, float k_jk)
{
    return GSB__SVM_ADD(f, GSB__SVM_MUL(l, GSB__SVM_SUB((double)k_ik, (double)k_jk)));
}

/* a term of svm_update_f: f + c K */
GSB_SVM_FN double gsb__svm_muladd(double f, double c, float k)
{
    return GSB__SVM_ADD(f, GSB__SVM_MUL(c, (double)k));
}

/* A -0.0 ranks as +0.0 (x + 0.0 is +0.0 for x = -0.0, x otherwise). */
GSB_SVM_FN double gsb__svm_rank_key(double x) { return GSB__SVM_ADD(x, 0.0); }

#endif
