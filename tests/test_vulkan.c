/*
** The Vulkan backend on vulkan:0 (lavapipe in CI): devices, transfers, the
** core tensor API on Vulkan tensors, runtime GLSL, events, capture and OOM;
** the ops are in test_vulkan_ops.c. Skips when no Vulkan device is available.
**
** Validation: each case turns on TRIDENT_VULKAN_VALIDATION=1 (unless set) and
** fails if the Khronos validation layer reported an error.
*/
#include <dirent.h>

#include "core/internal.h"
#include "test_util.h"
#include "trident/kernel.h"
#include "trident/nn.h"
#include "trident/optim.h"
#include "vulkan_harness.h"

#define TESTS(X)                                                                                                       \
    X(device_info)                                                                                                     \
    X(tensor_api)                                                                                                      \
    X(transfers)                                                                                                       \
    X(glsl_kernel)                                                                                                     \
    X(glsl_errors)                                                                                                     \
    X(glsl_local_size_checked)                                                                                         \
    X(glsl_cache_corrupt)                                                                                              \
    X(glsl_cache_bounded)                                                                                              \
    X(glsl_autograd)                                                                                                   \
    X(module_to_keeps_optimizer)                                                                                       \
    X(events)                                                                                                          \
    X(capture_replay)                                                                                                  \
    X(train_cnn)                                                                                                       \
    X(train_mlp)                                                                                                       \
    X(train_attention)                                                                                                 \
    X(out_of_memory)                                                                                                   \
    X(auto_device)                                                                                                     \
    X(feature_mask)                                                                                                    \
    X(feature_mask_unknown)                                                                                            \
    X(alloc_limits)                                                                                                    \
    X(two_devices)                                                                                                     \
    X(split_matmul_conv)                                                                                               \
    X(bench)

/* "auto" takes the first Vulkan device that is a real GPU, and never a
** software one (lavapipe), which the CPU backend outruns. */
TEST(auto_device) {
    setup();
    td_device want = TD_CPU;
    if (td_device_available(TD_CUDA(0))) TEST_SKIP("a CUDA device is present: auto prefers it");
    for (int i = be->iface->device_count() - 1; i >= 0; i--) {
        td_device_info info;
        ASSERT_OK(be->iface->device_info(i, &info));
        printf("  vulkan:%d %s: %s\n", i, info.name, info.emulated ? "software" : "gpu");
        if (!info.emulated) want = TD_VULKAN(i);
    }
    td_device got;
    ASSERT_OK(td_device_parse("auto", &got));
    ASSERT_EQ_INT(got.type, want.type);
    ASSERT_EQ_INT(got.index, want.index);
    check_clean();
}

TEST(device_info) {
    setup();
    ASSERT(be->iface->device_count() >= 1);
    td_device_info info;
    ASSERT_OK(be->iface->device_info(0, &info));
    printf("  %s | %s | subgroup %d | %s\n", info.name, info.driver, info.subgroup_size, info.features);
    ASSERT(info.name[0]);
    ASSERT(info.subgroup_size >= 1 && (info.subgroup_size & (info.subgroup_size - 1)) == 0);
    /* lavapipe's vector width sets its subgroup size (CTest runs 128 and 256 bits) */
    const char *lp = getenv("LP_NATIVE_VECTOR_WIDTH");
    if (lp && strstr(info.name, "llvmpipe")) ASSERT_EQ_INT(info.subgroup_size, atoi(lp) / 32);
    ASSERT(info.total_memory > 0);
    ASSERT_ERROR(be->iface->device_info(99, &info), TD_ERR_UNAVAILABLE, "vulkan:99");
    check_clean();
}

/* The core's tensor functions on vulkan:0, with poisoned buffers and guard bytes. */
TEST(tensor_api) {
    setup();
    td_debug_set(TD_DEBUG_POISON | TD_DEBUG_GUARDS);
    float v[6] = {1, 2, 3, 4, 5, 6}, out[6];
    int64_t shape[2] = {2, 3};
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, 2, shape, TD_F32, TD_VULKAN(0)));
    td_tensor *tr = ASSERT_TENSOR(td_transpose(t, 0, 1)), *tt = ASSERT_TENSOR(td_contiguous(tr));
    ASSERT_OK(td_copy_to_host(tt, out, sizeof out, TD_F32));
    const float want[6] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; i++) ASSERT_NEAR(out[i], want[i], 0);
    td_tensor *h = ASSERT_TENSOR(td_cast(tt, TD_F16));
    td_tensor *c = ASSERT_TENSOR(td_to(h, TD_CPU));
    ASSERT_OK(td_copy_to_host(c, out, sizeof out, TD_F32));
    for (int i = 0; i < 6; i++) ASSERT_NEAR(out[i], want[i], 0);
    td_tensor *z = ASSERT_TENSOR(td_zeros(1, (int64_t[]){5}, TD_U8, TD_VULKAN(0)));
    td_tensor *z3 = ASSERT_TENSOR(td_select(z, 0, 3));
    ASSERT_NEAR(td_item(z3), 0, 0);
    td_tensor *s = ASSERT_TENSOR(td_scalar(7.5, TD_F64, TD_VULKAN(0)));
    ASSERT_NEAR(td_item(s), 7.5, 0);
    td_release(t), td_release(tr), td_release(tt), td_release(h), td_release(c), td_release(z3), td_release(z),
        td_release(s);
    ASSERT_EQ_INT(td_debug_guard_failures(), 0);
    check_clean();
}

/* write/read/copy/memset at odd offsets, ordered with queued work. */
TEST(transfers) {
    setup();
    enum { N = 1000 };
    unsigned char a[N], b[N];
    for (int i = 0; i < N; i++) a[i] = (unsigned char)(urand() * 256);
    td_buffer *x, *y;
    ASSERT_OK(be->iface->buffer_alloc(0, N, &x));
    ASSERT_OK(be->iface->buffer_alloc(0, N, &y));
    ASSERT_OK(be->iface->write(x, 0, a, N));
    ASSERT_OK(be->iface->memset(y, 0, 0x11, N));
    ASSERT_OK(be->iface->copy(x, 3, y, 5, 501));
    ASSERT_OK(be->iface->memset(y, 7, 0xEE, 3)); /* unaligned, shorter than a word */
    ASSERT_OK(be->iface->memset(x, 0, 0, N));    /* must not disturb the copy queued before */
    ASSERT_OK(be->iface->read(y, 0, b, N));
    for (int i = 0; i < N; i++) {
        int want = i >= 7 && i < 10 ? 0xEE : i >= 5 && i < 506 ? a[i - 2] : 0x11;
        if (b[i] != want) TEST_FAIL_("byte %d = %#x, want %#x", i, b[i], want);
    }
    ASSERT_ERROR(be->iface->read(y, N - 10, b, 1000), TD_ERR_MISUSE, "outside");
    be->iface->buffer_free(x);
    be->iface->buffer_free(y);
    check_clean();
}

/* saxpy_src's push constants */
typedef struct saxpy_push {
    float a;
    uint32_t n;
} saxpy_push;

static const char *saxpy_src = "#version 450\n"
                               "layout(local_size_x = 64) in;\n"
                               "layout(binding = 0) readonly buffer X { float x[]; };\n"
                               "layout(binding = 1) buffer Y { float y[]; };\n"
                               "layout(push_constant) uniform P { float a; uint n; } p;\n"
                               "void saxpy() {\n"
                               "    uint i = gl_GlobalInvocationID.x;\n"
                               "    if (i < p.n) y[i] += p.a * x[i];\n"
                               "}\n";

/* A user's GLSL kernels joining autograd through a custom function:
** y = x^3 (forward kernel), dx = 3 x^2 dy (backward kernel). */
static const char *cube_src = "#version 450\n"
                              "layout(local_size_x = 64) in;\n"
                              "layout(binding = 0) readonly buffer X { float x[]; };\n"
                              "layout(binding = 1) writeonly buffer Y { float y[]; };\n"
                              "layout(push_constant) uniform P { uint n; } p;\n"
                              "void main() {\n"
                              "    uint i = gl_GlobalInvocationID.x;\n"
                              "    if (i < p.n) y[i] = x[i] * x[i] * x[i];\n"
                              "}\n";
static const char *cube_grad_src = "#version 450\n"
                                   "layout(local_size_x = 64) in;\n"
                                   "layout(binding = 0) readonly buffer X { float x[]; };\n"
                                   "layout(binding = 1) readonly buffer D { float dy[]; };\n"
                                   "layout(binding = 2) writeonly buffer G { float dx[]; };\n"
                                   "layout(push_constant) uniform P { uint n; } p;\n"
                                   "void main() {\n"
                                   "    uint i = gl_GlobalInvocationID.x;\n"
                                   "    if (i < p.n) dx[i] = 3.0 * x[i] * x[i] * dy[i];\n"
                                   "}\n";

typedef struct cube_kernels {
    td_user_kernel *fwd, *bwd;
} cube_kernels;

/* Launch k over n elements with tensors t[0..nt), writing nothing else. */
static td_status launch_n(td_user_kernel *k, int nt, td_tensor *const *t, int64_t n) {
    uint32_t grid[3] = {(uint32_t)((n + 63) / 64), 1, 1}, push = (uint32_t)n;
    return td_kernel_launch(k, grid, NULL, 0, nt, t, &push, sizeof push);
}

static td_status cube_forward(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    cube_kernels *k = td_ctx_user(ctx);
    out[0] = td_empty_like(in[0]);
    if (!out[0]) return td_last_status();
    td_tensor *args[2] = {in[0], out[0]};
    td_status st = launch_n(k->fwd, 2, args, td_numel(in[0]));
    return st == TD_OK ? td_ctx_save_for_backward(ctx, 1, in) : st;
}

static td_status cube_backward(td_function_ctx *ctx, int n_out, td_tensor *const *dy, int n_in, td_tensor **dx) {
    (void)n_out, (void)n_in;
    cube_kernels *k = td_ctx_user(ctx);
    td_tensor *x = td_ctx_saved(ctx, 0), *g = td_keep(td_contiguous(dy[0])); /* dy may be an expanded view */
    dx[0] = g ? td_empty_like(x) : NULL;
    td_status st = dx[0] ? launch_n(k->bwd, 3, (td_tensor *[]){x, g, dx[0]}, td_numel(x)) : td_last_status();
    td_release(g);
    return st;
}

static const td_function cube_fn = {"glsl_cube", cube_forward, cube_backward};

TEST(glsl_autograd) {
    setup();
    enum { N = 777 };
    float v[N], y[N], g[N];
    for (int i = 0; i < N; i++) v[i] = (float)(2 * srand1());
    char log[4096];
    cube_kernels k = {0};
    ASSERT_OK(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, cube_src, NULL, NULL, &k.fwd, log, sizeof log));
    ASSERT_OK(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, cube_grad_src, NULL, NULL, &k.bwd, log, sizeof log));
    td_scope_begin();
    int64_t shape[1] = {N};
    td_tensor *x = ASSERT_TENSOR(td_from_data(v, 1, shape, TD_F32, TD_VULKAN(0))), *out;
    ASSERT_OK(td_set_requires_grad(x, true));
    ASSERT_OK(td_function_apply(&cube_fn, &k, 1, &x, 1, &out));
    ASSERT(td_requires_grad(out));
    /* loss = sum(y * w) with w = 1..N, so each dy differs */
    td_tensor *w = ASSERT_TENSOR(td_arange(1, N + 1, 1, TD_F32, TD_VULKAN(0)));
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_sum(td_mul(out, w), 0, NULL, false)), NULL, false));
    ASSERT_OK(td_copy_to_host(out, y, sizeof y, TD_F32));
    ASSERT_OK(td_copy_to_host(td_grad_of(x), g, sizeof g, TD_F32));
    for (int i = 0; i < N; i++) {
        double xi = v[i], want_y = xi * xi * xi, want_g = 3 * xi * xi * (i + 1);
        ASSERT_NEAR(y[i], want_y, 1e-5 + 1e-6 * fabs(want_y));
        ASSERT_NEAR(g[i], want_g, 1e-4 + 1e-6 * fabs(want_g));
    }
    td_scope_end();
    td_kernel_free(k.fwd);
    td_kernel_free(k.bwd);
    check_clean();
}

/* the n float32 values v as a vector on the first Vulkan device */
static td_tensor *vk_vector(const float *v, int64_t n) {
    return ASSERT_TENSOR(td_from_data(v, 1, &n, TD_F32, TD_VULKAN(0)));
}

/* Runtime GLSL through the public kernel API, on tensors, ordered with ops. */
TEST(glsl_kernel) {
    setup();
    enum { N = 1000 };
    float x[N], y[N], got[N];
    for (int i = 0; i < N; i++) x[i] = (float)srand1(), y[i] = (float)srand1();
    td_tensor *tx = vk_vector(x, N), *ty = vk_vector(y, N);
    td_user_kernel *k = NULL;
    char log[4096];
    ASSERT_OK(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, saxpy_src, "saxpy", NULL, &k, log, sizeof log));
    saxpy_push push = {2.5f, N};
    uint32_t grid[3] = {(N + 63) / 64, 1, 1};
    td_tensor *args[2] = {tx, ty};
    ASSERT_OK(td_kernel_launch(k, grid, NULL, 0, 2, args, &push, sizeof push));
    ASSERT_OK(td_kernel_launch(k, grid, NULL, 0, 2, args, &push, sizeof push)); /* twice: the second reads the first */
    ASSERT_OK(td_copy_to_host(ty, got, sizeof got, TD_F32));
    for (int i = 0; i < N; i++) ASSERT_NEAR(got[i], y[i] + 5.0f * x[i], 1e-5);
    /* compiled again: served from the SPIR-V cache, same result */
    td_user_kernel *k2 = NULL;
    ASSERT_OK(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, saxpy_src, "saxpy", NULL, &k2, NULL, 0));
    td_kernel_free(k2);
    /* wrong tensor count; a tensor on the CPU */
    ASSERT_ERROR(td_kernel_launch(k, grid, NULL, 0, 1, args, &push, sizeof push), TD_ERR_MISUSE, "2 bindings");
    td_tensor *cpu = ASSERT_TENSOR(td_from_data(x, 1, (int64_t[]){N}, TD_F32, TD_CPU));
    td_tensor *mixed[2] = {cpu, ty};
    ASSERT_ERROR(td_kernel_launch(k, grid, NULL, 0, 2, mixed, &push, sizeof push), TD_ERR_DEVICE, "cpu");
    td_kernel_free(k);
    td_release(tx), td_release(ty), td_release(cpu);
    check_clean();
}

/* Child process: compile saxpy (through the disk cache), run it, check the result; exits 0 or fails. */
static void saxpy_child(void) {
    setup();
    enum { N = 100 };
    float x[N], y[N], got[N];
    for (int i = 0; i < N; i++) x[i] = (float)i, y[i] = 1;
    td_tensor *args[2] = {vk_vector(x, N), vk_vector(y, N)};
    td_user_kernel *k = NULL;
    ASSERT_OK(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, saxpy_src, "saxpy", NULL, &k, NULL, 0));
    saxpy_push push = {2, N};
    ASSERT_OK(td_kernel_launch(k, (uint32_t[3]){2, 1, 1}, NULL, 0, 2, args, &push, sizeof push));
    ASSERT_OK(td_copy_to_host(args[1], got, sizeof got, TD_F32));
    for (int i = 0; i < N; i++) ASSERT_NEAR(got[i], 1 + 2 * x[i], 0);
    td_kernel_free(k);
    check_clean();
    fflush(stdout);
    _exit(0);
}

/* Runs saxpy_child in a fresh process (the in-memory cache is per process); skips with it. */
static void run_saxpy_child(void) {
    fflush(stdout);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) saxpy_child();
    int status = 0;
    ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
    if (WEXITSTATUS(status) == TEST_SKIP_CODE) TEST_SKIP("no Vulkan device");
    ASSERT_EQ_INT(WEXITSTATUS(status), 0);
}

/* The on-disk SPIR-V cache: a truncated or corrupt entry is found out, deleted
** and rebuilt, never handed to the driver (fuzz finding: a heap overflow
** reading the binding count of a truncated file). This process never starts
** Vulkan itself, so it can fork the processes that do. */
TEST(glsl_cache_corrupt) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cache", test_tmp_dir());
    setenv("XDG_CACHE_HOME", dir, 1);
    unsetenv("TRIDENT_VULKAN_PIPELINE_CACHE");
    run_saxpy_child(); /* writes the entry */
    char path[700];
    snprintf(path, sizeof path, "%s/trident", dir);
    DIR *d = opendir(path);
    ASSERT(d);
    struct dirent *de;
    while ((de = readdir(d)) && strncmp(de->d_name, "spirv-", 6)) continue;
    ASSERT(de);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", de->d_name);
    closedir(d);
    size_t n;
    unsigned char *good = test_read_file(path, &n);
    ASSERT(n > 64);
    /* a bare SPIR-V header and an OpDecorate Binding whose words the file lacks (the fuzz input) */
    uint32_t fuzz[7] = {0x07230203u, 0x00010500u, 0, 16, 0, (4u << 16) | 71u, 1};
    unsigned char *flipped = malloc(n);
    memcpy(flipped, good, n);
    flipped[n - 5] ^= 0x40;
    struct {
        const char *what;
        const void *bytes;
        size_t n;
    } bad[] = {{"empty", good, 0},
               {"truncated to its header", good, 16},
               {"truncated by one word", good, n - 4},
               {"truncated by one byte", good, n - 1},
               {"one bit flipped", flipped, n},
               {"bare truncated SPIR-V", fuzz, sizeof fuzz}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        printf("  %s\n", bad[i].what);
        test_write_file(path, bad[i].bytes, bad[i].n);
        run_saxpy_child();
        size_t m;
        unsigned char *now = test_read_file(path, &m); /* rebuilt: the same bytes as the first compile's */
        ASSERT(m == n && !memcmp(now, good, n));
        free(now);
    }
    free(flipped);
    free(good);
}

/* Spirv-* files in dir (the disk cache's entries). */
static int count_spirv_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) n += !strncmp(de->d_name, "spirv-", 6);
    if (d) closedir(d);
    return n;
}

/* Compile saxpy as variant v (a define, so a distinct cache key) and free it. */
static void compile_variant(int v) {
    char def[32];
    snprintf(def, sizeof def, "VARIANT=%d", v);
    const char *defs[1] = {def};
    td_kernel_options o = {.defines = defs, .n_defines = 1};
    td_user_kernel *k = NULL;
    ASSERT_OK(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, saxpy_src, "saxpy", &o, &k, NULL, 0));
    td_kernel_free(k);
}

/* Child process: the in-memory SPIR-V cache at 2 entries, seen through the
** disk cache (emptied by hand): a compile that the memory serves writes no
** file, one that it dropped compiles again and writes its file anew. */
static void cache_bounded_child(const char *files) {
    setenv("TRIDENT_VULKAN_SPIRV_CACHE", "2", 1);
    setup();
    compile_variant(1);
    compile_variant(2); /* memory [2, 1] */
    ASSERT_EQ_INT(count_spirv_files(files), 2);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -f %s/spirv-*", files);
    ASSERT_EQ_INT(system(cmd), 0);
    compile_variant(1); /* a hit, now the most recent: [1, 2]; no file */
    ASSERT_EQ_INT(count_spirv_files(files), 0);
    compile_variant(3); /* [3, 1]: 2, the least recently used, is dropped */
    ASSERT_EQ_INT(count_spirv_files(files), 1);
    compile_variant(2); /* dropped: compiled and written again; [2, 3] */
    ASSERT_EQ_INT(count_spirv_files(files), 2);
    compile_variant(3); /* still held */
    ASSERT_EQ_INT(count_spirv_files(files), 2);
    check_clean();
    fflush(stdout);
    _exit(0);
}

/* The in-memory SPIR-V cache is bounded (it grew without limit: a long fuzz
** run of runtime GLSL reached 600 MB) and drops the least recently used. */
TEST(glsl_cache_bounded) {
    char dir[600], files[700];
    snprintf(dir, sizeof dir, "%s/cache-bounded", test_tmp_dir());
    snprintf(files, sizeof files, "%s/trident", dir);
    setenv("XDG_CACHE_HOME", dir, 1);
    unsetenv("TRIDENT_VULKAN_PIPELINE_CACHE");
    fflush(stdout);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) cache_bounded_child(files);
    int status = 0;
    ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
    if (WEXITSTATUS(status) == TEST_SKIP_CODE) TEST_SKIP("no Vulkan device");
    ASSERT_EQ_INT(WEXITSTATUS(status), 0);
}

/* An optimizer built before td_module_to updates the moved parameters (the
** data moves under the same handles, as torch's module.to()). */
TEST(module_to_keeps_optimizer) {
    setup();
    td_module *m = td_linear_new(3, 2, true);
    td_tensor *params[2];
    ASSERT_EQ_INT(td_module_parameters(m, params, 2), 2);
    td_optim_options o = td_sgd_defaults(0.5);
    td_optimizer *opt = td_sgd_new(2, params, &o);
    ASSERT(opt);
    float before[6], after[6];
    ASSERT_OK(td_copy_to_host(params[0], before, sizeof before, TD_F32));
    ASSERT_OK(td_module_to(m, TD_VULKAN(0)));
    ASSERT(td_module_get(m, "weight") == params[0]);
    ASSERT_EQ_INT(td_tensor_device(params[0]).type, TD_DEVICE_VULKAN);
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_ones(2, (int64_t[]){4, 3}, TD_F32, TD_VULKAN(0)));
    ASSERT_OK(td_backward(td_sum(td_module_forward(m, x), 0, NULL, false), NULL, false));
    td_scope_end();
    ASSERT_OK(td_optimizer_step(opt));
    ASSERT_OK(td_copy_to_host(params[0], after, sizeof after, TD_F32));
    /* d(sum y)/dW = sum over 4 rows of x = 4: each weight falls by 0.5 * 4 */
    for (int i = 0; i < 6; i++) ASSERT_NEAR(after[i], before[i] - 2, 1e-6);
    td_optimizer_free(opt);
    td_module_free(m);
    check_clean();
}

/* A shader that fixes its local size is launched only with that block; one sized by local_size_x_id takes any. */
TEST(glsl_local_size_checked) {
    setup();
    td_user_kernel *fixed = NULL, *sized = NULL;
    ASSERT_OK(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, saxpy_src, "saxpy", NULL, &fixed, NULL, 0));
    const char *sized_src = "#version 450\nlayout(local_size_x_id = 0) in;\n"
                            "layout(binding = 0) writeonly buffer Y { float y[]; };\n"
                            "void main() { y[gl_GlobalInvocationID.x] = 1.0; }\n";
    ASSERT_OK(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, sized_src, NULL, NULL, &sized, NULL, 0));
    ASSERT_OK(td_kernel_check_block(fixed, (uint32_t[3]){64, 1, 1}));
    ASSERT_OK(td_kernel_check_block(fixed, (uint32_t[3]){0, 0, 0}));
    ASSERT_ERROR(td_kernel_check_block(fixed, (uint32_t[3]){256, 1, 1}), TD_ERR_MISUSE,
                 "local size to {64,1,1} but is launched with a block of 256");
    td_tensor *x = ASSERT_TENSOR(td_ones(1, (int64_t[]){256}, TD_F32, TD_VULKAN(0)));
    td_tensor *y = ASSERT_TENSOR(td_zeros(1, (int64_t[]){256}, TD_F32, TD_VULKAN(0)));
    saxpy_push push = {1.0f, 256};
    ASSERT_ERROR(td_kernel_launch(fixed, (uint32_t[3]){1, 1, 1}, (uint32_t[3]){256, 1, 1}, 0, 2, (td_tensor *[]){x, y},
                                  &push, sizeof push),
                 TD_ERR_MISUSE, "{64,1,1}");
    ASSERT_OK(td_kernel_check_block(sized, (uint32_t[3]){256, 1, 1}));
    ASSERT_OK(
        td_kernel_launch(sized, (uint32_t[3]){1, 1, 1}, (uint32_t[3]){256, 1, 1}, 0, 1, (td_tensor *[]){y}, NULL, 0));
    float got[256];
    ASSERT_OK(td_copy_to_host(y, got, sizeof got, TD_F32));
    for (int i = 0; i < 256; i++) ASSERT(got[i] == 1.0f); /* all 256 invocations ran */
    td_release(x);
    td_release(y);
    td_kernel_free(fixed);
    td_kernel_free(sized);
}

TEST(glsl_errors) {
    setup();
    char log[4096];
    td_user_kernel *k = (td_user_kernel *)1;
    const char *bad = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { undeclared_thing = 1; }\n";
    ASSERT_ERROR(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, bad, NULL, NULL, &k, log, sizeof log), TD_ERR_COMPILE,
                 "undeclared_thing");
    ASSERT(k == NULL);
    ASSERT(strstr(log, "undeclared_thing") != NULL);
    printf("  compile log: %.120s\n", log);
    /* the message: the first error on one line, at the source's line, named after opts.name ("glsl" without) */
    ASSERT_ERROR(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, bad, NULL, NULL, &k, NULL, 0), TD_ERR_COMPILE,
                 "glsl:3: 'undeclared_thing' : undeclared identifier");
    td_kernel_options named = {.name = "mine.comp"};
    ASSERT_ERROR(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, bad, NULL, &named, &k, NULL, 0), TD_ERR_COMPILE,
                 "mine.comp:3: 'undeclared_thing' : undeclared identifier");
    ASSERT_ERROR(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_CUDA, bad, NULL, NULL, &k, log, sizeof log),
                 TD_ERR_UNSUPPORTED, "GLSL");
    ASSERT_ERROR(td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, bad, "no spaces", NULL, &k, log, sizeof log),
                 TD_ERR_MISUSE, "identifier");
    ASSERT_ERROR(td_kernel_compile(TD_CPU, TD_KERNEL_GLSL, bad, NULL, NULL, &k, log, sizeof log), TD_ERR_UNSUPPORTED,
                 "cpu");
    /* a binding too large for one descriptor, when the device's limit is reachable: FILL runs
    ** in parts, and so does a sum (vk_split.c) */
    td_device_info info;
    ASSERT_OK(be->iface->device_info(0, &info));
    const char *at = strstr(info.features, "max_binding=");
    unsigned long long maxb = at ? strtoull(at + 12, NULL, 10) : 0;
    if (maxb && maxb < ((unsigned long long)1 << 30)) {
        int64_t n = (int64_t)(maxb / 4) + 16;
        td_operand big = {.dtype = TD_F32, .ndim = 1, .shape = {n}, .strides = {1}};
        if (be->iface->buffer_alloc(0, (size_t)n * 4, &big.buf) == TD_OK) {
            td_op op = {.kind = TD_OP_FILL, .n_out = 1, .out = &big, .p.fill.value = 3};
            ASSERT_OK(be->iface->run(0, &op));
            float last = 0;
            ASSERT_OK(be->iface->read(big.buf, (size_t)(n - 1) * 4, &last, 4));
            ASSERT_NEAR(last, 3, 0);
            td_operand one = {.dtype = TD_F32, .ndim = 0};
            ASSERT_OK(be->iface->buffer_alloc(0, 4, &one.buf));
            td_op sum = {.kind = TD_OP_SUM, .n_in = 1, .n_out = 1, .in = &big, .out = &one, .p.reduce.dims = 1};
            ASSERT_OK(be->iface->run(0, &sum));
            ASSERT_OK(be->iface->read(one.buf, 0, &last, 4));
            ASSERT_NEAR(last / (3.0 * (double)n), 1, 1e-5);
            be->iface->buffer_free(one.buf);
            be->iface->buffer_free(big.buf);
        }
    }
    check_clean();
}

TEST(events) {
    setup();
    td_event *a, *b;
    ASSERT_OK(be->iface->event_create(0, &a));
    ASSERT_OK(be->iface->event_create(0, &b));
    int64_t shape[2] = {64, 64};
    td_operand x = dev_tensor(TD_F32, 2, shape, NULL), y = dev_tensor(TD_F32, 2, shape, NULL);
    td_op fill = {.kind = TD_OP_FILL, .n_out = 1, .out = &x, .p.fill.value = 1};
    run(&fill);
    ASSERT_OK(be->iface->event_record(a));
    td_operand in[2] = {x, x};
    td_op mm = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = in, .out = &y};
    run(&mm);
    ASSERT_OK(be->iface->event_record(b));
    double ms = -1;
    ASSERT_OK(be->iface->event_elapsed_ms(a, b, &ms));
    printf("  64^3 matmul: %.3f ms\n", ms);
    ASSERT(ms >= 0 && ms < 60000);
    be->iface->event_free(a);
    be->iface->event_free(b);
    be->iface->buffer_free(x.buf);
    be->iface->buffer_free(y.buf);
    check_clean();
}

/* Largest |a - b| over two tensors of the same shape, compared on the CPU in f64. */
static double max_diff(td_tensor *a, td_tensor *b) {
    td_tensor *d = td_abs(td_sub(td_cast(td_to(a, TD_CPU), TD_F64), td_cast(td_to(b, TD_CPU), TD_F64)));
    td_tensor *m = td_amax(d, 0, NULL, false);
    ASSERT_TENSOR(m);
    return td_item(m);
}

/* TRIDENT_VULKAN_DISABLE=all: the device reports the features off and runs as
** a device without them (generic reductions on odd row lengths, descriptor pools,
** host-timed events); the validation layer sees no use of a feature left off. */
TEST(feature_mask) {
    setenv("TRIDENT_VULKAN_DISABLE", "all", 1);
    setup();
    td_device_info info;
    ASSERT_OK(be->iface->device_info(0, &info));
    printf("  %s\n", info.features);
    ASSERT(strstr(info.features, "disabled=all"));
    ASSERT(strstr(info.features, "subgroup_arith=0"));
    ASSERT(strstr(info.features, "push_descriptor=0"));
    ASSERT(!info.timestamps && !info.fp16 && !info.cooperative_matrix);
    td_scope_begin();
    int64_t shape[2] = {37, 1001};
    td_tensor *x = ASSERT_TENSOR(td_randn(2, shape, seed, 0, TD_F32, TD_CPU));
    td_tensor *xv = ASSERT_TENSOR(td_to(x, TD_VULKAN(0)));
    int dim1 = 1;
    ASSERT(max_diff(td_sum(xv, 1, &dim1, false), td_sum(x, 1, &dim1, false)) < 1e-3);
    ASSERT(max_diff(td_softmax(xv, -1), td_softmax(x, -1)) < 1e-6);
    ASSERT(max_diff(td_argmax(xv, 1, false), td_argmax(x, 1, false)) == 0);
    td_event *a, *b;
    ASSERT_OK(be->iface->event_create(0, &a));
    ASSERT_OK(be->iface->event_create(0, &b));
    ASSERT_OK(be->iface->event_record(a));
    ASSERT_TENSOR(td_matmul(xv, td_transpose(xv, 0, 1)));
    ASSERT_OK(be->iface->event_record(b));
    double ms = -1;
    ASSERT_OK(be->iface->event_elapsed_ms(a, b, &ms));
    printf("  host-timed matmul: %.3f ms\n", ms);
    ASSERT(ms > 0 && ms < 60000);
    be->iface->event_free(a);
    be->iface->event_free(b);
    td_scope_end();
    check_clean();
}

/* An unknown feature name leaves the backend unavailable, saying which names exist. */
TEST(feature_mask_unknown) {
    setenv("TRIDENT_VULKAN_DISABLE", "subgroup,tensorcores", 1);
    if (td_backend_for(TD_DEVICE_VULKAN)) TEST_FAIL_("vulkan loaded with an unknown feature in TRIDENT_VULKAN_DISABLE");
    const char *why = td_backend_unavailable_reason(TD_DEVICE_VULKAN);
    printf("  %s\n", why);
    if (strstr(why, "plugin") || strstr(why, "TRIDENT_NO_VULKAN")) TEST_SKIP("no Vulkan plugin: %s", why);
    ASSERT(strstr(why, "unknown feature 'tensorcores'") && strstr(why, "push_descriptor"));
}

/* Lowered limits (TRIDENT_VULKAN_MAX_BINDING 1 MiB, TRIDENT_VULKAN_MAX_ALLOC 8 MiB):
** elementwise ops, copies, sums and a mean on 3.6 MB tensors run in parts and match the CPU;
** a 12 MiB tensor spans two allocations (vk_memory.c) and its sum matches too. */
TEST(alloc_limits) {
    setenv("TRIDENT_VULKAN_MAX_BINDING", "1M", 1);
    setenv("TRIDENT_VULKAN_MAX_ALLOC", "8M", 1);
    setup();
    td_scope_begin();
    int64_t shape[2] = {3, 300001};
    td_tensor *x = ASSERT_TENSOR(td_randn(2, shape, seed, 0, TD_F32, TD_CPU));
    td_tensor *xv = ASSERT_TENSOR(td_to(x, TD_VULKAN(0)));
    ASSERT(max_diff(td_add(td_mul(xv, xv), xv), td_add(td_mul(x, x), x)) < 1e-6);
    ASSERT(max_diff(td_contiguous(td_transpose(xv, 0, 1)), td_transpose(x, 0, 1)) == 0);
    ASSERT(max_diff(td_cast(xv, TD_F16), td_cast(x, TD_F16)) == 0);
    /* sums over the 3 rows, over each row and over everything: the reduced dims split in halves
    ** combined with ADD (vk_split.c). On values in -3..3 every partial sum is exact in f32, so any
    ** order gives the CPU's bits; on randn the sum of 900003 elements is within f32 rounding,
    ** eps * sum |x| (a missing or doubled part would be off by hundreds). */
    td_tensor *xi = td_cast(td_cast(td_clamp(td_mul_scalar(x, 4), -3, 3), TD_I32), TD_F32),
              *xiv = td_to(xi, TD_VULKAN(0));
    int d0 = 0, d1 = 1;
    ASSERT(max_diff(td_sum(xv, 1, &d0, false), td_sum(x, 1, &d0, false)) < 1e-5);
    ASSERT(max_diff(td_mean(xv, 1, &d1, false), td_mean(x, 1, &d1, false)) < 1e-6); /* SUM in parts, then / n */
    for (int k = 0; k < 3; k++) {
        int n_dims = k == 2 ? 0 : 1, *dims = k == 0 ? &d0 : k == 1 ? &d1 : NULL;
        ASSERT(max_diff(td_sum(xiv, n_dims, dims, false), td_sum(xi, n_dims, dims, false)) == 0);
    }
    double ds = max_diff(td_sum(xv, 0, NULL, false), td_sum(x, 0, NULL, false));
    double tol = td_item(td_sum(td_abs(x), 0, NULL, false)) * 0x1p-24;
    printf("  sum of all: max |diff| %.3g (f32 rounding bound %.3g)\n", ds, tol);
    ASSERT(ds < tol);
    int64_t big[1] = {3 << 20};
    td_tensor *ones = ASSERT_TENSOR(td_ones(1, big, TD_F32, TD_VULKAN(0)));
    ASSERT(max_diff(td_sum(ones, 0, NULL, false), td_sum(td_ones(1, big, TD_F32, TD_CPU), 0, NULL, false)) == 0);
    td_scope_end();
    check_clean();
}

/* TRIDENT_VULKAN_MAX_BINDING=256K: matmuls and convolutions whose operands are wider run in parts
** (vk_split.c) and match the CPU: batches, rows (a wide), columns (b wide, through a temporary), a
** batch folded into M, conv2d and its input gradient by batch halves, the weight gradient as a sum
** of halves; a product wide along K alone runs on slices of K summed in f32. */
TEST(split_matmul_conv) {
    setenv("TRIDENT_VULKAN_MAX_BINDING", "256K", 1);
    setup();
    td_scope_begin();
    struct {
        int64_t a[3], b[3];
        int na, nb;
    } mm[] = {{{300, 257}, {257, 40}, 2, 2},   {{40, 257}, {257, 300}, 2, 2},     {{300, 300}, {300, 300}, 2, 2},
              {{5, 60, 257}, {257, 33}, 3, 2}, {{4, 33, 70}, {4, 70, 300}, 3, 3}, {{1000, 8}, {8, 100}, 2, 2}};
    for (int i = 0; i < (int)(sizeof mm / sizeof mm[0]); i++) {
        td_tensor *a = ASSERT_TENSOR(td_randn(mm[i].na, mm[i].a, seed + i, 0, TD_F32, TD_CPU));
        td_tensor *b = ASSERT_TENSOR(td_randn(mm[i].nb, mm[i].b, seed + 50 + i, 0, TD_F32, TD_CPU));
        td_tensor *got = ASSERT_TENSOR(td_matmul(td_to(a, TD_VULKAN(0)), td_to(b, TD_VULKAN(0))));
        double diff = max_diff(got, td_matmul(a, b));
        printf("  matmul %d: max |diff| %.3g\n", i, diff);
        ASSERT(diff < 1e-3);
    }
    int64_t xs[4] = {6, 8, 40, 40}, ws[4] = {12, 8, 3, 3};
    td_tensor *x = ASSERT_TENSOR(td_randn(4, xs, seed + 100, 0, TD_F32, TD_CPU));
    td_tensor *w = ASSERT_TENSOR(td_randn(4, ws, seed + 101, 0, TD_F32, TD_CPU));
    ASSERT_OK(td_set_requires_grad(x, true));
    ASSERT_OK(td_set_requires_grad(w, true));
    td_tensor *xv = ASSERT_TENSOR(td_detach(td_to(x, TD_VULKAN(0)))), *wv = td_detach(td_to(w, TD_VULKAN(0)));
    ASSERT_OK(td_set_requires_grad(xv, true));
    ASSERT_OK(td_set_requires_grad(wv, true));
    const int one[2] = {1, 1};
    td_tensor *y = ASSERT_TENSOR(td_conv2d(x, w, NULL, one, one, one, 1));
    td_tensor *yv = ASSERT_TENSOR(td_conv2d(xv, wv, NULL, one, one, one, 1));
    td_tensor *gy = ASSERT_TENSOR(td_randn(4, td_shape(y), seed + 102, 0, TD_F32, TD_CPU));
    double dy = max_diff(yv, y);
    ASSERT_OK(td_backward(y, gy, false));
    ASSERT_OK(td_backward(yv, td_to(gy, TD_VULKAN(0)), false));
    double dx = max_diff(td_grad_of(xv), td_grad_of(x)), dw = max_diff(td_grad_of(wv), td_grad_of(w));
    printf("  conv2d: max |diff| y %.3g, dx %.3g, dw %.3g\n", dy, dx, dw);
    ASSERT(dy < 1e-3 && dx < 1e-3 && dw < 1e-2);
    int64_t ka[2] = {2, 100000}, kb[2] = {100000, 2};
    td_tensor *a = ASSERT_TENSOR(td_randn(2, ka, seed + 103, 0, TD_F32, TD_CPU));
    td_tensor *b = ASSERT_TENSOR(td_randn(2, kb, seed + 104, 0, TD_F32, TD_CPU));
    double dk = max_diff(td_matmul(td_to(a, TD_VULKAN(0)), td_to(b, TD_VULKAN(0))), td_matmul(a, b));
    printf("  K only (slices of K): max |diff| %.3g\n", dk);
    ASSERT(dk < 1e-2);
    td_scope_end();
    check_clean();
}

/* TRIDENT_VULKAN_DEVICE=0,0 opens device 0 twice, as vulkan:0 and vulkan:1 (two logical devices):
** ops on vulkan:1 match the CPU, and td_to between the two copies inside the backend, both ways
** (no host sync by the core), after queued work, and past the 16 MiB staging buffer. */
TEST(two_devices) {
    setenv("TRIDENT_VULKAN_DEVICE", "0,0", 1);
    setup();
    ASSERT_EQ_INT(be->iface->device_count(), 2);
    td_scope_begin();
    int64_t shape[2] = {67, 129}, big[1] = {5 << 20};
    td_tensor *x = ASSERT_TENSOR(td_randn(2, shape, seed, 0, TD_F32, TD_CPU));
    td_tensor *x0 = ASSERT_TENSOR(td_to(x, TD_VULKAN(0)));
    td_tensor *y0 = ASSERT_TENSOR(td_matmul(x0, td_transpose(x0, 0, 1))); /* queued on vulkan:0 */
    td_tensor *b1 = ASSERT_TENSOR(td_randn(1, big, seed + 1, 0, TD_F32, TD_VULKAN(1)));
    int64_t syncs = td_host_sync_count();
    td_tensor *y1 = ASSERT_TENSOR(td_to(y0, TD_VULKAN(1)));
    td_tensor *z0 = ASSERT_TENSOR(td_to(td_add(y1, y1), TD_VULKAN(0)));
    td_tensor *b0 = ASSERT_TENSOR(td_to(b1, TD_VULKAN(0)));
    ASSERT_EQ_INT(td_host_sync_count(), syncs);
    ASSERT(td_device_equal(td_tensor_device(z0), TD_VULKAN(0)));
    td_tensor *want = td_mul_scalar(td_matmul(x, td_transpose(x, 0, 1)), 2);
    ASSERT(max_diff(z0, want) < 1e-3);
    ASSERT(max_diff(b0, b1) == 0);
    ASSERT(max_diff(td_to(b0, TD_VULKAN(1)), b1) == 0);
    td_scope_end();
    ASSERT_OK(be->iface->synchronize(1));
    check_clean();
}

/* A captured step (y = relu(x) * 2 + y) replayed three times; host transfers
** are refused while capturing. */
TEST(capture_replay) {
    setup();
    enum { N = 100 };
    float x[N], y[N], got[N];
    for (int i = 0; i < N; i++) x[i] = (float)srand1(), y[i] = (float)srand1();
    int64_t shape[1] = {N};
    td_operand vx = dev_tensor(TD_F32, 1, shape, x), vy = dev_tensor(TD_F32, 1, shape, y);
    td_operand tmp = dev_tensor(TD_F32, 1, shape, NULL), two = dev_tensor(TD_F32, 1, shape, NULL);
    td_op fill = {.kind = TD_OP_FILL, .n_out = 1, .out = &two, .p.fill.value = 2};
    run(&fill);
    ASSERT_OK(be->iface->capture_begin(0));
    td_op relu = {.kind = TD_OP_RELU, .n_in = 1, .n_out = 1, .in = &vx, .out = &tmp};
    run(&relu);
    td_operand m[2] = {tmp, two};
    td_op mul = {.kind = TD_OP_MUL, .n_in = 2, .n_out = 1, .in = m, .out = &tmp};
    run(&mul);
    td_operand a[2] = {tmp, vy};
    td_op add = {.kind = TD_OP_ADD, .n_in = 2, .n_out = 1, .in = a, .out = &vy};
    run(&add);
    ASSERT_ERROR(be->iface->read(vy.buf, 0, got, 4), TD_ERR_STATE, "captured");
    td_graph *g = NULL;
    ASSERT_OK(be->iface->capture_end(0, &g));
    fetch(&vy, got); /* capturing ran nothing */
    for (int i = 0; i < N; i++) ASSERT_NEAR(got[i], y[i], 0);
    for (int rep = 0; rep < 3; rep++) ASSERT_OK(be->iface->graph_replay(g));
    fetch(&vy, got);
    for (int i = 0; i < N; i++) ASSERT_NEAR(got[i], y[i] + 3 * 2 * (x[i] > 0 ? x[i] : 0), 1e-5);
    be->iface->graph_free(g);
    ASSERT_ERROR(be->iface->capture_end(0, &g), TD_ERR_STATE, "without");
    td_operand *bufs[4] = {&vx, &vy, &tmp, &two};
    for (int i = 0; i < 4; i++) be->iface->buffer_free(bufs[i]->buf);
    check_clean();
}

/* One training step: cross entropy of logits against target, backward, and
** the optimizer's step. Returns the loss. */
static double ce_step(td_optimizer *opt, td_tensor *logits, td_tensor *target) {
    td_tensor *loss = ASSERT_TENSOR(td__cross_entropy(logits, target, NULL, -100, 0.0, TD_REDUCTION_MEAN));
    double value = td_item(loss);
    td_optimizer_zero_grad(opt);
    ASSERT_OK(td_backward(loss, NULL, false));
    ASSERT_OK(td_optimizer_step(opt));
    return value;
}

/* The vulkan run's losses lv equal the cpu run's lc within atol + rtol |lc|, and fall. */
static void expect_same_losses(const double *lc, const double *lv, int n, double atol, double rtol) {
    for (int i = 0; i < n; i++) {
        printf("  step %d: cpu %.7f vulkan %.7f\n", i, lc[i], lv[i]);
        fflush(stdout);
        ASSERT_NEAR(lv[i], lc[i], atol + rtol * fabs(lc[i]));
    }
    ASSERT(lv[n - 1] < lv[0]);
}

/* steps(dev, losses, 3) on cpu and on vulkan:0: the losses agree within 1e-4 + 1e-4 |cpu| and fall. */
static void expect_same_3_steps(void (*steps)(td_device dev, double *losses, int n)) {
    double lc[3], lv[3];
    steps(TD_CPU, lc, 3);
    steps(TD_VULKAN(0), lv, 3);
    expect_same_losses(lc, lv, 3, 1e-4, 1e-4);
}

/* Model m moved to dev (it must have n_params parameters) and its optimizer: Adam, or AdamW when adamw, at lr. */
static td_optimizer *optimizer_on(td_module *m, td_device dev, int n_params, bool adamw, double lr) {
    ASSERT(m);
    ASSERT_OK(td_module_to(m, dev));
    td_tensor *params[32];
    int np = td_module_parameters(m, params, 32);
    ASSERT_EQ_INT(np, n_params);
    td_optim_options o = adamw ? td_adamw_defaults(lr) : td_adam_defaults(lr);
    td_optimizer *opt = adamw ? td_adamw_new(np, params, &o) : td_adam_new(np, params, &o);
    ASSERT(opt);
    return opt;
}

/* Three training steps of a small W2-shaped CNN (conv-relu-pool twice, linear,
** cross entropy, Adam) on one random batch, from one seed on cpu and vulkan:0:
** the losses must agree and fall. Exercises nn, autograd and the optimizer
** through Vulkan. */
static void train_steps(td_device dev, double *losses, int steps) {
    td_manual_seed(42);
    const int k3[2] = {3, 3}, s1[2] = {1, 1}, p1[2] = {1, 1}, d1[2] = {1, 1}, k2[2] = {2, 2};
    td_module *layers[] = {td_conv2d_new(1, 4, k3, s1, p1, d1, 1, true),
                           td_relu_new(),
                           td_max_pool2d_new(k2, k2, (int[2]){0, 0}),
                           td_conv2d_new(4, 8, k3, s1, p1, d1, 1, true),
                           td_relu_new(),
                           td_max_pool2d_new(k2, k2, (int[2]){0, 0}),
                           td_flatten_new(1, -1),
                           td_linear_new(8 * 3 * 3, 10, true)};
    td_module *m = td_sequential_new(8, layers);
    td_optimizer *opt = optimizer_on(m, dev, 6, false, 1e-2);
    for (int step = 0; step < steps; step++) {
        td_scope_begin();
        int64_t xs[4] = {8, 1, 12, 12};
        td_tensor *x = ASSERT_TENSOR(td_rand(4, xs, 7, 0, TD_F32, TD_CPU));
        int64_t ids[8];
        for (int i = 0; i < 8; i++) ids[i] = (i * 3) % 10;
        td_tensor *y = ASSERT_TENSOR(td_from_data(ids, 1, (int64_t[]){8}, TD_I64, TD_CPU));
        td_tensor *logits = ASSERT_TENSOR(td_module_forward(m, td_to(x, dev)));
        losses[step] = ce_step(opt, logits, td_to(y, dev));
        td_scope_end();
    }
    td_optimizer_free(opt);
    td_module_free(m);
}

TEST(train_cnn) {
    setup();
    expect_same_3_steps(train_steps);
    check_clean();
}

/* Workload W1 (Sequential(Linear 784-256, ReLU, Linear 256-256, ReLU, Linear
** 256-10), cross entropy, Adam lr 1e-3) for `steps` steps on one batch of 32:
** x [32,784] pixels in [0,1], y [32] labels in [0,10), from one seed. */
static void mlp_steps(td_device dev, const float *x, const int64_t *y, double *losses, int steps) {
    enum { B = 32, D = 784, H = 256, K = 10 };
    td_manual_seed(42);
    td_module *layers[] = {td_linear_new(D, H, true), td_relu_new(), td_linear_new(H, H, true), td_relu_new(),
                           td_linear_new(H, K, true)};
    td_module *m = td_sequential_new(5, layers);
    td_optimizer *opt = optimizer_on(m, dev, 6, false, 1e-3);
    for (int step = 0; step < steps; step++) {
        td_scope_begin();
        td_tensor *xt = ASSERT_TENSOR(td_to(td_from_data(x, 2, (int64_t[]){B, D}, TD_F32, TD_CPU), dev));
        td_tensor *yt = ASSERT_TENSOR(td_to(td_from_data(y, 1, (int64_t[]){B}, TD_I64, TD_CPU), dev));
        td_tensor *logits = ASSERT_TENSOR(td_module_forward(m, xt));
        losses[step] = ce_step(opt, logits, yt);
        td_scope_end();
    }
    td_optimizer_free(opt);
    td_module_free(m);
}

/* W1's first five steps on vulkan:0 match the cpu run within 1e-4 relative. */
TEST(train_mlp) {
    setup();
    enum { B = 32, D = 784, STEPS = 5 };
    static float x[B * D];
    int64_t y[B];
    for (int i = 0; i < B * D; i++) x[i] = (float)urand();
    for (int i = 0; i < B; i++) y[i] = (int64_t)(urand() * 10);
    double lc[STEPS], lv[STEPS];
    mlp_steps(TD_CPU, x, y, lc, STEPS);
    mlp_steps(TD_VULKAN(0), x, y, lv, STEPS);
    expect_same_losses(lc, lv, STEPS, 0, 1e-4);
    check_clean();
}

/* Two AdamW steps of a tiny GPT-style block (token embedding, layer norm,
** causal self-attention, GELU MLP, head) on cpu and vulkan:0 from one seed. */
static void attention_steps(td_device dev, double *losses, int steps) {
    td_manual_seed(7);
    enum { V = 17, E = 16, T = 6, B = 2 };
    int64_t ln_shape[1] = {E};
    td_module *layers[] = {td_embedding_new(V, E),
                           td_layer_norm_new(1, ln_shape, 1e-5, true),
                           td_multihead_attention_new(E, 2, true, true),
                           td_linear_new(E, 4 * E, true),
                           td_gelu_new(false),
                           td_linear_new(4 * E, V, true)};
    td_module *m = td_sequential_new(6, layers);
    td_optimizer *opt = optimizer_on(m, dev, 11, true, 3e-3);
    int64_t tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 5 + 1) % V, tgt[i] = (i * 7 + 3) % V;
    for (int step = 0; step < steps; step++) {
        td_scope_begin();
        td_tensor *x = ASSERT_TENSOR(td_to(td_from_data(tok, 2, (int64_t[]){B, T}, TD_I64, TD_CPU), dev));
        td_tensor *y = ASSERT_TENSOR(td_to(td_from_data(tgt, 1, (int64_t[]){B * T}, TD_I64, TD_CPU), dev));
        td_tensor *logits = ASSERT_TENSOR(td_module_forward(m, x));
        logits = ASSERT_TENSOR(td_reshape(logits, 2, (int64_t[]){B * T, V}));
        losses[step] = ce_step(opt, logits, y);
        td_scope_end();
    }
    td_optimizer_free(opt);
    td_module_free(m);
}

TEST(train_attention) {
    setup();
    expect_same_3_steps(attention_steps);
    check_clean();
}

TEST(out_of_memory) {
    setup();
    td_buffer *b = NULL;
    ASSERT_ERROR(be->iface->buffer_alloc(0, (size_t)1 << 46, &b), TD_ERR_OOM, "vulkan");
    ASSERT(b == NULL);
    /* the device still works afterwards */
    ASSERT_OK(be->iface->buffer_alloc(0, 4096, &b));
    ASSERT_OK(be->iface->memset(b, 0, 1, 4096));
    be->iface->buffer_free(b);
    check_clean();
}

/* Not a test: timings for the GPU machine, printed only (speed belongs in
** benchmarks). Runs when TRIDENT_VK_BENCH=1: matmul GFLOP/s in f32 and f16,
** copy bandwidth and W2's two convolutions (batch 128, forward and both
** gradients), from timestamp events around 10 repetitions after a warm-up. */
static double time_op(td_op *op, int reps) {
    td_event *a, *b;
    ASSERT_OK(be->iface->event_create(0, &a));
    ASSERT_OK(be->iface->event_create(0, &b));
    run(op); /* warm-up: pipeline creation */
    ASSERT_OK(be->iface->synchronize(0));
    ASSERT_OK(be->iface->event_record(a));
    for (int i = 0; i < reps; i++) run(op);
    ASSERT_OK(be->iface->event_record(b));
    double ms;
    ASSERT_OK(be->iface->event_elapsed_ms(a, b, &ms));
    be->iface->event_free(a);
    be->iface->event_free(b);
    return ms / reps;
}

TEST(bench) {
    const char *on = getenv("TRIDENT_VK_BENCH");
    if (!on || !*on || !strcmp(on, "0")) TEST_SKIP("set TRIDENT_VK_BENCH=1 to time matmul and copy");
    setup();
    td_device_info info;
    ASSERT_OK(be->iface->device_info(0, &info));
    printf("  device: %s (%s)\n", info.name, info.driver);
    const int64_t n = atoi(on) > 1 ? atoi(on) : 4096;
    for (int k = 0; k < 2; k++) {
        td_dtype dt = k ? TD_F16 : TD_F32;
        int64_t shape[2] = {n, n};
        td_operand in[2] = {dev_tensor(dt, 2, shape, NULL), dev_tensor(dt, 2, shape, NULL)};
        td_operand out = dev_tensor(dt, 2, shape, NULL);
        for (int i = 0; i < 2; i++) {
            td_op r = {
                .kind = TD_OP_RAND, .n_out = 1, .out = &in[i], .p.rng = {.seed = 1, .offset = (uint64_t)i << 40}};
            run(&r);
        }
        td_op op = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = in, .out = &out};
        double ms = time_op(&op, 10);
        printf("  matmul %s %lld^3: %.3f ms, %.1f GFLOP/s\n", td_dtype_name(dt), (long long)n, ms,
               2.0 * n * n * n / ms * 1e-6);
        td_op cp = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = &in[0], .out = &out};
        ms = time_op(&cp, 10);
        printf("  copy %s %lld elements: %.3f ms, %.1f GB/s\n", td_dtype_name(dt), (long long)(n * n), ms,
               2.0 * n * n * td_dtype_size(dt) / ms * 1e-6);
        for (int i = 0; i < 2; i++) be->iface->buffer_free(in[i].buf);
        be->iface->buffer_free(out.buf);
    }
    /* W2: Conv2d 1->32 on 28x28 and 32->64 on 14x14, 3x3, padding 1; batch 128 (2 for a quick look at n < 1024) */
    static const int64_t convs[2][4] = {{1, 32, 28, 28}, {32, 64, 14, 14}}; /* C, O, H, W */
    for (int k = 0; k < 2; k++) {
        const int64_t C = convs[k][0], O = convs[k][1], H = convs[k][2], W = convs[k][3], B = n >= 1024 ? 128 : 2;
        td_operand x = dev_tensor(TD_F32, 4, (int64_t[]){B, C, H, W}, NULL),
                   w = dev_tensor(TD_F32, 4, (int64_t[]){O, C, 3, 3}, NULL),
                   b = dev_tensor(TD_F32, 1, (int64_t[]){O}, NULL),
                   y = dev_tensor(TD_F32, 4, (int64_t[]){B, O, H, W}, NULL);
        td_operand t[4] = {x, w, b, y};
        for (int i = 0; i < 4; i++) {
            td_op r = {.kind = TD_OP_RAND, .n_out = 1, .out = &t[i], .p.rng = {.seed = 2, .offset = (uint64_t)i << 40}};
            run(&r);
        }
        td_op_params p = {.conv = {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1}};
        td_operand fin[3] = {x, w, b}, din[2] = {y, w}, win[2] = {y, x};
        td_op ops[3] = {{.kind = TD_OP_CONV2D, .n_in = 3, .n_out = 1, .in = fin, .out = &y, .p = p},
                        {.kind = TD_OP_CONV2D_BACKWARD_INPUT, .n_in = 2, .n_out = 1, .in = din, .out = &x, .p = p},
                        {.kind = TD_OP_CONV2D_BACKWARD_WEIGHT, .n_in = 2, .n_out = 1, .in = win, .out = &w, .p = p}};
        static const char *what[3] = {"forward", "grad input", "grad weight"};
        for (int i = 0; i < 3; i++) {
            double ms = time_op(&ops[i], 10);
            printf("  conv2d %lld->%lld %lldx%lld batch %lld %s: %.4f ms, %.1f GFLOP/s\n", (long long)C, (long long)O,
                   (long long)H, (long long)W, (long long)B, what[i], ms, 2.0 * B * O * C * 9 * H * W / ms * 1e-6);
        }
        for (int i = 0; i < 4; i++) be->iface->buffer_free(t[i].buf);
    }
    ASSERT_OK(be->iface->device_info(0, &info)); /* the cooperative-matrix state after its first use */
    printf("  %s\n", strstr(info.features, "coopmat_nv"));
    check_clean();
}

TEST_MAIN(TESTS)
