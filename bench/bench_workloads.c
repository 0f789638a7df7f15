/*
** The workload table (W1-W3 run in bench_train.c) and the W4 operator microbenchmarks of WORKLOADS.md, plus
** the roofline measured on the same device.
**
** Sizes (n: matmul side; m: vector elements; R = m/4096 rows):
**   matmul     [n,n] @ [n,n]            2n^3 flop       n = 4096 (--quick 256)
**   add        [m] + [m]                12 bytes/elem   m = 2^28 GPU, 2^24 CPU (--quick 2^20)
**   softmax    [R,4096], last dim       8 bytes/elem
**   layernorm  [R,4096], w,b [4096]     8 bytes/elem
**   sum        [m] -> []                4 bytes/elem
**   adam       10M params (--quick 2^20) 28 bytes/param: read p,g,m,v; write p,m,v
**   colsum     [16384,768] -> [768], sum over dim 0 (a bias gradient over B*T rows; --quick [1024,768]),
**              f32 and bf16, bytes read + written
**   roofline   copy [c] -> [c], 8 bytes/elem (c = 2^28 GPU, 2^24 CPU and --quick);
**              matmul at n/4 and n/2 for each dtype the row set measures
**   dispatch   10k adds [1] + [1], each in its own scope (its result freed at
**              once), then one synchronize; host clock; us/op = sample / 10k
** These match ../shared/anchors/torch_workloads.py (bench/torch_workloads.py),
** which `trident bench --torch` runs with the same sizes.
*/
#include <string.h>

#include "bench.h"

#define ROW_LEN      4096
#define ADAM_PARAMS  10000000
#define DISPATCH_OPS 10000

int64_t bench_matmul_n(const bench_session *s) { return s->opt.quick ? 256 : 4096; }

int64_t bench_vector_elems(const bench_session *s, int device) {
    if (s->opt.quick) return (int64_t)1 << 20;
    return s->devices[device].dev.type == TD_DEVICE_CPU ? (int64_t)1 << 24 : (int64_t)1 << 28;
}

static int64_t copy_elems(const bench_session *s, int device) {
    return s->opt.quick || s->devices[device].dev.type == TD_DEVICE_CPU ? (int64_t)1 << 24 : (int64_t)1 << 28;
}

/* Inputs of one workload: k rotated sets of x (and y, m, v), shared w and b. */
typedef struct op_arg {
    int k;
    td_tensor *x[8], *y[8], *m[8], *v[8];
    td_tensor *w, *b;
    int64_t step;
} op_arg;

static td_status ok_if(td_tensor *t) { return t ? TD_OK : td_last_status(); }

static td_status fn_matmul(void *p, int r) { return ok_if(td_matmul(((op_arg *)p)->x[r], ((op_arg *)p)->y[r])); }
static td_status fn_add(void *p, int r) { return ok_if(td_add(((op_arg *)p)->x[r], ((op_arg *)p)->y[r])); }
static td_status fn_softmax(void *p, int r) { return ok_if(td_softmax(((op_arg *)p)->x[r], -1)); }
static td_status fn_sum(void *p, int r) { return ok_if(td_sum(((op_arg *)p)->x[r], 0, NULL, false)); }
static td_status fn_copy(void *p, int r) { return td_copy_(((op_arg *)p)->y[r], ((op_arg *)p)->x[r]); }

static td_status fn_layernorm(void *p, int r) {
    op_arg *a = p;
    return ok_if(td_layer_norm(a->x[r], 1, a->w, a->b, 1e-5));
}

static td_status fn_adam(void *p, int r) {
    op_arg *a = p;
    return td_adam_update(a->x[r], a->y[r], a->m[r], a->v[r], NULL, 1e-3, 0.9, 0.999, 1e-8, 0.0, ++a->step, false,
                          false, false);
}

/* k sets of normal(0,1) tensors of one shape; seeds differ per set and slot. */
static td_status fill_sets(td_tensor **set, int k, int ndim, const int64_t *shape, td_dtype dt, td_device dev,
                           uint64_t slot) {
    for (int i = 0; i < k; i++)
        if (!(set[i] = td_randn(ndim, shape, 1000 * slot + (uint64_t)i, 0, dt, dev))) return td_last_status();
    return TD_OK;
}

/* Time [n,n] @ [n,n] in dtype dt; roof rows name the roofline sweep. */
static td_status time_matmul(bench_session *s, int device, const char *workload, int64_t n, td_dtype dt) {
    op_arg a = {.k = 1};
    int64_t shape[2] = {n, n};
    td_device dev = s->devices[device].dev;
    td_scope_begin();
    td_status st = fill_sets(a.x, 1, 2, shape, dt, dev, 1);
    if (st == TD_OK) st = fill_sets(a.y, 1, 2, shape, dt, dev, 2);
    if (st == TD_OK) {
        char size[80];
        snprintf(size, sizeof size, "%lldx%lldx%lld", (long long)n, (long long)n, (long long)n);
        if (!bench_time(s, device, workload, td_dtype_name(dt), size, BENCH_UNIT_GFLOPS, 2.0 * n * n * n, 1, fn_matmul,
                        &a))
            st = TD_ERR_DEVICE; /* the row holds the message */
    } else {
        bench_fail(s, device, workload, td_dtype_name(dt), NULL);
    }
    td_scope_end();
    return st;
}

/* The dtypes whose matmul rows this device gets: f32 always, bf16/fp16 where
** the device computes them natively (bf16 also on f16 tensor cores: Vulkan's
** bf16 matmul runs there). Returns the count written to dts. */
static int matmul_dtypes(const bench_device *d, td_dtype dts[3]) {
    int n = 0;
    dts[n++] = TD_F32;
    if (d->info.bf16 || (d->info.fp16 && d->info.cooperative_matrix)) dts[n++] = TD_BF16;
    if (d->info.fp16) dts[n++] = TD_F16;
    return n;
}

static td_status run_matmul(bench_session *s, int device) {
    td_dtype dts[3];
    int n = matmul_dtypes(&s->devices[device], dts);
    td_status worst = TD_OK;
    for (int i = 0; i < n; i++) {
        td_status st = time_matmul(s, device, "W4-matmul", bench_matmul_n(s), dts[i]);
        if (st != TD_OK) worst = st;
    }
    return worst;
}

td_status bench_roofline(bench_session *s, int device) {
    td_device dev = s->devices[device].dev;
    int64_t c = copy_elems(s, device);
    s->devices[device].copy_elems = c;
    op_arg a = {.k = bench_rotation(8.0 * (double)c)};
    td_scope_begin();
    td_status st = fill_sets(a.x, a.k, 1, &c, TD_F32, dev, 1);
    if (st == TD_OK) st = fill_sets(a.y, a.k, 1, &c, TD_F32, dev, 2);
    char size[80];
    snprintf(size, sizeof size, "%lld", (long long)c);
    if (st == TD_OK)
        bench_time(s, device, "roof-copy", "float32", size, BENCH_UNIT_GBPS, 8.0 * (double)c, a.k, fn_copy, &a);
    else
        bench_fail(s, device, "roof-copy", "float32", NULL);
    td_scope_end();
    td_dtype dts[3];
    int nd = matmul_dtypes(&s->devices[device], dts);
    for (int i = 0; i < nd; i++)
        for (int64_t n = bench_matmul_n(s) / 4; n < bench_matmul_n(s); n *= 2)
            time_matmul(s, device, "roof-gemm", n, dts[i]);
    return st;
}

/* add, softmax, layernorm, sum: m f32 elements in k rotated sets. */
static td_status run_vector(bench_session *s, int device, const char *workload, int n_inputs, double bytes_per_elem,
                            bench_fn fn) {
    int64_t m = bench_vector_elems(s, device);
    bool rows = fn == fn_softmax || fn == fn_layernorm;
    int64_t shape[2] = {rows ? m / ROW_LEN : m, ROW_LEN};
    int ndim = rows ? 2 : 1;
    td_device dev = s->devices[device].dev;
    op_arg a = {.k = bench_rotation(bytes_per_elem * (double)m)};
    td_scope_begin();
    td_status st = fill_sets(a.x, a.k, ndim, shape, TD_F32, dev, 1);
    if (st == TD_OK && n_inputs == 2) st = fill_sets(a.y, a.k, ndim, shape, TD_F32, dev, 2);
    if (st == TD_OK && fn == fn_layernorm) {
        int64_t len = ROW_LEN;
        a.w = td_ones(1, &len, TD_F32, dev);
        a.b = td_zeros(1, &len, TD_F32, dev);
        if (!a.w || !a.b) st = td_last_status();
    }
    char size[80];
    if (rows)
        snprintf(size, sizeof size, "%lldx%d", (long long)shape[0], ROW_LEN);
    else
        snprintf(size, sizeof size, "%lld", (long long)m);
    if (st != TD_OK)
        bench_fail(s, device, workload, "float32", NULL);
    else if (!bench_time(s, device, workload, "float32", size, BENCH_UNIT_GBPS, bytes_per_elem * (double)m, a.k, fn,
                         &a))
        st = TD_ERR_DEVICE;
    td_scope_end();
    return st;
}

static td_status run_add(bench_session *s, int d) { return run_vector(s, d, "W4-add", 2, 12, fn_add); }
static td_status run_softmax(bench_session *s, int d) { return run_vector(s, d, "W4-softmax", 1, 8, fn_softmax); }
static td_status run_layernorm(bench_session *s, int d) { return run_vector(s, d, "W4-layernorm", 1, 8, fn_layernorm); }
static td_status run_sum(bench_session *s, int d) { return run_vector(s, d, "W4-sum", 1, 4, fn_sum); }

static td_status run_adam(bench_session *s, int device) {
    int64_t n = s->opt.quick ? (int64_t)1 << 20 : ADAM_PARAMS;
    td_device dev = s->devices[device].dev;
    op_arg a = {.k = bench_rotation(28.0 * (double)n)};
    td_scope_begin();
    td_status st = fill_sets(a.x, a.k, 1, &n, TD_F32, dev, 1);
    if (st == TD_OK) st = fill_sets(a.y, a.k, 1, &n, TD_F32, dev, 2);
    for (int i = 0; i < a.k && st == TD_OK; i++) {
        a.m[i] = td_zeros(1, &n, TD_F32, dev);
        a.v[i] = td_zeros(1, &n, TD_F32, dev);
        if (!a.m[i] || !a.v[i]) st = td_last_status();
    }
    char size[80];
    snprintf(size, sizeof size, "%lld", (long long)n);
    if (st != TD_OK)
        bench_fail(s, device, "W4-adam", "float32", NULL);
    else if (!bench_time(s, device, "W4-adam", "float32", size, BENCH_UNIT_GBPS, 28.0 * (double)n, a.k, fn_adam, &a))
        st = TD_ERR_DEVICE;
    td_scope_end();
    return st;
}

static td_status fn_colsum(void *p, int r) {
    int dim0 = 0;
    return ok_if(td_sum(((op_arg *)p)->x[r], 1, &dim0, false));
}

/* Column sums of a [rows, 768] f32 and bf16 tensor (W3's bias and layer-norm gradients). */
static td_status run_colsum(bench_session *s, int device) {
    int64_t shape[2] = {s->opt.quick ? 1024 : 16384, 768};
    td_device dev = s->devices[device].dev;
    const td_dtype dts[2] = {TD_F32, TD_BF16};
    td_status worst = TD_OK;
    for (int i = 0; i < 2; i++) {
        double bytes = (double)((shape[0] + 1) * shape[1]) * (double)td_dtype_size(dts[i]);
        op_arg a = {.k = bench_rotation(bytes)};
        td_scope_begin();
        td_status st = fill_sets(a.x, a.k, 2, shape, dts[i], dev, 1);
        char size[80];
        snprintf(size, sizeof size, "%lldx%lld dim 0", (long long)shape[0], (long long)shape[1]);
        if (st != TD_OK)
            bench_fail(s, device, "W4-colsum", td_dtype_name(dts[i]), NULL);
        else if (!bench_time(s, device, "W4-colsum", td_dtype_name(dts[i]), size, BENCH_UNIT_GBPS, bytes, a.k,
                             fn_colsum, &a))
            st = TD_ERR_DEVICE;
        td_scope_end();
        if (st != TD_OK) worst = st;
    }
    return worst;
}

static td_status fn_dispatch(void *p, int r) {
    op_arg *a = p;
    (void)r;
    for (int i = 0; i < DISPATCH_OPS; i++) {
        td_scope_begin();
        td_tensor *c = td_add(a->x[0], a->y[0]);
        td_scope_end();
        if (!c) return td_last_status();
    }
    return TD_OK;
}

td_status bench_run_dispatch(bench_session *s, int device) {
    td_device dev = s->devices[device].dev;
    int64_t one = 1;
    op_arg a = {.k = 1};
    td_scope_begin();
    td_status st = fill_sets(a.x, 1, 1, &one, TD_F32, dev, 1);
    if (st == TD_OK) st = fill_sets(a.y, 1, 1, &one, TD_F32, dev, 2);
    /* the host's view of dispatch: enqueue time plus the one wait at the end */
    bench_sampling how = {.warmup = 1, .max_samples = s->opt.max_reps, .budget_s = s->opt.budget_s, .host_clock = true};
    char size[80];
    snprintf(size, sizeof size, "%dx[1]", DISPATCH_OPS);
    if (st != TD_OK)
        bench_fail(s, device, "dispatch", "float32", NULL);
    else if (!bench_time_ext(s, device, "dispatch", "float32", size, BENCH_UNIT_OPS, DISPATCH_OPS, 1, fn_dispatch, &a,
                             &how))
        st = TD_ERR_DEVICE;
    td_scope_end();
    return st;
}

/* ---- W7: a U-Net-style block, forward + backward (issue 25's ConvTranspose2d / depthwise row) ----
** x [N, 64, S, S] (N 16, S 128; --quick 2, 32), f32, parameters with gradients, x without:
**   h1 = relu(conv3x3(x, 64 -> 64, pad 1))            h2 = relu(depthwise3x3(h1, groups 64, pad 1))
**   h3 = relu(conv3x3(h2, 64 -> 128, stride 2, pad 1)) [N, 128, S/2, S/2]
**   y  = conv_transpose2d(h3, 128 -> 64, k 2, stride 2) + h1;  backward of sum(y)
** W7-depthwise and W7-convtranspose time the depthwise conv (on x) and the transposed conv (on h3's shape) alone,
** forward + backward with the input's gradient too. The parameters' .grad are dropped before each step (torch's
** zero_grad(set_to_none)). bench/torch_workloads.py --only w7 is the twin. Rate: images/s. */
typedef struct unet_arg {
    int which; /* 0 block, 1 depthwise, 2 conv_transpose */
    td_tensor *x, *w[4], *b[4];
} unet_arg;

int64_t bench_unet_batch(const bench_session *s) { return s->opt.quick ? 2 : 16; }
int64_t bench_unet_side(const bench_session *s) { return s->opt.quick ? 32 : 128; }

static td_status fn_unet(void *p, int r) {
    unet_arg *a = p;
    (void)r;
    for (int i = 0; i < 4; i++) td_zero_grad(a->w[i]), td_zero_grad(a->b[i]);
    const int one[2] = {1, 1}, two[2] = {2, 2}, zero[2] = {0, 0};
    td_tensor *y;
    if (a->which == 1) {
        y = td_conv2d(a->x, a->w[1], a->b[1], one, one, one, (int)td_size(a->x, 1));
    } else if (a->which == 2) {
        y = td_conv_transpose2d(a->x, a->w[3], a->b[3], two, zero, zero, 1, one);
    } else {
        td_tensor *h1 = td_relu(td_conv2d(a->x, a->w[0], a->b[0], one, one, one, 1));
        td_tensor *h2 = td_relu(td_conv2d(h1, a->w[1], a->b[1], one, one, one, (int)td_size(a->x, 1)));
        td_tensor *h3 = td_relu(td_conv2d(h2, a->w[2], a->b[2], two, one, one, 1));
        y = td_add(td_conv_transpose2d(h3, a->w[3], a->b[3], two, zero, zero, 1, one), h1);
    }
    return y ? td_backward(td_sum(y, 0, NULL, false), NULL, false) : td_last_status();
}

static td_status run_unet_row(bench_session *s, int device, int which) {
    static const char *const names[3] = {"W7-unet", "W7-depthwise", "W7-convtranspose"};
    td_device dev = s->devices[device].dev;
    int64_t N = bench_unet_batch(s), S = bench_unet_side(s), C = 64;
    /* conv1 [64,64,3,3], depthwise [64,1,3,3], down [128,64,3,3], up (transposed) [128,64,2,2] */
    const int64_t wshape[4][4] = {{C, C, 3, 3}, {C, 1, 3, 3}, {2 * C, C, 3, 3}, {2 * C, C, 2, 2}};
    const int64_t bshape[4] = {C, C, 2 * C, C};
    unet_arg a = {.which = which};
    td_scope_begin();
    td_status st = TD_OK;
    for (int i = 0; i < 4 && st == TD_OK; i++) {
        double fan_in = (double)(wshape[i][1] * wshape[i][2] * wshape[i][3]);
        a.w[i] = td_mul_scalar(td_randn(4, wshape[i], 10 + (uint64_t)i, 0, TD_F32, dev), 1.0 / fan_in);
        a.b[i] = td_zeros(1, &bshape[i], TD_F32, dev);
        if (!a.w[i] || !a.b[i] || td_set_requires_grad(a.w[i], true) != TD_OK ||
            td_set_requires_grad(a.b[i], true) != TD_OK)
            st = td_last_status();
    }
    int64_t xshape[4] = {N, which == 2 ? 2 * C : C, which == 2 ? S / 2 : S, which == 2 ? S / 2 : S};
    if (st == TD_OK && !(a.x = td_randn(4, xshape, 1, 0, TD_F32, dev))) st = td_last_status();
    if (st == TD_OK && which) st = td_set_requires_grad(a.x, true);
    char size[80];
    snprintf(size, sizeof size, "%lldx%lldx%lldx%lld fwd+bwd", (long long)xshape[0], (long long)xshape[1],
             (long long)xshape[2], (long long)xshape[3]);
    if (st != TD_OK)
        bench_fail(s, device, names[which], "float32", NULL);
    else if (!bench_time(s, device, names[which], "float32", size, BENCH_UNIT_SAMPLES, (double)N, 1, fn_unet, &a))
        st = TD_ERR_DEVICE;
    td_scope_end();
    return st;
}

static td_status run_unet(bench_session *s, int d) { return run_unet_row(s, d, 0); }
static td_status run_unet_depthwise(bench_session *s, int d) { return run_unet_row(s, d, 1); }
static td_status run_unet_convtranspose(bench_session *s, int d) { return run_unet_row(s, d, 2); }

/* The workloads, in run order: W1-W3 from bench_train.c (W2-captured after W2, W3-captured after W3,
** W5-captured after W5),
** the W4 ops, then dispatch. */
const bench_workload bench_workloads[] = {
    {"W1-mlp", "MLP training step, batch 128, Adam: ms/step, s/epoch (468 steps), samples/s", bench_run_mlp,
     "best_epoch_s", 128, true, "w1"},
    {"W2-cnn", "CNN training step, batch 128, Adam: ms/step, s/epoch (468 steps), samples/s", bench_run_cnn,
     "best_epoch_s", 128, true, "w2"},
    {"W2-captured", "W2's step captured once and replayed (CUDA graph, Vulkan command buffer): ms/step, speedup",
     bench_run_captured, NULL, 0, false, NULL},
    {"W2-cold-start", "a fresh process of two W2 steps, start to exit (Vulkan), empty and warm pipeline cache: ms",
     bench_run_cold_start, NULL, 0, false, NULL},
    {"W3-gpt-mini", "GPT-mini training step, 64x256 tokens (8x256 on CPU), AdamW: ms/step, tokens/s", bench_run_gpt,
     "tokens_per_s", 1, false, "w3"},
    {"W3-captured", "W3's step captured once and replayed (under --amp, the autocast step): ms/step, speedup",
     bench_run_gpt_captured, NULL, 0, false, NULL},
    {"W5-gpt2-small", "GPT-2-small shape (byte vocab), training step, 16x1024 tokens, AdamW, GPUs only: ms/step",
     bench_run_gpt2, "tokens_per_s", 1, false, "w5"},
    {"W5-captured", "W5's step captured once and replayed (under --amp, the autocast step): ms/step, speedup",
     bench_run_gpt2_captured, NULL, 0, false, NULL},
    {"W6-lstm", "LSTM language model training step (2 layers, hidden 512), 32x256 tokens, Adam: ms/step, tokens/s",
     bench_run_lstm, "tokens_per_s", 1, false, "w6"},
    {"W4-matmul", "matmul n x n x n, f32 (+bf16/fp16 where native), GFLOP/s = 2n^3/t", run_matmul, "tflops", 1e3, false,
     "ops"},
    {"W4-add", "add of two f32 vectors, GB/s over 12 bytes/element", run_add, "gbps", 1, false, "ops"},
    {"W4-softmax", "softmax over rows of 4096, GB/s over 8 bytes/element", run_softmax, "gbps", 1, false, "ops"},
    {"W4-layernorm", "layer_norm over rows of 4096 with weight and bias, 8 bytes/element", run_layernorm, "gbps", 1,
     false, "ops"},
    {"W4-sum", "sum of an f32 vector, GB/s over 4 bytes/element", run_sum, "gbps", 1, false, "ops"},
    {"W4-adam", "fused Adam step over 10M f32 params, 28 bytes/param", run_adam, NULL, 0, false, "ops"},
    {"W4-colsum", "sum over dim 0 of [16384,768] f32 and bf16 (a bias gradient), GB/s over bytes read + written",
     run_colsum, NULL, 0, false, "ops"},
    {"W7-unet",
     "U-Net-style block (conv3x3, depthwise 3x3, strided conv, ConvTranspose2d 2x2/2, skip), f32 fwd+bwd: "
     "images/s",
     run_unet, "samples_per_s", 1, false, "w7"},
    {"W7-depthwise", "depthwise conv2d 3x3 (groups = 64 channels) of the W7 block alone, f32 fwd+bwd: images/s",
     run_unet_depthwise, "samples_per_s", 1, false, "w7"},
    {"W7-convtranspose", "ConvTranspose2d 128 -> 64, 2x2 stride 2, of the W7 block alone, f32 fwd+bwd: images/s",
     run_unet_convtranspose, "samples_per_s", 1, false, "w7"},
    {"dispatch", "eager dispatch: 10k adds of [1] f32 tensors then one synchronize, us/op on the host clock",
     bench_run_dispatch, "ops_per_s", 1, false, "dispatch"},
};
const int bench_n_workloads = (int)(sizeof bench_workloads / sizeof bench_workloads[0]);
