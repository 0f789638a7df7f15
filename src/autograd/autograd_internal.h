/*
** Autograd internals shared by the files of src/autograd.
** defines: td_node (a recorded op), td__edge, td__tmeta, td__formula (the
** derivative table), saved-tensor access, the engine entry td__engine_run.
**
** Ownership in the graph:
**   tensor --grad_fn--> node          (+1 on the node)
**   node --edge--> producer node       (+1), or --edge--> leaf tensor (+1)
**   node --saved--> input tensor       (+1); outputs are saved as detached
**                                      aliases, so no cycle exists.
** A node is freed when its last reference goes (iteratively, so long chains
** cannot overflow the stack).
*/
#ifndef TRIDENT_AUTOGRAD_INTERNAL_H
#define TRIDENT_AUTOGRAD_INTERNAL_H

#include "../core/internal.h"
#include "trident/autograd.h"

/* Shape, dtype and device of an operand when it was recorded. */
typedef struct td__tmeta {
    bool present; /* false for an absent optional operand */
    td_dtype dtype;
    int ndim;
    int64_t shape[TD_MAX_DIMS];
    td_device device;
} td__tmeta;

/* Where the gradient of one input goes: the node that produced it (and which
** of its outputs), or the leaf itself; both NULL when it needs no gradient. */
typedef struct td__edge {
    struct td_node *node;
    int nr;
    td_tensor *leaf;
} td__edge;

typedef struct td_node td_node;

/* Backward of one node: gy[j] is the gradient of output j (NULL when none
** reached it); write gx[i] for the inputs with td__needs(n, i), as tensors made
** with ops (they may belong to the current scope: the engine runs each node in
** its own scope and takes references). gx[i] may have a broadcast shape of
** input i, or another float dtype: the engine sums and casts it down. */
typedef td_status (*td__backward_fn)(td_node *n, td_tensor *const *gy, td_tensor **gx);

struct td_node {
    atomic_long refcount;
    const char *name; /* op name or custom function name */
    td__backward_fn backward;
    int kind; /* td_op_kind, or -1 (view, custom, checkpoint) */
    td_op_params p;
    int n_in, n_out;
    td__edge *edges;         /* n_in */
    td__tmeta *in_meta;      /* n_in */
    td__tmeta *out_meta;     /* n_out */
    td_tensor **saved_in;    /* n_in: retained inputs the formula needs, else NULL */
    td_tensor **saved_out;   /* n_out: detached aliases of outputs it needs, else NULL */
    uint64_t *saved_version; /* n_in + n_out: the storage version of each saved tensor when saved */
    bool has_saved;          /* the formula needs saved state */
    bool saved_freed;        /* ... and it was freed by a backward */
    bool side_effects;       /* runs in td_backward even when no input needs a gradient (checkpoint:
                                it accumulates into the parameters its region reads) */
    void *data;              /* view info, custom ctx, checkpoint state */
    void (*free_data)(void *data);
    void (*free_saved)(td_node *n); /* (optional) extra saved state to drop with the graph */
    const char *module;             /* under the profiler: the module whose forward recorded it */
    /* per-run engine state */
    uint64_t run;
    int state;          /* 0 unvisited, 1 on the DFS stack, 2 done */
    uint64_t need_mask; /* inputs whose gradient this run needs */
    uint64_t wide_mask; /* inputs whose gradient may come in their cast's source dtype (td__grad_dtype) */
    td_tensor **buf;    /* n_out accumulated output gradients */
};

/* A derivative formula and what it needs saved: bit i of save_in keeps input
** i, bit j of save_out keeps output j. n_diff_out: outputs that carry
** gradients (the first ones; the rest, such as layer_norm's mean/rstd, do not
** require grad). 0 means all. */
typedef struct td__formula {
    td__backward_fn fn;
    uint32_t save_in, save_out;
    int n_diff_out;
} td__formula;

/* The formula of kind, or NULL (formulas.c's table). */
const td__formula *td__formula_for(td_op_kind kind);
/* The formulas of the family files formulas_<family>.c, each a td__backward (the table is formulas.c's). */
typedef td_status td__backward(td_node *n, td_tensor *const *gy, td_tensor **gx);
td__backward td__bw_copy, td__bw_add, td__bw_sub, td__bw_mul, td__bw_div, td__bw_pow, td__bw_maximum, td__bw_minimum,
    td__bw_where, td__bw_neg, td__bw_abs, td__bw_exp, td__bw_log, td__bw_sqrt, td__bw_rsqrt, td__bw_sin, td__bw_cos,
    td__bw_tanh, td__bw_sigmoid, td__bw_relu, td__bw_gelu, td__bw_gelu_backward, td__bw_silu, td__bw_clamp, td__bw_sum,
    td__bw_mean, td__bw_extremum, td__bw_var, td__bw_logsumexp, td__bw_attention, td__bw_matmul, td__bw_linear,
    td__bw_linear_gelu, td__bw_linear_residual, td__bw_softmax, td__bw_log_softmax, td__bw_layer_norm,
    td__bw_add_layer_norm, td__bw_group_norm, td__bw_cross_entropy, td__bw_conv2d, td__bw_max_pool2d, td__bw_avg_pool2d,
    td__bw_dropout, td__bw_cross_entropy_backward, td__bw_softmax_backward, td__bw_log_softmax_backward,
    td__bw_conv2d_backward_input, td__bw_conv2d_backward_weight, td__bw_max_pool2d_backward, td__bw_avg_pool2d_backward,
    td__bw_embedding, td__bw_embedding_backward, td__bw_index_select, td__bw_gather, td__bw_scatter_add, td__bw_cat;

/* ---- nodes (graph.c) ---- */
/* New node with refcount 1 and edges to in[] (those requiring grad). */
td_node *td__node_new(const char *name, td__backward_fn fn, int kind, int n_in, td_tensor *const *in, int n_out,
                      td_tensor *const *out);
void td__node_retain(td_node *n);
void td__node_release(td_node *n);
/* Make out a non-leaf output nr of n (requires_grad, grad_fn = n, +1). */
void td__node_attach(td_node *n, td_tensor *out, int nr);
/* A detached alias of t (same storage and geometry, no grad), +1, unscoped. */
td_tensor *td__alias(td_tensor *t);
/* Whether input i's gradient is needed by the current backward run. */
static inline bool td__needs(const td_node *n, int i) { return (n->need_mask >> i) & 1; }
/* The dtype in which n's formula may hand back input i's gradient: the input's
** own, or, where the input is a same-device cast from a wider float (autocast's
** weight casts: the f32 parameter cast to bf16) whose backward this run only
** widens again, the cast's source dtype, so that a formula that can write its
** result wide (LINEAR_WGRAD's dw and db) saves that cast. Not under
** create_graph, nor for a cast whose own gradient td_grad returns. */
static inline td_dtype td__grad_dtype(const td_node *n, int i) {
    return i < 64 && (n->wide_mask >> i) & 1 ? n->edges[i].node->in_meta[0].dtype : n->in_meta[i].dtype;
}
/* td__grad_dtype of a custom function's node for input i (function.c), or
** dflt where there is none (no node recorded, i out of range) */
td_dtype td__ctx_grad_dtype(const td_function_ctx *ctx, int i, td_dtype dflt);
/* Saved input i (borrowed), or saved output j: a detached alias, re-attached
** to n (scope-owned) when grad mode is on so that create_graph differentiates
** through it. */
td_tensor *td__saved_input(td_node *n, int i);
td_tensor *td__saved_output(td_node *n, int j);
/* Drop a node's saved state (after a backward without retain_graph). */
void td__node_free_saved(td_node *n);

/* Any of in[0..n) requires grad. */
bool td__any_requires_grad(int n, td_tensor *const *in);
/* Probe mode (checkpoint forward): with grad mode off, note whether any
** recorded op or view read a tensor that requires grad. begin returns the
** outer probe's state, to pass to end; end returns whether this probe hit. */
bool td__probe_begin(void);
bool td__probe_end(bool outer);
void td__probe_note(int n, td_tensor *const *in);

/* The view hooks (formulas_view.c). */
void td__record_view(td_tensor *base, td_tensor *view, const td__view_info *info);
void td__record_split(td_tensor *base, int n, td_tensor *const *views, int dim);
/* Free a tensor's autograd_meta (tensor_grad.c). */
void td__free_tensor_meta(void *meta);
/* A leaf's gradient slot (tensor_grad.c): a tensor of the leaf's shape and
** dtype, retained, that backward writes (the first gradient) or adds (the
** next ones) into in place and then makes .grad, so that .grad stays a view of
** a parameter arena (td_module_flatten_parameters). NULL clears it. */
td_status td__set_grad_slot(td_tensor *t, td_tensor *slot);
td_tensor *td__grad_slot(const td_tensor *t); /* borrowed, or NULL */

/* ---- engine (engine.c) ----
** Backpropagate grads[i] from roots[i] (grads[i] may be NULL for a one-element
** root). When accumulate, leaf gradients go into .grad; captures[k] (any
** tensors) receive a +1 gradient in captured[k] (NULL when none reached it). */
typedef struct td__engine_req {
    int n_roots;
    td_tensor *const *roots;
    td_tensor *const *grads;
    int n_captures;
    td_tensor *const *captures;
    td_tensor **captured;
    bool accumulate, retain_graph, create_graph;
    const char *api; /* "backward" or "grad", for messages */
} td__engine_req;
td_status td__engine_run(const td__engine_req *req);
/* Whether the run now executing on this thread accumulates into .grad
** (td_backward) or not (td_grad); checkpoint's inner run follows it. */
bool td__engine_accumulating(void);
/* The gradient summed so far for input i of n, the node whose formula runs now
** on this thread, taken out of the engine's sum, so that a kernel that can add
** a tensor into its result in the same pass (LAYER_NORM_BACKWARD's ds) returns
** the total where the engine would add the two in a pass of its own; the
** formula's gx[i] must then include it (borrowed, scope-owned). NULL (nothing
** taken) when none is pending, when n does not run now or i's gradient is not
** needed, under create_graph (the sum would have to be differentiable), or
** when its dtype or shape is not input i's, and always with TRIDENT_GRAD_TAKE=0
** (the engine's add passes, the baseline). Leaf hooks and captures see the
** same total, as they read it only when the last contribution is in. */
td_tensor *td__take_input_grad(const td_node *n, int i);

/* A narrow copy of gradient g made in the same pass as g by the formula that made it (LAYER_NORM_BACKWARD's dxn:
** td_cast(g, twin's dtype) bit for bit), for the node that receives g and casts it (td__grad_cast): kept (+1
** each) by the run of the formula that runs now until taken or the run ends (at most TD__GRAD_TWINS at once);
** nothing outside a formula, under create_graph, or with TRIDENT_GRAD_TWIN=0 (the consumers' casts, the
** baseline). */
#define TD__GRAD_TWINS 8
void td__grad_twin_put(td_tensor *g, td_tensor *twin);
/* g cast to dt (borrowed, scope-owned): the twin td__grad_twin_put left for this very tensor while its storage is
** unchanged since (its version), taken out of the run; else td_cast(g, dt); g itself when it is dt already. */
td_tensor *td__grad_cast(td_tensor *g, td_dtype dt);
/* The dtype node p's formula casts output nr's gradient to (td__grad_cast) before its products, or
** TD_DTYPE_COUNT (none, or no node): LINEAR_RESIDUAL's and the fused MLP's, autocast's bf16 activations beside
** an f32 residual stream (formulas_nn.c). */
td_dtype td__grad_cast_dtype(const td_node *p, int nr);
/* the fused MLP node's (mlp_gelu.c): its x's dtype, the one its backward casts dy to; TD_DTYPE_COUNT for
** another node */
td_dtype td__mlp_gelu_dy_dtype(const td_node *p);

/* The end of a call that hands out ts[0..n) (+1 each): on TD_OK they join the
** current scope, else they are released and set to NULL. Returns st. */
td_status td__hand_out(td_status st, int n, td_tensor **ts);

/* Hooks of a leaf run on its gradient; returns +1 (the result or grad). */
td_tensor *td__run_leaf_hooks(td_tensor *leaf, td_tensor *grad);
/* Whether leaf has gradient hooks (td__run_leaf_hooks would call any). */
bool td__has_leaf_hooks(const td_tensor *leaf);
/* Run leaf's post-accumulate hooks (after its .grad was updated); the first error. */
td_status td__run_post_accumulate_hooks(td_tensor *leaf);

/* ---- helpers for formulas (formulas.c) ---- */
/* g summed over the dims where it is broadcast relative to (ndim, shape):
** leading dims and dims of size 1. Scope-owned; g itself when nothing to do. */
td_tensor *td__sum_to(td_tensor *g, int ndim, const int64_t *shape);
/* 0-d tensor of value with like's dtype and device, scope-owned. */
td_tensor *td__scalar_like(td_tensor *like, double value);
/* Bool mask as like's dtype (1/0), scope-owned. */
td_tensor *td__mask_as(td_tensor *mask, td_tensor *like);
/* Zeros shaped by meta, with dtype dt and device dev, scope-owned. */
td_tensor *td__zeros_meta(const td__tmeta *m, td_dtype dt);

/* A formula's return value: TD_OK when every needed gx[i] was made, else the
** error that stopped it. */
td_status td__done(const td_node *n, td_tensor *const *gx);

#endif /* TRIDENT_AUTOGRAD_INTERNAL_H */
