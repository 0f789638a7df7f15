/*
** Derivatives of the elementwise ops: copy/cast, binary arithmetic, where and
** the unary functions. y is the output, dy its gradient; a, b the inputs of a
** binary op, x of a unary one. Broadcasting is undone by the engine (it sums
** each gx down to its input's shape), and so is dtype promotion.
*/
#include "autograd_internal.h"

#define NEED(i) td__needs(n, i)
#define IN(i)   td__saved_input(n, i)
#define OUT(j)  td__saved_output(n, j)
#define K(v)    td__scalar_like(gy[0], (v))

/* y = cast(x) or x moved to another device (td_to): dx = dy moved back */
td_status td__bw_copy(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_to(gy[0], n->in_meta[0].device);
    return td__done(n, gx);
}

/* y = a + b: da = dy, db = dy */
td_status td__bw_add(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = gy[0];
    gx[1] = gy[0];
    return td__done(n, gx);
}

/* y = a - b: da = dy, db = -dy */
td_status td__bw_sub(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = gy[0];
    if (NEED(1)) gx[1] = td_neg(gy[0]);
    return td__done(n, gx);
}

/* y = a * b: da = dy * b, db = dy * a */
td_status td__bw_mul(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    if (NEED(0)) gx[0] = td_mul(gy[0], IN(1));
    if (NEED(1)) gx[1] = td_mul(gy[0], IN(0));
    return td__done(n, gx);
}

/* y = a / b: da = dy / b, db = -dy * a / b^2 */
td_status td__bw_div(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *b = IN(1);
    if (NEED(0)) gx[0] = td_div(gy[0], b);
    if (NEED(1)) gx[1] = td_neg(td_div(td_mul(gy[0], IN(0)), td_mul(b, b)));
    return td__done(n, gx);
}

/* y = a ^ b: da = dy * b * a^(b-1)  (0 where b == 0, as PyTorch)
**            db = dy * y * ln(a)     (0 where a == 0 and b >= 0, as PyTorch) */
td_status td__bw_pow(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *a = IN(0), *b = IN(1), *zero = K(0);
    if (NEED(0)) {
        td_tensor *d = td_mul(td_mul(gy[0], b), td_pow(a, td_sub_scalar(b, 1)));
        gx[0] = td_where(td_eq(b, zero), zero, d);
    }
    if (NEED(1)) {
        td_tensor *d = td_mul(td_mul(gy[0], OUT(0)), td_log(a));
        gx[1] = td_where(td_eq(a, zero), td_where(td_ge(b, zero), zero, d), d);
    }
    return td__done(n, gx);
}

/* y = max(a, b): dy goes to the larger input, split evenly on ties (PyTorch) */
static td_status bw_extremum(td_node *n, td_tensor *const *gy, td_tensor **gx, bool is_max) {
    td_tensor *a = IN(0), *b = IN(1), *dy = gy[0];
    td_tensor *half_tie = td_mul_scalar(td__mask_as(td_eq(a, b), dy), 0.5);
    td_tensor *a_wins = td__mask_as(is_max ? td_gt(a, b) : td_lt(a, b), dy);
    td_tensor *b_wins = td__mask_as(is_max ? td_lt(a, b) : td_gt(a, b), dy);
    if (NEED(0)) gx[0] = td_mul(dy, td_add(a_wins, half_tie));
    if (NEED(1)) gx[1] = td_mul(dy, td_add(b_wins, half_tie));
    return td__done(n, gx);
}
td_status td__bw_maximum(td_node *n, td_tensor *const *gy, td_tensor **gx) { return bw_extremum(n, gy, gx, true); }
td_status td__bw_minimum(td_node *n, td_tensor *const *gy, td_tensor **gx) { return bw_extremum(n, gy, gx, false); }

/* y = cond ? a : b: da = cond ? dy : 0, db = cond ? 0 : dy */
td_status td__bw_where(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *cond = IN(0), *zero = K(0);
    if (NEED(1)) gx[1] = td_where(cond, gy[0], zero);
    if (NEED(2)) gx[2] = td_where(cond, zero, gy[0]);
    return td__done(n, gx);
}

/* y = -x: dx = -dy */
td_status td__bw_neg(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_neg(gy[0]);
    return td__done(n, gx);
}

/* y = |x|: dx = dy * sign(x), sign(0) = 0 */
td_status td__bw_abs(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *x = IN(0), *zero = K(0);
    td_tensor *sign = td_sub(td__mask_as(td_gt(x, zero), gy[0]), td__mask_as(td_lt(x, zero), gy[0]));
    gx[0] = td_mul(gy[0], sign);
    return td__done(n, gx);
}

/* y = e^x: dx = dy * y */
td_status td__bw_exp(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_mul(gy[0], OUT(0));
    return td__done(n, gx);
}

/* y = ln x: dx = dy / x */
td_status td__bw_log(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_div(gy[0], IN(0));
    return td__done(n, gx);
}

/* y = sqrt x: dx = dy / (2 y) */
td_status td__bw_sqrt(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_div(gy[0], td_mul_scalar(OUT(0), 2));
    return td__done(n, gx);
}

/* y = x^-1/2: dx = dy * (-1/2) x^-3/2 = -dy * y^3 / 2 */
td_status td__bw_rsqrt(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_mul(gy[0], td_mul_scalar(td_pow_scalar(OUT(0), 3), -0.5));
    return td__done(n, gx);
}

/* y = sin x: dx = dy cos x */
td_status td__bw_sin(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_mul(gy[0], td_cos(IN(0)));
    return td__done(n, gx);
}

/* y = cos x: dx = -dy sin x */
td_status td__bw_cos(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_neg(td_mul(gy[0], td_sin(IN(0))));
    return td__done(n, gx);
}

/* y = tanh x: dx = dy (1 - y^2) */
td_status td__bw_tanh(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *y = OUT(0);
    gx[0] = td_mul(gy[0], td_sub(K(1), td_mul(y, y)));
    return td__done(n, gx);
}

/* y = 1/(1+e^-x): dx = dy y (1 - y) */
td_status td__bw_sigmoid(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *y = OUT(0);
    gx[0] = td_mul(td_mul(gy[0], y), td_sub(K(1), y));
    return td__done(n, gx);
}

/* y = max(x, 0): dx = y > 0 ? dy : 0 */
td_status td__bw_relu(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *zero = K(0);
    gx[0] = td_where(td_gt(OUT(0), zero), gy[0], zero);
    return td__done(n, gx);
}

/* y = gelu(x): dx = dy gelu'(x), by the fused GELU_BACKWARD op */
td_status td__bw_gelu(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td__gelu_backward(gy[0], IN(0), n->p.gelu.approximate == TD_GELU_TANH);
    return td__done(n, gx);
}

/* z = gelu_backward(dy, x) = dy g'(x), g = gelu (the node create_graph records
** for td__bw_gelu; differentiating it gives gelu's second derivative):
**   d dy = dz g'(x)  (gelu_backward again),  dx = dz dy g''(x), where
**   erf form:  g'(x) = Phi(x) + x phi(x), phi(x) = e^(-x^2/2)/sqrt(2pi)
**              g''(x) = 2 phi(x) + x phi'(x) = phi(x) (2 - x^2)
**   tanh form: g(x) = x (1+t)/2, t = tanh(u), u = k (x + c x^3), u' = k (1 + 3c x^2), u'' = 6kc x
**              g'(x) = (1+t)/2 + x/2 (1-t^2) u'
**              g''(x) = (1-t^2) (u' - x t u'^2 + x u''/2)   (as (1-t^2)' = -2t (1-t^2) u')
** g'' is written with ops, so a third derivative flows through it. */
td_status td__bw_gelu_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *x = IN(1), *x2, *g2;
    bool tanh_form = n->p.gelu.approximate == TD_GELU_TANH;
    if (NEED(0)) gx[0] = td__gelu_backward(gy[0], x, tanh_form);
    if (!NEED(1)) return td__done(n, gx);
    x2 = td_mul(x, x);
    if (tanh_form) {
        const double k = 0.7978845608028654, c = 0.044715; /* sqrt(2/pi), as the kernels */
        td_tensor *t = td_tanh(td_mul_scalar(td_add(x, td_mul_scalar(td_mul(x, x2), c)), k));
        td_tensor *u1 = td_mul_scalar(td_add_scalar(td_mul_scalar(x2, 3 * c), 1), k);
        td_tensor *u2 = td_mul_scalar(x, 6 * k * c);
        td_tensor *inner = td_add(td_sub(u1, td_mul(td_mul(x, t), td_mul(u1, u1))), td_mul_scalar(td_mul(x, u2), 0.5));
        g2 = td_mul(td_sub(K(1), td_mul(t, t)), inner);
    } else {
        td_tensor *phi = td_mul_scalar(td_exp(td_mul_scalar(x2, -0.5)), 0.3989422804014327); /* 1/sqrt(2pi) */
        g2 = td_mul(phi, td_sub(K(2), x2));
    }
    gx[1] = td_mul(td_mul(gy[0], IN(0)), g2);
    return td__done(n, gx);
}

/* y = x s, s = sigmoid(x): dx = dy s (1 + x (1 - s)) */
td_status td__bw_silu(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *x = IN(0), *s = td_sigmoid(x);
    gx[0] = td_mul(td_mul(gy[0], s), td_add(K(1), td_mul(x, td_sub(K(1), s))));
    return td__done(n, gx);
}

/* y = min(max(x, lo), hi): dx = dy where lo <= x <= hi, else 0 (PyTorch) */
td_status td__bw_clamp(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *x = IN(0), *keep = K(1);
    if (n->p.clamp.has_lo) keep = td_mul(keep, td__mask_as(td_ge(x, K(n->p.clamp.lo)), gy[0]));
    if (n->p.clamp.has_hi) keep = td_mul(keep, td__mask_as(td_le(x, K(n->p.clamp.hi)), gy[0]));
    gx[0] = td_mul(gy[0], keep);
    return td__done(n, gx);
}
