/*
 * libsvm_rand.h - the random numbers of the libsvm that scikit-learn bundles,
 * so SVC(probability=True, random_state=N) shuffles its cross-validation
 * folds exactly as scikit-learn does:
 *   - SVC.fit draws the libsvm seed as
 *     numpy.random.RandomState(random_state).randint(2**31 - 1): the first
 *     32-bit output of MT19937 seeded with random_state, masked to 31 bits,
 *     redrawn when it equals 2**31 - 1 (numpy's legacy masked rejection);
 *   - libsvm draws from a std::mt19937 seeded with that seed (set_seed) and
 *     maps outputs to [0, range) with Lemire's multiply-and-reject
 *     (bounded_rand_int in scikit-learn's newrand.h).
 */
#ifndef GSB_ESTIMATORS_SVM_LIBSVM_RAND_H
#define GSB_ESTIMATORS_SVM_LIBSVM_RAND_H

#include <stdint.h>

typedef struct gsb__mt19937 {
    uint32_t mt[624];
    int idx;
} gsb__mt19937;

/* std::mt19937::seed(seed) (Matsumoto and Nishimura's init_genrand). */
void gsb__mt19937_seed(gsb__mt19937 *g, uint32_t seed);
uint32_t gsb__mt19937_next(gsb__mt19937 *g);
/* libsvm's bounded_rand_int: uniform in [0, range), range >= 1. */
uint32_t gsb__libsvm_bounded(gsb__mt19937 *g, uint32_t range);
/* The seed SVC.fit hands libsvm for an integer random_state. */
uint32_t gsb__libsvm_seed_for(uint32_t random_state);

#endif
