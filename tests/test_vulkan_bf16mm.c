/*
** bf16 MATMUL on vulkan:0 (vk_ops_matmul.c): on the f16 tensor cores with per-row and
** per-column power-of-two scaling where the device has cooperative matrices, else the
** tiled kernel. The cases up to pipeline run that scaled path (TRIDENT_VK_BF16=scaled) where the device would
** run bf16 natively. Every case holds for both paths and runs on each device (the path is
** printed); switch_off needs the cooperative-matrix path and skips without it.
** The native_* cases run the native path (bf16 cooperative matrices: the f16 kernel retyped, vk_spirv_bf16.c;
** TRIDENT_VK_BF16=native) and skip with the reason where the device lacks it (features bf16_native=0: lavapipe,
** drivers without VK_KHR_shader_bfloat16); native_refused runs where it is missing. Under
** TRIDENT_VULKAN_COOPMAT_BF16=emulated every case runs the kernel's emulated variant (any device, lavapipe
** included); prescale compares TRIDENT_VK_BF16_PRESCALE 0 and 1 bit for bit, on that variant where the device
** has no cooperative matrices; pipeline compares TRIDENT_VK_COOP_PIPE 2 and 3 with 0 bit for bit, on the same
** variant there.
** Each output must be the bf16 rounding of a value within f32 accumulation error of
** the double-precision product of the same bf16 inputs: in
** [bf16(ref - tol), bf16(ref + tol)], tol = 2^-16 sum_k |a_ik b_kj| (bf16 rounding of
** the inputs would be 2^-8).
*/
#include "vulkan_harness.h"

#define TESTS(X)                                                                                                       \
    X(shapes)                                                                                                          \
    X(transposed)                                                                                                      \
    X(wide_range)                                                                                                      \
    X(inf_nan)                                                                                                         \
    X(switch_off)                                                                                                      \
    X(prescale)                                                                                                        \
    X(pipeline)                                                                                                        \
    X(native_shapes)                                                                                                   \
    X(native_tiles)                                                                                                    \
    X(native_special)                                                                                                  \
    X(native_refused)

static bool coop;   /* vulkan:0 runs bf16 on cooperative matrices */
static bool native; /* ... and could natively (bf16 cooperative matrices) */

static void setup_bf16(void) {
    setup();
    td_device_info info;
    ASSERT_OK(be->iface->device_info(0, &info));
    native = strstr(info.features, "bf16_native=1") != NULL;
    setenv("TRIDENT_VK_BF16", "scaled", 1);
    const char *sw = getenv("TRIDENT_VULKAN_COOPMAT_BF16");
    bool emu = sw && !strcmp(sw, "emulated");
    coop = !strstr(info.features, "coopmat=none") && !(sw && !strcmp(sw, "0")) && !emu;
    printf("  bf16 matmul path: %s\n", emu    ? "cooperative-matrix kernel, emulated"
                                       : coop ? "cooperative matrix (f16, scaled)"
                                              : "tiled kernel");
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

/* a [B, M, K] @ b under TRIDENT_VK_BF16_PRESCALE=pre into out [B, M, N]: b [B, K, N] where bb, else [K, N]
** shared by the entries; a (b) stored with its last two dims swapped where at (bt); the run's status */
static td_status batched_mm(const char *pre, int B, int M, int K, int N, bool at, bool bt, bool bb, const uint16_t *a,
                            const uint16_t *b, uint16_t *out) {
    setenv("TRIDENT_VK_BF16_PRESCALE", pre, 1);
    int64_t as[3] = {B, at ? K : M, at ? M : K}, bs[3] = {B, bt ? N : K, bt ? K : N};
    td_operand in[2] = {dev_tensor(TD_BF16, 3, as, a), dev_tensor(TD_BF16, bb ? 3 : 2, bb ? bs : bs + 1, b)};
    bool tr[2] = {at, bt};
    for (int i = 0; i < 2; i++) {
        int n = in[i].ndim;
        if (!tr[i]) continue;
        int64_t t = in[i].shape[n - 1];
        in[i].shape[n - 1] = in[i].shape[n - 2], in[i].shape[n - 2] = t;
        t = in[i].strides[n - 1];
        in[i].strides[n - 1] = in[i].strides[n - 2], in[i].strides[n - 2] = t;
    }
    td_operand o = dev_tensor(TD_BF16, 3, (int64_t[]){B, M, N}, NULL);
    td_op op = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = in, .out = &o};
    if (!be->iface->supports(0, &op)) TEST_FAIL_("vulkan does not support %s", td_op_name(op.kind));
    td_status st = be->iface->run(0, &op);
    if (st == TD_OK) fetch(&o, out);
    for (int i = 0; i < 2; i++) be->iface->buffer_free(in[i].buf);
    be->iface->buffer_free(o.buf);
    unsetenv("TRIDENT_VK_BF16_PRESCALE");
    return st;
}

/* bf16 values the conversion treats apart: per row a scale 2^-40 .. 2^40, and among ordinary values ones 2^-35
** below it (the slow path: f16 subnormals, rounded), bf16 subnormals, +-0 */
static uint16_t tricky(int row) {
    double u = urand(), x = srand1() * ldexp(1, (row * 7) % 81 - 40);
    return u < 0.06   ? bf16_of(x * ldexp(1, -35))
           : u < 0.09 ? (uint16_t)((urand() < 0.5 ? 0x8000 : 0) | (1 + (int)(urand() * 127)))
           : u < 0.1  ? (urand() < 0.5 ? 0x8000 : 0)
                      : bf16_of(x);
}

/* The prescaled f16 copies (shaders/matmul_bf16_scale.comp) stage exactly what the kernel's own conversion does:
** TRIDENT_VK_BF16_PRESCALE 0 and 1 give the same bits (NaN as NaN) on row-major and transposed operands, odd
** sizes (unaligned runs), batches with b shared or not, a split K, and infs and NaNs */
TEST(prescale) {
    setup_bf16();
    const char *sw = getenv("TRIDENT_VULKAN_COOPMAT_BF16");
    if (sw && !strcmp(sw, "0")) TEST_SKIP("TRIDENT_VULKAN_COOPMAT_BF16=0");
    bool emu = !coop && !sw;
    if (emu) setenv("TRIDENT_VULKAN_COOPMAT_BF16", "emulated", 1);
    static const int CASES[][7] = {/* B, M, K, N, at, bt, bb */
                                   {1, 150, 72, 136, 0, 0, 0}, {1, 70, 44, 90, 1, 0, 0},  {1, 136, 200, 264, 0, 1, 0},
                                   {1, 70, 36, 90, 1, 1, 0},   {3, 40, 64, 24, 0, 0, 0},  {2, 33, 40, 17, 1, 0, 1},
                                   {2, 24, 48, 40, 0, 1, 1},   {1, 40, 4096, 24, 0, 0, 0}};
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        int B = CASES[c][0], M = CASES[c][1], K = CASES[c][2], N = CASES[c][3];
        bool at = CASES[c][4], bt = CASES[c][5], bb = CASES[c][6];
        size_t na = (size_t)B * M * K, nb = (size_t)(bb ? B : 1) * K * N, no = (size_t)B * M * N;
        uint16_t *a = malloc(2 * (na + nb + 2 * no)), *b = a + na, *o0 = b + nb, *o1 = o0 + no;
        for (size_t i = 0; i < na; i++) a[i] = tricky((int)(at ? i % M : i / K % M));     /* by row of a */
        for (size_t i = 0; i < nb; i++) b[i] = tricky((int)(bt ? i / K % N : i % N) + 3); /* by column of b */
        if (c == 0) a[5 * K + 9] = 0x7F80, a[9 * K + 1] = 0xFF80, b[3 * N + 7] = 0x7FC0, b[4 * N + 8] = 0x7F80;
        ASSERT_OK(batched_mm("0", B, M, K, N, at, bt, bb, a, b, o0));
        ASSERT_OK(batched_mm("1", B, M, K, N, at, bt, bb, a, b, o1));
        int bad = 0, nan = 0;
        for (size_t i = 0; i < no; i++) {
            bool n0 = isnan(bf16_val(o0[i])), n1 = isnan(bf16_val(o1[i]));
            nan += n0;
            if (n0 != n1 || (!n0 && o0[i] != o1[i])) {
                if (bad++ < 5)
                    fprintf(stderr, "  case %zu: out[%zu] = 0x%04x prescaled, 0x%04x not\n", c, i, o1[i], o0[i]);
            }
        }
        printf("  [%d, %d, %d] @ [%d, %d]%s%s%s: %zu outputs (%d NaN), %d differ\n", B, M, K, K, N, at ? " a^T" : "",
               bt ? " b^T" : "", bb ? " b batched" : "", no, nan, bad);
        free(a);
        if (bad) TEST_FAIL_("prescaled and in-loop conversion differ: case %zu, %d outputs", c, bad);
    }
    if (emu) unsetenv("TRIDENT_VULKAN_COOPMAT_BF16");
    check_clean();
}

/* The K loop's register pipeline (shaders/matmul_coopmat_kloop.glsl) changes when tiles are loaded and stored, not
** the sums: under TRIDENT_VK_COOP_PIPE 2 and 3 (even and odd slot counts, K tails of every length modulo them, K
** shorter than the pipeline) tiles 7 (one stage), 8 (two stages, BK 16) and, on a device with cooperative
** matrices, 0 (two stages, BK 32) and 9 give the bits of PIPE 0, which must match the double reference, on
** row-major operands and odd transposed ones (strided loads), and there also on transposed aligned and batched
** ones (the emulated variant on lavapipe is slow: its subset takes minutes). Tiles 8 and 9 convert in the K loop
** (TRIDENT_VK_BF16_PRESCALE=0, so that the conversion runs on the slots), 7 and 0 stage the prescaled copies. A
** tile past the device's shared memory (0 and 9 at lavapipe's 32 KiB) is said and left out; 7 and 8 fit every
** device. */
TEST(pipeline) {
    setup_bf16();
    const char *sw = getenv("TRIDENT_VULKAN_COOPMAT_BF16");
    if (sw && !strcmp(sw, "0")) TEST_SKIP("TRIDENT_VULKAN_COOPMAT_BF16=0");
    bool emu = !coop && !sw;
    if (emu) setenv("TRIDENT_VULKAN_COOPMAT_BF16", "emulated", 1);
    static const int CASES[][7] = {/* B, M, K, N, at, bt, bb */
                                   {1, 150, 200, 136, 0, 0, 0},
                                   {1, 70, 44, 90, 1, 1, 0},
                                   {1, 136, 72, 264, 0, 1, 0},
                                   {2, 40, 24, 24, 1, 0, 1}};
    static const char *TILES[4] = {"7", "8", "0", "9"}, *PIPES[3] = {"0", "2", "3"};
    int n = coop ? 4 : 2; /* tiles and cases */
    for (int t = 0; t < n; t++)
        for (int c = 0; c < n; c++) {
            int B = CASES[c][0], M = CASES[c][1], K = CASES[c][2], N = CASES[c][3];
            bool at = CASES[c][4], bt = CASES[c][5], bb = CASES[c][6];
            size_t na = (size_t)B * M * K, nb = (size_t)(bb ? B : 1) * K * N, no = (size_t)B * M * N;
            uint16_t *a = malloc(2 * (na + nb + 2 * no)), *b = a + na, *o0 = b + nb, *o1 = o0 + no;
            random_bf16(a, na + nb);
            setenv("TRIDENT_VK_COOP_TILE", TILES[t], 1);
            int bad = 0;
            bool fits = true;
            for (int p = 0; p < 3 && !bad; p++) {
                setenv("TRIDENT_VK_COOP_PIPE", PIPES[p], 1);
                td_status st = batched_mm(t % 2 ? "0" : "1", B, M, K, N, at, bt, bb, a, b, p ? o1 : o0);
                fits = !(st == TD_ERR_MISUSE && strstr(td_last_error(), "does not fit this device") && t >= 2);
                if (!fits) break;
                ASSERT_OK(st);
                if (!p) {
                    for (int z = 0; z < B && !bad; z++)
                        bad = check_rows("pipe 0", M, K, N, at, bt, a + (size_t)z * M * K,
                                         b + (bb ? (size_t)z * K * N : 0), o0 + (size_t)z * M * N, 1);
                    continue;
                }
                for (size_t i = 0; i < no; i++)
                    if (o0[i] != o1[i] && bad++ < 5)
                        fprintf(stderr, "  out[%zu] = 0x%04x under pipe %s, 0x%04x under 0\n", i, o1[i], PIPES[p],
                                o0[i]);
            }
            printf("  tile %s: [%d, %d, %d] @ [%d, %d]%s%s%s: %s\n", TILES[t], B, M, K, K, N, at ? " a^T" : "",
                   bt ? " b^T" : "", bb ? " b batched" : "",
                   !fits ? "does not fit this device"
                   : bad ? "differ"
                         : "pipes 0, 2, 3 agree");
            td_clear_error();
            free(a);
            unsetenv("TRIDENT_VK_COOP_TILE");
            unsetenv("TRIDENT_VK_COOP_PIPE");
            if (bad) TEST_FAIL_("tile %s, case %d: %d outputs off", TILES[t], c, bad);
        }
    if (emu) unsetenv("TRIDENT_VULKAN_COOPMAT_BF16");
    check_clean();
}

/* The native path where vulkan:0 has it (else the case skips, saying why). */
static void setup_native(void) {
    setup_bf16();
    if (!native)
        TEST_SKIP("vulkan:0 has no native bf16 matmul (features bf16_native=0: no VK_KHR_shader_bfloat16 with bf16 "
                  "cooperative matrices at the f16 kernel's shape)");
    setenv("TRIDENT_VK_BF16", "native", 1);
    printf("  bf16 matmul path: cooperative matrix (bf16, native)\n");
}

/* a [B, M, K] @ b (batched_mm's layouts) on the path of TRIDENT_VK_BF16=mode, checked against the double
** reference; its output in out. Returns the misses. */
static int native_case(const char *mode, int B, int M, int K, int N, bool at, bool bt, bool bb, const uint16_t *a,
                       const uint16_t *b, uint16_t *out, int step) {
    setenv("TRIDENT_VK_BF16", mode, 1);
    ASSERT_OK(batched_mm("1", B, M, K, N, at, bt, bb, a, b, out));
    int bad = 0;
    char what[96];
    snprintf(what, sizeof what, "%s [%d,%d,%d]%s @ [%d,%d]%s", mode, B, M, K, at ? "^T" : "", K, N, bt ? "^T" : "");
    for (int z = 0; z < B; z++)
        bad += check_rows(what, M, K, N, at, bt, a + (size_t)z * M * K, b + (bb ? (size_t)z * K * N : 0),
                          out + (size_t)z * M * N, step);
    return bad;
}

/* The native path against the double reference of the same bf16 inputs (within f32 accumulation, rounded once)
** and against the scaled path on the same inputs (both within that bound; the bits that differ are printed): odd
** sizes (strided staging), every staging layout (a, b transposed), batches with b shared or not, a split K
** (one 128 x 128 tile over K = 8192: f32 slices summed in order, rounded once to bf16), W5's shapes. */
TEST(native_shapes) {
    setup_native();
    static const int CASES[][8] = {
        /* B, M, K, N, at, bt, bb, row step */
        {1, 128, 128, 128, 0, 0, 0, 1},  {1, 257, 129, 300, 0, 0, 0, 1},    {1, 257, 129, 300, 0, 1, 0, 1},
        {1, 129, 257, 300, 1, 0, 0, 1},  {1, 130, 72, 136, 1, 1, 0, 1},     {1, 1, 40, 7, 0, 0, 0, 1},
        {3, 40, 64, 24, 0, 0, 0, 1},     {2, 33, 40, 17, 1, 0, 1, 1},       {2, 24, 48, 40, 0, 1, 1, 1},
        {1, 128, 8192, 128, 0, 0, 0, 1}, {1, 4096, 768, 2304, 0, 1, 0, 61}, {1, 768, 4096, 3072, 1, 0, 0, 31}};
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        int B = CASES[c][0], M = CASES[c][1], K = CASES[c][2], N = CASES[c][3], step = CASES[c][7];
        bool at = CASES[c][4], bt = CASES[c][5], bb = CASES[c][6];
        size_t na = (size_t)B * M * K, nb = (size_t)(bb ? B : 1) * K * N, no = (size_t)B * M * N;
        uint16_t *a = malloc(2 * (na + nb + 2 * no)), *b = a + na, *o0 = b + nb, *o1 = o0 + no;
        random_bf16(a, na + nb);
        int bad = native_case("native", B, M, K, N, at, bt, bb, a, b, o0, step);
        bad += native_case("scaled", B, M, K, N, at, bt, bb, a, b, o1, step);
        size_t differ = 0;
        for (size_t i = 0; i < no; i++) differ += o0[i] != o1[i];
        printf("  [%d, %d, %d] @ [%d, %d]%s%s%s: native and scaled differ in %zu of %zu outputs\n", B, M, K, K, N,
               at ? " a^T" : "", bt ? " b^T" : "", bb ? " b batched" : "", differ, no);
        free(a);
        if (bad) TEST_FAIL_("case %zu: %d outputs off the reference", c, bad);
    }
    unsetenv("TRIDENT_VK_BF16");
    check_clean();
}

/* The tiles of TRIDENT_VK_COOP_TILE on the native path against the reference: the default rule's (7 and 0, and 6
** where those do not fit) on every staging layout with odd sizes and aligned ones, every other tile on one of
** them (a tile the device cannot run is said and left out). */
TEST(native_tiles) {
    setup_native();
    static const int CASES[][5] = {/* M, K, N, at, bt */
                                   {150, 200, 136, 0, 0},
                                   {136, 208, 264, 0, 1},
                                   {264, 136, 150, 1, 0},
                                   {70, 36, 90, 1, 1},
                                   {70, 44, 90, 0, 1}};
    int ran = 0;
    for (int t = 0; t < 10; t++) {
        char tile[4];
        snprintf(tile, sizeof tile, "%d", t);
        setenv("TRIDENT_VK_COOP_TILE", tile, 1);
        bool every = t == 0 || t == 6 || t == 7;
        for (int c = every ? 0 : t % 5; c < (every ? 5 : t % 5 + 1); c++) {
            int M = CASES[c][0], K = CASES[c][1], N = CASES[c][2];
            bool at = CASES[c][3], bt = CASES[c][4];
            uint16_t *a = malloc(2 * ((size_t)M * K + (size_t)K * N + (size_t)M * N)), *b = a + (size_t)M * K,
                     *o = b + (size_t)K * N;
            random_bf16(a, (size_t)M * K + (size_t)K * N);
            setenv("TRIDENT_VK_BF16", "native", 1);
            td_status st = batched_mm("1", 1, M, K, N, at, bt, false, a, b, o);
            if (st == TD_ERR_MISUSE && strstr(td_last_error(), "does not fit this device")) {
                printf("  tile %d: %s\n", t, td_last_error());
                td_clear_error();
                free(a);
                break;
            }
            ASSERT_OK(st);
            char what[64];
            snprintf(what, sizeof what, "tile %d [%d,%d]%s @ [%d,%d]%s", t, M, K, at ? "^T" : "", K, N, bt ? "^T" : "");
            int bad = check_rows(what, M, K, N, at, bt, a, b, o, 1);
            free(a);
            if (bad) TEST_FAIL_("%s: %d outputs off", what, bad);
            printf("  %s: ok\n", what);
            ran++;
        }
    }
    unsetenv("TRIDENT_VK_COOP_TILE");
    unsetenv("TRIDENT_VK_BF16");
    ASSERT(ran >= 10);
    check_clean();
}

/* What only the native path gets right, so that it is known to have run: a row [2^100, 2^40] @ a column [0, 1]
** is 2^40 exactly (bf16 products summed in f32; the scaled path stages 2^40, 2^-60 of its row's max, as 2^62:
** switch_off). Then wide ranges and inf / NaN as in f32 (wide_range's and inf_nan's inputs). */
TEST(native_special) {
    setup_native();
    uint16_t a1[2] = {bf16_of(ldexp(1, 100)), bf16_of(ldexp(1, 40))}, b1[2] = {0, bf16_of(1)}, o1[1];
    device_mm(1, 2, 1, false, false, a1, b1, o1);
    printf("  native: %g (2^%g)\n", bf16_val(o1[0]), log2(bf16_val(o1[0])));
    ASSERT(bf16_val(o1[0]) == ldexp(1, 40));
    enum { M = 70, K = 96, N = 40 };
    uint16_t a[M * K], b[K * N], o[M * N];
    for (int i = 0; i < M * K; i++) a[i] = bf16_of((i % 3 ? 1e-30 : 1e30) * srand1());
    for (int i = 0; i < K * N; i++) b[i] = bf16_of((i % 5 ? 1e-34 : 1e4) * srand1());
    device_mm(M, K, N, false, false, a, b, o);
    int bad = check_rows("native wide range", M, K, N, false, false, a, b, o, 1);
    random_bf16(a, M * K);
    for (int i = 0; i < K * N; i++) b[i] = bf16_of(0.5 + urand());
    a[3 * K + 7] = 0x7F80, b[7 * N + 9] = 0, b[11 * N + 15] = 0x7FC0;
    device_mm(M, K, N, false, false, a, b, o);
    bad += check_rows("native inf/nan", M, K, N, false, false, a, b, o, 1);
    ASSERT(bf16_val(o[3 * N + 2]) == INFINITY);
    ASSERT(isnan(bf16_val(o[3 * N + 9])) && isnan(bf16_val(o[0 * N + 15])));
    unsetenv("TRIDENT_VK_BF16");
    if (bad) TEST_FAIL_("%d outputs off", bad);
    check_clean();
}

/* TRIDENT_VK_BF16=native where the device has no native path is a one-line TD_ERR_UNAVAILABLE saying why (never
** the scaled path unawares); a value other than native or scaled is TD_ERR_MISUSE. */
TEST(native_refused) {
    setup_bf16();
    uint16_t a[4] = {0x3F80, 0x3F80, 0x3F80, 0x3F80}, o[4];
    setenv("TRIDENT_VK_BF16", "fast", 1);
    ASSERT_EQ_INT(batched_mm("1", 1, 2, 2, 2, false, false, false, a, a, o), TD_ERR_MISUSE);
    ASSERT(strstr(td_last_error(), "TRIDENT_VK_BF16=fast") != NULL);
    td_clear_error();
    if (native) TEST_SKIP("vulkan:0 has the native bf16 path (native_* run it)");
    setenv("TRIDENT_VK_BF16", "native", 1);
    ASSERT_EQ_INT(batched_mm("1", 1, 2, 2, 2, false, false, false, a, a, o), TD_ERR_UNAVAILABLE);
    printf("  %s\n", td_last_error());
    ASSERT(strstr(td_last_error(), "no native bf16 matmul") != NULL);
    td_clear_error();
    unsetenv("TRIDENT_VK_BF16");
    ASSERT_OK(batched_mm("1", 1, 2, 2, 2, false, false, false, a, a, o));
    ASSERT(o[0] == 0x4000);
    check_clean();
}

TEST_MAIN(TESTS)
