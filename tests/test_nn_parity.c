/* Parity with PyTorch: modules (forward, input and parameter gradients, buffers),
** losses, 5 steps of each optimizer, schedulers, clipping, and a 3-step W1 run.
** References come from tests/fixtures/gen_nn_fixtures.py (torch 1.13, float64
** unless noted); each check is |got - want| <= atol + rtol |want|. */
#include "tdfx.h"
#include "test_util.h"

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(linear)                                                                                                          \
    X(linear_nobias)                                                                                                   \
    X(conv2d) X(conv2d_groups) X(conv1d) X(maxpool2d) X(avgpool2d) X(adaptive_avgpool2d) X(flatten) X(unflatten)       \
        X(batchnorm1d) X(batchnorm2d) X(layernorm) X(embedding) X(mha) X(activations) X(sequential) X(losses)          \
            X(optimizers) X(schedulers) X(clipping) X(w1_mlp_three_steps)
/* clang-format on */

#define ATOL 1e-5
#define RTOL 1e-5

static tdfx *fx;

static tdfx *fixtures(void) {
    if (!fx) fx = tdfx_open("nn_parity.tdfx");
    if (!fx) TEST_FAIL_("fixtures missing");
    return fx;
}

static td_tensor *fxt(const char *fmt, const char *a, const char *b) {
    char name[256];
    snprintf(name, sizeof name, fmt, a, b);
    return tdfx_tensor(fixtures(), name);
}

static td_tensor *need(td_tensor *t, const char *what) {
    if (!t) TEST_FAIL_("fixture tensor %s is missing", what);
    return t;
}

/* Compare got with want elementwise; print the first mismatches and the max difference. */
static void check_close(td_tensor *got, td_tensor *want, double atol, double rtol, const char *what) {
    if (!got) TEST_FAIL_("%s: no result", what);
    int64_t n = td_numel(want);
    if (td_numel(got) != n || td_ndim(got) != td_ndim(want))
        TEST_FAIL_("%s: %lld elements in %d dims, want %lld in %d", what, (long long)td_numel(got), td_ndim(got),
                   (long long)n, td_ndim(want));
    for (int d = 0; d < td_ndim(want); d++)
        if (td_size(got, d) != td_size(want, d)) TEST_FAIL_("%s: size %d differs", what, d);
    double *g = malloc((size_t)n * 8 + 8), *w = malloc((size_t)n * 8 + 8);
    ASSERT(g && w);
    ASSERT_OK(td_copy_to_host(got, g, (size_t)n * 8, TD_F64));
    ASSERT_OK(td_copy_to_host(want, w, (size_t)n * 8, TD_F64));
    double maxd = 0;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(g[i] - w[i]);
        if (d > maxd || isnan(d)) maxd = isnan(d) ? INFINITY : d;
        if (!(d <= atol + rtol * fabs(w[i])) && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: got %.9g want %.9g\n", what, (long long)i, g[i], w[i]);
    }
    free(g);
    free(w);
    if (bad) TEST_FAIL_("%s: %d of %lld elements differ, max |diff| %.3g", what, bad, (long long)n, maxd);
}

/* The entries named "<prefix><key>", as a state dict keyed by <key>. */
static td_named_tensors *dict_with_prefix(const char *prefix) {
    tdfx *f = fixtures();
    td_named_tensors *sd = td_named_tensors_new();
    size_t len = strlen(prefix);
    for (int i = 0; i < f->n; i++)
        if (!strncmp(f->e[i].name, prefix, len))
            ASSERT_OK(td_named_tensors_add(sd, f->e[i].name + len, ASSERT_TENSOR(tdfx_tensor(f, f->e[i].name))));
    return sd;
}

/* Load <case>.s.*, run forward and backward, compare output, gradients and buffers. */
static void module_parity(const char *name, td_module *m, double tol) {
    ASSERT(m);
    td_scope_begin();
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s.s.", name);
    td_named_tensors *sd = dict_with_prefix(prefix);
    ASSERT_OK(td_module_load_state_dict(m, sd, true));
    td_named_tensors_free(sd);
    td_tensor *x = need(fxt("%s.x", name, ""), "x");
    bool float_in = td_dtype_is_float(td_tensor_dtype(x));
    if (float_in) ASSERT_OK(td_set_requires_grad(x, true));
    td_tensor *y = ASSERT_TENSOR(td_module_forward(m, x));
    check_close(y, need(fxt("%s.y", name, ""), "y"), tol, tol, "y");
    ASSERT_OK(td_backward(y, need(fxt("%s.gy", name, ""), "gy"), false));
    if (float_in) check_close(td_grad_of(x), need(fxt("%s.dx", name, ""), "dx"), tol, tol, "dx");
    tdfx *f = fixtures();
    char gp[128], bp[128];
    snprintf(gp, sizeof gp, "%s.g.", name);
    snprintf(bp, sizeof bp, "%s.b.", name);
    for (int i = 0; i < f->n; i++) {
        const char *key = f->e[i].name;
        bool is_grad = !strncmp(key, gp, strlen(gp)), is_buf = !strncmp(key, bp, strlen(bp));
        if (!is_grad && !is_buf) continue;
        const char *pname = key + (is_grad ? strlen(gp) : strlen(bp));
        td_tensor *p = ASSERT_TENSOR(td_module_get(m, pname));
        check_close(is_grad ? td_grad_of(p) : p, tdfx_tensor(f, key), tol, tol, key);
    }
    td_tensor *xe = fxt("%s.x_eval", name, "");
    if (xe) {
        td_module_eval(m);
        check_close(td_module_forward(m, xe), need(fxt("%s.y_eval", name, ""), "y_eval"), tol, tol, "y_eval");
    }
    td_scope_end();
    td_module_free(m);
}

TEST(linear) { module_parity("linear", td_linear_new(5, 4, true), ATOL); }
TEST(linear_nobias) { module_parity("linear_nobias", td_linear_new(5, 4, false), ATOL); }
TEST(conv2d) {
    td_scope_begin();
    int k[2] = {3, 2}, s[2] = {2, 1}, p[2] = {1, 0};
    module_parity("conv2d", td_conv2d_new(2, 4, k, s, p, NULL, 1, true), ATOL);
    td_scope_end();
}
TEST(conv2d_groups) {
    td_scope_begin();
    int k[2] = {3, 3}, p[2] = {1, 1};
    module_parity("conv2d_groups", td_conv2d_new(4, 4, k, NULL, p, NULL, 2, true), ATOL);
    td_scope_end();
}
TEST(conv1d) { module_parity("conv1d", td_conv1d_new(3, 5, 3, 2, 1, 1, 1, true), ATOL); }
TEST(maxpool2d) {
    td_scope_begin();
    int k[2] = {3, 3}, s[2] = {2, 2}, p[2] = {1, 1};
    module_parity("maxpool2d", td_max_pool2d_new(k, s, p), ATOL);
    td_scope_end();
}
TEST(avgpool2d) {
    td_scope_begin();
    int k[2] = {3, 3}, s[2] = {2, 2}, p[2] = {1, 1};
    module_parity("avgpool2d", td_avg_pool2d_new(k, s, p, true), ATOL);
    td_scope_end();
}
TEST(adaptive_avgpool2d) { module_parity("adaptive_avgpool2d", td_adaptive_avg_pool2d_new(3, 2), ATOL); }
TEST(flatten) { module_parity("flatten", td_flatten_new(1, -1), ATOL); }
TEST(unflatten) { module_parity("unflatten", td_unflatten_new(1, 2, (int64_t[]){3, 4}), ATOL); }
TEST(batchnorm1d) { module_parity("batchnorm1d", td_batch_norm1d_new(4, 1e-5, 0.1, true, true), ATOL); }
TEST(batchnorm2d) { module_parity("batchnorm2d", td_batch_norm2d_new(3, 1e-5, 0.1, true, true), ATOL); }
TEST(layernorm) { module_parity("layernorm", td_layer_norm_new(2, (int64_t[]){4, 5}, 1e-5, true), ATOL); }
TEST(embedding) { module_parity("embedding", td_embedding_new(10, 4), ATOL); }
/* The PyTorch twin wraps the layer as child "attn" of a module that applies a causal mask. */
static td_tensor *mha_wrapper_forward(td_module *self, td_tensor *x) {
    return td_module_forward(td_module_child(self, "attn"), x);
}

TEST(mha) {
    td_scope_begin();
    td_module *w = td_module_new("MHA", mha_wrapper_forward, NULL, NULL);
    ASSERT(w);
    ASSERT_OK(td_module_register_module(w, "attn", td_multihead_attention_new(8, 2, true, true)));
    module_parity("mha", w, 2e-5);
    td_scope_end();
}

TEST(activations) {
    td_scope_begin();
    static const char *names[] = {"relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "softmax", "log_softmax"};
    td_module *mods[] = {td_relu_new(), td_gelu_new(false), td_gelu_new(true), td_silu_new(),
                         td_tanh_new(), td_sigmoid_new(),   td_softmax_new(1), td_log_softmax_new(-1)};
    for (int i = 0; i < 8; i++) {
        fprintf(stderr, "  %s\n", names[i]);
        module_parity(names[i], mods[i], ATOL);
    }
    td_scope_end();
}

TEST(sequential) {
    td_scope_begin();
    td_module *m =
        td_sequential_new(3, (td_module *[]){td_linear_new(6, 5, true), td_relu_new(), td_linear_new(5, 3, true)});
    module_parity("sequential", m, ATOL);
    td_scope_end();
}

/* ---- losses ---- */

static td_tensor *run_loss(const char *n, td_tensor *x, td_tensor *a0, td_tensor *a1, td_tensor *a2) {
    if (!strcmp(n, "mse_mean")) return td_mse_loss(x, a0, TD_REDUCE_MEAN);
    if (!strcmp(n, "mse_sum")) return td_mse_loss(x, a0, TD_REDUCE_SUM);
    if (!strcmp(n, "mse_none")) return td_mse_loss(x, a0, TD_REDUCE_NONE);
    if (!strcmp(n, "l1_mean")) return td_l1_loss(x, a0, TD_REDUCE_MEAN);
    if (!strcmp(n, "ce_mean")) return td_cross_entropy_loss(x, a0, NULL, -100, 0, TD_REDUCE_MEAN);
    if (!strcmp(n, "ce_weight")) return td_cross_entropy_loss(x, a0, a1, -100, 0, TD_REDUCE_MEAN);
    if (!strcmp(n, "ce_ignore")) return td_cross_entropy_loss(x, a0, NULL, -100, 0, TD_REDUCE_MEAN);
    if (!strcmp(n, "ce_smooth")) return td_cross_entropy_loss(x, a0, NULL, -100, 0.1, TD_REDUCE_MEAN);
    if (!strcmp(n, "ce_all")) return td_cross_entropy_loss(x, a0, a1, -100, 0.2, TD_REDUCE_MEAN);
    if (!strcmp(n, "ce_sum")) return td_cross_entropy_loss(x, a0, NULL, -100, 0, TD_REDUCE_SUM);
    if (!strcmp(n, "ce_none")) return td_cross_entropy_loss(x, a0, NULL, -100, 0, TD_REDUCE_NONE);
    if (!strcmp(n, "ce_spatial")) return td_cross_entropy_loss(x, a0, NULL, -100, 0, TD_REDUCE_MEAN);
    if (!strcmp(n, "ce_probs")) return td_cross_entropy_loss(x, a0, NULL, -100, 0.1, TD_REDUCE_MEAN);
    if (!strcmp(n, "nll_weight_ignore")) return td_nll_loss(x, a0, a1, -100, TD_REDUCE_MEAN);
    if (!strcmp(n, "nll_sum")) return td_nll_loss(x, a0, NULL, -100, TD_REDUCE_SUM);
    if (!strcmp(n, "bce_mean")) return td_bce_loss(x, a0, NULL, TD_REDUCE_MEAN);
    if (!strcmp(n, "bce_weight")) return td_bce_loss(x, a0, a1, TD_REDUCE_MEAN);
    if (!strcmp(n, "bcel_mean")) return td_bce_with_logits_loss(x, a0, NULL, NULL, TD_REDUCE_MEAN);
    if (!strcmp(n, "bcel_posw")) return td_bce_with_logits_loss(x, a0, a1, a2, TD_REDUCE_MEAN);
    if (!strcmp(n, "bcel_none")) return td_bce_with_logits_loss(x, a0, NULL, NULL, TD_REDUCE_NONE);
    TEST_FAIL_("no Trident call for loss case %s", n);
}

TEST(losses) {
    static const char *cases[] = {"mse_mean",  "mse_sum",           "mse_none", "l1_mean",  "ce_mean",    "ce_weight",
                                  "ce_ignore", "ce_smooth",         "ce_all",   "ce_sum",   "ce_none",    "ce_spatial",
                                  "ce_probs",  "nll_weight_ignore", "nll_sum",  "bce_mean", "bce_weight", "bcel_mean",
                                  "bcel_posw", "bcel_none"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *n = cases[i];
        fprintf(stderr, "  %s\n", n);
        td_scope_begin();
        td_tensor *x = need(fxt("%s.x", n, ""), "x");
        ASSERT_OK(td_set_requires_grad(x, true));
        td_tensor *y = ASSERT_TENSOR(run_loss(n, x, fxt("%s.a0", n, ""), fxt("%s.a1", n, ""), fxt("%s.a2", n, "")));
        check_close(y, need(fxt("%s.y", n, ""), "y"), ATOL, RTOL, n);
        ASSERT_OK(td_backward(y, td_ndim(y) ? need(fxt("%s.gy", n, ""), "gy") : NULL, false));
        check_close(td_grad_of(x), need(fxt("%s.dx", n, ""), "dx"), ATOL, RTOL, "dx");
        td_scope_end();
    }
}

/* ---- optimizers ---- */

static td_optimizer *make_optim(const char *n, int np, td_tensor **p) {
    td_optim_options o;
    if (!strncmp(n, "sgd", 3)) {
        o = td_sgd_defaults(0.1);
        if (strcmp(n, "sgd")) o.momentum = 0.9;
        if (!strcmp(n, "sgd_nesterov_wd")) o.nesterov = true, o.weight_decay = 0.01;
        if (!strcmp(n, "sgd_dampening_max")) o.dampening = 0.5, o.maximize = true;
        return td_sgd_new(np, p, &o);
    }
    if (!strncmp(n, "adamw", 5)) {
        o = td_adamw_defaults(0.01);
        if (!strcmp(n, "adamw_amsgrad")) o.amsgrad = true, o.weight_decay = 0.1;
        return td_adamw_new(np, p, &o);
    }
    if (!strncmp(n, "adam", 4)) {
        o = td_adam_defaults(0.01);
        if (!strcmp(n, "adam_amsgrad_wd")) o.amsgrad = true, o.weight_decay = 0.1;
        if (!strcmp(n, "adam_max")) o.beta1 = 0.8, o.beta2 = 0.99, o.eps = 1e-6, o.maximize = true;
        return td_adam_new(np, p, &o);
    }
    o = td_rmsprop_defaults(0.01);
    if (!strcmp(n, "rmsprop_momentum")) o.momentum = 0.9, o.weight_decay = 0.01;
    if (!strcmp(n, "rmsprop_centered")) o.momentum = 0.5, o.centered = true, o.alpha = 0.9;
    return td_rmsprop_new(np, p, &o);
}

/* Give p the gradient g through autograd: backward of p * 1 with grad_output g. */
TEST(optimizers) {
    static const char *cases[] = {"sgd",           "sgd_momentum",    "sgd_nesterov_wd",  "sgd_dampening_max",
                                  "adam",          "adam_amsgrad_wd", "adam_max",         "adamw",
                                  "adamw_amsgrad", "rmsprop",         "rmsprop_momentum", "rmsprop_centered"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *n = cases[c];
        fprintf(stderr, "  %s\n", n);
        td_scope_begin();
        td_tensor *p[2];
        for (int i = 0; i < 2; i++) {
            p[i] = need(fxt("optim.p0.%s%s", i ? "1" : "0", ""), "p0");
            ASSERT_OK(td_set_requires_grad(p[i], true));
        }
        td_optimizer *o = make_optim(n, 2, p);
        ASSERT(o);
        for (int k = 0; k < 5; k++) {
            char name[96];
            for (int i = 0; i < 2; i++) {
                snprintf(name, sizeof name, "optim.grad%d.%d", k, i);
                test_set_grad(p[i], need(tdfx_tensor(fixtures(), name), name));
            }
            ASSERT_OK(td_optimizer_step(o));
            for (int i = 0; i < 2; i++) {
                snprintf(name, sizeof name, "%s.step%d.%d", n, k, i);
                check_close(p[i], need(tdfx_tensor(fixtures(), name), name), ATOL, RTOL, name);
            }
        }
        td_optimizer_free(o);
        td_scope_end();
    }
}

TEST(schedulers) {
    static const char *cases[] = {"step", "exp", "cosine", "linear"};
    for (int c = 0; c < 4; c++) {
        td_tensor *p = ASSERT_TENSOR(td_zeros(1, (int64_t[]){1}, TD_F32, TD_CPU));
        ASSERT_OK(td_set_requires_grad(p, true));
        td_optim_options oo = td_sgd_defaults(0.5);
        td_optimizer *o = td_sgd_new(1, &p, &oo);
        td_scheduler *s = c == 0   ? td_step_lr_new(o, 3, 0.5)
                          : c == 1 ? td_exponential_lr_new(o, 0.9)
                          : c == 2 ? td_cosine_annealing_lr_new(o, 10, 0.01)
                                   : td_linear_lr_new(o, 0.1, 1.0, 5);
        ASSERT(s);
        td_scope_begin();
        td_tensor *want = need(fxt("sched.%s%s", cases[c], ""), cases[c]);
        double lrs[12];
        for (int e = 0; e < 12; e++) {
            lrs[e] = td_optimizer_get_lr(o, 0);
            td_scheduler_step(s);
        }
        check_close(ASSERT_TENSOR(td_from_data(lrs, 1, (int64_t[]){12}, TD_F64, TD_CPU)), want, 1e-7, 1e-6, cases[c]);
        td_scope_end();
        td_scheduler_free(s);
        td_optimizer_free(o);
        td_release(p);
    }
}

TEST(clipping) {
    td_scope_begin();
    static const char *cases[] = {"clip_l2", "clip_inf", "clip_l2_noop"};
    static const double norm_type[] = {2, INFINITY, 2}, max_norm[] = {1, 0.5, 100};
    for (int c = 0; c < 3; c++) {
        td_tensor *p[2];
        char name[64];
        for (int i = 0; i < 2; i++) {
            snprintf(name, sizeof name, "%s.g%d", cases[c], i);
            td_tensor *g = need(tdfx_tensor(fixtures(), name), name);
            p[i] = ASSERT_TENSOR(td_zeros_like(g));
            ASSERT_OK(td_set_requires_grad(p[i], true));
            test_set_grad(p[i], g);
        }
        double total = td_clip_grad_norm_(2, p, max_norm[c], norm_type[c]);
        snprintf(name, sizeof name, "%s.norm", cases[c]);
        check_close(ASSERT_TENSOR(td_from_data(&total, 1, (int64_t[]){1}, TD_F64, TD_CPU)),
                    need(tdfx_tensor(fixtures(), name), name), ATOL, RTOL, name);
        for (int i = 0; i < 2; i++) {
            snprintf(name, sizeof name, "%s.out%d", cases[c], i);
            check_close(td_grad_of(p[i]), need(tdfx_tensor(fixtures(), name), name), ATOL, RTOL, name);
        }
    }
    td_scope_end();
}

/* ---- W1: 784-256-256-10 MLP, Adam 1e-3, three steps on a fixed batch of 8 ---- */

TEST(w1_mlp_three_steps) {
    td_scope_begin();
    tdfx *w = tdfx_open("w1_mlp.tdfx");
    ASSERT(w);
    td_module *m = td_sequential_new(5, (td_module *[]){td_linear_new(784, 256, true), td_relu_new(),
                                                        td_linear_new(256, 256, true), td_relu_new(),
                                                        td_linear_new(256, 10, true)});
    ASSERT(m);
    td_named_tensors *sd = td_named_tensors_new();
    static const char *keys[] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
    for (int i = 0; i < 6; i++) ASSERT_OK(td_named_tensors_add(sd, keys[i], ASSERT_TENSOR(tdfx_tensor(w, keys[i]))));
    ASSERT_OK(td_module_load_state_dict(m, sd, true));
    td_named_tensors_free(sd);
    td_tensor *params[6];
    ASSERT_EQ_INT(td_module_parameters(m, params, 6), 6);
    td_optimizer *o = td_adam_new(6, params, NULL);
    ASSERT(o);
    td_tensor *x = ASSERT_TENSOR(tdfx_tensor(w, "x")), *y = ASSERT_TENSOR(tdfx_tensor(w, "y"));
    double losses[3];
    for (int s = 0; s < 3; s++) {
        td_scope_begin();
        td_tensor *loss =
            ASSERT_TENSOR(td_cross_entropy_loss(td_module_forward(m, x), y, NULL, -100, 0, TD_REDUCE_MEAN));
        td_optimizer_zero_grad(o);
        ASSERT_OK(td_backward(loss, NULL, false));
        ASSERT_OK(td_optimizer_step(o));
        losses[s] = td_item(loss);
        fprintf(stderr, "  step %d loss %.7f\n", s, losses[s]);
        td_scope_end();
    }
    check_close(ASSERT_TENSOR(td_from_data(losses, 1, (int64_t[]){3}, TD_F64, TD_CPU)), tdfx_tensor(w, "losses"), 1e-5,
                1e-5, "losses");
    /* Adam's first steps move each weight by about lr * sign(g): allow for gradients at roundoff level */
    check_close(td_module_get(m, "4.weight"), tdfx_tensor(w, "final.4.weight"), 1e-4, 1e-4, "4.weight");
    check_close(td_module_get(m, "4.bias"), tdfx_tensor(w, "final.4.bias"), 1e-4, 1e-4, "4.bias");
    td_optimizer_free(o);
    td_module_free(m);
    tdfx_free(w);
    td_scope_end();
}

TEST_MAIN(TESTS)
