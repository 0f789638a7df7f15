/*
** The indexing ops: EMBEDDING, INDEX_SELECT, GATHER, ONE_HOT (shaders/index.comp,
** by element size), EMBEDDING_BACKWARD, SCATTER_ADD (shaders/scatter.comp,
** typed) and CAT (a strided COPY per input). Indices may be int64 or int32. All
** operands are contiguous (TD_LAYOUT_CONTIG), but CAT's inputs (any strides).
*/
#include <math.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/index.comp, block PC. */
typedef struct vk_pc_index {
    uint32_t n, pre, K, post;
    uint32_t xdim, dim, ndim, idx64;
    uint32_t x_off, i_off, o_off, pad;
    uint32_t shape[8];
    uint32_t xstride[8];
} vk_pc_index;
static_assert(sizeof(vk_pc_index) == 112, "vk_pc_index must match shaders/index.comp");

/* GLSL: shaders/scatter.comp, block PC. */
typedef struct vk_pc_scatter {
    uint32_t n, ndim, dim, idx64;
    uint32_t a_off, i_off, s_off, o_off;
    int32_t padding_idx;
    uint32_t T, D, pad;
    uint32_t shape[8];
    uint32_t ishape[8];
} vk_pc_scatter;
static_assert(sizeof(vk_pc_scatter) == 112, "vk_pc_scatter must match shaders/scatter.comp");

/* ---- element-moving index ops ---- */

enum { IX_SELECT, IX_GATHER, IX_ONE_HOT };

static td_status index_run(vk_dev *d, uint32_t code, const td_operand *x, const td_operand *idx, const td_operand *out,
                           vk_pc_index *pc) {
    vk_bind b[3];
    pc->n = (uint32_t)td_operand_numel(out);
    pc->idx64 = idx->dtype == TD_I64;
    const td_operand *views[3] = {x, idx, out};
    uint32_t *offs[3] = {&pc->x_off, &pc->i_off, &pc->o_off};
    td_status st = vk_bind_views(d, 3, views, 0x4, b, offs);
    if (st != TD_OK) return st;
    if (pc->idx64) pc->i_off *= 2; /* in uint words */
    size_t es = td_dtype_size(out->dtype);
    int shader = es == 1   ? VK_SHADER_index_1
                 : es == 2 ? VK_SHADER_index_2
                 : es == 4 ? VK_SHADER_index_4
                           : VK_SHADER_index_8;
    uint32_t spec[2] = {WG, code};
    return vk_dispatch(d, shader, spec, 2, 3, b, pc, sizeof *pc, vk_groups(pc->n, WG), 1, 1);
}

/* in = (weight [V, D], idx [...]) -> out [..., D] */
bool vk_supports_EMBEDDING(vk_dev *d, const td_op *op) {
    (void)d;
    return op->in[0].ndim == 2;
}

td_status vk_op_EMBEDDING(vk_dev *d, const td_op *op) {
    const td_operand *w = &op->in[0];
    vk_pc_index pc = {.pre = 1,
                      .K = (uint32_t)td_operand_numel(&op->in[1]),
                      .post = (uint32_t)w->shape[1],
                      .xdim = (uint32_t)w->shape[0]};
    return index_run(d, IX_SELECT, w, &op->in[1], &op->out[0], &pc);
}

/* in = (x, idx [K]) along p.axis.dim */
bool vk_supports_INDEX_SELECT(vk_dev *d, const td_op *op) {
    (void)d;
    int dim = op->p.axis.dim;
    return dim >= 0 && dim < (op->in[0].ndim ? op->in[0].ndim : 1);
}

td_status vk_op_INDEX_SELECT(vk_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0];
    int dim = op->p.axis.dim;
    vk_pc_index pc = {.pre = 1,
                      .post = 1,
                      .K = (uint32_t)td_operand_numel(&op->in[1]),
                      .xdim = (uint32_t)(x->ndim ? x->shape[dim] : 1)};
    for (int i = 0; i < dim; i++) pc.pre *= (uint32_t)x->shape[i];
    for (int i = dim + 1; i < x->ndim; i++) pc.post *= (uint32_t)x->shape[i];
    return index_run(d, IX_SELECT, x, &op->in[1], &op->out[0], &pc);
}

/* in = (x, idx) with idx of out's shape and x's ndim */
bool vk_supports_GATHER(vk_dev *d, const td_op *op) {
    (void)d;
    int dim = op->p.axis.dim;
    return op->in[1].ndim == op->in[0].ndim && op->in[0].ndim >= 1 && dim >= 0 && dim < op->in[0].ndim;
}

td_status vk_op_GATHER(vk_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *out = &op->out[0];
    vk_pc_index pc = {
        .dim = (uint32_t)op->p.axis.dim, .ndim = (uint32_t)out->ndim, .xdim = (uint32_t)x->shape[op->p.axis.dim]};
    for (int i = 0; i < out->ndim; i++) pc.shape[i] = (uint32_t)out->shape[i], pc.xstride[i] = (uint32_t)x->strides[i];
    return index_run(d, IX_GATHER, x, &op->in[1], out, &pc);
}

/* in = idx [...] -> int64 [..., num_classes] */
bool vk_supports_ONE_HOT(vk_dev *d, const td_op *op) {
    (void)d;
    return op->out[0].ndim >= 1;
}

td_status vk_op_ONE_HOT(vk_dev *d, const td_op *op) {
    vk_pc_index pc = {.post = (uint32_t)op->out[0].shape[op->out[0].ndim - 1]};
    return index_run(d, IX_ONE_HOT, NULL, &op->in[0], &op->out[0], &pc);
}

/* ---- summing index ops ---- */

static td_status scatter_run(vk_dev *d, uint32_t code, const td_operand *self, const td_operand *idx,
                             const td_operand *src, const td_operand *out, vk_pc_scatter *pc) {
    vk_bind b[4];
    pc->n = (uint32_t)td_operand_numel(out);
    pc->idx64 = idx->dtype == TD_I64;
    const td_operand *views[4] = {self, idx, src, out};
    uint32_t *offs[4] = {&pc->a_off, &pc->i_off, &pc->s_off, &pc->o_off};
    td_status st = vk_bind_views(d, 4, views, 0x8, b, offs);
    if (st != TD_OK) return st;
    if (pc->idx64) pc->i_off *= 2;
    uint32_t spec[2] = {WG, code};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_scatter_f32, out->dtype), spec, 2, 4, b, pc, sizeof *pc,
                       vk_groups(pc->n, WG), 1, 1);
}

/* in = (dy [..., D], idx [...]) -> dweight [V, D]; p.embedding.padding_idx rows stay 0 */
bool vk_supports_EMBEDDING_BACKWARD(vk_dev *d, const td_op *op) {
    (void)d;
    return op->out[0].ndim == 2;
}

/* A float dweight: shaders/embedding_backward.comp, a workgroup per (row, WG columns) that tests each token once
** per row block (the same sums in the same order as scatter.comp's OP 0, which tests every token per element). */
static td_status embedding_backward_rows(vk_dev *d, const td_op *op, vk_pc_scatter *pc) {
    const td_operand *idx = &op->in[1], *out = &op->out[0];
    vk_bind b[3];
    pc->n = (uint32_t)td_operand_numel(out);
    pc->idx64 = idx->dtype == TD_I64;
    const td_operand *views[3] = {idx, &op->in[0], out};
    uint32_t *offs[3] = {&pc->i_off, &pc->s_off, &pc->o_off};
    td_status st = vk_bind_views(d, 3, views, 0x4, b, offs);
    if (st != TD_OK) return st;
    if (pc->idx64) pc->i_off *= 2;
    uint64_t groups = (uint64_t)out->shape[0] * ((pc->D + WG - 1) / WG); /* 2-D past 65535; the shader folds it */
    uint32_t spec[1] = {WG};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_embedding_backward_f32, out->dtype), spec, 1, 3, b, pc, sizeof *pc,
                       (uint32_t)(groups < 65535 ? groups : 65535), (uint32_t)((groups + 65534) / 65535), 1);
}

td_status vk_op_EMBEDDING_BACKWARD(vk_dev *d, const td_op *op) {
    int64_t pad = op->p.embedding.padding_idx;
    vk_pc_scatter pc = {.T = (uint32_t)td_operand_numel(&op->in[1]),
                        .D = (uint32_t)op->out[0].shape[1],
                        .padding_idx = pad < 0 || pad > INT32_MAX ? -1 : (int32_t)pad};
    if (td_dtype_is_float(op->out[0].dtype) && pc.D > 0) return embedding_backward_rows(d, op, &pc);
    return scatter_run(d, 0, NULL, &op->in[1], &op->in[0], &op->out[0], &pc);
}

/* in = (self, idx, src) along p.axis.dim; out = self with src added at idx */
bool vk_supports_SCATTER_ADD(vk_dev *d, const td_op *op) {
    (void)d;
    const td_operand *self = &op->in[0], *idx = &op->in[1], *src = &op->in[2];
    int dim = op->p.axis.dim;
    if (idx->ndim != self->ndim || src->ndim != self->ndim || self->ndim < 1 || dim < 0 || dim >= self->ndim)
        return false;
    for (int i = 0; i < idx->ndim; i++)
        if (idx->shape[i] != src->shape[i]) return false; /* idx and src share a shape (ops.h) */
    return true;
}

td_status vk_op_SCATTER_ADD(vk_dev *d, const td_op *op) {
    const td_operand *self = &op->in[0], *idx = &op->in[1];
    vk_pc_scatter pc = {.ndim = (uint32_t)self->ndim, .dim = (uint32_t)op->p.axis.dim};
    for (int i = 0; i < self->ndim; i++) pc.shape[i] = (uint32_t)self->shape[i], pc.ishape[i] = (uint32_t)idx->shape[i];
    return scatter_run(d, 1, self, idx, &op->in[2], &op->out[0], &pc);
}

/* ---- CAT: each input copied into its slice of out along dim ---- */

bool vk_supports_CAT(vk_dev *d, const td_op *op) {
    (void)d;
    return op->p.axis.dim >= 0 && op->p.axis.dim < (op->out[0].ndim > 0 ? op->out[0].ndim : 1);
}

td_status vk_op_CAT(vk_dev *d, const td_op *op) {
    int dim = op->p.axis.dim;
    td_operand slice = op->out[0];
    int64_t at = 0;
    for (int i = 0; i < op->n_in; i++) {
        const td_operand *in = &op->in[i];
        int64_t len = in->ndim ? in->shape[dim] : 1;
        if (len == 0 || td_operand_numel(in) == 0) continue;
        slice = op->out[0];
        slice.offset += at * op->out[0].strides[dim];
        slice.shape[dim] = len;
        td_status st = vk_copy_view(d, in, &slice);
        if (st != TD_OK) return st;
        at += len;
    }
    return TD_OK;
}
