/* LINEAR_WGRAD (td__linear_wgrad): linear's weight and bias gradients in one
** op, against the unfused MATMUL and SUM on the same device. On CUDA the bias
** gradient comes out of the weight-gradient GEMM (cuBLASLt's BGRADB
** epilogue); the CPU runs MATMUL's and SUM's kernels. Also LINEAR_GELU's
** backward, which takes it, against the composed linear + gelu's gradients.
** wide_outputs_<dev>: td__linear_wgrad_to's f32 dw and db of f16/bf16 operands
** (autocast's f32 parameters) equal the f32 product of the widened operands
** (no rounding to the half dtype between: a bound a rounded result misses by
** far); Vulkan declines them and the core casts its half-precision results. */
#include <string.h>

#include "test_util.h"

#include "core/linear_wgrad.h"

#define TESTS(X)                                                                                                       \
    X(fused_equals_unfused_cpu)                                                                                        \
    X(fused_equals_unfused_cuda)                                                                                       \
    X(vulkan_against_f64)                                                                                              \
    X(deterministic_vulkan)                                                                                            \
    X(linear_gelu_backward_cpu)                                                                                        \
    X(one_output_strided_cpu)                                                                                          \
    X(wide_outputs_cpu)                                                                                                \
    X(wide_outputs_cuda)                                                                                               \
    X(wide_outputs_vulkan)

/* dy [M, N], x [M, K] of dt on dev: td__linear_wgrad against dy^T x (MATMUL) and sum over rows (SUM) */
static void check(td_device dev, td_dtype dt, int64_t M, int64_t N, int64_t K, double tol) {
    td_scope_begin();
    td_tensor *dy = ASSERT_TENSOR(td_to(td_randn(2, (int64_t[]){M, N}, 1, 0, dt, TD_CPU), dev));
    td_tensor *x = ASSERT_TENSOR(td_to(td_randn(2, (int64_t[]){M, K}, 2, 0, dt, TD_CPU), dev));
    td_tensor *dw = NULL, *db = NULL;
    ASSERT_OK(td__linear_wgrad(dy, x, true, &dw, &db));
    int rows = 0;
    td_tensor *rw = ASSERT_TENSOR(td_matmul(td_transpose(dy, 0, 1), x)),
              *rb = ASSERT_TENSOR(td_sum(dy, 1, &rows, false));
    double ew = test_max_rel(dw, rw), eb = test_max_rel(db, rb);
    printf("  %s [%lld,%lld]x[%lld,%lld]: dw %.3g, db %.3g\n", td_dtype_name(dt), (long long)M, (long long)N,
           (long long)M, (long long)K, ew, eb);
    ASSERT(ew <= tol && eb <= tol);
    td_tensor *only_w = NULL;
    ASSERT_OK(td__linear_wgrad(dy, x, false, &only_w, NULL));
    ASSERT(test_max_rel(only_w, rw) <= tol);
    td_scope_end();
}

/* shapes: a square one, GPT-like rows (M = B*T), odd sizes (no 16-byte alignment: Lt may refuse the epilogue) */
static void check_all(td_device dev, const td_dtype *dts, int n_dts) {
    for (int k = 0; k < n_dts; k++) {
        double tol = dts[k] == TD_F64 ? 1e-12 : dts[k] == TD_F32 ? 1e-4 : 2e-2;
        check(dev, dts[k], 64, 64, 64, tol);
        check(dev, dts[k], 1024, 96, 48, tol);
        check(dev, dts[k], 37, 7, 9, tol);
    }
}

TEST(fused_equals_unfused_cpu) { check_all(TD_CPU, (td_dtype[]){TD_F32, TD_F64}, 2); }

TEST(fused_equals_unfused_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    check_all(dev, (td_dtype[]){TD_F32, TD_BF16, TD_F16, TD_F64}, 4);
    check(dev, TD_BF16, 16384, 768, 64, 2e-2); /* W5's rows: db's column sums over many chunks */
}

/* Vulkan: dw and db against float64 on the CPU from the same (rounded) operands. Long M splits K of
** dy^T x: 8192 rows on the tiled f32 kernel (16 slices), and on the tensor cores for bf16 where the device
** has them (split_k_of, vk_ops_matmul.c); 8193 (odd) does not split; db is the split column sum. */
static void check_f64(td_device dev, td_dtype dt, int64_t M, int64_t N, int64_t K, double tol) {
    td_scope_begin();
    td_tensor *hdy = td_randn(2, (int64_t[]){M, N}, 1, 0, dt, TD_CPU),
              *hx = td_randn(2, (int64_t[]){M, K}, 2, 0, dt, TD_CPU);
    td_tensor *dy = ASSERT_TENSOR(td_to(hdy, dev)), *x = ASSERT_TENSOR(td_to(hx, dev)), *dw = NULL, *db = NULL;
    ASSERT_OK(td__linear_wgrad(dy, x, true, &dw, &db));
    td_tensor *dy64 = td_cast(hdy, TD_F64), *x64 = td_cast(hx, TD_F64);
    int rows = 0;
    td_tensor *rw = ASSERT_TENSOR(td_matmul(td_transpose(dy64, 0, 1), x64)),
              *rb = ASSERT_TENSOR(td_sum(dy64, 1, &rows, false));
    double ew = test_max_rel(dw, rw), eb = test_max_rel(db, rb);
    printf("  vulkan %s [%lld,%lld]x[%lld,%lld] against f64: dw %.3g, db %.3g\n", td_dtype_name(dt), (long long)M,
           (long long)N, (long long)M, (long long)K, ew, eb);
    ASSERT(ew <= tol && eb <= tol);
    td_scope_end();
}

TEST(vulkan_against_f64) {
    td_device dev = test_device_or_skip("vulkan:0");
    check_all(dev, (td_dtype[]){TD_F32, TD_BF16, TD_F16, TD_F64}, 4);
    const td_dtype dts[3] = {TD_F32, TD_BF16, TD_F16};
    for (int i = 0; i < 3; i++) {
        double tol = dts[i] == TD_F32 ? 1e-3 : 2e-2; /* |a - b| / (1 + |b|), sums of 8192 terms near 90 */
        check_f64(dev, dts[i], 8192, 96, 160, tol);
        check_f64(dev, dts[i], 8192, 200, 136, tol);
        check_f64(dev, dts[i], 8193, 131, 7, tol);
    }
}

/* two runs give the same bits (split-K slices and column chunks add in a fixed order) */
TEST(deterministic_vulkan) {
    td_device dev = test_device_or_skip("vulkan:0");
    td_scope_begin();
    const td_dtype dts[2] = {TD_F32, TD_BF16};
    enum { M = 8192, N = 200, K = 136 };
    for (int i = 0; i < 2; i++) {
        td_tensor *dy = ASSERT_TENSOR(td_to(td_randn(2, (int64_t[]){M, N}, 1, 0, dts[i], TD_CPU), dev));
        td_tensor *x = ASSERT_TENSOR(td_to(td_randn(2, (int64_t[]){M, K}, 2, 0, dts[i], TD_CPU), dev));
        static float h[2][N * K + N];
        for (int run = 0; run < 2; run++) {
            td_tensor *dw = NULL, *db = NULL;
            ASSERT_OK(td__linear_wgrad(dy, x, true, &dw, &db));
            ASSERT_OK(td_copy_to_host(dw, h[run], sizeof(float) * N * K, TD_F32));
            ASSERT_OK(td_copy_to_host(db, h[run] + N * K, sizeof(float) * N, TD_F32));
        }
        ASSERT(!memcmp(h[0], h[1], sizeof h[0]));
    }
    td_scope_end();
}

/* LINEAR_GELU's gradients (dw, db through LINEAR_WGRAD) against linear then gelu, composed */
TEST(linear_gelu_backward_cpu) {
    td_scope_begin();
    td_tensor *x = td_randn(2, (int64_t[]){20, 12}, 3, 0, TD_F64, TD_CPU);
    td_tensor *p[2][2];
    for (int k = 0; k < 2; k++) {
        p[k][0] = ASSERT_TENSOR(td_randn(2, (int64_t[]){16, 12}, 4, 0, TD_F64, TD_CPU));
        p[k][1] = ASSERT_TENSOR(td_randn(1, (int64_t[]){16}, 5, 0, TD_F64, TD_CPU));
        for (int i = 0; i < 2; i++) ASSERT_OK(td_set_requires_grad(p[k][i], true));
    }
    td_tensor *y0 = td_linear_gelu(x, p[0][0], p[0][1], false), *y1 = td_gelu(td_linear(x, p[1][0], p[1][1]), false);
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_mul(y0, y0), 0, NULL, false)), NULL, false));
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_mul(y1, y1), 0, NULL, false)), NULL, false));
    for (int i = 0; i < 2; i++) ASSERT(test_max_rel(td_grad_of(p[0][i]), td_grad_of(p[1][i])) <= 1e-12);
    td_scope_end();
}

/* one output (dy [M, 1]: dy^T has a row stride of 1, below BLAS's ld >= K) and a strided x, as
** F.linear(x[:, -1], w[1, K]) gives: against a double loop on the host */
TEST(one_output_strided_cpu) {
    td_scope_begin();
    enum { M = 32, T = 8, K = 16 };
    td_tensor *x3 = td_randn(3, (int64_t[]){M, T, K}, 6, 0, TD_F32, TD_CPU);
    td_tensor *x = ASSERT_TENSOR(td_select(x3, 1, T - 1)), *dy = td_randn(2, (int64_t[]){M, 1}, 7, 0, TD_F32, TD_CPU);
    td_tensor *dw = NULL, *db = NULL;
    ASSERT_OK(td__linear_wgrad(dy, x, true, &dw, &db));
    float hx[M * T * K], hdy[M], hw[K];
    ASSERT_OK(td_copy_to_host(x3, hx, sizeof hx, TD_F32));
    ASSERT_OK(td_copy_to_host(dy, hdy, sizeof hdy, TD_F32));
    ASSERT_OK(td_copy_to_host(dw, hw, sizeof hw, TD_F32));
    for (int k = 0; k < K; k++) {
        double want = 0;
        for (int m = 0; m < M; m++) want += (double)hdy[m] * hx[(m * T + T - 1) * K + k];
        ASSERT_NEAR(hw[k], want, 1e-4 * (1 + fabs(want)));
    }
    td_scope_end();
}

/* f32 dw, db of dt (f16/bf16) dy [M, N] and x [M, K] on dev against the f32 MATMUL and SUM of the operands
** widened to f32, within tol (rel; 1e-4: the H100's tensor cores sum K = 1024 half products to within 7e-5), and
** their bf16/f16-rounded value at least 3 tol away (a half result would fail); wide_ok false: the backend declines
** (Vulkan), so the results are the half op's, cast: within 2e-2 */
static void check_wide(td_device dev, td_dtype dt, int64_t M, int64_t N, int64_t K, bool wide_ok) {
    td_scope_begin();
    td_tensor *dy = ASSERT_TENSOR(td_to(td_randn(2, (int64_t[]){M, N}, 11, 0, dt, TD_CPU), dev));
    td_tensor *x = ASSERT_TENSOR(td_to(td_randn(2, (int64_t[]){M, K}, 12, 0, dt, TD_CPU), dev));
    td_tensor *dw = NULL, *db = NULL, *only_w = NULL;
    ASSERT_OK(td__linear_wgrad_to(dy, x, true, TD_F32, &dw, &db));
    ASSERT_OK(td__linear_wgrad_to(dy, x, false, TD_F32, &only_w, NULL));
    ASSERT(td_tensor_dtype(dw) == TD_F32 && td_tensor_dtype(db) == TD_F32 && td_tensor_dtype(only_w) == TD_F32);
    td_tensor *dy32 = td_cast(td_to(dy, TD_CPU), TD_F32), *x32 = td_cast(td_to(x, TD_CPU), TD_F32);
    int rows = 0;
    td_tensor *rw = ASSERT_TENSOR(td_matmul(td_transpose(dy32, 0, 1), x32)),
              *rb = ASSERT_TENSOR(td_sum(dy32, 1, &rows, false));
    double tol = wide_ok ? 1e-4 : 2e-2;
    double ew = test_max_rel(dw, rw), eb = test_max_rel(db, rb), e1 = test_max_rel(only_w, rw);
    double rounded = test_max_rel(td_cast(td_cast(rw, dt), TD_F32), rw);
    fprintf(stderr, "  %s -> f32 [%lld,%lld]x[%lld,%lld]: dw %.3g, db %.3g, dw alone %.3g (rounded to %s: %.3g)\n",
            td_dtype_name(dt), (long long)M, (long long)N, (long long)M, (long long)K, ew, eb, e1, td_dtype_name(dt),
            rounded);
    ASSERT(ew <= tol && eb <= tol && e1 <= tol);
    if (wide_ok) ASSERT(rounded >= 3 * tol);
    td_scope_end();
}

static void wide_all(td_device dev, bool wide_ok) {
    const td_dtype dts[2] = {TD_BF16, TD_F16};
    for (int i = 0; i < 2; i++) {
        check_wide(dev, dts[i], 256, 64, 96, wide_ok);
        check_wide(dev, dts[i], 1024, 96, 48, wide_ok);
        /* odd: CUDA's Lt may have no BGRADB algorithm (unaligned): declined there, then cast */
        check_wide(dev, dts[i], 37, 7, 9, wide_ok && dev.type == TD_DEVICE_CPU);
    }
}

TEST(wide_outputs_cpu) {
    wide_all(TD_CPU, true);
    td_scope_begin(); /* f32 out of f32 dy is the plain op; a narrower or other dtype is a one-line error */
    td_tensor *dy = td_randn(2, (int64_t[]){8, 4}, 1, 0, TD_F32, TD_CPU),
              *x = td_randn(2, (int64_t[]){8, 3}, 2, 0, TD_F32, TD_CPU);
    td_tensor *dw = NULL, *db = NULL;
    ASSERT_OK(td__linear_wgrad_to(dy, x, true, TD_F32, &dw, &db));
    ASSERT(td_tensor_dtype(dw) == TD_F32 && td_tensor_dtype(db) == TD_F32);
    ASSERT(td__linear_wgrad_to(dy, x, true, TD_BF16, &dw, &db) == TD_ERR_DTYPE);
    ASSERT(strstr(td_last_error(), "linear_wgrad: gradients of bfloat16 for dy of float32"));
    ASSERT(td__linear_wgrad_to(td_cast(dy, TD_BF16), td_cast(x, TD_BF16), true, TD_F64, &dw, &db) == TD_ERR_DTYPE);
    td_clear_error();
    td_scope_end();
}

TEST(wide_outputs_cuda) { wide_all(test_device_or_skip("cuda:0"), true); }

TEST(wide_outputs_vulkan) { wide_all(test_device_or_skip("vulkan:0"), false); }

TEST_MAIN(TESTS)
