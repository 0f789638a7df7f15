/*
** Shared harness of the Vulkan backend tests (test_vulkan.c, test_vulkan_ops.c):
** the backend handle, a seeded generator, device operands, tolerant compares,
** and the validation check every case ends with.
*/
#ifndef TRIDENT_TEST_VULKAN_HARNESS_H
#define TRIDENT_TEST_VULKAN_HARNESS_H

#include <stdint.h>

#include "runner.h"

static const td_backend *be;
static uint64_t seed;

static inline void setup(void) {
    setenv("TRIDENT_VULKAN_VALIDATION", "1", 0); /* validation on unless the caller chose */
    be = td_backend_for(TD_DEVICE_VULKAN);
    if (!be) TEST_SKIP("no Vulkan device: %s", td_backend_unavailable_reason(TD_DEVICE_VULKAN));
    const char *s = getenv("TD_TEST_SEED");
    seed = s ? strtoull(s, NULL, 10) : 1234;
    printf("  seed %llu (TD_TEST_SEED)\n", (unsigned long long)seed);
}

/* Fails the case when the validation layer reported errors. */
static inline void check_clean(void) {
    td_device_info info;
    ASSERT_OK(be->iface->synchronize(0));
    ASSERT_OK(be->iface->device_info(0, &info));
    const char *at = strstr(info.features, "validation_errors=");
    ASSERT(at);
    ASSERT_EQ_INT(atoi(at + strlen("validation_errors=")), 0);
}

static inline double urand(void) { /* xorshift64*, uniform in [0, 1) */
    seed ^= seed >> 12, seed ^= seed << 25, seed ^= seed >> 27;
    return (double)((seed * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}
static inline double srand1(void) { return 2 * urand() - 1; }

/* A contiguous device operand holding n elements of host data (dtype dt). */
static inline td_operand dev_tensor(td_dtype dt, int ndim, const int64_t *shape, const void *host) {
    td_operand v = {.dtype = dt, .ndim = ndim};
    int64_t n = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        v.shape[i] = shape[i];
        v.strides[i] = n;
        n *= shape[i];
    }
    ASSERT_OK(be->iface->buffer_alloc(0, (size_t)n * td_dtype_size(dt), &v.buf));
    if (host && n) ASSERT_OK(be->iface->write(v.buf, 0, host, (size_t)n * td_dtype_size(dt)));
    return v;
}

static inline void fetch(const td_operand *v, void *host) {
    ASSERT_OK(be->iface->read(v->buf, (size_t)v->offset * td_dtype_size(v->dtype), host,
                              (size_t)td_operand_numel(v) * td_dtype_size(v->dtype)));
}

static inline void run(td_op *op) {
    if (!be->iface->supports(0, op)) TEST_FAIL_("vulkan does not support %s", td_op_name(op->kind));
    ASSERT_OK(be->iface->run(0, op));
}

/* Compare n floats with |got - want| <= atol + rtol |want|; prints the first misses. */
static inline void check_close(const char *what, const float *got, const double *want, int64_t n, double atol,
                               double rtol) {
    int bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        bool ok = err <= atol + rtol * fabs(want[i]) || (isnan(want[i]) && isnan(got[i])) ||
                  (isinf(want[i]) && got[i] == want[i]);
        if (!ok && bad++ < 5) fprintf(stderr, "  %s[%lld]: got %.9g, want %.9g\n", what, (long long)i, got[i], want[i]);
        if (!isnan(err) && err > worst) worst = err;
    }
    if (bad) TEST_FAIL_("%s: %d of %lld elements differ (max abs error %g)", what, bad, (long long)n, worst);
}

#endif /* TRIDENT_TEST_VULKAN_HARNESS_H */
