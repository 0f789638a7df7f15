/* Fused optimizer updates (Adam/AdamW, SGD, RMSprop): three steps of every
** flag combination against double loops written here, the double loops and
** the kernels against PyTorch (tests/fixtures/optim_steps.h), and errors. */
#include "test_util.h"

#include "fixtures/optim_steps.h"

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(reference_matches_torch)                                                                                         \
    X(torch_fixture) X(adam_variants) X(adam_large) X(sgd_variants) X(rmsprop_variants) X(adam_errors) X(sgd_errors)   \
        X(rmsprop_errors) X(adam_capturable) X(flat_step_bit_exact)
/* clang-format on */

/* ---- double-precision references (torch.optim formulas, foreach=False) ---- */

/* st[0..2]: adam (m, v, vmax); sgd (buf); rmsprop (square_avg, buf, grad_avg) */
static void reference_step(const optim_fixture *c, int step, int64_t n, double *p, const double *grad, double **st) {
    for (int64_t i = 0; i < n; i++) {
        double g = c->maximize ? -grad[i] : grad[i];
        if (c->kind == OPTIM_ADAM) {
            double *m = &st[0][i], *v = &st[1][i], *vmax = &st[2][i];
            if (c->decoupled)
                p[i] *= 1 - c->lr * c->wd;
            else
                g += c->wd * p[i];
            *m = c->b1 * *m + (1 - c->b1) * g;
            *v = c->b2 * *v + (1 - c->b2) * g * g;
            double vv = *v;
            if (c->amsgrad) vv = *vmax = fmax(*vmax, *v);
            double bc1 = 1 - pow(c->b1, step), bc2 = 1 - pow(c->b2, step);
            p[i] -= c->lr / bc1 * *m / (sqrt(vv) / sqrt(bc2) + c->eps);
        } else if (c->kind == OPTIM_SGD) {
            double *buf = &st[0][i];
            g += c->wd * p[i];
            if (c->momentum != 0) {
                *buf = step == 1 ? g : c->momentum * *buf + (1 - c->dampening) * g;
                g = c->nesterov ? g + c->momentum * *buf : *buf;
            }
            p[i] -= c->lr * g;
        } else {
            double *sq = &st[0][i], *buf = &st[1][i], *gavg = &st[2][i], alpha = c->b1;
            g += c->wd * p[i];
            *sq = alpha * *sq + (1 - alpha) * g * g;
            double avg;
            if (c->centered) {
                *gavg = alpha * *gavg + (1 - alpha) * g;
                avg = sqrt(*sq - *gavg * *gavg) + c->eps;
            } else {
                avg = sqrt(*sq) + c->eps;
            }
            if (c->momentum > 0) {
                *buf = c->momentum * *buf + g / avg;
                p[i] -= c->lr * *buf;
            } else {
                p[i] -= c->lr * g / avg;
            }
        }
    }
}

/* ---- the same steps through Trident ---- */

static void to_host(td_tensor *t, double *v, int64_t n) {
    ASSERT_OK(td_copy_to_host(t, v, (size_t)n * sizeof *v, TD_F64));
}

/* One step of c on param with state tensors s[0..2] (NULL where unused). */
static td_status trident_step(const optim_fixture *c, int step, td_tensor *param, td_tensor *grad, td_tensor **s) {
    switch (c->kind) {
    case OPTIM_ADAM:
        return td_adam_update(param, grad, s[0], s[1], s[2], c->lr, c->b1, c->b2, c->eps, c->wd, step, c->decoupled,
                              c->amsgrad, c->maximize);
    case OPTIM_SGD:
        return td_sgd_update(param, grad, s[0], c->lr, c->momentum, c->dampening, c->wd, c->nesterov, step == 1,
                             c->maximize);
    default:
        return td_rmsprop_update(param, grad, s[0], s[1], s[2], c->lr, c->b1, c->eps, c->wd, c->momentum, c->centered,
                                 c->maximize);
    }
}

/* Which states the configuration needs. */
static void states_used(const optim_fixture *c, bool used[3]) {
    used[0] = c->kind != OPTIM_SGD || c->momentum != 0;
    used[1] = c->kind == OPTIM_ADAM || (c->kind == OPTIM_RMSPROP && c->momentum > 0);
    used[2] = (c->kind == OPTIM_ADAM && c->amsgrad) || (c->kind == OPTIM_RMSPROP && c->centered);
}

/* Run STEPS steps in dtype dt from p0 with grads[step][n]; the parameter after
** each step goes to after[step][n] (states are checked through the parameter). */
static void run_trident(const optim_fixture *c, td_dtype dt, int64_t n, const double *p0, double *const *grads,
                        double **after) {
    bool used[3];
    states_used(c, used);
    td_tensor *param = test_tensor_f64(p0, 1, &n, dt), *s[3] = {0};
    for (int k = 0; k < 3; k++)
        if (used[k]) s[k] = ASSERT_TENSOR(td_zeros(1, &n, dt, TD_CPU));
    for (int step = 1; step <= OPTIM_STEPS; step++) {
        ASSERT_OK(trident_step(c, step, param, test_tensor_f64(grads[step - 1], 1, &n, dt), s));
        to_host(param, after[step - 1], n);
    }
}

static void compare(const char *what, const double *got, const double *want, int64_t n, double rtol, double atol) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i])))
            TEST_FAIL_("%s, element %lld: got %.12g, want %.12g (diff %.3g)", what, (long long)i, got[i], want[i],
                       fabs(got[i] - want[i]));
}

TEST(reference_matches_torch) {
    /* the double loops above reproduce PyTorch on its own fixture */
    for (size_t f = 0; f < sizeof optim_fixtures / sizeof optim_fixtures[0]; f++) {
        const optim_fixture *c = &optim_fixtures[f];
        double p[OPTIM_N], s[3][OPTIM_N] = {{0}}, *st[3] = {s[0], s[1], s[2]};
        memcpy(p, c->p0, sizeof p);
        for (int step = 1; step <= OPTIM_STEPS; step++) {
            reference_step(c, step, OPTIM_N, p, c->grad[step - 1], st);
            compare(c->name, p, c->p[step - 1], OPTIM_N, 1e-13, 1e-15);
        }
    }
}

TEST(torch_fixture) {
    td_scope_begin();
    td_dtype dts[2] = {TD_F64, TD_F32};
    double rtol[2] = {1e-12, 2e-6}, atol[2] = {1e-14, 2e-7};
    for (size_t f = 0; f < sizeof optim_fixtures / sizeof optim_fixtures[0]; f++)
        for (int k = 0; k < 2; k++) {
            const optim_fixture *c = &optim_fixtures[f];
            double after[OPTIM_STEPS][OPTIM_N], *ap[OPTIM_STEPS], *gp[OPTIM_STEPS];
            for (int s = 0; s < OPTIM_STEPS; s++) ap[s] = after[s], gp[s] = (double *)c->grad[s];
            run_trident(c, dts[k], OPTIM_N, c->p0, gp, ap);
            for (int s = 0; s < OPTIM_STEPS; s++) {
                char what[96];
                snprintf(what, sizeof what, "%s %s step %d", c->name, td_dtype_name(dts[k]), s + 1);
                compare(what, after[s], c->p[s], OPTIM_N, rtol[k], atol[k]);
            }
        }
    td_scope_end();
}

/* Random p0 and grads, STEPS steps in each dtype vs the double reference. */
static void check_config(const optim_fixture *c, int64_t n) {
    double *p0 = malloc((size_t)n * sizeof(double)), *grads[OPTIM_STEPS], *after[OPTIM_STEPS], *want[OPTIM_STEPS];
    double *st[3];
    for (int64_t i = 0; i < n; i++) p0[i] = test_uniform(-1, 1);
    for (int s = 0; s < OPTIM_STEPS; s++) {
        grads[s] = malloc((size_t)n * sizeof(double));
        after[s] = malloc((size_t)n * sizeof(double));
        want[s] = malloc((size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++) grads[s][i] = test_uniform(-1, 1);
    }
    for (int k = 0; k < 3; k++) st[k] = calloc((size_t)n, sizeof(double));
    memcpy(want[0], p0, (size_t)n * sizeof(double));
    for (int s = 0; s < OPTIM_STEPS; s++) {
        if (s) memcpy(want[s], want[s - 1], (size_t)n * sizeof(double));
        reference_step(c, s + 1, n, want[s], grads[s], st);
    }
    td_dtype dts[4] = {TD_F64, TD_F32, TD_F16, TD_BF16};
    /* the last two: a few ulps of |p| <= ~1.1 (half inputs are rounded too) */
    double rtol[4] = {1e-12, 1e-5, 4e-3, 3e-2}, atol[4] = {1e-14, 1e-6, 4e-3, 3e-2};
    for (int k = 0; k < 4; k++) {
        run_trident(c, dts[k], n, p0, grads, after);
        for (int s = 0; s < OPTIM_STEPS; s++) {
            char what[160];
            snprintf(what, sizeof what, "%s kind %d wd %g mom %g damp %g nest %d dec %d ams %d max %d cen %d step %d",
                     td_dtype_name(dts[k]), c->kind, c->wd, c->momentum, c->dampening, c->nesterov, c->decoupled,
                     c->amsgrad, c->maximize, c->centered, s + 1);
            compare(what, after[s], want[s], n, rtol[k], atol[k]);
        }
    }
    free(p0);
    for (int s = 0; s < OPTIM_STEPS; s++) free(grads[s]), free(after[s]), free(want[s]);
    for (int k = 0; k < 3; k++) free(st[k]);
}

TEST(adam_variants) {
    td_scope_begin();
    test_seed();
    for (int bits = 0; bits < 16; bits++) {
        optim_fixture c = {.kind = OPTIM_ADAM, .lr = 0.01, .b1 = 0.9, .b2 = 0.99, .eps = 1e-8};
        c.wd = bits & 1 ? 0.1 : 0;
        c.decoupled = (bits >> 1) & 1;
        c.amsgrad = (bits >> 2) & 1;
        c.maximize = (bits >> 3) & 1;
        check_config(&c, 37); /* 4 AVX2 vectors and a tail of 5 */
    }
    td_scope_end();
}

TEST(adam_large) {
    td_scope_begin();
    /* several threads and blocks, AMSGrad and AdamW on */
    test_seed();
    optim_fixture c = {
        .kind = OPTIM_ADAM, .lr = 3e-4, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0.01, .decoupled = 1, .amsgrad = 1};
    check_config(&c, 100003);
    td_scope_end();
}

TEST(sgd_variants) {
    td_scope_begin();
    test_seed();
    double moms[2] = {0, 0.9}, damps[2] = {0, 0.2};
    for (int bits = 0; bits < 32; bits++) {
        optim_fixture c = {.kind = OPTIM_SGD, .lr = 0.05};
        c.momentum = moms[bits & 1];
        c.dampening = damps[(bits >> 1) & 1];
        c.nesterov = (bits >> 2) & 1;
        c.wd = (bits >> 3) & 1 ? 0.02 : 0;
        c.maximize = (bits >> 4) & 1;
        if (c.nesterov && (c.momentum == 0 || c.dampening != 0)) continue; /* invalid, see sgd_errors */
        check_config(&c, 21);
    }
    td_scope_end();
}

TEST(rmsprop_variants) {
    td_scope_begin();
    test_seed();
    for (int bits = 0; bits < 16; bits++) {
        optim_fixture c = {.kind = OPTIM_RMSPROP, .lr = 0.01, .b1 = 0.9, .eps = 1e-8};
        c.centered = bits & 1;
        c.momentum = (bits >> 1) & 1 ? 0.5 : 0;
        c.wd = (bits >> 2) & 1 ? 0.01 : 0;
        c.maximize = (bits >> 3) & 1;
        check_config(&c, 21);
    }
    td_scope_end();
}

TEST(adam_errors) {
    td_scope_begin();
    int64_t n = 4, n5 = 5, s2[2] = {2, 2};
    td_tensor *p = ASSERT_TENSOR(td_zeros(1, &n, TD_F32, TD_CPU)), *g = ASSERT_TENSOR(td_ones(1, &n, TD_F32, TD_CPU));
    td_tensor *m = ASSERT_TENSOR(td_zeros(1, &n, TD_F32, TD_CPU)), *v = ASSERT_TENSOR(td_zeros(1, &n, TD_F32, TD_CPU));
#define ADAM_(P, G, M, V, X, lr, b1, b2, step, ams)                                                                    \
    td_adam_update(P, G, M, V, X, lr, b1, b2, 1e-8, 0, step, false, ams, false)
    ASSERT_ERROR(ADAM_(p, td_ones(1, &n5, TD_F32, TD_CPU), m, v, NULL, 0.1, 0.9, 0.99, 1, false), TD_ERR_SHAPE,
                 "adam_update: grad [5] does not match param [4]");
    ASSERT_ERROR(ADAM_(p, g, td_zeros(1, &n, TD_F64, TD_CPU), v, NULL, 0.1, 0.9, 0.99, 1, false), TD_ERR_DTYPE,
                 "m has dtype float64 but param has float32");
    td_tensor *strided =
        ASSERT_TENSOR(td_select(td_transpose(td_zeros(2, (int64_t[]){4, 2}, TD_F32, TD_CPU), 0, 1), 0, 0));
    ASSERT_ERROR(ADAM_(p, g, m, strided, NULL, 0.1, 0.9, 0.99, 1, false), TD_ERR_MISUSE, "v is not contiguous");
    ASSERT_ERROR(ADAM_(p, g, m, v, NULL, 0.1, 0.9, 0.99, 1, true), TD_ERR_MISUSE,
                 "amsgrad needs the state tensor vmax");
    ASSERT_ERROR(ADAM_(p, g, m, v, NULL, -0.1, 0.9, 0.99, 1, false), TD_ERR_MISUSE, "lr = -0.1 is outside");
    ASSERT_ERROR(ADAM_(p, g, m, v, NULL, NAN, 0.9, 0.99, 1, false), TD_ERR_MISUSE, "lr = nan");
    ASSERT_ERROR(ADAM_(p, g, m, v, NULL, 0.1, 1.0, 0.99, 1, false), TD_ERR_MISUSE, "beta1 = 1 is outside [0, 1)");
    ASSERT_ERROR(ADAM_(p, g, m, v, NULL, 0.1, 0.9, -0.5, 1, false), TD_ERR_MISUSE, "beta2");
    ASSERT_ERROR(ADAM_(p, g, m, v, NULL, 0.1, 0.9, 0.99, 0, false), TD_ERR_MISUSE, "step = 0");
    ASSERT_ERROR(ADAM_(p, NULL, m, v, NULL, 0.1, 0.9, 0.99, 1, false), TD_ERR_MISUSE, "'grad' is NULL");
    td_tensor *pi = ASSERT_TENSOR(td_zeros(1, &n, TD_I32, TD_CPU));
    ASSERT_ERROR(ADAM_(pi, pi, pi, pi, NULL, 0.1, 0.9, 0.99, 1, false), TD_ERR_DTYPE, "param has dtype int32");
    ASSERT_ERROR(td_adam_update(p, g, m, v, NULL, 0.1, 0.9, 0.99, -1, 0, 1, false, false, false), TD_ERR_MISUSE, "eps");
    ASSERT_ERROR(td_adam_update(p, g, m, v, NULL, 0.1, 0.9, 0.99, 1e-8, INFINITY, 1, false, false, false),
                 TD_ERR_MISUSE, "weight_decay");
    ASSERT_ERROR(ADAM_(td_reshape(p, 2, s2), g, m, v, NULL, 0.1, 0.9, 0.99, 1, false), TD_ERR_SHAPE, "does not match");
    /* nothing above touched the tensors; a valid call still works */
    ASSERT_OK(ADAM_(p, g, m, v, NULL, 0.1, 0.9, 0.99, 1, false));
    double pv[4];
    to_host(p, pv, 4);
    ASSERT_NEAR(pv[0], -0.1, 1e-6);
#undef ADAM_
    td_scope_end();
}

TEST(sgd_errors) {
    td_scope_begin();
    int64_t n = 3;
    td_tensor *p = ASSERT_TENSOR(td_zeros(1, &n, TD_F64, TD_CPU)), *g = ASSERT_TENSOR(td_ones(1, &n, TD_F64, TD_CPU));
    ASSERT_ERROR(td_sgd_update(p, g, NULL, 0.1, 0.9, 0, 0, false, true, false), TD_ERR_MISUSE,
                 "sgd_update: momentum needs the state tensor buf");
    ASSERT_ERROR(td_sgd_update(p, g, NULL, 0.1, 0, 0, 0, true, true, false), TD_ERR_MISUSE,
                 "nesterov needs momentum > 0");
    td_tensor *b = ASSERT_TENSOR(td_zeros(1, &n, TD_F64, TD_CPU));
    ASSERT_ERROR(td_sgd_update(p, g, b, 0.1, 0.9, 0.1, 0, true, true, false), TD_ERR_MISUSE, "dampening 0");
    ASSERT_ERROR(td_sgd_update(p, g, b, 0.1, -0.9, 0, 0, false, true, false), TD_ERR_MISUSE, "momentum = -0.9");
    ASSERT_ERROR(td_sgd_update(p, g, b, INFINITY, 0.9, 0, 0, false, true, false), TD_ERR_MISUSE, "lr = inf");
    ASSERT_ERROR(td_sgd_update(p, g, b, 0.1, 0.9, NAN, 0, false, true, false), TD_ERR_MISUSE, "dampening = nan");
    ASSERT_ERROR(td_sgd_update(p, td_ones(1, &n, TD_F32, TD_CPU), NULL, 0.1, 0, 0, 0, false, true, false), TD_ERR_DTYPE,
                 "grad has dtype float32");
    ASSERT_ERROR(td_sgd_update(NULL, g, NULL, 0.1, 0, 0, 0, false, true, false), TD_ERR_MISUSE, "NULL");
    /* plain SGD needs no buffer */
    ASSERT_OK(td_sgd_update(p, g, NULL, 0.5, 0, 0, 0, false, true, false));
    double pv[3];
    to_host(p, pv, 3);
    ASSERT_NEAR(pv[2], -0.5, 0);
    td_scope_end();
}

TEST(rmsprop_errors) {
    td_scope_begin();
    int64_t n = 3;
    td_tensor *p = ASSERT_TENSOR(td_zeros(1, &n, TD_BF16, TD_CPU)), *g = ASSERT_TENSOR(td_ones(1, &n, TD_BF16, TD_CPU));
    td_tensor *sq = ASSERT_TENSOR(td_zeros(1, &n, TD_BF16, TD_CPU));
    ASSERT_ERROR(td_rmsprop_update(p, g, sq, NULL, NULL, 0.01, 0.99, 1e-8, 0, 0.5, false, false), TD_ERR_MISUSE,
                 "momentum needs the state tensor buf");
    ASSERT_ERROR(td_rmsprop_update(p, g, sq, NULL, NULL, 0.01, 0.99, 1e-8, 0, 0, true, false), TD_ERR_MISUSE,
                 "centered needs the state tensor grad_avg");
    ASSERT_ERROR(td_rmsprop_update(p, g, NULL, NULL, NULL, 0.01, 0.99, 1e-8, 0, 0, false, false), TD_ERR_MISUSE,
                 "'square_avg' is NULL");
    ASSERT_ERROR(td_rmsprop_update(p, g, sq, NULL, NULL, 0.01, 1.5, 1e-8, 0, 0, false, false), TD_ERR_MISUSE,
                 "alpha = 1.5 is outside [0, 1]");
    ASSERT_ERROR(td_rmsprop_update(p, g, sq, NULL, NULL, 0.01, 0.99, 1e-8, -1, 0, false, false), TD_ERR_MISUSE,
                 "weight_decay = -1");
    ASSERT_OK(td_rmsprop_update(p, g, sq, NULL, NULL, 0.01, 0.99, 1e-8, 0, 0, false, false));
    double pv[3];
    to_host(p, pv, 3);
    ASSERT_NEAR(pv[0], -0.1, 1e-3); /* -lr * 1 / sqrt(0.01) */
    td_scope_end();
}

/* An MLP's parameters on dev as floats, end to end. */
static void params_host(td_module *m, float *out, int64_t cap) {
    td_tensor *ps[8];
    int n = td_module_parameters(m, ps, 8);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        ASSERT(at + td_numel(ps[i]) <= cap);
        ASSERT_OK(td_copy_to_host(ps[i], out + at, sizeof(float) * (size_t)td_numel(ps[i]), TD_F32));
        at += td_numel(ps[i]);
    }
}

/* A flattened module's optimizer takes one update per arena (adam_step once
** per step in the profile) and gives the per-parameter step's parameters and
** state bit for bit, on the CPU and on Vulkan: Adam (amsgrad, weight decay),
** SGD (momentum, first step), RMSprop (centered, momentum), three steps each. */
TEST(flat_step_bit_exact) {
    const char *devs[] = {"cpu", "vulkan:0"};
    for (int d = 0; d < 2; d++) {
        td_device dev;
        if (td_device_parse(devs[d], &dev) != TD_OK || !td_device_available(dev)) {
            td_clear_error();
            continue;
        }
        for (int algo = 0; algo < 3; algo++) {
            td_scope_begin();
            td_module *m[2];
            td_optimizer *opt[2];
            for (int k = 0; k < 2; k++) {
                td_manual_seed(7);
                m[k] = td_sequential_new(
                    3, (td_module *[]){td_linear_new(5, 7, true), td_tanh_new(), td_linear_new(7, 3, true)});
                ASSERT(m[k]);
                ASSERT_OK(td_module_to(m[k], dev));
                if (k == 1) ASSERT_OK(td_module_flatten_parameters(m[k], dev));
                td_tensor *ps[4];
                ASSERT_EQ_INT(td_module_parameters(m[k], ps, 4), 4);
                td_optim_options o = algo == 0   ? td_adam_defaults(1e-2)
                                     : algo == 1 ? td_sgd_defaults(0.1)
                                                 : td_rmsprop_defaults(1e-2);
                o.amsgrad = algo == 0, o.weight_decay = algo == 0 ? 0.1 : 0, o.momentum = algo ? 0.9 : 0;
                o.centered = algo == 2;
                opt[k] = algo == 0   ? td_adam_new(4, ps, &o)
                         : algo == 1 ? td_sgd_new(4, ps, &o)
                                     : td_rmsprop_new(4, ps, &o);
                ASSERT(opt[k]);
            }
            float a[128], b[128];
            params_host(m[0], a, 128), params_host(m[1], b, 128);
            fprintf(stderr, "  %s, algorithm %d\n", devs[d], algo);
            ASSERT(!memcmp(a, b, sizeof(float) * (5 * 7 + 7 + 7 * 3 + 3)));
            for (int step = 0; step < 3; step++)
                for (int k = 0; k < 2; k++) {
                    td_optimizer_zero_grad(opt[k]);
                    td_tensor *x = td_randn(2, (int64_t[]){4, 5}, 11, (uint64_t)step * 64, TD_F32, dev);
                    td_tensor *y = td_module_forward(m[k], x);
                    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_mul(y, y), 0, NULL, false)), NULL, false));
                    if (k == 1 && step == 2) ASSERT_OK(td_profile_begin());
                    ASSERT_OK(td_optimizer_step(opt[k]));
                    if (k == 1 && step == 2) {
                        ASSERT_OK(td_profile_end(NULL));
                        td_profile_row rows[32];
                        int n_rows = td_profile_rows(rows, 32);
                        const char *op = algo == 0 ? "adam_step" : algo == 1 ? "sgd_step" : "rmsprop_step";
                        int64_t ops = 0;
                        for (int r = 0; r < n_rows && r < 32; r++) ops += strcmp(rows[r].op, op) ? 0 : rows[r].count;
                        ASSERT_EQ_INT(ops, 1);
                    }
                }
            params_host(m[0], a, 128), params_host(m[1], b, 128);
            ASSERT(!memcmp(a, b, sizeof(float) * 66));
            td_named_tensors *sd[2] = {td_optimizer_state_dict(opt[0]), td_optimizer_state_dict(opt[1])};
            ASSERT(sd[0] && sd[1]);
            ASSERT_EQ_INT(td_named_tensors_len(sd[0]), td_named_tensors_len(sd[1]));
            for (int64_t e = 0; e < td_named_tensors_len(sd[0]); e++) {
                ASSERT(!strcmp(td_named_tensors_name(sd[0], e), td_named_tensors_name(sd[1], e)));
                td_tensor *t0 = td_named_tensors_at(sd[0], e), *t1 = td_named_tensors_at(sd[1], e);
                ASSERT_EQ_INT(td_numel(t0), td_numel(t1));
                double v0[128], v1[128];
                ASSERT(td_numel(t0) <= 128);
                ASSERT_OK(td_copy_to_host(t0, v0, sizeof(double) * (size_t)td_numel(t0), TD_F64));
                ASSERT_OK(td_copy_to_host(t1, v1, sizeof(double) * (size_t)td_numel(t1), TD_F64));
                for (int64_t e2 = 0; e2 < td_numel(t0); e2++) ASSERT(v1[e2] == v0[e2]);
            }
            td_named_tensors_free(sd[0]), td_named_tensors_free(sd[1]);
            for (int k = 0; k < 2; k++) td_optimizer_free(opt[k]), td_module_free(m[k]);
            td_scope_end();
        }
    }
}

TEST_MAIN(TESTS)

/* Adam and AdamW (amsgrad, weight decay, maximize) with capturable = true, its
** step count and lr on the device read by the fused op, against the host-lr
** fused op: five steps of a [257] f32 parameter agree within float rounding, and the
** state dict reads the device's count. */
TEST(adam_capturable) {
    for (int variant = 0; variant < 3; variant++) {
        td_scope_begin();
        td_tensor *p[2];
        td_optimizer *opt[2];
        for (int k = 0; k < 2; k++) {
            p[k] = td_keep(ASSERT_TENSOR(td_randn(1, (int64_t[]){257}, 5, 0, TD_F32, TD_CPU)));
            ASSERT_OK(td_set_requires_grad(p[k], true));
            td_optim_options o = variant == 1 ? td_adamw_defaults(1e-2) : td_adam_defaults(1e-2);
            o.amsgrad = variant == 2, o.maximize = variant == 2, o.weight_decay = variant == 0 ? 0 : 0.1;
            o.capturable = k == 1;
            opt[k] = variant == 1 ? td_adamw_new(1, &p[k], &o) : td_adam_new(1, &p[k], &o);
            ASSERT(opt[k]);
        }
        for (int step = 0; step < 5; step++)
            for (int k = 0; k < 2; k++) {
                td_optimizer_zero_grad(opt[k]);
                td_tensor *g = td_randn(1, (int64_t[]){257}, 9, (uint64_t)step * 100, TD_F32, TD_CPU);
                ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_mul(p[k], g), 0, NULL, false)), NULL, false));
                ASSERT_OK(td_optimizer_step(opt[k]));
            }
        float a[257], b[257];
        ASSERT_OK(td_copy_to_host(p[0], a, sizeof a, TD_F32));
        ASSERT_OK(td_copy_to_host(p[1], b, sizeof b, TD_F32));
        for (int i = 0; i < 257; i++) ASSERT_NEAR(b[i], a[i], 1e-6 + 1e-6 * fabs(a[i]));
        td_named_tensors *sd = td_optimizer_state_dict(opt[1]);
        ASSERT(sd);
        ASSERT_NEAR(td_item(td_named_tensors_get(sd, "state.0.step")), 5, 0);
        td_named_tensors_free(sd);
        for (int k = 0; k < 2; k++) td_optimizer_free(opt[k]), td_release(p[k]);
        td_scope_end();
    }
}
