/*
** The autograd side of a tensor: requires_grad, .grad, detach, and hooks on
** leaves (kept in td_tensor.autograd_meta).
*/
#include <stdlib.h>

#include "autograd_internal.h"

typedef struct hook {
    td_grad_hook fn;
    void *user;
} hook;

typedef struct post_hook {
    td_post_accumulate_hook fn;
    void *user;
} post_hook;

typedef struct tensor_meta {
    hook *hooks;
    int n_hooks, cap_hooks;
    post_hook *post;
    int n_post, cap_post;
    td_tensor *grad_slot; /* +1: where .grad lives (a parameter arena's view), or NULL */
} tensor_meta;

void td__free_tensor_meta(void *meta) {
    tensor_meta *m = meta;
    td_release(m->grad_slot);
    free(m->hooks);
    free(m->post);
    free(m);
}

/* t's hook lists, made on first use; NULL when out of memory. */
static tensor_meta *meta_of(td_tensor *t) {
    if (!t->autograd_meta) t->autograd_meta = calloc(1, sizeof(tensor_meta));
    return t->autograd_meta;
}

td_status td_set_requires_grad(td_tensor *t, bool requires_grad) {
    TD_CHECK_ARG_ST(t, "set_requires_grad");
    if (!td_dtype_is_float(t->dtype))
        return TD_ERR(TD_ERR_DTYPE, "set_requires_grad: only floating-point tensors can require grad, not %s",
                      td_dtype_name(t->dtype));
    if (t->grad_fn)
        return TD_ERR(TD_ERR_MISUSE,
                      "set_requires_grad: the tensor is not a leaf (it is the result of '%s'); use td_detach to "
                      "make a leaf",
                      t->grad_fn->name);
    t->requires_grad = requires_grad;
    return TD_OK;
}

bool td_requires_grad(const td_tensor *t) { return t && t->magic == TD_TENSOR_ALIVE && t->requires_grad; }

td_tensor *td_grad_of(const td_tensor *t) { return t && t->magic == TD_TENSOR_ALIVE ? t->grad : NULL; }

void td_zero_grad(td_tensor *t) {
    if (!t || t->magic != TD_TENSOR_ALIVE) return;
    td_tensor *g = t->grad;
    t->grad = NULL;
    td_release(g);
}

td_status td__set_grad_slot(td_tensor *t, td_tensor *slot) {
    tensor_meta *m = slot || t->autograd_meta ? meta_of(t) : NULL;
    if (slot && !m) return TD_ERR(TD_ERR_OOM, "grad slot: out of host memory");
    if (!m) return TD_OK;
    td_release(m->grad_slot);
    m->grad_slot = td_retain(slot);
    return TD_OK;
}

td_tensor *td__grad_slot(const td_tensor *t) {
    const tensor_meta *m = t->autograd_meta;
    return m ? m->grad_slot : NULL;
}

bool td_is_leaf(const td_tensor *t) { return t && t->magic == TD_TENSOR_ALIVE && !t->grad_fn; }

td_tensor *td_detach(td_tensor *t) {
    TD_CHECK_ARG(t, "detach");
    return td__make_view(t, t->ndim, t->shape, t->strides, t->offset);
}

/* The meta of t, which must be a leaf that requires grad, for a hook fn; NULL with the error set. */
static tensor_meta *hook_target(td_tensor *t, bool has_fn, const char *api) {
    if (!td__check_arg(t, api, "t")) return NULL;
    if (!has_fn) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: fn is NULL", api);
    if (t->grad_fn)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: hooks go on leaves; this tensor is the result of '%s'", api, t->grad_fn->name);
    if (!t->requires_grad) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: the tensor does not require grad", api);
    tensor_meta *m = meta_of(t);
    if (!m) TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory", api);
    return m;
}

/* list (n entries of size bytes, room for *cap) with room for one more: list itself, or grown from first
** entries up by doubling; NULL (list kept) when out of memory. */
static void *room_for_one(void *list, int n, int *cap, int first, size_t size) {
    if (n < *cap) return list;
    int grown_cap = *cap ? *cap * 2 : first;
    void *grown = realloc(list, (size_t)grown_cap * size);
    if (grown) *cap = grown_cap;
    return grown;
}

td_status td_register_hook(td_tensor *t, td_grad_hook fn, void *user) {
    tensor_meta *m = hook_target(t, fn, "register_hook");
    if (!m) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    hook *h = room_for_one(m->hooks, m->n_hooks, &m->cap_hooks, 4, sizeof *h);
    if (!h) return TD_ERR(TD_ERR_OOM, "register_hook: out of host memory");
    m->hooks = h;
    m->hooks[m->n_hooks++] = (hook){fn, user};
    return TD_OK;
}

bool td__has_leaf_hooks(const td_tensor *leaf) {
    const tensor_meta *m = leaf->autograd_meta;
    return m && m->n_hooks > 0;
}

td_tensor *td__run_leaf_hooks(td_tensor *leaf, td_tensor *grad) {
    tensor_meta *m = leaf->autograd_meta;
    td_tensor *g = td_retain(grad);
    for (int k = 0; m && k < m->n_hooks; k++) {
        td_scope_begin();
        td_tensor *r = m->hooks[k].fn(g, m->hooks[k].user);
        bool ok = true;
        bool same = r && r->ndim == g->ndim;
        for (int d = 0; same && d < g->ndim; d++) same = r->shape[d] == g->shape[d];
        if (r && !same) {
            char a[96], b[96];
            TD_ERR(TD_ERR_SHAPE, "hook %d returned a gradient of shape %s for a leaf of shape %s", k,
                   td__shape_str(r->ndim, r->shape, a, sizeof a), td__shape_str(g->ndim, g->shape, b, sizeof b));
            ok = false;
        }
        if (ok && r) {
            td_retain(r);
            td_release(g);
            g = r;
        }
        td_scope_end();
        if (!ok) {
            td_release(g);
            return NULL;
        }
    }
    return g;
}

td_status td_register_post_accumulate_hook(td_tensor *t, td_post_accumulate_hook fn, void *user) {
    tensor_meta *m = hook_target(t, fn, "register_post_accumulate_hook");
    if (!m) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    post_hook *h = room_for_one(m->post, m->n_post, &m->cap_post, 2, sizeof *h);
    if (!h) return TD_ERR(TD_ERR_OOM, "register_post_accumulate_hook: out of host memory");
    m->post = h;
    m->post[m->n_post++] = (post_hook){fn, user};
    return TD_OK;
}

td_status td__run_post_accumulate_hooks(td_tensor *leaf) {
    tensor_meta *m = leaf->autograd_meta;
    for (int k = 0; m && k < m->n_post; k++) {
        td_scope_begin();
        td_status st = m->post[k].fn(leaf, m->post[k].user);
        td_scope_end();
        if (st != TD_OK) return td_last_status() ? td_last_status() : st;
    }
    return TD_OK;
}
