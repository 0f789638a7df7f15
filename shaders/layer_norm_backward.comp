// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// LAYER_NORM_BACKWARD over rows of D elements (all contiguous; dy, x, ds, dx [rows, D]; w, dw, db [D];
// mean, rstd [rows]), with xhat = (x - mean) rstd and g = dy w (w absent: 1):
//   MODE 0, one workgroup per row:
//     pass 1: s1 = sum g / D, s2 = sum g xhat / D   (subgroup reductions)
//     pass 2: dx = rstd (g - s1 - xhat s2) + ds     (ds: add_layer_norm's residual gradient, optional)
//   MODE 1, one invocation per column j, rows in order: dw[j] = sum dy xhat, db[j] = sum dy
// Bindings: 0 dy, 1 x, 2 w, 3 mean, 4 rstd, 5 ds, 6 out (MODE 0: dx; MODE 1: dw), 7 out2 (MODE 1: db);
// dummies when absent. Math in float (double for f64).
// C mirror: vk_pc_norm_backward (vk_ops_norm.c). Variants layer_norm_backward_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint MODE = 0;
layout(local_size_x_id = 0) in;
#define ACC VT(A_DT)
#include "reduce.glsl"

layout(push_constant) uniform PC {
    uint rows, D, has_w, has_ds;
    uint has_o, has_o2, dy_off, x_off;
    uint w_off, m_off, r_off, ds_off;
    uint o_off, o2_off;
} pc;

layout(binding = 0) readonly buffer BDY { ST(A_DT) dy[]; };
layout(binding = 1) readonly buffer BX { ST(A_DT) x[]; };
layout(binding = 2) readonly buffer BW { ST(A_DT) w[]; };
layout(binding = 3) readonly buffer BM { ST(A_DT) mean[]; };
layout(binding = 4) readonly buffer BR { ST(A_DT) rstd[]; };
layout(binding = 5) readonly buffer BDS { ST(A_DT) ds[]; };
layout(binding = 6) writeonly buffer BO { ST(A_DT) o[]; };
layout(binding = 7) writeonly buffer BO2 { ST(A_DT) o2[]; };

ACC g_at(uint i, uint j) {
    ACC g = LD(A_DT, dy[pc.dy_off + i]);
    return pc.has_w != 0u ? g * LD(A_DT, w[pc.w_off + j]) : g;
}

void main() {
    uint t = gl_LocalInvocationID.x;
    if (MODE == 0u) {
        for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {
            uint base = r * pc.D;
            ACC m = LD(A_DT, mean[pc.m_off + r]), rs = LD(A_DT, rstd[pc.r_off + r]), s1 = ACC(0), s2 = ACC(0);
            for (uint j = t; j < pc.D; j += WG) { // pass 1
                ACC g = g_at(base + j, j), xh = (LD(A_DT, x[pc.x_off + base + j]) - m) * rs;
                s1 += g;
                s2 += g * xh;
            }
            s1 = wg_reduce(s1, R_ADD) / ACC(pc.D);
            s2 = wg_reduce(s2, R_ADD) / ACC(pc.D);
            for (uint j = t; j < pc.D; j += WG) { // pass 2
                ACC g = g_at(base + j, j), xh = (LD(A_DT, x[pc.x_off + base + j]) - m) * rs;
                ACC e = rs * (g - s1 - xh * s2);
                if (pc.has_ds != 0u) e += LD(A_DT, ds[pc.ds_off + base + j]);
                o[pc.o_off + base + j] = SV(A_DT, e);
            }
        }
    } else {
        uint j = gl_GlobalInvocationID.x;
        if (j >= pc.D) return;
        ACC aw = ACC(0), ab = ACC(0);
        for (uint r = 0u; r < pc.rows; r++) {
            ACC g = LD(A_DT, dy[pc.dy_off + r * pc.D + j]);
            ACC xh = (LD(A_DT, x[pc.x_off + r * pc.D + j]) - LD(A_DT, mean[pc.m_off + r])) * LD(A_DT, rstd[pc.r_off + r]);
            aw += g * xh;
            ab += g;
        }
        if (pc.has_o != 0u) o[pc.o_off + j] = SV(A_DT, aw);
        if (pc.has_o2 != 0u) o2[pc.o2_off + j] = SV(A_DT, ab);
    }
}
