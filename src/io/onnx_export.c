/*
** ONNX export (include/trident/io.h): trace a forward pass (onnx_trace.c), map
** each recorded op and view to ONNX operators of the default domain, opset 17,
** and write the ModelProto with our protobuf writer (protobuf_writer.c).
**
** Values: the example inputs are the graph inputs "input" ("input.<i>" for
** several); the parameters and buffers the forward reads become initializers
** under their state_dict names; every other tensor that no traced op made from
** an input or a parameter is a constant (an initializer "const.<k>" holding its
** values: masks, position ids, scalars). An op whose inputs are all constants
** is folded into its result. Shapes are the example inputs' (static).
**
** onnx.proto's field numbers used here (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto):
**   ModelProto       ir_version 1, producer_name 2, graph 7, opset_import 8
**   OperatorSetId    domain 1, version 2
**   GraphProto       node 1, name 2, initializer 5, input 11, output 12
**   NodeProto        input 1, output 2, name 3, op_type 4, attribute 5
**   AttributeProto   name 1, f 2, i 3, s 4, ints 8, type 20 (FLOAT 1, INT 2, STRING 3, INTS 7)
**   TensorProto      dims 1, data_type 2, name 8, raw_data 9 (little-endian, row-major)
**   ValueInfoProto   name 1, type 2; TypeProto tensor_type 1; Tensor elem_type 1, shape 2;
**   TensorShapeProto dim 1; Dimension dim_value 1
*/
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"
#include "protobuf_writer.h"
#include "trident/autograd.h"
#include "trident/io.h"

enum { OPSET = 17, IR_VERSION = 8 };
#define SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2/pi) */
#define SQRT_HALF      0.70710678118654752440 /* 1/sqrt(2) */

/* A traced tensor's ONNX value: live values depend on an input or a parameter;
** gone marks an output with no ONNX counterpart (its reason). */
typedef struct value {
    td_tensor *t;
    const char *name;
    bool live;
    const char *gone;
} value;

typedef struct ex {
    td__pb nodes, inits; /* encoded GraphProto fields: node (1), initializer (5) */
    value *v;
    int nv, capv;
    char **str; /* every name made, freed at the end */
    int nstr, capstr;
    int counter;
    const td_named_tensors *params;
    td_status st;
} ex;

/* ---- names and values ---- */

static const char *keep_str(ex *e, char *s) {
    if (s && e->nstr == e->capstr) {
        int cap = e->capstr ? 2 * e->capstr : 256;
        char **n = realloc(e->str, (size_t)cap * sizeof *n);
        if (n)
            e->str = n, e->capstr = cap;
        else
            free(s), s = NULL;
    }
    if (!s) {
        if (e->st == TD_OK) e->st = TD_ERR(TD_ERR_OOM, "onnx export: out of host memory");
        return "";
    }
    e->str[e->nstr++] = s;
    return s;
}

/* "stem.<k>", unique in the model */
static const char *fresh(ex *e, const char *stem) {
    char buf[96];
    snprintf(buf, sizeof buf, "%s.%d", stem, e->counter++);
    return keep_str(e, strdup(buf));
}

static value *bind(ex *e, td_tensor *t, const char *name, bool live) {
    if (e->nv == e->capv) {
        int cap = e->capv ? 2 * e->capv : 256;
        value *n = realloc(e->v, (size_t)cap * sizeof *n);
        if (!n) {
            if (e->st == TD_OK) e->st = TD_ERR(TD_ERR_OOM, "onnx export: out of host memory");
            return NULL;
        }
        e->v = n, e->capv = cap;
    }
    e->v[e->nv] = (value){.t = t, .name = name, .live = live};
    return &e->v[e->nv++];
}

/* The latest binding of t (an in-place op rebinds), or NULL. */
static value *find(ex *e, const td_tensor *t) {
    for (int i = e->nv - 1; i >= 0; i--)
        if (e->v[i].t == t) return &e->v[i];
    return NULL;
}

static int onnx_dtype(td_dtype dt) {
    switch (dt) {
    case TD_F32: return 1;
    case TD_U8: return 2;
    case TD_I32: return 6;
    case TD_I64: return 7;
    case TD_BOOL: return 9;
    case TD_F16: return 10;
    case TD_F64: return 11;
    case TD_BF16: return 16;
    default: return 0;
    }
}

static void write_initializer(ex *e, const char *name, td_dtype dt, int ndim, const int64_t *shape, const void *data,
                              size_t nbytes) {
    size_t at = td__pb_begin(&e->inits, 5);
    for (int i = 0; i < ndim; i++) td__pb_int(&e->inits, 1, shape[i]);
    td__pb_int(&e->inits, 2, onnx_dtype(dt));
    td__pb_string(&e->inits, 8, name);
    td__pb_bytes(&e->inits, 9, data, nbytes);
    td__pb_end(&e->inits, at);
}

/* t's values as an initializer called name (row-major, on the host). */
static void tensor_initializer(ex *e, const char *name, td_tensor *t) {
    size_t nbytes = (size_t)td_numel(t) * td_dtype_size(t->dtype);
    void *host = malloc(nbytes ? nbytes : 1);
    if (!host) {
        e->st = TD_ERR(TD_ERR_OOM, "onnx export: out of host memory reading %s", name);
        return;
    }
    td_status st = td_copy_to_host(t, host, nbytes, t->dtype);
    if (st == TD_OK)
        write_initializer(e, name, t->dtype, t->ndim, t->shape, host, nbytes);
    else if (e->st == TD_OK)
        e->st = st;
    free(host);
}

/* The value of t: its binding, else a parameter (initializer under its
** state_dict name, live) or a constant (initializer const.<k>). */
static value *resolve(ex *e, td_tensor *t) {
    value *v = find(e, t);
    if (v || e->st != TD_OK) return v;
    if (!onnx_dtype(t->dtype)) {
        e->st = TD_ERR(TD_ERR_DTYPE, "onnx export: a tensor of dtype %s has no ONNX type", td_dtype_name(t->dtype));
        return NULL;
    }
    for (int64_t i = 0; e->params && i < td_named_tensors_len(e->params); i++)
        if (td_named_tensors_at(e->params, i) == t) {
            const char *name = td_named_tensors_name(e->params, i);
            tensor_initializer(e, name, t);
            return bind(e, t, name, true);
        }
    const char *name = fresh(e, "const");
    tensor_initializer(e, name, t);
    return bind(e, t, name, false);
}

/* ---- nodes ---- */

static size_t node_begin(ex *e, const char *op, int n_in, const char *const *in, int n_out, const char *const *out) {
    size_t at = td__pb_begin(&e->nodes, 1);
    for (int i = 0; i < n_in; i++) td__pb_string(&e->nodes, 1, in[i] ? in[i] : "");
    for (int i = 0; i < n_out; i++) td__pb_string(&e->nodes, 2, out[i]);
    char name[64];
    snprintf(name, sizeof name, "%s.%d", op, e->counter++);
    td__pb_string(&e->nodes, 3, name);
    td__pb_string(&e->nodes, 4, op);
    return at;
}

static void node_end(ex *e, size_t at) { td__pb_end(&e->nodes, at); }

static void attr_int(ex *e, const char *name, int64_t v) {
    size_t at = td__pb_begin(&e->nodes, 5);
    td__pb_string(&e->nodes, 1, name);
    td__pb_int(&e->nodes, 20, 2);
    td__pb_int(&e->nodes, 3, v);
    td__pb_end(&e->nodes, at);
}

static void attr_float(ex *e, const char *name, double v) {
    size_t at = td__pb_begin(&e->nodes, 5);
    td__pb_string(&e->nodes, 1, name);
    td__pb_int(&e->nodes, 20, 1);
    td__pb_float(&e->nodes, 2, (float)v);
    td__pb_end(&e->nodes, at);
}

static void attr_str(ex *e, const char *name, const char *s) {
    size_t at = td__pb_begin(&e->nodes, 5);
    td__pb_string(&e->nodes, 1, name);
    td__pb_int(&e->nodes, 20, 3);
    td__pb_string(&e->nodes, 4, s);
    td__pb_end(&e->nodes, at);
}

static void attr_ints(ex *e, const char *name, int n, const int64_t *v) {
    size_t at = td__pb_begin(&e->nodes, 5);
    td__pb_string(&e->nodes, 1, name);
    td__pb_int(&e->nodes, 20, 7);
    for (int i = 0; i < n; i++) td__pb_int(&e->nodes, 8, v[i]);
    td__pb_end(&e->nodes, at);
}

/* A node without attributes and one output: out if given, else a fresh name. */
static const char *node(ex *e, const char *op, int n_in, const char *const *in, const char *out) {
    if (!out) out = fresh(e, "t");
    node_end(e, node_begin(e, op, n_in, in, 1, &out));
    return out;
}
#define NODE(e, op, out, ...)                                                                                          \
    node(e, op, (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), (const char *[]){__VA_ARGS__}, out)

/* constants made by the mapping itself: 1-D int64, and 0-d scalars of dtype dt */
static const char *const_i64(ex *e, int n, const int64_t *v) {
    const char *name = fresh(e, "const");
    int64_t len = n;
    write_initializer(e, name, TD_I64, 1, &len, v, (size_t)n * sizeof *v);
    return name;
}

static const char *const_scalar(ex *e, td_dtype dt, double x) {
    const char *name = fresh(e, "const");
    union {
        float f;
        double d;
        int32_t i;
        int64_t l;
        uint8_t u;
    } u;
    switch (dt) {
    case TD_F64: u.d = x; break;
    case TD_I32: u.i = (int32_t)x; break;
    case TD_I64: u.l = (int64_t)x; break;
    case TD_U8:
    case TD_BOOL: u.u = (uint8_t)x; break;
    case TD_F32: u.f = (float)x; break;
    default:
        if (e->st == TD_OK)
            e->st = TD_ERR(TD_ERR_DTYPE, "onnx export: %s models are not exported; convert the module to float32",
                           td_dtype_name(dt));
        return name;
    }
    write_initializer(e, name, dt, 0, NULL, &u, td_dtype_size(dt));
    return name;
}

/* gelu(x) = x Phi(x): erf form 0.5 x (1 + erf(x / sqrt 2)); tanh form
** 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). ONNX's Gelu is opset 20. */
static const char *gelu(ex *e, td_dtype dt, const char *x, bool tanh_form, const char *out) {
    const char *inner;
    if (tanh_form) {
        const char *x3 = NODE(e, "Mul", NULL, x, NODE(e, "Mul", NULL, x, x));
        const char *s = NODE(e, "Add", NULL, x, NODE(e, "Mul", NULL, x3, const_scalar(e, dt, 0.044715)));
        inner = NODE(e, "Tanh", NULL, NODE(e, "Mul", NULL, s, const_scalar(e, dt, SQRT_2_OVER_PI)));
    } else {
        inner = NODE(e, "Erf", NULL, NODE(e, "Mul", NULL, x, const_scalar(e, dt, SQRT_HALF)));
    }
    const char *phi2 = NODE(e, "Add", NULL, inner, const_scalar(e, dt, 1.0));
    return NODE(e, "Mul", out, NODE(e, "Mul", NULL, x, phi2), const_scalar(e, dt, 0.5));
}

/* ---- one traced op ---- */

static td_status no_mapping(const char *what) {
    return TD_ERR(TD_ERR_UNSUPPORTED, "onnx export: op %s has no ONNX mapping", what);
}

/* The reduced dims of a reduction (bit k of mask: dim k of x). */
static int reduce_axes(uint32_t mask, int ndim, int64_t *axes) {
    int n = 0;
    for (int k = 0; k < ndim; k++)
        if ((mask >> k) & 1) axes[n++] = k;
    return n;
}

/* Emit the nodes of op ev (inputs named in[], outputs to be named out[]). */
static td_status map_op(ex *e, const td__tr_event *ev, const char *const *in, const char **out) {
    td_tensor *x = ev->in[0], *y = ev->out[0];
    td_dtype dt = x ? x->dtype : y->dtype;
    const td_op_params *p = &ev->p;
    int64_t ax[TD_MAX_DIMS];
    static const char *const direct[TD_OP_COUNT] = {
        [TD_OP_ADD] = "Add",         [TD_OP_SUB] = "Sub",        [TD_OP_MUL] = "Mul",     [TD_OP_DIV] = "Div",
        [TD_OP_POW] = "Pow",         [TD_OP_MAXIMUM] = "Max",    [TD_OP_MINIMUM] = "Min", [TD_OP_EQ] = "Equal",
        [TD_OP_LT] = "Less",         [TD_OP_LE] = "LessOrEqual", [TD_OP_GT] = "Greater",  [TD_OP_GE] = "GreaterOrEqual",
        [TD_OP_NEG] = "Neg",         [TD_OP_ABS] = "Abs",        [TD_OP_EXP] = "Exp",     [TD_OP_LOG] = "Log",
        [TD_OP_SQRT] = "Sqrt",       [TD_OP_SIN] = "Sin",        [TD_OP_COS] = "Cos",     [TD_OP_TANH] = "Tanh",
        [TD_OP_SIGMOID] = "Sigmoid", [TD_OP_RELU] = "Relu",      [TD_OP_WHERE] = "Where", [TD_OP_MATMUL] = "MatMul",
        [TD_OP_EMBEDDING] = "Gather"};
    if (direct[ev->kind]) { /* one ONNX op of the same operands (numpy broadcasting on both sides) */
        node(e, direct[ev->kind], ev->n_in, in, out[0]);
        return TD_OK;
    }
    switch (ev->kind) {
    case TD_OP_COPY: /* a cast, a copy, or td_copy_'s broadcast into an existing tensor */
    {
        const char *s = in[0];
        if (x->ndim != y->ndim || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)y->ndim))
            s = NODE(e, "Expand", NULL, s, const_i64(e, y->ndim, y->shape));
        if (x->dtype == y->dtype)
            NODE(e, "Identity", out[0], s);
        else {
            size_t at = node_begin(e, "Cast", 1, &s, 1, &out[0]);
            attr_int(e, "to", onnx_dtype(y->dtype));
            node_end(e, at);
        }
        return TD_OK;
    }
    case TD_OP_NE: NODE(e, "Not", out[0], NODE(e, "Equal", NULL, in[0], in[1])); return TD_OK;
    case TD_OP_RSQRT: NODE(e, "Reciprocal", out[0], NODE(e, "Sqrt", NULL, in[0])); return TD_OK;
    case TD_OP_SILU: NODE(e, "Mul", out[0], in[0], NODE(e, "Sigmoid", NULL, in[0])); return TD_OK;
    case TD_OP_GELU: gelu(e, dt, in[0], p->gelu.approximate == TD_GELU_TANH, out[0]); return TD_OK;
    case TD_OP_CLAMP:
        NODE(e, "Clip", out[0], in[0], p->clamp.has_lo ? const_scalar(e, dt, p->clamp.lo) : "",
             p->clamp.has_hi ? const_scalar(e, dt, p->clamp.hi) : "");
        return TD_OK;
    case TD_OP_DROPOUT:
        if (p->rng.p != 0)
            return TD_ERR(TD_ERR_UNSUPPORTED, "onnx export: op dropout with p = %g ran (training mode)", p->rng.p);
        NODE(e, "Identity", out[0], in[0]);
        return TD_OK;
    case TD_OP_SUM:
    case TD_OP_MEAN:
    case TD_OP_MAX:
    case TD_OP_MIN:
    case TD_OP_LOGSUMEXP: {
        int n = reduce_axes(p->reduce.dims, x->ndim, ax);
        bool keep = y->ndim == x->ndim;
        const char *r = ev->kind == TD_OP_SUM    ? "ReduceSum"
                        : ev->kind == TD_OP_MEAN ? "ReduceMean"
                        : ev->kind == TD_OP_MAX  ? "ReduceMax"
                        : ev->kind == TD_OP_MIN  ? "ReduceMin"
                                                 : "ReduceLogSumExp";
        bool cast = y->dtype != x->dtype; /* sum of integers: int64 */
        const char *s = cast ? fresh(e, "t") : out[0];
        size_t at;
        if (ev->kind == TD_OP_SUM) { /* opset 13: axes is an input; the others' until opset 18: an attribute */
            const char *ins[2] = {in[0], const_i64(e, n, ax)};
            at = node_begin(e, r, 2, ins, 1, &s);
        } else {
            at = node_begin(e, r, 1, in, 1, &s);
            attr_ints(e, "axes", n, ax);
        }
        attr_int(e, "keepdims", keep);
        node_end(e, at);
        if (cast) {
            at = node_begin(e, "Cast", 1, &s, 1, &out[0]);
            attr_int(e, "to", onnx_dtype(y->dtype));
            node_end(e, at);
        }
        return TD_OK;
    }
    case TD_OP_ARGMAX:
    case TD_OP_ARGMIN: {
        reduce_axes(p->reduce.dims, x->ndim, ax);
        size_t at = node_begin(e, ev->kind == TD_OP_ARGMAX ? "ArgMax" : "ArgMin", 1, in, 1, &out[0]);
        attr_int(e, "axis", ax[0]);
        attr_int(e, "keepdims", y->ndim == x->ndim);
        attr_int(e, "select_last_index", 0);
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_VAR: { /* sum((x - mean)^2) / (n - correction) */
        int n = reduce_axes(p->reduce.dims, x->ndim, ax);
        int64_t count = 1;
        for (int i = 0; i < n; i++) count *= x->shape[ax[i]];
        const char *m = fresh(e, "t"), *s = fresh(e, "t");
        size_t at = node_begin(e, "ReduceMean", 1, in, 1, &m);
        attr_ints(e, "axes", n, ax);
        node_end(e, at);
        const char *d = NODE(e, "Sub", NULL, in[0], m);
        const char *ins[2] = {NODE(e, "Mul", NULL, d, d), const_i64(e, n, ax)};
        at = node_begin(e, "ReduceSum", 2, ins, 1, &s);
        attr_int(e, "keepdims", y->ndim == x->ndim);
        node_end(e, at);
        NODE(e, "Div", out[0], s, const_scalar(e, dt, (double)(count - p->reduce.correction)));
        return TD_OK;
    }
    case TD_OP_LINEAR: { /* y = x w^T + b (Gemm) */
        size_t at = node_begin(e, "Gemm", ev->in[2] ? 3 : 2, in, 1, &out[0]);
        attr_int(e, "transB", 1);
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_LINEAR_RESIDUAL: { /* y = x w^T (Gemm; cast to r's dtype, an autocast f32 stream's) + b + r */
        const char *h = fresh(e, "gemm");
        size_t at = node_begin(e, "Gemm", 2, in, 1, &h);
        attr_int(e, "transB", 1);
        node_end(e, at);
        if (x->dtype != y->dtype) {
            const char *c = fresh(e, "cast");
            at = node_begin(e, "Cast", 1, &h, 1, &c);
            attr_int(e, "to", onnx_dtype(y->dtype));
            node_end(e, at);
            h = c;
        }
        if (ev->in[2]) h = NODE(e, "Add", NULL, h, in[2]);
        NODE(e, "Add", out[0], h, in[3]);
        return TD_OK;
    }
    case TD_OP_LINEAR_GELU: { /* h = x w^T + b (Gemm), y = gelu(h) */
        size_t at = node_begin(e, "Gemm", ev->in[2] ? 3 : 2, in, 1, &out[1]);
        attr_int(e, "transB", 1);
        node_end(e, at);
        gelu(e, dt, out[1], p->gelu.approximate == TD_GELU_TANH, out[0]);
        return TD_OK;
    }
    case TD_OP_SOFTMAX:
    case TD_OP_LOG_SOFTMAX: {
        size_t at = node_begin(e, ev->kind == TD_OP_SOFTMAX ? "Softmax" : "LogSoftmax", 1, in, 1, &out[0]);
        attr_int(e, "axis", -1);
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_LAYER_NORM:
    case TD_OP_ADD_LAYER_NORM: {
        bool add = ev->kind == TD_OP_ADD_LAYER_NORM;
        td_tensor *w = ev->in[add ? 2 : 1], *b = ev->in[add ? 3 : 2];
        /* the normalized dims: the weight's, else those after the leading dims whose product is the rows of mean */
        int64_t rows = ev->out[add ? 2 : 1]->shape[0], lead = 1;
        int axis = 0;
        if (w)
            axis = x->ndim - w->ndim;
        else
            while (axis < x->ndim && lead != rows) lead *= x->shape[axis++];
        const char *s = in[0];
        if (add) s = NODE(e, "Add", out[1], in[0], in[1]);
        const char *scale = w ? in[add ? 2 : 1] : NULL;
        if (!w) {
            int64_t nn = td__numel(x->ndim - axis, x->shape + axis);
            float *ones = malloc((size_t)nn * sizeof *ones);
            if (!ones) return TD_ERR(TD_ERR_OOM, "onnx export: out of host memory");
            for (int64_t i = 0; i < nn; i++) ones[i] = 1.0f;
            scale = fresh(e, "const");
            write_initializer(e, scale, TD_F32, x->ndim - axis, x->shape + axis, ones, (size_t)nn * sizeof *ones);
            free(ones);
        }
        const char *ins[3] = {s, scale, b ? in[add ? 3 : 2] : NULL};
        size_t at = node_begin(e, "LayerNormalization", b ? 3 : 2, ins, 1, &out[0]);
        attr_int(e, "axis", axis);
        attr_float(e, "epsilon", p->norm.eps);
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_GROUP_NORM: { /* x [N, C, *] as [N, G, -1]: (x - mean) / sqrt(var + eps), then * w + b per channel */
        int64_t g = ev->out[1]->shape[ev->out[1]->ndim - 1], c = x->shape[1];
        const char *xr = NODE(e, "Reshape", NULL, in[0], const_i64(e, 3, (int64_t[]){x->shape[0], g, -1}));
        const char *m = fresh(e, "t"), *v = fresh(e, "t");
        size_t at = node_begin(e, "ReduceMean", 1, &xr, 1, &m);
        attr_ints(e, "axes", 1, (int64_t[]){2});
        node_end(e, at);
        const char *d = NODE(e, "Sub", NULL, xr, m), *d2 = NODE(e, "Mul", NULL, d, d);
        at = node_begin(e, "ReduceMean", 1, &d2, 1, &v);
        attr_ints(e, "axes", 1, (int64_t[]){2});
        node_end(e, at);
        const char *sd = NODE(e, "Sqrt", NULL, NODE(e, "Add", NULL, v, const_scalar(e, dt, p->norm.eps)));
        const char *r = NODE(e, "Div", NULL, d, sd);
        bool affine = ev->in[1] || ev->in[2];
        r = NODE(e, "Reshape", affine ? NULL : out[0], r, const_i64(e, x->ndim, x->shape));
        int64_t cs[TD_MAX_DIMS] = {c};
        for (int i = 1; i < x->ndim - 1; i++) cs[i] = 1;
        if (ev->in[1]) {
            const char *w = NODE(e, "Reshape", NULL, in[1], const_i64(e, x->ndim - 1, cs));
            r = NODE(e, "Mul", ev->in[2] ? NULL : out[0], r, w);
        }
        if (ev->in[2]) NODE(e, "Add", out[0], r, NODE(e, "Reshape", NULL, in[2], const_i64(e, x->ndim - 1, cs)));
        return TD_OK;
    }
    case TD_OP_CONV2D: {
        const int *st = p->conv.stride, *pd = p->conv.padding, *dl = p->conv.dilation;
        td_tensor *w = ev->in[1];
        size_t at = node_begin(e, "Conv", ev->in[2] ? 3 : 2, in, 1, &out[0]);
        attr_ints(e, "kernel_shape", 2, (int64_t[]){w->shape[2], w->shape[3]});
        attr_ints(e, "strides", 2, (int64_t[]){st[0], st[1]});
        attr_ints(e, "pads", 4, (int64_t[]){pd[0], pd[1], pd[0], pd[1]});
        attr_ints(e, "dilations", 2, (int64_t[]){dl[0], dl[1]});
        attr_int(e, "group", p->conv.groups);
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_MAX_POOL2D:
    case TD_OP_AVG_POOL2D: {
        const int *k = p->pool.kernel, *st = p->pool.stride, *pd = p->pool.padding;
        bool avg = ev->kind == TD_OP_AVG_POOL2D;
        size_t at = node_begin(e, avg ? "AveragePool" : "MaxPool", 1, in, 1, &out[0]);
        attr_ints(e, "kernel_shape", 2, (int64_t[]){k[0], k[1]});
        attr_ints(e, "strides", 2, (int64_t[]){st[0], st[1]});
        attr_ints(e, "pads", 4, (int64_t[]){pd[0], pd[1], pd[0], pd[1]});
        if (avg) attr_int(e, "count_include_pad", p->pool.count_include_pad);
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_INDEX_SELECT:
    case TD_OP_GATHER: {
        size_t at = node_begin(e, ev->kind == TD_OP_GATHER ? "GatherElements" : "Gather", 2, in, 1, &out[0]);
        attr_int(e, "axis", p->axis.dim);
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_SCATTER_ADD: {
        size_t at = node_begin(e, "ScatterElements", 3, in, 1, &out[0]);
        attr_int(e, "axis", p->axis.dim);
        attr_str(e, "reduction", "add");
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_CAT: {
        size_t at = node_begin(e, "Concat", ev->n_in, in, 1, &out[0]);
        attr_int(e, "axis", p->axis.dim);
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_ONE_HOT: {
        const char *ins[3] = {in[0], const_i64(e, 1, &p->one_hot.num_classes), const_i64(e, 2, (int64_t[]){0, 1})};
        size_t at = node_begin(e, "OneHot", 3, ins, 1, &out[0]);
        attr_int(e, "axis", -1);
        node_end(e, at);
        return TD_OK;
    }
    case TD_OP_ATTENTION: { /* q, k, v [N0, N1, L|S, E]: softmax(q k^T scale + mask + causal) v */
        if (p->attn.dropout_p != 0)
            return TD_ERR(TD_ERR_UNSUPPORTED, "onnx export: op attention with dropout %g ran (training mode)",
                          p->attn.dropout_p);
        int64_t L = x->shape[2], S = ev->in[1]->shape[2];
        const char *kt = fresh(e, "t");
        size_t at = node_begin(e, "Transpose", 1, &in[1], 1, &kt);
        attr_ints(e, "perm", 4, (int64_t[]){0, 1, 3, 2});
        node_end(e, at);
        const char *s = NODE(e, "MatMul", NULL, NODE(e, "Mul", NULL, in[0], const_scalar(e, dt, p->attn.scale)), kt);
        if (ev->in[3] && ev->in[3]->dtype == TD_BOOL) /* true: the key takes part */
            s = NODE(e, "Where", NULL, in[3], s, const_scalar(e, dt, -INFINITY));
        else if (ev->in[3])
            s = NODE(e, "Add", NULL, s, in[3]);
        if (p->attn.causal) { /* key j > query i masked, top-left aligned */
            float *m = malloc((size_t)(L * S) * sizeof *m);
            if (!m) return TD_ERR(TD_ERR_OOM, "onnx export: out of host memory");
            for (int64_t i = 0; i < L; i++)
                for (int64_t j = 0; j < S; j++) m[i * S + j] = j > i ? -INFINITY : 0.0f;
            const char *cm = fresh(e, "const");
            write_initializer(e, cm, TD_F32, 2, (int64_t[]){L, S}, m, (size_t)(L * S) * sizeof *m);
            free(m);
            if (dt != TD_F32) {
                const char *c32 = cm;
                cm = fresh(e, "t");
                at = node_begin(e, "Cast", 1, &c32, 1, &cm);
                attr_int(e, "to", onnx_dtype(dt));
                node_end(e, at);
            }
            s = NODE(e, "Add", NULL, s, cm);
        }
        const char *pr = fresh(e, "t");
        at = node_begin(e, "Softmax", 1, &s, 1, &pr);
        attr_int(e, "axis", -1);
        node_end(e, at);
        NODE(e, "MatMul", out[0], pr, in[2]);
        return TD_OK;
    }
    default: return no_mapping(td_op_name(ev->kind));
    }
}

/* The outputs of op kind that ONNX does not compute (statistics and indices the backward uses). */
static const char *gone_output(td_op_kind kind, int j) {
    switch (kind) {
    case TD_OP_LAYER_NORM: return j >= 1 ? "layer_norm's mean and rstd" : NULL;
    case TD_OP_ADD_LAYER_NORM: return j >= 2 ? "add_layer_norm's mean and rstd" : NULL;
    case TD_OP_GROUP_NORM: return j >= 1 ? "group_norm's mean and rstd" : NULL;
    case TD_OP_MAX_POOL2D: return j >= 1 ? "max_pool2d's indices" : NULL;
    case TD_OP_ATTENTION: return j >= 1 ? "attention's logsumexp" : NULL;
    default: return NULL;
    }
}

/* A view of a live value: Reshape, Transpose, Slice, Gather (select) or Expand. */
static void map_view(ex *e, const td__tr_event *ev, const char *base, const char *out) {
    td_tensor *v = ev->out[0];
    const td__view_info *info = &ev->view;
    size_t at;
    switch (info->kind) {
    case TD__VIEW_RESHAPE: NODE(e, "Reshape", out, base, const_i64(e, v->ndim, v->shape)); return;
    case TD__VIEW_EXPAND: NODE(e, "Expand", out, base, const_i64(e, v->ndim, v->shape)); return;
    case TD__VIEW_PERMUTE: {
        int64_t perm[TD_MAX_DIMS];
        for (int i = 0; i < v->ndim; i++) perm[i] = info->perm[i];
        at = node_begin(e, "Transpose", 1, &base, 1, &out);
        attr_ints(e, "perm", v->ndim, perm);
        node_end(e, at);
        return;
    }
    case TD__VIEW_SLICE: {
        int64_t d = info->dim;
        NODE(e, "Slice", out, base, const_i64(e, 1, &info->start), const_i64(e, 1, &info->end), const_i64(e, 1, &d),
             const_i64(e, 1, &info->step));
        return;
    }
    case TD__VIEW_SELECT: { /* a 0-d index drops the dim */
        const char *ins[2] = {base, const_scalar(e, TD_I64, (double)info->start)};
        at = node_begin(e, "Gather", 2, ins, 1, &out);
        attr_int(e, "axis", info->dim);
        node_end(e, at);
        return;
    }
    }
}

/* ONNX's gate order from torch's: LSTM i f g o -> i o f c, GRU r z n -> z r h, RNN its one gate. */
static const int onnx_gate[4][4] = {{0}, {0}, {0, 3, 1, 2}, {1, 0, 2}};

/* Direction d's weights (k = 0 W_ih [G*H, I], 1 W_hh [G*H, H]) or both biases (k = 2: [b_ih, b_hh], 2*G*H)
** of layer l in ONNX's gate order, appended to buf at *at (x's dtype, the host). */
static void rnn_rows(ex *e, const td__tr_event *ev, int l, int d, int k, td_dtype dt, char *buf, size_t *at) {
    const td__tr_rnn *r = &ev->rnn;
    int G = r->mode == TD__RNN_LSTM ? 4 : r->mode == TD__RNN_GRU ? 3 : 1;
    for (int part = 0; part < (k == 2 ? 2 : 1); part++) {
        td_tensor *t = ev->in[3 + (l * r->dirs + d) * 4 + k + part];
        size_t n = (size_t)td_numel(t) * td_dtype_size(dt), gate = n / (size_t)G;
        char *host = malloc(n ? n : 1);
        td_status st = host ? td_copy_to_host(t, host, n, dt) : TD_ERR(TD_ERR_OOM, "onnx export: out of host memory");
        for (int g = 0; st == TD_OK && g < G; g++)
            memcpy(buf + *at + (size_t)g * gate, host + (size_t)onnx_gate[r->mode][g] * gate, gate);
        *at += n;
        free(host);
        if (st != TD_OK && e->st == TD_OK) e->st = st;
    }
}

/* A recurrent layer (TD__TR_RNN): per layer one ONNX RNN/LSTM/GRU over [T, B, I] with its weights baked in
** ONNX's gate order (W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H]; GRU with linear_before_reset = 1, which is
** torch's n = tanh(W_in x + b_in + r (W_hn h + b_hn))), its Y [T, D, B, H] transposed and reshaped to
** [T, B, D*H] for the next layer; the layers' Y_h (Y_c) concatenated to h_n (c_n). */
static void map_rnn(ex *e, const td__tr_event *ev, const char *const *in, const char *const *out) {
    const td__tr_rnn *r = &ev->rnn;
    static const char *const ops[] = {"RNN", "RNN", "LSTM", "GRU"};
    int G = r->mode == TD__RNN_LSTM ? 4 : r->mode == TD__RNN_GRU ? 3 : 1, D = r->dirs;
    td_tensor *x = ev->in[0];
    td_dtype dt = x->dtype;
    int64_t T = x->shape[0], B = x->shape[1], H = r->hidden, GH = G * H;
    const char *xl = in[0], *hs[64], *cs[64];
    bool bias = ev->in[5] != NULL;
    for (int l = 0; l < r->layers && e->st == TD_OK; l++) {
        int64_t I = l ? D * H : x->shape[2];
        int64_t wsh[3] = {D, GH, I}, rsh[3] = {D, GH, H}, bsh[2] = {D, 2 * GH};
        size_t es = td_dtype_size(dt), nb = (size_t)(D * GH * (I + H + (bias ? 2 : 0))) * es;
        char *buf = malloc(nb);
        if (!buf) {
            e->st = TD_ERR(TD_ERR_OOM, "onnx export: out of host memory");
            return;
        }
        size_t at = 0, at_r, at_b;
        for (int d = 0; d < D; d++) rnn_rows(e, ev, l, d, 0, dt, buf, &at);
        at_r = at;
        for (int d = 0; d < D; d++) rnn_rows(e, ev, l, d, 1, dt, buf, &at);
        at_b = at;
        for (int d = 0; bias && d < D; d++) rnn_rows(e, ev, l, d, 2, dt, buf, &at);
        const char *wn = fresh(e, "rnn.W"), *rn = fresh(e, "rnn.R"), *bn = bias ? fresh(e, "rnn.B") : "";
        write_initializer(e, wn, dt, 3, wsh, buf, at_r);
        write_initializer(e, rn, dt, 3, rsh, buf + at_r, at_b - at_r);
        if (bias) write_initializer(e, bn, dt, 2, bsh, buf + at_b, at - at_b);
        free(buf);
        const char *h0 = "", *c0 = "";
        int64_t lo = l * D, hi = (l + 1) * D, axis0 = 0;
        if (in[1])
            h0 = NODE(e, "Slice", NULL, in[1], const_i64(e, 1, &lo), const_i64(e, 1, &hi), const_i64(e, 1, &axis0));
        if (in[2])
            c0 = NODE(e, "Slice", NULL, in[2], const_i64(e, 1, &lo), const_i64(e, 1, &hi), const_i64(e, 1, &axis0));
        const char *ins[7] = {xl, wn, rn, bn, "", h0, c0}, *outs[3] = {fresh(e, "rnn.Y"), fresh(e, "rnn.Y_h"), ""};
        if (r->mode == TD__RNN_LSTM) outs[2] = fresh(e, "rnn.Y_c");
        hs[l] = outs[1], cs[l] = outs[2];
        size_t node_at =
            node_begin(e, ops[r->mode], r->mode == TD__RNN_LSTM ? 7 : 6, ins, r->mode == TD__RNN_LSTM ? 3 : 2, outs);
        attr_int(e, "hidden_size", H);
        attr_str(e, "direction", D == 2 ? "bidirectional" : "forward");
        if (r->mode == TD__RNN_GRU) attr_int(e, "linear_before_reset", 1);
        if (r->mode == TD__RNN_RELU) { /* activations = ["Relu"] * D: AttributeProto strings 9, type STRINGS 8 */
            size_t a = td__pb_begin(&e->nodes, 5);
            td__pb_string(&e->nodes, 1, "activations");
            td__pb_int(&e->nodes, 20, 8);
            for (int d = 0; d < D; d++) td__pb_string(&e->nodes, 9, "Relu"); /* one per direction */
            td__pb_end(&e->nodes, a);
        }
        node_end(e, node_at);
        const char *yt = fresh(e, "t"), *last = l == r->layers - 1 ? out[0] : NULL;
        size_t tr_at = node_begin(e, "Transpose", 1, &outs[0], 1, &yt);
        attr_ints(e, "perm", 4, (int64_t[]){0, 2, 1, 3});
        node_end(e, tr_at);
        xl = NODE(e, "Reshape", last, yt, const_i64(e, 3, (int64_t[]){T, B, D * H}));
    }
    for (int j = 1; j < 3 && e->st == TD_OK; j++) {
        if (!out[j] || !*out[j] || (j == 2 && r->mode != TD__RNN_LSTM)) continue;
        size_t at = node_begin(e, "Concat", r->layers, j == 1 ? hs : cs, 1, &out[j]);
        attr_int(e, "axis", 0);
        node_end(e, at);
    }
}

/* One traced event: emitted when it reads a live value, folded otherwise. */
static void map_event(ex *e, const td__tr_event *ev) {
    const char *in[64], *out[8];
    bool live = false;
    if ((ev->n_in > 64 && ev->what != TD__TR_RNN) || ev->n_out > 8) {
        e->st = TD_ERR(TD_ERR_UNSUPPORTED, "onnx export: an op with %d inputs and %d outputs", ev->n_in, ev->n_out);
        return;
    }
    const char *what = ev->what == TD__TR_OP      ? td_op_name(ev->kind)
                       : ev->what == TD__TR_SPLIT ? "split"
                       : ev->what == TD__TR_RNN   ? "rnn"
                                                  : "view";
    int n_read = ev->what == TD__TR_RNN ? 3 : ev->n_in; /* a recurrent layer bakes its parameters (map_rnn) */
    for (int i = 0; i < n_read && e->st == TD_OK; i++) {
        value *v = ev->in[i] ? resolve(e, ev->in[i]) : NULL;
        if (v && v->gone) {
            e->st = TD_ERR(TD_ERR_UNSUPPORTED, "onnx export: %s reads %s, which ONNX does not compute", what, v->gone);
            return;
        }
        in[i] = v ? v->name : NULL;
        live = live || (v && v->live);
    }
    if (e->st != TD_OK) return;
    for (int j = 0; j < ev->n_out; j++) {
        value *old = ev->out[j] ? find(e, ev->out[j]) : NULL;
        if (!old) continue;
        /* an in-place write: fine unless another value shares the memory */
        for (int i = 0; i < e->nv; i++)
            if (e->v[i].t != ev->out[j] && e->v[i].t->storage == ev->out[j]->storage && e->v[i].live) {
                e->st = TD_ERR(TD_ERR_UNSUPPORTED,
                               "onnx export: %s writes in place into memory that a view also reads; ONNX values "
                               "cannot alias",
                               what);
                return;
            }
        if (!live) {
            e->st =
                TD_ERR(TD_ERR_UNSUPPORTED, "onnx export: %s overwrites a tensor of the graph with a constant", what);
            return;
        }
    }
    if (!live) return; /* folded: its outputs are constants when read */
    for (int j = 0; j < ev->n_out; j++) {
        const char *gone = ev->what == TD__TR_OP ? gone_output(ev->kind, j) : NULL;
        out[j] = gone ? "" : fresh(e, ev->what == TD__TR_OP ? td_op_name(ev->kind) : what);
        if (!ev->out[j]) continue;
        value *v = bind(e, ev->out[j], out[j], true);
        if (v) v->gone = gone;
    }
    if (e->st != TD_OK) return;
    if (ev->what == TD__TR_VIEW)
        map_view(e, ev, in[0], out[0]);
    else if (ev->what == TD__TR_RNN)
        map_rnn(e, ev, in, out);
    else if (ev->what == TD__TR_SPLIT) {
        int64_t sizes[8];
        for (int j = 0; j < ev->n_out; j++) sizes[j] = ev->out[j]->shape[ev->dim];
        const char *ins[2] = {in[0], const_i64(e, ev->n_out, sizes)};
        size_t at = node_begin(e, "Split", 2, ins, ev->n_out, out);
        attr_int(e, "axis", ev->dim);
        node_end(e, at);
    } else {
        td_status st = map_op(e, ev, in, out);
        if (st != TD_OK && e->st == TD_OK) e->st = st;
    }
}

/* ValueInfoProto of a graph input or output (field of the graph) */
static void value_info(td__pb *g, int field, const char *name, const td_tensor *t) {
    size_t vi = td__pb_begin(g, field);
    td__pb_string(g, 1, name);
    size_t ty = td__pb_begin(g, 2), tt = td__pb_begin(g, 1);
    td__pb_int(g, 1, onnx_dtype(t->dtype));
    size_t sh = td__pb_begin(g, 2);
    for (int i = 0; i < t->ndim; i++) {
        size_t d = td__pb_begin(g, 1);
        td__pb_int(g, 1, t->shape[i]);
        td__pb_end(g, d);
    }
    td__pb_end(g, sh);
    td__pb_end(g, tt);
    td__pb_end(g, ty);
    td__pb_end(g, vi);
}

static td_status write_file(const char *path, const td__pb *m) {
    FILE *f = fopen(path, "wb");
    if (!f) return TD_ERR(TD_ERR_IO, "onnx export: cannot open %s: %s", path, strerror(errno));
    bool ok = fwrite(m->data, 1, m->len, f) == m->len;
    ok = fclose(f) == 0 && ok;
    return ok ? TD_OK : TD_ERR(TD_ERR_IO, "onnx export: writing %s failed: %s", path, strerror(errno));
}

td_status td_onnx_export_fn(td_onnx_forward_fn forward, void *ctx, int n_inputs, td_tensor *const *inputs,
                            const td_named_tensors *params, const char *path) {
    if (!forward || !inputs || !path || n_inputs < 1 || n_inputs > 16)
        return TD_ERR(TD_ERR_MISUSE, "onnx export: needs a forward, 1 to 16 example inputs and a path");
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i]) return TD_ERR(TD_ERR_MISUSE, "onnx export: example input %d is NULL", i);
        if (!onnx_dtype(inputs[i]->dtype))
            return TD_ERR(TD_ERR_DTYPE, "onnx export: example input %d has dtype %s", i,
                          td_dtype_name(inputs[i]->dtype));
    }
    td__trace tr;
    td_status st = td__trace_begin(&tr);
    if (st != TD_OK) return st;
    td_scope_begin();
    td_no_grad_begin();
    td_tensor *y = forward(ctx, n_inputs, inputs);
    td_status fst = y ? TD_OK : td_last_status();
    td_no_grad_end();
    if (y) td_retain(y);
    td_scope_end();
    st = td__trace_end(&tr);
    if (fst != TD_OK) {
        td__trace_free(&tr);
        td_error_prefix("onnx export: the forward pass failed");
        return fst;
    }
    ex e = {.params = params, .st = st};
    char in_names[16][16];
    for (int i = 0; i < n_inputs; i++) {
        snprintf(in_names[i], sizeof in_names[i], n_inputs == 1 ? "input" : "input.%d", i);
        bind(&e, inputs[i], in_names[i], true);
    }
    for (int k = 0; k < tr.n && e.st == TD_OK; k++) map_event(&e, &tr.ev[k]);
    value *yv = e.st == TD_OK ? resolve(&e, y) : NULL;
    if (e.st == TD_OK && yv->gone)
        e.st = TD_ERR(TD_ERR_UNSUPPORTED, "onnx export: the output is %s, which ONNX does not compute", yv->gone);
    if (e.st == TD_OK) NODE(&e, "Identity", "output", yv->name);
    td__pb m = {0};
    if (e.st == TD_OK) {
        td__pb_int(&m, 1, IR_VERSION);
        td__pb_string(&m, 2, "trident");
        size_t g = td__pb_begin(&m, 7);
        td__pb_raw(&m, e.nodes.data, e.nodes.len);
        td__pb_string(&m, 2, "trident");
        td__pb_raw(&m, e.inits.data, e.inits.len);
        for (int i = 0; i < n_inputs; i++) value_info(&m, 11, in_names[i], inputs[i]);
        value_info(&m, 12, "output", y);
        td__pb_end(&m, g);
        size_t o = td__pb_begin(&m, 8);
        td__pb_string(&m, 1, "");
        td__pb_int(&m, 2, OPSET);
        td__pb_end(&m, o);
        if (m.failed || e.nodes.failed || e.inits.failed) e.st = TD_ERR(TD_ERR_OOM, "onnx export: out of host memory");
    }
    if (e.st == TD_OK) e.st = write_file(path, &m);
    td__pb_free(&m);
    td__pb_free(&e.nodes);
    td__pb_free(&e.inits);
    for (int i = 0; i < e.nstr; i++) free(e.str[i]);
    free(e.str);
    free(e.v);
    td_release(y);
    td__trace_free(&tr);
    return e.st;
}
