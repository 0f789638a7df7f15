/*
** torch.nn.utils.clip_grad_norm_ and clip_grad_value_.
**   total = (sum_p ||g_p||^q)^(1/q)   (q = norm_type; inf: max_p max|g_p|)
**   coef  = min(max_norm / (total + 1e-6), 1); every g_p *= coef
** The per-parameter norms are summed on the device; one read brings the total
** (parameters on several devices are gathered on the first one's).
*/
#include <math.h>

#include "optim_internal.h"

static bool check_params(int n, td_tensor *const *params, const char *fn) {
    if (n < 0 || (n > 0 && !params)) return TD_ERR(TD_ERR_MISUSE, "%s: %d parameters from a NULL array", fn, n), false;
    for (int i = 0; i < n; i++)
        if (!td__check_arg(params[i], fn, "params[i]")) return false;
    return true;
}

double td_clip_grad_norm_(int n, td_tensor *const *params, double max_norm, double norm_type) {
    const char *fn = "clip_grad_norm_";
    if (!(max_norm >= 0) || !(norm_type > 0))
        return TD_ERR(TD_ERR_MISUSE, "%s: max_norm %g must be >= 0 and norm_type %g > 0", fn, max_norm, norm_type), NAN;
    if (!check_params(n, params, fn)) return NAN;
    bool inf = isinf(norm_type);
    td_scope_begin();
    td_no_grad_begin();
    td_tensor *acc = NULL; /* sum of |g|^q, or the max |g| */
    bool failed = false;
    for (int i = 0; i < n && !failed; i++) {
        td_tensor *g = td_grad_of(params[i]);
        if (!g) continue;
        td_dtype dt = td_tensor_dtype(g);
        td_tensor *a = td_abs(dt == TD_F64 ? g : td_cast(g, TD_F32)); /* half grads accumulate in f32 */
        td_tensor *part = inf              ? td_amax(a, 0, NULL, false)
                          : norm_type == 2 ? td_sum(td_mul(a, a), 0, NULL, false)
                                           : td_sum(td_pow_scalar(a, norm_type), 0, NULL, false);
        td_tensor *moved = acc ? td_to(part, td_tensor_device(acc)) : part;
        acc = !acc ? moved : inf ? td_maximum(acc, moved) : td_add(acc, moved);
        failed = !acc;
    }
    double total = failed ? NAN : !acc ? 0 : inf ? td_item(acc) : pow(td_item(acc), 1.0 / norm_type);
    double coef = max_norm / (total + 1e-6);
    for (int i = 0; i < n && !isnan(total) && coef < 1; i++) {
        td_tensor *g = td_grad_of(params[i]);
        if (g && td_copy_(g, td_mul_scalar(g, coef)) != TD_OK) total = NAN;
    }
    td_no_grad_end();
    td_scope_end();
    return total;
}

td_status td_clip_grad_value_(int n, td_tensor *const *params, double clip) {
    const char *fn = "clip_grad_value_";
    if (!(clip >= 0)) return TD_ERR(TD_ERR_MISUSE, "%s: clip value %g must be >= 0", fn, clip);
    if (!check_params(n, params, fn)) return td_last_status();
    td_status st = TD_OK;
    td_scope_begin();
    td_no_grad_begin();
    for (int i = 0; i < n && st == TD_OK; i++) {
        td_tensor *g = td_grad_of(params[i]);
        if (g) st = td_copy_(g, td_clamp(g, -clip, clip));
    }
    td_no_grad_end();
    td_scope_end();
    return st;
}
