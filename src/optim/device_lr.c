/*
** The capturable optimizers' learning rate in device memory: per group, one
** 0-d tensor for each (device, dtype) its parameters have (f64 for f64, else
** f32, the ADAM/SGD/RMSPROP_STEP ops' lr operand). The fused step reads it
** when it runs, so a step captured into a graph and replayed uses the lr that
** td_optimizer_set_lr (or a scheduler) set since, not the one it was
** captured with. Setting it is a FILL op in place: a kernel on the device's
** stream, ordered before the next replay, with no host wait.
*/
#include <stdlib.h>

#include "optim_internal.h"

td_status td__device_lr_bind(td_optimizer *o, td_param_state *ps, const td_tensor *t) {
    td_device dev = td_tensor_device(t);
    td_dtype dt = td_tensor_dtype(t) == TD_F64 ? TD_F64 : TD_F32;
    for (int i = 0; i < o->n_lrs; i++) {
        td_tensor *l = o->lrs[i].t;
        if (o->lrs[i].group == ps->group && td_tensor_dtype(l) == dt && td_device_equal(td_tensor_device(l), dev)) {
            ps->lr_t = l;
            return TD_OK;
        }
    }
    td_device_lr *lrs = realloc(o->lrs, (size_t)(o->n_lrs + 1) * sizeof *lrs);
    if (!lrs) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", o->algo->name);
    o->lrs = lrs;
    td_tensor *l = td_keep(td_full(0, NULL, o->groups[ps->group].lr, dt, dev));
    if (!l) return td_last_status();
    o->lrs[o->n_lrs++] = (td_device_lr){.group = ps->group, .t = l};
    ps->lr_t = l;
    return TD_OK;
}

td_status td__device_lr_set(td_optimizer *o, int g) {
    td_op_params p = {.fill = {o->groups[g].lr}};
    for (int i = 0; i < o->n_lrs; i++) {
        if (o->lrs[i].group != g) continue;
        td_status st = td__dispatch(TD_OP_FILL, 0, NULL, NULL, 1, &o->lrs[i].t, &p);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

void td__device_lr_free(td_optimizer *o) {
    for (int i = 0; i < o->n_lrs; i++) td_release(o->lrs[i].t);
    free(o->lrs);
    o->lrs = NULL;
    o->n_lrs = 0;
}
