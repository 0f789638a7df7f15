/*
** nn.Conv2d and nn.Conv1d over td_conv2d.
**   Conv2d: x [N, C, H, W], w [O, C/g, kh, kw], b [O] -> [N, O, Ho, Wo]
**   Conv1d: x [N, C, L],    w [O, C/g, k],      b [O] -> [N, O, Lo], run as a
**           Conv2d with H = 1 (x viewed [N, C, 1, L], w viewed [O, C/g, 1, k]).
** Unbatched inputs ([C, H, W], [C, L]) get a batch dim of 1, as in PyTorch.
*/
#include "nn_internal.h"

typedef struct conv_ctx {
    int64_t in, out;
    int stride[2], padding[2], dilation[2], groups;
    bool bias, one_d;
} conv_ctx;

bool td__conv_operands(const char *type, bool one_d, int64_t in, td_tensor **x, td_tensor **w, bool *unbatched) {
    int batched = one_d ? 3 : 4;
    if (!td__check_ndim(*x, (1u << batched) | (1u << (batched - 1)), type,
                        one_d ? "[N, C, L] or [C, L]" : "[N, C, H, W] or [C, H, W]"))
        return false;
    *unbatched = td_ndim(*x) == batched - 1;
    if (*unbatched) *x = td_unsqueeze(*x, 0);
    if (td_size(*x, 1) != in) {
        char s[96];
        td_error_set(TD_ERR_SHAPE, "%s: expected %lld input channels, got input of shape %s", type, (long long)in,
                     td__shape_str(td_ndim(*x), td_shape(*x), s, sizeof s));
        return false;
    }
    if (one_d) {
        *x = td_unsqueeze(*x, 2);
        *w = td_unsqueeze(*w, 2);
    }
    return true;
}

td_tensor *td__conv_result(td_tensor *y, bool one_d, bool unbatched) {
    if (one_d) y = td_squeeze(y, 2);
    return unbatched ? td_squeeze(y, 0) : y;
}

static td_tensor *conv_forward(td_module *m, td_tensor *x) {
    conv_ctx *c = m->ctx;
    td_tensor *w = td__param(m, 0), *b = c->bias ? td__param(m, 1) : NULL;
    bool unbatched;
    if (!td__conv_operands(c->one_d ? "Conv1d" : "Conv2d", c->one_d, c->in, &x, &w, &unbatched)) return NULL;
    td_tensor *y = td_conv2d(x, w, b, c->stride, c->padding, c->dilation, c->groups);
    return td__conv_result(y, c->one_d, unbatched);
}

static const td_module_i conv1d_iface = {.type = "Conv1d", .forward = conv_forward, .free_ctx = NULL};
static const td_module_i conv2d_iface = {.type = "Conv2d", .forward = conv_forward, .free_ctx = NULL};

static td_module *conv_new(bool one_d, int64_t in, int64_t out, const int kernel[2], const int stride[2],
                           const int padding[2], const int dilation[2], int groups, bool bias) {
    const char *type = one_d ? "Conv1d" : "Conv2d";
    if (in <= 0 || out <= 0 || groups <= 0 || in % groups || out % groups)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: channels in %lld, out %lld must be positive multiples of groups %d", type,
                     (long long)in, (long long)out, groups);
    for (int i = 0; i < 2; i++)
        if (kernel[i] <= 0 || stride[i] <= 0 || padding[i] < 0 || dilation[i] <= 0)
            TD_FAIL_NULL(TD_ERR_MISUSE, "%s: kernel %d, stride %d, dilation %d must be positive and padding %d >= 0",
                         type, kernel[i], stride[i], dilation[i], padding[i]);
    td_module *m = td__module_alloc(one_d ? &conv1d_iface : &conv2d_iface, sizeof(conv_ctx));
    if (!m) return NULL;
    conv_ctx *c = m->ctx;
    *c = (conv_ctx){.in = in, .out = out, .groups = groups, .bias = bias, .one_d = one_d};
    for (int i = 0; i < 2; i++) {
        c->stride[i] = stride[i];
        c->padding[i] = padding[i];
        c->dilation[i] = dilation[i];
    }
    int64_t wshape[4] = {out, in / groups, kernel[0], kernel[1]};
    if (one_d) wshape[2] = kernel[1];
    return td__with_linear_params(m, one_d ? 3 : 4, wshape, bias);
}

td_module *td_conv2d_new(int64_t in_channels, int64_t out_channels, const int kernel[2], const int stride[2],
                         const int padding[2], const int dilation[2], int groups, bool bias) {
    static const int ones[2] = {1, 1}, zeros[2] = {0, 0};
    if (!kernel) TD_FAIL_NULL(TD_ERR_MISUSE, "Conv2d: kernel is NULL");
    return conv_new(false, in_channels, out_channels, kernel, stride ? stride : ones, padding ? padding : zeros,
                    dilation ? dilation : ones, groups, bias);
}

td_module *td_conv1d_new(int64_t in_channels, int64_t out_channels, int kernel, int stride, int padding, int dilation,
                         int groups, bool bias) {
    int k[2] = {1, kernel}, s[2] = {1, stride}, p[2] = {0, padding}, d[2] = {1, dilation};
    return conv_new(true, in_channels, out_channels, k, s, p, d, groups, bias);
}
