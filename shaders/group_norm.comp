// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// GROUP_NORM over rows (n, g) of D = Cg * S elements (x contiguous [N, C, S],
// C = G * Cg; row r holds channels (r % G) * Cg .. + Cg - 1, S elements each):
//   mean = sum x / D;  var = sum (x - mean)^2 / D  (two passes, biased, as PyTorch)
//   rstd = 1 / sqrt(var + eps);  y = (x - mean) * rstd * w[c] + b[c],  c = (r % G) * Cg + j / S
// Bindings: 0 x, 1 w, 2 b ([C], dummies when absent), 3 y, 4 mean [rows], 5 rstd [rows].
// One workgroup per row, subgroup reductions. Math in float (double for f64).
// C mirror: vk_pc_group_norm (vk_ops_norm.c). Variants group_norm_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;
#define ACC VT(A_DT)
#include "reduce.glsl"

layout(push_constant) uniform PC {
    uint rows, D, has_w, has_b;
    uint x_off, w_off, b_off, y_off;
    uint m_off, r_off, G, Cg;
    uint S;
    float eps, eps_lo; // eps = eps + eps_lo to double precision (a group of 3 with var 1e-3 shows float's eps)
} pc;

layout(binding = 0) readonly buffer BX { ST(A_DT) x[]; };
layout(binding = 1) readonly buffer BW { ST(A_DT) w[]; };
layout(binding = 2) readonly buffer BB { ST(A_DT) b[]; };
layout(binding = 3) writeonly buffer BY { ST(A_DT) y[]; };
layout(binding = 4) writeonly buffer BM { ST(A_DT) mo[]; };
layout(binding = 5) writeonly buffer BR { ST(A_DT) ro[]; };

void main() {
    uint t = gl_LocalInvocationID.x;
    for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {
        uint xb = pc.x_off + r * pc.D, c0 = (r % pc.G) * pc.Cg;
        ACC s = ACC(0);
        for (uint j = t; j < pc.D; j += WG) s += LD(A_DT, x[xb + j]);
        ACC mean = wg_reduce(s, R_ADD) / ACC(pc.D);
        ACC q = ACC(0);
        for (uint j = t; j < pc.D; j += WG) {
            ACC dx = LD(A_DT, x[xb + j]) - mean;
            q += dx * dx;
        }
        ACC rstd = ACC(1) / sqrt(wg_reduce(q, R_ADD) / ACC(pc.D) + (ACC(pc.eps) + ACC(pc.eps_lo)));
        for (uint j = t; j < pc.D; j += WG) {
            ACC v = (LD(A_DT, x[xb + j]) - mean) * rstd;
            uint c = c0 + j / pc.S;
            if (pc.has_w != 0u) v *= LD(A_DT, w[pc.w_off + c]);
            if (pc.has_b != 0u) v += LD(A_DT, b[pc.b_off + c]);
            y[pc.y_off + r * pc.D + j] = SV(A_DT, v);
        }
        if (t == 0u) {
            mo[pc.m_off + r] = SV(A_DT, mean);
            ro[pc.r_off + r] = SV(A_DT, rstd);
        }
    }
}
