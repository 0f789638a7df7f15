// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// SOFTMAX_BACKWARD / LOG_SOFTMAX_BACKWARD over the last dim of contiguous [rows, C] tensors:
//   softmax:     dx_j = y_j (dy_j - s),     s = sum_j dy_j y_j
//   log_softmax: dx_j = dy_j - exp(y_j) s,  s = sum_j dy_j
// dy (binding 0), y (binding 1), dx (binding 2), dtype A_DT, math in float
// (double for f64, with math64.glsl). One workgroup per row (grid-stride over
// rows); invocation t keeps elements t + k WG, k < PER, in registers between
// the sum and the write, so rows of up to PER * WG elements are read once
// (the encoder sizes WG so that W3's rows of 256 are).
// OP (specialization constant 1): 0 softmax, 1 log_softmax.
// C mirror: vk_pc_rows_bw (vk_ops_softmax.c). Variants softmax_backward_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;
#if A_DT == DT_F64
#include "math64.glsl"
#define ACC double
#define EXP(x) d_exp(x)
#else
#define ACC float
#define EXP(x) exp(x)
#endif
#include "reduce.glsl"
#define PER 4u

layout(push_constant) uniform PC {
    uint rows, C, dy_off, y_off, dx_off;
} pc;

layout(binding = 0) readonly buffer BD { ST(A_DT) dy[]; };
layout(binding = 1) readonly buffer BY { ST(A_DT) y[]; };
layout(binding = 2) writeonly buffer BO { ST(A_DT) dx[]; };

ACC term(ACC g, ACC v) { return OP == 0u ? g * v : g; }
ACC grad(ACC g, ACC v, ACC s) { return OP == 0u ? v * (g - s) : g - EXP(v) * s; }

void main() {
    uint t = gl_LocalInvocationID.x;
    for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {
        uint db = pc.dy_off + r * pc.C, yb = pc.y_off + r * pc.C, ob = pc.dx_off + r * pc.C;
        ACC g[PER], v[PER], s = ACC(0);
        for (uint k = 0u; k < PER; k++) {
            uint j = t + k * WG;
            g[k] = ACC(0), v[k] = ACC(0);
            if (j < pc.C) {
                g[k] = ACC(LD(A_DT, dy[db + j]));
                v[k] = ACC(LD(A_DT, y[yb + j]));
                s += term(g[k], v[k]);
            }
        }
        for (uint j = t + PER * WG; j < pc.C; j += WG) s += term(ACC(LD(A_DT, dy[db + j])), ACC(LD(A_DT, y[yb + j])));
        s = wg_reduce(s, R_ADD);
        for (uint k = 0u; k < PER; k++) {
            uint j = t + k * WG;
            if (j < pc.C) dx[ob + j] = SV(A_DT, grad(g[k], v[k], s));
        }
        for (uint j = t + PER * WG; j < pc.C; j += WG)
            dx[ob + j] = SV(A_DT, grad(ACC(LD(A_DT, dy[db + j])), ACC(LD(A_DT, y[yb + j])), s));
    }
}
