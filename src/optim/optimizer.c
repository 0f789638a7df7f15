/*
** The generic optimizer: param groups, the step loop (one fused op per
** parameter with a gradient; with master_weights, the update of a half
** parameter's float32 master copy and the rounding back), zero_grad, learning
** rates, and state dicts named "state.<i>.<slot>", "state.<i>.step",
** "state.<i>.master_param" and "param_groups.<g>.lr".
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_internal.h"

static td_status add_params(td_optimizer *o, int n, td_tensor *const *params, int group) {
    const char *fn = o->algo->name;
    if (n < 0 || (n > 0 && !params)) return TD_ERR(TD_ERR_MISUSE, "%s: %d parameters from a NULL array", fn, n);
    for (int i = 0; i < n; i++) {
        td_tensor *p = params[i];
        if (!td__check_arg(p, fn, "params[i]")) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
        if (!td_dtype_is_float(td_tensor_dtype(p)) || !td_is_leaf(p) || !td_requires_grad(p))
            return TD_ERR(TD_ERR_MISUSE, "%s: parameter %d must be a floating leaf tensor that requires grad", fn, i);
        for (int j = 0; j < o->n; j++)
            if (o->p[j].param == p)
                return TD_ERR(TD_ERR_MISUSE, "%s: parameter %d appears in more than one place", fn, i);
        for (int j = 0; j < i; j++)
            if (params[j] == p) return TD_ERR(TD_ERR_MISUSE, "%s: parameter %d appears in more than one place", fn, i);
    }
    if (o->n + n > o->cap) {
        int cap = o->n + n + 8;
        td_param_state *ps = realloc(o->p, (size_t)cap * sizeof *ps);
        if (!ps) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", fn);
        o->p = ps;
        o->cap = cap;
    }
    for (int i = 0; i < n; i++) o->p[o->n++] = (td_param_state){.param = td_retain(params[i]), .group = group};
    return TD_OK;
}

td_status td_optimizer_add_param_group(td_optimizer *o, int n, td_tensor *const *params, const td_optim_options *opt) {
    if (!o) return TD_ERR(TD_ERR_MISUSE, "add_param_group: optimizer is NULL");
    td_optim_options g = opt ? *opt : o->groups[0];
    td_status st = o->algo->validate(&g);
    if (st != TD_OK) return st;
    td_optim_options *groups = realloc(o->groups, (size_t)(o->n_groups + 1) * sizeof *groups);
    if (!groups) return TD_ERR(TD_ERR_OOM, "add_param_group: out of host memory");
    o->groups = groups;
    st = add_params(o, n, params, o->n_groups);
    if (st == TD_OK) o->groups[o->n_groups++] = g;
    return st;
}

td_optimizer *td__optimizer_new(const td_optim_algo *algo, int n, td_tensor *const *params,
                                const td_optim_options *opt) {
    td_optimizer *o = calloc(1, sizeof *o);
    if (!o) TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory", algo->name);
    o->algo = algo;
    o->groups = malloc(sizeof *o->groups);
    if (!o->groups) {
        free(o);
        TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory", algo->name);
    }
    o->groups[0] = *opt;
    if (td_optimizer_add_param_group(o, n, params, opt) != TD_OK) {
        td_optimizer_free(o);
        return NULL;
    }
    return o;
}

static void clear_state(td_param_state *ps) {
    for (int s = 0; s < TD_OPTIM_SLOTS; s++) {
        td_release(ps->slot[s]);
        ps->slot[s] = NULL;
    }
    td_release(ps->step_t);
    td_release(ps->master);
    ps->step_t = ps->master = NULL;
    ps->step = 0;
}

void td_optimizer_free(td_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        clear_state(&o->p[i]);
        td_release(o->p[i].param);
    }
    td__device_lr_free(o);
    free(o->p);
    free(o->groups);
    free(o);
}

/* Whether ps's parameter is updated through a float32 master copy. */
static bool has_master(const td_optimizer *o, const td_param_state *ps) {
    td_dtype dt = td_tensor_dtype(ps->param);
    return o->groups[ps->group].master_weights && (dt == TD_F16 || dt == TD_BF16);
}

/* A state tensor of zeros: the parameter's shape and device, float32 when
** there is a master copy, else the parameter's dtype. */
static td_tensor *state_zeros(const td_optimizer *o, const td_param_state *ps) {
    td_tensor *p = ps->param;
    td_dtype dt = has_master(o, ps) ? TD_F32 : td_tensor_dtype(p);
    return td_keep(td_zeros(td_ndim(p), td_shape(p), dt, td_tensor_device(p)));
}

/* Create the state tensors options need, the master copy, and (capturable)
** bind the group's device lr. */
static td_status ensure_slots(td_optimizer *o, td_param_state *ps) {
    const td_optim_options *g = &o->groups[ps->group];
    for (int s = 0; s < TD_OPTIM_SLOTS; s++)
        if (o->algo->slot_names[s] && o->algo->uses_slot(g, s) && !ps->slot[s]) {
            ps->slot[s] = state_zeros(o, ps);
            if (!ps->slot[s]) return td_last_status();
        }
    if (has_master(o, ps) && !ps->master && !(ps->master = td_keep(td_cast(ps->param, TD_F32))))
        return td_last_status();
    return g->capturable ? td__device_lr_bind(o, ps, ps->master ? ps->master : ps->param) : TD_OK;
}

/* One update of ps with gradient g (float32 for a master copy): in place, or
** on the master (the algorithms update ps->param, which is the master for the
** call); td_optimizer_step rounds the master into the parameter afterwards. */
static td_status update_param(td_optimizer *o, td_param_state *ps, td_tensor *g, bool first) {
    const td_optim_options *opt = &o->groups[ps->group];
    if (!ps->master) return o->algo->update(opt, ps, g, first);
    td_tensor *param = ps->param;
    ps->param = ps->master;
    td_status st = o->algo->update(opt, ps, g, first);
    ps->param = param;
    return st;
}

/* The step in three passes, so that a GPU backend sends every update in one
** launch (the batch is flushed by any other op):
**   1. state created, gradients made contiguous (and float32 for a master copy);
**   2. the updates, batched;
**   3. master_weights: param = master, rounded to the parameter's dtype. */
td_status td_optimizer_step(td_optimizer *o) {
    if (!o) return TD_ERR(TD_ERR_MISUSE, "optimizer_step: optimizer is NULL");
    typedef struct pending {
        td_tensor *grad;
        bool first;
        int run_end; /* > 0: parameters i..run_end-1 take one flat update (flat.c) */
    } pending;
    pending *work = calloc((size_t)o->n + 1, sizeof *work);
    if (!work) return TD_ERR(TD_ERR_OOM, "%s step: out of host memory", o->algo->name);
    td_status st = TD_OK;
    td_no_grad_begin();
    td_profile_push("optimizer");
    td_scope_begin();
    for (int i = 0; i < o->n && st == TD_OK; i++) {
        td_param_state *ps = &o->p[i];
        td_tensor *g = td_grad_of(ps->param);
        if (!g) continue;
        work[i].first = ps->slot[0] == NULL;
        int end = td__flat_run_end(o, i);
        if (end > i + 1) {
            work[i].grad = g, work[i].run_end = end;
            st = td__flat_prepare(o, i, end);
            i = end - 1;
            continue;
        }
        if ((st = ensure_slots(o, ps)) != TD_OK) break;
        work[i].grad = ps->master ? td_cast(td_contiguous(g), TD_F32) : td_contiguous(g);
        if (!work[i].grad) st = td_last_status();
    }
    td__batch_begin();
    for (int i = 0; i < o->n && st == TD_OK; i++) {
        if (!work[i].grad) continue;
        td_scope_begin(); /* the update's temporaries */
        if (work[i].run_end) {
            st = td__flat_update(o, i, work[i].run_end, work[i].first);
        } else {
            o->p[i].step++;
            st = update_param(o, &o->p[i], work[i].grad, work[i].first);
        }
        td_scope_end();
        if (st != TD_OK) td_error_prefix("%s step, parameter %d", o->algo->name, i);
        if (work[i].run_end) i = work[i].run_end - 1;
    }
    td_status sent = td__batch_end();
    if (st == TD_OK && sent != TD_OK) {
        char why[512]; /* a copy: the message is formatted into td_last_error()'s buffer */
        snprintf(why, sizeof why, "%s", td_last_error());
        st = TD_ERR(sent, "%s step: %s", o->algo->name, why);
    }
    for (int i = 0; i < o->n && st == TD_OK; i++)
        if (work[i].grad && o->p[i].master && (st = td_copy_(o->p[i].param, o->p[i].master)) != TD_OK)
            td_error_prefix("%s step, parameter %d, from its master copy", o->algo->name, i);
    td_scope_end();
    free(work);
    td_profile_pop();
    td_no_grad_end();
    return st;
}

void td_optimizer_zero_grad(td_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) td_zero_grad(o->p[i].param);
}

void td_optimizer_set_lr(td_optimizer *o, double lr) {
    if (!o) return;
    if (!(lr >= 0 && lr < INFINITY)) { /* NaN fails both */
        TD_ERR(TD_ERR_MISUSE, "optimizer_set_lr: lr %g is not a finite number >= 0; the lr is unchanged", lr);
        return;
    }
    for (int g = 0; g < o->n_groups; g++) {
        o->groups[g].lr = lr;
        if (td__device_lr_set(o, g) != TD_OK) return;
    }
}

td_status td_optimizer_set_group_lr(td_optimizer *o, int g, double lr) {
    if (!o || g < 0 || g >= o->n_groups)
        return TD_ERR(TD_ERR_INDEX, "optimizer_set_group_lr: group %d out of range (%d groups)", g,
                      o ? o->n_groups : 0);
    if (!(lr >= 0 && lr < INFINITY))
        return TD_ERR(TD_ERR_MISUSE, "optimizer_set_group_lr: lr %g is not a finite number >= 0; the lr is unchanged",
                      lr);
    o->groups[g].lr = lr;
    return td__device_lr_set(o, g);
}

double td_optimizer_get_lr(const td_optimizer *o, int g) {
    if (!o || g < 0 || g >= o->n_groups)
        return TD_ERR(TD_ERR_INDEX, "optimizer_get_lr: group %d out of range (%d groups)", g, o ? o->n_groups : 0), NAN;
    return o->groups[g].lr;
}

int td_optimizer_num_groups(const td_optimizer *o) { return o ? o->n_groups : 0; }
const char *td_optimizer_name(const td_optimizer *o) { return o ? o->algo->name : "?"; }

/* ---- state dicts ---- */

td_named_tensors *td_optimizer_state_dict(td_optimizer *o) {
    if (!o) TD_FAIL_NULL(TD_ERR_MISUSE, "optimizer_state_dict: optimizer is NULL");
    td_named_tensors *sd = td_named_tensors_new();
    td_status st = sd ? TD_OK : td_last_status();
    char key[64];
    td_scope_begin();
    for (int i = 0; i < o->n && st == TD_OK; i++) {
        td_param_state *ps = &o->p[i];
        if (!ps->step) continue;
        for (int s = 0; s < TD_OPTIM_SLOTS && st == TD_OK; s++)
            if (ps->slot[s]) {
                snprintf(key, sizeof key, "state.%d.%s", i, o->algo->slot_names[s]);
                st = td_named_tensors_add(sd, key, ps->slot[s]);
            }
        if (st == TD_OK && ps->master) {
            snprintf(key, sizeof key, "state.%d.master_param", i);
            st = td_named_tensors_add(sd, key, ps->master);
        }
        snprintf(key, sizeof key, "state.%d.step", i);
        if (st == TD_OK && ps->step_t) { /* capturable: replays advanced the device's count (a visible read) */
            double step = td_item(ps->step_t);
            if (isnan(step))
                st = td_last_status();
            else
                ps->step = (int64_t)step;
        }
        if (st == TD_OK) st = td_named_tensors_add(sd, key, td_scalar((double)ps->step, TD_I64, TD_CPU));
    }
    for (int g = 0; g < o->n_groups && st == TD_OK; g++) {
        snprintf(key, sizeof key, "param_groups.%d.lr", g);
        st = td_named_tensors_add(sd, key, td_scalar(o->groups[g].lr, TD_F64, TD_CPU));
    }
    td_scope_end();
    if (st != TD_OK) {
        td_named_tensors_free(sd);
        return NULL;
    }
    return sd;
}

/* Parse key into (kind 's' state / 'g' group, index, field). */
static bool parse_key(const char *key, char *kind, int *index, const char **field) {
    const char *rest;
    if (!strncmp(key, "state.", 6))
        *kind = 's', rest = key + 6;
    else if (!strncmp(key, "param_groups.", 13))
        *kind = 'g', rest = key + 13;
    else
        return false;
    char *end;
    long v = strtol(rest, &end, 10);
    if (end == rest || *end != '.' || v < 0 || v > 1 << 30) return false;
    *index = (int)v;
    *field = end + 1;
    return true;
}

static int slot_index(const td_optim_algo *a, const char *field) {
    for (int s = 0; s < TD_OPTIM_SLOTS; s++)
        if (a->slot_names[s] && !strcmp(a->slot_names[s], field)) return s;
    return -1;
}

/* A scalar entry: a step is an integer in [0, 2^53] (exact in a double, far
** from overflow), a learning rate finite and >= 0. */
static td_status check_scalar(const char *fn, const char *key, td_tensor *t, bool is_step) {
    if (td_numel(t) != 1) return TD_ERR(TD_ERR_SHAPE, "%s: %s must hold one number", fn, TD_QUOTE(key));
    double v = td_item(t);
    if (is_step && !(v >= 0 && v <= 0x1p53 && v == floor(v)))
        return TD_ERR(TD_ERR_MISUSE, "%s: %s = %.17g is not an integer in [0, 2^53]", fn, TD_QUOTE(key), v);
    if (!is_step && !(v >= 0 && isfinite(v)))
        return TD_ERR(TD_ERR_MISUSE, "%s: %s = %.17g is not a finite learning rate >= 0", fn, TD_QUOTE(key), v);
    return TD_OK;
}

static td_status check_entry(td_optimizer *o, const char *key, td_tensor *t) {
    const char *fn = "optimizer_load_state_dict", *field = NULL;
    char kind = 0;
    int i = 0;
    if (!parse_key(key, &kind, &i, &field))
        return TD_ERR(TD_ERR_MISUSE, "%s: unexpected key %s for %s", fn, TD_QUOTE(key), o->algo->name);
    int limit = kind == 's' ? o->n : o->n_groups;
    if (i >= limit)
        return TD_ERR(TD_ERR_MISUSE, "%s: %s refers to %s %d, but the optimizer has %d", fn, TD_QUOTE(key),
                      kind == 's' ? "parameter" : "group", i, limit);
    if ((kind == 'g' && strcmp(field, "lr")) ||
        (kind == 's' && strcmp(field, "step") && strcmp(field, "master_param") && slot_index(o->algo, field) < 0))
        return TD_ERR(TD_ERR_MISUSE, "%s: unexpected key %s for %s", fn, TD_QUOTE(key), o->algo->name);
    if (kind == 'g' || !strcmp(field, "step")) return check_scalar(fn, key, t, kind == 's');
    td_tensor *p = o->p[i].param;
    bool master = !strcmp(field, "master_param");
    if (master && !has_master(o, &o->p[i]))
        return TD_ERR(TD_ERR_MISUSE, "%s: %s, but parameter %d (%s) has no master copy (master_weights is off)", fn,
                      TD_QUOTE(key), i, td_dtype_name(td_tensor_dtype(p)));
    td_dtype want = has_master(o, &o->p[i]) ? TD_F32 : td_tensor_dtype(p);
    char s1[96], s2[96];
    if (td_ndim(t) != td_ndim(p) || memcmp(td_shape(t), td_shape(p), sizeof(int64_t) * (size_t)td_ndim(p)))
        return TD_ERR(TD_ERR_SHAPE, "%s: '%s' has shape %s, its parameter %s", fn, key,
                      td__shape_str(td_ndim(t), td_shape(t), s1, sizeof s1),
                      td__shape_str(td_ndim(p), td_shape(p), s2, sizeof s2));
    if (td_tensor_dtype(t) != want)
        return TD_ERR(TD_ERR_DTYPE, "%s: '%s' has dtype %s, expected %s (parameter %s%s)", fn, key,
                      td_dtype_name(td_tensor_dtype(t)), td_dtype_name(want), td_dtype_name(td_tensor_dtype(p)),
                      has_master(o, &o->p[i]) ? ", master_weights" : "");
    return TD_OK;
}

td_status td_optimizer_load_state_dict(td_optimizer *o, const td_named_tensors *sd) {
    if (!o || !sd) return TD_ERR(TD_ERR_MISUSE, "optimizer_load_state_dict: optimizer or state dict is NULL");
    int n = td_named_tensors_len(sd);
    for (int k = 0; k < n; k++) {
        td_status st = check_entry(o, td_named_tensors_name(sd, k), td_named_tensors_at(sd, k));
        if (st != TD_OK) return st;
    }
    for (int i = 0; i < o->n; i++) clear_state(&o->p[i]);
    td_status st = TD_OK;
    td_no_grad_begin();
    for (int k = 0; k < n && st == TD_OK; k++) {
        const char *field = NULL;
        char kind = 0;
        int i = 0;
        parse_key(td_named_tensors_name(sd, k), &kind, &i, &field);
        td_tensor *t = td_named_tensors_at(sd, k);
        if (kind == 'g') {
            o->groups[i].lr = td_item(t);
            st = td__device_lr_set(o, i);
        } else if (!strcmp(field, "step")) {
            o->p[i].step = (int64_t)td_item(t);
            if (o->p[i].step_t) st = td_copy_(o->p[i].step_t, td_scalar((double)o->p[i].step, TD_F64, TD_CPU));
        } else {
            int s = slot_index(o->algo, field);
            td_param_state *ps = &o->p[i];
            td_tensor **dst = s < 0 ? &ps->master : &ps->slot[s];
            if (!*dst) *dst = state_zeros(o, ps);
            st = *dst ? td_copy_(*dst, t) : td_last_status();
        }
    }
    td_no_grad_end();
    return st;
}
