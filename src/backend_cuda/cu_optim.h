/*
** Multi-tensor optimizer steps of the CUDA backend (cu_ops_optim.cu): one
** kernel launch updates many parameters, as PyTorch's multi_tensor_apply.
**
** ops[0..n) are ADAM_STEP (cu_adam_step_multi) or SGD_STEP
** (cu_sgd_step_multi) ops exactly as the dispatcher would pass them one by one
** (in = grad; out = param and state, contiguous, of one float dtype per op),
** all with the same hyper-parameters (td_op.p). Parameters may differ in size
** (0 included) and dtype (f32, f64, f16, bf16): each dtype present takes one
** launch per 64 tensors, whose table of pointers and sizes travels as the
** kernel's parameter (no host-to-device copy, so it can be captured into a
** CUDA graph). The result equals running the ops one by one with
** cu_op_ADAM_STEP / cu_op_SGD_STEP.
**
** Returns TD_OK once enqueued on d->stream (no host wait); TD_ERR_MISUSE when
** ops is NULL with n > 0, an op has another kind or other hyper-parameters than
** ops[0]; TD_ERR_UNSUPPORTED when an op fails cu_supports_<NAME>; launch errors
** as cu_status. Nothing is launched when an error is found before launching.
** Thread safety: as any op on d (one host thread per device stream).
** defines: cu_adam_step_multi, cu_sgd_step_multi, cu_amp_unscale_multi.
*/
#ifndef TRIDENT_CU_OPTIM_H
#define TRIDENT_CU_OPTIM_H

#include "cu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* METHOD. Adam/AdamW steps of n parameters: ops[i] is an ADAM_STEP op. */
td_status cu_adam_step_multi(cu_dev *d, int n, const td_op *ops);
/* METHOD. SGD steps of n parameters: ops[i] is an SGD_STEP op. */
td_status cu_sgd_step_multi(cu_dev *d, int n, const td_op *ops);
/* METHOD. The GradScaler's unscale of n gradients: ops[i] is an AMP_UNSCALE
** op (out = (grad, found_inf)); every op has the same found_inf
** (TD_ERR_MISUSE otherwise). */
td_status cu_amp_unscale_multi(cu_dev *d, int n, const td_op *ops);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_CU_OPTIM_H */
