/*
** nn.MultiheadAttention(E, H, bias, batch_first=True). Shapes: N batch, T
** queries, S keys, E = H * D features.
**   [q k v] = x W_in^T + b_in          W_in = in_proj_weight [3E, E] (rows q, k, v)
**   per head h: A = softmax(q_h k_h^T / sqrt(D) + mask)      [N, H, T, S]
**   y = concat_h(A v_h) W_out^T + b_out                      out_proj (a Linear)
** q is scaled before the product, as torch's _scaled_dot_product_attention
** does. The causal mask is -inf above the diagonal (key j > query i).
** Reference: torch/nn/functional.py (multi_head_attention_forward).
*/
#include <math.h>
#include <stdlib.h>

#include "nn_internal.h"

typedef struct mha_ctx {
    int64_t e, h;
    bool bias, causal;
} mha_ctx;

/* [N, L, E] -> [N, H, L, D] */
static td_tensor *split_heads(td_tensor *x, int64_t h) {
    int64_t shape[4] = {td_size(x, 0), td_size(x, 1), h, td_size(x, 2) / h};
    static const int perm[4] = {0, 2, 1, 3};
    return td_permute(td_reshape(x, 4, shape), perm);
}

/* Additive [T, S] mask: -inf where key j > query i. */
static td_tensor *causal_mask(int64_t t, int64_t s, td_dtype dt, td_device dev) {
    float *m = malloc((size_t)(t * s) * sizeof *m);
    if (!m)
        TD_FAIL_NULL(TD_ERR_OOM, "MultiheadAttention: out of host memory for a %lldx%lld mask", (long long)t,
                     (long long)s);
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < s; j++) m[i * s + j] = j > i ? -INFINITY : 0.0f;
    int64_t shape[2] = {t, s};
    td_tensor *mask = td_cast(td_from_data(m, 2, shape, TD_F32, dev), dt);
    free(m);
    return mask;
}

static bool check_3d(td_tensor *x, int64_t e, const char *arg) {
    if (!td__check_ndim(x, 1u << 3, "MultiheadAttention", "[N, L, E] (batch_first)")) return false;
    if (td_size(x, 2) == e) return true;
    char s[96];
    TD_ERR(TD_ERR_SHAPE, "MultiheadAttention: %s has shape %s, expected last dim embed_dim %lld", arg,
           td__shape_str(3, td_shape(x), s, sizeof s), (long long)e);
    return false;
}

static td_tensor *attend(td_module *m, td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *attn_mask, bool causal) {
    mha_ctx *c = m->ctx;
    if (!check_3d(q, c->e, "query") || !check_3d(k, c->e, "key") || !check_3d(v, c->e, "value")) return NULL;
    int64_t n = td_size(q, 0), t = td_size(q, 1), s = td_size(k, 1), d = c->e / c->h;
    if (td_size(k, 0) != n || td_size(v, 0) != n || td_size(v, 1) != s)
        TD_FAIL_NULL(
            TD_ERR_SHAPE, "MultiheadAttention: query batch %lld, key [%lld, %lld] and value [%lld, %lld] disagree",
            (long long)n, (long long)td_size(k, 0), (long long)s, (long long)td_size(v, 0), (long long)td_size(v, 1));
    if (causal && t != s)
        TD_FAIL_NULL(TD_ERR_SHAPE, "MultiheadAttention: a causal mask needs as many keys as queries (%lld != %lld)",
                     (long long)s, (long long)t);
    td_tensor *w = td__param(m, 0), *b = c->bias ? td__param(m, 1) : NULL;
    td_tensor *qp, *kp, *vp;
    if (q == k && k == v) { /* self-attention: one projection */
        td_tensor *qkv = td_linear(q, w, b);
        qp = td_slice(qkv, 2, 0, c->e, 1);
        kp = td_slice(qkv, 2, c->e, 2 * c->e, 1);
        vp = td_slice(qkv, 2, 2 * c->e, 3 * c->e, 1);
    } else {
        td_tensor *xs[3] = {q, k, v}, *out[3];
        for (int i = 0; i < 3; i++)
            out[i] = td_linear(xs[i], td_slice(w, 0, i * c->e, (i + 1) * c->e, 1),
                               b ? td_slice(b, 0, i * c->e, (i + 1) * c->e, 1) : NULL);
        qp = out[0], kp = out[1], vp = out[2];
    }
    qp = td_mul_scalar(split_heads(qp, c->h), 1.0 / sqrt((double)d));
    td_tensor *scores = td_matmul(qp, td_transpose(split_heads(kp, c->h), -2, -1)); /* [N, H, T, S] */
    if (attn_mask) {
        int64_t want[2] = {t, s};
        if (td_ndim(attn_mask) != 2 || td_size(attn_mask, 0) != t || td_size(attn_mask, 1) != s) {
            char s1[96], s2[96];
            TD_FAIL_NULL(TD_ERR_SHAPE, "MultiheadAttention: attn_mask has shape %s, expected %s",
                         td__shape_str(td_ndim(attn_mask), td_shape(attn_mask), s1, sizeof s1),
                         td__shape_str(2, want, s2, sizeof s2));
        }
        if (td_tensor_dtype(attn_mask) == TD_BOOL)
            scores =
                td_where(attn_mask, td_scalar(-INFINITY, td_tensor_dtype(scores), td_tensor_device(scores)), scores);
        else
            scores = td_add(scores, attn_mask);
    }
    if (causal) scores = td_add(scores, causal_mask(t, s, td_tensor_dtype(q), td_tensor_device(q)));
    td_tensor *y = td_matmul(td_softmax(scores, -1), split_heads(vp, c->h)); /* [N, H, T, D] */
    static const int perm[4] = {0, 2, 1, 3};
    int64_t shape[3] = {n, t, c->e};
    y = td_reshape(td_permute(y, perm), 3, shape);
    return td_module_forward(m->children.items[0].child, y);
}

static td_tensor *mha_forward(td_module *m, td_tensor *x) {
    return attend(m, x, x, x, NULL, ((mha_ctx *)m->ctx)->causal);
}

static const td_module_i mha_iface = {.type = "MultiheadAttention", .forward = mha_forward, .free_ctx = NULL};

td_tensor *td_multihead_attention_forward(td_module *m, td_tensor *query, td_tensor *key, td_tensor *value,
                                          td_tensor *attn_mask, bool causal) {
    if (!td__module_is(m, &mha_iface, "multihead_attention_forward")) return NULL;
    TD_CHECK_ARG(query, "MultiheadAttention");
    TD_CHECK_ARG(key, "MultiheadAttention");
    TD_CHECK_ARG(value, "MultiheadAttention");
    td_scope_begin();
    return td__scope_end_keep(attend(m, query, key, value, attn_mask, causal));
}

td_module *td_multihead_attention_new(int64_t embed_dim, int64_t num_heads, bool bias, bool causal) {
    if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads)
        TD_FAIL_NULL(TD_ERR_MISUSE, "MultiheadAttention: embed_dim %lld must be a positive multiple of num_heads %lld",
                     (long long)embed_dim, (long long)num_heads);
    td_module *m = td__module_alloc(&mha_iface, sizeof(mha_ctx));
    if (!m) return NULL;
    *(mha_ctx *)m->ctx = (mha_ctx){embed_dim, num_heads, bias, causal};
    int64_t wshape[2] = {3 * embed_dim, embed_dim}, bshape = 3 * embed_dim;
    td_status st = td__module_add_param(m, "in_proj_weight", td__new_param(2, wshape));
    if (st == TD_OK) st = td_init_xavier_uniform_(td__param(m, 0), 1.0);
    if (st == TD_OK && bias)
        st = td__module_add_param(m, "in_proj_bias", td_keep(td_zeros(1, &bshape, TD_F32, TD_CPU)));
    if (st == TD_OK) st = td_module_register_module(m, "out_proj", td_linear_new(embed_dim, embed_dim, bias));
    if (st == TD_OK && bias) st = td_init_constant_(td_module_get(m, "out_proj.bias"), 0);
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}
