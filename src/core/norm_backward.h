/*
** layer_norm's backward in one op (op_norm_backward.c), and which devices'
** layer norm ops take f16/bf16 operands beside f32 x (op_norm.c).
** defines: td__layer_norm_backward, td__layer_norm_backward_to, td__norm_narrow_ok.
*/
#ifndef TRIDENT_CORE_NORM_BACKWARD_H
#define TRIDENT_CORE_NORM_BACKWARD_H

#include "internal.h"

/* The gradients of y = layer_norm(x) (rows of D normalized elements, R =
** numel(x) / D rows) and, with ds, of add_layer_norm's sum s = x (ds: the
** gradient s received itself, passed through):
**   xhat = (x - mean) rstd,  g = dy w (dy without w)
**   dx = rstd (g - mean_D(g) - xhat mean_D(g xhat)) + ds
**   dw = sum_R dy xhat,  db = sum_R dy
** IN dy, x [..., D] of one shape; w [D] (any shape of D elements) or NULL;
** mean, rstd with R elements; ds NULL or x's shape. dy and ds are cast to x's
** dtype (an f16/bf16 dy of f32 x is read as it is where td__norm_narrow_ok);
** w, mean and rstd must have it. OUT *dx in x's shape; *dw (w's shape)
** when need_dw and w is given, *db [D] when need_db, else NULL. One
** LAYER_NORM_BACKWARD op (its kernels read the rows once or twice instead of
** the composed ops' dozen passes); not differentiable: a create_graph backward
** composes the formula from ops instead. Results are autoreleased. Returns
** TD_OK, TD_ERR_SHAPE / TD_ERR_DTYPE for operands that do not fit, or the op's
** error (TD_ERR_UNSUPPORTED where the backend lacks it). */
TD_API td_status td__layer_norm_backward(td_tensor *dy, td_tensor *x, td_tensor *w, td_tensor *mean, td_tensor *rstd,
                                         td_tensor *ds, int64_t D, bool need_dw, bool need_db, td_tensor **dx,
                                         td_tensor **dw, td_tensor **db);

/* td__layer_norm_backward with *dxn = dx cast to dtype nt as well (add_layer_norm's gradient for an f16/bf16
** residual beside f32 x, autocast's): written by the same op (its fourth output, the same bits as td_cast of dx)
** where dy reaches the op in nt (td__norm_narrow_ok), else td_cast(dx, nt); nt = x's dtype: *dxn = dx. */
TD_API td_status td__layer_norm_backward_to(td_tensor *dy, td_tensor *x, td_tensor *w, td_tensor *mean, td_tensor *rstd,
                                            td_tensor *ds, int64_t D, bool need_dw, bool need_db, td_dtype nt,
                                            td_tensor **dx, td_tensor **dw, td_tensor **db, td_tensor **dxn);

/* Whether x's device runs LAYER_NORM, ADD_LAYER_NORM and LAYER_NORM_BACKWARD
** with an operand of dtype narrow (y, the residual r, dy: the op table's 'h')
** beside f32 x: narrow f16 or bf16, x f32, on the CPU or CUDA. Vulkan's
** shaders read every operand in x's dtype, and its supports() does not decline
** mixed operands: the core casts there. */
bool td__norm_narrow_ok(const td_tensor *x, td_dtype narrow);

#endif /* TRIDENT_CORE_NORM_BACKWARD_H */
