/*
** Creation and copy: FILL and ARANGE (shaders/fill.comp, OP 0 and 1) and COPY
** (shaders/copy.comp, one variant per dtype pair), on the elementwise
** iteration of vk_ops_elementwise.c.
*/
#include "vk_ops.h"

#define WG 256

/* ---- FILL ---- */

td_status vk_op_FILL(vk_dev *d, const td_op *op) {
    const td_operand *views[1] = {&op->out[0]};
    bool writes[1] = {true};
    uint32_t sc[4] = {0}, spec[1] = {WG};
    td_dtype dt = op->out[0].dtype;
    if (dt == TD_BOOL)
        vk_scalar(sc, 0, dt, op->p.fill.value != 0);
    else
        vk_scalar(sc, 0, dt, op->p.fill.value);
    return vk_elementwise(d, VK_DT_SHADER(VK_SHADER_fill_f32, dt), spec, 1, 1, views, writes, sc);
}

/* ---- COPY ---- */

td_status vk_copy_view(vk_dev *d, const td_operand *in, const td_operand *out) {
    const td_operand *views[2] = {in, out};
    bool writes[2] = {false, true};
    uint32_t spec[1] = {WG};
    int shader = VK_SHADER_copy_f32_f32 + (int)in->dtype * TD_DTYPE_COUNT + (int)out->dtype;
    return vk_elementwise(d, shader, spec, 1, 2, views, writes, NULL);
}

td_status vk_op_COPY(vk_dev *d, const td_op *op) { return vk_copy_view(d, &op->in[0], &op->out[0]); }

/* ---- ARANGE ---- */

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
