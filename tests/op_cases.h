/*
** The op cases every op test shares, made from the op table's facts
** (include/trident/op_list.h, TD_OP_FACTS): for each op and dtype, a small
** valid invocation (the sig's probe shapes, int64 indices, f32 flags, absent
** optional operands, the probe's params). `trident devices --ops` asks each
** backend's supports() about it; the tests run it (test_vulkan_ops against
** the CPU, test_conformance checks the table against every case it sweeps).
** Header-only: tools/devices.c and the tests include it.
*/
#ifndef TRIDENT_TESTS_OP_CASES_H
#define TRIDENT_TESTS_OP_CASES_H

#include <stdbool.h>
#include <string.h>

#include "trident/backend.h"

enum { OP_CASE_MAX = 8 }; /* operands of each side */

typedef struct op_case {
    td_op op;
    td_operand in[OP_CASE_MAX], out[OP_CASE_MAX];
} op_case;

/* The dtype a sig code gives an operand of the case with op dtype dt. */
static inline td_dtype op_case_dtype(char code, td_dtype dt) {
    switch (code) {
    case 'b': return TD_BOOL;
    case 'l':
    case 'i': return TD_I64;
    case 'f': return TD_F32;
    case 's': return td_dtype_is_float(dt) ? dt : TD_I64;
    case 'w': return dt == TD_F64 ? TD_F64 : TD_F32;
    default: return dt;
    }
}

/* Whether dt is one of op k's dtypes: its dtype class, and for an op whose
** dtype operand is an index (ONE_HOT), an index dtype. */
static inline bool op_case_has_dtype(td_op_kind k, td_dtype dt) {
    const td_op_meta *m = td_op_info(k);
    bool cls = m->dtypes == TD_DTS_ALL || (m->dtypes == TD_DTS_NUM && dt != TD_BOOL) ||
               (m->dtypes == TD_DTS_FLOAT && td_dtype_is_float(dt));
    const char *s = m->sig;
    td_sig_arg a;
    bool index_op = !strchr(m->sig, 'x') && td_sig_next(&s, &a) && a.code == 'i';
    return cls && (!index_op || dt == TD_I32 || dt == TD_I64);
}

/* Case k at dtype dt into *c; operands are contiguous views of buf (NULL:
** geometry only, every present operand gets a dummy non-NULL buffer). */
static inline void op_case_make(td_op_kind k, td_dtype dt, op_case *c, td_buffer *buf) {
    static char dummy;
    const td_op_meta *m = td_op_info(k);
    memset(c, 0, sizeof *c);
    c->op = (td_op){.kind = k, .in = c->in, .out = c->out, .p = *m->probe};
    bool has_x = strchr(m->sig, 'x') != NULL;
    const char *s = m->sig;
    td_sig_arg a;
    for (int side = 0; side < 2; side++) {
        int n = 0;
        while (td_sig_next(&s, &a)) {
            for (int rep = 0; rep < (a.repeat ? 2 : 1) && n < OP_CASE_MAX; rep++, n++) {
                td_operand *v = side ? &c->out[n] : &c->in[n];
                if (a.ndim < 0) continue;
                v->buf = buf ? buf : (td_buffer *)&dummy;
                v->dtype = !has_x && !side && !n ? dt : op_case_dtype(a.code, dt);
                v->ndim = a.ndim;
                int64_t stride = 1;
                for (int d = a.ndim - 1; d >= 0; d--) {
                    v->shape[d] = a.shape[d];
                    v->strides[d] = stride;
                    stride *= a.shape[d];
                }
            }
        }
        *(side ? &c->op.n_out : &c->op.n_in) = n;
    }
}

/* clang-format off */
/* The op-case table: one row per op of the op table, for every op test.
** X(case name, op kind, conformance dtypes (CONF_CLASS: the op's class), conformance NMSE limits, autograd, ...)
**   autograd: NONE (not differentiable), CHECK (a gradcheck case), GRADGRAD (a
**   fused backward op: a gradcheck case, and gradgradcheck of its forward
**   runs it), REFUSED (a fused backward op with no derivative of its own:
**   create_graph through its forward composes the backward from ops instead)
** The extra arguments pass through to X. test_conformance and `trident devices
** --selftest` run a conformance case per row (case_<name>), test_gradcheck a
** gradcheck case per CHECK and GRADGRAD row (its op kind's name). */
#define OP_CASES(X, ...) \
    X(fill, FILL, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(arange, ARANGE, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(rand, RAND, CONF_CLASS, TOL_ROUND, NONE, __VA_ARGS__) \
    X(randn, RANDN, CONF_CLASS, TOL_TRANS, NONE, __VA_ARGS__) \
    X(copy, COPY, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(add, ADD, CONF_CLASS, TOL_ROUND, CHECK, __VA_ARGS__) \
    X(sub, SUB, CONF_CLASS, TOL_ROUND, CHECK, __VA_ARGS__) \
    X(mul, MUL, CONF_CLASS, TOL_ROUND, CHECK, __VA_ARGS__) \
    X(div, DIV, CONF_CLASS, TOL_ROUND, CHECK, __VA_ARGS__) \
    X(pow, POW, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(maximum, MAXIMUM, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(minimum, MINIMUM, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(eq, EQ, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(ne, NE, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(lt, LT, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(le, LE, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(gt, GT, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(ge, GE, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(where, WHERE, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(neg, NEG, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(abs, ABS, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(exp, EXP, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(log, LOG, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(sqrt, SQRT, CONF_CLASS, TOL_ROUND, CHECK, __VA_ARGS__) \
    X(rsqrt, RSQRT, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(sin, SIN, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(cos, COS, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(tanh, TANH, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(sigmoid, SIGMOID, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(relu, RELU, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(gelu, GELU, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(gelu_backward, GELU_BACKWARD, CONF_CLASS, TOL_TRANS, GRADGRAD, __VA_ARGS__) \
    X(silu, SILU, CONF_CLASS, TOL_TRANS, CHECK, __VA_ARGS__) \
    X(clamp, CLAMP, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(sum, SUM, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(mean, MEAN, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(amax, MAX, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(amin, MIN, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(argmax, ARGMAX, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(argmin, ARGMIN, CONF_CLASS, TOL_EXACT, NONE, __VA_ARGS__) \
    X(var, VAR, CONF_CLASS, TOL_LOOSE, CHECK, __VA_ARGS__) \
    X(logsumexp, LOGSUMEXP, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(matmul, MATMUL, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(linear, LINEAR, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(linear_gelu, LINEAR_GELU, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(linear_wgrad, LINEAR_WGRAD, CONF_CLASS, TOL_ACCUM, NONE, __VA_ARGS__) \
    X(linear_dgelu, LINEAR_DGELU, CONF_CLASS, TOL_ACCUM, NONE, __VA_ARGS__) \
    X(linear_residual, LINEAR_RESIDUAL, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(softmax, SOFTMAX, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(log_softmax, LOG_SOFTMAX, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(softmax_backward, SOFTMAX_BACKWARD, CONF_CLASS, TOL_ACCUM, GRADGRAD, __VA_ARGS__) \
    X(log_softmax_backward, LOG_SOFTMAX_BACKWARD, CONF_CLASS, TOL_ACCUM, GRADGRAD, __VA_ARGS__) \
    X(layer_norm, LAYER_NORM, CONF_CLASS, TOL_LOOSE, CHECK, __VA_ARGS__) \
    X(add_layer_norm, ADD_LAYER_NORM, CONF_CLASS, TOL_LOOSE, CHECK, __VA_ARGS__) \
    X(layer_norm_backward, LAYER_NORM_BACKWARD, CONF_CLASS, TOL_LOOSE, REFUSED, __VA_ARGS__) \
    X(group_norm, GROUP_NORM, CONF_CLASS, TOL_LOOSE, CHECK, __VA_ARGS__) \
    X(cross_entropy, CROSS_ENTROPY, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(cross_entropy_backward, CROSS_ENTROPY_BACKWARD, CONF_CLASS, TOL_ACCUM, GRADGRAD, __VA_ARGS__) \
    X(conv2d, CONV2D, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(conv2d_backward_input, CONV2D_BACKWARD_INPUT, CONF_CLASS, TOL_ACCUM, GRADGRAD, __VA_ARGS__) \
    X(conv2d_backward_weight, CONV2D_BACKWARD_WEIGHT, CONF_CLASS, TOL_ACCUM, GRADGRAD, __VA_ARGS__) \
    X(max_pool2d, MAX_POOL2D, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(max_pool2d_backward, MAX_POOL2D_BACKWARD, CONF_CLASS, TOL_ROUND, GRADGRAD, __VA_ARGS__) \
    X(avg_pool2d, AVG_POOL2D, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(avg_pool2d_backward, AVG_POOL2D_BACKWARD, CONF_CLASS, TOL_ACCUM, GRADGRAD, __VA_ARGS__) \
    X(embedding, EMBEDDING, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(embedding_backward, EMBEDDING_BACKWARD, CONF_CLASS, TOL_ACCUM, GRADGRAD, __VA_ARGS__) \
    X(index_select, INDEX_SELECT, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(gather, GATHER, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(scatter_add, SCATTER_ADD, CONF_CLASS, TOL_LOOSE, CHECK, __VA_ARGS__) \
    X(cat, CAT, CONF_CLASS, TOL_EXACT, CHECK, __VA_ARGS__) \
    X(one_hot, ONE_HOT, CONF_DT(I32) | CONF_DT(I64), TOL_EXACT, NONE, __VA_ARGS__) \
    X(dropout, DROPOUT, CONF_CLASS, TOL_ROUND, CHECK, __VA_ARGS__) \
    X(attention, ATTENTION, CONF_CLASS, TOL_ACCUM, CHECK, __VA_ARGS__) \
    X(attention_backward, ATTENTION_BACKWARD, CONF_CLASS, TOL_LOOSE, REFUSED, __VA_ARGS__) \
    X(adam, ADAM_STEP, CONF_CLASS, TOL_LOOSE, NONE, __VA_ARGS__) \
    X(amp_unscale, AMP_UNSCALE, CONF_CLASS, TOL_ROUND, NONE, __VA_ARGS__) \
    X(sgd, SGD_STEP, CONF_CLASS, TOL_ROUND, NONE, __VA_ARGS__) \
    X(rmsprop, RMSPROP_STEP, CONF_CLASS, TOL_LOOSE, NONE, __VA_ARGS__)
/* clang-format on */

#endif /* TRIDENT_TESTS_OP_CASES_H */
