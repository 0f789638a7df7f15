/*
** Layer norm's backward as one math block (norm_fused.c), in place of the
** composed elementwise passes around its row reductions (issue 21).
*/
#ifndef TRIDENT_AUTOGRAD_NORM_FUSED_H
#define TRIDENT_AUTOGRAD_NORM_FUSED_H

#include "trident/tensor.h"

/* METHOD. The gradients of y = layer_norm(x) over the last dim of x [R, D]
** from dy [R, D] (IN), the weight w [D] (IN, NULL without one) and the saved
** mean and rstd [R, 1] (IN): *dx [R, D] (OUT), and *dw, *db [D] (OUT, when
** want_w / want_b; want_w needs a w). New tensors as the ops return them, to
** be called inside a scope (the engine's).
** Returns false, setting nothing and clearing the error, when TRIDENT_MATH_FUSE
** is 0 or the block cannot run them: the caller composes the formula. */
/* GETTER. Whether layer norm's backward on x's device takes the block:
** TRIDENT_MATH_FUSE=1 takes it; unset or 0, the hand-written LAYER_NORM_BACKWARD
** op serves on every device (measured faster). */
bool td__layer_norm_block_on(td_tensor *x);

bool td__layer_norm_grads_fused(td_tensor *x, td_tensor *dy, td_tensor *w, td_tensor *mean, td_tensor *rstd,
                                bool want_w, bool want_b, td_tensor **dx, td_tensor **dw, td_tensor **db);

#endif
