/*
** td__linear_wgrad: linear's weight and bias gradients, dw = dy^T x and
** db = sum over rows of dy, as one LINEAR_WGRAD op (linear_wgrad.h).
*/
#include "linear_wgrad.h"
#include "trident/autograd.h"

/* The product of t's dims but the last: its rows. */
static int64_t rows_of(const td_tensor *t) {
    int64_t m = 1;
    for (int i = 0; i + 1 < t->ndim; i++) m *= t->shape[i];
    return m;
}

td_status td__linear_wgrad(td_tensor *dy, td_tensor *x, bool need_db, td_tensor **dw, td_tensor **db) {
    if (!td__check_arg(dy, "linear_wgrad", "dy")) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    return td__linear_wgrad_to(dy, x, need_db, dy->dtype, dw, db);
}

/* *t cast to dt where it is not: the results of a composed or declined wide call */
static td_status cast_to(td_tensor **t, td_dtype dt) {
    if (*t && (*t)->dtype != dt && !(*t = td_cast(*t, dt))) return td_last_status();
    return TD_OK;
}

td_status td__linear_wgrad_to(td_tensor *dy, td_tensor *x, bool need_db, td_dtype dt, td_tensor **dw, td_tensor **db) {
    const char *op = "linear_wgrad";
    *dw = NULL;
    if (db) *db = NULL;
    if (!td__check_arg(dy, op, "dy") || !td__check_arg(x, op, "x"))
        return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    if (need_db && !db) return TD_ERR(TD_ERR_MISUSE, "%s: need_db with db NULL", op);
    char a[96], b[96];
    if (dy->ndim < 1 || x->ndim < 1 || rows_of(dy) != rows_of(x))
        return TD_ERR(TD_ERR_SHAPE, "%s: dy %s and x %s do not have the same rows", op,
                      td__shape_str(dy->ndim, dy->shape, a, sizeof a), td__shape_str(x->ndim, x->shape, b, sizeof b));
    if (dy->dtype != x->dtype)
        return TD_ERR(TD_ERR_DTYPE, "%s: dy is %s but x is %s", op, td_dtype_name(dy->dtype), td_dtype_name(x->dtype));
    bool wide = dt != dy->dtype;
    if (wide && !(dt == TD_F32 && (dy->dtype == TD_F16 || dy->dtype == TD_BF16)))
        return TD_ERR(TD_ERR_DTYPE, "%s: gradients of %s for dy of %s (%s, or float32 for float16 and bfloat16 dy)", op,
                      td_dtype_name(dt), td_dtype_name(dy->dtype), td_dtype_name(dy->dtype));
    int64_t M = rows_of(dy), N = dy->shape[dy->ndim - 1], K = x->shape[x->ndim - 1];
    td_tensor *dy2 = td_reshape(td_contiguous(dy), 2, (int64_t[]){M, N});
    td_tensor *x2 = td_reshape(td_contiguous(x), 2, (int64_t[]){M, K});
    if (!dy2 || !x2) return td_last_status();
    if (td_grad_enabled() && (dy->requires_grad || x->requires_grad)) { /* create_graph: differentiable ops */
        int rows = 0;
        *dw = td_matmul(td_transpose(dy2, 0, 1), x2);
        if (need_db) *db = td_sum(dy2, 1, &rows, false);
        if (!*dw || (need_db && !*db)) return td_last_status();
        td_status st = cast_to(dw, dt);
        return st == TD_OK && need_db ? cast_to(db, dt) : st;
    }
    td_device dev = td_tensor_device(dy);
    td_tensor *w = td_empty(2, (int64_t[]){N, K}, dt, dev);
    td_tensor *bias = need_db ? td_empty(1, (int64_t[]){N}, dt, dev) : NULL;
    if (!w || (need_db && !bias)) return td_last_status();
    td_tensor *in[2] = {dy2, x2}, *out[2] = {w, bias};
    bool declined = wide && !td__supports(TD_OP_LINEAR_WGRAD, 2, in, need_db ? 2 : 1, out, NULL);
    td_status st = declined ? TD_ERR_UNSUPPORTED : td__dispatch(TD_OP_LINEAR_WGRAD, 2, in, NULL, 2, out, NULL);
    if (st == TD_ERR_UNSUPPORTED && wide) { /* declined, in supports or at run time: in dy's dtype, then cast */
        td_clear_error();
        st = td__linear_wgrad_to(dy, x, need_db, dy->dtype, dw, db);
        if (st == TD_OK) st = cast_to(dw, dt);
        return st == TD_OK && need_db ? cast_to(db, dt) : st;
    }
    if (st != TD_OK) return st;
    *dw = w;
    if (need_db) *db = bias;
    return TD_OK;
}
