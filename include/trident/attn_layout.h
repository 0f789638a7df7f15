/*
** The layout contract of ATTENTION and ATTENTION_BACKWARD between the core and the backends: the core offers strided
** operands first and falls back to contiguous copies where a backend's supports() declines them.
*/
#ifndef TRIDENT_ATTN_LAYOUT_H
#define TRIDENT_ATTN_LAYOUT_H

#include "trident/backend.h"

/* ATTENTION, ATTENTION_BACKWARD: whether every operand but the mask is contiguous. The core offers these ops
** strided views of q, k, v, dout and out, and outputs in the layout of q (k, v for dk, dv), each with the last
** dim's stride 1 (lse always contiguous); where supports() declines, it runs them on contiguous copies. A backend
** whose kernels read only the contiguous layout declines what this rejects. */
static inline bool td_attn_dense(const td_op *op) {
    int mask = op->kind == TD_OP_ATTENTION ? 3 : 4;
    for (int i = 0; i < op->n_in; i++)
        if (i != mask && op->in[i].buf && !td_operand_is_contiguous(&op->in[i])) return false;
    for (int i = 0; i < op->n_out; i++)
        if (op->out[i].buf && !td_operand_is_contiguous(&op->out[i])) return false;
    return true;
}

#endif
