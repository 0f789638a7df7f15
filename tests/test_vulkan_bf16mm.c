/*
** bf16 MATMUL on vulkan:0 (vk_ops_matmul.c): on the f16 tensor cores with per-row and
** per-column power-of-two scaling where the device has cooperative matrices, else the
** tiled kernel. Every case holds for both paths and runs on each device (the path is
** printed); switch_off needs the cooperative-matrix path and skips without it.
** Each output must be the bf16 rounding of a value within f32 accumulation error of
** the double-precision product of the same bf16 inputs: in
** [bf16(ref - tol), bf16(ref + tol)], tol = 2^-16 sum_k |a_ik b_kj| (bf16 rounding of
** the inputs would be 2^-8).
*/
#include "vulkan_harness.h"

#define TESTS(X) X(shapes) X(transposed) X(wide_range) X(inf_nan) X(switch_off)

static bool coop; /* vulkan:0 runs bf16 on cooperative matrices */

static void setup_bf16(void) {
    setup();
    td_device_info info;
    ASSERT_OK(be->iface->device_info(0, &info));
    const char *sw = getenv("TRIDENT_VULKAN_COOPMAT_BF16");
    coop = !strstr(info.features, "coopmat=none") && !(sw && !strcmp(sw, "0"));
    printf("  bf16 matmul path: %s\n", coop ? "cooperative matrix (f16, scaled)" : "tiled kernel");
}

static uint16_t bf16_of(double v) { /* round to nearest even */
    float f = (float)v;
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}
static double bf16_val(uint16_t u) {
    uint32_t x = (uint32_t)u << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* out = a @ b on the device, a [M, K] stored transposed when at, b [K, N] when bt. */
static void device_mm(int M, int K, int N, bool at, bool bt, const uint16_t *a, const uint16_t *b, uint16_t *out) {
    td_operand in[2] = {dev_tensor(TD_BF16, 2, at ? (int64_t[]){K, M} : (int64_t[]){M, K}, a),
                        dev_tensor(TD_BF16, 2, bt ? (int64_t[]){N, K} : (int64_t[]){K, N}, b)};
    if (at) in[0].shape[0] = M, in[0].shape[1] = K, in[0].strides[0] = 1, in[0].strides[1] = M;
    if (bt) in[1].shape[0] = K, in[1].shape[1] = N, in[1].strides[0] = 1, in[1].strides[1] = K;
    td_operand o = dev_tensor(TD_BF16, 2, (int64_t[]){M, N}, NULL);
    td_op op = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = in, .out = &o};
    run(&op);
    fetch(&o, out);
    for (int i = 0; i < 2; i++) be->iface->buffer_free(in[i].buf);
    be->iface->buffer_free(o.buf);
}

/* Rows m = 0, step, 2 step, ... of out against the double reference; returns the misses. */
static int check_rows(const char *what, int M, int K, int N, bool at, bool bt, const uint16_t *a, const uint16_t *b,
                      const uint16_t *out, int step) {
    int bad = 0;
    for (int m = 0; m < M; m += step)
        for (int n = 0; n < N; n++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double p = bf16_val(a[at ? (size_t)k * M + m : (size_t)m * K + k]) *
                           bf16_val(b[bt ? (size_t)n * K + k : (size_t)k * N + n]);
                ref += p, mag += fabs(p);
            }
            double got = bf16_val(out[(size_t)m * N + n]), tol = ldexp(mag, -16);
            bool ok = isnan(ref)   ? isnan(got)
                      : isinf(ref) ? got == ref
                                   : got >= bf16_val(bf16_of(ref - tol)) && got <= bf16_val(bf16_of(ref + tol));
            if (!ok && bad++ < 5)
                fprintf(stderr, "  %s: out[%d, %d] = %.9g, want %.9g (tol %.3g)\n", what, m, n, got, ref, tol);
        }
    return bad;
}

static void random_bf16(uint16_t *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = bf16_of(srand1());
}

static void product(int M, int K, int N, bool at, bool bt, int step) {
    uint16_t *a = malloc(2 * ((size_t)M * K + (size_t)K * N + (size_t)M * N)), *b = a + (size_t)M * K,
             *o = b + (size_t)K * N;
    random_bf16(a, (size_t)M * K + (size_t)K * N);
    device_mm(M, K, N, at, bt, a, b, o);
    char what[80];
    snprintf(what, sizeof what, "bf16 [%d,%d]%s @ [%d,%d]%s", M, K, at ? "^T" : "", K, N, bt ? "^T" : "");
    int bad = check_rows(what, M, K, N, at, bt, a, b, o, step);
    free(a);
    if (bad) TEST_FAIL_("%s: %d outputs off", what, bad);
}

TEST(shapes) {
    setup_bf16();
    product(128, 128, 128, false, false, 1);
    product(257, 129, 300, false, false, 1);
    product(4096, 768, 768, false, false, 61); /* every 61st row against the reference */
    check_clean();
}

/* as the backward uses them: dA = dC B^T (b transposed), dB = A^T dC (a transposed) */
TEST(transposed) {
    setup_bf16();
    product(257, 129, 300, false, true, 1);
    product(129, 257, 300, true, false, 1);
    product(130, 72, 136, true, true, 1);
    product(1024, 768, 768, true, false, 31);
    check_clean();
}

/* rows of a mixing 1e30 and 1e-30 (and columns of b mixing 1e4 and 1e-34): the small
** ones are far below the staged f16 range of their row; their share is under f32
** rounding of the large terms */
TEST(wide_range) {
    setup_bf16();
    enum { M = 70, K = 96, N = 40 };
    uint16_t a[M * K], b[K * N], o[M * N];
    for (int i = 0; i < M * K; i++) a[i] = bf16_of((i % 3 ? 1e-30 : 1e30) * srand1());
    for (int i = 0; i < K * N; i++) b[i] = bf16_of((i % 5 ? 1e-34 : 1e4) * srand1());
    for (int i = 0; i < K; i++) a[5 * K + i] = bf16_of(1e-30 * srand1()); /* a row of small values only */
    device_mm(M, K, N, false, false, a, b, o);
    int bad = check_rows("wide range", M, K, N, false, false, a, b, o, 1);
    if (bad) TEST_FAIL_("wide range: %d outputs off", bad);
    check_clean();
}

/* inf and NaN propagate as in f32: an inf of a times a finite nonzero b (also one staged
** far below its column's max) is inf; times 0 NaN; a NaN of b makes its column NaN */
TEST(inf_nan) {
    setup_bf16();
    enum { M = 40, K = 64, N = 24 };
    uint16_t a[M * K], b[K * N], o[M * N];
    random_bf16(a, M * K);
    for (int i = 0; i < K * N; i++) b[i] = bf16_of(0.5 + urand()); /* positive */
    a[3 * K + 7] = 0x7F80;                                         /* +inf */
    b[7 * N + 2] = bf16_of(1e-30);                                 /* column 2: 2^-100 below its max */
    b[20 * N + 2] = bf16_of(1e10);
    b[7 * N + 9] = 0;        /* inf * 0: NaN in [3, 9] */
    b[11 * N + 15] = 0x7FC0; /* NaN: column 15 */
    device_mm(M, K, N, false, false, a, b, o);
    int bad = check_rows("inf/nan", M, K, N, false, false, a, b, o, 1);
    if (bad) TEST_FAIL_("inf/nan: %d outputs off", bad);
    ASSERT(bf16_val(o[3 * N + 2]) == INFINITY);
    ASSERT(isnan(bf16_val(o[3 * N + 9])) && isnan(bf16_val(o[0 * N + 15])));
    check_clean();
}

/* a row [2^100, 2^40] @ a column [0, 1]: 2^40 exactly on the tiled kernel; on the tensor cores
** 2^40 is 2^-60 of its row's max, below the staged f16 grid (2^-38 of the max), so it stages
** as that grid's least step, 2^62: the kernel's stated bound 2^-38 max|a| sum|b| */
TEST(switch_off) {
    setup_bf16();
    if (!coop) TEST_SKIP("vulkan:0 has no cooperative matrix");
    uint16_t a[2] = {bf16_of(ldexp(1, 100)), bf16_of(ldexp(1, 40))}, b[2] = {0, bf16_of(1)}, o[1];
    device_mm(1, 2, 1, false, false, a, b, o);
    printf("  switch on: %g (2^%g)\n", bf16_val(o[0]), log2(bf16_val(o[0])));
    ASSERT(bf16_val(o[0]) != ldexp(1, 40) && bf16_val(o[0]) <= ldexp(1, 62));
    setenv("TRIDENT_VULKAN_COOPMAT_BF16", "0", 1);
    device_mm(1, 2, 1, false, false, a, b, o);
    product(257, 129, 300, false, true, 1);
    unsetenv("TRIDENT_VULKAN_COOPMAT_BF16");
    printf("  switch off: %g\n", bf16_val(o[0]));
    ASSERT(bf16_val(o[0]) == ldexp(1, 40));
    check_clean();
}

TEST_MAIN(TESTS)
