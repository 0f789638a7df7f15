/* The layers and losses of issue 25 against PyTorch: GroupNorm, RMSNorm, InstanceNorm2d,
** ConvTranspose1d/2d, Upsample (nearest), AdaptiveMaxPool2d (forward, input and parameter gradients, buffers,
*state_dict keys loaded
** strictly) and the smooth-L1, Huber, KL-divergence and cosine-embedding losses (value and input
** gradient), on the CPU, Vulkan and CUDA; gradchecks in float64; bad arguments. References:
** tests/fixtures/gen_layers_extra.py (torch 1.13, float64); |got - want| <= tol (1 + |want|). */
#include "tdfx.h"
#include "test_util.h"

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(modules_cpu) X(modules_vulkan) X(modules_cuda) X(losses_cpu) X(losses_vulkan) X(losses_cuda) X(state_dict_keys) X(gradcheck_modules)           \
        X(gradcheck_losses) X(rmsnorm_eps_none) X(bad_arguments)
/* clang-format on */

static tdfx *fx;

static tdfx *fixtures(void) {
    if (!fx) fx = tdfx_open("layers_extra.tdfx");
    if (!fx) TEST_FAIL_("fixtures missing (tests/fixtures/layers_extra.tdfx)");
    return fx;
}

/* "<name><suffix>" from the fixtures (NULL when absent), moved to dev. */
static td_tensor *fxt(const char *name, const char *suffix, td_device dev) {
    char key[256];
    snprintf(key, sizeof key, "%s%s", name, suffix);
    td_tensor *t = tdfx_tensor(fixtures(), key);
    return t && dev.type != TD_DEVICE_CPU ? td_to(t, dev) : t;
}

static td_tensor *need(td_tensor *t, const char *what) {
    if (!t) TEST_FAIL_("fixture tensor %s is missing", what);
    return t;
}

/* got and want elementwise within tol (1 + |want|): the first mismatches and the largest difference. */
static void check_close(td_tensor *got, td_tensor *want, double tol, const char *what) {
    if (!got) TEST_FAIL_("%s: no result (%s)", what, td_last_error());
    int64_t n = td_numel(want);
    if (td_numel(got) != n || td_ndim(got) != td_ndim(want))
        TEST_FAIL_("%s: %lld elements in %d dims, want %lld in %d", what, (long long)td_numel(got), td_ndim(got),
                   (long long)n, td_ndim(want));
    for (int d = 0; d < td_ndim(want); d++)
        if (td_size(got, d) != td_size(want, d))
            TEST_FAIL_("%s: size %d is %lld, want %lld", what, d, (long long)td_size(got, d),
                       (long long)td_size(want, d));
    double *g = test_host(got), *w = test_host(want), maxd = 0;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(g[i] - w[i]);
        if (!(d <= maxd)) maxd = isnan(d) ? INFINITY : d;
        if (!(d <= tol * (1 + fabs(w[i]))) && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: got %.9g want %.9g\n", what, (long long)i, g[i], w[i]);
    }
    free(g);
    free(w);
    if (bad) TEST_FAIL_("%s: %d of %lld elements differ, max |diff| %.3g", what, bad, (long long)n, maxd);
}

/* The modules of the fixtures, by case name (PyTorch's arguments in gen_layers_extra.py). */
static td_module *make_module(const char *n) {
    if (!strcmp(n, "groupnorm")) return td_group_norm_new(2, 4, 1e-5, true);
    if (!strcmp(n, "groupnorm_noaffine")) return td_group_norm_new(3, 6, 1e-5, false);
    if (!strcmp(n, "rmsnorm")) return td_rms_norm_new(2, (int64_t[]){4, 5}, 1e-3, true);
    if (!strcmp(n, "rmsnorm_none")) return td_rms_norm_new(1, (int64_t[]){6}, -1, false);
    if (!strcmp(n, "instnorm")) return td_instance_norm2d_new(3, 1e-5, 0.1, false, false);
    if (!strcmp(n, "instnorm_track")) return td_instance_norm2d_new(3, 1e-5, 0.1, true, true);
    if (!strcmp(n, "convt2d"))
        return td_conv_transpose2d_new(4, 6, (int[]){3, 2}, (int[]){2, 3}, (int[]){1, 0}, (int[]){1, 2}, 2, true,
                                       (int[]){1, 2});
    if (!strcmp(n, "convt2d_plain"))
        return td_conv_transpose2d_new(3, 2, (int[]){3, 3}, NULL, NULL, NULL, 1, true, NULL);
    if (!strcmp(n, "convt1d")) return td_conv_transpose1d_new(4, 2, 3, 2, 1, 1, 1, true, 1);
    if (!strcmp(n, "convt1d_groups")) return td_conv_transpose1d_new(6, 4, 3, 3, 2, 2, 2, false, 2);
    if (!strcmp(n, "upsample_size")) return td_upsample_nearest_new(2, (int64_t[]){5, 7}, NULL);
    if (!strcmp(n, "upsample_scale")) return td_upsample_nearest_new(2, NULL, (double[]){2.0, 1.5});
    if (!strcmp(n, "upsample_1d_down")) return td_upsample_nearest_new(1, (int64_t[]){3}, NULL);
    if (!strcmp(n, "adaptive_maxpool2d")) return td_adaptive_max_pool2d_new(3, 2);
    if (!strcmp(n, "adaptive_maxpool2d_even")) return td_adaptive_max_pool2d_new(2, 3);
    TEST_FAIL_("no module for case %s", n);
}

static const char *const module_cases[] = {"groupnorm",        "groupnorm_noaffine", "rmsnorm",
                                           "rmsnorm_none",     "instnorm",           "instnorm_track",
                                           "convt2d",          "convt2d_plain",      "convt1d",
                                           "convt1d_groups",   "upsample_size",      "upsample_scale",
                                           "upsample_1d_down", "adaptive_maxpool2d", "adaptive_maxpool2d_even"};
#define N_MODULES (int)(sizeof module_cases / sizeof *module_cases)

/* The entries "<name>.s.<key>" as a state dict keyed by <key>. */
static td_named_tensors *fixture_state(const char *name) {
    tdfx *f = fixtures();
    char prefix[128];
    size_t len = (size_t)snprintf(prefix, sizeof prefix, "%s.s.", name);
    td_named_tensors *sd = td_named_tensors_new();
    for (int i = 0; i < f->n; i++)
        if (!strncmp(f->e[i].name, prefix, len))
            ASSERT_OK(td_named_tensors_add(sd, f->e[i].name + len, ASSERT_TENSOR(tdfx_tensor(f, f->e[i].name))));
    return sd;
}

/* Case name on dev: load the state strictly, forward, backward of gy; compare y, dx, parameter gradients,
** buffers after the forward and the evaluation output. */
static void module_parity(const char *name, td_device dev, double tol) {
    fprintf(stderr, "  %s\n", name);
    td_scope_begin();
    td_module *m = make_module(name);
    ASSERT(m);
    td_named_tensors *sd = fixture_state(name);
    ASSERT_OK(td_module_load_state_dict(m, sd, true));
    td_named_tensors_free(sd);
    ASSERT_OK(td_module_to(m, dev));
    td_tensor *x = need(fxt(name, ".x", dev), "x");
    ASSERT_OK(td_set_requires_grad(x, true));
    td_tensor *y = ASSERT_TENSOR(td_module_forward(m, x));
    check_close(y, need(fxt(name, ".y", TD_CPU), "y"), tol, "y");
    ASSERT_OK(td_backward(y, need(fxt(name, ".gy", dev), "gy"), false));
    check_close(td_grad_of(x), need(fxt(name, ".dx", TD_CPU), "dx"), tol, "dx");
    tdfx *f = fixtures();
    char gp[128], bp[128];
    size_t gl = (size_t)snprintf(gp, sizeof gp, "%s.g.", name), bl = (size_t)snprintf(bp, sizeof bp, "%s.b.", name);
    for (int i = 0; i < f->n; i++) {
        const char *key = f->e[i].name;
        bool is_grad = !strncmp(key, gp, gl), is_buf = !strncmp(key, bp, bl);
        if (!is_grad && !is_buf) continue;
        td_tensor *p = ASSERT_TENSOR(td_module_get(m, key + (is_grad ? gl : bl)));
        check_close(is_grad ? td_grad_of(p) : p, tdfx_tensor(f, key), tol, key);
    }
    td_tensor *xe = fxt(name, ".x_eval", dev);
    if (xe) {
        td_module_eval(m);
        check_close(td_module_forward(m, xe), need(fxt(name, ".y_eval", TD_CPU), "y_eval"), tol, "y_eval");
    }
    td_scope_end();
    td_module_free(m);
}

static void modules_on(td_device dev, double tol) {
    for (int i = 0; i < N_MODULES; i++) module_parity(module_cases[i], dev, tol);
}

TEST(modules_cpu) { modules_on(TD_CPU, 1e-5); }
TEST(modules_vulkan) { modules_on(test_device_or_skip("vulkan:0"), 1e-4); }
TEST(modules_cuda) { modules_on(test_device_or_skip("cuda:0"), 1e-4); }

/* ---- losses ---- */

static td_tensor *run_loss(const char *n, td_tensor *x, td_tensor *a0, td_tensor *a1) {
    if (!strcmp(n, "smoothl1_mean")) return td_smooth_l1_loss(x, a0, TD_REDUCE_MEAN, 1.0);
    if (!strcmp(n, "smoothl1_beta_sum")) return td_smooth_l1_loss(x, a0, TD_REDUCE_SUM, 0.5);
    if (!strcmp(n, "smoothl1_beta0_none")) return td_smooth_l1_loss(x, a0, TD_REDUCE_NONE, 0.0);
    if (!strcmp(n, "huber_mean")) return td_huber_loss(x, a0, TD_REDUCE_MEAN, 1.0);
    if (!strcmp(n, "huber_delta_none")) return td_huber_loss(x, a0, TD_REDUCE_NONE, 2.0);
    if (!strcmp(n, "kl_batchmean")) return td_kl_div_loss(x, a0, TD_REDUCE_BATCHMEAN, false);
    if (!strcmp(n, "kl_mean")) return td_kl_div_loss(x, a0, TD_REDUCE_MEAN, false);
    if (!strcmp(n, "kl_sum")) return td_kl_div_loss(x, a0, TD_REDUCE_SUM, false);
    if (!strcmp(n, "kl_none_logtarget")) return td_kl_div_loss(x, a0, TD_REDUCE_NONE, true);
    if (!strcmp(n, "kl_batchmean_logtarget")) return td_kl_div_loss(x, a0, TD_REDUCE_BATCHMEAN, true);
    if (!strcmp(n, "cosemb_mean")) return td_cosine_embedding_loss(x, a0, a1, 0.2, TD_REDUCE_MEAN);
    if (!strcmp(n, "cosemb_sum")) return td_cosine_embedding_loss(x, a0, a1, 0, TD_REDUCE_SUM);
    if (!strcmp(n, "cosemb_none")) return td_cosine_embedding_loss(x, a0, a1, -0.3, TD_REDUCE_NONE);
    TEST_FAIL_("no Trident call for loss case %s", n);
}

static const char *const loss_cases[] = {"smoothl1_mean",
                                         "smoothl1_beta_sum",
                                         "smoothl1_beta0_none",
                                         "huber_mean",
                                         "huber_delta_none",
                                         "kl_batchmean",
                                         "kl_mean",
                                         "kl_sum",
                                         "kl_none_logtarget",
                                         "kl_batchmean_logtarget",
                                         "cosemb_mean",
                                         "cosemb_sum",
                                         "cosemb_none"};

static void losses_on(td_device dev, double tol) {
    for (size_t i = 0; i < sizeof loss_cases / sizeof *loss_cases; i++) {
        const char *n = loss_cases[i];
        fprintf(stderr, "  %s\n", n);
        td_scope_begin();
        td_tensor *x = need(fxt(n, ".x", dev), "x");
        ASSERT_OK(td_set_requires_grad(x, true));
        td_tensor *y = ASSERT_TENSOR(run_loss(n, x, fxt(n, ".a0", dev), fxt(n, ".a1", dev)));
        check_close(y, need(fxt(n, ".y", TD_CPU), "y"), tol, n);
        ASSERT_OK(td_backward(y, td_ndim(y) ? need(fxt(n, ".gy", dev), "gy") : NULL, false));
        check_close(td_grad_of(x), need(fxt(n, ".dx", TD_CPU), "dx"), tol, "dx");
        td_scope_end();
    }
}

TEST(losses_cpu) { losses_on(TD_CPU, 1e-5); }
TEST(losses_vulkan) { losses_on(test_device_or_skip("vulkan:0"), 1e-4); }
TEST(losses_cuda) { losses_on(test_device_or_skip("cuda:0"), 1e-4); }

/* Each module's state dict has exactly torch's keys, in torch's order. */
TEST(state_dict_keys) {
    for (int i = 0; i < N_MODULES; i++) {
        td_module *m = make_module(module_cases[i]);
        ASSERT(m);
        td_named_tensors *mine = td_module_state_dict(m), *theirs = fixture_state(module_cases[i]);
        ASSERT(mine);
        ASSERT_EQ_INT(td_named_tensors_len(mine), td_named_tensors_len(theirs));
        for (int64_t k = 0; k < td_named_tensors_len(mine); k++) {
            const char *a = td_named_tensors_name(mine, k), *b = td_named_tensors_name(theirs, k);
            if (strcmp(a, b)) TEST_FAIL_("%s: key %lld is %s, torch's is %s", module_cases[i], (long long)k, a, b);
        }
        fprintf(stderr, "  %s: %lld keys\n", module_cases[i], (long long)td_named_tensors_len(mine));
        td_named_tensors_free(mine);
        td_named_tensors_free(theirs);
        td_module_free(m);
    }
}

/* ---- gradcheck (float64, central differences) ---- */

static td_tensor *module_fn(void *user, int n, td_tensor *const *in) {
    (void)n;
    return td_module_forward(user, in[0]);
}

TEST(gradcheck_modules) {
    for (int i = 0; i < N_MODULES; i++) {
        const char *name = module_cases[i];
        fprintf(stderr, "  %s\n", name);
        td_scope_begin();
        td_module *m = make_module(name);
        ASSERT(m);
        td_named_tensors *sd = fixture_state(name);
        ASSERT_OK(td_module_load_state_dict(m, sd, true));
        td_named_tensors_free(sd);
        ASSERT_OK(td_module_to_dtype(m, TD_F64));
        td_tensor *x = ASSERT_TENSOR(td_cast(need(fxt(name, ".x", TD_CPU), "x"), TD_F64));
        ASSERT_OK(td_set_requires_grad(x, true));
        td_gradcheck_options o = {.eps = 1e-6, .atol = 1e-5, .rtol = 1e-3};
        ASSERT_OK(td_gradcheck(module_fn, m, 1, &x, &o));
        td_scope_end();
        td_module_free(m);
    }
}

static td_tensor *loss_fn(void *user, int n, td_tensor *const *in) {
    return run_loss(user, in[0], in[1], n > 2 ? in[2] : NULL);
}

TEST(gradcheck_losses) {
    for (size_t i = 0; i < sizeof loss_cases / sizeof *loss_cases; i++) {
        const char *n = loss_cases[i];
        fprintf(stderr, "  %s\n", n);
        td_scope_begin();
        td_tensor *in[3] = {ASSERT_TENSOR(td_cast(need(fxt(n, ".x", TD_CPU), "x"), TD_F64)),
                            ASSERT_TENSOR(td_cast(need(fxt(n, ".a0", TD_CPU), "a0"), TD_F64)), fxt(n, ".a1", TD_CPU)};
        int k = in[2] ? 3 : 2;
        ASSERT_OK(td_set_requires_grad(in[0], true));
        /* the target too where it is differentiable everywhere (not at |x - t| = 0 kinks or t = 0) */
        if (!strncmp(n, "kl_", 3) && strstr(n, "logtarget")) ASSERT_OK(td_set_requires_grad(in[1], true));
        if (!strncmp(n, "cosemb", 6)) ASSERT_OK(td_set_requires_grad(in[1], true));
        ASSERT_OK(td_gradcheck(loss_fn, (void *)n, k, in, NULL));
        td_scope_end();
    }
}

/* eps < 0 is torch's None: finfo(dtype).eps, so float32 and float64 differ on tiny inputs. */
TEST(rmsnorm_eps_none) {
    td_scope_begin();
    td_module *m = td_rms_norm_new(1, (int64_t[]){2}, -1, false);
    ASSERT(m);
    double v[2] = {1e-4, -1e-4}; /* mean(x^2) = 1e-8: y = x / sqrt(1e-8 + eps) */
    td_tensor *x32 = ASSERT_TENSOR(test_tensor_f64(v, 1, (int64_t[]){2}, TD_F32));
    td_tensor *x64 = ASSERT_TENSOR(test_tensor_f64(v, 1, (int64_t[]){2}, TD_F64));
    ASSERT_NEAR(td_item(td_select(td_module_forward(m, x32), 0, 0)), 1e-4 / sqrt(1e-8 + 0x1p-23), 1e-6);
    ASSERT_NEAR(td_item(td_select(td_module_forward(m, x64), 0, 0)), 1e-4 / sqrt(1e-8 + 0x1p-52), 1e-12);
    td_module_free(m);
    td_scope_end();
}

TEST(bad_arguments) {
    td_scope_begin();
    ASSERT_ERROR(td_group_norm_new(3, 4, 1e-5, true), TD_ERR_MISUSE, "num_channels 4 must be a positive multiple");
    ASSERT_ERROR(td_rms_norm_new(0, NULL, -1, true), TD_ERR_MISUSE, "normalized shape needs 1 to");
    ASSERT_ERROR(td_instance_norm2d_new(0, 1e-5, 0.1, false, false), TD_ERR_MISUSE, "num_features 0");
    ASSERT_ERROR(td_conv_transpose2d_new(4, 4, (int[]){3, 3}, (int[]){1, 1}, NULL, (int[]){1, 0}, 1, true, NULL),
                 TD_ERR_MISUSE, "output_padding 1 must be smaller than either stride 1 or dilation 1");
    ASSERT_ERROR(
        td_conv_transpose2d_new(4, 4, (int[]){3, 3}, (int[]){1, 1}, NULL, (int[]){1, 0}, 1, true, (int[]){2, 1}),
        TD_ERR_UNSUPPORTED, "output_padding 1 must be smaller than stride 1");
    ASSERT_ERROR(td_conv_transpose1d_new(3, 4, 3, 1, 0, 0, 2, true, 1), TD_ERR_MISUSE, "multiples of groups 2");
    td_module *gn = td_group_norm_new(2, 4, 1e-5, true),
              *ct = td_conv_transpose2d_new(2, 3, (int[]){2, 2}, NULL, NULL, NULL, 1, true, NULL);
    td_module *rms = td_rms_norm_new(1, (int64_t[]){5}, -1, true);
    ASSERT(gn && ct && rms);
    td_tensor *x = ASSERT_TENSOR(td_zeros(4, (int64_t[]){1, 3, 4, 4}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_module_forward(gn, x), TD_ERR_SHAPE, "expected 4 channels in dim 1");
    ASSERT_ERROR(td_module_forward(ct, x), TD_ERR_SHAPE, "expected 2 input channels");
    ASSERT_ERROR(td_module_forward(rms, x), TD_ERR_SHAPE, "does not end in the normalized shape [5]");
    td_tensor *w = ASSERT_TENSOR(td_zeros(4, (int64_t[]){2, 3, 2, 2}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_conv_transpose2d(x, w, NULL, NULL, NULL, NULL, 1, NULL), TD_ERR_SHAPE, "input has 3 channels");
    td_tensor *a = ASSERT_TENSOR(td_zeros(2, (int64_t[]){2, 3}, TD_F32, TD_CPU));
    td_tensor *b = ASSERT_TENSOR(td_zeros(2, (int64_t[]){3, 2}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_smooth_l1_loss(a, b, TD_REDUCE_MEAN, 1), TD_ERR_SHAPE, "input shape [2,3] and target shape [3,2]");
    ASSERT_ERROR(td_smooth_l1_loss(a, a, TD_REDUCE_MEAN, -1), TD_ERR_MISUSE, "beta -1");
    ASSERT_ERROR(td_huber_loss(a, a, TD_REDUCE_BATCHMEAN, 1), TD_ERR_MISUSE, "reduction 3 is not none");
    ASSERT_ERROR(td_kl_div_loss(a, NULL, TD_REDUCE_SUM, false), TD_ERR_MISUSE, "target");
    ASSERT_ERROR(td_cosine_embedding_loss(a, a, a, 0, TD_REDUCE_MEAN), TD_ERR_SHAPE, "target shape [2,3]");
    ASSERT_ERROR(td_interpolate_nearest(a, (int64_t[]){2}, NULL), TD_ERR_SHAPE, "got 2 dims");
    ASSERT_ERROR(td_interpolate_nearest(x, (int64_t[]){2, 2}, (double[]){2, 2}), TD_ERR_MISUSE, "exactly one");
    ASSERT_ERROR(td_interpolate_nearest(x, NULL, (double[]){0.1, 2}), TD_ERR_MISUSE, "scale_factor 0.1 gives no");
    ASSERT_ERROR(td_adaptive_max_pool2d_new(0, 2), TD_ERR_MISUSE, "output size 0x2");
    td_module_free(gn);
    td_module_free(ct);
    td_module_free(rms);
    td_scope_end();
}

TEST_MAIN(TESTS)
