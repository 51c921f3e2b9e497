/*
 * cd_rule.h - the arithmetic of scikit-learn's elastic-net coordinate descent
 * that the host solver (coordinate_descent.c) and the CUDA kernel
 * (backend/cuda/cuda_enet.cu) must share exactly: the coordinate update, the
 * duality gap from its sums, the gap-safe screening test and the random
 * coordinate stream.  Header only, C and CUDA alike (the plugin links no
 * libgsb code, so it can only share inline functions).
 *
 * The problem (sklearn/linear_model/_cd_fast.pyx):
 *     P(w) = 1/2 ||y - X w||^2 + alpha ||w||_1 + beta/2 ||w||^2
 * with the gap of its "formulation A" dual for alpha > 0, "formulation B"
 * for alpha == 0 < beta and ||X^T R||^2 (the OLS first-order condition) for
 * alpha == beta == 0.
 */
#ifndef GSB_SOLVERS_CD_RULE_H
#define GSB_SOLVERS_CD_RULE_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GSB__CD_FN static inline __host__ __device__
#else
#define GSB__CD_FN static inline
#endif

/*
 * The new w_j from tmp = X_j' (R + w_j X_j) (Gram form: q_j - (Qw)_j +
 * w_j Q_jj): the soft threshold sign(tmp) max(|tmp| - alpha, 0) / denom,
 * denom = ||X_j||^2 + beta, or 0 when positive and tmp < 0.
 */
GSB__CD_FN double gsb__cd_update(double tmp, double alpha, double denom, int positive)
{
    if (positive && tmp < 0)
        return 0.0;
    double s = tmp > 0 ? 1.0 : tmp < 0 ? -1.0 : 0.0;
    return s * fmax(fabs(tmp) - alpha, 0.0) / denom;
}

/*
 * The duality gap from R_norm2 = ||R||^2, Ry = R'y, w_l2 = ||w||^2,
 * w_l1 = ||w||_1 and dual_norm: for alpha > 0 the largest |XtA_j| (the
 * largest XtA_j with positive) of XtA = X'R - beta w; for alpha == 0 the
 * squared norm ||X'R||^2.  As scikit-learn's gap_enet.
 */
GSB__CD_FN double gsb__cd_gap(double alpha, double beta, double R_norm2, double Ry, double w_l2,
                              double w_l1, double dual_norm)
{
    if (alpha == 0) {
        if (beta == 0)
            return dual_norm;
        return R_norm2 + 0.5 * beta * w_l2 - Ry + 1 / (2 * beta) * dual_norm;
    }
    double primal = 0.5 * (R_norm2 + beta * w_l2) + alpha * w_l1;
    double scale = dual_norm > alpha ? alpha / dual_norm : 1.0;
    double dual = -0.5 * (scale * scale) * (R_norm2 + beta * w_l2) + scale * Ry;
    return primal - dual;
}

/*
 * Gap-safe screening (Ndiaye et al. 2017, eq. 11, as scikit-learn applies
 * it): feature j stays active when its distance to the dual feasible
 * boundary, (1 - |XtA_j| / max(alpha, dual_norm)) / sqrt(||X_j||^2 + beta),
 * is at most sqrt(2 |gap|) / alpha.
 */
GSB__CD_FN double gsb__cd_radius(double gap, double alpha)
{
    return sqrt(2 * fabs(gap)) / alpha;
}

GSB__CD_FN int gsb__cd_keep(double xta_j, double norm2_j, double alpha, double beta,
                            double dual_norm, double radius)
{
    double theta = xta_j / fmax(alpha, dual_norm);
    return (1 - fabs(theta)) / sqrt(norm2_j + beta) <= radius;
}

/*
 * selection='random': coordinate draws from splitmix64 on a 64-bit state,
 * the same stream on every backend (scikit-learn's rand_r stream comes from
 * numpy and cannot be reproduced; the optimum is the same).
 */
GSB__CD_FN uint64_t gsb__cd_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#endif
