/*
** Recurrent-layer internals shared by rnn.c (the modules) and rnn_cells.c
** (the fused cells as custom ops).
** defines: td__rnn_cells_init, td__lstm_cell, td__gru_cell.
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

#endif /* TRIDENT_RNN_INTERNAL_H */
