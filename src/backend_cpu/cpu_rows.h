/*
** AVX2/FMA f32 row kernels of softmax, log_softmax (forward and backward), cross-entropy and
** layer_norm, and the vector exp behind them (src/backend_cpu/x86/rows_avx2.c,
** exp_avx2.h: max error 1.26 ulp). Call only when cpu_has_avx2() (cpu_ew.h);
** the scalar loops of each op are the reference.
** defines: cpu_row_max_f32_avx2, cpu_row_sum_exp_f32_avx2, cpu_softmax_row_f32_avx2,
**          cpu_softmax_backward_row_f32_avx2, cpu_layernorm_row_f32_avx2, cpu_exp_f32_avx2,
**          cpu_gelu_f32_avx2, cpu_gelu_backward_f32_avx2.
*/
#ifndef TRIDENT_BACKEND_CPU_ROWS_H
#define TRIDENT_BACKEND_CPU_ROWS_H

#include "cpu_ew.h"

/* max_j x[j], n >= 1 */
float cpu_row_max_f32_avx2(const float *x, int64_t n);
/* sum_j exp(x[j] - m); with e != NULL also e[j] = exp(x[j] - m) (e may alias x) */
float cpu_row_sum_exp_f32_avx2(const float *x, int64_t n, float m, float *e);
/* y = softmax(x) or log_softmax(x) of one row of n >= 1 elements (y may alias x). With scratch
** (n floats, not aliasing x or y), y is written with non-temporal stores where its alignment allows. */
void cpu_softmax_row_f32_avx2(const float *x, float *y, int64_t n, bool log_out, float *scratch);
/* dx = y (dy - sum(dy y)), or with log_out dx = dy - e^y sum(dy), of one row of n >= 1 (dx may alias
** dy); stream: non-temporal stores to dx where its alignment allows. */
void cpu_softmax_backward_row_f32_avx2(const float *dy, const float *y, float *dx, int64_t n, bool log_out,
                                       bool stream);
/* y = (x - mean) * rstd * w + b of one row of n >= 1 (w, b may be NULL; y may alias x); writes mean
** and rstd; stream: non-temporal stores to y where its alignment allows. */
void cpu_layernorm_row_f32_avx2(const float *x, const float *w, const float *b, float *y, int64_t n, double eps,
                                float *mean, float *rstd, bool stream);
/* Orders the non-temporal stores of the row kernels (call once per thread after its rows). */
void cpu_rows_stream_fence(void);
/* y[i] = exp(x[i]) for i < n, contiguous */
void cpu_exp_f32_avx2(int64_t n, float *y, const float *x);
/* GELU, erf form, and its backward dx = dy gelu'(x), contiguous (x86/gelu_avx2.c) */
void cpu_gelu_f32_avx2(int64_t n, float *y, const float *x);
void cpu_gelu_backward_f32_avx2(int64_t n, float *dx, const float *dy, const float *x);

#endif /* TRIDENT_BACKEND_CPU_ROWS_H */
