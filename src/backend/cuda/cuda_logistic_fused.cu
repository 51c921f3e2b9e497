/*
 * cuda_logistic_fused.cu - logistic_loss_grad reading each row of X once
 * (LogisticRegression's L-BFGS evaluates it ~10-30 times a fit; each of
 * those was a float32 -> double copy of X and two skinny DGEMMs over it,
 * ~1.5 GB of traffic for a 256 MB X, where one read of X suffices).
 *
 * A warp takes R consecutive rows at a time, its lanes the columns
 * (lane l holds columns l, l + 32, ... of each row: NC of them, coalesced
 * loads).  For each of the R rows:
 *   z_c = x . coef_c, each lane's share in double, summed by a butterfly
 *       (every lane ends with the R x K dot products);
 *   lane r alone takes row r's scalar work (intercept, sigmoid or softmax,
 *       the weighted loss and residual w_i dloss/dz, as the CPU twin's
 *       row_loss_grad), so the FP64 exp / log1p run once per row, not 32
 *       times;
 *   the residuals are broadcast back and every lane adds r_c x_j to its
 *       columns' gradient, in double, in registers.
 * At the end a block adds its warps' gradients (the intercept's: the
 * residuals' sum; the loss) in warp order into its row of partials; a
 * second kernel adds the blocks' rows in block order.  The grid depends on
 * the GPU and the shape only, so results are bitwise repeatable on a GPU and
 * agree with the CPU twin to rounding (everything in double, as there).
 *
 * The register tiles (coefficients and gradient: K x NC doubles a lane)
 * bound the shapes: binary up to 256 features, K <= 4 up to 128, K <= 8 up
 * to 64; the op's blocked GEMM path takes the rest.
 */
#include <limits.h>
#include <stdint.h>

#include "backend/cuda/cuda_logistic_fused.h"
#include "backend/logistic_math.h"

namespace {

constexpr int FUSED_WARPS = 8;
constexpr int FUSED_THREADS = FUSED_WARPS * 32;
constexpr unsigned FULL_MASK = 0xffffffffu;
constexpr int FINISH_THREADS = 256;

/* Row r's loss (weighted) and residuals res[0..K) = w_i dloss/dz_c, from its
 * dot products zr (intercepts not yet added); as cpu_family.c's
 * row_loss_grad, times w_i. */
template <int KMAX>
__device__ inline double row_residual(const double (&zr)[KMAX], const double (&bias)[KMAX],
                                      int K, int32_t yi, double wi, double (&res)[KMAX])
{
    if (K == 1) {
        const double t = zr[0] + bias[0];
        res[0] = (yi ? -gsb__sigmoid(-t) : gsb__sigmoid(t)) * wi;
        return wi * gsb__log1pexp(yi ? -t : t);
    }
    double zc[KMAX];
    double m = zr[0] + bias[0], zy = 0.0;
#pragma unroll
    for (int c = 0; c < KMAX; c++) {
        zc[c] = c < K ? zr[c] + bias[c] : 0.0;
        if (c < K && zc[c] > m)
            m = zc[c];
        if (c == yi)
            zy = zc[c];
    }
    double s = 0.0;
#pragma unroll
    for (int c = 0; c < KMAX; c++)
        if (c < K)
            s += exp(zc[c] - m);
    const double lse = m + log(s);
#pragma unroll
    for (int c = 0; c < KMAX; c++)
        res[c] = c < K ? (exp(zc[c] - lse) - (c == yi ? 1.0 : 0.0)) * wi : 0.0;
    return wi * (lse - zy);
}

/*
 * The pass: part[b * S + e] (S = K p + 1) is block b's gradient element e
 * (class c's column j at c p + j, its intercept at c p + d) and, at e = K p,
 * its loss.
 */
template <typename T, int NC, int KMAX, int R>
__global__ void __launch_bounds__(FUSED_THREADS)
fused_pass(const T *__restrict__ X, int64_t n, int d, const int32_t *__restrict__ y,
           const void *w, bool w_f64, const double *__restrict__ coef, int K, int p,
           int fit_intercept, double *__restrict__ part, unsigned long long *bad)
{
    constexpr int SMAX = KMAX * (NC * 32 + 1) + 1;
    __shared__ double sh[FUSED_WARPS * SMAX];
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
    const int S = K * p + 1;

    double cw[KMAX][NC], acc[KMAX][NC], bias[KMAX], accb[KMAX];
#pragma unroll
    for (int c = 0; c < KMAX; c++) {
#pragma unroll
        for (int t = 0; t < NC; t++) {
            const int j = t * 32 + lane;
            cw[c][t] = c < K && j < d ? coef[c * p + j] : 0.0;
            acc[c][t] = 0.0;
        }
        bias[c] = c < K && fit_intercept ? coef[c * p + d] : 0.0;
        accb[c] = 0.0;
    }
    double accl = 0.0;

    const int64_t nw = (int64_t)gridDim.x * FUSED_WARPS;
    for (int64_t i0 = ((int64_t)blockIdx.x * FUSED_WARPS + warp) * R; i0 < n; i0 += nw * R) {
        T xv[R][NC];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < NC; t++) {
                const int64_t i = i0 + r;
                const int j = t * 32 + lane;
                xv[r][t] = i < n && j < d ? X[i * d + j] : (T)0;
            }
        /* the R x K dot products, summed over the lanes (all lanes get them) */
        double z[R][KMAX];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int c = 0; c < KMAX; c++) {
                double s = 0.0;
#pragma unroll
                for (int t = 0; t < NC; t++)
                    s += cw[c][t] * (double)xv[r][t];
                z[r][c] = s;
            }
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1)
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int c = 0; c < KMAX; c++)
                    if (c < K)
                        z[r][c] += __shfl_xor_sync(FULL_MASK, z[r][c], off);

        /* lane r: row i0 + r's loss and residuals */
        double zr[KMAX], res[KMAX];
#pragma unroll
        for (int c = 0; c < KMAX; c++) {
            zr[c] = 0.0;
            res[c] = 0.0;
        }
#pragma unroll
        for (int r = 0; r < R; r++)
            if (lane == r)
#pragma unroll
                for (int c = 0; c < KMAX; c++)
                    zr[c] = z[r][c];
        const int64_t i = i0 + lane;
        if (lane < R && i < n) {
            const int32_t yi = y[i];
            if (yi < 0 || yi >= (K == 1 ? 2 : K)) {
                atomicMin(bad, (unsigned long long)i); /* the row adds nothing */
            } else {
                const double wi = !w ? 1.0
                                : w_f64 ? ((const double *)w)[i]
                                        : (double)((const float *)w)[i];
                accl += row_residual<KMAX>(zr, bias, K, yi, wi, res);
            }
        }
#pragma unroll
        for (int c = 0; c < KMAX; c++)
            accb[c] += res[c];

        /* every lane: its columns' gradient += r_c x_j over the R rows */
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int c = 0; c < KMAX; c++)
                if (c < K) {
                    const double rc = __shfl_sync(FULL_MASK, res[c], r);
#pragma unroll
                    for (int t = 0; t < NC; t++)
                        acc[c][t] += rc * (double)xv[r][t];
                }
    }

    /* the warp's loss and intercept gradients (lane r's rows), then the block's */
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) {
        accl += __shfl_xor_sync(FULL_MASK, accl, off);
#pragma unroll
        for (int c = 0; c < KMAX; c++)
            accb[c] += __shfl_xor_sync(FULL_MASK, accb[c], off);
    }
    double *mine = sh + warp * S;
#pragma unroll
    for (int c = 0; c < KMAX; c++)
        if (c < K)
#pragma unroll
            for (int t = 0; t < NC; t++) {
                const int j = t * 32 + lane;
                if (j < d)
                    mine[c * p + j] = acc[c][t];
            }
    if (lane == 0) {
#pragma unroll
        for (int c = 0; c < KMAX; c++)
            if (c < K && fit_intercept)
                mine[c * p + d] = accb[c];
        mine[K * p] = accl;
    }
    __syncthreads();
    for (int e = (int)threadIdx.x; e < S; e += FUSED_THREADS) {
        double s = 0.0;
        for (int v = 0; v < FUSED_WARPS; v++)
            s += sh[v * S + e];
        part[(int64_t)blockIdx.x * S + e] = s;
    }
}

/* gacc[e] (e < kp) and *loss (e = kp) = the blocks' partials added in block order */
__global__ void fused_finish(const double *__restrict__ part, int nblocks, int S, int kp,
                             double *gacc, double *loss)
{
    for (int e = (int)(blockIdx.x * blockDim.x + threadIdx.x); e < S;
         e += (int)(gridDim.x * blockDim.x)) {
        double s = 0.0;
        for (int b = 0; b < nblocks; b++)
            s += part[(int64_t)b * S + e];
        if (e < kp)
            gacc[e] = s;
        else
            *loss = s;
    }
}

/* The arguments of one call, shared by every tile shape. */
struct FusedArgs {
    const void *X;
    int64_t n;
    int d, K, p, fit_intercept;
    const int32_t *y;
    const void *w;
    bool w_f64;
    const double *coef;
    double *gacc, *loss;
    unsigned long long *bad;
};

template <typename T, int NC, int KMAX, int R>
int run(const gsb__backend *be, const FusedArgs &a)
{
    gsb__cuda_ctx *ctx = gsb__cuda_ctx_of(be);
    auto kern = fused_pass<T, NC, KMAX, R>;
    int per_sm = 0;
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, FUSED_THREADS, 0));
    const int64_t sms = ctx->sm_count > 0 ? ctx->sm_count : 80;
    const int64_t want = (a.n + (int64_t)FUSED_WARPS * R - 1) / ((int64_t)FUSED_WARPS * R);
    int64_t cap = sms * (per_sm > 0 ? per_sm : 1);
    const int nblocks = (int)(want < cap ? want : cap);
    const int S = a.K * a.p + 1;

    double *part = NULL;
    PASS(gsb__cuda_alloc(be, (size_t)nblocks * (size_t)S * sizeof(double), (void **)&part));
    int rc = GSB_OK;
    kern<<<(unsigned)nblocks, FUSED_THREADS, 0, ctx->stream>>>(
        (const T *)a.X, a.n, a.d, a.y, a.w, a.w_f64, a.coef, a.K, a.p, a.fit_intercept, part,
        a.bad);
    CUDA_CHECK(cudaGetLastError());
    fused_finish<<<(unsigned)((S + FINISH_THREADS - 1) / FINISH_THREADS), FINISH_THREADS, 0,
                   ctx->stream>>>(part, nblocks, S, a.K * a.p, a.gacc, a.loss);
    CUDA_CHECK(cudaGetLastError());
done:
    gsb__cuda_free(be, part); /* stream-ordered: after the kernels */
    return rc;
}

/* Columns per lane: the tile that holds d features. */
int chunks(int64_t d) { return (int)((d + 31) / 32); }

/* The tile shapes: rows per warp step R as large as the registers allow
 * (more rows in flight hide the loads' latency). */
template <typename T>
int dispatch(const gsb__backend *be, const FusedArgs &a)
{
    const int nc = chunks(a.d);
    if (a.K == 1) {
        if (nc <= 1)
            return run<T, 1, 1, 16>(be, a);
        if (nc <= 2)
            return run<T, 2, 1, 16>(be, a);
        if (nc <= 4)
            return run<T, 4, 1, 8>(be, a);
        return run<T, 8, 1, 4>(be, a);
    }
    if (a.K <= 4) {
        if (nc <= 1)
            return run<T, 1, 4, 4>(be, a);
        if (nc <= 2)
            return run<T, 2, 4, 4>(be, a);
        return run<T, 4, 4, 4>(be, a);
    }
    if (nc <= 1)
        return run<T, 1, 8, 2>(be, a);
    return run<T, 2, 8, 2>(be, a);
}

} /* namespace */

bool gsb__cuda_logistic_fused_fits(int64_t d, int64_t K)
{
    if (d < 1 || K < 1)
        return false;
    const int64_t nc = (d + 31) / 32;
    return (K == 1 && nc <= 8) || (K <= 4 && nc <= 4) || (K <= 8 && nc <= 2);
}

int gsb__cuda_logistic_fused(const gsb__backend *be, bool f32, const void *X, int64_t n,
                             int64_t d, const int32_t *y, const void *w, bool w_f64,
                             const double *coef, int64_t K, int fit_intercept, double *gacc,
                             double *loss, unsigned long long *bad)
{
    if (n < 1 || !gsb__cuda_logistic_fused_fits(d, K))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "logistic_loss_grad: the one-pass kernel does not "
                            "take %lld rows x %lld features, %lld classes",
                            (long long)n, (long long)d, (long long)K);
    FusedArgs a;
    a.X = X;
    a.n = n;
    a.d = (int)d;
    a.K = (int)K;
    a.p = (int)(d + (fit_intercept ? 1 : 0));
    a.fit_intercept = fit_intercept;
    a.y = y;
    a.w = w;
    a.w_f64 = w_f64;
    a.coef = coef;
    a.gacc = gacc;
    a.loss = loss;
    a.bad = bad;
    return f32 ? dispatch<float>(be, a) : dispatch<double>(be, a);
}
