// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// AMP_UNSCALE, in place, one element per invocation (grid-stride), as the CPU
// backend (src/backend_cpu/cpu_amp.c):
//   found[0] = 1 if any g[i] is inf or NaN (checked before the product)
//   g[i] *= inv_scale
// Bindings: 0 grad (read and written), 1 found_inf (f32 [1], only written:
// every writer stores 1.0, so the race is benign). inv_scale travels as a
// 32-bit float, or as a word pair for f64.
// C mirror: vk_pc_amp (vk_ops_optim.c). Variants amp_unscale_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n, off_g, off_f;
    uint k[2];
} pc;

layout(binding = 0) buffer BG { ST(A_DT) g[]; };
layout(binding = 1) writeonly buffer BF { float found[]; };

#define T VT(A_DT)
#if A_DT == DT_F64
T inv_scale() { return packDouble2x32(uvec2(pc.k[0], pc.k[1])); }
#else
T inv_scale() { return uintBitsToFloat(pc.k[0]); }
#endif

void main() {
    bool bad = false;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += gl_NumWorkGroups.x * WG) {
        T x = LD(A_DT, g[pc.off_g + i]);
        bad = bad || isnan(x) || isinf(x);
        g[pc.off_g + i] = SV(A_DT, x * inv_scale());
    }
    if (bad) found[pc.off_f] = 1.0;
}
