#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION and ATTENTION_BACKWARD, tiled in shared memory with an online softmax
// (FlashAttention-2; the math and the shapes are in src/backend_cpu/cpu_attention.c):
//   q [N,L,E], k [N,S,E], v [N,S,Ev], out [N,L,Ev] contiguous, lse [N,L] (float; double for f64),
//   mask [N0,N1,L,S] any strides: A_DT (added), or bool in the _bmask variants (-DMASK_BOOL; false = -inf).
//   s_ij = scale q_i.k_j + m_ij (-inf where causal and j > i),  p_ij = exp(s_ij - lse_i),
//   z_ij = keep_ij / (1 - p) (Philox element (n L + i) S + j, td_dropout's rule),  out_i = sum_j p_ij z_ij v_j.
// MODE 0 forward: an invocation per query row i, the workgroup's keys staged WG rows at a time in shared
//   memory; per key, the running max m, sum l and acc = sum exp(s - m) z v rescale by exp(m_old - m_new)
//   when the max grows. A row without keys gives out 0 and lse -inf.
// MODE 1 dk (2 dv): an invocation per key j, query rows staged (q, dout, lse and D_i = dout_i.out_i):
//   dk_j = scale sum_i p_ij (z_ij dout_i.v_j - D_i) q_i,  dv_j = sum_i p_ij z_ij dout_i.
// MODE 3 dq: an invocation per query i, keys staged: dq_i = scale sum_j p_ij (z_ij dout_i.v_j - D_i) k_j.
// (dk and dv take a dispatch each: some devices allow 8 bindings per dispatch.)
// No subgroup operation: any subgroup size, and TRIDENT_VULKAN_DISABLE=subgroup, run this one shader.
// Bindings: 0 q, 1 k, 2 v, 3 mask, 4 out, 5 lse, 6 dout, 7 the mode's gradient (dummies when unused).
// C mirror: vk_pc_attn (src/backend_vulkan/vk_ops_attention.c). Variants attention[_bmask]_<float dt>.
#include "philox.glsl"
#include "types.glsl"

layout(constant_id = 0) const uint WG = 32;  // invocations = rows per staged tile
layout(constant_id = 1) const uint DP = 128; // max(E, Ev) rounded up to 8: the row length of the tiles
layout(constant_id = 2) const uint MODE = 0;
layout(local_size_x_id = 0) in;

#if A_DT == DT_F64
#include "math64.glsl"
#define ACC    double
#define LSE_T  double
#define EXP(x) d_exp(x)
#define LOG(x) d_log(x)
#else
#define ACC    float
#define LSE_T  float
#define EXP(x) exp(x)
#define LOG(x) log(x)
#endif

layout(push_constant) uniform PC {
    uint N, n1, L, S, E, Ev;
    uint q_off, k_off, v_off, m_off, o_off, l_off, do_off, g_off;
    uint ms0, ms1, ms2, ms3; // mask strides over [N0, N1, L, S]
    float scale_f, zs_f;     // scale and 1/(1-p), rounded to float
    uint threshold, flags;   // keep when (w >> 8) >= threshold; flags: 1 causal, 2 dropout, 4 mask
    uint seed_lo, seed_hi, off_lo, off_hi;
    uint scale_lo, scale_hi, zs_lo, zs_hi; // the same two as doubles (the f64 variant)
} pc;

layout(binding = 0) readonly buffer BQ { ST(A_DT) q[]; };
layout(binding = 1) readonly buffer BK { ST(A_DT) k[]; };
layout(binding = 2) readonly buffer BV { ST(A_DT) v[]; };
#ifdef MASK_BOOL
layout(binding = 3) readonly buffer BM { uint8_t mask[]; };
#else
layout(binding = 3) readonly buffer BM { ST(A_DT) mask[]; };
#endif
layout(binding = 4) buffer BO { ST(A_DT) o[]; };
layout(binding = 5) buffer BL { LSE_T lse[]; };
layout(binding = 6) readonly buffer BD { ST(A_DT) dout[]; };
layout(binding = 7) writeonly buffer BG { ST(A_DT) grad[]; };

shared ACC t0[WG * DP]; // staged rows: k (modes 0, 3) or q (modes 1, 2)
shared ACC t1[WG * DP]; // v (modes 0, 3) or dout (modes 1, 2)
shared ACC tl[WG];      // modes 1, 2: lse_i
shared ACC td[WG];      // modes 1, 2: D_i

ACC neg_inf() { return ACC(uintBitsToFloat(0xFF800000u)); }

#if A_DT == DT_F64
ACC scale_v() { return packDouble2x32(uvec2(pc.scale_lo, pc.scale_hi)); }
ACC zs_v() { return packDouble2x32(uvec2(pc.zs_lo, pc.zs_hi)); }
#else
ACC scale_v() { return pc.scale_f; }
ACC zs_v() { return pc.zs_f; }
#endif

// The additive mask term of (n, i, j): 0, -inf or the float mask's value.
ACC mask_at(uint n, uint i, uint j) {
    if ((pc.flags & 1u) != 0u && j > i) return neg_inf();
    if ((pc.flags & 4u) == 0u) return ACC(0);
    uint off = pc.m_off + (n / pc.n1) * pc.ms0 + (n % pc.n1) * pc.ms1 + i * pc.ms2 + j * pc.ms3;
#ifdef MASK_BOOL
    return uint(mask[off]) != 0u ? ACC(0) : neg_inf();
#else
    return ACC(LD(A_DT, mask[off]));
#endif
}

// z_ij: 1 without dropout, else keep_ij / (1 - p)
ACC drop_at(uint n, uint i, uint j) {
    if ((pc.flags & 2u) == 0u) return ACC(1);
    uint64_t idx = (uint64_t(n) * uint64_t(pc.L) + uint64_t(i)) * uint64_t(pc.S) + uint64_t(j);
    uint64_t c = ((uint64_t(pc.off_hi) << 32) | uint64_t(pc.off_lo)) + (idx >> 2);
    uvec4 w = philox4x32(uvec2(pc.seed_lo, pc.seed_hi), uvec2(uint(c), uint(c >> 32)));
    return (w[uint(idx & 3ul)] >> 8) >= pc.threshold ? zs_v() : ACC(0);
}

void main() {
    uint t = gl_LocalInvocationID.x;
    bool by_key = MODE == 1u || MODE == 2u;
    uint rows = by_key ? pc.S : pc.L; // what one invocation owns: keys in modes 1 and 2, queries otherwise
    uint nb = (rows + WG - 1u) / WG;
    ACC sc = scale_v();
    for (uint task = gl_WorkGroupID.x; task < pc.N * nb; task += gl_NumWorkGroups.x) {
        uint n = task / nb, r0 = (task % nb) * WG, r = r0 + t;
        bool valid = r < rows;
        ACC a[DP]; // mode 0: acc; 1: dk; 2: dv; 3: dq
        for (uint e = 0u; e < DP; e++) a[e] = ACC(0);
        if (!by_key) {
            // ---- an invocation per query i = r; keys j staged WG at a time ----
            uint i = r, rend = min(r0 + WG, pc.L);
            uint jend = (pc.flags & 1u) != 0u ? min(pc.S, rend) : pc.S;
            uint qb = pc.q_off + (n * pc.L + (valid ? i : 0u)) * pc.E, ob = (n * pc.L + (valid ? i : 0u)) * pc.Ev;
            ACC m = neg_inf(), l = ACC(0), lse_i = ACC(0), D_i = ACC(0);
            if (MODE == 3u && valid) {
                lse_i = ACC(lse[pc.l_off + n * pc.L + i]);
                for (uint e = 0u; e < pc.Ev; e++)
                    D_i += ACC(LD(A_DT, dout[pc.do_off + ob + e])) * ACC(LD(A_DT, o[pc.o_off + ob + e]));
            }
            for (uint j0 = 0u; j0 < jend; j0 += WG) {
                barrier(); // the previous tile is consumed
                uint js = j0 + t;
                if (js < pc.S) {
                    for (uint e = 0u; e < pc.E; e++)
                        t0[t * DP + e] = ACC(LD(A_DT, k[pc.k_off + (n * pc.S + js) * pc.E + e]));
                    for (uint e = 0u; e < pc.Ev; e++)
                        t1[t * DP + e] = ACC(LD(A_DT, v[pc.v_off + (n * pc.S + js) * pc.Ev + e]));
                }
                barrier();
                if (!valid || (MODE == 3u && lse_i == neg_inf())) continue;
                uint jn = min(WG, jend - j0);
                for (uint jj = 0u; jj < jn; jj++) {
                    uint j = j0 + jj;
                    ACC d = ACC(0);
                    for (uint e = 0u; e < pc.E; e++) d += ACC(LD(A_DT, q[qb + e])) * t0[jj * DP + e];
                    ACC s = d * sc + mask_at(n, i, j);
                    if (s == neg_inf()) continue;
                    if (MODE == 0u) {
                        if (s > m) { // the max grows: rescale the running sums
                            ACC alpha = EXP(m - s);
                            l *= alpha;
                            for (uint e = 0u; e < pc.Ev; e++) a[e] *= alpha;
                            m = s;
                        }
                        ACC p = EXP(s - m);
                        l += p;
                        p *= drop_at(n, i, j);
                        if (p != ACC(0))
                            for (uint e = 0u; e < pc.Ev; e++) a[e] += p * t1[jj * DP + e];
                    } else {
                        ACC p = EXP(s - lse_i), dp = ACC(0), z = drop_at(n, i, j);
                        for (uint e = 0u; e < pc.Ev; e++)
                            dp += ACC(LD(A_DT, dout[pc.do_off + ob + e])) * t1[jj * DP + e];
                        ACC ds = p * (dp * z - D_i) * sc;
                        for (uint e = 0u; e < pc.E; e++) a[e] += ds * t0[jj * DP + e];
                    }
                }
            }
            if (valid && MODE == 0u) {
                ACC inv = l > ACC(0) ? ACC(1) / l : ACC(0);
                for (uint e = 0u; e < pc.Ev; e++) o[pc.o_off + ob + e] = SV(A_DT, a[e] * inv);
                lse[pc.l_off + n * pc.L + i] = LSE_T(l > ACC(0) ? m + LOG(l) : neg_inf());
            }
            if (valid && MODE == 3u)
                for (uint e = 0u; e < pc.E; e++) grad[pc.g_off + (n * pc.L + i) * pc.E + e] = SV(A_DT, a[e]);
        } else {
            // ---- an invocation per key j = r; query rows staged WG at a time (causal: i >= r0 only) ----
            uint j = r, kb = pc.k_off + (n * pc.S + (valid ? j : 0u)) * pc.E;
            uint vb = pc.v_off + (n * pc.S + (valid ? j : 0u)) * pc.Ev;
            for (uint i0 = (pc.flags & 1u) != 0u ? r0 : 0u; i0 < pc.L; i0 += WG) {
                barrier();
                uint is = i0 + t;
                if (is < pc.L) {
                    uint qb = pc.q_off + (n * pc.L + is) * pc.E, ob = (n * pc.L + is) * pc.Ev;
                    ACC D = ACC(0);
                    for (uint e = 0u; e < pc.E; e++) t0[t * DP + e] = ACC(LD(A_DT, q[qb + e]));
                    for (uint e = 0u; e < pc.Ev; e++) {
                        ACC g = ACC(LD(A_DT, dout[pc.do_off + ob + e]));
                        t1[t * DP + e] = g;
                        D += g * ACC(LD(A_DT, o[pc.o_off + ob + e]));
                    }
                    tl[t] = ACC(lse[pc.l_off + n * pc.L + is]);
                    td[t] = D;
                }
                barrier();
                if (!valid) continue;
                uint in_ = min(WG, pc.L - i0);
                for (uint ii = 0u; ii < in_; ii++) {
                    uint i = i0 + ii;
                    if (tl[ii] == neg_inf()) continue; // a row without keys passes no gradient
                    ACC d = ACC(0);
                    for (uint e = 0u; e < pc.E; e++) d += t0[ii * DP + e] * ACC(LD(A_DT, k[kb + e]));
                    ACC s = d * sc + mask_at(n, i, j);
                    if (s == neg_inf()) continue;
                    ACC p = EXP(s - tl[ii]), z = drop_at(n, i, j);
                    if (MODE == 2u) {
                        ACC pz = p * z;
                        for (uint e = 0u; e < pc.Ev; e++) a[e] += pz * t1[ii * DP + e];
                        continue;
                    }
                    ACC dp = ACC(0);
                    for (uint e = 0u; e < pc.Ev; e++) dp += t1[ii * DP + e] * ACC(LD(A_DT, v[vb + e]));
                    ACC ds = p * (dp * z - td[ii]) * sc;
                    for (uint e = 0u; e < pc.E; e++) a[e] += ds * t0[ii * DP + e];
                }
            }
            if (valid) {
                uint len = MODE == 1u ? pc.E : pc.Ev;
                for (uint e = 0u; e < len; e++) grad[pc.g_off + (n * pc.S + j) * len + e] = SV(A_DT, a[e]);
            }
        }
    }
}
