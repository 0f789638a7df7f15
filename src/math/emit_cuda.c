/*
** CUDA C of a fused region (kernel_ir.h), compiled through NVRTC by the CUDA
** plugin (td_kernel_compile; cached by source hash in memory and on disk).
** The kernel td_math_kernel takes one pointer per buffer in the IR's order
** (f16 / bf16 as unsigned short bits, bool as unsigned char, converted by
** trident.cuh's round-to-nearest-even helpers); shapes and strides are
** constants of the source (one kernel per specialization), so a launch passes
** no other data. Indices are 32-bit when the domain allows.
** Elementwise: a grid-stride loop over the domain, 256 threads a block; where
** every load is contiguous, 4 elements a thread moved as 16-byte (f32), 8-byte
** (f16/bf16) or wider words.
** Reduction: one block per output (grid-stride over outputs); its threads
** walk k, combine in shared memory, thread 0 stores.
*/
#include <stdlib.h>

#include "math/emit_body.h"

#define BLOCK 256
#define VEC   4 /* elements a thread moves as one vector */

static void helpers(FILE *f, const char *T) {
    fprintf(f, "#define TD_NAN __int_as_float(0x7FC00000)\n#define TD_INF __int_as_float(0x7F800000)\n");
    fprintf(f, "__device__ inline %s td_erf(%s x) { return erf(x); }\n", T, T);
    fprintf(f, "__device__ inline %s td_gelu(%s x) { return %s(0.5) * x * erfc(-x * %s(0.70710678118654752)); }\n", T,
            T, T, T);
    fprintf(f, "__device__ inline %s td_tanh(%s x) { return tanh(x); }\n", T, T);
    fprintf(f, "__device__ inline %s td_softplus(%s x) { return x > %s(20) ? x : log1p(exp(x)); }\n", T, T, T);
    fprintf(f, "__device__ inline %s td_pow(%s a, %s b) { return pow(a, b); }\n", T, T, T);
}

/* Buffer b's VEC elements at group g to or from the local array l<b> / s<b>, as 16-byte (or narrower) words. */
static void vector_move(FILE *f, const td_kernel_ir *ir, int b, bool load) {
    size_t bytes = VEC * td_dtype_size(ir->buf_dtype[b]);
    const char *w = bytes >= 16 ? "uint4" : bytes == 8 ? "uint2" : "unsigned";
    size_t words = bytes >= 16 ? bytes / 16 : 1;
    if (load) fprintf(f, "        __align__(16) %s l%d[%d];\n", td_ki_type(true, ir->buf_dtype[b]), b, VEC);
    for (size_t k = 0; k < words; k++)
        if (load)
            fprintf(f, "        ((%s *)l%d)[%zu] = ((const %s *)b%d)[g * %zuu + %zu];\n", w, b, k, w, b, words, k);
        else
            fprintf(f, "        ((%s *)b%d)[g * %zuu + %zu] = ((const %s *)s%d)[%zu];\n", w, b, words, k, w, b, k);
}

char *td_ki_emit_cuda(const td_kernel_ir *ir, int part, uint32_t *grid, uint32_t *block) {
    if (part == 1 && (ir->red_value < 0 || ir->split < 2)) return NULL;
    char *src = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&src, &size);
    if (!f) return NULL;
    const char *T = ir->compute == TD_F64 ? "double" : "float";
    const char *I = ir->n < ((int64_t)1 << 32) ? "unsigned" : "unsigned long long";
    fprintf(f, "#include <trident.cuh>\n");
    helpers(f, T);
    if (ir->red_value >= 0) td_ki_emit_combine(f, ir, true, T);
    fprintf(f, "extern \"C\" __global__ void td_math_kernel(");
    if (part == 1) /* the partials, then the output */
        fprintf(f, "const %s *__restrict__ b0, %s *__restrict__ b1", T, td_ki_type(true, ir->buf_dtype[ir->red_buf]));
    for (int b = 0; part == 0 && b < ir->n_bufs; b++)
        fprintf(f, "%s%s%s *__restrict__ b%d", b ? ", " : "", b < ir->n_loaded ? "const " : "",
                td_ki_type(true, ir->buf_dtype[b]), b);
    if (part == 0 && ir->red_value >= 0 && ir->split > 1) fprintf(f, ", %s *__restrict__ b%d", T, ir->n_bufs);
    fprintf(f, ") {\n");
    if (ir->red_value < 0 && td_ki_vectorizes(ir, VEC)) {
        int64_t blocks = (ir->n / VEC + BLOCK - 1) / BLOCK;
        *grid = (uint32_t)(blocks < 8192 ? (blocks ? blocks : 1) : 8192);
        fprintf(f, "    for (%s g = blockIdx.x * %du + threadIdx.x; g < %lldu; g += gridDim.x * %du) {\n", I, BLOCK,
                (long long)(ir->n / VEC), BLOCK);
        for (int v = 0; v < ir->n_insns; v++) /* each contiguous input: one vector load */
            if (ir->insns[v].op == TD_KI_LOAD && td_ki_contiguous(ir, &ir->insns[v]))
                vector_move(f, ir, ir->insns[v].buf, true);
        for (int s = 0; s < ir->n_stores; s++)
            fprintf(f, "        __align__(16) %s s%d[%d];\n", td_ki_type(true, ir->buf_dtype[ir->store_buf[s]]),
                    ir->store_buf[s], VEC);
        fprintf(f, "#pragma unroll\n        for (int e = 0; e < %d; e++) {\n", VEC);
        td_ki_emit_element(f, ir, true, "            ", I, true);
        fprintf(f, "        }\n");
        for (int s = 0; s < ir->n_stores; s++) vector_move(f, ir, ir->store_buf[s], false);
        fprintf(f, "    }\n}\n");
    } else if (ir->red_value < 0) {
        int64_t blocks = (ir->n + BLOCK - 1) / BLOCK;
        *grid = (uint32_t)(blocks < 8192 ? (blocks ? blocks : 1) : 8192);
        fprintf(f, "    for (%s i = blockIdx.x * %du + threadIdx.x; i < %lldu; i += gridDim.x * %du) {\n", I, BLOCK,
                (long long)ir->n, BLOCK);
        td_ki_emit_element(f, ir, true, "        ", I, false);
        fprintf(f, "    }\n}\n");
    } else {
        *grid = (uint32_t)td_ki_reduce_groups(ir, part, BLOCK);
        if (!ir->columns) fprintf(f, "    __shared__ %s red[%d];\n", T, BLOCK);
        td_ki_emit_reduce(f, ir, true, part, I, BLOCK);
    }
    *block = BLOCK;
    if (fclose(f) != 0) {
        free(src);
        return NULL;
    }
    return src;
}
