/*
** LINEAR_DGELU on the CPU: in = (dy [M, N], w [N, K], h [M, K]), out =
** (dh [M, K], db? [K]), contiguous:
**   g  = dy w               (MATMUL's kernel, into dh)
**   dh = g gelu'(h)         (GELU_BACKWARD's kernel, in place, erf or tanh form)
**   db = sum over m of dh   (SUM's kernel over dim 0, as LINEAR_WGRAD's db)
** So dh equals MATMUL then GELU_BACKWARD bit for bit (the reference the
** fused GEMM epilogues of other backends are held to). db in dh's dtype or,
** for f16/bf16 dh, f32 (the op table's 'a'): the sum of the rounded dh in f32
** or wider, rounded once to db's dtype.
*/
#include "cpu.h"

td_status cpu_op_LINEAR_DGELU(const td_op *op) {
    td_operand *dh = &op->out[0];
    td_status st = TD_OK;
    if (td_operand_numel(dh) != 0) {
        td_op mm = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = op->in, .out = dh, .flags = op->flags};
        if ((st = cpu_op_MATMUL(&mm)) != TD_OK) return st;
        td_operand bw_in[2] = {*dh, op->in[2]};
        td_op bw = {.kind = TD_OP_GELU_BACKWARD, .n_in = 2, .n_out = 1, .in = bw_in, .out = dh, .p = op->p};
        if ((st = cpu_op_GELU_BACKWARD(&bw)) != TD_OK) return st;
    }
    if (!op->out[1].buf) return st;
    int64_t K = dh->shape[1];
    td_operand sum = op->out[1];
    sum.ndim = 2, sum.shape[0] = 1, sum.shape[1] = K, sum.strides[0] = K, sum.strides[1] = 1;
    td_op red = {.kind = TD_OP_SUM, .n_in = 1, .n_out = 1, .in = dh, .out = &sum, .p.reduce.dims = 1};
    return cpu_op_SUM(&red);
}
