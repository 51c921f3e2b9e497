/*
 * validate.c - turning caller arrays into clean host tensors, with
 * scikit-learn's error messages.
 *
 * C-contiguous input of the target dtype is borrowed (no copy); anything else
 * (Fortran order, strides, int data, and data not at a multiple of its element
 * size) is gathered once into an owned tensor.
 */
#include "core/validate.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static int64_t stride_of(const gsb_array *a, int axis)
{
    size_t item = gsb_dtype_size(a->dtype);
    if (a->strides[0] == 0 && a->strides[1] == 0) /* contiguous C order */
        return axis == 0 && a->ndim == 2 ? (int64_t)item * a->shape[1] : (int64_t)item;
    return a->strides[axis];
}

void gsb__array_gather(const gsb_array *a, int64_t rows, int64_t cols, gsb__tensor *dst)
{
    int64_t s0 = a->ndim >= 1 ? stride_of(a, 0) : 0;
    int64_t s1 = a->ndim == 2 ? stride_of(a, 1) : 0;
    gsb__tensor_gather_strided(dst, rows, cols, a->data, a->dtype, s0, s1);
}

int gsb__array_is_c_contiguous(const gsb_array *a)
{
    if (a->strides[0] == 0 && a->strides[1] == 0)
        return 1;
    int64_t item = (int64_t)gsb_dtype_size(a->dtype);
    if (a->ndim == 0)
        return 1;
    if (a->ndim == 1)
        return a->strides[0] == item || a->shape[0] <= 1;
    return (a->strides[1] == item || a->shape[1] <= 1) &&
           (a->strides[0] == item * a->shape[1] || a->shape[0] <= 1);
}

/*
 * Whether n values hold a non-finite one.  x * 0 is (+-)0 for every finite x
 * and NaN for NaN and +-infinity, so the sum of those products is NaN
 * exactly when one is there: a loop with no branch, which vectorises and
 * runs at memory speed (a per-element isfinite test with a branch ran at a
 * third of it, half of a 200k x 64 predict).  Only then does the slow loop
 * tell NaN from infinity, for the error message.
 */
#define NONFINITE_TYPED(T, SUF)                                                    \
    static int nonfinite_##SUF(const T *x, int64_t n)                               \
    {                                                                               \
        T acc = 0;                                                                  \
        _Pragma("omp parallel for simd reduction(+ : acc) if (n > 262144) schedule(dynamic, 16384)") \
        for (int64_t i = 0; i < n; i++)                                             \
            acc += x[i] * (T)0;                                                     \
        if (acc == acc)                                                             \
            return 0;                                                               \
        int found = 0;                                                              \
        for (int64_t i = 0; i < n && found != 1; i++)                               \
            if (!isfinite(x[i]))                                                    \
                found = isnan(x[i]) ? 1 : 2;                                        \
        return found;                                                               \
    }
NONFINITE_TYPED(float, f32)
NONFINITE_TYPED(double, f64)
#undef NONFINITE_TYPED

/* 0: finite; 1: NaN (when any is NaN); 2: infinity */
int gsb__host_nonfinite(const gsb__tensor *t)
{
    if (!gsb__is_float(t->dtype))
        return 0;
    int64_t n = gsb__tensor_numel(t);
    return t->dtype == GSB_F32 ? nonfinite_f32(t->data, n) : nonfinite_f64(t->data, n);
}

int gsb__host_has_inf(const gsb__tensor *t)
{
    int64_t n = gsb__tensor_numel(t);
    int found = 0;
    if (t->dtype == GSB_F32) {
        const float *x = t->data;
#pragma omp parallel for reduction(| : found) schedule(static) if (n > 262144)
        for (int64_t i = 0; i < n; i++)
            found |= fabsf(x[i]) == INFINITY;
    } else if (t->dtype == GSB_F64) {
        const double *x = t->data;
#pragma omp parallel for reduction(| : found) schedule(static) if (n > 262144)
        for (int64_t i = 0; i < n; i++)
            found |= fabs(x[i]) == INFINITY;
    }
    return found;
}

static int check_array_sane(const gsb_array *a, const char *name)
{
    if (!a->data && (a->ndim > 0 && a->shape[0] > 0 && (a->ndim < 2 || a->shape[1] > 0)))
        return gsb__err(GSB_EINVAL, "Input %s has no data pointer", name);
    if (gsb_dtype_size(a->dtype) == 0)
        return gsb__err(GSB_EINVAL, "Input %s has an unknown dtype code %d", name, (int)a->dtype);
    if (a->ndim < 0 || a->ndim > 2)
        return gsb__err(GSB_EINVAL, "Found array with dim %d. Expected <= 2.", a->ndim);
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] < 0)
            return gsb__err(GSB_EINVAL, "Input %s has a negative dimension", name);
    return GSB_OK;
}

int gsb__validate_shape(const gsb_array *a, const gsb__validate_spec *spec,
                        gsb__validated_shape *out)
{
    const char *name = spec->name;
    GSB_TRY(check_array_sane(a, name));

    int64_t rows, cols;
    int ndim = a->ndim;
    if (spec->want_2d) {
        if (ndim != 2) {
            if (ndim == 0)
                return gsb__err(GSB_EINVAL,
                                "Expected 2D array, got scalar array instead. Reshape your "
                                "data either using array.reshape(-1, 1) if your data has a "
                                "single feature or array.reshape(1, -1) if it contains a "
                                "single sample.");
            return gsb__err(GSB_EINVAL,
                            "Expected 2D array, got 1D array instead. Reshape your data "
                            "either using array.reshape(-1, 1) if your data has a single "
                            "feature or array.reshape(1, -1) if it contains a single sample.");
        }
        rows = a->shape[0];
        cols = a->shape[1];
    } else {
        if (ndim == 0)
            return gsb__err(GSB_EINVAL, "%s should be a 1d array, got a scalar instead.",
                            name);
        rows = a->shape[0];
        cols = ndim == 2 ? a->shape[1] : 1;
        if (ndim == 2 && spec->want_1d) {
            if (cols != 1)
                return gsb__err(GSB_EINVAL,
                                "%s should be a 1d array, got an array of shape (%lld, %lld) "
                                "instead.",
                                name, (long long)rows, (long long)cols);
            ndim = 1; /* a column vector is raveled, as scikit-learn does */
        }
    }
    if (rows < spec->min_rows) {
        char shape[64];
        if (ndim == 2)
            snprintf(shape, sizeof shape, "(%lld, %lld)", (long long)rows, (long long)cols);
        else
            snprintf(shape, sizeof shape, "(%lld,)", (long long)rows);
        return gsb__err(GSB_EINVAL,
                        "Found array with %lld sample(s) (shape=%s) while a minimum of %lld "
                        "is required by %s.",
                        (long long)rows, shape, (long long)spec->min_rows, spec->estimator);
    }
    if (ndim == 2 && cols < 1 && spec->want_2d)
        return gsb__err(GSB_EINVAL,
                        "Found array with 0 feature(s) (shape=(%lld, 0)) while a minimum of 1 "
                        "is required by %s.",
                        (long long)rows, spec->estimator);

    gsb_dtype dt = spec->dtype;
    if (dt == 0) /* keep float dtypes, ints become float64 */
        dt = gsb__is_float(a->dtype) ? a->dtype : GSB_F64;
    out->rows = rows;
    out->cols = cols;
    out->ndim = ndim;
    out->dtype = dt;
    return GSB_OK;
}

int gsb__nonfinite_error(int bad, const char *name, gsb_dtype dt)
{
    if (bad == 1)
        return gsb__err(GSB_EINVAL, "Input %s contains NaN.", name);
    return gsb__err(GSB_EINVAL,
                    "Input %s contains infinity or a value too large for dtype('%s').", name,
                    gsb_dtype_name(dt));
}

int gsb__validate_layout(const gsb_array *a, const gsb__validate_spec *spec, gsb__tensor *out)
{
    *out = GSB__TENSOR_NONE;
    gsb__validated_shape sh;
    GSB_TRY(gsb__validate_shape(a, spec, &sh));
    int64_t rows = sh.rows, cols = sh.cols;
    int ndim = sh.ndim;
    gsb_dtype dt = sh.dtype;

    /* misaligned data are copied: Dask hands out deserialised blocks at any
     * byte offset, and OpenBLAS's kernels (and C's typed loads) fault on them */
    const int aligned = (uintptr_t)a->data % gsb_dtype_size(a->dtype) == 0;
    if (a->dtype == dt && gsb__array_is_c_contiguous(a) && aligned) {
        *out = gsb__tensor_host_view(a->data, dt, rows, cols);
    } else {
        GSB_TRY(gsb__tensor_alloc(gsb__cpu_backend(), dt, rows, cols, out));
        gsb__array_gather(a, rows, cols, out);
    }
    out->ndim = ndim;
    return GSB_OK;
}

int gsb__validate_array(const gsb_array *a, const gsb__validate_spec *spec, gsb__tensor *out)
{
    GSB_TRY(gsb__validate_layout(a, spec, out));
    const char *name = spec->name;
    gsb_dtype dt = out->dtype;
    int bad = gsb__host_nonfinite(out);
    if (bad == 1 && spec->allow_nan)
        bad = gsb__host_has_inf(out) ? 2 : 0;
    if (bad) {
        gsb__tensor_free(out);
        return gsb__nonfinite_error(bad, name, dt);
    }
    if (spec->non_negative) {
        int64_t n = gsb__tensor_numel(out);
        for (int64_t i = 0; i < n; i++)
            if (gsb__tensor_get(out, i) < 0) {
                gsb__tensor_free(out);
                return gsb__err(GSB_EINVAL, "Negative values in data passed to `%s`.", name);
            }
    }
    return GSB_OK;
}
