/*
** Front-ends of the row-wise nn primitives: softmax, log_softmax and their
** fused backward ops, layer_norm, the fused residual add + layer_norm
** (add_layer_norm), group_norm and cross_entropy (with the fused backward autograd calls).
** Each makes its operands contiguous (TD_LAYOUT_CONTIG) and dispatches one op;
** softmax over another dim than the last swaps that dim to the end and back.
*/
#include <string.h>

#include "internal.h"
#include "trident/amp.h"
#include "trident/autograd.h"

static bool check_float(const td_tensor *t, const char *op, const char *arg) {
    if (td_dtype_is_float(t->dtype)) return true;
    TD_ERR(TD_ERR_DTYPE, "%s: %s must be a floating-point tensor, got %s", op, arg, td_dtype_name(t->dtype));
    return false;
}

static td_tensor *softmax_dim(td_tensor *x, int dim, td_op_kind kind, const char *name);

static td_tensor *softmax_common(td_tensor *x, int dim, td_op_kind kind, const char *name) {
    TD_CHECK_ARG(x, name);
    td_tensor *held;
    if (!td__autocast(kind, 1, &x, &held)) return NULL; /* f32 */
    td_tensor *y = softmax_dim(x, dim, kind, name);
    td__autocast_release(1, &held);
    return y;
}

static td_tensor *softmax_dim(td_tensor *x, int dim, td_op_kind kind, const char *name) {
    if (!check_float(x, name, "x")) return NULL;
    int d = dim;
    if (!td__wrap_dim(&d, x->ndim, name)) return NULL;
    if (x->ndim > 0 && d != x->ndim - 1) {
        /* the op normalizes the last dim: softmax(x, d) = transpose(softmax(transpose(x, d, -1)), d, -1) */
        td_scope_begin();
        td_tensor *y = softmax_dim(td_transpose(x, d, x->ndim - 1), -1, kind, name);
        return td__scope_end_keep(td_transpose(y, d, x->ndim - 1));
    }
    td_tensor *out = td__alloc(x->ndim, x->shape, x->dtype, x->storage->device);
    return td__finish(td__dispatch_contig(kind, 1, &x, 1, &out, NULL), out);
}

td_tensor *td_softmax(td_tensor *x, int dim) { return softmax_common(x, dim, TD_OP_SOFTMAX, "softmax"); }
td_tensor *td_log_softmax(td_tensor *x, int dim) { return softmax_common(x, dim, TD_OP_LOG_SOFTMAX, "log_softmax"); }

/* SOFTMAX_BACKWARD / LOG_SOFTMAX_BACKWARD: dy and y of one shape, y floating;
** dy is cast to y's dtype. The op reduces over the last dim. */
static td_tensor *softmax_backward(td_tensor *dy, td_tensor *y, td_op_kind kind, const char *name) {
    TD_CHECK_ARG(dy, name);
    TD_CHECK_ARG(y, name);
    if (!check_float(y, name, "y") || !check_float(dy, name, "dy")) return NULL;
    if (dy->ndim != y->ndim || memcmp(dy->shape, y->shape, sizeof(int64_t) * (size_t)y->ndim)) {
        char a[96], b[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: dy has shape %s but y has %s; they must match", name,
                     td__shape_str(dy->ndim, dy->shape, a, sizeof a), td__shape_str(y->ndim, y->shape, b, sizeof b));
    }
    td_tensor *g = td_keep(td_cast(dy, y->dtype));
    td_tensor *in[2] = {g, y};
    td_tensor *out = g ? td__alloc(y->ndim, y->shape, y->dtype, y->storage->device) : NULL;
    td_status st = g ? td__dispatch_contig(kind, 2, in, 1, &out, NULL) : td_last_status();
    td_release(g);
    return td__finish(st, out);
}

td_tensor *td__softmax_backward(td_tensor *dy, td_tensor *y) {
    return softmax_backward(dy, y, TD_OP_SOFTMAX_BACKWARD, "softmax_backward");
}
td_tensor *td__log_softmax_backward(td_tensor *dy, td_tensor *y) {
    return softmax_backward(dy, y, TD_OP_LOG_SOFTMAX_BACKWARD, "log_softmax_backward");
}

/* weight/bias of layer_norm: absent, or shaped like x's last n dims, dtype of x */
static bool check_affine(const td_tensor *p, const td_tensor *x, int n, const char *arg) {
    if (!p) return true;
    if (!td__check_arg(p, "layer_norm", arg)) return false;
    bool ok = p->ndim == n;
    for (int i = 0; ok && i < n; i++) ok = p->shape[i] == x->shape[x->ndim - n + i];
    if (!ok) {
        char a[96], b[96];
        TD_ERR(TD_ERR_SHAPE, "layer_norm: %s has shape %s, expected %s (the normalized dims)", arg,
               td__shape_str(p->ndim, p->shape, a, sizeof a), td__shape_str(n, x->shape + x->ndim - n, b, sizeof b));
        return false;
    }
    if (p->dtype != x->dtype) {
        TD_ERR(TD_ERR_DTYPE, "layer_norm: %s is %s but x is %s", arg, td_dtype_name(p->dtype), td_dtype_name(x->dtype));
        return false;
    }
    return true;
}

static td_tensor *layer_norm(td_tensor *x, int n_norm, td_tensor *weight, td_tensor *bias, double eps) {
    TD_CHECK_ARG(x, "layer_norm");
    if (!check_float(x, "layer_norm", "x")) return NULL;
    if (n_norm < 1 || n_norm > x->ndim)
        TD_FAIL_NULL(TD_ERR_SHAPE, "layer_norm: n_norm %d outside [1, %d] for a %d-d input", n_norm, x->ndim, x->ndim);
    if (!check_affine(weight, x, n_norm, "weight") || !check_affine(bias, x, n_norm, "bias")) return NULL;
    int64_t rows = td__numel(x->ndim - n_norm, x->shape);
    td_device dev = x->storage->device;
    td_tensor *in[3] = {x, weight, bias};
    /* mean and rstd per row are outputs too, so that autograd can save them */
    td_tensor *out[3] = {td__alloc(x->ndim, x->shape, x->dtype, dev), td__alloc(1, &rows, x->dtype, dev),
                         td__alloc(1, &rows, x->dtype, dev)};
    td_op_params p = {.norm = {eps}};
    td_status st = td__dispatch_contig(TD_OP_LAYER_NORM, 3, in, 3, out, &p);
    td_release(out[1]);
    td_release(out[2]);
    return td__finish(st, out[0]);
}

td_tensor *td_layer_norm(td_tensor *x, int n_norm, td_tensor *weight, td_tensor *bias, double eps) {
    td_tensor *in[3] = {x, weight, bias}, *held[3]; /* autocast: f32 */
    td_tensor *y = td__autocast(TD_OP_LAYER_NORM, 3, in, held) ? layer_norm(in[0], n_norm, in[1], in[2], eps) : NULL;
    td__autocast_release(3, held);
    return y;
}

/* weight/bias of group_norm: absent, or [C] of x's dtype */
static bool check_channels(const td_tensor *p, const td_tensor *x, const char *arg) {
    if (!p) return true;
    if (!td__check_arg(p, "group_norm", arg)) return false;
    if (p->ndim != 1 || p->shape[0] != x->shape[1]) {
        char a[96];
        TD_ERR(TD_ERR_SHAPE, "group_norm: %s has shape %s, expected [%lld] (x's channels)", arg,
               td__shape_str(p->ndim, p->shape, a, sizeof a), (long long)x->shape[1]);
        return false;
    }
    if (p->dtype != x->dtype) {
        TD_ERR(TD_ERR_DTYPE, "group_norm: %s is %s but x is %s", arg, td_dtype_name(p->dtype), td_dtype_name(x->dtype));
        return false;
    }
    return true;
}

static td_tensor *group_norm(td_tensor *x, int num_groups, td_tensor *weight, td_tensor *bias, double eps) {
    TD_CHECK_ARG(x, "group_norm");
    if (!check_float(x, "group_norm", "x")) return NULL;
    if (x->ndim < 2) TD_FAIL_NULL(TD_ERR_SHAPE, "group_norm: x has %d dims, expected [N, C, *]", x->ndim);
    if (num_groups < 1 || x->shape[1] % num_groups)
        TD_FAIL_NULL(TD_ERR_SHAPE, "group_norm: %lld channels do not split into num_groups %d", (long long)x->shape[1],
                     num_groups);
    if (!check_channels(weight, x, "weight") || !check_channels(bias, x, "bias")) return NULL;
    td_device dev = x->storage->device;
    int64_t ng[2] = {x->shape[0], num_groups};
    td_tensor *in[3] = {x, weight, bias};
    /* mean and rstd per (n, group), outputs so that autograd can save them; the op reads G from their shape */
    td_tensor *out[3] = {td__alloc(x->ndim, x->shape, x->dtype, dev), td__alloc(2, ng, x->dtype, dev),
                         td__alloc(2, ng, x->dtype, dev)};
    td_op_params p = {.norm = {eps}};
    td_status st = td__dispatch_contig(TD_OP_GROUP_NORM, 3, in, 3, out, &p);
    td_release(out[1]);
    td_release(out[2]);
    return td__finish(st, out[0]);
}

td_tensor *td_group_norm(td_tensor *x, int num_groups, td_tensor *weight, td_tensor *bias, double eps) {
    td_tensor *in[3] = {x, weight, bias}, *held[3]; /* autocast: f32 */
    td_tensor *y =
        td__autocast(TD_OP_GROUP_NORM, 3, in, held) ? group_norm(in[0], num_groups, in[1], in[2], eps) : NULL;
    td__autocast_release(3, held);
    return y;
}

/* Shared checks of cross_entropy and its backward: logits [N, C] with target
** [N], or logits [C] with a 0-d target; int64 target; weight [C]. */
static bool check_xent(const char *op, td_tensor *logits, td_tensor *target, td_tensor *weight, double label_smoothing,
                       int reduction) {
    if (!check_float(logits, op, "logits")) return false;
    char a[96], b[96];
    td__shape_str(logits->ndim, logits->shape, a, sizeof a);
    td__shape_str(target->ndim, target->shape, b, sizeof b);
    if (target->dtype != TD_I64)
        return TD_ERR(TD_ERR_DTYPE, "%s: target must be int64 class ids, got %s", op, td_dtype_name(target->dtype)),
               false;
    bool ok = (logits->ndim == 2 && target->ndim == 1 && target->shape[0] == logits->shape[0]) ||
              (logits->ndim == 1 && target->ndim == 0);
    if (!ok)
        return TD_ERR(TD_ERR_SHAPE, "%s: logits %s and target %s do not fit ([N, C] with [N], or [C] with [])", op, a,
                      b),
               false;
    int64_t C = logits->shape[logits->ndim - 1];
    if (C < 1) return TD_ERR(TD_ERR_SHAPE, "%s: logits %s have no classes", op, a), false;
    if (weight) {
        if (!td__check_arg(weight, op, "weight")) return false;
        if (weight->ndim != 1 || weight->shape[0] != C)
            return TD_ERR(TD_ERR_SHAPE, "%s: weight has shape %s, expected [%lld]", op,
                          td__shape_str(weight->ndim, weight->shape, b, sizeof b), (long long)C),
                   false;
        if (weight->dtype != logits->dtype)
            return TD_ERR(TD_ERR_DTYPE, "%s: weight is %s but logits are %s", op, td_dtype_name(weight->dtype),
                          td_dtype_name(logits->dtype)),
                   false;
    }
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return TD_ERR(TD_ERR_MISUSE, "%s: label_smoothing %g outside [0, 1]", op, label_smoothing), false;
    if (reduction != TD_REDUCTION_NONE && reduction != TD_REDUCTION_MEAN && reduction != TD_REDUCTION_SUM)
        return TD_ERR(TD_ERR_MISUSE, "%s: unknown reduction %d (use TD_REDUCTION_NONE, _MEAN or _SUM)", op, reduction),
               false;
    return true;
}

/* One CROSS_ENTROPY op; the loss in loss_dt (the logits' dtype, or f32 for
** f16/bf16 logits). While autograd records it, each row's logsumexp comes out
** too (f32, f64 for f64 logits), saved for the backward, which then reads the
** logits once; a backend without that output computes it again there. */
static td_tensor *cross_entropy_op(td_tensor *const *in, td_tensor *target, td_dtype loss_dt, int64_t ignore_index,
                                   double label_smoothing, int reduction, td_status *st) {
    bool none = reduction == TD_REDUCTION_NONE;
    td_device dev = in[0]->storage->device;
    int64_t N = td__numel(target->ndim, target->shape);
    td_tensor *c[3] = {td_keep(td_contiguous(in[0])), td_keep(td_contiguous(in[1])),
                       in[2] ? td_keep(td_contiguous(in[2])) : NULL};
    td_tensor *out[2] = {td__alloc(none ? target->ndim : 0, target->shape, loss_dt, dev), NULL};
    if (td_grad_enabled() && in[0]->requires_grad)
        out[1] = td__alloc(1, &N, in[0]->dtype == TD_F64 ? TD_F64 : TD_F32, dev);
    td_op_params p = {.xent = {ignore_index, label_smoothing, reduction}};
    *st = c[0] && c[1] && (!in[2] || c[2]) && out[0] && (out[1] || !td_grad_enabled() || !in[0]->requires_grad)
              ? td__dispatch(TD_OP_CROSS_ENTROPY, 3, c, NULL, 2, out, &p)
              : td_last_status();
    if (*st == TD_ERR_UNSUPPORTED && out[1]) { /* no lse output on this backend */
        td_clear_error();
        td_release(out[1]);
        out[1] = NULL;
        *st = td__dispatch(TD_OP_CROSS_ENTROPY, 3, c, NULL, 2, out, &p);
    }
    for (int i = 0; i < 3; i++) td_release(c[i]);
    td_release(out[1]); /* the recorded node holds it */
    if (*st == TD_OK) return td__scope_add(out[0]);
    td_release(out[0]);
    return NULL;
}

/* Autocast runs cross_entropy in f32 (torch's list), but the kernels already
** compute in f32 from f16/bf16 logits: under autocast such logits stay as they
** are and only the loss is f32, so no f32 copy of the [N, C] logits is made,
** kept for backward and cast back (a backend without the mixed form, e.g.
** Vulkan, gets the cast). */
td_tensor *td__cross_entropy(td_tensor *logits, td_tensor *target, td_tensor *weight, int64_t ignore_index,
                             double label_smoothing, int reduction) {
    TD_CHECK_ARG(logits, "cross_entropy");
    TD_CHECK_ARG(target, "cross_entropy");
    td_dtype low;
    td_status st;
    if ((logits->dtype == TD_F16 || logits->dtype == TD_BF16) && (!weight || weight->dtype == logits->dtype) &&
        td_autocast_enabled(logits->storage->device.type, &low)) {
        td_tensor *in[3] = {logits, target, weight};
        if (!check_xent("cross_entropy", logits, target, weight, label_smoothing, reduction)) return NULL;
        td_tensor *out = cross_entropy_op(in, target, TD_F32, ignore_index, label_smoothing, reduction, &st);
        if (st != TD_ERR_UNSUPPORTED) return out;
        td_clear_error();
    }
    td_tensor *in[3] = {logits, target, weight}, *held[3]; /* autocast: f32 */
    if (!td__autocast(TD_OP_CROSS_ENTROPY, 3, in, held)) return NULL;
    td_tensor *out = NULL;
    if (check_xent("cross_entropy", in[0], target, in[2], label_smoothing, reduction))
        out = cross_entropy_op(in, target, in[0]->dtype, ignore_index, label_smoothing, reduction, &st);
    td__autocast_release(3, held);
    return out;
}

/* dloss stays f32 for f16/bf16 logits (the loss autocast left f32); a backend
** without that mixed form gets it cast to the logits' dtype. lse (the rows'
** logsumexp the forward saved) or NULL. */
td_tensor *td__cross_entropy_backward_lse(td_tensor *dloss, td_tensor *logits, td_tensor *target, td_tensor *weight,
                                          td_tensor *lse, int64_t ignore_index, double label_smoothing, int reduction) {
    const char *op = "cross_entropy_backward";
    TD_CHECK_ARG(dloss, op);
    TD_CHECK_ARG(logits, op);
    TD_CHECK_ARG(target, op);
    if (!check_xent(op, logits, target, weight, label_smoothing, reduction)) return NULL;
    bool none = reduction == TD_REDUCTION_NONE;
    bool fits = none ? dloss->ndim == target->ndim &&
                           td__numel(dloss->ndim, dloss->shape) == td__numel(target->ndim, target->shape)
                     : td__numel(dloss->ndim, dloss->shape) == 1;
    if (!fits) {
        char a[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: dloss has shape %s, expected the loss's shape", op,
                     td__shape_str(dloss->ndim, dloss->shape, a, sizeof a));
    }
    if (lse && (td__numel(lse->ndim, lse->shape) != td__numel(target->ndim, target->shape) ||
                lse->dtype != (logits->dtype == TD_F64 ? TD_F64 : TD_F32)))
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: lse must hold one f32 (f64 for f64 logits) per row", op);
    bool mixed = dloss->dtype == TD_F32 && (logits->dtype == TD_F16 || logits->dtype == TD_BF16);
    td_op_params p = {.xent = {ignore_index, label_smoothing, reduction}};
    for (int pass = mixed ? 0 : 1; pass < 2; pass++) { /* pass 0: dloss in f32; pass 1: in the logits' dtype */
        td_tensor *dl = td_keep(td_contiguous(pass ? td_cast(dloss, logits->dtype) : dloss));
        td_tensor *in[5] = {dl, td_keep(td_contiguous(logits)), td_keep(td_contiguous(target)),
                            weight ? td_keep(td_contiguous(weight)) : NULL, lse ? td_keep(td_contiguous(lse)) : NULL};
        td_tensor *out = dl ? td__alloc(logits->ndim, logits->shape, logits->dtype, logits->storage->device) : NULL;
        bool ok = out && in[1] && in[2] && (!weight || in[3]) && (!lse || in[4]);
        td_status st = ok ? td__dispatch(TD_OP_CROSS_ENTROPY_BACKWARD, 5, in, NULL, 1, &out, &p) : td_last_status();
        for (int i = 0; i < 5; i++) td_release(in[i]);
        if (pass == 0 && st == TD_ERR_UNSUPPORTED) {
            td_release(out);
            td_clear_error();
            continue;
        }
        return td__finish(st, out);
    }
    return NULL;
}

td_tensor *td__cross_entropy_backward(td_tensor *dloss, td_tensor *logits, td_tensor *target, td_tensor *weight,
                                      int64_t ignore_index, double label_smoothing, int reduction) {
    return td__cross_entropy_backward_lse(dloss, logits, target, weight, NULL, ignore_index, label_smoothing,
                                          reduction);
}

static td_tensor *add_layer_norm(td_tensor *x, td_tensor *r, int n_norm, td_tensor *weight, td_tensor *bias, double eps,
                                 td_tensor **sum) {
    const char *op = "add_layer_norm";
    TD_CHECK_ARG(x, op);
    TD_CHECK_ARG(r, op);
    if (!check_float(x, op, "x") || !check_float(r, op, "residual")) return NULL;
    char a[96], b[96];
    if (x->ndim != r->ndim || td__numel(x->ndim, x->shape) != td__numel(r->ndim, r->shape) ||
        memcmp(x->shape, r->shape, sizeof(int64_t) * (size_t)x->ndim))
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: x %s and residual %s differ in shape (no broadcast)", op,
                     td__shape_str(x->ndim, x->shape, a, sizeof a), td__shape_str(r->ndim, r->shape, b, sizeof b));
    if (n_norm < 1 || n_norm > x->ndim)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: n_norm %d outside [1, %d] for a %d-d input", op, n_norm, x->ndim, x->ndim);
    td_dtype dt = td_dtype_promote(x->dtype, r->dtype);
    td_tensor *xc = td_keep(td_cast(x, dt)), *rc = td_keep(td_cast(r, dt)), *y = NULL;
    if (xc && rc && check_affine(weight, xc, n_norm, "weight") && check_affine(bias, xc, n_norm, "bias")) {
        int64_t rows = td__numel(x->ndim - n_norm, x->shape);
        td_device dev = x->storage->device;
        td_tensor *in[4] = {xc, rc, weight, bias};
        td_tensor *out[4] = {td__alloc(x->ndim, x->shape, dt, dev), td__alloc(x->ndim, x->shape, dt, dev),
                             td__alloc(1, &rows, dt, dev), td__alloc(1, &rows, dt, dev)};
        td_op_params p = {.norm = {eps}};
        td_status st = td__dispatch_contig(TD_OP_ADD_LAYER_NORM, 4, in, 4, out, &p);
        td_release(out[2]);
        td_release(out[3]);
        y = td__finish(st, out[0]);
        *sum = td__finish(st, out[1]);
    }
    td_release(xc);
    td_release(rc);
    return y;
}

td_tensor *td_add_layer_norm(td_tensor *x, td_tensor *residual, int n_norm, td_tensor *weight, td_tensor *bias,
                             double eps, td_tensor **sum) {
    if (!sum) TD_FAIL_NULL(TD_ERR_MISUSE, "add_layer_norm: sum is NULL");
    *sum = NULL;
    td_tensor *in[4] = {x, residual, weight, bias}, *held[4]; /* autocast: f32 */
    td_tensor *y = td__autocast(TD_OP_ADD_LAYER_NORM, 4, in, held)
                       ? add_layer_norm(in[0], in[1], n_norm, in[2], in[3], eps, sum)
                       : NULL;
    td__autocast_release(4, held);
    return y;
}
