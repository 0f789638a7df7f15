/*
** Helpers shared by test_elementwise.c and test_reduce.c: a seeded LCG for
** inputs, tensors from double arrays, reading values back as doubles, and
** broadcast index arithmetic for the double-precision reference loops.
*/
#ifndef TRIDENT_TEST_ELEM_UTIL_H
#define TRIDENT_TEST_ELEM_UTIL_H

#include "runner.h"

static uint64_t lcg_state;

/* Seed the generator and print the seed, so a failure can be replayed. */
static void lcg_seed(uint64_t seed) {
    const char *env = getenv("TD_TEST_SEED");
    if (env) seed = strtoull(env, NULL, 10);
    lcg_state = seed;
    printf("  seed %llu (set TD_TEST_SEED to replay)\n", (unsigned long long)seed);
}

/* Uniform in [lo, hi). */
static double lcg_uniform(double lo, double hi) {
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(lcg_state >> 11) * (1.0 / 9007199254740992.0);
}

static double *rand_values(int64_t n, double lo, double hi) {
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = lcg_uniform(lo, hi);
    return v;
}

/* A tensor of dtype dt holding v (converted from double). */
static td_tensor *tensor_of(const double *v, int ndim, const int64_t *shape, td_dtype dt) {
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, ndim, shape, TD_F64, TD_CPU));
    return ASSERT_TENSOR(td_cast(t, dt));
}

/* The tensor's elements in row-major order, as doubles (caller frees). */
static double *values_of(td_tensor *t) {
    int64_t n = td_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    ASSERT_OK(td_copy_to_host(t, v, sizeof(double) * (size_t)n, TD_F64));
    return v;
}

/* Index into a row-major tensor of shape (nd, shape) that broadcasts to element o of (ond, oshape). */
static inline int64_t bcast_index(int64_t o, int ond, const int64_t *oshape, int nd, const int64_t *shape) {
    int64_t idx = 0, mul = 1;
    for (int d = ond - 1, j = nd - 1; d >= 0; d--, j--) {
        int64_t i = o % oshape[d];
        o /= oshape[d];
        if (j >= 0) {
            if (shape[j] != 1) idx += i * mul;
            mul *= shape[j];
        }
    }
    return idx;
}

static void assert_shape(td_tensor *t, int ndim, const int64_t *shape) {
    ASSERT_EQ_INT(td_ndim(t), ndim);
    for (int d = 0; d < ndim; d++) ASSERT_EQ_INT(td_size(t, d), shape[d]);
}

/* got ~= want with absolute-plus-relative tolerance; NaN must match NaN. */
static void assert_close(const double *got, const double *want, int64_t n, double atol, double rtol, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        bool ok = isnan(want[i]) ? isnan(got[i])
                                 : (got[i] == want[i] || fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i]));
        if (!ok) TEST_FAIL_("%s: element %lld is %.10g, want %.10g", what, (long long)i, got[i], want[i]);
    }
}

#endif /* TRIDENT_TEST_ELEM_UTIL_H */
