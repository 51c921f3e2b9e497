/*
 * cuda_sparse.cu - the CUDA backend's csr_spmm (twin: cpu_sparse.c): a
 * sparse matrix in CSR form times a dense one.
 *
 * One warp per row of the result: the lanes stride over the row's entries
 * (coalesced reads of indices and values), each keeps a double sum, and a
 * fixed butterfly adds the lanes, so results repeat bitwise; for k columns
 * the warp walks the row k times (UMAP's Lanczos takes k = 1).  Rows of
 * UMAP's graphs hold tens of entries, which a warp covers in a step or two.
 * A hand kernel rather than cuSPARSE: the engine's CSR has 64-bit row
 * offsets and 32-bit column indices, a mix cuSPARSE's generic SpMV does not
 * take, and a call needs no descriptors or workspace.  No check of the
 * structure on the device (it would cost a host wait per product, and
 * Lanczos runs hundreds): entries are clipped to [0, nnz) and an index
 * outside [0, n) makes its row NaN, as on the CPU.
 */
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_common.h"

namespace {

constexpr int BLOCK = 256;              /* 8 warps: 8 rows a block */
constexpr int64_t MAX_BLOCKS = 1 << 16; /* the rest by a grid-stride loop */

/* t: dtype (0: a float dtype), on this GPU, rows x cols (-1: any), or n
 * elements in any layout when n >= 0 */
int check(const gsb__backend *be, const char *name, const gsb__tensor *t, gsb_dtype dtype,
          int64_t rows, int64_t cols, int64_t n)
{
    if (!t || (!t->data && t->rows * t->cols > 0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "csr_spmm: %s is missing", name);
    if (dtype ? t->dtype != dtype : (t->dtype != GSB_F32 && t->dtype != GSB_F64))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "csr_spmm: %s has dtype %s", name,
                            gsb__cuda_dtype_name(t->dtype));
    if (t->rows * t->cols > 0 && t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "csr_spmm: %s is not in this GPU's memory", name);
    bool bad = n >= 0 ? t->rows * t->cols != n
                      : (rows >= 0 && t->rows != rows) || (cols >= 0 && t->cols != cols);
    if (bad)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "csr_spmm: %s has shape (%lld, %lld)", name,
                            (long long)t->rows, (long long)t->cols);
    return GSB_OK;
}

template <typename T>
__global__ void spmm_warp(const int64_t *__restrict__ ptr, const int32_t *__restrict__ col,
                          const T *__restrict__ val, int64_t nnz, const T *__restrict__ x,
                          int64_t n, int64_t k, int64_t m, T *__restrict__ y)
{
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t i = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; i < m;
         i += nwarps) {
        int64_t lo = ptr[i], hi = ptr[i + 1];
        lo = lo < 0 ? 0 : (lo > nnz ? nnz : lo);
        hi = hi < lo ? lo : (hi > nnz ? nnz : hi);
        for (int64_t c = 0; c < k; c++) {
            double s = 0.0;
            for (int64_t e = lo + lane; e < hi; e += 32) {
                int64_t j = col[e];
                s += j >= 0 && j < n ? (double)val[e] * (double)x[j * k + c] : (double)NAN;
            }
            for (int off = 16; off > 0; off >>= 1)
                s += __shfl_xor_sync(0xffffffffu, s, off);
            if (lane == 0)
                y[i * k + c] = (T)s;
        }
    }
}

template <typename T>
int launch(const gsb__backend *be, const gsb__tensor *indptr, const gsb__tensor *indices,
           const gsb__tensor *val, const gsb__tensor *X, gsb__tensor *Y)
{
    const int64_t m = Y->rows, k = Y->cols, nnz = indices->rows * indices->cols;
    int64_t blocks = (m + BLOCK / 32 - 1) / (BLOCK / 32);
    blocks = blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
    spmm_warp<T><<<(unsigned)blocks, BLOCK, 0, gsb__cuda_ctx_of(be)->stream>>>(
        (const int64_t *)indptr->data, (const int32_t *)indices->data, (const T *)val->data,
        nnz, (const T *)X->data, X->rows, k, m, (T *)Y->data);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

} // namespace

extern "C" int gsb__cuda_csr_spmm(const gsb__backend *be, const gsb__tensor *indptr,
                                  const gsb__tensor *indices, const gsb__tensor *val,
                                  const gsb__tensor *X, gsb__tensor *Y)
{
    PASS(check(be, "X", X, (gsb_dtype)0, -1, -1, -1));
    PASS(check(be, "Y", Y, X->dtype, -1, X->cols, -1));
    PASS(check(be, "indptr", indptr, GSB_I64, -1, -1, Y->rows + 1));
    PASS(check(be, "indices", indices, GSB_I32, -1, -1, -1));
    PASS(check(be, "val", val, X->dtype, -1, -1, indices->rows * indices->cols));
    if (Y->rows == 0 || Y->cols == 0)
        return GSB_OK;
    return X->dtype == GSB_F32 ? launch<float>(be, indptr, indices, val, X, Y)
                               : launch<double>(be, indptr, indices, val, X, Y);
}
