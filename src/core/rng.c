/* rng.c - xoshiro256** with splitmix64 seeding; see rng.h. */
#include "core/rng.h"

#include <math.h>
#include <stdatomic.h>
#include <time.h>

#include "core/xoshiro.h"

void gsb__rng_seed(gsb__rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = gsb__splitmix64(&seed);
}

void gsb__rng_seed_params(gsb__rng *r, const json_t *params)
{
    const json_t *v = json_object_get(params, "random_state");
    if (json_is_integer(v)) {
        gsb__rng_seed(r, (uint64_t)json_integer_value(v));
        return;
    }
    static atomic_uint_fast64_t counter;
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    gsb__rng_seed(r, (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                         (atomic_fetch_add(&counter, 1) * 0xD1B54A32D192ED03ull));
}

uint64_t gsb__rng_next(gsb__rng *r) { return gsb__xoshiro_next(r->s); }

double gsb__rng_uniform(gsb__rng *r) { return (double)(gsb__rng_next(r) >> 11) * 0x1.0p-53; }

double gsb__rng_normal(gsb__rng *r)
{
    double u1;
    do
        u1 = gsb__rng_uniform(r);
    while (u1 <= 0.0);
    double u2 = gsb__rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int64_t gsb__rng_below(gsb__rng *r, int64_t n) { return gsb__xoshiro_below(r->s, n); }
