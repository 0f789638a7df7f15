/* The fused attention on vulkan:0's tensor cores, forward (shaders/attention_coopmat.comp) and backward
** (shaders/attention_coopmat_bwd.comp): f16 and bf16, no mask or dropout, head dim 64 or 128, causal or not,
** against the float64 CPU attention of the same rounded inputs: out, and dq, dk, dv through the backward (which
** reads the forward's out and lse), for lengths that are and are not multiples of the 64- or 32-row blocks.
** Each case runs under TRIDENT_VK_ATTN=coopmat (skipped with the reason on a device without cooperative
** matrices), TRIDENT_VK_ATTN=emulated (the same two kernels with the cooperative-matrix operations emulated,
** any device with f16 arithmetic, e.g. lavapipe: their tiling, masking and indexing) and TRIDENT_VK_ATTN=scalar
** (attention.comp, any device), and the tensor-core and scalar paths must agree. A forced coopmat or emulated
** path that the op cannot take is an error, not a fallback, so these cases run the kernels they name.
** The range cases scale q, k, v and dout per head by powers of ten from 1e-6 to 1e6, or 1e-37 to 3e37 (bf16 has
** f32's exponent range; f16's ends at 65504 and its normals at 6e-5), scores staying O(1), and are measured per
** head. The wide case spans 1e-5 .. 1e5 within each head of v and dout (32-row blocks alternating, beyond the 2^28
** that a bf16 head's one power of two stages exactly): measured per head and per row, both asserted. Per row, the
** tensor-core path's rows of only tiny values keep f16's subnormal precision of v and dout (attention_coopmat.glsl:
** out ~2e-2 off, dq up to ~0.3 where its row cancels; seeds 1 .. 5 and 12345 on lavapipe), so the rows' limit is
** wide_tol; a row lost (dS flushed to zero, as a fixed per-head dS scale did) is off by 1.
** native, native_emulated: the bf16 cases under TRIDENT_VK_BF16=native on the native bf16 kernels (the f16 ones'
** BF16_BITS variants retyped to bf16; skipped with the reason where vulkan:0 lacks bf16 cooperative matrices, e.g.
** lavapipe) and on their emulated twins (any device with f16 arithmetic). No scaling, so no subnormal floor: the
** wide case's rows within wide_tol_native (seeds 1 .. 5 and 12345 emulated on lavapipe: out 5e-3, dq 4e-2, dk 3e-2
** (dS rounded to bf16's 8 bits), dv 6e-3; the scaled kernels: 2e-2, 0.3, 1e-2, 4e-3). native_refused: the forced
** native path where the device lacks it (TRIDENT_VK_BF16=native, or attention's own TRIDENT_VK_ATTN_BF16=native) is a
** one-line error. */
#include <math.h>
#include <string.h>

#include "test_util.h"
#include "trident/backend.h"

#define TESTS(X) X(coopmat) X(emulated) X(scalar) X(paths_agree) X(native) X(native_emulated) X(native_refused)

typedef struct vk_cfg {
    const char *name;
    int64_t b, h, l, s, e;
    bool causal;
    td_dtype dt;
    const double (*mag)[4]; /* range cases: q, k, v, dout of head h times mag[h % 3] */
    bool wide;              /* rows r of v and dout times 1e-5 or 1e5 as r / 32 is even or odd */
} vk_cfg;

/* huge q with tiny k and the reverse (and tiny v, dout with huge dout, v); a head with only tiny v, dout */
static const double mixed[3][4] = {{1e6, 1e-6, 1e-6, 1e6}, {1e-6, 1e6, 1e6, 1e-6}, {1e-4, 1e4, 1e-6, 1e-6}};
static const double mixed2[3][4] = {{1e4, 1e-4, 1e6, 1e6}, {1e-6, 1e6, 1e-6, 1e6}, {1e6, 1e-6, 1e6, 1e-6}};
/* far outside f16's range (shifts of -85 and 113), with q / sqrt(E), every product and every result a normal f32:
** NVIDIA's f32 flushes subnormals, so 1e-37 (q / sqrt(E) subnormal) and 1e-33 (dq's true values below f32's range)
** failed every path there, the scalar one too (H100, 2026-11-28); the third head's reference dS ~ 1e-34 */
static const double extreme[3][4] = {{1e30, 1e-30, 1e-25, 1e25}, {1e-30, 1e30, 1e25, 1e-25}, {1, 1, 1e-17, 1e-17}};

static const vk_cfg cfgs[] = {
    {"f16 E 64, L = S = 64", 1, 2, 64, 64, 64, false, TD_F16, NULL, false},
    {"f16 E 64 causal, L = S = 100", 2, 3, 100, 100, 64, true, TD_F16, NULL, false},
    {"f16 E 64, L 37 S 45", 1, 3, 37, 45, 64, false, TD_F16, NULL, false},
    {"f16 E 64 causal, L = S = 256", 1, 2, 256, 256, 64, true, TD_F16, NULL, false},
    {"f16 E 128 causal, L = S = 130", 1, 2, 130, 130, 128, true, TD_F16, NULL, false},
    {"f16 E 128, L 70 S 33", 2, 1, 70, 33, 128, false, TD_F16, NULL, false},
    {"bf16 E 64 causal, L = S = 100", 2, 3, 100, 100, 64, true, TD_BF16, NULL, false},
    {"bf16 E 64, L 37 S 45", 1, 3, 37, 45, 64, false, TD_BF16, NULL, false},
    {"bf16 E 128 causal, L = S = 130", 1, 2, 130, 130, 128, true, TD_BF16, NULL, false},
    {"bf16 E 128, L 70 S 33", 2, 1, 70, 33, 128, false, TD_BF16, NULL, false},
    {"bf16 E 64 causal, L = S = 100, range", 2, 3, 100, 100, 64, true, TD_BF16, mixed, false},
    {"bf16 E 128, L 70 S 33, range", 1, 3, 70, 33, 128, false, TD_BF16, mixed2, false},
    {"bf16 E 128 causal, L = S = 70, extreme", 1, 3, 70, 70, 128, true, TD_BF16, extreme, false},
    {"bf16 E 64 causal, L = S = 100, wide", 1, 2, 100, 100, 64, true, TD_BF16, NULL, true},
};

/* the wide cases' factor of row r */
static double wide(const vk_cfg *c, int64_t r) { return !c->wide ? 1 : r / 32 % 2 ? 1e5 : 1e-5; }
/* the wide cases' limits per row of out, dq, dk, dv: the scaled kernels' and (native bf16, no subnormal floor) the
** native ones' */
static const double wide_tol[4] = {5e-2, 0.5, 5e-2, 5e-2};
static const double wide_tol_native[4] = {1.5e-2, 0.1, 5e-2, 1.5e-2};

static const td_device VK0 = {TD_DEVICE_VULKAN, 0};

/* why vulkan:0 cannot run the coopmat path ("" when it can) */
static const char *no_coopmat(void) {
    static char why[300];
    const td_backend *be = td_backend_for(TD_DEVICE_VULKAN);
    td_device_info info;
    if (!be || be->iface->device_info(0, &info) != TD_OK) return "no vulkan:0";
    if (!strstr(info.features, "coopmat=none")) return "";
    snprintf(why, sizeof why, "no cooperative matrix on %s", info.name);
    return why;
}

/* why vulkan:0 cannot run the emulated kernels ("" when it can) */
static const char *no_f16(void) {
    static char why[300];
    const td_backend *be = td_backend_for(TD_DEVICE_VULKAN);
    td_device_info info;
    if (!be || be->iface->device_info(0, &info) != TD_OK) return "no vulkan:0";
    if (strstr(info.features, "fp16=1")) return "";
    snprintf(why, sizeof why, "no f16 arithmetic on %s", info.name);
    return why;
}

/* the largest over the [b, h] blocks of blk elements of |a - b| / max |b| (the error relative to each head's own
** scale) */
static double head_rel_err(td_tensor *a, td_tensor *b, int64_t blk) {
    double *x = test_host(a), *y = test_host(b), worst = 0;
    int64_t n = td_numel(b);
    ASSERT_EQ_INT(td_numel(a), n);
    for (int64_t i0 = 0; i0 < n; i0 += blk) {
        double err = 0, big = 0;
        for (int64_t i = i0; i < i0 + blk; i++) {
            double d = fabs(x[i] - y[i]);
            err = d > err || d != d ? d : err;
            big = fabs(y[i]) > big ? fabs(y[i]) : big;
        }
        double e = big > 0 ? err / big : err;
        worst = e > worst || e != e ? e : worst;
    }
    free(x), free(y);
    return worst;
}

static td_tensor *leaf(td_tensor *host, td_dtype dt, td_device dev) {
    td_tensor *t = ASSERT_TENSOR(td_detach(td_to(td_cast(host, dt), dev)));
    ASSERT_OK(td_set_requires_grad(t, true));
    return t;
}

/* c on vulkan:0 in its dtype under TRIDENT_VK_ATTN=path: out and the gradients within tol (f16; bf16's results
** are rounded to 8 bits, 2^-9 relative, so 4 tol there) of the f64 CPU attention of the same rounded inputs; the
** output into got (when not NULL). */
static void check(const vk_cfg *c, const char *path, double tol, td_tensor **got) {
    if (c->dt == TD_BF16) tol *= 4;
    ASSERT(setenv("TRIDENT_VK_ATTN", path, 1) == 0);
    test_seed();
    int64_t sq[4] = {c->b, c->h, c->l, c->e}, sk[4] = {c->b, c->h, c->s, c->e};
    const int64_t *shapes[3] = {sq, sk, sk};
    td_tensor *host[3];
    for (int i = 0; i < 3; i++) {
        int64_t n = shapes[i][0] * shapes[i][1] * shapes[i][2] * shapes[i][3];
        double *x = malloc((size_t)n * sizeof *x);
        for (int64_t j = 0; j < n; j++) /* peaked rows */
            x[j] = test_uniform(i == 0 ? -3 : -1, i == 0 ? 3 : 1) *
                   (c->mag ? c->mag[j / (shapes[i][2] * c->e) % c->h % 3][i] : 1) *
                   (i == 2 ? wide(c, j / c->e % shapes[i][2]) : 1);
        host[i] = td_cast(test_tensor_f64(x, 4, shapes[i], c->dt), TD_F64);
        free(x);
    }
    td_tensor *rx[3] = {leaf(host[0], TD_F64, TD_CPU), leaf(host[1], TD_F64, TD_CPU), leaf(host[2], TD_F64, TD_CPU)};
    td_tensor *ry = ASSERT_TENSOR(td_scaled_dot_product_attention(rx[0], rx[1], rx[2], NULL, 0, c->causal, NAN));
    int64_t no = td_numel(ry);
    double *dyv = malloc((size_t)no * sizeof *dyv);
    for (int64_t j = 0; j < no; j++)
        dyv[j] =
            test_uniform(-1, 1) * (c->mag ? c->mag[j / (c->l * c->e) % c->h % 3][3] : 1) * wide(c, j / c->e % c->l);
    td_tensor *rdy = td_cast(test_tensor_f64(dyv, 4, td_shape(ry), c->dt), TD_F64), *rg[3], *g[3];
    free(dyv);
    ASSERT_OK(td_grad(1, &ry, &rdy, 3, rx, rg, false, false, false));
    td_tensor *x[3] = {leaf(host[0], c->dt, VK0), leaf(host[1], c->dt, VK0), leaf(host[2], c->dt, VK0)};
    td_tensor *y = ASSERT_TENSOR(td_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0, c->causal, NAN));
    td_tensor *dy = ASSERT_TENSOR(td_to(td_cast(rdy, c->dt), VK0));
    ASSERT_OK(td_grad(1, &y, &dy, 3, x, g, false, false, false));
    double e[4], er[4];
    for (int i = 0; i < 4; i++) {
        td_tensor *a = i ? g[i - 1] : y, *r = i ? rg[i - 1] : ry;
        e[i] = c->mag || c->wide ? head_rel_err(a, r, td_numel(r) / (c->b * c->h)) : test_rel_err(a, r);
        er[i] = c->wide ? head_rel_err(a, r, c->e) : 0;
    }
    fprintf(stderr, "    %-8s %-34s out %.1e dq %.1e dk %.1e dv %.1e\n", path, c->name, e[0], e[1], e[2], e[3]);
    if (c->wide)
        fprintf(stderr, "    %-8s %-34s per row: out %.1e dq %.1e dk %.1e dv %.1e\n", path, c->name, er[0], er[1],
                er[2], er[3]);
    static const char *what[4] = {"out", "dq", "dk", "dv"};
    for (int i = 0; i < 4; i++)
        if (!(e[i] <= tol)) TEST_FAIL_("%s %s: %s off by %.3g (limit %.3g)", path, c->name, what[i], e[i], tol);
    const char *bf = getenv("TRIDENT_VK_BF16");
    const double *wt = c->dt == TD_BF16 && bf && !strcmp(bf, "native") ? wide_tol_native : wide_tol;
    for (int i = 0; i < 4 && c->wide; i++)
        if (!(er[i] <= wt[i]))
            TEST_FAIL_("%s %s: a row of %s off by %.3g (limit %.3g)", path, c->name, what[i], er[i], wt[i]);
    if (got) *got = ASSERT_TENSOR(td_to(y, TD_CPU));
    unsetenv("TRIDENT_VK_ATTN");
}

static void need_vulkan(void) {
    if (!td_device_available(VK0)) TEST_SKIP("no vulkan:0: %s", td_backend_unavailable_reason(TD_DEVICE_VULKAN));
}

/* f16 or bf16 inputs and outputs, f32 accumulation; the coopmat path also rounds P and dS to f16 (bf16: the scaled
** kernels, TRIDENT_VK_BF16=scaled, also where the device runs bf16 natively) */
TEST(coopmat) {
    need_vulkan();
    const char *why = no_coopmat();
    if (*why) TEST_SKIP("%s", why);
    ASSERT(setenv("TRIDENT_VK_BF16", "scaled", 1) == 0);
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) check(&cfgs[i], "coopmat", 4e-3, NULL);
    unsetenv("TRIDENT_VK_BF16");
}

/* the same kernels, emulated: the same results up to the summation order of the fragments' products */
TEST(emulated) {
    need_vulkan();
    const char *why = no_f16();
    if (*why) TEST_SKIP("%s", why);
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) check(&cfgs[i], "emulated", 4e-3, NULL);
}

TEST(scalar) {
    need_vulkan();
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) check(&cfgs[i], "scalar", 2e-3, NULL);
}

/* the tensor-core path's outputs (emulated on a device without cooperative matrices) and the scalar one's within two
** roundings of each other */
TEST(paths_agree) {
    need_vulkan();
    const char *path = *no_coopmat() ? "emulated" : "coopmat", *why = *no_coopmat() ? no_f16() : "";
    if (*why) TEST_SKIP("%s", why);
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) {
        td_tensor *a, *b;
        check(&cfgs[i], path, 4e-3, &a);
        check(&cfgs[i], "scalar", 2e-3, &b);
        double e = test_rel_err(a, b);
        if (!(e <= (cfgs[i].dt == TD_BF16 ? 8e-3 : 2e-3)))
            TEST_FAIL_("%s: %s and scalar outputs differ by %.3g", cfgs[i].name, path, e);
    }
}

/* why vulkan:0 cannot run bf16 attention natively ("" when it can): its features' bf16_native (vk_bf16_native) */
static const char *no_native(void) {
    static char why[300];
    const td_backend *be = td_backend_for(TD_DEVICE_VULKAN);
    td_device_info info;
    if (!be || be->iface->device_info(0, &info) != TD_OK) return "no vulkan:0";
    if (strstr(info.features, "bf16_native=1")) return "";
    snprintf(why, sizeof why,
             "%s has no native bf16 (features bf16_native=0: no VK_KHR_shader_bfloat16 with bf16 x bf16 -> f32 "
             "cooperative matrices at the f16 shape)",
             info.name);
    return why;
}

/* the bf16 cases under TRIDENT_VK_BF16=native on path: P and dS rounded to bf16 (8 bits to f16's 11) but no
** subnormal floor, so the same limits per head and tighter ones per row of the wide case (wide_tol_native) */
static void native_cases(const char *path) {
    ASSERT(setenv("TRIDENT_VK_BF16", "native", 1) == 0);
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++)
        if (cfgs[i].dt == TD_BF16) check(&cfgs[i], path, 4e-3, NULL);
    unsetenv("TRIDENT_VK_BF16");
}

/* the native bf16 kernels (the f16 ones' BF16_BITS variants retyped to bf16) on the device's cooperative matrices */
TEST(native) {
    need_vulkan();
    const char *why = no_native();
    if (*why) TEST_SKIP("%s", why);
    native_cases("coopmat");
}

/* the native kernels' emulated twins (unretyped: bf16 bits in f16 arrays, read as bf16): their tiling, masking,
** indexing and bf16 rounding on any device with f16 arithmetic */
TEST(native_emulated) {
    need_vulkan();
    const char *why = no_f16();
    if (*why) TEST_SKIP("%s", why);
    native_cases("emulated");
}

/* TRIDENT_VK_BF16=native or TRIDENT_VK_ATTN_BF16=native where the device lacks the native path: bf16 attention is a
** one-line error, not the scaled kernels unawares; unforced it runs */
TEST(native_refused) {
    need_vulkan();
    if (!*no_native()) TEST_SKIP("vulkan:0 has the native bf16 path");
    int64_t sh[4] = {1, 1, 16, 64};
    double x[16 * 64];
    for (int i = 0; i < 16 * 64; i++) x[i] = (i % 7) * 0.25 - 0.75;
    td_tensor *q = ASSERT_TENSOR(td_to(test_tensor_f64(x, 4, sh, TD_BF16), VK0));
    static const char *const vars[2] = {"TRIDENT_VK_BF16", "TRIDENT_VK_ATTN_BF16"}; /* the GEMM's, attention's own */
    for (int k = 0; k < 2; k++) {
        ASSERT(setenv(vars[k], "native", 1) == 0);
        td_tensor *y = td_scaled_dot_product_attention(q, q, q, NULL, 0, true, NAN);
        unsetenv(vars[k]);
        ASSERT(y == NULL);
        fprintf(stderr, "    refused as it should: %s\n", td_last_error());
        ASSERT(strstr(td_last_error(), vars[k]) != NULL && strstr(td_last_error(), "no native bf16 attention") != NULL);
        td_clear_error();
    }
    td_tensor *y = ASSERT_TENSOR(td_scaled_dot_product_attention(q, q, q, NULL, 0, true, NAN)); /* unforced: scaled */
    td_release(y);
    td_release(q);
}

TEST_MAIN(TESTS)
