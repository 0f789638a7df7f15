/*
** ATTENTION and ATTENTION_BACKWARD (shaders/attention.comp): the forward is one
** dispatch (MODE 0); the backward three, dk and dv by keys (MODES 1, 2: a
** dispatch binds at most 8 buffers on some devices) and dq by queries (MODE 3),
** each recomputing the probabilities from lse, so every output element has one
** writer and no atomics are needed. Bool masks use the _bmask variants. Shapes and math: the shader's header
** and src/backend_cpu/cpu_attention.c. Head dims up to 128 (E and Ev).
** f16 and bf16 without mask or dropout, head dim 64 or 128, run on tensor cores where the device has
** cooperative matrices, unless TRIDENT_VK_ATTN=scalar: the forward in shaders/attention_coopmat.comp, the
** backward in shaders/attention_coopmat_bwd.comp (two dispatches: dk and dv by keys, then dq by queries);
** everything else takes attention.comp. bf16 of any finite range is exact there too: each head's q, k, v (and
** dout) is staged scaled by a power of two into f16's range and unscaled in f32 (shaders/attention_coopmat.glsl),
** the powers from the heads' keys, which a small pass (shaders/attention_bf16_amax.comp) writes first. Where bf16
** runs natively (vk_bf16_native: the device's bf16 cooperative matrices, TRIDENT_VK_BF16, as for the GEMM), bf16
** takes the kernels' BF16_BITS variants retyped to bf16 instead (attention_coopmat_native_bf16,
** attention_coopmat_bwd_native_bf16; vk_spirv_bf16.c): bf16 A and B fragments, f32 accumulators, no keys, no
** scaling (shaders/attention_coopmat.glsl).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trident/attn_layout.h"
#include "vk_ops.h"

#define ATTN_DMAX 128 /* the largest E, Ev the shader's per-invocation arrays take */

/* GLSL: shaders/attention.comp, block PC. */
typedef struct vk_pc_attn {
    uint32_t N, n1, L, S, E, Ev;
    uint32_t q_off, k_off, v_off, m_off, o_off, l_off, do_off, g_off;
    uint32_t ms[4];
    float scale_f, zs_f;
    uint32_t threshold, flags;
    uint32_t seed_lo, seed_hi, off_lo, off_hi;
    uint32_t scale_lo, scale_hi, zs_lo, zs_hi;
} vk_pc_attn;
static_assert(sizeof(vk_pc_attn) == 120, "vk_pc_attn must match shaders/attention.comp");

/* GLSL: shaders/attention_bf16_amax.comp, block PC. */
typedef struct vk_pc_amax {
    uint32_t N, len, x_off, k_off, k_zs;
} vk_pc_amax;
static_assert(sizeof(vk_pc_amax) == 20, "vk_pc_amax must match shaders/attention_bf16_amax.comp");

/* q, k, v of either op: in[0..2] of ATTENTION, in[1..3] of ATTENTION_BACKWARD */
static const td_operand *qkv(const td_op *op) { return &op->in[op->kind == TD_OP_ATTENTION_BACKWARD]; }

static bool attn_supports(vk_dev *d, const td_op *op) {
    (void)d;
    const td_operand *x = qkv(op);
    if (!td_attn_dense(op)) return false; /* the shaders read contiguous q, k, v, out */
    if (x[0].shape[3] > ATTN_DMAX || x[2].shape[3] > ATTN_DMAX) return false;
    /* the shader reads a mask as bool (the _bmask variants) or as q's dtype */
    if (x[3].buf && x[3].dtype != TD_BOOL && x[3].dtype != x[0].dtype) return false;
    /* 32-bit element offsets in the shader */
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i].buf && td_operand_numel(&op->in[i]) >= ((int64_t)1 << 31)) return false;
    return true;
}
bool vk_supports_ATTENTION(vk_dev *d, const td_op *op) { return attn_supports(d, op); }
bool vk_supports_ATTENTION_BACKWARD(vk_dev *d, const td_op *op) { return attn_supports(d, op); }

/* The invocations per workgroup (= rows per staged tile): the most of 64, 32, 16, 8 whose two tiles of
** WG x DP values fit the device's shared memory. */
static uint32_t attn_wg(vk_dev *d, uint32_t dp, size_t es) {
    uint32_t wg = 64;
    while (wg > 8 && (size_t)wg * (2 * dp + 2) * es > d->caps.shared_mem) wg /= 2;
    return wg;
}

static void dbl_bits(double x, uint32_t *lo, uint32_t *hi) {
    uint64_t u;
    memcpy(&u, &x, 8);
    *lo = (uint32_t)u, *hi = (uint32_t)(u >> 32);
}

/* bindings (q, k, v, mask, out, lse, dout, the gradient of mode) and the push constants of op */
static td_status attn_bind(vk_dev *d, const td_op *op, uint32_t mode, vk_bind *b, vk_pc_attn *pc) {
    bool bw = op->kind == TD_OP_ATTENTION_BACKWARD;
    const td_operand *x = qkv(op), *mask = &x[3];
    const td_operand *views[8] = {&x[0],
                                  &x[1],
                                  &x[2],
                                  mask,
                                  bw ? &op->in[5] : &op->out[0],
                                  bw ? &op->in[6] : &op->out[1],
                                  bw ? &op->in[0] : NULL,
                                  bw ? &op->out[mode == 3 ? 0 : mode] : NULL};
    uint32_t *offs[8] = {&pc->q_off, &pc->k_off, &pc->v_off,  &pc->m_off,
                         &pc->o_off, &pc->l_off, &pc->do_off, &pc->g_off};
    td_status st = vk_bind_views(d, 8, views, bw ? 0x80 : 0xB0, b, offs);
    double p = op->p.attn.dropout_p, zs = 1.0 / (1.0 - p);
    uint64_t seed = op->p.attn.seed, off = op->p.attn.offset;
    pc->N = (uint32_t)(x[0].shape[0] * x[0].shape[1]), pc->n1 = (uint32_t)x[0].shape[1];
    pc->L = (uint32_t)x[0].shape[2], pc->S = (uint32_t)x[1].shape[2];
    pc->E = (uint32_t)x[0].shape[3], pc->Ev = (uint32_t)x[2].shape[3];
    for (int k = 0; k < 4; k++) pc->ms[k] = mask->buf ? (uint32_t)mask->strides[k] : 0;
    pc->scale_f = (float)op->p.attn.scale, pc->zs_f = (float)zs;
    pc->threshold = (uint32_t)ceil(p * 16777216.0);
    pc->flags = (op->p.attn.causal ? 1u : 0u) | (p > 0 ? 2u : 0u) | (mask->buf ? 4u : 0u);
    pc->seed_lo = (uint32_t)seed, pc->seed_hi = (uint32_t)(seed >> 32);
    pc->off_lo = (uint32_t)off, pc->off_hi = (uint32_t)(off >> 32);
    dbl_bits(op->p.attn.scale, &pc->scale_lo, &pc->scale_hi);
    dbl_bits(zs, &pc->zs_lo, &pc->zs_hi);
    return st;
}

/* The passes on tensor cores: the forward (shaders/attention_coopmat.comp), and the backward's dk-dv and dq
** dispatches (shaders/attention_coopmat_bwd.comp, MODE 0 and 1). */
enum { COOP_FWD, COOP_DKDV, COOP_DQ };

/* Whether op, bf16 attention, runs on the native bf16 kernels (*native): where vk_bf16_native says bf16 runs natively,
** switched by TRIDENT_VK_ATTN_BF16=native|scaled where that is set, else by the GEMM's TRIDENT_VK_BF16 (a forced
** native path the device lacks is an error); under TRIDENT_VK_ATTN=emulated only where that switch says native, which
** then takes the native kernels' emulated twins (any device, for the tests). */
static td_status attn_native(vk_dev *d, const td_op *op, bool *native) {
    const char *attn = getenv("TRIDENT_VK_ATTN"), *own = getenv("TRIDENT_VK_ATTN_BF16");
    const char *var = own && *own ? "TRIDENT_VK_ATTN_BF16" : "TRIDENT_VK_BF16", *bf = getenv(var);
    *native = false;
    if (qkv(op)[0].dtype != TD_BF16 || (attn && !strcmp(attn, "scalar"))) return TD_OK;
    if (attn && !strcmp(attn, "emulated")) return *native = bf && !strcmp(bf, "native"), TD_OK;
    return vk_bf16_native(d, var, "attention", native);
}

/* The tensor-core shader of pass, or -1 where op or d does not take it: TRIDENT_VK_ATTN=scalar; not f16 or
** bf16; a mask or dropout; E != Ev or not 64 or 128; and, for an op of that kind (*why then says which, for a
** forced TRIDENT_VK_ATTN=coopmat or emulated to report): an offset of a staged operand not a multiple of 8
** elements; no cooperative matrix (or the matmul's failed its self-test), or no variant of d's path in this
** build; a fragment shape that does not tile 16 rows x 32 keys; too little shared memory.
** TRIDENT_VK_ATTN=emulated takes the _emu variants instead (attention_coopmat.glsl: 16 x 16 x 16 fragments,
** subgroups of 32, any device with f16 arithmetic; for the tests). native (bf16, attn_native): the native kernels
** (or their _emu_native twins). spec gets WG, LM, LN, LK, the rows a workgroup owns (64 where they fit, else 32 or
** 16), D and, for the backward, MODE. */
static int coop_shader(vk_dev *d, const td_op *op, const vk_pc_attn *pc, int pass, bool native, uint32_t spec[7],
                       const char **why) {
    const char *env = getenv("TRIDENT_VK_ATTN");
    const td_operand *x = qkv(op);
    const vk_caps *c = &d->caps;
    bool emu = env && !strcmp(env, "emulated");
    static const uint32_t emu_shape[3] = {16, 16, 16};
    const uint32_t *cs = emu ? emu_shape : c->coopmat_shape, sg = emu ? 32 : c->subgroup_size;
    td_dtype dt = x[0].dtype;
    *why = NULL;
    if ((env && !strcmp(env, "scalar")) || (dt != TD_F16 && dt != TD_BF16) || x[3].buf || op->p.attn.dropout_p > 0 ||
        pc->E != pc->Ev || (pc->E != 64 && pc->E != 128))
        return -1;
    if (emu && !c->fp16_arith) return *why = "the device has no f16 arithmetic", -1;
    if (!emu && (c->coopmat == VK_COOPMAT_NONE || d->coopmat_state < 0))
        return *why = "no cooperative-matrix path on the device (or the matmul's self-test failed)", -1;
    if ((pc->q_off | pc->k_off | pc->v_off | pc->o_off | (pass == COOP_FWD ? 0 : pc->do_off)) % 8) /* 8 a load */
        return *why = "an operand's offset is not a multiple of 8 elements", -1;
    if (!cs[0] || 16 % cs[0] || 32 % cs[1] || 32 % cs[2] || sg % 16 || sg > 128)
        return *why = "the fragment shape or subgroup size does not tile 16 rows x 32 keys", -1;
    char name[48];
    snprintf(name, sizeof name, "attention_coopmat%s%s_%s", pass == COOP_FWD ? "" : "_bwd",
             emu                            ? (native ? "_emu_native" : "_emu")
             : native                       ? "_native"
             : c->coopmat == VK_COOPMAT_KHR ? "_khr"
                                            : "",
             dt == TD_BF16 ? "bf16" : "f16");
    int shader = vk_variant_id(name);
    if (shader < 0)
        return *why = "this build has no such variant (no glslang >= 13 for KHR, or a stale shaders/spirv/)", -1;
    for (uint32_t br = 64; br >= 16; br /= 2) {
        uint32_t wg = br / 16 * sg, e = pc->E;
        /* shared bytes of the shaders' headers for br owned rows */
        size_t fwd = 2 * 32 * (e + 8) * 2 + (size_t)br * (e + 4) * 4 + br * 36 * 4 + br * 40 * 2 + wg * 4 + br * 8;
        size_t bwd = 2 * (size_t)br * (e + 8) * 2 + 2 * 32 * (e + 8) * 2 + br * 36 * 4 + 2 * br * 40 * 2 + wg * 4 +
                     (br + 32) * 8;
        if ((pass == COOP_FWD ? fwd : bwd) > c->shared_mem || wg > c->max_wg_invocations) continue;
        uint32_t s[7] = {wg, cs[0], cs[1], cs[2], br, e, pass == COOP_DQ};
        memcpy(spec, s, sizeof s);
        return shader;
    }
    return *why = "too little shared memory or too few invocations per workgroup", -1;
}

/* TD_OK, or where TRIDENT_VK_ATTN=coopmat or emulated forces the tensor-core path and op cannot take it, an error
** saying why (not a silent fallback: the tests rely on the path they ask for). */
static td_status coop_forced(const vk_dev *d, const char *why) {
    const char *env = getenv("TRIDENT_VK_ATTN");
    if (!why || !env || (strcmp(env, "coopmat") && strcmp(env, "emulated"))) return TD_OK;
    return td_error_set(TD_ERR_UNSUPPORTED, "vulkan: %s: TRIDENT_VK_ATTN=%s: attention cannot take it: %s",
                        d->props.deviceName, env, why);
}

/* The heads' keys of the bf16 kernels (shaders/attention_bf16_amax.comp): word 4 n + k of keys (zeroed here) the
** largest finite |x| of head n of operand k, as bf16 bits, for the n_x operands x[k] (bound views, elements from
** off[k], len[k] a head): q, k, v and, for the backward, dout. */
static td_status head_keys(vk_dev *d, uint32_t N, int n_x, const vk_bind *x, const uint32_t *off, const uint32_t *len,
                           vk_bind keys) {
    td_status st = vk_cmd_fill(d, keys.buf, keys.offset, (VkDeviceSize)N * 16, 0);
    for (int k = 0; k < n_x && st == TD_OK; k++) {
        vk_pc_amax pc = {N, len[k], off[k], (uint32_t)k, 4};
        uint32_t spec[1] = {256}, chunks = (len[k] / 8 + 1023) / 1024;
        vk_bind b[2] = {x[k], keys};
        st = vk_dispatch(d, VK_SHADER_attention_bf16_amax, spec, 1, 2, b, &pc, sizeof pc,
                         chunks < 65535 ? chunks : 65535, N < 65535 ? N : 65535, 1);
    }
    return st;
}

static td_status attn_run(vk_dev *d, const td_op *op, uint32_t mode) {
    vk_bind b[8];
    vk_pc_attn pc = {0};
    td_status st = attn_bind(d, op, mode, b, &pc);
    if (st != TD_OK) return st;
    uint32_t cspec[7];
    const char *why = NULL;
    bool native = false;
    if (mode == 0 && (st = attn_native(d, op, &native)) != TD_OK) return st;
    int coop = mode == 0 ? coop_shader(d, op, &pc, COOP_FWD, native, cspec, &why) : -1;
    if ((st = coop_forced(d, why)) != TD_OK) return st;
    if (coop >= 0 && qkv(op)[0].dtype == TD_BF16 && !native) { /* the heads' keys at the mask's binding 3 */
        td_buffer *keys;
        if ((st = vk_alloc(d, (size_t)pc.N * 16, &keys)) != TD_OK) return st;
        const uint32_t off[3] = {pc.q_off, pc.k_off, pc.v_off}, len[3] = {pc.L * pc.E, pc.S * pc.E, pc.S * pc.E};
        st = head_keys(d, pc.N, 3, b, off, len, vk_bind_buffer(keys, true));
        b[3] = vk_bind_buffer(keys, false);
        if (st == TD_OK)
            st = vk_dispatch(d, coop, cspec, 6, 8, b, &pc, sizeof pc,
                             vk_groups((int64_t)pc.N * ((pc.L + cspec[4] - 1) / cspec[4]), 1), 1, 1);
        vk_free(keys);
        return st;
    }
    if (coop >= 0)
        return vk_dispatch(d, coop, cspec, 6, 8, b, &pc, sizeof pc,
                           vk_groups((int64_t)pc.N * ((pc.L + cspec[4] - 1) / cspec[4]), 1), 1, 1);
    td_dtype dt = qkv(op)[0].dtype;
    uint32_t dp = (uint32_t)((pc.E > pc.Ev ? pc.E : pc.Ev) + 7) / 8 * 8;
    dp = dp ? dp : 8;
    uint32_t wg = attn_wg(d, dp, td_dtype_size(dt == TD_F64 ? TD_F64 : TD_F32));
    uint32_t rows = mode == 1 || mode == 2 ? pc.S : pc.L, spec[3] = {wg, dp, mode};
    bool bmask = qkv(op)[3].buf && qkv(op)[3].dtype == TD_BOOL;
    int shader = VK_DT_SHADER(bmask ? VK_SHADER_attention_bmask_f32 : VK_SHADER_attention_f32, dt);
    return vk_dispatch(d, shader, spec, 3, 8, b, &pc, sizeof pc, vk_groups((int64_t)pc.N * ((rows + wg - 1) / wg), 1),
                       1, 1);
}

/* The backward on tensor cores: dk and dv (dv bound at 3, the mask's place), then dq. bf16 (scaled): lse's binding 5
** takes a scratch of the heads' keys of q, k, v, dout (4 N words) and then a copy of lse. *taken false where the op
** or device does not take it (nothing dispatched, TD_OK). */
static td_status coop_backward(vk_dev *d, const td_op *op, bool *taken) {
    vk_bind b[8];
    vk_pc_attn pc = {0};
    uint32_t spec[7];
    td_status st = attn_bind(d, op, 1, b, &pc); /* the gradient binding: dk */
    if (st == TD_OK) st = vk_bind_view(d, &op->out[2], true, &b[3], &pc.m_off);
    const char *why = NULL;
    bool native = false;
    if (st == TD_OK) st = attn_native(d, op, &native);
    int shader = st == TD_OK ? coop_shader(d, op, &pc, COOP_DKDV, native, spec, &why) : -1;
    if (st == TD_OK) st = coop_forced(d, why);
    *taken = st != TD_OK || shader >= 0; /* an error ends the op */
    if (st != TD_OK || shader < 0) return st;
    td_buffer *scratch = NULL;
    if (qkv(op)[0].dtype == TD_BF16 && !native) {
        VkDeviceSize kb = (VkDeviceSize)pc.N * 16, lb = (VkDeviceSize)pc.N * pc.L * 4;
        if ((st = vk_alloc(d, (size_t)(kb + lb), &scratch)) != TD_OK) return st;
        const vk_bind x[4] = {b[0], b[1], b[2], b[6]};
        const uint32_t off[4] = {pc.q_off, pc.k_off, pc.v_off, pc.do_off},
                       len[4] = {pc.L * pc.E, pc.S * pc.E, pc.S * pc.E, pc.L * pc.E};
        vk_bind s = vk_bind_buffer(scratch, true);
        st = head_keys(d, pc.N, 4, x, off, len, s);
        if (st == TD_OK)
            st = vk_cmd_copy(d, b[5].buf, b[5].offset + (VkDeviceSize)pc.l_off * 4, s.buf, s.offset + kb, lb);
    }
    if (scratch) b[5] = vk_bind_buffer(scratch, false), pc.l_off = pc.N * 4;
    if (st == TD_OK)
        st = vk_dispatch(d, shader, spec, 7, 8, b, &pc, sizeof pc,
                         vk_groups((int64_t)pc.N * ((pc.S + spec[4] - 1) / spec[4]), 1), 1, 1);
    if (st == TD_OK) st = attn_bind(d, op, 3, b, &pc); /* dq */
    if (scratch) b[5] = vk_bind_buffer(scratch, false), pc.l_off = pc.N * 4;
    spec[6] = 1;
    if (st == TD_OK)
        st = vk_dispatch(d, shader, spec, 7, 8, b, &pc, sizeof pc,
                         vk_groups((int64_t)pc.N * ((pc.L + spec[4] - 1) / spec[4]), 1), 1, 1);
    if (scratch) vk_free(scratch);
    return st;
}

/* in = (q, k, v, mask?), out = (out, lse) */
td_status vk_op_ATTENTION(vk_dev *d, const td_op *op) { return attn_run(d, op, 0); }

/* in = (dout, q, k, v, mask?, out, lse), out = (dq, dk, dv) */
td_status vk_op_ATTENTION_BACKWARD(vk_dev *d, const td_op *op) {
    bool taken;
    td_status st = coop_backward(d, op, &taken);
    if (taken) return st;
    for (uint32_t mode = 1; mode <= 3 && st == TD_OK; mode++) st = attn_run(d, op, mode);
    return st;
}
