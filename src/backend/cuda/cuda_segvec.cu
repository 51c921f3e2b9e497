/*
 * cuda_segvec.cu - the CUDA backend's segmented vector ops seg_dots,
 * seg_combine and seg_normalize (twin: cpu_segvec.c; backend.h states the
 * contract), with which Lanczos advances the recurrences of all of a
 * graph's large components in lockstep (solvers/lanczos_seg.c): one launch
 * per op for every component, no host wait, no cuBLAS.
 *
 * seg_dots: blocks of 256 threads over (slice of a segment, row of V); each
 * sums its slice in double by a fixed tree, so results repeat bitwise.
 * Segments are cut into `slices` equal parts when they are long on average
 * (one block per segment would leave the GPU idle for a single big
 * component); the slices' partials (pool scratch, stream-ordered) are then
 * added in slice order by a second kernel.  seg_combine: one thread per
 * element, its segment found by binary search in seg.  seg_normalize: the
 * same slices: their sums of squares, then each block adds its segment's
 * partials in slice order and scales its slice (one kernel when segments
 * are short: a block sums its whole segment).
 */
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_block_sum.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/seg_index.h"

namespace {

constexpr int BLOCK = 256;
constexpr int64_t MAX_GRID_X = 2147483647;
constexpr int64_t MAX_GRID_Y = 65535;
constexpr int64_t MAX_BLOCKS = 1 << 16;   /* seg_combine's grid-stride cap */
constexpr int64_t SLICE_ELEMS = 16384;    /* average elements per seg_dots block */
constexpr int64_t MAX_SLICES = 64;

/* t: on this GPU, of dtype, rows x cols (-1: any) or n elements (n >= 0) */
int check(const gsb__backend *be, const char *op, const char *name, const gsb__tensor *t,
          gsb_dtype dtype, int64_t rows, int64_t cols, int64_t n)
{
    if (!t || (!t->data && t->rows * t->cols > 0))
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is missing", op, name);
    if (t->dtype != dtype)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has dtype %s", op, name,
                            gsb__cuda_dtype_name(t->dtype));
    if (t->rows * t->cols > 0 && t->be != be)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s is not in this GPU's memory", op, name);
    bool bad = n >= 0 ? t->rows * t->cols != n
                      : (rows >= 0 && t->rows != rows) || (cols >= 0 && t->cols != cols);
    if (bad)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %s has shape (%lld, %lld)", op, name,
                            (long long)t->rows, (long long)t->cols);
    return GSB_OK;
}

/* seg (K + 1 int64 on this GPU), K >= 1 */
int check_seg(const gsb__backend *be, const char *op, const gsb__tensor *seg, int64_t *K)
{
    PASS(check(be, op, "seg", seg, GSB_I64, -1, -1, -1));
    if (seg->rows * seg->cols < 2)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: seg holds no segment", op);
    *K = seg->rows * seg->cols - 1;
    return GSB_OK;
}

/* slice p of segment c's elements: [*a, *b) */
__device__ void slice_range(const int64_t *seg, int64_t c, int64_t p, int64_t slices, int64_t n,
                            int64_t *a, int64_t *b)
{
    int64_t lo, hi;
    gsb__seg_range(seg, c, n, &lo, &hi);
    *a = lo + (hi - lo) * p / slices;
    *b = lo + (hi - lo) * (p + 1) / slices;
}

/* block (c * slices + p, i): slice p of segment c against row i of V; out[(i K + c) slices + p] */
__global__ void dots_kernel(const double *__restrict__ V, const double *__restrict__ x,
                            const int64_t *__restrict__ seg, int64_t n, int64_t K,
                            int64_t slices, int64_t row0, double *__restrict__ out)
{
    __shared__ double sh[BLOCK];
    const int64_t c = blockIdx.x / slices, p = blockIdx.x % slices;
    const int64_t i = row0 + blockIdx.y;
    int64_t a, b;
    slice_range(seg, c, p, slices, n, &a, &b);
    const double *v = V + i * n;
    double s = 0.0;
    for (int64_t e = a + threadIdx.x; e < b; e += BLOCK)
        s += v[e] * x[e];
    double total = gsb__block_sum<BLOCK>(s, sh);
    if (threadIdx.x == 0)
        out[(i * K + c) * slices + p] = total;
}

/* C[j] = the sum of part[j * slices .. (j + 1) * slices) in order, j < count */
__global__ void slices_sum_kernel(const double *__restrict__ part, int64_t count,
                                  int64_t slices, double *__restrict__ C)
{
    for (int64_t j = blockIdx.x * (int64_t)BLOCK + threadIdx.x; j < count;
         j += (int64_t)gridDim.x * BLOCK) {
        double s = 0.0;
        for (int64_t p = 0; p < slices; p++)
            s += part[j * slices + p];
        C[j] = s;
    }
}

__global__ void combine_kernel(double alpha, const double *__restrict__ C,
                               const double *__restrict__ V, const int64_t *__restrict__ seg,
                               int64_t K, int64_t m, int64_t n, int64_t l, double beta,
                               double *Y)
{
    for (int64_t e = blockIdx.x * (int64_t)BLOCK + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * BLOCK) {
        const int64_t k = gsb__seg_of(seg, K, e);
        for (int64_t r = 0; r < l; r++) {
            double s = 0.0;
            for (int64_t i = 0; i < m; i++)
                s += C[i * l * K + r * K + k] * V[i * n + e];
            Y[r * n + e] = beta == 0.0 ? alpha * s : beta * Y[r * n + e] + alpha * s;
        }
    }
}

/* block c * slices + p: the squares of slice p of segment c into part[c * slices + p] */
__global__ void sqsum_kernel(const double *x, const int64_t *__restrict__ seg, int64_t n,
                             int64_t slices, double *__restrict__ part)
{
    __shared__ double sh[BLOCK];
    int64_t a, b;
    slice_range(seg, blockIdx.x / slices, blockIdx.x % slices, slices, n, &a, &b);
    double s = 0.0;
    for (int64_t e = a + threadIdx.x; e < b; e += BLOCK)
        s += x[e] * x[e];
    double total = gsb__block_sum<BLOCK>(s, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = total;
}

/* block c * slices + p: slice p of segment c divided by the segment's norm
 * (its slices' partials added in order, the same sum in every block), the
 * norm into nrm[c] by slice 0; slices 1: the block sums the squares itself */
__global__ void scale_kernel(const double *x, const int64_t *__restrict__ seg, int64_t n,
                             int64_t slices, const double *__restrict__ part, double *y,
                             double *__restrict__ nrm)
{
    __shared__ double sh[BLOCK];
    const int64_t c = blockIdx.x / slices, p = blockIdx.x % slices;
    int64_t a, b;
    slice_range(seg, c, p, slices, n, &a, &b);
    double total;
    if (slices == 1) {
        double s = 0.0;
        for (int64_t e = a + threadIdx.x; e < b; e += BLOCK)
            s += x[e] * x[e];
        total = gsb__block_sum<BLOCK>(s, sh); /* every thread gets it */
    } else {
        total = 0.0;
        for (int64_t q = 0; q < slices; q++)
            total += part[c * slices + q];
    }
    const double norm = sqrt(total), inv = norm > 0.0 ? 1.0 / norm : 0.0;
    for (int64_t e = a + threadIdx.x; e < b; e += BLOCK)
        y[e] = inv * x[e];
    if (p == 0 && threadIdx.x == 0)
        nrm[c] = norm;
}

/* slices per segment: about SLICE_ELEMS elements a block on average */
int64_t slices_for(int64_t n, int64_t K)
{
    int64_t s = n / (K * SLICE_ELEMS);
    return s < 1 ? 1 : (s > MAX_SLICES ? MAX_SLICES : s);
}

} // namespace

extern "C" int gsb__cuda_seg_dots(const gsb__backend *be, const gsb__tensor *V,
                                  const gsb__tensor *x, const gsb__tensor *seg, gsb__tensor *C)
{
    const char *op = "seg_dots";
    int64_t K = 0;
    PASS(check_seg(be, op, seg, &K));
    PASS(check(be, op, "V", V, GSB_F64, -1, -1, -1));
    const int64_t m = V->rows, n = V->cols;
    PASS(check(be, op, "x", x, GSB_F64, -1, -1, n));
    PASS(check(be, op, "C", C, GSB_F64, m, K, -1));
    if (m == 0)
        return GSB_OK;
    const int64_t slices = slices_for(n, K);
    if (K * slices > MAX_GRID_X)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "seg_dots: %lld segments are too many",
                            (long long)K);
    cudaStream_t st = gsb__cuda_ctx_of(be)->stream;
    double *part = (double *)C->data;
    if (slices > 1)
        PASS(gsb__cuda_alloc(be, (size_t)(m * K * slices) * sizeof(double), (void **)&part));
    cudaError_t e = cudaSuccess;
    for (int64_t row0 = 0; row0 < m && e == cudaSuccess; row0 += MAX_GRID_Y) {
        const int64_t rows = m - row0 < MAX_GRID_Y ? m - row0 : MAX_GRID_Y;
        dim3 grid((unsigned)(K * slices), (unsigned)rows);
        dots_kernel<<<grid, BLOCK, 0, st>>>((const double *)V->data, (const double *)x->data,
                                            (const int64_t *)seg->data, n, K, slices, row0,
                                            part);
        e = cudaGetLastError();
    }
    if (slices > 1) {
        if (e == cudaSuccess) {
            int64_t blocks = (m * K + BLOCK - 1) / BLOCK;
            blocks = blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
            slices_sum_kernel<<<(unsigned)blocks, BLOCK, 0, st>>>(part, m * K, slices,
                                                                  (double *)C->data);
            e = cudaGetLastError();
        }
        gsb__cuda_free(be, part); /* stream-ordered: after the kernels */
    }
    return e == cudaSuccess ? GSB_OK : gsb__cuda_fail_rt(e, "seg_dots kernels", __FILE__,
                                                         __LINE__);
}

extern "C" int gsb__cuda_seg_combine(const gsb__backend *be, double alpha, const gsb__tensor *C,
                                     const gsb__tensor *V, const gsb__tensor *seg, double beta,
                                     gsb__tensor *Y)
{
    const char *op = "seg_combine";
    int64_t K = 0;
    PASS(check_seg(be, op, seg, &K));
    PASS(check(be, op, "V", V, GSB_F64, -1, -1, -1));
    const int64_t m = V->rows, n = V->cols;
    PASS(check(be, op, "Y", Y, GSB_F64, -1, n, -1));
    const int64_t l = Y->rows;
    PASS(check(be, op, "C", C, GSB_F64, m, l * K, -1));
    if (n == 0 || l == 0)
        return GSB_OK;
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    blocks = blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
    combine_kernel<<<(unsigned)blocks, BLOCK, 0, gsb__cuda_ctx_of(be)->stream>>>(
        alpha, (const double *)C->data, (const double *)V->data, (const int64_t *)seg->data, K,
        m, n, l, beta, (double *)Y->data);
    CUDA_LAUNCH_CHECK();
    return GSB_OK;
}

extern "C" int gsb__cuda_seg_normalize(const gsb__backend *be, const gsb__tensor *x,
                                       const gsb__tensor *seg, gsb__tensor *y, gsb__tensor *nrm)
{
    const char *op = "seg_normalize";
    int64_t K = 0;
    PASS(check_seg(be, op, seg, &K));
    PASS(check(be, op, "x", x, GSB_F64, -1, -1, -1));
    const int64_t n = x->rows * x->cols;
    PASS(check(be, op, "y", y, GSB_F64, -1, -1, n));
    PASS(check(be, op, "nrm", nrm, GSB_F64, -1, -1, K));
    const int64_t slices = slices_for(n, K);
    if (K * slices > MAX_GRID_X)
        return GSB_CUDA_ERR(GSB_EUNSUPPORTED, "seg_normalize: %lld segments are too many",
                            (long long)K);
    cudaStream_t st = gsb__cuda_ctx_of(be)->stream;
    double *part = NULL;
    cudaError_t e = cudaSuccess;
    if (slices > 1) {
        PASS(gsb__cuda_alloc(be, (size_t)(K * slices) * sizeof(double), (void **)&part));
        sqsum_kernel<<<(unsigned)(K * slices), BLOCK, 0, st>>>(
            (const double *)x->data, (const int64_t *)seg->data, n, slices, part);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) { /* after sqsum_kernel read x: y may be x */
        scale_kernel<<<(unsigned)(K * slices), BLOCK, 0, st>>>(
            (const double *)x->data, (const int64_t *)seg->data, n, slices, part,
            (double *)y->data, (double *)nrm->data);
        e = cudaGetLastError();
    }
    if (part)
        gsb__cuda_free(be, part); /* stream-ordered: after the kernels */
    return e == cudaSuccess ? GSB_OK : gsb__cuda_fail_rt(e, "seg_normalize kernels", __FILE__,
                                                         __LINE__);
}
