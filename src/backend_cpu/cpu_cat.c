/*
** CAT: concatenate n inputs along dim into a contiguous output.
** in[k] [..., S_k, ...] (any strides, the output's dtype) -> out [..., sum S_k, ...]:
** input k lands in the slice [P_k, P_k + S_k) of dim, P_k = S_0 + ... + S_{k-1}.
** Each slice is written by the COPY kernel through a strided view of out.
*/
#include "cpu.h"

td_status td_cpu_CAT(const td_op *op) {
    const td_operand *out = &op->out[0];
    int dim = op->p.axis.dim;
    int64_t at = 0;
    for (int k = 0; k < op->n_in; k++) {
        td_operand slice = *out;
        slice.shape[dim] = op->in[k].shape[dim];
        slice.offset += at * out->strides[dim];
        at += op->in[k].shape[dim];
        td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = &op->in[k], .out = &slice};
        td_status st = td_cpu_COPY(&copy);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}
