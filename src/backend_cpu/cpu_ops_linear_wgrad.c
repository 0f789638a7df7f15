/*
** LINEAR_WGRAD on the CPU: in = (dy [M, N], x [M, K]), out = (dw [N, K],
** db? [N]), contiguous:
**   dw = dy^T x            (MATMUL's kernel, dy read transposed in place)
**   db = sum over m of dy  (SUM's kernel over dim 0)
** dw and db in dy's dtype or, for f16/bf16 dy, f32 (the op table's 'a'): both
** kernels sum in f32 or wider and round once to the output's dtype.
*/
#include "cpu.h"

td_status cpu_op_LINEAR_WGRAD(const td_op *op) {
    const td_operand *dy = &op->in[0], *x = &op->in[1];
    int64_t M = dy->shape[0], N = dy->shape[1];
    td_operand mm_in[2] = {*dy, *x};
    mm_in[0].shape[0] = N, mm_in[0].shape[1] = M; /* dy^T [N, M]: column-major */
    mm_in[0].strides[0] = 1, mm_in[0].strides[1] = N;
    td_op mm = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = mm_in, .out = &op->out[0], .flags = op->flags};
    td_status st = td_operand_numel(&op->out[0]) ? cpu_op_MATMUL(&mm) : TD_OK;
    if (st != TD_OK || !op->out[1].buf) return st;
    td_operand sum = op->out[1];
    sum.ndim = 2, sum.shape[0] = 1, sum.shape[1] = N, sum.strides[0] = N, sum.strides[1] = 1;
    td_op red = {.kind = TD_OP_SUM, .n_in = 1, .n_out = 1, .in = dy, .out = &sum, .p.reduce.dims = 1};
    return cpu_op_SUM(&red);
}
