/*
** nn.BatchNorm1d/2d and nn.LayerNorm.
**
** BatchNorm, x [N, C] or [N, C, L] (1d) or [N, C, H, W] (2d); statistics per
** channel c over the other dims (n values each):
**   training:   mean = E[x], var = E[(x - mean)^2] (biased) normalize, and
**               running_mean = (1 - momentum) running_mean + momentum mean
**               running_var  = (1 - momentum) running_var  + momentum var n/(n-1)
**               num_batches_tracked += 1
**   evaluation: running_mean and running_var normalize
**   y = (x - mean) / sqrt(var + eps) * weight + bias
** Reference: torch/nn/modules/batchnorm.py (_BatchNorm.forward).
**
** LayerNorm normalizes over the trailing dims given at construction, through
** the fused layer_norm op.
*/
#include <string.h>

#include "nn_internal.h"

typedef struct bn_ctx {
    int64_t c;
    double eps, momentum;
    bool affine, track, two_d;
} bn_ctx;

typedef struct ln_ctx {
    int n;
    int64_t shape[TD_MAX_DIMS];
    double eps;
    bool affine;
} ln_ctx;

/* running = (1 - momentum) running + momentum stat, in place, not recorded. */
static td_status update_running(td_tensor *running, td_tensor *stat, double momentum) {
    td_tensor *v =
        td_add(td_mul_scalar(running, 1 - momentum), td_mul_scalar(td_reshape(stat, 1, td_shape(running)), momentum));
    return v ? td_copy_(running, v) : td_last_status();
}

static td_tensor *bn_forward(td_module *m, td_tensor *x) {
    bn_ctx *c = m->ctx;
    const char *type = c->two_d ? "BatchNorm2d" : "BatchNorm1d";
    unsigned ndims = c->two_d ? 1u << 4 : (1u << 2 | 1u << 3);
    if (!td__check_ndim(x, ndims, type, c->two_d ? "[N, C, H, W]" : "[N, C] or [N, C, L]")) return NULL;
    int nd = td_ndim(x);
    if (td_size(x, 1) != c->c) {
        char s[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: expected %lld channels in dim 1, got input of shape %s", type, (long long)c->c,
                     td__shape_str(nd, td_shape(x), s, sizeof s));
    }
    int dims[3] = {0, 2, 3}, n_dims = nd - 1;
    int64_t bshape[4] = {1, c->c, 1, 1}; /* [C] broadcast against x */
    int64_t n = td_numel(x) / c->c;
    td_tensor *mean, *var;
    bool batch_stats = m->training || !c->track;
    if (batch_stats) {
        if (n <= 1)
            TD_FAIL_NULL(TD_ERR_SHAPE, "%s: expected more than 1 value per channel when training, got %lld", type,
                         (long long)n);
        mean = td_mean(x, n_dims, dims, true);
        var = td_var(x, n_dims, dims, 0, true);
        if (m->training && c->track) {
            td_no_grad_begin();
            td_status st = update_running(td__buffer(m, 0), mean, c->momentum);
            if (st == TD_OK)
                st = update_running(td__buffer(m, 1), td_mul_scalar(var, (double)n / (double)(n - 1)), c->momentum);
            if (st == TD_OK) st = td_copy_(td__buffer(m, 2), td_add_scalar(td__buffer(m, 2), 1));
            td_no_grad_end();
            if (st != TD_OK) return NULL;
        }
    } else {
        mean = td_reshape(td__buffer(m, 0), nd, bshape);
        var = td_reshape(td__buffer(m, 1), nd, bshape);
    }
    td_tensor *y = td_mul(td_sub(x, mean), td_rsqrt(td_add_scalar(var, c->eps)));
    if (c->affine)
        y = td_add(td_mul(y, td_reshape(td__param(m, 0), nd, bshape)), td_reshape(td__param(m, 1), nd, bshape));
    return y;
}

static td_tensor *ln_forward(td_module *m, td_tensor *x) {
    ln_ctx *c = m->ctx;
    int nd = td_ndim(x);
    bool fits = nd >= c->n && !memcmp(td_shape(x) + nd - c->n, c->shape, (size_t)c->n * sizeof(int64_t));
    if (nd >= 0 && !fits) {
        char s1[96], s2[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "LayerNorm: input of shape %s does not end in the normalized shape %s",
                     td__shape_str(nd, td_shape(x), s1, sizeof s1), td__shape_str(c->n, c->shape, s2, sizeof s2));
    }
    return td_layer_norm(x, c->n, c->affine ? td__param(m, 0) : NULL, c->affine ? td__param(m, 1) : NULL, c->eps);
}

static const td_module_i bn1_iface = {.type = "BatchNorm1d", .forward = bn_forward, .free_ctx = NULL};
static const td_module_i bn2_iface = {.type = "BatchNorm2d", .forward = bn_forward, .free_ctx = NULL};
static const td_module_i ln_iface = {.type = "LayerNorm", .forward = ln_forward, .free_ctx = NULL};

/* Adds weight/bias parameters (ones/zeros) of the given shape when affine. */
static td_status add_affine(td_module *m, int n, const int64_t *shape) {
    td_status st = td__module_add_param(m, "weight", td_keep(td_ones(n, shape, TD_F32, TD_CPU)));
    if (st == TD_OK) st = td__module_add_param(m, "bias", td_keep(td_zeros(n, shape, TD_F32, TD_CPU)));
    return st;
}

static td_module *bn_new(bool two_d, int64_t c, double eps, double momentum, bool affine, bool track) {
    const char *type = two_d ? "BatchNorm2d" : "BatchNorm1d";
    if (c <= 0) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: num_features %lld must be positive", type, (long long)c);
    if (!(eps > 0) || !(momentum >= 0 && momentum <= 1))
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: eps %g must be positive and momentum %g in [0, 1]", type, eps, momentum);
    td_module *m = td__module_alloc(two_d ? &bn2_iface : &bn1_iface, sizeof(bn_ctx));
    if (!m) return NULL;
    *(bn_ctx *)m->ctx = (bn_ctx){c, eps, momentum, affine, track, two_d};
    td_status st = affine ? add_affine(m, 1, &c) : TD_OK;
    if (st == TD_OK && track) st = td__module_add_buffer(m, "running_mean", td_keep(td_zeros(1, &c, TD_F32, TD_CPU)));
    if (st == TD_OK && track) st = td__module_add_buffer(m, "running_var", td_keep(td_ones(1, &c, TD_F32, TD_CPU)));
    if (st == TD_OK && track)
        st = td__module_add_buffer(m, "num_batches_tracked", td_keep(td_zeros(0, NULL, TD_I64, TD_CPU)));
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}

td_module *td_batch_norm1d_new(int64_t num_features, double eps, double momentum, bool affine,
                               bool track_running_stats) {
    return bn_new(false, num_features, eps, momentum, affine, track_running_stats);
}

td_module *td_batch_norm2d_new(int64_t num_features, double eps, double momentum, bool affine,
                               bool track_running_stats) {
    return bn_new(true, num_features, eps, momentum, affine, track_running_stats);
}

td_module *td_layer_norm_new(int n, const int64_t *normalized_shape, double eps, bool elementwise_affine) {
    if (n < 1 || n > TD_MAX_DIMS || !normalized_shape)
        TD_FAIL_NULL(TD_ERR_MISUSE, "LayerNorm: normalized shape needs 1 to %d dims, got %d", TD_MAX_DIMS, n);
    for (int i = 0; i < n; i++)
        if (normalized_shape[i] <= 0)
            TD_FAIL_NULL(TD_ERR_MISUSE, "LayerNorm: size %lld must be positive", (long long)normalized_shape[i]);
    if (!(eps > 0)) TD_FAIL_NULL(TD_ERR_MISUSE, "LayerNorm: eps %g must be positive", eps);
    td_module *m = td__module_alloc(&ln_iface, sizeof(ln_ctx));
    if (!m) return NULL;
    ln_ctx *c = m->ctx;
    c->n = n;
    memcpy(c->shape, normalized_shape, (size_t)n * sizeof(int64_t));
    c->eps = eps;
    c->affine = elementwise_affine;
    if (elementwise_affine && add_affine(m, n, normalized_shape) != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}
