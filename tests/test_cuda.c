/*
** The CUDA backend on cuda:0: devices, transfers and the tensor API, events,
** memory statistics and OOM, runtime CUDA kernels (NVRTC) with a CUDA
** backward under gradcheck, CUDA-graph capture of a training step against
** eager, mixing devices, and a plugin of another API version. The ops
** themselves are in test_conformance and test_gradcheck, which take every
** device. Without a CUDA device the GPU cases report "skipped: no CUDA device"
** (no_driver and plugin_version run everywhere).
*/
#include <dlfcn.h>

#include "runner.h"

#define TESTS(X)                                                                                                       \
    X(no_driver)                                                                                                       \
    X(plugin_version)                                                                                                  \
    X(device_info)                                                                                                     \
    X(tensor_api)                                                                                                      \
    X(mixed_devices)                                                                                                   \
    X(events_and_streams)                                                                                              \
    X(memory_stats_and_oom)                                                                                            \
    X(foreign_memory)                                                                                                  \
    X(cuda_kernel)                                                                                                     \
    X(cuda_kernel_errors)                                                                                              \
    X(cuda_kernel_gradcheck)                                                                                           \
    X(capture_replay_training)                                                                                         \
    X(no_host_sync_in_step)

static void need_cuda(void) {
    if (!td_device_available(TD_CUDA(0)))
        TEST_SKIP("no CUDA device: %s", td_backend_unavailable_reason(TD_DEVICE_CUDA));
}

/* Without a usable driver, `trident devices` and td_device_parse say why. */
TEST(no_driver) {
    if (td_device_available(TD_CUDA(0))) TEST_SKIP("a CUDA device is present");
    const char *why = td_backend_unavailable_reason(TD_DEVICE_CUDA);
    ASSERT(why != NULL);
    printf("  cuda: %s\n", why);
    ASSERT(strstr(why, "driver") || strstr(why, "device") || strstr(why, "plugin") || strstr(why, "TRIDENT_NO_CUDA"));
    td_device d;
    ASSERT_ERROR(td_device_parse("cuda:0", &d), TD_ERR_UNAVAILABLE, "cuda");
    td_tensor *t = td_zeros(1, (int64_t[]){4}, TD_F32, TD_CUDA(0));
    ASSERT(t == NULL);
    ASSERT(td_last_status() == TD_ERR_UNAVAILABLE);
}

/* A plugin built against another contract version is refused with a reason. */
TEST(plugin_version) {
    const char *dir = getenv("TD_FAKE_PLUGIN_DIR");
    if (!dir) TEST_SKIP("TD_FAKE_PLUGIN_DIR not set (CTest sets it)");
    setenv("TRIDENT_PLUGIN_DIR", dir, 1);
    unsetenv("TRIDENT_NO_CUDA"); /* the sanitized run sets it */
    const char *why = td_backend_unavailable_reason(TD_DEVICE_CUDA);
    ASSERT(why != NULL);
    printf("  cuda: %s\n", why);
    ASSERT(strstr(why, "backend API version 99") != NULL);
    ASSERT(strstr(why, "rebuild") != NULL);
    td_scope_begin();
    td_tensor *t = ASSERT_TENSOR(td_ones(1, (int64_t[]){3}, TD_F32, TD_CPU)); /* the rest still works */
    ASSERT_NEAR(td_item(td_sum(t, 0, NULL, false)), 3, 0);
    td_scope_end();
}

TEST(device_info) {
    need_cuda();
    td_device_info info;
    ASSERT_OK(td_device_get_info(TD_CUDA(0), &info));
    printf("  %s | %s | %d SMs | sm_%d | %s\n", info.name, info.driver, info.compute_units, info.arch, info.features);
    ASSERT(info.name[0] && info.compute_units > 0 && info.total_memory > 0);
    ASSERT_EQ_INT(info.subgroup_size, 32);
    ASSERT(info.arch >= 70);
    ASSERT(!info.emulated);
    ASSERT_ERROR(td_device_get_info(TD_CUDA(7), &info), TD_ERR_UNAVAILABLE, "cuda:7");
    td_tensor *t =
        td_zeros(1, (int64_t[]){4}, TD_F32, TD_CUDA(1 + td_backend_for(TD_DEVICE_CUDA)->iface->device_count()));
    ASSERT(t == NULL);
    ASSERT(strstr(td_last_error(), "does not exist"));
    td_device d;
    ASSERT_OK(td_device_parse("auto", &d));
    ASSERT_EQ_INT(d.type, TD_DEVICE_CUDA);
    ASSERT(td_device_native_stream(TD_CUDA(0)) != NULL);
}

/* Poisoned, guarded buffers; transfers both ways; views and casts on the device. */
TEST(tensor_api) {
    need_cuda();
    td_debug_set(TD_DEBUG_POISON | TD_DEBUG_GUARDS);
    enum { N = 1000 };
    float v[N], back[N];
    for (int i = 0; i < N; i++) v[i] = (float)i * 0.5f - 100;
    td_scope_begin();
    td_tensor *g = ASSERT_TENSOR(td_from_data(v, 2, (int64_t[]){40, 25}, TD_F32, TD_CUDA(0)));
    ASSERT_OK(td_copy_to_host(g, back, sizeof back, TD_F32));
    ASSERT(!memcmp(v, back, sizeof v));
    td_tensor *tt = ASSERT_TENSOR(td_contiguous(td_transpose(g, 0, 1)));
    td_tensor *h = ASSERT_TENSOR(td_to(tt, TD_CPU));
    for (int i = 0; i < 25; i++)
        for (int j = 0; j < 40; j++) ASSERT_EQ_INT((int)(td_get(h, (int64_t[]){i, j}) * 2), (int)(v[j * 25 + i] * 2));
    double s = td_item(td_sum(td_cast(g, TD_F64), 0, NULL, false)), want = 0;
    for (int i = 0; i < N; i++) want += v[i];
    ASSERT_NEAR(s, want, 1e-9);
    td_scope_end();
    ASSERT_EQ_INT(td_debug_guard_failures(), 0);
}

TEST(mixed_devices) {
    need_cuda();
    td_scope_begin();
    td_tensor *a = ASSERT_TENSOR(td_ones(1, (int64_t[]){8}, TD_F32, TD_CUDA(0)));
    td_tensor *b = ASSERT_TENSOR(td_ones(1, (int64_t[]){8}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_add(a, b), TD_ERR_DEVICE, "cuda:0 and cpu");
    if (td_device_available(TD_VULKAN(0))) {
        td_tensor *c = ASSERT_TENSOR(td_ones(1, (int64_t[]){8}, TD_F32, TD_VULKAN(0)));
        ASSERT_ERROR(td_mul(a, c), TD_ERR_DEVICE, "vulkan:0");
        /* td_to moves between the two GPU backends through the host */
        ASSERT_NEAR(td_item(td_sum(td_add(a, td_to(c, TD_CUDA(0))), 0, NULL, false)), 16, 0);
    }
    td_scope_end();
}

/* Events time work; event_wait orders without a host wait. */
TEST(events_and_streams) {
    need_cuda();
    td_device_event *e0, *e1;
    ASSERT_OK(td_event_new(TD_CUDA(0), &e0));
    ASSERT_OK(td_event_new(TD_CUDA(0), &e1));
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_rand(2, (int64_t[]){1024, 1024}, 1, 0, TD_F32, TD_CUDA(0)));
    ASSERT_OK(td_event_record(e0));
    td_tensor *y = ASSERT_TENSOR(td_matmul(x, x));
    ASSERT_OK(td_event_record(e1));
    int64_t syncs = td_host_sync_count();
    ASSERT_OK(td_event_wait(e1, TD_CUDA(0)));
    ASSERT_EQ_INT(td_host_sync_count(), syncs); /* queue-side, no host wait */
    double ms = -1;
    ASSERT_OK(td_event_elapsed_ms(e0, e1, &ms));
    printf("  1024^3 matmul: %.3f ms\n", ms);
    ASSERT(ms > 0 && ms < 1000);
    ASSERT(td_item(td_sum(y, 0, NULL, false)) > 0);
    td_scope_end();
    td_event_free(e0);
    td_event_free(e1);
    ASSERT_OK(td_synchronize(TD_CUDA(0)));
}

/* The allocator's statistics move with tensors; an impossible allocation is
** TD_ERR_OOM naming the size, and the next allocation works. */
TEST(memory_stats_and_oom) {
    need_cuda();
    td_memory_stats s0, s1, s2;
    ASSERT_OK(td_memory_stats_get(TD_CUDA(0), true, &s0));
    td_tensor *t = ASSERT_TENSOR(td_empty(1, (int64_t[]){(int64_t)64 << 20}, TD_F32, TD_CUDA(0)));
    ASSERT_OK(td_memory_stats_get(TD_CUDA(0), false, &s1));
    ASSERT(s1.allocated >= s0.allocated + (256u << 20));
    ASSERT(s1.peak_allocated >= s1.allocated && s1.reserved >= s1.allocated);
    td_release(t);
    ASSERT_OK(td_memory_stats_get(TD_CUDA(0), false, &s2));
    ASSERT_EQ_INT(s2.allocated, s0.allocated);
    ASSERT(s2.peak_allocated >= s1.allocated);
    printf("  allocated %llu reserved %llu peak %llu\n", (unsigned long long)s1.allocated,
           (unsigned long long)s1.reserved, (unsigned long long)s1.peak_allocated);
    int64_t huge = (int64_t)1 << 44; /* 64 TiB of f32 */
    ASSERT_ERROR(td_empty(1, &huge, TD_F32, TD_CUDA(0)), TD_ERR_OOM, "out of memory allocating");
    td_tensor *ok = ASSERT_TENSOR(td_ones(1, (int64_t[]){1 << 20}, TD_F32, TD_CUDA(0)));
    ASSERT_NEAR(td_item(td_sum(ok, 0, NULL, false)), 1 << 20, 0);
    td_release(ok);
    ASSERT_OK(td_memory_empty_cache(TD_CUDA(0)));
}

static int deleted;
static void count_delete(void *ctx) { deleted += *(int *)ctx; }

/* Memory Trident did not allocate, wrapped as a tensor; its deleter runs once
** after the last tensor over it goes. */
TEST(foreign_memory) {
    need_cuda();
    td_scope_begin();
    td_tensor *owner = ASSERT_TENSOR(td_arange(0, 12, 1, TD_F32, TD_CUDA(0)));
    td_keep(owner);
    uint64_t addr = td_tensor_device_address(owner);
    ASSERT(addr != 0);
    static int one = 1;
    td_tensor *f = ASSERT_TENSOR(
        td_from_foreign(TD_CUDA(0), addr + 4 * 4, 2, (int64_t[]){2, 4}, NULL, TD_F32, count_delete, &one));
    td_keep(f);
    ASSERT_NEAR(td_item(td_sum(f, 0, NULL, false)), 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11, 0);
    td_scope_end();
    td_release(f);
    ASSERT_OK(td_synchronize(TD_CUDA(0)));
    td_release(td_zeros(1, (int64_t[]){1}, TD_F32, TD_CUDA(0))); /* an allocation polls pending deleters */
    ASSERT_EQ_INT(deleted, 1);
    td_release(owner);
    ASSERT_ERROR(td_from_foreign(TD_CUDA(0), 0x10, 1, (int64_t[]){4}, NULL, TD_F32, NULL, NULL), TD_ERR_MISUSE,
                 "not CUDA device");
}

static const char *saxpy_src = "extern \"C\" __global__ void saxpy(float *y, const float *x, float a, int n) {\n"
                               "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                               "    if (i < n) y[i] += a * x[i];\n"
                               "}\n";

TEST(cuda_kernel) {
    need_cuda();
    enum { N = 1000 };
    float x[N], y[N], got[N];
    for (int i = 0; i < N; i++) x[i] = (float)i / N, y[i] = 1.0f - (float)i / N;
    td_tensor *tx = ASSERT_TENSOR(td_from_data(x, 1, (int64_t[]){N}, TD_F32, TD_CUDA(0)));
    td_tensor *ty = ASSERT_TENSOR(td_from_data(y, 1, (int64_t[]){N}, TD_F32, TD_CUDA(0)));
    td_user_kernel *k = NULL;
    char log[4096];
    ASSERT_OK(td_kernel_compile(TD_CUDA(0), TD_KERNEL_CUDA, saxpy_src, "saxpy", NULL, &k, log, sizeof log));
    struct {
        float a;
        int n;
    } push = {2.5f, N};
    uint32_t grid[3] = {(N + 127) / 128, 1, 1}, block[3] = {128, 1, 1};
    td_tensor *args[2] = {ty, tx};
    ASSERT_OK(td_kernel_launch(k, grid, block, 0, 2, args, &push, sizeof push));
    ASSERT_OK(td_kernel_launch(k, grid, block, 0, 2, args, &push, sizeof push)); /* ordered after the first */
    ASSERT_OK(td_copy_to_host(ty, got, sizeof got, TD_F32));
    for (int i = 0; i < N; i++) ASSERT_NEAR(got[i], y[i] + 5.0f * x[i], 1e-5);
    /* again, with a define: served from the cache under another key */
    const char *defs[] = {"SCALE=3"};
    td_kernel_options o = {.defines = defs, .n_defines = 1};
    const char *scaled = "extern \"C\" __global__ void f(float *y) { y[threadIdx.x] = SCALE; }\n";
    td_user_kernel *k2 = NULL;
    ASSERT_OK(td_kernel_compile(TD_CUDA(0), TD_KERNEL_CUDA, scaled, "f", &o, &k2, NULL, 0));
    uint32_t one[3] = {1, 1, 1}, b8[3] = {8, 1, 1};
    ASSERT_OK(td_kernel_launch(k2, one, b8, 0, 1, &ty, NULL, 0));
    ASSERT_NEAR(td_get(ty, (int64_t[]){7}), 3, 0);
    td_kernel_free(k2);
    td_kernel_free(k);
    td_release(tx), td_release(ty);
}

TEST(cuda_kernel_errors) {
    need_cuda();
    char log[4096];
    td_user_kernel *k = (td_user_kernel *)1;
    const char *bad = "extern \"C\" __global__ void f(float *y) {\n  y[0] = undeclared_thing;\n}\n";
    ASSERT_ERROR(td_kernel_compile(TD_CUDA(0), TD_KERNEL_CUDA, bad, "f", NULL, &k, log, sizeof log), TD_ERR_COMPILE,
                 "cuda:2: error: identifier \"undeclared_thing\" is undefined");
    ASSERT(!strchr(td_last_error(), '\n'));
    ASSERT(k == NULL);
    ASSERT(strstr(log, "undeclared_thing") != NULL);
    printf("  log: %.160s\n", log);
    ASSERT_ERROR(td_kernel_compile(TD_CUDA(0), TD_KERNEL_CUDA, saxpy_src, "nope", NULL, &k, log, sizeof log),
                 TD_ERR_COMPILE, "nope");
    ASSERT_ERROR(td_kernel_compile(TD_CUDA(0), TD_KERNEL_GLSL, saxpy_src, "saxpy", NULL, &k, log, sizeof log),
                 TD_ERR_UNSUPPORTED, "CUDA");
    ASSERT_OK(td_kernel_compile(TD_CUDA(0), TD_KERNEL_CUDA, saxpy_src, "saxpy", NULL, &k, log, sizeof log));
    td_tensor *t = ASSERT_TENSOR(td_zeros(1, (int64_t[]){16}, TD_F32, TD_CUDA(0)));
    td_tensor *args[2] = {t, t};
    struct {
        float a;
        int n;
    } push = {1, 16};
    uint32_t grid[3] = {1, 1, 1}, huge[3] = {2048, 1, 1}, ok[3] = {32, 1, 1};
    ASSERT_ERROR(td_kernel_launch(k, grid, huge, 0, 2, args, &push, sizeof push), TD_ERR_MISUSE, "at most");
    ASSERT_ERROR(td_kernel_launch(k, grid, NULL, 0, 2, args, &push, sizeof push), TD_ERR_MISUSE, "block size");
    ASSERT_ERROR(td_kernel_launch(k, grid, ok, 0, 1, args, &push, sizeof push), TD_ERR_MISUSE, "bytes");
    td_tensor *cpu = ASSERT_TENSOR(td_zeros(1, (int64_t[]){16}, TD_F32, TD_CPU));
    td_tensor *mixed[2] = {t, cpu};
    ASSERT_ERROR(td_kernel_launch(k, grid, ok, 0, 2, mixed, &push, sizeof push), TD_ERR_DEVICE, "cpu");
    ASSERT_OK(td_kernel_launch(k, grid, ok, 0, 2, args, &push, sizeof push));
    ASSERT_OK(td_synchronize(TD_CUDA(0)));
    td_kernel_free(k);
    td_release(t), td_release(cpu);
}

/* y = x^3 in CUDA, dy/dx = 3 x^2 dy in CUDA, as a custom autograd function. */
static const char *cube_src = "extern \"C\" __global__ void cube(double *y, const double *x, long long n) {\n"
                              "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                              "    if (i < n) y[i] = x[i] * x[i] * x[i];\n"
                              "}\n"
                              "extern \"C\" __global__ void cube_grad(double *dx, const double *x, const double *dy,\n"
                              "                                      long long n) {\n"
                              "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                              "    if (i < n) dx[i] = 3.0 * x[i] * x[i] * dy[i];\n"
                              "}\n";

typedef struct cube_kernels {
    td_user_kernel *fwd, *bwd;
} cube_kernels;

static td_status launch_n(td_user_kernel *k, int nt, td_tensor *const *t, int64_t n) {
    uint32_t grid[3] = {(uint32_t)((n + 127) / 128), 1, 1}, block[3] = {128, 1, 1};
    long long push = n;
    return td_kernel_launch(k, grid, block, 0, nt, t, &push, sizeof push);
}

static td_status cube_forward(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    cube_kernels *k = td_ctx_user(ctx);
    td_tensor *x = td_contiguous(in[0]);
    out[0] = x ? td_empty_like(x) : NULL;
    if (!out[0]) return td_last_status();
    td_status st = launch_n(k->fwd, 2, (td_tensor *[]){out[0], x}, td_numel(x));
    return st == TD_OK ? td_ctx_save_for_backward(ctx, 1, &x) : st;
}

static td_status cube_backward(td_function_ctx *ctx, int n_out, td_tensor *const *dy, int n_in, td_tensor **dx) {
    (void)n_out, (void)n_in;
    cube_kernels *k = td_ctx_user(ctx);
    td_tensor *x = td_ctx_saved(ctx, 0), *g = td_contiguous(dy[0]);
    dx[0] = g ? td_empty_like(x) : NULL;
    return dx[0] ? launch_n(k->bwd, 3, (td_tensor *[]){dx[0], x, g}, td_numel(x)) : td_last_status();
}

static const td_function cube_fn = {"cuda_cube", cube_forward, cube_backward};

static td_tensor *cube_apply(void *user, int n, td_tensor *const *in) {
    (void)n;
    td_tensor *out = NULL;
    return td_function_apply(&cube_fn, user, 1, in, 1, &out) == TD_OK ? td_mul(out, in[0]) : NULL; /* x^4 */
}

TEST(cuda_kernel_gradcheck) {
    need_cuda();
    cube_kernels k = {0};
    char log[4096];
    ASSERT_OK(td_kernel_compile(TD_CUDA(0), TD_KERNEL_CUDA, cube_src, "cube", NULL, &k.fwd, log, sizeof log));
    ASSERT_OK(td_kernel_compile(TD_CUDA(0), TD_KERNEL_CUDA, cube_src, "cube_grad", NULL, &k.bwd, log, sizeof log));
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_randn(2, (int64_t[]){3, 5}, 11, 0, TD_F64, TD_CUDA(0)));
    ASSERT_OK(td_set_requires_grad(x, true));
    ASSERT_OK(td_gradcheck(cube_apply, &k, 1, &x, NULL));
    td_scope_end();
    td_kernel_free(k.fwd);
    td_kernel_free(k.bwd);
}

/* An MLP step (forward, cross entropy, backward, SGD with momentum) on fixed
** input tensors; one eager warm-up step makes the optimizer state. */
typedef struct mlp {
    td_module *m;
    td_optimizer *opt;
    td_tensor *x, *y; /* static inputs on the device */
} mlp;

static void mlp_make(mlp *r, td_device dev, bool adam) {
    td_manual_seed(3);
    td_module *layers[] = {td_linear_new(64, 128, true), td_relu_new(), td_linear_new(128, 10, true)};
    r->m = td_sequential_new(3, layers);
    ASSERT(r->m);
    ASSERT_OK(td_module_to(r->m, dev));
    td_tensor *params[8];
    int np = td_module_parameters(r->m, params, 8);
    td_optim_options o = adam ? td_adam_defaults(1e-3) : td_sgd_defaults(0.05);
    o.momentum = adam ? 0 : 0.9;
    o.capturable = adam; /* the step count on the device, advanced by each replay */
    r->opt = adam ? td_adam_new(np, params, &o) : td_sgd_new(np, params, &o);
    ASSERT(r->opt);
    r->x = td_keep(ASSERT_TENSOR(td_zeros(2, (int64_t[]){32, 64}, TD_F32, dev)));
    r->y = td_keep(ASSERT_TENSOR(td_zeros(1, (int64_t[]){32}, TD_I64, dev)));
}

/* The batch of step s (one of 4, so the model can learn them), written into
** the static inputs (eager, before a replay). */
static void mlp_batch(mlp *r, int s) {
    td_scope_begin();
    int64_t ids[32];
    s %= 4;
    for (int i = 0; i < 32; i++) ids[i] = (i * 7 + s) % 10;
    ASSERT_OK(td_copy_(r->x, td_randn(2, (int64_t[]){32, 64}, 100 + (uint64_t)s, 0, TD_F32, TD_CPU)));
    ASSERT_OK(td_copy_(r->y, td_from_data(ids, 1, (int64_t[]){32}, TD_I64, TD_CPU)));
    td_scope_end();
}

static td_tensor *mlp_step(mlp *r) {
    td_tensor *loss = td_cross_entropy_loss(td_module_forward(r->m, r->x), r->y, NULL, -100, 0, TD_REDUCE_MEAN);
    td_optimizer_zero_grad(r->opt);
    if (td_backward(loss, NULL, false) != TD_OK || td_optimizer_step(r->opt) != TD_OK) return NULL;
    return loss;
}

/* 50 steps captured once and replayed give the eager run's losses bit for bit,
** with SGD + momentum and with capturable Adam. */
static void capture_replay(bool adam) {
    enum { STEPS = 50 };
    double eager[STEPS], replay[STEPS];
    mlp a = {0}, b = {0};
    mlp_make(&a, TD_CUDA(0), adam);
    for (int s = 0; s < STEPS; s++) {
        td_scope_begin();
        mlp_batch(&a, s);
        eager[s] = td_item(ASSERT_TENSOR(mlp_step(&a)));
        td_scope_end();
    }
    mlp_make(&b, TD_CUDA(0), adam);
    td_scope_begin();
    mlp_batch(&b, 0);
    replay[0] = td_item(ASSERT_TENSOR(mlp_step(&b))); /* eager: the momentum buffers are made here */
    td_scope_end();
    mlp_batch(&b, 1);
    ASSERT_OK(td_capture_begin(TD_CUDA(0)));
    td_scope_begin();
    td_tensor *loss = td_keep(ASSERT_TENSOR(mlp_step(&b)));
    td_scope_end();
    ASSERT_ERROR(td_item(loss), TD_ERR_STATE, "captur");
    td_captured_graph *g = NULL;
    ASSERT_OK(td_capture_end(TD_CUDA(0), &g));
    for (int s = 1; s < STEPS; s++) {
        if (s > 1) mlp_batch(&b, s);
        ASSERT_OK(td_graph_replay(g));
        replay[s] = td_item(loss);
    }
    for (int s = 0; s < STEPS; s++) {
        if (s % 10 == 0 || eager[s] != replay[s])
            printf("  %s step %d: eager %.9g replay %.9g\n", adam ? "adam" : "sgd", s, eager[s], replay[s]);
        ASSERT(eager[s] == replay[s]);
    }
    ASSERT(eager[STEPS - 1] < eager[0]);
    td_release(loss);
    td_graph_free(g);
}

TEST(capture_replay_training) {
    need_cuda();
    capture_replay(false);
    capture_replay(true);
}

/* A training step makes no host wait; reading the loss makes exactly one. */
TEST(no_host_sync_in_step) {
    need_cuda();
    mlp a = {0};
    mlp_make(&a, TD_CUDA(0), false);
    mlp_batch(&a, 0);
    td_scope_begin();
    td_release(td_keep(ASSERT_TENSOR(mlp_step(&a)))); /* warm-up: optimizer state */
    td_scope_end();
    ASSERT_OK(td_synchronize(TD_CUDA(0)));
    int64_t before = td_host_sync_count();
    td_scope_begin();
    td_tensor *loss = ASSERT_TENSOR(mlp_step(&a));
    ASSERT_EQ_INT(td_host_sync_count() - before, 0);
    (void)td_item(loss);
    ASSERT_EQ_INT(td_host_sync_count() - before, 1);
    td_scope_end();
    /* a bad class id is found on the device and reported at that read */
    int64_t bad_ids[32] = {0};
    bad_ids[5] = 99;
    ASSERT_OK(td_copy_(a.y, td_from_data(bad_ids, 1, (int64_t[]){32}, TD_I64, TD_CPU)));
    td_scope_begin();
    td_tensor *l2 = td_cross_entropy_loss(td_module_forward(a.m, a.x), a.y, NULL, -100, 0, TD_REDUCE_MEAN);
    ASSERT(l2 != NULL);
    ASSERT_ERROR(td_item(l2), TD_ERR_INDEX, "out of range for 10 classes");
    td_scope_end();
}

TEST_MAIN(TESTS)
