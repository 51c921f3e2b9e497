/*
 * libsvm_rand.c - MT19937 and the two ways scikit-learn's SVC reduces its
 * outputs (see libsvm_rand.h).  The generator is the standard 32-bit
 * Mersenne Twister (state of 624 words, tempering as published).
 */
#include "estimators/svm/libsvm_rand.h"

#define MT_N 624
#define MT_M 397

void gsb__mt19937_seed(gsb__mt19937 *g, uint32_t seed)
{
    g->mt[0] = seed;
    for (int i = 1; i < MT_N; i++)
        g->mt[i] = 1812433253u * (g->mt[i - 1] ^ (g->mt[i - 1] >> 30)) + (uint32_t)i;
    g->idx = MT_N;
}

/* Regenerate the whole state (the "twist"). */
static void twist(gsb__mt19937 *g)
{
    for (int k = 0; k < MT_N; k++) {
        uint32_t y = (g->mt[k] & 0x80000000u) | (g->mt[(k + 1) % MT_N] & 0x7fffffffu);
        g->mt[k] = g->mt[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    g->idx = 0;
}

uint32_t gsb__mt19937_next(gsb__mt19937 *g)
{
    if (g->idx >= MT_N)
        twist(g);
    uint32_t y = g->mt[g->idx++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint32_t gsb__libsvm_bounded(gsb__mt19937 *g, uint32_t range)
{
    /* the high word of x * range, rejecting the low words that would bias it */
    uint64_t m = (uint64_t)gsb__mt19937_next(g) * range;
    uint32_t low = (uint32_t)m;
    if (low < range) {
        uint32_t t = (uint32_t)-range % range;
        while (low < t) {
            m = (uint64_t)gsb__mt19937_next(g) * range;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

uint32_t gsb__libsvm_seed_for(uint32_t random_state)
{
    gsb__mt19937 g;
    gsb__mt19937_seed(&g, random_state);
    uint32_t v;
    do /* randint(0, 2**31 - 1): masked to 31 bits, 2**31 - 1 itself redrawn */
        v = gsb__mt19937_next(&g) & 0x7fffffffu;
    while (v > 0x7ffffffeu);
    return v;
}
