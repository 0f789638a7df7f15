/*
** The math block's DAG: construction with shared common sub-expressions, the
** caret error messages, and specialization (every node's dtype and shape for
** one set of bound inputs, with torch's broadcasting and type promotion).
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "graph.h"
#include "trident/math.h"

void td_math_graph_init(td_math_graph *g) { memset(g, 0, sizeof *g); }

void td_math_graph_free(td_math_graph *g) {
    if (!g) return;
    free(g->nodes);
    for (int i = 0; i < g->n_inputs; i++) free(g->input_names[i]);
    free(g->source);
    memset(g, 0, sizeof *g);
}

/* Same value: every attribute but the source span (and prio, which specialize derives). */
static bool same_node(const td_math_node *a, const td_math_node *b) {
    if (a->kind != b->kind || a->op != b->op || a->n_args != b->n_args || a->input != b->input ||
        memcmp(&a->value, &b->value, sizeof a->value) != 0 || a->dims != b->dims || a->dim != b->dim ||
        a->keepdim != b->keepdim || a->correction != b->correction || a->classes != b->classes ||
        a->n_wdims != b->n_wdims || a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->n_args; i++)
        if (a->args[i] != b->args[i]) return false;
    for (int i = 0; i < a->n_wdims; i++)
        if (a->wdims[i] != b->wdims[i]) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

int td_math_add(td_math_graph *g, const td_math_node *n) {
    for (int i = g->n_nodes; i-- > 0;)
        if (same_node(&g->nodes[i], n)) return i;
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 32;
        td_math_node *nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) return -1;
        g->nodes = nodes, g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes] = *n;
    return g->n_nodes++;
}

int td_math_input(td_math_graph *g, const char *name) {
    int i = 0;
    while (i < g->n_inputs && strcmp(g->input_names[i], name) != 0) i++;
    if (i == g->n_inputs) {
        if (i == TD_MATH_MAX_INPUTS) return -1;
        char *copy = strdup(name);
        if (!copy) return -1;
        g->input_names[g->n_inputs++] = copy;
    }
    td_math_node n = {.kind = TD_MK_INPUT, .input = i, .args = {-1, -1, -1}};
    return td_math_add(g, &n);
}

/* ---- errors ---- */

/* The excerpt of the calling thread's last td_math_error with a source, and its one-line message (the excerpt
** belongs to td_last_error() while that still holds the message). */
static _Thread_local char last_excerpt[200], last_msg[400];

td_status td_math_error(const td_math_graph *g, int src_off, int src_len, td_status s, const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *src = g ? g->source : NULL;
    if (!src) return TD_ERR(s, "math block (derived): %s", what);
    int n = (int)strlen(src);
    if (src_off < 0) src_off = 0;
    if (src_off > n) src_off = n;
    int line = 1, start = 0;
    for (int i = 0; i < src_off; i++)
        if (src[i] == '\n') line++, start = i + 1;
    int end = start;
    while (end < n && src[end] != '\n') end++;
    int col = src_off - start + 1, mark = src_len < 1 ? 1 : src_len;
    if (src_off + mark > end) mark = end - src_off > 0 ? end - src_off : 1;
    /* a window of at most 60 characters of the line around the spot, so the excerpt stays short */
    int from = src_off - start > 30 ? src_off - 30 : start, to = end - from > 60 ? from + 60 : end;
    if (mark > to - src_off) mark = to - src_off > 0 ? to - src_off : 1;
    char caret[80];
    int at = 0;
    for (int i = from; i < src_off; i++) caret[at++] = src[i] == '\t' ? '\t' : ' ';
    caret[at++] = '^';
    for (int i = 1; i < mark && at < 78; i++) caret[at++] = '~';
    caret[at] = 0;
    snprintf(last_excerpt, sizeof last_excerpt, "  %s%.*s\n  %s%s", from > start ? "..." : "", to - from, src + from,
             from > start ? "   " : "", caret);
    /* one line: a message that quotes no sub-expression quotes the spot (up to 30 characters of it) */
    int span = src_off < end ? (mark < 30 ? mark : 30) : 0;
    if (strchr(what, '`') || span == 0)
        snprintf(last_msg, sizeof last_msg, "math block line %d, column %d: %s", line, col, what);
    else
        snprintf(last_msg, sizeof last_msg, "math block line %d, column %d: %s, at `%.*s%s`", line, col, what, span,
                 src + src_off, span < mark ? "..." : "");
    return TD_ERR(s, "%s", last_msg);
}

int td_math_error_excerpt(char *buf, size_t n) {
    const char *e = td_last_error();
    bool ours = last_msg[0] && strstr(e, last_msg);
    if (buf && n) snprintf(buf, n, "%s", ours ? last_excerpt : "");
    return ours ? (int)strlen(last_excerpt) : 0;
}

/* The sub-expression [off, off + len) of the source as text, shortened to fit buf. */
static const char *span_text(const td_math_graph *g, const td_math_node *n, char *buf, size_t size) {
    if (!g->source || n->src_len <= 0) return snprintf(buf, size, "(derived)"), buf;
    int len = n->src_len;
    if ((size_t)len >= size) len = (int)size - 4;
    snprintf(buf, size, "%.*s%s", len, g->source + n->src_off, len < n->src_len ? "..." : "");
    return buf;
}

/* ---- types ---- */

static int category(td_dtype dt) { return dt == TD_BOOL ? 0 : td_dtype_is_float(dt) ? 2 : 1; }

/* torch's combine_categories: a higher priority dtype wins unless a lower one is of a higher category. */
static td_dtype combine(int higher, int lower) {
    if (higher < 0) return lower;
    if (lower < 0) return higher;
    if (td_dtype_is_float(higher)) return higher;
    if (higher == TD_BOOL || td_dtype_is_float(lower)) return td_dtype_promote(higher, lower);
    return higher;
}

td_dtype td_math_result_type(const td_math_graph *g, int n, const int *args) {
    int res[3] = {-1, -1, -1};
    for (int i = 0; i < n; i++) {
        if (args[i] < 0) continue;
        const td_math_node *a = &g->nodes[args[i]];
        td_dtype dt = a->dtype;
        if (a->prio == 0) dt = category(dt) == 2 ? TD_F32 : category(dt) == 1 ? TD_I64 : dt; /* weak: default dtypes */
        res[a->prio] = res[a->prio] < 0 ? (int)dt : (int)td_dtype_promote(res[a->prio], dt);
    }
    return combine(res[2], combine(res[1], res[0]));
}

static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

static const char *ew_name(int op) {
    static const char *names[] = {
#define TD_MATH_EW_NAME_(N, a, s) #N,
        TD_MATH_EW_LIST(TD_MATH_EW_NAME_)
#undef TD_MATH_EW_NAME_
    };
    return op >= 0 && op < TD_MEW_COUNT ? names[op] : "?";
}

#define SPAN(n)      span_text(g, (n), (char[48]){0}, 48)
#define SHAPE(nd, s) shape_str((nd), (s), (char[128]){0}, 128)

/* Broadcast node n's args' shapes into n. */
static td_status broadcast_args(td_math_graph *g, td_math_node *n) {
    n->ndim = 0;
    for (int i = 0; i < n->n_args; i++) {
        if (n->args[i] < 0) continue;
        const td_math_node *a = &g->nodes[n->args[i]];
        int nd = a->ndim > n->ndim ? a->ndim : n->ndim;
        int64_t out[TD_MAX_DIMS];
        for (int d = 0; d < nd; d++) {
            int da = d - (nd - a->ndim), dn = d - (nd - n->ndim);
            int64_t sa = da >= 0 ? a->shape[da] : 1, sn = dn >= 0 ? n->shape[dn] : 1;
            if (sa != sn && sa != 1 && sn != 1)
                return td_math_error(g, n->src_off, n->src_len, TD_ERR_SHAPE,
                                     "shapes %s and %s do not broadcast in `%s`", SHAPE(n->ndim, n->shape),
                                     SHAPE(a->ndim, a->shape), SPAN(n));
            out[d] = sa == 1 ? sn : sa;
        }
        n->ndim = nd;
        memcpy(n->shape, out, sizeof(int64_t) * (size_t)nd);
    }
    return TD_OK;
}

static td_status dtype_error(td_math_graph *g, const td_math_node *n, td_dtype dt, const char *what) {
    return td_math_error(g, n->src_off, n->src_len, TD_ERR_DTYPE, "%s does not take %s in `%s`", what,
                         td_dtype_name(dt), SPAN(n));
}

static td_status type_ew(td_math_graph *g, td_math_node *n) {
    td_status st = broadcast_args(g, n);
    if (st) return st;
    td_dtype t = td_math_result_type(g, n->n_args, n->args);
    const char *what = ew_name(n->op);
    switch ((td_math_ew)n->op) {
    case TD_MEW_CAST: return TD_OK; /* dtype given */
    case TD_MEW_NEG:
    case TD_MEW_ABS:
    case TD_MEW_RELU:
    case TD_MEW_SIGN:
        if (t == TD_BOOL) return dtype_error(g, n, t, what);
        n->dtype = t;
        return TD_OK;
    case TD_MEW_ADD:
    case TD_MEW_SUB:
    case TD_MEW_MUL:
    case TD_MEW_MIN:
    case TD_MEW_MAX:
        if (t == TD_BOOL && n->op != TD_MEW_MIN && n->op != TD_MEW_MAX && n->op != TD_MEW_MUL)
            return dtype_error(g, n, t, what);
        n->dtype = t;
        return TD_OK;
    case TD_MEW_LT:
    case TD_MEW_LE:
    case TD_MEW_GT:
    case TD_MEW_GE:
    case TD_MEW_EQ:
    case TD_MEW_NE: n->dtype = TD_BOOL; return TD_OK;
    case TD_MEW_WHERE: {
        td_dtype c = g->nodes[n->args[0]].dtype;
        if (c != TD_BOOL)
            return td_math_error(g, n->src_off, n->src_len, TD_ERR_DTYPE,
                                 "the condition of where is %s, not bool, in `%s`", td_dtype_name(c), SPAN(n));
        n->dtype = td_math_result_type(g, 2, n->args + 1);
        return TD_OK;
    }
    case TD_MEW_CLAMP:
        if (t == TD_BOOL) return dtype_error(g, n, t, what);
        n->dtype = t;
        return TD_OK;
    default: /* the float functions (DIV, POW, EXP, ...): integers compute in float32, as torch's true division */
        n->dtype = td_dtype_is_float(t) ? t : TD_F32;
        return TD_OK;
    }
}

static td_status type_reduce(td_math_graph *g, td_math_node *n) {
    const td_math_node *a = &g->nodes[n->args[0]];
    if (n->n_wdims > 0) {
        n->dims = 0;
        for (int i = 0; i < n->n_wdims; i++) {
            int d = n->wdims[i];
            if (d < -(a->ndim > 0 ? a->ndim : 1) || d >= (a->ndim > 0 ? a->ndim : 1))
                return td_math_error(g, n->src_off, n->src_len, TD_ERR_INDEX,
                                     "dim %d is out of range for shape %s in `%s`", d, SHAPE(a->ndim, a->shape),
                                     SPAN(n));
            if (a->ndim == 0) continue;
            if (d < 0) d += a->ndim;
            if (n->dims & (1u << d))
                return td_math_error(g, n->src_off, n->src_len, TD_ERR_INDEX, "dim %d is given twice in `%s`", d,
                                     SPAN(n));
            n->dims |= 1u << d;
        }
    }
    uint32_t mask = n->dims ? n->dims : (1u << a->ndim) - 1;
    n->ndim = 0;
    for (int d = 0; d < a->ndim; d++) {
        bool red = (mask >> d) & 1;
        if (red && a->shape[d] == 0 && (n->op == TD_MRED_AMAX || n->op == TD_MRED_AMIN))
            return td_math_error(g, n->src_off, n->src_len, TD_ERR_SHAPE, "reducing an empty dim in `%s`", SPAN(n));
        if (!red)
            n->shape[n->ndim++] = a->shape[d];
        else if (n->keepdim)
            n->shape[n->ndim++] = 1;
    }
    td_dtype t = a->dtype;
    switch ((td_math_red)n->op) {
    case TD_MRED_SUM: n->dtype = td_dtype_is_float(t) ? t : TD_I64; break;
    case TD_MRED_AMAX:
    case TD_MRED_AMIN:
        if (t == TD_BOOL) return dtype_error(g, n, t, n->op == TD_MRED_AMAX ? "amax" : "amin");
        n->dtype = t;
        break;
    case TD_MRED_LOGSUMEXP: n->dtype = td_dtype_is_float(t) ? t : TD_F32; break;
    default:
        if (!td_dtype_is_float(t)) return dtype_error(g, n, t, n->op == TD_MRED_MEAN ? "mean" : "var");
        n->dtype = t;
    }
    return TD_OK;
}

static td_status type_matmul(td_math_graph *g, td_math_node *n) {
    const td_math_node *a = &g->nodes[n->args[0]], *b = &g->nodes[n->args[1]];
    if (!td_dtype_is_float(a->dtype) || a->dtype != b->dtype) {
        if (a->dtype != b->dtype && td_dtype_is_float(a->dtype) && td_dtype_is_float(b->dtype))
            return td_math_error(g, n->src_off, n->src_len, TD_ERR_DTYPE,
                                 "matmul of %s and %s (one float dtype) in `%s`", td_dtype_name(a->dtype),
                                 td_dtype_name(b->dtype), SPAN(n));
        return dtype_error(g, n, td_dtype_is_float(a->dtype) ? b->dtype : a->dtype, "matmul");
    }
    if (a->ndim == 0 || b->ndim == 0)
        return td_math_error(g, n->src_off, n->src_len, TD_ERR_SHAPE, "matmul of shapes %s and %s (0-d) in `%s`",
                             SHAPE(a->ndim, a->shape), SHAPE(b->ndim, b->shape), SPAN(n));
    int64_t k_a = a->shape[a->ndim - 1], k_b = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
    if (k_a != k_b)
        return td_math_error(
            g, n->src_off, n->src_len, TD_ERR_SHAPE, "shapes %s and %s do not align for matmul (%lld != %lld) in `%s`",
            SHAPE(a->ndim, a->shape), SHAPE(b->ndim, b->shape), (long long)k_a, (long long)k_b, SPAN(n));
    int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0, nb = ba > bb ? ba : bb;
    n->ndim = 0;
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - ba), db = d - (nb - bb);
        int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return td_math_error(g, n->src_off, n->src_len, TD_ERR_SHAPE,
                                 "batch dims of %s and %s do not broadcast for matmul in `%s`",
                                 SHAPE(a->ndim, a->shape), SHAPE(b->ndim, b->shape), SPAN(n));
        n->shape[n->ndim++] = sa == 1 ? sb : sa;
    }
    if (a->ndim >= 2) n->shape[n->ndim++] = a->shape[a->ndim - 2];
    if (b->ndim >= 2) n->shape[n->ndim++] = b->shape[b->ndim - 1];
    n->dtype = a->dtype;
    return TD_OK;
}

static td_status type_node(td_math_graph *g, td_math_node *n, const td_dtype *dtypes, const int *ndims,
                           const int64_t (*shapes)[TD_MAX_DIMS]) {
    const td_math_node *a = n->n_args > 0 && n->args[0] >= 0 ? &g->nodes[n->args[0]] : NULL;
    switch (n->kind) {
    case TD_MK_INPUT:
        n->dtype = dtypes[n->input], n->ndim = ndims[n->input];
        if (n->ndim < 0 || n->ndim > TD_MAX_DIMS)
            return TD_ERR(TD_ERR_MISUSE, "math block: input %d has %d dims", n->input, n->ndim);
        memcpy(n->shape, shapes[n->input], sizeof(int64_t) * (size_t)n->ndim);
        return TD_OK;
    case TD_MK_CONST:
        n->ndim = 0; /* dtype as the parser (or the derivation) gave it */
        return TD_OK;
    case TD_MK_EW: return type_ew(g, n);
    case TD_MK_REDUCE: return type_reduce(g, n);
    case TD_MK_SOFTMAX:
    case TD_MK_LOG_SOFTMAX: {
        if (!td_dtype_is_float(a->dtype))
            return dtype_error(g, n, a->dtype, n->kind == TD_MK_SOFTMAX ? "softmax" : "log_softmax");
        int nd = a->ndim > 0 ? a->ndim : 1;
        if (n->dim < -nd || n->dim >= nd)
            return td_math_error(g, n->src_off, n->src_len, TD_ERR_INDEX, "dim %d is out of range for shape %s in `%s`",
                                 n->dim, SHAPE(a->ndim, a->shape), SPAN(n));
        n->dtype = a->dtype, n->ndim = a->ndim;
        memcpy(n->shape, a->shape, sizeof n->shape);
        return TD_OK;
    }
    case TD_MK_MATMUL: return type_matmul(g, n);
    case TD_MK_TRANSPOSE:
        if (a->ndim < 2)
            return td_math_error(g, n->src_off, n->src_len, TD_ERR_SHAPE,
                                 "transpose of shape %s (needs 2 dims) in `%s`", SHAPE(a->ndim, a->shape), SPAN(n));
        n->dtype = a->dtype, n->ndim = a->ndim;
        memcpy(n->shape, a->shape, sizeof n->shape);
        n->shape[a->ndim - 1] = a->shape[a->ndim - 2], n->shape[a->ndim - 2] = a->shape[a->ndim - 1];
        return TD_OK;
    case TD_MK_EXPAND:
    case TD_MK_RESHAPE: n->dtype = a->dtype; return TD_OK; /* shape given */
    case TD_MK_ONE_HOT:
        if (a->ndim >= TD_MAX_DIMS)
            return td_math_error(g, n->src_off, n->src_len, TD_ERR_SHAPE, "one_hot: too many dims");
        n->ndim = a->ndim + 1;
        memcpy(n->shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
        n->shape[a->ndim] = n->classes;
        return TD_OK;
    case TD_MK_CROSS_ENTROPY: {
        const td_math_node *t = &g->nodes[n->args[1]];
        if (!td_dtype_is_float(a->dtype)) return dtype_error(g, n, a->dtype, "cross_entropy's logits");
        if (t->dtype != TD_I64 && t->dtype != TD_I32)
            return dtype_error(g, n, t->dtype, "cross_entropy's target (class ids)");
        if (a->ndim != 2 || t->ndim != 1 || t->shape[0] != a->shape[0])
            return td_math_error(g, n->src_off, n->src_len, TD_ERR_SHAPE,
                                 "cross_entropy takes logits [N, C] and target [N], not %s and %s, in `%s`",
                                 SHAPE(a->ndim, a->shape), SHAPE(t->ndim, t->shape), SPAN(n));
        n->dtype = a->dtype, n->ndim = 0;
        return TD_OK;
    }
    case TD_MK_LAYER_NORM:
        if (!td_dtype_is_float(a->dtype)) return dtype_error(g, n, a->dtype, "layer_norm");
        if (a->ndim < 1)
            return td_math_error(g, n->src_off, n->src_len, TD_ERR_SHAPE, "layer_norm of a 0-d value in `%s`", SPAN(n));
        for (int i = 1; i < 3; i++) {
            if (n->args[i] < 0) continue;
            const td_math_node *w = &g->nodes[n->args[i]];
            if (w->ndim != 1 || w->shape[0] != a->shape[a->ndim - 1])
                return td_math_error(g, n->src_off, n->src_len, TD_ERR_SHAPE,
                                     "layer_norm's %s is %s, not [%lld] (the last dim of %s), in `%s`",
                                     i == 1 ? "weight" : "bias", SHAPE(w->ndim, w->shape),
                                     (long long)a->shape[a->ndim - 1], SHAPE(a->ndim, a->shape), SPAN(n));
            if (w->dtype != a->dtype)
                return td_math_error(g, n->src_off, n->src_len, TD_ERR_DTYPE, "layer_norm's %s is %s, x is %s, in `%s`",
                                     i == 1 ? "weight" : "bias", td_dtype_name(w->dtype), td_dtype_name(a->dtype),
                                     SPAN(n));
        }
        n->dtype = a->dtype, n->ndim = a->ndim;
        memcpy(n->shape, a->shape, sizeof n->shape);
        return TD_OK;
    default: return TD_ERR(TD_ERR_MISUSE, "math block: node kind %d", (int)n->kind);
    }
}

int td_math_add_typed(td_math_graph *g, td_math_node *n) {
    if (n->kind != TD_MK_INPUT) {
        if (n->kind != TD_MK_EXPAND && n->kind != TD_MK_RESHAPE && n->kind != TD_MK_ONE_HOT &&
            !(n->kind == TD_MK_EW && n->op == TD_MEW_CAST))
            n->ndim = 0, memset(n->shape, 0, sizeof n->shape);
        if (type_node(g, n, NULL, NULL, NULL)) return -1;
        bool all_literal = true;
        for (int k = 0; k < n->n_args; k++)
            if (n->args[k] >= 0 && g->nodes[n->args[k]].prio != 0) all_literal = false;
        n->prio = n->ndim > 0 ? 2 : n->kind == TD_MK_CONST || (n->kind == TD_MK_EW && all_literal) ? 0 : 1;
    }
    int id = td_math_add(g, n);
    if (id < 0) TD_ERR(TD_ERR_OOM, "math block: out of memory");
    return id;
}

td_status td_math_graph_specialize(td_math_graph *g, const td_dtype *dtypes, const int *ndims,
                                   const int64_t (*shapes)[TD_MAX_DIMS]) {
    g->typed = false;
    for (int i = 0; i < g->n_nodes; i++) {
        td_math_node *n = &g->nodes[i];
        if (n->kind != TD_MK_EXPAND && n->kind != TD_MK_RESHAPE && n->kind != TD_MK_ONE_HOT &&
            !(n->kind == TD_MK_EW && n->op == TD_MEW_CAST))
            n->ndim = 0, memset(n->shape, 0, sizeof n->shape);
        td_status st = type_node(g, n, dtypes, ndims, shapes);
        if (st) return st;
        bool all_literal = n->kind != TD_MK_INPUT;
        for (int k = 0; k < n->n_args; k++)
            if (n->args[k] >= 0 && g->nodes[n->args[k]].prio != 0) all_literal = false;
        n->prio = n->ndim > 0 ? 2 : n->kind == TD_MK_CONST || (n->kind == TD_MK_EW && all_literal) ? 0 : 1;
        if (n->kind == TD_MK_INPUT && ((g->weak_inputs >> n->input) & 1)) n->prio = 0;
    }
    g->typed = true;
    return TD_OK;
}
