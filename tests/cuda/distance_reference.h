/*
 * distance_reference.h - what the distance tests on the GPU
 * (test_cuda_distance.c, test_cuda_topk_gemm.c) share besides
 * cuda_testing.h: integer-valued data (exact distances, exact ties), the
 * metrics by their definition on host rows, and the metrics' names.
 * Header only; include after cuda_testing.h.
 */
#ifndef GSB_TESTS_CUDA_DISTANCE_REFERENCE_H
#define GSB_TESTS_CUDA_DISTANCE_REFERENCE_H

#include <math.h>

#include "cuda_testing.h"

/* Host tensor of integers in [0, r): exact distances, exact ties (and, in
 * few columns, duplicate rows). */
static inline gsb__tensor host_ints(gsb_dtype dt, int64_t rows, int64_t cols, int r)
{
    gsb__tensor t = host_random(dt, rows, cols, 1.0);
    for (int64_t i = 0; i < rows * cols; i++)
        gsb__tensor_set(&t, i, floor(testing_uniform() * r));
    return t;
}

/* The metric by its definition, in double, between host rows A[i] and B[j]. */
static inline double ref_dist(const gsb__tensor *A, int64_t i, const gsb__tensor *B, int64_t j,
                              gsb__metric m)
{
    double s = 0, aa = 0, bb = 0, ab = 0;
    for (int64_t c = 0; c < A->cols; c++) {
        double a = gsb__tensor_get(A, i * A->cols + c), b = gsb__tensor_get(B, j * B->cols + c);
        s += m == GSB__METRIC_MANHATTAN ? fabs(a - b) : (a - b) * (a - b);
        aa += a * a;
        bb += b * b;
        ab += a * b;
    }
    if (m == GSB__METRIC_EUCLIDEAN)
        return sqrt(s);
    if (m == GSB__METRIC_COSINE)
        return aa > 0 && bb > 0 ? 1.0 - ab / (sqrt(aa) * sqrt(bb)) : 1.0;
    return s;
}

/* The name of one of the four metrics both ops take. */
static inline const char *metric_name(gsb__metric m)
{
    return m == GSB__METRIC_SQEUCLIDEAN ? "sqeuclidean"
           : m == GSB__METRIC_EUCLIDEAN ? "euclidean"
           : m == GSB__METRIC_COSINE    ? "cosine"
                                        : "manhattan";
}

#endif
