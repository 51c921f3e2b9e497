/*
 * xoshiro.h - xoshiro256** and its splitmix64 seeding as inline functions,
 * so the host generator (core/rng.c) and code that also runs in CUDA
 * kernels (backend/forest_level.h: each forest node's feature draw) step
 * the same stream with one definition.
 */
#ifndef GSB_CORE_XOSHIRO_H
#define GSB_CORE_XOSHIRO_H

#include <stdint.h>

#ifdef __CUDACC__
#define GSB_XOSHIRO_FN static __host__ __device__ inline
#else
#define GSB_XOSHIRO_FN static inline
#endif

GSB_XOSHIRO_FN uint64_t gsb__splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

GSB_XOSHIRO_FN uint64_t gsb__xoshiro_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* The next output of the state s, which it advances. */
GSB_XOSHIRO_FN uint64_t gsb__xoshiro_next(uint64_t s[4])
{
    uint64_t result = gsb__xoshiro_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = gsb__xoshiro_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, n), by rejection (no modulo bias). */
GSB_XOSHIRO_FN int64_t gsb__xoshiro_below(uint64_t s[4], int64_t n)
{
    uint64_t un = (uint64_t)n, limit = UINT64_MAX - UINT64_MAX % un, x;
    do
        x = gsb__xoshiro_next(s);
    while (x >= limit);
    return (int64_t)(x % un);
}

/*
 * gsb__xoshiro_below for many draws with one n: its rejection limit and a
 * reciprocal computed once, the modulo then a multiply (two 64-bit divisions
 * a draw cost more than the generator).  The same draws, bit for bit.
 */
typedef struct gsb__xoshiro_divider {
    uint64_t n, limit, recip;   /* recip = floor((2^64 - 1) / n) */
} gsb__xoshiro_divider;

GSB_XOSHIRO_FN gsb__xoshiro_divider gsb__xoshiro_divider_of(int64_t n)
{
    uint64_t un = (uint64_t)n;
    gsb__xoshiro_divider d = {un, UINT64_MAX - UINT64_MAX % un, UINT64_MAX / un};
    return d;
}

/* gsb__xoshiro_below(s, d->n): q = mulhi(x, recip) is floor(x / n) or up to
 * two less (recip > 2^64 / n - 1 and x < 2^64), so x - q n < 3n. */
GSB_XOSHIRO_FN int64_t gsb__xoshiro_below_div(uint64_t s[4], const gsb__xoshiro_divider *d)
{
    uint64_t x;
    do
        x = gsb__xoshiro_next(s);
    while (x >= d->limit);
#ifdef __CUDA_ARCH__
    uint64_t q = __umul64hi(x, d->recip);
#else
    uint64_t q = (uint64_t)(((unsigned __int128)x * d->recip) >> 64);
#endif
    uint64_t r = x - q * d->n;
    while (r >= d->n)
        r -= d->n;
    return (int64_t)r;
}

#endif
