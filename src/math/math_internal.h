/*
** Private to src/math/: the symbolic backward (grad.c) as block.c uses it.
** defines: td_math_grad, td_math_grad_build, td_math_grad_free, and the
** autocast pass (autocast.c), td_math_graph_autocast
*/
#ifndef TRIDENT_MATH_INTERNAL_H
#define TRIDENT_MATH_INTERNAL_H

#include "graph.h"

/* The backward of a typed forward graph f for the inputs in wrt (bit k: input k).
** graph's inputs: f's inputs [0, n_in) (same names), one upstream gradient per
** output of f [n_in, n_in + n_out) ("grad0", ...), then n_saved saved forward
** values: input n_in + n_out + s is the value of forward node saved[s]. Its
** outputs: the gradient of each wrt input, in input order (grad_of[k] is
** input k's output index), in that input's dtype and shape. */
typedef struct td_math_grad {
    td_math_graph graph;
    uint64_t wrt;
    int grad_in[TD_MATH_MAX_OUTPUTS]; /* backward node of each upstream gradient input */
    int grad_of[TD_MATH_MAX_INPUTS];  /* output index of input k's gradient (wrt inputs only) */
    int *saved;                       /* forward node ids, n_saved of them */
    int n_saved;
} td_math_grad;

/* Build the backward of f (typed) for wrt into out. checkpoint: save nothing
** (the backward recomputes the forward from the inputs); else matmuls,
** reductions, row ops, cross-entropy and layer norms used by the backward are
** saved (as far as the graph's input room allows). TD_ERR_OOM. */
td_status td_math_grad_build(const td_math_graph *f, uint64_t wrt, bool checkpoint, td_math_grad *out);
void td_math_grad_free(td_math_grad *gr);

/* Values of the given nodes of typed g (compose.c; td_math_graph_eval is this for g's outputs). */
td_status td_math_graph_eval_nodes(const td_math_graph *g, td_tensor *const *inputs, int n, const int *nodes,
                                   td_tensor **values);

/* g (typed) as it runs under an autocast scope of dtype low (TD_F16 or
** TD_BF16): out (initialized here) is g with the casts the op table's amp
** column makes before each node's op, retyped. On failure out is empty and
** the error set (TD_ERR_OOM). */
td_status td_math_graph_autocast(const td_math_graph *g, td_dtype low, td_math_graph *out);

#endif
