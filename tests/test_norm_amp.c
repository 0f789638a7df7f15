/*
** Layer norm's narrow operands (src/core/op_norm.c, the op table's 'h'): td_layer_norm_to and
** td_add_layer_norm_to writing an f16/bf16 y from f32 math, ADD_LAYER_NORM reading a bf16 residual beside f32 x,
** and LAYER_NORM_BACKWARD reading a bf16 dy (and writing add_layer_norm's bf16 residual gradient beside the f32
** one), each against the composed path (f32 op, td_cast around it) it
** replaces: the same bits, forward and backward, with fewer `copy` ops.
** ln_fwd_*, add_ln_*: outputs of one op against td_cast(td_layer_norm(..)) / td_add_layer_norm's, and no copy.
** ln_bwd_*, add_ln_bwd_*: the gradients of every input through the narrow op against the composed graph's.
** w3_step_*: a small GPT's bf16-autocast forward and backward (the workload's block, src/workloads/workloads.c)
**   against TRIDENT_LN_AMP=composed: the same loss bit for bit, the same parameter gradients (bit for bit on the
**   CPU), fewer `copy` ops (the MLP node's dy cast among them: ln1's bf16 dx twin, src/autograd/engine.c).
** add_ln_bwd_vulkan: the same bits where the core casts around Vulkan's f32 kernels.
** The *_cuda and *_vulkan cases skip without the device.
*/
#include <math.h>
#include <string.h>

#include "test_util.h"
#include "trident/amp.h"
#include "trident/profile.h"
#include "workloads/workloads.h"

#define TESTS(X)                                                                                                       \
    X(ln_fwd_cpu)                                                                                                      \
    X(add_ln_cpu)                                                                                                      \
    X(ln_bwd_cpu)                                                                                                      \
    X(add_ln_bwd_cpu)                                                                                                  \
    X(w3_step_cpu)                                                                                                     \
    X(ln_fwd_cuda)                                                                                                     \
    X(add_ln_cuda)                                                                                                     \
    X(ln_bwd_cuda)                                                                                                     \
    X(add_ln_bwd_cuda)                                                                                                 \
    X(w3_step_cuda)                                                                                                    \
    X(add_ln_bwd_vulkan)

static const td_device CUDA0 = {TD_DEVICE_CUDA, 0}, VULKAN0 = {TD_DEVICE_VULKAN, 0};
static const double EPS = 1e-5;

static td_device need(td_device dev) {
    if (dev.type != TD_DEVICE_CPU && !td_device_available(dev)) TEST_SKIP("no such device");
    return dev;
}

/* ops named op recorded since td_profile_begin */
static int64_t count_ops(const char *op) {
    td_profile_row rows[512];
    int n = td_profile_rows(rows, 512);
    ASSERT(n <= 512);
    int64_t c = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].op, op)) c += rows[i].count;
    return c;
}

/* a and b hold the same dtype and the same values, bit for bit (as doubles: every f32/f16/bf16 is one) */
static void same_bits(td_tensor *a, td_tensor *b, const char *what) {
    ASSERT(a && b);
    ASSERT_EQ_INT(td_tensor_dtype(a), td_tensor_dtype(b));
    ASSERT_EQ_INT(td_numel(a), td_numel(b));
    double *x = test_host(a), *y = test_host(b);
    for (int64_t i = 0; i < td_numel(a); i++)
        if (memcmp(&x[i], &y[i], sizeof(double)))
            TEST_FAIL_("%s: element %lld is %.9g, the composed path's %.9g", what, (long long)i, x[i], y[i]);
    free(x), free(y);
}

static td_tensor *uniform(int ndim, const int64_t *shape, td_dtype dt, td_device dev, bool grad) {
    td_tensor *t = test_uniform_tensor(ndim, shape, -2, 2, dt, dev);
    if (grad) ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* rows of D: 37 (the CUDA kernels' scalar loads), 768 (GPT-2's, vector loads), 3000 (a block a row) */
static const int64_t DIMS[3] = {37, 768, 3000};

static void ln_fwd(td_device dev) {
    test_seed();
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
    for (int di = 0; di < 3; di++) {
        int64_t sh[2] = {7, DIMS[di]};
        td_tensor *x = uniform(2, sh, TD_F32, dev, false), *w = uniform(1, sh + 1, TD_F32, dev, false);
        td_tensor *b = uniform(1, sh + 1, TD_F32, dev, false);
        td_dtype dts[2] = {TD_BF16, TD_F16};
        for (int k = 0; k < 4; k++) {
            td_tensor *wk = k & 1 ? NULL : w, *bk = k & 2 ? NULL : b;
            ASSERT_OK(td_profile_begin());
            td_tensor *y = ASSERT_TENSOR(td_layer_norm_to(x, 1, wk, bk, EPS, dts[k / 2]));
            ASSERT_OK(td_profile_end(NULL));
            ASSERT_EQ_INT(count_ops("copy"), 0);
            ASSERT_EQ_INT(count_ops("layer_norm"), 1);
            same_bits(y, td_cast(td_layer_norm(x, 1, wk, bk, EPS), dts[k / 2]), "layer_norm y");
        }
        /* under autocast: x bf16 is normalized in f32 (as td_layer_norm does), y rounded to bf16 */
        td_tensor *xb = td_cast(x, TD_BF16);
        ASSERT_OK(td_autocast_begin(dev.type, TD_BF16));
        td_tensor *y = ASSERT_TENSOR(td_layer_norm_to(xb, 1, w, b, EPS, TD_BF16));
        td_tensor *ref = td_cast(td_layer_norm(xb, 1, w, b, EPS), TD_BF16);
        ASSERT_OK(td_autocast_end());
        same_bits(y, ref, "autocast layer_norm y");
        /* f32 asked for f32 x: td_layer_norm's result */
        same_bits(td_layer_norm_to(x, 1, w, b, EPS, TD_F32), td_layer_norm(x, 1, w, b, EPS), "f32 y");
    }
    int64_t sh[2] = {3, 4};
    td_tensor *x = uniform(2, sh, TD_F32, dev, false);
    ASSERT(!td_layer_norm_to(x, 1, NULL, NULL, EPS, TD_I64) && td_last_status() == TD_ERR_DTYPE);
    td_tensor *s = NULL;
    ASSERT(!td_add_layer_norm_to(x, td_cast(x, TD_BF16), 3, NULL, NULL, EPS, TD_BF16, &s) &&
           td_last_status() == TD_ERR_SHAPE && !s);
    td_scope_end();
}

static void add_ln(td_device dev) {
    test_seed();
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
    for (int di = 0; di < 3; di++) {
        int64_t sh[3] = {2, 5, DIMS[di]};
        td_tensor *x = uniform(3, sh, TD_F32, dev, false), *w = uniform(1, sh + 2, TD_F32, dev, false);
        td_tensor *b = uniform(1, sh + 2, TD_F32, dev, false);
        /* (residual dtype, y dtype) */
        td_dtype cases[4][2] = {{TD_BF16, TD_BF16}, {TD_BF16, TD_F32}, {TD_F32, TD_BF16}, {TD_F16, TD_F16}};
        for (int k = 0; k < 4; k++) {
            td_tensor *r = uniform(3, sh, cases[k][0], dev, false), *s = NULL, *s2 = NULL;
            ASSERT_OK(td_profile_begin());
            td_tensor *y = ASSERT_TENSOR(td_add_layer_norm_to(x, r, 1, w, b, EPS, cases[k][1], &s));
            ASSERT_OK(td_profile_end(NULL));
            ASSERT_EQ_INT(count_ops("copy"), 0);
            ASSERT_EQ_INT(count_ops("add_layer_norm"), 1);
            td_tensor *ref = td_cast(td_add_layer_norm(x, r, 1, w, b, EPS, &s2), cases[k][1]);
            same_bits(y, ref, "add_layer_norm y");
            same_bits(s, s2, "add_layer_norm sum");
        }
        /* under autocast: the residual stays bf16 (td_add_layer_norm's autocast casts it) */
        td_tensor *r = uniform(3, sh, TD_BF16, dev, false), *s = NULL, *s2 = NULL;
        ASSERT_OK(td_autocast_begin(dev.type, TD_BF16));
        ASSERT_OK(td_profile_begin());
        td_tensor *y = ASSERT_TENSOR(td_add_layer_norm_to(x, r, 1, w, b, EPS, TD_BF16, &s));
        ASSERT_OK(td_profile_end(NULL));
        ASSERT_EQ_INT(count_ops("copy"), 0);
        td_tensor *ref = td_cast(td_add_layer_norm(x, r, 1, w, b, EPS, &s2), TD_BF16);
        ASSERT_OK(td_autocast_end());
        same_bits(y, ref, "autocast add_layer_norm y");
        same_bits(s, s2, "autocast add_layer_norm sum");
    }
    td_scope_end();
}

/* The gradients of x, w, b through y = layer_norm_to(x, w, b) in bf16 against y = cast(layer_norm(x, w, b)). */
static void ln_bwd(td_device dev) {
    test_seed();
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
    for (int di = 0; di < 3; di++) {
        int64_t sh[2] = {9, DIMS[di]};
        td_tensor *x = uniform(2, sh, TD_F32, dev, true), *w = uniform(1, sh + 1, TD_F32, dev, true);
        td_tensor *b = uniform(1, sh + 1, TD_F32, dev, true), *dy = uniform(2, sh, TD_BF16, dev, false);
        td_tensor *in[3] = {x, w, b}, *g[3], *g2[3];
        td_tensor *y = ASSERT_TENSOR(td_layer_norm_to(x, 1, w, b, EPS, TD_BF16));
        ASSERT_OK(td_profile_begin());
        ASSERT_OK(td_grad(1, &y, &dy, 3, in, g, false, false, false));
        ASSERT_OK(td_profile_end(NULL));
        int64_t copies = count_ops("copy"), lnb = count_ops("layer_norm_backward");
        td_tensor *y2 = td_cast(td_layer_norm(x, 1, w, b, EPS), TD_BF16);
        ASSERT_OK(td_profile_begin());
        ASSERT_OK(td_grad(1, &y2, &dy, 3, in, g2, false, false, false));
        ASSERT_OK(td_profile_end(NULL));
        fprintf(stderr, "    D %lld: backward copies %lld (composed %lld)\n", (long long)sh[1], (long long)copies,
                (long long)count_ops("copy"));
        ASSERT_EQ_INT(copies, 0);
        ASSERT_EQ_INT(lnb, 1);
        same_bits(g[0], g2[0], "dx");
        same_bits(g[1], g2[1], "dw");
        same_bits(g[2], g2[2], "db");
        for (int i = 0; i < 3; i++) td_release(g[i]), td_release(g2[i]);
    }
    td_scope_end();
}

/* The gradients of x, r (bf16), w, b through (y bf16, s) = add_layer_norm_to(x, r, w, b), with a gradient for
** both y and s (the pre-LN block's), against the composed graph's. */
static void add_ln_bwd(td_device dev) {
    test_seed();
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
    for (int di = 0; di < 3; di++) {
        int64_t sh[2] = {9, DIMS[di]};
        td_tensor *x = uniform(2, sh, TD_F32, dev, true), *r = uniform(2, sh, TD_BF16, dev, true);
        td_tensor *w = uniform(1, sh + 1, TD_F32, dev, true), *b = uniform(1, sh + 1, TD_F32, dev, true);
        td_tensor *dy = uniform(2, sh, TD_BF16, dev, false), *ds = uniform(2, sh, TD_F32, dev, false);
        td_tensor *in[4] = {x, r, w, b}, *g[4], *g2[4], *s = NULL, *s2 = NULL;
        td_tensor *y = ASSERT_TENSOR(td_add_layer_norm_to(x, r, 1, w, b, EPS, TD_BF16, &s));
        ASSERT_OK(td_profile_begin());
        ASSERT_OK(td_grad(2, (td_tensor *[]){y, s}, (td_tensor *[]){dy, ds}, 4, in, g, false, false, false));
        ASSERT_OK(td_profile_end(NULL));
        int64_t copies = count_ops("copy");
        td_tensor *y2 = td_cast(td_add_layer_norm(x, r, 1, w, b, EPS, &s2), TD_BF16);
        ASSERT_OK(td_profile_begin());
        ASSERT_OK(td_grad(2, (td_tensor *[]){y2, s2}, (td_tensor *[]){dy, ds}, 4, in, g2, false, false, false));
        ASSERT_OK(td_profile_end(NULL));
        int64_t copies2 = count_ops("copy");
        fprintf(stderr, "    D %lld: backward copies %lld (composed %lld)\n", (long long)sh[1], (long long)copies,
                (long long)copies2);
        /* dy read in bf16; r's bf16 gradient written by the LAYER_NORM_BACKWARD op itself (the composed path: a
        ** cast of dy to f32 and of ds to bf16) */
        if (dev.type != TD_DEVICE_VULKAN) ASSERT_EQ_INT(copies, 0); /* Vulkan's shaders read x's dtype: casts */
        ASSERT(copies2 > 0);
        same_bits(g[0], g2[0], "dx");
        same_bits(g[1], g2[1], "dr");
        same_bits(g[2], g2[2], "dw");
        same_bits(g[3], g2[3], "db");
        for (int i = 0; i < 4; i++) td_release(g[i]), td_release(g2[i]);
    }
    td_scope_end();
}

/* One bf16-autocast forward and backward of a small GPT (W3's block) on dev: the loss into *loss_out, the
** parameters' gradients into g (n of them), the `copy` ops into *copies. */
static void w3_run(td_module *m, td_device dev, bool composed, td_tensor **loss_out, td_tensor **g, int n,
                   int64_t *copies) {
    if (composed)
        setenv("TRIDENT_LN_AMP", "composed", 1);
    else
        unsetenv("TRIDENT_LN_AMP");
    int64_t sh[2] = {2, 32}, flat = 64;
    double ids[64], next[64];
    test_rng_state = 9;
    for (int i = 0; i < 64; i++) ids[i] = (double)test_int(64), next[i] = (double)test_int(64);
    td_tensor *x = td_to(test_tensor_f64(ids, 2, sh, TD_I64), dev),
              *y = td_to(test_tensor_f64(next, 1, &flat, TD_I64), dev);
    td_tensor *p[64];
    ASSERT_EQ_INT(td_module_parameters(m, p, 64), n);
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_autocast_begin(dev.type, TD_BF16));
    td_tensor *logits = ASSERT_TENSOR(td_module_forward(m, x));
    td_tensor *loss = ASSERT_TENSOR(
        td_cross_entropy_loss(td_reshape(logits, 2, (int64_t[]){64, 64}), y, NULL, -100, 0, TD_REDUCE_MEAN));
    ASSERT_OK(td_autocast_end());
    ASSERT_OK(td_grad(1, &loss, NULL, n, p, g, false, false, false));
    ASSERT_OK(td_synchronize(dev));
    ASSERT_OK(td_profile_end(NULL));
    *copies = count_ops("copy");
    *loss_out = loss;
    unsetenv("TRIDENT_LN_AMP");
}

static void w3_step(td_device dev) {
    td_manual_seed(5);
    workload_gpt_config cfg = {.vocab = 64, .d_model = 64, .heads = 2, .layers = 2, .context = 32};
    td_module *m = workload_gpt_new(&cfg);
    ASSERT(m);
    ASSERT_OK(td_module_to(m, dev));
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
    td_tensor *p[64];
    int n = td_module_parameters(m, p, 64);
    ASSERT(n > 0 && n <= 64);
    td_tensor *g[64], *g2[64], *loss, *loss2;
    int64_t copies, copies2;
    w3_run(m, dev, false, &loss, g, n, &copies); /* makes the parameters' bf16 shadows: the runs below cast none */
    for (int i = 0; i < n; i++) td_release(g[i]);
    w3_run(m, dev, false, &loss, g, n, &copies);
    w3_run(m, dev, true, &loss2, g2, n, &copies2);
    double *h1 = test_host(loss), *h2 = test_host(loss2), l1 = h1[0], l2 = h2[0];
    free(h1), free(h2);
    fprintf(stderr, "    loss %.9g (composed %.9g); copy ops %lld (composed %lld), %d layers\n", l1, l2,
            (long long)copies, (long long)copies2, (int)cfg.layers);
    same_bits(loss, loss2, "loss");
    /* CUDA's attention backward may sum dq in another order from run to run (atomics): near there, bits on the CPU */
    for (int i = 0; i < n; i++)
        if (dev.type == TD_DEVICE_CPU)
            same_bits(g[i], g2[i], "a parameter's gradient");
        else
            ASSERT(test_max_rel(g[i], g2[i]) < 1e-3);
    /* per layer: ln1's and ln2's y casts and their gradients' casts back, the residual's cast and its gradient's
    ** (LAYER_NORM_BACKWARD writes the bf16 residual gradient), and the MLP node's cast of its f32 dy to bf16 (the
    ** next ln1's or the final ln's LAYER_NORM_BACKWARD writes it: td__grad_twin_put); the final ln's two */
    ASSERT_EQ_INT(copies2 - copies, 7 * cfg.layers + 2);
    for (int i = 0; i < n; i++) td_release(g[i]), td_release(g2[i]);
    td_scope_end();
    td_module_free(m);
}

TEST(ln_fwd_cpu) { ln_fwd(TD_CPU); }
TEST(add_ln_cpu) { add_ln(TD_CPU); }
TEST(ln_bwd_cpu) { ln_bwd(TD_CPU); }
TEST(add_ln_bwd_cpu) { add_ln_bwd(TD_CPU); }
TEST(w3_step_cpu) { w3_step(TD_CPU); }
TEST(ln_fwd_cuda) { ln_fwd(need(CUDA0)); }
TEST(add_ln_cuda) { add_ln(need(CUDA0)); }
TEST(ln_bwd_cuda) { ln_bwd(need(CUDA0)); }
TEST(add_ln_bwd_cuda) { add_ln_bwd(need(CUDA0)); }
TEST(w3_step_cuda) { w3_step(need(CUDA0)); }
TEST(add_ln_bwd_vulkan) { add_ln_bwd(need(VULKAN0)); }

TEST_MAIN(TESTS)
