/*
** The LSTM cell's elementwise math for contiguous f32 runs of hidden units with
** AVX2/FMA (x86/lstm_avx2.c), for src/nn/rnn_lstm_cpu.c's whole-layer op.
** defines: cpu_lstm_cell_f32_avx2, cpu_lstm_cell_backward_f32_avx2.
*/
#ifndef TRIDENT_BACKEND_CPU_LSTM_H
#define TRIDENT_BACKEND_CPU_LSTM_H

#include <stdint.h>

/* Units u < n of one batch row, gates at a + q*H (pre-activations in, i f g o out, in place):
**   i, f, o = sigmoid, g = tanh;  c[u] = f cp[u] + i g;  y[u] = o tanh(c[u])
** Returns the units done (n rounded down to 8); the caller does the rest. Call only when cpu_has_avx2(). */
int64_t cpu_lstm_cell_f32_avx2(int64_t n, int64_t H, float *a, const float *cp, float *c, float *y);

/* Units u < n of one batch row, a the saved i f g o, dh and dc the incoming gradients of h and c, each the sum of
** two parts (dy + dh, dcs + dc; dc is overwritten with dc_prev):
**   tc = tanh(c), dct = dc + dh o (1 - tc^2), dg = (dct g i(1-i), dct cp f(1-f), dct i (1-g^2), dh tc o(1-o))
**   at dg + q*H;  dc[u] = dct f
** Returns the units done (n rounded down to 8). Call only when cpu_has_avx2(). */
int64_t cpu_lstm_cell_backward_f32_avx2(int64_t n, int64_t H, const float *a, const float *c, const float *cp,
                                        const float *dy, const float *dh, const float *dcs, float *dc, float *dg);

#endif /* TRIDENT_BACKEND_CPU_LSTM_H */
