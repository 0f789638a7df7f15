#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION forward for f16 and bf16 on tensor cores (FlashAttention-2) through GL_NV_cooperative_matrix, or with
// -DCOOPMAT_KHR=1 through GL_KHR_cooperative_matrix (glslang >= 13; same kernel). No mask, no dropout:
//   q [N,L,D], k [N,S,D], v [N,S,D], out [N,L,D] contiguous f16 or bf16 (A_DT; bf16 staged as f16, see
//   attention_coopmat.glsl), lse [N,L] float,
//   s_ij = scale q_i.k_j (-inf where causal and j > i),  lse_i = log sum_j exp(s_ij),
//   out_i = sum_j exp(s_ij - lse_i) v_j.  A row without keys gives out 0 and lse -inf.
// A workgroup owns BQ = 16 x subgroups query rows of one (batch, head) (constant 4), a subgroup 16 of
// them, as 16/LM cooperative matrices of the device's LM x LN x LK shape (constants 1..3) along the rows;
// its Q fragments stay in registers. Keys go BKV = 32 at a time, K and V rows staged in shared memory:
//   S = Q K^T (f32 accumulators, K loaded column-major as the B operand) is stored to shared memory;
//   the workgroup's WG / BQ invocations per row take the row max m and sum l online
//   (m' = max(m, max_j s), l' = l exp(m - m') + sum_j exp(s - m')), write P = exp(s - m') as f16 and
//   rescale the row of the output accumulator O (f32, shared memory) by exp(m - m');
//   O += P V (cooperative matrices loaded from and stored back to O's rows).
// At the end out_i = O_i / l_i and lse_i = m_i + log l_i.
// bf16: Q, K and V staged with their head's power of two (keys at binding 3 from attention_bf16_amax.comp;
// attention_coopmat.glsl: exact to each head's largest for any finite range), S unshifted before the softmax
// scale, O accumulated in V's staged units and unshifted once at the end; f16 is unchanged.
// bf16 with -DBF16_BITS=1 (the native kernel, retyped to bf16; attention_coopmat.glsl): Q, K, V staged as the bf16
// bits they are, P rounded to bf16 bits (TO_H), no keys (binding 3 unused) and no shifts.
// Shared memory (halfs, floats):
//   2 BKV (D+8) h + BQ (D+4) f + BQ (BKV+4) f + BQ (BKV+8) h: 41.5 KiB for D 128, BQ 32; 40.9 KiB for D 64, BQ 64.
// Push block (attention_coopmat.glsl) and bindings: shaders/attention.comp's (bf16: the keys at the mask's 3).
#include "attention_coopmat.glsl"

layout(constant_id = 0) const uint WG = 128; // BQ / 16 subgroups
layout(constant_id = 1) const uint LM = 16;
layout(constant_id = 2) const uint LN = 16;
layout(constant_id = 3) const uint LK = 16;
layout(constant_id = 4) const uint BQ = 64; // query rows per workgroup, 16 per subgroup: 16, 32 or 64
layout(constant_id = 5) const uint D = 64;  // head dim (E = Ev), 64 or 128
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer BQ_ { uvec4 q4[]; }; // read 8 elements a load (offsets multiples of 8)
layout(binding = 1) readonly buffer BK_ { uvec4 k4[]; };
layout(binding = 2) readonly buffer BV_ { uvec4 v4[]; };
#ifdef BF16_SCALED
layout(binding = 3) readonly buffer BKEY_ { uint keys[]; }; // the heads' keys: 4 n + 0 q, 1 k, 2 v
#endif
layout(binding = 4) writeonly buffer BO_ { HT o[]; };
layout(binding = 5) writeonly buffer BL_ { float lse[]; };

const uint BKV = 32u;
const uint LDH = D + 8u;   // K, V (and at the start Q) rows, halfs: 16-byte multiples
const uint LDO = D + 4u;   // O rows, floats
const uint LDS = BKV + 4u; // S rows, floats
const uint LDP = BKV + 8u; // P rows, halfs
const uint FM = 16u / LM, FD = D / LK, FS = BKV / LN, FO = D / LN, PR = WG / BQ;
shared float16_t kv[2u * BKV * LDH]; // K tile, then V tile (at BKV LDH); first the Q tile (BQ <= 2 BKV rows)
shared float os[BQ * LDO];
shared float ss[BQ * LDS];
shared float16_t ps[BQ * LDP];
shared float red[WG];
shared float ms[BQ], ls[BQ];

void main() {
    uint t = gl_LocalInvocationID.x, sg = SUBGROUP_ID, row0 = 16u * sg;
    uint r = t / PR, part = t % PR; // the softmax's row and part of it
    uint nq = (pc.L + BQ - 1u) / BQ;
    bool causal = (pc.flags & 1u) != 0u;
    for (uint task = gl_WorkGroupID.x; task < pc.N * nq; task += gl_NumWorkGroups.x) {
        uint n = task / nq, q0 = (task % nq) * BQ;
        barrier(); // the previous task's output is read
        for (uint e = t; e < BQ * LDO; e += WG) os[e] = 0.0;
        if (t < BQ) ms[t] = neg_inf(), ls[t] = 0.0;
#ifdef BF16_SCALED
        int shq = head_shift(keys[4u * n]), shk = head_shift(keys[4u * n + 1u]), shv = head_shift(keys[4u * n + 2u]);
        float fk = exp2i(shk), fv = exp2i(shv);
        STAGE_SHIFT(kv, 0u, q4, pc.q_off + n * pc.L * D, q0, pc.L, BQ, exp2i(shq));
        barrier();
#else
        STAGE8(kv, 0u, q4, pc.q_off + n * pc.L * D, q0, pc.L, BQ);
        barrier();
#endif
        HALF qf[FM][FD];
        [[unroll]] for (uint f = 0u; f < FM; f++)
            [[unroll]] for (uint d = 0u; d < FD; d++) CM_LOAD(qf[f][d], kv, (row0 + f * LM) * LDH + d * LK, LDH);
        uint jend = causal ? min(pc.S, q0 + BQ) : pc.S;
        for (uint j0 = 0u; j0 < jend; j0 += BKV) {
            barrier(); // Q fragments, the previous V tile and P are consumed
#ifdef BF16_SCALED
            STAGE_SHIFT(kv, 0u, k4, pc.k_off + n * pc.S * D, j0, pc.S, BKV, fk);
            STAGE_SHIFT(kv, BKV * LDH, v4, pc.v_off + n * pc.S * D, j0, pc.S, BKV, fv);
#else
            STAGE8(kv, 0u, k4, pc.k_off + n * pc.S * D, j0, pc.S, BKV);
            STAGE8(kv, BKV * LDH, v4, pc.v_off + n * pc.S * D, j0, pc.S, BKV);
#endif
            barrier();
            // S = Q K^T for this subgroup's 16 rows
            [[unroll]] for (uint f = 0u; f < FM; f++)
                [[unroll]] for (uint j = 0u; j < FS; j++) {
                    ACCM acc = CM_ZERO;
                    [[unroll]] for (uint d = 0u; d < FD; d++) {
                        HALFB kf;
                        CM_LOAD_T(kf, kv, (j * LN) * LDH + d * LK, LDH);
                        acc = CM_MULADD(qf[f][d], kf, acc);
                    }
                    CM_STORE(acc, ss, (row0 + f * LM) * LDS + j * LN, LDS);
                }
            barrier();
            // online softmax: invocation t takes columns part BKV/PR.. of row r
            uint i = q0 + r, c0 = part * (BKV / PR);
            float mx = neg_inf();
            for (uint c = c0; c < c0 + BKV / PR; c++) {
                uint j = j0 + c;
#ifdef BF16_SCALED
                float s = j >= pc.S || (causal && j > i) ? neg_inf() : unshift(ss[r * LDS + c], shq + shk) * pc.scale_f;
#else
                float s = j >= pc.S || (causal && j > i) ? neg_inf() : ss[r * LDS + c] * pc.scale_f;
#endif
                ss[r * LDS + c] = s;
                mx = max(mx, s);
            }
            red[t] = mx;
            barrier();
            float mold = ms[r], mnew = mold;
            for (uint p = 0u; p < PR; p++) mnew = max(mnew, red[r * PR + p]);
            float alpha = mnew == neg_inf() ? 1.0 : exp(mold - mnew), sum = 0.0;
            for (uint c = c0; c < c0 + BKV / PR; c++) {
                float s = ss[r * LDS + c], p = s == neg_inf() ? 0.0 : exp(s - mnew);
                ps[r * LDP + c] = TO_H(p);
                sum += p;
            }
            for (uint c = part * (D / PR); c < (part + 1u) * (D / PR); c++) os[r * LDO + c] *= alpha;
            barrier(); // red read; P and the rescaled O written
            red[t] = sum;
            barrier();
            if (part == 0u) {
                float l = 0.0;
                for (uint p = 0u; p < PR; p++) l += red[r * PR + p];
                ls[r] = ls[r] * alpha + l, ms[r] = mnew;
            }
            // O += P V for this subgroup's rows
            [[unroll]] for (uint f = 0u; f < FM; f++)
                [[unroll]] for (uint e = 0u; e < FO; e++) {
                    ACCM acc; // bf16: in V's staged units
                    CM_LOAD(acc, os, (row0 + f * LM) * LDO + e * LN, LDO);
                    [[unroll]] for (uint c = 0u; c < BKV; c += LK) {
                        HALF pf;
                        HALFB vf;
                        CM_LOAD(pf, ps, (row0 + f * LM) * LDP + c, LDP);
                        CM_LOAD(vf, kv, BKV * LDH + c * LDH + e * LN, LDH);
                        acc = CM_MULADD(pf, vf, acc);
                    }
                    CM_STORE(acc, os, (row0 + f * LM) * LDO + e * LN, LDO);
                }
        }
        barrier();
        uint i = q0 + r;
        if (i < pc.L) {
            float l = ls[r], inv = l > 0.0 ? 1.0 / l : 0.0;
            for (uint c = part * (D / PR); c < (part + 1u) * (D / PR); c++)
#ifdef BF16_SCALED
                o[pc.o_off + (n * pc.L + i) * D + c] = FROM_F(unshift(os[r * LDO + c] * inv, shv));
#else
                o[pc.o_off + (n * pc.L + i) * D + c] = FROM_F(os[r * LDO + c] * inv);
#endif
            if (part == 0u) lse[pc.l_off + n * pc.L + i] = l > 0.0 ? ms[r] + log(l) : neg_inf();
        }
    }
}
