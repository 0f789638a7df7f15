/*
** Retyping a SPIR-V module's 16-bit floats to bfloat16 (SPV_KHR_bfloat16), so that the f16
** cooperative-matrix GEMM (shaders/matmul_coopmat.comp, KHR variant) and attention kernels
** (shaders/attention_coopmat*.comp) run as bf16 ones without a GL_EXT_bfloat16 compiler (glslang >= 15.3).
** vk_spirv_bf16.c says what it changes and refuses.
** No Vulkan here: tests/test_spirv_bf16.c runs it on the CPU.
*/
#ifndef VK_SPIRV_BF16_H
#define VK_SPIRV_BF16_H
#include <stddef.h>
#include <stdint.h>

/* SPIR-V numbers the retyping writes (SPV_KHR_bfloat16; SPIRV-Headers' spirv.core.grammar.json) */
#define SPV_CAP_BFLOAT16_TYPE    5116u /* BFloat16TypeKHR */
#define SPV_CAP_BFLOAT16_COOPMAT 5118u /* BFloat16CooperativeMatrixKHR */
#define SPV_FP_ENCODING_BFLOAT16 0u    /* BFloat16KHR, OpTypeFloat's third operand */
#define SPV_EXT_BFLOAT16         "SPV_KHR_bfloat16"

/* The bf16 bits of the value of f16 bits h, rounded to nearest even (inf, NaN kept; a NaN stays quiet). */
uint16_t vk_bf16_of_f16_bits(uint16_t h);

/* IN in[n] (a SPIR-V module's words; n counts words): OUT *out (malloc'd, the caller frees it), *out_n its
** words: the module with every OpTypeFloat 16 encoded BFloat16KHR, its 16-bit float constants re-encoded,
** the capabilities BFloat16TypeKHR and BFloat16CooperativeMatrixKHR and OpExtension "SPV_KHR_bfloat16"
** added (the id bound unchanged: nothing new has an id). Returns 0, or -1 with *out NULL and why (one
** line) in why[why_n]: not SPIR-V, a truncated instruction, a 16-bit float already encoded, or a 16-bit
** float value or type used by an instruction bf16 does not allow (arithmetic, comparisons, extended
** instructions, NV cooperative matrices ...). Thread-safe. */
int vk_spirv_bf16(const uint32_t *in, size_t n, uint32_t **out, size_t *out_n, char *why, size_t why_n);

#endif
