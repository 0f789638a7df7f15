/* The fused linear and classifier paths of issue 22, against their unfused
** twins on the same device:
** - td_linear is one LINEAR op (one autograd node; dw and db by LINEAR_WGRAD):
**   its value and gradients against td_matmul(x, w^T) + b;
** - cross-entropy under autocast keeps f16/bf16 logits as they are (the kernels
**   compute in f32) and returns an f32 loss: the loss and the logits' gradient
**   against cross-entropy of the logits cast to f32 outside autocast. */
#include "test_util.h"

#include "trident/amp.h"

#define TESTS(X)                                                                                                       \
    X(linear_cpu) X(linear_cuda) X(linear_vulkan) X(xent_autocast_cpu) X(xent_autocast_cuda) X(xent_autocast_vulkan)

/* max |a - b| / (|b| + 1e-4 max|b| + floor): a's error in units of b's own size (each rounding of b to a
** low dtype costs at most half its ulp: 2^-9 for bf16, 2^-11 for f16, whose values below its smallest normal,
** floor = 2^-14, lose precision as subnormals) */
static double max_rounding(td_tensor *a, td_tensor *b, double floor) {
    int64_t n = td_numel(b);
    ASSERT_EQ_INT(td_numel(a), n);
    double *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y), worst = 0, big = 0;
    ASSERT(x && y);
    ASSERT_OK(td_copy_to_host(a, x, sizeof *x * (size_t)n, TD_F64));
    ASSERT_OK(td_copy_to_host(b, y, sizeof *y * (size_t)n, TD_F64));
    for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(y[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(x[i] - y[i]) / (fabs(y[i]) + 1e-4 * big + floor));
    free(x), free(y);
    return worst;
}

static td_tensor *leaf(int nd, const int64_t *shape, uint64_t seed, td_dtype dt, td_device dev) {
    td_tensor *t = ASSERT_TENSOR(td_to(td_randn(nd, shape, seed, 0, dt, TD_CPU), dev));
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* y = linear(x[2,T,K], w[N,K], b[N]) and its gradients (x, w, b) against matmul + add */
static void check_linear(td_device dev, td_dtype dt, int64_t T, int64_t N, int64_t K, double tol) {
    td_scope_begin();
    td_tensor *p[2][3];
    for (int k = 0; k < 2; k++) {
        p[k][0] = leaf(3, (int64_t[]){2, T, K}, 1, dt, dev);
        p[k][1] = leaf(2, (int64_t[]){N, K}, 2, dt, dev);
        p[k][2] = leaf(1, (int64_t[]){N}, 3, dt, dev);
    }
    td_tensor *y0 = ASSERT_TENSOR(td_linear(p[0][0], p[0][1], p[0][2]));
    td_tensor *y1 = ASSERT_TENSOR(td_add(td_matmul(p[1][0], td_transpose(p[1][1], 0, 1)), p[1][2]));
    double ey = test_max_rel(y0, y1);
    td_tensor *g = ASSERT_TENSOR(td_to(td_randn(3, (int64_t[]){2, T, N}, 4, 0, dt, TD_CPU), dev));
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_mul(y0, g), 0, NULL, false)), NULL, false));
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_mul(y1, g), 0, NULL, false)), NULL, false));
    double e[3];
    for (int i = 0; i < 3; i++) e[i] = test_max_rel(td_grad_of(p[0][i]), td_grad_of(p[1][i]));
    printf("  %s T %lld N %lld K %lld: y %.3g, dx %.3g, dw %.3g, db %.3g\n", td_dtype_name(dt), (long long)T,
           (long long)N, (long long)K, ey, e[0], e[1], e[2]);
    ASSERT(ey <= tol && e[0] <= tol && e[1] <= tol && e[2] <= tol);
    td_scope_end();
}

TEST(linear_cpu) {
    check_linear(TD_CPU, TD_F64, 5, 7, 9, 1e-12);
    check_linear(TD_CPU, TD_F32, 33, 40, 24, 1e-5);
}

TEST(linear_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    check_linear(dev, TD_F32, 64, 96, 48, 1e-3); /* TF32 may differ between the two GEMM calls */
    check_linear(dev, TD_F32, 33, 7, 9, 1e-3);
    check_linear(dev, TD_BF16, 64, 96, 48, 3e-2);
}

TEST(linear_vulkan) {
    td_device dev = test_device_or_skip("vulkan:0");
    check_linear(dev, TD_F32, 33, 40, 24, 1e-5);
}

/* cross_entropy(logits[N,C] in low, target) under autocast against the f32 logits
** outside it: the loss f32 (not rounded to low), the gradient low; mean and sum */
static void check_xent(td_device dev, td_dtype low, int64_t N, int64_t C) {
    for (int red = 0; red < 2; red++) {
        td_scope_begin();
        td_reduction r = red ? TD_REDUCE_SUM : TD_REDUCE_MEAN;
        td_tensor *x = leaf(2, (int64_t[]){N, C}, 5, low, dev);
        td_tensor *x32 = leaf(2, (int64_t[]){N, C}, 6, TD_F32, dev);
        ASSERT_OK(td_copy_(x32, td_detach(x)));
        int64_t *ids = malloc(sizeof *ids * (size_t)N);
        ASSERT(ids);
        for (int64_t i = 0; i < N; i++) ids[i] = (i * 7919 + 13) % C;
        td_tensor *t = ASSERT_TENSOR(td_from_data(ids, 1, (int64_t[]){N}, TD_I64, dev));
        free(ids);
        ASSERT_OK(td_autocast_begin(dev.type, low));
        td_tensor *l = ASSERT_TENSOR(td_cross_entropy_loss(x, t, NULL, -100, 0.1, r));
        ASSERT_OK(td_autocast_end());
        ASSERT_EQ_INT(td_tensor_dtype(l), TD_F32);
        td_tensor *l32 = ASSERT_TENSOR(td_cross_entropy_loss(x32, t, NULL, -100, 0.1, r));
        ASSERT_OK(td_backward(l, NULL, false));
        ASSERT_OK(td_backward(l32, NULL, false));
        td_tensor *gx = ASSERT_TENSOR(td_grad_of(x));
        ASSERT_EQ_INT(td_tensor_dtype(gx), low);
        double el = test_max_rel(l, l32), eg = max_rounding(gx, td_grad_of(x32), low == TD_F16 ? 0x1p-14 : 0);
        fprintf(stderr, "  %s [%lld,%lld] %s: loss %.3g, dlogits %.3g\n", td_dtype_name(low), (long long)N,
                (long long)C, red ? "sum" : "mean", el, eg);
        ASSERT(el <= 1e-5);                                /* the same f32 math on the same values */
        ASSERT(eg <= (low == TD_BF16 ? 0x1p-7 : 0x1p-10)); /* a rounding or two to low: an ulp, with room */
        td_scope_end();
    }
}

TEST(xent_autocast_cpu) { check_xent(TD_CPU, TD_BF16, 37, 33); }

TEST(xent_autocast_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    check_xent(dev, TD_BF16, 37, 33);
    check_xent(dev, TD_F16, 256, 256);  /* W5's vocabulary: the row in registers */
    check_xent(dev, TD_BF16, 8, 20000); /* online softmax (over 16384 classes) */
}

/* Vulkan has no mixed-dtype loss: the core casts the logits to f32 as before */
TEST(xent_autocast_vulkan) {
    td_device dev = test_device_or_skip("vulkan:0");
    check_xent(dev, TD_BF16, 37, 33);
}

TEST_MAIN(TESTS)
