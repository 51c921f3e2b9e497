/*
 * rand_normal.h - the counter-based N(0, 1) formula of the rand_normal op
 * (backend.h), written once for the CPU twin (cpu/cpu_random.c, whose
 * comment states it) and the GPU (cuda/cuda_reduce.cu), so both draw the
 * same numbers: element i depends only on (seed, i).  All integer
 * arithmetic is modulo 2^64; the pair's cos and sin are left to the caller.
 */
#ifndef GSB_BACKEND_RAND_NORMAL_H
#define GSB_BACKEND_RAND_NORMAL_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GSB__RAND_FN static __host__ __device__ inline
#else
#define GSB__RAND_FN static inline
#endif

/* the splitmix64 finaliser: the key is mix(seed), the counters' hashes mix(key + ...) */
GSB__RAND_FN uint64_t gsb__rand_mix(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z;
}

/* Box-Muller pair p under key in polar form: element 2p is r cos(theta),
 * element 2p + 1 is r sin(theta). */
GSB__RAND_FN void gsb__rand_normal_polar(uint64_t key, uint64_t p, double *r, double *theta)
{
    const double two_pow_m53 = 1.0 / 9007199254740992.0;
    uint64_t h1 = gsb__rand_mix(key + (2 * p + 1) * 0x9E3779B97F4A7C15ull);
    uint64_t h2 = gsb__rand_mix(key + (2 * p + 2) * 0x9E3779B97F4A7C15ull);
    double u1 = (double)((h1 >> 11) + 1) * two_pow_m53;
    double u2 = (double)(h2 >> 11) * two_pow_m53;
    *r = sqrt(-2.0 * log(u1));
    *theta = 2.0 * 3.141592653589793 * u2;
}

#endif
