/*
** Trident amp: mixed precision with PyTorch's semantics (torch.autocast and
** torch.amp.GradScaler).
**
** Autocast. Inside td_autocast_begin(device_type, dtype) ... td_autocast_end()
** each op casts its floating inputs on devices of that type by the op's policy,
** the `amp` column of the op table (include/trident/op_list.h), which follows
** torch.autocast's CUDA op lists on every device type:
**   low      matmul, linear, conv2d: f32 inputs become dtype (f16 or bf16);
**   f32      exp, log, rsqrt, pow, sum, softmax, log_softmax, layer_norm,
**            cross_entropy, logsumexp: f16/bf16 inputs become f32;
**   promote  binary elementwise ops, where, cat, scatter_add: the widest
**            float dtype of the inputs (ordinary type promotion);
**   as is    everything else (mean, relu, gelu, embedding, ...).
** f64 inputs are never cast. The casts are ordinary differentiable ops, so
** gradients reach an f32 leaf as f32. A cast of a leaf that requires grad (a
** parameter) to the low dtype is made once per scope and reused (torch's
** autocast weight cache) until the outermost scope ends or the parameter is
** written (its storage version changes). Backward passes run with autocast
** off, as torch's autograd engine threads do.
**
** Shadows. An f32 parameter that is the whole of its storage, or a view of a
** module's parameter arena (td_module_flatten_parameters), keeps its low cast
** between scopes (llm.c's bf16 weights beside the f32 masters): the first cast
** of its storage makes the shadow, and the Adam/AdamW step writes it beside
** the parameter in the same kernel, so a training step's forward casts no
** parameter (2 bytes a parameter stay allocated). Any other write through
** Trident (an op, copy_, a collective, a user kernel given the parameter, a
** capture or a graph replay) makes the shadow stale: the next cast refreshes
** it, one pass over the storage. A parameter exported writable through DLPack,
** or imported from another framework's memory, has none: its memory may change
** behind Trident's back. A graph saved before an optimizer step that rewrote a
** shadow it reads fails its backward with the in-place error (torch would use
** the cast made before the step); after other writes the refresh leaves such
** a graph its old shadow. TRIDENT_AUTOCAST_SHADOW=0 turns shadows off.
**
** Scopes are per thread and nest: the innermost open scope for a device type
** decides. Run the forward pass and the loss inside the scope, backward and
** the optimizer step after it.
**
** GradScaler. Dynamic loss scaling for f16 training:
**   loss = td_grad_scaler_scale(s, loss);   backward;
**   td_grad_scaler_step(s, optimizer, &skipped);   td_grad_scaler_update(s);
** step unscales every gradient of the optimizer in one multi-tensor op
** (AMP_UNSCALE, one launch on CUDA) that also sets a found_inf flag on the
** device, reads that flag once (the step's one host wait) and skips the
** optimizer step when a gradient holds inf or NaN. update multiplies the scale
** by backoff_factor after a skipped step and by growth_factor after
** growth_interval clean steps in a row (torch's defaults: 2^16, 0.5, 2, 2000).
*/
#ifndef TRIDENT_AMP_H
#define TRIDENT_AMP_H

#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* METHOD. Open an autocast scope for tensors on devices of type device_type
** (TD_DEVICE_CPU, _CUDA or _VULKAN) with low-precision dtype TD_F16 or TD_BF16.
** Errors: TD_ERR_MISUSE for another dtype or device type, or scopes nested
** deeper than 64. Thread safety: per thread. */
TD_API td_status td_autocast_begin(int device_type, td_dtype dtype);
/* METHOD. Close the innermost scope; the outermost one also drops the cached
** casts of parameters. TD_ERR_MISUSE when no scope is open. */
TD_API td_status td_autocast_end(void);
/* GETTER. Whether an autocast scope for device_type is active on this thread;
** its dtype goes to *dtype (OUT, may be NULL). */
TD_API bool td_autocast_enabled(int device_type, td_dtype *dtype);

/* METHOD. AMP_UNSCALE over n gradients (contiguous, floating, on one device),
** in place: found_inf (f32 [1], same device) is set to 1 when any element of
** any gradient is inf or NaN (it is never cleared here: fill it with 0
** first), and every gradient is multiplied by inv_scale. The n ops go to the
** backend as one batch (one launch on CUDA). Errors: TD_ERR_MISUSE,
** TD_ERR_DTYPE, TD_ERR_DEVICE naming the gradient. */
TD_API td_status td_amp_unscale_(int n, td_tensor *const *grads, td_tensor *found_inf, double inv_scale);

typedef struct td_grad_scaler td_grad_scaler;

typedef struct td_grad_scaler_options {
    double init_scale;       /* 65536 */
    double growth_factor;    /* 2 */
    double backoff_factor;   /* 0.5 */
    int64_t growth_interval; /* 2000 clean steps */
    bool enabled;            /* false: scale() and step() pass through */
} td_grad_scaler_options;

/* METHOD. torch.amp.GradScaler's defaults. */
TD_API td_grad_scaler_options td_grad_scaler_defaults(void);

/* CONSTRUCTOR. A scaler (NULL opt: the defaults). NULL with TD_ERR_MISUSE for
** init_scale not finite and > 0, growth_factor <= 1, backoff_factor outside
** (0, 1) or growth_interval < 1. Free with td_grad_scaler_free. */
TD_API td_grad_scaler *td_grad_scaler_new(const td_grad_scaler_options *opt);
/* DESTRUCTOR. NULL is a no-op. */
TD_API void td_grad_scaler_free(td_grad_scaler *s);
/* CONSTRUCTOR. loss * scale (a new tensor in the current scope; loss itself
** when disabled). */
TD_API td_tensor *td_grad_scaler_scale(td_grad_scaler *s, td_tensor *loss);
/* METHOD. Unscale the gradients of o's parameters now (for clipping before
** step); at most once per step: TD_ERR_STATE on a second call before update.
** TD_ERR_DTYPE for a float16 gradient (unscaled in float16 it would underflow;
** torch's "Attempting to unscale FP16 gradients"). */
TD_API td_status td_grad_scaler_unscale_(td_grad_scaler *s, td_optimizer *o);
/* METHOD. Unscale (unless done), read found_inf once, and run
** td_optimizer_step(o) unless a gradient was inf or NaN. *skipped (OUT, may be
** NULL) says which. */
TD_API td_status td_grad_scaler_step(td_grad_scaler *s, td_optimizer *o, bool *skipped);
/* METHOD. Adjust the scale after step (backoff on a skipped step, growth after
** growth_interval clean ones). TD_ERR_STATE when no step ran since the last
** update. */
TD_API td_status td_grad_scaler_update(td_grad_scaler *s);
/* GETTERS. The current scale (NAN for NULL); clean steps since the last
** change (torch's growth tracker). */
TD_API double td_grad_scaler_get_scale(const td_grad_scaler *s);
TD_API int64_t td_grad_scaler_growth_tracker(const td_grad_scaler *s);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_AMP_H */
