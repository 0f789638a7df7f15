/*
** Math blocks (include/trident/math.h): every function and operator against
** the same math as composed ops, forward and backward, per dtype and device;
** gradcheck in f64; random well-typed expressions against their composition;
** implicit mode, checkpoint, value_and_grad, td_m; one test per error class.
*/
#include "runner.h"

/* ---- the block vs the composed ops ---- */

typedef td_tensor *(*compose_fn)(td_tensor *x, td_tensor *y, td_tensor *t);

#define C(name, expr)                                                                                                  \
    static td_tensor *c_##name(td_tensor *x, td_tensor *y, td_tensor *t) {                                             \
        (void)x, (void)y, (void)t;                                                                                     \
        return (expr);                                                                                                 \
    }
static td_tensor *S(double v, td_tensor *like) { return td_scalar(v, td_tensor_dtype(like), td_tensor_device(like)); }
static td_tensor *pos(td_tensor *x) { return td_add_scalar(td_abs(x), 0.5); }
static const int d1[1] = {1}, d0[1] = {0};

C(add, td_add(x, y))
C(sub, td_sub(x, y))
C(mul, td_mul(x, y))
C(div, td_div(x, td_add_scalar(td_mul(y, y), 1)))
C(pow, td_pow(pos(x), y))
C(pow_lit, td_pow_scalar(x, 2))
C(neg, td_neg(x))
C(exp, td_exp(x))
C(log, td_log(pos(x)))
C(sqrt, td_sqrt(pos(x)))
C(rsqrt, td_rsqrt(pos(x)))
C(abs, td_abs(x))
C(sin, td_sin(x))
C(cos, td_cos(x))
C(tanh, td_tanh(x))
C(sigmoid, td_sigmoid(x))
C(relu, td_relu(x))
C(gelu, td_gelu(x, false))
C(silu, td_silu(x))
C(softplus, td_log(td_add_scalar(td_exp(x), 1)))
C(min, td_minimum(x, y))
C(max, td_maximum(x, y))
C(clamp, td_clamp(x, -0.5, 0.5))
C(clamp_t, td_minimum(td_maximum(x, td_mul_scalar(y, 0.5)), S(0.7, x)))
C(where, td_where(td_gt(x, y), x, td_mul_scalar(y, 2)))
C(ternary, td_where(td_lt(x, S(0, x)), td_mul(x, x), td_neg(y)))
C(cmp_mul, td_mul(td_cast(td_ge(x, y), td_tensor_dtype(x)), x))
C(matmul, td_matmul(td_mul(x, y), td_transpose(x, 0, 1)))
C(transpose, td_matmul(td_transpose(x, 0, 1), x))
C(matvec, td_matmul(x, y))
C(vecmat, td_matmul(td_tanh(y), td_transpose(x, 0, 1)))
C(dot, td_add(td_matmul(y, y), x))
C(sum, td_sum(x, 0, NULL, false))
C(sum1, td_sum(x, 1, d1, false))
C(sum_keep, td_mul(td_sum(x, 1, d0, true), x))
C(mean, td_mean(x, 1, d1, false))
C(amax, td_amax(x, 1, d1, false))
C(amin, td_amin(x, 0, NULL, false))
C(max1, td_amax(x, 0, NULL, false))
C(var, td_var(x, 1, d1, 1, false))
C(var0, td_var(x, 1, d0, 0, false))
C(logsumexp, td_logsumexp(x, 1, d1, false))
C(softmax, td_softmax(x, -1))
C(log_softmax, td_log_softmax(x, 0))
C(layer_norm, td_layer_norm(x, 1, y, y, 1e-5))
C(cross_entropy, td_cross_entropy_loss(x, t, NULL, -100, 0, TD_REDUCE_MEAN))
C(chain, td_mean(td_pow_scalar(td_sub(td_tanh(td_matmul(td_mul(x, y), td_transpose(x, 0, 1))), S(0.25, x)), 2), 0, NULL,
                 false))

typedef struct op_case {
    const char *name, *src;
    compose_fn fn; /* x [3, 4], y [4], t int64 [3] */
} op_case;

static const op_case op_cases[] = {
    {"add", "x + y", c_add},
    {"sub", "x - y", c_sub},
    {"mul", "x * y", c_mul},
    {"div", "x / (y*y + 1)", c_div},
    {"pow", "(abs(x) + 0.5) ^ y", c_pow},
    {"pow_lit", "x^2", c_pow_lit},
    {"neg", "-x", c_neg},
    {"exp", "exp(x)", c_exp},
    {"log", "log(abs(x) + 0.5)", c_log},
    {"sqrt", "sqrt(abs(x) + 0.5)", c_sqrt},
    {"rsqrt", "rsqrt(abs(x) + 0.5)", c_rsqrt},
    {"abs", "abs(x)", c_abs},
    {"sin", "sin(x)", c_sin},
    {"cos", "cos(x)", c_cos},
    {"tanh", "tanh(x)", c_tanh},
    {"sigmoid", "sigmoid(x)", c_sigmoid},
    {"relu", "relu(x)", c_relu},
    {"gelu", "gelu(x)", c_gelu},
    {"silu", "silu(x)", c_silu},
    {"softplus", "softplus(x)", c_softplus},
    {"min", "min(x, y)", c_min},
    {"max", "max(x, y)", c_max},
    {"clamp", "clamp(x, -0.5, 0.5)", c_clamp},
    {"clamp_t", "clamp(x, y * 0.5, 0.7)", c_clamp_t},
    {"where", "where(x > y, x, y * 2)", c_where},
    {"ternary", "x < 0 ? x*x : -y", c_ternary},
    {"cmp_mul", "(x >= y) * x", c_cmp_mul},
    {"matmul", "(x * y) @ x'", c_matmul},
    {"transpose", "x' @ x", c_transpose},
    {"matvec", "x @ y", c_matvec},
    {"vecmat", "tanh(y) @ x'", c_vecmat},
    {"dot", "y @ y + x", c_dot},
    {"sum", "x.sum()", c_sum},
    {"sum1", "sum(x, 1)", c_sum1},
    {"sum_keep", "x.sum(dim=0, keepdim=true) * x", c_sum_keep},
    {"mean", "x.mean(1)", c_mean},
    {"amax", "amax(x, dim=1)", c_amax},
    {"amin", "x.amin()", c_amin},
    {"max1", "max(x)", c_max1},
    {"var", "x.var(1)", c_var},
    {"var0", "var(x, [0], correction=0)", c_var0},
    {"logsumexp", "logsumexp(x, -1)", c_logsumexp},
    {"softmax", "softmax(x)", c_softmax},
    {"log_softmax", "x.log_softmax(0)", c_log_softmax},
    {"layer_norm", "layer_norm(x, y, y)", c_layer_norm},
    {"cross_entropy", "cross_entropy(x, t)", c_cross_entropy},
    {"chain", "h = tanh((x * y) @ x')\nloss = ((h - 0.25)^2).mean()", c_chain},
};

/* max |a - b| / (atol + rtol |b|) over the elements (<= 1 passes) */
static double mismatch(td_tensor *a, td_tensor *b, double tol) {
    if (!a || !b) return INFINITY;
    if (td_ndim(a) != td_ndim(b) || td_numel(a) != td_numel(b)) return INFINITY;
    int64_t n = td_numel(a);
    double *x = malloc(sizeof(double) * (size_t)(n + 1)), *y = malloc(sizeof(double) * (size_t)(n + 1)), worst = 0;
    if (td_copy_to_host(a, x, sizeof(double) * (size_t)n, TD_F64) ||
        td_copy_to_host(b, y, sizeof(double) * (size_t)n, TD_F64))
        worst = INFINITY;
    for (int64_t i = 0; i < n && worst < INFINITY; i++) {
        double e = fabs(x[i] - y[i]) / (tol + tol * fabs(y[i]));
        if (isnan(x[i]) != isnan(y[i])) e = INFINITY;
        if (e > worst) worst = e;
    }
    free(x), free(y);
    return worst;
}

static td_tensor *leaf(uint64_t seed, int nd, const int64_t *shape, td_dtype dt, td_device dev) {
    td_scope_begin(); /* the f64 draw and the cast, released here */
    td_tensor *t = td_keep(td_to(td_cast(td_randn(nd, shape, seed, 0, TD_F64, TD_CPU), dt), dev));
    td_scope_end();
    return t;
}

/* One case on one dtype and device: values and the gradients of sum(out * r) for x and y. Returns false when the
** composed ops themselves cannot run it there (unsupported), after printing why. */
static bool check_case(const op_case *c, td_dtype dt, td_device dev, bool grads) {
    td_scope_begin();
    int64_t sx[2] = {3, 4}, sy[1] = {4};
    td_tensor *x = leaf(11, 2, sx, dt, dev), *y = leaf(12, 1, sy, dt, dev);
    td_tensor *t = td_to(td_from_data((int64_t[]){1, 3, 0}, 1, (int64_t[]){3}, TD_I64, TD_CPU), dev);
    td_tensor *x2 = td_keep(td_clone(x)), *y2 = td_keep(td_clone(y));
    if (grads) {
        td_tensor *req[4] = {x, y, x2, y2};
        for (int k = 0; k < 4; k++) ASSERT_OK(td_set_requires_grad(req[k], true));
    }
    td_tensor *ref = c->fn(x2, y2, t);
    if (!ref) {
        char dn[32];
        fprintf(stderr, "    %s %s on %s: skipped-unsupported: %s\n", c->name, td_dtype_name(dt),
                td_device_str(dev, dn, sizeof dn), td_last_error());
        td_clear_error();
        td_scope_end();
        td_release(x), td_release(y), td_release(x2), td_release(y2);
        return false;
    }
    td_math_block *b;
    ASSERT_OK(td_math_compile(c->src, NULL, &b));
    td_math_binding bd[3] = {{"x", x, 0}, {"y", y, 0}, {"t", t, 0}};
    td_tensor *out = NULL;
    td_status st = td_math_run(b, bd, 3, &out);
    if (st) TEST_FAIL_("%s (%s): run failed", c->name, td_dtype_name(dt));
    double tol = dt == TD_F64 ? 1e-9 : dt == TD_F32 ? 2e-5 : 3e-2;
    double e = mismatch(out, ref, tol);
    if (!(e <= 1)) TEST_FAIL_("%s (%s): value mismatch %g", c->name, td_dtype_name(dt), e);
    ASSERT_EQ_INT(td_tensor_dtype(out), td_tensor_dtype(ref));
    if (grads) {
        td_tensor *r = td_to(td_cast(td_rand(td_ndim(ref), td_shape(ref), 99, 0, TD_F64, TD_CPU), dt), dev);
        ASSERT_OK(td_backward(td_sum(td_mul(out, r), 0, NULL, false), NULL, false));
        ASSERT_OK(td_backward(td_sum(td_mul(ref, r), 0, NULL, false), NULL, false));
        td_tensor *pairs[2][2] = {{x, x2}, {y, y2}};
        for (int k = 0; k < 2; k++) {
            td_tensor *g1 = td_grad_of(pairs[k][0]), *g2 = td_grad_of(pairs[k][1]);
            if (!g1 && !g2) continue;
            if (!g1) g1 = td_zeros_like(pairs[k][0]); /* no path: zeros, as torch gives through a comparison */
            if (!g2) g2 = td_zeros_like(pairs[k][1]);
            e = mismatch(g1, g2, tol * 10);
            if (!(e <= 1)) TEST_FAIL_("%s (%s): grad of %s mismatch %g", c->name, td_dtype_name(dt), k ? "y" : "x", e);
        }
    }
    td_math_free(b);
    td_scope_end();
    td_release(x), td_release(y), td_release(x2), td_release(y2);
    return true;
}

static void ops_on(td_device dev) {
    char dn[32];
    td_device_str(dev, dn, sizeof dn);
    if (!td_device_available(dev)) TEST_SKIP("no %s device", dn);
    const td_dtype dts[4] = {TD_F64, TD_F32, TD_F16, TD_BF16};
    int ran = 0;
    for (int d = 0; d < 4; d++) {
        for (size_t i = 0; i < sizeof op_cases / sizeof op_cases[0]; i++) {
            /* f16/bf16: the forward (their gradients round too coarsely for a tight comparison) */
            ran += check_case(&op_cases[i], dts[d], dev, d < 2);
        }
    }
    fprintf(stderr, "  %d op/dtype cases on %s\n", ran, dn);
    ASSERT(ran >= (int)(sizeof op_cases / sizeof op_cases[0]));
}

TEST(ops_cpu) { ops_on(TD_CPU); }
TEST(ops_vulkan) { ops_on(TD_VULKAN(0)); }
TEST(ops_cuda) { ops_on(TD_CUDA(0)); }

/* ---- gradcheck in f64 ---- */

typedef struct gc_user {
    td_math_block *b;
    int n;
    const char *names[4];
} gc_user;

static td_tensor *gc_fn(void *user, int n, td_tensor *const *in) {
    gc_user *u = user;
    td_math_binding bd[4];
    for (int i = 0; i < n; i++) bd[i] = (td_math_binding){u->names[i], in[i], 0};
    td_tensor *out = NULL;
    td_math_run(u->b, bd, n, &out);
    return out;
}

TEST(gradcheck_f64) {
    static const char *srcs[] = {
        "relu(W @ x + b)",
        "softmax(W @ x) * b",
        "layer_norm(W, b, b)",
        "(W^2).var(1) + amax(W, 0) * b",
        "logsumexp(W, 0)",
        "(abs(W) + 1) ^ b",
        "gelu(W) * silu(W) + softplus(W)",
        "(W' @ W)' * b",
        "where(W > 0, W, b)",
        "clamp(W, -0.3, b) + min(W, b) * max(W, x.sum())",
        "log_softmax(W, 0)",
        "sqrt(W*W + 1) / (b*b + 2)",
    };
    gc_user u = {.n = 3, .names = {"W", "x", "b"}};
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
        td_scope_begin();
        td_tensor *in[3] = {leaf(1, 2, (int64_t[]){3, 3}, TD_F64, TD_CPU), leaf(2, 1, (int64_t[]){3}, TD_F64, TD_CPU),
                            leaf(3, 1, (int64_t[]){3}, TD_F64, TD_CPU)};
        for (int k = 0; k < 3; k++) ASSERT_OK(td_set_requires_grad(in[k], true));
        ASSERT_OK(td_math_compile(srcs[i], NULL, &u.b));
        td_status st = td_gradcheck(gc_fn, &u, 3, in, NULL);
        if (st) TEST_FAIL_("gradcheck of `%s` failed", srcs[i]);
        td_math_free(u.b);
        for (int k = 0; k < 3; k++) td_release(in[k]);
        td_scope_end();
    }
    /* cross-entropy: logits only */
    td_scope_begin();
    gc_user v = {.n = 2, .names = {"z", "t"}};
    td_tensor *in[2] = {leaf(4, 2, (int64_t[]){3, 5}, TD_F64, TD_CPU),
                        td_keep(td_from_data((int64_t[]){4, 0, 2}, 1, (int64_t[]){3}, TD_I64, TD_CPU))};
    ASSERT_OK(td_set_requires_grad(in[0], true));
    ASSERT_OK(td_math_compile("cross_entropy(z, t) + (z.amax(1)^2).sum()", NULL, &v.b));
    ASSERT_OK(td_gradcheck(gc_fn, &v, 2, in, NULL));
    td_math_free(v.b);
    td_release(in[0]), td_release(in[1]);
    td_scope_end();
}

/* ---- random well-typed expressions ---- */

typedef struct gen {
    uint64_t s;
    char *buf;
    size_t at, cap;
    td_tensor *in[3];
} gen;

static uint32_t rnd(gen *g) {
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g->s >> 33);
}

static void emit(gen *g, const char *s) {
    size_t n = strlen(s);
    if (g->at + n + 1 < g->cap) memcpy(g->buf + g->at, s, n + 1), g->at += n;
}

/* Writes an expression to g->buf and returns the same math composed from ops (shapes broadcast with [4, 5]). */
static td_tensor *gen_expr(gen *g, int depth) {
    static const char *names[3] = {"a", "b", "c"};
    if (depth <= 0 || rnd(g) % 6 == 0) {
        int k = (int)(rnd(g) % 3);
        emit(g, names[k]);
        return g->in[k];
    }
    int kind = (int)(rnd(g) % 14);
    static const char *un[] = {"tanh", "sigmoid", "sin", "relu", "gelu", "silu", "softplus", "abs", "cos"};
    td_tensor *a, *b;
    switch (kind) {
    case 0:
    case 1: {
        int f = (int)(rnd(g) % 9);
        emit(g, un[f]), emit(g, "(");
        a = gen_expr(g, depth - 1);
        emit(g, ")");
        td_tensor *(*fns[])(td_tensor *) = {td_tanh, td_sigmoid, td_sin, td_relu, NULL, td_silu, NULL, td_abs, td_cos};
        if (f == 4) return td_gelu(a, false);
        if (f == 6) return td_log(td_add_scalar(td_exp(a), 1));
        return fns[f](a);
    }
    case 2:
    case 3:
    case 4:
    case 5: {
        static const char *ops[] = {" + ", " - ", " * ", " * "};
        int o = kind - 2;
        emit(g, "(");
        a = gen_expr(g, depth - 1);
        emit(g, ops[o]);
        if (rnd(g) % 5 == 0) { /* a literal operand: weak, the tensor's dtype */
            emit(g, "0.75)");
            b = td_scalar(0.75, TD_F64, TD_CPU);
        } else {
            b = gen_expr(g, depth - 1);
            emit(g, ")");
        }
        return o == 0 ? td_add(a, b) : o == 1 ? td_sub(a, b) : td_mul(a, b);
    }
    case 6:
        emit(g, "(");
        a = gen_expr(g, depth - 1);
        emit(g, " / ((");
        b = gen_expr(g, depth - 1);
        emit(g, ")^2 + 1))");
        return td_div(a, td_add_scalar(td_pow_scalar(b, 2), 1));
    case 7:
        emit(g, "max(");
        a = gen_expr(g, depth - 1);
        emit(g, ", ");
        b = gen_expr(g, depth - 1);
        emit(g, ")");
        return td_maximum(a, b);
    case 8: {
        emit(g, "(");
        a = gen_expr(g, depth - 1);
        emit(g, " > 0 ? ");
        b = gen_expr(g, depth - 1);
        emit(g, " : ");
        td_tensor *c = gen_expr(g, depth - 1);
        emit(g, ")");
        td_tensor *zero = td_scalar(0, TD_F64, TD_CPU);
        return td_where(td_gt(a, zero), td_add(b, td_mul(c, zero)), td_add(c, td_mul(b, zero)));
    }
    case 9:
    case 10: { /* a reduction over the last dim, kept */
        static const char *rs[] = {"sum", "mean", "amax", "logsumexp"};
        int r = (int)(rnd(g) % 4);
        emit(g, rs[r]), emit(g, "(");
        a = gen_expr(g, depth - 1);
        emit(g, ", -1, true)");
        if (td_ndim(a) == 0) a = td_reshape(a, 1, (int64_t[]){1});
        int dim = -1;
        td_tensor *y = r == 0   ? td_sum(a, 1, &dim, true)
                       : r == 1 ? td_mean(a, 1, &dim, true)
                       : r == 2 ? td_amax(a, 1, &dim, true)
                                : td_logsumexp(a, 1, &dim, true);
        return y;
    }
    case 11:
        emit(g, "softmax(");
        a = gen_expr(g, depth - 1);
        emit(g, ")");
        if (td_ndim(a) == 0) return td_softmax(td_reshape(a, 1, (int64_t[]){1}), -1);
        return td_softmax(a, -1);
    case 12:
        emit(g, "-");
        a = gen_expr(g, depth - 1);
        return td_neg(a);
    default:
        emit(g, "(");
        a = gen_expr(g, depth - 1);
        emit(g, ")^2");
        return td_pow_scalar(a, 2);
    }
}

TEST(random_expressions) {
    uint64_t seed0 = getenv("TD_MATH_SEED") ? strtoull(getenv("TD_MATH_SEED"), NULL, 0) : 0x5EED21;
    fprintf(stderr, "  seed 0x%llx (TD_MATH_SEED to repeat)\n", (unsigned long long)seed0);
    int cases = 300;
    char buf[4096];
    for (int i = 0; i < cases; i++) {
        td_scope_begin();
        gen g = {.s = seed0 + (uint64_t)i * 7919, .buf = buf, .cap = sizeof buf};
        buf[0] = 0;
        td_tensor *a = leaf(21 + i, 2, (int64_t[]){4, 5}, TD_F64, TD_CPU),
                  *b = leaf(22 + i, 1, (int64_t[]){5}, TD_F64, TD_CPU),
                  *c = leaf(23 + i, 2, (int64_t[]){4, 1}, TD_F64, TD_CPU);
        td_tensor *a2 = td_keep(td_clone(a)), *b2 = td_keep(td_clone(b)), *c2 = td_keep(td_clone(c));
        td_tensor *all[6] = {a, b, c, a2, b2, c2};
        for (int k = 0; k < 6; k++) ASSERT_OK(td_set_requires_grad(all[k], true));
        g.in[0] = a2, g.in[1] = b2, g.in[2] = c2;
        int depth = 1 + (int)(rnd(&g) % 6);
        td_tensor *ref = gen_expr(&g, depth);
        if (!ref)
            TEST_FAIL_("case %d (seed 0x%llx): the composed ops failed for `%s`", i, (unsigned long long)seed0, buf);
        td_math_block *blk;
        if (td_math_compile(buf, NULL, &blk)) TEST_FAIL_("case %d: `%s` does not compile", i, buf);
        td_math_binding bd[3] = {{"a", a, 0}, {"b", b, 0}, {"c", c, 0}};
        td_tensor *out = NULL;
        if (td_math_run(blk, bd, 3, &out)) TEST_FAIL_("case %d: `%s` does not run", i, buf);
        double e = mismatch(out, ref, 1e-9);
        if (!(e <= 1))
            TEST_FAIL_("case %d (seed 0x%llx): `%s`: value mismatch %g", i, (unsigned long long)seed0, buf, e);
        if (td_requires_grad(ref)) {
            ASSERT(td_requires_grad(out));
            ASSERT_OK(td_backward(td_sum(out, 0, NULL, false), NULL, false));
            ASSERT_OK(td_backward(td_sum(ref, 0, NULL, false), NULL, false));
            for (int k = 0; k < 3; k++) {
                td_tensor *g1 = td_grad_of(all[k]), *g2 = td_grad_of(all[k + 3]);
                if (!g1 && !g2) continue;
                e = mismatch(g1 ? g1 : td_zeros_like(all[k]), g2 ? g2 : td_zeros_like(all[k]), 1e-8);
                if (!(e <= 1))
                    TEST_FAIL_("case %d (seed 0x%llx): `%s`: grad of %c mismatch %g", i, (unsigned long long)seed0, buf,
                               'a' + k, e);
            }
        }
        td_math_free(blk);
        for (int k = 0; k < 6; k++) td_release(all[k]);
        td_scope_end();
    }
}

/* ---- autocast ---- */

typedef td_tensor *(*ac_fn)(td_tensor *x, td_tensor *W, td_tensor *b, td_tensor *t);
#define A(name, expr)                                                                                                  \
    static td_tensor *a_##name(td_tensor *x, td_tensor *W, td_tensor *b, td_tensor *t) {                               \
        (void)x, (void)W, (void)b, (void)t;                                                                            \
        return (expr);                                                                                                 \
    }
A(linear_relu, td_relu(td_add(td_matmul(x, W), b)))
A(tanh_scaled, td_mul_scalar(td_tanh(td_matmul(x, W)), 2))
A(softmax, td_softmax(td_matmul(x, W), -1))
A(sum, td_sum(td_matmul(x, W), 0, NULL, false))
A(exp_mean, td_add(td_exp(td_matmul(x, W)), td_mean(td_matmul(x, W), 0, NULL, false)))
A(cross_entropy, td_cross_entropy_loss(td_matmul(x, W), t, NULL, -100, 0, TD_REDUCE_MEAN))
A(layer_norm, td_layer_norm(td_matmul(x, W), 1, b, b, 1e-5))
A(matvec_pow, td_pow_scalar(td_matmul(x, td_mul(W, W)), 2))
A(where_max, td_where(td_gt(td_matmul(x, W), b), td_maximum(td_matmul(x, W), b), b))

/* Under td_autocast_begin a block runs each node with the op table's policy, as the composed ops do: the same
** dtypes, values and gradients (the gradients reach the f32 leaves as f32). */
TEST(autocast) {
    static const struct {
        const char *src;
        ac_fn fn;
    } cases[] = {
        {"relu(x @ W + b)", a_linear_relu},
        {"tanh(x @ W) * 2", a_tanh_scaled},
        {"softmax(x @ W)", a_softmax},
        {"(x @ W).sum()", a_sum},
        {"h = x @ W\nexp(h) + h.mean()", a_exp_mean},
        {"cross_entropy(x @ W, t)", a_cross_entropy},
        {"layer_norm(x @ W, b, b)", a_layer_norm},
        {"(x @ (W * W))^2", a_matvec_pow},
        {"h = x @ W\nwhere(h > b, max(h, b), b)", a_where_max},
    };
    static const td_dtype lows[2] = {TD_BF16, TD_F16};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            td_scope_begin();
            td_tensor *in[6] = {leaf(21, 2, (int64_t[]){3, 4}, TD_F32, TD_CPU),
                                leaf(22, 2, (int64_t[]){4, 5}, TD_F32, TD_CPU),
                                leaf(23, 1, (int64_t[]){5}, TD_F32, TD_CPU)};
            for (int k = 0; k < 3; k++) {
                in[k + 3] = td_keep(td_clone(in[k]));
                ASSERT_OK(td_set_requires_grad(in[k], true));
                ASSERT_OK(td_set_requires_grad(in[k + 3], true));
            }
            td_tensor *t = td_from_data((int64_t[]){1, 4, 0}, 1, (int64_t[]){3}, TD_I64, TD_CPU);
            td_math_block *blk;
            ASSERT_OK(td_math_compile(cases[i].src, NULL, &blk));
            td_math_binding bd[4] = {{"x", in[0], 0}, {"W", in[1], 0}, {"b", in[2], 0}, {"t", t, 0}};
            td_tensor *out = NULL, *plain = NULL;
            ASSERT_OK(td_math_run(blk, bd, 4, &plain)); /* outside the scope first: a signature of its own */
            ASSERT_OK(td_autocast_begin(TD_DEVICE_CPU, lows[l]));
            ASSERT_OK(td_math_run(blk, bd, 4, &out));
            td_tensor *ref = cases[i].fn(in[3], in[4], in[5], t);
            ASSERT_OK(td_autocast_end());
            ASSERT(out && ref);
            if (td_tensor_dtype(out) != td_tensor_dtype(ref))
                TEST_FAIL_("`%s` under %s autocast: the block gives %s, the ops %s", cases[i].src,
                           td_dtype_name(lows[l]), td_dtype_name(td_tensor_dtype(out)),
                           td_dtype_name(td_tensor_dtype(ref)));
            ASSERT_EQ_INT(td_tensor_dtype(plain), TD_F32);
            double e = mismatch(out, ref, 1e-2);
            if (!(e <= 1))
                TEST_FAIL_("`%s` under %s autocast: value mismatch %g", cases[i].src, td_dtype_name(lows[l]), e);
            ASSERT_OK(td_backward(td_sum(td_cast(out, TD_F32), 0, NULL, false), NULL, false));
            ASSERT_OK(td_backward(td_sum(td_cast(ref, TD_F32), 0, NULL, false), NULL, false));
            for (int k = 0; k < 3; k++) {
                td_tensor *g1 = td_grad_of(in[k]), *g2 = td_grad_of(in[k + 3]);
                ASSERT(!g1 == !g2); /* b: not read by every case */
                if (!g1) continue;
                ASSERT_EQ_INT(td_tensor_dtype(g1), TD_F32);
                e = mismatch(g1, g2, 2e-2);
                if (!(e <= 1))
                    TEST_FAIL_("`%s` under %s autocast: grad of %s mismatch %g", cases[i].src, td_dtype_name(lows[l]),
                               bd[k].name, e);
            }
            td_math_free(blk);
            for (int k = 0; k < 6; k++) td_release(in[k]);
            td_scope_end();
        }
}

/* ---- modes ---- */

static const char *mlp = "h = relu(W1 @ x + b1)\ny = W2 @ h + b2\nloss = ((y - target)^2).mean()";

typedef struct mlp_in {
    td_tensor *W1, *b1, *W2, *b2, *x, *target;
} mlp_in;

static mlp_in mlp_make(td_dtype dt) {
    /* x a vector: W1 @ x is a matrix @ vector product on both sides */
    mlp_in m = {leaf(1, 2, (int64_t[]){8, 6}, dt, TD_CPU), leaf(2, 1, (int64_t[]){8}, dt, TD_CPU),
                leaf(3, 2, (int64_t[]){3, 8}, dt, TD_CPU), leaf(4, 1, (int64_t[]){3}, dt, TD_CPU),
                leaf(5, 1, (int64_t[]){6}, dt, TD_CPU),    leaf(6, 1, (int64_t[]){3}, dt, TD_CPU)};
    return m;
}

/* mlp_make's tensors, kept out of the scope, released */
static void mlp_release(mlp_in *m) {
    td_tensor *t[] = {m->W1, m->b1, m->W2, m->b2, m->x, m->target};
    for (int k = 0; k < 6; k++) td_release(t[k]);
}

static void mlp_bind(const mlp_in *m, td_math_binding *bd) {
    bd[0] = (td_math_binding){"W1", m->W1, 0}, bd[1] = (td_math_binding){"b1", m->b1, 0};
    bd[2] = (td_math_binding){"W2", m->W2, 0}, bd[3] = (td_math_binding){"b2", m->b2, 0};
    bd[4] = (td_math_binding){"x", m->x, 0}, bd[5] = (td_math_binding){"target", m->target, 0};
}

static td_tensor *mlp_ref(const mlp_in *m) {
    td_tensor *h = td_relu(td_add(td_matmul(m->W1, m->x), m->b1));
    td_tensor *y = td_add(td_matmul(m->W2, h), m->b2);
    return td_mean(td_pow_scalar(td_sub(y, m->target), 2), 0, NULL, false);
}

TEST(implicit_no_grad) {
    td_scope_begin();
    mlp_in m = mlp_make(TD_F32);
    ASSERT_OK(td_set_requires_grad(m.W1, true));
    td_math_block *b;
    ASSERT_OK(td_math_compile(mlp, NULL, &b));
    td_math_binding bd[6];
    mlp_bind(&m, bd);
    td_tensor *out;
    td_math_stats st;
    td_no_grad_begin();
    ASSERT_OK(td_math_run(b, bd, 6, &out));
    td_no_grad_end();
    ASSERT_OK(td_math_last_stats(b, &st));
    ASSERT(!td_requires_grad(out) && td_is_leaf(out));
    ASSERT(!st.recorded);
    ASSERT_EQ_INT(st.saved_tensors, 0);
    ASSERT_EQ_INT(st.saved_bytes, 0);
    ASSERT_OK(td_set_requires_grad(m.W1, false)); /* no input requires grad: nothing recorded either */
    ASSERT_OK(td_math_run(b, bd, 6, &out));
    ASSERT_OK(td_math_last_stats(b, &st));
    ASSERT(!td_requires_grad(out) && !st.recorded);
    ASSERT_OK(td_set_requires_grad(m.W1, true)); /* and recorded as one node when one does */
    ASSERT_OK(td_math_run(b, bd, 6, &out));
    ASSERT_OK(td_math_last_stats(b, &st));
    ASSERT(td_requires_grad(out) && !td_is_leaf(out) && st.recorded);
    ASSERT_NEAR(td_item(out), td_item(mlp_ref(&m)), 1e-5);
    td_math_free(b);
    td_scope_end();
    mlp_release(&m);
}

TEST(checkpoint_saves_inputs) {
    td_scope_begin();
    mlp_in m = mlp_make(TD_F64);
    td_tensor *ps[4] = {m.W1, m.b1, m.W2, m.b2};
    for (int k = 0; k < 4; k++) ASSERT_OK(td_set_requires_grad(ps[k], true));
    td_math_binding bd[6];
    mlp_bind(&m, bd);
    td_tensor *grads[2][4];
    for (int mode = 0; mode < 2; mode++) {
        td_math_block *b;
        td_math_options o = {.checkpoint = mode == 1};
        ASSERT_OK(td_math_compile(mlp, &o, &b));
        td_tensor *out;
        ASSERT_OK(td_math_run(b, bd, 6, &out));
        td_math_stats st;
        ASSERT_OK(td_math_last_stats(b, &st));
        fprintf(stderr, "  %s: %d saved tensors (%d inputs), %lld bytes, backward of %d nodes\n",
                mode ? "checkpoint" : "default", st.saved_tensors, st.saved_inputs, (long long)st.saved_bytes,
                st.backward_nodes);
        ASSERT(st.recorded);
        ASSERT_EQ_INT(st.saved_inputs, 6);
        if (mode == 1)
            ASSERT_EQ_INT(st.saved_tensors, 6);
        else
            ASSERT(st.saved_tensors > 6);
        ASSERT_OK(td_backward(out, NULL, false));
        for (int k = 0; k < 4; k++) grads[mode][k] = td_clone(td_grad_of(ps[k])), td_zero_grad(ps[k]);
        td_math_free(b);
    }
    ASSERT_OK(td_backward(mlp_ref(&m), NULL, false));
    for (int k = 0; k < 4; k++) {
        ASSERT(mismatch(grads[0][k], td_grad_of(ps[k]), 1e-10) <= 1);
        ASSERT(mismatch(grads[1][k], td_grad_of(ps[k]), 1e-10) <= 1);
    }
    td_scope_end();
    mlp_release(&m);
}

TEST(value_and_grad) {
    td_scope_begin();
    mlp_in m = mlp_make(TD_F64);
    td_math_block *b;
    ASSERT_OK(td_math_compile(mlp, NULL, &b));
    td_math_binding bd[6];
    mlp_bind(&m, bd);
    const char *wrt[3] = {"W1", "b2", "x"};
    td_tensor *v, *g[3];
    ASSERT_OK(td_math_value_and_grad(b, bd, 6, 3, wrt, &v, g));
    ASSERT(!td_requires_grad(v));
    td_tensor *ps[3] = {m.W1, m.b2, m.x};
    for (int k = 0; k < 3; k++) ASSERT_OK(td_set_requires_grad(ps[k], true));
    td_tensor *ref = mlp_ref(&m);
    ASSERT_NEAR(td_item(v), td_item(ref), 1e-12);
    ASSERT_OK(td_backward(ref, NULL, false));
    for (int k = 0; k < 3; k++) ASSERT(mismatch(g[k], td_grad_of(ps[k]), 1e-10) <= 1);
    ASSERT_ERROR(td_math_value_and_grad(b, bd, 6, 1, (const char *[]){"nope"}, &v, g), TD_ERR_MISUSE, "'nope'");
    td_math_block *b2;
    ASSERT_OK(td_math_compile("W1 * 2", NULL, &b2));
    ASSERT_ERROR(td_math_value_and_grad(b2, bd, 6, 1, wrt, &v, g), TD_ERR_SHAPE, "one float element");
    td_math_free(b2);
    td_math_free(b);
    td_scope_end();
    mlp_release(&m);
}

TEST(td_m_and_scalars) {
    td_scope_begin();
    td_tensor *x = leaf(7, 2, (int64_t[]){2, 3}, TD_F32, TD_CPU), *w = leaf(8, 2, (int64_t[]){3, 3}, TD_F32, TD_CPU);
    td_tensor *y = ASSERT_TENSOR(td_m("relu(x @ w) + 1", "x", x, "w", w, NULL));
    td_tensor *r = td_add_scalar(td_relu(td_matmul(x, w)), 1);
    ASSERT(mismatch(y, r, 1e-6) <= 1);
    y = ASSERT_TENSOR(td_m("relu(x @ w) + 1", "x", x, "w", w, NULL)); /* the cached block */
    ASSERT(mismatch(y, r, 1e-6) <= 1);
    ASSERT_ERROR(td_m("return x, x", "x", x, NULL), TD_ERR_MISUSE, "returns 2 values");
    /* a bound number is weak: x * s stays float32 */
    td_math_block *b;
    ASSERT_OK(td_math_compile("x * s + 2", NULL, &b));
    td_tensor *o;
    ASSERT_OK(td_math_run(b, (td_math_binding[]){{"x", x, 0}, {"s", NULL, 0.5}}, 2, &o));
    ASSERT_EQ_INT(td_tensor_dtype(o), TD_F32);
    ASSERT(mismatch(o, td_add_scalar(td_mul_scalar(x, 0.5), 2), 1e-6) <= 1);
    td_math_free(b);
    /* several outputs and CSE: return a, b */
    ASSERT_OK(td_math_compile("e = exp(x); return e + 1, e * e", NULL, &b));
    td_tensor *two[2];
    ASSERT_EQ_INT(td_math_n_outputs(b), 2);
    ASSERT_OK(td_math_run(b, (td_math_binding[]){{"x", x, 0}}, 1, two));
    ASSERT(mismatch(two[1], td_exp(td_mul_scalar(x, 2)), 1e-5) <= 1);
    td_math_free(b);
    td_release(x), td_release(w);
    td_scope_end();
}

/* ---- errors: one per class, one line, and the excerpt with the caret ---- */

/* ASSERT_ERROR, and the message is one line, and td_math_error_excerpt gives want (the source line and the caret). */
#define ASSERT_ERROR_AT(expr, st, substr, want)                                                                        \
    do {                                                                                                               \
        td_clear_error();                                                                                              \
        (void)(expr);                                                                                                  \
        char ex_[256];                                                                                                 \
        int n_ = td_math_error_excerpt(ex_, sizeof ex_);                                                               \
        if (td_last_status() != (st) || !strstr(td_last_error(), (substr)))                                            \
            TEST_FAIL_("%s: expected %s with \"%s\", got %s: %s", #expr, td_status_str(st), (substr),                  \
                       td_status_str(td_last_status()), td_last_error());                                              \
        if (strstr(td_last_error(), "\\n") || strchr(td_last_error(), '\n'))                                           \
            TEST_FAIL_("message \"%s\" is not one line", td_last_error());                                             \
        if (strcmp(ex_, (want)) != 0 || n_ != (int)strlen(want))                                                       \
            TEST_FAIL_("excerpt \"%s\" (%d), expected \"%s\"", ex_, n_, (want));                                       \
        test_message_record(td_last_error());                                                                          \
        td_clear_error();                                                                                              \
    } while (0)

TEST(error_syntax) {
    td_math_block *b = (td_math_block *)1;
    ASSERT_ERROR_AT(td_math_compile("y = x + * 2", NULL, &b), TD_ERR_COMPILE,
                    "math block line 1, column 9: syntax error: a value is expected here, at `*`",
                    "  y = x + * 2\n          ^");
    ASSERT(b == NULL);
    ASSERT_ERROR(td_math_compile("a = 1\nb = (a + 2", NULL, &b), TD_ERR_COMPILE, "line 2, column 11: syntax error");
    ASSERT_ERROR(td_math_compile("x $ y", NULL, &b), TD_ERR_COMPILE, "unexpected character");
    ASSERT_ERROR(td_math_compile("", NULL, &b), TD_ERR_COMPILE, "empty");
    ASSERT_ERROR_AT(td_math_compile("return x\ny = 2", NULL, &b), TD_ERR_COMPILE, "nothing may follow", "  y = 2\n  ^");
    /* a long line: a window around the spot */
    ASSERT_ERROR_AT(
        td_math_compile("y = aaaaaaaaaa + bbbbbbbbbb + cccccccccc + dddddddddd + * eeeeeeeeee + ffffffffff + 1", NULL,
                        &b),
        TD_ERR_COMPILE, "column 57: syntax error: a value is expected here, at `*`",
        "  ...b + cccccccccc + dddddddddd + * eeeeeeeeee + ffffffffff + 1\n"
        "                                   ^");
    td_math_block *b2;
    td_clear_error();
    ASSERT(td_math_compile("y = (x", NULL, &b2) == TD_ERR_COMPILE && td_math_error_excerpt(NULL, 0) > 0);
    ASSERT(td_math_compile(NULL, NULL, &b2) == TD_ERR_MISUSE); /* another error: no excerpt */
    ASSERT_EQ_INT(td_math_error_excerpt(NULL, 0), 0);
}

TEST(error_unknown_function) {
    td_math_block *b;
    ASSERT_ERROR_AT(td_math_compile("y = 2 * fnord(x)", NULL, &b), TD_ERR_COMPILE,
                    "line 1, column 9: unknown function, at `fnord`", "  y = 2 * fnord(x)\n          ^~~~~");
    ASSERT_ERROR(td_math_compile("x.fnord()", NULL, &b), TD_ERR_COMPILE, "unknown function");
}

TEST(error_arity) {
    td_math_block *b;
    ASSERT_ERROR_AT(td_math_compile("exp(x, y)", NULL, &b), TD_ERR_COMPILE,
                    "exp takes 1 argument, not 2, at `exp(x, y)`", "  exp(x, y)\n  ^~~~~~~~~");
    ASSERT_ERROR(td_math_compile("where(c, a)", NULL, &b), TD_ERR_COMPILE, "where takes 3 arguments, not 2");
    ASSERT_ERROR(td_math_compile("x.sum(keep=true)", NULL, &b), TD_ERR_COMPILE, "sum takes (x, dim, keepdim)");
    ASSERT_ERROR(td_math_compile("x.sum(x)", NULL, &b), TD_ERR_COMPILE, "dim must be a literal integer");
    /* integers too large for a dim (found by the fuzzer: converting them to int was undefined) */
    ASSERT_ERROR(td_math_compile("x.sum(99999999999999999999)", NULL, &b), TD_ERR_COMPILE, "dim must be a literal");
    ASSERT_ERROR(td_math_compile("x.sum([0, 11111111111111111111111])", NULL, &b), TD_ERR_COMPILE, "a dim list");
}

TEST(error_unknown_name) {
    td_scope_begin();
    td_math_block *b;
    ASSERT_OK(td_math_compile("h = x * 2\nh + bias", NULL, &b));
    td_tensor *x = leaf(1, 1, (int64_t[]){3}, TD_F32, TD_CPU), *o = NULL;
    ASSERT_ERROR_AT(td_math_run(b, (td_math_binding[]){{"x", x, 0}}, 1, &o), TD_ERR_MISUSE,
                    "line 2, column 5: unknown name `bias` (not bound)", "  h + bias\n      ^~~~");
    ASSERT(o == NULL);
    td_math_free(b);
    td_release(x);
    td_scope_end();
}

TEST(error_shape) {
    td_scope_begin();
    td_math_block *b;
    ASSERT_OK(td_math_compile("h = exp(x)\ny = x + b\ny", NULL, &b));
    td_tensor *x = leaf(1, 2, (int64_t[]){4, 3}, TD_F32, TD_CPU), *bb = leaf(2, 1, (int64_t[]){5}, TD_F32, TD_CPU), *o;
    ASSERT_ERROR_AT(td_math_run(b, (td_math_binding[]){{"x", x, 0}, {"b", bb, 0}}, 2, &o), TD_ERR_SHAPE,
                    "math block line 2, column 5: shapes [4, 3] and [5] do not broadcast in `x + b`",
                    "  y = x + b\n      ^~~~~");
    td_math_free(b);
    ASSERT_OK(td_math_compile("relu(W @ v)", NULL, &b));
    ASSERT_ERROR(td_math_run(b, (td_math_binding[]){{"W", x, 0}, {"v", bb, 0}}, 2, &o), TD_ERR_SHAPE,
                 "shapes [4, 3] and [5] do not align for matmul (3 != 5) in `W @ v`");
    td_math_free(b);
    td_release(x), td_release(bb);
    td_scope_end();
}

TEST(error_dtype) {
    td_scope_begin();
    td_math_block *b;
    ASSERT_OK(td_math_compile("1 + i.mean()", NULL, &b));
    td_tensor *i = td_keep(td_arange(0, 6, 1, TD_I64, TD_CPU)), *o;
    ASSERT_ERROR_AT(td_math_run(b, (td_math_binding[]){{"i", i, 0}}, 1, &o), TD_ERR_DTYPE,
                    "line 1, column 5: mean does not take int64 in `i.mean()`", "  1 + i.mean()\n      ^~~~~~~~");
    td_math_free(b);
    ASSERT_OK(td_math_compile("i ? i : i", NULL, &b));
    ASSERT_ERROR(td_math_run(b, (td_math_binding[]){{"i", i, 0}}, 1, &o), TD_ERR_DTYPE, "condition of where is int64");
    td_math_free(b);
    td_release(i);
    td_scope_end();
}

TEST(error_depth_and_limits) {
    char src[4096];
    int n = 0;
    for (int k = 0; k < 1500; k++) src[n++] = '(';
    src[n++] = 'x';
    for (int k = 0; k < 1500; k++) src[n++] = ')';
    src[n] = 0;
    td_math_block *b;
    ASSERT_ERROR(td_math_compile(src, NULL, &b), TD_ERR_COMPILE, "nests too deeply");
    for (n = 0; n < 3000; n++) src[n] = '-';
    src[n++] = 'x', src[n] = 0;
    ASSERT_ERROR(td_math_compile(src, NULL, &b), TD_ERR_COMPILE, "nests too deeply");
    ASSERT_ERROR(td_math_compile(NULL, NULL, &b), TD_ERR_MISUSE, "NULL");
}

#define TESTS(X)                                                                                                       \
    X(ops_cpu)                                                                                                         \
    X(ops_vulkan)                                                                                                      \
    X(ops_cuda)                                                                                                        \
    X(gradcheck_f64)                                                                                                   \
    X(random_expressions)                                                                                              \
    X(autocast)                                                                                                        \
    X(implicit_no_grad)                                                                                                \
    X(checkpoint_saves_inputs)                                                                                         \
    X(value_and_grad)                                                                                                  \
    X(td_m_and_scalars)                                                                                                \
    X(error_syntax)                                                                                                    \
    X(error_unknown_function)                                                                                          \
    X(error_arity)                                                                                                     \
    X(error_unknown_name)                                                                                              \
    X(error_shape)                                                                                                     \
    X(error_dtype)                                                                                                     \
    X(error_depth_and_limits)

TEST_MAIN(TESTS)
