// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// LINEAR_GELU's epilogue, one pass after the matmul wrote h = x w^T (h, y
// contiguous [rows, N]):
//   h += b      (b [N] optional; rounded to the dtype, as ADD)
//   y = gelu(h) (erf form h Phi(h), or the tanh form when pc.tanh_form)
// Bindings: 0 h (read and written), 1 b (a dummy when absent), 2 y. Grid-stride
// loop over the elements; math in float (double for f64), as unary.comp.
// C mirror: vk_pc_bias_gelu (vk_ops_matmul.c). Variants bias_gelu_<float dt>.
#include "types.glsl"
#if A_DT == DT_F64
#define MATH64
#endif
#include "math.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n, N, has_b, tanh_form;
    uint h_off, b_off, y_off;
} pc;

layout(binding = 0) buffer BH { ST(A_DT) h[]; };
layout(binding = 1) readonly buffer BB { ST(A_DT) b[]; };
layout(binding = 2) writeonly buffer BY { ST(A_DT) y[]; };

#define V VT(A_DT)

void main() {
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += gl_NumWorkGroups.x * WG) {
        V v = LD(A_DT, h[pc.h_off + i]);
        if (pc.has_b != 0u) {
            h[pc.h_off + i] = SV(A_DT, v + LD(A_DT, b[pc.b_off + i % pc.N]));
            v = LD(A_DT, h[pc.h_off + i]); // the rounded sum, as the GELU pass of ADD then GELU reads it
        }
        y[pc.y_off + i] = SV(A_DT, pc.tanh_form != 0u ? gelu_tanh(v) : v * t_phi_cdf(v));
    }
}
