/*
** Recurrent-layer internals shared by rnn.c (the modules) and rnn_cells.c
** (the fused cells as custom ops).
** defines: td__rnn_cells_init, td__lstm_cell, td__gru_cell, td__lstm_layer_cpu, td__lstm_layer_seq_takes,
** td__lstm_layer_seq, td__rnn_dnn_call, td__rnn_cudnn.
*/
#ifndef TRIDENT_RNN_INTERNAL_H
#define TRIDENT_RNN_INTERNAL_H

#include "nn_internal.h"

/* Register the fused cells' custom ops (rnn.lstm_cell, rnn.lstm_cell_backward, rnn.gru_cell,
** rnn.gru_cell_backward) once per process. TD_OK, or the registration's error. */
td_status td__rnn_cells_init(void);

/* One LSTM step, fused: c [B, H], gx and gh [B, 4H] (gates i, f, g, o before their activations, biases in either)
** -> h' [B, H], with c' [B, H] in *c_out. NULL (and *c_out NULL) on failure. */
td_tensor *td__lstm_cell(td_tensor *c, td_tensor *gx, td_tensor *gh, td_tensor **c_out);

/* One GRU step, fused: h [B, H], gx = x W_ih^T + b_ih and gh = h W_hh^T + b_hh [B, 3H] (r, z, n) -> h' [B, H]. */
td_tensor *td__gru_cell(td_tensor *h, td_tensor *gx, td_tensor *gh);

/* One LSTM layer direction on the CPU as one node (rnn_lstm_cpu.c): gx [T, B, 4H] (x W_ih^T + b for every step),
** h0 and c0 [B, H], w_hh [4H, H]; steps run T-1 down to 0 when reverse -> y [T, B, H], with the last step's h and c
** in *h_last and *c_last. NULL on failure. */
td_tensor *td__lstm_layer_cpu(td_tensor *gx, td_tensor *h0, td_tensor *c0, td_tensor *w_hh, bool reverse,
                              td_tensor **h_last, td_tensor **c_last);

/* One LSTM layer direction on a GPU backend as one node (rnn_lstm_seq.c): the arguments and results of
** td__lstm_layer_cpu; per step one kernel each way (its GEMM inside), dW_hh one GEMM over all steps. Taken where
** td__lstm_layer_seq_takes(gx): Vulkan, float32 or float64. NULL on failure. */
bool td__lstm_layer_seq_takes(td_tensor *gx);
td_tensor *td__lstm_layer_seq(td_tensor *gx, td_tensor *h0, td_tensor *c0, td_tensor *w_hh, bool reverse,
                              td_tensor **h_last, td_tensor **c_last);

/* A multi-layer module as rnn_cudnn.c sees it. mode: TD_RNN_DNN_* of rnn_cudnn.h (rnn.c's MODE_* in the same order);
** params: the module's parameters in registration order (borrowed). */
typedef struct td__rnn_dnn_call {
    int mode, layers, dirs;
    bool bias, training;
    double dropout;
    int64_t hidden;
    int n_params;
    td_tensor *const *params;
} td__rnn_dnn_call;

/* The whole layer on cuDNN (rnn_cudnn.c) for x [T, B, I] contiguous, h0 and c0 [L*D, B, H] or NULL: 1 when it ran
** (y [T, B, D*H], h_n and c_n [L*D, B, H] set), 0 when cuDNN does not take the call (the own path runs; no error
** left set), -1 on an error (set). */
int td__rnn_cudnn(const td__rnn_dnn_call *c, td_tensor *x, td_tensor *h0, td_tensor *c0, td_tensor **y, td_tensor **h_n,
                  td_tensor **c_n);

#endif /* TRIDENT_RNN_INTERNAL_H */
