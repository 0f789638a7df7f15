/*
** ARANGE (shaders/fill.comp, OP 1), LAYER_NORM (shaders/layer_norm.comp),
** and the indexing ops: EMBEDDING, INDEX_SELECT, GATHER, ONE_HOT
** (shaders/index.comp, by element size) and EMBEDDING_BACKWARD, SCATTER_ADD
** (shaders/scatter.comp, typed). Indices may be int64 or int32. All operands
** are contiguous (TD_LAYOUT_CONTIG).
*/
#include <math.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/layer_norm.comp, block PC. */
typedef struct vk_pc_norm {
    uint32_t rows, D, has_w, has_b;
    uint32_t x_off, w_off, b_off, y_off;
    uint32_t m_off, r_off;
    float eps;
} vk_pc_norm;
static_assert(sizeof(vk_pc_norm) == 44, "vk_pc_norm must match shaders/layer_norm.comp");

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

static bool is_index(td_dtype dt) { return dt == TD_I64 || dt == TD_I32; }

/* ---- ARANGE ---- */

bool vk_supports_ARANGE(vk_dev *d, const td_op *op) {
    return (void)d, op->n_out == 1 && op->out[0].dtype != TD_BOOL && td_operand_is_contiguous(&op->out[0]);
}

td_status vk_op_ARANGE(vk_dev *d, const td_op *op) {
    const td_operand *views[1] = {&op->out[0]};
    bool writes[1] = {true};
    uint32_t sc[4] = {0}, spec[2] = {WG, 1};
    td_dtype dt = op->out[0].dtype;
    /* u8 steps may be negative: they go in as int32 bits and wrap in the shader's uint math */
    td_dtype sdt = dt == TD_U8 ? TD_I32 : dt;
    vk_scalar(sc, 0, sdt, op->p.arange.start);
    vk_scalar(sc, 1, sdt, op->p.arange.step);
    td_operand flat = op->out[0]; /* one dim, so the element index is the flat index */
    flat.ndim = 1, flat.shape[0] = td_operand_numel(&op->out[0]), flat.strides[0] = 1;
    views[0] = &flat;
    return vk_elementwise(d, VK_DT_SHADER(VK_SHADER_fill_f32, dt), spec, 2, 1, views, writes, sc);
}

/* ---- LAYER_NORM: in = (x, w?, b?), out = (y, mean, rstd) ---- */

bool vk_supports_LAYER_NORM(vk_dev *d, const td_op *op) {
    (void)d;
    td_dtype dt = op->in[0].dtype;
    if (op->n_in != 3 || op->n_out != 3 || !vk_is_float(dt)) return false;
    for (int i = 1; i < 3; i++)
        if (op->in[i].buf && op->in[i].dtype != dt) return false;
    for (int i = 0; i < 3; i++)
        if (op->out[i].dtype != dt) return false;
    return td_operand_numel(&op->out[1]) > 0 || td_operand_numel(&op->in[0]) == 0;
}

td_status vk_op_LAYER_NORM(vk_dev *d, const td_op *op) {
    int64_t rows = td_operand_numel(&op->out[1]);
    vk_pc_norm pc = {.rows = (uint32_t)rows,
                     .D = (uint32_t)(td_operand_numel(&op->in[0]) / rows),
                     .has_w = op->in[1].buf != NULL,
                     .has_b = op->in[2].buf != NULL,
                     .eps = (float)op->p.norm.eps};
    vk_bind b[6];
    uint32_t *offs[6] = {&pc.x_off, &pc.w_off, &pc.b_off, &pc.y_off, &pc.m_off, &pc.r_off};
    td_operand none = {0};
    td_status st = TD_OK;
    for (int k = 0; k < 6 && st == TD_OK; k++) {
        const td_operand *v = k < 3 ? &op->in[k] : &op->out[k - 3];
        st = vk_bind_view(d, v->buf ? v : &none, k >= 3, &b[k], offs[k]);
    }
    if (st != TD_OK) return st;
    uint32_t spec[1] = {vk_row_wg(pc.D)};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_layer_norm_f32, op->in[0].dtype), spec, 1, 6, b, &pc, sizeof pc,
                       vk_groups(rows, 1), 1, 1);
}

/* ---- element-moving index ops ---- */

enum { IX_SELECT, IX_GATHER, IX_ONE_HOT };

static td_status index_run(vk_dev *d, uint32_t code, const td_operand *x, const td_operand *idx, const td_operand *out,
                           vk_pc_index *pc) {
    vk_bind b[3];
    td_operand none = {0};
    pc->n = (uint32_t)td_operand_numel(out);
    pc->idx64 = idx->dtype == TD_I64;
    td_status st = vk_bind_view(d, x ? x : &none, false, &b[0], &pc->x_off);
    if (st == TD_OK) st = vk_bind_view(d, idx, false, &b[1], &pc->i_off);
    if (st == TD_OK) st = vk_bind_view(d, out, true, &b[2], &pc->o_off);
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
    return op->n_in == 2 && op->in[0].ndim == 2 && is_index(op->in[1].dtype) && op->out[0].dtype == op->in[0].dtype &&
           vk_is_float(op->in[0].dtype);
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
    return op->n_in == 2 && is_index(op->in[1].dtype) && op->out[0].dtype == op->in[0].dtype && dim >= 0 &&
           dim < (op->in[0].ndim ? op->in[0].ndim : 1);
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
    return op->n_in == 2 && is_index(op->in[1].dtype) && op->out[0].dtype == op->in[0].dtype &&
           op->in[1].ndim == op->in[0].ndim && op->in[0].ndim >= 1 && dim >= 0 && dim < op->in[0].ndim;
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
    return op->n_in == 1 && is_index(op->in[0].dtype) && op->out[0].dtype == TD_I64 && op->out[0].ndim >= 1;
}

td_status vk_op_ONE_HOT(vk_dev *d, const td_op *op) {
    vk_pc_index pc = {.post = (uint32_t)op->out[0].shape[op->out[0].ndim - 1]};
    return index_run(d, IX_ONE_HOT, NULL, &op->in[0], &op->out[0], &pc);
}

/* ---- summing index ops ---- */

static td_status scatter_run(vk_dev *d, uint32_t code, const td_operand *self, const td_operand *idx,
                             const td_operand *src, const td_operand *out, vk_pc_scatter *pc) {
    vk_bind b[4];
    td_operand none = {0};
    pc->n = (uint32_t)td_operand_numel(out);
    pc->idx64 = idx->dtype == TD_I64;
    td_status st = vk_bind_view(d, self ? self : &none, false, &b[0], &pc->a_off);
    if (st == TD_OK) st = vk_bind_view(d, idx, false, &b[1], &pc->i_off);
    if (st == TD_OK) st = vk_bind_view(d, src, false, &b[2], &pc->s_off);
    if (st == TD_OK) st = vk_bind_view(d, out, true, &b[3], &pc->o_off);
    if (st != TD_OK) return st;
    if (pc->idx64) pc->i_off *= 2;
    uint32_t spec[2] = {WG, code};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_scatter_f32, out->dtype), spec, 2, 4, b, pc, sizeof *pc,
                       vk_groups(pc->n, WG), 1, 1);
}

/* in = (dy [..., D], idx [...]) -> dweight [V, D]; p.embedding.padding_idx rows stay 0 */
bool vk_supports_EMBEDDING_BACKWARD(vk_dev *d, const td_op *op) {
    (void)d;
    return op->n_in == 2 && is_index(op->in[1].dtype) && op->out[0].ndim == 2 && vk_is_float(op->out[0].dtype) &&
           op->in[0].dtype == op->out[0].dtype;
}

td_status vk_op_EMBEDDING_BACKWARD(vk_dev *d, const td_op *op) {
    int64_t pad = op->p.embedding.padding_idx;
    vk_pc_scatter pc = {.T = (uint32_t)td_operand_numel(&op->in[1]),
                        .D = (uint32_t)op->out[0].shape[1],
                        .padding_idx = pad < 0 || pad > INT32_MAX ? -1 : (int32_t)pad};
    return scatter_run(d, 0, NULL, &op->in[1], &op->in[0], &op->out[0], &pc);
}

/* in = (self, idx, src) along p.axis.dim; out = self with src added at idx */
bool vk_supports_SCATTER_ADD(vk_dev *d, const td_op *op) {
    (void)d;
    const td_operand *self = &op->in[0], *idx = &op->in[1], *src = &op->in[2];
    int dim = op->p.axis.dim;
    if (op->n_in != 3 || !is_index(idx->dtype) || self->dtype == TD_BOOL || src->dtype != self->dtype ||
        op->out[0].dtype != self->dtype || idx->ndim != self->ndim || src->ndim != self->ndim || self->ndim < 1 ||
        dim < 0 || dim >= self->ndim)
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
