/*
** LINEAR_DGELU on Vulkan: in = (dy [M, N], w [N, K], h [M, K]), out =
** (dh [M, K], db? [K]), contiguous:
**   g  = dy w                (the matmul encoder, into dh)
**   dh = g gelu'(h)          (GELU_BACKWARD's shader, in place, erf or tanh form)
**   db = sum over m of dh    (SUM's shader over dim 0, as LINEAR_WGRAD's db)
** MATMUL then GELU_BACKWARD (then SUM) bit for bit. db in dh's dtype only: an
** f32 db for f16/bf16 dh (the op table's 'a') is declined, as LINEAR_WGRAD's,
** and the core runs the op for dh alone, then SUM and a cast. Views the matmul
** encoder does not take (wider than one binding) return TD_ERR_UNSUPPORTED; the
** core then composes the ops.
*/
#include "vk_ops.h"

bool vk_supports_LINEAR_DGELU(vk_dev *d, const td_op *op) {
    (void)d;
    return op->n_out < 2 || !op->out[1].buf || op->out[1].dtype == op->out[0].dtype;
}

td_status vk_op_LINEAR_DGELU(vk_dev *d, const td_op *op) {
    td_operand *dh = &op->out[0], *db = &op->out[1];
    td_op mm = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = op->in, .out = dh, .flags = op->flags};
    if (td_operand_numel(dh) != 0 && (vk_view_too_wide(d, &op->in[2]) || !vk_supports_MATMUL(d, &mm)))
        return td_error_set(TD_ERR_UNSUPPORTED, "linear_dgelu: views too wide for one Vulkan binding");
    td_status st = TD_OK;
    if (td_operand_numel(dh) != 0) {
        if ((st = vk_op_MATMUL(d, &mm)) != TD_OK) return st;
        td_operand bw_in[2] = {*dh, op->in[2]};
        td_op bw = {.kind = TD_OP_GELU_BACKWARD, .n_in = 2, .n_out = 1, .in = bw_in, .out = dh, .p = op->p};
        if ((st = vk_op_GELU_BACKWARD(d, &bw)) != TD_OK) return st;
    }
    if (!db->buf) return st;
    int64_t K = dh->shape[1];
    td_operand sum = *db;
    sum.ndim = 2, sum.shape[0] = 1, sum.shape[1] = K, sum.strides[0] = K, sum.strides[1] = 1;
    td_op red = {.kind = TD_OP_SUM, .n_in = 1, .n_out = 1, .in = dh, .out = &sum, .p.reduce.dims = 1};
    return vk_op_SUM(d, &red);
}
