/*
** td__linear_dgelu: dh = (dy w) gelu'(h), the input gradient of a GELU MLP's
** hidden layer through its second linear layer, and optionally db = sum over
** the rows of dh, as one LINEAR_DGELU op (linear_dgelu.h).
*/
#include "linear_dgelu.h"
#include "trident/autograd.h"

/* The product of t's dims but the last: its rows. */
static int64_t rows_of(const td_tensor *t) {
    int64_t m = 1;
    for (int i = 0; i + 1 < t->ndim; i++) m *= t->shape[i];
    return m;
}

/* OUT *db = the column sum of dh [M, K] in dt (SUM over the rows, then a cast where dt is wider): the bias gradient
** of a backend that declines LINEAR_DGELU's db, and of the composed path. NULL with the error set. */
static td_tensor *sum_rows(td_tensor *dh, td_dtype dt) {
    int rows = 0;
    td_tensor *db = td_sum(dh, 1, &rows, false);
    return db && td_tensor_dtype(db) != dt ? td_cast(db, dt) : db;
}

/* MATMUL, then GELU_BACKWARD (and SUM): differentiable, and every backend's. */
static td_tensor *composed(td_tensor *dy, td_tensor *w, td_tensor *h, bool tanh_approx, td_tensor **db,
                           td_dtype db_dt) {
    td_tensor *dh = td__gelu_backward(td_matmul(dy, w), h, tanh_approx);
    if (dh && db && !(*db = sum_rows(td_reshape(dh, 2, (int64_t[]){rows_of(h), h->shape[h->ndim - 1]}), db_dt)))
        return NULL;
    return dh;
}

td_tensor *td__linear_dgelu(td_tensor *dy, td_tensor *w, td_tensor *h, bool tanh_approx, td_tensor **db,
                            td_dtype db_dt) {
    const char *op = "linear_dgelu";
    if (db) *db = NULL;
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
    if (db && db_dt != dy->dtype && !(db_dt == TD_F32 && (dy->dtype == TD_F16 || dy->dtype == TD_BF16)))
        TD_FAIL_NULL(TD_ERR_DTYPE, "%s: db of %s for dy of %s (%s, or float32 for float16 and bfloat16 dy)", op,
                     td_dtype_name(db_dt), td_dtype_name(dy->dtype), td_dtype_name(dy->dtype));
    if (td_grad_enabled() && (dy->requires_grad || w->requires_grad || h->requires_grad))
        return composed(dy, w, h, tanh_approx, db, db_dt); /* create_graph: differentiable ops */
    int64_t M = rows_of(dy), N = w->shape[0], K = w->shape[1];
    td_tensor *dy2 = td_keep(td_reshape(td_contiguous(dy), 2, (int64_t[]){M, N}));
    td_tensor *h2 = td_keep(td_reshape(td_contiguous(h), 2, (int64_t[]){M, K})), *w2 = td_keep(td_contiguous(w));
    td_tensor *dh = dy2 && h2 && w2 ? td__alloc(2, (int64_t[]){M, K}, dy->dtype, dy->storage->device) : NULL;
    td_device dev = td_tensor_device(dy); /* no rows: the dispatcher skips the op (dh is empty), db = 0 */
    td_tensor *bias = !dh || !db ? NULL : (M ? td_empty : td_zeros)(1, (int64_t[]){K}, db_dt, dev);
    td_tensor *in[3] = {dy2, w2, h2}, *out[2] = {dh, bias};
    td_op_params p = {.gelu = {tanh_approx ? TD_GELU_TANH : TD_GELU_ERF}};
    td_status st = dh && (!db || bias) ? td__dispatch(TD_OP_LINEAR_DGELU, 3, in, NULL, 2, out, &p) : td_last_status();
    if (st == TD_ERR_UNSUPPORTED && bias) { /* the backend declines db: dh alone, then SUM */
        td_clear_error();
        bias = out[1] = NULL;
        st = td__dispatch(TD_OP_LINEAR_DGELU, 3, in, NULL, 2, out, &p);
    }
    td_release(dy2);
    td_release(h2);
    td_release(w2);
    if (st == TD_ERR_UNSUPPORTED) { /* a backend without the op, or views too wide for it */
        td_release(dh);
        td_clear_error();
        return composed(dy, w, h, tanh_approx, db, db_dt);
    }
    if (!(dh = td__finish(st, dh))) return NULL;
    if (db && !(*db = bias ? bias : sum_rows(dh, db_dt))) return NULL;
    return td_reshape(dh, h->ndim, h->shape);
}
