/*
** The derivative table (one formula per differentiable op of TD_OP_LIST, the
** functions from the family files formulas_*.c) and helpers the formulas share.
*/
#include "autograd_internal.h"

static const td__formula table[TD_OP_COUNT] = {
    [TD_OP_COPY] = {td__bw_copy, 0, 0, 0},
    [TD_OP_ADD] = {td__bw_add, 0, 0, 0},
    [TD_OP_SUB] = {td__bw_sub, 0, 0, 0},
    [TD_OP_MUL] = {td__bw_mul, 3, 0, 0},
    [TD_OP_DIV] = {td__bw_div, 3, 0, 0},
    [TD_OP_POW] = {td__bw_pow, 3, 1, 0},
    [TD_OP_MAXIMUM] = {td__bw_maximum, 3, 0, 0},
    [TD_OP_MINIMUM] = {td__bw_minimum, 3, 0, 0},
    [TD_OP_WHERE] = {td__bw_where, 1, 0, 0},
    [TD_OP_NEG] = {td__bw_neg, 0, 0, 0},
    [TD_OP_ABS] = {td__bw_abs, 1, 0, 0},
    [TD_OP_EXP] = {td__bw_exp, 0, 1, 0},
    [TD_OP_LOG] = {td__bw_log, 1, 0, 0},
    [TD_OP_SQRT] = {td__bw_sqrt, 0, 1, 0},
    [TD_OP_RSQRT] = {td__bw_rsqrt, 0, 1, 0},
    [TD_OP_SIN] = {td__bw_sin, 1, 0, 0},
    [TD_OP_COS] = {td__bw_cos, 1, 0, 0},
    [TD_OP_TANH] = {td__bw_tanh, 0, 1, 0},
    [TD_OP_SIGMOID] = {td__bw_sigmoid, 0, 1, 0},
    [TD_OP_RELU] = {td__bw_relu, 0, 1, 0},
    [TD_OP_GELU] = {td__bw_gelu, 1, 0, 0},
    [TD_OP_GELU_BACKWARD] = {td__bw_gelu_backward, 3, 0, 0},
    [TD_OP_SILU] = {td__bw_silu, 1, 0, 0},
    [TD_OP_CLAMP] = {td__bw_clamp, 1, 0, 0},
    [TD_OP_SUM] = {td__bw_sum, 0, 0, 0},
    [TD_OP_MEAN] = {td__bw_mean, 0, 0, 0},
    [TD_OP_MAX] = {td__bw_extremum, 1, 1, 0},
    [TD_OP_MIN] = {td__bw_extremum, 1, 1, 0},
    [TD_OP_VAR] = {td__bw_var, 1, 0, 0},
    [TD_OP_LOGSUMEXP] = {td__bw_logsumexp, 1, 1, 0},
    [TD_OP_ATTENTION] = {td__bw_attention, 15, 3, 1},
    [TD_OP_MATMUL] = {td__bw_matmul, 3, 0, 0},
    [TD_OP_LINEAR] = {td__bw_linear, 3, 0, 1},
    [TD_OP_LINEAR_GELU] = {td__bw_linear_gelu, 7, 2, 1},
    [TD_OP_LINEAR_RESIDUAL] = {td__bw_linear_residual, 3, 0, 1},
    [TD_OP_SOFTMAX] = {td__bw_softmax, 0, 1, 0},
    [TD_OP_LOG_SOFTMAX] = {td__bw_log_softmax, 0, 1, 0},
    [TD_OP_LAYER_NORM] = {td__bw_layer_norm, 3, 6, 1},
    [TD_OP_ADD_LAYER_NORM] = {td__bw_add_layer_norm, 4, 14, 2},
    [TD_OP_GROUP_NORM] = {td__bw_group_norm, 3, 6, 1},
    [TD_OP_CROSS_ENTROPY] = {td__bw_cross_entropy, 7, 2, 1},
    [TD_OP_CONV2D] = {td__bw_conv2d, 3, 0, 0},
    [TD_OP_MAX_POOL2D] = {td__bw_max_pool2d, 0, 2, 1},
    [TD_OP_AVG_POOL2D] = {td__bw_avg_pool2d, 0, 0, 0},
    [TD_OP_DROPOUT] = {td__bw_dropout, 0, 0, 0},
    [TD_OP_CROSS_ENTROPY_BACKWARD] = {td__bw_cross_entropy_backward, 15, 0, 0},
    [TD_OP_SOFTMAX_BACKWARD] = {td__bw_softmax_backward, 3, 0, 0},
    [TD_OP_LOG_SOFTMAX_BACKWARD] = {td__bw_log_softmax_backward, 3, 0, 0},
    [TD_OP_CONV2D_BACKWARD_INPUT] = {td__bw_conv2d_backward_input, 3, 0, 0},
    [TD_OP_CONV2D_BACKWARD_WEIGHT] = {td__bw_conv2d_backward_weight, 3, 0, 0},
    [TD_OP_MAX_POOL2D_BACKWARD] = {td__bw_max_pool2d_backward, 2, 0, 0},
    [TD_OP_AVG_POOL2D_BACKWARD] = {td__bw_avg_pool2d_backward, 0, 0, 0},
    [TD_OP_EMBEDDING] = {td__bw_embedding, 2, 0, 0},
    [TD_OP_EMBEDDING_BACKWARD] = {td__bw_embedding_backward, 2, 0, 0},
    [TD_OP_INDEX_SELECT] = {td__bw_index_select, 2, 0, 0},
    [TD_OP_GATHER] = {td__bw_gather, 2, 0, 0},
    [TD_OP_SCATTER_ADD] = {td__bw_scatter_add, 2, 0, 0},
    [TD_OP_CAT] = {td__bw_cat, 0, 0, 0},
};

const td__formula *td__formula_for(td_op_kind kind) {
    return (unsigned)kind < TD_OP_COUNT && table[kind].fn ? &table[kind] : NULL;
}

td_tensor *td__sum_to(td_tensor *g, int ndim, const int64_t *shape) {
    if (!g) return NULL;
    int lead = g->ndim - ndim, dims[TD_MAX_DIMS], nd = 0;
    for (int i = 0; i < g->ndim; i++)
        if (i < lead || (shape[i - lead] == 1 && g->shape[i] != 1)) dims[nd++] = i;
    if (nd == 0) return lead == 0 ? g : td_reshape(g, ndim, shape);
    return td_reshape(td_sum(g, nd, dims, true), ndim, shape);
}

td_tensor *td__scalar_like(td_tensor *like, double value) {
    return like ? td_scalar(value, like->dtype, like->storage->device) : NULL;
}

td_tensor *td__mask_as(td_tensor *mask, td_tensor *like) { return like ? td_cast(mask, like->dtype) : NULL; }

td_tensor *td__zeros_meta(const td__tmeta *m, td_dtype dt) { return td_zeros(m->ndim, m->shape, dt, m->device); }

td_status td__done(const td_node *n, td_tensor *const *gx) {
    for (int i = 0; i < n->n_in && i < 64; i++)
        if (td__needs(n, i) && !gx[i])
            return td_last_status() != TD_OK
                       ? td_last_status()
                       : TD_ERR(TD_ERR_STATE, "%s backward: no gradient for input %d", n->name, i);
    return TD_OK;
}
