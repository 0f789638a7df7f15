/*
** Custom functions: a forward and a backward callback recorded as one node,
** the way user CUDA/GLSL kernels join autograd (seeds 002/004).
**
** Tensors saved by forward are held by the ctx; a saved tensor that is one of
** the outputs is kept as a detached alias (else output -> node -> output
** would be a cycle) and re-attached on access under create_graph.
*/
#include <stdlib.h>

#include "autograd_internal.h"

struct td_function_ctx {
    const td_function *fn;
    void *user;
    td_tensor **saved; /* +1 each */
    int *saved_out_nr; /* output index of saved[k], or -1 */
    int n_saved, cap_saved;
    bool saved_freed;
    void *data;
    void (*free_data)(void *data);
    int n_in;
    bool in_requires_grad[64]; /* at forward time */
    td_node *node;             /* set once recorded */
};

static void ctx_free_saved(td_function_ctx *c) {
    for (int k = 0; k < c->n_saved; k++) td_release(c->saved[k]);
    free(c->saved);
    free(c->saved_out_nr);
    c->saved = NULL;
    c->saved_out_nr = NULL;
    if (c->n_saved) c->saved_freed = true;
    c->n_saved = c->cap_saved = 0;
}

static void ctx_free(void *p) {
    td_function_ctx *c = p;
    ctx_free_saved(c);
    if (c->free_data) c->free_data(c->data);
    free(c);
}

static void node_free_saved(td_node *n) { ctx_free_saved(n->data); }

td_status td_ctx_save_for_backward(td_function_ctx *ctx, int n, td_tensor *const *tensors) {
    if (!ctx || n < 0 || (n && !tensors)) return TD_ERR(TD_ERR_MISUSE, "save_for_backward: bad arguments");
    if (ctx->node) return TD_ERR(TD_ERR_STATE, "save_for_backward: only forward may save tensors");
    for (int i = 0; i < n; i++) TD_CHECK_ARG_ST(tensors[i], "save_for_backward");
    if (ctx->n_saved + n > ctx->cap_saved) {
        int cap = ctx->cap_saved ? ctx->cap_saved : 4;
        while (cap < ctx->n_saved + n) cap *= 2;
        td_tensor **s = realloc(ctx->saved, (size_t)cap * sizeof *s);
        if (s) ctx->saved = s;
        int *o = s ? realloc(ctx->saved_out_nr, (size_t)cap * sizeof *o) : NULL;
        if (!o) return TD_ERR(TD_ERR_OOM, "save_for_backward: out of host memory");
        ctx->saved_out_nr = o;
        ctx->cap_saved = cap;
    }
    for (int i = 0; i < n; i++) {
        ctx->saved_out_nr[ctx->n_saved] = -1;
        ctx->saved[ctx->n_saved++] = td_retain(tensors[i]);
    }
    return TD_OK;
}

td_tensor *td_ctx_saved(td_function_ctx *ctx, int i) {
    if (!ctx) TD_FAIL_NULL(TD_ERR_MISUSE, "ctx_saved: ctx is NULL");
    const char *name = ctx->fn->name ? ctx->fn->name : "function";
    if (ctx->saved_freed)
        TD_FAIL_NULL(TD_ERR_STATE, "%s: saved tensors were freed by an earlier backward; pass retain_graph=true", name);
    if (i < 0 || i >= ctx->n_saved)
        TD_FAIL_NULL(TD_ERR_INDEX, "%s: saved tensor %d out of range (%d saved)", name, i, ctx->n_saved);
    td_tensor *a = ctx->saved[i];
    int j = ctx->saved_out_nr[i];
    if (j < 0 || !ctx->node || !td_grad_enabled()) return a;
    td_tensor *v = td__make_view(a, a->ndim, a->shape, a->strides, a->offset); /* create_graph: re-attach */
    if (v) td__node_attach(ctx->node, v, j);
    return v;
}

bool td_ctx_needs_input_grad(const td_function_ctx *ctx, int i) {
    if (!ctx || i < 0 || i >= ctx->n_in || i >= 64) return false;
    return ctx->node ? td__needs(ctx->node, i) : ctx->in_requires_grad[i];
}

td_dtype td__ctx_grad_dtype(const td_function_ctx *ctx, int i, td_dtype dflt) {
    return ctx && ctx->node && i >= 0 && i < ctx->n_in ? td__grad_dtype(ctx->node, i) : dflt;
}

void *td_ctx_user(const td_function_ctx *ctx) { return ctx ? ctx->user : NULL; }
void *td_ctx_data(const td_function_ctx *ctx) { return ctx ? ctx->data : NULL; }

void td_ctx_set_data(td_function_ctx *ctx, void *data, void (*free_fn)(void *data)) {
    if (!ctx) return;
    if (ctx->free_data && ctx->data != data) ctx->free_data(ctx->data);
    ctx->data = data;
    ctx->free_data = free_fn;
}

/* backward of the node: zeros for outputs that got no gradient, then the user's backward */
static td_status bw_custom(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_function_ctx *c = n->data;
    td_tensor *g[8];
    for (int j = 0; j < n->n_out; j++) {
        g[j] = gy[j] ? gy[j] : td__zeros_meta(&n->out_meta[j], n->out_meta[j].dtype);
        if (!g[j]) return td_last_status();
    }
    td_status st = c->fn->backward(c, n->n_out, g, n->n_in, gx);
    if (st != TD_OK) return st;
    for (int i = 0; i < n->n_in; i++)
        if (!td__needs(n, i)) gx[i] = NULL;
    return TD_OK;
}

static bool is_input(td_tensor *t, int n_in, td_tensor *const *inputs) {
    for (int i = 0; i < n_in; i++)
        if (inputs[i] == t) return true;
    return false;
}

td_status td_function_apply(const td_function *fn, void *user, int n_in, td_tensor *const *inputs, int n_out,
                            td_tensor **outputs) {
    if (outputs)
        for (int j = 0; j < n_out; j++) outputs[j] = NULL;
    if (!fn || !fn->forward || !fn->backward)
        return TD_ERR(TD_ERR_MISUSE, "function_apply: fn needs forward and backward callbacks");
    const char *name = fn->name ? fn->name : "function";
    if (n_in < 0 || n_in > 64 || n_out < 1 || n_out > 8 || !outputs || (n_in && !inputs))
        return TD_ERR(TD_ERR_MISUSE, "%s: need 0..64 inputs and 1..8 outputs (got %d and %d)", name, n_in, n_out);
    for (int i = 0; i < n_in; i++) TD_CHECK_ARG_ST(inputs[i], name);
    td_function_ctx *c = calloc(1, sizeof *c);
    if (!c) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", name);
    c->fn = fn;
    c->user = user;
    c->n_in = n_in;
    for (int i = 0; i < n_in; i++) c->in_requires_grad[i] = inputs[i]->requires_grad;

    td_no_grad_begin();
    td_scope_begin();
    td_status st = fn->forward(c, n_in, inputs, n_out, outputs);
    for (int j = 0; st == TD_OK && j < n_out; j++)
        if (!outputs[j])
            st =
                td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "%s: forward left output %d NULL", name, j);
    for (int j = 0; st == TD_OK && j < n_out; j++) /* an input passed through becomes a new handle */
        outputs[j] = is_input(outputs[j], n_in, inputs) || outputs[j]->requires_grad ? td__alias(outputs[j])
                                                                                     : td_retain(outputs[j]);
    td_scope_end();
    td_no_grad_end();
    if (st != TD_OK) {
        for (int j = 0; j < n_out; j++) outputs[j] = NULL;
        ctx_free(c);
        return st;
    }

    if (!td__any_requires_grad(n_in, inputs) || !td_grad_enabled()) {
        if (!td_grad_enabled()) td__probe_note(n_in, inputs);
        ctx_free(c);
    } else {
        td_node *n = td__node_new(name, bw_custom, -1, n_in, inputs, n_out, outputs);
        if (!n) {
            ctx_free(c);
            for (int j = 0; j < n_out; j++) td_release(outputs[j]), outputs[j] = NULL;
            return td_last_status();
        }
        for (int k = 0; k < c->n_saved; k++) /* saved outputs: detached aliases */
            for (int j = 0; j < n_out; j++)
                if (c->saved[k] == outputs[j]) {
                    c->saved[k] = td__alias(outputs[j]);
                    td_release(outputs[j]);
                    c->saved_out_nr[k] = j;
                }
        n->data = c;
        n->free_data = ctx_free;
        n->free_saved = node_free_saved;
        n->has_saved = c->n_saved > 0;
        c->node = n;
        for (int j = 0; j < n_out; j++)
            if (td_dtype_is_float(outputs[j]->dtype)) td__node_attach(n, outputs[j], j);
        td__node_release(n);
    }
    for (int j = 0; j < n_out; j++) td__scope_add(outputs[j]);
    return TD_OK;
}
