/*
** Helpers shared by test_elementwise.c and test_reduce.c (beside those of
** test_util.h): random input arrays, broadcast index arithmetic for the
** double-precision reference loops, and shape and value checks.
*/
#ifndef TRIDENT_TEST_ELEM_UTIL_H
#define TRIDENT_TEST_ELEM_UTIL_H

#include "test_util.h"

static double *rand_values(int64_t n, double lo, double hi) {
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = test_uniform(lo, hi);
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
