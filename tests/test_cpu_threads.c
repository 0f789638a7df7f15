/* CPU results must not depend on the thread count (issue 15): the GEMM blocks and the partial sums
** of the CPU kernels are cut by the shapes only, so 1 thread and N threads give the same bits.
**   lenet_bn_threads  a LeNet-5 with BatchNorm (small channel counts, 5x5 kernels, FC 256-120-84-10)
**                     trained 20 steps (Nesterov SGD, weight decay, label smoothing) on 1 thread and
**                     on 2, 16 and every core: identical losses and weights. Training amplifies a
**                     last-bit difference into 1e-3 of the loss within a few steps (a ReLU or a max
**                     pool decides the other way), so anything short of equality is a failure here.
**   ops_threads       matmul and conv2d (forward and both backward products) at the LeNet's and other
**                     shapes, on 1 to 16 threads: the same bits.
**   gemm_fault        run by CTest with tests/blas_fault.c preloaded (a cblas_sgemm that is wrong for
**                     one shape): the backend's GEMM self-test must see it, say so in the device
**                     info, and route the GEMMs to the built-in loop, so that results stay right.
** The thread counts are set with omp_set_num_threads, so CI's 2 cores run the 16-thread splits too. */
#include "core/internal.h"
#include "nn_util.h"

#define TESTS(X) X(lenet_bn_threads) X(ops_threads) X(gemm_fault)

#define LENET_STEPS 20
#define LENET_BATCH 64

int omp_get_num_procs(void) __attribute__((weak));

/* The CPU device's info line: name, BLAS and its kernels, and the GEMM self-test's verdict. */
static const char *cpu_features(void) {
    static td_device_info info;
    ASSERT(td_device_available(TD_CPU));
    ASSERT_OK(td_backend_for(TD_DEVICE_CPU)->iface->device_info(0, &info));
    fprintf(stderr, "  cpu: %s; %s; %s\n", info.name, info.driver, info.features);
    return info.features;
}

/* conv 1->6 k5, BN, ReLU, maxpool 2, conv 6->16 k5, BN, ReLU, maxpool 2, FC 256-120-84-10 */
static td_module *lenet_bn(void) {
    int k[2] = {5, 5}, two[2] = {2, 2};
    return td_sequential_new(
        14, (td_module *[]){td_conv2d_new(1, 6, k, NULL, NULL, NULL, 1, true),
                            td_batch_norm2d_new(6, 1e-5, 0.1, true, true), td_relu_new(),
                            td_max_pool2d_new(two, NULL, NULL), td_conv2d_new(6, 16, k, NULL, NULL, NULL, 1, true),
                            td_batch_norm2d_new(16, 1e-5, 0.1, true, true), td_relu_new(),
                            td_max_pool2d_new(two, NULL, NULL), td_flatten_new(1, -1), td_linear_new(256, 120, true),
                            td_relu_new(), td_linear_new(120, 84, true), td_relu_new(), td_linear_new(84, 10, true)});
}

/* What one run leaves: the loss of every step and the final parameters (host doubles). */
typedef struct lenet_run {
    double loss[LENET_STEPS];
    int n;
    int64_t numel[16];
    double *param[16];
} lenet_run;

/* Train a fresh LeNet-BN (seeded init) on `threads` OpenMP threads over the same 20 batches:
** noise images with a bright square placed by the class, so that the loss falls. */
static void lenet_train(int threads, lenet_run *r) {
    nn_threads(threads);
    td_manual_seed(7);
    test_seed_from(2024);
    td_module *m = lenet_bn();
    ASSERT(m);
    td_tensor *params[16];
    r->n = td_module_parameters(m, params, 16);
    td_optim_options o = td_sgd_defaults(0.05);
    o.momentum = 0.9, o.nesterov = true, o.weight_decay = 5e-4;
    td_optimizer *opt = td_sgd_new(r->n, params, &o);
    ASSERT(opt);
    double *img = malloc(sizeof(double) * LENET_BATCH * 784);
    int64_t label[LENET_BATCH];
    ASSERT(img);
    for (int step = 0; step < LENET_STEPS; step++) {
        td_scope_begin();
        for (int i = 0; i < LENET_BATCH * 784; i++) img[i] = test_uniform(0, 0.5);
        for (int b = 0; b < LENET_BATCH; b++) {
            label[b] = test_int(10);
            for (int y = 0; y < 6; y++)
                for (int x = 0; x < 6; x++) img[b * 784 + (2 + 2 * label[b] + y) * 28 + 4 + 2 * label[b] + x] += 0.5;
        }
        td_tensor *x = ASSERT_TENSOR(td_from_data(img, 4, (int64_t[]){LENET_BATCH, 1, 28, 28}, TD_F64, TD_CPU));
        td_tensor *y = ASSERT_TENSOR(td_from_data(label, 1, (int64_t[]){LENET_BATCH}, TD_I64, TD_CPU));
        td_tensor *logits = ASSERT_TENSOR(td_module_forward(m, ASSERT_TENSOR(td_cast(x, TD_F32))));
        td_tensor *loss = ASSERT_TENSOR(td_cross_entropy_loss(logits, y, NULL, -100, 0.1, TD_REDUCE_MEAN));
        td_optimizer_zero_grad(opt);
        ASSERT_OK(td_backward(loss, NULL, false));
        ASSERT_OK(td_optimizer_step(opt));
        ASSERT_OK(td_copy_to_host(loss, &r->loss[step], sizeof(double), TD_F64));
        td_scope_end();
    }
    for (int i = 0; i < r->n; i++) r->numel[i] = td_numel(params[i]), r->param[i] = test_host(params[i]);
    free(img);
    td_optimizer_free(opt);
    td_module_free(m);
}

/* Identical losses and weights; on a difference, the steps and the parameters that differ. */
static void lenet_compare(int threads, const lenet_run *one, const lenet_run *many) {
    int bad = 0;
    for (int s = 0; s < LENET_STEPS; s++)
        if (one->loss[s] != many->loss[s] && bad++ < 20)
            fprintf(stderr, "    step %2d: loss %.9f on 1 thread, %.9f on %d\n", s, one->loss[s], many->loss[s],
                    threads);
    ASSERT_EQ_INT(one->n, many->n);
    for (int i = 0; i < one->n; i++) {
        double scale = 0, d = 0;
        for (int64_t j = 0; j < one->numel[i]; j++) {
            scale = fmax(scale, fabs(one->param[i][j]));
            d = fmax(d, fabs(one->param[i][j] - many->param[i][j]));
        }
        if (d != 0 || memcmp(one->param[i], many->param[i], sizeof(double) * (size_t)one->numel[i])) {
            fprintf(stderr, "    parameter %d (%lld values): max diff %.3g, %.3g of its largest value\n", i,
                    (long long)one->numel[i], d, d / (scale > 0 ? scale : 1));
            bad++;
        }
    }
    fprintf(stderr, "  %2d threads: loss %.6f -> %.6f, %s\n", threads, many->loss[0], many->loss[LENET_STEPS - 1],
            bad ? "DIFFERENT from 1 thread" : "the same bits as 1 thread");
    if (bad) TEST_FAIL_("%d threads and 1 thread trained the LeNet-BN to different numbers", threads);
}

static void lenet_run_free(lenet_run *r) {
    for (int i = 0; i < r->n; i++) free(r->param[i]);
}

/* 1 thread against 2, 16 and every core (the GPU machine's host has 16; CI has 2). */
TEST(lenet_bn_threads) {
    cpu_features();
    int cores = omp_get_num_procs ? omp_get_num_procs() : 1, counts[3] = {2, 16, cores};
    lenet_run one = {0};
    lenet_train(1, &one);
    ASSERT(one.loss[LENET_STEPS - 1] < 0.5 * one.loss[0]); /* it learns */
    for (int c = 0; c < 3; c++) {
        if (c == 2 && (cores <= 2 || cores == 16)) continue;
        lenet_run many = {0};
        lenet_train(counts[c], &many);
        lenet_compare(counts[c], &one, &many);
        lenet_run_free(&many);
    }
    lenet_run_free(&one);
}

/* A matmul [m,k] @ [k,n] (b as [n,k]^T when n < 0), or, when m is 0, a stride-1 unpadded conv2d. */
typedef struct op_shape {
    const char *what;
    int64_t m, k, n;
    int64_t x[4], w[4];
} op_shape;

/* The op's results for inputs from a fixed seed, on `threads` threads, as host doubles in out[]
** with their element counts in len[]: a @ b and a^T @ b, or the conv and its two backward
** products. Returns how many. */
static int op_results(const op_shape *s, td_dtype dt, int threads, double **out, int64_t *len) {
    nn_threads(threads);
    nn_seed(91);
    td_scope_begin();
    td_tensor *r[3];
    int n = 0;
    if (s->m) {
        td_tensor *a = nn_rand(2, (int64_t[]){s->m, s->k}, 1, dt);
        td_tensor *b = s->n > 0 ? nn_rand(2, (int64_t[]){s->k, s->n}, 1, dt)
                                : ASSERT_TENSOR(td_transpose(nn_rand(2, (int64_t[]){-s->n, s->k}, 1, dt), 0, 1));
        td_tensor *at = ASSERT_TENSOR(td_transpose(nn_rand(2, (int64_t[]){s->k, s->m}, 1, dt), 0, 1));
        r[n++] = ASSERT_TENSOR(td_matmul(a, b));
        r[n++] = ASSERT_TENSOR(td_matmul(at, b));
    } else {
        int one[2] = {1, 1}, zero[2] = {0, 0};
        td_tensor *x = nn_rand(4, s->x, 1, dt), *w = nn_rand(4, s->w, 1, dt);
        r[n++] = ASSERT_TENSOR(td_conv2d(x, w, NULL, one, zero, one, 1));
        td_tensor *dy = nn_rand(4, td_shape(r[0]), 1, dt);
        r[n++] = ASSERT_TENSOR(td__conv2d_backward_input(dy, w, s->x, one, zero, one, 1));
        r[n++] = ASSERT_TENSOR(td__conv2d_backward_weight(dy, x, s->w, one, zero, one, 1));
    }
    for (int i = 0; i < n; i++) out[i] = nn_host(r[i]), len[i] = td_numel(r[i]);
    td_scope_end();
    return n;
}

/* The LeNet's products (its FC layers forward and backward, its two 5x5 convolutions at batch 64)
** and bigger ones (cut into 16 blocks, a conv with several images per weight-grad GEMM). */
TEST(ops_threads) {
    const op_shape shapes[] = {
        {"fc 64x256 @ (120x256)^T", 64, 256, -120, {0}, {0}},
        {"fc 64x120 @ 120x256", 64, 120, 256, {0}, {0}},
        {"fc 256x64 @ 64x120", 256, 64, 120, {0}, {0}},
        {"fc 64x120 @ (84x120)^T", 64, 120, -84, {0}, {0}},
        {"big 300x200 @ 200x190", 300, 200, 190, {0}, {0}},
        {"conv1 x[64,1,28,28] w[6,1,5,5]", 0, 0, 0, {64, 1, 28, 28}, {6, 1, 5, 5}},
        {"conv2 x[64,6,12,12] w[16,6,5,5]", 0, 0, 0, {64, 6, 12, 12}, {16, 6, 5, 5}},
        {"conv x[40,3,9,9] w[2,3,5,5]", 0, 0, 0, {40, 3, 9, 9}, {2, 3, 5, 5}},
    };
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            td_dtype dt = nn_float_dtypes[d];
            double *ref[3], *got[3];
            int64_t len[3];
            int n = op_results(&shapes[i], dt, 1, ref, len);
            for (int t = 2; t <= 16; t *= 2) {
                op_results(&shapes[i], dt, t, got, len);
                for (int o = 0; o < n; o++) {
                    if (memcmp(ref[o], got[o], sizeof(double) * (size_t)len[o]))
                        TEST_FAIL_("%s %s, output %d: %d threads and 1 thread differ", td_dtype_name(dt),
                                   shapes[i].what, o, t);
                    free(got[o]);
                }
            }
            for (int o = 0; o < n; o++) free(ref[o]);
        }
}

/* With the fault library preloaded (CTest's cpu_gemm_fault entry), OpenBLAS's sgemm is wrong at
** n == 24; the self-test must say so and the products must still be right. */
TEST(gemm_fault) {
    const char *pre = getenv("LD_PRELOAD");
    if (!pre || !strstr(pre, "blas_fault")) TEST_SKIP("needs tests/blas_fault.c preloaded (CTest's cpu_gemm_fault)");
    const char *f = cpu_features();
    ASSERT(strstr(f, "FAILED its self-test"));
    ASSERT(strstr(f, "f32 GEMMs use the built-in loop"));
    nn_seed(5);
    td_tensor *a = nn_rand(2, (int64_t[]){64, 120}, 1, TD_F32), *b = nn_rand(2, (int64_t[]){120, 24}, 1, TD_F32);
    double *ha = nn_host(a), *hb = nn_host(b), want[64 * 24];
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 24; j++) {
            want[i * 24 + j] = 0;
            for (int p = 0; p < 120; p++) want[i * 24 + j] += ha[i * 120 + p] * hb[p * 24 + j];
        }
    nn_check_tensor("64x120 @ 120x24 through the built-in loop", ASSERT_TENSOR(td_matmul(a, b)), want, nn_tol(TD_F32),
                    nn_tol(TD_F32));
    free(ha), free(hb);
}

TEST_MAIN(TESTS)
