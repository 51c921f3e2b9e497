/*
 * cuda_forest.cu - the forest ops on the GPU (contracts in backend/backend.h;
 * the CPU twins are in cpu_forest.c; forest_predict is in
 * cuda_forest_predict.cu).  Every candidate split is scored by
 * the formulas of forest_math.h, shared with the twin, in the same order of
 * candidates; what may differ is the order in which a histogram's sums were
 * added (atomics), so near-ties can go either way.
 *
 *  forest_bin        one thread per 4-byte word of codes (4 features of a row),
 *                    a binary search of each feature's edges.
 *  forest_hist       one block per (node, group of up to 4 listed features,
 *                    chunk of HIST_CHUNK samples): the group's histograms in
 *                    shared memory (double atomics), then added to the pool
 *                    slot (global double atomics), after a kernel zeroed the
 *                    slot's listed features.  Histograms too large for shared
 *                    memory are summed straight into the pool.
 *  forest_hist_sub   one thread per bin of the subtracted slots, the twin's
 *                    arithmetic and clean-up.
 *  forest_split      one block per (node, listed feature): the feature's
 *                    histogram in shared memory, copied from the pool slot or
 *                    summed from the node's samples; one warp per stat makes
 *                    the prefix sums over bins, one thread per bin scores its
 *                    candidates, a block reduction keeps the best (proxy, then
 *                    candidate order); then one thread per node reduces the
 *                    node's features with gsb__forest_reduce.  Nodes of at
 *                    most SMALL_N samples without a slot (the many small
 *                    nodes of deep levels) take one warp per node instead
 *                    (split_small): the node's samples loaded once, its
 *                    features in turn, no histogram, each distinct code of
 *                    the node's samples a candidate, the features' reduction
 *                    in the warp (no record per feature).  Other nodes of
 *                    at most MID_N samples without a slot take one warp per
 *                    node, its features in turn (split_mid): split_kernel's
 *                    steps on a histogram in the warp's own shared memory,
 *                    no block barriers.  When the items outnumber
 *                    split_kernel's grid its blocks take chunks of items and
 *                    skip the others' a chunk at a time.
 *                    GSB_PROFILE=2 times the four kernels of each call.
 *  forest_partition  one block per chunk of PART_CHUNK samples of a node:
 *                    count the chunk's left samples; one thread per node turns
 *                    counts into offsets; each chunk scatters its samples to
 *                    their stable places in the scratch arrays (warp ballots
 *                    rank them inside a tile); the chunks copy back.
 *
 * The small index tensors (nodes, feats, splits, pairs, best, n_left) may be
 * host tensors: the op reads the host copy to plan its grid and copies them
 * over; results go back to host tensors before the op returns.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_common.h"
#include "backend/forest_math.h"

namespace {

constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;
constexpr int64_t HIST_CHUNK = 8192;   /* samples per block of forest_hist */
constexpr int64_t PART_CHUNK = 4096;   /* samples per block of forest_partition */
constexpr int HIST_GROUP = 4;          /* features per block of forest_hist */
/* split records per pass (deep levels of a 100-tree regressor: millions of nodes x 32
 * features; each pass is three launches) */
constexpr size_t REC_BYTES = (size_t)256 << 20;
constexpr size_t HIST_SMEM = (size_t)64 << 10;  /* shared memory per forest_hist block */
constexpr int SMALL_N = 64;            /* nodes of at most this many samples: a warp each */
constexpr int SMALL_V = 16;            /* ... when a bin has at most this many stats */
constexpr int MID_N = 2048;            /* other nodes of at most this many: a warp each */
constexpr int MID_WARPS = 4;           /* warps per block of split_mid */
constexpr int MID_UNROLL = 4;          /* samples per lane whose loads split_mid batches */
constexpr int MID_SCAN = 4;            /* stats whose prefix sums split_mid interleaves */
constexpr int MID_BLOCKS = 6;          /* split_mid's blocks per SM: registers (80) unspilled */
constexpr size_t MID_HIST = 12 << 10;  /* ... when a histogram takes at most this many bytes */

/* ---- argument checks (a mismatch is a bug in the caller: GSB_EINTERNAL) ----------- */

/* t present, of dtype, rows x cols (-1: any), on be or (host_ok) on the host. */
int check(const gsb__backend *be, const gsb__tensor *t, gsb_dtype dtype, int64_t rows,
          int64_t cols, bool host_ok, const char *op, const char *name)
{
    return gsb__cuda_check_tensor(be, t, dtype, rows, cols, host_ok, op, name);
}

bool on_host(const gsb__tensor *t) { return t->be == gsb__cuda_host->cpu; }

/* The forest data as kernels read it. */
struct FData {
    const uint8_t *codes;
    int64_t stride;           /* bytes per row of codes */
    int F, nb, nan_code, K, O, V1;
    const int32_t *rows;
    const float *w;
    const int32_t *cls;
    const double *y;
    double *pool;
    int64_t slot_len;         /* F * nb * V1 */
};

int data_of(const gsb__backend *be, const gsb__forest_data *d, bool need_pool, const char *op,
            FData *out)
{
    if (!d || !d->codes || !d->y || !d->rows || !d->weights)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: forest data incomplete", op);
    if (d->n_features < 1 || d->n_features > INT_MAX || d->n_bins < 1 || d->n_bins > 256 ||
        (d->nan_code >= 0 && d->nan_code != d->n_bins - 1) ||
        (d->n_classes <= 0 && d->n_outputs <= 0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: bad forest shape", op);
    const int64_t n = d->codes->rows, S = d->rows->rows * d->rows->cols;
    int rc = check(be, d->codes, GSB_I32, n, (d->n_features + 3) / 4, false, op, "codes");
    if (rc == GSB_OK)
        rc = d->n_classes > 0 ? check(be, d->y, GSB_I32, -1, -1, false, op, "y")
                              : check(be, d->y, GSB_F64, n, 2 * d->n_outputs, false, op, "y");
    const int64_t y_len = n * (d->n_classes > 0 ? 1 : 2 * d->n_outputs);
    if (rc == GSB_OK && d->y->rows * d->y->cols != y_len)
        rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: y has the wrong size", op);
    if (rc == GSB_OK)
        rc = check(be, d->rows, GSB_I32, -1, -1, false, op, "rows");
    if (rc == GSB_OK)
        rc = check(be, d->weights, GSB_F32, -1, -1, false, op, "weights");
    if (rc == GSB_OK && d->weights->rows * d->weights->cols != S)
        rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: weights and rows differ in size", op);
    if (rc != GSB_OK)
        return rc;
    const int V1 = gsb__forest_nstats(d->n_classes, d->n_outputs);
    FData f = {(const uint8_t *)d->codes->data, 4 * d->codes->cols, (int)d->n_features,
               d->n_bins, d->nan_code, d->n_classes > 0 ? d->n_classes : 0,
               d->n_classes > 0 ? 0 : d->n_outputs, V1, (const int32_t *)d->rows->data,
               (const float *)d->weights->data, NULL, NULL, NULL,
               d->n_features * d->n_bins * (int64_t)V1};
    if (d->n_classes > 0)
        f.cls = (const int32_t *)d->y->data;
    else
        f.y = (const double *)d->y->data;
    if (d->pool) {
        if ((rc = check(be, d->pool, GSB_F64, -1, f.slot_len, false, op, "pool")) != GSB_OK)
            return rc;
        f.pool = (double *)d->pool->data;
    } else if (need_pool) {
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: no histogram pool", op);
    }
    *out = f;
    return GSB_OK;
}

/* ---- small tensors that may live on the host -------------------------------------- */

/* Device scratch for count elements of size bytes (none for 0). */
int scratch(const gsb__backend *be, int64_t count, size_t size, void **out)
{
    *out = NULL;
    return gsb__cuda_alloc(be, (size_t)(count > 0 ? count : 1) * size, out);
}

/* The host copy of t (count elements of size): t's own data on the host, else a
 * download into *tmp (malloc'ed, freed by the caller). */
int host_view(const gsb__backend *be, const gsb__tensor *t, size_t size, const void **out,
              void **tmp)
{
    *tmp = NULL;
    size_t bytes = (size_t)(t->rows * t->cols) * size;
    if (on_host(t)) {
        *out = t->data;
        return GSB_OK;
    }
    *tmp = malloc(bytes ? bytes : 1);
    if (!*tmp)
        return GSB_CUDA_ERR(GSB_ENOMEM, "out of host memory (%zu bytes)", bytes);
    *out = *tmp;
    return bytes ? gsb__cuda_copy_d2h(be, *tmp, t->data, bytes) : GSB_OK;
}

/* t on the device: its data, or a copy of the host data in scratch *tmp. */
int device_view(const gsb__backend *be, const gsb__tensor *t, size_t size, const void **out,
                void **tmp)
{
    *tmp = NULL;
    if (!on_host(t)) {
        *out = t->data;
        return GSB_OK;
    }
    size_t bytes = (size_t)(t->rows * t->cols) * size;
    int rc = scratch(be, t->rows * t->cols, size, tmp);
    if (rc == GSB_OK && bytes)
        rc = gsb__cuda_copy_h2d(be, *tmp, t->data, bytes);
    *out = *tmp;
    return rc;
}

/* The largest dynamic shared memory a block may take on this device. */
int smem_optin(const gsb__backend *be, size_t *out)
{
    int v = 0;
    CUDA_TRY(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                    gsb__cuda_ctx_of(be)->device));
    *out = (size_t)v;
    return GSB_OK;
}

/* Blocks of split_kernel: enough to fill the device several times over. */
int64_t split_blocks(const gsb__backend *be)
{
    const int64_t sms = gsb__cuda_ctx_of(be)->sm_count;
    return (sms > 0 ? sms : 80) * 32;
}

/* GSB_PROFILE=2: forest_split's kernels timed with events (each call then waits
 * for them), a line per call on stderr. */
bool split_trace_on()
{
    static const bool on = [] {
        const char *e = getenv("GSB_PROFILE");
        return e && strcmp(e, "2") == 0;
    }();
    return on;
}

unsigned grid_for(const gsb__backend *be, int64_t work)
{
    int64_t sms = gsb__cuda_ctx_of(be)->sm_count;
    int64_t cap = (sms > 0 ? sms : 80) * 16;
    int64_t want = (work + THREADS - 1) / THREADS;
    return (unsigned)(want < 1 ? 1 : want < cap ? want : cap);
}

/* ---- forest_bin ------------------------------------------------------------------- */

template <typename T>
__global__ void bin_kernel(const T *__restrict__ X, int64_t n, int64_t d,
                           const float *__restrict__ edges, int64_t ne, int nan_code,
                           uint32_t *__restrict__ codes, int64_t words)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n * words;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = k / words, f0 = (k % words) * 4;
        uint32_t word = 0;
        for (int q = 0; q < 4; q++) {
            const int64_t f = f0 + q;
            if (f >= d)
                break;
            const float x = (float)X[i * d + f];
            uint32_t c;
            if (isnan(x)) {
                c = (uint32_t)nan_code;
            } else { /* the number of edges below x */
                const float *e = edges + f * ne;
                int64_t lo = 0, hi = ne;
                while (lo < hi) {
                    const int64_t mid = (lo + hi) / 2;
                    if (e[mid] < x)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                c = (uint32_t)lo;
            }
            word |= (c & 0xffu) << (8 * q); /* byte q of the word is feature f0 + q */
        }
        codes[k] = word;
    }
}

/* ---- stats ------------------------------------------------------------------------ */

/* h (a bin's V1 stats, shared or global) += sample i of row r */
__device__ inline void add_sample(const FData &d, int64_t i, int32_t r, double *h)
{
    const double wi = d.w[i];
    atomicAdd(&h[0], 1.0);
    if (d.K > 0) {
        atomicAdd(&h[1 + d.cls[r]], wi);
        return;
    }
    atomicAdd(&h[1], wi);
    const double *yr = d.y + (int64_t)r * 2 * d.O;
    for (int k = 0; k < 2 * d.O; k++)
        atomicAdd(&h[2 + k], wi * yr[k]);
}

__device__ inline int code_of(const FData &d, int32_t r, int f)
{
    return d.codes[(int64_t)r * d.stride + f];
}

/* the feature at position j of node b's list (feats NULL: every feature) */
__device__ inline int feature_at(const int32_t *feats, int64_t m, int64_t b, int64_t j)
{
    return feats ? feats[b * m + j] : (int)j;
}

/* ---- forest_hist ------------------------------------------------------------------ */

/* Block (b, j): zero the listed feature j of node b's slot. */
__global__ void hist_zero(FData d, const int32_t *__restrict__ nodes,
                          const int32_t *__restrict__ feats, int64_t m)
{
    const int64_t b = blockIdx.x / m, j = blockIdx.x % m;
    const int f = feature_at(feats, m, b, j);
    if (f < 0)
        return;
    const int64_t per = (int64_t)d.nb * d.V1;
    double *h = d.pool + nodes[3 * b + 2] * d.slot_len + f * per;
    for (int64_t k = threadIdx.x; k < per; k += blockDim.x)
        h[k] = 0.0;
}

/* One unit of forest_hist's work: node b, features j0 .. j0 + group - 1 of its list,
 * samples [start, end). */
struct HistWork {
    int32_t b, j0, start, end;
};

/* The group's histograms in shared memory, then into the pool. */
__global__ void hist_shared(FData d, const int32_t *__restrict__ nodes,
                            const int32_t *__restrict__ feats, int64_t m, int group,
                            const HistWork *__restrict__ work)
{
    extern __shared__ double sh[];
    const HistWork wk = work[blockIdx.x];
    const int64_t per = (int64_t)d.nb * d.V1;
    int fs[HIST_GROUP]; /* indexed by unrolled loops only: registers */
#pragma unroll
    for (int q = 0; q < HIST_GROUP; q++)
        fs[q] = q < group && wk.j0 + q < m ? feature_at(feats, m, wk.b, wk.j0 + q) : -1;
    for (int64_t k = threadIdx.x; k < group * per; k += blockDim.x)
        sh[k] = 0.0;
    __syncthreads();
    for (int64_t i = wk.start + threadIdx.x; i < wk.end; i += blockDim.x) {
        const int32_t r = d.rows[i];
#pragma unroll
        for (int q = 0; q < HIST_GROUP; q++)
            if (fs[q] >= 0)
                add_sample(d, i, r, sh + q * per + (int64_t)code_of(d, r, fs[q]) * d.V1);
    }
    __syncthreads();
    double *slot = d.pool + nodes[3 * wk.b + 2] * d.slot_len;
#pragma unroll
    for (int q = 0; q < HIST_GROUP; q++) {
        if (fs[q] < 0)
            continue;
        for (int64_t k = threadIdx.x; k < per; k += blockDim.x) {
            const double v = sh[q * per + k];
            if (v != 0.0)
                atomicAdd(slot + fs[q] * per + k, v);
        }
    }
}

/* Histograms too large for shared memory: straight into the pool. */
__global__ void hist_global(FData d, const int32_t *__restrict__ nodes,
                            const int32_t *__restrict__ feats, int64_t m,
                            const HistWork *__restrict__ work)
{
    const HistWork wk = work[blockIdx.x];
    const int f = feature_at(feats, m, wk.b, wk.j0);
    if (f < 0)
        return;
    double *h = d.pool + nodes[3 * wk.b + 2] * d.slot_len + f * (int64_t)d.nb * d.V1;
    for (int64_t i = wk.start + threadIdx.x; i < wk.end; i += blockDim.x) {
        const int32_t r = d.rows[i];
        add_sample(d, i, r, h + (int64_t)code_of(d, r, f) * d.V1);
    }
}

/* ---- forest_hist_sub -------------------------------------------------------------- */

__global__ void hist_sub_kernel(FData d, const int32_t *__restrict__ pairs, int64_t P)
{
    const int64_t bins = (int64_t)d.F * d.nb;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < P * bins;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = k / bins, bin = k % bins;
        double *dst = d.pool + pairs[2 * p] * d.slot_len + bin * d.V1;
        const double *src = d.pool + pairs[2 * p + 1] * d.slot_len + bin * d.V1;
        double total = 0.0;
        for (int s = 0; s < d.V1; s++) {
            dst[s] -= src[s];
            total += s > 0 ? fabs(dst[s]) : 0.0;
        }
        if (dst[0] < 0.5) {
            for (int s = 0; s < d.V1; s++)
                dst[s] = 0.0;
        } else if (d.K > 0) {
            for (int s = 1; s < d.V1; s++)
                if (dst[s] < 1e-9 * total)
                    dst[s] = 0.0;
        }
    }
}

/* ---- forest_split ----------------------------------------------------------------- */

struct Rule {
    int criterion, first_only;
    double min_leaf, min_weight;
};

/* Which kernel searches node b's splits: split_small (no pool slot, at most small_n
 * samples), split_mid (no slot, at most mid_n), else split_kernel; 0 turns a kind off. */
struct Kinds {
    int small_n, mid_n;
};
enum { KIND_SMALL, KIND_MID, KIND_BIG };

__device__ inline int node_kind(const int32_t *nodes, int64_t b, Kinds k)
{
    if (nodes[3 * b + 2] >= 0)
        return KIND_BIG;
    const int n = nodes[3 * b + 1] - nodes[3 * b];
    return k.small_n > 0 && n <= k.small_n ? KIND_SMALL
           : k.mid_n > 0 && n <= k.mid_n   ? KIND_MID
                                           : KIND_BIG;
}

/* An unlisted feature's record: ignored by the reduction. */
__device__ inline void rec_unlisted(double *rec, int rec_len)
{
    for (int s = 0; s < rec_len; s++)
        rec[s] = 0.0;
    rec[GSB__FREC_PROXY] = -INFINITY;
    rec[GSB__FREC_FEATURE] = -1;
}

/* Samples of a small node as a warp holds them in shared memory. */
struct SmallNode {
    int n;
    const int *code;      /* the current feature's codes */
    const int32_t *row;
    const float *w;
    const int32_t *cls;   /* classification: each sample's class (else NULL) */
    const double *y;      /* one output: each sample's [y, q] (else NULL) */
};

/* acc plus what sample q of the node adds to stat s (add_sample's terms; the
 * targets from shared memory where cached, products rounded before the sum as
 * the CPU twin's).  Every sum split_small makes goes through it, so a
 * candidate's left side, the record's and the totals agree bit for bit. */
__device__ inline double small_add(const FData &d, const SmallNode &sn, int q, int s, double acc)
{
    if (s == 0)
        return acc + 1.0;
    const double w = (double)sn.w[q];
    if (d.K > 0)
        return sn.cls[q] == s - 1 ? acc + w : acc;
    if (s == 1)
        return acc + w;
    const double y = sn.y ? sn.y[2 * q + (s - 2)] : d.y[(int64_t)sn.row[q] * 2 * d.O + (s - 2)];
    return GSB__FOREST_MULADD(acc, w, y);
}

/* One threshold c with left statistics P (K classes or O outputs, as the forest
 * data's: literals let the compiler keep P in registers): the missing values right,
 * then (where the node has some: nanrow) left; the better kept in (bp, bo).  Every
 * split kernel. */
__device__ inline void consider_threshold(int K, int O, const Rule &rule, const double *P,
                                          const double *nanrow, const double *tot, int n_real,
                                          int c, double &bp, int &bo)
{
    for (int nan_left = 0; nan_left < (nanrow ? 2 : 1); nan_left++) {
        const double p = gsb__forest_proxy(P, nan_left ? nanrow : NULL, tot, K, O,
                                           rule.criterion, rule.min_leaf, rule.min_weight);
        const int o = gsb__forest_order(n_real, c, nan_left, 0);
        if (gsb__forest_better(p, o, bp, bo)) {
            bp = p;
            bo = o;
        }
    }
}

/* out[s] (V1) = the stats of the node's real samples of code <= c, added in
 * sample order (small_add's sums; the common shapes without its zero terms:
 * x + 0.0 == x, the same sums). */
__device__ inline void small_left(const FData &d, const SmallNode &sn, int c, double *out)
{
    for (int s = 0; s < d.V1; s++)
        out[s] = 0.0;
    for (int q = 0; q < sn.n; q++) {
        const int cq = sn.code[q];
        if (cq == d.nan_code || cq > c)
            continue;
        if (sn.cls) {
            out[0] += 1.0;
            out[1 + sn.cls[q]] += (double)sn.w[q];
        } else {
            for (int s = 0; s < d.V1; s++)
                out[s] = small_add(d, sn, q, s, out[s]);
        }
    }
}

/* small_left of one output (no classes: V1 4), the sums in registers: the same
 * additions. */
__device__ inline void small_left1(const FData &d, const SmallNode &sn, int c, double *out)
{
    double n = 0.0, w = 0.0, sy = 0.0, sq = 0.0;
    for (int q = 0; q < sn.n; q++) {
        const int cq = sn.code[q];
        if (cq == d.nan_code || cq > c)
            continue;
        const double wq = (double)sn.w[q];
        n += 1.0;
        w += wq;
        sy = GSB__FOREST_MULADD(sy, wq, sn.y[2 * q]);
        sq = GSB__FOREST_MULADD(sq, wq, sn.y[2 * q + 1]);
    }
    out[0] = n;
    out[1] = w;
    out[2] = sy;
    out[3] = sq;
}

/* Lane s < V1 of a warp: stat s of the node's samples q that `pick` keeps, in sample
 * order. */
template <typename Pick>
__device__ inline double small_stat(const FData &d, const SmallNode &sn, int s, Pick pick)
{
    double acc = 0.0;
    for (int q = 0; q < sn.n; q++)
        if (pick(q))
            acc = small_add(d, sn, q, s, acc);
    return acc;
}

/* Per warp of split_small: the node's samples, the current feature's sums, the best
 * record so far. */
constexpr int SMALL_REC = GSB__FREC_LEFT + 2 * SMALL_V;
struct SmallShared {
    int code[SMALL_N];
    int32_t row[SMALL_N];
    float w[SMALL_N];
    int32_t cls[SMALL_N];
    double y[2 * SMALL_N];
    double all[SMALL_V], real[SMALL_V], nan[SMALL_V], tot[SMALL_V];
    double rec[SMALL_REC];
};

/* Lane k's samples (lane, lane + 32) of the node: their codes of feature f (-1: none). */
__device__ inline void small_codes(const FData &d, const SmallShared &sh, int n, int f, int lane,
                                   int *c)
{
    for (int k = 0; k < 2; k++) {
        const int q = lane + 32 * k;
        c[k] = f >= 0 && q < n ? code_of(d, sh.row[q], f) : -1;
    }
}

/* The listed feature j of node b (warp-uniform j; chunk: the lanes' entries j & ~31 ..). */
__device__ inline int small_feature(const int32_t *__restrict__ feats, int64_t m, int64_t b,
                                    int64_t j, int lane, int32_t &chunk)
{
    if (j % 32 == 0)
        chunk = j + lane < m ? feats[b * m + j + lane] : -1;
    return __shfl_sync(0xffffffffu, chunk, (int)(j % 32));
}

/* The warp's best candidate (proxy bp, order bo) by gsb__forest_better: a
 * butterfly over the 32 lanes (lane 0 holds the result). */
__device__ inline void warp_best(double &bp, int &bo)
{
    for (int k = 16; k > 0; k /= 2) {
        const double op = __shfl_xor_sync(0xffffffffu, bp, k);
        const int oo = __shfl_xor_sync(0xffffffffu, bo, k);
        if (gsb__forest_better(op, oo, bp, bo)) {
            bp = op;
            bo = oo;
        }
    }
}

/*
 * One warp per node of the pass that split_kernel leaves (no slot, at most
 * SMALL_N samples, V1 <= SMALL_V): the node's record, as split_kernel's
 * records and split_reduce would make it, straight into out.  The node's
 * samples (rows, weights, classes or one output's targets) go to shared
 * memory once; then the listed features in order, each feature's codes loaded
 * one feature ahead: the candidates are the node's distinct real codes below
 * its largest (a lane per sample, the first sample of each code), each scored
 * on its left stats summed in sample order (small_left); the totals are the
 * node's (summed once, a lane per stat) unless the feature has missing
 * values.  The best (proxy, candidate order) by a warp reduction; a feature's
 * record replaces the best so far when its proxy is larger (ties to the
 * earlier feature), among the non-constant features (only the first with
 * first_only), as gsb__forest_reduce.
 */
__global__ void split_small(FData d, const int32_t *__restrict__ nodes,
                            const int32_t *__restrict__ feats, int64_t m, int64_t b0,
                            int64_t count, Rule rule, int n_real, int rec_len, Kinds kinds,
                            double *__restrict__ out)
{
    __shared__ SmallShared s_all[WARPS];
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32;
    const int64_t b = b0 + blockIdx.x * (int64_t)WARPS + wp;
    if (b >= b0 + count || node_kind(nodes, b, kinds) != KIND_SMALL)
        return; /* split_mid's or split_kernel's */
    SmallShared &sh = s_all[wp];
    const int32_t start = nodes[3 * b];
    const SmallNode sn = {nodes[3 * b + 1] - start, sh.code, sh.row, sh.w,
                          d.K > 0 ? sh.cls : NULL, d.O == 1 ? sh.y : NULL};
    for (int q = lane; q < sn.n; q += 32) {
        const int32_t r = d.rows[start + q];
        sh.row[q] = r;
        sh.w[q] = d.w[start + q];
        if (d.K > 0)
            sh.cls[q] = d.cls[r];
        if (d.O == 1) {
            sh.y[2 * q] = d.y[2 * (int64_t)r];
            sh.y[2 * q + 1] = d.y[2 * (int64_t)r + 1];
        }
    }
    __syncwarp();
    if (lane < d.V1) /* the node's totals: a feature's unless it has missing values */
        sh.all[lane] = small_stat(d, sn, lane, [](int) { return true; });
    int32_t chunk = -1;
    int nonconst_n = 0, have = 0, cur[2], nxt[2];
    double best_p = -INFINITY;
    int f = m > 0 ? small_feature(feats, m, b, 0, lane, chunk) : -1;
    small_codes(d, sh, sn.n, f >= 0 && f < d.F ? f : -1, lane, cur);
    for (int64_t j = 0; j < m; j++) {
        const int fn = j + 1 < m ? small_feature(feats, m, b, j + 1, lane, chunk) : -1;
        small_codes(d, sh, sn.n, fn >= 0 && fn < d.F ? fn : -1, lane, nxt); /* ahead */
        const int fc = f;
        f = fn;
        const int c0 = cur[0], c1 = cur[1];
        cur[0] = nxt[0];
        cur[1] = nxt[1];
        if (fc < 0 || fc >= d.F)
            continue; /* unlisted: ignored */
        __syncwarp(); /* the last feature is done with the codes and sums */
        if (lane < sn.n)
            sh.code[lane] = c0;
        if (lane + 32 < sn.n)
            sh.code[lane + 32] = c1;
        __syncwarp();
        /* per sample: the first of its code?  the codes seen: distinct ones, the largest real */
        int first[2] = {0, 0}, distinct = 0, top = -1, mine_nan = 0;
        for (int k = 0; k < 2; k++) {
            const int q = lane + 32 * k;
            if (q >= sn.n)
                continue;
            const int c = sn.code[q];
            first[k] = 1;
            for (int u = 0; u < q && first[k]; u++)
                first[k] = sn.code[u] != c;
            distinct += first[k];
            mine_nan |= c == d.nan_code;
            if (c != d.nan_code && c > top)
                top = c;
        }
        for (int k = 16; k > 0; k /= 2) {
            distinct += __shfl_xor_sync(0xffffffffu, distinct, k);
            top = max(top, __shfl_xor_sync(0xffffffffu, top, k));
        }
        const bool has_nan = __any_sync(0xffffffffu, mine_nan) != 0;
        if (distinct < 2)
            continue; /* constant: not counted */
        if (++nonconst_n > 1 && rule.first_only)
            continue; /* counted, not searched */
        if (has_nan && lane < d.V1) {
            const int nc = d.nan_code;
            const int *code = sn.code;
            const double real = small_stat(d, sn, lane, [=](int q) { return code[q] != nc; });
            const double nan = small_stat(d, sn, lane, [=](int q) { return code[q] == nc; });
            sh.real[lane] = real;
            sh.nan[lane] = nan;
            sh.tot[lane] = real + nan;
        }
        __syncwarp();
        const double *tot = has_nan ? sh.tot : sh.all, *nanrow = has_nan ? sh.nan : NULL;
        double bp = -INFINITY, P[SMALL_V];
        int bo = INT_MAX;
        for (int k = 0; k < 2; k++) {
            const int q = lane + 32 * k;
            if (!first[k] || q >= sn.n)
                continue;
            const int c = sn.code[q];
            if (c == d.nan_code || c >= top) /* a real code with a real one after it */
                continue;
            if (sn.y) { /* one output: the left side in registers */
                double P1[4];
                small_left1(d, sn, c, P1);
                consider_threshold(0, 1, rule, P1, nanrow, tot, n_real, c, bp, bo);
            } else {
                small_left(d, sn, c, P);
                consider_threshold(d.K, d.O, rule, P, nanrow, tot, n_real, c, bp, bo);
            }
        }
        if (lane == 0 && has_nan && top >= 0) { /* all values left */
            const double p = gsb__forest_proxy(sh.real, NULL, tot, d.K, d.O, rule.criterion,
                                               rule.min_leaf, rule.min_weight);
            const int o = gsb__forest_order(n_real, 0, 0, 1);
            if (gsb__forest_better(p, o, bp, bo)) {
                bp = p;
                bo = o;
            }
        }
        warp_best(bp, bo);
        bp = __shfl_sync(0xffffffffu, bp, 0);
        bo = __shfl_sync(0xffffffffu, bo, 0);
        if (!(bp > -INFINITY) || (have && !(bp > best_p)))
            continue; /* no candidate, or not better than an earlier feature's */
        have = 1;
        best_p = bp;
        const int all_left = bo == n_real, ml = bo > n_real;
        const int lo = all_left ? top : ml ? bo - n_real - 1 : bo;
        int hi = n_real; /* the first real code after lo */
        for (int k = 0; k < 2 && !all_left; k++) {
            const int q = lane + 32 * k;
            const int c = q < sn.n ? sn.code[q] : d.nan_code;
            if (c != d.nan_code && c > lo && c < hi)
                hi = c;
        }
        for (int k = 16; k > 0; k /= 2)
            hi = min(hi, __shfl_xor_sync(0xffffffffu, hi, k));
        if (lane < d.V1) { /* the left side's stat, as small_left sums it */
            const int nc = d.nan_code, *code = sn.code;
            const double P_s =
                all_left ? sh.real[lane]
                         : small_stat(d, sn, lane,
                                      [=](int q) { return code[q] != nc && code[q] <= lo; });
            const double l = P_s + (ml ? nanrow[lane] : 0.0);
            sh.rec[GSB__FREC_LEFT + lane] = l;
            sh.rec[GSB__FREC_LEFT + d.V1 + lane] = tot[lane] - l;
        }
        __syncwarp();
        if (lane == 0) {
            sh.rec[GSB__FREC_PROXY] = bp;
            sh.rec[GSB__FREC_FEATURE] = fc;
            sh.rec[GSB__FREC_BIN_LO] = lo;
            sh.rec[GSB__FREC_BIN_HI] = hi;
            if (!ml && !all_left && !has_nan) /* no missing values: the side with more samples */
                sh.rec[GSB__FREC_MISSING_LEFT] = sh.rec[GSB__FREC_LEFT] >
                                                 sh.rec[GSB__FREC_LEFT + d.V1];
            else
                sh.rec[GSB__FREC_MISSING_LEFT] = ml;
        }
    }
    __syncwarp();
    double *o = out + b * rec_len;
    for (int s = lane; s < rec_len; s += 32) {
        double v = have ? sh.rec[s] : s == GSB__FREC_PROXY ? -INFINITY
                                    : s == GSB__FREC_FEATURE ? -1.0 : 0.0;
        o[s] = s == GSB__FREC_NONCONST ? (double)nonconst_n : v;
    }
}

/* ---- split searches from a histogram (split_kernel's blocks, split_mid's warps) ---- */

/* A warp: stats s0 .. s0 + NS - 1 (those below V1) of histogram H (nb x V1) into
 * prefix sums over the real bins (32 bins a step, a shuffle scan: another order of
 * additions than the twin's, the same sums when they are exact; the NS scans
 * interleaved, each stat's additions as a scan of its own), tot[s] the total with the
 * missing bin (nanrow). */
template <int NS>
__device__ inline void scan_stats(double *H, int V1, int n_real, const double *nanrow, int s0,
                                  int lane, double *tot)
{
    double run[NS];
#pragma unroll
    for (int t = 0; t < NS; t++)
        run[t] = 0.0;
    for (int c0 = 0; c0 < n_real; c0 += 32) {
        const int c = c0 + lane;
        double v[NS];
#pragma unroll
        for (int t = 0; t < NS; t++)
            v[t] = c < n_real && s0 + t < V1 ? H[(int64_t)c * V1 + s0 + t] : 0.0;
#pragma unroll
        for (int k = 1; k < 32; k *= 2) { /* inclusive scans: lanes below add in order */
#pragma unroll
            for (int t = 0; t < NS; t++) {
                const double u = __shfl_up_sync(0xffffffffu, v[t], k);
                if (lane >= k)
                    v[t] = u + v[t];
            }
        }
#pragma unroll
        for (int t = 0; t < NS; t++) {
            if (c < n_real && s0 + t < V1)
                H[(int64_t)c * V1 + s0 + t] = run[t] + v[t];
            run[t] += __shfl_sync(0xffffffffu, v[t], 31);
        }
    }
#pragma unroll
    for (int t = 0; t < NS; t++)
        if (lane == 0 && s0 + t < V1)
            tot[s0 + t] = run[t] + (nanrow ? nanrow[s0 + t] : 0.0);
}

/* A scanned histogram's candidates at bins c0, c0 + step, ... (a non-empty bin with a
 * non-empty real bin after it), then (all: one thread) "all values left" where missing
 * values are; the best kept in (bp, bo). */
__device__ inline void hist_candidates(const FData &d, const Rule &rule, const double *H,
                                       const double *tot, const double *nanrow, bool has_nan,
                                       int n_real, int c0, int step, bool all, double &bp,
                                       int &bo)
{
    const int V1 = d.V1;
    const double real_count = n_real > 0 ? H[(int64_t)(n_real - 1) * V1] : 0.0;
    for (int c = c0; c < n_real; c += step) {
        const double *P = H + (int64_t)c * V1;
        const double before = c > 0 ? H[(int64_t)(c - 1) * V1] : 0.0;
        if (!(P[0] - before > 0.5) || !(P[0] < real_count - 0.5))
            continue;
        consider_threshold(d.K, d.O, rule, P, has_nan ? nanrow : NULL, tot, n_real, c, bp,
                           bo);
    }
    if (all && has_nan && real_count > 0.5) { /* all values left */
        const double p = gsb__forest_proxy(H + (int64_t)(n_real - 1) * V1, NULL, tot, d.K, d.O,
                                           rule.criterion, rule.min_leaf, rule.min_weight);
        const int o = gsb__forest_order(n_real, 0, 0, 1);
        if (gsb__forest_better(p, o, bp, bo)) {
            bp = p;
            bo = o;
        }
    }
}

/* One thread: feature f's record from its scanned histogram and its best candidate
 * (bp, bo). */
__device__ inline void hist_record(const FData &d, const double *H, const double *tot,
                                   const double *nanrow, bool has_nan, int n_real, int f,
                                   bool nonconst, double bp, int bo, int rec_len, double *rec)
{
    const int V1 = d.V1;
    for (int s = 0; s < rec_len; s++)
        rec[s] = 0.0;
    rec[GSB__FREC_PROXY] = -INFINITY;
    rec[GSB__FREC_FEATURE] = f;
    rec[GSB__FREC_NONCONST] = nonconst ? 1.0 : 0.0;
    if (!(bp > -INFINITY))
        return;
    const int all_left = bo == n_real, ml = bo > n_real;
    int lo = ml ? bo - n_real - 1 : bo;
    if (all_left) /* the last non-empty real bin */
        for (lo = n_real - 1; lo > 0 && !(H[(int64_t)lo * V1] - H[(int64_t)(lo - 1) * V1] > 0.5);)
            lo--;
    int hi = n_real;
    if (!all_left) /* the first non-empty real bin after lo */
        for (hi = lo + 1; hi < n_real && !(H[(int64_t)hi * V1] - H[(int64_t)(hi - 1) * V1] > 0.5);)
            hi++;
    const double *lp = H + (int64_t)lo * V1;
    for (int s = 0; s < V1; s++) {
        const double l = lp[s] + (ml ? nanrow[s] : 0.0);
        rec[GSB__FREC_LEFT + s] = l;
        rec[GSB__FREC_LEFT + V1 + s] = tot[s] - l;
    }
    rec[GSB__FREC_PROXY] = bp;
    rec[GSB__FREC_BIN_LO] = lo;
    rec[GSB__FREC_BIN_HI] = hi;
    if (!ml && !all_left && !has_nan) /* no missing values: the side with more samples */
        rec[GSB__FREC_MISSING_LEFT] = rec[GSB__FREC_LEFT] > rec[GSB__FREC_LEFT + V1];
    else
        rec[GSB__FREC_MISSING_LEFT] = ml;
}

/* Item (b, j) of a pass over nodes b0 .. (the whole block): the record of node
 * b0 + b's listed feature j.  Shared: the histogram (nb x V1, then prefix sums
 * over the real bins), the totals. */
__device__ void split_item(const FData &d, const int32_t *__restrict__ nodes,
                           const int32_t *__restrict__ feats, int64_t m, int64_t b0,
                           const Rule &rule, int n_real, int rec_len,
                           double *__restrict__ recs, int64_t item)
{
    extern __shared__ double H[];
    __shared__ double best_p[THREADS];
    __shared__ int best_o[THREADS];
    __shared__ int nonempty;
    const int64_t b = b0 + item / m, j = item % m;
    double *rec = recs + item * rec_len;
    const int f = feats[b * m + j];
    const int V1 = d.V1;
    const int64_t per = (int64_t)d.nb * V1;
    double *tot = H + per;
    if (f < 0 || f >= d.F) { /* the whole block leaves: an unlisted entry, ignored by the reduction */
        if (threadIdx.x == 0)
            rec_unlisted(rec, rec_len);
        return;
    }
    const int32_t start = nodes[3 * b], end = nodes[3 * b + 1], slot = nodes[3 * b + 2];
    if (slot >= 0) {
        const double *src = d.pool + slot * d.slot_len + f * per;
        for (int64_t k = threadIdx.x; k < per; k += blockDim.x)
            H[k] = src[k];
    } else {
        for (int64_t k = threadIdx.x; k < per; k += blockDim.x)
            H[k] = 0.0;
        __syncthreads();
        for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
            const int32_t r = d.rows[i];
            add_sample(d, i, r, H + (int64_t)code_of(d, r, f) * V1);
        }
    }
    if (threadIdx.x == 0)
        nonempty = 0;
    __syncthreads();
    int mine = 0; /* non-empty codes, the missing-value code included */
    for (int c = threadIdx.x; c < d.nb; c += blockDim.x)
        mine += H[(int64_t)c * V1] > 0.5;
    if (mine)
        atomicAdd(&nonempty, mine);
    __syncthreads();
    const double *nanrow = d.nan_code >= 0 ? H + (int64_t)d.nan_code * V1 : NULL;
    for (int s = threadIdx.x / 32; s < V1; s += WARPS) /* a stat per warp */
        scan_stats<1>(H, V1, n_real, nanrow, s, threadIdx.x % 32, tot);
    __syncthreads();
    const bool nonconst = nonempty >= 2, has_nan = nanrow && nanrow[0] > 0.5;
    double bp = -INFINITY;
    int bo = INT_MAX;
    if (nonconst)
        hist_candidates(d, rule, H, tot, nanrow, has_nan, n_real, threadIdx.x, blockDim.x,
                        threadIdx.x == 0, bp, bo);
    best_p[threadIdx.x] = bp;
    best_o[threadIdx.x] = bo;
    __syncthreads();
    for (int h = THREADS / 2; h > 0; h /= 2) {
        if ((int)threadIdx.x < h &&
            gsb__forest_better(best_p[threadIdx.x + h], best_o[threadIdx.x + h],
                               best_p[threadIdx.x], best_o[threadIdx.x])) {
            best_p[threadIdx.x] = best_p[threadIdx.x + h];
            best_o[threadIdx.x] = best_o[threadIdx.x + h];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        hist_record(d, H, tot, nanrow, has_nan, n_real, f, nonconst, best_p[0], best_o[0],
                    rec_len, rec);
}

/* Blocks stride over chunks of `chunk` (<= THREADS) consecutive items (node,
 * feature) of a pass: the threads test a chunk's items at once and the block
 * runs split_item on those of large nodes (split_small and split_mid take the
 * others), so the many small items of deep levels cost a block one parallel
 * load each, not a pass of the item loop each (the order the items run in does
 * not matter: each writes its own record). */
__global__ void split_kernel(FData d, const int32_t *__restrict__ nodes,
                             const int32_t *__restrict__ feats, int64_t m, int64_t b0,
                             int64_t count, Rule rule, int n_real, int rec_len, Kinds kinds,
                             int chunk, double *__restrict__ recs)
{
    __shared__ int s_off[THREADS];
    __shared__ int s_n;
    const int64_t total = count * m;
    for (int64_t c0 = blockIdx.x * (int64_t)chunk; c0 < total;
         c0 += (int64_t)gridDim.x * chunk) {
        __syncthreads(); /* the last chunk's items are done with shared memory and s_n */
        if (threadIdx.x == 0)
            s_n = 0;
        __syncthreads();
        const int64_t item = c0 + threadIdx.x;
        if ((int)threadIdx.x < chunk && item < total &&
            node_kind(nodes, b0 + item / m, kinds) == KIND_BIG)
            s_off[atomicAdd(&s_n, 1)] = (int)threadIdx.x;
        __syncthreads();
        const int n = s_n;
        for (int k = 0; k < n; k++) {
            __syncthreads(); /* the last item's shared memory is free */
            split_item(d, nodes, feats, m, b0, rule, n_real, rec_len, recs, c0 + s_off[k]);
        }
    }
}

/*
 * Nodes of more than SMALL_N samples (or any, when split_small is off) up to
 * MID_N without a slot: a warp per (node of the pass, group of its listed
 * features: `groups` per node, more when the pass has few nodes), the group's
 * features in turn, each feature's histogram in the warp's own shared memory
 * (no block barriers; blocks of MID_WARPS warps stride over the work), then
 * split_item's steps a warp at a time: non-empty bins, prefix sums MID_SCAN
 * stats at a time, the candidates a bin per lane, a warp reduction, the record.
 */
__global__ void __launch_bounds__(MID_WARPS * 32, MID_BLOCKS)
    split_mid(FData d, const int32_t *__restrict__ nodes, const int32_t *__restrict__ feats,
              int64_t m, int64_t b0, int64_t count, Rule rule, int n_real, int rec_len,
              Kinds kinds, int64_t groups, double *__restrict__ recs)
{
    extern __shared__ double mid_sh[];
    const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, V1 = d.V1;
    const int64_t per = (int64_t)d.nb * V1;
    double *H = mid_sh + wp * (per + V1), *tot = H + per;
    const double *nanrow = d.nan_code >= 0 ? H + (int64_t)d.nan_code * V1 : NULL;
    const int64_t per_group = (m + groups - 1) / groups;
    for (int64_t w = blockIdx.x * (int64_t)MID_WARPS + wp; w < count * groups;
         w += (int64_t)gridDim.x * MID_WARPS) {
        const int64_t bb = w / groups, b = b0 + bb, j0 = w % groups * per_group;
        if (node_kind(nodes, b, kinds) != KIND_MID)
            continue;
        const int32_t start = nodes[3 * b], end = nodes[3 * b + 1];
        for (int64_t j = j0; j < m && j < j0 + per_group; j++) {
            double *rec = recs + (bb * m + j) * rec_len;
            const int f = feats[b * m + j];
            if (f < 0 || f >= d.F) {
                if (lane == 0)
                    rec_unlisted(rec, rec_len);
                continue;
            }
            __syncwarp(); /* the last feature is done with the histogram */
            for (int64_t k = lane; k < per; k += 32)
                H[k] = 0.0;
            __syncwarp();
            for (int32_t i0 = start + lane; i0 < end; i0 += 32 * MID_UNROLL) {
                int32_t r[MID_UNROLL]; /* a lane's next samples' loads issued together */
                int c[MID_UNROLL];
#pragma unroll
                for (int u = 0; u < MID_UNROLL; u++)
                    r[u] = i0 + 32 * u < end ? d.rows[i0 + 32 * u] : -1;
#pragma unroll
                for (int u = 0; u < MID_UNROLL; u++)
                    c[u] = r[u] >= 0 ? code_of(d, r[u], f) : 0;
#pragma unroll
                for (int u = 0; u < MID_UNROLL; u++)
                    if (r[u] >= 0)
                        add_sample(d, i0 + 32 * u, r[u], H + (int64_t)c[u] * V1);
            }
            __syncwarp();
            int nonempty = 0; /* non-empty codes, the missing-value code included */
            for (int c = lane; c < d.nb; c += 32)
                nonempty += H[(int64_t)c * V1] > 0.5;
            for (int k = 16; k > 0; k /= 2)
                nonempty += __shfl_xor_sync(0xffffffffu, nonempty, k);
            for (int s = 0; s < V1; s += MID_SCAN)
                scan_stats<MID_SCAN>(H, V1, n_real, nanrow, s, lane, tot);
            __syncwarp();
            const bool nonconst = nonempty >= 2, has_nan = nanrow && nanrow[0] > 0.5;
            double bp = -INFINITY;
            int bo = INT_MAX;
            if (nonconst)
                hist_candidates(d, rule, H, tot, nanrow, has_nan, n_real, lane, 32, lane == 0,
                                bp, bo);
            warp_best(bp, bo);
            if (lane == 0)
                hist_record(d, H, tot, nanrow, has_nan, n_real, f, nonconst, bp, bo, rec_len,
                            rec);
        }
    }
}

/* One thread per node of a pass but split_small's (which wrote its record): its
 * features' records into its record. */
__global__ void split_reduce(const double *__restrict__ recs, const int32_t *__restrict__ nodes,
                             const int32_t *__restrict__ feats, int64_t m, int64_t b0,
                             int64_t count, int rec_len, int first_only, Kinds kinds,
                             double *__restrict__ out)
{
    const int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= count || node_kind(nodes, b0 + b, kinds) == KIND_SMALL)
        return;
    gsb__forest_reduce(recs + b * m * rec_len, feats + (b0 + b) * m, (int)m, rec_len,
                       first_only, out + (b0 + b) * rec_len);
}

/* ---- forest_partition ------------------------------------------------------------- */

struct PartWork {
    int32_t b, start, end;    /* node b's samples [start, end) of this chunk */
    int32_t left_before;      /* left samples of node b in its earlier chunks (scan) */
};

__device__ inline bool goes_left(const FData &d, int32_t r, const int32_t *split)
{
    const int c = code_of(d, r, split[0]);
    return c == d.nan_code ? split[2] != 0 : c <= split[1];
}

/* The left samples of each chunk, into work[k].left_before (made offsets by part_scan). */
__global__ void part_count(FData d, const int32_t *__restrict__ splits, PartWork *work)
{
    __shared__ int total;
    PartWork *wk = &work[blockIdx.x];
    if (threadIdx.x == 0)
        total = 0;
    __syncthreads();
    int mine = 0;
    for (int32_t i = wk->start + threadIdx.x; i < wk->end; i += blockDim.x)
        mine += goes_left(d, d.rows[i], splits + 3 * wk->b);
    atomicAdd(&total, mine);
    __syncthreads();
    if (threadIdx.x == 0)
        wk->left_before = total;
}

/* One thread per node: its chunks (first[b] .. first[b + 1]) counts -> offsets. */
__global__ void part_scan(PartWork *work, const int32_t *__restrict__ first, int64_t B,
                          int32_t *__restrict__ n_left)
{
    const int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= B)
        return;
    int32_t run = 0;
    for (int32_t k = first[b]; k < first[b + 1]; k++) {
        const int32_t c = work[k].left_before;
        work[k].left_before = run;
        run += c;
    }
    n_left[b] = run;
}

/* Each chunk's samples to their stable places: left ones from the node's start,
 * right ones after the node's left ones. */
__global__ void part_scatter(FData d, const int32_t *__restrict__ nodes,
                             const int32_t *__restrict__ splits, const PartWork *__restrict__ work,
                             const int32_t *__restrict__ n_left, int32_t *__restrict__ srows,
                             float *__restrict__ sw)
{
    __shared__ int warp_left[WARPS];
    __shared__ int tile_left;
    const PartWork wk = work[blockIdx.x];
    const int32_t node_start = nodes[3 * wk.b], nl = n_left[wk.b];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int32_t left_base = wk.left_before; /* left samples of the node before this tile */
    for (int32_t t0 = wk.start; t0 < wk.end; t0 += THREADS) {
        const int32_t i = t0 + (int32_t)threadIdx.x;
        const bool live = i < wk.end;
        const bool left = live && goes_left(d, d.rows[i], splits + 3 * wk.b);
        const unsigned ballot = __ballot_sync(0xffffffffu, left);
        if (lane == 0)
            warp_left[warp] = __popc(ballot);
        __syncthreads();
        int before = 0; /* left samples of this tile before this thread */
        for (int q = 0; q < warp; q++)
            before += warp_left[q];
        before += __popc(ballot & ((1u << lane) - 1u));
        if (threadIdx.x == THREADS - 1) {
            int all = 0;
            for (int q = 0; q < WARPS; q++)
                all += warp_left[q];
            tile_left = all;
        }
        if (live) {
            const int32_t rel = i - node_start, lefts = left_base + before;
            const int32_t to = left ? node_start + lefts : node_start + nl + (rel - lefts);
            srows[to] = d.rows[i];
            sw[to] = d.w[i];
        }
        __syncthreads(); /* tile_left ready; warp_left free for the next tile */
        left_base += tile_left;
        __syncthreads();
    }
}

__global__ void part_copy_back(const PartWork *__restrict__ work,
                               const int32_t *__restrict__ srows, const float *__restrict__ sw,
                               int32_t *__restrict__ rows, float *__restrict__ w)
{
    const PartWork wk = work[blockIdx.x];
    for (int32_t i = wk.start + threadIdx.x; i < wk.end; i += blockDim.x) {
        rows[i] = srows[i];
        w[i] = sw[i];
    }
}

} // namespace

/* ---- the ops ---------------------------------------------------------------------- */

extern "C" int gsb__cuda_forest_bin(const gsb__backend *be, const gsb__tensor *X,
                                    const gsb__tensor *edges, int nan_code, gsb__tensor *codes)
{
    const char *op = "forest_bin";
    if (!X || (X->dtype != GSB_F32 && X->dtype != GSB_F64))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: X must be float32 or float64", op);
    int rc = check(be, X, X->dtype, -1, -1, false, op, "X");
    const int64_t n = X->rows, d = X->cols, words = (d + 3) / 4;
    if (rc == GSB_OK)
        rc = check(be, edges, GSB_F32, d, -1, false, op, "edges");
    if (rc == GSB_OK)
        rc = check(be, codes, GSB_I32, n, words, false, op, "codes");
    if (rc != GSB_OK)
        return rc;
    if (edges->cols > 255 || nan_code > 255)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: more than 256 codes", op);
    if (n * words == 0)
        return GSB_OK;
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    const unsigned grid = grid_for(be, n * words);
    if (X->dtype == GSB_F32)
        bin_kernel<float><<<grid, THREADS, 0, s>>>((const float *)X->data, n, d,
                                                   (const float *)edges->data, edges->cols,
                                                   nan_code, (uint32_t *)codes->data, words);
    else
        bin_kernel<double><<<grid, THREADS, 0, s>>>((const double *)X->data, n, d,
                                                    (const float *)edges->data, edges->cols,
                                                    nan_code, (uint32_t *)codes->data, words);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

/* nodes (B x 3) read on the host and checked against the samples and the pool */
static int host_nodes(const gsb__backend *be, const gsb__forest_data *d, const gsb__tensor *nodes,
                      bool need_slot, const char *op, const int32_t **out, void **tmp)
{
    *tmp = NULL;
    int rc = check(be, nodes, GSB_I32, -1, 3, true, op, "nodes");
    if (rc == GSB_OK)
        rc = host_view(be, nodes, sizeof(int32_t), (const void **)out, tmp);
    if (rc != GSB_OK)
        return rc;
    const int64_t S = d->rows->rows * d->rows->cols, slots = d->pool ? d->pool->rows : 0;
    for (int64_t b = 0; b < nodes->rows; b++) {
        const int32_t *nd = *out + 3 * b;
        if (nd[0] < 0 || nd[1] < nd[0] || nd[1] > S || (nd[2] >= 0 && nd[2] >= slots) ||
            (need_slot && nd[2] < 0))
            return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: node %lld is [%d, %d) slot %d", op,
                                (long long)b, nd[0], nd[1], nd[2]);
    }
    return GSB_OK;
}

/* feats (B x m) checked: entries < n_features */
static int check_feats(const gsb__backend *be, const gsb__forest_data *d, const gsb__tensor *feats,
                       int64_t B, const char *op, const int32_t **host, void **tmp)
{
    int rc = check(be, feats, GSB_I32, B, -1, true, op, "feats");
    if (rc == GSB_OK)
        rc = host_view(be, feats, sizeof(int32_t), (const void **)host, tmp);
    for (int64_t i = 0; rc == GSB_OK && i < feats->rows * feats->cols; i++)
        if ((*host)[i] >= d->n_features)
            rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: feature %d out of range", op, (*host)[i]);
    return rc;
}

extern "C" int gsb__cuda_forest_hist(const gsb__backend *be, const gsb__forest_data *d,
                                     const gsb__tensor *nodes, const gsb__tensor *feats)
{
    const char *op = "forest_hist";
    FData fd;
    const int32_t *hn = NULL, *hf = NULL;
    const void *dn = NULL;
    void *tn = NULL, *tf = NULL, *dtn = NULL, *df = NULL, *dwork = NULL;
    int32_t *uf = NULL; /* feats without repeats (forest_math.h): no histogram summed twice */
    int64_t *seen = NULL;
    HistWork *work = NULL;
    int rc;
    GSB_CUDA_CHECK(data_of(be, d, true, op, &fd));
    GSB_CUDA_CHECK(host_nodes(be, d, nodes, true, op, &hn, &tn));
    if (feats)
        GSB_CUDA_CHECK(check_feats(be, d, feats, nodes->rows, op, &hf, &tf));
    {
        const int64_t B = nodes->rows, m = feats ? feats->cols : d->n_features;
        const size_t per_bytes = (size_t)d->n_bins * fd.V1 * sizeof(double);
        size_t optin = 0;
        GSB_CUDA_CHECK(smem_optin(be, &optin));
        const size_t limit = optin < HIST_SMEM ? optin : HIST_SMEM;
        int group = (int)(limit / per_bytes);
        group = group > HIST_GROUP ? HIST_GROUP : group;
        const int step = group > 0 ? group : 1;
        if (B == 0 || m == 0)
            goto done;
        /* the work: every (node, group of listed features, chunk of samples) */
        int64_t n_work = 0;
        for (int64_t b = 0; b < B; b++)
            n_work += ((m + step - 1) / step) * ((hn[3 * b + 1] - hn[3 * b] + HIST_CHUNK - 1) /
                                                 HIST_CHUNK);
        if (n_work > INT_MAX) {
            rc = GSB_CUDA_ERR(GSB_EUNSUPPORTED, "%s: too many histogram blocks", op);
            goto done;
        }
        work = (HistWork *)malloc((size_t)(n_work > 0 ? n_work : 1) * sizeof *work);
        if (!work) {
            rc = GSB_CUDA_ERR(GSB_ENOMEM, "%s: out of host memory", op);
            goto done;
        }
        int64_t k = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t j0 = 0; j0 < m; j0 += step)
                for (int64_t s0 = hn[3 * b]; s0 < hn[3 * b + 1]; s0 += HIST_CHUNK) {
                    const int64_t s1 = s0 + HIST_CHUNK < hn[3 * b + 1] ? s0 + HIST_CHUNK
                                                                       : hn[3 * b + 1];
                    work[k++] = {(int32_t)b, (int32_t)j0, (int32_t)s0, (int32_t)s1};
                }
        GSB_CUDA_CHECK(device_view(be, nodes, sizeof(int32_t), &dn, &dtn));
        if (feats) {
            uf = (int32_t *)malloc((size_t)(B * m) * sizeof *uf);
            seen = (int64_t *)malloc((size_t)d->n_features * sizeof *seen);
            if (!uf || !seen) {
                rc = GSB_CUDA_ERR(GSB_ENOMEM, "%s: out of host memory", op);
                goto done;
            }
            gsb__forest_unique_feats(hf, B, m, d->n_features, seen, uf);
            GSB_CUDA_CHECK(scratch(be, B * m, sizeof(int32_t), &df));
            GSB_CUDA_CHECK(gsb__cuda_copy_h2d(be, df, uf, (size_t)(B * m) * sizeof *uf));
        }
        cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
        if (B * m > INT_MAX) {
            rc = GSB_CUDA_ERR(GSB_EUNSUPPORTED, "%s: too many histograms in one call", op);
            goto done;
        }
        hist_zero<<<(unsigned)(B * m), THREADS, 0, s>>>(fd, (const int32_t *)dn,
                                                        (const int32_t *)df, m);
        CUDA_CHECK(cudaGetLastError());
        if (n_work == 0)
            goto done;
        GSB_CUDA_CHECK(scratch(be, n_work, sizeof(HistWork), &dwork));
        GSB_CUDA_CHECK(gsb__cuda_copy_h2d(be, dwork, work, (size_t)n_work * sizeof *work));
        if (group > 0) {
            const size_t smem = (size_t)group * per_bytes;
            if (smem > 48 * 1024)
                CUDA_CHECK(cudaFuncSetAttribute(hist_shared,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)smem));
            hist_shared<<<(unsigned)n_work, THREADS, smem, s>>>(
                fd, (const int32_t *)dn, (const int32_t *)df, m, group,
                (const HistWork *)dwork);
        } else {
            hist_global<<<(unsigned)n_work, THREADS, 0, s>>>(fd, (const int32_t *)dn,
                                                             (const int32_t *)df, m,
                                                             (const HistWork *)dwork);
        }
        CUDA_CHECK(cudaGetLastError());
    }
done:
    free(tn);
    free(tf);
    free(uf);
    free(seen);
    free(work);
    gsb__cuda_free(be, dtn);
    gsb__cuda_free(be, df);
    gsb__cuda_free(be, dwork);
    return rc;
}

extern "C" int gsb__cuda_forest_hist_sub(const gsb__backend *be, const gsb__forest_data *d,
                                         const gsb__tensor *pairs)
{
    const char *op = "forest_hist_sub";
    FData fd;
    const int32_t *hp = NULL;
    const void *dp = NULL;
    void *tp = NULL, *dtp = NULL;
    int rc;
    if (!d || !d->pool)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: no histogram pool", op);
    GSB_CUDA_CHECK(data_of(be, d, true, op, &fd));
    GSB_CUDA_CHECK(check(be, pairs, GSB_I32, -1, 2, true, op, "pairs"));
    GSB_CUDA_CHECK(host_view(be, pairs, sizeof(int32_t), (const void **)&hp, &tp));
    for (int64_t p = 0; p < 2 * pairs->rows; p++)
        if (hp[p] < 0 || hp[p] >= d->pool->rows) {
            rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: slot %d out of range", op, hp[p]);
            goto done;
        }
    if (pairs->rows > 0) {
        GSB_CUDA_CHECK(device_view(be, pairs, sizeof(int32_t), &dp, &dtp));
        const int64_t work = pairs->rows * d->n_features * d->n_bins;
        hist_sub_kernel<<<grid_for(be, work), THREADS, 0, gsb__cuda_ctx_of(be)->stream>>>(
            fd, (const int32_t *)dp, pairs->rows);
        CUDA_CHECK(cudaGetLastError());
    }
done:
    free(tp);
    gsb__cuda_free(be, dtp);
    return rc;
}

extern "C" int gsb__cuda_forest_split(const gsb__backend *be, const gsb__forest_data *d,
                                      const gsb__tensor *nodes, const gsb__tensor *feats,
                                      const gsb__forest_rule *rule, gsb__tensor *best)
{
    const char *op = "forest_split";
    FData fd;
    const int32_t *hn = NULL, *hf = NULL;
    const void *dn = NULL, *df = NULL;
    void *tn = NULL, *tf = NULL, *dtn = NULL, *dtf = NULL, *drecs = NULL, *dout = NULL;
    const bool trace = split_trace_on();
    cudaEvent_t ev[5] = {NULL, NULL, NULL, NULL, NULL};
    float t_ms[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int rc;
    GSB_CUDA_CHECK(data_of(be, d, false, op, &fd));
    if (!nodes || !feats || on_host(nodes) || on_host(feats)) {
        GSB_CUDA_CHECK(host_nodes(be, d, nodes, false, op, &hn, &tn));
        GSB_CUDA_CHECK(check_feats(be, d, feats, nodes->rows, op, &hf, &tf));
    } else { /* device-resident (the level grower's): shapes only, no round trip; the
                kernel skips features out of range */
        GSB_CUDA_CHECK(check(be, nodes, GSB_I32, -1, 3, false, op, "nodes"));
        GSB_CUDA_CHECK(check(be, feats, GSB_I32, nodes->rows, -1, false, op, "feats"));
    }
    if (!rule) {
        rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: no rule", op);
        goto done;
    }
    {
        const int64_t B = nodes->rows, m = feats->cols;
        const int rec_len = gsb__forest_rec_len(fd.V1);
        const int n_real = d->nan_code >= 0 ? d->n_bins - 1 : d->n_bins;
        GSB_CUDA_CHECK(check(be, best, GSB_F64, B, rec_len, true, op, "best"));
        if (B == 0)
            goto done;
        const size_t smem = ((size_t)d->n_bins * fd.V1 + fd.V1) * sizeof(double);
        size_t optin = 0;
        GSB_CUDA_CHECK(smem_optin(be, &optin));
        if (smem > optin) { /* the CPU backend has no such limit: the estimator falls back */
            rc = GSB_CUDA_ERR(GSB_EUNSUPPORTED,
                              "%s: a histogram of %d bins x %d statistics needs %zu bytes of "
                              "shared memory, the GPU has %zu per block", op, d->n_bins, fd.V1,
                              smem, optin);
            goto done;
        }
        if (smem > 48 * 1024)
            CUDA_CHECK(cudaFuncSetAttribute(split_kernel,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)smem));
        GSB_CUDA_CHECK(device_view(be, nodes, sizeof(int32_t), &dn, &dtn));
        GSB_CUDA_CHECK(device_view(be, feats, sizeof(int32_t), &df, &dtf));
        double *out = NULL;
        if (on_host(best)) {
            GSB_CUDA_CHECK(scratch(be, B * rec_len, sizeof(double), &dout));
            out = (double *)dout;
        } else {
            out = (double *)best->data;
        }
        /* nodes per pass: their records stay within REC_BYTES */
        int64_t per_pass = (int64_t)(REC_BYTES / ((size_t)(m > 0 ? m : 1) * rec_len * 8));
        per_pass = per_pass < 1 ? 1 : per_pass > B ? B : per_pass;
        if (per_pass * m > INT_MAX)
            per_pass = INT_MAX / (m > 0 ? m : 1);
        GSB_CUDA_CHECK(scratch(be, per_pass * (m > 0 ? m : 1) * rec_len, sizeof(double), &drecs));
        const Rule r = {rule->criterion, rule->first_only, (double)rule->min_samples_leaf,
                        rule->min_weight_leaf};
        /* split_small's and split_mid's nodes, where their shared memory holds a node */
        const size_t mid_hist = ((size_t)d->n_bins * fd.V1 + fd.V1) * sizeof(double);
        const Kinds kinds = {fd.V1 <= SMALL_V ? SMALL_N : 0, mid_hist <= MID_HIST ? MID_N : 0};
        const size_t mid_smem = MID_WARPS * mid_hist;
        if (kinds.mid_n > 0 && mid_smem > 48 * 1024)
            CUDA_CHECK(cudaFuncSetAttribute(split_mid, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)mid_smem));
        cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
        for (int k = 0; trace && k < 5; k++)
            CUDA_CHECK(cudaEventCreate(&ev[k]));
        for (int64_t b0 = 0; b0 < B; b0 += per_pass) {
            const int64_t count = B - b0 < per_pass ? B - b0 : per_pass;
            if (trace)
                CUDA_CHECK(cudaEventRecord(ev[0], s));
            if (kinds.small_n > 0) { /* the small nodes' records, straight into out */
                split_small<<<(unsigned)((count + WARPS - 1) / WARPS), THREADS, 0, s>>>(
                    fd, (const int32_t *)dn, (const int32_t *)df, m, b0, count, r, n_real,
                    rec_len, kinds, out);
                CUDA_CHECK(cudaGetLastError());
            }
            if (trace)
                CUDA_CHECK(cudaEventRecord(ev[1], s));
            if (kinds.mid_n > 0 && m > 0) { /* blocks stride over (node, feature group) */
                const int64_t cap = split_blocks(be);
                int64_t groups = (cap * MID_WARPS + count - 1) / count; /* few nodes: split */
                groups = groups < 1 ? 1 : groups > m ? m : groups;
                const int64_t want = (count * groups + MID_WARPS - 1) / MID_WARPS;
                split_mid<<<(unsigned)(want < cap ? want : cap), MID_WARPS * 32, mid_smem, s>>>(
                    fd, (const int32_t *)dn, (const int32_t *)df, m, b0, count, r, n_real,
                    rec_len, kinds, groups, (double *)drecs);
                CUDA_CHECK(cudaGetLastError());
            }
            if (trace)
                CUDA_CHECK(cudaEventRecord(ev[2], s));
            if (m > 0) { /* chunks: one item each while the items fit the grid */
                const int64_t items = count * m, cap = split_blocks(be);
                int64_t chunk = (items + cap - 1) / cap;
                chunk = chunk < 1 ? 1 : chunk > THREADS ? THREADS : chunk;
                const int64_t blocks = (items + chunk - 1) / chunk;
                split_kernel<<<(unsigned)(blocks < cap ? blocks : cap), THREADS, smem, s>>>(
                    fd, (const int32_t *)dn, (const int32_t *)df, m, b0, count, r, n_real,
                    rec_len, kinds, (int)chunk, (double *)drecs);
                CUDA_CHECK(cudaGetLastError());
            }
            if (trace)
                CUDA_CHECK(cudaEventRecord(ev[3], s));
            split_reduce<<<(unsigned)((count + THREADS - 1) / THREADS), THREADS, 0, s>>>(
                (const double *)drecs, (const int32_t *)dn, (const int32_t *)df, m, b0, count,
                rec_len, rule->first_only, kinds, out);
            CUDA_CHECK(cudaGetLastError());
            if (trace) {
                CUDA_CHECK(cudaEventRecord(ev[4], s));
                CUDA_CHECK(cudaEventSynchronize(ev[4]));
                for (int k = 0; k < 4; k++) {
                    float ms = 0.0f;
                    CUDA_CHECK(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]));
                    t_ms[k] += ms;
                }
            }
        }
        if (trace)
            fprintf(stderr, "gsb profile:   forest_split %lld nodes x %lld features (first_only "
                    "%d): split_small %.3f ms, split_mid %.3f ms, split_kernel %.3f ms, "
                    "split_reduce %.3f ms\n", (long long)B, (long long)m, rule->first_only,
                    t_ms[0], t_ms[1], t_ms[2], t_ms[3]);
        if (on_host(best))
            GSB_CUDA_CHECK(gsb__cuda_copy_d2h(be, best->data, out,
                                              (size_t)(B * rec_len) * sizeof(double)));
    }
done:
    free(tn);
    free(tf);
    gsb__cuda_free(be, dtn);
    gsb__cuda_free(be, dtf);
    gsb__cuda_free(be, drecs);
    gsb__cuda_free(be, dout);
    for (int k = 0; k < 5; k++)
        if (ev[k])
            (void)cudaEventDestroy(ev[k]); /* nothing to do about a failure here */
    return rc;
}

extern "C" int gsb__cuda_forest_partition(const gsb__backend *be, const gsb__forest_data *d,
                                          const gsb__tensor *nodes, const gsb__tensor *splits,
                                          gsb__tensor *n_left)
{
    const char *op = "forest_partition";
    FData fd;
    const int32_t *hn = NULL, *hs = NULL;
    const void *dn = NULL, *ds = NULL;
    void *tn = NULL, *ts = NULL, *dtn = NULL, *dts = NULL, *dwork = NULL, *dfirst = NULL;
    void *dleft = NULL;
    PartWork *work = NULL;
    int32_t *first = NULL;
    int rc;
    GSB_CUDA_CHECK(data_of(be, d, false, op, &fd));
    GSB_CUDA_CHECK(host_nodes(be, d, nodes, false, op, &hn, &tn));
    {
        const int64_t B = nodes->rows, S = d->rows->rows * d->rows->cols;
        GSB_CUDA_CHECK(check(be, splits, GSB_I32, B, 3, true, op, "splits"));
        GSB_CUDA_CHECK(check(be, n_left, GSB_I32, -1, -1, true, op, "n_left"));
        if (n_left->rows * n_left->cols != B) {
            rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: n_left has the wrong size", op);
            goto done;
        }
        GSB_CUDA_CHECK(check(be, d->scratch_rows, GSB_I32, -1, -1, false, op, "scratch_rows"));
        GSB_CUDA_CHECK(check(be, d->scratch_weights, GSB_F32, -1, -1, false, op,
                             "scratch_weights"));
        if (d->scratch_rows->rows * d->scratch_rows->cols != S ||
            d->scratch_weights->rows * d->scratch_weights->cols != S) {
            rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: scratch has the wrong size", op);
            goto done;
        }
        GSB_CUDA_CHECK(host_view(be, splits, sizeof(int32_t), (const void **)&hs, &ts));
        for (int64_t b = 0; b < B; b++)
            if (hs[3 * b] < 0 || hs[3 * b] >= d->n_features) {
                rc = GSB_CUDA_ERR(GSB_EINTERNAL, "%s: split feature %d", op, hs[3 * b]);
                goto done;
            }
        if (B == 0)
            goto done;
        /* chunks: each node's in order, first[b] .. first[b + 1] */
        int64_t n_work = 0;
        for (int64_t b = 0; b < B; b++)
            n_work += (hn[3 * b + 1] - hn[3 * b] + PART_CHUNK - 1) / PART_CHUNK;
        if (n_work > INT_MAX) {
            rc = GSB_CUDA_ERR(GSB_EUNSUPPORTED, "%s: too many chunks", op);
            goto done;
        }
        work = (PartWork *)malloc((size_t)(n_work > 0 ? n_work : 1) * sizeof *work);
        first = (int32_t *)malloc((size_t)(B + 1) * sizeof *first);
        if (!work || !first) {
            rc = GSB_CUDA_ERR(GSB_ENOMEM, "%s: out of host memory", op);
            goto done;
        }
        int64_t k = 0;
        for (int64_t b = 0; b < B; b++) {
            first[b] = (int32_t)k;
            for (int64_t s0 = hn[3 * b]; s0 < hn[3 * b + 1]; s0 += PART_CHUNK) {
                const int64_t s1 = s0 + PART_CHUNK < hn[3 * b + 1] ? s0 + PART_CHUNK
                                                                   : hn[3 * b + 1];
                work[k++] = {(int32_t)b, (int32_t)s0, (int32_t)s1, 0};
            }
        }
        first[B] = (int32_t)k;
        GSB_CUDA_CHECK(device_view(be, nodes, sizeof(int32_t), &dn, &dtn));
        GSB_CUDA_CHECK(device_view(be, splits, sizeof(int32_t), &ds, &dts));
        GSB_CUDA_CHECK(scratch(be, n_work, sizeof(PartWork), &dwork));
        GSB_CUDA_CHECK(scratch(be, B + 1, sizeof(int32_t), &dfirst));
        int32_t *nl = NULL;
        if (on_host(n_left)) {
            GSB_CUDA_CHECK(scratch(be, B, sizeof(int32_t), &dleft));
            nl = (int32_t *)dleft;
        } else {
            nl = (int32_t *)n_left->data;
        }
        if (n_work > 0)
            GSB_CUDA_CHECK(gsb__cuda_copy_h2d(be, dwork, work, (size_t)n_work * sizeof *work));
        GSB_CUDA_CHECK(gsb__cuda_copy_h2d(be, dfirst, first, (size_t)(B + 1) * sizeof *first));
        cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
        if (n_work > 0) {
            part_count<<<(unsigned)n_work, THREADS, 0, s>>>(fd, (const int32_t *)ds,
                                                            (PartWork *)dwork);
            CUDA_CHECK(cudaGetLastError());
        }
        part_scan<<<(unsigned)((B + THREADS - 1) / THREADS), THREADS, 0, s>>>(
            (PartWork *)dwork, (const int32_t *)dfirst, B, nl);
        CUDA_CHECK(cudaGetLastError());
        if (n_work > 0) {
            part_scatter<<<(unsigned)n_work, THREADS, 0, s>>>(
                fd, (const int32_t *)dn, (const int32_t *)ds, (const PartWork *)dwork, nl,
                (int32_t *)d->scratch_rows->data, (float *)d->scratch_weights->data);
            CUDA_CHECK(cudaGetLastError());
            part_copy_back<<<(unsigned)n_work, THREADS, 0, s>>>(
                (const PartWork *)dwork, (const int32_t *)d->scratch_rows->data,
                (const float *)d->scratch_weights->data, (int32_t *)d->rows->data,
                (float *)d->weights->data);
            CUDA_CHECK(cudaGetLastError());
        }
        if (on_host(n_left))
            GSB_CUDA_CHECK(gsb__cuda_copy_d2h(be, n_left->data, nl, (size_t)B * sizeof(int32_t)));
    }
done:
    free(tn);
    free(ts);
    free(work);
    free(first);
    gsb__cuda_free(be, dtn);
    gsb__cuda_free(be, dts);
    gsb__cuda_free(be, dwork);
    gsb__cuda_free(be, dfirst);
    gsb__cuda_free(be, dleft);
    return rc;
}
