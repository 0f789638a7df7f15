/*
** nn.ConvTranspose2d and nn.ConvTranspose1d: the gradient of conv2d for its
** input (op CONV2D_BACKWARD_INPUT) as a forward op, with torch's layout.
**   ConvTranspose2d: x [N, Cin, H, W], w [Cin, Cout/g, kh, kw], b [Cout]
**     -> y [N, Cout, Ho, Wo],  Ho = (H - 1) stride - 2 pad + dil (kh - 1) + output_padding + 1
**   y = conv2d_backward_input(dy = x, w) for the conv2d y -> x of the same
**   stride, padding, dilation and groups (whose weight [O = Cin, Cout/g, kh, kw]
**   is exactly torch's transposed weight), plus b over channels.
**   Its gradients are that op's (autograd/formulas_nn.c): dx = conv2d(dy, w),
**   dw = conv2d_backward_weight(x, dy).
**   ConvTranspose1d: x [N, Cin, L], w [Cin, Cout/g, k]: the 2d one with H = 1.
** output_padding must be below stride: the conv2d over y must give back H
** (torch also takes output_padding < dilation, which that conv would not
** reproduce; it is refused). Unbatched inputs get a batch dim of 1.
*/
#include "nn_internal.h"

typedef struct convt_ctx {
    int64_t in, out;
    int stride[2], padding[2], output_padding[2], dilation[2], groups;
    bool bias, one_d;
} convt_ctx;

td_tensor *td_conv_transpose2d(td_tensor *x, td_tensor *w, td_tensor *b, const int stride[2], const int padding[2],
                               const int output_padding[2], int groups, const int dilation[2]) {
    const char *fn = "conv_transpose2d";
    static const int ones[2] = {1, 1}, zeros[2] = {0, 0};
    if (!td__check_arg(x, fn, "input") || !td__check_arg(w, fn, "weight") || (b && !td__check_arg(b, fn, "bias")))
        return NULL;
    const int *s = stride ? stride : ones, *p = padding ? padding : zeros,
              *op = output_padding ? output_padding : zeros, *d = dilation ? dilation : ones;
    if (td_ndim(x) != 4 || td_ndim(w) != 4) {
        char s1[96], s2[96];
        TD_FAIL_NULL(TD_ERR_SHAPE,
                     "%s: input must be [N, Cin, H, W] and weight [Cin, Cout/groups, kh, kw], got %s and %s", fn,
                     td__shape_str(td_ndim(x), td_shape(x), s1, sizeof s1),
                     td__shape_str(td_ndim(w), td_shape(w), s2, sizeof s2));
    }
    if (groups < 1 || td_size(w, 0) != td_size(x, 1) || td_size(x, 1) % groups)
        TD_FAIL_NULL(TD_ERR_SHAPE,
                     "%s: input has %lld channels, weight dim 0 is %lld (both must be equal and a multiple "
                     "of groups %d)",
                     fn, (long long)td_size(x, 1), (long long)td_size(w, 0), groups);
    int64_t y[4] = {td_size(x, 0), td_size(w, 1) * groups, 0, 0};
    for (int i = 0; i < 2; i++) {
        if (s[i] < 1 || d[i] < 1 || p[i] < 0 || op[i] < 0)
            TD_FAIL_NULL(TD_ERR_MISUSE,
                         "%s: stride %d and dilation %d must be positive, padding %d and output_padding %d "
                         ">= 0",
                         fn, s[i], d[i], p[i], op[i]);
        if (op[i] >= s[i])
            TD_FAIL_NULL(TD_ERR_UNSUPPORTED,
                         "%s: output_padding %d must be smaller than stride %d (Trident runs the "
                         "transposed convolution as conv2d's input gradient, which needs it)",
                         fn, op[i], s[i]);
        y[2 + i] = (td_size(x, 2 + i) - 1) * s[i] - 2 * p[i] + (int64_t)d[i] * (td_size(w, 2 + i) - 1) + op[i] + 1;
        if (y[2 + i] < 1)
            TD_FAIL_NULL(TD_ERR_SHAPE, "%s: the output size %lld of dim %d is not positive", fn, (long long)y[2 + i],
                         2 + i);
    }
    if (b && (td_ndim(b) != 1 || td_size(b, 0) != y[1]))
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: bias must be [%lld]", fn, (long long)y[1]);
    td_tensor *out = td__conv2d_backward_input(x, w, y, s, p, d, groups);
    return b ? td_add(out, td_reshape(b, 4, (int64_t[]){1, y[1], 1, 1})) : out;
}

static td_tensor *convt_forward(td_module *m, td_tensor *x) {
    convt_ctx *c = m->ctx;
    td_tensor *w = td__param(m, 0), *b = c->bias ? td__param(m, 1) : NULL;
    bool unbatched;
    if (!td__conv_operands(c->one_d ? "ConvTranspose1d" : "ConvTranspose2d", c->one_d, c->in, &x, &w, &unbatched))
        return NULL;
    td_tensor *y = td_conv_transpose2d(x, w, b, c->stride, c->padding, c->output_padding, c->groups, c->dilation);
    return td__conv_result(y, c->one_d, unbatched);
}

static const td_module_i convt1d_iface = {.type = "ConvTranspose1d", .forward = convt_forward, .free_ctx = NULL};
static const td_module_i convt2d_iface = {.type = "ConvTranspose2d", .forward = convt_forward, .free_ctx = NULL};

static td_module *convt_new(bool one_d, int64_t in, int64_t out, const int kernel[2], const int stride[2],
                            const int padding[2], const int output_padding[2], int groups, bool bias,
                            const int dilation[2]) {
    const char *type = one_d ? "ConvTranspose1d" : "ConvTranspose2d";
    if (in <= 0 || out <= 0 || groups <= 0 || in % groups || out % groups)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: channels in %lld, out %lld must be positive multiples of groups %d", type,
                     (long long)in, (long long)out, groups);
    for (int i = 0; i < 2; i++) {
        if (kernel[i] <= 0 || stride[i] <= 0 || padding[i] < 0 || dilation[i] <= 0 || output_padding[i] < 0)
            TD_FAIL_NULL(
                TD_ERR_MISUSE,
                "%s: kernel %d, stride %d, dilation %d must be positive, padding %d and output_padding %d >= 0", type,
                kernel[i], stride[i], dilation[i], padding[i], output_padding[i]);
        if (output_padding[i] >= stride[i] && output_padding[i] >= dilation[i])
            TD_FAIL_NULL(TD_ERR_MISUSE, "%s: output_padding %d must be smaller than either stride %d or dilation %d",
                         type, output_padding[i], stride[i], dilation[i]);
        if (output_padding[i] >= stride[i])
            TD_FAIL_NULL(TD_ERR_UNSUPPORTED,
                         "%s: output_padding %d must be smaller than stride %d (Trident runs the transposed "
                         "convolution as conv2d's input gradient, which needs it)",
                         type, output_padding[i], stride[i]);
    }
    td_module *m = td__module_alloc(one_d ? &convt1d_iface : &convt2d_iface, sizeof(convt_ctx));
    if (!m) return NULL;
    convt_ctx *c = m->ctx;
    *c = (convt_ctx){.in = in, .out = out, .groups = groups, .bias = bias, .one_d = one_d};
    for (int i = 0; i < 2; i++) {
        c->stride[i] = stride[i];
        c->padding[i] = padding[i];
        c->output_padding[i] = output_padding[i];
        c->dilation[i] = dilation[i];
    }
    int64_t wshape[4] = {in, out / groups, kernel[0], kernel[1]};
    if (one_d) wshape[2] = kernel[1];
    td_status st = td__module_add_param(m, "weight", td__new_param(one_d ? 3 : 4, wshape));
    if (st == TD_OK && bias) st = td__module_add_param(m, "bias", td__new_param(1, &out));
    /* torch's _ConvNd init: kaiming_uniform(a = sqrt(5)) with fan_in = weight.size(1) * kernel, bias U(+-1/sqrt) */
    if (st == TD_OK) st = td__init_linear_like(td__param(m, 0), bias ? td__param(m, 1) : NULL);
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}

td_module *td_conv_transpose2d_new(int64_t in_channels, int64_t out_channels, const int kernel[2], const int stride[2],
                                   const int padding[2], const int output_padding[2], int groups, bool bias,
                                   const int dilation[2]) {
    static const int ones[2] = {1, 1}, zeros[2] = {0, 0};
    if (!kernel) TD_FAIL_NULL(TD_ERR_MISUSE, "ConvTranspose2d: kernel is NULL");
    return convt_new(false, in_channels, out_channels, kernel, stride ? stride : ones, padding ? padding : zeros,
                     output_padding ? output_padding : zeros, groups, bias, dilation ? dilation : ones);
}

td_module *td_conv_transpose1d_new(int64_t in_channels, int64_t out_channels, int kernel, int stride, int padding,
                                   int output_padding, int groups, bool bias, int dilation) {
    int k[2] = {1, kernel}, s[2] = {1, stride}, p[2] = {0, padding}, op[2] = {0, output_padding}, d[2] = {1, dilation};
    return convt_new(true, in_channels, out_channels, k, s, p, op, groups, bias, d);
}
