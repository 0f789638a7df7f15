/*
** Symbolic backward of a typed math graph: a derived td_math_graph whose
** inputs are the forward inputs, one upstream gradient per forward output and
** the saved forward values, and whose outputs are the gradients of the chosen
** inputs. Cheap elementwise forward values are recomputed inside it; the
** expensive ones (matmul, reductions, row ops, cross-entropy, layer norm)
** are saved unless checkpointing, then the forward is recomputed from the
** inputs alone. Broadcasting is undone by sum-to-shape (REDUCE SUM + RESHAPE);
** the builder folds constants and drops x*1, x+0 so the result stays small.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "math_internal.h"

typedef struct builder {
    const td_math_graph *f; /* forward */
    td_math_graph *b;       /* backward being built */
    int *fv;                /* forward node -> backward node computing its value, -1 not yet */
    int *grad;              /* forward node -> backward node of its gradient, -1 none */
    bool *active;           /* forward node depends on a wrt input and is float */
    bool checkpoint;
    td_math_grad *out;
    bool failed;
} builder;

static bool expensive(const td_math_node *n) {
    return n->kind == TD_MK_MATMUL || n->kind == TD_MK_REDUCE || n->kind == TD_MK_SOFTMAX ||
           n->kind == TD_MK_LOG_SOFTMAX || n->kind == TD_MK_CROSS_ENTROPY || n->kind == TD_MK_LAYER_NORM;
}

static const td_math_node *bn(builder *B, int id) { return &B->b->nodes[id]; }

static int put(builder *B, td_math_node n) {
    if (B->failed) return -1;
    for (int i = n.n_args; i < TD_MATH_MAX_ARGS; i++) n.args[i] = -1;
    for (int i = 0; i < n.n_args; i++)
        if (n.args[i] < 0 && !(n.kind == TD_MK_LAYER_NORM && i > 0)) return B->failed = true, -1;
    int id = td_math_add_typed(B->b, &n);
    if (id < 0) B->failed = true;
    return id;
}

static int cnst(builder *B, double v) {
    return put(B, (td_math_node){.kind = TD_MK_CONST, .value = v, .dtype = TD_F32});
}

static bool is_const(builder *B, int id, double v) {
    return id >= 0 && bn(B, id)->kind == TD_MK_CONST && bn(B, id)->value == v;
}

/* Elementwise with folding: constants fold, x*1, 1*x, x+0, 0+x, x-0, x/1 and -(-x) simplify. */
static int ew(builder *B, td_math_ew op, int a, int b, int c) {
    if (B->failed || a < 0) return -1;
    const td_math_node *x = bn(B, a), *y = b >= 0 ? bn(B, b) : NULL;
    if (op == TD_MEW_NEG && x->kind == TD_MK_CONST) return cnst(B, -x->value);
    if (op == TD_MEW_NEG && x->kind == TD_MK_EW && x->op == TD_MEW_NEG) return x->args[0];
    if (y && x->kind == TD_MK_CONST && y->kind == TD_MK_CONST) {
        double u = x->value, v = y->value;
        switch (op) {
        case TD_MEW_ADD: return cnst(B, u + v);
        case TD_MEW_SUB: return cnst(B, u - v);
        case TD_MEW_MUL: return cnst(B, u * v);
        case TD_MEW_DIV: return cnst(B, u / v);
        default: break;
        }
    }
    if ((op == TD_MEW_MUL || op == TD_MEW_DIV) && is_const(B, b, 1) && y->prio == 0) return a;
    if (op == TD_MEW_MUL && is_const(B, a, 1)) return b;
    if ((op == TD_MEW_ADD || op == TD_MEW_SUB) && is_const(B, b, 0)) return a;
    if (op == TD_MEW_ADD && is_const(B, a, 0)) return b;
    if (op == TD_MEW_MUL && is_const(B, b, -1)) return ew(B, TD_MEW_NEG, a, -1, -1);
    td_math_node n = {.kind = TD_MK_EW, .op = op, .n_args = b < 0 ? 1 : c < 0 ? 2 : 3, .args = {a, b, c}};
    return put(B, n);
}
#define E1(op, a)       ew(B, TD_MEW_##op, (a), -1, -1)
#define E2(op, a, b)    ew(B, TD_MEW_##op, (a), (b), -1)
#define E3(op, a, b, c) ew(B, TD_MEW_##op, (a), (b), (c))

static int shaped(builder *B, td_math_kind kind, int a, int ndim, const int64_t *shape) {
    if (B->failed || a < 0) return -1;
    const td_math_node *x = bn(B, a);
    if (x->ndim == ndim && memcmp(x->shape, shape, sizeof(int64_t) * (size_t)ndim) == 0) return a;
    td_math_node n = {.kind = kind, .n_args = 1, .args = {a}, .ndim = ndim};
    memcpy(n.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return put(B, n);
}

static int cast(builder *B, int a, td_dtype dt) {
    if (B->failed || a < 0 || bn(B, a)->dtype == dt) return a;
    td_math_node n = {.kind = TD_MK_EW, .op = TD_MEW_CAST, .n_args = 1, .args = {a}, .dtype = dt};
    return put(B, n);
}

static int reduce(builder *B, td_math_red op, int a, uint32_t dims, bool keepdim) {
    if (B->failed || a < 0) return -1;
    td_math_node n = {
        .kind = TD_MK_REDUCE, .op = op, .n_args = 1, .args = {a}, .dims = dims, .keepdim = keepdim, .correction = 1};
    return put(B, n);
}

/* g summed down to (ndim, shape) as broadcasting's adjoint, in dtype dt. */
static int sum_to(builder *B, int g, int ndim, const int64_t *shape, td_dtype dt) {
    if (B->failed || g < 0) return -1;
    const td_math_node *x = bn(B, g);
    uint32_t dims = 0;
    for (int d = 0; d < x->ndim; d++) {
        int t = d - (x->ndim - ndim);
        if (t < 0 || (shape[t] == 1 && x->shape[d] != 1)) dims |= 1u << d;
    }
    if (dims) {
        if (ndim == 0)
            g = reduce(B, TD_MRED_SUM, g, 0, false);
        else
            g = reduce(B, TD_MRED_SUM, g, dims, true);
    }
    return cast(B, shaped(B, TD_MK_RESHAPE, g, ndim, shape), dt);
}

static int sum_to_node(builder *B, int g, const td_math_node *like) {
    return sum_to(B, g, like->ndim, like->shape, like->dtype);
}

/* ---- forward values inside the backward ---- */

static int saved_input(builder *B, int i) {
    const td_math_node *f = &B->f->nodes[i];
    td_math_graph *b = B->b;
    if (b->n_inputs == TD_MATH_MAX_INPUTS) return -2; /* no room: recompute instead */
    char name[32];
    snprintf(name, sizeof name, "saved%d", i);
    char *copy = strdup(name);
    if (!copy) return B->failed = true, -1;
    int k = b->n_inputs++;
    b->input_names[k] = copy;
    td_math_node n = {.kind = TD_MK_INPUT, .input = k, .dtype = f->dtype, .ndim = f->ndim, .prio = f->prio};
    memcpy(n.shape, f->shape, sizeof n.shape);
    int id = td_math_add(b, &n);
    if (id < 0) return B->failed = true, -1;
    B->out->saved[B->out->n_saved++] = i;
    return id;
}

/* The backward node for forward node i's value: a saved input, or its forward recomputation (iterative: the
** forward may be a long chain). */
static int fv(builder *B, int i) {
    if (B->failed) return -1;
    if (B->fv[i] >= 0) return B->fv[i];
    int nn = B->f->n_nodes, *stack = malloc(sizeof(int) * (size_t)nn * 4), top = 0;
    bool *seen = calloc((size_t)nn, 1);
    if (!stack || !seen) {
        free(stack), free(seen);
        return B->failed = true, -1;
    }
    stack[top++] = i;
    while (top > 0) {
        int j = stack[--top];
        if (B->fv[j] >= 0 || seen[j]) continue;
        seen[j] = true;
        const td_math_node *f = &B->f->nodes[j];
        if (!B->checkpoint && expensive(f)) {
            int id = saved_input(B, j);
            if (id != -2) {
                B->fv[j] = id;
                continue;
            }
        }
        if (f->kind == TD_MK_INPUT) continue;
        for (int a = 0; a < f->n_args; a++)
            if (f->args[a] >= 0 && B->fv[f->args[a]] < 0 && top < nn * 4) stack[top++] = f->args[a];
    }
    for (int j = 0; j <= i && !B->failed; j++) {
        if (!seen[j] || B->fv[j] >= 0) continue;
        td_math_node n = B->f->nodes[j];
        if (n.kind == TD_MK_INPUT) continue; /* inputs map to themselves, set at the start */
        for (int a = 0; a < n.n_args; a++)
            if (n.args[a] >= 0) n.args[a] = B->fv[n.args[a]];
        n.n_wdims = 0;
        B->fv[j] = put(B, n);
    }
    free(stack), free(seen);
    return B->fv[i];
}

/* ---- derivative rules ---- */

static void acc(builder *B, int fnode, int g) {
    if (B->failed || g < 0 || !B->active[fnode]) return;
    const td_math_node *f = &B->f->nodes[fnode];
    g = sum_to_node(B, g, f);
    B->grad[fnode] = B->grad[fnode] < 0 ? g : E2(ADD, B->grad[fnode], g);
}

/* gk: a reduction's gradient with the reduced dims kept as 1, expanded to x's shape. */
static int expand_reduced(builder *B, int g, const td_math_node *y, const td_math_node *x) {
    int64_t keep[TD_MAX_DIMS];
    uint32_t mask = y->dims ? y->dims : (1u << x->ndim) - 1;
    for (int d = 0; d < x->ndim; d++) keep[d] = (mask >> d) & 1 ? 1 : x->shape[d];
    return shaped(B, TD_MK_EXPAND, shaped(B, TD_MK_RESHAPE, g, x->ndim, keep), x->ndim, x->shape);
}

static void rule_ew(builder *B, int i, int g) {
    const td_math_node *n = &B->f->nodes[i];
    int a = n->args[0], b = n->args[1], c = n->args[2];
    int x = fv(B, a), y = -1;
    switch ((td_math_ew)n->op) {
    case TD_MEW_NEG: acc(B, a, E1(NEG, g)); break;
    case TD_MEW_ABS: acc(B, a, E2(MUL, g, E1(SIGN, x))); break;
    case TD_MEW_EXP: acc(B, a, E2(MUL, g, fv(B, i))); break;
    case TD_MEW_LOG: acc(B, a, E2(DIV, g, x)); break;
    case TD_MEW_SQRT: acc(B, a, E2(DIV, E2(MUL, g, cnst(B, 0.5)), fv(B, i))); break; /* y = sqrt x: g / (2y) */
    case TD_MEW_RSQRT:                                                               /* y = x^-1/2: -g y / (2x) */
        acc(B, a, E2(DIV, E2(MUL, E2(MUL, g, cnst(B, -0.5)), fv(B, i)), x));
        break;
    case TD_MEW_SIN: acc(B, a, E2(MUL, g, E1(COS, x))); break;
    case TD_MEW_COS: acc(B, a, E1(NEG, E2(MUL, g, E1(SIN, x)))); break;
    case TD_MEW_TANH: y = fv(B, i), acc(B, a, E2(MUL, g, E2(SUB, cnst(B, 1), E2(MUL, y, y)))); break;
    case TD_MEW_SIGMOID: y = fv(B, i), acc(B, a, E2(MUL, g, E2(MUL, y, E2(SUB, cnst(B, 1), y)))); break;
    case TD_MEW_RELU: acc(B, a, E3(WHERE, E2(GT, x, cnst(B, 0)), g, cnst(B, 0))); break;
    case TD_MEW_GELU: { /* gelu' = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = e^(-x^2/2) / sqrt(2
                           pi) */
        int Phi = E2(MUL, E2(ADD, cnst(B, 1), E1(ERF, E2(MUL, x, cnst(B, M_SQRT1_2)))), cnst(B, 0.5));
        int phi = E2(MUL, E1(EXP, E2(MUL, E2(MUL, x, x), cnst(B, -0.5))), cnst(B, 0.3989422804014327));
        acc(B, a, E2(MUL, g, E2(ADD, Phi, E2(MUL, x, phi))));
        break;
    }
    case TD_MEW_SILU: { /* silu' = s (1 + x (1 - s)), s = sigmoid(x) */
        int s = E1(SIGMOID, x);
        acc(B, a, E2(MUL, g, E2(MUL, s, E2(ADD, cnst(B, 1), E2(MUL, x, E2(SUB, cnst(B, 1), s))))));
        break;
    }
    case TD_MEW_SOFTPLUS: acc(B, a, E2(MUL, g, E1(SIGMOID, x))); break;
    case TD_MEW_ERF: /* erf' = 2/sqrt(pi) e^(-x^2) */
        acc(B, a, E2(MUL, g, E2(MUL, E1(EXP, E1(NEG, E2(MUL, x, x))), cnst(B, 1.1283791670955126))));
        break;
    case TD_MEW_SIGN: break;
    case TD_MEW_CAST: acc(B, a, g); break;
    case TD_MEW_ADD: acc(B, a, g), acc(B, b, g); break;
    case TD_MEW_SUB: acc(B, a, g), acc(B, b, E1(NEG, g)); break;
    case TD_MEW_MUL: acc(B, a, E2(MUL, g, fv(B, b))), acc(B, b, E2(MUL, g, x)); break;
    case TD_MEW_DIV: { /* y = a / b: da = g / b, db = -g y / b */
        int yb = fv(B, b);
        acc(B, a, E2(DIV, g, yb));
        if (B->active[b]) acc(B, b, E1(NEG, E2(DIV, E2(MUL, g, fv(B, i)), yb)));
        break;
    }
    case TD_MEW_POW: { /* y = a^b: da = g b a^(b-1), db = g y log a (0 where a == 0, as torch) */
        int e = fv(B, b);
        if (B->active[a]) acc(B, a, E2(MUL, E2(MUL, g, e), E2(POW, x, E2(SUB, e, cnst(B, 1)))));
        if (B->active[b]) {
            int d = E2(MUL, fv(B, i), E1(LOG, x));
            acc(B, b, E2(MUL, g, E3(WHERE, E2(EQ, x, cnst(B, 0)), cnst(B, 0), d)));
        }
        break;
    }
    case TD_MEW_MIN:
    case TD_MEW_MAX: { /* the gradient goes to the winner; ties split it evenly, as torch */
        int yb = fv(B, b), win = n->op == TD_MEW_MAX ? E2(GT, x, yb) : E2(LT, x, yb), tie = E2(EQ, x, yb);
        int half = E2(MUL, g, cnst(B, 0.5));
        acc(B, a, E3(WHERE, win, g, E3(WHERE, tie, half, cnst(B, 0))));
        if (B->active[b]) {
            int lose = n->op == TD_MEW_MAX ? E2(LT, x, yb) : E2(GT, x, yb);
            acc(B, b, E3(WHERE, lose, g, E3(WHERE, tie, half, cnst(B, 0))));
        }
        break;
    }
    case TD_MEW_WHERE: {
        int cond = fv(B, a);
        acc(B, b, E3(WHERE, cond, g, cnst(B, 0)));
        acc(B, c, E3(WHERE, cond, cnst(B, 0), g));
        break;
    }
    case TD_MEW_CLAMP: { /* y = min(max(x, lo), hi), torch's rule: x passes inside [lo, hi], lo where x < lo < hi,
                          ** hi where x > hi or hi < lo */
        int lo = fv(B, b), hi = fv(B, c);
        acc(B, a, E3(WHERE, E2(GE, x, lo), E3(WHERE, E2(LE, x, hi), g, cnst(B, 0)), cnst(B, 0)));
        if (B->active[b]) acc(B, b, E3(WHERE, E2(LT, x, lo), E3(WHERE, E2(LT, lo, hi), g, cnst(B, 0)), cnst(B, 0)));
        if (B->active[c]) acc(B, c, E3(WHERE, E2(LT, hi, lo), g, E3(WHERE, E2(GT, x, hi), g, cnst(B, 0))));
        break;
    }
    default: break; /* comparisons have no gradient */
    }
}

static void rule_reduce(builder *B, int i, int g) {
    const td_math_node *n = &B->f->nodes[i], *xn = &B->f->nodes[n->args[0]];
    int a = n->args[0], ge = expand_reduced(B, g, n, xn);
    uint32_t mask = n->dims ? n->dims : (1u << xn->ndim) - 1;
    int64_t count = 1;
    for (int d = 0; d < xn->ndim; d++)
        if ((mask >> d) & 1) count *= xn->shape[d];
    int x = fv(B, a);
    switch ((td_math_red)n->op) {
    case TD_MRED_SUM: acc(B, a, ge); break;
    case TD_MRED_MEAN: acc(B, a, E2(DIV, ge, cnst(B, (double)count))); break;
    case TD_MRED_VAR: { /* dx = g 2 (x - mean x) / (N - correction) */
        int mu = expand_reduced(B, reduce(B, TD_MRED_MEAN, x, n->dims, true), n, xn);
        acc(B, a, E2(MUL, ge, E2(MUL, E2(SUB, x, mu), cnst(B, 2.0 / (double)(count - n->correction)))));
        break;
    }
    case TD_MRED_AMAX:
    case TD_MRED_AMIN: { /* the gradient split evenly over the elements equal to the extreme, as torch's amax */
        int y = expand_reduced(B, fv(B, i), n, xn);
        int hit = E3(WHERE, E2(EQ, x, y), cnst(B, 1), cnst(B, 0));
        hit = cast(B, hit, xn->dtype);
        int cnt = expand_reduced(B, reduce(B, TD_MRED_SUM, hit, n->dims, true), n, xn);
        acc(B, a, E2(DIV, E2(MUL, ge, hit), cnt));
        break;
    }
    case TD_MRED_LOGSUMEXP: { /* dx = g e^(x - y) */
        int y = expand_reduced(B, fv(B, i), n, xn);
        acc(B, a, E2(MUL, ge, E1(EXP, E2(SUB, x, y))));
        break;
    }
    }
}

static int row_dim(const td_math_node *n) { return n->ndim == 0 ? 0 : n->dim < 0 ? n->dim + n->ndim : n->dim; }

static void rule_matmul(builder *B, int i, int g) {
    const td_math_node *n = &B->f->nodes[i], *an = &B->f->nodes[n->args[0]], *bnode = &B->f->nodes[n->args[1]];
    int a = fv(B, n->args[0]), b = fv(B, n->args[1]);
    /* 1-D operands as torch: a [K] is [1, K], b [K] is [K, 1]; g gets those dims back */
    int64_t s1[TD_MAX_DIMS], s2[TD_MAX_DIMS], sg[TD_MAX_DIMS];
    int nd1 = an->ndim == 1 ? 2 : an->ndim, nd2 = bnode->ndim == 1 ? 2 : bnode->ndim;
    if (an->ndim == 1)
        s1[0] = 1, s1[1] = an->shape[0];
    else
        memcpy(s1, an->shape, sizeof(int64_t) * (size_t)nd1);
    if (bnode->ndim == 1)
        s2[0] = bnode->shape[0], s2[1] = 1;
    else
        memcpy(s2, bnode->shape, sizeof(int64_t) * (size_t)nd2);
    int ndg = 0;
    int nb = (nd1 > nd2 ? nd1 : nd2) - 2;
    for (int d = 0; d < nb; d++) {
        int d1 = d - (nb - (nd1 - 2)), d2 = d - (nb - (nd2 - 2));
        int64_t x = d1 >= 0 ? s1[d1] : 1, y = d2 >= 0 ? s2[d2] : 1;
        sg[ndg++] = x == 1 ? y : x;
    }
    sg[ndg++] = s1[nd1 - 2], sg[ndg++] = s2[nd2 - 1];
    int a1 = shaped(B, TD_MK_RESHAPE, a, nd1, s1), b1 = shaped(B, TD_MK_RESHAPE, b, nd2, s2);
    int g1 = shaped(B, TD_MK_RESHAPE, g, ndg, sg);
    td_math_node t = {.kind = TD_MK_TRANSPOSE, .n_args = 1};
    if (B->active[n->args[0]]) {
        t.args[0] = b1;
        td_math_node m = {.kind = TD_MK_MATMUL, .n_args = 2, .args = {g1, put(B, t)}};
        int da = sum_to(B, put(B, m), nd1, s1, an->dtype);
        acc(B, n->args[0], shaped(B, TD_MK_RESHAPE, da, an->ndim, an->shape));
    }
    if (B->active[n->args[1]]) {
        t.args[0] = a1;
        td_math_node m = {.kind = TD_MK_MATMUL, .n_args = 2, .args = {put(B, t), g1}};
        int db = sum_to(B, put(B, m), nd2, s2, bnode->dtype);
        acc(B, n->args[1], shaped(B, TD_MK_RESHAPE, db, bnode->ndim, bnode->shape));
    }
}

static void rule_layer_norm(builder *B, int i, int g) {
    const td_math_node *n = &B->f->nodes[i], *xn = &B->f->nodes[n->args[0]];
    uint32_t last = 1u << (xn->ndim - 1);
    int x = fv(B, n->args[0]), w = n->args[1] >= 0 ? fv(B, n->args[1]) : -1;
    /* mu = mean(x), xc = x - mu, rstd = 1 / sqrt(mean(xc^2) + eps), xhat = xc rstd (over the last dim) */
    int xc = E2(SUB, x, reduce(B, TD_MRED_MEAN, x, last, true));
    int rstd = E1(RSQRT, E2(ADD, reduce(B, TD_MRED_MEAN, E2(MUL, xc, xc), last, true), cnst(B, n->value)));
    int xhat = E2(MUL, xc, rstd);
    if (n->args[2] >= 0) acc(B, n->args[2], g);                /* term 1: db = sum g */
    if (n->args[1] >= 0) acc(B, n->args[1], E2(MUL, g, xhat)); /* term 2: dw = sum g xhat */
    if (B->active[n->args[0]]) { /* term 3: dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), gh = g w */
        int gh = w >= 0 ? E2(MUL, g, w) : g;
        int m1 = reduce(B, TD_MRED_MEAN, gh, last, true), m2 = reduce(B, TD_MRED_MEAN, E2(MUL, gh, xhat), last, true);
        acc(B, n->args[0], E2(MUL, rstd, E2(SUB, E2(SUB, gh, m1), E2(MUL, xhat, m2))));
    }
}

static void rule(builder *B, int i, int g) {
    const td_math_node *n = &B->f->nodes[i];
    switch (n->kind) {
    case TD_MK_EW: rule_ew(B, i, g); break;
    case TD_MK_REDUCE: rule_reduce(B, i, g); break;
    case TD_MK_SOFTMAX: { /* dx = y (g - sum(g y)) along dim */
        int y = fv(B, i);
        int s = reduce(B, TD_MRED_SUM, E2(MUL, g, y), n->ndim ? 1u << row_dim(n) : 0, true);
        acc(B, n->args[0], E2(MUL, y, E2(SUB, g, s)));
        break;
    }
    case TD_MK_LOG_SOFTMAX: { /* dx = g - e^y sum(g) along dim */
        int y = fv(B, i), s = reduce(B, TD_MRED_SUM, g, n->ndim ? 1u << row_dim(n) : 0, true);
        acc(B, n->args[0], E2(SUB, g, E2(MUL, E1(EXP, y), s)));
        break;
    }
    case TD_MK_MATMUL: rule_matmul(B, i, g); break;
    case TD_MK_TRANSPOSE:
        acc(B, n->args[0], put(B, (td_math_node){.kind = TD_MK_TRANSPOSE, .n_args = 1, .args = {g}}));
        break;
    case TD_MK_EXPAND:
    case TD_MK_RESHAPE: acc(B, n->args[0], g); break; /* acc sums / reshapes to the argument's shape */
    case TD_MK_CROSS_ENTROPY: {                       /* dlogits = g (softmax(logits) - one_hot(t)) / N */
        const td_math_node *ln = &B->f->nodes[n->args[0]];
        int p = put(B, (td_math_node){.kind = TD_MK_SOFTMAX, .n_args = 1, .args = {fv(B, n->args[0])}, .dim = -1});
        td_math_node oh = {.kind = TD_MK_ONE_HOT,
                           .n_args = 1,
                           .args = {fv(B, n->args[1])},
                           .classes = ln->shape[1],
                           .dtype = ln->dtype};
        int d = E2(DIV, E2(SUB, p, put(B, oh)), cnst(B, (double)ln->shape[0]));
        acc(B, n->args[0], E2(MUL, d, g));
        break;
    }
    case TD_MK_LAYER_NORM: rule_layer_norm(B, i, g); break;
    default: break;
    }
}

td_status td_math_grad_build(const td_math_graph *f, uint64_t wrt, bool checkpoint, td_math_grad *out) {
    memset(out, 0, sizeof *out);
    td_math_graph_init(&out->graph);
    out->wrt = wrt;
    int nn = f->n_nodes;
    builder B = {.f = f, .b = &out->graph, .checkpoint = checkpoint, .out = out};
    B.fv = malloc(sizeof(int) * (size_t)nn), B.grad = malloc(sizeof(int) * (size_t)nn);
    B.active = calloc((size_t)nn, 1);
    out->saved = malloc(sizeof(int) * (size_t)(nn + 1));
    td_status st = TD_OK;
    if (!B.fv || !B.grad || !B.active || !out->saved || f->n_inputs + f->n_outputs > TD_MATH_MAX_INPUTS) {
        st = TD_ERR(TD_ERR_OOM, "math block: out of memory (or too many inputs) building the backward");
        goto done;
    }
    for (int i = 0; i < nn; i++) {
        const td_math_node *n = &f->nodes[i];
        B.fv[i] = B.grad[i] = -1;
        bool act = n->kind == TD_MK_INPUT && ((wrt >> n->input) & 1);
        for (int a = 0; a < n->n_args; a++) act |= n->args[a] >= 0 && B.active[n->args[a]];
        B.active[i] = act && td_dtype_is_float(n->dtype);
    }
    /* inputs: the forward's, then one upstream gradient per output */
    td_math_graph *b = &out->graph;
    for (int k = 0; k < f->n_inputs + f->n_outputs && !st; k++) {
        char name[32];
        const td_math_node *like = NULL;
        if (k < f->n_inputs) {
            snprintf(name, sizeof name, "%s", f->input_names[k]);
            for (int i = 0; i < nn; i++)
                if (f->nodes[i].kind == TD_MK_INPUT && f->nodes[i].input == k) like = &f->nodes[i];
        } else
            snprintf(name, sizeof name, "grad%d", k - f->n_inputs), like = &f->nodes[f->outputs[k - f->n_inputs]];
        b->input_names[k] = strdup(name);
        if (!b->input_names[k]) st = TD_ERR(TD_ERR_OOM, "math block: out of memory");
        b->n_inputs = k + 1;
        td_math_node n = {.kind = TD_MK_INPUT, .input = k, .args = {-1, -1, -1}};
        if (like) {
            n.dtype = like->dtype, n.ndim = like->ndim, n.prio = like->kind == TD_MK_INPUT ? like->prio : 2;
            memcpy(n.shape, like->shape, sizeof n.shape);
            if (k >= f->n_inputs) n.prio = n.ndim > 0 ? 2 : 1;
        }
        int id = td_math_add(b, &n);
        if (id < 0) st = TD_ERR(TD_ERR_OOM, "math block: out of memory");
        if (k >= f->n_inputs) out->grad_in[k - f->n_inputs] = id;
    }
    if (st) goto done;
    for (int i = 0; i < nn; i++)
        if (f->nodes[i].kind == TD_MK_INPUT) {
            for (int j = 0; j < b->n_nodes; j++)
                if (b->nodes[j].kind == TD_MK_INPUT && b->nodes[j].input == f->nodes[i].input) B.fv[i] = j;
        }
    for (int k = 0; k < f->n_outputs; k++) acc(&B, f->outputs[k], out->grad_in[k]);
    for (int i = nn; i-- > 0 && !B.failed;)
        if (B.grad[i] >= 0 && B.active[i]) rule(&B, i, B.grad[i]);
    /* outputs: the gradient of each wrt input, zeros for one the outputs do not use */
    for (int k = 0; k < f->n_inputs && !B.failed; k++) {
        if (!((wrt >> k) & 1)) continue;
        int fi = -1;
        for (int i = 0; i < nn; i++)
            if (f->nodes[i].kind == TD_MK_INPUT && f->nodes[i].input == k) fi = i;
        int gk = fi >= 0 ? B.grad[fi] : -1;
        if (gk < 0 && fi >= 0) {
            const td_math_node *x = &f->nodes[fi];
            gk = cast(&B, shaped(&B, TD_MK_EXPAND, cnst(&B, 0), x->ndim, x->shape), x->dtype);
        }
        out->grad_of[k] = b->n_outputs;
        b->outputs[b->n_outputs++] = gk;
    }
    if (B.failed)
        st = td_last_status() ? td_last_status() : TD_ERR(TD_ERR_OOM, "math block: out of memory");
    else
        b->typed = true;
done:
    free(B.fv), free(B.grad), free(B.active);
    if (st) td_math_grad_free(out);
    return st;
}

void td_math_grad_free(td_math_grad *gr) {
    if (!gr) return;
    td_math_graph_free(&gr->graph);
    free(gr->saved);
    gr->saved = NULL, gr->n_saved = 0;
}
