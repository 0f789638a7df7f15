/*
** td_layer_norm_to and td_add_layer_norm_to: layer_norm (and the fused residual
** add + layer_norm) with y in a dtype the caller names, for a consumer that
** would cast it anyway (a Linear under autocast). For f32 x on a device whose
** kernels take narrow operands (td__norm_narrow_ok), one LAYER_NORM or
** ADD_LAYER_NORM op writes the f16/bf16 y itself (the f32 row rounded as a
** COPY rounds it: the same bits as layer_norm then td_cast) and reads an
** f16/bf16 residual beside f32 x (widened exactly: torch's promoted add);
** elsewhere, td_layer_norm / td_add_layer_norm followed by td_cast.
*/
#include <string.h>

#include "internal.h"
#include "norm_backward.h"
#include "trident/amp.h"

static bool narrow_dtype(td_dtype dt) { return dt == TD_F16 || dt == TD_BF16; }

bool td__norm_narrow_ok(const td_tensor *x, td_dtype narrow) {
    td_device_type t = x->storage->device.type;
    return x->dtype == TD_F32 && narrow_dtype(narrow) && (t == TD_DEVICE_CPU || t == TD_DEVICE_CUDA);
}

/* weight/bias: absent, or shaped like x's last n dims, dtype of x */
static bool check_affine(const td_tensor *p, const td_tensor *x, int n, const char *op, const char *arg) {
    if (!p) return true;
    if (!td__check_arg(p, op, arg)) return false;
    bool ok = p->ndim == n;
    for (int i = 0; ok && i < n; i++) ok = p->shape[i] == x->shape[x->ndim - n + i];
    char a[96], b[96];
    if (!ok)
        TD_ERR(TD_ERR_SHAPE, "%s: %s has shape %s, expected %s (the normalized dims)", op, arg,
               td__shape_str(p->ndim, p->shape, a, sizeof a), td__shape_str(n, x->shape + x->ndim - n, b, sizeof b));
    else if (p->dtype != x->dtype)
        TD_ERR(TD_ERR_DTYPE, "%s: %s is %s but x is %s", op, arg, td_dtype_name(p->dtype), td_dtype_name(x->dtype));
    return ok && p->dtype == x->dtype;
}

static bool check_out_dtype(td_dtype dt, const char *op) {
    if (td_dtype_is_float(dt)) return true;
    TD_ERR(TD_ERR_DTYPE, "%s: y's dtype must be floating-point, got %s", op, td_dtype_name(dt));
    return false;
}

/* One LAYER_NORM (r NULL) or ADD_LAYER_NORM op on f32 x with y of dtype dt
** (f32, f16 or bf16) and r f32, f16 or bf16; *sum (ADD_LAYER_NORM) f32.
** *declined: the backend does not take these dtypes (NULL, no error set). */
static td_tensor *norm_narrow(td_tensor *x, td_tensor *r, int n_norm, td_tensor *w, td_tensor *b, double eps,
                              td_dtype dt, td_tensor **sum, const char *op, bool *declined) {
    *declined = false;
    char s1[96], s2[96];
    if (r && (x->ndim != r->ndim || memcmp(x->shape, r->shape, sizeof(int64_t) * (size_t)x->ndim)))
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: x %s and residual %s differ in shape (no broadcast)", op,
                     td__shape_str(x->ndim, x->shape, s1, sizeof s1), td__shape_str(r->ndim, r->shape, s2, sizeof s2));
    if (n_norm < 1 || n_norm > x->ndim)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: n_norm %d outside [1, %d] for a %d-d input", op, n_norm, x->ndim, x->ndim);
    if (!check_affine(w, x, n_norm, op, "weight") || !check_affine(b, x, n_norm, op, "bias")) return NULL;
    int64_t rows = td__numel(x->ndim - n_norm, x->shape);
    td_device dev = x->storage->device;
    td_tensor *y = td__alloc(x->ndim, x->shape, dt, dev), *s = r ? td__alloc(x->ndim, x->shape, TD_F32, dev) : NULL;
    td_tensor *mean = td__alloc(1, &rows, TD_F32, dev), *rstd = td__alloc(1, &rows, TD_F32, dev);
    td_op_params p = {.norm = {eps}};
    td_tensor *in[4] = {x, r, w, b}, *out[4] = {y, s, mean, rstd};
    td_status st =
        r ? td__dispatch_contig(TD_OP_ADD_LAYER_NORM, 4, in, 4, out, &p)
          : td__dispatch_contig(TD_OP_LAYER_NORM, 3, (td_tensor *[]){x, w, b}, 3, (td_tensor *[]){y, mean, rstd}, &p);
    td_release(mean);
    td_release(rstd);
    if ((*declined = st == TD_ERR_UNSUPPORTED)) td_clear_error();
    if (r) *sum = td__finish(st, s);
    return td__finish(st, y);
}

td_tensor *td_layer_norm_to(td_tensor *x, int n_norm, td_tensor *weight, td_tensor *bias, double eps, td_dtype dtype) {
    TD_CHECK_ARG(x, "layer_norm");
    if (!check_out_dtype(dtype, "layer_norm")) return NULL;
    td_tensor *in[3] = {x, weight, bias}, *held[3]; /* autocast: f32 */
    if (!td__autocast(TD_OP_LAYER_NORM, 3, in, held)) return NULL;
    bool declined = true;
    td_tensor *y = td__norm_narrow_ok(in[0], dtype)
                       ? norm_narrow(in[0], NULL, n_norm, in[1], in[2], eps, dtype, NULL, "layer_norm", &declined)
                       : NULL;
    if (declined) y = td_cast(td_layer_norm(in[0], n_norm, in[1], in[2], eps), dtype);
    td__autocast_release(3, held);
    return y;
}

td_tensor *td_add_layer_norm_to(td_tensor *x, td_tensor *residual, int n_norm, td_tensor *weight, td_tensor *bias,
                                double eps, td_dtype dtype, td_tensor **sum) {
    const char *op = "add_layer_norm";
    if (!sum) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: sum is NULL", op);
    *sum = NULL;
    TD_CHECK_ARG(x, op);
    TD_CHECK_ARG(residual, op);
    if (!check_out_dtype(dtype, op)) return NULL;
    /* autocast casts x, w and b to f32; a narrow residual is read as it is (the sum in f32 all the same) */
    td_tensor *in[4] = {x, NULL, weight, bias}, *held[4];
    if (!td__autocast(TD_OP_ADD_LAYER_NORM, 4, in, held)) return NULL;
    td_dtype rt = residual->dtype;
    bool one_op = (rt == TD_F32 || td__norm_narrow_ok(in[0], rt)) &&
                  (dtype == TD_F32 || td__norm_narrow_ok(in[0], dtype)) && in[0]->dtype == TD_F32;
    bool declined = true;
    td_tensor *y = one_op ? norm_narrow(in[0], residual, n_norm, in[2], in[3], eps, dtype, sum, op, &declined) : NULL;
    if (declined) y = td_cast(td_add_layer_norm(x, residual, n_norm, weight, bias, eps, sum), dtype);
    td__autocast_release(4, held);
    return y;
}
