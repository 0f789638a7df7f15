/*
** The two halves of a fused GELU MLP's GEMMs (op_matmul.c, op_linear_dgelu.c):
** LINEAR_GELU that hands out its pre-activation h, and LINEAR_DGELU, the input
** gradient through the next linear layer and the GELU in one op.
** defines: td__linear_gelu_keep, td__linear_dgelu.
*/
#ifndef TRIDENT_CORE_LINEAR_DGELU_H
#define TRIDENT_CORE_LINEAR_DGELU_H

#include "internal.h"

/* td_linear_gelu without autocast or autograd's use of h: y = gelu(h), h = x
** w^T + b, both [..., N] for x [..., K], w [N, K], b [N] or NULL; OUT *h the
** pre-activation (NULL on failure). Results are autoreleased like any op's.
** NULL with the error set: TD_ERR_SHAPE, TD_ERR_DTYPE, or the op's error. */
td_tensor *td__linear_gelu_keep(td_tensor *x, td_tensor *w, td_tensor *b, bool tanh_approx, td_tensor **h);

/* For y = gelu(h) W2^T (+ ...) with dy = dL/dy [..., N], w = W2 [N, K] and h
** [..., K] (the same leading dims): dh = (dy w) gelu'(h) [..., K], erf form or
** tanh_approx, and where db is not NULL, OUT *db = the sum of dh over its rows
** [K] (the bias gradient of the layer that made h) of dtype db_dt: dy's, or
** float32 for float16 / bfloat16 dy (the op table's 'a', as
** td__linear_wgrad_to's). One LINEAR_DGELU op (on CUDA, the tanh form is one
** GEMM with gelu' in cuBLASLt's epilogue, and db comes out of the pass that
** writes dh); where the backend declines db, the op for dh, then SUM (in dh's
** dtype, then cast to db_dt); MATMUL, GELU_BACKWARD (and SUM) where it declines
** the op, and while grad mode records a graph through an operand
** (create_graph), as those are differentiable. Autoreleased; NULL with the
** error set: TD_ERR_SHAPE, TD_ERR_DTYPE (operands, or a db_dt other than
** those), or the op's error. */
TD_API td_tensor *td__linear_dgelu(td_tensor *dy, td_tensor *w, td_tensor *h, bool tanh_approx, td_tensor **db,
                                   td_dtype db_dt);

#endif /* TRIDENT_CORE_LINEAR_DGELU_H */
