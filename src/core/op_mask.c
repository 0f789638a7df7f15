/*
** Masking ops composed from WHERE, so every backend runs them and autograd
** differentiates them through where's formula (the gradient is zero where the
** fill value was written):
**   masked_fill(x, mask, v)  = where(mask, v, x)
**   triu(x, k)[..., i, j]    = j - i >= k ? x[..., i, j] : 0
**   tril(x, k)[..., i, j]    = j - i <= k ? x[..., i, j] : 0
*/
#include <string.h>

#include "internal.h"

td_tensor *td_masked_fill(td_tensor *x, td_tensor *mask, double value) {
    TD_CHECK_ARG(x, "masked_fill");
    TD_CHECK_ARG(mask, "masked_fill");
    if (mask->dtype != TD_BOOL)
        TD_FAIL_NULL(TD_ERR_DTYPE, "masked_fill: mask must be bool, got %s", td_dtype_name(mask->dtype));
    int nb;
    int64_t shape[TD_MAX_DIMS];
    bool fits = td_broadcast_shapes(mask->ndim, mask->shape, x->ndim, x->shape, &nb, shape) == TD_OK && nb == x->ndim &&
                !memcmp(shape, x->shape, sizeof(int64_t) * (size_t)nb);
    if (!fits) {
        char a[96], b[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "masked_fill: mask %s does not broadcast to x %s",
                     td__shape_str(mask->ndim, mask->shape, a, sizeof a),
                     td__shape_str(x->ndim, x->shape, b, sizeof b));
    }
    td_scope_begin();
    td_tensor *y = td_where(mask, td_scalar(value, x->dtype, x->storage->device), x);
    return td__scope_end_keep(y);
}

/* x where (col - row) compares with k as upper asks (>= for triu, <= for tril), else 0. */
static td_tensor *triangle(td_tensor *x, int64_t k, bool upper, const char *name) {
    TD_CHECK_ARG(x, name);
    if (x->ndim < 2) TD_FAIL_NULL(TD_ERR_SHAPE, "%s: x must have 2 or more dims, got %d", name, x->ndim);
    int64_t rows = x->shape[x->ndim - 2], cols = x->shape[x->ndim - 1];
    td_device dev = x->storage->device;
    td_scope_begin();
    td_tensor *i = td_reshape(td_arange(0, (double)rows, 1, TD_I64, dev), 2, (int64_t[]){rows, 1});
    td_tensor *j = td_reshape(td_arange(0, (double)cols, 1, TD_I64, dev), 2, (int64_t[]){1, cols});
    td_tensor *d = td_sub(j, i), *kk = td_scalar((double)k, TD_I64, dev);
    td_tensor *keep = upper ? td_ge(d, kk) : td_le(d, kk);
    td_tensor *y = td_where(keep, x, td_scalar(0, x->dtype, dev));
    return td__scope_end_keep(y);
}

td_tensor *td_triu(td_tensor *x, int64_t diagonal) { return triangle(x, diagonal, true, "triu"); }
td_tensor *td_tril(td_tensor *x, int64_t diagonal) { return triangle(x, diagonal, false, "tril"); }
