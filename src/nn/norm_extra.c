/*
** nn.GroupNorm, nn.RMSNorm and nn.InstanceNorm2d.
**
** GroupNorm(G, C), x [N, C, *]: the fused group_norm op (td_group_norm), the
**   C channels in G groups, each (n, group) normalized over its elements.
** RMSNorm over the trailing dims D given at construction (torch.nn.RMSNorm,
**   torch >= 2.4), composed from ops (mul, mean, add, rsqrt), not fused:
**     y = x / sqrt(mean_D(x^2) + eps) * weight
**   eps "None" (any eps < 0 here) is torch.finfo(x.dtype).eps at each call.
** InstanceNorm2d(C), x [N, C, H, W] or [C, H, W]: each (n, c) plane
**   normalized over H, W. Without running stats (torch's default) it is
**   group_norm with G = C (weight and bias [C] when affine). With them:
**     training:   the plane's mean and biased var normalize, and
**                 running_mean = (1 - momentum) running_mean + momentum mean_n(mean)
**                 running_var  = (1 - momentum) running_var  + momentum mean_n(var HW/(HW-1))
**     evaluation: running_mean and running_var normalize
**   num_batches_tracked stays 0 (torch's InstanceNorm keeps it only for
**   BatchNorm's state-dict layout), as torch's instance_norm does (batch_norm over [1, N*C, H, W], the
**   running stats averaged over n). Reference: torch/nn/functional.py.
*/
#include <float.h>
#include <string.h>

#include "nn_internal.h"

typedef struct gn_ctx {
    int groups;
    int64_t c;
    double eps;
    bool affine;
} gn_ctx;

typedef struct rms_ctx {
    int n;
    int64_t shape[TD_MAX_DIMS];
    double eps; /* < 0: finfo(dtype).eps */
    bool affine;
} rms_ctx;

typedef struct in_ctx {
    int64_t c;
    double eps, momentum;
    bool affine, track;
} in_ctx;

static bool check_channels(td_tensor *x, int64_t c, const char *type) {
    if (td_size(x, 1) == c) return true;
    char s[96];
    TD_ERR(TD_ERR_SHAPE, "%s: expected %lld channels in dim 1, got input of shape %s", type, (long long)c,
           td__shape_str(td_ndim(x), td_shape(x), s, sizeof s));
    return false;
}

static td_tensor *gn_forward(td_module *m, td_tensor *x) {
    gn_ctx *c = m->ctx;
    if (td_ndim(x) >= 0 && td_ndim(x) < 2)
        TD_FAIL_NULL(TD_ERR_SHAPE, "GroupNorm: expected input of shape [N, C, *], got %d dims", td_ndim(x));
    if (td_ndim(x) < 0 || !check_channels(x, c->c, "GroupNorm")) return NULL;
    return td_group_norm(x, c->groups, c->affine ? td__param(m, 0) : NULL, c->affine ? td__param(m, 1) : NULL, c->eps);
}

static td_tensor *rms_forward(td_module *m, td_tensor *x) {
    rms_ctx *c = m->ctx;
    int nd = td_ndim(x);
    if (nd < 0) return NULL;
    if (nd < c->n || memcmp(td_shape(x) + nd - c->n, c->shape, (size_t)c->n * sizeof(int64_t))) {
        char s1[96], s2[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "RMSNorm: input of shape %s does not end in the normalized shape %s",
                     td__shape_str(nd, td_shape(x), s1, sizeof s1), td__shape_str(c->n, c->shape, s2, sizeof s2));
    }
    td_dtype dt = td_tensor_dtype(x);
    if (!td_dtype_is_float(dt))
        TD_FAIL_NULL(TD_ERR_DTYPE, "RMSNorm: input must be floating, got %s", td_dtype_name(dt));
    double eps = c->eps >= 0     ? c->eps
                 : dt == TD_F64  ? DBL_EPSILON
                 : dt == TD_F32  ? FLT_EPSILON
                 : dt == TD_BF16 ? 0x1p-7
                                 : 0x1p-10; /* f16 */
    int dims[TD_MAX_DIMS];
    for (int i = 0; i < c->n; i++) dims[i] = nd - c->n + i;
    td_tensor *y = td_mul(x, td_rsqrt(td_add_scalar(td_mean(td_mul(x, x), c->n, dims, true), eps)));
    return c->affine ? td_mul(y, td__param(m, 0)) : y;
}

/* running = (1 - momentum) running + momentum mean_n(stat [N, C, 1, 1]), in place, not recorded. */
static td_status in_update(td_tensor *running, td_tensor *stat, double momentum) {
    td_tensor *s = td_reshape(td_mean(stat, 1, (int[]){0}, false), 1, td_shape(running));
    td_tensor *v = td_add(td_mul_scalar(running, 1 - momentum), td_mul_scalar(s, momentum));
    return v ? td_copy_(running, v) : td_last_status();
}

static td_tensor *in_forward(td_module *m, td_tensor *x) {
    in_ctx *c = m->ctx;
    if (!td__check_ndim(x, 1u << 3 | 1u << 4, "InstanceNorm2d", "[N, C, H, W] or [C, H, W]")) return NULL;
    bool unbatched = td_ndim(x) == 3;
    if (unbatched) x = td_unsqueeze(x, 0);
    if (!check_channels(x, c->c, "InstanceNorm2d")) return NULL;
    td_tensor *w = c->affine ? td__param(m, 0) : NULL, *b = c->affine ? td__param(m, 1) : NULL, *y;
    int64_t hw = td_size(x, 2) * td_size(x, 3), bshape[4] = {1, c->c, 1, 1};
    if (m->training && hw <= 1)
        TD_FAIL_NULL(TD_ERR_SHAPE, "InstanceNorm2d: expected more than 1 spatial element when training, got %lld",
                     (long long)hw);
    if (!c->track) {
        y = td_group_norm(x, (int)c->c, w, b, c->eps);
    } else {
        int dims[2] = {2, 3};
        td_tensor *mean, *var;
        if (m->training) {
            mean = td_mean(x, 2, dims, true);
            var = td_var(x, 2, dims, 0, true);
            td_no_grad_begin();
            td_status st = in_update(td__buffer(m, 0), mean, c->momentum);
            if (st == TD_OK)
                st = in_update(td__buffer(m, 1), td_mul_scalar(var, (double)hw / (double)(hw - 1)), c->momentum);
            td_no_grad_end();
            if (st != TD_OK) return NULL;
        } else {
            mean = td_reshape(td__buffer(m, 0), 4, bshape);
            var = td_reshape(td__buffer(m, 1), 4, bshape);
        }
        y = td_mul(td_sub(x, mean), td_rsqrt(td_add_scalar(var, c->eps)));
        if (c->affine) y = td_add(td_mul(y, td_reshape(w, 4, bshape)), td_reshape(b, 4, bshape));
    }
    return unbatched ? td_squeeze(y, 0) : y;
}

static const td_module_i gn_iface = {.type = "GroupNorm", .forward = gn_forward, .free_ctx = NULL};
static const td_module_i rms_iface = {.type = "RMSNorm", .forward = rms_forward, .free_ctx = NULL};
static const td_module_i in_iface = {.type = "InstanceNorm2d", .forward = in_forward, .free_ctx = NULL};

/* m, or NULL after freeing m when st is not TD_OK */
static td_module *done(td_module *m, td_status st) {
    if (st == TD_OK) return m;
    td_module_free(m);
    return NULL;
}

static td_status add_weight_bias(td_module *m, int n, const int64_t *shape, bool bias) {
    td_status st = td__module_add_param(m, "weight", td_keep(td_ones(n, shape, TD_F32, TD_CPU)));
    if (st == TD_OK && bias) st = td__module_add_param(m, "bias", td_keep(td_zeros(n, shape, TD_F32, TD_CPU)));
    return st;
}

td_module *td_group_norm_new(int num_groups, int64_t num_channels, double eps, bool affine) {
    if (num_groups < 1 || num_channels < 1 || num_channels % num_groups)
        TD_FAIL_NULL(TD_ERR_MISUSE, "GroupNorm: num_channels %lld must be a positive multiple of num_groups %d",
                     (long long)num_channels, num_groups);
    if (!(eps > 0)) TD_FAIL_NULL(TD_ERR_MISUSE, "GroupNorm: eps %g must be positive", eps);
    td_module *m = td__module_alloc(&gn_iface, sizeof(gn_ctx));
    if (!m) return NULL;
    *(gn_ctx *)m->ctx = (gn_ctx){num_groups, num_channels, eps, affine};
    return done(m, affine ? add_weight_bias(m, 1, &num_channels, true) : TD_OK);
}

td_module *td_rms_norm_new(int n, const int64_t *normalized_shape, double eps, bool elementwise_affine) {
    if (n < 1 || n > TD_MAX_DIMS || !normalized_shape)
        TD_FAIL_NULL(TD_ERR_MISUSE, "RMSNorm: normalized shape needs 1 to %d dims, got %d", TD_MAX_DIMS, n);
    for (int i = 0; i < n; i++)
        if (normalized_shape[i] <= 0)
            TD_FAIL_NULL(TD_ERR_MISUSE, "RMSNorm: size %lld must be positive", (long long)normalized_shape[i]);
    if (eps != eps) TD_FAIL_NULL(TD_ERR_MISUSE, "RMSNorm: eps is NaN (pass a negative eps for torch's None)");
    td_module *m = td__module_alloc(&rms_iface, sizeof(rms_ctx));
    if (!m) return NULL;
    rms_ctx *c = m->ctx;
    c->n = n;
    memcpy(c->shape, normalized_shape, (size_t)n * sizeof(int64_t));
    c->eps = eps;
    c->affine = elementwise_affine;
    return done(m, elementwise_affine ? add_weight_bias(m, n, normalized_shape, false) : TD_OK);
}

td_module *td_instance_norm2d_new(int64_t num_features, double eps, double momentum, bool affine,
                                  bool track_running_stats) {
    if (num_features < 1)
        TD_FAIL_NULL(TD_ERR_MISUSE, "InstanceNorm2d: num_features %lld must be positive", (long long)num_features);
    if (num_features > 0x7fffffff)
        TD_FAIL_NULL(TD_ERR_MISUSE, "InstanceNorm2d: num_features %lld exceeds 2^31 - 1", (long long)num_features);
    if (!(eps > 0) || !(momentum >= 0 && momentum <= 1))
        TD_FAIL_NULL(TD_ERR_MISUSE, "InstanceNorm2d: eps %g must be positive and momentum %g in [0, 1]", eps, momentum);
    td_module *m = td__module_alloc(&in_iface, sizeof(in_ctx));
    if (!m) return NULL;
    *(in_ctx *)m->ctx = (in_ctx){num_features, eps, momentum, affine, track_running_stats};
    int64_t c = num_features;
    td_status st = affine ? add_weight_bias(m, 1, &c, true) : TD_OK;
    if (st == TD_OK && track_running_stats)
        st = td__module_add_buffer(m, "running_mean", td_keep(td_zeros(1, &c, TD_F32, TD_CPU)));
    if (st == TD_OK && track_running_stats)
        st = td__module_add_buffer(m, "running_var", td_keep(td_ones(1, &c, TD_F32, TD_CPU)));
    if (st == TD_OK && track_running_stats)
        st = td__module_add_buffer(m, "num_batches_tracked", td_keep(td_zeros(0, NULL, TD_I64, TD_CPU)));
    return done(m, st);
}
