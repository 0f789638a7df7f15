/*
** LINEAR_RESIDUAL on Vulkan: in = (x [M, K], w [N, K], b [N]?, r [M, N]), out =
** y [M, N], contiguous, all of one dtype:
**   y = x w^T    (the matmul encoder, w read as the column-major [K, N] it is)
**   y += b       (ADD's shader, b broadcast over the rows, in place)
**   y += r       (ADD's shader, in place)
** MATMUL then two ADDs bit for bit. An f32 r with f16/bf16 x and w (the matmul
** shaders write x's dtype), or views the matmul encoder does not take, return
** TD_ERR_UNSUPPORTED; the core then composes the ops.
*/
#include "vk_ops.h"

td_status vk_op_LINEAR_RESIDUAL(vk_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *b = &op->in[2], *r = &op->in[3];
    td_operand *y = &op->out[0];
    int64_t M = x->shape[0], N = op->in[1].shape[0];
    if (M == 0 || N == 0) return TD_OK;
    if (y->dtype != x->dtype)
        return td_error_set(TD_ERR_UNSUPPORTED, "linear_residual: %s residual with %s x and w on Vulkan",
                            td_dtype_name(y->dtype), td_dtype_name(x->dtype));
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, y);
    if ((b->buf && vk_view_too_wide(d, b)) || vk_view_too_wide(d, r) || !vk_supports_MATMUL(d, &mm))
        return td_error_set(TD_ERR_UNSUPPORTED, "linear_residual: views too wide for one Vulkan binding");
    td_status st = vk_op_MATMUL(d, &mm);
    td_operand add_in[2] = {*y, *b};
    td_op add = {.kind = TD_OP_ADD, .n_in = 2, .n_out = 1, .in = add_in, .out = y};
    if (st == TD_OK && b->buf) {
        add_in[1].ndim = 2;
        add_in[1].shape[0] = M, add_in[1].shape[1] = N;
        add_in[1].strides[0] = 0, add_in[1].strides[1] = 1;
        st = vk_op_ADD(d, &add);
    }
    if (st != TD_OK) return st;
    add_in[1] = *r;
    return vk_op_ADD(d, &add);
}
