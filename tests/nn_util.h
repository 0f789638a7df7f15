/*
** Helpers shared by test_matmul.c and test_nn_ops.c (over test_util.h):
** seeded random tensors, host copies in double, and an absolute-plus-relative
** comparison that prints the first mismatches and the largest difference.
*/
#ifndef TRIDENT_TEST_NN_UTIL_H
#define TRIDENT_TEST_NN_UTIL_H

#include <stdint.h>

#include "test_util.h"

/* test_util.h's generator under the names test_matmul.c and test_nn_ops.c use */
static void nn_seed(uint64_t seed) { test_seed_from(seed); }
static double nn_uniform(void) { return test_uniform(-1, 1); } /* [-1, 1) */

/* A tensor of uniform values in [-scale, scale), made in f64 and cast to dt. */
static td_tensor *nn_rand(int ndim, const int64_t *shape, double scale, td_dtype dt) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) v[i] = nn_uniform() * scale;
    td_tensor *t = test_tensor_f64(v, ndim, shape, dt);
    free(v);
    return t;
}

/* Logical (row-major) contents of t in double; malloc'd. */
static double *nn_host(td_tensor *t) { return test_host(t); }

/* |got - want| <= atol + rtol*|want| everywhere; prints up to 5 mismatches. */
static void nn_check(const char *what, const double *got, const double *want, int64_t n, double atol, double rtol) {
    int bad = 0;
    double maxdiff = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (d > maxdiff || d != d) maxdiff = d;
        if (!(d <= atol + rtol * fabs(want[i]))) {
            if (bad < 5) fprintf(stderr, "  %s[%lld]: got %.9g want %.9g\n", what, (long long)i, got[i], want[i]);
            bad++;
        }
    }
    if (bad)
        TEST_FAIL_("%s: %d of %lld values differ (max diff %.3g, atol %g, rtol %g)", what, bad, (long long)n, maxdiff,
                   atol, rtol);
}

/* nn_check of a tensor against a reference array. */
static void nn_check_tensor(const char *what, td_tensor *t, const double *want, double atol, double rtol) {
    double *got = nn_host(t);
    nn_check(what, got, want, td_numel(t), atol, rtol);
    free(got);
}

/* Tolerance scale per dtype: f64 tight, f32 moderate, halves loose. */
static double nn_tol(td_dtype dt) {
    switch (dt) {
    case TD_F64: return 1e-12;
    case TD_F32: return 2e-5;
    case TD_F16: return 4e-3;
    default: return 3e-2;
    }
}

static const td_dtype nn_float_dtypes[4] = {TD_F32, TD_F64, TD_F16, TD_BF16};

/* OpenMP's thread count for this thread's later calls, so that the kernels' multi-thread splits run
** whatever the machine; a no-op without OpenMP. libgomp comes in through libtrident, so the test
** refers to it weakly rather than linking it. */
void omp_set_num_threads(int n) __attribute__((weak));
static void nn_threads(int n) {
    if (omp_set_num_threads) omp_set_num_threads(n);
}

#endif /* TRIDENT_TEST_NN_UTIL_H */
