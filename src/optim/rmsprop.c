/*
** torch.optim.RMSprop through the fused rmsprop_update op:
**   g = grad (+ weight_decay * p), negated when maximize
**   sq = alpha sq + (1 - alpha) g^2
**   centered: gavg = alpha gavg + (1 - alpha) g;  avg = sqrt(sq - gavg^2) + eps
**   else avg = sqrt(sq) + eps
**   momentum > 0: buf = momentum buf + g / avg; p -= lr buf   else p -= lr g / avg
*/
#include "optim_internal.h"

static bool rmsprop_uses_slot(const td_optim_options *o, int slot) {
    return slot == 0 || (slot == 1 && o->momentum > 0) || (slot == 2 && o->centered);
}

static td_status rmsprop_validate(const td_optim_options *o) {
    if (!(o->lr >= 0) || !(o->eps >= 0) || !(o->momentum >= 0) || !(o->alpha >= 0) || !(o->weight_decay >= 0))
        return TD_ERR(TD_ERR_MISUSE, "RMSprop: lr %g, eps %g, momentum %g, alpha %g and weight_decay %g must be >= 0",
                      o->lr, o->eps, o->momentum, o->alpha, o->weight_decay);
    return TD_OK;
}

/* capturable: the same op with the lr read from device memory (ps->lr_t) */
static td_status capturable_update(const td_optim_options *o, td_param_state *ps, td_tensor *g) {
    td_op_params p = {.rmsprop = {o->lr, o->alpha, o->eps, o->weight_decay, o->momentum, o->centered, o->maximize}};
    td_tensor *in[2] = {g, ps->lr_t};
    td_tensor *out[4] = {ps->param, ps->slot[0], o->momentum > 0 ? ps->slot[1] : NULL,
                         o->centered ? ps->slot[2] : NULL};
    return td__dispatch(TD_OP_RMSPROP_STEP, 2, in, NULL, 4, out, &p);
}

static td_status rmsprop_update(const td_optim_options *o, td_param_state *ps, td_tensor *g, bool first_step) {
    (void)first_step;
    if (o->capturable) return capturable_update(o, ps, g);
    return td_rmsprop_update(ps->param, g, ps->slot[0], o->momentum > 0 ? ps->slot[1] : NULL,
                             o->centered ? ps->slot[2] : NULL, o->lr, o->alpha, o->eps, o->weight_decay, o->momentum,
                             o->centered, o->maximize);
}

TD_OPTIM_ALGO(rmsprop, "RMSprop", rmsprop_uses_slot, rmsprop, "square_avg", "momentum_buffer", "grad_avg");

td_optim_options td_rmsprop_defaults(double lr) { return (td_optim_options){.lr = lr, .alpha = 0.99, .eps = 1e-8}; }

td_optimizer *td_rmsprop_new(int n, td_tensor *const *params, const td_optim_options *opt) {
    td_optim_options d = td_rmsprop_defaults(1e-2);
    return td__optimizer_new(&td_optim_rmsprop, n, params, opt ? opt : &d);
}
