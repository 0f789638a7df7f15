#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION_BACKWARD for f16 and bf16 on tensor cores (FlashAttention-2's backward), the twin of
// attention_coopmat.comp (read its header and attention_coopmat.glsl first). No mask, no dropout:
//   q, k, v, out, dout [N,*,D] contiguous (A_DT f16 or bf16), lse [N,L] float (the forward's),
//   p_ij = exp(scale q_i.k_j - lse_i) (0 where causal and j > i, or lse_i = -inf),  D_i = dout_i.out_i,
//   ds_ij = scale p_ij (dout_i.v_j - D_i),
//   dv_j = sum_i p_ij dout_i,  dk_j = sum_i ds_ij q_i,  dq_i = sum_j ds_ij k_j.
// Two dispatches, each output element with one writer (no atomics):
//   MODE 0 (dk, dv): a workgroup owns BR keys (16 per subgroup: K, V rows staged once) and walks the queries
//     BC = 32 at a time (causal: from its first key's block on), staging Q and dO rows, lse_i and D_i; then
//     S^T = K Q^T -> P^T (f16), dv += P^T dO, dP^T = V dO^T -> dS^T (f16), dk += dS^T Q.
//   MODE 1 (dq): a workgroup owns BR queries (Q, dO rows, lse_i and D_i staged once) and walks the keys BC at a
//     time (causal: up to its last query), staging K and V rows; S = Q K^T -> P, dP = dO V^T -> dS, dq += dS K.
// The GEMMs take f16 fragments of the device's LM x LN x LK shape with f32 accumulators; S and dP pass through
// shared memory (floats) to the invocations that exponentiate them (P is kept as f16, as the forward's P V
// does). The accumulators dk, dv (dq) stay in registers and leave through S's buffer 32 columns at a time,
// rounded once. D_i is recomputed from dout and out where the query rows are staged.
// bf16: K, V, Q and dO staged with their head's power of two (attention_coopmat.glsl: exact to each head's
// largest for any finite range; the heads' keys from attention_bf16_amax.comp at the front of lse's binding, which
// the host then fills with a copy of lse from element l_off on); S and dP unshifted before the exponential; dv
// accumulated in dO's staged units and unshifted once as it is written. dS adapts per step: each subgroup computes
// its own 16 rows of dS into registers (NDS an invocation), takes their largest |dS| (SG_MAX: a subgroup max; the
// emulated variants, whose subgroups are virtual, through red and one barrier) and stages them with the power of
// two that puts it into [2^14, 2^15); that step's dk (dq) products are unshifted as they are added. No pass or
// barrier more than f16's (emulated: one barrier). f16 is unchanged. bf16 with -DBF16_BITS=1 (the native kernel,
// retyped to bf16; attention_coopmat.glsl): the rows staged as the bf16 bits they are, P and dS rounded to bf16 bits
// (TO_H) and P read back as bits (H2F), lse's binding lse itself, no shifts. Shared memory:
//   2 BR (D+8) h + 2 BC (D+8) h + BR (BC+4) f + 2 BR (BC+8) h + WG f + 2 (BR+BC) f:
//   47.3 KiB for D 64, BR 64 (WG 128); 44.3 KiB for D 128, BR 32; 30.8 KiB for D 128, BR 16 (WG 32).
// Bindings: 0 q, 1 k, 2 v, 3 dv (MODE 0; m_off), 4 out, 5 lse (bf16: after the keys), 6 dout, 7 dk (MODE 0) or dq
// (MODE 1; g_off).
#include "attention_coopmat.glsl"

layout(constant_id = 0) const uint WG = 128; // BR / 16 subgroups
layout(constant_id = 1) const uint LM = 16;
layout(constant_id = 2) const uint LN = 16;
layout(constant_id = 3) const uint LK = 16;
layout(constant_id = 4) const uint BR = 64; // rows a workgroup owns: keys (MODE 0) or queries (MODE 1); 16, 32, 64
layout(constant_id = 5) const uint D = 64;  // head dim (E = Ev), 64 or 128
layout(constant_id = 6) const uint MODE = 0;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer BQ_ { uvec4 q4[]; }; // read 8 elements a load (offsets multiples of 8)
layout(binding = 1) readonly buffer BK_ { uvec4 k4[]; };
layout(binding = 2) readonly buffer BV_ { uvec4 v4[]; };
layout(binding = 3) writeonly buffer BDV_ { HT dv[]; };
layout(binding = 4) readonly buffer BO_ { uvec4 o4[]; };
layout(binding = 5) readonly buffer BL_ { uint lse_u[]; }; // floats (bf16: after the heads' keys 4 n + 0 q .. 3 dout)
layout(binding = 6) readonly buffer BD_ { uvec4 dout4[]; };
layout(binding = 7) writeonly buffer BG_ { HT grad[]; };

const uint BC = 32u;       // rows per step on the other side: queries (MODE 0) or keys (MODE 1)
const uint LDH = D + 8u;   // staged rows, halfs: 16-byte multiples
const uint LDS = BC + 4u;  // S / dP rows, floats
const uint LDP = BC + 8u;  // P / dS rows, halfs
const uint FM = 16u / LM, FD = D / LK, FC = BC / LN, FO = D / LN, FW = BC / LN;
const uint DS0 = BR * LDP; // dS's offset in ps
shared float16_t own0[BR * LDH]; // MODE 0: K rows; 1: Q rows
shared float16_t own1[BR * LDH]; // MODE 0: V rows; 1: dO rows
shared float16_t oth0[BC * LDH]; // MODE 0: Q rows; 1: K rows
shared float16_t oth1[BC * LDH]; // MODE 0: dO rows; 1: V rows
shared float ss[BR * LDS];       // S, then dP (rows: the owned rows), then the outputs
shared float16_t ps[2u * BR * LDP]; // P, then dS at DS0 (transposed in MODE 0)
shared float red[WG];
shared float rl[BR + BC], rd[BR + BC]; // lse_i and D_i of the staged query rows (BR or BC of them)

#ifdef BF16_SCALED
// a subgroup's SGN invocations (the emulated variants': 32, virtual) and this one's place SG_LANE among them;
// SG_MAX(m): the largest m of the subgroup (emulated: through red, a barrier: every invocation must call it)
#if defined(COOPMAT_EMU)
const uint SGN = 32u;
#define SG_LANE (gl_LocalInvocationID.x % 32u)
uint SG_MAX(uint m) {
    red[gl_LocalInvocationID.x] = uintBitsToFloat(m); // m <= inf's bits (a flushed subnormal: the same shift)
    barrier();
    uint r = 0u, s0 = gl_LocalInvocationID.x / 32u * 32u;
    for (uint i = 0u; i < 32u; i++) r = max(r, floatBitsToUint(red[s0 + i]));
    return r;
}
#else
const uint SGN = WG / (BR / 16u);
#define SG_LANE gl_SubgroupInvocationID
#define SG_MAX  subgroupMax
#endif
const uint NDS = 16u * BC / SGN; // dS elements per invocation
#endif

// rl, rd of query rows i0 .. i0 + nq of head n: lse_i (-inf past L) and D_i = dout_i.out_i
void row_stats(uint n, uint i0, uint nq) {
    uint t = gl_LocalInvocationID.x, pr = WG / nq, r = t / pr, part = t % pr, i = i0 + r;
    float acc = 0.0;
    if (i < pc.L) // 8 elements of dout and out a load
        for (uint g = part; g < D / 8u; g += pr) {
            uvec4 a = dout4[(pc.do_off + (n * pc.L + i) * D) / 8u + g], b = o4[(pc.o_off + (n * pc.L + i) * D) / 8u + g];
            [[unroll]] for (uint h = 0u; h < 4u; h++) acc += dot(UNPACK2F(a[h]), UNPACK2F(b[h]));
        }
    red[t] = acc;
    barrier();
    if (part == 0u) {
        float s = 0.0;
        for (uint p = 0u; p < pr; p++) s += red[r * pr + p];
        rd[r] = s;
        rl[r] = i < pc.L ? uintBitsToFloat(lse_u[pc.l_off + n * pc.L + i]) : neg_inf();
    }
}

#ifdef BF16_SCALED
#define OUT_VAL(x, t) unshift(x, t)
#else
#define OUT_VAL(x, t) (x)
#endif
// the rows' accumulators acc[FM][FO] (rows row0.. of the workgroup's, row r0 + row of buf from element off) to
// buf, through ss BC columns at a time, times 2^-t (bf16's staged units; t 0 for f16); rows from `rows` on are not
// written
#define WRITE_OUT(acc, buf, off, r0, rows, t)                                                          \
    [[unroll]] for (uint c0 = 0u; c0 < D; c0 += BC) {                                                  \
        barrier();                                                                                     \
        [[unroll]] for (uint f = 0u; f < FM; f++)                                                      \
            [[unroll]] for (uint e = 0u; e < FW; e++)                                                  \
                CM_STORE(acc[f][c0 / LN + e], ss, (row0 + f * LM) * LDS + e * LN, LDS);                \
        barrier();                                                                                     \
        for (uint x = gl_LocalInvocationID.x; x < BR * BC; x += WG) {                                  \
            uint r = x / BC, c = x % BC;                                                               \
            if ((r0) + r < (rows))                                                                     \
                buf[(off) + (n * (rows) + (r0) + r) * D + c0 + c] = FROM_F(OUT_VAL(ss[r * LDS + c], t)); \
        }                                                                                              \
    }

void main() {
    uint t = gl_LocalInvocationID.x, row0 = 16u * SUBGROUP_ID;
    bool causal = (pc.flags & 1u) != 0u;
    uint rows = MODE == 0u ? pc.S : pc.L, nb = (rows + BR - 1u) / BR;
    for (uint task = gl_WorkGroupID.x; task < pc.N * nb; task += gl_NumWorkGroups.x) {
        uint n = task / nb, r0 = (task % nb) * BR;
        barrier(); // the previous task's tiles and outputs are consumed
#ifdef BF16_SCALED
        // the shifts of q, k, v, dout; of own0, own1, oth0, oth1 (MODE 0: k, v, q, dout; 1: q, dout, k, v); of dS
        int shx[4];
        [[unroll]] for (uint o = 0u; o < 4u; o++) shx[o] = head_shift(lse_u[4u * n + o]);
        int sho0 = shx[MODE == 0u ? 1 : 0], sho1 = shx[MODE == 0u ? 2 : 3];
        int sht0 = shx[MODE == 0u ? 0 : 1], sht1 = shx[MODE == 0u ? 3 : 2];
        float ft0 = exp2i(sht0), ft1 = exp2i(sht1);
        if (MODE == 0u) {
            STAGE_SHIFT(own0, 0u, k4, pc.k_off + n * pc.S * D, r0, pc.S, BR, exp2i(sho0));
            STAGE_SHIFT(own1, 0u, v4, pc.v_off + n * pc.S * D, r0, pc.S, BR, exp2i(sho1));
        } else {
            STAGE_SHIFT(own0, 0u, q4, pc.q_off + n * pc.L * D, r0, pc.L, BR, exp2i(sho0));
            STAGE_SHIFT(own1, 0u, dout4, pc.do_off + n * pc.L * D, r0, pc.L, BR, exp2i(sho1));
            row_stats(n, r0, BR);
        }
#else
        if (MODE == 0u) {
            STAGE8(own0, 0u, k4, pc.k_off + n * pc.S * D, r0, pc.S, BR);
            STAGE8(own1, 0u, v4, pc.v_off + n * pc.S * D, r0, pc.S, BR);
        } else {
            STAGE8(own0, 0u, q4, pc.q_off + n * pc.L * D, r0, pc.L, BR);
            STAGE8(own1, 0u, dout4, pc.do_off + n * pc.L * D, r0, pc.L, BR);
            row_stats(n, r0, BR);
        }
#endif
        ACCM ga[FM][FO]; // MODE 0: dk; MODE 1: dq
        ACCM gb[FM][FO]; // MODE 0: dv (one declarator each: glslang 13 drops a coopmat's use from the second)
        [[unroll]] for (uint f = 0u; f < FM; f++)
            [[unroll]] for (uint e = 0u; e < FO; e++) {
                ga[f][e] = CM_ZERO;
                gb[f][e] = CM_ZERO;
            }
        uint c_begin = MODE == 0u ? (causal ? r0 / BC * BC : 0u) : 0u;
        uint c_end = MODE == 0u ? pc.L : causal ? min(pc.S, r0 + BR) : pc.S;
        for (uint c0 = c_begin; c0 < c_end; c0 += BC) {
            barrier(); // the previous step's tiles are consumed
#ifdef BF16_SCALED
            if (MODE == 0u) {
                STAGE_SHIFT(oth0, 0u, q4, pc.q_off + n * pc.L * D, c0, pc.L, BC, ft0);
                STAGE_SHIFT(oth1, 0u, dout4, pc.do_off + n * pc.L * D, c0, pc.L, BC, ft1);
                row_stats(n, c0, BC);
            } else {
                STAGE_SHIFT(oth0, 0u, k4, pc.k_off + n * pc.S * D, c0, pc.S, BC, ft0);
                STAGE_SHIFT(oth1, 0u, v4, pc.v_off + n * pc.S * D, c0, pc.S, BC, ft1);
            }
#else
            if (MODE == 0u) {
                STAGE8(oth0, 0u, q4, pc.q_off + n * pc.L * D, c0, pc.L, BC);
                STAGE8(oth1, 0u, dout4, pc.do_off + n * pc.L * D, c0, pc.L, BC);
                row_stats(n, c0, BC);
            } else {
                STAGE8(oth0, 0u, k4, pc.k_off + n * pc.S * D, c0, pc.S, BC);
                STAGE8(oth1, 0u, v4, pc.v_off + n * pc.S * D, c0, pc.S, BC);
            }
#endif
            barrier();
            // S (S^T in MODE 0) = own0 oth0^T: this subgroup's 16 rows x BC
            [[unroll]] for (uint f = 0u; f < FM; f++)
                [[unroll]] for (uint j = 0u; j < FC; j++) {
                    ACCM acc = CM_ZERO;
                    [[unroll]] for (uint d = 0u; d < FD; d++) {
                        HALF a;
                        HALFB b;
                        CM_LOAD(a, own0, (row0 + f * LM) * LDH + d * LK, LDH);
                        CM_LOAD_T(b, oth0, (j * LN) * LDH + d * LK, LDH);
                        acc = CM_MULADD(a, b, acc);
                    }
                    CM_STORE(acc, ss, (row0 + f * LM) * LDS + j * LN, LDS);
                }
            barrier();
            // P: the owned row r against the other side's c (query i, key j)
            for (uint x = t; x < BR * BC; x += WG) {
                uint r = x / BC, c = x % BC;
                uint i = MODE == 0u ? c0 + c : r0 + r, j = MODE == 0u ? r0 + r : c0 + c;
                float l = rl[MODE == 0u ? c : r], p = 0.0;
                if (i < pc.L && j < pc.S && !(causal && j > i) && l != neg_inf())
#ifdef BF16_SCALED
                    p = exp(unshift(ss[r * LDS + c], sho0 + sht0) * pc.scale_f - l);
#else
                    p = exp(ss[r * LDS + c] * pc.scale_f - l);
#endif
                ps[r * LDP + c] = TO_H(p);
            }
            barrier();
            if (MODE == 0u) // dv += P^T dO (bf16: in dO's staged units)
                [[unroll]] for (uint f = 0u; f < FM; f++)
                    [[unroll]] for (uint e = 0u; e < FO; e++)
                        [[unroll]] for (uint c = 0u; c < BC; c += LK) {
                            HALF a;
                            HALFB b;
                            CM_LOAD(a, ps, (row0 + f * LM) * LDP + c, LDP);
                            CM_LOAD(b, oth1, c * LDH + e * LN, LDH);
                            gb[f][e] = CM_MULADD(a, b, gb[f][e]);
                        }
            // dP (dP^T in MODE 0) = own1 oth1^T
            [[unroll]] for (uint f = 0u; f < FM; f++)
                [[unroll]] for (uint j = 0u; j < FC; j++) {
                    ACCM acc = CM_ZERO;
                    [[unroll]] for (uint d = 0u; d < FD; d++) {
                        HALF a;
                        HALFB b;
                        CM_LOAD(a, own1, (row0 + f * LM) * LDH + d * LK, LDH);
                        CM_LOAD_T(b, oth1, (j * LN) * LDH + d * LK, LDH);
                        acc = CM_MULADD(a, b, acc);
                    }
                    CM_STORE(acc, ss, (row0 + f * LM) * LDS + j * LN, LDS);
                }
            barrier();
            // dS = scale P (dP - D_i)
#ifdef BF16_SCALED
            // dP unshifted; each subgroup's own 16 rows x BC, in registers, staged with the power of two shs that
            // puts their largest |dS| into [2^14, 2^15) (SG_MAX: the largest over the subgroup)
            float dsv[NDS];
            uint m = 0u;
            [[unroll]] for (uint k = 0u; k < NDS; k++) {
                uint x = SG_LANE + k * SGN, r = row0 + x / BC, c = x % BC;
                float p = H2F(ps[r * LDP + c]);
                dsv[k] = p * (unshift(ss[r * LDS + c], sho1 + sht1) - rd[MODE == 0u ? c : r]) * pc.scale_f;
                m = max(m, min(floatBitsToUint(dsv[k]) & 0x7FFFFFFFu, 0x7F800000u)); // NaN counts as inf
            }
            int shs = exp_shift(int(SG_MAX(m) >> 23u));
            [[unroll]] for (uint k = 0u; k < NDS; k++) {
                uint x = SG_LANE + k * SGN, r = row0 + x / BC, c = x % BC;
                ps[DS0 + r * LDP + c] = float16_t(dsv[k] * exp2i(shs));
            }
#else
            for (uint x = t; x < BR * BC; x += WG) {
                uint r = x / BC, c = x % BC;
                float p = H2F(ps[r * LDP + c]);
                ps[DS0 + r * LDP + c] = TO_H(p * (ss[r * LDS + c] - rd[MODE == 0u ? c : r]) * pc.scale_f);
            }
#endif
            barrier();
            // dk += dS^T Q (MODE 0) or dq += dS K (MODE 1): the other side's rows, row-major, as B (bf16: the step's
            // products in dS's and the rows' staged units, unshifted as they are added)
            [[unroll]] for (uint f = 0u; f < FM; f++)
                [[unroll]] for (uint e = 0u; e < FO; e++) {
#ifdef BF16_SCALED
                    ACCM acc = CM_ZERO;
#define DG_ACC acc
#else
#define DG_ACC ga[f][e]
#endif
                    [[unroll]] for (uint c = 0u; c < BC; c += LK) {
                        HALF a;
                        HALFB b;
                        CM_LOAD(a, ps, DS0 + (row0 + f * LM) * LDP + c, LDP);
                        CM_LOAD(b, oth0, c * LDH + e * LN, LDH);
                        DG_ACC = CM_MULADD(a, b, DG_ACC);
                    }
#ifdef BF16_SCALED
                    ga[f][e] = CM_ADD_SHIFTED(ga[f][e], acc, shs + sht0);
#endif
                }
        }
#ifdef BF16_SCALED
        int tg = 0, tv = sht1; // dk (dq) unshifted step by step
#else
        int tg = 0, tv = 0;
#endif
        if (MODE == 0u) {
            WRITE_OUT(ga, grad, pc.g_off, r0, pc.S, tg);
            WRITE_OUT(gb, dv, pc.m_off, r0, pc.S, tv);
        } else {
            WRITE_OUT(ga, grad, pc.g_off, r0, pc.L, tg);
        }
    }
}
