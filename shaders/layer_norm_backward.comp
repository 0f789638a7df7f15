// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// LAYER_NORM_BACKWARD over rows of D elements (all contiguous; dy, x, ds, dx [rows, D]; w, dw, db [D];
// mean, rstd [rows]), with xhat = (x - mean) rstd and g = dy w (w absent: 1):
//   MODE 0, workgroup c owns the rows [c q, c q + q) (pc.q), one after another:
//     pass 1: s1 = sum g / D, s2 = sum g xhat / D   (subgroup reductions)
//     pass 2: dx = rstd (g - s1 - xhat s2) + ds     (ds: add_layer_norm's residual gradient, optional)
//     and, when dw or db is wanted (pc.has_o2), the chunk's column partials in the same pass (dy and x
//     read once): part[c][j] = sum over its rows of dy xhat, part[c][D + j] = sum of dy (an f32 scratch
//     [chunks, 2 D]; f64: double). Where CPT = ceil(D / WG) <= 8 the row's dy, x and the partials stay
//     in registers; CPT 0 (longer rows) reads the row twice and adds into the scratch in place.
//   MODE 1, dw[j] = sum over c of part[c][j], db[j] = sum of part[c][D + j], c in order (deterministic):
//     a workgroup owns TX = 8 of the 2 D scratch columns at a time, TY = WG / 8 invocations fold chunks
//     c = y, y + TY, ..., then the TY partials combine in order through shared memory.
// Bindings: 0 dy (MODE 1: the scratch), 1 x, 2 w, 3 mean, 4 rstd, 5 ds, 6 out (MODE 0: dx; MODE 1: dw),
// 7 out2 (MODE 0: the scratch; MODE 1: db); dummies when absent. Math in float (double for f64).
// C mirror: vk_pc_norm_backward (vk_ops_norm.c). Variants layer_norm_backward_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint MODE = 0;
layout(constant_id = 2) const uint CPT = 0;
layout(local_size_x_id = 0) in;
#define ACC VT(A_DT)
#include "reduce.glsl"
#define CPT_MAX 8
#define TX 8u

layout(push_constant) uniform PC {
    uint rows, D, has_w, has_ds;
    uint has_o, has_o2, dy_off, x_off;
    uint w_off, m_off, r_off, ds_off;
    uint o_off, o2_off, q, chunks;
} pc;

layout(binding = 0) readonly buffer BDY { ST(A_DT) dy[]; };
layout(binding = 0) readonly buffer BPI { ACC pin[]; }; // MODE 1
layout(binding = 1) readonly buffer BX { ST(A_DT) x[]; };
layout(binding = 2) readonly buffer BW { ST(A_DT) w[]; };
layout(binding = 3) readonly buffer BM { ST(A_DT) mean[]; };
layout(binding = 4) readonly buffer BR { ST(A_DT) rstd[]; };
layout(binding = 5) readonly buffer BDS { ST(A_DT) ds[]; };
layout(binding = 6) writeonly buffer BO { ST(A_DT) o[]; };
layout(binding = 7) writeonly buffer BO2 { ST(A_DT) o2[]; };
layout(binding = 7) buffer BP { ACC part[]; }; // MODE 0

shared ACC col_sh[WG];

ACC w_at(uint j) { return pc.has_w != 0u ? LD(A_DT, w[pc.w_off + j]) : ACC(1); }

void rows_registers(uint t, uint r0, uint r1) {
    ACC pw[CPT_MAX], pb[CPT_MAX], wv[CPT_MAX], gv[CPT_MAX], xh[CPT_MAX];
    for (uint k = 0u; k < CPT; k++) {
        uint j = t + k * WG;
        pw[k] = ACC(0), pb[k] = ACC(0), wv[k] = j < pc.D ? w_at(j) : ACC(0);
    }
    for (uint r = r0; r < r1; r++) {
        uint base = r * pc.D;
        ACC m = LD(A_DT, mean[pc.m_off + r]), rs = LD(A_DT, rstd[pc.r_off + r]), s1 = ACC(0), s2 = ACC(0);
        for (uint k = 0u; k < CPT; k++) { // pass 1
            uint j = t + k * WG;
            ACC d = ACC(0);
            xh[k] = ACC(0);
            if (j < pc.D) d = LD(A_DT, dy[pc.dy_off + base + j]), xh[k] = (LD(A_DT, x[pc.x_off + base + j]) - m) * rs;
            pw[k] += d * xh[k];
            pb[k] += d;
            gv[k] = d * wv[k];
            s1 += gv[k];
            s2 += gv[k] * xh[k];
        }
        s1 = wg_reduce(s1, R_ADD) / ACC(pc.D);
        s2 = wg_reduce(s2, R_ADD) / ACC(pc.D);
        for (uint k = 0u; k < CPT; k++) { // pass 2
            uint j = t + k * WG;
            if (j >= pc.D) continue;
            ACC e = rs * (gv[k] - s1 - xh[k] * s2);
            if (pc.has_ds != 0u) e += LD(A_DT, ds[pc.ds_off + base + j]);
            o[pc.o_off + base + j] = SV(A_DT, e);
        }
    }
    if (pc.has_o2 == 0u) return;
    uint pbase = gl_WorkGroupID.x * 2u * pc.D;
    for (uint k = 0u; k < CPT; k++) {
        uint j = t + k * WG;
        if (j < pc.D) part[pbase + j] = pw[k], part[pbase + pc.D + j] = pb[k];
    }
}

void rows_memory(uint t, uint r0, uint r1) {
    uint pbase = gl_WorkGroupID.x * 2u * pc.D;
    for (uint r = r0; r < r1; r++) {
        uint base = r * pc.D;
        ACC m = LD(A_DT, mean[pc.m_off + r]), rs = LD(A_DT, rstd[pc.r_off + r]), s1 = ACC(0), s2 = ACC(0);
        for (uint j = t; j < pc.D; j += WG) { // pass 1
            ACC g = LD(A_DT, dy[pc.dy_off + base + j]) * w_at(j), xh = (LD(A_DT, x[pc.x_off + base + j]) - m) * rs;
            s1 += g;
            s2 += g * xh;
        }
        s1 = wg_reduce(s1, R_ADD) / ACC(pc.D);
        s2 = wg_reduce(s2, R_ADD) / ACC(pc.D);
        for (uint j = t; j < pc.D; j += WG) { // pass 2, and the partials (each j only ever this invocation's)
            ACC d = LD(A_DT, dy[pc.dy_off + base + j]), xh = (LD(A_DT, x[pc.x_off + base + j]) - m) * rs;
            ACC e = rs * (d * w_at(j) - s1 - xh * s2);
            if (pc.has_ds != 0u) e += LD(A_DT, ds[pc.ds_off + base + j]);
            o[pc.o_off + base + j] = SV(A_DT, e);
            if (pc.has_o2 == 0u) continue;
            bool first = r == r0;
            part[pbase + j] = (first ? ACC(0) : part[pbase + j]) + d * xh;
            part[pbase + pc.D + j] = (first ? ACC(0) : part[pbase + pc.D + j]) + d;
        }
    }
}

void main() {
    uint t = gl_LocalInvocationID.x;
    if (MODE == 0u) {
        uint r0 = gl_WorkGroupID.x * pc.q, r1 = min(pc.rows, r0 + pc.q);
        if (CPT != 0u)
            rows_registers(t, r0, r1);
        else
            rows_memory(t, r0, r1);
        return;
    }
    uint x = t % TX, y = t / TX, TY = WG / TX, n = 2u * pc.D;
    for (uint c0 = gl_WorkGroupID.x * TX; c0 < n; c0 += gl_NumWorkGroups.x * TX) {
        uint c = c0 + x;
        ACC s = ACC(0);
        if (c < n)
            for (uint k = y; k < pc.chunks; k += TY) s += pin[k * n + c];
        col_sh[t] = s;
        barrier();
        if (y == 0u && c < n) {
            for (uint k = 1u; k < TY; k++) s += col_sh[k * TX + x];
            if (c < pc.D) {
                if (pc.has_o != 0u) o[pc.o_off + c] = SV(A_DT, s);
            } else if (pc.has_o2 != 0u) {
                o2[pc.o2_off + c - pc.D] = SV(A_DT, s);
            }
        }
        barrier();
    }
}
