/*
** LINEAR_GELU: in = (x [M, K], w [N, K], b [N]?), out = (y, h) [M, N], all
** contiguous. The matmul encoder writes h = x w^T (w read as the column-major
** [K, N] it is), then shaders/bias_gelu.comp adds b to h in place and writes
** y = gelu(h) in the same pass: y and h equal MATMUL, ADD and GELU bit for bit.
** Views wider than one binding are not taken (the core composes the ops then).
*/
#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/bias_gelu.comp, block PC. */
typedef struct vk_pc_bias_gelu {
    uint32_t n, N, has_b, tanh_form;
    uint32_t h_off, b_off, y_off;
} vk_pc_bias_gelu;
static_assert(sizeof(vk_pc_bias_gelu) == 28, "vk_pc_bias_gelu must match shaders/bias_gelu.comp");

bool vk_supports_LINEAR_GELU(vk_dev *d, const td_op *op) {
    td_dtype dt = op->in[0].dtype;
    if (op->n_in != 3 || op->n_out != 2 || !vk_is_float(dt) || op->in[1].dtype != dt ||
        (op->in[2].buf && op->in[2].dtype != dt) || op->out[0].dtype != dt || op->out[1].dtype != dt)
        return false;
    for (int i = 0; i < 5; i++) {
        const td_operand *v = i < 3 ? &op->in[i] : &op->out[i - 3];
        if (v->buf && vk_view_too_wide(d, v)) return false;
    }
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, &op->out[1]);
    return vk_supports_MATMUL(d, &mm);
}

td_status vk_op_LINEAR_GELU(vk_dev *d, const td_op *op) {
    int64_t n = td_operand_numel(&op->out[0]);
    if (n == 0) return TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, &op->out[1]);
    td_status st = vk_op_MATMUL(d, &mm);
    if (st != TD_OK) return st;
    vk_pc_bias_gelu pc = {.n = (uint32_t)n,
                          .N = (uint32_t)op->in[1].shape[0],
                          .has_b = op->in[2].buf != NULL,
                          .tanh_form = op->p.gelu.approximate == TD_GELU_TANH};
    const td_operand *views[3] = {&op->out[1], &op->in[2], &op->out[0]};
    td_operand none = {0};
    uint32_t *offs[3] = {&pc.h_off, &pc.b_off, &pc.y_off};
    vk_bind b[3];
    for (int k = 0; k < 3 && st == TD_OK; k++)
        st = vk_bind_view(d, views[k]->buf ? views[k] : &none, k != 1, &b[k], offs[k]);
    if (st != TD_OK) return st;
    uint32_t spec[1] = {WG};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_bias_gelu_f32, op->in[0].dtype), spec, 1, 3, b, &pc, sizeof pc,
                       vk_groups(n, WG), 1, 1);
}
