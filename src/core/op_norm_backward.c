/*
** td__layer_norm_backward(_to): layer_norm's (and add_layer_norm's) backward as
** one LAYER_NORM_BACKWARD op on [R, D] rows, dx also in a narrow dtype for a
** residual of it (norm_backward.h).
*/
#include <string.h>

#include "norm_backward.h"

td_status td__layer_norm_backward_to(td_tensor *dy, td_tensor *x, td_tensor *w, td_tensor *mean, td_tensor *rstd,
                                     td_tensor *ds, int64_t D, bool need_dw, bool need_db, td_dtype nt, td_tensor **dx,
                                     td_tensor **dw, td_tensor **db, td_tensor **dxn) {
    const char *op = "layer_norm_backward";
    *dx = *dw = *db = *dxn = NULL;
    if (!td__check_arg(dy, op, "dy") || !td__check_arg(x, op, "x") || !td__check_arg(mean, op, "mean") ||
        !td__check_arg(rstd, op, "rstd") || (w && !td__check_arg(w, op, "w")) || (ds && !td__check_arg(ds, op, "ds")))
        return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    int64_t numel = td__numel(x->ndim, x->shape), R = D > 0 ? numel / D : 0;
    char a[96], b[96];
    if (D < 1 || R * D != numel || td__numel(mean->ndim, mean->shape) != R || td__numel(rstd->ndim, rstd->shape) != R ||
        (w && td__numel(w->ndim, w->shape) != D))
        return TD_ERR(TD_ERR_SHAPE, "%s: x %s is not rows of %lld matching mean, rstd and w", op,
                      td__shape_str(x->ndim, x->shape, a, sizeof a), (long long)D);
    td_tensor *grads[2] = {dy, ds};
    for (int i = 0; i < 2; i++)
        if (grads[i] &&
            (grads[i]->ndim != x->ndim || memcmp(grads[i]->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim)))
            return TD_ERR(TD_ERR_SHAPE, "%s: %s %s differs from x %s", op, i ? "ds" : "dy",
                          td__shape_str(grads[i]->ndim, grads[i]->shape, a, sizeof a),
                          td__shape_str(x->ndim, x->shape, b, sizeof b));
    if (!td_dtype_is_float(x->dtype) || (w && w->dtype != x->dtype) || mean->dtype != x->dtype ||
        rstd->dtype != x->dtype)
        return TD_ERR(TD_ERR_DTYPE, "%s: x, w, mean and rstd must share one floating-point dtype", op);
    if (!td_dtype_is_float(nt)) return TD_ERR(TD_ERR_DTYPE, "%s: dxn's dtype must be floating-point", op);
    td_scope_begin();
    int64_t rd[2] = {R, D};
    td_device dev = x->storage->device;
    bool narrow_dy = td__norm_narrow_ok(x, dy->dtype);
    bool one_op = nt != x->dtype && narrow_dy && dy->dtype == nt; /* the op writes dxn, as a COPY would */
    td_tensor *in[6] = {
        td_contiguous(td_reshape(narrow_dy ? dy : td_cast(dy, x->dtype), 2, rd)),
        td_contiguous(td_reshape(x, 2, rd)),
        w ? td_contiguous(td_reshape(w, 1, &D)) : NULL,
        td_contiguous(td_reshape(mean, 1, &R)),
        td_contiguous(td_reshape(rstd, 1, &R)),
        ds ? td_contiguous(td_reshape(td_cast(ds, x->dtype), 2, rd)) : NULL,
    };
    td_tensor *out[4] = {td_empty(2, rd, x->dtype, dev), need_dw && w ? td_empty(1, &D, x->dtype, dev) : NULL,
                         need_db ? td_empty(1, &D, x->dtype, dev) : NULL, one_op ? td_empty(2, rd, nt, dev) : NULL};
    td_status st = TD_OK;
    for (int i = 0; i < 6 && st == TD_OK; i++)
        if ((i != 2 && i != 5 && !in[i]) || (i == 2 && w && !in[i]) || (i == 5 && ds && !in[i])) st = td_last_status();
    if (st == TD_OK && (!out[0] || (need_dw && w && !out[1]) || (need_db && !out[2]) || (one_op && !out[3])))
        st = td_last_status();
    if (st == TD_OK) st = td__dispatch(TD_OP_LAYER_NORM_BACKWARD, 6, in, NULL, 4, out, NULL);
    if (st == TD_OK) { /* dw, db and dxn held across the scope's end, then autoreleased in the caller's */
        bool want_w = out[1] != NULL, want_b = out[2] != NULL;
        td_tensor *kw = want_w ? td_keep(td_reshape(out[1], w->ndim, w->shape)) : NULL;
        td_tensor *kb = want_b ? td_keep(out[2]) : NULL;
        td_tensor *kn = one_op ? td_keep(td_reshape(out[3], x->ndim, x->shape)) : NULL;
        *dx = td__scope_end_keep(td_reshape(out[0], x->ndim, x->shape));
        *dw = kw ? td__scope_add(kw) : NULL;
        *db = kb ? td__scope_add(kb) : NULL;
        *dxn = kn ? td__scope_add(kn) : *dx ? td_cast(*dx, nt) : NULL;
        return *dx && (*dw || !want_w) && (*db || !want_b) && *dxn ? TD_OK : td_last_status();
    }
    td_scope_end();
    return st;
}

td_status td__layer_norm_backward(td_tensor *dy, td_tensor *x, td_tensor *w, td_tensor *mean, td_tensor *rstd,
                                  td_tensor *ds, int64_t D, bool need_dw, bool need_db, td_tensor **dx, td_tensor **dw,
                                  td_tensor **db) {
    td_tensor *dxn = NULL;
    *dx = *dw = *db = NULL;
    if (!td__check_arg(x, "layer_norm_backward", "x")) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    return td__layer_norm_backward_to(dy, x, w, mean, rstd, ds, D, need_dw, need_db, x->dtype, dx, dw, db, &dxn);
}
