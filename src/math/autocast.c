/*
** Autocast inside a math block: a typed graph rewritten with the casts that
** an autocast scope (include/trident/amp.h) makes when each node runs as its
** table op, by the amp column of TD_OP_LIST: a matmul's f32 operands go to
** the scope's low dtype, exp / log / sum / softmax / cross-entropy / ... take
** f16 and bf16 to f32, the binary ops cast their float operands to the widest
** of them, the rest keep their dtypes. Literals and bound numbers are not
** tensors to the ops and are never cast; f64 never is either. The dtypes that
** follow are derived again node by node (td_math_add_typed), so every
** executor (composed ops, fused plan) runs the graph as it is typed.
*/
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "math_internal.h"

/* The TD_AMP_* policy of the table op (or chain) that runs node n. */
static int policy(const td_math_graph *g, const td_math_node *n) {
    td_op_kind k;
    switch (n->kind) {
    case TD_MK_MATMUL: k = TD_OP_MATMUL; break;
    case TD_MK_SOFTMAX: k = TD_OP_SOFTMAX; break;
    case TD_MK_LOG_SOFTMAX: k = TD_OP_LOG_SOFTMAX; break;
    case TD_MK_CROSS_ENTROPY: k = TD_OP_CROSS_ENTROPY; break;
    case TD_MK_LAYER_NORM: k = TD_OP_LAYER_NORM; break;
    case TD_MK_REDUCE: {
        static const td_op_kind red[] = {
            [TD_MRED_SUM] = TD_OP_SUM,  [TD_MRED_MEAN] = TD_OP_MEAN, [TD_MRED_AMAX] = TD_OP_MAX,
            [TD_MRED_AMIN] = TD_OP_MIN, [TD_MRED_VAR] = TD_OP_VAR,   [TD_MRED_LOGSUMEXP] = TD_OP_LOGSUMEXP};
        k = red[n->op];
        break;
    }
    case TD_MK_EW:
        switch ((td_math_ew)n->op) {
        case TD_MEW_NEG: k = TD_OP_NEG; break;
        case TD_MEW_ABS: k = TD_OP_ABS; break;
        case TD_MEW_EXP: k = TD_OP_EXP; break;
        case TD_MEW_LOG: k = TD_OP_LOG; break;
        case TD_MEW_SQRT: k = TD_OP_SQRT; break;
        case TD_MEW_RSQRT: k = TD_OP_RSQRT; break;
        case TD_MEW_SIN: k = TD_OP_SIN; break;
        case TD_MEW_COS: k = TD_OP_COS; break;
        case TD_MEW_TANH: k = TD_OP_TANH; break;
        case TD_MEW_SIGMOID: k = TD_OP_SIGMOID; break;
        case TD_MEW_RELU: k = TD_OP_RELU; break;
        case TD_MEW_GELU: k = TD_OP_GELU; break;
        case TD_MEW_SILU: k = TD_OP_SILU; break;
        case TD_MEW_SOFTPLUS: return TD_AMP_F32; /* composed through exp and log (torch: softplus is f32 too) */
        case TD_MEW_ADD: k = TD_OP_ADD; break;
        case TD_MEW_SUB: k = TD_OP_SUB; break;
        case TD_MEW_MUL: k = TD_OP_MUL; break;
        case TD_MEW_DIV: k = TD_OP_DIV; break;
        case TD_MEW_POW: k = TD_OP_POW; break;
        case TD_MEW_MIN: k = TD_OP_MINIMUM; break;
        case TD_MEW_MAX: k = TD_OP_MAXIMUM; break;
        case TD_MEW_LT: k = TD_OP_LT; break;
        case TD_MEW_LE: k = TD_OP_LE; break;
        case TD_MEW_GT: k = TD_OP_GT; break;
        case TD_MEW_GE: k = TD_OP_GE; break;
        case TD_MEW_EQ: k = TD_OP_EQ; break;
        case TD_MEW_NE: k = TD_OP_NE; break;
        case TD_MEW_WHERE: k = TD_OP_WHERE; break;
        case TD_MEW_CLAMP: /* constant bounds: the clamp op; tensor bounds: maximum then minimum */
            k = g->nodes[n->args[1]].kind == TD_MK_CONST && g->nodes[n->args[2]].kind == TD_MK_CONST ? TD_OP_CLAMP
                                                                                                     : TD_OP_MAXIMUM;
            break;
        default: return TD_AMP_KEEP; /* ERF, SIGN, CAST: derived graphs only */
        }
        break;
    default: return TD_AMP_KEEP; /* inputs, literals, views */
    }
    const td_op_meta *m = td_op_info(k);
    return m ? m->amp : TD_AMP_KEEP;
}

/* A tensor operand the op would cast: a float value, not a literal or a bound number. */
static bool castable(const td_math_node *a) { return a->prio != 0 && td_dtype_is_float(a->dtype); }

static int cast_to(td_math_graph *out, int a, td_dtype dt) {
    if (out->nodes[a].dtype == dt) return a;
    td_math_node c = {.kind = TD_MK_EW, .op = TD_MEW_CAST, .n_args = 1, .args = {a, -1, -1}, .dtype = dt};
    c.src_off = out->nodes[a].src_off, c.src_len = out->nodes[a].src_len;
    return td_math_add_typed(out, &c);
}

td_status td_math_graph_autocast(const td_math_graph *g, td_dtype low, td_math_graph *out) {
    td_math_graph_init(out);
    int *map = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    out->source = g->source ? strdup(g->source) : NULL;
    td_status st = !map || (g->source && !out->source) ? TD_ERR(TD_ERR_OOM, "math block: out of memory") : TD_OK;
    for (int k = 0; k < g->n_inputs && !st; k++) {
        out->input_names[k] = strdup(g->input_names[k]);
        if (!out->input_names[k]) st = TD_ERR(TD_ERR_OOM, "math block: out of memory");
        out->n_inputs = k + 1;
        out->input_src_off[k] = g->input_src_off[k], out->input_src_len[k] = g->input_src_len[k];
    }
    out->weak_inputs = g->weak_inputs;
    for (int i = 0; i < g->n_nodes && !st; i++) {
        td_math_node n = g->nodes[i];
        for (int a = 0; a < n.n_args; a++)
            if (n.args[a] >= 0) n.args[a] = map[n.args[a]];
        int pol = policy(g, &g->nodes[i]);
        td_dtype widest = TD_F16;
        bool any = false;
        for (int a = 0; a < n.n_args; a++) {
            const td_math_node *x = n.args[a] >= 0 ? &out->nodes[n.args[a]] : NULL;
            if (x && castable(x)) widest = any ? td_dtype_promote(widest, x->dtype) : x->dtype, any = true;
        }
        for (int a = 0; a < n.n_args && pol != TD_AMP_KEEP; a++) {
            const td_math_node *x = n.args[a] >= 0 ? &out->nodes[n.args[a]] : NULL;
            if (!x || !castable(x) || x->dtype == TD_F64) continue;
            td_dtype dt = pol == TD_AMP_LOW ? low : pol == TD_AMP_F32 ? TD_F32 : widest;
            if ((n.args[a] = cast_to(out, n.args[a], dt)) < 0) st = td_last_status();
        }
        if (st) break;
        map[i] = n.kind == TD_MK_INPUT || n.kind == TD_MK_CONST ? td_math_add(out, &n) : td_math_add_typed(out, &n);
        if (map[i] < 0) st = td_last_status() ? td_last_status() : TD_ERR(TD_ERR_OOM, "math block: out of memory");
    }
    for (int k = 0; k < g->n_outputs && !st; k++) out->outputs[k] = map[g->outputs[k]];
    out->n_outputs = g->n_outputs;
    out->typed = !st;
    free(map);
    if (st) td_math_graph_free(out);
    return st;
}
