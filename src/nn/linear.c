/*
** nn.Linear: y = x W^T + b. x [..., in], W [out, in], b [out] -> [..., out].
** LinearGELU: gelu(x W^T + b) with Linear's parameters, one fused LINEAR_GELU
** op (td_linear_gelu).
*/
#include "nn_internal.h"

typedef struct linear_ctx {
    int64_t in, out;
    bool bias;
    int gelu; /* LinearGELU: 1 erf form, 2 tanh form; 0 Linear */
} linear_ctx;

static td_tensor *linear_forward(td_module *m, td_tensor *x) {
    linear_ctx *c = m->ctx;
    int nd = td_ndim(x);
    if (nd < 1 || td_size(x, -1) != c->in) {
        char s[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: expected input [..., %lld], got shape %s", m->iface->type, (long long)c->in,
                     td__shape_str(nd, td_shape(x), s, sizeof s));
    }
    td_tensor *w = td__param(m, 0), *b = c->bias ? td__param(m, 1) : NULL;
    return c->gelu ? td_linear_gelu(x, w, b, c->gelu == 2) : td_linear(x, w, b);
}

static const td_module_i linear_iface = {.type = "Linear", .forward = linear_forward, .free_ctx = NULL};
static const td_module_i linear_gelu_iface = {.type = "LinearGELU", .forward = linear_forward, .free_ctx = NULL};

static td_module *linear_new(const td_module_i *iface, int64_t in_features, int64_t out_features, bool bias, int gelu) {
    if (in_features <= 0 || out_features <= 0)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: sizes must be positive, got in %lld, out %lld", iface->type,
                     (long long)in_features, (long long)out_features);
    td_module *m = td__module_alloc(iface, sizeof(linear_ctx));
    if (!m) return NULL;
    *(linear_ctx *)m->ctx = (linear_ctx){in_features, out_features, bias, gelu};
    int64_t wshape[2] = {out_features, in_features};
    return td__with_linear_params(m, 2, wshape, bias);
}

td_module *td_linear_new(int64_t in_features, int64_t out_features, bool bias) {
    return linear_new(&linear_iface, in_features, out_features, bias, 0);
}

td_module *td_linear_gelu_new(int64_t in_features, int64_t out_features, bool bias, bool tanh_approx) {
    return linear_new(&linear_gelu_iface, in_features, out_features, bias, tanh_approx ? 2 : 1);
}
