/*
** AMP_UNSCALE (shaders/amp_unscale.comp): out = (grad [n], found_inf [1] f32),
** in place: found_inf = 1 if grad holds inf or NaN; grad *= inv_scale. One
** dispatch per gradient (this backend has no run_many; the dispatches share
** one command buffer).
*/
#include <string.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/amp_unscale.comp, block PC. */
typedef struct vk_pc_amp {
    uint32_t n, off_g, off_f;
    uint32_t k[2];
} vk_pc_amp;
static_assert(sizeof(vk_pc_amp) == 20, "vk_pc_amp must match shaders/amp_unscale.comp");

bool vk_supports_AMP_UNSCALE(vk_dev *d, const td_op *op) {
    return (void)d, op->n_in == 0 && op->n_out == 2 && vk_is_float(op->out[0].dtype) && op->out[1].dtype == TD_F32 &&
                        td_operand_numel(&op->out[1]) == 1 && td_operand_numel(&op->out[0]) <= UINT32_MAX;
}

td_status vk_op_AMP_UNSCALE(vk_dev *d, const td_op *op) {
    vk_pc_amp pc = {0};
    td_dtype dt = op->out[0].dtype;
    double inv = op->p.amp.inv_scale;
    if (dt == TD_F64) {
        uint64_t bits;
        memcpy(&bits, &inv, 8);
        pc.k[0] = (uint32_t)bits, pc.k[1] = (uint32_t)(bits >> 32);
    } else {
        float f = (float)inv;
        memcpy(&pc.k[0], &f, 4);
    }
    pc.n = (uint32_t)td_operand_numel(&op->out[0]);
    vk_bind b[2];
    td_status st = vk_bind_view(d, &op->out[0], true, &b[0], &pc.off_g);
    if (st == TD_OK) st = vk_bind_view(d, &op->out[1], true, &b[1], &pc.off_f);
    if (st != TD_OK) return st;
    uint32_t spec[1] = {WG};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_amp_unscale_f32, dt), spec, 1, 2, b, &pc, sizeof pc,
                       vk_groups(pc.n, WG), 1, 1);
}
