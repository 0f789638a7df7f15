/*
** LINEAR_DGELU on the CPU: in = (dy [M, N], w [N, K], h [M, K]), out =
** dh [M, K], contiguous:
**   g  = dy w          (MATMUL's kernel, into dh)
**   dh = g gelu'(h)    (GELU_BACKWARD's kernel, in place, erf or tanh form)
** So dh equals MATMUL then GELU_BACKWARD bit for bit (the reference the
** fused GEMM epilogues of other backends are held to).
*/
#include "cpu.h"

td_status cpu_op_LINEAR_DGELU(const td_op *op) {
    td_operand *dh = &op->out[0];
    if (td_operand_numel(dh) == 0) return TD_OK;
    td_op mm = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = op->in, .out = dh, .flags = op->flags};
    td_status st = cpu_op_MATMUL(&mm);
    if (st != TD_OK) return st;
    td_operand bw_in[2] = {*dh, op->in[2]};
    td_op bw = {.kind = TD_OP_GELU_BACKWARD, .n_in = 2, .n_out = 1, .in = bw_in, .out = dh, .p = op->p};
    return cpu_op_GELU_BACKWARD(&bw);
}
