/*
** Autocast's parameter shadows (src/core/shadow.c): the bf16 cast of an f32 parameter kept from one step to the
** next, written by the optimizer's step beside the parameter.
** steps_{cpu,cuda,vulkan}: three Adam steps of a Linear under bf16 autocast: each forward equals the Linear of the
**   parameters' fresh casts bit for bit (a stale shadow would give the last step's weights), and from the second
**   step on the forward casts no parameter: ADAM_STEP wrote their shadows (only x's cast is a `copy`).
** off_cpu: TRIDENT_AUTOCAST_SHADOW=0: every step's forward casts x, w and b, with the same values.
** stale_after_copy_cpu: a parameter written by copy_ after a step: the next forward reads the new values.
** kernel_write_vulkan: a parameter written by a user's GLSL kernel (td_kernel_launch): the same.
** arena_cpu: a flattened two-Linear module: one cast of the whole arena serves its four parameters; after the
**   step, none.
** backward_after_step_cpu: a graph saved before the step reads a shadow that the step rewrote (dx = dy w): its
**   backward fails with autograd's in-place error instead of using the new weights.
** refresh_keeps_saved_cpu: a graph saved before copy_ wrote the parameter: the next forward's refresh makes a new
**   shadow (the fresh values), and the old graph's backward reads the old one: dx = dy w as it was.
** capture_cuda: a parameter updated by a replayed graph (no dispatcher on the replay): the eager forward after the
**   replay reads the replayed values.
*/
#include <string.h>

#include "test_util.h"
#include "trident/amp.h"
#include "trident/autograd.h"
#include "trident/device.h"
#include "trident/nn.h"
#include "trident/optim.h"
#include "trident/profile.h"

#define TESTS(X)                                                                                                       \
    X(steps_cpu)                                                                                                       \
    X(steps_cuda)                                                                                                      \
    X(steps_vulkan)                                                                                                    \
    X(off_cpu)                                                                                                         \
    X(stale_after_copy_cpu)                                                                                            \
    X(kernel_write_vulkan) X(arena_cpu) X(backward_after_step_cpu) X(refresh_keeps_saved_cpu) X(capture_cuda)

enum { M = 16, K = 64, N = 32 };

/* `copy` ops of the forward phase since td_profile_begin */
static int64_t forward_copies(void) {
    td_profile_row rows[256];
    int n = td_profile_rows(rows, 256);
    int64_t c = 0;
    for (int i = 0; i < n && i < 256; i++)
        if (!strcmp(rows[i].op, "copy") && !rows[i].backward) c += rows[i].count;
    return c;
}

static td_tensor *param(int ndim, const int64_t *shape, td_device dev) {
    td_tensor *t = td_keep(test_uniform_tensor(ndim, shape, -0.5, 0.5, TD_F32, dev));
    ASSERT(t != NULL);
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* linear(x, w, b) under bf16 autocast, its copies counted into *copies (NULL: not profiled) */
static td_tensor *autocast_linear(td_tensor *x, td_tensor *w, td_tensor *b, int64_t *copies) {
    td_device dev = td_tensor_device(x);
    if (copies) {
        ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
        ASSERT_OK(td_profile_begin());
    }
    ASSERT_OK(td_autocast_begin(dev.type, TD_BF16));
    td_tensor *y = td_linear(x, w, b);
    ASSERT_OK(td_autocast_end());
    ASSERT(y != NULL);
    if (copies) {
        ASSERT_OK(td_profile_end(NULL));
        *copies = forward_copies();
    }
    return y;
}

/* y equals the linear of x, w, b cast to bf16 now, without autocast: the same kernel on the same bits */
static void check_fresh(td_tensor *y, td_tensor *x, td_tensor *w, td_tensor *b) {
    td_no_grad_begin();
    td_tensor *ref = td_linear(td_cast(x, TD_BF16), td_cast(w, TD_BF16), td_cast(b, TD_BF16));
    td_no_grad_end();
    ASSERT(ref != NULL);
    ASSERT_EQ_INT(td_tensor_dtype(y), TD_BF16);
    double err = test_max_rel(y, ref);
    if (err != 0) TEST_FAIL_("the autocast forward differs from the fresh casts' by %g (a stale shadow)", err);
}

/* later: the forward's copies from the second step on */
static void steps(td_device dev, int64_t later) {
    test_seed();
    td_scope_begin();
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){M, K}, -1, 1, TD_F32, dev);
    td_tensor *w = param(2, (int64_t[]){N, K}, dev), *b = param(1, (int64_t[]){N}, dev);
    td_optim_options o = td_adam_defaults(0.05);
    td_optimizer *opt = td_adam_new(2, (td_tensor *[]){w, b}, &o);
    ASSERT(opt != NULL);
    for (int step = 0; step < 3; step++) {
        td_scope_begin();
        int64_t copies;
        td_tensor *y = autocast_linear(x, w, b, &copies);
        check_fresh(y, x, w, b);
        /* step 0 casts x, w and b; later only x where the step wrote their shadows */
        int64_t want = step == 0 ? 3 : later;
        fprintf(stderr, "    step %d: %lld forward copies (expected %lld)\n", step, (long long)copies, (long long)want);
        ASSERT_EQ_INT(copies, want);
        ASSERT_OK(td_backward(td_sum(td_mul(y, y), 0, NULL, false), NULL, false));
        ASSERT_OK(td_optimizer_step(opt));
        td_optimizer_zero_grad(opt);
        td_scope_end();
    }
    td_optimizer_free(opt);
    td_release(w), td_release(b);
    td_scope_end();
}

TEST(steps_cpu) { steps(TD_CPU, 1); }
TEST(steps_cuda) { steps(test_device_or_skip("cuda:0"), 1); }
TEST(steps_vulkan) { steps(test_device_or_skip("vulkan:0"), 1); }

TEST(off_cpu) {
    setenv("TRIDENT_AUTOCAST_SHADOW", "0", 1); /* read once a process: each case runs in its own */
    steps(TD_CPU, 3);
}

/* One step of w, b through Adam (their shadows then current where the backend writes them). */
static void one_step(td_tensor *x, td_tensor *w, td_tensor *b) {
    td_scope_begin();
    td_optim_options o = td_adam_defaults(0.05);
    td_optimizer *opt = td_adam_new(2, (td_tensor *[]){w, b}, &o);
    ASSERT(opt != NULL);
    ASSERT_OK(td_backward(td_sum(autocast_linear(x, w, b, NULL), 0, NULL, false), NULL, false));
    ASSERT_OK(td_optimizer_step(opt));
    td_optimizer_free(opt);
    td_scope_end();
}

TEST(stale_after_copy_cpu) {
    test_seed();
    td_scope_begin();
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){M, K}, -1, 1, TD_F32, TD_CPU);
    td_tensor *w = param(2, (int64_t[]){N, K}, TD_CPU), *b = param(1, (int64_t[]){N}, TD_CPU);
    one_step(x, w, b);
    td_no_grad_begin();
    ASSERT_OK(td_copy_(w, test_uniform_tensor(2, (int64_t[]){N, K}, -2, 2, TD_F32, TD_CPU)));
    td_no_grad_end();
    int64_t copies;
    check_fresh(autocast_linear(x, w, b, &copies), x, w, b);
    ASSERT_EQ_INT(copies, 2); /* x, and w's storage cast again */
    td_release(w), td_release(b);
    td_scope_end();
}

TEST(kernel_write_vulkan) {
    td_device dev = test_device_or_skip("vulkan:0");
    static const char *scale_src = "#version 450\n"
                                   "layout(local_size_x = 64) in;\n"
                                   "layout(binding = 0) buffer W { float w[]; };\n"
                                   "layout(push_constant) uniform P { uint n; } p;\n"
                                   "void main() {\n"
                                   "    uint i = gl_GlobalInvocationID.x;\n"
                                   "    if (i < p.n) w[i] = 3.0 * w[i] + 0.25;\n"
                                   "}\n";
    test_seed();
    td_scope_begin();
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){M, K}, -1, 1, TD_F32, dev);
    td_tensor *w = param(2, (int64_t[]){N, K}, dev), *b = param(1, (int64_t[]){N}, dev);
    check_fresh(autocast_linear(x, w, b, NULL), x, w, b); /* w's shadow made and current */
    td_user_kernel *k = NULL;
    char log[2048];
    ASSERT_OK(td_kernel_compile(dev, TD_KERNEL_GLSL, scale_src, NULL, NULL, &k, log, sizeof log));
    uint32_t n = N * K, grid[3] = {(n + 63) / 64, 1, 1};
    ASSERT_OK(td_kernel_launch(k, grid, NULL, 0, 1, &w, &n, sizeof n));
    td_kernel_free(k);
    check_fresh(autocast_linear(x, w, b, NULL), x, w, b);
    td_release(w), td_release(b);
    td_scope_end();
}

TEST(arena_cpu) {
    test_seed();
    td_manual_seed(1);
    td_scope_begin();
    td_module *net = td_sequential_new(2, (td_module *[]){td_linear_new(K, N, true), td_linear_new(N, 8, true)});
    ASSERT(net != NULL);
    ASSERT_OK(td_module_flatten_parameters(net, TD_CPU));
    td_tensor *ps[4];
    ASSERT_EQ_INT(td_module_parameters(net, ps, 4), 4);
    td_optim_options o = td_adam_defaults(0.05);
    td_optimizer *opt = td_adam_new(4, ps, &o);
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){M, K}, -1, 1, TD_F32, TD_CPU);
    for (int step = 0; step < 2; step++) {
        td_scope_begin();
        ASSERT_OK(td_profile_set_roofline(TD_CPU, 1, 1));
        ASSERT_OK(td_profile_begin());
        ASSERT_OK(td_autocast_begin(TD_DEVICE_CPU, TD_BF16));
        td_tensor *y = ASSERT_TENSOR(td_module_forward(net, x));
        ASSERT_OK(td_autocast_end());
        ASSERT_OK(td_profile_end(NULL));
        /* x, and on the first step the arena's one cast; the first Linear's bf16 output is not cast again */
        ASSERT_EQ_INT(forward_copies(), step == 0 ? 2 : 1);
        td_no_grad_begin();
        td_tensor *h = td_linear(td_cast(x, TD_BF16), td_cast(ps[0], TD_BF16), td_cast(ps[1], TD_BF16));
        td_tensor *ref = td_linear(h, td_cast(ps[2], TD_BF16), td_cast(ps[3], TD_BF16));
        td_no_grad_end();
        ASSERT(test_max_rel(y, ref) == 0);
        ASSERT_OK(td_backward(td_sum(td_mul(y, y), 0, NULL, false), NULL, false));
        ASSERT_OK(td_optimizer_step(opt));
        td_optimizer_zero_grad(opt);
        td_scope_end();
    }
    td_optimizer_free(opt);
    td_module_free(net);
    td_scope_end();
}

TEST(backward_after_step_cpu) {
    test_seed();
    td_scope_begin();
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){M, K}, -1, 1, TD_F32, TD_CPU);
    td_tensor *w = param(2, (int64_t[]){N, K}, TD_CPU), *b = param(1, (int64_t[]){N}, TD_CPU);
    one_step(x, w, b);
    td_tensor *x1 = td_detach(x); /* dx = dy w reads the w it saved */
    ASSERT_OK(td_set_requires_grad(x1, true));
    td_tensor *loss = td_sum(autocast_linear(x1, w, b, NULL), 0, NULL, false); /* saves w's shadow view */
    one_step(x, w, b);                                                         /* rewrites the shadow */
    ASSERT_ERROR(td_backward(loss, NULL, false), TD_ERR_STATE, "modified by an inplace operation");
    td_release(w), td_release(b);
    td_scope_end();
}

TEST(refresh_keeps_saved_cpu) {
    test_seed();
    td_scope_begin();
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){M, K}, -1, 1, TD_F32, TD_CPU);
    td_tensor *w = param(2, (int64_t[]){N, K}, TD_CPU), *b = param(1, (int64_t[]){N}, TD_CPU);
    td_tensor *x1 = td_detach(x);
    ASSERT_OK(td_set_requires_grad(x1, true));
    td_tensor *y = autocast_linear(x1, w, b, NULL); /* saves w's shadow view */
    td_tensor *dy = test_uniform_tensor(2, (int64_t[]){M, N}, -1, 1, TD_BF16, TD_CPU);
    td_no_grad_begin();
    td_tensor *want = td_matmul(dy, td_cast(w, TD_BF16)); /* dx with the weights the forward read */
    ASSERT_OK(td_copy_(w, test_uniform_tensor(2, (int64_t[]){N, K}, -2, 2, TD_F32, TD_CPU)));
    td_no_grad_end();
    check_fresh(autocast_linear(x, w, b, NULL), x, w, b); /* the refresh: a new shadow */
    ASSERT_OK(td_backward(y, dy, false));
    ASSERT(test_max_rel(td_grad_of(x1), want) == 0);
    td_release(w), td_release(b);
    td_scope_end();
}

TEST(capture_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    test_seed();
    td_scope_begin();
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){M, K}, -1, 1, TD_F32, dev);
    td_tensor *w = param(2, (int64_t[]){N, K}, dev), *b = param(1, (int64_t[]){N}, dev);
    one_step(x, w, b); /* shadows current */
    td_tensor *g = test_uniform_tensor(2, (int64_t[]){N, K}, -1, 1, TD_F32, dev);
    td_tensor *m = td_zeros(2, (int64_t[]){N, K}, TD_F32, dev), *v = td_zeros(2, (int64_t[]){N, K}, TD_F32, dev);
    td_captured_graph *graph = NULL;
    ASSERT_OK(td_capture_begin(dev));
    ASSERT_OK(td_adam_update(w, g, m, v, NULL, 0.05, 0.9, 0.999, 1e-8, 0, 1, false, false, false));
    ASSERT_OK(td_capture_end(dev, &graph));
    check_fresh(autocast_linear(x, w, b, NULL), x, w, b);
    ASSERT_OK(td_graph_replay(graph));
    ASSERT_OK(td_graph_replay(graph));
    check_fresh(autocast_linear(x, w, b, NULL), x, w, b);
    td_graph_free(graph);
    td_release(w), td_release(b);
    td_scope_end();
}

TEST_MAIN(TESTS)
