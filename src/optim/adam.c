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
    return TD_OK;
}

static td_status adam_validate(const td_optim_options *o) { return adam_check(o, "Adam"); }
static td_status adamw_validate(const td_optim_options *o) { return adam_check(o, "AdamW"); }

/* capturable: the same fused op with the lr and the step count read from
** device memory (ps->lr_t, the group's; ps->step_t, this parameter's steps
** done, which the op advances), so a captured step replays with the lr set
** since and t + 1 each time (torch's capturable=True); params' step is a
** placeholder, equal for every parameter so that a batch takes them all. */
static td_status capturable_update(const td_optim_options *o, td_param_state *ps, td_tensor *g, bool decoupled) {
    if (!ps->step_t) /* ps->step already counts this step */
        ps->step_t = td_keep(td_full(0, NULL, (double)(ps->step - 1), TD_F32, td_tensor_device(ps->param)));
    if (!ps->step_t) return td_last_status();
    td_op_params p = {
        .adam = {o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, 1, decoupled, o->amsgrad, o->maximize}};
    td_tensor *in[2] = {g, ps->lr_t};
    td_tensor *out[6] = {ps->param, ps->slot[0], ps->slot[1], o->amsgrad ? ps->slot[2] : NULL, ps->step_t, NULL};
    return td__dispatch(TD_OP_ADAM_STEP, 2, in, NULL, 6, out, &p);
}

static td_status update(const td_optim_options *o, td_param_state *ps, td_tensor *g, bool decoupled) {
    if (o->capturable) return capturable_update(o, ps, g, decoupled);
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

TD_OPTIM_ALGO(adam, "Adam", adam_uses_slot, adam, "exp_avg", "exp_avg_sq", "max_exp_avg_sq");

TD_OPTIM_ALGO(adamw, "AdamW", adam_uses_slot, adamw, "exp_avg", "exp_avg_sq", "max_exp_avg_sq");

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
