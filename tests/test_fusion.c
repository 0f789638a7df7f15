/*
** Fusions against the unfused ops they replace, in f32 on cpu, vulkan:0 and
** cuda:0 (skipped when absent), forward and gradients, within fp32 tolerance:
**   add_layer_norm: td_add_layer_norm(x, r) vs td_layer_norm(td_add(x, r)) and
**                   the sum; gradients of x, r, weight and bias;
**   linear_gelu:    td_linear_gelu(x, w, b) vs td_gelu(td_linear(x, w, b)),
**                   erf and tanh forms, with and without the bias; gradients
**                   of x, w and b; and the LinearGELU layer against Linear
**                   then GELU with its parameters (state dict names kept);
**   classifier:     cross-entropy from the logits (CROSS_ENTROPY, whose
**                   backward recomputes the softmax instead of keeping one) vs
**                   -mean(gather(log_softmax(logits), target)); dlogits.
** Inputs from a printed seed (TD_TEST_SEED).
*/
#include "runner.h"
#include "test_util.h"

static td_tensor *leaf(td_device dev, int ndim, const int64_t *shape, double lo, double hi) {
    td_tensor *t = test_uniform_tensor(ndim, shape, lo, hi, TD_F32, dev);
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* a and b elementwise within 1e-5 absolute + 1e-5 relative */
static void assert_close(td_tensor *a, td_tensor *b, const char *what) {
    ASSERT_EQ_INT(td_numel(a), td_numel(b));
    double *x = test_host(a), *y = test_host(b), worst = 0;
    for (int64_t i = 0; i < td_numel(a); i++) {
        double d = fabs(x[i] - y[i]) / (1e-5 + 1e-5 * fabs(y[i]));
        worst = d > worst ? d : worst;
        if (!(d <= 1)) TEST_FAIL_("%s: element %lld: fused %.9g vs unfused %.9g", what, (long long)i, x[i], y[i]);
    }
    printf("  %s: worst error %.3g of the tolerance\n", what, worst);
    free(x), free(y);
}

static void grads_of(td_tensor *loss, int n, td_tensor **params, td_tensor **out) {
    ASSERT_OK(td_grad(1, &loss, NULL, n, params, out, false, false, false));
}

static void add_layer_norm(const char *spec) {
    test_seed();
    td_device dev = test_device_or_skip(spec);
    td_scope_begin();
    int64_t s3[3] = {3, 5, 96}, sd[1] = {96};
    td_tensor *x = leaf(dev, 3, s3, -2, 2), *r = leaf(dev, 3, s3, -2, 2);
    td_tensor *w = leaf(dev, 1, sd, 0.5, 1.5), *b = leaf(dev, 1, sd, -0.5, 0.5), *p[4] = {x, r, w, b};
    td_tensor *up = leaf(dev, 3, s3, -1, 1), *us = leaf(dev, 3, s3, -1, 1); /* weights of y and s in the loss */
    td_tensor *s = NULL;
    td_tensor *y = ASSERT_TENSOR(td_add_layer_norm(x, r, 1, w, b, 1e-5, &s));
    td_tensor *s0 = ASSERT_TENSOR(td_add(x, r)), *y0 = ASSERT_TENSOR(td_layer_norm(s0, 1, w, b, 1e-5));
    assert_close(y, y0, "y");
    assert_close(s, s0, "s");
    td_tensor *g[4], *g0[4];
    grads_of(ASSERT_TENSOR(td_sum(td_add(td_mul(y, up), td_mul(s, us)), 0, NULL, false)), 4, p, g);
    grads_of(ASSERT_TENSOR(td_sum(td_add(td_mul(y0, up), td_mul(s0, us)), 0, NULL, false)), 4, p, g0);
    static const char *names[4] = {"dx", "dr", "dw", "db"};
    for (int i = 0; i < 4; i++) assert_close(g[i], g0[i], names[i]);
    td_scope_end();
}

static void linear_gelu(const char *spec) {
    test_seed();
    td_device dev = test_device_or_skip(spec);
    td_scope_begin();
    int64_t sx[3] = {3, 5, 24}, sw[2] = {40, 24}, sb[1] = {40}, sy[3] = {3, 5, 40};
    td_tensor *x = leaf(dev, 3, sx, -1, 1), *w = leaf(dev, 2, sw, -0.5, 0.5), *b = leaf(dev, 1, sb, -1, 1);
    td_tensor *up = leaf(dev, 3, sy, -1, 1); /* weights of y in the loss */
    static const char *names[3] = {"dx", "dw", "db"};
    for (int form = 0; form < 4; form++) {
        bool tanh_form = form & 1;
        td_tensor *bias = form & 2 ? NULL : b, *p[3] = {x, w, b}, *g[3], *g0[3];
        printf("  %s form, %s\n", tanh_form ? "tanh" : "erf", bias ? "bias" : "no bias");
        td_tensor *y = ASSERT_TENSOR(td_linear_gelu(x, w, bias, tanh_form));
        td_tensor *y0 = ASSERT_TENSOR(td_gelu(td_linear(x, w, bias), tanh_form));
        assert_close(y, y0, "y");
        int np = bias ? 3 : 2;
        grads_of(ASSERT_TENSOR(td_sum(td_mul(y, up), 0, NULL, false)), np, p, g);
        grads_of(ASSERT_TENSOR(td_sum(td_mul(y0, up), 0, NULL, false)), np, p, g0);
        for (int i = 0; i < np; i++) assert_close(g[i], g0[i], names[i]);
    }
    /* the layer: LinearGELU's parameters load into Linear (same names), outputs agree */
    td_module *fused = td_linear_gelu_new(24, 40, true, false), *lin = td_linear_new(24, 40, true);
    td_module *act = td_gelu_new(false);
    ASSERT(fused && lin && act);
    ASSERT_OK(td_module_to(fused, dev));
    ASSERT_OK(td_module_to(lin, dev));
    td_named_tensors *sd = td_module_state_dict(fused);
    ASSERT(sd);
    ASSERT_OK(td_module_load_state_dict(lin, sd, true));
    td_named_tensors_free(sd);
    td_tensor *y = ASSERT_TENSOR(td_module_forward(fused, x));
    td_tensor *y0 = ASSERT_TENSOR(td_module_forward(act, td_module_forward(lin, x)));
    assert_close(y, y0, "LinearGELU layer");
    td_module_free(fused), td_module_free(lin), td_module_free(act);
    td_scope_end();
}

static void classifier(const char *spec) {
    test_seed();
    td_device dev = test_device_or_skip(spec);
    td_scope_begin();
    int64_t sl[2] = {37, 256}, st[1] = {37}, ids[37];
    for (int i = 0; i < 37; i++) ids[i] = test_int(256);
    td_tensor *logits = leaf(dev, 2, sl, -4, 4), *target = ASSERT_TENSOR(td_from_data(ids, 1, st, TD_I64, dev));
    td_tensor *fused = ASSERT_TENSOR(td_cross_entropy_loss(logits, target, NULL, -100, 0, TD_REDUCE_MEAN));
    td_tensor *picked = td_gather(td_log_softmax(logits, 1), 1, td_unsqueeze(target, 1));
    td_tensor *unfused = ASSERT_TENSOR(td_neg(td_mean(picked, 0, NULL, false)));
    assert_close(fused, unfused, "loss");
    td_tensor *g, *g0;
    grads_of(fused, 1, &logits, &g);
    grads_of(unfused, 1, &logits, &g0);
    assert_close(g, g0, "dlogits");
    td_scope_end();
}

/* one TEST per backend, NAME_cpu, NAME_vulkan and NAME_cuda, each running NAME(device) */
#define ON_EACH_DEVICE(NAME)                                                                                           \
    TEST(NAME##_cpu) { NAME("cpu"); }                                                                                  \
    TEST(NAME##_vulkan) { NAME("vulkan:0"); }                                                                          \
    TEST(NAME##_cuda) { NAME("cuda:0"); }
ON_EACH_DEVICE(add_layer_norm)
ON_EACH_DEVICE(linear_gelu)
ON_EACH_DEVICE(classifier)

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(add_layer_norm_cpu) X(add_layer_norm_vulkan) X(add_layer_norm_cuda)                                              \
    X(linear_gelu_cpu) X(linear_gelu_vulkan) X(linear_gelu_cuda)                                                       \
    X(classifier_cpu) X(classifier_vulkan) X(classifier_cuda)
/* clang-format on */
TEST_MAIN(TESTS)
