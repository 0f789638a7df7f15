/*
** Linear's weight and bias gradients in one op (op_linear_wgrad.c).
** defines: td__linear_wgrad, td__linear_wgrad_to.
*/
#ifndef TRIDENT_CORE_LINEAR_WGRAD_H
#define TRIDENT_CORE_LINEAR_WGRAD_H

#include "internal.h"

/* For y = x w^T + b with dy = dL/dy [..., N] and x [..., K] (the same leading
** dims, M rows in all): OUT dw = dy^T x [N, K] and, when need_db, OUT db =
** the sum of dy over its rows [N] (else *db is left NULL; db may then be
** NULL). One LINEAR_WGRAD op (on CUDA the bias gradient comes out of the
** weight-gradient GEMM's epilogue); while grad mode records a graph through
** dy or x (create_graph), MATMUL and SUM instead, which are differentiable.
** Results are autoreleased like any op's. Returns TD_OK, TD_ERR_SHAPE or
** TD_ERR_DTYPE for operands that do not match, or the op's error. */
TD_API td_status td__linear_wgrad(td_tensor *dy, td_tensor *x, bool need_db, td_tensor **dw, td_tensor **db);

/* td__linear_wgrad with dw and db of dtype dt: dy's, or float32 for float16 /
** bfloat16 dy (the op table's 'a'): the GEMM's fp32 sums then round once to
** f32, not to dy's dtype first, for a gradient bound for a float32 parameter
** (autograd's td__grad_dtype). Where the backend declines the wide outputs
** (its supports(), as Vulkan's, or TD_ERR_UNSUPPORTED from the run) the op
** runs in dy's dtype and the results are cast, as the engine's cast would.
** TD_ERR_DTYPE for another dt. */
TD_API td_status td__linear_wgrad_to(td_tensor *dy, td_tensor *x, bool need_db, td_dtype dt, td_tensor **dw,
                                     td_tensor **db);

#endif /* TRIDENT_CORE_LINEAR_WGRAD_H */
