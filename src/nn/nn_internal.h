/*
** nn internals shared by src/nn and src/optim.
** defines: struct td_module and its vtable, the forward-scope helpers,
** module construction helpers for built-in layers.
*/
#ifndef TRIDENT_NN_INTERNAL_H
#define TRIDENT_NN_INTERNAL_H

#include "core/internal.h"
#include "trident/autograd.h"
#include "trident/nn.h"

/* The behaviour of one class of module. */
typedef struct td_module_i {
    const char *type;                                  /* class name, "Linear" */
    td_tensor *(*forward)(td_module *m, td_tensor *x); /* runs inside a forward scope */
    void (*free_ctx)(void *ctx);                       /* (optional) frees ctx; NULL: free() */
} td_module_i;

/* One named slot: a parameter, a buffer or a child. */
typedef struct td_entry {
    char *name;
    union {
        td_tensor *tensor;
        td_module *child;
    };
} td_entry;

typedef struct td_entries {
    td_entry *items;
    int n, cap;
} td_entries;

/* One dtype's parameter arena (param_arena.c): flat [numel] tensors, +1. */
typedef struct td_arena {
    td_dtype dtype;
    td_tensor *params, *grads;
} td_arena;

struct td_module {
    const td_module_i *iface;
    void *ctx; /* layer configuration, owned */
    bool training;
    bool has_parent;
    td_entries params, buffers, children;
    /* custom modules (td_module_new) */
    td_forward_fn user_forward;
    void *user;
    void (*free_user)(void *);
    /* td_module_flatten_parameters on this module: one arena per dtype */
    td_arena *arenas;
    int n_arenas;
    td_device arena_device;
};

/* New module of the given class with a zeroed ctx of ctx_size bytes (may be
** 0). NULL with TD_ERR_OOM. */
td_module *td__module_alloc(const td_module_i *iface, size_t ctx_size);

/* Register a new parameter: takes ownership of the +1 tensor t (also on
** failure) and marks it requires_grad. */
td_status td__module_add_param(td_module *m, const char *name, td_tensor *t);
/* Register a new buffer, taking ownership of t. */
td_status td__module_add_buffer(td_module *m, const char *name, td_tensor *t);

/* Parameter/buffer i of m, in registration order (borrowed). */
static inline td_tensor *td__param(td_module *m, int i) { return m->params.items[i].tensor; }
static inline td_tensor *td__buffer(td_module *m, int i) { return m->buffers.items[i].tensor; }

/* Release m's arena records (the parameters keep viewing the storages). */
void td__module_arena_free(td_module *m);
/* Flatten m again onto its arena's device after a move; TD_OK when it has none. */
td_status td__module_reflatten(td_module *m);

/* Check that m is a module of class iface, naming fn in the error. */
bool td__module_is(const td_module *m, const td_module_i *iface, const char *fn);

/* Check that x has one of the given ndims (a bitmask: bit k = k dims), naming
** layer and what the dims mean in the error. */
bool td__check_ndim(td_tensor *x, unsigned ndims, const char *layer, const char *layout);
/* The input and weight of a 1-D or 2-D convolution module (Conv*, ConvTranspose*) as the 4-D operands of the 2-D
** op: checks x's rank and its in channels, adds the batch dim to an unbatched x (*unbatched), and for 1-D a height
** of 1 to x and w. false with the error set. td__conv_result undoes both on the op's output. */
bool td__conv_operands(const char *type, bool one_d, int64_t in, td_tensor **x, td_tensor **w, bool *unbatched);
td_tensor *td__conv_result(td_tensor *y, bool one_d, bool unbatched);

/* A +1 uninitialized float32 tensor on the CPU, outside any scope, for a
** parameter or buffer of a new layer. */
td_tensor *td__new_param(int ndim, const int64_t *shape);

/* Linear's default init of weight (fan_in from its shape) and optional bias:
** kaiming_uniform(a=sqrt(5)) and U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
td_status td__init_linear_like(td_tensor *weight, td_tensor *bias);

/* Gives the new layer m its parameters "weight" (wshape, wnd dims) and, when bias, "bias" ([wshape[0]]), with
** Linear's default init: m, or NULL after freeing m. */
td_module *td__with_linear_params(td_module *m, int wnd, const int64_t *wshape, bool bias);

/* Softmax or log-softmax of x over any dim (the ops take the last). */
td_tensor *td__softmax_dim(td_tensor *x, int dim, bool log);

#endif /* TRIDENT_NN_INTERNAL_H */
