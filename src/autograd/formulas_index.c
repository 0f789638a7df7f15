/*
** Derivatives of the indexing ops: embedding, index_select, gather,
** scatter_add and cat. Index tensors never need gradients.
*/
#include "autograd_internal.h"

#define NEED(i) td__needs(n, i)
#define IN(i)   td__saved_input(n, i)

static int axis(const td_node *n, int ndim) {
    int d = n->p.axis.dim;
    return d < 0 ? d + ndim : d;
}

/* y = weight[idx]: dweight[v] = sum of dy rows whose idx is v (fused
** EMBEDDING_BACKWARD, a scatter-add; td_embedding has no padding_idx) */
td_status td__bw_embedding(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td__embedding_backward(gy[0], IN(1), n->in_meta[0].shape[0], -1);
    return td__done(n, gx);
}

/* dw[V,D] = embedding_backward(dy[...,D], idx[...]), the scatter-add above:
** d dy = dz[idx] (embedding of dz), 0 at rows where idx == padding_idx */
td_status td__bw_embedding_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *idx = IN(1), *g = td_embedding(gy[0], idx);
    int64_t pad = n->p.embedding.padding_idx;
    if (pad >= 0) {
        td_tensor *hit =
            td_unsqueeze(td_eq(idx, td_scalar((double)pad, idx ? idx->dtype : TD_I64, gy[0]->storage->device)), -1);
        g = td_where(hit, td__scalar_like(g, 0), g);
    }
    gx[0] = g;
    return td__done(n, gx);
}

/* y = x.index_select(dim, idx): dx = zeros(x).index_add(dim, idx, dy), as a
** scatter_add with idx broadcast along the other dims of dy */
td_status td__bw_index_select(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *dy = gy[0];
    int dim = axis(n, dy->ndim);
    int64_t shape[TD_MAX_DIMS];
    for (int i = 0; i < dy->ndim; i++) shape[i] = i == dim ? dy->shape[i] : 1;
    td_tensor *idx = td_cast(IN(1), TD_I64);
    idx = td_contiguous(td_expand(td_reshape(idx, dy->ndim, shape), dy->ndim, dy->shape));
    gx[0] = td_scatter_add(td__zeros_meta(&n->in_meta[0], dy->dtype), dim, idx, dy);
    return td__done(n, gx);
}

/* y = x.gather(dim, idx): dx = zeros(x).scatter_add(dim, idx, dy) */
td_status td__bw_gather(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    int dim = axis(n, gy[0]->ndim);
    gx[0] = td_scatter_add(td__zeros_meta(&n->in_meta[0], gy[0]->dtype), dim, IN(1), gy[0]);
    return td__done(n, gx);
}

/* y = self.scatter_add(dim, idx, src): dself = dy, dsrc = dy.gather(dim, idx) */
td_status td__bw_scatter_add(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = gy[0];
    if (NEED(2)) gx[2] = td_gather(gy[0], axis(n, gy[0]->ndim), IN(1));
    return td__done(n, gx);
}

/* y = cat(x_0, x_1, ...) along dim: dx_i = the slice of dy where x_i went */
td_status td__bw_cat(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    int dim = axis(n, gy[0]->ndim);
    int64_t at = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t size = n->in_meta[i].shape[dim];
        if (NEED(i)) gx[i] = td_slice(gy[0], dim, at, at + size, 1);
        at += size;
    }
    return td__done(n, gx);
}
