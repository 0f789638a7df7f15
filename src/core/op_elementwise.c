/*
** Elementwise front-ends: binary arithmetic and comparisons with NumPy
** broadcasting and PyTorch dtype promotion, their scalar forms, where, the
** unary math ops, clamp, and GELU's backward (for autograd).
** Inputs are cast to the compute dtype with td_cast (so autograd sees the
** cast), broadcast through stride-0 views, and the result is a fresh
** contiguous tensor.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* t converted to dt, owned by the caller (NULL passes through); t itself, retained, when it has dt already
** (what td_cast then td_keep give, without the scope's add and search). */
static td_tensor *cast_kept(td_tensor *t, td_dtype dt) {
    return t && t->magic == TD_TENSOR_ALIVE && t->dtype == dt ? td_retain(t) : td_keep(td_cast(t, dt));
}

/* Broadcast in[0..n) against each other and run kind into a new tensor of dtype odt. */
static td_tensor *run_elementwise(td_op_kind kind, const char *name, int n, td_tensor **in, td_dtype odt,
                                  const td_op_params *p) {
    int nd = in[0]->ndim;
    int64_t shape[TD_MAX_DIMS], prev[TD_MAX_DIMS];
    memcpy(shape, in[0]->shape, sizeof(int64_t) * (size_t)nd);
    for (int k = 1; k < n; k++) {
        if (in[k]->ndim == nd && !memcmp(in[k]->shape, shape, sizeof(int64_t) * (size_t)nd)) continue; /* same */
        memcpy(prev, shape, sizeof prev);
        if (td_broadcast_shapes(nd, prev, in[k]->ndim, in[k]->shape, &nd, shape) != TD_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", td_last_error());
            TD_FAIL_NULL(TD_ERR_SHAPE, "%s: %s", name, why);
        }
    }
    td_operand views[3];
    for (int k = 0; k < n; k++) views[k] = td__view_broadcast(in[k], nd, shape);
    td_tensor *out = td__alloc(nd, shape, odt, in[0]->storage->device);
    if (!out) return NULL;
    return td__finish(td__dispatch(kind, n, in, views, 1, &out, p), out);
}

static bool is_compare(td_op_kind k) { return k >= TD_OP_EQ && k <= TD_OP_GE; }

/* a op b: promote, cast both to the compute dtype, broadcast, run. */
static td_tensor *binary_cast(td_op_kind kind, const char *name, td_tensor *a, td_tensor *b) {
    td_dtype dt = td_dtype_promote(a->dtype, b->dtype), odt = dt;
    if (is_compare(kind)) {
        odt = TD_BOOL;
        if (dt == TD_BOOL && kind != TD_OP_EQ && kind != TD_OP_NE) dt = TD_U8; /* order false < true */
    } else if (dt == TD_BOOL) {
        TD_FAIL_NULL(TD_ERR_DTYPE, "%s: not defined for two bool tensors; cast one to a numeric dtype first", name);
    } else if ((kind == TD_OP_DIV || kind == TD_OP_POW) && !td_dtype_is_float(dt)) {
        dt = odt = TD_F32; /* true division and pow of integers compute in float32 */
    }
    td_tensor *in[2] = {cast_kept(a, dt), cast_kept(b, dt)};
    td_tensor *out = in[0] && in[1] ? run_elementwise(kind, name, 2, in, odt, NULL) : NULL;
    td_release(in[0]);
    td_release(in[1]);
    return out;
}

/* binary_cast after autocast's casts (pow: f32; the others: promotion, as binary_cast's own). */
static td_tensor *binary(td_op_kind kind, const char *name, td_tensor *a, td_tensor *b) {
    TD_CHECK_ARG(a, name);
    TD_CHECK_ARG(b, name);
    td_tensor *in[2] = {a, b}, *held[2];
    td_tensor *out = td__autocast(kind, 2, in, held) ? binary_cast(kind, name, in[0], in[1]) : NULL;
    td__autocast_release(2, held);
    return out;
}

/* The public binary ops (td_<op>, named "<op>"), and those of them with a scalar right side. */
#define BINARY_OPS(X)                                                                                                  \
    X(add, ADD)                                                                                                        \
    X(sub, SUB)                                                                                                        \
    X(mul, MUL) X(div, DIV) X(pow, POW) X(maximum, MAXIMUM) X(minimum, MINIMUM) X(eq, EQ) X(ne, NE) X(lt, LT)          \
        X(le, LE) X(gt, GT) X(ge, GE)
#define SCALAR_OPS(X) X(add, ADD) X(sub, SUB) X(mul, MUL) X(div, DIV) X(pow, POW)

#define DEFINE_BINARY(op, KIND)                                                                                        \
    td_tensor *td_##op(td_tensor *a, td_tensor *b) { return binary(TD_OP_##KIND, #op, a, b); }
BINARY_OPS(DEFINE_BINARY)

static bool is_whole(double s) { return isfinite(s) && s == floor(s); }

/* a op s with s as a 0-d tensor: a float a keeps its dtype; an integer a keeps
** its dtype for a whole s (bool becomes int64) and computes in float32 otherwise. */
static td_tensor *binary_scalar(td_op_kind kind, const char *name, td_tensor *a, double s) {
    TD_CHECK_ARG(a, name);
    td_dtype dt = td_dtype_is_float(a->dtype) ? a->dtype
                  : !is_whole(s)              ? TD_F32
                  : a->dtype == TD_BOOL       ? TD_I64
                                              : a->dtype;
    td_tensor *b = td_keep(td_scalar(s, dt, a->storage->device));
    td_tensor *out = b ? binary(kind, name, a, b) : NULL;
    td_release(b);
    return out;
}

#define DEFINE_SCALAR(op, KIND)                                                                                        \
    td_tensor *td_##op##_scalar(td_tensor *a, double s) { return binary_scalar(TD_OP_##KIND, #op "_scalar", a, s); }
SCALAR_OPS(DEFINE_SCALAR)

td_tensor *td_where(td_tensor *cond, td_tensor *a, td_tensor *b) {
    TD_CHECK_ARG(cond, "where");
    TD_CHECK_ARG(a, "where");
    TD_CHECK_ARG(b, "where");
    if (cond->dtype != TD_BOOL)
        TD_FAIL_NULL(TD_ERR_DTYPE, "where: cond must be bool, got %s (compare it, e.g. td_ne(cond, zero))",
                     td_dtype_name(cond->dtype));
    td_dtype dt = td_dtype_promote(a->dtype, b->dtype);
    td_tensor *in[3] = {cond, cast_kept(a, dt), cast_kept(b, dt)};
    td_tensor *out = in[1] && in[2] ? run_elementwise(TD_OP_WHERE, "where", 3, in, dt, NULL) : NULL;
    td_release(in[1]);
    td_release(in[2]);
    return out;
}

/* ---- unary ---- */

/* kind on x; integer x computes in float32 when the op is float-only (as in PyTorch). */
static td_tensor *unary(td_op_kind kind, const char *name, td_tensor *x, bool to_float, const td_op_params *p) {
    TD_CHECK_ARG(x, name);
    if (x->dtype == TD_BOOL)
        TD_FAIL_NULL(TD_ERR_DTYPE, "%s: not defined for bool tensors; cast to a numeric dtype first", name);
    td_tensor *held;
    if (!td__autocast(kind, 1, &x, &held)) return NULL; /* exp, log, rsqrt: f32 */
    td_dtype dt = to_float && !td_dtype_is_float(x->dtype) ? TD_F32 : x->dtype;
    td_tensor *in = cast_kept(x, dt);
    td_tensor *out = in ? run_elementwise(kind, name, 1, &in, dt, p) : NULL;
    td_release(in);
    td__autocast_release(1, &held);
    return out;
}

/* The public unary ops: name, kind, whether an integer input computes in float. */
#define UNARY_OPS(X)                                                                                                   \
    X(neg, NEG, false)                                                                                                 \
    X(abs, ABS, false)                                                                                                 \
    X(exp, EXP, true) X(log, LOG, true) X(sqrt, SQRT, true) X(rsqrt, RSQRT, true) X(sin, SIN, true) X(cos, COS, true)  \
        X(tanh, TANH, true) X(sigmoid, SIGMOID, true) X(relu, RELU, false) X(silu, SILU, true)
#define DEFINE_UNARY(op, KIND, to_float)                                                                               \
    td_tensor *td_##op(td_tensor *x) { return unary(TD_OP_##KIND, #op, x, to_float, NULL); }
UNARY_OPS(DEFINE_UNARY)

td_tensor *td_gelu(td_tensor *x, bool tanh_approx) {
    td_op_params p = {.gelu = {tanh_approx ? TD_GELU_TANH : TD_GELU_ERF}};
    return unary(TD_OP_GELU, "gelu", x, true, &p);
}

/* NAN leaves a side open; an integer x with a fractional bound computes in float32. */
td_tensor *td_clamp(td_tensor *x, double lo, double hi) {
    td_op_params p = {.clamp = {lo, hi, !isnan(lo), !isnan(hi)}};
    bool whole = (isnan(lo) || is_whole(lo)) && (isnan(hi) || is_whole(hi));
    return unary(TD_OP_CLAMP, "clamp", x, !whole, &p);
}

td_tensor *td__gelu_backward(td_tensor *dy, td_tensor *x, bool tanh_approx) {
    TD_CHECK_ARG(dy, "gelu_backward");
    TD_CHECK_ARG(x, "gelu_backward");
    td_dtype dt = td_dtype_promote(dy->dtype, x->dtype);
    if (!td_dtype_is_float(dt))
        TD_FAIL_NULL(TD_ERR_DTYPE, "gelu_backward: dy (%s) and x (%s) must be floating", td_dtype_name(dy->dtype),
                     td_dtype_name(x->dtype));
    td_op_params p = {.gelu = {tanh_approx ? TD_GELU_TANH : TD_GELU_ERF}};
    td_tensor *in[2] = {cast_kept(dy, dt), cast_kept(x, dt)};
    td_tensor *out = in[0] && in[1] ? run_elementwise(TD_OP_GELU_BACKWARD, "gelu_backward", 2, in, dt, &p) : NULL;
    td_release(in[0]);
    td_release(in[1]);
    return out;
}
