/*
 * test_dbscan.c - DBSCAN through the public API: scikit-learn 1.9.1's labels
 * and core samples on small fixed datasets (the grid, brute-force and GEMM
 * paths, every metric, sample weights, a precomputed asymmetric matrix) in
 * float32 and float64, the rule for border samples two clusters can claim,
 * the bounded-memory path (neighbourhoods recomputed per pass, in pieces),
 * and scikit-learn's errors for bad input.
 *
 * Known answers, produced by scikit-learn 1.9.1 (the script is in the
 * comment at the end of this file).  No pair distance lies within 2e-5 of
 * its eps, so float32 rounding of the data cannot move a neighbour.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_api_helpers.h"

static const double X2[88] = {0.01, 0.48, 0.43, -0.18, -0.1, -0.18, 0.2, -0.02, 0.26, -0.65, 0.55, -0.03, 0.24, -0.05, -0.13, 0.16, 0.29, -0.07, -0.05, 0.24, -0.3, -0.53, 0.14, -0.23, 2.33, -0.28, 2.84, -0.42, 2.48, 0.01, 3.31, -0.08, 2.74, 0.13, 3.25, -0.11, 3.19, 0.37, 2.93, -0.28, 3.12, 0.09, 3.38, -0.45, 2.77, -0.29, 2.39, 0.04, 0.18, 2.74, 0.48, 3.29, 0.22, 3.14, 0.33, 2.53, 0.21, 3.21, -0.62, 3.12, -0.09, 3.27, -0.15, 2.99, 0.12, 2.69, 0.21, 2.96, 0.17, 2.82, 0.38, 3.21, -0.91, 0.46, 2.64, 1.47, 3.26, 0.09, 0.58, 0.29, 3.89, 3.71, 0.7, 1.18, 0.57, 2.73, -0.8, -0.66};
static const double X10[450] = {-1.47, 2.72, 4.31, -5.23, -6.48, -0.18, 0.74, -0.99, 3.2, 7.2, -1.73, 1.01, 1.56, -3.07, -5.6, -0.98, -1.07, -2.7, 3.46, 8.11, -1.91, -0.23, 3.62, -2.92, -3.8, -0.82, -1.31, -2.86, 5.27, 9.47, -2.54, 0.56, 2.89, -4.28, -6.18, -1.23, -0.65, -0.32, 3.97, 7.82, -2.13, 1.54, 0.15, -4.9, -5.11, -1.48, -0.26, -0.87, 5.27, 7.71, -0.7, 1.1, 1.59, -4.19, -6.4, -2.01, -1.39, -1.5, 4.2, 6.56, -3.64, 1.14, 2.52, -2.37, -5.33, -1.53, -1.57, 0.6, 4.71, 8.73, 0.41, 0.39, 2.68, -3.0, -5.35, -0.34, -0.64, -1.24, 2.45, 6.74, -2.46, 1.33, 1.82, -2.84, -5.09, -0.58, -0.53, -1.32, 3.5, 6.74, -2.21, 1.6, 2.3, -2.87, -7.24, 0.0, -1.61, -2.14, 3.75, 6.34, -1.42, 0.63, 1.22, -4.3, -4.6, -0.84, -2.01, -1.4, 2.39, 8.69, -3.24, 1.69, 2.83, -4.9, -5.61, 0.11, -0.38, -1.15, 4.9, 7.06, -1.38, 1.08, 2.92, -4.4, -5.12, -1.39, -1.93, -1.05, 5.64, 7.86, -2.23, 1.91, 1.84, -3.58, -5.82, -3.2, -0.65, -2.44, 3.25, 5.43, -3.23, 0.27, 3.12, -1.79, -5.93, 0.21, -1.11, -3.32, 4.1, 7.35, 1.0, 2.43, 2.43, -2.29, 3.22, -1.22, -2.51, 1.87, -0.11, 2.39, 2.02, 3.0, 1.86, -3.56, 3.72, -2.08, -2.74, -0.17, -2.1, 4.23, 1.76, 0.57, 2.09, -3.43, 0.27, -1.52, -2.98, 0.48, -0.74, 3.06, 1.89, 1.52, 2.67, -2.85, 2.47, -0.29, -4.3, -0.86, 0.62, 3.35, 1.13, 2.08, 1.01, -2.72, 1.51, -0.56, -4.82, 1.18, -1.42, 1.43, 1.19, 1.36, 1.64, -4.15, 2.57, 2.79, -4.53, 0.18, -1.22, 3.21, -0.4, 0.58, 1.95, -3.04, 3.81, -1.54, -3.07, 2.76, -1.67, 2.11, 1.38, 1.69, 2.34, -2.87, 1.42, -0.62, -0.61, 1.12, -3.69, 2.87, 0.54, 2.36, 1.32, -1.07, 3.1, 0.06, -3.06, -0.19, -0.57, 4.31, 1.95, 1.38, 2.77, -2.81, 2.09, -1.62, -3.81, -0.79, -3.7, 4.03, 1.98, 1.52, 2.54, -2.56, 2.54, -3.31, -3.48, 0.38, 0.7, 4.85, 2.84, 0.57, -0.71, -2.43, 2.2, 0.13, -3.37, 0.07, -2.41, 3.46, 0.97, 2.08, 1.95, -3.12, 2.49, -0.85, -2.49, 0.35, -1.46, 2.43, 3.16, 1.63, 2.48, -2.61, 1.61, -1.58, -3.13, 0.1, -0.29, 1.75, 0.82, 1.64, 3.09, -5.36, 2.61, -1.37, -2.82, -0.65, -0.54, 4.58, 1.89, 0.09, 3.68, -5.41, -2.17, 1.26, -3.82, -5.79, -5.11, -2.72, 2.04, -0.86, 2.19, -7.81, -3.27, -0.55, -4.98, -5.25, -4.91, -5.33, 2.68, 2.79, 0.74, -4.58, -4.12, 0.16, -3.89, -6.81, -3.53, -3.18, 1.18, 0.35, 0.71, -6.75, -2.5, -1.06, -4.15, -5.22, -3.78, -2.32, 1.47, -0.12, 2.68, -6.76, -3.75, 1.73, -2.02, -5.1, -5.02, -3.1, 0.04, 0.61, 1.17, -4.01, -2.72, 0.79, -3.91, -7.88, -4.12, -2.04, 1.2, 1.31, 2.95, -7.95, -2.5, 2.01, -3.49, -5.43, -4.04, -5.21, 2.02, 1.68, 0.98, -5.41, -3.86, -1.43, -3.82, -6.34, -4.51, -4.84, 2.98, -0.12, 2.58, -6.99, -3.76, 1.84, -3.5, -5.76, -6.08, -2.51, 2.66, 0.3, 2.47, -7.43, -4.45, -0.17, -3.36, -5.07, -5.58, -2.93, 2.71, 0.8, 3.26, -6.69, -3.55, 1.13, -3.75, -4.57, -6.08, -2.25, 1.15, 0.46, 0.85, -5.8, -2.16, 1.72, -2.88, -6.92, -5.61, -4.14, 0.99, 1.75, 2.41, -6.42, -2.95, -0.3, -4.62, -6.25, -4.33, -3.33, 2.51, 1.7, 0.87, -6.96, -3.29, -0.7, -4.25, -4.35, -3.73, -2.6, 1.97, 0.41, 3.31, -6.77, -3.1, 1.98, -4.08, -5.98, -4.84, -3.07};
static const double W2[44] = {1.19, 0.46, 1.23, 0.8, 0.21, -2.0, 0.78, 0.3, 0.54, 0.6, 0.65, 1.12, 0.42, 0.78, 0.99, 1.43, 0.35, 0.3, 0.45, 0.49, 0.41, 0.3, 0.47, 0.49, 0.82, 1.04, 0.67, 0.42, 0.32, 0.54, 0.42, 0.83, 1.33, 1.13, 0.46, 0.25, 0.29, 0.77, 0.67, 1.09, 0.31, 0.53, 1.09, 0.94};
static const int64_t E2_LABELS[44] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, -1, -1, 1, 0, -1, -1, 2, -1};
static const int64_t E2_CORE[34] = {1, 2, 3, 5, 6, 7, 8, 9, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 30, 31, 32, 33, 34, 35, 38, 39, 42};
#define E2_NCORE 34
static const int64_t M2_LABELS[44] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, -1, -1, 1, 0, -1, -1, 2, -1};
static const int64_t M2_CORE[34] = {1, 2, 3, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 30, 31, 32, 33, 34, 35, 38, 42};
#define M2_NCORE 34
static const int64_t C2_LABELS[44] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, -1, 2, 2, 2, 2, 2, 2, -1, -1, 1, 0, -1, -1, 2, -1};
static const int64_t C2_CORE[37] = {0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 30, 31, 32, 33, 34, 35, 38, 39, 42};
#define C2_NCORE 37
static const int64_t P2_LABELS[44] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, -1, -1, 1, 0, -1, -1, 2, -1};
static const int64_t P2_CORE[35] = {1, 2, 3, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 30, 31, 32, 33, 34, 35, 38, 39, 42};
#define P2_NCORE 35
static const int64_t COS2_LABELS[44] = {0, 1, -1, 1, -1, 1, 1, -1, 1, 0, -1, -1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, 1, -1, -1, -1, 0, -1};
static const int64_t COS2_CORE[32] = {0, 3, 5, 6, 8, 9, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 38, 42};
#define COS2_NCORE 32
static const int64_t E10_LABELS[45] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
static const int64_t E10_CORE[41] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 21, 23, 24, 25, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44};
#define E10_NCORE 41
static const int64_t COS10_LABELS[45] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
static const int64_t COS10_CORE[44] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44};
#define COS10_NCORE 44
static const int64_t W2_LABELS[44] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, -1, -1, 1, 0, -1, -1, 2, -1};
static const int64_t W2_CORE[28] = {1, 2, 3, 6, 7, 8, 9, 11, 15, 16, 17, 18, 19, 20, 22, 24, 25, 26, 27, 28, 30, 31, 32, 33, 34, 35, 38, 42};
#define W2_NCORE 28
static const double PRE_D[400] = {0.0, 2.34, 0.67, 0.53, 1.16, 2.2199999999999998, 0.58, 0.35, 0.62, 0.75, 1.06, 0.72, 2.44, 8.91, 2.51, 3.35, 2.75, 9.870000000000001, 3.18, 3.02, 0.78, 0.0, 0.53, 0.28, 0.51, 0.19, 0.23, 0.66, 0.18, 0.64, 0.81, 0.29, 1.9, 2.42, 2.06, 2.88, 2.33, 2.82, 2.81, 2.5, 0.67, 0.53, 0.0, 0.34, 0.59, 0.67, 0.36, 0.34, 0.41, 0.42, 0.4, 0.25, 2.43, 2.95, 2.59, 3.41, 2.86, 3.35, 3.34, 3.03, 0.53, 0.8400000000000001, 0.34, 0.0, 0.63, 1.0499999999999998, 0.05, 0.38, 0.1, 1.08, 0.71, 0.22, 2.15, 8.01, 2.28, 3.11, 2.54, 9.149999999999999, 3.02, 2.74, 1.16, 0.51, 0.59, 0.63, 0.0, 0.68, 0.6, 0.9, 0.58, 0.94, 0.57, 0.44, 2.1, 2.59, 2.32, 3.1, 2.6, 3.04, 3.1, 2.7, 0.74, 0.19, 0.67, 0.35, 0.68, 0.0, 0.31, 0.71, 0.26, 0.66, 0.99, 0.46, 1.8, 2.32, 1.93, 2.76, 2.2, 2.7, 2.67, 2.39, 0.58, 0.6900000000000001, 0.36, 0.05, 0.6, 0.9299999999999999, 0.0, 0.43, 0.05, 1.23, 0.72, 0.21, 2.1, 7.89, 2.24, 3.07, 2.51, 9.03, 2.98, 2.7, 0.35, 0.66, 0.34, 0.38, 0.9, 0.71, 0.43, 0.0, 0.48, 0.11, 0.71, 0.47, 2.5, 3.03, 2.61, 3.45, 2.87, 3.39, 3.33, 3.09, 0.62, 0.18, 0.41, 0.1, 0.58, 0.26, 0.05, 0.48, 0.0, 0.46, 0.75, 0.22, 2.05, 2.57, 2.19, 3.02, 2.46, 2.96, 2.93, 2.65, 0.25, 1.92, 0.42, 0.36, 0.94, 1.98, 0.41, 0.11, 0.46, 0.0, 0.81, 0.51, 2.44, 8.879999999999999, 2.54, 3.38, 2.79, 9.959999999999999, 3.24, 3.03, 1.06, 0.81, 0.4, 0.71, 0.57, 0.99, 0.72, 0.71, 0.75, 0.81, 0.0, 0.53, 2.64, 3.14, 2.83, 3.64, 3.11, 3.57, 3.6, 3.24, 0.72, 0.29, 0.25, 0.22, 0.44, 0.46, 0.21, 0.47, 0.22, 0.51, 0.53, 0.0, 2.19, 2.71, 2.35, 3.17, 2.62, 3.11, 3.11, 2.79, 2.44, 5.699999999999999, 2.43, 2.15, 2.1, 5.4, 2.1, 2.5, 2.05, 7.32, 2.64, 2.19, 0.0, 1.59, 0.33, 1.0, 0.58, 2.82, 1.08, 0.6, 2.97, 2.42, 2.95, 2.67, 2.59, 2.32, 2.63, 3.03, 2.57, 2.96, 3.14, 2.71, 0.53, 0.0, 0.56, 0.58, 0.56, 0.51, 0.86, 0.17, 2.51, 2.06, 2.59, 2.28, 2.32, 1.93, 2.24, 2.61, 2.19, 2.54, 2.83, 2.35, 0.33, 0.56, 0.0, 0.83, 0.29, 0.78, 0.8, 0.54, 3.35, 8.64, 3.41, 3.11, 3.1, 8.28, 3.07, 3.45, 3.02, 10.14, 3.64, 3.17, 1.0, 1.7399999999999998, 0.83, 0.0, 0.61, 0.21000000000000002, 0.47, 0.43, 2.75, 2.33, 2.86, 2.54, 2.6, 2.2, 2.51, 2.87, 2.46, 2.79, 3.11, 2.62, 0.58, 0.56, 0.29, 0.61, 0.0, 0.56, 0.51, 0.45, 3.29, 2.82, 3.35, 3.05, 3.04, 2.7, 3.01, 3.39, 2.96, 3.32, 3.57, 3.11, 0.94, 0.51, 0.78, 0.07, 0.56, 0.0, 0.48, 0.36, 3.18, 8.43, 3.34, 3.02, 3.1, 8.01, 2.98, 3.33, 2.93, 9.72, 3.6, 3.11, 1.08, 2.58, 0.8, 0.47, 0.51, 1.44, 0.0, 0.7, 3.02, 2.5, 3.03, 2.74, 2.7, 2.39, 2.7, 3.09, 2.65, 3.03, 3.24, 2.79, 0.6, 0.17, 0.54, 0.43, 0.45, 0.36, 0.7, 0.0};
static const int64_t PRE_LABELS[20] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
static const int64_t PRE_CORE[14] = {1, 2, 3, 5, 6, 7, 8, 9, 11, 14, 15, 16, 17, 19};
#define PRE_NCORE 14

#define N2 44
#define N10 45
#define NPRE 20

static gsb_session *S;

/* src (n doubles) as dt: a copy the caller frees */
static void *as_dtype(const double *src, int64_t n, gsb_dtype dt)
{
    void *p = malloc((size_t)n * (dt == GSB_F32 ? sizeof(float) : sizeof(double)));
    for (int64_t i = 0; i < n; i++) {
        if (dt == GSB_F32)
            ((float *)p)[i] = (float)src[i];
        else
            ((double *)p)[i] = src[i];
    }
    return p;
}

/* fit DBSCAN(params) on X (rows x cols of src, as dt), weights w (may be NULL),
 * call options opts; the status */
static int fit(gsb_model *m, const double *src, int64_t rows, int64_t cols, gsb_dtype dt,
               const double *w, const char *opts)
{
    void *x = as_dtype(src, rows * cols, dt);
    gsb_array X = gsb_array_2d(x, dt, rows, cols);
    gsb_array W = gsb_array_1d((void *)w, GSB_F64, rows);
    const gsb_array *in[3] = {&X, NULL, w ? &W : NULL};
    int rc = gsb_model_call(m, "fit", in, w ? 3 : 1, opts, NULL);
    free(x);
    return rc;
}

/* labels_ and core_sample_indices_ of a fitted m against the expected ones */
static void check_fit(gsb_model *m, const int64_t *labels, int64_t n, const int64_t *core,
                      int64_t ncore)
{
    double got[64];
    gsb_array info;
    CHECK(testing_attr(m, "labels_", got, 64, &info) == n);
    CHECK(info.dtype == GSB_I64 && info.ndim == 1);
    for (int64_t i = 0; i < n; i++)
        CHECK(got[i] == (double)labels[i]);
    CHECK(testing_attr(m, "core_sample_indices_", got, 64, &info) == ncore);
    CHECK(info.dtype == GSB_I64 && info.ndim == 1);
    for (int64_t i = 0; i < ncore; i++)
        CHECK(got[i] == (double)core[i]);
}

typedef struct known {
    const char *params;
    const double *X;
    int64_t n, d;
    const double *w;
    const int64_t *labels, *core;
    int64_t ncore;
} known;

static const known KNOWN[] = {
    {"{\"eps\": 0.5, \"min_samples\": 4}", X2, N2, 2, NULL, E2_LABELS, E2_CORE, E2_NCORE},
    {"{\"eps\": 0.605, \"min_samples\": 4, \"metric\": \"manhattan\"}", X2, N2, 2, NULL,
     M2_LABELS, M2_CORE, M2_NCORE},
    {"{\"eps\": 0.605, \"min_samples\": 4, \"metric\": \"minkowski\", \"p\": 1}", X2, N2, 2,
     NULL, M2_LABELS, M2_CORE, M2_NCORE},
    {"{\"eps\": 0.455, \"min_samples\": 3, \"metric\": \"chebyshev\"}", X2, N2, 2, NULL,
     C2_LABELS, C2_CORE, C2_NCORE},
    {"{\"eps\": 0.5, \"min_samples\": 4, \"metric\": \"minkowski\", \"p\": 3}", X2, N2, 2, NULL,
     P2_LABELS, P2_CORE, P2_NCORE},
    {"{\"eps\": 0.02, \"min_samples\": 4, \"metric\": \"cosine\"}", X2, N2, 2, NULL,
     COS2_LABELS, COS2_CORE, COS2_NCORE},
    {"{\"eps\": 4.3, \"min_samples\": 4}", X10, N10, 10, NULL, E10_LABELS, E10_CORE,
     E10_NCORE},
    {"{\"eps\": 18.49, \"min_samples\": 4, \"metric\": \"sqeuclidean\"}", X10, N10, 10, NULL,
     E10_LABELS, E10_CORE, E10_NCORE},
    {"{\"eps\": 0.15, \"min_samples\": 3, \"metric\": \"cosine\"}", X10, N10, 10, NULL,
     COS10_LABELS, COS10_CORE, COS10_NCORE},
    {"{\"eps\": 0.5, \"min_samples\": 3}", X2, N2, 2, W2, W2_LABELS, W2_CORE, W2_NCORE},
    {"{\"eps\": 0.5, \"min_samples\": 3, \"metric\": \"precomputed\"}", PRE_D, NPRE, NPRE,
     NULL, PRE_LABELS, PRE_CORE, PRE_NCORE},
};

/* Every known case in both dtypes, with all neighbour lists kept and with a
 * budget so small that every pass recomputes its neighbourhoods in pieces. */
static void test_known_answers(void)
{
    static const char *const opts[2] = {NULL, "{\"working_memory\": 0.0001}"};
    for (size_t k = 0; k < sizeof KNOWN / sizeof KNOWN[0]; k++)
        for (int t = 0; t < 2; t++)
            for (int o = 0; o < 2; o++) {
                const known *c = &KNOWN[k];
                gsb_dtype dt = t ? GSB_F64 : GSB_F32;
                gsb_model *m = testing_model(S, "DBSCAN", c->params);
                int before = testing_cur_failed;
                testing_cur_failed = 0;
                CHECK_OK(fit(m, c->X, c->n, c->d, dt, c->w, opts[o]));
                check_fit(m, c->labels, c->n, c->core, c->ncore);
                if (testing_cur_failed)
                    fprintf(stderr, "    case %s, %s, options %s\n", c->params,
                            gsb_dtype_name(dt), opts[o] ? opts[o] : "none");
                testing_cur_failed |= before;
                gsb_model_free(m);
            }
}

/* components_ are the core rows in X's dtype; n_features_in_; fit_predict's labels */
static void test_attributes_and_fit_predict(void)
{
    for (int t = 0; t < 2; t++) {
        gsb_dtype dt = t ? GSB_F64 : GSB_F32;
        gsb_model *m = testing_model(S, "DBSCAN", "{\"eps\": 0.5, \"min_samples\": 4}");
        void *x = as_dtype(X2, N2 * 2, dt);
        gsb_array X = gsb_array_2d(x, dt, N2, 2);
        double lab[N2], comp[2 * N2], nf = 0;
        gsb_array info;
        CHECK(testing_call(m, "fit_predict", &X, "labels", lab, N2, &info) == N2);
        CHECK(info.dtype == GSB_I64);
        for (int64_t i = 0; i < N2; i++)
            CHECK(lab[i] == (double)E2_LABELS[i]);
        CHECK(testing_attr(m, "components_", comp, 2 * N2, &info) == 2 * E2_NCORE);
        CHECK(info.dtype == dt && info.ndim == 2 && info.shape[1] == 2);
        for (int64_t k = 0; k < E2_NCORE; k++)
            for (int j = 0; j < 2; j++)
                CHECK(comp[k * 2 + j] == testing_at(&X, E2_CORE[k] * 2 + j));
        CHECK(testing_attr(m, "n_features_in_", &nf, 1, NULL) == 1 && nf == 2);
        free(x);
        gsb_model_free(m);
    }
}

/* No core sample: all noise, components_ (0, d) float64 as scikit-learn's np.empty. */
static void test_all_noise_and_one_cluster(void)
{
    gsb_model *m = testing_model(S, "DBSCAN", "{\"eps\": 0.001, \"min_samples\": 2}");
    CHECK_OK(fit(m, X2, N2, 2, GSB_F32, NULL, NULL));
    double lab[N10], c0[1];
    gsb_array info;
    CHECK(testing_attr(m, "labels_", lab, N2, NULL) == N2);
    for (int64_t i = 0; i < N2; i++)
        CHECK(lab[i] == -1);
    CHECK(testing_attr(m, "core_sample_indices_", c0, 1, &info) == 0);
    CHECK(testing_attr(m, "components_", c0, 1, &info) == 0);
    CHECK(info.dtype == GSB_F64 && info.ndim == 2 && info.shape[0] == 0 && info.shape[1] == 2);
    gsb_model_free(m);
    /* min_samples=1 and a huge eps: one cluster, every sample core */
    m = testing_model(S, "DBSCAN", "{\"eps\": 1000, \"min_samples\": 1}");
    CHECK_OK(fit(m, X10, N10, 10, GSB_F64, NULL, NULL));
    CHECK(testing_attr(m, "labels_", lab, N10, NULL) == N10);
    for (int64_t i = 0; i < N10; i++)
        CHECK(lab[i] == 0);
    CHECK(testing_attr(m, "core_sample_indices_", lab, N10, NULL) == N10);
    gsb_model_free(m);
}

/*
 * A border sample within eps of core samples of two clusters goes to the
 * cluster with the smaller label (the one whose smallest core index is
 * smaller), wherever the border sample itself sits in the order.
 */
static void test_border_rule(void)
{
    static const double A[4] = {-0.5, 0, 0.5, 1.0}, B[4] = {3.0, 3.5, 4.0, 4.5}, b = 2.0;
    static const int64_t want[3][9] = {{0, 0, 0, 0, 1, 1, 1, 1, 0},
                                       {0, 0, 0, 0, 1, 1, 1, 1, 0},
                                       {0, 0, 0, 0, 0, 1, 1, 1, 1}};
    static const int64_t want_core[3][6] = {{1, 2, 3, 4, 5, 6}, {0, 1, 2, 5, 6, 7},
                                            {1, 2, 3, 6, 7, 8}};
    for (int order = 0; order < 3; order++) {
        double x[9];
        const double *first = order == 0 ? A : B, *second = order == 0 ? B : A;
        int at = 0;
        if (order == 2)
            x[at++] = b;
        for (int k = 0; k < 4; k++)
            x[at++] = first[k];
        for (int k = 0; k < 4; k++)
            x[at++] = second[k];
        if (order != 2)
            x[at++] = b;
        for (int dev = 0; dev < 2; dev++) {
            gsb_model *m = testing_model(S, "DBSCAN", "{\"eps\": 1.05, \"min_samples\": 4}");
            CHECK_OK(fit(m, x, 9, 1, GSB_F64, NULL,
                         dev ? "{\"working_memory\": 0.0001}" : NULL));
            check_fit(m, want[order], 9, want_core[order], 6);
            gsb_model_free(m);
        }
    }
}

/* Duplicated rows count once each; a sample of weight >= min_samples is core alone. */
static void test_duplicates_and_heavy_weight(void)
{
    double x[12] = {0, 0, 0, 0, 0, 0, 5, 5, 5, 5, 9, 9};
    gsb_model *m = testing_model(S, "DBSCAN", "{\"eps\": 0.1, \"min_samples\": 3}");
    CHECK_OK(fit(m, x, 6, 2, GSB_F32, NULL, NULL));
    static const int64_t lab[6] = {0, 0, 0, -1, -1, -1}, core[3] = {0, 1, 2};
    check_fit(m, lab, 6, core, 3);
    double w[6] = {1, 1, 1, 1, 1, 3};
    CHECK_OK(fit(m, x, 6, 2, GSB_F64, w, NULL));
    static const int64_t lab2[6] = {0, 0, 0, -1, -1, 1}, core2[4] = {0, 1, 2, 5};
    check_fit(m, lab2, 6, core2, 4);
    gsb_model_free(m);
}

static void test_bad_input(void)
{
    double x[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    gsb_model *m = NULL;
    CHECK_ERR(gsb_model_create(S, "DBSCAN", "{\"eps\": 0}", &m), GSB_EPARAM,
              "The 'eps' parameter of DBSCAN must be a float in the range (0.0, inf). Got 0 "
              "instead.");
    CHECK_ERR(gsb_model_create(S, "DBSCAN", "{\"eps\": -1.5}", &m), GSB_EPARAM,
              "Got -1.5 instead.");
    CHECK_ERR(gsb_model_create(S, "DBSCAN", "{\"min_samples\": 0}", &m), GSB_EPARAM,
              "The 'min_samples' parameter of DBSCAN must be an int in the range [1, inf). "
              "Got 0 instead.");
    CHECK_ERR(gsb_model_create(S, "DBSCAN", "{\"metric\": \"foo\"}", &m), GSB_EPARAM,
              "The 'metric' parameter of DBSCAN must be a str among");
    m = testing_model(S, "DBSCAN", NULL);
    double nan_x[4] = {0, NAN, 1, 2};
    CHECK_ERR(fit(m, nan_x, 2, 2, GSB_F64, NULL, NULL), GSB_EINVAL, "Input X contains NaN.");
    gsb_model_free(m);
    m = testing_model(S, "DBSCAN", "{\"metric\": \"precomputed\"}");
    CHECK_ERR(fit(m, x, 4, 2, GSB_F64, NULL, NULL), GSB_EINVAL,
              "Precomputed matrix must be square. Input is a 4x2 matrix.");
    double neg[4] = {0, -1, 1, 0};
    CHECK_ERR(fit(m, neg, 2, 2, GSB_F64, NULL, NULL), GSB_EINVAL,
              "Negative values in data passed to X.");
    gsb_model_free(m);
    m = testing_model(S, "DBSCAN", "{\"metric\": \"cosine\", \"algorithm\": \"kd_tree\"}");
    CHECK_ERR(fit(m, x, 4, 2, GSB_F64, NULL, NULL), GSB_EINVAL,
              "Metric 'cosine' not valid. Use sorted(sklearn.neighbors.VALID_METRICS"
              "['kd_tree']) to get valid options.");
    gsb_model_free(m);
    m = testing_model(S, "DBSCAN", "{\"p\": 0}");
    CHECK_ERR(fit(m, x, 4, 2, GSB_F64, NULL, NULL), GSB_EPARAM,
              "The 'p' parameter of NearestNeighbors must be a float in the range (0.0, inf] "
              "or None. Got 0 instead.");
    gsb_model_free(m);
    m = testing_model(S, "DBSCAN", "{\"metric\": \"hamming\"}");
    CHECK_ERR(fit(m, x, 4, 2, GSB_F64, NULL, NULL), GSB_EUNSUPPORTED,
              "metric='hamming' is not supported");
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_free(m);
    m = testing_model(S, "DBSCAN", NULL);
    double w[3] = {1, 1, 1};
    gsb_array X = gsb_array_2d(x, GSB_F64, 4, 2), W = gsb_array_1d(w, GSB_F64, 3);
    const gsb_array *in[3] = {&X, NULL, &W};
    CHECK_ERR(gsb_model_call(m, "fit", in, 3, NULL, NULL), GSB_EINVAL,
              "sample_weight.shape == (3,), expected (4,)!");
    gsb_model_free(m);
}

/* A fitted model survives export/import with its attributes. */
static void test_blob_round_trip(void)
{
    gsb_model *m = testing_model(S, "DBSCAN", "{\"eps\": 0.5, \"min_samples\": 4}");
    CHECK_OK(fit(m, X2, N2, 2, GSB_F64, NULL, NULL));
    void *blob = NULL;
    size_t size = 0;
    CHECK_OK(gsb_model_export(m, &blob, &size));
    gsb_model *back = NULL;
    CHECK_OK(gsb_model_import(S, blob, size, &back));
    if (back)
        check_fit(back, E2_LABELS, N2, E2_CORE, E2_NCORE);
    gsb_free(blob);
    gsb_model_free(back);
    gsb_model_free(m);
}

int main(void)
{
    if (testing_open(&S))
        return 1;
    RUN(test_known_answers);
    RUN(test_attributes_and_fit_predict);
    RUN(test_all_noise_and_one_cluster);
    RUN(test_border_rule);
    RUN(test_duplicates_and_heavy_weight);
    RUN(test_bad_input);
    RUN(test_blob_round_trip);
    return testing_close(S);
}

/*
 * The script that produced the known answers:
 *
 *   import numpy as np
 *   from sklearn.cluster import DBSCAN
 *   from sklearn.metrics import pairwise_distances
 *   rng = np.random.default_rng(11)
 *   # 2-D: three blobs, a bridge of border points, some noise; rounded to 2 decimals
 *   c = np.array([[0, 0], [3, 0], [0, 3]])
 *   X2 = np.vstack([c[i] + 0.35 * rng.normal(size=(12, 2)) for i in range(3)] +
 *                  [rng.uniform(-1, 4, size=(8, 2))])
 *   X2 = np.round(X2, 2)
 *   X10 = np.round(np.vstack([rng.normal(size=(15, 10)) + 4 * rng.normal(size=(1, 10)) for _ in range(3)]), 2)
 *   W = np.round(rng.uniform(0.2, 1.5, size=len(X2)), 2)
 *   W[5] = -2.0  # scikit-learn accepts negative weights
 *   def check_ties(X, metric, eps, **kw):
 *       D = pairwise_distances(X, metric=metric, **kw)
 *       gap = np.min(np.abs(D - eps))
 *       assert gap > 1e-6, (metric, gap)
 *       return gap
 *   cases = [("E2", X2, dict(eps=0.5, min_samples=4)),
 *            ("M2", X2, dict(eps=0.605, min_samples=4, metric="manhattan")),
 *            ("C2", X2, dict(eps=0.455, min_samples=3, metric="chebyshev")),
 *            ("P2", X2, dict(eps=0.5, min_samples=4, metric="minkowski", p=3)),
 *            ("COS2", X2, dict(eps=0.02, min_samples=4, metric="cosine")),
 *            ("E10", X10, dict(eps=4.3, min_samples=4)),
 *            ("COS10", X10, dict(eps=0.15, min_samples=3, metric="cosine")),
 *            ("W2", X2, dict(eps=0.5, min_samples=3))]
 *   out = []
 *   def arr(name, a, t):
 *       body = ", ".join(repr(float(v)) if t == "double" else str(int(v)) for v in np.ravel(a))
 *       out.append(f"static const {t} {name}[{max(a.size,1)}] = {{{body}}};")
 *   arr("X2", X2, "double"); arr("X10", X10, "double"); arr("W2", W, "double")
 *   for name, X, kw in cases:
 *       m = kw.get("metric", "euclidean")
 *       extra = {"p": kw["p"]} if "p" in kw else {}
 *       gap = check_ties(X, m, kw["eps"], **extra)
 *       sw = W if name == "W2" else None
 *       est = DBSCAN(**kw).fit(X, sample_weight=sw)
 *       arr(f"{name}_LABELS", est.labels_, "int64_t")
 *       arr(f"{name}_CORE", est.core_sample_indices_, "int64_t")
 *       out.append(f"#define {name}_NCORE {len(est.core_sample_indices_)}")
 *       print(name, set(est.labels_), len(est.core_sample_indices_), gap, file=__import__('sys').stderr)
 *   # precomputed, asymmetric: Manhattan-ish distances with some entries altered
 *   D = np.round(pairwise_distances(X2[:20]), 2)
 *   D[D == 0.5] += 0.01
 *   A = D.copy()
 *   A[np.ix_(range(0, 20, 3), range(1, 20, 4))] *= 3.0
 *   np.fill_diagonal(A, 0)
 *   est = DBSCAN(eps=0.5, min_samples=3, metric="precomputed").fit(A)
 *   arr("PRE_D", A, "double"); arr("PRE_LABELS", est.labels_, "int64_t"); arr("PRE_CORE", est.core_sample_indices_, "int64_t")
 *   out.append(f"#define PRE_NCORE {len(est.core_sample_indices_)}")
 *   print("PRE", set(est.labels_), file=__import__('sys').stderr)
 *   print("\n".join(out))
 */
