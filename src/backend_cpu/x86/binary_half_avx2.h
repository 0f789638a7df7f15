/*
** The bf16 / f16 binary fast path (binary_half_avx2.c): ADD, SUB, MUL, DIV of
** contiguous halves computed in float32 and rounded once, 16 lanes a step.
** defines: cpu_binary_half_avx2
*/
#ifndef TRIDENT_CPU_BINARY_HALF_AVX2_H
#define TRIDENT_CPU_BINARY_HALF_AVX2_H

#include <stdbool.h>
#include <stdint.h>

#include "trident/backend.h"

/* o[i] = a[i*sa] op b[i*sb] for i < n, of dtype dt (TD_BF16 or TD_F16), op in ADD/SUB/MUL/DIV; sa, sb in {0, 1};
** stream: non-temporal stores (fenced before it returns). Call only when the CPU has AVX2 and F16C. Returns false
** (doing nothing) for other ops or dtypes. */
bool cpu_binary_half_avx2(td_op_kind kind, td_dtype dt, int64_t n, uint16_t *o, const uint16_t *a, int64_t sa,
                          const uint16_t *b, int64_t sb, bool stream);

#endif
