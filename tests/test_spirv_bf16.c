/*
** The SPIR-V retyping of src/backend_vulkan/vk_spirv_bf16.c on the CPU (no device): the real f16
** cooperative-matrix GEMM (shaders/spirv/matmul_coopmat_khr_f16_bf16bits.spv, the KHR kernel's BF16_BITS variant
** as scripts/refresh-spirv writes it, the words the native bf16 GEMM retypes) and attention forward and backward
** (attention_coopmat{,_bwd}_khr_bf16bits.spv, the native bf16 attention's words) retyped word by word, constants
** re-encoded, and a module with f16 arithmetic refused.
** spirv-val 13 does not know SPV_KHR_bfloat16, so the checks read the words; spirv_val also runs a spirv-val
** that does (SPIRV-Tools >= 2025.2, TD_SPIRV_VAL: scripts/install-deps puts 2025.5 in .deps/spirv-tools) on the
** retyped kernel, and skips without one.
*/
#include "runner.h"

#include "backend_vulkan/vk_spirv_bf16.h"

#define TESTS(X)                                                                                                       \
    X(kernel)                                                                                                          \
    X(attention) X(constants) X(arithmetic_refused) X(nv_coopmat_refused) X(not_spirv) X(f16_to_bf16) X(spirv_val)

/* The words of a SPIR-V file (n set), or NULL. */
static uint32_t *read_words(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint32_t *w = len > 0 && len % 4 == 0 ? malloc((size_t)len) : NULL;
    if (w && fread(w, 1, (size_t)len, f) != (size_t)len) free(w), w = NULL;
    fclose(f);
    *n = (size_t)len / 4;
    return w;
}

/* Counts over a module's instructions: OpTypeFloat 16 with and without an encoding, the two capabilities,
** the extension; the largest id named as a result (words 1 or 2 of type and value instructions). */
typedef struct census {
    int f16_plain, f16_bf16, cap_type, cap_coopmat, ext, caps_after_ext;
} census;

static census count(const uint32_t *w, size_t n) {
    census c = {0};
    bool seen_ext = false;
    for (size_t i = 5; i < n; i += w[i] >> 16) {
        uint32_t wc = w[i] >> 16, op = w[i] & 0xFFFF;
        ASSERT(wc > 0 && i + wc <= n);
        if (op == 22 && w[i + 2] == 16) {
            if (wc == 3) c.f16_plain++;
            if (wc == 4 && w[i + 3] == SPV_FP_ENCODING_BFLOAT16) c.f16_bf16++;
        }
        if (op == 17) {
            c.cap_type += w[i + 1] == SPV_CAP_BFLOAT16_TYPE;
            c.cap_coopmat += w[i + 1] == SPV_CAP_BFLOAT16_COOPMAT;
            c.caps_after_ext += seen_ext;
        }
        if (op == 10) {
            seen_ext = true;
            c.ext += !strcmp((const char *)(w + i + 1), SPV_EXT_BFLOAT16);
        }
    }
    return c;
}

/* The committed kernels the native bf16 paths retype (shaders/spirv/) */
static const char *const KERNELS[] = {"matmul_coopmat_khr_f16_bf16bits", "attention_coopmat_khr_bf16bits",
                                      "attention_coopmat_bwd_khr_bf16bits"};

/* Kernel name retyped: its one OpTypeFloat 16 (and nothing else) changed, nothing refused, the capabilities and the
** extension added, and its bf16 cooperative matrices only A and B operands (the accumulators f32: Vulkan would
** allow a bf16 accumulator only where the driver lists bf16 x bf16 -> bf16). */
static void retype_kernel(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.spv", TD_SPIRV_DIR, name);
    size_t n, m;
    uint32_t *in = read_words(path, &n), *out;
    if (!in) TEST_FAIL_("cannot read %s", path);
    census before = count(in, n);
    ASSERT_EQ_INT(before.f16_plain, 1);
    char why[256] = "";
    int rc = vk_spirv_bf16(in, n, &out, &m, why, sizeof why);
    if (rc) fprintf(stderr, "  %s refused: %s\n", name, why);
    ASSERT_EQ_INT(rc, 0);
    census after = count(out, m);
    ASSERT_EQ_INT(after.f16_plain, 0);
    ASSERT_EQ_INT(after.f16_bf16, before.f16_plain);
    ASSERT_EQ_INT(after.cap_type, 1);
    ASSERT_EQ_INT(after.cap_coopmat, 1);
    ASSERT_EQ_INT(after.ext, 1);
    ASSERT_EQ_INT(after.caps_after_ext, 0);
    /* one word per retyped float, 2 + 2 for the capabilities, 6 for the extension; the header as it was */
    ASSERT_EQ_INT(m, n + (size_t)before.f16_plain + 4 + 6);
    for (int i = 0; i < 5; i++) ASSERT_EQ_INT(out[i], in[i]);
    /* every other instruction is copied: the same opcodes in the same order, and the ids within the bound */
    size_t i = 5, j = 5;
    while (i < n && j < m) {
        uint32_t oj = out[j] & 0xFFFF;
        if ((oj == 17 && (out[j + 1] == SPV_CAP_BFLOAT16_TYPE || out[j + 1] == SPV_CAP_BFLOAT16_COOPMAT)) ||
            (oj == 10 && !strcmp((const char *)(out + j + 1), SPV_EXT_BFLOAT16))) {
            j += out[j] >> 16;
            continue;
        }
        ASSERT_EQ_INT(oj, in[i] & 0xFFFF);
        if (oj == 22 && in[i + 2] == 16) {
            ASSERT_EQ_INT(out[j + 1], in[i + 1]);
        } else {
            ASSERT_EQ_INT(out[j] >> 16, in[i] >> 16);
            /* constants of the retyped float: zeros only in the kernels, whose bits do not change */
            ASSERT(memcmp(out + j, in + i, 4 * (in[i] >> 16)) == 0);
        }
        i += in[i] >> 16, j += out[j] >> 16;
    }
    ASSERT(i == n && j == m);
    /* cooperative matrices of bf16: only uses A and B (the accumulators f32), so Vulkan needs no bf16 x bf16 -> bf16 */
    int bf16_mats = 0, f32_acc = 0;
    for (size_t k = 5; k < m; k += out[k] >> 16) {
        if ((out[k] & 0xFFFF) != 4456) continue; /* OpTypeCooperativeMatrixKHR: id, component, scope, rows, cols, use */
        bool bf16 = false, f32 = false;
        for (size_t q = 5; q < m; q += out[q] >> 16)
            if ((out[q] & 0xFFFF) == 22 && out[q + 1] == out[k + 2]) {
                bf16 |= (out[q] >> 16) == 4;
                f32 |= (out[q] >> 16) == 3 && out[q + 2] == 32;
            }
        uint32_t use = 99;
        for (size_t q = 5; q < m; q += out[q] >> 16)
            if ((out[q] & 0xFFFF) == 43 && out[q + 2] == out[k + 6]) use = out[q + 3];
        if (bf16) {
            bf16_mats++;
            ASSERT(use == 0 || use == 1); /* MatrixAKHR, MatrixBKHR */
        } else {
            ASSERT(f32);
            ASSERT_EQ_INT(use, 2); /* MatrixAccumulatorKHR */
            f32_acc++;
        }
    }
    ASSERT_EQ_INT(bf16_mats, 2);
    ASSERT(f32_acc >= 1);
    fprintf(stderr, "  %s: %zu words retyped, 2 bf16 operand and %d f32 accumulator matrix types\n", name, n, f32_acc);
    free(in);
    free(out);
}

TEST(kernel) { retype_kernel(KERNELS[0]); }

/* the native bf16 attention's forward and backward (shaders/attention_coopmat.glsl's BF16_BITS) */
TEST(attention) {
    retype_kernel(KERNELS[1]);
    retype_kernel(KERNELS[2]);
}

/* A small module by hand: capabilities, OpTypeFloat 16 and 32, an f16 constant of value v and a function
** body that uses it with extra (an instruction, or 0: none). Returns the word count. */
static size_t module(uint32_t *w, uint16_t v, const uint32_t *extra, size_t n_extra) {
    size_t o = 0;
    const uint32_t head[] = {
        0x07230203u,
        0x00010500u,
        0,
        20,
        0,
        2u << 16 | 17,
        1, /* OpCapability Shader */
        2u << 16 | 17,
        9, /* OpCapability Float16 */
        3u << 16 | 14,
        0,
        1, /* OpMemoryModel Logical GLSL450 */
        5u << 16 | 15,
        5,
        4,
        0x6E69616D,
        0, /* OpEntryPoint GLCompute %4 "main" */
        6u << 16 | 16,
        4,
        17,
        1,
        1,
        1 /* OpExecutionMode %4 LocalSize 1 1 1 */
    };
    memcpy(w, head, sizeof head), o = sizeof head / 4;
    const uint32_t types[] = {
        2u << 16 | 19,  2,                      /* %2 = OpTypeVoid */
        3u << 16 | 33,  3,  2,                  /* %3 = OpTypeFunction %2 */
        3u << 16 | 22,  6,  16,                 /* %6 = OpTypeFloat 16 */
        3u << 16 | 22,  7,  32,                 /* %7 = OpTypeFloat 32 */
        4u << 16 | 43,  6,  8,  v,              /* %8 = OpConstant %6 v */
        4u << 16 | 43,  7,  9,  0x3F800000u,    /* %9 = OpConstant %7 1.0 */
        4u << 16 | 23,  10, 6,  2,              /* %10 = OpTypeVector %6 2 */
        5u << 16 | 54,  2,  4,  0,           3, /* %4 = OpFunction %2 None %3 */
        2u << 16 | 248, 11,                     /* %11 = OpLabel */
        4u << 16 | 115, 7,  12, 8,              /* %12 = OpFConvert %7 %8 */
        5u << 16 | 80,  10, 13, 8,           8  /* %13 = OpCompositeConstruct %10 %8 %8 */
    };
    memcpy(w + o, types, sizeof types), o += sizeof types / 4;
    if (n_extra) /* extra may be NULL */
        memcpy(w + o, extra, 4 * n_extra), o += n_extra;
    const uint32_t tail[] = {1u << 16 | 253, 1u << 16 | 56}; /* OpReturn, OpFunctionEnd */
    memcpy(w + o, tail, sizeof tail), o += sizeof tail / 4;
    return o;
}

/* The word of the constant %8 in a retyped module. */
static uint32_t constant8(const uint32_t *w, size_t n) {
    for (size_t i = 5; i < n; i += w[i] >> 16)
        if ((w[i] & 0xFFFF) == 43 && w[i + 2] == 8) return w[i + 3];
    return 0xFFFFFFFFu;
}

TEST(constants) {
    /* f16 bits -> bf16 bits of the same value: 1.0, -2.0, 1/3 (0x3555 = 0.333251953125, rounded up to
    ** 0x3EAB), 65504 (0x7BFF -> 0x4780 after rounding 0x477FE000 up), the smallest subnormal 2^-24, inf */
    static const uint16_t CASES[][2] = {{0x3C00, 0x3F80}, {0xC000, 0xC000}, {0x3555, 0x3EAB},
                                        {0x7BFF, 0x4780}, {0x0001, 0x3380}, {0x7C00, 0x7F80}};
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        uint32_t w[128], *out;
        size_t n = module(w, CASES[k][0], NULL, 0), m;
        char why[256];
        ASSERT_EQ_INT(vk_spirv_bf16(w, n, &out, &m, why, sizeof why), 0);
        ASSERT_EQ_INT(constant8(out, m), CASES[k][1]);
        census c = count(out, m);
        ASSERT_EQ_INT(c.f16_bf16, 1);
        ASSERT_EQ_INT(c.f16_plain, 0);
        free(out);
    }
}

TEST(arithmetic_refused) {
    const uint32_t fadd[] = {5u << 16 | 129, 6, 14, 8, 8};        /* %14 = OpFAdd %6 %8 %8 */
    const uint32_t fmul_vec[] = {5u << 16 | 133, 10, 14, 13, 13}; /* %14 = OpFMul %10 %13 %13 */
    const uint32_t *bad[2] = {fadd, fmul_vec};
    const char *want[2] = {"OpFAdd", "OpFMul"};
    for (int k = 0; k < 2; k++) {
        uint32_t w[128], *out = (uint32_t *)1;
        size_t n = module(w, 0x3C00, bad[k], 5), m = 1;
        char why[256] = "";
        ASSERT_EQ_INT(vk_spirv_bf16(w, n, &out, &m, why, sizeof why), -1);
        ASSERT(out == NULL && m == 0);
        fprintf(stderr, "  refused as it should: %s\n", why);
        ASSERT(strstr(why, want[k]) != NULL);
        ASSERT(strstr(why, "no arithmetic") != NULL);
    }
}

TEST(nv_coopmat_refused) {
    uint32_t w[128], *out;
    const uint32_t nv[] = {6u << 16 | 5358, 15, 6, 16, 16, 16}; /* OpTypeCooperativeMatrixNV %6 ... */
    size_t n = module(w, 0, NULL, 0), m;
    /* the type goes before the function: after %10 (OpTypeVector, ending at word 46) */
    memmove(w + 46 + 6, w + 46, 4 * (n - 46));
    memcpy(w + 46, nv, sizeof nv);
    n += 6;
    char why[256] = "";
    ASSERT_EQ_INT(vk_spirv_bf16(w, n, &out, &m, why, sizeof why), -1);
    ASSERT(strstr(why, "KHR only") != NULL);
}

TEST(not_spirv) {
    uint32_t w[128], *out;
    size_t n = module(w, 0, NULL, 0), m;
    char why[256] = "";
    w[0] = 0x12345678u;
    ASSERT_EQ_INT(vk_spirv_bf16(w, n, &out, &m, why, sizeof why), -1);
    ASSERT(strstr(why, "not a SPIR-V module") != NULL);
    w[0] = 0x07230203u;
    w[n - 1] = 2u << 16 | 56; /* OpFunctionEnd two words long: past the end */
    ASSERT_EQ_INT(vk_spirv_bf16(w, n, &out, &m, why, sizeof why), -1);
    ASSERT(strstr(why, "runs past") != NULL);
    w[0] = 0x07230203u, n = module(w, 0, NULL, 0);
    w[28] = 4u << 16 | 22; /* %6 = OpTypeFloat 16 with an encoding already (the next word taken for it) */
    ASSERT_EQ_INT(vk_spirv_bf16(w, n, &out, &m, why, sizeof why), -1);
    ASSERT(strstr(why, "already has an FP encoding") != NULL);
}

TEST(f16_to_bf16) {
    /* every finite f16 rounds to the bf16 nearest its value (ties to even), checked against the f32 value */
    for (uint32_t h = 0; h < 0x10000; h++) {
        int e = (h >> 10) & 31, mant = h & 1023;
        uint16_t b = vk_bf16_of_f16_bits((uint16_t)h);
        if (e == 31) {
            ASSERT_EQ_INT(b & 0x7F80, 0x7F80);
            ASSERT_EQ_INT(!!(b & 0x7F), !!mant);
            continue;
        }
        double v = (e ? ldexp(mant | 1024, e - 25) : ldexp(mant, -24)) * (h & 0x8000 ? -1 : 1);
        uint32_t x = (uint32_t)b << 16;
        float f;
        memcpy(&f, &x, sizeof f);
        double ulp = v == 0 ? 0 : ldexp(1.0, (int)floor(log2(fabs(v))) - 7);
        ASSERT(fabs(f - v) <= ulp / 2);
        ASSERT_EQ_INT(b >> 15, h >> 15);
    }
}

/* Whether TD_SPIRV_VAL is a spirv-val of SPIRV-Tools 2025.2 or later (it prints "SPIRV-Tools v<year>.<n>"). */
static bool spirv_val_knows_bf16(void) {
    if (access(TD_SPIRV_VAL, X_OK) != 0) return false;
    FILE *p = popen("'" TD_SPIRV_VAL "' --version", "r");
    char line[256] = "";
    int year = 0, n = 0;
    if (p) {
        if (!fgets(line, sizeof line, p)) line[0] = 0;
        pclose(p);
    }
    const char *v = strstr(line, "SPIRV-Tools v");
    if (v) sscanf(v + 13, "%d.%d", &year, &n);
    return year > 2025 || (year == 2025 && n >= 2);
}

/* spirv-val --target-env vulkan1.3 on w[n] (written to a temporary file); its exit status. */
static int spirv_val(const uint32_t *w, size_t n) {
    char path[] = "/tmp/test_spirv_bf16_XXXXXX", cmd[512];
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    ASSERT(write(fd, w, 4 * n) == (ssize_t)(4 * n));
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s' --target-env vulkan1.3 %s", TD_SPIRV_VAL, path);
    int rc = system(cmd);
    unlink(path);
    return rc;
}

/* The retyped kernels are valid SPIR-V for Vulkan 1.3 by a validator that knows SPV_KHR_bfloat16's rules, and that
** validator does enforce them: the small module retyped, with its f32 conversion of the bf16 constant turned into
** a bf16 OpFNegate, is refused. */
TEST(spirv_val) {
    if (!spirv_val_knows_bf16())
        TEST_SKIP("no spirv-val of SPIRV-Tools >= 2025.2 at " TD_SPIRV_VAL " (scripts/install-deps puts one in "
                  ".deps/spirv-tools; CMake's TRIDENT_SPIRV_VAL names another)");
    size_t n, m;
    uint32_t *out;
    char why[256] = "";
    for (size_t k = 0; k < sizeof KERNELS / sizeof *KERNELS; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.spv", TD_SPIRV_DIR, KERNELS[k]);
        uint32_t *in = read_words(path, &n);
        ASSERT(in != NULL);
        ASSERT_EQ_INT(vk_spirv_bf16(in, n, &out, &m, why, sizeof why), 0);
        ASSERT_EQ_INT(spirv_val(in, n), 0);
        ASSERT_EQ_INT(spirv_val(out, m), 0);
        fprintf(stderr, "  %s: valid before and after\n", KERNELS[k]);
        free(in);
        free(out);
    }
    uint32_t w[128];
    n = module(w, 0x3C00, NULL, 0);
    ASSERT_EQ_INT(vk_spirv_bf16(w, n, &out, &m, why, sizeof why), 0);
    ASSERT_EQ_INT(spirv_val(out, m), 0);
    for (size_t i = 5; i < m; i += out[i] >> 16)
        if (out[i] == (4u << 16 | 115) && out[i + 2] == 12) out[i] = 4u << 16 | 127, out[i + 1] = 6;
    fprintf(stderr, "  a bf16 OpFNegate, which spirv-val must refuse:\n");
    ASSERT(spirv_val(out, m) != 0);
    free(out);
}

TEST_MAIN(TESTS)
