/*
** SOFTMAX, LOG_SOFTMAX (shaders/softmax.comp), their backward ops
** (shaders/softmax_backward.comp), and cross-entropy: CROSS_ENTROPY and
** CROSS_ENTROPY_BACKWARD live here too (a log_softmax over the class dim;
** shaders/cross_entropy.comp, section "cross entropy" below). All operands are contiguous; rows
** are the last dim. Math runs in float for f32/f16/bf16, in double for f64
** (with shaders/math64.glsl).
*/
#include <string.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/softmax.comp, block PC. */
typedef struct vk_pc_rows {
    uint32_t rows, C, in_off, out_off;
} vk_pc_rows;
static_assert(sizeof(vk_pc_rows) == 16, "vk_pc_rows must match shaders/softmax.comp");

/* GLSL: shaders/softmax_backward.comp, block PC. */
typedef struct vk_pc_rows_bw {
    uint32_t rows, C, dy_off, y_off, dx_off;
} vk_pc_rows_bw;
static_assert(sizeof(vk_pc_rows_bw) == 20, "vk_pc_rows_bw must match shaders/softmax_backward.comp");

/* GLSL: shaders/cross_entropy.comp, block PC. */
typedef struct vk_pc_xent {
    uint32_t N, C, x_off, t_off;
    uint32_t w_off, d_off, s_off, o_off;
    uint32_t has_w, reduction;
    int32_t ignore_index;
    float eps;
    uint32_t eps_lo, eps_hi;
} vk_pc_xent;
static_assert(sizeof(vk_pc_xent) == 56, "vk_pc_xent must match shaders/cross_entropy.comp");

/* The workgroup of the row kernels that keep 4 elements per invocation in registers: the power of two
** within [64, 256] that covers a row of C 4 times (64 for W3's rows of 256). */
static uint32_t row_wg4(int64_t C) {
    uint32_t wg = 64;
    while (wg < 256 && (int64_t)wg * 4 < C) wg *= 2;
    return wg;
}

static td_status softmax(vk_dev *d, const td_op *op, uint32_t code) {
    const td_operand *in = &op->in[0], *out = &op->out[0];
    int64_t C = in->ndim ? in->shape[in->ndim - 1] : 1, n = td_operand_numel(in);
    vk_bind b[2];
    vk_pc_rows pc = {.rows = (uint32_t)(C ? n / C : 0), .C = (uint32_t)C};
    td_status st = vk_bind_view(d, in, false, &b[0], &pc.in_off);
    if (st == TD_OK) st = vk_bind_view(d, out, true, &b[1], &pc.out_off);
    if (st != TD_OK) return st;
    uint32_t spec[2] = {row_wg4(C), code};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_softmax_f32, in->dtype), spec, 2, 2, b, &pc, sizeof pc,
                       vk_groups(pc.rows, 1), 1, 1);
}

td_status vk_op_SOFTMAX(vk_dev *d, const td_op *op) { return softmax(d, op, 0); }
td_status vk_op_LOG_SOFTMAX(vk_dev *d, const td_op *op) { return softmax(d, op, 1); }

/* (dy, y) -> dx, all [rows, C] */
static td_status softmax_backward(vk_dev *d, const td_op *op, uint32_t code) {
    const td_operand *dy = &op->in[0], *y = &op->in[1], *dx = &op->out[0];
    int64_t C = dy->ndim ? dy->shape[dy->ndim - 1] : 1, n = td_operand_numel(dy);
    if (n == 0) return TD_OK;
    vk_bind b[3];
    vk_pc_rows_bw pc = {.rows = (uint32_t)(n / C), .C = (uint32_t)C};
    td_status st = vk_bind_view(d, dy, false, &b[0], &pc.dy_off);
    if (st == TD_OK) st = vk_bind_view(d, y, false, &b[1], &pc.y_off);
    if (st == TD_OK) st = vk_bind_view(d, dx, true, &b[2], &pc.dx_off);
    if (st != TD_OK) return st;
    uint32_t spec[2] = {row_wg4(C), code};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_softmax_backward_f32, dy->dtype), spec, 2, 3, b, &pc, sizeof pc,
                       vk_groups(pc.rows, 1), 1, 1);
}

td_status vk_op_SOFTMAX_BACKWARD(vk_dev *d, const td_op *op) { return softmax_backward(d, op, 0); }
td_status vk_op_LOG_SOFTMAX_BACKWARD(vk_dev *d, const td_op *op) { return softmax_backward(d, op, 1); }

/* ---- cross entropy ---- */

enum { X_ROWS, X_FINISH, X_DENOM, X_BACKWARD };

/* logits [N, C] or [C] (weight [C] or absent); ignore_index fits the shader's int32 */
static bool xent_ok(const td_op *op, int first_logits) {
    int nd = op->in[first_logits].ndim;
    return (nd == 1 || nd == 2) && op->p.xent.ignore_index >= INT32_MIN && op->p.xent.ignore_index <= INT32_MAX;
}

/* the loss in the logits' dtype only (the core casts an f32 autocast loss's logits), and no lse output (the
** backward finds each row's logsumexp again; its lse input is not read) */
bool vk_supports_CROSS_ENTROPY(vk_dev *d, const td_op *op) {
    return (void)d, xent_ok(op, 0) && op->out[0].dtype == op->in[0].dtype && !op->out[1].buf;
}
bool vk_supports_CROSS_ENTROPY_BACKWARD(vk_dev *d, const td_op *op) {
    return (void)d, xent_ok(op, 1) && op->in[0].dtype == op->in[1].dtype;
}

/* Binds 0 logits, 1 target, 2 weight, 3 dloss, 4 scratch, 5 out; NULL views bind the dummy. */
static td_status xent_run(vk_dev *d, const td_operand *dl, const td_operand *x, const td_operand *t,
                          const td_operand *w, const td_operand *out, td_buffer *scratch, uint32_t code,
                          uint32_t groups, vk_pc_xent *pc) {
    vk_bind b[6];
    uint32_t off[6] = {0};
    const td_operand *views[6] = {x, t, w, dl, NULL, out};
    for (int k = 0; k < 6; k++) {
        if (k == 4) {
            b[k] = vk_bind_buffer(scratch ? scratch : d->dummy, true);
            continue;
        }
        td_status st = vk_bind_view(d, views[k], k == 5, &b[k], &off[k]);
        if (st != TD_OK) return st;
    }
    pc->x_off = off[0], pc->t_off = off[1], pc->w_off = off[2], pc->d_off = off[3], pc->o_off = off[5];
    uint32_t spec[2] = {WG, code};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_xent_f32, x->dtype), spec, 2, 6, b, pc, sizeof *pc, groups, 1, 1);
}

static vk_pc_xent xent_params(const td_op *op, const td_operand *x) {
    vk_pc_xent pc = {.C = (uint32_t)x->shape[x->ndim - 1],
                     .N = x->ndim == 2 ? (uint32_t)x->shape[0] : 1,
                     .reduction = (uint32_t)op->p.xent.reduction,
                     .ignore_index = (int32_t)op->p.xent.ignore_index,
                     .eps = (float)op->p.xent.label_smoothing};
    uint64_t bits;
    memcpy(&bits, &op->p.xent.label_smoothing, 8);
    pc.eps_lo = (uint32_t)bits, pc.eps_hi = (uint32_t)(bits >> 32);
    return pc;
}

td_status vk_op_CROSS_ENTROPY(vk_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *t = &op->in[1], *w = &op->in[2], *out = &op->out[0];
    vk_pc_xent pc = xent_params(op, x);
    pc.has_w = w->buf != NULL;
    if (pc.reduction == TD_REDUCTION_NONE)
        return xent_run(d, NULL, x, t, w, out, NULL, X_ROWS, vk_groups(pc.N, 1), &pc);
    td_buffer *scratch;
    size_t acc = x->dtype == TD_F64 ? 8 : 4; /* the shader's accumulator: (loss, weight) pairs */
    td_status st = vk_alloc(d, (size_t)pc.N * 2 * acc + 2 * acc, &scratch);
    if (st != TD_OK) return st;
    st = xent_run(d, NULL, x, t, w, out, scratch, X_ROWS, vk_groups(pc.N, 1), &pc);
    if (st == TD_OK) st = xent_run(d, NULL, x, t, w, out, scratch, X_FINISH, 1, &pc);
    vk_free(scratch); /* later users of this memory are ordered after these dispatches */
    return st;
}

td_status vk_op_CROSS_ENTROPY_BACKWARD(vk_dev *d, const td_op *op) {
    const td_operand *dl = &op->in[0], *x = &op->in[1], *t = &op->in[2], *w = &op->in[3], *out = &op->out[0];
    vk_pc_xent pc = xent_params(op, x);
    pc.has_w = w->buf != NULL;
    td_buffer *scratch = NULL;
    td_status st = TD_OK;
    if (pc.reduction == TD_REDUCTION_MEAN) {
        st = vk_alloc(d, 16, &scratch);
        if (st == TD_OK) st = xent_run(d, dl, x, t, w, out, scratch, X_DENOM, 1, &pc);
    }
    if (st == TD_OK) st = xent_run(d, dl, x, t, w, out, scratch, X_BACKWARD, vk_groups(pc.N, 1), &pc);
    if (scratch) vk_free(scratch);
    return st;
}
