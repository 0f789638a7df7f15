/*
** Reduction front-ends: sum, mean, amax, amin, var, logsumexp, argmax, argmin.
** The backend writes a keepdim-shaped output (reduced dims of size 1); without
** keepdim the result is a view of it without those dims (recorded through
** td__view_hook, so gradients flow through the view to the reduction).
*/
#include <string.h>

#include "internal.h"

/* dims[0..n_dims) as a bit mask over x's dims; n_dims == 0 means all dims. */
static bool dims_mask(const char *name, const td_tensor *x, int n_dims, const int *dims, uint32_t *mask) {
    uint32_t all = (1u << x->ndim) - 1, m = 0;
    if (n_dims < 0 || n_dims > TD_MAX_DIMS || (n_dims && !dims))
        return TD_ERR(TD_ERR_MISUSE, "%s: invalid dims list (n_dims %d%s)", name, n_dims, dims ? "" : ", dims NULL"),
               false;
    for (int i = 0; i < n_dims; i++) {
        int d = dims[i];
        if (!td__wrap_dim(&d, x->ndim, name)) return false;
        if (m >> d & 1) return TD_ERR(TD_ERR_INDEX, "%s: dim %d appears more than once in dims", name, d), false;
        m |= 1u << d;
    }
    *mask = n_dims ? m & all : all;
    return true;
}

/* Run kind over the dims in mask into dtype odt; drop the reduced dims unless keepdim. */
static td_tensor *reduce(td_op_kind kind, td_tensor *x, uint32_t mask, bool keepdim, td_dtype odt, int correction) {
    int64_t kshape[TD_MAX_DIMS], shape[TD_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
        kshape[d] = mask >> d & 1 ? 1 : x->shape[d];
        if (!(mask >> d & 1)) shape[n++] = x->shape[d];
    }
    td_tensor *out = td__alloc(x->ndim, kshape, odt, x->storage->device);
    if (!out) return NULL;
    td_op_params p = {.reduce = {mask, correction}};
    if (td__dispatch(kind, 1, &x, NULL, 1, &out, &p) != TD_OK) {
        td_release(out);
        return NULL;
    }
    if (keepdim || n == x->ndim) return td__scope_add(out);
    td_tensor *v = td_view(out, n, shape); /* scope-owned; keeps the storage alive */
    td_release(out);
    return v;
}

/* Number of elements each output reduces. */
static int64_t reduced_count(const td_tensor *x, uint32_t mask) {
    int64_t k = 1;
    for (int d = 0; d < x->ndim; d++)
        if (mask >> d & 1) k *= x->shape[d];
    return k;
}

typedef enum { FLOAT_ONLY, FLOAT_PROMOTE, NUMERIC, SUM_RULES } dtype_rule;

static td_tensor *reduce_rules(td_op_kind kind, const char *name, td_tensor *x, int n_dims, const int *dims,
                               bool keepdim, int correction, dtype_rule rule);

/* Validate x and dims, pick the compute dtype by rule, run. */
static td_tensor *reduce_checked(td_op_kind kind, const char *name, td_tensor *x, int n_dims, const int *dims,
                                 bool keepdim, int correction, dtype_rule rule) {
    TD_CHECK_ARG(x, name);
    td_tensor *held;
    if (!td__autocast(kind, 1, &x, &held)) return NULL; /* sum, logsumexp: f32 */
    td_tensor *out = reduce_rules(kind, name, x, n_dims, dims, keepdim, correction, rule);
    td__autocast_release(1, &held);
    return out;
}

static td_tensor *reduce_rules(td_op_kind kind, const char *name, td_tensor *x, int n_dims, const int *dims,
                               bool keepdim, int correction, dtype_rule rule) {
    uint32_t mask;
    if (!dims_mask(name, x, n_dims, dims, &mask)) return NULL;
    td_dtype dt = x->dtype, odt = dt;
    bool fl = td_dtype_is_float(dt);
    switch (rule) {
    case FLOAT_ONLY:
        if (!fl)
            TD_FAIL_NULL(TD_ERR_DTYPE, "%s: input dtype %s is not floating; cast it to a float dtype first", name,
                         td_dtype_name(dt));
        break;
    case FLOAT_PROMOTE: /* as PyTorch: integers and bool compute in float32 */
        if (!fl) dt = odt = TD_F32;
        break;
    case NUMERIC:
        if (dt == TD_BOOL)
            TD_FAIL_NULL(TD_ERR_DTYPE, "%s: not defined for bool tensors; cast to a numeric dtype first", name);
        if (reduced_count(x, mask) == 0) {
            char s[96];
            TD_FAIL_NULL(TD_ERR_SHAPE, "%s: cannot reduce an empty set (input shape %s); the operation has no identity",
                         name, td__shape_str(x->ndim, x->shape, s, sizeof s));
        }
        if (kind == TD_OP_ARGMAX || kind == TD_OP_ARGMIN) odt = TD_I64;
        break;
    case SUM_RULES: /* bool and integers accumulate to int64 */
        if (!fl) odt = TD_I64;
        if (dt == TD_BOOL) dt = TD_I64;
        break;
    }
    td_tensor *in = td_keep(td_cast(x, dt));
    td_tensor *out = in ? reduce(kind, in, mask, keepdim, odt, correction) : NULL;
    td_release(in);
    return out;
}

td_tensor *td_sum(td_tensor *x, int n_dims, const int *dims, bool keepdim) {
    return reduce_checked(TD_OP_SUM, "sum", x, n_dims, dims, keepdim, 0, SUM_RULES);
}
td_tensor *td_mean(td_tensor *x, int n_dims, const int *dims, bool keepdim) {
    return reduce_checked(TD_OP_MEAN, "mean", x, n_dims, dims, keepdim, 0, FLOAT_ONLY);
}
td_tensor *td_amax(td_tensor *x, int n_dims, const int *dims, bool keepdim) {
    return reduce_checked(TD_OP_MAX, "amax", x, n_dims, dims, keepdim, 0, NUMERIC);
}
td_tensor *td_amin(td_tensor *x, int n_dims, const int *dims, bool keepdim) {
    return reduce_checked(TD_OP_MIN, "amin", x, n_dims, dims, keepdim, 0, NUMERIC);
}
td_tensor *td_var(td_tensor *x, int n_dims, const int *dims, int correction, bool keepdim) {
    return reduce_checked(TD_OP_VAR, "var", x, n_dims, dims, keepdim, correction, FLOAT_ONLY);
}
td_tensor *td_logsumexp(td_tensor *x, int n_dims, const int *dims, bool keepdim) {
    return reduce_checked(TD_OP_LOGSUMEXP, "logsumexp", x, n_dims, dims, keepdim, 0, FLOAT_PROMOTE);
}

/* Index of the first extreme along dim (int64); TD_ALL_DIMS searches x flattened. */
static td_tensor *arg_reduce(td_op_kind kind, const char *name, td_tensor *x, int dim, bool keepdim) {
    TD_CHECK_ARG(x, name);
    if (dim != TD_ALL_DIMS) return reduce_checked(kind, name, x, 1, &dim, keepdim, 0, NUMERIC);
    int64_t n = td__numel(x->ndim, x->shape), ones[TD_MAX_DIMS];
    td_tensor *flat = td_keep(td_reshape(x, 1, &n));
    int zero = 0;
    td_tensor *idx = flat ? td_keep(reduce_checked(kind, name, flat, 1, &zero, false, 0, NUMERIC)) : NULL;
    td_release(flat);
    if (!idx || !keepdim) return idx ? td__scope_add(idx) : NULL;
    for (int d = 0; d < x->ndim; d++) ones[d] = 1;
    td_tensor *out = td_view(idx, x->ndim, ones);
    td_release(idx);
    return out;
}

td_tensor *td_argmax(td_tensor *x, int dim, bool keepdim) {
    return arg_reduce(TD_OP_ARGMAX, "argmax", x, dim, keepdim);
}
td_tensor *td_argmin(td_tensor *x, int dim, bool keepdim) {
    return arg_reduce(TD_OP_ARGMIN, "argmin", x, dim, keepdim);
}
