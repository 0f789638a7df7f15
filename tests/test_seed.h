/*
** A printed seed and a small generator for test inputs (splitmix64), so that
** a failing run can be repeated: TD_TEST_SEED=<n> build/tests/test_x case.
*/
#ifndef TRIDENT_TEST_SEED_H
#define TRIDENT_TEST_SEED_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t test_rng_state;

/* Seed from $TD_TEST_SEED (default 12345), printed to stderr. */
static inline uint64_t test_seed(void) {
    const char *env = getenv("TD_TEST_SEED");
    uint64_t s = env ? strtoull(env, NULL, 10) : 12345u;
    fprintf(stderr, "  seed %" PRIu64 "\n", s);
    test_rng_state = s;
    return s;
}

static inline uint64_t test_next(void) {
    uint64_t z = (test_rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform double in [lo, hi) */
static inline double test_uniform(double lo, double hi) {
    return lo + (hi - lo) * (double)(test_next() >> 11) * 0x1p-53;
}

/* integer in [0, n) */
static inline int64_t test_int(int64_t n) { return (int64_t)(test_next() % (uint64_t)n); }

#endif /* TRIDENT_TEST_SEED_H */
