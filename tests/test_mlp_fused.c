/* td_mlp_gelu, the GELU MLP as one autograd node (its backward's input
** gradient through fc2 and the GELU is one LINEAR_DGELU op): forward and every
** gradient against the composed ops (linear, gelu, linear, add) on each
** device, f64 gradcheck on the CPU, autocast, bad input, and W3's loss curve
** with and without the node (TRIDENT_MLP_NODE). LINEAR_DGELU itself is in the
** conformance table (tests/op_cases.h). */
#include <stdlib.h>

#include "test_util.h"
#include "trident/amp.h"
#include "workloads/workloads.h"

#define TESTS(X)                                                                                                       \
    X(matches_composed_cpu)                                                                                            \
    X(matches_composed_vulkan)                                                                                         \
    X(matches_composed_cuda) X(gradcheck_cpu) X(autocast_cpu) X(autocast_cuda) X(bad_input) X(w3_loss_curve_cpu)

enum { K = 24, H = 40, N = 16 }; /* in, hidden (not a multiple of 8 on purpose in one case), out */

/* operands: x [2, 5, K], w1 [hid, K], b1 [hid], w2 [N, hid], b2 [N], r [2, 5, N] */
enum { X_, W1, B1, W2, B2, R_, NOPS };

static td_tensor *composed(td_tensor *const *t, bool tanh_form) {
    td_tensor *y = td_linear(td_gelu(td_linear(t[X_], t[W1], t[B1]), tanh_form), t[W2], t[B2]);
    return t[R_] ? td_add(y, t[R_]) : y;
}

static td_tensor *fused(td_tensor *const *t, bool tanh_form) {
    return td_mlp_gelu(t[X_], t[W1], t[B1], t[W2], t[B2], t[R_], tanh_form);
}

/* Operands of dt on dev, seeded alike for both runs; absent ones (mask bit clear for B1, B2, R_) NULL. */
static void make(td_tensor **t, int64_t hid, unsigned present, td_dtype dt, td_device dev) {
    int64_t shapes[NOPS][3] = {{2, 5, K}, {hid, K}, {hid}, {N, hid}, {N}, {2, 5, N}};
    int nd[NOPS] = {3, 2, 1, 2, 1, 3};
    double scale[NOPS] = {1, 0.5, 1, 0.3, 0.5, 1};
    for (int i = 0; i < NOPS; i++) {
        t[i] = NULL;
        if ((i == B1 || i == B2 || i == R_) && !(present & (1u << i))) continue;
        td_tensor *c = td_mul_scalar(td_randn(nd[i], shapes[i], 100 + (uint64_t)i, 0, TD_F32, TD_CPU), scale[i]);
        t[i] = td_keep(ASSERT_TENSOR(td_to(td_cast(c, dt), dev)));
        ASSERT_OK(td_set_requires_grad(t[i], true));
    }
}

static void release_all(td_tensor **t) {
    for (int i = 0; i < NOPS; i++) td_release(t[i]);
}

/* max |a - b| / max |b|: the error normalized by the tensor's scale (a bf16 weight gradient sums products that
** cancel, so elementwise relative errors of small entries say little) */
static double norm_err(td_tensor *a, td_tensor *b) {
    ASSERT_EQ_INT(td_numel(a), td_numel(b));
    double *x = test_host(a), *y = test_host(b), d = 0, m = 0;
    for (int64_t i = 0; i < td_numel(b); i++) d = fmax(d, fabs(x[i] - y[i])), m = fmax(m, fabs(y[i]));
    free(x), free(y);
    return m > 0 ? d / m : d;
}

/* sum(y * g) for a fixed g of y's shape: dy = g */
static td_tensor *loss_of(td_tensor *y) {
    td_tensor *g = td_randn(td_ndim(y), td_shape(y), 99, 0, TD_F32, TD_CPU);
    g = td_to(td_cast(g, td_tensor_dtype(y)), td_tensor_device(y));
    return ASSERT_TENSOR(td_sum(td_mul(y, g), 0, NULL, false));
}

/* forward and the gradients of every operand: fused vs composed, within tol (norm_err) */
static void check_one(td_device dev, td_dtype dt, int64_t hid, unsigned present, bool tanh_form, double tol) {
    td_scope_begin();
    td_tensor *a[NOPS], *b[NOPS];
    make(a, hid, present, dt, dev);
    make(b, hid, present, dt, dev);
    td_tensor *ya = ASSERT_TENSOR(fused(a, tanh_form)), *yb = ASSERT_TENSOR(composed(b, tanh_form));
    ASSERT_EQ_INT(td_ndim(ya), 3);
    ASSERT_EQ_INT(td_size(ya, 2), N);
    ASSERT_OK(td_backward(loss_of(ya), NULL, false));
    ASSERT_OK(td_backward(loss_of(yb), NULL, false));
    double worst = norm_err(ya, yb);
    for (int i = 0; i < NOPS; i++) {
        if (!a[i]) continue;
        double e = norm_err(ASSERT_TENSOR(td_grad_of(a[i])), ASSERT_TENSOR(td_grad_of(b[i])));
        if (e > worst) worst = e;
        if (e > tol) printf("  operand %d: gradient error %.3g\n", i, e);
    }
    printf("  %s hid %lld present 0x%x %s: max rel err %.3g (tol %.3g)\n", td_dtype_name(dt), (long long)hid, present,
           tanh_form ? "tanh" : "erf", worst, tol);
    ASSERT(worst <= tol);
    release_all(a);
    release_all(b);
    td_scope_end();
}

static void check_device(td_device dev, const td_dtype *dts, int n_dts) {
    unsigned all = (1u << B1) | (1u << B2) | (1u << R_);
    for (int k = 0; k < n_dts; k++) {
        double tol = dts[k] == TD_F32 ? 1e-5 : dts[k] == TD_F64 ? 1e-12 : 3e-2;
        for (int tf = 0; tf < 2; tf++) {
            check_one(dev, dts[k], H, all, tf, tol);
            check_one(dev, dts[k], 33, 1u << R_, tf, tol); /* hidden 33: no DGELU epilogue on CUDA, no biases */
            check_one(dev, dts[k], H, (1u << B1) | (1u << B2), tf, tol); /* no residual */
        }
    }
}

TEST(matches_composed_cpu) { check_device(TD_CPU, (td_dtype[]){TD_F32, TD_BF16, TD_F64}, 3); }

TEST(matches_composed_vulkan) { check_device(test_device_or_skip("vulkan:0"), (td_dtype[]){TD_F32}, 1); }

TEST(matches_composed_cuda) { check_device(test_device_or_skip("cuda:0"), (td_dtype[]){TD_F32, TD_BF16, TD_F16}, 3); }

static td_tensor *mlp_fn(void *user, int n, td_tensor *const *in) {
    (void)n;
    return fused(in, *(bool *)user);
}

/* f64 central differences of every operand, both GELU forms; second derivatives too */
TEST(gradcheck_cpu) {
    for (int tf = 0; tf < 2; tf++) {
        td_scope_begin();
        td_tensor *t[NOPS];
        make(t, 12, (1u << B1) | (1u << B2) | (1u << R_), TD_F64, TD_CPU);
        bool tanh_form = tf;
        ASSERT_OK(td_gradcheck(mlp_fn, &tanh_form, NOPS, t, NULL));
        ASSERT_OK(td_gradgradcheck(mlp_fn, &tanh_form, NOPS, t, NULL, NULL)); /* create_graph's composed backward */
        release_all(t);
        td_scope_end();
    }
}

/* Under a bf16 autocast scope on dev: y takes the float32 residual's dtype, as the composed ops' add does, and
** float32 leaves get float32 gradients close to the composed ones (b1's from LINEAR_DGELU's db, in f32: on CUDA
** the erf form's sum in the gelu' pass, the tanh form's after the DGELU epilogue; hidden H and 64, a multiple of 8
** that takes the epilogue and the 16-byte loads). */
static void autocast_on(td_device dev, bool tanh_form, int64_t hid) {
    td_scope_begin();
    td_tensor *a[NOPS], *b[NOPS];
    unsigned all = (1u << B1) | (1u << B2) | (1u << R_);
    make(a, hid, all, TD_F32, dev);
    make(b, hid, all, TD_F32, dev);
    ASSERT_OK(td_autocast_begin(dev.type, TD_BF16));
    td_tensor *ya = ASSERT_TENSOR(fused(a, tanh_form)), *yb = ASSERT_TENSOR(composed(b, tanh_form));
    ASSERT_EQ_INT(td_tensor_dtype(ASSERT_TENSOR(td_linear(b[X_], b[W1], b[B1]))), TD_BF16); /* the scope casts */
    ASSERT_OK(td_autocast_end());
    ASSERT_EQ_INT(td_tensor_dtype(ya), TD_F32);
    ASSERT_OK(td_backward(loss_of(ya), NULL, false));
    ASSERT_OK(td_backward(loss_of(yb), NULL, false));
    ASSERT(norm_err(ya, yb) <= 3e-2);
    for (int i = 0; i < NOPS; i++) {
        td_tensor *g = ASSERT_TENSOR(td_grad_of(a[i]));
        ASSERT_EQ_INT(td_tensor_dtype(g), TD_F32);
        double e = norm_err(g, ASSERT_TENSOR(td_grad_of(b[i])));
        printf("  %s hid %lld operand %d: %.3g\n", tanh_form ? "tanh" : "erf", (long long)hid, i, e);
        ASSERT(e <= 3e-2);
    }
    release_all(a);
    release_all(b);
    td_scope_end();
}

TEST(autocast_cpu) { autocast_on(TD_CPU, true, H); }

TEST(autocast_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    for (int tf = 0; tf < 2; tf++) {
        autocast_on(dev, tf, H);
        autocast_on(dev, tf, 64);
    }
}

TEST(bad_input) {
    td_scope_begin();
    td_tensor *x = td_zeros(2, (int64_t[]){4, K}, TD_F32, TD_CPU), *w1 = td_zeros(2, (int64_t[]){H, K}, TD_F32, TD_CPU);
    td_tensor *w2 = td_zeros(2, (int64_t[]){N, H + 1}, TD_F32, TD_CPU),
              *b2 = td_zeros(1, (int64_t[]){N + 1}, TD_F32, TD_CPU);
    ASSERT(!td_mlp_gelu(x, w1, NULL, w2, NULL, NULL, true));
    ASSERT_EQ_INT(td_last_status(), TD_ERR_SHAPE);
    ASSERT(strstr(td_last_error(), "mlp_gelu"));
    w2 = td_zeros(2, (int64_t[]){N, H}, TD_F32, TD_CPU);
    ASSERT(!td_mlp_gelu(x, w1, NULL, w2, b2, NULL, true));
    ASSERT_EQ_INT(td_last_status(), TD_ERR_SHAPE);
    ASSERT(!td_mlp_gelu(td_zeros(2, (int64_t[]){4, K + 1}, TD_F32, TD_CPU), w1, NULL, w2, NULL, NULL, true));
    ASSERT(!td_mlp_gelu(NULL, w1, NULL, w2, NULL, NULL, true)); /* NULL propagates */
    ASSERT(!td_mlp_gelu(x, w1, NULL, td_cast(w2, TD_F64), NULL, NULL, true));
    ASSERT(td_mlp_gelu(x, w1, NULL, w2, NULL, NULL, true));
    td_scope_end();
}

/* W3 (small) trained a few steps on the CPU with the MLP node and without: the same losses */
static void losses(bool gpt2, bool node, double *out, int steps) {
    if (node)
        unsetenv("TRIDENT_MLP_NODE");
    else
        setenv("TRIDENT_MLP_NODE", "0", 1);
    workload_gpt_config cfg = {.vocab = 64, .d_model = 32, .heads = 2, .layers = 2, .context = 16, .gpt2 = gpt2};
    td_manual_seed(7);
    workload w;
    ASSERT_OK(workload_init(&w, WORKLOAD_GPT, &cfg, TD_CPU, NULL, 1e-2, false));
    int64_t ids[4 * 16], tg[4 * 16];
    for (int i = 0; i < 4 * 16; i++) ids[i] = (i * 7 + 3) % 64, tg[i] = (i * 5 + 1) % 64;
    td_scope_begin();
    td_tensor *x = td_from_data(ids, 2, (int64_t[]){4, 16}, TD_I64, TD_CPU);
    td_tensor *y = td_from_data(tg, 2, (int64_t[]){4, 16}, TD_I64, TD_CPU);
    for (int s = 0; s < steps; s++) ASSERT_OK(workload_train_step(&w, x, y, &out[s]));
    td_scope_end();
    workload_free(&w);
    unsetenv("TRIDENT_MLP_NODE");
}

TEST(w3_loss_curve_cpu) {
    enum { STEPS = 4 };
    for (int g = 0; g < 2; g++) {
        double a[STEPS], b[STEPS];
        losses(g, true, a, STEPS);
        losses(g, false, b, STEPS);
        for (int s = 0; s < STEPS; s++) {
            printf("  %s step %d: node %.9f ops %.9f\n", g ? "gpt2 (tanh)" : "gpt-mini (erf)", s, a[s], b[s]);
            ASSERT(fabs(a[s] - b[s]) <= 1e-5);
        }
        ASSERT(a[STEPS - 1] < a[0]); /* it trains */
    }
}

TEST_MAIN(TESTS)
