/*
** nn.MultiheadAttention(E, H, bias, dropout, batch_first=True). Shapes: N batch,
** T queries, S keys, E = H * D features.
**   [q k v] = x W_in^T + b_in          W_in = in_proj_weight [3E, E] (rows q, k, v)
**   per head h: A = dropout(softmax(q_h k_h^T / sqrt(D) + mask))    [N, H, T, S]
**   y = concat_h(A v_h) W_out^T + b_out                             out_proj (a Linear)
** The attention is the fused td_scaled_dot_product_attention (no [T, S] buffer
** kept). mask gathers PyTorch's conventions: attn_mask [T, S] and
** key_padding_mask [N, S], each bool (true: may NOT attend) or float (added),
** and causal (key j > query i masked). Dropout (training only) draws from the
** default generator. Reference: torch/nn/functional.py (multi_head_attention_forward).
*/
#include <math.h>
#include <stdlib.h>

#include "nn_internal.h"

typedef struct mha_ctx {
    int64_t e, h;
    bool bias, causal;
    double dropout;
} mha_ctx;

/* [N, L, E] -> [N, H, L, D] */
static td_tensor *split_heads(td_tensor *x, int64_t h) {
    int64_t shape[4] = {td_size(x, 0), td_size(x, 1), h, td_size(x, 2) / h};
    static const int perm[4] = {0, 2, 1, 3};
    return td_permute(td_reshape(x, 4, shape), perm);
}

/* A PyTorch MHA mask (bool: true = may not attend; float: added) as an additive mask of q's dtype. */
static td_tensor *additive(td_tensor *mask, td_tensor *q) {
    if (td_tensor_dtype(mask) != TD_BOOL) return td_cast(mask, td_tensor_dtype(q));
    td_device dev = td_tensor_device(q);
    return td_where(mask, td_scalar(-INFINITY, td_tensor_dtype(q), dev), td_scalar(0, td_tensor_dtype(q), dev));
}

/* mask (NULL: none) has shape want[0..n), else TD_ERR_SHAPE naming it */
static bool check_mask(td_tensor *mask, int n, const int64_t *want, const char *what) {
    if (!mask) return true;
    bool ok = td_ndim(mask) == n;
    for (int i = 0; ok && i < n; i++) ok = td_size(mask, i) == want[i];
    if (ok) return true;
    char s1[96], s2[96];
    TD_ERR(TD_ERR_SHAPE, "MultiheadAttention: %s has shape %s, expected %s", what,
           td__shape_str(td_ndim(mask), td_shape(mask), s1, sizeof s1), td__shape_str(n, want, s2, sizeof s2));
    return false;
}

static bool check_3d(td_tensor *x, int64_t e, const char *arg) {
    if (!td__check_ndim(x, 1u << 3, "MultiheadAttention", "[N, L, E] (batch_first)")) return false;
    if (td_size(x, 2) == e) return true;
    char s[96];
    TD_ERR(TD_ERR_SHAPE, "MultiheadAttention: %s has shape %s, expected last dim embed_dim %lld", arg,
           td__shape_str(3, td_shape(x), s, sizeof s), (long long)e);
    return false;
}

static td_tensor *attend(td_module *m, td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *attn_mask,
                         td_tensor *key_padding_mask, bool causal) {
    mha_ctx *c = m->ctx;
    if (!check_3d(q, c->e, "query") || !check_3d(k, c->e, "key") || !check_3d(v, c->e, "value")) return NULL;
    int64_t n = td_size(q, 0), t = td_size(q, 1), s = td_size(k, 1);
    if (td_size(k, 0) != n || td_size(v, 0) != n || td_size(v, 1) != s)
        TD_FAIL_NULL(
            TD_ERR_SHAPE, "MultiheadAttention: query batch %lld, key [%lld, %lld] and value [%lld, %lld] disagree",
            (long long)n, (long long)td_size(k, 0), (long long)s, (long long)td_size(v, 0), (long long)td_size(v, 1));
    if (causal && t != s)
        TD_FAIL_NULL(TD_ERR_SHAPE, "MultiheadAttention: a causal mask needs as many keys as queries (%lld != %lld)",
                     (long long)s, (long long)t);
    if (attn_mask && !td__check_arg(attn_mask, "MultiheadAttention", "attn_mask")) return NULL;
    if (key_padding_mask && !td__check_arg(key_padding_mask, "MultiheadAttention", "key_padding_mask")) return NULL;
    if (!check_mask(attn_mask, 2, (int64_t[]){t, s}, "attn_mask") ||
        !check_mask(key_padding_mask, 2, (int64_t[]){n, s}, "key_padding_mask"))
        return NULL;
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
    /* one additive mask broadcasting to [N, H, T, S]: [T, S], [N, 1, 1, S] or their sum [N, 1, T, S] */
    td_tensor *mask = attn_mask ? additive(attn_mask, q) : NULL;
    if (key_padding_mask) {
        td_tensor *kpm = td_reshape(additive(key_padding_mask, q), 4, (int64_t[]){n, 1, 1, s});
        mask = mask ? td_add(kpm, mask) : kpm;
    }
    double p = m->training ? c->dropout : 0;
    td_tensor *y = td_scaled_dot_product_attention(split_heads(qp, c->h), split_heads(kp, c->h), split_heads(vp, c->h),
                                                   mask, p, causal, NAN); /* [N, H, T, D] */
    static const int perm[4] = {0, 2, 1, 3};
    int64_t shape[3] = {n, t, c->e};
    y = td_reshape(td_permute(y, perm), 3, shape);
    return td_module_forward(m->children.items[0].child, y);
}

static td_tensor *mha_forward(td_module *m, td_tensor *x) {
    return attend(m, x, x, x, NULL, NULL, ((mha_ctx *)m->ctx)->causal);
}

static const td_module_i mha_iface = {.type = "MultiheadAttention", .forward = mha_forward, .free_ctx = NULL};

td_tensor *td_multihead_attention_forward_ext(td_module *m, td_tensor *query, td_tensor *key, td_tensor *value,
                                              td_tensor *attn_mask, td_tensor *key_padding_mask, bool causal) {
    if (!td__module_is(m, &mha_iface, "multihead_attention_forward")) return NULL;
    TD_CHECK_ARG(query, "MultiheadAttention");
    TD_CHECK_ARG(key, "MultiheadAttention");
    TD_CHECK_ARG(value, "MultiheadAttention");
    td_scope_begin();
    return td__scope_end_keep(attend(m, query, key, value, attn_mask, key_padding_mask, causal));
}

td_tensor *td_multihead_attention_forward(td_module *m, td_tensor *query, td_tensor *key, td_tensor *value,
                                          td_tensor *attn_mask, bool causal) {
    return td_multihead_attention_forward_ext(m, query, key, value, attn_mask, NULL, causal);
}

td_module *td_multihead_attention_new_ext(int64_t embed_dim, int64_t num_heads, bool bias, bool causal,
                                          double dropout) {
    if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads)
        TD_FAIL_NULL(TD_ERR_MISUSE, "MultiheadAttention: embed_dim %lld must be a positive multiple of num_heads %lld",
                     (long long)embed_dim, (long long)num_heads);
    if (!(dropout >= 0 && dropout < 1))
        TD_FAIL_NULL(TD_ERR_MISUSE, "MultiheadAttention: dropout %g is outside [0, 1)", dropout);
    td_module *m = td__module_alloc(&mha_iface, sizeof(mha_ctx));
    if (!m) return NULL;
    *(mha_ctx *)m->ctx = (mha_ctx){embed_dim, num_heads, bias, causal, dropout};
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

td_module *td_multihead_attention_new(int64_t embed_dim, int64_t num_heads, bool bias, bool causal) {
    return td_multihead_attention_new_ext(embed_dim, num_heads, bias, causal, 0);
}
