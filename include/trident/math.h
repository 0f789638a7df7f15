/*
** Math blocks: a small math language compiled once into a differentiable
** block (docs/math.md is the tutorial).
**
**   h = relu(W1 @ x + b1)
**   y = W2 @ h + b2
**   loss = ((y - target)^2).mean()
**
** Names are bound at run time to tensors or numbers; statements are separated
** by ';' or new lines; the last statement is the result, or `return a, b`
** gives several. Operators: + - * / ^ (power, right-associative), unary -, @
** (torch.matmul, batch dims broadcast), postfix ' (swap the last two dims),
** < <= > >= == !=, c ? a : b. Functions: exp log sqrt rsqrt abs sin cos tanh
** sigmoid relu gelu (erf form) silu softplus, min(a, b) max(a, b) clamp(x, lo,
** hi) where(c, a, b); reductions sum mean amax amin var logsumexp (and min(x) /
** max(x), the amin / amax), with an optional dim (an integer or a list [0, 1])
** and keepdim, positional or as keywords: x.sum(), sum(x, 1),
** x.sum(dim=[0, 1], keepdim=true), x.var(0, correction=0); row ops
** softmax(x, dim=-1) log_softmax(x, dim=-1); cross_entropy(logits [N, C],
** target int [N]) (the mean); layer_norm(x, w, b, eps=1e-5) over the last dim
** (w and b optional). x.f(args) is f(x, args). Broadcasting and dtype
** promotion follow torch (integer literals and bound numbers are weak: x * 2
** keeps x's dtype; integer division, pow and float functions compute in
** float32).
**
** Errors name the line and column of the spot and quote the sub-expression,
** on one line (td_last_error()):
**   math block line 2, column 5: shapes [4, 3] and [5] do not broadcast in `x + b`
** and td_math_error_excerpt() gives the source line with a caret line under
** the spot, for printing below it:
**     y = x + b
**         ^~~~~
** Status codes: TD_ERR_COMPILE syntax, unknown function, wrong argument count
** or keyword; TD_ERR_MISUSE a name not bound at run (or a NULL argument);
** TD_ERR_SHAPE shapes that do not fit; TD_ERR_DTYPE a dtype an op does not
** take; TD_ERR_INDEX a dim out of range; TD_ERR_OOM; and any error of the ops.
**
** Autograd (implicit mode): when grad mode is on and a bound tensor requires
** grad, a run is recorded as ONE autograd node whose backward evaluates the
** block's symbolic derivative; otherwise nothing is recorded and nothing is
** saved. Types and shapes are specialized per (input dtypes, shapes, device)
** and cached in the block.
** Autocast: inside td_autocast_begin (amp.h) each node runs with the op
** table's policy for its op, as the composed ops would: a matmul's f32
** operands in the low dtype, exp / log / sum / softmax / cross_entropy /
** layer_norm in f32, the binary ops on the widest of their float operands, the
** rest in their inputs' dtype; literals and bound numbers are never cast.
** Threads: a block may be run from one thread at a time (compile one per
** thread); td_m is thread-safe.
*/
#ifndef TRIDENT_MATH_H
#define TRIDENT_MATH_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct td_math_block td_math_block;

typedef struct td_math_options {
    /* Checkpoint block: backward keeps only the bound inputs and recomputes
    ** the forward (matmuls, reductions, ...) instead of saving their values. */
    bool checkpoint;
} td_math_options;

/* One bound name: a tensor (borrowed), or when tensor is NULL the number
** scalar (a weak 0-d float64, as a Python number in torch). */
typedef struct td_math_binding {
    const char *name;
    td_tensor *tensor;
    double scalar;
} td_math_binding;

/* CONSTRUCTOR. Compile src (IN, copied) into *out (OUT; NULL on failure).
** opts (IN) may be NULL for the defaults. Parses the whole block; types and
** shapes are checked at the first run with each new input signature. Returns
** TD_OK, TD_ERR_COMPILE with the caret message, TD_ERR_MISUSE for a NULL src
** or out, TD_ERR_OOM. Free with td_math_free. Thread-safe. */
TD_API td_status td_math_compile(const char *src, const td_math_options *opts, td_math_block **out);

/* DESTRUCTOR. Free a block and its cached specializations; NULL is a no-op.
** Tensors it produced stay valid (their autograd nodes keep what they need). */
TD_API void td_math_free(td_math_block *block);

/* METHOD. Run block with bindings[0..n) (IN; every name the block reads must
** be bound, extra names are ignored) and write its outputs to
** outputs[0..td_math_n_outputs(block)) (OUT): new +1 tensors owned by the
** current scope, if any, as the ops return them; on failure all NULL. Tensors
** are on one device (the scalars follow them). Returns TD_OK, or the errors
** listed at the top of this file (shape and dtype errors point into the
** source). Recorded for autograd as one node when grad mode is on and a bound
** tensor requires grad. */
TD_API td_status td_math_run(td_math_block *block, const td_math_binding *bindings, int n, td_tensor **outputs);

/* GETTERS. The number of outputs of block (0 for NULL); the names it reads,
** in order of first use: td_math_input_name(block, i) for i in
** [0, td_math_n_inputs(block)), borrowed (valid until td_math_free), NULL out
** of range. */
TD_API int td_math_n_outputs(const td_math_block *block);
TD_API int td_math_n_inputs(const td_math_block *block);
TD_API const char *td_math_input_name(const td_math_block *block, int i);

/* METHOD. JAX's value_and_grad: run block (whose first output must have one
** element, TD_ERR_SHAPE otherwise) and return that value (*value, OUT) and its
** gradient with respect to each bound tensor named in wrt[0..n_wrt) (IN)
** (grads[i], OUT, shaped and typed like that tensor; zeros for one the value
** does not depend on). Nothing is recorded for autograd and .grad is not
** touched; results are new +1 tensors owned by the current scope, if any;
** value may be NULL when only the gradients are wanted. TD_ERR_MISUSE for a
** wrt name the block does not read or that is bound to a number;
** TD_ERR_DTYPE for a non-float tensor in wrt. On failure every OUT is NULL. */
TD_API td_status td_math_value_and_grad(td_math_block *block, const td_math_binding *bindings, int n, int n_wrt,
                                        const char *const *wrt, td_tensor **value, td_tensor **grads);

/* CONSTRUCTOR. One call: td_m("relu(W @ x + b)", "W", W, "x", x, "b", b, NULL)
** compiles src (cached per source string, process-wide) and runs it with the
** (name, tensor) pairs that follow, ended by NULL. Returns the output of a
** one-output block: a new +1 tensor owned by the current scope, if any, or
** NULL with the error set (TD_ERR_MISUSE for a block of several outputs, and
** the errors of td_math_run). Autograd as td_math_run. Thread-safe. */
TD_API td_tensor *td_m(const char *src, ...);

/* GETTER. The source excerpt of this thread's last error if it is a math
** block error that points into a source (compile, shape, dtype, unbound
** name): two lines, "  <the source line>\n  <a caret line under the spot>"
** (a window of at most 60 characters around the spot), written to buf
** (NUL-terminated, cut to n bytes; may be NULL with n 0 to ask the length).
** Returns the excerpt's length, or 0 (and buf "") when the last error is not
** such an error. Thread-safe (per thread, as td_last_error). */
TD_API int td_math_error_excerpt(char *buf, size_t n);

/* What the last td_math_run of a block kept for backward. */
typedef struct td_math_stats {
    bool recorded;       /* the run was recorded as an autograd node */
    int saved_tensors;   /* tensors kept for backward, the bound inputs included */
    int64_t saved_bytes; /* their bytes (an input's whole tensor) */
    int saved_inputs;    /* of them, bound inputs */
    int backward_nodes;  /* nodes of the symbolic backward graph */
} td_math_stats;
/* METHOD. Stats of block's last td_math_run into *out (OUT). TD_ERR_MISUSE for NULL. */
TD_API td_status td_math_last_stats(const td_math_block *block, td_math_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_MATH_H */
