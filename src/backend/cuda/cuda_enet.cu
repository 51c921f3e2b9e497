/*
 * cuda_enet.cu - the CUDA backend's elastic-net ops: enet_cd_gram (Gram-form
 * coordinate descent) and gather_cols.  Twin: cpu_enet.c, i.e. the host
 * solver solvers/coordinate_descent.c, whose iterations this follows.
 *
 * enet_cd_gram runs the whole solve in one launch: one thread block per
 * target, iterating scikit-learn's epochs over the Gram matrix Q in device
 * memory, with the duality gap and the gap-safe screening computed in the
 * block every time the stopping rule asks for them; the host waits once,
 * for the gaps and epoch counts.  Coordinate descent is sequential, so the
 * parallelism within a block is the O(p) work around each coordinate: the
 * axpy Qw += delta Q_j, the gap's sums and the screening.
 *
 * Every thread of a block walks the coordinates in lockstep and computes
 * the same scalars (the coordinate, tmp, the new w_j, the largest change)
 * from the same values, so control flow stays uniform and needs no
 * broadcast; __syncthreads() fences only the coordinates that change w
 * (one before the axpy, so that every thread has read Qw_j, one after).
 * The block's vectors (w, Qw, diag Q, q, XtA, the active set, the screening
 * codes: 45 bytes per feature) live in shared memory when they fit the
 * device's opt-in limit (about 5000 features on an H100), else in global
 * scratch through the same pointers.  The per-coordinate arithmetic uses
 * explicit roundings (no fused multiply-add), as the CPU computes it, so
 * both backends produce the same iterates; only the gap's sums associate
 * differently.
 */
#include <limits.h>
#include <stdint.h>

#include "backend/cuda/cuda_common.h"
#include "solvers/cd_rule.h"

namespace {

constexpr int CD_THREADS = 256;
constexpr int CD_WARPS = CD_THREADS / 32;
constexpr int GATHER_THREADS = 256;

/* ---- argument checks (a mismatch is a bug in the caller: GSB_EINTERNAL) ---- */

int need(const gsb__backend *be, const char *op, const char *name, const gsb__tensor *t,
         gsb_dtype dtype, int64_t rows, int64_t cols)
{
    if (!t)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (dtype ? t->dtype != dtype : (t->dtype != GSB_F32 && t->dtype != GSB_F64))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                            gsb__cuda_dtype_name(t->dtype));
    if (t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    if (t->rows < 0 || t->cols < 0 || (!t->data && t->rows * t->cols > 0) ||
        (rows >= 0 && t->rows != rows) || (cols >= 0 && t->cols != cols))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has shape (%lld, %lld), expected (%lld, %lld)",
                            op, name, (long long)t->rows, (long long)t->cols, (long long)rows,
                            (long long)cols);
    return GSB_OK;
}

/* ---- enet_cd_gram ------------------------------------------------------------------ */

struct CdArgs {
    const double *Q, *q, *y_norm2; /* p x p, k x p, k */
    double *W;                     /* k x p, in and out */
    double *gap_out;               /* k */
    long long *iter_out;           /* k */
    unsigned char *scratch;        /* global vectors when they do not fit shared memory */
    size_t stride;                 /* bytes of one block's vectors */
    int64_t p, max_iter;
    double alpha, beta, tol;
    int positive, random, screening, use_shared;
    uint64_t seed;
};

/* A block's vectors, in shared or global memory (generic pointers). */
struct CdVecs {
    double *w, *Qw, *diag, *q, *XtA;
    int *active;
    unsigned char *code; /* screening: 0 excluded, 1 active, 2 excluded now (w_j was != 0) */
};

/* Bytes of one block's vectors for p features (each piece 16-byte aligned). */
__host__ __device__ inline size_t cd_piece(int64_t count, size_t size)
{
    return ((size_t)count * size + 15) & ~(size_t)15;
}

__host__ __device__ inline size_t cd_bytes(int64_t p)
{
    return 5 * cd_piece(p, sizeof(double)) + cd_piece(p, sizeof(int)) +
           cd_piece(p, sizeof(unsigned char));
}

__device__ CdVecs cd_carve(unsigned char *base, int64_t p)
{
    CdVecs v;
    size_t d = cd_piece(p, sizeof(double));
    v.w = (double *)base;
    v.Qw = (double *)(base + d);
    v.diag = (double *)(base + 2 * d);
    v.q = (double *)(base + 3 * d);
    v.XtA = (double *)(base + 4 * d);
    v.active = (int *)(base + 5 * d);
    v.code = base + 5 * d + cd_piece(p, sizeof(int));
    return v;
}

__device__ inline double warp_sum(double v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ inline double warp_max(double v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = fmax(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* The gap's five reductions at once: sums of s[0..4), max (or sum) of s[4];
 * every thread gets the results.  red: CD_WARPS * 5 + 5 doubles of shared. */
__device__ void block_reduce5(double s[5], bool last_is_max, double *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int i = 0; i < 5; i++) {
        s[i] = i == 4 && last_is_max ? warp_max(s[i]) : warp_sum(s[i]);
        if (lane == 0)
            red[warp * 5 + i] = s[i];
    }
    __syncthreads();
    if (warp == 0) {
        for (int i = 0; i < 5; i++) {
            double init = i == 4 && last_is_max ? -INFINITY : 0.0;
            double v = lane < CD_WARPS ? red[lane * 5 + i] : init;
            v = i == 4 && last_is_max ? warp_max(v) : warp_sum(v);
            if (lane == 0)
                red[CD_WARPS * 5 + i] = v;
        }
    }
    __syncthreads();
    for (int i = 0; i < 5; i++)
        s[i] = red[CD_WARPS * 5 + i];
    __syncthreads(); /* red may be reused at once */
}

/* gap_enet_gram: XtA filled, *dual_norm set; every thread gets the gap. */
__device__ double cd_gap(const CdArgs &a, const CdVecs &v, double y_norm2, double *dual_norm,
                         double *red)
{
    const bool l1 = a.alpha != 0;
    double s[5] = {0, 0, 0, 0, l1 ? -INFINITY : 0.0}; /* q'w, w'Qw, w'w, |w|_1, dual norm */
    for (int64_t i = threadIdx.x; i < a.p; i += blockDim.x) {
        double wi = v.w[i];
        s[0] += wi * v.q[i];
        s[1] += wi * v.Qw[i];
        s[2] += wi * wi;
        s[3] += fabs(wi);
        double x = __dsub_rn(__dsub_rn(v.q[i], v.Qw[i]), l1 ? __dmul_rn(a.beta, wi) : 0.0);
        v.XtA[i] = x;
        if (l1)
            s[4] = fmax(s[4], a.positive ? x : fabs(x));
        else
            s[4] += x * x;
    }
    block_reduce5(s, l1, red);
    if (l1 && a.p == 0)
        s[4] = 0.0;
    *dual_norm = s[4];
    double R_norm2 = y_norm2 + s[1] - 2.0 * s[0], Ry = y_norm2 - s[0];
    return gsb__cd_gap(a.alpha, a.beta, R_norm2, Ry, a.beta > 0 ? s[2] : 0.0, s[3], s[4]);
}

/* Qw += delta Q_j, all threads (the caller fences). */
__device__ inline void cd_axpy(const CdArgs &a, const CdVecs &v, int64_t j, double delta)
{
    const double *row = a.Q + j * a.p;
    for (int64_t i = threadIdx.x; i < a.p; i += blockDim.x)
        v.Qw[i] = __dadd_rn(v.Qw[i], __dmul_rn(delta, row[i]));
}

/*
 * Gap-safe screening as the host solver's screen(): decide every feature in
 * parallel, compact the active set in increasing order (warp ballots, one
 * tile of the block at a time), then apply the dropped coefficients' axpys
 * in increasing j, as scikit-learn does.  Returns n_active (all threads).
 */
__device__ int cd_screen(const CdArgs &a, const CdVecs &v, double gap, double dual_norm,
                         bool first, int *tile_count)
{
    const double radius = gsb__cd_radius(gap, a.alpha);
    for (int64_t i = threadIdx.x; i < a.p; i += blockDim.x) {
        unsigned char code;
        if (first && v.diag[i] == 0) {
            v.w[i] = 0;
            code = 0;
        } else if (!first && v.code[i] == 0) {
            code = 0;
        } else if (gsb__cd_keep(v.XtA[i], v.diag[i], a.alpha, a.beta, dual_norm, radius)) {
            code = 1;
        } else {
            code = v.w[i] != 0 ? 2 : 0;
            v.XtA[i] = -v.w[i]; /* the axpy's delta; XtA is not read again */
            v.w[i] = 0;
        }
        v.code[i] = code;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int n_active = 0;
    for (int64_t base = 0; base < a.p; base += blockDim.x) {
        int64_t i = base + threadIdx.x;
        bool on = i < a.p && v.code[i] == 1;
        unsigned ballot = __ballot_sync(0xffffffffu, on);
        if (lane == 0)
            tile_count[warp] = __popc(ballot);
        __syncthreads();
        int before = n_active;
        for (int w = 0; w < warp; w++)
            before += tile_count[w];
        if (on)
            v.active[before + __popc(ballot & ((1u << lane) - 1u))] = (int)i;
        for (int w = 0; w < CD_WARPS; w++)
            n_active += tile_count[w];
        __syncthreads();
    }
    /* each thread updates the same entries of Qw in every axpy: no fence between them */
    for (int64_t j = 0; j < a.p; j++)
        if (v.code[j] == 2)
            cd_axpy(a, v, j, v.XtA[j]);
    __syncthreads();
    return n_active;
}

/* One epoch over the active set; *d_w_max and *w_max (identical in every thread). */
__device__ void cd_epoch(const CdArgs &a, const CdVecs &v, int n_active, bool screening,
                         uint64_t *rng, double *d_w_max, double *w_max)
{
    double dmax = 0, wmax = 0;
    for (int it = 0; it < n_active; it++) {
        int64_t j = a.random ? (int64_t)(gsb__cd_rand(rng) % (uint64_t)n_active) : it;
        if (screening)
            j = v.active[j];
        const double dj = v.diag[j];
        if (dj == 0.0)
            continue;
        const double wj = v.w[j];
        const double tmp = __dadd_rn(__dsub_rn(v.q[j], v.Qw[j]), __dmul_rn(wj, dj));
        const double nw = gsb__cd_update(tmp, a.alpha, __dadd_rn(dj, a.beta), a.positive);
        if (nw != wj) {
            __syncthreads(); /* every thread has read Qw_j and w_j */
            cd_axpy(a, v, j, __dsub_rn(nw, wj));
            if (threadIdx.x == 0)
                v.w[j] = nw;
            __syncthreads();
        }
        dmax = fmax(dmax, fabs(__dsub_rn(nw, wj)));
        wmax = fmax(wmax, fabs(nw));
    }
    *d_w_max = dmax;
    *w_max = wmax;
}

/* Load the target's vectors and Qw = Q w: a thread per row, summing in the
 * CPU's order and rounding (a warm start then gives the CPU's iterates too);
 * Q is symmetric, so row i is read as column i, coalesced across threads. */
__device__ void cd_load(const CdArgs &a, const CdVecs &v, int64_t t)
{
    for (int64_t i = threadIdx.x; i < a.p; i += blockDim.x) {
        v.w[i] = a.W[t * a.p + i];
        v.q[i] = a.q[t * a.p + i];
        v.diag[i] = a.Q[i * a.p + i];
        v.code[i] = 1;
        v.active[i] = (int)i;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < a.p; i += blockDim.x) {
        double s = 0;
        for (int64_t j = 0; j < a.p; j++)
            s = __dadd_rn(s, __dmul_rn(a.Q[j * a.p + i], v.w[j]));
        v.Qw[i] = s;
    }
    __syncthreads();
}

__global__ void __launch_bounds__(CD_THREADS) enet_cd_gram_kernel(CdArgs a)
{
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ double red[CD_WARPS * 5 + 5];
    __shared__ int tile_count[CD_WARPS];
    const int64_t t = blockIdx.x;
    unsigned char *base = a.use_shared ? smem : a.scratch + (size_t)t * a.stride;
    const CdVecs v = cd_carve(base, a.p);
    cd_load(a, v, t);

    const bool screening = a.screening && a.alpha != 0;
    const double y_norm2 = a.y_norm2[t], tol_abs = a.tol * y_norm2;
    uint64_t rng = a.seed + (uint64_t)t;
    double dual_norm, gap = cd_gap(a, v, y_norm2, &dual_norm, red);
    long long n_iter = 0;
    int n_active = (int)a.p;
    /* as the host solver: a singular Q's first gap is trusted only when >= 0 */
    if (!(gap >= 0 && gap <= tol_abs)) {
        if (screening)
            n_active = cd_screen(a, v, gap, dual_norm, true, tile_count);
        int64_t it;
        for (it = 0; it < a.max_iter; it++) {
            double d_w_max, w_max;
            cd_epoch(a, v, n_active, screening, &rng, &d_w_max, &w_max);
            if (w_max == 0.0 || d_w_max / w_max <= a.tol || it == a.max_iter - 1) {
                gap = cd_gap(a, v, y_norm2, &dual_norm, red);
                if (gap <= tol_abs)
                    break;
                if (screening)
                    n_active = cd_screen(a, v, gap, dual_norm, false, tile_count);
            }
        }
        n_iter = it < a.max_iter ? it + 1 : a.max_iter;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < a.p; i += blockDim.x)
        a.W[t * a.p + i] = v.w[i];
    if (threadIdx.x == 0) {
        a.gap_out[t] = gap;
        a.iter_out[t] = n_iter;
    }
}

/* ---- gather_cols ------------------------------------------------------------------- */

template <typename T>
__global__ void gather_cols_kernel(const T *__restrict__ X, int64_t n, int64_t p,
                                   const int64_t *__restrict__ idx, int64_t m, T *__restrict__ out)
{
    const int64_t total = n * m, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += stride) {
        int64_t i = e / m, c = e - i * m;
        out[e] = X[i * p + idx[c]];
    }
}

unsigned blocks_for(const gsb__backend *be, int64_t work, int threads)
{
    int64_t sms = gsb__cuda_ctx_of(be)->sm_count;
    int64_t cap = (sms > 0 ? sms : 80) * 16, want = (work + threads - 1) / threads;
    return (unsigned)(want < 1 ? 1 : want < cap ? want : cap);
}

/* The dynamic shared memory one block may use, beyond the kernel's static arrays. */
int shared_limit(const gsb__backend *be, size_t *out)
{
    int optin = 0;
    CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                    gsb__cuda_ctx_of(be)->device));
    cudaFuncAttributes fa;
    CUDA_TRY(cudaFuncGetAttributes(&fa, enet_cd_gram_kernel));
    *out = (size_t)optin > fa.sharedSizeBytes ? (size_t)optin - fa.sharedSizeBytes : 0;
    return GSB_OK;
}

} /* namespace */

extern "C" int gsb__cuda_enet_cd_gram(const gsb__backend *be, const gsb__tensor *Q,
                                      const gsb__tensor *q, const double *y_norm2,
                                      const gsb__enet_cd_params *cd, gsb__tensor *W,
                                      double *gap, int64_t *n_iter)
{
    const char *op = "enet_cd_gram";
    int rc = need(be, op, "Q", Q, GSB_F64, -1, -1);
    if (rc != GSB_OK)
        return rc;
    const int64_t p = Q->rows;
    if ((rc = need(be, op, "Q", Q, GSB_F64, p, p)) != GSB_OK ||
        (rc = need(be, op, "q", q, GSB_F64, -1, p)) != GSB_OK)
        return rc;
    const int64_t k = q->rows;
    if ((rc = need(be, op, "W", W, GSB_F64, k, p)) != GSB_OK)
        return rc;
    if (!y_norm2 || !cd || !gap || !n_iter)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: a host argument is missing", op);
    if (cd->max_iter < 1 || p >= INT_MAX || k > INT_MAX)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: max_iter %lld, p %lld or k %lld out of range",
                            op, (long long)cd->max_iter, (long long)p, (long long)k);
    if (k == 0)
        return GSB_OK;

    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    const size_t bytes = cd_bytes(p);
    size_t limit = 0;
    if ((rc = shared_limit(be, &limit)) != GSB_OK)
        return rc;
    const bool shared = bytes <= limit;
    /* device side: y_norm2 (k), gaps (k), epochs (k), then any global vectors */
    const size_t io = 3 * cd_piece(k, sizeof(double));
    void *mem = NULL;
    if ((rc = gsb__cuda_alloc(be, io + (shared ? 0 : (size_t)k * bytes), &mem)) != GSB_OK)
        return rc;
    unsigned char *m8 = (unsigned char *)mem;
    double *yn_d = (double *)m8, *gap_d = (double *)(m8 + cd_piece(k, sizeof(double)));
    long long *iter_d = (long long *)(m8 + 2 * cd_piece(k, sizeof(double)));
    double *host = NULL;

    CdArgs a;
    a.Q = (const double *)Q->data;
    a.q = (const double *)q->data;
    a.y_norm2 = yn_d;
    a.W = (double *)W->data;
    a.gap_out = gap_d;
    a.iter_out = iter_d;
    a.scratch = shared ? NULL : m8 + io;
    a.stride = bytes;
    a.p = p;
    a.max_iter = cd->max_iter;
    a.alpha = cd->alpha;
    a.beta = cd->beta;
    a.tol = cd->tol;
    a.positive = cd->positive;
    a.random = cd->random;
    a.screening = cd->screening;
    a.use_shared = shared;
    a.seed = cd->seed;

    GSB_CUDA_CHECK(gsb__cuda_copy_h2d(be, yn_d, y_norm2, (size_t)k * sizeof(double)));
    if (shared && bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(enet_cd_gram_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
    enet_cd_gram_kernel<<<(unsigned)k, CD_THREADS, shared ? bytes : 0, ctx->stream>>>(a);
    CUDA_CHECK(cudaGetLastError());
    /* the one wait: gaps and epochs come back together */
    host = (double *)malloc(2 * cd_piece(k, sizeof(double)));
    if (!host) {
        rc = GSB_CUDA_ERR(GSB_ENOMEM, "%s: out of host memory", op);
        goto done;
    }
    GSB_CUDA_CHECK(gsb__cuda_copy_d2h(be, host, gap_d, 2 * cd_piece(k, sizeof(double))));
    for (int64_t t = 0; t < k; t++) {
        gap[t] = host[t];
        n_iter[t] = ((const long long *)(host + cd_piece(k, sizeof(double)) / sizeof(double)))[t];
    }
done:
    free(host);
    gsb__cuda_free(be, mem);
    return rc;
}

extern "C" int gsb__cuda_gather_cols(const gsb__backend *be, const gsb__tensor *X,
                                     const int64_t *idx, int64_t m, gsb__tensor *out)
{
    const char *op = "gather_cols";
    int rc = need(be, op, "X", X, (gsb_dtype)0, -1, -1);
    if (rc != GSB_OK)
        return rc;
    const int64_t n = X->rows, p = X->cols;
    if ((rc = need(be, op, "out", out, X->dtype, n, m)) != GSB_OK)
        return rc;
    if (m > 0 && !idx)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: idx is missing", op);
    for (int64_t c = 0; c < m; c++)
        if (idx[c] < 0 || idx[c] >= p)
            return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: column %lld is outside [0, %lld)", op,
                                (long long)idx[c], (long long)p);
    if (n == 0 || m == 0)
        return GSB_OK;
    int64_t *idx_d = NULL;
    if ((rc = gsb__cuda_alloc(be, (size_t)m * sizeof(int64_t), (void **)&idx_d)) != GSB_OK)
        return rc;
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    GSB_CUDA_CHECK(gsb__cuda_copy_h2d(be, idx_d, idx, (size_t)m * sizeof(int64_t)));
    if (X->dtype == GSB_F32)
        gather_cols_kernel<float><<<blocks_for(be, n * m, GATHER_THREADS), GATHER_THREADS, 0,
                                    ctx->stream>>>((const float *)X->data, n, p, idx_d, m,
                                                   (float *)out->data);
    else
        gather_cols_kernel<double><<<blocks_for(be, n * m, GATHER_THREADS), GATHER_THREADS, 0,
                                     ctx->stream>>>((const double *)X->data, n, p, idx_d, m,
                                                    (double *)out->data);
    CUDA_CHECK(cudaGetLastError());
done:
    gsb__cuda_free(be, idx_d);
    return rc;
}
