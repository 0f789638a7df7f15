#version 450
#extension GL_GOOGLE_include_directive : require
// The heads' keys of the bf16 cooperative-matrix attention (attention_coopmat.glsl, vk_ops_attention.c): for each
// slice n < N of x (elements x_off + n len .. + len; x_off and len multiples of 8),
//   keys[k_off + n k_zs] = max over the slice of the finite |x| as bf16 magnitude bits (x & 0x7FFF, ordered as |x|
//   is; inf and NaN count as 0),
// by atomicMax into keys, which the host zeroes first. A workgroup reads CH uvec4 (8 CH elements) of a slice per
// chunk, 8 elements a load; grid (chunks, slices), both strided over when larger.
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC { uint N, len, x_off, k_off, k_zs; } pc;
layout(binding = 0) readonly buffer BX { uvec4 x4[]; };
layout(binding = 1) buffer BK { uint keys[]; };

const uint CH = 4u * WG;
shared uint smax;

// the largest finite bf16 magnitude of the two in w
uint amax2(uint w) {
    uint a = w & 0x7FFFu, b = (w >> 16) & 0x7FFFu;
    return max(a < 0x7F80u ? a : 0u, b < 0x7F80u ? b : 0u);
}

void main() {
    uint t = gl_LocalInvocationID.x, l8 = pc.len / 8u, nch = (l8 + CH - 1u) / CH;
    for (uint n = gl_WorkGroupID.y; n < pc.N; n += gl_NumWorkGroups.y)
        for (uint ch = gl_WorkGroupID.x; ch < nch; ch += gl_NumWorkGroups.x) {
            if (t == 0u) smax = 0u;
            barrier();
            uint m = 0u;
            for (uint i = ch * CH + t; i < min(l8, ch * CH + CH); i += WG) {
                uvec4 w = x4[pc.x_off / 8u + n * l8 + i];
                [[unroll]] for (uint h = 0u; h < 4u; h++) m = max(m, amax2(w[h]));
            }
            if (m != 0u) atomicMax(smax, m);
            barrier();
            if (t == 0u && smax != 0u) atomicMax(keys[pc.k_off + n * pc.k_zs], smax);
        }
}
