/* nn and optim behaviour: names, train/eval, state dicts, init statistics,
** schedulers and clipping against closed forms, optimizer state round trips,
** and bad input to this layer (each a clear error). Random inputs come from
** the printed seed. */
#include "test_util.h"

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(named_parameters)                                                                                                \
    X(state_dict_names_and_buffers)                                                                                    \
    X(state_dict_roundtrip)                                                                                            \
    X(load_state_dict_mismatch) X(load_state_dict_optional_buffer) X(load_state_dict_report)                          \
        X(load_state_dict_map_keys) X(module_registration_errors) X(init_statistics) X(init_functions)                     \
        X(init_reproducible) X(dropout_train_eval) X(batchnorm_train_eval) X(mha_causal)                               \
            X(adaptive_pool_and_softmax_dim) X(zero_grad_and_to) X(schedulers_closed_form) X(clip_grad)                \
                X(optimizer_state_roundtrip) X(optimizer_groups_and_lr) X(optimizer_bad_input) X(loss_bad_input)       \
                    X(layer_bad_input) X(constructor_bad_input) X(w2_cnn_shapes) X(module_to_dtype) X(flatten_parameters)   \
                        X(no_leaks)
/* clang-format on */

#define SEED 20240611ull

static td_tensor *randu(int ndim, const int64_t *shape, uint64_t offset) {
    fprintf(stderr, "  seed %llu offset %llu\n", (unsigned long long)SEED, (unsigned long long)offset);
    return ASSERT_TENSOR(td_rand(ndim, shape, SEED, offset, TD_F32, TD_CPU));
}

static double *host(td_tensor *t) {
    ASSERT(t);
    int64_t n = td_numel(t);
    double *v = malloc((size_t)n * sizeof *v + 8);
    ASSERT(v);
    ASSERT_OK(td_copy_to_host(t, v, (size_t)n * sizeof *v, TD_F64));
    return v;
}

static void assert_names(td_named_tensors *sd, int n, const char *const *want) {
    ASSERT(sd);
    if (td_named_tensors_len(sd) != n)
        for (int i = 0; i < td_named_tensors_len(sd); i++) fprintf(stderr, "  have %s\n", td_named_tensors_name(sd, i));
    ASSERT_EQ_INT(td_named_tensors_len(sd), n);
    for (int i = 0; i < n; i++)
        if (strcmp(td_named_tensors_name(sd, i), want[i]))
            TEST_FAIL_("entry %d is %s, want %s", i, td_named_tensors_name(sd, i), want[i]);
}

static td_module *mlp(void) {
    return td_sequential_new(3, (td_module *[]){td_linear_new(4, 3, true), td_relu_new(), td_linear_new(3, 2, true)});
}

static td_tensor *block_forward(td_module *self, td_tensor *x) {
    return td_add(x, td_module_forward(td_module_child(self, "fc"), x)); /* residual */
}

TEST(named_parameters) {
    td_module *m = mlp();
    ASSERT(m);
    static const char *want[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    td_named_tensors *sd = td_module_named_parameters(m);
    assert_names(sd, 4, want);
    td_named_tensors_free(sd);
    td_tensor *ps[8];
    ASSERT_EQ_INT(td_module_parameters(m, ps, 8), 4);
    ASSERT_EQ_INT(td_module_parameters(m, NULL, 0), 4);
    ASSERT(ps[2] == td_module_get(m, "2.weight"));
    ASSERT_EQ_INT(td_size(ps[2], 0), 2);
    ASSERT(td_requires_grad(ps[0]));
    ASSERT(!strcmp(td_module_type(td_module_child(m, "1")), "ReLU"));
    /* a custom residual block with a named child, nested in a container */
    td_module *blk = td_module_new("Block", block_forward, NULL, NULL);
    ASSERT_OK(td_module_register_module(blk, "fc", td_linear_new(3, 3, false)));
    td_module *outer = td_module_new("Net", block_forward, NULL, NULL);
    ASSERT_OK(td_module_register_module(outer, "fc", blk));
    static const char *want2[] = {"fc.fc.weight"};
    sd = td_module_named_parameters(outer);
    assert_names(sd, 1, want2);
    td_named_tensors_free(sd);
    ASSERT(td_module_child(outer, "fc.fc") != NULL);
    ASSERT(!strcmp(td_module_type(blk), "Block"));
    td_module_free(outer);
    td_module_free(m);
}

TEST(state_dict_names_and_buffers) {
    td_module *bn = td_batch_norm2d_new(3, 1e-5, 0.1, true, true);
    static const char *bn_names[] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
    td_named_tensors *sd = td_module_state_dict(bn);
    assert_names(sd, 5, bn_names);
    ASSERT_EQ_INT(td_tensor_dtype(td_named_tensors_get(sd, "num_batches_tracked")), TD_I64);
    td_named_tensors_free(sd);
    sd = td_module_named_parameters(bn); /* buffers are not parameters */
    ASSERT_EQ_INT(td_named_tensors_len(sd), 2);
    td_named_tensors_free(sd);
    td_module_free(bn);
    td_module *mha = td_multihead_attention_new(8, 2, true, false);
    static const char *mha_names[] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
    sd = td_module_state_dict(mha);
    assert_names(sd, 4, mha_names);
    ASSERT_EQ_INT(td_size(td_named_tensors_get(sd, "in_proj_weight"), 0), 24);
    double *b = host(td_named_tensors_get(sd, "out_proj.bias"));
    for (int i = 0; i < 8; i++) ASSERT_NEAR(b[i], 0, 0); /* PyTorch zeroes MHA biases */
    free(b);
    td_named_tensors_free(sd);
    td_module_free(mha);
    td_module *ln = td_layer_norm_new(1, (int64_t[]){6}, 1e-5, false);
    sd = td_module_state_dict(ln);
    ASSERT_EQ_INT(td_named_tensors_len(sd), 0);
    td_named_tensors_free(sd);
    td_module_free(ln);
}

TEST(state_dict_roundtrip) {
    td_scope_begin();
    td_manual_seed(1);
    td_module *a = mlp();
    td_manual_seed(2);
    td_module *b = mlp();
    td_tensor *x = randu(2, (int64_t[]){5, 4}, 0);
    double *ya = host(td_module_forward(a, x)), *yb = host(td_module_forward(b, x));
    ASSERT(fabs(ya[0] - yb[0]) > 1e-6); /* different weights */
    td_named_tensors *sd = td_module_state_dict(a);
    ASSERT_OK(td_module_load_state_dict(b, sd, true));
    td_named_tensors_free(sd);
    double *yb2 = host(td_module_forward(b, x));
    for (int i = 0; i < 10; i++) ASSERT_NEAR(yb2[i], ya[i], 0);
    /* the copy is by value: b's tensors stay b's own */
    ASSERT(td_module_get(a, "0.weight") != td_module_get(b, "0.weight"));
    free(ya), free(yb), free(yb2);
    td_module_free(a);
    td_module_free(b);
    td_scope_end();
}

TEST(load_state_dict_mismatch) {
    td_scope_begin();
    td_module *m = mlp();
    /* a checkpoint of a different model: layer widths differ */
    td_module *other =
        td_sequential_new(3, (td_module *[]){td_linear_new(4, 5, true), td_relu_new(), td_linear_new(5, 2, true)});
    td_named_tensors *sd = td_module_state_dict(other);
    ASSERT_ERROR(td_module_load_state_dict(m, sd, true), TD_ERR_SHAPE,
                 "'0.weight': checkpoint shape [5,4], model shape [3,4]");
    td_named_tensors_free(sd);
    /* nothing was copied by the failed load */
    td_module *cnn = td_sequential_new(
        2, (td_module *[]){td_conv2d_new(1, 2, (int[]){3, 3}, NULL, NULL, NULL, 1, true), td_flatten_new(1, -1)});
    sd = td_module_state_dict(cnn);
    ASSERT_ERROR(td_module_load_state_dict(m, sd, true), TD_ERR_MISUSE,
                 "2 key(s) missing from the checkpoint: '2.weight', '2.bias'");
    ASSERT_ERROR(td_module_load_state_dict(m, sd, false), TD_ERR_SHAPE, "'0.weight'");
    td_named_tensors_free(sd);
    /* an extra key */
    sd = td_module_state_dict(m);
    ASSERT_OK(td_named_tensors_add(sd, "3.weight", td_module_get(m, "0.bias")));
    ASSERT_ERROR(td_module_load_state_dict(m, sd, true), TD_ERR_MISUSE,
                 "does not fit this Sequential: 1 unexpected key(s), e.g. '3.weight'");
    ASSERT_OK(td_module_load_state_dict(m, sd, false));
    td_named_tensors_free(sd);
    /* a dtype mismatch */
    sd = td_named_tensors_new();
    static const char *keys[] = {"0.weight", "0.bias", "2.weight"};
    for (int i = 0; i < 3; i++) ASSERT_OK(td_named_tensors_add(sd, keys[i], td_module_get(m, keys[i])));
    ASSERT_OK(td_named_tensors_add(sd, "2.bias", ASSERT_TENSOR(td_cast(td_module_get(m, "2.bias"), TD_F64))));
    ASSERT_ERROR(td_module_load_state_dict(m, sd, true), TD_ERR_DTYPE,
                 "'2.bias': checkpoint dtype float64, model dtype float32");
    td_named_tensors_free(sd);
    ASSERT_ERROR(td_module_load_state_dict(m, NULL, true), TD_ERR_MISUSE, "NULL");
    td_module_free(cnn);
    td_module_free(other);
    td_module_free(m);
    td_scope_end();
}

/* torch accepts a BatchNorm state dict without num_batches_tracked (the count restarts at 0) */
TEST(load_state_dict_optional_buffer) {
    td_scope_begin();
    td_module *bn = td_batch_norm2d_new(3, 1e-5, 0.1, true, true);
    td_module *m = td_sequential_new(1, (td_module *[]){bn});
    ASSERT_OK(td_copy_(td_module_get(m, "0.num_batches_tracked"), ASSERT_TENSOR(td_scalar(7, TD_I64, TD_CPU))));
    td_named_tensors *sd = td_module_state_dict(m);
    ASSERT_OK(td_named_tensors_remove(sd, "0.num_batches_tracked"));
    ASSERT_EQ_INT(td_named_tensors_len(sd), 4);
    td_load_report r;
    ASSERT_OK(td_module_load_state_dict_ext(m, sd, &(td_load_opts){.strict = true}, &r));
    ASSERT_EQ_INT(r.n_missing, 0);
    ASSERT_EQ_INT(td_item(td_module_get(m, "0.num_batches_tracked")), 0);
    td_load_report_clear(&r);
    /* other buffers stay required */
    ASSERT_OK(td_named_tensors_remove(sd, "0.running_mean"));
    ASSERT_ERROR(td_module_load_state_dict(m, sd, true), TD_ERR_MISUSE, "'0.running_mean'");
    td_named_tensors_free(sd);
    td_module_free(m);
    td_scope_end();
}

/* Non-strict loads report the keys they skipped (torch's missing_keys, unexpected_keys). */
TEST(load_state_dict_report) {
    td_scope_begin();
    td_module *m = mlp();
    td_named_tensors *sd = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_add(sd, "0.weight", ASSERT_TENSOR(td_zeros_like(td_module_get(m, "0.weight")))));
    ASSERT_OK(td_named_tensors_add(sd, "fc.weight", td_module_get(m, "0.bias")));
    td_load_report r;
    ASSERT_OK(td_module_load_state_dict_ext(m, sd, &(td_load_opts){.strict = false}, &r));
    ASSERT_EQ_INT(r.n_missing, 3);
    ASSERT(!strcmp(r.missing[0], "0.bias") && !strcmp(r.missing[1], "2.weight") && !strcmp(r.missing[2], "2.bias"));
    ASSERT_EQ_INT(r.n_unexpected, 1);
    ASSERT(!strcmp(r.unexpected[0], "fc.weight"));
    ASSERT_NEAR(td_item(td_sum(td_abs(td_module_get(m, "0.weight")), 0, NULL, false)), 0, 0); /* the match loaded */
    td_load_report_clear(&r);
    ASSERT(r.missing == NULL && r.n_missing == 0);
    /* nothing matches: still TD_OK when not strict, with every key reported */
    td_named_tensors *none = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_add(none, "x", td_module_get(m, "0.bias")));
    ASSERT_OK(td_module_load_state_dict_ext(m, none, &(td_load_opts){0}, &r));
    ASSERT_EQ_INT(r.n_missing, 4);
    ASSERT_EQ_INT(r.n_unexpected, 1);
    td_load_report_clear(&r);
    /* strict: an error, and the report is left empty */
    ASSERT_ERROR(td_module_load_state_dict_ext(m, sd, &(td_load_opts){.strict = true}, &r), TD_ERR_MISUSE,
                 "3 key(s) missing");
    ASSERT(r.n_missing == 0 && r.missing == NULL);
    td_named_tensors_free(none);
    td_named_tensors_free(sd);
    td_module_free(m);
    td_scope_end();
}

/* "module.0.weight" -> "0.weight": DataParallel's prefix stripped; other keys dropped */
static const char *strip_module(const char *name, void *ctx, char *buf, size_t size) {
    (void)buf, (void)size;
    size_t n = strlen((const char *)ctx);
    return strncmp(name, ctx, n) ? NULL : name + n;
}

TEST(load_state_dict_map_keys) {
    td_scope_begin();
    td_module *src = mlp(), *m = mlp();
    td_named_tensors *sd = td_module_state_dict(src), *prefixed = td_named_tensors_new();
    for (int64_t i = 0; i < td_named_tensors_len(sd); i++) {
        char name[64];
        snprintf(name, sizeof name, "module.%s", td_named_tensors_name(sd, i));
        ASSERT_OK(td_named_tensors_add(prefixed, name, td_named_tensors_at(sd, i)));
    }
    ASSERT_OK(td_named_tensors_add(prefixed, "optimizer_step", td_module_get(src, "0.bias"))); /* dropped by the map */
    ASSERT_ERROR(td_module_load_state_dict(m, prefixed, true), TD_ERR_MISUSE, "missing");
    td_load_opts o = {.strict = true, .map_key = strip_module, .ctx = "module."};
    ASSERT_OK(td_module_load_state_dict_ext(m, prefixed, &o, NULL));
    for (int64_t i = 0; i < td_named_tensors_len(sd); i++) {
        td_tensor *a = td_named_tensors_at(sd, i), *b = td_module_get(m, td_named_tensors_name(sd, i));
        ASSERT_NEAR(td_item(td_amax(td_abs(td_sub(a, b)), 0, NULL, false)), 0, 0);
    }
    td_named_tensors_free(prefixed);
    td_named_tensors_free(sd);
    td_module_free(src);
    td_module_free(m);
    td_scope_end();
}

TEST(module_registration_errors) {
    td_scope_begin();
    td_module *m = td_module_new("Net", block_forward, NULL, NULL);
    td_tensor *w = ASSERT_TENSOR(td_zeros(1, (int64_t[]){3}, TD_F32, TD_CPU));
    ASSERT_OK(td_module_register_parameter(m, "w", w));
    ASSERT(td_requires_grad(w));
    ASSERT_ERROR(td_module_register_parameter(m, "w", w), TD_ERR_MISUSE, "'w' is already registered");
    ASSERT_ERROR(td_module_register_buffer(m, "a.b", w), TD_ERR_MISUSE, "contains '.'");
    ASSERT_ERROR(td_module_register_buffer(m, "", w), TD_ERR_MISUSE, "empty");
    td_module *child = td_relu_new();
    ASSERT_OK(td_module_register_module(m, "act", child));
    ASSERT_ERROR(td_module_register_module(m, "act2", child), TD_ERR_MISUSE, "already has a parent");
    ASSERT_ERROR(td_module_get(m, "act.weight"), TD_ERR_MISUSE, "no parameter or buffer 'act.weight'");
    ASSERT_ERROR(td_module_child(m, "nope"), TD_ERR_MISUSE, "no submodule 'nope'");
    ASSERT_ERROR(td_module_forward(NULL, w), TD_ERR_MISUSE, "module is NULL");
    ASSERT_ERROR(td_sequential_append(m, td_relu_new()), TD_ERR_MISUSE, "module is a Net, not a Sequential");
    ASSERT_ERROR(td_module_new("X", NULL, NULL, NULL), TD_ERR_MISUSE, "forward function is NULL");
    td_module_free(m);
    td_scope_end();
}

/* mean and standard deviation of t's values */
static void stats(td_tensor *t, double *mean, double *std, double *amax) {
    int64_t n = td_numel(t);
    double *v = host(t), s = 0, s2 = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) s += v[i], mx = fmax(mx, fabs(v[i]));
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (v[i] - *mean) * (v[i] - *mean);
    *std = sqrt(s2 / (double)n);
    *amax = mx;
    free(v);
}

TEST(init_statistics) {
    td_manual_seed(3);
    td_module *lin = td_linear_new(400, 300, true);
    double mean, std, amax, bound = 1 / sqrt(400.0);
    stats(td_module_get(lin, "weight"), &mean, &std, &amax);
    ASSERT(amax <= bound && amax > 0.99 * bound); /* kaiming_uniform(a=sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)) */
    ASSERT_NEAR(std, bound / sqrt(3.0), 0.01 * bound);
    ASSERT_NEAR(mean, 0, 0.01 * bound);
    stats(td_module_get(lin, "bias"), &mean, &std, &amax);
    ASSERT(amax <= bound && amax > 0.9 * bound);
    td_module *conv = td_conv2d_new(8, 16, (int[]){3, 3}, NULL, NULL, NULL, 1, true);
    stats(td_module_get(conv, "weight"), &mean, &std, &amax);
    ASSERT(amax <= 1 / sqrt(72.0)); /* fan_in = 8*3*3 */
    td_module *emb = td_embedding_new(1000, 64);
    stats(td_module_get(emb, "weight"), &mean, &std, &amax);
    ASSERT_NEAR(mean, 0, 0.02);
    ASSERT_NEAR(std, 1, 0.02);
    td_module *mha = td_multihead_attention_new(64, 4, true, false);
    stats(td_module_get(mha, "in_proj_weight"), &mean, &std, &amax);
    double xb = sqrt(6.0 / (64 + 192)); /* xavier_uniform over [3E, E] */
    ASSERT(amax <= xb && amax > 0.98 * xb);
    td_module *ln = td_layer_norm_new(1, (int64_t[]){5}, 1e-5, true);
    stats(td_module_get(ln, "weight"), &mean, &std, &amax);
    ASSERT_NEAR(mean, 1, 0);
    ASSERT_NEAR(std, 0, 0);
    td_module_free(lin), td_module_free(conv), td_module_free(emb), td_module_free(mha), td_module_free(ln);
}

TEST(init_functions) {
    td_scope_begin();
    ASSERT_NEAR(td_init_calculate_gain(TD_NL_RELU, 0), sqrt(2.0), 1e-15);
    ASSERT_NEAR(td_init_calculate_gain(TD_NL_TANH, 0), 5.0 / 3, 1e-15);
    ASSERT_NEAR(td_init_calculate_gain(TD_NL_LEAKY_RELU, 0.2), sqrt(2 / 1.04), 1e-15);
    ASSERT_NEAR(td_init_calculate_gain(TD_NL_SELU, 0), 0.75, 0);
    ASSERT_NEAR(td_init_calculate_gain(TD_NL_SIGMOID, 0), 1, 0);
    td_tensor *t = ASSERT_TENSOR(td_empty(2, (int64_t[]){256, 512}, TD_F32, TD_CPU));
    double mean, std, amax;
    ASSERT_OK(td_init_kaiming_normal_(t, 0, TD_FAN_IN, TD_NL_RELU));
    stats(t, &mean, &std, &amax);
    ASSERT_NEAR(std, sqrt(2.0 / 512), 0.02 * sqrt(2.0 / 512));
    ASSERT_OK(td_init_kaiming_uniform_(t, 0, TD_FAN_OUT, TD_NL_RELU));
    stats(t, &mean, &std, &amax);
    ASSERT(amax <= sqrt(6.0 / 256) && amax > 0.99 * sqrt(6.0 / 256));
    ASSERT_OK(td_init_xavier_normal_(t, 2.0));
    stats(t, &mean, &std, &amax);
    ASSERT_NEAR(std, 2 * sqrt(2.0 / 768), 0.02 * 2 * sqrt(2.0 / 768));
    ASSERT_OK(td_init_uniform_(t, 2, 3));
    stats(t, &mean, &std, &amax);
    ASSERT_NEAR(mean, 2.5, 0.01);
    ASSERT_OK(td_init_normal_(t, -1, 0.5));
    stats(t, &mean, &std, &amax);
    ASSERT_NEAR(mean, -1, 0.01);
    ASSERT_NEAR(std, 0.5, 0.01);
    ASSERT_OK(td_init_constant_(t, 0.25));
    stats(t, &mean, &std, &amax);
    ASSERT_NEAR(mean, 0.25, 0);
    /* bad input */
    td_tensor *v = ASSERT_TENSOR(td_zeros(1, (int64_t[]){5}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_init_xavier_uniform_(v, 1), TD_ERR_SHAPE, "2 or more dims");
    td_tensor *ints = ASSERT_TENSOR(td_zeros(2, (int64_t[]){2, 2}, TD_I32, TD_CPU));
    ASSERT_ERROR(td_init_kaiming_uniform_(ints, 0, TD_FAN_IN, TD_NL_RELU), TD_ERR_DTYPE, "not floating");
    ASSERT_ERROR(td_init_uniform_(t, 1, 0), TD_ERR_MISUSE, "above hi");
    td_scope_end();
}

TEST(init_reproducible) {
    td_manual_seed(42);
    td_module *a = td_linear_new(7, 5, true);
    td_manual_seed(42);
    td_module *b = td_linear_new(7, 5, true);
    td_module *c = td_linear_new(7, 5, true); /* the generator moved on */
    double *wa = host(td_module_get(a, "weight")), *wb = host(td_module_get(b, "weight")),
           *wc = host(td_module_get(c, "weight"));
    int same = 0;
    for (int i = 0; i < 35; i++) {
        ASSERT_NEAR(wa[i], wb[i], 0);
        same += wa[i] == wc[i];
    }
    ASSERT(same < 3);
    free(wa), free(wb), free(wc);
    td_module_free(a), td_module_free(b), td_module_free(c);
}

TEST(dropout_train_eval) {
    td_scope_begin();
    td_module *d = td_dropout_new(0.3);
    int64_t n = 20000;
    td_tensor *x = ASSERT_TENSOR(td_full(1, &n, 2.0, TD_F32, TD_CPU));
    td_manual_seed(5);
    double *y1 = host(td_module_forward(d, x)), *y2 = host(td_module_forward(d, x));
    int zeros = 0, differ = 0;
    for (int64_t i = 0; i < n; i++) {
        if (y1[i] == 0)
            zeros++;
        else
            ASSERT_NEAR(y1[i], 2.0 / 0.7, 1e-5);
        differ += (y1[i] == 0) != (y2[i] == 0);
    }
    ASSERT_NEAR(zeros / (double)n, 0.3, 0.015);
    ASSERT(differ > n / 10); /* each call draws a fresh mask */
    td_manual_seed(5);
    double *y3 = host(td_module_forward(d, x));
    for (int64_t i = 0; i < n; i++) ASSERT_NEAR(y3[i], y1[i], 0);
    td_module_eval(d);
    ASSERT(!td_module_is_training(d));
    double *ye = host(td_module_forward(d, x));
    for (int64_t i = 0; i < n; i++) ASSERT_NEAR(ye[i], 2.0, 0);
    free(y1), free(y2), free(y3), free(ye);
    td_module_free(d);
    td_scope_end();
}

TEST(batchnorm_train_eval) {
    td_scope_begin();
    td_module *bn = td_batch_norm1d_new(2, 1e-5, 0.1, false, true);
    td_tensor *x = randu(2, (int64_t[]){8, 2}, 100);
    double *xv = host(x);
    /* eval at construction: running stats 0 and 1 */
    td_module_eval(bn);
    double *ye = host(td_module_forward(bn, x));
    for (int i = 0; i < 16; i++) ASSERT_NEAR(ye[i], xv[i] / sqrt(1 + 1e-5), 1e-6);
    td_module_train(bn, true);
    double *yt = host(td_module_forward(bn, x));
    double mean[2] = {0}, var[2] = {0};
    for (int i = 0; i < 16; i++) mean[i % 2] += xv[i] / 8;
    for (int i = 0; i < 16; i++) var[i % 2] += (xv[i] - mean[i % 2]) * (xv[i] - mean[i % 2]) / 8;
    for (int i = 0; i < 16; i++) ASSERT_NEAR(yt[i], (xv[i] - mean[i % 2]) / sqrt(var[i % 2] + 1e-5), 2e-5);
    double *rm = host(td_module_get(bn, "running_mean")), *rv = host(td_module_get(bn, "running_var"));
    for (int c = 0; c < 2; c++) {
        ASSERT_NEAR(rm[c], 0.1 * mean[c], 1e-6);
        ASSERT_NEAR(rv[c], 0.9 + 0.1 * var[c] * 8 / 7, 1e-6); /* unbiased */
    }
    ASSERT_NEAR(td_item(td_module_get(bn, "num_batches_tracked")), 1, 0);
    td_module_eval(bn);
    td_module_forward(bn, x);
    ASSERT_NEAR(td_item(td_module_get(bn, "num_batches_tracked")), 1, 0); /* eval leaves the stats */
    free(xv), free(ye), free(yt), free(rm), free(rv);
    td_module_free(bn);
    td_scope_end();
}

TEST(mha_causal) {
    td_scope_begin();
    td_module *causal = td_multihead_attention_new(8, 2, true, true);
    td_module *full = td_multihead_attention_new(8, 2, true, false);
    td_named_tensors *sd = td_module_state_dict(causal);
    ASSERT_OK(td_module_load_state_dict(full, sd, true));
    td_named_tensors_free(sd);
    int64_t shape[3] = {2, 5, 8};
    td_tensor *x = randu(3, shape, 200);
    td_tensor *x2 = ASSERT_TENSOR(td_clone(x));
    ASSERT_OK(td_copy_(td_slice(x2, 1, 3, 5, 1), randu(3, (int64_t[]){2, 2, 8}, 300))); /* change positions 3, 4 */
    double *a = host(td_module_forward(causal, x)), *b = host(td_module_forward(causal, x2));
    double *c = host(td_module_forward(full, x)), *d = host(td_module_forward(full, x2));
    for (int n = 0; n < 2; n++)
        for (int t = 0; t < 3; t++)
            for (int e = 0; e < 8; e++) ASSERT_NEAR(a[(n * 5 + t) * 8 + e], b[(n * 5 + t) * 8 + e], 1e-6);
    ASSERT(fabs(c[0] - d[0]) > 1e-6); /* without the mask position 0 sees the change */
    /* the explicit form with a bool mask equals the causal flag */
    bool m[25];
    for (int i = 0; i < 25; i++) m[i] = i % 5 > i / 5;
    td_tensor *mask = ASSERT_TENSOR(td_from_data(m, 2, (int64_t[]){5, 5}, TD_BOOL, TD_CPU));
    double *e = host(td_multihead_attention_forward(full, x, x, x, mask, false));
    for (int i = 0; i < 80; i++) ASSERT_NEAR(e[i], a[i], 1e-6);
    td_tensor *k4 = randu(3, (int64_t[]){2, 4, 8}, 0);
    ASSERT_ERROR(td_multihead_attention_forward(full, x, k4, x, NULL, false), TD_ERR_SHAPE, "disagree");
    ASSERT_ERROR(td_multihead_attention_forward(full, x, k4, k4, NULL, true), TD_ERR_SHAPE,
                 "causal mask needs as many keys");
    ASSERT_ERROR(td_multihead_attention_forward(causal, x, x, x, k4, false), TD_ERR_SHAPE,
                 "attn_mask has shape [2,4,8], expected [5,5]");
    free(a), free(b), free(c), free(d), free(e);
    td_module_free(causal), td_module_free(full);
    td_scope_end();
}

TEST(adaptive_pool_and_softmax_dim) {
    td_scope_begin();
    td_tensor *x = randu(4, (int64_t[]){1, 1, 4, 6}, 400);
    double *xv = host(x);
    td_module *ap = td_adaptive_avg_pool2d_new(2, 3);
    double *y = host(td_module_forward(ap, x));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            double s = 0;
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++) s += xv[(2 * i + a) * 6 + 2 * j + b];
            ASSERT_NEAR(y[i * 3 + j], s / 4, 1e-6);
        }
    td_module *sm = td_softmax_new(2);
    double *p = host(td_module_forward(sm, x));
    for (int c = 0; c < 6; c++) {
        double s = 0;
        for (int r = 0; r < 4; r++) s += p[r * 6 + c];
        ASSERT_NEAR(s, 1, 1e-6);
    }
    free(xv), free(y), free(p);
    td_module_free(ap), td_module_free(sm);
    td_scope_end();
}

TEST(zero_grad_and_to) {
    td_scope_begin();
    td_module *m = mlp();
    td_tensor *x = randu(2, (int64_t[]){3, 4}, 500);
    td_tensor *loss = ASSERT_TENSOR(td_sum(td_module_forward(m, x), 0, NULL, false));
    ASSERT_OK(td_backward(loss, NULL, false));
    ASSERT(td_grad_of(td_module_get(m, "0.weight")) != NULL);
    td_module_zero_grad(m);
    ASSERT(td_grad_of(td_module_get(m, "0.weight")) == NULL);
    td_tensor *w = td_module_get(m, "0.weight");
    ASSERT_OK(td_module_to(m, TD_CPU)); /* already there: same tensors */
    ASSERT(td_module_get(m, "0.weight") == w);
    td_clear_error();
    td_status st = td_module_to(m, TD_VULKAN(99));
    ASSERT(st != TD_OK);
    ASSERT(td_module_get(m, "0.weight") == w); /* unchanged after a failed move */
    td_module_free(m);
    td_scope_end();
}

TEST(schedulers_closed_form) {
    td_scope_begin();
    td_tensor *p[2];
    for (int i = 0; i < 2; i++) {
        p[i] = ASSERT_TENSOR(td_zeros(1, (int64_t[]){2}, TD_F32, TD_CPU));
        ASSERT_OK(td_set_requires_grad(p[i], true));
    }
    td_optim_options o = td_sgd_defaults(0.1);
    td_optimizer *opt = td_sgd_new(1, &p[0], &o);
    o.lr = 0.02;
    ASSERT_OK(td_optimizer_add_param_group(opt, 1, &p[1], &o));
    double base[2] = {0.1, 0.02};
    for (int kind = 0; kind < 4; kind++) {
        td_optimizer_set_group_lr(opt, 0, 0.1);
        td_optimizer_set_group_lr(opt, 1, 0.02);
        td_scheduler *s = kind == 0   ? td_step_lr_new(opt, 4, 0.3)
                          : kind == 1 ? td_exponential_lr_new(opt, 0.95)
                          : kind == 2 ? td_cosine_annealing_lr_new(opt, 7, 0.001)
                                      : td_linear_lr_new(opt, 0.25, 1.0, 6);
        ASSERT(s);
        for (int e = 0; e <= 20; e++) {
            ASSERT_EQ_INT(td_scheduler_last_epoch(s), e);
            for (int g = 0; g < 2; g++) {
                double b = base[g], want = kind == 0   ? b * pow(0.3, e / 4)
                                           : kind == 1 ? b * pow(0.95, e)
                                           : kind == 2 ? 0.001 + (b - 0.001) * (1 + cos(M_PI * e / 7)) / 2
                                                       : b * (0.25 + 0.75 * fmin(e, 6) / 6);
                ASSERT_NEAR(td_optimizer_get_lr(opt, g), want, 1e-15);
            }
            td_scheduler_step(s);
        }
        td_scheduler_set_epoch(s, 3);
        ASSERT_NEAR(td_optimizer_get_lr(opt, 1), td_scheduler_lr_at(s, 1, 3), 0);
        td_scheduler_free(s);
    }
    ASSERT_ERROR(td_step_lr_new(opt, 0, 0.5), TD_ERR_MISUSE, "step_size 0");
    td_optimizer_free(opt);
    td_scope_end();
}

/* p.grad = g through autograd */
TEST(clip_grad) {
    td_scope_begin();
    td_tensor *p[3];
    double want2 = 0, wantinf = 0;
    double *gv[2];
    for (int i = 0; i < 3; i++) {
        p[i] = ASSERT_TENSOR(td_zeros(1, (int64_t[]){10}, TD_F32, TD_CPU));
        ASSERT_OK(td_set_requires_grad(p[i], true));
    }
    for (int i = 0; i < 2; i++) { /* p[2] has no gradient and is skipped */
        td_tensor *g = ASSERT_TENSOR(td_add_scalar(td_mul_scalar(randu(1, (int64_t[]){10}, 600 + i), 4), -2));
        test_set_grad(p[i], g);
        gv[i] = host(g);
        for (int k = 0; k < 10; k++) want2 += gv[i][k] * gv[i][k], wantinf = fmax(wantinf, fabs(gv[i][k]));
    }
    want2 = sqrt(want2);
    ASSERT_NEAR(td_clip_grad_norm_(3, p, 1e9, 2), want2, 1e-5); /* no clipping */
    ASSERT_NEAR(td_clip_grad_norm_(3, p, 1.0, 2), want2, 1e-5);
    double coef = 1.0 / (want2 + 1e-6);
    for (int i = 0; i < 2; i++) {
        double *g = host(td_grad_of(p[i]));
        for (int k = 0; k < 10; k++) ASSERT_NEAR(g[k], gv[i][k] * coef, 1e-6);
        free(g);
    }
    ASSERT_NEAR(td_clip_grad_norm_(3, p, 10, INFINITY), wantinf * coef, 1e-6);
    ASSERT_OK(td_clip_grad_value_(3, p, 0.05));
    for (int i = 0; i < 2; i++) {
        double *g = host(td_grad_of(p[i]));
        for (int k = 0; k < 10; k++) ASSERT_NEAR(g[k], fmax(-0.05, fmin(0.05, gv[i][k] * coef)), 1e-7);
        free(g), free(gv[i]);
    }
    ASSERT(td_grad_of(p[2]) == NULL);
    ASSERT_ERROR(td_clip_grad_norm_(3, p, -1, 2), TD_ERR_MISUSE, "max_norm -1");
    ASSERT_ERROR(td_clip_grad_value_(3, p, -1), TD_ERR_MISUSE, "clip value -1");
    td_scope_end();
}

/* Two params, grads drawn from offset k; returns the final values of p[0] */
static void adam_steps(td_optimizer *o, td_tensor **p, int from, int to) {
    for (int k = from; k < to; k++) {
        for (int i = 0; i < 2; i++)
            test_set_grad(p[i], randu(td_ndim(p[i]), td_shape(p[i]), 1000 + 10 * (uint64_t)k + (uint64_t)i));
        ASSERT_OK(td_optimizer_step(o));
    }
}

TEST(optimizer_state_roundtrip) {
    td_scope_begin();
    td_tensor *a[2], *b[2];
    int64_t shapes[2][2] = {{3, 4}, {4, 1}};
    for (int i = 0; i < 2; i++) {
        a[i] = randu(2, shapes[i], 700 + (uint64_t)i);
        b[i] = ASSERT_TENSOR(td_clone(a[i]));
        ASSERT_OK(td_set_requires_grad(a[i], true));
        ASSERT_OK(td_set_requires_grad(b[i], true));
    }
    td_optim_options o = td_adam_defaults(0.05);
    o.amsgrad = true;
    td_optimizer *oa = td_adam_new(2, a, &o);
    adam_steps(oa, a, 0, 3);
    td_named_tensors *sd = td_optimizer_state_dict(oa);
    static const char *names[] = {"state.0.exp_avg",        "state.0.exp_avg_sq", "state.0.max_exp_avg_sq",
                                  "state.0.step",           "state.1.exp_avg",    "state.1.exp_avg_sq",
                                  "state.1.max_exp_avg_sq", "state.1.step",       "param_groups.0.lr"};
    assert_names(sd, 9, names);
    ASSERT_NEAR(td_item(td_named_tensors_get(sd, "state.1.step")), 3, 0);
    /* b: same values as a after 3 steps, a fresh optimizer loaded from a's state */
    for (int i = 0; i < 2; i++) {
        td_no_grad_begin();
        ASSERT_OK(td_copy_(b[i], a[i]));
        td_no_grad_end();
    }
    td_optimizer *ob = td_adam_new(2, b, &o);
    ASSERT_OK(td_optimizer_load_state_dict(ob, sd));
    td_named_tensors_free(sd);
    adam_steps(oa, a, 3, 5);
    adam_steps(ob, b, 3, 5);
    for (int i = 0; i < 2; i++) {
        double *va = host(a[i]), *vb = host(b[i]);
        for (int k = 0; k < td_numel(a[i]); k++) ASSERT_NEAR(vb[k], va[k], 0);
        free(va), free(vb);
    }
    /* a checkpoint of another optimizer */
    td_optim_options so = td_sgd_defaults(0.1);
    so.momentum = 0.9;
    td_optimizer *sgd = td_sgd_new(1, a, &so);
    adam_steps(oa, a, 5, 6);
    sd = td_optimizer_state_dict(oa);
    ASSERT_ERROR(td_optimizer_load_state_dict(sgd, sd), TD_ERR_MISUSE, "'state.0.exp_avg'");
    td_named_tensors_free(sd);
    sd = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_add(sd, "state.0.exp_avg", b[1]));
    ASSERT_ERROR(td_optimizer_load_state_dict(oa, sd), TD_ERR_SHAPE,
                 "'state.0.exp_avg' has shape [4,1], its parameter [3,4]");
    td_named_tensors_free(sd);
    td_optimizer_free(sgd), td_optimizer_free(oa), td_optimizer_free(ob);
    td_scope_end();
}

TEST(optimizer_groups_and_lr) {
    td_scope_begin();
    td_tensor *p[2];
    for (int i = 0; i < 2; i++) {
        p[i] = ASSERT_TENSOR(td_full(1, (int64_t[]){3}, 1.0, TD_F32, TD_CPU));
        ASSERT_OK(td_set_requires_grad(p[i], true));
    }
    td_optim_options o = td_sgd_defaults(0.1);
    td_optimizer *opt = td_sgd_new(1, &p[0], &o);
    o.lr = 0.5;
    ASSERT_OK(td_optimizer_add_param_group(opt, 1, &p[1], &o));
    ASSERT_EQ_INT(td_optimizer_num_groups(opt), 2);
    ASSERT(!strcmp(td_optimizer_name(opt), "SGD"));
    td_tensor *g = ASSERT_TENSOR(td_full(1, (int64_t[]){3}, 2.0, TD_F32, TD_CPU));
    test_set_grad(p[0], g);
    test_set_grad(p[1], g);
    ASSERT_OK(td_optimizer_step(opt));
    ASSERT_NEAR(td_get(p[0], (int64_t[]){0}), 1 - 0.1 * 2, 1e-7);
    ASSERT_NEAR(td_get(p[1], (int64_t[]){0}), 1 - 0.5 * 2, 1e-7);
    td_optimizer_set_lr(opt, 0.25);
    ASSERT_NEAR(td_optimizer_get_lr(opt, 1), 0.25, 0);
    td_optimizer_zero_grad(opt);
    ASSERT(td_grad_of(p[0]) == NULL);
    ASSERT_OK(td_optimizer_step(opt)); /* no gradients: nothing moves */
    ASSERT_NEAR(td_get(p[0], (int64_t[]){0}), 0.8, 1e-7);
    ASSERT_ERROR(td_optimizer_get_lr(opt, 2), TD_ERR_INDEX, "group 2 out of range");
    ASSERT_ERROR(td_optimizer_add_param_group(opt, 1, &p[0], NULL), TD_ERR_MISUSE, "more than one place");
    td_optimizer_free(opt);
    td_scope_end();
}

TEST(optimizer_bad_input) {
    td_scope_begin();
    td_tensor *p = ASSERT_TENSOR(td_zeros(1, (int64_t[]){3}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_adam_new(1, &p, NULL), TD_ERR_MISUSE, "must be a floating leaf tensor that requires grad");
    ASSERT_OK(td_set_requires_grad(p, true));
    ASSERT_ERROR(td_sgd_new(1, &p, NULL), TD_ERR_MISUSE, "no default lr");
    td_optim_options o = td_sgd_defaults(0.1);
    o.nesterov = true;
    ASSERT_ERROR(td_sgd_new(1, &p, &o), TD_ERR_MISUSE, "nesterov needs momentum");
    o = td_adam_defaults(0.1);
    o.beta2 = 1.0;
    ASSERT_ERROR(td_adam_new(1, &p, &o), TD_ERR_MISUSE, "betas (0.9, 1) must lie in [0, 1)");
    o = td_rmsprop_defaults(-1);
    ASSERT_ERROR(td_rmsprop_new(1, &p, &o), TD_ERR_MISUSE, "lr -1");
    td_optimizer *opt = td_adamw_new(1, &p, NULL);
    ASSERT(opt);
    td_named_tensors *sd = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_add(sd, "state.4.exp_avg", p));
    ASSERT_ERROR(td_optimizer_load_state_dict(opt, sd), TD_ERR_MISUSE,
                 "refers to parameter 4, but the optimizer has 1");
    td_named_tensors_free(sd);
    sd = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_add(sd, "weights.0", p));
    ASSERT_ERROR(td_optimizer_load_state_dict(opt, sd), TD_ERR_MISUSE, "unexpected key 'weights.0' for AdamW");
    td_named_tensors_free(sd);
    td_optimizer_free(opt);
    td_scope_end();
}

TEST(loss_bad_input) {
    td_scope_begin();
    td_tensor *x = randu(2, (int64_t[]){4, 3}, 800), *t = randu(2, (int64_t[]){3, 4}, 801);
    ASSERT_ERROR(td_mse_loss(x, t, TD_REDUCE_MEAN), TD_ERR_SHAPE,
                 "mse_loss: input shape [4,3] and target shape [3,4] differ");
    ASSERT_ERROR(td_l1_loss(x, x, (td_reduction)7), TD_ERR_MISUSE, "reduction 7");
    int64_t ids[4] = {0, 2, 3, 1};
    td_tensor *cls = ASSERT_TENSOR(td_from_data(ids, 1, (int64_t[]){4}, TD_I64, TD_CPU));
    ASSERT_ERROR(td_cross_entropy_loss(x, cls, NULL, -100, 0, TD_REDUCE_MEAN), TD_ERR_INDEX,
                 "target 3 at position 2 is out of range for 3 classes");
    ASSERT_ERROR(td_nll_loss(x, cls, NULL, -100, TD_REDUCE_MEAN), TD_ERR_INDEX, "out of range for 3 classes");
    td_tensor *short_t = ASSERT_TENSOR(td_zeros(1, (int64_t[]){5}, TD_I64, TD_CPU));
    ASSERT_ERROR(td_cross_entropy_loss(x, short_t, NULL, -100, 0, TD_REDUCE_MEAN), TD_ERR_SHAPE,
                 "input [4,3] needs target shape [4], got [5]");
    td_tensor *bools = ASSERT_TENSOR(td_zeros(1, (int64_t[]){4}, TD_BOOL, TD_CPU));
    ASSERT_ERROR(td_cross_entropy_loss(x, bools, NULL, -100, 0, TD_REDUCE_MEAN), TD_ERR_DTYPE, "integer class ids");
    /* float class ids are refused; float probabilities of the logits' shape are torch's soft targets */
    td_tensor *float_ids = ASSERT_TENSOR(td_cast(cls, TD_F32));
    ASSERT_ERROR(td_cross_entropy_loss(x, float_ids, NULL, -100, 0, TD_REDUCE_MEAN), TD_ERR_DTYPE,
                 "target is float32 [4]: class ids must be integers, and class probabilities need the input's shape "
                 "[4,3]");
    ASSERT_TENSOR(td_cross_entropy_loss(x, td_softmax(x, -1), NULL, -100, 0, TD_REDUCE_MEAN));
    td_tensor *w = ASSERT_TENSOR(td_ones(1, (int64_t[]){4}, TD_F32, TD_CPU));
    ids[2] = 1;
    cls = ASSERT_TENSOR(td_from_data(ids, 1, (int64_t[]){4}, TD_I64, TD_CPU));
    ASSERT_ERROR(td_cross_entropy_loss(x, cls, w, -100, 0, TD_REDUCE_MEAN), TD_ERR_SHAPE, "weight must have shape [3]");
    ASSERT_ERROR(td_cross_entropy_loss(x, cls, NULL, -100, 1.5, TD_REDUCE_MEAN), TD_ERR_MISUSE, "label_smoothing 1.5");
    td_tensor *big = ASSERT_TENSOR(td_add_scalar(x, 1.0));
    ASSERT_ERROR(td_bce_loss(big, x, NULL, TD_REDUCE_MEAN), TD_ERR_MISUSE, "probabilities in [0, 1]");
    ASSERT_ERROR(td_bce_with_logits_loss(x, x, NULL, w, TD_REDUCE_MEAN), TD_ERR_SHAPE,
                 "pos_weight of shape [4] does not broadcast");
    /* an ignored id out of range is fine */
    ids[0] = -100;
    cls = ASSERT_TENSOR(td_from_data(ids, 1, (int64_t[]){4}, TD_I64, TD_CPU));
    ASSERT_TENSOR(td_cross_entropy_loss(x, cls, NULL, -100, 0, TD_REDUCE_MEAN));
    td_scope_end();
}

TEST(layer_bad_input) {
    td_scope_begin();
    td_module *lin = td_linear_new(4, 3, true);
    td_tensor *x = randu(2, (int64_t[]){2, 5}, 900);
    ASSERT_ERROR(td_module_forward(lin, x), TD_ERR_SHAPE, "Linear: expected input [..., 4], got shape [2,5]");
    td_module *conv = td_conv2d_new(3, 4, (int[]){3, 3}, NULL, NULL, NULL, 1, true);
    td_tensor *img = randu(4, (int64_t[]){1, 2, 5, 5}, 901);
    ASSERT_ERROR(td_module_forward(conv, img), TD_ERR_SHAPE, "Conv2d: expected 3 input channels");
    ASSERT_ERROR(td_module_forward(conv, x), TD_ERR_SHAPE, "Conv2d: expected input [N, C, H, W] or [C, H, W]");
    td_module *bn = td_batch_norm2d_new(3, 1e-5, 0.1, true, true);
    ASSERT_ERROR(td_module_forward(bn, img), TD_ERR_SHAPE, "BatchNorm2d: expected 3 channels");
    td_module *bn1 = td_batch_norm1d_new(5, 1e-5, 0.1, true, true);
    ASSERT_ERROR(td_module_forward(bn1, td_slice(x, 0, 0, 1, 1)), TD_ERR_SHAPE, "more than 1 value per channel");
    td_module *ln = td_layer_norm_new(1, (int64_t[]){4}, 1e-5, true);
    ASSERT_ERROR(td_module_forward(ln, x), TD_ERR_SHAPE, "does not end in the normalized shape [4]");
    td_module *emb = td_embedding_new(10, 3);
    ASSERT_ERROR(td_module_forward(emb, x), TD_ERR_DTYPE, "Embedding: indices must be an integer tensor");
    td_module *mha = td_multihead_attention_new(8, 2, true, false);
    ASSERT_ERROR(td_module_forward(mha, img), TD_ERR_SHAPE, "MultiheadAttention: expected input [N, L, E]");
    td_module *un = td_unflatten_new(1, 2, (int64_t[]){2, 2});
    ASSERT_ERROR(td_module_forward(un, x), TD_ERR_SHAPE, "Unflatten: dim 1 of input [2,5] has size 5");
    td_module *seq = td_sequential_new(2, (td_module *[]){td_linear_new(5, 3, true), td_linear_new(4, 2, true)});
    ASSERT_ERROR(td_module_forward(seq, x), TD_ERR_SHAPE, "Linear: expected input [..., 4], got shape [2,3]");
    td_module *mods[] = {lin, conv, bn, bn1, ln, emb, mha, un, seq};
    for (int i = 0; i < 9; i++) td_module_free(mods[i]);
    td_scope_end();
}

TEST(constructor_bad_input) {
    ASSERT_ERROR(td_linear_new(0, 3, true), TD_ERR_MISUSE, "Linear: sizes must be positive");
    ASSERT_ERROR(td_conv2d_new(3, 4, (int[]){3, 3}, NULL, NULL, NULL, 2, true), TD_ERR_MISUSE, "multiples of groups 2");
    ASSERT_ERROR(td_conv1d_new(3, 4, 0, 1, 0, 1, 1, true), TD_ERR_MISUSE, "Conv1d: kernel 0");
    ASSERT_ERROR(td_dropout_new(1.5), TD_ERR_MISUSE, "Dropout: probability 1.5 is outside [0, 1)");
    ASSERT_ERROR(td_max_pool2d_new((int[]){2, 2}, NULL, (int[]){2, 0}), TD_ERR_MISUSE, "padding 2");
    ASSERT_ERROR(td_multihead_attention_new(10, 3, true, false), TD_ERR_MISUSE,
                 "embed_dim 10 must be a positive multiple of num_heads 3");
    ASSERT_ERROR(td_batch_norm1d_new(4, 0, 0.1, true, true), TD_ERR_MISUSE, "eps 0 must be positive");
    ASSERT_ERROR(td_unflatten_new(1, 2, (int64_t[]){-1, -1}), TD_ERR_MISUSE, "only one size may be -1");
    /* a failed layer inside a Sequential keeps its error */
    ASSERT_ERROR(td_sequential_new(2, (td_module *[]){td_relu_new(), td_embedding_new(-1, 3)}), TD_ERR_MISUSE,
                 "Embedding: sizes must be positive");
}

/* W2 of WORKLOADS.md, built as its PyTorch twin: 421,642 parameters, [N, 784] -> [N, 10] */
TEST(w2_cnn_shapes) {
    td_scope_begin();
    int k[2] = {3, 3}, p[2] = {1, 1}, two[2] = {2, 2};
    td_module *m = td_sequential_new(
        11, (td_module *[]){td_unflatten_new(1, 3, (int64_t[]){1, 28, 28}),
                            td_conv2d_new(1, 32, k, NULL, p, NULL, 1, true), td_relu_new(),
                            td_max_pool2d_new(two, NULL, NULL), td_conv2d_new(32, 64, k, NULL, p, NULL, 1, true),
                            td_relu_new(), td_max_pool2d_new(two, NULL, NULL), td_flatten_new(1, -1),
                            td_linear_new(3136, 128, true), td_relu_new(), td_linear_new(128, 10, true)});
    ASSERT(m);
    td_tensor *params[16];
    int n = td_module_parameters(m, params, 16);
    ASSERT_EQ_INT(n, 8);
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += td_numel(params[i]);
    ASSERT_EQ_INT(total, 421642);
    td_tensor *y = ASSERT_TENSOR(td_module_forward(m, randu(2, (int64_t[]){3, 784}, 1100)));
    ASSERT_EQ_INT(td_ndim(y), 2);
    ASSERT_EQ_INT(td_size(y, 0), 3);
    ASSERT_EQ_INT(td_size(y, 1), 10);
    td_module_free(m);
    td_scope_end();
}

TEST(no_leaks) {
    int64_t before = td_debug_live_tensors();
    td_module *m =
        td_sequential_new(4, (td_module *[]){td_conv2d_new(1, 2, (int[]){3, 3}, NULL, (int[]){1, 1}, NULL, 1, true),
                                             td_batch_norm2d_new(2, 1e-5, 0.1, true, true), td_flatten_new(1, -1),
                                             td_linear_new(32, 3, true)});
    td_tensor *params[16];
    int n = td_module_parameters(m, params, 16);
    td_optimizer *o = td_adam_new(n, params, NULL);
    ASSERT(m && o);
    int64_t ids[2] = {1, 2};
    for (int step = 0; step < 2; step++) {
        td_scope_begin();
        td_tensor *x = randu(4, (int64_t[]){2, 1, 4, 4}, 1000);
        td_tensor *y = ASSERT_TENSOR(td_from_data(ids, 1, (int64_t[]){2}, TD_I64, TD_CPU));
        td_tensor *loss =
            ASSERT_TENSOR(td_cross_entropy_loss(td_module_forward(m, x), y, NULL, -100, 0, TD_REDUCE_MEAN));
        td_optimizer_zero_grad(o);
        ASSERT_OK(td_backward(loss, NULL, false));
        ASSERT_OK(td_optimizer_step(o));
        td_scope_end();
    }
    td_named_tensors *sd = td_optimizer_state_dict(o);
    td_named_tensors_free(sd);
    td_optimizer_free(o);
    td_module_free(m);
    ASSERT_EQ_INT(td_debug_live_tensors(), before);
}

/* module.to(dtype): floating parameters and buffers take the dtype, rounded,
** under the same handles (still leaves that require grad; a gradient is
** dropped); num_batches_tracked stays int64; a forward runs in the new dtype;
** a non-floating dtype is TD_ERR_DTYPE with the module unchanged. */
TEST(module_to_dtype) {
    td_scope_begin();
    td_manual_seed(3);
    td_module *seq =
        td_sequential_new(2, (td_module *[]){td_linear_new(4, 3, true), td_batch_norm1d_new(3, 1e-5, 0.1, true, true)});
    ASSERT(seq);
    td_tensor *w = td_module_get(seq, "0.weight");
    double *before = host(w);
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(w, 0, NULL, false)), NULL, false));
    ASSERT(td_grad_of(w));
    ASSERT_EQ_INT(td_module_to_dtype(seq, TD_I32), TD_ERR_DTYPE);
    ASSERT(strstr(td_last_error(), "int32"));
    ASSERT_EQ_INT(td_tensor_dtype(w), TD_F32);
    ASSERT_OK(td_module_to_dtype(seq, TD_BF16));
    ASSERT(td_module_get(seq, "0.weight") == w && td_is_leaf(w) && td_requires_grad(w) && !td_grad_of(w));
    static const char *const names[] = {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"};
    for (int i = 0; i < 6; i++) ASSERT_EQ_INT(td_tensor_dtype(td_module_get(seq, names[i])), TD_BF16);
    ASSERT_EQ_INT(td_tensor_dtype(td_module_get(seq, "1.num_batches_tracked")), TD_I64);
    double *after = host(w),
           *rounded = host(td_cast(td_from_data(before, 2, (int64_t[]){3, 4}, TD_F64, TD_CPU), TD_BF16));
    for (int i = 0; i < 12; i++) ASSERT_NEAR(after[i], rounded[i], 0);
    td_tensor *y = ASSERT_TENSOR(td_module_forward(seq, td_cast(randu(2, (int64_t[]){5, 4}, 0), TD_BF16)));
    ASSERT_EQ_INT(td_tensor_dtype(y), TD_BF16);
    ASSERT_OK(td_module_to_dtype(seq, TD_F64));
    ASSERT_EQ_INT(td_tensor_dtype(w), TD_F64);
    free(before), free(after), free(rounded);
    td_module_free(seq);
    td_scope_end();
}

/* Every parameter's values, end to end, as doubles (n entries). */
static double *flat_host(int n, td_tensor *const *ps, bool grads, int64_t *len) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += td_numel(ps[i]);
    double *v = malloc((size_t)total * sizeof *v + 8);
    ASSERT(v);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        td_tensor *t = grads ? td_grad_of(ps[i]) : ps[i];
        ASSERT(t);
        ASSERT_OK(td_copy_to_host(t, v + at, (size_t)td_numel(t) * sizeof *v, TD_F64));
        at += td_numel(t);
    }
    *len = total;
    return v;
}

/* The parameters of a flattened m are views of its arena, end to end: offsets,
** contiguity, and a write to the arena read back through the handles; their
** .grads (when backward has run) views of the gradient arena likewise. */
static void check_views(td_module *m, int n, td_tensor *const *ps, td_dtype dt, td_device dev) {
    td_tensor *pa, *ga;
    ASSERT_OK(td_module_parameter_arena(m, dt, &pa, &ga));
    ASSERT(pa && ga);
    ASSERT(td_tensor_device(pa).type == dev.type && td_tensor_device(pa).index == dev.index);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        ASSERT(td_is_contiguous(ps[i]));
        ASSERT_EQ_INT(td_storage_offset(ps[i]), td_storage_offset(pa) + at);
        td_tensor *g = td_grad_of(ps[i]);
        if (g) ASSERT_EQ_INT(td_storage_offset(g), td_storage_offset(ga) + at);
        at += td_numel(ps[i]);
    }
    ASSERT_EQ_INT(td_numel(pa), at);
    ASSERT_EQ_INT(td_numel(ga), at);
    int64_t len;
    double *before = flat_host(n, ps, false, &len);
    td_tensor *saved = ASSERT_TENSOR(td_clone(pa));
    ASSERT_OK(td_copy_(pa, td_add_scalar(saved, 1000))); /* one storage: every handle sees it */
    double *after = flat_host(n, ps, false, &len);
    for (int64_t e = 0; e < len; e++) ASSERT_NEAR(after[e], before[e] + 1000, 1e-3);
    ASSERT_OK(td_copy_(pa, saved));
    free(before), free(after);
}

/* The sum of squares of m(x), m a 4-3-2 MLP; x in the dtype of m's parameters. */
static td_tensor *mlp_loss(td_module *m, td_device dev, uint64_t offset) {
    td_tensor *p0;
    ASSERT(td_module_parameters(m, &p0, 1) >= 1);
    td_tensor *x = td_cast(td_to(randu(2, (int64_t[]){5, 4}, offset), dev), td_tensor_dtype(p0));
    td_tensor *y = td_module_forward(m, x);
    return ASSERT_TENSOR(td_sum(td_mul(y, y), 0, NULL, false));
}

/* td_module_flatten_parameters on the CPU and on Vulkan: values, handles and
** the state dict kept; parameters and gradients views of the arenas; flatten
** twice; a bad device a clear error; td_module_to after it re-flattens and
** trains (an optimizer built before flattening). */
TEST(flatten_parameters) {
    ASSERT_ERROR(td_module_flatten_parameters(NULL, TD_CPU), TD_ERR_MISUSE, "module is NULL");
    const char *devs[] = {"cpu", "vulkan:0"};
    for (int d = 0; d < 2; d++) {
        td_device dev, other = TD_CPU;
        if (td_device_parse(devs[d], &dev) != TD_OK || !td_device_available(dev)) {
            td_clear_error();
            fprintf(stderr, "  %s: not available, skipped\n", devs[d]);
            continue;
        }
        if (d == 0 && (td_device_parse("vulkan:0", &other) != TD_OK || !td_device_available(other))) {
            td_clear_error();
            other = TD_CPU;
        }
        fprintf(stderr, "  flatten on %s\n", devs[d]);
        td_scope_begin();
        td_manual_seed(11);
        td_module *m = mlp();
        td_tensor *ps[4];
        ASSERT_EQ_INT(td_module_parameters(m, ps, 4), 4);
        td_optim_options oo = td_sgd_defaults(0.05);
        td_optimizer *opt = td_sgd_new(4, ps, &oo);
        ASSERT(opt);
        td_named_tensors *sd = td_module_state_dict(m);
        ASSERT(sd);
        int64_t n_sd = td_named_tensors_len(sd), len, len2;
        double *vals = flat_host(4, ps, false, &len);
        td_tensor *none;
        ASSERT_OK(td_module_parameter_arena(m, TD_F32, &none, NULL));
        ASSERT(!none); /* not flattened yet */

        ASSERT_OK(td_module_flatten_parameters(m, dev));
        static const char *const names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
        for (int i = 0; i < 4; i++) ASSERT(td_module_get(m, names[i]) == ps[i]); /* the same handles */
        double *now = flat_host(4, ps, false, &len2);
        ASSERT_EQ_INT(len2, len);
        for (int64_t e = 0; e < len; e++) ASSERT_NEAR(now[e], vals[e], 0);
        free(now);
        check_views(m, 4, ps, TD_F32, dev);
        td_named_tensors *sd2 = td_module_state_dict(m);
        ASSERT(sd2);
        ASSERT_EQ_INT(td_named_tensors_len(sd2), n_sd);
        for (int64_t k = 0; k < n_sd; k++) {
            ASSERT(!strcmp(td_named_tensors_name(sd2, k), td_named_tensors_name(sd, k)));
            double *a = host(td_named_tensors_at(sd, k)), *b = host(td_named_tensors_at(sd2, k));
            for (int64_t e = 0; e < td_numel(td_named_tensors_at(sd, k)); e++) ASSERT_NEAR(b[e], a[e], 0);
            free(a), free(b);
        }
        td_named_tensors_free(sd), td_named_tensors_free(sd2);

        /* backward writes into the gradient arena: it is the .grads end to end */
        for (int rep = 0; rep < 2; rep++) { /* the second accumulates in place */
            ASSERT_OK(td_backward(mlp_loss(m, dev, 100), NULL, false));
            td_tensor *ga;
            ASSERT_OK(td_module_parameter_arena(m, TD_F32, NULL, &ga));
            double *g = flat_host(4, ps, true, &len2), *arena = host(ga);
            for (int64_t e = 0; e < len; e++) ASSERT_NEAR(arena[e], g[e], 0);
            free(g), free(arena);
            check_views(m, 4, ps, TD_F32, dev);
        }

        /* a bad device: a clear error, the arena and handles as they were */
        td_clear_error();
        td_status st = td_module_flatten_parameters(m, TD_VULKAN(99));
        ASSERT(st != TD_OK);
        ASSERT(strstr(td_last_error(), "flatten_parameters"));
        fprintf(stderr, "  bad device: %s\n", td_last_error());
        td_clear_error();
        check_views(m, 4, ps, TD_F32, dev);

        /* twice: same values, new arena */
        now = flat_host(4, ps, false, &len2);
        ASSERT_OK(td_module_flatten_parameters(m, dev));
        double *again = flat_host(4, ps, false, &len2);
        for (int64_t e = 0; e < len; e++) ASSERT_NEAR(again[e], now[e], 0);
        free(again);
        check_views(m, 4, ps, TD_F32, dev);

        /* moved after flattening: flat again there, and it trains */
        if (other.type != dev.type) {
            ASSERT_OK(td_module_to(m, other));
            check_views(m, 4, ps, TD_F32, other);
        } else {
            ASSERT_OK(td_module_to_dtype(m, TD_F64));
            ASSERT_OK(td_module_parameter_arena(m, TD_F32, &none, NULL));
            ASSERT(!none);
            check_views(m, 4, ps, TD_F64, other);
        }
        td_dtype dt = td_tensor_dtype(ps[0]);
        double first = 0, last = 0;
        for (int step = 0; step < 5; step++) {
            td_optimizer_zero_grad(opt);
            td_tensor *loss = mlp_loss(m, other, 100);
            last = td_item(loss);
            if (step == 0) first = last;
            ASSERT_OK(td_backward(loss, NULL, false));
            td_tensor *ga;
            ASSERT_OK(td_module_parameter_arena(m, dt, NULL, &ga));
            double *g = flat_host(4, ps, true, &len2), *arena = host(ga);
            for (int64_t e = 0; e < len; e++) ASSERT_NEAR(arena[e], g[e], 0);
            free(g), free(arena);
            ASSERT_OK(td_optimizer_step(opt));
        }
        fprintf(stderr, "  after the move: loss %g -> %g\n", first, last);
        ASSERT(last < first);
        check_views(m, 4, ps, dt, other);
        free(now), free(vals);
        td_optimizer_free(opt);
        td_module_free(m);
        td_scope_end();
    }
}

TEST_MAIN(TESTS)
