/*
 * forest_math.h - the split arithmetic of the forest ops, written once for
 * the CPU twin (cpu_forest.c) and the CUDA kernels (cuda_forest.cu), so both
 * score every candidate split with the same formulas in the same order (and
 * the host-side clean-up of forest_hist's feature lists, written once too).
 *
 * Stats (backend.h, gsb__forest_data): [0] count, then the weight of each
 * class (classification) or [1] weight, [2 + k] sum w y_k, [2 + O + k] sum
 * w q_k (regression).  A candidate split is given as its left stats, the sum
 * lp[s] + lx[s] (lx: the missing-value bin when missing values go left, or
 * NULL), and the node's total tot; right = tot - left.
 *
 * The proxies are scikit-learn's proxy_impurity_improvement up to a term
 * that is the same for every candidate of a node (so they rank candidates
 * as scikit-learn's do):
 *   gini     sum_k l_k^2 / W_l + sum_k r_k^2 / W_r
 *   entropy  sum_k (l_k ln l_k + r_k ln r_k) - W_l ln W_l - W_r ln W_r
 *   mse      sum_k S_lk^2 / W_l + S_rk^2 / W_r
 *   poisson  sum_k S_lk ln(S_lk / W_l) + S_rk ln(S_rk / W_r); -inf when a
 *            side's sum_k is <= DBL_EPSILON (scikit-learn's rule)
 */
#ifndef GSB_BACKEND_FOREST_MATH_H
#define GSB_BACKEND_FOREST_MATH_H

#include <math.h>
#include <stdint.h>

#include "backend/backend.h"

#ifdef __CUDACC__
#define GSB_FOREST_FN static __host__ __device__ inline
#else
#define GSB_FOREST_FN static inline
#endif

/* A product added to a sum, rounded twice on both backends: the device would
 * otherwise contract it into one fused multiply-add and score exactly tied
 * candidates differently from the CPU twin. */
#ifdef __CUDA_ARCH__
#define GSB__FOREST_MULADD(acc, a, b) __dadd_rn((acc), __dmul_rn((a), (b)))
#else
#define GSB__FOREST_MULADD(acc, a, b) ((acc) + (a) * (b))
#endif

/* the record forest_split writes per node (backend.h) */
enum {
    GSB__FREC_PROXY = 0,
    GSB__FREC_FEATURE,
    GSB__FREC_BIN_LO,
    GSB__FREC_BIN_HI,
    GSB__FREC_MISSING_LEFT,
    GSB__FREC_NONCONST,
    GSB__FREC_LEFT /* V1 left stats, then V1 right stats */
};

/* V1: the stats of a bin */
GSB_FOREST_FN int gsb__forest_nstats(int n_classes, int n_outputs)
{
    return n_classes > 0 ? 1 + n_classes : 2 + 2 * n_outputs;
}

GSB_FOREST_FN int gsb__forest_rec_len(int V1) { return GSB__FREC_LEFT + 2 * V1; }

/* sklearn's EPSILON (np.finfo('double').eps) */
#define GSB__FOREST_EPS 2.220446049250313e-16

/* acc + sign x ln x, the term 0 for x <= 0 (a class absent from a side, or
 * rounding below 0) */
GSB_FOREST_FN double gsb__forest_add_xlogx(double acc, double sign, double x)
{
    return x > 0 ? GSB__FOREST_MULADD(acc, sign * x, log(x)) : acc;
}

/* The weight of stats s. */
GSB_FOREST_FN double gsb__forest_weight(const double *s, int n_classes)
{
    if (n_classes <= 0)
        return s[1];
    double w = 0;
    for (int k = 0; k < n_classes; k++)
        w += s[1 + k];
    return w;
}

/* stat s of the left side of a candidate */
#define GSB__FOREST_LEFT(lp, lx, s) ((lp)[s] + ((lx) ? (lx)[s] : 0.0))

/*
 * The proxy of a candidate (see the top), or -INFINITY when a side has fewer
 * than min_leaf samples or less than min_weight weight (or none at all).
 */
GSB_FOREST_FN double gsb__forest_proxy(const double *lp, const double *lx, const double *tot,
                                       int n_classes, int n_outputs, int criterion,
                                       double min_leaf, double min_weight)
{
    double nl = GSB__FOREST_LEFT(lp, lx, 0), nr = tot[0] - nl;
    if (nl < min_leaf || nr < min_leaf || nl < 0.5 || nr < 0.5)
        return -INFINITY;
    if (n_classes > 0) {
        double wl = 0, wt = 0, a = 0, b = 0;
        for (int k = 0; k < n_classes; k++) {
            double l = GSB__FOREST_LEFT(lp, lx, 1 + k), r = tot[1 + k] - l;
            wl += l;
            wt += tot[1 + k];
            if (criterion == GSB__FOREST_ENTROPY) {
                a = gsb__forest_add_xlogx(a, 1.0, l);
                b = gsb__forest_add_xlogx(b, 1.0, r);
            } else {
                a = GSB__FOREST_MULADD(a, l, l);
                b = GSB__FOREST_MULADD(b, r, r);
            }
        }
        double wr = wt - wl;
        if (wl < min_weight || wr < min_weight || !(wl > 0) || !(wr > 0))
            return -INFINITY;
        if (criterion == GSB__FOREST_ENTROPY)
            return gsb__forest_add_xlogx(gsb__forest_add_xlogx(a + b, -1.0, wl), -1.0, wr);
        return a / wl + b / wr;
    }
    double wl = GSB__FOREST_LEFT(lp, lx, 1), wr = tot[1] - wl;
    if (wl < min_weight || wr < min_weight || !(wl > 0) || !(wr > 0))
        return -INFINITY;
    double p = 0;
    for (int k = 0; k < n_outputs; k++) {
        double sl = GSB__FOREST_LEFT(lp, lx, 2 + k), sr = tot[2 + k] - sl;
        if (criterion == GSB__FOREST_POISSON) {
            if (sl <= GSB__FOREST_EPS || sr <= GSB__FOREST_EPS)
                return -INFINITY;
            p = GSB__FOREST_MULADD(GSB__FOREST_MULADD(p, sl, log(sl / wl)), sr, log(sr / wr));
        } else {
            p += sl * sl / wl + sr * sr / wr; /* quotients: nothing to contract */
        }
    }
    return p;
}

/* Candidate order within a feature (ties go to the smaller): missing right
 * at bin b, then "all values left, missing right", then missing left at b. */
GSB_FOREST_FN int gsb__forest_order(int n_real, int b, int missing_left, int all_left)
{
    if (all_left)
        return n_real;
    return missing_left ? n_real + 1 + b : b;
}

/* Whether candidate (proxy p, order o) beats (best_p, best_o). */
GSB_FOREST_FN int gsb__forest_better(double p, int o, double best_p, int best_o)
{
    return p > best_p || (p == best_p && p > -INFINITY && o < best_o);
}

/*
 * A node's record from its features' records (recs: m rows of rec_len, one
 * per entry of feats, -1 entries ignored), as forest_split defines it: the
 * best proxy among the non-constant features (only the first of them when
 * first_only), ties to the earlier; NONCONST counts them all.
 */
GSB_FOREST_FN void gsb__forest_reduce(const double *recs, const int32_t *feats, int m,
                                      int rec_len, int first_only, double *out)
{
    int best = -1, nonconst = 0;
    for (int j = 0; j < m; j++) {
        const double *r = recs + (int64_t)j * rec_len;
        if (feats[j] < 0 || r[GSB__FREC_NONCONST] < 0.5)
            continue;
        nonconst++;
        if (first_only && nonconst > 1)
            continue;
        if (r[GSB__FREC_PROXY] > -INFINITY &&
            (best < 0 || r[GSB__FREC_PROXY] > recs[(int64_t)best * rec_len + GSB__FREC_PROXY]))
            best = j;
    }
    if (best >= 0) {
        const double *r = recs + (int64_t)best * rec_len;
        for (int s = 0; s < rec_len; s++)
            out[s] = r[s];
    } else {
        for (int s = 0; s < rec_len; s++)
            out[s] = 0.0;
        out[GSB__FREC_PROXY] = -INFINITY;
        out[GSB__FREC_FEATURE] = -1;
    }
    out[GSB__FREC_NONCONST] = nonconst;
}

/*
 * Host side of forest_hist, before any histogram is touched: feats (B x m,
 * entries < n_features already checked) into out with each repeat of a
 * feature within its row set to -1 (negative entries stay skipped), so a
 * feature listed twice is zeroed and summed once: the op sets the slot, and
 * two workers on the same histogram would race (the CPU) or add it twice (the
 * GPU's atomics).  seen: n_features entries of scratch.
 */
static inline void gsb__forest_unique_feats(const int32_t *feats, int64_t B, int64_t m,
                                            int64_t n_features, int64_t *seen, int32_t *out)
{
    for (int64_t f = 0; f < n_features; f++)
        seen[f] = -1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < m; j++) {
            int32_t f = feats[b * m + j];
            out[b * m + j] = f >= 0 && seen[f] == b ? -1 : f;
            if (f >= 0)
                seen[f] = b;
        }
}

/* One row of codes: byte f of row i (stride: bytes per row). */
GSB_FOREST_FN int gsb__forest_code(const uint8_t *codes, int64_t stride, int64_t i, int64_t f)
{
    return codes[i * stride + f];
}

#endif
