/* td_gradcheck over every differentiable op of the op table (f64, central
** differences, PyTorch's tolerances). Inputs are drawn from a printed seed
** (TD_SEED overrides it) and kept away from kinks: values that need grad lie
** in +-[0.1, 1], so relu/abs/clamp/max never sit on a corner and ties have
** probability zero. every_op_has_a_case fails when an op is added to the table
** without a case here.
** Each case then runs again on every available CUDA and Vulkan device, from
** the same CPU inputs moved there (f64 leaves), so the finite differences run
** through that backend's kernels. TD_GRADCHECK_DEVICES="vulkan:0,cuda:0"
** (comma-separated; "" for CPU only) picks the devices instead. An absent
** device prints "skipped: no ... device"; an op or dtype the backend lacks
** prints "skipped-unsupported"; neither counts as a pass on that device. */
#include "core/internal.h"
#include "op_cases.h"
#include "test_util.h"

/* clang-format off */
/* the gradcheck cases: one per CHECK and GRADGRAD row of OP_CASES (tests/op_cases.h), named by its op kind */
#define GC_PICK_CHECK(X, K)    X(K)
#define GC_PICK_GRADGRAD(X, K) X(K)
#define GC_PICK_NONE(X, K)
#define GC_PICK_REFUSED(X, K)
#define GC_ROW_(name, K, dts, tol, grad, X) GC_PICK_##grad(X, K)
#define GC_CASES(X) OP_CASES(GC_ROW_, X)
/* td_gradgradcheck (create_graph backward) of the ops whose backward is a
** fused backward op, and the fused ops each one covers */
#define GG_CASES(X)                                                                                           \
    X(gradgrad_GELU) X(gradgrad_CROSS_ENTROPY) X(gradgrad_CONV2D) X(gradgrad_MAX_POOL2D)                       \
    X(gradgrad_AVG_POOL2D) X(gradgrad_EMBEDDING) X(gradgrad_SOFTMAX) X(gradgrad_LOG_SOFTMAX)                \
    X(gradgrad_LINEAR_GELU) X(gradgrad_GROUP_NORM) X(gradgrad_LINEAR)
/* ops composed from others in the core */
#define GC_COMPOSED(X)                                                                                        \
    X(softmax_dim0) X(log_softmax_dim1) X(masked_fill) X(triu) X(tril) X(matmul_shared_a) X(matmul_strided_a)  \
    X(linear_3d) X(matmul_vec_mat) X(matmul_mat_vec) X(matmul_vec_vec) X(matmul_batched_vec) X(matmul_vec_batched)
#define TESTS(X)                                                                                              \
    GC_CASES(X) GC_COMPOSED(X) X(views) X(every_op_has_a_case) X(gradcheck_catches_a_wrong_formula)          \
    GG_CASES(X) X(every_fused_backward_has_a_gradgrad_case) X(gradgradcheck_catches_a_wrong_formula)          \
    X(gradgrad_ATTENTION) X(attention_create_graph_matches_fused) X(gradgrad_LAYER_NORM) X(gradgrad_ADD_LAYER_NORM)
/* clang-format on */

/* ---- inputs ---- */
enum { G, P, C, CP, IDX, MASK }; /* grad +-[0.1,1]; grad [0.5,1.5]; const; const positive; int64 [0,range); bool */
typedef struct in_spec {
    int kind;
    int64_t range; /* IDX */
    int ndim;
    int64_t shape[4];
} in_spec;
/* clang-format off */
#define S(kind, ndim, ...) {kind, 0, ndim, {__VA_ARGS__}}
#define SI(range, ndim, ...) {IDX, range, ndim, {__VA_ARGS__}}
/* clang-format on */

static td_tensor *make_input(const in_spec *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->shape[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        double u = test_uniform(0, 1);
        switch (s->kind) {
        case G: v[i] = (test_uniform(0, 1) < 0.5 ? -1 : 1) * (0.1 + 0.9 * u); break;
        case P:
        case CP: v[i] = 0.5 + u; break;
        case C: v[i] = 2 * u - 1; break;
        case IDX: v[i] = (double)(int64_t)(u * (double)s->range); break;
        case MASK: v[i] = u < 0.5; break;
        }
    }
    td_dtype dt = s->kind == IDX ? TD_I64 : s->kind == MASK ? TD_BOOL : TD_F64;
    td_scope_begin();
    td_tensor *f = ASSERT_TENSOR(td_from_data(v, s->ndim, s->shape, TD_F64, TD_CPU));
    td_tensor *t = ASSERT_TENSOR(td_keep(td_cast(f, dt)));
    td_scope_end();
    free(v);
    if (s->kind == G || s->kind == P) ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* The same check on dev: each input copied there as a leaf (requiring grad as on
** the CPU). A device without the op or dtype reports skipped-unsupported. */
/* td_gradcheck, or with second td_gradgradcheck (a random grad_output) */
static td_status check(td_multi_fn fn, int n, td_tensor *const *in, bool second) {
    return second ? td_gradgradcheck(fn, NULL, n, in, NULL, NULL) : td_gradcheck(fn, NULL, n, in, NULL);
}

static void run_on_device(const char *name, td_multi_fn fn, int n, td_tensor *const *in, td_device dev, bool second) {
    char dn[32];
    td_device_str(dev, dn, sizeof dn);
    if (!td_device_available(dev)) {
        const char *why = td_backend_unavailable_reason(dev.type);
        fprintf(stderr, "  %s on %s: skipped: no %s device%s%s\n", name, dn,
                dev.type == TD_DEVICE_VULKAN ? "Vulkan" : "CUDA", why ? ": " : "", why ? why : "");
        return;
    }
    td_tensor *d[6];
    td_clear_error();
    td_status st = TD_OK;
    for (int i = 0; i < n; i++) {
        td_scope_begin();
        d[i] = td_keep(td_detach(td_to(in[i], dev)));
        td_scope_end();
        if (!d[i]) {
            st = td_last_status();
            continue;
        }
        ASSERT(td_device_equal(td_tensor_device(d[i]), dev));
        if (td_requires_grad(in[i])) ASSERT_OK(td_set_requires_grad(d[i], true));
    }
    if (st == TD_OK) {
        td_scope_begin();
        st = check(fn, n, d, second);
        td_scope_end();
    }
    if (st == TD_ERR_UNSUPPORTED)
        fprintf(stderr, "  %s on %s: skipped-unsupported: %s\n", name, dn, td_last_error());
    else if (st != TD_OK)
        TEST_FAIL_("%s on %s: gradcheck returned %s", name, dn, td_status_str(st));
    else
        fprintf(stderr, "  %s on %s: ok\n", name, dn);
    td_clear_error();
    for (int i = 0; i < n; i++) td_release(d[i]);
}

/* The non-CPU devices to check: $TD_GRADCHECK_DEVICES, else every device of the
** CUDA and Vulkan backends (vulkan:0 and cuda:0 when a backend is absent, so
** the skip is printed). Returns how many were written to devs (at most max). */
static int gradcheck_devices(td_device *devs, int max) {
    int n = 0;
    const char *env = getenv("TD_GRADCHECK_DEVICES");
    if (env) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", env);
        for (char *tok = strtok(buf, ", "); tok && n < max; tok = strtok(NULL, ", ")) {
            td_device d;
            td_status st = td_device_parse(tok, &d);
            if (st == TD_ERR_UNAVAILABLE) { /* kept, so that its column prints the skip */
                const char *colon = strchr(tok, ':');
                d = (td_device){strncmp(tok, "cuda", 4) ? TD_DEVICE_VULKAN : TD_DEVICE_CUDA,
                                colon ? atoi(colon + 1) : 0};
            } else if (st != TD_OK)
                TEST_FAIL_("TD_GRADCHECK_DEVICES: cannot parse \"%s\"", tok);
            if (d.type != TD_DEVICE_CPU) devs[n++] = d;
        }
        td_clear_error();
        return n;
    }
    const int types[2] = {TD_DEVICE_CUDA, TD_DEVICE_VULKAN};
    for (int t = 0; t < 2; t++) {
        const td_backend *be = td_backend_for(types[t]);
        int count = be ? be->iface->device_count() : 0;
        if (count < 1 && n < max) devs[n++] = (td_device){types[t], 0};
        for (int i = 0; i < count && n < max; i++) devs[n++] = (td_device){types[t], i};
    }
    td_clear_error();
    return n;
}

static void run_case(const char *name, td_multi_fn fn, int n, const in_spec *specs, bool second) {
    fprintf(stderr, "  %s:", name);
    test_seed_from(0x7D5EED);
    td_tensor *in[6];
    for (int i = 0; i < n; i++) in[i] = make_input(&specs[i]);
    td_scope_begin();
    ASSERT_OK(check(fn, n, in, second));
    td_scope_end();
    td_device devs[8];
    int nd = gradcheck_devices(devs, 8);
    for (int k = 0; k < nd; k++) run_on_device(name, fn, n, in, devs[k], second);
    for (int i = 0; i < n; i++) td_release(in[i]);
}

#define CASE(NAME, N, ...)                                                                                             \
    TEST(NAME) {                                                                                                       \
        static const in_spec specs[N] = {__VA_ARGS__};                                                                 \
        run_case(#NAME, f_##NAME, N, specs, false);                                                                    \
    }
#define GG_CASE(NAME, N, ...)                                                                                          \
    TEST(NAME) {                                                                                                       \
        static const in_spec specs[N] = {__VA_ARGS__};                                                                 \
        run_case(#NAME, f_##NAME, N, specs, true);                                                                     \
    }
#define FN(NAME) static td_tensor *f_##NAME(void *user, int n, td_tensor *const *x)
#define UNUSED   (void)user, (void)n
/* a case of f(x[0]) or f(x[0], x[1]) */
#define UNARY_CASE(NAME, f, ...)                                                                                       \
    FN(NAME) {                                                                                                         \
        UNUSED;                                                                                                        \
        return f(x[0]);                                                                                                \
    }                                                                                                                  \
    CASE(NAME, 1, __VA_ARGS__)
#define BINARY_CASE(NAME, f, ...)                                                                                      \
    FN(NAME) {                                                                                                         \
        UNUSED;                                                                                                        \
        return f(x[0], x[1]);                                                                                          \
    }                                                                                                                  \
    CASE(NAME, 2, __VA_ARGS__)
/* a case of the expression EXPR of x[0] .. x[N - 1] */
#define EXPR_CASE(NAME, EXPR, N, ...)                                                                                  \
    FN(NAME) {                                                                                                         \
        UNUSED;                                                                                                        \
        return EXPR;                                                                                                   \
    }                                                                                                                  \
    CASE(NAME, N, __VA_ARGS__)

/* ---- one function and one case per op ---- */
EXPR_CASE(COPY, td_contiguous(td_transpose(x[0], 0, 1)), 1, S(G, 2, 3, 4))
BINARY_CASE(ADD, td_add, S(G, 2, 3, 4), S(G, 1, 4))
BINARY_CASE(SUB, td_sub, S(G, 2, 2, 3), S(G, 2, 2, 1))
BINARY_CASE(MUL, td_mul, S(G, 2, 3, 1), S(G, 2, 1, 4))
BINARY_CASE(DIV, td_div, S(G, 2, 3, 4), S(P, 2, 3, 4))
BINARY_CASE(POW, td_pow, S(P, 2, 3, 4), S(G, 2, 3, 4))
BINARY_CASE(MAXIMUM, td_maximum, S(G, 2, 3, 4), S(G, 1, 4))
BINARY_CASE(MINIMUM, td_minimum, S(G, 2, 3, 4), S(G, 2, 3, 4))
EXPR_CASE(WHERE, td_where(x[0], x[1], x[2]), 3, S(MASK, 2, 3, 4), S(G, 2, 3, 4), S(G, 1, 4))
UNARY_CASE(NEG, td_neg, S(G, 2, 2, 3))
UNARY_CASE(ABS, td_abs, S(G, 2, 2, 3))
UNARY_CASE(EXP, td_exp, S(G, 2, 2, 3))
UNARY_CASE(LOG, td_log, S(P, 2, 2, 3))
UNARY_CASE(SQRT, td_sqrt, S(P, 2, 2, 3))
UNARY_CASE(RSQRT, td_rsqrt, S(P, 2, 2, 3))
UNARY_CASE(SIN, td_sin, S(G, 2, 2, 3))
UNARY_CASE(COS, td_cos, S(G, 2, 2, 3))
UNARY_CASE(TANH, td_tanh, S(G, 2, 2, 3))
UNARY_CASE(SIGMOID, td_sigmoid, S(G, 2, 2, 3))
UNARY_CASE(RELU, td_relu, S(G, 2, 3, 4))
FN(GELU) {
    UNUSED;
    return td_add(td_gelu(x[0], false), td_mul_scalar(td_gelu(x[0], true), 0.5));
} /* both forms */
CASE(GELU, 1, S(G, 2, 3, 4))
UNARY_CASE(SILU, td_silu, S(G, 2, 2, 3))
EXPR_CASE(CLAMP, td_add(td_clamp(x[0], -0.55, 0.45), td_clamp(x[0], NAN, 0.05)), 1, S(G, 2, 4, 5))
FN(SUM) {
    UNUSED;
    return td_sum(x[0], 2, (int[]){0, 2}, false);
}
CASE(SUM, 1, S(G, 3, 2, 3, 4))
FN(MEAN) {
    UNUSED;
    return td_mean(x[0], 1, (int[]){1}, true);
}
CASE(MEAN, 1, S(G, 3, 2, 3, 4))
FN(MAX) {
    UNUSED;
    return td_amax(x[0], 1, (int[]){1}, false);
}
CASE(MAX, 1, S(G, 3, 2, 3, 4))
EXPR_CASE(MIN, td_amin(x[0], 0, NULL, false), 1, S(G, 2, 3, 4))
FN(VAR) {
    UNUSED;
    return td_add(td_var(x[0], 1, (int[]){1}, 1, false), td_sum(td_var(x[0], 0, NULL, 0, true), 0, NULL, false));
}
CASE(VAR, 1, S(G, 2, 3, 4))
FN(LOGSUMEXP) {
    UNUSED;
    return td_logsumexp(x[0], 1, (int[]){-1}, false);
}
CASE(LOGSUMEXP, 1, S(G, 2, 3, 4))
BINARY_CASE(MATMUL, td_matmul, S(G, 3, 2, 3, 4), S(G, 2, 4, 2))
FN(LINEAR) { /* with a bias and without, on a 3-d x */
    UNUSED;
    return td_add(td_linear(x[0], x[1], x[2]), td_mul_scalar(td_linear(x[0], x[1], NULL), 0.5));
}
CASE(LINEAR, 3, S(G, 3, 2, 3, 4), S(G, 2, 5, 4), S(G, 1, 5))
FN(LINEAR_GELU) { /* erf form with a bias on a 3-d x; tanh form without */
    UNUSED;
    return td_add(td_linear_gelu(x[0], x[1], x[2], false), td_linear_gelu(x[0], x[1], NULL, true));
}
CASE(LINEAR_GELU, 3, S(G, 3, 2, 3, 4), S(G, 2, 5, 4), S(G, 1, 5))
FN(LINEAR_RESIDUAL) { /* with a bias on a 3-d x and without */
    UNUSED;
    return td_add(td_linear_residual(x[0], x[1], x[2], x[3]),
                  td_mul_scalar(td_linear_residual(x[0], x[1], NULL, x[3]), 0.5));
}
CASE(LINEAR_RESIDUAL, 4, S(G, 3, 2, 3, 4), S(G, 2, 5, 4), S(G, 1, 5), S(G, 3, 2, 3, 5))
EXPR_CASE(SOFTMAX, td_softmax(x[0], -1), 1, S(G, 2, 2, 4))
EXPR_CASE(LOG_SOFTMAX, td_log_softmax(x[0], -1), 1, S(G, 2, 2, 4))
EXPR_CASE(softmax_dim0, td_softmax(x[0], 0), 1, S(G, 2, 3, 4))
EXPR_CASE(log_softmax_dim1, td_log_softmax(x[0], 1), 1, S(G, 3, 2, 3, 2))
EXPR_CASE(masked_fill, td_masked_fill(x[0], x[1], 0.25), 2, S(G, 2, 3, 4), S(MASK, 1, 4))
EXPR_CASE(triu, td_triu(x[0], 1), 1, S(G, 3, 2, 3, 4))
EXPR_CASE(tril, td_tril(x[0], -1), 1, S(G, 2, 4, 3))
/* the folded matmul gradients: a 2-D a against a batched b, a 3-D a read
** through a transpose against a 2-D b, and Linear on [B, T, in] with a bias */
BINARY_CASE(matmul_shared_a, td_matmul, S(G, 2, 3, 4), S(G, 3, 2, 4, 2))
EXPR_CASE(matmul_strided_a, td_matmul(td_transpose(x[0], 1, 2), x[1]), 2, S(G, 3, 2, 4, 3), S(G, 2, 4, 2))
EXPR_CASE(linear_3d, td_linear(x[0], x[1], x[2]), 3, S(G, 3, 2, 3, 4), S(G, 2, 5, 4), S(G, 1, 5))
/* torch.matmul's 1-D operands: vector @ matrix, matrix @ vector, the dot
** product (0-d), a batch @ vector and a vector @ batch (summed over the batch) */
BINARY_CASE(matmul_vec_mat, td_matmul, S(G, 1, 3), S(G, 2, 3, 4))
BINARY_CASE(matmul_mat_vec, td_matmul, S(G, 2, 4, 3), S(G, 1, 3))
BINARY_CASE(matmul_vec_vec, td_matmul, S(G, 1, 5), S(G, 1, 5))
BINARY_CASE(matmul_batched_vec, td_matmul, S(G, 3, 2, 4, 3), S(G, 1, 3))
BINARY_CASE(matmul_vec_batched, td_matmul, S(G, 1, 3), S(G, 4, 2, 2, 3, 4))
FN(LAYER_NORM) { /* normalized over the last two dims, affine, and over the last without */
    UNUSED;
    return td_add(td_layer_norm(x[0], 2, x[1], x[2], 1e-5), td_layer_norm(x[0], 1, NULL, NULL, 1e-5));
}
CASE(LAYER_NORM, 3, S(G, 3, 2, 2, 3), S(G, 2, 2, 3), S(G, 2, 2, 3))
FN(ADD_LAYER_NORM) { /* both outputs used: y, and the sum s (the next residual) */
    UNUSED;
    td_tensor *s = NULL, *y = td_add_layer_norm(x[0], x[1], 1, x[2], x[3], 1e-5, &s);
    return td_add(y, td_mul(s, s));
}
CASE(ADD_LAYER_NORM, 4, S(G, 2, 3, 4), S(G, 2, 3, 4), S(G, 1, 4), S(G, 1, 4))
FN(GROUP_NORM) { /* 2 groups of 2 channels of 3x2, affine, and 4 groups of one without */
    UNUSED;
    return td_add(td_group_norm(x[0], 2, x[1], x[2], 1e-5), td_group_norm(x[0], 4, NULL, NULL, 1e-5));
}
CASE(GROUP_NORM, 3, S(G, 4, 2, 4, 3, 2), S(G, 1, 4), S(G, 1, 4))
FN(CROSS_ENTROPY) { /* class weights, label smoothing and an ignored row (target 0) */
    UNUSED;
    return td_add(td__cross_entropy(x[0], x[1], x[2], 0, 0.1, TD_REDUCTION_MEAN),
                  td_sum(td__cross_entropy(x[0], x[1], NULL, -100, 0, TD_REDUCTION_NONE), 0, NULL, false));
}
CASE(CROSS_ENTROPY, 3, S(G, 2, 4, 5), SI(5, 1, 4), S(CP, 1, 5))
FN(CONV2D) { /* stride 2x1, padding 1, and a grouped dilated one */
    UNUSED;
    td_tensor *a = td_conv2d(x[0], x[1], x[2], (int[]){2, 1}, (int[]){1, 1}, (int[]){1, 1}, 1);
    td_tensor *b = td_conv2d(x[0], x[3], NULL, (int[]){1, 1}, (int[]){2, 1}, (int[]){2, 1}, 2);
    return td_add(td_sum(a, 0, NULL, false), td_mul(td_sum(b, 0, NULL, false), td_sum(a, 0, NULL, false)));
}
CASE(CONV2D, 4, S(G, 4, 2, 2, 4, 4), S(G, 4, 3, 2, 3, 3), S(G, 1, 3), S(G, 4, 2, 1, 2, 2))
FN(MAX_POOL2D) {
    UNUSED;
    return td_max_pool2d(x[0], (int[]){2, 2}, (int[]){2, 1}, (int[]){1, 0}, NULL);
}
CASE(MAX_POOL2D, 1, S(G, 4, 1, 2, 4, 5))
FN(AVG_POOL2D) {
    UNUSED;
    return td_add(td_avg_pool2d(x[0], (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}, false),
                  td_avg_pool2d(x[0], (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}, true));
}
CASE(AVG_POOL2D, 1, S(G, 4, 1, 2, 5, 5))
BINARY_CASE(EMBEDDING, td_embedding, S(G, 2, 6, 3), SI(6, 2, 2, 4))
EXPR_CASE(INDEX_SELECT, td_index_select(x[0], 1, x[1]), 2, S(G, 2, 3, 4), SI(4, 1, 6))
EXPR_CASE(GATHER, td_gather(x[0], 1, x[1]), 2, S(G, 2, 3, 4), SI(4, 2, 3, 5))
EXPR_CASE(SCATTER_ADD, td_scatter_add(x[0], 0, x[1], x[2]), 3, S(G, 2, 3, 4), SI(3, 2, 2, 4), S(G, 2, 2, 4))
EXPR_CASE(CAT, td_cat(3, x, 0), 3, S(G, 2, 2, 3), S(C, 2, 1, 3), S(G, 2, 4, 3))
EXPR_CASE(DROPOUT, td_dropout(x[0], 0.3, 7, 0), 1, S(G, 2, 4, 5))
FN(ATTENTION) { /* causal + bool mask + dropout (odd L 5, S 6), plus plain attention with a given scale */
    UNUSED;
    td_tensor *a = td_scaled_dot_product_attention_ext(x[0], x[1], x[2], x[3], 0.25, true, NAN, 11, 4);
    return td_add(a, td_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, false, 0.7));
}
CASE(ATTENTION, 4, S(G, 3, 2, 5, 3), S(G, 3, 2, 6, 3), S(G, 3, 2, 6, 4), S(MASK, 2, 5, 6))

/* the fused backward ops, called directly: their own formulas (which give
** create_graph its second derivatives) against finite differences */
EXPR_CASE(GELU_BACKWARD,
          td_add(td__gelu_backward(x[0], x[1], false), td_mul_scalar(td__gelu_backward(x[0], x[1], true), 0.5)), 2,
          S(G, 2, 2, 3), S(G, 2, 2, 3))
FN(CROSS_ENTROPY_BACKWARD) { /* mean (weights, smoothing, ignored target 0), none, sum */
    UNUSED;
    td_tensor *a = td__cross_entropy_backward(x[0], x[1], x[2], x[3], 0, 0.1, TD_REDUCTION_MEAN);
    td_tensor *b = td__cross_entropy_backward(x[4], x[1], x[2], NULL, -100, 0, TD_REDUCTION_NONE);
    td_tensor *c = td__cross_entropy_backward(x[0], x[1], x[2], x[3], -100, 0.2, TD_REDUCTION_SUM);
    return td_add(td_add(a, b), c);
}
CASE(CROSS_ENTROPY_BACKWARD, 5, S(G, 0, 1), S(G, 2, 4, 5), SI(5, 1, 4), S(CP, 1, 5), S(G, 1, 4))
FN(SOFTMAX_BACKWARD) { /* y is any tensor here, not only a softmax: the formula treats it as an input */
    UNUSED;
    return td__softmax_backward(x[0], x[1]);
}
CASE(SOFTMAX_BACKWARD, 2, S(G, 2, 3, 5), S(G, 2, 3, 5))
FN(LOG_SOFTMAX_BACKWARD) { /* and a broadcast dy (expanded, made contiguous by the front-end) */
    UNUSED;
    return td_add(td__log_softmax_backward(x[0], x[1]),
                  td__log_softmax_backward(td_expand(x[2], 2, x[1]->shape), x[1]));
}
CASE(LOG_SOFTMAX_BACKWARD, 3, S(G, 2, 3, 5), S(G, 2, 3, 5), S(G, 2, 1, 5))
static const int conv_s[2] = {2, 1}, conv_p[2] = {1, 1}, conv_d[2] = {1, 2};
FN(CONV2D_BACKWARD_INPUT) { /* x [2,2,4,5] with w [3,2,3,3]: dy [2,3,2,3] */
    UNUSED;
    return td__conv2d_backward_input(x[0], x[1], (int64_t[]){2, 2, 4, 5}, conv_s, conv_p, conv_d, 1);
}
CASE(CONV2D_BACKWARD_INPUT, 2, S(G, 4, 2, 3, 2, 3), S(G, 4, 3, 2, 3, 3))
FN(CONV2D_BACKWARD_WEIGHT) {
    UNUSED;
    return td__conv2d_backward_weight(x[0], x[1], (int64_t[]){3, 2, 3, 3}, conv_s, conv_p, conv_d, 1);
}
CASE(CONV2D_BACKWARD_WEIGHT, 2, S(G, 4, 2, 3, 2, 3), S(G, 4, 2, 2, 4, 5))
FN(MAX_POOL2D_BACKWARD) { /* the indices of a real pooling of the constant x[1] */
    UNUSED;
    td_tensor *idx;
    if (!td_max_pool2d(x[1], (int[]){2, 2}, (int[]){2, 1}, (int[]){1, 0}, &idx)) return NULL;
    return td__max_pool2d_backward(x[0], idx, x[1]->shape);
}
CASE(MAX_POOL2D_BACKWARD, 2, S(G, 4, 1, 2, 3, 4), S(C, 4, 1, 2, 4, 5))
FN(AVG_POOL2D_BACKWARD) {
    UNUSED;
    const int k[2] = {3, 3}, st[2] = {2, 2}, pad[2] = {1, 1};
    const int64_t xs[4] = {1, 2, 5, 5};
    return td_add(td__avg_pool2d_backward(x[0], xs, k, st, pad, false),
                  td__avg_pool2d_backward(x[0], xs, k, st, pad, true));
}
CASE(AVG_POOL2D_BACKWARD, 1, S(G, 4, 1, 2, 3, 3))
FN(EMBEDDING_BACKWARD) { /* without and with padding_idx 2 */
    UNUSED;
    return td_add(td__embedding_backward(x[0], x[1], 6, -1), td__embedding_backward(x[0], x[1], 6, 2));
}
CASE(EMBEDDING_BACKWARD, 2, S(G, 3, 2, 4, 3), SI(6, 2, 2, 4))

/* second order: x^2 after the linear ops (pools, embedding), so that the
** second derivative in x is not zero */
FN(gradgrad_GELU) {
    UNUSED;
    return td_add(td_gelu(x[0], false), td_mul_scalar(td_gelu(x[0], true), 0.5));
}
GG_CASE(gradgrad_GELU, 1, S(G, 2, 2, 3))
FN(gradgrad_SOFTMAX) { /* over the last dim and over dim 0 (transposed to the end and back) */
    UNUSED;
    return td_add(td_softmax(x[0], -1), td_mul_scalar(td_softmax(x[0], 0), 0.5));
}
GG_CASE(gradgrad_SOFTMAX, 1, S(G, 2, 3, 4))
FN(gradgrad_LOG_SOFTMAX) {
    UNUSED;
    return td_add(td_log_softmax(x[0], -1), td_mul_scalar(td_log_softmax(x[0], 0), 0.5));
}
GG_CASE(gradgrad_LOG_SOFTMAX, 1, S(G, 2, 3, 4))
FN(gradgrad_LINEAR_GELU) { /* h is recomputed with ops under create_graph */
    UNUSED;
    return td_add(td_linear_gelu(x[0], x[1], x[2], false), td_linear_gelu(x[0], x[1], NULL, true));
}
GG_CASE(gradgrad_LINEAR_GELU, 3, S(G, 2, 3, 4), S(G, 2, 5, 4), S(G, 1, 5))
FN(gradgrad_LINEAR) { /* dx = dy w and LINEAR_WGRAD's dw, db are MATMUL and SUM under create_graph */
    UNUSED;
    return td_mul(td_linear(x[0], x[1], x[2]), td_linear(x[0], x[1], NULL));
}
GG_CASE(gradgrad_LINEAR, 3, S(G, 2, 3, 4), S(G, 2, 5, 4), S(G, 1, 5))
FN(gradgrad_GROUP_NORM) { /* mean and rstd are recomputed with ops under create_graph */
    UNUSED;
    return td_group_norm(x[0], 2, x[1], x[2], 1e-5);
}
GG_CASE(gradgrad_GROUP_NORM, 3, S(G, 3, 2, 4, 3), S(G, 1, 4), S(G, 1, 4))
FN(gradgrad_CROSS_ENTROPY) { /* weights, smoothing, an ignored row; none; one row as [C] with a 0-d target */
    UNUSED;
    td_tensor *row = td__cross_entropy(td_select(x[0], 0, 1), td_select(x[1], 0, 1), x[2], -100, 0.1, TD_REDUCTION_SUM);
    return td_add(td_add(td__cross_entropy(x[0], x[1], x[2], 0, 0.1, TD_REDUCTION_MEAN), row),
                  td_sum(td__cross_entropy(x[0], x[1], NULL, -100, 0.05, TD_REDUCTION_NONE), 0, NULL, false));
}
GG_CASE(gradgrad_CROSS_ENTROPY, 3, S(G, 2, 3, 4), SI(4, 1, 3), S(CP, 1, 4))
FN(gradgrad_CONV2D) { /* stride, padding and bias, and a grouped dilated conv; their product */
    UNUSED;
    td_tensor *a = td_conv2d(x[0], x[1], x[2], (int[]){2, 1}, (int[]){1, 1}, (int[]){1, 1}, 1);
    td_tensor *b = td_conv2d(x[0], x[3], NULL, (int[]){1, 1}, (int[]){2, 1}, (int[]){2, 1}, 2);
    return td_add(td_sum(td_mul(a, a), 0, NULL, false), td_mul(td_sum(b, 0, NULL, false), td_sum(a, 0, NULL, false)));
}
GG_CASE(gradgrad_CONV2D, 4, S(G, 4, 1, 2, 3, 4), S(G, 4, 2, 2, 3, 3), S(G, 1, 2), S(G, 4, 2, 1, 2, 2))
FN(gradgrad_MAX_POOL2D) {
    UNUSED;
    td_tensor *y = td_max_pool2d(x[0], (int[]){2, 2}, (int[]){2, 1}, (int[]){1, 0}, NULL);
    return td_mul(y, y);
}
GG_CASE(gradgrad_MAX_POOL2D, 1, S(G, 4, 1, 2, 3, 4))
FN(gradgrad_AVG_POOL2D) {
    UNUSED;
    td_tensor *y = td_add(td_avg_pool2d(x[0], (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}, false),
                          td_avg_pool2d(x[0], (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}, true));
    return td_mul(y, y);
}
GG_CASE(gradgrad_AVG_POOL2D, 1, S(G, 4, 1, 2, 4, 4))
FN(gradgrad_EMBEDDING) {
    UNUSED;
    td_tensor *y = td_embedding(x[0], x[1]);
    return td_mul(y, y);
}
GG_CASE(gradgrad_EMBEDDING, 2, S(G, 2, 5, 2), SI(5, 2, 2, 3))

/* the view ops autograd records besides the table: permute, slice with a
** step, select, expand, reshape/squeeze/unsqueeze */
FN(views) {
    UNUSED;
    td_tensor *t = td_slice(td_permute(x[0], (int[]){2, 0, 1}), 0, 1, 4, 2); /* [4,2,3] -> [2,2,3] */
    td_tensor *e = td_expand(td_reshape(x[1], 2, (int64_t[]){1, 3}), 3, (int64_t[]){2, 2, 3});
    td_tensor *s = td_squeeze(td_unsqueeze(td_select(x[0], 1, 2), 0), 0); /* [2,4] */
    return td_add(td_mul(t, e), td_reshape(td_sum(s, 1, (int[]){1}, false), 3, (int64_t[]){1, 2, 1}));
}
CASE(views, 2, S(G, 3, 2, 3, 4), S(G, 1, 3))

/* the autograd column of OP_CASES, by op kind */
static const char *autograd_of(int k) {
    static const struct {
        int kind;
        const char *grad;
    } rows[] = {
#define ROW_(name, K, dts, tol, grad, ...) {TD_OP_##K, #grad},
        OP_CASES(ROW_, )
#undef ROW_
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].kind == k) return rows[i].grad;
    return "NONE";
}

TEST(every_op_has_a_case) {
    for (int k = 0; k < TD_OP_COUNT; k++) {
        const char *g = autograd_of(k);
        bool has = !strcmp(g, "CHECK") || !strcmp(g, "GRADGRAD");
        if (td_op_info((td_op_kind)k)->differentiable && !has)
            TEST_FAIL_("differentiable op %s has no gradcheck case", td_op_name((td_op_kind)k));
        if (has && !td_op_info((td_op_kind)k)->differentiable)
            TEST_FAIL_("op %s has a gradcheck case but is not differentiable", td_op_name((td_op_kind)k));
    }
}

TEST(every_fused_backward_has_a_gradgrad_case) {
    for (int k = 0; k < TD_OP_COUNT; k++) {
        const char *name = td_op_name((td_op_kind)k), *g = autograd_of(k);
        size_t len = strlen(name);
        if (len < 9 || strcmp(name + len - 9, "_backward") || !strcmp(g, "REFUSED")) continue;
        if (strcmp(g, "GRADGRAD")) TEST_FAIL_("fused backward op %s has no gradgrad case", name);
        if (!td_op_info((td_op_kind)k)->differentiable) TEST_FAIL_("fused backward op %s is not differentiable", name);
    }
}

/* ---- second order through attention and the norms (composed from ops under create_graph) ---- */

/* causal with a float mask and dropout (L 3, S 4), plus plain attention with a given scale */
FN(gradgrad_ATTENTION) {
    UNUSED;
    td_tensor *a = td_scaled_dot_product_attention_ext(x[0], x[1], x[2], x[3], 0.25, true, NAN, 11, 4);
    return td_add(a, td_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, false, 0.7));
}
GG_CASE(gradgrad_ATTENTION, 4, S(G, 3, 2, 3, 2), S(G, 3, 2, 4, 2), S(G, 3, 2, 4, 3), S(C, 2, 3, 4))

/* The composed gradients (create_graph) equal the fused ATTENTION_BACKWARD's: the same causal mask, bool mask
** and dropout keep mask (td_dropout's Philox rule on the same elements), to rounding; on the CPU and on each
** available CUDA and Vulkan device (f64). */
TEST(attention_create_graph_matches_fused) {
    const td_device devs[3] = {TD_CPU, TD_CUDA(0), TD_VULKAN(0)};
    int64_t sq[3] = {2, 5, 3}, sk[3] = {2, 6, 3}, sv[3] = {2, 6, 4}, sm[2] = {5, 6}, so[3] = {2, 5, 4};
    double mv[30];
    for (int i = 0; i < 30; i++) mv[i] = i % 6 == 0 || (i / 6 + i % 6) % 3 != 1; /* key 0 always visible */
    for (int d = 0; d < 3; d++) {
        if (!td_device_available(devs[d])) continue;
        td_scope_begin();
        td_tensor *in[3] = {test_uniform_tensor(3, sq, -1, 1, TD_F64, devs[d]),
                            test_uniform_tensor(3, sk, -1, 1, TD_F64, devs[d]),
                            test_uniform_tensor(3, sv, -1, 1, TD_F64, devs[d])};
        td_tensor *w = test_uniform_tensor(3, so, -1, 1, TD_F64, devs[d]);
        td_tensor *mask = ASSERT_TENSOR(td_to(td_cast(test_tensor_f64(mv, 2, sm, TD_F64), TD_BOOL), devs[d]));
        for (int i = 0; i < 3; i++) ASSERT_OK(td_set_requires_grad(in[i], true));
        td_tensor *a = td_scaled_dot_product_attention_ext(in[0], in[1], in[2], mask, 0.3, true, 0.6, 5, 9);
        td_tensor *y = ASSERT_TENSOR(td_sum(td_mul(a, w), 0, NULL, false));
        td_tensor *fused[3] = {0}, *composed[3] = {0};
        ASSERT_OK(td_grad(1, &y, NULL, 3, in, fused, true, false, false));
        ASSERT_OK(td_grad(1, &y, NULL, 3, in, composed, false, true, false));
        for (int i = 0; i < 3; i++) {
            ASSERT(td_requires_grad(composed[i]));
            double *f = test_host(fused[i]), *c = test_host(composed[i]), nz = 0;
            for (int64_t e = 0; e < td_numel(fused[i]); e++) {
                ASSERT_NEAR(c[e], f[e], 1e-10);
                nz += fabs(f[e]);
            }
            ASSERT(nz > 0.1); /* not trivially zero */
            free(f), free(c);
            td_release(fused[i]), td_release(composed[i]);
        }
        td_scope_end();
    }
}

/* mean and rstd are recomputed with ops under create_graph: over the last two dims with affine, the last without */
FN(gradgrad_LAYER_NORM) {
    UNUSED;
    return td_add(td_layer_norm(x[0], 2, x[1], x[2], 1e-5), td_layer_norm(x[0], 1, NULL, NULL, 1e-5));
}
GG_CASE(gradgrad_LAYER_NORM, 3, S(G, 3, 2, 2, 3), S(G, 2, 2, 3), S(G, 2, 2, 3))
FN(gradgrad_ADD_LAYER_NORM) { /* both outputs used: y, and the sum s */
    UNUSED;
    td_tensor *s = NULL, *y = td_add_layer_norm(x[0], x[1], 1, x[2], x[3], 1e-5, &s);
    return td_add(y, td_mul(s, s));
}
GG_CASE(gradgrad_ADD_LAYER_NORM, 4, S(G, 2, 3, 4), S(G, 2, 3, 4), S(G, 1, 4), S(G, 1, 4))

/* a custom function whose backward is off by 1% must fail, naming the element */
static td_status sq_fwd(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    out[0] = td_mul(in[0], in[0]);
    return td_ctx_save_for_backward(ctx, 1, in);
}
static td_status sq_bwd_wrong(td_function_ctx *ctx, int n_out, td_tensor *const *dy, int n_in, td_tensor **dx) {
    (void)n_out, (void)n_in;
    dx[0] = td_mul(dy[0], td_mul_scalar(td_ctx_saved(ctx, 0), 2.02));
    return TD_OK;
}
static const td_function wrong_square = {"wrong_square", sq_fwd, sq_bwd_wrong};
/* the custom function user on x */
FN(apply) {
    td_tensor *y;
    return td_function_apply((const td_function *)user, NULL, n, x, 1, &y) == TD_OK ? y : NULL;
}
/* f64 [0.5, -1, 2] that requires grad */
static td_tensor *three_leaves(void) {
    double v[3] = {0.5, -1, 2};
    int64_t three = 3;
    td_tensor *x = ASSERT_TENSOR(td_from_data(v, 1, &three, TD_F64, TD_CPU));
    ASSERT_OK(td_set_requires_grad(x, true));
    return x;
}

TEST(gradcheck_catches_a_wrong_formula) {
    td_tensor *x = three_leaves();
    void *f = (void *)&wrong_square;
    ASSERT_ERROR(td_gradcheck(f_apply, f, 1, &x, NULL), TD_ERR_STATE, "input 0 element 2, output element 2");
    td_scope_begin();
    td_tensor *xf = ASSERT_TENSOR(td_keep(td_cast(td_detach(x), TD_F32)));
    td_scope_end();
    ASSERT_OK(td_set_requires_grad(xf, true));
    ASSERT_ERROR(td_gradcheck(f_apply, f, 1, &xf, NULL), TD_ERR_DTYPE, "float64");
    td_release(xf);
    td_release(x);
}

/* a backward whose first order is right but that is not differentiable
** (3x^2 detached: a second derivative of zero) must fail gradgradcheck */
static td_status cube_fwd(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    out[0] = td_mul(td_mul(in[0], in[0]), in[0]);
    return td_ctx_save_for_backward(ctx, 1, in);
}
static td_status cube_bwd_detached(td_function_ctx *ctx, int n_out, td_tensor *const *dy, int n_in, td_tensor **dx) {
    (void)n_out, (void)n_in;
    td_tensor *x = td_ctx_saved(ctx, 0);
    dx[0] = td_mul(dy[0], td_detach(td_mul_scalar(td_mul(x, x), 3)));
    return TD_OK;
}
static const td_function detached_cube = {"detached_cube", cube_fwd, cube_bwd_detached};

TEST(gradgradcheck_catches_a_wrong_formula) {
    td_tensor *x = three_leaves();
    void *f = (void *)&detached_cube;
    ASSERT_OK(td_gradcheck(f_apply, f, 1, &x, NULL));
    ASSERT_ERROR(td_gradgradcheck(f_apply, f, 1, &x, NULL, NULL), TD_ERR_STATE,
                 "gradgradcheck: Jacobian mismatch for input 0");
    td_release(x);
}

TEST_MAIN(TESTS)
