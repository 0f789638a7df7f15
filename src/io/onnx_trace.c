/*
** The tracer of the ONNX export (see onnx_internal.h): while it runs, the
** dispatcher's trace hook and the view and split hooks append events to the
** active trace. The view and split hooks are autograd's, chained: the tracer
** calls the previous hook after recording, and puts it back at the end.
*/
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

static _Thread_local td__trace *active; /* this thread's trace, or NULL */
static _Thread_local td__trace *paused; /* the trace while a recurrent layer runs */
static _Atomic(td__trace *) any_active; /* one trace at a time in the process: the hooks are global */
static void (*prev_view)(td_tensor *base, td_tensor *view, const td__view_info *info);
static void (*prev_split)(td_tensor *base, int n, td_tensor *const *views, int dim);

/* A new event with n_in + n_out retained tensors, or NULL (tr->st = OOM). */
static td__tr_event *add_event(td__trace *tr, td__tr_kind what, int n_in, td_tensor *const *in, int n_out,
                               td_tensor *const *out) {
    if (tr->st != TD_OK) return NULL;
    if (tr->n == tr->cap) {
        int cap = tr->cap ? 2 * tr->cap : 64;
        td__tr_event *ev = realloc(tr->ev, (size_t)cap * sizeof *ev);
        if (!ev) return tr->st = TD_ERR_OOM, NULL;
        tr->ev = ev, tr->cap = cap;
    }
    td_tensor **t = calloc((size_t)(n_in + n_out) + 1, sizeof *t);
    if (!t) return tr->st = TD_ERR_OOM, NULL;
    td__tr_event *e = &tr->ev[tr->n++];
    *e = (td__tr_event){.what = what, .n_in = n_in, .n_out = n_out, .in = t, .out = t + n_in};
    for (int i = 0; i < n_in; i++) e->in[i] = in[i] ? td_retain(in[i]) : NULL;
    for (int i = 0; i < n_out; i++) e->out[i] = out[i] ? td_retain(out[i]) : NULL;
    return e;
}

static void on_op(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                  const td_op_params *p) {
    if (!active) return;
    td__tr_event *e = add_event(active, TD__TR_OP, n_in, in, n_out, out);
    if (!e) return;
    e->kind = kind;
    if (p) e->p = *p;
}

static void on_view(td_tensor *base, td_tensor *view, const td__view_info *info) {
    if (active) {
        td__tr_event *e = add_event(active, TD__TR_VIEW, 1, &base, 1, &view);
        if (e) e->view = *info;
    }
    if (prev_view) prev_view(base, view, info);
}

static void on_split(td_tensor *base, int n, td_tensor *const *views, int dim) {
    if (active) {
        td__tr_event *e = add_event(active, TD__TR_SPLIT, 1, &base, n, views);
        if (e) e->dim = dim;
    }
    if (prev_split) prev_split(base, n, views, dim);
}

td_status td__trace_begin(td__trace *tr) {
    *tr = (td__trace){0};
    td__trace *none = NULL;
    if (!atomic_compare_exchange_strong(&any_active, &none, tr))
        return TD_ERR(TD_ERR_BUSY, "onnx export: another export is tracing a forward pass");
    active = tr;
    prev_view = td__view_hook, prev_split = td__split_hook;
    td__view_hook = on_view, td__split_hook = on_split;
    td__trace_hook = on_op;
    return TD_OK;
}

td_status td__trace_end(td__trace *tr) {
    td__trace_hook = NULL;
    td__view_hook = prev_view, td__split_hook = prev_split;
    active = NULL;
    atomic_store(&any_active, NULL);
    return tr->st == TD_OK ? TD_OK : TD_ERR(tr->st, "onnx export: out of host memory tracing the forward pass");
}

bool td__trace_rnn_begin(void) {
    if (!active) return false;
    paused = active, active = NULL;
    return true;
}

void td__trace_rnn_end(const td__tr_rnn *info, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out) {
    active = paused, paused = NULL;
    td__tr_event *e = active ? add_event(active, TD__TR_RNN, n_in, in, n_out, out) : NULL;
    if (e) e->rnn = *info;
}

void td__trace_free(td__trace *tr) {
    for (int k = 0; k < tr->n; k++) {
        td__tr_event *e = &tr->ev[k];
        for (int i = 0; i < e->n_in + e->n_out; i++) td_release(e->in[i]);
        free(e->in);
    }
    free(tr->ev);
    *tr = (td__trace){0};
}
