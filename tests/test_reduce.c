/* Reductions against double-precision loops: dim sets with keepdim both ways,
** strided inputs, dtypes, NaN, argmax ties, accuracy, empty sets, errors. */
#include "elem_util.h"

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(dim_sets_f64)                                                                                                    \
    X(dim_sets_f32_strided)                                                                                            \
    X(dim_sets_half)                                                                                                   \
    X(sum_integer_and_bool) X(max_min_integer_exact) X(argmax_ties_and_nan) X(argmax_flatten) X(nan_propagation)       \
        X(var_correction) X(logsumexp_stable) X(sum_accuracy_1e6) X(few_outputs_long_rows) X(empty_sets) X(errors)
/* clang-format on */

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_VAR, R_LSE, R_COUNT };
static const char *rnames[R_COUNT] = {"sum", "mean", "amax", "amin", "var", "logsumexp"};

static td_tensor *r_call(int op, td_tensor *x, int n, const int *dims, bool keep, int corr) {
    switch (op) {
    case R_SUM: return td_sum(x, n, dims, keep);
    case R_MEAN: return td_mean(x, n, dims, keep);
    case R_MAX: return td_amax(x, n, dims, keep);
    case R_MIN: return td_amin(x, n, dims, keep);
    case R_VAR: return td_var(x, n, dims, corr, keep);
    default: return td_logsumexp(x, n, dims, keep);
    }
}

/* Output index (over the kept dims, row-major) of input element i. */
static int64_t kept_index(int64_t i, int nd, const int64_t *shape, uint32_t mask) {
    int64_t o = 0, mul = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t k = i % shape[d];
        i /= shape[d];
        if (!(mask >> d & 1)) o += k * mul, mul *= shape[d];
    }
    return o;
}

/* The reference: out[M] for op over the dims in mask, in double. */
static void ref_reduce(int op, const double *v, int nd, const int64_t *shape, uint32_t mask, int corr, double *out,
                       int64_t M) {
    int64_t n = 1, K = 1;
    for (int d = 0; d < nd; d++) n *= shape[d], K *= mask >> d & 1 ? shape[d] : 1;
    double *acc = calloc((size_t)M, sizeof(double)), *ext = malloc(sizeof(double) * (size_t)M);
    for (int64_t o = 0; o < M; o++) ext[o] = op == R_MIN ? INFINITY : -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        int64_t o = kept_index(i, nd, shape, mask);
        acc[o] += v[i];
        if (isnan(v[i]) || isnan(ext[o]))
            ext[o] = NAN;
        else if (op == R_MIN ? v[i] < ext[o] : v[i] > ext[o])
            ext[o] = v[i];
    }
    for (int64_t o = 0; o < M; o++) {
        if (op == R_SUM)
            out[o] = acc[o];
        else if (op == R_MEAN)
            out[o] = acc[o] / (double)K;
        else if (op == R_MAX || op == R_MIN)
            out[o] = ext[o];
        else
            out[o] = 0;
    }
    for (int64_t i = 0; i < n && op >= R_VAR; i++) {
        int64_t o = kept_index(i, nd, shape, mask);
        double d = v[i] - acc[o] / (double)K;
        out[o] += op == R_VAR ? d * d : exp(v[i] - ext[o]);
    }
    for (int64_t o = 0; o < M && op >= R_VAR; o++)
        out[o] = op == R_VAR ? out[o] / (double)(K - corr) : ext[o] + log(out[o]);
    free(acc), free(ext);
}

/* Run every reduction over several dim sets, keepdim both ways, and compare. */
static void check_dim_sets(td_tensor *x, double rtol, double atol) {
    static const int sets[][4] = {{0}, {1, 0}, {1, 1}, {1, 2}, {2, 0, 2}, {2, -1, -2}, {3, 2, 0, 1}, {1, -3}};
    int nd = td_ndim(x);
    const int64_t *shape = td_shape(x);
    double *v = test_host(x);
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        int n = sets[si][0];
        const int *dims = &sets[si][1];
        uint32_t mask = n ? 0 : (1u << nd) - 1;
        for (int i = 0; i < n; i++) mask |= 1u << ((dims[i] + nd) % nd);
        int64_t kshape[TD_MAX_DIMS], dshape[TD_MAX_DIMS], M = 1;
        int dn = 0;
        for (int d = 0; d < nd; d++) {
            kshape[d] = mask >> d & 1 ? 1 : shape[d];
            if (!(mask >> d & 1)) dshape[dn++] = shape[d];
            M *= kshape[d];
        }
        double *want = malloc(sizeof(double) * (size_t)M);
        for (int op = 0; op < R_COUNT; op++) {
            ref_reduce(op, v, nd, shape, mask, 1, want, M);
            for (int keep = 0; keep < 2; keep++) {
                td_tensor *r = ASSERT_TENSOR(r_call(op, x, n, dims, keep, 1));
                if (keep)
                    assert_shape(r, nd, kshape);
                else
                    assert_shape(r, dn, dshape);
                ASSERT_EQ_INT(td_tensor_dtype(r), td_tensor_dtype(x));
                double *got = test_host(r);
                char what[96];
                snprintf(what, sizeof what, "%s set %zu keepdim %d", rnames[op], si, keep);
                assert_close(got, want, M, atol, rtol, what);
                free(got);
            }
        }
        free(want);
    }
    free(v);
}

TEST(dim_sets_f64) {
    td_scope_begin();
    test_seed_from(21);
    int64_t s[3] = {3, 4, 5};
    double *v = rand_values(60, -3, 3);
    check_dim_sets(test_tensor_f64(v, 3, s, TD_F64), 1e-13, 1e-13);
    free(v);
    td_scope_end();
}

TEST(dim_sets_f32_strided) {
    td_scope_begin();
    test_seed_from(22);
    int64_t s[3] = {5, 3, 4};
    double *v = rand_values(60, -3, 3);
    int perm[3] = {1, 2, 0};
    td_tensor *x = ASSERT_TENSOR(td_permute(test_tensor_f64(v, 3, s, TD_F32), perm)); /* [3,4,5], strides (4,1,12) */
    ASSERT(!td_is_contiguous(x));
    check_dim_sets(x, 1e-6, 1e-6);
    td_tensor *sl = ASSERT_TENSOR(td_slice(x, 2, 0, 5, 2)); /* [3,4,3] */
    check_dim_sets(sl, 1e-6, 1e-6);
    free(v);
    td_scope_end();
}

TEST(dim_sets_half) {
    td_scope_begin();
    test_seed_from(23);
    int64_t s[3] = {3, 4, 5};
    double *v = rand_values(60, -3, 3);
    check_dim_sets(test_tensor_f64(v, 3, s, TD_F16), 2e-3, 4e-3);
    check_dim_sets(test_tensor_f64(v, 3, s, TD_BF16), 1.6e-2, 3e-2);
    free(v);
    td_scope_end();
}

TEST(sum_integer_and_bool) {
    td_scope_begin();
    double v[6] = {1, -2, 3, 100, 0, 7};
    int64_t s[2] = {2, 3};
    td_dtype dts[3] = {TD_I32, TD_U8, TD_BOOL};
    for (int i = 0; i < 3; i++) {
        double vv[6];
        for (int k = 0; k < 6; k++) vv[k] = dts[i] == TD_BOOL ? v[k] != 0 : dts[i] == TD_U8 ? fabs(v[k]) : v[k];
        td_tensor *x = test_tensor_f64(vv, 2, s, dts[i]);
        int one = 1;
        td_tensor *r = ASSERT_TENSOR(td_sum(x, 1, &one, false));
        ASSERT_EQ_INT(td_tensor_dtype(r), TD_I64);
        double *g = test_host(r), want[2] = {vv[0] + vv[1] + vv[2], vv[3] + vv[4] + vv[5]};
        assert_close(g, want, 2, 0, 0, td_dtype_name(dts[i]));
        free(g);
    }
    td_scope_end();
}

TEST(max_min_integer_exact) {
    td_scope_begin();
    int64_t v[4] = {(1ll << 60) + 1, 1ll << 60, -(1ll << 61) - 1, -(1ll << 61)}, n = 4, got;
    td_tensor *x = ASSERT_TENSOR(td_from_data(v, 1, &n, TD_I64, TD_CPU));
    ASSERT_OK(td_copy_to_host(td_amax(x, 0, NULL, false), &got, sizeof got, TD_I64));
    ASSERT_EQ_INT(got, (1ll << 60) + 1);
    ASSERT_OK(td_copy_to_host(td_amin(x, 0, NULL, false), &got, sizeof got, TD_I64));
    ASSERT_EQ_INT(got, -(1ll << 61) - 1);
    ASSERT_OK(td_copy_to_host(td_argmin(x, 0, false), &got, sizeof got, TD_I64));
    ASSERT_EQ_INT(got, 2);
    td_tensor *m = ASSERT_TENSOR(td_amax(td_cast(x, TD_I32), 0, NULL, false));
    ASSERT_EQ_INT(td_tensor_dtype(m), TD_I32);
    td_scope_end();
}

TEST(argmax_ties_and_nan) {
    td_scope_begin();
    double v[12] = {1, 3, 3, 2, /**/ -1, -1, -5, -5, /**/ 0, NAN, 9, NAN};
    int64_t s[2] = {3, 4}, got[4];
    td_dtype dts[3] = {TD_F32, TD_F64, TD_I32};
    for (int di = 0; di < 3; di++) {
        double vv[12];
        for (int i = 0; i < 12; i++) vv[i] = dts[di] == TD_I32 && isnan(v[i]) ? 9 : v[i];
        td_tensor *x = test_tensor_f64(vv, 2, s, dts[di]);
        td_tensor *am = ASSERT_TENSOR(td_argmax(x, 1, false));
        ASSERT_EQ_INT(td_tensor_dtype(am), TD_I64);
        ASSERT_OK(td_copy_to_host(am, got, 3 * sizeof(int64_t), TD_I64));
        /* first of the ties; NaN is the max (first NaN), for ints the first 9 */
        ASSERT_EQ_INT(got[0], 1);
        ASSERT_EQ_INT(got[1], 0);
        ASSERT_EQ_INT(got[2], 1);
        ASSERT_OK(td_copy_to_host(td_argmin(x, -1, false), got, 3 * sizeof(int64_t), TD_I64));
        ASSERT_EQ_INT(got[0], 0);
        ASSERT_EQ_INT(got[1], 2);
        ASSERT_EQ_INT(got[2], dts[di] == TD_I32 ? 0 : 1);     /* NaN also wins argmin */
        td_tensor *ak = ASSERT_TENSOR(td_argmax(x, 0, true)); /* down columns */
        int64_t ks[2] = {1, 4};
        assert_shape(ak, 2, ks);
        ASSERT_OK(td_copy_to_host(ak, got, 4 * sizeof(int64_t), TD_I64));
        int64_t want[4] = {0, 2, 2, 2}; /* NaN (or the 9 replacing it) wins columns 1 and 3 */
        for (int i = 0; i < 4; i++) ASSERT_EQ_INT(got[i], want[i]);
    }
    td_scope_end();
}

TEST(argmax_flatten) {
    td_scope_begin();
    test_seed_from(24);
    int64_t s[3] = {4, 6, 5};
    double *v = rand_values(120, -1, 1);
    td_tensor *x = ASSERT_TENSOR(td_transpose(test_tensor_f64(v, 3, s, TD_F32), 0, 2)); /* [5,6,4] */
    double *xv = test_host(x);
    int64_t best = 0, worst = 0;
    for (int64_t i = 1; i < 120; i++) {
        if (xv[i] > xv[best]) best = i;
        if (xv[i] < xv[worst]) worst = i;
    }
    td_tensor *a = ASSERT_TENSOR(td_argmax(x, TD_ALL_DIMS, false));
    ASSERT_EQ_INT(td_ndim(a), 0);
    ASSERT_EQ_INT((int64_t)td_item(a), best);
    td_tensor *b = ASSERT_TENSOR(td_argmin(x, TD_ALL_DIMS, true));
    int64_t ones[3] = {1, 1, 1};
    assert_shape(b, 3, ones);
    ASSERT_EQ_INT((int64_t)td_item(b), worst);
    free(v), free(xv);
    td_scope_end();
}

TEST(nan_propagation) {
    td_scope_begin();
    double v[6] = {1, NAN, 3, 4, 5, 6};
    int64_t s[2] = {2, 3};
    for (int di = 0; di < 2; di++) {
        td_tensor *x = test_tensor_f64(v, 2, s, di ? TD_F64 : TD_F32);
        int one = 1;
        for (int op = 0; op < R_COUNT; op++) {
            double *g = test_host(ASSERT_TENSOR(r_call(op, x, 1, &one, false, 1)));
            ASSERT(isnan(g[0]));
            ASSERT(!isnan(g[1]));
            free(g);
        }
    }
    td_scope_end();
}

TEST(var_correction) {
    td_scope_begin();
    double v[5] = {2, 4, 4, 5, 10};
    int64_t n = 5;
    td_tensor *x = test_tensor_f64(v, 1, &n, TD_F64);
    double m = 5, ss = 9 + 1 + 1 + 0 + 25; /* mean 5 */
    for (int c = 0; c < 3; c++) ASSERT_NEAR(td_item(td_var(x, 0, NULL, c, false)), ss / (5 - c), 1e-14);
    (void)m;
    int64_t one = 1;
    td_tensor *single = test_tensor_f64(v, 1, &one, TD_F32);
    ASSERT(isnan(td_item(td_var(single, 0, NULL, 1, false)))); /* 0/0, as PyTorch */
    /* a large offset does not cancel: two-pass variance */
    double w[4] = {1e8 + 1, 1e8 + 2, 1e8 + 3, 1e8 + 4};
    int64_t n4 = 4;
    ASSERT_NEAR(td_item(td_var(test_tensor_f64(w, 1, &n4, TD_F64), 0, NULL, 1, false)), 5.0 / 3, 1e-9);
    td_scope_end();
}

TEST(logsumexp_stable) {
    td_scope_begin();
    double v[4] = {1000, 1000, -INFINITY, -INFINITY};
    int64_t s[2] = {2, 2};
    td_tensor *x = test_tensor_f64(v, 2, s, TD_F32);
    int one = 1;
    double *g = test_host(ASSERT_TENSOR(td_logsumexp(x, 1, &one, false)));
    ASSERT_NEAR(g[0], 1000 + log(2), 1e-4);
    ASSERT(isinf(g[1]) && g[1] < 0);
    free(g);
    double p[2] = {INFINITY, 1};
    int64_t n2 = 2;
    ASSERT(isinf(td_item(td_logsumexp(test_tensor_f64(p, 1, &n2, TD_F64), 0, NULL, false))));
    double iv[3] = {1, 2, 3};
    int64_t n3 = 3;
    td_tensor *li = ASSERT_TENSOR(td_logsumexp(test_tensor_f64(iv, 1, &n3, TD_I32), 0, NULL, false));
    ASSERT_EQ_INT(td_tensor_dtype(li), TD_F32);
    ASSERT_NEAR(td_item(li), log(exp(1) + exp(2) + exp(3)), 1e-6);
    td_scope_end();
}

/* 10^6 float32 values: the sum must match a double loop to float32 rounding. */
TEST(sum_accuracy_1e6) {
    td_scope_begin();
    test_seed_from(25);
    int64_t n = 1000000;
    double *v = rand_values(n, 0, 1);
    td_tensor *x = test_tensor_f64(v, 1, &n, TD_F32);
    double *xv = test_host(x), want = 0;
    for (int64_t i = 0; i < n; i++) want += xv[i];
    ASSERT_NEAR(td_item(td_sum(x, 0, NULL, false)), want, want * 1.2e-7);
    ASSERT_NEAR(td_item(td_mean(x, 0, NULL, false)), want / (double)n, want / (double)n * 1.2e-7);
    /* strided (every other element): no SIMD path */
    td_tensor *odd = ASSERT_TENSOR(td_slice(x, 0, 1, n, 2));
    double wodd = 0;
    for (int64_t i = 1; i < n; i += 2) wodd += xv[i];
    ASSERT_NEAR(td_item(td_sum(odd, 0, NULL, false)), wodd, wodd * 1.2e-7);
    free(v), free(xv);
    td_scope_end();
}

/* Two outputs of 300k elements each, along rows and down columns. */
TEST(few_outputs_long_rows) {
    td_scope_begin();
    test_seed_from(26);
    int64_t s[2] = {2, 300001}, st[2] = {300001, 2};
    double *v = rand_values(2 * 300001, -1, 1);
    td_tensor *x = test_tensor_f64(v, 2, s, TD_F32), *xt = ASSERT_TENSOR(td_transpose(x, 0, 1));
    assert_shape(xt, 2, st);
    double *xv = test_host(x);
    int one = 1, zero = 0;
    for (int op = 0; op < R_COUNT; op++) {
        double want[2];
        ref_reduce(op, xv, 2, s, 2, 1, want, 2);
        double *g = test_host(ASSERT_TENSOR(r_call(op, x, 1, &one, false, 1)));
        assert_close(g, want, 2, 1e-6, 2e-6, rnames[op]);
        free(g);
        g = test_host(ASSERT_TENSOR(r_call(op, xt, 1, &zero, false, 1)));
        assert_close(g, want, 2, 1e-6, 2e-6, rnames[op]);
        free(g);
    }
    free(v), free(xv);
    td_scope_end();
}

TEST(empty_sets) {
    td_scope_begin();
    int64_t s[2] = {2, 0};
    td_tensor *x = ASSERT_TENSOR(td_zeros(2, s, TD_F32, TD_CPU));
    int one = 1, zero = 0;
    td_tensor *sm = ASSERT_TENSOR(td_sum(x, 1, &one, false));
    ASSERT_EQ_INT(td_numel(sm), 2);
    double *g = test_host(sm);
    ASSERT(g[0] == 0 && g[1] == 0);
    free(g);
    g = test_host(ASSERT_TENSOR(td_mean(x, 1, &one, false)));
    ASSERT(isnan(g[0]) && isnan(g[1]));
    free(g);
    ASSERT(isinf(td_item(td_logsumexp(x, 0, NULL, false))));
    td_tensor *cols = ASSERT_TENSOR(td_amax(x, 1, &zero, false)); /* nothing to reduce into: shape [0] */
    ASSERT_EQ_INT(td_numel(cols), 0);
    ASSERT_ERROR(td_amax(x, 1, &one, false), TD_ERR_SHAPE, "amax: cannot reduce an empty set");
    ASSERT_ERROR(td_amin(x, 0, NULL, true), TD_ERR_SHAPE, "amin");
    ASSERT_ERROR(td_argmax(x, 1, false), TD_ERR_SHAPE, "argmax");
    ASSERT_ERROR(td_argmin(x, TD_ALL_DIMS, false), TD_ERR_SHAPE, "argmin");
    /* a 0-d input reduces to itself */
    td_tensor *sc = ASSERT_TENSOR(td_scalar(2.5, TD_F64, TD_CPU));
    ASSERT_NEAR(td_item(td_sum(sc, 0, NULL, false)), 2.5, 0);
    ASSERT_EQ_INT(td_ndim(td_mean(sc, 1, &zero, true)), 0);
    ASSERT_NEAR(td_item(td_argmax(sc, 0, false)), 0, 0);
    td_scope_end();
}

TEST(errors) {
    int64_t s[3] = {2, 3, 4};
    td_tensor *x = ASSERT_TENSOR(td_ones(3, s, TD_F32, TD_CPU));
    int dup[2] = {1, -2}, bad[1] = {3};
    ASSERT_ERROR(td_sum(x, 2, dup, false), TD_ERR_INDEX, "sum: dim 1 appears more than once");
    ASSERT_ERROR(td_mean(x, 1, bad, false), TD_ERR_INDEX, "dim 3 out of range");
    ASSERT_ERROR(td_argmax(x, -4, false), TD_ERR_INDEX, "out of range");
    td_tensor *xi = ASSERT_TENSOR(td_ones(3, s, TD_I32, TD_CPU));
    ASSERT_ERROR(td_mean(xi, 0, NULL, false), TD_ERR_DTYPE, "mean: input dtype int32 is not floating");
    ASSERT_ERROR(td_var(xi, 0, NULL, 1, false), TD_ERR_DTYPE, "var:");
    td_tensor *xb = ASSERT_TENSOR(td_ones(3, s, TD_BOOL, TD_CPU));
    ASSERT_ERROR(td_amax(xb, 0, NULL, false), TD_ERR_DTYPE, "amax: not defined for bool");
    ASSERT_ERROR(td_argmin(xb, 0, false), TD_ERR_DTYPE, "bool");
    td_clear_error();
    ASSERT(td_sum(td_mean(xi, 0, NULL, false), 0, NULL, false) == NULL); /* the first error is kept */
    ASSERT_EQ_INT(td_last_status(), TD_ERR_DTYPE);
    td_clear_error();
    td_scope_begin();
    ASSERT(td_sum(x, 1, dup + 1, false) && td_argmax(x, TD_ALL_DIMS, true) && td_logsumexp(xi, 0, NULL, false));
    td_scope_end();
    td_release(x), td_release(xi), td_release(xb);
    ASSERT_EQ_INT(td_debug_live_tensors(), 0); /* no temporaries (casts, keepdim outputs) leaked */
}

TEST_MAIN(TESTS)
