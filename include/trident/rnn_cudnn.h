/*
** The contract between the recurrent layers (src/nn/rnn_cudnn.c) and the CUDA plugin's cuDNN RNN
** (src/backend_cuda/cu_rnn_cudnn.c): a whole multi-layer RNN/LSTM/GRU forward or backward as cuDNN's
** cudnnRNNForward / cudnnRNNBackwardData_v8 / cudnnRNNBackwardWeights_v8. The core finds the three entry points
** with td_backend_symbol(TD_DEVICE_CUDA, TD_CUDA_RNN_*); every pointer is a device address on the call's device
** (td_tensor_device_address) and the work is queued on that device's stream, ordered with Trident's own.
** T steps, B batch, I input, H hidden, L layers, D directions, G gates (RNN 1, LSTM 4, GRU 3).
** defines: td_rnn_dnn_args, td_rnn_dnn_ptrs, the entry points' types and names.
*/
#ifndef TRIDENT_RNN_CUDNN_H
#define TRIDENT_RNN_CUDNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trident/tensor.h"

/* One call's configuration: the plan cache's key. */
typedef struct td_rnn_dnn_args {
    int device;         /* CUDA ordinal (cuda:device) */
    int mode;           /* TD_RNN_DNN_* */
    int layers, dirs;   /* L, D */
    int bias;           /* 1: b_ih and b_hh (cuDNN's double bias), 0: none */
    int training;       /* 1: keep the reserve space for the backward */
    int tf32;           /* 1: cuDNN's default math (TF32 tensor cores for float32), 0: FMA only (strict fp32) */
    int64_t T, B, I, H; /* x [T, B, I] time-major; h [L*D, B, H]; y [T, B, D*H] */
} td_rnn_dnn_args;

enum { TD_RNN_DNN_TANH, TD_RNN_DNN_RELU, TD_RNN_DNN_LSTM, TD_RNN_DNN_GRU };

/* Device pointers of one call, all float32 and contiguous. params: torch's parameters in registration order (per
** layer, per direction: weight_ih [G*H, in], weight_hh [G*H, H], then bias_ih, bias_hh [G*H] when bias); dparams:
** their gradients, the same shapes (overwritten). hx, cx, dhy, dcy may be NULL (zeros); cx, cy, dcy, dcx are LSTM's. */
typedef struct td_rnn_dnn_ptrs {
    const void *x, *hx, *cx;
    void *y, *hy, *cy;
    void *w;       /* cuDNN's weight space (wbytes): the forward packs params into it, the backward reads it */
    void *reserve; /* reserve_bytes: written by the training forward, read and rewritten by the backward */
    const void *const *params;
    const void *dy, *dhy, *dcy; /* backward */
    void *dx, *dhx, *dcx;       /* backward; dhx and dcx may be NULL (not wanted) */
    void *dw;                   /* backward: wbytes of scratch for the weight gradient in cuDNN's layout */
    void *const *dparams;       /* backward */
} td_rnn_dnn_ptrs;

/* Whether cuDNN takes a: TD_OK with cuDNN's weight-space and reserve-space bytes, or TD_ERR_UNSUPPORTED / another
** error with the reason in td_last_error (cuDNN missing, the configuration refused, capturing before a plan
** exists). Builds and caches the plan (descriptors, sequence lengths on the device) on first use. */
typedef td_status (*td_rnn_dnn_prepare_fn)(const td_rnn_dnn_args *a, size_t *wbytes, size_t *reserve_bytes);
/* Queue the forward (packs params into w, then cudnnRNNForward): TD_OK or the error. */
typedef td_status (*td_rnn_dnn_forward_fn)(const td_rnn_dnn_args *a, const td_rnn_dnn_ptrs *p);
/* Queue the backward: dx, dhx, dcx (BackwardData), then the weight gradient into dw (zeroed first) unpacked into
** dparams. TD_OK or the error. */
typedef td_status (*td_rnn_dnn_backward_fn)(const td_rnn_dnn_args *a, const td_rnn_dnn_ptrs *p);

#define TD_CUDA_RNN_PREPARE  "td_cuda_rnn_prepare"
#define TD_CUDA_RNN_FORWARD  "td_cuda_rnn_forward"
#define TD_CUDA_RNN_BACKWARD "td_cuda_rnn_backward"

#endif /* TRIDENT_RNN_CUDNN_H */
