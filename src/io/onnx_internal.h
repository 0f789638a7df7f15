/*
** The ONNX export's internals: the tracer (onnx_trace.c) that records what a
** forward pass ran, which onnx_export.c turns into an ONNX graph.
** defines: td__trace, td__tr_event, td__tr_rnn, td__trace_begin/end/free, td__trace_rnn_begin/end.
**
** The trace is the ordered list of
**   - ops that went through td__dispatch (every op, differentiable or not, with
**     its params), from td__trace_hook;
**   - views (reshape, permute, slice, select, expand) and splits, which make no
**     op, from td__view_hook and td__split_hook (chained in front of autograd's).
** Every tensor it names is retained until td__trace_free, so a pointer names
** one tensor for the whole trace and a constant's values can be read at the end.
** Only the thread that called td__trace_begin is recorded.
**   - recurrent layers (RNN, LSTM, GRU: src/nn/rnn.c) as one event each, from
**     td__trace_rnn_begin/end: the ops inside are not recorded, so the layer
**     becomes ONNX's RNN/LSTM/GRU operators.
*/
#ifndef TRIDENT_IO_ONNX_INTERNAL_H
#define TRIDENT_IO_ONNX_INTERNAL_H

#include "../core/internal.h"

typedef enum td__tr_kind { TD__TR_OP, TD__TR_VIEW, TD__TR_SPLIT, TD__TR_RNN } td__tr_kind;

/* A recurrent layer's configuration (TD__TR_RNN). Its event's inputs: x
** time-major [T, B, I], h0 and c0 [L*D, B, H] (NULL when absent), then per
** layer and direction torch's weight_ih, weight_hh, bias_ih, bias_hh (NULL
** biases without bias); outputs y [T, B, D*H], h_n and c_n [L*D, B, H] (c_n
** NULL but for LSTM). */
typedef enum td__tr_rnn_mode { TD__RNN_TANH, TD__RNN_RELU, TD__RNN_LSTM, TD__RNN_GRU } td__tr_rnn_mode;
typedef struct td__tr_rnn {
    td__tr_rnn_mode mode;
    int layers, dirs;
    int64_t hidden;
} td__tr_rnn;

typedef struct td__tr_event {
    td__tr_kind what;
    td_op_kind kind;       /* TD__TR_OP */
    td_op_params p;        /* TD__TR_OP (zeroed when the op had none) */
    td__view_info view;    /* TD__TR_VIEW */
    int dim;               /* TD__TR_SPLIT */
    td__tr_rnn rnn;        /* TD__TR_RNN */
    int n_in, n_out;       /* VIEW and SPLIT: in[0] the base, out[] the views */
    td_tensor **in, **out; /* retained; NULL for an absent optional operand */
} td__tr_event;

typedef struct td__trace {
    td__tr_event *ev;
    int n, cap;
    td_status st; /* TD_ERR_OOM when an event could not be kept */
} td__trace;

/* the dispatcher's hook (dispatch.c) */
extern void (*td__trace_hook)(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                              const td_op_params *p);

/* Start recording this thread's ops into tr (zeroed first). TD_ERR_BUSY when a
** trace is already running. */
td_status td__trace_begin(td__trace *tr);
/* Stop recording; returns tr->st. */
td_status td__trace_end(td__trace *tr);
/* Around a recurrent layer's forward: begin pauses this thread's recording
** and says whether it was on; end (called only when begin said so) resumes it
** and records the layer as one TD__TR_RNN event. */
bool td__trace_rnn_begin(void);
void td__trace_rnn_end(const td__tr_rnn *info, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out);
/* Release the tensors and free the events. */
void td__trace_free(td__trace *tr);

#endif /* TRIDENT_IO_ONNX_INTERNAL_H */
