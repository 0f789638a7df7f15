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
TD_API bool td_requires_grad(const td_tensor *t);
/* GETTER. Borrowed accumulated gradient of t, or NULL when none. */
TD_API td_tensor *td_grad_of(const td_tensor *t);
/* METHOD. Drop t's gradient (PyTorch's zero_grad(set_to_none=True)). */
TD_API void td_zero_grad(td_tensor *t);
/* METHOD. Whether t was produced by a recorded op (has a grad_fn). */
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

/* CONSTRUCTOR. A view of t's data that is cut from the graph. */
TD_API td_tensor *td_detach(td_tensor *t);

/* ---- grad modes: scopes on this thread; they nest ---- */
TD_API void td_no_grad_begin(void);     /* ops are not recorded */
TD_API void td_no_grad_end(void);
TD_API void td_enable_grad_begin(void); /* ops are recorded (inside no_grad) */
TD_API void td_enable_grad_end(void);
TD_API void td_inference_begin(void);   /* no recording, and results can never join a graph */
TD_API void td_inference_end(void);
TD_API bool td_grad_enabled(void);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_AUTOGRAD_H */
