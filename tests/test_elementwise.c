/* Elementwise ops against double-precision loops: broadcasting, strides,
** dtype promotion, comparisons, where, NaN, unary math, clamp, GELU backward. */
#include "elem_util.h"

#include "core/internal.h" /* td__gelu_backward */

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(binary_broadcast_f32)                                                                                            \
    X(binary_broadcast_f64)                                                                                            \
    X(binary_noncontiguous)                                                                                            \
    X(binary_long_rows) X(binary_half_types) X(promotion) X(integer_arith) X(compare_ops) X(scalar_ops)                \
        X(where_broadcast) X(nan_propagation) X(unary_float) X(unary_integer_and_bool) X(clamp_sides)                  \
            X(gelu_backward_fd) X(errors) X(empty_and_scope)
/* clang-format on */

typedef double (*bin_ref)(double, double);
static double r_add(double x, double y) { return x + y; }
static double r_sub(double x, double y) { return x - y; }
static double r_mul(double x, double y) { return x * y; }
static double r_div(double x, double y) { return x / y; }
static double r_pow(double x, double y) { return pow(x, y); }
static double r_max(double x, double y) { return isnan(x) || isnan(y) ? NAN : x > y ? x : y; }
static double r_min(double x, double y) { return isnan(x) || isnan(y) ? NAN : x < y ? x : y; }

typedef td_tensor *(*bin_fn)(td_tensor *, td_tensor *);
static const struct {
    const char *name;
    bin_fn fn;
    bin_ref ref;
} binops[] = {{"add", td_add, r_add},        {"sub", td_sub, r_sub}, {"mul", td_mul, r_mul},
              {"div", td_div, r_div},        {"pow", td_pow, r_pow}, {"maximum", td_maximum, r_max},
              {"minimum", td_minimum, r_min}};
#define N_BINOPS (int)(sizeof binops / sizeof binops[0])

/* Check c = op(a, b) elementwise against the reference on the logical values. */
static void check_binary(int k, td_tensor *a, td_tensor *b, td_tensor *c, double atol, double rtol) {
    double *va = test_host(a), *vb = test_host(b), *vc = test_host(c);
    int64_t n = td_numel(c);
    double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t o = 0; o < n; o++)
        want[o] = binops[k].ref(va[bcast_index(o, td_ndim(c), td_shape(c), td_ndim(a), td_shape(a))],
                                vb[bcast_index(o, td_ndim(c), td_shape(c), td_ndim(b), td_shape(b))]);
    assert_close(vc, want, n, atol, rtol, binops[k].name);
    free(va), free(vb), free(vc), free(want);
}

static void broadcast_case(td_dtype dt, double atol, double rtol) {
    test_seed_from(11);
    int64_t sa[3] = {4, 1, 5}, sb[2] = {3, 1}, sc[3] = {4, 3, 5};
    double *va = rand_values(20, 0.5, 2), *vb = rand_values(3, -2, 2);
    td_tensor *a = test_tensor_f64(va, 3, sa, dt), *b = test_tensor_f64(vb, 2, sb, dt);
    for (int k = 0; k < N_BINOPS; k++) {
        td_tensor *c = ASSERT_TENSOR(binops[k].fn(a, b));
        assert_shape(c, 3, sc);
        ASSERT_EQ_INT(td_tensor_dtype(c), dt);
        check_binary(k, a, b, c, atol, rtol);
        td_tensor *c2 = ASSERT_TENSOR(binops[k].fn(b, a)); /* broadcasting is symmetric */
        assert_shape(c2, 3, sc);
        if (k != 4) check_binary(k, b, a, c2, atol, rtol); /* pow of a negative base: NaN both sides anyway */
    }
    free(va), free(vb);
}

TEST(binary_broadcast_f32) {
    td_scope_begin();
    broadcast_case(TD_F32, 1e-6, 1e-6);
    td_scope_end();
}
TEST(binary_broadcast_f64) {
    td_scope_begin();
    broadcast_case(TD_F64, 0, 1e-15);
    td_scope_end();
}

TEST(binary_noncontiguous) {
    td_scope_begin();
    test_seed_from(12);
    int64_t s1[2] = {5, 7}, s2[2] = {7, 10};
    double *v1 = rand_values(35, 0.5, 3), *v2 = rand_values(70, 0.5, 3);
    for (int dti = 0; dti < 2; dti++) {
        td_dtype dt = dti ? TD_F64 : TD_F32;
        td_tensor *a = ASSERT_TENSOR(td_transpose(test_tensor_f64(v1, 2, s1, dt), 0, 1));    /* [7,5], strides (1,7) */
        td_tensor *b = ASSERT_TENSOR(td_slice(test_tensor_f64(v2, 2, s2, dt), 1, 1, 10, 2)); /* [7,5], strides (10,2) */
        ASSERT(!td_is_contiguous(a) && !td_is_contiguous(b));
        for (int k = 0; k < N_BINOPS; k++) check_binary(k, a, b, ASSERT_TENSOR(binops[k].fn(a, b)), 1e-6, 1e-6);
        /* row of a against column broadcast of a strided select */
        td_tensor *col = ASSERT_TENSOR(td_unsqueeze(td_select(b, 1, 2), 1)); /* [7,1] */
        for (int k = 0; k < N_BINOPS; k++) check_binary(k, a, col, ASSERT_TENSOR(binops[k].fn(a, col)), 1e-6, 1e-6);
    }
    free(v1), free(v2);
    td_scope_end();
}

/* Long contiguous rows (SIMD body, scalar tail, several OpenMP tiles) and a broadcast scalar. */
TEST(binary_long_rows) {
    td_scope_begin();
    test_seed_from(13);
    int64_t n = 3 * 16384 + 13;
    double *v1 = rand_values(n, -4, 4), *v2 = rand_values(n, 0.25, 4), s = 1.75;
    td_tensor *a = test_tensor_f64(v1, 1, &n, TD_F32), *b = test_tensor_f64(v2, 1, &n, TD_F32);
    td_tensor *sc = ASSERT_TENSOR(td_scalar(s, TD_F32, TD_CPU));
    for (int k = 0; k < 4; k++) { /* add sub mul div */
        check_binary(k, a, b, ASSERT_TENSOR(binops[k].fn(a, b)), 1e-6, 1e-6);
        check_binary(k, a, sc, ASSERT_TENSOR(binops[k].fn(a, sc)), 1e-6, 1e-6);
        check_binary(k, sc, b, ASSERT_TENSOR(binops[k].fn(sc, b)), 1e-6, 1e-6);
    }
    free(v1), free(v2);
    /* an output over 16 MiB takes the non-temporal store path */
    int64_t big = (16 << 20) / 4 + 21;
    double *v3 = rand_values(big, -4, 4);
    td_tensor *c = test_tensor_f64(v3, 1, &big, TD_F32);
    check_binary(0, c, sc, ASSERT_TENSOR(td_add(c, sc)), 1e-6, 1e-6);
    td_tensor *c1 = ASSERT_TENSOR(td_slice(c, 0, 1, big, 1)); /* misaligned start */
    check_binary(2, c1, c1, ASSERT_TENSOR(td_mul(c1, c1)), 1e-6, 1e-6);
    free(v3);
    td_scope_end();
}

TEST(binary_half_types) {
    td_scope_begin();
    test_seed_from(14);
    int64_t s[2] = {6, 9};
    double *v1 = rand_values(54, 0.5, 2), *v2 = rand_values(9, 0.5, 2);
    td_dtype dts[2] = {TD_F16, TD_BF16};
    for (int i = 0; i < 2; i++) {
        td_tensor *a = test_tensor_f64(v1, 2, s, dts[i]), *b = test_tensor_f64(v2, 1, s + 1, dts[i]);
        double tol = dts[i] == TD_F16 ? 2e-3 : 1.6e-2; /* one rounding of the result */
        for (int k = 0; k < N_BINOPS; k++) {
            td_tensor *c = ASSERT_TENSOR(binops[k].fn(a, b));
            ASSERT_EQ_INT(td_tensor_dtype(c), dts[i]);
            check_binary(k, a, b, c, 0, tol);
        }
    }
    free(v1), free(v2);
    td_scope_end();
}

TEST(promotion) {
    td_scope_begin();
    double va[3] = {1, 2, 3}, vb[3] = {2, 4, 5};
    int64_t n = 3;
    struct {
        td_dtype a, b, want;
    } cases[] = {{TD_I32, TD_F32, TD_F32},  {TD_U8, TD_I32, TD_I32},  {TD_I32, TD_I64, TD_I64},
                 {TD_F16, TD_BF16, TD_F32}, {TD_F32, TD_F64, TD_F64}, {TD_BOOL, TD_F16, TD_F16},
                 {TD_BOOL, TD_U8, TD_U8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        td_tensor *a = test_tensor_f64(va, 1, &n, cases[i].a), *b = test_tensor_f64(vb, 1, &n, cases[i].b);
        td_tensor *c = ASSERT_TENSOR(td_add(a, b));
        ASSERT_EQ_INT(td_tensor_dtype(c), cases[i].want);
        check_binary(0, a, b, c, 0, 0);
    }
    /* integer division and pow compute in float32 */
    td_tensor *a = test_tensor_f64(va, 1, &n, TD_I64), *b = test_tensor_f64(vb, 1, &n, TD_I32);
    td_tensor *q = ASSERT_TENSOR(td_div(a, b));
    ASSERT_EQ_INT(td_tensor_dtype(q), TD_F32);
    check_binary(3, a, b, q, 0, 1e-7);
    td_tensor *p = ASSERT_TENSOR(td_pow(a, b));
    ASSERT_EQ_INT(td_tensor_dtype(p), TD_F32);
    check_binary(4, a, b, p, 0, 1e-7);
    td_scope_end();
}

TEST(integer_arith) {
    td_scope_begin();
    int32_t a32[4] = {2147483647, -7, 100, -2147483647 - 1}, b32[4] = {1, 3, -100, -1};
    int64_t n = 4;
    td_tensor *a = ASSERT_TENSOR(td_from_data(a32, 1, &n, TD_I32, TD_CPU));
    td_tensor *b = ASSERT_TENSOR(td_from_data(b32, 1, &n, TD_I32, TD_CPU));
    int32_t out[4];
    ASSERT_OK(td_copy_to_host(td_add(a, b), out, sizeof out, TD_I32));
    int32_t want_add[4] = {-2147483647 - 1, -4, 0, 2147483647}; /* wraps like PyTorch */
    for (int i = 0; i < 4; i++) ASSERT_EQ_INT(out[i], want_add[i]);
    ASSERT_OK(td_copy_to_host(td_mul(a, b), out, sizeof out, TD_I32));
    int32_t want_mul[4] = {2147483647, -21, -10000, -2147483647 - 1};
    for (int i = 0; i < 4; i++) ASSERT_EQ_INT(out[i], want_mul[i]);
    ASSERT_OK(td_copy_to_host(td_maximum(a, b), out, sizeof out, TD_I32));
    int32_t want_max[4] = {2147483647, 3, 100, -1};
    for (int i = 0; i < 4; i++) ASSERT_EQ_INT(out[i], want_max[i]);
    /* int64 beyond 2^53 stays exact */
    int64_t big[2] = {(1ll << 60) + 1, -(1ll << 60) - 3}, one[1] = {1}, n2 = 2, n1 = 1, got[2];
    td_tensor *x = ASSERT_TENSOR(td_from_data(big, 1, &n2, TD_I64, TD_CPU));
    td_tensor *y = ASSERT_TENSOR(td_from_data(one, 1, &n1, TD_I64, TD_CPU));
    ASSERT_OK(td_copy_to_host(td_sub(x, y), got, sizeof got, TD_I64));
    ASSERT_EQ_INT(got[0], 1ll << 60);
    ASSERT_EQ_INT(got[1], -(1ll << 60) - 4);
    td_scope_end();
}

TEST(compare_ops) {
    td_scope_begin();
    double va[6] = {1, 2, 3, NAN, -0.0, 5}, vb[6] = {1, 3, 2, NAN, 0.0, NAN};
    int64_t n = 6;
    typedef td_tensor *(*fn)(td_tensor *, td_tensor *);
    fn fns[6] = {td_eq, td_ne, td_lt, td_le, td_gt, td_ge};
    td_dtype dts[4] = {TD_F32, TD_F64, TD_F16, TD_BF16};
    for (int di = 0; di < 4; di++) {
        td_tensor *a = test_tensor_f64(va, 1, &n, dts[di]), *b = test_tensor_f64(vb, 1, &n, dts[di]);
        for (int k = 0; k < 6; k++) {
            td_tensor *c = ASSERT_TENSOR(fns[k](a, b));
            ASSERT_EQ_INT(td_tensor_dtype(c), TD_BOOL);
            double *got = test_host(c);
            for (int i = 0; i < 6; i++) {
                double x = va[i], y = vb[i];
                bool want = k == 0   ? x == y
                            : k == 1 ? x != y
                            : k == 2 ? x < y
                            : k == 3 ? x <= y
                            : k == 4 ? x > y
                                     : x >= y;
                if (got[i] != want)
                    TEST_FAIL_("op %d dtype %s element %d: got %g", k, td_dtype_name(dts[di]), i, got[i]);
            }
            free(got);
        }
    }
    /* integers broadcast against a column; bool orders false < true */
    double vi[3] = {-5, 0, 7}, vc[2] = {0, 7};
    int64_t s3 = 3, s21[2] = {2, 1};
    td_tensor *ai = test_tensor_f64(vi, 1, &s3, TD_I64), *ci = test_tensor_f64(vc, 2, s21, TD_I32);
    double *got = test_host(ASSERT_TENSOR(td_ge(ai, ci)));
    double want[6] = {0, 1, 1, 0, 0, 1};
    assert_close(got, want, 6, 0, 0, "ge int");
    free(got);
    double bf[2] = {0, 1}, bt[2] = {1, 1};
    int64_t s2 = 2;
    got = test_host(ASSERT_TENSOR(td_lt(test_tensor_f64(bf, 1, &s2, TD_BOOL), test_tensor_f64(bt, 1, &s2, TD_BOOL))));
    ASSERT(got[0] == 1 && got[1] == 0);
    free(got);
    td_scope_end();
}

TEST(scalar_ops) {
    td_scope_begin();
    double v[4] = {1, -2, 3, 8};
    int64_t n = 4;
    td_tensor *i32 = test_tensor_f64(v, 1, &n, TD_I32), *f16 = test_tensor_f64(v, 1, &n, TD_F16);
    td_tensor *t = ASSERT_TENSOR(td_add_scalar(i32, 2));
    ASSERT_EQ_INT(td_tensor_dtype(t), TD_I32);
    double *g = test_host(t);
    for (int i = 0; i < 4; i++) ASSERT_NEAR(g[i], v[i] + 2, 0);
    free(g);
    t = ASSERT_TENSOR(td_mul_scalar(i32, 0.5));
    ASSERT_EQ_INT(td_tensor_dtype(t), TD_F32);
    g = test_host(t);
    for (int i = 0; i < 4; i++) ASSERT_NEAR(g[i], v[i] * 0.5, 0);
    free(g);
    t = ASSERT_TENSOR(td_sub_scalar(f16, 0.25));
    ASSERT_EQ_INT(td_tensor_dtype(t), TD_F16);
    g = test_host(t);
    for (int i = 0; i < 4; i++) ASSERT_NEAR(g[i], v[i] - 0.25, 0);
    free(g);
    t = ASSERT_TENSOR(td_div_scalar(i32, 4));
    ASSERT_EQ_INT(td_tensor_dtype(t), TD_F32);
    g = test_host(t);
    for (int i = 0; i < 4; i++) ASSERT_NEAR(g[i], v[i] / 4, 0);
    free(g);
    t = ASSERT_TENSOR(td_pow_scalar(test_tensor_f64(v, 1, &n, TD_F64), 3));
    g = test_host(t);
    for (int i = 0; i < 4; i++) ASSERT_NEAR(g[i], v[i] * v[i] * v[i], 0);
    free(g);
    double bv[4] = {1, 0, 1, 1};
    t = ASSERT_TENSOR(td_add_scalar(test_tensor_f64(bv, 1, &n, TD_BOOL), 3));
    ASSERT_EQ_INT(td_tensor_dtype(t), TD_I64);
    g = test_host(t);
    for (int i = 0; i < 4; i++) ASSERT_NEAR(g[i], bv[i] + 3, 0);
    free(g);
    td_scope_end();
}

TEST(where_broadcast) {
    td_scope_begin();
    test_seed_from(15);
    double vc[3] = {1, 0, 1}, *va = rand_values(4, -1, 1);
    int64_t sc[2] = {3, 1}, sa[2] = {1, 4}, so[2] = {3, 4};
    td_tensor *cond = test_tensor_f64(vc, 2, sc, TD_BOOL), *a = test_tensor_f64(va, 2, sa, TD_F32);
    td_tensor *b = ASSERT_TENSOR(td_scalar(-7.5, TD_F64, TD_CPU));
    td_tensor *w = ASSERT_TENSOR(td_where(cond, a, b));
    assert_shape(w, 2, so);
    ASSERT_EQ_INT(td_tensor_dtype(w), TD_F64);
    double *g = test_host(w);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) ASSERT_NEAR(g[i * 4 + j], vc[i] ? (double)(float)va[j] : -7.5, 0);
    free(g), free(va);
    /* cond from a comparison on a transposed tensor */
    double vm[6] = {1, -1, 2, -2, 3, -3};
    int64_t s23[2] = {2, 3};
    td_tensor *m = ASSERT_TENSOR(td_transpose(test_tensor_f64(vm, 2, s23, TD_F32), 0, 1));
    td_tensor *zero = ASSERT_TENSOR(td_scalar(0, TD_F32, TD_CPU));
    g = test_host(ASSERT_TENSOR(td_where(td_gt(m, zero), m, zero)));
    double want[6] = {1, 0, 0, 3, 2, 0}; /* relu of [[1,-2],[-1,3],[2,-3]] */
    assert_close(g, want, 6, 0, 0, "where relu");
    free(g);
    ASSERT_ERROR(td_where(m, m, zero), TD_ERR_DTYPE, "cond must be bool");
    td_scope_end();
}

TEST(nan_propagation) {
    td_scope_begin();
    double va[4] = {NAN, 1, NAN, -INFINITY}, vb[4] = {1, NAN, NAN, 2};
    int64_t n = 4;
    for (int di = 0; di < 2; di++) {
        td_dtype dt = di ? TD_F64 : TD_F32;
        td_tensor *a = test_tensor_f64(va, 1, &n, dt), *b = test_tensor_f64(vb, 1, &n, dt);
        double *mx = test_host(ASSERT_TENSOR(td_maximum(a, b))), *mn = test_host(ASSERT_TENSOR(td_minimum(a, b)));
        double wmx[4] = {NAN, NAN, NAN, 2}, wmn[4] = {NAN, NAN, NAN, -INFINITY};
        assert_close(mx, wmx, 4, 0, 0, "maximum");
        assert_close(mn, wmn, 4, 0, 0, "minimum");
        free(mx), free(mn);
        double *s = test_host(ASSERT_TENSOR(td_add(a, b)));
        ASSERT(isnan(s[0]) && isnan(s[1]) && isnan(s[2]) && isinf(s[3]));
        free(s);
    }
    td_scope_end();
}

static double gelu_ref(double x, bool tanh_form) {
    if (tanh_form) return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2)));
}

static double un_ref(int k, double x) {
    switch (k) {
    case 0: return -x;
    case 1: return fabs(x);
    case 2: return exp(x);
    case 3: return log(x);
    case 4: return sqrt(x);
    case 5: return 1 / sqrt(x);
    case 6: return sin(x);
    case 7: return cos(x);
    case 8: return tanh(x);
    case 9: return 1 / (1 + exp(-x));
    case 10: return x > 0 ? x : 0;
    case 11: return gelu_ref(x, false);
    case 12: return gelu_ref(x, true);
    default: return x / (1 + exp(-x));
    }
}

static td_tensor *un_call(int k, td_tensor *x) {
    switch (k) {
    case 0: return td_neg(x);
    case 1: return td_abs(x);
    case 2: return td_exp(x);
    case 3: return td_log(x);
    case 4: return td_sqrt(x);
    case 5: return td_rsqrt(x);
    case 6: return td_sin(x);
    case 7: return td_cos(x);
    case 8: return td_tanh(x);
    case 9: return td_sigmoid(x);
    case 10: return td_relu(x);
    case 11: return td_gelu(x, false);
    case 12: return td_gelu(x, true);
    default: return td_silu(x);
    }
}

TEST(unary_float) {
    td_scope_begin();
    test_seed_from(16);
    int64_t s[2] = {37, 29}; /* transposed below: strided input */
    int64_t n = s[0] * s[1];
    double *v = rand_values(n, -6, 6), *vp = rand_values(n, 0.01, 9);
    struct {
        td_dtype dt;
        double rtol;
    } dts[4] = {{TD_F64, 1e-14}, {TD_F32, 2e-6}, {TD_F16, 2e-3}, {TD_BF16, 1.6e-2}};
    for (int di = 0; di < 4; di++) {
        for (int k = 0; k < 14; k++) {
            bool pos = k == 3 || k == 4 || k == 5;
            td_tensor *x = ASSERT_TENSOR(td_transpose(test_tensor_f64(pos ? vp : v, 2, s, dts[di].dt), 0, 1));
            td_tensor *y = ASSERT_TENSOR(un_call(k, x));
            ASSERT_EQ_INT(td_tensor_dtype(y), dts[di].dt);
            double *xin = test_host(x), *got = test_host(y), *want = malloc(sizeof(double) * (size_t)n);
            for (int64_t i = 0; i < n; i++) want[i] = un_ref(k, xin[i]);
            char what[64];
            snprintf(what, sizeof what, "unary %d %s", k, td_dtype_name(dts[di].dt));
            /* sin/cos/tanh/gelu near zero crossings: an absolute term of one ulp of the input scale */
            assert_close(got, want, n, dts[di].rtol * 8, dts[di].rtol, what);
            free(xin), free(got), free(want);
        }
    }
    /* relu keeps NaN and maps -0 and negatives to 0 on a long row (SIMD body and tail) */
    int64_t m = 1000 + 5;
    double *r = rand_values(m, -1, 1);
    r[3] = NAN, r[1002] = NAN, r[7] = -0.0;
    double *got = test_host(ASSERT_TENSOR(td_relu(test_tensor_f64(r, 1, &m, TD_F32))));
    for (int64_t i = 0; i < m; i++) {
        double want = isnan(r[i]) ? NAN : r[i] > 0 ? (double)(float)r[i] : 0;
        assert_close(&got[i], &want, 1, 0, 0, "relu");
        if (want == 0) ASSERT(!signbit(got[i]));
    }
    free(got), free(r), free(v), free(vp);
    td_scope_end();
}

TEST(unary_integer_and_bool) {
    td_scope_begin();
    double v[5] = {-3, 0, 4, -128, 127};
    int64_t n = 5;
    td_tensor *x = test_tensor_f64(v, 1, &n, TD_I32);
    struct {
        td_tensor *t;
        double want[5];
    } c[3] = {{td_neg(x), {3, 0, -4, 128, -127}}, {td_abs(x), {3, 0, 4, 128, 127}}, {td_relu(x), {0, 0, 4, 0, 127}}};
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ_INT(td_tensor_dtype(ASSERT_TENSOR(c[i].t)), TD_I32);
        double *g = test_host(c[i].t);
        assert_close(g, c[i].want, 5, 0, 0, "int unary");
        free(g);
    }
    td_tensor *e = ASSERT_TENSOR(td_exp(x));
    ASSERT_EQ_INT(td_tensor_dtype(e), TD_F32);
    double *g = test_host(e);
    double we[5];
    for (int i = 0; i < 5; i++) we[i] = (float)exp(v[i]); /* exp(127) overflows float32 to inf */
    assert_close(g, we, 5, 0, 1e-6, "exp of int32");
    free(g);
    double bv[2] = {0, 1};
    int64_t n2 = 2;
    td_tensor *b = test_tensor_f64(bv, 1, &n2, TD_BOOL);
    ASSERT_ERROR(td_neg(b), TD_ERR_DTYPE, "neg: not defined for bool");
    ASSERT_ERROR(td_exp(b), TD_ERR_DTYPE, "bool");
    ASSERT_ERROR(td_add(b, b), TD_ERR_DTYPE, "add: not defined for two bool");
    td_scope_end();
}

TEST(clamp_sides) {
    td_scope_begin();
    double v[6] = {-5, -0.5, 0.25, 2, NAN, 9};
    int64_t n = 6;
    td_tensor *x = test_tensor_f64(v, 1, &n, TD_F64);
    double *g = test_host(ASSERT_TENSOR(td_clamp(x, -1, 2)));
    double w1[6] = {-1, -0.5, 0.25, 2, NAN, 2};
    assert_close(g, w1, 6, 0, 0, "clamp both");
    free(g);
    g = test_host(ASSERT_TENSOR(td_clamp(x, NAN, 0)));
    double w2[6] = {-5, -0.5, 0, 0, NAN, 0};
    assert_close(g, w2, 6, 0, 0, "clamp hi only");
    free(g);
    g = test_host(ASSERT_TENSOR(td_clamp(x, 0, NAN)));
    double w3[6] = {0, 0, 0.25, 2, NAN, 9};
    assert_close(g, w3, 6, 0, 0, "clamp lo only");
    free(g);
    g = test_host(ASSERT_TENSOR(td_clamp(x, 3, 1))); /* lo > hi: everything is hi, as min(max(x, lo), hi) */
    double w6[6] = {1, 1, 1, 1, NAN, 1};
    assert_close(g, w6, 6, 0, 0, "clamp lo > hi");
    free(g);
    double vi[4] = {-7, 0, 3, 100};
    int64_t n4 = 4;
    td_tensor *xi = test_tensor_f64(vi, 1, &n4, TD_I64);
    td_tensor *ci = ASSERT_TENSOR(td_clamp(xi, -2, 50));
    ASSERT_EQ_INT(td_tensor_dtype(ci), TD_I64);
    g = test_host(ci);
    double w4[4] = {-2, 0, 3, 50};
    assert_close(g, w4, 4, 0, 0, "clamp int");
    free(g);
    td_tensor *cf = ASSERT_TENSOR(td_clamp(xi, -2.5, NAN));
    ASSERT_EQ_INT(td_tensor_dtype(cf), TD_F32);
    g = test_host(cf);
    double w5[4] = {-2.5, 0, 3, 100};
    assert_close(g, w5, 4, 0, 0, "clamp int fractional");
    free(g);
    td_scope_end();
}

/* gelu'(x) by central differences of the double reference, both forms and dtypes. */
TEST(gelu_backward_fd) {
    td_scope_begin();
    test_seed_from(17);
    int64_t s[2] = {8, 16}, n = 128;
    double *vx = rand_values(n, -5, 5), *vdy = rand_values(16, -2, 2);
    struct {
        td_dtype dt;
        double tol;
    } dts[3] = {{TD_F64, 1e-8}, {TD_F32, 2e-5}, {TD_BF16, 5e-2}};
    for (int di = 0; di < 3; di++) {
        td_tensor *x = test_tensor_f64(vx, 2, s, dts[di].dt), *dy = test_tensor_f64(vdy, 1, s + 1, dts[di].dt);
        double *xin = test_host(x), *dyin = test_host(dy);
        for (int tf = 0; tf < 2; tf++) {
            double *g = test_host(ASSERT_TENSOR(td__gelu_backward(dy, x, tf)));
            for (int64_t i = 0; i < n; i++) {
                double h = 1e-5, d = (gelu_ref(xin[i] + h, tf) - gelu_ref(xin[i] - h, tf)) / (2 * h);
                ASSERT_NEAR(g[i], dyin[i % 16] * d, dts[di].tol * (1 + fabs(dyin[i % 16] * d)));
            }
            free(g);
        }
        free(xin), free(dyin);
    }
    free(vx), free(vdy);
    td_scope_end();
}

TEST(errors) {
    td_scope_begin();
    int64_t s1[2] = {2, 3}, s2[1] = {4};
    td_tensor *a = ASSERT_TENSOR(td_zeros(2, s1, TD_F32, TD_CPU)), *b = ASSERT_TENSOR(td_zeros(1, s2, TD_F32, TD_CPU));
    ASSERT_ERROR(td_add(a, b), TD_ERR_SHAPE, "add: shapes [2,3] and [4] do not broadcast");
    ASSERT_ERROR(td_where(td_gt(a, a), a, b), TD_ERR_SHAPE, "where:");
    /* a NULL input keeps the first error through a chain */
    td_clear_error();
    td_tensor *bad = td_mul(a, b);
    ASSERT(bad == NULL);
    ASSERT(td_exp(td_add(bad, a)) == NULL);
    ASSERT_EQ_INT(td_last_status(), TD_ERR_SHAPE);
    ASSERT(strstr(td_last_error(), "mul:"));
    td_clear_error();
    ASSERT_ERROR(td_add(NULL, a), TD_ERR_MISUSE, "add: argument 'a' is NULL");
    td_scope_end();
}

TEST(empty_and_scope) {
    int64_t s0[2] = {0, 3}, s3[1] = {3};
    td_scope_begin();
    td_tensor *e = ASSERT_TENSOR(td_zeros(2, s0, TD_F32, TD_CPU)), *r = ASSERT_TENSOR(td_ones(1, s3, TD_F32, TD_CPU));
    td_tensor *c = ASSERT_TENSOR(td_add(e, r));
    assert_shape(c, 2, s0);
    ASSERT(td_relu(c) && td_add_scalar(c, 1) && td_where(td_eq(c, c), c, r));
    td_scope_end();
    ASSERT_EQ_INT(td_debug_live_tensors(), 0); /* front-end temporaries (casts, scalars) did not leak */
}

TEST_MAIN(TESTS)
