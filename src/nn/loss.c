/*
** Losses (torch.nn.functional), written in terms of ops so autograd derives
** them. Shapes: N batch, C classes, d1.. extra dims of per-position targets.
**   mse  l = (x - t)^2            l1  l = |x - t|
**   nll  l_i = -w[t_i] x[i, t_i]  (ignored targets weigh 0; the mean divides
**        by the summed weights)
**   cross_entropy: the fused op on [N*d, C] rows (class ids), or
**        l_i = -sum_c w_c t'_ic log_softmax(x)_ic with t' = (1-ls) t + ls/C
**        for class-probability targets (the mean divides by the positions)
**   bce  l = -w (t max(log x, -100) + (1 - t) max(log(1 - x), -100))
**   bce_with_logits  l = -w (pw t log s(x) + (1 - t) log s(-x)), s the
**        sigmoid, with [log s(x), log s(-x)] = log_softmax([x, 0]): stable for
**        any |x| and with the exact gradient s(x) - 1 at x = 0, where the
**        max(-x, 0) + log(1 + e^-|x|) form has a kink.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

_Static_assert((int)TD_REDUCE_NONE == (int)TD_REDUCTION_NONE && (int)TD_REDUCE_MEAN == (int)TD_REDUCTION_MEAN &&
                   (int)TD_REDUCE_SUM == (int)TD_REDUCTION_SUM,
               "td_reduction mirrors the op table's reduction codes");

static bool check_reduction(td_reduction r, const char *fn) {
    if ((unsigned)r <= TD_REDUCE_SUM) return true;
    TD_ERR(TD_ERR_MISUSE, "%s: reduction %d is not none (0), mean (1) or sum (2)", fn, (int)r);
    return false;
}

static td_tensor *reduce(td_tensor *l, td_reduction r) {
    if (r == TD_REDUCE_MEAN) return td_mean(l, 0, NULL, false);
    if (r == TD_REDUCE_SUM) return td_sum(l, 0, NULL, false);
    return l;
}

static bool check_same_shape(td_tensor *a, td_tensor *b, const char *fn, const char *an, const char *bn) {
    int na = td_ndim(a), nb = td_ndim(b);
    if (na < 0 || nb < 0) return false;
    if (na == nb && !memcmp(td_shape(a), td_shape(b), (size_t)na * sizeof(int64_t))) return true;
    char s1[96], s2[96];
    TD_ERR(TD_ERR_SHAPE, "%s: %s shape %s and %s shape %s differ", fn, an,
           td__shape_str(na, td_shape(a), s1, sizeof s1), bn, td__shape_str(nb, td_shape(b), s2, sizeof s2));
    return false;
}

static bool check_float_input(td_tensor *x, const char *fn, const char *arg) {
    if (td_dtype_is_float(td_tensor_dtype(x))) return true;
    TD_ERR(TD_ERR_DTYPE, "%s: %s must be floating, got %s", fn, arg, td_dtype_name(td_tensor_dtype(x)));
    return false;
}

/* Each class id of target must lie in [0, c) or equal ignore_index. Reads the
** ids on the host, so every backend reports a bad id the same way. */
/* Every class id is ignore_index or in [0, c). The CPU names the first bad
** one; a GPU checks on the device (device_check.c), without a host wait. */
static bool check_targets(td_tensor *target, int64_t c, int64_t ignore_index, const char *fn) {
    td_device dev = td_tensor_device(target);
    if (dev.type == TD_DEVICE_CPU) {
        int64_t n = td_numel(target);
        int64_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
        if (!ids) return TD_ERR(TD_ERR_OOM, "%s: out of host memory reading %lld targets", fn, (long long)n), false;
        bool ok = td_copy_to_host(target, ids, (size_t)n * sizeof *ids, TD_I64) == TD_OK;
        for (int64_t i = 0; ok && i < n; i++)
            if (ids[i] != ignore_index && (ids[i] < 0 || ids[i] >= c)) {
                TD_ERR(TD_ERR_INDEX,
                       "%s: target %lld at position %lld is out of range for %lld classes (valid: 0..%lld)", fn,
                       (long long)ids[i], (long long)i, (long long)c, (long long)(c - 1));
                ok = false;
            }
        free(ids);
        return ok;
    }
    td_tensor *t = td_cast(target, TD_I64);
    td_tensor *below = td_cast(td_lt(t, td_scalar(0, TD_I64, dev)), TD_U8);
    td_tensor *above = td_cast(td_ge(t, td_scalar((double)c, TD_I64, dev)), TD_U8);
    td_tensor *counted = td_cast(td_ne(t, td_scalar((double)ignore_index, TD_I64, dev)), TD_U8);
    td_tensor *bad = td_mul(td_maximum(below, above), counted); /* 1 where the id is wrong */
    return td__device_check(bad, TD_ERR_INDEX,
                            "%s: a target is out of range for %lld classes (valid: 0..%lld, or %lld)", fn, (long long)c,
                            (long long)(c - 1), (long long)ignore_index);
}

/* Bring x [N, C, d1..] (or [C]) and its class ids [N, d1..] (or []) to rows
** [M, C] and ids [M]; *out_nd/out_shape receive the per-position shape. */
static bool class_rows(td_tensor **x, td_tensor **target, const char *fn, int *out_nd, int64_t *out_shape) {
    int nd = td_ndim(*x), tn = td_ndim(*target);
    if (nd < 1) return TD_ERR(TD_ERR_SHAPE, "%s: input must have a class dim, got a 0-d tensor", fn), false;
    const int64_t *xs = td_shape(*x), *ts = td_shape(*target);
    /* the expected target shape: x's without the class dim (dim 1, or 0 for [C]) */
    int64_t want[TD_MAX_DIMS];
    int wn = 0, cdim = nd == 1 ? 0 : 1;
    for (int i = 0; i < nd; i++)
        if (i != cdim) want[wn++] = xs[i];
    if (tn != wn || memcmp(ts, want, (size_t)wn * sizeof(int64_t))) {
        char s1[96], s2[96], s3[96];
        TD_ERR(TD_ERR_SHAPE, "%s: input %s needs target shape %s, got %s", fn, td__shape_str(nd, xs, s1, sizeof s1),
               td__shape_str(wn, want, s2, sizeof s2), td__shape_str(tn, ts, s3, sizeof s3));
        return false;
    }
    *out_nd = wn;
    memcpy(out_shape, want, (size_t)wn * sizeof(int64_t));
    int64_t c = xs[cdim], rows[2] = {-1, c}, flat = -1;
    if (nd >= 3) { /* move classes last: [N, d1.., C] */
        int perm[TD_MAX_DIMS], k = 0;
        perm[k++] = 0;
        for (int i = 2; i < nd; i++) perm[k++] = i;
        perm[k++] = 1;
        *x = td_permute(*x, perm);
    }
    *x = td_reshape(*x, 2, rows);
    *target = td_reshape(*target, 1, &flat);
    return *x && *target;
}

static bool check_class_args(td_tensor *x, td_tensor *target, td_tensor *weight, td_reduction r, const char *fn) {
    if (!check_reduction(r, fn) || !check_float_input(x, fn, "input")) return false;
    td_dtype tt = td_tensor_dtype(target);
    if (td_dtype_is_float(tt) || tt == TD_BOOL)
        return TD_ERR(TD_ERR_DTYPE, "%s: target must hold integer class ids, got %s", fn, td_dtype_name(tt)), false;
    int64_t c = td_size(x, td_ndim(x) == 1 ? 0 : 1);
    if (weight && (td_ndim(weight) != 1 || td_size(weight, 0) != c)) {
        char s[96];
        TD_ERR(TD_ERR_SHAPE, "%s: weight must have shape [%lld] (one per class), got %s", fn, (long long)c,
               td__shape_str(td_ndim(weight), td_shape(weight), s, sizeof s));
        return false;
    }
    return true;
}

/* Cross entropy with class-probability targets of x's shape. */
static td_tensor *soft_cross_entropy(td_tensor *x, td_tensor *target, td_tensor *weight, double ls, td_reduction r) {
    const char *fn = "cross_entropy";
    if (td_ndim(x) != td_ndim(target) || memcmp(td_shape(x), td_shape(target), sizeof(int64_t) * (size_t)td_ndim(x))) {
        char a[96], b[96];
        TD_FAIL_NULL(TD_ERR_DTYPE,
                     "%s: target is %s %s: class ids must be integers, and class probabilities need the input's "
                     "shape %s",
                     fn, td_dtype_name(td_tensor_dtype(target)),
                     td__shape_str(td_ndim(target), td_shape(target), a, sizeof a),
                     td__shape_str(td_ndim(x), td_shape(x), b, sizeof b));
    }
    int nd = td_ndim(x), cdim = nd == 1 ? 0 : 1;
    int64_t c = td_size(x, cdim);
    td_tensor *logp = td__softmax_dim(x, cdim, true);
    if (ls > 0) target = td_add_scalar(td_mul_scalar(target, 1 - ls), ls / (double)c);
    td_tensor *prod = td_mul(logp, target);
    if (weight) {
        int64_t wshape[TD_MAX_DIMS];
        for (int i = 0; i < nd; i++) wshape[i] = i == cdim ? c : 1;
        prod = td_mul(prod, td_reshape(weight, nd, wshape));
    }
    return reduce(td_neg(td_sum(prod, 1, &cdim, false)), r); /* the mean is over positions */
}

td_tensor *td_cross_entropy_loss(td_tensor *logits, td_tensor *target, td_tensor *weight, int64_t ignore_index,
                                 double label_smoothing, td_reduction reduction) {
    const char *fn = "cross_entropy";
    TD_CHECK_ARG(logits, fn);
    TD_CHECK_ARG(target, fn);
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: label_smoothing %g is outside [0, 1]", fn, label_smoothing);
    td_scope_begin();
    td_tensor *out = NULL;
    if (td_dtype_is_float(td_tensor_dtype(target)) && check_reduction(reduction, fn)) {
        out = soft_cross_entropy(logits, target, weight, label_smoothing, reduction);
    } else if (check_class_args(logits, target, weight, reduction, fn)) {
        int pnd;
        int64_t pshape[TD_MAX_DIMS];
        td_tensor *x = logits, *t = target;
        if (class_rows(&x, &t, fn, &pnd, pshape) && check_targets(t, td_size(x, 1), ignore_index, fn)) {
            out = td__cross_entropy(x, td_cast(t, TD_I64), weight, ignore_index, label_smoothing, reduction);
            if (reduction == TD_REDUCE_NONE) out = td_reshape(out, pnd, pshape);
        }
    }
    return td__scope_end_keep(out);
}

td_tensor *td_nll_loss(td_tensor *log_probs, td_tensor *target, td_tensor *weight, int64_t ignore_index,
                       td_reduction reduction) {
    const char *fn = "nll_loss";
    TD_CHECK_ARG(log_probs, fn);
    TD_CHECK_ARG(target, fn);
    td_scope_begin();
    td_tensor *out = NULL;
    int pnd;
    int64_t pshape[TD_MAX_DIMS];
    td_tensor *x = log_probs, *t = target;
    if (check_class_args(log_probs, target, weight, reduction, fn) && class_rows(&x, &t, fn, &pnd, pshape) &&
        check_targets(t, td_size(x, 1), ignore_index, fn)) {
        td_device dev = td_tensor_device(x);
        t = td_cast(t, TD_I64);
        td_tensor *valid = td_ne(t, td_scalar((double)ignore_index, TD_I64, dev));
        td_tensor *safe = td_where(valid, t, td_scalar(0, TD_I64, dev)); /* ignored ids read class 0, weighed 0 */
        td_tensor *w = td_cast(valid, td_tensor_dtype(x));
        if (weight) w = td_mul(w, td_index_select(weight, 0, safe));
        td_tensor *picked = td_reshape(td_gather(x, 1, td_unsqueeze(safe, 1)), 1, (int64_t[]){-1});
        td_tensor *l = td_neg(td_mul(picked, w));
        if (reduction == TD_REDUCE_NONE)
            out = td_reshape(l, pnd, pshape);
        else if (reduction == TD_REDUCE_SUM)
            out = td_sum(l, 0, NULL, false);
        else
            out = td_div(td_sum(l, 0, NULL, false), td_sum(w, 0, NULL, false));
    }
    return td__scope_end_keep(out);
}

/* The checks of the elementwise losses: input and target alive, a known reduction, input floating (when
** float_input) and target of input's shape. */
static bool check_pointwise(td_tensor *input, td_tensor *target, td_reduction r, bool float_input, const char *fn) {
    return td__check_arg(input, fn, "input") && td__check_arg(target, fn, "target") && check_reduction(r, fn) &&
           (!float_input || check_float_input(input, fn, "input")) &&
           check_same_shape(input, target, fn, "input", "target");
}

td_tensor *td_mse_loss(td_tensor *input, td_tensor *target, td_reduction reduction) {
    if (!check_pointwise(input, target, reduction, false, "mse_loss")) return NULL;
    td_scope_begin();
    td_tensor *d = td_sub(input, target);
    return td__scope_end_keep(reduce(td_mul(d, d), reduction));
}

td_tensor *td_l1_loss(td_tensor *input, td_tensor *target, td_reduction reduction) {
    if (!check_pointwise(input, target, reduction, false, "l1_loss")) return NULL;
    td_scope_begin();
    return td__scope_end_keep(reduce(td_abs(td_sub(input, target)), reduction));
}

/* weight (optional) must broadcast to x's shape without growing it. */
static bool check_weight_broadcast(td_tensor *w, td_tensor *x, const char *fn, const char *arg) {
    if (!w) return true;
    int nd;
    int64_t shape[TD_MAX_DIMS];
    if (td_broadcast_shapes(td_ndim(w), td_shape(w), td_ndim(x), td_shape(x), &nd, shape) == TD_OK &&
        nd == td_ndim(x) && !memcmp(shape, td_shape(x), (size_t)nd * sizeof(int64_t)))
        return true;
    char s1[96], s2[96];
    TD_ERR(TD_ERR_SHAPE, "%s: %s of shape %s does not broadcast to the input shape %s", fn, arg,
           td__shape_str(td_ndim(w), td_shape(w), s1, sizeof s1),
           td__shape_str(td_ndim(x), td_shape(x), s2, sizeof s2));
    return false;
}

td_tensor *td_bce_loss(td_tensor *input, td_tensor *target, td_tensor *weight, td_reduction reduction) {
    const char *fn = "binary_cross_entropy";
    if (!check_pointwise(input, target, reduction, true, fn) || !check_weight_broadcast(weight, input, fn, "weight"))
        return NULL;
    td_scope_begin();
    td_tensor *out = NULL;
    td_device dev = td_tensor_device(input);
    td_dtype dt = td_tensor_dtype(input);
    td_tensor *inside = td_mul(td_cast(td_ge(input, td_scalar(0, dt, dev)), TD_U8),
                               td_cast(td_le(input, td_scalar(1, dt, dev)), TD_U8)); /* NaN is outside */
    if (td__device_check(td_eq(inside, td_scalar(0, TD_U8, dev)), TD_ERR_MISUSE,
                         "%s: input values must be probabilities in [0, 1]", fn)) {
        td_tensor *logx = td_clamp(td_log(input), -100, NAN);
        td_tensor *log1mx = td_clamp(td_log(td_add_scalar(td_neg(input), 1)), -100, NAN);
        td_tensor *l = td_neg(td_add(td_mul(target, logx), td_mul(td_add_scalar(td_neg(target), 1), log1mx)));
        if (weight) l = td_mul(l, weight);
        out = reduce(l, reduction);
    }
    return td__scope_end_keep(out);
}

td_tensor *td_bce_with_logits_loss(td_tensor *input, td_tensor *target, td_tensor *weight, td_tensor *pos_weight,
                                   td_reduction reduction) {
    const char *fn = "binary_cross_entropy_with_logits";
    if (!check_pointwise(input, target, reduction, true, fn) || !check_weight_broadcast(weight, input, fn, "weight") ||
        !check_weight_broadcast(pos_weight, input, fn, "pos_weight"))
        return NULL;
    td_scope_begin();
    int nd = td_ndim(input);
    td_tensor *pair[2] = {td_unsqueeze(input, nd), td_unsqueeze(td_zeros_like(input), nd)};
    td_tensor *ls = td_log_softmax(td_cat(2, pair, nd), -1); /* [..., 2]: log s(x), log s(-x) */
    td_tensor *pos = td_mul(target, td_select(ls, nd, 0));
    if (pos_weight) pos = td_mul(pos, pos_weight);
    td_tensor *neg = td_mul(td_add_scalar(td_neg(target), 1), td_select(ls, nd, 1));
    td_tensor *l = td_neg(td_add(pos, neg));
    if (weight) l = td_mul(l, weight);
    return td__scope_end_keep(reduce(l, reduction));
}
