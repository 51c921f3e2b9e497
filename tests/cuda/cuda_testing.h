/*
 * cuda_testing.h - comparing each CUDA op with its CPU twin (header only).
 *
 * Inputs are fresh random data; GPU outputs are poisoned with NaN before the
 * op runs so an unwritten element fails the comparison; NaN never passes.
 * These tests need a GPU: they run under tools/gpu-check (ctest -L gpu),
 * never in the default suite.
 */
#ifndef GSB_CUDA_TESTING_H
#define GSB_CUDA_TESTING_H

#include "../c/testing.h"
#include "backend/backend.h"
#include "core/tensor.h"

static const gsb__backend *gpu, *cpu;

/* 1 when the CUDA backend loaded; prints why not otherwise. */
static inline int cuda_testing_init(void)
{
    /* unbuffered: a run killed by a timeout still shows the tests that passed */
    setvbuf(stdout, NULL, _IONBF, 0);
    cpu = gsb__cpu_backend();
    gpu = gsb__cuda_backend();
    if (!gpu)
        fprintf(stderr, "no CUDA backend: %s\n", gsb__cuda_unavailable_reason());
    else
        printf("CUDA backend on %s\n", gpu->device ? gpu->device : "?");
    return gpu != NULL;
}

/* Host tensor of N(0, scale^2) values (or uniform ints in [0, scale) for int dtypes). */
static inline gsb__tensor host_random(gsb_dtype dt, int64_t rows, int64_t cols, double scale)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(cpu, dt, rows, cols, &t) != GSB_OK)
        abort();
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&t, i, gsb__is_float(dt) ? scale * testing_normal()
                                                 : floor(scale * testing_uniform()));
    return t;
}

/* Host tensor filled with NaN (float) or -1 (int): the CPU twin's output. */
static inline gsb__tensor host_poisoned(gsb_dtype dt, int64_t rows, int64_t cols)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(cpu, dt, rows, cols, &t) != GSB_OK)
        abort();
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&t, i, gsb__is_float(dt) ? NAN : -1);
    return t;
}

/* The same values on the GPU. */
static inline gsb__tensor to_gpu(const gsb__tensor *h)
{
    gsb__tensor t;
    if (gsb__tensor_to(gpu, h, &t) != GSB_OK) {
        fprintf(stderr, "upload failed: %s\n", gsb_errmsg());
        abort();
    }
    return t;
}

/* A copy of a GPU tensor on the host (the twin of to_gpu). */
static inline gsb__tensor from_gpu(const gsb__tensor *g)
{
    gsb__tensor h;
    if (gsb__tensor_to_host(g, &h) != GSB_OK) {
        fprintf(stderr, "download failed: %s\n", gsb_errmsg());
        abort();
    }
    return h;
}

/* A GPU tensor poisoned with NaN / -1. */
static inline gsb__tensor gpu_poisoned(gsb_dtype dt, int64_t rows, int64_t cols)
{
    gsb__tensor h = host_poisoned(dt, rows, cols);
    gsb__tensor t = to_gpu(&h);
    gsb__tensor_free(&h);
    return t;
}

/*
 * max |gpu - ref| / max(max |ref|, floor) over all elements (ref is the CPU
 * twin's output, on the host); INFINITY when any element of either is NaN
 * or the shapes differ.  floor is the scale of the quantity compared, for
 * outputs that can be exactly 0 everywhere with nonzero inputs (cosine
 * distances of parallel rows, ~1e-16 off on the GPU): the error is then
 * measured against that scale instead of against 0.
 */
static inline double compare_floor(const gsb__tensor *g, const gsb__tensor *ref, double floor)
{
    if (g->rows != ref->rows || g->cols != ref->cols)
        return INFINITY;
    gsb__tensor h;
    if (gsb__tensor_to_host(g, &h) != GSB_OK)
        return INFINITY;
    double num = 0, den = floor > 1e-30 ? floor : 1e-30;
    for (int64_t i = 0; i < ref->rows * ref->cols; i++) {
        double a = gsb__tensor_get(&h, i), b = gsb__tensor_get(ref, i);
        if (isnan(a) || isnan(b)) {
            num = INFINITY;
            break;
        }
        num = fmax(num, fabs(a - b));
        den = fmax(den, fabs(b));
    }
    gsb__tensor_free(&h);
    return num / den;
}

/* max |gpu - ref| / max |ref| (see compare_floor) */
static inline double compare(const gsb__tensor *g, const gsb__tensor *ref)
{
    return compare_floor(g, ref, 0.0);
}

/* Relative error bound per dtype for ops whose CPU twin sums in double. */
static inline double tol_for(gsb_dtype dt) { return dt == GSB_F32 ? 1e-4 : 1e-10; }

#define CHECK_MATCH(g, ref, tol) CHECK_MATCH_FLOOR(g, ref, tol, 0.0)

/* CHECK_MATCH against max(max |ref|, floor) (see compare_floor) */
#define CHECK_MATCH_FLOOR(g, ref, tol, floor)                                       \
    do {                                                                            \
        double e_ = compare_floor((g), (ref), (floor));                             \
        if (!(e_ <= (tol))) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s vs CPU: relative error %g > %g\n",       \
                    __FILE__, __LINE__, testing_cur_name, #g, e_, (double)(tol));   \
            testing_cur_failed = 1;                                                 \
        }                                                                           \
    } while (0)

/* Bytes that differ with position (xorshift from seed), so a copied chunk
 * landing in the wrong place shows. */
static inline void byte_pattern(unsigned char *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

/* A case's parameters are printed when one of its checks failed. */
static inline int case_begin(void)
{
    int before = testing_cur_failed;
    testing_cur_failed = 0;
    return before;
}

#define CASE_END(before, ...)                                                       \
    do {                                                                            \
        if (testing_cur_failed) {                                                   \
            fprintf(stderr, "    in case: ");                                       \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
        }                                                                           \
        testing_cur_failed |= (before);                                             \
    } while (0)

#endif
