/*
** More losses (torch.nn.functional), composed from ops so autograd derives
** them. d = |x - t| elementwise; c = min(d, beta) (the quadratic part):
**   smooth_l1  l = 0.5 c^2 / beta + (d - c)   (= 0.5 d^2 / beta below beta,
**              d - 0.5 beta above; beta 0 is l1)
**   huber      l = 0.5 c^2 + delta (d - c)      with c = min(d, delta)
**              (= beta * smooth_l1 with beta = delta)
**   kl_div     l = t (log t - x)  (0 where t = 0, as torch's xlogy), or
**              l = e^t (t - x) with log_target; batchmean = sum / size(0)
**   cosine_embedding, x1, x2 [N, D] (or [D]), y [N] (or []) of 1 or -1:
**              cos = sum(x1 x2) / sqrt((sum(x1^2) + 1e-12) (sum(x2^2) + 1e-12))
**              l = 1 - cos where y = 1, max(0, cos - margin) where y = -1,
**              0 for any other y (torch's where(y == 1 ...) + where(y == -1 ...))
** Reference: aten/src/ATen/native/Loss.cpp.
*/
#include <math.h>
#include <string.h>

#include "nn_internal.h"

static bool check_red(td_reduction r, bool batchmean, const char *fn) {
    if ((unsigned)r <= TD_REDUCE_SUM || (batchmean && r == TD_REDUCE_BATCHMEAN)) return true;
    TD_ERR(TD_ERR_MISUSE, "%s: reduction %d is not none (0), mean (1), sum (2)%s", fn, (int)r,
           batchmean ? " or batchmean (TD_REDUCE_BATCHMEAN)" : "");
    return false;
}

static td_tensor *reduce(td_tensor *l, td_reduction r, int64_t batch) {
    if (r == TD_REDUCE_MEAN) return td_mean(l, 0, NULL, false);
    if (r == TD_REDUCE_SUM) return td_sum(l, 0, NULL, false);
    if (r == TD_REDUCE_BATCHMEAN) return td_div_scalar(td_sum(l, 0, NULL, false), (double)batch);
    return l;
}

/* Both non-NULL, floating, one shape. */
static bool check_pair(td_tensor *a, td_tensor *b, const char *fn, const char *an, const char *bn) {
    if (!td__check_arg(a, fn, an) || !td__check_arg(b, fn, bn)) return false;
    td_dtype da = td_tensor_dtype(a), db = td_tensor_dtype(b);
    if (!td_dtype_is_float(da) || !td_dtype_is_float(db))
        return TD_ERR(TD_ERR_DTYPE, "%s: %s and %s must be floating, got %s and %s", fn, an, bn, td_dtype_name(da),
                      td_dtype_name(db)),
               false;
    int na = td_ndim(a), nb = td_ndim(b);
    if (na == nb && !memcmp(td_shape(a), td_shape(b), (size_t)na * sizeof(int64_t))) return true;
    char s1[96], s2[96];
    TD_ERR(TD_ERR_SHAPE, "%s: %s shape %s and %s shape %s differ", fn, an,
           td__shape_str(na, td_shape(a), s1, sizeof s1), bn, td__shape_str(nb, td_shape(b), s2, sizeof s2));
    return false;
}

/* 0.5 min(d, k)^2 / q + s (d - min(d, k)), d = |x - t|: smooth_l1 (k = beta, q = beta, s = 1), huber (k = delta,
** q = 1, s = delta) */
static td_tensor *quadratic_linear(td_tensor *x, td_tensor *t, double k, double q, double s) {
    td_tensor *d = td_abs(td_sub(x, t)), *c = td_clamp(d, 0, k);
    return td_add(td_mul_scalar(td_mul(c, c), 0.5 / q), td_mul_scalar(td_sub(d, c), s));
}

td_tensor *td_smooth_l1_loss(td_tensor *input, td_tensor *target, td_reduction reduction, double beta) {
    const char *fn = "smooth_l1_loss";
    if (!check_pair(input, target, fn, "input", "target") || !check_red(reduction, false, fn)) return NULL;
    if (!(beta >= 0) || isinf(beta)) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: beta %g must be finite and >= 0", fn, beta);
    if (beta == 0) return td_l1_loss(input, target, reduction);
    return reduce(quadratic_linear(input, target, beta, beta, 1), reduction, 0);
}

td_tensor *td_huber_loss(td_tensor *input, td_tensor *target, td_reduction reduction, double delta) {
    const char *fn = "huber_loss";
    if (!check_pair(input, target, fn, "input", "target") || !check_red(reduction, false, fn)) return NULL;
    if (!(delta > 0) || isinf(delta)) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: delta %g must be finite and > 0", fn, delta);
    return reduce(quadratic_linear(input, target, delta, 1, delta), reduction, 0);
}

td_tensor *td_kl_div_loss(td_tensor *input, td_tensor *target, td_reduction reduction, bool log_target) {
    const char *fn = "kl_div";
    if (!check_pair(input, target, fn, "input", "target") || !check_red(reduction, true, fn)) return NULL;
    td_tensor *l;
    if (log_target) {
        l = td_mul(td_exp(target), td_sub(target, input));
    } else { /* xlogy(t, t): log of 1 where t = 0, so 0 * log 1 = 0 there */
        td_tensor *zero = td_eq(target, td_zeros_like(target));
        td_tensor *safe = td_where(zero, td_full_like(target, 1), target);
        l = td_mul(target, td_sub(td_log(safe), input));
    }
    int64_t batch = td_ndim(input) > 0 ? td_size(input, 0) : 1;
    return reduce(l, reduction, batch);
}

td_tensor *td_cosine_embedding_loss(td_tensor *x1, td_tensor *x2, td_tensor *y, double margin, td_reduction reduction) {
    const char *fn = "cosine_embedding_loss";
    if (!check_pair(x1, x2, fn, "input1", "input2") || !td__check_arg(y, fn, "target") ||
        !check_red(reduction, false, fn))
        return NULL;
    int nd = td_ndim(x1);
    bool batched = nd == 2;
    if (nd != 1 && nd != 2) TD_FAIL_NULL(TD_ERR_SHAPE, "%s: inputs must be [N, D] or [D], got %d dims", fn, nd);
    if (td_ndim(y) != nd - 1 || (batched && td_size(y, 0) != td_size(x1, 0))) {
        char s1[96], s2[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: target shape %s does not fit inputs of shape %s (expected [N] or [])", fn,
                     td__shape_str(td_ndim(y), td_shape(y), s1, sizeof s1),
                     td__shape_str(nd, td_shape(x1), s2, sizeof s2));
    }
    int last = nd - 1;
    const double eps = 1e-12;
    td_tensor *prod = td_sum(td_mul(x1, x2), 1, &last, false);
    td_tensor *m1 = td_add_scalar(td_sum(td_mul(x1, x1), 1, &last, false), eps);
    td_tensor *m2 = td_add_scalar(td_sum(td_mul(x2, x2), 1, &last, false), eps);
    td_tensor *cos = td_div(prod, td_sqrt(td_mul(m1, m2)));
    td_tensor *yf = td_cast(y, td_tensor_dtype(cos)), *zeros = td_zeros_like(cos);
    td_tensor *pos = td_where(td_eq(yf, td_full_like(yf, 1)), td_sub(td_full_like(cos, 1), cos), zeros);
    td_tensor *neg =
        td_where(td_eq(yf, td_mul_scalar(td_full_like(yf, 1), -1)), td_relu(td_add_scalar(cos, -margin)), zeros);
    return reduce(td_add(pos, neg), reduction, 0);
}
