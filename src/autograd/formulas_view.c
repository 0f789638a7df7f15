/*
** Views (reshape/view/squeeze/unsqueeze/flatten, permute, slice, select,
** expand, and split's n views): recording and their derivatives. x is the
** base, y the view.
*/
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"

static const char *view_names[] = {
    [TD__VIEW_RESHAPE] = "view",  [TD__VIEW_PERMUTE] = "permute", [TD__VIEW_SLICE] = "slice",
    [TD__VIEW_SELECT] = "select", [TD__VIEW_EXPAND] = "expand",
};

/* y = x[..., start:end:step, ...] along dim; dx = zeros with dy placed there.
** Under create_graph the placement must itself be differentiable, so it is a
** scatter_add into zeros of the indices start, start+step, ... */
static td_tensor *embed_slice(const td__tmeta *m, int dim, int64_t start, int64_t step, td_tensor *dy) {
    td_tensor *z = td__zeros_meta(m, dy->dtype);
    if (!z) return NULL;
    int64_t k = dy->shape[dim];
    if (!td_grad_enabled()) {
        td_tensor *dst = td_slice(z, dim, start, start + k * step, step);
        return dst && td_copy_(dst, dy) == TD_OK ? z : NULL;
    }
    td_tensor *idx = td_arange((double)start, (double)(start + k * step), (double)step, TD_I64, m->device);
    int64_t shape[TD_MAX_DIMS];
    for (int i = 0; i < dy->ndim; i++) shape[i] = i == dim ? k : 1;
    idx = td_contiguous(td_expand(td_reshape(idx, dy->ndim, shape), dy->ndim, dy->shape));
    return td_scatter_add(z, dim, idx, dy);
}

static td_status bw_view(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const td__view_info *v = n->data;
    const td__tmeta *m = &n->in_meta[0];
    td_tensor *dy = gy[0];
    switch (v->kind) {
    case TD__VIEW_RESHAPE: /* y = x.view(shape) -> dx = dy.reshape(x.shape) */
        gx[0] = td_reshape(dy, m->ndim, m->shape);
        break;
    case TD__VIEW_PERMUTE: { /* y = x.permute(perm) -> dx = dy.permute(inverse(perm)) */
        int inv[TD_MAX_DIMS];
        for (int i = 0; i < m->ndim; i++) inv[v->perm[i]] = i;
        gx[0] = td_permute(dy, inv);
        break;
    }
    case TD__VIEW_SLICE: gx[0] = embed_slice(m, v->dim, v->start, v->step, dy); break;
    case TD__VIEW_SELECT: /* y = x.select(dim, i) = x[i:i+1].squeeze(dim) */
        gx[0] = embed_slice(m, v->dim, v->start, 1, td_unsqueeze(dy, v->dim));
        break;
    case TD__VIEW_EXPAND: /* y = x.expand(shape) -> dx = dy summed over the expanded dims */
        gx[0] = td__sum_to(dy, m->ndim, m->shape);
        break;
    }
    return gx[0] ? TD_OK : td_last_status();
}

/* cat(dy_0, ..., dy_{n-1}) along dim as a view, when the dy_j already lie side by side in one storage: one
** dtype and strides, dy_j's offset dy_0's plus the sizes before j times dim's stride (attention's packed dq, dk, dv,
** op_attention.c). Element i of that view is then element i - start_j of dy_j, exactly cat's value. The view
** aliases the dy_j: safe because the engine never writes a gradient in place (accumulate() adds out of place, a
** leaf's .grad is a clone or a copy into its grad slot) and no formula does; under create_graph the
** concatenation must be recorded, so it is not taken. NULL when the dy_j are not so. */
static td_tensor *adjacent_views(int n, td_tensor *const *gy, int dim) {
    if (td_grad_enabled()) return NULL;
    td_tensor *a = gy[0];
    if (!a) return NULL;
    int64_t shape[TD_MAX_DIMS], size = 0; /* size: the sizes along dim so far */
    for (int j = 0; j < n; j++) {
        const td_tensor *b = gy[j];
        if (!b || b->storage != a->storage || b->dtype != a->dtype || b->ndim != a->ndim ||
            b->offset != a->offset + size * a->strides[dim])
            return NULL;
        for (int i = 0; i < a->ndim; i++)
            if (b->strides[i] != a->strides[i] || (i != dim && b->shape[i] != a->shape[i])) return NULL;
        size += b->shape[dim];
    }
    for (int i = 0; i < a->ndim; i++) shape[i] = i == dim ? size : a->shape[i];
    return td__make_view(a, a->ndim, shape, a->strides, a->offset);
}

/* y_0..y_{n-1} = split(x, sizes, dim) -> dx = cat(dy_0, ..., dy_{n-1}) along dim, zeros for a y without a
** gradient (one concatenation, where n slices would each place their gradient in zeros of x's shape; none where
** the dy_j are adjacent views of one buffer). */
static td_status bw_split(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    int dim = ((const td__view_info *)n->data)->dim;
    if ((gx[0] = adjacent_views(n->n_out, gy, dim))) return TD_OK;
    td_dtype dt = n->in_meta[0].dtype;
    for (int j = 0; j < n->n_out; j++)
        if (gy[j]) dt = gy[j]->dtype;
    td_tensor **parts = malloc(sizeof *parts * (size_t)n->n_out);
    if (!parts) return TD_ERR(TD_ERR_OOM, "split backward: out of host memory");
    td_status st = TD_OK;
    for (int j = 0; j < n->n_out && st == TD_OK; j++)
        if (!(parts[j] = gy[j] ? td_cast(gy[j], dt) : td__zeros_meta(&n->out_meta[j], dt))) st = td_last_status();
    if (st == TD_OK && !(gx[0] = td_cat(n->n_out, parts, dim))) st = td_last_status();
    free(parts);
    return st;
}

/* A node named name over base with the n views as its outputs, backward fn, owning a copy of info. */
static void record(const char *name, td__backward_fn fn, td_tensor *base, int n, td_tensor *const *views,
                   const td__view_info *info) {
    if (!base->requires_grad) return;
    if (!td_grad_enabled()) {
        td__probe_note(1, &base);
        return;
    }
    td__view_info *copy = malloc(sizeof *copy);
    if (!copy) {
        TD_ERR(TD_ERR_OOM, "%s: out of host memory recording the autograd graph", name);
        return;
    }
    *copy = *info;
    td_node *node = td__node_new(name, fn, -1, 1, &base, n, views);
    if (!node) {
        free(copy);
        return;
    }
    node->data = copy;
    node->free_data = free;
    for (int j = 0; j < n; j++) td__node_attach(node, views[j], j);
    td__node_release(node);
}

void td__record_split(td_tensor *base, int n, td_tensor *const *views, int dim) {
    record("split", bw_split, base, n, views, &(td__view_info){.dim = dim});
}

void td__record_view(td_tensor *base, td_tensor *view, const td__view_info *info) {
    record(view_names[info->kind], bw_view, base, 1, &view, info);
}
