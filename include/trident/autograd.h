/*
** Autograd: reverse-mode differentiation recorded by the dispatcher.
**
** When grad mode is on and an input of a differentiable op requires grad,
** the op is recorded as a node of the graph; td_backward() walks the graph in
** reverse topological order and accumulates (+=) into the .grad of leaves.
** Derivative formulas are written in terms of ops, so they run on every
** backend.
*/
#ifndef TRIDENT_AUTOGRAD_H
#define TRIDENT_AUTOGRAD_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* METHOD. Mark a leaf tensor as requiring grad (or not). Fails with
** TD_ERR_DTYPE for non-float tensors and TD_ERR_MISUSE for non-leaves. */
TD_API td_status td_set_requires_grad(td_tensor *t, bool requires_grad);
/* GETTER. Whether t requires grad; false for NULL. */
TD_API bool td_requires_grad(const td_tensor *t);
/* GETTER. Borrowed accumulated gradient of t, or NULL when none. */
TD_API td_tensor *td_grad_of(const td_tensor *t);
/* METHOD. Drop t's gradient (PyTorch's zero_grad(set_to_none=True)). */
TD_API void td_zero_grad(td_tensor *t);
/* METHOD. True when t has no grad_fn, i.e. it was not produced by a recorded
** op (tensors that do not require grad are leaves too, as in PyTorch). */
TD_API bool td_is_leaf(const td_tensor *t);

/* METHOD. Backpropagate from t. grad_output may be NULL only when t has one
** element (it defaults to 1). Unless retain_graph, the graph's saved tensors
** are freed and a second backward through it fails with TD_ERR_STATE.
** Returns TD_ERR_MISUSE for a non-scalar without grad_output or a t that does
** not require grad, TD_ERR_SHAPE when grad_output's shape differs. */
TD_API td_status td_backward(td_tensor *t, td_tensor *grad_output, bool retain_graph);

/* METHOD. Gradients of outputs with respect to inputs, as
** torch.autograd.grad. grads_out[i] receives a new +1 tensor (NULL for an
** unused input when allow_unused, else TD_ERR_MISUSE). grad_outputs may be
** NULL when every output has one element. With create_graph the gradients are
** themselves recorded, for second-order derivatives. .grad is not touched. */
TD_API td_status td_grad(int n_out, td_tensor *const *outputs, td_tensor *const *grad_outputs, int n_in,
                         td_tensor *const *inputs, td_tensor **grads_out, bool retain_graph, bool create_graph,
                         bool allow_unused);
/* (As in PyTorch, a create_graph call whose result is differentiated again
** needs retain_graph too: the second pass runs through the first graph.)
** inputs may be non-leaves (the gradient of an intermediate). Tensor hooks of
** leaf inputs run. Results are owned by the current scope, if any. */

/* CONSTRUCTOR. A view of t's data that is cut from the graph. */
TD_API td_tensor *td_detach(td_tensor *t);

/* ---- grad modes: METHODs opening and closing scopes on this thread; they nest ---- */
TD_API void td_no_grad_begin(void); /* ops are not recorded */
TD_API void td_no_grad_end(void);
TD_API void td_enable_grad_begin(void); /* ops are recorded (inside no_grad) */
TD_API void td_enable_grad_end(void);
TD_API void td_inference_begin(void); /* no recording, even inside a nested enable_grad */
TD_API void td_inference_end(void);
TD_API bool td_grad_enabled(void);

/* ---- hooks on leaves ----
** A hook sees the total gradient that one backward (or td_grad) computed for
** a leaf, before it is accumulated into .grad. It may return a replacement
** (a new tensor made with ops, same shape; the engine takes its own
** reference) or NULL to keep grad unchanged. Hooks run in registration order,
** each on the previous one's result. */
typedef td_tensor *(*td_grad_hook)(td_tensor *grad, void *user);
/* METHOD. Add a hook to leaf t (which must require grad). TD_ERR_MISUSE for a
** non-leaf or a t that does not require grad; TD_ERR_OOM. */
TD_API td_status td_register_hook(td_tensor *t, td_grad_hook fn, void *user);
/* A post-accumulate hook runs in td_backward right after leaf's .grad took
** this backward's gradient, which happens as soon as the last node feeding
** the leaf has run, while backward goes on with the rest of the graph (torch's
** register_post_accumulate_grad_hook). It reads or rewrites td_grad_of(leaf)
** in place; a status other than TD_OK fails the backward. */
typedef td_status (*td_post_accumulate_hook)(td_tensor *leaf, void *user);
/* METHOD. Add one to leaf t (which must require grad); errors as td_register_hook. */
TD_API td_status td_register_post_accumulate_hook(td_tensor *t, td_post_accumulate_hook fn, void *user);

/* ---- functional API ----
** fn returns a one-element loss computed from params (a CONSTRUCTOR result;
** it may belong to the current scope). */
typedef td_tensor *(*td_loss_fn)(void *user, int n, td_tensor *const *params);
/* METHOD. Evaluate fn on detached copies of params that require grad, and
** return the loss (*value, detached) and d loss / d params[i] (grads[i], zeros
** for a parameter fn does not use). params need not require grad and their
** .grad is untouched. Results are new +1 tensors (owned by the current scope,
** if any). On failure every OUT pointer is NULL. TD_ERR_MISUSE when fn returns
** NULL without an error or a loss with more than one element. */
TD_API td_status td_value_and_grad(td_loss_fn fn, void *user, int n, td_tensor *const *params, td_tensor **value,
                                   td_tensor **grads);

/* ---- gradient checkpointing ----
** A region fn(inputs) -> outputs (outputs[i] are new tensors made with ops). */
typedef td_status (*td_region_fn)(void *user, int n_in, td_tensor *const *inputs, int n_out, td_tensor **outputs);
/* CONSTRUCTOR (of outputs[0..n_out)). PyTorch's torch.utils.checkpoint. Run fn without recording, keeping only
** the inputs; backward re-runs fn with grad mode on and the default
** generator's state (td_rng_get_state) as it was at this call, then
** backpropagates through the recomputed region, accumulating into the .grad of
** every leaf fn uses (inputs and parameters alike). fn must be deterministic
** given its inputs and the generator state. The outputs require grad when a
** tensor fn reads requires grad. Gradients of tensors used inside fn but not
** passed as inputs are not returned by td_grad (only accumulated by
** td_backward). Returns fn's status on failure, with outputs set to NULL. */
TD_API td_status td_checkpoint(td_region_fn fn, void *user, int n_in, td_tensor *const *inputs, int n_out,
                               td_tensor **outputs);

/* ---- custom functions: how user kernels join autograd ----
** forward runs with grad mode off and writes n_out new tensors (made with ops
** or kernels); backward receives one gradient per output (zeros for an output
** that got none) and writes grad_inputs[i] for each input that needs it (see
** td_ctx_needs_input_grad), NULL otherwise. Each grad must have its input's
** shape (or broadcast to it; it is summed down). Return TD_OK or an error. */
typedef struct td_function_ctx td_function_ctx;
typedef struct td_function {
    const char *name; /* for error messages */
    td_status (*forward)(td_function_ctx *ctx, int n_in, td_tensor *const *inputs, int n_out, td_tensor **outputs);
    td_status (*backward)(td_function_ctx *ctx, int n_out, td_tensor *const *grad_outputs, int n_in,
                          td_tensor **grad_inputs);
} td_function;
/* CONSTRUCTOR (of outputs[0..n_out)). Run fn->forward and, when grad mode is
** on and an input requires grad, record fn as one node of the graph. user is
** returned by td_ctx_user(). Returns forward's status, or TD_ERR_MISUSE when
** forward leaves an output NULL; on failure outputs are NULL. */
TD_API td_status td_function_apply(const td_function *fn, void *user, int n_in, td_tensor *const *inputs, int n_out,
                                   td_tensor **outputs);
/* METHOD (forward only). Keep tensors (inputs, outputs or others) for
** backward; each call appends. The ctx takes its own references. */
TD_API td_status td_ctx_save_for_backward(td_function_ctx *ctx, int n, td_tensor *const *tensors);
/* GETTER (backward). The i-th saved tensor (borrowed), or NULL with
** TD_ERR_INDEX; TD_ERR_STATE after the graph was freed. */
TD_API td_tensor *td_ctx_saved(td_function_ctx *ctx, int i);
/* GETTER. Whether input i requires a gradient (in forward: requires grad; in
** backward: is needed by this backward). */
TD_API bool td_ctx_needs_input_grad(const td_function_ctx *ctx, int i);
/* GETTER. The user pointer given to td_function_apply. */
TD_API void *td_ctx_user(const td_function_ctx *ctx);
/* METHOD. Attach non-tensor state for backward (shapes, scalars, a handle);
** free_fn (may be NULL) runs when the node is freed. */
TD_API void td_ctx_set_data(td_function_ctx *ctx, void *data, void (*free_fn)(void *data));
TD_API void *td_ctx_data(const td_function_ctx *ctx); /* GETTER */

/* ---- gradient checking ----
** fn maps inputs to one output tensor (any shape). */
typedef td_tensor *(*td_multi_fn)(void *user, int n, td_tensor *const *inputs);
typedef struct td_gradcheck_options {
    double eps;  /* central-difference step (PyTorch: 1e-6) */
    double atol; /* (PyTorch: 1e-5) */
    double rtol; /* (PyTorch: 1e-3) */
} td_gradcheck_options;
/* METHOD. Compare the Jacobian of fn that autograd computes (one backward per
** output element) with f64 central differences, for every input that
** requires grad; |analytical - numerical| <= atol + rtol * |numerical| must
** hold everywhere. opt NULL uses PyTorch's defaults. Those inputs must be
** float64 (TD_ERR_DTYPE otherwise). Returns TD_OK when they match; on a
** mismatch TD_ERR_STATE whose message names the worst element ("gradcheck:
** input 0 element 5, output element 2: analytical 1.5 vs numerical 1.25 ...");
** errors from fn pass through. Inputs are restored afterwards. */
TD_API td_status td_gradcheck(td_multi_fn fn, void *user, int n, td_tensor *const *inputs,
                              const td_gradcheck_options *opt);

/* METHOD. Second-order check, as torch.autograd.gradgradcheck: td_gradcheck
** of the function (inputs..., grad_output) -> the gradients of fn's output
** with respect to the inputs that require grad (td_grad with create_graph,
** flattened and concatenated; an unused input gives zeros). This checks that
** create_graph backward is right: its Jacobian against central differences of
** first-order gradients. grad_output (IN, may be NULL) is shaped like fn's
** output and float64; when it requires grad its own derivative is checked too.
** NULL draws one in [-1, 1) from td_rand with seed 0x6AD6AD on the device of
** fn's output, requiring grad. Inputs and tolerances as td_gradcheck; an error
** message names grad_output as "input n". Returns TD_OK when they match,
** TD_ERR_STATE ("gradgradcheck: ... mismatch ...") when not; an op whose
** backward cannot be differentiated fails with its own error (for example
** TD_ERR_UNSUPPORTED naming the op). */
TD_API td_status td_gradgradcheck(td_multi_fn fn, void *user, int n, td_tensor *const *inputs, td_tensor *grad_output,
                                  const td_gradcheck_options *opt);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_AUTOGRAD_H */
