/*
** GradScaler (amp.h): torch.amp.GradScaler's dynamic loss scaling.
**
** The scale lives on the host: the step reads the device's found_inf flag
** once anyway (to skip the optimizer step), so update() knows the outcome
** without another wait. A step:
**   1. scale:    loss * scale
**   2. unscale_: found_inf = zeros(1); AMP_UNSCALE over every gradient of the
**                optimizer (td_amp_unscale_: one batch, one launch on CUDA)
**   3. step:     found = td_item(found_inf) (the one host read);
**                td_optimizer_step unless found
**   4. update:   found ? scale *= backoff, tracker = 0
**                      : ++tracker == growth_interval ? scale *= growth, tracker = 0
*/
#include <math.h>
#include <stdlib.h>

#include "optim_internal.h"
#include "trident/amp.h"

enum { STAGE_READY, STAGE_UNSCALED, STAGE_STEPPED };

struct td_grad_scaler {
    td_grad_scaler_options o;
    double scale;
    int64_t tracker;      /* clean steps since the scale last changed */
    td_tensor *found_inf; /* +1: f32 [1] on the gradients' device, made by each unscale; NULL: no gradients */
    int stage;
    bool found; /* the last step's outcome */
};

td_grad_scaler_options td_grad_scaler_defaults(void) {
    return (td_grad_scaler_options){
        .init_scale = 65536.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 2000, .enabled = true};
}

td_grad_scaler *td_grad_scaler_new(const td_grad_scaler_options *opt) {
    td_grad_scaler_options o = opt ? *opt : td_grad_scaler_defaults();
    if (!(isfinite(o.init_scale) && o.init_scale > 0))
        TD_FAIL_NULL(TD_ERR_MISUSE, "grad_scaler_new: init_scale = %g is not a finite number > 0", o.init_scale);
    if (!(isfinite(o.growth_factor) && o.growth_factor > 1))
        TD_FAIL_NULL(TD_ERR_MISUSE, "grad_scaler_new: growth_factor = %g is not a finite number > 1", o.growth_factor);
    if (!(o.backoff_factor > 0 && o.backoff_factor < 1))
        TD_FAIL_NULL(TD_ERR_MISUSE, "grad_scaler_new: backoff_factor = %g is outside (0, 1)", o.backoff_factor);
    if (o.growth_interval < 1)
        TD_FAIL_NULL(TD_ERR_MISUSE, "grad_scaler_new: growth_interval = %lld is below 1", (long long)o.growth_interval);
    td_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) TD_FAIL_NULL(TD_ERR_OOM, "grad_scaler_new: out of host memory");
    s->o = o;
    s->scale = o.init_scale;
    return s;
}

void td_grad_scaler_free(td_grad_scaler *s) {
    if (!s) return;
    td_release(s->found_inf);
    free(s);
}

td_tensor *td_grad_scaler_scale(td_grad_scaler *s, td_tensor *loss) {
    if (!s) TD_FAIL_NULL(TD_ERR_MISUSE, "grad_scaler_scale: scaler is NULL");
    TD_CHECK_ARG(loss, "grad_scaler_scale");
    return s->o.enabled ? td_mul_scalar(loss, s->scale) : loss;
}

td_status td_grad_scaler_unscale_(td_grad_scaler *s, td_optimizer *o) {
    if (!s || !o) return TD_ERR(TD_ERR_MISUSE, "grad_scaler_unscale_: %s is NULL", s ? "optimizer" : "scaler");
    if (!s->o.enabled) return TD_OK;
    if (s->stage != STAGE_READY)
        return TD_ERR(TD_ERR_STATE, "grad_scaler_unscale_: already %s since the last update()",
                      s->stage == STAGE_UNSCALED ? "unscaled" : "stepped");
    td_tensor **grads = malloc(sizeof *grads * (size_t)(o->n ? o->n : 1));
    if (!grads) return TD_ERR(TD_ERR_OOM, "grad_scaler_unscale_: out of host memory");
    int n = 0;
    for (int i = 0; i < o->n; i++) {
        if (!(grads[n] = td_grad_of(o->p[i].param))) continue;
        if (td_tensor_dtype(grads[n++]) == TD_F16) {
            free(grads);
            return TD_ERR(TD_ERR_DTYPE,
                          "grad_scaler_unscale_: parameter %d has a float16 gradient, which multiplied by 1/scale in "
                          "float16 would flush towards zero (torch refuses it too): keep the parameters in float32 "
                          "or bfloat16",
                          i);
        }
    }
    td_status st = TD_OK;
    td_release(s->found_inf); /* a fresh zero flag per step (one FILL) */
    s->found_inf = NULL;
    if (n > 0) {
        int64_t one = 1;
        s->found_inf = td_keep(td_zeros(1, &one, TD_F32, grads[0]->storage->device));
        if (!s->found_inf) st = td_last_status();
    }
    td_no_grad_begin();
    if (st == TD_OK) st = td_amp_unscale_(n, grads, s->found_inf, 1.0 / s->scale);
    td_no_grad_end();
    free(grads);
    if (st != TD_OK) return td_error_prefix("grad_scaler_unscale_");
    s->stage = STAGE_UNSCALED;
    return TD_OK;
}

td_status td_grad_scaler_step(td_grad_scaler *s, td_optimizer *o, bool *skipped) {
    if (skipped) *skipped = false;
    if (!s || !o) return TD_ERR(TD_ERR_MISUSE, "grad_scaler_step: %s is NULL", s ? "optimizer" : "scaler");
    if (!s->o.enabled) return td_optimizer_step(o);
    if (s->stage == STAGE_STEPPED)
        return TD_ERR(TD_ERR_STATE, "grad_scaler_step: step() already ran since the last update()");
    if (s->stage == STAGE_READY) {
        td_status st = td_grad_scaler_unscale_(s, o);
        if (st != TD_OK) return st;
    }
    double found = 0;
    if (s->found_inf) { /* the step's one host read */
        found = td_item(s->found_inf);
        if (isnan(found)) return td_error_prefix("grad_scaler_step: reading found_inf");
    }
    s->found = found != 0;
    s->stage = STAGE_STEPPED;
    if (skipped) *skipped = s->found;
    return s->found ? TD_OK : td_optimizer_step(o);
}

td_status td_grad_scaler_update(td_grad_scaler *s) {
    if (!s) return TD_ERR(TD_ERR_MISUSE, "grad_scaler_update: scaler is NULL");
    if (!s->o.enabled) return TD_OK;
    if (s->stage != STAGE_STEPPED) return TD_ERR(TD_ERR_STATE, "grad_scaler_update: no step() since the last update()");
    if (s->found) {
        s->scale *= s->o.backoff_factor;
        s->tracker = 0;
    } else if (++s->tracker == s->o.growth_interval) {
        s->scale *= s->o.growth_factor;
        s->tracker = 0;
    }
    s->stage = STAGE_READY;
    return TD_OK;
}

double td_grad_scaler_get_scale(const td_grad_scaler *s) { return s ? s->scale : NAN; }
int64_t td_grad_scaler_growth_tracker(const td_grad_scaler *s) { return s ? s->tracker : 0; }
