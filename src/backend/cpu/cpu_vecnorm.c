/*
 * cpu_vecnorm.c - the CPU backend's vec_normalize (backend.h states the
 * contract): y = x / |x| and |x|, the squares summed in double in element
 * order on one thread (Lanczos's vectors are a graph's vertices: tens of
 * thousands of elements, microseconds).
 */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_util.h"
#include "core/error.h"

#define DEFINE_NORMALIZE(SUF, T)                                                            \
    static double normalize_##SUF(const T *x, int64_t n, T *y)                             \
    {                                                                                       \
        double s = 0.0;                                                                     \
        for (int64_t i = 0; i < n; i++)                                                     \
            s += (double)x[i] * (double)x[i];                                               \
        const double nrm = sqrt(s), inv = nrm > 0.0 ? 1.0 / nrm : 0.0;                      \
        for (int64_t i = 0; i < n; i++)                                                     \
            y[i] = (T)(inv * (double)x[i]);                                                 \
        return nrm;                                                                         \
    }
DEFINE_NORMALIZE(f32, float)
DEFINE_NORMALIZE(f64, double)

int gsb__cpu_vec_normalize(const gsb__backend *be, const gsb__tensor *x, gsb__tensor *y,
                           gsb__tensor *nrm)
{
    (void)be;
    const char *op = "vec_normalize";
    GSB_TRY(cpu_check(x, 0, -1, -1, op, "x"));
    const int64_t n = x->rows * x->cols;
    GSB_TRY(cpu_check_vec(y, x->dtype, n, op, "y"));
    GSB_TRY(cpu_check_vec(nrm, GSB_F64, 1, op, "nrm"));
    double *out = nrm->data;
    *out = x->dtype == GSB_F64 ? normalize_f64(x->data, n, y->data)
                               : normalize_f32(x->data, n, y->data);
    return GSB_OK;
}
