/*
** ADAM_STEP, SGD_STEP, RMSPROP_STEP (shaders/optim.comp): in = (grad, lr?),
** out = (param, state..., Adam's step?, Adam's low?) updated in place; every
** operand contiguous [n] of one float dtype but low, the f16/bf16 copy of an
** f32 param (autocast's shadow); absent optional state has buf == NULL.
** Constants are computed in double and rounded once to the compute type, as
** the CPU does; with a device lr (0-d, f64 for f64 else f32) or step (0-d
** f32, the steps done) the shader computes the ones that depend on them (t =
** step + 1), and a second one-invocation dispatch then stores step = t (the
** barrier between them orders it after every read).
** Also the GradScaler's AMP_UNSCALE (its section at the end).
*/
#include <math.h>
#include <string.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/optim.comp, block PC. */
typedef struct vk_pc_optim {
    uint32_t n, flags;
    uint32_t off[8];
    uint32_t t; /* Adam's step with a device lr but no device step */
    uint32_t k[18];
} vk_pc_optim;
static_assert(sizeof(vk_pc_optim) == 116, "vk_pc_optim must match shaders/optim.comp");

/* flags: lr / step / low bound (bindings 5, 6, 7), low is f16 */
enum { LR_FLAG = 1u << 4, STEP_FLAG = 1u << 5, LOW_FLAG = 1u << 6, LOW_F16_FLAG = 1u << 7 };

static void put_k(vk_pc_optim *pc, td_dtype dt, int i, double v) {
    if (dt == TD_F64) {
        uint64_t bits;
        memcpy(&bits, &v, 8);
        pc->k[2 * i] = (uint32_t)bits, pc->k[2 * i + 1] = (uint32_t)(bits >> 32);
    } else {
        float f = (float)v;
        memcpy(&pc->k[i], &f, 4);
    }
}

/* the device lr (in[1]), step (out[4]) and Adam's low copy (out[5]), or NULL when absent */
static const td_operand *optim_lr(const td_op *op) { return op->n_in > 1 && op->in[1].buf ? &op->in[1] : NULL; }
static const td_operand *optim_step(const td_op *op) { return op->n_out > 4 && op->out[4].buf ? &op->out[4] : NULL; }
static const td_operand *optim_low(const td_op *op) {
    return op->kind == TD_OP_ADAM_STEP && op->n_out > 5 && op->out[5].buf ? &op->out[5] : NULL;
}

/* every state operand present has grad's length; lr and step one element; a low copy f16/bf16 of grad's length
** beside an f32 param */
static bool optim_ok(const td_op *op) {
    const td_operand *low = optim_low(op);
    if ((optim_lr(op) && td_operand_numel(optim_lr(op)) != 1) ||
        (optim_step(op) && td_operand_numel(optim_step(op)) != 1) ||
        (low &&
         (op->out[0].dtype != TD_F32 || low->dtype == TD_F32 || td_operand_numel(low) != td_operand_numel(&op->in[0]))))
        return false;
    for (int i = 0; i < op->n_out && i < 4; i++)
        if (op->out[i].buf && td_operand_numel(&op->out[i]) != td_operand_numel(&op->in[0])) return false;
    return true;
}

/* Binding k to v (written when write), or to the dummy when v is NULL. */
static td_status bind_or_dummy(vk_dev *d, const td_operand *v, bool write, vk_bind *b, uint32_t *off) {
    if (v) return vk_bind_view(d, v, write, b, off);
    *b = vk_bind_buffer(d->dummy, true);
    *off = 0;
    return TD_OK;
}

/* present[k]: whether out[k] takes part (else its binding is the dummy);
** the lr, step and low copy are bound when the op has them (flags LR_FLAG,
** STEP_FLAG, LOW_FLAG), and a step is advanced by a second dispatch (code 3) */
static td_status optim(vk_dev *d, const td_op *op, uint32_t code, vk_pc_optim *pc, const bool *present) {
    vk_bind b[8];
    pc->n = (uint32_t)td_operand_numel(&op->in[0]);
    const td_operand *lr = optim_lr(op), *step = code == 0 ? optim_step(op) : NULL, *low = optim_low(op);
    pc->flags |= (lr ? LR_FLAG : 0) | (step ? STEP_FLAG : 0) | (low ? LOW_FLAG : 0) |
                 (low && low->dtype == TD_F16 ? LOW_F16_FLAG : 0);
    td_status st = vk_bind_view(d, &op->in[0], false, &b[0], &pc->off[0]);
    for (int k = 0; k < 4 && st == TD_OK; k++)
        st = bind_or_dummy(d, k < op->n_out && present[k] ? &op->out[k] : NULL, true, &b[k + 1], &pc->off[k + 1]);
    if (st == TD_OK) st = bind_or_dummy(d, lr, false, &b[5], &pc->off[5]);
    if (st == TD_OK) st = bind_or_dummy(d, step, true, &b[6], &pc->off[6]);
    if (st == TD_OK) st = bind_or_dummy(d, low, true, &b[7], &pc->off[7]);
    if (st != TD_OK) return st;
    uint32_t spec[2] = {WG, code};
    int shader = VK_DT_SHADER(VK_SHADER_optim_f32, op->in[0].dtype);
    st = vk_dispatch(d, shader, spec, 2, 8, b, pc, sizeof *pc, vk_groups(pc->n, WG), 1, 1);
    if (st != TD_OK || !step) return st;
    spec[1] = 3;
    return vk_dispatch(d, shader, spec, 2, 8, b, pc, sizeof *pc, 1, 1, 1);
}

bool vk_supports_ADAM_STEP(vk_dev *d, const td_op *op) {
    return (void)d, optim_ok(op) && (!op->p.adam.amsgrad || op->out[3].buf);
}

td_status vk_op_ADAM_STEP(vk_dev *d, const td_op *op) {
    td_dtype dt = op->in[0].dtype;
    double b1 = op->p.adam.beta1, b2 = op->p.adam.beta2, lr = op->p.adam.lr, wd = op->p.adam.weight_decay;
    double t = (double)op->p.adam.step;
    vk_pc_optim pc = {0};
    double k[9] = {
        b1, 1 - b1, b2, 1 - b2, wd, 1 - lr * wd, -lr / (1 - pow(b1, t)), sqrt(1 - pow(b2, t)), op->p.adam.eps};
    if (optim_lr(op) || optim_step(op)) { /* the shader computes k[5..7] from these */
        k[5] = lr, k[6] = log(b1), k[7] = log(b2);
        pc.t = (uint32_t)op->p.adam.step;
    }
    for (int i = 0; i < 9; i++) put_k(&pc, dt, i, k[i]);
    pc.flags = (wd != 0 && !op->p.adam.decoupled) | op->p.adam.decoupled << 1 | op->p.adam.amsgrad << 2 |
               op->p.adam.maximize << 3;
    bool present[4] = {true, true, true, op->p.adam.amsgrad};
    return optim(d, op, 0, &pc, present);
}

bool vk_supports_SGD_STEP(vk_dev *d, const td_op *op) {
    return (void)d, optim_ok(op) && (op->p.sgd.momentum == 0 || op->out[1].buf);
}

td_status vk_op_SGD_STEP(vk_dev *d, const td_op *op) {
    td_dtype dt = op->in[0].dtype;
    vk_pc_optim pc = {0};
    double k[4] = {-op->p.sgd.lr, op->p.sgd.momentum, 1 - op->p.sgd.dampening, op->p.sgd.weight_decay};
    for (int i = 0; i < 4; i++) put_k(&pc, dt, i, k[i]);
    bool buf = op->p.sgd.momentum != 0;
    pc.flags = op->p.sgd.nesterov | op->p.sgd.first_step << 1 | op->p.sgd.maximize << 2 | buf << 3;
    bool present[4] = {true, buf, false, false};
    return optim(d, op, 1, &pc, present);
}

bool vk_supports_RMSPROP_STEP(vk_dev *d, const td_op *op) {
    return (void)d, optim_ok(op) && (op->p.rmsprop.momentum <= 0 || op->out[2].buf) &&
                        (!op->p.rmsprop.centered || op->out[3].buf);
}

td_status vk_op_RMSPROP_STEP(vk_dev *d, const td_op *op) {
    td_dtype dt = op->in[0].dtype;
    vk_pc_optim pc = {0};
    double a = op->p.rmsprop.alpha;
    double k[6] = {-op->p.rmsprop.lr, a, 1 - a, op->p.rmsprop.eps, op->p.rmsprop.weight_decay, op->p.rmsprop.momentum};
    for (int i = 0; i < 6; i++) put_k(&pc, dt, i, k[i]);
    bool buf = op->p.rmsprop.momentum > 0, centered = op->p.rmsprop.centered;
    pc.flags = op->p.rmsprop.maximize | buf << 1 | centered << 2;
    bool present[4] = {true, true, buf, centered};
    return optim(d, op, 2, &pc, present);
}

/* ---- AMP_UNSCALE ----
** (shaders/amp_unscale.comp): out = (grad [n], found_inf [1] f32),
** in place: found_inf = 1 if grad holds inf or NaN; grad *= inv_scale. One
** dispatch per gradient (this backend has no run_many; the dispatches share
** one command buffer).
*/

/* GLSL: shaders/amp_unscale.comp, block PC. */
typedef struct vk_pc_amp {
    uint32_t n, off_g, off_f;
    uint32_t k[2];
} vk_pc_amp;
static_assert(sizeof(vk_pc_amp) == 20, "vk_pc_amp must match shaders/amp_unscale.comp");

bool vk_supports_AMP_UNSCALE(vk_dev *d, const td_op *op) {
    return (void)d, td_operand_numel(&op->out[1]) == 1 && td_operand_numel(&op->out[0]) <= UINT32_MAX;
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
