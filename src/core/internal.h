/*
** Core internals shared by src/core, src/autograd and the built-in CPU backend.
** defines: struct td_tensor, td_storage, the error macros, the dispatcher.
*/
#ifndef TRIDENT_CORE_INTERNAL_H
#define TRIDENT_CORE_INTERNAL_H

#include <stdatomic.h>

#include "trident/backend.h"
#include "trident/kernel.h"
#include "trident/ops.h"
#include "trident/profile.h"

#define TD_TENSOR_ALIVE 0x54524944u /* "TRID" */
#define TD_TENSOR_DEAD  0xDEADD00Du

/* Bytes of one allocation: refcounted, owned by the tensors that view it. */
typedef struct td_storage {
    atomic_long refcount;
    td_device device;
    const td_backend *backend;
    td_buffer *buf;
    size_t nbytes;        /* usable bytes, after the leading guard */
    size_t guard;         /* guard bytes on each side (TD_DEBUG_GUARDS), else 0 */
    atomic_ulong version; /* ops that wrote it (the dispatcher counts each output), shared by its views:
                             autograd refuses saved tensors written since they were saved */
    /* autocast's low-precision shadow of a parameter storage (src/core/shadow.c) */
    struct td_tensor *low;     /* +1: a flat tensor of this storage's floats cast to a 16-bit float, or NULL */
    unsigned long low_version; /* the version (and shadow epoch) low matches */
    unsigned long low_epoch;
    unsigned char flags; /* TD__STORAGE_* */
} td_storage;

enum {
    TD__STORAGE_ARENA = 1,  /* a parameter arena (td_module_flatten_parameters): shadowed whole */
    TD__STORAGE_SHARED = 2, /* memory another framework may write (DLPack, td_from_foreign): never shadowed */
};

struct td_node; /* autograd graph node, src/autograd */

struct td_tensor {
    uint32_t magic; /* TD_TENSOR_ALIVE, or TD_TENSOR_DEAD once released */
    atomic_long refcount;
    td_dtype dtype;
    int ndim;
    int64_t shape[TD_MAX_DIMS];
    int64_t strides[TD_MAX_DIMS]; /* elements */
    int64_t offset;               /* elements from the storage start */
    td_storage *storage;
    /* autograd */
    bool requires_grad;
    td_tensor *grad;         /* accumulated gradient of a leaf, or NULL */
    struct td_node *grad_fn; /* node that produced this tensor, or NULL */
    int output_nr;           /* which output of grad_fn */
    void *autograd_meta;     /* hooks and retained grads, owned by src/autograd */
};

/* ---- the profiler (profile.c, trident/profile.h) ----
** td__profiling: recording (td_profile_begin..end); the dispatcher and
** td_module_forward test it once. td__prof_at: where the calling thread issues
** ops: the module path (interned), and in backward the autograd node's name. */
#define TD_PROF_DEPTH 32
typedef struct td__prof_where {
    const char *module, *node;
    bool backward;
    int depth;                        /* td_profile_push nesting */
    const char *stack[TD_PROF_DEPTH]; /* the module before each push */
} td__prof_where;
extern _Atomic bool td__profiling; /* atomic: other threads (data loaders) dispatch while begin/end write it */
extern _Thread_local td__prof_where td__prof_at;
td_status td__profile_run(const td_backend *be, td_device dev, int n, const td_op *ops); /* run, or run_many if n > 1 */
const char *td__profile_intern(const char *s); /* a copy that lives as long as the process; NULL without memory */

/* ---- fault injection (fault.c): TRIDENT_FAULT_ALLOC / TRIDENT_FAULT_WRITE ----
** set: fail the nth buffer allocation (file write of the atomic writer) from
** now on, once; n <= 0 turns it off. Returns the countdown it replaced (0:
** off, or fired). hit: count one; true when it must fail. */
TD_API long long td__fault_alloc_set(long long n);
TD_API long long td__fault_write_set(long long n);
bool td__fault_alloc_hit(void);
bool td__fault_write_hit(void);

/* ---- errors ---- */
td_status td__error_at(const char *file, int line, td_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define TD_ERR(status, ...) td__error_at(__FILE__, __LINE__, (status), __VA_ARGS__)
/* Set an error and return NULL from a tensor-returning function. */
#define TD_FAIL_NULL(status, ...)                                                                                      \
    do {                                                                                                               \
        TD_ERR((status), __VA_ARGS__);                                                                                 \
        return NULL;                                                                                                   \
    } while (0)

/* Validate a tensor argument: NULL keeps an earlier error (or reports misuse),
** a released tensor is TD_ERR_STATE. Returns false when t is unusable. */
bool td__check_arg(const td_tensor *t, const char *op, const char *arg);
#define TD_CHECK_ARG(t, op)                                                                                            \
    do {                                                                                                               \
        if (!td__check_arg((t), (op), #t)) return NULL;                                                                \
    } while (0)
#define TD_CHECK_ARG_ST(t, op)                                                                                         \
    do {                                                                                                               \
        if (!td__check_arg((t), (op), #t)) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;                 \
    } while (0)

/* ---- shapes ---- */
int64_t td__numel(int ndim, const int64_t *shape);
void td__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Normalize a possibly negative dim into [0, ndim); TD_ERR_INDEX on failure. */
bool td__wrap_dim(int *dim, int ndim, const char *op);
/* "[2,3,4]" into buf. */
const char *td__shape_str(int ndim, const int64_t *shape, char *buf, size_t n);

/* ---- tensors ---- */
/* New contiguous tensor, uninitialized (poisoned under TD_DEBUG_POISON). */
td_tensor *td__alloc(int ndim, const int64_t *shape, td_dtype dt, td_device dev);
/* New +1 tensor (not scoped) over storage s, taking s's reference; on failure s is released. */
td_tensor *td__tensor_over(td_storage *s, int ndim, const int64_t *shape, const int64_t *strides, td_dtype dt);
/* New tensor header viewing base's storage with the given geometry. */
td_tensor *td__make_view(td_tensor *base, int ndim, const int64_t *shape, const int64_t *strides, int64_t offset);
td_operand td__view_of(const td_tensor *t);
/* t broadcast to (ndim, shape) as a view descriptor with stride-0 dims. */
td_operand td__view_broadcast(const td_tensor *t, int ndim, const int64_t *shape);
/* Row-major contiguity of a geometry (size-1 dims ignored; an empty one is contiguous): td_operand_is_contiguous. */
bool td__strides_contiguous(int ndim, const int64_t *shape, const int64_t *strides);
/* Register a freshly created +1 tensor with the current scope. Returns t. */
td_tensor *td__scope_add(td_tensor *t);
/* td_scope_end() that moves t (a scoped result; NULL is fine) from the ending
** scope into the enclosing one, for front-ends built from other ops. Returns t. */
td_tensor *td__scope_end_keep(td_tensor *t);
/* Host address of element 0 of a CPU tensor (NULL elsewhere). */
void *td__host_data(const td_tensor *t);

/* ---- dispatch ----
** Runs one op on the device of its operands: checks that every non-NULL
** operand is on one device, builds the views, asks the backend whether it
** supports the op, runs it, and records it for autograd when needed.
** in[k] may be NULL for absent optional operands. in_views may be NULL, in
** which case plain views of in[] are used; otherwise in_views[k] describes
** in[k] (e.g. broadcast). Exported for the tests (test_conformance's operand_rules). */
TD_API td_status td__dispatch(td_op_kind kind, int n_in, td_tensor *const *in, const td_operand *in_views, int n_out,
                              td_tensor *const *out, const td_op_params *p);
/* Whether the backend of the operands' device would take kind with exactly these
** views (its supports()), without running it: the front-end of an op that offers
** strided operands first (ATTENTION*) asks this and makes them contiguous where not. Exported for the tests
** (test_conformance's linear_wgrad: a backend that declines its f32 outputs). A NULL in[k] or out[k] is an
** absent optional operand. */
TD_API bool td__supports(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                         const td_op_params *p);
/* td__dispatch for ops of layout TD_LAYOUT_CONTIG: runs kind on contiguous
** copies of the non-NULL in[0..n_in) (n_in <= 4) and releases the copies
** before returning. A NULL out[k] (a failed td__alloc) returns the error
** already set, so callers may pass td__alloc results unchecked. */
td_status td__dispatch_contig(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                              const td_op_params *p);
/* Batches (the optimizer's step): between begin and end, this thread's
** ADAM_STEP/SGD_STEP/AMP_UNSCALE ops on a backend with run_many are held and sent as one
** multi-tensor call; end returns the first error of the held ops. */
void td__batch_begin(void);
td_status td__batch_end(void);
/* The tail of a front-end: on TD_OK registers out with the current scope and
** returns it; otherwise releases out (NULL is fine) and returns NULL. */
td_tensor *td__finish(td_status st, td_tensor *out);

/* (set by src/autograd) called after each successful dispatch of a
** differentiable op whose inputs require grad while grad mode is on. A failure
** (no formula, out of memory) fails the op: its result is released. */
typedef td_status (*td__record_fn)(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                                   const td_op_params *p);
TD_API extern td__record_fn td__record_hook; /* exported for the tests */
/* (set by src/autograd) frees a tensor's autograd state when it is released. */
extern void (*td__release_hook)(td_tensor *t);
/* What a view op did, so autograd can send gradients back to the base.
** squeeze/unsqueeze/flatten go through td_view and report RESHAPE. */
typedef enum td__view_kind {
    TD__VIEW_RESHAPE,
    TD__VIEW_PERMUTE,
    TD__VIEW_SLICE,
    TD__VIEW_SELECT,
    TD__VIEW_EXPAND
} td__view_kind;
typedef struct td__view_info {
    td__view_kind kind;
    int dim;                  /* SLICE, SELECT: the (wrapped) dim */
    int64_t start, end, step; /* SLICE: clamped bounds; SELECT: start is the (wrapped) index */
    int perm[TD_MAX_DIMS];    /* PERMUTE: view dim i is base dim perm[i] */
} td__view_info;
/* (set by src/autograd) records that view was made from base by a view op
** (reshape, permute, slice, select, expand, ...), so gradients flow back. */
extern void (*td__view_hook)(td_tensor *base, td_tensor *view, const td__view_info *info);
/* (set by src/autograd) records that views[0..n) split base along dim (td_split). */
extern void (*td__split_hook)(td_tensor *base, int n, td_tensor *const *views, int dim);

/* ---- internal ops (autograd formulas) ----
** dy [..., D], idx int [...] -> dweight [num_weights, D]: rows of dy summed by
** index, rows of padding_idx left zero (padding_idx < 0: none). Exported for
** the tests. */
TD_API td_tensor *td__embedding_backward(td_tensor *dy, td_tensor *idx, int64_t num_weights, int64_t padding_idx);
/* dy * gelu'(x) (GELU_BACKWARD), erf or tanh form; dy and x broadcast; float
** dtypes. CONSTRUCTOR. Exported for the tests. */
TD_API td_tensor *td__gelu_backward(td_tensor *dy, td_tensor *x, bool tanh_approx);
/* ---- backward front-ends of fused nn ops (called by autograd; exported for tests) ----
** Each validates its arguments like the forward op, makes operands contiguous
** and returns a new tensor in the current scope, or NULL with the error set.
** dloss has the loss's shape; dlogits, dx and dw have the shapes of logits, x and w. */
/* The CROSS_ENTROPY op: logits [N, C] (or [C]); target int64 [N] of class ids
** in [0, C) or ignore_index; weight [C] or NULL. td_cross_entropy_loss (nn.h)
** is the public entry point over it. Exported for the tests and benchmarks. */
TD_API td_tensor *td__cross_entropy(td_tensor *logits, td_tensor *target, td_tensor *weight, int64_t ignore_index,
                                    double label_smoothing, int reduction);
TD_API td_tensor *td__cross_entropy_backward(td_tensor *dloss, td_tensor *logits, td_tensor *target, td_tensor *weight,
                                             int64_t ignore_index, double label_smoothing, int reduction);
/* The same with lse, the rows' logsumexp CROSS_ENTROPY saved (f32, f64 for f64 logits; NULL: found again). */
TD_API td_tensor *td__cross_entropy_backward_lse(td_tensor *dloss, td_tensor *logits, td_tensor *target,
                                                 td_tensor *weight, td_tensor *lse, int64_t ignore_index,
                                                 double label_smoothing, int reduction);
/* Over the last dim of dy, y (one shape; dy cast to y's dtype), for y = softmax(x) / log_softmax(x):
**   softmax_backward:     dx = y (dy - sum_last(dy y))
**   log_softmax_backward: dx = dy - e^y sum_last(dy) */
TD_API td_tensor *td__softmax_backward(td_tensor *dy, td_tensor *y);
TD_API td_tensor *td__log_softmax_backward(td_tensor *dy, td_tensor *y);
/* dy [N,O,Ho,Wo], w [O,C/g,kh,kw] -> dx [N,C,H,W] = x_shape */
TD_API td_tensor *td__conv2d_backward_input(td_tensor *dy, td_tensor *w, const int64_t x_shape[4], const int stride[2],
                                            const int padding[2], const int dilation[2], int groups);
/* dy [N,O,Ho,Wo], x [N,C,H,W] -> dw [O,C/g,kh,kw] = w_shape */
TD_API td_tensor *td__conv2d_backward_weight(td_tensor *dy, td_tensor *x, const int64_t w_shape[4], const int stride[2],
                                             const int padding[2], const int dilation[2], int groups);
/* ATTENTION_BACKWARD: dout, q, k, v, out [N0,N1,L|S,E|Ev] and lse [N0,N1,L] as the forward op saw them,
** mask its 4-d broadcast view (NULL: none) -> dq, dk, dv (OUT, scope-owned; NULL for those not wanted). */
TD_API td_status td__attention_backward(td_tensor *dout, td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *mask,
                                        td_tensor *out, td_tensor *lse, const td_op_params *p, td_tensor **dq,
                                        td_tensor **dk, td_tensor **dv);
/* dy [N,C,Ho,Wo], indices int64 [N,C,Ho,Wo] (from td_max_pool2d) -> dx [N,C,H,W] = x_shape */
TD_API td_tensor *td__max_pool2d_backward(td_tensor *dy, td_tensor *indices, const int64_t x_shape[4]);
/* dy [N,C,Ho,Wo] -> dx [N,C,H,W] = x_shape */
TD_API td_tensor *td__avg_pool2d_backward(td_tensor *dy, const int64_t x_shape[4], const int kernel[2],
                                          const int stride[2], const int padding[2], bool count_include_pad);

/* ---- custom ops ----
** custom_op.c checks a call and runs the op's kernels; src/autograd/custom_function.c
** is td_custom_op_call, which records the calls that need it. */
#define TD__CUSTOM_MAX_IN  8
#define TD__CUSTOM_MAX_OUT 4
/* One call: c.internal points to it while kernels, shape function or backward run. */
typedef struct td__custom_state {
    td_custom_op *op;
    td_custom_call call;
    td_custom_meta meta[TD__CUSTOM_MAX_OUT]; /* the outputs, from the shape function */
    struct td_function_ctx *ctx;             /* (set by src/autograd) the recorded call's ctx, else NULL */
} td__custom_state;
/* Check a call of op (counts, parameters, one device, an impl for it), run the
** shape function and fill *s. outputs[0..n_out) are set to NULL first. */
td_status td__custom_prepare(const td_custom_op *op, int n_in, td_tensor *const *inputs, int n_params,
                             const float *params, int n_out, td_tensor **outputs, td__custom_state *s);
/* Forward of a prepared call: outputs[0..n_out) in the current scope, of the meta's dtypes. */
td_status td__custom_forward(td__custom_state *s, td_tensor *const *inputs, td_tensor **outputs);
/* Forward with grad mode off; outputs +1 and added to the current scope; errors prefixed with the op's name. */
td_status td__custom_run(td__custom_state *s, td_tensor *const *inputs, td_tensor **outputs);
/* The definition op was registered with (its name, counts and backward). */
const td_custom_op_def *td__custom_def(const td_custom_op *op);

/* ---- autocast (autocast.c) ----
** When an autocast scope is open for the device type of the first non-NULL
** in[k], apply kind's policy (the amp column of TD_OP_LIST): each in[k] to be
** cast is replaced by its cast, a +1 reference also kept in held[k] (the
** others NULL). Front-ends call it before they look at dtypes, then
** td__autocast_release(n, held) once the op ran. Returns false with the error
** set when a cast fails (held is then released). */
bool td__autocast(td_op_kind kind, int n, td_tensor **in, td_tensor **held);
void td__autocast_release(int n, td_tensor **held);
/* Turn autocast off (on = true) and back on, nesting: the autograd engine's
** backward pass runs with it off. */
void td__autocast_suspend(bool on);
/* Parameters cast and cached in this thread's scope (tests). */
TD_API int td__autocast_cache_size(void);

/* ---- parameter shadows (shadow.c) ----
** A parameter's storage may keep its floats cast to autocast's 16-bit dtype,
** so that the next autocast region reads the cast without a pass: the
** optimizer's step writes it beside the parameter (ADAM_STEP's low output),
** and any other write makes it stale (the storage's version, counted by the
** dispatcher; a shadow epoch that captures and replays, which write without
** the dispatcher, advance). */
/* t cast to dt from its storage's shadow, recorded for autograd as a COPY of
** t, into *out (+1; NULL with the error set on failure): true when t is a
** shadowable parameter (a float32 leaf that requires grad, contiguous, the
** whole of its storage or a view of a parameter arena, on a device that is not
** capturing); false, *out untouched, when it is not. A stale shadow is first
** refreshed by one cast of the whole storage. */
bool td__shadow_cast(td_tensor *t, td_dtype dt, td_tensor **out);
/* The current shadow of param's elements as a +1 view (for an optimizer step
** to write beside param), or NULL when its storage has none current. */
td_tensor *td__shadow_view(td_tensor *param);
/* Count a write of out[0..n) (NULLs skipped): each storage's version
** advances; a storage written together with its current shadow by one op keeps
** the shadow current. The dispatcher's bookkeeping after an op. */
void td__storage_written(int n, td_tensor *const *out);
/* t's storage's shadow goes stale (a user kernel may have written t). */
void td__shadow_drop(const td_tensor *t);
/* Every shadow goes stale: a capture began or ended, a graph was replayed. */
void td__shadow_forget_all(void);
/* Whether a capture is open on some device (no shadow is read or written then). */
void td__shadow_capturing(bool begin);

/* ---- kernels (kernel.c) ---- */
/* td_kernel_launch for the library's own kernels (math blocks, custom ops,
** the LSTM's steps), which write only their outputs: no parameter's shadow is dropped. */
td_status td__kernel_launch(td_user_kernel *k, const uint32_t grid[3], const uint32_t block[3], size_t shared_bytes,
                            int n, td_tensor *const *tensors, const void *push, size_t push_size);

/* ---- device waits ---- */
/* Counts a device-to-host wait on s's device (none on the CPU): td_host_sync_count. */
void td__count_host_sync(const td_storage *s);
/* The td_op.flags the current settings give an op (TD_OP_FLAG_TF32 for fp32 matmul/conv under "high"). */
uint32_t td__op_flags(td_op_kind kind);

/* ---- value checks on the device (device_check.c) ---- */
/* bad: a bool tensor, true where the input was wrong. The CPU checks at once
** (false with code and the message set when any is true); a GPU records it
** and returns true, and the next host read of the device reports it. */
bool td__device_check(td_tensor *bad, td_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The first recorded check of dev that failed (then cleared), or TD_OK. */
td_status td__device_check_report(td_device dev);

/* ---- backends ---- */
const td_backend *td__backend_of(td_device dev); /* NULL with error if unavailable */
extern const td_backend td_cpu_backend;

#endif /* TRIDENT_CORE_INTERNAL_H */
