/*
** RAND, RANDN, DROPOUT (shaders/rand.comp): Philox4x32-10 streams identical
** to the CPU backend's (see src/backend_cpu/cpu_random.c for the mapping).
** RAND and DROPOUT are bit-exact; RANDN matches to a few ulp (float
** transcendentals; f64 computes in double with shaders/math64.glsl).
*/
#include <math.h>
#include <string.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/rand.comp, block PC. */
typedef struct vk_pc_rand {
    uint32_t n, x_off, out_off, threshold;
    uint32_t seed_lo, seed_hi, off_lo, off_hi;
    float scale_f;
    uint32_t scale_lo, scale_hi, pad;
} vk_pc_rand;
static_assert(sizeof(vk_pc_rand) == 48, "vk_pc_rand must match shaders/rand.comp");

static td_status rand_op(vk_dev *d, const td_op *op, uint32_t code) {
    const td_operand *out = &op->out[0], *x = code == 2 ? &op->in[0] : out;
    int64_t n = td_operand_numel(out);
    if (n > UINT32_MAX - 3) return td_error_set(TD_ERR_UNSUPPORTED, "vulkan: %lld random values", (long long)n);
    vk_bind b[2];
    vk_pc_rand pc = {.n = (uint32_t)n};
    td_status st = vk_bind_view(d, x, false, &b[0], &pc.x_off);
    if (st == TD_OK) st = vk_bind_view(d, out, true, &b[1], &pc.out_off);
    if (st != TD_OK) return st;
    pc.seed_lo = (uint32_t)op->p.rng.seed, pc.seed_hi = (uint32_t)(op->p.rng.seed >> 32);
    pc.off_lo = (uint32_t)op->p.rng.offset, pc.off_hi = (uint32_t)(op->p.rng.offset >> 32);
    if (code == 2) {
        double p = op->p.rng.p, scale = 1.0 / (1.0 - p);
        pc.threshold = (uint32_t)ceil(p * 16777216.0);
        pc.scale_f = (float)scale;
        uint64_t bits;
        memcpy(&bits, &scale, 8);
        pc.scale_lo = (uint32_t)bits, pc.scale_hi = (uint32_t)(bits >> 32);
    }
    uint32_t spec[2] = {WG, code};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_rand_f32, out->dtype), spec, 2, 2, b, &pc, sizeof pc,
                       vk_groups((n + 3) / 4, WG), 1, 1);
}

td_status vk_op_RAND(vk_dev *d, const td_op *op) { return rand_op(d, op, 0); }

td_status vk_op_RANDN(vk_dev *d, const td_op *op) { return rand_op(d, op, 1); }

td_status vk_op_DROPOUT(vk_dev *d, const td_op *op) { return rand_op(d, op, 2); }
