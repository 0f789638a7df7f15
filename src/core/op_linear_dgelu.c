/*
** td__linear_dgelu: dh = (dy w) gelu'(h), the input gradient of a GELU MLP's
** hidden layer through its second linear layer, as one LINEAR_DGELU op
** (linear_dgelu.h).
*/
#include "linear_dgelu.h"
#include "trident/autograd.h"

/* The product of t's dims but the last: its rows. */
static int64_t rows_of(const td_tensor *t) {
    int64_t m = 1;
    for (int i = 0; i + 1 < t->ndim; i++) m *= t->shape[i];
    return m;
}

/* MATMUL, then GELU_BACKWARD: differentiable, and every backend's. */
static td_tensor *composed(td_tensor *dy, td_tensor *w, td_tensor *h, bool tanh_approx) {
    return td__gelu_backward(td_matmul(dy, w), h, tanh_approx);
}

td_tensor *td__linear_dgelu(td_tensor *dy, td_tensor *w, td_tensor *h, bool tanh_approx) {
    const char *op = "linear_dgelu";
    TD_CHECK_ARG(dy, op);
    TD_CHECK_ARG(w, op);
    TD_CHECK_ARG(h, op);
    char a[96], b[96], c[96];
    if (w->ndim != 2 || dy->ndim < 1 || h->ndim < 1 || dy->shape[dy->ndim - 1] != w->shape[0] ||
        h->shape[h->ndim - 1] != w->shape[1] || rows_of(dy) != rows_of(h))
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: dy %s, w %s and h %s do not fit dy [..., N], w [N, K], h [..., K]", op,
                     td__shape_str(dy->ndim, dy->shape, a, sizeof a), td__shape_str(w->ndim, w->shape, b, sizeof b),
                     td__shape_str(h->ndim, h->shape, c, sizeof c));
    if (!td_dtype_is_float(dy->dtype) || w->dtype != dy->dtype || h->dtype != dy->dtype)
        TD_FAIL_NULL(TD_ERR_DTYPE, "%s: expected dy, w and h of one floating-point dtype, got %s, %s and %s", op,
                     td_dtype_name(dy->dtype), td_dtype_name(w->dtype), td_dtype_name(h->dtype));
    if (td_grad_enabled() && (dy->requires_grad || w->requires_grad || h->requires_grad))
        return composed(dy, w, h, tanh_approx); /* create_graph: differentiable ops */
    int64_t M = rows_of(dy), N = w->shape[0], K = w->shape[1];
    td_tensor *dy2 = td_keep(td_reshape(dy, 2, (int64_t[]){M, N})), *h2 = td_keep(td_reshape(h, 2, (int64_t[]){M, K}));
    td_tensor *dh = dy2 && h2 ? td__alloc(2, (int64_t[]){M, K}, dy->dtype, dy->storage->device) : NULL;
    td_tensor *in[3] = {dy2, w, h2};
    td_op_params p = {.gelu = {tanh_approx ? TD_GELU_TANH : TD_GELU_ERF}};
    td_status st = dh ? td__dispatch_contig(TD_OP_LINEAR_DGELU, 3, in, 1, &dh, &p) : td_last_status();
    td_release(dy2);
    td_release(h2);
    if (st == TD_ERR_UNSUPPORTED) { /* a backend without the op, or views too wide for it */
        td_release(dh);
        td_clear_error();
        return composed(dy, w, h, tanh_approx);
    }
    dh = td__finish(st, dh);
    return dh ? td_reshape(dh, h->ndim, h->shape) : NULL;
}
