/* Capturable optimizers read the learning rate (and Adam's step count) from
** device memory: a captured step replayed after td_optimizer_set_lr uses the
** new lr. On the CPU the device-lr path equals the host-lr path bit for bit;
** on each device that captures (cuda:0, vulkan:0; skipped without one) a
** captured step replayed with a new lr before every replay gives the
** parameters of an uncaptured run with the same lrs. */
#include "test_util.h"

/* clang-format off */
#define TESTS(X) X(device_lr_exact_cpu) X(device_lr_close_cpu_f32) X(set_lr_no_host_sync) X(capture_lr_cuda) \
    X(capture_lr_vulkan)
/* clang-format on */

enum { N = 1000, ALGOS = 4 };
static const char *const algo_names[ALGOS] = {"Adam amsgrad", "AdamW", "SGD nesterov", "RMSprop centered"};

/* Algorithm a (algo_names) over p with lr, capturable or not. */
static td_optimizer *make_opt(int a, td_tensor *p, double lr, bool capturable) {
    td_optim_options o = a == 0   ? td_adam_defaults(lr)
                         : a == 1 ? td_adamw_defaults(lr)
                         : a == 2 ? td_sgd_defaults(lr)
                                  : td_rmsprop_defaults(lr);
    if (a == 0) o.amsgrad = true, o.weight_decay = 0.05;
    if (a == 1) o.weight_decay = 0.1;
    if (a == 2) o.momentum = 0.9, o.nesterov = true, o.weight_decay = 0.01;
    if (a == 3) o.centered = true, o.momentum = 0.5;
    o.capturable = capturable;
    td_optimizer *opt = a == 0   ? td_adam_new(1, &p, &o)
                        : a == 1 ? td_adamw_new(1, &p, &o)
                        : a == 2 ? td_sgd_new(1, &p, &o)
                                 : td_rmsprop_new(1, &p, &o);
    ASSERT(opt);
    return opt;
}

/* A [N] parameter of dtype dt on dev, the same values for the same seed. */
static td_tensor *make_param(td_dtype dt, td_device dev) {
    td_tensor *p = td_keep(ASSERT_TENSOR(td_to(td_randn(1, (int64_t[]){N}, 7, 0, dt, TD_CPU), dev)));
    ASSERT_OK(td_set_requires_grad(p, true));
    return p;
}

/* One training step: loss = sum(p * p * x) (grad 2 p x), backward, update. */
static void train_step(td_optimizer *opt, td_tensor *p, td_tensor *x) {
    td_scope_begin();
    td_optimizer_zero_grad(opt);
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_mul(td_mul(p, p), x), 0, NULL, false)), NULL, false));
    ASSERT_OK(td_optimizer_step(opt));
    td_scope_end();
}

/* p as doubles on the host. */
static void fetch(td_tensor *p, double *out) { ASSERT_OK(td_copy_to_host(p, out, sizeof(double) * N, TD_F64)); }

/* The state dict's step of parameter 0. */
static double saved_step(td_optimizer *opt) {
    td_named_tensors *sd = td_optimizer_state_dict(opt);
    ASSERT(sd);
    double s = td_item(td_named_tensors_get(sd, "state.0.step"));
    td_named_tensors_free(sd);
    return s;
}

/* Host lr against device lr on the CPU, the lr changed before every step
** (set_lr, then a scheduler): f64 for any lr and f32 for lrs that f32 holds
** exactly give the same bits. */
static void cpu_pair(td_dtype dt, const double *lrs, int steps, double tol) {
    for (int a = 0; a < ALGOS; a++) {
        td_scope_begin();
        td_tensor *p[2], *x = ASSERT_TENSOR(td_rand(1, (int64_t[]){N}, 11, 0, dt, TD_CPU));
        td_optimizer *opt[2];
        for (int k = 0; k < 2; k++) p[k] = make_param(dt, TD_CPU), opt[k] = make_opt(a, p[k], lrs[0], k == 1);
        for (int s = 0; s < steps; s++)
            for (int k = 0; k < 2; k++) {
                td_optimizer_set_lr(opt[k], lrs[s]);
                train_step(opt[k], p[k], x);
            }
        td_scheduler *sch[2];
        for (int k = 0; k < 2; k++) sch[k] = td_step_lr_new(opt[k], 1, 0.5); /* halves the lr every step */
        for (int s = 0; s < 3; s++)
            for (int k = 0; k < 2; k++) {
                td_scheduler_step(sch[k]);
                train_step(opt[k], p[k], x);
            }
        double got[2][N];
        for (int k = 0; k < 2; k++) fetch(p[k], got[k]);
        for (int i = 0; i < N; i++) {
            if (fabs(got[1][i] - got[0][i]) > tol * (1 + fabs(got[0][i])))
                printf("  %s %s: p[%d] host lr %.17g, device lr %.17g\n", algo_names[a], td_dtype_name(dt), i,
                       got[0][i], got[1][i]);
            ASSERT(fabs(got[1][i] - got[0][i]) <= tol * (1 + fabs(got[0][i])));
        }
        if (a < 2) ASSERT_NEAR(saved_step(opt[1]), steps + 3, 0);
        for (int k = 0; k < 2; k++) td_scheduler_free(sch[k]), td_optimizer_free(opt[k]), td_release(p[k]);
        td_scope_end();
    }
}

TEST(device_lr_exact_cpu) {
    const double any[4] = {1e-2, 3.7e-3, 1.234e-2, 7e-4};
    cpu_pair(TD_F64, any, 4, 0);
    const double dyadic[4] = {0x1p-7, 0x1p-9, 0x3p-8, 0x5p-12}; /* f32 holds these exactly */
    cpu_pair(TD_F32, dyadic, 4, 0);
}

/* f32 with lrs f32 rounds: the device lr differs from the host's by its rounding (< 2^-24 relative). */
TEST(device_lr_close_cpu_f32) {
    const double any[4] = {1e-2, 3.7e-3, 1.234e-2, 7e-4};
    cpu_pair(TD_F32, any, 4, 1e-6);
}

/* Setting the lr of a capturable optimizer on a device is a fill on its stream: no host wait. */
TEST(set_lr_no_host_sync) {
    const char *specs[2] = {"cuda:0", "vulkan:0"};
    int tried = 0;
    for (int d = 0; d < 2; d++) {
        td_device dev;
        td_device_info info;
        if (td_device_parse(specs[d], &dev) != TD_OK || td_device_get_info(dev, &info) != TD_OK) continue;
        tried++;
        td_scope_begin();
        td_tensor *p = make_param(TD_F32, dev), *x = ASSERT_TENSOR(td_rand(1, (int64_t[]){N}, 11, 0, TD_F32, dev));
        td_optimizer *opt = make_opt(0, p, 1e-3, true);
        train_step(opt, p, x); /* makes the device lr */
        ASSERT_OK(td_synchronize(dev));
        int64_t before = td_host_sync_count();
        td_optimizer_set_lr(opt, 5e-4);
        ASSERT_OK(td_optimizer_set_group_lr(opt, 0, 2.5e-4));
        ASSERT_EQ_INT(td_host_sync_count() - before, 0);
        ASSERT_NEAR(td_optimizer_get_lr(opt, 0), 2.5e-4, 0);
        td_optimizer_free(opt);
        td_release(p);
        td_scope_end();
    }
    if (!tried) TEST_SKIP("neither cuda:0 nor vulkan:0 is available");
}

/* On dev: one eager step, one step captured, then REPLAYS replays with a new
** lr set before each; the uncaptured run (host lr) takes the same lrs. The
** parameters agree within tol (the device computes the lr's factors itself),
** and Adam's state dict counts every replay. */
static void capture_lr(const char *spec, double tol) {
    enum { REPLAYS = 6 };
    td_device dev = test_device_or_skip(spec);
    const double lrs[REPLAYS + 1] = {1e-2, 2e-2, 5e-3, 1.5e-2, 1e-3, 3e-2, 8e-3};
    for (int a = 0; a < ALGOS; a++) {
        td_scope_begin();
        td_tensor *p[2], *x = td_keep(ASSERT_TENSOR(td_to(td_rand(1, (int64_t[]){N}, 11, 0, TD_F32, TD_CPU), dev)));
        td_optimizer *opt[2];
        for (int k = 0; k < 2; k++) p[k] = make_param(TD_F32, dev), opt[k] = make_opt(a, p[k], lrs[0], k == 1);
        for (int k = 0; k < 2; k++) train_step(opt[k], p[k], x); /* eager: the state is made here */
        ASSERT_OK(td_capture_begin(dev));
        train_step(opt[1], p[1], x);
        td_captured_graph *g = NULL;
        ASSERT_OK(td_capture_end(dev, &g));
        for (int r = 1; r <= REPLAYS; r++) {
            td_optimizer_set_lr(opt[0], lrs[r]);
            train_step(opt[0], p[0], x);
            td_optimizer_set_lr(opt[1], lrs[r]);
            ASSERT_OK(td_graph_replay(g));
        }
        double got[2][N], frozen = 0;
        for (int k = 0; k < 2; k++) fetch(p[k], got[k]);
        for (int i = 0; i < N; i++) {
            double err = fabs(got[1][i] - got[0][i]);
            frozen = fmax(frozen, err);
            if (err > tol * (1 + fabs(got[0][i])))
                printf("  %s %s: p[%d] uncaptured %.9g, replayed %.9g\n", spec, algo_names[a], i, got[0][i], got[1][i]);
            ASSERT(err <= tol * (1 + fabs(got[0][i])));
        }
        printf("  %s %s: max |replayed - uncaptured| %.3g\n", spec, algo_names[a], frozen);
        if (a < 2) ASSERT_NEAR(saved_step(opt[1]), 1 + REPLAYS, 0);
        td_graph_free(g);
        for (int k = 0; k < 2; k++) td_optimizer_free(opt[k]), td_release(p[k]);
        td_release(x);
        td_scope_end();
    }
}

TEST(capture_lr_cuda) { capture_lr("cuda:0", 1e-5); }
TEST(capture_lr_vulkan) { capture_lr("vulkan:0", 1e-5); }

TEST_MAIN(TESTS)
