/* rand, randn and dropout: exact Philox streams, statistics, masks, errors. */
#include "test_util.h"

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(rand_stream_exact)                                                                                               \
    X(rand_offset_shift) X(rand_half_in_unit) X(rand_stats) X(randn_stream) X(randn_stats) X(dropout_mask)             \
        X(dropout_noncontiguous) X(dropout_dtypes) X(dropout_errors)
/* clang-format on */

/* u_i of the stream (seed, offset), from td_philox4x32 directly */
static float stream_u(uint64_t seed, uint64_t offset, int64_t i) {
    uint32_t w[4];
    td_philox4x32(seed, offset + (uint64_t)(i / 4), w);
    return (float)(w[i % 4] >> 8) / 16777216.0f;
}

static float *host_f32(td_tensor *t) {
    int64_t n = td_numel(t);
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ASSERT(v);
    ASSERT_OK(td_copy_to_host(t, v, (size_t)n * sizeof *v, TD_F32));
    return v;
}

TEST(rand_stream_exact) {
    td_scope_begin();
    uint64_t seed = test_seed(), offset = 5;
    int64_t shape[2] = {3, 7}; /* 21: not a multiple of 4 */
    float *f = host_f32(ASSERT_TENSOR(td_rand(2, shape, seed, offset, TD_F32, TD_CPU)));
    double *d = test_host(ASSERT_TENSOR(td_rand(2, shape, seed, offset, TD_F64, TD_CPU)));
    for (int64_t i = 0; i < 21; i++) {
        float u = stream_u(seed, offset, i);
        if (memcmp(&f[i], &u, 4)) TEST_FAIL_("f32 element %lld: %.9g != %.9g", (long long)i, f[i], u);
        if (d[i] != (double)u) TEST_FAIL_("f64 element %lld: %.17g != %.9g", (long long)i, d[i], u);
    }
    /* the same seed and offset give the same values; another seed does not */
    float *again = host_f32(ASSERT_TENSOR(td_rand(2, shape, seed, offset, TD_F32, TD_CPU)));
    ASSERT(!memcmp(again, f, 21 * sizeof(float)));
    float *other = host_f32(ASSERT_TENSOR(td_rand(2, shape, seed + 1, offset, TD_F32, TD_CPU)));
    int same = 0;
    for (int i = 0; i < 21; i++) same += other[i] == f[i];
    ASSERT(same < 3);
    free(f), free(d), free(again), free(other);
    td_scope_end();
}

/* the n float32 values of td_rand at (seed, offset), on the host (the tensor is released) */
static float *rand_f32(int64_t n, uint64_t seed, uint64_t offset) {
    td_scope_begin();
    float *v = host_f32(ASSERT_TENSOR(td_rand(1, &n, seed, offset, TD_F32, TD_CPU)));
    td_scope_end();
    return v;
}

TEST(rand_offset_shift) {
    uint64_t seed = test_seed();
    int64_t n = 37;
    float *a = rand_f32(n, seed, 100), *b = rand_f32(n, seed, 102);
    for (int i = 0; i + 8 < n; i++) ASSERT(!memcmp(&b[i], &a[i + 8], 4)); /* 2 counters = 8 elements */
    /* the counter wraps modulo 2^64 */
    float *w = rand_f32(n, seed, UINT64_MAX);
    ASSERT(!memcmp(&w[4], &(float){stream_u(seed, 0, 0)}, 4));
    free(a), free(b), free(w);
}

TEST(rand_half_in_unit) {
    td_scope_begin();
    uint64_t seed = test_seed();
    int64_t n = 20000;
    td_dtype dts[2] = {TD_F16, TD_BF16};
    double ulp[2] = {0x1p-11, 0x1p-8};
    for (int k = 0; k < 2; k++) {
        float *h = host_f32(ASSERT_TENSOR(td_rand(1, &n, seed, 0, dts[k], TD_CPU)));
        for (int64_t i = 0; i < n; i++) {
            ASSERT(h[i] >= 0 && h[i] < 1);
            ASSERT_NEAR(h[i], stream_u(seed, 0, i), ulp[k]);
        }
        free(h);
    }
    td_scope_end();
}

TEST(rand_stats) {
    td_scope_begin();
    uint64_t seed = test_seed();
    int64_t n = 100000;
    double *v = test_host(ASSERT_TENSOR(td_rand(1, &n, seed, 0, TD_F32, TD_CPU)));
    double mean = 0, var = 0, lo = 1, hi = 0;
    for (int64_t i = 0; i < n; i++) mean += v[i], lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean);
    var /= (double)(n - 1);
    /* standard errors: mean 0.29/sqrt(n) = 9e-4, var ~3e-4; allow 5 sigma */
    ASSERT_NEAR(mean, 0.5, 5e-3);
    ASSERT_NEAR(var, 1.0 / 12, 1.5e-3);
    ASSERT(lo >= 0 && lo < 1e-3 && hi < 1 && hi > 1 - 1e-3);
    free(v);
    td_scope_end();
}

TEST(randn_stream) {
    td_scope_begin();
    uint64_t seed = test_seed(), offset = 3;
    int64_t n = 27; /* odd: the last pair keeps only its cosine */
    float *f = host_f32(ASSERT_TENSOR(td_randn(1, &n, seed, offset, TD_F32, TD_CPU)));
    double *d = test_host(ASSERT_TENSOR(td_randn(1, &n, seed, offset, TD_F64, TD_CPU)));
    float *h = host_f32(ASSERT_TENSOR(td_randn(1, &n, seed, offset, TD_BF16, TD_CPU)));
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i / 2;
        double u1 = 1.0 - stream_u(seed, offset, 2 * j), u2 = stream_u(seed, offset, 2 * j + 1);
        double r = sqrt(-2 * log(u1)), z = i % 2 ? r * sin(2 * M_PI * u2) : r * cos(2 * M_PI * u2);
        ASSERT_NEAR(d[i], z, 1e-12 * (1 + fabs(z)));
        ASSERT_NEAR(f[i], z, 2e-6 * (1 + fabs(z)));
        ASSERT_NEAR(h[i], z, 0x1p-8 * (1 + fabs(z)));
    }
    free(f), free(d), free(h);
    td_scope_end();
}

TEST(randn_stats) {
    td_scope_begin();
    uint64_t seed = test_seed();
    int64_t shape[2] = {317, 316}; /* ~1e5 */
    td_tensor *t = ASSERT_TENSOR(td_randn(2, shape, seed, 77, TD_F32, TD_CPU));
    int64_t n = td_numel(t);
    double *v = test_host(t);
    double mean = 0, var = 0, m4 = 0, tail = 0;
    for (int64_t i = 0; i < n; i++) mean += v[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) {
        double e = v[i] - mean;
        var += e * e, m4 += e * e * e * e, tail += fabs(v[i]) > 1.96;
    }
    var /= (double)(n - 1), m4 /= (double)n, tail /= (double)n;
    ASSERT_NEAR(mean, 0, 0.016);           /* 5 sigma of 1/sqrt(n) */
    ASSERT_NEAR(var, 1, 0.025);            /* sd of var ~ sqrt(2/n) = 4.5e-3 */
    ASSERT_NEAR(m4 / (var * var), 3, 0.1); /* kurtosis of a normal */
    ASSERT_NEAR(tail, 0.05, 0.004);
    free(v);
    td_scope_end();
}

/* expected dropout in double: keep iff u_i >= p, scale by 1/(1-p) */
static void check_dropout(const double *x, const double *y, int64_t n, double p, uint64_t seed, uint64_t offset,
                          double tol) {
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        bool keep = (double)stream_u(seed, offset, i) >= p;
        double want = keep ? x[i] / (1 - p) : 0;
        kept += keep;
        if (!(fabs(y[i] - want) <= tol * fabs(want)))
            TEST_FAIL_("element %lld: %.9g != %.9g (x %.9g, keep %d)", (long long)i, y[i], want, x[i], keep);
    }
    if (n >= 1000) ASSERT_NEAR((double)kept / (double)n, 1 - p, 5 * sqrt(p * (1 - p) / (double)n));
}

TEST(dropout_mask) {
    td_scope_begin();
    uint64_t seed = test_seed();
    int64_t shape[2] = {50, 41};
    int64_t n = 50 * 41;
    td_tensor *x = ASSERT_TENSOR(td_randn(2, shape, seed ^ 0xABCD, 0, TD_F32, TD_CPU));
    double *xv = test_host(x);
    double ps[3] = {0.3, 0.5, 0.9};
    for (int k = 0; k < 3; k++) {
        td_tensor *y = ASSERT_TENSOR(td_dropout(x, ps[k], seed, 11));
        double *yv = test_host(y);
        check_dropout(xv, yv, n, ps[k], seed, 11, 1e-6);
        /* determinism: same (seed, offset) -> same output */
        double *again = test_host(ASSERT_TENSOR(td_dropout(x, ps[k], seed, 11)));
        ASSERT(!memcmp(again, yv, (size_t)n * sizeof(double)));
        /* another offset -> another mask */
        double *shifted = test_host(ASSERT_TENSOR(td_dropout(x, ps[k], seed, 12)));
        int64_t differ = 0;
        for (int64_t i = 0; i < n; i++) differ += (shifted[i] == 0) != (yv[i] == 0);
        ASSERT(differ > n / 20);
        free(yv), free(again), free(shifted);
    }
    /* p exactly on the 2^-24 grid: u == p is kept */
    float *u = host_f32(ASSERT_TENSOR(td_rand(2, shape, seed, 11, TD_F32, TD_CPU)));
    double p = u[7];
    double *yv = test_host(ASSERT_TENSOR(td_dropout(x, p, seed, 11)));
    ASSERT(yv[7] != 0);
    check_dropout(xv, yv, n, p, seed, 11, 1e-6);
    free(xv), free(yv), free(u);
    td_scope_end();
}

TEST(dropout_noncontiguous) {
    td_scope_begin();
    uint64_t seed = test_seed();
    int64_t shape[3] = {5, 6, 7};
    td_tensor *base = ASSERT_TENSOR(td_randn(3, shape, seed, 0, TD_F64, TD_CPU));
    td_tensor *x = ASSERT_TENSOR(td_slice(td_transpose(base, 0, 2), 1, 1, 6, 2)); /* [7,3,5], strided */
    ASSERT(!td_is_contiguous(x));
    double *xv = test_host(x); /* row-major logical order */
    double *yv = test_host(ASSERT_TENSOR(td_dropout(x, 0.25, seed, 4)));
    check_dropout(xv, yv, td_numel(x), 0.25, seed, 4, 1e-15);
    free(xv), free(yv);
    td_scope_end();
}

TEST(dropout_dtypes) {
    td_scope_begin();
    uint64_t seed = test_seed();
    int64_t n = 3001;
    td_tensor *x64 = ASSERT_TENSOR(td_randn(1, &n, seed, 9, TD_F64, TD_CPU));
    double *xv = test_host(x64);
    double *y64 = test_host(ASSERT_TENSOR(td_dropout(x64, 0.4, seed, 2)));
    check_dropout(xv, y64, n, 0.4, seed, 2, 1e-15);
    td_dtype half[2] = {TD_F16, TD_BF16};
    double tol[2] = {1e-3, 8e-3};
    for (int k = 0; k < 2; k++) {
        td_tensor *xh = ASSERT_TENSOR(td_cast(x64, half[k]));
        double *xhv = test_host(xh);
        double *yh = test_host(ASSERT_TENSOR(td_dropout(xh, 0.4, seed, 2)));
        check_dropout(xhv, yh, n, 0.4, seed, 2, tol[k]);
        free(xhv), free(yh);
    }
    free(xv), free(y64);
    td_scope_end();
}

TEST(dropout_errors) {
    int64_t n = 4;
    td_tensor *x = ASSERT_TENSOR(td_ones(1, &n, TD_F32, TD_CPU));
    td_tensor *same = ASSERT_TENSOR(td_dropout(x, 0, 1, 0));
    ASSERT(same == x); /* p == 0 is the identity, +1 reference */
    td_release(same);
    ASSERT_ERROR(td_dropout(x, 1, 1, 0), TD_ERR_MISUSE, "p must be in [0, 1)");
    ASSERT_ERROR(td_dropout(x, -0.1, 1, 0), TD_ERR_MISUSE, "got -0.1");
    ASSERT_ERROR(td_dropout(x, NAN, 1, 0), TD_ERR_MISUSE, "dropout");
    td_tensor *xi = ASSERT_TENSOR(td_ones(1, &n, TD_I32, TD_CPU));
    ASSERT_ERROR(td_dropout(xi, 0.5, 1, 0), TD_ERR_DTYPE, "int32");
    ASSERT_ERROR(td_dropout(NULL, 0.5, 1, 0), TD_ERR_MISUSE, "NULL");
    ASSERT_ERROR(td_rand(1, &n, 1, 0, TD_I64, TD_CPU), TD_ERR_DTYPE, "not a floating type");
    td_release(x);
    td_release(xi);
}

TEST_MAIN(TESTS)
