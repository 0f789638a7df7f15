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
/* The statements for domain element i (of type idx_t), each line indented by ind. */
void td_ki_emit_element(FILE *f, const td_kernel_ir *ir, bool cuda, const char *ind, const char *idx_t);
/* The reduction's td_comb(a, b) and TD_RED_INIT, for compute type T. */
void td_ki_emit_combine(FILE *f, const td_kernel_ir *ir, bool cuda, const char *T);
/* b<red_buf>[o] = acc (mean: acc / K) in the output's dtype. */
void td_ki_emit_store_reduced(FILE *f, const td_kernel_ir *ir, bool cuda, const char *ind, const char *o,
                              const char *acc);

#endif
