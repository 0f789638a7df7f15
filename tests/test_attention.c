/* Fused scaled-dot-product attention against the attention composed from ops
** (matmul, where, softmax, dropout, matmul: torch's reference definition), in
** float64 on the CPU: the output and the gradients of q, k and v, for causal,
** bool and float masks, dropout, odd lengths and head dims 32, 64 and 128, on
** the CPU and on every available Vulkan and CUDA device (f32, and f16/bf16 on
** GPUs). Then dropout reproducibility and the argument errors.
** TD_ATTN_DEVICES="cpu,vulkan:0" picks the devices (default: all found). */
#include <math.h>
#include <string.h>

#include "test_util.h"
#include "trident/profile.h"

#define TESTS(X)                                                                                                       \
    X(composed_cpu)                                                                                                    \
    X(composed_vulkan)                                                                                                 \
    X(composed_cuda)                                                                                                   \
    X(tf32_cuda)                                                                                                       \
    X(tf32_bwd_cuda)                                                                                                   \
    X(strided_cpu)                                                                                                     \
    X(strided_cuda) X(tf32_tolerance_tells) X(dropout_reproducible) X(errors) X(mha_key_padding) X(mha_dropout)

typedef struct attn_cfg {
    const char *name;
    int64_t b, h, l, s, e, ev;
    int mask; /* 0 none, 1 bool key padding [B,1,1,S], 2 float [L,S] */
    bool causal;
    double dropout; /* 0: none */
} attn_cfg;

static const attn_cfg cfgs[] = {
    {"E 32, L 7 S 9", 2, 3, 7, 9, 32, 32, 0, false, 0},
    {"E 64 causal, L = S = 33", 1, 2, 33, 33, 64, 64, 0, true, 0},
    {"E 128 key padding, L 5 S 19", 2, 2, 5, 19, 128, 128, 1, false, 0},
    {"E 16 Ev 40, float mask, causal, L 13 S 11", 2, 1, 13, 11, 16, 40, 2, true, 0},
    {"E 32 dropout 0.3, causal, key padding, L = S = 21", 2, 2, 21, 21, 32, 32, 1, true, 0.3},
    {"E 100 (any head dim), L 70 S 65", 1, 1, 70, 65, 100, 72, 0, false, 0},
};

/* [B,H,L,S] scores: matmul, scale, the mask and causality, softmax, dropout; out = P v */
static td_tensor *composed(td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *mask, const attn_cfg *c, uint64_t seed,
                           uint64_t offset, td_tensor *causal_keep) {
    td_tensor *s = td_mul_scalar(td_matmul(q, td_transpose(k, -1, -2)), 1.0 / sqrt((double)c->e));
    td_tensor *ninf = td_full(0, NULL, -INFINITY, td_tensor_dtype(q), td_tensor_device(q));
    if (mask && td_tensor_dtype(mask) == TD_BOOL) s = td_where(mask, s, ninf);
    if (mask && td_tensor_dtype(mask) != TD_BOOL) s = td_add(s, mask);
    if (c->causal) s = td_where(causal_keep, s, ninf);
    td_tensor *p = td_softmax(s, -1);
    if (c->dropout > 0) p = td_dropout(td_contiguous(p), c->dropout, seed, offset);
    return td_matmul(p, v);
}

#define ASSERT_TENSOR_MODULE(expr)                                                                                     \
    ({                                                                                                                 \
        td_module *m_ = (expr);                                                                                        \
        if (!m_) TEST_FAIL_("%s returned NULL", #expr);                                                                \
        m_;                                                                                                            \
    })

static td_tensor *leaf(td_tensor *host, td_dtype dt, td_device dev) {
    td_tensor *t = ASSERT_TENSOR(td_detach(td_to(td_cast(host, dt), dev)));
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* One configuration on dev in dtype dt against the f64 composed reference on the CPU. */
static void check_cfg(const attn_cfg *c, td_device dev, td_dtype dt, double tol) {
    td_scope_begin();
    int64_t sq[4] = {c->b, c->h, c->l, c->e}, sk[4] = {c->b, c->h, c->s, c->e}, sv[4] = {c->b, c->h, c->s, c->ev};
    td_tensor *host[4], *keep;
    int64_t n[3] = {c->b * c->h * c->l * c->e, c->b * c->h * c->s * c->e, c->b * c->h * c->s * c->ev},
            ls[2] = {c->l, c->s};
    const int64_t *shapes[3] = {sq, sk, sv};
    for (int i = 0; i < 3; i++) { /* rounded to dt first, so both runs see the same values */
        double *x = malloc((size_t)n[i] * sizeof *x);
        for (int64_t j = 0; j < n[i]; j++) x[j] = test_uniform(-1, 1);
        host[i] = td_cast(test_tensor_f64(x, 4, shapes[i], dt), TD_F64);
        free(x);
    }
    int64_t nm = c->mask == 1 ? c->b * c->s : c->l * c->s, sm1[4] = {c->b, 1, 1, c->s};
    double *mv = malloc((size_t)nm * sizeof *mv), *cv = malloc((size_t)(c->l * c->s) * sizeof *cv);
    for (int64_t j = 0; j < nm; j++) /* bool: key 0 always kept, so no row is fully masked (the reference gives NaN) */
        mv[j] = c->mask == 1 ? (j % c->s == 0 || test_uniform(0, 1) < 0.7) : test_uniform(-2, 2);
    for (int64_t i = 0; i < c->l; i++)
        for (int64_t j = 0; j < c->s; j++) cv[i * c->s + j] = j <= i;
    host[3] = c->mask == 1   ? td_cast(test_tensor_f64(mv, 4, sm1, TD_F64), TD_BOOL)
              : c->mask == 2 ? td_cast(test_tensor_f64(mv, 2, ls, dt), TD_F64)
                             : NULL;
    keep = td_cast(test_tensor_f64(cv, 2, ls, TD_F64), TD_BOOL);
    free(mv), free(cv);
    uint64_t seed = test_next(), offset = (uint64_t)test_int(1000);

    /* reference: composed, f64, CPU */
    td_tensor *rq = leaf(host[0], TD_F64, TD_CPU), *rk = leaf(host[1], TD_F64, TD_CPU),
              *rv = leaf(host[2], TD_F64, TD_CPU);
    td_tensor *ry = ASSERT_TENSOR(composed(rq, rk, rv, host[3], c, seed, offset, keep));
    double *dyv = malloc((size_t)td_numel(ry) * sizeof *dyv);
    for (int64_t j = 0; j < td_numel(ry); j++) dyv[j] = test_uniform(-1, 1);
    td_tensor *rdy = td_cast(test_tensor_f64(dyv, 4, td_shape(ry), dt), TD_F64);
    free(dyv);
    td_tensor *rx[3] = {rq, rk, rv}, *rg[3];
    ASSERT_OK(td_grad(1, &ry, &rdy, 3, rx, rg, false, false, false));

    /* fused on dev */
    td_tensor *x[3] = {leaf(host[0], dt, dev), leaf(host[1], dt, dev), leaf(host[2], dt, dev)}, *g[3];
    td_tensor *m = host[3]
                       ? ASSERT_TENSOR(td_to(td_tensor_dtype(host[3]) == TD_BOOL ? host[3] : td_cast(host[3], dt), dev))
                       : NULL;
    td_tensor *y = ASSERT_TENSOR(
        td_scaled_dot_product_attention_ext(x[0], x[1], x[2], m, c->dropout, c->causal, NAN, seed, offset));
    td_tensor *dy = ASSERT_TENSOR(td_to(td_cast(rdy, dt), dev));
    ASSERT_OK(td_grad(1, &y, &dy, 3, x, g, false, false, false));
    double e[4] = {test_rel_err(y, ry), test_rel_err(g[0], rg[0]), test_rel_err(g[1], rg[1]),
                   test_rel_err(g[2], rg[2])};
    char dn[32];
    fprintf(stderr, "    %-8s %-4s %-50s out %.1e dq %.1e dk %.1e dv %.1e\n", td_device_str(dev, dn, sizeof dn),
            td_dtype_name(dt), c->name, e[0], e[1], e[2], e[3]);
    static const char *what[4] = {"out", "dq", "dk", "dv"};
    for (int i = 0; i < 4; i++)
        if (!(e[i] <= tol))
            TEST_FAIL_("%s %s %s: %s off by %.3g (limit %.3g)", dn, td_dtype_name(dt), c->name, what[i], e[i], tol);
    for (int i = 0; i < 3; i++) td_release(rg[i]), td_release(g[i]);
    td_scope_end();
}

static void composed_on(td_device dev) {
    char dn[32];
    td_device_str(dev, dn, sizeof dn);
    const char *env = getenv("TD_ATTN_DEVICES");
    if (env && !strstr(env, dn)) TEST_SKIP("%s is not in TD_ATTN_DEVICES", dn);
    if (!td_device_available(dev)) TEST_SKIP("no %s device", dn);
    test_seed();
    int nc = (int)(sizeof cfgs / sizeof *cfgs);
    if (dev.type == TD_DEVICE_CPU) check_cfg(&cfgs[0], dev, TD_F64, 1e-12);
    for (int i = 0; i < nc; i++) check_cfg(&cfgs[i], dev, TD_F32, 2e-5);
    if (dev.type == TD_DEVICE_CPU) return;
    for (int i = 0; i < nc; i++) { /* f16/bf16 in, f32 math: the error is the inputs' and outputs' rounding */
        check_cfg(&cfgs[i], dev, TD_F16, 2e-3);
        check_cfg(&cfgs[i], dev, TD_BF16, 1e-2);
    }
}

TEST(composed_cpu) { composed_on(TD_CPU); }
TEST(composed_vulkan) { composed_on((td_device){TD_DEVICE_VULKAN, 0}); }
TEST(composed_cuda) { composed_on((td_device){TD_DEVICE_CUDA, 0}); }

/* The f32 mma.sync kernels (cu_ops_attention_tf32*.cu, head dims 64 and 128) in each tile configuration of
** TRIDENT_CUDA_ATTN_F32_CFG (the forward's; the backward in its default variant): lengths no tile divides, causal
** with L < S and L > S, masks, dropout, at 2e-5 (the f32 limit of composed_on): 3xTF32 (f32's products; the tensor
** cores' truncating fp32 accumulation over ~50 chained mma steps adds a few 1e-6) passes, one TF32 product a
** multiply (>= 1.4e-4, tf32_tolerance_tells) fails. */
static const attn_cfg tf32_cfgs[] = {
    {"E 64 causal, L = S = 130", 2, 3, 130, 130, 64, 64, 0, true, 0},
    {"E 64, L 77 S 150", 1, 2, 77, 150, 64, 64, 0, false, 0},
    {"E 64 causal, float mask, L 40 S 100", 1, 2, 40, 100, 64, 64, 2, true, 0},
    {"E 128 causal, L = S = 97", 1, 2, 97, 97, 128, 128, 0, true, 0},
    {"E 128 key padding, dropout 0.2, L 70 S 65", 2, 1, 70, 65, 128, 128, 1, false, 0.2},
    {"E 128 causal, L 100 S 40", 1, 1, 100, 40, 128, 128, 0, true, 0},
};
#define TF32_TOL 2e-5

TEST(tf32_cuda) {
    td_device dev = {TD_DEVICE_CUDA, 0};
    const char *env = getenv("TD_ATTN_DEVICES");
    if (env && !strstr(env, "cuda:0")) TEST_SKIP("cuda:0 is not in TD_ATTN_DEVICES");
    if (!td_device_available(dev)) TEST_SKIP("no cuda:0 device");
    test_seed();
    static const char *pick[] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    for (int p = 0; p < 8; p++) {
        setenv("TRIDENT_CUDA_ATTN_F32_CFG", pick[p], 1);
        fprintf(stderr, "  TRIDENT_CUDA_ATTN_F32_CFG=%s\n", pick[p]);
        for (size_t i = 0; i < sizeof tf32_cfgs / sizeof *tf32_cfgs; i++)
            check_cfg(&tf32_cfgs[i], dev, TD_F32, TF32_TOL);
    }
    unsetenv("TRIDENT_CUDA_ATTN_F32_CFG");
}

/* The backward's variants (TRIDENT_CUDA_ATTN_F32_BWD 0..10, cu_attention_tf32.cuh: dq in its own pass, or inside
** the dk/dv pass by atomics) on the same cases, at the same tolerance, plus one long causal run (many tiles, the
** warps that see none of a tile's queries). */
TEST(tf32_bwd_cuda) {
    td_device dev = {TD_DEVICE_CUDA, 0};
    const char *env = getenv("TD_ATTN_DEVICES");
    if (env && !strstr(env, "cuda:0")) TEST_SKIP("cuda:0 is not in TD_ATTN_DEVICES");
    if (!td_device_available(dev)) TEST_SKIP("no cuda:0 device");
    test_seed();
    static const attn_cfg longer = {"E 64 causal, L = S = 300", 1, 2, 300, 300, 64, 64, 0, true, 0};
    static const char *pick[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"};
    for (int p = 0; p < 11; p++) {
        setenv("TRIDENT_CUDA_ATTN_F32_BWD", pick[p], 1);
        fprintf(stderr, "  TRIDENT_CUDA_ATTN_F32_BWD=%s\n", pick[p]);
        for (size_t i = 0; i < sizeof tf32_cfgs / sizeof *tf32_cfgs; i++)
            check_cfg(&tf32_cfgs[i], dev, TD_F32, TF32_TOL);
        check_cfg(&longer, dev, TD_F32, TF32_TOL);
    }
    unsetenv("TRIDENT_CUDA_ATTN_F32_BWD");
}

/* Heads split from one projection, as src/nn/attention.c does: q, k, v [B,H,T,E] views of qkv [B,T,3 H E] (row
** stride 3 H E, head stride E), dout a [B,H,T,E] view of a [B,T,H,E] tensor, so out, dq, dk and dv come in those
** layouts; each case against the f64 composed reference on the CPU (L = S = T). On CUDA the kernels read and write
** these strides in place: no `copy` op runs in the forward or the backward (td_profile's rows). On the CPU (its
** kernels read contiguous operands) the copies show: 3 forward (q, k, v) and 4 backward (dout, and the 3 contiguous
** [B,H,T,E] gradients reshaped back to [B,T,C] through the permute, where CUDA's dq, dk, dv are views of one
** [B,T,3,H,E] buffer, which the split's backward also takes with no concatenation). */
static const attn_cfg strided_cfgs[] = {
    {"strided E 64 causal, T 77", 2, 3, 77, 77, 64, 64, 0, true, 0},
    {"strided E 64, T 77", 2, 3, 77, 77, 64, 64, 0, false, 0},
    {"strided E 128 causal, key padding, T 77", 1, 2, 77, 77, 128, 128, 1, true, 0},
    {"strided E 32, T 77", 2, 2, 77, 77, 32, 32, 0, false, 0},
};

/* qkv [B,T,3 H E] split (td_split, as src/workloads/workloads.c's GPT block) into x[0..2] = q, k, v [B,H,T,E] */
static void split_qkv(td_tensor *qkv, const attn_cfg *c, td_tensor **x) {
    static const int perm[4] = {0, 2, 1, 3};
    int64_t he = c->h * c->e, shape[4] = {c->b, c->l, c->h, c->e}, sizes[3] = {he, he, he};
    ASSERT_OK(td_split(qkv, 3, sizes, 2, x));
    for (int i = 0; i < 3; i++) x[i] = ASSERT_TENSOR(td_permute(td_reshape(x[i], 4, shape), perm));
}

/* copies recorded since td_profile_begin: *fwd outside backward nodes, *bwd inside (each node's printed) */
static void strided_copies(int64_t *fwd, int64_t *bwd) {
    td_profile_row rows[256];
    int n = td_profile_rows(rows, 256);
    ASSERT(n <= 256);
    *fwd = *bwd = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].op, "copy")) {
            *(rows[i].backward ? bwd : fwd) += rows[i].count;
            fprintf(stderr, "      copy x%lld %s%s\n", (long long)rows[i].count,
                    rows[i].backward ? "in backward of " : "", rows[i].backward ? rows[i].node : "in forward");
        }
}

/* One case of strided_cfgs on dev in dt: out and d qkv against the reference; *fwd, *bwd the copies made */
static void check_strided(const attn_cfg *c, td_device dev, td_dtype dt, double tol, int64_t *fwd, int64_t *bwd) {
    td_scope_begin();
    int64_t sx[3] = {c->b, c->l, 3 * c->h * c->e}, sg[4] = {c->b, c->l, c->h, c->e}, ls[2] = {c->l, c->l},
            sm[4] = {c->b, 1, 1, c->l}, nx = sx[0] * sx[1] * sx[2], ng = nx / 3;
    static const int perm[4] = {0, 2, 1, 3};
    double *x = malloc((size_t)nx * sizeof *x), *gv = malloc((size_t)ng * sizeof *gv),
           *cv = malloc((size_t)(c->l * c->l) * sizeof *cv), *mv = malloc((size_t)(c->b * c->l) * sizeof *mv);
    for (int64_t j = 0; j < nx; j++) x[j] = test_uniform(-1, 1);
    for (int64_t j = 0; j < ng; j++) gv[j] = test_uniform(-1, 1);
    for (int64_t i = 0; i < c->l; i++)
        for (int64_t j = 0; j < c->l; j++) cv[i * c->l + j] = j <= i;
    for (int64_t j = 0; j < c->b * c->l; j++) mv[j] = j % c->l == 0 || test_uniform(0, 1) < 0.7;
    td_tensor *hx = td_cast(test_tensor_f64(x, 3, sx, dt), TD_F64),
              *hg = td_cast(test_tensor_f64(gv, 4, sg, dt), TD_F64);
    td_tensor *keep = td_cast(test_tensor_f64(cv, 2, ls, TD_F64), TD_BOOL);
    td_tensor *hm = c->mask ? td_cast(test_tensor_f64(mv, 4, sm, TD_F64), TD_BOOL) : NULL;
    free(x), free(gv), free(cv), free(mv);

    td_tensor *rx = leaf(hx, TD_F64, TD_CPU), *rdy = td_permute(hg, perm), *rg, *rh[3], *x3[3];
    split_qkv(rx, c, rh);
    td_tensor *ry = ASSERT_TENSOR(composed(rh[0], rh[1], rh[2], hm, c, 0, 0, keep));
    ASSERT_OK(td_grad(1, &ry, &rdy, 1, &rx, &rg, false, false, false));

    td_tensor *dx = leaf(hx, dt, dev), *g;
    td_tensor *dy = td_permute(ASSERT_TENSOR(td_to(td_cast(hg, dt), dev)), perm);
    split_qkv(dx, c, x3);
    td_tensor *m = hm ? ASSERT_TENSOR(td_to(hm, dev)) : NULL;
    ASSERT(dy && !td_is_contiguous(x3[0]) && !td_is_contiguous(dy));
    ASSERT_OK(td_synchronize(dev));
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
    ASSERT_OK(td_profile_begin());
    td_tensor *y = ASSERT_TENSOR(td_scaled_dot_product_attention_ext(x3[0], x3[1], x3[2], m, 0, c->causal, NAN, 0, 0));
    ASSERT_OK(td_grad(1, &y, &dy, 1, &dx, &g, false, false, false));
    ASSERT_OK(td_synchronize(dev));
    ASSERT_OK(td_profile_end(NULL));
    strided_copies(fwd, bwd);
    double e[2] = {test_rel_err(y, ry), test_rel_err(g, rg)};
    char dn[32];
    fprintf(stderr, "    %-8s %-4s %-42s out %.1e dqkv %.1e, copies %lld forward %lld backward\n",
            td_device_str(dev, dn, sizeof dn), td_dtype_name(dt), c->name, e[0], e[1], (long long)*fwd,
            (long long)*bwd);
    if (!(e[0] <= tol)) TEST_FAIL_("%s %s %s: out off by %.3g (limit %.3g)", dn, td_dtype_name(dt), c->name, e[0], tol);
    if (!(e[1] <= tol))
        TEST_FAIL_("%s %s %s: d qkv off by %.3g (limit %.3g)", dn, td_dtype_name(dt), c->name, e[1], tol);
    td_release(rg), td_release(g);
    td_scope_end();
}

/* The CPU reads contiguous operands: the same cases pass through the core's copies, which the profile counts (so
** strided_cuda's count of 0 can fail). */
TEST(strided_cpu) {
    test_seed();
    int64_t fwd, bwd;
    for (size_t i = 0; i < sizeof strided_cfgs / sizeof *strided_cfgs; i++) {
        check_strided(&strided_cfgs[i], TD_CPU, TD_F64, 1e-12, &fwd, &bwd);
        ASSERT_EQ_INT(fwd, 3);
        ASSERT_EQ_INT(bwd, 4);
    }
}

/* Every f32 path (the 3xTF32 backward in each variant of TRIDENT_CUDA_ATTN_F32_BWD, the forward in each
** configuration of TRIDENT_CUDA_ATTN_F32_CFG; E 32 and TRIDENT_CUDA_ATTN_F32_CFG=wmma the WMMA kernels; f64 the
** generic ones) and the f16/bf16 mma.sync kernels (TRIDENT_CUDA_ATTN=own) on strided operands with no copy; then
** rows that are not 16-byte aligned, which are copied. */
TEST(strided_cuda) {
    td_device dev = {TD_DEVICE_CUDA, 0};
    const char *env = getenv("TD_ATTN_DEVICES");
    if (env && !strstr(env, "cuda:0")) TEST_SKIP("cuda:0 is not in TD_ATTN_DEVICES");
    if (!td_device_available(dev)) TEST_SKIP("no cuda:0 device");
    test_seed();
    int nc = (int)(sizeof strided_cfgs / sizeof *strided_cfgs);
    int64_t fwd, bwd;
#define STRIDED_NO_COPY(dt, tol)                                                                                       \
    for (int i = 0; i < nc; i++) {                                                                                     \
        check_strided(&strided_cfgs[i], dev, dt, tol, &fwd, &bwd);                                                     \
        ASSERT_EQ_INT(fwd, 0);                                                                                         \
        ASSERT_EQ_INT(bwd, 0);                                                                                         \
    }
    static const char *pick[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"};
    for (int p = 0; p < 11; p++) {
        setenv("TRIDENT_CUDA_ATTN_F32_BWD", pick[p], 1);
        fprintf(stderr, "  TRIDENT_CUDA_ATTN_F32_BWD=%s\n", pick[p]);
        STRIDED_NO_COPY(TD_F32, TF32_TOL)
    }
    unsetenv("TRIDENT_CUDA_ATTN_F32_BWD");
    static const char *fwd_pick[] = {"0", "1", "2", "3", "4", "5", "6", "7", "wmma"};
    for (int p = 0; p < 9; p++) { /* the forward's tile configurations, then the WMMA kernels */
        setenv("TRIDENT_CUDA_ATTN_F32_CFG", fwd_pick[p], 1);
        fprintf(stderr, "  TRIDENT_CUDA_ATTN_F32_CFG=%s\n", fwd_pick[p]);
        STRIDED_NO_COPY(TD_F32, TF32_TOL)
    }
    unsetenv("TRIDENT_CUDA_ATTN_F32_CFG");
    STRIDED_NO_COPY(TD_F64, 1e-12)
    fprintf(stderr, "  TRIDENT_CUDA_ATTN=own\n");
    setenv("TRIDENT_CUDA_ATTN", "own", 1);
    STRIDED_NO_COPY(TD_F16, 2e-3)
    STRIDED_NO_COPY(TD_BF16, 1e-2)
    unsetenv("TRIDENT_CUDA_ATTN");
#undef STRIDED_NO_COPY
    /* rows 3 H E = 270 floats apart (not a multiple of 16 bytes): supports() declines, the core copies */
    static const attn_cfg unaligned = {"strided E 30 (rows off 16 bytes), T 77", 1, 3, 77, 77, 30, 30, 0, true, 0};
    check_strided(&unaligned, dev, TD_F32, TF32_TOL, &fwd, &bwd);
    ASSERT_EQ_INT(fwd, 3);
    ASSERT(bwd > 0);
}

/* x rounded to TF32 (10 mantissa bits, nearest, ties away: cvt.rna.tf32.f32) */
static double tf32_round(double x) {
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u + 0x1000u) & ~0x1fffu;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* TF32_TOL tells 3xTF32 from one TF32 product: attention in float64 of q, k, v and dout rounded to TF32 (the
** roundings one TF32 product a multiply makes first; its others only add) is further than TF32_TOL from the
** attention of the unrounded values, in out and every gradient. */
TEST(tf32_tolerance_tells) {
    td_scope_begin();
    test_seed();
    const attn_cfg *c = &tf32_cfgs[0];
    int64_t sh[4] = {c->b, c->h, c->l, c->e}, n = c->b * c->h * c->l * c->e;
    double *x = malloc((size_t)(4 * n) * sizeof *x), *xr = malloc((size_t)(4 * n) * sizeof *xr);
    for (int64_t i = 0; i < 4 * n; i++) x[i] = (float)test_uniform(-1, 1), xr[i] = tf32_round(x[i]);
    td_tensor *y[2], *g[2][3];
    for (int r = 0; r < 2; r++) {
        const double *v = r ? xr : x;
        td_tensor *in[3];
        for (int k = 0; k < 3; k++) in[k] = leaf(test_tensor_f64(v + k * n, 4, sh, TD_F64), TD_F64, TD_CPU);
        y[r] = ASSERT_TENSOR(td_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, c->causal, NAN));
        td_tensor *dy = test_tensor_f64(v + 3 * n, 4, sh, TD_F64);
        ASSERT_OK(td_grad(1, &y[r], &dy, 3, in, g[r], false, false, false));
    }
    free(x), free(xr);
    double e[4] = {test_rel_err(y[1], y[0]), test_rel_err(g[1][0], g[0][0]), test_rel_err(g[1][1], g[0][1]),
                   test_rel_err(g[1][2], g[0][2])};
    fprintf(stderr, "    TF32-rounded inputs: out %.1e dq %.1e dk %.1e dv %.1e (limit %.0e)\n", e[0], e[1], e[2], e[3],
            TF32_TOL);
    for (int i = 0; i < 4; i++) ASSERT(e[i] > 2 * TF32_TOL);
    for (int i = 0; i < 3; i++) td_release(g[0][i]), td_release(g[1][i]);
    td_scope_end();
}

/* The same (seed, offset) drops the same probabilities (forward and backward regenerate the mask); another offset
** drops others; the default generator's draw repeats after td_manual_seed. */
TEST(dropout_reproducible) {
    td_scope_begin();
    test_seed();
    int64_t sq[4] = {2, 2, 9, 8};
    double x[288];
    for (int i = 0; i < 288; i++) x[i] = test_uniform(-1, 1);
    td_tensor *q = test_tensor_f64(x, 4, sq, TD_F32);
    td_tensor *a = ASSERT_TENSOR(td_scaled_dot_product_attention_ext(q, q, q, NULL, 0.5, false, NAN, 5, 40));
    td_tensor *b = ASSERT_TENSOR(td_scaled_dot_product_attention_ext(q, q, q, NULL, 0.5, false, NAN, 5, 40));
    td_tensor *c = ASSERT_TENSOR(td_scaled_dot_product_attention_ext(q, q, q, NULL, 0.5, false, NAN, 5, 41));
    ASSERT(test_rel_err(a, b) == 0);
    ASSERT(test_rel_err(a, c) > 1e-3);
    td_manual_seed(77);
    td_tensor *d = ASSERT_TENSOR(td_scaled_dot_product_attention(q, q, q, NULL, 0.5, false, NAN));
    td_tensor *e = ASSERT_TENSOR(td_scaled_dot_product_attention(q, q, q, NULL, 0.5, false, NAN));
    td_manual_seed(77);
    td_tensor *f = ASSERT_TENSOR(td_scaled_dot_product_attention(q, q, q, NULL, 0.5, false, NAN));
    ASSERT(test_rel_err(d, f) == 0);
    ASSERT(test_rel_err(d, e) > 1e-3);
    td_scope_end();
}

TEST(errors) {
    td_scope_begin();
    int64_t s4[4] = {1, 2, 3, 4}, s4b[4] = {1, 2, 5, 3}, s2[2] = {3, 7};
    td_tensor *q = ASSERT_TENSOR(td_zeros(4, s4, TD_F32, TD_CPU)),
              *kb = ASSERT_TENSOR(td_zeros(4, s4b, TD_F32, TD_CPU));
    td_tensor *qd = ASSERT_TENSOR(td_zeros(4, s4, TD_F64, TD_CPU)),
              *m = ASSERT_TENSOR(td_zeros(2, s2, TD_BOOL, TD_CPU));
    ASSERT_ERROR(td_scaled_dot_product_attention(q, kb, kb, NULL, 0, false, NAN), TD_ERR_SHAPE, "do not fit");
    ASSERT_ERROR(td_scaled_dot_product_attention(q, qd, q, NULL, 0, false, NAN), TD_ERR_DTYPE, "one dtype");
    ASSERT_ERROR(td_scaled_dot_product_attention(q, q, q, m, 0, false, NAN), TD_ERR_SHAPE, "does not broadcast");
    ASSERT_ERROR(td_scaled_dot_product_attention(q, q, q, NULL, 1, false, NAN), TD_ERR_MISUSE, "dropout_p 1");
    ASSERT_ERROR(td_scaled_dot_product_attention(q, q, q, qd, 0, false, NAN), TD_ERR_DTYPE, "bool or q's dtype");
    /* a mask that needs a gradient: the backward says so */
    int64_t s33[2] = {3, 3};
    td_tensor *fm = ASSERT_TENSOR(td_zeros(2, s33, TD_F32, TD_CPU)),
              *ql = ASSERT_TENSOR(td_zeros(4, s4, TD_F32, TD_CPU));
    ASSERT_OK(td_set_requires_grad(fm, true));
    ASSERT_OK(td_set_requires_grad(ql, true));
    td_tensor *y =
        ASSERT_TENSOR(td_sum(td_scaled_dot_product_attention(ql, ql, ql, fm, 0, false, NAN), 0, NULL, false));
    ASSERT_ERROR(td_backward(y, NULL, false), TD_ERR_UNSUPPORTED, "attn_mask requires grad");
    td_scope_end();
}

/* MultiheadAttention's key_padding_mask [N, S] (true: ignore the key): what padded keys hold does not matter, and
** batch row b equals the attention of row b alone with that row's padding as a bool attn_mask [T, S]. */
TEST(mha_key_padding) {
    td_scope_begin();
    test_seed();
    int64_t sx[3] = {2, 5, 8}, sp[2] = {2, 5}, one[3] = {1, 5, 8}, st[2] = {5, 5};
    double x[80], pad[10] = {0, 0, 1, 0, 1, 0, 0, 0, 0, 1}, row1[25];
    for (int i = 0; i < 80; i++) x[i] = test_uniform(-1, 1);
    td_manual_seed(3);
    td_module *m = ASSERT_TENSOR_MODULE(td_multihead_attention_new_ext(8, 2, true, false, 0.1));
    td_module_eval(m);
    td_tensor *q = test_tensor_f64(x, 3, sx, TD_F32), *kpm = td_cast(test_tensor_f64(pad, 2, sp, TD_F64), TD_BOOL);
    td_tensor *y = ASSERT_TENSOR(td_multihead_attention_forward_ext(m, q, q, q, NULL, kpm, false));
    for (int i = 0; i < 8; i++) x[2 * 8 + i] += 5, x[40 + 4 * 8 + i] -= 3; /* padded keys change */
    td_tensor *kv = test_tensor_f64(x, 3, sx, TD_F32);
    td_tensor *y2 = ASSERT_TENSOR(td_multihead_attention_forward_ext(m, q, kv, kv, NULL, kpm, false));
    ASSERT(test_rel_err(y2, y) < 1e-6);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) row1[i * 5 + j] = pad[5 + j];
    td_tensor *q1 = test_tensor_f64(x + 40, 3, one, TD_F32),
              *am = td_cast(test_tensor_f64(row1, 2, st, TD_F64), TD_BOOL);
    td_tensor *y1 = ASSERT_TENSOR(td_multihead_attention_forward(m, q1, q1, q1, am, false));
    td_tensor *yb =
        ASSERT_TENSOR(td_slice(td_multihead_attention_forward_ext(m, kv, kv, kv, NULL, kpm, false), 0, 1, 2, 1));
    ASSERT(test_rel_err(yb, y1) < 1e-6);
    ASSERT_ERROR(td_multihead_attention_forward_ext(m, q, q, q, NULL, am, false), TD_ERR_SHAPE,
                 "key_padding_mask has shape");
    td_module_free(m);
    td_scope_end();
}

/* MultiheadAttention's dropout acts in training only, and repeats from td_manual_seed. */
TEST(mha_dropout) {
    td_scope_begin();
    test_seed();
    int64_t sx[3] = {2, 6, 8};
    double x[96];
    for (int i = 0; i < 96; i++) x[i] = test_uniform(-1, 1);
    td_tensor *q = test_tensor_f64(x, 3, sx, TD_F32);
    td_manual_seed(9);
    td_module *m = ASSERT_TENSOR_MODULE(td_multihead_attention_new_ext(8, 2, true, true, 0.5));
    td_manual_seed(9);
    td_module *m0 = ASSERT_TENSOR_MODULE(td_multihead_attention_new_ext(8, 2, true, true, 0));
    td_tensor *ref = ASSERT_TENSOR(td_module_forward(m0, q));
    td_manual_seed(100);
    td_tensor *a = ASSERT_TENSOR(td_module_forward(m, q));
    td_manual_seed(100);
    td_tensor *b = ASSERT_TENSOR(td_module_forward(m, q));
    ASSERT(test_rel_err(a, b) == 0);
    ASSERT(test_rel_err(a, ref) > 1e-3);
    td_module_eval(m);
    ASSERT(test_rel_err(ASSERT_TENSOR(td_module_forward(m, q)), ref) == 0);
    ASSERT_ERROR(td_multihead_attention_new_ext(8, 2, true, true, 1), TD_ERR_MISUSE, "dropout 1 is outside");
    td_module_free(m), td_module_free(m0);
    td_scope_end();
}

TEST_MAIN(TESTS)
