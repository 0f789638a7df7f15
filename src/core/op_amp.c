/*
** td_amp_unscale_ (amp.h): the GradScaler's unscale and inf/NaN check as one
** AMP_UNSCALE op per gradient, sent to the backend as one batch (run_many: a
** single multi-tensor launch on CUDA). The op reads and writes its outputs:
** out = (grad, found_inf).
*/
#include <math.h>

#include "internal.h"
#include "trident/amp.h"

td_status td_amp_unscale_(int n, td_tensor *const *grads, td_tensor *found_inf, double inv_scale) {
    const char *op = "amp_unscale_";
    if (n < 0 || (n > 0 && !grads))
        return TD_ERR(TD_ERR_MISUSE, "%s: %d gradients%s", op, n, grads ? "" : ", grads NULL");
    TD_CHECK_ARG_ST(found_inf, op);
    if (found_inf->dtype != TD_F32 || td__numel(found_inf->ndim, found_inf->shape) != 1 || !td_is_contiguous(found_inf))
        return TD_ERR(TD_ERR_DTYPE, "%s: found_inf must be a float32 tensor of one element, got %s with %lld", op,
                      td_dtype_name(found_inf->dtype), (long long)td__numel(found_inf->ndim, found_inf->shape));
    if (!(inv_scale >= 0 && isfinite(inv_scale)))
        return TD_ERR(TD_ERR_MISUSE, "%s: inv_scale = %g is not a finite number >= 0", op, inv_scale);
    for (int i = 0; i < n; i++) {
        td_tensor *g = grads[i];
        if (!td__check_arg(g, op, "grad")) return td_error_prefix("gradient %d", i);
        if (!td_dtype_is_float(g->dtype) || !td_is_contiguous(g))
            return TD_ERR(TD_ERR_DTYPE, "%s: gradient %d must be a contiguous floating tensor, got %s%s", op, i,
                          td_dtype_name(g->dtype), td_is_contiguous(g) ? "" : " (strided)");
    }
    td_op_params p = {.amp = {inv_scale}};
    td_status st = TD_OK;
    td__batch_begin();
    for (int i = 0; i < n && st == TD_OK; i++) {
        td_tensor *out[2] = {grads[i], found_inf};
        if (td__numel(grads[i]->ndim, grads[i]->shape) > 0)
            st = td__dispatch(TD_OP_AMP_UNSCALE, 0, NULL, NULL, 2, out, &p);
        if (st != TD_OK) td_error_prefix("%s: gradient %d", op, i);
    }
    td_status sent = td__batch_end();
    return st != TD_OK ? st : sent;
}
