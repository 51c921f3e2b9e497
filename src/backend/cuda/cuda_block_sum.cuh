/*
 * cuda_block_sum.cuh - the CUDA ops' deterministic sum of doubles over a
 * thread block: every thread's value added by one fixed tree in shared
 * memory (thread t takes t + BLOCK/2, then t + BLOCK/4, ...), so a sum
 * repeats bitwise from run to run; and the kernel that sums an array with
 * it in a fixed order (a partial per block; run again with one block on the
 * partials, the total).  cuda_segvec.cu, cuda_vecnorm.cu, cuda_tsne.cu and
 * cuda_family.cu sum this way: their results depend on this exact order.
 */
#ifndef GSB_CUDA_BLOCK_SUM_CUH
#define GSB_CUDA_BLOCK_SUM_CUH

#include <stdint.h>

/*
 * The sum of v over the block (blockDim.x == BLOCK, a power of two; every
 * thread calls it), by the fixed tree in sh (BLOCK doubles of shared
 * memory); every thread gets it.  sh may be written again only after
 * another __syncthreads().
 */
template <int BLOCK>
static __device__ inline double gsb__block_sum(double v, double *sh)
{
    static_assert(BLOCK > 0 && (BLOCK & (BLOCK - 1)) == 0, "BLOCK is a power of two");
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    return sh[0];
}

/*
 * part[b] = the sum of block b's share of v[0 .. n) in a grid-stride loop
 * (launched with BLOCK threads a block): each thread adds its elements in
 * index order, then gsb__block_sum.  Launched with one block, part[0] is the
 * sum of v in an order that depends on n and BLOCK alone.
 */
template <int BLOCK>
static __global__ void gsb__block_sums_kernel(const double *__restrict__ v, int64_t n,
                                              double *__restrict__ part)
{
    __shared__ double sh[BLOCK];
    double acc = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK)
        acc += v[i];
    double total = gsb__block_sum<BLOCK>(acc, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = total;
}

#endif
