/*
** The functional API (seed 000): value_and_grad(fn)(params) in the style of
** JAX, on detached copies of the parameters so their .grad is untouched.
*/
#include "autograd_internal.h"

td_status td_value_and_grad(td_loss_fn fn, void *user, int n, td_tensor *const *params, td_tensor **value,
                            td_tensor **grads) {
    if (value) *value = NULL;
    for (int i = 0; grads && i < n; i++) grads[i] = NULL;
    if (!fn || !value || n < 0 || n > 64 || (n && (!params || !grads)))
        return TD_ERR(TD_ERR_MISUSE, "value_and_grad: need fn, value, and 0..64 params with grads (got %d)", n);
    td_tensor *x[64];
    td_status st = TD_OK;
    td_scope_begin();
    for (int i = 0; st == TD_OK && i < n; i++) {
        x[i] = td_detach(params[i]);
        st = x[i] ? td_set_requires_grad(x[i], true) : td_last_status();
    }
    td_tensor *loss = NULL;
    if (st == TD_OK) {
        td_enable_grad_begin();
        loss = fn(user, n, x);
        td_enable_grad_end();
        if (!loss) st = td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "value_and_grad: fn returned NULL");
    }
    if (st == TD_OK && td__numel(loss->ndim, loss->shape) != 1) {
        char s[96];
        st = TD_ERR(TD_ERR_MISUSE, "value_and_grad: fn must return one element, got shape %s",
                    td__shape_str(loss->ndim, loss->shape, s, sizeof s));
    }
    if (st == TD_OK && n && loss->requires_grad) st = td_grad(1, &loss, NULL, n, x, grads, false, false, true);
    for (int i = 0; i < n; i++) td_keep(grads[i]); /* owned from here on */
    for (int i = 0; st == TD_OK && i < n; i++) {
        if (!grads[i]) grads[i] = td_keep(td_zeros_like(params[i])); /* fn does not depend on params[i] */
        if (!grads[i]) st = td_last_status();
    }
    if (st == TD_OK) *value = td_keep(td_detach(loss));
    if (st == TD_OK && !*value) st = td_last_status();
    td_scope_end();
    td__hand_out(st, n, grads);
    return td__hand_out(st, 1, value);
}
