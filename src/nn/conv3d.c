/*
** F.conv3d and nn.Conv3d, composed over conv2d (no backend has a 3-D op):
**   x [N, C, D, H, W], w [O, C/G, kd, kh, kw], b [O] -> [N, O, Do, Ho, Wo]
**   y[n, o, od] = b[o] + sum_{k < kd} conv2d(x[n, :, od*sd - pd + k*dd], w[:, :, k])   (0 outside x)
** The kd depth taps become channels: x is zero-padded along D, and the kd
** strided depth slices (tap k starts at k*dd, step sd, Do of them) are stacked
** as [N, Do, G, kd, C/G, H, W] -> images [N*Do, G*kd*C/G, H, W]; the weight
** becomes [O, kd*C/G, kh, kw] (w permuted to [O, kd, C/G, kh, kw]) so that group
** g of the 2-D conv sees exactly its kd*C/G channels. One conv2d with G groups
** then sums over the taps inside its GEMM; the gradients are conv2d's through
** the permutes, slices and cat (autograd).
*/
#include <stdlib.h>

#include "nn_internal.h"

typedef struct conv3d_ctx {
    int64_t in, out;
    int stride[3], padding[3], dilation[3], groups;
    bool bias;
} conv3d_ctx;

td_tensor *td_conv3d(td_tensor *x, td_tensor *w, td_tensor *b, const int stride[3], const int padding[3],
                     const int dilation[3], int groups) {
    static const int ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
    const char *fn = "conv3d";
    if (!td__check_arg(x, fn, "input") || !td__check_arg(w, fn, "weight")) return NULL;
    if (!stride) stride = ones;
    if (!dilation) dilation = ones;
    if (!padding) padding = zeros;
    char a[96], c[96];
    if (td_ndim(x) != 5 || td_ndim(w) != 5)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: input %s must be [N, C, D, H, W] and weight %s [O, C/groups, kd, kh, kw]", fn,
                     td__shape_str(td_ndim(x), td_shape(x), a, sizeof a),
                     td__shape_str(td_ndim(w), td_shape(w), c, sizeof c));
    for (int i = 0; i < 3; i++)
        if (stride[i] <= 0 || dilation[i] <= 0 || padding[i] < 0)
            TD_FAIL_NULL(TD_ERR_MISUSE, "%s: stride %d and dilation %d must be positive and padding %d >= 0", fn,
                         stride[i], dilation[i], padding[i]);
    int64_t N = td_size(x, 0), C = td_size(x, 1), D = td_size(x, 2), H = td_size(x, 3), W = td_size(x, 4);
    int64_t O = td_size(w, 0), Cg = td_size(w, 1), kd = td_size(w, 2);
    if (groups <= 0 || O % groups || Cg * groups != C)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: input has %lld channels, weight %s with groups %d needs %lld", fn, (long long)C,
                     td__shape_str(5, td_shape(w), c, sizeof c), groups, (long long)(Cg * groups));
    int64_t span = (kd - 1) * dilation[0] + 1, Dp = D + 2 * (int64_t)padding[0];
    if (Dp < span)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: padded depth %lld is smaller than the dilated kernel %lld", fn, (long long)Dp,
                     (long long)span);
    int64_t Do = (Dp - span) / stride[0] + 1;
    /* pass 1: pad D with zeros */
    td_tensor *xp = x;
    if (padding[0]) {
        int64_t ps[5] = {N, C, padding[0], H, W};
        td_tensor *z = td_zeros(5, ps, td_tensor_dtype(x), td_tensor_device(x));
        xp = td_cat(3, (td_tensor *[]){z, x, z}, 2);
    }
    /* pass 2: the kd tap slices [N, C, Do, H, W], stacked as [N, G, kd, Cg, Do, H, W] */
    td_tensor *taps[64], **tp = kd <= 64 ? taps : malloc((size_t)kd * sizeof *tp);
    if (!tp) TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory", fn);
    int64_t s7[7] = {N, groups, 1, Cg, Do, H, W};
    for (int64_t k = 0; k < kd; k++) {
        int64_t start = k * dilation[0];
        tp[k] = td_reshape(td_slice(xp, 2, start, start + (Do - 1) * stride[0] + 1, stride[0]), 7, s7);
    }
    td_tensor *st = kd == 1 ? tp[0] : td_cat((int)kd, tp, 2);
    if (tp != taps) free(tp);
    /* pass 3: images [N*Do, G*kd*Cg, H, W] and weight [O, kd*Cg, kh, kw] */
    td_tensor *img =
        td_reshape(td_permute(st, (int[]){0, 4, 1, 2, 3, 5, 6}), 4, (int64_t[]){N * Do, groups * kd * Cg, H, W});
    td_tensor *w2 =
        td_reshape(td_permute(w, (int[]){0, 2, 1, 3, 4}), 4, (int64_t[]){O, kd * Cg, td_size(w, 3), td_size(w, 4)});
    td_tensor *y = td_conv2d(img, w2, b, stride + 1, padding + 1, dilation + 1, groups);
    if (!y) return NULL;
    /* pass 4: [N*Do, O, Ho, Wo] -> [N, O, Do, Ho, Wo] */
    y = td_reshape(y, 5, (int64_t[]){N, Do, O, td_size(y, 2), td_size(y, 3)});
    return td_contiguous(td_permute(y, (int[]){0, 2, 1, 3, 4}));
}

static td_tensor *conv3d_forward(td_module *m, td_tensor *x) {
    conv3d_ctx *c = m->ctx;
    if (!td__check_ndim(x, 1u << 5 | 1u << 4, "Conv3d", "[N, C, D, H, W] or [C, D, H, W]")) return NULL;
    bool unbatched = td_ndim(x) == 4;
    if (unbatched) x = td_unsqueeze(x, 0);
    if (td_size(x, 1) != c->in) {
        char s[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "Conv3d: expected %lld input channels, got input of shape %s", (long long)c->in,
                     td__shape_str(td_ndim(x), td_shape(x), s, sizeof s));
    }
    td_tensor *y =
        td_conv3d(x, td__param(m, 0), c->bias ? td__param(m, 1) : NULL, c->stride, c->padding, c->dilation, c->groups);
    return unbatched ? td_squeeze(y, 0) : y;
}

static const td_module_i conv3d_iface = {.type = "Conv3d", .forward = conv3d_forward, .free_ctx = NULL};

td_module *td_conv3d_new(int64_t in_channels, int64_t out_channels, const int kernel[3], const int stride[3],
                         const int padding[3], const int dilation[3], int groups, bool bias) {
    static const int ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
    if (!kernel) TD_FAIL_NULL(TD_ERR_MISUSE, "Conv3d: kernel is NULL");
    if (!stride) stride = ones;
    if (!dilation) dilation = ones;
    if (!padding) padding = zeros;
    if (in_channels <= 0 || out_channels <= 0 || groups <= 0 || in_channels % groups || out_channels % groups)
        TD_FAIL_NULL(TD_ERR_MISUSE, "Conv3d: channels in %lld, out %lld must be positive multiples of groups %d",
                     (long long)in_channels, (long long)out_channels, groups);
    for (int i = 0; i < 3; i++)
        if (kernel[i] <= 0 || stride[i] <= 0 || padding[i] < 0 || dilation[i] <= 0)
            TD_FAIL_NULL(TD_ERR_MISUSE,
                         "Conv3d: kernel %d, stride %d, dilation %d must be positive and padding %d >= 0", kernel[i],
                         stride[i], dilation[i], padding[i]);
    td_module *m = td__module_alloc(&conv3d_iface, sizeof(conv3d_ctx));
    if (!m) return NULL;
    conv3d_ctx *c = m->ctx;
    *c = (conv3d_ctx){.in = in_channels, .out = out_channels, .groups = groups, .bias = bias};
    for (int i = 0; i < 3; i++) {
        c->stride[i] = stride[i];
        c->padding[i] = padding[i];
        c->dilation[i] = dilation[i];
    }
    int64_t wshape[5] = {out_channels, in_channels / groups, kernel[0], kernel[1], kernel[2]};
    return td__with_linear_params(m, 5, wshape, bias);
}
