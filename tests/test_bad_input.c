/*
** Bad input: every case hands Trident something wrong and checks that it
** answers with the right status and a message naming the problem (status AND
** message substring, via ASSERT_ERROR), never a crash. Each case runs in its own
** process, so a crash fails that case alone.
*/
#include "core/internal.h"
#include "runner.h"

/* clang-format off */
#define TESTS(X)                                                                                               \
    /* creation and sizes */                                                                                   \
    X(empty_negative_size) X(empty_too_many_dims) X(empty_size_overflow) X(empty_beyond_host_memory) X(empty_invalid_dtype)               \
    X(from_data_null) X(arange_zero_step) X(arange_wrong_direction) X(rand_integer_dtype)                      \
    /* devices */                                                                                              \
    X(device_parse_unknown) X(device_parse_bad_ordinal) X(device_parse_unavailable) X(to_unavailable_device)  \
    X(empty_on_unavailable_device) X(ops_on_two_devices) X(plugin_wrong_device_type) X(plugin_wrong_api)       \
    /* released tensors and NULL */                                                                            \
    X(op_on_released_tensor) X(getter_on_released_tensor) X(double_release) X(null_argument)                   \
    X(null_propagation_keeps_first_error) X(scope_end_without_begin)                                           \
    /* views */                                                                                                \
    X(view_wrong_numel) X(view_two_inferred_dims) X(view_non_contiguous) X(permute_repeated_dim)               \
    X(permute_dim_out_of_range) X(transpose_dim_out_of_range) X(slice_zero_step) X(select_index_out_of_range)  \
    X(squeeze_size_not_one) X(expand_incompatible) X(unsqueeze_past_max_dims) X(copy_to_host_small_buffer)     \
    X(item_of_many) X(get_index_out_of_range) X(copy_not_broadcastable)                                        \
    /* elementwise and reductions */                                                                           \
    X(add_shapes_do_not_broadcast) X(add_two_bools) X(where_cond_not_bool) X(sum_dim_out_of_range)             \
    X(sum_repeated_dim) X(amax_of_empty) X(argmax_dim_out_of_range)                                            \
    /* linear algebra and nn */                                                                                \
    X(matmul_inner_mismatch) X(matmul_zero_dim) X(matmul_integer) X(softmax_dim_out_of_range)                      \
    X(layer_norm_n_norm_out_of_range) X(layer_norm_weight_shape) X(cross_entropy_target_out_of_range)          \
    X(cross_entropy_float_target) X(cross_entropy_bad_reduction) X(cross_entropy_bad_smoothing)                \
    X(conv2d_groups_do_not_divide) X(conv2d_zero_stride) X(conv2d_input_not_4d) X(conv2d_kernel_too_large)     \
    X(conv2d_backward_null_shape) X(max_pool2d_padding_too_large) X(max_pool2d_backward_float_indices)         \
    X(dropout_bad_p)                                                                                           \
    /* indexing */                                                                                             \
    X(embedding_index_out_of_range) X(embedding_float_index) X(index_select_2d_index) X(gather_index_out_of_range) \
    X(scatter_add_dtype_mismatch) X(cat_shape_mismatch) X(cat_no_tensors) X(one_hot_bad_num_classes)           \
    X(one_hot_index_too_large)                                                                                 \
    /* optimizer updates */                                                                                    \
    X(adam_state_shape_mismatch) X(adam_step_zero) X(sgd_nesterov_without_momentum) X(rmsprop_missing_state) \
    X(optimizer_lr_not_finite)
/* clang-format on */

#define S(...)                                                                                                         \
    (const int64_t[]) { __VA_ARGS__ }

/* The inputs below belong to one scope the case never closes: they live to the
** end of the case, and the runner's leak check (ASan) sees them held. */
static void case_scope(void) {
    static bool open;
    if (!open) td_scope_begin();
    open = true;
}

/* A float32 CPU tensor of the given shape filled with 1.5. */
static td_tensor *f32(int ndim, const int64_t *shape) {
    case_scope();
    return ASSERT_TENSOR(td_full(ndim, shape, 1.5, TD_F32, TD_CPU));
}
static td_tensor *i64(int ndim, const int64_t *shape, double value) {
    case_scope();
    return ASSERT_TENSOR(td_full(ndim, shape, value, TD_I64, TD_CPU));
}

/* ---- creation and sizes ---- */

TEST(empty_negative_size) { ASSERT_ERROR(td_empty(2, S(3, -1), TD_F32, TD_CPU), TD_ERR_MISUSE, "negative size -1"); }
TEST(empty_too_many_dims) {
    int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ASSERT_ERROR(td_empty(9, shape, TD_F32, TD_CPU), TD_ERR_MISUSE, "ndim 9");
}
TEST(empty_size_overflow) { ASSERT_ERROR(td_zeros(2, S(INT64_MAX / 2, 4), TD_F32, TD_CPU), TD_ERR_OOM, "overflow"); }
/* 2^46 bytes, more than any test host's RAM and swap: TD_ERR_OOM with the size, never an allocator abort
** (AddressSanitizer's allocator aborts on such a request instead of returning NULL) */
TEST(empty_beyond_host_memory) {
    ASSERT_ERROR(td_empty(1, S((int64_t)1 << 44), TD_F32, TD_CPU), TD_ERR_OOM, "allocating 70368744177664 bytes");
}
TEST(empty_invalid_dtype) { ASSERT_ERROR(td_empty(1, S(3), (td_dtype)42, TD_CPU), TD_ERR_DTYPE, "invalid dtype 42"); }
TEST(from_data_null) { ASSERT_ERROR(td_from_data(NULL, 1, S(3), TD_F32, TD_CPU), TD_ERR_MISUSE, "data is NULL"); }
TEST(arange_zero_step) { ASSERT_ERROR(td_arange(0, 10, 0, TD_F32, TD_CPU), TD_ERR_MISUSE, "non-zero step"); }
TEST(arange_wrong_direction) { ASSERT_ERROR(td_arange(0, 10, -1, TD_F32, TD_CPU), TD_ERR_MISUSE, "moves away"); }
TEST(rand_integer_dtype) { ASSERT_ERROR(td_rand(1, S(4), 1, 0, TD_I32, TD_CPU), TD_ERR_DTYPE, "int32"); }

/* ---- devices: a mismatch needs a second device; without one the
** TD_ERR_UNAVAILABLE paths are checked ---- */

/* Plugins are loaded from tests/fake_plugins/<variant> (tests/fake_plugin.c), beside this executable, and the
** Vulkan one is refused: the reason why (printed and recorded: trident devices shows it, test_errors checks it too). */
static const char *fake_plugin_refused(const char *variant) {
    char exe[4096], dir[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ASSERT(n > 0);
    exe[n] = 0;
    *strrchr(exe, '/') = 0;
    snprintf(dir, sizeof dir, "%s/fake_plugins/%s", exe, variant);
    setenv("TRIDENT_PLUGIN_DIR", dir, 1);
    unsetenv("TRIDENT_NO_VULKAN");
    ASSERT(!td_device_available(TD_VULKAN(0)));
    const char *why = td_backend_unavailable_reason(TD_DEVICE_VULKAN);
    printf("  %s\n", why);
    test_message_record(why);
    return why;
}

TEST(plugin_wrong_device_type) {
    const char *why = fake_plugin_refused("wrong_type");
    ASSERT(strstr(why, "a backend for device type 0, expected 2 (vulkan)"));
    ASSERT(!strstr(why, "API version"));
}

TEST(plugin_wrong_api) {
    const char *why = fake_plugin_refused("wrong_api");
    char want[64];
    snprintf(want, sizeof want, "backend API version %d, expected %d", TD_BACKEND_API_VERSION + 1,
             TD_BACKEND_API_VERSION);
    ASSERT(strstr(why, want));
}

TEST(device_parse_unknown) {
    td_device d;
    ASSERT_ERROR(td_device_parse("tpu:0", &d), TD_ERR_MISUSE, "unknown device 'tpu:0'");
}
TEST(device_parse_bad_ordinal) {
    td_device d;
    ASSERT_ERROR(td_device_parse("vulkan:x", &d), TD_ERR_MISUSE, "bad device 'vulkan:x'");
}
TEST(device_parse_unavailable) {
    td_device d;
    ASSERT_ERROR(td_device_parse("cuda:3", &d), TD_ERR_UNAVAILABLE, "cuda");
}
TEST(to_unavailable_device) {
    td_tensor *t = f32(1, S(4));
    ASSERT_ERROR(td_to(t, TD_VULKAN(7)), TD_ERR_UNAVAILABLE, "vulkan");
    td_release(t);
}
TEST(empty_on_unavailable_device) { ASSERT_ERROR(td_empty(1, S(4), TD_F32, TD_CUDA(5)), TD_ERR_UNAVAILABLE, "cuda"); }
TEST(ops_on_two_devices) {
    td_device gpu = td_device_available(TD_CUDA(0)) ? TD_CUDA(0) : TD_VULKAN(0);
    if (!td_device_available(gpu)) TEST_SKIP("needs a second device (cuda:0 or vulkan:0)");
    td_tensor *a = f32(1, S(4)), *b = ASSERT_TENSOR(td_to(a, gpu));
    ASSERT_ERROR(td_add(a, b), TD_ERR_DEVICE, "different devices");
}

/* ---- released tensors and NULL ---- */

TEST(op_on_released_tensor) {
    td_tensor *t = f32(1, S(4)), *u = f32(1, S(4));
    td_release(t);
    ASSERT_ERROR(td_add(u, t), TD_ERR_STATE, "released");
    ASSERT_ERROR(td_exp(t), TD_ERR_STATE, "released");
    td_release(u);
}
TEST(getter_on_released_tensor) {
    td_tensor *t = f32(2, S(2, 3));
    td_release(t);
    td_clear_error();
    ASSERT_EQ_INT(td_ndim(t), -1);
    ASSERT_ERROR(td_numel(t), TD_ERR_STATE, "released");
}
TEST(double_release) {
    td_tensor *t = f32(1, S(4));
    td_release(t);
    ASSERT_ERROR(td_release(t), TD_ERR_STATE, "already released");
}
TEST(null_argument) {
    td_tensor *t = f32(1, S(4));
    ASSERT_ERROR(td_add(NULL, t), TD_ERR_MISUSE, "NULL");
    ASSERT_ERROR(td_matmul(t, NULL), TD_ERR_MISUSE, "NULL");
    td_release(t);
}
TEST(null_propagation_keeps_first_error) {
    td_scope_begin();
    td_tensor *a = f32(2, S(2, 3)), *b = f32(1, S(4));
    /* the add fails; exp, sum and mul get NULL and keep the add's message */
    ASSERT_ERROR(td_mul(td_sum(td_exp(td_add(a, b)), 0, NULL, false), a), TD_ERR_SHAPE, "[2,3]");
    td_scope_end();
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
}
TEST(scope_end_without_begin) { ASSERT_ERROR(td_scope_end(), TD_ERR_MISUSE, "no scope is open"); }

/* ---- views ---- */

TEST(view_wrong_numel) {
    ASSERT_ERROR(td_view(f32(2, S(2, 3)), 2, S(4, 2)), TD_ERR_SHAPE, "invalid for a tensor of shape [2,3]");
}
TEST(view_two_inferred_dims) {
    ASSERT_ERROR(td_reshape(f32(2, S(2, 3)), 2, S(-1, -1)), TD_ERR_SHAPE, "only one dim may be -1");
}
TEST(view_non_contiguous) {
    td_tensor *t = ASSERT_TENSOR(td_transpose(f32(2, S(2, 3)), 0, 1));
    ASSERT_ERROR(td_view(t, 1, S(6)), TD_ERR_SHAPE, "use td_reshape");
}
TEST(permute_repeated_dim) {
    ASSERT_ERROR(td_permute(f32(3, S(2, 3, 4)), (const int[]){0, 1, 1}), TD_ERR_INDEX, "appears twice");
}
TEST(permute_dim_out_of_range) {
    ASSERT_ERROR(td_permute(f32(2, S(2, 3)), (const int[]){0, 5}), TD_ERR_INDEX, "dim 5 out of range");
}
TEST(transpose_dim_out_of_range) {
    ASSERT_ERROR(td_transpose(f32(2, S(2, 3)), 0, -3), TD_ERR_INDEX, "dim -3 out of range");
}
TEST(slice_zero_step) { ASSERT_ERROR(td_slice(f32(1, S(8)), 0, 0, 8, 0), TD_ERR_MISUSE, "step must be positive"); }
TEST(select_index_out_of_range) {
    ASSERT_ERROR(td_select(f32(2, S(2, 3)), 1, 3), TD_ERR_INDEX, "index 3 out of range");
}
TEST(squeeze_size_not_one) { ASSERT_ERROR(td_squeeze(f32(2, S(2, 3)), 1), TD_ERR_SHAPE, "size 3, not 1"); }
TEST(expand_incompatible) { ASSERT_ERROR(td_expand(f32(2, S(2, 3)), 2, S(2, 4)), TD_ERR_SHAPE, "cannot expand"); }
TEST(unsqueeze_past_max_dims) {
    ASSERT_ERROR(td_unsqueeze(f32(8, S(1, 1, 1, 1, 1, 1, 1, 2)), 0), TD_ERR_SHAPE, "already has 8 dims");
}
TEST(copy_to_host_small_buffer) {
    float out[3];
    ASSERT_ERROR(td_copy_to_host(f32(1, S(4)), out, sizeof out, TD_F32), TD_ERR_MISUSE, "need 16");
}
TEST(item_of_many) { ASSERT_ERROR(td_item(f32(1, S(4))), TD_ERR_SHAPE, "4 elements, not 1"); }
TEST(get_index_out_of_range) { ASSERT_ERROR(td_get(f32(2, S(2, 3)), S(1, 3)), TD_ERR_INDEX, "index 3 out of range"); }
TEST(copy_not_broadcastable) { ASSERT_ERROR(td_copy_(f32(2, S(2, 3)), f32(1, S(2))), TD_ERR_SHAPE, "broadcast"); }

/* ---- elementwise and reductions ---- */

TEST(add_shapes_do_not_broadcast) { ASSERT_ERROR(td_add(f32(2, S(2, 3)), f32(1, S(4))), TD_ERR_SHAPE, "[2,3]"); }
TEST(add_two_bools) {
    td_tensor *b = ASSERT_TENSOR(td_full(1, S(3), 1, TD_BOOL, TD_CPU));
    ASSERT_ERROR(td_add(b, b), TD_ERR_DTYPE, "bool");
    td_release(b);
}
TEST(where_cond_not_bool) {
    ASSERT_ERROR(td_where(f32(1, S(3)), f32(1, S(3)), f32(1, S(3))), TD_ERR_DTYPE, "cond must be bool");
}
TEST(sum_dim_out_of_range) {
    ASSERT_ERROR(td_sum(f32(2, S(2, 3)), 1, (const int[]){2}, false), TD_ERR_INDEX, "out of range");
}
TEST(sum_repeated_dim) {
    ASSERT_ERROR(td_sum(f32(2, S(2, 3)), 2, (const int[]){1, -1}, false), TD_ERR_INDEX, "more than once");
}
TEST(amax_of_empty) { ASSERT_ERROR(td_amax(f32(2, S(0, 3)), 1, (const int[]){0}, false), TD_ERR_SHAPE, "empty"); }
TEST(argmax_dim_out_of_range) { ASSERT_ERROR(td_argmax(f32(2, S(2, 3)), 4, false), TD_ERR_INDEX, "out of range"); }

/* ---- linear algebra and nn ---- */

TEST(matmul_inner_mismatch) {
    ASSERT_ERROR(td_matmul(f32(2, S(2, 3)), f32(2, S(4, 5))), TD_ERR_SHAPE,
                 "shapes [2,3] and [4,5] do not align (3 != 4)");
}
TEST(matmul_zero_dim) { ASSERT_ERROR(td_matmul(f32(0, NULL), f32(2, S(4, 5))), TD_ERR_SHAPE, "at least 1 dim"); }
TEST(matmul_integer) { ASSERT_ERROR(td_matmul(i64(2, S(2, 3), 1), i64(2, S(3, 2), 1)), TD_ERR_DTYPE, "int64"); }
TEST(softmax_dim_out_of_range) { ASSERT_ERROR(td_softmax(f32(2, S(2, 3)), 2), TD_ERR_INDEX, "out of range"); }
TEST(layer_norm_n_norm_out_of_range) {
    ASSERT_ERROR(td_layer_norm(f32(2, S(2, 3)), 3, NULL, NULL, 1e-5), TD_ERR_SHAPE, "n_norm 3");
}
TEST(layer_norm_weight_shape) {
    ASSERT_ERROR(td_layer_norm(f32(2, S(2, 3)), 1, f32(1, S(2)), NULL, 1e-5), TD_ERR_SHAPE, "weight");
}
TEST(cross_entropy_target_out_of_range) {
    td_tensor *target = ASSERT_TENSOR(td_arange(0, 4, 1, TD_I64, TD_CPU)); /* 0..3, class 3 of 3 is out */
    ASSERT_ERROR(td__cross_entropy(f32(2, S(4, 3)), target, NULL, -100, 0, TD_REDUCTION_MEAN), TD_ERR_INDEX,
                 "target 3 at position 3 is out of range [0, 3)");
}
TEST(cross_entropy_float_target) {
    ASSERT_ERROR(td__cross_entropy(f32(2, S(4, 3)), f32(1, S(4)), NULL, -100, 0, TD_REDUCTION_MEAN), TD_ERR_DTYPE,
                 "int64");
}
TEST(cross_entropy_bad_reduction) {
    ASSERT_ERROR(td__cross_entropy(f32(2, S(4, 3)), i64(1, S(4), 0), NULL, -100, 0, 7), TD_ERR_MISUSE,
                 "unknown reduction 7");
}
TEST(cross_entropy_bad_smoothing) {
    ASSERT_ERROR(td__cross_entropy(f32(2, S(4, 3)), i64(1, S(4), 0), NULL, -100, 2, TD_REDUCTION_MEAN), TD_ERR_MISUSE,
                 "label_smoothing 2");
}

static const int ONE[2] = {1, 1}, ZERO[2] = {0, 0};

TEST(conv2d_groups_do_not_divide) {
    ASSERT_ERROR(td_conv2d(f32(4, S(1, 3, 8, 8)), f32(4, S(4, 1, 3, 3)), NULL, ONE, ZERO, ONE, 2), TD_ERR_SHAPE,
                 "divisible by groups 2");
}
TEST(conv2d_zero_stride) {
    ASSERT_ERROR(td_conv2d(f32(4, S(1, 3, 8, 8)), f32(4, S(4, 3, 3, 3)), NULL, ZERO, ZERO, ONE, 1), TD_ERR_MISUSE,
                 "stride >= 1");
}
TEST(conv2d_input_not_4d) {
    ASSERT_ERROR(td_conv2d(f32(3, S(3, 8, 8)), f32(4, S(4, 3, 3, 3)), NULL, ONE, ZERO, ONE, 1), TD_ERR_SHAPE, "4-d");
}
TEST(conv2d_kernel_too_large) {
    ASSERT_ERROR(td_conv2d(f32(4, S(1, 3, 2, 2)), f32(4, S(4, 3, 3, 3)), NULL, ONE, ZERO, ONE, 1), TD_ERR_SHAPE,
                 "larger than the padded input");
}
TEST(conv2d_backward_null_shape) {
    ASSERT_ERROR(td__conv2d_backward_input(f32(4, S(1, 4, 6, 6)), f32(4, S(4, 3, 3, 3)), NULL, ONE, ZERO, ONE, 1),
                 TD_ERR_MISUSE, "x_shape is NULL");
}
TEST(max_pool2d_padding_too_large) {
    ASSERT_ERROR(
        td_max_pool2d(f32(4, S(1, 1, 8, 8)), (const int[]){2, 2}, (const int[]){2, 2}, (const int[]){2, 2}, NULL),
        TD_ERR_MISUSE, "at most half");
}
TEST(max_pool2d_backward_float_indices) {
    ASSERT_ERROR(td__max_pool2d_backward(f32(4, S(1, 1, 2, 2)), f32(4, S(1, 1, 2, 2)), S(1, 1, 4, 4)), TD_ERR_DTYPE,
                 "indices must be int64");
}
TEST(dropout_bad_p) { ASSERT_ERROR(td_dropout(f32(1, S(4)), 1.5, 1, 0), TD_ERR_MISUSE, "p must be in [0, 1)"); }

/* ---- indexing ---- */

TEST(embedding_index_out_of_range) {
    ASSERT_ERROR(td_embedding(f32(2, S(10, 4)), i64(1, S(3), 10)), TD_ERR_INDEX, "index 10");
}
TEST(embedding_float_index) {
    ASSERT_ERROR(td_embedding(f32(2, S(10, 4)), f32(1, S(3))), TD_ERR_DTYPE, "int32 or int64");
}
TEST(index_select_2d_index) {
    ASSERT_ERROR(td_index_select(f32(2, S(10, 4)), 0, i64(2, S(2, 2), 0)), TD_ERR_SHAPE, "idx must be 1-D");
}
TEST(gather_index_out_of_range) {
    ASSERT_ERROR(td_gather(f32(2, S(3, 4)), 1, i64(2, S(3, 2), -1)), TD_ERR_INDEX, "index -1");
}
TEST(scatter_add_dtype_mismatch) {
    td_tensor *src = ASSERT_TENSOR(td_full(2, S(2, 4), 1, TD_F64, TD_CPU));
    ASSERT_ERROR(td_scatter_add(f32(2, S(3, 4)), 0, i64(2, S(2, 4), 0), src), TD_ERR_DTYPE, "src has dtype float64");
    td_release(src);
}
TEST(cat_shape_mismatch) {
    td_tensor *xs[2] = {f32(2, S(2, 3)), f32(2, S(2, 4))};
    ASSERT_ERROR(td_cat(2, xs, 0), TD_ERR_SHAPE, "does not match");
}
TEST(cat_no_tensors) { ASSERT_ERROR(td_cat(0, NULL, 0), TD_ERR_MISUSE, "at least one tensor"); }
TEST(one_hot_bad_num_classes) { ASSERT_ERROR(td_one_hot(i64(1, S(3), 1), -5), TD_ERR_MISUSE, "num_classes"); }
TEST(one_hot_index_too_large) { ASSERT_ERROR(td_one_hot(i64(1, S(3), 4), 3), TD_ERR_INDEX, "4"); }

/* ---- optimizer updates ---- */

TEST(adam_state_shape_mismatch) {
    td_tensor *p = f32(1, S(4));
    ASSERT_ERROR(td_adam_update(p, f32(1, S(4)), f32(1, S(5)), f32(1, S(4)), NULL, 1e-3, 0.9, 0.999, 1e-8, 0, 1, false,
                                false, false),
                 TD_ERR_SHAPE, "does not match param [4]");
}
TEST(adam_step_zero) {
    td_tensor *p = f32(1, S(4));
    ASSERT_ERROR(td_adam_update(p, f32(1, S(4)), f32(1, S(4)), f32(1, S(4)), NULL, 1e-3, 0.9, 0.999, 1e-8, 0, 0, false,
                                false, false),
                 TD_ERR_MISUSE, "steps count from 1");
}
TEST(sgd_nesterov_without_momentum) {
    ASSERT_ERROR(td_sgd_update(f32(1, S(4)), f32(1, S(4)), NULL, 0.1, 0, 0, 0, true, false, false), TD_ERR_MISUSE,
                 "nesterov needs momentum");
}
TEST(rmsprop_missing_state) {
    ASSERT_ERROR(
        td_rmsprop_update(f32(1, S(4)), f32(1, S(4)), f32(1, S(4)), NULL, NULL, 1e-2, 0.99, 1e-8, 0, 0.9, false, false),
        TD_ERR_MISUSE, "needs the state tensor");
}
/* An lr that is NaN, infinite or negative is refused where it is set, not at the next step; the lr is kept. */
TEST(optimizer_lr_not_finite) {
    td_tensor *p = f32(1, S(4));
    ASSERT_OK(td_set_requires_grad(p, true));
    td_optimizer *o = td_adam_new(1, &p, NULL);
    ASSERT(o);
    const double bad[] = {INFINITY, -INFINITY, NAN, -1e-3};
    for (int i = 0; i < 4; i++) {
        ASSERT_ERROR(td_optimizer_set_lr(o, bad[i]), TD_ERR_MISUSE, "is not a finite number >= 0");
        ASSERT_ERROR(td_optimizer_set_group_lr(o, 0, bad[i]), TD_ERR_MISUSE, "is not a finite number >= 0");
        ASSERT(td_optimizer_get_lr(o, 0) == 1e-3);
    }
    td_optimizer_set_lr(o, 0); /* zero is a valid lr (a frozen step) */
    ASSERT_OK(td_last_status());
    ASSERT(td_optimizer_get_lr(o, 0) == 0);
    td_optimizer_free(o);
}

TEST_MAIN(TESTS)
