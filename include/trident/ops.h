/*
** Trident tensor operations.
**
** Every function here except the fused optimizer updates at the end is a
** CONSTRUCTOR: it returns a new +1 tensor (owned by the innermost scope, if
** any) or NULL on failure with td_last_status()/td_last_error() set.
** A NULL input gives NULL and keeps the first error; a released input gives
** TD_ERR_STATE. Inputs are borrowed. The status codes an op can set:
**   TD_ERR_SHAPE        shapes that do not fit or broadcast,
**   TD_ERR_DTYPE        a dtype the op does not take,
**   TD_ERR_INDEX        a dim, index or class id out of range,
**   TD_ERR_MISUSE       a bad parameter (NULL array, p outside [0, 1), ...),
**   TD_ERR_DEVICE       inputs on different devices (both are named),
**   TD_ERR_UNSUPPORTED  the op/dtype pair is absent on the device's backend,
**   TD_ERR_OOM          an allocation failed.
** Threads: ops on distinct outputs may run on several threads at once; the
** error, scopes and grad mode are per thread.
**
** Broadcasting follows NumPy/PyTorch: shapes are aligned at the trailing dim,
** and each pair of sizes must be equal or one of them 1.
** Binary ops promote dtypes with td_dtype_promote(); div and pow of integer
** tensors compute in float32. Comparisons return bool.
** When grad mode is on and an input requires grad, the op is recorded for
** autograd (see autograd.h).
*/
#ifndef TRIDENT_OPS_H
#define TRIDENT_OPS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- binary, broadcasting ---- */
TD_API td_tensor *td_add(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_sub(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_mul(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_div(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_pow(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_maximum(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_minimum(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_eq(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_ne(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_lt(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_le(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_gt(td_tensor *a, td_tensor *b);
TD_API td_tensor *td_ge(td_tensor *a, td_tensor *b);
/* With a scalar s as the second operand (a float s keeps a's float dtype; an
** integer tensor with a fractional s computes in float32). */
TD_API td_tensor *td_add_scalar(td_tensor *a, double s);
TD_API td_tensor *td_sub_scalar(td_tensor *a, double s);
TD_API td_tensor *td_mul_scalar(td_tensor *a, double s);
TD_API td_tensor *td_div_scalar(td_tensor *a, double s);
TD_API td_tensor *td_pow_scalar(td_tensor *a, double s);
/* cond must be bool; a and b broadcast with cond; result dtype promote(a, b). */
TD_API td_tensor *td_where(td_tensor *cond, td_tensor *a, td_tensor *b);
/* x with value where mask (bool, broadcastable to x's shape) is true; differentiable
** in x (zero gradient where filled). TD_ERR_DTYPE for a non-bool mask, TD_ERR_SHAPE. */
TD_API td_tensor *td_masked_fill(td_tensor *x, td_tensor *mask, double value);
/* x [..., M, N] with the elements below (triu) or above (tril) diagonal zeroed: triu keeps
** [i, j] with j - i >= diagonal, tril with j - i <= diagonal (0: the main diagonal). */
TD_API td_tensor *td_triu(td_tensor *x, int64_t diagonal);
TD_API td_tensor *td_tril(td_tensor *x, int64_t diagonal);

/* ---- unary ---- */
TD_API td_tensor *td_neg(td_tensor *x);
TD_API td_tensor *td_abs(td_tensor *x);
TD_API td_tensor *td_exp(td_tensor *x);
TD_API td_tensor *td_log(td_tensor *x);
TD_API td_tensor *td_sqrt(td_tensor *x);
TD_API td_tensor *td_rsqrt(td_tensor *x);
TD_API td_tensor *td_sin(td_tensor *x);
TD_API td_tensor *td_cos(td_tensor *x);
TD_API td_tensor *td_tanh(td_tensor *x);
TD_API td_tensor *td_sigmoid(td_tensor *x);
TD_API td_tensor *td_relu(td_tensor *x);
TD_API td_tensor *td_gelu(td_tensor *x, bool tanh_approx); /* false: x*Phi(x) with erf */
TD_API td_tensor *td_silu(td_tensor *x);
/* Clamp to [lo, hi]; pass NAN to leave a side open. */
TD_API td_tensor *td_clamp(td_tensor *x, double lo, double hi);

/* ---- reductions ----
** dims lists n_dims distinct dims (negative allowed); n_dims == 0 reduces all.
** keepdim keeps reduced dims as size 1. Reducing an empty set: sum 0, mean NaN,
** max/min/argmax/argmin fail with TD_ERR_SHAPE. */
TD_API td_tensor *td_sum(td_tensor *x, int n_dims, const int *dims, bool keepdim);
TD_API td_tensor *td_mean(td_tensor *x, int n_dims, const int *dims, bool keepdim);
TD_API td_tensor *td_amax(td_tensor *x, int n_dims, const int *dims, bool keepdim);
TD_API td_tensor *td_amin(td_tensor *x, int n_dims, const int *dims, bool keepdim);
/* correction 1 is the unbiased estimator (PyTorch's default). */
TD_API td_tensor *td_var(td_tensor *x, int n_dims, const int *dims, int correction, bool keepdim);
TD_API td_tensor *td_logsumexp(td_tensor *x, int n_dims, const int *dims, bool keepdim);
/* dim argument of td_argmax/td_argmin that reduces over all elements */
#define TD_ALL_DIMS (-1000)
/* Index (int64) of the first extreme along dim; dim = TD_ALL_DIMS flattens.
** An empty set is TD_ERR_SHAPE. */
TD_API td_tensor *td_argmax(td_tensor *x, int dim, bool keepdim);
TD_API td_tensor *td_argmin(td_tensor *x, int dim, bool keepdim);

/* ---- linear algebra ----
** a is [..., M, K], b is [..., K, N] -> [..., M, N]; batch dims broadcast.
** 1-D operands are promoted as in torch.matmul (and the added dim removed). */
TD_API td_tensor *td_matmul(td_tensor *a, td_tensor *b);
/* x [..., in] @ w[out, in]^T + b[out] (b may be NULL). */
TD_API td_tensor *td_linear(td_tensor *x, td_tensor *w, td_tensor *b);
/* CONSTRUCTOR. gelu(x @ w^T + b) as one fused op (LINEAR_GELU: the GEMM, then
** the bias and GELU in its epilogue or one pass that also keeps the
** pre-activation h = x w^T + b for backward), erf form or tanh_approx. x
** [..., in], w [out, in], b [out] or NULL, all of one float dtype ->
** [..., out]; autocast runs it low, as matmul. Equal to td_gelu(td_linear(x,
** w, b)) within rounding, gradients included. NULL with the error set on
** failure: TD_ERR_SHAPE, TD_ERR_DTYPE. */
TD_API td_tensor *td_linear_gelu(td_tensor *x, td_tensor *w, td_tensor *b, bool tanh_approx);
/* CONSTRUCTOR. x @ w^T + b + r as one op (LINEAR_RESIDUAL): a linear layer
** whose output joins a residual stream r, with b and r added to the GEMM's
** result before it is stored (on CUDA, r is cuBLASLt's C operand), so there is
** no separate pass over the output. x [..., in], w [out, in], b [out] or NULL,
** r [..., out] with x's leading dims -> y of r's shape and dtype. x and w share
** a float dtype; b and r share r's: x's, or float32 for f16/bf16 x (autocast
** casts x and w only, so a float32 residual stream stays float32 and the
** product is not rounded to the low dtype; a backend without the op rounds it
** and adds). Other shapes and dtypes run as td_add(td_add(td_linear(x, w,
** NULL), b), r), broadcasting and promoting. Differentiable. NULL with the
** error set on failure: TD_ERR_SHAPE, TD_ERR_DTYPE. */
TD_API td_tensor *td_linear_residual(td_tensor *x, td_tensor *w, td_tensor *b, td_tensor *r);

/* How a loss reduces its per-element values (torch's reduction=): the
** unreduced losses, their (weighted) mean, or their sum. The losses are in
** nn.h; cross-entropy is td_cross_entropy_loss there. */
typedef enum td_reduction { TD_REDUCE_NONE = 0, TD_REDUCE_MEAN = 1, TD_REDUCE_SUM = 2 } td_reduction;

/* ---- nn primitives ---- */
/* Over any dim (negative counts from the end); another dim than the last returns a
** transposed view of the result, as the kernels normalize contiguous rows. */
TD_API td_tensor *td_softmax(td_tensor *x, int dim);
TD_API td_tensor *td_log_softmax(td_tensor *x, int dim);
/* Normalize over the last n_norm dims; weight/bias shaped like those dims or NULL. */
TD_API td_tensor *td_layer_norm(td_tensor *x, int n_norm, td_tensor *weight, td_tensor *bias, double eps);
/* CONSTRUCTOR. The fused residual add and layer_norm of a pre-LN transformer
** block (ADD_LAYER_NORM): s = x + residual, returned in *sum (OUT, a new
** tensor in the current scope), and layer_norm(s, n_norm, weight, bias, eps)
** as the result, in one pass over the rows. x and residual have one shape
** (no broadcast) and are promoted to one float dtype; gradients flow to both
** through s. Equal to td_add then td_layer_norm within rounding. NULL with
** the error set (and *sum NULL) on failure: TD_ERR_SHAPE, TD_ERR_DTYPE. */
TD_API td_tensor *td_add_layer_norm(td_tensor *x, td_tensor *residual, int n_norm, td_tensor *weight, td_tensor *bias,
                                    double eps, td_tensor **sum);
/* CONSTRUCTOR. td_layer_norm and td_add_layer_norm with y in dtype (floating),
** for a consumer that would cast it anyway (a Linear under autocast, which
** keeps layer_norm itself in f32 as torch does): the same values as td_cast of
** their result. For f32 x (after autocast) on CPU and CUDA one op writes the
** f16/bf16 y itself, and td_add_layer_norm_to reads an f16/bf16 residual as it
** is (the sum in f32, torch's promotion; *sum f32) where td_add_layer_norm
** casts it first; elsewhere the composed ops run. Errors as theirs, and
** TD_ERR_DTYPE for a dtype that is not floating-point. */
TD_API td_tensor *td_layer_norm_to(td_tensor *x, int n_norm, td_tensor *weight, td_tensor *bias, double eps,
                                   td_dtype dtype);
TD_API td_tensor *td_add_layer_norm_to(td_tensor *x, td_tensor *residual, int n_norm, td_tensor *weight,
                                       td_tensor *bias, double eps, td_dtype dtype, td_tensor **sum);
/* torch.nn.functional.group_norm: x [N, C, *] (any trailing dims, none
** included) with its C channels split into num_groups groups of C/num_groups;
** each (n, group) is normalized over its (C/num_groups) * prod(*) elements:
**   mean, var (biased) per (n, g);  y = (x - mean) / sqrt(var + eps) * w[c] + b[c]
** weight and bias are [C] of x's dtype, or NULL (1 and 0). Autocast runs it
** in float32. NULL with the error set on failure: TD_ERR_DTYPE (x not
** floating, weight/bias of another dtype), TD_ERR_SHAPE (x of fewer than 2
** dims, num_groups < 1, C not divisible by num_groups, weight/bias not [C]). */
TD_API td_tensor *td_group_norm(td_tensor *x, int num_groups, td_tensor *weight, td_tensor *bias, double eps);
/* x [N, C, H, W], w [O, C/groups, kh, kw], b [O] or NULL -> [N, O, Ho, Wo] with
** Ho = (H + 2*pad - dil*(kh-1) - 1)/stride + 1. */
TD_API td_tensor *td_conv2d(td_tensor *x, td_tensor *w, td_tensor *b, const int stride[2], const int padding[2],
                            const int dilation[2], int groups);
/* x [N, C, H, W] -> [N, C, Ho, Wo]; indices (optional OUT, int64 into H*W). */
TD_API td_tensor *td_max_pool2d(td_tensor *x, const int kernel[2], const int stride[2], const int padding[2],
                                td_tensor **indices);
TD_API td_tensor *td_avg_pool2d(td_tensor *x, const int kernel[2], const int stride[2], const int padding[2],
                                bool count_include_pad);
/* Zero each element with probability p, scale the rest by 1/(1-p); the mask is
** Philox(seed, offset). p = 0 returns x itself (+1). */
TD_API td_tensor *td_dropout(td_tensor *x, double p, uint64_t seed, uint64_t offset);
/* torch.nn.functional.scaled_dot_product_attention, fused (FlashAttention style:
** no [L, S] buffer is kept; the backward recomputes the probabilities).
**   q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]; the batch dims
**   ("...") of q, k and v broadcast, and all three have one float dtype.
**   out = dropout(softmax(q k^T * scale + m), dropout_p) v
** scale: NAN or <= 0 gives 1/sqrt(E). attn_mask (NULL: none) broadcasts to
** [..., L, S]: bool (true = takes part, false = -inf) or q's dtype (added to the
** scores). is_causal masks key j > query i (top-left aligned, as torch), and
** may be combined with attn_mask. A query row with no key left gives 0 (and a
** zero gradient). dropout_p in [0, 1) draws its mask from the default generator
** (td_rng_reserve); td_scaled_dot_product_attention_ext takes the stream.
** attn_mask receives no gradient (TD_ERR_UNSUPPORTED in backward if it needs one). */
TD_API td_tensor *td_scaled_dot_product_attention(td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *attn_mask,
                                                  double dropout_p, bool is_causal, double scale);
/* The same with the dropout stream given: element (n, i, j) of the flattened
** [N, L, S] probabilities uses Philox(seed, offset) element (n L + i) S + j (the
** rule of td_dropout), so a call with the same (seed, offset) drops the same. */
TD_API td_tensor *td_scaled_dot_product_attention_ext(td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *attn_mask,
                                                      double dropout_p, bool is_causal, double scale, uint64_t seed,
                                                      uint64_t offset);

/* ---- indexing ---- */
/* weight [V, D], idx integer [...] in [0, V) -> [..., D]. */
TD_API td_tensor *td_embedding(td_tensor *weight, td_tensor *idx);
/* idx 1-D integer; selects entries of x along dim. */
TD_API td_tensor *td_index_select(td_tensor *x, int dim, td_tensor *idx);
/* idx has x's ndim; out[i][j] = x[idx[i][j]][j] for dim 0, and so on. */
TD_API td_tensor *td_gather(td_tensor *x, int dim, td_tensor *idx);
/* out = self with src added at idx along dim (idx and src same shape). */
TD_API td_tensor *td_scatter_add(td_tensor *self, int dim, td_tensor *idx, td_tensor *src);
/* Concatenate n tensors along dim; all other sizes equal; dtypes promote. */
TD_API td_tensor *td_cat(int n, td_tensor *const *xs, int dim);
/* Integer idx [...] -> int64 [..., num_classes]; num_classes -1 infers max+1. */
TD_API td_tensor *td_one_hot(td_tensor *idx, int64_t num_classes);

/* ---- fused optimizer updates, in place (one op per parameter) ----
** METHODs: they update param (IN/OUT) and the state tensors (IN/OUT) in place
** and return a td_status. param, grad and the state tensors share shape, dtype
** and device and are contiguous. Optional state (vmax, buf, grad_avg) may be
** NULL when the matching feature is off. step counts from 1. Formulas are
** PyTorch's (torch.optim.Adam/AdamW/SGD/RMSprop, foreach=False). Returns TD_OK;
** for a NULL tensor the first error kept (else TD_ERR_MISUSE); TD_ERR_MISUSE
** for a hyperparameter out of range, missing state or a non-contiguous tensor;
** TD_ERR_SHAPE/TD_ERR_DTYPE/TD_ERR_DEVICE for a tensor unlike param (or a
** non-float param); TD_ERR_STATE for a released tensor. Not recorded by
** autograd. */
TD_API td_status td_adam_update(td_tensor *param, td_tensor *grad, td_tensor *m, td_tensor *v, td_tensor *vmax,
                                double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step,
                                bool decoupled_weight_decay, bool amsgrad, bool maximize);
/* first_step: the momentum buffer is initialised to the (decayed) gradient. */
TD_API td_status td_sgd_update(td_tensor *param, td_tensor *grad, td_tensor *buf, double lr, double momentum,
                               double dampening, double weight_decay, bool nesterov, bool first_step, bool maximize);
TD_API td_status td_rmsprop_update(td_tensor *param, td_tensor *grad, td_tensor *square_avg, td_tensor *buf,
                                   td_tensor *grad_avg, double lr, double alpha, double eps, double weight_decay,
                                   double momentum, bool centered, bool maximize);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_OPS_H */
