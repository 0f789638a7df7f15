/* The autocast weight-cast cache (src/core/autocast.c), counted with the
** profiler: inside one autocast scope each leaf weight that requires grad is
** cast to the low dtype once, however often it is used, and the cast is
** reused; the forward values equal those of uncached casts, and gradients
** still reach the f32 leaves. */
#include "test_util.h"

#include "trident/amp.h"
#include "trident/profile.h"

#define TESTS(X) X(weight_cast_once_per_scope)

/* 2 layers, w1 used twice: h = relu(x w1^T + b1); h = relu(h w1^T + b1); y = h w2^T + b2 */
static td_tensor *forward(td_tensor *x, td_tensor *w1, td_tensor *b1, td_tensor *w2, td_tensor *b2) {
    td_tensor *h = td_relu(td_linear(x, w1, b1));
    h = td_relu(td_linear(h, w1, b1));
    return td_linear(h, w2, b2);
}

/* COPY ops (casts) recorded by the profiler since td_profile_begin. */
static int64_t copies(void) {
    td_profile_row rows[256];
    int n = td_profile_rows(rows, 256);
    ASSERT(n <= 256);
    int64_t c = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].op, "copy") && !rows[i].backward) c += rows[i].count;
    return c;
}

/* The forward of the weights requiring grad (cached: x, w1, b1, w2, b2 cast
** once each, 5 casts) against the same weights not requiring grad (not
** cached: w1 and b1 cast at each use, 7): equal values; the cached run's
** gradients reach w1 and b1 as f32, close to the f32 run's. */
TEST(weight_cast_once_per_scope) {
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(TD_CPU, 1, 1)); /* no roofline measurement at td_profile_end */
    td_tensor *x = td_randn(2, (int64_t[]){4, 8}, 1, 0, TD_F32, TD_CPU);
    td_tensor *w[2][4];
    for (int k = 0; k < 2; k++) {
        w[k][0] = td_randn(2, (int64_t[]){8, 8}, 2, 0, TD_F32, TD_CPU);
        w[k][1] = td_randn(1, (int64_t[]){8}, 3, 0, TD_F32, TD_CPU);
        w[k][2] = td_randn(2, (int64_t[]){3, 8}, 4, 0, TD_F32, TD_CPU);
        w[k][3] = td_randn(1, (int64_t[]){3}, 5, 0, TD_F32, TD_CPU);
        for (int i = 0; i < 4; i++) ASSERT_OK(td_set_requires_grad(ASSERT_TENSOR(w[k][i]), k == 0));
    }
    td_tensor *y[2];
    int64_t count[2];
    for (int k = 0; k < 2; k++) {
        ASSERT_OK(td_profile_begin());
        ASSERT_OK(td_autocast_begin(TD_DEVICE_CPU, TD_BF16));
        y[k] = ASSERT_TENSOR(forward(x, w[k][0], w[k][1], w[k][2], w[k][3]));
        ASSERT_OK(td_autocast_end());
        ASSERT_OK(td_profile_end(NULL));
        count[k] = copies();
        ASSERT_EQ_INT(td_tensor_dtype(y[k]), TD_BF16);
    }
    printf("  casts in the forward: cached %lld, uncached %lld\n", (long long)count[0], (long long)count[1]);
    ASSERT_EQ_INT(count[0], 5);
    ASSERT_EQ_INT(count[1], 7);
    double a[12], b[12];
    ASSERT_OK(td_copy_to_host(y[0], a, sizeof a, TD_F64));
    ASSERT_OK(td_copy_to_host(y[1], b, sizeof b, TD_F64));
    for (int i = 0; i < 12; i++) ASSERT_NEAR(a[i], b[i], 0);
    /* gradients reach the f32 leaves: against the f32 forward's */
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_cast(y[0], TD_F32), 0, NULL, false)), NULL, false));
    td_tensor *ref[4];
    for (int i = 0; i < 4; i++) {
        ref[i] = ASSERT_TENSOR(td_detach(w[0][i]));
        ASSERT_OK(td_set_requires_grad(ref[i], true));
    }
    ASSERT_OK(
        td_backward(ASSERT_TENSOR(td_sum(forward(x, ref[0], ref[1], ref[2], ref[3]), 0, NULL, false)), NULL, false));
    for (int i = 0; i < 4; i++) {
        td_tensor *g = ASSERT_TENSOR(td_grad_of(w[0][i])), *r = ASSERT_TENSOR(td_grad_of(ref[i]));
        ASSERT_EQ_INT(td_tensor_dtype(g), TD_F32);
        int64_t n = td_numel(g);
        double gv[64], rv[64];
        ASSERT(n <= 64);
        ASSERT_OK(td_copy_to_host(g, gv, sizeof(double) * (size_t)n, TD_F64));
        ASSERT_OK(td_copy_to_host(r, rv, sizeof(double) * (size_t)n, TD_F64));
        for (int64_t j = 0; j < n; j++) ASSERT_NEAR(gv[j], rv[j], 0.05 * (1 + fabs(rv[j])));
    }
    td_scope_end();
}

TEST_MAIN(TESTS)
