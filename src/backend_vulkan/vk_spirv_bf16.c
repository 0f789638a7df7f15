/*
** The f16 cooperative-matrix GEMM and attention kernels as bf16 ones, by retyping their SPIR-V (vk_spirv_bf16.h).
**
** Why: bf16 cooperative matrices (VK_KHR_shader_bfloat16) need SPIR-V's SPV_KHR_bfloat16, which GLSL reaches
** only through GL_EXT_bfloat16 (glslang >= 15.3; the build has 13). SPV_KHR_bfloat16 adds no instruction:
** a bf16 type is OpTypeFloat 16 with the FP encoding operand BFloat16KHR, and bf16 values may be used only
** by constant creation, memory, function, conversion and composite instructions, OpDot, the cooperative
** matrices' MulAdd and Length (their Load and Store are memory instructions), OpSelect, OpPhi,
** OpReturnValue and OpLifetimeStart/Stop: no arithmetic, no comparison. matmul_coopmat.comp uses its
** 16-bit floats only so (loads and stores, zero constants, packing runs of 8 through OpBitcast, the
** coopmat MulAdd with f32 accumulators), and its BF16_BITS variant (the words retyped) rounds the f32
** result to bf16 bits with integer arithmetic and stores them through OpBitcast, declaring no 16-bit
** accumulator matrix; so those words with every 16-bit float retyped are the bf16 kernel: bf16 x bf16
** products summed in f32, the result rounded once to bf16 (nearest even, as the tiled kernel rounds). The
** attention kernels' BF16_BITS variants (shaders/attention_coopmat.glsl) likewise: bf16 bits staged as they are,
** P and dS rounded to bf16 bits with integer arithmetic, f32 accumulators, their 16-bit shared arrays only loaded,
** stored and bitcast.
**
** The pass, over the module's instructions in order (types are declared before use):
**   1. OpTypeFloat 16 gets the encoding operand (one word longer); every type built on a retyped one
**      (vector, matrix, array, struct, pointer, function, KHR cooperative matrix) is marked, and so is
**      every result of an allowed instruction whose result type is marked.
**   2. OpConstant / OpSpecConstant of a 16-bit float: the f16 bits become the same value's bf16 bits
**      (vk_bf16_of_f16_bits).
**   3. Any other instruction that names a marked id (as result type or operand) is refused: the module
**      would not be valid bf16 SPIR-V. Debug, annotation, mode and control-flow instructions are not
**      uses. Literal operands are read as ids too, except OpExtInst's instruction number and
**      OpSpecConstantOp's opcode, so a literal that equals a marked id refuses a module wrongly (never
**      the reverse); the kernel has none.
**   4. OpCapability BFloat16TypeKHR and BFloat16CooperativeMatrixKHR go after the last capability, then
**      OpExtension "SPV_KHR_bfloat16" (capabilities, then extensions: the module layout's order). The
**      header's id bound stays: nothing added has an id.
** tests/test_spirv_bf16.c checks the words, and runs spirv-val of SPIRV-Tools >= 2025.2 on the result where it is
** installed (glslang 13's 13.1.1 does not know SPV_KHR_bfloat16): valid for Vulkan 1.3.
*/
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_spirv_bf16.h"

#define SPV_MAGIC 0x07230203u

/* opcodes (SPIR-V 1.6 unified, SPV_KHR_cooperative_matrix, SPV_NV_cooperative_matrix) */
enum {
    OP_EXT_INST = 12,
    OP_EXTENSION = 10,
    OP_CAPABILITY = 17,
    OP_TYPE_FLOAT = 22,
    OP_CONSTANT = 43,
    OP_SPEC_CONSTANT = 50,
    OP_SPEC_CONSTANT_OP = 52,
    OP_TYPE_COOPMAT_KHR = 4456,
    OP_TYPE_COOPMAT_NV = 5358,
};

/* The operands (word indices) of a type built from other types whose marks it takes: a pointer's pointee
** (word 3; word 2 is the storage class), the component or element type of a vector, matrix, array or
** cooperative matrix (word 2; the rest are counts, scope and use), every member or parameter of a struct or
** function type (words 2 ..). *from = *to = 0: not such a type. */
static void derived_operands(uint32_t op, size_t wc, size_t *from, size_t *to) {
    *from = *to = 0;
    if (op == 32)
        *from = 3, *to = 4; /* OpTypePointer */
    else if (op == 23 || op == 24 || op == 28 || op == 29 || op == OP_TYPE_COOPMAT_KHR || op == OP_TYPE_COOPMAT_NV)
        *from = 2, *to = 3; /* OpTypeVector, OpTypeMatrix, OpTypeArray, OpTypeRuntimeArray, cooperative matrices */
    else if (op == 30 || op == 33)
        *from = 2, *to = wc; /* OpTypeStruct, OpTypeFunction */
}

/* Not uses of a value: debug, annotation, mode, layout and control-flow instructions, and the types
** without component types. */
static bool is_not_a_use(uint32_t op) {
    return op == 0 || (op >= 2 && op <= 8) ||                /* OpNop, OpSourceContinued .. OpLine */
           op == 10 || op == 11 || (op >= 14 && op <= 17) || /* OpExtension .. OpCapability */
           (op >= 19 && op <= 22) || (op >= 25 && op <= 27) || op == 31 ||
           op == 39 ||                              /* types without a float (OpTypeFloat 16 is caught first) */
           (op >= 71 && op <= 75) ||                /* decorations */
           (op >= 246 && op <= 253) || op == 255 || /* control flow (not OpReturnValue) */
           op == 317 || op == 330 || op == 331 || op == 332 || op == 5632 || op == 5633; /* OpNoLine .. */
}

/* Instructions that SPV_KHR_bfloat16 lets use bf16 values (see the top comment). */
static bool is_allowed(uint32_t op) {
    return op == 1 ||                                                     /* OpUndef */
           (op >= 41 && op <= 46) || (op >= 48 && op <= 51) ||            /* constant creation (not OpSpecConstantOp) */
           (op >= 54 && op <= 57) ||                                      /* function */
           (op >= 59 && op <= 70) || (op >= 401 && op <= 403) ||          /* memory */
           op == 4457 || op == 4458 ||                                    /* OpCooperativeMatrixLoad/StoreKHR */
           (op >= 109 && op <= 115) || (op >= 117 && op <= 124) ||        /* conversion (not OpQuantizeToF16) */
           (op >= 77 && op <= 84) || op == 400 ||                         /* composite */
           op == 4459 || op == 4460 ||                                    /* OpCooperativeMatrixMulAdd/LengthKHR */
           op == 169 || op == 245 || op == 254 || op == 256 || op == 257; /* OpSelect, OpPhi, OpReturnValue .. */
}

/* Whether allowed instruction op has a result type (words 1 and 2: result type, result id): all but
** OpFunctionEnd, OpStore, OpCopyMemory(Sized), OpReturnValue, OpLifetimeStart/Stop and
** OpCooperativeMatrixStoreKHR. */
static bool has_result_type(uint32_t op) {
    return op != 56 && op != 62 && op != 63 && op != 64 && op != 254 && op != 256 && op != 257 && op != 4458;
}

/* A name for the instructions a refusal most likely names. */
static const char *op_name(uint32_t op) {
    switch (op) {
    case 12: return "OpExtInst";
    case 52: return "OpSpecConstantOp";
    case 116: return "OpQuantizeToF16";
    case 127: return "OpFNegate";
    case 129: return "OpFAdd";
    case 131: return "OpFSub";
    case 133: return "OpFMul";
    case 136: return "OpFDiv";
    case 141: return "OpFMod";
    case 142: return "OpVectorTimesScalar";
    case 148: return "OpDot";
    case 180: return "OpFOrdEqual";
    case 184: return "OpFOrdLessThan";
    case 186: return "OpFOrdGreaterThan";
    case 5358: return "OpTypeCooperativeMatrixNV";
    default: return NULL;
    }
}

uint16_t vk_bf16_of_f16_bits(uint16_t h) {
    uint16_t sign = h & 0x8000u;
    int e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) return sign | (m ? 0x7FC0u : 0x7F80u);
    /* the f16's value exactly as an f32 (11 significant bits), then rounded to 8 (nearest even) */
    float v = e ? ldexpf((float)(m | 1024), e - 25) : ldexpf((float)m, -24);
    uint32_t x;
    memcpy(&x, &v, sizeof x);
    x += 0x7FFFu + ((x >> 16) & 1u);
    return sign | (uint16_t)(x >> 16);
}

static int refuse(char *why, size_t why_n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (why && why_n) vsnprintf(why, why_n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The words of OpCapability cap. */
static size_t put_capability(uint32_t *w, uint32_t cap) {
    w[0] = 2u << 16 | OP_CAPABILITY, w[1] = cap;
    return 2;
}

/* The words of OpExtension name (nul-terminated, padded to whole words). */
static size_t put_extension(uint32_t *w, const char *name) {
    size_t len = strlen(name), words = len / 4 + 1;
    w[0] = (uint32_t)(1 + words) << 16 | OP_EXTENSION;
    memset(w + 1, 0, 4 * words);
    memcpy(w + 1, name, len);
    return 1 + words;
}

int vk_spirv_bf16(const uint32_t *in, size_t n, uint32_t **out, size_t *out_n, char *why, size_t why_n) {
    *out = NULL, *out_n = 0;
    if (n < 5 || in[0] != SPV_MAGIC) return refuse(why, why_n, "not a SPIR-V module (magic or header missing)");
    uint32_t bound = in[3];
    /* first pass: instruction boundaries, the capabilities present, the 16-bit float types */
    bool have_type = false, have_coopmat = false;
    size_t last_cap = 0, n_f16 = 0; /* the word after the last OpCapability */
    for (size_t i = 5; i < n;) {
        uint32_t wc = in[i] >> 16, op = in[i] & 0xFFFFu;
        if (wc == 0 || i + wc > n) return refuse(why, why_n, "instruction at word %zu runs past the module", i);
        if (op == OP_CAPABILITY && wc == 2) {
            have_type |= in[i + 1] == SPV_CAP_BFLOAT16_TYPE, have_coopmat |= in[i + 1] == SPV_CAP_BFLOAT16_COOPMAT;
            last_cap = i + wc;
        }
        if (op == OP_TYPE_FLOAT && wc >= 3 && in[i + 2] == 16) {
            if (wc != 3) return refuse(why, why_n, "OpTypeFloat 16 %%%u already has an FP encoding", in[i + 1]);
            n_f16++;
        }
        i += wc;
    }
    if (!last_cap) return refuse(why, why_n, "the module declares no capability");
    uint8_t *marked = calloc(bound ? bound : 1, 1);
    uint32_t *w = malloc(4 * (n + n_f16 + 4 + 8));
    if (!marked || !w) {
        free(marked);
        free(w);
        return refuse(why, why_n, "out of host memory");
    }
#define MARKED(id) ((id) < bound && marked[id])
    size_t o = 0;
    int rc = 0;
    for (size_t i = 0, from, to; i < n && rc == 0;) {
        size_t wc = i < 5 ? 5 : in[i] >> 16;
        uint32_t op = i < 5 ? 0xFFFFFFFFu : in[i] & 0xFFFFu;
        memcpy(w + o, in + i, 4 * wc);
        if (op == OP_TYPE_FLOAT && in[i + 2] == 16) { /* 1: the encoding operand */
            w[o] = 4u << 16 | OP_TYPE_FLOAT;
            w[o + 3] = SPV_FP_ENCODING_BFLOAT16;
            if (in[i + 1] < bound) marked[in[i + 1]] = 1;
            o += 4, i += wc;
            continue;
        }
        if (op == 0xFFFFFFFFu || is_not_a_use(op)) {
            /* copied as is */
        } else if (derived_operands(op, wc, &from, &to), to > from) {
            bool any = false;
            for (size_t k = from; k < to && k < wc; k++) any |= MARKED(in[i + k]);
            if (any && op == OP_TYPE_COOPMAT_NV)
                rc = refuse(why, why_n,
                            "OpTypeCooperativeMatrixNV %%%u has a 16-bit float component: bf16 cooperative matrices "
                            "are KHR only",
                            in[i + 1]);
            if (any && in[i + 1] < bound) marked[in[i + 1]] = 1;
        } else if (is_allowed(op)) {
            /* a result of a marked type is a bf16 value (result type, result id: words 1 and 2) */
            if (has_result_type(op) && wc >= 3 && MARKED(in[i + 1]) && in[i + 2] < bound) marked[in[i + 2]] = 1;
            if ((op == OP_CONSTANT || op == OP_SPEC_CONSTANT) && wc == 4 && MARKED(in[i + 1])) /* 2 */
                w[o + 3] = vk_bf16_of_f16_bits((uint16_t)in[i + 3]);
        } else { /* 3: any marked id named here is a use bf16 does not allow */
            for (size_t k = 1; k < wc && rc == 0; k++) {
                if ((op == OP_EXT_INST && k == 4) || (op == OP_SPEC_CONSTANT_OP && k == 3)) continue;
                if (!MARKED(in[i + k])) continue;
                const char *name = op_name(op);
                char num[24];
                if (!name) snprintf(num, sizeof num, "opcode %u", op), name = num;
                rc = refuse(why, why_n,
                            "%s at word %zu uses the 16-bit float %%%u: bf16 allows only conversions, memory, "
                            "composite and cooperative-matrix instructions (no arithmetic or comparison)",
                            name, i, in[i + k]);
            }
        }
        o += wc, i += wc;
        if (i == last_cap) { /* 4 */
            if (!have_type) o += put_capability(w + o, SPV_CAP_BFLOAT16_TYPE);
            if (!have_coopmat) o += put_capability(w + o, SPV_CAP_BFLOAT16_COOPMAT);
            o += put_extension(w + o, SPV_EXT_BFLOAT16);
        }
    }
#undef MARKED
    free(marked);
    if (rc != 0) {
        free(w);
        return rc;
    }
    *out = w, *out_n = o;
    return 0;
}
