/*
 * umap_sgd.h - the arithmetic of one edge of UMAP's layout SGD, shared by
 * the umap_sgd_epoch op's CPU twin (cpu/cpu_umap.c) and its CUDA version
 * (cuda/cuda_umap.cu) so both compute the same steps from the same numbers.
 *
 * umap-learn's optimize_layout_euclidean, per edge e = (i, k) of the graph
 * (CSR row i of the head points, k a tail point), in epoch n:
 *   - the edge is due when next_sample[e] <= n; then
 *   - attraction: d2 = |y_i - t_k|^2, c = -2ab d2^(b-1) / (1 + a d2^b)
 *     (0 when d2 = 0), step += scale * alpha * clip(c (y_i - t_k)) per
 *     coordinate, clip to [-4, 4]; next_sample[e] += epochs_per_sample[e];
 *   - n_neg = int((n - next_negative[e]) / (epochs_per_sample[e] / rate))
 *     negative samples t_s, s = gsb__umap_negative(edge key, n, p, m):
 *     d2 = |y_i - t_s|^2, c = 2 gamma b / ((0.001 + d2)(1 + a d2^b)),
 *     step += alpha * clip(c (y_i - t_s)) (no step when d2 = 0, as
 *     umap-learn); next_negative[e] += n_neg * epochs_per_sample[e] / rate.
 * umap-learn moves the tail of a fit's edge too (move_other): on a
 * symmetric graph, where edge (k, i) carries the same weight and schedule,
 * that move is the head step of the reverse edge, so a fit passes
 * scale = 2 and moves heads only; transform passes scale = 1.
 *
 * Schedules are kept in double and advanced with correctly rounded products
 * (no fused multiply-add on the GPU), so both backends take exactly the
 * same edges and negative samples in every epoch; the steps themselves are
 * float32, as umap-learn's, and agree to the last bits of powf.
 * Negative samples come from a counter-based hash (splitmix64's finaliser),
 * not umap-learn's per-vertex Tausworthe streams: a sample depends only on
 * (seed, edge, epoch, index), whatever the order edges are visited in.
 */
#ifndef GSB_BACKEND_UMAP_SGD_H
#define GSB_BACKEND_UMAP_SGD_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GSB__HD __host__ __device__
#define GSB__INLINE static __forceinline__
#define GSB__RESTRICT __restrict__
#else
#define GSB__HD
#define GSB__INLINE static inline __attribute__((always_inline))
#define GSB__RESTRICT restrict
#endif

/* negative samples of an edge handled together (see gsb__umap_edge_step_dim) */
#define GSB__UMAP_NEG_CHUNK 8

/* umap_sgd_epoch's scalars */
typedef struct gsb__umap_sgd {
    int64_t epoch;               /* n, from 0 */
    double a, b;                 /* the low-dimensional similarity 1 / (1 + a d^2b) */
    double gamma;                /* repulsion_strength */
    double alpha;                /* this epoch's learning rate */
    double negative_sample_rate; /* >= 0 (0: no negative samples) */
    double attraction_scale;     /* 2: a fit on a symmetric graph; 1: transform */
    uint64_t seed;
    int hogwild;                 /* may apply steps as computed (see backend.h) */
    /* 1: indptr and indices passed an earlier call's check and are unchanged
     * since (the later epochs of a run): a backend may skip the check and
     * the host wait it costs on a GPU; 0: check them */
    int edges_checked;
} gsb__umap_sgd;

GSB__HD static inline uint64_t gsb__umap_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The stream of edge e: every negative sample of the edge derives from it. */
GSB__HD static inline uint64_t gsb__umap_edge_key(uint64_t seed, int64_t e)
{
    return gsb__umap_mix(seed ^ gsb__umap_mix((uint64_t)e));
}

/* Tail row of negative sample p of the edge keyed `key` in epoch n: a hash
 * mapped onto [0, m) by a multiply-high (Lemire's range reduction). */
GSB__HD static inline int64_t gsb__umap_negative(uint64_t key, int64_t epoch, int64_t p,
                                                 int64_t m)
{
    uint64_t h = gsb__umap_mix(key ^ (((uint64_t)epoch << 32) | (uint32_t)p));
#ifdef __CUDA_ARCH__
    return (int64_t)__umul64hi(h, (uint64_t)m);
#else
    return (int64_t)(((unsigned __int128)h * (uint64_t)m) >> 64);
#endif
}

/* a * b rounded once (no contraction into a fused multiply-add) */
GSB__HD static inline double gsb__umap_mul_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

GSB__HD static inline float gsb__umap_clip4(float v)
{
    return v > 4.0f ? 4.0f : (v < -4.0f ? -4.0f : v);
}

GSB__HD static inline float gsb__umap_sqdist(const float *x, const float *y, int64_t dim)
{
    float s = 0.0f;
    for (int64_t d = 0; d < dim; d++) {
        float diff = x[d] - y[d];
        s += diff * diff;
    }
    return s;
}

/* The body of gsb__umap_edge_step; inlined with dim a constant for the common
 * 2-D embedding, so the step stays in registers. */
GSB__HD GSB__INLINE void gsb__umap_edge_step_dim(const float *GSB__RESTRICT y,
                                                 const float *GSB__RESTRICT tail, int64_t m,
                                                 const int64_t dim, int32_t k, int64_t e,
                                                 double eps, double *next_sample,
                                                 double *next_negative, const gsb__umap_sgd *p,
                                                 float *GSB__RESTRICT step)
{
    for (int64_t d = 0; d < dim; d++)
        step[d] = 0.0f;
    double n = (double)p->epoch;
    if (!(*next_sample <= n))
        return;
    const float a = (float)p->a, b = (float)p->b, alpha = (float)p->alpha;
    const float *t = tail + (int64_t)k * dim;
    float d2 = gsb__umap_sqdist(y, t, dim);
    if (d2 > 0.0f) {
        float pb = powf(d2, b);
        float c = -2.0f * a * b * pb / (d2 * (a * pb + 1.0f));
        float w = (float)p->attraction_scale * alpha;
        for (int64_t d = 0; d < dim; d++)
            step[d] += w * gsb__umap_clip4(c * (y[d] - t[d]));
    }
    *next_sample += eps;

    if (!(p->negative_sample_rate > 0.0))
        return;
    double eps_neg = eps / p->negative_sample_rate;
    int64_t n_neg = (int64_t)((n - *next_negative) / eps_neg);
    if (n_neg <= 0)
        return;
    *next_negative += gsb__umap_mul_rn((double)n_neg, eps_neg);
    /* no repulsion (gamma 0): the samples would all step by 0 */
    const float rep = 2.0f * (float)p->gamma * b;
    if (!(rep > 0.0f))
        return;
    const uint64_t key = gsb__umap_edge_key(p->seed, e);
    /* in chunks, in three passes: the samples' rows are fetched together (their
     * cache misses overlap) and their coefficients computed apart from the sum;
     * the steps are still added in sample order */
    for (int64_t s0 = 0; s0 < n_neg; s0 += GSB__UMAP_NEG_CHUNK) {
        const int64_t cnt = n_neg - s0 < GSB__UMAP_NEG_CHUNK ? n_neg - s0 : GSB__UMAP_NEG_CHUNK;
        int64_t row[GSB__UMAP_NEG_CHUNK];
        float coef[GSB__UMAP_NEG_CHUNK];
        for (int64_t j = 0; j < cnt; j++) {
            row[j] = gsb__umap_negative(key, p->epoch, s0 + j, m);
            coef[j] = gsb__umap_sqdist(y, tail + row[j] * dim, dim);
        }
        for (int64_t j = 0; j < cnt; j++) {
            d2 = coef[j];
            coef[j] = d2 > 0.0f ? rep / ((0.001f + d2) * (a * powf(d2, b) + 1.0f)) : 0.0f;
        }
        for (int64_t j = 0; j < cnt; j++) {
            if (!(coef[j] > 0.0f)) /* d2 = 0: no step, as umap-learn */
                continue;
            const float *u = tail + row[j] * dim;
            for (int64_t d = 0; d < dim; d++)
                step[d] += alpha * gsb__umap_clip4(coef[j] * (y[d] - u[d]));
        }
    }
}

/*
 * Edge e = (head row y, tail row k of `tail`, m rows) in epoch p->epoch:
 * step (dim floats) is set to the edge's step when it is due (zeros when
 * not) and its schedule advanced.  y and tail are the positions the epoch
 * reads (the epoch's start in the deterministic form); step is not one of
 * them.
 */
GSB__HD static inline void gsb__umap_edge_step(const float *y, const float *tail, int64_t m,
                                               int64_t dim, int32_t k, int64_t e, double eps,
                                               double *next_sample, double *next_negative,
                                               const gsb__umap_sgd *p, float *step)
{
    if (dim == 2)
        gsb__umap_edge_step_dim(y, tail, m, 2, k, e, eps, next_sample, next_negative, p, step);
    else
        gsb__umap_edge_step_dim(y, tail, m, dim, k, e, eps, next_sample, next_negative, p,
                                step);
}

#endif
