// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// ADD_LAYER_NORM, the residual add and layer_norm of a pre-LN block, over rows
// of D elements (x, r contiguous [rows, D]):
//   s = x + r  (rounded to the dtype, as ADD)
//   mean = sum s / D;  var = sum (s - mean)^2 / D  (two passes, biased, as PyTorch)
//   rstd = 1 / sqrt(var + eps);  y = (s - mean) * rstd * w + b   (w, b [D] optional)
// Bindings: 0 x, 1 r, 2 w, 3 b (dummies when absent), 4 y, 5 s, 6 mean [rows],
// 7 rstd [rows]. One workgroup per row, subgroup reductions; each invocation
// keeps the elements j = t, t + WG, ... through the passes and rereads the s
// it wrote itself. Math in float (double for f64).
// C mirror: vk_pc_add_norm (vk_ops_norm.c). Variants add_layer_norm_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;
#define ACC VT(A_DT)
#include "reduce.glsl"

layout(push_constant) uniform PC {
    uint rows, D, has_w, has_b;
    uint x_off, r_off, w_off, b_off;
    uint y_off, s_off, m_off, rs_off;
    float eps;
} pc;

layout(binding = 0) readonly buffer BX { ST(A_DT) x[]; };
layout(binding = 1) readonly buffer BR { ST(A_DT) res[]; };
layout(binding = 2) readonly buffer BW { ST(A_DT) w[]; };
layout(binding = 3) readonly buffer BB { ST(A_DT) b[]; };
layout(binding = 4) writeonly buffer BY { ST(A_DT) y[]; };
layout(binding = 5) buffer BS { ST(A_DT) s[]; };
layout(binding = 6) writeonly buffer BM { ST(A_DT) mo[]; };
layout(binding = 7) writeonly buffer BRS { ST(A_DT) ro[]; };

void main() {
    uint t = gl_LocalInvocationID.x;
    for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {
        uint sb = pc.s_off + r * pc.D;
        // pass 1: s = x + r, and its mean
        ACC acc = ACC(0);
        for (uint j = t; j < pc.D; j += WG) {
            s[sb + j] = SV(A_DT, LD(A_DT, x[pc.x_off + r * pc.D + j]) + LD(A_DT, res[pc.r_off + r * pc.D + j]));
            acc += LD(A_DT, s[sb + j]); // the rounded sum, as the later passes read it
        }
        ACC mean = wg_reduce(acc, R_ADD) / ACC(pc.D);
        // pass 2: variance
        ACC q = ACC(0);
        for (uint j = t; j < pc.D; j += WG) {
            ACC dx = LD(A_DT, s[sb + j]) - mean;
            q += dx * dx;
        }
        ACC rstd = ACC(1) / sqrt(wg_reduce(q, R_ADD) / ACC(pc.D) + ACC(pc.eps));
        // pass 3: normalize, scale, shift
        for (uint j = t; j < pc.D; j += WG) {
            ACC v = (LD(A_DT, s[sb + j]) - mean) * rstd;
            if (pc.has_w != 0u) v *= LD(A_DT, w[pc.w_off + j]);
            if (pc.has_b != 0u) v += LD(A_DT, b[pc.b_off + j]);
            y[pc.y_off + r * pc.D + j] = SV(A_DT, v);
        }
        if (t == 0u) {
            mo[pc.m_off + r] = SV(A_DT, mean);
            ro[pc.rs_off + r] = SV(A_DT, rstd);
        }
    }
}
