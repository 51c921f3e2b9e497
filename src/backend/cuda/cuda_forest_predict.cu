/*
 * cuda_forest_predict.cu - forest_predict on the GPU (contract in
 * backend/backend.h; the CPU twin is cpu/cpu_forest_predict.c).
 *
 * Nodes are packed into 16 bytes (split, threshold bits, left child) so a
 * step of a walk is one load.  One thread per row walks every tree in tree
 * order, adding the leaves' values in float64 registers (KMAX of them; more
 * values are summed in the output row), so each row's sums are the twin's,
 * bitwise: float32 values widened exactly, added in the same order, divided
 * by T in IEEE double division.  The comparisons are float32 against the
 * float32 thresholds, as the twin's (x rounded to nearest float32).
 *
 * A block takes PRED_ROWS rows: it first copies them into shared memory as
 * float32 (coalesced; rows padded to d + 1 words so the threads that read
 * one feature hit distinct banks), then every walk reads its row from there
 * instead of global memory (a row is read once per node visited: thousands
 * of times).  Rows too wide for the block's shared memory are read from
 * global memory.  Every block walks tree 0 first, then tree 1...: the blocks
 * resident at a time share their few current trees in L2.
 *
 * Outputs are reduced on the device: the mean, and the first index of its
 * largest value (the classifier's predict downloads 4 bytes a row, not K
 * float64).
 */
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_common.h"

namespace {

constexpr int PRED_ROWS = 128;                       /* rows (threads) per block */
constexpr size_t PRED_SMEM = (size_t)48 << 10;       /* shared memory for the rows */
constexpr int PACK_THREADS = 256;

/* x: split, y: threshold bits, z: child (left; at a leaf its row of values) */
__global__ void pack_nodes(const int32_t *__restrict__ split, const float *__restrict__ thr,
                           const int32_t *__restrict__ child, int64_t N, int4 *__restrict__ out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = make_int4(split[i], __float_as_int(thr[i]), child[i], 0);
}

struct PredArgs {
    const int4 *nodes;
    const int32_t *root;
    int64_t T;
    const float *value;
    int64_t K;
    double *mean;    /* n x K, or NULL */
    double *acc;     /* n x K float64 sums when KMAX = 0: mean, or scratch */
    int32_t *best;   /* n, or NULL */
    int32_t *leaves; /* n x T, or NULL */
};

/* Row i's leaf in the tree at root; x: the row's features (shared or global). */
template <typename X>
__device__ __forceinline__ int32_t walk(const int4 *__restrict__ nodes, int32_t root,
                                        const X *__restrict__ x, int4 *leaf)
{
    int32_t node = root;
    int4 nd = nodes[node];
    while (nd.x >= 0) {
        const float v = (float)x[nd.x >> 1];
        const bool left = isnan(v) ? (nd.x & 1) != 0 : v <= __int_as_float(nd.y);
        node = nd.z + (left ? 0 : 1);
        nd = nodes[node];
    }
    *leaf = nd;
    return node;
}

/* Every tree on row i (its features at x): leaves, then the mean and its arg max. */
template <int KMAX, typename X>
__device__ void predict_row(const PredArgs &a, int64_t i, const X *__restrict__ x)
{
    const bool sums = a.mean || a.best;
    double reg[KMAX > 0 ? KMAX : 1];
#pragma unroll
    for (int k = 0; k < (KMAX > 0 ? KMAX : 1); k++)
        reg[k] = 0.0;
    double *acc = KMAX == 0 && sums ? a.acc + i * a.K : NULL;
    if (acc)
        for (int64_t k = 0; k < a.K; k++)
            acc[k] = 0.0;
    for (int64_t t = 0; t < a.T; t++) {
        int4 nd;
        const int32_t r = a.root[t], node = walk(a.nodes, r, x, &nd);
        if (a.leaves)
            a.leaves[i * a.T + t] = node - r;
        if (!sums)
            continue;
        const float *__restrict__ v = a.value + (int64_t)nd.z * a.K;
        if (KMAX > 0) {
#pragma unroll
            for (int k = 0; k < (KMAX > 0 ? KMAX : 1); k++)
                if (k < a.K)
                    reg[k] += (double)v[k];
        } else {
            for (int64_t k = 0; k < a.K; k++)
                acc[k] += (double)v[k];
        }
    }
    if (!sums)
        return;
    double top = 0.0;
    int32_t arg = 0;
    const double T = (double)a.T;
#pragma unroll
    for (int k = 0; k < (KMAX > 0 ? KMAX : 1); k++) { /* constant indices: reg stays put */
        if (KMAX > 0 && k < a.K) {
            const double m = reg[k] / T;
            if (a.mean)
                a.mean[i * a.K + k] = m;
            if (k == 0 || m > top) {
                top = m;
                arg = k;
            }
        }
    }
    if (KMAX == 0) {
        for (int64_t k = 0; k < a.K; k++) {
            const double m = acc[k] / T;
            acc[k] = m;
            if (k == 0 || m > top) {
                top = m;
                arg = (int32_t)k;
            }
        }
    }
    if (a.best)
        a.best[i] = arg;
}

/*
 * Blocks of PRED_ROWS rows (grid-stride over them).  SMEM: the block's rows
 * staged as float32 in shared memory (PRED_ROWS x (d + 1)); else each walk
 * reads X in global memory.
 */
template <typename T, bool SMEM, int KMAX>
__global__ void __launch_bounds__(PRED_ROWS)
    predict_kernel(const T *__restrict__ X, int64_t n, int64_t d, PredArgs a)
{
    extern __shared__ float xs[];
    const int64_t stride = d + 1;
    for (int64_t i0 = blockIdx.x * (int64_t)PRED_ROWS; i0 < n;
         i0 += (int64_t)gridDim.x * PRED_ROWS) {
        const int64_t i = i0 + threadIdx.x;
        if (SMEM) {
            const int b = (int)(n - i0 < PRED_ROWS ? n - i0 : PRED_ROWS);
            const int len = b * (int)d; /* <= PRED_ROWS * d: fits (the caller checked) */
            __syncthreads(); /* the previous rows' walks are done with xs */
            for (int j = threadIdx.x; j < len; j += PRED_ROWS) {
                const int r = j / (int)d, f = j - r * (int)d;
                xs[r * stride + f] = (float)X[i0 * d + j];
            }
            __syncthreads();
            if (i < n)
                predict_row<KMAX>(a, i, xs + threadIdx.x * stride);
        } else if (i < n) {
            predict_row<KMAX>(a, i, X + i * d);
        }
    }
}

template <typename T, bool SMEM>
void launch_k(unsigned grid, size_t smem, cudaStream_t s, const T *X, int64_t n, int64_t d,
              const PredArgs &a)
{
    if (a.K <= 1)
        predict_kernel<T, SMEM, 1><<<grid, PRED_ROWS, smem, s>>>(X, n, d, a);
    else if (a.K <= 4)
        predict_kernel<T, SMEM, 4><<<grid, PRED_ROWS, smem, s>>>(X, n, d, a);
    else if (a.K <= 16)
        predict_kernel<T, SMEM, 16><<<grid, PRED_ROWS, smem, s>>>(X, n, d, a);
    else
        predict_kernel<T, SMEM, 0><<<grid, PRED_ROWS, smem, s>>>(X, n, d, a);
}

template <typename T>
void launch(const gsb__backend *be, cudaStream_t s, const T *X, int64_t n, int64_t d,
            const PredArgs &a)
{
    const int64_t sms = gsb__cuda_ctx_of(be)->sm_count > 0 ? gsb__cuda_ctx_of(be)->sm_count : 80;
    const int64_t blocks = (n + PRED_ROWS - 1) / PRED_ROWS, cap = sms * 32;
    const unsigned grid = (unsigned)(blocks < cap ? blocks : cap);
    const size_t smem = (size_t)PRED_ROWS * (size_t)(d + 1) * sizeof(float);
    if (smem <= PRED_SMEM)
        launch_k<T, true>(grid, smem, s, X, n, d, a);
    else
        launch_k<T, false>(grid, 0, s, X, n, d, a);
}

/* The op's tensors: on the device, of their dtypes and sizes. */
int check_args(const gsb__backend *be, const gsb__tensor *X, const gsb__forest_trees *t,
               const gsb__tensor *mean, const gsb__tensor *best, const gsb__tensor *leaves)
{
    const char *op = "forest_predict";
    if (!X || (X->dtype != GSB_F32 && X->dtype != GSB_F64) || !t)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: X must be float32 or float64", op);
    PASS(gsb__cuda_check_tensor(be, X, X->dtype, -1, -1, false, op, "X"));
    PASS(gsb__cuda_check_tensor(be, t->split, GSB_I32, -1, -1, false, op, "split"));
    PASS(gsb__cuda_check_tensor(be, t->threshold, GSB_F32, -1, -1, false, op, "threshold"));
    PASS(gsb__cuda_check_tensor(be, t->child, GSB_I32, -1, -1, false, op, "child"));
    PASS(gsb__cuda_check_tensor(be, t->root, GSB_I32, -1, -1, false, op, "root"));
    PASS(gsb__cuda_check_tensor(be, t->value, GSB_F32, -1, -1, false, op, "value"));
    const int64_t N = t->split->rows * t->split->cols, T = t->root->rows * t->root->cols;
    const int64_t n = X->rows, K = t->value->cols;
    if (t->threshold->rows * t->threshold->cols != N || t->child->rows * t->child->cols != N)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: node arrays differ in size", op);
    if (T < 1 || K < 1 || N < 1 || N > INT32_MAX)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: no trees or no values", op);
    if (mean)
        PASS(gsb__cuda_check_tensor(be, mean, GSB_F64, n, K, false, op, "mean"));
    if (best) {
        PASS(gsb__cuda_check_tensor(be, best, GSB_I32, -1, -1, false, op, "best"));
        if (best->rows * best->cols != n)
            return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: best has the wrong size", op);
    }
    if (leaves)
        PASS(gsb__cuda_check_tensor(be, leaves, GSB_I32, n, T, false, op, "leaves"));
    return GSB_OK;
}

} // namespace

extern "C" int gsb__cuda_forest_predict(const gsb__backend *be, const gsb__tensor *X,
                                        const gsb__forest_trees *t, gsb__tensor *mean,
                                        gsb__tensor *best, gsb__tensor *leaves)
{
    PASS(check_args(be, X, t, mean, best, leaves));
    const int64_t n = X->rows, d = X->cols, N = t->split->rows * t->split->cols;
    const int64_t K = t->value->cols;
    if (n == 0)
        return GSB_OK;
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    void *packed = NULL, *acc = NULL;
    int rc = GSB_OK;
    /* the walk trusts the links (the estimator checked them, forest_model.c) */
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)N * sizeof(int4), &packed));
    if (K > 16 && best && !mean) /* sums beyond the registers go to a row of scratch */
        GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)(n * K) * sizeof(double), &acc));
    {
        const int64_t want = (N + PACK_THREADS - 1) / PACK_THREADS;
        const unsigned pgrid = (unsigned)(want < 65536 ? want : 65536);
        pack_nodes<<<pgrid, PACK_THREADS, 0, s>>>(
            (const int32_t *)t->split->data, (const float *)t->threshold->data,
            (const int32_t *)t->child->data, N, (int4 *)packed);
        CUDA_CHECK(cudaGetLastError());
        PredArgs a = {(const int4 *)packed, (const int32_t *)t->root->data,
                      t->root->rows * t->root->cols, (const float *)t->value->data, K,
                      mean ? (double *)mean->data : NULL,
                      acc ? (double *)acc : mean ? (double *)mean->data : NULL,
                      best ? (int32_t *)best->data : NULL,
                      leaves ? (int32_t *)leaves->data : NULL};
        if (X->dtype == GSB_F32)
            launch(be, s, (const float *)X->data, n, d, a);
        else
            launch(be, s, (const double *)X->data, n, d, a);
        CUDA_CHECK(cudaGetLastError());
    }
done:
    gsb__cuda_free(be, packed);
    gsb__cuda_free(be, acc);
    return rc;
}
