/*
** nn.Embedding: weight [V, D], integer idx [...] -> weight rows [..., D].
** weight starts N(0, 1).
*/
#include "nn_internal.h"

static td_tensor *embedding_forward(td_module *m, td_tensor *idx) {
    td_dtype dt = td_tensor_dtype(idx);
    if (td_dtype_is_float(dt) || dt == TD_BOOL)
        TD_FAIL_NULL(TD_ERR_DTYPE, "Embedding: indices must be an integer tensor, got %s", td_dtype_name(dt));
    return td_embedding(td__param(m, 0), idx);
}

static const td_module_i embedding_iface = {.type = "Embedding", .forward = embedding_forward, .free_ctx = NULL};

td_module *td_embedding_new(int64_t num_embeddings, int64_t embedding_dim) {
    if (num_embeddings <= 0 || embedding_dim <= 0)
        TD_FAIL_NULL(TD_ERR_MISUSE, "Embedding: sizes must be positive, got %lld x %lld", (long long)num_embeddings,
                     (long long)embedding_dim);
    td_module *m = td__module_alloc(&embedding_iface, 0);
    if (!m) return NULL;
    int64_t shape[2] = {num_embeddings, embedding_dim};
    td_status st = td__module_add_param(m, "weight", td__new_param(2, shape));
    if (st == TD_OK) st = td_init_normal_(td__param(m, 0), 0, 1);
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}
