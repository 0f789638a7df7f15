/*
** LAYER_NORM (shaders/layer_norm.comp): in = (x, w?, b?), out = (y, mean, rstd)
** and ADD_LAYER_NORM (shaders/add_layer_norm.comp): in = (x, r, w?, b?), out =
** (y, s, mean, rstd); s = x + r, y = layer_norm(s); GROUP_NORM
** (shaders/group_norm.comp): in = (x [N, C, *], w?, b?), out = (y, mean [N, G],
** rstd [N, G]), rows (n, group); LAYER_NORM_BACKWARD
** (shaders/layer_norm_backward.comp): in = (dy, x, w?, mean, rstd, ds?), out =
** (dx, dw?, db?); see its section. All operands contiguous.
*/
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

/* GLSL: shaders/add_layer_norm.comp, block PC. */
typedef struct vk_pc_add_norm {
    uint32_t rows, D, has_w, has_b;
    uint32_t x_off, r_off, w_off, b_off;
    uint32_t y_off, s_off, m_off, rs_off;
    float eps;
} vk_pc_add_norm;
static_assert(sizeof(vk_pc_add_norm) == 52, "vk_pc_add_norm must match shaders/add_layer_norm.comp");

/* GLSL: shaders/group_norm.comp, block PC. */
typedef struct vk_pc_group_norm {
    uint32_t rows, D, has_w, has_b;
    uint32_t x_off, w_off, b_off, y_off;
    uint32_t m_off, r_off, G, Cg;
    uint32_t S;
    float eps, eps_lo; /* eps = eps + eps_lo in f64 (a small group's variance shows a float eps) */
} vk_pc_group_norm;
static_assert(sizeof(vk_pc_group_norm) == 60, "vk_pc_group_norm must match shaders/group_norm.comp");

/* ---- LAYER_NORM: in = (x, w?, b?), out = (y, mean, rstd) ---- */

bool vk_supports_LAYER_NORM(vk_dev *d, const td_op *op) {
    (void)d;
    return td_operand_numel(&op->out[1]) > 0 || td_operand_numel(&op->in[0]) == 0;
}

td_status vk_op_LAYER_NORM(vk_dev *d, const td_op *op) {
    int64_t rows = td_operand_numel(&op->out[1]), n = td_operand_numel(&op->in[0]);
    if (n == 0) return TD_OK;
    vk_pc_norm pc = {.rows = (uint32_t)rows,
                     .D = (uint32_t)(n / rows),
                     .has_w = op->in[1].buf != NULL,
                     .has_b = op->in[2].buf != NULL,
                     .eps = (float)op->p.norm.eps};
    vk_bind b[6];
    uint32_t *offs[6] = {&pc.x_off, &pc.w_off, &pc.b_off, &pc.y_off, &pc.m_off, &pc.r_off};
    const td_operand *views[6] = {&op->in[0], &op->in[1], &op->in[2], &op->out[0], &op->out[1], &op->out[2]};
    td_status st = vk_bind_views(d, 6, views, 0x38, b, offs);
    if (st != TD_OK) return st;
    uint32_t spec[1] = {vk_row_wg(pc.D)};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_layer_norm_f32, op->in[0].dtype), spec, 1, 6, b, &pc, sizeof pc,
                       vk_groups(rows, 1), 1, 1);
}

/* ---- ADD_LAYER_NORM ---- */

bool vk_supports_ADD_LAYER_NORM(vk_dev *d, const td_op *op) {
    (void)d;
    return td_operand_numel(&op->out[2]) > 0 || td_operand_numel(&op->in[0]) == 0;
}

td_status vk_op_ADD_LAYER_NORM(vk_dev *d, const td_op *op) {
    int64_t rows = td_operand_numel(&op->out[2]), n = td_operand_numel(&op->in[0]);
    if (n == 0) return TD_OK;
    vk_pc_add_norm pc = {.rows = (uint32_t)rows,
                         .D = (uint32_t)(n / rows),
                         .has_w = op->in[2].buf != NULL,
                         .has_b = op->in[3].buf != NULL,
                         .eps = (float)op->p.norm.eps};
    vk_bind b[8];
    uint32_t *offs[8] = {&pc.x_off, &pc.r_off, &pc.w_off, &pc.b_off, &pc.y_off, &pc.s_off, &pc.m_off, &pc.rs_off};
    const td_operand *views[8] = {&op->in[0],  &op->in[1],  &op->in[2],  &op->in[3],
                                  &op->out[0], &op->out[1], &op->out[2], &op->out[3]};
    td_status st = vk_bind_views(d, 8, views, 0xF0, b, offs);
    if (st != TD_OK) return st;
    uint32_t spec[1] = {WG};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_add_layer_norm_f32, op->in[0].dtype), spec, 1, 8, b, &pc, sizeof pc,
                       vk_groups(rows, 1), 1, 1);
}

/* ---- GROUP_NORM: rows (n, g) of D = C/G * S elements; G from mean [N, G] ---- */

td_status vk_op_GROUP_NORM(vk_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0];
    int64_t rows = td_operand_numel(&op->out[1]), n = td_operand_numel(x);
    if (n == 0) return TD_OK;
    int64_t N = x->shape[0], C = x->shape[1], G = rows / N;
    vk_pc_group_norm pc = {.rows = (uint32_t)rows,
                           .D = (uint32_t)(n / rows),
                           .has_w = op->in[1].buf != NULL,
                           .has_b = op->in[2].buf != NULL,
                           .G = (uint32_t)G,
                           .Cg = (uint32_t)(C / G),
                           .S = (uint32_t)(n / (N * C)),
                           .eps = (float)op->p.norm.eps,
                           .eps_lo = (float)(op->p.norm.eps - (double)(float)op->p.norm.eps)};
    vk_bind b[6];
    uint32_t *offs[6] = {&pc.x_off, &pc.w_off, &pc.b_off, &pc.y_off, &pc.m_off, &pc.r_off};
    const td_operand *views[6] = {x, &op->in[1], &op->in[2], &op->out[0], &op->out[1], &op->out[2]};
    td_status st = vk_bind_views(d, 6, views, 0x38, b, offs);
    if (st != TD_OK) return st;
    uint32_t spec[1] = {vk_row_wg(pc.D)};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_group_norm_f32, x->dtype), spec, 1, 6, b, &pc, sizeof pc,
                       vk_groups(rows, 1), 1, 1);
}

/* ---- LAYER_NORM_BACKWARD ----
** in = (dy, x [R, D], w? [D], mean, rstd [R], ds? [R, D]), out = (dx, dw? [D], db? [D], dxn?): dxn (a narrow
** copy of dx) is declined, as a narrow dy is (td__norm_narrow_ok: the core casts here). MODE 0 writes dx, a
** workgroup per chunk of q rows, and when dw or db is wanted each chunk's column partials into a scratch
** [chunks, 2 D] in the same pass; MODE 1 sums the scratch's rows in order into dw and db. */

/* Rows per workgroup: chunks of ceil(R / LNB_CHUNKS) rows, so that about this many workgroups fill a
** large GPU (8 of 256 invocations on each of an H100's 132 cores) and the scratch stays a few rows of
** partials per workgroup; fixed by R alone, so the sums' order (and bits) do not depend on the device. */
#define LNB_CHUNKS 1024
/* Columns each invocation keeps in registers (the shader's CPT_MAX). */
#define LNB_CPT_MAX 8

/* GLSL: shaders/layer_norm_backward.comp, block PC. */
typedef struct vk_pc_norm_backward {
    uint32_t rows, D, has_w, has_ds;
    uint32_t has_o, has_o2, dy_off, x_off;
    uint32_t w_off, m_off, r_off, ds_off;
    uint32_t o_off, o2_off, q, chunks;
} vk_pc_norm_backward;
static_assert(sizeof(vk_pc_norm_backward) == 64, "vk_pc_norm_backward must match shaders/layer_norm_backward.comp");

td_status vk_op_LAYER_NORM_BACKWARD(vk_dev *d, const td_op *op) {
    int64_t rows = td_operand_numel(&op->in[3]), n = td_operand_numel(&op->in[1]);
    if (op->out[3].buf) return td_error_set(TD_ERR_UNSUPPORTED, "vulkan layer_norm_backward: no dxn output");
    if (rows == 0 || n == 0) return TD_OK; /* the core sends no empty rows */
    const td_operand *in = op->in, *out = op->out;
    bool cols = out[1].buf || out[2].buf;
    int64_t q = cols ? (rows + LNB_CHUNKS - 1) / LNB_CHUNKS : (rows + 65534) / 65535;
    vk_pc_norm_backward pc = {.rows = (uint32_t)rows,
                              .D = (uint32_t)(n / rows),
                              .has_w = in[2].buf != NULL,
                              .has_ds = in[5].buf != NULL,
                              .has_o2 = cols,
                              .q = (uint32_t)q,
                              .chunks = (uint32_t)((rows + q - 1) / q)};
    td_buffer *scratch = NULL;
    td_status st = cols ? vk_alloc(d, (size_t)pc.chunks * 2 * pc.D * (in[1].dtype == TD_F64 ? 8 : 4), &scratch) : TD_OK;
    if (st != TD_OK) return st;
    /* MODE 0: binding 7 is the scratch (or a dummy) */
    const td_operand *views[8] = {&in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &out[0], &out[2]};
    uint32_t *offs[8] = {&pc.dy_off, &pc.x_off, &pc.w_off, &pc.m_off, &pc.r_off, &pc.ds_off, &pc.o_off, &pc.o2_off};
    vk_bind b[8];
    int shader = VK_DT_SHADER(VK_SHADER_layer_norm_backward_f32, in[1].dtype);
    uint32_t wg = vk_row_wg(pc.D), cpt = (pc.D + wg - 1) / wg;
    if ((st = vk_bind_views(d, 8, views, 0xC0, b, offs)) == TD_OK) {
        if (scratch) b[7] = vk_bind_buffer(scratch, true), pc.o2_off = 0;
        uint32_t spec[3] = {wg, 0, cpt <= LNB_CPT_MAX ? cpt : 0};
        st = vk_dispatch(d, shader, spec, 3, 8, b, &pc, sizeof pc, pc.chunks, 1, 1);
    }
    if (st == TD_OK && cols) { /* MODE 1: binding 0 the scratch, 6 dw, 7 db */
        const td_operand *v1[8] = {&in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &out[1], &out[2]};
        pc.has_o = out[1].buf != NULL, pc.has_o2 = out[2].buf != NULL;
        if ((st = vk_bind_views(d, 8, v1, 0xC0, b, offs)) == TD_OK) {
            b[0] = vk_bind_buffer(scratch, false), pc.dy_off = 0;
            uint32_t spec[3] = {WG, 1, 0};
            st = vk_dispatch(d, shader, spec, 3, 8, b, &pc, sizeof pc, vk_groups(2 * (int64_t)pc.D, 8), 1, 1);
        }
    }
    if (scratch) vk_free(scratch);
    return st;
}
