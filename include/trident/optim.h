/*
** Trident optim: optimizers, learning-rate schedulers and gradient clipping,
** with PyTorch's names, defaults and formulas (torch.optim, foreach=False).
**
** An optimizer holds borrowed references to its parameters (retained, so they
** outlive a freed module safely) grouped into param groups, plus per-parameter
** state tensors created on the first step. td_optimizer_step() runs ONE fused
** op per parameter that has a gradient (td_adam_update, td_sgd_update,
** td_rmsprop_update in ops.h), so it costs the same on every backend.
**
** State dicts of an optimizer name their entries like PyTorch's flattened
** state: "state.<i>.exp_avg", "state.<i>.exp_avg_sq", "state.<i>.max_exp_avg_sq",
** "state.<i>.momentum_buffer", "state.<i>.square_avg", "state.<i>.grad_avg",
** "state.<i>.step" (int64 scalar), "state.<i>.master_param" (master_weights)
** where i indexes the parameters across groups
** in order, and "param_groups.<g>.lr" (float64 scalar). A checkpoint can hold
** them next to the model's tensors.
**
** Not thread-safe: use an optimizer from one thread at a time.
*/
#ifndef TRIDENT_OPTIM_H
#define TRIDENT_OPTIM_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct td_optimizer td_optimizer;
typedef struct td_scheduler td_scheduler;

/*
** Hyperparameters of every optimizer in one struct; each optimizer reads the
** fields it uses. Start from td_*_defaults(lr), which sets PyTorch's defaults.
*/
typedef struct td_optim_options {
    double lr;
    double weight_decay; /* L2 penalty; AdamW: decoupled decay (default 1e-2) */
    bool maximize;       /* ascend instead of descend */
    /* SGD, and RMSprop's momentum */
    double momentum, dampening;
    bool nesterov;
    /* Adam, AdamW */
    double beta1, beta2, eps; /* eps also RMSprop's */
    bool amsgrad;
    /* RMSprop */
    double alpha;
    bool centered;
    /* Every algorithm: the learning rate lives in device memory (a 0-d
    ** tensor per group, f64 for f64 parameters, else f32), and Adam/AdamW's
    ** step count too (f32, exact to 2^24 steps), both read by the same one
    ** fused op per parameter, so that a step captured with
    ** td_capture_begin/end uses, on every replay, the lr that
    ** td_optimizer_set_lr or a scheduler set since (a fill op on the device's
    ** stream, no host wait) and advances the count (torch's capturable=True).
    ** The state dict reads the count from the device. Without it a captured
    ** step keeps the lr and step it was captured with. */
    bool capturable;
    /* Every algorithm: for float16 and bfloat16 parameters, keep a float32
    ** master copy of each (made from the parameter on its first step) and the
    ** state in float32. The update runs in float32 on the master, from the
    ** gradient cast to float32, and the parameter receives the master rounded
    ** to its dtype: updates smaller than half a bf16 ulp accumulate instead of
    ** vanishing. The state dict holds the copy as "state.<i>.master_param".
    ** No effect on float32 and float64 parameters. */
    bool master_weights;
} td_optim_options;

/* METHOD. PyTorch's defaults: SGD (momentum 0, dampening 0), Adam (betas 0.9,
** 0.999, eps 1e-8, weight decay 0), AdamW (the same with weight decay 1e-2),
** RMSprop (alpha 0.99, eps 1e-8). */
TD_API td_optim_options td_sgd_defaults(double lr);
TD_API td_optim_options td_adam_defaults(double lr);
TD_API td_optim_options td_adamw_defaults(double lr);
TD_API td_optim_options td_rmsprop_defaults(double lr);

/*
** CONSTRUCTOR. An optimizer over n parameters (one param group), freed with
** td_optimizer_free(). opt NULL uses PyTorch's defaults, lr included (1e-3 for
** Adam and AdamW, 1e-2 for RMSprop; SGD has none: NULL is TD_ERR_MISUSE). Errors: TD_ERR_MISUSE for a parameter
** that is NULL, not a float leaf or not requiring grad, for lr < 0, betas
** outside [0, 1), nesterov without momentum or with dampening.
*/
TD_API td_optimizer *td_sgd_new(int n, td_tensor *const *params, const td_optim_options *opt);
TD_API td_optimizer *td_adam_new(int n, td_tensor *const *params, const td_optim_options *opt);
TD_API td_optimizer *td_adamw_new(int n, td_tensor *const *params, const td_optim_options *opt);
TD_API td_optimizer *td_rmsprop_new(int n, td_tensor *const *params, const td_optim_options *opt);

/* DESTRUCTOR. Release the parameters and state. NULL is a no-op. */
TD_API void td_optimizer_free(td_optimizer *o);

/* METHOD. Add a param group with its own options (NULL: those of the first
** group). A parameter may be in only one group (TD_ERR_MISUSE). */
TD_API td_status td_optimizer_add_param_group(td_optimizer *o, int n, td_tensor *const *params,
                                              const td_optim_options *opt);

/* METHOD. One update of every parameter that has a gradient; parameters
** without one are skipped, as in PyTorch. Runs without recording for
** autograd. Returns TD_OK or the first op's error. */
TD_API td_status td_optimizer_step(td_optimizer *o);

/* METHOD. Drop every parameter's gradient (set_to_none=True). */
TD_API void td_optimizer_zero_grad(td_optimizer *o);

/* METHOD. Set the learning rate of every group, or of group g. Schedulers
** call these. An lr that is NaN, infinite or negative is refused where it is
** set: the lr stays as it was and the error is TD_ERR_MISUSE (set_lr sets
** td_last_error; set_group_lr also returns it, or TD_ERR_INDEX for a bad g).
** GETTER: group g's lr (NAN with TD_ERR_INDEX when out of range). */
TD_API void td_optimizer_set_lr(td_optimizer *o, double lr);
TD_API td_status td_optimizer_set_group_lr(td_optimizer *o, int g, double lr);
TD_API double td_optimizer_get_lr(const td_optimizer *o, int g);
/* GETTERS. Number of param groups (0 for NULL); name of the algorithm ("Adam";
** "?" for NULL). */
TD_API int td_optimizer_num_groups(const td_optimizer *o);
TD_API const char *td_optimizer_name(const td_optimizer *o);

/*
** CONSTRUCTOR. The optimizer's state as named tensors (see the top of this
** file). The state tensors are the optimizer's own (not copies); step
** counters and learning rates are fresh scalars. NULL on failure.
*/
TD_API td_named_tensors *td_optimizer_state_dict(td_optimizer *o);

/*
** METHOD. Restore a state saved by td_optimizer_state_dict from an optimizer
** of the same algorithm and options over parameters of the same shapes.
** Values are copied (to the parameters' device). Errors name the key:
** TD_ERR_MISUSE for a state entry of a parameter index that does not exist or
** an unknown key, TD_ERR_SHAPE/TD_ERR_DTYPE when a tensor does not match its
** parameter. Nothing changes unless every check passes.
*/
TD_API td_status td_optimizer_load_state_dict(td_optimizer *o, const td_named_tensors *sd);

/* ======================================================================
** Learning-rate schedulers (torch.optim.lr_scheduler), by closed form:
** lr(e) for epoch counter e = last_epoch, from each group's base lr (its lr
** when the scheduler was made). Creating a scheduler sets lr(0).
** ====================================================================== */

/* CONSTRUCTOR. StepLR: base * gamma^floor(e / step_size). */
TD_API td_scheduler *td_step_lr_new(td_optimizer *o, int64_t step_size, double gamma);
/* CONSTRUCTOR. ExponentialLR: base * gamma^e. */
TD_API td_scheduler *td_exponential_lr_new(td_optimizer *o, double gamma);
/* CONSTRUCTOR. CosineAnnealingLR: eta_min + (base - eta_min)(1 + cos(pi e / T_max)) / 2. */
TD_API td_scheduler *td_cosine_annealing_lr_new(td_optimizer *o, int64_t t_max, double eta_min);
/* CONSTRUCTOR. LinearLR (linear warmup): base * (start + (end - start) min(e, total) / total). */
TD_API td_scheduler *td_linear_lr_new(td_optimizer *o, double start_factor, double end_factor, int64_t total_iters);

/* METHOD. Advance the epoch counter by one and set each group's lr. */
TD_API void td_scheduler_step(td_scheduler *s);
/* METHOD. Jump to epoch e (for resuming) and set each group's lr. */
TD_API void td_scheduler_set_epoch(td_scheduler *s, int64_t e);
/* GETTER. The epoch counter (-1 for NULL). */
TD_API int64_t td_scheduler_last_epoch(const td_scheduler *s);
/* METHOD. The closed-form lr of group g at epoch e (NAN when out of range). */
TD_API double td_scheduler_lr_at(const td_scheduler *s, int g, int64_t e);
/* DESTRUCTOR. The optimizer is not freed. NULL is a no-op. */
TD_API void td_scheduler_free(td_scheduler *s);

/* ======================================================================
** Gradient clipping (torch.nn.utils)
** ====================================================================== */

/*
** METHOD. clip_grad_norm_: the norm of all gradients together (norm_type 2 for
** L2, INFINITY for the max), and when it exceeds max_norm every gradient is
** scaled by max_norm / (norm + 1e-6). Parameters without a gradient are
** skipped. Returns the total norm before clipping (0 when no gradient), or NAN
** with an error (TD_ERR_MISUSE for max_norm < 0 or norm_type <= 0).
*/
TD_API double td_clip_grad_norm_(int n, td_tensor *const *params, double max_norm, double norm_type);
/* METHOD. clip_grad_value_: clamp every gradient to [-clip, clip]. */
TD_API td_status td_clip_grad_value_(int n, td_tensor *const *params, double clip);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_OPTIM_H */
