/* Issue 25, part 2, against PyTorch: Upsample linear/bilinear (align_corners both ways), Conv3d, Embedding's
** padding_idx and max_norm and AdaptiveMaxPool2d's indices (forward, input and parameter gradients, the weight after
*the in-place renorm,
** state_dict keys) on the CPU and Vulkan (CUDA skips without a GPU), and the CTC loss on the CPU, Vulkan and CUDA
*(value and
** PyTorch's gradient; the device recursion against the host one); gradchecks in float64; bad arguments. References:
*tests/fixtures/gen_layers_more.py
** (torch 1.13, float64); |got - want| <= tol (1 + |want|), equal non-finite values match. */
#include "tdfx.h"
#include "test_util.h"

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(modules_cpu) X(modules_vulkan) X(modules_cuda) X(state_dict_keys) X(gradcheck_modules) X(embedding_init)       \
    X(depthwise_vs_per_channel) X(amp_indices_cpu) X(amp_indices_vulkan) X(amp_indices_cuda) X(ctc_cpu) X(gradcheck_ctc) X(ctc_vulkan) X(ctc_cuda) X(bad_arguments)
/* clang-format on */

static tdfx *fx;

static tdfx *fixtures(void) {
    if (!fx) fx = tdfx_open("layers_more.tdfx");
    if (!fx) TEST_FAIL_("fixtures missing (tests/fixtures/layers_more.tdfx)");
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

/* got and want elementwise within tol (1 + |want|) (inf = inf, NaN = NaN): the first mismatches and the
** largest difference. */
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
        if ((isnan(g[i]) && isnan(w[i])) || (isinf(w[i]) && g[i] == w[i])) continue;
        double d = fabs(g[i] - w[i]);
        if (!(d <= maxd)) maxd = isnan(d) ? INFINITY : d;
        if (!(d <= tol * (1 + fabs(w[i]))) && bad++ < 5)
            fprintf(stderr, "  %s[%lld]: got %.9g want %.9g\n", what, (long long)i, g[i], w[i]);
    }
    free(g);
    free(w);
    if (bad) TEST_FAIL_("%s: %d of %lld elements differ, max |diff| %.3g", what, bad, (long long)n, maxd);
}

/* The modules of the fixtures, by case name (PyTorch's arguments in gen_layers_more.py). */
static td_module *make_module(const char *n) {
    if (!strcmp(n, "bilinear_ac")) return td_upsample_linear_new(2, (int64_t[]){5, 7}, NULL, true);
    if (!strcmp(n, "bilinear_noac")) return td_upsample_linear_new(2, (int64_t[]){5, 7}, NULL, false);
    if (!strcmp(n, "bilinear_scale")) return td_upsample_linear_new(2, NULL, (double[]){1.7, 2.0}, false);
    if (!strcmp(n, "bilinear_down_ac")) return td_upsample_linear_new(2, (int64_t[]){2, 3}, NULL, true);
    if (!strcmp(n, "bilinear_down")) return td_upsample_linear_new(2, (int64_t[]){1, 3}, NULL, false);
    if (!strcmp(n, "linear_ac")) return td_upsample_linear_new(1, (int64_t[]){9}, NULL, true);
    if (!strcmp(n, "linear_scale")) return td_upsample_linear_new(1, NULL, (double[]){2.5}, false);
    if (!strcmp(n, "conv3d"))
        return td_conv3d_new(4, 6, (int[]){3, 2, 3}, (int[]){2, 1, 2}, (int[]){1, 0, 1}, (int[]){1, 2, 1}, 2, true);
    if (!strcmp(n, "conv3d_plain")) return td_conv3d_new(2, 3, (int[]){2, 2, 2}, NULL, NULL, NULL, 1, false);
    if (!strcmp(n, "conv3d_depthwise"))
        return td_conv3d_new(3, 3, (int[]){3, 3, 3}, NULL, (int[]){1, 1, 1}, NULL, 3, true);
    if (!strcmp(n, "emb_pad")) return td_embedding_new_ext(6, 4, (int64_t[]){0}, 0, 2);
    if (!strcmp(n, "emb_pad_neg")) return td_embedding_new_ext(6, 4, (int64_t[]){-3}, 0, 2);
    if (!strcmp(n, "emb_maxnorm")) return td_embedding_new_ext(6, 4, NULL, 0.6, 2);
    if (!strcmp(n, "emb_maxnorm_p1_pad")) return td_embedding_new_ext(6, 4, (int64_t[]){2}, 0.9, 1);
    if (!strcmp(n, "dwconv2d")) return td_conv2d_new(4, 4, (int[]){3, 3}, NULL, (int[]){1, 1}, NULL, 4, true);
    if (!strcmp(n, "dwconv2d_strided"))
        return td_conv2d_new(3, 3, (int[]){3, 2}, (int[]){2, 3}, (int[]){2, 1}, (int[]){2, 1}, 3, true);
    TEST_FAIL_("no module for case %s", n);
}

static const char *const module_cases[] = {"bilinear_ac",   "bilinear_noac",      "bilinear_scale", "bilinear_down_ac",
                                           "bilinear_down", "linear_ac",          "linear_scale",   "conv3d",
                                           "conv3d_plain",  "conv3d_depthwise",   "emb_pad",        "emb_pad_neg",
                                           "emb_maxnorm",   "emb_maxnorm_p1_pad", "dwconv2d",       "dwconv2d_strided"};
#define N_MODULES (int)(sizeof module_cases / sizeof *module_cases)

/* The entries "<name>.s.<key>" as a state dict keyed by <key>. */
static td_named_tensors *fixture_state(const char *name) {
    tdfx *f = fixtures();
    char prefix[128];
    size_t len = (size_t)snprintf(prefix, sizeof prefix, "%s.s.", name);
    td_named_tensors *sd = td_named_tensors_new();
    for (int i = 0; i < f->n; i++) {
        if (strncmp(f->e[i].name, prefix, len)) continue;
        td_tensor *t = ASSERT_TENSOR(tdfx_tensor(f, f->e[i].name));
        ASSERT_OK(td_named_tensors_add(sd, f->e[i].name + len, t)); /* the list keeps its own reference */
        td_release(t);
    }
    return sd;
}

/* Case name on dev: load the state strictly, forward, backward of gy; compare y, dx, the parameter gradients
** and the weight after the forward ("w_after", max_norm's in-place renorm). */
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
    bool fl = td_dtype_is_float(td_tensor_dtype(x));
    if (fl) ASSERT_OK(td_set_requires_grad(x, true));
    td_tensor *y = ASSERT_TENSOR(td_module_forward(m, x));
    check_close(y, need(fxt(name, ".y", TD_CPU), "y"), tol, "y");
    ASSERT_OK(td_backward(y, need(fxt(name, ".gy", dev), "gy"), false));
    if (fl) check_close(td_grad_of(x), need(fxt(name, ".dx", TD_CPU), "dx"), tol, "dx");
    tdfx *f = fixtures();
    char gp[128];
    size_t gl = (size_t)snprintf(gp, sizeof gp, "%s.g.", name);
    for (int i = 0; i < f->n; i++)
        if (!strncmp(f->e[i].name, gp, gl))
            check_close(td_grad_of(ASSERT_TENSOR(td_module_get(m, f->e[i].name + gl))), tdfx_tensor(f, f->e[i].name),
                        tol, f->e[i].name);
    td_tensor *after = fxt(name, ".w_after", TD_CPU);
    if (after) check_close(td_module_get(m, "weight"), after, tol, "w_after");
    td_scope_end();
    td_module_free(m);
}

static void modules_on(td_device dev, double tol) {
    for (int i = 0; i < N_MODULES; i++) module_parity(module_cases[i], dev, tol);
}

TEST(modules_cpu) { modules_on(TD_CPU, 1e-5); }
TEST(modules_vulkan) { modules_on(test_device_or_skip("vulkan:0"), 1e-4); }
TEST(modules_cuda) { modules_on(test_device_or_skip("cuda:0"), 1e-4); }

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
        td_named_tensors_free(mine);
        td_named_tensors_free(theirs);
        td_module_free(m);
    }
}

static td_tensor *module_fn(void *user, int n, td_tensor *const *in) {
    (void)n;
    return td_module_forward(user, in[0]);
}

/* float64 central differences through the input and every parameter (the embeddings: the weight) */
TEST(gradcheck_modules) {
    for (int i = 0; i < N_MODULES; i++) {
        const char *name = module_cases[i];
        bool emb = !strncmp(name, "emb_", 4);
        if (emb && strstr(name, "maxnorm")) continue; /* the forward rewrites the weight: not a function of it */
        fprintf(stderr, "  %s\n", name);
        td_scope_begin();
        td_module *m = make_module(name);
        ASSERT(m);
        td_named_tensors *sd = fixture_state(name);
        ASSERT_OK(td_module_load_state_dict(m, sd, true));
        td_named_tensors_free(sd);
        ASSERT_OK(td_module_to_dtype(m, TD_F64));
        td_tensor *x = need(fxt(name, ".x", TD_CPU), "x");
        td_gradcheck_options o = {.eps = 1e-6, .atol = 1e-5, .rtol = 1e-3};
        if (emb) {
            /* through the weight: the padding row's gradient must stay 0 (its numerical derivative is not) */
            td_tensor *w = td_module_get(m, "weight");
            td_tensor *y = ASSERT_TENSOR(td_module_forward(m, x));
            ASSERT_OK(td_backward(td_sum(td_mul(y, y), 0, NULL, false), NULL, false));
            int64_t pad = !strcmp(name, "emb_pad") ? 0 : 3;
            ASSERT_NEAR(td_item(td_sum(td_abs(td_select(td_grad_of(w), 0, pad)), 0, NULL, false)), 0, 0);
            ASSERT(td_item(td_sum(td_abs(td_grad_of(w)), 0, NULL, false)) > 0);
        } else {
            x = ASSERT_TENSOR(td_cast(x, TD_F64));
            ASSERT_OK(td_set_requires_grad(x, true));
            ASSERT_OK(td_gradcheck(module_fn, m, 1, &x, &o));
        }
        td_scope_end();
        td_module_free(m);
    }
}

/* padding_idx zeroes its row at construction; the others are N(0, 1). */
TEST(embedding_init) {
    td_scope_begin();
    td_module *m = td_embedding_new_ext(50, 8, (int64_t[]){-1}, 0, 2);
    ASSERT(m);
    td_tensor *w = td_module_get(m, "weight");
    ASSERT_NEAR(td_item(td_sum(td_abs(td_select(w, 0, 49)), 0, NULL, false)), 0, 0);
    ASSERT(td_item(td_sum(td_abs(td_select(w, 0, 48)), 0, NULL, false)) > 0);
    td_module_free(m);
    td_scope_end();
}

/* The CPU's direct depthwise kernels (groups == C == O) against conv2d run one channel at a time
** (groups 1: im2col + GEMM), forward and both gradients, in f32 and f64, over strides, paddings,
** dilations and kernels that overhang the input. */
TEST(depthwise_vs_per_channel) {
    static const int cfg[][8] = {/* kh kw sh sw ph pw dh dw */
                                 {3, 3, 1, 1, 1, 1, 1, 1}, {3, 3, 2, 2, 1, 1, 1, 1}, {5, 3, 1, 2, 2, 0, 1, 2},
                                 {3, 5, 3, 1, 0, 4, 2, 1}, {1, 1, 1, 1, 0, 0, 1, 1}, {7, 7, 2, 1, 3, 3, 1, 1},
                                 {3, 3, 1, 3, 1, 2, 1, 1}, {2, 4, 2, 4, 0, 3, 1, 2}};
    for (int dt = 0; dt < 2; dt++)
        for (size_t k = 0; k < sizeof cfg / sizeof *cfg; k++) {
            const int *c = cfg[k];
            td_scope_begin();
            td_dtype t = dt ? TD_F64 : TD_F32;
            int64_t N = 2, C = 5, H = 9, W = 11;
            td_tensor *x = ASSERT_TENSOR(td_randn(4, (int64_t[]){N, C, H, W}, 7, k, t, TD_CPU));
            td_tensor *w = ASSERT_TENSOR(td_randn(4, (int64_t[]){C, 1, c[0], c[1]}, 8, k, t, TD_CPU));
            td_tensor *b = ASSERT_TENSOR(td_randn(1, &C, 9, k, t, TD_CPU));
            td_tensor *xs[2] = {x, td_clone(x)}, *ws[2] = {w, td_clone(w)}, *bs[2] = {b, td_clone(b)};
            for (int i = 0; i < 2; i++) {
                ASSERT_OK(td_set_requires_grad(xs[i], true));
                ASSERT_OK(td_set_requires_grad(ws[i], true));
                ASSERT_OK(td_set_requires_grad(bs[i], true));
            }
            const int st[2] = {c[2], c[3]}, pd[2] = {c[4], c[5]}, dl[2] = {c[6], c[7]};
            td_tensor *y = ASSERT_TENSOR(td_conv2d(xs[0], ws[0], bs[0], st, pd, dl, (int)C)), *parts[5];
            for (int64_t ch = 0; ch < C; ch++)
                parts[ch] = td_conv2d(td_slice(xs[1], 1, ch, ch + 1, 1), td_slice(ws[1], 0, ch, ch + 1, 1),
                                      td_slice(bs[1], 0, ch, ch + 1, 1), st, pd, dl, 1);
            td_tensor *yr = ASSERT_TENSOR(td_cat((int)C, parts, 1));
            double tol = dt ? 1e-12 : 1e-5;
            check_close(y, yr, tol, "y");
            td_tensor *gy = td_randn(4, td_shape(y), 10, k, t, TD_CPU);
            ASSERT_OK(td_backward(y, gy, false));
            ASSERT_OK(td_backward(yr, gy, false));
            check_close(td_grad_of(xs[0]), td_grad_of(xs[1]), tol, "dx");
            check_close(td_grad_of(ws[0]), td_grad_of(ws[1]), tol, "dw");
            check_close(td_grad_of(bs[0]), td_grad_of(bs[1]), tol, "db");
            td_scope_end();
        }
}

/* ---- AdaptiveMaxPool2d with indices ---- */

static void amp_indices_on(td_device dev) {
    static const char *const cases[] = {"amp_idx", "amp_idx_even", "amp_idx_ties", "amp_idx_unbatched"};
    static const int64_t out[][2] = {{3, 2}, {2, 3}, {2, 3}, {4, 4}};
    for (int i = 0; i < 4; i++) {
        const char *n = cases[i];
        fprintf(stderr, "  %s\n", n);
        td_scope_begin();
        td_tensor *x = need(fxt(n, ".x", dev), "x"), *idx = NULL;
        ASSERT_OK(td_set_requires_grad(x, true));
        td_tensor *y = ASSERT_TENSOR(td_adaptive_max_pool2d_with_indices(x, out[i][0], out[i][1], &idx));
        check_close(y, need(fxt(n, ".y", TD_CPU), "y"), 1e-6, "y");
        ASSERT(td_tensor_dtype(idx) == TD_I64);
        check_close(idx, need(fxt(n, ".idx", TD_CPU), "idx"), 0, "indices");
        ASSERT_OK(td_backward(y, need(fxt(n, ".gy", dev), "gy"), false));
        check_close(td_grad_of(x), need(fxt(n, ".dx", TD_CPU), "dx"), 1e-6, "dx");
        td_scope_end();
    }
}

TEST(amp_indices_cpu) { amp_indices_on(TD_CPU); }
TEST(amp_indices_vulkan) { amp_indices_on(test_device_or_skip("vulkan:0")); }
TEST(amp_indices_cuda) { amp_indices_on(test_device_or_skip("cuda:0")); }

/* ---- CTC ---- */

static td_tensor *run_ctc(const char *n, td_tensor *lp) {
    td_tensor *tg = fxt(n, ".a0", TD_CPU), *il = fxt(n, ".a1", TD_CPU), *tl = fxt(n, ".a2", TD_CPU);
    if (!strcmp(n, "ctc_mean") || !strcmp(n, "ctc_flat")) return td_ctc_loss(lp, tg, il, tl, 0, TD_REDUCE_MEAN, false);
    if (!strcmp(n, "ctc_sum")) return td_ctc_loss(lp, tg, il, tl, 0, TD_REDUCE_SUM, false);
    if (!strcmp(n, "ctc_none")) return td_ctc_loss(lp, tg, il, tl, 0, TD_REDUCE_NONE, false);
    if (!strcmp(n, "ctc_blank4_inf")) return td_ctc_loss(lp, tg, il, tl, 4, TD_REDUCE_NONE, false);
    if (!strcmp(n, "ctc_blank4_zeroinf")) return td_ctc_loss(lp, tg, il, tl, 4, TD_REDUCE_MEAN, true);
    TEST_FAIL_("no Trident call for CTC case %s", n);
}

static const char *const ctc_cases[] = {"ctc_mean", "ctc_sum",        "ctc_none",
                                        "ctc_flat", "ctc_blank4_inf", "ctc_blank4_zeroinf"};
#define N_CTC (int)(sizeof ctc_cases / sizeof *ctc_cases)

TEST(ctc_cpu) {
    for (int dt = 0; dt < 2; dt++)
        for (int i = 0; i < N_CTC; i++) {
            const char *n = ctc_cases[i];
            fprintf(stderr, "  %s %s\n", n, dt ? "f64" : "f32");
            td_scope_begin();
            td_tensor *lp = ASSERT_TENSOR(td_cast(need(fxt(n, ".x", TD_CPU), "x"), dt ? TD_F64 : TD_F32));
            ASSERT_OK(td_set_requires_grad(lp, true));
            td_tensor *y = ASSERT_TENSOR(run_ctc(n, lp));
            check_close(y, need(fxt(n, ".y", TD_CPU), "y"), 1e-5, n);
            ASSERT_OK(td_backward(y, td_ndim(y) ? need(fxt(n, ".gy", TD_CPU), "gy") : NULL, false));
            check_close(td_grad_of(lp), need(fxt(n, ".dx", TD_CPU), "dx"), 1e-5, "dx");
            td_scope_end();
        }
}

/* PyTorch's gradient is exact for logits -> log_softmax -> ctc: check that composition in float64. */
static td_tensor *ctc_logits_fn(void *user, int n, td_tensor *const *in) {
    (void)n;
    return run_ctc(user, td_log_softmax(in[0], 2));
}

TEST(gradcheck_ctc) {
    for (int i = 0; i < N_CTC; i++) {
        const char *n = ctc_cases[i];
        if (!strcmp(n, "ctc_blank4_inf")) continue; /* inf has no derivative */
        fprintf(stderr, "  %s\n", n);
        td_scope_begin();
        td_tensor *x = ASSERT_TENSOR(td_cast(need(fxt(n, ".x", TD_CPU), "x"), TD_F64));
        ASSERT_OK(td_set_requires_grad(x, true));
        ASSERT_OK(td_gradcheck(ctc_logits_fn, (void *)n, 1, &x, NULL));
        td_scope_end();
    }
}

/* The composed recursion (ctc_loss_device.c) on dev against PyTorch, f32: every case, value and gradient. */
static void ctc_on(td_device dev) {
    for (int i = 0; i < N_CTC; i++) {
        const char *n = ctc_cases[i];
        fprintf(stderr, "  %s\n", n);
        td_scope_begin();
        td_tensor *lp = ASSERT_TENSOR(td_to(td_cast(need(fxt(n, ".x", TD_CPU), "x"), TD_F32), dev));
        ASSERT_OK(td_set_requires_grad(lp, true));
        td_tensor *y = ASSERT_TENSOR(run_ctc(n, lp));
        check_close(y, need(fxt(n, ".y", TD_CPU), "y"), 1e-5, n);
        ASSERT_OK(td_backward(y, td_ndim(y) ? need(fxt(n, ".gy", dev), "gy") : NULL, false));
        check_close(td_grad_of(lp), need(fxt(n, ".dx", TD_CPU), "dx"), 1e-5, "dx");
        td_scope_end();
    }
}

/* A bigger random batch (T 40, N 6, C 9, ragged lengths, repeats, an empty target, a sample with no frames)
** on dev against the host recursion in double, with every reduction and both zero_infinity settings. */
static void ctc_vs_host(td_device dev) {
    enum { T = 40, N = 6, C = 9, S = 12 };
    int64_t il[N] = {40, 31, 7, 0, 25, 40}, tl[N] = {12, 5, 6, 0, 0, 9}, tg[N * S];
    for (int i = 0; i < N * S; i++) tg[i] = 1 + (i * 7 + i / 5) % (C - 1); /* never blank 0; repeats */
    tg[1] = tg[0], tg[14] = tg[13] = tg[12];                               /* runs: skips forbidden */
    for (int r = 0; r < 3; r++)
        for (int zi = 0; zi < 2; zi++) {
            td_scope_begin();
            td_tensor *tgt = td_from_data(tg, 2, (int64_t[]){N, S}, TD_I64, TD_CPU);
            td_tensor *ilt = td_from_data(il, 1, (int64_t[]){N}, TD_I64, TD_CPU);
            td_tensor *tlt = td_from_data(tl, 1, (int64_t[]){N}, TD_I64, TD_CPU);
            td_tensor *x = td_randn(3, (int64_t[]){T, N, C}, 7, 0, TD_F64, TD_CPU);
            td_tensor *lph = ASSERT_TENSOR(td_log_softmax(td_mul_scalar(x, 2), 2));
            td_tensor *lpd = ASSERT_TENSOR(td_to(td_cast(lph, TD_F32), dev));
            ASSERT_OK(td_set_requires_grad(lph, true));
            ASSERT_OK(td_set_requires_grad(lpd, true));
            td_reduction red = r == 0 ? TD_REDUCE_NONE : r == 1 ? TD_REDUCE_SUM : TD_REDUCE_MEAN;
            td_tensor *yh = ASSERT_TENSOR(td_ctc_loss(lph, tgt, ilt, tlt, 0, red, zi));
            td_tensor *yd = ASSERT_TENSOR(td_ctc_loss(lpd, tgt, ilt, tlt, 0, red, zi));
            check_close(yd, yh, 1e-5, "nll"); /* dx: f32 over 40 steps against double, 1e-4 */
            td_tensor *gy = r ? NULL : td_rand(1, (int64_t[]){N}, 3, 0, TD_F64, TD_CPU);
            ASSERT_OK(td_backward(yh, gy, false));
            ASSERT_OK(td_backward(yd, gy ? td_to(td_cast(gy, TD_F32), dev) : NULL, false));
            check_close(td_grad_of(lpd), td_grad_of(lph), 1e-4, "dx");
            td_scope_end();
        }
}

TEST(ctc_vulkan) {
    td_device dev = test_device_or_skip("vulkan:0");
    ctc_on(dev);
    ctc_vs_host(dev);
}

TEST(ctc_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    ctc_on(dev);
    ctc_vs_host(dev);
}

TEST(bad_arguments) {
    td_scope_begin();
    td_tensor *x3 = ASSERT_TENSOR(td_zeros(3, (int64_t[]){1, 2, 4}, TD_F32, TD_CPU));
    td_tensor *x5 = ASSERT_TENSOR(td_zeros(5, (int64_t[]){1, 2, 3, 3, 3}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_interpolate_linear(x5, (int64_t[]){2, 2, 2}, NULL, false), TD_ERR_SHAPE, "got 5 dims");
    ASSERT_ERROR(td_interpolate_linear(x3, (int64_t[]){2}, (double[]){2}, false), TD_ERR_MISUSE, "exactly one");
    ASSERT_ERROR(td_interpolate_linear(x3, NULL, (double[]){0.1}, true), TD_ERR_MISUSE, "scale_factor 0.1 gives no");
    ASSERT_ERROR(td_upsample_linear_new(3, (int64_t[]){2, 2, 2}, NULL, false), TD_ERR_MISUSE, "3 spatial dims");
    ASSERT_ERROR(td_conv3d_new(3, 4, (int[]){1, 1, 1}, NULL, NULL, NULL, 2, true), TD_ERR_MISUSE,
                 "multiples of groups 2");
    td_tensor *w = ASSERT_TENSOR(td_zeros(5, (int64_t[]){4, 3, 1, 1, 1}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_conv3d(x5, w, NULL, NULL, NULL, NULL, 1), TD_ERR_SHAPE, "input has 2 channels");
    td_tensor *wk = ASSERT_TENSOR(td_zeros(5, (int64_t[]){4, 2, 5, 1, 1}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_conv3d(x5, wk, NULL, NULL, NULL, NULL, 1), TD_ERR_SHAPE, "padded depth 3 is smaller");
    ASSERT_ERROR(td_embedding_new_ext(5, 2, (int64_t[]){5}, 0, 2), TD_ERR_MISUSE, "padding_idx 5 must be within");
    ASSERT_ERROR(td_embedding_new_ext(5, 2, NULL, 1, 0), TD_ERR_MISUSE, "norm_type 0");
    td_tensor *amp_idx = NULL;
    ASSERT_ERROR(td_adaptive_max_pool2d_with_indices(x5, 2, 2, &amp_idx), TD_ERR_SHAPE, "[N, C, H, W] or [C, H, W]");
    ASSERT(!amp_idx);
    ASSERT_ERROR(td_adaptive_max_pool2d_with_indices(x3, 0, 2, &amp_idx), TD_ERR_MISUSE, "output size 0x2");
    ASSERT_ERROR(td_adaptive_max_pool2d_with_indices(x3, 1, 1, NULL), TD_ERR_MISUSE, "indices (OUT) is NULL");
    td_tensor *lp = ASSERT_TENSOR(td_zeros(3, (int64_t[]){4, 2, 3}, TD_F32, TD_CPU));
    int64_t tgv[4] = {1, 2, 2, 0}, ilv[2] = {4, 4}, tlv[2] = {2, 1}, badl[2] = {5, 4};
    td_tensor *tg = td_from_data(tgv, 2, (int64_t[]){2, 2}, TD_I64, TD_CPU);
    td_tensor *il = td_from_data(ilv, 1, (int64_t[]){2}, TD_I64, TD_CPU);
    td_tensor *tl = td_from_data(tlv, 1, (int64_t[]){2}, TD_I64, TD_CPU);
    td_tensor *bl = td_from_data(badl, 1, (int64_t[]){2}, TD_I64, TD_CPU);
    ASSERT_TENSOR(td_ctc_loss(lp, tg, il, tl, 0, TD_REDUCE_MEAN, false));
    ASSERT_ERROR(td_ctc_loss(lp, tg, bl, tl, 0, TD_REDUCE_MEAN, false), TD_ERR_SHAPE, "input_lengths[0] = 5");
    ASSERT_ERROR(td_ctc_loss(lp, tg, il, bl, 0, TD_REDUCE_MEAN, false), TD_ERR_SHAPE, "target_lengths[0] = 5");
    ASSERT_ERROR(td_ctc_loss(lp, tg, il, tl, 2, TD_REDUCE_MEAN, false), TD_ERR_INDEX, "target 1 of sample 0 is 2");
    ASSERT_ERROR(td_ctc_loss(lp, tg, il, tl, 3, TD_REDUCE_MEAN, false), TD_ERR_MISUSE, "blank 3 is not a class");
    ASSERT_ERROR(td_ctc_loss(td_zeros(3, (int64_t[]){4, 3, 3}, TD_F32, TD_CPU), tg, il, tl, 0, TD_REDUCE_MEAN, false),
                 TD_ERR_SHAPE, "input_lengths has 2 elements, want 3");
    ASSERT_ERROR(td_ctc_loss(lp, il, il, tl, 0, TD_REDUCE_MEAN, false), TD_ERR_SHAPE, "1-D targets have 2 labels");
    td_tensor *ilf = ASSERT_TENSOR(td_cast(il, TD_F32));
    ASSERT_ERROR(td_ctc_loss(lp, tg, ilf, tl, 0, TD_REDUCE_MEAN, false), TD_ERR_DTYPE, "input_lengths must be");
    td_scope_end();
}

TEST_MAIN(TESTS)
