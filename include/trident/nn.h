/*
** Trident nn: modules, layers, losses and initialization, with PyTorch's
** names, defaults and formulas (torch.nn, torch.nn.functional, torch.nn.init).
**
** A td_module is an opaque handle. Every module holds, in registration order,
** named parameters (leaf tensors that require grad), named buffers (state
** that is saved but not trained, like BatchNorm's running statistics) and
** named child modules. Names of nested entries are dotted as in PyTorch:
** "0.weight", "fc.bias", "out_proj.weight".
**
** Ownership: a *_new function is a CONSTRUCTOR and returns a module the
** caller frees with td_module_free(). A container (Sequential, or a module
** given children with td_module_register_module) takes ownership of its
** children. Parameters and buffers are owned by their module; getters return
** borrowed tensors valid until the module is freed.
**
** Forward functions return a new tensor with the same ownership as an op's
** result (ops.h): it belongs to the innermost scope, or to the caller when no
** scope is open. Temporaries of a forward are released before it returns;
** autograd keeps what backward needs.
**
** Randomness (initialization, Dropout) draws from the default generator
** (td_rng_reserve), so td_manual_seed() makes construction and training
** reproducible, on every backend alike.
**
** State dicts are td_named_tensors lists (io.h), so they go straight into
** safetensors files and checkpoints.
**
** Errors: constructors and forwards return NULL with td_last_error() set; a
** NULL module or tensor argument returns NULL (keeping an earlier error).
** Functions returning td_status return TD_OK or the error. Modules are not
** thread-safe: use one module from one thread at a time.
*/
#ifndef TRIDENT_NN_H
#define TRIDENT_NN_H

#include "io.h"
#include "ops.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct td_module td_module;

/* ======================================================================
** Modules: the generic interface
** ====================================================================== */

/*
** METHOD. Run the module on x (module(x) in PyTorch). Recorded for autograd
** when grad mode is on and a parameter or x requires grad.
** Returns a new tensor, or NULL: TD_ERR_SHAPE/TD_ERR_DTYPE when x does not fit
** the layer (the message names the layer, the expected and the given shape).
*/
TD_API td_tensor *td_module_forward(td_module *m, td_tensor *x);

/* DESTRUCTOR. Free m, its children, parameters and buffers. NULL is a no-op. */
TD_API void td_module_free(td_module *m);

/* METHOD. Set training mode on m and all its children (module.train(mode)).
** Dropout and BatchNorm behave differently in training and evaluation.
** Modules start in training mode. */
TD_API void td_module_train(td_module *m, bool mode);
/* METHOD. Same as td_module_train(m, false). */
TD_API void td_module_eval(td_module *m);
/* GETTER. Whether m is in training mode (false for NULL). */
TD_API bool td_module_is_training(const td_module *m);
/* GETTER. The class name, e.g. "Linear", "Sequential" ("?" for NULL). */
TD_API const char *td_module_type(const td_module *m);

/*
** METHOD. The parameters of m and its children, depth first in registration
** order (module.parameters()). Writes up to cap borrowed tensors to out and
** returns the total count (which may exceed cap, as snprintf does); -1 when m
** is NULL. out may be NULL when cap is 0.
*/
TD_API int td_module_parameters(td_module *m, td_tensor **out, int cap);

/* CONSTRUCTOR. A list of the parameters with their dotted names
** (module.named_parameters()), freed with td_named_tensors_free(). NULL on
** failure. */
TD_API td_named_tensors *td_module_named_parameters(td_module *m);

/*
** CONSTRUCTOR. Parameters and buffers with their dotted names, in PyTorch's
** order (module.state_dict()): per module its own parameters, then its
** buffers, then its children. The list holds references to the module's own
** tensors (not copies): save it before the next optimizer step. Free it with
** td_named_tensors_free().
*/
TD_API td_named_tensors *td_module_state_dict(td_module *m);

/*
** METHOD. Copy every tensor of sd into the parameter or buffer of the same
** name (module.load_state_dict). The values are copied in place, so existing
** references (an optimizer's) stay valid; tensors may come from another device.
**   IN strict  when true, keys of m missing from sd and keys of sd unknown to m
**              are errors; when false they are skipped (td_module_load_state_dict_ext
**              reports them). num_batches_tracked may be missing (it is set to 0).
** Nothing is copied unless every check passes. Errors, each naming the key:
**   TD_ERR_MISUSE  missing or unexpected keys (strict), listing the first ones;
**   TD_ERR_SHAPE   "fc.weight: checkpoint shape [10,256], model shape [10,128]";
**   TD_ERR_DTYPE   the dtypes differ.
** This is how a checkpoint of a different model is detected.
*/
TD_API td_status td_module_load_state_dict(td_module *m, const td_named_tensors *sd, bool strict);

/* Options of td_module_load_state_dict_ext. */
typedef struct td_load_opts {
    bool strict;            /* as td_module_load_state_dict's strict */
    td_name_map_fn map_key; /* (optional) maps each key of sd to the module's name for it first; NULL drops it */
    void *ctx;              /* passed to map_key */
} td_load_opts;

/* What a load found (torch's missing_keys and unexpected_keys). */
typedef struct td_load_report {
    int n_missing, n_unexpected;
    char **missing;    /* keys of the module that sd lacks (optional buffers excepted) */
    char **unexpected; /* keys of sd (after map_key) that the module lacks */
} td_load_report;

/*
** METHOD. td_module_load_state_dict with options and a report. The keys of sd
** pass through opts->map_key first (for example to strip a "module." prefix).
**   IN  opts    strict, map_key, ctx (not NULL).
**   OUT report  (may be NULL) the missing and unexpected keys, filled on
**               TD_OK (non-strict loads report what they skipped) and cleared
**               on error; free its lists with td_load_report_clear().
** A buffer named num_batches_tracked may be absent even when strict, as in
** torch: it is then set to 0. Errors as td_module_load_state_dict, plus those
** of td_named_tensors_map_names.
*/
TD_API td_status td_module_load_state_dict_ext(td_module *m, const td_named_tensors *sd, const td_load_opts *opts,
                                               td_load_report *report);
/* DESTRUCTOR. Free a report's lists and zero it; NULL is a no-op. */
TD_API void td_load_report_clear(td_load_report *r);

/* GETTER. The parameter or buffer with the given dotted name (borrowed), or
** NULL with TD_ERR_MISUSE naming the key. */
TD_API td_tensor *td_module_get(td_module *m, const char *name);

/* METHOD. Drop the gradients of every parameter (zero_grad(set_to_none=True)). */
TD_API void td_module_zero_grad(td_module *m);

/*
** METHOD. Move every parameter and buffer to dev (module.to(device)). The
** data moves under the same tensor handles, as torch moves param.data: an
** optimizer built before the move, and references from td_module_get, see the
** moved tensors. Gradients are dropped (zero_grad). Returns TD_OK, or an error
** leaving the module unchanged.
*/
TD_API td_status td_module_to(td_module *m, td_device dev);

/*
** METHOD. Cast every floating parameter and buffer to dt (module.to(dtype),
** e.g. bfloat16 parameters for mixed precision; integer buffers keep theirs),
** under the same tensor handles as td_module_to. Gradients are dropped.
** Errors: TD_ERR_DTYPE for a dt that is not floating; the module is then
** unchanged.
*/
TD_API td_status td_module_to_dtype(td_module *m, td_dtype dt);

/*
** METHOD. Flatten m's parameters into arenas on dev (llm.c's
** malloc_and_point_parameters): per dtype, in td_module_parameters order, every
** parameter becomes a contiguous view of one flat storage, and its gradient a
** view of one flat gradient storage laid out the same way (allocated up front,
** zeroed). Parameters not on dev, and the buffers, are moved there first (as
** td_module_to). Values are kept, and so are the tensor handles: optimizers
** built before, and references from td_module_get, see the arena. A parameter
** registered twice (tied) takes one place.
**
** Backward then writes each parameter's gradient into its arena view (the
** first gradient copied in, the next added in place) and makes that view its
** .grad; td_module_zero_grad still drops .grad (set_to_none), and the next
** backward writes over the arena. An optimizer whose parameters tile an arena
** updates each dtype in one op, and DDP all-reduces slices of the gradient
** arena in place (no copies). Moving m (td_module_to, td_module_to_dtype)
** flattens it again on the new device or dtype; moving a child of m takes the
** child's parameters out of the arena. Calling it again re-flattens.
**
**   m    IN  the module (NULL: TD_ERR_MISUSE)
**   dev  IN  the device of the arenas
**
** Returns TD_OK; TD_ERR_DEVICE or another error of td_module_to for a device
** that cannot be used; TD_ERR_OOM. On an error after the move, the parameters
** keep their old storages. Not thread-safe: no other thread may use m.
*/
TD_API td_status td_module_flatten_parameters(td_module *m, td_device dev);

/*
** GETTER. The flat arenas of dtype that td_module_flatten_parameters made on m
** (the module it was called on, not a child): *params [numel] holds every
** parameter of dtype end to end, *grads [numel] their gradients. Both are
** borrowed, valid until m is freed, moved or flattened again; writes to them
** are writes to the parameters (or gradients). Either OUT may be NULL.
**
**   m       IN   the flattened module (NULL: TD_ERR_MISUSE)
**   dtype   IN   which arena
**   params  OUT  the parameter arena, or NULL when m has none of dtype
**   grads   OUT  the gradient arena, or NULL likewise
**
** Returns TD_OK (with NULLs when m is not flattened or has no parameter of
** dtype) or TD_ERR_MISUSE. Thread-safe while nothing moves m.
*/
TD_API td_status td_module_parameter_arena(td_module *m, td_dtype dtype, td_tensor **params, td_tensor **grads);

/* ---- custom modules ------------------------------------------------------
** Compose layers that Sequential cannot express (residual blocks, a GPT).
** forward receives the module itself; td_module_user() gives back user. */
typedef td_tensor *(*td_forward_fn)(td_module *self, td_tensor *x);

/* CONSTRUCTOR. A module of class name type whose forward is fn. free_user (may
** be NULL) is called on user when the module is freed. */
TD_API td_module *td_module_new(const char *type, td_forward_fn fn, void *user, void (*free_user)(void *));
/* GETTER. The user pointer given to td_module_new (NULL for built-in layers). */
TD_API void *td_module_user(const td_module *m);

/*
** METHOD. Register t as parameter name of m: the module retains t and marks it
** requires_grad. Names are unique among a module's parameters, buffers and
** children and contain no '.' (TD_ERR_MISUSE otherwise).
*/
TD_API td_status td_module_register_parameter(td_module *m, const char *name, td_tensor *t);
/* METHOD. Register t as buffer name of m (retained; never requires grad). */
TD_API td_status td_module_register_buffer(td_module *m, const char *name, td_tensor *t);
/* METHOD. Register child under name; m takes ownership of child, also on
** failure (the child is then freed). A module has at most one parent. */
TD_API td_status td_module_register_module(td_module *m, const char *name, td_module *child);
/* GETTER. The child registered under name (borrowed; dots walk deeper:
** "blocks.0.attn"), or NULL with TD_ERR_MISUSE. */
TD_API td_module *td_module_child(td_module *m, const char *name);

/* ======================================================================
** Containers
** ====================================================================== */

/* CONSTRUCTOR. nn.Sequential of n modules, named "0" .. "n-1"; forward feeds
** each output to the next. Takes ownership of the modules (also on failure).
** mods may hold NULLs only when a constructor failed: the call then returns
** NULL keeping that error. */
TD_API td_module *td_sequential_new(int n, td_module *const *mods);
/* METHOD. Append child under the next index name ("3"), taking ownership. */
TD_API td_status td_sequential_append(td_module *seq, td_module *child);

/* ======================================================================
** Layers. Shapes: N batch, C channels, H/W/L spatial, T sequence, E/D features.
** ====================================================================== */

/* CONSTRUCTOR. nn.Linear: y = x W^T + b, x [..., in] -> [..., out].
** weight [out, in] and bias [out] start as kaiming_uniform(a=sqrt(5)) and
** U(-1/sqrt(in), 1/sqrt(in)). */
TD_API td_module *td_linear_new(int64_t in_features, int64_t out_features, bool bias);
/* CONSTRUCTOR. nn.Linear followed by nn.GELU as one layer: y = gelu(x W^T +
** b), run as the fused LINEAR_GELU op (td_linear_gelu: the bias and GELU in
** the GEMM's epilogue or one pass after it). Parameters, their names (weight,
** bias) and their initialization are Linear's, so its state dict loads into a
** Linear (the GELU has none). tanh_approx as td_gelu_new. */
TD_API td_module *td_linear_gelu_new(int64_t in_features, int64_t out_features, bool bias, bool tanh_approx);
/* CONSTRUCTOR. A transformer's GELU MLP with an optional residual as one
** autograd node: y = gelu(x W1^T + b1) W2^T + b2 + r. x [..., in], w1
** [hidden, in], b1 [hidden] or NULL, w2 [out, hidden], b2 [out] or NULL, r
** NULL or broadcastable to [..., out]; gelu is the erf form or tanh_approx.
** Forward is LINEAR_GELU then LINEAR (with r: LINEAR_RESIDUAL, b2 and r added
** in the GEMM); backward takes the input gradient through w2 and the GELU as one
** LINEAR_DGELU op (on CUDA, the tanh form: one cuBLASLt GEMM with gelu' in its
** epilogue) and both bias gradients from the weight-gradient ops. Equal to
** td_add(td_linear(td_gelu(td_linear(x, w1, b1)), w2, b2), r) within rounding,
** gradients included. Autocast runs x, w1, b1 and w2 low, as matmul; b2 and r
** keep their dtype (y takes the wider). Returns a new tensor owned by the
** current scope, or NULL with the error set: TD_ERR_SHAPE, TD_ERR_DTYPE. */
TD_API td_tensor *td_mlp_gelu(td_tensor *x, td_tensor *w1, td_tensor *b1, td_tensor *w2, td_tensor *b2, td_tensor *r,
                              bool tanh_approx);

/* CONSTRUCTOR. nn.Conv2d: x [N, C, H, W] -> [N, O, Ho, Wo],
** Ho = (H + 2*padding - dilation*(kh-1) - 1)/stride + 1. weight [O, C/groups,
** kh, kw], bias [O]. stride, padding, dilation may be NULL for 1, 0, 1.
** Init as Linear with fan_in = C/groups*kh*kw. */
TD_API td_module *td_conv2d_new(int64_t in_channels, int64_t out_channels, const int kernel[2], const int stride[2],
                                const int padding[2], const int dilation[2], int groups, bool bias);
/* CONSTRUCTOR. nn.Conv1d: x [N, C, L] -> [N, O, Lo]; weight [O, C/groups, k].
** Runs as a Conv2d over H = 1. */
TD_API td_module *td_conv1d_new(int64_t in_channels, int64_t out_channels, int kernel, int stride, int padding,
                                int dilation, int groups, bool bias);

/* CONSTRUCTOR. nn.MaxPool2d / nn.AvgPool2d on [N, C, H, W]; stride NULL means
** the kernel size, padding NULL means 0. */
TD_API td_module *td_max_pool2d_new(const int kernel[2], const int stride[2], const int padding[2]);
TD_API td_module *td_avg_pool2d_new(const int kernel[2], const int stride[2], const int padding[2],
                                    bool count_include_pad);
/* CONSTRUCTOR. nn.AdaptiveAvgPool2d: [N, C, H, W] -> [N, C, out_h, out_w];
** cell i spans rows floor(i*H/out_h) .. ceil((i+1)*H/out_h). */
TD_API td_module *td_adaptive_avg_pool2d_new(int64_t out_h, int64_t out_w);

/* CONSTRUCTOR. nn.Flatten(start_dim, end_dim): merge those dims (PyTorch's
** defaults are 1, -1). nn.Unflatten(dim, sizes): split dim into n sizes (one
** may be -1). */
TD_API td_module *td_flatten_new(int start_dim, int end_dim);
TD_API td_module *td_unflatten_new(int dim, int n, const int64_t *sizes);

/*
** CONSTRUCTOR. nn.BatchNorm1d ([N, C] or [N, C, L]) and nn.BatchNorm2d
** ([N, C, H, W]). PyTorch's defaults: eps 1e-5, momentum 0.1, affine, track
** running stats. In training the batch mean and biased variance normalize,
** and running_mean/running_var move by momentum towards the mean and the
** UNBIASED variance; in evaluation the running stats normalize. Parameters
** weight (ones) and bias (zeros); buffers running_mean (zeros), running_var
** (ones) and num_batches_tracked (int64 scalar).
*/
TD_API td_module *td_batch_norm1d_new(int64_t num_features, double eps, double momentum, bool affine,
                                      bool track_running_stats);
TD_API td_module *td_batch_norm2d_new(int64_t num_features, double eps, double momentum, bool affine,
                                      bool track_running_stats);

/* CONSTRUCTOR. nn.LayerNorm over the last n dims of shape normalized_shape
** (eps 1e-5 by default); weight ones and bias zeros when elementwise_affine. */
TD_API td_module *td_layer_norm_new(int n, const int64_t *normalized_shape, double eps, bool elementwise_affine);

/* CONSTRUCTOR. nn.Dropout(p): in training, zero each element with
** probability p and scale the rest by 1/(1-p), with a mask drawn from the
** default generator; identity in evaluation. p outside [0, 1) is an error. */
TD_API td_module *td_dropout_new(double p);

/* CONSTRUCTOR. nn.Embedding: integer idx [...] -> [..., dim]; weight
** [num, dim] starts N(0, 1). Ids outside [0, num) are TD_ERR_INDEX. */
TD_API td_module *td_embedding_new(int64_t num_embeddings, int64_t embedding_dim);

/*
** CONSTRUCTOR. nn.MultiheadAttention(embed_dim, num_heads, bias, batch_first=True)
** with PyTorch's parameter names and layout: in_proj_weight [3E, E] (rows q, k,
** v; xavier_uniform), in_proj_bias [3E] (zeros), out_proj.weight [E, E]
** (Linear's init), out_proj.bias [E] (zeros). td_module_forward(m, x) is
** self-attention on x [N, T, E], causal when causal is true.
*/
TD_API td_module *td_multihead_attention_new(int64_t embed_dim, int64_t num_heads, bool bias, bool causal);
/*
** METHOD. Attention of query [N, T, E] over key and value [N, S, E] ->
** [N, T, E]: softmax(q k^T / sqrt(E/heads) + mask) v per head, then out_proj.
**   IN attn_mask  NULL, or [T, S]: float (added to the scores) or bool (true
**                 means "may not attend", PyTorch's convention)
**   IN causal     also mask keys after the query's position (needs T == S)
*/
TD_API td_tensor *td_multihead_attention_forward(td_module *m, td_tensor *query, td_tensor *key, td_tensor *value,
                                                 td_tensor *attn_mask, bool causal);
/* CONSTRUCTOR. td_multihead_attention_new with nn.MultiheadAttention's dropout: in training, attention
** probabilities are dropped with probability dropout (in [0, 1), else TD_ERR_MISUSE), from the default generator. */
TD_API td_module *td_multihead_attention_new_ext(int64_t embed_dim, int64_t num_heads, bool bias, bool causal,
                                                 double dropout);
/* METHOD. td_multihead_attention_forward with key_padding_mask: NULL, or [N, S], bool (true: that key is
** padding, ignored) or float (added to every query's scores of that key). A query left with no key gets 0
** (torch gives NaN there). The attention is the fused td_scaled_dot_product_attention. */
TD_API td_tensor *td_multihead_attention_forward_ext(td_module *m, td_tensor *query, td_tensor *key, td_tensor *value,
                                                     td_tensor *attn_mask, td_tensor *key_padding_mask, bool causal);

/* ---- recurrent layers (src/nn/rnn.c) --------------------------------------
** T steps, B batch, I input_size, H hidden_size, L num_layers, D directions
** (2 when bidirectional). Parameters as torch, per layer l and direction
** (suffix "_reverse" for the backward one): weight_ih_l<l> [G*H, I] (layers
** after the first: [G*H, D*H]), weight_hh_l<l> [G*H, H], bias_ih_l<l> and
** bias_hh_l<l> [G*H] (when bias), all U(-1/sqrt(H), 1/sqrt(H)); G and the
** gate order: RNN 1, LSTM 4 (i, f, g, o), GRU 3 (r, z, n). Formulas:
**   RNN   h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act tanh or relu
**   LSTM  i, f, o = sigmoid(.), g = tanh(.) of x W_ih^T + b_ih + h W_hh^T + b_hh;
**         c' = f c + i g;  h' = o tanh(c')
**   GRU   r, z = sigmoid(.), as LSTM's gates;  n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn));
**         h' = (1 - z) n + z h
** The input projections of all steps run as one GEMM per layer and direction;
** each step is one GEMM and one fused cell launch (custom ops rnn.lstm_cell
** and rnn.gru_cell, with kernels on every backend), queued without host syncs.
** LSTM's proj_size is not supported. */

/* Nonlinearity of RNN and RNNCell. */
typedef enum td_rnn_nonlinearity { TD_RNN_TANH = 0, TD_RNN_RELU = 1 } td_rnn_nonlinearity;

/*
** CONSTRUCTOR. nn.RNN, nn.LSTM and nn.GRU. num_layers in 1..64; dropout in
** [0, 1] applies to every layer's output but the last, in training only (from
** the default generator). batch_first: x is [B, T, I] (else [T, B, I]).
** TD_ERR_MISUSE for bad sizes, dropout or nonlinearity. td_module_forward(m,
** x) runs td_rnn_forward with zero initial states and returns the output.
*/
TD_API td_module *td_rnn_new(int64_t input_size, int64_t hidden_size, int num_layers, td_rnn_nonlinearity nonlinearity,
                             bool bias, bool batch_first, double dropout, bool bidirectional);
TD_API td_module *td_lstm_new(int64_t input_size, int64_t hidden_size, int num_layers, bool bias, bool batch_first,
                              double dropout, bool bidirectional);
TD_API td_module *td_gru_new(int64_t input_size, int64_t hidden_size, int num_layers, bool bias, bool batch_first,
                             double dropout, bool bidirectional);
/*
** METHOD. Run an RNN, LSTM or GRU m: output, h_n = m(x, h0) (LSTM: m(x, (h0, c0))).
**   IN  x    [T, B, I] ([B, T, I] when batch_first), or unbatched [T, I]
**   IN  h0   [L*D, B, H] ([L*D, H] unbatched), or NULL for zeros
**   IN  c0   the LSTM's initial cell state, shaped as h0, or NULL for zeros
**            (must be NULL for RNN and GRU: TD_ERR_MISUSE)
**   OUT h_n  (may be NULL) the last step's h of every layer and direction, shaped as h0
**   OUT c_n  (may be NULL) LSTM: the last c, shaped as h0; NULL for RNN and GRU
** Returns the output [T, B, D*H] ([B, T, D*H] when batch_first; [T, D*H]
** unbatched): the last layer's h of each step, directions concatenated. All
** results have an op result's ownership. NULL on failure: TD_ERR_SHAPE naming
** the expected and given shapes, TD_ERR_MISUSE for a module of another class.
*/
TD_API td_tensor *td_rnn_forward(td_module *m, td_tensor *x, td_tensor *h0, td_tensor *c0, td_tensor **h_n,
                                 td_tensor **c_n);
/*
** CONSTRUCTOR. nn.RNNCell, nn.LSTMCell and nn.GRUCell: one step, with
** parameters weight_ih [G*H, I], weight_hh [G*H, H], bias_ih, bias_hh [G*H]
** (when bias), initialized and computed as the layers above (the same fused
** cells). td_module_forward(m, x) steps from zero states and returns h'.
*/
TD_API td_module *td_rnn_cell_new(int64_t input_size, int64_t hidden_size, bool bias, td_rnn_nonlinearity nonlinearity);
TD_API td_module *td_lstm_cell_new(int64_t input_size, int64_t hidden_size, bool bias);
TD_API td_module *td_gru_cell_new(int64_t input_size, int64_t hidden_size, bool bias);
/*
** METHOD. One step of a cell m: h' = m(x, h) (LSTMCell: h', c' = m(x, (h, c))).
**   IN  x    [B, I], or unbatched [I]
**   IN  h, c [B, H] ([H] unbatched), or NULL for zeros; c only for LSTMCell (else TD_ERR_MISUSE)
**   OUT c_n  (may be NULL) LSTMCell: c'; NULL for the others
** Returns h' [B, H] ([H] unbatched), or NULL: TD_ERR_SHAPE, TD_ERR_MISUSE.
*/
TD_API td_tensor *td_rnn_cell_forward(td_module *m, td_tensor *x, td_tensor *h, td_tensor *c, td_tensor **c_n);

/* CONSTRUCTORS. Activations, elementwise unless noted. GELU: tanh_approx
** false is the exact erf form (PyTorch's default). Softmax and LogSoftmax
** normalize over dim (any dim; negative counts from the end). */
TD_API td_module *td_relu_new(void);
TD_API td_module *td_gelu_new(bool tanh_approx);
TD_API td_module *td_silu_new(void);
TD_API td_module *td_tanh_new(void);
TD_API td_module *td_sigmoid_new(void);
TD_API td_module *td_softmax_new(int dim);
TD_API td_module *td_log_softmax_new(int dim);

/* ======================================================================
** Losses (torch.nn.functional). Each returns a 0-d tensor for mean and sum
** reductions, or the unreduced per-element losses for TD_REDUCE_NONE.
** ====================================================================== */

/* td_reduction (TD_REDUCE_NONE, _MEAN, _SUM) is in ops.h. */

/* CONSTRUCTOR. (input - target)^2 and |input - target|. input and target have
** the same shape (else TD_ERR_SHAPE naming both). */
TD_API td_tensor *td_mse_loss(td_tensor *input, td_tensor *target, td_reduction reduction);
TD_API td_tensor *td_l1_loss(td_tensor *input, td_tensor *target, td_reduction reduction);

/*
** CONSTRUCTOR. F.cross_entropy, Trident's one cross-entropy entry point:
** logits [N, C] (or [C], or [N, C, d1, ...]) and integer class ids target [N]
** (or [], or [N, d1, ...]), or, as in torch, float class probabilities of the
** logits' own shape.
**   IN weight          per-class weights [C], or NULL
**   IN ignore_index    targets equal to it add nothing (PyTorch's default -100)
**   IN label_smoothing in [0, 1]
** The mean divides by the summed weights of the non-ignored targets.
** Errors: TD_ERR_SHAPE for mismatched shapes, TD_ERR_DTYPE for a bool target
** or a float target not shaped like the logits (class ids must be integers),
** TD_ERR_INDEX for a class id outside [0, C) ("class 12 ... 10 classes").
*/
TD_API td_tensor *td_cross_entropy_loss(td_tensor *logits, td_tensor *target, td_tensor *weight, int64_t ignore_index,
                                        double label_smoothing, td_reduction reduction);
/* CONSTRUCTOR. F.nll_loss: log-probabilities [N, C] (or [C]) and class ids, with
** the same rules as td_cross_entropy_loss: loss_i = -weight[t_i] * x[i, t_i]. */
TD_API td_tensor *td_nll_loss(td_tensor *log_probs, td_tensor *target, td_tensor *weight, int64_t ignore_index,
                              td_reduction reduction);
/*
** CONSTRUCTOR. F.binary_cross_entropy: probabilities input in [0, 1] (else
** TD_ERR_MISUSE), target of the same shape, optional weight broadcasting to
** it. Each log is clamped at -100 as PyTorch does.
*/
TD_API td_tensor *td_bce_loss(td_tensor *input, td_tensor *target, td_tensor *weight, td_reduction reduction);
/*
** CONSTRUCTOR. F.binary_cross_entropy_with_logits in its stable form
**   l = (1 - t) x + (1 + (pw - 1) t) (log(1 + e^-|x|) + max(-x, 0))
** weight and pos_weight (broadcast over the last dim, [C]) may be NULL.
*/
TD_API td_tensor *td_bce_with_logits_loss(td_tensor *input, td_tensor *target, td_tensor *weight, td_tensor *pos_weight,
                                          td_reduction reduction);

/* ======================================================================
** Initialization (torch.nn.init). Each fills t in place, without recording
** for autograd, drawing from the default generator. Returns TD_OK, or
** TD_ERR_DTYPE for a non-float t, TD_ERR_SHAPE when fans need ndim >= 2.
** fan_in = size(1) * receptive field, fan_out = size(0) * receptive field.
** ====================================================================== */

typedef enum td_fan_mode { TD_FAN_IN = 0, TD_FAN_OUT = 1 } td_fan_mode;
typedef enum td_nonlinearity {
    TD_NL_LINEAR = 0, /* gain 1 (also conv and sigmoid) */
    TD_NL_SIGMOID,    /* 1 */
    TD_NL_TANH,       /* 5/3 */
    TD_NL_RELU,       /* sqrt(2) */
    TD_NL_LEAKY_RELU, /* sqrt(2 / (1 + a^2)) */
    TD_NL_SELU        /* 3/4 */
} td_nonlinearity;

/* METHOD. nn.init.calculate_gain(nonlinearity, param); param is leaky_relu's
** negative slope a. */
TD_API double td_init_calculate_gain(td_nonlinearity nl, double param);
/* METHOD. U(lo, hi), N(mean, std) and a constant. */
TD_API td_status td_init_uniform_(td_tensor *t, double lo, double hi);
TD_API td_status td_init_normal_(td_tensor *t, double mean, double std);
TD_API td_status td_init_constant_(td_tensor *t, double value);
/* METHOD. std = gain(nl, a) / sqrt(fan); uniform bound sqrt(3) * std. */
TD_API td_status td_init_kaiming_uniform_(td_tensor *t, double a, td_fan_mode mode, td_nonlinearity nl);
TD_API td_status td_init_kaiming_normal_(td_tensor *t, double a, td_fan_mode mode, td_nonlinearity nl);
/* METHOD. std = gain * sqrt(2 / (fan_in + fan_out)); uniform bound sqrt(3) * std. */
TD_API td_status td_init_xavier_uniform_(td_tensor *t, double gain);
TD_API td_status td_init_xavier_normal_(td_tensor *t, double gain);

/* ======================================================================
** More layers and losses (issue 25): norms, transposed convolutions,
** nearest upsampling, adaptive max pooling, and the smooth-L1, Huber, KL-divergence and cosine-embedding losses.
** ====================================================================== */

/*
** CONSTRUCTOR. nn.GroupNorm(num_groups, num_channels, eps, affine): x [N, C, *]
** (C = num_channels, any trailing dims), each (n, group of C/num_groups
** channels) normalized by its mean and biased variance, then * weight[c] +
** bias[c]; through the fused group_norm op (td_group_norm). PyTorch's
** defaults: eps 1e-5, affine (weight ones, bias zeros, [C]). TD_ERR_MISUSE
** when num_channels is not a positive multiple of num_groups or eps <= 0;
** the forward gives TD_ERR_SHAPE for another channel count.
*/
TD_API td_module *td_group_norm_new(int num_groups, int64_t num_channels, double eps, bool affine);
/*
** CONSTRUCTOR. nn.RMSNorm (torch >= 2.4) over the last n dims of shape
** normalized_shape: y = x / sqrt(mean(x^2) + eps) * weight (weight ones when
** elementwise_affine, PyTorch's default). eps < 0 is PyTorch's eps=None:
** torch.finfo(x.dtype).eps at each call (1.19e-7 for float32). Composed from
** elementwise ops and a mean (not one fused op).
*/
TD_API td_module *td_rms_norm_new(int n, const int64_t *normalized_shape, double eps, bool elementwise_affine);
/*
** CONSTRUCTOR. nn.InstanceNorm2d: x [N, C, H, W] or [C, H, W], each (n, c)
** plane normalized over H, W. PyTorch's defaults: eps 1e-5, momentum 0.1,
** affine false, track_running_stats false; without running stats it is the
** group_norm op with C groups. affine adds weight (ones) and bias (zeros)
** [C]; track_running_stats adds running_mean, running_var and
** num_batches_tracked (left at 0, as PyTorch does), updated in training with
** the batch average of the planes' mean and unbiased variance, and used in
** evaluation.
*/
TD_API td_module *td_instance_norm2d_new(int64_t num_features, double eps, double momentum, bool affine,
                                         bool track_running_stats);

/*
** CONSTRUCTOR. F.conv_transpose2d(x, w, b, stride, padding, output_padding,
** groups, dilation), PyTorch's argument order: x [N, Cin, H, W], w [Cin,
** Cout/groups, kh, kw], b [Cout] or NULL -> [N, Cout, Ho, Wo] with
** Ho = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1.
** NULL stride/dilation are 1, NULL padding/output_padding 0. It runs as
** conv2d's input gradient, on every backend that has that op; output_padding
** must be smaller than stride (TD_ERR_UNSUPPORTED otherwise: PyTorch also
** takes one smaller than dilation only). TD_ERR_SHAPE for shapes that do not
** fit (naming them), TD_ERR_DTYPE for mixed dtypes.
*/
TD_API td_tensor *td_conv_transpose2d(td_tensor *x, td_tensor *w, td_tensor *b, const int stride[2],
                                      const int padding[2], const int output_padding[2], int groups,
                                      const int dilation[2]);
/*
** CONSTRUCTOR. nn.ConvTranspose2d and nn.ConvTranspose1d (PyTorch's argument
** order and defaults: stride 1, padding 0, output_padding 0, groups 1, bias,
** dilation 1; NULL arrays are those defaults). weight [in, out/groups, kh, kw]
** ([in, out/groups, k] for 1d) and bias [out], initialized as PyTorch does
** (kaiming_uniform with a = sqrt(5), fan_in = weight.size(1) * kernel). 1d
** runs as 2d with a unit dim; unbatched inputs get a batch dim of 1.
** TD_ERR_MISUSE for bad sizes; TD_ERR_UNSUPPORTED for output_padding >=
** stride (see td_conv_transpose2d).
*/
TD_API td_module *td_conv_transpose2d_new(int64_t in_channels, int64_t out_channels, const int kernel[2],
                                          const int stride[2], const int padding[2], const int output_padding[2],
                                          int groups, bool bias, const int dilation[2]);
TD_API td_module *td_conv_transpose1d_new(int64_t in_channels, int64_t out_channels, int kernel, int stride,
                                          int padding, int output_padding, int groups, bool bias, int dilation);

/*
** CONSTRUCTOR. F.interpolate(x, size or scale_factor, mode="nearest"): x
** [N, C, L] or [N, C, H, W]; size (IN, one entry per spatial dim) or
** scale_factor (IN, likewise), exactly one non-NULL (TD_ERR_MISUSE). Output
** size = size, or floor(in * scale_factor); output i reads input
** min(floor(i * scale), in - 1), scale = 1/scale_factor or in/size in float32,
** as PyTorch. Composed from index_select (gradients sum back).
*/
TD_API td_tensor *td_interpolate_nearest(td_tensor *x, const int64_t *size, const double *scale_factor);
/* CONSTRUCTOR. nn.Upsample(size or scale_factor, mode="nearest") for n = 1
** or 2 spatial dims (inputs [N, C, L] or [N, C, H, W]); the arrays (n
** entries, exactly one non-NULL) are copied. */
TD_API td_module *td_upsample_nearest_new(int n, const int64_t *size, const double *scale_factor);
/* CONSTRUCTOR. nn.AdaptiveMaxPool2d((out_h, out_w)): x [N, C, H, W] or
** [C, H, W]; cell i spans rows floor(i*H/out_h) .. ceil((i+1)*H/out_h), and
** columns likewise; y is its maximum (return_indices is not offered). */
TD_API td_module *td_adaptive_max_pool2d_new(int64_t out_h, int64_t out_w);

/* F.kl_div's reduction="batchmean" (the sum divided by input's size(0)),
** accepted by td_kl_div_loss only. */
#define TD_REDUCE_BATCHMEAN ((td_reduction)3)
/*
** CONSTRUCTOR. F.smooth_l1_loss(input, target, reduction, beta) and
** F.huber_loss(..., delta), d = |input - target| (same shapes, floating):
**   smooth_l1  0.5 d^2 / beta if d < beta, else d - 0.5 beta  (beta >= 0; 0 is l1; PyTorch's default 1)
**   huber      0.5 d^2 if d < delta, else delta (d - 0.5 delta) (delta > 0; default 1)
** Composed from ops. TD_ERR_SHAPE/TD_ERR_DTYPE for mismatched inputs,
** TD_ERR_MISUSE for a bad beta, delta or reduction.
*/
TD_API td_tensor *td_smooth_l1_loss(td_tensor *input, td_tensor *target, td_reduction reduction, double beta);
TD_API td_tensor *td_huber_loss(td_tensor *input, td_tensor *target, td_reduction reduction, double delta);
/*
** CONSTRUCTOR. F.kl_div(input, target, reduction, log_target): input holds
** log-probabilities; l = target (log target - input) (0 where target is 0),
** or exp(target) (target - input) when log_target. reduction: TD_REDUCE_NONE,
** _MEAN (over every element, as PyTorch), _SUM or TD_REDUCE_BATCHMEAN (the
** sum / size(0): the KL divergence per sample). Same shapes, floating.
*/
TD_API td_tensor *td_kl_div_loss(td_tensor *input, td_tensor *target, td_reduction reduction, bool log_target);
/*
** CONSTRUCTOR. F.cosine_embedding_loss(x1, x2, y, margin, reduction): x1, x2
** [N, D] (or [D]), y [N] (or []) of 1 and -1 (any dtype); with cos the
** cosine similarity of rows (PyTorch's 1e-12 added to each squared norm):
** l = 1 - cos where y = 1, max(0, cos - margin) where y = -1, 0 elsewhere.
** PyTorch's default margin is 0.
*/
TD_API td_tensor *td_cosine_embedding_loss(td_tensor *x1, td_tensor *x2, td_tensor *y, double margin,
                                           td_reduction reduction);

/* ======================================================================
** Issue 25, part 2: linear/bilinear upsampling, Conv3d, Embedding's
** padding_idx and max_norm, AdaptiveMaxPool2d's indices and the CTC loss.
** ====================================================================== */

/*
** CONSTRUCTOR. F.interpolate(x, size or scale_factor, mode="linear" for x
** [N, C, L], "bilinear" for [N, C, H, W], align_corners). size (IN) or
** scale_factor (IN), one entry per spatial dim, exactly one non-NULL
** (TD_ERR_MISUSE). Output size = size or floor(in * scale_factor). Source
** index of output i: scale * i with scale = (in - 1) / (out - 1) when
** align_corners, else max(scale * (i + 0.5) - 0.5, 0) with scale =
** 1 / scale_factor (when given) or in / out; the two neighbours are weighted
** linearly, as PyTorch (in float32 for float32 inputs). Composed from
** index_select and multiplies, one dim after the other (gradients through
** autograd). TD_ERR_SHAPE for other ranks, TD_ERR_DTYPE for integer inputs.
*/
TD_API td_tensor *td_interpolate_linear(td_tensor *x, const int64_t *size, const double *scale_factor,
                                        bool align_corners);
/* CONSTRUCTOR. nn.Upsample(size or scale_factor, mode="linear" (n = 1) or
** "bilinear" (n = 2), align_corners); the arrays (n entries, exactly one
** non-NULL) are copied. PyTorch's default align_corners is false. */
TD_API td_module *td_upsample_linear_new(int n, const int64_t *size, const double *scale_factor, bool align_corners);

/*
** CONSTRUCTOR. F.conv3d(x, w, b, stride, padding, dilation, groups): x [N, C,
** D, H, W], w [O, C/groups, kd, kh, kw], b [O] or NULL -> [N, O, Do, Ho, Wo],
** Do = (D + 2 padding - dilation (kd - 1) - 1) / stride + 1 (likewise H, W).
** NULL stride/dilation are 1, NULL padding 0. Composed over conv2d (the kd
** depth taps stacked as channels; one conv2d call), so it runs wherever
** conv2d does, gradients included. TD_ERR_SHAPE for shapes that do not fit,
** TD_ERR_MISUSE for a non-positive stride or dilation or negative padding.
*/
TD_API td_tensor *td_conv3d(td_tensor *x, td_tensor *w, td_tensor *b, const int stride[3], const int padding[3],
                            const int dilation[3], int groups);
/* CONSTRUCTOR. nn.Conv3d (PyTorch's argument order and defaults: NULL stride
** and dilation 1, NULL padding 0): weight [out, in/groups, kd, kh, kw] and
** bias [out], initialized as PyTorch's (kaiming_uniform, a = sqrt(5));
** unbatched [C, D, H, W] inputs get a batch dim of 1. TD_ERR_MISUSE for bad
** sizes. */
TD_API td_module *td_conv3d_new(int64_t in_channels, int64_t out_channels, const int kernel[3], const int stride[3],
                                const int padding[3], const int dilation[3], int groups, bool bias);

/*
** CONSTRUCTOR. nn.Embedding(num_embeddings, embedding_dim, padding_idx,
** max_norm, norm_type). padding_idx (IN, NULL for None; negative counts from
** the end): that row starts at zero and never gets a gradient. max_norm > 0:
** each forward first rescales, in place and without autograd, every row it
** looks up whose norm_type-norm exceeds max_norm to max_norm / (norm + 1e-7)
** times itself (PyTorch's renorm); max_norm <= 0 is None. PyTorch's default
** norm_type is 2. TD_ERR_MISUSE for bad sizes, a padding_idx out of range or
** a norm_type that is not positive and finite.
*/
TD_API td_module *td_embedding_new_ext(int64_t num_embeddings, int64_t embedding_dim, const int64_t *padding_idx,
                                       double max_norm, double norm_type);

/*
** CONSTRUCTOR. F.adaptive_max_pool2d(x, (out_h, out_w), return_indices=True):
** x [N, C, H, W] or [C, H, W] -> y [N, C, out_h, out_w] (cells as
** td_adaptive_max_pool2d_new) and *indices (OUT, int64, y's shape, same
** ownership as y; NULL on failure): the flat position h * W + w in the input
** plane of each cell's first maximum in row-major order, as PyTorch's CPU
** kernel. y's gradient goes to that element. TD_ERR_MISUSE for a NULL
** indices or a non-positive size; TD_ERR_SHAPE for other ranks.
*/
TD_API td_tensor *td_adaptive_max_pool2d_with_indices(td_tensor *x, int64_t out_h, int64_t out_w, td_tensor **indices);

/*
** CONSTRUCTOR. F.ctc_loss(log_probs, targets, input_lengths, target_lengths,
** blank, reduction, zero_infinity): log_probs [T, N, C] (log_softmax
** outputs), targets [N, S] (padded) or 1-D (the targets concatenated),
** input_lengths and target_lengths integer [N]. Per sample the negative log
** likelihood of its target over all alignments; TD_REDUCE_NONE gives [N],
** _SUM their sum, _MEAN the mean of nll / max(target_length, 1) (PyTorch's
** defaults: blank 0, mean, zero_infinity false). An impossible alignment
** gives inf (zero_infinity: 0, with a zero gradient). The gradient is
** PyTorch's, which assumes log_probs = log_softmax(logits) (exact for the
** logits). Every device: CPU tensors run the recursion on the host in double;
** others run it on the device, composed from ops, in log_probs' dtype (f32 for
** half types), with no host read. targets and the lengths are read on the host
** once (keep them on the CPU to spare a device sync). TD_ERR_SHAPE for
** lengths out of range, TD_ERR_INDEX for a label that is blank or not a class.
*/
TD_API td_tensor *td_ctc_loss(td_tensor *log_probs, td_tensor *targets, td_tensor *input_lengths,
                              td_tensor *target_lengths, int64_t blank, td_reduction reduction, bool zero_infinity);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_NN_H */
