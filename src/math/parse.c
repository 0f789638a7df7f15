/*
** The math block language: lexer and recursive-descent parser into an untyped
** td_math_graph. Grammar (lowest precedence first; see docs/math.md):
**   block     := stmt { (';' | newline) stmt }          last stmt is the result
**   stmt      := 'return' expr {',' expr} | NAME '=' expr | expr
**   expr      := cmp ['?' expr ':' expr]                 c ? a : b
**   cmp       := add {('<' | '<=' | '>' | '>=' | '==' | '!=') add}
**   add       := mul {('+' | '-') mul}
**   mul       := unary {('*' | '/' | '@') unary}
**   unary     := '-' unary | power
**   power     := postfix ['^' unary]                     right-associative, -x^2 = -(x^2)
**   postfix   := primary {"'" | '.' NAME '(' [args] ')'}  x' transposes, x.f(a) is f(x, a)
**   primary   := NUMBER | 'true' | 'false' | NAME | NAME '(' [args] ')' | '(' expr ')'
**   args      := arg {',' arg};  arg := expr | NAME '=' (expr | '[' INT {',' INT} ']')
** Newlines inside brackets are spaces; '#' starts a comment. Recursion is
** bounded by MAX_DEPTH, so no input can exhaust the stack.
*/
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "graph.h"

#define MAX_DEPTH     200
#define MAX_CALL_ARGS 8
#define MAX_LOCALS    256

typedef enum tok_kind { T_END, T_NEWLINE, T_NUM, T_NAME, T_OP } tok_kind;

typedef struct tok {
    tok_kind kind;
    int off, len;
    double num;
    bool is_int;
} tok;

typedef struct local {
    int off, len; /* the name in the source */
    int node;
} local;

typedef struct parser {
    td_math_graph *g;
    const char *src;
    int pos, parens, depth;
    tok t; /* the current token */
    local locals[MAX_LOCALS];
    int n_locals;
    td_status st;
} parser;

/* ---- lexer ---- */

static bool is_op(const parser *p, const char *op) {
    int n = (int)strlen(op);
    return p->t.kind == T_OP && p->t.len == n && memcmp(p->src + p->t.off, op, (size_t)n) == 0;
}

static bool is_name(const parser *p, const char *name) {
    int n = (int)strlen(name);
    return p->t.kind == T_NAME && p->t.len == n && memcmp(p->src + p->t.off, name, (size_t)n) == 0;
}

static td_status fail(parser *p, int off, int len, td_status s, const char *what) {
    if (!p->st) p->st = td_math_error(p->g, off, len, s, "%s", what);
    return p->st;
}

static void next(parser *p) {
    const char *s = p->src;
    for (;;) {
        char c = s[p->pos];
        if (c == ' ' || c == '\t' || c == '\r' || (c == '\n' && p->parens > 0))
            p->pos++;
        else if (c == '#')
            while (s[p->pos] && s[p->pos] != '\n') p->pos++;
        else
            break;
    }
    tok t = {.off = p->pos, .len = 1};
    char c = s[p->pos];
    if (!c)
        t.kind = T_END, t.len = 0;
    else if (c == '\n')
        t.kind = T_NEWLINE;
    else if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)s[p->pos + 1]))) {
        char *end;
        errno = 0;
        t.kind = T_NUM, t.num = strtod(s + p->pos, &end);
        t.len = (int)(end - (s + p->pos));
        t.is_int = true;
        for (int i = 0; i < t.len; i++)
            if (!isdigit((unsigned char)s[p->pos + i])) t.is_int = false;
        if (isalpha((unsigned char)*end) || *end == '_') {
            p->pos += t.len;
            p->t = t;
            fail(p, t.off, t.len + 1, TD_ERR_COMPILE, "syntax error: a number runs into a name");
            return;
        }
    } else if (isalpha((unsigned char)c) || c == '_') {
        t.kind = T_NAME;
        while (isalnum((unsigned char)s[p->pos + t.len]) || s[p->pos + t.len] == '_') t.len++;
    } else {
        t.kind = T_OP;
        static const char *two[] = {"<=", ">=", "==", "!="};
        for (int i = 0; i < 4; i++)
            if (c == two[i][0] && s[p->pos + 1] == two[i][1]) t.len = 2;
        if (t.len == 1 && !strchr("+-*/^@'<>?:=(),;.[]", c)) {
            p->t = t;
            fail(p, t.off, 1, TD_ERR_COMPILE, "syntax error: unexpected character");
            return;
        }
        if (c == '(' || c == '[') p->parens++;
        if ((c == ')' || c == ']') && p->parens > 0) p->parens--;
    }
    p->pos += t.len;
    p->t = t;
}

static bool expect(parser *p, const char *op) {
    if (p->st) return false;
    if (!is_op(p, op)) {
        char what[64];
        snprintf(what, sizeof what, "syntax error: expected '%s'", op);
        fail(p, p->t.off, p->t.len, TD_ERR_COMPILE, what);
        return false;
    }
    next(p);
    return true;
}

/* ---- graph building ---- */

static int add(parser *p, td_math_node n, int off, int end) {
    if (p->st) return -1;
    n.src_off = off, n.src_len = end - off;
    for (int i = n.n_args; i < TD_MATH_MAX_ARGS; i++) n.args[i] = -1;
    int id = td_math_add(p->g, &n);
    if (id < 0) fail(p, off, end - off, TD_ERR_OOM, "out of memory");
    return id;
}

static int ew(parser *p, td_math_ew op, int n_args, const int *args, int off, int end) {
    td_math_node n = {.kind = TD_MK_EW, .op = op, .n_args = n_args};
    for (int i = 0; i < n_args; i++) n.args[i] = args[i];
    return add(p, n, off, end);
}

static int constant(parser *p, double v, bool is_int, int off, int end) {
    td_math_node n = {.kind = TD_MK_CONST, .value = v, .dtype = is_int ? TD_I64 : TD_F32};
    return add(p, n, off, end);
}

static int lookup(parser *p, int off, int len) {
    for (int i = p->n_locals; i-- > 0;)
        if (p->locals[i].len == len && memcmp(p->src + p->locals[i].off, p->src + off, (size_t)len) == 0)
            return p->locals[i].node;
    char name[128];
    if (len >= (int)sizeof name) return fail(p, off, len, TD_ERR_COMPILE, "name too long"), -1;
    memcpy(name, p->src + off, (size_t)len), name[len] = 0;
    int before = p->g->n_inputs;
    bool known = false;
    for (int i = 0; i < before; i++) known |= strcmp(p->g->input_names[i], name) == 0;
    if (!known && before == TD_MATH_MAX_NAMES)
        return fail(p, off, len, TD_ERR_COMPILE, "too many bound names (32 at most)"), -1;
    int id = td_math_input(p->g, name);
    if (id < 0) {
        fail(p, off, len, TD_ERR_OOM, "out of memory");
        return -1;
    }
    if (p->g->n_inputs > before) p->g->input_src_off[before] = off, p->g->input_src_len[before] = len;
    return id;
}

/* ---- calls ---- */

typedef enum fclass { F_EW, F_MINMAX, F_REDUCE, F_ROW, F_XENT, F_LN } fclass;

typedef struct func {
    const char *name;
    fclass cls;
    int op; /* td_math_ew, td_math_red, or the node kind for F_ROW */
    int min_args, max_args;
} func;

static const func funcs[] = {
    {"exp", F_EW, TD_MEW_EXP, 1, 1},
    {"log", F_EW, TD_MEW_LOG, 1, 1},
    {"sqrt", F_EW, TD_MEW_SQRT, 1, 1},
    {"rsqrt", F_EW, TD_MEW_RSQRT, 1, 1},
    {"abs", F_EW, TD_MEW_ABS, 1, 1},
    {"sin", F_EW, TD_MEW_SIN, 1, 1},
    {"cos", F_EW, TD_MEW_COS, 1, 1},
    {"tanh", F_EW, TD_MEW_TANH, 1, 1},
    {"sigmoid", F_EW, TD_MEW_SIGMOID, 1, 1},
    {"relu", F_EW, TD_MEW_RELU, 1, 1},
    {"gelu", F_EW, TD_MEW_GELU, 1, 1},
    {"silu", F_EW, TD_MEW_SILU, 1, 1},
    {"softplus", F_EW, TD_MEW_SOFTPLUS, 1, 1},
    {"clamp", F_EW, TD_MEW_CLAMP, 3, 3},
    {"where", F_EW, TD_MEW_WHERE, 3, 3},
    {"min", F_MINMAX, TD_MEW_MIN, 1, 3}, /* min(a, b) elementwise; min(x[, dim[, keepdim]]) is amin */
    {"max", F_MINMAX, TD_MEW_MAX, 1, 3},
    {"sum", F_REDUCE, TD_MRED_SUM, 1, 3},
    {"mean", F_REDUCE, TD_MRED_MEAN, 1, 3},
    {"amax", F_REDUCE, TD_MRED_AMAX, 1, 3},
    {"amin", F_REDUCE, TD_MRED_AMIN, 1, 3},
    {"var", F_REDUCE, TD_MRED_VAR, 1, 3},
    {"logsumexp", F_REDUCE, TD_MRED_LOGSUMEXP, 1, 3},
    {"softmax", F_ROW, TD_MK_SOFTMAX, 1, 2},
    {"log_softmax", F_ROW, TD_MK_LOG_SOFTMAX, 1, 2},
    {"cross_entropy", F_XENT, TD_MK_CROSS_ENTROPY, 2, 2},
    {"layer_norm", F_LN, TD_MK_LAYER_NORM, 1, 3},
};

/* An argument: a value (node), or for dims a literal integer list. kw is the keyword's span or len 0. */
typedef struct arg {
    int node;
    int off, end;
    int kw_off, kw_len;
    int n_ints; /* a '[...]' list of integers (n_ints of them in ints), else -1 */
    int ints[TD_MAX_DIMS];
} arg;

static int parse_expr(parser *p);

/* An integer a dim or a correction can be (converting a larger double to int is undefined). */
static bool small_int(double v) { return v >= -1e6 && v <= 1e6 && v == (double)(int)v; }

static bool parse_int_list(parser *p, arg *a) {
    a->n_ints = 0;
    next(p); /* '[' */
    while (!p->st && !is_op(p, "]")) {
        bool neg = false;
        int off = p->t.off;
        if (is_op(p, "-")) neg = true, next(p);
        if (p->t.kind != T_NUM || !p->t.is_int || !small_int(p->t.num) || a->n_ints == TD_MAX_DIMS) {
            fail(p, off, p->t.off + p->t.len - off, TD_ERR_COMPILE, "a dim list takes up to 8 integers");
            return false;
        }
        a->ints[a->n_ints++] = (int)(neg ? -p->t.num : p->t.num);
        next(p);
        if (!is_op(p, ",")) break;
        next(p);
    }
    return expect(p, "]");
}

/* Whether the current name is followed by a single '=' (a keyword argument). */
static bool keyword_follows(const parser *p) {
    int i = p->pos;
    while (p->src[i] == ' ' || p->src[i] == '\t' || p->src[i] == '\n' || p->src[i] == '\r') i++;
    return p->src[i] == '=' && p->src[i + 1] != '=';
}

/* args after '(' up to and including ')'; self (>= 0) is the receiver of a method call. */
static int parse_args(parser *p, int self, int self_off, arg *args) {
    int n = 0;
    if (self >= 0) args[n++] = (arg){.node = self, .off = self_off, .end = self_off, .n_ints = -1};
    while (!p->st && !is_op(p, ")")) {
        if (n == MAX_CALL_ARGS) return fail(p, p->t.off, p->t.len, TD_ERR_COMPILE, "too many arguments"), -1;
        arg a = {.node = -1, .off = p->t.off, .n_ints = -1};
        if (p->t.kind == T_NAME && keyword_follows(p)) {
            a.kw_off = p->t.off, a.kw_len = p->t.len;
            next(p), next(p); /* NAME '=' */
            a.off = p->t.off;
        }
        if (is_op(p, "[")) {
            if (!parse_int_list(p, &a)) return -1;
        } else {
            a.node = parse_expr(p);
        }
        a.end = p->t.off;
        while (a.end > a.off && (p->src[a.end - 1] == ' ' || p->src[a.end - 1] == '\n')) a.end--;
        args[n++] = a;
        if (!is_op(p, ",")) break;
        next(p);
    }
    if (!expect(p, ")")) return -1;
    return p->st ? -1 : n;
}

/* The integer value of a literal argument (a CONST node, or a list of one), for dim/keepdim/correction. */
static bool arg_int(parser *p, const arg *a, const char *what, int *out) {
    if (a->n_ints == 1) return *out = a->ints[0], true;
    const td_math_node *n = a->node >= 0 ? &p->g->nodes[a->node] : NULL;
    if (!n || n->kind != TD_MK_CONST || !small_int(n->value)) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s must be a literal integer", what);
        fail(p, a->off, a->end - a->off, TD_ERR_COMPILE, msg);
        return false;
    }
    *out = (int)n->value;
    return true;
}

static bool kw_is(parser *p, const arg *a, const char *name) {
    return a->kw_len == (int)strlen(name) && memcmp(p->src + a->kw_off, name, (size_t)a->kw_len) == 0;
}

/* Reduction attributes from positional (dim, keepdim) and keyword (dim=, keepdim=, correction=) args. */
static bool reduce_attrs(parser *p, const func *f, arg *args, int n, td_math_node *out) {
    out->correction = 1;
    for (int i = 1; i < n; i++) {
        const arg *a = &args[i];
        int v;
        bool dim = a->kw_len ? kw_is(p, a, "dim") : i == 1, keep = a->kw_len ? kw_is(p, a, "keepdim") : i == 2;
        bool corr = a->kw_len && kw_is(p, a, "correction") && f->op == TD_MRED_VAR;
        if (dim && a->n_ints >= 0) {
            out->n_wdims = a->n_ints;
            memcpy(out->wdims, a->ints, sizeof(int) * (size_t)a->n_ints);
            if (a->n_ints == 0) return fail(p, a->off, a->end - a->off, TD_ERR_COMPILE, "an empty dim list"), false;
        } else if (dim) {
            if (!arg_int(p, a, "dim", &v)) return false;
            out->n_wdims = 1, out->wdims[0] = v;
        } else if (keep) {
            if (!arg_int(p, a, "keepdim", &v)) return false;
            out->keepdim = v != 0;
        } else if (corr) {
            if (!arg_int(p, a, "correction", &v)) return false;
            out->correction = v;
        } else {
            char msg[96];
            snprintf(msg, sizeof msg, "%s takes (x, dim, keepdim)%s", f->name,
                     f->op == TD_MRED_VAR ? " and correction=" : "");
            int off = a->kw_len ? a->kw_off : a->off;
            return fail(p, off, a->end - off, TD_ERR_COMPILE, msg), false;
        }
    }
    return true;
}

static int call(parser *p, int name_off, int name_len, int self, int self_off, int start) {
    const func *f = NULL;
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
        if ((int)strlen(funcs[i].name) == name_len && memcmp(funcs[i].name, p->src + name_off, (size_t)name_len) == 0)
            f = &funcs[i];
    if (!f) return fail(p, name_off, name_len, TD_ERR_COMPILE, "unknown function"), -1;
    next(p); /* '(' */
    arg args[MAX_CALL_ARGS];
    int n = parse_args(p, self, self_off, args);
    if (n < 0) return -1;
    int end = p->t.off;
    while (end > start && p->src[end - 1] != ')') end--;
    bool value_args = f->cls == F_EW || f->cls == F_XENT || f->cls == F_LN || (f->cls == F_MINMAX && n == 2);
    if (n < f->min_args || n > f->max_args) {
        char msg[128];
        if (f->min_args == f->max_args)
            snprintf(msg, sizeof msg, "%s takes %d argument%s, not %d", f->name, f->min_args,
                     f->min_args > 1 ? "s" : "", n);
        else
            snprintf(msg, sizeof msg, "%s takes %d to %d arguments, not %d", f->name, f->min_args, f->max_args, n);
        return fail(p, start, end - start, TD_ERR_COMPILE, msg), -1;
    }
    for (int i = 0; i < n; i++) {
        if (args[i].node < 0 && (value_args || i == 0))
            return fail(p, args[i].off, args[i].end - args[i].off, TD_ERR_COMPILE, "a value is expected here"), -1;
        if (value_args && args[i].kw_len && !(f->cls == F_LN && kw_is(p, &args[i], "eps")))
            return fail(p, args[i].kw_off, args[i].kw_len, TD_ERR_COMPILE, "unexpected keyword argument"), -1;
    }
    int ids[MAX_CALL_ARGS] = {0};
    for (int i = 0; i < n; i++) ids[i] = args[i].node;
    td_math_node node = {.n_args = 1, .args = {ids[0], -1, -1}};
    switch (f->cls) {
    case F_EW: return ew(p, f->op, n, ids, start, end);
    case F_MINMAX:
        if (n == 2) return ew(p, f->op, 2, ids, start, end);
        node.kind = TD_MK_REDUCE, node.op = f->op == TD_MEW_MIN ? TD_MRED_AMIN : TD_MRED_AMAX;
        if (!reduce_attrs(p, f, args, n, &node)) return -1;
        return add(p, node, start, end);
    case F_REDUCE:
        node.kind = TD_MK_REDUCE, node.op = f->op;
        if (!reduce_attrs(p, f, args, n, &node)) return -1;
        return add(p, node, start, end);
    case F_ROW:
        node.kind = (td_math_kind)f->op, node.dim = -1;
        if (n == 2 && (args[1].kw_len && !kw_is(p, &args[1], "dim")))
            return fail(p, args[1].kw_off, args[1].kw_len, TD_ERR_COMPILE, "unexpected keyword argument"), -1;
        if (n == 2 && !arg_int(p, &args[1], "dim", &node.dim)) return -1;
        return add(p, node, start, end);
    case F_XENT:
        node.kind = TD_MK_CROSS_ENTROPY, node.n_args = 2, node.args[1] = ids[1];
        return add(p, node, start, end);
    case F_LN: {
        node.kind = TD_MK_LAYER_NORM, node.n_args = 3, node.value = 1e-5;
        int pos = 1;
        for (int i = 1; i < n; i++) {
            if (args[i].kw_len) {
                const td_math_node *e = &p->g->nodes[ids[i]];
                if (e->kind != TD_MK_CONST)
                    return fail(p, args[i].off, args[i].end - args[i].off, TD_ERR_COMPILE, "eps must be a literal"), -1;
                node.value = e->value;
            } else
                node.args[pos++] = ids[i];
        }
        return add(p, node, start, end);
    }
    }
    return -1;
}

/* ---- expressions ---- */

static int parse_unary(parser *p);

static int parse_primary(parser *p) {
    int off = p->t.off;
    if (p->t.kind == T_NUM) {
        int id = constant(p, p->t.num, p->t.is_int, off, off + p->t.len);
        next(p);
        return id;
    }
    if (is_name(p, "true") || is_name(p, "false")) {
        td_math_node n = {.kind = TD_MK_CONST, .value = is_name(p, "true"), .dtype = TD_BOOL};
        int id = add(p, n, off, off + p->t.len);
        next(p);
        return id;
    }
    if (p->t.kind == T_NAME) {
        if (is_name(p, "return"))
            return fail(p, off, p->t.len, TD_ERR_COMPILE, "syntax error: return starts a statement"), -1;
        int len = p->t.len;
        next(p);
        if (is_op(p, "(")) return call(p, off, len, -1, off, off);
        return lookup(p, off, len);
    }
    if (is_op(p, "(")) {
        next(p);
        int id = parse_expr(p);
        expect(p, ")");
        return id;
    }
    if (p->t.kind == T_END || p->t.kind == T_NEWLINE)
        return fail(p, off, 1, TD_ERR_COMPILE, "syntax error: the expression ends early"), -1;
    return fail(p, off, p->t.len, TD_ERR_COMPILE, "syntax error: a value is expected here"), -1;
}

static int parse_postfix(parser *p) {
    int start = p->t.off, id = parse_primary(p);
    while (!p->st) {
        if (is_op(p, "'")) {
            td_math_node n = {.kind = TD_MK_TRANSPOSE, .n_args = 1, .args = {id}};
            id = add(p, n, start, p->t.off + 1);
            next(p);
        } else if (is_op(p, ".")) {
            next(p);
            if (p->t.kind != T_NAME)
                return fail(p, p->t.off, p->t.len, TD_ERR_COMPILE, "syntax error: a method name is expected after '.'"),
                       -1;
            int name_off = p->t.off, name_len = p->t.len;
            next(p);
            if (!is_op(p, "("))
                return fail(p, p->t.off, p->t.len, TD_ERR_COMPILE, "syntax error: expected '(' after the method name"),
                       -1;
            id = call(p, name_off, name_len, id, start, start);
        } else
            break;
    }
    return id;
}

static int enter(parser *p) {
    if (++p->depth > MAX_DEPTH)
        return fail(p, p->t.off, p->t.len, TD_ERR_COMPILE, "the expression nests too deeply"), -1;
    return 0;
}

static int parse_power(parser *p) {
    int start = p->t.off, base = parse_postfix(p);
    if (p->st || !is_op(p, "^")) return base;
    next(p);
    int e = parse_unary(p);
    int args[2] = {base, e};
    return ew(p, TD_MEW_POW, 2, args, start, p->t.off);
}

static int span_end(parser *p) {
    int end = p->t.off;
    while (end > 0 && (p->src[end - 1] == ' ' || p->src[end - 1] == '\t' || p->src[end - 1] == '\n')) end--;
    return end;
}

static int parse_unary(parser *p) {
    if (enter(p)) return -1;
    int id;
    if (is_op(p, "-")) {
        int start = p->t.off;
        next(p);
        int x = parse_unary(p);
        if (p->st) return p->depth--, -1;
        const td_math_node *a = &p->g->nodes[x];
        if (a->kind == TD_MK_CONST && a->dtype != TD_BOOL)
            id = constant(p, -a->value, a->dtype == TD_I64, start, span_end(p));
        else
            id = ew(p, TD_MEW_NEG, 1, &x, start, span_end(p));
    } else
        id = parse_power(p);
    p->depth--;
    return id;
}

static int parse_binary_level(parser *p, int level);

static const struct {
    const char *op;
    int level;
    int kind; /* td_math_ew, or -1 for '@' */
} binops[] = {
    {"<", 0, TD_MEW_LT},  {"<=", 0, TD_MEW_LE}, {">", 0, TD_MEW_GT},  {">=", 0, TD_MEW_GE},
    {"==", 0, TD_MEW_EQ}, {"!=", 0, TD_MEW_NE}, {"+", 1, TD_MEW_ADD}, {"-", 1, TD_MEW_SUB},
    {"*", 2, TD_MEW_MUL}, {"/", 2, TD_MEW_DIV}, {"@", 2, -1},
};

static int parse_binary_level(parser *p, int level) {
    if (level == 3) return parse_unary(p);
    int start = p->t.off, lhs = parse_binary_level(p, level + 1);
    for (;;) {
        if (p->st) return -1;
        int k = -1;
        for (size_t i = 0; i < sizeof binops / sizeof binops[0]; i++)
            if (binops[i].level == level && is_op(p, binops[i].op)) k = (int)i;
        if (k < 0) return lhs;
        next(p);
        int rhs = parse_binary_level(p, level + 1);
        int args[2] = {lhs, rhs};
        if (binops[k].kind < 0) {
            td_math_node n = {.kind = TD_MK_MATMUL, .n_args = 2, .args = {lhs, rhs}};
            lhs = add(p, n, start, span_end(p));
        } else
            lhs = ew(p, binops[k].kind, 2, args, start, span_end(p));
    }
}

static int parse_expr(parser *p) {
    if (enter(p)) return -1;
    int start = p->t.off, c = parse_binary_level(p, 0);
    if (!p->st && is_op(p, "?")) {
        next(p);
        int a = parse_expr(p);
        expect(p, ":");
        int b = parse_expr(p);
        int args[3] = {c, a, b};
        c = ew(p, TD_MEW_WHERE, 3, args, start, span_end(p));
    }
    p->depth--;
    return p->st ? -1 : c;
}

/* ---- statements ---- */

static bool at_stmt_end(parser *p) { return p->t.kind == T_END || p->t.kind == T_NEWLINE || is_op(p, ";"); }

td_status td_math_parse(const char *src, td_math_graph *g) {
    td_math_graph_init(g);
    if (!src) return TD_ERR(TD_ERR_MISUSE, "math block: the source is NULL");
    g->source = strdup(src);
    if (!g->source) return TD_ERR(TD_ERR_OOM, "math block: out of memory");
    parser *p = calloc(1, sizeof *p);
    if (!p) return TD_ERR(TD_ERR_OOM, "math block: out of memory");
    p->g = g, p->src = g->source;
    next(p);
    int result = -1, result_off = 0;
    bool returned = false;
    while (!p->st) {
        while (p->t.kind == T_NEWLINE || is_op(p, ";")) next(p);
        if (p->st || p->t.kind == T_END) break;
        int off = p->t.off;
        if (returned) {
            fail(p, off, p->t.len, TD_ERR_COMPILE, "nothing may follow a return statement");
            break;
        }
        if (is_name(p, "return")) {
            next(p);
            g->n_outputs = 0;
            for (;;) {
                int id = parse_expr(p);
                if (p->st) break;
                if (g->n_outputs == 8) {
                    fail(p, off, p->t.off - off, TD_ERR_COMPILE, "return gives 8 values at most");
                    break;
                }
                g->outputs[g->n_outputs++] = id;
                if (!is_op(p, ",")) break;
                next(p);
            }
            returned = true;
        } else {
            /* NAME '=' expr, told from an expression by the '=' that follows the name */
            int save_pos = p->pos, save_parens = p->parens;
            tok save = p->t;
            bool assign = false;
            if (p->t.kind == T_NAME) {
                next(p);
                assign = is_op(p, "=");
                if (!assign) p->pos = save_pos, p->parens = save_parens, p->t = save;
            }
            if (assign) {
                if (p->n_locals == MAX_LOCALS) {
                    fail(p, off, save.len, TD_ERR_COMPILE, "too many assignments");
                    break;
                }
                next(p);
                int id = parse_expr(p);
                if (p->st) break;
                p->locals[p->n_locals++] = (local){.off = save.off, .len = save.len, .node = id};
                result = id;
            } else {
                result = parse_expr(p);
            }
            result_off = off;
        }
        if (!p->st && !at_stmt_end(p)) fail(p, p->t.off, p->t.len, TD_ERR_COMPILE, "syntax error: unexpected token");
    }
    if (!p->st && !returned) {
        if (result < 0)
            fail(p, result_off, 0, TD_ERR_COMPILE, "the block is empty");
        else
            g->n_outputs = 1, g->outputs[0] = result;
    }
    td_status st = p->st;
    free(p);
    return st;
}
