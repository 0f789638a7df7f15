/*
** Derivatives of the linear-algebra and nn ops: matmul, softmax,
** log_softmax, layer_norm, cross_entropy, conv2d, the pools and dropout, and
** of the fused backward ops their formulas call (recorded only under
** create_graph; their formulas give the second derivatives). Dimension
** letters: B batch dims, M/K/N matrix sizes, D the normalized (last) dim,
** N/C/H/W images, O output channels.
*/
#include "autograd_internal.h"

#define NEED(i) td__needs(n, i)
#define IN(i)   td__saved_input(n, i)
#define OUT(j)  td__saved_output(n, j)

/* y[B,M,N] = a[B,M,K] @ b[B,K,N]: da = dy @ b^T, db = a^T @ dy
** (batch dims that a or b broadcast are summed down by the engine) */
static td_status bw_matmul(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    if (NEED(0)) gx[0] = td_matmul(gy[0], td_transpose(IN(1), -1, -2));
    if (NEED(1)) gx[1] = td_matmul(td_transpose(IN(0), -1, -2), gy[0]);
    return td__done(n, gx);
}

/* y = softmax(x) over the last dim: dx = y (dy - sum_last(dy y)) */
static td_status bw_softmax(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *y = OUT(0);
    int last = -1;
    gx[0] = td_mul(y, td_sub(gy[0], td_sum(td_mul(gy[0], y), 1, &last, true)));
    return td__done(n, gx);
}

/* y = log_softmax(x) over the last dim: dx = dy - e^y sum_last(dy) */
static td_status bw_log_softmax(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    int last = -1;
    gx[0] = td_sub(gy[0], td_mul(td_exp(OUT(0)), td_sum(gy[0], 1, &last, true)));
    return td__done(n, gx);
}

/* (y, mean, rstd) = layer_norm(x, w?, b?) over the trailing dims that w spans;
** with x viewed as [R, D] (R rows of D normalized elements):
**   xhat = (x - mean) rstd,  y = xhat w + b
**   dw = sum_R(dy xhat), db = sum_R(dy)
**   g = dy w;  dx = rstd (g - mean_D(g) - xhat mean_D(g xhat))
** Under create_graph, mean and rstd are recomputed from x with ops, so the
** second derivative sees their dependence on x. */
static td_status bw_layer_norm(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    if (!gy[0]) return TD_OK; /* only mean/rstd received gradients: they are not differentiable */
    const td__tmeta *mx = &n->in_meta[0];
    int64_t R = td__numel(n->out_meta[1].ndim, n->out_meta[1].shape), D = R ? td__numel(mx->ndim, mx->shape) / R : 0;
    int64_t rd[2] = {R, D}, r1[2] = {R, 1};
    int last = -1, rows = 0;
    td_tensor *x = td_reshape(IN(0), 2, rd), *dy = td_reshape(gy[0], 2, rd), *mean, *rstd;
    if (td_grad_enabled()) {
        mean = td_mean(x, 1, &last, true);
        rstd = td_rsqrt(td_add_scalar(td_var(x, 1, &last, 0, true), n->p.norm.eps));
    } else {
        mean = td_reshape(OUT(1), 2, r1);
        rstd = td_reshape(OUT(2), 2, r1);
    }
    td_tensor *xhat = td_mul(td_sub(x, mean), rstd);
    td_tensor *g = n->in_meta[1].present ? td_mul(dy, td_reshape(IN(1), 1, &D)) : dy;
    if (NEED(0)) {
        td_tensor *t1 = td_mean(g, 1, &last, true);
        td_tensor *t2 = td_mul(xhat, td_mean(td_mul(g, xhat), 1, &last, true));
        gx[0] = td_reshape(td_mul(rstd, td_sub(td_sub(g, t1), t2)), mx->ndim, mx->shape);
    }
    if (NEED(1)) gx[1] = td_reshape(td_sum(td_mul(dy, xhat), 1, &rows, false), n->in_meta[1].ndim, n->in_meta[1].shape);
    if (NEED(2)) gx[2] = td_reshape(td_sum(dy, 1, &rows, false), n->in_meta[2].ndim, n->in_meta[2].shape);
    return td__done(n, gx);
}

/* loss = cross_entropy(logits[N,C], target[N], w[C]?): dlogits by the fused
** CROSS_ENTROPY_BACKWARD op (softmax minus the smoothed one-hot, weighted) */
static td_status bw_cross_entropy(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td__cross_entropy_backward(gy[0], IN(0), IN(1), n->saved_in[2], n->p.xent.ignore_index,
                                       n->p.xent.label_smoothing, n->p.xent.reduction);
    return td__done(n, gx);
}

/* z[N,C] = cross_entropy_backward(dl, x[N,C], t[N], w[C]?) (logits [C] with a
** 0-d target are one row), with p = softmax(x), e = label_smoothing,
** W = sum_c w[c] and wt = w[t] (1 without weights; rows with t == ignore_index
** are 0):
**   z[n,c] = g[n] (p[n,c] a[n] - b[n,c]),  a[n] = (1-e) wt + e/C W,  b = (1-e) wt [c == t] + e/C w[c]
**   g[n] = dl[n] (none), dl (sum), dl / sum_n wt (mean)
** d dl = sum_c dz z / dl: the fused op with dl = 1, times dz, summed (over c for none)
** dx = g a p (dz - sum_c(dz p))   (softmax's backward of dz, scaled per row)
** a and the mean's divisor come from ops on t and w, as the kernels compute them. */
static td_status bw_cross_entropy_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const td__tmeta *ml = &n->in_meta[0], *mx = &n->in_meta[1];
    td_tensor *dl = IN(0), *x = IN(1), *t = IN(2), *w = n->saved_in[3], *dz = gy[0];
    int64_t ig = n->p.xent.ignore_index, C = mx->shape[mx->ndim - 1], N = td__numel(mx->ndim, mx->shape) / C, one = 1;
    int red = n->p.xent.reduction, last = -1;
    double e = n->p.xent.label_smoothing;
    if (NEED(0)) {
        td_tensor *z1 =
            td__cross_entropy_backward(td_ones(ml->ndim, ml->shape, ml->dtype, ml->device), x, t, w, ig, e, red);
        td_tensor *prod = td_mul(dz, z1);
        gx[0] = td_reshape(red == TD_REDUCTION_NONE ? td_sum(prod, 1, &last, false) : td_sum(prod, 0, NULL, false),
                           ml->ndim, ml->shape);
    }
    if (NEED(1)) {
        int64_t nc[2] = {N, C}, n1[2] = {N, 1};
        td_tensor *valid = td_ne(t, td_scalar((double)ig, TD_I64, mx->device)), *wt, *W;
        if (w) {
            td_tensor *safe_t = td_where(valid, t, td_scalar(0, TD_I64, mx->device)); /* ignore_index may be < 0 */
            wt = td_gather(w, 0, td_reshape(safe_t, 1, &N));
            W = td_sum(w, 0, NULL, false);
        } else {
            wt = td_scalar(1, mx->dtype, mx->device);
            W = td_scalar((double)C, mx->dtype, mx->device);
        }
        wt = td_mul(td_reshape(td__mask_as(valid, x), 1, &N), wt);
        td_tensor *a = td_add(td_mul_scalar(wt, 1 - e), td_mul_scalar(W, e / (double)C));
        td_tensor *g = td_reshape(dl, 1, red == TD_REDUCTION_NONE ? &N : &one);
        if (red == TD_REDUCTION_MEAN) g = td_div(g, td_sum(wt, 0, NULL, false));
        td_tensor *p = td_softmax(td_reshape(x, 2, nc), -1), *dz2 = td_reshape(dz, 2, nc);
        td_tensor *ds = td_mul(p, td_sub(dz2, td_sum(td_mul(dz2, p), 1, &last, true)));
        gx[1] = td_reshape(td_mul(td_reshape(td_mul(g, a), 2, n1), ds), mx->ndim, mx->shape);
    }
    return td__done(n, gx);
}

/* y[N,O,Ho,Wo] = conv2d(x[N,C,H,W], w[O,C/g,kh,kw], b[O]?):
** dx and dw by the fused backward ops, db = sum over N, Ho, Wo of dy */
static td_status bw_conv2d(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int *s = n->p.conv.stride, *pad = n->p.conv.padding, *dil = n->p.conv.dilation;
    if (NEED(0)) gx[0] = td__conv2d_backward_input(gy[0], IN(1), n->in_meta[0].shape, s, pad, dil, n->p.conv.groups);
    if (NEED(1)) gx[1] = td__conv2d_backward_weight(gy[0], IN(0), n->in_meta[1].shape, s, pad, dil, n->p.conv.groups);
    if (NEED(2)) {
        int dims[3] = {0, 2, 3};
        gx[2] = td_sum(gy[0], 3, dims, false);
    }
    return td__done(n, gx);
}

/* The conv backward ops are bilinear, adjoints of conv2d (same stride,
** padding, dilation, groups) in one argument:
**   dx = conv2d_backward_input(dy, w):   <dz, dx> = <conv2d(dz, w), dy>
**     d dy = conv2d(dz, w),  dw = conv2d_backward_weight(dy, dz)
**   dw = conv2d_backward_weight(dy, x):  <dz, dw> = <conv2d(x, dz), dy>
**     d dy = conv2d(x, dz),  dx = conv2d_backward_input(dy, dz) */
static td_status bw_conv2d_backward_input(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int *s = n->p.conv.stride, *pad = n->p.conv.padding, *dil = n->p.conv.dilation;
    int groups = n->p.conv.groups;
    if (NEED(0)) gx[0] = td_conv2d(gy[0], IN(1), NULL, s, pad, dil, groups);
    if (NEED(1)) gx[1] = td__conv2d_backward_weight(IN(0), gy[0], n->in_meta[1].shape, s, pad, dil, groups);
    return td__done(n, gx);
}

static td_status bw_conv2d_backward_weight(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int *s = n->p.conv.stride, *pad = n->p.conv.padding, *dil = n->p.conv.dilation;
    int groups = n->p.conv.groups;
    if (NEED(0)) gx[0] = td_conv2d(IN(1), gy[0], NULL, s, pad, dil, groups);
    if (NEED(1)) gx[1] = td__conv2d_backward_input(IN(0), gy[0], n->in_meta[1].shape, s, pad, dil, groups);
    return td__done(n, gx);
}

/* (y, idx) = max_pool2d(x): dx[idx] += dy (fused MAX_POOL2D_BACKWARD) */
static td_status bw_max_pool2d(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    if (!gy[0]) return TD_OK;
    gx[0] = td__max_pool2d_backward(gy[0], OUT(1), n->in_meta[0].shape);
    return td__done(n, gx);
}

/* y = avg_pool2d(x): dx spreads each dy over its window (fused AVG_POOL2D_BACKWARD) */
static td_status bw_avg_pool2d(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int *k = n->p.pool.kernel, *s = n->p.pool.stride, *pad = n->p.pool.padding;
    gx[0] = td__avg_pool2d_backward(gy[0], n->in_meta[0].shape, k, s, pad, n->p.pool.count_include_pad);
    return td__done(n, gx);
}

/* dx[N,C,H,W] = max_pool2d_backward(dy[N,C,Ho,Wo], idx), a scatter-add of dy
** into the planes at idx (argmax in H*W): d dy = dz gathered at idx */
static td_status bw_max_pool2d_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int64_t *xs = n->out_meta[0].shape, *ys = n->in_meta[0].shape;
    int64_t planes[3] = {xs[0], xs[1], xs[2] * xs[3]}, at[3] = {ys[0], ys[1], ys[2] * ys[3]};
    td_tensor *g = td_gather(td_reshape(gy[0], 3, planes), 2, td_reshape(IN(1), 3, at));
    gx[0] = td_reshape(g, 4, ys);
    return td__done(n, gx);
}

/* dx = avg_pool2d_backward(dy) = A^T dy, where avg_pool2d is y = A x: d dy = A dz
** = avg_pool2d(dz) with the same parameters */
static td_status bw_avg_pool2d_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_avg_pool2d(gy[0], n->p.pool.kernel, n->p.pool.stride, n->p.pool.padding, n->p.pool.count_include_pad);
    return td__done(n, gx);
}

/* y = x keep / (1 - p): dx = dy keep / (1 - p), the same mask from the same
** Philox (seed, offset) */
static td_status bw_dropout(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_dropout(gy[0], n->p.rng.p, n->p.rng.seed, n->p.rng.offset);
    return td__done(n, gx);
}

void td__formulas_nn(td__formula *t) {
    t[TD_OP_MATMUL] = (td__formula){bw_matmul, 3, 0, 0};
    t[TD_OP_SOFTMAX] = (td__formula){bw_softmax, 0, 1, 0};
    t[TD_OP_LOG_SOFTMAX] = (td__formula){bw_log_softmax, 0, 1, 0};
    t[TD_OP_LAYER_NORM] = (td__formula){bw_layer_norm, 3, 6, 1};
    t[TD_OP_CROSS_ENTROPY] = (td__formula){bw_cross_entropy, 7, 0, 0};
    t[TD_OP_CONV2D] = (td__formula){bw_conv2d, 3, 0, 0};
    t[TD_OP_MAX_POOL2D] = (td__formula){bw_max_pool2d, 0, 2, 1};
    t[TD_OP_AVG_POOL2D] = (td__formula){bw_avg_pool2d, 0, 0, 0};
    t[TD_OP_DROPOUT] = (td__formula){bw_dropout, 0, 0, 0};
    t[TD_OP_CROSS_ENTROPY_BACKWARD] = (td__formula){bw_cross_entropy_backward, 15, 0, 0};
    t[TD_OP_CONV2D_BACKWARD_INPUT] = (td__formula){bw_conv2d_backward_input, 3, 0, 0};
    t[TD_OP_CONV2D_BACKWARD_WEIGHT] = (td__formula){bw_conv2d_backward_weight, 3, 0, 0};
    t[TD_OP_MAX_POOL2D_BACKWARD] = (td__formula){bw_max_pool2d_backward, 2, 0, 0};
    t[TD_OP_AVG_POOL2D_BACKWARD] = (td__formula){bw_avg_pool2d_backward, 0, 0, 0};
}
