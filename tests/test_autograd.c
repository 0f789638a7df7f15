/* Autograd: recording, the engine, grad modes, hooks, higher order, the
** functional API, checkpointing, custom functions and graph memory. Expected
** gradients are derived by hand in the comments. */
#include "core/internal.h"
#include "runner.h"

/* clang-format off */
#define TESTS(X)                                                                                              \
    X(accumulate_two_backwards) X(grad_not_aliased) X(retain_graph_and_second_backward) X(nonscalar_backward)  \
    X(no_grad_and_inference) X(detach) X(leaf_hooks) X(grad_of_intermediate) X(grad_unused)                  \
    X(second_derivative_cube) X(second_derivative_tanh) X(value_and_grad) X(checkpoint_dropout)               \
    X(checkpoint_params_inside) X(custom_function) X(custom_function_saves_output) X(broadcast_grads)         \
    X(view_grads) X(slice_step_grad) X(split_grad) X(requires_grad_errors) X(no_leaks) X(long_chain_frees)          \
    X(inplace_saved_input) X(inplace_saved_output) X(inplace_unsaved_is_fine) X(record_failure_fails_op)  \
    X(op_without_formula_names_it)
/* clang-format on */

static td_tensor *vec(int n, const double *v, bool rg) {
    int64_t shape[1] = {n};
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, 1, shape, TD_F64, TD_CPU));
    if (rg) ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

static void expect(td_tensor *t, int n, const double *want, double tol) {
    ASSERT(t);
    ASSERT_EQ_INT(td_numel(t), n);
    double got[64];
    ASSERT_OK(td_copy_to_host(t, got, sizeof got, TD_F64));
    for (int i = 0; i < n; i++) ASSERT_NEAR(got[i], want[i], tol);
}

static td_tensor *sum_all(td_tensor *t) { return td_sum(t, 0, NULL, false); }

TEST(accumulate_two_backwards) {
    td_scope_begin();
    double v[3] = {1, -2, 3};
    td_tensor *x = vec(3, v, true);
    for (int k = 0; k < 2; k++) /* loss = sum(x*x): dx = 2x, twice -> 4x */
        ASSERT_OK(td_backward(ASSERT_TENSOR(sum_all(td_mul(x, x))), NULL, false));
    double want[3] = {4, -8, 12};
    expect(td_grad_of(x), 3, want, 0);
    td_zero_grad(x);
    ASSERT(td_grad_of(x) == NULL);
    td_scope_end();
}

TEST(grad_not_aliased) {
    td_scope_begin();
    double v[2] = {1, 2}, g[2] = {5, 6};
    td_tensor *x = vec(2, v, true), *go = vec(2, g, false);
    ASSERT_OK(td_backward(x, go, false)); /* backward of a leaf: x.grad = go, as a new tensor */
    ASSERT(td_grad_of(x) != go);
    expect(td_grad_of(x), 2, g, 0);
    td_tensor *y = ASSERT_TENSOR(td_mul_scalar(x, 3));
    ASSERT_OK(td_backward(y, go, false)); /* += 3 go */
    double want[2] = {20, 24};
    expect(td_grad_of(x), 2, want, 0);
    expect(go, 2, g, 0); /* the caller's gradient is untouched */
    td_scope_end();
}

TEST(retain_graph_and_second_backward) {
    td_scope_begin();
    double v[2] = {0.5, -1};
    td_tensor *x = vec(2, v, true);
    td_tensor *loss = ASSERT_TENSOR(sum_all(td_exp(x))); /* d/dx = e^x */
    ASSERT_OK(td_backward(loss, NULL, true));
    ASSERT_OK(td_backward(loss, NULL, false));
    double want[2] = {2 * exp(0.5), 2 * exp(-1)};
    expect(td_grad_of(x), 2, want, 1e-12);
    ASSERT_ERROR(td_backward(loss, NULL, false), TD_ERR_STATE, "second time");
    ASSERT_ERROR(td_backward(loss, NULL, false), TD_ERR_STATE, "retain_graph");
    td_scope_end();
}

TEST(nonscalar_backward) {
    td_scope_begin();
    double v[3] = {1, 2, 3}, g[3] = {1, 0, -1}, g2[2] = {1, 1};
    td_tensor *x = vec(3, v, true);
    td_tensor *y = ASSERT_TENSOR(td_mul(x, x));
    ASSERT_ERROR(td_backward(y, NULL, true), TD_ERR_MISUSE, "one-element");
    ASSERT_ERROR(td_backward(y, vec(2, g2, false), true), TD_ERR_SHAPE, "grad_output");
    ASSERT_OK(td_backward(y, vec(3, g, false), false)); /* dx = 2 x g */
    double want[3] = {2, 0, -6};
    expect(td_grad_of(x), 3, want, 0);
    td_tensor *c = vec(3, v, false);
    ASSERT_ERROR(td_backward(td_sum(c, 0, NULL, false), NULL, false), TD_ERR_MISUSE, "does not require grad");
    td_scope_end();
}

TEST(no_grad_and_inference) {
    td_scope_begin();
    double v[2] = {1, 2};
    td_tensor *x = vec(2, v, true);
    ASSERT(td_grad_enabled());
    td_no_grad_begin();
    ASSERT(!td_grad_enabled());
    td_tensor *a = ASSERT_TENSOR(td_mul(x, x));
    ASSERT(!td_requires_grad(a) && td_is_leaf(a));
    td_enable_grad_begin();
    td_tensor *b = ASSERT_TENSOR(td_mul(x, x));
    ASSERT(td_requires_grad(b) && !td_is_leaf(b));
    td_enable_grad_end();
    td_no_grad_end();
    td_inference_begin();
    td_enable_grad_begin(); /* does not reopen recording inside inference */
    ASSERT(!td_grad_enabled());
    td_tensor *c = ASSERT_TENSOR(td_exp(x));
    ASSERT(!td_requires_grad(c));
    td_enable_grad_end();
    td_inference_end();
    ASSERT(td_grad_enabled());
    ASSERT(td_requires_grad(ASSERT_TENSOR(td_exp(x))));
    ASSERT_ERROR(td_no_grad_end(), TD_ERR_MISUSE, "no grad-mode scope");
    td_scope_end();
}

TEST(detach) {
    td_scope_begin();
    double v[2] = {3, 4};
    td_tensor *x = vec(2, v, true);
    td_tensor *y = ASSERT_TENSOR(td_mul_scalar(x, 2));
    td_tensor *d = ASSERT_TENSOR(td_detach(y));
    ASSERT(!td_requires_grad(d) && td_is_leaf(d));
    double dv[2];
    ASSERT_OK(td_copy_to_host(d, dv, sizeof dv, TD_F64));
    ASSERT_NEAR(dv[1], 8, 0);
    /* loss = sum(d * x) with d constant: dx = d = 2 x */
    ASSERT_OK(td_backward(sum_all(td_mul(d, x)), NULL, false));
    double want[2] = {6, 8};
    expect(td_grad_of(x), 2, want, 0);
    td_scope_end();
}

static td_tensor *double_hook(td_tensor *g, void *user) {
    (*(int *)user)++;
    return td_mul_scalar(g, 2);
}
static td_tensor *observe_hook(td_tensor *g, void *user) {
    *(double *)user = td_item(td_sum(g, 0, NULL, false));
    return NULL;
}

TEST(leaf_hooks) {
    td_scope_begin();
    double v[2] = {1, 2};
    td_tensor *x = vec(2, v, true);
    int calls = 0;
    double seen = 0;
    ASSERT_OK(td_register_hook(x, double_hook, &calls));
    ASSERT_OK(td_register_hook(x, observe_hook, &seen));
    /* loss = sum(3x) + sum(x): the hook sees the total 4 per element once */
    td_tensor *loss = ASSERT_TENSOR(td_add(sum_all(td_mul_scalar(x, 3)), sum_all(x)));
    ASSERT_OK(td_backward(loss, NULL, false));
    ASSERT_EQ_INT(calls, 1);
    ASSERT_NEAR(seen, 16, 0); /* the second hook sees the doubled gradient */
    double want[2] = {8, 8};
    expect(td_grad_of(x), 2, want, 0);
    ASSERT_ERROR(td_register_hook(loss, double_hook, &calls), TD_ERR_MISUSE, "leaves");
    td_scope_end();
}

TEST(grad_of_intermediate) {
    td_scope_begin();
    double v[2] = {1, 3};
    td_tensor *x = vec(2, v, true);
    td_tensor *h = ASSERT_TENSOR(td_mul(x, x)); /* h = x^2, loss = sum(h * 5) */
    td_tensor *loss = ASSERT_TENSOR(sum_all(td_mul_scalar(h, 5)));
    td_tensor *in[2] = {h, x}, *g[2];
    ASSERT_OK(td_grad(1, &loss, NULL, 2, in, g, false, false, false));
    double dh[2] = {5, 5}, dx[2] = {10, 30};
    expect(g[0], 2, dh, 0);
    expect(g[1], 2, dx, 0);
    ASSERT(td_grad_of(x) == NULL); /* td_grad leaves .grad alone */
    td_scope_end();
}

TEST(grad_unused) {
    td_scope_begin();
    double v[2] = {1, 2};
    td_tensor *x = vec(2, v, true), *z = vec(2, v, true);
    td_tensor *loss = ASSERT_TENSOR(sum_all(td_exp(x)));
    td_tensor *in[2] = {x, z}, *g[2];
    ASSERT_ERROR(td_grad(1, &loss, NULL, 2, in, g, true, false, false), TD_ERR_MISUSE, "allow_unused");
    ASSERT(g[0] == NULL && g[1] == NULL);
    ASSERT_OK(td_grad(1, &loss, NULL, 2, in, g, false, false, true));
    ASSERT(g[0] != NULL && g[1] == NULL);
    td_scope_end();
}

TEST(second_derivative_cube) {
    td_scope_begin();
    double v[3] = {-1.5, 0.5, 2};
    td_tensor *x = vec(3, v, true);
    /* y = x^3 (pow) and y = x*x*x (mul): dy/dx = 3x^2, d2y/dx2 = 6x */
    td_tensor *ys[2] = {td_pow_scalar(x, 3), td_mul(td_mul(x, x), x)};
    for (int k = 0; k < 2; k++) {
        td_tensor *y = ASSERT_TENSOR(sum_all(ys[k])), *g1, *g2;
        ASSERT_OK(td_grad(1, &y, NULL, 1, &x, &g1, true, true, false));
        double w1[3] = {6.75, 0.75, 12};
        expect(g1, 3, w1, 1e-12);
        ASSERT(td_requires_grad(g1));
        td_tensor *s = ASSERT_TENSOR(sum_all(g1));
        ASSERT_OK(td_grad(1, &s, NULL, 1, &x, &g2, false, false, false));
        double w2[3] = {-9, 3, 12};
        expect(g2, 3, w2, 1e-12);
    }
    td_scope_end();
}

TEST(second_derivative_tanh) {
    td_scope_begin();
    double v[3] = {-0.7, 0.1, 1.3};
    td_tensor *x = vec(3, v, true);
    td_tensor *y = ASSERT_TENSOR(sum_all(td_tanh(x))), *g1, *g2;
    /* d tanh = 1 - t^2, d2 tanh = -2 t (1 - t^2) */
    ASSERT_OK(td_grad(1, &y, NULL, 1, &x, &g1, true, true, false)); /* create_graph needs retain_graph, as in PyTorch */
    ASSERT_OK(td_grad(1, (td_tensor *[]){sum_all(g1)}, NULL, 1, &x, &g2, false, false, false));
    double w1[3], w2[3];
    for (int i = 0; i < 3; i++) {
        double t = tanh(v[i]);
        w1[i] = 1 - t * t;
        w2[i] = -2 * t * (1 - t * t);
    }
    expect(g1, 3, w1, 1e-12);
    expect(g2, 3, w2, 1e-12);
    td_scope_end();
}

/* loss = sum((w * x - t)^2) */
static td_tensor *sq_loss(void *user, int n, td_tensor *const *p) {
    (void)n;
    td_tensor **xt = user;
    td_tensor *r = td_sub(td_mul(p[0], xt[0]), xt[1]);
    return td_sum(td_mul(r, r), 0, NULL, false);
}

TEST(value_and_grad) {
    td_scope_begin();
    double wv[2] = {2, -1}, xv[2] = {1, 3}, tv[2] = {0.5, 1};
    td_tensor *w = vec(2, wv, false), *unused = vec(2, wv, false);
    td_tensor *xt[2] = {vec(2, xv, false), vec(2, tv, false)};
    td_tensor *params[2] = {w, unused}, *value, *grads[2];
    ASSERT_OK(td_value_and_grad(sq_loss, xt, 2, params, &value, grads));
    /* r = (1.5, -4): loss = 2.25 + 16; dloss/dw = 2 r x = (3, -24) */
    ASSERT_NEAR(td_item(value), 18.25, 1e-12);
    ASSERT(!td_requires_grad(value));
    double dw[2] = {3, -24}, zero[2] = {0, 0};
    expect(grads[0], 2, dw, 1e-12);
    expect(grads[1], 2, zero, 0);
    ASSERT(td_grad_of(w) == NULL && !td_requires_grad(w));
    td_scope_end();
}

/* region: tanh(exp(dropout(x * w)) * x), with dropout drawing from the default generator */
static td_status drop_region(void *user, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)user, (void)n_in, (void)n_out;
    td_rng_state r = td_rng_reserve(64);
    out[0] = td_tanh(td_mul(td_exp(td_dropout(td_mul(in[0], in[1]), 0.5, r.seed, r.offset)), in[0]));
    return out[0] ? TD_OK : td_last_status();
}

TEST(checkpoint_dropout) {
    td_scope_begin();
    enum { N = 16 };
    double xv[N], wv[N];
    for (int i = 0; i < N; i++) xv[i] = 0.1 * i - 0.7, wv[i] = 0.05 * i + 0.3;
    double g_plain[2][N], g_ckpt[2][N];
    int64_t live_plain = 0, live_ckpt = 0;
    for (int mode = 0; mode < 2; mode++) {
        td_scope_begin();
        td_tensor *x = vec(N, xv, true), *w = vec(N, wv, true), *y;
        td_manual_seed(1234);
        int64_t before = td_debug_live_tensors();
        td_tensor *in[2] = {x, w};
        td_scope_begin();
        if (mode == 0)
            ASSERT_OK(drop_region(NULL, 2, in, 1, &y));
        else
            ASSERT_OK(td_checkpoint(drop_region, NULL, 2, in, 1, &y));
        td_keep(y);
        td_scope_end(); /* the region's temporaries go; the graph keeps what it saved */
        (mode ? &live_ckpt : &live_plain)[0] = td_debug_live_tensors() - before;
        td_rng_reserve(1000); /* the generator moved on before backward */
        ASSERT_OK(td_backward(sum_all(y), NULL, false));
        ASSERT_OK(td_copy_to_host(td_grad_of(x), mode ? g_ckpt[0] : g_plain[0], sizeof g_plain[0], TD_F64));
        ASSERT_OK(td_copy_to_host(td_grad_of(w), mode ? g_ckpt[1] : g_plain[1], sizeof g_plain[1], TD_F64));
        td_release(y);
        td_scope_end();
    }
    int dropped = 0;
    for (int i = 0; i < N; i++) {
        ASSERT(g_plain[0][i] == g_ckpt[0][i] && g_plain[1][i] == g_ckpt[1][i]);
        dropped += g_plain[1][i] == 0; /* dw = 0 where the mask dropped */
    }
    ASSERT(dropped > 0 && dropped < N); /* the mask matters */
    /* plain keeps what exp, tanh and mul saved; the checkpoint keeps only its inputs (already live) */
    fprintf(stderr, "  live tensors held by the graph: plain %lld, checkpoint %lld\n", (long long)live_plain,
            (long long)live_ckpt);
    ASSERT(live_ckpt < live_plain);
    ASSERT_EQ_INT(live_ckpt, 1); /* y itself */
    td_scope_end();
}

/* region over x alone, using a parameter w from user: y = tanh(x * w) */
static td_status param_region(void *user, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    out[0] = td_tanh(td_mul(in[0], (td_tensor *)user));
    return out[0] ? TD_OK : td_last_status();
}

TEST(checkpoint_params_inside) {
    td_scope_begin();
    double xv[3] = {0.2, -0.4, 1}, wv[3] = {1.5, 0.5, -2};
    td_tensor *x = vec(3, xv, false), *w = vec(3, wv, true), *y;
    ASSERT_OK(td_checkpoint(param_region, w, 1, &x, 1, &y));
    ASSERT(td_requires_grad(y)); /* the region reads w, which requires grad */
    ASSERT_OK(td_backward(sum_all(y), NULL, false));
    double want[3];
    for (int i = 0; i < 3; i++) {
        double t = tanh(xv[i] * wv[i]);
        want[i] = (1 - t * t) * xv[i];
    }
    expect(td_grad_of(w), 3, want, 1e-12);
    td_scope_end();
}

/* custom f(a, b) = a * b; backward da = dy * b, db = dy * a, counting calls */
static int custom_db_computed;
static td_status mul_fwd(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    ASSERT(!td_grad_enabled());
    ASSERT_OK(td_ctx_save_for_backward(ctx, 2, in));
    out[0] = td_mul(in[0], in[1]);
    return TD_OK;
}
static td_status mul_bwd(td_function_ctx *ctx, int n_out, td_tensor *const *dy, int n_in, td_tensor **dx) {
    (void)n_out, (void)n_in;
    ASSERT(*(int *)td_ctx_user(ctx) == 42);
    if (td_ctx_needs_input_grad(ctx, 0)) dx[0] = td_mul(dy[0], td_ctx_saved(ctx, 1));
    if (td_ctx_needs_input_grad(ctx, 1)) {
        custom_db_computed++;
        dx[1] = td_mul(dy[0], td_ctx_saved(ctx, 0));
    }
    return TD_OK;
}
static const td_function custom_mul = {"custom_mul", mul_fwd, mul_bwd};

static td_tensor *apply_custom(void *user, int n, td_tensor *const *in) {
    td_tensor *y;
    return td_function_apply(&custom_mul, user, n, in, 1, &y) == TD_OK ? y : NULL;
}

TEST(custom_function) {
    td_scope_begin();
    int magic = 42;
    double av[3] = {1, 2, 3}, bv[3] = {-1, 0.5, 4};
    td_tensor *a = vec(3, av, true), *b = vec(3, bv, false), *y;
    td_tensor *in[2] = {a, b};
    ASSERT_OK(td_function_apply(&custom_mul, &magic, 2, in, 1, &y));
    ASSERT(td_requires_grad(y) && !td_is_leaf(y));
    ASSERT_OK(td_backward(sum_all(y), NULL, false));
    expect(td_grad_of(a), 3, bv, 0);
    ASSERT_EQ_INT(custom_db_computed, 0); /* b does not require grad */
    ASSERT_OK(td_set_requires_grad(b, true));
    ASSERT_OK(td_gradcheck(apply_custom, &magic, 2, in, NULL));
    ASSERT(custom_db_computed > 0);
    td_scope_end();
}

/* custom exp that saves its output: dy/dx = y */
static td_status exp_fwd(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    out[0] = td_exp(in[0]);
    return td_ctx_save_for_backward(ctx, 1, out);
}
static td_status exp_bwd(td_function_ctx *ctx, int n_out, td_tensor *const *dy, int n_in, td_tensor **dx) {
    (void)n_out, (void)n_in;
    dx[0] = td_mul(dy[0], td_ctx_saved(ctx, 0));
    return dx[0] ? TD_OK : td_last_status();
}
static const td_function custom_exp = {"custom_exp", exp_fwd, exp_bwd};

TEST(custom_function_saves_output) {
    int64_t base = td_debug_live_tensors();
    td_scope_begin();
    double v[2] = {0.3, -1.2};
    td_tensor *x = vec(2, v, true), *y, *g1, *g2;
    ASSERT_OK(td_function_apply(&custom_exp, NULL, 1, &x, 1, &y));
    td_tensor *s = ASSERT_TENSOR(sum_all(y));
    /* create_graph through the saved output: d/dx e^x = e^x, twice */
    ASSERT_OK(td_grad(1, &s, NULL, 1, &x, &g1, true, true, false));
    ASSERT_OK(td_grad(1, (td_tensor *[]){sum_all(g1)}, NULL, 1, &x, &g2, true, false, false));
    double w[2] = {exp(0.3), exp(-1.2)};
    expect(g1, 2, w, 1e-12);
    expect(g2, 2, w, 1e-12);
    ASSERT_OK(td_backward(s, NULL, false));
    ASSERT_ERROR(td_backward(s, NULL, false), TD_ERR_STATE, "second time");
    td_scope_end();
    ASSERT_EQ_INT(td_debug_live_tensors(), base); /* no cycle through the saved output */
}

TEST(broadcast_grads) {
    td_scope_begin();
    double av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, 20, 30}, cv = 0.5;
    int64_t s23[2] = {2, 3};
    td_tensor *a = ASSERT_TENSOR(td_from_data(av, 2, s23, TD_F64, TD_CPU));
    ASSERT_OK(td_set_requires_grad(a, true));
    td_tensor *b = vec(3, bv, true);
    td_tensor *c = ASSERT_TENSOR(td_scalar(cv, TD_F32, TD_CPU)); /* promoted to f64, grad back in f32 */
    ASSERT_OK(td_set_requires_grad(c, true));
    /* loss = sum(a * b * c): da = b c (rows), db = c * colsum(a), dc = sum(a b) */
    ASSERT_OK(td_backward(sum_all(td_mul(td_mul(a, b), c)), NULL, false));
    double da[6] = {5, 10, 15, 5, 10, 15}, db[3] = {2.5, 3.5, 4.5}, dc = 10 * 5 + 20 * 7 + 30 * 9;
    expect(td_grad_of(a), 6, da, 0);
    expect(td_grad_of(b), 3, db, 0);
    ASSERT_EQ_INT(td_tensor_dtype(td_grad_of(c)), TD_F32);
    ASSERT_EQ_INT(td_ndim(td_grad_of(c)), 0);
    ASSERT_NEAR(td_item(td_grad_of(c)), dc, 0);
    td_scope_end();
}

TEST(view_grads) {
    td_scope_begin();
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = i + 1;
    int64_t s34[2] = {3, 4}, s234[3] = {2, 3, 4};
    td_tensor *x = ASSERT_TENSOR(td_from_data(v, 2, s34, TD_F64, TD_CPU));
    ASSERT_OK(td_set_requires_grad(x, true));
    /* loss = sum(select(x,0,1) * 2) + sum(slice(x,1,1,3) * 3) + sum(expand(x) * permute weights) */
    td_tensor *l1 = sum_all(td_mul_scalar(td_select(x, 0, 1), 2));
    td_tensor *l2 = sum_all(td_mul_scalar(td_slice(x, 1, 1, 3, 1), 3));
    td_tensor *e = td_expand(x, 3, s234); /* each x element used twice */
    td_tensor *t = td_transpose(x, 0, 1); /* [4,3]: weight each by its column index j of x */
    td_tensor *col = ASSERT_TENSOR(td_arange(0, 4, 1, TD_F64, TD_CPU)); /* t is [4,3]: row j is x[:, j] */
    td_tensor *l3 = sum_all(e);
    td_tensor *l4 = sum_all(td_mul(t, td_reshape(col, 2, (int64_t[]){4, 1})));
    td_tensor *loss = td_add(td_add(l1, l2), td_add(l3, l4));
    ASSERT_OK(td_backward(ASSERT_TENSOR(loss), NULL, false));
    double want[12];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) want[r * 4 + c] = (r == 1 ? 2 : 0) + (c == 1 || c == 2 ? 3 : 0) + 2 + c;
    expect(td_grad_of(x), 12, want, 0);
    td_scope_end();
}

TEST(slice_step_grad) {
    td_scope_begin();
    double v[7] = {1, 2, 3, 4, 5, 6, 7};
    td_tensor *x = vec(7, v, true);
    /* y = x[1:7:2] = (2, 4, 6); loss = sum(y^2): dx = 2x at 1, 3, 5 */
    td_tensor *y = ASSERT_TENSOR(td_slice(x, 0, 1, 7, 2));
    ASSERT_OK(td_backward(sum_all(td_mul(y, y)), NULL, false));
    double want[7] = {0, 4, 0, 8, 0, 12, 0};
    expect(td_grad_of(x), 7, want, 0);
    /* and under create_graph (the differentiable placement): d2/dx2 sum(y^2) = 2 at those */
    td_tensor *g1, *g2;
    td_tensor *s = ASSERT_TENSOR(sum_all(td_pow_scalar(td_slice(x, 0, 1, 7, 2), 3)));
    ASSERT_OK(td_grad(1, &s, NULL, 1, &x, &g1, false, true, false));
    ASSERT_OK(td_grad(1, (td_tensor *[]){sum_all(g1)}, NULL, 1, &x, &g2, false, false, false));
    double w1[7] = {0, 12, 0, 48, 0, 108, 0}, w2[7] = {0, 12, 0, 24, 0, 36, 0};
    expect(g1, 7, w1, 1e-12);
    expect(g2, 7, w2, 1e-12);
    td_scope_end();
}

/* split into [2,2], [2,0] and [2,3] along dim 1 of x [2,5]: views of x; one node whose backward
** concatenates the parts' gradients, zeros for a part without one; second order through the cat. */
TEST(split_grad) {
    td_scope_begin();
    double v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    td_tensor *x = ASSERT_TENSOR(td_reshape(vec(10, v, false), 2, (int64_t[]){2, 5}));
    ASSERT_OK(td_set_requires_grad(x, true));
    td_tensor *p[3];
    ASSERT_OK(td_split(x, 3, (int64_t[]){2, 0, 3}, -1, p));
    ASSERT(td_size(p[0], 1) == 2 && td_size(p[1], 1) == 0 && td_size(p[2], 1) == 3);
    ASSERT_EQ_INT(td_storage_offset(p[2]), 2); /* views: no copy */
    expect(td_contiguous(p[2]), 6, (double[]){3, 4, 5, 8, 9, 10}, 0);
    /* loss = sum(2 p0) + sum(p2^2); p1 unused: dx = 2 in columns 0-1, 2x in columns 2-4 */
    ASSERT_OK(
        td_backward(ASSERT_TENSOR(td_add(sum_all(td_mul_scalar(p[0], 2)), sum_all(td_mul(p[2], p[2])))), NULL, false));
    expect(td_grad_of(x), 10, (double[]){2, 2, 6, 8, 10, 2, 2, 16, 18, 20}, 0);
    /* only the middle part used: zeros around it */
    td_zero_grad(x);
    ASSERT_OK(td_split(x, 3, (int64_t[]){1, 3, 1}, 1, p));
    ASSERT_OK(td_backward(ASSERT_TENSOR(sum_all(p[1])), NULL, false));
    expect(td_grad_of(x), 10, (double[]){0, 1, 1, 1, 0, 0, 1, 1, 1, 0}, 0);
    /* second order: d/dx sum(p1^3) = 3x^2 there, and d/dx of its sum = 6x */
    ASSERT_OK(td_split(x, 2, (int64_t[]){1, 1}, 0, p));
    td_tensor *g1, *g2, *s = ASSERT_TENSOR(sum_all(td_pow_scalar(p[1], 3)));
    ASSERT_OK(td_grad(1, &s, NULL, 1, &x, &g1, false, true, false));
    ASSERT_OK(td_grad(1, (td_tensor *[]){sum_all(g1)}, NULL, 1, &x, &g2, false, false, false));
    expect(g1, 10, (double[]){0, 0, 0, 0, 0, 108, 147, 192, 243, 300}, 1e-12);
    expect(g2, 10, (double[]){0, 0, 0, 0, 0, 36, 42, 48, 54, 60}, 1e-12);
    /* errors leave out[] NULL */
    ASSERT_EQ_INT(td_split(x, 2, (int64_t[]){2, 2}, 1, p), TD_ERR_SHAPE);
    ASSERT(!p[0] && !p[1] && strstr(td_last_error(), "sum to 4, but dim 1 has size 5"));
    ASSERT_EQ_INT(td_split(x, 2, (int64_t[]){-1, 6}, 1, p), TD_ERR_SHAPE);
    ASSERT_EQ_INT(td_split(x, 2, (int64_t[]){INT64_MAX, INT64_MAX}, 1, p), TD_ERR_SHAPE);
    ASSERT_EQ_INT(td_split(x, 0, (int64_t[]){5}, 1, p), TD_ERR_MISUSE);
    ASSERT_EQ_INT(td_split(x, 1, (int64_t[]){5}, 2, p), TD_ERR_INDEX);
    ASSERT_EQ_INT(td_split(ASSERT_TENSOR(td_scalar(1, TD_F32, TD_CPU)), 1, (int64_t[]){1}, 0, p), TD_ERR_INDEX);
    td_scope_end();
}

TEST(requires_grad_errors) {
    td_scope_begin();
    td_tensor *i = ASSERT_TENSOR(td_arange(0, 3, 1, TD_I64, TD_CPU));
    ASSERT_ERROR(td_set_requires_grad(i, true), TD_ERR_DTYPE, "int64");
    double v[2] = {1, 2};
    td_tensor *x = vec(2, v, true);
    td_tensor *y = ASSERT_TENSOR(td_exp(x));
    ASSERT_ERROR(td_set_requires_grad(y, false), TD_ERR_MISUSE, "not a leaf");
    ASSERT_ERROR(td_grad(1, &y, NULL, 1, &i, (td_tensor *[1]){0}, false, false, false), TD_ERR_MISUSE,
                 "does not require grad");
    td_scope_end();
}

TEST(no_leaks) {
    int64_t base = td_debug_live_tensors();
    double v[4] = {0.5, -1, 2, 0.25};
    int64_t s22[2] = {2, 2};
    td_tensor *x = ASSERT_TENSOR(td_from_data(v, 2, s22, TD_F64, TD_CPU));
    ASSERT_OK(td_set_requires_grad(x, true));
    for (int step = 0; step < 3; step++) {
        td_scope_begin();
        td_tensor *h = td_tanh(td_matmul(x, td_transpose(x, 0, 1)));
        td_tensor *loss = td_mean(td_mul(td_exp(h), td_slice(x, 0, 0, 1, 1)), 0, NULL, false);
        ASSERT_OK(td_backward(ASSERT_TENSOR(loss), NULL, step == 0));
        td_tensor *g;
        td_tensor *l2 = sum_all(td_mul(x, x));
        ASSERT_OK(td_grad(1, &l2, NULL, 1, &x, &g, false, true, false)); /* a graph in the result */
        td_scope_end();
    }
    ASSERT(td_grad_of(x) != NULL);
    td_release(x); /* frees x.grad too */
    ASSERT_EQ_INT(td_debug_live_tensors(), base);
}

TEST(long_chain_frees) {
    int64_t base = td_debug_live_tensors();
    double v = 1.0;
    int64_t one = 1;
    td_tensor *x = ASSERT_TENSOR(td_from_data(&v, 1, &one, TD_F64, TD_CPU));
    ASSERT_OK(td_set_requires_grad(x, true));
    td_tensor *y = td_retain(x);
    for (int i = 0; i < 100000; i++) { /* a chain deeper than any recursion would survive */
        td_tensor *z = td_add_scalar(y, 1e-6);
        td_release(y);
        y = z;
    }
    ASSERT_NEAR(td_item(y), 1.1, 1e-9);
    td_release(y);
    td_release(x);
    ASSERT_EQ_INT(td_debug_live_tensors(), base);
}

TEST_MAIN(TESTS)

/* Version counters: writing a tensor that backward needs, after it was saved,
** fails backward with torch's message instead of giving wrong gradients. */
TEST(inplace_saved_input) {
    td_scope_begin();
    double v[3] = {1, -2, 3}, w0[3] = {4, 5, 6}, z[3] = {0, 0, 0};
    td_tensor *x = vec(3, v, true), *w = vec(3, w0, false);
    td_tensor *loss = ASSERT_TENSOR(sum_all(td_mul(x, w)));                               /* mul saves w for dx = w */
    ASSERT_OK(td_copy_(td_slice(w, 0, 1, 2, 1), td_slice(vec(3, z, false), 0, 0, 1, 1))); /* through a view */
    ASSERT_ERROR(td_backward(loss, NULL, false), TD_ERR_STATE,
                 "one of the variables needed for gradient computation has been modified by an inplace operation: "
                 "[float64 [3]], input 1 of");
    /* a fresh graph after the write is fine */
    ASSERT_OK(td_backward(ASSERT_TENSOR(sum_all(td_mul(x, w))), NULL, false));
    double want[3] = {4, 0, 6};
    expect(td_grad_of(x), 3, want, 0);
    td_scope_end();
}

TEST(inplace_saved_output) {
    td_scope_begin();
    double v[2] = {0.5, -1}, z[2] = {0, 0};
    td_tensor *x = vec(2, v, true);
    td_tensor *y = ASSERT_TENSOR(td_exp(x)); /* exp saves its output: dx = y */
    td_tensor *loss = ASSERT_TENSOR(sum_all(y));
    ASSERT_OK(td_copy_(y, vec(2, z, false)));
    td_clear_error();
    (void)td_backward(loss, NULL, false);
    ASSERT_EQ_INT(td_last_status(), TD_ERR_STATE);
    printf("  %s\n", td_last_error());
    ASSERT(strstr(td_last_error(), "output 0 of") && strstr(td_last_error(), "expected version"));
    td_scope_end();
}

TEST(inplace_unsaved_is_fine) {
    td_scope_begin();
    double v[2] = {1, 2}, b0[2] = {3, 4}, z[2] = {0, 0};
    td_tensor *x = vec(2, v, true), *b = vec(2, b0, false);
    td_tensor *loss = ASSERT_TENSOR(sum_all(td_mul(td_add(x, b), x))); /* add saves nothing: b may change */
    ASSERT_OK(td_copy_(b, vec(2, z, false)));
    ASSERT_OK(td_backward(loss, NULL, false));
    double want[2] = {2 * 1 + 3, 2 * 2 + 4}; /* d/dx (x + b) x = 2x + b, with the b of the forward */
    expect(td_grad_of(x), 2, want, 0);
    td_scope_end();
}

/* A failure to record the graph (out of memory, an op without a formula)
** fails the op: no result escapes without its grad_fn. */
static td__record_fn real_record;
static td_status failing_record(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                                const td_op_params *p) {
    (void)kind, (void)n_in, (void)in, (void)n_out, (void)out, (void)p;
    return td_error_set(TD_ERR_OOM, "planted: out of memory recording the graph");
}

TEST(record_failure_fails_op) {
    double v[2] = {1, 2};
    td_tensor *x = vec(2, v, true);
    int64_t live = td_debug_live_tensors();
    real_record = td__record_hook;
    td__record_hook = failing_record;
    ASSERT_ERROR(td_mul(x, x), TD_ERR_OOM, "planted");
    ASSERT_ERROR(td_exp(x), TD_ERR_OOM, "planted");
    td__record_hook = real_record;
    ASSERT_EQ_INT(td_debug_live_tensors(), live); /* the outputs were released */
    td_tensor *y = ASSERT_TENSOR(td_mul(x, x));
    ASSERT(td_requires_grad(y));
    td_release(y);
    td_release(x);
}

/* An op without a derivative formula whose input requires grad (as a fused
** backward op under create_graph would be without one) fails naming the op,
** rather than leaving a result that silently has no gradient. */
TEST(op_without_formula_names_it) {
    double v[2] = {1, 2};
    td_tensor *x = vec(2, v, true);
    ASSERT_ERROR(td__record_hook(TD_OP_SGD_STEP, 1, &x, 0, NULL, NULL), TD_ERR_UNSUPPORTED,
                 "sgd_step: no derivative formula");
    td_release(x);
}
