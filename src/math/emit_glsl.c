/*
** GLSL of a fused region (kernel_ir.h), compiled by the Vulkan backend's
** runtime glslang through td_kernel_compile. Buffers are bound in the IR's
** order, with f16 / bf16 as raw uint16_t bits and bool as uint8_t, like the
** backend's own shaders (shaders/types.glsl), converted by trident.glsl's
** round-to-nearest-even helpers. Shapes and strides are constants of the
** source (one kernel per specialization); no push constants.
** Elementwise: a grid-stride loop over the domain, 256 invocations a group;
** where every buffer is f32, i32, f16 or bf16 and every load contiguous (or one
** element for all), each invocation moves VEC elements of a buffer as one
** uvec4 (32-bit types) or uvec2 (16-bit) through an aliased binding.
** Reduction: one group per output (grid-stride over outputs); its threads
** walk k, combine in shared memory, thread 0 stores.
*/
#include <stdlib.h>

#include "math/emit_body.h"

#define WG  256
#define VEC 4 /* elements an invocation moves as one vector */

static void helpers(FILE *f) {
    fprintf(f, "#define TD_NAN uintBitsToFloat(0x7FC00000u)\n#define TD_INF uintBitsToFloat(0x7F800000u)\n");
    /* erfc: the Chebyshev fit of Numerical Recipes' erfcc, fractional error < 1.2e-7 */
    fprintf(f, "float td_erfc(float x) {\n"
               "    float z = abs(x), t = 1.0 / (1.0 + 0.5 * z);\n"
               "    float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +\n"
               "              t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +\n"
               "              t * (-0.82215223 + t * 0.17087277)))))))));\n"
               "    return x >= 0.0 ? r : 2.0 - r;\n}\n");
    /* erf: its Taylor series near 0 (relative accuracy), 1 - erfc elsewhere */
    fprintf(f, "float td_erf(float x) {\n"
               "    float z = x * x;\n"
               "    if (abs(x) < 0.5) return 1.1283791671 * x * (1.0 - z * (1.0 / 3.0 - z * (0.1 - z * (1.0 / 42.0 - "
               "z / 216.0))));\n"
               "    return x >= 0.0 ? 1.0 - td_erfc(x) : td_erfc(-x) - 1.0;\n}\n");
    fprintf(f, "float td_gelu(float x) { return 0.5 * x * td_erfc(-x * 0.70710678118654752); }\n");
    fprintf(f, "float td_tanh(float x) { return isnan(x) ? x : tanh(clamp(x, -15.0, 15.0)); }\n");
    /* log(1 + e^x) with torch's threshold 20; log1p through the u - 1 correction */
    fprintf(f, "float td_softplus(float x) {\n"
               "    if (x > 20.0) return x;\n"
               "    float t = exp(x), u = 1.0 + t;\n"
               "    return u == 1.0 ? t : log(u) * (t / (u - 1.0));\n}\n");
    /* pow with negative bases (integer exponents) and zero bases, which GLSL leaves undefined */
    fprintf(f, "float td_pow(float a, float b) {\n"
               "    if (b == 0.0) return 1.0;\n"
               "    if (isnan(a) || isnan(b)) return a + b;\n"
               "    if (a == 0.0) return b > 0.0 ? 0.0 : TD_INF;\n"
               "    float r = exp2(b * log2(abs(a)));\n"
               "    if (a > 0.0) return r;\n"
               "    if (floor(b) != b) return TD_NAN;\n"
               "    return mod(b, 2.0) == 1.0 ? -r : r;\n}\n");
}

/* Whether every buffer has a vector alias: 4- or 2-byte elements. */
static bool vector_types(const td_kernel_ir *ir) {
    for (int b = 0; b < ir->n_bufs; b++) {
        td_dtype dt = ir->buf_dtype[b];
        if (dt != TD_F32 && dt != TD_I32 && dt != TD_F16 && dt != TD_BF16) return false;
    }
    return true;
}

static bool wide(td_dtype dt) { return dt == TD_F32 || dt == TD_I32; }

/* Buffer b's VEC elements at vector g to or from the local array l<b> (loads: the element type, f16 / bf16 as
** the uint of their bits) or s<b> (stores). */
static void vector_move(FILE *f, const td_kernel_ir *ir, int b, bool load) {
    td_dtype dt = ir->buf_dtype[b];
    const char *T = dt == TD_F32 ? "float" : dt == TD_I32 ? "int" : "uint";
    const char *as = dt == TD_F32 ? "uintBitsToFloat" : dt == TD_I32 ? "int" : "";
    const char *to = dt == TD_F32 ? "floatBitsToUint" : "uint";
    if (load && wide(dt)) {
        fprintf(f, "        uvec4 w%d = b%dv[g];\n", b, b);
        fprintf(f, "        %s l%d[%d] = %s[%d](%s(w%d.x), %s(w%d.y), %s(w%d.z), %s(w%d.w));\n", T, b, VEC, T, VEC, as,
                b, as, b, as, b, as, b);
    } else if (load) {
        fprintf(f, "        uvec2 w%d = b%dv[g];\n", b, b);
        fprintf(f, "        uint l%d[%d] = uint[%d](w%d.x & 0xFFFFu, w%d.x >> 16, w%d.y & 0xFFFFu, w%d.y >> 16);\n", b,
                VEC, VEC, b, b, b, b);
    } else if (wide(dt))
        fprintf(f, "        b%dv[g] = uvec4(%s(s%d[0]), %s(s%d[1]), %s(s%d[2]), %s(s%d[3]));\n", b, to, b, to, b, to, b,
                to, b);
    else
        fprintf(f, "        b%dv[g] = uvec2(s%d[0] | (s%d[1] << 16), s%d[2] | (s%d[3] << 16));\n", b, b, b, b, b);
}

char *td_ki_emit_glsl(const td_kernel_ir *ir, int part, uint32_t *grid, uint32_t *block) {
    if (!td_ki_emit_supported(ir, false) || (part == 1 && (ir->red_value < 0 || ir->split < 2))) return NULL;
    char *src = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&src, &size);
    if (!f) return NULL;
    bool b16 = false, b8 = false, b64 = false;
    for (int b = 0; b < ir->n_bufs; b++) {
        td_dtype dt = ir->buf_dtype[b];
        b16 |= dt == TD_F16 || dt == TD_BF16;
        b8 |= dt == TD_BOOL || dt == TD_U8;
        b64 |= dt == TD_I64;
    }
    const char *T = ir->compute == TD_F64 ? "double" : "float";
    fprintf(f, "#version 450\n");
    if (b16) fprintf(f, "#extension GL_EXT_shader_16bit_storage : require\n");
    if (b8) fprintf(f, "#extension GL_EXT_shader_8bit_storage : require\n");
    if (b64) fprintf(f, "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n");
    fprintf(f, "#define TD_NO_ARGS\n#include <trident.glsl>\n");
    fprintf(f, "layout(local_size_x = %d) in;\n", WG);
    if (part == 1) { /* the partials, then the output */
        fprintf(f, "layout(set = 0, binding = 0) readonly buffer B0 { %s b0[]; };\n", T);
        fprintf(f, "layout(set = 0, binding = 1) writeonly buffer B1 { %s b1[]; };\n",
                td_ki_type(false, ir->buf_dtype[ir->red_buf]));
    }
    for (int b = 0; part == 0 && b < ir->n_bufs; b++)
        fprintf(f, "layout(set = 0, binding = %d) %s buffer B%d { %s b%d[]; };\n", b,
                b < ir->n_loaded ? "readonly" : "writeonly", b, td_ki_type(false, ir->buf_dtype[b]), b);
    bool vec = part == 0 && ir->red_value < 0 && vector_types(ir) && td_ki_vectorizes(ir, VEC);
    for (int b = 0; vec && b < ir->n_bufs; b++) /* the vector alias of each binding */
        fprintf(f, "layout(set = 0, binding = %d) %s buffer B%dv { %s b%dv[]; };\n", b,
                b < ir->n_loaded ? "readonly" : "writeonly", b, wide(ir->buf_dtype[b]) ? "uvec4" : "uvec2", b);
    if (part == 0 && ir->red_value >= 0 && ir->split > 1)
        fprintf(f, "layout(set = 0, binding = %d) writeonly buffer B%d { %s b%d[]; };\n", ir->n_bufs, ir->n_bufs, T,
                ir->n_bufs);
    helpers(f);
    if (vec) {
        int64_t groups = (ir->n / VEC + WG - 1) / WG;
        *grid = (uint32_t)(groups < 65535 ? groups : 65535);
        fprintf(
            f,
            "void main() {\n    for (uint g = gl_GlobalInvocationID.x; g < %lldu; g += gl_NumWorkGroups.x * %du) {\n",
            (long long)(ir->n / VEC), WG);
        for (int v = 0; v < ir->n_insns; v++) /* each contiguous input: one vector load */
            if (ir->insns[v].op == TD_KI_LOAD && td_ki_contiguous(ir, &ir->insns[v]))
                vector_move(f, ir, ir->insns[v].buf, true);
        for (int s = 0; s < ir->n_stores; s++) {
            td_dtype dt = ir->buf_dtype[ir->store_buf[s]];
            fprintf(f, "        %s s%d[%d];\n",
                    dt == TD_F32   ? "float"
                    : dt == TD_I32 ? "int"
                                   : "uint",
                    ir->store_buf[s], VEC);
        }
        fprintf(f, "        for (uint e = 0; e < %du; e++) {\n            uint i = g * %du + e;\n", VEC, VEC);
        td_ki_emit_element(f, ir, false, "            ", "uint", true);
        fprintf(f, "        }\n");
        for (int s = 0; s < ir->n_stores; s++) vector_move(f, ir, ir->store_buf[s], false);
        fprintf(f, "    }\n}\n");
    } else if (ir->red_value < 0) {
        int64_t groups = (ir->n + WG - 1) / WG;
        *grid = (uint32_t)(groups < 65535 ? (groups ? groups : 1) : 65535);
        fprintf(
            f,
            "void main() {\n    for (uint i = gl_GlobalInvocationID.x; i < %lldu; i += gl_NumWorkGroups.x * %du) {\n",
            (long long)ir->n, WG);
        td_ki_emit_element(f, ir, false, "        ", "uint", false);
        fprintf(f, "    }\n}\n");
    } else {
        *grid = (uint32_t)td_ki_reduce_groups(ir, part, WG);
        td_ki_emit_combine(f, ir, false, T);
        if (!ir->columns) fprintf(f, "shared %s red[%d];\n", T, WG);
        fprintf(f, "void main() {\n");
        td_ki_emit_reduce(f, ir, false, part, "uint", WG);
    }
    *block = WG;
    if (fclose(f) != 0) {
        free(src);
        return NULL;
    }
    return src;
}
