/*
** Mixed precision (amp.h): autocast's op policy against torch.autocast's
** table, gradients through autocast, its parameter-cast cache, and the
** GradScaler (inf skip and backoff, growth after 2000 clean steps, one host
** read per step). Each case runs on cpu, vulkan:0 and cuda:0 (skipped when
** absent); inputs come from a printed seed (TD_TEST_SEED).
*/
#include "runner.h"
#include "test_util.h"

#include "core/internal.h"

static td_tensor *rnd(td_device dev, int ndim, const int64_t *shape, td_dtype dt) {
    return test_uniform_tensor(ndim, shape, -1, 1, dt, dev);
}

#define DT(expr) td_tensor_dtype(ASSERT_TENSOR(expr))

/* Each op's output dtype inside the scope, as torch.autocast's CUDA lists give
** it (torch/csrc/autograd/autocast_mode.cpp: lower_precision_fp, fp32,
** promote; the rest runs as is). Written out here, not read from the op table. */
static void policy(const char *spec, td_dtype low) {
    test_seed();
    td_device dev = test_device_or_skip(spec);
    td_scope_begin();
    int64_t s2[2] = {4, 8}, sw[2] = {8, 8}, sb[1] = {8}, s4[4] = {2, 3, 6, 6}, sk[4] = {4, 3, 3, 3}, sk1[1] = {4};
    int64_t st[1] = {4};
    td_tensor *x = rnd(dev, 2, s2, TD_F32), *w = rnd(dev, 2, sw, TD_F32), *b = rnd(dev, 1, sb, TD_F32);
    td_tensor *xl = ASSERT_TENSOR(td_cast(x, low)), *x64 = ASSERT_TENSOR(td_cast(x, TD_F64));
    td_tensor *w64 = ASSERT_TENSOR(td_cast(w, TD_F64));
    td_tensor *img = rnd(dev, 4, s4, TD_F32), *k = rnd(dev, 4, sk, TD_F32), *kb = rnd(dev, 1, sk1, TD_F32);
    int64_t tv[4] = {1, 0, 7, 3};
    td_tensor *tgt = ASSERT_TENSOR(td_from_data(tv, 1, st, TD_I64, dev));
    td_tensor *cond = ASSERT_TENSOR(td_gt(x, td_scalar(0, TD_F32, dev)));
    int one[2] = {1, 1}, zero[2] = {0, 0}, last = 1;

    ASSERT_EQ_INT(DT(td_matmul(x, w)), TD_F32); /* no scope yet */
    ASSERT_OK(td_autocast_begin(dev.type, low));
    td_dtype got;
    ASSERT(td_autocast_enabled(dev.type, &got) && got == low);
    /* lower_precision_fp */
    ASSERT_EQ_INT(DT(td_matmul(x, w)), low);
    ASSERT_EQ_INT(DT(td_linear(x, w, b)), low);
    ASSERT_EQ_INT(DT(td_linear_gelu(x, w, b, false)), low); /* linear then gelu: gelu keeps linear's dtype */
    ASSERT_EQ_INT(DT(td_conv2d(img, k, kb, one, zero, one, 1)), low);
    ASSERT_EQ_INT(DT(td_matmul(xl, w)), low);
    ASSERT_EQ_INT(DT(td_matmul(x64, w64)), TD_F64); /* f64 is never cast */
    /* fp32 */
    ASSERT_EQ_INT(DT(td_softmax(xl, -1)), TD_F32);
    ASSERT_EQ_INT(DT(td_softmax(xl, 0)), TD_F32);
    ASSERT_EQ_INT(DT(td_log_softmax(xl, -1)), TD_F32);
    ASSERT_EQ_INT(DT(td_layer_norm(xl, 1, b, b, 1e-5)), TD_F32);
    ASSERT_EQ_INT(DT(td_cross_entropy_loss(xl, tgt, NULL, -100, 0.0, TD_REDUCE_MEAN)), TD_F32);
    ASSERT_EQ_INT(DT(td_sum(xl, 1, &last, false)), TD_F32);
    ASSERT_EQ_INT(DT(td_logsumexp(xl, 1, &last, false)), TD_F32);
    ASSERT_EQ_INT(DT(td_exp(xl)), TD_F32);
    ASSERT_EQ_INT(DT(td_log(xl)), TD_F32);
    ASSERT_EQ_INT(DT(td_rsqrt(xl)), TD_F32);
    ASSERT_EQ_INT(DT(td_pow_scalar(xl, 2)), TD_F32);
    ASSERT_EQ_INT(DT(td_softmax(x64, -1)), TD_F64);
    /* promote */
    ASSERT_EQ_INT(DT(td_add(xl, x)), TD_F32);
    ASSERT_EQ_INT(DT(td_mul(xl, xl)), low);
    ASSERT_EQ_INT(DT(td_add_scalar(xl, 1.5)), low);
    ASSERT_EQ_INT(DT(td_where(cond, xl, x)), TD_F32);
    td_tensor *pair[2] = {xl, x};
    ASSERT_EQ_INT(DT(td_cat(2, pair, 0)), TD_F32);
    /* as is */
    ASSERT_EQ_INT(DT(td_relu(xl)), low);
    ASSERT_EQ_INT(DT(td_gelu(xl, false)), low);
    ASSERT_EQ_INT(DT(td_tanh(xl)), low);
    ASSERT_EQ_INT(DT(td_sqrt(xl)), low);
    ASSERT_EQ_INT(DT(td_mean(xl, 1, &last, false)), low);
    ASSERT_EQ_INT(DT(td_amax(xl, 1, &last, false)), low);
    ASSERT_EQ_INT(DT(td_relu(x)), TD_F32);
    /* a nested scope of the other low dtype wins, and ends */
    td_dtype other = low == TD_BF16 ? TD_F16 : TD_BF16;
    ASSERT_OK(td_autocast_begin(dev.type, other));
    ASSERT_EQ_INT(DT(td_matmul(x, w)), other);
    ASSERT_OK(td_autocast_end());
    ASSERT_EQ_INT(DT(td_matmul(x, w)), low);
    ASSERT_OK(td_autocast_end());
    ASSERT_EQ_INT(DT(td_matmul(x, w)), TD_F32);
    /* a scope for another device type leaves this one alone */
    ASSERT_OK(td_autocast_begin(dev.type == TD_DEVICE_CPU ? TD_DEVICE_CUDA : TD_DEVICE_CPU, low));
    ASSERT_EQ_INT(DT(td_matmul(x, w)), TD_F32);
    ASSERT_OK(td_autocast_end());
    ASSERT_EQ_INT(td_autocast_end(), TD_ERR_MISUSE);
    ASSERT_EQ_INT(td_autocast_begin(dev.type, TD_F32), TD_ERR_MISUSE);
    td_scope_end();
}

/* Values and gradients: y = x @ w in the scope equals the f64 product of the
** low-rounded inputs; w (an f32 leaf) gets an f32 gradient, x^T @ dy, close to
** the f32 one; w's low cast is made once and remade after w is written. */
static void grads(const char *spec, td_dtype low) {
    test_seed();
    td_device dev = test_device_or_skip(spec);
    td_scope_begin();
    int64_t sx[2] = {5, 16}, sw[2] = {16, 6};
    td_tensor *x = rnd(dev, 2, sx, TD_F32), *w = rnd(dev, 2, sw, TD_F32);
    ASSERT_OK(td_set_requires_grad(w, true));
    ASSERT_OK(td_autocast_begin(dev.type, low));
    td_tensor *y = ASSERT_TENSOR(td_matmul(x, w));
    td_tensor *y2 = ASSERT_TENSOR(td_matmul(x, w));
    ASSERT_EQ_INT(td__autocast_cache_size(), 1);
    td_tensor *loss = ASSERT_TENSOR(td_sum(td_add(y, y2), 0, NULL, false));
    ASSERT_EQ_INT(td_tensor_dtype(loss), TD_F32);
    ASSERT_OK(td_autocast_end());
    ASSERT_EQ_INT(td__autocast_cache_size(), 0);
    ASSERT_OK(td_backward(loss, NULL, false));
    td_tensor *g = ASSERT_TENSOR(td_grad_of(w));
    ASSERT_EQ_INT(td_tensor_dtype(g), TD_F32);
    /* reference in f64 of the rounded inputs */
    double *xr = test_host(ASSERT_TENSOR(td_cast(x, low))), *wr = test_host(ASSERT_TENSOR(td_cast(w, low)));
    double *yv = test_host(y), *gv = test_host(g);
    double tol = low == TD_BF16 ? 1e-2 : 2e-3;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 6; j++) {
            double r = 0;
            for (int k = 0; k < 16; k++) r += xr[i * 16 + k] * wr[k * 6 + j];
            ASSERT_NEAR(yv[i * 6 + j], r, tol * (1 + fabs(r)));
        }
    for (int k = 0; k < 16; k++) /* d(sum 2 x@w)/dw = 2 x^T 1 */
        for (int j = 0; j < 6; j++) {
            double r = 0;
            for (int i = 0; i < 5; i++) r += 2 * xr[i * 16 + k];
            ASSERT_NEAR(gv[k * 6 + j], r, tol * (1 + fabs(r)));
        }
    /* writing w makes the cached cast stale */
    ASSERT_OK(td_autocast_begin(dev.type, low));
    td_tensor *a = ASSERT_TENSOR(td_matmul(x, w));
    td_no_grad_begin();
    ASSERT_OK(td_copy_(w, td_mul_scalar(w, 2)));
    td_no_grad_end();
    td_tensor *bb = ASSERT_TENSOR(td_matmul(x, w));
    ASSERT_EQ_INT(td__autocast_cache_size(), 2);
    ASSERT_OK(td_autocast_end());
    double *av = test_host(a), *bv = test_host(bb);
    for (int i = 0; i < 30; i++) ASSERT_NEAR(bv[i], 2 * av[i], 1e-6 * (1 + fabs(av[i])));
    free(xr), free(wr), free(yv), free(gv), free(av), free(bv);
    td_scope_end();
}

/* A tiny model: loss = sum(w * x) over 8 elements, SGD lr 0.1. */
typedef struct tiny {
    td_tensor *w, *x;
    td_optimizer *opt;
} tiny;

static tiny tiny_new(td_device dev, double x_value) {
    int64_t n = 8;
    tiny t;
    td_scope_begin(); /* rnd's host tensor goes with it; w and x are kept */
    t.w = td_keep(rnd(dev, 1, &n, TD_F32));
    t.x = td_keep(ASSERT_TENSOR(td_full(1, &n, x_value, TD_F32, dev)));
    td_scope_end();
    ASSERT_OK(td_set_requires_grad(t.w, true));
    td_optim_options o = td_sgd_defaults(0.1);
    t.opt = td_sgd_new(1, &t.w, &o);
    ASSERT(t.opt);
    return t;
}

static void tiny_free(tiny *t) {
    td_optimizer_free(t->opt);
    td_release(t->w);
    td_release(t->x);
}

/* One scaled step; returns whether it was skipped. */
static bool tiny_step(tiny *t, td_grad_scaler *s) {
    td_scope_begin();
    td_optimizer_zero_grad(t->opt);
    td_tensor *loss = ASSERT_TENSOR(td_sum(td_mul(t->w, t->x), 0, NULL, false));
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_grad_scaler_scale(s, loss)), NULL, false));
    bool skipped;
    ASSERT_OK(td_grad_scaler_step(s, t->opt, &skipped));
    ASSERT_OK(td_grad_scaler_update(s));
    td_scope_end();
    return skipped;
}

/* An inf gradient: the step is skipped (w unchanged), the scale halves; a
** clean step then updates w by -lr * x exactly (unscaled gradient). One host
** read per step on a GPU. */
static void scaler_inf(const char *spec) {
    test_seed();
    td_device dev = test_device_or_skip(spec);
    td_grad_scaler *s = td_grad_scaler_new(NULL);
    ASSERT(s);
    ASSERT_EQ_INT(td_grad_scaler_get_scale(s), 65536);
    tiny t = tiny_new(dev, INFINITY);
    double *w0 = test_host(t.w);
    ASSERT(tiny_step(&t, s));
    double *w1 = test_host(t.w);
    for (int i = 0; i < 8; i++) ASSERT_EQ_INT(w1[i] == w0[i], 1);
    ASSERT_EQ_INT(td_grad_scaler_get_scale(s), 32768);
    ASSERT_EQ_INT(td_grad_scaler_growth_tracker(s), 0);
    free(w0), free(w1);
    tiny_free(&t);
    t = tiny_new(dev, NAN); /* NaN too */
    ASSERT(tiny_step(&t, s));
    ASSERT_EQ_INT(td_grad_scaler_get_scale(s), 16384);
    tiny_free(&t);
    t = tiny_new(dev, 0.375);
    w0 = test_host(t.w);
    int64_t waits = td_host_sync_count();
    ASSERT(!tiny_step(&t, s));
    int64_t per_step = td_host_sync_count() - waits;
    ASSERT_EQ_INT(per_step, dev.type == TD_DEVICE_CPU ? 0 : 1);
    w1 = test_host(t.w);
    for (int i = 0; i < 8; i++) ASSERT_NEAR(w1[i], w0[i] - 0.1 * 0.375, 1e-6);
    ASSERT_EQ_INT(td_grad_scaler_get_scale(s), 16384);
    ASSERT_EQ_INT(td_grad_scaler_growth_tracker(s), 1);
    /* misuse: unscale twice, update without a step */
    td_scope_begin();
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_mul(t.w, t.x), 0, NULL, false)), NULL, false));
    ASSERT_OK(td_grad_scaler_unscale_(s, t.opt));
    ASSERT_EQ_INT(td_grad_scaler_unscale_(s, t.opt), TD_ERR_STATE);
    td_scope_end();
    ASSERT_OK(td_grad_scaler_step(s, t.opt, NULL));
    ASSERT_OK(td_grad_scaler_update(s));
    ASSERT_EQ_INT(td_grad_scaler_update(s), TD_ERR_STATE);
    td_grad_scaler_options bad = td_grad_scaler_defaults();
    bad.backoff_factor = 1;
    ASSERT(!td_grad_scaler_new(&bad));
    /* float16 gradients are refused, as torch's "Attempting to unscale FP16 gradients" */
    td_scope_begin();
    td_tensor *h = ASSERT_TENSOR(td_detach(td_cast(t.w, TD_F16)));
    ASSERT_OK(td_set_requires_grad(h, true));
    td_optimizer *oh = td_sgd_new(1, &h, &(td_optim_options){.lr = 0.1});
    ASSERT(oh);
    test_set_grad(h, ASSERT_TENSOR(td_full_like(h, 1)));
    ASSERT_EQ_INT(td_grad_scaler_unscale_(s, oh), TD_ERR_DTYPE);
    ASSERT(strstr(td_last_error(), "float16 gradient"));
    td_optimizer_free(oh);
    td_scope_end();
    free(w0), free(w1);
    tiny_free(&t);
    td_grad_scaler_free(s);
}

/* 2000 clean steps in a row double the scale, not 1999; a skip resets the count. */
static void scaler_growth(const char *spec) {
    test_seed();
    td_device dev = test_device_or_skip(spec);
    td_grad_scaler *s = td_grad_scaler_new(NULL);
    ASSERT(s);
    tiny t = tiny_new(dev, 1e-3);
    for (int i = 0; i < 1999; i++) ASSERT(!tiny_step(&t, s));
    ASSERT_EQ_INT(td_grad_scaler_get_scale(s), 65536);
    ASSERT_EQ_INT(td_grad_scaler_growth_tracker(s), 1999);
    ASSERT(!tiny_step(&t, s));
    ASSERT_EQ_INT(td_grad_scaler_get_scale(s), 131072);
    ASSERT_EQ_INT(td_grad_scaler_growth_tracker(s), 0);
    tiny_free(&t);
    td_grad_scaler_free(s);
}

/* master_weights (optim.h): a half parameter whose Adam update runs on its
** float32 master follows the float32 run from the same half gradients
** exactly (master == the f32 parameter, param == it rounded), where the plain
** half update stalls (the step is below half an ulp: lr 1e-3 for bf16, 2e-4
** for f16, parameters in [1, 2)). No host read in a GPU step. The state dict
** carries the master and float32 state; a fresh optimizer loaded from it takes
** the same next step; a master for a run without one, or state of the wrong
** dtype, is a clear error. */
static void master_weights(const char *spec, td_dtype half) {
    test_seed();
    td_device dev = test_device_or_skip(spec);
    td_scope_begin();
    enum { N = 300, STEPS = 20 };
    int64_t n = N;
    double v[N];
    for (int i = 0; i < N; i++) v[i] = test_uniform(1, 2);
    td_tensor *p0 = ASSERT_TENSOR(td_to(test_tensor_f64(v, 1, &n, half), dev));
    td_tensor *p[4]; /* 0 float32, 1 half with a master, 2 plain half, 3 the resumed copy of 1 */
    td_optimizer *opt[4];
    for (int k = 0; k < 4; k++) {
        p[k] = td_keep(ASSERT_TENSOR(td_contiguous(td_add_scalar(td_cast(p0, k ? half : TD_F32), 0))));
        ASSERT_OK(td_set_requires_grad(p[k], true));
        td_optim_options o = td_adam_defaults(half == TD_BF16 ? 1e-3 : 2e-4);
        o.master_weights = k != 2;
        ASSERT(opt[k] = td_adam_new(1, &p[k], &o));
    }
    for (int step = 0; step <= STEPS; step++) {
        for (int i = 0; i < N; i++) v[i] = test_uniform(0.5, 1); /* one sign: the parameters drift */
        td_tensor *g = ASSERT_TENSOR(td_to(test_tensor_f64(v, 1, &n, half), dev));
        for (int k = 0; k < 4; k++) {
            if (step < STEPS ? k == 3 : k == 2) continue; /* 3 joins for the last step; 0-2 check at STEPS */
            test_set_grad(p[k], ASSERT_TENSOR(td_cast(g, td_tensor_dtype(p[k]))));
            int64_t waits = td_host_sync_count();
            ASSERT_OK(td_optimizer_step(opt[k]));
            ASSERT_EQ_INT(td_host_sync_count() - waits, 0);
        }
        if (step != STEPS - 1) continue;
        td_named_tensors *sd = td_optimizer_state_dict(opt[1]);
        ASSERT(sd);
        td_tensor *master = ASSERT_TENSOR(td_named_tensors_get(sd, "state.0.master_param"));
        ASSERT_EQ_INT(td_tensor_dtype(master), TD_F32);
        ASSERT_EQ_INT(td_tensor_dtype(ASSERT_TENSOR(td_named_tensors_get(sd, "state.0.exp_avg"))), TD_F32);
        double *want = test_host(p[0]), *got = test_host(master), *rounded = test_host(td_cast(p[0], half));
        double *param = test_host(p[1]), *plain = test_host(p[2]), *start = test_host(p0);
        int moved = 0;
        for (int i = 0; i < N; i++) {
            ASSERT_NEAR(got[i], want[i], 0);
            ASSERT_NEAR(param[i], rounded[i], 0);
            ASSERT_NEAR(plain[i], start[i], 0);
            moved += param[i] != start[i];
        }
        ASSERT(moved > N * 9 / 10);
        free(want), free(got), free(rounded), free(param), free(plain), free(start);
        ASSERT_OK(td_optimizer_load_state_dict(opt[3], sd));
        td_no_grad_begin();
        ASSERT_OK(td_copy_(p[3], p[1]));
        td_no_grad_end();
        ASSERT_EQ_INT(td_optimizer_load_state_dict(opt[2], sd), TD_ERR_DTYPE); /* float32 state, half there */
        td_named_tensors *bad = td_named_tensors_new();
        ASSERT_OK(td_named_tensors_add(bad, "state.0.master_param", master));
        ASSERT_EQ_INT(td_optimizer_load_state_dict(opt[2], bad), TD_ERR_MISUSE); /* no master there */
        ASSERT(strstr(td_last_error(), "no master copy"));
        td_named_tensors_free(bad);
        bad = td_named_tensors_new();
        ASSERT_OK(td_named_tensors_add(bad, "state.0.exp_avg", td_cast(p[1], half)));
        ASSERT_EQ_INT(td_optimizer_load_state_dict(opt[3], bad), TD_ERR_DTYPE);
        ASSERT(strstr(td_last_error(), "expected float32"));
        td_named_tensors_free(bad);
        td_named_tensors_free(sd);
    }
    for (int k = 1; k < 4; k += 2) { /* the resumed run's last step: its master, and its parameter */
        td_named_tensors *sd = td_optimizer_state_dict(opt[k]);
        ASSERT(sd);
        ASSERT_NEAR(td_item(td_named_tensors_get(sd, "state.0.step")), STEPS + 1, 0);
        double *m = test_host(td_named_tensors_get(sd, "state.0.master_param")), *w = test_host(p[0]);
        double *a = test_host(p[1]), *b = test_host(p[3]);
        for (int i = 0; i < N; i++) {
            ASSERT_NEAR(m[i], w[i], 0);
            ASSERT_NEAR(b[i], a[i], 0);
        }
        free(m), free(w), free(a), free(b);
        td_named_tensors_free(sd);
    }
    for (int k = 0; k < 4; k++) td_optimizer_free(opt[k]), td_release(p[k]);
    td_scope_end();
}

/* one TEST per backend, NAME_cpu, NAME_vulkan and NAME_cuda, each running CALL(device) */
#define ON_EACH_DEVICE(NAME, CALL)                                                                                     \
    TEST(NAME##_cpu) { CALL("cpu"); }                                                                                  \
    TEST(NAME##_vulkan) { CALL("vulkan:0"); }                                                                          \
    TEST(NAME##_cuda) { CALL("cuda:0"); }
#define policy_bf16(dev) policy(dev, TD_BF16)
#define policy_f16(dev)  policy(dev, TD_F16)
#define master_bf16(dev) master_weights(dev, TD_BF16)
#define master_f16(dev)  master_weights(dev, TD_F16)
ON_EACH_DEVICE(policy_bf16, policy_bf16)
ON_EACH_DEVICE(policy_f16, policy_f16)
ON_EACH_DEVICE(scaler_inf, scaler_inf)
ON_EACH_DEVICE(scaler_growth, scaler_growth)
ON_EACH_DEVICE(master_bf16, master_bf16)
ON_EACH_DEVICE(master_f16, master_f16)
TEST(grads_bf16_cpu) { grads("cpu", TD_BF16); }
TEST(grads_f16_vulkan) { grads("vulkan:0", TD_F16); }
TEST(grads_bf16_vulkan) { grads("vulkan:0", TD_BF16); }
TEST(grads_bf16_cuda) { grads("cuda:0", TD_BF16); }
TEST(grads_f16_cuda) { grads("cuda:0", TD_F16); }

#define TESTS(X)                                                                                                       \
    X(policy_bf16_cpu)                                                                                                 \
    X(policy_f16_cpu)                                                                                                  \
    X(policy_bf16_vulkan)                                                                                              \
    X(policy_f16_vulkan)                                                                                               \
    X(policy_bf16_cuda)                                                                                                \
    X(policy_f16_cuda)                                                                                                 \
    X(grads_bf16_cpu)                                                                                                  \
    X(grads_f16_vulkan)                                                                                                \
    X(grads_bf16_vulkan)                                                                                               \
    X(grads_bf16_cuda)                                                                                                 \
    X(grads_f16_cuda)                                                                                                  \
    X(scaler_inf_cpu)                                                                                                  \
    X(scaler_inf_vulkan)                                                                                               \
    X(scaler_inf_cuda)                                                                                                 \
    X(scaler_growth_cpu)                                                                                               \
    X(scaler_growth_vulkan)                                                                                            \
    X(scaler_growth_cuda)                                                                                              \
    X(master_bf16_cpu)                                                                                                 \
    X(master_f16_cpu)                                                                                                  \
    X(master_bf16_vulkan)                                                                                              \
    X(master_f16_vulkan)                                                                                               \
    X(master_bf16_cuda)                                                                                                \
    X(master_f16_cuda)
TEST_MAIN(TESTS)
