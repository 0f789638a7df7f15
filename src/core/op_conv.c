/*
** Front-ends of the image ops: conv2d, max_pool2d, avg_pool2d, and the
** backward front-ends autograd calls (conv2d input/weight, both pools).
** Shapes are NCHW; operands are made contiguous (TD_LAYOUT_CONTIG).
** NULL parameter arrays take PyTorch's defaults: conv stride 1, padding 0,
** dilation 1; pool stride = kernel, padding 0.
*/
#include <string.h>

#include "internal.h"

/* Validate conv2d's geometry: x [N,C,H,W] and w [O,C/groups,kh,kw] shapes,
** parameters (NULL -> defaults), and compute p and the output shape y. */
static bool conv_geometry(const char *op, const int64_t *x, const int64_t *w, const int stride[2], const int padding[2],
                          const int dilation[2], int groups, td_op_params *p, int64_t y[4]) {
    char a[96], b[96];
    if (groups < 1) return TD_ERR(TD_ERR_MISUSE, "%s: groups must be >= 1, got %d", op, groups), false;
    for (int i = 0; i < 2; i++) {
        p->conv.stride[i] = stride ? stride[i] : 1;
        p->conv.padding[i] = padding ? padding[i] : 0;
        p->conv.dilation[i] = dilation ? dilation[i] : 1;
        if (p->conv.stride[i] < 1 || p->conv.dilation[i] < 1 || p->conv.padding[i] < 0)
            return TD_ERR(TD_ERR_MISUSE, "%s: need stride >= 1, dilation >= 1 and padding >= 0 (got %d, %d, %d)", op,
                          p->conv.stride[i], p->conv.dilation[i], p->conv.padding[i]),
                   false;
    }
    p->conv.groups = groups;
    td__shape_str(4, x, a, sizeof a);
    td__shape_str(4, w, b, sizeof b);
    if (x[1] % groups || w[0] % groups)
        return TD_ERR(TD_ERR_SHAPE, "%s: input channels %lld and output channels %lld must be divisible by groups %d",
                      op, (long long)x[1], (long long)w[0], groups),
               false;
    if (w[1] * groups != x[1] || w[0] < 1 || w[2] < 1 || w[3] < 1)
        return TD_ERR(TD_ERR_SHAPE,
                      "%s: weight %s does not fit input %s with groups %d (expects weight [O, %lld, kh, kw])", op, b, a,
                      groups, (long long)(x[1] / groups)),
               false;
    int64_t eh = (int64_t)p->conv.dilation[0] * (w[2] - 1) + 1, ew = (int64_t)p->conv.dilation[1] * (w[3] - 1) + 1;
    int64_t ih = x[2] + 2 * p->conv.padding[0], iw = x[3] + 2 * p->conv.padding[1];
    if (eh > ih || ew > iw)
        return TD_ERR(TD_ERR_SHAPE,
                      "%s: kernel %lldx%lld (dilated %lldx%lld) is larger than the padded input %lldx%lld", op,
                      (long long)w[2], (long long)w[3], (long long)eh, (long long)ew, (long long)ih, (long long)iw),
               false;
    y[0] = x[0], y[1] = w[0], y[2] = (ih - eh) / p->conv.stride[0] + 1, y[3] = (iw - ew) / p->conv.stride[1] + 1;
    return true;
}

static bool check_4d(const td_tensor *t, const char *op, const char *what) {
    if (t->ndim == 4) return true;
    char s[96];
    TD_ERR(TD_ERR_SHAPE, "%s: %s must be 4-d, got %s", op, what, td__shape_str(t->ndim, t->shape, s, sizeof s));
    return false;
}

static bool check_dtypes(const char *op, const td_tensor *a, const td_tensor *b) {
    if (!td_dtype_is_float(a->dtype))
        return TD_ERR(TD_ERR_DTYPE, "%s: expected a floating-point tensor, got %s", op, td_dtype_name(a->dtype)), false;
    if (b && b->dtype != a->dtype)
        return TD_ERR(TD_ERR_DTYPE, "%s: dtypes %s and %s differ", op, td_dtype_name(a->dtype),
                      td_dtype_name(b->dtype)),
               false;
    return true;
}

static bool same_shape(const char *op, const char *what, const td_tensor *t, const int64_t *want) {
    if (t->ndim == 4 && !memcmp(t->shape, want, 4 * sizeof(int64_t))) return true;
    char a[96], b[96];
    TD_ERR(TD_ERR_SHAPE, "%s: %s has shape %s, expected %s", op, what, td__shape_str(t->ndim, t->shape, a, sizeof a),
           td__shape_str(4, want, b, sizeof b));
    return false;
}

static td_tensor *conv2d(td_tensor *x, td_tensor *w, td_tensor *b, const int stride[2], const int padding[2],
                         const int dilation[2], int groups) {
    TD_CHECK_ARG(x, "conv2d");
    TD_CHECK_ARG(w, "conv2d");
    if (!check_4d(x, "conv2d", "input") || !check_4d(w, "conv2d", "weight") || !check_dtypes("conv2d", x, w))
        return NULL;
    if (b) {
        if (!td__check_arg(b, "conv2d", "b") || !check_dtypes("conv2d", x, b)) return NULL;
        if (b->ndim != 1 || b->shape[0] != w->shape[0]) {
            char s[96];
            TD_FAIL_NULL(TD_ERR_SHAPE, "conv2d: bias must be [%lld], got %s", (long long)w->shape[0],
                         td__shape_str(b->ndim, b->shape, s, sizeof s));
        }
    }
    td_op_params p = {0};
    int64_t y[4];
    if (!conv_geometry("conv2d", x->shape, w->shape, stride, padding, dilation, groups, &p, y)) return NULL;
    td_tensor *in[3] = {x, w, b}, *out = td__alloc(4, y, x->dtype, x->storage->device);
    return td__finish(td__dispatch_contig(TD_OP_CONV2D, 3, in, 1, &out, &p), out);
}

td_tensor *td_conv2d(td_tensor *x, td_tensor *w, td_tensor *b, const int stride[2], const int padding[2],
                     const int dilation[2], int groups) {
    td_tensor *in[3] = {x, w, b}, *held[3]; /* autocast: low */
    td_tensor *y =
        td__autocast(TD_OP_CONV2D, 3, in, held) ? conv2d(in[0], in[1], in[2], stride, padding, dilation, groups) : NULL;
    td__autocast_release(3, held);
    return y;
}

/* conv2d's gradient for its input (kind CONV2D_BACKWARD_INPUT: t is the weight, shape the input's) or for its
** weight (CONV2D_BACKWARD_WEIGHT: t is the input, shape the weight's) */
static td_tensor *conv2d_backward(td_op_kind kind, td_tensor *dy, td_tensor *t, const int64_t shape[4],
                                  const int stride[2], const int padding[2], const int dilation[2], int groups) {
    bool for_x = kind == TD_OP_CONV2D_BACKWARD_INPUT;
    const char *op = for_x ? "conv2d_backward_input" : "conv2d_backward_weight";
    if (!td__check_arg(dy, op, "dy") || !td__check_arg(t, op, for_x ? "w" : "x")) return NULL;
    if (!shape) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: %s is NULL", op, for_x ? "x_shape" : "w_shape");
    if (!check_4d(t, op, for_x ? "weight" : "input") || !check_dtypes(op, dy, t)) return NULL;
    td_op_params p = {0};
    int64_t y[4];
    if (!conv_geometry(op, for_x ? shape : t->shape, for_x ? t->shape : shape, stride, padding, dilation, groups, &p,
                       y) ||
        !same_shape(op, "dy", dy, y))
        return NULL;
    td_tensor *in[2] = {dy, t}, *out = td__alloc(4, shape, dy->dtype, dy->storage->device);
    return td__finish(td__dispatch_contig(kind, 2, in, 1, &out, &p), out);
}

td_tensor *td__conv2d_backward_input(td_tensor *dy, td_tensor *w, const int64_t x_shape[4], const int stride[2],
                                     const int padding[2], const int dilation[2], int groups) {
    return conv2d_backward(TD_OP_CONV2D_BACKWARD_INPUT, dy, w, x_shape, stride, padding, dilation, groups);
}

td_tensor *td__conv2d_backward_weight(td_tensor *dy, td_tensor *x, const int64_t w_shape[4], const int stride[2],
                                      const int padding[2], const int dilation[2], int groups) {
    return conv2d_backward(TD_OP_CONV2D_BACKWARD_WEIGHT, dy, x, w_shape, stride, padding, dilation, groups);
}

/* Validate pooling parameters (NULL stride -> kernel, NULL padding -> 0) for
** input shape x, and compute p and the output shape y. */
static bool pool_geometry(const char *op, const int64_t *x, const int kernel[2], const int stride[2],
                          const int padding[2], bool count_include_pad, td_op_params *p, int64_t y[4]) {
    if (!kernel) return TD_ERR(TD_ERR_MISUSE, "%s: kernel is NULL", op), false;
    for (int i = 0; i < 2; i++) {
        int k = kernel[i], s = stride ? stride[i] : k, pad = padding ? padding[i] : 0;
        if (k < 1 || s < 1 || pad < 0)
            return TD_ERR(TD_ERR_MISUSE, "%s: need kernel >= 1, stride >= 1 and padding >= 0 (got %d, %d, %d)", op, k,
                          s, pad),
                   false;
        if (pad > k / 2)
            return TD_ERR(TD_ERR_MISUSE, "%s: padding %d should be at most half of the kernel size %d", op, pad, k),
                   false;
        int64_t in = x[2 + i] + 2 * pad;
        if (in < k)
            return TD_ERR(TD_ERR_SHAPE, "%s: kernel %dx%d is larger than the padded input %lldx%lld", op, kernel[0],
                          kernel[1], (long long)(x[2] + 2 * (padding ? padding[0] : 0)),
                          (long long)(x[3] + 2 * (padding ? padding[1] : 0))),
                   false;
        p->pool.kernel[i] = k, p->pool.stride[i] = s, p->pool.padding[i] = pad;
        y[2 + i] = (in - k) / s + 1;
    }
    p->pool.count_include_pad = count_include_pad;
    y[0] = x[0], y[1] = x[1];
    return true;
}

td_tensor *td_max_pool2d(td_tensor *x, const int kernel[2], const int stride[2], const int padding[2],
                         td_tensor **indices) {
    if (indices) *indices = NULL;
    TD_CHECK_ARG(x, "max_pool2d");
    if (!check_4d(x, "max_pool2d", "input") || !check_dtypes("max_pool2d", x, NULL)) return NULL;
    td_op_params p = {0};
    int64_t y[4];
    if (!pool_geometry("max_pool2d", x->shape, kernel, stride, padding, false, &p, y)) return NULL;
    td_tensor *out[2] = {td__alloc(4, y, x->dtype, x->storage->device), NULL};
    if (out[0]) out[1] = td__alloc(4, y, TD_I64, x->storage->device);
    td_status st = td__dispatch_contig(TD_OP_MAX_POOL2D, 1, &x, 2, out, &p);
    /* indices are an output even when unwanted: autograd saves them */
    if (st == TD_OK && indices)
        *indices = td__scope_add(out[1]);
    else
        td_release(out[1]);
    return td__finish(st, out[0]);
}

td_tensor *td__max_pool2d_backward(td_tensor *dy, td_tensor *indices, const int64_t x_shape[4]) {
    const char *op = "max_pool2d_backward";
    TD_CHECK_ARG(dy, op);
    TD_CHECK_ARG(indices, op);
    if (!x_shape) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: x_shape is NULL", op);
    if (!check_4d(dy, op, "dy") || !check_dtypes(op, dy, NULL)) return NULL;
    if (indices->dtype != TD_I64)
        TD_FAIL_NULL(TD_ERR_DTYPE, "%s: indices must be int64, got %s", op, td_dtype_name(indices->dtype));
    if (!same_shape(op, "indices", indices, dy->shape)) return NULL;
    if (dy->shape[0] != x_shape[0] || dy->shape[1] != x_shape[1]) {
        char a[96], b[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: dy %s does not match input shape %s", op,
                     td__shape_str(4, dy->shape, a, sizeof a), td__shape_str(4, x_shape, b, sizeof b));
    }
    td_tensor *in[2] = {dy, indices}, *out = td__alloc(4, x_shape, dy->dtype, dy->storage->device);
    return td__finish(td__dispatch_contig(TD_OP_MAX_POOL2D_BACKWARD, 2, in, 1, &out, NULL), out);
}

td_tensor *td_avg_pool2d(td_tensor *x, const int kernel[2], const int stride[2], const int padding[2],
                         bool count_include_pad) {
    TD_CHECK_ARG(x, "avg_pool2d");
    if (!check_4d(x, "avg_pool2d", "input") || !check_dtypes("avg_pool2d", x, NULL)) return NULL;
    td_op_params p = {0};
    int64_t y[4];
    if (!pool_geometry("avg_pool2d", x->shape, kernel, stride, padding, count_include_pad, &p, y)) return NULL;
    td_tensor *out = td__alloc(4, y, x->dtype, x->storage->device);
    return td__finish(td__dispatch_contig(TD_OP_AVG_POOL2D, 1, &x, 1, &out, &p), out);
}

td_tensor *td__avg_pool2d_backward(td_tensor *dy, const int64_t x_shape[4], const int kernel[2], const int stride[2],
                                   const int padding[2], bool count_include_pad) {
    const char *op = "avg_pool2d_backward";
    TD_CHECK_ARG(dy, op);
    if (!x_shape) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: x_shape is NULL", op);
    if (!check_dtypes(op, dy, NULL)) return NULL;
    td_op_params p = {0};
    int64_t y[4];
    if (!pool_geometry(op, x_shape, kernel, stride, padding, count_include_pad, &p, y) || !same_shape(op, "dy", dy, y))
        return NULL;
    td_tensor *out = td__alloc(4, x_shape, dy->dtype, dy->storage->device);
    return td__finish(td__dispatch_contig(TD_OP_AVG_POOL2D_BACKWARD, 1, &dy, 1, &out, &p), out);
}
