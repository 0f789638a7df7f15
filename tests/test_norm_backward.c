/* LAYER_NORM_BACKWARD (td__layer_norm_backward): layer_norm's and
** add_layer_norm's gradients by the fused op (a plain backward) against the
** composed formula (the same gradients by td_grad under create_graph, which
** records ops instead), on the same device: dx, dw, db, and add_layer_norm's dx = dr with
** the sum's own gradient passed through in the same pass; and the op in f32,
** bf16 and f16 against the CPU's in float64 from the same rounded inputs over
** row counts and lengths that reach every CUDA tier (a warp a row, a block a
** row, the two-pass path past the registers), with dw and db the same bits
** on a second run; the Vulkan shader against the
** composed formula, and its dw and db the same bits twice.
** residual_taken_{cpu,vulkan}: s = x + ln(x) c0 (a residual block's shape): ln's backward runs after the add's,
** so it takes x's gradient so far into its op as ds (td__take_input_grad), and the backward issues no `add`; x's,
** w's and b's gradients equal the two branches' gradients summed apart (td_grad of each), for x a non-leaf
** (td_grad capturing it), and a leaf with a hook (which sees the total) under retain_graph (a second backward
** doubles .grad), in f32 and bf16; create_graph (no take: the composed formula) gives the same first gradients. */
#include <string.h>

#include "test_util.h"
#include "trident/profile.h"

#include "core/norm_backward.h"

#define TESTS(X)                                                                                                       \
    X(fused_equals_composed_cpu)                                                                                       \
    X(fused_equals_composed_cuda)                                                                                      \
    X(fused_equals_composed_vulkan)                                                                                    \
    X(deterministic_vulkan)                                                                                            \
    X(against_f64_cpu)                                                                                                 \
    X(against_f64_cuda)                                                                                                \
    X(bad_operands)                                                                                                    \
    X(residual_taken_cpu)                                                                                              \
    X(residual_taken_vulkan)

static td_tensor *leaf(int nd, const int64_t *shape, uint64_t seed, td_dtype dt, td_device dev) {
    td_tensor *t = ASSERT_TENSOR(td_to(td_randn(nd, shape, seed, 0, dt, TD_CPU), dev));
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* the loss of a layer_norm (add: add_layer_norm, its sum used too) over x [A, 5, D] normalized over the
** last n_norm dims, with w and/or b; gradients of x (and r), w, b by a fused (create_graph false) and a
** composed (true) backward, compared */
static void check_rows(td_device dev, td_dtype dt, bool add, int n_norm, bool w, bool b, int64_t A, int64_t D,
                       double tol) {
    td_scope_begin();
    int64_t xs[3] = {A, 5, D}, *ws = xs + 3 - n_norm;
    td_tensor *p[4], *grads[2][4];
    for (int pass = 0; pass < 2; pass++) {
        p[0] = leaf(3, xs, 1, dt, dev), p[1] = leaf(3, xs, 2, dt, dev);
        p[2] = w ? leaf(n_norm, ws, 3, dt, dev) : NULL, p[3] = b ? leaf(n_norm, ws, 4, dt, dev) : NULL;
        td_tensor *g1 = ASSERT_TENSOR(td_to(td_randn(3, xs, 5, 0, dt, TD_CPU), dev)), *s = NULL, *y;
        td_tensor *g2 = ASSERT_TENSOR(td_to(td_randn(3, xs, 6, 0, dt, TD_CPU), dev));
        if (add) {
            y = ASSERT_TENSOR(td_add_layer_norm(p[0], p[1], n_norm, p[2], p[3], 1e-5, &s));
            y = td_add(td_mul(y, g1), td_mul(ASSERT_TENSOR(s), g2));
        } else {
            y = td_mul(ASSERT_TENSOR(td_layer_norm(p[0], n_norm, p[2], p[3], 1e-5)), g1);
        }
        td_tensor *loss = ASSERT_TENSOR(td_sum(y, 0, NULL, false)), *in[4];
        int n_in = 0, at[4];
        for (int i = 0; i < 4; i++)
            if (p[i] && (i != 1 || add)) at[n_in] = i, in[n_in++] = p[i];
        td_tensor *got[4] = {NULL, NULL, NULL, NULL};
        ASSERT_OK(td_grad(1, &loss, NULL, n_in, in, got, false, pass == 1, false)); /* pass 1: composed */
        for (int i = 0; i < 4; i++) grads[pass][i] = NULL;
        for (int k = 0; k < n_in; k++) grads[pass][at[k]] = got[k];
    }
    double worst = 0;
    for (int i = 0; i < 4; i++) {
        if (!grads[1][i]) continue;
        ASSERT(grads[0][i] != NULL);
        worst = fmax(worst, test_max_rel(td_detach(grads[0][i]), td_detach(grads[1][i])));
    }
    printf("  %s %s over %d dims, rows %lld, D %lld%s%s: worst %.3g\n", td_dtype_name(dt),
           add ? "add_layer_norm" : "layer_norm", n_norm, (long long)(A * 5), (long long)D, w ? ", w" : "",
           b ? ", b" : "", worst);
    ASSERT(worst <= tol);
    td_scope_end();
}

static void check(td_device dev, td_dtype dt, bool add, int n_norm, bool w, bool b, int64_t D, double tol) {
    check_rows(dev, dt, add, n_norm, w, b, 3, D, tol);
}

static void check_all(td_device dev, td_dtype dt, double tol) {
    for (int add = 0; add < 2; add++) {
        check(dev, dt, add, 1, true, true, 7, tol);
        check(dev, dt, add, 2, true, false, 33, tol);
        check(dev, dt, add, 1, false, true, 1000, tol);
        check(dev, dt, add, 1, false, false, 64, tol);
    }
    check(dev, dt, false, 1, true, true, 20000, tol); /* past the CUDA kernel's registers */
}

TEST(fused_equals_composed_cpu) {
    check_all(TD_CPU, TD_F64, 1e-10);
    check_all(TD_CPU, TD_F32, 1e-4);
}

TEST(fused_equals_composed_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    check_all(dev, TD_F32, 1e-4);
    check_all(dev, TD_F64, 1e-10);
}

/* the op on dev in dt against the CPU's in f64 from the same (dt-rounded) inputs, over R rows of n, with w
** and (add) ds: worst error of dx, dw, db; dw and db must have the same bits on a second run */
static double against_f64(td_device dev, td_dtype dt, int64_t R, int64_t n, bool add) {
    int64_t xs[2] = {R, n};
    td_tensor *in[6] = {
        test_uniform_tensor(2, xs, -1, 1, dt, TD_CPU),    test_uniform_tensor(2, xs, -2, 2, dt, TD_CPU),
        test_uniform_tensor(1, &n, 0.5, 1.5, dt, TD_CPU), test_uniform_tensor(1, &R, -0.5, 0.5, dt, TD_CPU),
        test_uniform_tensor(1, &R, 0.5, 2, dt, TD_CPU),   add ? test_uniform_tensor(2, xs, -1, 1, dt, TD_CPU) : NULL,
    };
    td_tensor *ref[3], *got[2][3], *d64[6], *dd[6];
    for (int i = 0; i < 6; i++) {
        d64[i] = in[i] ? ASSERT_TENSOR(td_cast(in[i], TD_F64)) : NULL;
        dd[i] = in[i] ? ASSERT_TENSOR(td_to(in[i], dev)) : NULL;
    }
    ASSERT_OK(td__layer_norm_backward(d64[0], d64[1], d64[2], d64[3], d64[4], d64[5], n, true, true, &ref[0], &ref[1],
                                      &ref[2]));
    for (int run = 0; run < 2; run++)
        ASSERT_OK(td__layer_norm_backward(dd[0], dd[1], dd[2], dd[3], dd[4], dd[5], n, true, true, &got[run][0],
                                          &got[run][1], &got[run][2]));
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        worst = fmax(worst, test_max_rel(got[0][k], ref[k]));
        if (k == 0) continue;
        size_t bytes = (size_t)n * td_dtype_size(dt);
        unsigned char *a = malloc(bytes), *b = malloc(bytes);
        ASSERT(a && b);
        ASSERT_OK(td_copy_to_host(got[0][k], a, bytes, dt));
        ASSERT_OK(td_copy_to_host(got[1][k], b, bytes, dt));
        ASSERT(memcmp(a, b, bytes) == 0); /* deterministic: fixed-order partial sums */
        free(a), free(b);
    }
    char name[32];
    printf("  %s %s R %lld n %lld%s: worst %.3g\n", td_device_str(dev, name, sizeof name), td_dtype_name(dt),
           (long long)R, (long long)n, add ? " (ds)" : "", worst);
    return worst;
}

/* R, n: odd counts; n below a warp, not a multiple of 8, 128, 256 and 512 (the 4-, 8- and 16-slot tiers with
** vector loads), 768 (the 24-slot tier), past 1024 (a block a row), past the fused kernel's registers (8192).
** On CUDA each TRIDENT_CUDA_LN_BWD variant runs these (.gpu scripts: one run a variant). */
static const int64_t shapes[][2] = {{7, 5},       {333, 33},   {515, 128}, {300, 256},  {129, 512}, {4099, 768},
                                    {1001, 1000}, {257, 1030}, {65, 5001}, {130, 8192}, {9, 20000}};

static void against_f64_all(td_device dev, const td_dtype *dts, const double *tol, int n_dt) {
    for (int i = 0; i < n_dt; i++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int add = 0; add < 2; add++) {
                td_scope_begin();
                ASSERT(against_f64(dev, dts[i], shapes[s][0], shapes[s][1], add) <= tol[i]);
                td_scope_end();
            }
}

TEST(against_f64_cpu) { against_f64_all(TD_CPU, (td_dtype[]){TD_F32}, (double[]){1e-4}, 1); }

TEST(against_f64_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    against_f64_all(dev, (td_dtype[]){TD_F32, TD_BF16, TD_F16}, (double[]){1e-4, 2e-2, 4e-3}, 3);
}

/* Vulkan (shaders/layer_norm_backward.comp; TRIDENT_MATH_FUSE=0: the op, not the math block, is the fused
** backward): the sizes above, then rows past 1024, where a workgroup owns chunks of several rows and dw, db add
** its partials (1105 rows: chunks of 2, the last of 1), with rows of D held in registers (7, 384, 333 over 256
** invocations) and longer than 8 x 256 (2500: the partials in memory) */
TEST(fused_equals_composed_vulkan) {
    setenv("TRIDENT_MATH_FUSE", "0", 1);
    td_device dev = test_device_or_skip("vulkan:0");
    check_all(dev, TD_F32, 1e-4);
    const int64_t ds[4] = {7, 384, 333, 2500};
    for (int i = 0; i < 4; i++) {
        check_rows(dev, TD_F32, false, 1, true, true, 221, ds[i], 1e-4);
        check_rows(dev, TD_F32, true, 1, false, true, 221, ds[i], 1e-4);
    }
    check_rows(dev, TD_F64, false, 1, true, true, 221, 384, 1e-10); /* half-precision compositions round too much */
    check_rows(dev, TD_F64, true, 1, true, false, 221, 2500, 1e-10);
}

/* two runs of the op on the same operands give the same bits (the column sums go in a fixed order) */
TEST(deterministic_vulkan) {
    td_device dev = test_device_or_skip("vulkan:0");
    td_scope_begin();
    const int64_t R = 1105, ds[2] = {384, 2500};
    for (int i = 0; i < 2; i++) {
        int64_t D = ds[i], rd[2] = {R, D};
        td_tensor *dy = ASSERT_TENSOR(td_to(td_randn(2, rd, 1, 0, TD_F32, TD_CPU), dev));
        td_tensor *x = ASSERT_TENSOR(td_to(td_randn(2, rd, 2, 0, TD_F32, TD_CPU), dev));
        td_tensor *w = ASSERT_TENSOR(td_to(td_randn(1, &D, 3, 0, TD_F32, TD_CPU), dev));
        td_tensor *m = ASSERT_TENSOR(td_to(td_randn(1, &R, 4, 0, TD_F32, TD_CPU), dev));
        td_tensor *rs = ASSERT_TENSOR(td_to(td_randn(1, &R, 5, 0, TD_F32, TD_CPU), dev));
        float *h[2][2];
        for (int run = 0; run < 2; run++) {
            td_tensor *dx, *dw, *db;
            ASSERT_OK(td__layer_norm_backward(dy, x, w, m, rs, NULL, D, true, true, &dx, &dw, &db));
            h[run][0] = malloc(D * sizeof(float)), h[run][1] = malloc(D * sizeof(float));
            ASSERT_OK(td_copy_to_host(dw, h[run][0], D * sizeof(float), TD_F32));
            ASSERT_OK(td_copy_to_host(db, h[run][1], D * sizeof(float), TD_F32));
        }
        ASSERT(!memcmp(h[0][0], h[1][0], D * sizeof(float)) && !memcmp(h[0][1], h[1][1], D * sizeof(float)));
        for (int k = 0; k < 4; k++) free(h[k / 2][k % 2]);
    }
    td_scope_end();
}

/* shapes and dtypes that do not fit: one-line errors, no crash */
TEST(bad_operands) {
    td_scope_begin();
    int64_t rd[2] = {4, 6}, r = 4, d5 = 5;
    td_tensor *x = td_randn(2, rd, 1, 0, TD_F32, TD_CPU), *m = td_randn(1, &r, 2, 0, TD_F32, TD_CPU);
    td_tensor *w5 = td_randn(1, &d5, 3, 0, TD_F32, TD_CPU), *m64 = td_randn(1, &r, 2, 0, TD_F64, TD_CPU);
    td_tensor *dx, *dw, *db;
    ASSERT_EQ_INT(td__layer_norm_backward(x, x, w5, m, m, NULL, 6, true, true, &dx, &dw, &db), TD_ERR_SHAPE);
    ASSERT_EQ_INT(td__layer_norm_backward(x, x, NULL, m, m, NULL, 5, true, true, &dx, &dw, &db), TD_ERR_SHAPE);
    ASSERT_EQ_INT(td__layer_norm_backward(x, x, NULL, m64, m, NULL, 6, true, true, &dx, &dw, &db), TD_ERR_DTYPE);
    ASSERT(dx == NULL && dw == NULL && db == NULL);
    td_scope_end();
}

/* the residual branch of s = x + ln(x) c0 (whole: with x itself), summed against c1 */
static td_tensor *residual_loss(td_tensor *x, td_tensor *w, td_tensor *b, td_tensor *c0, td_tensor *c1, bool whole) {
    td_tensor *branch = td_mul(ASSERT_TENSOR(td_layer_norm(x, 1, w, b, 1e-5)), c0);
    return ASSERT_TENSOR(td_sum(td_mul(whole ? td_add(x, branch) : branch, c1), 0, NULL, false));
}

static td_tensor *hook_seen; /* the gradient the leaf's hook saw last */
static td_tensor *note_grad(td_tensor *grad, void *user) {
    (void)user;
    td_release(hook_seen);
    hook_seen = td_retain(grad);
    return NULL;
}

/* `add` ops a profiled backward node issued */
static int64_t backward_adds(void) {
    td_profile_row rows[256];
    int n = td_profile_rows(rows, 256);
    ASSERT(n <= 256);
    int64_t adds = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].op, "add") && rows[i].backward) adds += rows[i].count;
    return adds;
}

static void residual_taken(td_device dev, td_dtype dt, double tol) {
    td_scope_begin();
    ASSERT_OK(td_profile_set_roofline(dev, 1, 1));
    int64_t xs[3] = {3, 5, 96}, D = 96;
    td_tensor *a = leaf(3, xs, 1, dt, dev), *w = leaf(1, &D, 2, dt, dev), *b = leaf(1, &D, 3, dt, dev);
    td_tensor *c0 = ASSERT_TENSOR(td_to(td_randn(3, xs, 4, 0, dt, TD_CPU), dev));
    td_tensor *c1 = ASSERT_TENSOR(td_to(td_randn(3, xs, 5, 0, dt, TD_CPU), dev));
    /* x a non-leaf: the reference sums the branches' gradients of x (the add's is c1), w and b */
    td_tensor *x = ASSERT_TENSOR(td_mul_scalar(a, 1.5)), *in[3] = {x, w, b}, *ref[3], *got[3], *comp[3];
    ASSERT_OK(
        td_grad(1, (td_tensor *[]){residual_loss(x, w, b, c0, c1, false)}, NULL, 3, in, ref, false, false, false));
    ref[0] = td_add(ref[0], c1);
    td_tensor *loss = residual_loss(x, w, b, c0, c1, true);
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_grad(1, &loss, NULL, 3, in, got, true, false, false));
    ASSERT_OK(td_synchronize(dev));
    ASSERT_OK(td_profile_end(NULL));
    int64_t adds = backward_adds();
    ASSERT_OK(td_grad(1, &loss, NULL, 3, in, comp, false, true, false)); /* composed: nothing taken */
    double worst = 0, worst_comp = 0;
    for (int i = 0; i < 3; i++) {
        worst = fmax(worst, test_max_rel(got[i], ref[i]));
        worst_comp = fmax(worst_comp, test_max_rel(td_detach(comp[i]), ref[i]));
    }
    /* x a leaf with a hook, two backwards (retain_graph): .grad is twice the total, which the hook saw */
    ASSERT_OK(td_register_hook(a, note_grad, NULL));
    td_tensor *ref_a, *la = residual_loss(a, w, b, c0, c1, true);
    ASSERT_OK(
        td_grad(1, (td_tensor *[]){residual_loss(a, w, b, c0, c1, false)}, NULL, 1, &a, &ref_a, false, false, false));
    ref_a = td_add(ref_a, c1);
    ASSERT_OK(td_backward(la, NULL, true));
    ASSERT(hook_seen != NULL);
    double hooked = test_max_rel(hook_seen, ref_a);
    ASSERT_OK(td_backward(la, NULL, false));
    double twice = test_max_rel(td_grad_of(a), td_mul_scalar(hook_seen, 2));
    td_release(hook_seen);
    hook_seen = NULL;
    char name[32];
    fprintf(stderr, "  %s %s: %lld add in the backward, worst %.3g (composed %.3g), hook %.3g, twice %.3g\n",
            td_device_str(dev, name, sizeof name), td_dtype_name(dt), (long long)adds, worst, worst_comp, hooked,
            twice);
    ASSERT_EQ_INT(adds, 0);
    ASSERT(worst <= tol && worst_comp <= tol && hooked <= tol && twice <= tol);
    td_scope_end();
}

TEST(residual_taken_cpu) {
    residual_taken(TD_CPU, TD_F32, 1e-5);
    residual_taken(TD_CPU, TD_BF16, 2e-2);
}

TEST(residual_taken_vulkan) {
    setenv("TRIDENT_MATH_FUSE", "0", 1); /* the op, not the math block */
    td_device dev = test_device_or_skip("vulkan:0");
    residual_taken(dev, TD_F32, 1e-5);
}

TEST_MAIN(TESTS)
