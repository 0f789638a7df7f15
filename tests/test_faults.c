/*
** Fault injection (src/core/fault.c): every buffer allocation of one W2 training
** step fails in turn (TRIDENT_FAULT_ALLOC), on the CPU, vulkan:0 and cuda:0 when
** present; each failure must be a clear TD_ERR_OOM with no crash and no leak
** (tensors, device bytes; LSan in the sanitized build), and the next steps with
** faults off must train. Every file write of a checkpoint save fails in turn
** (TRIDENT_FAULT_WRITE, as ENOSPC): the previous checkpoint stays loadable.
** W2 is tools/workloads.c's CNN at batch 2 (narrower on Vulkan: w2_init).
*/
#include <dirent.h>

#include "core/internal.h"
#include "runner.h"
#include "workloads.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

/* Host memory unreachable now is a failure (LSan; the runner's cases end in
** _exit, which skips LSan's check at exit). A no-op without ASan. */
static void check_no_host_leaks(void) {
#ifdef __SANITIZE_ADDRESS__
    if (__lsan_do_recoverable_leak_check()) TEST_FAIL_("LeakSanitizer found leaks (above)");
#endif
}

#define TESTS(X)                                                                                                       \
    X(alloc_sweep_cpu) X(alloc_sweep_vulkan) X(alloc_sweep_cuda) X(alloc_env) X(write_sweep_checkpoint) X(write_env)

#define BATCH 2

static td_tensor *batch_x, *batch_y;

#define ASSERT_TENSOR_MODULE(expr)                                                                                     \
    ({                                                                                                                 \
        td_module *m_ = (expr);                                                                                        \
        if (!m_) TEST_FAIL_("%s returned NULL", #expr);                                                                \
        m_;                                                                                                            \
    })

/* One fixed batch on dev: pixels in [0, 1), labels 3 and 7. */
static void batch_new(td_device dev) {
    batch_x = ASSERT_TENSOR(td_rand(2, (int64_t[]){BATCH, 784}, 42, 0, TD_F32, dev));
    batch_y = ASSERT_TENSOR(td_from_data((int64_t[]){3, 7}, 1, (int64_t[]){BATCH}, TD_I64, dev));
}

/* W2 into *w on dev, as workload_init builds it (Adam, lr 1e-3); on Vulkan
** (lavapipe) its layers with 1/8 of the channels and width, so that the sweep
** stays short: the same ops, the same allocations. */
static void w2_init(workload *w, td_device dev) {
    td_manual_seed(1);
    if (dev.type != TD_DEVICE_VULKAN) {
        ASSERT_OK(workload_init(w, WORKLOAD_CNN, NULL, dev, NULL, 0, false));
        return;
    }
    const int k[2] = {3, 3}, pad[2] = {1, 1}, two[2] = {2, 2};
    *w = (workload){.kind = WORKLOAD_CNN, .name = "cnn", .device = dev};
    w->model = ASSERT_TENSOR_MODULE(td_sequential_new(
        11, (td_module *[]){td_unflatten_new(1, 3, (int64_t[]){1, 28, 28}),
                            td_conv2d_new(1, 4, k, NULL, pad, NULL, 1, true), td_relu_new(),
                            td_max_pool2d_new(two, NULL, NULL), td_conv2d_new(4, 8, k, NULL, pad, NULL, 1, true),
                            td_relu_new(), td_max_pool2d_new(two, NULL, NULL), td_flatten_new(1, -1),
                            td_linear_new(392, 16, true), td_relu_new(), td_linear_new(16, 10, true)}));
    ASSERT_OK(td_module_to(w->model, dev));
    td_tensor *params[16];
    int n = td_module_parameters(w->model, params, 16);
    ASSERT(n == 8);
    td_optim_options o = td_adam_defaults(1e-3);
    w->opt = td_adam_new(n, params, &o);
    ASSERT(w->opt);
}

static uint64_t device_bytes(td_device dev) {
    td_memory_stats m;
    return td_memory_stats_get(dev, false, &m) == TD_OK ? m.allocated : 0;
}

/* Two steps with faults off: each succeeds with a finite loss, and the loss
** on the fixed batch falls (first: the loss of the faulted step's retry). */
static void check_trains(workload *w) {
    double first = 0, loss = 0;
    ASSERT_OK(workload_train_step(w, batch_x, batch_y, &first));
    ASSERT(isfinite(first));
    ASSERT_OK(workload_train_step(w, batch_x, batch_y, &loss));
    ASSERT(isfinite(loss));
    if (!(loss < first)) TEST_FAIL_("loss did not fall after the fault: %g then %g", first, loss);
}

/* The sweep: for n = 1, 2, ... a fresh W2 whose first step fails at its nth
** allocation, until a step completes before the nth; returns the allocations
** of one step. */
static int64_t alloc_sweep(td_device dev) {
    batch_new(dev);
    workload warm; /* a first step fills the backend's caches, which are no leak */
    w2_init(&warm, dev);
    ASSERT_OK(workload_train_step(&warm, batch_x, batch_y, NULL));
    workload_free(&warm);
    int64_t live0 = td_debug_live_tensors();
    uint64_t bytes0 = device_bytes(dev);
    for (long long n = 1;; n++) {
        workload w;
        w2_init(&w, dev);
        td__fault_alloc_set(n);
        td_status st = workload_train_step(&w, batch_x, batch_y, NULL);
        long long left = td__fault_alloc_set(0);
        if (st == TD_OK) {
            if (left == 0) TEST_FAIL_("allocation %lld failed, yet the step returned TD_OK", n);
            workload_free(&w);
            ASSERT_EQ_INT(td_debug_live_tensors(), live0);
            check_no_host_leaks();
            char d[32];
            printf("  %s: one W2 step makes %lld buffer allocations; each failed in turn\n",
                   td_device_str(dev, d, sizeof d), n - left);
            return n - left;
        }
        if (left != 0) TEST_FAIL_("the step failed (%s) before its allocation %lld", td_status_str(st), n);
        if (st != TD_ERR_OOM || !strstr(td_last_error(), "TRIDENT_FAULT_ALLOC"))
            TEST_FAIL_("allocation %lld: the step returned %s, not the injected out-of-memory", n, td_status_str(st));
        const char *why = test_message_problem(td_last_error(), strlen(td_last_error()));
        if (why) TEST_FAIL_("allocation %lld: the message is %s", n, why);
        check_trains(&w);
        workload_free(&w);
        if (td_debug_live_tensors() != live0)
            TEST_FAIL_("allocation %lld: %lld tensors leaked", n, (long long)(td_debug_live_tensors() - live0));
        if (device_bytes(dev) != bytes0)
            TEST_FAIL_("allocation %lld: %llu device bytes leaked", n,
                       (unsigned long long)(device_bytes(dev) - bytes0));
    }
}

TEST(alloc_sweep_cpu) { ASSERT(alloc_sweep(TD_CPU) >= 20); }

TEST(alloc_sweep_vulkan) {
    if (!td_backend_for(TD_DEVICE_VULKAN))
        TEST_SKIP("no Vulkan device: %s", td_backend_unavailable_reason(TD_DEVICE_VULKAN));
    ASSERT(alloc_sweep(TD_VULKAN(0)) >= 20);
}

TEST(alloc_sweep_cuda) {
    if (!td_backend_for(TD_DEVICE_CUDA)) TEST_SKIP("no CUDA device: %s", td_backend_unavailable_reason(TD_DEVICE_CUDA));
    ASSERT(alloc_sweep(TD_CUDA(0)) >= 20);
}

/* TRIDENT_FAULT_ALLOC=3, read at the first allocation: the third one fails. */
TEST(alloc_env) {
    setenv("TRIDENT_FAULT_ALLOC", "3", 1);
    const int64_t s[1] = {4};
    td_tensor *a = ASSERT_TENSOR(td_zeros(1, s, TD_F32, TD_CPU)), *b = ASSERT_TENSOR(td_zeros(1, s, TD_F32, TD_CPU));
    ASSERT(!td_zeros(1, s, TD_F32, TD_CPU));
    ASSERT_EQ_INT(td_last_status(), TD_ERR_OOM);
    ASSERT(strstr(td_last_error(), "out of memory allocating 16 bytes on cpu"));
    td_release(ASSERT_TENSOR(td_zeros(1, s, TD_F32, TD_CPU))); /* it fired once */
    td_release(a);
    td_release(b);
}

static char dir[64];

static const char *at(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

/* Save w's checkpoint at step to path. */
static td_status save(workload *w, int64_t step, const char *path) {
    td_train_state ck = {
        .model = td_module_state_dict(w->model), .optim = td_optimizer_state_dict(w->opt), .step = step};
    snprintf(ck.model_name, sizeof ck.model_name, "cnn");
    ASSERT(ck.model && ck.optim);
    td_status st = td_train_state_save(path, &ck);
    td_named_tensors_free(ck.model);
    td_named_tensors_free(ck.optim);
    return st;
}

/* The checkpoint at path holds step and, for model.<first>, the values want[0..n). */
static void check_checkpoint(const char *path, int64_t step, const float *want, int64_t n) {
    td_train_state ck = {0};
    ASSERT_OK(td_train_state_load(path, TD_CPU, "cnn", NULL, &ck));
    ASSERT_EQ_INT(ck.step, step);
    td_tensor *t = td_named_tensors_at(ck.model, 0);
    ASSERT_EQ_INT(td_numel(t), n);
    float *got = malloc((size_t)n * sizeof *got);
    ASSERT_OK(td_copy_to_host(t, got, (size_t)n * sizeof *got, TD_F32));
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) TEST_FAIL_("%s: element %lld of the first tensor changed", path, (long long)i);
    free(got);
    td_train_state_clear(&ck);
}

/* Files in dir: only ck.safetensors (no temporary left behind). */
static void check_no_temporaries(void) {
    DIR *d = opendir(dir);
    ASSERT(d);
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.' && strcmp(e->d_name, "ck.safetensors")) TEST_FAIL_("left behind: %s", e->d_name);
    closedir(d);
}

/* For n = 1, 2, ...: a save whose nth write fails as ENOSPC leaves the step-1
** checkpoint loadable, byte for byte; until a save makes fewer writes. */
TEST(write_sweep_checkpoint) {
    snprintf(dir, sizeof dir, "/tmp/td_faults_XXXXXX");
    ASSERT(mkdtemp(dir));
    batch_new(TD_CPU);
    workload w;
    td_manual_seed(1);
    ASSERT_OK(workload_init(&w, WORKLOAD_CNN, NULL, TD_CPU, NULL, 0, false));
    ASSERT_OK(workload_train_step(&w, batch_x, batch_y, NULL));
    const char *path = at("ck.safetensors");
    ASSERT_OK(save(&w, 1, path));
    td_train_state ck = {0};
    ASSERT_OK(td_train_state_load(path, TD_CPU, "cnn", NULL, &ck));
    td_tensor *first = td_named_tensors_at(ck.model, 0);
    int64_t n = td_numel(first);
    float *want = malloc((size_t)n * sizeof *want);
    ASSERT_OK(td_copy_to_host(first, want, (size_t)n * sizeof *want, TD_F32));
    td_train_state_clear(&ck);
    ASSERT_OK(workload_train_step(&w, batch_x, batch_y, NULL)); /* the weights move on */
    for (long long k = 1;; k++) {
        td__fault_write_set(k);
        td_status st = save(&w, 2, path);
        long long left = td__fault_write_set(0);
        if (st == TD_OK) {
            ASSERT(left > 0);
            printf("  a W2 checkpoint save makes %lld writes; each failed in turn\n", k - left);
            ASSERT(k - left >= 3);
            break;
        }
        ASSERT_EQ_INT(st, TD_ERR_IO);
        if (!strstr(td_last_error(), "No space left on device"))
            TEST_FAIL_("write %lld: the message does not say the disk is full", k);
        check_checkpoint(path, 1, want, n);
        check_no_temporaries();
    }
    ASSERT_OK(td_train_state_load(path, TD_CPU, "cnn", NULL, &ck)); /* the save that made every write */
    ASSERT_EQ_INT(ck.step, 2);
    td_train_state_clear(&ck);
    free(want);
    workload_free(&w);
    check_no_host_leaks();
    remove(path);
    rmdir(dir);
}

/* TRIDENT_FAULT_WRITE=1: the first write of a save fails. */
TEST(write_env) {
    setenv("TRIDENT_FAULT_WRITE", "1", 1);
    snprintf(dir, sizeof dir, "/tmp/td_faults_XXXXXX");
    ASSERT(mkdtemp(dir));
    td_named_tensors *l = td_named_tensors_new();
    td_tensor *t = ASSERT_TENSOR(td_zeros(1, (int64_t[]){4}, TD_F32, TD_CPU));
    ASSERT_OK(td_named_tensors_add(l, "t", t));
    ASSERT_EQ_INT(td_safetensors_save(at("a.safetensors"), l), TD_ERR_IO);
    ASSERT(strstr(td_last_error(), "No space left on device"));
    ASSERT_OK(td_safetensors_save(at("a.safetensors"), l)); /* it fired once */
    td_named_tensors_free(l);
    td_release(t);
    remove(at("a.safetensors"));
    rmdir(dir);
}

TEST_MAIN(TESTS)
