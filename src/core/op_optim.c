/*
** Fused optimizer updates: td_adam_update, td_sgd_update, td_rmsprop_update.
** Each checks its tensors and hyper-parameters and runs one in-place op
** (ADAM_STEP, SGD_STEP, RMSPROP_STEP) with grad as the input and the
** parameter and its state as the outputs. The formulas are PyTorch's; see
** src/backend_cpu/cpu_optim.h and cpu_optim.c.
*/
#include <math.h>
#include <string.h>

#include "internal.h"

/* t (named `name`) must be alive, contiguous and match param in shape, dtype
** and device. param itself must hold a floating dtype. */
static td_status check_like(td_tensor *t, const char *name, const td_tensor *param, const char *op) {
    if (!td__check_arg(t, op, name)) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    char a[96], b[96];
    if (t == param && !td_dtype_is_float(t->dtype))
        return TD_ERR(TD_ERR_DTYPE, "%s: param has dtype %s, need a floating type", op, td_dtype_name(t->dtype));
    if (t->ndim != param->ndim || memcmp(t->shape, param->shape, sizeof(int64_t) * (size_t)t->ndim))
        return TD_ERR(TD_ERR_SHAPE, "%s: %s %s does not match param %s", op, name,
                      td__shape_str(t->ndim, t->shape, a, sizeof a),
                      td__shape_str(param->ndim, param->shape, b, sizeof b));
    if (t->dtype != param->dtype)
        return TD_ERR(TD_ERR_DTYPE, "%s: %s has dtype %s but param has %s", op, name, td_dtype_name(t->dtype),
                      td_dtype_name(param->dtype));
    if (!td_device_equal(t->storage->device, param->storage->device))
        return TD_ERR(TD_ERR_DEVICE, "%s: %s is on %s but param is on %s", op, name,
                      td_device_str(t->storage->device, a, sizeof a),
                      td_device_str(param->storage->device, b, sizeof b));
    if (!td_is_contiguous(t)) return TD_ERR(TD_ERR_MISUSE, "%s: %s is not contiguous", op, name);
    return TD_OK;
}

/* An optional state tensor: required when `needed` (else it must be given),
** checked when given. */
static td_status check_state(td_tensor *t, const char *name, bool needed, const char *why, const td_tensor *param,
                             const char *op) {
    if (!t) return needed ? TD_ERR(TD_ERR_MISUSE, "%s: %s needs the state tensor %s", op, why, name) : TD_OK;
    return check_like(t, name, param, op);
}

#define TRY(expr)                                                                                                      \
    do {                                                                                                               \
        td_status s_ = (expr);                                                                                         \
        if (s_ != TD_OK) return s_;                                                                                    \
    } while (0)

/* param (a floating dtype) and grad (its match), the tensors every update takes */
static td_status check_param_grad(td_tensor *param, td_tensor *grad, const char *op) {
    TRY(check_like(param, "param", param, op));
    return check_like(grad, "grad", param, op);
}

/* A hyper-parameter must be finite and within [lo, hi) (hi_open) or [lo, hi]. */
static td_status check_range(double x, const char *name, double lo, double hi, bool hi_open, const char *op) {
    if (isfinite(x) && x >= lo && (hi_open ? x < hi : x <= hi)) return TD_OK;
    return TD_ERR(TD_ERR_MISUSE, "%s: %s = %g is outside [%g, %g%s", op, name, x, lo, hi, hi_open ? ")" : "]");
}

td_status td_adam_update(td_tensor *param, td_tensor *grad, td_tensor *m, td_tensor *v, td_tensor *vmax, double lr,
                         double beta1, double beta2, double eps, double weight_decay, int64_t step,
                         bool decoupled_weight_decay, bool amsgrad, bool maximize) {
    const char *op = "adam_update";
    TRY(check_param_grad(param, grad, op));
    TRY(check_like(m, "m", param, op));
    TRY(check_like(v, "v", param, op));
    TRY(check_state(vmax, "vmax", amsgrad, "amsgrad", param, op));
    TRY(check_range(lr, "lr", 0, INFINITY, true, op));
    TRY(check_range(beta1, "beta1", 0, 1, true, op));
    TRY(check_range(beta2, "beta2", 0, 1, true, op));
    TRY(check_range(eps, "eps", 0, INFINITY, true, op));
    TRY(check_range(weight_decay, "weight_decay", 0, INFINITY, true, op));
    if (step < 1) return TD_ERR(TD_ERR_MISUSE, "%s: step = %lld, but steps count from 1", op, (long long)step);
    td_op_params p = {.adam = {lr, beta1, beta2, eps, weight_decay, step, decoupled_weight_decay, amsgrad, maximize}};
    td_tensor *in[2] = {grad, NULL}, *out[6] = {param, m, v, amsgrad ? vmax : NULL, NULL, td__shadow_view(param)};
    if (out[5] && !td__supports(TD_OP_ADAM_STEP, 2, in, 6, out, &p)) { /* the shadow goes stale instead */
        td_release(out[5]);
        out[5] = NULL;
    }
    td_status st = td__dispatch(TD_OP_ADAM_STEP, 2, in, NULL, 6, out, &p);
    td_release(out[5]);
    return st;
}

td_status td_sgd_update(td_tensor *param, td_tensor *grad, td_tensor *buf, double lr, double momentum, double dampening,
                        double weight_decay, bool nesterov, bool first_step, bool maximize) {
    const char *op = "sgd_update";
    TRY(check_param_grad(param, grad, op));
    TRY(check_range(lr, "lr", 0, INFINITY, true, op));
    TRY(check_range(momentum, "momentum", 0, INFINITY, true, op));
    TRY(check_range(weight_decay, "weight_decay", 0, INFINITY, true, op));
    if (!isfinite(dampening)) return TD_ERR(TD_ERR_MISUSE, "%s: dampening = %g is not finite", op, dampening);
    if (nesterov && (momentum <= 0 || dampening != 0))
        return TD_ERR(TD_ERR_MISUSE, "%s: nesterov needs momentum > 0 and dampening 0 (got %g and %g)", op, momentum,
                      dampening);
    TRY(check_state(buf, "buf", momentum != 0, "momentum", param, op));
    td_op_params p = {.sgd = {lr, momentum, dampening, weight_decay, nesterov, first_step, maximize}};
    td_tensor *in[2] = {grad, NULL}, *out[2] = {param, momentum != 0 ? buf : NULL};
    return td__dispatch(TD_OP_SGD_STEP, 2, in, NULL, 2, out, &p);
}

td_status td_rmsprop_update(td_tensor *param, td_tensor *grad, td_tensor *square_avg, td_tensor *buf,
                            td_tensor *grad_avg, double lr, double alpha, double eps, double weight_decay,
                            double momentum, bool centered, bool maximize) {
    const char *op = "rmsprop_update";
    TRY(check_param_grad(param, grad, op));
    TRY(check_like(square_avg, "square_avg", param, op));
    TRY(check_state(buf, "buf", momentum > 0, "momentum", param, op));
    TRY(check_state(grad_avg, "grad_avg", centered, "centered", param, op));
    TRY(check_range(lr, "lr", 0, INFINITY, true, op));
    TRY(check_range(alpha, "alpha", 0, 1, false, op));
    TRY(check_range(eps, "eps", 0, INFINITY, true, op));
    TRY(check_range(weight_decay, "weight_decay", 0, INFINITY, true, op));
    TRY(check_range(momentum, "momentum", 0, INFINITY, true, op));
    td_op_params p = {.rmsprop = {lr, alpha, eps, weight_decay, momentum, centered, maximize}};
    td_tensor *in[2] = {grad, NULL},
              *out[4] = {param, square_avg, momentum > 0 ? buf : NULL, centered ? grad_avg : NULL};
    return td__dispatch(TD_OP_RMSPROP_STEP, 2, in, NULL, 4, out, &p);
}
