#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-function"
/* scratch driver (not committed): times kmeanspp on 1M x 64, k = 100, 6 trials,
 * both dtypes, and prints a hash of chosen / pot / closest (compare backends). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_testing.h"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-function"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (!cuda_testing_init())
        return 1;
    const int64_t n = 1000000, d = 64, steps = 99, trials = 6;
    double *u = malloc(sizeof(double) * steps * trials);
    for (int64_t q = 0; q < steps * trials; q++)
        u[q] = testing_uniform();
    for (int di = 0; di < 2; di++) {
        gsb_dtype dt = di ? GSB_F32 : GSB_F64;
        gsb__tensor Xh = host_random(dt, n, d, 1.0), Xg = to_gpu(&Xh);
        gsb__tensor cl;
        if (gsb__tensor_alloc(gpu, GSB_F64, n, 1, &cl))
            abort();
        int64_t chosen[128];
        double pot = 0, t[16];
        for (int r = 0; r <= reps; r++) {
            double t0 = now_s();
            if (gpu->ops->kmeanspp(gpu, &Xg, NULL, 17, u, steps, trials, &cl, &pot, chosen)) {
                fprintf(stderr, "fail %s\n", gsb_errmsg());
                return 1;
            }
            if (r)
                t[r - 1] = now_s() - t0;
        }
        for (int i = 0; i < reps; i++)
            for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
                double x = t[j]; t[j] = t[j - 1]; t[j - 1] = x;
            }
        gsb__tensor ch = from_gpu(&cl);
        uint64_t h = 1469598103934665603ull;
        const unsigned char *b = (const unsigned char *)ch.data;
        for (int64_t i = 0; i < n * 8; i++)
            h = (h ^ b[i]) * 1099511628211ull;
        for (int64_t s = 0; s < steps; s++)
            h = (h ^ (uint64_t)chosen[s]) * 1099511628211ull;
        uint64_t pb;
        memcpy(&pb, &pot, 8);
        printf("%s: %.3f ms a call (%.4f ms a step), pot %.17g hash %016llx pb %016llx last %lld\n",
               gsb_dtype_name(dt), reps ? t[reps / 2] * 1e3 : 0.0,
               reps ? t[reps / 2] * 1e3 / 100 : 0.0, pot, (unsigned long long)h,
               (unsigned long long)pb, (long long)chosen[steps - 1]);
        gsb__tensor_free(&ch);
        gsb__tensor_free(&cl);
        gsb__tensor_free(&Xh);
        gsb__tensor_free(&Xg);
    }
    free(u);
    return 0;
}
