/*
** The optimizer's flat step: consecutive parameters that tile one storage
** (td_module_flatten_parameters' arena), whose gradients tile one gradient
** storage the same way and who share a group, a dtype and a step count, are
** updated by one fused op over flat views; their state tensors become views
** of flat state arenas, so a state dict still holds one tensor per parameter.
** The update is elementwise, so the result is the per-parameter one bit for bit.
*/
#include "optim_internal.h"

/* b lies right after a in a's storage, as the arena lays them out: contiguous,
** and at offset a->offset + (the same distance as pb from pa). */
static bool follows(const td_tensor *a, const td_tensor *b, int64_t distance) {
    return a && b && a->storage == b->storage && td_is_contiguous(b) && b->offset - a->offset == distance;
}

static bool fusable(const td_optimizer *o, const td_param_state *ps) {
    const td_optim_options *g = &o->groups[ps->group];
    td_dtype dt = td_tensor_dtype(ps->param);
    return !g->capturable && !(g->master_weights && (dt == TD_F16 || dt == TD_BF16)) && td_is_contiguous(ps->param);
}

int td__flat_run_end(const td_optimizer *o, int i) {
    const td_param_state *a = &o->p[i];
    td_tensor *ga = td_grad_of(a->param);
    if (!ga || !fusable(o, a) || !td_is_contiguous(ga) || td_tensor_dtype(ga) != td_tensor_dtype(a->param))
        return i + 1;
    int j = i + 1;
    for (; j < o->n; j++) {
        const td_param_state *b = &o->p[j], *prev = &o->p[j - 1];
        td_tensor *gb = td_grad_of(b->param);
        int64_t at = b->param->offset - a->param->offset;
        if (b->group != a->group || b->step != a->step || (b->slot[0] == NULL) != (a->slot[0] == NULL) ||
            td_tensor_dtype(b->param) != td_tensor_dtype(a->param) || !fusable(o, b) ||
            !follows(prev->param, b->param, td_numel(prev->param)) || !follows(ga, gb, at))
            break;
    }
    return j;
}

/* A flat [n] view of t's storage from t's first element. */
static td_tensor *flat_from(td_tensor *t, int64_t n) { return td__make_view(t, 1, &n, (int64_t[]){1}, t->offset); }

/* Slot s of parameters i..j-1 as views of one flat state arena: kept when they
** are already, else a new arena of zeros takes their values. */
static td_status arena_slot(td_optimizer *o, int i, int j, int s, int64_t numel) {
    td_param_state *p = o->p;
    bool ok = p[i].slot[s] && td_is_contiguous(p[i].slot[s]);
    for (int k = i + 1; k < j && ok; k++)
        ok = follows(p[i].slot[s], p[k].slot[s], p[k].param->offset - p[i].param->offset);
    if (ok) return TD_OK;
    td_tensor *flat = td_zeros(1, &numel, td_tensor_dtype(p[i].param), td_tensor_device(p[i].param));
    if (!flat) return td_last_status();
    for (int k = i; k < j; k++) {
        td_tensor *pk = p[k].param;
        int64_t strides[TD_MAX_DIMS], n = 1;
        for (int d = pk->ndim - 1; d >= 0; d--) strides[d] = n, n *= pk->shape[d];
        td_tensor *v = td__make_view(flat, pk->ndim, pk->shape, strides, pk->offset - p[i].param->offset);
        td_status st = !v ? td_last_status() : p[k].slot[s] ? td_copy_(v, p[k].slot[s]) : TD_OK;
        if (st != TD_OK) return st;
        td_release(p[k].slot[s]);
        p[k].slot[s] = td_retain(v);
    }
    return TD_OK;
}

td_status td__flat_prepare(td_optimizer *o, int i, int j) {
    const td_optim_options *g = &o->groups[o->p[i].group];
    int64_t numel = o->p[j - 1].param->offset + td_numel(o->p[j - 1].param) - o->p[i].param->offset;
    for (int s = 0; s < TD_OPTIM_SLOTS; s++)
        if (o->algo->slot_names[s] && o->algo->uses_slot(g, s)) {
            td_status st = arena_slot(o, i, j, s, numel);
            if (st != TD_OK) return st;
        }
    return TD_OK;
}

td_status td__flat_update(td_optimizer *o, int i, int j, bool first) {
    td_param_state *a = &o->p[i];
    int64_t numel = o->p[j - 1].param->offset + td_numel(o->p[j - 1].param) - a->param->offset;
    for (int k = i; k < j; k++) o->p[k].step++;
    td_param_state flat = {.param = flat_from(a->param, numel), .group = a->group, .step = a->step};
    for (int s = 0; s < TD_OPTIM_SLOTS; s++)
        if (a->slot[s]) flat.slot[s] = flat_from(a->slot[s], numel);
    td_tensor *g = flat_from(td_grad_of(a->param), numel);
    if (!flat.param || !g) return td_last_status();
    return o->algo->update(&o->groups[a->group], &flat, g, first);
}
