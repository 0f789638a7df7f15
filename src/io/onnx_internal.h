/*
** The ONNX export's internals: the tracer (onnx_trace.c) that records what a
** forward pass ran, which onnx_export.c turns into an ONNX graph.
** defines: td__trace, td__tr_event, td__trace_begin/end/free.
**
** The trace is the ordered list of
**   - ops that went through td__dispatch (every op, differentiable or not, with
**     its params), from td__trace_hook;
**   - views (reshape, permute, slice, select, expand) and splits, which make no
**     op, from td__view_hook and td__split_hook (chained in front of autograd's).
** Every tensor it names is retained until td__trace_free, so a pointer names
** one tensor for the whole trace and a constant's values can be read at the end.
** Only the thread that called td__trace_begin is recorded.
*/
#ifndef TRIDENT_IO_ONNX_INTERNAL_H
#define TRIDENT_IO_ONNX_INTERNAL_H

#include "../core/internal.h"

typedef enum td__tr_kind { TD__TR_OP, TD__TR_VIEW, TD__TR_SPLIT } td__tr_kind;

typedef struct td__tr_event {
    td__tr_kind what;
    td_op_kind kind;       /* TD__TR_OP */
    td_op_params p;        /* TD__TR_OP (zeroed when the op had none) */
    td__view_info view;    /* TD__TR_VIEW */
    int dim;               /* TD__TR_SPLIT */
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
/* Release the tensors and free the events. */
void td__trace_free(td__trace *tr);

#endif /* TRIDENT_IO_ONNX_INTERNAL_H */
