/*
** The gradient of a split whose parts' gradients come back side by side in one buffer (src/autograd/formulas_view.c's
** adjacent_views) and the packed dq, dk, dv of attention (src/core/op_attention.c's alloc_packed):
** adjacent_cpu: x split in 3 then concatenated again: cat's backward hands split views of dz, in order, so x's
**   gradient is dz with no `cat` op; out of order, or the same gradient twice, the concatenation runs and is right.
** qkv_cpu: GPT-2's layout (x [B,L,3C] split into q, k, v, heads permuted [B,H,L,E]) through the attention, f32 on the
**   CPU, against q, k, v made contiguous first (the unfused path): the same gradient; the CPU kernels take only
**   contiguous operands, so the packed buffer is not used here (one `cat` counted, which the CUDA case removes).
** qkv_cuda: the same on cuda:0 in bf16 through cuDNN, which writes dq, dk, dv into one [B,L,3C] buffer: x's gradient
**   as the unfused path's, and no `cat` and no `copy` op in the backward. Skips without a CUDA device or cuDNN.
** gpt_block_cuda: one W3 forward and backward of a small GPT on cuda:0 under bf16 autocast: no `cat` op at all.
*/
#include <math.h>
#include <string.h>

#include "test_util.h"
#include "trident/amp.h"
#include "trident/profile.h"
#include "workloads/workloads.h"

#define TESTS(X) X(adjacent_cpu) X(qkv_cpu) X(qkv_cuda) X(gpt_block_cuda)

static const td_device CUDA0 = {TD_DEVICE_CUDA, 0};

/* ops named op recorded since td_profile_begin, in the backward only when backward_only */
static int64_t count_ops(const char *op, bool backward_only) {
    td_profile_row rows[512];
    int n = td_profile_rows(rows, 512);
    ASSERT(n <= 512);
    int64_t c = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].op, op) && (rows[i].backward || !backward_only)) c += rows[i].count;
    return c;
}

static double *uniform_array(int64_t n) {
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t j = 0; j < n; j++) v[j] = test_uniform(-1, 1);
    return v;
}

static td_tensor *leaf(td_tensor *x, td_dtype dt, td_device dev) {
    td_tensor *t = ASSERT_TENSOR(td_to(td_cast(x, dt), dev));
    t = ASSERT_TENSOR(td_contiguous(t));
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

TEST(adjacent_cpu) {
    test_seed();
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(TD_CPU, 1, 1)); /* no roofline measurement at td_profile_end */
    int64_t sx[3] = {2, 5, 12}, n = 120;
    double *xh = uniform_array(n), *dh = uniform_array(n);
    td_tensor *x = leaf(test_tensor_f64(xh, 3, sx, TD_F64), TD_F32, TD_CPU);
    td_tensor *dz = ASSERT_TENSOR(test_tensor_f64(dh, 3, sx, TD_F32)), *p[3], *g;
    ASSERT_OK(td_split(x, 3, (int64_t[]){3, 4, 5}, 2, p));
    /* in order: dx = dz, a view */
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_grad(1, (td_tensor *[]){ASSERT_TENSOR(td_cat(3, p, 2))}, &dz, 1, &x, &g, false, false, false));
    ASSERT_OK(td_profile_end(NULL));
    ASSERT_EQ_INT(count_ops("cat", true), 0);
    ASSERT(test_rel_err(g, dz) == 0);
    /* out of order: cat(p1, p0, p2)'s gradients are views of dz, but not in x's order: concatenated */
    td_tensor *sw[3] = {p[1], p[0], p[2]};
    td_tensor *z = ASSERT_TENSOR(td_cat(3, sw, 2));
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_grad(1, &z, &dz, 1, &x, &g, false, false, false));
    ASSERT_OK(td_profile_end(NULL));
    ASSERT_EQ_INT(count_ops("cat", true), 1);
    td_tensor *d[3];
    ASSERT_OK(td_split(dz, 3, (int64_t[]){4, 3, 5}, 2, d));
    ASSERT(test_rel_err(g, ASSERT_TENSOR(td_cat(3, (td_tensor *[]){d[1], d[0], d[2]}, 2))) == 0);
    /* two parts of one size with one gradient (y0 + y1): the same view twice, not adjacent */
    td_tensor *h[2];
    ASSERT_OK(td_split(x, 2, (int64_t[]){6, 6}, 2, h));
    td_tensor *dh2 = ASSERT_TENSOR(td_slice(dz, 2, 0, 6, 1));
    ASSERT_OK(td_grad(1, (td_tensor *[]){ASSERT_TENSOR(td_add(h[0], h[1]))}, &dh2, 1, &x, &g, false, false, false));
    ASSERT(test_rel_err(g, ASSERT_TENSOR(td_cat(2, (td_tensor *[]){dh2, dh2}, 2))) == 0);
    free(xh), free(dh);
    td_scope_end();
}

typedef struct cfg {
    int64_t b, h, l, e;
} cfg;

/* x [B,L,3C] (a leaf) split into q, k, v, each reshaped [B,L,H,E] and permuted [B,H,L,E] (contig: then made
** contiguous), causal attention, dy [B,H,L,E] contiguous: x's gradient; *cats, *copies: the backward's `cat` and
** `copy` ops (when not NULL). */
static td_tensor *run(const cfg *c, const double *xh, const double *dyh, td_dtype dt, td_device dev, bool contig,
                      int64_t *cats, int64_t *copies) {
    int64_t ch = c->h * c->e, sx[3] = {c->b, c->l, 3 * ch}, sd[4] = {c->b, c->l, c->h, c->e};
    int64_t so[4] = {c->b, c->h, c->l, c->e};
    static const int perm[4] = {0, 2, 1, 3};
    td_tensor *x = leaf(test_tensor_f64(xh, 3, sx, TD_F64), dt, dev), *parts[3], *qkv[3], *g;
    td_tensor *dy = ASSERT_TENSOR(td_to(test_tensor_f64(dyh, 4, so, dt), dev));
    ASSERT_OK(td_split(x, 3, (int64_t[]){ch, ch, ch}, 2, parts));
    for (int i = 0; i < 3; i++) {
        qkv[i] = ASSERT_TENSOR(td_permute(td_reshape(parts[i], 4, sd), perm));
        if (contig) qkv[i] = ASSERT_TENSOR(td_contiguous(qkv[i]));
    }
    td_tensor *y = ASSERT_TENSOR(td_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], NULL, 0, true, NAN));
    if (cats) ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_grad(1, &y, &dy, 1, &x, &g, false, false, false));
    ASSERT_OK(td_synchronize(dev));
    if (cats) {
        ASSERT_OK(td_profile_end(NULL));
        *cats = count_ops("cat", true);
        *copies = count_ops("copy", true);
        fprintf(stderr, "    backward: %lld cat, %lld copy\n", (long long)*cats, (long long)*copies);
    }
    return g;
}

TEST(qkv_cpu) {
    test_seed();
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(TD_CPU, 1, 1));
    static const cfg c = {2, 3, 33, 16};
    double *xh = uniform_array(c.b * c.l * 3 * c.h * c.e), *dyh = uniform_array(c.b * c.l * c.h * c.e);
    int64_t cats, copies;
    td_tensor *a = run(&c, xh, dyh, TD_F32, TD_CPU, false, &cats, &copies);
    td_tensor *b = run(&c, xh, dyh, TD_F32, TD_CPU, true, NULL, NULL);
    double e = test_rel_err(a, b);
    fprintf(stderr, "    views vs contiguous: dqkv %.1e\n", e);
    ASSERT(e <= 1e-6);
    ASSERT_EQ_INT(cats, 1); /* the CPU kernels write contiguous dq, dk, dv: the split concatenates them */
    free(xh), free(dyh);
    td_scope_end();
}

TEST(qkv_cuda) {
    test_need_cudnn();
    test_seed();
    static const cfg cs[2] = {{2, 3, 128, 64}, {2, 12, 256, 64}};
    for (int i = 0; i < 2; i++) {
        td_scope_begin();
        const cfg *c = &cs[i];
        double *xh = uniform_array(c->b * c->l * 3 * c->h * c->e), *dyh = uniform_array(c->b * c->l * c->h * c->e);
        int64_t cats, copies;
        td_tensor *a = run(c, xh, dyh, TD_BF16, CUDA0, false, &cats, &copies);
        td_tensor *b = run(c, xh, dyh, TD_BF16, CUDA0, true, NULL, NULL);
        /* the same kernels on the same bf16 values: only the layout differs, so the gradients agree to fp32
        ** rounding of cuDNN's float accumulation order */
        double e = test_rel_err(a, b);
        fprintf(stderr, "    [%lld,%lld,%lld,%lld] packed vs contiguous: dqkv %.1e\n", (long long)c->b, (long long)c->h,
                (long long)c->l, (long long)c->e, e);
        if (!(e <= 1e-2)) TEST_FAIL_("packed vs contiguous gradient off by %.3g", e);
        if (cats || copies)
            TEST_FAIL_("the packed path issued %lld cat and %lld copy ops", (long long)cats, (long long)copies);
        free(xh), free(dyh);
        td_scope_end();
    }
}

TEST(gpt_block_cuda) {
    test_need_cudnn();
    td_manual_seed(5);
    workload_gpt_config cfg = {.vocab = 64, .d_model = 128, .heads = 2, .layers = 2, .context = 64};
    td_module *m = workload_gpt_new(&cfg);
    ASSERT(m);
    ASSERT_OK(td_module_to(m, CUDA0));
    int64_t sh[2] = {2, 64}, flat = 128;
    double ids[128], next[128];
    test_rng_state = 9;
    for (int i = 0; i < 128; i++) ids[i] = (double)test_int(64), next[i] = (double)test_int(64);
    td_scope_begin();
    td_tensor *x = td_to(test_tensor_f64(ids, 2, sh, TD_I64), CUDA0),
              *y = td_to(test_tensor_f64(next, 1, &flat, TD_I64), CUDA0);
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_autocast_begin(TD_DEVICE_CUDA, TD_BF16));
    td_tensor *logits = ASSERT_TENSOR(td_module_forward(m, x));
    td_tensor *loss = ASSERT_TENSOR(
        td_cross_entropy_loss(td_reshape(logits, 2, (int64_t[]){128, 64}), y, NULL, -100, 0, TD_REDUCE_MEAN));
    ASSERT_OK(td_autocast_end());
    ASSERT_OK(td_backward(loss, NULL, false));
    ASSERT_OK(td_synchronize(CUDA0));
    ASSERT_OK(td_profile_end(NULL));
    int64_t cats = count_ops("cat", false);
    fprintf(stderr, "    W3 block, bf16 autocast: %lld cat\n", (long long)cats);
    if (cats) TEST_FAIL_("the qkv gradient was concatenated %lld times", (long long)cats);
    td_scope_end();
    td_module_free(m);
}

TEST_MAIN(TESTS)
