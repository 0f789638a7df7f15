/*
** nn.Embedding's padding_idx, max_norm and norm_type (td_embedding_new_ext).
**   padding_idx p: row p starts at zero and gets no gradient; the forward is
**     y = where(idx == p, detach(w[idx]), w[idx])  (so its rows pass no gradient back)
**   max_norm M: before the lookup, under no_grad and in place (torch's embedding_renorm_),
**     every row v that idx looks up with ||w[v]||_norm_type > M is scaled by M / (||w[v]|| + 1e-7).
**     Composed on the device without a host round trip: hit[v] = (scatter_add of ones at idx)[v] > 0,
**     the norms of all V rows, and w *= where(hit & norm > M, M / (norm + 1e-7), 1); O(V D) a call.
*/
#include <math.h>

#include "nn_internal.h"

typedef struct emb_ctx {
    int64_t padding_idx; /* -1: none (stored wrapped into [0, V)) */
    double max_norm;     /* <= 0: none */
    double norm_type;
} emb_ctx;

/* ||w[v]||_p for every row: [V, 1] */
static td_tensor *row_norms(td_tensor *w, double p) {
    int last = 1;
    if (p == 1) return td_sum(td_abs(w), 1, &last, true);
    if (p == 2) return td_sqrt(td_sum(td_mul(w, w), 1, &last, true));
    return td_pow_scalar(td_sum(td_pow_scalar(td_abs(w), p), 1, &last, true), 1 / p);
}

/* w's rows looked up by idx renormalized to max_norm in place (see the top). */
static td_status renorm_rows(td_tensor *w, td_tensor *idx, double max_norm, double p) {
    td_scope_begin();
    td_no_grad_begin();
    int64_t V = td_size(w, 0), n = td_numel(idx);
    td_device dev = td_tensor_device(w);
    td_dtype dt = td_tensor_dtype(w);
    td_tensor *flat = td_cast(td_reshape(idx, 1, &n), TD_I64);
    td_tensor *hit =
        td_gt(td_scatter_add(td_zeros(1, &V, dt, dev), 0, flat, td_ones(1, &n, dt, dev)), td_scalar(0, dt, dev));
    td_tensor *norm = row_norms(w, p);
    td_tensor *big = td_gt(td_where(td_unsqueeze(hit, 1), norm, td_scalar(0, dt, dev)), td_scalar(max_norm, dt, dev));
    td_tensor *scale =
        td_where(big, td_div(td_scalar(max_norm, dt, dev), td_add_scalar(norm, 1e-7)), td_scalar(1, dt, dev));
    td_tensor *nw = td_mul(w, scale);
    td_status st = nw ? td_copy_(w, nw) : td_last_status();
    td_no_grad_end();
    td_scope_end();
    return st;
}

static td_tensor *emb_forward(td_module *m, td_tensor *idx) {
    emb_ctx *c = m->ctx;
    if (!td__check_arg(idx, "Embedding", "indices")) return NULL;
    td_dtype dt = td_tensor_dtype(idx);
    if (td_dtype_is_float(dt) || dt == TD_BOOL)
        TD_FAIL_NULL(TD_ERR_DTYPE, "Embedding: indices must be an integer tensor, got %s", td_dtype_name(dt));
    td_tensor *w = td__param(m, 0);
    if (c->max_norm > 0 && renorm_rows(w, idx, c->max_norm, c->norm_type) != TD_OK) return NULL;
    td_tensor *y = td_embedding(w, idx);
    if (c->padding_idx < 0 || !y) return y;
    td_tensor *pad = td_unsqueeze(td_eq(idx, td_scalar((double)c->padding_idx, dt, td_tensor_device(idx))), -1);
    return td_where(pad, td_detach(y), y);
}

static const td_module_i emb_iface = {.type = "Embedding", .forward = emb_forward, .free_ctx = NULL};

td_module *td_embedding_new_ext(int64_t num_embeddings, int64_t embedding_dim, const int64_t *padding_idx,
                                double max_norm, double norm_type) {
    if (num_embeddings <= 0 || embedding_dim <= 0)
        TD_FAIL_NULL(TD_ERR_MISUSE, "Embedding: sizes must be positive, got %lld x %lld", (long long)num_embeddings,
                     (long long)embedding_dim);
    if (padding_idx && (*padding_idx >= num_embeddings || *padding_idx < -num_embeddings))
        TD_FAIL_NULL(TD_ERR_MISUSE, "Embedding: padding_idx %lld must be within num_embeddings %lld",
                     (long long)*padding_idx, (long long)num_embeddings);
    if (max_norm > 0 && !(norm_type > 0 && isfinite(norm_type)))
        TD_FAIL_NULL(TD_ERR_MISUSE, "Embedding: norm_type %g must be positive and finite", norm_type);
    td_module *m = td__module_alloc(&emb_iface, sizeof(emb_ctx));
    if (!m) return NULL;
    emb_ctx *c = m->ctx;
    c->padding_idx = !padding_idx ? -1 : *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
    c->max_norm = max_norm > 0 ? max_norm : 0;
    c->norm_type = norm_type;
    int64_t shape[2] = {num_embeddings, embedding_dim};
    td_status st = td__module_add_param(m, "weight", td__new_param(2, shape));
    if (st == TD_OK) st = td_init_normal_(td__param(m, 0), 0, 1);
    if (st == TD_OK && c->padding_idx >= 0) {
        td_scope_begin();
        st = td_init_constant_(td_select(td__param(m, 0), 0, c->padding_idx), 0);
        td_scope_end();
    }
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}
