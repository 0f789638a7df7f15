/*
** Custom ops on the autograd tape: td_custom_op_call. A call of an op with a
** backward and an input that requires grad (grad mode on) runs its forward
** (src/core/custom_op.c) inside td_function_apply, which saves inputs and
** outputs; the node's backward calls the user's and checks each gradient's
** shape. Other calls run the forward with grad mode off.
*/
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"

/* A recorded call: its state and the function its node runs, owned by the ctx once forward starts. */
typedef struct custom_record {
    td__custom_state s;
    td_function fn; /* named after the op */
    bool *taken;    /* set once the ctx owns the record */
} custom_record;

static td_status fn_forward(td_function_ctx *ctx, int n_in, td_tensor *const *inputs, int n_out, td_tensor **outputs) {
    custom_record *r = td_ctx_user(ctx);
    *r->taken = true;
    td_ctx_set_data(ctx, r, free);
    td_status st = td__custom_forward(&r->s, inputs, outputs);
    if (st == TD_OK) st = td_ctx_save_for_backward(ctx, n_in, inputs);
    if (st == TD_OK) st = td_ctx_save_for_backward(ctx, n_out, outputs);
    if (st == TD_OK) r->s.ctx = ctx;
    return st;
}

static const char *shape_str(td_tensor *t, char *buf, size_t n) {
    return t ? td__shape_str(td_ndim(t), td_shape(t), buf, n) : "none";
}

static td_status fn_backward(td_function_ctx *ctx, int n_out, td_tensor *const *grad_outputs, int n_in,
                             td_tensor **grad_inputs) {
    custom_record *r = td_ctx_data(ctx);
    td__custom_state *s = &r->s;
    const char *name = r->fn.name;
    td_tensor *in[TD__CUSTOM_MAX_IN], *out[TD__CUSTOM_MAX_OUT];
    for (int i = 0; i < n_in + n_out; i++) {
        td_tensor *t = td_ctx_saved(ctx, i);
        if (!t) return td_last_status();
        if (i < n_in)
            in[i] = t;
        else
            out[i - n_in] = t;
    }
    td_custom_call c = s->call;
    c.internal = s;
    c.inputs = in;
    c.outputs = out;
    for (int i = 0; i < n_in; i++) grad_inputs[i] = NULL;
    td_status st = td__custom_def(s->op)->backward(&c, grad_outputs, grad_inputs);
    if (st != TD_OK) return td_error_prefix("%s backward", name);
    for (int i = 0; i < n_in; i++) {
        td_tensor *g = grad_inputs[i];
        if (!td_ctx_needs_input_grad(ctx, i)) continue;
        char a[96], b[96];
        if (!g)
            return TD_ERR(TD_ERR_MISUSE, "%s backward: no gradient for input %d (shape %s)", name, i,
                          shape_str(in[i], a, sizeof a));
        if (td_ndim(g) != td_ndim(in[i]) || memcmp(td_shape(g), td_shape(in[i]), sizeof(int64_t) * td_ndim(g)))
            return TD_ERR(TD_ERR_SHAPE, "%s backward: the gradient of input %d has shape %s, expected %s", name, i,
                          shape_str(g, a, sizeof a), shape_str(in[i], b, sizeof b));
    }
    return TD_OK;
}

bool td_custom_needs_grad(const td_custom_call *c, int i) {
    if (!c || !c->internal) return false;
    const td__custom_state *s = c->internal;
    return s->ctx && td_ctx_needs_input_grad(s->ctx, i);
}

/* Run the prepared call s as one custom-function node. */
static td_status record(const td__custom_state *s, td_tensor *const *inputs, td_tensor **outputs) {
    custom_record *r = malloc(sizeof *r);
    if (!r) return TD_ERR(TD_ERR_OOM, "out of host memory");
    bool taken = false;
    *r = (custom_record){
        .s = *s,
        .fn = {.name = td_custom_op_name(s->op), .forward = fn_forward, .backward = fn_backward},
        .taken = &taken,
    };
    r->s.call.internal = &r->s;
    td_status st = td_function_apply(&r->fn, r, s->call.n_in, inputs, s->call.n_out, outputs);
    if (!taken) free(r);
    return st;
}

td_status td_custom_op_call(const td_custom_op *op, int n_in, td_tensor *const *inputs, int n_params,
                            const float *params, int n_out, td_tensor **outputs) {
    td__custom_state s;
    td_status st = td__custom_prepare(op, n_in, inputs, n_params, params, n_out, outputs, &s);
    if (st != TD_OK) return st;
    bool differentiable = td__custom_def(op)->backward;
    if (differentiable && td_grad_enabled() && td__any_requires_grad(n_in, inputs)) {
        st = record(&s, inputs, outputs);
        return st == TD_OK ? st : td_error_prefix("%s", td_custom_op_name(op));
    }
    if (differentiable && !td_grad_enabled()) td__probe_note(n_in, inputs); /* a td_checkpoint region's probe */
    return td__custom_run(&s, inputs, outputs);
}

td_tensor *td_custom_op_apply(const td_custom_op *op, int n_in, td_tensor *const *inputs, int n_params,
                              const float *params) {
    td_tensor *out[TD__CUSTOM_MAX_OUT];
    if (op && td__custom_def(op)->n_out != 1)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: td_custom_op_apply needs an op with one output (it has %d)",
                     td_custom_op_name(op), td__custom_def(op)->n_out);
    return td_custom_op_call(op, n_in, inputs, n_params, params, 1, out) == TD_OK ? out[0] : NULL;
}
