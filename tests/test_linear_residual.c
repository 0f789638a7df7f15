/* td_linear_residual (one LINEAR_RESIDUAL op) beyond the conformance table's
** cases: the float32 y of f16/bf16 x and w with a float32 bias and residual,
** held to float32 tolerances against a float64 reference on the CPU and CUDA,
** which add b and r to the unrounded product (the composed ops round it to x's
** dtype first and miss that limit, so the check can fail; Vulkan composes and
** is held to their error); the autocast policy (x and w cast, b and r kept)
** with its gradients; bad input. */
#include "test_util.h"
#include "trident/amp.h"

#define TESTS(X) X(wide_cpu) X(wide_vulkan) X(wide_cuda) X(autocast_cpu) X(bad_input)

enum { M = 37, K = 64, N = 24 };

/* x [M, K] and w [N, K] of dt, b [N] and r [M, N] of float32, on dev: the same values in every call */
static void make(td_tensor **t, td_dtype dt, td_device dev) {
    test_rng_state = 7;
    t[0] = test_uniform_tensor(2, (int64_t[]){M, K}, -1, 1, dt, dev);
    t[1] = test_uniform_tensor(2, (int64_t[]){N, K}, -1, 1, dt, dev);
    t[2] = test_uniform_tensor(1, (int64_t[]){N}, -1, 1, TD_F32, dev);
    t[3] = test_uniform_tensor(2, (int64_t[]){M, N}, -1, 1, TD_F32, dev);
}

/* x w^T + b + r in float64 on the CPU, from t's values */
static td_tensor *reference(td_tensor *const *t) {
    td_tensor *c[4];
    for (int i = 0; i < 4; i++) c[i] = ASSERT_TENSOR(td_cast(td_to(t[i], TD_CPU), TD_F64));
    return ASSERT_TENSOR(td_add(td_add(td_linear(c[0], c[1], NULL), c[2]), c[3]));
}

/* strict: y within float32 rounding of the reference (products of f16/bf16 values are exact in f32, only the sums
** round); else within the composed ops' error */
static void wide_on(td_device dev, bool strict) {
    td_dtype dts[2] = {TD_BF16, TD_F16};
    for (int k = 0; k < 2; k++) {
        td_scope_begin();
        td_tensor *t[4];
        make(t, dts[k], dev);
        td_tensor *y = ASSERT_TENSOR(td_linear_residual(t[0], t[1], t[2], t[3]));
        ASSERT_EQ_INT(td_tensor_dtype(y), TD_F32);
        td_tensor *ref = reference(t);
        td_tensor *rounded = ASSERT_TENSOR(td_add(td_add(td_linear(t[0], t[1], NULL), t[2]), t[3]));
        double e = test_rel_err(y, ref), e_rounded = test_rel_err(rounded, ref);
        printf("  %s: %.3g (the product rounded to it first: %.3g)\n", td_dtype_name(dts[k]), e, e_rounded);
        ASSERT(e_rounded > 1e-4); /* the rounding shows at this size */
        ASSERT(e <= (strict ? 2e-5 : e_rounded * 1.01));
        td_scope_end();
    }
}

TEST(wide_cpu) { wide_on(TD_CPU, true); }
TEST(wide_vulkan) { wide_on(test_device_or_skip("vulkan:0"), false); }
TEST(wide_cuda) { wide_on(test_device_or_skip("cuda:0"), true); }

/* A bf16 autocast scope casts x and w only: y is float32, equal to the float64 result of bf16-rounded x and w with
** b and r as they are; the float32 leaves get float32 gradients: dr = dy and db = sum over rows of dy exactly (dy =
** 1), dx = dy w and dw = dy^T x from the bf16 GEMMs. */
TEST(autocast_cpu) {
    td_scope_begin();
    td_tensor *t[4], *lo[4];
    make(t, TD_F32, TD_CPU);
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(td_set_requires_grad(t[i], true));
        lo[i] = i < 2 ? ASSERT_TENSOR(td_cast(td_cast(td_detach(t[i]), TD_BF16), TD_F32)) : td_detach(t[i]);
    }
    ASSERT_OK(td_autocast_begin(TD_DEVICE_CPU, TD_BF16));
    td_tensor *y = ASSERT_TENSOR(td_linear_residual(t[0], t[1], t[2], t[3]));
    ASSERT_OK(td_autocast_end());
    ASSERT_EQ_INT(td_tensor_dtype(y), TD_F32);
    double e = test_rel_err(y, reference(lo));
    printf("  y: %.3g\n", e);
    ASSERT(e <= 2e-5);
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(y, 0, NULL, false)), NULL, false));
    td_tensor *g[4];
    for (int i = 0; i < 4; i++) {
        g[i] = ASSERT_TENSOR(td_grad_of(t[i]));
        ASSERT_EQ_INT(td_tensor_dtype(g[i]), TD_F32);
    }
    ASSERT(test_rel_err(g[3], ASSERT_TENSOR(td_ones(2, (int64_t[]){M, N}, TD_F32, TD_CPU))) == 0);
    ASSERT(test_rel_err(g[2], ASSERT_TENSOR(td_full(1, (int64_t[]){N}, M, TD_F32, TD_CPU))) == 0);
    int rows = 0;
    td_tensor *dx = ASSERT_TENSOR(td_expand(td_sum(lo[1], 1, &rows, true), 2, (int64_t[]){M, K}));
    td_tensor *dw = ASSERT_TENSOR(td_expand(td_sum(lo[0], 1, &rows, true), 2, (int64_t[]){N, K}));
    ASSERT(test_rel_err(g[0], dx) <= 1e-2);
    ASSERT(test_rel_err(g[1], dw) <= 1e-2);
    td_scope_end();
}

TEST(bad_input) {
    td_scope_begin();
    td_tensor *x = td_zeros(2, (int64_t[]){4, K}, TD_F32, TD_CPU), *w = td_zeros(2, (int64_t[]){N, K}, TD_F32, TD_CPU);
    td_tensor *r = td_zeros(2, (int64_t[]){4, N}, TD_F32, TD_CPU);
    ASSERT_ERROR(td_linear_residual(x, td_zeros(1, (int64_t[]){K}, TD_F32, TD_CPU), NULL, r), TD_ERR_SHAPE,
                 "weight must be [out, in]");
    ASSERT_ERROR(td_linear_residual(x, w, td_zeros(1, (int64_t[]){N + 1}, TD_F32, TD_CPU), r), TD_ERR_SHAPE,
                 "bias must be");
    ASSERT_ERROR(td_linear_residual(x, w, NULL, td_zeros(2, (int64_t[]){4, N + 1}, TD_F32, TD_CPU)), TD_ERR_SHAPE, "");
    ASSERT_ERROR(td_linear_residual(NULL, w, NULL, r), TD_ERR_MISUSE, "linear_residual");
    td_scope_end();
}

TEST_MAIN(TESTS)
