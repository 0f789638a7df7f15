/*
** CUDA C of a fused region (kernel_ir.h), compiled through NVRTC by the CUDA
** plugin (td_kernel_compile; cached by source hash in memory and on disk).
** The kernel td_math_kernel takes one pointer per buffer in the IR's order
** (f16 / bf16 as unsigned short bits, bool as unsigned char, converted by
** trident.cuh's round-to-nearest-even helpers); shapes and strides are
** constants of the source (one kernel per specialization), so a launch passes
** no other data. Indices are 32-bit when the domain allows.
** Elementwise: a grid-stride loop over the domain, 256 threads a block.
** Reduction: one block per output (grid-stride over outputs); its threads
** walk k, combine in shared memory, thread 0 stores.
*/
#include <stdlib.h>

#include "math/emit_body.h"

#define BLOCK 256

static void helpers(FILE *f, const char *T) {
    fprintf(f, "#define TD_NAN __int_as_float(0x7FC00000)\n#define TD_INF __int_as_float(0x7F800000)\n");
    fprintf(f, "__device__ inline %s td_erf(%s x) { return erf(x); }\n", T, T);
    fprintf(f, "__device__ inline %s td_gelu(%s x) { return %s(0.5) * x * erfc(-x * %s(0.70710678118654752)); }\n", T,
            T, T, T);
    fprintf(f, "__device__ inline %s td_tanh(%s x) { return tanh(x); }\n", T, T);
    fprintf(f, "__device__ inline %s td_softplus(%s x) { return x > %s(20) ? x : log1p(exp(x)); }\n", T, T, T);
    fprintf(f, "__device__ inline %s td_pow(%s a, %s b) { return pow(a, b); }\n", T, T, T);
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
    if (ir->red_value < 0) { /* 4 elements a thread in flight */
        int64_t blocks = (ir->n + BLOCK - 1) / BLOCK;
        *grid = (uint32_t)(blocks < 8192 ? (blocks ? blocks : 1) : 8192);
        fprintf(f, "#pragma unroll 4\n");
        fprintf(f, "    for (%s i = blockIdx.x * %du + threadIdx.x; i < %lldu; i += gridDim.x * %du) {\n", I, BLOCK,
                (long long)ir->n, BLOCK);
        td_ki_emit_element(f, ir, true, "        ", I);
        fprintf(f, "    }\n}\n");
    } else {
        int64_t groups = ir->outer * ir->inner * (part == 0 ? ir->split : 1);
        *grid = (uint32_t)(groups < 65535 ? (groups ? groups : 1) : 65535);
        fprintf(f, "    __shared__ %s red[%d];\n", T, BLOCK);
        td_ki_emit_reduce(f, ir, true, part, I, BLOCK);
    }
    *block = BLOCK;
    if (fclose(f) != 0) {
        free(src);
        return NULL;
    }
    return src;
}
