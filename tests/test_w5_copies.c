/*
** The `copy` ops of a GPT-2-shaped (W5) training step under bf16 autocast, and the leaf gradients that the engine
** hands over without one (src/autograd/engine.c's sole_gradient):
** leaf_grad_owned: a layer norm's weight, bias and input gradients become their leaves' .grad with no `copy` op,
**   equal to td_grad's; a gradient the caller passed in (z = a + b, backward with dz) is copied into two .grads
**   of their own: writing dz or a.grad afterwards changes neither other tensor.
** leaf_sums_released: a chain of Linears under bf16 autocast: when the first layer's weight gets its .grad (the
**   last leaf finished), the bf16 weight gradients of the layers finished before it are freed already: the memory
**   held then grows by each layer's f32 .grad, not by its bf16 sum too.
** wgrad_in_f32: a Linear and the fused MLP under bf16 autocast: the weight and bias gradients come out of
**   LINEAR_WGRAD in f32 (autograd's td__grad_dtype: the f32 parameters behind autocast's casts), so the backward
**   issues no `copy` for them; each .grad is the f32 product of the bf16 operands, not that product rounded to bf16.
** w5_step_cpu: a small W5 (tied lm-head, 2 layers, head dim 64 as W5) step of workload_train_step under bf16 autocast
**   on the CPU: the profiled second step issues exactly the copies listed at W5_FWD and W5_BWD (no clone of an f32
**   gradient), and the backward the adds at W5_BWD_ADDS (no residual-stream sum).
** w5_step_cuda: the same step on cuda:0 (cuDNN attention reads the strided heads): no more copies than the CPU's,
**   the same adds; it prints the count expected without the CPU-only attention copies.
** w5_grads_{cpu,cuda}: the same model in fp32: td_grad's parameter gradients (the residual sums taken into ln1's
**   backward, W5_BWD_ADDS adds) equal create_graph's composed ones within fp32 rounding.
*/
#include <string.h>

#include "test_util.h"
#include "trident/amp.h"
#include "trident/autograd.h"
#include "trident/profile.h"
#include "workloads/workloads.h"

#define TESTS(X)                                                                                                       \
    X(leaf_grad_owned)                                                                                                 \
    X(leaf_sums_released) X(wgrad_in_f32) X(w5_step_cpu) X(w5_step_cuda) X(w5_grads_cpu) X(w5_grads_cuda)

/* op's ops recorded since td_profile_begin: *fwd in the forward phase (which counts the engine's leaf casts, issued
** outside any node), *bwd by backward nodes (the engine's sums of two gradients among them) */
static void count_ops(const char *op, int64_t *fwd, int64_t *bwd) {
    td_profile_row rows[512];
    int n = td_profile_rows(rows, 512);
    ASSERT(n <= 512);
    *fwd = *bwd = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].op, op)) *(rows[i].backward ? bwd : fwd) += rows[i].count;
}

static void count_copies(int64_t *fwd, int64_t *bwd) { count_ops("copy", fwd, bwd); }

static td_tensor *leaf(int ndim, const int64_t *shape) {
    td_tensor *t = test_uniform_tensor(ndim, shape, -1, 1, TD_F32, TD_CPU);
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

TEST(leaf_grad_owned) {
    test_seed();
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(TD_CPU, 1, 1));
    int64_t sx[2] = {5, 8}, sw[1] = {8};
    td_tensor *x = leaf(2, sx), *w = leaf(1, sw), *b = leaf(1, sw);
    td_tensor *c = test_uniform_tensor(2, sx, -1, 1, TD_F32, TD_CPU);
    td_tensor *ref[3], *in[3] = {x, w, b};
    td_tensor *loss = ASSERT_TENSOR(td_sum(td_mul(td_layer_norm(x, 1, w, b, 1e-5), c), 0, NULL, false));
    ASSERT_OK(td_grad(1, &loss, NULL, 3, in, ref, true, false, false));
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_backward(loss, NULL, false));
    ASSERT_OK(td_profile_end(NULL));
    int64_t fwd, bwd;
    count_copies(&fwd, &bwd);
    fprintf(stderr, "    layer norm backward: %lld copy (leaves), %lld copy (nodes)\n", (long long)fwd, (long long)bwd);
    ASSERT_EQ_INT(fwd, 0);
    for (int i = 0; i < 3; i++) ASSERT(test_rel_err(td_grad_of(in[i]), ref[i]) == 0);

    /* dz reaches a and b as it is: each .grad is a copy of its own */
    td_tensor *a = leaf(2, sx), *a2 = leaf(2, sx);
    td_tensor *dz = test_uniform_tensor(2, sx, -1, 1, TD_F32, TD_CPU), *dz0 = ASSERT_TENSOR(td_clone(dz));
    ASSERT_OK(td_backward(ASSERT_TENSOR(td_add(a, a2)), dz, false));
    td_tensor *ga = td_grad_of(a), *gb = td_grad_of(a2);
    ASSERT(ga && gb && ga != dz && gb != dz && ga != gb);
    ASSERT_OK(td_copy_(dz, td_zeros_like(dz)));
    ASSERT_OK(td_copy_(ga, td_full_like(ga, 3.0)));
    ASSERT(test_rel_err(gb, dz0) == 0);
    ASSERT(test_rel_err(td_grad_of(a2), dz0) == 0);
    ASSERT(test_rel_err(ga, td_full_like(ga, 3.0)) == 0);
    td_scope_end();
}

static td_status note_allocated(td_tensor *leaf, void *user) {
    (void)leaf;
    td_memory_stats ms;
    td_status st = td_memory_stats_get(TD_CPU, false, &ms);
    *(uint64_t *)user = ms.allocated;
    return st;
}

/* Bytes allocated when w[0] (the last leaf to finish) got its .grad, over those before the backward, for a chain of
** layers Linears 256 -> 256 without bias under bf16 autocast. */
static int64_t held_at_first_weight(int layers) {
    enum { F = 256 };
    int64_t sw[2] = {F, F}, sx[2] = {32, F};
    td_scope_begin();
    td_tensor *w[8], *x = test_uniform_tensor(2, sx, -1, 1, TD_F32, TD_CPU), *h = x;
    for (int i = 0; i < layers; i++) w[i] = leaf(2, sw);
    uint64_t at_hook = 0;
    ASSERT_OK(td_register_post_accumulate_hook(w[0], note_allocated, &at_hook));
    ASSERT_OK(td_autocast_begin(TD_DEVICE_CPU, TD_BF16));
    for (int i = 0; i < layers; i++) h = ASSERT_TENSOR(td_linear(h, w[i], NULL));
    ASSERT_OK(td_autocast_end());
    td_tensor *loss = ASSERT_TENSOR(td_sum(td_cast(h, TD_F32), 0, NULL, false));
    td_memory_stats before;
    ASSERT_OK(td_memory_stats_get(TD_CPU, false, &before));
    ASSERT_OK(td_backward(loss, NULL, false));
    ASSERT(at_hook > 0);
    td_scope_end();
    return (int64_t)at_hook - (int64_t)before.allocated;
}

TEST(leaf_sums_released) {
    test_seed();
    int64_t a = held_at_first_weight(2), b = held_at_first_weight(6);
    int64_t f32 = 256 * 256 * 4, bf16 = 256 * 256 * 2, per = (b - a) / 4;
    fprintf(stderr, "    held at the first weight's .grad: %lld bytes a layer (f32 .grad %lld, bf16 sum %lld)\n",
            (long long)per, (long long)f32, (long long)bf16);
    /* a layer adds its f32 .grad (its saved bf16 weight cast is the parameter's shadow, src/core/shadow.c, which
    ** outlives the backward; only a small bf16 input is freed): f32 held; a bf16 sum kept until the end of the
    ** backward would add bf16 more */
    if (per > f32 + bf16 / 2)
        TEST_FAIL_("each finished layer still holds its bf16 gradient sum (%lld bytes)", (long long)per);
}

/* |a - ref| / (1 + |ref|) over a's elements against ref, and the same for ref rounded to bf16 (*rounded) */
static double err_and_rounded(td_tensor *a, td_tensor *ref, double *rounded) {
    *rounded = test_max_rel(td_cast(td_cast(ref, TD_BF16), TD_F32), ref);
    return test_max_rel(a, ref);
}

TEST(wgrad_in_f32) {
    test_seed();
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(TD_CPU, 1, 1));
    enum { M = 64, K = 48, H = 96, N = 40 };
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){M, K}, -1, 1, TD_F32, TD_CPU);
    td_tensor *w = leaf(2, (int64_t[]){N, K}), *b = leaf(1, (int64_t[]){N});
    td_tensor *w1 = leaf(2, (int64_t[]){H, K}), *b1 = leaf(1, (int64_t[]){H}), *w2 = leaf(2, (int64_t[]){N, H});
    td_tensor *b2 = leaf(1, (int64_t[]){N}), *r = test_uniform_tensor(2, (int64_t[]){M, N}, -1, 1, TD_F32, TD_CPU);
    td_tensor *c = test_uniform_tensor(2, (int64_t[]){M, N}, -1, 1, TD_F32, TD_CPU);
    ASSERT_OK(td_autocast_begin(TD_DEVICE_CPU, TD_BF16));
    td_tensor *y = ASSERT_TENSOR(td_linear(x, w, b)), *z = ASSERT_TENSOR(td_mlp_gelu(x, w1, b1, w2, b2, r, true));
    ASSERT_OK(td_autocast_end());
    td_tensor *loss = ASSERT_TENSOR(td_sum(td_mul(td_add(td_cast(y, TD_F32), td_cast(z, TD_F32)), c), 0, NULL, false));
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_backward(loss, NULL, false));
    ASSERT_OK(td_profile_end(NULL));
    int64_t fwd, bwd;
    count_copies(&fwd, &bwd);
    fprintf(stderr, "    linear + mlp under bf16 autocast, backward: %lld copy (leaves), %lld copy (nodes)\n",
            (long long)fwd, (long long)bwd);
    ASSERT_EQ_INT(fwd, 0); /* the 7 parameters' gradients: none cast (7 before: each bf16 dW, db cast to f32) */
    ASSERT_EQ_INT(bwd, 2); /* f32 dy cast to bf16: y's (its cast's backward) and z's (inside the MLP node) */
    td_tensor *ps[5] = {w, b, w1, b1, w2};
    for (int i = 0; i < 5; i++) ASSERT(td_tensor_dtype(td_grad_of(ps[i])) == TD_F32);
    /* Linear: dw = dy^T x and db = sum dy in f32 of the bf16 operands (dy = c rounded to bf16) */
    td_tensor *dy = td_cast(td_cast(c, TD_BF16), TD_F32), *xb = td_cast(td_cast(x, TD_BF16), TD_F32);
    int rows = 0;
    double rounded, e = err_and_rounded(td_grad_of(w), td_matmul(td_transpose(dy, 0, 1), xb), &rounded);
    double eb = test_max_rel(td_grad_of(b), td_sum(dy, 1, &rows, false));
    fprintf(stderr, "    linear dw %.3g (bf16-rounded: %.3g), db %.3g\n", e, rounded, eb);
    ASSERT(e <= 1e-5 && eb <= 1e-5 && rounded >= 1e-4);
    td_scope_end();
}

/* The step's copies on the CPU (traced with gdb on td__dispatch), per W5 layer:
**   forward phase (4): 3 q, k, v made contiguous and 1 attention output reshaped (the CPU kernels read dense
**     operands; cuDNN reads the strided views). No parameter is cast: the 7 weights and biases a layer read in bf16
**     (qkv w, b; proj w, b; fc w, b; out w) and the tied head's tok.weight come from their shadows, which the
**     first step's ADAM_STEP wrote (src/core/shadow.c; 7 casts a layer and 1 more before). No gradient is cast to
**     its f32 .grad: the layer norms', tok's and pos's are f32, and the 8 weight and bias gradients of the Linears
**     and the MLP (the same and out's bias) come out of LINEAR_WGRAD in f32 (td__grad_dtype; 8 more casts a layer
**     before).
**   backward nodes (4): CPU-only (attention's dout made contiguous, dq, dk, dv reshaped). The MLP node's f32
**     incoming gradient reaches it in bf16 too, written by the next ln1's (or the final ln's) LAYER_NORM_BACKWARD
**     (td__grad_twin_put; one cast a layer before). The head's gradient of tok.weight is f32 too, summed with the
**     embedding's without a cast (1 more before). proj's bf16 gradient (the residual's f32 one rounded) comes from
**     ln2's LAYER_NORM_BACKWARD op itself (src/autograd/formulas_nn.c, td__bw_add_layer_norm), not a cast. */
#define W5_LAYERS 2
#define W5_FWD(l) (4 * (l))
#define W5_BWD(l) (4 * (l))

/* The step's `add` ops issued by backward nodes: the tied tok.weight's two gradients (the head's dW and the
** embedding's scatter-add, EMBEDDING_BACKWARD, which has no input to add into) summed by the engine. Each layer's
** residual sum (x's gradient from ln1 and from add_layer_norm) is none: ln1's LAYER_NORM_BACKWARD takes the
** add_layer_norm's gradient of x as its ds (td__take_input_grad; one add a layer before). */
#define W5_BWD_ADDS 1

/* One profiled W5-shaped bf16 step on dev (after an unprofiled one): its copies, and *adds, its backward's adds. */
static void w5_step(td_device dev, int64_t *fwd, int64_t *bwd, int64_t *adds) {
    workload_gpt_config cfg = {
        .vocab = 256, .d_model = 128, .heads = 2, .layers = W5_LAYERS, .context = 64, .gpt2 = true};
    int64_t sh[2] = {2, 64};
    double ids[128], next[128];
    test_rng_state = 3;
    for (int i = 0; i < 128; i++) ids[i] = (double)test_int(256), next[i] = (double)test_int(256);
    td_manual_seed(0);
    workload w;
    ASSERT_OK(workload_init(&w, WORKLOAD_GPT, &cfg, dev, NULL, 0, false));
    ASSERT_OK(workload_amp_set(&w, TD_BF16));
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_to(test_tensor_f64(ids, 2, sh, TD_I64), dev));
    td_tensor *y = ASSERT_TENSOR(td_to(test_tensor_f64(next, 2, sh, TD_I64), dev));
    double l0, l1;
    ASSERT_OK(workload_train_step(&w, x, y, &l0));
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(workload_train_step(&w, x, y, NULL)); /* no loss read: td_item's cast would count */
    ASSERT_OK(td_synchronize(dev));
    ASSERT_OK(td_profile_end(NULL));
    count_copies(fwd, bwd);
    int64_t adds_fwd;
    count_ops("add", &adds_fwd, adds);
    ASSERT_OK(workload_train_step(&w, x, y, &l1));
    fprintf(stderr,
            "    W5 %d layers, bf16 autocast on %s: %lld copy (forward and leaves), %lld copy (backward), %lld add "
            "(backward); loss %.4f -> %.4f\n",
            W5_LAYERS, dev.type == TD_DEVICE_CPU ? "cpu" : "cuda:0", (long long)*fwd, (long long)*bwd, (long long)*adds,
            l0, l1);
    ASSERT(l1 < l0); /* the step trained */
    td_scope_end();
    workload_free(&w);
}

TEST(w5_step_cpu) {
    setenv("TRIDENT_ATTENTION", "fused", 1); /* CUDA's attention op (the CPU default is the composed one) */
    int64_t fwd, bwd, adds;
    w5_step(TD_CPU, &fwd, &bwd, &adds);
    ASSERT_EQ_INT(fwd, W5_FWD(W5_LAYERS));
    ASSERT_EQ_INT(bwd, W5_BWD(W5_LAYERS));
    ASSERT_EQ_INT(adds, W5_BWD_ADDS);
}

TEST(w5_step_cuda) {
    test_need_cudnn();
    int64_t fwd, bwd, adds;
    w5_step((td_device){TD_DEVICE_CUDA, 0}, &fwd, &bwd, &adds);
    ASSERT_EQ_INT(adds, W5_BWD_ADDS);
    /* cuDNN reads the strided heads and writes dq, dk, dv packed: the CPU's 4 + 4 attention copies a layer go */
    fprintf(stderr, "    expected with cuDNN: %d and %d\n", W5_FWD(W5_LAYERS) - 4 * W5_LAYERS,
            W5_BWD(W5_LAYERS) - 4 * W5_LAYERS);
    if (fwd > W5_FWD(W5_LAYERS) || bwd > W5_BWD(W5_LAYERS))
        TEST_FAIL_("cuda:0 issued more copies than the CPU (%lld, %lld)", (long long)fwd, (long long)bwd);
}

/* A small W5's fp32 parameter gradients of its summed loss (td_grad: each of size about 1), each layer's residual sum
** taken into ln1's LAYER_NORM_BACKWARD, against create_graph's (the composed formulas, which take nothing): equal
** within fp32 rounding; the plain backward issues the adds at W5_BWD_ADDS. */
static void w5_grads(td_device dev) {
    workload_gpt_config cfg = {
        .vocab = 256, .d_model = 128, .heads = 2, .layers = W5_LAYERS, .context = 64, .gpt2 = true};
    int64_t sh[2] = {2, 64}, flat = 128, rc[2] = {128, 256};
    double ids[128], next[128];
    test_rng_state = 5;
    for (int i = 0; i < 128; i++) ids[i] = (double)test_int(256), next[i] = (double)test_int(256);
    td_manual_seed(0);
    workload w;
    ASSERT_OK(workload_init(&w, WORKLOAD_GPT, &cfg, dev, NULL, 0, false));
    td_scope_begin();
    td_tensor *x = ASSERT_TENSOR(td_to(test_tensor_f64(ids, 2, sh, TD_I64), dev));
    td_tensor *y = ASSERT_TENSOR(td_to(test_tensor_f64(next, 1, &flat, TD_I64), dev));
    td_tensor *logits = ASSERT_TENSOR(td_module_forward(w.model, x));
    td_tensor *loss = ASSERT_TENSOR(td_cross_entropy_loss(td_reshape(logits, 2, rc), y, NULL, -100, 0, TD_REDUCE_SUM));
    enum { CAP = 64 };
    td_tensor *ps[CAP], *g[2][CAP];
    int n = td_module_parameters(w.model, ps, CAP);
    ASSERT(n > 0 && n <= CAP);
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_grad(1, &loss, NULL, n, ps, g[0], true, false, false));
    ASSERT_OK(td_synchronize(dev));
    ASSERT_OK(td_profile_end(NULL));
    int64_t adds_fwd, adds;
    count_ops("add", &adds_fwd, &adds);
    ASSERT_OK(td_grad(1, &loss, NULL, n, ps, g[1], false, true, false)); /* composed */
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, test_max_rel(g[0][i], td_detach(g[1][i])));
    fprintf(stderr, "    W5 %d layers, fp32 on %s: %lld add (backward); %d gradients, worst against composed %.3g\n",
            W5_LAYERS, dev.type == TD_DEVICE_CPU ? "cpu" : "cuda:0", (long long)adds, n, worst);
    ASSERT_EQ_INT(adds, W5_BWD_ADDS);
    ASSERT(worst <= 1e-4);
    td_scope_end();
    workload_free(&w);
}

TEST(w5_grads_cpu) { w5_grads(TD_CPU); }

TEST(w5_grads_cuda) { w5_grads(test_device_or_skip("cuda:0")); }

TEST_MAIN(TESTS)
