/*
** The op table: the single source of truth for Trident's primitive ops.
**
** X(NAME, n_in, n_out, differentiable, dtypes, layout, amp, summary)
**   n_in     inputs the backend reads (-1: variadic, see td_op.n_in)
**   n_out    outputs the backend writes
**   differentiable  1 when autograd has a derivative formula for it
**   dtypes   which dtypes the op is defined for (TD_DTS_*; the dtype of in[0],
**            or of out[0] for ops without inputs)
**   layout   what the core guarantees the backend about strides (TD_LAYOUT_*)
**   amp      what an autocast scope (td_autocast_begin) does to the op's
**            floating inputs (TD_AMP_*), torch.autocast's CUDA op lists
**
** Generated from it: the td_op_kind enum, td_op_name(), the coverage matrix of
** `trident devices --ops`, and the cases the conformance test sweeps.
**
** TD_OP_FACTS(X) holds the rest of what the core knows about each op, one row
** per op in TD_OP_LIST's order (checked where td_op_meta is built):
** X(NAME, gemm, batchable, cost, sig, probe)
**   gemm       1: a GEMM class op; fp32 may use TF32 (TD_OP_FLAG_TF32)
**   batchable  1: held in an optimizer batch and sent through run_many
**   cost       how the profiler counts FLOPs (TD_COST_*); bytes are every
**              operand's stored elements
**   sig        operand dtypes and a probe shape: "in,in,...->out,...", each
**              operand [?]CODE[+][[d0,d1,...]]; ? optional (may be absent),
**              + repeats (a variadic tail), no shape: [2,3] ("?": absent in
**              the probe). CODE: x the op's dtype (the first x operand's, or
**              in[0]'s where none is x), b bool, l int64, i int32 or int64,
**              f float32, s SUM's (int64 for integer x, else x), m bool or x,
**              w float64 for float64 x else float32, a x or, for f16/bf16 x,
**              float32 (a loss accumulated wider than its logits), h x or, for
**              float32 x, f16/bf16 (a narrow operand of f32 math: layer_norm's
**              y under autocast), * any.
**   probe      the probe invocation's td_op_params, its designators in parentheses
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

/* autocast policies (torch.autocast's lists; f64 inputs are never cast) */
#define TD_AMP_KEEP    0 /* as is: runs in the dtype of its inputs */
#define TD_AMP_LOW     1 /* f32 inputs cast to the scope's dtype (f16 or bf16) */
#define TD_AMP_F32     2 /* f16/bf16 inputs cast to f32 */
#define TD_AMP_PROMOTE 3 /* float inputs cast to the widest of them */

#define TD_OP_LIST(X)                                                                                                  \
    /* creation */                                                                                                     \
    X(FILL, 0, 1, 0, TD_DTS_ALL, TD_LAYOUT_ANY, TD_AMP_KEEP, "out = value")                                            \
    X(ARANGE, 0, 1, 0, TD_DTS_NUM, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "out[i] = start + i*step")                           \
    X(RAND, 0, 1, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "uniform [0,1) from Philox(seed, offset)")           \
    X(RANDN, 0, 1, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "normal(0,1) from Philox, Box-Muller")              \
    X(COPY, 1, 1, 1, TD_DTS_ALL, TD_LAYOUT_ANY, TD_AMP_KEEP, "out = cast(in); out may be strided")                     \
    /* binary, broadcast by the core through stride-0 dims */                                                          \
    X(ADD, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a + b")                                                \
    X(SUB, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a - b")                                                \
    X(MUL, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a * b")                                                \
    X(DIV, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a / b")                                              \
    X(POW, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_F32, "a ^ b")                                                  \
    X(MAXIMUM, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "max(a, b), NaN propagates")                        \
    X(MINIMUM, 2, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "min(a, b), NaN propagates")                        \
    X(EQ, 2, 1, 0, TD_DTS_ALL, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a == b -> bool")                                        \
    X(NE, 2, 1, 0, TD_DTS_ALL, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a != b -> bool")                                        \
    X(LT, 2, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a < b -> bool")                                         \
    X(LE, 2, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a <= b -> bool")                                        \
    X(GT, 2, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a > b -> bool")                                         \
    X(GE, 2, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "a >= b -> bool")                                        \
    X(WHERE, 3, 1, 1, TD_DTS_ALL, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "cond ? a : b; in[0] is bool, dtype of in[1]")        \
    /* unary */                                                                                                        \
    X(NEG, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_KEEP, "-x")                                                      \
    X(ABS, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_KEEP, "|x|")                                                     \
    X(EXP, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_F32, "e^x")                                                    \
    X(LOG, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_F32, "ln x")                                                   \
    X(SQRT, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "sqrt x")                                               \
    X(RSQRT, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_F32, "1/sqrt x")                                             \
    X(SIN, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "sin x")                                                 \
    X(COS, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "cos x")                                                 \
    X(TANH, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "tanh x")                                               \
    X(SIGMOID, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "1/(1+e^-x)")                                        \
    X(RELU, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_KEEP, "max(x, 0)")                                              \
    X(GELU, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "x*Phi(x), erf or tanh form")                           \
    X(GELU_BACKWARD, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "dy * gelu'(x); in = (dy, x)")                 \
    X(SILU, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "x*sigmoid(x)")                                         \
    X(CLAMP, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_KEEP, "min(max(x, lo), hi)")                                   \
    /* reductions over a set of dims; out has the input's ndim (reduced dims are 1) */                                 \
    X(SUM, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_F32, "sum; integers accumulate to int64")                        \
    X(MEAN, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "mean")                                                 \
    X(MAX, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_KEEP, "max over dims")                                           \
    X(MIN, 1, 1, 1, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_KEEP, "min over dims")                                           \
    X(ARGMAX, 1, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_KEEP, "int64 index of the first max, one dim")                \
    X(ARGMIN, 1, 1, 0, TD_DTS_NUM, TD_LAYOUT_ANY, TD_AMP_KEEP, "int64 index of the first min, one dim")                \
    X(VAR, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP, "sum((x-mean)^2)/(n-correction)")                        \
    X(LOGSUMEXP, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_F32, "log(sum(exp(x))), max-shifted")                    \
    /* linear algebra and nn primitives */                                                                             \
    X(MATMUL, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_MATRIX, TD_AMP_LOW, "[...,M,K] @ [...,K,N]; batch broadcast")           \
    X(LINEAR, 3, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_LOW, "(x[M,K], w[N,K], b?[N]) -> y = x w^T + b")         \
    X(LINEAR_GELU, 3, 2, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_LOW,                                                \
      "(x[M,K], w[N,K], b?[N]) -> (y = gelu(h), h = x w^T + b)")                                                       \
    /* linear's weight and bias gradients: the bias gradient in the GEMM's epilogue where the backend can */           \
    X(LINEAR_WGRAD, 2, 2, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP,                                              \
      "(dy [M,N], x [M,K]) -> (dw = dy^T x [N,K], db? = sum over M of dy [N]); dw, db: dy's dtype or f32")             \
    /* the MLP's input gradient through fc2 and the GELU (and its bias gradient, sum dh, where the backend can) */     \
    X(LINEAR_DGELU, 3, 2, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP,                                              \
      "(dy [M,N], w [N,K], h [M,K]) -> (dh = (dy w) gelu'(h) [M,K], db? = sum over M of dh [K]); db: dh's or f32")     \
    /* linear into a residual stream, the add in the GEMM (CUDA: r is cuBLASLt's C, beta = 1); autocast casts x */     \
    /* and w only, so y, b and r keep r's dtype: float32 for f16/bf16 x and w, the product not rounded to them */      \
    X(LINEAR_RESIDUAL, 4, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_LOW,                                            \
      "(x [M,K], w [N,K], b? [N], r [M,N]) -> y = x w^T + b + r [M,N]")                                                \
    X(SOFTMAX, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_F32, "softmax over the last dim")                       \
    X(LOG_SOFTMAX, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_F32, "log_softmax over the last dim")               \
    X(SOFTMAX_BACKWARD, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(dy, y) -> y (dy - sum_last(dy y))")    \
    X(LOG_SOFTMAX_BACKWARD, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(dy, y) -> dy - e^y sum_last(dy)")  \
    X(LAYER_NORM, 3, 3, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_F32, "(x,w?,b?) -> (y, mean, rstd) per row")         \
    X(ADD_LAYER_NORM, 4, 4, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_F32,                                             \
      "(x, r, w?, b?) -> (y = layer_norm(s), s = x + r, mean, rstd) per row")                                          \
    /* layer_norm's backward, and add_layer_norm's with the residual's gradient ds passed through; dxn: dx rounded */  \
    /* to dy's f16/bf16 as a COPY rounds it, for add_layer_norm's narrow residual (autocast's) */                      \
    X(LAYER_NORM_BACKWARD, 6, 4, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP,                                       \
      "(dy, x [R,D], w?[D], mean, rstd [R], ds? [R,D]) -> (dx = LN'(dy) + ds, dw?, db? [D], dxn?)")                    \
    X(GROUP_NORM, 3, 3, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_F32,                                                 \
      "(x[N,C,*], w?[C], b?[C]) -> (y, mean[N,G], rstd[N,G]); G from mean")                                            \
    /* lse: each row's logsumexp (f32; f64 for f64), saved so the backward need not find it again (optional) */        \
    X(CROSS_ENTROPY, 3, 2, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_F32,                                              \
      "(logits[N,C], target[N], w?) -> (loss, lse?[N])")                                                               \
    X(CROSS_ENTROPY_BACKWARD, 5, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP,                                    \
      "(dloss, logits, target, w?, lse?) -> dlogits")                                                                  \
    X(CONV2D, 3, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_LOW, "(x[N,C,H,W], w[O,C/g,kh,kw], b?)")                 \
    X(CONV2D_BACKWARD_INPUT, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(dy, w) -> dx")                    \
    X(CONV2D_BACKWARD_WEIGHT, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(dy, x) -> dw")                   \
    X(MAX_POOL2D, 1, 2, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "x -> (y, int64 argmax in H*W)")               \
    X(MAX_POOL2D_BACKWARD, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(dy, indices) -> dx")                \
    X(AVG_POOL2D, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "x -> mean over windows")                      \
    X(AVG_POOL2D_BACKWARD, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "dy -> dx")                           \
    /* indexing */                                                                                                     \
    X(EMBEDDING, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(weight[V,D], idx) -> [...,D]")                \
    X(EMBEDDING_BACKWARD, 2, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(dy, idx) -> dweight, scatter-add")   \
    X(INDEX_SELECT, 2, 1, 1, TD_DTS_ALL, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(x, idx[K]) along dim")                       \
    X(GATHER, 2, 1, 1, TD_DTS_ALL, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "out[..i..] = x[..idx[..i..]..] along dim")          \
    X(SCATTER_ADD, 3, 1, 1, TD_DTS_NUM, TD_LAYOUT_CONTIG, TD_AMP_PROMOTE,                                              \
      "(self, idx, src): out = self; out[idx] += src")                                                                 \
    X(CAT, -1, 1, 1, TD_DTS_ALL, TD_LAYOUT_ANY, TD_AMP_PROMOTE, "concatenate inputs along dim")                        \
    X(ONE_HOT, 1, 1, 0, TD_DTS_NUM, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "int64 idx -> int64 [..., num_classes]")            \
    X(DROPOUT, 1, 1, 1, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "x * keep/(1-p), keep from Philox")               \
    /* fused attention: q/k/v/out [N0,N1,L|S,E], strided where supports() takes them (attn_layout.h) */                \
    X(ATTENTION, 4, 2, 1, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_LOW,                                                     \
      "(q, k, v, mask?) -> (softmax(q k^T s + m) v, lse)")                                                             \
    X(ATTENTION_BACKWARD, 7, 3, 0, TD_DTS_FLOAT, TD_LAYOUT_ANY, TD_AMP_KEEP,                                           \
      "(dout, q, k, v, mask?, out, lse) -> (dq, dk, dv)")                                                              \
    /* fused optimizer updates, in place on the outputs */                                                             \
    /* lr? (0-d, present: the lr read from device memory instead of params) and Adam's step? (0-d f32, the */          \
    /* steps done; present: t = floor(step) + 1 instead of params, then step += 1): the capturable optimizers' */      \
    /* low? (f16/bf16 beside an f32 param): the updated param rounded to it, autocast's shadow (core/shadow.c) */      \
    X(ADAM_STEP, 2, 6, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP,                                                 \
      "(grad, lr?) -> (param, m, v, vmax?, step?, low?) Adam/AdamW")                                                   \
    X(SGD_STEP, 2, 2, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(grad, lr?) -> (param, buf?) SGD")              \
    X(RMSPROP_STEP, 2, 4, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP, "(grad, lr?) -> (param, sq, buf?, gavg?)")   \
    /* mixed precision: the GradScaler's unscale, in place on the outputs */                                           \
    X(AMP_UNSCALE, 0, 2, 0, TD_DTS_FLOAT, TD_LAYOUT_CONTIG, TD_AMP_KEEP,                                               \
      "(grad, found_inf[1] f32): found_inf = 1 if grad has inf/NaN; grad *= inv_scale")

/* cost kinds: FLOPs of one invocation */
#define TD_COST_NONE    0 /* data movement: 0 */
#define TD_COST_ELEM    1 /* one per element of the largest operand */
#define TD_COST_GEMM    2 /* 2 M N K: 2 numel(out[0]) times in[0]'s last dim */
#define TD_COST_CONV    3 /* 2 numel(y) numel(w) / O with y = out[0], w = in[1] */
#define TD_COST_CONV_DX 4 /* the same with y = in[0], w = in[1] */
#define TD_COST_CONV_DW 5 /* the same with y = in[0], w = out[0] */

#define TD_PROBE_CONV .conv = {{1, 1}, {0, 0}, {1, 1}, 1}
#define TD_PROBE_POOL .pool = {{2, 2}, {2, 2}, {0, 0}, true}
#define TD_PROBE_XENT .xent = {-100, 0, TD_REDUCTION_MEAN}
#define TD_ATTN_      "x[1,2,3,4]"
#define TD_ATTN3_     TD_ATTN_ "," TD_ATTN_ "," TD_ATTN_

#define TD_OP_FACTS(X)                                                                                                 \
    X(FILL, 0, 0, TD_COST_NONE, "->x", ())                                                                             \
    X(ARANGE, 0, 0, TD_COST_NONE, "->x", ())                                                                           \
    X(RAND, 0, 0, TD_COST_NONE, "->x", ())                                                                             \
    X(RANDN, 0, 0, TD_COST_NONE, "->x", ())                                                                            \
    X(COPY, 0, 0, TD_COST_NONE, "x->*", ())                                                                            \
    X(ADD, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                                           \
    X(SUB, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                                           \
    X(MUL, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                                           \
    X(DIV, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                                           \
    X(POW, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                                           \
    X(MAXIMUM, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                                       \
    X(MINIMUM, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                                       \
    X(EQ, 0, 0, TD_COST_ELEM, "x,x->b", ())                                                                            \
    X(NE, 0, 0, TD_COST_ELEM, "x,x->b", ())                                                                            \
    X(LT, 0, 0, TD_COST_ELEM, "x,x->b", ())                                                                            \
    X(LE, 0, 0, TD_COST_ELEM, "x,x->b", ())                                                                            \
    X(GT, 0, 0, TD_COST_ELEM, "x,x->b", ())                                                                            \
    X(GE, 0, 0, TD_COST_ELEM, "x,x->b", ())                                                                            \
    X(WHERE, 0, 0, TD_COST_ELEM, "b,x,x->x", ())                                                                       \
    X(NEG, 0, 0, TD_COST_ELEM, "x->x", ())                                                                             \
    X(ABS, 0, 0, TD_COST_ELEM, "x->x", ())                                                                             \
    X(EXP, 0, 0, TD_COST_ELEM, "x->x", ())                                                                             \
    X(LOG, 0, 0, TD_COST_ELEM, "x->x", ())                                                                             \
    X(SQRT, 0, 0, TD_COST_ELEM, "x->x", ())                                                                            \
    X(RSQRT, 0, 0, TD_COST_ELEM, "x->x", ())                                                                           \
    X(SIN, 0, 0, TD_COST_ELEM, "x->x", ())                                                                             \
    X(COS, 0, 0, TD_COST_ELEM, "x->x", ())                                                                             \
    X(TANH, 0, 0, TD_COST_ELEM, "x->x", ())                                                                            \
    X(SIGMOID, 0, 0, TD_COST_ELEM, "x->x", ())                                                                         \
    X(RELU, 0, 0, TD_COST_ELEM, "x->x", ())                                                                            \
    X(GELU, 0, 0, TD_COST_ELEM, "x->x", ())                                                                            \
    X(GELU_BACKWARD, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                                 \
    X(SILU, 0, 0, TD_COST_ELEM, "x->x", ())                                                                            \
    X(CLAMP, 0, 0, TD_COST_ELEM, "x->x", ())                                                                           \
    X(SUM, 0, 0, TD_COST_ELEM, "x->s[1,3]", (.reduce = {1, 0}))                                                        \
    X(MEAN, 0, 0, TD_COST_ELEM, "x->x[1,3]", (.reduce = {1, 0}))                                                       \
    X(MAX, 0, 0, TD_COST_ELEM, "x->x[1,3]", (.reduce = {1, 0}))                                                        \
    X(MIN, 0, 0, TD_COST_ELEM, "x->x[1,3]", (.reduce = {1, 0}))                                                        \
    X(ARGMAX, 0, 0, TD_COST_ELEM, "x->l[1,3]", (.reduce = {1, 0}))                                                     \
    X(ARGMIN, 0, 0, TD_COST_ELEM, "x->l[1,3]", (.reduce = {1, 0}))                                                     \
    X(VAR, 0, 0, TD_COST_ELEM, "x->x[1,3]", (.reduce = {1, 0}))                                                        \
    X(LOGSUMEXP, 0, 0, TD_COST_ELEM, "x->x[1,3]", (.reduce = {1, 0}))                                                  \
    X(MATMUL, 1, 0, TD_COST_GEMM, "x[2,3],x[3,4]->x[2,4]", ())                                                         \
    X(LINEAR, 1, 0, TD_COST_GEMM, "x[2,3],x[4,3],?x[4]->x[2,4]", ())                                                   \
    X(LINEAR_GELU, 1, 0, TD_COST_GEMM, "x[2,3],x[4,3],?x[4]->x[2,4],x[2,4]", ())                                       \
    X(LINEAR_WGRAD, 1, 0, TD_COST_CONV_DW, "x[2,4],x[2,3]->a[4,3],?a[4]", ())                                          \
    X(LINEAR_DGELU, 1, 0, TD_COST_GEMM, "x[2,4],x[4,3],x[2,3]->x[2,3],?a[3]", ())                                      \
    X(LINEAR_RESIDUAL, 1, 0, TD_COST_GEMM, "x[2,3],x[4,3],?a[4],a[2,4]->a[2,4]", ())                                   \
    X(SOFTMAX, 0, 0, TD_COST_ELEM, "x->x", ())                                                                         \
    X(LOG_SOFTMAX, 0, 0, TD_COST_ELEM, "x->x", ())                                                                     \
    X(SOFTMAX_BACKWARD, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                              \
    X(LOG_SOFTMAX_BACKWARD, 0, 0, TD_COST_ELEM, "x,x->x", ())                                                          \
    X(LAYER_NORM, 0, 0, TD_COST_ELEM, "x,?x[3],?x[3]->h,x[2],x[2]", (.norm = {1e-5}))                                  \
    X(ADD_LAYER_NORM, 0, 0, TD_COST_ELEM, "x,h,?x[3],?x[3]->h,x,x[2],x[2]", (.norm = {1e-5}))                          \
    X(LAYER_NORM_BACKWARD, 0, 0, TD_COST_ELEM, "h,x,?x[3],x[2],x[2],?x->x,?x[3],?x[3],?h", ())                         \
    X(GROUP_NORM, 0, 0, TD_COST_ELEM, "x[2,4,3],?x[4],?x[4]->x[2,4,3],x[2,2],x[2,2]", (.norm = {1e-5}))                \
    X(CROSS_ENTROPY, 0, 0, TD_COST_ELEM, "x,l[2],?x->a[],?w[2]", (TD_PROBE_XENT))                                      \
    X(CROSS_ENTROPY_BACKWARD, 0, 0, TD_COST_ELEM, "a[],x,l[2],?x,?w[2]->x", (TD_PROBE_XENT))                           \
    X(CONV2D, 1, 0, TD_COST_CONV, "x[1,2,4,4],x[3,2,3,3],?x[3]->x[1,3,2,2]", (TD_PROBE_CONV))                          \
    X(CONV2D_BACKWARD_INPUT, 1, 0, TD_COST_CONV_DX, "x[1,3,2,2],x[3,2,3,3]->x[1,2,4,4]", (TD_PROBE_CONV))              \
    X(CONV2D_BACKWARD_WEIGHT, 1, 0, TD_COST_CONV_DW, "x[1,3,2,2],x[1,2,4,4]->x[3,2,3,3]", (TD_PROBE_CONV))             \
    X(MAX_POOL2D, 0, 0, TD_COST_ELEM, "x[1,2,4,4]->x[1,2,2,2],l[1,2,2,2]", (TD_PROBE_POOL))                            \
    X(MAX_POOL2D_BACKWARD, 0, 0, TD_COST_ELEM, "x[1,2,2,2],l[1,2,2,2]->x[1,2,4,4]", (TD_PROBE_POOL))                   \
    X(AVG_POOL2D, 0, 0, TD_COST_ELEM, "x[1,2,4,4]->x[1,2,2,2]", (TD_PROBE_POOL))                                       \
    X(AVG_POOL2D_BACKWARD, 0, 0, TD_COST_ELEM, "x[1,2,2,2]->x[1,2,4,4]", (TD_PROBE_POOL))                              \
    X(EMBEDDING, 0, 0, TD_COST_NONE, "x[5,3],i[2]->x", ())                                                             \
    X(EMBEDDING_BACKWARD, 0, 0, TD_COST_NONE, "x,i[2]->x[5,3]", (.embedding = {-1}))                                   \
    X(INDEX_SELECT, 0, 0, TD_COST_NONE, "x[4,3],i[2]->x", ())                                                          \
    X(GATHER, 0, 0, TD_COST_NONE, "x[4,3],i->x", ())                                                                   \
    X(SCATTER_ADD, 0, 0, TD_COST_NONE, "x[4,3],i,x->x[4,3]", ())                                                       \
    X(CAT, 0, 0, TD_COST_NONE, "x+->x[4,3]", ())                                                                       \
    X(ONE_HOT, 0, 0, TD_COST_NONE, "i[2]->l[2,5]", (.one_hot = {5}))                                                   \
    X(DROPOUT, 0, 0, TD_COST_ELEM, "x->x", (.rng = {0, 0, 0.5}))                                                       \
    X(ATTENTION, 0, 0, TD_COST_ELEM, TD_ATTN3_ ",?m->" TD_ATTN_ ",w[1,2,3]", (.attn = {.scale = 0.5}))                 \
    X(ATTENTION_BACKWARD, 0, 0, TD_COST_ELEM, TD_ATTN_ "," TD_ATTN3_ ",?m," TD_ATTN_ ",w[1,2,3]->" TD_ATTN3_,          \
      (.attn = {.scale = 0.5}))                                                                                        \
    X(ADAM_STEP, 0, 1, TD_COST_ELEM, "x,?w[]->x,x,x,?x,?f[],?h",                                                       \
      (.adam = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step = 1}))                                    \
    X(SGD_STEP, 0, 1, TD_COST_ELEM, "x,?w[]->x,?x", (.sgd = {.lr = 0.1}))                                              \
    X(RMSPROP_STEP, 0, 0, TD_COST_ELEM, "x,?w[]->x,x,?x,?x", (.rmsprop = {.lr = 1e-2, .alpha = 0.99, .eps = 1e-8}))    \
    X(AMP_UNSCALE, 0, 1, TD_COST_ELEM, "->x,f[1]", (.amp = {1.0 / 1024}))

/* One operand of a signature (TD_OP_FACTS' sig). */
typedef struct td_sig_arg {
    char code;    /* x b l i f s m w a h * */
    int optional; /* may be absent (buf NULL) */
    int repeat;   /* the rest of the operands are like this one */
    int ndim;     /* the probe shape's; -1: absent in the probe */
    long long shape[8];
} td_sig_arg;

/* Parse the operand at *s into *a and step past it; 0 at "->" (then stepped
** past) or at the end. */
static inline int td_sig_next(const char **s, td_sig_arg *a) {
    const char *p = *s;
    if (*p == ',') p++;
    if (!*p || (p[0] == '-' && p[1] == '>')) {
        *s = *p ? p + 2 : p;
        return 0;
    }
    a->optional = *p == '?';
    if (a->optional) p++;
    a->code = *p++;
    a->repeat = *p == '+';
    if (a->repeat) p++;
    a->ndim = a->optional ? -1 : 2;
    a->shape[0] = 2, a->shape[1] = 3;
    if (*p == '[') {
        a->ndim = 0;
        for (p++; *p >= '0' && *p <= '9'; p += *p == ',') {
            long long v = 0;
            while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
            if (a->ndim < 8) a->shape[a->ndim++] = v;
        }
        if (*p == ']') p++;
    }
    *s = p;
    return 1;
}

#endif /* TRIDENT_OP_LIST_H */
