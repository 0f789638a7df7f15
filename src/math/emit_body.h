/*
** Shared pieces of the GPU emitters (emit_body.c; used by emit_cuda.c and
** emit_glsl.c, internal to src/math/).
*/
#ifndef TRIDENT_MATH_EMIT_BODY_H
#define TRIDENT_MATH_EMIT_BODY_H

#include <stdbool.h>
#include <stdio.h>

#include "math/kernel_ir.h"

/* The buffer element type of dt in CUDA C or GLSL. */
const char *td_ki_type(bool cuda, td_dtype dt);
/* Whether the language can run ir (GLSL: no f64 transcendentals, 32-bit indices). */
bool td_ki_emit_supported(const td_kernel_ir *ir, bool cuda);
/* Whether an elementwise kernel can move vec elements a thread as vectors: every load contiguous (or one
** element for all), vec dividing the domain. Buffers are bound from element 0 of fresh or offset-0
** contiguous tensors (plan.c), aligned for any vector. */
bool td_ki_vectorizes(const td_kernel_ir *ir, int vec);
/* The statements for domain element i (of type idx_t), each line indented by ind. vec: contiguous loads read
** l<buf>[e] and stores write s<buf>[e] (elements the caller moves as vectors; in GLSL, f16 / bf16 as the
** uint of their bits). */
void td_ki_emit_element(FILE *f, const td_kernel_ir *ir, bool cuda, const char *ind, const char *idx_t, bool vec);
/* The reduction's td_comb(a, b) and TD_RED_INIT, for compute type T. */
void td_ki_emit_combine(FILE *f, const td_kernel_ir *ir, bool cuda, const char *T);
/* The rest of a reduction kernel's main function (after its `{`), index type I, wg threads a group, a
** shared `red[wg]` declared. part 0: each group reduces chunks of k (ir->split of them) of outputs and writes
** the output (split 1) or its raw partial into the extra binding b<n_bufs> [outputs * split]; part 1 (split
** > 1): reduces the partials b0 of each output into b1. */
void td_ki_emit_reduce(FILE *f, const td_kernel_ir *ir, bool cuda, int part, const char *I, int wg);
/* The groups a reduction kernel's part launches (at most 65535; its loops stride over the rest). */
int64_t td_ki_reduce_groups(const td_kernel_ir *ir, int part, int wg);

#endif
