/*
 * cuda_tsne_fft.cu - tsne_repulse_fft on the GPU: FIt-SNE's interpolation
 * and FFT convolution with cuFFT.  Twin: cpu_tsne_fft.c, which lays the
 * same grid (backend/tsne_grid.h) and computes the same potentials; both in
 * double.  Not float32 grids (cuML's choice): R_i = y_i phi_0 - phi_1 takes
 * the difference of two potentials of the size of |y_i| (up to half the
 * embedding's width) where R_i itself can be 1e-5 of that or less (a point
 * far from the others), and float32 rounding in the FFT, ~1e-7 of the largest
 * potential, then swamps R_i: float32 grids differed from the CPU twin by
 * 31% of the largest |R| on 7 points some 20 apart and by 0.5% on 50000
 * (H100).  In double the grids take twice the memory (at most ~400 MB, at
 * the largest 2-D grid) and the FFTs, memory-bound, about twice the time.
 *
 * Per call:
 *  1. the coordinates' min and max (a two-stage reduction; the one host wait
 *     of the call: the grid's size depends on them);
 *  2. the real grids, d + 4 channels of m^d doubles: the kernels w^2 and w
 *     (filled by a kernel) and the charge channels 1, y (d of them) and 1
 *     for Z (zeroed, then one thread per point adds its charges times its
 *     p^d weights with atomicAdd: the order of the additions varies, so
 *     results vary in the last bits from run to run);
 *  3. one batched D2Z transform of all d + 4 channels; each charge
 *     channel's spectrum multiplied by its kernel's (and by 1 / m^d); one
 *     batched Z2D transform back;
 *  4. one thread per point interpolates its potentials and writes R_i and
 *     its Z share (less its own interpolated w, gsb__tsne_grid_self); the
 *     shares are summed deterministically into zsum.
 * Coordinates are relative to the grid's centre.  cuFFT plans are made once
 * per (m, d) and kept in a small cache (at most CACHE_PLANS pairs, least
 * recently used evicted; the backend's op lock serialises access); they live
 * until the process exits, like the backend.
 */
#include <cufft.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_tsne.cuh"
#include "backend/tsne_grid.h"

using namespace gsb_tsne;

namespace {

constexpr int MAX_CHANNELS = 4; /* d + 2 charge channels, d <= 2 */
constexpr int CACHE_PLANS = 4;

int fft_fail(cufftResult r, const char *what)
{
    return GSB_CUDA_ERR(r == CUFFT_ALLOC_FAILED ? GSB_ENOMEM : GSB_EBACKEND,
                        "tsne_repulse_fft: %s failed (cuFFT status %d)", what, (int)r);
}

#define CUFFT_CHECK(call, what)                                                     \
    do {                                                                            \
        cufftResult r_ = (call);                                                    \
        if (r_ != CUFFT_SUCCESS) {                                                  \
            rc = fft_fail(r_, what);                                                \
            goto done;                                                              \
        }                                                                           \
    } while (0)

/* ---- the plan cache --------------------------------------------------------- */

struct Plans {
    int64_t m;
    int d;
    cufftHandle fwd, inv; /* D2Z of d + 4 channels, Z2D of d + 2 */
    uint64_t used;        /* last use, for eviction; 0: empty slot */
};

/* per device (a plan belongs to the device it was made on), each used under
 * its device's op lock */
Plans cache[GSB__CUDA_MAX_DEVICES][CACHE_PLANS];
uint64_t cache_clock[GSB__CUDA_MAX_DEVICES];

/* complex cells of one channel's half spectrum */
int64_t spectrum_cells(int64_t m, int d) { return d == 1 ? m / 2 + 1 : m * (m / 2 + 1); }

int make_plans(cudaStream_t s, int64_t m, int d, Plans *p)
{
    int dims[2] = {(int)m, (int)m};
    cufftHandle fwd = 0, inv = 0;
    bool have_fwd = false, have_inv = false;
    int rc = GSB_OK;
    /* NULL embeds: the basic layout, batches contiguous (dist arguments unused) */
    CUFFT_CHECK(cufftPlanMany(&fwd, d, dims, NULL, 1, 0, NULL, 1, 0, CUFFT_D2Z, d + 4),
                "cufftPlanMany (D2Z)");
    have_fwd = true;
    CUFFT_CHECK(cufftPlanMany(&inv, d, dims, NULL, 1, 0, NULL, 1, 0, CUFFT_Z2D, d + 2),
                "cufftPlanMany (Z2D)");
    have_inv = true;
    CUFFT_CHECK(cufftSetStream(fwd, s), "cufftSetStream");
    CUFFT_CHECK(cufftSetStream(inv, s), "cufftSetStream");
    p->m = m;
    p->d = d;
    p->fwd = fwd;
    p->inv = inv;
    return GSB_OK;
done:
    if (have_fwd)
        cufftDestroy(fwd);
    if (have_inv)
        cufftDestroy(inv);
    return rc;
}

/* device's plans for (m, d): cached, or made (evicting the least recently used). */
int get_plans(int device, cudaStream_t s, int64_t m, int d, const Plans **out)
{
    Plans *slots = cache[device];
    uint64_t &tick = cache_clock[device];
    int slot = 0;
    for (int i = 0; i < CACHE_PLANS; i++) {
        if (slots[i].used && slots[i].m == m && slots[i].d == d) {
            slots[i].used = ++tick;
            *out = &slots[i];
            return GSB_OK;
        }
        if (slots[i].used < slots[slot].used)
            slot = i;
    }
    if (slots[slot].used) {
        /* plans still queued on the stream must not be destroyed under them */
        CUDA_TRY(cudaStreamSynchronize(s));
        cufftDestroy(slots[slot].fwd);
        cufftDestroy(slots[slot].inv);
        slots[slot].used = 0;
    }
    Plans p;
    int rc = make_plans(s, m, d, &p);
    if (rc != GSB_OK)
        return rc;
    p.used = ++tick;
    slots[slot] = p;
    *out = &slots[slot];
    return GSB_OK;
}

/* ---- kernels ------------------------------------------------------------------ */

__global__ void minmax_partial_k(const float *y, int64_t count, float2 *part)
{
    __shared__ float lo[BLOCK], hi[BLOCK];
    float a = INFINITY, b = -INFINITY;
    for (int64_t e = (int64_t)blockIdx.x * BLOCK + threadIdx.x; e < count;
         e += (int64_t)gridDim.x * BLOCK) {
        a = fminf(a, y[e]);
        b = fmaxf(b, y[e]);
    }
    lo[threadIdx.x] = a;
    hi[threadIdx.x] = b;
    __syncthreads();
    for (int half = BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            lo[threadIdx.x] = fminf(lo[threadIdx.x], lo[threadIdx.x + half]);
            hi[threadIdx.x] = fmaxf(hi[threadIdx.x], hi[threadIdx.x + half]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = make_float2(lo[0], hi[0]);
}

__global__ void minmax_final_k(float2 *part, int m)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    float2 r = part[0];
    for (int i = 1; i < m; i++) {
        r.x = fminf(r.x, part[i].x);
        r.y = fmaxf(r.y, part[i].y);
    }
    part[0] = r;
}

/* the kernels w^2 (channel 0) and w (channel 1) on the circular grid */
__global__ void kernels_k(gsb__tsne_grid g, int64_t cells, double *grid)
{
    for (int64_t e = (int64_t)blockIdx.x * BLOCK + threadIdx.x; e < cells;
         e += (int64_t)gridDim.x * BLOCK) {
        int ok0 = 1, ok1;
        int64_t o0 = g.d == 1 ? 0 : gsb__tsne_grid_offset(&g, e / g.m, &ok0);
        int64_t o1 = gsb__tsne_grid_offset(&g, g.d == 1 ? e : e % g.m, &ok1);
        double r2 = g.h * g.h * (double)(o0 * o0 + o1 * o1), k1 = 1.0 / (1.0 + r2);
        bool ok = ok0 && ok1;
        grid[e] = ok ? k1 * k1 : 0.0;
        grid[cells + e] = ok ? k1 : 0.0;
    }
}

/* a point's box (flat) and its d x p weights */
__device__ int64_t locate(const gsb__tsne_grid &g, const float *yi, double *w)
{
    int64_t b = 0;
    for (int a = 0; a < g.d; a++)
        b = b * g.boxes + gsb__tsne_grid_weights(&g, (double)yi[a] - g.centre, w + a * g.p);
    return b;
}

/* flat grid cell of point-local node k of box b, and its weight */
__device__ int64_t node_of(const gsb__tsne_grid &g, int64_t b, int k, const double *w,
                           double *wk)
{
    if (g.d == 1) {
        *wk = w[k];
        return b * g.p + k;
    }
    int k0 = k / g.p, k1 = k % g.p;
    *wk = w[k0] * w[g.p + k1];
    return ((b / g.boxes) * g.p + k0) * g.m + (b % g.boxes) * g.p + k1;
}

/* channel charges of a point: 1, y - centre (d), 1 (Z) */
__device__ void charges(const gsb__tsne_grid &g, const float *yi, double *q)
{
    q[0] = 1.0;
    for (int a = 0; a < g.d; a++)
        q[1 + a] = (double)yi[a] - g.centre;
    q[g.d + 1] = 1.0;
}

__global__ void spread_k(gsb__tsne_grid g, const float *__restrict__ Y, int64_t n,
                         int64_t cells, double *__restrict__ charge_grids)
{
    const int pd = g.d == 1 ? g.p : g.p * g.p, channels = g.d + 2;
    for (int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        const float *yi = Y + i * g.d;
        double w[2 * GSB__TSNE_FFT_MAX_P], q[MAX_CHANNELS];
        int64_t b = locate(g, yi, w);
        charges(g, yi, q);
        for (int k = 0; k < pd; k++) {
            double wk;
            int64_t node = node_of(g, b, k, w, &wk);
            for (int c = 0; c < channels; c++)
                atomicAdd(&charge_grids[c * cells + node], wk * q[c]);
        }
    }
}

/* spectra of the charge channels times their kernel's, scaled by 1 / m^d */
__global__ void multiply_k(cufftDoubleComplex *spec, int64_t scells, int d, double scale)
{
    const int64_t total = (int64_t)(d + 2) * scells;
    for (int64_t e = (int64_t)blockIdx.x * BLOCK + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * BLOCK) {
        const int64_t c = e / scells, k = e % scells;
        const cufftDoubleComplex ker = spec[(c <= d ? 0 : 1) * scells + k];
        cufftDoubleComplex &x = spec[2 * scells + e];
        const double re = x.x * ker.x - x.y * ker.y, im = x.x * ker.y + x.y * ker.x;
        x.x = re * scale;
        x.y = im * scale;
    }
}

__global__ void gather_k(gsb__tsne_grid g, const float *__restrict__ Y, int64_t n, int64_t cells,
                         const double *__restrict__ pot, float *__restrict__ R,
                         double *__restrict__ zrow)
{
    const int pd = g.d == 1 ? g.p : g.p * g.p, channels = g.d + 2;
    for (int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        const float *yi = Y + i * g.d;
        double w[2 * GSB__TSNE_FFT_MAX_P], q[MAX_CHANNELS], phi[MAX_CHANNELS] = {0, 0, 0, 0};
        int64_t b = locate(g, yi, w);
        charges(g, yi, q);
        for (int k = 0; k < pd; k++) {
            double wk;
            int64_t node = node_of(g, b, k, w, &wk);
            for (int c = 0; c < channels; c++)
                phi[c] += wk * pot[c * cells + node];
        }
        for (int a = 0; a < g.d; a++)
            R[i * g.d + a] = (float)(q[1 + a] * phi[0] - phi[1 + a]);
        zrow[i] = phi[g.d + 1] - gsb__tsne_grid_self(&g, w);
    }
}

/* the coordinates' bounds (waits for the stream) */
int bounds(const gsb__backend *be, const gsb__tensor *Y, float2 *out)
{
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    const int64_t count = Y->rows * Y->cols;
    const int parts = (int)(blocks_for(count) < 256 ? blocks_for(count) : 256);
    float2 *part = NULL;
    int rc;
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)parts * sizeof(float2), (void **)&part));
    minmax_partial_k<<<parts, BLOCK, 0, s>>>((const float *)Y->data, count, part);
    CUDA_CHECK(cudaGetLastError());
    minmax_final_k<<<1, 1, 0, s>>>(part, parts);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(out, part, sizeof *out, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
done:
    gsb__cuda_free(be, part);
    return rc;
}

/* steps 2 to 4 on the grid g */
int convolve(const gsb__backend *be, const gsb__tensor *Y, const gsb__tsne_grid &g,
             gsb__tensor *R, gsb__tensor *zsum)
{
    cudaStream_t s = gsb__cuda_ctx_of(be)->stream;
    const int64_t n = Y->rows;
    const int d = g.d;
    const int64_t cells = d == 1 ? g.m : g.m * g.m, scells = spectrum_cells(g.m, d);
    const size_t real_bytes = (size_t)(d + 4) * (size_t)cells * sizeof(double);
    const size_t spec_bytes = (size_t)(d + 4) * (size_t)scells * sizeof(cufftDoubleComplex);
    const float *y = (const float *)Y->data;
    const Plans *plans = NULL;
    double *grid = NULL;
    cufftDoubleComplex *spec = NULL;
    double *zrow = NULL;
    int rc;
    GSB_CUDA_CHECK(get_plans(gsb__cuda_ctx_of(be)->device, s, g.m, d, &plans));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, real_bytes, (void **)&grid));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, spec_bytes, (void **)&spec));
    GSB_CUDA_CHECK(gsb__cuda_alloc(be, (size_t)n * sizeof(double), (void **)&zrow));
    CUDA_CHECK(cudaMemsetAsync(grid + 2 * cells, 0,
                               (size_t)(d + 2) * (size_t)cells * sizeof(double), s));
    kernels_k<<<blocks_for(cells), BLOCK, 0, s>>>(g, cells, grid);
    CUDA_CHECK(cudaGetLastError());
    spread_k<<<blocks_for(n), BLOCK, 0, s>>>(g, y, n, cells, grid + 2 * cells);
    CUDA_CHECK(cudaGetLastError());
    CUFFT_CHECK(cufftExecD2Z(plans->fwd, grid, spec), "cufftExecD2Z");
    multiply_k<<<blocks_for((d + 2) * scells), BLOCK, 0, s>>>(spec, scells, d,
                                                              1.0 / (double)cells);
    CUDA_CHECK(cudaGetLastError());
    CUFFT_CHECK(cufftExecZ2D(plans->inv, spec + 2 * scells, grid + 2 * cells), "cufftExecZ2D");
    gather_k<<<blocks_for(n), BLOCK, 0, s>>>(g, y, n, cells, grid + 2 * cells, (float *)R->data,
                                              zrow);
    CUDA_CHECK(cudaGetLastError());
    GSB_CUDA_CHECK(gsb__cuda_tsne_sum(be, zrow, n, (double *)zsum->data));
done:
    gsb__cuda_free(be, grid);
    gsb__cuda_free(be, spec);
    gsb__cuda_free(be, zrow);
    return rc;
}

} // namespace

extern "C" int gsb__cuda_tsne_repulse_fft(const gsb__backend *be, const gsb__tensor *Y,
                                          int n_interp, int min_boxes, gsb__tensor *R,
                                          gsb__tensor *zsum)
{
    const char *op = "tsne_repulse_fft";
    int rc = check_repulse(be, Y, 1, R, zsum, op);
    if (rc != GSB_OK)
        return rc;
    if (Y->cols > 2)
        return GSB_CUDA_ERR(GSB_EINTERNAL, "%s: %lld dimensions (1 or 2)", op,
                            (long long)Y->cols);
    float2 lohi;
    rc = bounds(be, Y, &lohi);
    if (rc != GSB_OK)
        return rc;
    gsb__tsne_grid g;
    if (gsb__tsne_grid_plan(lohi.x, lohi.y, (int)Y->cols, n_interp, min_boxes, &g) != 0)
        return GSB_CUDA_ERR(GSB_EINTERNAL,
                            "%s: no grid for bounds [%g, %g] with %d nodes per box", op,
                            (double)lohi.x, (double)lohi.y, n_interp);
    return convolve(be, Y, g, R, zsum);
}
