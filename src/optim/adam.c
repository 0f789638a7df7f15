/*
** torch.optim.Adam and AdamW through the fused adam_update op (step t from 1):
**   Adam:  g = grad + weight_decay * p        AdamW: p *= 1 - lr * weight_decay
**   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,  vmax = max(vmax, v) (amsgrad)
**   p -= lr / (1 - b1^t) * m / (sqrt(v or vmax) / sqrt(1 - b2^t) + eps)
** (g negated first when maximize).
*/
#include "optim_internal.h"

static bool adam_uses_slot(const td_optim_options *o, int slot) { return slot < 2 || o->amsgrad; }

static td_status adam_check(const td_optim_options *o, const char *name) {
    if (!(o->lr >= 0) || !(o->eps >= 0) || !(o->weight_decay >= 0))
        return TD_ERR(TD_ERR_MISUSE, "%s: lr %g, eps %g and weight_decay %g must be >= 0", name, o->lr, o->eps,
                      o->weight_decay);
    if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
        return TD_ERR(TD_ERR_MISUSE, "%s: betas (%g, %g) must lie in [0, 1)", name, o->beta1, o->beta2);
    if (o->capturable)
        return TD_ERR(TD_ERR_UNSUPPORTED,
                      "%s: capturable (a step count kept on the device) is not implemented yet; a captured step "
                      "would replay one step count, so capture with SGD or RMSprop",
                      name);
    return TD_OK;
}

static td_status adam_validate(const td_optim_options *o) { return adam_check(o, "Adam"); }
static td_status adamw_validate(const td_optim_options *o) { return adam_check(o, "AdamW"); }

static td_status update(const td_optim_options *o, td_param_state *ps, td_tensor *g, bool decoupled) {
    return td_adam_update(ps->param, g, ps->slot[0], ps->slot[1], o->amsgrad ? ps->slot[2] : NULL, o->lr, o->beta1,
                          o->beta2, o->eps, o->weight_decay, ps->step, decoupled, o->amsgrad, o->maximize);
}

static td_status adam_update(const td_optim_options *o, td_param_state *ps, td_tensor *g, bool first_step) {
    (void)first_step;
    return update(o, ps, g, false);
}

static td_status adamw_update(const td_optim_options *o, td_param_state *ps, td_tensor *g, bool first_step) {
    (void)first_step;
    return update(o, ps, g, true);
}

const td_optim_algo td_optim_adam = {
    .name = "Adam",
    .slot_names = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    .uses_slot = adam_uses_slot,
    .validate = adam_validate,
    .update = adam_update,
};

const td_optim_algo td_optim_adamw = {
    .name = "AdamW",
    .slot_names = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    .uses_slot = adam_uses_slot,
    .validate = adamw_validate,
    .update = adamw_update,
};

td_optim_options td_adam_defaults(double lr) {
    return (td_optim_options){.lr = lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

td_optim_options td_adamw_defaults(double lr) {
    td_optim_options o = td_adam_defaults(lr);
    o.weight_decay = 1e-2;
    return o;
}

td_optimizer *td_adam_new(int n, td_tensor *const *params, const td_optim_options *opt) {
    td_optim_options d = td_adam_defaults(1e-3);
    return td__optimizer_new(&td_optim_adam, n, params, opt ? opt : &d);
}

td_optimizer *td_adamw_new(int n, td_tensor *const *params, const td_optim_options *opt) {
    td_optim_options d = td_adamw_defaults(1e-3);
    return td__optimizer_new(&td_optim_adamw, n, params, opt ? opt : &d);
}
