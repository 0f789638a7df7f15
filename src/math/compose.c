/*
** A typed math graph evaluated with the table ops, one op (or a short chain)
** per node: the composed reference the fused plan is checked against, and the
** executor until the fuser runs a block. Ops record autograd as they always do.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "math_internal.h"
#include "trident/nn.h"
#include "trident/ops.h"

/* softplus(x) = log(1 + e^x) = relu(x) + log(1 + e^-|x|): no overflow, a finite gradient everywhere
** (torch returns x itself above 20, where the two differ by less than e^-20). */
static td_tensor *softplus(td_tensor *x) {
    return td_add(td_relu(x), td_log(td_add_scalar(td_exp(td_neg(td_abs(x))), 1.0)));
}

/* erf(u) = 2 Phi(z) - 1 with z = u sqrt(2), and Phi(z) = gelu(z) / z (z != 0; erf(0) = 0). */
static td_tensor *erf_of(td_tensor *u) {
    td_tensor *z = td_mul_scalar(u, M_SQRT2);
    td_tensor *zero = td_eq(z, td_scalar(0, td_tensor_dtype(z), td_tensor_device(z)));
    td_tensor *zs = td_where(zero, td_scalar(1, td_tensor_dtype(z), td_tensor_device(z)), z);
    td_tensor *e = td_sub_scalar(td_mul_scalar(td_div(td_gelu(zs, false), zs), 2.0), 1.0);
    return td_where(zero, td_scalar(0, td_tensor_dtype(z), td_tensor_device(z)), e);
}

/* sign(x) = (x > 0) - (x < 0) in x's dtype */
static td_tensor *sign_of(td_tensor *x) {
    td_dtype dt = td_tensor_dtype(x);
    td_tensor *zero = td_scalar(0, dt, td_tensor_device(x));
    return td_sub(td_cast(td_gt(x, zero), dt), td_cast(td_lt(x, zero), dt));
}

static td_tensor *eval_ew(const td_math_graph *g, const td_math_node *n, td_tensor *const *v) {
    td_dtype ct = n->dtype; /* the dtype the op computes in */
    if (n->op >= TD_MEW_LT && n->op <= TD_MEW_NE) ct = td_math_result_type(g, 2, n->args);
    td_tensor *x[TD_MATH_MAX_ARGS] = {0};
    td_device dev = TD_CPU;
    for (int i = 0; i < n->n_args; i++)
        if (g->nodes[n->args[i]].kind != TD_MK_CONST) dev = td_tensor_device(v[i]);
    for (int i = 0; i < n->n_args; i++) {
        const td_math_node *a = &g->nodes[n->args[i]];
        bool cond = n->op == TD_MEW_WHERE && i == 0;
        if (n->op == TD_MEW_CAST)
            x[i] = v[i];
        else if (a->kind == TD_MK_CONST)
            x[i] = td_scalar(a->value, cond ? TD_BOOL : ct, dev);
        else
            x[i] = cond ? v[i] : td_cast(v[i], ct);
    }
    switch ((td_math_ew)n->op) {
    case TD_MEW_NEG: return td_neg(x[0]);
    case TD_MEW_ABS: return td_abs(x[0]);
    case TD_MEW_EXP: return td_exp(x[0]);
    case TD_MEW_LOG: return td_log(x[0]);
    case TD_MEW_SQRT: return td_sqrt(x[0]);
    case TD_MEW_RSQRT: return td_rsqrt(x[0]);
    case TD_MEW_SIN: return td_sin(x[0]);
    case TD_MEW_COS: return td_cos(x[0]);
    case TD_MEW_TANH: return td_tanh(x[0]);
    case TD_MEW_SIGMOID: return td_sigmoid(x[0]);
    case TD_MEW_RELU: return td_relu(x[0]);
    case TD_MEW_GELU: return td_gelu(x[0], false);
    case TD_MEW_SILU: return td_silu(x[0]);
    case TD_MEW_SOFTPLUS: return softplus(x[0]);
    case TD_MEW_ERF: return erf_of(x[0]);
    case TD_MEW_SIGN: return sign_of(x[0]);
    case TD_MEW_CAST: return td_cast(x[0], n->dtype);
    case TD_MEW_ADD: return td_add(x[0], x[1]);
    case TD_MEW_SUB: return td_sub(x[0], x[1]);
    case TD_MEW_MUL: return td_mul(x[0], x[1]);
    case TD_MEW_DIV: return td_div(x[0], x[1]);
    case TD_MEW_POW:
        if (g->nodes[n->args[1]].kind == TD_MK_CONST) return td_pow_scalar(x[0], g->nodes[n->args[1]].value);
        return td_pow(x[0], x[1]);
    case TD_MEW_MIN: return td_minimum(x[0], x[1]);
    case TD_MEW_MAX: return td_maximum(x[0], x[1]);
    case TD_MEW_LT: return td_lt(x[0], x[1]);
    case TD_MEW_LE: return td_le(x[0], x[1]);
    case TD_MEW_GT: return td_gt(x[0], x[1]);
    case TD_MEW_GE: return td_ge(x[0], x[1]);
    case TD_MEW_EQ: return td_eq(x[0], x[1]);
    case TD_MEW_NE: return td_ne(x[0], x[1]);
    case TD_MEW_WHERE: return td_where(x[0], x[1], x[2]);
    case TD_MEW_CLAMP: {
        const td_math_node *lo = &g->nodes[n->args[1]], *hi = &g->nodes[n->args[2]];
        if (lo->kind == TD_MK_CONST && hi->kind == TD_MK_CONST) return td_clamp(x[0], lo->value, hi->value);
        return td_minimum(td_maximum(x[0], x[1]), x[2]);
    }
    default: TD_FAIL_NULL(TD_ERR_MISUSE, "math block: elementwise op %d", n->op);
    }
}

static td_tensor *eval_reduce(const td_math_node *n, td_tensor *x) {
    int dims[TD_MAX_DIMS], nd = 0;
    for (int d = 0; d < TD_MAX_DIMS; d++)
        if ((n->dims >> d) & 1) dims[nd++] = d;
    td_dtype in = td_tensor_dtype(x);
    if (n->op == TD_MRED_SUM && in == TD_BOOL) x = td_cast(x, TD_I64);
    if (n->op == TD_MRED_LOGSUMEXP && !td_dtype_is_float(in)) x = td_cast(x, TD_F32);
    switch ((td_math_red)n->op) {
    case TD_MRED_SUM: return td_sum(x, nd, dims, n->keepdim);
    case TD_MRED_MEAN: return td_mean(x, nd, dims, n->keepdim);
    case TD_MRED_AMAX: return td_amax(x, nd, dims, n->keepdim);
    case TD_MRED_AMIN: return td_amin(x, nd, dims, n->keepdim);
    case TD_MRED_VAR: return td_var(x, nd, dims, n->correction, n->keepdim);
    case TD_MRED_LOGSUMEXP: return td_logsumexp(x, nd, dims, n->keepdim);
    default: TD_FAIL_NULL(TD_ERR_MISUSE, "math block: reduction %d", n->op);
    }
}

static td_tensor *eval_node(const td_math_graph *g, const td_math_node *n, td_tensor *const *v) {
    switch (n->kind) {
    case TD_MK_INPUT: return td__scope_add(td_retain(v[0]));
    case TD_MK_CONST: return td_scalar(n->value, n->dtype, TD_CPU);
    case TD_MK_EW: return eval_ew(g, n, v);
    case TD_MK_REDUCE: return eval_reduce(n, v[0]);
    case TD_MK_SOFTMAX: return td_softmax(v[0], n->dim);
    case TD_MK_LOG_SOFTMAX: return td_log_softmax(v[0], n->dim);
    case TD_MK_MATMUL: return td_matmul(v[0], v[1]);
    case TD_MK_TRANSPOSE: return td_transpose(v[0], -2, -1);
    case TD_MK_EXPAND: return td_expand(v[0], n->ndim, n->shape);
    case TD_MK_RESHAPE: return td_reshape(v[0], n->ndim, n->shape);
    case TD_MK_ONE_HOT: return td_cast(td_one_hot(td_cast(v[0], TD_I64), n->classes), n->dtype);
    case TD_MK_CROSS_ENTROPY:
        return td_cross_entropy_loss(v[0], td_cast(v[1], TD_I64), NULL, -100, 0.0, TD_REDUCE_MEAN);
    case TD_MK_LAYER_NORM: return td_layer_norm(v[0], 1, v[1], n->args[2] >= 0 ? v[2] : NULL, n->value);
    default: TD_FAIL_NULL(TD_ERR_MISUSE, "math block: node kind %d", (int)n->kind);
    }
}

td_tensor *td_math_node_eval(const td_math_graph *g, int node, td_tensor *const *args) {
    if (!g || node < 0 || node >= g->n_nodes || !g->typed) TD_FAIL_NULL(TD_ERR_MISUSE, "math block: bad node %d", node);
    const td_math_node *n = &g->nodes[node];
    for (int i = 0; i < n->n_args; i++)
        if (n->args[i] >= 0 && g->nodes[n->args[i]].kind != TD_MK_CONST && !args[i])
            TD_FAIL_NULL(td_last_status() ? td_last_status() : TD_ERR_MISUSE,
                         "math block: argument %d of node %d is NULL", i, node);
    td_scope_begin();
    td_tensor *y = eval_node(g, n, args);
    /* the safety net that makes the composed dtype the specialized one */
    if (y && td_tensor_dtype(y) != n->dtype) y = td_cast(y, n->dtype);
    return td__scope_end_keep(y);
}

td_status td_math_graph_eval(const td_math_graph *g, td_tensor *const *inputs, td_tensor **outputs) {
    if (!g) return TD_ERR(TD_ERR_MISUSE, "math block: NULL graph");
    return td_math_graph_eval_nodes(g, inputs, g->n_outputs, g->outputs, outputs);
}

td_status td_math_graph_eval_nodes(const td_math_graph *g, td_tensor *const *inputs, int n_out, const int *nodes,
                                   td_tensor **outputs) {
    if (!g || !g->typed || !outputs) return TD_ERR(TD_ERR_MISUSE, "math block: evaluating an untyped graph");
    for (int k = 0; k < n_out; k++) outputs[k] = NULL;
    int nn = g->n_nodes;
    td_tensor **val = calloc((size_t)nn + 1, sizeof *val);
    int *last = malloc(((size_t)nn + 1) * sizeof *last);
    if (!val || !last) {
        free(val), free(last);
        return TD_ERR(TD_ERR_OOM, "math block: out of memory");
    }
    /* last[i]: the last node reading i (nn for an output, -1 when unused) */
    for (int i = 0; i < nn; i++) last[i] = -1;
    for (int k = 0; k < n_out; k++) last[nodes[k]] = nn;
    for (int i = nn; i-- > 0;) {
        if (last[i] < 0) continue;
        const td_math_node *n = &g->nodes[i];
        for (int a = 0; a < n->n_args; a++)
            if (n->args[a] >= 0 && last[n->args[a]] < 0) last[n->args[a]] = i; /* the first seen from the end */
    }
    td_status st = TD_OK;
    td__autocast_suspend(true); /* autocast's casts are nodes of g already (td_math_graph_autocast) */
    for (int i = 0; i < nn && !st; i++) {
        if (last[i] < 0) continue;
        const td_math_node *n = &g->nodes[i];
        if (n->kind == TD_MK_INPUT) {
            if (!inputs[n->input]) {
                st = TD_ERR(TD_ERR_MISUSE, "math block: input '%s' is NULL",
                            g->input_names[n->input] ? g->input_names[n->input] : "?");
                break;
            }
            val[i] = td_retain(inputs[n->input]);
            continue;
        }
        td_tensor *args[TD_MATH_MAX_ARGS] = {0};
        for (int a = 0; a < n->n_args; a++) args[a] = n->args[a] >= 0 ? val[n->args[a]] : NULL;
        val[i] = td_keep(td_math_node_eval(g, i, args));
        if (!val[i]) st = td_last_status() ? td_last_status() : TD_ERR_MISUSE;
        for (int a = 0; a < n->n_args; a++) {
            int j = n->args[a];
            if (j >= 0 && last[j] == i && val[j]) td_release(val[j]), val[j] = NULL;
        }
    }
    td__autocast_suspend(false);
    for (int k = 0; k < n_out && !st; k++) outputs[k] = td__scope_add(td_retain(val[nodes[k]]));
    for (int i = 0; i < nn; i++) td_release(val[i]);
    free(val), free(last);
    return st;
}
