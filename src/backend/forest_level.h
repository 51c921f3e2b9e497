/*
 * forest_level.h - what breadth-first tree growth decides per node, written
 * once for the host grower (estimators/ensemble/tree_grow.c), the CPU twins
 * of the level ops (cpu/cpu_forest_level.c) and their CUDA kernels
 * (cuda/cuda_forest_level.cu), so a random_state grows the same trees on
 * every backend and through either grower:
 *  - each node's feature draw: a Fisher-Yates permutation of the features
 *    from the node's own stream, xoshiro256** seeded by splitmix64 from
 *    (the tree's seed, the node's number in its tree), as core/rng.c draws;
 *  - the node's impurity (scikit-learn's criteria), the leaf rules before a
 *    split search, the acceptance of the best split, the importance term;
 *  - the column layouts of the level ops' tensors (backend.h).
 */
#ifndef GSB_BACKEND_FOREST_LEVEL_H
#define GSB_BACKEND_FOREST_LEVEL_H

#include <math.h>
#include <stdint.h>

#include "backend/forest_math.h"
#include "core/xoshiro.h"

/* A product rounded on its own (never fused into a neighbouring add). */
#ifdef __CUDA_ARCH__
#define GSB__FOREST_MUL(a, b) __dmul_rn((a), (b))
#else
#define GSB__FOREST_MUL(a, b) ((a) * (b))
#endif

/* ---- column layouts of the level ops (backend.h, gsb__forest_level) --------------- */

/* a frontier node */
enum { GSB__FLV_TREE = 0, GSB__FLV_ID, GSB__FLV_START, GSB__FLV_END, GSB__FLV_DEPTH,
       GSB__FLV_FRONT };
/* a node as the level leaves it (the frontier's columns, then its split) */
enum { GSB__FLV_FEATURE = GSB__FLV_FRONT, GSB__FLV_BIN_LO, GSB__FLV_BIN_HI,
       GSB__FLV_MISSING_LEFT, GSB__FLV_LEFT, GSB__FLV_NODE };
/* how a node's samples split: feature (-1: no split), bin_lo, missing_left, the left
 * child's place in the next frontier, the left count the split search found */
enum { GSB__FLS_FEATURE = 0, GSB__FLS_BIN, GSB__FLS_MISSING_LEFT, GSB__FLS_CHILD,
       GSB__FLS_N_LEFT, GSB__FLS_COLS };

/* ---- a node's random stream -------------------------------------------------------- */

typedef struct gsb__forest_rng {
    uint64_t s[4];
} gsb__forest_rng;

/* The stream of node id of the tree seeded by seed. */
GSB_FOREST_FN void gsb__forest_rng_node(gsb__forest_rng *r, uint64_t seed, int32_t id)
{
    uint64_t x = seed ^ ((uint64_t)id + 1) * 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 4; i++)
        r->s[i] = gsb__splitmix64(&x);
}

/*
 * The features of node (tree seed, id): positions [from, to) of the node's
 * Fisher-Yates permutation of the F features, into out.  perm (F entries,
 * entry i at perm[i * stride]) is the identity on entry and on return;
 * swaps: `to` entries of scratch at the same stride.
 */
GSB_FOREST_FN void gsb__forest_draw(int64_t F, uint64_t seed, int32_t id, int64_t from,
                                    int64_t to, int32_t *perm, int32_t *swaps, int64_t stride,
                                    int32_t *out)
{
    gsb__forest_rng r;
    gsb__forest_rng_node(&r, seed, id);
    for (int64_t i = 0; i < to; i++) {
        int64_t j = i + gsb__xoshiro_below(r.s, F - i);
        int32_t t = perm[i * stride];
        perm[i * stride] = perm[j * stride];
        perm[j * stride] = t;
        swaps[i * stride] = (int32_t)j;
        if (i >= from)
            out[i - from] = perm[i * stride];
    }
    for (int64_t i = to - 1; i >= 0; i--) { /* back to the identity */
        int64_t j = swaps[i * stride];
        int32_t t = perm[i * stride];
        perm[i * stride] = perm[j * stride];
        perm[j * stride] = t;
    }
}

/* ---- a node's impurity and leaf rules ------------------------------------------------ */

/* The impurity of stats s (V1) as scikit-learn's criterion gives it. */
GSB_FOREST_FN double gsb__forest_node_impurity(const double *s, int K, int O, int criterion)
{
    if (K > 0) {
        double W = gsb__forest_weight(s, K), acc = 0;
        if (!(W > 0))
            return 0.0;
        for (int k = 0; k < K; k++) {
            double p = s[1 + k] / W;
            if (criterion == GSB__FOREST_ENTROPY)
                acc -= p > 0 ? GSB__FOREST_MUL(p, log2(p)) : 0.0;
            else
                acc = GSB__FOREST_MULADD(acc, p, p);
        }
        return criterion == GSB__FOREST_ENTROPY ? acc : 1.0 - acc;
    }
    double W = s[1], acc = 0;
    if (!(W > 0))
        return 0.0;
    for (int k = 0; k < O; k++) {
        double mean = s[2 + k] / W;
        if (criterion == GSB__FOREST_POISSON) {
            if (mean <= GSB__FOREST_EPS)
                return INFINITY;
            acc += (s[2 + O + k] - GSB__FOREST_MUL(s[2 + k], log(mean))) / W;
        } else {
            acc += s[2 + O + k] / W - GSB__FOREST_MUL(mean, mean);
        }
    }
    return acc / O;
}

/* Whether a node (n samples, weight W) is a leaf before any split search. */
GSB_FOREST_FN int gsb__forest_leaf_before(const gsb__forest_grow_rule *p, int64_t depth,
                                          int64_t n, double W, double impurity)
{
    return depth >= p->max_depth || n < p->min_samples_split || n < 2 * p->min_samples_leaf ||
           W < 2 * p->min_weight_leaf || impurity <= GSB__FOREST_EPS;
}

/* The weighted impurity improvement of the split of record r (stats s,
 * impurity imp) in a tree of root weight Wroot. */
GSB_FOREST_FN double gsb__forest_improvement(const double *s, double imp, const double *r,
                                             double Wroot, int K, int O, int criterion)
{
    int V1 = gsb__forest_nstats(K, O);
    const double *left = r + GSB__FREC_LEFT, *right = left + V1;
    double W = gsb__forest_weight(s, K), Wl = gsb__forest_weight(left, K),
           Wr = gsb__forest_weight(right, K);
    double il = gsb__forest_node_impurity(left, K, O, criterion),
           ir = gsb__forest_node_impurity(right, K, O, criterion);
    double in = imp - GSB__FOREST_MUL(Wr / W, ir);
    in = in - GSB__FOREST_MUL(Wl / W, il);
    return GSB__FOREST_MUL(W / Wroot, in);
}

/* Whether record r is a split scikit-learn would make; *improvement set when it
 * has a valid proxy. */
GSB_FOREST_FN int gsb__forest_accept(const gsb__forest_grow_rule *p, const double *s, double imp,
                                     const double *r, double Wroot, int K, int O,
                                     double *improvement)
{
    if (!(r[GSB__FREC_PROXY] > -INFINITY))
        return 0;
    *improvement = gsb__forest_improvement(s, imp, r, Wroot, K, O, p->criterion);
    return !(*improvement + GSB__FOREST_EPS < p->min_impurity_decrease);
}

/* scikit-learn's importance term of a split: W imp - W_l imp_l - W_r imp_r. */
GSB_FOREST_FN double gsb__forest_importance(const double *s, double imp, const double *left,
                                            const double *right, int K, int O, int criterion)
{
    double t = GSB__FOREST_MUL(gsb__forest_weight(s, K), imp);
    t = t - GSB__FOREST_MUL(gsb__forest_weight(left, K),
                            gsb__forest_node_impurity(left, K, O, criterion));
    return t - GSB__FOREST_MUL(gsb__forest_weight(right, K),
                               gsb__forest_node_impurity(right, K, O, criterion));
}

#endif
