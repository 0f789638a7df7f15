/*
** Custom ops (include/trident/kernel.h) with the examples of examples/custom_ops/:
** each op against its composed reference and under gradcheck on every present
** device (cpu; vulkan:0, which is lavapipe in CI; cuda:0), the W1 MLP with a
** fused bias+GELU training to the composed run's losses, td_checkpoint and
** capture, and a clear error for each kind of bad kernel.
*/
#include "custom_ops.h"
#include "runner.h"
#include "test_util.h"

#define TESTS(X)                                                                                                       \
    X(bias_gelu_match)                                                                                                 \
    X(bias_gelu_gradcheck)                                                                                             \
    X(rmsnorm_match)                                                                                                   \
    X(rmsnorm_gradcheck)                                                                                               \
    X(top1_match)                                                                                                      \
    X(train_mlp)                                                                                                       \
    X(checkpoint)                                                                                                      \
    X(capture)                                                                                                         \
    X(header_helpers)                                                                                                  \
    X(registry)                                                                                                        \
    X(error_no_impl)                                                                                                   \
    X(error_syntax)                                                                                                    \
    X(error_local_size)                                                                                                \
    X(error_bindings)                                                                                                  \
    X(error_entry)                                                                                                     \
    X(error_shape_fn)                                                                                                  \
    X(error_backward_shape)

static custom_ops ops;

static void setup(void) {
    test_seed();
    ASSERT_OK(custom_ops_register(&ops, CUSTOM_OPS_DIR));
}

/* The devices to run on: cpu, vulkan:0 and cuda:0 where present (each absent one says so). */
static int devices(td_device *out) {
    int n = 0;
    out[n++] = TD_CPU;
    td_device gpus[2] = {TD_VULKAN(0), TD_CUDA(0)};
    for (int i = 0; i < 2; i++) {
        char d[32];
        if (td_device_available(gpus[i]))
            out[n++] = gpus[i];
        else
            fprintf(stderr, "  %s absent: skipped there\n", td_device_str(gpus[i], d, sizeof d));
    }
    td_clear_error();
    return n;
}

/* Run body on each of devices() (only the GPU ones when gpu_only), each inside a scope, with the device's name;
** returns how many devices it ran on. */
static int on_each_device(void (*body)(td_device dev, const char *name), bool gpu_only) {
    td_device dev[3];
    int nd = devices(dev);
    for (int k = gpu_only; k < nd; k++) {
        char d[32];
        td_scope_begin();
        body(dev[k], td_device_str(dev[k], d, sizeof d));
        td_scope_end();
    }
    return nd - gpu_only;
}

/* max |a - b| over all elements, read as f64 on the host */
static double max_diff(td_tensor *a, td_tensor *b) {
    int64_t n = td_numel(a);
    ASSERT_EQ_INT(n, td_numel(b));
    double *x = test_host(a), *y = test_host(b), m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i] - y[i]));
    free(x), free(y);
    return m;
}

/* the CPU f64 result of fn(inputs) where inputs are moved to the CPU in f64 */
static td_tensor *ref64(td_tensor *(*fn)(td_tensor *, td_tensor *), td_tensor *a, td_tensor *b) {
    return fn(td_cast(td_to(a, TD_CPU), TD_F64), td_cast(td_to(b, TD_CPU), TD_F64));
}

static td_tensor *rms_ref_eps(td_tensor *x, td_tensor *w) { return rmsnorm_ref(x, w, 1e-5f); }

/* TEST(NAME): NAME_on on each device there is */
#define ON_EACH_DEVICE_TEST(NAME)                                                                                      \
    TEST(NAME) {                                                                                                       \
        setup();                                                                                                       \
        on_each_device(NAME##_on, false);                                                                              \
    }

static void bias_gelu_match_on(td_device dev, const char *name) {
    int64_t rows = 37, cols = 300; /* cols not a multiple of the block */
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){rows, cols}, -4, 4, TD_F32, dev);
    td_tensor *b = test_uniform_tensor(1, (int64_t[]){cols}, -1, 1, TD_F32, dev);
    td_tensor *y = ASSERT_TENSOR(bias_gelu(&ops, x, b));
    ASSERT_EQ_INT(td_tensor_dtype(y), TD_F32);
    double e = max_diff(y, ref64(bias_gelu_ref, x, b));
    printf("  %s: bias_gelu max |custom - f64 reference| = %.3g\n", name, e);
    ASSERT(e < 2e-6);
}

ON_EACH_DEVICE_TEST(bias_gelu_match)

/* gradcheck of fn(x, b) on dev: f64 where the kernel computes in f64 (cpu, cuda when cuda_f64), else through f32
** with a wider step */
static void gradcheck_on(td_device dev, const char *name, td_multi_fn fn, bool cuda_f64) {
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){3, 7}, -2, 2, TD_F64, dev);
    td_tensor *b = test_uniform_tensor(1, (int64_t[]){7}, -1, 1, TD_F64, dev);
    ASSERT_OK(td_set_requires_grad(x, true));
    ASSERT_OK(td_set_requires_grad(b, true));
    bool f64 = dev.type == TD_DEVICE_CPU || (dev.type == TD_DEVICE_CUDA && cuda_f64);
    td_gradcheck_options strict = {1e-6, 1e-5, 1e-3}, f32 = {1e-2, 2e-3, 2e-2};
    printf("  %s: gradcheck in %s\n", name, f64 ? "float64" : "float32");
    ASSERT_OK(td_gradcheck(fn, &ops, 2, (td_tensor *[]){x, b}, f64 ? &strict : &f32));
}

/* TEST(OP_gradcheck): gradcheck_on of OP_fn on each device */
#define GRADCHECK_TEST(OP, CUDA_F64)                                                                                   \
    static void OP##_gradcheck_on(td_device dev, const char *name) { gradcheck_on(dev, name, OP##_fn, CUDA_F64); }     \
    ON_EACH_DEVICE_TEST(OP##_gradcheck)

GRADCHECK_TEST(bias_gelu, true)

static void rmsnorm_match_on(td_device dev, const char *name) {
    int64_t shapes[3][2] = {{5, 7}, {33, 1000}, {1, 4097}};
    for (int s = 0; s < 3; s++) {
        td_tensor *x = test_uniform_tensor(2, shapes[s], -3, 3, TD_F32, dev);
        td_tensor *w = test_uniform_tensor(1, &shapes[s][1], 0.5, 1.5, TD_F32, dev);
        double e = max_diff(ASSERT_TENSOR(rmsnorm(&ops, x, w, 1e-5f)), ref64(rms_ref_eps, x, w));
        printf("  %s [%lld, %lld]: rmsnorm max diff %.3g\n", name, (long long)shapes[s][0], (long long)shapes[s][1], e);
        ASSERT(e < 1e-5);
    }
}

ON_EACH_DEVICE_TEST(rmsnorm_match)

GRADCHECK_TEST(rmsnorm, false)

static void top1_match_on(td_device dev, const char *name) {
    int64_t shapes[3][2] = {{9, 3}, {64, 1000}, {2, 5000}};
    for (int s = 0; s < 3; s++) {
        td_tensor *x = test_uniform_tensor(2, shapes[s], -10, 10, TD_F32, dev);
        /* a tie: element 1 of row 0 copied to the end, so the first index must win */
        td_tensor *val, *idx;
        ASSERT_OK(top1(&ops, x, &val, &idx));
        ASSERT_EQ_INT(td_tensor_dtype(idx), TD_I32);
        td_tensor *xc = td_to(x, TD_CPU);
        ASSERT(max_diff(val, td_amax(xc, 1, (int[]){1}, false)) == 0);
        ASSERT(max_diff(idx, td_argmax(xc, 1, false)) == 0);
    }
    /* ties: the first index wins */
    td_tensor *t = ASSERT_TENSOR(td_to(td_zeros(2, (int64_t[]){4, 100}, TD_F32, TD_CPU), dev));
    td_tensor *val, *idx;
    ASSERT_OK(top1(&ops, t, &val, &idx));
    ASSERT(max_diff(idx, td_zeros(1, (int64_t[]){4}, TD_I32, TD_CPU)) == 0);
    printf("  %s: top1 matches amax/argmax\n", name);
}

ON_EACH_DEVICE_TEST(top1_match)

static uint64_t mlp_seed; /* one seed for every device's run */

static void train_mlp_on(td_device dev, const char *name) {
    double fused[20], composed[20], worst = 0;
    ASSERT_OK(mlp_train(&ops, dev, 20, mlp_seed, fused));
    ASSERT_OK(mlp_train(NULL, dev, 20, mlp_seed, composed));
    for (int s = 0; s < 20; s++) worst = fmax(worst, fabs(fused[s] - composed[s]));
    printf("  %s: loss %.5f -> %.5f, max |fused - composed| %.3g\n", name, fused[0], fused[19], worst);
    printf("\n");
    ASSERT(fused[19] < 0.5 * fused[0]);
    ASSERT(worst <= 1e-5);
}

/* The W1 MLP with GELU: the fused bias_gelu trains to the composed ops' losses within 1e-5 over 20 steps. */
TEST(train_mlp) {
    setup();
    mlp_seed = test_next() % 1000;
    on_each_device(train_mlp_on, false);
}

static td_status gelu_region(void *user, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)user, (void)n_in, (void)n_out;
    out[0] = td_mul_scalar(bias_gelu(&ops, in[0], in[1]), 3);
    return out[0] ? TD_OK : td_last_status();
}

static void checkpoint_on(td_device dev, const char *name) {
    (void)name;
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){6, 40}, -2, 2, TD_F32, dev);
    td_tensor *b = test_uniform_tensor(1, (int64_t[]){40}, -1, 1, TD_F32, dev);
    td_tensor *in[2] = {x, b}, *g1[2], *g2[2], *y;
    ASSERT_OK(td_set_requires_grad(x, true));
    ASSERT_OK(td_set_requires_grad(b, true));
    ASSERT_OK(gelu_region(NULL, 2, in, 1, &y));
    ASSERT_OK(td_grad(1, (td_tensor *[]){td_sum(y, 0, NULL, false)}, NULL, 2, in, g1, false, false, false));
    ASSERT_OK(td_checkpoint(gelu_region, NULL, 2, in, 1, &y));
    ASSERT(td_requires_grad(y));
    ASSERT_OK(td_grad(1, (td_tensor *[]){td_sum(y, 0, NULL, false)}, NULL, 2, in, g2, false, false, false));
    ASSERT(max_diff(g1[0], g2[0]) == 0 && max_diff(g1[1], g2[1]) == 0);
}

/* Inside td_checkpoint the op is re-run in backward and gives the same gradients. */
ON_EACH_DEVICE_TEST(checkpoint)

static void capture_on(td_device dev, const char *name) {
    (void)name;
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){8, 64}, -2, 2, TD_F32, dev);
    td_tensor *b = test_uniform_tensor(1, (int64_t[]){64}, -1, 1, TD_F32, dev);
    td_tensor *x2 = test_uniform_tensor(2, (int64_t[]){8, 64}, -2, 2, TD_F32, dev);
    ASSERT_TENSOR(bias_gelu(&ops, x, b)); /* compiled before capture */
    td_captured_graph *g;
    ASSERT_OK(td_capture_begin(dev));
    td_tensor *y = bias_gelu(&ops, x, b);
    ASSERT_OK(td_capture_end(dev, &g));
    ASSERT(y);
    ASSERT_OK(td_copy_(x, x2));
    ASSERT_OK(td_graph_replay(g));
    ASSERT(max_diff(y, ref64(bias_gelu_ref, x2, b)) < 2e-6);
    td_graph_free(g);
}

/* Recorded by capture on the GPU backends, a replay reads the new inputs. */
TEST(capture) {
    setup();
    if (!on_each_device(capture_on, true)) TEST_SKIP("no GPU device (capture is a GPU feature)");
}

/* The kernel headers' helpers: bf16/f16 conversion and Philox against the library's. */
static const char *helpers_glsl = "#version 450\n#include <trident.glsl>\n"
                                  "layout(local_size_x = 64) in;\n"
                                  "layout(std430, binding = 0) writeonly buffer O { uint o[]; };\n"
                                  "void main() {\n"
                                  "    uint i = gl_GlobalInvocationID.x;\n"
                                  "    if (i >= 4u) return;\n"
                                  "    uvec4 w = td_philox(uvec2(42u, 0u), uvec2(7u, 0u));\n"
                                  "    o[i] = w[i];\n"
                                  "    o[4u + i] = td_f32_to_bf16(1.0 + float(i) / 3.0);\n"
                                  "    o[8u + i] = td_f32_to_f16(1.0 + float(i) / 3.0);\n"
                                  "}\n";
static const char *helpers_cuda = "#include <trident.cuh>\n"
                                  "extern \"C\" __global__ void helpers(unsigned *o) {\n"
                                  "    unsigned i = threadIdx.x;\n"
                                  "    if (i >= 4u) return;\n"
                                  "    unsigned w[4];\n"
                                  "    td_philox(42ull, 7ull, w);\n"
                                  "    o[i] = w[i];\n"
                                  "    o[4 + i] = td_f32_to_bf16(1.0f + (float)i / 3.0f);\n"
                                  "    o[8 + i] = td_f32_to_f16(1.0f + (float)i / 3.0f);\n"
                                  "}\n";

TEST(header_helpers) {
    setup();
    td_device dev[3];
    int nd = devices(dev), ran = 0;
    uint32_t want[12];
    td_philox4x32(42, 7, want);
    for (int i = 0; i < 4; i++) {
        float f = 1.0f + (float)i / 3.0f;
        td_tensor *c = td_scalar(f, TD_F32, TD_CPU);
        uint16_t h, bf;
        ASSERT_OK(td_copy_to_host(td_cast(c, TD_F16), &h, 2, TD_F16));
        ASSERT_OK(td_copy_to_host(td_cast(c, TD_BF16), &bf, 2, TD_BF16));
        want[4 + i] = bf, want[8 + i] = h;
        td_release(c);
    }
    for (int k = 1; k < nd; k++) {
        bool cuda = dev[k].type == TD_DEVICE_CUDA;
        td_user_kernel *kern;
        char log[4096];
        ASSERT_OK(td_kernel_compile(dev[k], cuda ? TD_KERNEL_CUDA : TD_KERNEL_GLSL, cuda ? helpers_cuda : helpers_glsl,
                                    cuda ? "helpers" : NULL, NULL, &kern, log, sizeof log));
        td_tensor *o = ASSERT_TENSOR(td_zeros(1, (int64_t[]){12}, TD_I32, dev[k]));
        ASSERT_OK(td_kernel_launch(kern, (uint32_t[]){1, 1, 1}, (uint32_t[]){64, 1, 1}, 0, 1, &o, NULL, 0));
        uint32_t got[12];
        ASSERT_OK(td_copy_to_host(o, got, sizeof got, TD_I32));
        for (int i = 0; i < 12; i++) ASSERT_EQ_INT(got[i], want[i]);
        td_release(o);
        td_kernel_free(kern);
        ran++;
    }
    if (!ran) TEST_SKIP("no GPU device (the headers are for GPU kernels)");
}

/* The registry lists the ops with their backends; names are unique. */
TEST(registry) {
    setup();
    ASSERT_EQ_INT(td_custom_op_count(), 4);
    const td_custom_op *op = td_custom_op_find("rmsnorm");
    ASSERT(op == ops.rmsnorm);
    ASSERT(td_custom_op_has_impl(op, TD_DEVICE_CPU) && td_custom_op_has_impl(op, TD_DEVICE_VULKAN));
    ASSERT(td_custom_op_has_backward(op) && !td_custom_op_has_backward(ops.top1));
    td_custom_op *dup;
    td_custom_op_def def = {.name = "rmsnorm", .n_in = 1, .n_out = 1};
    ASSERT_ERROR(td_custom_op_register(&def, &dup), TD_ERR_STATE, "rmsnorm: a custom op of that name");
    def.name = "bad name";
    ASSERT_ERROR(td_custom_op_register(&def, &dup), TD_ERR_MISUSE, "'bad name'");
    custom_ops_free(&ops);
    ASSERT_EQ_INT(td_custom_op_count(), 0);
}

static td_status cpu_only(const td_custom_call *c, const void *const *in, void *const *out) {
    (void)c, (void)in, (void)out;
    return TD_OK;
}

/* A device without an implementation: the message names the op, the device and the backends it has. */
TEST(error_no_impl) {
    setup();
    td_custom_op *gpu_only, *cpu_only_op;
    td_custom_op_def def = {.name = "gpu_only", .n_in = 1, .n_out = 1, .vulkan = {.source = "void main() {}"}};
    ASSERT_OK(td_custom_op_register(&def, &gpu_only));
    td_tensor *x = td_zeros(1, (int64_t[]){4}, TD_F32, TD_CPU);
    ASSERT_ERROR(td_custom_op_apply(gpu_only, 1, &x, 0, NULL), TD_ERR_UNSUPPORTED,
                 "gpu_only: no implementation for cpu (it has vulkan)");
    td_release(x);
    td_custom_op_def def2 = {.name = "cpu_only", .n_in = 1, .n_out = 1, .cpu = {.cpu = cpu_only}};
    ASSERT_OK(td_custom_op_register(&def2, &cpu_only_op));
    if (td_device_available(TD_VULKAN(0))) {
        x = td_zeros(1, (int64_t[]){4}, TD_F32, TD_VULKAN(0));
        ASSERT_ERROR(td_custom_op_apply(cpu_only_op, 1, &x, 0, NULL), TD_ERR_UNSUPPORTED,
                     "cpu_only: no implementation for vulkan:0 (it has cpu)");
        td_release(x);
    }
    /* the count in the message agrees with its noun: "1 input", "2 outputs" */
    td_tensor *y[2],
        *two[2] = {td_zeros(1, (int64_t[]){4}, TD_F32, TD_CPU), td_zeros(1, (int64_t[]){4}, TD_F32, TD_CPU)};
    ASSERT_ERROR(td_custom_op_call(cpu_only_op, 2, two, 0, NULL, 2, y), TD_ERR_MISUSE,
                 "cpu_only: takes 1 input and 1 output (called with 2 and 2)");
    td_release(two[0]);
    td_release(two[1]);
    td_clear_error();
    td_custom_op_free(gpu_only);
    td_custom_op_free(cpu_only_op);
}

/* The GPU devices present (vulkan:0, cuda:0), or skip the case. */
static int gpus_or_skip(td_device *gpu) {
    td_device dev[3];
    int nd = devices(dev);
    if (nd < 2) TEST_SKIP("no GPU device to compile a kernel on");
    for (int k = 1; k < nd; k++) gpu[k - 1] = dev[k];
    return nd - 1;
}

/* The one-kernel op "bad" (src, entry, n_in inputs) on dev, run on zeros [4] (each input): it must fail with st and
** a message holding "bad: " and want. */
static void expect_bad_kernel(td_device dev, const char *src, const char *entry, int n_in, td_status st,
                              const char *want) {
    td_custom_op_def def = {.name = "bad", .n_in = n_in, .n_out = 1};
    td_custom_impl im = {.source = src, .entry = entry};
    if (dev.type == TD_DEVICE_CUDA)
        def.cuda = im;
    else
        def.vulkan = im;
    td_custom_op *op;
    ASSERT_OK(td_custom_op_register(&def, &op));
    td_tensor *x = td_zeros(1, (int64_t[]){4}, TD_F32, dev);
    td_clear_error();
    ASSERT(!td_custom_op_apply(op, n_in, (td_tensor *[]){x, x}, 0, NULL));
    char d[32];
    printf("  %s: %s\n", td_device_str(dev, d, sizeof d), td_last_error());
    ASSERT_EQ_INT(td_last_status(), st);
    ASSERT(strstr(td_last_error(), "bad: ") && strstr(td_last_error(), want));
    test_message_record(td_last_error());
    td_release(x);
    td_custom_op_free(op);
}

/* TEST(NAME): NAME_on(gpu, cuda) on each GPU device (skipped without one) */
#define ON_EACH_GPU_TEST(NAME)                                                                                         \
    TEST(NAME) {                                                                                                       \
        setup();                                                                                                       \
        td_device gpu[2];                                                                                              \
        int n = gpus_or_skip(gpu);                                                                                     \
        for (int k = 0; k < n; k++) NAME##_on(gpu[k], gpu[k].type == TD_DEVICE_CUDA);                                  \
    }

static const char *glsl_ok = "#version 450\n#include <trident.glsl>\nlayout(local_size_x = TD_BLOCK) in;\n"
                             "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
                             "layout(std430, binding = 1) writeonly buffer Y { float y[]; };\n"
                             "void main() { uint i = td_global_id(); if (i < td.n) y[i] = 2.0 * x[i]; }\n";
static const char *cuda_ok = "#include <trident.cuh>\n"
                             "extern \"C\" __global__ void twice(const float *x, float *y, td_args a) {\n"
                             "    unsigned i = td_global_id(); if (i < a.n) y[i] = 2.0f * x[i]; }\n";

/* A syntax error: the compiler's message with the line in the user's source (the header's lines do not count). */
static void error_syntax_on(td_device gpu, bool cuda) {
    const char *src = cuda ? "#include <trident.cuh>\n\n"
                             "extern \"C\" __global__ void twice(float *x, float *y, td_args a) {\n"
                             "    unsigned i = td_global_id();\n    y[i] = 2.0f * x[i] +;\n}\n"
                           : "#version 450\n#include <trident.glsl>\nlayout(local_size_x = TD_BLOCK) in;\n"
                             "layout(std430, binding = 0) buffer X { float x[]; };\n"
                             "void main() { x[0] = 1.0 +; }\n";
    /* one line, named after the op: "bad.cu:5: error: expected an expression", "bad.comp:5: '' : syntax error" */
    expect_bad_kernel(gpu, src, cuda ? "twice" : NULL, 1, TD_ERR_COMPILE, cuda ? "bad.cu:5: error" : "bad.comp:5: ");
    ASSERT(!strchr(td_last_error(), '\n'));
}
ON_EACH_GPU_TEST(error_syntax)

/* A kernel that fixes a block other than the op's (256): GLSL's literal local size, CUDA's __launch_bounds__. */
static void error_local_size_on(td_device gpu, bool cuda) {
    const char *src = cuda ? "#include <trident.cuh>\n"
                             "extern \"C\" __global__ void __launch_bounds__(64) twice(const float *x, float *y, "
                             "td_args a) {\n    unsigned i = td_global_id(); if (i < a.n) y[i] = 2.0f * x[i]; }\n"
                           : "#version 450\n#include <trident.glsl>\nlayout(local_size_x = 64) in;\n"
                             "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
                             "layout(std430, binding = 1) writeonly buffer Y { float y[]; };\n"
                             "void main() { uint i = td_global_id(); if (i < td.n) y[i] = 2.0 * x[i]; }\n";
    expect_bad_kernel(gpu, src, cuda ? "twice" : NULL, 1, TD_ERR_MISUSE,
                      cuda ? "block {256,1,1} has 256 threads; this kernel allows at most 64"
                           : "local size to {64,1,1} but is launched with a block of 256");
}
ON_EACH_GPU_TEST(error_local_size)

/* The kernel has x and y; the op says two inputs, so three tensors. */
static void error_bindings_on(td_device gpu, bool cuda) {
    expect_bad_kernel(gpu, cuda ? cuda_ok : glsl_ok, cuda ? "twice" : NULL, 2, TD_ERR_MISUSE,
                      cuda ? "parameters take" : "launched with 3 tensors, but the shader has 2 bindings");
}
ON_EACH_GPU_TEST(error_bindings)

static void error_entry_on(td_device gpu, bool cuda) {
    expect_bad_kernel(gpu, cuda ? cuda_ok : glsl_ok, "thrice", 1, cuda ? TD_ERR_COMPILE : TD_ERR_MISUSE, "'thrice'");
}
ON_EACH_GPU_TEST(error_entry)

static td_status bad_shape(const td_custom_call *c, td_custom_meta *out) {
    (void)out;
    return td_error_set(TD_ERR_SHAPE, "input 0 has %d dims, expected 3", td_ndim(c->inputs[0]));
}

TEST(error_shape_fn) {
    setup();
    td_custom_op *op;
    td_custom_op_def def = {.name = "shapeless", .n_in = 1, .n_out = 1, .shape = bad_shape, .cpu = {.cpu = cpu_only}};
    ASSERT_OK(td_custom_op_register(&def, &op));
    td_tensor *x = td_zeros(1, (int64_t[]){4}, TD_F32, TD_CPU);
    ASSERT_ERROR(td_custom_op_apply(op, 1, &x, 0, NULL), TD_ERR_SHAPE, "shapeless: input 0 has 1 dims, expected 3");
    td_release(x);
    td_custom_op_free(op);
}

static td_status copy_cpu(const td_custom_call *c, const void *const *in, void *const *out) {
    memcpy(out[0], in[0], c->args.n * sizeof(float));
    return TD_OK;
}

static td_status wrong_backward(const td_custom_call *c, td_tensor *const *dy, td_tensor **dx) {
    (void)c;
    dx[0] = td_sum(dy[0], 0, NULL, false); /* a scalar, not x's shape */
    return dx[0] ? TD_OK : td_last_status();
}

TEST(error_backward_shape) {
    setup();
    td_custom_op *op;
    td_custom_op_def def = {
        .name = "ident", .n_in = 1, .n_out = 1, .cpu = {.cpu = copy_cpu}, .backward = wrong_backward};
    ASSERT_OK(td_custom_op_register(&def, &op));
    td_scope_begin();
    td_tensor *x = td_zeros(2, (int64_t[]){2, 3}, TD_F32, TD_CPU);
    ASSERT_OK(td_set_requires_grad(x, true));
    td_tensor *y = ASSERT_TENSOR(td_custom_op_apply(op, 1, &x, 0, NULL));
    ASSERT(td_requires_grad(y));
    ASSERT_ERROR(td_backward(td_sum(y, 0, NULL, false), NULL, false), TD_ERR_SHAPE,
                 "ident backward: the gradient of input 0 has shape [], expected [2,3]");
    td_scope_end();
    td_custom_op_free(op);
}

TEST_MAIN(TESTS)
