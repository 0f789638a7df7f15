/*
** The op table: the single source of truth for Trident's primitive ops.
**
** X(NAME, n_in, n_out, differentiable, dtypes, layout, summary)
**   n_in     inputs the backend reads (-1: variadic, see td_op.n_in)
**   n_out    outputs the backend writes
**   differentiable  1 when autograd has a derivative formula for it
**   dtypes   which dtypes the op is defined for (TD_DTS_*; the dtype of in[0],
**            or of out[0] for ops without inputs)
**   layout   what the core guarantees the backend about strides (TD_LAYOUT_*)
**
** Generated from it: the td_op_kind enum, td_op_name(), the coverage matrix of
** `trident devices --ops`, and the cases the conformance test sweeps.
** Optional operands (layer_norm weight, conv bias, ...) are passed as views
** with buf == NULL. Ops marked "in place" read and write their outputs.
*/
#ifndef TRIDENT_OP_LIST_H
#define TRIDENT_OP_LIST_H

/* dtype classes */
#define TD_DTS_ALL   0 /* every dtype */
#define TD_DTS_NUM   1 /* every dtype except bool */
#define TD_DTS_FLOAT 2 /* f32, f64, f16, bf16 */

/* layouts */
#define TD_LAYOUT_ANY    0 /* inputs have any strides (0 for broadcast); outputs contiguous */
#define TD_LAYOUT_CONTIG 1 /* every operand is contiguous */
#define TD_LAYOUT_MATRIX 2 /* batch dims any strides; each matrix row- or column-major */

#define TD_OP_LIST(X)                                                                                                  \
    /* creation */                                                                                                     \
    X(FILL, 0, 1, 0, TD_DTS_ALL, TD_LAYOUT_ANY, "out = value")                                                         \
    X(ARANGE, 0, 1, 0, TD_DTS_NUM, TD_LAYOUT_CONTIG, "out[i] = start + i*step")                                        \
    X(RAND, 0, 1, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "uniform [0,1) from Philox(seed, offset)")                        \
    X(RANDN, 0, 1, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "normal(0,1) from Philox, Box-Muller")                           \
    X(COPY, 1, 1, 1, TD_DTS_ALL, TD_LAYOUT_ANY, "out = cast(in); out may be strided")                                  \
    /* binary, broadcast by the core through stride-0 dims */                                                          \
    X(ADD, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "a + b")                                                                \
    X(SUB, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "a - b")                                                                \
    X(MUL, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "a * b")                                                                \
    X(DIV, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "a / b")                                                              \
    X(POW, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "a ^ b")                                                              \
    X(MAXIMUM, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "max(a, b), NaN propagates")                                        \
    X(MINIMUM, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "min(a, b), NaN propagates")                                        \
    X(EQ, 2, 1, 0, TD_DTS_ALL, TD_LAYOUT_ANY, "a == b -> bool")                                                        \
    X(NE, 2, 1, 0, TD_DTS_ALL, TD_LAYOUT_ANY, "a != b -> bool")                                                        \
    X(LT, 2, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, "a < b -> bool")                                                         \
    X(LE, 2, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, "a <= b -> bool")                                                        \
    X(GT, 2, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, "a > b -> bool")                                                         \
    X(GE, 2, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, "a >= b -> bool")                                                        \
    X(WHERE, 3, 1, 1, TD_DTS_ALL, TD_LAYOUT_ANY, "cond ? a : b; in[0] is bool, dtype of in[1]")                        \
    /* unary */                                                                                                        \
    X(NEG, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "-x")                                                                   \
    X(ABS, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "|x|")                                                                  \
    X(EXP, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "e^x")                                                                \
    X(LOG, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "ln x")                                                               \
    X(SQRT, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "sqrt x")                                                            \
    X(RSQRT, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "1/sqrt x")                                                         \
    X(SIN, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "sin x")                                                              \
    X(COS, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "cos x")                                                              \
    X(TANH, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "tanh x")                                                            \
    X(SIGMOID, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "1/(1+e^-x)")                                                     \
    X(RELU, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "max(x, 0)")                                                           \
    X(GELU, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "x*Phi(x), erf or tanh form")                                        \
    X(GELU_BACKWARD, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "dy * gelu'(x); in = (dy, x)")                              \
    X(SILU, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "x*sigmoid(x)")                                                      \
    X(CLAMP, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "min(max(x, lo), hi)")                                                \
    /* reductions over a set of dims; out has the input's ndim (reduced dims are 1) */                                 \
    X(SUM, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "sum; integers accumulate to int64")                                    \
    X(MEAN, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "mean")                                                              \
    X(MAX, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "max over dims")                                                        \
    X(MIN, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, "min over dims")                                                        \
    X(ARGMAX, 1, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, "int64 index of the first max, one dim")                             \
    X(ARGMIN, 1, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, "int64 index of the first min, one dim")                             \
    X(VAR, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "sum((x-mean)^2)/(n-correction)")                                     \
    X(LOGSUMEXP, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, "log(sum(exp(x))), max-shifted")                                \
    /* linear algebra and nn primitives */                                                                             \
    X(MATMUL, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_MATRIX, "[...,M,K] @ [...,K,N]; batch broadcast")                       \
    X(SOFTMAX, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "softmax over the last dim")                                   \
    X(LOG_SOFTMAX, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "log_softmax over the last dim")                           \
    X(LAYER_NORM, 3, 3, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "(x,w?,b?) -> (y, mean, rstd) per row")                     \
    X(CROSS_ENTROPY, 3, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "(logits[N,C], target[N], w?) -> loss")                  \
    X(CROSS_ENTROPY_BACKWARD, 4, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "(dloss, logits, target, w?)")                  \
    X(CONV2D, 3, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "(x[N,C,H,W], w[O,C/g,kh,kw], b?)")                             \
    X(CONV2D_BACKWARD_INPUT, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "(dy, w) -> dx")                                 \
    X(CONV2D_BACKWARD_WEIGHT, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "(dy, x) -> dw")                                \
    X(MAX_POOL2D, 1, 2, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "x -> (y, int64 argmax in H*W)")                            \
    X(MAX_POOL2D_BACKWARD, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "(dy, indices) -> dx")                             \
    X(AVG_POOL2D, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "x -> mean over windows")                                   \
    X(AVG_POOL2D_BACKWARD, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "dy -> dx")                                        \
    /* indexing */                                                                                                     \
    X(EMBEDDING, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "(weight[V,D], idx) -> [...,D]")                             \
    X(EMBEDDING_BACKWARD, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "(dy, idx) -> dweight, scatter-add")                \
    X(INDEX_SELECT, 2, 1, 1, TD_DTS_ALL, TD_LAYOUT_CONTIG, "(x, idx[K]) along dim")                                    \
    X(GATHER, 2, 1, 1, TD_DTS_ALL, TD_LAYOUT_CONTIG, "out[..i..] = x[..idx[..i..]..] along dim")                       \
    X(SCATTER_ADD, 3, 1, 1, TD_DTS_NUM, TD_LAYOUT_CONTIG, "(self, idx, src): out = self; out[idx] += src")             \
    X(CAT, -1, 1, 1, TD_DTS_ALL, TD_LAYOUT_ANY, "concatenate inputs along dim")                                        \
    X(ONE_HOT, 1, 1, 0, TD_DTS_NUM, TD_LAYOUT_CONTIG, "int64 idx -> int64 [..., num_classes]")                         \
    X(DROPOUT, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "x * keep/(1-p), keep from Philox")                            \
    /* fused optimizer updates, in place on the outputs */                                                             \
    X(ADAM_STEP, 1, 4, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "grad -> (param, m, v, vmax?) Adam/AdamW")                   \
    X(SGD_STEP, 1, 2, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "grad -> (param, buf?) SGD")                                  \
    X(RMSPROP_STEP, 1, 4, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, "grad -> (param, sq, buf?, gavg?)")

#endif /* TRIDENT_OP_LIST_H */
