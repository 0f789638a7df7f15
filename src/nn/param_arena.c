/*
** Parameter arenas (llm.c's malloc_and_point_parameters): every parameter of
** a module, per dtype, becomes a view of one flat storage, and its gradient
** slot a view of one flat gradient storage laid out the same way, so that an
** optimizer updates a dtype's parameters in one op and DDP all-reduces slices
** of the gradient arena in place.
*/
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"
#include "nn_internal.h"

void td__module_arena_free(td_module *m) {
    for (int k = 0; k < m->n_arenas; k++) td_release(m->arenas[k].params), td_release(m->arenas[k].grads);
    free(m->arenas);
    m->arenas = NULL;
    m->n_arenas = 0;
}

static bool same_device(td_device a, td_device b) { return a.type == b.type && a.index == b.index; }

/* A view of flat's storage shaped as p, at flat's offset + at, contiguous. */
static td_tensor *view_as(td_tensor *flat, const td_tensor *p, int64_t at) {
    int64_t strides[TD_MAX_DIMS], s = 1;
    for (int d = p->ndim - 1; d >= 0; d--) strides[d] = s, s *= p->shape[d];
    return td__make_view(flat, p->ndim, p->shape, strides, flat->offset + at);
}

/* The module's parameters, each once (a tied parameter is registered twice). */
static td_tensor **unique_params(td_module *m, int *n) {
    int all = td_module_parameters(m, NULL, 0);
    td_tensor **ps = calloc((size_t)all + 1, sizeof *ps);
    if (!ps) return TD_ERR(TD_ERR_OOM, "flatten_parameters: out of host memory"), NULL;
    td_module_parameters(m, ps, all);
    *n = 0;
    for (int i = 0; i < all; i++) {
        bool seen = false;
        for (int j = 0; j < *n && !seen; j++) seen = ps[j] == ps[i];
        if (!seen) ps[(*n)++] = ps[i];
    }
    return ps;
}

/* Build the arenas of dev into a (copies only), then point the parameters at
** them; the old storages go with their last views. */
static td_status flatten(td_module *m, td_device dev, td_tensor **ps, int n) {
    td_arena *a = calloc((size_t)n + 1, sizeof *a);
    td_tensor **pv = calloc((size_t)n + 1, sizeof *pv), **gv = calloc((size_t)n + 1, sizeof *gv);
    td_status st = a && pv && gv ? TD_OK : TD_ERR(TD_ERR_OOM, "flatten_parameters: out of host memory");
    int n_a = 0;
    for (int i = 0; i < n && st == TD_OK; i++) {
        td_dtype dt = ps[i]->dtype;
        bool seen = false;
        for (int k = 0; k < n_a && !seen; k++) seen = a[k].dtype == dt;
        if (seen) continue;
        int64_t numel = 0;
        for (int j = i; j < n; j++)
            if (ps[j]->dtype == dt) numel += td_numel(ps[j]);
        a[n_a] = (td_arena){.dtype = dt,
                            .params = td_keep(td_empty(1, &numel, dt, dev)),
                            .grads = td_keep(td_zeros(1, &numel, dt, dev))};
        if (!a[n_a].params || !a[n_a].grads)
            st = td_last_status();
        else
            a[n_a].params->storage->flags |= TD__STORAGE_ARENA; /* autocast shadows it whole (core/shadow.c) */
        int64_t at = 0;
        for (int j = i; j < n && st == TD_OK; j++) {
            if (ps[j]->dtype != dt) continue;
            pv[j] = view_as(a[n_a].params, ps[j], at);
            gv[j] = view_as(a[n_a].grads, ps[j], at);
            if (!pv[j] || !gv[j]) st = td_last_status();
            if (st == TD_OK) st = td_copy_(pv[j], ps[j]);
            if (st == TD_OK && ps[j]->grad) st = td_copy_(gv[j], ps[j]->grad);
            at += td_numel(ps[j]);
        }
        n_a++;
    }
    for (int i = 0; i < n && st == TD_OK; i++) { /* nothing fails from here but the slot's small allocation */
        td_tensor *p = ps[i];
        td_storage *s = p->storage;
        p->storage = pv[i]->storage, pv[i]->storage = s;
        p->offset = pv[i]->offset;
        memcpy(p->strides, pv[i]->strides, sizeof p->strides);
        if (p->grad) td_release(p->grad), p->grad = td_retain(gv[i]);
        st = td__set_grad_slot(p, gv[i]);
    }
    if (st == TD_OK) {
        td__module_arena_free(m);
        m->arenas = a, m->n_arenas = n_a, m->arena_device = dev;
    } else {
        for (int k = 0; a && k < n_a; k++) td_release(a[k].params), td_release(a[k].grads);
        free(a);
    }
    free(pv), free(gv);
    return st;
}

td_status td_module_flatten_parameters(td_module *m, td_device dev) {
    if (!m) return TD_ERR(TD_ERR_MISUSE, "flatten_parameters: module is NULL");
    int n = 0;
    td_tensor **ps = unique_params(m, &n);
    if (!ps) return td_last_status();
    bool moved = true;
    for (int i = 0; i < n; i++) moved = moved && same_device(td_tensor_device(ps[i]), dev);
    td_named_tensors *sd = moved ? NULL : td_module_state_dict(m); /* buffers too */
    for (int64_t k = 0; sd && k < td_named_tensors_len(sd); k++)
        moved = moved && same_device(td_tensor_device(td_named_tensors_at(sd, k)), dev);
    td_named_tensors_free(sd);
    td_status st = TD_OK;
    if (!moved) {                   /* the parameters, and the buffers, onto dev first: one device for all */
        td_arena *kept = m->arenas; /* held aside (td_module_to re-flattens a flat module); back on a failure */
        int n_kept = m->n_arenas;
        m->arenas = NULL, m->n_arenas = 0;
        st = td_module_to(m, dev); /* without arenas: not re-flattened there */
        m->arenas = kept, m->n_arenas = n_kept;
        if (st == TD_OK) td__module_arena_free(m);
    }
    if (st == TD_OK) {
        td_no_grad_begin();
        td_scope_begin();
        st = flatten(m, dev, ps, n);
        td_scope_end();
        td_no_grad_end();
    }
    free(ps);
    if (st != TD_OK) td_error_prefix("flatten_parameters");
    return st;
}

td_status td__module_reflatten(td_module *m) {
    return m->n_arenas ? td_module_flatten_parameters(m, m->arena_device) : TD_OK;
}

td_status td_module_parameter_arena(td_module *m, td_dtype dtype, td_tensor **params, td_tensor **grads) {
    if (params) *params = NULL;
    if (grads) *grads = NULL;
    if (!m) return TD_ERR(TD_ERR_MISUSE, "parameter_arena: module is NULL");
    for (int k = 0; k < m->n_arenas; k++)
        if (m->arenas[k].dtype == dtype) {
            if (params) *params = m->arenas[k].params;
            if (grads) *grads = m->arenas[k].grads;
        }
    return TD_OK;
}
