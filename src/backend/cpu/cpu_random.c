/*
 * cpu_random.c - counter-based N(0, 1) numbers (rand_normal).
 *
 * Element i depends only on (seed, i), never on the tensor's length, the
 * thread count or the backend: the CUDA twin takes the same formula from
 * backend/rand_normal.h (all integer arithmetic modulo 2^64):
 *
 *   mix(z):  z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
 *            z ^= z >> 27; z *= 0x94D049BB133111EB;
 *            z ^= z >> 31                  (the splitmix64 finaliser)
 *   key     = mix(seed)
 *   h(c)    = mix(key + (c + 1) * 0x9E3779B97F4A7C15)
 *             (output c of a splitmix64 stream whose state starts at key)
 *   pair p  = i / 2 (integer division)
 *   u1      = ((h(2p) >> 11) + 1) * 2^-53       in (0, 1]
 *   u2      = (h(2p + 1) >> 11) * 2^-53         in [0, 1)
 *   r       = sqrt(-2 log(u1)),  theta = 2 pi u2 (pi as the double nearest)
 *   x[i]    = r cos(theta) if i is even, r sin(theta) if i is odd
 *
 * computed in double; a float32 tensor stores (float)x[i].  The integers
 * are bit-exact everywhere; log/sqrt/cos/sin of another math library may
 * differ in the last bit of a double (rarely visible after rounding to
 * float32).
 */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/rand_normal.h"
#include "core/error.h"
#include "core/tensor.h"

enum { PAR_MIN = 1 << 14 }; /* pairs below which the loop stays serial */

/* the Box-Muller pair p: elements 2p and 2p + 1 */
static inline void normal_pair(uint64_t key, uint64_t p, double *even, double *odd)
{
    double r, theta;
    gsb__rand_normal_polar(key, p, &r, &theta);
    *even = r * cos(theta);
    *odd = r * sin(theta);
}

int gsb__cpu_rand_normal(const gsb__backend *be, gsb__tensor *t, uint64_t seed)
{
    (void)be;
    if (!t || !gsb__is_float(t->dtype))
        return gsb__err(GSB_EINTERNAL, "rand_normal: t must be a float tensor");
    if (t->be && t->be != gsb__cpu_backend())
        return gsb__err(GSB_EINTERNAL, "rand_normal: t is not in host memory");
    int64_t count = gsb__tensor_numel(t);
    if (count < 0 || (!t->data && count > 0))
        return gsb__err(GSB_EINTERNAL, "rand_normal: t is malformed");
    uint64_t key = gsb__rand_mix(seed);
    int64_t pairs = (count + 1) / 2;
    int f32 = t->dtype == GSB_F32;
    float *xf = t->data;
    double *xd = t->data;
#pragma omp parallel for schedule(static) if (pairs > PAR_MIN)
    for (int64_t p = 0; p < pairs; p++) {
        double a, b;
        normal_pair(key, (uint64_t)p, &a, &b);
        int64_t i = 2 * p;
        /* an odd count leaves the last pair's second half unused */
        if (f32) {
            xf[i] = (float)a;
            if (i + 1 < count)
                xf[i + 1] = (float)b;
        } else {
            xd[i] = a;
            if (i + 1 < count)
                xd[i + 1] = b;
        }
    }
    return GSB_OK;
}
