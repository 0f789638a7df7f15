// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// SOFTMAX / LOG_SOFTMAX over the last dim of a contiguous [rows, C] tensor.
// in (binding 0), out (binding 1), dtype A_DT, math in float (double for f64,
// with math64.glsl). One workgroup per row (grid-stride over rows):
//   m = max_j x_j                      (the shift keeps exp() finite)
//   s = sum_j exp(x_j - m)
//   softmax y_j = exp(x_j - m) / s;  log_softmax y_j = x_j - m - log(s)
// Invocation t keeps x_j and exp(x_j - m) of j = t + k WG, k < PER, in registers, so rows of up
// to PER * WG elements are read once (the encoder sizes WG so that W3's rows of 256 are); longer
// rows read the rest again in each step.
// OP (specialization constant 1): 0 softmax, 1 log_softmax.
// C mirror: vk_pc_rows (vk_ops_softmax.c). Variants softmax_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;
#if A_DT == DT_F64
#include "math64.glsl"
#define ACC double
#define EXP(x) d_exp(x)
#define LOG(x) d_log(x)
#else
#define ACC float
#define EXP(x) exp(x)
#define LOG(x) log(x)
#endif
#include "reduce.glsl"
#define PER 4u

layout(push_constant) uniform PC {
    uint rows, C, in_off, out_off;
} pc;

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) writeonly buffer BO { ST(A_DT) o[]; };

void main() {
    uint t = gl_LocalInvocationID.x;
    for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {
        uint ib = pc.in_off + r * pc.C, ob = pc.out_off + r * pc.C;
        ACC x[PER], e[PER], m = ACC(uintBitsToFloat(0xFF800000u));
        for (uint k = 0u; k < PER; k++) {
            uint j = t + k * WG;
            x[k] = j < pc.C ? ACC(LD(A_DT, a[ib + j])) : m;
            m = max(m, x[k]);
        }
        for (uint j = t + PER * WG; j < pc.C; j += WG) m = max(m, ACC(LD(A_DT, a[ib + j])));
        m = wg_reduce(m, R_MAX);
        ACC s = ACC(0);
        for (uint k = 0u; k < PER; k++) {
            e[k] = EXP(x[k] - m);
            if (t + k * WG < pc.C) s += e[k];
        }
        for (uint j = t + PER * WG; j < pc.C; j += WG) s += EXP(ACC(LD(A_DT, a[ib + j])) - m);
        s = wg_reduce(s, R_ADD);
        ACC ls = LOG(s), inv = ACC(1) / s;
        for (uint k = 0u; k < PER; k++) {
            uint j = t + k * WG;
            if (j < pc.C) o[ob + j] = SV(A_DT, OP == 0u ? e[k] * inv : x[k] - m - ls);
        }
        for (uint j = t + PER * WG; j < pc.C; j += WG) {
            ACC y = ACC(LD(A_DT, a[ib + j])) - m;
            o[ob + j] = SV(A_DT, OP == 0u ? EXP(y) * inv : y - ls);
        }
    }
}
