/*
** Gradient checkpointing: run a region without recording, keep only its
** inputs, and recompute it in backward (with the default generator restored,
** so dropout draws the same masks), then backpropagate through the copy.
*/
#include <stdlib.h>

#include "autograd_internal.h"

typedef struct ckpt {
    td_region_fn fn;
    void *user;
    td_rng_state rng; /* the default generator when the region first ran */
    int n_in;
    td_tensor **inputs; /* +1 each; NULL once freed */
} ckpt;

static void ckpt_free_saved(td_node *n) {
    ckpt *c = n->data;
    for (int i = 0; c->inputs && i < c->n_in; i++) td_release(c->inputs[i]);
    free(c->inputs);
    c->inputs = NULL;
}

static void ckpt_free(void *p) {
    ckpt *c = p;
    for (int i = 0; c->inputs && i < c->n_in; i++) td_release(c->inputs[i]);
    free(c->inputs);
    free(c);
}

/* Run fn on inputs into outputs[] as +1 unscoped tensors, grad mode as given. */
static td_status run_region(ckpt *c, td_tensor *const *inputs, int n_out, td_tensor **outputs, bool grad) {
    for (int j = 0; j < n_out; j++) outputs[j] = NULL;
    if (grad)
        td_enable_grad_begin();
    else
        td_no_grad_begin();
    td_scope_begin();
    td_status st = c->fn(c->user, c->n_in, inputs, n_out, outputs);
    for (int j = 0; st == TD_OK && j < n_out; j++)
        if (!outputs[j])
            st = td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "checkpoint: fn left output %d NULL", j);
    for (int j = 0; j < n_out; j++) {
        bool pass_through = false;
        for (int i = 0; st == TD_OK && i < c->n_in; i++) pass_through |= outputs[j] == inputs[i];
        outputs[j] = st != TD_OK ? NULL : pass_through ? td__alias(outputs[j]) : td_retain(outputs[j]);
    }
    td_scope_end();
    if (grad)
        td_enable_grad_end();
    else
        td_no_grad_end();
    return st;
}

/* outputs = fn(inputs): recompute with grad on, then backpropagate dy through
** the recomputed graph to detached copies of the inputs (and into the .grad
** of parameters fn uses, when the outer run accumulates) */
static td_status bw_checkpoint(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    ckpt *c = n->data;
    td_tensor *x[64], *y[8], *roots[8], *rg[8], *captures[64], *captured[64];
    int n_roots = 0, n_cap = 0, cap_of[64];
    for (int i = 0; i < c->n_in; i++) {
        x[i] = td_detach(c->inputs[i]);
        if (!x[i]) return td_last_status();
        if (td__needs(n, i)) {
            td_set_requires_grad(x[i], true);
            cap_of[n_cap] = i;
            captures[n_cap++] = x[i];
        }
    }
    td_rng_state now = td_rng_get_state();
    td_rng_set_state(c->rng);
    td_status st = run_region(c, x, n->n_out, y, true);
    td_rng_set_state(now);
    if (st != TD_OK) return st;
    for (int j = 0; j < n->n_out; j++) {
        td__scope_add(y[j]);
        if (gy[j] && y[j]->requires_grad) roots[n_roots] = y[j], rg[n_roots++] = gy[j];
    }
    if (!n_roots) return TD_OK;
    td__engine_req req = {.n_roots = n_roots,
                          .roots = roots,
                          .grads = rg,
                          .n_captures = n_cap,
                          .captures = captures,
                          .captured = captured,
                          .accumulate = td__engine_accumulating(),
                          .create_graph = td_grad_enabled(),
                          .api = "checkpoint"};
    st = td__engine_run(&req);
    for (int k = 0; st == TD_OK && k < n_cap; k++) gx[cap_of[k]] = td__scope_add(captured[k]);
    return st;
}

td_status td_checkpoint(td_region_fn fn, void *user, int n_in, td_tensor *const *inputs, int n_out,
                        td_tensor **outputs) {
    if (outputs)
        for (int j = 0; j < n_out; j++) outputs[j] = NULL;
    if (!fn || n_in < 0 || n_in > 64 || n_out < 1 || n_out > 8 || !outputs || (n_in && !inputs))
        return TD_ERR(TD_ERR_MISUSE, "checkpoint: need fn, 0..64 inputs and 1..8 outputs (got %d and %d)", n_in, n_out);
    for (int i = 0; i < n_in; i++) TD_CHECK_ARG_ST(inputs[i], "checkpoint");
    ckpt *c = calloc(1, sizeof *c);
    td_tensor **kept = calloc((size_t)(n_in ? n_in : 1), sizeof *kept);
    if (!c || !kept) {
        free(c), free(kept);
        return TD_ERR(TD_ERR_OOM, "checkpoint: out of host memory");
    }
    *c = (ckpt){fn, user, td_rng_get_state(), n_in, kept};
    bool recording = td_grad_enabled();
    bool outer = td__probe_begin();
    td_status st = run_region(c, inputs, n_out, outputs, false);
    bool reads_grad = td__probe_end(outer);
    if (st != TD_OK) {
        ckpt_free(c);
        return st;
    }
    td_node *n =
        recording && reads_grad ? td__node_new("checkpoint", bw_checkpoint, -1, n_in, inputs, n_out, outputs) : NULL;
    if (n) {
        for (int i = 0; i < n_in; i++) kept[i] = td_retain(inputs[i]);
        n->data = c;
        n->free_data = ckpt_free;
        n->free_saved = ckpt_free_saved;
        n->has_saved = true;
        n->side_effects = true;
        for (int j = 0; j < n_out; j++)
            if (td_dtype_is_float(outputs[j]->dtype)) td__node_attach(n, outputs[j], j);
        td__node_release(n);
    } else {
        ckpt_free(c);
        if (recording && reads_grad) { /* recording failed (out of memory) */
            for (int j = 0; j < n_out; j++) td_release(outputs[j]), outputs[j] = NULL;
            return td_last_status();
        }
    }
    for (int j = 0; j < n_out; j++) td__scope_add(outputs[j]);
    return TD_OK;
}
