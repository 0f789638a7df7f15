/*
** The CUDA attention on cuDNN's fused flash attention (src/backend_cuda/cu_attention_cudnn.c) against our own kernels
** (TRIDENT_CUDA_ATTN=own) and against the attention composed from ops in float64 on the CPU: out and the gradients
** of q, k and v, f16 and bf16, causal and not, head dims 64 and 128, an odd length. The plugin's exported counters
** (td_cuda_attn_counts, found with td_backend_symbol) prove which implementation ran each call, and each run prints
** it. mixed: a forward by one implementation and the backward by the other (the backward reads the forward's row
** logsumexp, so this holds only when both give it one meaning). fallback: a mask and dropout, which cuDNN does not
** take, go to our kernels even under TRIDENT_CUDA_ATTN=cudnn and are still right.
** strided_cudnn: q, k, v as GPT-2 feeds them (heads split from one [B,L,3C] projection, permuted views) and dy a
** permuted view, read in place by cuDNN: out and the projection's gradient as with contiguous copies, and no `copy`
** op in the forward or the backward (the profiler counts them). strided_fallback: the same views on the CPU and on
** Vulkan, whose kernels read only contiguous operands, give exactly what contiguous copies give.
** captured: the forward and backward on cuDNN recorded into a CUDA graph (TRIDENT_CUDA_ATTN_CUDNN_CAPTURE=1, the plans
** built by an eager call first) and replayed on new inputs copied into the static q, k, v and dy: each replay gives
** what an eager call on those inputs gives.
** The cuDNN cases skip without a CUDA device or when cuDNN does not load (the reason printed).
*/
#include <math.h>
#include <string.h>

#include "test_util.h"
#include "trident/profile.h"

#define TESTS(X) X(vs_reference) X(mixed) X(fallback) X(strided_cudnn) X(strided_fallback) X(captured)

typedef struct cfg {
    int64_t b, h, l, s, e;
    bool causal;
    int mask;       /* 0 none, 1 bool key padding [B,1,1,S] */
    double dropout; /* 0: none */
} cfg;

static const cfg shapes[] = {
    {2, 3, 128, 128, 64, false, 0, 0}, {2, 3, 128, 128, 64, true, 0, 0},   {1, 2, 197, 197, 64, false, 0, 0},
    {1, 2, 197, 197, 64, true, 0, 0},  {2, 2, 256, 256, 128, false, 0, 0}, {2, 2, 256, 256, 128, true, 0, 0},
};

enum { FWD_DNN, FWD_OWN, BWD_DNN, BWD_OWN };

static void counts(int64_t c[4]) {
    void (*f)(int64_t *) = (void (*)(int64_t *))td_backend_symbol(TD_DEVICE_CUDA, "td_cuda_attn_counts");
    if (!f) TEST_FAIL_("the CUDA plugin exports no td_cuda_attn_counts");
    f(c);
}

static const td_device CUDA0 = {TD_DEVICE_CUDA, 0};

static td_tensor *leaf(td_tensor *host, td_dtype dt, td_device dev) {
    td_tensor *t = ASSERT_TENSOR(td_detach(td_to(td_cast(host, dt), dev)));
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* The inputs of one case, rounded to dt and held as f64 on the CPU: q, k, v, dy, the mask (or NULL). */
typedef struct inputs {
    td_tensor *x[3], *dy, *mask;
    uint64_t seed, offset;
} inputs;

static inputs make_inputs(const cfg *c, td_dtype dt) {
    inputs in = {0};
    int64_t sq[4] = {c->b, c->h, c->l, c->e}, sk[4] = {c->b, c->h, c->s, c->e}, sm[4] = {c->b, 1, 1, c->s};
    const int64_t *sh[4] = {sq, sk, sk, sq};
    for (int i = 0; i < 4; i++) {
        int64_t n = sh[i][0] * sh[i][1] * sh[i][2] * sh[i][3];
        double *v = malloc((size_t)n * sizeof *v);
        for (int64_t j = 0; j < n; j++) v[j] = test_uniform(-1, 1);
        td_tensor *t = td_cast(test_tensor_f64(v, 4, sh[i], dt), TD_F64);
        free(v);
        if (i < 3)
            in.x[i] = t;
        else
            in.dy = t;
    }
    if (c->mask) { /* key 0 always kept: no row without keys */
        double *m = malloc((size_t)(c->b * c->s) * sizeof *m);
        for (int64_t j = 0; j < c->b * c->s; j++) m[j] = j % c->s == 0 || test_uniform(0, 1) < 0.7;
        in.mask = td_cast(test_tensor_f64(m, 4, sm, TD_F64), TD_BOOL);
        free(m);
    }
    in.seed = test_next(), in.offset = (uint64_t)test_int(1000);
    return in;
}

/* softmax(q k^T / sqrt(E) masked) (dropout) v from ops, f64 on the CPU, and its gradients g[3] */
static td_tensor *reference(const cfg *c, const inputs *in, td_tensor **g) {
    td_tensor *x[3] = {leaf(in->x[0], TD_F64, TD_CPU), leaf(in->x[1], TD_F64, TD_CPU), leaf(in->x[2], TD_F64, TD_CPU)};
    td_tensor *s = td_mul_scalar(td_matmul(x[0], td_transpose(x[1], -1, -2)), 1.0 / sqrt((double)c->e));
    td_tensor *ninf = td_full(0, NULL, -INFINITY, TD_F64, TD_CPU);
    if (in->mask) s = td_where(in->mask, s, ninf);
    if (c->causal) { /* keep key j <= i */
        int64_t ls[2] = {c->l, c->s};
        double *kv = malloc((size_t)(c->l * c->s) * sizeof *kv);
        for (int64_t i = 0; i < c->l; i++)
            for (int64_t j = 0; j < c->s; j++) kv[i * c->s + j] = j <= i;
        s = td_where(td_cast(test_tensor_f64(kv, 2, ls, TD_F64), TD_BOOL), s, ninf);
        free(kv);
    }
    td_tensor *p = td_softmax(s, -1);
    if (c->dropout > 0) p = td_dropout(td_contiguous(p), c->dropout, in->seed, in->offset);
    td_tensor *y = ASSERT_TENSOR(td_matmul(p, x[2]));
    ASSERT_OK(td_grad(1, &y, (td_tensor *[]){in->dy}, 3, x, g, false, false, false));
    return y;
}

/* The fused op on cuda:0 in dt, the forward under TRIDENT_CUDA_ATTN=fwd and the backward under =bwd; checks that the
** counters moved as expected (want_fwd/want_bwd: FWD_DNN or FWD_OWN, BWD_DNN or BWD_OWN). */
static td_tensor *fused(const cfg *c, const inputs *in, td_dtype dt, const char *fwd, const char *bwd, int want_fwd,
                        int want_bwd, td_tensor **g) {
    td_tensor *x[3] = {leaf(in->x[0], dt, CUDA0), leaf(in->x[1], dt, CUDA0), leaf(in->x[2], dt, CUDA0)};
    td_tensor *m = in->mask ? ASSERT_TENSOR(td_to(in->mask, CUDA0)) : NULL;
    td_tensor *dy = ASSERT_TENSOR(td_to(td_cast(in->dy, dt), CUDA0));
    int64_t c0[4], c1[4], c2[4];
    counts(c0);
    setenv("TRIDENT_CUDA_ATTN", fwd, 1);
    td_tensor *y = ASSERT_TENSOR(
        td_scaled_dot_product_attention_ext(x[0], x[1], x[2], m, c->dropout, c->causal, NAN, in->seed, in->offset));
    counts(c1);
    setenv("TRIDENT_CUDA_ATTN", bwd, 1);
    ASSERT_OK(td_grad(1, &y, &dy, 3, x, g, false, false, false));
    ASSERT_OK(td_synchronize(CUDA0));
    counts(c2);
    unsetenv("TRIDENT_CUDA_ATTN");
    fprintf(stderr, "    forward ran on %s, backward on %s\n", c1[FWD_DNN] > c0[FWD_DNN] ? "cuDNN" : "own kernels",
            c2[BWD_DNN] > c1[BWD_DNN] ? "cuDNN" : "own kernels");
    if (c1[want_fwd] != c0[want_fwd] + 1)
        TEST_FAIL_("the forward did not run on %s", want_fwd == FWD_DNN ? "cuDNN" : "our kernels");
    if (c2[want_bwd] != c1[want_bwd] + 1)
        TEST_FAIL_("the backward did not run on %s", want_bwd == BWD_DNN ? "cuDNN" : "our kernels");
    return y;
}

static void expect_close(const char *what, const cfg *c, td_dtype dt, td_tensor *const *a, td_tensor *const *b,
                         double tol) {
    static const char *names[4] = {"out", "dq", "dk", "dv"};
    double e[4];
    for (int i = 0; i < 4; i++) e[i] = test_rel_err(a[i], b[i]);
    fprintf(stderr, "    [%lld,%lld,%lld,%lld]%s %-4s %-22s out %.1e dq %.1e dk %.1e dv %.1e\n", (long long)c->b,
            (long long)c->h, (long long)c->l, (long long)c->e, c->causal ? " causal" : "       ", td_dtype_name(dt),
            what, e[0], e[1], e[2], e[3]);
    for (int i = 0; i < 4; i++)
        if (!(e[i] <= tol))
            TEST_FAIL_("%s %s: %s off by %.3g (limit %.3g)", what, td_dtype_name(dt), names[i], e[i], tol);
}

static double tol_of(td_dtype dt) { return dt == TD_BF16 ? 1e-2 : 2e-3; }

TEST(vs_reference) {
    test_need_cudnn();
    test_seed();
    td_dtype dts[2] = {TD_BF16, TD_F16};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int t = 0; t < 2; t++) {
            td_scope_begin();
            const cfg *c = &shapes[i];
            inputs in = make_inputs(c, dts[t]);
            td_tensor *r[4], *d[4], *o[4];
            r[0] = reference(c, &in, r + 1);
            d[0] = fused(c, &in, dts[t], "cudnn", "cudnn", FWD_DNN, BWD_DNN, d + 1);
            o[0] = fused(c, &in, dts[t], "own", "own", FWD_OWN, BWD_OWN, o + 1);
            expect_close("cuDNN vs f64 reference", c, dts[t], d, r, tol_of(dts[t]));
            expect_close("own vs f64 reference", c, dts[t], o, r, tol_of(dts[t]));
            expect_close("cuDNN vs own", c, dts[t], d, o, 2 * tol_of(dts[t]));
            td_scope_end();
        }
}

TEST(mixed) {
    test_need_cudnn();
    test_seed();
    td_dtype dts[2] = {TD_BF16, TD_F16};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i += 3) /* [2,3,128,64], [1,2,197,64] causal */
        for (int t = 0; t < 2; t++) {
            td_scope_begin();
            const cfg *c = &shapes[i];
            inputs in = make_inputs(c, dts[t]);
            td_tensor *r[4], *a[4], *b[4];
            r[0] = reference(c, &in, r + 1);
            a[0] = fused(c, &in, dts[t], "cudnn", "own", FWD_DNN, BWD_OWN, a + 1);
            b[0] = fused(c, &in, dts[t], "own", "cudnn", FWD_OWN, BWD_DNN, b + 1);
            expect_close("fwd cuDNN, bwd own", c, dts[t], a, r, tol_of(dts[t]));
            expect_close("fwd own, bwd cuDNN", c, dts[t], b, r, tol_of(dts[t]));
            td_scope_end();
        }
}

TEST(fallback) {
    test_need_cudnn();
    test_seed();
    static const cfg falls[2] = {{2, 2, 128, 128, 64, false, 1, 0}, {2, 2, 128, 128, 64, true, 0, 0.2}};
    static const char *names[2] = {"key padding mask", "dropout 0.2"};
    for (int i = 0; i < 2; i++) {
        td_scope_begin();
        inputs in = make_inputs(&falls[i], TD_BF16);
        td_tensor *r[4], *d[4];
        r[0] = reference(&falls[i], &in, r + 1);
        d[0] = fused(&falls[i], &in, TD_BF16, "cudnn", "cudnn", FWD_OWN, BWD_OWN, d + 1);
        expect_close(names[i], &falls[i], TD_BF16, d, r, tol_of(TD_BF16));
        td_scope_end();
    }
}

/* One run over GPT-2's layout: x [B,L,3C] (a leaf) split into q, k, v, each reshaped [B,L,H,E] and permuted
** [B,H,L,E] (contig: then made contiguous), dy [B,L,H,E] permuted likewise. y, x's gradient g, and the `copy` ops the
** forward and backward issued (-1 unless counted). */
typedef struct split_run {
    td_tensor *y, *g;
    int64_t copies;
} split_run;

static split_run run_split(const cfg *c, const double *xh, const double *dyh, td_dtype dt, td_device dev, bool contig,
                           bool count) {
    int64_t ch = c->h * c->e, sx[3] = {c->b, c->l, 3 * ch}, sd[4] = {c->b, c->l, c->h, c->e};
    static const int perm[4] = {0, 2, 1, 3};
    td_tensor *x = leaf(test_tensor_f64(xh, 3, sx, TD_F64), dt, dev), *parts[3], *qkv[3];
    td_tensor *dy = td_permute(ASSERT_TENSOR(td_to(test_tensor_f64(dyh, 4, sd, dt), dev)), perm);
    ASSERT_OK(td_split(x, 3, (int64_t[]){ch, ch, ch}, 2, parts));
    for (int i = 0; i < 3; i++) {
        qkv[i] = ASSERT_TENSOR(td_permute(td_reshape(parts[i], 4, sd), perm));
        if (contig) qkv[i] = ASSERT_TENSOR(td_contiguous(qkv[i]));
    }
    if (contig) dy = ASSERT_TENSOR(td_contiguous(dy));
    split_run r = {.copies = -1};
    if (count) ASSERT_OK(td_profile_begin());
    r.y = ASSERT_TENSOR(td_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], NULL, 0, c->causal, NAN));
    ASSERT_OK(td_grad(1, &r.y, &dy, 1, &x, &r.g, false, false, false));
    ASSERT_OK(td_synchronize(dev));
    if (count) {
        ASSERT_OK(td_profile_end(NULL));
        td_profile_row rows[256];
        int n = td_profile_rows(rows, 256);
        r.copies = 0;
        for (int i = 0; i < n && i < 256; i++)
            if (!strcmp(rows[i].op, "copy")) {
                fprintf(stderr, "    copy: %lld in the %s\n", (long long)rows[i].count,
                        rows[i].backward ? "backward" : "forward");
                r.copies += rows[i].count;
            }
    }
    return r;
}

static double *uniform_array(int64_t n) {
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t j = 0; j < n; j++) v[j] = test_uniform(-1, 1);
    return v;
}

TEST(strided_cudnn) {
    test_need_cudnn();
    test_seed();
    static const cfg cs[3] = {
        {2, 3, 128, 128, 64, true, 0, 0}, {1, 2, 197, 197, 64, false, 0, 0}, {2, 2, 256, 256, 128, true, 0, 0}};
    td_dtype dts[2] = {TD_BF16, TD_F16};
    for (int i = 0; i < 3; i++)
        for (int t = 0; t < 2; t++) {
            td_scope_begin();
            const cfg *c = &cs[i];
            double *xh = uniform_array(c->b * c->l * 3 * c->h * c->e), *dyh = uniform_array(c->b * c->l * c->h * c->e);
            int64_t c0[4], c1[4];
            counts(c0);
            split_run a = run_split(c, xh, dyh, dts[t], CUDA0, false, true);
            counts(c1);
            split_run b = run_split(c, xh, dyh, dts[t], CUDA0, true, false);
            free(xh), free(dyh);
            double ey = test_rel_err(a.y, b.y), eg = test_rel_err(a.g, b.g);
            fprintf(stderr, "    [%lld,%lld,%lld,%lld]%s %-4s strided vs contiguous: out %.1e dqkv %.1e\n",
                    (long long)c->b, (long long)c->h, (long long)c->l, (long long)c->e, c->causal ? " causal" : "",
                    td_dtype_name(dts[t]), ey, eg);
            if (c1[FWD_DNN] != c0[FWD_DNN] + 1 || c1[BWD_DNN] != c0[BWD_DNN] + 1)
                TEST_FAIL_("the strided call did not run on cuDNN both ways");
            if (!(ey <= tol_of(dts[t])) || !(eg <= tol_of(dts[t])))
                TEST_FAIL_("strided vs contiguous: out off by %.3g, the gradient by %.3g", ey, eg);
            if (a.copies != 0) TEST_FAIL_("the strided path issued %lld copy ops", (long long)a.copies);
            td_scope_end();
        }
}

TEST(strided_fallback) {
    test_seed();
    static const cfg c = {2, 3, 33, 33, 32, true, 0, 0};
    td_device devs[2] = {TD_CPU, {TD_DEVICE_VULKAN, 0}};
    for (int d = 0; d < 2; d++) {
        if (!td_device_available(devs[d])) {
            fprintf(stderr, "    no %s device\n", d ? "Vulkan" : "CPU");
            continue;
        }
        td_scope_begin();
        double *xh = uniform_array(c.b * c.l * 3 * c.h * c.e), *dyh = uniform_array(c.b * c.l * c.h * c.e);
        split_run a = run_split(&c, xh, dyh, TD_F32, devs[d], false, false);
        split_run b = run_split(&c, xh, dyh, TD_F32, devs[d], true, false);
        free(xh), free(dyh);
        double ey = test_rel_err(a.y, b.y), eg = test_rel_err(a.g, b.g);
        fprintf(stderr, "    %s strided vs contiguous: out %.1e dqkv %.1e\n", d ? "Vulkan" : "CPU", ey, eg);
        if (ey != 0 || eg != 0) TEST_FAIL_("strided views differ from contiguous copies: out %.3g, grad %.3g", ey, eg);
        td_scope_end();
    }
}

/* dst (static, on cuda:0) = src (f64 on the CPU) rounded to dt, outside autograd */
static void load(td_tensor *dst, td_tensor *src, td_dtype dt) {
    td_no_grad_begin();
    td_status st = td_copy_(dst, ASSERT_TENSOR(td_to(td_cast(src, dt), CUDA0)));
    td_no_grad_end();
    ASSERT_OK(st);
}

TEST(captured) {
    test_need_cudnn();
    test_seed();
    static const cfg cs[2] = {{2, 3, 128, 128, 64, true, 0, 0}, {2, 2, 256, 256, 128, false, 0, 0}};
    const td_dtype dt = TD_BF16;
    setenv("TRIDENT_CUDA_ATTN_CUDNN_CAPTURE", "1", 1);
    for (int i = 0; i < 2; i++) {
        td_scope_begin();
        const cfg *c = &cs[i];
        inputs in = make_inputs(c, dt);
        td_tensor *x[3] = {leaf(in.x[0], dt, CUDA0), leaf(in.x[1], dt, CUDA0), leaf(in.x[2], dt, CUDA0)};
        td_tensor *dy = ASSERT_TENSOR(td_to(td_cast(in.dy, dt), CUDA0)), *w[4];
        w[0] = fused(c, &in, dt, "cudnn", "cudnn", FWD_DNN, BWD_DNN, w + 1); /* builds the plans */
        int64_t c0[4], c1[4];
        counts(c0);
        ASSERT_OK(td_capture_begin(CUDA0));
        td_scope_begin();
        td_tensor *out[4] = {td_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, c->causal, NAN)};
        td_status st = out[0] ? td_grad(1, out, &dy, 3, x, out + 1, false, false, false) : td_last_status();
        for (int k = 0; k < 4; k++) td_keep(out[k]);
        td_scope_end();
        td_captured_graph *g = NULL;
        td_status end = td_capture_end(CUDA0, &g);
        ASSERT_OK(st);
        ASSERT_OK(end);
        counts(c1);
        if (c1[FWD_DNN] != c0[FWD_DNN] + 1 || c1[BWD_DNN] != c0[BWD_DNN] + 1)
            TEST_FAIL_("the capture did not record cuDNN's forward and backward");
        for (int rep = 0; rep < 2; rep++) { /* new inputs each replay: a stale or skipped replay fails */
            inputs nin = make_inputs(c, dt);
            for (int k = 0; k < 3; k++) load(x[k], nin.x[k], dt);
            load(dy, nin.dy, dt);
            ASSERT_OK(td_graph_replay(g));
            td_tensor *e[4];
            e[0] = fused(c, &nin, dt, "cudnn", "cudnn", FWD_DNN, BWD_DNN, e + 1);
            expect_close("captured vs eager", c, dt, out, e, tol_of(dt) / 2);
        }
        td_graph_free(g);
        for (int k = 0; k < 4; k++) td_release(out[k]);
        td_scope_end();
    }
    unsetenv("TRIDENT_CUDA_ATTN_CUDNN_CAPTURE");
}

TEST_MAIN(TESTS)
