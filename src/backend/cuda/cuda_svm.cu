/*
 * cuda_svm.cu - the CUDA backend's ops of the two-level SMO (backend.h,
 * gsb__svm_state; solvers/smo_blocks.c drives them).  Twins: cpu_svm.c; the
 * step arithmetic is backend/svm_smo.h, shared with it.
 *
 * svm_select: keys (f over I_up, -f over I_low, +inf for the others and the
 *   excluded) sorted with their indices by cub's radix sort (stable: ties in
 *   index order, as the twin's (key, index) order), the chosen up variables
 *   masked before the low keys are made; the maximal violation by per-block
 *   min/max (exact in any order); one packed download of the result.
 * svm_kernel_rows: the rows gathered, X_rows X^T by one GEMM per chunk of
 *   rows (X's dtype; float32 without TF32 unless GSB_ALLOW_TF32), then the
 *   kernel map (rbf from the norms in double, as the kernel op) written as
 *   float into each row's cache slot.
 * svm_inner: the q x q block of K over the working set gathered from the
 *   cache (L2-resident), then one thread block of q threads (q <= 1024), a
 *   variable per thread, runs the whole SMO: per step two block reductions
 *   (the smallest f over I_up with its room; the best second-order j with
 *   its step), each one __syncthreads with the warps' partials
 *   double-buffered in shared memory.  Ties go to the first position, as
 *   the twin's scans.
 * svm_update_f: each block compacts the nonzero coefficients (in order) in
 *   shared memory, then a thread per variable adds them in that order.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernel_map.cuh"
#include "backend/svm_smo.h"

namespace {

constexpr int BLOCK = 256;
constexpr int MAX_WS = 1024;                        /* svm_inner's threads at most */
constexpr int64_t ROWS_ELEMS = (int64_t)1 << 24;    /* GEMM output elements per chunk */
constexpr unsigned FULL = 0xffffffffu;

unsigned grid_for(const gsb__backend *be, int64_t work)
{
    int64_t sms = gsb__cuda_ctx_of(be)->sm_count;
    int64_t cap = (sms > 0 ? sms : 80) * 8;
    int64_t want = (work + BLOCK - 1) / BLOCK;
    return (unsigned)(want < 1 ? 1 : want < cap ? want : cap);
}

int check_state(const gsb__backend *be, const gsb__svm_state *s, const char *op, int64_t *l,
                int64_t *n)
{
    if (!s || !s->f)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: state is missing", op);
    *l = s->f->rows;
    PASS(gsb__cuda_check_tensor(be, s->f, GSB_F64, *l, 1, false, op, "f"));
    PASS(gsb__cuda_check_tensor(be, s->real, GSB_I32, *l, 1, false, op, "real"));
    PASS(gsb__cuda_check_tensor(be, s->y, GSB_I32, *l, 1, false, op, "y"));
    PASS(gsb__cuda_check_tensor(be, s->C, GSB_F64, *l, 1, false, op, "C"));
    PASS(gsb__cuda_check_tensor(be, s->QD, GSB_F64, *l, 1, false, op, "QD"));
    PASS(gsb__cuda_check_tensor(be, s->alpha, GSB_F64, *l, 1, false, op, "alpha"));
    PASS(gsb__cuda_check_tensor(be, s->cache, GSB_F32, -1, -1, false, op, "cache"));
    *n = s->cache->cols;
    if (*l < 1 || *n < 1 || *l > INT_MAX || *n > INT_MAX || s->cache->rows > INT_MAX)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "%s: %lld variables over %lld rows", op,
                            (long long)*l, (long long)*n);
    return GSB_OK;
}

/* An index vector (GSB_I32, m x 1) in this GPU's memory. */
int check_index(const gsb__backend *be, const gsb__tensor *t, const char *op, const char *name,
                int64_t *m)
{
    if (!t)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    PASS(gsb__cuda_check_tensor(be, t, GSB_I32, -1, 1, false, op, name));
    *m = t->rows;
    return GSB_OK;
}

/* ---- reductions ------------------------------------------------------------------ */

/* (v, i) lexicographic minimum, carrying a payload p */
__device__ inline void argmin_merge(double &v, int &i, double &p, double v2, int i2, double p2)
{
    if (v2 < v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
        p = p2;
    }
}

__device__ inline void warp_argmin(double &v, int &i, double &p)
{
    for (int off = 16; off > 0; off >>= 1) {
        double v2 = __shfl_xor_sync(FULL, v, off), p2 = __shfl_xor_sync(FULL, p, off);
        int i2 = __shfl_xor_sync(FULL, i, off);
        argmin_merge(v, i, p, v2, i2, p2);
    }
}

__device__ inline double warp_max(double v)
{
    for (int off = 16; off > 0; off >>= 1) {
        double v2 = __shfl_xor_sync(FULL, v, off);
        v = v2 > v ? v2 : v;
    }
    return v;
}

__device__ inline double warp_min(double v)
{
    for (int off = 16; off > 0; off >>= 1) {
        double v2 = __shfl_xor_sync(FULL, v, off);
        v = v2 < v ? v2 : v;
    }
    return v;
}

/* ---- svm_select ------------------------------------------------------------------ */

struct SelectArgs {
    const double *f, *alpha, *C;
    const int32_t *y;
    int64_t l;
};

__global__ void mark_excluded(unsigned char *mask, const int32_t *ex, int64_t m, int64_t l)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < m;
         k += (int64_t)gridDim.x * blockDim.x) {
        int32_t t = ex[k];
        if (t >= 0 && t < l)
            mask[t] = 1;
    }
}

/*
 * keys of the up (up = 1) or low candidates; with part != NULL also each
 * block's min f over I_up and max f over I_low (all variables) into part.
 */
__global__ void select_keys(SelectArgs a, const unsigned char *mask, int up, double *keys,
                            int32_t *idx, double *part)
{
    __shared__ double smin[BLOCK / 32], smax[BLOCK / 32];
    double mn = INFINITY, mx = -INFINITY;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < a.l;
         t += (int64_t)gridDim.x * blockDim.x) {
        double f = a.f[t], al = a.alpha[t], C = a.C[t];
        int y = a.y[t];
        int in_up = gsb__svm_in_up(y, al, C), in_low = gsb__svm_in_low(y, al, C);
        if (in_up && f < mn)
            mn = f;
        if (in_low && f > mx)
            mx = f;
        bool take = (up ? in_up : in_low) && !mask[t];
        keys[t] = take ? gsb__svm_rank_key(up ? f : -f) : INFINITY;
        idx[t] = (int32_t)t;
    }
    if (!part)
        return;
    mn = warp_min(mn);
    mx = warp_max(mx);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        smin[w] = mn;
        smax[w] = mx;
    }
    __syncthreads();
    if (w == 0) {
        mn = lane < BLOCK / 32 ? smin[lane] : INFINITY;
        mx = lane < BLOCK / 32 ? smax[lane] : -INFINITY;
        mn = warp_min(mn);
        mx = warp_max(mx);
        if (lane == 0) {
            part[2 * blockIdx.x] = mn;
            part[2 * blockIdx.x + 1] = mx;
        }
    }
}

/* The first k sorted up candidates (finite keys) masked and copied out. */
__global__ void take_up(const double *keys, const int32_t *idx, int64_t k, unsigned char *mask,
                        int32_t *chosen)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < k;
         r += (int64_t)gridDim.x * blockDim.x) {
        bool ok = keys[r] < INFINITY;
        chosen[r] = ok ? idx[r] : -1;
        if (ok)
            mask[idx[r]] = 1;
    }
}

/* The packed result: head[0] gap, head[1] n_up, head[2] n_low; sel after it. */
__global__ void select_pack(const int32_t *chosen, int64_t k_up, const double *low_keys,
                            const int32_t *low_idx, int64_t k_total, int64_t l,
                            const double *part, int nparts, double *head, int32_t *sel)
{
    __shared__ double smin[MAX_WS / 32], smax[MAX_WS / 32];
    __shared__ int64_t s_up;
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    double mn = INFINITY, mx = -INFINITY;
    for (int b = threadIdx.x; b < nparts; b += blockDim.x) {
        mn = part[2 * b] < mn ? part[2 * b] : mn;
        mx = part[2 * b + 1] > mx ? part[2 * b + 1] : mx;
    }
    mn = warp_min(mn);
    mx = warp_max(mx);
    if (lane == 0) {
        smin[w] = mn;
        smax[w] = mx;
    }
    /* chosen ups form a prefix (sorted: finite keys first) */
    int64_t cnt = 0;
    for (int64_t base = 0; base < k_up; base += blockDim.x) {
        int64_t r = base + threadIdx.x;
        cnt += __syncthreads_count(r < k_up && chosen[r] >= 0);
    }
    __syncthreads();
    if (threadIdx.x == 0) { /* its mn, mx: warp 0's */
        for (int k = 1; k < nw; k++) {
            mn = smin[k] < mn ? smin[k] : mn;
            mx = smax[k] > mx ? smax[k] : mx;
        }
        head[0] = isinf(mn) || isinf(mx) ? -INFINITY : mx - mn;
        s_up = cnt;
    }
    __syncthreads();
    int64_t n_up = s_up, want = k_total - n_up;
    int64_t low_cnt = 0;
    for (int64_t base = 0; base < want; base += blockDim.x) {
        int64_t r = base + threadIdx.x;
        low_cnt += __syncthreads_count(r < want && r < l && low_keys[r] < INFINITY);
    }
    for (int64_t r = threadIdx.x; r < n_up; r += blockDim.x)
        sel[r] = chosen[r];
    for (int64_t r = threadIdx.x; r < low_cnt; r += blockDim.x)
        sel[n_up + r] = low_idx[r];
    if (threadIdx.x == 0) {
        head[1] = (double)n_up;
        head[2] = (double)low_cnt;
    }
}

int sort_keys(const gsb__backend *be, void *tmp, size_t tmp_bytes, const double *kin,
              double *kout, const int32_t *iin, int32_t *iout, int64_t l)
{
    cudaError_t e = cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, kin, kout, iin, iout,
                                                    (int)l, 0, 64,
                                                    gsb__cuda_ctx_of(be)->stream);
    return e == cudaSuccess
               ? GSB_OK
               : gsb__cuda_fail_rt(e, "cub::DeviceRadixSort::SortPairs", __FILE__, __LINE__);
}

/* ---- svm_kernel_rows ---------------------------------------------------------------- */

template <typename T>
__global__ void gather_rows(const T *X, int64_t d, const int32_t *rows, int64_t c, T *G)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < c * d;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e / d, k = e % d;
        G[e] = X[(int64_t)rows[i] * d + k];
    }
}

/* cache[slots[i]][j] = map(P[i][j]) for the chunk's c rows (P: their x.y) */
template <typename T>
__global__ void map_rows(const T *P, int64_t c, int64_t n, const int32_t *rows,
                         const int32_t *slots, const double *norms, KerParams kp, float *cache)
{
    for (int64_t i = blockIdx.y; i < c; i += gridDim.y) {
        float *dst = cache + (int64_t)slots[i] * n;
        double xi = norms ? norms[rows[i]] : 0.0;
        for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
             j += (int64_t)gridDim.x * blockDim.x) {
            double v = (double)P[i * n + j];
            if (kp.kind == GSB__KER_RBF) {
                v = __dsub_rn(__dadd_rn(xi, norms[j]), __dmul_rn(2.0, v));
                v = v > 0.0 ? v : 0.0;
            }
            dst[j] = (float)ker_map(kp, v);
        }
    }
}

cublasStatus_t gemm_t(cublasHandle_t h, int m, int n, int k, const float *A, const float *B,
                      float *C)
{
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, CUDA_R_32F, k, B,
                        CUDA_R_32F, k, &zero, C, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t gemm_t(cublasHandle_t h, int m, int n, int k, const double *A, const double *B,
                      double *C)
{
    const double one = 1.0, zero = 0.0;
    return cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, k, B, k, &zero, C, m);
}

template <typename T>
int kernel_rows_typed(const gsb__backend *be, const gsb__tensor *X, const int32_t *rows,
                      const int32_t *slots, int64_t m, const KerParams &kp, float *cache)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    const int64_t n = X->rows, d = X->cols;
    const int64_t chunk = ROWS_ELEMS / n < 1 ? 1 : ROWS_ELEMS / n < m ? ROWS_ELEMS / n : m;
    gsb__cuda_carve cv;
    const size_t o_norm = kp.kind == GSB__KER_RBF ? cv.take((size_t)n * sizeof(double)) : 0;
    const size_t o_g = cv.take((size_t)(chunk * (d > 0 ? d : 1)) * sizeof(T));
    const size_t o_p = cv.take((size_t)(chunk * n) * sizeof(T));
    char *buf = NULL;
    int rc = GSB_OK;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, cv.bytes, (void **)&buf));
    {
        double *norms = kp.kind == GSB__KER_RBF ? (double *)(buf + o_norm) : NULL;
        T *G = (T *)(buf + o_g), *P = (T *)(buf + o_p);
        if (norms) {
            gsb__tensor nt = {norms, GSB_F64, n, 1, 1, be, 0};
            GSB_CUDA_CHECK(gsb__cuda_row_sqnorms(be, X, &nt));
        }
        for (int64_t i0 = 0; i0 < m; i0 += chunk) {
            const int64_t c = m - i0 < chunk ? m - i0 : chunk;
            if (d > 0) {
                gather_rows<T><<<grid_for(be, c * d), BLOCK, 0, ctx->stream>>>(
                    (const T *)X->data, d, rows + i0, c, G);
                CUDA_CHECK(cudaGetLastError());
                /* P^T (n x c, column-major) = X G^T: P row-major c x n */
                CUBLAS_CHECK(gemm_t(ctx->blas, (int)n, (int)c, (int)d, (const T *)X->data, G, P));
            } else {
                CUDA_CHECK(cudaMemsetAsync(P, 0, (size_t)(c * n) * sizeof(T), ctx->stream));
            }
            int64_t gx = (n + BLOCK - 1) / BLOCK;
            dim3 grid((unsigned)(gx < 64 ? gx : 64), (unsigned)(c < 1024 ? c : 1024));
            map_rows<T><<<grid, BLOCK, 0, ctx->stream>>>(P, c, n, rows + i0, slots + i0, norms,
                                                         kp, cache);
            CUDA_CHECK(cudaGetLastError());
        }
    }
done:
    if (buf)
        gsb__cuda_free(be, buf);
    return rc;
}

/* ---- svm_inner -------------------------------------------------------------------- */

/* Ksub[a][b] = K[row of ws[a]][row of ws[b]], from the cache */
__global__ void gather_block(const float *cache, int64_t n, const int32_t *slots,
                             const int32_t *ws, const int32_t *real, int q, float *Ksub)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < (int64_t)q * q;
         e += (int64_t)gridDim.x * blockDim.x) {
        int a = (int)(e / q), b = (int)(e % q);
        Ksub[e] = cache[(int64_t)slots[a] * n + real[ws[b]]];
    }
}

struct InnerArgs {
    const int32_t *ws, *y;
    const double *C, *QD, *f;
    double *alpha, *coef, *stats;
    const float *Ksub;
    int q;
    double eps;
    int64_t max_steps;
};

/*
 * A block reduction with one __syncthreads: each warp reduces, its lane 0
 * writes the partial to buffer `buf` (alternating between calls: the next
 * call's writes cannot overtake a slow warp's reads, which come before the
 * next call's barrier), then every warp reduces the partials itself.
 */
struct BlockRed {
    double v[2][MAX_WS / 32], p[2][MAX_WS / 32], m[2][MAX_WS / 32];
    int i[2][MAX_WS / 32];
};

__device__ inline void block_argmin_max(BlockRed &r, int buf, double &v, int &i, double &p,
                                        double &mx)
{
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    warp_argmin(v, i, p);
    mx = warp_max(mx);
    if (lane == 0) {
        r.v[buf][w] = v;
        r.i[buf][w] = i;
        r.p[buf][w] = p;
        r.m[buf][w] = mx;
    }
    __syncthreads();
    v = lane < nw ? r.v[buf][lane] : INFINITY;
    i = lane < nw ? r.i[buf][lane] : INT_MAX;
    p = lane < nw ? r.p[buf][lane] : 0.0;
    mx = lane < nw ? r.m[buf][lane] : -INFINITY;
    warp_argmin(v, i, p);
    mx = warp_max(mx);
}

__global__ void __launch_bounds__(MAX_WS) smo_block(InnerArgs a)
{
    __shared__ BlockRed red;
    __shared__ double kd[MAX_WS];
    const int t = threadIdx.x, q = a.q;
    const bool on = t < q;
    int y = 1;
    double al = 0, a0 = 0, f = 0, C = 0, kdt = 0;
    int var = 0;
    if (on) {
        var = a.ws[t];
        y = a.y[var] > 0 ? 1 : -1;
        al = a0 = a.alpha[var];
        f = a.f[var];
        C = a.C[var];
        kdt = a.QD[var];
        kd[t] = kdt;
    }
    __syncthreads();
    double first_gap = -INFINITY, local_eps = a.eps;
    int64_t steps = 0;
    int buf = 0;
    for (int round = 0;; round++) {
        bool up = on && gsb__svm_in_up(y, al, C), low = on && gsb__svm_in_low(y, al, C);
        double fi = up ? f : INFINITY, room_i = gsb__svm_room_up(y, al, C);
        double fmax = low ? f : -INFINITY;
        int i = t;
        block_argmin_max(red, buf, fi, i, room_i, fmax);
        buf ^= 1;
        double gap = fi == INFINITY || fmax == -INFINITY ? -INFINITY : __dsub_rn(fmax, fi);
        if (round == 0) {
            first_gap = gap;
            double r = __dmul_rn(GSB__SVM_INNER_RATIO, gap);
            local_eps = r > a.eps ? r : a.eps;
        }
        if (fi == INFINITY || !(gap >= local_eps) || steps >= a.max_steps)
            break;
        const float kit = on ? a.Ksub[(int64_t)i * q + t] : 0.0f;
        const bool cand = low && f > fi;
        const double room_j = gsb__svm_room_low(y, al, C);
        double key = cand ? gsb__svm_j_key(fi, kd[i], f, kdt, kit) : INFINITY;
        double step = cand ? gsb__svm_j_step(fi, kd[i], f, kdt, kit, room_j) : 0.0;
        double unused = -INFINITY;
        int j = t;
        block_argmin_max(red, buf, key, j, step, unused);
        buf ^= 1;
        if (key == INFINITY)
            break;
        const double l = step < room_i ? step : room_i;
        if (t == i)
            al = gsb__svm_new_alpha_i(y, al, C, l, room_i);
        if (t == j)
            al = gsb__svm_new_alpha_j(y, al, C, l, room_j);
        if (on)
            f = gsb__svm_new_f(f, l, kit, a.Ksub[(int64_t)j * q + t]);
        steps++;
    }
    if (on) {
        a.alpha[var] = al;
        a.coef[t] = __dmul_rn(__dsub_rn(al, a0), (double)y);
    }
    if (t == 0) {
        a.stats[0] = first_gap;
        a.stats[1] = __dadd_rn(a.stats[1], (double)steps);
    }
}

/* ---- svm_update_f ------------------------------------------------------------------ */

__global__ void update_f(const float *cache, int64_t n, const int32_t *slots, const double *coef,
                         int q, const int32_t *real, int64_t l, double *f)
{
    __shared__ double sc[MAX_WS];
    __shared__ int64_t so[MAX_WS];
    __shared__ int wsum[MAX_WS / 32];
    __shared__ int total;
    /* the nonzero coefficients, in order (q <= blockDim.x = MAX_WS) */
    const int t = threadIdx.x, lane = t % 32, w = t / 32;
    const double c = t < q ? coef[t] : 0.0;
    const bool nz = c != 0.0;
    const unsigned ballot = __ballot_sync(FULL, nz);
    if (lane == 0)
        wsum[w] = __popc(ballot);
    __syncthreads();
    int before = __popc(ballot & ((1u << lane) - 1u));
    for (int k = 0; k < w; k++)
        before += wsum[k];
    if (nz) {
        sc[before] = c;
        so[before] = (int64_t)slots[t] * n;
    }
    if (t == blockDim.x - 1)
        total = before + (nz ? 1 : 0);
    __syncthreads();
    const int cnt = total;
    for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < l;
         v += (int64_t)gridDim.x * blockDim.x) {
        const int64_t col = real[v];
        double acc = f[v];
        for (int k = 0; k < cnt; k++)
            acc = gsb__svm_muladd(acc, sc[k], cache[so[k] + col]);
        f[v] = acc;
    }
}

} /* namespace */

/* ---- the ops ------------------------------------------------------------------------ */

extern "C" int gsb__cuda_svm_select(const gsb__backend *be, const gsb__svm_state *s,
                                    const gsb__tensor *exclude, int64_t k_up, int64_t k_total,
                                    int32_t *sel, int64_t *n_up, int64_t *n_low, double *gap)
{
    const char *op = "svm_select";
    int64_t l = 0, n = 0, m = 0;
    PASS(check_state(be, s, op, &l, &n));
    if (exclude)
        PASS(check_index(be, exclude, op, "exclude", &m));
    if (k_up < 0 || k_total < k_up || (k_total > 0 && !sel) || !n_up || !n_low || !gap)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: bad counts or outputs", op);
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    const unsigned grid = grid_for(be, l);
    const int64_t kt = k_total > 0 ? k_total : 1, ku = k_up > 0 ? k_up : 1;
    size_t tmp_bytes = 0;
    CUDA_TRY(cub::DeviceRadixSort::SortPairs(NULL, tmp_bytes, (const double *)NULL,
                                             (double *)NULL, (const int32_t *)NULL,
                                             (int32_t *)NULL, (int)l, 0, 64, ctx->stream));
    gsb__cuda_carve cv;
    const size_t o_mask = cv.take((size_t)l);
    const size_t o_kin = cv.take((size_t)l * sizeof(double));
    const size_t o_kout = cv.take((size_t)l * sizeof(double));
    const size_t o_iin = cv.take((size_t)l * sizeof(int32_t));
    const size_t o_iout = cv.take((size_t)l * sizeof(int32_t));
    const size_t o_part = cv.take((size_t)grid * 2 * sizeof(double));
    const size_t o_chosen = cv.take((size_t)ku * sizeof(int32_t));
    const size_t o_out = cv.take(32 + (size_t)kt * sizeof(int32_t));
    const size_t o_tmp = cv.take(tmp_bytes);
    char *buf = NULL, *host = (char *)malloc(32 + (size_t)kt * sizeof(int32_t));
    int rc = GSB_OK;
    if (!host) {
        rc = GSB_CUDA_ERR(GSB_ENOMEM, "%s: out of host memory", op);
        goto done;
    }
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, cv.bytes, (void **)&buf));
    {
        unsigned char *mask = (unsigned char *)(buf + o_mask);
        double *kin = (double *)(buf + o_kin), *kout = (double *)(buf + o_kout);
        int32_t *iin = (int32_t *)(buf + o_iin), *iout = (int32_t *)(buf + o_iout);
        double *part = (double *)(buf + o_part), *head = (double *)(buf + o_out);
        int32_t *chosen = (int32_t *)(buf + o_chosen), *dsel = (int32_t *)(buf + o_out + 32);
        const SelectArgs sa = {(const double *)s->f->data, (const double *)s->alpha->data,
                               (const double *)s->C->data, (const int32_t *)s->y->data, l};
        CUDA_CHECK(cudaMemsetAsync(mask, 0, (size_t)l, ctx->stream));
        if (m > 0) {
            mark_excluded<<<grid_for(be, m), BLOCK, 0, ctx->stream>>>(
                mask, (const int32_t *)exclude->data, m, l);
            CUDA_CHECK(cudaGetLastError());
        }
        select_keys<<<grid, BLOCK, 0, ctx->stream>>>(sa, mask, 1, kin, iin, part);
        CUDA_CHECK(cudaGetLastError());
        GSB_CUDA_CHECK(sort_keys(be, buf + o_tmp, tmp_bytes, kin, kout, iin, iout, l));
        const int64_t take = k_up < l ? k_up : l;
        if (take > 0) {
            take_up<<<grid_for(be, take), BLOCK, 0, ctx->stream>>>(kout, iout, take, mask,
                                                                   chosen);
            CUDA_CHECK(cudaGetLastError());
        }
        select_keys<<<grid, BLOCK, 0, ctx->stream>>>(sa, mask, 0, kin, iin, NULL);
        CUDA_CHECK(cudaGetLastError());
        GSB_CUDA_CHECK(sort_keys(be, buf + o_tmp, tmp_bytes, kin, kout, iin, iout, l));
        select_pack<<<1, MAX_WS, 0, ctx->stream>>>(chosen, take, kout, iout, k_total, l, part,
                                                   (int)grid, head, dsel);
        CUDA_CHECK(cudaGetLastError());
        GSB_CUDA_CHECK(gsb__cuda_copy_d2h(be, host, buf + o_out,
                                          32 + (size_t)kt * sizeof(int32_t)));
        const double *hh = (const double *)host;
        *gap = hh[0];
        *n_up = (int64_t)hh[1];
        *n_low = (int64_t)hh[2];
        memcpy(sel, host + 32, (size_t)(*n_up + *n_low) * sizeof(int32_t));
    }
done:
    if (buf)
        gsb__cuda_free(be, buf);
    free(host);
    return rc;
}

extern "C" int gsb__cuda_svm_kernel_rows(const gsb__backend *be, const gsb__tensor *X,
                                         const gsb__tensor *rows, const gsb__tensor *slots,
                                         int kind, double gamma, double coef0, int degree,
                                         gsb__tensor *cache)
{
    const char *op = "svm_kernel_rows";
    if (!X)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: X is missing", op);
    if (X->dtype != GSB_F32 && X->dtype != GSB_F64)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: X has dtype %s", op,
                            gsb__cuda_dtype_name(X->dtype));
    PASS(gsb__cuda_check_tensor(be, X, X->dtype, -1, -1, false, op, "X"));
    PASS(gsb__cuda_check_tensor(be, cache, GSB_F32, -1, X->rows, false, op, "cache"));
    int64_t m = 0, m2 = 0;
    PASS(check_index(be, rows, op, "rows", &m));
    PASS(check_index(be, slots, op, "slots", &m2));
    if (m != m2)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %lld rows but %lld slots", op, (long long)m,
                            (long long)m2);
    if (kind < GSB__KER_LINEAR || kind > GSB__KER_SIGMOID)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: unknown kernel kind %d", op, kind);
    if (kind == GSB__KER_POLY && degree < 0)
        return GSB_CUDA_ERR(GSB_EINVAL, "%s: degree of polynomial kernel < 0", op);
    if (X->rows > INT_MAX || X->cols > INT_MAX)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "%s: dimension too large for cuBLAS", op);
    if (m == 0 || X->rows == 0)
        return GSB_OK;
    const KerParams kp = {kind, gamma, coef0, degree};
    const int32_t *r = (const int32_t *)rows->data, *sl = (const int32_t *)slots->data;
    return X->dtype == GSB_F32
               ? kernel_rows_typed<float>(be, X, r, sl, m, kp, (float *)cache->data)
               : kernel_rows_typed<double>(be, X, r, sl, m, kp, (float *)cache->data);
}

extern "C" int gsb__cuda_svm_inner(const gsb__backend *be, const gsb__svm_state *s,
                                   const gsb__tensor *ws, const gsb__tensor *slots, double eps,
                                   int64_t max_steps, gsb__tensor *coef, gsb__tensor *stats)
{
    const char *op = "svm_inner";
    int64_t l = 0, n = 0, q = 0, q2 = 0;
    PASS(check_state(be, s, op, &l, &n));
    PASS(check_index(be, ws, op, "ws", &q));
    PASS(check_index(be, slots, op, "slots", &q2));
    if (q != q2)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %lld variables but %lld slots", op,
                            (long long)q, (long long)q2);
    if (q > MAX_WS)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "%s: a working set of %lld (at most %d)", op,
                            (long long)q, MAX_WS);
    PASS(gsb__cuda_check_tensor(be, coef, GSB_F64, q, 1, false, op, "coef"));
    PASS(gsb__cuda_check_tensor(be, stats, GSB_F64, 2, 1, false, op, "stats"));
    if (max_steps < 0)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: max_steps < 0", op);
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    float *Ksub = NULL;
    int rc = GSB_OK;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)((q > 0 ? q : 1) * (q > 0 ? q : 1)) * sizeof(float),
                                   (void **)&Ksub));
    if (q > 0) {
        gather_block<<<grid_for(be, q * q), BLOCK, 0, ctx->stream>>>(
            (const float *)s->cache->data, n, (const int32_t *)slots->data,
            (const int32_t *)ws->data, (const int32_t *)s->real->data, (int)q, Ksub);
        CUDA_CHECK(cudaGetLastError());
    }
    {
        const InnerArgs ia = {(const int32_t *)ws->data,  (const int32_t *)s->y->data,
                              (const double *)s->C->data, (const double *)s->QD->data,
                              (const double *)s->f->data, (double *)s->alpha->data,
                              (double *)coef->data,       (double *)stats->data,
                              Ksub,                       (int)q,
                              eps,                        max_steps};
        const int threads = (int)((q + 31) / 32 * 32);
        smo_block<<<1, threads > 0 ? threads : 32, 0, ctx->stream>>>(ia);
        CUDA_CHECK(cudaGetLastError());
    }
done:
    if (Ksub)
        gsb__cuda_free(be, Ksub);
    return rc;
}

extern "C" int gsb__cuda_svm_update_f(const gsb__backend *be, const gsb__svm_state *s,
                                      const gsb__tensor *slots, const gsb__tensor *coef)
{
    const char *op = "svm_update_f";
    int64_t l = 0, n = 0, q = 0;
    PASS(check_state(be, s, op, &l, &n));
    PASS(check_index(be, slots, op, "slots", &q));
    PASS(gsb__cuda_check_tensor(be, coef, GSB_F64, q, 1, false, op, "coef"));
    if (q > MAX_WS)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "%s: a working set of %lld (at most %d)", op,
                            (long long)q, MAX_WS);
    if (q == 0)
        return GSB_OK;
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    const int64_t want = (l + MAX_WS - 1) / MAX_WS;
    const int64_t cap = (ctx->sm_count > 0 ? ctx->sm_count : 80) * 2;
    const unsigned grid = (unsigned)(want < cap ? want : cap);
    update_f<<<grid, MAX_WS, 0, ctx->stream>>>(
        (const float *)s->cache->data, n, (const int32_t *)slots->data,
        (const double *)coef->data, (int)q, (const int32_t *)s->real->data, l,
        (double *)s->f->data);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}
