/*
** 2-D pooling (shaders/pool2d.comp): MAX_POOL2D, AVG_POOL2D and their backward
** passes. All operands are contiguous NCHW. Backward passes gather instead of
** scattering, so results are deterministic (MAX_POOL2D_BACKWARD without the
** geometry may scatter f32 with float atomics: see there).
*/
#include <string.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/pool2d.comp, block PC. */
typedef struct vk_pc_pool {
    uint32_t NC, H, W, Ho;
    uint32_t Wo, KH, KW, s0;
    uint32_t s1;
    int32_t p0, p1;
    uint32_t include_pad;
    uint32_t a_off, i_off, o_off;
} vk_pc_pool;
static_assert(sizeof(vk_pc_pool) == 60, "vk_pc_pool must match shaders/pool2d.comp");

/* ---- pooling ---- */

enum { POOL_MAX, POOL_MAX_BWD, POOL_AVG, POOL_AVG_BWD };

/* x: the [N,C,H,W] side; y: the [N,C,Ho,Wo] side */
static td_status pool(vk_dev *d, const td_op *op, uint32_t code, const td_operand *a, const td_operand *idx,
                      const td_operand *out, const td_operand *x, const td_operand *y) {
    vk_pc_pool pc = {.NC = (uint32_t)(x->shape[0] * x->shape[1]),
                     .H = (uint32_t)x->shape[2],
                     .W = (uint32_t)x->shape[3],
                     .Ho = (uint32_t)y->shape[2],
                     .Wo = (uint32_t)y->shape[3],
                     .KH = (uint32_t)op->p.pool.kernel[0],
                     .KW = (uint32_t)op->p.pool.kernel[1],
                     .s0 = (uint32_t)op->p.pool.stride[0],
                     .s1 = (uint32_t)op->p.pool.stride[1],
                     .p0 = op->p.pool.padding[0],
                     .p1 = op->p.pool.padding[1],
                     .include_pad = op->p.pool.count_include_pad};
    vk_bind bind[3];
    td_status st = vk_bind_view(d, a, false, &bind[0], &pc.a_off);
    if (st == TD_OK) st = vk_bind_view(d, idx, code == POOL_MAX, &bind[1], &pc.i_off);
    if (st == TD_OK) st = vk_bind_view(d, out, true, &bind[2], &pc.o_off);
    if (st != TD_OK) return st;
    uint32_t spec[2] = {WG, code};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_pool2d_f32, out->dtype), spec, 2, 3, bind, &pc, sizeof pc,
                       vk_groups(td_operand_numel(out), WG), 1, 1);
}

static bool geometry_ok(const td_op *op) {
    return op->p.pool.stride[0] >= 1 && op->p.pool.stride[1] >= 1 && op->p.pool.kernel[0] >= 1 &&
           op->p.pool.kernel[1] >= 1;
}

static bool pool_ok(const td_op *op) { return op->in[0].ndim == 4 && op->out[0].ndim == 4; }

/* in = x; out = (y, indices) */
bool vk_supports_MAX_POOL2D(vk_dev *d, const td_op *op) { return (void)d, pool_ok(op) && geometry_ok(op); }
td_status vk_op_MAX_POOL2D(vk_dev *d, const td_op *op) {
    return pool(d, op, POOL_MAX, &op->in[0], &op->out[1], &op->out[0], &op->in[0], &op->out[0]);
}

/* in = (dy, indices); out = dx. The geometry in p.pool is optional (the indices
** alone locate each gradient): without it, f32 scatters with float atomics
** where the device has them, and otherwise every dx element scans its plane. */
bool vk_supports_MAX_POOL2D_BACKWARD(vk_dev *d, const td_op *op) { return (void)d, pool_ok(op); }
td_status vk_op_MAX_POOL2D_BACKWARD(vk_dev *d, const td_op *op) {
    if (geometry_ok(op) || op->out[0].dtype != TD_F32 || !d->caps.atomic_float_add) {
        td_op scan = *op;
        if (!geometry_ok(op)) memset(&scan.p.pool, 0, sizeof scan.p.pool);
        return pool(d, &scan, POOL_MAX_BWD, &op->in[0], &op->in[1], &op->out[0], &op->out[0], &op->in[0]);
    }
    td_op zero = {.kind = TD_OP_FILL, .n_out = 1, .out = op->out};
    td_status st = vk_op_FILL(d, &zero);
    if (st != TD_OK) return st;
    const td_operand *x = &op->out[0], *y = &op->in[0];
    vk_pc_pool pc = {.NC = (uint32_t)(x->shape[0] * x->shape[1]),
                     .H = (uint32_t)x->shape[2],
                     .W = (uint32_t)x->shape[3],
                     .Ho = (uint32_t)y->shape[2],
                     .Wo = (uint32_t)y->shape[3]};
    vk_bind bind[3];
    st = vk_bind_view(d, y, false, &bind[0], &pc.a_off);
    if (st == TD_OK) st = vk_bind_view(d, &op->in[1], false, &bind[1], &pc.i_off);
    if (st == TD_OK) st = vk_bind_view(d, x, true, &bind[2], &pc.o_off);
    if (st != TD_OK) return st;
    uint32_t spec[1] = {WG};
    return vk_dispatch(d, VK_SHADER_pool2d_scatter_f32, spec, 1, 3, bind, &pc, sizeof pc,
                       vk_groups(td_operand_numel(y), WG), 1, 1);
}

bool vk_supports_AVG_POOL2D(vk_dev *d, const td_op *op) { return (void)d, pool_ok(op) && geometry_ok(op); }
td_status vk_op_AVG_POOL2D(vk_dev *d, const td_op *op) {
    return pool(d, op, POOL_AVG, &op->in[0], NULL, &op->out[0], &op->in[0], &op->out[0]);
}

/* in = dy; out = dx */
bool vk_supports_AVG_POOL2D_BACKWARD(vk_dev *d, const td_op *op) { return (void)d, pool_ok(op) && geometry_ok(op); }
td_status vk_op_AVG_POOL2D_BACKWARD(vk_dev *d, const td_op *op) {
    return pool(d, op, POOL_AVG_BWD, &op->in[0], NULL, &op->out[0], &op->out[0], &op->in[0]);
}
