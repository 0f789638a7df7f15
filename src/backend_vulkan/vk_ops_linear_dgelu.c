/*
** LINEAR_DGELU on Vulkan: in = (dy [M, N], w [N, K], h [M, K]), out =
** dh [M, K], contiguous:
**   g  = dy w          (the matmul encoder, into dh)
**   dh = g gelu'(h)    (GELU_BACKWARD's shader, in place, erf or tanh form)
** MATMUL then GELU_BACKWARD bit for bit. Views the matmul encoder does not take
** (wider than one binding) return TD_ERR_UNSUPPORTED; the core then composes
** the two ops.
*/
#include "vk_ops.h"

td_status vk_op_LINEAR_DGELU(vk_dev *d, const td_op *op) {
    td_operand *dh = &op->out[0];
    if (td_operand_numel(dh) == 0) return TD_OK;
    td_op mm = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = op->in, .out = dh, .flags = op->flags};
    if (vk_view_too_wide(d, &op->in[2]) || !vk_supports_MATMUL(d, &mm))
        return td_error_set(TD_ERR_UNSUPPORTED, "linear_dgelu: views too wide for one Vulkan binding");
    td_status st = vk_op_MATMUL(d, &mm);
    if (st != TD_OK) return st;
    td_operand bw_in[2] = {*dh, op->in[2]};
    td_op bw = {.kind = TD_OP_GELU_BACKWARD, .n_in = 2, .n_out = 1, .in = bw_in, .out = dh, .p = op->p};
    return vk_op_GELU_BACKWARD(d, &bw);
}
