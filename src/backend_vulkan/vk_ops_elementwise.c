/*
** Elementwise ops: the binary ops and comparisons, WHERE, the unary ops,
** GELU_BACKWARD, CLAMP, and the iteration that FILL, ARANGE and COPY share
** (vk_elementwise, vk_scalar). Shaders: shaders/{binary,compare,where,unary}.comp
** over shaders/elem.glsl.
** Every operand has the output's shape (inputs broadcast with stride 0), so one
** iteration space serves them all; vk_elementwise() merges dims that are
** contiguous in every operand and splits past 4 dims into several dispatches.
** Operands wider than one binding (maxStorageBufferRange) are cut in halves
** along the outermost dim until each part fits.
*/
#include <math.h>
#include <string.h>

#include "vk_ops.h"

#define WG 256

void vk_scalar(uint32_t sc[4], int k, td_dtype dt, double v) {
    switch (dt) {
    case TD_F64: {
        uint64_t bits;
        memcpy(&bits, &v, 8);
        sc[2 * k] = (uint32_t)bits, sc[2 * k + 1] = (uint32_t)(bits >> 32);
        break;
    }
    case TD_I64: {
        int64_t i = v != v                        ? 0
                    : v <= -9223372036854775808.0 ? INT64_MIN
                    : v >= 9223372036854775807.0  ? INT64_MAX
                                                  : (int64_t)v;
        sc[2 * k] = (uint32_t)(uint64_t)i, sc[2 * k + 1] = (uint32_t)((uint64_t)i >> 32);
        break;
    }
    case TD_I32: {
        int32_t i = v != v ? 0 : v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v;
        sc[k] = (uint32_t)i;
        break;
    }
    case TD_U8:
    case TD_BOOL: sc[k] = v != v ? 0 : v <= 0 ? 0 : v >= 255 ? 255 : (uint32_t)v; break;
    default: {
        float f = (float)v;
        memcpy(&sc[k], &f, 4);
    }
    }
}

/* Operands whose window exceeds maxStorageBufferRange or crosses a segment of a buffer larger than
** one allocation: the op runs on the two halves of the dim that spans most of a too-wide operand's
** window (the outermost of a contiguous one; the rows of a transposed one), recursively, until
** every window fits. */
static td_status elementwise_halves(vk_dev *d, int shader, const uint32_t *spec, int n_spec, int n,
                                    const td_operand *const *views, const bool *writes, const uint32_t sc[4],
                                    bool *done) {
    const td_operand *v0 = views[n - 1];
    bool wide = false;
    int dim = v0->ndim;
    int64_t span = 0;
    for (int k = 0; k < n; k++) {
        if (!vk_view_too_wide(d, views[k])) continue;
        wide = true;
        for (int i = 0; i < v0->ndim; i++) {
            int64_t s =
                (views[k]->shape[i] - 1) * (views[k]->strides[i] < 0 ? -views[k]->strides[i] : views[k]->strides[i]);
            if (views[k]->shape[i] > 1 && s > span) span = s, dim = i;
        }
    }
    if (dim == v0->ndim) /* only broadcast dims span it (stride 0): the outermost longer than 1 */
        for (dim = 0; dim < v0->ndim && v0->shape[dim] == 1;) dim++;
    *done = wide && dim < v0->ndim;
    if (!*done) return TD_OK;
    td_operand part[4];
    const td_operand *pv[4];
    int64_t h = v0->shape[dim] / 2;
    for (int half = 0; half < 2; half++) {
        for (int k = 0; k < n; k++) {
            part[k] = *views[k];
            part[k].shape[dim] = half ? v0->shape[dim] - h : h;
            part[k].offset += half * h * part[k].strides[dim];
            pv[k] = &part[k];
        }
        td_status st = vk_elementwise(d, shader, spec, n_spec, n, pv, writes, sc);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

td_status vk_elementwise(vk_dev *d, int shader, const uint32_t *spec, int n_spec, int n, const td_operand *const *views,
                         const bool *writes, const uint32_t sc[4]) {
    const td_operand *v0 = views[n - 1];
    bool split;
    td_status hs = elementwise_halves(d, shader, spec, n_spec, n, views, writes, sc, &split);
    if (split || hs != TD_OK) return hs;
    vk_bind binds[4];
    vk_pc_elem pc = {0};
    uint32_t off[4];
    for (int k = 0; k < n; k++) {
        td_status st = vk_bind_view(d, views[k], writes[k], &binds[k], &off[k]);
        if (st != TD_OK) return st;
    }
    /* merge: drop size-1 dims, fold dim d into the previous one when every operand allows */
    int nd = 0;
    int64_t shape[TD_MAX_DIMS], strides[4][TD_MAX_DIMS];
    for (int dim = 0; dim < v0->ndim; dim++) {
        if (v0->shape[dim] == 1) continue;
        bool merge = nd > 0;
        for (int k = 0; k < n && merge; k++) merge = strides[k][nd - 1] == views[k]->strides[dim] * v0->shape[dim];
        if (merge) {
            shape[nd - 1] *= v0->shape[dim];
            for (int k = 0; k < n; k++) strides[k][nd - 1] = views[k]->strides[dim];
        } else {
            shape[nd] = v0->shape[dim];
            for (int k = 0; k < n; k++) strides[k][nd] = views[k]->strides[dim];
            nd++;
        }
    }
    if (nd == 0) {
        shape[0] = 1;
        for (int k = 0; k < n; k++) strides[k][0] = 0;
        nd = 1;
    }
    /* the innermost (up to) 4 dims go to the shader; outer dims become separate dispatches */
    int inner = nd < 4 ? nd : 4, outer = nd - inner;
    int64_t count = 1, n_outer = 1;
    for (int i = outer; i < nd; i++) count *= shape[i];
    for (int i = 0; i < outer; i++) n_outer *= shape[i];
    if (count > UINT32_MAX)
        return td_error_set(TD_ERR_UNSUPPORTED, "vulkan: %lld elements in one dispatch is more than 2^32",
                            (long long)count);
    pc.n = (uint32_t)count;
    pc.ndim = (uint32_t)inner;
    for (int i = 0; i < inner; i++) {
        pc.shape[i] = (uint32_t)shape[outer + i];
        for (int k = 0; k < n; k++) {
            if (strides[k][outer + i] > UINT32_MAX)
                return td_error_set(TD_ERR_UNSUPPORTED, "vulkan: stride %lld too large",
                                    (long long)strides[k][outer + i]);
            pc.stride[4 * k + i] = (uint32_t)strides[k][outer + i];
        }
    }
    if (sc) memcpy(pc.sc, sc, sizeof pc.sc);
    for (int64_t o = 0; o < n_outer; o++) {
        int64_t rem = o;
        for (int k = 0; k < n; k++) pc.off[k] = off[k];
        for (int i = outer - 1; i >= 0; i--) {
            int64_t c = rem % shape[i];
            rem /= shape[i];
            for (int k = 0; k < n; k++) pc.off[k] += (uint32_t)(c * strides[k][i]);
        }
        td_status st = vk_dispatch(d, shader, spec, n_spec, n, binds, &pc, sizeof pc, vk_groups(count, WG), 1, 1);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

/* ---- binary ops and comparisons ---- */

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE, B_GELU_ERF, B_GELU_TANH };

static td_status binary(vk_dev *d, const td_op *op, uint32_t code) {
    const td_operand *views[3] = {&op->in[0], &op->in[1], &op->out[0]};
    bool writes[3] = {false, false, true};
    uint32_t spec[2] = {WG, code};
    int base = code >= B_EQ && code <= B_GE ? VK_SHADER_compare_f32 : VK_SHADER_binary_f32;
    return vk_elementwise(d, VK_DT_SHADER(base, op->in[0].dtype), spec, 2, 3, views, writes, NULL);
}

#define VK_BINARY_(NAME, CODE)                                                                                         \
    td_status vk_op_##NAME(vk_dev *d, const td_op *op) { return binary(d, op, CODE); }

VK_BINARY_(ADD, B_ADD)
VK_BINARY_(SUB, B_SUB)
VK_BINARY_(MUL, B_MUL)
VK_BINARY_(DIV, B_DIV)
VK_BINARY_(POW, B_POW)
VK_BINARY_(MAXIMUM, B_MAX)
VK_BINARY_(MINIMUM, B_MIN)
VK_BINARY_(EQ, B_EQ)
VK_BINARY_(NE, B_NE)
VK_BINARY_(LT, B_LT)
VK_BINARY_(LE, B_LE)
VK_BINARY_(GT, B_GT)
VK_BINARY_(GE, B_GE)

td_status vk_op_GELU_BACKWARD(vk_dev *d, const td_op *op) {
    return binary(d, op, op->p.gelu.approximate == TD_GELU_TANH ? B_GELU_TANH : B_GELU_ERF);
}

/* ---- WHERE ---- */

td_status vk_op_WHERE(vk_dev *d, const td_op *op) {
    const td_operand *views[4] = {&op->in[0], &op->in[1], &op->in[2], &op->out[0]};
    bool writes[4] = {false, false, false, true};
    uint32_t spec[1] = {WG};
    return vk_elementwise(d, VK_DT_SHADER(VK_SHADER_where_f32, op->out[0].dtype), spec, 1, 4, views, writes, NULL);
}

/* ---- unary ---- */

enum {
    U_NEG,
    U_ABS,
    U_EXP,
    U_LOG,
    U_SQRT,
    U_RSQRT,
    U_SIN,
    U_COS,
    U_TANH,
    U_SIGMOID,
    U_RELU,
    U_GELU_ERF,
    U_GELU_TANH,
    U_SILU,
    U_CLAMP
};

static td_status unary(vk_dev *d, const td_op *op, uint32_t code, const uint32_t sc[4]) {
    const td_operand *views[2] = {&op->in[0], &op->out[0]};
    bool writes[2] = {false, true};
    uint32_t spec[2] = {WG, code};
    return vk_elementwise(d, VK_DT_SHADER(VK_SHADER_unary_f32, op->in[0].dtype), spec, 2, 2, views, writes, sc);
}

#define VK_UNARY_(NAME, CODE)                                                                                          \
    td_status vk_op_##NAME(vk_dev *d, const td_op *op) { return unary(d, op, CODE, NULL); }

VK_UNARY_(NEG, U_NEG)
VK_UNARY_(ABS, U_ABS)
VK_UNARY_(EXP, U_EXP)
VK_UNARY_(LOG, U_LOG)
VK_UNARY_(SQRT, U_SQRT)
VK_UNARY_(RSQRT, U_RSQRT)
VK_UNARY_(SIN, U_SIN)
VK_UNARY_(COS, U_COS)
VK_UNARY_(TANH, U_TANH)
VK_UNARY_(SIGMOID, U_SIGMOID)
VK_UNARY_(RELU, U_RELU)
VK_UNARY_(SILU, U_SILU)

td_status vk_op_GELU(vk_dev *d, const td_op *op) {
    return unary(d, op, op->p.gelu.approximate == TD_GELU_TANH ? U_GELU_TANH : U_GELU_ERF, NULL);
}

/* Absent bounds become the dtype's extremes; integer bounds round inward. */
td_status vk_op_CLAMP(vk_dev *d, const td_op *op) {
    td_dtype dt = op->in[0].dtype;
    double lo = op->p.clamp.has_lo ? op->p.clamp.lo : -INFINITY, hi = op->p.clamp.has_hi ? op->p.clamp.hi : INFINITY;
    if (!vk_is_float(dt)) lo = ceil(lo), hi = floor(hi);
    uint32_t sc[4] = {0};
    vk_scalar(sc, 0, dt, lo);
    vk_scalar(sc, 1, dt, hi);
    return unary(d, op, U_CLAMP, sc);
}
