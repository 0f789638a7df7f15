/*
** torch.optim.SGD through the fused sgd_update op:
**   g = grad (+ weight_decay * p), negated when maximize
**   buf = g on the first step, else momentum * buf + (1 - dampening) g
**   g = nesterov ? g + momentum * buf : buf          (when momentum != 0)
**   p -= lr * g
*/
#include "optim_internal.h"

static bool sgd_uses_slot(const td_optim_options *o, int slot) { return slot == 0 && o->momentum != 0; }

static td_status sgd_validate(const td_optim_options *o) {
    if (!(o->lr >= 0) || !(o->momentum >= 0) || !(o->weight_decay >= 0))
        return TD_ERR(TD_ERR_MISUSE, "SGD: lr %g, momentum %g and weight_decay %g must be >= 0", o->lr, o->momentum,
                      o->weight_decay);
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
        return TD_ERR(TD_ERR_MISUSE, "SGD: nesterov needs momentum > 0 and dampening 0 (got %g, %g)", o->momentum,
                      o->dampening);
    return TD_OK;
}

/* capturable: the same op with the lr read from device memory (ps->lr_t) */
static td_status capturable_update(const td_optim_options *o, td_param_state *ps, td_tensor *g, bool first_step) {
    td_op_params p = {.sgd = {o->lr, o->momentum, o->dampening, o->weight_decay, o->nesterov, first_step, o->maximize}};
    td_tensor *in[2] = {g, ps->lr_t}, *out[2] = {ps->param, o->momentum != 0 ? ps->slot[0] : NULL};
    return td__dispatch(TD_OP_SGD_STEP, 2, in, NULL, 2, out, &p);
}

static td_status sgd_update(const td_optim_options *o, td_param_state *ps, td_tensor *g, bool first_step) {
    if (o->capturable) return capturable_update(o, ps, g, first_step);
    return td_sgd_update(ps->param, g, ps->slot[0], o->lr, o->momentum, o->dampening, o->weight_decay, o->nesterov,
                         first_step, o->maximize);
}

TD_OPTIM_ALGO(sgd, "SGD", sgd_uses_slot, sgd, "momentum_buffer", NULL, NULL);

td_optim_options td_sgd_defaults(double lr) { return (td_optim_options){.lr = lr}; }

td_optimizer *td_sgd_new(int n, td_tensor *const *params, const td_optim_options *opt) {
    if (!opt) TD_FAIL_NULL(TD_ERR_MISUSE, "SGD: options are NULL (SGD has no default lr; use td_sgd_defaults(lr))");
    return td__optimizer_new(&td_optim_sgd, n, params, opt);
}
